/* history.c - the history as a person reads it: sessions newest first,
 * filtered by agent and time, one line at a time.  Over the store
 * interface, so every backend has it.  See store_sessions_recent() in
 * store.h. */
#include "store.h"
#include "backend.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "../libcore/base/util.h"

struct recent_ctx {
	const struct store_session_filter *f;
	size_t limit, n;
	int done;               /* the limit or the time was reached */
	int64_t now_ns;
	store_line_fn fn;
	void *ctx;
	struct core_err *e;
};

static void copy_info(json_t *dst, const json_t *info, const char *key)
{
	json_t *v = json_object_get(info, key);
	if (json_is_string(v))
		json_object_set(dst, key, v);
}

/* The listing's line of a session; NULL when out of memory. */
static json_t *session_line(const struct store_session_info *si, int64_t now_ns,
                            int64_t hb_timeout_ms)
{
	const json_t *info = json_object_get(si->latest, STORE_INFO_KEY);
	/* shaping sets and deletes top-level members only: a shallow copy */
	json_t *latest = json_copy((json_t *)si->latest), *line, *reason, *usage;
	if (!latest)
		return NULL;
	store_shape(latest, now_ns, hb_timeout_ms);
	line = json_pack("{s:s,s:O?,s:O?,s:O?,s:I}", "sessionId", si->session_id,
	                 "snapshotId", json_object_get(latest, "snapshotId"),
	                 "status", json_object_get(latest, "status"),
	                 "updatedAt", json_object_get(latest, "updatedAt"),
	                 "snapshots", (json_int_t)si->rows);
	json_decref(latest);
	if (!line)
		return NULL;
	copy_info(line, info, "agent");
	copy_info(line, info, "model");
	copy_info(line, info, "title");
	/* the session's tokens so far, as its latest turn counted them */
	usage = json_object_get(info, "sessionUsage");
	if (json_is_object(usage))
		json_object_set(line, "usage", usage);
	/* a completed turn that paused on an interrupt is what a person
	 * must act on */
	reason = json_object_get(si->latest, "finishReason");
	if (json_is_string(reason) && json_string_length(reason))
		json_object_set(line, "finishReason", reason);
	return line;
}

static enum core_status add_session(const struct store_session_info *si, void *ctx)
{
	struct recent_ctx *c = ctx;
	const json_t *info = json_object_get(si->latest, STORE_INFO_KEY);
	const char *agent = st_str(info, "agent");
	enum core_status st;
	json_t *line;

	/* newest first: past since, every session left is older */
	if (c->f->since_ns && st_updated_ns(si->latest) < c->f->since_ns) {
		c->done = 1;
		return CORE_ECANCELLED;
	}
	if (c->f->agent && (!agent || strcmp(agent, c->f->agent)))
		return CORE_OK;
	if (!(line = session_line(si, c->now_ns, c->f->hb_timeout_ms)))
		return core_fail(c->e, CORE_ENOMEM, "out of memory");
	st = c->fn(line, c->ctx);
	json_decref(line);
	if (st == CORE_OK && c->limit && ++c->n == c->limit) {
		c->done = 1;
		return CORE_ECANCELLED;
	}
	return st;
}

enum core_status store_sessions_recent(struct store *s, const struct store_session_filter *f,
                                       size_t limit, store_line_fn fn, void *ctx,
                                       struct core_err *e)
{
	struct recent_ctx c = { f, limit, 0, 0, 0, fn, ctx, e };
	enum core_status st;
	if ((st = st_check_handle(s, e)) != CORE_OK)
		return st;
	c.now_ns = store_now_ns(s);
	/* with an agent to match, the first batch is a guess */
	st = s->backend->recent ? s->backend->recent(s, f->agent ? 0 : limit, add_session, &c, e)
	                        : st_recent_sorted(s, add_session, &c, e);
	return st == CORE_ECANCELLED && c.done ? CORE_OK : st;
}

struct list_ctx {
	json_t *list;
	struct core_err *e;
};

static enum core_status append_line(json_t *line, void *ctx)
{
	struct list_ctx *c = ctx;
	if (json_array_append(c->list, line))
		return core_fail(c->e, CORE_ENOMEM, "out of memory");
	return CORE_OK;
}

enum core_status store_recent_sessions(struct store *s,
                                       const struct store_session_filter *f,
                                       json_t **list, struct core_err *e)
{
	struct list_ctx c = { json_array(), e };
	enum core_status st;
	if (!(*list = c.list))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	st = store_sessions_recent(s, f, 0, append_line, &c, e);
	if (st != CORE_OK) {
		json_decref(*list);
		*list = NULL;
	}
	return st;
}

/* ---- the order by sorting, for a backend without the index ---- */

struct sorted {
	char *sid;
	json_t *latest;
	size_t rows;
	int64_t ns;
};

struct collect_ctx {
	struct sorted *v;
	size_t n, cap;
	struct core_err *e;
};

static enum core_status collect(const struct store_session_info *si, void *ctx)
{
	struct collect_ctx *c = ctx;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct sorted *v = realloc(c->v, cap * sizeof *v);
		if (!v)
			return core_fail(c->e, CORE_ENOMEM, "list sessions: out of memory");
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n].sid = strdup(si->session_id);
	c->v[c->n].latest = json_deep_copy(si->latest);
	c->v[c->n].rows = si->rows;
	c->v[c->n].ns = st_updated_ns(si->latest);
	if (!c->v[c->n].sid || !c->v[c->n].latest) {
		free(c->v[c->n].sid);
		json_decref(c->v[c->n].latest);
		return core_fail(c->e, CORE_ENOMEM, "list sessions: out of memory");
	}
	c->n++;
	return CORE_OK;
}

/* Newest first, then session ID ascending: the index's order. */
static int newer_first(const void *pa, const void *pb)
{
	const struct sorted *a = pa, *b = pb;
	if (a->ns != b->ns)
		return a->ns > b->ns ? -1 : 1;
	return strcmp(a->sid, b->sid);
}

enum core_status st_recent_sorted(struct store *s, store_session_fn fn, void *ctx,
                                  struct core_err *e)
{
	struct collect_ctx c = { NULL, 0, 0, e };
	enum core_status st = s->backend->sessions(s, collect, &c, e);
	size_t i;
	if (st == CORE_OK && c.n > 1)
		qsort(c.v, c.n, sizeof *c.v, newer_first);
	for (i = 0; i < c.n; i++) {
		struct store_session_info si = { c.v[i].sid, c.v[i].latest, c.v[i].rows };
		if (st == CORE_OK)
			st = fn(&si, ctx);
		free(c.v[i].sid);
		json_decref(c.v[i].latest);
	}
	free(c.v);
	return st;
}
