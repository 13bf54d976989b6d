/*
 * ops.c - the LMDB backend's operations: reads in read transactions,
 * writes in write transactions that grow the map and retry when it is
 * full and wake waiters when a status changed.  See store.h.
 */
#include "lm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../../libcore/base/buf.h"
#include "../../libcore/base/json.h"
#include "../../libcore/base/util.h"

/* ---- reads ---- */

enum core_status lm_get(struct store *h, const char *snapshot_id, unsigned flags,
                        json_t **row, struct core_err *e)
{
	struct lmdb_store *s = lm_store(h);
	struct chain_ref ref = { .count = 0 };
	MDB_txn *t;
	enum core_status st;
	int rc;
	if ((rc = lm_txn_begin(s->e, 0, &t, NULL)))
		return lm_fail(e, rc, "read snapshot");
	st = lm_read_row(s->e, t, snapshot_id, flags, row, &ref, e);
	lm_txn_abort(s->e, t, 0, NULL);
	if (st == CORE_OK && !(flags & STORE_METADATA_ONLY))
		lm_remember_read(s, snapshot_id, &ref);
	return st;
}

enum core_status lm_message_texts(struct store *h, const char *snapshot_id, size_t n,
                                  store_text_fn fn, void *ctx, struct core_err *e)
{
	struct lmdb_store *s = lm_store(h);
	MDB_txn *t;
	enum core_status st;
	int rc;
	if ((rc = lm_txn_begin(s->e, 0, &t, NULL)))
		return lm_fail(e, rc, "read messages");
	st = lm_state_texts(s->e, t, snapshot_id, n, fn, ctx, e);
	lm_txn_abort(s->e, t, 0, NULL);
	return st;
}

enum core_status lm_latest(struct store *h, const char *session_id, unsigned flags,
                           json_t **row, struct core_err *e)
{
	struct lmdb_store *s = lm_store(h);
	struct chain_ref ref = { .count = 0 };
	MDB_txn *t;
	char id[512];
	enum core_status st;
	int rc;
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
	return st;
}

/* Where the store's file is mapped in this process. */
struct mapped {
	char *base;
	size_t size;            /* the map's size when base was found */
};

/*
 * Find the map: LMDB keeps its address private (mdb_env_info() gives it
 * only for MDB_FIXEDMAP), so it is the mapping of data.mdb from offset 0
 * whose length is the map's size, in /proc/self/maps.  Called in a read
 * transaction (the map cannot move); found again after a resize.
 */
static void find_map(struct env *v, size_t size, struct mapped *m)
{
	struct stat st;
	char line[512];
	FILE *f;
	int fd;
	if (m->size == size)
		return;
	m->base = NULL;
	m->size = size;
	if (mdb_env_get_fd(v->env, &fd) || fstat(fd, &st) || !(f = fopen("/proc/self/maps", "re")))
		return;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi, off, ino;
		unsigned maj, mnr;
		if (sscanf(line, "%lx-%lx %*s %lx %x:%x %lu", &lo, &hi, &off, &maj, &mnr, &ino) == 6 &&
		    ino == st.st_ino && makedev(maj, mnr) == st.st_dev && off == 0 &&
		    hi - lo == size) {
			m->base = (char *)lo;
			break;
		}
	}
	fclose(f);
}

/*
 * A listing (of sessions, of a session's rows) reads each page once, in
 * time order, not the file's: after a batch it drops the file's pages
 * from this process's mapping (they stay in the page cache, and a later
 * read maps them again), so its memory is a batch's pages, not the
 * store's.  The map is read-only (no MDB_WRITEMAP) and shared: nothing
 * is lost, whatever another thread reads.
 */
static void forget_pages(struct env *v, struct mapped *m)
{
	MDB_envinfo info;
	MDB_stat ms;
	if (mdb_env_info(v->env, &info) || mdb_env_stat(v->env, &ms))
		return;
	find_map(v, info.me_mapsize, m);
	if (m->base)
		madvise(m->base, ((size_t)info.me_last_pgno + 1) * ms.ms_psize, MADV_DONTNEED);
}

/* One batch of a session's rows (b continues the last), read in one read
 * transaction into rows[0..*got); rows gone meanwhile are skipped.  The
 * pages read are forgotten after (forget_pages()). */
static enum core_status rows_batch(struct env *v, const char *sid, unsigned flags,
                                   struct idbatch *b, json_t **rows, size_t *got,
                                   struct mapped *m, struct core_err *e)
{
	MDB_txn *t;
	enum core_status st = CORE_OK;
	size_t i;
	int rc = lm_txn_begin(v, 0, &t, NULL);
	*got = 0;
	if (rc)
		return lm_fail(e, rc, "list rows");
	rc = lm_index_batch(v, t, sid, 0, b);
	for (i = 0; rc == 0 && i < b->n; i++) {
		st = lm_read_row(v, t, b->ids[i], flags, &rows[*got], NULL, e);
		if (st == CORE_OK)
			(*got)++;
		else if (st != CORE_ENOTFOUND)
			break;
		st = CORE_OK;
	}
	forget_pages(v, m);
	lm_txn_abort(v, t, 0, NULL);
	if (rc)
		st = lm_fail(e, rc, "list rows");
	return st;
}

/* The callback runs outside any transaction: it may take its time. */
enum core_status lm_session_rows(struct store *h, const char *session_id,
                                 unsigned flags, store_row_fn fn, void *ctx,
                                 struct core_err *e)
{
	struct env *v = lm_store(h)->e;
	struct idbatch *b = calloc(1, sizeof *b);
	struct mapped m = { NULL, 0 };
	enum core_status st;
	if (!b)
		return core_fail(e, CORE_ENOMEM, "list rows: out of memory");
	do {
		json_t *rows[BATCH];
		size_t i, got;
		st = rows_batch(v, session_id, flags, b, rows, &got, &m, e);
		for (i = 0; i < got; i++) {
			if (st == CORE_OK)
				st = fn(rows[i], ctx);
			json_decref(rows[i]);
		}
	} while (st == CORE_OK && b->n == BATCH);
	free(b);
	return st;
}

/* One session of a batch: its row count, and its latest row or (the
 * recent index) its listing entry at off in the batch's buffer. */
struct sessinfo {
	char sid[STORE_ID_MAX + 1];
	size_t rows, off, len;
	json_t *latest;
};

/* Up to BATCH sessions after the session ID after ("": from the first),
 * each with its row count and latest row, in one read transaction. */
static enum core_status sessions_batch(struct env *v, const char *after,
                                       struct sessinfo *b, size_t *n,
                                       struct core_err *e)
{
	MDB_txn *t;
	MDB_cursor *c;
	MDB_val k = { strlen(after), (void *)after }, d;
	int rc = lm_txn_begin(v, 0, &t, NULL);
	*n = 0;
	if (rc)
		return lm_fail(e, rc, "list sessions");
	if (!(rc = mdb_cursor_open(t, v->dbi[DB_SESS], &c))) {
		rc = after[0] ? mdb_cursor_get(c, &k, &d, MDB_SET_RANGE)
		              : mdb_cursor_get(c, &k, &d, MDB_FIRST);
		if (rc == 0 && after[0] && k.mv_size == strlen(after) &&
		    !memcmp(k.mv_data, after, k.mv_size))
			rc = mdb_cursor_get(c, &k, &d, MDB_NEXT);
		while (rc == 0 && *n < BATCH) {
			struct sessinfo *si = &b[(*n)++];
			char id[512];
			size_t kl = k.mv_size > STORE_ID_MAX ? STORE_ID_MAX : k.mv_size;
			memcpy(si->sid, k.mv_data, kl);
			si->sid[kl] = 0;
			si->rows = d.mv_size == 8 ? get_be64(d.mv_data) : 0;
			si->latest = NULL;
			if (lm_latest_id(v, t, si->sid, id) == 0)
				lm_read_row(v, t, id, STORE_METADATA_ONLY, &si->latest, NULL, e);
			rc = mdb_cursor_get(c, &k, &d, MDB_NEXT);
		}
		mdb_cursor_close(c);
	}
	lm_txn_abort(v, t, 0, NULL);
	return rc && rc != MDB_NOTFOUND ? lm_fail(e, rc, "list sessions") : CORE_OK;
}

enum core_status lm_sessions(struct store *h, store_session_fn fn, void *ctx,
                             struct core_err *e)
{
	struct env *v = lm_store(h)->e;
	struct sessinfo *b = calloc(BATCH, sizeof *b);
	char after[STORE_ID_MAX + 1] = "";
	enum core_status st;
	size_t n, i;
	if (!b)
		return core_fail(e, CORE_ENOMEM, "list sessions: out of memory");
	do {
		st = sessions_batch(v, after, b, &n, e);
		for (i = 0; i < n; i++) {
			struct store_session_info si = { b[i].sid, b[i].latest, b[i].rows, NULL, 0 };
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

/* Up to want (<= BATCH) sessions of the recent index after the key last
 * (*lastlen 0: from the newest), each with its row count and listing
 * entry (copied into buf) or latest row, in one read transaction; last
 * moves to the last key read. */
static enum core_status recent_batch(struct env *v, unsigned char *last, size_t *lastlen,
                                     size_t want, struct sessinfo *b, size_t *n,
                                     struct core_buf *buf, struct mapped *m,
                                     struct core_err *e)
{
	MDB_txn *t;
	MDB_cursor *c;
	MDB_val k = { *lastlen, last }, d;
	size_t seen = 0;
	int rc = lm_txn_begin(v, 0, &t, NULL);
	*n = 0;
	buf->len = 0;
	if (rc)
		return lm_fail(e, rc, "list sessions");
	if (!(rc = mdb_cursor_open(t, v->dbi[DB_RECENT], &c))) {
		rc = *lastlen ? mdb_cursor_get(c, &k, &d, MDB_SET_RANGE)
		              : mdb_cursor_get(c, &k, &d, MDB_FIRST);
		if (rc == 0 && *lastlen && k.mv_size == *lastlen && !memcmp(k.mv_data, last, *lastlen))
			rc = mdb_cursor_get(c, &k, &d, MDB_NEXT);
		while (rc == 0 && seen < want) {
			struct sessinfo *si = &b[*n];
			struct lm_entry en;
			char id[512];
			size_t kl = k.mv_size - 8;
			seen++;
			if (k.mv_size < 8 || kl > STORE_ID_MAX) {
				rc = MDB_CORRUPTED;
				break;
			}
			memcpy(last, k.mv_data, k.mv_size);
			*lastlen = k.mv_size;
			memcpy(si->sid, (char *)k.mv_data + 8, kl);
			si->sid[kl] = 0;
			si->latest = NULL;
			if (lm_recent_entry(&d, &en)) {
				si->rows = en.rows;
				si->off = buf->len;
				si->len = en.entry_len;
				if (core_buf_add(buf, en.entry, en.entry_len)) {
					rc = ENOMEM;
					break;
				}
				(*n)++;
			} else if (d.mv_size && d.mv_size <= STORE_ID_MAX) {
				/* the entry names the session's latest row */
				si->rows = lm_sess_rows(v, t, si->sid);
				memcpy(id, d.mv_data, d.mv_size);
				id[d.mv_size] = 0;
				if (lm_read_row(v, t, id, STORE_METADATA_ONLY, &si->latest, NULL,
				                e) == CORE_OK)
					(*n)++;
			}
			rc = mdb_cursor_get(c, &k, &d, MDB_NEXT);
		}
		mdb_cursor_close(c);
	}
	forget_pages(v, m);
	lm_txn_abort(v, t, 0, NULL);
	if (rc == MDB_NOTFOUND)
		*lastlen = 0;           /* the end */
	return rc && rc != MDB_NOTFOUND ? lm_fail(e, rc, "list sessions") : CORE_OK;
}

enum core_status lm_recent(struct store *h, size_t first, store_session_fn fn, void *ctx,
                           struct core_err *e)
{
	struct env *v = lm_store(h)->e;
	struct sessinfo *b;
	struct core_buf buf = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct mapped m = { NULL, 0 };
	unsigned char last[8 + STORE_ID_MAX];
	size_t lastlen = 0, n, i, want = first && first < BATCH ? first : BATCH;
	enum core_status st;
	if (!v->has_recent)             /* an older store, opened read-only */
		return st_recent_sorted(h, fn, ctx, e);
	if (!(b = calloc(BATCH, sizeof *b)))
		return core_fail(e, CORE_ENOMEM, "list sessions: out of memory");
	do {
		st = recent_batch(v, last, &lastlen, want, b, &n, &buf, &m, e);
		want = BATCH;
		for (i = 0; i < n; i++) {
			struct store_session_info si = { b[i].sid, b[i].latest, b[i].rows,
			                                 b[i].latest ? NULL : buf.p + b[i].off,
			                                 b[i].len };
			if (st == CORE_OK)
				st = fn(&si, ctx);
			json_decref(b[i].latest);
		}
	} while (st == CORE_OK && lastlen);
	core_buf_release(&buf);
	free(b);
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

/* Run op inside a write transaction (lm.h). */
enum core_status lm_run_write(struct lmdb_store *s, const char *what, write_op op,
                              void *ctx, struct core_err *e)
{
	struct env *v = s->e;
	struct wctx w = { e, CORE_BUF_INIT(CORE_BUF_UNLIMITED),
	                  CORE_BUF_INIT(CORE_BUF_UNLIMITED), s, NULL, 0 };
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
	json_t *existing = NULL;
	enum core_status st;

	st = lm_read_row(v, t, c->id, c->flags, &existing, NULL, w->e);
	if (st != CORE_OK && st != CORE_ENOTFOUND)
		return -1;
	/* fn runs once; a retry after growing the map reuses its answer when
	 * the row it saw is unchanged */
	w->base = c->base;
	w->append = (c->flags & STORE_APPEND) != 0;
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
	if (st_mutate(c->id, existing, c->fn, c->fctx, &c->next, w->e) != CORE_OK)
		return -1;
	return c->next ? lm_write_row(v, t, c->next, c->flags, changed, w) : 0;
}

enum core_status lm_save(struct store *h, const char *id, unsigned flags,
                         const struct store_base *base, store_mutate_fn fn, void *ctx,
                         json_t **persisted, struct core_err *e)
{
	struct save_ctx c = { id, flags, base, fn, ctx, 0, NULL, NULL };
	enum core_status st = lm_run_write(lm_store(h), "save snapshot", save_op, &c, e);
	if (st == CORE_OK && persisted && c.next)
		*persisted = json_incref(c.next);
	json_decref(c.seen);
	json_decref(c.next);
	return st;
}

/* ---- queued runs (store.h "Queued runs") ---- */

/* One entry of the queue index, as the claim weighs it. */
struct qent {
	char id[STORE_ID_MAX + 1];
	char agent[STORE_ID_MAX + 1];
	int64_t ready, lease, conc;
};

static int64_t qe_int(const json_t *q, const char *key)
{
	const json_t *v = json_object_get(q, key);
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

/* Decode index entry k/d (NULL: not one this agentkit wrote). */
static json_t *qent_of(const MDB_val *k, const MDB_val *d, struct qent *q, size_t *qlen)
{
	const unsigned char *p = k->mv_data;
	size_t n;
	json_t *v;
	const char *a;
	if (k->mv_size < 2 || (n = p[0]) + 1 >= k->mv_size || k->mv_size - 1 - n > STORE_ID_MAX ||
	    !(v = json_loadb(d->mv_data, d->mv_size, 0, NULL)))
		return NULL;
	memcpy(q->id, p + 1 + n, k->mv_size - 1 - n);
	q->id[k->mv_size - 1 - n] = 0;
	a = json_string_value(json_object_get(v, "agent"));
	snprintf(q->agent, sizeof q->agent, "%s", a ? a : "");
	q->ready = qe_int(v, "ready");
	q->lease = qe_int(v, "lease");
	q->conc = qe_int(v, "concurrency");
	*qlen = n;
	return v;
}

static int in_queues(const unsigned char *k, size_t n, const char *const *queues)
{
	for (; *queues; queues++)
		if (strlen(*queues) == n && !memcmp(*queues, k + 1, n))
			return 1;
	return 0;
}

struct claim_op {
	const char *const *queues;
	int64_t now;
	struct save_ctx save;
	char id[STORE_ID_MAX + 1];
	int64_t next;
	int found;
};

/* Live claims of agent in the whole index (every queue). */
static int live_of(struct env *v, MDB_txn *t, const char *agent, int64_t now, int64_t *count)
{
	MDB_cursor *c;
	MDB_val k, d;
	int rc;
	*count = 0;
	if ((rc = mdb_cursor_open(t, v->dbi[DB_QUEUE], &c)))
		return rc;
	for (rc = mdb_cursor_get(c, &k, &d, MDB_FIRST); !rc; rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) {
		struct qent q;
		size_t n;
		json_t *x = qent_of(&k, &d, &q, &n);
		if (x && q.lease > now && !strcmp(q.agent, agent))
			(*count)++;
		json_decref(x);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* The claim's pick: the ready entry of the queues ready first (then by
 * ID) whose agent is under its limit; none: c->found 0, c->next the next
 * ready time.  One transaction (LMDB has one writer) holds it all. */
static int claim_op(struct env *v, MDB_txn *t, void *ctx, int *changed, struct wctx *w)
{
	struct claim_op *c = ctx;
	struct qent best = { .ready = 0 }, q;
	char skip[8][STORE_ID_MAX + 1];
	int nskip = 0;
	MDB_cursor *cur;
	MDB_val k, d;
	int rc;
	c->found = 0;
	c->next = 0;
	if (!v->has_queue)
		return 0;
	for (;;) {
		int have = 0;
		if ((rc = mdb_cursor_open(t, v->dbi[DB_QUEUE], &cur)))
			return rc;
		for (rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST); !rc;
		     rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
			size_t n;
			json_t *x = qent_of(&k, &d, &q, &n);
			int skipped = 0;
			if (!x || !in_queues(k.mv_data, n, c->queues)) {
				json_decref(x);
				continue;
			}
			json_decref(x);
			for (int i = 0; i < nskip; i++)
				skipped |= !strcmp(skip[i], q.agent);
			if (q.ready > c->now) {
				if (!c->next || q.ready < c->next)
					c->next = q.ready;
			} else if (!skipped && (!have || q.ready < best.ready ||
			                        (q.ready == best.ready && strcmp(q.id, best.id) < 0))) {
				best = q;
				have = 1;
			}
		}
		mdb_cursor_close(cur);
		if (rc != MDB_NOTFOUND)
			return rc;
		if (!have)
			return 0;
		if (best.conc > 0) {
			int64_t live;
			if ((rc = live_of(v, t, best.agent, c->now, &live)))
				return rc;
			if (live >= best.conc) {
				/* the agent is at its limit: its other rows wait too */
				if (nskip == 8)
					return 0;
				snprintf(skip[nskip++], sizeof skip[0], "%s", best.agent);
				continue;
			}
		}
		break;
	}
	snprintf(c->id, sizeof c->id, "%s", best.id);
	c->save.id = c->id;
	c->found = 1;
	return save_op(v, t, &c->save, changed, w);
}

enum core_status lm_claim(struct store *h, const char *const *queues, int64_t now_ns,
                          store_mutate_fn fn, void *ctx, json_t **persisted, int64_t *next_ns,
                          struct core_err *e)
{
	struct claim_op c = { queues, now_ns, { NULL, STORE_METADATA_ONLY, NULL, fn, ctx, 0, NULL,
	                                        NULL }, "", 0, 0 };
	enum core_status st = lm_run_write(lm_store(h), "claim a queued run", claim_op, &c, e);
	*persisted = NULL;
	*next_ns = c.next;
	if (st == CORE_OK && !c.found)
		st = CORE_ENOTFOUND;
	if (st == CORE_OK && c.save.next)
		*persisted = json_incref(c.save.next);
	json_decref(c.save.seen);
	json_decref(c.save.next);
	return st;
}

/* One entry of the listing of queued runs: its queue, ready time and ID. */
struct qlist {
	char *queue, *id;
	int64_t ready;
};

static int qlist_order(const void *pa, const void *pb)
{
	const struct qlist *a = pa, *b = pb;
	int c = strcmp(a->queue, b->queue);
	if (c)
		return c;
	if (a->ready != b->ready)
		return a->ready < b->ready ? -1 : 1;
	return strcmp(a->id, b->id);
}

/* The index's entries (queue, ready time, ID: no rows), sorted. */
static enum core_status queued_entries(struct env *v, struct qlist **out, size_t *n,
                                       struct core_err *e)
{
	struct qlist *l = NULL;
	size_t cap = 0;
	MDB_cursor *c;
	MDB_txn *t;
	MDB_val k, d;
	int rc;
	*n = 0;
	if ((rc = lm_txn_begin(v, 0, &t, NULL)))
		return lm_fail(e, rc, "list queued runs");
	if ((rc = mdb_cursor_open(t, v->dbi[DB_QUEUE], &c))) {
		lm_txn_abort(v, t, 0, NULL);
		return lm_fail(e, rc, "list queued runs");
	}
	for (rc = mdb_cursor_get(c, &k, &d, MDB_FIRST); !rc; rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) {
		struct qent q;
		size_t qn;
		json_t *x = qent_of(&k, &d, &q, &qn);
		json_decref(x);
		if (!x)
			continue;
		if (*n == cap) {
			struct qlist *m = realloc(l, (cap = cap ? cap * 2 : 64) * sizeof *l);
			if (!m) {
				rc = ENOMEM;
				break;
			}
			l = m;
		}
		l[*n].queue = strndup((const char *)k.mv_data + 1, qn);
		l[*n].id = strdup(q.id);
		l[*n].ready = q.ready;
		if (!l[*n].queue || !l[*n].id) {
			free(l[*n].queue);
			free(l[*n].id);
			rc = ENOMEM;
			break;
		}
		(*n)++;
	}
	mdb_cursor_close(c);
	lm_txn_abort(v, t, 0, NULL);
	*out = l;
	if (rc && rc != MDB_NOTFOUND)
		return lm_fail(e, rc, "list queued runs");
	if (*n > 1)
		qsort(l, *n, sizeof *l, qlist_order);
	return CORE_OK;
}

/* By queue, then ready time (then ID): the index's entries sorted, their
 * rows read a batch at a time, fn called outside any transaction. */
enum core_status lm_queued(struct store *h, store_row_fn fn, void *ctx, struct core_err *e)
{
	struct env *v = lm_store(h)->e;
	struct qlist *l = NULL;
	enum core_status st = CORE_OK;
	size_t n = 0, i, j;
	if (v->has_queue)
		st = queued_entries(v, &l, &n, e);
	for (i = 0; st == CORE_OK && i < n; i += BATCH) {
		json_t *rows[BATCH];
		size_t got = 0, end = i + BATCH < n ? i + BATCH : n;
		MDB_txn *t;
		int rc = lm_txn_begin(v, 0, &t, NULL);
		if (rc) {
			st = lm_fail(e, rc, "list queued runs");
			break;
		}
		for (j = i; st == CORE_OK && j < end; j++) {
			st = lm_read_row(v, t, l[j].id, STORE_METADATA_ONLY, &rows[got], NULL, e);
			if (st == CORE_OK)
				got++;
			else if (st == CORE_ENOTFOUND)      /* settled and gone meanwhile */
				st = CORE_OK;
		}
		lm_txn_abort(v, t, 0, NULL);
		for (j = 0; j < got; j++) {
			if (st == CORE_OK)
				st = fn(rows[j], ctx);
			json_decref(rows[j]);
		}
	}
	for (i = 0; i < n; i++) {
		free(l[i].queue);
		free(l[i].id);
	}
	free(l);
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
		rc = lm_write_row(v, t, row, 0, &ch, w);
		json_decref(row);
		if (rc)
			return rc;
		*changed |= ch;
		c->n++;
	}
}

enum core_status lm_put_stream(struct store *h, const struct store_rows *src,
                               size_t *count, struct core_err *e)
{
	struct put_ctx c = { src, 0 };
	enum core_status st = lm_run_write(lm_store(h), "import snapshots", put_op, &c, e);
	if (st == CORE_OK && count)
		*count = c.n;
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

/* Whether delete_op leaves row id, the seen-th newest of its session: 1
 * to keep it (also when gone meanwhile), 0 to delete it, -1 (e filled)
 * when it cannot be read. */
static int keeps(struct env *v, MDB_txn *t, const char *id, size_t seen,
                 const struct del_ctx *c, struct core_err *e)
{
	json_t *row = NULL;
	enum core_status st;
	int keep;
	if (!c->prune)
		return 0;
	st = lm_read_row(v, t, id, STORE_METADATA_ONLY, &row, NULL, e);
	if (st != CORE_OK)
		return st == CORE_ENOTFOUND ? 1 : -1;
	keep = st_prune_keeps(row, seen, c->keep, c->before_ns);
	json_decref(row);
	return keep;
}

static int delete_one(struct env *v, MDB_txn *t, const char *id, struct del_ctx *c,
                      struct core_err *e)
{
	int rc = lm_delete_row(v, t, id, e);
	if (rc)
		return rc;
	c->deleted++;
	if (c->want_ids && core_buf_add(&c->gone, id, strlen(id) + 1) != CORE_OK)
		return ENOMEM;
	return 0;
}

static int delete_op(struct env *v, MDB_txn *t, void *ctx, int *changed, struct wctx *w)
{
	struct del_ctx *c = ctx;
	struct idbatch *b = calloc(1, sizeof *b);
	size_t seen = 0, i;
	int rc = 0, k;
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
			if ((k = keeps(v, t, b->ids[i], seen, c, w->e)))
				rc = k < 0 ? -1 : 0;
			else
				rc = delete_one(v, t, b->ids[i], c, w->e);
		}
	} while (!rc && b->n == BATCH);
	free(b);
	if (c->deleted)
		*changed = 1;
	return rc;
}

/* delete_session and prune_session: one write transaction. */
static enum core_status delete_rows(struct lmdb_store *s, const char *what,
                                    struct del_ctx *c, size_t *deleted,
                                    store_deleted_fn fn, void *ctx, struct core_err *e)
{
	enum core_status st;
	c->gone = (struct core_buf)CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	c->want_ids = fn != NULL;
	if ((st = lm_run_write(s, what, delete_op, c, e)) == CORE_OK) {
		report_gone(c, fn, ctx);
		*deleted = c->deleted;
	}
	core_buf_release(&c->gone);
	return st;
}

enum core_status lm_delete_session(struct store *h, const char *session_id,
                                   size_t *deleted, store_deleted_fn fn, void *ctx,
                                   struct core_err *e)
{
	struct del_ctx c = { .sid = session_id };
	return delete_rows(lm_store(h), "delete session", &c, deleted, fn, ctx, e);
}

enum core_status lm_prune_session(struct store *h, const char *session_id,
                                  size_t keep, int64_t before_ns, size_t *deleted,
                                  store_deleted_fn fn, void *ctx, struct core_err *e)
{
	struct del_ctx c = { .sid = session_id, .keep = keep, .before_ns = before_ns,
	                     .prune = 1 };
	return delete_rows(lm_store(h), "prune", &c, deleted, fn, ctx, e);
}
