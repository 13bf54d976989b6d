/*
 * txn.c - transactions of the LMDB backend: the writer gate in front of
 * LMDB's writer mutex, MDB codes as core_status, and stored values as
 * JSON.  See lm.h.
 */
#include "lm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "../../libcore/base/json.h"
#include "../../libcore/base/util.h"

/* An MDB or errno code as a failure; e->sys keeps an errno (ENOSPC for a
 * full disk, so callers can name the real cause). */
enum core_status lm_fail(struct core_err *e, int rc, const char *what)
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

/* A stored value as JSON: every record's body (meta, state, message) is
 * decoded here, so a corrupt one fails the same way wherever it is read. */
json_t *lm_parse_val(const void *p, size_t n, struct core_err *e)
{
	json_t *v = jv_parse(p, n, "store", 0, e);
	if (!v && e)
		core_err_prefix(e, "corrupt store value");
	return v;
}

/* ---- transactions ---- */

/* Adopt a map size grown by another process (MDB_MAP_RESIZED). */
void lm_adopt_mapsize(struct env *v)
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
#define GATE_TIMEOUT (-30000)   /* lm_txn_begin(): the wait ran out (no MDB code) */

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
enum core_status lm_begin_fail(struct env *v, struct core_err *e, int rc,
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
		return lm_fail(e, rc, what);
	if (fcntl(v->gate_fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK && fl.l_pid > 0)
		snprintf(holder, sizeof holder, " (held by pid %ld)", (long)fl.l_pid);
	char d[CORE_DURATION_MAX];
	core_fail(e, CORE_ESYS, "%s: timed out waiting for the store's write lock after %s%s",
	          what, core_duration_text(v->lock_ms, d), holder);
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
int lm_txn_begin(struct env *v, int write, MDB_txn **t, sigset_t *old)
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
			lm_adopt_mapsize(v);
		else if (rc == MDB_READERS_FULL)
			mdb_reader_check(v->env, NULL);
		else
			return rc;
	}
}

void lm_txn_abort(struct env *v, MDB_txn *t, int write, sigset_t *old)
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
int lm_txn_commit(struct env *v, MDB_txn *t, sigset_t *old)
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
