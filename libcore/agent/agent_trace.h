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
 *    tool's name, t:action,s:tool; its outcome);
 *  - every span: genkit:name, genkit:path, genkit:state success|error; a
 *    failed span has status ERROR with the message, and the innermost one
 *    genkit:isFailureSource.
 * The GenAI attributes that need no content ride along on the same spans
 * (gen_ai.operation.name, gen_ai.agent.name, gen_ai.conversation.id,
 * gen_ai.request.model, gen_ai.usage.*, gen_ai.response.finish_reasons,
 * gen_ai.tool.name).  No prompt text, tool input or output is recorded.
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

/* "TRACEPARENT=00-...-01" */
#define AGENT_TRACE_ENV_MAX (TRACE_PARENT_LEN + 16)

/* The root span, started at start_ns (0: now). */
void agent_trace_begin(const char *agent, const char *model, int64_t start_ns);
/*
 * In a detached worker, right after the fork: the launcher exports its
 * own spans; the worker's root span (the agent's name again, with
 * genkit:metadata:agent:detached) continues the trace as a child of the
 * launcher's root span.  The launcher's open turn, if any, is its own.
 */
void agent_trace_worker(void);

/* The session, once settled. */
void agent_trace_session(const char *session_id);
/*
 * End the root span: ERROR with the output's error message when output is
 * a failed or aborted AgentOutput, or, without an output, when st is a
 * failure (an init that failed).  Then the caller calls trace_finish().
 */
void agent_trace_end(enum core_status st, const json_t *output);

/* A turn: begin before it runs; end with the row it wrote (NULL: none)
 * and its status and message; the end flushes the ended spans. */
void agent_trace_turn_begin(void);
void agent_trace_turn_end(const char *snapshot_id, enum core_status st, const char *msg);

/* The "generate" span around a prompt-backed turn's model loop. */
void agent_trace_generate_begin(void);
void agent_trace_generate_end(enum core_status st, const char *msg);

/* One model call; end with its outcome (finish_reason and usage may be
 * NULL). */
struct trace_span *agent_trace_model_begin(const char *model);
void agent_trace_model_end(struct trace_span *s, enum core_status st, const char *msg,
                           const char *finish_reason, const json_t *usage);

/* One tool call; outcome "ok", "interrupted" or "failed" (then msg). */
struct trace_span *agent_trace_tool_begin(const char *tool);
void agent_trace_tool_end(struct trace_span *s, enum core_status st, const char *msg,
                          int interrupted);

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
