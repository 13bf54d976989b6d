/*
 * wake.c - wake-ups of the LMDB backend: a futex word in the MAP_SHARED
 * file "wake" beside data.mdb.  See store_wait_change() in store.h.
 */
#include "lm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../../libcore/base/util.h"

/* ---- wake-ups: a futex word in a MAP_SHARED sidecar file ---- */

static long futex(uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

void lm_wake_all(struct env *v)
{
	__atomic_add_fetch(v->wake, 1, __ATOMIC_SEQ_CST);
	futex(v->wake, FUTEX_WAKE, INT_MAX, NULL);
}

uint32_t lm_change_seq(struct store *s)
{
	return __atomic_load_n(lm_store(s)->e->wake, __ATOMIC_SEQ_CST);
}

enum core_status lm_wait_change(struct store *s, uint32_t seq, int64_t timeout_ms,
                                struct core_err *e)
{
	uint32_t *wake = lm_store(s)->e->wake;
	int64_t end = core_now_mono_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
	for (;;) {
		int64_t left = end - core_now_mono_ms();
		struct timespec ts;
		if (__atomic_load_n(wake, __ATOMIC_SEQ_CST) != seq)
			return CORE_OK;
		if (left <= 0)
			return CORE_ETIMEOUT;
		ts.tv_sec = left / 1000;
		ts.tv_nsec = (left % 1000) * 1000000;
		if (futex(wake, FUTEX_WAIT, seq, &ts) < 0 && errno != EAGAIN &&
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

enum core_status lm_open_wake(struct env *v, const char *dir, struct core_err *e)
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
