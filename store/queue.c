/* queue.c - queued runs over any store backend: what a claim does to the
 * row the backend picked (backend.h: claim), and the listing.  See "Queued
 * runs" in store.h; the index's projection of a row is shape.c's. */
#include "store.h"
#include "internal.h"
#include "backend.h"

#include <stdio.h>
#include <string.h>

#include "../libcore/base/json.h"
#include "../libcore/base/util.h"

/* ---- the claim ---- */

struct claim_ctx {
	int64_t max_attempts;   /* for a run that sets none */
	int64_t now_ns;
	int claimed;            /* fn claimed the row it saw */
};

enum core_status store_queue_settle(json_t *row, const char *status, const char *reason,
                                    json_t *err, int64_t now_ns, struct core_err *e)
{
	char now[CORE_TIME_MAX];
	json_t *info = json_copy(json_object_get(row, STORE_INFO_KEY));
	core_time_format(now_ns, now);
	if (!info || json_object_set_new(row, STORE_INFO_KEY, info) ||
	    json_object_set_new(row, "status", json_string(status)) ||
	    json_object_set_new(row, "finishReason", json_string(reason)) ||
	    json_object_set_new(row, "updatedAt", json_string(now)) ||
	    (err && json_object_set_new(row, "error", err)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	json_object_del(row, "heartbeatAt");
	json_object_del(info, "run");
	json_object_del(info, "queue");
	return CORE_OK;
}

static enum core_status fn_claim(const json_t *existing, json_t **next, void *ctx,
                                 struct core_err *e)
{
	struct claim_ctx *c = ctx;
	const json_t *q = store_queue_of(existing), *info;
	const char *status = st_str(existing, "status");
	char now[CORE_TIME_MAX];
	int64_t attempt, max;
	json_t *n, *i2, *q2, *w;
	*next = NULL;
	if (!q || store_status_terminal(status))
		return CORE_OK;
	attempt = st_int(q, "attempt");
	if ((max = st_int(q, "maxAttempts")) <= 0)
		max = c->max_attempts;
	if (attempt > 0 && st_int(q, "lease") > c->now_ns)
		return CORE_OK;                 /* a live claim: another worker's */
	if (!(n = json_copy((json_t *)existing)))
		return core_fail(e, CORE_ENOMEM, "claim: out of memory");
	if (!strcmp(status, "aborting")) {
		*next = n;
		return store_queue_settle(n, "aborted", "aborted", NULL, c->now_ns, e);
	}
	info = json_object_get(existing, STORE_INFO_KEY);
	if (attempt > 0 && max > 0 && attempt >= max) {
		const json_t *lw = json_object_get(info, "worker");
		const char *host = st_str(lw, "host");
		char m[512];
		snprintf(m, sizeof m, "gave up after %lld attempt%s: worker lost (the last: host "
		         "%.200s, pid %lld)", (long long)attempt, attempt == 1 ? "" : "s",
		         host ? host : "?", (long long)st_int(lw, "pid"));
		json_t *err = jv_error_new(CORE_EUNAVAILABLE, m);
		*next = n;
		if (!err)
			return core_fail(e, CORE_ENOMEM, "claim: out of memory");
		return store_queue_settle(n, "failed", "failed", err, c->now_ns, e);
	}
	core_time_format(c->now_ns, now);
	if (!(w = jv_host_pid()) || !(i2 = json_copy((json_t *)info)) ||
	    json_object_set_new(n, STORE_INFO_KEY, i2) ||
	    !(q2 = json_copy((json_t *)q)) || json_object_set_new(i2, "queue", q2) ||
	    json_object_set_new(q2, "attempt", json_integer(attempt + 1)) ||
	    json_object_set_new(i2, "epoch", json_integer(st_int(info, "epoch") + 1)) ||
	    json_object_set_new(i2, "worker", w) ||
	    json_object_set_new(n, "heartbeatAt", json_string(now))) {
		json_decref(n);
		return core_fail(e, CORE_ENOMEM, "claim: out of memory");
	}
	c->claimed = 1;
	*next = n;
	return CORE_OK;
}

enum core_status store_claim(struct store *s, const char *const *queues,
                             int64_t max_attempts, json_t **row, int64_t *next_ns,
                             struct core_err *e)
{
	*row = NULL;
	if (next_ns)
		*next_ns = 0;
	if (!s || !s->backend->claim)
		return core_fail(e, CORE_EPRECONDITION, "this store keeps no queue");
	for (int i = 0; i < STORE_CLAIM_SETTLE_MAX; i++) {
		struct claim_ctx c = { max_attempts > 0 ? max_attempts : STORE_QUEUE_MAX_ATTEMPTS,
		                       store_now_ns(s), 0 };
		json_t *got = NULL;
		int64_t next = 0;
		enum core_status st = s->backend->claim(s, queues, c.now_ns, fn_claim, &c, &got,
		                                        &next, e);
		if (st == CORE_ENOTFOUND && next_ns)
			*next_ns = next;
		if (st)
			return st;
		if (c.claimed && got) {
			*row = got;
			return CORE_OK;
		}
		json_decref(got);
	}
	return CORE_OK;         /* settled as many as it may: the caller claims again */
}

enum core_status store_queued(struct store *s,
                              enum core_status (*fn)(const json_t *row, void *),
                              void *ctx, struct core_err *e)
{
	if (!s)
		return core_fail(e, CORE_EINVAL, "store: no handle");
	if (!s->backend->queued)
		return CORE_OK;
	return s->backend->queued(s, fn, ctx, e);
}
