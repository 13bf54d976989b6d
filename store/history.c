/* history.c - the history as a person reads it: sessions newest first,
 * filtered by agent and time.  Over the store interface only, so every
 * backend has it.  See store_recent_sessions() in store.h. */
#include "store.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "../libcore/base/util.h"

struct recent_ctx {
	const struct store_session_filter *f;
	int64_t now_ns;
	json_t *list;
	struct core_err *e;
};

static void copy_info(json_t *dst, const json_t *info, const char *key)
{
	json_t *v = json_object_get(info, key);
	if (json_is_string(v))
		json_object_set(dst, key, v);
}

static enum core_status add_session(const struct store_session_info *si, void *ctx)
{
	struct recent_ctx *c = ctx;
	const json_t *info = json_object_get(si->latest, STORE_INFO_KEY);
	const char *agent = st_str(info, "agent"), *updated;
	json_t *latest, *line;
	int64_t ns;

	if (c->f->agent && (!agent || strcmp(agent, c->f->agent)))
		return CORE_OK;
	if (!(latest = json_deep_copy(si->latest)))
		return core_fail(c->e, CORE_ENOMEM, "out of memory");
	store_shape(latest, c->now_ns, c->f->hb_timeout_ms);
	updated = st_str(latest, "updatedAt");
	if (c->f->since_ns && (!updated || !st_time_ns(updated, &ns) || ns < c->f->since_ns)) {
		json_decref(latest);
		return CORE_OK;
	}
	line = json_pack("{s:s,s:O?,s:O?,s:O?,s:I}", "sessionId", si->session_id,
	                 "snapshotId", json_object_get(latest, "snapshotId"),
	                 "status", json_object_get(latest, "status"),
	                 "updatedAt", json_object_get(latest, "updatedAt"),
	                 "snapshots", (json_int_t)si->rows);
	json_decref(latest);
	if (!line)
		return core_fail(c->e, CORE_ENOMEM, "out of memory");
	copy_info(line, info, "agent");
	copy_info(line, info, "model");
	copy_info(line, info, "title");
	/* the session's tokens so far, as its latest turn counted them */
	json_t *usage = json_object_get(info, "sessionUsage");
	if (json_is_object(usage))
		json_object_set(line, "usage", usage);
	if (json_array_append_new(c->list, line))
		return core_fail(c->e, CORE_ENOMEM, "out of memory");
	return CORE_OK;
}

/* Newest first: updatedAt descending (RFC 3339 times of one store compare
 * by their instants), then session ID ascending for a stable order. */
static int newer_first(const void *pa, const void *pb)
{
	const json_t *a = *(json_t *const *)pa, *b = *(json_t *const *)pb;
	const char *ua = st_str(a, "updatedAt"), *ub = st_str(b, "updatedAt");
	int64_t na = INT64_MIN, nb = INT64_MIN;
	if (ua && !st_time_ns(ua, &na))
		na = INT64_MIN;
	if (ub && !st_time_ns(ub, &nb))
		nb = INT64_MIN;
	if (na != nb)
		return na > nb ? -1 : 1;
	return strcmp(st_str(a, "sessionId"), st_str(b, "sessionId"));
}

enum core_status store_recent_sessions(struct store *s,
                                       const struct store_session_filter *f,
                                       json_t **list, struct core_err *e)
{
	struct recent_ctx c = { f, store_now_ns(s), json_array(), e };
	enum core_status st;
	size_t n, i;
	json_t **v;

	*list = NULL;
	if (!c.list)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	if ((st = store_sessions(s, add_session, &c, e)) != CORE_OK) {
		json_decref(c.list);
		return st;
	}
	n = json_array_size(c.list);
	if (n > 1) {
		if (!(v = malloc(n * sizeof *v))) {
			json_decref(c.list);
			return core_fail(e, CORE_ENOMEM, "out of memory");
		}
		for (i = 0; i < n; i++)
			v[i] = json_incref(json_array_get(c.list, i));
		qsort(v, n, sizeof *v, newer_first);
		json_array_clear(c.list);
		for (i = 0; i < n; i++)
			json_array_append_new(c.list, v[i]);
		free(v);
	}
	*list = c.list;
	return CORE_OK;
}
