/*
 * runtime.c - the session runner and the prompt-backed turn (Genkit's
 * agentLoop and generate tool loop), runtime-semantics §1-4.  The live
 * session is a struct session (session.h).
 */
#include "runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../store/store.h"
#include "agent_ext.h"
#include "json.h"
#include "model.h"
#include "prompt.h"
#include "schema.h"
#include "structured.h"
#include "tools.h"
#include "util.h"
#include "session.h"

struct tool;
struct tool_call;

struct runtime {
	const struct agent *agent;
	struct store *store;
	int64_t hb_timeout_ms;
	int detached;           /* rt_detach(): no rows, no chunks, last_good kept */
	struct agent_ext *ext;  /* custom agent, transforms, grounding, or NULL */
	struct session *s;      /* the live session */
	json_t *last_good;      /* client-managed: state at the last commit (or the initial one) */
	char last_reason[32];

	struct tool **tools;    /* the agent's tools */
	size_t ntools;
	json_t *tool_defs;      /* their definitions, for the model */

	/* The generate call in flight. */
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

/* How a turn ended: err.st is CORE_OK or the failure's status, err.msg
 * its message. */
struct turn_result {
	int committed;
	char reason[32];
	struct core_err err;
};

/* End the invocation with reason (failed, aborted) and this error. */
void rt_end(struct runtime *rt, const char *reason, enum core_status st, const char *msg);

/* ---- runtime_init.c ---- */

/* Check the AgentInit's shape (§4.1): CORE_EINVAL with Genkit's message. */
enum core_status rt_init_check(const json_t *init, struct core_err *e);
/* Load the session a checked AgentInit names (§4.2). */
enum core_status rt_load(struct runtime *rt, const json_t *init, struct core_err *e);

/* ---- runtime_loop.c ---- */

/* A prompt-backed turn (the input's message already in the history). */
void rt_agent_turn(struct runtime *rt, const json_t *input, struct turn_result *r);

/* The role of a message ("" when it has none). */
const char *rt_role_of(const json_t *m);
/* Set or remove a member of a part's metadata (an emptied one goes). */
void rt_set_meta(json_t *part, const char *key, json_t *value /* consumed */);
void rt_del_meta(json_t *part, const char *key);
/* The toolResponse part answering request req with call c's result. */
json_t *rt_tool_response_part(const json_t *req, const struct tool_call *c);
/* Fail r with call c's failure of tool name (INTERNAL). */
void rt_tool_failed(struct turn_result *r, const char *name, const struct tool_call *c);
/*
 * Run the tool requests (parts idx[0..n) of model message m) in parallel;
 * resumed[i] (may be NULL) is the restart metadata of a resumed call.
 * Results land in calls[].  Non-zero with r filled when a tool is missing,
 * its input is not what it declares, or the calls could not be run.
 */
int rt_run_calls(struct runtime *rt, json_t *m, const size_t *idx,
                 const json_t *const *resumed, struct tool_call *calls, size_t n,
                 struct turn_result *r);
/* Emit the tool message's content as a modelChunk (the next index). */
void rt_emit_tool_message(struct runtime *rt, const json_t *content);
/* Emit the interrupted requests ints as the tool-role chunk (index 0). */
void rt_emit_interrupts(struct runtime *rt, const json_t *ints);

/* ---- runtime_resume.c ---- */

/* The generate call of one prompt-backed turn. */
struct gen {
	struct runtime *rt;
	json_t *msgs;           /* rendered messages + generated ones, tagged */
	size_t rounds;          /* completed tool rounds */
	int committable;        /* a partial response exists (a round or a resume ran) */
};

/* ValidateResumeAgainstHistory (§3.7): every respond/restart entry names a
 * tool request of the last model message.  CORE_EINVAL with Genkit's
 * message. */
enum core_status rt_validate_resume(const json_t *resume, const json_t *history,
                                    struct core_err *e);

/*
 * Resume the pending model message (the last of g->msgs) with the input's
 * respond/restart parts (validated).  0: go on to the model; 1: the turn
 * is over (r filled: interrupted again, or a failure).
 */
int rt_apply_resume(struct gen *g, const json_t *resume, struct turn_result *r);





#define DEFAULT_HEARTBEAT_TIMEOUT_MS 60000

static json_t *error_new(enum core_status st, const char *msg)
{
	return json_pack("{s:s, s:s}", "status", core_status_name(st), "message", msg);
}

/* ---- open ---- */

static enum core_status load_tools(struct runtime *rt, struct core_err *e)
{
	size_t n = json_array_size(rt->agent->tools), i;
	json_t *name;
	enum core_status st;
	if (n && !(rt->tools = calloc(n, sizeof *rt->tools)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	json_array_foreach(rt->agent->tools, i, name) {
		struct tool *t;
		if ((st = tool_load(json_string_value(name), rt->agent->tool_dirs, &t, e)))
			return st;
		rt->tools[rt->ntools++] = t;
		json_array_append(rt->tool_defs, t->definition);
	}
	return CORE_OK;
}

static enum core_status open_session(struct runtime *rt, const struct rt_config *cfg,
                                     struct core_err *e)
{
	struct session_config sc = { cfg->agent, NULL, NULL, cfg->cancelled, cfg->cancel_ctx,
	                             agent_ext_state_transform(cfg->ext) };
	if (cfg->sink) {
		sc.chunk = cfg->sink->chunk;
		sc.chunk_ctx = cfg->sink->ctx;
	}
	return session_new(&sc, &rt->s, e);
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
	rt->hb_timeout_ms = cfg->heartbeat_timeout_ms > 0 ? cfg->heartbeat_timeout_ms
	                                                  : DEFAULT_HEARTBEAT_TIMEOUT_MS;
	rt->ext = cfg->ext;
	if (!(rt->usage = json_object()) || !(rt->turn_usage = json_object()) ||
	    !(rt->tool_defs = json_array()))
		st = core_fail(e, CORE_ENOMEM, "out of memory");
	else if (!(st = open_session(rt, cfg, e)) && !(st = rt_init_check(cfg->init, e)) &&
	         !(st = load_tools(rt, e)))
		st = rt_load(rt, cfg->init, e);
	if (st) {
		rt_free(rt);
		return st;
	}
	*out = rt;
	return CORE_OK;
}

void rt_free(struct runtime *rt)
{
	if (!rt)
		return;
	session_free(rt->s);
	json_decref(rt->last_good);
	for (size_t i = 0; i < rt->ntools; i++)
		tool_free(rt->tools[i]);
	free(rt->tools);
	json_decref(rt->tool_defs);
	json_decref(rt->minted_refs);
	json_decref(rt->error);
	json_decref(rt->usage);
	json_decref(rt->turn_usage);
	free(rt);
}

const char *rt_session_id(const struct runtime *rt)
{
	return session_id(rt->s);
}

const json_t *rt_usage(const struct runtime *rt)
{
	return rt->usage;
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
	if (r->err.st == CORE_OK)
		return "completed";
	return !strcmp(r->reason, "aborted") ? "aborted" : "failed";
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
	json_t *title = session_title(rt->s);
	if (title)
		json_object_set_new(info, "title", title);
	/* A detached worker writes one row for every turn it ran. */
	const json_t *usage = rt->detached ? rt->usage : rt->turn_usage;
	if (json_object_size(usage))
		json_object_set_new(info, "usage", json_deep_copy(usage));
	return info;
}

/* The turn's row, as the store keeps it. */
static json_t *turn_row(struct runtime *rt, const struct turn_result *r)
{
	char now[CORE_TIME_MAX];
	core_time_format(core_now_ns(), now);
	json_t *err = r->err.st ? error_new(r->err.st, r->err.msg) : NULL;
	json_t *state = session_shaped(rt->s, session_state(rt->s));
	json_t *info = rt_row_info(rt);
	struct session_row sr = {
		.created_at = now, .updated_at = now, .error = err, .finish_reason = r->reason,
		.parent_id = session_parent_id(rt->s), .session_id = session_id(rt->s),
		.snapshot_id = session_snapshot_id(rt->s), .state = state,
		.status = terminal_status(r), .info = info,
	};
	json_t *row = session_row(&sr);
	json_decref(err);
	json_decref(state);
	json_decref(info);
	return row;
}

/* Write the turn's row. */
static enum core_status write_snapshot(struct runtime *rt, const struct turn_result *r,
                                       struct core_err *e)
{
	const char *parent = session_parent_id(rt->s), *id = session_snapshot_id(rt->s);
	json_t *row = turn_row(rt, r);
	if (!row)
		return core_fail(e, CORE_ENOMEM, "cannot commit the turn (snapshot '%s'): out of memory", id);
	struct save_ctx sc = { row };
	struct store_base base = { parent, session_base_kept(rt->s) };
	enum core_status st = store_save_on(rt->store, id, 0, parent ? &base : NULL, save_fn, &sc,
	                                    NULL, e);
	json_decref(row);
	if (st)
		core_err_prefix(e, "cannot commit the turn (snapshot '%s')", id);
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
			written = session_snapshot_id(rt->s);
	}
	json_t *te = json_object();
	if (st)
		json_object_set_new(te, "finishReason", json_string("failed"));
	else if (*r->reason)
		json_object_set_new(te, "finishReason", json_string(r->reason));
	if (written)
		json_object_set_new(te, "snapshotId", json_string(written));
	session_emit(rt->s, "turnEnd", te);
	if (r->committed && (!rt->store || rt->detached)) {
		json_decref(rt->last_good);
		rt->last_good = json_deep_copy(session_state(rt->s));
	}
	snprintf(rt->last_reason, sizeof rt->last_reason, "%s", r->reason);
	enum core_status est = session_turn_end(rt->s, written, e);
	return st ? st : est;
}

/* ---- one turn ---- */

/* A custom agent's turn (agent_ext.h, custom_agent.h); returns whether a
 * failed turn lets the invocation go on (the handler's loop continues). */
static int custom_turn(struct runtime *rt, const json_t *input, struct turn_result *r)
{
	struct ca_outcome o;
	agent_ext_turn(rt->ext, rt->s, input, &o);
	r->committed = o.committed;
	r->err = o.err;
	snprintf(r->reason, sizeof r->reason, "%s", o.reason);
	return o.err.st && o.keep_going;
}

/*
 * Whether the turn may begin (§2.5, §3.1): CORE_OK, or the status rt_turn()
 * returns when it ended the invocation instead (no store for a detach, the
 * caller's stop).  Then the patcher is armed, the row reserved and the
 * input's message appended.
 */
static enum core_status turn_begin(struct runtime *rt, const json_t *input)
{
	struct core_err e = { 0 };
	if (json_is_true(json_object_get(input, "detach")) && !rt->store) {
		char msg[300];
		snprintf(msg, sizeof msg, "agent \"%s\": detach requires a session store", rt->agent->name);
		rt_fail(rt, CORE_EPRECONDITION, msg);
		return CORE_FAILED;
	}
	if (session_cancelled(rt->s)) {
		/* §2.5: the caller stopped before this turn began. */
		rt_abort(rt);
		return CORE_ABORTED;
	}
	json_object_clear(rt->turn_usage);
	if (session_turn_begin(rt->s, rt->store != NULL, &e)) {
		rt_fail(rt, e.st, e.msg);
		return CORE_FAILED;
	}
	const json_t *msg = json_object_get(input, "message");
	if (json_is_object(msg)) {
		/* A message without a role is the user's (validateUserMessage
		 * accepts "" as "user"); stored with the role spelled out. */
		json_t *copy = json_deep_copy(msg);
		const json_t *role = json_object_get(copy, "role");
		if (!role || (jv_is_string(role) && !json_string_length(role)))
			json_object_set_new(copy, "role", json_string("user"));
		session_add_message(rt->s, copy);
		json_decref(copy);
	}
	return CORE_OK;
}

/*
 * How the turn that ran ended, settled: a transform that failed closed
 * (tf, §7) gives a failed turn its error; a turn the caller stopped ends
 * with the context's error, whatever the model or a killed tool reported
 * (§2.5); a failed turn's reason is failed, or aborted when the caller's
 * limit (or the caller) stopped it (§3.1 step 8).
 */
static void turn_settle(struct runtime *rt, struct turn_result *r, const struct core_err *tf,
                        int *keep_going)
{
	if (tf && r->err.st) {
		r->err = *tf;
		*keep_going = 0;
	}
	if (r->err.st && session_cancelled(rt->s))
		core_fail(&r->err, CORE_ECANCELLED, "context canceled");
	if (r->err.st)
		snprintf(r->reason, sizeof r->reason, "%s",
		         r->err.st == CORE_ABORTED || r->err.st == CORE_ECANCELLED ? "aborted" : "failed");
}

/* The commit failed: whatever the turn did is lost, and no later turn runs
 * on a state the store does not have.  A turn that had failed by itself
 * says so after the store's cause. */
static void commit_failed(struct runtime *rt, const struct turn_result *r,
                          const struct core_err *ce)
{
	char why[2 * sizeof ce->msg + 40];
	int failed = r->err.st != CORE_OK;
	snprintf(why, sizeof why, "%s%s%s%s", ce->msg, failed ? " (the turn had failed: " : "",
	         failed ? r->err.msg : "", failed ? ")" : "");
	rt_fail(rt, ce->st == CORE_ENOMEM ? CORE_ENOMEM : CORE_ESYS, why);
}

enum core_status rt_turn(struct runtime *rt, const json_t *input)
{
	struct turn_result r = { 0 };
	struct core_err fe = { 0 }, ce = { 0 };
	enum core_status st;
	if (rt->ended)
		return CORE_FAILED;
	if ((st = turn_begin(rt, input)))
		return st;
	int keep_going = 0;
	if (agent_ext_is_custom(rt->ext))
		keep_going = custom_turn(rt, input, &r);
	else
		rt_agent_turn(rt, input, &r);
	/* §7: a state or stream transform failed closed during the turn: a
	 * turn it failed carries its error; a turn that went through still
	 * ends as it did, and then the invocation fails. */
	int tf_failed = agent_ext_failed(rt->ext, &fe);
	turn_settle(rt, &r, tf_failed ? &fe : NULL, &keep_going);
	if (end_turn(rt, &r, &ce)) {
		commit_failed(rt, &r, &ce);
		return CORE_FAILED;
	}
	if (rt->ended)
		return CORE_FAILED;     /* ended while it ran (rt_fail: a detach that failed) */
	if (r.err.st && !keep_going) {
		rt_end(rt, r.reason, r.err.st, r.err.msg);
		return !strcmp(r.reason, "aborted") ? CORE_ABORTED : CORE_FAILED;
	}
	if (tf_failed) {
		rt_fail(rt, fe.st, fe.msg);
		return CORE_FAILED;
	}
	return CORE_OK;
}

/* ---- the invocation's end ---- */

void rt_end(struct runtime *rt, const char *reason, enum core_status st, const char *msg)
{
	rt->ended = 1;
	snprintf(rt->end_reason, sizeof rt->end_reason, "%s", reason);
	json_decref(rt->error);
	rt->error = error_new(st, msg);
	rt->end_st = st;
}

void rt_abort(struct runtime *rt)
{
	if (!rt->ended)
		rt_end(rt, "aborted", CORE_ECANCELLED, "context canceled");
}

void rt_fail(struct runtime *rt, enum core_status st, const char *msg)
{
	if (rt->ended)
		return;
	rt_end(rt, "failed", st, msg);
	if (st == CORE_ESYS || st == CORE_ENOMEM)
		rt->sys_st = st;
}

void rt_finish(struct runtime *rt)
{
	struct core_err e = { 0 };
	if (agent_ext_finish(rt->ext, !rt->ended, &e))
		rt_fail(rt, e.st, e.msg);
}

/* ---- detach (runtime-semantics §2) ---- */

void rt_detach(struct runtime *rt, struct store *store)
{
	rt->store = store;
	rt->detached = 1;
	session_mute(rt->s);
	/* Every turn so far committed (a failed one ends the invocation), so
	 * the live state is the last-good one. */
	json_decref(rt->last_good);
	rt->last_good = json_deep_copy(session_state(rt->s));
}

const char *rt_last_snapshot_id(const struct runtime *rt)
{
	const char *id = session_parent_id(rt->s);
	return id && *id ? id : NULL;
}

void rt_detach_turn(struct runtime *rt)
{
	rt->detached = 1;
	session_mute(rt->s);
	/* The turn in flight has not committed: until it does, what is
	 * committed is the last row's state (rt_committed_state). */
	json_decref(rt->last_good);
	rt->last_good = NULL;
}

json_t *rt_committed_state(const struct runtime *rt)
{
	if (rt->last_good || !rt->detached)
		return session_shaped(rt->s, rt->last_good ? rt->last_good : session_state(rt->s));
	/* Detached in the middle of a turn that has not committed (§2.3): the
	 * state of the last committed row, else the invocation's initial
	 * (empty) state. */
	json_t *row = NULL, *o;
	struct core_err e = { 0 };
	const json_t *s = NULL;
	const char *last = rt_last_snapshot_id(rt);
	if (last) {
		if (!rt->store || store_get(rt->store, last, 0, &row, &e))
			return NULL;    /* never an empty state in place of the row's */
		s = json_object_get(row, "state");
	}
	if (s) {
		o = session_shaped(rt->s, s);
	} else if ((o = json_pack("{s:[]}", "messages"))) {
		json_t *shaped = session_shaped(rt->s, o);
		json_decref(o);
		o = shaped;
	}
	json_decref(row);
	return o;
}

/* ---- the output ---- */

/* The last message of the history and its parsed structured output. */
static void output_message(const struct runtime *rt, json_t *o)
{
	const json_t *msgs = json_object_get(session_state(rt->s), "messages");
	size_t n = json_array_size(msgs);
	if (n)
		json_object_set_new(o, "message", json_deep_copy(json_array_get(msgs, n - 1)));
	/* Structured output: the parsed value of the final message (what
	 * Genkit's response Output() returns). */
	json_t *m = json_object_get(o, "message"), *value = NULL;
	struct core_err e = { 0 };
	const char *role = json_string_value(json_object_get(m, "role"));
	if (rt->agent->output && m && role && !strcmp(role, "model")
	    && !structured_check(rt->agent->output, m, &value, &e))
		json_object_set_new(o, "output", value);
}

/* The last message of the history and every artifact (sess.Result()). */
json_t *rt_output(const struct runtime *rt)
{
	json_t *o = json_object();
	const json_t *live = session_state(rt->s);
	const json_t *state = rt->ended && !rt->store ? rt->last_good : live;
	if (!o)
		return NULL;
	if (!rt->ended) {
		const json_t *arts = json_object_get(live, "artifacts");
		if (json_array_size(arts))
			json_object_set_new(o, "artifacts", json_deep_copy(arts));
	} else {
		json_object_set(o, "error", rt->error);
	}
	const char *reason = rt->ended ? rt->end_reason : rt->last_reason;
	if (*reason)
		json_object_set_new(o, "finishReason", json_string(reason));
	if (!rt->ended)
		output_message(rt, o);
	json_object_set_new(o, "sessionId", json_string(session_id(rt->s)));
	if (rt->store && rt_last_snapshot_id(rt))
		json_object_set_new(o, "snapshotId", json_string(rt_last_snapshot_id(rt)));
	if (!rt->store && state)
		json_object_set_new(o, "state", session_shaped(rt->s, state));
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
		st = store_get(rt->store, snap, 0, row, &se);
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
		st = store_latest(rt->store, sid, 0, row, &se);
		if (st && st != CORE_ENOTFOUND)
			return core_fail(e, st, "failed to resolve latest snapshot for session \"%s\": %s", sid, se.msg);
		const char *owner = json_string_value(json_object_get(*row, "sessionId"));
		if (*row && strcmp(owner ? owner : "", sid))
			return core_fail(e, CORE_EINTERNAL,
			                 "store resolved session \"%s\" to snapshot \"%s\", which belongs to session \"%s\"; the store violates the GetLatestSnapshot contract",
			                 sid, json_string_value(json_object_get(*row, "snapshotId")), owner ? owner : "");
	}
	return CORE_OK;
}

/* The session from a resumable row. */
static enum core_status load_row(struct runtime *rt, const json_t *row, struct core_err *e)
{
	enum core_status st = resumable(rt, row, e);
	if (st)
		return st;
	const json_t *s = json_object_get(row, "state");
	json_t *state = json_is_object(s) ? json_deep_copy(s) : json_object();
	if (!state)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	return session_load(rt->s, state, json_string_value(json_object_get(row, "sessionId")),
	                    json_string_value(json_object_get(row, "snapshotId")),
	                    json_array_size(json_object_get(s, "messages")), e);
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
	if (strcmp(rt_role_of(m), "model"))
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

enum core_status rt_validate_resume(const json_t *resume, const json_t *history,
                                    struct core_err *e)
{
	long pending = -1;
	for (size_t i = json_array_size(history); i-- > 0;)
		if (!strcmp(rt_role_of(json_array_get(history, i)), "model")) {
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


/* ---- applying a resume ---- */

/* What a resume does to the parts of the pending model message. */
struct resume_work {
	json_t *content;        /* the parts (of the history message's copy) */
	size_t np;
	json_t **resp;          /* [np]: the toolResponse part answering part i, or NULL */
	size_t *ridx;           /* the parts whose request is restarted, in order */
	const json_t **rmeta;   /* their "resumed" metadata */
	struct tool_call *calls; /* their calls */
	size_t nreq, nrestart;
};

static int work_init(struct resume_work *w, json_t *content, struct turn_result *r)
{
	w->content = content;
	w->np = json_array_size(content);
	w->resp = calloc(w->np + 1, sizeof *w->resp);
	w->ridx = calloc(w->np + 1, sizeof *w->ridx);
	w->rmeta = calloc(w->np + 1, sizeof *w->rmeta);
	w->calls = calloc(w->np + 1, sizeof *w->calls);
	if (w->resp && w->ridx && w->rmeta && w->calls)
		return 0;
	core_fail(&r->err, CORE_ENOMEM, "out of memory");
	return 1;
}

static void work_release(struct resume_work *w)
{
	for (size_t k = 0; w->calls && k < w->nrestart; k++)
		tool_call_release(&w->calls[k]);
	for (size_t i = 0; w->resp && i < w->np; i++)
		json_decref(w->resp[i]);
	free(w->resp);
	free(w->ridx);
	free(w->rmeta);
	free(w->calls);
}

/* The request's interrupt is resolved: remembered as resolvedInterrupt. */
static void resolve_interrupt(json_t *part, json_t *intr)
{
	if (intr)
		rt_set_meta(part, "resolvedInterrupt", json_incref(intr));
	rt_del_meta(part, "interrupt");
}

/*
 * Tool request part i: answered by a respond entry, restarted by a restart
 * entry, or answered by the output it had when the round was interrupted.
 * Non-zero with r filled when none of these handles it.
 */
static int resolve_part(struct resume_work *w, const json_t *resume, size_t i,
                        struct turn_result *r)
{
	json_t *part = json_array_get(w->content, i);
	json_t *tr = json_object_get(part, "toolRequest");
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
			rt_set_meta(rp, "interruptResponse", json_true());
		w->resp[i] = rp;
		resolve_interrupt(part, intr);
		rt_del_meta(part, "pendingOutput");
		return 0;
	}
	if ((hit = resume_entry(resume, "restart", "toolRequest", name, ref))) {
		const json_t *res = json_object_get(json_object_get(hit, "metadata"), "resumed");
		w->rmeta[w->nrestart] = res ? res : json_true();
		w->ridx[w->nrestart++] = i;
		resolve_interrupt(part, intr);
		return 0;
	}
	json_t *pend = json_object_get(md, "pendingOutput");
	if (pend) {
		json_t *trp = json_pack("{s:O}", "name", json_object_get(tr, "name"));
		if (json_object_get(tr, "ref"))
			json_object_set(trp, "ref", json_object_get(tr, "ref"));
		json_object_set(trp, "output", pend);
		w->resp[i] = json_pack("{s:o, s:{s:s}}", "toolResponse", trp, "metadata", "source", "pending");
		rt_del_meta(part, "pendingOutput");
		return 0;
	}
	core_fail(&r->err, CORE_EINVAL,
	          "generate: unresolved tool request \"%s\" was not handled by the resume argument; supply a respond or restart entry for every interrupted tool request",
	          name);
	return 1;
}

/* A restarted call interrupted again: what is resolved is kept as pending
 * output for the next resume, the new interrupts are marked and streamed,
 * and the turn ends interrupted. */
static void interrupted_again(struct runtime *rt, struct resume_work *w, struct turn_result *r)
{
	json_t *ints = json_array();
	for (size_t i = 0; i < w->np; i++)
		if (w->resp[i])
			rt_set_meta(json_array_get(w->content, i), "pendingOutput",
			            json_incref(json_object_get(json_object_get(w->resp[i], "toolResponse"),
			                                        "output")));
	for (size_t k = 0; k < w->nrestart; k++)
		if (w->calls[k].interrupt) {
			json_t *part = json_array_get(w->content, w->ridx[k]);
			rt_del_meta(part, "resolvedInterrupt");
			rt_set_meta(part, "interrupt", json_incref(w->calls[k].interrupt));
			json_array_append(ints, part);
		}
	rt_emit_interrupts(rt, ints);
	json_decref(ints);
	r->err.st = CORE_OK;
	snprintf(r->reason, sizeof r->reason, "interrupted");
	r->committed = 1;
}

/*
 * Run the restarted requests again (a restart must match the original
 * input exactly, so the original request runs), the tools seeing their
 * resume data.  0 when every one answered; 1 when the turn is over (a
 * failure, or interrupted again).
 */
static int run_restarts(struct gen *g, json_t *m, struct resume_work *w, struct turn_result *r)
{
	int interrupted = 0;
	for (size_t k = 0; k < w->nrestart; k++)
		rt_set_meta(json_array_get(w->content, w->ridx[k]), "resumed",
		            json_incref((json_t *)w->rmeta[k]));
	if (rt_run_calls(g->rt, m, w->ridx, w->rmeta, w->calls, w->nrestart, r))
		return 1;
	for (size_t k = 0; k < w->nrestart; k++) {
		json_t *part = json_array_get(w->content, w->ridx[k]);
		const json_t *tr = json_object_get(part, "toolRequest");
		rt_del_meta(part, "resumed");
		if (w->calls[k].st) {
			rt_tool_failed(r, json_string_value(json_object_get(tr, "name")), &w->calls[k]);
			g->committable = 1;
			return 1;
		}
		if (w->calls[k].interrupt)
			interrupted = 1;
		else
			w->resp[w->ridx[k]] = rt_tool_response_part(tr, &w->calls[k]);
	}
	if (interrupted)
		interrupted_again(g->rt, w, r);
	return interrupted;
}

/* The answers, in the order of their requests, as the resumed tool
 * message (streamed, then appended to the conversation). */
static void append_answers(struct gen *g, struct resume_work *w)
{
	json_t *tcontent = json_array();
	for (size_t i = 0; i < w->np; i++)
		if (w->resp[i]) {
			json_array_append_new(tcontent, w->resp[i]);
			w->resp[i] = NULL;
		}
	json_t *tmsg = json_pack("{s:O, s:{s:b}, s:s}", "content", tcontent, "metadata", "resumed", 1,
	                         "role", "tool");
	rt_emit_tool_message(g->rt, tcontent);
	json_decref(tcontent);
	json_array_append_new(g->msgs, tmsg);
	g->committable = 1;
}

int rt_apply_resume(struct gen *g, const json_t *resume, struct turn_result *r)
{
	size_t n = json_array_size(g->msgs);
	json_t *m = n ? json_array_get(g->msgs, n - 1) : NULL;
	struct resume_work w = { 0 };
	int over = 1;
	if (!m || strcmp(rt_role_of(m), "model")) {
		core_fail(&r->err, CORE_EINVAL,
		          "generate: cannot resume: the conversation does not end with a model message requesting tools");
		return 1;
	}
	/* Work on a copy: the history message changes (resolved interrupts). */
	m = json_deep_copy(m);
	json_array_set_new(g->msgs, n - 1, m);
	if (work_init(&w, json_object_get(m, "content"), r))
		goto out;
	for (size_t i = 0; i < w.np; i++) {
		if (!json_object_get(json_array_get(w.content, i), "toolRequest"))
			continue;
		w.nreq++;
		if (resolve_part(&w, resume, i, r))
			goto out;
	}
	if (!w.nreq) {
		core_fail(&r->err, CORE_EINVAL,
		          "generate: cannot resume: the last model message has no tool requests");
		goto out;
	}
	if (w.nrestart && run_restarts(g, m, &w, r))
		goto out;
	append_answers(g, &w);
	over = 0;
out:
	work_release(&w);
	return over;
}




#define TAG_HISTORY "_genkit_history"
#define TAG_PROMPT "_genkit_prompt"

const char *rt_role_of(const json_t *m)
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

/* The caller's stop, for the model stream and the tools; ctx is the
 * runtime. */
static int stopped(void *ctx)
{
	struct runtime *rt = ctx;
	return session_cancelled(rt->s);
}

/* ---- a tool's session edits (Session.UpdateCustom, SendArtifact) ---- */

static enum core_status on_custom(void *ctx, const struct tool *t, const json_t *value,
                                  int is_patch, struct core_err *e)
{
	struct runtime *rt = ctx;
	enum core_status st = session_apply_custom(rt->s, value, is_patch, e);
	if (st) {
		/* Prefixed in place: e->msg cannot be an argument of
		 * core_fail() into e, which would print it twice. */
		core_err_prefix(e, "bad customPatch");
		e->st = st == CORE_ENOMEM ? st : CORE_EINTERNAL;
		return e->st;
	}
	return session_custom_changed(rt->s, e);
}

static enum core_status on_artifact(void *ctx, const struct tool *t, const json_t *a,
                                    struct core_err *e)
{
	struct runtime *rt = ctx;
	session_add_artifact(rt->s, a);
	return CORE_OK;
}

/* ---- the generate loop ---- */


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
	session_emit(rt->s, "modelChunk", c);
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
static json_t *turn_messages(const json_t *msgs)
{
	json_t *out = json_array();
	size_t i;
	json_t *m;
	json_array_foreach(msgs, i, m)
		if (!has_tag(m, TAG_PROMPT))
			json_array_append_new(out, untagged(m, TAG_PROMPT, TAG_HISTORY));
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
	const char *snap = session_snapshot_id(rt->s), *parent = session_parent_id(rt->s);
	tc->session_id = session_id(rt->s);
	tc->snapshot_id = snap ? snap : "";
	tc->parent_snapshot_id = parent ? parent : "";
	tc->turn_index = session_turn_index(rt->s);
}

void rt_set_meta(json_t *part, const char *key, json_t *value /* consumed */)
{
	json_t *md = json_object_get(part, "metadata");
	if (!json_is_object(md)) {
		md = json_object();
		json_object_set_new(part, "metadata", md);
	}
	json_object_set_new(md, key, value);
}

void rt_del_meta(json_t *part, const char *key)
{
	json_t *md = json_object_get(part, "metadata");
	if (json_is_object(md)) {
		json_object_del(md, key);
		if (!json_object_size(md))
			json_object_del(part, "metadata");
	}
}

json_t *rt_tool_response_part(const json_t *req, const struct tool_call *c)
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
void rt_tool_failed(struct turn_result *r, const char *name, const struct tool_call *c)
{
	core_fail(&r->err, CORE_EINTERNAL, "generate: tool \"%s\" failed: %s", name, c->err.msg);
}

/*
 * Run the tool requests (parts of model message m, indices idx[0..n)) in
 * parallel.  restart[i] (may be NULL) is the restart metadata of a resumed
 * call.  Results land in calls[].  Returns non-zero with r filled when a
 * tool is missing or could not be run.
 */
int rt_run_calls(struct runtime *rt, json_t *m, const size_t *idx,
                 const json_t *const *resumed, struct tool_call *calls, size_t n,
                 struct turn_result *r)
{
	const json_t *content = json_object_get(m, "content");
	for (size_t i = 0; i < n; i++) {
		const json_t *tr = json_object_get(json_array_get(content, idx[i]), "toolRequest");
		const char *name = json_string_value(json_object_get(tr, "name"));
		memset(&calls[i], 0, sizeof calls[i]);
		calls[i].tool = find_tool(rt, name ? name : "");
		if (!calls[i].tool) {
			core_fail(&r->err, CORE_ENOTFOUND, "generate: tool \"%s\" not found", name ? name : "");
			return 1;
		}
		calls[i].input = json_object_get(tr, "input");
		calls[i].resumed = resumed ? resumed[i] : NULL;
		/* the input the model wrote must match the tool's declared
		 * schema, or no tool of the round runs */
		struct core_err se = { 0 };
		if (calls[i].tool->input_schema &&
		    schema_check(calls[i].tool->input_schema, calls[i].input, &se)) {
			core_fail(&r->err, CORE_EINTERNAL, "generate: tool \"%s\" failed: invalid input: %s",
			          name, se.msg);
			return 1;
		}
	}
	struct tool_context tc;
	struct tool_events ev = { on_custom, on_artifact, rt, stopped };
	struct core_err e = { 0 };
	tool_ctx(rt, &tc);
	if (tools_run(calls, n, json_object_get(session_state(rt->s), "custom"), &tc, &ev, &e)) {
		for (size_t i = 0; i < n; i++)
			tool_call_release(&calls[i]);
		r->err = e;
		core_err_prefix(&r->err, "generate");
		return 1;
	}
	return 0;
}

void rt_emit_interrupts(struct runtime *rt, const json_t *ints)
{
	session_emit(rt->s, "modelChunk", json_pack("{s:o, s:i, s:s}", "content", json_deep_copy(ints),
	                                            "index", 0, "role", "tool"));
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
			rt_set_meta(part, "interrupt", json_incref(calls[i].interrupt));
			rt_del_meta(part, "pendingOutput");
			json_array_append(ints, part);
		} else {
			rt_set_meta(part, "pendingOutput", json_incref(calls[i].output ? calls[i].output : json_null()));
		}
	}
	rt_emit_interrupts(rt, ints);
	json_decref(ints);
}

void rt_emit_tool_message(struct runtime *rt, const json_t *content)
{
	session_emit(rt->s, "modelChunk", json_pack("{s:O, s:I, s:s}", "content", content,
	                                            "index", (json_int_t)rt->msg_index, "role", "tool"));
	rt->msg_index++;
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

/* One model call on the conversation so far (tags removed, grounding
 * added); *minted the refs its stream gave ref-less tool requests. */
static enum core_status call_model(struct gen *g, struct model_response *resp, json_t **minted,
                                   struct core_err *e)
{
	struct runtime *rt = g->rt;
	const struct agent *a = rt->agent;
	struct model_request req = { 0 };
	struct model_stream stream = { on_model_chunk, stopped, rt };
	json_t *reqmsgs = request_messages(g->msgs);
	agent_ext_augment(rt->ext, reqmsgs);
	req.messages = reqmsgs;
	req.tools = json_array_size(rt->tool_defs) ? rt->tool_defs : NULL;
	req.config = a->config;
	req.key_file = a->key_file;
	req.output = a->output;
	enum core_status st = model_generate(a->model, &req, &stream, resp, e);
	*minted = rt->minted_refs;
	rt->minted_refs = NULL;
	json_decref(reqmsgs);
	return st;
}

/* The model's reply as the conversation keeps it (role model, members in
 * Go's order), appended to g->msgs; borrowed. */
static json_t *append_reply(struct gen *g, const struct model_response *resp)
{
	json_t *m = json_is_object(resp->message) ? json_deep_copy(resp->message)
	                                          : message_new("model", json_array());
	json_object_set_new(m, "role", json_string("model"));
	json_t *ordered = session_message_ordered(m);
	json_decref(m);
	json_array_append_new(g->msgs, ordered);
	g->rt->msg_index++;
	return ordered;
}

/* The last message generated is not committed. */
static void drop_last(struct gen *g)
{
	json_array_remove(g->msgs, json_array_size(g->msgs) - 1);
}

/* r fails with st and "generate: " in front of e's message. */
static void generate_failed(struct turn_result *r, enum core_status st, const struct core_err *e)
{
	r->err = *e;
	r->err.st = st;
	core_err_prefix(&r->err, "generate");
}

/*
 * One round of tool calls for reply m (its requests idx[0..n)): 0 when
 * their answers go back to the model, 1 when the turn is over (a tool
 * failed or interrupted; r filled).
 */
static int tool_round(struct gen *g, json_t *m, const size_t *idx, size_t n,
                      struct turn_result *r)
{
	struct runtime *rt = g->rt;
	struct tool_call *calls = calloc(n, sizeof *calls);
	if (!calls) {
		core_fail(&r->err, CORE_ENOMEM, "out of memory");
		return 1;
	}
	int failed = rt_run_calls(rt, m, idx, NULL, calls, n, r), interrupted = 0;
	for (size_t i = 0; !failed && i < n; i++) {
		if (calls[i].st) {
			const json_t *tr = json_object_get(json_array_get(json_object_get(m, "content"), idx[i]),
			                                   "toolRequest");
			rt_tool_failed(r, json_string_value(json_object_get(tr, "name")), &calls[i]);
			failed = 1;
		} else if (calls[i].interrupt) {
			interrupted = 1;
		}
	}
	if (failed) {
		/* The failed round's model message is not committed. */
		drop_last(g);
		r->committed = 1;
	} else if (interrupted) {
		mark_interrupts(rt, m, idx, calls, n);
		r->err.st = CORE_OK;
		snprintf(r->reason, sizeof r->reason, "interrupted");
		r->committed = 1;
	} else {
		json_t *content = json_array();
		json_t *mc = json_object_get(m, "content");
		for (size_t i = 0; i < n; i++)
			json_array_append_new(content, rt_tool_response_part(
				json_object_get(json_array_get(mc, idx[i]), "toolRequest"), &calls[i]));
		rt_emit_tool_message(rt, content);
		json_array_append_new(g->msgs, message_new("tool", content));
		g->rounds++;
		g->committable = 1;
	}
	for (size_t i = 0; i < n; i++)
		tool_call_release(&calls[i]);
	free(calls);
	return failed || interrupted;
}

/* One model call and what its reply asks for: 0 to call the model again,
 * 1 when the turn is over (r filled). */
static int generate_step(struct gen *g, struct turn_result *r)
{
	struct runtime *rt = g->rt;
	const struct agent *a = rt->agent;
	struct model_response resp = { 0 };
	struct core_err e = { 0 };
	json_t *minted = NULL;
	enum core_status st = call_model(g, &resp, &minted, &e);
	if (st) {
		json_decref(minted);
		generate_failed(r, st, &e);
		r->committed = g->committable;
		return 1;
	}
	if (resp.usage)
		add_usage(rt, resp.usage);
	json_t *m = append_reply(g, &resp);
	size_t *idx = NULL, n = collect_requests(m, minted, &idx);
	int over = 1;
	json_decref(minted);
	if (!n && a->output && (st = structured_check(a->output, m, NULL, &e))) {
		/* A reply that is not the JSON asked for fails the turn
		 * (§9.1 #144); the message is not committed. */
		generate_failed(r, st, &e);
		drop_last(g);
		r->committed = g->committable;
	} else if (!n || !strcmp(resp.finish_reason, "interrupted")) {
		snprintf(r->reason, sizeof r->reason, "%s", resp.finish_reason);
		r->err.st = CORE_OK;
		r->committed = 1;
	} else if (g->rounds + 1 > (size_t)a->max_turns) {
		core_fail(&r->err, CORE_ABORTED, "generate: exceeded maximum tool call iterations (%d)",
		          a->max_turns);
		drop_last(g);
		r->committed = 1;
	} else {
		over = -1;              /* a round of tools */
	}
	model_response_release(&resp);
	if (over < 0)
		over = tool_round(g, m, idx, n, r);
	free(idx);
	return over;
}

/* The generate call with its tool loop.  On return r says how the turn
 * ended and g->msgs holds everything generated. */
static void generate(struct gen *g, const json_t *resume, struct turn_result *r)
{
	g->rt->msg_index = 0;
	if (resume && rt_apply_resume(g, resume, r))
		return;
	while (!generate_step(g, r))
		;
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
		const json_t *custom = json_object_get(session_state(rt->s), "custom");
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

/* May this input start or go on with a prompt-backed turn (§3.4)? */
static enum core_status input_usable(const json_t *msg, const json_t *resume,
                                     const json_t *history, struct core_err *e)
{
	if (msg) {
		const char *role = rt_role_of(msg);
		if (*role && strcmp(role, "user"))
			return core_fail(e, CORE_EINVAL,
			                 "agent input message must have role \"user\", got \"%s\"", role);
		if (message_has_tool_parts(msg))
			return core_fail(e, CORE_EINVAL,
			                 "agent input message must not contain tool request or response parts; use AgentInput.Resume instead");
	}
	if (!msg && !resume_has_payload(resume) && !json_array_size(history))
		return core_fail(e, CORE_EINVAL,
		                 "agent input message or resume is required to start a conversation");
	return CORE_OK;
}

void rt_agent_turn(struct runtime *rt, const json_t *input, struct turn_result *r)
{
	const json_t *msg = json_object_get(input, "message");
	const json_t *resume = json_object_get(input, "resume");
	if (json_is_null(msg))
		msg = NULL;
	if (json_is_null(resume))
		resume = NULL;
	json_t *history = session_messages(rt->s);
	struct gen g = { rt, NULL, 0, 0 };
	/* A grounding (--docs) that failed: the turn is not committed. */
	if (input_usable(msg, resume, history, &r->err) ||
	    agent_ext_ground(rt->ext, history, &r->err) ||
	    render(rt, history, &g.msgs, &r->err))
		return;
	if (resume && !resume_has_payload(resume))
		resume = NULL;
	if (resume && rt_validate_resume(resume, history, &r->err)) {
		json_decref(g.msgs);
		return;
	}
	generate(&g, resume, r);
	if (r->committed)
		session_put_messages(rt->s, turn_messages(g.msgs));
	json_decref(g.msgs);
}
