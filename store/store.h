/*
 * store.h - the snapshot store: durable SessionSnapshot rows shared by many
 * processes.
 *
 * Rows are JSON objects shaped exactly as Genkit's SessionSnapshot
 * (runtime-semantics §8): snapshotId, sessionId, parentId, createdAt,
 * updatedAt, heartbeatAt, status, finishReason, error, state.  Times are
 * RFC 3339 strings (core_time_format()).  The store persists what it is
 * given ("stores persist verbatim"); read shaping (expiry, empty status,
 * zero updatedAt) is store_shape()'s job, done by the commands and the
 * runtime, never by the raw reads.
 *
 * This interface is what the runtime and the commands use, whatever the
 * backend.  store/store.c checks each call's arguments and hands it to the
 * backend the store was opened with: each backend is one folder,
 * store/NAME/, whose header (store/NAME/NAME.h) says how it keeps what
 * this interface promises and what it adds (its locations, limits, errors
 * and variables); store/backend.h is the backend author's manual, and
 * docs/store.md the user's.
 *
 * Choosing a backend: the location (--store, else AGENTKIT_STORE, see
 * store_default_path()) is either a URL, "SCHEME://..." with an RFC 3986
 * scheme, or a whole location a backend lists, or else a directory path.
 * A directory path opens the store in that directory with the embedded
 * backend, the one that takes no scheme.  A URL opens the backend that
 * takes its scheme (matched without case), a listed location the backend
 * that lists it.  A URL no backend takes is refused at open with
 * CORE_EUSAGE "'URL' is not a store directory: this agentkit has the A
 * and B backends" (the backends' names), the URL redacted
 * (core_url_redact(): a password in it never shows, in any message).
 * Only "://" makes a URL: "SCHEME:x" is a relative directory unless a
 * backend lists that whole location.
 *
 * A store on a server: a connection lost after open (a restart of the
 * server) is re-established within the backend's reconnect window; a
 * write waits for it and runs its transaction again (a commit whose
 * answer was lost may have happened, and fn then sees that row), a waiter
 * reconnects in store_wait_change(); past the window, CORE_ESYS (errno
 * ETIMEDOUT) with the backend's message.
 *
 * Processes and threads: open a store once per process and close it before
 * fork(); a child re-opens its own (never use a handle across fork).  A
 * handle may be used from one thread at a time.
 *
 * Ownership: json_t * results are new references the caller json_decref()s;
 * json_t * arguments are borrowed unless a function says it consumes them.
 */
#ifndef STORE_STORE_H
#define STORE_STORE_H

#include <stdint.h>
#include <sys/stat.h>

#include <jansson.h>

#include "../libcore/base/buf.h"
#include "../libcore/base/status.h"

struct store;

/* Flags for reads and saves. */
#define STORE_METADATA_ONLY 0x1   /* never load (or, on save, touch) the state */
/*
 * A long session's turn without reading its history (store_can_append()):
 * a read with STORE_LAST_MESSAGE gives the state's "messages" holding only
 * the last message, and STORE_INFO_KEY's "messagesBefore" the count of
 * those before it (absent when there are none); a save with STORE_APPEND
 * and a base (store_save_on()) takes the state's "messages" as the
 * messages after the base's first kept ones: the row written holds those
 * kept messages, then these (*persisted holds what was given).  A backend
 * that cannot (store_can_append() 0) ignores STORE_LAST_MESSAGE and
 * refuses STORE_APPEND (CORE_EINVAL).
 */
#define STORE_LAST_MESSAGE 0x2
#define STORE_APPEND 0x4
/*
 * A save of an ID the caller believes is not stored yet (a turn's new
 * row): a backend may run fn with no existing row and write without
 * reading first, and when the row is there after all it reads it and
 * runs fn again with it, as on any race (fn may so run twice; it must
 * anyway).  Only a hint: the result is the same as without it.
 */
#define STORE_NEW 0x8

/* Whether s honours STORE_LAST_MESSAGE and STORE_APPEND. */
int store_can_append(const struct store *s);

/*
 * The store location (a directory, or a URL naming another backend): path
 * if given, else $AGENTKIT_STORE, else
 * ${XDG_STATE_HOME:-$HOME/.local/state}/agentkit/store.  Appends to out.
 */
enum core_status store_default_path(const char *path, struct core_buf *out,
                                    struct core_err *e);

/* Non-zero when location names a directory (the embedded backend's
 * store), 0 for a URL or a whole location another backend takes. */
int store_location_is_dir(const char *location);

/*
 * Where detached workers keep their stderr files (docs/detach.md; their
 * log lines are in the store: store_log_append()), appended to out:
 * LOCATION/logs beside a directory store; for a store on a server (a URL,
 * a listed location) this host's ${XDG_STATE_HOME:-$HOME/.local/state}/agentkit/logs,
 * since a process's stderr stays on the host that ran it.  Nothing is created.
 * CORE_ESYS when neither XDG_STATE_HOME nor HOME is set, CORE_ENOMEM.
 */
enum core_status store_logs_dir(const char *location, struct core_buf *out,
                                struct core_err *e);

/*
 * The trust check of a directory that holds the store's private files
 * (a directory store's own, a worker log directory): it must belong to the
 * user (or root) and be writable by nobody else, as ssh refuses a key
 * file.  what names it in messages ("store directory", "worker log
 * directory").  With STORE_DIR_NOFOLLOW path itself must not be a symlink
 * (lstat()); without it a link to a good directory is fine (stat()).  The
 * type is the caller's business.  *st (may be NULL) receives the stat.
 * CORE_ESYS with errno EACCES and the fix on a refusal:
 * "refusing store directory 'D': it is writable by group and others (mode
 * 0777); fix it with: chmod 700 'D'"; CORE_ESYS with the errno when path
 * cannot be looked at.
 */
#define STORE_DIR_NOFOLLOW 0x1
enum core_status store_trust_dir(const char *path, const char *what, unsigned flags,
                                 struct stat *st, struct core_err *e);

/*
 * Where location (a store location, or any libpq connection string)
 * holds a password: the userinfo's part after ':' in
 * "SCHEME://USER:PASSWORD@HOST" (the authority ends at the first '@' or
 * '/', as libpq reads it), and the value of every "password=" parameter,
 * in a URL's query ("?password=", "&password=") or in libpq's keyword form
 * ("host=h password=x", a quoted 'value' to its closing quote).  Finds the
 * first such non-empty password that starts at or after *at: 1 with its
 * offset in *at and its length in *len; 0 when there is none.
 */
int store_location_password(const char *location, size_t *at, size_t *len);

/*
 * The store's credentials as the key policy sees them (spawn.h): is the
 * environment entry "NAME=value" one no child may inherit?  PGPASSWORD and
 * PGPASSFILE (libpq's password and password file), and AGENTKIT_STORE when
 * its location holds a password (store_location_password()); a location
 * without one (a directory, a URL with none) is no secret.
 */
int store_secret_variable(const char *entry);

/* Flags for store_open_flags() and store_open_default(). */
#define STORE_OPEN_EXISTING 0x1 /* never create: CORE_ENOTFOUND "no store at
                                   PATH (set --store or AGENTKIT_STORE)" when
                                   there is none at the location */
#define STORE_OPEN_READONLY 0x2 /* the caller only reads: when the store's
                                   files are not writable (a read-only mount,
                                   chmod), open it read-only instead of
                                   failing; writes through such a handle fail
                                   with CORE_ESYS (errno EROFS) */
#define STORE_OPEN_AS_IS 0x4    /* for store_migrate() alone: open a store
                                   whose format is older than this agentkit's
                                   without bringing it up to date (other
                                   operations may fail on it); a backend
                                   with store-wide steps then takes a
                                   database without agentkit's tables for
                                   a store at version 0, even with
                                   STORE_OPEN_EXISTING */

/*
 * store_default_path() then store_open_flags(): the store a command's
 * --store flag (path, or NULL) names.  Errors as both; CORE_EUSAGE for an
 * empty path.
 */
enum core_status store_open_default(const char *path, unsigned flags,
                                    struct store **out, struct core_err *e);

/*
 * Open the store at path (a directory, or a URL: see "Choosing a backend"
 * above), creating it if needed (a directory 0700, files 0600) unless
 * flags has STORE_OPEN_EXISTING.  *out is set on success; close with
 * store_close().  Errors (each backend's header says which of its own
 * conditions give which):
 *   CORE_ENOTFOUND      STORE_OPEN_EXISTING and no store at path
 *   CORE_ESYS           cannot create, open or reach it; a place that
 *                       fails the backend's trust checks (with the fix)
 *   CORE_EUSAGE         a malformed AGENTKIT_STORE_LOCK_TIMEOUT, a URL
 *                       no backend takes
 *   CORE_EPRECONDITION  a store newer than this agentkit (store_migrate()),
 *                       or storage the backend knows to be unsafe
 *
 * Writers wait for one another at most AGENTKIT_STORE_LOCK_TIMEOUT (a
 * duration, default STORE_LOCK_TIMEOUT_MS); when it passes the write fails
 * with CORE_ESYS (errno ETIMEDOUT) and a message that says what it waited
 * for.
 */
#define STORE_LOCK_TIMEOUT_MS 60000
enum core_status store_open_flags(const char *path, unsigned flags,
                                  struct store **out, struct core_err *e);

/* store_open_flags() with flags 0: open, creating the store if needed. */
enum core_status store_open(const char *path, struct store **out,
                            struct core_err *e);
void store_close(struct store *s);      /* NULL is a no-op */

/*
 * The row with this snapshot ID.  CORE_ENOTFOUND when absent ("snapshot 'x'
 * not found").  With STORE_METADATA_ONLY the state is not read at all and
 * the result has no "state" member.
 */
enum core_status store_get(struct store *s, const char *snapshot_id,
                           unsigned flags, json_t **row, struct core_err *e);

/*
 * The session's latest row: greatest createdAt, ties by greater snapshotId,
 * any status.  CORE_ENOTFOUND when the session has no rows; CORE_EINVAL for
 * an empty session ID.
 */
enum core_status store_latest(struct store *s, const char *session_id,
                              unsigned flags, json_t **row, struct core_err *e);

/*
 * The first n messages of snapshot_id's state, each as the text the store
 * keeps it in (the JSON jv_dump() wrote: compact, valid UTF-8), oldest
 * first, handed to fn (borrowed for the call): a long session's history
 * read without being parsed, for a model provider that writes its
 * request from the stored text (model.h's struct model_history).  fn may
 * run inside the store's read: it must not use the store.  Stops at fn's
 * first non-OK status and returns it.  CORE_ENOTFOUND: no such row;
 * CORE_ESYS: the row holds fewer than n messages, or the store cannot be
 * read; CORE_EINVAL: a backend that cannot (store_can_append() 0).
 */
typedef enum core_status (*store_text_fn)(void *ctx, const char *json, size_t n,
                                          struct core_err *e);
enum core_status store_message_texts(struct store *s, const char *snapshot_id, size_t n,
                                     store_text_fn fn, void *ctx, struct core_err *e);

/*
 * Atomic read-modify-write of one row (Genkit's SaveSnapshot).
 *
 * fn is called once, inside the write transaction, with the existing row
 * (NULL if id is empty or the row is absent; without "state" under
 * STORE_METADATA_ONLY) and sets *next to a new reference, or to NULL for no
 * write.  It must be quick (no I/O): the write lock is held.  An fn error is
 * returned and nothing is written.
 *
 * The store then: mints a UUID when id is empty, forces next.snapshotId to
 * id, keeps the existing row's sessionId when it has one, rejects a row
 * without a session (CORE_EINVAL "store requires sessionId to be set on the
 * snapshot"), defaults an empty status to "completed".  Under
 * STORE_METADATA_ONLY a next without "state" keeps the stored state.  A
 * status change wakes every store_wait_change() in every process.
 *
 * *persisted (optional) receives the row as written, or NULL for no write;
 * it may share members (the state) with the row fn returned.
 */
typedef enum core_status (*store_mutate_fn)(const json_t *existing,
                                            json_t **next, void *ctx,
                                            struct core_err *e);
enum core_status store_save(struct store *s, const char *id, unsigned flags,
                            store_mutate_fn fn, void *ctx, json_t **persisted,
                            struct core_err *e);

/*
 * store_save() for a row whose history continues one the caller read or
 * wrote through this handle: the first base->kept messages of the new
 * row's state.messages are, unchanged, the first base->kept messages of row
 * base->id as this handle last read (store_get, store_latest) or wrote it.
 * The store links them to that row's stored chain without reading or
 * comparing them, so a turn's save costs O(its new messages) however long
 * the session.  The caller vouches for the claim (the runtime builds its
 * history so that it holds by construction); with AGENTKIT_STORE_VERIFY=1
 * in the environment at store_open() the store checks it and fails the save
 * with CORE_EINTERNAL when it is wrong (the test suite runs so).  A base the
 * handle does not know, or whose stored messages are gone, is ignored and
 * the store finds the shared history itself, as store_save() does.
 *
 * Without a base the store compares: a handle keeps the history it last
 * wrote and finds the unchanged part of the next by comparing values, and
 * a handle's first save compares bytes with the parent's stored chain.
 */
struct store_base {
	const char *id;         /* a snapshot ID */
	size_t kept;            /* leading messages unchanged from it */
};
enum core_status store_save_on(struct store *s, const char *id, unsigned flags,
                               const struct store_base *base, store_mutate_fn fn,
                               void *ctx, json_t **persisted, struct core_err *e);

/*
 * Write a whole row as given (agent-snap import: restore, migration), replacing
 * a row with the same snapshotId.  The row must have snapshotId and
 * sessionId.  Wakes waiters like any other status change.
 */
enum core_status store_put(struct store *s, const json_t *row,
                           struct core_err *e);

/*
 * One writer per session: the session's writer lock, which a process
 * holds while it resumes the session's latest row and commits its turns
 * (agent-run --on-busy), so two writers never fork the same latest and
 * lose each other's turns.  It is taken whether the session has rows or
 * not; it serializes processes (PostgreSQL: connections), not threads of
 * one process.  Waits up to timeout_ms (0: not at all) for another holder
 * to release it, woken the moment it does (LMDB: a record lock in the
 * store's sessions.lock, the wake-up futex; PostgreSQL: a session-level
 * advisory lock), and a holder that dies releases it.  CORE_ETIMEOUT
 * "session \"ID\" is busy" when it stays held; the store's errors
 * otherwise.  Release it with store_session_unlock(s, session_id) before
 * store_close() (closing releases it too).
 */
enum core_status store_session_lock(struct store *s, const char *session_id,
                                    int64_t timeout_ms, struct core_err *e);
void store_session_unlock(struct store *s, const char *session_id);

/*
 * Until set again, every call on s ends by deadline_ms (core_now_mono_ms()'s
 * clock; <= 0: none, the default), also when the store's server does not
 * answer: a call it cuts short fails with CORE_ETIMEOUT, and the
 * connection it waited on is given up (the next call makes a new one).
 * Without a deadline every call is still bounded (see the backend's
 * header).  An embedded store's calls do not wait on a network and need
 * none.  store_wait_terminal() sets its own for its wait.
 */
void store_set_deadline(struct store *s, int64_t deadline_ms);

/*
 * Give up s's connection to its server, if it has one, until the next
 * call on s, which makes a new one at once (not a reconnect after a loss:
 * no backoff, no window).  For a process that holds a handle it will not
 * use for a while, such as a detached worker during its turns, so that it
 * holds no server connection meanwhile.  Never fails; a no-op inside a
 * transaction and for an embedded store.
 */
void store_park(struct store *s);

/*
 * The store's clock, in ns since the epoch: what rows' times (createdAt,
 * heartbeatAt, updatedAt) are written in and leases are judged by, so that
 * hosts whose clocks disagree agree on the rows.  A server backend measures
 * its server's clock against this host's on every connect (within half a
 * round trip) and corrects this host's by that; an embedded store's clock
 * is this host's.  s NULL: this host's clock (core_now_ns()).
 */
int64_t store_now_ns(const struct store *s);

/*
 * Change notification, level-triggered: read the sequence, then read the
 * rows you care about, then wait with that sequence.  store_wait_change()
 * returns CORE_OK as soon as any status changed since seq (in any process),
 * CORE_ETIMEOUT after timeout_ms (a bounded re-read covers lost signals and
 * heartbeat expiry), never busy-polls.
 */
uint32_t store_change_seq(struct store *s);
enum core_status store_wait_change(struct store *s, uint32_t seq,
                                   int64_t timeout_ms, struct core_err *e);

/* One session in a listing. */
struct store_session_info {
	const char *session_id;      /* borrowed for the callback's duration */
	const json_t *latest;        /* latest row, metadata only; borrowed
	                                (NULL where the backend's recent gives
	                                entry instead) */
	size_t rows;                 /* number of rows (turns, pending rows) */
	const void *entry;           /* the listing's entry of the latest row
	                                (backend.h st_entry_make()), borrowed;
	                                NULL for store_sessions() */
	size_t entry_len;
};

/* Every session, in session ID order.  A non-OK return from fn stops the
 * walk and is returned. */
enum core_status store_sessions(struct store *s,
                                enum core_status (*fn)(const struct store_session_info *,
                                                       void *),
                                void *ctx, struct core_err *e);

/* A session's rows, oldest first (createdAt, then snapshotId); metadata
 * only unless flags lack STORE_METADATA_ONLY.  CORE_ENOTFOUND when none. */
enum core_status store_session_rows(struct store *s, const char *session_id,
                                    unsigned flags,
                                    enum core_status (*fn)(const json_t *row, void *),
                                    void *ctx, struct core_err *e);

/* Called once per deleted row, after the deletion committed (agent-snap
 * removes the row's worker stderr file on this host; the row's worker log
 * lines went in the deletion's transaction).  The ID is borrowed for the
 * call. */
typedef void (*store_deleted_fn)(const char *snapshot_id, void *ctx);

/* Delete every row of a session, and the rows' worker log lines, in one
 * transaction.  CORE_ENOTFOUND when none. *deleted (optional) counts
 * them; fn (optional) hears of each. */
enum core_status store_delete_session(struct store *s, const char *session_id,
                                      size_t *deleted, store_deleted_fn fn, void *ctx,
                                      struct core_err *e);

/*
 * Prune terminal rows: of each session (or only session_id if non-NULL),
 * delete the terminal rows that are beyond the newest keep rows of their
 * session (when keep > 0) and created before before_ns (when before_ns is
 * not 0); with both limits a row must fail both to go (like restic's
 * --keep-last plus --keep-within).  The latest row of a session and
 * pending/aborting rows are never pruned.  Messages shared with rows that
 * stay are kept; the deleted rows' worker log lines go with them, in the
 * same transaction.  CORE_ENOTFOUND for a session_id without rows.  *deleted
 * and fn as for store_delete_session().
 */
enum core_status store_prune(struct store *s, const char *session_id,
                             size_t keep, int64_t before_ns, size_t *deleted,
                             store_deleted_fn fn, void *ctx, struct core_err *e);

/*
 * Worker logs: a detached run's log lines, kept in the store with its row
 * (an LMDB database, a PostgreSQL table), so that any process on any host
 * reads them (agent-snap worker-log) and store_delete_session() and
 * store_prune() delete a row's lines in the transaction that deletes the
 * row.
 *
 * store_log_append() appends one line (text without its newline, cut to
 * STORE_LOG_LINE_MAX bytes and made valid UTF-8) at at_ns for snapshot
 * snapshot_id, in a write of its own; lines of one ID read back in the
 * order of their appends.  The row must exist (a line for a row already
 * deleted is dropped: CORE_ENOTFOUND), so rm leaves no lines behind.  It
 * costs about one small commit (docs/store.md) and is bounded: by the
 * lock timeout as every write is, and on a server by STORE_LOG_APPEND_MS
 * (or the handle's earlier deadline: store_set_deadline()), without ever
 * waiting for a lost connection to come back (the line is dropped,
 * CORE_ESYS, and the handle's next other call reconnects).  A caller that
 * must not fail on it ignores its status.  No status change: nobody is
 * woken.
 *
 * store_log_lines() calls fn with each line of snapshot_id, oldest first
 * (outside any transaction); a non-OK return from fn stops the walk and
 * is returned.  CORE_ENOTFOUND "no worker log for snapshot 'ID'" when it
 * has none.
 */
#define STORE_LOG_LINE_MAX 16384
#define STORE_LOG_APPEND_MS 2000
enum core_status store_log_append(struct store *s, const char *snapshot_id, int64_t at_ns,
                                  const char *text, struct core_err *e);
typedef enum core_status (*store_log_fn)(int64_t at_ns, const char *text, void *ctx);
enum core_status store_log_lines(struct store *s, const char *snapshot_id, store_log_fn fn,
                                 void *ctx, struct core_err *e);

/*
 * Read shaping (runtime-semantics §1.7-1.8), in place on a row the caller
 * owns: a pending/aborting row whose heartbeatAt is more than its
 * heartbeat timeout before now reads "expired" (the reader's timeout_ms,
 * or the longer one its worker wrote on it: store_row_hb_timeout()); an
 * empty status reads "completed"; a missing or zero updatedAt reads as
 * createdAt.  The STORE_INFO_KEY member is removed, so a shaped row has
 * Genkit's shape.
 */
void store_shape(json_t *row, int64_t now_ns, int64_t timeout_ms);
/* The heartbeat timeout a row's reader uses: the one its worker wrote on
 * it (STORE_INFO_KEY's "heartbeatTimeout", ms: the worker's lease) when it
 * is longer than the reader's dflt_ms, else dflt_ms. */
int64_t store_row_hb_timeout(const json_t *row, int64_t dflt_ms);

/* Terminal per Genkit: anything but "pending" and "aborting". */
int store_status_terminal(const char *status);

/* ---- additions beyond Genkit's interface ---- */

/*
 * Format migrations (agent-snap migrate).  A store's format has a version,
 * and this agentkit knows the steps that bring an older store up to its
 * own (its "latest"), each applied once, in order.  A store newer than
 * this agentkit knows is refused at open: CORE_EPRECONDITION "the store at
 * LOCATION has schema version N, newer than this agentkit's M: upgrade
 * agentkit".
 *
 * A backend with store-wide steps applies the missing ones on every open
 * (one process at a time), unless STORE_OPEN_AS_IS, which leaves them to
 * store_migrate().  A backend without them (it versions each record
 * instead) is always at its latest and has nothing to migrate.  Each
 * backend's header says which it is.
 *
 * store_migrate() fills m: the backend's name, the store's version (after
 * the steps; with STORE_MIGRATE_DRY_RUN before them, nothing changed),
 * this agentkit's latest, and steps, a new array (the caller
 * json_decref()s it, also on failure) of {"version": N, "statements":
 * [the step's statements, in order]}: the steps applied by this call
 * (none when another process applied them first), or with
 * STORE_MIGRATE_DRY_RUN those pending.  The steps are applied in one
 * transaction: all of them or none.  Errors: the storage's (CORE_ESYS),
 * CORE_EPRECONDITION for a newer store, CORE_ENOMEM.
 */
#define STORE_MIGRATE_DRY_RUN 0x1
struct store_migration {
	const char *backend;    /* the backend's name (static) */
	long version;
	long latest;
	json_t *steps;
};
enum core_status store_migrate(struct store *s, unsigned flags, struct store_migration *m,
                               struct core_err *e);

/*
 * What a person asks of the history and Genkit's row has no place for: the
 * runtime records it in the row's STORE_INFO_KEY member, an object
 * {"agent", "model", "title" (the session's first user text, shortened),
 * "usage" (the turn's token counts), "sessionUsage" (the session's, summed
 * over its turns), "heartbeatTimeout" (a pending row's:
 * its worker's heartbeat timeout, ms, which readers use)}, every member
 * optional.  The store
 * keeps it with the metadata (a metadata-only read has it); read shaping
 * removes it; export and import carry it.
 */
#define STORE_INFO_KEY "agentkit"

/*
 * Queued runs (agent-run --queue, agent-worker; docs/queue.md).  A queued
 * run is a pending row whose STORE_INFO_KEY object carries
 *   "queue": {"name", "agent", "concurrency", "attempt", "maxAttempts"?,
 *             "notBefore", "ready", "lease"}   (times: ns, the store's clock)
 *   "run":   {"args": [agent-run's options], "inputs": [AgentInput, ...]}
 * and, once a worker claimed it, "epoch" and "worker" as a detached run's
 * row does.  attempt counts the claims; an unclaimed row (attempt 0) has
 * no heartbeatAt, so it never reads expired while it waits.
 *
 * "ready" (when a worker may next claim it) and "lease" (until when its
 * claim holds; 0 unclaimed) follow from the rest of the row, and every
 * save recomputes them (store_queue_project()): unclaimed, ready is
 * notBefore; claimed, lease is heartbeatAt plus the row's heartbeat
 * timeout and ready is the lease plus a backoff that doubles with each
 * attempt from STORE_QUEUE_BACKOFF_MS (capped at STORE_QUEUE_BACKOFF_MAX_MS;
 * none for an aborting row or one past the attempts it sets, which only
 * need settling).  Each backend indexes the pending and aborting rows that
 * have "queue" by those numbers, so a claim never scans other rows.
 */
#define STORE_QUEUE_BACKOFF_MS 500
#define STORE_QUEUE_BACKOFF_MAX_MS (5 * 60 * 1000)
#define STORE_QUEUE_MAX_ATTEMPTS 3
#define STORE_QUEUE_NAME_MAX 128

/* Recompute row's queue "ready" and "lease" in place (a row without
 * "queue" is left alone).  Non-zero when out of memory. */
int store_queue_project(json_t *row);

/* The queue row's "queue" object, or NULL when row is not a queued run. */
const json_t *store_queue_of(const json_t *row);

/*
 * Take the queued row out of the queue for good, settled: row (a copy the
 * caller owns, for a save's next) gets status, finishReason reason, error
 * err (consumed; NULL: none) and updatedAt now_ns, and loses heartbeatAt
 * and its info's "queue" and "run".  How a claim settles a run, and how
 * agent-abort settles one no worker holds.  CORE_ENOMEM.
 */
enum core_status store_queue_settle(json_t *row, const char *status, const char *reason,
                                    json_t *err, int64_t now_ns, struct core_err *e);

/*
 * Claim one run of the queues (NULL-terminated names) for this process:
 * among the indexed rows of those queues whose ready time has come by
 * the store's clock, the one ready first (ties by snapshot ID) whose
 * agent is under its concurrency limit counted over every queue (claims
 * whose lease is live), in one transaction that no other claimer (any
 * host: SKIP LOCKED on PostgreSQL) interleaves.  What the claim writes:
 *   - a live claim (its lease not yet over) is left alone;
 *   - an aborting row nobody holds any more settles "aborted";
 *   - a row whose attempts are spent (its "maxAttempts", else
 *     max_attempts, the claimer's, else STORE_QUEUE_MAX_ATTEMPTS) settles
 *     "failed", its error
 *     UNAVAILABLE "gave up after N attempts: worker lost (...)";
 *   - any other is claimed: attempt and epoch + 1, worker {host, pid} (this
 *     process: jv_host_pid()), heartbeatAt now.
 * Settling rows is part of claiming: it goes on to the next candidate
 * (at most STORE_CLAIM_SETTLE_MAX per call).  CORE_OK with *row the
 * claimed row (new reference, unshaped, with its info), or NULL when the
 * call settled that many and claimed none (claim again); CORE_ENOTFOUND
 * when nothing is ready, *next_ns (optional) then the store-clock time
 * the next indexed row of those queues becomes ready (0: none).  Errors:
 * the storage's.
 */
#define STORE_CLAIM_SETTLE_MAX 64
enum core_status store_claim(struct store *s, const char *const *queues,
                             int64_t max_attempts, json_t **row, int64_t *next_ns,
                             struct core_err *e);

/*
 * Every queued run the index holds (pending and aborting rows with
 * "queue"), metadata only and unshaped (the info is kept for the
 * listing), in queue then ready order; stop at fn's first non-OK status.
 */
enum core_status store_queued(struct store *s,
                              enum core_status (*fn)(const json_t *row, void *),
                              void *ctx, struct core_err *e);

/* Which sessions store_recent_sessions() lists. */
struct store_session_filter {
	const char *agent;       /* only sessions whose latest row names this agent, or NULL */
	int64_t since_ns;        /* only sessions updated at or after this time, or 0 */
	int64_t hb_timeout_ms;   /* for the shaped status */
};

/*
 * Sessions newest first, one line at a time: fn is called with each
 * session's line (borrowed for the call), an object {"sessionId",
 * "snapshotId" (the latest row), "status" (shaped), "updatedAt",
 * "snapshots" (the row count), and, when the latest row records them,
 * "agent", "model", "title", "usage" (its sessionUsage), "finishReason"
 * (when not empty)}, at most limit lines (0: all) of the sessions f
 * matches; a non-OK return from fn stops the walk and is returned.
 *
 * The order is the store's clock: the latest row's updatedAt (as
 * store_shape() shows it; the rows' updatedAt comes from store_now_ns())
 * descending, then session ID ascending (bytes), and sessions whose
 * latest row has no valid time last.  Each backend keeps an index in that
 * order, so the first N lines cost O(N) (with f->since_ns the walk ends at
 * the first older session; f->agent skips the others) and memory stays at
 * one batch of rows.  A session is listed at most once; one updated while
 * the listing runs is listed where the listing finds it, or not at all
 * when it moved ahead of the listing's place.
 */
struct store_line;
typedef enum core_status (*store_line_fn)(struct store_line *line, void *ctx);
/* A line's JSON text: compact, its members in the order above, no
 * newline; *len its length.  Borrowed, as the line is. */
const char *store_line_text(const struct store_line *l, size_t *len);
/* The same line as a JSON object, parsed on the first call; borrowed, as
 * the line is; NULL when out of memory. */
json_t *store_line_json(struct store_line *l);
enum core_status store_sessions_recent(struct store *s, const struct store_session_filter *f,
                                       size_t limit, store_line_fn fn, void *ctx,
                                       struct core_err *e);

/* store_sessions_recent() as one new array of the lines (an empty one when
 * none match): O(sessions) memory. */
enum core_status store_recent_sessions(struct store *s,
                                       const struct store_session_filter *f,
                                       json_t **list, struct core_err *e);

/*
 * Check a snapshot or session ID: 1..STORE_ID_MAX bytes of UTF-8 without
 * control characters.  CORE_EINVAL with "invalid <what> '...': why".
 */
#define STORE_ID_MAX 240
enum core_status store_check_id(const char *id, const char *what,
                                struct core_err *e);

/* A row store_put() accepts: an object with valid string snapshotId and
 * sessionId.  CORE_EINVAL with the reason. */
enum core_status store_check_row(const json_t *row, struct core_err *e);

/*
 * store_put() for many rows in one write transaction: all are written or,
 * on any error, none.  rows[i] are borrowed.
 */
enum core_status store_put_rows(struct store *s, json_t *const *rows, size_t n,
                                struct core_err *e);

/*
 * A source of rows for store_put_stream().  next() sets *row to the next
 * row (a new reference the store releases) or to NULL at the end; rewind()
 * starts again from the first row: the store calls it before the first
 * row and again whenever it retries its transaction.
 */
struct store_rows {
	enum core_status (*next)(void *ctx, json_t **row, struct core_err *e);
	enum core_status (*rewind)(void *ctx, struct core_err *e);
	void *ctx;
};

/*
 * store_put() for every row src gives, in one write transaction: all are
 * written or, on any error (the source's too), none.  Rows are written as
 * they come, so memory stays at one row plus what the backend's
 * transaction holds (its header says how much).  The store's write lock
 * is held while src is read: give it a file, not a
 * slow pipe (agent-snap import spools a pipe to a file first).  *count
 * (optional) receives the number of rows written.
 */
enum core_status store_put_stream(struct store *s, const struct store_rows *src,
                                  size_t *count, struct core_err *e);

/*
 * The heartbeat timeout used by read shaping: the --heartbeat-timeout
 * flag's value when not NULL, else AGENTKIT_HEARTBEAT_TIMEOUT (a duration:
 * "250ms", "2s", "1m"), else Genkit's 60 s.  CORE_EUSAGE for a malformed or
 * non-positive value.
 */
#define STORE_HEARTBEAT_TIMEOUT_MS 60000
enum core_status store_heartbeat_timeout(const char *flag, int64_t *ms,
                                         struct core_err *e);

/*
 * How a shaped terminal row ended, as a status whose exit code is
 * agentkit's: completed with finish reason stop/other/unknown/empty →
 * CORE_OK; length/blocked (or any other reason that carries no result) →
 * CORE_UNUSABLE; interrupted → CORE_INTERRUPTED; failed → CORE_FAILED;
 * aborted → CORE_ABORTED; expired → CORE_EXPIRED; an unknown status →
 * CORE_FAILED.
 */
enum core_status store_outcome(const json_t *row);

/*
 * Block until every row in ids[0..n) reads terminal after shaping
 * (store_shape with hb_timeout_ms; "aborting" is not terminal, expiry is)
 * or is missing.  Level-triggered: reads, then sleeps on
 * store_wait_change() bounded by the next possible expiry, poll_ms and the
 * deadline.  rows[i] receives the shaped terminal row (full, or without
 * state under STORE_METADATA_ONLY), or NULL when missing; the caller
 * json_decref()s them.  deadline_ms is on core_now_mono_ms()'s clock, < 0
 * for none: CORE_ETIMEOUT when it passes (rows already settled are kept).
 * progress (optional) is called after each read with the number of rows
 * still unsettled.  A store on a server that goes away mid-wait (a
 * restart, a failover) does not end the wait: a read the lost connection
 * fails (CORE_ESYS, errno ECONNRESET or ECONNREFUSED) leaves its row
 * unsettled, and store_wait_change() re-establishes the connection
 * within its timeout; once the backend's reconnect window has passed
 * the wait fails with CORE_ESYS
 * (errno ETIMEDOUT) and the backend's message.
 */
enum core_status store_wait_terminal(struct store *s, const char *const *ids,
                                     size_t n, unsigned flags,
                                     int64_t hb_timeout_ms, int64_t deadline_ms,
                                     int64_t poll_ms, json_t **rows,
                                     void (*progress)(size_t unsettled, void *),
                                     void *ctx, struct core_err *e);

#endif
