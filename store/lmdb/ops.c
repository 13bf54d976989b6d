/*
 * ops.c - the LMDB backend's operations: reads in read transactions,
 * writes in write transactions that grow the map and retry when it is
 * full and wake waiters when a status changed.  See store.h.
 */
#include "lmdb.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../../libcore/json.h"
#include "../../libcore/util.h"

/* ---- reads ---- */

enum core_status store_get(struct store *s, const char *snapshot_id,
                           unsigned flags, json_t **row, struct core_err *e)
{
	struct chain_ref ref = { .count = 0 };
	MDB_txn *t;
	enum core_status st;
	int rc;
	*row = NULL;
	if ((st = lm_check_handle(s, e)) != CORE_OK ||
	    (st = store_check_id(snapshot_id, "snapshot ID", e)) != CORE_OK)
		return st;
	if ((rc = lm_txn_begin(s->e, 0, &t, NULL)))
		return lm_fail(e, rc, "read snapshot");
	st = lm_read_row(s->e, t, snapshot_id, flags, row, &ref, e);
	lm_txn_abort(s->e, t, 0, NULL);
	if (st == CORE_OK && !(flags & STORE_METADATA_ONLY))
		lm_remember_read(s, snapshot_id, &ref);
	if (st == CORE_ENOTFOUND)
		return core_fail(e, st, "snapshot '%s' not found", snapshot_id);
	return st;
}

enum core_status store_latest(struct store *s, const char *session_id,
                              unsigned flags, json_t **row, struct core_err *e)
{
	struct chain_ref ref = { .count = 0 };
	MDB_txn *t;
	char id[512];
	enum core_status st;
	int rc;
	*row = NULL;
	if ((st = lm_check_handle(s, e)) != CORE_OK)
		return st;
	if (!session_id || !*session_id)
		return core_fail(e, CORE_EINVAL, "session ID is empty");
	if ((st = store_check_id(session_id, "session ID", e)) != CORE_OK)
		return st;
	if ((rc = lm_txn_begin(s->e, 0, &t, NULL)))
		return lm_fail(e, rc, "read latest snapshot");
	rc = lm_latest_id(s->e, t, session_id, id);
	if (rc == 0)
		st = lm_read_row(s->e, t, id, flags, row, &ref, e);
	else if (rc == MDB_NOTFOUND)
		st = CORE_ENOTFOUND;
	else
		st = lm_fail(e, rc, "read latest snapshot");
	lm_txn_abort(s->e, t, 0, NULL);
	if (st == CORE_OK && !(flags & STORE_METADATA_ONLY))
		lm_remember_read(s, id, &ref);
	if (st == CORE_ENOTFOUND)
		return core_fail(e, st, "no snapshot found for session '%s'", session_id);
	return st;
}


/*
 * LMDB turns a short write into EIO ("short write, filesystem full?"),
 * which is what a write that fills the disk gets: when the store's
 * filesystem has less than a megabyte left for this user, the cause was
 * the full disk, and the error says so (ENOSPC).
 */
static int write_cause(const struct env *v, int rc)
{
	struct statvfs sv;
	unsigned long long left;
	if (rc != EIO || statvfs(v->path, &sv) < 0)
		return rc;
	left = (unsigned long long)(geteuid() == 0 ? sv.f_bfree : sv.f_bavail) * sv.f_frsize;
	return left < (1u << 20) ? ENOSPC : rc;
}

/*
 * Run op inside a write transaction: growing the map and retrying on
 * MDB_MAP_FULL, waking waiters after the commit when op says a status
 * changed.  op returns an MDB/errno code, or -1 with e filled.
 */
typedef int (*write_op)(struct env *v, MDB_txn *t, void *ctx, int *changed,
                        struct wctx *w);

static enum core_status run_write(struct store *s, const char *what, write_op op,
                                  void *ctx, struct core_err *e)
{
	struct env *v = s->e;
	struct wctx w = { e, CORE_BUF_INIT(CORE_BUF_UNLIMITED),
	                  CORE_BUF_INIT(CORE_BUF_UNLIMITED), s, NULL, NULL };
	enum core_status st = CORE_OK;
	for (;;) {
		MDB_txn *t;
		sigset_t old;
		int changed = 0, rc = lm_txn_begin(v, 1, &t, &old);
		if (rc) {
			st = lm_begin_fail(v, e, rc, what);
			break;
		}
		rc = op(v, t, ctx, &changed, &w);
		if (rc == 0) {
			rc = lm_txn_commit(v, t, &old);
		} else {
			lm_txn_abort(v, t, 1, &old);
			if (rc == -1) {
				st = e && e->st ? e->st : CORE_ESYS;
				break;
			}
		}
		if (rc == MDB_MAP_FULL) {
			if ((st = lm_grow_map(v, e)) != CORE_OK) {
				core_err_prefix(e, "%s", what);
				break;
			}
			continue;
		}
		if (rc) {
			st = lm_fail(e, write_cause(v, rc), what);
			break;
		}
		if (changed)
			lm_wake_all(v);
		break;
	}
	core_buf_release(&w.tmp);
	core_buf_release(&w.tmp2);
	lm_hash_release(&w);
	return st;
}

/* ---- save (read-modify-write) ---- */

struct save_ctx {
	const char *id;
	unsigned flags;
	const struct store_base *base;
	store_mutate_fn fn;
	void *fctx;
	int called;
	json_t *seen;           /* existing row fn saw (NULL: none) */
	json_t *next;           /* fn's result, shaped by the store */
};

static int save_op(struct env *v, MDB_txn *t, void *ctx, int *changed, struct wctx *w)
{
	struct save_ctx *c = ctx;
	json_t *existing = NULL, *next = NULL;
	const char *esid = NULL, *sid, *status;
	enum core_status st;
	int rc;

	st = lm_read_row(v, t, c->id, c->flags, &existing, NULL, w->e);
	if (st != CORE_OK && st != CORE_ENOTFOUND)
		return -1;
	/* fn runs once; a retry after growing the map reuses its answer when
	 * the row it saw is unchanged */
	w->base = c->base;
	if (c->called && ((!existing && !c->seen) ||
	                  (existing && c->seen && jv_equal(existing, c->seen)))) {
		json_decref(existing);
		return c->next ? lm_write_row(v, t, c->next, c->flags, changed, w) : 0;
	}
	json_decref(c->seen);
	json_decref(c->next);
	c->seen = existing;
	c->next = NULL;
	c->called = 1;
	if ((st = c->fn(existing, &next, c->fctx, w->e)) != CORE_OK) {
		json_decref(next);
		if (w->e && !w->e->st)
			core_fail(w->e, st, "%s", core_strerror(st));
		return -1;
	}
	if (!next)
		return 0;
	if (!json_is_object(next)) {
		json_decref(next);
		core_fail(w->e, CORE_EINVAL, "save snapshot: the new row is not an object");
		return -1;
	}
	/* the members set below must not show in fn's object: a shallow copy
	 * (the state, whole histories, stays shared) */
	if (next == existing || next->refcount > 1) {
		json_t *copy = json_copy(next);
		json_decref(next);
		if (!(next = copy))
			return ENOMEM;
	}
	json_object_set_new(next, "snapshotId", json_string(c->id));
	if (existing && (esid = st_str(existing, "sessionId")) && *esid)
		json_object_set_new(next, "sessionId", json_string(esid));
	sid = st_str(next, "sessionId");
	if (!sid || !*sid) {
		json_decref(next);
		core_fail(w->e, CORE_EINVAL, "store requires sessionId to be set on the snapshot");
		return -1;
	}
	if (store_check_id(sid, "session ID", w->e) != CORE_OK) {
		json_decref(next);
		return -1;
	}
	status = st_str(next, "status");
	if (!status || !*status)
		json_object_set_new(next, "status", json_string("completed"));
	c->next = next;
	rc = lm_write_row(v, t, next, c->flags, changed, w);
	return rc;
}

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
	struct save_ctx c = { 0 };
	char minted[37];
	enum core_status st;
	if (persisted)
		*persisted = NULL;
	if ((st = lm_check_handle(s, e)) != CORE_OK)
		return st;
	if (!id || !*id) {
		core_uuid(minted);
		id = minted;
	} else if ((st = store_check_id(id, "snapshot ID", e)) != CORE_OK) {
		return st;
	}
	c.id = id;
	c.flags = flags;
	c.base = base;
	c.fn = fn;
	c.fctx = ctx;
	st = run_write(s, "save snapshot", save_op, &c, e);
	if (st == CORE_OK && persisted && c.next)
		*persisted = json_incref(c.next);
	json_decref(c.seen);
	json_decref(c.next);
	return st;
}

/* ---- put (import) ---- */

struct put_ctx {
	const struct store_rows *src;
	size_t n;
};

static int put_op(struct env *v, MDB_txn *t, void *ctx, int *changed, struct wctx *w)
{
	struct put_ctx *c = ctx;
	json_t *row;
	c->n = 0;
	if (c->src->rewind(c->src->ctx, w->e) != CORE_OK)
		return -1;
	for (;;) {
		int ch = 0, rc;
		if (c->src->next(c->src->ctx, &row, w->e) != CORE_OK)
			return -1;
		if (!row)
			return 0;
		if (store_check_row(row, w->e) != CORE_OK) {
			json_decref(row);
			return -1;
		}
		rc = lm_write_row(v, t, row, 0, &ch, w);
		json_decref(row);
		if (rc)
			return rc;
		*changed |= ch;
		c->n++;
	}
}

enum core_status store_put_stream(struct store *s, const struct store_rows *src,
                                  size_t *count, struct core_err *e)
{
	struct put_ctx c = { src, 0 };
	enum core_status st;
	if (count)
		*count = 0;
	if ((st = lm_check_handle(s, e)) != CORE_OK)
		return st;
	st = run_write(s, "import snapshots", put_op, &c, e);
	if (st == CORE_OK && count)
		*count = c.n;
	return st;
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


enum core_status store_session_rows(struct store *s, const char *session_id,
                                    unsigned flags,
                                    enum core_status (*fn)(const json_t *row, void *),
                                    void *ctx, struct core_err *e)
{
	struct idbatch *b;
	enum core_status st;
	size_t total = 0;
	if ((st = lm_check_handle(s, e)) != CORE_OK ||
	    (st = store_check_id(session_id, "session ID", e)) != CORE_OK)
		return st;
	if (!(b = calloc(1, sizeof *b)))
		return core_fail(e, CORE_ENOMEM, "list rows: out of memory");
	do {
		json_t *rows[BATCH];
		MDB_txn *t;
		size_t i, got = 0;
		int rc = lm_txn_begin(s->e, 0, &t, NULL);
		if (rc) {
			st = lm_fail(e, rc, "list rows");
			break;
		}
		rc = lm_index_batch(s->e, t, session_id, 0, b);
		for (i = 0; rc == 0 && i < b->n; i++) {
			st = lm_read_row(s->e, t, b->ids[i], flags, &rows[got], NULL, e);
			if (st == CORE_OK)
				got++;
			else if (st != CORE_ENOTFOUND)
				break;
			st = CORE_OK;
		}
		lm_txn_abort(s->e, t, 0, NULL);
		if (rc)
			st = lm_fail(e, rc, "list rows");
		for (i = 0; i < got; i++) {
			if (st == CORE_OK)
				st = fn(rows[i], ctx);
			json_decref(rows[i]);
		}
		total += got;
	} while (st == CORE_OK && b->n == BATCH);
	free(b);
	if (st == CORE_OK && !total)
		return core_fail(e, CORE_ENOTFOUND, "no snapshot found for session '%s'",
		                 session_id);
	return st;
}

struct sessinfo {
	char sid[STORE_ID_MAX + 1];
	size_t rows;
	json_t *latest;
};

enum core_status store_sessions(struct store *s,
                                enum core_status (*fn)(const struct store_session_info *,
                                                       void *),
                                void *ctx, struct core_err *e)
{
	struct sessinfo *b;
	char after[STORE_ID_MAX + 1] = "";
	size_t n;
	enum core_status st;
	if ((st = lm_check_handle(s, e)) != CORE_OK)
		return st;
	if (!(b = calloc(BATCH, sizeof *b)))
		return core_fail(e, CORE_ENOMEM, "list sessions: out of memory");
	do {
		MDB_txn *t;
		MDB_cursor *c;
		MDB_val k = { strlen(after), after }, d;
		size_t i;
		int rc = lm_txn_begin(s->e, 0, &t, NULL);
		n = 0;
		if (rc) {
			st = lm_fail(e, rc, "list sessions");
			break;
		}
		if (!(rc = mdb_cursor_open(t, s->e->dbi[DB_SESS], &c))) {
			rc = after[0] ? mdb_cursor_get(c, &k, &d, MDB_SET_RANGE)
			              : mdb_cursor_get(c, &k, &d, MDB_FIRST);
			if (rc == 0 && after[0] && k.mv_size == strlen(after) &&
			    !memcmp(k.mv_data, after, k.mv_size))
				rc = mdb_cursor_get(c, &k, &d, MDB_NEXT);
			while (rc == 0 && n < BATCH) {
				char id[512];
				size_t kl = k.mv_size > STORE_ID_MAX ? STORE_ID_MAX : k.mv_size;
				memcpy(b[n].sid, k.mv_data, kl);
				b[n].sid[kl] = 0;
				b[n].rows = d.mv_size == 8 ? get_be64(d.mv_data) : 0;
				b[n].latest = NULL;
				if (lm_latest_id(s->e, t, b[n].sid, id) == 0)
					lm_read_row(s->e, t, id, STORE_METADATA_ONLY, &b[n].latest, NULL, e);
				n++;
				rc = mdb_cursor_get(c, &k, &d, MDB_NEXT);
			}
			mdb_cursor_close(c);
		}
		lm_txn_abort(s->e, t, 0, NULL);
		if (rc && rc != MDB_NOTFOUND)
			st = lm_fail(e, rc, "list sessions");
		for (i = 0; i < n; i++) {
			struct store_session_info si = { b[i].sid, b[i].latest, b[i].rows };
			if (st == CORE_OK && b[i].latest)
				st = fn(&si, ctx);
			json_decref(b[i].latest);
		}
		if (n)
			memcpy(after, b[n - 1].sid, sizeof after);
	} while (st == CORE_OK && n == BATCH);
	free(b);
	return st;
}

/* ---- delete and prune ---- */

struct del_ctx {
	const char *sid;
	size_t keep;
	int64_t before_ns;
	int prune;
	size_t deleted;
	struct core_buf gone;   /* IDs deleted, NUL-terminated, when wanted */
	int want_ids;
};

/* Report the rows delete_op deleted, once its transaction committed. */
static void report_gone(const struct del_ctx *c, store_deleted_fn fn, void *ctx)
{
	size_t off;
	for (off = 0; fn && off < c->gone.len; off += strlen(c->gone.p + off) + 1)
		fn(c->gone.p + off, ctx);
}

static int delete_op(struct env *v, MDB_txn *t, void *ctx, int *changed, struct wctx *w)
{
	struct del_ctx *c = ctx;
	struct idbatch *b = calloc(1, sizeof *b);
	size_t seen = 0, i;
	int rc = 0;
	if (!b)
		return ENOMEM;
	c->deleted = 0;
	core_buf_reset(&c->gone);       /* a retry starts over */
	/* newest first; the batch cursor restarts after the last key, so
	 * deleting the rows already listed is safe */
	do {
		if ((rc = lm_index_batch(v, t, c->sid, 1, b)))
			break;
		for (i = 0; i < b->n && !rc; i++, seen++) {
			if (c->prune) {
				json_t *row = NULL;
				const char *status, *created;
				int64_t ns = 0;
				enum core_status st = lm_read_row(v, t, b->ids[i], STORE_METADATA_ONLY,
				                                  &row, NULL, w->e);
				if (st != CORE_OK) {
					rc = st == CORE_ENOTFOUND ? 0 : -1;
					continue;
				}
				status = st_str(row, "status");
				created = st_str(row, "createdAt");
				if (!created || !st_time_ns(created, &ns))
					ns = 0;
				if (seen == 0 || !store_status_terminal(status) ||
				    (c->keep && seen < c->keep) ||
				    (c->before_ns && ns >= c->before_ns)) {
					json_decref(row);
					continue;
				}
				json_decref(row);
			}
			if (!(rc = lm_delete_row(v, t, b->ids[i], w->e))) {
				c->deleted++;
				if (c->want_ids && core_buf_add(&c->gone, b->ids[i],
				                                strlen(b->ids[i]) + 1) != CORE_OK)
					rc = ENOMEM;
			}
		}
	} while (!rc && b->n == BATCH);
	free(b);
	if (c->deleted)
		*changed = 1;
	return rc;
}

enum core_status store_delete_session(struct store *s, const char *session_id,
                                      size_t *deleted, store_deleted_fn fn, void *ctx,
                                      struct core_err *e)
{
	struct del_ctx c = { session_id, 0, 0, 0, 0, CORE_BUF_INIT(CORE_BUF_UNLIMITED),
	                     fn != NULL };
	enum core_status st;
	if (deleted)
		*deleted = 0;
	if ((st = lm_check_handle(s, e)) != CORE_OK ||
	    (st = store_check_id(session_id, "session ID", e)) != CORE_OK)
		return st;
	st = run_write(s, "delete session", delete_op, &c, e);
	if (st == CORE_OK && !c.deleted)
		st = core_fail(e, CORE_ENOTFOUND, "no snapshot found for session '%s'",
		               session_id);
	if (st == CORE_OK) {
		report_gone(&c, fn, ctx);
		if (deleted)
			*deleted = c.deleted;
	}
	core_buf_release(&c.gone);
	return st;
}

static enum core_status collect_session(const struct store_session_info *si, void *ctx)
{
	struct core_buf *b = ctx;
	return core_buf_add(b, si->session_id, strlen(si->session_id) + 1);
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
	if ((st = lm_check_handle(s, e)) != CORE_OK)
		return st;
	if (session_id) {
		json_t *latest;
		if ((st = store_latest(s, session_id, STORE_METADATA_ONLY, &latest, e)) != CORE_OK)
			return st;
		json_decref(latest);
		st = core_buf_add(&ids, session_id, strlen(session_id) + 1);
	} else {
		st = store_sessions(s, collect_session, &ids, e);
	}
	/* one short write transaction per session */
	for (off = 0; st == CORE_OK && off < ids.len; off += strlen(ids.p + off) + 1) {
		struct del_ctx c = { ids.p + off, keep, before_ns, 1, 0,
		                     CORE_BUF_INIT(CORE_BUF_UNLIMITED), fn != NULL };
		if ((st = run_write(s, "prune", delete_op, &c, e)) == CORE_OK) {
			report_gone(&c, fn, ctx);
			total += c.deleted;
		}
		core_buf_release(&c.gone);
	}
	if (st == CORE_ENOMEM || st == CORE_ETOOBIG)
		core_fail(e, CORE_ENOMEM, "prune: out of memory");
	core_buf_release(&ids);
	if (deleted)
		*deleted = total;
	return st;
}
