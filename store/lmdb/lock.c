/*
 * lock.c - the LMDB backend's session writer locks (store_session_lock()
 * in store.h): a POSIX record lock on one byte of the store's file
 * sessions.lock, at an offset hashed from the session ID.  The kernel
 * drops it when its process ends, however it ends.  A waiter sleeps on
 * the store's wake-up futex, which an unlock moves on, and looks again at
 * least every LOCK_RECHECK_MS, for a holder that died (a kill -9 moves no
 * futex).  Record locks belong to the process: they serialize processes,
 * and, as write.lock's (txn.c), the file is opened once per environment,
 * since closing any descriptor of it would drop them all.
 */
#include "lm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../../libcore/base/util.h"

#define LOCK_RECHECK_MS 200

/* The byte of sessions.lock that stands for sid: FNV-1a, from 1 up. */
static off_t lock_byte(const char *sid)
{
	uint64_t h = 14695981039346656037ULL;
	for (; *sid; sid++)
		h = (h ^ (unsigned char)*sid) * 1099511628211ULL;
	return (off_t)(1 + (h >> 2));
}

/* sessions.lock, opened on the first lock. */
static int lock_fd(struct env *v, struct core_err *e)
{
	struct core_buf p = CORE_BUF_INIT(PATH_MAX);
	int fd;
	pthread_mutex_lock(&v->gate_mu);
	if ((fd = v->sess_fd) < 0 && core_buf_addf(&p, "%s/sessions.lock", v->path) == CORE_OK &&
	    (fd = v->sess_fd = open(p.p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		core_fail_sys(e, "lock the session: open '%s'", p.p);
	pthread_mutex_unlock(&v->gate_mu);
	core_buf_release(&p);
	return fd;
}

enum core_status lm_session_lock(struct store *s, const char *sid, int64_t timeout_ms,
                                 struct core_err *e)
{
	struct env *v = lm_store(s)->e;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = lock_byte(sid),
	                    .l_len = 1 };
	int64_t end = core_now_mono_ms() + timeout_ms;
	int fd;
	if (v->rdonly) {
		core_fail(e, CORE_ESYS, "lock the session: the store '%s' is read-only", v->path);
		if (e)
			e->sys = EROFS;
		return CORE_ESYS;
	}
	if ((fd = lock_fd(v, e)) < 0)
		return CORE_ESYS;
	for (;;) {
		/* the sequence before the try: an unlock after it wakes us */
		uint32_t seq = lm_change_seq(s);
		int64_t left;
		if (fcntl(fd, F_SETLK, &fl) == 0)
			return CORE_OK;
		if (errno != EACCES && errno != EAGAIN && errno != EINTR)
			return core_fail_sys(e, "lock the session");
		if ((left = end - core_now_mono_ms()) <= 0)
			return core_fail(e, CORE_ETIMEOUT, "session \"%s\" is busy", sid);
		lm_wait_change(s, seq, left < LOCK_RECHECK_MS ? left : LOCK_RECHECK_MS, NULL);
	}
}

void lm_session_unlock(struct store *s, const char *sid)
{
	struct env *v = lm_store(s)->e;
	struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = lock_byte(sid),
	                    .l_len = 1 };
	if (v->sess_fd < 0 || fcntl(v->sess_fd, F_SETLK, &fl) < 0)
		return;
	lm_wake_all(v);         /* the next writer of the session goes on */
}
