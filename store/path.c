/* path.c - where the store lives, and creating its directory privately.
 * See store.h. */
#include "store.h"
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

int st_owner_ok(const struct stat *st)
{
	return st->st_uid == geteuid() || st->st_uid == 0;
}

enum core_status store_trust_dir(const char *path, const char *what, unsigned flags,
                                 struct stat *out, struct core_err *e)
{
	struct stat st;
	enum core_status rc = CORE_OK;
	if (((flags & STORE_DIR_NOFOLLOW) ? lstat(path, &st) : stat(path, &st)) < 0)
		return core_fail_sys(e, "cannot open %s '%s'", what, path);
	if (out)
		*out = st;
	if (S_ISLNK(st.st_mode))
		rc = core_fail(e, CORE_ESYS, "refusing %s '%s': it is a symlink (make it a "
		               "directory of its own: agentkit never follows a link there)",
		               what, path);
	else if (!st_owner_ok(&st))
		rc = core_fail(e, CORE_ESYS, "refusing %s '%s': it belongs to uid %ld, not to "
		               "you (uid %ld); use a directory of your own", what, path,
		               (long)st.st_uid, (long)geteuid());
	else if (st.st_mode & 022)
		rc = core_fail(e, CORE_ESYS, "refusing %s '%s': it is writable by %s (mode "
		               "%04o); fix it with: chmod 700 '%s'", what, path,
		               (st.st_mode & 022) == 022 ? "group and others"
		               : st.st_mode & 002 ? "others" : "its group",
		               (unsigned)(st.st_mode & 07777), path);
	if (rc != CORE_OK && e)
		e->sys = EACCES;
	return rc;
}
