/*
 * rows.c - the LMDB backend's rows: the meta record codec, row writes and
 * deletes, and the session index (bysess, sess).  See lm.h.
 */
#include "lm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../libcore/base/buf.h"
#include "../../libcore/base/json.h"

/* ---- rows: decoding ---- */

/* The row stored under id (MDB_NOTFOUND passes through as CORE_ENOTFOUND
 * without a message).  ref (optional) receives the row's message chain;
 * its count stays 0 when the row has none or only metadata was read. */
enum core_status lm_read_row(struct env *v, MDB_txn *t, const char *id,
                             unsigned flags, json_t **out, struct chain_ref *ref,
                             struct core_err *e)
{
	MDB_val k = { strlen(id), (void *)id }, d;
	const unsigned char *h;
	json_t *meta, *state;
	enum core_status st;
	int rc = mdb_get(t, v->dbi[DB_META], &k, &d);
	*out = NULL;
	if (rc == MDB_NOTFOUND)
		return CORE_ENOTFOUND;
	if (rc)
		return lm_fail(e, rc, "read snapshot");
	h = d.mv_data;
	if (d.mv_size < META_HDR || h[0] != 1)
		return core_fail(e, CORE_ESYS, "corrupt store: bad row '%s'", id);
	if (!(meta = lm_parse_val(h + META_HDR, d.mv_size - META_HDR, e)))
		return e ? e->st : CORE_ESYS;
	if ((flags & STORE_METADATA_ONLY) || !(h[1] & 1)) {
		*out = meta;
		return CORE_OK;
	}
	struct chain_ref own = { .count = 0 };
	if (!ref)
		ref = &own;
	ref->count = 0;
	if ((st = lm_read_state(v, t, &k, flags, &state, ref, e)) != CORE_OK) {
		json_decref(meta);
		return st;
	}
	*out = jv_object_insert_at(meta, get_be32(h + 2), "state", state);
	json_decref(meta);
	if (*out && (flags & STORE_LAST_MESSAGE) && ref->count > 1 &&
	    st_info_set(*out, "messagesBefore", json_integer(ref->count - 1)))
		json_decref(*out), *out = NULL;
	return *out ? CORE_OK : core_fail(e, CORE_ENOMEM, "read snapshot: out of memory");
}

/* ---- session index ---- */

static size_t bysess_prefix(unsigned char *k, const char *sid)
{
	size_t n = strlen(sid);
	k[0] = (unsigned char)n;
	memcpy(k + 1, sid, n);
	return n + 1;
}

static size_t bysess_key(unsigned char *k, const char *sid, uint64_t tkey, const char *id)
{
	size_t n = bysess_prefix(k, sid), m = strlen(id);
	put_be64(k + n, tkey);
	memcpy(k + n + 8, id, m);
	return n + 8 + m;
}

/* The snapshot ID of the session's latest index entry into id (NUL-ended). */
int lm_latest_id(struct env *v, MDB_txn *t, const char *sid, char *id)
{
	unsigned char key[512];
	size_t n = bysess_prefix(key, sid);
	MDB_cursor *c;
	MDB_val k, d;
	int rc;
	memset(key + n, 0xFF, 9);
	k.mv_size = n + 9;
	k.mv_data = key;
	if ((rc = mdb_cursor_open(t, v->dbi[DB_BYSESS], &c)))
		return rc;
	rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
	if (rc == 0)
		rc = mdb_cursor_get(c, &k, &d, MDB_PREV);
	else if (rc == MDB_NOTFOUND)
		rc = mdb_cursor_get(c, &k, &d, MDB_LAST);
	if (rc == 0 && (k.mv_size < n + 8 || memcmp(k.mv_data, key, n)))
		rc = MDB_NOTFOUND;
	if (rc == 0) {
		memcpy(id, (char *)k.mv_data + n + 8, k.mv_size - n - 8);
		id[k.mv_size - n - 8] = 0;
	}
	mdb_cursor_close(c);
	return rc;
}

static int sess_add(struct env *v, MDB_txn *t, const char *sid, int delta)
{
	MDB_val k = { strlen(sid), (void *)sid }, d;
	unsigned char buf[8];
	uint64_t n = 0;
	int rc = mdb_get(t, v->dbi[DB_SESS], &k, &d);
	if (rc == 0 && d.mv_size == 8)
		n = get_be64(d.mv_data);
	else if (rc && rc != MDB_NOTFOUND)
		return rc;
	n = delta < 0 ? (n ? n - 1 : 0) : n + 1;
	if (n == 0)
		return rc == MDB_NOTFOUND ? 0 : mdb_del(t, v->dbi[DB_SESS], &k, NULL);
	put_be64(buf, n);
	d.mv_size = 8;
	d.mv_data = buf;
	return mdb_put(t, v->dbi[DB_SESS], &k, &d, 0);
}

/* ---- the sessions newest first (recent, recentof) ---- */

static size_t recent_key(unsigned char *k, uint64_t when, const char *sid)
{
	size_t n = strlen(sid);
	put_be64(k, when);
	memcpy(k + 8, sid, n);
	return 8 + n;
}

uint64_t lm_sess_rows(struct env *v, MDB_txn *t, const char *sid)
{
	MDB_val k = { strlen(sid), (void *)sid }, d;
	return mdb_get(t, v->dbi[DB_SESS], &k, &d) == 0 && d.mv_size == 8 ? get_be64(d.mv_data) : 0;
}

int lm_recent_entry(const MDB_val *d, struct lm_entry *en)
{
	const unsigned char *p = d->mv_data;
	if (d->mv_size < 2 + 8 || p[0] != LM_ENTRY || d->mv_size < 2 + (size_t)p[1] + 8 ||
	    !p[1] || p[1] > STORE_ID_MAX)
		return 0;
	en->id = (const char *)p + 2;
	en->id_len = p[1];
	en->rows = get_be64(p + 2 + p[1]);
	en->entry = p + 2 + p[1] + 8;
	en->entry_len = d->mv_size - (2 + p[1] + 8);
	return 1;
}

int lm_recent_fix(struct env *v, MDB_txn *t, const char *sid, const char *id,
                  const json_t *row)
{
	MDB_val sk = { strlen(sid), (void *)sid }, k, d, od;
	unsigned char key[8 + STORE_ID_MAX], val[8 + STORE_ID_MAX];
	char lid[512];
	json_t *latest = NULL;
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct lm_entry en;
	int64_t ns = INT64_MIN;
	uint64_t when, rows;
	size_t n;
	int rc, had;
	if (!v->has_recent)
		return 0;
	if ((rc = mdb_get(t, v->dbi[DB_RECENTOF], &sk, &od)) && rc != MDB_NOTFOUND)
		return rc;
	had = rc == 0 && od.mv_size >= 8;
	rc = lm_latest_id(v, t, sid, lid);
	if (rc && rc != MDB_NOTFOUND)
		return rc;
	if (rc == MDB_NOTFOUND) {       /* the session is gone */
		if (!had)
			return 0;
		k.mv_size = recent_key(key, get_be64(od.mv_data), sid);
		k.mv_data = key;
		if ((rc = mdb_del(t, v->dbi[DB_RECENT], &k, NULL)) && rc != MDB_NOTFOUND)
			return rc;
		return mdb_del(t, v->dbi[DB_RECENTOF], &sk, NULL);
	}
	n = strlen(lid);
	rows = lm_sess_rows(v, t, sid);
	/* the same latest row, not the one written: its entry and time
	 * stand, and only the row count may have moved */
	if (had && od.mv_size == 8 + n && !memcmp((char *)od.mv_data + 8, lid, n) &&
	    (!id || strcmp(id, lid))) {
		k.mv_size = recent_key(key, get_be64(od.mv_data), sid);
		k.mv_data = key;
		if ((rc = mdb_get(t, v->dbi[DB_RECENT], &k, &d)) && rc != MDB_NOTFOUND)
			return rc;
		if (rc == 0 && lm_recent_entry(&d, &en)) {
			if (en.rows == rows)
				return 0;
			if (core_buf_add(&b, d.mv_data, d.mv_size))
				return ENOMEM;
			put_be64((unsigned char *)b.p + 2 + n, rows);
			d.mv_size = b.len;
			d.mv_data = b.p;
			rc = mdb_put(t, v->dbi[DB_RECENT], &k, &d, 0);
			core_buf_release(&b);
			return rc;
		}
		/* an entry an older agentkit wrote: made again below */
	}
	if (!id || strcmp(id, lid)) {
		struct core_err e = { 0 };
		enum core_status st = lm_read_row(v, t, lid, STORE_METADATA_ONLY, &latest, NULL, &e);
		if (st != CORE_OK)
			return st == CORE_ENOMEM ? ENOMEM : MDB_CORRUPTED;
		row = latest;
	}
	put_be64(val, rows);
	if (core_buf_addc(&b, LM_ENTRY) || core_buf_addc(&b, (char)n) ||
	    core_buf_add(&b, lid, n) || core_buf_add(&b, val, 8) ||
	    st_entry_make(sid, row, &b, &ns))
		rc = ENOMEM;
	json_decref(latest);
	when = ~time_key(ns);
	if (!rc && had && get_be64(od.mv_data) != when) {
		k.mv_size = recent_key(key, get_be64(od.mv_data), sid);
		k.mv_data = key;
		if ((rc = mdb_del(t, v->dbi[DB_RECENT], &k, NULL)) == MDB_NOTFOUND)
			rc = 0;
	}
	if (!rc) {
		k.mv_size = recent_key(key, when, sid);
		k.mv_data = key;
		d.mv_size = b.len;
		d.mv_data = b.p;
		rc = mdb_put(t, v->dbi[DB_RECENT], &k, &d, 0);
	}
	core_buf_release(&b);
	if (rc)
		return rc;
	put_be64(val, when);
	memcpy(val + 8, lid, n);
	d.mv_size = 8 + n;
	d.mv_data = val;
	return mdb_put(t, v->dbi[DB_RECENTOF], &sk, &d, 0);
}

int lm_recent_build(struct env *v, MDB_txn *t)
{
	MDB_cursor *c;
	MDB_val k, d;
	char sid[STORE_ID_MAX + 1];
	int rc;
	if ((rc = mdb_drop(t, v->dbi[DB_RECENT], 0)) || (rc = mdb_drop(t, v->dbi[DB_RECENTOF], 0)))
		return rc;
	if ((rc = mdb_cursor_open(t, v->dbi[DB_SESS], &c)))
		return rc;
	for (rc = mdb_cursor_get(c, &k, &d, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) {
		if (k.mv_size > STORE_ID_MAX)
			continue;
		memcpy(sid, k.mv_data, k.mv_size);
		sid[k.mv_size] = 0;
		if ((rc = lm_recent_fix(v, t, sid, NULL, NULL)))
			break;
	}
	mdb_cursor_close(c);
	if (rc != MDB_NOTFOUND)
		return rc;
	k.mv_size = sizeof LM_ENTRIES_KEY - 1;
	k.mv_data = (void *)LM_ENTRIES_KEY;
	d.mv_size = sizeof LM_ENTRIES_VALUE - 1;
	d.mv_data = (void *)LM_ENTRIES_VALUE;
	return mdb_put(t, v->dbi[DB_RECENTOF], &k, &d, 0);
}

int lm_recent_current(struct env *v, MDB_txn *t)
{
	MDB_val k = { sizeof LM_ENTRIES_KEY - 1, (void *)LM_ENTRIES_KEY }, d;
	return mdb_get(t, v->dbi[DB_RECENTOF], &k, &d) == 0 &&
	       d.mv_size == sizeof LM_ENTRIES_VALUE - 1 &&
	       !memcmp(d.mv_data, LM_ENTRIES_VALUE, d.mv_size);
}

/* What the index needs to know about a stored row. */
struct oldrow {
	int exists;
	uint64_t tkey;
	char sid[STORE_ID_MAX + 1];
	char status[32];
	int status_set;
	char queue[STORE_QUEUE_NAME_MAX + 1];   /* its queue index entry's, or "" */
};

/* The queue whose index holds row, or NULL (store.h "Queued runs"). */
static const char *queue_name(const json_t *row)
{
	const char *q = st_str(store_queue_of(row), "name");
	if (!q || !*q || strlen(q) > STORE_QUEUE_NAME_MAX ||
	    store_status_terminal(st_str(row, "status")))
		return NULL;
	return q;
}

size_t lm_queue_key(unsigned char *k, const char *q, const char *id)
{
	size_t n = strlen(q), m = strlen(id);
	k[0] = (unsigned char)n;
	memcpy(k + 1, q, n);
	memcpy(k + 1 + n, id, m);
	return 1 + n + m;
}

/* The queue index entry of row id: old's removed, row's (NULL: none) put. */
static int index_queue(struct env *v, MDB_txn *t, const struct oldrow *o, const char *id,
                       const json_t *row, struct wctx *w)
{
	unsigned char key[LM_QUEUE_KEY_MAX];
	const char *q = row ? queue_name(row) : NULL;
	MDB_val k, d;
	int rc;
	if (!v->has_queue)
		return 0;
	if (o->queue[0] && (!q || strcmp(q, o->queue))) {
		k.mv_size = lm_queue_key(key, o->queue, id);
		k.mv_data = key;
		if ((rc = mdb_del(t, v->dbi[DB_QUEUE], &k, NULL)) && rc != MDB_NOTFOUND)
			return rc;
	}
	if (!q)
		return 0;
	core_buf_reset(&w->tmp);
	if (jv_dump(store_queue_of(row), &w->tmp) != CORE_OK)
		return ENOMEM;
	k.mv_size = lm_queue_key(key, q, id);
	k.mv_data = key;
	d.mv_size = w->tmp.len;
	d.mv_data = w->tmp.p;
	return mdb_put(t, v->dbi[DB_QUEUE], &k, &d, 0);
}

static int old_row(struct env *v, MDB_txn *t, const char *id, struct oldrow *o,
                   struct core_err *e)
{
	MDB_val k = { strlen(id), (void *)id }, d;
	json_t *meta;
	const char *x;
	int rc = mdb_get(t, v->dbi[DB_META], &k, &d);
	memset(o, 0, sizeof *o);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (d.mv_size < META_HDR || !(meta = lm_parse_val((char *)d.mv_data + META_HDR,
	                                                  d.mv_size - META_HDR, e)))
		return MDB_CORRUPTED;
	o->exists = 1;
	o->tkey = get_be64((unsigned char *)d.mv_data + 6);
	if ((x = st_str(meta, "sessionId")))
		snprintf(o->sid, sizeof o->sid, "%s", x);
	if ((x = st_str(meta, "status"))) {
		snprintf(o->status, sizeof o->status, "%s", x);
		o->status_set = 1;
	}
	if ((x = queue_name(meta)))
		snprintf(o->queue, sizeof o->queue, "%s", x);
	json_decref(meta);
	return 0;
}

/*
 * The state part of writing row id: written (*has: 1), kept as stored
 * under STORE_METADATA_ONLY when the row has none, or deleted (*has: 0).
 * *pos receives the position of "state" among the row's keys.
 */
static int row_state(struct env *v, MDB_txn *t, const json_t *row, const char *id,
                     unsigned flags, int exists, int *has, size_t *pos, struct wctx *w)
{
	const json_t *state = json_object_get(row, "state");
	MDB_val k = { strlen(id), (void *)id }, od;
	const char *key;
	json_t *x;
	int rc;
	*pos = 0;
	*has = state != NULL;
	if (!state && (flags & STORE_METADATA_ONLY) && exists) {
		if ((rc = mdb_get(t, v->dbi[DB_META], &k, &od)))
			return rc;
		*has = ((unsigned char *)od.mv_data)[1] & 1;
		*pos = get_be32((unsigned char *)od.mv_data + 2);
		return 0;
	}
	if (!state)
		return lm_delete_state(v, t, id);
	json_object_foreach((json_t *)row, key, x) {
		if (!strcmp(key, "state"))
			break;
		(*pos)++;
	}
	return lm_write_state(v, t, id, state, st_str(row, "parentId"), w);
}

/* The meta record of row id: the header, then the row without "state". */
static int put_meta(struct env *v, MDB_txn *t, const json_t *row, const char *id,
                    int has_state, size_t pos, uint64_t tkey, struct wctx *w)
{
	unsigned char hdr[META_HDR] = { 1 };
	MDB_val k = { strlen(id), (void *)id }, d;
	json_t *meta;
	hdr[1] = has_state ? 1 : 0;
	put_be32(hdr + 2, (uint32_t)pos);
	put_be64(hdr + 6, tkey);
	if (!(meta = json_copy((json_t *)row)))
		return ENOMEM;
	json_object_del(meta, "state");
	core_buf_reset(&w->tmp);
	if (core_buf_add(&w->tmp, hdr, META_HDR) != CORE_OK || jv_dump(meta, &w->tmp) != CORE_OK) {
		json_decref(meta);
		return ENOMEM;
	}
	json_decref(meta);
	d.mv_size = w->tmp.len;
	d.mv_data = w->tmp.p;
	return mdb_put(t, v->dbi[DB_META], &k, &d, 0);
}

/* The session index of row id, now in session sid at time tkey: the entry
 * moves when the session or time changed. */
static int index_row(struct env *v, MDB_txn *t, const struct oldrow *o, const char *id,
                     const char *sid, uint64_t tkey)
{
	unsigned char ik[512];
	MDB_val k, d = { 0, NULL };
	int rc;
	if (o->exists && (o->tkey != tkey || strcmp(o->sid, sid))) {
		MDB_val ok = { bysess_key(ik, o->sid, o->tkey, id), ik };
		if ((rc = mdb_del(t, v->dbi[DB_BYSESS], &ok, NULL)) && rc != MDB_NOTFOUND)
			return rc;
		if (strcmp(o->sid, sid) && ((rc = sess_add(v, t, o->sid, -1)) ||
		                            (rc = sess_add(v, t, sid, 1))))
			return rc;
	} else if (o->exists) {
		return 0;
	} else if ((rc = sess_add(v, t, sid, 1))) {
		return rc;
	}
	k.mv_size = bysess_key(ik, sid, tkey, id);
	k.mv_data = ik;
	return mdb_put(t, v->dbi[DB_BYSESS], &k, &d, 0);
}

/*
 * Write row (an object with valid snapshotId and sessionId) as given,
 * replacing the stored one.  Under STORE_METADATA_ONLY a row without
 * "state" keeps the stored state.  *changed is set when the status changed
 * (or the row is new).
 */
int lm_write_row(struct env *v, MDB_txn *t, const json_t *row, unsigned flags,
                 int *changed, struct wctx *w)
{
	const char *id = st_str(row, "snapshotId"), *sid = st_str(row, "sessionId");
	const char *status = st_str(row, "status"), *created = st_str(row, "createdAt");
	struct oldrow o;
	int64_t cns = 0;
	uint64_t tkey;
	size_t pos;
	int rc, has_state;

	if ((rc = old_row(v, t, id, &o, w->e)))
		return rc;
	if (created && !st_time_ns(created, &cns))
		cns = 0;
	tkey = time_key(cns);
	*changed = !o.exists || o.status_set != !!status ||
	           (status && strcmp(o.status, status));
	if ((rc = row_state(v, t, row, id, flags, o.exists, &has_state, &pos, w)) ||
	    (rc = put_meta(v, t, row, id, has_state, pos, tkey, w)) ||
	    (rc = index_queue(v, t, &o, id, row, w)) ||
	    (rc = index_row(v, t, &o, id, sid, tkey)))
		return rc;
	if (o.exists && strcmp(o.sid, sid) && (rc = lm_recent_fix(v, t, o.sid, NULL, NULL)))
		return rc;
	return lm_recent_fix(v, t, sid, id, row);
}

/* ---- the worker log's keys (wlog.c) ---- */

size_t lm_wlog_key(unsigned char *k, const char *id, uint64_t n)
{
	size_t len = strlen(id);
	k[0] = (unsigned char)len;
	memcpy(k + 1, id, len);
	put_be64(k + 1 + len, n);
	return 1 + len + 8;
}

int lm_wlog_ours(const MDB_val *k, const unsigned char *pre, size_t len)
{
	return k->mv_size == len + 8 && !memcmp(k->mv_data, pre, len);
}

/* Delete row id's worker log lines (none: a no-op). */
static int wlog_delete(struct env *v, MDB_txn *t, const char *id)
{
	unsigned char key[LM_WLOG_KEY_MAX];
	size_t pn = lm_wlog_key(key, id, 0) - 8;
	MDB_val k = { pn + 8, key }, d;
	MDB_cursor *c;
	int rc;
	if (!v->has_wlog)
		return 0;
	if ((rc = mdb_cursor_open(t, v->dbi[DB_WLOG], &c)))
		return rc;
	/* seek the first line again after each deletion: a cursor's place
	 * after mdb_cursor_del() is LMDB's to define */
	while ((rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE)) == 0 && lm_wlog_ours(&k, key, pn) &&
	       !(rc = mdb_cursor_del(c, 0))) {
		k.mv_size = pn + 8;
		k.mv_data = key;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int lm_delete_row(struct env *v, MDB_txn *t, const char *id, struct core_err *e)
{
	MDB_val k = { strlen(id), (void *)id };
	unsigned char ik[512];
	struct oldrow o;
	int rc;
	if ((rc = old_row(v, t, id, &o, e)) || !o.exists)
		return rc;
	if ((rc = lm_delete_state(v, t, id)) || (rc = mdb_del(t, v->dbi[DB_META], &k, NULL)) ||
	    (rc = wlog_delete(v, t, id)))
		return rc;
	if (o.queue[0] && v->has_queue) {
		unsigned char qk[LM_QUEUE_KEY_MAX];
		MDB_val q = { lm_queue_key(qk, o.queue, id), qk };
		if ((rc = mdb_del(t, v->dbi[DB_QUEUE], &q, NULL)) && rc != MDB_NOTFOUND)
			return rc;
	}
	k.mv_size = bysess_key(ik, o.sid, o.tkey, id);
	k.mv_data = ik;
	if ((rc = mdb_del(t, v->dbi[DB_BYSESS], &k, NULL)) && rc != MDB_NOTFOUND)
		return rc;
	if ((rc = sess_add(v, t, o.sid, -1)))
		return rc;
	return lm_recent_fix(v, t, o.sid, NULL, NULL);
}

/* ---- the session index, in batches ---- */


int lm_index_batch(struct env *v, MDB_txn *t, const char *sid, int backward,
                   struct idbatch *b)
{
	unsigned char pre[512];
	size_t pn = bysess_prefix(pre, sid);
	MDB_cursor *c;
	MDB_val k, d;
	int rc;
	if ((rc = mdb_cursor_open(t, v->dbi[DB_BYSESS], &c)))
		return rc;
	if (b->lastlen) {
		k.mv_size = b->lastlen;
		k.mv_data = b->last;
		rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
		if (rc == 0 && k.mv_size == b->lastlen && !memcmp(k.mv_data, b->last, b->lastlen))
			rc = mdb_cursor_get(c, &k, &d, backward ? MDB_PREV : MDB_NEXT);
		else if (backward)
			rc = rc == 0 ? mdb_cursor_get(c, &k, &d, MDB_PREV)
			             : mdb_cursor_get(c, &k, &d, MDB_LAST);
	} else if (backward) {
		memset(pre + pn, 0xFF, 9);
		k.mv_size = pn + 9;
		k.mv_data = pre;
		rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
		rc = rc == 0 ? mdb_cursor_get(c, &k, &d, MDB_PREV)
		             : rc == MDB_NOTFOUND ? mdb_cursor_get(c, &k, &d, MDB_LAST) : rc;
	} else {
		k.mv_size = pn;
		k.mv_data = pre;
		rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
	}
	b->n = 0;
	while (rc == 0 && b->n < BATCH) {
		size_t idn;
		if (k.mv_size < pn + 8 || memcmp(k.mv_data, pre, pn))
			break;
		idn = k.mv_size - pn - 8;
		memcpy(b->ids[b->n], (char *)k.mv_data + pn + 8, idn);
		b->ids[b->n][idn] = 0;
		b->n++;
		memcpy(b->last, k.mv_data, k.mv_size);
		b->lastlen = k.mv_size;
		rc = mdb_cursor_get(c, &k, &d, backward ? MDB_PREV : MDB_NEXT);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}
