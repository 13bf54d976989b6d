/*
 * detach.c - detached runs: the queue, pending row, daemon worker,
 * heartbeat-and-abort watcher, finalize, and the run that strings them
 * together (runtime-semantics §1.6, §2.1-2.3).  See detach.h.
 */
#include "detach.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../store/store.h"
#include "agent_ext.h"
#include "agent_trace.h"
#include "../base/json.h"
#include "runtime.h"
#include "../base/trace.h"
#include "session.h"
#include "../base/util.h"

static const char *status_of(const json_t *row)
{
	const char *s = json_string_value(json_object_get(row, "status"));
	return s ? s : "";
}

/* Now by the store's clock (store_now_ns()), as rows' times are written. */
static void now_str(const struct store *s, char *buf)
{
	core_time_format(store_now_ns(s), buf);
}

/* ---- the lease ---- */

/* The lease's members of a row's STORE_INFO_KEY: "heartbeatTimeout" (ms),
 * "epoch", "worker": {"host", "pid"}. */
static const json_t *info_of(const json_t *row)
{
	return json_object_get(row, STORE_INFO_KEY);
}

static json_int_t lease_epoch(const json_t *row)
{
	const json_t *v = json_object_get(info_of(row), "epoch");
	return json_is_integer(v) ? json_integer_value(v) : 1;
}

/*
 * The fence: whether the holder of epoch may still write the pending or
 * aborting row existing.  Refused (CORE_EXPIRED, saying why) when another
 * epoch holds it, or when it has expired by the store's clock now_ns: its
 * last heartbeat is older than the heartbeat timeout the row carries, so a
 * reader may have seen it expired, and only a resume goes on from it.
 */
static enum core_status lease_check(const json_t *existing, json_int_t epoch, int64_t now_ns,
                                    struct core_err *e)
{
	const json_t *w = json_object_get(info_of(existing), "worker");
	const char *hb = json_string_value(json_object_get(existing, "heartbeatAt"));
	int64_t hb_ns, timeout_ms = store_row_hb_timeout(existing, 0);
	if (lease_epoch(existing) != epoch)
		return core_fail(e, CORE_EXPIRED, "the lease is held by epoch %lld (host %s, pid %lld)",
		                 (long long)lease_epoch(existing),
		                 json_string_value(json_object_get(w, "host")) ?
		                 json_string_value(json_object_get(w, "host")) : "?",
		                 (long long)json_integer_value(json_object_get(w, "pid")));
	if (timeout_ms > 0 && hb && core_time_parse(hb, &hb_ns) == CORE_OK &&
	    now_ns - hb_ns > timeout_ms * 1000000)
		return core_fail(e, CORE_EXPIRED, "the lease expired: the last heartbeat (%s) is "
		                 "%lldms old, past the row's heartbeat timeout of %lldms", hb,
		                 (long long)((now_ns - hb_ns) / 1000000), (long long)timeout_ms);
	return CORE_OK;
}

/* ---- the pending row ---- */

static enum core_status fn_put(const json_t *existing, json_t **next, void *ctx,
                               struct core_err *e)
{
	*next = json_incref(ctx);
	return CORE_OK;
}

enum core_status detach_pending(struct store *s, const char *session_id,
                                const char *parent_id, int64_t created_ns,
                                int64_t hb_timeout_ms, json_t **row, struct core_err *e)
{
	char id[37], now[CORE_TIME_MAX], created[CORE_TIME_MAX];
	core_uuid(id);
	now_str(s, now);
	core_time_format(created_ns, created);
	json_t *info = json_pack("{s:I, s:i, s:o}", "heartbeatTimeout",
	                         (json_int_t)(hb_timeout_ms > 0 ? hb_timeout_ms : DETACH_LEASE_MS),
	                         "epoch", 1, "worker", jv_host_pid());
	struct session_row sr = {
		.created_at = created, .heartbeat_at = now, .updated_at = now, .parent_id = parent_id,
		.session_id = session_id, .snapshot_id = id, .status = "pending", .info = info,
	};
	json_t *r = session_row(&sr);
	json_decref(info);
	if (!r)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	enum core_status st = store_save(s, id, 0, fn_put, r, row, e);
	json_decref(r);
	return st;
}

/* mkdir -p dir, each new directory 0700. */
static enum core_status make_dirs(char *dir, struct core_err *e)
{
	for (char *p = dir + 1; ; p++) {
		if (*p && *p != '/')
			continue;
		char c = *p;
		*p = '\0';
		int rc = mkdir(dir, 0700);
		*p = c;
		if (rc < 0 && errno != EEXIST)
			return core_fail_sys(e, "cannot create '%s'", dir);
		if (!c)
			return CORE_OK;
	}
}

enum core_status detach_log_path(const char *store, const char *id,
                                 struct core_buf *out, struct core_err *e)
{
	size_t base = out->len;
	struct stat sb;
	enum core_status st;
	if ((st = store_logs_dir(store, out, e)) != CORE_OK)
		return st;
	/* beside a store the directory exists; this host's state directory
	 * may not */
	if (store_location_is_dir(store)) {
		if (mkdir(out->p + base, 0700) < 0 && errno != EEXIST)
			return core_fail_sys(e, "cannot create '%s'", out->p + base);
	} else if ((st = make_dirs(out->p + base, e)) != CORE_OK) {
		return st;
	}
	/* others must not plant or swap a worker's log: the LMDB store's own
	 * directory check (a server store's logs have no store around them) */
	if ((st = store_trust_dir(out->p + base, "worker log directory", STORE_DIR_NOFOLLOW,
	                          &sb, e)) != CORE_OK)
		return st;
	if (!S_ISDIR(sb.st_mode)) {
		errno = ENOTDIR;
		return core_fail_sys(e, "cannot keep worker logs in '%s'", out->p + base);
	}
	if (core_buf_addf(out, "/%s.log", id))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	return CORE_OK;
}

enum core_status detach_log_name(const char *store, const char *id,
                                 struct core_buf *out, struct core_err *e)
{
	enum core_status st;
	if (strchr(id, '/'))
		return core_fail(e, CORE_ENOTFOUND, "snapshot '%s' cannot have a worker log", id);
	if ((st = store_logs_dir(store, out, e)) != CORE_OK)
		return st;
	if (core_buf_addf(out, "/%s.log", id))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	return CORE_OK;
}

void detach_log_remove(const char *id, void *store_dir)
{
	struct core_buf path = CORE_BUF_INIT(4096);
	if (detach_log_name(store_dir, id, &path, NULL) == CORE_OK)
		unlink(path.p);
	core_buf_release(&path);
}

/* ---- the daemon ---- */

/* Report on the readiness pipe: "k", or "e" + status byte + message. */
static void report(int fd, const struct core_err *err)
{
	char buf[sizeof err->msg + 2];
	size_t n;
	if (!err || err->st == CORE_OK) {
		buf[0] = 'k';
		n = 1;
	} else {
		buf[0] = 'e';
		buf[1] = (char)err->st;
		n = strlen(err->msg);
		memcpy(buf + 2, err->msg, n);
		n += 2;
	}
	for (size_t off = 0; off < n;) {
		ssize_t w = write(fd, buf + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
}

void detach_close_others(int keep)
{
	if (keep > 3)
		close_range(3, (unsigned)keep - 1, 0);
	if (close_range(keep < 3 ? 3U : (unsigned)keep + 1, ~0U, 0) == 0)
		return;
	long max = sysconf(_SC_OPEN_MAX);
	if (max < 0 || max > 65536)
		max = 65536;
	for (int fd = 3; fd < max; fd++)
		if (fd != keep)
			close(fd);
}

/* The worker's stdio: /dev/null in and out, the log file for stderr, or
 * /dev/null when there is none (log_path empty) or it cannot be opened:
 * its lines are in the store either way. */
static enum core_status worker_stdio(const char *log_path, struct core_err *e)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return core_fail_sys(e, "cannot open /dev/null");
	int log = log_path && *log_path ? open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC |
	                           O_NOFOLLOW, 0600) : -1;
	if (log >= 0) {
		fchmod(log, 0600);      /* (never /dev/null's) */
	} else if ((log = dup(null)) < 0) {
		core_fail_sys(e, "cannot redirect the worker's stdio");
		close(null);
		return e->st;
	}
	if (dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(log, 2) < 0) {
		core_fail_sys(e, "cannot redirect the worker's stdio");
		close(null);
		close(log);
		return e->st;
	}
	close(null);
	close(log);
	return CORE_OK;
}

enum core_status detach_fork(const char *log_path, struct detach_proc *p,
                             struct core_err *e)
{
	int pfd[2];
	memset(p, 0, sizeof *p);
	p->fd = -1;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return core_fail_sys(e, "cannot start the worker: pipe");
	pid_t pid = fork();
	if (pid < 0) {
		core_fail_sys(e, "cannot start the worker: fork");
		close(pfd[0]);
		close(pfd[1]);
		return e->st;
	}
	if (pid == 0) {
		/* The intermediate child: a new session, then the worker. */
		struct core_err ce = { 0 };
		close(pfd[0]);
		if (setsid() < 0) {
			core_fail_sys(&ce, "cannot start the worker: setsid");
			report(pfd[1], &ce);
			_exit(1);
		}
		pid_t g = fork();
		if (g < 0) {
			core_fail_sys(&ce, "cannot start the worker: fork");
			report(pfd[1], &ce);
			_exit(1);
		}
		if (g > 0)
			_exit(0);
		/* The worker: never a session leader, so it can never acquire a
		 * controlling terminal. */
		signal(SIGHUP, SIG_IGN);
		if (worker_stdio(log_path, &ce)) {
			report(pfd[1], &ce);
			_exit(1);
		}
		detach_close_others(pfd[1]);
		p->worker = 1;
		p->fd = pfd[1];
		p->pid = getpid();
		return CORE_OK;
	}
	close(pfd[1]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	p->worker = 0;
	p->fd = pfd[0];
	return CORE_OK;
}

void detach_ready(struct detach_proc *p, const struct core_err *err)
{
	if (p->fd < 0)
		return;
	if (err && err->st == CORE_OK)
		err = NULL;
	report(p->fd, err);
	close(p->fd);
	p->fd = -1;
}

enum core_status detach_wait_ready(struct detach_proc *p, struct core_err *e)
{
	char buf[sizeof e->msg + 2];
	size_t n = 0;
	while (n < sizeof buf - 1) {
		ssize_t r = read(p->fd, buf + n, sizeof buf - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(p->fd);
	p->fd = -1;
	if (n >= 1 && buf[0] == 'k')
		return CORE_OK;
	if (n >= 2 && buf[0] == 'e') {
		buf[n] = 0;
		enum core_status st = (enum core_status)(unsigned char)buf[1];
		if (st <= CORE_OK || st >= CORE_STATUS_MAX)
			st = CORE_ESYS;
		return core_fail(e, st, "%s", buf + 2);
	}
	return core_fail(e, CORE_ESYS, "the worker exited before it started");
}

/* ---- the watcher ---- */

struct detach_watch {
	struct store *s;
	char *id;
	int64_t interval_ms, wind_down_ms, lease_ms;
	_Atomic int64_t lease_until;    /* core_now_mono_ms() the lease ends */
	json_int_t epoch;               /* the lease's, from the pending row */
	int claimed;                    /* the first beat named this process */
	pthread_t thread;
	atomic_int aborted, stop, lost;
	long beats, failed;
	struct core_err last;
};

/* Genkit's beatHeartbeat: heartbeatAt only, on pending and aborting rows;
 * a renewal of the lease, refused once it is lost (lease_check()).  The
 * first beat also names the worker, this process. */
static enum core_status fn_beat(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e)
{
	struct detach_watch *w = ctx;
	char now[CORE_TIME_MAX];
	int64_t now_ns = store_now_ns(w->s);
	enum core_status st;
	*next = NULL;
	if (!existing || store_status_terminal(status_of(existing)))
		return CORE_OK;
	if ((st = lease_check(existing, w->epoch, now_ns, e)))
		return st;
	if (!(*next = json_deep_copy(existing)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	core_time_format(now_ns, now);
	json_object_set_new(*next, "heartbeatAt", json_string(now));
	json_t *info = json_object_get(*next, STORE_INFO_KEY);
	if (!w->claimed && json_is_object(info)) {
		json_t *info2 = json_deep_copy(info);
		if (!info2 || json_object_set_new(info2, "worker", jv_host_pid()) ||
		    json_object_set_new(*next, STORE_INFO_KEY, info2))
			return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	return CORE_OK;
}

/* One beat: the lease renewed from its start, or lost for good on a
 * refusal (another epoch holds the row, or it expired). */
static void beat(struct detach_watch *w, int64_t now)
{
	struct core_err be = { 0 };
	enum core_status st = store_save(w->s, w->id, STORE_METADATA_ONLY, fn_beat, w, NULL, &be);
	if (st == CORE_EXPIRED) {
		w->failed++;
		w->last = be;
		atomic_store(&w->lost, 1);
	} else if (st) {
		w->failed++;
		w->last = be;
	} else {
		w->beats++;
		w->claimed = 1;
		atomic_store(&w->lease_until, now + w->lease_ms);
	}
}

static void *watch_main(void *arg)
{
	struct detach_watch *w = arg;
	int64_t next_beat = core_now_mono_ms() + w->interval_ms, abort_at = -1;
	for (;;) {
		/* Level-triggered: take the sequence, then read the row. */
		uint32_t seq = store_change_seq(w->s);
		struct core_err e = { 0 };
		json_t *row = NULL;
		int terminal = 0;
		/* no read or beat outlasts the lease, even on a silent network */
		store_set_deadline(w->s, atomic_load(&w->lease_until));
		if (store_get(w->s, w->id, STORE_METADATA_ONLY, &row, &e) == CORE_OK) {
			const char *status = status_of(row);
			if ((!strcmp(status, "aborting") || !strcmp(status, "aborted"))
			    && !atomic_load(&w->aborted)) {
				abort_at = core_now_mono_ms();
				atomic_store(&w->aborted, 1);
			}
			terminal = store_status_terminal(status);
		}
		json_decref(row);
		if (terminal || atomic_load(&w->stop))
			break;
		int64_t now = core_now_mono_ms();
		/* a lease that ran out is never renewed (a reader that saw the
		 * row expired must not see it pending again): the thread ends */
		if (now >= atomic_load(&w->lease_until)) {
			atomic_store(&w->lost, 1);
			break;
		}
		if (now >= next_beat || !w->claimed) {
			if (abort_at < 0 || now - abort_at <= w->wind_down_ms)
				beat(w, now);
			if (atomic_load(&w->lost))
				break;
			while (next_beat <= now)
				next_beat += w->interval_ms;
		}
		int64_t wait = (next_beat < atomic_load(&w->lease_until) ? next_beat
		                : atomic_load(&w->lease_until)) - core_now_mono_ms();
		enum core_status st = store_wait_change(w->s, seq, wait < 0 ? 0 : wait, &e);
		if (st != CORE_OK && st != CORE_ETIMEOUT) {
			/* The wake-up failed: fall back to sleeping, never spin. */
			struct timespec ts = { 0, 100 * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

enum core_status detach_watch_start(const char *store_path, const json_t *pending,
                                    int64_t interval_ms, int64_t wind_down_ms,
                                    int64_t lease_ms, struct detach_watch **out,
                                    struct core_err *e)
{
	struct detach_watch *w = calloc(1, sizeof *w);
	const char *id = json_string_value(json_object_get(pending, "snapshotId"));
	enum core_status st;
	if (!id)
		id = "";
	if (!w || !(w->id = strdup(id))) {
		free(w);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	w->interval_ms = interval_ms > 0 ? interval_ms : DETACH_HEARTBEAT_INTERVAL_MS;
	w->wind_down_ms = wind_down_ms > 0 ? wind_down_ms : DETACH_WIND_DOWN_MS;
	w->lease_ms = lease_ms > 0 ? lease_ms : DETACH_LEASE_MS;
	w->epoch = lease_epoch(pending);
	/* the pending row was written with its first beat just now */
	atomic_init(&w->lease_until, core_now_mono_ms() + w->lease_ms);
	atomic_init(&w->aborted, 0);
	atomic_init(&w->stop, 0);
	atomic_init(&w->lost, 0);
	if ((st = store_open(store_path, &w->s, e)))
		goto fail;
	int rc = pthread_create(&w->thread, NULL, watch_main, w);
	if (rc) {
		errno = rc;
		st = core_fail_sys(e, "cannot start the heartbeat thread");
		goto fail;
	}
	*out = w;
	return CORE_OK;
fail:
	store_close(w->s);
	free(w->id);
	free(w);
	return st;
}

int detach_watch_aborted(const struct detach_watch *w)
{
	return w && atomic_load(&((struct detach_watch *)w)->aborted);
}

int detach_watch_lease_lost(const struct detach_watch *w)
{
	struct detach_watch *m = (struct detach_watch *)w;
	return m && (atomic_load(&m->lost) || core_now_mono_ms() >= atomic_load(&m->lease_until));
}

void detach_watch_quiesce(struct detach_watch *w)
{
	if (w)
		atomic_store(&w->stop, 1);
}

void detach_watch_end(struct detach_watch *w, long *beats, long *failed,
                      struct core_err *last_err)
{
	if (!w)
		return;
	atomic_store(&w->stop, 1);
	pthread_join(w->thread, NULL);
	if (beats)
		*beats = w->beats;
	if (failed)
		*failed = w->failed;
	if (last_err)
		*last_err = w->last;
	store_close(w->s);
	free(w->id);
	free(w);
}

/* ---- finalize ---- */

struct fin_ctx {
	const struct store *s;          /* whose clock judges the lease */
	const json_t *pending;
	const struct detach_result *r;
};

/* The finalized row's STORE_INFO_KEY: the run's (r->info), naming the
 * worker that held the lease.  A new reference, or NULL (out of memory). */
static json_t *final_info(const json_t *existing, const json_t *info)
{
	json_t *out = info ? json_deep_copy(info) : json_object();
	const json_t *w = json_object_get(info_of(existing), "worker");
	if (out && w && json_object_set_new(out, "worker", json_deep_copy(w))) {
		json_decref(out);
		return NULL;
	}
	return out;
}

/* A row with its members in SessionSnapshot's order (Go's field order),
 * anything unknown after them.  Consumes row. */
static json_t *row_ordered(json_t *row)
{
	static const char *const keys[] = {
		"createdAt", "error", "finishReason", "heartbeatAt", "parentId",
		"sessionId", "snapshotId", "state", "status", "updatedAt",
	};
	json_t *o = json_object(), *v;
	const char *k;
	if (!o) {
		json_decref(row);
		return NULL;
	}
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
		if ((v = json_object_get(row, keys[i])))
			json_object_set(o, keys[i], v);
	json_object_foreach(row, k, v)
		if (!json_object_get(o, k))
			json_object_set(o, k, v);
	json_decref(row);
	return o;
}

static void set_copy(json_t *dst, const char *key, const json_t *v)
{
	if (v)
		json_object_set_new(dst, key, json_deep_copy(v));
}

static const char *pending_str(const json_t *pending, const char *key)
{
	return json_string_value(json_object_get(pending, key));
}

static enum core_status fn_finalize(const json_t *existing, json_t **next, void *ctx,
                                    struct core_err *e)
{
	struct fin_ctx *f = ctx;
	const struct detach_result *r = f->r;
	char now[CORE_TIME_MAX];
	int64_t now_ns = store_now_ns(f->s);
	json_t *n, *info;
	enum core_status st;
	core_time_format(now_ns, now);
	*next = NULL;
	if (existing && !store_status_terminal(status_of(existing)) &&
	    (st = lease_check(existing, lease_epoch(f->pending), now_ns, e)))
		return st;
	if (!(info = final_info(existing, r->info)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	if (existing && !strcmp(status_of(existing), "aborting")) {
		if (!(n = json_deep_copy(existing))) {
			json_decref(info);
			return core_fail(e, CORE_ENOMEM, "out of memory");
		}
		json_object_set_new(n, "finishReason", json_string("aborted"));
		json_object_del(n, "heartbeatAt");
		set_copy(n, "state", r->state);
		json_object_set_new(n, STORE_INFO_KEY, info);
		json_object_set_new(n, "status", json_string("aborted"));
		json_object_set_new(n, "updatedAt", json_string(now));
		if (!(*next = row_ordered(n)))
			return core_fail(e, CORE_ENOMEM, "out of memory");
		return CORE_OK;
	}
	if (existing && store_status_terminal(status_of(existing))) {
		json_decref(info);
		return CORE_OK;
	}

	const json_t *err = json_object_get(r->output, "error");
	const char *reason = json_string_value(json_object_get(r->output, "finishReason"));
	enum core_status est = CORE_OK;
	if (r->aborted_by_user)
		reason = "aborted";
	else if (err || (reason && !strcmp(reason, "failed")))
		est = core_status_from_name(json_string_value(json_object_get(err, "status")));
	/* a failure's reason is failed (or aborted), as attached */
	if (est && strcmp(reason ? reason : "", "aborted"))
		reason = "failed";
	const char *status = core_outcome_row(est, reason);
	struct session_row sr = {
		.created_at = pending_str(f->pending, "createdAt"), .updated_at = now,
		.error = err, .finish_reason = reason,
		.parent_id = pending_str(f->pending, "parentId"),
		.session_id = pending_str(f->pending, "sessionId"),
		.snapshot_id = pending_str(f->pending, "snapshotId"),
		.state = r->state, .status = status, .info = info,
	};
	*next = session_row(&sr);
	json_decref(info);
	return *next ? CORE_OK : core_fail(e, CORE_ENOMEM, "out of memory");
}

/*
 * The row the work could not commit, as a failed row: the error says why,
 * the state is what committed before the detach (the parent's; none
 * without a parent).  Small - its history is the parent's, which the store
 * shares - so it usually fits where the work's row did not (a full disk).
 */
static enum core_status finalize_lost(struct store *s, const json_t *pending,
                                      const struct core_err *why, json_t **persisted,
                                      struct core_err *e)
{
	const char *parent = json_string_value(json_object_get(pending, "parentId"));
	json_t *prow = NULL, *empty = NULL, *output;
	const json_t *state;
	enum core_status st;
	if (parent && (st = store_get(s, parent, 0, &prow, e)))
		return st;
	if (!(state = json_object_get(prow, "state")))
		state = empty = json_object();
	output = json_pack("{s:s, s:o}", "finishReason", "failed", "error",
	                   jv_error_new(why->st ? why->st : CORE_ESYS, why->msg));
	if (output && state) {
		struct detach_result r = { 0, output, state, NULL };
		struct fin_ctx f = { s, pending, &r };
		st = store_save(s, json_string_value(json_object_get(pending, "snapshotId")), 0,
		                fn_finalize, &f, persisted, e);
	} else {
		st = core_fail(e, CORE_ENOMEM, "out of memory");
	}
	json_decref(output);
	json_decref(empty);
	json_decref(prow);
	return st;
}

enum core_status detach_settle_failed(struct store *s, const json_t *pending,
                                      const struct core_err *why, struct core_err *e)
{
	return finalize_lost(s, pending, why, NULL, e);
}

enum core_status detach_finalize(struct store *s, const json_t *pending,
                                 const struct detach_result *r, json_t **persisted,
                                 struct core_err *e)
{
	struct fin_ctx f = { s, pending, r };
	struct core_err why = { 0 }, e2 = { 0 };
	const char *id = json_string_value(json_object_get(pending, "snapshotId"));
	if (!id)
		return core_fail(e, CORE_EINVAL, "finalize: the pending row has no snapshotId");
	enum core_status st = store_save(s, id, 0, fn_finalize, &f, persisted, &why);
	if (st != CORE_ESYS) {
		if (st && e)
			*e = why;
		return st;
	}
	core_err_prefix(&why, "cannot commit the detached work (snapshot '%s')", id);
	if (finalize_lost(s, pending, &why, persisted, &e2))
		core_fail(e, CORE_ESYS, "%s; nor could the failed row be written: %s", why.msg, e2.msg);
	else
		core_fail(e, CORE_ESYS, "%s; the row is finalized failed with the state before the detach",
		          why.msg);
	if (e)
		e->sys = why.sys;
	return CORE_ESYS;
}

/* ---- the queue ---- */

static int has_payload(const json_t *in)
{
	const json_t *m = json_object_get(in, "message"), *r = json_object_get(in, "resume");
	return json_is_object(m) || json_array_size(json_object_get(r, "respond"))
	    || json_array_size(json_object_get(r, "restart"));
}

enum core_status detach_queue_add(struct detach_queue *q, const json_t *in,
                                  struct core_err *e)
{
	if (json_is_true(json_object_get(in, "detach")) && !has_payload(in))
		return CORE_OK;
	if (q->n == DETACH_QUEUE_MAX)
		return core_fail(e, CORE_ETOOBIG, "more than %d inputs to detach",
		                 DETACH_QUEUE_MAX);
	if (q->n == q->cap) {
		size_t cap = q->cap ? 2 * q->cap : 8;
		json_t **in2 = realloc(q->in, cap * sizeof *in2);
		if (!in2)
			return core_fail(e, CORE_ENOMEM, "out of memory");
		q->in = in2;
		q->cap = cap;
	}
	/* A shallow copy: the members are shared, only "detach" goes. */
	json_t *c = json_copy((json_t *)in);
	if (!c)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	json_object_del(c, "detach");
	q->in[q->n++] = c;
	return CORE_OK;
}

void detach_queue_release(struct detach_queue *q)
{
	for (size_t i = 0; i < q->n; i++)
		json_decref(q->in[i]);
	free(q->in);
	q->in = NULL;
	q->n = q->cap = 0;
}

/* ---- the run ---- */

void detach_log_store(const struct detach_run *d, int64_t at_ns, const char *text)
{
	struct core_err e = { 0 };
	if (d->role == DETACH_WORKER && d->store && *d->store && *d->id &&
	    pthread_equal(pthread_self(), d->thread)) {
		store_log_append(*d->store, d->id, at_ns, text, &e);
		/* a server's connection only for the line: the watcher's is
		 * the one the worker holds (detach_run_worker()) */
		store_park(*d->store);
	}
}

/* One line on the worker's log (lost only when memory is). */
static void wlog(const struct detach_run *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void wlog(const struct detach_run *d, const char *fmt, ...)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	va_list ap;
	if (!d->sink.log)
		return;
	va_start(ap, fmt);
	enum core_status st = core_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	if (!st)
		d->sink.log(d->sink.ctx, b.p);
	core_buf_release(&b);
}

static int stopped_by(const struct detach_run *d)
{
	return d->sink.stopped ? d->sink.stopped(d->sink.ctx) : 0;
}

int detach_aborted(const struct detach_run *d)
{
	return detach_watch_aborted(d->watch) || detach_watch_lease_lost(d->watch);
}

void detach_run_release(struct detach_run *d)
{
	detach_queue_release(&d->queue);
	core_buf_release(&d->log);
	json_decref(d->pending);
	d->pending = NULL;
}

/* The row the worker would have finalized, when it could not start. */
static void abandon(struct detach_run *d, const json_t *pending, const struct core_err *why)
{
	struct core_err e = { 0 };
	char msg[sizeof e.msg + 200];
	snprintf(msg, sizeof msg, "agent \"%s\": detach: %s", d->agent, why->msg);
	rt_fail(d->rt, why->st == CORE_ENOMEM ? CORE_ENOMEM : CORE_ESYS, msg);
	if (!pending)
		return;
	if (*d->store || !store_open(d->store_path, d->store, &e)) {
		json_t *output = rt_output(d->rt), *state = rt_committed_state(d->rt);
		json_t *info = rt_row_info(d->rt);
		struct detach_result r = { 0, output, state, info };
		if (output && state)
			detach_finalize(*d->store, pending, &r, NULL, &e);
		json_decref(output);
		json_decref(state);
		json_decref(info);
	}
}

/* The worker's first log line: what it runs. */
static void log_started(const struct detach_run *d, const char *how)
{
	const char *parent = json_string_value(json_object_get(d->pending, "parentId"));
	size_t n = d->queue.n;
	wlog(d, "worker started%s: agent %s, session %s, snapshot %s, parent %s, %zu input%s, "
	     "heartbeat every %lldms", how, d->agent, rt_session_id(d->rt), d->id,
	     parent ? parent : "(none)", n, n == 1 ? "" : "s",
	     (long long)(d->hb_interval_ms > 0 ? d->hb_interval_ms
	                                       : DETACH_HEARTBEAT_INTERVAL_MS));
	if (trace_id())
		wlog(d, "trace %s", trace_id());
	if (d->log_err.st)
		wlog(d, "stderr goes to /dev/null: %s", d->log_err.msg);
}

/* The lease ran out (detach_watch_start()): the others read the row as
 * expired and may have resumed from it, so nothing is committed. */
static enum core_status lease_lost(struct detach_run *d)
{
	long beats = 0, failed = 0;
	struct core_err be = { 0 };
	detach_watch_end(d->watch, &beats, &failed, &be);
	d->watch = NULL;
	if (be.st == CORE_EXPIRED)
		wlog(d, "lease lost: the store refused a heartbeat (%s); the turn was stopped and "
		     "nothing is committed", be.msg);
	else
		wlog(d, "lease lost: no heartbeat committed for %lldms (%ld of %ld failed%s%s), so "
		     "the row reads expired to others; the turn was stopped and nothing is "
		     "committed", (long long)(d->lease_ms > 0 ? d->lease_ms : DETACH_LEASE_MS),
		     failed, beats + failed, failed ? ", the last: " : "", failed ? be.msg : "");
	d->worker_st = CORE_EXPIRED;
	return CORE_EXPIRED;
}

enum core_status detach_finish(struct detach_run *d)
{
	struct core_err e = { 0 };
	struct store *s = *d->store;
	enum core_status st = CORE_OK;
	size_t n = d->queue.n;
	for (size_t i = 0; i < n; i++) {
		st = rt_turn(d->rt, d->queue.in[i]);
		wlog(d, "input %zu of %zu: %s", i + 1, n, st ? "the invocation ended" : "turn done");
		if (st)
			break;
	}
	if (!st && d->tail.st) {
		/* A malformed line after the queued inputs: as attached, the
		 * invocation fails after the turns before it. */
		wlog(d, "then: %s", d->tail.msg);
		rt_fail(d->rt, d->tail.st, d->tail.msg);
	}
	int sig = stopped_by(d);
	int aborted = detach_watch_aborted(d->watch) || sig;
	if (detach_watch_lease_lost(d->watch))
		return lease_lost(d);
	if (sig)
		wlog(d, "stopped by signal %d", sig);
	else if (aborted)
		wlog(d, "the abort flip was seen");
	rt_finish(d->rt);
	json_t *output = rt_output(d->rt), *state = rt_committed_state(d->rt), *row = NULL;
	json_t *info = rt_row_info(d->rt);
	struct detach_result r = { aborted, output, state, info };
	detach_watch_quiesce(d->watch);
	const char *last = rt_last_snapshot_id(d->rt);
	st = output && state ? detach_finalize(s, d->pending, &r, &row, &e)
	   : output && last ? core_fail(&e, CORE_ESYS, "cannot read the state of the last "
	                                "committed row '%s'", last)
	   : core_fail(&e, CORE_ENOMEM, "out of memory");
	if (st) {
		wlog(d, "cannot finalize the row: %s", e.msg);
	} else if (!row) {
		wlog(d, "the row was already settled; nothing written");
	} else {
		const json_t *err = json_object_get(row, "error");
		const char *reason = json_string_value(json_object_get(row, "finishReason"));
		wlog(d, "finalized %s%s%s%s%s", json_string_value(json_object_get(row, "status")),
		     reason ? ", finish reason " : "", reason ? reason : "",
		     err ? ": " : "", err ? json_string_value(json_object_get(err, "message")) : "");
		st = store_outcome(row);
	}
	long beats = 0, failed = 0;
	struct core_err be = { 0 };
	detach_watch_end(d->watch, &beats, &failed, &be);
	d->watch = NULL;
	if (failed)
		wlog(d, "%ld of %ld heartbeats failed, the last: %s", failed, beats + failed, be.msg);
	json_decref(row);
	json_decref(output);
	json_decref(state);
	json_decref(info);
	d->worker_st = st;
	return st;
}

enum core_status detach_run_worker(struct detach_run *d, const json_t *pending,
                                   struct detach_proc *p)
{
	struct core_err e = { 0 };
	struct store *s = NULL;
	const char *id = json_string_value(json_object_get(pending, "snapshotId"));
	enum core_status st;
	d->role = DETACH_WORKER;
	d->thread = pthread_self();
	if (d->pending != pending) {
		json_decref(d->pending);
		d->pending = json_incref((json_t *)pending);
	}
	snprintf(d->id, sizeof d->id, "%s", id ? id : "");
	rt_unlock_session(d->rt);
	store_close(*d->store);
	*d->store = NULL;
	st = store_open(d->store_path, &s, &e);
	*d->store = s;                  /* the log's lines go through it */
	if (!st)
		st = detach_watch_start(d->store_path, d->pending, d->hb_interval_ms, d->wind_down_ms,
		                        d->lease_ms, &d->watch, &e);
	if (st) {
		wlog(d, "cannot start: %s", e.msg);
		if (p)
			detach_ready(p, &e);
		store_close(s);
		*d->store = NULL;
		return st;
	}
	/* Logged before the caller returns, so the log names the worker. */
	log_started(d, "");
	if (p)
		detach_ready(p, NULL);
	rt_detach(d->rt, s);
	/* the watcher's connection is the one held while the turns run;
	 * this one connects again to finalize */
	store_park(s);
	return detach_finish(d);
}

/* The capability check and the pending row (§2.2 steps 1, 4), in
 * d->pending and d->id; a failure ends the invocation (rt_fail). */
static enum core_status write_pending(struct detach_run *d)
{
	struct core_err e = { 0 };
	char msg[sizeof e.msg + 200];
	enum core_status st;
	if (!*d->store) {
		snprintf(msg, sizeof msg, "agent \"%s\": detach requires a session store", d->agent);
		rt_fail(d->rt, CORE_EPRECONDITION, msg);
		return CORE_EPRECONDITION;
	}
	json_decref(d->pending);
	d->pending = NULL;
	if ((st = detach_pending(*d->store, rt_session_id(d->rt), rt_last_snapshot_id(d->rt),
	                         rt_next_created_ns(d->rt), d->lease_ms, &d->pending, &e))) {
		snprintf(msg, sizeof msg, "agent \"%s\": detach: save pending snapshot: %s",
		         d->agent, e.msg);
		rt_fail(d->rt, st, msg);
		return st;
	}
	snprintf(d->id, sizeof d->id, "%s",
	         json_string_value(json_object_get(d->pending, "snapshotId")));
	core_buf_release(&d->log);
	core_buf_init(&d->log, CORE_BUF_UNLIMITED);
	return CORE_OK;
}

/* The worker's stderr file, d->log, when this host can keep one (else
 * empty, and d->log_err says why: the worker's stderr is /dev/null). */
static void stderr_file(struct detach_run *d)
{
	memset(&d->log_err, 0, sizeof d->log_err);
	if (detach_log_path(d->store_path, d->id, &d->log, &d->log_err))
		core_buf_reset(&d->log);
}

enum core_status detach_here(struct detach_run *d, int in_flight)
{
	struct core_err e = { 0 };
	enum core_status st;
	d->role = DETACH_NONE;
	if ((st = write_pending(d)))
		return st;
	stderr_file(d);
	if ((st = detach_watch_start(d->store_path, d->pending, d->hb_interval_ms, d->wind_down_ms,
	                                d->lease_ms, &d->watch, &e))) {
		abandon(d, d->pending, &e);
		return st;
	}
	if (in_flight)
		rt_detach_turn(d->rt);
	else
		rt_detach(d->rt, *d->store);
	store_park(*d->store);          /* as detach_run_worker()'s */
	d->role = DETACH_WORKER;
	d->thread = pthread_self();
	return CORE_OK;
}

enum core_status detach_daemonize(struct detach_run *d)
{
	struct core_err e = { 0 };
	fflush(stdout);
	fflush(stderr);
	signal(SIGHUP, SIG_IGN);
	enum core_status st = worker_stdio(d->log.p, &e);
	if (st)
		return st;
	agent_trace_detach_here();      /* the launcher's span ends, the worker's begins */
	log_started(d, " in place");
	return CORE_OK;
}

/* ---- a queued run (docs/queue.md) ---- */

struct enq_ctx {
	json_t *row;            /* the row to write */
	json_t *found;          /* the key's run already there */
};

/* Create the row unless its ID (a key's) has one: then keep that. */
static enum core_status fn_enqueue(const json_t *existing, json_t **next, void *ctx,
                                   struct core_err *e)
{
	struct enq_ctx *c = ctx;
	if (existing) {
		c->found = json_incref((json_t *)existing);
		*next = NULL;
		return CORE_OK;
	}
	*next = json_incref(c->row);
	return CORE_OK;
}

static json_t *queue_info(const struct detach_run *d)
{
	const struct detach_enqueue *q = d->enq;
	json_t *inputs = json_array();
	for (size_t i = 0; inputs && i < d->queue.n; i++)
		if (json_array_append(inputs, d->queue.in[i]))
			json_decref(inputs), inputs = NULL;
	if (!inputs)
		return NULL;
	json_t *info = json_pack("{s:I, s:i, s:s, s:{s:s, s:s, s:I, s:i, s:I}, s:{s:O, s:o}}",
	                         "heartbeatTimeout",
	                         (json_int_t)(d->lease_ms > 0 ? d->lease_ms : DETACH_LEASE_MS),
	                         "epoch", 0, "agent", d->agent ? d->agent : "",
	                         "queue", "name", q->queue, "agent", q->agent ? q->agent : "",
	                         "concurrency", (json_int_t)q->concurrency, "attempt", 0,
	                         "notBefore", (json_int_t)(q->delay_ms > 0
	                                 ? store_now_ns(*d->store) + q->delay_ms * 1000000
	                                 : q->not_before_ns),
	                         "run", "args", q->args, "inputs", inputs);
	/* the run's own limit; without one, the claiming worker's */
	if (info && q->max_attempts > 0 &&
	    json_object_set_new(json_object_get(info, "queue"), "maxAttempts",
	                        json_integer(q->max_attempts))) {
		json_decref(info);
		return NULL;
	}
	return info;
}

static enum core_status enqueue(struct detach_run *d)
{
	struct core_err e = { 0 };
	char msg[sizeof e.msg + 200], id[DETACH_ID_MAX + 1], now[CORE_TIME_MAX],
	     created[CORE_TIME_MAX];
	struct enq_ctx c = { NULL, NULL };
	enum core_status st;
	json_t *info;
	if (!*d->store) {
		snprintf(msg, sizeof msg, "agent \"%s\": --queue requires a session store", d->agent);
		rt_fail(d->rt, CORE_EPRECONDITION, msg);
		return CORE_EPRECONDITION;
	}
	if (d->enq->key) {
		struct core_buf name = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		if (core_buf_addf(&name, "agentkit run key\n%s", d->enq->key)) {
			rt_fail(d->rt, CORE_ENOMEM, "out of memory");
			return CORE_ENOMEM;
		}
		core_uuid_named(id, name.p);
		core_buf_release(&name);
	} else {
		core_uuid(id);
	}
	now_str(*d->store, now);
	core_time_format(rt_next_created_ns(d->rt), created);
	if (!(info = queue_info(d))) {
		rt_fail(d->rt, CORE_ENOMEM, "out of memory");
		return CORE_ENOMEM;
	}
	struct session_row sr = {
		.created_at = created, .updated_at = now, .parent_id = rt_last_snapshot_id(d->rt),
		.session_id = rt_session_id(d->rt), .snapshot_id = id, .status = "pending",
		.info = info,
	};
	c.row = session_row(&sr);
	json_decref(info);
	if (!c.row) {
		rt_fail(d->rt, CORE_ENOMEM, "out of memory");
		return CORE_ENOMEM;
	}
	st = store_save(*d->store, id, 0, fn_enqueue, &c, &d->pending, &e);
	json_decref(c.row);
	if (st) {
		json_decref(c.found);
		snprintf(msg, sizeof msg, "agent \"%s\": queue the run: %s", d->agent, e.msg);
		rt_fail(d->rt, st, msg);
		return st;
	}
	const json_t *row = c.found ? c.found : d->pending;
	snprintf(d->id, sizeof d->id, "%s", id);
	snprintf(d->session, sizeof d->session, "%s",
	         json_string_value(json_object_get(row, "sessionId")));
	d->existed = c.found != NULL;
	json_decref(c.found);
	rt_unlock_session(d->rt);
	d->role = DETACH_CALLER;
	return CORE_OK;
}

enum core_status detach_start(struct detach_run *d)
{
	struct core_err e = { 0 };
	enum core_status st;
	d->role = DETACH_NONE;
	if (d->enq)
		return enqueue(d);
	if ((st = write_pending(d)))
		return st;
	stderr_file(d);

	/* The handle never crosses fork(); buffered output must not be
	 * written twice, by the caller and by the worker. */
	rt_unlock_session(d->rt);        /* the worker runs without it (docs/store.md) */
	store_close(*d->store);
	*d->store = NULL;
	fflush(stdout);
	fflush(stderr);
	trace_quiesce();        /* no export in flight across fork() */
	struct detach_proc p;
	if ((st = detach_fork(d->log.p, &p, &e)))
		goto fail;
	if (p.worker) {
		agent_trace_worker();   /* the worker's spans continue the launcher's trace */
		d->worker_st = detach_run_worker(d, d->pending, &p);
		return CORE_OK;
	}
	if ((st = detach_wait_ready(&p, &e)))
		goto fail;
	d->role = DETACH_CALLER;
	return CORE_OK;
fail:
	abandon(d, d->pending, &e);
	return st;
}
