/* coproc.c - long-lived co-processes over pipes (custom agents, transforms). */
#include "coproc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "lines.h"
#include "run.h"
#include "spawn.h"
#include "util.h"

/* Longest wait between cancellation checks and reap attempts. */
#define SLICE_MS 50

/* A new coproc for argv (run in cwd, NULL: ours), or NULL with e filled. */
static struct coproc *start(char *const argv[], const char *cwd, const char *what,
                            const char *const *env_add, const struct coproc_limits *lim,
                            struct core_err *e)
{
	struct coproc *c = calloc(1, sizeof *c);
	char **env = NULL;
	if (c)
		c->in_fd = c->out_fd = c->err_fd = -1;
	if (!c || !(c->what = strdup(what)) || !(env = run_env(NULL, env_add))) {
		free(env);
		coproc_free(c);
		core_fail(e, CORE_ENOMEM, "out of memory");
		return NULL;
	}
	if (lim)
		c->lim = *lim;
	c->max_line = c->lim.line ? c->lim.line : COPROC_DEFAULT_MAX_LINE;
	core_buf_init(&c->rbuf, c->max_line + 65536);
	core_buf_init(&c->errbuf, COPROC_STDERR_MAX + 1);
	struct spawn sp;
	if (spawn_start_in(argv, env, cwd, what, &sp, e)) {
		free(env);
		coproc_free(c);
		return NULL;
	}
	c->owner = getpid();
	free(env);
	c->pid = sp.pid;
	c->in_fd = sp.in_fd;
	c->out_fd = sp.out_fd;
	c->err_fd = sp.err_fd;
	return c;
}

enum core_status coproc_start(const char *cmd, const char *what,
                              const char *const *env_add, const struct coproc_limits *lim,
                              struct coproc **out, struct core_err *e)
{
	char *execd = spawn_exec_script(cmd);  /* "exec CMD": CMD holds the pipes */
	char *const argv[] = { "/bin/sh", "-c", execd ? execd : (char *)cmd, NULL };
	*out = start(argv, NULL, what, env_add, lim, e);
	free(execd);
	return *out ? CORE_OK : e->st;
}

enum core_status coproc_start_argv(char *const argv[], const char *cwd, const char *what,
                                   const char *const *env_add,
                                   const struct coproc_limits *lim, struct coproc **out,
                                   struct core_err *e)
{
	*out = start(argv, cwd, what, env_add, lim, e);
	return *out ? CORE_OK : e->st;
}

/* ---- waiting ---- */

/* Reap the child if it has exited.  Before reaping, stragglers of its
 * process group (background jobs holding our pipes) are killed: the pid
 * cannot be reused while it is an unreaped zombie. */
static int try_reap(struct coproc *c)
{
	siginfo_t si;
	if (c->reaped || c->pid <= 0)
		return 1;
	memset(&si, 0, sizeof si);
	if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
		return 0;
	int status;
	if (spawn_reap(c->pid, &status) == c->pid) {
		c->wstatus = status;
		c->reaped = 1;
		if (!c->exited_at)
			c->exited_at = core_now_mono_ms();
	}
	return c->reaped;
}

/* Seen exiting, without reaping (the zombie keeps its process group's ID
 * ours until try_reap() has killed the group). */
static int ended(struct coproc *c)
{
	siginfo_t si;
	if (c->exited_at || c->reaped)
		return 1;
	if (c->pid <= 0)
		return 0;
	memset(&si, 0, sizeof si);
	if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
		return 0;
	c->exited_at = core_now_mono_ms();
	return 1;
}

static enum core_status fill(struct coproc *c, struct core_err *e);

/*
 * The command has ended and the pipe grace is over, yet stdout is still
 * open: a process it started holds it.  Kill its group, reap it, keep what
 * is already in the pipe, and count stdout as closed.  1 when so.
 */
static int gone_quiet(struct coproc *c)
{
	struct core_err ignore = { 0 };
	if (c->out_eof || !ended(c) || core_now_mono_ms() - c->exited_at < COPROC_PIPE_GRACE_MS)
		return 0;
	try_reap(c);
	fill(c, &ignore);
	c->out_eof = 1;
	return 1;
}

/* Keep the head of stderr, drop the rest. */
static void drain_err(struct coproc *c)
{
	char tmp[4096];
	for (;;) {
		ssize_t r = read(c->err_fd, tmp, sizeof tmp);
		if (r > 0 && c->lim.on_stderr)
			c->lim.on_stderr(c->lim.stderr_ctx, tmp, (size_t)r);
		if (r > 0 && c->lim.stderr_tail) {
			/* The last COPROC_STDERR_MAX bytes: what a server said
			 * just before it failed. */
			size_t n = (size_t)r, keep = c->errbuf.len;
			if (n >= COPROC_STDERR_MAX) {
				keep = 0;
			} else if (keep + n > COPROC_STDERR_MAX) {
				keep = COPROC_STDERR_MAX - n;
				memmove(c->errbuf.p, c->errbuf.p + c->errbuf.len - keep, keep);
			}
			if (keep < c->errbuf.len || n >= COPROC_STDERR_MAX)
				c->err_dropped = 1;
			c->errbuf.len = keep;
			if (c->errbuf.p)
				c->errbuf.p[keep] = 0;
			if (n > COPROC_STDERR_MAX)
				core_buf_add(&c->errbuf, tmp + n - COPROC_STDERR_MAX, COPROC_STDERR_MAX);
			else
				core_buf_add(&c->errbuf, tmp, n);
			continue;
		}
		if (r > 0) {
			size_t room = COPROC_STDERR_MAX - c->errbuf.len;
			if (c->errbuf.len < COPROC_STDERR_MAX)
				core_buf_add(&c->errbuf, tmp, (size_t)r < room ? (size_t)r : room);
			else
				c->err_dropped = 1;
			continue;
		}
		if (r == 0)
			c->err_eof = 1;
		else if (errno == EINTR)
			continue;
		else if (errno != EAGAIN && errno != EWOULDBLOCK)
			c->err_eof = 1;
		return;
	}
}

static enum core_status too_long(struct coproc *c, struct core_err *e)
{
	return run_line_too_long(e, c->what, c->max_line, c->lim.line_knob);
}

/* More than the budget: "wrote more than 100000 lines on stdout in one turn
 * (the limit; set AGENTKIT_EXEC_MAX_LINES to raise it)". */
static enum core_status over_budget(struct coproc *c, size_t limit, const char *unit,
                                    const char *knob, struct core_err *e)
{
	return run_over_budget(e, c->what, limit, unit, c->scope, knob);
}

/* The budget, after a line was taken (pending: bytes of a line still
 * coming). */
static enum core_status check_budget(struct coproc *c, size_t pending, struct core_err *e)
{
	if (c->lim.lines && c->used_lines > c->lim.lines)
		return over_budget(c, c->lim.lines, "lines", c->lim.lines_knob, e);
	if (c->lim.bytes && c->used_bytes + pending > c->lim.bytes)
		return over_budget(c, c->lim.bytes, "bytes", c->lim.bytes_knob, e);
	if (c->lim.bytes && c->used_values > CORE_VALUE_LIMIT(c->lim.bytes))
		return over_budget(c, CORE_VALUE_LIMIT(c->lim.bytes), "JSON values", c->lim.bytes_knob, e);
	return CORE_OK;
}

void coproc_budget(struct coproc *c, const char *scope)
{
	c->used_bytes = c->used_lines = c->used_values = 0;
	c->scope = scope;
}

/* Unread bytes of stdout we hold. */
static size_t pending(const struct coproc *c)
{
	return c->rbuf.len - c->rstart;
}

/*
 * Read what stdout has into rbuf, while the reader may need more: with over
 * max_line bytes unread it has enough to decide (a line too long, or whole
 * lines to take), and the pipe holds the rest.  So rbuf never passes
 * max_line plus one read.
 */
static enum core_status fill(struct coproc *c, struct core_err *e)
{
	char tmp[65536];
	while (pending(c) <= c->max_line) {
		ssize_t r = read(c->out_fd, tmp, sizeof tmp);
		if (r > 0) {
			if (c->rstart && (c->rstart > 65536 || c->rbuf.len + (size_t)r > c->rbuf.max)) {
				memmove(c->rbuf.p, c->rbuf.p + c->rstart, pending(c));
				c->rbuf.len -= c->rstart;
				c->rbuf.p[c->rbuf.len] = 0;
				c->rstart = 0;
			}
			if (core_buf_add(&c->rbuf, tmp, (size_t)r))
				return core_fail(e, CORE_ENOMEM, "out of memory reading from %s", c->what);
			continue;
		}
		if (r == 0)
			c->out_eof = 1;
		else if (errno == EINTR)
			continue;
		else if (errno != EAGAIN && errno != EWOULDBLOCK)
			return core_fail_sys(e, "cannot read from %s", c->what);
		break;
	}
	return CORE_OK;
}

/*
 * Wait up to ms for something to happen: stdout readable (read ahead),
 * stderr (drained), and, with want_write, room on stdin (*writable set).
 */
static enum core_status wait_once(struct coproc *c, int64_t ms, int want_write,
                                  int *writable, struct core_err *e)
{
	struct pollfd p[3];
	int n = 0, iout = -1, ierr = -1, iin = -1;
	if (!c->out_eof && c->out_fd >= 0 && pending(c) <= c->max_line) {
		p[n] = (struct pollfd){ c->out_fd, POLLIN, 0 };
		iout = n++;
	}
	if (!c->err_eof && c->err_fd >= 0) {
		p[n] = (struct pollfd){ c->err_fd, POLLIN, 0 };
		ierr = n++;
	}
	if (want_write && c->in_fd >= 0) {
		p[n] = (struct pollfd){ c->in_fd, POLLOUT, 0 };
		iin = n++;
	}
	if (writable)
		*writable = 0;
	int r = poll(p, (nfds_t)n, (int)ms);
	if (r < 0) {
		if (errno == EINTR)
			return CORE_OK;
		return core_fail_sys(e, "cannot wait for %s", c->what);
	}
	if (iout >= 0 && p[iout].revents) {
		enum core_status st = fill(c, e);
		if (st)
			return st;
	}
	if (ierr >= 0 && p[ierr].revents)
		drain_err(c);
	if (iin >= 0 && p[iin].revents && writable)
		*writable = 1;
	return CORE_OK;
}

static int64_t slice(int64_t deadline)
{
	if (deadline < 0)
		return SLICE_MS;
	int64_t left = deadline - core_now_mono_ms();
	return left < 0 ? 0 : left < SLICE_MS ? left : SLICE_MS;
}

/* After stdout closed: give the process a moment to exit (and finish its
 * stderr) so the message can say how it ended. */
static void settle(struct coproc *c, int64_t ms)
{
	int64_t deadline = core_now_mono_ms() + ms;
	struct core_err ignore = { 0 };
	while (!try_reap(c) && core_now_mono_ms() < deadline)
		if (wait_once(c, slice(deadline), 0, NULL, &ignore))
			break;
	while (!c->err_eof && c->err_fd >= 0 && core_now_mono_ms() < deadline)
		if (wait_once(c, slice(deadline), 0, NULL, &ignore))
			break;
}

void coproc_describe(struct coproc *c, struct core_buf *out)
{
	int code, sig;
	try_reap(c);
	run_status(c->wstatus, &code, &sig);
	if (!c->reaped)
		core_buf_adds(out, "is still running");
	else
		run_describe_end(out, code, sig);
	/* The stderr head (or tail), on one line. */
	run_describe_said(out, c->errbuf.p ? c->errbuf.p : "", c->errbuf.len,
	                  c->lim.stderr_tail && c->err_dropped ? "..." : "",
	                  !c->lim.stderr_tail && c->errbuf.len >= COPROC_STDERR_MAX ? "..." : "");
}

/*
 * Fail because a pipe closed: "<what> exited with status N: <stderr>" once
 * the process has ended (which pipe noticed first is a race, so it is not
 * named), else "<what> <event> (is still running: <stderr>)".
 */
static enum core_status fail_gone(struct coproc *c, const char *event, struct core_err *e)
{
	struct core_buf how = CORE_BUF_INIT(COPROC_STDERR_MAX + 256);
	settle(c, 500);
	coproc_describe(c, &how);
	if (c->reaped)
		core_fail(e, CORE_EINTERNAL, "%s %s", c->what, how.p ? how.p : "ended");
	else
		core_fail(e, CORE_EINTERNAL, "%s %s (%s)", c->what, event, how.p ? how.p : "");
	core_buf_release(&how);
	return CORE_EINTERNAL;
}

static enum core_status check_cancel(struct coproc *c, const struct coproc_cancel *cancel,
                                     struct core_err *e)
{
	if (cancel && cancel->fn && cancel->fn(cancel->ctx))
		return core_fail(e, CORE_ECANCELLED, "%s: cancelled", c->what);
	return CORE_OK;
}

static enum core_status timed_out(struct coproc *c, int64_t timeout_ms, struct core_err *e)
{
	return core_fail(e, CORE_EDEADLINE, "%s did not answer within %lld ms", c->what,
	                 (long long)timeout_ms);
}

/* A write that found no room until the deadline: the command is not
 * reading its input (it is stuck, or busy writing). */
static enum core_status not_reading(struct coproc *c, int64_t timeout_ms, struct core_err *e)
{
	return core_fail(e, CORE_EDEADLINE, "%s did not read its input within %lld ms", c->what,
	                 (long long)timeout_ms);
}

/* ---- writing and reading ---- */

enum core_status coproc_write_line(struct coproc *c, const char *p, size_t n,
                                   int64_t timeout_ms, const struct coproc_cancel *cancel,
                                   struct core_err *e)
{
	int64_t deadline = timeout_ms < 0 ? -1 : core_now_mono_ms() + timeout_ms;
	size_t off = 0, total = n + 1;
	enum core_status st;
	if (c->in_fd < 0)
		return fail_gone(c, "has its input closed", e);
	while (off < total) {
		const char *src = off < n ? p + off : "\n";
		size_t len = off < n ? n - off : 1;
		ssize_t w = write(c->in_fd, src, len);
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EPIPE)
			return fail_gone(c, "closed its input", e);
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return core_fail_sys(e, "cannot write to %s", c->what);
		if ((st = check_cancel(c, cancel, e)))
			return st;
		if (deadline >= 0 && core_now_mono_ms() >= deadline)
			return not_reading(c, timeout_ms, e);
		/* Both of us writing, neither reading, would wait for the
		 * timeout: the command has written more than a line's worth. */
		if (pending(c) > c->max_line)
			return core_fail(e, CORE_ETOOBIG, "%s wrote more than %zu bytes without reading "
			                 "its input", c->what, c->max_line);
		/* Ended, and what holds its stdin is not reading. */
		if (ended(c) && core_now_mono_ms() - c->exited_at >= COPROC_PIPE_GRACE_MS)
			return fail_gone(c, "closed its input", e);
		int writable;
		if ((st = wait_once(c, slice(deadline), 1, &writable, e)))
			return st;
	}
	return CORE_OK;
}

enum core_status coproc_write_json(struct coproc *c, const json_t *v, int64_t timeout_ms,
                                   const struct coproc_cancel *cancel, struct core_err *e)
{
	struct core_buf line = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = jv_dump(v, &line);
	if (st)
		st = core_fail(e, st, "cannot encode a line for %s", c->what);
	else
		st = coproc_write_line(c, line.p, line.len, timeout_ms, cancel, e);
	core_buf_release(&line);
	return st;
}

/* Take a complete line out of rbuf, skipping blank ones.  1 if one was found. */
static int take_line(struct coproc *c, char **line, size_t *len)
{
	for (;;) {
		char *start = c->rbuf.p ? c->rbuf.p + c->rstart : NULL;
		size_t avail = c->rbuf.len - c->rstart;
		char *nl = start ? memchr(start, '\n', avail) : NULL;
		if (!nl) {
			if (!c->out_eof || !avail)
				return 0;
			/* A last line without a newline is still a line. */
			nl = start + avail;
			c->rbuf.p[c->rbuf.len] = 0;
		}
		size_t n = (size_t)(nl - start), took = n + (nl < c->rbuf.p + c->rbuf.len ? 1 : 0);
		c->rstart += took;
		*nl = 0;
		if (n && start[n - 1] == '\r')
			start[--n] = 0;
		c->lineno++;
		c->used_lines++;
		c->used_bytes += took;
		size_t i = 0;
		while (i < n && (start[i] == ' ' || start[i] == '\t'))
			i++;
		if (i == n)
			continue;
		*line = start;
		*len = n;
		return 1;
	}
}

enum core_status coproc_read_line(struct coproc *c, int64_t timeout_ms,
                                  const struct coproc_cancel *cancel,
                                  char **line, size_t *len, struct core_err *e)
{
	int64_t deadline = timeout_ms < 0 ? -1 : core_now_mono_ms() + timeout_ms;
	enum core_status st;
	for (;;) {
		if (take_line(c, line, len)) {
			if (*len > c->max_line)
				return too_long(c, e);
			c->used_values += core_json_values(*line, *len);
			return check_budget(c, 0, e);
		}
		if (pending(c) > c->max_line)
			return too_long(c, e);
		if ((st = check_budget(c, pending(c), e)))
			return st;
		if (c->out_eof)
			return fail_gone(c, "closed its output", e);
		if (gone_quiet(c))
			continue;       /* what was left in the pipe is read above */
		if ((st = check_cancel(c, cancel, e)))
			return st;
		if (deadline >= 0 && core_now_mono_ms() >= deadline)
			return timed_out(c, timeout_ms, e);
		if ((st = wait_once(c, slice(deadline), 0, NULL, e)))
			return st;
	}
}

enum core_status coproc_read_json(struct coproc *c, int64_t timeout_ms,
                                  const struct coproc_cancel *cancel,
                                  json_t **v, struct core_err *e)
{
	char *line;
	size_t len;
	struct core_err pe = { 0 };
	enum core_status st = coproc_read_line(c, timeout_ms, cancel, &line, &len, e);
	if (st)
		return st;
	if (!(*v = jv_parse(line, len, "stdout", c->lineno, &pe))) {
		if (pe.st == CORE_ENOMEM)
			return core_fail(e, CORE_ENOMEM, "out of memory");
		return core_fail(e, CORE_EINTERNAL, "%s wrote malformed output: %s", c->what, pe.msg);
	}
	return CORE_OK;
}

/* ---- ending ---- */

/* Wait up to ms for the child to exit, draining its output meanwhile. */
static int wait_exit(struct coproc *c, int64_t ms)
{
	int64_t deadline = core_now_mono_ms() + ms;
	struct core_err ignore = { 0 };
	long nap_us = 100;      /* a child that closed its pipes is about to exit */
	while (!try_reap(c)) {
		if (core_now_mono_ms() >= deadline)
			return 0;
		/* Discard stdout: nobody reads it any more. */
		if (c->rbuf.len > 65536) {
			core_buf_reset(&c->rbuf);
			c->rstart = 0;
		}
		if (c->out_eof && c->err_eof) {
			struct timespec ts = { 0, nap_us * 1000 };
			nanosleep(&ts, NULL);
			nap_us = nap_us * 2 > 5000 ? 5000 : nap_us * 2;
		} else if (wait_once(c, slice(deadline), 0, NULL, &ignore)) {
			core_buf_reset(&c->rbuf);
			c->rstart = 0;
		}
	}
	return 1;
}

int coproc_close(struct coproc *c, int64_t grace_ms)
{
	if (!c)
		return 0;
	if (grace_ms < 0)
		grace_ms = COPROC_DEFAULT_GRACE_MS;
	spawn_close_fd(&c->in_fd);
	if (c->pid > 0 && !c->reaped && !wait_exit(c, grace_ms)) {
		spawn_signal(c->pid, SIGTERM);
		if (!wait_exit(c, grace_ms))
			coproc_kill(c);
	}
	return c->reaped && WIFEXITED(c->wstatus) && WEXITSTATUS(c->wstatus) == 0;
}

void coproc_kill(struct coproc *c)
{
	if (!c || c->pid <= 0 || c->reaped)
		return;
	int status;
	spawn_signal(c->pid, SIGKILL);
	spawn_reap(c->pid, &status);
	c->wstatus = status;
	c->reaped = 1;
	/* Keep what it said before dying. */
	if (!c->err_eof && c->err_fd >= 0)
		drain_err(c);
}

int coproc_exited(const struct coproc *c)
{
	return c->reaped;
}

const char *coproc_stderr(const struct coproc *c)
{
	return c->errbuf.p ? c->errbuf.p : "";
}

int coproc_inherited(const struct coproc *c)
{
	return c->pid > 0 && c->owner != getpid();
}

void coproc_free(struct coproc *c)
{
	if (!c)
		return;
	if (!coproc_inherited(c)) {
		coproc_close(c, -1);
		spawn_close_fd(&c->in_fd);
		spawn_close_fd(&c->out_fd);
		spawn_close_fd(&c->err_fd);
	}
	core_buf_release(&c->rbuf);
	core_buf_release(&c->errbuf);
	free(c->what);
	free(c);
}
