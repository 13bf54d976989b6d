/*
 * store.c - the store interface over its backends: each function checks
 * its arguments once, then calls the handle's backend.  See store.h for
 * the interface and backend.h for what a backend implements.
 */
#include "backend.h"
#include "internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../libcore/base/http.h"
#include "../libcore/base/json.h"
#include "../libcore/base/utf8.h"
#include "../libcore/base/util.h"

/* The backends this agentkit has: one row each, its extern beside it
 * (each defined in its folder's backend.c, store/NAME/). */
extern const struct store_backend store_lmdb_backend;
extern const struct store_backend store_pg_backend;
static const struct store_backend *const backends[] = {
	&store_lmdb_backend,
	&store_pg_backend,
};
#define NBACKENDS (sizeof backends / sizeof backends[0])

/* The length of location's URL scheme ("postgresql" of
 * "postgresql://..."; RFC 3986's syntax), or 0 when it is not a URL. */
static size_t url_scheme(const char *location)
{
	size_t n = 0;
	if (!isalpha((unsigned char)location[0]))
		return 0;
	while (isalnum((unsigned char)location[n]) || location[n] == '+' ||
	       location[n] == '-' || location[n] == '.')
		n++;
	return strncmp(location + n, "://", 3) ? 0 : n;
}

static int takes_scheme(const struct store_backend *b, const char *scheme, size_t n)
{
	const char *const *p;
	for (p = b->schemes; p && *p; p++)
		if (strlen(*p) == n && !strncasecmp(*p, scheme, n))
			return 1;
	return 0;
}

/* A URL no backend takes: the message names the backends there are (the
 * URL redacted: a connection URL may carry a password). */
static enum core_status no_backend(const char *location, struct core_err *e)
{
	char url[256], names[128] = "";
	size_t i, len = 0;
	core_url_redact(location, url, sizeof url);
	for (i = 0; i < NBACKENDS && len < sizeof names; i++)
		len += (size_t)snprintf(names + len, sizeof names - len, "%s%s",
		                        i ? (i + 1 < NBACKENDS ? ", " : " and ") : "",
		                        backends[i]->name);
	return core_fail(e, CORE_EUSAGE, "'%s' is not a store directory: this agentkit "
	                 "has the %s backend%s", url, names, NBACKENDS > 1 ? "s" : " only");
}

static int takes_location(const struct store_backend *b, const char *location)
{
	const char *const *p;
	for (p = b->locations; p && *p; p++)
		if (!strcasecmp(*p, location))
			return 1;
	return 0;
}

/* The backend for location: the one taking it whole ("pg:"), the one
 * taking its URL scheme, or for a path the one without schemes. */
static enum core_status choose_backend(const char *location,
                                       const struct store_backend **out,
                                       struct core_err *e)
{
	size_t n = url_scheme(location), i;
	for (i = 0; i < NBACKENDS; i++)
		if (takes_location(backends[i], location)) {
			*out = backends[i];
			return CORE_OK;
		}
	for (i = 0; i < NBACKENDS; i++)
		if (n ? takes_scheme(backends[i], location, n) : !backends[i]->schemes) {
			*out = backends[i];
			return CORE_OK;
		}
	if (n)
		return no_backend(location, e);
	return core_fail(e, CORE_EUSAGE, "'%s': this agentkit has no store backend for "
	                 "directories", location);
}

int store_location_is_dir(const char *location)
{
	for (size_t i = 0; i < NBACKENDS; i++)
		if (takes_location(backends[i], location))
			return 0;
	return !url_scheme(location);
}

enum core_status store_open_flags(const char *path, unsigned flags,
                                  struct store **out, struct core_err *e)
{
	const struct store_backend *b = NULL;
	enum core_status st;
	*out = NULL;
	if ((st = choose_backend(path, &b, e)) != CORE_OK ||
	    (st = b->open(path, flags, out, e)) != CORE_OK)
		return st;
	(*out)->backend = b;
	(*out)->pid = getpid();
	(*out)->deadline = 0;
	return CORE_OK;
}

void store_set_deadline(struct store *s, int64_t deadline_ms)
{
	if (s)
		s->deadline = deadline_ms > 0 ? deadline_ms : 0;
}

int store_can_append(const struct store *s)
{
	return s && s->backend->append;
}

void store_park(struct store *s)
{
	if (s && s->pid == getpid() && s->backend->park)
		s->backend->park(s);
}

int64_t store_now_ns(const struct store *s)
{
	return core_now_ns() + (s ? s->clock_offset_ns : 0);
}

enum core_status store_open(const char *path, struct store **out,
                            struct core_err *e)
{
	return store_open_flags(path, 0, out, e);
}

void store_close(struct store *s)
{
	if (s)
		s->backend->close(s);
}

enum core_status st_check_handle(struct store *s, struct core_err *e)
{
	if (!s)
		return core_fail(e, CORE_EPRECONDITION, "store is not open");
	if (s->pid != getpid())
		return core_fail(e, CORE_EPRECONDITION,
		                 "store handle used after fork (re-open it in the child)");
	return CORE_OK;
}

/* ---- reads ---- */

enum core_status store_get(struct store *s, const char *snapshot_id,
                           unsigned flags, json_t **row, struct core_err *e)
{
	enum core_status st;
	*row = NULL;
	if ((st = st_check_handle(s, e)) != CORE_OK ||
	    (st = store_check_id(snapshot_id, "snapshot ID", e)) != CORE_OK)
		return st;
	st = s->backend->get(s, snapshot_id, flags, row, e);
	if (st == CORE_ENOTFOUND)
		return core_fail(e, st, "snapshot '%s' not found", snapshot_id);
	return st;
}

enum core_status store_message_texts(struct store *s, const char *snapshot_id, size_t n,
                                     store_text_fn fn, void *ctx, struct core_err *e)
{
	enum core_status st;
	if ((st = st_check_handle(s, e)) != CORE_OK ||
	    (st = store_check_id(snapshot_id, "snapshot ID", e)) != CORE_OK)
		return st;
	if (!s->backend->append)
		return core_fail(e, CORE_EINVAL, "the %s store cannot read messages as text",
		                 s->backend->name);
	st = s->backend->message_texts(s, snapshot_id, n, fn, ctx, e);
	if (st == CORE_ENOTFOUND)
		return core_fail(e, st, "snapshot '%s' not found", snapshot_id);
	return st;
}

enum core_status store_latest(struct store *s, const char *session_id,
                              unsigned flags, json_t **row, struct core_err *e)
{
	enum core_status st;
	*row = NULL;
	if ((st = st_check_handle(s, e)) != CORE_OK)
		return st;
	if (!session_id || !*session_id)
		return core_fail(e, CORE_EINVAL, "session ID is empty");
	if ((st = store_check_id(session_id, "session ID", e)) != CORE_OK)
		return st;
	st = s->backend->latest(s, session_id, flags, row, e);
	if (st == CORE_ENOTFOUND)
		return core_fail(e, st, "no snapshot found for session '%s'", session_id);
	return st;
}

enum core_status store_sessions(struct store *s,
                                enum core_status (*fn)(const struct store_session_info *,
                                                       void *),
                                void *ctx, struct core_err *e)
{
	enum core_status st = st_check_handle(s, e);
	return st != CORE_OK ? st : s->backend->sessions(s, fn, ctx, e);
}

/* store_session_rows() counts the rows its caller saw. */
struct counted {
	store_row_fn fn;
	void *ctx;
	size_t n;
};

static enum core_status count_row(const json_t *row, void *ctx)
{
	struct counted *c = ctx;
	c->n++;
	return c->fn(row, c->ctx);
}

enum core_status store_session_rows(struct store *s, const char *session_id,
                                    unsigned flags,
                                    enum core_status (*fn)(const json_t *row, void *),
                                    void *ctx, struct core_err *e)
{
	struct counted c = { fn, ctx, 0 };
	enum core_status st;
	if ((st = st_check_handle(s, e)) != CORE_OK ||
	    (st = store_check_id(session_id, "session ID", e)) != CORE_OK)
		return st;
	st = s->backend->session_rows(s, session_id, flags, count_row, &c, e);
	if (st == CORE_OK && !c.n)
		return core_fail(e, CORE_ENOTFOUND, "no snapshot found for session '%s'",
		                 session_id);
	return st;
}

/* ---- change notification ---- */

uint32_t store_change_seq(struct store *s)
{
	return s->backend->change_seq(s);
}

enum core_status store_wait_change(struct store *s, uint32_t seq,
                                   int64_t timeout_ms, struct core_err *e)
{
	enum core_status st = st_check_handle(s, e);
	return st != CORE_OK ? st : s->backend->wait_change(s, seq, timeout_ms, e);
}

/* ---- writes ---- */

enum core_status store_save(struct store *s, const char *id, unsigned flags,
                            store_mutate_fn fn, void *ctx, json_t **persisted,
                            struct core_err *e)
{
	return store_save_on(s, id, flags, NULL, fn, ctx, persisted, e);
}

enum core_status store_save_on(struct store *s, const char *id, unsigned flags,
                               const struct store_base *base, store_mutate_fn fn,
                               void *ctx, json_t **persisted, struct core_err *e)
{
	char minted[37];
	enum core_status st;
	if (persisted)
		*persisted = NULL;
	if ((st = st_check_handle(s, e)) != CORE_OK)
		return st;
	if (!id || !*id) {
		core_uuid(minted);
		id = minted;
	} else if ((st = store_check_id(id, "snapshot ID", e)) != CORE_OK) {
		return st;
	}
	if ((flags & STORE_APPEND) && (!s->backend->append || !base || !base->id || !base->kept))
		return core_fail(e, CORE_EINVAL, "save snapshot '%s': an append needs a base and a "
		                 "backend that appends", id);
	return s->backend->save(s, id, flags, base, fn, ctx, persisted, e);
}

/* store_put_stream()'s rows reach the backend checked. */
static enum core_status checked_next(void *ctx, json_t **row, struct core_err *e)
{
	const struct store_rows *src = ctx;
	enum core_status st = src->next(src->ctx, row, e);
	if (st != CORE_OK || !*row || (st = store_check_row(*row, e)) == CORE_OK)
		return st;
	json_decref(*row);
	*row = NULL;
	return st;
}

static enum core_status checked_rewind(void *ctx, struct core_err *e)
{
	const struct store_rows *src = ctx;
	return src->rewind(src->ctx, e);
}

enum core_status store_put_stream(struct store *s, const struct store_rows *src,
                                  size_t *count, struct core_err *e)
{
	struct store_rows checked = { checked_next, checked_rewind, (void *)src };
	enum core_status st;
	if (count)
		*count = 0;
	if ((st = st_check_handle(s, e)) != CORE_OK)
		return st;
	return s->backend->put_stream(s, &checked, count, e);
}

/* store_put_rows()'s source: an array. */
struct array_rows {
	json_t *const *rows;
	size_t n, i;
};

static enum core_status array_next(void *ctx, json_t **row, struct core_err *e)
{
	struct array_rows *a = ctx;
	*row = a->i < a->n ? json_incref(a->rows[a->i++]) : NULL;
	return CORE_OK;
}

static enum core_status array_rewind(void *ctx, struct core_err *e)
{
	((struct array_rows *)ctx)->i = 0;
	return CORE_OK;
}

enum core_status store_put_rows(struct store *s, json_t *const *rows, size_t n,
                                struct core_err *e)
{
	struct array_rows a = { rows, n, 0 };
	struct store_rows src = { array_next, array_rewind, &a };
	enum core_status st;
	size_t i;
	for (i = 0; i < n; i++)
		if ((st = store_check_row(rows[i], e)) != CORE_OK)
			return st;
	return store_put_stream(s, &src, NULL, e);
}

enum core_status store_put(struct store *s, const json_t *row, struct core_err *e)
{
	json_t *r = (json_t *)row;
	return store_put_rows(s, &r, 1, e);
}

/* ---- delete and prune ---- */

enum core_status store_delete_session(struct store *s, const char *session_id,
                                      size_t *deleted, store_deleted_fn fn, void *ctx,
                                      struct core_err *e)
{
	size_t n = 0;
	enum core_status st;
	if (deleted)
		*deleted = 0;
	if ((st = st_check_handle(s, e)) != CORE_OK ||
	    (st = store_check_id(session_id, "session ID", e)) != CORE_OK)
		return st;
	st = s->backend->delete_session(s, session_id, &n, fn, ctx, e);
	if (st == CORE_OK && !n)
		return core_fail(e, CORE_ENOTFOUND, "no snapshot found for session '%s'",
		                 session_id);
	if (st == CORE_OK && deleted)
		*deleted = n;
	return st;
}

enum core_status store_log_append(struct store *s, const char *snapshot_id, int64_t at_ns,
                                  const char *text, struct core_err *e)
{
	size_t n = strnlen(text ? text : "", STORE_LOG_LINE_MAX);
	int64_t saved, bound;
	char *line;
	enum core_status st;
	if ((st = st_check_handle(s, e)) != CORE_OK ||
	    (st = store_check_id(snapshot_id, "snapshot ID", e)) != CORE_OK)
		return st;
	if (!text)
		return core_fail(e, CORE_EINVAL, "worker log: no line");
	/* cut, then made valid (a cut character included) within the limit */
	if (!(line = malloc(STORE_LOG_LINE_MAX + 1)))
		return core_fail(e, CORE_ENOMEM, "worker log: out of memory");
	memcpy(line, text, n);
	line[n] = 0;
	utf8_fix_cstr(line, STORE_LOG_LINE_MAX + 1);
	/* a line never holds its writer long: within the handle's deadline,
	 * and at most STORE_LOG_APPEND_MS */
	saved = s->deadline;
	bound = core_now_mono_ms() + STORE_LOG_APPEND_MS;
	if (!saved || saved > bound)
		s->deadline = bound;
	st = s->backend->log_append(s, snapshot_id, at_ns, line, e);
	s->deadline = saved;
	if (st == CORE_ENOTFOUND)
		core_fail(e, st, "snapshot '%s' not found", snapshot_id);
	free(line);
	return st;
}

enum core_status store_log_lines(struct store *s, const char *snapshot_id, store_log_fn fn,
                                 void *ctx, struct core_err *e)
{
	enum core_status st;
	if ((st = st_check_handle(s, e)) != CORE_OK ||
	    (st = store_check_id(snapshot_id, "snapshot ID", e)) != CORE_OK)
		return st;
	st = s->backend->log_lines(s, snapshot_id, fn, ctx, e);
	if (st == CORE_ENOTFOUND)
		core_fail(e, st, "no worker log for snapshot '%s'", snapshot_id);
	return st;
}

static enum core_status collect_session(const struct store_session_info *si, void *ctx)
{
	struct core_buf *b = ctx;
	return core_buf_add(b, si->session_id, strlen(si->session_id) + 1);
}

/* The sessions to prune: session_id (which must have rows), or all. */
static enum core_status prune_list(struct store *s, const char *session_id,
                                   struct core_buf *ids, struct core_err *e)
{
	json_t *latest;
	enum core_status st;
	if (!session_id)
		return store_sessions(s, collect_session, ids, e);
	if ((st = store_latest(s, session_id, STORE_METADATA_ONLY, &latest, e)) != CORE_OK)
		return st;
	json_decref(latest);
	return core_buf_add(ids, session_id, strlen(session_id) + 1);
}

enum core_status store_prune(struct store *s, const char *session_id,
                             size_t keep, int64_t before_ns, size_t *deleted,
                             store_deleted_fn fn, void *ctx, struct core_err *e)
{
	struct core_buf ids = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st;
	size_t off, total = 0;
	if (deleted)
		*deleted = 0;
	if ((st = st_check_handle(s, e)) != CORE_OK)
		return st;
	/* each session on its own: one short transaction apiece */
	st = prune_list(s, session_id, &ids, e);
	for (off = 0; st == CORE_OK && off < ids.len; off += strlen(ids.p + off) + 1) {
		size_t n = 0;
		st = s->backend->prune_session(s, ids.p + off, keep, before_ns, &n, fn, ctx, e);
		total += n;
	}
	if (st == CORE_ENOMEM || st == CORE_ETOOBIG)
		core_fail(e, CORE_ENOMEM, "prune: out of memory");
	core_buf_release(&ids);
	if (deleted)
		*deleted = total;
	return st;
}

/* ---- migrations ---- */

enum core_status store_migrate(struct store *s, unsigned flags, struct store_migration *m,
                               struct core_err *e)
{
	enum core_status st;
	m->steps = NULL;
	if ((st = st_check_handle(s, e)) != CORE_OK)
		return st;
	m->backend = s->backend->name;
	if (s->backend->migrate)
		return s->backend->migrate(s, flags, m, e);
	m->version = m->latest = s->backend->format_version;
	if (!(m->steps = json_array()))
		return core_fail(e, CORE_ENOMEM, "migrate: out of memory");
	return CORE_OK;
}

/* ---- one writer per session ---- */

enum core_status store_session_lock(struct store *s, const char *session_id,
                                    int64_t timeout_ms, struct core_err *e)
{
	enum core_status st;
	if ((st = st_check_handle(s, e)) != CORE_OK ||
	    (st = store_check_id(session_id, "session ID", e)) != CORE_OK)
		return st;
	return s->backend->session_lock(s, session_id, timeout_ms > 0 ? timeout_ms : 0, e);
}

void store_session_unlock(struct store *s, const char *session_id)
{
	if (s && session_id && s->pid == getpid())
		s->backend->session_unlock(s, session_id);
}
