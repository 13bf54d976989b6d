/*
 * agent_ext.h - what an agent adds to the prompt loop: a custom-agent
 * handler (--exec, custom_agent.h), state and stream transforms
 * (transform.h), grounding documents (--docs), and the agent's descriptor
 * and listing.
 *
 * Each comes from a flag or, failing that, the prompt's front matter:
 *
 *   flag                    front matter       Genkit
 *   --exec CMD              exec: CMD          DefineCustomAgent
 *   --state-transform CMD   stateTransform:    WithStateTransform
 *   --stream-transform CMD  streamTransform:   WithStreamTransform
 *   --docs CMD              docs: CMD          WithDocsFn
 *                           stateSchema:       AgentMetadata.stateSchema
 *
 * Timeouts: AGENTKIT_EXEC_TIMEOUT (the wait for a handler's next line,
 * default 5m) and AGENTKIT_TRANSFORM_TIMEOUT (per transform line and per
 * retrieval, default 30s).  Output caps: AGENTKIT_EXEC_MAX_BYTES and
 * AGENTKIT_EXEC_MAX_LINES (a handler's stdout in one turn, default 64M and
 * 100000), AGENTKIT_TRANSFORM_MAX_LINE (one transform answer, default
 * 64M); a retrieval command's output is capped at 64 MiB.
 *
 * Grounding: before each prompt-backed turn the retrieval command gets the
 * conversation (an array of Messages, this turn's question last) as JSON on
 * stdin and prints documents: a JSON array of Documents ({"content":
 * [parts], "metadata"?}) or strings.  As Genkit's augmentWithContext
 * middleware does, the request's last user message gets one more text part,
 * "\n\nUse the following information to complete your task:\n\n- [i]:
 * TEXT\n...\n" with metadata {"purpose": "context"} ([ref] or [id] from a
 * document's metadata when present).  The part is in the model request
 * only, not in the session.  Custom agents get the documents in the turn
 * line.  A failing retrieval fails the turn (uncommitted).
 *
 * Ownership: struct agent_ext owns its handler, transforms and the turn's
 * documents; agent_ext_free() stops the processes.  Nothing here prints or
 * exits.
 */
#ifndef CORE_AGENT_EXT_H
#define CORE_AGENT_EXT_H

#include <jansson.h>

#include "custom_agent.h"
#include "../base/status.h"

struct agent;
struct session;
struct transform;

/* The flags (NULL when not given). */
struct agent_ext_spec {
	const char *exec, *docs, *state_transform, *stream_transform;
};

struct agent_ext;

/*
 * Read the spec and a's front matter.  Errors: CORE_EINVAL (a front-matter
 * key of the wrong type, an unreadable stateSchema file, named with the
 * prompt file), CORE_EUSAGE (a bad timeout variable), CORE_ENOMEM.
 */
enum core_status agent_ext_load(const struct agent *a, const struct agent_ext_spec *spec,
                                struct agent_ext **out, struct core_err *e);
void agent_ext_free(struct agent_ext *x);       /* NULL is a no-op */

/*
 * The caller's stop, cancelled(ctx) (a stop signal, a detached run's
 * abort), for the commands that have none of their own: the retrieval
 * command (--docs) ends at once, killed, failing the turn CANCELLED; each
 * transform has TRANSFORM_STOP_GRACE_MS more to answer
 * (transform_set_cancel()).  A custom agent's handler takes the session's
 * (custom_agent.h).  Set before the first turn; without it each wait is
 * bounded by its timeout only.
 */
void agent_ext_set_cancel(struct agent_ext *x, int (*cancelled)(void *ctx), void *ctx);

/* Whether the agent is a custom agent (exec). */
int agent_ext_is_custom(const struct agent_ext *x);
/* Whether a custom agent, a state transform or a retrieval command reads
 * the conversation (NULL x: none does). */
int agent_ext_reads_history(const struct agent_ext *x);
/* The state transform, or NULL (borrowed). */
struct transform *agent_ext_state_transform(struct agent_ext *x);
/* The custom agent, or NULL (borrowed). */
struct custom_agent *agent_ext_custom(struct agent_ext *x);

/* ---- hooks of the runner (runtime.h) ---- */

/* A custom agent's turn on the live session s (grounding first when
 * configured). */
void agent_ext_turn(struct agent_ext *x, struct session *s, const json_t *input,
                    struct ca_outcome *out);

/* Fetch this turn's documents for history (no-op without --docs). */
enum core_status agent_ext_ground(struct agent_ext *x, const json_t *history,
                                  struct core_err *e);

/* Add the turn's documents to the last user message of a model request
 * (the message and its content are replaced by copies). */
void agent_ext_augment(struct agent_ext *x, json_t *messages);

/* Non-zero (e filled) once a transform has failed closed; one that the
 * caller's stop ended (CORE_ECANCELLED) does not count: the stop decides
 * the outcome. */
int agent_ext_failed(struct agent_ext *x, struct core_err *e);

/* ---- hooks of agent-run and detached runs ---- */

/*
 * The stream transform on one chunk: *out the chunk to forward (new
 * reference) or NULL to drop it.  Without a transform *out is the chunk.
 * After a failure every call fails (nothing more is forwarded).
 */
enum core_status agent_ext_chunk(struct agent_ext *x, const json_t *chunk, json_t **out,
                                 struct core_err *e);

/*
 * The end of the invocation (rt_finish()): a custom agent's handler is
 * finished (its result kept for agent_ext_output; ok 0, the invocation
 * already failed, just stops it).  When ok, a handler or transform
 * failure is returned with e: the invocation then fails with it.
 */
enum core_status agent_ext_finish(struct agent_ext *x, int ok, struct core_err *e);

/*
 * Shape the final AgentOutput: a custom agent's AgentResult overrides
 * (message, artifacts, finishReason) on a successful output, then the
 * state transform on a client-managed state.  Returns non-OK with e when
 * a failed output's state had to be omitted (for a warning).
 */
enum core_status agent_ext_output(struct agent_ext *x, json_t *output, struct core_err *e);

/* ---- agent-snap -a AGENT (getSnapshot through the state transform) ---- */

/*
 * The extensions of agent NAME (looked up as agent-run does, agents_dir
 * first); errors as agent_load() and agent_ext_load().
 */
enum core_status agent_ext_snap_open(const char *name, const char *agents_dir,
                                     struct agent_ext **out, struct core_err *e);

/*
 * A shaped snapshot row as a client reads it: its "state" through the
 * agent's state transform (sessionId re-stamped; removed when the
 * transform answers null).  No transform, or no state: unchanged.  A
 * transform error fails the read with its status (§7.1).
 */
enum core_status agent_ext_snap_row(struct agent_ext *x, json_t *row, struct core_err *e);

/* ---- descriptors ---- */

/*
 * The descriptor (agent-run --describe): {name, description?, model?,
 * tools: [{name, description, inputSchema, outputSchema?}], maxTurns,
 * metadata: {description?, agent: {stateManagement, abortable?,
 * stateSchema?}}} plus "custom": true for a custom agent.  Tools are
 * loaded from the agent's tool directories (CORE_ENOTFOUND if missing).
 */
enum core_status agent_ext_describe(const struct agent *a, const struct agent_ext *x,
                                    int server_managed, json_t **out, struct core_err *e);

/*
 * The agents on the agent path (agents_dir, $AGENTKIT_PATH, ./agents):
 * an array of {name, description?, path} sorted by name, the first
 * directory's file winning; a file that does not load is listed with
 * "error" instead of a description.
 */
enum core_status agent_ext_list(const char *agents_dir, json_t **out, struct core_err *e);

#endif
