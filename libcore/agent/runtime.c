/*
 * runtime.c - the invocation (runtime-semantics §1-4): open, one turn by
 * its kind (prompt-backed, runtime_loop.c; custom, agent_ext.h), the
 * turn's commit (its row, its turnEnd, the resume point), the output, and
 * the detach and caller stops.  See runtime.h; runtime_int.h lists the
 * other files of the runner.
 */
#include "runtime_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../store/store.h"
#include "agent_ext.h"
#include "delegate.h"
#include "../base/json.h"
#include "structured.h"
#include "tools.h"
#include "../base/util.h"
#include "prompt.h"
#include "../base/schema.h"
#include "structured.h"
#include "agent_trace.h"

#define DEFAULT_HEARTBEAT_TIMEOUT_MS 60000

/* ---- open ---- */

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
	rt->on_busy = cfg->on_busy;
	rt->busy_timeout_ms = cfg->busy_timeout_ms;
	rt->claimed_id = cfg->claimed_id;
	(void)delegate_parent_link();   /* taken from the environment before any tool runs */
	if (cfg->agent->delegation &&
	    !(rt->delegate = delegate_run_new(cfg->agent->delegation, &rt->store,
	                                      cfg->store_location, cfg->agent->key_file)))
		st = core_fail(e, CORE_ENOMEM, "out of memory");
	else if (!(rt->tool_defs = json_array()))
		st = core_fail(e, CORE_ENOMEM, "out of memory");
	else if (!(st = open_session(rt, cfg, e)) && !(st = rt_init_check(cfg->init, e)) &&
	         !(st = rt_load_tools(rt, e)))
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
	rt_unlock_session(rt);
	session_free(rt->s);
	json_decref(rt->last_good);
	for (size_t i = 0; i < rt->ntools; i++)
		tool_free(rt->tools[i]);
	free(rt->tools);
	json_decref(rt->tool_defs);
	delegate_run_free(rt->delegate);
	json_decref(rt->minted_refs);
	json_decref(rt->error);
	json_decref(rt->resumed_title);
	free(rt->turn_text);
	free(rt);
}

void rt_leave_at_exit(struct runtime *rt)
{
	if (rt)
		session_leave_at_exit(rt->s);
}

const char *rt_session_id(const struct runtime *rt)
{
	return session_id(rt->s);
}

const json_t *rt_last_message(const struct runtime *rt)
{
	return session_last_message(rt->s);
}

const char *rt_last_reason(const struct runtime *rt)
{
	return rt->last_reason;
}

const json_t *rt_usage(const struct runtime *rt)
{
	return rt->s ? session_run_usage(rt->s) : NULL;
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

json_t *rt_row_info(struct runtime *rt)
{
	json_t *info = json_object();
	if (!info)
		return NULL;
	if (rt->agent->name)
		json_object_set_new(info, "agent", json_string(rt->agent->name));
	if (rt->agent->model)
		json_object_set_new(info, "model", json_string(rt->agent->model));
	/* a deferred history's first user text is the resumed row's title */
	json_t *title = session_messages_before(rt->s) ? json_incref(rt->resumed_title)
	                                               : session_title(rt->s);
	if (title)
		json_object_set_new(info, "title", title);
	/* what a script model counts, so that its next turn need not read
	 * the history to know it */
	long models = -1;
	if (!session_messages_before(rt->s))
		models = rt_count_models(session_messages(rt->s));
	else if (rt->resumed_models >= 0)
		models = rt->resumed_models + rt_count_models(session_loaded_messages(rt->s));
	if (models >= 0)
		json_object_set_new(info, "modelMessages", json_integer(models));
	/* A detached worker writes one row for every turn it ran. */
	const json_t *usage = rt->detached ? session_run_usage(rt->s)
	                                   : session_turn_usage(rt->s);
	if (json_object_size(usage))
		json_object_set_new(info, "usage", json_deep_copy(usage));
	/* the session's cumulative usage, for a listing that reads no state */
	const json_t *total = json_object_get(session_state_loaded(rt->s), "usage");
	if (json_object_size(total))
		json_object_set_new(info, "sessionUsage", json_deep_copy(total));
	/* The invocation ended in a turn that never committed: what it was
	 * asked, which the row's state (the last good one) does not hold. */
	if (rt->ended && rt->turn_text)
		json_object_set_new(info, "input", json_string(rt->turn_text));
	/* A sub-agent's session names the delegation that started it. */
	if (delegate_parent_link())
		json_object_set(info, "delegation", (json_t *)delegate_parent_link());
	return info;
}

/* The text parts of a user message joined, cut to RT_INPUT_MAX bytes at a
 * character's boundary (" [...]" then), or NULL for none (or no memory). */
static char *turn_text(const json_t *msg)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	const json_t *part;
	size_t i;
	json_array_foreach(json_object_get(msg, "content"), i, part) {
		const char *t = json_string_value(json_object_get(part, "text"));
		if (t && core_buf_addf(&b, "%s%s", b.len ? "\n" : "", t))
			break;
	}
	if (b.len > RT_INPUT_MAX) {
		size_t n = RT_INPUT_MAX;
		while (n && ((unsigned char)b.p[n] & 0xC0) == 0x80)
			n--;
		b.len = n;
		core_buf_adds(&b, " [...]");
	}
	if (!b.len) {
		core_buf_release(&b);
		return NULL;
	}
	return core_buf_detach(&b, NULL);
}

int64_t rt_next_created_ns(struct runtime *rt)
{
	int64_t now = store_now_ns(rt->store);
	if (now <= rt->last_created_ns)
		now = rt->last_created_ns + 1000;
	return rt->last_created_ns = now;
}

/* The turn's row, as the store keeps it. */
static json_t *turn_row(struct runtime *rt, const struct turn_result *r)
{
	char now[CORE_TIME_MAX];
	core_time_format(rt_next_created_ns(rt), now);
	json_t *err = r->err.st ? jv_error_new(r->err.st, r->err.msg) : NULL;
	/* with a deferred history, the messages after the kept ones */
	json_t *state = session_messages_before(rt->s) ? session_appended(rt->s)
	                : session_shaped(rt->s, session_state(rt->s));
	json_t *info = rt_row_info(rt);
	struct session_row sr = {
		.created_at = now, .updated_at = now, .error = err, .finish_reason = r->reason,
		.parent_id = session_parent_id(rt->s), .session_id = session_id(rt->s),
		.snapshot_id = session_snapshot_id(rt->s), .state = state,
		.status = core_outcome_row(r->err.st, r->reason), .info = info,
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
	enum core_status st;
	if ((st = session_history_error(rt->s, e))) {
		core_err_prefix(e, "cannot commit the turn (snapshot '%s')", id);
		return st;
	}
	/* the turn's ID is new: a backend need not read it first */
	unsigned flags = STORE_NEW | (session_messages_before(rt->s) ? STORE_APPEND : 0);
	json_t *row = turn_row(rt, r);
	if (!row)
		return core_fail(e, CORE_ENOMEM, "cannot commit the turn (snapshot '%s'): out of memory", id);
	struct save_ctx sc = { row };
	struct store_base base = { parent, session_base_kept(rt->s) };
	st = store_save_on(rt->store, id, flags, parent ? &base : NULL, save_fn, &sc, NULL, e);
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
	if (json_object_size(session_turn_usage(rt->s)))
		json_object_set_new(te, "usage", json_deep_copy(session_turn_usage(rt->s)));
	session_emit(rt->s, "turnEnd", te);
	agent_trace_turn_end(written, st ? st : r->err.st, st ? e->msg : r->err.msg,
	                     agent_trace_turn_content() ? session_state(rt->s) : NULL);
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
	char spent[200];
	if (rt_budget_spent(rt, spent, sizeof spent)) {
		/* the turns before spent the run's budget: no more begin */
		rt_end(rt, "aborted", CORE_EBUDGET, spent);
		return CORE_ABORTED;
	}
	agent_trace_turn_begin();
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
		free(rt->turn_text);
		rt->turn_text = turn_text(copy);
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
		         r->err.st == CORE_ABORTED || r->err.st == CORE_ECANCELLED ||
		         r->err.st == CORE_EBUDGET ? "aborted" : "failed");
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
	if (!r.err.st) {        /* committed: its message is in the state */
		free(rt->turn_text);
		rt->turn_text = NULL;
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
	/* an aborted parent takes its background sub-agents with it */
	if (!strcmp(reason, "aborted"))
		delegate_abort_children(rt->delegate);
	json_decref(rt->error);
	rt->error = jv_error_new(st, msg);
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

void rt_unlock_session(struct runtime *rt)
{
	if (!rt->locked_session)
		return;
	store_session_unlock(rt->store, rt->locked_session);
	free(rt->locked_session);
	rt->locked_session = NULL;
}

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
	const json_t *last = session_last_message(rt->s);
	if (last)
		json_object_set_new(o, "message", json_deep_copy(last));
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
	const json_t *live = session_state_loaded(rt->s);
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
	/* what this invocation's model calls reported, all its turns */
	if (json_object_size(session_run_usage(rt->s)))
		json_object_set_new(o, "usage", json_deep_copy(session_run_usage(rt->s)));
	return o;
}

enum core_status rt_output_status(const json_t *output)
{
	const char *reason = json_string_value(json_object_get(output, "finishReason"));
	const json_t *err = json_object_get(output, "error");
	return core_outcome_exit(err ? core_status_from_name(json_string_value(
	                                 json_object_get(err, "status"))) : CORE_OK, reason);
}

enum core_status rt_exit_status(const struct runtime *rt, const json_t *output)
{
	if (rt->sys_st)
		return rt->sys_st;
	/* The status itself, not its name: the output says INVALID_ARGUMENT
	 * for a request the provider refused, as Genkit does, but that
	 * request was agentkit's, not the caller's input. */
	if (rt->ended)
		return core_outcome_exit(rt->end_st, rt->end_reason);
	return rt_output_status(output);
}
