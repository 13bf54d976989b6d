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

/* The end of a keyword value starting at v: its closing quote's place for
 * a quoted one (libpq's 'value', with \' inside), else the first of "&",
 * white space or the end. */
static const char *value_end(const char *v)
{
	if (*v == '\'') {
		for (v++; *v && *v != '\''; v++)
			if (*v == '\\' && v[1])
				v++;
		return v;
	}
	return v + strcspn(v, "& \t\n\r\f\v");
}

int store_location_password(const char *loc, size_t *at, size_t *len)
{
	static const char kw[] = "password=";
	const char *best = NULL, *best_end = NULL, *from = loc + *at, *sep = strstr(loc, "://");
	/* The URL's userinfo password: as libpq reads "USER:PASSWORD@", the
	 * authority up to the first '@' or '/'. */
	if (sep && sep > loc && !memchr(loc, '/', (size_t)(sep - loc))) {
		const char *a = sep + 3, *end = a + strcspn(a, "@/");
		const char *colon = *end == '@' ? memchr(a, ':', (size_t)(end - a)) : NULL;
		if (colon && colon + 1 < end && colon + 1 >= from) {
			best = colon + 1;
			best_end = end;
		}
	}
	/* The first non-empty "password=" value at or after from, the keyword
	 * at the start or after '?', '&' or white space. */
	for (const char *k = strstr(loc, kw); k && (!best || k < best); k = strstr(k + 1, kw)) {
		const char *v = k + sizeof kw - 1, *end;
		if (k != loc && !strchr("?& \t\n\r\f\v", k[-1]))
			continue;
		end = value_end(v);
		if (*v == '\'') {
			v++;
			if (end == v)
				continue;
		}
		if (end > v && v >= from) {
			best = v;
			best_end = end;
			break;
		}
	}
	if (!best)
		return 0;
	*at = (size_t)(best - loc);
	*len = (size_t)(best_end - best);
	return 1;
}

int store_secret_variable(const char *entry)
{
	static const char *const names[] = { "PGPASSWORD", "PGPASSFILE" };
	static const char store[] = "AGENTKIT_STORE=";
	size_t at = 0, len, n = strcspn(entry, "=");
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strlen(names[i]) == n && !strncmp(names[i], entry, n))
			return 1;
	return !strncmp(entry, store, sizeof store - 1) &&
	       store_location_password(entry + sizeof store - 1, &at, &len);
}
