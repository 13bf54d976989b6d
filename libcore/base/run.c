/* run.c - children run to completion over pipes, several at once; see run.h. */
#include "run.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn.h"
#include "util.h"

extern char **environ;

/* Does add set the variable of entry (both "NAME=...")? */
static int sets(const char *const *add, const char *entry)
{
	size_t len = strcspn(entry, "=");
	for (; add && *add; add++)
		if (strcspn(*add, "=") == len && !strncmp(*add, entry, len))
			return 1;
	return 0;
}

char **run_env(const char *const *allow, const char *const *add)
{
	size_t n = 0, k = 0;
	for (char **p = environ; p && *p; p++)
		n++;
	for (const char *const *a = add; a && *a; a++)
		n++;
	char **env = calloc(n + 1, sizeof *env);
	if (!env)
		return NULL;
	for (char **p = environ; p && *p; p++) {
		if (spawn_provider_key(*p) && !spawn_env_listed(allow, *p))
			continue;
		if (!sets(add, *p))
			env[k++] = *p;
	}
	for (const char *const *a = add; a && *a; a++)
		env[k++] = (char *)*a;
	return env;
}

enum core_status run_start(struct run_child *c, struct core_err *e)
{
	struct spawn sp;
	c->exited = c->exited_ok = c->timed_out = c->idled = c->cancelled = c->killed = 0;
	c->code = c->signal = 0;
	c->in_off = 0;
	c->exited_at = c->kill_at = c->eof_at = 0;
	c->quiet = 0;
	c->done = 1;
	c->pid = -1;
	c->in_fd = c->out_fd = c->err_fd = -1;
	if (spawn_start(c->argv, c->env, c->what, &sp, e))
		return e->st;
	c->done = 0;
	c->pid = sp.pid;
	c->in_fd = sp.in_fd;
	c->out_fd = sp.out_fd;
	c->err_fd = sp.err_fd;
	if (!c->in)
		spawn_close_fd(&c->in_fd);
	c->active_at = core_now_mono_ms();
	c->deadline = c->timeout_ms ? c->active_at + c->timeout_ms : INT64_MAX;
	return CORE_OK;
}

void run_kill(struct run_child *c)
{
	if (!c->killed)
		spawn_signal(c->pid, SIGKILL);
	c->killed = c->quiet = 1;
}

/* Is stdout still the caller's to see?  Not once it gave up on the child,
 * the deadline passed or it cancelled (a cut after the exit is heard). */
static int heard(const struct run_child *c)
{
	return c->on_out && !c->quiet && !c->cancelled;
}

/* Keep up to keep bytes of p[0..n) in b (NULL: none). */
static void keep_head(struct core_buf *b, size_t keep, const char *p, size_t n)
{
	if (b && b->len < keep)
		core_buf_add(b, p, n > keep - b->len ? keep - b->len : n);
}

/* Read what is there on *fd (stdout when is_out); returns 1 at end of
 * file or on error (*fd is then closed, stdout's end told), -1 when
 * nothing was there, 0 after a read. */
static int pump(struct run_child *c, int *fd, int is_out)
{
	char tmp[65536];
	ssize_t r = read(*fd, tmp, sizeof tmp);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return -1;
	if (r <= 0) {
		spawn_close_fd(fd);
		if (is_out && heard(c))
			c->on_out(c, NULL, 0);
		return 1;
	}
	if (is_out && c->idle_ms)
		c->active_at = core_now_mono_ms();
	if (!is_out)
		keep_head(c->err, c->err_keep, tmp, (size_t)r);
	else if (heard(c))
		c->on_out(c, tmp, (size_t)r);
	else if (!c->on_out)
		keep_head(c->out, c->out_keep, tmp, (size_t)r);
	return 0;
}

/*
 * Has the child itself ended?  Seen with WNOWAIT: the zombie keeps its pid,
 * which is its process group's ID, from being reused until we reap it, so
 * kill(-pid) can never reach a stranger's group.
 */
static void note_exit(struct run_child *c, int64_t now)
{
	siginfo_t si;
	if (c->exited || c->pid <= 0)
		return;
	memset(&si, 0, sizeof si);
	if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
		if (errno != ECHILD)
			return;
		/* Reaped behind our back (SIGCHLD ignored): its pid is no
		 * longer ours to signal. */
		c->pid = 0;
		si.si_code = CLD_EXITED;
	} else if (si.si_pid == 0) {
		return;
	}
	c->exited = 1;
	c->exited_ok = si.si_code == CLD_EXITED && si.si_status == 0;
	c->exited_at = now;
}

/*
 * The child has exited but something it started still holds its stdout or
 * stderr: once the grace is over, and unless the caller waits on, kill the
 * group, take what is already in the pipes and close them.
 */
static void cut_pipes(struct run_child *c, int64_t now)
{
	if (!c->exited || (c->out_fd < 0 && c->err_fd < 0) || now - c->exited_at < RUN_PIPE_GRACE_MS)
		return;
	if (!c->killed && c->hold_pipes && c->hold_pipes(c))
		return;
	if (c->pid > 0)
		kill(-c->pid, SIGKILL);
	c->killed = 1;
	/* A writer that left the group could go on for ever. */
	for (int i = 0; i < RUN_CUT_READS && c->out_fd >= 0 && pump(c, &c->out_fd, 1) == 0; i++)
		;
	for (int i = 0; i < RUN_CUT_READS && c->err_fd >= 0 && pump(c, &c->err_fd, 0) == 0; i++)
		;
	if (c->out_fd >= 0 && heard(c))
		c->on_out(c, NULL, 0);
	spawn_close_fd(&c->out_fd);
	spawn_close_fd(&c->err_fd);
}

/* Whatever it left running goes with it; then reap it (the one mapping
 * of its wait status). */
static void reap(struct run_child *c)
{
	int status;
	if (spawn_reap(c->pid, &status) > 0)
		run_status(status, &c->code, &c->signal);
	c->exited = 1;
	c->done = 1;
	c->pid = -1;
	spawn_close_fd(&c->in_fd);
	spawn_close_fd(&c->out_fd);
	spawn_close_fd(&c->err_fd);
}

/* Ask the group to end, and force it grace later (0: at once). */
static void end_group(struct run_child *c, int64_t now, int64_t grace)
{
	if (c->killed)
		return;
	if (!c->kill_at) {
		c->kill_at = now + grace;
		if (grace > 0) {
			spawn_signal(c->pid, SIGTERM);
			return;
		}
	}
	if (now >= c->kill_at)
		run_kill(c);
}

/* The caller cancelled: its own grace, whatever an end had begun. */
static void cancel(struct run_child *c, int64_t now)
{
	if (!c->cancelled) {
		c->cancelled = 1;
		c->kill_at = 0;
	}
	end_group(c, now, c->cancel_grace_ms);
}

/* Write what stdin still has room for; close it when all is written or
 * the child stopped reading (EPIPE: its business). */
static void write_stdin(struct run_child *c)
{
	size_t left = c->in_len - c->in_off;
	ssize_t w = left ? write(c->in_fd, c->in + c->in_off, left) : 0;
	if (w > 0)
		c->in_off += (size_t)w;
	if ((w < 0 && errno != EAGAIN && errno != EINTR) || c->in_off == c->in_len) {
		spawn_close_fd(&c->in_fd);
		c->active_at = core_now_mono_ms();
	}
}

/* The caller's cancel, the deadline, idle_ms, eof_grace_ms: what ends c
 * before it ends on its own. */
static void bounds(struct run_child *c, int stop, int64_t now)
{
	if (stop)
		cancel(c, now);
	if (c->killed || c->cancelled)
		return;
	if (now >= c->deadline) {
		/* 2: it had exited, something it started held a pipe */
		c->timed_out = c->exited ? 2 : 1;
		run_kill(c);
	} else if (c->idle_ms && (c->out_fd >= 0 || !c->eof_grace_ms)
	           && now - c->active_at >= c->idle_ms) {
		c->idled = c->in_fd >= 0 ? 2 : 1;
		run_kill(c);
	} else if (c->eof_grace_ms && c->out_fd < 0 && !c->exited) {
		if (!c->eof_at)
			c->eof_at = now;
		if (now - c->eof_at >= c->eof_grace_ms)
			end_group(c, now, c->eof_grace_ms);
	}
}

/* Shorten *wait_ms to at - now (at 0 or past: no change, or 0). */
static void soonest(int64_t at, int64_t now, int64_t *wait_ms)
{
	if (at && at - now < *wait_ms)
		*wait_ms = at - now > 0 ? at - now : 0;
}

/* One child's look before the poll: its deadline, exit, pipes; its
 * descriptors into pfd (*k counts them).  Returns 0 once it is done, else
 * shortens *wait_ms to its next event. */
static int look(struct run_child *c, int stop, int64_t now, struct pollfd *pfd, size_t *k,
                int64_t *wait_ms)
{
	bounds(c, stop, now);
	note_exit(c, now);
	cut_pipes(c, now);
	if (c->in_fd >= 0 && c->killed)
		spawn_close_fd(&c->in_fd);
	if (c->in_fd >= 0)
		pfd[(*k)++] = (struct pollfd){ .fd = c->in_fd, .events = POLLOUT };
	if (c->out_fd >= 0)
		pfd[(*k)++] = (struct pollfd){ .fd = c->out_fd, .events = POLLIN };
	if (c->err_fd >= 0)
		pfd[(*k)++] = (struct pollfd){ .fd = c->err_fd, .events = POLLIN };
	if (c->out_fd < 0 && c->err_fd < 0) {
		if (c->exited) {
			reap(c);
			if (c->on_done)
				c->on_done(c);
			return 0;
		}
		*wait_ms = 5;
	}
	if (!c->killed && !c->cancelled) {
		soonest(c->deadline, now, wait_ms);
		if (c->idle_ms && (c->out_fd >= 0 || !c->eof_grace_ms))
			soonest(c->active_at + c->idle_ms, now, wait_ms);
	}
	if (!c->killed)
		soonest(c->kill_at, now, wait_ms);
	if (c->exited && now - c->exited_at < RUN_PIPE_GRACE_MS)
		soonest(c->exited_at + RUN_PIPE_GRACE_MS, now, wait_ms);
	return 1;
}

enum core_status run_wait_all(struct run_child *const *children, size_t n,
                              int (*cancelled)(void *ctx), void *ctx, struct core_err *e)
{
	struct pollfd *pfd = calloc(3 * n + 1, sizeof *pfd);
	enum core_status st = CORE_OK;
	if (!pfd)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	for (;;) {
		size_t k = 0, live = 0;
		int stop = cancelled && cancelled(ctx);
		int64_t wait_ms = cancelled ? RUN_CANCEL_POLL_MS : RUN_POLL_MS;
		int64_t now = core_now_mono_ms();
		for (size_t i = 0; i < n; i++)
			if (!children[i]->done)
				live += look(children[i], stop, now, pfd, &k, &wait_ms);
		if (!live)
			break;
		if (poll(k ? pfd : NULL, k, (int)wait_ms) < 0 && errno != EINTR && !st) {
			st = core_fail_sys(e, "poll");
			for (size_t i = 0; i < n; i++)
				run_kill(children[i]);
			/* Reaped on the next rounds. */
		}
		for (size_t i = 0; i < n; i++) {
			struct run_child *c = children[i];
			if (c->done)
				continue;
			if (c->in_fd >= 0)
				write_stdin(c);
			if (c->out_fd >= 0)
				pump(c, &c->out_fd, 1);
			if (c->err_fd >= 0)
				pump(c, &c->err_fd, 0);
		}
	}
	free(pfd);
	return st;
}

enum core_status run_child(struct run_child *c, int (*cancelled)(void *ctx), void *ctx,
                           struct core_err *e)
{
	enum core_status st = run_start(c, e);
	return st ? st : run_wait_all(&c, 1, cancelled, ctx, e);
}

void run_child_release(struct run_child *c)
{
	if (c->done)
		return;
	reap(c);
}

void run_status(int wstatus, int *code, int *sig)
{
	*code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
	*sig = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
}

void run_describe_end(struct core_buf *out, int code, int sig)
{
	if (sig > 0)
		core_buf_addf(out, "was killed by signal %d (%s)", sig, strsignal(sig));
	else if (code >= 0)
		core_buf_addf(out, "exited with status %d", code);
	else
		core_buf_adds(out, "ended");
}

void run_describe_said(struct core_buf *out, const char *s, size_t n, const char *before,
                       const char *after)
{
	while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
		n--;
	if (!n)
		return;
	core_buf_adds(out, ": ");
	core_buf_adds(out, before);
	for (size_t i = 0; i < n; i++)
		core_buf_addc(out, s[i] == '\n' ? ' ' : s[i]);
	core_buf_adds(out, after);
}

enum core_status run_over_budget(struct core_err *e, const char *what, size_t limit,
                                 const char *unit, const char *scope, const char *knob)
{
	const char *sp = scope && *scope ? " " : "";
	if (knob)
		return core_fail(e, CORE_ETOOBIG, "%s wrote more than %zu %s on stdout%s%s (the limit; "
		                 "set %s to raise it)", what, limit, unit, sp, scope ? scope : "", knob);
	return core_fail(e, CORE_ETOOBIG, "%s wrote more than %zu %s on stdout%s%s (the limit)", what,
	                 limit, unit, sp, scope ? scope : "");
}

enum core_status run_line_too_long(struct core_err *e, const char *what, size_t max,
                                   const char *knob)
{
	if (knob)
		return core_fail(e, CORE_ETOOBIG, "%s wrote a line longer than %zu bytes (the limit; "
		                 "set %s to raise it)", what, max, knob);
	return core_fail(e, CORE_ETOOBIG, "%s wrote a line longer than %zu bytes", what, max);
}
