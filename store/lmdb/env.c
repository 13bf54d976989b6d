/*
 * env.c - the LMDB backend's environment: one per store per process, the
 * trust and filesystem checks made before LMDB opens anything, opening and
 * closing, and growing the map.  See store_open_flags() in store.h.
 */
#include "lm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "../../libcore/base/util.h"

static const char *const db_names[DB_N] = {
	"meta", "state", "msg", "node", "bysess", "sess", "wlog", "queue", "recent",
	"recentof",
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct env *reg;

/* Double the map (no transaction of this process may be active). */
enum core_status lm_grow_map(struct env *v, struct core_err *e)
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
		return lm_fail(e, rc, "grow the store map");
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
	/* the common case, a store that exists: one stat(), no mkdir() per
	 * component of the path */
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return CORE_OK;
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

/*
 * Refuse a store others could tamper with: the directory passes
 * store_trust_dir() (the user's or root's, writable by nobody else), and
 * the files LMDB and the store open must be regular files of the user (or
 * root), not symlinks.  LMDB opens data.mdb and lock.mdb itself and
 * follows symlinks; checking them with lstat() is enough once the
 * directory is known to be writable by the user alone, since nobody else
 * can then plant a link between the check and the open.  Costs a stat()
 * and five lstat()s per open; *top receives the directory's stat().
 * Refusals are CORE_ESYS with errno EACCES.
 */
static enum core_status trust_store(const char *path, struct stat *top, struct core_err *e)
{
	static const char *const files[] = { "data.mdb", "lock.mdb", "wake", "write.lock",
	                                     "logs" };
	struct core_buf p = CORE_BUF_INIT(PATH_MAX);
	struct stat st;
	enum core_status rc;
	size_t i;
	if ((rc = store_trust_dir(path, "store directory", 0, top, e)) != CORE_OK)
		return rc;
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
		else if (!st_owner_ok(&st))
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
	int rc, i, write, built;
	for (write = 0; write < 2; write++) {
		if (write && v->rdonly)
			break;
		rc = lm_txn_begin(v, write, &t, &old);
		if (rc)
			return lm_begin_fail(v, e, rc, "open the store");
		v->has_wlog = v->has_queue = v->has_recent = 1;
		built = 0;
		for (i = 0; i < DB_N && rc == 0; i++) {
			rc = mdb_dbi_open(t, db_names[i], 0, &v->dbi[i]);
			/* a store older than the session listing's index: a
			 * read-write open builds it, once, in this transaction
			 * (under the write lock), a read-only one sorts */
			if (rc == MDB_NOTFOUND && i >= DB_RECENT && write)
				built = 1;
			if (rc == MDB_NOTFOUND && write)
				rc = mdb_dbi_open(t, db_names[i], MDB_CREATE, &v->dbi[i]);
			if (rc == MDB_NOTFOUND && i >= DB_RECENT && v->rdonly)
				rc = 0, v->has_recent = 0;
			/* a store older than the worker logs or the queue: a
			 * read-only open goes on without them, a read-write
			 * one adds them */
			if (rc == MDB_NOTFOUND && i == DB_WLOG && v->rdonly)
				rc = 0, v->has_wlog = 0;
			if (rc == MDB_NOTFOUND && i == DB_QUEUE && v->rdonly)
				rc = 0, v->has_queue = 0;
		}
		/* a store whose index an agentkit before the listing
		 * entries made: a read-write open builds it again, once */
		if (rc == 0 && !write && !v->rdonly && v->has_recent && !lm_recent_current(v, t))
			rc = MDB_NOTFOUND;
		if (rc == MDB_NOTFOUND && !write) {
			lm_txn_abort(v, t, 0, &old);
			continue;
		}
		if (rc == 0 && write && (built || !lm_recent_current(v, t)))
			rc = lm_recent_build(v, t);
		if (rc) {
			lm_txn_abort(v, t, write, &old);
			return lm_fail(e, rc, "open the store's tables");
		}
		/* commit (even read-only) so the DBI handles stay valid */
		if (write) {
			rc = lm_txn_commit(v, t, &old);
		} else {
			rc = mdb_txn_commit(t);
			pthread_rwlock_unlock(&v->grow);
		}
		if (rc)
			return lm_fail(e, rc, "open the store's tables");
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
	if (v->sess_fd >= 0)
		close(v->sess_fd);
	pthread_mutex_destroy(&v->gate_mu);
	pthread_rwlock_destroy(&v->grow);
	free(v->path);
	free(v);
}

/* A new environment of the store directory st, not open yet: its
 * settings (lock timeout, map sizes) read from the environment. */
static enum core_status env_new(const char *path, const struct stat *st,
                                struct env **out, struct core_err *e)
{
	struct env *v = calloc(1, sizeof *v);
	if (!v || !(v->path = strdup(path))) {
		free(v);
		return core_fail(e, CORE_ENOMEM, "open the store: out of memory");
	}
	v->gate_fd = v->sess_fd = -1;
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
	v->mapsize = env_size("AGENTKIT_STORE_MAPSIZE", MAPSIZE_DEFAULT);
	v->mapmax = env_size("AGENTKIT_STORE_MAPSIZE_MAX", MAPSIZE_MAX_DEFAULT);
	if (v->mapmax < v->mapsize)
		v->mapmax = v->mapsize;
	*out = v;
	return CORE_OK;
}

/*
 * mdb_env_open() v->env in *mode, falling back to read-only modes when
 * flags allow.  "Opening a database can fail if another process is
 * opening or closing it at exactly the same time": retry with jitter.
 * Returns 0 or the last MDB code.
 */
static int mdb_open_retry(struct env *v, const char *path, unsigned flags,
                          unsigned *mode)
{
	size_t mapsize = v->mapsize;
	int rc = 0, tries;
	for (tries = 0; tries < 6; tries++) {
		if ((rc = mdb_env_create(&v->env)) != 0)
			break;
		mdb_env_set_maxdbs(v->env, DB_N);
		mdb_env_set_maxreaders(v->env, MAX_READERS);
		while ((rc = mdb_env_set_mapsize(v->env, mapsize)) == ENOMEM &&
		       mapsize > ((size_t)1 << 30))
			mapsize /= 2;
		if (rc == 0)
			rc = mdb_env_open(v->env, path, *mode, 0600);
		if (rc == 0)
			break;
		mdb_env_close(v->env);
		v->env = NULL;
		if ((rc == EACCES || rc == EROFS) && (flags & STORE_OPEN_READONLY) &&
		    !(*mode & MDB_NOLOCK)) {
			*mode |= *mode & MDB_RDONLY ? MDB_NOLOCK : MDB_RDONLY;
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
	return rc;
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
	struct env *v = NULL;
	unsigned mode = MDB_NOTLS;
	int rc, fd;
	enum core_status cs = env_new(path, st, &v, e);
	if (cs != CORE_OK)
		return cs;
	if ((rc = mdb_open_retry(v, path, flags, &mode))) {
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
	if (open_dbis(v, e) != CORE_OK || lm_open_wake(v, path, e) != CORE_OK) {
		core_err_prefix(e, "store '%s'", path);
		env_free(v);
		return e ? e->st : CORE_ESYS;
	}
	*out = v;
	return CORE_OK;
}

/* LMDB 0.9.26-0.9.31 broke concurrent open and close (ITS#9278). */
static enum core_status check_version(struct core_err *e)
{
	int maj, min, patch;
	mdb_version(&maj, &min, &patch);
	if (maj == 0 && min == 9 && patch >= 26 && patch <= 31)
		return core_fail(e, CORE_EPRECONDITION,
		                 "LMDB %d.%d.%d breaks when many processes open a store "
		                 "(ITS#9278); use 0.9.25 or older, or 0.9.32 or newer",
		                 maj, min, patch);
	return CORE_OK;
}

/* This process's environment of the store directory st, opened if it has
 * none yet; environments inherited across fork are abandoned. */
static enum core_status env_get(const char *path, const struct stat *st, unsigned flags,
                                struct env **out, struct core_err *e)
{
	struct env *v, **pp;
	pid_t pid = getpid();
	enum core_status rc = CORE_OK;
	pthread_mutex_lock(&reg_lock);
	for (pp = &reg; (v = *pp); pp = &v->next) {
		if (v->pid != pid) {            /* inherited across fork: abandon */
			*pp = v->next;
			if (!*pp)
				break;
			v = *pp;
		}
		if (v->dev == st->st_dev && v->ino == st->st_ino && v->pid == pid)
			break;
	}
	if (v) {
		v->refs++;
	} else if ((rc = env_open(path, st, flags, &v, e)) == CORE_OK) {
		v->next = reg;
		reg = v;
	}
	pthread_mutex_unlock(&reg_lock);
	*out = v;
	return rc;
}

enum core_status lm_open(const char *path, unsigned flags, struct store **out,
                         struct core_err *e)
{
	struct lmdb_store *s;
	struct stat st = { 0 };
	const char *x;
	enum core_status rc;

	if ((rc = check_version(e)) != CORE_OK)
		return rc;
	if ((rc = (flags & STORE_OPEN_EXISTING) ? find_store(path, e) : make_dirs(path, e))
	    != CORE_OK || (rc = trust_store(path, &st, e)) != CORE_OK ||
	    (rc = refuse_remote(path, e)) != CORE_OK)
		return rc;
	guard_std_fds();
	s = calloc(1, sizeof *s);
	if (!s)
		return core_fail(e, CORE_ENOMEM, "open the store: out of memory");
	s->verify = (x = getenv("AGENTKIT_STORE_VERIFY")) && *x && strcmp(x, "0");
	if ((rc = env_get(path, &st, flags, &s->e, e)) != CORE_OK) {
		free(s);
		return rc;
	}
	*out = &s->head;
	return CORE_OK;
}

void lm_close(struct store *h)
{
	struct lmdb_store *s = lm_store(h);
	struct env **pp;
	if (h->pid == getpid()) {
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
