/*
 * backend.h - what a store backend implements: the manual for its author
 * (not part of the store interface; only store/ includes this).
 *
 * store.c is the store interface of store.h.  It checks the arguments
 * (the handle, IDs, an empty save ID, each imported row), then calls the
 * backend the handle was opened with through its struct store_backend, a
 * table of function pointers chosen once, at open, from the location
 * (like curl's TLS backends, struct Curl_ssl).  path.c, shape.c, wait.c
 * and history.c are written over the interface and serve every backend.
 *
 * Adding a backend is one folder and one row: store/NAME/ defines a
 * const struct store_backend and the functions it points to, and
 * store.c's table lists it (its extern beside the row).  The Makefile
 * builds every .c file of store/NAME/ into libcore.a; flags of its own go
 * in store/NAME/build.mk, and so does the library header it alone may
 * include ("# lint: owns <HEADER>", read by scripts/lint).  Its header, store/NAME/NAME.h, says what store.h
 * leaves to the backend (locations, trust, limits, migrations), and its
 * row of tests/backends runs the store suites on it.
 *
 * A backend with URL schemes takes the locations "SCHEME://..." (schemes
 * matched without case) and the whole locations it lists (also without
 * case: "pg:"); the one without schemes takes every other location, a
 * directory path.
 *
 * Every operation below gets arguments store.c has already checked: a
 * handle this process opened, valid snapshot and session IDs (store_check_id),
 * rows that store_check_row() accepts.  Every operation returns an enum
 * core_status and fills e with "what failed: why" on failure, never
 * printing and never exiting.  The statuses are store.h's: CORE_ENOTFOUND
 * for absent rows, CORE_ESYS (errno in e->sys: ENOSPC for a full store,
 * EROFS for a read-only one, ETIMEDOUT for a lock wait that ran out) when
 * the storage fails, CORE_ENOMEM, CORE_EINVAL for a row the store refuses;
 * a status a callback returned is returned as it is.
 *
 * The operations and what each must guarantee:
 *
 *   open          Open (creating, unless STORE_OPEN_EXISTING) the store at
 *                 location and set *out to the backend's own handle, whose
 *                 first member is a struct store (store.c fills it in).
 *                 STORE_OPEN_EXISTING and no store: CORE_ENOTFOUND "no
 *                 store at LOCATION (set --store or AGENTKIT_STORE)".
 *   close         Release the handle.  It may have been inherited across
 *                 fork() (head.pid is not this process): then free only
 *                 this process's memory, never what the parent still uses.
 *   get, latest   One row, with state unless STORE_METADATA_ONLY (which
 *                 must not read the state at all); with append set and
 *                 STORE_LAST_MESSAGE, without parsing any message but the
 *                 last (store.h).  Absent: CORE_ENOTFOUND;
 *                 store.c writes the message.  latest: greatest createdAt,
 *                 ties by greater snapshotId, any status.
 *   message_texts (with append) The first n messages of a row's state
 *                 as the text each is stored in, oldest first, to fn
 *                 (store_message_texts() in store.h), from one snapshot of
 *                 the store; not parsed.  Absent row: CORE_ENOTFOUND (store.c
 *                 writes the message); fewer messages: CORE_ESYS.
 *   save          Genkit's atomic read-modify-write (store_save_on() in
 *                 store.h) for a non-empty id: read the row, st_mutate()
 *                 it, write the result, all in one transaction that no
 *                 other writer (thread or process) interleaves.  fn runs
 *                 at most once per try of the transaction and must see the
 *                 row as it is now.  Under STORE_METADATA_ONLY the state is
 *                 neither read nor touched: a next without "state" keeps
 *                 the stored one.  base is an optimization the backend may
 *                 ignore.  *persisted (optional, already NULL) receives the
 *                 row written.  With append set and STORE_APPEND (store.c
 *                 has checked the base), the state's messages follow the
 *                 base's first kept ones, which it must chain onto without
 *                 the caller having them, also when the base is not one
 *                 this handle read.
 *   put_stream    Write every row src gives (rewind() first, and again on
 *                 any retry), replacing rows with the same snapshotId, in
 *                 one transaction: all or none.  *count (optional) is set.
 *   change_seq,   Wake-ups: a counter every status change of a stored row
 *   wait_change   or deletion (in any process) increments after its
 *                 commit; a row's creation may increment it too, but need
 *                 not (nobody waits for a row that does not exist yet:
 *                 store_wait_terminal() takes a missing row as settled,
 *                 and PostgreSQL's NOTIFY serializes the commits that send
 *                 it); wait_change returns CORE_OK once it differs from seq,
 *                 CORE_ETIMEOUT after timeout_ms, and never busy-polls.  A
 *                 wake-up may be lost (store_wait_terminal() re-reads on a
 *                 bound), but it must never come before the commit.
 *   sessions      Every session in session ID order, with its latest row
 *                 (metadata only) and its row count; stop at fn's first
 *                 non-OK status and return it.
 *   recent        (optional: NULL, store.c sorts what sessions gives)
 *                 Every session as sessions gives it, newest first: by
 *                 st_updated_ns() of its latest row (the store's clock:
 *                 the updatedAt store_now_ns() stamped) descending, then
 *                 session ID ascending (bytes, as strcmp()); stop at fn's
 *                 first non-OK status and return it.  An index kept in
 *                 the transaction of every row write and delete, so that
 *                 stopping after N sessions costs O(N) whatever the
 *                 store's size, read in batches (at most first sessions
 *                 in the first, when first is not 0: how many the caller
 *                 expects to need), fn called outside any transaction and
 *                 memory bounded by a batch.  A session is never given
 *                 twice; one whose time changes during the walk is given
 *                 where the walk finds it (not at all when it moved past
 *                 the walk's place: it is newer than the walk).  An older
 *                 store gets the index at its first read-write open, in
 *                 the open's (or the migration's) write transaction; one
 *                 that cannot have it may walk st_recent_sorted().
 *   session_rows  A session's rows oldest first (createdAt, then
 *                 snapshotId), metadata only under STORE_METADATA_ONLY;
 *                 stop at fn's first non-OK status.  No rows is CORE_OK
 *                 (store.c says "no snapshot found").
 *   delete_session  Delete every row of the session, and each deleted
 *                 row's worker log lines, in one transaction; *deleted the
 *                 count (0 is CORE_OK: store.c reports it); fn (optional)
 *                 called per row only after the commit.
 *   prune_session   The same for the rows of one session that
 *                 st_prune_keeps() does not keep, walking newest first;
 *                 messages shared with rows that stay are kept.
 *   log_append    Append one worker log line (at_ns, text: valid UTF-8,
 *                 at most STORE_LOG_LINE_MAX bytes, store.c saw to it) to
 *                 the lines of snapshot_id, in one write that checks the
 *                 row exists in the same transaction (absent: CORE_ENOTFOUND,
 *                 nothing written, so a deletion never leaves lines behind).
 *                 No wake-up.  One small commit, bounded like every
 *                 write (store.c also sets a deadline of
 *                 STORE_LOG_APPEND_MS); a backend on a server fails at
 *                 once (CORE_ESYS) rather than wait for a reconnect.
 *   log_lines     The lines of snapshot_id in append order, fn called
 *                 outside any transaction (in batches of reads); stop at
 *                 fn's first non-OK status.  None: CORE_ENOTFOUND (store.c
 *                 writes the message).  A store made before worker logs
 *                 existed and opened read-only has none.
 *   session_lock  Take the session's writer lock (store_session_lock() in
 *                 store.h), held until session_unlock or until the process
 *                 (PostgreSQL: the connection) ends, however it ends; a
 *                 waiter must be let in at once when the holder releases
 *                 it or dies, never by a poll alone.  Busy past timeout_ms
 *                 (0: at once): CORE_ETIMEOUT.
 *   session_unlock  Release it (errors ignored: a lock whose connection is
 *                 gone is released already).
 *   claim         (optional: NULL, no queued runs) One write transaction
 *                 that picks the queued row store_claim() says (the index
 *                 of the queues, ready by now_ns, the agent's concurrency
 *                 counted over the whole index against live leases,
 *                 skipping rows another transaction holds) and applies fn
 *                 to it as save does; *persisted receives the row written
 *                 (NULL: fn declined).  No row ready: CORE_ENOTFOUND, with
 *                 *next_ns the next ready time of those queues (0: none).
 *                 The index is a projection of the rows every write keeps
 *                 (store_queue_project() has set "ready" and "lease"):
 *                 pending and aborting rows with a "queue" are in it.
 *   queued        (with claim) Each indexed row, metadata only, unshaped,
 *                 by queue then ready time; stop at fn's first non-OK.
 *   park          (optional) Close the connection to the server now; the
 *                 next operation opens a new one at once, with no
 *                 reconnect window (store_park() in store.h).  Session
 *                 locks and LISTENs do not survive it: it is for handles
 *                 that hold neither.  NULL: nothing to give up.
 *   migrate       (optional) Report the store's format version and this
 *                 agentkit's, and apply the steps between (store_migrate()
 *                 in store.h; store.c has set m->backend and m->steps
 *                 NULL).  NULL: the backend has no store-wide steps, and
 *                 store.c reports format_version as both versions.
 */
#ifndef STORE_BACKEND_H
#define STORE_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "store.h"

struct core_buf;

/* The head of every backend's handle. */
struct store {
	const struct store_backend *backend;
	pid_t pid;              /* the process that opened it */
	int64_t deadline;       /* store_set_deadline()'s (core_now_mono_ms());
	                           0: none.  A backend that waits on a server
	                           ends every wait by then, CORE_ETIMEOUT */
	int64_t clock_offset_ns; /* the store's clock minus this host's
	                            (store_now_ns()): a server backend sets it
	                            on every connect; 0 for the others */
};

typedef enum core_status (*store_session_fn)(const struct store_session_info *, void *);
typedef enum core_status (*store_row_fn)(const json_t *row, void *);

struct store_backend {
	const char *name;               /* for messages: "LMDB" */
	const char *const *schemes;     /* URL schemes taken, NULL-ended; NULL:
	                                   directory paths */
	const char *const *locations;   /* whole locations taken ("pg:"),
	                                   NULL-ended, or NULL */
	enum core_status (*open)(const char *location, unsigned flags,
	                         struct store **out, struct core_err *e);
	void (*close)(struct store *s);
	enum core_status (*get)(struct store *s, const char *snapshot_id, unsigned flags,
	                        json_t **row, struct core_err *e);
	enum core_status (*latest)(struct store *s, const char *session_id, unsigned flags,
	                           json_t **row, struct core_err *e);
	enum core_status (*message_texts)(struct store *s, const char *snapshot_id, size_t n,
	                                  store_text_fn fn, void *ctx, struct core_err *e);
	enum core_status (*save)(struct store *s, const char *id, unsigned flags,
	                         const struct store_base *base, store_mutate_fn fn,
	                         void *ctx, json_t **persisted, struct core_err *e);
	enum core_status (*put_stream)(struct store *s, const struct store_rows *src,
	                               size_t *count, struct core_err *e);
	uint32_t (*change_seq)(struct store *s);
	enum core_status (*wait_change)(struct store *s, uint32_t seq, int64_t timeout_ms,
	                                struct core_err *e);
	enum core_status (*sessions)(struct store *s, store_session_fn fn, void *ctx,
	                             struct core_err *e);
	enum core_status (*recent)(struct store *s, size_t first, store_session_fn fn,
	                           void *ctx, struct core_err *e);
	enum core_status (*session_rows)(struct store *s, const char *session_id,
	                                 unsigned flags, store_row_fn fn, void *ctx,
	                                 struct core_err *e);
	enum core_status (*delete_session)(struct store *s, const char *session_id,
	                                   size_t *deleted, store_deleted_fn fn,
	                                   void *ctx, struct core_err *e);
	enum core_status (*prune_session)(struct store *s, const char *session_id,
	                                  size_t keep, int64_t before_ns, size_t *deleted,
	                                  store_deleted_fn fn, void *ctx,
	                                  struct core_err *e);
	enum core_status (*log_append)(struct store *s, const char *snapshot_id,
	                               int64_t at_ns, const char *text, struct core_err *e);
	enum core_status (*log_lines)(struct store *s, const char *snapshot_id,
	                              store_log_fn fn, void *ctx, struct core_err *e);
	enum core_status (*migrate)(struct store *s, unsigned flags,
	                            struct store_migration *m, struct core_err *e);
	enum core_status (*session_lock)(struct store *s, const char *session_id,
	                                 int64_t timeout_ms, struct core_err *e);
	void (*session_unlock)(struct store *s, const char *session_id);
	void (*park)(struct store *s);
	enum core_status (*claim)(struct store *s, const char *const *queues, int64_t now_ns,
	                          store_mutate_fn fn, void *ctx, json_t **persisted,
	                          int64_t *next_ns, struct core_err *e);
	enum core_status (*queued)(struct store *s, store_row_fn fn, void *ctx,
	                           struct core_err *e);
	int append;                     /* honours STORE_LAST_MESSAGE and
	                                   STORE_APPEND (store.h) */
	long format_version;            /* without migrate: the format's version */
};

/*
 * The steps every backend takes, in shape.c (below the backends: they
 * call it, and only store.c's table calls them).
 *
 * A save's step between reading and writing, the same in every backend:
 * call fn with the existing row (or NULL) and shape its answer as store.h
 * says: *next is NULL for no write, else a new object (a shallow copy when
 * fn's is shared) whose snapshotId is id, whose sessionId is the existing
 * row's when it has one, and whose empty status reads "completed".
 * Errors: fn's (its message, or the status's name), CORE_EINVAL for a
 * result that is not an object or has no valid session, CORE_ENOMEM.
 */
enum core_status st_mutate(const char *id, const json_t *existing, store_mutate_fn fn,
                           void *ctx, json_t **next, struct core_err *e);

/*
 * Whether pruning keeps a row (metadata is enough): seen is its place in
 * its session, newest first from 0.  The latest row and pending/aborting
 * rows stay; others stay while within the newest keep (keep > 0) or
 * created at or after before_ns (before_ns != 0).  See store_prune().
 */
int st_prune_keeps(const json_t *row, size_t seen, size_t keep, int64_t before_ns);

/*
 * The backend's recent order by sorting what its sessions operation gives
 * (history.c): O(sessions) memory, for a store without the index (an
 * older LMDB store opened read-only).
 */
enum core_status st_recent_sorted(struct store *s, store_session_fn fn, void *ctx,
                                  struct core_err *e);

/*
 * Append to out a session's listing entry: what store_sessions_recent()
 * prints of it, made from its latest row (metadata only) at write time,
 * so a listing that has it neither reads the row nor parses JSON.  Opaque
 * bytes to the backend, which keeps them with its index entry and gives
 * them back as store_session_info.entry; a backend that gives latest
 * instead has them made during the listing.  The entry holds the line's
 * text but for what changes without a write of the latest row: the row
 * count (store_session_info.rows) and a heartbeat's expiry (the times
 * are in the entry).  *updated_ns (when not NULL) gets the time it orders
 * by, st_updated_ns().  CORE_ENOMEM (out as it was) when out of memory.
 */
enum core_status st_entry_make(const char *session_id, const json_t *latest,
                               struct core_buf *out, int64_t *updated_ns);

/* CORE_OK for a handle this process opened (store.c's check of every
 * call), else CORE_EPRECONDITION with the reason. */
enum core_status st_check_handle(struct store *s, struct core_err *e);

#endif
