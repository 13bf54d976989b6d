/*
 * runtime.h - the session runner: Genkit's agent turn loop for one
 * invocation of an agent (runtime-semantics §1-4).
 *
 * One struct runtime is one invocation: rt_open() validates the AgentInit
 * and loads the session (a stored snapshot, the latest row of a session, a
 * client-managed state, or nothing), rt_turn() runs one AgentInput as one
 * turn, and rt_output() is the invocation's AgentOutput.  Chunks
 * (AgentStreamChunk objects: modelChunk, customPatch, artifact, turnEnd)
 * are handed to the sink as they happen, in order.
 *
 * A turn of a prompt-backed agent renders the prompt with the history
 * (inline agents: the system text, then the history), calls the model,
 * runs the tools it requests (in parallel, tools.h) until it stops or
 * maxTurns rounds have run, and commits the session; with a store, each
 * committed turn writes exactly one snapshot row under the ID reserved
 * before the turn.  A failed turn ends the invocation: the output is
 * failed (or aborted) and carries the resume point (last committed
 * snapshot ID, or the last-good client state).
 *
 * The live session (its state, chunks and customPatch) is a struct
 * session (session.h), which the runner owns and hands to the agent's
 * extensions for a custom agent's turn; they never see the runner.
 *
 * Nothing here prints or exits.  A snapshot write that failed is no
 * warning but the invocation's end: a failed output, rt_exit_status()
 * CORE_ESYS.
 */
#ifndef CORE_RUNTIME_H
#define CORE_RUNTIME_H

#include <jansson.h>

#include "agent.h"
#include "../base/status.h"

struct store;

struct rt_sink {
	/* One AgentStreamChunk (borrowed for the call).  A non-OK return is
	 * remembered (rt_sink_status()) but the turn goes on, so its snapshot
	 * still lands. */
	enum core_status (*chunk)(void *ctx, const json_t *chunk);
	/* A message for people (may be NULL; nothing in the runtime sends
	 * one today). */
	void (*warn)(void *ctx, const char *msg);
	void *ctx;
};

struct rt_config {
	const struct agent *agent;
	struct store *store;        /* NULL: client-managed state */
	const char *store_location; /* where store is, for sub-agents (delegate.h) */
	const json_t *init;         /* AgentInit {sessionId?, snapshotId?, state?} or NULL */
	const struct rt_sink *sink;
	int64_t heartbeat_timeout_ms; /* staleness threshold for pending rows (0: 60 s) */
	/* Polled before each turn and while one runs (model streams, tool
	 * calls): non-zero means the caller stopped the work (a signal, a
	 * closed stdout, the abort flip of a detached run; runtime-semantics
	 * §2.5).  A turn in flight then ends "aborted" with a CANCELLED error.
	 * May be NULL.  Called from the thread that runs the turn. */
	int (*cancelled)(void *ctx);
	void *cancel_ctx;
	/* Custom agent, transforms, grounding (agent_ext.h), or NULL;
	 * borrowed. */
	struct agent_ext *ext;
	/* One writer per session: resuming a session's latest (a session ID
	 * without a snapshot ID) first takes the session's writer lock
	 * (store_session_lock()), held until rt_free(), waiting for it at
	 * most busy_timeout_ms (RT_BUSY_WAIT), not at all (RT_BUSY_FAIL:
	 * CORE_EPRECONDITION "session \"S\" is busy ..."), or not taking it
	 * (RT_BUSY_FORK: Genkit's own store semantics, every writer forks
	 * the latest it read).  A wait that runs out is CORE_ETIMEOUT. */
	enum rt_busy { RT_BUSY_WAIT, RT_BUSY_FAIL, RT_BUSY_FORK } on_busy;
	int64_t busy_timeout_ms;
	/* A queued run's own pending row (agent-worker claimed it; NULL:
	 * none): a session's latest that is this row is no row to resume,
	 * so a run queued on a new session starts it afresh.  Borrowed. */
	const char *claimed_id;
};

struct runtime;

/*
 * Validate the init (§4.1, §4.2) and load the session; load the agent's
 * tools.  Errors are init failures (the invocation never starts): their
 * status and Genkit's message are in e (CORE_EINVAL, CORE_EPRECONDITION,
 * CORE_ENOTFOUND, CORE_EINTERNAL, CORE_ESYS...).
 */
enum core_status rt_open(const struct rt_config *cfg, struct runtime **out,
                         struct core_err *e);
void rt_free(struct runtime *rt);       /* NULL is a no-op */
/* The process ends after rt_free(rt): the history is left to the kernel
 * (session_leave_at_exit()).  NULL is a no-op. */
void rt_leave_at_exit(struct runtime *rt);
/* Release the session's writer lock now (rt_config's on_busy), before the
 * store it was taken on is closed; rt_free() does it otherwise.  A
 * process that inherited the runtime across fork() releases nothing (the
 * lock is its parent's) and forgets it. */
void rt_unlock_session(struct runtime *rt);
/*
 * The createdAt (ns) of the next row of the session: now, or 1 us after
 * the row it follows when this host's clock reads earlier (a host behind
 * the one that wrote the parent).  Latest is the greatest createdAt
 * (Genkit's rule), so a turn never sorts before the row it continues,
 * whatever the hosts' clocks say.
 */
int64_t rt_next_created_ns(struct runtime *rt);

/*
 * Check an AgentInput's shape (object; only detach, message, resume; typed
 * members).  CORE_EINVAL with a message; the caller adds the line.
 */
enum core_status rt_input_check(const json_t *input, struct core_err *e);

/*
 * Run one input as one turn.  Returns CORE_OK while the invocation goes on
 * (the turn completed, or was interrupted / stopped by length); any other
 * value means the invocation has ended (a failed or aborted turn) and
 * rt_output() is the failed output.  Inputs after the end are ignored.
 */
enum core_status rt_turn(struct runtime *rt, const json_t *input);

/*
 * End the invocation with a failure that is not a turn's (a malformed
 * input line): the output becomes a failed output with this error.
 */
void rt_fail(struct runtime *rt, enum core_status st, const char *msg);

/*
 * The end of the invocation, before rt_output(): a custom agent's handler
 * is finished (its result kept for agent_ext_output()), and a transform or
 * handler failure turns an invocation still good into a failed one
 * (agent_ext_finish()).  No-op without extensions.
 */
void rt_finish(struct runtime *rt);

/* The invocation's AgentOutput (new reference); NULL without memory. */
json_t *rt_output(const struct runtime *rt);

/* The session ID (settled by rt_open, stable for the invocation). */
const char *rt_session_id(const struct runtime *rt);

/* Token/character usage summed over the model calls (borrowed; may be an
 * empty object). */
const json_t *rt_usage(const struct runtime *rt);

/*
 * What the row of the turn just run records beside Genkit's shape (store.h,
 * STORE_INFO_KEY): {"agent", "model", "title", "usage" (this turn's; once
 * detached, the invocation's), "sessionUsage" (the state's cumulative
 * usage), "input" (once the invocation ended in a
 * turn that did not commit, as a detached worker's last row records it:
 * that turn's user text, at most RT_INPUT_MAX bytes, ended " [...]" when
 * cut)}.  A new reference, or NULL when out of memory.
 */
json_t *rt_row_info(struct runtime *rt);

/*
 * The status an AgentOutput stands for, core_outcome_exit() of its error's
 * status and its finish reason: CORE_OK (stop, other, unknown or empty),
 * CORE_UNUSABLE (length, blocked), CORE_INTERRUPTED, CORE_ABORTED, and for
 * failed outputs CORE_FAILED - or CORE_EINVAL, CORE_ENOTFOUND,
 * CORE_EPRECONDITION when the error's status is INVALID_ARGUMENT,
 * NOT_FOUND or FAILED_PRECONDITION (bad input, a missing tool or model, a
 * wrong mode).
 */
enum core_status rt_output_status(const json_t *output);

/*
 * The status the invocation's output stands for, for the exit code:
 * core_outcome_exit() of the status that ended it (so CORE_FAILED when a
 * provider refused a model call: CORE_EREJECTED's INVALID_ARGUMENT is no
 * malformed input of the caller, nor CORE_EUNMET's FAILED_PRECONDITION
 * agentkit's), CORE_ESYS (or CORE_ENOMEM) when a system failure ended it
 * - a turn whose snapshot could not be written (a full disk), a pending
 * row that could not be saved, rt_fail() with either status - and
 * rt_output_status() of an output that did not end the invocation.
 */
enum core_status rt_exit_status(const struct runtime *rt, const json_t *output);

/* ---- detach and caller stops (runtime-semantics §2; libcore/agent/detach.h) ---- */

/*
 * Detach the invocation (§2.2 step 3, §1.2): from now on no turn-end rows
 * are written and no chunks reach the sink (warnings still do); the state
 * at each committed turn is kept for the finalize (rt_committed_state).
 * store replaces the store handle: a worker re-opens the store after fork
 * and the parent's handle must never be used again.
 */
void rt_detach(struct runtime *rt, struct store *store);

/*
 * rt_detach() from inside the turn in flight (a detach line read while it
 * runs, §2.1), keeping the store handle: the turn goes on, its chunks are
 * dropped and its row is not written.  Until a turn commits,
 * rt_committed_state() is the state of the last committed row (read from
 * the store) or, without one, the initial empty state: an unfinished turn
 * rolls back to it.  Call it on the thread that runs the turn (the
 * cancelled() callback).
 */
void rt_detach_turn(struct runtime *rt);

/*
 * Whether the run's usage budget is spent: some count of this
 * invocation's usage (its sub-agents' included) is at or over its limit,
 * agent->max_usage or, for a sub-agent, what its parent had left
 * (delegate_parent_budget()).  Then 1, with "usage budget spent: 120 of
 * 100 totalTokens (...)" in msg (size bytes).
 */
int rt_budget_spent(const struct runtime *rt, char *msg, size_t size);
/* What is left of that budget, {"totalTokens": N, ...} with N >= 0 (new),
 * or NULL for no budget (or no memory). */
json_t *rt_budget_left(const struct runtime *rt);

/* The session's last message: the resumed row's until a turn runs, then
 * the last turn's; NULL when there is none.  Borrowed. */
const json_t *rt_last_message(const struct runtime *rt);
/* The finish reason of the last turn run ("" before any). */
const char *rt_last_reason(const struct runtime *rt);

/* The resume point: the last committed row, or the resumed one; NULL when
 * there is none.  Borrowed. */
const char *rt_last_snapshot_id(const struct runtime *rt);

/* The state a detached run finalizes with (§2.3 committedState): the state
 * at its last committed turn, rolled back past an unfinished one, shaped as
 * persisted (sessionId stamped).  New reference; NULL without memory, or
 * (after rt_detach_turn()) when the last committed row cannot be read. */
json_t *rt_committed_state(const struct runtime *rt);

/* End the invocation as a caller stop between turns (§2.5): the output is
 * aborted with a CANCELLED error, resume point unchanged. */
void rt_abort(struct runtime *rt);

#endif
