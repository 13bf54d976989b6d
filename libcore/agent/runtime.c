/*
 * runtime.c - the session runner and the prompt-backed turn (Genkit's
 * agentLoop and generate tool loop), runtime-semantics §1-4.
 */
#include "runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../store/store.h"
#include "agent_ext.h"
#include "../base/jpatch.h"
#include "../base/json.h"
#include "../model/model.h"
#include "tools.h"
#include "../base/util.h"
#include "prompt.h"
#include "../base/schema.h"
#include "structured.h"
#include "agent_trace.h"

#define TAG_HISTORY "_genkit_history"
#define TAG_PROMPT "_genkit_prompt"
#define DEFAULT_HEARTBEAT_TIMEOUT_MS 60000

struct runtime {
	const struct agent *agent;
	struct store *store;
	struct rt_sink sink;
	int64_t hb_timeout_ms;
	int (*cancelled)(void *ctx);    /* the caller's stop (rt_config) */
	void *cancel_ctx;
	int detached;           /* rt_detach(): no rows, no chunks, last_good kept */
	struct agent_ext *ext;  /* custom agent, transforms, grounding, or NULL */

	char *session_id;
	json_t *state;          /* live SessionState {artifacts?, custom?, messages, sessionId} */
	json_t *last_good;      /* client-managed: state at the last commit (or the initial one) */
	char *last_snapshot_id; /* resume point: last committed row, or the resumed row, or NULL */
	size_t base_kept;       /* leading state messages that are last_snapshot_id's, unchanged */
	long turn_index;
	char last_reason[32];

	struct tool **tools;    /* the agent's tools */
	size_t ntools;
	json_t *tool_defs;      /* their definitions, for the model */

	/* The turn in flight. */
	char *snapshot_id;      /* reserved ID (server-managed) */
	int patch_first;        /* next customPatch is a whole-document replace */
	json_t *patch_baseline; /* the custom value last emitted */
	long msg_index;         /* ModelResponseChunk index within the generate call */
	json_t *minted_refs;    /* refs given to the model call's streamed ref-less
	                           tool requests, in order, or NULL */

	/* The invocation's end. */
	int ended;
	char end_reason[32];    /* failed or aborted */
	json_t *error;          /* {status, message} */
	enum core_status sys_st; /* CORE_ESYS/CORE_ENOMEM: a system failure ended it */
	enum core_status end_st; /* the status of the error that ended it */
	json_t *usage;
	json_t *turn_usage;     /* the turn in flight's share of usage */
};

struct turn_result {
	int committed;
	char reason[32];
	enum core_status st;    /* CORE_OK or the error's status */
	char msg[1200];
};

/* ---- small helpers ---- */

/* The caller's stop (§2.5); ctx is the runtime. */
static int is_cancelled(void *ctx)
{
	struct runtime *rt = ctx;
	return rt->cancelled && rt->cancelled(rt->cancel_ctx);
}

static void emit(struct runtime *rt, const char *key, json_t *value)
{
	json_t *chunk = json_object();
	if (!chunk || json_object_set_new(chunk, key, value)) {
		json_decref(chunk);
		return;
	}
	if (rt->sink.chunk)
		rt->sink.chunk(rt->sink.ctx, chunk);
	json_decref(chunk);
}

static const char *role_of(const json_t *m)
{
	const char *r = json_string_value(json_object_get(m, "role"));
	return r ? r : "";
}

static int has_tag(const json_t *m, const char *tag)
{
	return json_is_true(json_object_get(json_object_get(m, "metadata"), tag));
}

/* A copy of m (shallow below the top) without tag in its metadata; an
 * emptied metadata object is dropped. */
static json_t *untagged(const json_t *m, const char *tag1, const char *tag2)
{
	json_t *c = json_copy((json_t *)m);
	const json_t *md = json_object_get(m, "metadata");
	if (!c || !md || (!json_object_get(md, tag1) && !json_object_get(md, tag2)))
		return c;
	json_t *nm = json_copy((json_t *)md);
	json_object_del(nm, tag1);
	json_object_del(nm, tag2);
	if (json_object_size(nm))
		json_object_set_new(c, "metadata", nm);
	else {
		json_decref(nm);
		json_object_del(c, "metadata");
	}
	return c;
}

/* Keys of a Message in Go's field order: content, metadata, role. */
static json_t *message_new(const char *role, json_t *content /* consumed */)
{
	return json_pack("{s:o, s:s}", "content", content, "role", role);
}

/* A Message with its members in Go's order (content, metadata, role, then
 * anything else); new reference, children shared. */
static json_t *message_ordered(const json_t *m)
{
	json_t *o = json_object();
	static const char *const keys[] = { "content", "metadata", "role" };
	const char *k;
	json_t *v;
	for (int i = 0; i < 3; i++)
		if ((v = json_object_get(m, keys[i])))
			json_object_set(o, keys[i], v);
	json_object_foreach((json_t *)m, k, v)
		if (!json_object_get(o, k))
			json_object_set(o, k, v);
	return o;
}

static json_t *error_new(enum core_status st, const char *msg)
{
	return json_pack("{s:s, s:s}", "status", core_status_name(st), "message", msg);
}

static json_t *messages_of(struct runtime *rt)
{
	json_t *m = json_object_get(rt->state, "messages");
	if (!json_is_array(m)) {
		m = json_array();
		json_object_set_new(rt->state, "messages", m);
	}
	return m;
}

/*
 * How many of the first limit messages of now are those of old, byte for
 * byte.  Keeps base_kept true when the history is replaced: the save can
 * then tell the store which messages it already holds (store_save_on), so
 * the store never compares or re-hashes them.
 */
static size_t kept_prefix(const json_t *old, const json_t *now, size_t limit)
{
	size_t i;
	for (i = 0; i < limit && i < json_array_size(old) && i < json_array_size(now); i++)
		if (!jv_same(json_array_get(old, i), json_array_get(now, i)))
			break;
	return i;
}

/* Re-order a SessionState's members as Go writes them and stamp the
 * session ID.  Consumes s, returns a new object. */
static json_t *state_shaped(struct runtime *rt, const json_t *s)
{
	json_t *o = json_object();
	static const char *const keys[] = { "artifacts", "custom", "messages" };
	for (int i = 0; i < 3; i++) {
		json_t *v = json_object_get(s, keys[i]);
		if (v && !(i == 1 && json_is_null(v)))
			json_object_set(o, keys[i], v);
	}
	json_object_set_new(o, "sessionId", json_string(rt->session_id));
	return o;
}

/* ---- custom state and artifacts (Session.UpdateCustom, SendArtifact) ---- */

static enum core_status custom_emit(struct runtime *rt, json_t *cur, struct core_err *e)
{
	json_t *patch = NULL;
	if (rt->patch_first || !rt->patch_baseline) {
		patch = json_pack("[{s:s, s:s, s:O}]", "op", "replace", "path", "", "value", cur);
		if (!patch)
			return core_fail(e, CORE_ENOMEM, "out of memory");
		rt->patch_first = 0;
	} else {
		enum core_status st = jpatch_diff(rt->patch_baseline, cur, 0, &patch, e);
		if (st)
			return st;
	}
	if (json_array_size(patch))
		emit(rt, "customPatch", patch);
	else
		json_decref(patch);
	json_decref(rt->patch_baseline);
	rt->patch_baseline = json_deep_copy(cur);
	return CORE_OK;
}

/* §3.6: the value diffed is the state transform's view of the whole state
 * when the agent has one (agent_ext.h); its failure fails closed. */
static enum core_status custom_changed(struct runtime *rt, struct core_err *e)
{
	json_t *view = NULL, *shaped = rt->ext ? state_shaped(rt, rt->state) : NULL;
	enum core_status st = agent_ext_custom_view(rt->ext, shaped, rt->session_id, &view, e);
	json_decref(shaped);
	if (!st) {
		json_t *cur = view ? view : json_object_get(rt->state, "custom");
		st = custom_emit(rt, cur ? cur : json_null(), e);
	}
	json_decref(view);
	return st;
}

static enum core_status on_custom(void *ctx, const struct tool *t, const json_t *value,
                                  int is_patch, struct core_err *e)
{
	struct runtime *rt = ctx;
	if (is_patch) {
		json_t *doc = json_deep_copy(json_object_get(rt->state, "custom"));
		if (!doc)
			doc = json_null();
		enum core_status st = jpatch_apply(&doc, value, JPATCH_INPLACE, e);
		if (st) {
			/* Prefixed in place: e->msg cannot be an argument of
			 * core_fail() into e, which would print it twice. */
			json_decref(doc);
			core_err_prefix(e, "bad customPatch");
			e->st = st == CORE_ENOMEM ? st : CORE_EINTERNAL;
			return e->st;
		}
		json_object_set_new(rt->state, "custom", doc);
	} else {
		json_object_set_new(rt->state, "custom", json_deep_copy(value));
	}
	return custom_changed(rt, e);
}

/* Same-name artifacts replace in place; unnamed ones append. */
static void artifact_add(struct runtime *rt, const json_t *a)
{
	json_t *arts = json_object_get(rt->state, "artifacts");
	if (!json_is_array(arts)) {
		arts = json_array();
		json_object_set_new(rt->state, "artifacts", arts);
	}
	json_t *copy = json_deep_copy(a);
	const json_t *name = json_object_get(a, "name");
	size_t i;
	json_t *old;
	if (jv_is_string(name) && json_string_length(name))
		json_array_foreach(arts, i, old)
			if (jv_equal(json_object_get(old, "name"), name)) {
				json_array_set_new(arts, i, copy);
				goto sent;
			}
	json_array_append_new(arts, copy);
sent:
	emit(rt, "artifact", json_deep_copy(a));
}

static enum core_status on_artifact(void *ctx, const struct tool *t, const json_t *a,
                                    struct core_err *e)
{
	artifact_add(ctx, a);
	return CORE_OK;
}

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
		int64_t age = hb_age_ms(row, core_now_ns());
		int pending = !strcmp(status, "pending");
		if (age > rt->hb_timeout_ms) {
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
		} else if (strcmp(key, "custom")) {
			return core_fail(e, CORE_EINVAL, "invalid state: unknown field \"%s\"", key);
		}
	}
	return CORE_OK;
}

static enum core_status init_check(const json_t *init, struct core_err *e)
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

static enum core_status load_session(struct runtime *rt, const json_t *init, struct core_err *e)
{
	const char *sid = json_string_value(json_object_get(init, "sessionId"));
	const char *snap = json_string_value(json_object_get(init, "snapshotId"));
	const json_t *state = json_object_get(init, "state");
	json_t *row = NULL;
	enum core_status st;
	struct core_err se = { 0 };
	char uuid[37];

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
	if (snap) {
		if (!rt->store)
			return core_fail(e, CORE_EPRECONDITION,
			                 "snapshot ID \"%s\" provided but agent has no session store configured (client-managed state); use state instead",
			                 snap);
		st = store_get(rt->store, snap, 0, &row, &se);
		if (st == CORE_ENOTFOUND)
			return core_fail(e, CORE_ENOTFOUND, "snapshot \"%s\" not found", snap);
		if (st)
			return core_fail(e, st, "failed to load snapshot \"%s\": %s", snap, se.msg);
		const char *owner = json_string_value(json_object_get(row, "sessionId"));
		if (sid && strcmp(owner ? owner : "", sid)) {
			core_fail(e, CORE_EINVAL, "snapshot \"%s\" does not belong to session \"%s\" (snapshot's session: \"%s\")",
			          snap, sid, owner ? owner : "");
			json_decref(row);
			return CORE_EINVAL;
		}
	} else if (sid) {
		if (!rt->store)
			return core_fail(e, CORE_EPRECONDITION,
			                 "session ID \"%s\" provided but agent has no session store configured (client-managed state); the conversation's identity rides inside the state object (SessionState.SessionID)",
			                 sid);
		st = store_latest(rt->store, sid, 0, &row, &se);
		if (st && st != CORE_ENOTFOUND)
			return core_fail(e, st, "failed to resolve latest snapshot for session \"%s\": %s", sid, se.msg);
		if (row) {
			const char *owner = json_string_value(json_object_get(row, "sessionId"));
			if (strcmp(owner ? owner : "", sid)) {
				core_fail(e, CORE_EINTERNAL,
				          "store resolved session \"%s\" to snapshot \"%s\", which belongs to session \"%s\"; the store violates the GetLatestSnapshot contract",
				          sid, json_string_value(json_object_get(row, "snapshotId")), owner ? owner : "");
				json_decref(row);
				return CORE_EINTERNAL;
			}
		}
	}

	if (row) {
		if ((st = resumable(rt, row, e))) {
			json_decref(row);
			return st;
		}
		const json_t *s = json_object_get(row, "state");
		rt->state = json_is_object(s) ? json_deep_copy(s) : json_object();
		rt->last_snapshot_id = strdup(json_string_value(json_object_get(row, "snapshotId")));
		rt->base_kept = json_array_size(json_object_get(s, "messages"));
		const char *owner = json_string_value(json_object_get(row, "sessionId"));
		if (owner && *owner)
			rt->session_id = strdup(owner);
		json_decref(row);
	} else if (state) {
		rt->state = json_deep_copy(state);
		const char *own = json_string_value(json_object_get(state, "sessionId"));
		if (own && *own)
			rt->session_id = strdup(own);
	} else {
		rt->state = json_object();
		if (sid)
			rt->session_id = strdup(sid);
	}
	if (!rt->session_id) {
		core_uuid(uuid);
		rt->session_id = strdup(uuid);
	}
	if (!rt->state || !rt->session_id)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	json_object_set_new(rt->state, "sessionId", json_string(rt->session_id));
	messages_of(rt);
	if (!rt->store)
		rt->last_good = json_deep_copy(rt->state);
	return CORE_OK;
}

enum core_status rt_open(const struct rt_config *cfg, struct runtime **out,
                         struct core_err *e)
{
	enum core_status st;
	struct runtime *rt = calloc(1, sizeof *rt);
	if (!rt)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	rt->agent = cfg->agent;
	rt->store = cfg->store;
	if (cfg->sink)
		rt->sink = *cfg->sink;
	rt->hb_timeout_ms = cfg->heartbeat_timeout_ms > 0 ? cfg->heartbeat_timeout_ms
	                                                  : DEFAULT_HEARTBEAT_TIMEOUT_MS;
	rt->cancelled = cfg->cancelled;
	rt->ext = cfg->ext;
	rt->cancel_ctx = cfg->cancel_ctx;
	if (!(rt->usage = json_object()) || !(rt->turn_usage = json_object()) ||
	    !(rt->tool_defs = json_array()))
		goto nomem;
	if ((st = init_check(cfg->init, e)))
		goto fail;
	size_t n = json_array_size(rt->agent->tools), i;
	json_t *name;
	if (n && !(rt->tools = calloc(n, sizeof *rt->tools)))
		goto nomem;
	json_array_foreach(rt->agent->tools, i, name) {
		struct tool *t;
		if ((st = tool_load(json_string_value(name), rt->agent->tool_dirs, &t, e)))
			goto fail;
		rt->tools[rt->ntools++] = t;
		json_array_append(rt->tool_defs, t->definition);
	}
	if ((st = load_session(rt, cfg->init, e)))
		goto fail;
	*out = rt;
	return CORE_OK;
nomem:
	st = core_fail(e, CORE_ENOMEM, "out of memory");
fail:
	rt_free(rt);
	return st;
}

void rt_free(struct runtime *rt)
{
	if (!rt)
		return;
	free(rt->session_id);
	json_decref(rt->state);
	json_decref(rt->last_good);
	free(rt->last_snapshot_id);
	for (size_t i = 0; i < rt->ntools; i++)
		tool_free(rt->tools[i]);
	free(rt->tools);
	json_decref(rt->tool_defs);
	free(rt->snapshot_id);
	json_decref(rt->patch_baseline);
	json_decref(rt->error);
	json_decref(rt->usage);
	json_decref(rt->turn_usage);
	free(rt);
}

const char *rt_session_id(const struct runtime *rt)
{
	return rt->session_id;
}

const json_t *rt_usage(const struct runtime *rt)
{
	return rt->usage;
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

/* ---- resume validation (§3.7, ValidateResumeAgainstHistory) ---- */

/* Does the tool request or response body name this call (a missing name or
 * ref counts as "")? */
static int names_call(const json_t *body, const char *name, const char *ref)
{
	const char *n = json_string_value(json_object_get(body, "name"));
	const char *r = json_string_value(json_object_get(body, "ref"));
	return body && !strcmp(n ? n : "", name) && !strcmp(r ? r : "", ref);
}

/* The entry of resume.field (whose body is under key) naming this call. */
static const json_t *resume_entry(const json_t *resume, const char *field, const char *key,
                                  const char *name, const char *ref)
{
	size_t j;
	json_t *p;
	json_array_foreach(json_object_get(resume, field), j, p)
		if (names_call(json_object_get(p, key), name, ref))
			return p;
	return NULL;
}

static int find_in(const json_t *history, long idx, const char *name, const char *ref,
                   const json_t **found)
{
	const json_t *m = json_array_get(history, (size_t)idx);
	if (strcmp(role_of(m), "model"))
		return 0;
	const json_t *content = json_object_get(m, "content");
	for (size_t i = json_array_size(content); i-- > 0;) {
		const json_t *tr = json_object_get(json_array_get(content, i), "toolRequest");
		if (names_call(tr, name, ref)) {
			if (found)
				*found = tr;
			return 1;
		}
	}
	return 0;
}

static enum core_status unresolved(const json_t *history, long pending, const char *field,
                                   const char *name, const char *ref, struct core_err *e)
{
	char refs[300] = "";
	if (*ref)
		snprintf(refs, sizeof refs, " (ref: %s)", ref);
	for (long i = pending - 1; i >= 0; i--)
		if (find_in(history, i, name, ref, NULL))
			return core_fail(e, CORE_EINVAL,
			                 "resume.%s references tool \"%s\"%s from an earlier turn which is no longer pending; only tool requests from the most recent model response can be resumed",
			                 field, name, refs);
	return core_fail(e, CORE_EINVAL,
	                 "resume.%s references tool \"%s\"%s which was not found in session history",
	                 field, name, refs);
}

static enum core_status validate_resume(const json_t *resume, const json_t *history,
                                        struct core_err *e)
{
	long pending = -1;
	for (size_t i = json_array_size(history); i-- > 0;)
		if (!strcmp(role_of(json_array_get(history, i)), "model")) {
			pending = (long)i;
			break;
		}
	static const char *const fields[] = { "restart", "respond" };
	for (int f = 0; f < 2; f++) {
		size_t i;
		json_t *p;
		json_array_foreach(json_object_get(resume, fields[f]), i, p) {
			const json_t *body = json_object_get(p, f == 0 ? "toolRequest" : "toolResponse");
			if (!json_is_object(body))
				continue;
			const char *name = json_string_value(json_object_get(body, "name"));
			const char *ref = json_string_value(json_object_get(body, "ref"));
			const json_t *orig = NULL;
			name = name ? name : "";
			ref = ref ? ref : "";
			if (pending < 0 || !find_in(history, pending, name, ref, &orig))
				return unresolved(history, pending < 0 ? 0 : pending, fields[f], name, ref, e);
			if (f == 0) {
				const json_t *a = json_object_get(body, "input"), *b = json_object_get(orig, "input");
				if (!jv_equal(a ? a : json_null(), b ? b : json_null())) {
					char refs[300] = "";
					if (*ref)
						snprintf(refs, sizeof refs, " (ref: %s)", ref);
					return core_fail(e, CORE_EINVAL,
					                 "resume.restart for tool \"%s\"%s has modified inputs that do not match the original tool request in session history; restart inputs must exactly match the interrupted tool request",
					                 name, refs);
				}
			}
		}
	}
	return CORE_OK;
}

/* ---- the generate loop ---- */

struct gen {
	struct runtime *rt;
	json_t *msgs;           /* rendered messages + generated ones, tagged */
	size_t rounds;          /* completed tool rounds */
	int committable;        /* a partial response exists (a round or a resume ran) */
	json_t *last_usage;
};

/* Whether a tool request has a ref (a non-empty string). */
static int has_ref(const json_t *tr)
{
	const json_t *ref = json_object_get(tr, "ref");
	return jv_is_string(ref) && json_string_length(ref);
}

/*
 * A chunk's content as streamed: a tool request the model gave no ref gets
 * one here, remembered in rt->minted_refs so that collect_requests() gives
 * the final message's request the same one and a stream consumer can pair
 * the streamed request with its toolResponse.  NULL only without memory
 * (json_object_set_new() then sets nothing).
 */
static json_t *chunk_content(struct runtime *rt, const json_t *content)
{
	size_t i;
	json_t *part, *out;
	if (!json_is_array(content))
		return json_array();
	json_array_foreach(content, i, part) {
		const json_t *tr = json_object_get(part, "toolRequest");
		if (json_is_object(tr) && !has_ref(tr))
			break;
	}
	if (i == json_array_size(content))
		return json_incref((json_t *)content);
	if (!(out = json_deep_copy(content)))
		return NULL;
	if (!rt->minted_refs && !(rt->minted_refs = json_array()))
		return out;
	json_array_foreach(out, i, part) {
		json_t *tr = json_object_get(part, "toolRequest");
		if (json_is_object(tr) && !has_ref(tr)) {
			char uuid[37];
			core_uuid(uuid);
			json_object_set_new(tr, "ref", json_string(uuid));
			json_array_append_new(rt->minted_refs, json_string(uuid));
		}
	}
	return out;
}

static enum core_status on_model_chunk(void *ctx, const json_t *chunk)
{
	struct runtime *rt = ctx;
	json_t *c = json_object();
	const json_t *v;
	if (!c)
		return CORE_ENOMEM;
	if ((v = json_object_get(chunk, "aggregated")))
		json_object_set(c, "aggregated", (json_t *)v);
	json_object_set_new(c, "content", chunk_content(rt, json_object_get(chunk, "content")));
	if ((v = json_object_get(chunk, "custom")))
		json_object_set(c, "custom", (json_t *)v);
	json_object_set_new(c, "index", json_integer(rt->msg_index));
	json_object_set_new(c, "role", json_string("model"));
	emit(rt, "modelChunk", c);
	return CORE_OK;
}

/* The request the model sees: every message without the runtime's tags. */
static json_t *request_messages(const json_t *msgs)
{
	json_t *out = json_array();
	size_t i;
	json_t *m;
	json_array_foreach(msgs, i, m)
		json_array_append_new(out, untagged(m, TAG_PROMPT, TAG_HISTORY));
	return out;
}

/* The session's messages after the turn: all but the prompt's scaffolding. */
static json_t *session_messages(const json_t *msgs, size_t drop_tail)
{
	json_t *out = json_array();
	size_t n = json_array_size(msgs), i;
	for (i = 0; i + drop_tail < n; i++) {
		json_t *m = json_array_get(msgs, i);
		if (!has_tag(m, TAG_PROMPT))
			json_array_append_new(out, untagged(m, TAG_PROMPT, TAG_HISTORY));
	}
	return out;
}

static void sum_usage(json_t *sum, const json_t *u)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)u, k, v) {
		if (!json_is_integer(v))
			continue;
		json_t *old = json_object_get(sum, k);
		json_object_set_new(sum, k, json_integer(json_integer_value(v)
		                    + (json_is_integer(old) ? json_integer_value(old) : 0)));
	}
}

static void add_usage(struct runtime *rt, const json_t *u)
{
	sum_usage(rt->usage, u);
	sum_usage(rt->turn_usage, u);
}

static struct tool *find_tool(struct runtime *rt, const char *name)
{
	for (size_t i = 0; i < rt->ntools; i++)
		if (!strcmp(rt->tools[i]->name, name))
			return rt->tools[i];
	return NULL;
}

static void tool_ctx(struct runtime *rt, struct tool_context *tc)
{
	tc->session_id = rt->session_id;
	tc->snapshot_id = rt->snapshot_id ? rt->snapshot_id : "";
	tc->parent_snapshot_id = rt->last_snapshot_id ? rt->last_snapshot_id : "";
	tc->turn_index = rt->turn_index;
}

static void set_meta(json_t *part, const char *key, json_t *value /* consumed */)
{
	json_t *md = json_object_get(part, "metadata");
	if (!json_is_object(md)) {
		md = json_object();
		json_object_set_new(part, "metadata", md);
	}
	json_object_set_new(md, key, value);
}

static void del_meta(json_t *part, const char *key)
{
	json_t *md = json_object_get(part, "metadata");
	if (json_is_object(md)) {
		json_object_del(md, key);
		if (!json_object_size(md))
			json_object_del(part, "metadata");
	}
}

static json_t *tool_response_part(const json_t *req, struct tool_call *c)
{
	json_t *tr = json_object();
	json_object_set(tr, "name", json_object_get(req, "name"));
	if (json_object_get(req, "ref"))
		json_object_set(tr, "ref", json_object_get(req, "ref"));
	json_object_set(tr, "output", c->output ? c->output : json_null());
	if (json_array_size(c->parts))
		json_object_set(tr, "content", c->parts);
	return json_pack("{s:o}", "toolResponse", tr);
}

/* Fail r with "tool \"x\" failed: ..." (INTERNAL) or the call's own class
 * for a missing tool. */
static void tool_failed(struct turn_result *r, const char *name, const struct tool_call *c)
{
	r->st = CORE_EINTERNAL;
	snprintf(r->msg, sizeof r->msg, "generate: tool \"%s\" failed: %s", name, c->err.msg);
}

/*
 * Run the tool requests (parts of model message m, indices idx[0..n)) in
 * parallel.  restart[i] (may be NULL) is the restart metadata of a resumed
 * call.  Results land in calls[].  Returns non-zero with r filled when a
 * tool is missing or could not be run.
 */
static int run_calls(struct runtime *rt, json_t *m, const size_t *idx, const json_t *const *resumed,
                     struct tool_call *calls, size_t n, struct turn_result *r)
{
	const json_t *content = json_object_get(m, "content");
	for (size_t i = 0; i < n; i++) {
		const json_t *tr = json_object_get(json_array_get(content, idx[i]), "toolRequest");
		const char *name = json_string_value(json_object_get(tr, "name"));
		memset(&calls[i], 0, sizeof calls[i]);
		calls[i].tool = find_tool(rt, name ? name : "");
		if (!calls[i].tool) {
			r->st = CORE_ENOTFOUND;
			snprintf(r->msg, sizeof r->msg, "generate: tool \"%s\" not found", name ? name : "");
			return 1;
		}
		calls[i].input = json_object_get(tr, "input");
		calls[i].resumed = resumed ? resumed[i] : NULL;
		/* the input the model wrote must match the tool's declared
		 * schema, or no tool of the round runs */
		struct core_err se = { 0 };
		if (calls[i].tool->input_schema &&
		    schema_check(calls[i].tool->input_schema, calls[i].input, &se)) {
			r->st = CORE_EINTERNAL;
			snprintf(r->msg, sizeof r->msg, "generate: tool \"%s\" failed: invalid input: %s",
			         name, se.msg);
			return 1;
		}
	}
	struct tool_context tc;
	struct tool_events ev = { on_custom, on_artifact, rt, is_cancelled };
	struct core_err e = { 0 };
	tool_ctx(rt, &tc);
	if (tools_run(calls, n, json_object_get(rt->state, "custom"), &tc, &ev, &e)) {
		for (size_t i = 0; i < n; i++)
			tool_call_release(&calls[i]);
		r->st = e.st;
		snprintf(r->msg, sizeof r->msg, "generate: %s", e.msg);
		return 1;
	}
	return 0;
}

/* Mark interrupted requests on m; completed ones keep their output as
 * pendingOutput.  Emits the tool-role chunk with the interrupt parts. */
static void mark_interrupts(struct runtime *rt, json_t *m, const size_t *idx,
                            struct tool_call *calls, size_t n)
{
	json_t *content = json_object_get(m, "content");
	json_t *ints = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *part = json_array_get(content, idx[i]);
		if (calls[i].interrupt) {
			set_meta(part, "interrupt", json_incref(calls[i].interrupt));
			del_meta(part, "pendingOutput");
			json_array_append(ints, part);
		} else {
			set_meta(part, "pendingOutput", json_incref(calls[i].output ? calls[i].output : json_null()));
		}
	}
	emit(rt, "modelChunk", json_pack("{s:o, s:i, s:s}", "content", json_deep_copy(ints),
	                                 "index", 0, "role", "tool"));
	json_decref(ints);
}

static void emit_tool_message(struct runtime *rt, const json_t *content)
{
	emit(rt, "modelChunk", json_pack("{s:O, s:I, s:s}", "content", content,
	                                 "index", (json_int_t)rt->msg_index, "role", "tool"));
	rt->msg_index++;
}

/*
 * Resume the pending model message (the last message of g->msgs) with the
 * input's respond/restart parts (already validated).  Returns 0 to go on
 * to the model, 1 when the turn is over (r filled: interrupted again, or
 * a failure).
 */
static int apply_resume(struct gen *g, const json_t *resume, struct turn_result *r)
{
	struct runtime *rt = g->rt;
	size_t n = json_array_size(g->msgs);
	json_t *m = n ? json_array_get(g->msgs, n - 1) : NULL;
	if (!m || strcmp(role_of(m), "model")) {
		r->st = CORE_EINVAL;
		snprintf(r->msg, sizeof r->msg,
		         "generate: cannot resume: the conversation does not end with a model message requesting tools");
		return 1;
	}
	/* Work on a copy: the history message changes (resolved interrupts). */
	m = json_deep_copy(m);
	json_array_set_new(g->msgs, n - 1, m);
	json_t *content = json_object_get(m, "content");
	size_t np = json_array_size(content), nreq = 0, nrestart = 0;
	json_t **resp = calloc(np + 1, sizeof *resp);
	size_t *ridx = calloc(np + 1, sizeof *ridx), *rpos = calloc(np + 1, sizeof *rpos);
	const json_t **rmeta = calloc(np + 1, sizeof *rmeta);
	struct tool_call *calls = calloc(np + 1, sizeof *calls);
	int over = 1;
	if (!resp || !ridx || !rpos || !rmeta || !calls) {
		r->st = CORE_ENOMEM;
		snprintf(r->msg, sizeof r->msg, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < np; i++) {
		json_t *part = json_array_get(content, i);
		json_t *tr = json_object_get(part, "toolRequest");
		if (!tr)
			continue;
		nreq++;
		const char *name = json_string_value(json_object_get(tr, "name"));
		const char *ref = json_string_value(json_object_get(tr, "ref"));
		name = name ? name : "";
		ref = ref ? ref : "";
		json_t *md = json_object_get(part, "metadata");
		json_t *intr = json_object_get(md, "interrupt");
		const json_t *hit = resume_entry(resume, "respond", "toolResponse", name, ref);
		if (hit) {
			json_t *rp = json_deep_copy(hit);
			if (!json_object_get(json_object_get(rp, "metadata"), "interruptResponse"))
				set_meta(rp, "interruptResponse", json_true());
			resp[i] = rp;
			if (intr)
				set_meta(part, "resolvedInterrupt", json_incref(intr));
			del_meta(part, "interrupt");
			del_meta(part, "pendingOutput");
			continue;
		}
		if ((hit = resume_entry(resume, "restart", "toolRequest", name, ref))) {
			const json_t *res = json_object_get(json_object_get(hit, "metadata"), "resumed");
			rmeta[nrestart] = res ? res : json_true();
			ridx[nrestart] = i;
			rpos[nrestart++] = i;
			if (intr)
				set_meta(part, "resolvedInterrupt", json_incref(intr));
			del_meta(part, "interrupt");
			continue;
		}
		json_t *pend = json_object_get(md, "pendingOutput");
		if (pend) {
			json_t *trp = json_pack("{s:O}", "name", json_object_get(tr, "name"));
			if (json_object_get(tr, "ref"))
				json_object_set(trp, "ref", json_object_get(tr, "ref"));
			json_object_set(trp, "output", pend);
			resp[i] = json_pack("{s:o, s:{s:s}}", "toolResponse", trp, "metadata", "source", "pending");
			del_meta(part, "pendingOutput");
			continue;
		}
		r->st = CORE_EINVAL;
		snprintf(r->msg, sizeof r->msg,
		         "generate: unresolved tool request \"%s\" was not handled by the resume argument; supply a respond or restart entry for every interrupted tool request",
		         name);
		goto out;
	}
	if (!nreq) {
		r->st = CORE_EINVAL;
		snprintf(r->msg, sizeof r->msg,
		         "generate: cannot resume: the last model message has no tool requests");
		goto out;
	}
	if (nrestart) {
		/* Restarted tools see their resume data; a restart must match the
		 * original input exactly, so the original request runs again. */
		for (size_t k = 0; k < nrestart; k++)
			set_meta(json_array_get(content, ridx[k]), "resumed", json_incref((json_t *)rmeta[k]));
		if (run_calls(rt, m, ridx, rmeta, calls, nrestart, r))
			goto out;
		int interrupted = 0;
		for (size_t k = 0; k < nrestart; k++) {
			json_t *part = json_array_get(content, ridx[k]);
			del_meta(part, "resumed");
			if (calls[k].st) {
				tool_failed(r, json_string_value(json_object_get(json_object_get(part, "toolRequest"), "name")),
				            &calls[k]);
				g->committable = 1;
				goto out;
			}
			if (calls[k].interrupt)
				interrupted = 1;
			else
				resp[rpos[k]] = tool_response_part(json_object_get(part, "toolRequest"), &calls[k]);
		}
		if (interrupted) {
			/* Keep what is resolved as pending output for the next resume. */
			json_t *ints = json_array();
			for (size_t i = 0; i < np; i++) {
				json_t *part = json_array_get(content, i);
				if (resp[i])
					set_meta(part, "pendingOutput",
					         json_incref(json_object_get(json_object_get(resp[i], "toolResponse"), "output")));
			}
			for (size_t k = 0; k < nrestart; k++)
				if (calls[k].interrupt) {
					json_t *part = json_array_get(content, ridx[k]);
					del_meta(part, "resolvedInterrupt");
					set_meta(part, "interrupt", json_incref(calls[k].interrupt));
					json_array_append(ints, part);
				}
			emit(rt, "modelChunk", json_pack("{s:o, s:i, s:s}", "content", json_deep_copy(ints),
			                                 "index", 0, "role", "tool"));
			json_decref(ints);
			r->st = CORE_OK;
			snprintf(r->reason, sizeof r->reason, "interrupted");
			r->committed = 1;
			goto out;
		}
	}
	json_t *tcontent = json_array();
	for (size_t i = 0; i < np; i++)
		if (resp[i]) {
			json_array_append_new(tcontent, resp[i]);
			resp[i] = NULL;
		}
	json_t *tmsg = json_pack("{s:O, s:{s:b}, s:s}", "content", tcontent, "metadata", "resumed", 1,
	                         "role", "tool");
	emit_tool_message(rt, tcontent);
	json_decref(tcontent);
	json_array_append_new(g->msgs, tmsg);
	g->committable = 1;
	over = 0;
out:
	for (size_t k = 0; calls && k < nrestart; k++)
		tool_call_release(&calls[k]);
	for (size_t i = 0; resp && i < np; i++)
		json_decref(resp[i]);
	free(resp);
	free(ridx);
	free(rpos);
	free(rmeta);
	free(calls);
	return over;
}

/* Tool requests without a ref get a UUID ref (Genkit does the same): the
 * one their streamed chunk carried (minted, in order), else a fresh one. */
static size_t collect_requests(json_t *m, const json_t *minted, size_t **idx)
{
	json_t *content = json_object_get(m, "content");
	size_t n = 0, k = 0, i;
	json_t *part;
	*idx = calloc(json_array_size(content) + 1, sizeof **idx);
	if (!*idx)
		return 0;
	json_array_foreach(content, i, part) {
		json_t *tr = json_object_get(part, "toolRequest");
		if (!json_is_object(tr))
			continue;
		if (!has_ref(tr)) {
			char uuid[37];
			const char *ref = json_string_value(json_array_get(minted, k++));
			if (!ref) {
				core_uuid(uuid);
				ref = uuid;
			}
			json_object_set_new(tr, "ref", json_string(ref));
		}
		(*idx)[n++] = i;
	}
	return n;
}

/* The generate call with its tool loop.  On return r says how the turn
 * ended and g->msgs holds everything generated. */
static void generate(struct gen *g, const json_t *resume, struct turn_result *r)
{
	struct runtime *rt = g->rt;
	const struct agent *a = rt->agent;
	rt->msg_index = 0;
	if (resume && apply_resume(g, resume, r))
		return;
	for (;;) {
		struct model_request req = { 0 };
		struct model_stream stream = { on_model_chunk, is_cancelled, rt };
		struct model_response resp = { 0 };
		struct core_err e = { 0 };
		json_t *reqmsgs = request_messages(g->msgs);
		agent_ext_augment(rt->ext, reqmsgs);
		req.messages = reqmsgs;
		req.tools = json_array_size(rt->tool_defs) ? rt->tool_defs : NULL;
		req.config = a->config;
		req.key_file = a->key_file;
		req.output = a->output;
		struct trace_span *span = agent_trace_model_begin(a->model, reqmsgs);
		enum core_status st = model_generate(a->model, &req, &stream, &resp, &e);
		agent_trace_model_end(span, st, e.msg, &resp);
		json_t *minted = rt->minted_refs;
		rt->minted_refs = NULL;
		json_decref(reqmsgs);
		if (st) {
			json_decref(minted);
			r->st = st;
			snprintf(r->msg, sizeof r->msg, "generate: %s", e.msg);
			r->committed = g->committable;
			return;
		}
		if (resp.usage)
			add_usage(rt, resp.usage);
		json_t *m = json_is_object(resp.message) ? json_deep_copy(resp.message)
		                                         : message_new("model", json_array());
		json_object_set_new(m, "role", json_string("model"));
		json_t *ordered = message_ordered(m);
		json_decref(m);
		m = ordered;
		json_array_append_new(g->msgs, m);
		rt->msg_index++;
		size_t *idx = NULL, n = collect_requests(m, minted, &idx);
		json_decref(minted);
		if (!n && a->output && (st = structured_check(a->output, m, NULL, &e))) {
			/* A reply that is not the JSON asked for fails the turn
			 * (§9.1 #144); the message is not committed. */
			model_response_release(&resp);
			free(idx);
			r->st = st;
			snprintf(r->msg, sizeof r->msg, "generate: %s", e.msg);
			json_array_remove(g->msgs, json_array_size(g->msgs) - 1);
			r->committed = g->committable;
			return;
		}
		if (!n || !strcmp(resp.finish_reason, "interrupted")) {
			snprintf(r->reason, sizeof r->reason, "%s", resp.finish_reason);
			model_response_release(&resp);
			free(idx);
			r->st = CORE_OK;
			r->committed = 1;
			return;
		}
		model_response_release(&resp);
		if (g->rounds + 1 > (size_t)a->max_turns) {
			free(idx);
			r->st = CORE_ABORTED;
			snprintf(r->msg, sizeof r->msg, "generate: exceeded maximum tool call iterations (%d)",
			         a->max_turns);
			json_array_remove(g->msgs, json_array_size(g->msgs) - 1);
			r->committed = 1;
			return;
		}
		struct tool_call *calls = calloc(n, sizeof *calls);
		if (!calls) {
			free(idx);
			r->st = CORE_ENOMEM;
			snprintf(r->msg, sizeof r->msg, "out of memory");
			return;
		}
		int failed = run_calls(rt, m, idx, NULL, calls, n, r), interrupted = 0;
		for (size_t i = 0; !failed && i < n; i++) {
			if (calls[i].st) {
				const json_t *tr = json_object_get(json_array_get(json_object_get(m, "content"), idx[i]),
				                                   "toolRequest");
				tool_failed(r, json_string_value(json_object_get(tr, "name")), &calls[i]);
				failed = 1;
			} else if (calls[i].interrupt) {
				interrupted = 1;
			}
		}
		if (failed) {
			/* The failed round's model message is not committed. */
			json_array_remove(g->msgs, json_array_size(g->msgs) - 1);
			r->committed = 1;
		} else if (interrupted) {
			mark_interrupts(rt, m, idx, calls, n);
			r->st = CORE_OK;
			snprintf(r->reason, sizeof r->reason, "interrupted");
			r->committed = 1;
		} else {
			json_t *content = json_array();
			json_t *mc = json_object_get(m, "content");
			for (size_t i = 0; i < n; i++)
				json_array_append_new(content, tool_response_part(
					json_object_get(json_array_get(mc, idx[i]), "toolRequest"), &calls[i]));
			emit_tool_message(rt, content);
			json_array_append_new(g->msgs, message_new("tool", content));
			g->rounds++;
			g->committable = 1;
		}
		for (size_t i = 0; i < n; i++)
			tool_call_release(&calls[i]);
		free(calls);
		free(idx);
		if (failed || interrupted)
			return;
	}
}

/* ---- one turn ---- */

static int message_has_tool_parts(const json_t *msg)
{
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(msg, "content"), i, p)
		if (json_object_get(p, "toolRequest") || json_object_get(p, "toolResponse"))
			return 1;
	return 0;
}

static int resume_has_payload(const json_t *resume)
{
	return json_array_size(json_object_get(resume, "respond"))
	    || json_array_size(json_object_get(resume, "restart"));
}

/* Render the prompt around the history: every message tagged as history or
 * scaffolding (§3.4 step 4). */
static enum core_status render(struct runtime *rt, const json_t *history, json_t **out,
                               struct core_err *e)
{
	const struct agent *a = rt->agent;
	json_t *msgs;
	if (a->prompt) {
		json_t *tagged = json_array(), *rendered = NULL;
		size_t i;
		json_t *m;
		json_array_foreach(history, i, m) {
			json_t *c = json_copy(m);
			json_t *md = json_object_get(m, "metadata");
			md = json_is_object(md) ? json_copy(md) : json_object();
			json_object_set_new(md, TAG_HISTORY, json_true());
			json_object_set_new(c, "metadata", md);
			json_array_append_new(tagged, c);
		}
		const json_t *custom = json_object_get(rt->state, "custom");
		enum core_status st = prompt_render(a->prompt, a->input, custom, tagged, &rendered, e);
		json_decref(tagged);
		if (st)
			return st;
		msgs = json_array();
		json_array_foreach(rendered, i, m) {
			if (has_tag(m, TAG_HISTORY)) {
				json_array_append_new(msgs, untagged(m, TAG_HISTORY, TAG_PROMPT));
			} else {
				json_t *c = json_copy(m);
				json_t *md = json_object_get(m, "metadata");
				md = json_is_object(md) ? json_copy(md) : json_object();
				json_object_set_new(md, TAG_PROMPT, json_true());
				json_object_set_new(c, "metadata", md);
				json_array_append_new(msgs, c);
			}
		}
		json_decref(rendered);
		*out = msgs;
		return CORE_OK;
	}
	msgs = json_array();
	if (!msgs)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	if (a->system)
		json_array_append_new(msgs, json_pack("{s:[{s:s}], s:{s:b}, s:s}", "content", "text", a->system,
		                                      "metadata", TAG_PROMPT, 1, "role", "system"));
	json_array_extend(msgs, (json_t *)history);
	*out = msgs;
	return CORE_OK;
}

static void agent_turn(struct runtime *rt, const json_t *input, struct turn_result *r)
{
	const json_t *msg = json_object_get(input, "message");
	const json_t *resume = json_object_get(input, "resume");
	struct core_err e = { 0 };
	if (json_is_null(msg))
		msg = NULL;
	if (json_is_null(resume))
		resume = NULL;
	if (msg) {
		const char *role = role_of(msg);
		if (*role && strcmp(role, "user")) {
			r->st = CORE_EINVAL;
			snprintf(r->msg, sizeof r->msg, "agent input message must have role \"user\", got \"%s\"", role);
			return;
		}
		if (message_has_tool_parts(msg)) {
			r->st = CORE_EINVAL;
			snprintf(r->msg, sizeof r->msg,
			         "agent input message must not contain tool request or response parts; use AgentInput.Resume instead");
			return;
		}
	}
	json_t *history = messages_of(rt);
	if (!msg && !resume_has_payload(resume) && !json_array_size(history)) {
		r->st = CORE_EINVAL;
		snprintf(r->msg, sizeof r->msg, "agent input message or resume is required to start a conversation");
		return;
	}
	if (agent_ext_ground(rt->ext, history, &e)) {
		/* Grounding (--docs) failed: the turn is not committed. */
		r->st = e.st;
		snprintf(r->msg, sizeof r->msg, "%s", e.msg);
		return;
	}
	struct gen g = { rt, NULL, 0, 0, NULL };
	if (render(rt, history, &g.msgs, &e)) {
		r->st = e.st;
		snprintf(r->msg, sizeof r->msg, "%s", e.msg);
		return;
	}
	if (resume && !resume_has_payload(resume))
		resume = NULL;
	if (resume && validate_resume(resume, history, &e)) {
		r->st = e.st;
		snprintf(r->msg, sizeof r->msg, "%s", e.msg);
		json_decref(g.msgs);
		return;
	}
	agent_trace_generate_begin();
	generate(&g, resume, r);
	agent_trace_generate_end(r->st, r->msg);
	if (r->committed) {
		json_t *now = session_messages(g.msgs, 0);
		rt->base_kept = kept_prefix(history, now, rt->base_kept);
		json_object_set_new(rt->state, "messages", now);
	}
	json_decref(g.msgs);
}

/* ---- turn end: snapshot, TurnEnd, last-good state ---- */

struct save_ctx {
	json_t *row;
};

static enum core_status save_fn(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e)
{
	struct save_ctx *s = ctx;
	*next = json_incref(s->row);
	return CORE_OK;
}

static const char *terminal_status(const struct turn_result *r)
{
	if (r->st == CORE_OK)
		return "completed";
	return !strcmp(r->reason, "aborted") ? "aborted" : "failed";
}

/* The session's title: its first user text, blanks folded, cut at
 * TITLE_MAX bytes on a character boundary. */
#define TITLE_MAX 72
static json_t *session_title(struct runtime *rt)
{
	json_t *msgs = messages_of(rt), *m, *part;
	size_t i, j;
	json_array_foreach(msgs, i, m) {
		if (strcmp(role_of(m), "user"))
			continue;
		json_array_foreach(json_object_get(m, "content"), j, part) {
			const char *t = json_string_value(json_object_get(part, "text"));
			char out[TITLE_MAX + 4];
			size_t n = 0, cut = 0;
			int blank = 0;
			if (!t)
				continue;
			for (; *t && n < TITLE_MAX; t++) {
				if (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r') {
					blank = n > 0;
					continue;
				}
				if (blank) {
					cut = n;
					out[n++] = ' ';
					blank = 0;
					if (n == TITLE_MAX)
						break;
				}
				if (((unsigned char)*t & 0xc0) != 0x80)
					cut = n;            /* a character starts here */
				out[n++] = *t;
			}
			if (*t) {                       /* shortened: drop the cut character */
				n = cut;
				memcpy(out + n, "\xe2\x80\xa6", 3);   /* U+2026 */
				n += 3;
			}
			if (n)
				return json_stringn(out, n);
		}
	}
	return NULL;
}

json_t *rt_row_info(struct runtime *rt)
{
	json_t *info = json_object();
	if (!info)
		return NULL;
	if (rt->agent->name)
		json_object_set_new(info, "agent", json_string(rt->agent->name));
	if (rt->agent->model)
		json_object_set_new(info, "model", json_string(rt->agent->model));
	json_t *title = session_title(rt);
	if (title)
		json_object_set_new(info, "title", title);
	/* A detached worker writes one row for every turn it ran. */
	const json_t *usage = rt->detached ? rt->usage : rt->turn_usage;
	if (json_object_size(usage))
		json_object_set_new(info, "usage", json_deep_copy(usage));
	return info;
}

/* Write the turn's row. */
static enum core_status write_snapshot(struct runtime *rt, const struct turn_result *r,
                                       struct core_err *e)
{
	char now[CORE_TIME_MAX];
	core_time_format(core_now_ns(), now);
	json_t *row = json_object();
	json_object_set_new(row, "createdAt", json_string(now));
	if (r->st)
		json_object_set_new(row, "error", error_new(r->st, r->msg));
	if (*r->reason)
		json_object_set_new(row, "finishReason", json_string(r->reason));
	if (rt->last_snapshot_id && *rt->last_snapshot_id)
		json_object_set_new(row, "parentId", json_string(rt->last_snapshot_id));
	json_object_set_new(row, "sessionId", json_string(rt->session_id));
	json_object_set_new(row, "snapshotId", json_string(rt->snapshot_id));
	json_object_set_new(row, "state", state_shaped(rt, rt->state));
	json_object_set_new(row, "status", json_string(terminal_status(r)));
	json_object_set_new(row, "updatedAt", json_string(now));
	json_object_set_new(row, STORE_INFO_KEY, rt_row_info(rt));
	struct save_ctx sc = { row };
	struct store_base base = { rt->last_snapshot_id, rt->base_kept };
	enum core_status st = store_save_on(rt->store, rt->snapshot_id, 0,
	                                    rt->last_snapshot_id ? &base : NULL, save_fn, &sc,
	                                    NULL, e);
	json_decref(row);
	if (st)
		core_err_prefix(e, "cannot commit the turn (snapshot '%s')", rt->snapshot_id);
	return st;
}

/*
 * The turn's end: its row, its turnEnd chunk, the resume point.  A row that
 * could not be written (a full disk) fails the turn: the turnEnd says
 * "failed" and names no snapshot, the resume point stays the last committed
 * row, and the caller ends the invocation with *e (DESIGN.md §8).
 */
static enum core_status end_turn(struct runtime *rt, const struct turn_result *r,
                                 struct core_err *e)
{
	const char *written = NULL;
	enum core_status st = CORE_OK;
	if (r->committed && rt->store && !rt->detached) {
		st = write_snapshot(rt, r, e);
		if (!st)
			written = rt->snapshot_id;
	}
	json_t *te = json_object();
	if (st)
		json_object_set_new(te, "finishReason", json_string("failed"));
	else if (*r->reason)
		json_object_set_new(te, "finishReason", json_string(r->reason));
	if (written)
		json_object_set_new(te, "snapshotId", json_string(written));
	emit(rt, "turnEnd", te);
	agent_trace_turn_end(written, st ? st : r->st, st ? e->msg : r->msg, rt->state);
	if (written) {
		free(rt->last_snapshot_id);
		rt->last_snapshot_id = strdup(written);
		rt->base_kept = json_array_size(messages_of(rt));
	}
	if (r->committed && (!rt->store || rt->detached)) {
		json_decref(rt->last_good);
		rt->last_good = json_deep_copy(rt->state);
	}
	snprintf(rt->last_reason, sizeof rt->last_reason, "%s", r->reason);
	rt->turn_index++;
	return st;
}

/* A custom agent's turn (agent_ext.h, custom_agent.h); returns whether a
 * failed turn lets the invocation go on (the handler's loop continues). */
static int custom_turn(struct runtime *rt, const json_t *input, struct turn_result *r)
{
	struct ca_outcome o;
	agent_ext_turn(rt->ext, rt, input, &o);
	r->committed = o.committed;
	r->st = o.st;
	snprintf(r->reason, sizeof r->reason, "%s", o.reason);
	snprintf(r->msg, sizeof r->msg, "%s", o.msg);
	return o.st && o.keep_going;
}

enum core_status rt_turn(struct runtime *rt, const json_t *input)
{
	struct turn_result r = { 0 };
	if (rt->ended)
		return CORE_FAILED;
	if (json_is_true(json_object_get(input, "detach")) && !rt->store) {
		char msg[300];
		snprintf(msg, sizeof msg, "agent \"%s\": detach requires a session store", rt->agent->name);
		rt_fail(rt, CORE_EPRECONDITION, msg);
		return CORE_FAILED;
	}
	if (is_cancelled(rt)) {
		/* §2.5: the caller stopped before this turn began. */
		rt_abort(rt);
		return CORE_ABORTED;
	}
	agent_trace_turn_begin();
	/* §3.1: arm the patcher, reserve the row, append the message. */
	json_object_clear(rt->turn_usage);
	rt->patch_first = 1;
	json_decref(rt->patch_baseline);
	rt->patch_baseline = NULL;
	free(rt->snapshot_id);
	rt->snapshot_id = NULL;
	if (rt->store) {
		char uuid[37];
		core_uuid(uuid);
		rt->snapshot_id = strdup(uuid);
	}
	const json_t *msg = json_object_get(input, "message");
	if (json_is_object(msg)) {
		/* A message without a role is the user's (validateUserMessage
		 * accepts "" as "user"); stored with the role spelled out. */
		json_t *copy = json_deep_copy(msg);
		const json_t *role = json_object_get(copy, "role");
		if (!role || (jv_is_string(role) && !json_string_length(role)))
			json_object_set_new(copy, "role", json_string("user"));
		json_array_append_new(messages_of(rt), message_ordered(copy));
		json_decref(copy);
	}

	int keep_going = 0;
	struct core_err fe = { 0 };
	if (agent_ext_is_custom(rt->ext))
		keep_going = custom_turn(rt, input, &r);
	else
		agent_turn(rt, input, &r);
	/* §7: a state or stream transform failed closed during the turn: a
	 * turn it failed carries its error; a turn that went through still
	 * ends as it did, and then the invocation fails. */
	int tf_failed = agent_ext_failed(rt->ext, &fe);
	if (tf_failed && r.st) {
		r.st = fe.st;
		snprintf(r.msg, sizeof r.msg, "%s", fe.msg);
		keep_going = 0;
	}

	if (r.st && is_cancelled(rt)) {
		/* §2.5: a turn the caller stopped ends with the context's error,
		 * whatever the model or a killed tool reported. */
		r.st = CORE_ECANCELLED;
		snprintf(r.msg, sizeof r.msg, "context canceled");
	}
	if (r.st) {
		/* §3.1 step 8: failed, or aborted when the caller's limit (or the
		 * caller) stopped it. */
		snprintf(r.reason, sizeof r.reason, "%s",
		         r.st == CORE_ABORTED || r.st == CORE_ECANCELLED ? "aborted" : "failed");
	}
	struct core_err ce = { 0 };
	if (end_turn(rt, &r, &ce)) {
		/* The commit failed: whatever the turn did is lost, and no later
		 * turn runs on a state the store does not have.  A turn that had
		 * failed by itself says so after the store's cause. */
		char why[sizeof ce.msg + sizeof r.msg + 40];
		snprintf(why, sizeof why, "%s%s%s%s", ce.msg, r.st ? " (the turn had failed: " : "",
		         r.st ? r.msg : "", r.st ? ")" : "");
		rt_fail(rt, ce.st == CORE_ENOMEM ? CORE_ENOMEM : CORE_ESYS, why);
		return CORE_FAILED;
	}
	if (rt->ended)
		return CORE_FAILED;     /* ended while it ran (rt_fail: a detach that failed) */
	if (r.st && !keep_going) {
		rt->ended = 1;
		snprintf(rt->end_reason, sizeof rt->end_reason, "%s", r.reason);
		rt->error = error_new(r.st, r.msg);
		rt->end_st = r.st;
		return !strcmp(r.reason, "aborted") ? CORE_ABORTED : CORE_FAILED;
	}
	if (tf_failed) {
		rt_fail(rt, fe.st, fe.msg);
		return CORE_FAILED;
	}
	return CORE_OK;
}

void rt_abort(struct runtime *rt)
{
	if (rt->ended)
		return;
	rt->ended = 1;
	snprintf(rt->end_reason, sizeof rt->end_reason, "aborted");
	rt->error = error_new(CORE_ECANCELLED, "context canceled");
}

void rt_detach(struct runtime *rt, struct store *store)
{
	rt->store = store;
	rt->detached = 1;
	rt->sink.chunk = NULL;
	/* Every turn so far committed (a failed one ends the invocation), so
	 * the live state is the last-good one. */
	json_decref(rt->last_good);
	rt->last_good = json_deep_copy(rt->state);
}

const char *rt_last_snapshot_id(const struct runtime *rt)
{
	return rt->last_snapshot_id && *rt->last_snapshot_id ? rt->last_snapshot_id : NULL;
}

void rt_detach_turn(struct runtime *rt)
{
	rt->detached = 1;
	rt->sink.chunk = NULL;
	/* The turn in flight has not committed: until it does, what is
	 * committed is the last row's state (rt_committed_state). */
	json_decref(rt->last_good);
	rt->last_good = NULL;
}

json_t *rt_committed_state(const struct runtime *rt)
{
	if (rt->last_good || !rt->detached)
		return state_shaped((struct runtime *)rt, rt->last_good ? rt->last_good : rt->state);
	/* Detached in the middle of a turn that has not committed (§2.3): the
	 * state of the last committed row, else the invocation's initial
	 * (empty) state. */
	json_t *row = NULL, *o;
	struct core_err e = { 0 };
	const json_t *s = NULL;
	if (rt->last_snapshot_id && *rt->last_snapshot_id) {
		if (!rt->store || store_get(rt->store, rt->last_snapshot_id, 0, &row, &e))
			return NULL;    /* never an empty state in place of the row's */
		s = json_object_get(row, "state");
	}
	if (s) {
		o = state_shaped((struct runtime *)rt, s);
	} else if ((o = json_pack("{s:[]}", "messages"))) {
		json_t *shaped = state_shaped((struct runtime *)rt, o);
		json_decref(o);
		o = shaped;
	}
	json_decref(row);
	return o;
}

void rt_fail(struct runtime *rt, enum core_status st, const char *msg)
{
	if (rt->ended)
		return;
	rt->ended = 1;
	snprintf(rt->end_reason, sizeof rt->end_reason, "failed");
	rt->error = error_new(st, msg);
	rt->end_st = st;
	if (st == CORE_ESYS || st == CORE_ENOMEM)
		rt->sys_st = st;
}

/* The last message of the history and every artifact (sess.Result()). */
json_t *rt_output(const struct runtime *rt)
{
	json_t *o = json_object();
	const json_t *state = rt->ended && !rt->store ? rt->last_good : rt->state;
	if (!o)
		return NULL;
	if (!rt->ended) {
		const json_t *arts = json_object_get(rt->state, "artifacts");
		if (json_array_size(arts))
			json_object_set_new(o, "artifacts", json_deep_copy(arts));
	} else {
		json_object_set(o, "error", rt->error);
	}
	const char *reason = rt->ended ? rt->end_reason : rt->last_reason;
	if (*reason)
		json_object_set_new(o, "finishReason", json_string(reason));
	if (!rt->ended) {
		const json_t *msgs = json_object_get(rt->state, "messages");
		size_t n = json_array_size(msgs);
		if (n)
			json_object_set_new(o, "message", json_deep_copy(json_array_get(msgs, n - 1)));
		/* Structured output: the parsed value of the final message
		 * (what Genkit's response Output() returns). */
		json_t *m = json_object_get(o, "message"), *value = NULL;
		struct core_err e = { 0 };
		if (rt->agent->output && m && !strcmp(json_string_value(json_object_get(m, "role")) ?: "", "model")
		    && !structured_check(rt->agent->output, m, &value, &e))
			json_object_set_new(o, "output", value);
	}
	json_object_set_new(o, "sessionId", json_string(rt->session_id));
	if (rt->store && rt->last_snapshot_id && *rt->last_snapshot_id)
		json_object_set_new(o, "snapshotId", json_string(rt->last_snapshot_id));
	if (!rt->store && state)
		json_object_set_new(o, "state", state_shaped((struct runtime *)rt, state));
	return o;
}

enum core_status rt_output_status(const json_t *output)
{
	const char *reason = json_string_value(json_object_get(output, "finishReason"));
	const json_t *err = json_object_get(output, "error");
	if (err) {
		if (reason && !strcmp(reason, "aborted"))
			return CORE_ABORTED;
		enum core_status st = core_status_from_name(json_string_value(json_object_get(err, "status")));
		if (st == CORE_EINVAL || st == CORE_ENOTFOUND || st == CORE_EPRECONDITION)
			return st;
		return CORE_FAILED;
	}
	return core_finish_status(reason);
}

enum core_status rt_exit_status(const struct runtime *rt, const json_t *output)
{
	if (rt->sys_st)
		return rt->sys_st;
	/* The output says INVALID_ARGUMENT, as Genkit does, but a request the
	 * provider refused was agentkit's, not the caller's input. */
	if (rt->end_st == CORE_EREJECTED || rt->end_st == CORE_EUNMET)
		return CORE_FAILED;
	return rt_output_status(output);
}

/* ---- the turn in flight, for agent extensions (runtime.h) ---- */

const struct agent *rt_agent(const struct runtime *rt)
{
	return rt->agent;
}

const json_t *rt_state(const struct runtime *rt)
{
	return rt->state;
}

json_t *rt_context(const struct runtime *rt)
{
	return json_pack("{s:s, s:s, s:s, s:I}", "sessionId", rt->session_id,
	                 "snapshotId", rt->snapshot_id ? rt->snapshot_id : "",
	                 "parentSnapshotId", rt->last_snapshot_id ? rt->last_snapshot_id : "",
	                 "turnIndex", (json_int_t)rt->turn_index);
}

enum core_status rt_update_custom(struct runtime *rt, const json_t *value, int is_patch,
                                  struct core_err *e)
{
	if (is_patch) {
		json_t *doc = json_deep_copy(json_object_get(rt->state, "custom"));
		enum core_status st;
		if (!doc)
			doc = json_null();
		if ((st = jpatch_apply(&doc, value, JPATCH_INPLACE, e))) {
			json_decref(doc);
			return st == CORE_ENOMEM ? st : CORE_EINVAL;
		}
		json_object_set_new(rt->state, "custom", doc);
	} else {
		json_object_set_new(rt->state, "custom", json_deep_copy(value));
	}
	return custom_changed(rt, e);
}

void rt_send_artifact(struct runtime *rt, const json_t *artifact)
{
	artifact_add(rt, artifact);
}

void rt_add_message(struct runtime *rt, const json_t *message)
{
	json_array_append_new(messages_of(rt), message_ordered(message));
}

void rt_set_messages(struct runtime *rt, const json_t *messages)
{
	json_t *m = json_array();
	size_t i;
	json_t *v;
	json_array_foreach(messages, i, v)
		json_array_append_new(m, message_ordered(v));
	rt->base_kept = kept_prefix(messages_of(rt), m, rt->base_kept);
	json_object_set_new(rt->state, "messages", m);
}

void rt_send_chunk(struct runtime *rt, const char *key, json_t *value)
{
	emit(rt, key, value);
}

int rt_cancelled(void *rt)
{
	return is_cancelled(rt);
}
