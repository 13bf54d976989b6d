/*
 * custom_agent.h - custom agents (Genkit's DefineCustomAgent) as a
 * co-process: agent-run --exec CMD, or `exec:` in a prompt's front matter.
 *
 * The handler command owns the per-turn loop; agentkit keeps the runtime
 * shell (session state, turn pacing, snapshots, detach, abort).  The
 * handler is started (coproc.h: /bin/sh -c, provider keys removed) at the
 * first turn and stays up for the invocation.  The protocol, NDJSON both
 * ways, is written down in docs/custom-agents.md:
 *
 *   agentkit -> handler
 *     {"turn": {"input": AgentInput, "context": {sessionId, snapshotId,
 *               parentSnapshotId, turnIndex}, "state": SessionState,
 *               "docs"?: [Document]}}
 *     {"generateChunk": ModelResponseChunk}     (a streamed generate)
 *     {"generated": {"message", "finishReason", "usage"?} | {"error"}}
 *     {"stop": {"reason": "aborted"}}           (then stdin closes)
 *     end of stdin: no more turns
 *
 *   handler -> agentkit, during a turn
 *     {"modelChunk": chunk}  {"artifact": Artifact}  {"message": Message}
 *     {"messages": [Message]}  {"custom": VALUE}  {"customPatch": [ops]}
 *     {"generate": {"model"?, "messages"?, "config"?, "tools"?,
 *                   "stream"?, "forward"?}}
 *     then {"done": {"finishReason"?}}  or
 *          {"fail": {"status"?, "message", "committed"?, "continue"?}}
 *   after end of stdin: optionally {"result": AgentResult}, then exit 0.
 *
 * A handler that exits or closes its pipes early, does not answer within
 * the timeout, writes a malformed or unknown line, or exits non-zero at the
 * end fails the invocation (INTERNAL, or DEADLINE_EXCEEDED for the
 * timeout) with its stderr head in the message; the failed turn is not
 * committed, so the output names the last committed resume point.
 *
 * Ownership: struct custom_agent owns the handler process;
 * custom_agent_free() stops it (stdin closed, grace, SIGTERM, SIGKILL).
 * Nothing here prints or exits.
 */
#ifndef CORE_CUSTOM_AGENT_H
#define CORE_CUSTOM_AGENT_H

#include <stdint.h>

#include <jansson.h>

#include "../base/coproc.h"
#include "../base/status.h"

/* Default wait for the handler's next line; AGENTKIT_EXEC_TIMEOUT. */
#define CUSTOM_AGENT_DEFAULT_TIMEOUT_MS 300000

struct custom_agent;
struct session;

/* How a turn ended (copied into the runner's turn result). */
struct ca_outcome {
	int committed;          /* the turn's state is kept (a row is written) */
	int keep_going;         /* a failed turn that does not end the invocation */
	char reason[32];        /* finish reason of a successful turn */
	struct core_err err;    /* err.st: CORE_OK or the failure's status */
};

/* Default caps on the handler's stdout in one turn (and after the last
 * turn); AGENTKIT_EXEC_MAX_BYTES, AGENTKIT_EXEC_MAX_LINES. */
#define CUSTOM_AGENT_DEFAULT_MAX_BYTES ((size_t)64 << 20)
#define CUSTOM_AGENT_DEFAULT_MAX_LINES ((size_t)100000)

/* timeout_ms <= 0: CUSTOM_AGENT_DEFAULT_TIMEOUT_MS.  max_bytes, max_lines
 * (0: the defaults) cap what the handler writes in one turn: more fails
 * the turn (INTERNAL) and stops the handler.  CORE_ENOMEM only. */
enum core_status custom_agent_new(const char *cmd, int64_t timeout_ms, size_t max_bytes,
                                  size_t max_lines, struct custom_agent **out,
                                  struct core_err *e);
void custom_agent_free(struct custom_agent *ca);        /* NULL is a no-op */

/*
 * Run one turn: the input (already appended to the history by the
 * runner), docs (grounding documents, or NULL) and the live session s
 * (session.h), which the handler's lines edit.
 * The outcome is always filled; after a protocol failure the handler is
 * stopped and later turns fail at once.  The caller's stop (session_cancelled():
 * SIGINT, abort) is polled while waiting: the handler is told to stop,
 * then stopped, and the turn ends aborted, uncommitted.
 */
void custom_agent_turn(struct custom_agent *ca, struct session *s, const json_t *input,
                       const json_t *docs, struct ca_outcome *out);

/*
 * The end of the invocation: close the handler's stdin, read its optional
 * {"result": AgentResult} (*result, new reference, or NULL) and wait for
 * it to exit 0.  ok_so_far 0 (the invocation already failed) just stops
 * it.  Errors as for a turn (CORE_EINTERNAL, CORE_EDEADLINE) with e.
 */
enum core_status custom_agent_finish(struct custom_agent *ca, int ok_so_far, json_t **result,
                                     struct core_err *e);

#endif
