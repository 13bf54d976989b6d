/*
 * runtime_tools.c - the agent's tools in a turn: loaded at open and again
 * when their source changed, a model message's tool requests run in
 * parallel (a tool's session edits applied as it runs), their answers as
 * toolResponse parts and tool-role chunks, and the metadata marks of an
 * interrupted or resumed request.  Both the generate loop
 * (runtime_loop.c) and a resume (runtime_resume.c) run tools through
 * these.
 */
#include "runtime_int.h"

#include <stdlib.h>
#include <string.h>

#include "../base/json.h"
#include "../base/schema.h"
#include "agent_trace.h"
#include "delegate.h"
#include "tools.h"

/* ---- the agent's tools ---- */

enum core_status rt_load_tools(struct runtime *rt, struct core_err *e)
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
	/* Then one tool per sub-agent (delegate.h). */
	size_t nd = delegate_tool_count(rt->delegate);
	if (nd) {
		struct tool **more = realloc(rt->tools, (rt->ntools + nd) * sizeof *more);
		if (!more)
			return core_fail(e, CORE_ENOMEM, "out of memory");
		rt->tools = more;
	}
	for (i = 0; i < nd; i++) {
		struct tool *t;
		if ((st = delegate_tool(rt->delegate, i, &t, e)))
			return st;
		for (size_t j = 0; j < rt->ntools; j++)
			if (!strcmp(rt->tools[j]->name, t->name)) {
				st = core_fail(e, CORE_EINVAL, "%s: the delegation tool '%s' has the "
				               "name of one of its tools", rt->agent->path, t->name);
				tool_free(t);
				return st;
			}
		rt->tools[rt->ntools++] = t;
		json_array_append(rt->tool_defs, t->definition);
	}
	return CORE_OK;
}

enum core_status rt_refresh_tools(struct runtime *rt, struct core_err *e)
{
	int changed;
	enum core_status st = tool_source_refresh(rt->agent->tools, &changed, e);
	if (st || !changed)
		return st;
	for (size_t i = 0; i < rt->ntools; i++)
		tool_free(rt->tools[i]);
	free(rt->tools);
	rt->tools = NULL;
	rt->ntools = 0;
	json_array_clear(rt->tool_defs);
	return rt_load_tools(rt, e);
}

/* ---- messages and parts ---- */

const char *rt_role_of(const json_t *m)
{
	const char *r = json_string_value(json_object_get(m, "role"));
	return r ? r : "";
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

/* ---- what a running tool reaches: the caller's stop, its session
 * edits (Session.UpdateCustom, SendArtifact) ---- */

/* The caller's stop, for the model stream and the tools; ctx is the
 * runtime. */
int rt_stopped(void *ctx)
{
	struct runtime *rt = ctx;
	return session_cancelled(rt->s);
}

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

/* runtime.h; here, beside its one caller: a round's sub-agents get it. */
json_t *rt_budget_left(const struct runtime *rt)
{
	const json_t *used = session_run_usage(rt->s), *lim;
	const json_t *limits[2] = { rt->agent->max_usage, delegate_parent_budget() };
	json_t *left = NULL;
	const char *k;
	for (int i = 0; i < 2; i++)
		json_object_foreach((json_t *)limits[i], k, lim) {
			json_int_t n = json_integer_value(lim) -
			               json_integer_value(json_object_get(used, k));
			const json_t *had = json_object_get(left, k);
			if (n < 0)
				n = 0;
			if (!left && !(left = json_object()))
				return NULL;
			if (!had || json_integer_value(had) > n)
				json_object_set_new(left, k, json_integer(n));
		}
	return left;
}

/* A sub-agent's usage is the parent's too (docs/agents.md "Usage"). */
static void on_usage(void *ctx, const struct tool *t, const json_t *usage)
{
	struct runtime *rt = ctx;
	(void)t;
	session_add_usage(rt->s, usage);
}

/* ---- running the tool requests ---- */

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
	tc->traceparent = NULL;         /* tools_run() sets each call's */
	tc->resumed = NULL;             /* ... and an in-process call its own */
	tc->budget_left = NULL;
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
 * Check call c's input against its tool's declared schema.  0: it matches
 * (or nothing is declared); 1: it does not, and the call is answered here
 * without running the tool - its output is {"error": "invalid arguments
 * for tool 'x': /path: expected ..."} (the shape of an MCP isError
 * result, mcp.h), which goes back to the model as the tool's response so
 * that it can correct itself; -1: the schema itself is unusable (a broken
 * $ref, ...), which the model cannot fix: r is filled and the turn fails
 * as a failing tool does.
 */
static int check_input(struct tool_call *c, const char *name, struct turn_result *r)
{
	struct core_err se = { 0 };
	enum core_status st = c->tool->input_schema
	                    ? schema_check(c->tool->input_schema, c->input, &se) : CORE_OK;
	char msg[sizeof se.msg + 200];
	if (st == CORE_OK)
		return 0;
	if (st != CORE_EINVAL) {
		core_fail(&r->err, st == CORE_ENOMEM ? st : CORE_EINTERNAL,
		          "generate: tool \"%s\" failed: invalid input: %s", name, se.msg);
		return -1;
	}
	snprintf(msg, sizeof msg, "invalid arguments for tool '%s': %s", name, se.msg);
	/* The call's span says what happened, though nothing ran. */
	agent_trace_tool_rejected(c->tool->name, c->input, msg);
	c->output = json_pack("{s:s}", "error", msg);
	c->parts = json_array();
	if (!c->output || !c->parts) {
		core_fail(&r->err, CORE_ENOMEM, "out of memory");
		return -1;
	}
	return 1;
}

/*
 * Run the tool requests (parts of model message m, indices idx[0..n)) in
 * parallel.  restart[i] (may be NULL) is the restart metadata of a resumed
 * call.  Results land in calls[].  A call whose input does not match its
 * tool's schema is not run: its result is the error for the model
 * (check_input()).  Returns non-zero with r filled (calls[] released)
 * when a tool is missing, a schema is unusable, or the calls could not be
 * run.
 */
int rt_run_calls(struct runtime *rt, json_t *m, const size_t *idx,
                 const json_t *const *resumed, struct tool_call *calls, size_t n,
                 struct turn_result *r)
{
	const json_t *content = json_object_get(m, "content");
	struct tool_call *run = NULL;
	size_t *at = NULL, k = 0;
	memset(calls, 0, n * sizeof *calls);
	for (size_t i = 0; i < n; i++) {
		const json_t *tr = json_object_get(json_array_get(content, idx[i]), "toolRequest");
		const char *name = json_string_value(json_object_get(tr, "name"));
		calls[i].tool = find_tool(rt, name ? name : "");
		if (!calls[i].tool) {
			core_fail(&r->err, CORE_ENOTFOUND, "generate: tool \"%s\" not found", name ? name : "");
			goto fail;
		}
		calls[i].input = json_object_get(tr, "input");
		calls[i].resumed = resumed ? resumed[i] : NULL;
	}
	/* Every request is checked before any tool runs: an unusable schema
	 * fails the round with nothing run. */
	for (size_t i = 0; i < n; i++)
		if (check_input(&calls[i], calls[i].tool->name, r) < 0)
			goto fail;
	if (!(run = calloc(n, sizeof *run)) || !(at = calloc(n, sizeof *at))) {
		core_fail(&r->err, CORE_ENOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		if (calls[i].output)
			continue;
		run[k] = calls[i];
		at[k++] = i;
	}
	if (k) {
		struct tool_context tc;
		struct tool_events ev = { on_custom, on_artifact, rt, rt_stopped, on_usage };
		struct core_err e = { 0 };
		json_t *left = rt_budget_left(rt);
		tool_ctx(rt, &tc);
		tc.budget_left = left;
		enum core_status rs = tools_run(run, k, json_object_get(session_state_loaded(rt->s),
		                                "custom"), &tc, &ev, &e);
		json_decref(left);
		if (rs) {
			for (size_t j = 0; j < k; j++)
				tool_call_release(&run[j]);
			r->err = e;
			core_err_prefix(&r->err, "generate");
			goto fail;
		}
		/* The calls are over: their results move back in place. */
		for (size_t j = 0; j < k; j++)
			calls[at[j]] = run[j];
	}
	free(run);
	free(at);
	return 0;
fail:
	for (size_t i = 0; i < n; i++)
		tool_call_release(&calls[i]);
	free(run);
	free(at);
	return 1;
}

void rt_emit_interrupts(struct runtime *rt, const json_t *ints)
{
	session_emit(rt->s, "modelChunk", json_pack("{s:o, s:i, s:s}", "content", json_deep_copy(ints),
	                                            "index", 0, "role", "tool"));
}

void rt_emit_tool_message(struct runtime *rt, const json_t *content)
{
	session_emit(rt->s, "modelChunk", json_pack("{s:O, s:I, s:s}", "content", content,
	                                            "index", (json_int_t)rt->msg_index, "role", "tool"));
	rt->msg_index++;
}
