/*
 * session.h - the live session of one invocation: its SessionState
 * (messages, custom state, artifacts), its identity (session ID, the
 * resume point, the row reserved for the turn in flight, the turn index),
 * the customPatch emitter and the chunk sink (runtime-semantics §3, §5).
 *
 * Everything that edits a session during a turn talks to it through this
 * header, as Genkit's Session methods: the prompt-backed turn
 * (runtime_loop.c), custom agents (custom_agent.h), the agent's extensions
 * (agent_ext.h), the state transform that shapes customPatch values.  The
 * runner (runtime.h) owns the session and decides when a turn begins and
 * commits; nothing here knows the runner.
 *
 * It also shapes snapshot rows (session_row()): the one place that knows a
 * SessionSnapshot's members and their order, for the rows the runner
 * commits and the pending and final rows of detached runs (detach.h).
 *
 * Ownership: struct session owns its state and IDs; the agent, the sink's
 * and the stop's contexts, and the state transform are borrowed.  Values
 * passed in are copied (or consumed where noted); values returned are
 * borrowed unless noted.  Nothing here prints or exits; errors are
 * enum core_status with a struct core_err.
 */
#ifndef CORE_SESSION_H
#define CORE_SESSION_H

#include <stddef.h>

#include <jansson.h>

#include "../base/status.h"

struct agent;
struct transform;

struct session_config {
	const struct agent *agent;      /* the agent this session runs */
	/* Where chunks ({key: value} AgentStreamChunks) go, borrowed for the
	 * call; NULL drops them.  Its return value is the sink's business. */
	enum core_status (*chunk)(void *ctx, const json_t *chunk);
	void *chunk_ctx;
	/* The caller's stop (non-zero: stop), or NULL. */
	int (*cancelled)(void *ctx);
	void *cancel_ctx;
	/* The agent's state transform (transform.h), or NULL: customPatch
	 * values are then computed from its view of the state (§3.6). */
	struct transform *state_tf;
};

struct session;

/* An empty session (no state until session_load()).  CORE_ENOMEM only. */
enum core_status session_new(const struct session_config *cfg, struct session **out,
                             struct core_err *e);
void session_free(struct session *s);   /* NULL is a no-op */
/* The process ends after session_free(s): its state (the history) is left
 * to the kernel unless CORE_EXIT_FREES (util.h).  NULL is a no-op. */
void session_leave_at_exit(struct session *s);

/*
 * Give the session its state and identity: state (consumed; NULL: an
 * empty one), the session ID (NULL or "": a new UUID), the row it resumes
 * (NULL: none) and how many leading messages of state are that row's,
 * unchanged.  The state's sessionId is stamped and its messages array
 * made.  CORE_ENOMEM only.
 */
enum core_status session_load(struct session *s, json_t *state, const char *session_id,
                              const char *resumed_id, size_t base_kept, struct core_err *e);

/*
 * A long session resumed without its history (STORE_LAST_MESSAGE): the
 * state holds the row's last message alone, and before messages precede
 * it in the row.  They are loaded when something asks for the whole
 * history (session_state(), session_messages()), by load(ctx, n, &msgs,
 * e): the first n messages of the resume point (session_parent_id()),
 * a new reference.  Until then a turn reads and adds to the loaded part
 * (session_loaded_messages()), and its row is written as an append
 * (session_appended()).  A load that failed leaves the history as it was
 * and is reported once by session_history_error().
 */
void session_defer_history(struct session *s, size_t before,
                           enum core_status (*load)(void *ctx, size_t n, json_t **msgs,
                                                    struct core_err *e),
                           void *ctx);
/* How many messages are not loaded (0: the whole history is). */
size_t session_messages_before(const struct session *s);
/* The loaded messages: the whole history unless deferred. */
json_t *session_loaded_messages(struct session *s);
/* The last message, or NULL; never loads the history. */
const json_t *session_last_message(const struct session *s);
/* The state as loaded: its members but messages are whole (for custom
 * and artifacts); never loads the history. */
const json_t *session_state_loaded(const struct session *s);
/* A deferred history's load failure (CORE_OK: none), its message in e. */
enum core_status session_history_error(const struct session *s, struct core_err *e);

const struct agent *session_agent(const struct session *s);
const char *session_id(const struct session *s);
/* The live SessionState {artifacts?, custom?, messages, sessionId}; a
 * deferred history is loaded first. */
const json_t *session_state(const struct session *s);
/* Its messages array (always there after session_load()); a deferred
 * history is loaded first. */
json_t *session_messages(struct session *s);

/*
 * A SessionState as persisted and returned: its members in Go's order
 * (artifacts, custom unless null, messages), this session's ID stamped,
 * then usage when it has any.
 * New reference, children shared with state; NULL without memory.
 */
json_t *session_shaped(const struct session *s, const json_t *state);

/* ---- usage ---- */

/*
 * A model call's GenerationUsage (borrowed): its numbers are added to
 * this invocation's usage, the turn in flight's (cleared by
 * session_turn_begin()) and the state's cumulative "usage" (Genkit's
 * SessionState.usage, carried from the row or state resumed).  A call
 * that reports inputTokens and outputTokens but no totalTokens counts
 * their sum as its total.  Without memory a sum is left as it was.
 */
void session_add_usage(struct session *s, const json_t *usage);
/* sum += u, number by number (custom's members one level deep). */
void session_sum_usage(json_t *sum, const json_t *u);
/* This invocation's usage, the turn in flight's; borrowed, maybe empty. */
const json_t *session_run_usage(const struct session *s);
const json_t *session_turn_usage(const struct session *s);

/* ---- identity and the turn in flight ---- */

/* The resume point: the last committed row, or the resumed one; NULL or
 * "" when there is none. */
const char *session_parent_id(const struct session *s);
/* The row reserved for the turn in flight, or NULL (no store). */
const char *session_snapshot_id(const struct session *s);
long session_turn_index(const struct session *s);
/* How many leading messages are the resume point's, unchanged: what the
 * store need not compare again (store_save_on()). */
size_t session_base_kept(const struct session *s);
/* With a deferred history: the state to write as STORE_APPEND, its
 * messages those after session_base_kept() (new reference); NULL when
 * the history is whole, or without memory. */
json_t *session_appended(const struct session *s);
/* {sessionId, snapshotId, parentSnapshotId, turnIndex} (new reference). */
json_t *session_context(const struct session *s);

/* A turn begins (§3.1): the next customPatch is a whole replace, and with
 * reserve a new row ID is reserved.  CORE_ENOMEM only. */
enum core_status session_turn_begin(struct session *s, int reserve, struct core_err *e);
/* A turn ends: written (NULL: none) is the row it committed, which becomes
 * the resume point; the turn index goes on.  CORE_ENOMEM only. */
enum core_status session_turn_end(struct session *s, const char *written, struct core_err *e);

/* ---- edits (Genkit's Session methods) ---- */

/* AddMessages: a copy of message, members in Go's order. */
void session_add_message(struct session *s, const json_t *message);
/* SetMessages: copies of messages, members in Go's order. */
void session_set_messages(struct session *s, const json_t *messages);
/* A Message with its members in Go's order (content, metadata, role, then
 * anything else); new reference, children shared. */
json_t *session_message_ordered(const json_t *m);
/* The history after a prompt-backed turn (consumed, taken as it is): it
 * replaces the loaded messages (a deferred history stays before them). */
void session_put_messages(struct session *s, json_t *messages);

/*
 * The custom value: a new value (is_patch 0), or a JSON Patch applied to
 * a copy of it; nothing is emitted.  A patch that does not apply leaves
 * the value as it was and returns jpatch_apply()'s status and message.
 */
enum core_status session_apply_custom(struct session *s, const json_t *value, int is_patch,
                                      struct core_err *e);
/*
 * The custom value changed: emit its customPatch chunk (the whole value
 * after session_turn_begin(), then diffs from the value last emitted).
 * The value diffed is the state transform's view when there is one; a
 * transform failure is returned (fail closed) and nothing is emitted.
 */
enum core_status session_custom_changed(struct session *s, struct core_err *e);
/* UpdateCustom as a custom agent's handler asks it: the two above, a
 * patch that does not apply being CORE_EINVAL (or CORE_ENOMEM). */
enum core_status session_update_custom(struct session *s, const json_t *value, int is_patch,
                                       struct core_err *e);

/* SendArtifact: same-name artifacts replace in place, unnamed ones
 * append; emits the artifact chunk. */
void session_add_artifact(struct session *s, const json_t *artifact);

/* Emit one chunk {key: value}; value is consumed. */
void session_emit(struct session *s, const char *key, json_t *value);
/* From now on chunks are dropped (a detached run). */
void session_mute(struct session *s);
/* The caller's stop (session_config.cancelled); s is a struct session *. */
int session_cancelled(void *s);

/* The session's title: its first user text, blanks folded, cut at 72
 * bytes on a character boundary with an ellipsis; NULL when there is no
 * user text.  New reference. */
json_t *session_title(struct session *s);

/* ---- snapshot rows ---- */

/*
 * The members of a SessionSnapshot row.  NULL (or "" for parent_id and
 * finish_reason) leaves a member out.  JSON values are shared with the
 * row, which the store reads and never changes.
 */
struct session_row {
	const char *created_at, *heartbeat_at, *updated_at;     /* core_time_format() */
	const json_t *error;            /* {status, message} */
	const char *finish_reason;
	const char *parent_id, *session_id, *snapshot_id;
	const json_t *state;            /* as session_shaped() makes it */
	const char *status;             /* pending, completed, failed, aborted */
	const json_t *info;             /* what the store keeps beside (STORE_INFO_KEY) */
};

/* The row, its members in SessionSnapshot's order (Go's field order), the
 * info last.  New reference; NULL without memory. */
json_t *session_row(const struct session_row *r);

#endif
