/*
 * agent_trace.h - Genkit's spans for one invocation of an agent, on the
 * process's span recorder (../base/trace.h).
 *
 * The shapes are Genkit's (go/core/tracing, go/ai/exp/agent.go):
 *  - the root span, named after the agent: genkit:type "action",
 *    genkit:metadata:subtype "agent", genkit:isRoot, genkit:path
 *    "/{NAME,t:action,s:agent}", genkit:metadata:agent:sessionId;
 *  - one span per turn, "runTurn-N" (1-based within the invocation),
 *    genkit:type "flowStep" and no subtype, genkit:metadata:agent:snapshotId
 *    only when the turn wrote a row;
 *  - in a prompt-backed turn, "generate" (genkit:type "util"), and under it
 *    one span per model call (the model's name, t:action,s:model; kind
 *    CLIENT; token usage and finish reason) and one per tool call (the
 *    tool's name, t:action,s:tool; its outcome); the tool loop's second
 *    and later model calls each under a "generate" of their own inside
 *    the previous one's, beside that one's tool calls (Genkit's generate
 *    recurses: JS 1.42, Go);
 *  - a tool call whose result is {"error": "..."}: status ERROR,
 *    error.type "tool_error", an exception event;
 *  - every span: genkit:name, genkit:path, genkit:state success|error; a
 *    failed span has status ERROR with the message, error.type, an
 *    "exception" event, and the innermost one genkit:isFailureSource.
 * The GenAI attributes that need no content ride along on the same spans
 * (gen_ai.operation.name, gen_ai.agent.name, gen_ai.conversation.id,
 * gen_ai.request.model, gen_ai.usage.*, gen_ai.response.finish_reasons,
 * gen_ai.tool.name).  No prompt text, tool input or output is recorded
 * unless content capture is on (agent_trace_options()).
 *
 * Every function is a no-op while tracing is off (trace_on() false), and
 * takes NULL spans.  One invocation per process: the state is the process's.
 * Nothing here prints.
 */
#ifndef AGENT_TRACE_H
#define AGENT_TRACE_H

#include <stdint.h>

#include <jansson.h>

#include "../base/status.h"
#include "../base/trace.h"
#include "../model/model.h"

/* "TRACEPARENT=00-...-01" */
#define AGENT_TRACE_ENV_MAX (TRACE_PARENT_LEN + 16)

/*
 * Before agent_trace_begin().  content (or
 * OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true): record, as JSON
 * strings, genkit:input/genkit:output of model calls (the request's
 * messages, the reply), tool calls (input, output), turns (the committed
 * state: {"state": ...}, as Genkit's turn span) and the invocation (its
 * AgentOutput), each cut at OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT bytes, else
 * AGENT_TRACE_CONTENT_MAX (at a UTF-8 boundary).  semconv: name the
 * spans as the OpenTelemetry GenAI conventions do ("invoke_agent NAME",
 * "chat MODEL", "execute_tool NAME"); genkit:name and genkit:path keep
 * Genkit's.
 */
#define AGENT_TRACE_CONTENT_MAX ((size_t)64 << 10)
void agent_trace_options(int content, int semconv);
/* Whether content is recorded (agent_trace_options()). */
int agent_trace_content(void);

/* The root span, started at start_ns (0: now). */
void agent_trace_begin(const char *agent, const char *model, int64_t start_ns);
/*
 * In a detached worker, right after the fork: the launcher exports its
 * own spans; the worker's root span (the agent's name again, with
 * genkit:metadata:agent:detached) continues the trace as a child of the
 * launcher's root span.  The launcher's open turn, if any, is its own.
 */
void agent_trace_worker(void);
/*
 * The same for a run that detaches in place (the back process of a split
 * run becomes the worker, no fork): the launcher's root span ends now and
 * is flushed, and the worker's root span, its child in the same process,
 * takes over; a turn in flight stays under the launcher's.
 */
void agent_trace_detach_here(void);

/* The session, once settled. */
void agent_trace_session(const char *session_id);
/*
 * End the root span: ERROR with the output's error message when output is
 * a failed or aborted AgentOutput, or, without an output, when st is a
 * failure (an init that failed).  Then the caller calls trace_finish().
 */
void agent_trace_end(enum core_status st, const json_t *output);

/*
 * A turn: begin before it runs; end with the row it wrote (NULL: none),
 * its status and message, and the session state (borrowed; content only,
 * on success).  A turn's spans are exported when the process next does
 * something else: begins another turn (then at once), waits for input
 * (agent_trace_idle()) or exits (trace_finish()).  So a collector sees
 * each turn while a conversation goes on, and a run of one turn sends one
 * request, not one for the turn and another for the root span.
 */
void agent_trace_turn_begin(void);
/* Whether the turn span records content (then agent_trace_turn_end()
 * wants the state; otherwise it is not read and may be NULL). */
int agent_trace_turn_content(void);
void agent_trace_turn_end(const char *snapshot_id, enum core_status st, const char *msg,
                          const json_t *state);
/* The process is about to wait for input: export the turns that ended. */
void agent_trace_idle(void);

/* The "generate" span around a prompt-backed turn's model loop. */
void agent_trace_generate_begin(void);
void agent_trace_generate_end(enum core_status st, const char *msg);

/* One model call with the request's messages (borrowed; content only);
 * end with its outcome and response (NULL or zeroed on failure). */
struct trace_span *agent_trace_model_begin(const char *model, const json_t *messages);
void agent_trace_model_end(struct trace_span *s, enum core_status st, const char *msg,
                           const struct model_response *resp);

/* One tool call with its input (content only); outcome "ok",
 * "interrupted" (interrupt non-NULL), "error" (an {"error": "..."}
 * output: status ERROR, error.type tool_error) or "failed" (then msg);
 * output is recorded with content. */
struct trace_span *agent_trace_tool_begin(const char *tool, const json_t *input);
/* The tool's own span attributes (struct tool's span_attrs: an object of
 * strings, replacing those set; NULL: none), e.g. an MCP tool's mcp.*. */
void agent_trace_tool_attrs(struct trace_span *s, const json_t *attrs);
void agent_trace_tool_end(struct trace_span *s, enum core_status st, const char *msg,
                          const json_t *interrupt, const json_t *output);
/* An MCP server's start-up (spawn or connect, initialize, tools/list),
 * recorded after the fact since it comes before tracing begins: an
 * "mcp.initialize" span (kind CLIENT) under the root span from start_ns
 * to end_ns (core_now_ns() times), agentkit.mcp.server, the attrs (strings:
 * mcp.method.name, mcp.protocol.version, mcp.session.id,
 * network.transport), and its outcome st/msg (a failure never marked as
 * the run's failure source: an optional server's is a warning). */
void agent_trace_mcp_start(const char *server, int64_t start_ns, int64_t end_ns,
                           enum core_status st, const char *msg, const json_t *attrs);
/* A tool call not made, its input failing the tool's schema: a tool span
 * ended at once with INVALID_ARGUMENT and msg (the error the model is
 * given), never marked as the turn's failure source. */
void agent_trace_tool_rejected(const char *tool, const json_t *input, const char *msg);

/*
 * "TRACEPARENT=..." for a child started under span s (NULL: the innermost
 * open span of the invocation: generate, turn, or root) into out; 0 when
 * written, -1 when tracing is off (the child then inherits our
 * environment's TRACEPARENT, if any, unchanged).
 */
int agent_trace_env(const struct trace_span *s, char out[AGENT_TRACE_ENV_MAX]);

/* For a NULL-terminated env_add list with room for one more entry: add
 * the invocation's root span's TRACEPARENT (long-lived co-processes outlive
 * turns).  buf holds the string and must outlive the list. */
void agent_trace_env_add(const char **env, char buf[AGENT_TRACE_ENV_MAX]);

#endif
