/*
 * pg.h - the PostgreSQL backend's parts, shared by the files of store/pg/
 * (nothing else includes this; store/pg/ is the only place that includes
 * <libpq-fe.h>, through pq.h, which loads libpq on the first open).  See store.h for what the store promises and backend.h
 * for what each operation of a backend must guarantee.
 *
 * The files, one reason to change apiece:
 *   backend.c  the backend's row of store.c's table: its operations
 *   pq.c       libpq itself, loaded by dlopen() on the first open
 *   conn.c     the connection: libpq parameters, the connect timeout,
 *              queries answered within a bound, SQLSTATEs as
 *              core_status, messages scrubbed of credentials, reconnects
 *   open.c     the handle: opened (settings, connection, schema) and
 *              closed
 *   schema.c   the schema: versioned steps applied on open under an
 *              advisory lock
 *   rows.c     the row codec: a row as its metadata, its state and its
 *              message chain, and back, byte for byte
 *   ops.c      the store operations over those, in transactions that
 *              retry on serialization failures and races
 *   wake.c     wake-ups: LISTEN/NOTIFY on the handle's connection
 *   lock.c     session writer locks: session-level advisory locks
 *
 * What the store looks like from store.h, on this backend (for many hosts
 * sharing one database):
 *
 *   Locations: "postgresql://" and "postgres://" are libpq's URIs, passed
 *   to libpq as they are (TLS settings, several hosts,
 *   options=-csearch_path=NAME for a schema of its own); the whole
 *   location "pg:" leaves the connection to libpq's own PG* variables and
 *   service files.  "pg:x" or "postgresql:x" is a relative directory (the
 *   LMDB backend's).
 *
 *   Open: the schema is created (or upgraded) on open, under an advisory
 *   lock, in the connection's current schema, unless STORE_OPEN_EXISTING
 *   (then CORE_ENOTFOUND "no store at URL"); a newer schema than this
 *   agentkit knows is CORE_EPRECONDITION.  An unreachable server is
 *   CORE_ESYS within the connect timeout (PG_CONNECT_TIMEOUT seconds
 *   unless the URL's connect_timeout or PGCONNECT_TIMEOUT sets another).
 *
 *   Writers: lock waits end after AGENTKIT_STORE_LOCK_TIMEOUT (the
 *   session's lock_timeout), CORE_ESYS with errno ETIMEDOUT.
 *
 *   Wake-ups: store_wait_change() sleeps on the connection's LISTEN.
 *
 *   Reconnects: a connection lost after open (a restart of the server) is
 *   re-established with backoff within AGENTKIT_STORE_LOCK_TIMEOUT from its
 *   loss (the reconnect window of store.h); past it, CORE_ESYS (errno
 *   ETIMEDOUT) "lost the connection to the store at 'URL' and could not
 *   reconnect within 60s: REASON".
 *
 *   Migrations: store-wide, SQL steps (schema.c), applied by every open
 *   under an advisory lock unless STORE_OPEN_AS_IS; with STORE_OPEN_AS_IS
 *   a database without agentkit's tables is a store at version 0, even
 *   with STORE_OPEN_EXISTING.
 *
 * Layout (schema version 9, tables in the connection's current schema;
 * no foreign keys: agentkit_chain() locks the node a write hangs from):
 *
 *   agentkit_snapshots  snapshot_id (COLLATE "C", key), session_id,
 *                       created_ns (createdAt in ns: the index time),
 *                       status, meta (the row's JSON without "state"),
 *                       state_pos (where "state" sits among its keys;
 *                       NULL: no state), and the state in the same tuple
 *                       (step 9; agentkit_states before): body (the state
 *                       without "messages"; NULL: no state), msg_pos
 *                       (where "messages" sat; NULL: not a chain), tail
 *                       and count of its message chain (tail indexed:
 *                       agentkit_release() asks whether a row ends at a
 *                       node).  Heartbeats and metadata reads touch only
 *                       this table; "latest" is one backward scan of
 *                       (session_id, created_ns, snapshot_id).
 *   agentkit_nodes      hash = SHA-256(prev hash or 32 zero bytes |
 *                       message JSON), prev, depth, body: a message is
 *                       stored once per distinct history, shared by every
 *                       snapshot (and fork) whose messages start with that
 *                       history; the functions agentkit_chain() and
 *                       agentkit_release() add and collect them
 *   agentkit_worker_log  snapshot_id, line_id (an identity: append
 *                       order), at_ns, body: a detached worker's log lines
 *                       (wlog.c), keyed (snapshot_id, line_id); deleted
 *                       with their row, in its transaction (step 3)
 *   agentkit_queue      snapshot_id, queue, agent, concurrency, ready_ns,
 *                       lease_ns: the queued runs (store.h "Queued
 *                       runs"), kept from each row's metadata by
 *                       triggers that fire for rows naming a queue, and
 *                       for a new row by the statement that inserts it
 *                       (agentkit_queue_put()); claims pick from it (steps
 *                       4, 7 and 9)
 *   agentkit_recent     session_id, updated_ns, latest_id, row_count,
 *                       entry, latest_ns: each session's latest row, its
 *                       time (st_updated_ns()), the session's row count,
 *                       the latest row's listing entry (st_entry_make();
 *                       NULL when its writer gave none) and its
 *                       created_ns; kept by a trigger on updates and
 *                       deletions, and for a new row by the statement
 *                       that inserts it (put_row, agentkit_put());
 *                       indexed (updated_ns DESC, session_id), the order
 *                       of store_sessions_recent() (steps 5, 6, 8 and 9,
 *                       recent.c)
 *   agentkit_schema_version  the versions applied
 *
 * A new row (a turn's) goes in by one statement of plain SQL: its new
 * message nodes hashed by the writer and sent with their bodies as binary
 * arrays, the row with its state, and its session's agentkit_recent entry
 * (ops.c put_row); no PL/pgSQL runs, which a new server process would
 * load and compile first.  Every other write goes through agentkit_put().
 *
 * A long session's turn (store_can_append()): a read with
 * STORE_LAST_MESSAGE joins the state's tail node alone, never walking its
 * chain, and remembers the chain (pg_ref); a save with STORE_APPEND sends
 * only the new messages, hung from the base's chain (agentkit_put()'s
 * base and walk), from what the handle remembers of the base or else from
 * its stored state: reads and writes O(new).  The history such a turn
 * sends a model (store_message_texts()) is one query: the chain walked
 * back from the tail, each node's body as it is stored, never parsed.  A
 * whole session with its states (export) is one round trip: its rows
 * without messages and every node of their histories once, the rows'
 * messages placed from those.
 *
 * A status change of a stored row, or its deletion, sends NOTIFY on
 * PG_CHANNEL with the snapshot ID, at commit; heartbeats and new rows
 * never do (NOTIFY serializes the commits that send it).
 */
#ifndef STORE_PG_PG_H
#define STORE_PG_PG_H

#include <stdint.h>

#include "../backend.h"
#include "../internal.h"
#include "pq.h"

#define PG_CHANNEL "agentkit_status"
/* The server's clock in µs since the epoch, as text (pg_clock()). */
#define PG_CLOCK_SQL "(extract(epoch FROM clock_timestamp()) * 1000000)::int8"
/* The schema step from which agentkit_recent keeps listing entries
 * (schema.c step 6): saves hand theirs over, listings read them. */
#define PG_STEP_ENTRIES 6
/* The schema step from which a new row goes in by plain SQL (schema.c
 * step 8, ops.c put_new) and agentkit_recent keeps latest_ns. */
#define PG_STEP_PLAIN 8
/* The schema step from which a row's state is in its own tuple
 * (agentkit_snapshots' body, msg_pos, tail, count; schema.c step 9, ops.c
 * put_row). */
#define PG_STEP_ROW 9
#define PG_HASH_HEX 64          /* a node hash, hex */
#define PG_NREFS 4
#define PG_TRIES 8              /* a transaction's tries on a race */
#define PG_BATCH 256            /* rows or sessions per listing query */
#define PG_CONNECT_TIMEOUT "10" /* seconds, unless the URL or PGCONNECT_TIMEOUT says */
/* TCP_USER_TIMEOUT (ms), unless the URL's tcp_user_timeout says: data
 * (or a keepalive probe) unacknowledged this long ends the connection. */
#define PG_TCP_USER_TIMEOUT "10000"

/* The message chain of a row this handle last read or wrote: what a
 * save's base (store_save_on) refers to. */
struct pg_ref {
	char id[STORE_ID_MAX + 1];
	char tail[PG_HASH_HEX + 1];
	uint32_t count;
};

/*
 * The history this handle wrote last, for saves without a base (an import,
 * a worker's final row): the part of the next row's history already
 * stored is found by comparing trees (jv_same()), and only the rest is
 * sent.  msgs are private deep copies; tail is their chain's last node.
 * Node keys are content addresses, so a match holds whatever other
 * processes did since; a chain collected since is noticed by the server.
 */
struct pg_cache {
	json_t *msgs;           /* array of copies, or NULL */
	char tail[PG_HASH_HEX + 1];
	unsigned long writes;   /* histories written through the handle */
};

/* A statement this handle ran: prepared on the connection from its
 * second use (from its first in a pipeline, where the PREPARE rides in
 * the same round trip), so a loop of saves is planned once while a
 * one-shot command pays no extra round trip. */
struct pg_prep {
	char *sql;
	unsigned uses;
	int prepared;
};
#define PG_NPREP 24

/* A handle: store.c's head, then this backend's own. */
struct pg_store {
	struct store head;
	PGconn *conn;
	char where[256];        /* the location for messages, redacted */
	char *secret;           /* the password in the location, scrubbed from
	                           libpq's texts; NULL when none */
	char *conninfo;         /* what pg_connect() was given, for a parked
	                           handle's next connect (holds the secret) */
	int parked;             /* store_park(): conn is NULL until the next
	                           statement connects again */
	int in_txn;             /* a transaction is open (no reconnects) */
	int64_t retry_at;       /* no reconnect before (core_now_mono_ms()) */
	int64_t backoff_ms;     /* the wait after the last failed reconnect */
	int64_t lost_at;        /* when the connection was found lost; 0: up */
	int dropped;            /* the last failure lost the connection */
	char last_state[6];     /* the SQLSTATE of the last failure, or "" */
	int listening;          /* LISTEN sent on this connection */
	uint32_t seq;           /* notifications seen (change_seq) */
	int verify;             /* AGENTKIT_STORE_VERIFY: check bases */
	long steps;             /* the schema's steps this handle uses
	                           (pg_schema()) */
	int64_t lock_ms;        /* lock_timeout */
	int64_t connect_ms;     /* the connect timeout: with lock_ms, the bound
	                           on an answer (pg_exec()) */
	int cut;                /* the last statement's answer did not come in
	                           time: the connection was given up */
	int cut_by_caller;      /* ... by store_set_deadline()'s deadline */
	int64_t extra_ms;       /* a statement's own wait beyond the bound (a
	                           session lock's), 0 for the others */
	struct pg_ref refs[PG_NREFS];
	unsigned next_ref;
	struct pg_cache mc;
	struct pg_prep prep[PG_NPREP];
};

static inline struct pg_store *pg_store(struct store *s)
{
	return (struct pg_store *)s;
}

/* ---- conn.c ---- */

/*
 * Every statement below is answered within a bound, also when the network
 * goes silent (no packet back, no reset): lock_ms (the server's own lock
 * waits) plus connect_ms, or the caller's deadline (head.deadline, from
 * store_set_deadline()) when it comes first.  Past it the connection is
 * given up, without a retry: CORE_ESYS (errno ETIMEDOUT) "WHAT: the store
 * at 'URL' did not answer within 70s (the network may be cut); ...", or
 * CORE_ETIMEOUT at the caller's deadline.  The connection is non-blocking
 * and every wait is a poll() on its socket.
 */

/* One simple query (several statements may be), answered within the
 * bound: the result as PQexec() gives it; NULL when the connection failed
 * or was given up. */
PGresult *pg_query(struct pg_store *s, const char *sql);
/*
 * Run one statement with text parameters (NULL values are SQL NULLs) and
 * text results.  CORE_OK with *res (PQclear it) on success; otherwise
 * the failure as pg_fail() says, *res NULL.  A dropped connection is
 * re-established once, before the statement, when no transaction is open.
 */
enum core_status pg_exec(struct pg_store *s, const char *sql, int n,
                         const char *const *params, PGresult **res, const char *what,
                         struct core_err *e);
/* pg_exec() with binary results (each type's send format: an int8 is 8
 * bytes big-endian, text and bytea their bytes; PQgetlength() gives the
 * length, and each value is followed by a NUL byte as in text results). */
enum core_status pg_exec_binary(struct pg_store *s, const char *sql, int n,
                                const char *const *params, PGresult **res, const char *what,
                                struct core_err *e);
/* pg_exec() without a result: "BEGIN" and "COMMIT" also keep in_txn. */
enum core_status pg_cmd(struct pg_store *s, const char *sql, const char *what,
                        struct core_err *e);
/*
 * One round trip for several statements: q[0..n) (n at most PG_PIPE_MAX)
 * sent in libpq's pipeline mode with one sync (a statement's parameters
 * in binary where its formats say so: the server must know their types
 * from the SQL, casts), each prepared from its
 * second use as pg_exec()'s are.  CORE_OK when every one succeeded, with
 * each q[i].res (pg_pipeline_clear() them); otherwise the first failure
 * as pg_fail() says and no results: the server skipped the statements
 * after it, and a transaction the pipeline began or was in is left
 * failed (in_txn stays set: roll back).  "BEGIN" and "COMMIT" keep
 * in_txn.  Outside a transaction, a pipeline that begins none runs as one
 * implicit transaction, which its sync commits (a failure to commit is
 * the pipeline's failure) or rolls back.  A pipeline that starts outside a
 * transaction reconnects first when the connection dropped, and is sent
 * once more on a new connection when it broke on the way, unless it
 * commits (it holds a COMMIT, or begins none).
 */
struct pg_stmt {
	const char *sql;
	int n;
	const char *const *params;
	PGresult *res;
	const int *lengths;     /* NULL, or each binary parameter's length */
	const int *formats;     /* NULL (all text), or 1 for each binary one */
};
#define PG_PIPE_MAX 4
enum core_status pg_pipeline(struct pg_store *s, struct pg_stmt *q, int n, const char *what,
                             struct core_err *e);
void pg_pipeline_clear(struct pg_stmt *q, int n);
/* Several statements without parameters as one simple query (a schema
 * step), inside the caller's transaction. */
enum core_status pg_script(struct pg_store *s, const char *sql, const char *what,
                           struct core_err *e);
/* End a failed transaction (errors ignored: the connection may be gone). */
void pg_rollback(struct pg_store *s);
/* Whether the last failed statement lost a race worth retrying its
 * transaction for: serialization failure, deadlock, a message node
 * collected meanwhile, a concurrent insert of the same key, or the
 * connection (the retry waits for it in pg_ensure(); a COMMIT whose answer
 * was lost may have committed, and the retry's fn then sees that row). */
int pg_retryable(const struct pg_store *s);
/* Sleep ms milliseconds (a signal cuts it short). */
void pg_nap(int64_t ms);
/*
 * Re-establish a lost connection (LISTEN is sent again and the change
 * sequence moves: a notification may have been lost), with attempts 0.2 s
 * apart, doubling to 5 s, each bounded by the connect timeout.  The
 * reconnect window is AGENTKIT_STORE_LOCK_TIMEOUT (lock_ms) from when the
 * handle found the connection lost: past it, CORE_ESYS (errno ETIMEDOUT)
 * "lost the connection to the store at 'URL' and could not reconnect
 * within 60s: REASON", and then one attempt whenever the backoff allows,
 * failing at once in between.  Before it, pg_reconnect() sleeps between
 * attempts until one succeeds (CORE_OK) or until `until` (monotonic ms)
 * comes: CORE_ETIMEOUT with the last reason.
 */
enum core_status pg_reconnect(struct pg_store *s, int64_t until, struct core_err *e);
/* Before a statement: pg_reconnect() when the connection is lost.  A
 * handle that LISTENs (a waiter: agent-wait, a worker's abort watch)
 * makes one attempt when the backoff allows and fails at once (CORE_ESYS,
 * errno ECONNREFUSED) otherwise, since it reconnects in pg_wait_change()
 * within the time its caller waits; any other handle waits here within
 * the window, so that a restart of the server fails no write. */
enum core_status pg_ensure(struct pg_store *s, struct core_err *e);
/* The text of e scrubbed of the location's password and URLs. */
void pg_scrub(const struct pg_store *s, char *msg, size_t n);
/*
 * Connect s (s->where set) with conninfo, libpq's dbname: a URL, or ""
 * for "pg:", which leaves everything to PG* variables and service files;
 * the password it names is kept in s->secret, for pg_scrub().
 */
enum core_status pg_connect(struct pg_store *s, const char *conninfo, struct core_err *e);
/* The store's clock from the server's (server_us: µs since the epoch,
 * PG_CLOCK_SQL's), read in a round trip between t0 and t1 (core_now_ns()). */
void pg_clock(struct pg_store *s, int64_t server_us, int64_t t0, int64_t t1);

/* ---- schema.c ---- */

/* Check the schema's version; create it (unless STORE_OPEN_EXISTING:
 * CORE_ENOTFOUND) or upgrade it under an advisory lock, unless
 * STORE_OPEN_AS_IS (store.h).  A newer schema is CORE_EPRECONDITION.
 * AGENTKIT_TEST_PG_SCHEMA_STEPS=N (tests only) makes this agentkit know
 * only the first N steps, to make a store of an older version. */
enum core_status pg_schema(struct pg_store *s, unsigned flags, struct core_err *e);
/* store_migrate() (store.h): the schema's steps, shown or applied. */
enum core_status pg_migrate(struct store *s, unsigned flags, struct store_migration *m,
                            struct core_err *e);

/* ---- lock.c ---- */

/* store_session_lock() and store_session_unlock() (store.h). */
enum core_status pg_session_lock(struct store *s, const char *session_id,
                                 int64_t timeout_ms, struct core_err *e);
void pg_session_unlock(struct store *s, const char *session_id);
/* store_park() (store.h): the connection closed, s->parked set; the next
 * pg_ensure() or pg_reconnect() connects again at once. */
void pg_park(struct store *s);

/* ---- rows.c ---- */

/* A row as its columns, for a write. */
struct pg_cols {
	const char *id, *sid, *status;
	char created[24];       /* created_ns */
	char state_pos[16];     /* "" (NULL): no state */
	struct core_buf meta;   /* the row without "state" */
	int has_state;
	struct core_buf body;   /* the state without "messages" (when it had) */
	char msg_pos[16];       /* "": the state is not a chain */
	json_t *msgs;           /* the messages (borrowed), or NULL */
};

/* Split row (valid snapshotId and sessionId) into c; pg_cols_release(). */
enum core_status pg_cols_of(const json_t *row, struct pg_cols *c, struct core_err *e);
void pg_cols_release(struct pg_cols *c);

/*
 * The columns of a read joined back into the row as it was written:
 * meta, then "state" at state_pos, its "messages" at msg_pos: msgs is a
 * JSON array text of the chain's messages in any order, depths ("3,2,1")
 * where each goes (1 is the first).  NULL texts are absent parts.  count
 * is what the chain must hold (anything else is a corrupt store).
 */
enum core_status pg_row_join(const char *meta, const char *state_pos, const char *body,
                             const char *msg_pos, const char *msgs, const char *depths,
                             const char *count, json_t **row, struct core_err *e);

/* pg_row_join() with the messages already an array in order (arr,
 * stolen; NULL: the row has no chain, which a state with msg_pos set must
 * have: corrupt). */
enum core_status pg_row_build(const char *meta, const char *state_pos, const char *body,
                              const char *msg_pos, json_t *arr, json_t **row,
                              struct core_err *e);
/* One message node's body parsed as a row's messages are (NULL: corrupt,
 * in e). */
json_t *pg_node_parse(const char *body, struct core_err *e);

/* The listing entry of row (st_entry_make()) appended to out as hex
 * text, and its listing time (st_updated_ns()) in decimal in listed:
 * agentkit_put()'s p_entry and p_listed (ops.c).  CORE_ENOMEM. */
enum core_status pg_entry_hex(const char *sid, const json_t *row, struct core_buf *out,
                              char listed[24]);

/* ---- the handle's chain memory (ops.c) ---- */

void pg_ref_remember(struct pg_store *s, const char *id, const char *tail, uint32_t count);
void pg_ref_forget(struct pg_store *s, const char *id);
const struct pg_ref *pg_ref_find(const struct pg_store *s, const char *id);

/* ---- the operations (backend.c's table; see backend.h) ---- */

enum core_status pg_open(const char *location, unsigned flags, struct store **out,
                         struct core_err *e);                           /* open.c */
void pg_close(struct store *s);                                         /* open.c */
uint32_t pg_change_seq(struct store *s);                                /* wake.c */
enum core_status pg_wait_change(struct store *s, uint32_t seq, int64_t timeout_ms,
                                struct core_err *e);                    /* wake.c */
enum core_status pg_get(struct store *s, const char *snapshot_id, unsigned flags,
                        json_t **row, struct core_err *e);
enum core_status pg_message_texts(struct store *s, const char *snapshot_id, size_t n,
                                  store_text_fn fn, void *ctx, struct core_err *e);
enum core_status pg_latest(struct store *s, const char *session_id, unsigned flags,
                           json_t **row, struct core_err *e);
enum core_status pg_save(struct store *s, const char *id, unsigned flags,
                         const struct store_base *base, store_mutate_fn fn, void *ctx,
                         json_t **persisted, struct core_err *e);
enum core_status pg_put_stream(struct store *s, const struct store_rows *src,
                               size_t *count, struct core_err *e);
/* Each row of a listing's batch R (session_id, row count, the latest
 * row's meta: its first three columns) as one store_session_info to FN;
 * stops at the first non-OK.  R stays the caller's. */
enum core_status pg_sessions_each(PGresult *r, store_session_fn fn, void *ctx,
                                  struct core_err *e);
/* The recent operation (recent.c): step 5's table, newest first. */
enum core_status pg_recent(struct store *s, size_t first, store_session_fn fn, void *ctx,
                           struct core_err *e);
enum core_status pg_sessions(struct store *s, store_session_fn fn, void *ctx,
                             struct core_err *e);
enum core_status pg_session_rows(struct store *s, const char *session_id,
                                 unsigned flags, store_row_fn fn, void *ctx,
                                 struct core_err *e);
enum core_status pg_delete_session(struct store *s, const char *session_id,
                                   size_t *deleted, store_deleted_fn fn, void *ctx,
                                   struct core_err *e);
enum core_status pg_prune_session(struct store *s, const char *session_id,
                                  size_t keep, int64_t before_ns, size_t *deleted,
                                  store_deleted_fn fn, void *ctx, struct core_err *e);
enum core_status pg_log_append(struct store *s, const char *snapshot_id, int64_t at_ns,
                               const char *text, struct core_err *e);      /* wlog.c */
enum core_status pg_claim(struct store *h, const char *const *queues, int64_t now_ns,
                          store_mutate_fn fn, void *ctx, json_t **persisted, int64_t *next_ns,
                          struct core_err *e);
enum core_status pg_queued(struct store *h, store_row_fn fn, void *ctx, struct core_err *e);
enum core_status pg_log_lines(struct store *s, const char *snapshot_id, store_log_fn fn,
                              void *ctx, struct core_err *e);            /* wlog.c */

#endif
