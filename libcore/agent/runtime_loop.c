/*
 * runtime_loop.c - the prompt-backed turn (Genkit's generate tool loop,
 * runtime-semantics §3.4): the prompt rendered around the history, the
 * model called, the tools it asks for run until it stops or maxTurns
 * rounds have run.
 */
#include "runtime_int.h"

#include <stdlib.h>
#include <string.h>

#include "agent_ext.h"
#include "agent_trace.h"
#include "delegate.h"
#include "../base/json.h"
#include "../model/registry.h"
#include "prompt.h"
#include "structured.h"
#include "tools.h"
#include "../base/util.h"

#define TAG_HISTORY "_genkit_history"
#define TAG_PROMPT "_genkit_prompt"

static int has_tag(const json_t *m, const char *tag)
{
	return json_is_true(json_object_get(json_object_get(m, "metadata"), tag));
}

/* m without tag in its metadata (a new reference): m itself when it has
 * neither tag (messages are shared, never changed in place, as render()
 * shares the history's), else a copy (shallow below the top) whose
 * emptied metadata object is dropped.  A long history's request is then
 * an array of references, not a copy of every message. */
static json_t *untagged(const json_t *m, const char *tag1, const char *tag2)
{
	const json_t *md = json_object_get(m, "metadata");
	if (!md || (!json_object_get(md, tag1) && !json_object_get(md, tag2)))
		return json_incref((json_t *)m);
	json_t *c = json_copy((json_t *)m);
	if (!c)
		return NULL;
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
	struct model_stream stream = { on_model_chunk, rt_stopped, rt };
	enum core_status st = rt_refresh_tools(rt, e);
	if (st)
		return st;
	json_t *reqmsgs = request_messages(g->msgs);
	agent_ext_augment(rt->ext, reqmsgs);
	delegate_augment(rt->delegate, reqmsgs);
	req.messages = reqmsgs;
	/* a resumed history left in the store goes from its stored text,
	 * where the prompt put the history */
	struct model_history hist = { session_messages_before(rt->s), g->history_at,
	                              rt_history_texts, rt };
	if (hist.count && rt_history_as_text(rt))
		req.history = &hist;
	req.tools = json_array_size(rt->tool_defs) ? rt->tool_defs : NULL;
	req.config = a->config;
	req.key_file = a->key_file;
	req.output = a->output;
	req.models_before = g->models_before;
	struct trace_span *span = agent_trace_model_begin(a->model, reqmsgs);
	st = model_generate(a->model, &req, &stream, resp, e);
	agent_trace_model_end(span, st, e->msg, resp);
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

int rt_budget_spent(const struct runtime *rt, char *msg, size_t size)
{
	const json_t *used = session_run_usage(rt->s), *lim;
	const json_t *limits[2] = { rt->agent->max_usage, delegate_parent_budget() };
	static const char *const whose[2] = { "maxUsage, --max-tokens-total",
	                                      "what the delegating agent had left" };
	const char *k;
	for (int i = 0; i < 2; i++)
		json_object_foreach((json_t *)limits[i], k, lim) {
			const json_t *u = json_object_get(used, k);
			json_int_t n = json_is_integer(u) ? json_integer_value(u) : 0;
			if ((u || !json_integer_value(lim)) && n >= json_integer_value(lim)) {
				snprintf(msg, size, "usage budget spent: %lld of %lld %s (%s)",
				         (long long)n, (long long)json_integer_value(lim), k, whose[i]);
				return 1;
			}
		}
	return 0;
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
	char spent[200];
	if (g->rounds && rt_budget_spent(rt, spent, sizeof spent)) {
		/* the round's sub-agents spent the run's budget: no model call
		 * follows, the turn ends as max turns ends it */
		core_fail(&r->err, CORE_EBUDGET, "generate: %s", spent);
		r->committed = 1;
		return 1;
	}
	enum core_status st = call_model(g, &resp, &minted, &e);
	if (st) {
		json_decref(minted);
		generate_failed(r, st, &e);
		r->committed = g->committable;
		return 1;
	}
	if (resp.usage)
		session_add_usage(rt->s, resp.usage);
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
	} else if (rt_budget_spent(rt, spent, sizeof spent)) {
		/* more tool rounds asked for, but the run's budget is spent:
		 * ended as max turns ends it, under its own status */
		core_fail(&r->err, CORE_EBUDGET, "generate: %s", spent);
		drop_last(g);
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
 * scaffolding (§3.4 step 4); *at the place of the history's first message,
 * SIZE_MAX when the prompt put it anywhere but in one run of its own (then
 * a history left in the store has no one place to go). */
static enum core_status render(struct runtime *rt, const json_t *history, json_t **out,
                               size_t *at, struct core_err *e)
{
	const struct agent *a = rt->agent;
	json_t *msgs;
	*at = a->system ? 1 : 0;
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
		const json_t *custom = json_object_get(session_state_loaded(rt->s), "custom");
		enum core_status st = prompt_render(a->prompt, a->input, custom, tagged, &rendered, e);
		json_decref(tagged);
		if (st)
			return st;
		size_t seen = 0;
		*at = SIZE_MAX;
		msgs = json_array();
		json_array_foreach(rendered, i, m) {
			if (has_tag(m, TAG_HISTORY)) {
				if (!seen++)
					*at = i;
				else if (*at + seen - 1 != i)
					*at = SIZE_MAX; /* not one run */
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
		if (seen != json_array_size(history))
			*at = SIZE_MAX;         /* placed twice, or not at all */
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
	/* a deferred history (the echo model's, which answers the input, a
	 * script model's, which counts the model messages the row says it
	 * holds, or a provider's, which sends it from the stored text) stays
	 * unread unless the turn has no message to answer */
	int end_only = msg && session_messages_before(rt->s) &&
	               (rt->resumed_models >= 0 || !strcmp(rt->agent->model, "echo") ||
	                rt_history_as_text(rt));
	json_t *history = end_only ? session_loaded_messages(rt->s) : session_messages(rt->s);
	struct gen g = { rt, NULL, 0, 0, end_only && rt->resumed_models > 0
	                                 ? (size_t)rt->resumed_models : 0, 0 };
	/* A grounding (--docs) that failed: the turn is not committed. */
	if (input_usable(msg, resume, history, &r->err) ||
	    agent_ext_ground(rt->ext, history, &r->err) ||
	    render(rt, history, &g.msgs, &g.history_at, &r->err))
		return;
	if (end_only && g.history_at == SIZE_MAX) {
		/* the prompt puts the history where a stored part cannot go */
		json_decref(g.msgs);
		g.msgs = NULL;
		g.models_before = 0;
		if (render(rt, session_messages(rt->s), &g.msgs, &g.history_at, &r->err))
			return;
	}
	if (resume && !resume_has_payload(resume))
		resume = NULL;
	if (resume && rt_validate_resume(resume, history, &r->err)) {
		json_decref(g.msgs);
		return;
	}
	agent_trace_generate_begin();
	generate(&g, resume, r);
	agent_trace_generate_end(r->err.st, r->err.msg);
	if (r->committed)
		session_put_messages(rt->s, turn_messages(g.msgs));
	json_decref(g.msgs);
}
