/*
 * lmdb.c - the LMDB backend of the snapshot store.  See store.h for the
 * interface and store-notes §1 for the rules followed here.
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
 *
 * Heartbeats and metadata reads touch only meta; a turn writes its new
 * messages, one state row and one meta row.  Status changes bump a futex
 * word in the MAP_SHARED file "wake" beside data.mdb.
 */
#include "store.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <lmdb.h>

#include "../libcore/json.h"
#include "../libcore/util.h"

#define MAPSIZE_DEFAULT ((size_t)64 << 30)
#define MAPSIZE_MAX_DEFAULT ((size_t)1 << 40)
#define MAX_READERS 1024        /* the same constant in every binary */
#define WAKE_SIZE 4096
#define META_HDR 14
#define STATE_HDR 42
#define NODE 32
#define MSG_HDR 40              /* prev seq | prev hash */
#define BATCH 256

enum { DB_META, DB_STATE, DB_MSG, DB_NODE, DB_BYSESS, DB_SESS, DB_N };
static const char *const db_names[DB_N] = {
	"meta", "state", "msg", "node", "bysess", "sess",
};

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
	size_t mapmax;
	uint32_t *wake;
	char *path;
	int rdonly;             /* no write transactions: opened MDB_RDONLY, or
	                           (for a reader) write.lock cannot be made */
	int gate_fd;            /* write.lock (-1 when read-only) */
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

struct store {
	struct env *e;
	pid_t pid;
	struct msg_cache mc;
	struct chain_ref refs[NREFS];   /* most recent rows, a ring */
	unsigned next_ref;
	int verify;                     /* AGENTKIT_STORE_VERIFY: check bases */
};

static void ref_forget(struct store *s, const char *id)
{
	unsigned i;
	for (i = 0; i < NREFS; i++)
		if (!strcmp(s->refs[i].id, id))
			*s->refs[i].id = 0;
}

static void ref_remember(struct store *s, const char *id, const unsigned char *tail,
                         uint32_t count)
{
	struct chain_ref *r = NULL;
	unsigned i;
	for (i = 0; i < NREFS && !r; i++)
		if (!strcmp(s->refs[i].id, id))
			r = &s->refs[i];
	if (!r)
		r = &s->refs[s->next_ref++ % NREFS];
	snprintf(r->id, sizeof r->id, "%s", id);
	memcpy(r->tail, tail, NODE);
	r->count = count;
}

/* After a full read: the row's chain, or none. */
static void remember_read(struct store *s, const char *id, const struct chain_ref *r)
{
	if (r->count)
		ref_remember(s, id, r->tail, r->count);
	else
		ref_forget(s, id);
}

static const struct chain_ref *ref_find(const struct store *s, const char *id)
{
	unsigned i;
	for (i = 0; i < NREFS; i++)
		if (*s->refs[i].id && !strcmp(s->refs[i].id, id))
			return &s->refs[i];
	return NULL;
}

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct env *reg;

/* ---- small encoders ---- */

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

static uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be64(unsigned char *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static uint64_t get_be64(const unsigned char *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

/* A signed time as an order-preserving unsigned key. */
static uint64_t time_key(int64_t ns)
{
	return (uint64_t)ns ^ ((uint64_t)1 << 63);
}

/* An MDB or errno code as a failure; e->sys keeps an errno (ENOSPC for a
 * full disk, so callers can name the real cause). */
static enum core_status mdb_fail(struct core_err *e, int rc, const char *what)
{
	if (rc == ENOMEM)
		return core_fail(e, CORE_ENOMEM, "%s: out of memory", what);
	if (rc == ENOSPC || rc == EDQUOT || rc == MDB_MAP_FULL)
		core_fail(e, CORE_ESYS, "%s: the store is full (%s)", what, mdb_strerror(rc));
	else
		core_fail(e, CORE_ESYS, "%s: %s", what, mdb_strerror(rc));
	if (e && rc > 0)
		e->sys = rc;
	return CORE_ESYS;
}

static enum core_status check_handle(struct store *s, struct core_err *e)
{
	if (!s)
		return core_fail(e, CORE_EPRECONDITION, "store is not open");
	if (s->pid != getpid())
		return core_fail(e, CORE_EPRECONDITION,
		                 "store handle used after fork (re-open it in the child)");
	return CORE_OK;
}

/* ---- transactions ---- */

/* Adopt a map size grown by another process (MDB_MAP_RESIZED). */
static void adopt_mapsize(struct env *v)
{
	pthread_rwlock_wrlock(&v->grow);
	mdb_env_set_mapsize(v->env, 0);
	pthread_rwlock_unlock(&v->grow);
}

/*
 * The writer gate.  LMDB serializes writers on a robust process-shared
 * mutex in lock.mdb, and waiting on it is unsafe when several processes
 * die at once: the kernel's owner-died hand-off wakes one waiter, and when
 * that one is killed too the wake-up is lost and the others sleep forever
 * (seen with SIGKILL storms on LMDB 0.9.24 and glibc 2.36).  So a writer
 * first takes a POSIX record lock on byte 0 of STORE/write.lock, which the
 * kernel drops when its holder dies however it dies, and only the holder
 * enters LMDB: nobody ever waits on LMDB's mutex, so there is no wake-up
 * to lose.  fcntl locks rather than flock(): they are not inherited across
 * fork (a child between fork and exec cannot keep the store locked after
 * its parent died) and F_GETLK names the holder's pid for the timeout
 * message.  They belong to the process, so a mutex keeps this process's
 * threads apart, and write.lock is opened once per environment (closing
 * any descriptor of it would drop the lock).
 *
 * The wait polls with F_SETLK and a sleep growing from 0.1 ms to 10 ms
 * (with jitter), with signals open between tries: a blocking F_SETLKW
 * cannot be bounded without a signal, and signals are this library's
 * caller's to own.  The cost is at most 10 ms of idle lock under
 * contention; a turn's save takes about 0.3 ms.  Signals are blocked from
 * the moment the lock is held until it is released, so that Ctrl-Z cannot
 * stop a process that holds it.
 */
#define GATE_TIMEOUT (-30000)   /* txn_begin(): the wait ran out (no MDB code) */

static int gate_enter(struct env *v, sigset_t *old)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 1 };
	int64_t end = core_now_mono_ms() + v->lock_ms;
	long nap_ns = 100000;
	sigset_t all;
	sigfillset(&all);
	for (;;) {
		pthread_sigmask(SIG_BLOCK, &all, old);
		if (pthread_mutex_trylock(&v->gate_mu) == 0) {
			int err;
			if (fcntl(v->gate_fd, F_SETLK, &fl) == 0)
				return 0;
			err = errno;
			pthread_mutex_unlock(&v->gate_mu);
			if (err != EACCES && err != EAGAIN && err != EINTR) {
				pthread_sigmask(SIG_SETMASK, old, NULL);
				return err;
			}
		}
		pthread_sigmask(SIG_SETMASK, old, NULL);
		if (core_now_mono_ms() >= end)
			return GATE_TIMEOUT;
		{
			struct timespec ts = { 0, nap_ns / 2 + rand() % (nap_ns / 2 + 1) };
			nanosleep(&ts, NULL);
		}
		if (nap_ns < 10000000)
			nap_ns *= 2;
	}
}

/* Release the gate (signals stay blocked: the caller restores them). */
static void gate_leave(struct env *v)
{
	struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_len = 1 };
	fcntl(v->gate_fd, F_SETLK, &fl);
	pthread_mutex_unlock(&v->gate_mu);
}

/* The error of a write transaction that could not begin. */
static enum core_status begin_fail(struct env *v, struct core_err *e, int rc,
                                   const char *what)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 1 };
	char holder[48] = "";
	if (rc == EACCES && v->rdonly) {
		core_fail(e, CORE_ESYS, "%s: the store '%s' is read-only", what, v->path);
		if (e)
			e->sys = EROFS;
		return CORE_ESYS;
	}
	if (rc != GATE_TIMEOUT)
		return mdb_fail(e, rc, what);
	if (fcntl(v->gate_fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK && fl.l_pid > 0)
		snprintf(holder, sizeof holder, " (held by pid %ld)", (long)fl.l_pid);
	if (v->lock_ms % 1000)
		core_fail(e, CORE_ESYS, "%s: timed out waiting for the store's write lock "
		          "after %lldms%s", what, (long long)v->lock_ms, holder);
	else
		core_fail(e, CORE_ESYS, "%s: timed out waiting for the store's write lock "
		          "after %llds%s", what, (long long)(v->lock_ms / 1000), holder);
	if (e)
		e->sys = ETIMEDOUT;
	return CORE_ESYS;
}

/*
 * Begin a transaction, holding v->grow shared until txn_end().  Write
 * transactions first pass the writer gate and keep signals blocked until
 * they end (SIGTSTP and friends would stall every writer in every
 * process); *old receives the previous mask.  A read-only environment
 * refuses write transactions with EACCES, as LMDB does.
 */
static int txn_begin(struct env *v, int write, MDB_txn **t, sigset_t *old)
{
	int rc, tries;
	if (write && v->rdonly)
		return EACCES;
	for (tries = 0;; tries++) {
		if (write && (rc = gate_enter(v, old)) != 0)
			return rc;
		pthread_rwlock_rdlock(&v->grow);
		rc = mdb_txn_begin(v->env, NULL, write ? 0 : MDB_RDONLY, t);
		if (rc == 0)
			return 0;
		pthread_rwlock_unlock(&v->grow);
		if (write) {
			gate_leave(v);
			pthread_sigmask(SIG_SETMASK, old, NULL);
		}
		if (tries >= 3)
			return rc;
		if (rc == MDB_MAP_RESIZED)
			adopt_mapsize(v);
		else if (rc == MDB_READERS_FULL)
			mdb_reader_check(v->env, NULL);
		else
			return rc;
	}
}

static void txn_abort(struct env *v, MDB_txn *t, int write, sigset_t *old)
{
	mdb_txn_abort(t);
	pthread_rwlock_unlock(&v->grow);
	if (write) {
		gate_leave(v);
		pthread_sigmask(SIG_SETMASK, old, NULL);
	}
}

/*
 * Commit.  LMDB reports a short write as EIO ("short write, filesystem
 * full?" in mdb_page_flush): the file grows by pwrite, and a full
 * filesystem (a small tmpfs, a full disk) takes part of the write and then
 * no more.  Neither the map (MDB_WRITEMAP is not used, so no SIGBUS) nor
 * the store is damaged - the old meta page stays current - but EIO would
 * name the wrong cause.  When the data file's filesystem has (almost) no
 * free space left after such a failure, the cause was that: ENOSPC.  The
 * cost is one fstatfs() on a failed commit only.
 */
static int txn_commit(struct env *v, MDB_txn *t, sigset_t *old)
{
	int rc = mdb_txn_commit(t), fd;
	struct statfs fs;
	if (rc == EIO && mdb_env_get_fd(v->env, &fd) == 0 && fstatfs(fd, &fs) == 0 &&
	    (uint64_t)fs.f_bavail * (uint64_t)fs.f_bsize < ((uint64_t)1 << 20))
		rc = ENOSPC;
	pthread_rwlock_unlock(&v->grow);
	gate_leave(v);
	pthread_sigmask(SIG_SETMASK, old, NULL);
	return rc;
}

/* Double the map (no transaction of this process may be active). */
static enum core_status grow_map(struct env *v, struct core_err *e)
{
	MDB_envinfo info;
	size_t next;
	int rc;
	pthread_rwlock_wrlock(&v->grow);
	mdb_env_info(v->env, &info);
	if (info.me_mapsize >= v->mapmax) {
		pthread_rwlock_unlock(&v->grow);
		core_fail(e, CORE_ESYS, "the store is full (its map reached %zu bytes)",
		          v->mapmax);
		if (e)
			e->sys = ENOSPC;
		return CORE_ESYS;
	}
	next = info.me_mapsize > v->mapmax / 2 ? v->mapmax : info.me_mapsize * 2;
	rc = mdb_env_set_mapsize(v->env, next);
	pthread_rwlock_unlock(&v->grow);
	if (rc)
		return mdb_fail(e, rc, "grow the store map");
	return CORE_OK;
}

/* ---- wake-ups: a futex word in a MAP_SHARED sidecar file ---- */

static long futex(uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

static void wake_all(struct env *v)
{
	__atomic_add_fetch(v->wake, 1, __ATOMIC_SEQ_CST);
	futex(v->wake, FUTEX_WAKE, INT_MAX, NULL);
}

uint32_t store_change_seq(struct store *s)
{
	return __atomic_load_n(s->e->wake, __ATOMIC_SEQ_CST);
}

enum core_status store_wait_change(struct store *s, uint32_t seq,
                                   int64_t timeout_ms, struct core_err *e)
{
	int64_t end = core_now_mono_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
	enum core_status st = check_handle(s, e);
	if (st != CORE_OK)
		return st;
	for (;;) {
		int64_t left = end - core_now_mono_ms();
		struct timespec ts;
		if (__atomic_load_n(s->e->wake, __ATOMIC_SEQ_CST) != seq)
			return CORE_OK;
		if (left <= 0)
			return CORE_ETIMEOUT;
		ts.tv_sec = left / 1000;
		ts.tv_nsec = (left % 1000) * 1000000;
		if (futex(s->e->wake, FUTEX_WAIT, seq, &ts) < 0 && errno != EAGAIN &&
		    errno != EINTR && errno != ETIMEDOUT)
			return core_fail_sys(e, "wait for a store change");
	}
}

/*
 * A read-only store maps an existing wake file read-only (waits still wake
 * when another process writes), or else a private page: then only the
 * bounded re-reads of store_wait_terminal() remain, which is all a store
 * nobody can write needs.
 */
static enum core_status open_wake_rdonly(struct env *v, const char *dir)
{
	struct core_buf p = CORE_BUF_INIT(PATH_MAX);
	struct stat st;
	void *m = MAP_FAILED;
	int fd = -1;
	if (core_buf_addf(&p, "%s/wake", dir) == CORE_OK)
		fd = open(p.p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	core_buf_release(&p);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= WAKE_SIZE)
		m = mmap(NULL, WAKE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	if (fd >= 0)
		close(fd);
	if (m == MAP_FAILED)
		m = mmap(NULL, WAKE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		         -1, 0);
	if (m == MAP_FAILED)
		return CORE_ENOMEM;
	v->wake = m;
	return CORE_OK;
}

static enum core_status open_wake(struct env *v, const char *dir, struct core_err *e)
{
	struct core_buf p = CORE_BUF_INIT(PATH_MAX);
	struct stat st;
	void *m;
	int fd;
	if (v->rdonly)
		return open_wake_rdonly(v, dir) == CORE_OK
		       ? CORE_OK : core_fail(e, CORE_ENOMEM, "open the store: out of memory");
	if (core_buf_addf(&p, "%s/wake", dir) != CORE_OK)
		return core_fail(e, CORE_ESYS, "store path too long");
	fd = open(p.p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		core_fail_sys(e, "open '%s'", p.p);
		core_buf_release(&p);
		return CORE_ESYS;
	}
	if (fstat(fd, &st) < 0 || ((st.st_mode & 0777) != 0600 && st.st_uid == geteuid() &&
	                           fchmod(fd, 0600) < 0) ||
	    (st.st_size < WAKE_SIZE && ftruncate(fd, WAKE_SIZE) < 0)) {
		core_fail_sys(e, "prepare '%s'", p.p);
		close(fd);
		core_buf_release(&p);
		return CORE_ESYS;
	}
	m = mmap(NULL, WAKE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		core_fail_sys(e, "map '%s'", p.p);
		core_buf_release(&p);
		return CORE_ESYS;
	}
	core_buf_release(&p);
	v->wake = m;
	return CORE_OK;
}

/* ---- open and close ---- */

/* Create dir and its missing parents, private (0700, umask-proof). */
static enum core_status make_dirs(const char *path, struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(PATH_MAX);
	struct stat st;
	size_t i;
	enum core_status rc = CORE_OK;
	if (core_buf_adds(&b, path) != CORE_OK)
		return core_fail(e, CORE_ESYS, "store path too long");
	for (i = 1; i <= b.len; i++) {
		char c = b.p[i];
		if (c != '/' && c != 0)
			continue;
		b.p[i] = 0;
		if (mkdir(b.p, 0700) == 0) {
			if (chmod(b.p, 0700) < 0) {
				rc = core_fail_sys(e, "chmod '%s'", b.p);
				break;
			}
		} else if (errno != EEXIST) {
			rc = core_fail_sys(e, "cannot create store directory '%s'", b.p);
			break;
		}
		b.p[i] = c;
	}
	if (rc == CORE_OK && stat(path, &st) < 0)
		rc = core_fail_sys(e, "cannot open store '%s'", path);
	else if (rc == CORE_OK && !S_ISDIR(st.st_mode))
		rc = core_fail(e, CORE_ESYS, "cannot open store '%s': not a directory", path);
	core_buf_release(&b);
	return rc;
}

static enum core_status no_store(const char *path, struct core_err *e)
{
	return core_fail(e, CORE_ENOTFOUND, "no store at %s (set --store or AGENTKIT_STORE)",
	                 path);
}

/*
 * Is there a store at path?  CORE_OK when the directory holds a data.mdb
 * (checked further by trust_store()), CORE_ENOTFOUND when the directory or
 * its data.mdb is missing, CORE_ESYS when path cannot be looked at or is
 * not a directory.
 */
static enum core_status find_store(const char *path, struct core_err *e)
{
	struct core_buf p = CORE_BUF_INIT(PATH_MAX);
	struct stat st;
	enum core_status rc = CORE_OK;
	if (stat(path, &st) < 0)
		return errno == ENOENT || errno == ENOTDIR
		       ? no_store(path, e) : core_fail_sys(e, "cannot open store '%s'", path);
	if (!S_ISDIR(st.st_mode))
		return core_fail(e, CORE_ESYS, "cannot open store '%s': not a directory", path);
	if (core_buf_addf(&p, "%s/data.mdb", path) != CORE_OK)
		rc = core_fail(e, CORE_ESYS, "store path too long");
	else if (lstat(p.p, &st) < 0)
		rc = errno == ENOENT ? no_store(path, e)
		                     : core_fail_sys(e, "cannot open store '%s'", path);
	core_buf_release(&p);
	return rc;
}

/* Owned by the user, or by root (who can change anything anyway). */
static int owner_ok(const struct stat *st)
{
	return st->st_uid == geteuid() || st->st_uid == 0;
}

/*
 * Refuse a store others could tamper with, as ssh refuses a key file:
 * the directory must be the user's (or root's) and writable by nobody
 * else, and the files LMDB and the store open must be regular files of
 * the user (or root), not symlinks.  LMDB opens data.mdb and lock.mdb
 * itself and follows symlinks; checking them with lstat() is enough once
 * the directory is known to be writable by the user alone, since nobody
 * else can then plant a link between the check and the open.  Costs a
 * stat() and five lstat()s per open.  Refusals are CORE_ESYS with errno
 * EACCES.
 */
static enum core_status trust_store(const char *path, struct core_err *e)
{
	static const char *const files[] = { "data.mdb", "lock.mdb", "wake", "write.lock",
	                                     "logs" };
	struct core_buf p = CORE_BUF_INIT(PATH_MAX);
	struct stat st;
	enum core_status rc = CORE_OK;
	size_t i;
	if (stat(path, &st) < 0)
		return core_fail_sys(e, "cannot open store '%s'", path);
	if (!owner_ok(&st))
		rc = core_fail(e, CORE_ESYS, "refusing store directory '%s': it belongs to "
		               "uid %ld, not to you (uid %ld); use a directory of your own",
		               path, (long)st.st_uid, (long)geteuid());
	else if (st.st_mode & 022)
		rc = core_fail(e, CORE_ESYS, "refusing store directory '%s': it is writable "
		               "by %s (mode %04o); fix it with: chmod 700 '%s'", path,
		               (st.st_mode & 022) == 022 ? "group and others"
		               : st.st_mode & 002 ? "others" : "its group",
		               (unsigned)(st.st_mode & 07777), path);
	for (i = 0; i < sizeof files / sizeof files[0] && rc == CORE_OK; i++) {
		int dir = !strcmp(files[i], "logs");    /* (its type is detach's business) */
		p.len = 0;
		if (core_buf_addf(&p, "%s/%s", path, files[i]) != CORE_OK)
			rc = core_fail(e, CORE_ESYS, "store path too long");
		else if (lstat(p.p, &st) < 0)
			continue;
		else if (S_ISLNK(st.st_mode))
			rc = core_fail(e, CORE_ESYS, "refusing store '%s': %s is a symlink "
			               "(remove it: the store never follows links)", path, files[i]);
		else if (!dir && !S_ISREG(st.st_mode))
			rc = core_fail(e, CORE_ESYS, "refusing store '%s': %s is not a regular file",
			               path, files[i]);
		else if (!owner_ok(&st))
			rc = core_fail(e, CORE_ESYS, "refusing store '%s': %s belongs to uid %ld, "
			               "not to you (uid %ld)", path, files[i], (long)st.st_uid,
			               (long)geteuid());
	}
	core_buf_release(&p);
	if (rc != CORE_OK && e)
		e->sys = EACCES;
	return rc;
}

/* The writer gate's file, kept open for the environment's life.  Returns
 * 0 or an errno. */
static int open_gate(struct env *v, const char *dir)
{
	struct core_buf p = CORE_BUF_INIT(PATH_MAX);
	int rc = 0;
	if (core_buf_addf(&p, "%s/write.lock", dir) != CORE_OK)
		rc = ENAMETOOLONG;
	else if ((v->gate_fd = open(p.p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		rc = errno;
	core_buf_release(&p);
	return rc;
}

static enum core_status refuse_remote(const char *path, struct core_err *e)
{
	static const struct { unsigned long magic; const char *name; } bad[] = {
		{ 0x6969, "NFS" }, { 0x517B, "SMB" }, { 0xFF534D42, "CIFS" },
		{ 0xFE534D42, "SMB2" }, { 0x01021997, "9p" }, { 0x65735546, "FUSE" },
		{ 0x5346414F, "AFS" }, { 0x00C36400, "Ceph" }, { 0x73757245, "Coda" },
		{ 0x564C, "NCP" }, { 0x0BD00BD0, "Lustre" }, { 0x786F4256, "vboxsf" },
		{ 0x47504653, "GPFS" },
	};
	struct statfs sf;
	const char *allow = getenv("AGENTKIT_STORE_ALLOW_REMOTE");
	size_t i;
	if ((allow && !strcmp(allow, "1")) || statfs(path, &sf) < 0)
		return CORE_OK;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if ((unsigned long)(unsigned int)sf.f_type == bad[i].magic)
			return core_fail(e, CORE_ESYS,
			                 "cannot open store '%s': it is on a %s filesystem, where "
			                 "LMDB's locks do not work (use a local directory, or set "
			                 "AGENTKIT_STORE_ALLOW_REMOTE=1 at your own risk)",
			                 path, bad[i].name);
	return CORE_OK;
}

/* LMDB's data fd may become fd 0-2 if they are closed; keep them taken. */
static void guard_std_fds(void)
{
	int fd;
	for (fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
			int n = open("/dev/null", O_RDWR);
			if (n >= 0 && n != fd)
				close(n);
		}
}

static size_t env_size(const char *name, size_t dflt)
{
	const char *v = getenv(name);
	uint64_t n;
	struct core_err e = { 0 };
	if (!v || !*v || core_parse_size(v, &n, &e) != CORE_OK || n < 65536)
		return dflt;
	return (size_t)n;
}

static void private_file(const char *dir, const char *name)
{
	struct core_buf p = CORE_BUF_INIT(PATH_MAX);
	struct stat st;
	if (core_buf_addf(&p, "%s/%s", dir, name) == CORE_OK &&
	    lstat(p.p, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    (st.st_mode & 0777) != 0600)
		chmod(p.p, 0600);
	core_buf_release(&p);
}

static enum core_status open_dbis(struct env *v, struct core_err *e)
{
	MDB_txn *t;
	sigset_t old;
	int rc, i, write;
	for (write = 0; write < 2; write++) {
		if (write && v->rdonly)
			break;
		rc = txn_begin(v, write, &t, &old);
		if (rc)
			return begin_fail(v, e, rc, "open the store");
		for (i = 0; i < DB_N && rc == 0; i++)
			rc = mdb_dbi_open(t, db_names[i], write ? MDB_CREATE : 0, &v->dbi[i]);
		if (rc == MDB_NOTFOUND && !write) {
			txn_abort(v, t, 0, &old);
			continue;
		}
		if (rc) {
			txn_abort(v, t, write, &old);
			return mdb_fail(e, rc, "open the store's tables");
		}
		/* commit (even read-only) so the DBI handles stay valid */
		if (write) {
			rc = txn_commit(v, t, &old);
		} else {
			rc = mdb_txn_commit(t);
			pthread_rwlock_unlock(&v->grow);
		}
		if (rc)
			return mdb_fail(e, rc, "open the store's tables");
		return CORE_OK;
	}
	return core_fail(e, CORE_ESYS, "open the store's tables: %s", "not created");
}

static void env_free(struct env *v)
{
	if (v->env)
		mdb_env_close(v->env);
	if (v->wake)
		munmap(v->wake, WAKE_SIZE);
	if (v->gate_fd >= 0)
		close(v->gate_fd);
	pthread_mutex_destroy(&v->gate_mu);
	pthread_rwlock_destroy(&v->grow);
	free(v->path);
	free(v);
}

/*
 * Open the environment.  With STORE_OPEN_READONLY a store whose files this
 * process cannot write (EACCES, EROFS) is opened MDB_RDONLY, and when even
 * lock.mdb is not writable, MDB_RDONLY|MDB_NOLOCK: LMDB then keeps no
 * reader slot, so a process writing the store at the same time (its owner,
 * while this one may only read) could reuse the pages being read and the
 * read fail as corrupt.  A read-only mount has no such writer; on one,
 * LMDB itself goes without the lock file.
 */
static enum core_status env_open(const char *path, const struct stat *st,
                                 unsigned flags, struct env **out, struct core_err *e)
{
	struct env *v = calloc(1, sizeof *v);
	int rc = 0, tries, fd;
	unsigned mode = MDB_NOTLS;
	size_t mapsize;
	if (!v || !(v->path = strdup(path))) {
		free(v);
		return core_fail(e, CORE_ENOMEM, "open the store: out of memory");
	}
	v->gate_fd = -1;
	if (core_duration_setting(NULL, NULL, "AGENTKIT_STORE_LOCK_TIMEOUT",
	                          STORE_LOCK_TIMEOUT_MS, &v->lock_ms, e) != CORE_OK) {
		free(v->path);
		free(v);
		return CORE_EUSAGE;
	}
	pthread_mutex_init(&v->gate_mu, NULL);
	pthread_rwlock_init(&v->grow, NULL);
	v->dev = st->st_dev;
	v->ino = st->st_ino;
	v->pid = getpid();
	v->refs = 1;
	mapsize = env_size("AGENTKIT_STORE_MAPSIZE", MAPSIZE_DEFAULT);
	v->mapmax = env_size("AGENTKIT_STORE_MAPSIZE_MAX", MAPSIZE_MAX_DEFAULT);
	if (v->mapmax < mapsize)
		v->mapmax = mapsize;
	/* "Opening a database can fail if another process is opening or
	 * closing it at exactly the same time": retry with jitter. */
	for (tries = 0; tries < 6; tries++) {
		if ((rc = mdb_env_create(&v->env)) != 0)
			break;
		mdb_env_set_maxdbs(v->env, 8);
		mdb_env_set_maxreaders(v->env, MAX_READERS);
		while ((rc = mdb_env_set_mapsize(v->env, mapsize)) == ENOMEM &&
		       mapsize > ((size_t)1 << 30))
			mapsize /= 2;
		if (rc == 0)
			rc = mdb_env_open(v->env, path, mode, 0600);
		if (rc == 0)
			break;
		mdb_env_close(v->env);
		v->env = NULL;
		if ((rc == EACCES || rc == EROFS) && (flags & STORE_OPEN_READONLY) &&
		    !(mode & MDB_NOLOCK)) {
			mode |= mode & MDB_RDONLY ? MDB_NOLOCK : MDB_RDONLY;
			continue;
		}
		if (rc == ENOENT || rc == EACCES || rc == EROFS || rc == ENOSPC ||
		    rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH)
			break;
		{
			struct timespec ts = { 0, (long)(1 + rand() % 20) * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	if (rc) {
		env_free(v);
		core_fail(e, CORE_ESYS, "cannot open store '%s': %s", path, mdb_strerror(rc));
		if (e && rc > 0)
			e->sys = rc;
		return CORE_ESYS;
	}
	if (mdb_env_get_fd(v->env, &fd) == 0)
		fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
	v->rdonly = (mode & MDB_RDONLY) != 0;
	if (!v->rdonly) {
		private_file(path, "data.mdb");
		private_file(path, "lock.mdb");
	}
	if (!(mode & MDB_NOLOCK))
		mdb_reader_check(v->env, NULL);
	/* a reader of a store in a directory it may not write goes on
	 * without the gate, as on a read-only store */
	if (!v->rdonly && (rc = open_gate(v, path)) != 0) {
		if ((rc != EACCES && rc != EROFS) || !(flags & STORE_OPEN_READONLY)) {
			env_free(v);
			errno = rc;
			return core_fail_sys(e, "store '%s': cannot open write.lock", path);
		}
		v->rdonly = 1;
	}
	if (open_dbis(v, e) != CORE_OK || open_wake(v, path, e) != CORE_OK) {
		core_err_prefix(e, "store '%s'", path);
		env_free(v);
		return e ? e->st : CORE_ESYS;
	}
	*out = v;
	return CORE_OK;
}

enum core_status store_open(const char *path, struct store **out,
                            struct core_err *e)
{
	return store_open_flags(path, 0, out, e);
}

enum core_status store_open_flags(const char *path, unsigned flags,
                                  struct store **out, struct core_err *e)
{
	struct store *s;
	struct env *v, **pp;
	struct stat st;
	const char *x;
	int maj, min, patch;
	enum core_status rc;

	*out = NULL;
	mdb_version(&maj, &min, &patch);
	if (maj == 0 && min == 9 && patch >= 26 && patch <= 31)
		return core_fail(e, CORE_EPRECONDITION,
		                 "LMDB %d.%d.%d breaks when many processes open a store "
		                 "(ITS#9278); use 0.9.25 or older, or 0.9.32 or newer",
		                 maj, min, patch);
	if ((rc = (flags & STORE_OPEN_EXISTING) ? find_store(path, e) : make_dirs(path, e))
	    != CORE_OK || (rc = trust_store(path, e)) != CORE_OK ||
	    (rc = refuse_remote(path, e)) != CORE_OK)
		return rc;
	if (stat(path, &st) < 0)
		return core_fail_sys(e, "cannot open store '%s'", path);
	guard_std_fds();
	s = calloc(1, sizeof *s);
	if (!s)
		return core_fail(e, CORE_ENOMEM, "open the store: out of memory");
	s->pid = getpid();
	s->verify = (x = getenv("AGENTKIT_STORE_VERIFY")) && *x && strcmp(x, "0");

	pthread_mutex_lock(&reg_lock);
	for (pp = &reg; (v = *pp); pp = &v->next) {
		if (v->pid != s->pid) {         /* inherited across fork: abandon */
			*pp = v->next;
			if (!*pp)
				break;
			v = *pp;
		}
		if (v->dev == st.st_dev && v->ino == st.st_ino && v->pid == s->pid)
			break;
	}
	if (v) {
		v->refs++;
	} else if ((rc = env_open(path, &st, flags, &v, e)) == CORE_OK) {
		v->next = reg;
		reg = v;
	}
	pthread_mutex_unlock(&reg_lock);
	if (rc != CORE_OK) {
		free(s);
		return rc;
	}
	s->e = v;
	*out = s;
	return CORE_OK;
}

void store_close(struct store *s)
{
	struct env **pp;
	if (!s)
		return;
	if (s->pid == getpid()) {
		pthread_mutex_lock(&reg_lock);
		if (--s->e->refs == 0) {
			for (pp = &reg; *pp; pp = &(*pp)->next)
				if (*pp == s->e) {
					*pp = s->e->next;
					break;
				}
			env_free(s->e);
		}
		pthread_mutex_unlock(&reg_lock);
	}
	json_decref(s->mc.msgs);
	free(s->mc.keys);
	free(s);
}

/* ---- rows: decoding ---- */

static json_t *parse_val(const void *p, size_t n, struct core_err *e)
{
	json_t *v = jv_parse(p, n, "store", 0, e);
	if (!v && e)
		core_err_prefix(e, "corrupt store value");
	return v;
}

/* A new object: src's members with (key, val) inserted at position pos
 * (consumes val). */
static json_t *insert_at(const json_t *src, size_t pos, const char *key, json_t *val)
{
	json_t *out = json_object();
	const char *k;
	json_t *x;
	size_t i = 0;
	if (!out) {
		json_decref(val);
		return NULL;
	}
	json_object_foreach((json_t *)src, k, x) {
		if (i++ == pos)
			json_object_set_new(out, key, val), val = NULL;
		json_object_set(out, k, x);
	}
	if (val)
		json_object_set_new(out, key, val);
	return out;
}

/* The sequence number of the message node with this hash. */
static int node_seq(struct env *v, MDB_txn *t, const unsigned char *hash, uint64_t *seq)
{
	MDB_val k = { NODE, (void *)hash }, d;
	int rc = mdb_get(t, v->dbi[DB_NODE], &k, &d);
	if (rc == 0 && d.mv_size != 12)
		return MDB_CORRUPTED;
	if (rc == 0)
		*seq = get_be64(d.mv_data);
	return rc;
}

static enum core_status read_messages(struct env *v, MDB_txn *t, const unsigned char *tail,
                                      uint32_t count, json_t **out, struct core_err *e)
{
	json_t *arr = json_array();
	unsigned char key[8];
	uint64_t seq = 0;
	uint32_t i;
	int rc0;
	if (!arr)
		return core_fail(e, CORE_ENOMEM, "read messages: out of memory");
	for (i = 0; i < count; i++)
		json_array_append_new(arr, json_null());
	if (count && (rc0 = node_seq(v, t, tail, &seq))) {
		json_decref(arr);
		return rc0 == MDB_NOTFOUND
		       ? core_fail(e, CORE_ESYS, "corrupt store: a message is missing")
		       : mdb_fail(e, rc0, "read messages");
	}
	put_be64(key, seq);
	for (i = count; i-- > 0;) {
		MDB_val k = { 8, key }, d;
		json_t *m;
		int rc = mdb_get(t, v->dbi[DB_MSG], &k, &d);
		if (rc) {
			json_decref(arr);
			return rc == MDB_NOTFOUND
			       ? core_fail(e, CORE_ESYS, "corrupt store: a message is missing")
			       : mdb_fail(e, rc, "read messages");
		}
		if (d.mv_size < MSG_HDR || !(m = parse_val((char *)d.mv_data + MSG_HDR,
		                                           d.mv_size - MSG_HDR, e))) {
			json_decref(arr);
			return e && e->st ? e->st : core_fail(e, CORE_ESYS, "corrupt store node");
		}
		json_array_set_new(arr, i, m);
		memcpy(key, d.mv_data, 8);
	}
	*out = arr;
	return CORE_OK;
}

static enum core_status read_state(struct env *v, MDB_txn *t, const MDB_val *id,
                                   json_t **out, struct chain_ref *ref, struct core_err *e)
{
	MDB_val d;
	const unsigned char *h;
	json_t *rest, *msgs = NULL;
	enum core_status st;
	int rc = mdb_get(t, v->dbi[DB_STATE], (MDB_val *)id, &d);
	if (rc)
		return rc == MDB_NOTFOUND ? core_fail(e, CORE_ESYS, "corrupt store: state missing")
		                          : mdb_fail(e, rc, "read state");
	h = d.mv_data;
	if (d.mv_size < STATE_HDR || h[0] != 1)
		return core_fail(e, CORE_ESYS, "corrupt store: bad state record");
	if (!(rest = parse_val(h + STATE_HDR, d.mv_size - STATE_HDR, e)))
		return e ? e->st : CORE_ESYS;
	if (!(h[1] & 1)) {
		*out = rest;
		return CORE_OK;
	}
	st = read_messages(v, t, h + 10, get_be32(h + 6), &msgs, e);
	if (st != CORE_OK) {
		json_decref(rest);
		return st;
	}
	if (ref) {
		memcpy(ref->tail, h + 10, NODE);
		ref->count = get_be32(h + 6);
	}
	*out = insert_at(rest, get_be32(h + 2), "messages", msgs);
	json_decref(rest);
	return *out ? CORE_OK : core_fail(e, CORE_ENOMEM, "read state: out of memory");
}

/* The row stored under id (MDB_NOTFOUND passes through as CORE_ENOTFOUND
 * without a message).  ref (optional) receives the row's message chain;
 * its count stays 0 when the row has none or only metadata was read. */
static enum core_status read_row(struct env *v, MDB_txn *t, const char *id,
                                 unsigned flags, json_t **out, struct chain_ref *ref,
                                 struct core_err *e)
{
	MDB_val k = { strlen(id), (void *)id }, d;
	const unsigned char *h;
	json_t *meta, *state;
	enum core_status st;
	int rc = mdb_get(t, v->dbi[DB_META], &k, &d);
	*out = NULL;
	if (rc == MDB_NOTFOUND)
		return CORE_ENOTFOUND;
	if (rc)
		return mdb_fail(e, rc, "read snapshot");
	h = d.mv_data;
	if (d.mv_size < META_HDR || h[0] != 1)
		return core_fail(e, CORE_ESYS, "corrupt store: bad row '%s'", id);
	if (!(meta = parse_val(h + META_HDR, d.mv_size - META_HDR, e)))
		return e ? e->st : CORE_ESYS;
	if ((flags & STORE_METADATA_ONLY) || !(h[1] & 1)) {
		*out = meta;
		return CORE_OK;
	}
	if ((st = read_state(v, t, &k, &state, ref, e)) != CORE_OK) {
		json_decref(meta);
		return st;
	}
	*out = insert_at(meta, get_be32(h + 2), "state", state);
	json_decref(meta);
	return *out ? CORE_OK : core_fail(e, CORE_ENOMEM, "read snapshot: out of memory");
}

/* ---- session index ---- */

static size_t bysess_prefix(unsigned char *k, const char *sid)
{
	size_t n = strlen(sid);
	k[0] = (unsigned char)n;
	memcpy(k + 1, sid, n);
	return n + 1;
}

static size_t bysess_key(unsigned char *k, const char *sid, uint64_t tkey, const char *id)
{
	size_t n = bysess_prefix(k, sid), m = strlen(id);
	put_be64(k + n, tkey);
	memcpy(k + n + 8, id, m);
	return n + 8 + m;
}

/* The snapshot ID of the session's latest index entry into id (NUL-ended). */
static int latest_id(struct env *v, MDB_txn *t, const char *sid, char *id)
{
	unsigned char key[512];
	size_t n = bysess_prefix(key, sid);
	MDB_cursor *c;
	MDB_val k, d;
	int rc;
	memset(key + n, 0xFF, 9);
	k.mv_size = n + 9;
	k.mv_data = key;
	if ((rc = mdb_cursor_open(t, v->dbi[DB_BYSESS], &c)))
		return rc;
	rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
	if (rc == 0)
		rc = mdb_cursor_get(c, &k, &d, MDB_PREV);
	else if (rc == MDB_NOTFOUND)
		rc = mdb_cursor_get(c, &k, &d, MDB_LAST);
	if (rc == 0 && (k.mv_size < n + 8 || memcmp(k.mv_data, key, n)))
		rc = MDB_NOTFOUND;
	if (rc == 0) {
		memcpy(id, (char *)k.mv_data + n + 8, k.mv_size - n - 8);
		id[k.mv_size - n - 8] = 0;
	}
	mdb_cursor_close(c);
	return rc;
}

/* ---- reads ---- */

enum core_status store_get(struct store *s, const char *snapshot_id,
                           unsigned flags, json_t **row, struct core_err *e)
{
	struct chain_ref ref = { .count = 0 };
	MDB_txn *t;
	enum core_status st;
	int rc;
	*row = NULL;
	if ((st = check_handle(s, e)) != CORE_OK ||
	    (st = store_check_id(snapshot_id, "snapshot ID", e)) != CORE_OK)
		return st;
	if ((rc = txn_begin(s->e, 0, &t, NULL)))
		return mdb_fail(e, rc, "read snapshot");
	st = read_row(s->e, t, snapshot_id, flags, row, &ref, e);
	txn_abort(s->e, t, 0, NULL);
	if (st == CORE_OK && !(flags & STORE_METADATA_ONLY))
		remember_read(s, snapshot_id, &ref);
	if (st == CORE_ENOTFOUND)
		return core_fail(e, st, "snapshot '%s' not found", snapshot_id);
	return st;
}

enum core_status store_latest(struct store *s, const char *session_id,
                              unsigned flags, json_t **row, struct core_err *e)
{
	struct chain_ref ref = { .count = 0 };
	MDB_txn *t;
	char id[512];
	enum core_status st;
	int rc;
	*row = NULL;
	if ((st = check_handle(s, e)) != CORE_OK)
		return st;
	if (!session_id || !*session_id)
		return core_fail(e, CORE_EINVAL, "session ID is empty");
	if ((st = store_check_id(session_id, "session ID", e)) != CORE_OK)
		return st;
	if ((rc = txn_begin(s->e, 0, &t, NULL)))
		return mdb_fail(e, rc, "read latest snapshot");
	rc = latest_id(s->e, t, session_id, id);
	if (rc == 0)
		st = read_row(s->e, t, id, flags, row, &ref, e);
	else if (rc == MDB_NOTFOUND)
		st = CORE_ENOTFOUND;
	else
		st = mdb_fail(e, rc, "read latest snapshot");
	txn_abort(s->e, t, 0, NULL);
	if (st == CORE_OK && !(flags & STORE_METADATA_ONLY))
		remember_read(s, id, &ref);
	if (st == CORE_ENOTFOUND)
		return core_fail(e, st, "no snapshot found for session '%s'", session_id);
	return st;
}

/* ---- writes: reference counts and message chains ---- */

/* Add delta to a node's reference count; at zero its node entry goes (the
 * caller deletes the message, *seq says which). */
static int ref_add(struct env *v, MDB_txn *t, const unsigned char *node, int delta,
                   uint32_t *after, uint64_t *seq)
{
	MDB_val k = { NODE, (void *)node }, d;
	unsigned char buf[12];
	uint32_t n;
	int rc = mdb_get(t, v->dbi[DB_NODE], &k, &d);
	if (rc)
		return rc;
	if (d.mv_size != 12)
		return MDB_CORRUPTED;
	memcpy(buf, d.mv_data, 12);
	*seq = get_be64(buf);
	n = get_be32(buf + 8);
	n = delta < 0 ? (n ? n - 1 : 0) : n + 1;
	*after = n;
	if (n == 0)
		return mdb_del(t, v->dbi[DB_NODE], &k, NULL);
	put_be32(buf + 8, n);
	d.mv_size = 12;
	d.mv_data = buf;
	return mdb_put(t, v->dbi[DB_NODE], &k, &d, 0);
}

static const unsigned char zero_node[NODE];

/* Release one reference on node; nodes left unreferenced are deleted and
 * release their predecessor in turn. */
static int node_release(struct env *v, MDB_txn *t, const unsigned char *node)
{
	unsigned char cur[NODE];
	memcpy(cur, node, NODE);
	while (memcmp(cur, zero_node, NODE)) {
		unsigned char sk[8];
		MDB_val k = { 8, sk }, d;
		uint32_t left;
		uint64_t seq;
		int rc = ref_add(v, t, cur, -1, &left, &seq);
		if (rc || left)
			return rc;
		put_be64(sk, seq);
		if ((rc = mdb_get(t, v->dbi[DB_MSG], &k, &d)))
			return rc;
		if (d.mv_size < MSG_HDR)
			return MDB_CORRUPTED;
		memcpy(cur, (unsigned char *)d.mv_data + 8, NODE);
		if ((rc = mdb_del(t, v->dbi[DB_MSG], &k, NULL)))
			return rc;
	}
	return 0;
}

/* The old state row's chain tail (zeros if none). */
static int old_tail(struct env *v, MDB_txn *t, MDB_val *id, unsigned char *tail, int *had)
{
	MDB_val d;
	int rc = mdb_get(t, v->dbi[DB_STATE], id, &d);
	memset(tail, 0, NODE);
	*had = rc == 0;
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (d.mv_size >= STATE_HDR && (((unsigned char *)d.mv_data)[1] & 1))
		memcpy(tail, (unsigned char *)d.mv_data + 10, NODE);
	return 0;
}

struct wctx {
	struct core_err *e;
	struct core_buf tmp, tmp2;      /* scratch for encoding */
	struct store *s;
	EVP_MD_CTX *md;                 /* for node keys; made on first use */
	const struct store_base *base;  /* a save's base, or NULL */
};

/*
 * SHA-256 from libcrypto, loaded with the first node key rather than at
 * start-up: the commands that never write history (agent-wait, agent-abort)
 * start about a millisecond sooner.  The library loaded is the one the
 * headers belong to; the digest is fetched once (a one-shot call would
 * fetch it every time).
 */
#define LIBCRYPTO "libcrypto.so." OPENSSL_MSTR(OPENSSL_VERSION_MAJOR)
static struct {
	EVP_MD *(*md_fetch)(OSSL_LIB_CTX *, const char *, const char *);
	EVP_MD_CTX *(*ctx_new)(void);
	void (*ctx_free)(EVP_MD_CTX *);
	int (*init)(EVP_MD_CTX *, const EVP_MD *, ENGINE *);
	int (*update)(EVP_MD_CTX *, const void *, size_t);
	int (*final)(EVP_MD_CTX *, unsigned char *, unsigned int *);
	EVP_MD *sha256;
	char why[256];          /* why it could not be loaded */
} crypto;

static void crypto_load(void)
{
	static const char *const names[] = { "EVP_MD_fetch", "EVP_MD_CTX_new", "EVP_MD_CTX_free",
	                                     "EVP_DigestInit_ex", "EVP_DigestUpdate",
	                                     "EVP_DigestFinal_ex" };
	void **slots[] = { (void **)&crypto.md_fetch, (void **)&crypto.ctx_new,
	                   (void **)&crypto.ctx_free, (void **)&crypto.init,
	                   (void **)&crypto.update, (void **)&crypto.final };
	if (!core_dl_load(LIBCRYPTO, names, slots, sizeof names / sizeof *names, crypto.why,
	                  sizeof crypto.why))
		return;
	if (!(crypto.sha256 = crypto.md_fetch(NULL, "SHA256", NULL)))
		snprintf(crypto.why, sizeof crypto.why, "%s has no SHA-256", LIBCRYPTO);
}

/* out = SHA-256(p[0..n)): a node key.  -1 with w->e filled when libcrypto
 * cannot be loaded. */
static int node_key(struct wctx *w, const void *p, size_t n, unsigned char *out)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, crypto_load);
	if (!crypto.sha256) {
		core_fail(w->e, CORE_ESYS, "cannot hash messages: %s", crypto.why);
		return -1;
	}
	if ((!w->md && !(w->md = crypto.ctx_new())) || !crypto.init(w->md, crypto.sha256, NULL) ||
	    !crypto.update(w->md, p, n) || !crypto.final(w->md, out, NULL))
		return ENOMEM;
	return 0;
}

/* How many leading messages of msgs the cache holds unchanged; their node
 * keys go into keys. */
static size_t cache_prefix(const struct msg_cache *mc, const json_t *msgs,
                           unsigned char *keys)
{
	size_t i, n = json_array_size(msgs), c = json_array_size(mc->msgs);
	for (i = 0; i < n && i < c; i++)
		if (!jv_same(json_array_get(msgs, i), json_array_get(mc->msgs, i)))
			break;
	if (i)
		memcpy(keys, mc->keys, i * NODE);
	return i;
}

/* Remember msgs and their node keys; the cache's first `same` messages are
 * already theirs.  Best effort: out of memory empties the cache. */
static void cache_keep(struct msg_cache *mc, const json_t *msgs,
                       const unsigned char *keys, size_t same)
{
	size_t i, n = json_array_size(msgs);
	if (mc->writes++ == 0)
		return;
	if (!mc->msgs && !(mc->msgs = json_array()))
		return;
	while (json_array_size(mc->msgs) > same)
		json_array_remove(mc->msgs, json_array_size(mc->msgs) - 1);
	if (n > mc->cap) {
		unsigned char *k = realloc(mc->keys, n * NODE);
		if (!k)
			goto drop;
		mc->keys = k;
		mc->cap = n;
	}
	for (i = same; i < n; i++)
		if (json_array_append_new(mc->msgs, json_deep_copy(json_array_get(msgs, i))))
			goto drop;
	if (n > same)
		memcpy(mc->keys + same * NODE, keys + same * NODE, (n - same) * NODE);
	return;
drop:
	json_array_clear(mc->msgs);
}

/*
 * The save's base (store_save_on()): its first kept messages are those of a
 * chain this handle read or wrote, so the key of message kept-1 is found by
 * walking that chain back from its tail without reading a message.  Only
 * keys[kept-1] is set; the new nodes link to it and nothing needs the
 * others.  *matched stays 0 when the base cannot be used (unknown to the
 * handle, shorter than kept, its nodes since deleted).
 */
static int base_prefix(struct env *v, MDB_txn *t, const struct wctx *w, size_t n,
                       unsigned char *keys, size_t *matched)
{
	const struct store_base *b = w->base;
	const struct chain_ref *r;
	unsigned char cur[NODE], sk[8];
	uint64_t seq;
	uint32_t j;
	int rc;
	*matched = 0;
	if (!b || !b->id || !b->kept || b->kept > n || !(r = ref_find(w->s, b->id)) ||
	    r->count < b->kept)
		return 0;
	memcpy(cur, r->tail, NODE);
	for (j = r->count;; j--) {
		MDB_val k = { 8, sk }, d;
		if ((rc = node_seq(v, t, cur, &seq)))
			return rc == MDB_NOTFOUND ? 0 : rc;
		if (j == b->kept)
			break;
		put_be64(sk, seq);
		if ((rc = mdb_get(t, v->dbi[DB_MSG], &k, &d)))
			return rc == MDB_NOTFOUND ? MDB_CORRUPTED : rc;
		if (d.mv_size < MSG_HDR)
			return MDB_CORRUPTED;
		memcpy(cur, (unsigned char *)d.mv_data + 8, NODE);
	}
	memcpy(keys + (b->kept - 1) * NODE, cur, NODE);
	*matched = b->kept;
	return 0;
}

/* AGENTKIT_STORE_VERIFY: the base's claim checked the slow way, by hashing
 * the messages said to be unchanged (tests run with it on). */
static int base_verify(struct wctx *w, const json_t *msgs, size_t kept,
                       const unsigned char *key)
{
	unsigned char k[NODE] = { 0 };
	size_t i;
	int rc;
	for (i = 0; i < kept; i++) {
		core_buf_reset(&w->tmp2);
		if (core_buf_add(&w->tmp2, k, NODE) != CORE_OK ||
		    jv_dump(json_array_get(msgs, i), &w->tmp2) != CORE_OK)
			return ENOMEM;
		if ((rc = node_key(w, w->tmp2.p, w->tmp2.len, k)))
			return rc;
	}
	if (!memcmp(k, key, NODE))
		return 0;
	core_fail(w->e, CORE_EINTERNAL, "save snapshot: the first %zu messages are not "
	          "those of the base row '%s' (the caller's claim is wrong)", kept, w->base->id);
	return -1;
}

/*
 * How many leading messages of msgs are, byte for byte, the messages of a
 * stored chain: the chain whose tail is own_tail (when not NULL and not
 * empty), else the chain of the row parent_id.  Their node keys go into
 * keys[0..*matched).  Costs one node read and one memcmp per message
 * instead of hashing the whole history on every turn.
 */
static int chain_prefix(struct env *v, MDB_txn *t, const unsigned char *own_tail,
                       const char *parent_id, const json_t *msgs, unsigned char *keys,
                       size_t *matched, struct wctx *w)
{
	unsigned char tail[NODE];
	MDB_val k, d;
	size_t c, i, n = json_array_size(msgs);
	MDB_val *vals = NULL;
	int rc;
	*matched = 0;
	if (own_tail && memcmp(own_tail, zero_node, NODE)) {
		memcpy(tail, own_tail, NODE);
	} else if (parent_id && *parent_id && strlen(parent_id) <= STORE_ID_MAX) {
		k.mv_size = strlen(parent_id);
		k.mv_data = (void *)parent_id;
		rc = mdb_get(t, v->dbi[DB_STATE], &k, &d);
		if (rc == MDB_NOTFOUND)
			return 0;
		if (rc)
			return rc;
		if (d.mv_size < STATE_HDR || !(((unsigned char *)d.mv_data)[1] & 1))
			return 0;
		memcpy(tail, (unsigned char *)d.mv_data + 10, NODE);
	} else {
		return 0;
	}
	/* the chain's length is unknown here: walk it back into vals */
	{
		size_t cap = n + 1;
		unsigned char cur[8];
		uint64_t seq;
		if ((rc = node_seq(v, t, tail, &seq)))
			return rc == MDB_NOTFOUND ? 0 : rc;
		vals = malloc(cap * sizeof *vals);
		if (!vals)
			return ENOMEM;
		put_be64(cur, seq);
		for (c = 0; get_be64(cur); c++) {
			if (c == cap) {         /* longer than msgs: drop its newest */
				memmove(vals, vals + 1, (cap - 1) * sizeof *vals);
				c--;
			}
			k.mv_size = 8;
			k.mv_data = cur;
			if ((rc = mdb_get(t, v->dbi[DB_MSG], &k, &vals[c])) ||
			    vals[c].mv_size < MSG_HDR) {
				free(vals);
				return rc == MDB_NOTFOUND || !rc ? 0 : rc;
			}
			memcpy(cur, vals[c].mv_data, 8);
		}
	}
	/* vals[c-1] is the oldest message; its key is SHA-256(zero | bytes) */
	for (i = 0; i < c && i < n; i++) {
		const MDB_val *nv = &vals[c - 1 - i];
		core_buf_reset(&w->tmp);
		if (jv_dump(json_array_get(msgs, i), &w->tmp) != CORE_OK) {
			free(vals);
			return ENOMEM;
		}
		if (w->tmp.len != nv->mv_size - MSG_HDR ||
		    memcmp(w->tmp.p, (char *)nv->mv_data + MSG_HDR, w->tmp.len))
			break;
		/* the key of message i is the prev pointer of message i+1, or the
		 * tail itself for the newest */
		if (i + 1 < c)
			memcpy(keys + i * NODE, (char *)vals[c - 2 - i].mv_data + 8, NODE);
		else
			memcpy(keys + i * NODE, tail, NODE);
	}
	*matched = i;
	free(vals);
	return 0;
}

/* Write the state of row id: new messages as chain nodes, then the state
 * record; the old record's chain is released. */
static int write_state(struct env *v, MDB_txn *t, const char *id, const json_t *state,
                       const char *parent, struct wctx *w)
{
	MDB_val k = { strlen(id), (void *)id }, d;
	const json_t *msgs = json_is_object(state) ? json_object_get(state, "messages") : NULL;
	unsigned char hdr[STATE_HDR] = { 1 }, prev_tail[NODE], *keys = NULL;
	size_t n = 0, pos = 0, i, have, matched = 0, cached, *recs = NULL;
	json_t *rest = NULL;
	int rc = 0, had, based = 0;
	uint32_t refs;
	uint64_t sq_unused;

	if ((rc = old_tail(v, t, &k, prev_tail, &had)))
		return rc;
	if (json_is_array(msgs)) {
		const char *key;
		json_t *x;
		n = json_array_size(msgs);
		json_object_foreach((json_t *)state, key, x) {
			if (!strcmp(key, "messages"))
				break;
			pos++;
		}
		keys = malloc(n ? n * NODE : 1);
		rest = json_object();
		if (!keys || !rest)
			goto nomem;
		json_object_foreach((json_t *)state, key, x)
			if (strcmp(key, "messages") && json_object_set(rest, key, x))
				goto nomem;
		/* node keys of the history: the prefix already stored comes from
		 * the save's base without reading it, else from the history the
		 * handle wrote last by comparing trees, else from a stored chain
		 * (this row's old state, else its parent's) by comparing bytes;
		 * only the rest is hashed */
		if ((rc = base_prefix(v, t, w, n, keys, &matched)))
			goto out;
		based = matched > 0;
		if (based && w->s->verify &&
		    (rc = base_verify(w, msgs, matched, keys + (matched - 1) * NODE)))
			goto out;
		cached = based ? 0 : cache_prefix(&w->s->mc, msgs, keys);
		if (!based)
			matched = cached;
		if (!matched && (rc = chain_prefix(v, t, had ? prev_tail : NULL, parent,
		                                   msgs, keys, &matched, w)))
			goto out;
		/* each new message once as its msg record, prev seq | prev key |
		 * JSON: the key is SHA-256 over all but the seq */
		recs = calloc(n - matched + 1, sizeof *recs);
		if (!recs)
			goto nomem;
		core_buf_reset(&w->tmp);
		for (i = matched; i < n; i++) {
			size_t at = w->tmp.len;
			recs[i - matched] = at;
			if (core_buf_add(&w->tmp, zero_node, 8) != CORE_OK ||
			    core_buf_add(&w->tmp, i ? keys + (i - 1) * NODE : zero_node,
			                 NODE) != CORE_OK ||
			    jv_dump(json_array_get(msgs, i), &w->tmp) != CORE_OK)
				goto nomem;
			if ((rc = node_key(w, w->tmp.p + at + 8, w->tmp.len - at - 8,
			                   keys + i * NODE)))
				goto out;
		}
		recs[n - matched] = w->tmp.len;
		if (based)
			json_array_clear(w->s->mc.msgs);        /* now stale */
		else
			cache_keep(&w->s->mc, msgs, keys, cached);
		if (n)
			ref_remember(w->s, id, keys + (n - 1) * NODE, (uint32_t)n);
		else
			ref_forget(w->s, id);
		/* the longest prefix already stored (a node implies its prefix):
		 * a cached prefix may have been deleted since, a base's node was
		 * just seen (so keys below it, unset then, are never read) */
		for (have = n; have > 0; have--) {
			uint64_t sq;
			rc = node_seq(v, t, keys + (have - 1) * NODE, &sq);
			if (rc == 0)
				break;
			if (rc != MDB_NOTFOUND)
				goto out;
		}
		rc = 0;
		if (have < n) {
			MDB_cursor *cur;
			MDB_val lk, ld;
			uint64_t last = 0, prev_seq = 0;
			if ((rc = mdb_cursor_open(t, v->dbi[DB_MSG], &cur)))
				goto out;
			rc = mdb_cursor_get(cur, &lk, &ld, MDB_LAST);
			if (rc == 0 && lk.mv_size == 8)
				last = get_be64(lk.mv_data);
			mdb_cursor_close(cur);
			if (rc && rc != MDB_NOTFOUND)
				goto out;
			if (have && (rc = node_seq(v, t, keys + (have - 1) * NODE, &prev_seq)))
				goto out;
			for (i = have; i < n; i++) {
				unsigned char sk[8], nv[12];
				MDB_val mk = { 8, sk }, nk = { NODE, keys + i * NODE };
				const unsigned char *prev = i ? keys + (i - 1) * NODE : zero_node;
				/* have < matched only when a cached prefix is gone:
				 * rebuild those records */
				if (i < matched) {
					core_buf_reset(&w->tmp2);
					if (core_buf_add(&w->tmp2, zero_node, 8) != CORE_OK ||
					    core_buf_add(&w->tmp2, prev, NODE) != CORE_OK ||
					    jv_dump(json_array_get(msgs, i), &w->tmp2) != CORE_OK)
						goto nomem;
					d.mv_data = w->tmp2.p;
					d.mv_size = w->tmp2.len;
				} else {
					d.mv_data = w->tmp.p + recs[i - matched];
					d.mv_size = recs[i - matched + 1] - recs[i - matched];
				}
				put_be64(d.mv_data, prev_seq);
				put_be64(sk, ++last);
				if ((rc = mdb_put(t, v->dbi[DB_MSG], &mk, &d, MDB_APPEND)))
					goto out;
				put_be64(nv, last);
				put_be32(nv + 8, 0);
				d.mv_size = 12;
				d.mv_data = nv;
				if ((rc = mdb_put(t, v->dbi[DB_NODE], &nk, &d, 0)))
					goto out;
				if (i && (rc = ref_add(v, t, prev, 1, &refs, &sq_unused)))
					goto out;
				prev_seq = last;
			}
		}
		if (n && (rc = ref_add(v, t, keys + (n - 1) * NODE, 1, &refs, &sq_unused)))
			goto out;
		hdr[1] = 1;
		put_be32(hdr + 2, (uint32_t)pos);
		put_be32(hdr + 6, (uint32_t)n);
		if (n)
			memcpy(hdr + 10, keys + (n - 1) * NODE, NODE);
	} else {
		rest = json_incref((json_t *)state);
		ref_forget(w->s, id);
	}
	if (had && (rc = node_release(v, t, prev_tail)))
		goto out;
	core_buf_reset(&w->tmp);
	if (core_buf_add(&w->tmp, hdr, STATE_HDR) != CORE_OK ||
	    jv_dump(rest, &w->tmp) != CORE_OK)
		goto nomem;
	d.mv_size = w->tmp.len;
	d.mv_data = w->tmp.p;
	rc = mdb_put(t, v->dbi[DB_STATE], &k, &d, 0);
	goto out;
nomem:
	rc = ENOMEM;
out:
	free(keys);
	free(recs);
	json_decref(rest);
	return rc;
}

static int delete_state(struct env *v, MDB_txn *t, const char *id)
{
	MDB_val k = { strlen(id), (void *)id };
	unsigned char tail[NODE];
	int had, rc = old_tail(v, t, &k, tail, &had);
	if (rc || !had)
		return rc;
	if ((rc = node_release(v, t, tail)))
		return rc;
	return mdb_del(t, v->dbi[DB_STATE], &k, NULL);
}

static int sess_add(struct env *v, MDB_txn *t, const char *sid, int delta)
{
	MDB_val k = { strlen(sid), (void *)sid }, d;
	unsigned char buf[8];
	uint64_t n = 0;
	int rc = mdb_get(t, v->dbi[DB_SESS], &k, &d);
	if (rc == 0 && d.mv_size == 8)
		n = get_be64(d.mv_data);
	else if (rc && rc != MDB_NOTFOUND)
		return rc;
	n = delta < 0 ? (n ? n - 1 : 0) : n + 1;
	if (n == 0)
		return rc == MDB_NOTFOUND ? 0 : mdb_del(t, v->dbi[DB_SESS], &k, NULL);
	put_be64(buf, n);
	d.mv_size = 8;
	d.mv_data = buf;
	return mdb_put(t, v->dbi[DB_SESS], &k, &d, 0);
}

/* What the index needs to know about a stored row. */
struct oldrow {
	int exists;
	uint64_t tkey;
	char sid[STORE_ID_MAX + 1];
	char status[32];
	int status_set;
};

static int old_row(struct env *v, MDB_txn *t, const char *id, struct oldrow *o,
                   struct core_err *e)
{
	MDB_val k = { strlen(id), (void *)id }, d;
	json_t *meta;
	const char *x;
	int rc = mdb_get(t, v->dbi[DB_META], &k, &d);
	memset(o, 0, sizeof *o);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (d.mv_size < META_HDR || !(meta = parse_val((char *)d.mv_data + META_HDR,
	                                               d.mv_size - META_HDR, e)))
		return MDB_CORRUPTED;
	o->exists = 1;
	o->tkey = get_be64((unsigned char *)d.mv_data + 6);
	if ((x = st_str(meta, "sessionId")))
		snprintf(o->sid, sizeof o->sid, "%s", x);
	if ((x = st_str(meta, "status"))) {
		snprintf(o->status, sizeof o->status, "%s", x);
		o->status_set = 1;
	}
	json_decref(meta);
	return 0;
}

/*
 * Write row (an object with valid snapshotId and sessionId) as given,
 * replacing the stored one.  Under STORE_METADATA_ONLY a row without
 * "state" keeps the stored state.  *changed is set when the status changed
 * (or the row is new).
 */
static int write_row(struct env *v, MDB_txn *t, const json_t *row, unsigned flags,
                     int *changed, struct wctx *w)
{
	const char *id = st_str(row, "snapshotId"), *sid = st_str(row, "sessionId");
	const char *status = st_str(row, "status"), *created = st_str(row, "createdAt");
	const json_t *state = json_object_get(row, "state");
	unsigned char hdr[META_HDR] = { 1 }, ik[512];
	MDB_val k = { strlen(id), (void *)id }, d;
	struct oldrow o;
	int64_t cns = 0;
	uint64_t tkey;
	size_t pos = 0;
	json_t *meta;
	int rc, keep_state = 0;

	if ((rc = old_row(v, t, id, &o, w->e)))
		return rc;
	if (created && !st_time_ns(created, &cns))
		cns = 0;
	tkey = time_key(cns);
	*changed = !o.exists || o.status_set != !!status ||
	           (status && strcmp(o.status, status));
	if (!state && (flags & STORE_METADATA_ONLY) && o.exists) {
		MDB_val od;
		if ((rc = mdb_get(t, v->dbi[DB_META], &k, &od)))
			return rc;
		keep_state = ((unsigned char *)od.mv_data)[1] & 1;
		pos = get_be32((unsigned char *)od.mv_data + 2);
	} else if (state) {
		const char *key;
		json_t *x;
		json_object_foreach((json_t *)row, key, x) {
			if (!strcmp(key, "state"))
				break;
			pos++;
		}
		if ((rc = write_state(v, t, id, state, st_str(row, "parentId"), w)))
			return rc;
	} else if ((rc = delete_state(v, t, id))) {
		return rc;
	}
	hdr[1] = state || keep_state ? 1 : 0;
	put_be32(hdr + 2, (uint32_t)pos);
	put_be64(hdr + 6, tkey);
	if (!(meta = json_copy((json_t *)row)))
		return ENOMEM;
	json_object_del(meta, "state");
	core_buf_reset(&w->tmp);
	if (core_buf_add(&w->tmp, hdr, META_HDR) != CORE_OK || jv_dump(meta, &w->tmp) != CORE_OK) {
		json_decref(meta);
		return ENOMEM;
	}
	json_decref(meta);
	d.mv_size = w->tmp.len;
	d.mv_data = w->tmp.p;
	if ((rc = mdb_put(t, v->dbi[DB_META], &k, &d, 0)))
		return rc;
	/* the session index: move the entry when the session or time changed */
	if (o.exists && (o.tkey != tkey || strcmp(o.sid, sid))) {
		MDB_val ok = { bysess_key(ik, o.sid, o.tkey, id), ik };
		if ((rc = mdb_del(t, v->dbi[DB_BYSESS], &ok, NULL)) && rc != MDB_NOTFOUND)
			return rc;
		if (strcmp(o.sid, sid) && ((rc = sess_add(v, t, o.sid, -1)) ||
		                           (rc = sess_add(v, t, sid, 1))))
			return rc;
	} else if (o.exists) {
		return 0;
	} else if ((rc = sess_add(v, t, sid, 1))) {
		return rc;
	}
	k.mv_size = bysess_key(ik, sid, tkey, id);
	k.mv_data = ik;
	d.mv_size = 0;
	d.mv_data = NULL;
	return mdb_put(t, v->dbi[DB_BYSESS], &k, &d, 0);
}

static int delete_row(struct env *v, MDB_txn *t, const char *id, struct core_err *e)
{
	MDB_val k = { strlen(id), (void *)id };
	unsigned char ik[512];
	struct oldrow o;
	int rc;
	if ((rc = old_row(v, t, id, &o, e)) || !o.exists)
		return rc;
	if ((rc = delete_state(v, t, id)) || (rc = mdb_del(t, v->dbi[DB_META], &k, NULL)))
		return rc;
	k.mv_size = bysess_key(ik, o.sid, o.tkey, id);
	k.mv_data = ik;
	if ((rc = mdb_del(t, v->dbi[DB_BYSESS], &k, NULL)) && rc != MDB_NOTFOUND)
		return rc;
	return sess_add(v, t, o.sid, -1);
}

/*
 * LMDB turns a short write into EIO ("short write, filesystem full?"),
 * which is what a write that fills the disk gets: when the store's
 * filesystem has less than a megabyte left for this user, the cause was
 * the full disk, and the error says so (ENOSPC).
 */
static int write_cause(const struct env *v, int rc)
{
	struct statvfs sv;
	unsigned long long left;
	if (rc != EIO || statvfs(v->path, &sv) < 0)
		return rc;
	left = (unsigned long long)(geteuid() == 0 ? sv.f_bfree : sv.f_bavail) * sv.f_frsize;
	return left < (1u << 20) ? ENOSPC : rc;
}

/*
 * Run op inside a write transaction: growing the map and retrying on
 * MDB_MAP_FULL, waking waiters after the commit when op says a status
 * changed.  op returns an MDB/errno code, or -1 with e filled.
 */
typedef int (*write_op)(struct env *v, MDB_txn *t, void *ctx, int *changed,
                        struct wctx *w);

static enum core_status run_write(struct store *s, const char *what, write_op op,
                                  void *ctx, struct core_err *e)
{
	struct env *v = s->e;
	struct wctx w = { e, CORE_BUF_INIT(CORE_BUF_UNLIMITED),
	                  CORE_BUF_INIT(CORE_BUF_UNLIMITED), s, NULL, NULL };
	enum core_status st = CORE_OK;
	for (;;) {
		MDB_txn *t;
		sigset_t old;
		int changed = 0, rc = txn_begin(v, 1, &t, &old);
		if (rc) {
			st = begin_fail(v, e, rc, what);
			break;
		}
		rc = op(v, t, ctx, &changed, &w);
		if (rc == 0) {
			rc = txn_commit(v, t, &old);
		} else {
			txn_abort(v, t, 1, &old);
			if (rc == -1) {
				st = e && e->st ? e->st : CORE_ESYS;
				break;
			}
		}
		if (rc == MDB_MAP_FULL) {
			if ((st = grow_map(v, e)) != CORE_OK) {
				core_err_prefix(e, "%s", what);
				break;
			}
			continue;
		}
		if (rc) {
			st = mdb_fail(e, write_cause(v, rc), what);
			break;
		}
		if (changed)
			wake_all(v);
		break;
	}
	core_buf_release(&w.tmp);
	core_buf_release(&w.tmp2);
	if (w.md)
		crypto.ctx_free(w.md);
	return st;
}

/* ---- save (read-modify-write) ---- */

struct save_ctx {
	const char *id;
	unsigned flags;
	const struct store_base *base;
	store_mutate_fn fn;
	void *fctx;
	int called;
	json_t *seen;           /* existing row fn saw (NULL: none) */
	json_t *next;           /* fn's result, shaped by the store */
};

static int save_op(struct env *v, MDB_txn *t, void *ctx, int *changed, struct wctx *w)
{
	struct save_ctx *c = ctx;
	json_t *existing = NULL, *next = NULL;
	const char *esid = NULL, *sid, *status;
	enum core_status st;
	int rc;

	st = read_row(v, t, c->id, c->flags, &existing, NULL, w->e);
	if (st != CORE_OK && st != CORE_ENOTFOUND)
		return -1;
	/* fn runs once; a retry after growing the map reuses its answer when
	 * the row it saw is unchanged */
	w->base = c->base;
	if (c->called && ((!existing && !c->seen) ||
	                  (existing && c->seen && jv_equal(existing, c->seen)))) {
		json_decref(existing);
		return c->next ? write_row(v, t, c->next, c->flags, changed, w) : 0;
	}
	json_decref(c->seen);
	json_decref(c->next);
	c->seen = existing;
	c->next = NULL;
	c->called = 1;
	if ((st = c->fn(existing, &next, c->fctx, w->e)) != CORE_OK) {
		json_decref(next);
		if (w->e && !w->e->st)
			core_fail(w->e, st, "%s", core_strerror(st));
		return -1;
	}
	if (!next)
		return 0;
	if (!json_is_object(next)) {
		json_decref(next);
		core_fail(w->e, CORE_EINVAL, "save snapshot: the new row is not an object");
		return -1;
	}
	/* the members set below must not show in fn's object: a shallow copy
	 * (the state, whole histories, stays shared) */
	if (next == existing || next->refcount > 1) {
		json_t *copy = json_copy(next);
		json_decref(next);
		if (!(next = copy))
			return ENOMEM;
	}
	json_object_set_new(next, "snapshotId", json_string(c->id));
	if (existing && (esid = st_str(existing, "sessionId")) && *esid)
		json_object_set_new(next, "sessionId", json_string(esid));
	sid = st_str(next, "sessionId");
	if (!sid || !*sid) {
		json_decref(next);
		core_fail(w->e, CORE_EINVAL, "store requires sessionId to be set on the snapshot");
		return -1;
	}
	if (store_check_id(sid, "session ID", w->e) != CORE_OK) {
		json_decref(next);
		return -1;
	}
	status = st_str(next, "status");
	if (!status || !*status)
		json_object_set_new(next, "status", json_string("completed"));
	c->next = next;
	rc = write_row(v, t, next, c->flags, changed, w);
	return rc;
}

enum core_status store_save(struct store *s, const char *id, unsigned flags,
                            store_mutate_fn fn, void *ctx, json_t **persisted,
                            struct core_err *e)
{
	return store_save_on(s, id, flags, NULL, fn, ctx, persisted, e);
}

enum core_status store_save_on(struct store *s, const char *id, unsigned flags,
                               const struct store_base *base, store_mutate_fn fn,
                               void *ctx, json_t **persisted, struct core_err *e)
{
	struct save_ctx c = { 0 };
	char minted[37];
	enum core_status st;
	if (persisted)
		*persisted = NULL;
	if ((st = check_handle(s, e)) != CORE_OK)
		return st;
	if (!id || !*id) {
		core_uuid(minted);
		id = minted;
	} else if ((st = store_check_id(id, "snapshot ID", e)) != CORE_OK) {
		return st;
	}
	c.id = id;
	c.flags = flags;
	c.base = base;
	c.fn = fn;
	c.fctx = ctx;
	st = run_write(s, "save snapshot", save_op, &c, e);
	if (st == CORE_OK && persisted && c.next)
		*persisted = json_incref(c.next);
	json_decref(c.seen);
	json_decref(c.next);
	return st;
}

/* ---- put (import) ---- */

struct put_ctx {
	const struct store_rows *src;
	size_t n;
};

static int put_op(struct env *v, MDB_txn *t, void *ctx, int *changed, struct wctx *w)
{
	struct put_ctx *c = ctx;
	json_t *row;
	c->n = 0;
	if (c->src->rewind(c->src->ctx, w->e) != CORE_OK)
		return -1;
	for (;;) {
		int ch = 0, rc;
		if (c->src->next(c->src->ctx, &row, w->e) != CORE_OK)
			return -1;
		if (!row)
			return 0;
		if (store_check_row(row, w->e) != CORE_OK) {
			json_decref(row);
			return -1;
		}
		rc = write_row(v, t, row, 0, &ch, w);
		json_decref(row);
		if (rc)
			return rc;
		*changed |= ch;
		c->n++;
	}
}

enum core_status store_put_stream(struct store *s, const struct store_rows *src,
                                  size_t *count, struct core_err *e)
{
	struct put_ctx c = { src, 0 };
	enum core_status st;
	if (count)
		*count = 0;
	if ((st = check_handle(s, e)) != CORE_OK)
		return st;
	st = run_write(s, "import snapshots", put_op, &c, e);
	if (st == CORE_OK && count)
		*count = c.n;
	return st;
}

/* store_put_rows()'s source: an array. */
struct array_rows {
	json_t *const *rows;
	size_t n, i;
};

static enum core_status array_next(void *ctx, json_t **row, struct core_err *e)
{
	struct array_rows *a = ctx;
	*row = a->i < a->n ? json_incref(a->rows[a->i++]) : NULL;
	return CORE_OK;
}

static enum core_status array_rewind(void *ctx, struct core_err *e)
{
	((struct array_rows *)ctx)->i = 0;
	return CORE_OK;
}

enum core_status store_put_rows(struct store *s, json_t *const *rows, size_t n,
                                struct core_err *e)
{
	struct array_rows a = { rows, n, 0 };
	struct store_rows src = { array_next, array_rewind, &a };
	enum core_status st;
	size_t i;
	for (i = 0; i < n; i++)
		if ((st = store_check_row(rows[i], e)) != CORE_OK)
			return st;
	return store_put_stream(s, &src, NULL, e);
}

enum core_status store_put(struct store *s, const json_t *row, struct core_err *e)
{
	json_t *r = (json_t *)row;
	return store_put_rows(s, &r, 1, e);
}

/* ---- listings ---- */

/* Up to BATCH index keys of session sid after (exclusive) the key in
 * after[0..*alen) (empty: from the start), forward or backward. */
struct idbatch {
	size_t n;
	char ids[BATCH][STORE_ID_MAX + 1];
	unsigned char last[512];
	size_t lastlen;
};

static int index_batch(struct env *v, MDB_txn *t, const char *sid, int backward,
                       struct idbatch *b)
{
	unsigned char pre[512];
	size_t pn = bysess_prefix(pre, sid);
	MDB_cursor *c;
	MDB_val k, d;
	int rc;
	if ((rc = mdb_cursor_open(t, v->dbi[DB_BYSESS], &c)))
		return rc;
	if (b->lastlen) {
		k.mv_size = b->lastlen;
		k.mv_data = b->last;
		rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
		if (rc == 0 && k.mv_size == b->lastlen && !memcmp(k.mv_data, b->last, b->lastlen))
			rc = mdb_cursor_get(c, &k, &d, backward ? MDB_PREV : MDB_NEXT);
		else if (backward)
			rc = rc == 0 ? mdb_cursor_get(c, &k, &d, MDB_PREV)
			             : mdb_cursor_get(c, &k, &d, MDB_LAST);
	} else if (backward) {
		memset(pre + pn, 0xFF, 9);
		k.mv_size = pn + 9;
		k.mv_data = pre;
		rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
		rc = rc == 0 ? mdb_cursor_get(c, &k, &d, MDB_PREV)
		             : rc == MDB_NOTFOUND ? mdb_cursor_get(c, &k, &d, MDB_LAST) : rc;
	} else {
		k.mv_size = pn;
		k.mv_data = pre;
		rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
	}
	b->n = 0;
	while (rc == 0 && b->n < BATCH) {
		size_t idn;
		if (k.mv_size < pn + 8 || memcmp(k.mv_data, pre, pn))
			break;
		idn = k.mv_size - pn - 8;
		memcpy(b->ids[b->n], (char *)k.mv_data + pn + 8, idn);
		b->ids[b->n][idn] = 0;
		b->n++;
		memcpy(b->last, k.mv_data, k.mv_size);
		b->lastlen = k.mv_size;
		rc = mdb_cursor_get(c, &k, &d, backward ? MDB_PREV : MDB_NEXT);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

enum core_status store_session_rows(struct store *s, const char *session_id,
                                    unsigned flags,
                                    enum core_status (*fn)(const json_t *row, void *),
                                    void *ctx, struct core_err *e)
{
	struct idbatch *b;
	enum core_status st;
	size_t total = 0;
	if ((st = check_handle(s, e)) != CORE_OK ||
	    (st = store_check_id(session_id, "session ID", e)) != CORE_OK)
		return st;
	if (!(b = calloc(1, sizeof *b)))
		return core_fail(e, CORE_ENOMEM, "list rows: out of memory");
	do {
		json_t *rows[BATCH];
		MDB_txn *t;
		size_t i, got = 0;
		int rc = txn_begin(s->e, 0, &t, NULL);
		if (rc) {
			st = mdb_fail(e, rc, "list rows");
			break;
		}
		rc = index_batch(s->e, t, session_id, 0, b);
		for (i = 0; rc == 0 && i < b->n; i++) {
			st = read_row(s->e, t, b->ids[i], flags, &rows[got], NULL, e);
			if (st == CORE_OK)
				got++;
			else if (st != CORE_ENOTFOUND)
				break;
			st = CORE_OK;
		}
		txn_abort(s->e, t, 0, NULL);
		if (rc)
			st = mdb_fail(e, rc, "list rows");
		for (i = 0; i < got; i++) {
			if (st == CORE_OK)
				st = fn(rows[i], ctx);
			json_decref(rows[i]);
		}
		total += got;
	} while (st == CORE_OK && b->n == BATCH);
	free(b);
	if (st == CORE_OK && !total)
		return core_fail(e, CORE_ENOTFOUND, "no snapshot found for session '%s'",
		                 session_id);
	return st;
}

struct sessinfo {
	char sid[STORE_ID_MAX + 1];
	size_t rows;
	json_t *latest;
};

enum core_status store_sessions(struct store *s,
                                enum core_status (*fn)(const struct store_session_info *,
                                                       void *),
                                void *ctx, struct core_err *e)
{
	struct sessinfo *b;
	char after[STORE_ID_MAX + 1] = "";
	size_t n;
	enum core_status st;
	if ((st = check_handle(s, e)) != CORE_OK)
		return st;
	if (!(b = calloc(BATCH, sizeof *b)))
		return core_fail(e, CORE_ENOMEM, "list sessions: out of memory");
	do {
		MDB_txn *t;
		MDB_cursor *c;
		MDB_val k = { strlen(after), after }, d;
		size_t i;
		int rc = txn_begin(s->e, 0, &t, NULL);
		n = 0;
		if (rc) {
			st = mdb_fail(e, rc, "list sessions");
			break;
		}
		if (!(rc = mdb_cursor_open(t, s->e->dbi[DB_SESS], &c))) {
			rc = after[0] ? mdb_cursor_get(c, &k, &d, MDB_SET_RANGE)
			              : mdb_cursor_get(c, &k, &d, MDB_FIRST);
			if (rc == 0 && after[0] && k.mv_size == strlen(after) &&
			    !memcmp(k.mv_data, after, k.mv_size))
				rc = mdb_cursor_get(c, &k, &d, MDB_NEXT);
			while (rc == 0 && n < BATCH) {
				char id[512];
				size_t kl = k.mv_size > STORE_ID_MAX ? STORE_ID_MAX : k.mv_size;
				memcpy(b[n].sid, k.mv_data, kl);
				b[n].sid[kl] = 0;
				b[n].rows = d.mv_size == 8 ? get_be64(d.mv_data) : 0;
				b[n].latest = NULL;
				if (latest_id(s->e, t, b[n].sid, id) == 0)
					read_row(s->e, t, id, STORE_METADATA_ONLY, &b[n].latest, NULL, e);
				n++;
				rc = mdb_cursor_get(c, &k, &d, MDB_NEXT);
			}
			mdb_cursor_close(c);
		}
		txn_abort(s->e, t, 0, NULL);
		if (rc && rc != MDB_NOTFOUND)
			st = mdb_fail(e, rc, "list sessions");
		for (i = 0; i < n; i++) {
			struct store_session_info si = { b[i].sid, b[i].latest, b[i].rows };
			if (st == CORE_OK && b[i].latest)
				st = fn(&si, ctx);
			json_decref(b[i].latest);
		}
		if (n)
			memcpy(after, b[n - 1].sid, sizeof after);
	} while (st == CORE_OK && n == BATCH);
	free(b);
	return st;
}

/* ---- delete and prune ---- */

struct del_ctx {
	const char *sid;
	size_t keep;
	int64_t before_ns;
	int prune;
	size_t deleted;
	struct core_buf gone;   /* IDs deleted, NUL-terminated, when wanted */
	int want_ids;
};

/* Report the rows delete_op deleted, once its transaction committed. */
static void report_gone(const struct del_ctx *c, store_deleted_fn fn, void *ctx)
{
	size_t off;
	for (off = 0; fn && off < c->gone.len; off += strlen(c->gone.p + off) + 1)
		fn(c->gone.p + off, ctx);
}

static int delete_op(struct env *v, MDB_txn *t, void *ctx, int *changed, struct wctx *w)
{
	struct del_ctx *c = ctx;
	struct idbatch *b = calloc(1, sizeof *b);
	size_t seen = 0, i;
	int rc = 0;
	if (!b)
		return ENOMEM;
	c->deleted = 0;
	core_buf_reset(&c->gone);       /* a retry starts over */
	/* newest first; the batch cursor restarts after the last key, so
	 * deleting the rows already listed is safe */
	do {
		if ((rc = index_batch(v, t, c->sid, 1, b)))
			break;
		for (i = 0; i < b->n && !rc; i++, seen++) {
			if (c->prune) {
				json_t *row = NULL;
				const char *status, *created;
				int64_t ns = 0;
				enum core_status st = read_row(v, t, b->ids[i], STORE_METADATA_ONLY,
				                               &row, NULL, w->e);
				if (st != CORE_OK) {
					rc = st == CORE_ENOTFOUND ? 0 : -1;
					continue;
				}
				status = st_str(row, "status");
				created = st_str(row, "createdAt");
				if (!created || !st_time_ns(created, &ns))
					ns = 0;
				if (seen == 0 || !store_status_terminal(status) ||
				    (c->keep && seen < c->keep) ||
				    (c->before_ns && ns >= c->before_ns)) {
					json_decref(row);
					continue;
				}
				json_decref(row);
			}
			if (!(rc = delete_row(v, t, b->ids[i], w->e))) {
				c->deleted++;
				if (c->want_ids && core_buf_add(&c->gone, b->ids[i],
				                                strlen(b->ids[i]) + 1) != CORE_OK)
					rc = ENOMEM;
			}
		}
	} while (!rc && b->n == BATCH);
	free(b);
	if (c->deleted)
		*changed = 1;
	return rc;
}

enum core_status store_delete_session(struct store *s, const char *session_id,
                                      size_t *deleted, store_deleted_fn fn, void *ctx,
                                      struct core_err *e)
{
	struct del_ctx c = { session_id, 0, 0, 0, 0, CORE_BUF_INIT(CORE_BUF_UNLIMITED),
	                     fn != NULL };
	enum core_status st;
	if (deleted)
		*deleted = 0;
	if ((st = check_handle(s, e)) != CORE_OK ||
	    (st = store_check_id(session_id, "session ID", e)) != CORE_OK)
		return st;
	st = run_write(s, "delete session", delete_op, &c, e);
	if (st == CORE_OK && !c.deleted)
		st = core_fail(e, CORE_ENOTFOUND, "no snapshot found for session '%s'",
		               session_id);
	if (st == CORE_OK) {
		report_gone(&c, fn, ctx);
		if (deleted)
			*deleted = c.deleted;
	}
	core_buf_release(&c.gone);
	return st;
}

static enum core_status collect_session(const struct store_session_info *si, void *ctx)
{
	struct core_buf *b = ctx;
	return core_buf_add(b, si->session_id, strlen(si->session_id) + 1);
}

enum core_status store_prune(struct store *s, const char *session_id,
                             size_t keep, int64_t before_ns, size_t *deleted,
                             store_deleted_fn fn, void *ctx, struct core_err *e)
{
	struct core_buf ids = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st;
	size_t off, total = 0;
	if (deleted)
		*deleted = 0;
	if ((st = check_handle(s, e)) != CORE_OK)
		return st;
	if (session_id) {
		json_t *latest;
		if ((st = store_latest(s, session_id, STORE_METADATA_ONLY, &latest, e)) != CORE_OK)
			return st;
		json_decref(latest);
		st = core_buf_add(&ids, session_id, strlen(session_id) + 1);
	} else {
		st = store_sessions(s, collect_session, &ids, e);
	}
	/* one short write transaction per session */
	for (off = 0; st == CORE_OK && off < ids.len; off += strlen(ids.p + off) + 1) {
		struct del_ctx c = { ids.p + off, keep, before_ns, 1, 0,
		                     CORE_BUF_INIT(CORE_BUF_UNLIMITED), fn != NULL };
		if ((st = run_write(s, "prune", delete_op, &c, e)) == CORE_OK) {
			report_gone(&c, fn, ctx);
			total += c.deleted;
		}
		core_buf_release(&c.gone);
	}
	if (st == CORE_ENOMEM || st == CORE_ETOOBIG)
		core_fail(e, CORE_ENOMEM, "prune: out of memory");
	core_buf_release(&ids);
	if (deleted)
		*deleted = total;
	return st;
}
