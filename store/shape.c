/* shape.c - read shaping, statuses and outcomes, IDs, times, and the steps
 * of a save and a prune every backend takes (backend.h).  See store.h. */
#include "store.h"
#include "backend.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "../libcore/base/json.h"
#include "../libcore/base/util.h"

const char *st_str(const json_t *row, const char *key)
{
	const json_t *v = json_object_get(row, key);
	return jv_is_string(v) ? json_string_value(v) : NULL;
}

int st_time_ns(const char *s, int64_t *ns)
{
	int year = 0, i;
	for (i = 0; i < 4; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		year = year * 10 + (s[i] - '0');
	}
	if (s[4] != '-')
		return 0;
	/* int64 nanoseconds span 1677-09-21 .. 2262-04-11; clamp outside a
	 * safe margin (the offset and fraction cannot cross it). */
	if (year < 1678 || year > 2261) {
		int64_t probe;
		char tmp[CORE_TIME_MAX + 16];
		size_t n = strlen(s);
		if (n >= sizeof tmp)
			return 0;
		memcpy(tmp, s, n + 1);
		memcpy(tmp, "2000", 4);     /* validate the rest of the syntax */
		if (core_time_parse(tmp, &probe) != CORE_OK)
			return 0;
		*ns = year < 1678 ? INT64_MIN : INT64_MAX;
		return 1;
	}
	return core_time_parse(s, ns) == CORE_OK;
}

int st_info_set(json_t *row, const char *key, json_t *v)
{
	json_t *info = json_object_get(row, STORE_INFO_KEY);
	if (!v)
		return -1;
	if (!json_is_object(info)) {
		if (!(info = json_object()) || json_object_set_new(row, STORE_INFO_KEY, info)) {
			json_decref(v);
			return -1;
		}
	}
	return json_object_set_new(info, key, v);
}

int store_status_terminal(const char *status)
{
	return !status || (strcmp(status, "pending") && strcmp(status, "aborting"));
}

/* Go's zero time.Time, or no time at all. */
static int zero_time(const json_t *v)
{
	int64_t ns;
	if (!v || json_is_null(v))
		return 1;
	if (!jv_is_string(v))
		return 0;
	if (!json_string_value(v)[0])
		return 1;
	return !strncmp(json_string_value(v), "0001-01-01T00:00:00", 19) &&
	       st_time_ns(json_string_value(v), &ns) && ns == INT64_MIN;
}

int64_t store_row_hb_timeout(const json_t *row, int64_t dflt_ms)
{
	const json_t *v = json_object_get(json_object_get(row, STORE_INFO_KEY),
	                                  "heartbeatTimeout");
	/* the longer of the two: a reader's shorter timeout never declares
	 * a worker dead that beats as it said it would */
	return json_is_integer(v) && json_integer_value(v) > dflt_ms ? json_integer_value(v)
	                                                              : dflt_ms;
}

const json_t *st_shown_updated(const json_t *row)
{
	const json_t *u = json_object_get(row, "updatedAt"), *c = json_object_get(row, "createdAt");
	return c && zero_time(u) ? c : u;
}

int64_t st_updated_ns(const json_t *row)
{
	const json_t *u = st_shown_updated(row);
	int64_t ns;
	return json_is_string(u) && st_time_ns(json_string_value(u), &ns) ? ns : INT64_MIN;
}

int64_t st_expiry_beat(const json_t *row)
{
	const char *status = st_str(row, "status"), *hb = st_str(row, "heartbeatAt");
	int64_t hb_ns;
	if (status && !store_status_terminal(status) && hb && st_time_ns(hb, &hb_ns))
		return hb_ns;
	return INT64_MIN;
}

int st_expired(int64_t beat_ns, int64_t now_ns, int64_t timeout_ms)
{
	return beat_ns != INT64_MIN && now_ns - beat_ns > timeout_ms * 1000000;
}

void store_shape(json_t *row, int64_t now_ns, int64_t timeout_ms)
{
	const char *status = st_str(row, "status");
	const json_t *updated;

	if (!json_is_object(row))
		return;
	if (st_expired(st_expiry_beat(row), now_ns, store_row_hb_timeout(row, timeout_ms)))
		json_object_set_new(row, "status", json_string("expired"));
	else if (!status || !status[0])
		json_object_set_new(row, "status", json_string("completed"));
	updated = st_shown_updated(row);
	if (updated && updated != json_object_get(row, "updatedAt"))
		json_object_set(row, "updatedAt", (json_t *)updated);
	json_object_del(row, STORE_INFO_KEY);
}

enum core_status store_outcome(const json_t *row)
{
	const char *status = st_str(row, "status");
	const char *reason = st_str(row, "finishReason");
	if (!status || !status[0] || !strcmp(status, "completed"))
		return core_finish_status(reason);
	if (!strcmp(status, "aborted"))
		return CORE_ABORTED;
	if (!strcmp(status, "expired"))
		return CORE_EXPIRED;
	return CORE_FAILED;
}

enum core_status store_check_id(const char *id, const char *what,
                                struct core_err *e)
{
	size_t n = id ? strlen(id) : 0, i;
	json_t *probe;
	if (!n)
		return core_fail(e, CORE_EINVAL, "invalid %s '': must not be empty", what);
	if (n > STORE_ID_MAX)
		return core_fail(e, CORE_EINVAL, "invalid %s '%.40s...': longer than %d bytes",
		                 what, id, STORE_ID_MAX);
	for (i = 0; i < n; i++)
		if ((unsigned char)id[i] < 0x20 || id[i] == 0x7f)
			return core_fail(e, CORE_EINVAL,
			                 "invalid %s: contains a control character", what);
	probe = json_stringn(id, n);     /* jansson validates UTF-8 */
	if (!probe)
		return core_fail(e, CORE_EINVAL, "invalid %s: not valid UTF-8", what);
	json_decref(probe);
	return CORE_OK;
}

enum core_status store_heartbeat_timeout(const char *flag, int64_t *ms,
                                         struct core_err *e)
{
	return core_duration_setting("--heartbeat-timeout", flag,
	                             "AGENTKIT_HEARTBEAT_TIMEOUT",
	                             STORE_HEARTBEAT_TIMEOUT_MS, ms, e);
}

enum core_status store_check_row(const json_t *row, struct core_err *e)
{
	const char *id = st_str(row, "snapshotId"), *sid = st_str(row, "sessionId");
	enum core_status st;
	if (!json_is_object(row))
		return core_fail(e, CORE_EINVAL, "a snapshot must be a JSON object, not %s",
		                 jv_type_name(row));
	if (!id)
		return core_fail(e, CORE_EINVAL, "snapshot without a string \"snapshotId\"");
	if (!sid)
		return core_fail(e, CORE_EINVAL, "store requires sessionId to be set on the snapshot");
	if ((st = store_check_id(id, "snapshot ID", e)) != CORE_OK ||
	    (st = store_check_id(sid, "session ID", e)) != CORE_OK)
		return st;
	return CORE_OK;
}

/* ---- queued runs (store.h "Queued runs"): the index's projection ---- */

const json_t *store_queue_of(const json_t *row)
{
	const json_t *q = json_object_get(json_object_get(row, STORE_INFO_KEY), "queue");
	return json_is_object(q) ? q : NULL;
}

int64_t st_int(const json_t *q, const char *key)
{
	const json_t *v = json_object_get(q, key);
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

static int64_t backoff_ms(int64_t attempt)
{
	int64_t ms = STORE_QUEUE_BACKOFF_MS;
	for (int64_t i = 1; i < attempt && ms < STORE_QUEUE_BACKOFF_MAX_MS; i++)
		ms *= 2;
	return ms < STORE_QUEUE_BACKOFF_MAX_MS ? ms : STORE_QUEUE_BACKOFF_MAX_MS;
}

int store_queue_project(json_t *row)
{
	json_t *info = json_object_get(row, STORE_INFO_KEY), *q;
	const char *hb = st_str(row, "heartbeatAt"), *status = st_str(row, "status");
	int64_t attempt, max, ready, lease = 0, hb_ns;
	if (!store_queue_of(row))
		return 0;
	/* the objects may be shared with the caller's row: change copies */
	if (!(info = json_copy(info)) || json_object_set_new(row, STORE_INFO_KEY, info) ||
	    !(q = json_copy(json_object_get(info, "queue"))) ||
	    json_object_set_new(info, "queue", q))
		return -1;
	attempt = st_int(q, "attempt");
	max = st_int(q, "maxAttempts");
	ready = st_int(q, "notBefore");
	if (attempt > 0 && hb && st_time_ns(hb, &hb_ns) && hb_ns != INT64_MIN) {
		lease = hb_ns + store_row_hb_timeout(row, 0) * 1000000;
		ready = lease;
		if ((!status || strcmp(status, "aborting")) && (max <= 0 || attempt < max))
			ready += backoff_ms(attempt) * 1000000;
	}
	return json_object_set_new(q, "ready", json_integer(ready)) ||
	       json_object_set_new(q, "lease", json_integer(lease));
}

/* ---- the steps every backend takes (backend.h) ---- */

enum core_status st_mutate(const char *id, const json_t *existing, store_mutate_fn fn,
                           void *ctx, json_t **next, struct core_err *e)
{
	const char *esid, *sid, *status;
	enum core_status st;
	json_t *n = NULL;
	*next = NULL;
	if ((st = fn(existing, &n, ctx, e)) != CORE_OK) {
		json_decref(n);
		if (e && !e->st)
			core_fail(e, st, "%s", core_strerror(st));
		return st;
	}
	if (!n)
		return CORE_OK;
	if (!json_is_object(n)) {
		json_decref(n);
		return core_fail(e, CORE_EINVAL, "save snapshot: the new row is not an object");
	}
	/* the members set below must not show in fn's object: a shallow copy
	 * (the state, whole histories, stays shared) */
	if (n == existing || n->refcount > 1) {
		json_t *copy = json_copy(n);
		json_decref(n);
		if (!(n = copy))
			return core_fail(e, CORE_ENOMEM, "save snapshot: out of memory");
	}
	json_object_set_new(n, "snapshotId", json_string(id));
	if (existing && (esid = st_str(existing, "sessionId")) && *esid)
		json_object_set_new(n, "sessionId", json_string(esid));
	sid = st_str(n, "sessionId");
	if (!sid || !*sid) {
		json_decref(n);
		return core_fail(e, CORE_EINVAL,
		                 "store requires sessionId to be set on the snapshot");
	}
	if ((st = store_check_id(sid, "session ID", e)) != CORE_OK) {
		json_decref(n);
		return st;
	}
	status = st_str(n, "status");
	if (!status || !*status)
		json_object_set_new(n, "status", json_string("completed"));
	if (store_queue_project(n)) {
		json_decref(n);
		return core_fail(e, CORE_ENOMEM, "save snapshot: out of memory");
	}
	*next = n;
	return CORE_OK;
}

int st_prune_keeps(const json_t *row, size_t seen, size_t keep, int64_t before_ns)
{
	const char *created = st_str(row, "createdAt");
	int64_t ns = 0;
	if (!created || !st_time_ns(created, &ns))
		ns = 0;
	return seen == 0 || !store_status_terminal(st_str(row, "status")) ||
	       (keep && seen < keep) || (before_ns && ns >= before_ns);
}
