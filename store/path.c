/* path.c - where the store lives, and creating its directory privately.
 * See store.h. */
#include "store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum core_status store_default_path(const char *path, struct core_buf *out,
                                    struct core_err *e)
{
	const char *v;
	enum core_status st;
	if (path) {
		if (!*path)
			return core_fail(e, CORE_EUSAGE, "empty store path");
		st = core_buf_adds(out, path);
	} else if ((v = getenv("AGENTKIT_STORE")) && *v) {
		st = core_buf_adds(out, v);
	} else if ((v = getenv("XDG_STATE_HOME")) && *v == '/') {
		st = core_buf_addf(out, "%s/agentkit/store", v);
	} else if ((v = getenv("HOME")) && *v) {
		st = core_buf_addf(out, "%s/.local/state/agentkit/store", v);
	} else {
		return core_fail(e, CORE_ESYS,
		                 "no store location: set --store, AGENTKIT_STORE or HOME");
	}
	if (st != CORE_OK)
		return core_fail(e, st, "store path: %s", core_strerror(st));
	return CORE_OK;
}

enum core_status store_open_default(const char *path, unsigned flags,
                                    struct store **out, struct core_err *e)
{
	struct core_buf dir = CORE_BUF_INIT(4096);
	enum core_status st = store_default_path(path, &dir, e);
	if (st == CORE_OK)
		st = store_open_flags(dir.p, flags, out, e);
	core_buf_release(&dir);
	return st;
}

enum core_status store_logs_dir(const char *location, struct core_buf *out,
                                struct core_err *e)
{
	const char *v;
	enum core_status st;
	if (store_location_is_dir(location))
		st = core_buf_addf(out, "%s/logs", location);
	else if ((v = getenv("XDG_STATE_HOME")) && *v == '/')
		st = core_buf_addf(out, "%s/agentkit/logs", v);
	else if ((v = getenv("HOME")) && *v)
		st = core_buf_addf(out, "%s/.local/state/agentkit/logs", v);
	else
		return core_fail(e, CORE_ESYS, "no place for worker logs: set HOME");
	return st ? core_fail(e, st, "worker log path: %s", core_strerror(st)) : CORE_OK;
}
