/*
 * lm.h - the LMDB backend's parts, shared by the files of store/lmdb/
 * (nothing else includes this; store/lmdb/ is the only place that includes
 * <lmdb.h>).  See store.h for what the store promises and backend.h for
 * what each operation of a backend must guarantee.
 *
 * The files, one reason to change apiece:
 *   backend.c  the backend's row of store.c's table: its operations
 *   env.c      the environment: one per store per process, trust and
 *              filesystem checks before LMDB opens anything, map growth
 *   txn.c      transactions: the writer gate in front of LMDB's writer
 *              mutex, MDB codes as core_status, stored values as JSON
 *   wake.c     wake-ups: the futex word in the file "wake"
 *   lock.c     session writer locks: record locks in sessions.lock
 *   chain.c    the content-addressed message chain and the state records
 *              that end in it
 *   rows.c     the row codec (meta records) and the session index
 *   ops.c      the store operations over those, in write transactions
 *              that grow the map and wake waiters
 *
 * What the store looks like from store.h, on this backend (the embedded
 * default: it takes no URL scheme, so every directory path is its):
 *
 *   Open: the store is the directory; STORE_OPEN_EXISTING finds none when
 *   the directory or its data.mdb is missing.  CORE_ESYS also for a path
 *   that is not a directory, a network filesystem (NFS, SMB, 9p, FUSE,
 *   ...: refused unless AGENTKIT_STORE_ALLOW_REMOTE=1), an unsafe
 *   directory or file; CORE_EPRECONDITION for an LMDB version known to
 *   break with many processes.
 *
 *   Trust: the directory must belong to the user (or root) and not be
 *   writable by group or others, and data.mdb, lock.mdb and the store's
 *   other files must be regular files of the user (or root), never
 *   symlinks; otherwise CORE_ESYS with the fix ("chmod 700 DIR").
 *   Nothing is created in a directory that fails the check.
 *
 *   Writers: every write transaction first takes an fcntl lock on the
 *   file write.lock in the directory (the kernel drops it when its holder
 *   dies), so at most one process at a time waits inside LMDB.  Past
 *   AGENTKIT_STORE_LOCK_TIMEOUT the write fails with CORE_ESYS (errno
 *   ETIMEDOUT) "timed out waiting for the store's write lock after 60s
 *   (held by pid N)".
 *
 *   One environment per store per process: opening the same store twice
 *   in one process shares it (LMDB forbids two); the first open's mode
 *   (read-write or read-only) holds for all.  The map starts at 64 GiB of
 *   address space (the file grows only as used) and doubles when full up
 *   to 1 TiB, the write transaction retried after each growth;
 *   AGENTKIT_STORE_MAPSIZE and AGENTKIT_STORE_MAPSIZE_MAX (sizes: "1M",
 *   "8G") override both, so tests can exhaust it.
 *
 *   store_put_stream(): memory stays at one row plus LMDB's dirty pages,
 *   which LMDB itself writes out to the file past 2^17 pages (512 MiB).
 *
 *   Migrations: none store-wide.  Each record is versioned (a version
 *   byte in every meta and state record, below), so the store is always
 *   at its latest and store_migrate() has nothing to apply.
 *
 * Layout (named DBIs in one environment):
 *
 *   meta   snapshotId -> hdr(14) | row JSON without "state"
 *            hdr: u8 version, u8 flags (1 = has state), be32 position of
 *            "state" among the row's keys, be64 index time (createdAt)
 *   state  snapshotId -> hdr(42) | the state JSON without "messages"
 *            hdr: u8 version, u8 flags (1 = messages in the chain), be32
 *            position of "messages", be32 message count, 32-byte chain tail
 *   node   hash -> be64 seq | be32 references (child nodes + state rows)
 *            hash = SHA-256(prev hash | message JSON): a message is stored
 *            once per distinct history, shared by every snapshot (and fork)
 *            whose messages start with that history; a node whose count
 *            drops to zero is deleted, and releases its prev
 *   msg    be64 seq -> be64 prev seq | prev hash (32) | one message's JSON
 *            (sequential keys written with MDB_APPEND fill pages densely)
 *   bysess u8 len | sessionId | be64 createdAt | snapshotId -> ""
 *            (be64 of the time with the sign bit flipped: byte order is
 *            time order, so "latest" is one cursor seek)
 *   sess   sessionId -> be64 number of rows
 *   wlog   u8 len | snapshotId | be64 n -> be64 at (ns, time_key) | the
 *            line's text: a detached worker's log lines (wlog.c), n from
 *            0 in append order; deleted with their row.  A store made
 *            before it gets it at its next read-write open (a read-only
 *            one reads as having no lines): no format version changes
 *   queue  u8 len | queue name | snapshotId -> the row's "queue" object
 *            (store.h "Queued runs"): one entry per pending or aborting
 *            queued row, kept by every row write and delete (queue.c);
 *            added to older stores as wlog is
 *   recent be64 ~time_key(the session's time) | sessionId -> u8 1 |
 *            u8 length | the snapshotId of its latest row | be64 its row
 *            count | its listing entry (backend.h st_entry_make()), so a
 *            listing reads this table alone; an agentkit before the
 *            entries wrote the snapshotId alone (never starting with a
 *            control byte), which a listing reads the row for
 *            the sessions newest first (store_sessions_recent()): the
 *            time is st_updated_ns() of the session's latest row, so byte
 *            order is the listing's order, ties by session ID
 *   recentof sessionId -> be64 its recent key's time | latest snapshotId
 *            (where its recent entry is, and which row set it).  Both are
 *            kept by every row write and delete (rows.c); a store without
 *            them gets them at its next read-write open, built from sess
 *            and bysess in the open's write transaction (lm_recent_build()),
 *            and a read-only open of one lists by sorting instead.  The
 *            recentof key "\1" (no session ID holds a control byte)
 *            says every entry was made with its listing entry; a
 *            read-write open of a store without it builds both again
 *
 * Heartbeats and metadata reads touch only meta; a turn writes its new
 * messages, one state row and one meta row.  Status changes bump a futex
 * word in the MAP_SHARED file "wake" beside data.mdb.
 *
 * Functions here return MDB or errno codes (int) inside a transaction,
 * or -1 when they filled the core_err themselves; lm_fail() turns a code
 * into a core_status at the operation's edge.
 */
#ifndef STORE_LMDB_LM_H
#define STORE_LMDB_LM_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include <lmdb.h>

#include "../backend.h"
#include "../internal.h"

#define MAPSIZE_DEFAULT ((size_t)64 << 30)
#define MAPSIZE_MAX_DEFAULT ((size_t)1 << 40)
#define MAX_READERS 1024        /* the same constant in every binary */
#define WAKE_SIZE 4096
#define META_HDR 14
#define STATE_HDR 42
#define NODE 32
#define MSG_HDR 40              /* prev seq | prev hash */
#define BATCH 256

enum { DB_META, DB_STATE, DB_MSG, DB_NODE, DB_BYSESS, DB_SESS, DB_WLOG, DB_QUEUE, DB_RECENT,
       DB_RECENTOF, DB_N };

/* One LMDB environment per store per process (LMDB forbids two). */
struct env {
	struct env *next;
	dev_t dev;
	ino_t ino;
	pid_t pid;
	int refs;
	MDB_env *env;
	MDB_dbi dbi[DB_N];
	pthread_rwlock_t grow;  /* txns hold it shared; a resize exclusive */
	size_t mapsize;         /* the map to open with (AGENTKIT_STORE_MAPSIZE) */
	size_t mapmax;          /* and its limit (AGENTKIT_STORE_MAPSIZE_MAX) */
	uint32_t *wake;
	char *path;
	int has_wlog;           /* the wlog DBI is open (a read-only open of an
	                           older store: not there) */
	int has_queue;          /* the same for the queue DBI */
	int has_recent;         /* the same for recent and recentof */
	int rdonly;             /* no write transactions: opened MDB_RDONLY, or
	                           (for a reader) write.lock cannot be made */
	int gate_fd;            /* write.lock (-1 when read-only) */
	int sess_fd;            /* sessions.lock (lock.c), -1 until a lock */
	pthread_mutex_t gate_mu;        /* the gate between threads */
	int64_t lock_ms;        /* how long a writer waits for the gate */
};

/*
 * The history this handle wrote last, for saves without a base (an import,
 * a worker's final row, a custom agent that rewrote its history): the part
 * of the next row's history already hashed is found by comparing trees
 * (jv_same(), memory speed) instead of serializing every message again.
 * Node keys are content addresses
 * (SHA-256 over the previous key and the message's bytes), so a match holds
 * whatever other processes did since; that the nodes still exist is checked
 * inside the write transaction.  msgs are private deep copies: the caller's
 * trees may change after the save.  The first state a handle writes is not
 * kept, so a one-shot process never pays for the copy.
 */
struct msg_cache {
	json_t *msgs;           /* array of copies, or NULL */
	unsigned char *keys;    /* node key of each message, NODE bytes apiece */
	size_t cap;             /* messages keys has room for */
	unsigned long writes;   /* states written through the handle */
};

/*
 * The message chain of a row as this handle last read or wrote it: what a
 * save's base (store_save_on) refers to.  Content-addressed like every
 * node key, so it stays true when the row is later replaced or deleted;
 * only whether its nodes still exist needs checking.
 */
struct chain_ref {
	char id[STORE_ID_MAX + 1];
	unsigned char tail[NODE];
	uint32_t count;
};
#define NREFS 4

/* A handle: store.c's head, then this backend's own. */
struct lmdb_store {
	struct store head;
	struct env *e;
	struct msg_cache mc;
	struct chain_ref refs[NREFS];   /* most recent rows, a ring */
	unsigned next_ref;
	int verify;                     /* AGENTKIT_STORE_VERIFY: check bases */
};

static inline struct lmdb_store *lm_store(struct store *s)
{
	return (struct lmdb_store *)s;
}

/* What a write transaction's functions share. */
struct wctx {
	struct core_err *e;
	struct core_buf tmp, tmp2;      /* scratch for encoding */
	struct lmdb_store *s;
	const struct store_base *base;  /* a save's base, or NULL */
	int append;                     /* STORE_APPEND: the state's messages
	                                   follow base->kept of the base's */
};


/* A signed time as an order-preserving unsigned key. */
static inline uint64_t time_key(int64_t ns)
{
	return (uint64_t)ns ^ ((uint64_t)1 << 63);
}

/* ---- txn.c ---- */

/* An MDB or errno code as a failure; e->sys keeps an errno (ENOSPC for a
 * full disk, so callers can name the real cause). */
enum core_status lm_fail(struct core_err *e, int rc, const char *what);
/* A stored JSON value; NULL with "corrupt store value: ..." in e. */
json_t *lm_parse_val(const void *p, size_t n, struct core_err *e);

/*
 * Begin a transaction, holding v->grow shared until it ends.  Write
 * transactions first pass the writer gate and keep signals blocked until
 * they end; *old receives the previous mask (NULL for reads).  Returns 0
 * or a code for lm_begin_fail() (write) or lm_fail() (read).
 */
int lm_txn_begin(struct env *v, int write, MDB_txn **t, sigset_t *old);
void lm_txn_abort(struct env *v, MDB_txn *t, int write, sigset_t *old);
/* Commit a write transaction and leave the gate; 0 or a code. */
int lm_txn_commit(struct env *v, MDB_txn *t, sigset_t *old);
/* The error of a write transaction that could not begin: read-only store,
 * the gate's timeout (naming the holder), or lm_fail(). */
enum core_status lm_begin_fail(struct env *v, struct core_err *e, int rc,
                               const char *what);
/* Adopt a map size grown by another process (MDB_MAP_RESIZED). */
void lm_adopt_mapsize(struct env *v);

/* ---- env.c ---- */

/* Double the map (no transaction of this process may be active);
 * CORE_ESYS (errno ENOSPC) when it reached its maximum. */
enum core_status lm_grow_map(struct env *v, struct core_err *e);

/* ---- wake.c ---- */

/* Map the wake file of the store in dir (read-only store: a private page
 * when it cannot be read). */
enum core_status lm_open_wake(struct env *v, const char *dir, struct core_err *e);
/* Bump the change sequence and wake every waiter in every process. */
void lm_wake_all(struct env *v);

/* ---- chain.c ---- */

/* After a full read: remember the row's chain (or forget the row) as a
 * base for a later store_save_on(). */
void lm_remember_read(struct lmdb_store *s, const char *id, const struct chain_ref *r);
/* The state of row id, messages rebuilt from the chain (only the last
 * under STORE_LAST_MESSAGE); ref (optional) receives the chain. */
enum core_status lm_read_state(struct env *v, MDB_txn *t, const MDB_val *id,
                               unsigned flags, json_t **out, struct chain_ref *ref,
                               struct core_err *e);
/* The first n messages of row id's state as stored, to fn, oldest first
 * (store_message_texts()); no row: CORE_ENOTFOUND without a message. */
enum core_status lm_state_texts(struct env *v, MDB_txn *t, const char *id, size_t n,
                                store_text_fn fn, void *ctx, struct core_err *e);
/* Write the state of row id (parent: its parentId, a chain to compare
 * with); the old state's chain is released. */
int lm_write_state(struct env *v, MDB_txn *t, const char *id, const json_t *state,
                   const char *parent, struct wctx *w);
/* Delete the state of row id and release its chain (none: a no-op). */
int lm_delete_state(struct env *v, MDB_txn *t, const char *id);

/* ---- rows.c ---- */

/* The row stored under id (MDB_NOTFOUND passes through as CORE_ENOTFOUND
 * without a message).  ref (optional) receives the row's message chain;
 * its count stays 0 when the row has none or only metadata was read. */
enum core_status lm_read_row(struct env *v, MDB_txn *t, const char *id,
                             unsigned flags, json_t **out, struct chain_ref *ref,
                             struct core_err *e);
/* The snapshot ID of the session's latest index entry into id
 * (NUL-ended, room for 512 bytes). */
int lm_latest_id(struct env *v, MDB_txn *t, const char *sid, char *id);
/*
 * Write row (an object with valid snapshotId and sessionId) as given,
 * replacing the stored one.  Under STORE_METADATA_ONLY a row without
 * "state" keeps the stored state.  *changed is set when the status changed
 * (or the row is new).
 */
int lm_write_row(struct env *v, MDB_txn *t, const json_t *row, unsigned flags,
                 int *changed, struct wctx *w);
/* Delete row id (absent: a no-op) with its state, index entries and
 * worker log lines. */
int lm_delete_row(struct env *v, MDB_txn *t, const char *id, struct core_err *e);

/* The wlog key of line n of row id into k (LM_WLOG_KEY_MAX bytes); its
 * length.  Its first length - 8 bytes are the row's prefix. */
#define LM_WLOG_KEY_MAX (1 + STORE_ID_MAX + 8)
size_t lm_wlog_key(unsigned char *k, const char *id, uint64_t n);
/* Whether key k is a line of the row whose prefix is pre[0..len). */
int lm_wlog_ours(const MDB_val *k, const unsigned char *pre, size_t len);

/* Up to BATCH snapshot IDs of a session from its index, continuing after
 * the key in last[0..lastlen) (lastlen 0: from the start). */
struct idbatch {
	size_t n;
	char ids[BATCH][STORE_ID_MAX + 1];
	unsigned char last[512];
	size_t lastlen;
};
int lm_index_batch(struct env *v, MDB_txn *t, const char *sid, int backward,
                   struct idbatch *b);

/* ---- ops.c ---- */

/*
 * Run op inside a write transaction: growing the map and retrying on
 * MDB_MAP_FULL, waking waiters after the commit when op says a status
 * changed.  op returns an MDB/errno code, or -1 with e filled.  what
 * names the write in messages.
 */
typedef int (*write_op)(struct env *v, MDB_txn *t, void *ctx, int *changed,
                        struct wctx *w);
enum core_status lm_run_write(struct lmdb_store *s, const char *what, write_op op,
                              void *ctx, struct core_err *e);

/* The queue index's key of row id in queue q into k (LM_QUEUE_KEY_MAX
 * bytes): its length. */
#define LM_QUEUE_KEY_MAX (1 + STORE_QUEUE_NAME_MAX + STORE_ID_MAX)
size_t lm_queue_key(unsigned char *k, const char *q, const char *id);

/* ---- the operations (backend.c's table; see backend.h) ---- */

enum core_status lm_open(const char *path, unsigned flags, struct store **out,
                         struct core_err *e);                           /* env.c */
void lm_close(struct store *s);                                         /* env.c */
uint32_t lm_change_seq(struct store *s);                                /* wake.c */
enum core_status lm_wait_change(struct store *s, uint32_t seq, int64_t timeout_ms,
                                struct core_err *e);                    /* wake.c */
enum core_status lm_claim(struct store *h, const char *const *queues, int64_t now_ns,
                          store_mutate_fn fn, void *ctx, json_t **persisted, int64_t *next_ns,
                          struct core_err *e);                          /* ops.c */
enum core_status lm_queued(struct store *h, store_row_fn fn, void *ctx,
                           struct core_err *e);                         /* ops.c */
enum core_status lm_get(struct store *s, const char *snapshot_id, unsigned flags,
                        json_t **row, struct core_err *e);
enum core_status lm_latest(struct store *s, const char *session_id, unsigned flags,
                           json_t **row, struct core_err *e);
enum core_status lm_message_texts(struct store *s, const char *snapshot_id, size_t n,
                                  store_text_fn fn, void *ctx, struct core_err *e);
enum core_status lm_save(struct store *s, const char *id, unsigned flags,
                         const struct store_base *base, store_mutate_fn fn, void *ctx,
                         json_t **persisted, struct core_err *e);
enum core_status lm_put_stream(struct store *s, const struct store_rows *src,
                               size_t *count, struct core_err *e);
/* The recent index of session sid, after a write or delete in t: its
 * latest row now is id's (row, just written) or another, read (id NULL:
 * always read). */
int lm_recent_fix(struct env *v, MDB_txn *t, const char *sid, const char *id,
                  const json_t *row);
/* Build recent and recentof from every session (open, once), and mark
 * them current. */
int lm_recent_build(struct env *v, MDB_txn *t);
/* The session's row count (sess; 0 for none). */
uint64_t lm_sess_rows(struct env *v, MDB_txn *t, const char *sid);
/* Were recent's entries made with their listing entries (the mark)? */
int lm_recent_current(struct env *v, MDB_txn *t);
#define LM_ENTRIES_KEY "\1"
#define LM_ENTRIES_VALUE "entries 1"
/* A recent value's parts (pointing into it); 0 when it is one an older
 * agentkit wrote (the snapshotId alone). */
#define LM_ENTRY 1
struct lm_entry {
	const char *id;
	size_t id_len;
	uint64_t rows;
	const void *entry;
	size_t entry_len;
};
int lm_recent_entry(const MDB_val *d, struct lm_entry *en);
enum core_status lm_recent(struct store *h, size_t first, store_session_fn fn, void *ctx,
                           struct core_err *e);
enum core_status lm_sessions(struct store *s, store_session_fn fn, void *ctx,
                             struct core_err *e);
enum core_status lm_session_rows(struct store *s, const char *session_id,
                                 unsigned flags, store_row_fn fn, void *ctx,
                                 struct core_err *e);
enum core_status lm_delete_session(struct store *s, const char *session_id,
                                   size_t *deleted, store_deleted_fn fn, void *ctx,
                                   struct core_err *e);
enum core_status lm_prune_session(struct store *s, const char *session_id,
                                  size_t keep, int64_t before_ns, size_t *deleted,
                                  store_deleted_fn fn, void *ctx, struct core_err *e);
enum core_status lm_session_lock(struct store *s, const char *session_id,
                                 int64_t timeout_ms, struct core_err *e);   /* lock.c */
void lm_session_unlock(struct store *s, const char *session_id);          /* lock.c */
enum core_status lm_log_append(struct store *s, const char *snapshot_id, int64_t at_ns,
                               const char *text, struct core_err *e);      /* wlog.c */
enum core_status lm_log_lines(struct store *s, const char *snapshot_id, store_log_fn fn,
                              void *ctx, struct core_err *e);            /* wlog.c */

#endif
