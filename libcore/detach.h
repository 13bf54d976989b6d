/*
 * detach.h - detached runs (runtime-semantics §2): the pending row, the
 * daemonized worker, its heartbeat-and-abort watcher and the finalize.
 *
 * The sequence agent-run follows (docs/detach.md):
 *
 *   detach_pending()      the pending row, chained to the last committed row
 *   store_close()         the parent's handle never crosses fork()
 *   detach_fork()         double fork: the worker is a daemon (own session
 *                         and process group, stdin and stdout on /dev/null,
 *                         stderr on the log file, other fds closed)
 *     parent:  detach_wait_ready() then print the detached output, exit 0
 *     worker:  store_open() again, detach_watch_start() (its own handle),
 *              detach_ready(), run the inputs (rt_detach()), then
 *              detach_watch_quiesce(), detach_finalize(), detach_watch_end()
 *
 * Nothing here prints or exits; the worker's log lines are written by the
 * command (stderr is the log file).
 */
#ifndef CORE_DETACH_H
#define CORE_DETACH_H

#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "buf.h"
#include "status.h"

struct store;

#define DETACH_HEARTBEAT_INTERVAL_MS 30000      /* Genkit's defaultHeartbeatInterval */
#define DETACH_WIND_DOWN_MS (5 * 60 * 1000)     /* windDownHeartbeatBudget */

/*
 * Write the pending row (§2.2 step 4) under a fresh UUID:
 * {createdAt, heartbeatAt, parentId?, sessionId, snapshotId,
 * status: "pending", updatedAt}, all times now, no state.  parent_id may be
 * NULL (the first turn of a fresh conversation).  *row (optional) receives
 * the row as persisted (new reference).
 */
enum core_status detach_pending(struct store *s, const char *session_id,
                                const char *parent_id, json_t **row,
                                struct core_err *e);

/*
 * The worker's log file for snapshot id: STORE_DIR/logs/ID.log (the logs
 * directory is created 0700).  Appends the path to out.
 */
enum core_status detach_log_path(const char *store_dir, const char *id,
                                 struct core_buf *out, struct core_err *e);

/*
 * The same path for reading or removing a log (no directory is made).
 * CORE_ENOTFOUND for an ID no worker can have (one containing '/': workers'
 * IDs are UUIDs), so a crafted ID never names a file outside the logs.
 */
enum core_status detach_log_name(const char *store_dir, const char *id,
                                 struct core_buf *out, struct core_err *e);

/* Remove snapshot id's worker log, if it has one.  A store_deleted_fn for
 * store_delete_session()/store_prune() with the store directory as ctx;
 * errors are ignored (the row is gone either way). */
void detach_log_remove(const char *id, void *store_dir);

/* Which side of detach_fork() this process is on. */
struct detach_proc {
	int worker;     /* 1 in the worker, 0 in the caller */
	int fd;         /* the readiness pipe: read end (caller), write end (worker) */
	pid_t pid;      /* caller: the worker's pid (once ready) */
};

/*
 * Double fork.  The caller returns with p->worker == 0 once the
 * intermediate child has exited; the worker (grandchild, reparented to
 * init) returns with p->worker == 1 in its own session and process group,
 * stdin and stdout on /dev/null, stderr appending to log_path
 * (created 0600), every other descriptor closed, SIGHUP ignored.  The
 * working directory is kept (agent, tool and script paths may be
 * relative), and so is the umask.  Errors (the caller's side only):
 * CORE_ESYS.
 */
enum core_status detach_fork(const char *log_path, struct detach_proc *p,
                             struct core_err *e);

/* Worker: report that it is running (err NULL or CORE_OK) or why it could
 * not start, and close the pipe. */
void detach_ready(struct detach_proc *p, const struct core_err *err);

/* Caller: wait for the worker's report.  CORE_OK when it runs; otherwise
 * its error (CORE_ESYS "the worker exited before it started" when it died
 * silently). */
enum core_status detach_wait_ready(struct detach_proc *p, struct core_err *e);

/*
 * The watcher: a thread with its own store handle that beats the pending
 * row every interval_ms (heartbeatAt only, on pending and aborting rows,
 * §1.6) and sleeps on the store's change notification in between, so the
 * abort flip is seen at once.  Once the row reads aborting or aborted,
 * detach_watch_aborted() turns true; beats then go on for at most
 * wind_down_ms.  The thread ends when the row reads terminal (the
 * finalize's write wakes it) or, after detach_watch_quiesce(), at its next
 * wake-up.
 */
struct detach_watch;
enum core_status detach_watch_start(const char *store_path, const char *id,
                                    int64_t interval_ms, int64_t wind_down_ms,
                                    struct detach_watch **out, struct core_err *e);
/* Non-zero once the abort flip was seen (async-signal-safe, any thread). */
int detach_watch_aborted(const struct detach_watch *w);
/* Stop beating (call right before the finalize write). */
void detach_watch_quiesce(struct detach_watch *w);
/* Wait for the thread, close its handle, free w (NULL is a no-op).
 * *beats and *failed (optional) count the heartbeat writes done and
 * failed; last_err (optional) receives the last failure. */
void detach_watch_end(struct detach_watch *w, long *beats, long *failed,
                      struct core_err *last_err);

/* How the background work ended, for the finalize. */
struct detach_result {
	int aborted_by_user;        /* the abort flip (or a stop signal) was seen */
	const json_t *output;       /* the invocation's AgentOutput (rt_output) */
	const json_t *state;        /* the committed state (rt_committed_state) */
};

/*
 * Finalize the pending row (§2.3), one read-modify-write of its current
 * value: aborting → aborted (finishReason aborted, the state, updatedAt
 * now, heartbeatAt cleared, createdAt kept); already terminal → no write;
 * otherwise a fresh row {createdAt of the pending row, updatedAt now,
 * parentId, sessionId, state} that is aborted (aborted_by_user; error
 * kept), failed or aborted (the output's error and finish reason), or
 * completed (the output's finish reason).  pending is the row
 * detach_pending() wrote.  *persisted (optional) receives the row written,
 * or NULL when nothing was written.
 *
 * When the store cannot write that row (CORE_ESYS: a full disk), the work
 * is lost: the row is then finalized failed with the state that committed
 * before the detach (the parent's) and the store's cause in its error, so
 * waiters see it fail at once rather than expire.  The return is CORE_ESYS
 * either way, e saying the cause ("No space left on device") and whether
 * that failed row landed (*persisted is it).
 */
enum core_status detach_finalize(struct store *s, const json_t *pending,
                                 const struct detach_result *r, json_t **persisted,
                                 struct core_err *e);

#endif
