/*
 * wlog.c - the LMDB backend's worker logs: a detached run's lines in the
 * wlog database, keyed by their row and a counter (lm.h's layout), so a
 * row's lines are one key range, read in order and deleted with the row
 * (rows.c's lm_delete_row(), in the deletion's transaction).  See
 * store_log_append() in store.h.
 */
#include "lm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../libcore/base/util.h"

/* The number the next line of row id gets: one past its last. */
static int next_n(MDB_cursor *c, const char *id, uint64_t *n)
{
	unsigned char key[LM_WLOG_KEY_MAX];
	size_t kn = lm_wlog_key(key, id, UINT64_MAX), pn = kn - 8;
	MDB_val k = { kn, key }, d;
	int rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
	*n = 0;
	if (rc == 0 && lm_wlog_ours(&k, key, pn))      /* line UINT64_MAX: none can follow */
		return MDB_KEYEXIST;
	rc = rc == 0 ? mdb_cursor_get(c, &k, &d, MDB_PREV) : mdb_cursor_get(c, &k, &d, MDB_LAST);
	if (rc == 0 && lm_wlog_ours(&k, key, pn))
		*n = get_be64((const unsigned char *)k.mv_data + pn) + 1;
	return rc == MDB_NOTFOUND ? 0 : rc;
}

struct append_ctx {
	const char *id, *text;
	int64_t at_ns;
	int gone;               /* the row does not exist */
};

static int append_op(struct env *v, MDB_txn *t, void *ctx, int *changed, struct wctx *w)
{
	struct append_ctx *a = ctx;
	MDB_val rk = { strlen(a->id), (void *)a->id }, d;
	unsigned char key[LM_WLOG_KEY_MAX];
	MDB_cursor *c;
	uint64_t n;
	size_t len = strlen(a->text);
	int rc;
	(void)changed;
	(void)w;
	a->gone = 0;
	if ((rc = mdb_get(t, v->dbi[DB_META], &rk, &d)) == MDB_NOTFOUND) {
		a->gone = 1;
		return 0;
	}
	if (rc || (rc = mdb_cursor_open(t, v->dbi[DB_WLOG], &c)))
		return rc;
	if (!(rc = next_n(c, a->id, &n))) {
		MDB_val k = { lm_wlog_key(key, a->id, n), key };
		d.mv_size = 8 + len;
		if (!(rc = mdb_cursor_put(c, &k, &d, MDB_RESERVE))) {
			put_be64(d.mv_data, time_key(a->at_ns));
			memcpy((unsigned char *)d.mv_data + 8, a->text, len);
		}
	}
	mdb_cursor_close(c);
	return rc;
}

enum core_status lm_log_append(struct store *h, const char *snapshot_id, int64_t at_ns,
                               const char *text, struct core_err *e)
{
	struct append_ctx a = { snapshot_id, text, at_ns, 0 };
	enum core_status st = lm_run_write(lm_store(h), "append to the worker log", append_op,
	                                   &a, e);
	return st == CORE_OK && a.gone ? CORE_ENOTFOUND : st;
}

/* ---- reading, in batches ---- */

#define LINES 256

/* Up to LINES lines of row id from line *n on, copied into b (be64 at,
 * be32 length, text each) in one read transaction; *n moves past them,
 * *got counts them. */
static enum core_status read_batch(struct env *v, const char *id, uint64_t *n,
                                   struct core_buf *b, size_t *got, struct core_err *e)
{
	unsigned char key[LM_WLOG_KEY_MAX], hdr[12];
	size_t pn = lm_wlog_key(key, id, *n) - 8;
	MDB_val k = { pn + 8, key }, d;
	MDB_cursor *c;
	MDB_txn *t;
	int rc = lm_txn_begin(v, 0, &t, NULL);
	*got = 0;
	if (rc)
		return lm_fail(e, rc, "read the worker log");
	if (!(rc = mdb_cursor_open(t, v->dbi[DB_WLOG], &c))) {
		rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
		for (; rc == 0 && *got < LINES && lm_wlog_ours(&k, key, pn) && d.mv_size >= 8; (*got)++) {
			memcpy(hdr, d.mv_data, 8);
			put_be32(hdr + 8, (uint32_t)(d.mv_size - 8));
			if (core_buf_add(b, hdr, sizeof hdr) ||
			    core_buf_add(b, (const char *)d.mv_data + 8, d.mv_size - 8)) {
				rc = ENOMEM;
				break;
			}
			*n = get_be64((const unsigned char *)k.mv_data + pn) + 1;
			rc = mdb_cursor_get(c, &k, &d, MDB_NEXT);
		}
		mdb_cursor_close(c);
	}
	lm_txn_abort(v, t, 0, NULL);
	return rc && rc != MDB_NOTFOUND ? lm_fail(e, rc, "read the worker log") : CORE_OK;
}

/* Call fn with each line of a batch read_batch() filled. */
static enum core_status each_line(const struct core_buf *b, store_log_fn fn, void *ctx)
{
	enum core_status st = CORE_OK;
	size_t off = 0;
	while (st == CORE_OK && off + 12 <= b->len) {
		const unsigned char *p = (const unsigned char *)b->p + off;
		uint32_t len = get_be32(p + 8);
		char *text = strndup((const char *)p + 12, len);
		if (!text)
			return CORE_ENOMEM;
		st = fn((int64_t)(get_be64(p) ^ ((uint64_t)1 << 63)), text, ctx);
		free(text);
		off += 12 + len;
	}
	return st;
}

enum core_status lm_log_lines(struct store *h, const char *snapshot_id, store_log_fn fn,
                              void *ctx, struct core_err *e)
{
	struct env *v = lm_store(h)->e;
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = CORE_OK;
	uint64_t n = 0;
	size_t got, total = 0;
	if (!v->has_wlog)
		return CORE_ENOTFOUND;
	do {
		core_buf_reset(&b);
		if ((st = read_batch(v, snapshot_id, &n, &b, &got, e)) == CORE_OK &&
		    (st = each_line(&b, fn, ctx)) == CORE_ENOMEM)
			core_fail(e, st, "read the worker log: out of memory");
		total += got;
	} while (st == CORE_OK && got == LINES);
	core_buf_release(&b);
	return st == CORE_OK && !total ? CORE_ENOTFOUND : st;
}
