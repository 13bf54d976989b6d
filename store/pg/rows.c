/*
 * rows.c - the PostgreSQL backend's row codec: a row as its columns (its
 * metadata's and its state's, agentkit_snapshots' since schema step 9)
 * plus its messages, and back.
 * The JSON texts are jv_dump()'s and the positions of "state" and
 * "messages" are kept, so a row reads back byte for byte as written (and
 * as the LMDB backend gives it).  See pg.h.
 */
#include "pg.h"

#include <stdlib.h>
#include <string.h>

#include "../../libcore/base/json.h"

static json_t *parse(const char *text, const char *what, struct core_err *e)
{
	json_t *v = jv_parse(text, strlen(text), "store", 0, e);
	if (!v && e)
		core_err_prefix(e, "corrupt store %s", what);
	return v;
}

/* A new object: src without key; *pos receives where it sat. */
static json_t *without(const json_t *src, const char *key, size_t *pos)
{
	json_t *rest = json_object(), *x;
	const char *k;
	int seen = 0;
	*pos = 0;
	if (!rest)
		return NULL;
	json_object_foreach((json_t *)src, k, x) {
		if (!strcmp(k, key)) {
			seen = 1;
			continue;
		}
		if (!seen)
			(*pos)++;
		if (json_object_set(rest, k, x)) {
			json_decref(rest);
			return NULL;
		}
	}
	return rest;
}

enum core_status pg_cols_of(const json_t *row, struct pg_cols *c, struct core_err *e)
{
	const json_t *state = json_object_get(row, "state"), *msgs;
	const char *created = st_str(row, "createdAt");
	json_t *meta, *rest = NULL;
	int64_t ns = 0;
	size_t pos;
	memset(c, 0, sizeof *c);
	c->meta = (struct core_buf)CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	c->body = (struct core_buf)CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	c->id = st_str(row, "snapshotId");
	c->sid = st_str(row, "sessionId");
	c->status = st_str(row, "status");
	if (created && !st_time_ns(created, &ns))
		ns = 0;
	snprintf(c->created, sizeof c->created, "%lld", (long long)ns);
	if (!(meta = without(row, "state", &pos)) || jv_dump(meta, &c->meta) != CORE_OK)
		goto nomem;
	json_decref(meta);
	meta = NULL;
	if (!(c->has_state = state != NULL))
		return CORE_OK;
	snprintf(c->state_pos, sizeof c->state_pos, "%zu", pos);
	msgs = json_is_object(state) ? json_object_get(state, "messages") : NULL;
	if (json_is_array(msgs)) {
		if (!(rest = without(state, "messages", &pos)))
			goto nomem;
		snprintf(c->msg_pos, sizeof c->msg_pos, "%zu", pos);
		c->msgs = (json_t *)msgs;
	}
	if (jv_dump(rest ? rest : state, &c->body) != CORE_OK)
		goto nomem;
	json_decref(rest);
	return CORE_OK;
nomem:
	json_decref(meta);
	json_decref(rest);
	pg_cols_release(c);
	return core_fail(e, CORE_ENOMEM, "write snapshot: out of memory");
}

void pg_cols_release(struct pg_cols *c)
{
	core_buf_release(&c->meta);
	core_buf_release(&c->body);
}

/* The messages of a chain read in walk order, placed by their depths;
 * NULL when the depths do not make a whole history of count. */
static json_t *placed(json_t *got, const char *depths, size_t count)
{
	json_t *out = json_array();
	const char *p = depths;
	size_t i, n = json_array_size(got);
	if (!out || n != count)
		goto bad;
	for (i = 0; i < n; i++)
		if (json_array_append_new(out, json_null()))
			goto bad;
	for (i = 0; i < n; i++) {
		char *end;
		unsigned long d = strtoul(p, &end, 10);
		if (end == p || d < 1 || d > n || !json_is_null(json_array_get(out, d - 1)))
			goto bad;
		json_array_set(out, d - 1, json_array_get(got, i));
		p = *end == ',' ? end + 1 : end;
	}
	json_decref(got);
	return out;
bad:
	json_decref(out);
	json_decref(got);
	return NULL;
}

enum core_status pg_row_join(const char *meta, const char *state_pos, const char *body,
                             const char *msg_pos, const char *msgs, const char *depths,
                             const char *count, json_t **row, struct core_err *e)
{
	json_t *arr = NULL;
	*row = NULL;
	if (state_pos && body && msg_pos) {
		/* an empty history has no chain */
		if (!msgs && (!count || !strcmp(count, "0")))
			msgs = "[]", depths = "";
		if (!msgs || !depths || !(arr = parse(msgs, "messages", e)) ||
		    !(arr = placed(arr, depths, strtoul(count ? count : "0", NULL, 10))))
			return core_fail(e, CORE_ESYS, "corrupt store: a message is missing");
	}
	return pg_row_build(meta, state_pos, body, msg_pos, arr, row, e);
}

json_t *pg_node_parse(const char *body, struct core_err *e)
{
	return parse(body, "message", e);
}

enum core_status pg_row_build(const char *meta, const char *state_pos, const char *body,
                              const char *msg_pos, json_t *arr, json_t **row,
                              struct core_err *e)
{
	json_t *m, *state;
	*row = NULL;
	if (!(m = parse(meta, "row", e))) {
		json_decref(arr);
		return e ? e->st : CORE_ESYS;
	}
	if (!state_pos || !body) {
		json_decref(arr);
		*row = m;
		return CORE_OK;
	}
	if (!(state = parse(body, "state", e))) {
		json_decref(arr);
		json_decref(m);
		return e ? e->st : CORE_ESYS;
	}
	if (msg_pos) {
		if (!arr) {
			json_decref(state);
			json_decref(m);
			return core_fail(e, CORE_ESYS, "corrupt store: a message is missing");
		}
		json_t *full = jv_object_insert_at(state, strtoul(msg_pos, NULL, 10), "messages", arr);
		json_decref(state);
		if (!(state = full)) {
			json_decref(m);
			return core_fail(e, CORE_ENOMEM, "read snapshot: out of memory");
		}
	} else {
		json_decref(arr);
	}
	*row = jv_object_insert_at(m, strtoul(state_pos, NULL, 10), "state", state);
	json_decref(m);
	return *row ? CORE_OK : core_fail(e, CORE_ENOMEM, "read snapshot: out of memory");
}
