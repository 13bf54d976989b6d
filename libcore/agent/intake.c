/* intake.c - the eager intake and the front/back split (intake.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "detach.h"
#include "intake.h"
#include "runtime.h"
#include "../base/util.h"

/* The format of stdin whose first non-blank byte is c. */
static int stdin_format(int format, int c)
{
	if (format)
		return format;
	return c == '{' ? INTAKE_NDJSON : INTAKE_TEXT;
}

enum core_status intake_read_stdin(int format, size_t max_record,
                                   const volatile sig_atomic_t *stop, struct core_buf *in,
                                   int *kind, struct core_err *e)
{
	char chunk[4096];
	size_t seen = 0;
	int first = 0;          /* the first non-blank byte, once read */
	*kind = INTAKE_NONE;
	/* A read may go one chunk past the limit before the format is known. */
	core_buf_init(in, max_record + sizeof chunk);
	while (!first || stdin_format(format, first) == INTAKE_TEXT) {
		ssize_t got = read(0, chunk, sizeof chunk);
		if (got < 0 && errno == EINTR && !*stop)
			continue;
		if (got < 0 && !*stop)
			return core_fail_sys(e, "cannot read <stdin>");
		if (got <= 0)
			break;
		enum core_status st = core_buf_add(in, chunk, (size_t)got);
		if (st == CORE_ENOMEM)
			return core_fail(e, CORE_ENOMEM, "out of memory");
		for (; seen < in->len && !first; seen++)
			if (!strchr(" \t\r\n", in->p[seen]))
				first = (unsigned char)in->p[seen];
		if (st || (first && stdin_format(format, first) == INTAKE_TEXT
		           && in->len > max_record))
			return core_fail(e, CORE_ETOOBIG, "text on <stdin> is longer than %zu bytes "
			                 "(--max-record)", max_record);
	}
	if (*stop || !first)
		return CORE_OK;
	*kind = stdin_format(format, first);
	if (*kind == INTAKE_TEXT) {
		json_t *t = json_stringn(in->p, in->len);
		if (!t) {
			*kind = INTAKE_NONE;
			return core_fail(e, CORE_EINVAL, "text on <stdin> is not valid UTF-8");
		}
		json_decref(t);
	}
	return CORE_OK;
}

enum core_status intake_stdin_wait(const char *flag, const char **text, int64_t *ms,
                                   struct core_err *e)
{
	struct core_err pe = { 0 };
	const char *env = getenv("AGENTKIT_STDIN_TIMEOUT");
	*text = flag ? flag : env && *env ? env : "3s";
	if (core_parse_duration(*text, ms, &pe))
		return core_fail(e, CORE_EUSAGE, "%s: %s",
		                 flag ? "--stdin-timeout" : "AGENTKIT_STDIN_TIMEOUT", pe.msg);
	return CORE_OK;
}

int intake_stdin_ready(int64_t timeout_ms, const volatile sig_atomic_t *stop)
{
	int64_t end = core_now_mono_ms() + timeout_ms, left;
	struct pollfd p = { .fd = 0, .events = POLLIN };
	while (!*stop && (left = end - core_now_mono_ms()) > 0) {
		int n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (n > 0 || (n < 0 && errno != EINTR))
			return 1;
	}
	return 0;
}

void intake_init(struct intake *in)
{
	memset(in, 0, sizeof *in);
	in->wake[0] = in->wake[1] = -1;
	in->stop[0] = in->stop[1] = -1;
	in->restore_fl = -1;
}

enum core_status intake_parse_line(const char *line, size_t len, size_t lineno, json_t **in,
                                   struct core_err *e)
{
	*in = jv_parse(line, len, "<stdin>", lineno, e);
	if (!*in)
		return e->st;
	if (json_is_null(*in)) {
		json_decref(*in);
		*in = NULL;
		return CORE_OK;
	}
	if (rt_input_check(*in, e)) {
		char msg[sizeof e->msg];
		snprintf(msg, sizeof msg, "%s", e->msg);
		core_fail(e, CORE_EINVAL, "%s (at <stdin>:%zu)", msg, lineno);
		json_decref(*in);
		*in = NULL;
		return CORE_EINVAL;
	}
	return CORE_OK;
}

static void intake_wake(struct intake *in)
{
	if (in->wake[1] >= 0) {
		ssize_t w = write(in->wake[1], "i", 1);
		(void)w;        /* a full pipe is awake already */
	}
}

static int intake_full(const struct intake *in)
{
	return in->n - in->head >= INTAKE_MAX_INPUTS || in->bytes >= INTAKE_MAX_BYTES;
}

/* Append to q (the lock held, or no reader thread). */
static enum core_status intake_append(struct intake *in, json_t *v, size_t len)
{
	if (in->n == in->cap) {
		if (in->head) {
			/* Slide the waiting inputs to the front first. */
			memmove(in->q, in->q + in->head, (in->n - in->head) * sizeof *in->q);
			in->n -= in->head;
			in->head = 0;
		}
		if (in->n == in->cap) {
			size_t cap = in->cap ? 2 * in->cap : 16;
			struct intake_item *q = realloc(in->q, cap * sizeof *q);
			if (!q)
				return CORE_ENOMEM;
			in->q = q;
			in->cap = cap;
		}
	}
	in->q[in->n++] = (struct intake_item){ v, len };
	in->bytes += len;
	return CORE_OK;
}

/* The reader stops: e (NULL: end of file) is what the turns get after
 * the inputs before it. */
static void intake_end(struct intake *in, const struct core_err *e)
{
	pthread_mutex_lock(&in->mu);
	if (e)
		in->err = *e;
	in->done = 1;
	pthread_mutex_unlock(&in->mu);
	intake_wake(in);
}

/*
 * The next record of stdin; an error in e with agent-run's status for it.
 * The reader thread's descriptor does not block: with wait it sleeps until
 * stdin has more or it is told to stop (CORE_ECANCELLED); without, "no
 * more for now" is CORE_ESYS with EAGAIN.
 */
static enum core_status intake_next(struct intake *in, int wait, char **line, size_t *len,
                                    struct core_err *e)
{
	enum core_status st;
	for (;;) {
		st = core_lines_next(&in->lr, line, len, e);
		if (!wait || !in->threaded || st != CORE_ESYS
		    || (e->sys != EAGAIN && e->sys != EWOULDBLOCK))
			break;
		struct pollfd p[2] = { { .fd = in->lr.fd, .events = POLLIN },
		                       { .fd = in->stop[0], .events = POLLIN } };
		while (poll(p, 2, -1) < 0 && errno == EINTR)
			;
		if (p[1].revents)
			return CORE_ECANCELLED;
	}
	if (st && st != CORE_ESYS)
		e->st = st = CORE_EINVAL;
	return st;
}

/*
 * A detach line was read (§2.1): it and every line already written behind
 * it (read without waiting; later lines are not read) join the queue at
 * once, then "detach" turns true and the reader stops.  A malformed line
 * among them ends the drain and becomes the tail error.
 */
static void intake_detach(struct intake *in, json_t *v, size_t len)
{
	struct intake_item *got = malloc(16 * sizeof *got);
	size_t n = 0, cap = 16;
	struct core_err tail = { 0 };
	int fd = in->lr.fd, fl = fcntl(fd, F_GETFL);
	int restore = fl >= 0 && !(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
	if (got)
		got[n++] = (struct intake_item){ v, len };
	else
		core_fail(&tail, CORE_ENOMEM, "out of memory");
	while (got && n < DETACH_QUEUE_MAX) {
		char *line;
		size_t ll;
		struct core_err e = { 0 };
		json_t *w = NULL;
		enum core_status st = intake_next(in, 0, &line, &ll, &e);
		if (st == CORE_ESYS && (e.sys == EAGAIN || e.sys == EWOULDBLOCK))
			break;
		if (!st && line)
			st = intake_parse_line(line, ll, in->lr.lineno, &w, &e);
		if (st) {
			tail = e;
			break;
		}
		if (!line)
			break;
		if (!w)
			continue;
		if (n == cap) {
			struct intake_item *g = realloc(got, 2 * cap * sizeof *g);
			if (!g) {
				json_decref(w);
				core_fail(&tail, CORE_ENOMEM, "out of memory");
				break;
			}
			got = g;
			cap *= 2;
		}
		got[n++] = (struct intake_item){ w, ll };
	}
	if (restore)
		fcntl(fd, F_SETFL, fl);
	pthread_mutex_lock(&in->mu);
	for (size_t i = 0; i < n; i++)
		if (intake_append(in, got[i].in, got[i].len)) {
			for (; i < n; i++)
				json_decref(got[i].in);
			core_fail(&tail, CORE_ENOMEM, "out of memory");
		}
	if (!got)
		json_decref(v);
	in->err = tail;
	in->done = 1;
	atomic_store(&in->detach, 1);
	pthread_mutex_unlock(&in->mu);
	free(got);
	intake_wake(in);
}

/* Read stdin into the queue until the reader stops (or, without a reader
 * thread, until the queue is full). */
static void intake_fill(struct intake *in)
{
	for (;;) {
		pthread_mutex_lock(&in->mu);
		while (in->threaded && intake_full(in) && !in->quit)
			pthread_cond_wait(&in->room, &in->mu);
		int stop = in->quit || in->done || (!in->threaded && intake_full(in));
		pthread_mutex_unlock(&in->mu);
		if (stop)
			return;
		char *line;
		size_t len;
		struct core_err e = { 0 };
		json_t *v = NULL;
		enum core_status st = intake_next(in, 1, &line, &len, &e);
		if (st == CORE_ECANCELLED)
			return;         /* told to stop */
		if (!st && line)
			st = intake_parse_line(line, len, in->lr.lineno, &v, &e);
		if (st || !line) {
			intake_end(in, st ? &e : NULL);
			return;
		}
		if (!v)
			continue;
		if (json_is_true(json_object_get(v, "detach"))) {
			intake_detach(in, v, len);
			return;
		}
		pthread_mutex_lock(&in->mu);
		st = in->quit ? CORE_ECANCELLED : intake_append(in, v, len);
		pthread_mutex_unlock(&in->mu);
		if (st == CORE_ECANCELLED) {
			json_decref(v);
			return;
		}
		if (st) {
			json_decref(v);
			intake_end(in, &(struct core_err){ CORE_ENOMEM, 0, "out of memory" });
			return;
		}
		intake_wake(in);
	}
}

static void *intake_main(void *arg)
{
	intake_fill(arg);
	return NULL;
}

/*
 * The reader thread's descriptor: one that never blocks, so the reader can
 * wait for stdin and for "stop" at once, and that is not fd 0 (a stop
 * signal puts /dev/null there).  A pipe or FIFO is opened again (its own
 * open file description: O_NONBLOCK stays ours, not the caller's); a
 * socket is duplicated and O_NONBLOCK until the intake ends; other files
 * (regular ones) do not block anyway.
 */
static int reader_fd(struct intake *in)
{
	struct stat sb;
	int fd = -1;
	if (fstat(0, &sb) < 0 || !(S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode)))
		return 0;
	if (S_ISFIFO(sb.st_mode))
		fd = open("/proc/self/fd/0", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && (fd = fcntl(0, F_DUPFD_CLOEXEC, 3)) >= 0) {
		int fl = fcntl(fd, F_GETFL);
		if (fl >= 0 && !(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0)
			in->restore_fl = fl;
	}
	if (fd < 0)
		return 0;
	in->own_fd = 1;
	return fd;
}

static enum core_status start_failed(struct core_err *e, int sys)
{
	*e = (struct core_err){ CORE_ESYS, sys, "cannot start reading <stdin>" };
	return CORE_ESYS;
}

enum core_status intake_start(struct intake *in, const struct core_buf *ahead,
                              size_t max_record, int threaded, struct core_err *e)
{
	in->restore_fl = -1;
	core_lines_init(&in->lr, threaded ? reader_fd(in) : 0, "<stdin>", max_record);
	pthread_mutex_init(&in->mu, NULL);
	pthread_cond_init(&in->room, NULL);
	in->on = 1;
	/* The bytes read ahead may be many records (intake_all_there()): the
	 * record limit is the reader's, not the buffer's. */
	if (in->lr.buf.max < ahead->len + 65537)
		in->lr.buf.max = ahead->len + 65537;
	if (ahead->len && core_buf_add(&in->lr.buf, ahead->p, ahead->len))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	if (!threaded)
		return CORE_OK;
	if (pipe2(in->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		in->wake[0] = in->wake[1] = -1;
		return start_failed(e, errno);
	}
	if (pipe2(in->stop, O_CLOEXEC) < 0) {
		in->stop[0] = in->stop[1] = -1;
		return start_failed(e, errno);
	}
	sigset_t stops, old;
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stops, &old);
	in->threaded = 1;
	int rc = pthread_create(&in->thread, NULL, intake_main, in);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		in->threaded = 0;
		return start_failed(e, errno);
	}
	return CORE_OK;
}

void intake_stop(struct intake *in)
{
	if (in->threaded) {
		pthread_mutex_lock(&in->mu);
		in->quit = 1;
		pthread_cond_broadcast(&in->room);
		pthread_mutex_unlock(&in->mu);
		ssize_t w = write(in->stop[1], "q", 1);
		(void)w;        /* one byte in an empty pipe */
		pthread_join(in->thread, NULL);
		in->threaded = 0;
	}
	if (in->restore_fl >= 0) {
		fcntl(in->lr.fd, F_SETFL, in->restore_fl);
		in->restore_fl = -1;
	}
	if (in->own_fd) {
		close(in->lr.fd);
		in->own_fd = 0;
	}
}

void intake_release(struct intake *in)
{
	if (!in->on)
		return;
	intake_stop(in);
	for (size_t i = in->head; i < in->n; i++)
		json_decref(in->q[i].in);
	free(in->q);
	core_lines_release(&in->lr);
	pthread_mutex_destroy(&in->mu);
	pthread_cond_destroy(&in->room);
	for (int i = 0; i < 2; i++) {
		if (in->wake[i] >= 0)
			close(in->wake[i]);
		if (in->stop[i] >= 0)
			close(in->stop[i]);
	}
}

/* Wait for the reader to change something, or for a stop signal: those
 * are let in (mask) only while the wait sleeps. */
static void intake_wait(struct intake *in, const sigset_t *mask)
{
	struct pollfd p = { .fd = in->wake[0], .events = POLLIN };
	char buf[64];
	if (ppoll(&p, 1, NULL, mask) > 0)
		while (read(in->wake[0], buf, sizeof buf) > 0)
			;
}

int intake_idle(struct intake *in)
{
	if (!in->threaded)
		return 0;
	pthread_mutex_lock(&in->mu);
	int idle = in->head >= in->n && !in->done && !atomic_load(&in->detach);
	pthread_mutex_unlock(&in->mu);
	return idle;
}

enum intake_next intake_take(struct intake *in, const volatile sig_atomic_t *stop,
                             json_t **next, struct core_err *err)
{
	enum intake_next got = INTAKE_END;
	sigset_t stops, old;
	*next = NULL;
	/* With a reader thread the wait may sleep: a stop signal that comes
	 * after the check of *stop and before the sleep must end the sleep,
	 * so the signals are held from the check to the sleep. */
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGHUP);
	if (in->threaded)
		pthread_sigmask(SIG_BLOCK, &stops, &old);
	pthread_mutex_lock(&in->mu);
	for (;;) {
		if (atomic_load(&in->detach)) {
			got = INTAKE_DETACH;
			break;
		}
		if (in->head < in->n) {
			*next = in->q[in->head].in;
			in->bytes -= in->q[in->head].len;
			in->head++;
			pthread_cond_signal(&in->room);
			got = INTAKE_INPUT;
			break;
		}
		if (in->done || *stop)
			break;
		pthread_mutex_unlock(&in->mu);
		if (in->threaded)
			intake_wait(in, &old);
		else
			intake_fill(in);
		pthread_mutex_lock(&in->mu);
	}
	if (got == INTAKE_END)
		*err = in->err;
	pthread_mutex_unlock(&in->mu);
	if (in->threaded)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	return got;
}

int intake_detach_read(struct intake *in)
{
	return atomic_load(&in->detach);
}

enum core_status intake_hand_over(struct intake *in, struct detach_run *d, struct core_err *e)
{
	enum core_status st = CORE_OK;
	intake_stop(in);
	for (; in->head < in->n; in->head++) {
		const json_t *v = in->q[in->head].in;
		if (!st)
			st = v ? detach_queue_add(&d->queue, v, e)
			       : core_fail(e, CORE_ENOMEM, "out of memory");
		json_decref(in->q[in->head].in);
	}
	in->bytes = 0;
	if (!st)
		d->tail = in->err;
	return st;
}

int intake_all_there(struct core_buf *ahead)
{
	char chunk[65536];
	struct pollfd p = { .fd = 0, .events = POLLIN };
	if (ahead->max < INTAKE_MAX_BYTES + sizeof chunk)
		ahead->max = INTAKE_MAX_BYTES + sizeof chunk;
	while (ahead->len <= INTAKE_MAX_BYTES) {
		if (poll(&p, 1, 0) != 1)
			return 0;
		ssize_t got = read(0, chunk, sizeof chunk);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return 1;       /* the end, or an error the reader will report */
		if (core_buf_add(ahead, chunk, (size_t)got))
			return 0;
	}
	return 0;
}

/* The front: forward each signal of sfd to the back until the back
 * detaches (exit 0 at once) or ends (its exit status, or the signal that
 * ended it); the signals are not forwarded once the back is reaped. */
static int front_wait(int fd, int sfd, pid_t back, int *sig)
{
	struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
	struct signalfd_siginfo si;
	char c = 0;
	ssize_t n;
	int status;
	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		while (read(sfd, &si, sizeof si) == sizeof si)
			kill(back, (int)si.ssi_signo);
		if (p[0].revents)
			break;
	}
	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	if (n == 1 && c == 'd')
		return core_exit_code(CORE_OK);
	while (waitpid(back, &status, 0) < 0)
		if (errno != EINTR)
			return core_exit_code(CORE_ESYS);
	if (WIFSIGNALED(status))
		*sig = WTERMSIG(status);
	return WIFEXITED(status) ? WEXITSTATUS(status) : core_exit_code(CORE_ESYS);
}

/* The back's side of intake_split(): the middle process hands its pid to
 * the front and exits; the back waits to be re-parented. */
static int split_back(int fds[2], pid_t front, const sigset_t *old, int *front_fd)
{
	pid_t mid = getpid();
	pid_t b = setsid() < 0 ? -1 : fork();
	if (b != 0) {
		/* The middle process: the back's pid to the front. */
		ssize_t w = write(fds[1], &b, sizeof b);
		_exit(w == sizeof b && b > 0 ? 0 : 1);
	}
	close(fds[0]);
	detach_close_others(fds[1]);
	*front_fd = fds[1];
	/* Once re-parented to the front (the middle process exits at once),
	 * the front's death is a caller stop: SIGTERM, as if forwarded.  A
	 * detach clears it. */
	while (getppid() == mid)
		nanosleep(&(struct timespec){ 0, 100000 }, NULL);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	sigprocmask(SIG_SETMASK, old, NULL);
	if (getppid() != front)
		raise(SIGTERM);         /* the front is gone already */
	return 1;
}

int intake_split(int *front_fd, int *front_exit, int *front_sig)
{
	static const int sigs[] = { SIGINT, SIGHUP, SIGTERM };
	int fds[2], sfd;
	sigset_t stops, fwd, old;
	sigemptyset(&stops);
	sigemptyset(&fwd);
	for (int i = 0; i < 3; i++) {
		struct sigaction cur;
		sigaddset(&stops, sigs[i]);
		/* Signals agent-run ignores (on entry) stay ignored. */
		if (sigaction(sigs[i], NULL, &cur) < 0 || cur.sa_handler != SIG_IGN)
			sigaddset(&fwd, sigs[i]);
	}
	pid_t self = getpid();
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0 || pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	sigprocmask(SIG_BLOCK, &stops, &old);
	if ((sfd = signalfd(-1, &fwd, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		close(fds[0]);
		close(fds[1]);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	pid_t a = fork();
	if (a == 0)
		return split_back(fds, self, &old, front_fd);  /* sfd: detach_close_others() */
	close(fds[1]);
	pid_t b = -1;
	ssize_t got = -1;
	int status;
	while (a > 0 && waitpid(a, &status, 0) < 0 && errno == EINTR)
		;
	while (a > 0 && (got = read(fds[0], &b, sizeof b)) < 0 && errno == EINTR)
		;
	if (got != sizeof b || b <= 0) {
		close(fds[0]);
		close(sfd);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return -1;
	}
	*front_sig = 0;
	*front_exit = front_wait(fds[0], sfd, b, front_sig);
	close(fds[0]);
	/* Signals after the back's end are the front's, as they come: its
	 * own stop handling is its caller's. */
	close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return 0;
}

void intake_detached(int *front_fd)
{
	if (*front_fd >= 0) {
		ssize_t w = write(*front_fd, "d", 1);
		(void)w;        /* a front that is gone has nothing to wait for */
		close(*front_fd);
		*front_fd = -1;
	}
}
