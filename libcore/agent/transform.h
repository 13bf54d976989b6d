/*
 * transform.h - state and stream transforms as NDJSON filters
 * (Genkit's WithStateTransform / WithStreamTransform, runtime-semantics §7).
 *
 * A transform is a command (coproc.h: /bin/sh -c, provider keys removed)
 * that stays up for the invocation and answers every line agentkit writes
 * with exactly one line:
 *
 *   in:  one JSON value (a SessionState for a state transform, an
 *        AgentStreamChunk for a stream transform)
 *   out: the transformed value (an object), or null to omit the state /
 *        drop the chunk, or {"error": {"status": NAME, "message": TEXT}} to
 *        fail with Genkit's status NAME (PERMISSION_DENIED, ...).
 *
 * It fails closed: a non-zero exit, a closed pipe, a malformed, non-object
 * or missing line, or no answer within the timeout is a failure (INTERNAL,
 * or DEADLINE_EXCEEDED for the timeout) whose message names the command,
 * how it ended and the head of its stderr.  After a failure the command is
 * stopped and every later call fails with the same error.  The command is
 * started on first use.  `jq --unbuffered -c 'del(.custom.secret)'` is a
 * state transform.
 *
 * Ownership: struct transform owns its command; transform_free() ends it
 * (stdin closed, then SIGTERM/SIGKILL after a grace) and frees.  Values
 * returned through out parameters are new references.
 */
#ifndef CORE_TRANSFORM_H
#define CORE_TRANSFORM_H

#include <stdint.h>

#include <jansson.h>

#include "../base/status.h"

/* Default per-line timeout; AGENTKIT_TRANSFORM_TIMEOUT overrides it. */
#define TRANSFORM_DEFAULT_TIMEOUT_MS 30000
/* How long a transform still has to answer once the caller stopped the
 * run (transform_set_cancel()). */
#define TRANSFORM_STOP_GRACE_MS 500

struct transform;

/* Default cap on one answer (its line, and blank lines before it);
 * AGENTKIT_TRANSFORM_MAX_LINE. */
#define TRANSFORM_DEFAULT_MAX_LINE ((size_t)64 << 20)

/*
 * A transform running cmd.  kind names it in messages ("state transform",
 * "stream transform").  timeout_ms <= 0 means TRANSFORM_DEFAULT_TIMEOUT_MS;
 * max_line 0 means TRANSFORM_DEFAULT_MAX_LINE: a longer answer fails
 * closed (INTERNAL).  Only CORE_ENOMEM can fail here.
 */
enum core_status transform_new(const char *kind, const char *cmd, int64_t timeout_ms,
                               size_t max_line, struct transform **out, struct core_err *e);
void transform_free(struct transform *t);       /* NULL is a no-op */

/*
 * The caller's stop: cancelled(ctx) (NULL: none) is polled at least every
 * 50 ms while the transform is written to or waited for.  A stop does not
 * end an answer at once (the aborted run's last chunks and its final
 * output still go through a transform that answers): from the stop on,
 * or from the start of a line written after it, the transform has
 * TRANSFORM_STOP_GRACE_MS to answer instead of the rest of its timeout;
 * then it fails closed, CORE_ECANCELLED "... did not answer within 500 ms
 * of the stop".
 */
void transform_set_cancel(struct transform *t, int (*cancelled)(void *ctx), void *ctx);

/* Non-zero once the transform has failed closed; e (may be NULL) gets the
 * failure. */
int transform_failed(const struct transform *t, struct core_err *e);

/* The command line (borrowed). */
const char *transform_command(const struct transform *t);

/*
 * Send in, read the answer: *out is the transformed object, or NULL when
 * the command answered null.  Errors: the status of an {"error"} answer
 * with its message, CORE_EINTERNAL, CORE_EDEADLINE, CORE_ECANCELLED (a
 * stop, transform_set_cancel()), CORE_ESYS, CORE_ENOMEM.
 */
enum core_status transform_apply(struct transform *t, const json_t *in, json_t **out,
                                 struct core_err *e);

/*
 * The client's view of a SessionState: a deep copy through the transform,
 * sessionId re-stamped (when session_id is not NULL).  *out NULL when the
 * transform omitted it.  Errors as transform_apply().
 */
enum core_status transform_state(struct transform *t, const json_t *state,
                                 const char *session_id, json_t **out,
                                 struct core_err *e);

/*
 * Apply a state transform to a client-managed AgentOutput in place
 * (runtime-semantics §3.3, §7.1).  On a successful output a transform
 * error turns it into a failed output carrying the error and no state
 * (message and artifacts removed), an aborted one with the caller stop's
 * CANCELLED "context canceled" when the error is a stop's (the run was
 * stopped while its output was shaped); on a failed output the state is just
 * omitted and the error is returned for the caller to log (CORE_OK
 * otherwise).  An output without "state" is left alone.
 */
enum core_status transform_output(struct transform *t, json_t *output,
                                  struct core_err *e);

#endif
