/*
 * agent_trace.c - Genkit's span names, types and paths for an agent's
 * invocation (agent_trace.h).
 *
 * genkit:path follows go/core/tracing: the parent's path plus
 * "/{NAME,t:TYPE}", ",s:SUBTYPE" added for a subtype other than the type
 * ("util" spans carry none).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent_trace.h"
#include "../base/buf.h"
#include "../base/json.h"

#define PATH_MAX_LEN 1024
/* generate spans nested in one turn's tool loop, at most (a deeper loop
 * puts its further model calls under the deepest). */
#define NEST_MAX 32

struct open_span {
	struct trace_span *s;
	char path[PATH_MAX_LEN];
};

static struct {
	struct open_span root, turn, gen;
	/* The tool loop's later model calls, each under a generate of its
	 * own inside the previous one's, as Genkit's generate recurses
	 * (js/ai generateHelper, go/ai Generate): nest[depth - 1] is the
	 * innermost; models counts the model calls of the innermost. */
	struct open_span nest[NEST_MAX];
	int depth, models;
	char agent[256];
	char session[256];
	long turns;
	int failure_marked;     /* a span of this turn is the failure's source */
	int unsent;             /* a turn ended since the last export */
	int content, semconv;   /* agent_trace_options() */
	size_t content_max;
} A;

void agent_trace_options(int content, int semconv)
{
	const char *v = getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT");
	const char *lim = getenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT");
	char *end = NULL;
	long long n = lim && *lim ? strtoll(lim, &end, 10) : 0;
	A.content = content || (v && !strcasecmp(v, "true"));
	A.semconv = semconv;
	A.content_max = end && !*end && n > 0 ? (size_t)n : AGENT_TRACE_CONTENT_MAX;
}

/* A value as a JSON string attribute, cut at the cap on a UTF-8 boundary;
 * only when content capture is on. */
static void content_attr(struct trace_span *s, const char *key, const json_t *v)
{
	if (!s || !v || !A.content)
		return;
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (!jv_dump(v, &b) && b.p) {
		size_t n = b.len;
		if (n > A.content_max) {
			n = A.content_max;
			while (n && ((unsigned char)b.p[n] & 0xc0) == 0x80)
				n--;
		}
		b.p[n] = 0;
		trace_attr_str(s, key, b.p);
	}
	core_buf_release(&b);
}

/* Export the ended spans; a failure is remembered by the recorder and
 * reported at exit. */
static void flush(void)
{
	struct core_err e = { 0 };
	A.unsent = 0;
	trace_flush(&e);
}

void agent_trace_idle(void)
{
	if (A.unsent)
		flush();
}

static void path_of(char *out, const char *parent, const char *name, const char *type,
                    const char *subtype)
{
	/* A path past the cap is cut: a name of a kilobyte is no name. */
	if (snprintf(out, PATH_MAX_LEN, "%s/{%s,t:%s%s%s}", parent, name, type,
	             subtype ? ",s:" : "", subtype ? subtype : "") >= PATH_MAX_LEN)
		out[PATH_MAX_LEN - 1] = 0;
}

/* The attributes every span of Genkit's has. */
static void genkit_attrs(struct trace_span *s, const char *name, const char *type,
                         const char *subtype, const char *path)
{
	trace_attr_str(s, "genkit:name", name);
	trace_attr_str(s, "genkit:type", type);
	if (subtype)
		trace_attr_str(s, "genkit:metadata:subtype", subtype);
	trace_attr_str(s, "genkit:path", path);
}

static struct trace_span *open_under(const struct open_span *parent, const char *name,
                                     enum trace_kind kind, const char *type,
                                     const char *subtype, char *path, int64_t start_ns)
{
	struct trace_span *s = trace_start(parent ? parent->s : NULL, name, kind, start_ns);
	if (!s)
		return NULL;
	path_of(path, parent ? parent->path : "", name, type, subtype);
	genkit_attrs(s, name, type, subtype, path);
	return s;
}

/* End s at end_ns (0: now). */
static void close_span_at(struct trace_span *s, enum core_status st, const char *msg,
                          int64_t end_ns)
{
	if (!s)
		return;
	trace_attr_str(s, "genkit:state", st ? "error" : "success");
	if (st && !A.failure_marked) {
		trace_attr_bool(s, "genkit:isFailureSource", 1);
		A.failure_marked = 1;
	}
	const char *why = st ? (msg && *msg ? msg : core_strerror(st)) : NULL;
	if (st) {
		/* As Genkit JS records the error on each span it fails
		 * (span.recordException): semconv's exception event. */
		const char *ev[] = { "exception.type", core_status_name(st),
		                     "exception.message", why, NULL };
		trace_attr_str(s, "error.type", core_status_name(st));
		trace_event(s, "exception", ev);
	}
	trace_end_at(s, st ? TRACE_STATUS_ERROR : TRACE_UNSET, why, end_ns);
}

static void close_span(struct trace_span *s, enum core_status st, const char *msg)
{
	close_span_at(s, st, msg, 0);
}

/*
 * gen_ai.provider.name for a model "PROVIDER/NAME" (or "echo"): the
 * semconv's well-known value where there is one (googleai is the Gemini
 * API, "gcp.gemini"), else agentkit's provider prefix.
 */
static void provider_attr(struct trace_span *s, const char *model)
{
	const char *slash = strchr(model, '/');
	char prov[64];
	snprintf(prov, sizeof prov, "%.*s", slash ? (int)(slash - model) : (int)strlen(model),
	         model);
	trace_attr_str(s, "gen_ai.provider.name", !strcmp(prov, "googleai") ? "gcp.gemini" : prov);
}

/* A Genkit part as a semconv message part (gen-ai input/output messages
 * JSON schema): text, tool_call, tool_call_response, uri (media),
 * reasoning; NULL for a part of no kind known. */
static json_t *semconv_part(const json_t *part)
{
	const json_t *v, *tr;
	if ((v = json_object_get(part, "text")) && json_is_string(v))
		return json_pack("{s:s, s:O}", "type", "text", "content", v);
	if ((v = json_object_get(part, "reasoning")) && json_is_string(v))
		return json_pack("{s:s, s:O}", "type", "reasoning", "content", v);
	if ((tr = json_object_get(part, "toolRequest"))) {
		json_t *o = json_pack("{s:s, s:O?, s:O?}", "type", "tool_call", "name",
		                      json_object_get(tr, "name"), "arguments",
		                      json_object_get(tr, "input"));
		if (o && json_object_get(tr, "ref"))
			json_object_set(o, "id", json_object_get(tr, "ref"));
		return o;
	}
	if ((tr = json_object_get(part, "toolResponse"))) {
		json_t *o = json_pack("{s:s, s:O?}", "type", "tool_call_response", "response",
		                      json_object_get(tr, "output"));
		if (o && json_object_get(tr, "ref"))
			json_object_set(o, "id", json_object_get(tr, "ref"));
		return o;
	}
	if ((tr = json_object_get(part, "media")))
		return json_pack("{s:s, s:s, s:O?, s:O?}", "type", "uri", "modality", "image",
		                 "mime_type", json_object_get(tr, "contentType"), "uri",
		                 json_object_get(tr, "url"));
	return NULL;
}

/* Genkit messages as semconv ones: {role, parts[, finish_reason]}, Genkit's
 * "model" role being "assistant"; system messages are left out of
 * gen_ai.input.messages (they go to gen_ai.system_instructions) when
 * system is NULL, else their parts are appended to *system. */
static json_t *semconv_messages(const json_t *msgs, const char *finish_reason,
                                json_t *system)
{
	json_t *out = json_array(), *m;
	size_t i, j;
	json_t *part;
	json_array_foreach(msgs, i, m) {
		const char *role = json_string_value(json_object_get(m, "role"));
		json_t *parts = json_array();
		json_array_foreach(json_object_get(m, "content"), j, part) {
			json_t *p = semconv_part(part);
			if (p)
				json_array_append_new(parts, p);
		}
		if (role && !strcmp(role, "system") && system) {
			json_array_extend(system, parts);
			json_decref(parts);
			continue;
		}
		json_t *o = json_pack("{s:s, s:o}", "role", !role ? "user" : !strcmp(role, "model")
		                      ? "assistant" : role, "parts", parts);
		if (o && finish_reason)
			json_object_set_new(o, "finish_reason", json_string(finish_reason));
		json_array_append_new(out, o);
	}
	return out;
}

/* --trace-names semconv: the span's name as the GenAI conventions give it. */
static void semconv_name(struct trace_span *s, const char *op, const char *what)
{
	char name[300];
	if (!s || !A.semconv)
		return;
	snprintf(name, sizeof name, "%s %s", op, what);
	trace_rename(s, name);
}

/* The innermost open span: a model's or tool's parent. */
static const struct open_span *inner(void)
{
	if (A.depth)
		return &A.nest[A.depth - 1];
	return A.gen.s ? &A.gen : A.turn.s ? &A.turn : A.root.s ? &A.root : NULL;
}

/* The invocation span's own attributes; a detached worker's says so and
 * carries the session on (A.agent and A.session are set). */
static void invocation_attrs(struct trace_span *s, int detached)
{
	semconv_name(s, "invoke_agent", A.agent);
	trace_attr_bool(s, "genkit:isRoot", 1);
	if (detached)
		trace_attr_bool(s, "genkit:metadata:agent:detached", 1);
	trace_attr_str(s, "gen_ai.operation.name", "invoke_agent");
	trace_attr_str(s, "gen_ai.agent.name", A.agent);
	if (detached && A.session[0]) {
		char sid[sizeof A.session];
		memcpy(sid, A.session, sizeof sid);     /* it is copied into itself */
		agent_trace_session(sid);
	}
}

void agent_trace_begin(const char *agent, const char *model, int64_t start_ns)
{
	if (!trace_on() || A.root.s)
		return;
	snprintf(A.agent, sizeof A.agent, "%s", agent);
	struct trace_span *s = open_under(NULL, agent, TRACE_INTERNAL, "action", "agent",
	                                  A.root.path, start_ns);
	A.root.s = s;
	invocation_attrs(s, 0);
	if (model && *model) {
		trace_attr_str(s, "gen_ai.request.model", model);
		provider_attr(s, model);
	}
}

void agent_trace_worker(void)
{
	struct trace_span *launcher = A.root.s;
	if (!launcher)
		return;
	trace_adopt(launcher);
	if (!trace_on())
		return;
	memset(&A.turn, 0, sizeof A.turn);
	memset(&A.gen, 0, sizeof A.gen);
	A.depth = A.models = 0;
	A.unsent = 0;           /* the launcher's to export */
	A.root.s = open_under(NULL, A.agent, TRACE_INTERNAL, "action", "agent", A.root.path, 0);
	invocation_attrs(A.root.s, 1);
}

void agent_trace_detach_here(void)
{
	struct trace_span *launcher = A.root.s;
	if (!launcher)
		return;
	struct trace_span *w = trace_start(launcher, A.agent, TRACE_INTERNAL, 0);
	trace_attr_str(launcher, "agentkit.finish_reason", "detached");
	close_span(launcher, CORE_OK, NULL);
	A.root.s = w;
	/* The launcher's path: the worker's span stands for the same
	 * invocation, carried on. */
	genkit_attrs(w, A.agent, "action", "agent", A.root.path);
	invocation_attrs(w, 1);
	flush();
}

void agent_trace_session(const char *session_id)
{
	if (!session_id)
		return;
	snprintf(A.session, sizeof A.session, "%s", session_id);
	trace_attr_str(A.root.s, "genkit:metadata:agent:sessionId", session_id);
	trace_attr_str(A.root.s, "gen_ai.conversation.id", session_id);
}

void agent_trace_end(enum core_status st, const json_t *output)
{
	if (!A.root.s)
		return;
	const json_t *err = json_object_get(output, "error");
	const char *msg = json_string_value(json_object_get(err, "message"));
	const char *reason = json_string_value(json_object_get(output, "finishReason"));
	enum core_status est = CORE_OK;
	if (output && err)
		est = core_status_from_name(json_string_value(json_object_get(err, "status")));
	if (output && err && !est)
		est = CORE_FAILED;
	if (!output && st && st != CORE_EPIPE)
		est = st;
	if (reason)
		trace_attr_str(A.root.s, "agentkit.finish_reason", reason);
	content_attr(A.root.s, "genkit:output", output);
	close_span(A.root.s, est, msg);
	A.root.s = NULL;
}

void agent_trace_turn_begin(void)
{
	if (!A.root.s)
		return;
	agent_trace_idle();
	char name[32];
	snprintf(name, sizeof name, "runTurn-%ld", ++A.turns);
	A.failure_marked = 0;
	A.turn.s = open_under(&A.root, name, TRACE_INTERNAL, "flowStep", NULL, A.turn.path, 0);
}

int agent_trace_content(void)
{
	return A.content;
}

int agent_trace_turn_content(void)
{
	return A.turn.s && A.content;
}

void agent_trace_turn_end(const char *snapshot_id, enum core_status st, const char *msg,
                          const json_t *state)
{
	if (!A.turn.s)
		return;
	if (!st && A.content && state) {
		/* Genkit's turn span output (turnSpanOutput): {"state": ...}. */
		json_t *o = json_pack("{s:O}", "state", state);
		content_attr(A.turn.s, "genkit:output", o);
		json_decref(o);
	}
	if (A.gen.s)
		agent_trace_generate_end(st, msg);
	if (snapshot_id && *snapshot_id)
		trace_attr_str(A.turn.s, "genkit:metadata:agent:snapshotId", snapshot_id);
	close_span(A.turn.s, st, msg);
	A.turn.s = NULL;
	A.unsent = 1;
}

void agent_trace_generate_begin(void)
{
	if (A.turn.s && !A.gen.s) {
		A.gen.s = open_under(&A.turn, "generate", TRACE_INTERNAL, "util", NULL,
		                     A.gen.path, 0);
		A.depth = A.models = 0;
	}
}

void agent_trace_generate_end(enum core_status st, const char *msg)
{
	/* The nested ones first, innermost out: each ends as its caller. */
	while (A.depth) {
		struct open_span *n = &A.nest[--A.depth];
		close_span(n->s, st, msg);
		n->s = NULL;
	}
	A.models = 0;
	close_span(A.gen.s, st, msg);
	A.gen.s = NULL;
}

/* Before a model call in the tool loop: the second and later ones get a
 * generate span of their own under the previous one. */
static void nest_generate(void)
{
	if (!A.gen.s)
		return;
	if (A.models++ == 0 || A.depth == NEST_MAX)
		return;
	const struct open_span *p = inner();
	struct open_span *n = &A.nest[A.depth];
	n->s = open_under(p, "generate", TRACE_INTERNAL, "util", NULL, n->path, 0);
	if (n->s) {
		A.depth++;
		A.models = 1;
	}
}

/* A model's or tool's call: a span under the innermost open one, with its
 * GenAI operation (op: also its name with --trace-names semconv). */
static struct trace_span *open_call(const char *name, enum trace_kind kind,
                                    const char *subtype, const char *op)
{
	const struct open_span *p = inner();
	char path[PATH_MAX_LEN];
	struct trace_span *s = p ? open_under(p, name, kind, "action", subtype, path, 0) : NULL;
	trace_attr_str(s, "gen_ai.operation.name", op);
	semconv_name(s, op, name);
	return s;
}

struct trace_span *agent_trace_model_begin(const char *model, const json_t *messages)
{
	nest_generate();
	struct trace_span *s = open_call(model, TRACE_CLIENT, "model", "chat");
	if (!s)
		return NULL;
	trace_attr_str(s, "gen_ai.request.model", model);
	provider_attr(s, model);
	if (A.content && messages) {
		json_t *in = json_pack("{s:O}", "messages", messages);
		content_attr(s, "genkit:input", in);
		json_decref(in);
		/* The semconv's opt-in content attributes, as JSON strings. */
		json_t *sys = json_array();
		json_t *sm = semconv_messages(messages, NULL, sys);
		content_attr(s, "gen_ai.input.messages", sm);
		if (json_array_size(sys))
			content_attr(s, "gen_ai.system_instructions", sys);
		json_decref(sm);
		json_decref(sys);
	}
	return s;
}

void agent_trace_model_end(struct trace_span *s, enum core_status st, const char *msg,
                           const struct model_response *resp)
{
	if (!s)
		return;
	const char *finish_reason = resp ? resp->finish_reason : NULL;
	const json_t *usage = resp ? resp->usage : NULL;
	if (!st && resp && resp->message && A.content) {
		json_t *out = json_pack("{s:O, s:s}", "message", resp->message, "finishReason",
		                        finish_reason ? finish_reason : "");
		content_attr(s, "genkit:output", out);
		json_decref(out);
		json_t *one = json_pack("[O]", resp->message);
		json_t *sm = semconv_messages(one, finish_reason, NULL);
		content_attr(s, "gen_ai.output.messages", sm);
		json_decref(sm);
		json_decref(one);
	}
	static const char *const keys[][2] = {
		{ "inputTokens", "gen_ai.usage.input_tokens" },
		{ "outputTokens", "gen_ai.usage.output_tokens" },
		{ "thoughtsTokens", "gen_ai.usage.reasoning.output_tokens" },
	};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		const json_t *v = json_object_get(usage, keys[i][0]);
		if (json_is_integer(v))
			trace_attr_int(s, keys[i][1], json_integer_value(v));
	}
	if (finish_reason && *finish_reason) {
		json_t *arr = json_pack("[s]", finish_reason);
		trace_attr_strs(s, "gen_ai.response.finish_reasons", arr);
		json_decref(arr);
	}
	close_span(s, st, msg);
}

struct trace_span *agent_trace_tool_begin(const char *tool, const json_t *input)
{
	struct trace_span *s = open_call(tool, TRACE_INTERNAL, "tool", "execute_tool");
	trace_attr_str(s, "gen_ai.tool.name", tool);
	trace_attr_str(s, "gen_ai.tool.type", "function");
	content_attr(s, "genkit:input", input);
	return s;
}

void agent_trace_tool_end(struct trace_span *s, enum core_status st, const char *msg,
                          const json_t *interrupt, const json_t *output)
{
	if (!s)
		return;
	/* A result that is an error ({"error": "..."}: an MCP isError, an
	 * executable tool's own): the call worked and the model gets it, but
	 * the tool failed (semconv: error.type, status ERROR; MCP's
	 * "tool_error").  Its text is the tool's output: only with content. */
	const json_t *eo = json_object_get(output, "error");
	int tool_error = !st && !interrupt && json_is_object(output) &&
	                 json_object_size(output) == 1 && json_is_string(eo);
	trace_attr_str(s, "agentkit.tool.outcome", st ? "failed" : interrupt ? "interrupted"
	                                           : tool_error ? "error" : "ok");
	if (!st)
		content_attr(s, "genkit:output", interrupt ? interrupt : output);
	if (tool_error) {
		const char *m = A.content ? json_string_value(eo) : "the tool returned an error";
		const char *ev[] = { "exception.type", "tool_error", "exception.message", m, NULL };
		trace_attr_str(s, "genkit:state", "success");
		trace_attr_str(s, "error.type", "tool_error");
		trace_event(s, "exception", ev);
		trace_end(s, TRACE_STATUS_ERROR, m);
		return;
	}
	close_span(s, st, msg);
}

void agent_trace_tool_rejected(const char *tool, const json_t *input, const char *msg)
{
	struct trace_span *s = agent_trace_tool_begin(tool, input);
	int marked = A.failure_marked;
	/* Not the turn's failure: the model is told and goes on. */
	A.failure_marked = 1;
	agent_trace_tool_end(s, CORE_EINVAL, msg, NULL, NULL);
	A.failure_marked = marked;
}

void agent_trace_mcp_start(const char *server, int64_t start_ns, int64_t end_ns,
                           enum core_status st, const char *msg, const json_t *attrs)
{
	char path[PATH_MAX_LEN];
	if (!A.root.s || !start_ns)
		return;
	struct trace_span *s = open_under(&A.root, "mcp.initialize", TRACE_CLIENT, "util", NULL,
	                                  path, start_ns);
	int marked = A.failure_marked;
	trace_attr_str(s, "agentkit.mcp.server", server);
	agent_trace_tool_attrs(s, attrs);
	/* An optional server's failure is not the run's: never its source. */
	A.failure_marked = 1;
	close_span_at(s, st, msg, end_ns);
	A.failure_marked = marked;
}

void agent_trace_tool_attrs(struct trace_span *s, const json_t *attrs)
{
	const char *k;
	const json_t *v;
	json_object_foreach((json_t *)attrs, k, v)
		trace_attr_str(s, k, json_string_value(v));
}

int agent_trace_env(const struct trace_span *s, char out[AGENT_TRACE_ENV_MAX])
{
	char tp[TRACE_PARENT_LEN + 1];
	const struct open_span *p = inner();
	if (!s && p)
		s = p->s;
	if (!s || trace_traceparent(s, tp))
		return -1;
	snprintf(out, AGENT_TRACE_ENV_MAX, "TRACEPARENT=%s", tp);
	return 0;
}

void agent_trace_env_add(const char **env, char buf[AGENT_TRACE_ENV_MAX])
{
	if (!A.root.s || agent_trace_env(A.root.s, buf))
		return;
	while (*env)
		env++;
	env[0] = buf;
	env[1] = NULL;
}
