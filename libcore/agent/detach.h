/*
 * detach.h - detached runs (runtime-semantics §2): the queue of inputs for
 * the background, the pending row, the daemonized worker, its
 * heartbeat-and-abort watcher and the finalize.
 *
 * A command (agent-run, docs/detach.md) fills a struct detach_run, queues
 * the inputs for the background (detach_queue_add()) and calls
 * detach_start(), which does the whole sequence:
 *
 *   detach_pending()      the pending row, chained to the last committed row
 *   store_close()         the parent's handle never crosses fork()
 *   detach_fork()         double fork: the worker is a daemon (own session
 *                         and process group, stdin and stdout on /dev/null,
 *                         stderr on the log file if this host can keep one,
 *                         other fds closed; the log's lines go to the store)
 *     parent:  detach_wait_ready(); the command prints the detached output
 *     worker:  detach_run_worker(): store_open() again,
 *              detach_watch_start() (its own handle), detach_ready(), run
 *              the inputs (rt_detach()), then detach_watch_quiesce(),
 *              detach_finalize(), detach_watch_end()
 *
 * A process that already outlives its caller (agent-run's back process,
 * docs/detach.md "Eager intake") detaches in place instead, even from
 * inside a turn: detach_here() (the pending row, the watcher,
 * rt_detach_turn()), the command prints, detach_daemonize() (stdio), then
 * detach_finish() runs the queue and finalizes.
 *
 * Nothing here prints or exits: the worker's log lines go to the command's
 * sink (which writes them to the store with detach_log_store() and to its
 * stderr, the log file when there is one), and the worker's exit is the
 * command's.  The lower-level functions below are what detach_start() is
 * made of; agent-snap uses the stderr files' names.
 */
#ifndef CORE_DETACH_H
#define CORE_DETACH_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "../base/buf.h"
#include "../base/status.h"
#include "../../store/store.h"

struct runtime;
struct store;

#define DETACH_HEARTBEAT_INTERVAL_MS 30000      /* Genkit's defaultHeartbeatInterval */
#define DETACH_WIND_DOWN_MS (5 * 60 * 1000)     /* windDownHeartbeatBudget */
#define DETACH_LEASE_MS 60000                   /* the readers' default heartbeat timeout */

/*
 * Write the pending row (§2.2 step 4) under a fresh UUID:
 * {createdAt, heartbeatAt, parentId?, sessionId, snapshotId,
 * status: "pending", updatedAt, agentkit: {heartbeatTimeout}}, createdAt
 * created_ns (rt_next_created_ns()), the others now, no state; the
 * heartbeat timeout hb_timeout_ms (0: DETACH_LEASE_MS), which readers use
 * for this row (store_shape()).  parent_id may be NULL (the first turn of
 * a fresh conversation).  *row (optional) receives the row as persisted
 * (new reference).
 */
enum core_status detach_pending(struct store *s, const char *session_id,
                                const char *parent_id, int64_t created_ns,
                                int64_t hb_timeout_ms, json_t **row, struct core_err *e);

/*
 * The worker's stderr file for snapshot id (its log lines, and whatever
 * else the process writes there: docs/detach.md): ID.log in
 * store_logs_dir() of the store location (STORE/logs beside a directory
 * store; this host's ~/.local/state/agentkit/logs for a store on a
 * server), the directory created 0700.  Appends the path to out.  The
 * directory must pass store_trust_dir() (no symlink, the user's, writable
 * by nobody else): CORE_ESYS "refusing worker log directory 'D': ..."
 * otherwise, and "cannot keep worker logs in 'D': Not a directory".  A
 * detach that gets an error here goes on without the file.
 */
enum core_status detach_log_path(const char *store, const char *id,
                                 struct core_buf *out, struct core_err *e);

/*
 * The same path for reading or removing a log (no directory is made).
 * CORE_ENOTFOUND for an ID no worker can have (one containing '/': workers'
 * IDs are UUIDs), so a crafted ID never names a file outside the logs.
 */
enum core_status detach_log_name(const char *store, const char *id,
                                 struct core_buf *out, struct core_err *e);

/* Remove snapshot id's worker log, if it has one.  A store_deleted_fn for
 * store_delete_session()/store_prune() with the store directory as ctx;
 * errors are ignored (the row is gone either way). */
void detach_log_remove(const char *id, void *store_dir);

/*
 * One line of the running worker's log in the store (store_log_append()
 * for d's row, on the worker's main handle, *d->store): text as the
 * command formats it, at at_ns.  Nothing outside a worker (role
 * DETACH_WORKER), without a handle, or on another thread than the
 * worker's (d->thread: a handle is one thread's at a time); a failure is
 * ignored (the line still goes to the worker's stderr: the command's
 * business), so a log never fails a run.  The handle is parked after the
 * line (store_park()): a worker holds the watcher's connection only.
 */
struct detach_run;
void detach_log_store(const struct detach_run *d, int64_t at_ns, const char *text);

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
 * stdin and stdout on /dev/null, stderr appending to log_path (created
 * 0600; NULL, empty or one that cannot be opened: /dev/null, since the
 * log's lines are in the store), every other descriptor closed, SIGHUP
 * ignored.  The working directory is kept (agent, tool and script paths may be
 * relative), and so is the umask.  Errors (the caller's side only):
 * CORE_ESYS.
 */
enum core_status detach_fork(const char *log_path, struct detach_proc *p,
                             struct core_err *e);

/* Close every descriptor from 3 up but keep (-1: none): what a worker
 * does with the descriptors its caller gave it. */
void detach_close_others(int keep);

/* Worker: report that it is running (err NULL or CORE_OK) or why it could
 * not start, and close the pipe. */
void detach_ready(struct detach_proc *p, const struct core_err *err);

/* Caller: wait for the worker's report.  CORE_OK when it runs; otherwise
 * its error (CORE_ESYS "the worker exited before it started" when it died
 * silently). */
enum core_status detach_wait_ready(struct detach_proc *p, struct core_err *e);

/*
 * The watcher: a thread with its own store handle that beats the pending
 * row (its snapshotId) every interval_ms (heartbeatAt only, on pending
 * and aborting rows, §1.6), the first time at once, and sleeps on the store's change notification in between, so the
 * abort flip is seen at once.  Once the row reads aborting or aborted,
 * detach_watch_aborted() turns true; beats then go on for at most
 * wind_down_ms.  The thread ends when the row reads terminal (the
 * finalize's write wakes it) or, after detach_watch_quiesce(), at its next
 * wake-up.
 *
 * The lease: readers take the row for expired lease_ms after its last
 * heartbeat, so the worker holds the row only until lease_ms after the
 * start of its last beat that committed (by this host's monotonic clock,
 * which no other host's skew moves).  A worker that could not renew it in
 * time (a cut network, a store that stopped answering) has lost it:
 * detach_watch_lease_lost() turns true, the turn in flight is stopped
 * (detach_aborted()), and nothing more is committed: the row stays as the
 * others read it, expired, for a resume to go on from.
 *
 * The fence, on the store's side of the lease: the pending row's
 * STORE_INFO_KEY carries the lease's "epoch" (1 from detach_pending()) and
 * its holder, "worker": {"host", "pid"} (the first beat names this
 * process).  A beat, and the finalize, is a compare-and-set: it is refused,
 * CORE_EXPIRED, when the row's epoch is not the pending row's or when the
 * row has expired by the store's clock (store_now_ns(): heartbeatAt older
 * than the row's heartbeatTimeout).  A refused beat loses the lease at
 * once.  So a worker cut off from the store never changes a row a reader
 * has seen expired, whatever the clocks of their hosts say.
 */
struct detach_watch;
enum core_status detach_watch_start(const char *store_path, const json_t *pending,
                                    int64_t interval_ms, int64_t wind_down_ms,
                                    int64_t lease_ms, struct detach_watch **out,
                                    struct core_err *e);
/* Non-zero once the abort flip was seen (async-signal-safe, any thread). */
int detach_watch_aborted(const struct detach_watch *w);
/* Non-zero once the lease ran out (any thread). */
int detach_watch_lease_lost(const struct detach_watch *w);
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
	const json_t *info;         /* the row's STORE_INFO_KEY member, or NULL */
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

/* ---- the detached run: what a command calls ---- */

/*
 * The inputs a detached run takes to the background, in order (§2.1).
 * in[0..n) are copies of the AgentInputs with "detach" removed, each a
 * reference the queue owns; an input is as large as the command's reader
 * let it be (agent-run: --max-record), and the queue holds at most
 * DETACH_QUEUE_MAX of them.  All zeros is an empty queue;
 * detach_queue_release() frees it (and leaves it empty, reusable).
 */
#define DETACH_QUEUE_MAX 1000000
struct detach_queue {
	json_t **in;
	size_t n, cap;
};

/*
 * Queue a copy of in (borrowed): "detach" is cleared, and an input with
 * "detach": true is queued only when it carries a payload (a message, or
 * a resume with a respond or restart entry), so a bare {"detach": true}
 * causes no extra turn.  CORE_ENOMEM; CORE_ETOOBIG past DETACH_QUEUE_MAX.
 */
enum core_status detach_queue_add(struct detach_queue *q, const json_t *in,
                                  struct core_err *e);
void detach_queue_release(struct detach_queue *q);

/* What the run tells its command, in the worker. */
struct detach_sink {
	/* One line for the worker's log, without the newline (the command
	 * adds the time and its name).  May be NULL. */
	void (*log)(void *ctx, const char *line);
	/* The stop signal the process took (SIGTERM to the worker, ...), or
	 * 0: the run then finalizes aborted.  May be NULL. */
	int (*stopped)(void *ctx);
	void *ctx;
};

enum detach_role {
	DETACH_NONE,            /* not detached (or the detach failed) */
	DETACH_CALLER,          /* the worker runs: print the detached output */
	DETACH_WORKER,          /* this process is the worker */
};

#define DETACH_ID_MAX 36        /* pending rows are named by a UUID */

/*
 * A queued run (agent-run --queue, docs/queue.md; store.h "Queued runs"):
 * what detach_start() writes instead of starting a worker.  Borrowed.
 */
struct detach_enqueue {
	const char *queue;              /* its name */
	const char *agent;              /* the agent's name, for the limit ("": none) */
	int64_t concurrency;            /* claims of this agent at once, fleet-wide (0: any) */
	int64_t max_attempts;           /* 0: the claiming worker's (store_claim()) */
	int64_t not_before_ns;          /* no claim before (the store's clock; 0: at once) */
	int64_t delay_ms;               /* ... or before this long after the enqueue */
	const json_t *args;             /* agent-run's options for the worker (an array) */
	const char *key;                /* --key: the run's ID is core_uuid_named() of it,
	                                   and a second launch finds the first (NULL: none) */
};

/*
 * One detached run.  Zero it, then the command sets the first group; the
 * pointers are borrowed and outlive the run.  The rest belongs to the run
 * and goes with detach_run_release().  rt's cancelled() (rt_config) must return
 * non-zero when detach_aborted() does, so an abort cancels the turn in
 * flight.
 */
struct detach_run {
	struct runtime *rt;             /* the invocation, opened on *store */
	const char *agent;              /* the agent's name, for messages */
	struct store **store;           /* the command's handle (*store NULL: none);
	                                   see detach_start() */
	const char *store_path;         /* the store directory */
	int64_t hb_interval_ms;         /* 0: DETACH_HEARTBEAT_INTERVAL_MS */
	int64_t wind_down_ms;           /* 0: DETACH_WIND_DOWN_MS */
	int64_t lease_ms;               /* the heartbeat timeout: the lease (0:
	                                   DETACH_LEASE_MS), see detach_watch_start() */
	struct detach_sink sink;

	const struct detach_enqueue *enq; /* a queued run: detach_start() writes it and
	                                   starts no worker (NULL: a detached run) */

	struct detach_queue queue;      /* the inputs, queued before detach_start() */
	struct core_err tail;           /* a malformed input after the queued ones
	                                   (st CORE_OK: none): the worker fails the
	                                   invocation with it after running them */
	enum detach_role role;
	char id[DETACH_ID_MAX + 1];     /* the pending row, once written */
	struct core_buf log;            /* the worker's stderr file, once named
	                                   (empty: none, its stderr is /dev/null) */
	struct core_err log_err;        /* why there is none (st CORE_OK: there is) */
	enum core_status worker_st;     /* the worker: how the row was finalized */
	struct detach_watch *watch;     /* the worker's watcher, while it runs */
	pthread_t thread;               /* the worker's thread, the one that uses
	                                   *store (detach_log_store()) */
	json_t *pending;                /* the pending row as written */
	char session[STORE_ID_MAX + 1]; /* a queued run's session: a key's earlier
	                                   run may be in another than rt's */
	int existed;                    /* the key named a run already there:
	                                   nothing was written */
};

/*
 * Detach with the queued inputs (§2.2): the capability check (a store),
 * the pending row chained to rt's last committed row, the stderr file's
 * path (none: the worker's stderr is /dev/null, d->log_err says why), then
 * *store is closed (and NULL) and the process forks.  CORE_OK on both
 * sides: in the caller (role DETACH_CALLER, the worker has started: print
 * {id, session}) and in the worker (role DETACH_WORKER, after
 * detach_run_worker() returned; worker_st is its status, the command's
 * exit).  Otherwise the detach failed: the invocation is ended with
 * rt_fail() (its output is the failed one, rt_exit_status() the status),
 * the pending row, if written, is finalized failed, *store is open again
 * if it could be, and the status is returned.  Buffered stdio is flushed
 * before the fork.
 */
enum core_status detach_start(struct detach_run *d);
/* With d->enq set, detach_start() instead writes the queued run: the
 * pending row (no heartbeat: it waits for a worker; parentId rt's last
 * committed row) whose info holds the queue, the inputs and d->enq's
 * args, under a fresh UUID or the key's.  A key whose run exists writes
 * nothing: d->existed, and d->id and d->session are that run's.  Then
 * the role is DETACH_CALLER, as after a detach, with no worker. */

/*
 * The worker's part of detach_start(), callable in any process (the unit
 * test runs it in its own): open a store handle of its own (the one in
 * *store, if any, is closed first; the new one is left in *store for the
 * command to close after rt_free()), start the watcher beating the
 * pending row (the row detach_pending() wrote) every hb_interval_ms, report
 * readiness on p (NULL: no one waits), run the queued inputs with
 * rt_detach() (no chunks, no turn-end rows), stopping at the first that
 * ends the invocation, then finalize the row (detach_finalize(): aborted
 * when the abort flip or a stop signal was seen) and stop the watcher.
 * Every step is a line on the sink's log.  Sets role DETACH_WORKER.
 *
 * Returns how the row ended, store_outcome() of the finalized row (CORE_OK,
 * CORE_FAILED, CORE_ABORTED, ...), or CORE_OK when the row was already
 * terminal; a store that cannot be opened, a watcher that cannot start or
 * a finalize that failed (CORE_ESYS: a full disk, detach_finalize()) is
 * that status, and its message is on the log.
 */
enum core_status detach_run_worker(struct detach_run *d, const json_t *pending,
                                   struct detach_proc *p);

/*
 * Detach without a fork, for a process that already outlives its caller
 * (agent-run's back process, docs/detach.md "Eager intake"): the
 * capability check, the pending row chained to rt's last committed row,
 * the stderr file's path and the watcher (its own store handle); then rt_detach()
 * with the command's handle kept, or, with in_flight, rt_detach_turn(): the
 * turn in flight (this is called from inside it) goes on detached.  On
 * CORE_OK the role is DETACH_WORKER: the command prints the detached
 * output, calls detach_daemonize(), lets the turn in flight end and calls
 * detach_finish().  Otherwise as detach_start(): the invocation is ended
 * (rt_fail) and a pending row already written is finalized failed.
 */
enum core_status detach_here(struct detach_run *d, int in_flight);

/*
 * The in-place worker's stdio (after the detached output is printed):
 * stdin and stdout on /dev/null, stderr appending to its file (or
 * /dev/null), SIGHUP ignored; then its first log line.  Its session, process group and other
 * descriptors are the command's to arrange.  CORE_ESYS.
 */
enum core_status detach_daemonize(struct detach_run *d);

/*
 * The rest of a worker's run (detach_run_worker() ends with it): the
 * queued inputs, then the tail's failure if any, then the finalize and the
 * watcher's end.  Returns, and sets worker_st to, how the row ended (as
 * detach_run_worker()).
 */
enum core_status detach_finish(struct detach_run *d);

/*
 * Settle the pending row failed with why (its status and message), as a
 * worker that cannot run it does (agent-run --claimed when the agent does
 * not load on this host): detach_finalize()'s row, the state the parent's.
 */
enum core_status detach_settle_failed(struct store *s, const json_t *pending,
                                      const struct core_err *why, struct core_err *e);

/* Non-zero once the worker saw the abort flip; 0 outside a running worker.
 * For rt's cancelled(), on the thread that runs the worker. */
int detach_aborted(const struct detach_run *d);

/* Free the queue, the stderr file's path and the pending row (the borrowed members
 * stay). */
void detach_run_release(struct detach_run *d);

#endif
