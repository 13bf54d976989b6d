/*
 * ops.c - the PostgreSQL backend's operations: reads are single
 * statements (one snapshot each, never blocked by writers); writes are
 * transactions that lock the row (SELECT ... FOR UPDATE, and for an ID
 * not stored yet a transaction-scoped advisory lock on it) and are tried
 * again, fn included, when they lose a race the server reports
 * (serialization failure, deadlock, a message node collected meanwhile).
 * See store.h and backend.h.
 */
#include "pg.h"

#include <sha2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../libcore/base/json.h"
#include "../../libcore/base/util.h"

/* Every read's columns, in this order (metadata-only reads leave the
 * state's NULL).  The state's columns are the row's own from schema step
 * 9 (T is "s"), agentkit_states' before (T is "t", JOIN that table). */
enum { C_META, C_STATE_POS, C_BODY, C_MSG_POS, C_COUNT, C_TAIL, C_MSGS, C_DEPTHS, C_ID,
       C_CREATED };
#define STATES_JOIN "LEFT JOIN agentkit_states t ON t.snapshot_id = s.snapshot_id "
#define SEL_STATE(T) "SELECT s.meta, s.state_pos, " T ".body, " T ".msg_pos, " T ".count, " \
	"encode(" T ".tail, 'hex')"
#define SEL_FULL(T, JOIN) SEL_STATE(T) ", m.msgs, m.depths, s.snapshot_id, s.created_ns " \
	"FROM agentkit_snapshots s " JOIN "LEFT JOIN LATERAL agentkit_messages(" T ".tail) m " \
	"ON " T ".tail IS NOT NULL "
/* STORE_LAST_MESSAGE: the chain's tail node alone, never the walk */
#define SEL_LAST(T, JOIN) SEL_STATE(T) ", '[' || m.body || ']', '1', s.snapshot_id, " \
	"s.created_ns FROM agentkit_snapshots s " JOIN "LEFT JOIN agentkit_nodes m ON m.hash = " \
	T ".tail "
#define SEL_META "SELECT s.meta, s.state_pos, NULL, NULL, NULL, NULL, NULL, NULL, " \
	"s.snapshot_id, s.created_ns FROM agentkit_snapshots s "

/* A read's columns: the state's last message alone under STORE_LAST_MESSAGE */
static const char *sel_read(const struct pg_store *s, unsigned flags)
{
	int row = s->steps >= PG_STEP_ROW;
	if (flags & STORE_METADATA_ONLY)
		return SEL_META;
	if (flags & STORE_LAST_MESSAGE)
		return row ? SEL_LAST("s", "") : SEL_LAST("t", STATES_JOIN);
	return row ? SEL_FULL("s", "") : SEL_FULL("t", STATES_JOIN);
}

static const char *val(const PGresult *r, int i, int c)
{
	return PQgetisnull(r, i, c) ? NULL : PQgetvalue(r, i, c);
}

/* Row i of a read. */
static enum core_status row_at(const PGresult *r, int i, json_t **row, struct core_err *e)
{
	return pg_row_join(val(r, i, C_META), val(r, i, C_STATE_POS), val(r, i, C_BODY),
	                   val(r, i, C_MSG_POS), val(r, i, C_MSGS), val(r, i, C_DEPTHS),
	                   val(r, i, C_COUNT), row, e);
}

/* Row i of a SEL_LAST read: the state's last message, and "messagesBefore"
 * (STORE_INFO_KEY) the count of those before it when there are any. */
static enum core_status row_last(const PGresult *r, int i, json_t **row, struct core_err *e)
{
	const char *count = val(r, i, C_COUNT);
	unsigned long n = count ? strtoul(count, NULL, 10) : 0;
	enum core_status st = pg_row_join(val(r, i, C_META), val(r, i, C_STATE_POS),
	                                  val(r, i, C_BODY), val(r, i, C_MSG_POS),
	                                  val(r, i, C_MSGS), val(r, i, C_DEPTHS),
	                                  val(r, i, C_TAIL) ? "1" : "0", row, e);
	if (st == CORE_OK && n > 1 && st_info_set(*row, "messagesBefore", json_integer((json_int_t)n - 1))) {
		json_decref(*row);
		*row = NULL;
		return core_fail(e, CORE_ENOMEM, "read snapshot: out of memory");
	}
	return st;
}

/* ---- the handle's chain memory ---- */

void pg_ref_forget(struct pg_store *s, const char *id)
{
	unsigned i;
	for (i = 0; i < PG_NREFS; i++)
		if (!strcmp(s->refs[i].id, id))
			*s->refs[i].id = 0;
}

void pg_ref_remember(struct pg_store *s, const char *id, const char *tail, uint32_t count)
{
	struct pg_ref *r = NULL;
	unsigned i;
	if (!tail || strlen(tail) != PG_HASH_HEX || !count) {
		pg_ref_forget(s, id);
		return;
	}
	for (i = 0; i < PG_NREFS && !r; i++)
		if (!strcmp(s->refs[i].id, id))
			r = &s->refs[i];
	if (!r)
		r = &s->refs[s->next_ref++ % PG_NREFS];
	snprintf(r->id, sizeof r->id, "%s", id);
	memcpy(r->tail, tail, PG_HASH_HEX + 1);
	r->count = count;
}

const struct pg_ref *pg_ref_find(const struct pg_store *s, const char *id)
{
	unsigned i;
	for (i = 0; i < PG_NREFS; i++)
		if (*s->refs[i].id && !strcmp(s->refs[i].id, id))
			return &s->refs[i];
	return NULL;
}

/* After a full read of row i: remember its chain as a base. */
static void remember_read(struct pg_store *s, const PGresult *r, int i)
{
	const char *count = val(r, i, C_COUNT);
	pg_ref_remember(s, PQgetvalue(r, i, C_ID), val(r, i, C_TAIL),
	                count ? (uint32_t)strtoul(count, NULL, 10) : 0);
}

/* ---- reads ---- */

/* The one row a query finds: CORE_ENOTFOUND (no message) when none. */
static enum core_status read_one(struct pg_store *s, const char *sql, const char *arg,
                                 unsigned flags, json_t **row, const char *what,
                                 struct core_err *e)
{
	const char *p[1] = { arg };
	PGresult *r;
	enum core_status st = pg_exec(s, sql, 1, p, &r, what, e);
	*row = NULL;
	if (st != CORE_OK)
		return st;
	if (PQntuples(r) == 0) {
		st = CORE_ENOTFOUND;
	} else if ((st = (flags & STORE_LAST_MESSAGE) && !(flags & STORE_METADATA_ONLY)
	                  ? row_last(r, 0, row, e) : row_at(r, 0, row, e)) == CORE_OK &&
	           !(flags & STORE_METADATA_ONLY)) {
		remember_read(s, r, 0);
	}
	PQclear(r);
	return st;
}

enum core_status pg_get(struct store *h, const char *snapshot_id, unsigned flags,
                        json_t **row, struct core_err *e)
{
	char sql[1024];
	snprintf(sql, sizeof sql, "%sWHERE s.snapshot_id = $1", sel_read(pg_store(h), flags));
	return read_one(pg_store(h), sql, snapshot_id, flags, row, "read snapshot", e);
}

enum core_status pg_latest(struct store *h, const char *session_id, unsigned flags,
                           json_t **row, struct core_err *e)
{
	char sql[1024];
	snprintf(sql, sizeof sql, "%sWHERE s.session_id = $1 "
	         "ORDER BY s.created_ns DESC, s.snapshot_id DESC LIMIT 1",
	         sel_read(pg_store(h), flags));
	return read_one(pg_store(h), sql, session_id, flags, row, "read latest snapshot", e);
}

enum core_status pg_message_texts(struct store *h, const char *snapshot_id, size_t n,
                                  store_text_fn fn, void *ctx, struct core_err *e)
{
	/* the row (depth 0), then its chain's nodes from the tail back; the
	 * tail in the row since step 9, in its agentkit_states row before */
#define TEXTS(TABLE) "WITH RECURSIVE c (prev, depth, body) AS (" \
	" SELECT m.prev, m.depth, m.body FROM " TABLE " t" \
	"  JOIN agentkit_nodes m ON m.hash = t.tail WHERE t.snapshot_id = $1" \
	" UNION ALL SELECT m.prev, m.depth, m.body FROM agentkit_nodes m" \
	"  JOIN c ON m.hash = c.prev)" \
	" SELECT 0, NULL FROM agentkit_snapshots WHERE snapshot_id = $1" \
	" UNION ALL SELECT depth, body FROM c"
	struct pg_store *s = pg_store(h);
	const char *p[1] = { snapshot_id };
	const char **texts = NULL;
	int *lens = NULL;
	PGresult *r;
	enum core_status st = pg_exec(s, s->steps >= PG_STEP_ROW ? TEXTS("agentkit_snapshots")
	                                                        : TEXTS("agentkit_states"),
	                              1, p, &r, "read messages", e);
#undef TEXTS
	size_t found = 0;
	int i, row = 0;
	if (st)
		return st;
	if (n && (!(texts = calloc(n, sizeof *texts)) || !(lens = calloc(n, sizeof *lens)))) {
		st = core_fail(e, CORE_ENOMEM, "read messages: out of memory");
		goto out;
	}
	for (i = 0; i < PQntuples(r); i++) {
		unsigned long d = strtoul(PQgetvalue(r, i, 0), NULL, 10);
		if (!d)
			row = 1;
		else if (d <= n && !texts[d - 1]) {
			texts[d - 1] = PQgetvalue(r, i, 1);
			lens[d - 1] = PQgetlength(r, i, 1);
			found++;
		}
	}
	if (!row)
		st = CORE_ENOTFOUND;
	else if (found < n)
		st = core_fail(e, CORE_ESYS, "snapshot '%s' holds fewer than %zu messages",
		               snapshot_id, n);
	for (size_t k = 0; k < n && !st; k++)
		st = fn(ctx, texts[k], (size_t)lens[k], e);
out:
	free(texts);
	free(lens);
	PQclear(r);
	return st;
}

/* ---- a whole session's rows with their states (export) ---- */

/* A message node of the session's histories, fetched once. */
struct node {
	const char *hash, *prev, *body; /* in the nodes' result (hex); prev NULL: a root */
	json_t *msg;                    /* parsed on first use */
	size_t up;                      /* prev's index, or SIZE_MAX */
};

static int node_cmp(const void *a, const void *b)
{
	return strcmp(((const struct node *)a)->hash, ((const struct node *)b)->hash);
}

static size_t node_find(const struct node *v, size_t n, const char *hash)
{
	struct node k = { .hash = hash };
	const struct node *f = hash && n ? bsearch(&k, v, n, sizeof *v, node_cmp) : NULL;
	return f ? (size_t)(f - v) : SIZE_MAX;
}

/* *arr: the count messages of the chain ending at tail, oldest first, as
 * a new array sharing the nodes' parsed messages. */
static enum core_status chain_of(struct node *v, size_t nv, const char *tail, size_t count,
                                 json_t ***tmp, size_t *cap, json_t **arr, struct core_err *e)
{
	size_t i = node_find(v, nv, tail), k;
	*arr = NULL;
	if (count > *cap) {
		json_t **t = realloc(*tmp, count * sizeof *t);
		if (!t)
			return core_fail(e, CORE_ENOMEM, "export: out of memory");
		*tmp = t;
		*cap = count;
	}
	for (k = count; k > 0; k--) {
		if (i == SIZE_MAX)
			return core_fail(e, CORE_ESYS, "corrupt store: a message is missing");
		if (!v[i].msg && !(v[i].msg = pg_node_parse(v[i].body, e)))
			return e ? e->st : CORE_ESYS;
		(*tmp)[k - 1] = v[i].msg;
		i = v[i].up;
	}
	if (i != SIZE_MAX)
		return core_fail(e, CORE_ESYS, "corrupt store: a history is longer than its count");
	if (!(*arr = json_array()))
		return core_fail(e, CORE_ENOMEM, "export: out of memory");
	for (k = 0; k < count; k++)
		if (json_array_append(*arr, (*tmp)[k])) {
			json_decref(*arr);
			*arr = NULL;
			return core_fail(e, CORE_ENOMEM, "export: out of memory");
		}
	return CORE_OK;
}

/*
 * Every row of a session with its state, oldest first, in one round trip
 * and one snapshot (a read-only repeatable-read transaction): the rows
 * without their messages, and every message node of the session's
 * histories once (a history shared by its turns is sent once, not once
 * a row); each row's messages are then placed from those, each parsed
 * once and shared by the rows that hold it.  Memory: the session's rows'
 * columns and its distinct messages.
 */
static enum core_status session_rows_full(struct pg_store *s, const char *session_id,
                                          store_row_fn fn, void *ctx, struct core_err *e)
{
#define NODES(T, JOIN) "WITH RECURSIVE c (hash) AS (SELECT " T ".tail FROM agentkit_snapshots s " \
	JOIN "WHERE s.session_id = $1 AND " T ".tail IS NOT NULL" \
	" UNION SELECT n.prev FROM agentkit_nodes n JOIN c ON n.hash = c.hash" \
	" WHERE n.prev IS NOT NULL)" \
	" SELECT encode(n.hash, 'hex'), encode(n.prev, 'hex'), n.body" \
	" FROM c JOIN agentkit_nodes n ON n.hash = c.hash"
#define ROWS(T, JOIN) SEL_STATE(T) " FROM agentkit_snapshots s " JOIN \
	"WHERE s.session_id = $1 ORDER BY s.created_ns, s.snapshot_id"
	int in_row = s->steps >= PG_STEP_ROW;
	const char *p[1] = { session_id };
	struct pg_stmt q[4] = {
		{ .sql = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY" },
		{ .sql = in_row ? NODES("s", "") : NODES("t", STATES_JOIN), .n = 1, .params = p },
		{ .sql = in_row ? ROWS("s", "") : ROWS("t", STATES_JOIN), .n = 1, .params = p },
		{ .sql = "COMMIT" },
	};
#undef NODES
#undef ROWS
	struct node *v = NULL;
	json_t **tmp = NULL;
	size_t nv, cap = 0, i;
	enum core_status st;
	int k, n;
	if ((st = pg_pipeline(s, q, 4, "list rows", e)) != CORE_OK)
		return st;
	nv = (size_t)PQntuples(q[1].res);
	if (nv && !(v = calloc(nv, sizeof *v))) {
		st = core_fail(e, CORE_ENOMEM, "export: out of memory");
		goto out;
	}
	for (i = 0; i < nv; i++) {
		v[i].hash = PQgetvalue(q[1].res, (int)i, 0);
		v[i].prev = val(q[1].res, (int)i, 1);
		v[i].body = PQgetvalue(q[1].res, (int)i, 2);
	}
	if (nv)
		qsort(v, nv, sizeof *v, node_cmp);
	for (i = 0; i < nv; i++)
		v[i].up = node_find(v, nv, v[i].prev);
	n = PQntuples(q[2].res);
	for (k = 0; k < n && st == CORE_OK; k++) {
		const PGresult *r = q[2].res;
		const char *count = val(r, k, C_COUNT), *msg_pos = val(r, k, C_MSG_POS);
		size_t c = count ? strtoul(count, NULL, 10) : 0;
		json_t *arr = NULL, *row;
		if (msg_pos && val(r, k, C_BODY) && val(r, k, C_STATE_POS) &&
		    (st = chain_of(v, nv, val(r, k, C_TAIL), c, &tmp, &cap, &arr, e)) != CORE_OK)
			break;
		if ((st = pg_row_build(val(r, k, C_META), val(r, k, C_STATE_POS), val(r, k, C_BODY),
		                       msg_pos, arr, &row, e)) != CORE_OK)
			break;
		st = fn(row, ctx);
		json_decref(row);
	}
out:
	for (i = 0; i < nv; i++)
		json_decref(v[i].msg);
	free(v);
	free(tmp);
	pg_pipeline_clear(q, 4);
	return st;
}

enum core_status pg_session_rows(struct store *h, const char *session_id,
                                 unsigned flags, store_row_fn fn, void *ctx,
                                 struct core_err *e)
{
	struct pg_store *s = pg_store(h);
	if (!(flags & STORE_METADATA_ONLY))
		return session_rows_full(s, session_id, fn, ctx, e);
	char sql[1024], after_ns[24] = "", after_id[STORE_ID_MAX + 1] = "";
	enum core_status st = CORE_OK;
	int n;
	snprintf(sql, sizeof sql, "%sWHERE s.session_id = $1 AND ($2 = '' OR "
	         "(s.created_ns, s.snapshot_id) > ($2::bigint, $3)) "
	         "ORDER BY s.created_ns, s.snapshot_id LIMIT %d", SEL_META, PG_BATCH);
	/* in batches, each its own snapshot; the callback runs between them */
	do {
		const char *p[3] = { session_id, after_ns, after_id };
		PGresult *r;
		int i;
		if ((st = pg_exec(s, sql, 3, p, &r, "list rows", e)) != CORE_OK)
			return st;
		n = PQntuples(r);
		for (i = 0; i < n && st == CORE_OK; i++) {
			json_t *row;
			if ((st = row_at(r, i, &row, e)) != CORE_OK)
				break;
			st = fn(row, ctx);
			json_decref(row);
		}
		if (n) {
			snprintf(after_ns, sizeof after_ns, "%s", PQgetvalue(r, n - 1, C_CREATED));
			snprintf(after_id, sizeof after_id, "%s", PQgetvalue(r, n - 1, C_ID));
		}
		PQclear(r);
	} while (st == CORE_OK && n == PG_BATCH);
	return st;
}

enum core_status pg_sessions_each(PGresult *r, store_session_fn fn, void *ctx,
                                  struct core_err *e)
{
	enum core_status st = CORE_OK;
	for (int i = 0; i < PQntuples(r) && st == CORE_OK; i++) {
		struct store_session_info si = { 0 };
		json_t *latest;
		if ((st = pg_row_join(PQgetvalue(r, i, 2), NULL, NULL, NULL, NULL, NULL, NULL,
		                      &latest, e)) != CORE_OK)
			break;
		si.session_id = PQgetvalue(r, i, 0);
		si.latest = latest;
		si.rows = strtoul(PQgetvalue(r, i, 1), NULL, 10);
		st = fn(&si, ctx);
		json_decref(latest);
	}
	return st;
}

enum core_status pg_sessions(struct store *h, store_session_fn fn, void *ctx,
                             struct core_err *e)
{
	static const char sql[] =
		"SELECT g.session_id, g.n, l.meta FROM (SELECT session_id, count(*) AS n"
		" FROM agentkit_snapshots WHERE session_id > $1 GROUP BY session_id"
		" ORDER BY session_id LIMIT 256) g CROSS JOIN LATERAL (SELECT meta"
		" FROM agentkit_snapshots x WHERE x.session_id = g.session_id"
		" ORDER BY x.created_ns DESC, x.snapshot_id DESC LIMIT 1) l ORDER BY g.session_id";
	struct pg_store *s = pg_store(h);
	char after[STORE_ID_MAX + 1] = "";
	enum core_status st = CORE_OK;
	int n;
	do {
		const char *p[1] = { after };
		PGresult *r;
		if ((st = pg_exec(s, sql, 1, p, &r, "list sessions", e)) != CORE_OK)
			return st;
		n = PQntuples(r);
		st = pg_sessions_each(r, fn, ctx, e);
		if (n)
			snprintf(after, sizeof after, "%s", PQgetvalue(r, n - 1, 0));
		PQclear(r);
	} while (st == CORE_OK && n == PG_BATCH);
	return st;
}

/* ---- writes ---- */

/* What a write needs to know of the row it replaces. */
struct old {
	int exists;
	int status_set;
	char status[64];
	char state_pos[16];     /* "" for none */
};

static void old_of(const PGresult *r, const json_t *row, struct old *o)
{
	const char *status = row ? st_str(row, "status") : NULL, *pos;
	memset(o, 0, sizeof *o);
	if (!(o->exists = row != NULL))
		return;
	if ((o->status_set = status != NULL))
		snprintf(o->status, sizeof o->status, "%s", status);
	if ((pos = val(r, 0, C_STATE_POS)))
		snprintf(o->state_pos, sizeof o->state_pos, "%s", pos);
}

/* A JSON array text of msgs[from..to). */
static enum core_status slice(const json_t *msgs, size_t from, size_t to, struct core_buf *out)
{
	json_t *a = json_array();
	enum core_status st;
	size_t i;
	if (!a)
		return CORE_ENOMEM;
	for (i = from; i < to; i++)
		if (json_array_append(a, json_array_get(msgs, i))) {
			json_decref(a);
			return CORE_ENOMEM;
		}
	core_buf_reset(out);
	st = jv_dump(a, out);
	json_decref(a);
	return st;
}

/* AGENTKIT_STORE_VERIFY: the base's claim checked the slow way, by hashing
 * the messages said to be unchanged on the server.  CORE_OK when they
 * match, CORE_ENOTFOUND when the base's chain is gone (the base is then
 * ignored), CORE_EINTERNAL when the claim is wrong. */
static enum core_status verify_base(struct pg_store *s, const json_t *msgs,
                                    const struct store_base *b, const struct pg_ref *ref,
                                    struct core_err *e)
{
	struct core_buf first = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	char walk[16];
	const char *p[3];
	PGresult *r;
	enum core_status st;
	if (slice(msgs, 0, b->kept, &first) != CORE_OK) {
		core_buf_release(&first);
		return core_fail(e, CORE_ENOMEM, "save snapshot: out of memory");
	}
	snprintf(walk, sizeof walk, "%u", ref->count - (uint32_t)b->kept);
	p[0] = first.p;
	p[1] = ref->tail;
	p[2] = walk;
	st = pg_exec(s, "SELECT agentkit_hash($1) = a, a IS NULL FROM "
	             "agentkit_ancestor(decode($2, 'hex'), $3) AS a", 3, p, &r,
	             "save snapshot", e);
	core_buf_release(&first);
	if (st != CORE_OK)
		return st;
	if (!strcmp(PQgetvalue(r, 0, 1), "t"))
		st = CORE_ENOTFOUND;
	else if (strcmp(PQgetvalue(r, 0, 0), "t"))
		st = core_fail(e, CORE_EINTERNAL, "save snapshot: the first %zu messages are not "
		               "those of the base row '%s' (the caller's claim is wrong)", b->kept,
		               b->id);
	PQclear(r);
	return st;
}

/* How many leading messages of msgs the handle's cache holds unchanged
 * (compared as the bytes jv_dump() would write, without writing them). */
static size_t cache_prefix(const struct pg_cache *mc, const json_t *msgs)
{
	size_t i, n = json_array_size(msgs), c = json_array_size(mc->msgs);
	for (i = 0; i < n && i < c; i++)
		if (!jv_same(json_array_get(msgs, i), json_array_get(mc->msgs, i)))
			break;
	return i;
}

/* Remember msgs and its chain's tail as the history this handle wrote
 * last; the cache's first same messages are already theirs.  The first
 * history a handle writes is not kept, so a one-shot process never pays
 * for the copy.  Best effort: out of memory empties the cache. */
static void cache_keep(struct pg_cache *mc, const json_t *msgs, size_t same,
                       const char *tail)
{
	size_t i, n = json_array_size(msgs);
	if (mc->writes++ == 0 || strlen(tail) != PG_HASH_HEX)
		return;
	if (!mc->msgs && !(mc->msgs = json_array()))
		return;
	while (json_array_size(mc->msgs) > same)
		json_array_remove(mc->msgs, json_array_size(mc->msgs) - 1);
	for (i = same; i < n; i++)
		if (json_array_append_new(mc->msgs, json_deep_copy(json_array_get(msgs, i)))) {
			json_array_clear(mc->msgs);
			return;
		}
	memcpy(mc->tail, tail, PG_HASH_HEX + 1);
}

/* Where a row's new messages go on: *tail (NULL: the empty history) and
 * *walk nodes back from it, the first *from messages being there already.
 * From the save's base when this handle knows it (checked under
 * AGENTKIT_STORE_VERIFY), else from the history this handle wrote last. */
static enum core_status known_prefix(struct pg_store *s, const json_t *msgs,
                                     const struct store_base *base, const char **tail,
                                     uint32_t *walk, size_t *from, size_t *cached,
                                     struct core_err *e)
{
	size_t n = json_array_size(msgs), c = json_array_size(s->mc.msgs);
	const struct pg_ref *ref;
	enum core_status st;
	*tail = NULL;
	*walk = 0;
	*from = *cached = 0;
	if (base && base->id && base->kept && base->kept <= n &&
	    (ref = pg_ref_find(s, base->id)) && ref->count >= base->kept) {
		st = s->verify ? verify_base(s, msgs, base, ref, e) : CORE_OK;
		if (st != CORE_OK && st != CORE_ENOTFOUND)
			return st;
		if (st == CORE_OK) {
			*tail = ref->tail;
			*walk = ref->count - (uint32_t)base->kept;
			*from = base->kept;
			return CORE_OK;
		}
	}
	if ((*cached = cache_prefix(&s->mc, msgs)) > 0) {
		*tail = s->mc.tail;
		*walk = (uint32_t)(c - *cached);
		*from = *cached;
	}
	return CORE_OK;
}

/*
 * An append's base (STORE_APPEND): the chain of the base's first kept
 * messages, as tail (hex, PG_HASH_HEX + 1 bytes) and the nodes to walk
 * back from it; from what this handle read or wrote of the base, else
 * from the base's stored state (one statement).  A base without kept
 * messages stored is CORE_ESYS: the history is gone.
 */
static enum core_status append_base(struct pg_store *s, const struct store_base *base,
                                    char *tail, uint32_t *walk, struct core_err *e)
{
	const struct pg_ref *ref = pg_ref_find(s, base->id);
	const char *p[1] = { base->id };
	enum core_status st;
	uint32_t count;
	PGresult *r;
	if (ref && ref->count >= base->kept) {
		memcpy(tail, ref->tail, PG_HASH_HEX + 1);
		*walk = ref->count - (uint32_t)base->kept;
		return CORE_OK;
	}
	if ((st = pg_exec(s, s->steps >= PG_STEP_ROW
	                  ? "SELECT encode(tail, 'hex'), count FROM agentkit_snapshots "
	                    "WHERE snapshot_id = $1"
	                  : "SELECT encode(tail, 'hex'), count FROM agentkit_states "
	                    "WHERE snapshot_id = $1", 1, p, &r, "save snapshot", e)) != CORE_OK)
		return st;
	count = PQntuples(r) ? (uint32_t)strtoul(PQgetvalue(r, 0, 1), NULL, 10) : 0;
	if (!PQntuples(r) || PQgetisnull(r, 0, 0) || strlen(PQgetvalue(r, 0, 0)) != PG_HASH_HEX ||
	    count < base->kept) {
		PQclear(r);
		return core_fail(e, CORE_ESYS, "save snapshot: the history of row '%s' this turn "
		                 "follows is gone (deleted meanwhile?)", base->id);
	}
	memcpy(tail, PQgetvalue(r, 0, 0), PG_HASH_HEX + 1);
	*walk = count - (uint32_t)base->kept;
	PQclear(r);
	return CORE_OK;
}

/* n bytes written to out as hex, then a NUL. */
static void hex_put(char *out, const unsigned char *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;
	for (i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = 0;
}

/* n bytes appended to out as hex; out stays a string.  CORE_ENOMEM. */
static enum core_status hex_add(struct core_buf *out, const unsigned char *p, size_t n)
{
	enum core_status st = core_buf_grow(out, 2 * n + 1);
	if (!st) {
		hex_put(out->p + out->len, p, n);
		out->len += 2 * n;
	}
	return st;
}

enum core_status pg_entry_hex(const char *sid, const json_t *row, struct core_buf *out,
                              char listed[24])
{
	struct core_buf raw = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	int64_t ns = 0;
	enum core_status st = st_entry_make(sid, row, &raw, &ns);
	snprintf(listed, 24, "%lld", (long long)ns);
	if (!st)
		st = hex_add(out, (const unsigned char *)raw.p, raw.len);
	core_buf_release(&raw);
	return st;
}

static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The 32 bytes of a node hash given in hex (PG_HASH_HEX digits); 0 when it
 * is not one. */
static int hash_bytes(const char *hex, unsigned char h[SHA256_DIGEST_LENGTH])
{
	size_t i;
	int hi, lo;
	if (!hex || strlen(hex) != PG_HASH_HEX)
		return 0;
	for (i = 0; i < SHA256_DIGEST_LENGTH; i++) {
		if ((hi = hex_digit(hex[2 * i])) < 0 || (lo = hex_digit(hex[2 * i + 1])) < 0)
			return 0;
		h[i] = (unsigned char)(hi << 4 | lo);
	}
	return 1;
}

/* A node's hash, SHA-256(h, its prev's hash or 32 zero bytes, then
 * body[0..n)), into h: OpenSSL's when libpq brought it (pq.h), else
 * libmd's. */
static void node_hash(unsigned char h[SHA256_DIGEST_LENGTH], const char *body, size_t n)
{
	union {
		unsigned char ossl[PQ_SHA256_CTX];
		uint64_t align;
		SHA2_CTX md;
	} c;
	if (pq_api.sha256_final) {
		pq_api.sha256_init(&c);
		pq_api.sha256_update(&c, h, SHA256_DIGEST_LENGTH);
		pq_api.sha256_update(&c, body, n);
		pq_api.sha256_final(h, &c);
		return;
	}
	SHA256Init(&c.md);
	SHA256Update(&c.md, h, SHA256_DIGEST_LENGTH);
	SHA256Update(&c.md, (const unsigned char *)body, n);
	SHA256Final(h, &c.md);
}

/* OIDs of PostgreSQL's built-in types, for arrays in binary */
#define PG_BYTEA_OID 17
#define PG_TEXT_OID 25

/* The head of a one-dimensional array of n elements of type oid in
 * PostgreSQL's binary format (array_recv(): dimensions, no NULLs, the
 * element type, then each dimension's length and lower bound; an empty
 * array has no dimension), appended to b. */
static enum core_status array_head(struct core_buf *b, uint32_t oid, size_t n)
{
	unsigned char h[20];
	put_be32(h, n ? 1 : 0);
	put_be32(h + 4, 0);
	put_be32(h + 8, oid);
	put_be32(h + 12, (uint32_t)n);
	put_be32(h + 16, 1);
	return core_buf_add(b, h, n ? sizeof h : 12);
}

/*
 * The chain of msgs[from..n) hung from the node base (hex; NULL: the
 * empty history), as the server's agentkit_chain() would make it: text,
 * the messages' bodies, jv_dump()'s bytes (what the server stores);
 * hashes, each node's SHA-256(its prev's hash, or 32 zero bytes, then its
 * body); tail, the last node in hex (base when there are none; "" for the
 * empty history).  With bin (put_row), text is a text[] and hashes a
 * bytea[], both in binary; else (put_new) text is the bodies as one JSON
 * array and hashes their hex, one after another.  The server's
 * convert_to(body, 'UTF8') is these bytes whatever the database's
 * encoding: the connection's client_encoding is UTF8.
 */
static enum core_status chain_new(const json_t *msgs, size_t from, const char *base, int bin,
                                  struct core_buf *text, struct core_buf *hashes,
                                  char tail[PG_HASH_HEX + 1])
{
	unsigned char h[SHA256_DIGEST_LENGTH] = { 0 }, len[4];
	size_t i, at, n = json_array_size(msgs);
	enum core_status st;
	hash_bytes(base, h);
	snprintf(tail, PG_HASH_HEX + 1, "%s", base ? base : "");
	core_buf_reset(text);
	core_buf_reset(hashes);
	if ((st = bin ? array_head(text, PG_TEXT_OID, n - from) : core_buf_addc(text, '[')) ||
	    (bin && (st = array_head(hashes, PG_BYTEA_OID, n - from))))
		return st;
	for (i = from; i < n && !st; i++) {
		if ((!bin && i > from && (st = core_buf_addc(text, ','))) ||
		    (bin && (st = core_buf_add(text, "\0\0\0\0", 4))))
			break;
		at = text->len;
		if ((st = jv_dump(json_array_get(msgs, i), text)) != CORE_OK)
			break;
		if (bin)
			put_be32((unsigned char *)text->p + at - 4, (uint32_t)(text->len - at));
		node_hash(h, text->p + at, text->len - at);
		put_be32(len, sizeof h);
		if (bin)
			st = core_buf_add(hashes, len, 4) || core_buf_add(hashes, h, sizeof h)
			     ? CORE_ENOMEM : CORE_OK;
		else
			st = hex_add(hashes, h, sizeof h);
	}
	if (!st && i > from)
		hex_put(tail, h, sizeof h);
	return st || bin ? st : core_buf_addc(text, ']');
}

/*
 * A new row in one statement of plain SQL (schema step 8): its chain's
 * new nodes, the row, its state and its session's listing entry, no
 * PL/pgSQL called (a new server process would load and compile it).
 * The base node and every node of the new messages already stored are
 * held FOR KEY SHARE, as agentkit_chain() holds them, so a concurrent
 * deletion cannot collect them before the commit; when the base is gone,
 * or a node was stored meanwhile by a writer this statement does not
 * see, the row is not written: the statement says 0 rows written, and
 * whether the base (or the empty history) was there.  Without the base
 * the caller takes it as agentkit_put()'s NULL: the chain is gone, send
 * the whole history; with it, the same statement again sees the node
 * that writer stored.  The entry is folded in by (created_ns, snapshot_id)
 * against the entry as it stands when locked: the trigger skips the row
 * (agentkit.recent_id).  The stored nodes among the new ones are looked
 * up by key (= ANY of their hashes): as a join with the messages, whose
 * count the generic plan cannot know, the planner hashed them against a
 * scan of all of agentkit_nodes, a turn's cost growing with the store's
 * size (0.47 ms of the server's time at 2,000 nodes against 0.17 ms).
 */
#define PG_NEWER "(EXCLUDED.latest_ns, EXCLUDED.latest_id) > (e.latest_ns, e.latest_id)"
#define PG_KEEP(col) " " col " = CASE WHEN " PG_NEWER " THEN EXCLUDED." col " ELSE e." col " END"
static const char put_new[] =
	"WITH bl AS (SELECT depth FROM agentkit_nodes WHERE hash = decode($10, 'hex')"
	"  FOR KEY SHARE),"
	" b AS (SELECT depth FROM bl UNION ALL SELECT 0 WHERE $10::text IS NULL),"
	" k AS (SELECT decode(substr($12, i::integer * 64 - 63, 64), 'hex') AS hash,"
	"  CASE WHEN i = 1 THEN decode($10, 'hex')"
	"  ELSE decode(substr($12, i::integer * 64 - 127, 64), 'hex') END AS prev,"
	"  b.depth + i::integer AS depth, x::text AS body"
	"  FROM b, json_array_elements($11::json) WITH ORDINALITY AS a (x, i)),"
	" h AS (SELECT hash FROM agentkit_nodes WHERE hash = ANY (ARRAY (SELECT hash FROM k))"
	"  FOR KEY SHARE),"
	" m AS (INSERT INTO agentkit_nodes (hash, prev, depth, body)"
	"  SELECT hash, prev, depth, body FROM k ON CONFLICT (hash) DO NOTHING RETURNING 1),"
	" s AS (INSERT INTO agentkit_snapshots (snapshot_id, session_id, created_ns, status,"
	"  meta, state_pos) SELECT $1, $2, $3, $4, $5, $6"
	"  FROM b, (SELECT set_config('agentkit.recent_id', $1, true)) g"
	"  WHERE (SELECT count(*) FROM h) + (SELECT count(*) FROM m) = (SELECT count(*) FROM k)"
	"  RETURNING 1),"
	" t AS (INSERT INTO agentkit_states (snapshot_id, body, msg_pos, tail, count)"
	"  SELECT $1, $8, $9, decode($13, 'hex'), $14 FROM s WHERE $7 RETURNING 1),"
	" r AS (INSERT INTO agentkit_recent AS e (session_id, updated_ns, latest_id, row_count,"
	"  entry, latest_ns) SELECT $2, $16, $1, 1, decode($15, 'hex'), $3 FROM s"
	"  ON CONFLICT (session_id) DO UPDATE SET row_count = e.row_count + 1,"
	PG_KEEP("updated_ns") "," PG_KEEP("entry") "," PG_KEEP("latest_id") ","
	PG_KEEP("latest_ns") " RETURNING 1)"
	" SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM b)";

/*
 * put_new from schema step 9: the state in the row's tuple, the entry
 * kept without the trigger's setting, and the new messages and their
 * hashes as binary arrays ($11 text[], $10 bytea[]; $9 the base, bytea,
 * NULL for the empty history), each node's prev the one before it: no
 * JSON for the server to parse, no hex to decode.  $7 is the state's body
 * (NULL: no state), $12 the count of the chain's messages, $13 and $14
 * the entry (hex) and its time; the same answer.  No trigger runs on the
 * insert: a row that names a queue goes in by put_row_queued, which also
 * indexes it (agentkit_queue_put()).
 */
#define PUT_ROW(QUEUE, QUEUED) \
	"WITH b AS (SELECT depth FROM agentkit_nodes WHERE hash = $9::bytea FOR KEY SHARE)," \
	" h AS (SELECT FROM agentkit_nodes WHERE hash = ANY ($10::bytea[]) FOR KEY SHARE)," \
	" m AS (INSERT INTO agentkit_nodes (hash, prev, depth, body)" \
	"  SELECT x.h, CASE WHEN x.i = 1 THEN $9::bytea ELSE ($10::bytea[])[x.i - 1] END," \
	"  coalesce((SELECT depth FROM b), 0) + x.i::integer, x.t" \
	"  FROM unnest($10::bytea[], $11::text[]) WITH ORDINALITY AS x (h, t, i)" \
	"  WHERE $9::bytea IS NULL OR EXISTS (SELECT FROM b)" \
	"  ON CONFLICT (hash) DO NOTHING RETURNING 1)," \
	" s AS (INSERT INTO agentkit_snapshots (snapshot_id, session_id, created_ns, status," \
	"  meta, state_pos, body, msg_pos, tail, count)" \
	"  SELECT $1, $2, $3, $4, $5, $6, $7, $8," \
	"  coalesce(($10::bytea[])[cardinality($10::bytea[])], $9::bytea), $12" \
	"  WHERE ($9::bytea IS NULL OR EXISTS (SELECT FROM b))" \
	"  AND (SELECT count(*) FROM h) + (SELECT count(*) FROM m) = cardinality($10::bytea[])" \
	"  RETURNING 1)," \
	" r AS (INSERT INTO agentkit_recent AS e (session_id, updated_ns, latest_id, row_count," \
	"  entry, latest_ns) SELECT $2, $14, $1, 1, decode($13, 'hex'), $3 FROM s" \
	"  ON CONFLICT (session_id) DO UPDATE SET row_count = e.row_count + 1," \
	PG_KEEP("updated_ns") "," PG_KEEP("entry") "," PG_KEEP("latest_id") "," \
	PG_KEEP("latest_ns") " RETURNING 1)" QUEUE \
	" SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM b) + ($9::bytea IS NULL)::integer" \
	QUEUED
static const char put_row[] = PUT_ROW("", "");
static const char put_row_queued[] =
	PUT_ROW(", q AS (SELECT agentkit_queue_put($1, $5) FROM s)", ", (SELECT count(*) FROM q)");

/* Whether a new row is one the queue indexes (step 7's WHEN, in C). */
static int names_queue(const struct pg_cols *c)
{
	return c->status && (!strcmp(c->status, "pending") || !strcmp(c->status, "aborting")) &&
	       strstr(c->meta.p, "\"queue\"");
}

/* Why a write_row() with stale wrote nothing (*stale; 0: it wrote). */
enum {
	STALE_CHAIN = 1,        /* the base's chain is gone: the whole history */
	STALE_READ,             /* STORE_NEW cannot go on: read the row first */
	STALE_AGAIN,            /* a node's race lost: the same save again */
};

/* The advisory lock every writer of a row takes first (transaction
 * scoped): two writers of one ID, the first one to create it included,
 * serialize on it; but a new row's save since schema step 9, which
 * claims the ID by its INSERT (write_row()). */
static const char lock_sql[] = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";

/*
 * Write row as given (valid snapshotId and sessionId), replacing the row o
 * describes, in the caller's transaction.  Under STORE_METADATA_ONLY a row
 * without "state" keeps the stored state.  Only the messages the store may
 * not hold yet are sent (known_prefix()); when the chain they continue was
 * collected meanwhile, the whole history is.  *changed: the stored row's
 * status changed (a new row is no change: see backend.h).  A new row
 * hung from its base's tail goes in by plain SQL (put_row; put_new before
 * schema step 9), any other write by agentkit_put().
 *
 * With stale (not NULL) the write and the COMMIT go in one round trip
 * (pg_pipeline()), the transaction's last; when the chain the new
 * messages continue was collected meanwhile, nothing was written, the
 * transaction committed empty, what the handle remembered of that chain
 * is forgotten and *stale is STALE_CHAIN: the caller runs the whole save
 * again, which then sends the whole history.
 *
 * With begin (and stale), the row was not read (STORE_NEW) and the round
 * trip is the whole transaction: the write, which the pipeline's sync
 * commits (an implicit transaction: a BEGIN and a COMMIT of their own
 * cost the server about 25 us a turn); the write is put_row's, whose
 * INSERT fails (23505) when the row is there after all.  It takes no lock
 * on the ID (12-15 us a turn): its INSERT claims the ID, and a writer of
 * the same ID that read no row before it committed, whatever its write,
 * inserts too (since step 9 agentkit_put() inserts a row it did not find,
 * where it upserted), waits for it, fails (23505) and is tried again,
 * reading the row.  Before step 9 it takes the lock first, as every
 * writer does.  A write put_row cannot make is not sent, and
 * *stale is STALE_READ: read the row first.  When put_row lost a race for
 * a node (its base still there), *stale is STALE_AGAIN: the same save
 * again.
 */
static enum core_status write_row(struct pg_store *s, const json_t *row, unsigned flags,
                                  const struct old *o, const struct store_base *base,
                                  int *changed, int *stale, int begin, struct core_err *e)
{
	static const char put5[] =
		"SELECT agentkit_put($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, decode($11, 'hex'),"
		" $12, $13, $14, $15)";
	/* with the row's listing entry and time (schema step 6) */
	static const char put6[] =
		"SELECT agentkit_put($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, decode($11, 'hex'),"
		" $12, $13, $14, $15, $16, $17)";
	const char *sql = s->steps >= PG_STEP_ENTRIES ? put6 : put5;
	int nparams = s->steps >= PG_STEP_ENTRIES ? 17 : 15;
	char listed[24];
	struct core_buf msgs = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_buf hashes = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_buf entry = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	char walk_s[16], count[16] = "0", tail_s[PG_HASH_HEX + 1], put_tail[PG_HASH_HEX + 1];
	const char *tail = NULL;
	struct pg_cols c;
	enum core_status st;
	size_t n = 0, from = 0, cached = 0;
	uint32_t walk = 0;
	int keep, plain, done, raced;
	int append = (flags & STORE_APPEND) && base && base->id && base->kept;
	PGresult *r;

	if ((st = pg_cols_of(row, &c, e)) != CORE_OK)
		return st;
	if (nparams == 17 && (st = pg_entry_hex(c.sid, row, &entry, listed)) != CORE_OK) {
		st = core_fail(e, st, "save snapshot: out of memory");
		goto out;
	}
	/* NOTIFY serializes the commits that send it (a database-wide lock at
	 * commit), so only a stored row's status change sends one: nobody
	 * waits for a row that does not exist yet (backend.h) */
	*changed = o->exists && (o->status_set != (c.status != NULL) ||
	                         (c.status && strcmp(o->status, c.status)));
	keep = !c.has_state && (flags & STORE_METADATA_ONLY) && o->exists;
	if (c.msgs && append) {
		n = json_array_size(c.msgs);
		snprintf(count, sizeof count, "%zu", n + base->kept);
		if ((st = append_base(s, base, tail_s, &walk, e)) != CORE_OK)
			goto out;
		tail = tail_s;
	} else if (c.msgs) {
		n = json_array_size(c.msgs);
		snprintf(count, sizeof count, "%zu", n);
		if ((st = known_prefix(s, c.msgs, base, &tail, &walk, &from, &cached, e)) != CORE_OK)
			goto out;
		if (tail) {
			memcpy(tail_s, tail, PG_HASH_HEX + 1);
			tail = tail_s;
		}
	}
	for (;;) {
		const char *p[17] = {
			c.id, c.sid, c.created, c.status, c.meta.p,
			keep ? (*o->state_pos ? o->state_pos : NULL)
			     : (c.has_state ? c.state_pos : NULL),
			keep ? "t" : "f", c.has_state ? "t" : "f", c.has_state ? c.body.p : NULL,
			*c.msg_pos ? c.msg_pos : NULL, tail, walk_s,
			NULL, count, *changed ? "t" : "f", entry.p, listed,
		};
		/* a new row from its base's tail: put_new's parameters */
		const char *q[16] = {
			c.id, c.sid, c.created, c.status, c.meta.p, p[5], p[7], p[8], p[9], tail,
			NULL, NULL, NULL, count, entry.p, listed,
		};
		/* put_row's, with the base and the chain in binary */
		unsigned char base_h[SHA256_DIGEST_LENGTH];
		const char *w9[14] = {
			c.id, c.sid, c.created, c.status, c.meta.p, p[5], p[8], p[9],
			hash_bytes(tail, base_h) ? (const char *)base_h : NULL, NULL, NULL, count,
			entry.p, listed,
		};
		int len9[14] = { [8] = sizeof base_h }, fmt9[14] = { [8] = 1, [9] = 1, [10] = 1 };
		struct pg_stmt put = { .sql = sql, .n = nparams, .params = p };
		int row9 = s->steps >= PG_STEP_ROW;
		plain = s->steps >= PG_STEP_PLAIN && !o->exists && walk == 0;
		if (begin && !plain) {
			*stale = STALE_READ;
			break;
		}
		snprintf(walk_s, sizeof walk_s, "%u", walk);
		if (plain && chain_new(c.msgs, from, tail, row9, &msgs, &hashes,
		                       put_tail) != CORE_OK) {
			st = core_fail(e, CORE_ENOMEM, "save snapshot: out of memory");
			goto out;
		} else if (plain && row9) {
			w9[9] = hashes.p;
			w9[10] = msgs.p;
			len9[9] = (int)hashes.len;
			len9[10] = (int)msgs.len;
			put = (struct pg_stmt){ .sql = names_queue(&c) ? put_row_queued : put_row,
			                        .n = 14, .params = w9, .lengths = len9, .formats = fmt9 };
		} else if (plain) {
			if (c.msgs) {
				q[10] = msgs.p;
				q[11] = hashes.len ? hashes.p : "";
				q[12] = *put_tail ? put_tail : NULL;
			}
			put = (struct pg_stmt){ .sql = put_new, .n = 16, .params = q };
		} else if (c.msgs && slice(c.msgs, from, n, &msgs) != CORE_OK) {
			st = core_fail(e, CORE_ENOMEM, "save snapshot: out of memory");
			goto out;
		} else if (c.msgs) {
			p[12] = msgs.p;
		}
		if (stale) {
			/* begin: the write (before step 9 the ID's lock first),
			 * one implicit transaction; else the write and the
			 * COMMIT */
			const char *id[1] = { c.id };
			struct pg_stmt w[3] = {
				{ .sql = lock_sql, .n = 1, .params = id }, put, { .sql = "COMMIT" },
			};
			struct pg_stmt *t = begin && !row9 ? w : w + 1;
			int nt = begin && row9 ? 1 : 2;
			if ((st = pg_pipeline(s, t, nt, "write snapshot", e)) != CORE_OK)
				goto out;
			r = w[1].res;
			w[1].res = NULL;
			pg_pipeline_clear(t, nt);
		} else if ((st = pg_pipeline(s, &put, 1, "write snapshot", e)) != CORE_OK) {
			goto out;
		} else {
			r = put.res;
		}
		if (plain) {
			done = !strcmp(PQgetvalue(r, 0, 0), "1");
			raced = !done && !strcmp(PQgetvalue(r, 0, 1), "1");
		} else {
			raced = 0;
			done = !PQgetisnull(r, 0, 0) || !tail;
			snprintf(put_tail, sizeof put_tail, "%s", done ? PQgetvalue(r, 0, 0) : "");
		}
		PQclear(r);
		if (done) {
			if (c.msgs && append) {
				pg_ref_remember(s, c.id, put_tail, (uint32_t)(n + base->kept));
				json_array_clear(s->mc.msgs);   /* not the history written last */
			} else if (c.msgs) {
				pg_ref_remember(s, c.id, put_tail, (uint32_t)n);
				if (from && !cached)
					json_array_clear(s->mc.msgs);   /* a base: stale now */
				else
					cache_keep(&s->mc, c.msgs, cached, put_tail);
			} else if (!keep) {
				pg_ref_forget(s, c.id);
			}
			break;
		}
		if (raced && stale) {
			*stale = STALE_AGAIN;   /* committed empty */
			break;
		}
		/* the chain they continue was collected since: the whole history */
		if (append && !stale) {
			st = core_fail(e, CORE_ESYS, "save snapshot '%s': the history of row '%s' this "
			               "turn follows is gone (deleted meanwhile?)", c.id, base->id);
			goto out;
		}
		if (stale) {
			if (base && base->id)
				pg_ref_forget(s, base->id);
			json_array_clear(s->mc.msgs);
			*stale = STALE_CHAIN;
			break;
		}
		tail = NULL;
		from = cached = 0;
		walk = 0;
		json_array_clear(s->mc.msgs);
	}
out:
	core_buf_release(&msgs);
	core_buf_release(&hashes);
	core_buf_release(&entry);
	pg_cols_release(&c);
	return st;
}

/*
 * After a failed try of a transaction: roll it back, and say whether to
 * try again - the server reported a race (pg_retryable()) and a try is
 * left of PG_TRIES.  Then e is emptied for the next try, after a pause
 * that grows with the tries (1, 2, 4 ... 32 ms, with jitter, so writers
 * that deadlocked on each other do not meet again at once: 127 ms at
 * most in all); otherwise e keeps the failure's message for the caller.
 */
static int try_again(struct pg_store *s, int tries, struct core_err *e)
{
	int64_t ms = (int64_t)1 << (tries < 5 ? tries : 5);
	if (s->in_txn)
		pg_rollback(s);
	if (!pg_retryable(s) || tries + 1 >= PG_TRIES)
		return 0;
	if (e)
		e->st = CORE_OK, e->msg[0] = 0;
	pg_nap(ms / 2 + (int64_t)(core_now_ns() % (uint64_t)(ms + 1)));
	return 1;
}

/*
 * Run a write transaction: begin, op, commit; on a race the server
 * reports, roll back and try again (at most PG_TRIES times, try_again()).
 */
typedef enum core_status (*write_op)(struct pg_store *s, void *ctx, struct core_err *e);

static enum core_status run_write(struct pg_store *s, const char *what, write_op op,
                                  void *ctx, struct core_err *e)
{
	enum core_status st = CORE_OK;
	int tries;
	for (tries = 0;; tries++) {
		s->last_state[0] = 0;
		if ((st = pg_cmd(s, "BEGIN", what, e)) != CORE_OK) {
			if (s->in_txn)
				pg_rollback(s);
			return st;
		}
		if ((st = op(s, ctx, e)) == CORE_OK &&
		    (st = pg_cmd(s, "COMMIT", what, e)) == CORE_OK)
			return CORE_OK;
		if (!try_again(s, tries, e))
			return st;
	}
}

/* ---- save (read-modify-write) ---- */

struct save_ctx {
	const char *id;
	unsigned flags;
	const struct store_base *base;
	store_mutate_fn fn;
	void *fctx;
	json_t *next;           /* fn's result, shaped by the store */
	int fresh;              /* STORE_NEW: try without reading the row */
};

static enum core_status lock_id(struct pg_store *s, const char *id, const char *what,
                                struct core_err *e)
{
	const char *p[1] = { id };
	PGresult *l;
	enum core_status st = pg_exec(s, lock_sql, 1, p, &l, what, e);
	PQclear(l);
	return st;
}

/*
 * Begin the transaction and read the row to change, locked: the advisory
 * lock on its ID (every writer of a row holds it, so two saves of one ID
 * serialize, a first write included), then the row's own lock with the
 * read, all in one round trip (pg_pipeline()).  A locking read that had
 * to wait would see the locked row's new version but the joined state as
 * it was; holding the ID's lock first, it never waits for another writer
 * of this row.  Both locks wait at most lock_timeout.
 *
 * The locked read is of the metadata: a turn's row is a new ID, and the
 * read of a state (a join with its message chain) costs a new server
 * process 3-9 ms of planning a read of a row that is not there.  A row
 * that is there with a state (and a save that wants it) is read whole by
 * a second statement, under the locks already held.
 */
static enum core_status lock_row(struct pg_store *s, const char *id, unsigned flags,
                                 PGresult **r, struct core_err *e)
{
	const char *p[1] = { id };
	char sql[1024];
	struct pg_stmt q[3] = {
		{ .sql = "BEGIN" }, { .sql = lock_sql, .n = 1, .params = p },
		{ .sql = sql, .n = 1, .params = p },
	};
	enum core_status st;
	snprintf(sql, sizeof sql, "%sWHERE s.snapshot_id = $1 FOR UPDATE OF s", SEL_META);
	if ((st = pg_pipeline(s, q, 3, "save snapshot", e)) != CORE_OK)
		return st;
	PQclear(q[0].res);
	PQclear(q[1].res);
	*r = q[2].res;
	if ((flags & STORE_METADATA_ONLY) || !PQntuples(*r) || PQgetisnull(*r, 0, C_STATE_POS))
		return CORE_OK;
	PQclear(*r);
	*r = NULL;
	snprintf(sql, sizeof sql, "%sWHERE s.snapshot_id = $1", sel_read(s, 0));
	return pg_exec(s, sql, 1, p, r, "save snapshot", e);
}

/*
 * One try of a save, two round trips (three for a stored row with a
 * state): BEGIN with the locked read, then
 * (after fn) the write with the COMMIT.  CORE_OK with *stale set when the
 * write found its base chain collected (nothing written: try again).
 */
static enum core_status save_once(struct pg_store *s, struct save_ctx *c, int *stale,
                                  struct core_err *e)
{
	json_t *existing = NULL;
	struct old o;
	PGresult *r;
	enum core_status st;
	int changed;
	*stale = 0;
	if (c->fresh) {
		/* STORE_NEW: fn on no row, the whole transaction one round trip */
		memset(&o, 0, sizeof o);
		json_decref(c->next);
		c->next = NULL;
		if (st_mutate(c->id, NULL, c->fn, c->fctx, &c->next, e) == CORE_OK && c->next)
			return write_row(s, c->next, c->flags, &o, c->base, &changed, stale, 1, e);
		/* fn failed, or wrote nothing, on no row: see what is there */
		if (e)
			e->st = CORE_OK, e->msg[0] = 0;
		*stale = STALE_READ;
		return CORE_OK;
	}
	if ((st = lock_row(s, c->id, c->flags, &r, e)) != CORE_OK)
		return st;
	if (PQntuples(r) && (st = row_at(r, 0, &existing, e)) != CORE_OK) {
		PQclear(r);
		return st;
	}
	old_of(r, existing, &o);
	if (existing && !(c->flags & STORE_METADATA_ONLY))
		remember_read(s, r, 0);
	PQclear(r);
	json_decref(c->next);
	c->next = NULL;
	st = st_mutate(c->id, existing, c->fn, c->fctx, &c->next, e);
	json_decref(existing);
	if (st != CORE_OK)
		return st;
	if (!c->next)
		return pg_cmd(s, "COMMIT", "save snapshot", e);
	return write_row(s, c->next, c->flags, &o, c->base, &changed, stale, 0, e);
}

enum core_status pg_save(struct store *h, const char *id, unsigned flags,
                         const struct store_base *base, store_mutate_fn fn, void *ctx,
                         json_t **persisted, struct core_err *e)
{
	struct pg_store *s = pg_store(h);
	struct save_ctx c = { id, flags, base, fn, ctx, NULL,
	                      (flags & STORE_NEW) && s->steps >= PG_STEP_PLAIN };
	enum core_status st = CORE_OK;
	int tries, stale;
	for (tries = 0; tries < PG_TRIES; tries++) {
		s->last_state[0] = 0;
		if ((st = save_once(s, &c, &stale, e)) == CORE_OK && !stale)
			break;
		/* a node's race lost: the same save again; a try without the
		 * read, once: the row was there after all (the new row's 23505, a
		 * race try_again() retries), or the write is not put_row's
		 * (STALE_READ, nothing sent) */
		if (st == CORE_OK && stale == STALE_AGAIN)
			continue;
		if (c.fresh) {
			c.fresh = 0;
			if (st == CORE_OK && stale == STALE_READ) {
				tries--;
				continue;
			}
		}
		if (st == CORE_OK)
			continue;       /* committed empty: again, with the whole history */
		if (!try_again(s, tries, e))
			break;
	}
	if (st == CORE_OK && stale)
		st = core_fail(e, CORE_ESYS, "save snapshot: the row's history kept changing "
		               "under it (%d tries)", PG_TRIES);
	if (st == CORE_OK && persisted && c.next)
		*persisted = json_incref(c.next);
	json_decref(c.next);
	return st;
}

/* ---- put (import) ---- */

struct put_ctx {
	const struct store_rows *src;
	size_t n;
};

static enum core_status put_op(struct pg_store *s, void *ctx, struct core_err *e)
{
	struct put_ctx *c = ctx;
	char sql[1024];
	enum core_status st;
	json_t *row;
	snprintf(sql, sizeof sql, "%sWHERE s.snapshot_id = $1 FOR UPDATE OF s", SEL_META);
	c->n = 0;
	if ((st = c->src->rewind(c->src->ctx, e)) != CORE_OK)
		return st;
	for (;;) {
		const char *p[1];
		json_t *old = NULL;
		struct old o;
		PGresult *r;
		int changed;
		if ((st = c->src->next(c->src->ctx, &row, e)) != CORE_OK || !row)
			return st;
		p[0] = st_str(row, "snapshotId");
		if ((st = lock_id(s, p[0], "import snapshots", e)) != CORE_OK ||
		    (st = pg_exec(s, sql, 1, p, &r, "import snapshots", e)) != CORE_OK) {
			json_decref(row);
			return st;
		}
		if (PQntuples(r) && (st = row_at(r, 0, &old, e)) != CORE_OK) {
			PQclear(r);
			json_decref(row);
			return st;
		}
		old_of(r, old, &o);
		PQclear(r);
		json_decref(old);
		st = write_row(s, row, 0, &o, NULL, &changed, NULL, 0, e);
		json_decref(row);
		if (st != CORE_OK)
			return st;
		c->n++;
	}
}

enum core_status pg_put_stream(struct store *h, const struct store_rows *src,
                               size_t *count, struct core_err *e)
{
	struct put_ctx c = { src, 0 };
	enum core_status st = run_write(pg_store(h), "import snapshots", put_op, &c, e);
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
	struct core_buf gone;   /* IDs deleted, NUL-terminated */
};

/* A text[] literal of the IDs in gone: {"a","b"} with \ and " escaped. */
static enum core_status id_array(const struct core_buf *gone, struct core_buf *out)
{
	size_t off;
	if (core_buf_addc(out, '{') != CORE_OK)
		return CORE_ENOMEM;
	for (off = 0; off < gone->len; off += strlen(gone->p + off) + 1) {
		const char *p;
		if ((off && core_buf_addc(out, ',') != CORE_OK) || core_buf_addc(out, '"') != CORE_OK)
			return CORE_ENOMEM;
		for (p = gone->p + off; *p; p++)
			if (((*p == '"' || *p == '\\') && core_buf_addc(out, '\\') != CORE_OK) ||
			    core_buf_addc(out, *p) != CORE_OK)
				return CORE_ENOMEM;
		if (core_buf_addc(out, '"') != CORE_OK)
			return CORE_ENOMEM;
	}
	return core_buf_addc(out, '}') != CORE_OK ? CORE_ENOMEM : core_buf_addc(out, 0);
}

static enum core_status delete_op(struct pg_store *s, void *ctx, struct core_err *e)
{
	static const char sql[] =
		"SELECT meta, snapshot_id FROM agentkit_snapshots WHERE session_id = $1"
		" ORDER BY created_ns DESC, snapshot_id DESC FOR UPDATE";
	struct del_ctx *c = ctx;
	struct core_buf arr = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	const char *p[1] = { c->sid };
	enum core_status st;
	PGresult *r;
	int i, n;
	c->deleted = 0;
	core_buf_reset(&c->gone);       /* a retry starts over */
	if ((st = pg_exec(s, sql, 1, p, &r, c->prune ? "prune" : "delete session", e)) != CORE_OK)
		return st;
	n = PQntuples(r);
	for (i = 0; i < n && st == CORE_OK; i++) {
		const char *id = PQgetvalue(r, i, 1);
		if (c->prune) {
			json_t *row;
			int keeps;
			if ((st = pg_row_join(PQgetvalue(r, i, 0), NULL, NULL, NULL, NULL, NULL, NULL,
			                      &row, e)) != CORE_OK)
				break;
			keeps = st_prune_keeps(row, (size_t)i, c->keep, c->before_ns);
			json_decref(row);
			if (keeps)
				continue;
		}
		if (core_buf_add(&c->gone, id, strlen(id) + 1) != CORE_OK)
			st = core_fail(e, CORE_ENOMEM, "delete: out of memory");
		else
			c->deleted++;
	}
	PQclear(r);
	if (st == CORE_OK && c->deleted) {
		if (id_array(&c->gone, &arr) != CORE_OK) {
			st = core_fail(e, CORE_ENOMEM, "delete: out of memory");
		} else {
			p[0] = arr.p;
			if ((st = pg_exec(s, "SELECT agentkit_drop($1)", 1, p, &r,
			                  c->prune ? "prune" : "delete session", e)) == CORE_OK)
				PQclear(r);
			/* the rows' worker log lines go in the same transaction */
			if (st == CORE_OK &&
			    (st = pg_exec(s, "DELETE FROM agentkit_worker_log WHERE snapshot_id = ANY ($1)",
			                  1, p, &r, c->prune ? "prune" : "delete session", e)) == CORE_OK)
				PQclear(r);
		}
	}
	core_buf_release(&arr);
	return st;
}

static enum core_status delete_rows(struct pg_store *s, const char *what, struct del_ctx *c,
                                    size_t *deleted, store_deleted_fn fn, void *ctx,
                                    struct core_err *e)
{
	enum core_status st;
	size_t off;
	c->gone = (struct core_buf)CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if ((st = run_write(s, what, delete_op, c, e)) == CORE_OK) {
		for (off = 0; off < c->gone.len; off += strlen(c->gone.p + off) + 1) {
			pg_ref_forget(s, c->gone.p + off);
			if (fn)
				fn(c->gone.p + off, ctx);
		}
		*deleted = c->deleted;
	}
	core_buf_release(&c->gone);
	return st;
}

enum core_status pg_delete_session(struct store *h, const char *session_id,
                                   size_t *deleted, store_deleted_fn fn, void *ctx,
                                   struct core_err *e)
{
	struct del_ctx c = { .sid = session_id };
	return delete_rows(pg_store(h), "delete session", &c, deleted, fn, ctx, e);
}

enum core_status pg_prune_session(struct store *h, const char *session_id,
                                  size_t keep, int64_t before_ns, size_t *deleted,
                                  store_deleted_fn fn, void *ctx, struct core_err *e)
{
	struct del_ctx c = { .sid = session_id, .keep = keep, .before_ns = before_ns,
	                     .prune = 1 };
	return delete_rows(pg_store(h), "prune", &c, deleted, fn, ctx, e);
}

/* ---- queued runs (store.h "Queued runs"; the index: schema step 4) ---- */

/* Append s and its NUL to the NUL-separated list b. */
static int list_add(struct core_buf *b, const char *v)
{
	return core_buf_add(b, v, strlen(v) + 1) != CORE_OK;
}

struct claim_pick {
	char id[STORE_ID_MAX + 1];
	char agent[STORE_ID_MAX + 1];
	long conc;
};

/*
 * Begin the transaction and pick, in one round trip: the first ready
 * entry of the queues (ready time, then ID) that no other transaction
 * holds (SKIP LOCKED) and that is not excluded.  CORE_ENOTFOUND: none
 * (*next_ns the next ready time).  *busy set: the pick's agent is at its
 * limit (2; the caller excludes the agent and tries again).
 */
static enum core_status pick(struct pg_store *s, const char *queues, const char *now,
                             const char *agents, const char *ids, struct claim_pick *p,
                             int *busy, int64_t *next_ns, struct core_err *e)
{
	static const char sel[] =
		"SELECT snapshot_id, agent, concurrency FROM agentkit_queue"
		" WHERE queue = ANY($1::text[]) AND ready_ns <= $2::bigint"
		" AND agent <> ALL($3::text[]) AND snapshot_id <> ALL($4::text[])"
		" ORDER BY ready_ns, snapshot_id LIMIT 1 FOR UPDATE SKIP LOCKED";
	static const char next[] =
		"SELECT min(ready_ns) FROM agentkit_queue WHERE queue = ANY($1::text[])"
		" AND ready_ns > $2::bigint";
	static const char agent_lock[] =
		"SELECT pg_advisory_xact_lock(hashtextextended('agentkit queue agent ' || $1, 0))";
	static const char live[] =
		"SELECT count(*) FROM agentkit_queue WHERE agent = $1 AND lease_ns > $2::bigint";
	const char *pa[4] = { queues, now, agents, ids };
	struct pg_stmt q[2] = { { .sql = "BEGIN" }, { .sql = sel, .n = 4, .params = pa } };
	enum core_status st;
	PGresult *r;
	*busy = 0;
	if ((st = pg_pipeline(s, q, 2, "claim a queued run", e)))
		return st;
	PQclear(q[0].res);
	r = q[1].res;
	if (!PQntuples(r)) {
		PQclear(r);
		if ((st = pg_exec(s, next, 2, pa, &r, "claim a queued run", e)))
			return st;
		*next_ns = PQgetisnull(r, 0, 0) ? 0 : strtoll(PQgetvalue(r, 0, 0), NULL, 10);
		PQclear(r);
		return CORE_ENOTFOUND;
	}
	snprintf(p->id, sizeof p->id, "%s", PQgetvalue(r, 0, 0));
	snprintf(p->agent, sizeof p->agent, "%s", PQgetvalue(r, 0, 1));
	p->conc = strtol(PQgetvalue(r, 0, 2), NULL, 10);
	PQclear(r);
	if (p->conc <= 0)
		return CORE_OK;
	/* the limit holds fleet-wide: claims of one agent serialize on its
	 * lock, and each counts the others' committed claims after it */
	const char *pl[2] = { p->agent, now };
	if ((st = pg_exec(s, agent_lock, 1, pl, &r, "claim a queued run", e)))
		return st;
	PQclear(r);
	if ((st = pg_exec(s, live, 2, pl, &r, "claim a queued run", e)))
		return st;
	*busy = strtol(PQgetvalue(r, 0, 0), NULL, 10) >= p->conc ? 2 : 0;
	PQclear(r);
	return CORE_OK;
}

enum core_status pg_claim(struct store *h, const char *const *queues, int64_t now_ns,
                          store_mutate_fn fn, void *ctx, json_t **persisted, int64_t *next_ns,
                          struct core_err *e)
{
	struct pg_store *s = pg_store(h);
	struct core_buf ql = CORE_BUF_INIT(CORE_BUF_UNLIMITED), qa = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_buf al = CORE_BUF_INIT(CORE_BUF_UNLIMITED), aa = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_buf il = CORE_BUF_INIT(CORE_BUF_UNLIMITED), ia = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = CORE_OK;
	char now[24];
	json_t *next = NULL;
	int tries = 0, excluded = 0;
	*persisted = NULL;
	*next_ns = 0;
	snprintf(now, sizeof now, "%lld", (long long)now_ns);
	for (const char *const *q = queues; *q; q++)
		if (list_add(&ql, *q))
			st = CORE_ENOMEM;
	if (st || id_array(&ql, &qa))
		goto oom;
	for (;;) {
		struct claim_pick p;
		int busy, changed, stale;
		json_t *existing = NULL;
		struct old o;
		PGresult *r;
		char sql[1024];
		core_buf_reset(&aa);
		core_buf_reset(&ia);
		if (id_array(&al, &aa) || id_array(&il, &ia))
			goto oom;
		s->last_state[0] = 0;
		st = pick(s, qa.p, now, aa.p, ia.p, &p, &busy, next_ns, e);
		if (st == CORE_OK && !busy) {
			/* the row, locked, if no writer of it holds its ID's lock (every
			 * writer takes that first; its beat, say, then updates the
			 * entry this transaction holds: waiting would deadlock) */
			const char *pi[1] = { p.id };
			snprintf(sql, sizeof sql, "%sWHERE s.snapshot_id = $1 AND "
			         "pg_try_advisory_xact_lock(hashtextextended($1, 0)) FOR UPDATE OF s",
			         SEL_META);
			if ((st = pg_exec(s, sql, 1, pi, &r, "claim a queued run", e)) == CORE_OK) {
				if (!PQntuples(r))
					busy = 1;
				else if ((st = row_at(r, 0, &existing, e)) == CORE_OK)
					old_of(r, existing, &o);
				PQclear(r);
			}
		}
		if (st == CORE_OK && busy) {
			pg_rollback(s);
			/* a held row, or an agent at its limit, is passed over */
			if (excluded++ > 1000 || list_add(busy == 2 ? &al : &il, busy == 2 ? p.agent : p.id))
				goto oom;
			continue;
		}
		if (st == CORE_OK) {
			json_decref(next);
			next = NULL;
			st = st_mutate(p.id, existing, fn, ctx, &next, e);
			json_decref(existing);
			if (st == CORE_OK && next)
				st = write_row(s, next, STORE_METADATA_ONLY, &o, NULL, &changed, &stale, 0,
				               e);
			else if (st == CORE_OK)
				st = pg_cmd(s, "COMMIT", "claim a queued run", e);
			if (st == CORE_OK)
				break;
		} else if (st == CORE_ENOTFOUND) {
			enum core_status c = pg_cmd(s, "COMMIT", "claim a queued run", e);
			st = c ? c : CORE_ENOTFOUND;
			break;
		}
		if (!try_again(s, tries++, e))
			break;
	}
	if (st == CORE_OK && next)
		*persisted = json_incref(next);
	goto out;
oom:
	if (s->in_txn)
		pg_rollback(s);
	st = core_fail(e, CORE_ENOMEM, "claim a queued run: out of memory");
out:
	json_decref(next);
	core_buf_release(&ql);
	core_buf_release(&qa);
	core_buf_release(&al);
	core_buf_release(&aa);
	core_buf_release(&il);
	core_buf_release(&ia);
	return st;
}

enum core_status pg_queued(struct store *h, store_row_fn fn, void *ctx, struct core_err *e)
{
	struct pg_store *s = pg_store(h);
	char sql[1024];
	enum core_status st;
	PGresult *r;
	snprintf(sql, sizeof sql, "%sJOIN agentkit_queue q ON q.snapshot_id = s.snapshot_id"
	         " ORDER BY q.queue, q.ready_ns, q.snapshot_id", SEL_META);
	if ((st = pg_exec(s, sql, 0, NULL, &r, "list queued runs", e)))
		return st;
	for (int i = 0; i < PQntuples(r) && !st; i++) {
		json_t *row = NULL;
		if ((st = row_at(r, i, &row, e)) == CORE_OK)
			st = fn(row, ctx);
		json_decref(row);
	}
	PQclear(r);
	return st;
}
