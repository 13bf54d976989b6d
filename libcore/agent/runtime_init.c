/*
 * runtime_init.c - what an invocation starts from (runtime-semantics §4):
 * the AgentInit checked, the session it names loaded (a stored row, the
 * latest row of a session, a client-managed state, or nothing), and the
 * shape of each AgentInput.
 */
#include "runtime_int.h"

#include <stdio.h>
#include <string.h>

#include "../../store/store.h"
#include "agent_ext.h"
#include "agent_trace.h"
#include "../base/json.h"
#include "../model/registry.h"
#include "../base/util.h"

/* ---- init (§4) ---- */

static int64_t hb_age_ms(const json_t *row, int64_t now_ns)
{
	const char *hb = json_string_value(json_object_get(row, "heartbeatAt"));
	int64_t t;
	if (!hb || core_time_parse(hb, &t))
		return -1;
	return (now_ns - t) / 1000000;
}

/* §4.2: may a session resume from this row? */
static enum core_status resumable(struct runtime *rt, const json_t *row, struct core_err *e)
{
	const char *id = json_string_value(json_object_get(row, "snapshotId"));
	const char *status = json_string_value(json_object_get(row, "status"));
	const char *parent = json_string_value(json_object_get(row, "parentId"));
	if (!status)
		status = "";
	if (!parent)
		parent = "";
	if (!strcmp(status, "pending") || !strcmp(status, "aborting")) {
		int64_t age = hb_age_ms(row, store_now_ns(rt->store));
		int pending = !strcmp(status, "pending");
		if (age > store_row_hb_timeout(row, rt->hb_timeout_ms)) {
			if (*parent)
				return core_fail(e, CORE_EPRECONDITION,
				                 "snapshot \"%s\" is still %s but its worker stopped heartbeating and is presumed dead; %sresume from its parent snapshot \"%s\"",
				                 id, status, pending ? "abort it, then " : "", parent);
			return core_fail(e, CORE_EPRECONDITION,
			                 "snapshot \"%s\" is still %s but its worker stopped heartbeating and is presumed dead. It recorded no progress, so there is nothing to resume",
			                 id, status);
		}
		if (!pending)
			return core_fail(e, CORE_EPRECONDITION,
			                 "snapshot \"%s\" is still being finalized: its invocation was aborted and has not recorded the state yet; retry this same snapshot ID",
			                 id);
		return core_fail(e, CORE_EPRECONDITION,
		                 "snapshot \"%s\" is still pending: its detached invocation is still running; wait for it to finalize or abort it before resuming",
		                 id);
	}
	if (!strcmp(status, "aborted") && !json_object_get(row, "state")) {
		if (*parent)
			return core_fail(e, CORE_EPRECONDITION,
			                 "snapshot \"%s\" was aborted before its invocation recorded any state; resume from its parent snapshot \"%s\"",
			                 id, parent);
		return core_fail(e, CORE_EPRECONDITION,
		                 "snapshot \"%s\" was aborted before its invocation recorded any state and has no parent; there is nothing to resume",
		                 id);
	}
	return CORE_OK;
}

/* SessionState.usage, a GenerationUsage: non-negative numbers, and
 * custom an object of them. */
static enum core_status usage_check(const json_t *u, struct core_err *e)
{
	const char *key, *ck;
	json_t *v, *cv;
	if (!json_is_object(u))
		return core_fail(e, CORE_EINVAL, "invalid state: 'usage' must be an object, not %s",
		                 jv_type_name(u));
	json_object_foreach((json_t *)u, key, v) {
		if (!strcmp(key, "custom") && json_is_object(v)) {
			json_object_foreach(v, ck, cv)
				if (!json_is_number(cv) || json_number_value(cv) < 0)
					return core_fail(e, CORE_EINVAL, "invalid state: usage.custom.%s "
					                 "must be a non-negative number", ck);
		} else if (!json_is_number(v) || json_number_value(v) < 0) {
			return core_fail(e, CORE_EINVAL, "invalid state: usage.%s must be a "
			                 "non-negative number", key);
		}
	}
	return CORE_OK;
}

static enum core_status state_check(const json_t *s, struct core_err *e)
{
	const char *key;
	json_t *v;
	if (!json_is_object(s))
		return core_fail(e, CORE_EINVAL, "invalid state: must be a JSON object, not %s", jv_type_name(s));
	json_object_foreach((json_t *)s, key, v) {
		if (!strcmp(key, "messages") || !strcmp(key, "artifacts")) {
			size_t i;
			json_t *m;
			if (!json_is_array(v))
				return core_fail(e, CORE_EINVAL, "invalid state: '%s' must be an array", key);
			json_array_foreach(v, i, m)
				if (!json_is_object(m))
					return core_fail(e, CORE_EINVAL, "invalid state: %s[%zu] must be an object", key, i);
		} else if (!strcmp(key, "sessionId")) {
			if (!jv_is_string(v))
				return core_fail(e, CORE_EINVAL, "invalid state: 'sessionId' must be a string");
		} else if (!strcmp(key, "usage")) {
			if (usage_check(v, e))
				return CORE_EINVAL;
		} else if (strcmp(key, "custom")) {
			return core_fail(e, CORE_EINVAL, "invalid state: unknown field \"%s\"", key);
		}
	}
	return CORE_OK;
}

enum core_status rt_init_check(const json_t *init, struct core_err *e)
{
	const char *key;
	json_t *v;
	if (!init)
		return CORE_OK;
	if (!json_is_object(init))
		return core_fail(e, CORE_EINVAL, "invalid AgentInit: must be a JSON object");
	json_object_foreach((json_t *)init, key, v) {
		if (!strcmp(key, "sessionId") || !strcmp(key, "snapshotId")) {
			if (!jv_is_string(v))
				return core_fail(e, CORE_EINVAL, "invalid AgentInit: '%s' must be a string", key);
		} else if (!strcmp(key, "state")) {
			if (!json_is_null(v) && state_check(v, e))
				return CORE_EINVAL;
		} else {
			return core_fail(e, CORE_EINVAL, "invalid AgentInit: unknown field \"%s\"", key);
		}
	}
	return CORE_OK;
}

/* One writer per session (rt_config's on_busy): the session's writer
 * lock, before its latest row is read. */
static enum core_status lock_session(struct runtime *rt, const char *sid, struct core_err *e)
{
	struct core_err le = { 0 };
	int64_t wait = rt->on_busy == RT_BUSY_FAIL ? 0 : rt->busy_timeout_ms;
	enum core_status st;
	if (rt->on_busy == RT_BUSY_FORK)
		return CORE_OK;
	st = store_session_lock(rt->store, sid, wait, &le);
	if (st == CORE_ETIMEOUT && !wait)
		return core_fail(e, CORE_EPRECONDITION, "session \"%s\" is busy: another writer's "
		                 "turn is running on it", sid);
	char d[CORE_DURATION_MAX];
	if (st == CORE_ETIMEOUT)
		return core_fail(e, CORE_ETIMEOUT, "session \"%s\" stayed busy for %s: another "
		                 "writer's turn is still running on it", sid,
		                 core_duration_text(wait, d));
	if (st)
		return core_fail(e, st, "failed to lock session \"%s\": %s", sid, le.msg);
	if (!(rt->locked_session = strdup(sid))) {
		store_session_unlock(rt->store, sid);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	return CORE_OK;
}

/*
 * Whether a resumed session's history may stay unread (store.h's
 * STORE_LAST_MESSAGE): the echo model answers the input and a script
 * model reads the last user text and counts model messages (the row
 * records how many it holds), for an inline agent, which renders no
 * template; a provider sends the history from its stored text, where a
 * prompt's template, inline or not, puts it (rt_history_as_text()); and
 * no custom agent, transform or grounding sees the state.  Anything else
 * that asks for the history loads it then (session_defer_history()).
 */
static unsigned read_flags(const struct runtime *rt)
{
	const struct agent *a = rt->agent;
	int end = rt_model_reads_end(a) && !a->prompt;
	return store_can_append(rt->store) && (end || rt_history_as_text(rt)) &&
	       !agent_ext_reads_history(rt->ext) ? STORE_LAST_MESSAGE : 0;
}

int rt_model_reads_end(const struct agent *a)
{
	return a->model && (!strcmp(a->model, "echo") || !strncmp(a->model, "script/", 7));
}

int rt_history_as_text(const struct runtime *rt)
{
	const char *model = rt->agent->model;
	return model && !rt->delegate && !agent_trace_content() && model_takes_history(model);
}

/* A provider's own fn, told apart from the store's failures. */
struct texts_arg {
	model_history_fn fn;
	void *arg;
	int failed;
};

static enum core_status text_of(void *ctx, const char *json, size_t n, struct core_err *e)
{
	struct texts_arg *t = ctx;
	enum core_status st = t->fn(t->arg, json, n, e);
	t->failed = st != CORE_OK;
	return st;
}

enum core_status rt_history_texts(void *ctx, model_history_fn fn, void *arg,
                                  struct core_err *e)
{
	struct runtime *rt = ctx;
	struct texts_arg t = { fn, arg, 0 };
	const char *id = session_parent_id(rt->s);
	enum core_status st = store_message_texts(rt->store, id ? id : "",
	                                          session_messages_before(rt->s), text_of, &t, e);
	if (st && !t.failed)
		core_err_prefix(e, "cannot read the history of snapshot '%s'", id ? id : "");
	return st;
}

long rt_count_models(const json_t *msgs)
{
	long n = 0;
	size_t i;
	const json_t *m;
	json_array_foreach(msgs, i, m) {
		const char *role = json_string_value(json_object_get(m, "role"));
		n += role && !strcmp(role, "model");
	}
	return n;
}

/* session_defer_history()'s load: the first n messages of the resume
 * point, read whole. */
static enum core_status load_history(void *ctx, size_t n, json_t **msgs, struct core_err *e)
{
	struct runtime *rt = ctx;
	const char *id = session_parent_id(rt->s);
	json_t *row = NULL, *all;
	enum core_status st = store_get(rt->store, id ? id : "", 0, &row, e);
	if (st) {
		core_err_prefix(e, "cannot read the history of snapshot '%s'", id ? id : "");
		return st;
	}
	all = json_object_get(json_object_get(row, "state"), "messages");
	*msgs = json_array();
	for (size_t i = 0; i < n && i < json_array_size(all); i++)
		json_array_append(*msgs, json_array_get(all, i));
	json_decref(row);
	return *msgs ? CORE_OK : core_fail(e, CORE_ENOMEM, "out of memory");
}

/*
 * One writer per session, for detached runs too: with RT_BUSY_WAIT, a
 * latest row that is a live detached run's (pending or aborting, its
 * worker beating) is waited for until it settles, within the busy
 * timeout, and then read again.  The session's lock is held meanwhile,
 * so no other writer comes in between.  Otherwise the row is left to
 * resumable(), which refuses it with Genkit's message.
 */
static enum core_status await_detached(struct runtime *rt, const char *sid, json_t **row,
                                       struct core_err *e)
{
	const char *id = json_string_value(json_object_get(*row, "snapshotId"));
	const char *status = json_string_value(json_object_get(*row, "status"));
	struct core_err we = { 0 };
	json_t *settled = NULL;
	int64_t wait = rt->busy_timeout_ms, age;
	enum core_status st;
	if (rt->on_busy != RT_BUSY_WAIT || !id || store_status_terminal(status))
		return CORE_OK;
	age = hb_age_ms(*row, store_now_ns(rt->store));
	if (age < 0 || age > store_row_hb_timeout(*row, rt->hb_timeout_ms))
		return CORE_OK;         /* presumed dead: resumable() says so */
	st = store_wait_terminal(rt->store, &id, 1, STORE_METADATA_ONLY, rt->hb_timeout_ms,
	                         core_now_mono_ms() + wait, 2000, &settled, NULL, NULL, &we);
	json_decref(settled);
	store_set_deadline(rt->store, 0);
	char d[CORE_DURATION_MAX];
	if (st == CORE_ETIMEOUT)
		return core_fail(e, CORE_ETIMEOUT, "session \"%s\" stayed busy for %s: the "
		                 "detached run of snapshot \"%s\" is still running on it", sid,
		                 core_duration_text(wait, d), id);
	if (st)
		return core_fail(e, st, "failed to wait for snapshot \"%s\": %s", id, we.msg);
	json_decref(*row);
	*row = NULL;
	st = store_latest(rt->store, sid, read_flags(rt), row, &we);
	if (st && st != CORE_ENOTFOUND)
		return core_fail(e, st, "failed to resolve latest snapshot for session \"%s\": %s",
		                 sid, we.msg);
	return CORE_OK;
}

/* The row the init names (a snapshot ID, else the latest of a session),
 * or *row NULL. */
static enum core_status find_row(struct runtime *rt, const char *sid, const char *snap,
                                 json_t **row, struct core_err *e)
{
	struct core_err se = { 0 };
	enum core_status st;
	*row = NULL;
	if (snap) {
		if (!rt->store)
			return core_fail(e, CORE_EPRECONDITION,
			                 "snapshot ID \"%s\" provided but agent has no session store configured (client-managed state); use state instead",
			                 snap);
		st = store_get(rt->store, snap, read_flags(rt), row, &se);
		if (st == CORE_ENOTFOUND)
			return core_fail(e, CORE_ENOTFOUND, "snapshot \"%s\" not found", snap);
		if (st)
			return core_fail(e, st, "failed to load snapshot \"%s\": %s", snap, se.msg);
		const char *owner = json_string_value(json_object_get(*row, "sessionId"));
		if (sid && strcmp(owner ? owner : "", sid))
			return core_fail(e, CORE_EINVAL, "snapshot \"%s\" does not belong to session \"%s\" (snapshot's session: \"%s\")",
			                 snap, sid, owner ? owner : "");
	} else if (sid) {
		if (!rt->store)
			return core_fail(e, CORE_EPRECONDITION,
			                 "session ID \"%s\" provided but agent has no session store configured (client-managed state); the conversation's identity rides inside the state object (SessionState.SessionID)",
			                 sid);
		if ((st = lock_session(rt, sid, e)))
			return st;
		st = store_latest(rt->store, sid, read_flags(rt), row, &se);
		if (st && st != CORE_ENOTFOUND)
			return core_fail(e, st, "failed to resolve latest snapshot for session \"%s\": %s", sid, se.msg);
		if (*row && rt->claimed_id && !strcmp(rt->claimed_id, json_string_value(
		            json_object_get(*row, "snapshotId")) ? json_string_value(
		            json_object_get(*row, "snapshotId")) : "")) {
			json_decref(*row);      /* the queued run itself: a new session */
			*row = NULL;
		}
		if (*row && (st = await_detached(rt, sid, row, e)))
			return st;
		const char *owner = json_string_value(json_object_get(*row, "sessionId"));
		if (*row && strcmp(owner ? owner : "", sid))
			return core_fail(e, CORE_EINTERNAL,
			                 "store resolved session \"%s\" to snapshot \"%s\", which belongs to session \"%s\"; the store violates the GetLatestSnapshot contract",
			                 sid, json_string_value(json_object_get(*row, "snapshotId")), owner ? owner : "");
	}
	return CORE_OK;
}

/* The session from a resumable row, whose state it takes (row is the
 * caller's, read for this alone: no copy of the history is made). */
static enum core_status load_row(struct runtime *rt, json_t *row, struct core_err *e)
{
	enum core_status st = resumable(rt, row, e);
	if (st)
		return st;
	json_t *s = json_object_get(row, "state");
	json_t *state = json_is_object(s) ? json_incref(s) : json_object();
	const char *created = json_string_value(json_object_get(row, "createdAt"));
	if (!state)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	json_object_del(row, "state");
	if (!created || core_time_parse(created, &rt->last_created_ns))
		rt->last_created_ns = 0;
	st = session_load(rt->s, state, json_string_value(json_object_get(row, "sessionId")),
	                  json_string_value(json_object_get(row, "snapshotId")),
	                  json_array_size(json_object_get(state, "messages")), e);
	/* read with STORE_LAST_MESSAGE: the rest stays in the store */
	const json_t *info = json_object_get(row, STORE_INFO_KEY);
	json_int_t before = json_integer_value(json_object_get(info, "messagesBefore"));
	if (!st && before > 0) {
		rt->resumed_title = json_incref(json_object_get(info, "title"));
		/* the row's count, less the one message read of it */
		const json_t *models = json_object_get(info, "modelMessages");
		long rest = json_is_integer(models)
		            ? (long)json_integer_value(models)
		              - rt_count_models(json_object_get(state, "messages")) : -1;
		rt->resumed_models = rest >= 0 && rest <= (long)before ? rest : -1;
		session_defer_history(rt->s, (size_t)before, load_history, rt);
	}
	return st;
}

enum core_status rt_load(struct runtime *rt, const json_t *init, struct core_err *e)
{
	enum core_status st;
	const char *sid = json_string_value(json_object_get(init, "sessionId"));
	const char *snap = json_string_value(json_object_get(init, "snapshotId"));
	const json_t *state = json_object_get(init, "state");
	json_t *row = NULL;

	if (sid && !*sid)
		sid = NULL;
	if (snap && !*snap)
		snap = NULL;
	if (json_is_null(state))
		state = NULL;
	if (state && (sid || snap))
		return core_fail(e, CORE_EINVAL,
		                 "state is mutually exclusive with session ID and snapshot ID; a client-managed conversation's identity rides inside the state (SessionState.SessionID)");
	if (state && rt->store)
		return core_fail(e, CORE_EPRECONDITION,
		                 "state provided but agent has a session store configured (server-managed state); use snapshot ID instead");
	if ((st = find_row(rt, sid, snap, &row, e))) {
		json_decref(row);
		return st;
	}
	if (row) {
		st = load_row(rt, row, e);
		json_decref(row);
	} else if (state) {
		json_t *copy = json_deep_copy(state);
		st = copy ? session_load(rt->s, copy, json_string_value(json_object_get(state, "sessionId")),
		                         NULL, 0, e)
		          : core_fail(e, CORE_ENOMEM, "out of memory");
	} else {
		st = session_load(rt->s, NULL, sid, NULL, 0, e);
	}
	if (st)
		return st;
	if (!rt->store && !(rt->last_good = json_deep_copy(session_state(rt->s))))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	return CORE_OK;
}

/* ---- inputs ---- */

static enum core_status parts_check(const json_t *parts, const char *what, struct core_err *e)
{
	size_t i;
	json_t *p;
	if (!json_is_array(parts))
		return core_fail(e, CORE_EINVAL, "invalid AgentInput: '%s' must be an array of parts", what);
	json_array_foreach(parts, i, p)
		if (!json_is_object(p))
			return core_fail(e, CORE_EINVAL, "invalid AgentInput: %s[%zu] must be a part object", what, i);
	return CORE_OK;
}

enum core_status rt_input_check(const json_t *in, struct core_err *e)
{
	const char *key;
	json_t *v;
	if (!json_is_object(in))
		return core_fail(e, CORE_EINVAL, "invalid AgentInput: must be a JSON object, not %s", jv_type_name(in));
	json_object_foreach((json_t *)in, key, v) {
		if (!strcmp(key, "detach")) {
			if (!json_is_boolean(v))
				return core_fail(e, CORE_EINVAL, "invalid AgentInput: 'detach' must be a boolean");
		} else if (!strcmp(key, "message")) {
			if (json_is_null(v))
				continue;
			if (!json_is_object(v))
				return core_fail(e, CORE_EINVAL, "invalid AgentInput: 'message' must be a message object");
			const json_t *r = json_object_get(v, "role"), *c = json_object_get(v, "content");
			if (r && !jv_is_string(r))
				return core_fail(e, CORE_EINVAL, "invalid AgentInput: 'message.role' must be a string");
			if (c && parts_check(c, "message.content", e))
				return CORE_EINVAL;
			const json_t *md = json_object_get(v, "metadata");
			if (md && !json_is_object(md) && !json_is_null(md))
				return core_fail(e, CORE_EINVAL, "invalid AgentInput: 'message.metadata' must be an object");
		} else if (!strcmp(key, "resume")) {
			const char *k2;
			json_t *v2;
			if (json_is_null(v))
				continue;
			if (!json_is_object(v))
				return core_fail(e, CORE_EINVAL, "invalid AgentInput: 'resume' must be an object");
			json_object_foreach(v, k2, v2) {
				/* metadata: what the resumed tools see (Genkit's
				 * fix-agent-resume-metadata) */
				if (!strcmp(k2, "metadata")) {
					if (!json_is_object(v2) && !json_is_null(v2))
						return core_fail(e, CORE_EINVAL, "invalid AgentInput: 'resume.metadata' must be an object");
					continue;
				}
				if (strcmp(k2, "respond") && strcmp(k2, "restart"))
					return core_fail(e, CORE_EINVAL, "invalid AgentInput: unknown field \"resume.%s\"", k2);
				char what[32];
				snprintf(what, sizeof what, "resume.%s", k2);
				if (!json_is_null(v2) && parts_check(v2, what, e))
					return CORE_EINVAL;
			}
		} else {
			return core_fail(e, CORE_EINVAL, "invalid AgentInput: unknown field \"%s\"", key);
		}
	}
	return CORE_OK;
}
