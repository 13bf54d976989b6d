/*
 * chain.c - the LMDB backend's message chains: a state's messages stored
 * once per distinct history as content-addressed nodes, shared by forks
 * and reference counted, and the state records that end in them.  See
 * lm.h for the layout and store_save_on() in store.h for bases.
 */
#include "lm.h"

#include <errno.h>
#include <sha2.h>
#include <stdlib.h>
#include <string.h>

#include "../../libcore/base/json.h"
#include "../../libcore/base/util.h"

static void ref_forget(struct lmdb_store *s, const char *id)
{
	unsigned i;
	for (i = 0; i < NREFS; i++)
		if (!strcmp(s->refs[i].id, id))
			*s->refs[i].id = 0;
}

static void ref_remember(struct lmdb_store *s, const char *id, const unsigned char *tail,
                         uint32_t count)
{
	struct chain_ref *r = NULL;
	unsigned i;
	for (i = 0; i < NREFS && !r; i++)
		if (!strcmp(s->refs[i].id, id))
			r = &s->refs[i];
	if (!r)
		r = &s->refs[s->next_ref++ % NREFS];
	snprintf(r->id, sizeof r->id, "%s", id);
	memcpy(r->tail, tail, NODE);
	r->count = count;
}

/* After a full read: the row's chain, or none. */
void lm_remember_read(struct lmdb_store *s, const char *id, const struct chain_ref *r)
{
	if (r->count)
		ref_remember(s, id, r->tail, r->count);
	else
		ref_forget(s, id);
}

static const struct chain_ref *ref_find(const struct lmdb_store *s, const char *id)
{
	unsigned i;
	for (i = 0; i < NREFS; i++)
		if (*s->refs[i].id && !strcmp(s->refs[i].id, id))
			return &s->refs[i];
	return NULL;
}

/* The sequence number of the message node with this hash. */
static int node_seq(struct env *v, MDB_txn *t, const unsigned char *hash, uint64_t *seq)
{
	MDB_val k = { NODE, (void *)hash }, d;
	int rc = mdb_get(t, v->dbi[DB_NODE], &k, &d);
	if (rc == 0 && d.mv_size != 12)
		return MDB_CORRUPTED;
	if (rc == 0)
		*seq = get_be64(d.mv_data);
	return rc;
}

/*
 * Walk the chain ending at tail (count messages long) back from its tail:
 * fn(ctx, i, text, len) for each message i from count-1 down to from, its
 * stored text in the map (valid while t is).  A message's predecessor is
 * most often the one stored just before it (a turn's messages get
 * consecutive sequence numbers), so the cursor steps back to it instead
 * of searching the tree again.  LMDB's error, or fn's non-zero.
 */
static int chain_walk(struct env *v, MDB_txn *t, const unsigned char *tail, uint32_t count,
                      uint32_t from, int (*fn)(void *ctx, uint32_t i, const char *p, size_t n),
                      void *ctx)
{
	MDB_cursor *c;
	unsigned char key[8];
	uint64_t seq = 0, at = 0;
	int rc, placed = 0;
	if (from >= count)
		return 0;
	if ((rc = node_seq(v, t, tail, &seq)) || (rc = mdb_cursor_open(t, v->dbi[DB_MSG], &c)))
		return rc;
	for (uint32_t i = count; !rc && i-- > from;) {
		MDB_val k = { 8, key }, d;
		int step = placed && at == seq + 1;     /* the one stored just before */
		put_be64(key, seq);
		rc = mdb_cursor_get(c, &k, &d, step ? MDB_PREV : MDB_SET_KEY);
		if (!rc && step && (k.mv_size != 8 || get_be64(k.mv_data) != seq))
			rc = MDB_NOTFOUND;      /* not there: the message is missing */
		if (rc)
			break;
		placed = 1;
		at = seq;
		if (d.mv_size < MSG_HDR)
			rc = MDB_CORRUPTED;
		else if (!(rc = fn(ctx, i, (const char *)d.mv_data + MSG_HDR, d.mv_size - MSG_HDR)))
			seq = get_be64(d.mv_data);
	}
	mdb_cursor_close(c);
	return rc;
}

/* A failed chain_walk()'s message (fn's own failures are in e already). */
static enum core_status walk_failed(int rc, const char *what, struct core_err *e)
{
	return rc == MDB_NOTFOUND ? core_fail(e, CORE_ESYS, "corrupt store: a message is missing")
	                          : lm_fail(e, rc, what);
}

struct parse_ctx {
	json_t *arr;
	uint32_t from;
	struct core_err *e;
};

static int parse_one(void *ctx, uint32_t i, const char *p, size_t n)
{
	struct parse_ctx *c = ctx;
	json_t *m = lm_parse_val(p, n, c->e);
	return m ? json_array_set_new(c->arr, i - c->from, m) : -1;
}

/* Messages from..count-1 of the chain ending at tail (count long), parsed:
 * *out holds count - from of them. */
static enum core_status read_messages(struct env *v, MDB_txn *t, const unsigned char *tail,
                                      uint32_t count, uint32_t from, json_t **out,
                                      struct core_err *e)
{
	struct parse_ctx c = { json_array(), from, e };
	int rc;
	if (!c.arr)
		return core_fail(e, CORE_ENOMEM, "read messages: out of memory");
	for (uint32_t i = from; i < count; i++)
		json_array_append_new(c.arr, json_null());
	if ((rc = chain_walk(v, t, tail, count, from, parse_one, &c))) {
		json_decref(c.arr);
		return rc == -1 ? (e && e->st ? e->st : core_fail(e, CORE_ESYS, "corrupt store node"))
		                : walk_failed(rc, "read messages", e);
	}
	*out = c.arr;
	return CORE_OK;
}

enum core_status lm_read_state(struct env *v, MDB_txn *t, const MDB_val *id,
                               unsigned flags, json_t **out, struct chain_ref *ref,
                               struct core_err *e)
{
	MDB_val d;
	const unsigned char *h;
	json_t *rest, *msgs = NULL;
	enum core_status st;
	int rc = mdb_get(t, v->dbi[DB_STATE], (MDB_val *)id, &d);
	if (rc)
		return rc == MDB_NOTFOUND ? core_fail(e, CORE_ESYS, "corrupt store: state missing")
		                          : lm_fail(e, rc, "read state");
	h = d.mv_data;
	if (d.mv_size < STATE_HDR || h[0] != 1)
		return core_fail(e, CORE_ESYS, "corrupt store: bad state record");
	if (!(rest = lm_parse_val(h + STATE_HDR, d.mv_size - STATE_HDR, e)))
		return e ? e->st : CORE_ESYS;
	if (!(h[1] & 1)) {
		*out = rest;
		return CORE_OK;
	}
	uint32_t count = get_be32(h + 6);
	st = read_messages(v, t, h + 10, count,
	                   (flags & STORE_LAST_MESSAGE) && count ? count - 1 : 0, &msgs, e);
	if (st != CORE_OK) {
		json_decref(rest);
		return st;
	}
	if (ref) {
		memcpy(ref->tail, h + 10, NODE);
		ref->count = get_be32(h + 6);
	}
	*out = jv_object_insert_at(rest, get_be32(h + 2), "messages", msgs);
	json_decref(rest);
	return *out ? CORE_OK : core_fail(e, CORE_ENOMEM, "read state: out of memory");
}

struct texts {
	struct { const char *p; size_t n; } *v;
	size_t n;               /* the first n are kept */
};

static int keep_text(void *ctx, uint32_t i, const char *p, size_t n)
{
	struct texts *t = ctx;
	if (i < t->n) {
		t->v[i].p = p;
		t->v[i].n = n;
	}
	return 0;
}

enum core_status lm_state_texts(struct env *v, MDB_txn *t, const char *id, size_t n,
                                store_text_fn fn, void *ctx, struct core_err *e)
{
	MDB_val k = { strlen(id), (void *)id }, d;
	const unsigned char *h = NULL;
	uint32_t count = 0;
	struct texts texts = { NULL, n };
	enum core_status st = CORE_OK;
	int rc = mdb_get(t, v->dbi[DB_META], &k, &d);
	if (rc == MDB_NOTFOUND)
		return CORE_ENOTFOUND;
	if (rc)
		return lm_fail(e, rc, "read messages");
	if (d.mv_size < META_HDR)
		return core_fail(e, CORE_ESYS, "corrupt store: bad row '%s'", id);
	if (((const unsigned char *)d.mv_data)[1] & 1) {
		if ((rc = mdb_get(t, v->dbi[DB_STATE], &k, &d)))
			return rc == MDB_NOTFOUND ? core_fail(e, CORE_ESYS, "corrupt store: state missing")
			                          : lm_fail(e, rc, "read messages");
		h = d.mv_data;
		if (d.mv_size < STATE_HDR || h[0] != 1)
			return core_fail(e, CORE_ESYS, "corrupt store: bad state record");
		count = h[1] & 1 ? get_be32(h + 6) : 0;
	}
	if (n > count)
		return core_fail(e, CORE_ESYS, "snapshot '%s' holds fewer than %zu messages", id, n);
	if (!n)
		return CORE_OK;
	/* the first n, found walking back from the tail, handed on in order */
	if (!(texts.v = malloc(n * sizeof *texts.v)))
		return core_fail(e, CORE_ENOMEM, "read messages: out of memory");
	if ((rc = chain_walk(v, t, h + 10, count, 0, keep_text, &texts)))
		st = walk_failed(rc, "read messages", e);
	for (size_t i = 0; i < n && !st; i++)
		st = fn(ctx, texts.v[i].p, texts.v[i].n, e);
	free(texts.v);
	return st;
}

/* ---- writes: reference counts and message chains ---- */

/* Add delta to a node's reference count; at zero its node entry goes (the
 * caller deletes the message, *seq says which). */
static int ref_add(struct env *v, MDB_txn *t, const unsigned char *node, int delta,
                   uint32_t *after, uint64_t *seq)
{
	MDB_val k = { NODE, (void *)node }, d;
	unsigned char buf[12];
	uint32_t n;
	int rc = mdb_get(t, v->dbi[DB_NODE], &k, &d);
	if (rc)
		return rc;
	if (d.mv_size != 12)
		return MDB_CORRUPTED;
	memcpy(buf, d.mv_data, 12);
	*seq = get_be64(buf);
	n = get_be32(buf + 8);
	n = delta < 0 ? (n ? n - 1 : 0) : n + 1;
	*after = n;
	if (n == 0)
		return mdb_del(t, v->dbi[DB_NODE], &k, NULL);
	put_be32(buf + 8, n);
	d.mv_size = 12;
	d.mv_data = buf;
	return mdb_put(t, v->dbi[DB_NODE], &k, &d, 0);
}

static const unsigned char zero_node[NODE];

/* Release one reference on node; nodes left unreferenced are deleted and
 * release their predecessor in turn. */
static int node_release(struct env *v, MDB_txn *t, const unsigned char *node)
{
	unsigned char cur[NODE];
	memcpy(cur, node, NODE);
	while (memcmp(cur, zero_node, NODE)) {
		unsigned char sk[8];
		MDB_val k = { 8, sk }, d;
		uint32_t left;
		uint64_t seq;
		int rc = ref_add(v, t, cur, -1, &left, &seq);
		if (rc || left)
			return rc;
		put_be64(sk, seq);
		if ((rc = mdb_get(t, v->dbi[DB_MSG], &k, &d)))
			return rc;
		if (d.mv_size < MSG_HDR)
			return MDB_CORRUPTED;
		memcpy(cur, (unsigned char *)d.mv_data + 8, NODE);
		if ((rc = mdb_del(t, v->dbi[DB_MSG], &k, NULL)))
			return rc;
	}
	return 0;
}

/* The old state row's chain tail (zeros if none). */
static int old_tail(struct env *v, MDB_txn *t, MDB_val *id, unsigned char *tail, int *had)
{
	MDB_val d;
	int rc = mdb_get(t, v->dbi[DB_STATE], id, &d);
	memset(tail, 0, NODE);
	*had = rc == 0;
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (d.mv_size >= STATE_HDR && (((unsigned char *)d.mv_data)[1] & 1))
		memcpy(tail, (unsigned char *)d.mv_data + 10, NODE);
	return 0;
}


/*
 * out = SHA-256(p[0..n)): a node key.  libmd's portable SHA-256 (about
 * 160 MB/s here) rather than libcrypto's hardware one (about 1.2 GB/s):
 * a turn hashes only its new messages, usually a few kilobytes, while
 * loading and initialising libcrypto cost every writing process about
 * 2.5 ms, more than hashing a megabyte.  The digest, and so the store's
 * format, is the same.
 */
static void node_key(const void *p, size_t n, unsigned char *out)
{
	SHA2_CTX c;
	SHA256Init(&c);
	SHA256Update(&c, p, n);
	SHA256Final(out, &c);
}

/* How many leading messages of msgs the cache holds unchanged; their node
 * keys go into keys. */
static size_t cache_prefix(const struct msg_cache *mc, const json_t *msgs,
                           unsigned char *keys)
{
	size_t i, n = json_array_size(msgs), c = json_array_size(mc->msgs);
	for (i = 0; i < n && i < c; i++)
		if (!jv_same(json_array_get(msgs, i), json_array_get(mc->msgs, i)))
			break;
	if (i)
		memcpy(keys, mc->keys, i * NODE);
	return i;
}

/* Remember msgs and their node keys; the cache's first `same` messages are
 * already theirs.  Best effort: out of memory empties the cache. */
static void cache_keep(struct msg_cache *mc, const json_t *msgs,
                       const unsigned char *keys, size_t same)
{
	size_t i, n = json_array_size(msgs);
	if (mc->writes++ == 0)
		return;
	if (!mc->msgs && !(mc->msgs = json_array()))
		return;
	while (json_array_size(mc->msgs) > same)
		json_array_remove(mc->msgs, json_array_size(mc->msgs) - 1);
	if (n > mc->cap) {
		unsigned char *k = realloc(mc->keys, n * NODE);
		if (!k)
			goto drop;
		mc->keys = k;
		mc->cap = n;
	}
	for (i = same; i < n; i++)
		if (json_array_append_new(mc->msgs, json_deep_copy(json_array_get(msgs, i))))
			goto drop;
	if (n > same)
		memcpy(mc->keys + same * NODE, keys + same * NODE, (n - same) * NODE);
	return;
drop:
	json_array_clear(mc->msgs);
}

/*
 * The save's base (store_save_on()): its first kept messages are those of a
 * chain this handle read or wrote, so the key of message kept-1 is found by
 * walking that chain back from its tail without reading a message.  Only
 * keys[kept-1] is set; the new nodes link to it and nothing needs the
 * others.  *matched stays 0 when the base cannot be used (unknown to the
 * handle, shorter than kept, its nodes since deleted).
 */
static int base_prefix(struct env *v, MDB_txn *t, const struct wctx *w, size_t n,
                       unsigned char *keys, size_t *matched)
{
	const struct store_base *b = w->base;
	const struct chain_ref *r;
	unsigned char cur[NODE], sk[8];
	uint64_t seq;
	uint32_t j;
	int rc;
	*matched = 0;
	if (!b || !b->id || !b->kept || b->kept > n || !(r = ref_find(w->s, b->id)) ||
	    r->count < b->kept)
		return 0;
	memcpy(cur, r->tail, NODE);
	for (j = r->count;; j--) {
		MDB_val k = { 8, sk }, d;
		if ((rc = node_seq(v, t, cur, &seq)))
			return rc == MDB_NOTFOUND ? 0 : rc;
		if (j == b->kept)
			break;
		put_be64(sk, seq);
		if ((rc = mdb_get(t, v->dbi[DB_MSG], &k, &d)))
			return rc == MDB_NOTFOUND ? MDB_CORRUPTED : rc;
		if (d.mv_size < MSG_HDR)
			return MDB_CORRUPTED;
		memcpy(cur, (unsigned char *)d.mv_data + 8, NODE);
	}
	memcpy(keys + (b->kept - 1) * NODE, cur, NODE);
	*matched = b->kept;
	return 0;
}

/* AGENTKIT_STORE_VERIFY: the base's claim checked the slow way, by hashing
 * the messages said to be unchanged (tests run with it on). */
static int base_verify(struct wctx *w, const json_t *msgs, size_t kept,
                       const unsigned char *key)
{
	unsigned char k[NODE] = { 0 };
	size_t i;
	for (i = 0; i < kept; i++) {
		core_buf_reset(&w->tmp2);
		if (core_buf_add(&w->tmp2, k, NODE) != CORE_OK ||
		    jv_dump(json_array_get(msgs, i), &w->tmp2) != CORE_OK)
			return ENOMEM;
		node_key(w->tmp2.p, w->tmp2.len, k);
	}
	if (!memcmp(k, key, NODE))
		return 0;
	core_fail(w->e, CORE_EINTERNAL, "save snapshot: the first %zu messages are not "
	          "those of the base row '%s' (the caller's claim is wrong)", kept, w->base->id);
	return -1;
}

/* The tail to compare with: own_tail when not NULL and not empty, else
 * that of the row parent_id's chain.  *found stays 0 when there is none. */
static int compare_tail(struct env *v, MDB_txn *t, const unsigned char *own_tail,
                        const char *parent_id, unsigned char *tail, int *found)
{
	MDB_val k, d;
	int rc;
	*found = 0;
	if (own_tail && memcmp(own_tail, zero_node, NODE)) {
		memcpy(tail, own_tail, NODE);
		*found = 1;
		return 0;
	}
	if (!parent_id || !*parent_id || strlen(parent_id) > STORE_ID_MAX)
		return 0;
	k.mv_size = strlen(parent_id);
	k.mv_data = (void *)parent_id;
	rc = mdb_get(t, v->dbi[DB_STATE], &k, &d);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (d.mv_size < STATE_HDR || !(((unsigned char *)d.mv_data)[1] & 1))
		return 0;
	memcpy(tail, (unsigned char *)d.mv_data + 10, NODE);
	*found = 1;
	return 0;
}

/* The msg records of the chain ending at tail, newest last, at most cap
 * of them (its oldest): the chain's length is unknown until walked back.
 * *vals (to free) stays NULL when the chain is gone or broken. */
static int walk_back(struct env *v, MDB_txn *t, const unsigned char *tail, size_t cap,
                     MDB_val **vals, size_t *c)
{
	unsigned char cur[8];
	uint64_t seq;
	int rc;
	*vals = NULL;
	*c = 0;
	if ((rc = node_seq(v, t, tail, &seq)))
		return rc == MDB_NOTFOUND ? 0 : rc;
	if (!(*vals = malloc(cap * sizeof **vals)))
		return ENOMEM;
	put_be64(cur, seq);
	for (; get_be64(cur); (*c)++) {
		MDB_val k = { 8, cur };
		if (*c == cap) {        /* longer than wanted: drop its newest */
			memmove(*vals, *vals + 1, (cap - 1) * sizeof **vals);
			(*c)--;
		}
		if ((rc = mdb_get(t, v->dbi[DB_MSG], &k, &(*vals)[*c])) ||
		    (*vals)[*c].mv_size < MSG_HDR) {
			free(*vals);
			*vals = NULL;
			*c = 0;
			return rc == MDB_NOTFOUND || !rc ? 0 : rc;
		}
		memcpy(cur, (*vals)[*c].mv_data, 8);
	}
	return 0;
}

/*
 * How many leading messages of msgs are, byte for byte, the messages of a
 * stored chain: the chain whose tail is own_tail (when not NULL and not
 * empty), else the chain of the row parent_id.  Their node keys go into
 * keys[0..*matched).  Costs one node read and one memcmp per message
 * instead of hashing the whole history on every turn.
 */
static int chain_prefix(struct env *v, MDB_txn *t, const unsigned char *own_tail,
                        const char *parent_id, const json_t *msgs, unsigned char *keys,
                        size_t *matched, struct wctx *w)
{
	unsigned char tail[NODE];
	size_t c, i, n = json_array_size(msgs);
	MDB_val *vals;
	int rc, found;
	*matched = 0;
	if ((rc = compare_tail(v, t, own_tail, parent_id, tail, &found)) || !found ||
	    (rc = walk_back(v, t, tail, n + 1, &vals, &c)) || !vals)
		return rc;
	/* vals[c-1] is the oldest message; its key is SHA-256(zero | bytes) */
	for (i = 0; i < c && i < n; i++) {
		const MDB_val *nv = &vals[c - 1 - i];
		core_buf_reset(&w->tmp);
		if (jv_dump(json_array_get(msgs, i), &w->tmp) != CORE_OK) {
			free(vals);
			return ENOMEM;
		}
		if (w->tmp.len != nv->mv_size - MSG_HDR ||
		    memcmp(w->tmp.p, (char *)nv->mv_data + MSG_HDR, w->tmp.len))
			break;
		/* the key of message i is the prev pointer of message i+1, or the
		 * tail itself for the newest */
		if (i + 1 < c)
			memcpy(keys + i * NODE, (char *)vals[c - 2 - i].mv_data + 8, NODE);
		else
			memcpy(keys + i * NODE, tail, NODE);
	}
	*matched = i;
	free(vals);
	return 0;
}

/* A new object: state without "messages"; *pos receives where it sat. */
static json_t *without_messages(const json_t *state, size_t *pos)
{
	json_t *rest = json_object(), *x;
	const char *key;
	int seen = 0;
	*pos = 0;
	if (!rest)
		return NULL;
	json_object_foreach((json_t *)state, key, x) {
		if (!strcmp(key, "messages")) {
			seen = 1;
			continue;
		}
		if (!seen)
			(*pos)++;
		if (json_object_set(rest, key, x)) {
			json_decref(rest);
			return NULL;
		}
	}
	return rest;
}

/*
 * The messages a row's state is written with: an append's (STORE_APPEND)
 * first off are the base's, taken by reference to its chain and never
 * read (base_prefix()), so a turn of a long session does no work per
 * message of its history; message i >= off is a[i - off].
 */
struct mlist {
	const json_t *a;
	size_t off;
};

static size_t ml_size(const struct mlist *m)
{
	return m->off + json_array_size(m->a);
}

static const json_t *ml_get(const struct mlist *m, size_t i)
{
	return i < m->off ? NULL : json_array_get(m->a, i - m->off);
}

/*
 * Node keys of the part of msgs already stored: from the save's base
 * without reading it (*based; only the last key is set), else from the
 * history the handle wrote last by comparing trees (*cached of them),
 * else from a stored chain (this row's old state, else its parent's) by
 * comparing bytes.  Only the rest is hashed.
 */
static int known_prefix(struct env *v, MDB_txn *t, struct wctx *w, const struct mlist *m,
                        const unsigned char *old_tail, const char *parent,
                        unsigned char *keys, size_t *matched, size_t *cached, int *based)
{
	int rc;
	*cached = 0;
	if ((rc = base_prefix(v, t, w, ml_size(m), keys, matched)))
		return rc;
	/* an append's kept messages are not the caller's to check: the
	 * base's chain is taken by reference */
	if ((*based = *matched > 0))
		return w->s->verify && !w->append ? base_verify(w, m->a, *matched,
		                                                keys + (*matched - 1) * NODE) : 0;
	if (m->off)             /* no base's chain: the caller reads its messages */
		return 0;
	if ((*matched = *cached = cache_prefix(&w->s->mc, m->a, keys)))
		return 0;
	return chain_prefix(v, t, old_tail, parent, m->a, keys, matched, w);
}

/*
 * Each new message (from matched on) once as its msg record in w->tmp,
 * prev seq (zero until appended) | prev key | JSON, and its node key:
 * SHA-256 over all but the seq.  Record i starts at recs[i - matched];
 * the last entry is the end.
 */
static int hash_new(struct wctx *w, const struct mlist *m, size_t matched,
                    unsigned char *keys, size_t *recs)
{
	size_t i, n = ml_size(m);
	core_buf_reset(&w->tmp);
	for (i = matched; i < n; i++) {
		size_t at = w->tmp.len;
		recs[i - matched] = at;
		if (core_buf_add(&w->tmp, zero_node, 8) != CORE_OK ||
		    core_buf_add(&w->tmp, i ? keys + (i - 1) * NODE : zero_node,
		                 NODE) != CORE_OK ||
		    jv_dump(ml_get(m, i), &w->tmp) != CORE_OK)
			return ENOMEM;
		node_key(w->tmp.p + at + 8, w->tmp.len - at - 8, keys + i * NODE);
	}
	recs[n - matched] = w->tmp.len;
	return 0;
}

/* How many leading messages are stored (a node implies its prefix): a
 * cached prefix may have been deleted since, a base's node was just seen
 * (so keys below it, unset then, are never read). */
static int stored_prefix(struct env *v, MDB_txn *t, const unsigned char *keys, size_t n,
                         size_t *have)
{
	for (*have = n; *have > 0; (*have)--) {
		uint64_t sq;
		int rc = node_seq(v, t, keys + (*have - 1) * NODE, &sq);
		if (rc == 0)
			break;
		if (rc != MDB_NOTFOUND)
			return rc;
	}
	return 0;
}

/* The greatest msg sequence number in use (0: none). */
static int last_seq(struct env *v, MDB_txn *t, uint64_t *last)
{
	MDB_cursor *cur;
	MDB_val lk, ld;
	int rc;
	*last = 0;
	if ((rc = mdb_cursor_open(t, v->dbi[DB_MSG], &cur)))
		return rc;
	rc = mdb_cursor_get(cur, &lk, &ld, MDB_LAST);
	if (rc == 0 && lk.mv_size == 8)
		*last = get_be64(lk.mv_data);
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Message i's msg record: hashed by hash_new(), or, below matched (a
 * cached prefix deleted since, never a base's), rebuilt in w->tmp2. */
static int record_of(struct wctx *w, const struct mlist *m, size_t i, size_t matched,
                     const unsigned char *prev, const size_t *recs, MDB_val *d)
{
	if (i >= matched) {
		d->mv_data = w->tmp.p + recs[i - matched];
		d->mv_size = recs[i - matched + 1] - recs[i - matched];
		return 0;
	}
	core_buf_reset(&w->tmp2);
	if (core_buf_add(&w->tmp2, zero_node, 8) != CORE_OK ||
	    core_buf_add(&w->tmp2, prev, NODE) != CORE_OK ||
	    jv_dump(ml_get(m, i), &w->tmp2) != CORE_OK)
		return ENOMEM;
	d->mv_data = w->tmp2.p;
	d->mv_size = w->tmp2.len;
	return 0;
}

/* Append the msg records and nodes of messages have.. on the stored
 * prefix, each node referencing its predecessor. */
static int append_nodes(struct env *v, MDB_txn *t, struct wctx *w, const struct mlist *m,
                        const unsigned char *keys, const size_t *recs, size_t matched,
                        size_t have)
{
	size_t i, n = ml_size(m);
	uint64_t last, prev_seq = 0, sq_unused;
	uint32_t refs;
	int rc;
	if ((rc = last_seq(v, t, &last)) ||
	    (have && (rc = node_seq(v, t, keys + (have - 1) * NODE, &prev_seq))))
		return rc;
	for (i = have; i < n; i++) {
		unsigned char sk[8], nv[12];
		MDB_val mk = { 8, sk }, nk = { NODE, (void *)(keys + i * NODE) }, d;
		const unsigned char *prev = i ? keys + (i - 1) * NODE : zero_node;
		if ((rc = record_of(w, m, i, matched, prev, recs, &d)))
			return rc;
		put_be64(d.mv_data, prev_seq);
		put_be64(sk, ++last);
		if ((rc = mdb_put(t, v->dbi[DB_MSG], &mk, &d, MDB_APPEND)))
			return rc;
		put_be64(nv, last);
		put_be32(nv + 8, 0);
		d.mv_size = 12;
		d.mv_data = nv;
		if ((rc = mdb_put(t, v->dbi[DB_NODE], &nk, &d, 0)) ||
		    (i && (rc = ref_add(v, t, prev, 1, &refs, &sq_unused))))
			return rc;
		prev_seq = last;
	}
	return 0;
}

/*
 * An append's messages whose base chain is not one this handle knows, or
 * was deleted since: the base's first kept ones, read from its state
 * record, then msgs (-1 when the base is gone, in w->e).
 */
static int append_messages(struct env *v, MDB_txn *t, struct wctx *w, const json_t *msgs,
                           json_t **out)
{
	size_t kept = w->base->kept;
	MDB_val k = { strlen(w->base->id), (void *)w->base->id }, d;
	const unsigned char *h;
	json_t *all = NULL;
	int rc = mdb_get(t, v->dbi[DB_STATE], &k, &d);
	if (rc && rc != MDB_NOTFOUND)
		return rc;
	h = d.mv_data;
	if (rc || d.mv_size < STATE_HDR || !(h[1] & 1) || get_be32(h + 6) < kept) {
		core_fail(w->e, CORE_ESYS, "the history of row '%s' this turn follows is gone "
		          "(deleted meanwhile?)", w->base->id);
		return -1;
	}
	if (read_messages(v, t, h + 10, get_be32(h + 6), 0, &all, w->e) != CORE_OK)
		return -1;
	while (json_array_size(all) > kept)
		json_array_remove(all, json_array_size(all) - 1);
	if (json_array_extend(all, (json_t *)msgs)) {
		json_decref(all);
		return ENOMEM;
	}
	*out = all;
	return 0;
}

/* The messages of row id's state as a chain: nodes for what is not stored
 * yet, a reference on the tail, the handle's cache and chain ring brought
 * up to date; hdr receives the count and the tail. */
static int write_chain(struct env *v, MDB_txn *t, const char *id, const json_t *given,
                       const unsigned char *old_tail, const char *parent,
                       unsigned char *hdr, struct wctx *w)
{
	struct mlist m = { given, w->append ? w->base->kept : 0 };
	json_t *all = NULL;
	size_t n = ml_size(&m), matched = 0, cached, have, *recs = NULL;
	unsigned char *keys = malloc(n ? n * NODE : 1);
	uint64_t sq_unused;
	uint32_t refs;
	int rc, based;
	if (!keys)
		return ENOMEM;
	if ((rc = known_prefix(v, t, w, &m, old_tail, parent, keys, &matched, &cached,
	                       &based)))
		goto out;
	if (m.off && !based) {
		/* the base's chain cannot serve: its messages themselves */
		if ((rc = append_messages(v, t, w, given, &all)))
			goto out;
		m = (struct mlist){ all, 0 };
		if ((rc = known_prefix(v, t, w, &m, old_tail, parent, keys, &matched, &cached,
		                       &based)))
			goto out;
	}
	if (!(recs = calloc(n - matched + 1, sizeof *recs))) {
		rc = ENOMEM;
		goto out;
	}
	if ((rc = hash_new(w, &m, matched, keys, recs)))
		goto out;
	if (based)
		json_array_clear(w->s->mc.msgs);        /* now stale */
	else
		cache_keep(&w->s->mc, m.a, keys, cached);
	if (n)
		ref_remember(w->s, id, keys + (n - 1) * NODE, (uint32_t)n);
	else
		ref_forget(w->s, id);
	if ((rc = stored_prefix(v, t, keys, n, &have)) ||
	    (have < n && (rc = append_nodes(v, t, w, &m, keys, recs, matched, have))) ||
	    (n && (rc = ref_add(v, t, keys + (n - 1) * NODE, 1, &refs, &sq_unused))))
		goto out;
	hdr[1] = 1;
	put_be32(hdr + 6, (uint32_t)n);
	if (n)
		memcpy(hdr + 10, keys + (n - 1) * NODE, NODE);
out:
	free(keys);
	free(recs);
	json_decref(all);
	return rc;
}

/* Write the state of row id: new messages as chain nodes, then the state
 * record; the old record's chain is released. */
int lm_write_state(struct env *v, MDB_txn *t, const char *id, const json_t *state,
                   const char *parent, struct wctx *w)
{
	MDB_val k = { strlen(id), (void *)id }, d;
	const json_t *msgs = json_is_object(state) ? json_object_get(state, "messages") : NULL;
	unsigned char hdr[STATE_HDR] = { 1 }, prev_tail[NODE];
	size_t pos = 0;
	json_t *rest;
	int rc, had;

	if ((rc = old_tail(v, t, &k, prev_tail, &had)))
		return rc;
	if (!json_is_array(msgs)) {
		rest = json_incref((json_t *)state);
		ref_forget(w->s, id);
	} else if (!(rest = without_messages(state, &pos))) {
		return ENOMEM;
	} else if ((rc = write_chain(v, t, id, msgs, had ? prev_tail : NULL, parent, hdr,
	                             w))) {
		json_decref(rest);
		return rc;
	}
	put_be32(hdr + 2, (uint32_t)pos);
	if (had && (rc = node_release(v, t, prev_tail)))
		goto out;
	core_buf_reset(&w->tmp);
	if (core_buf_add(&w->tmp, hdr, STATE_HDR) != CORE_OK ||
	    jv_dump(rest, &w->tmp) != CORE_OK) {
		rc = ENOMEM;
		goto out;
	}
	d.mv_size = w->tmp.len;
	d.mv_data = w->tmp.p;
	rc = mdb_put(t, v->dbi[DB_STATE], &k, &d, 0);
out:
	json_decref(rest);
	return rc;
}

int lm_delete_state(struct env *v, MDB_txn *t, const char *id)
{
	MDB_val k = { strlen(id), (void *)id };
	unsigned char tail[NODE];
	int had, rc = old_tail(v, t, &k, tail, &had);
	if (rc || !had)
		return rc;
	if ((rc = node_release(v, t, tail)))
		return rc;
	return mdb_del(t, v->dbi[DB_STATE], &k, NULL);
}
