/*
 * run.h - run a child to completion: how agentkit runs tools and
 * credential commands (modelled on git's run-command.c).  The docs
 * command still runs on coproc.c, whose messages and per-wait timeouts it
 * keeps (what both need is shared: spawn_exec_script() in spawn.h, and
 * run_describe_end() below); co-processes that hold a protocol (MCP
 * servers, handlers, transforms) are coproc.c's.
 *
 * A child is an argv run without a shell (spawn.h: its own process group,
 * default signals, descriptors 0-2 only) with an environment built by
 * run_env(): ours minus every key of the program's key policy
 * (spawn_provider_key()) unless allowed, plus the caller's entries.  It is
 * given its stdin, its stdout and stderr are read as they come, and it
 * ends in exactly one of these ways:
 *
 *   - it exits and its pipes close: it is reaped;
 *   - it exits but a process it started still holds its stdout or stderr:
 *     RUN_PIPE_GRACE_MS later its group is killed, what the pipes already
 *     hold is read (bounded: RUN_CUT_READS reads of each) and they are
 *     closed, unless hold_pipes() says to wait on (then the deadline ends
 *     it);
 *   - the deadline passes: its group is killed (timed_out set);
 *   - the caller cancels: SIGTERM to its group, SIGKILL cancel_grace_ms
 *     later (0: SIGKILL at once) (cancelled set);
 *   - the caller gives up on it, run_kill(): SIGKILL to its group at once.
 *
 * Whatever is left of its process group is killed before it is reaped (the
 * unreaped zombie keeps the group's ID ours, so kill(-pid) never reaches a
 * stranger's group).  No zombie is left behind.
 *
 * Bounds: stdin is written as the child reads it (never blocking us);
 * stdout goes to on_out() as it is read, or, without on_out, into out, of
 * which the first out_keep bytes are kept and the rest is read and
 * dropped; stderr likewise into err, err_keep bytes.  So a child that
 * writes without end costs at most those bytes, and the deadline ends it.
 * Neither is made valid text: that is the caller's (core_buf_fix_text()).
 *
 * The caller must ignore SIGPIPE (cmd/cli.c does): a child that does not
 * read its stdin is its own business.  Nothing here prints or exits.
 */
#ifndef CORE_RUN_H
#define CORE_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "status.h"

/* How long the pipes may stay open after the child itself has exited. */
#define RUN_PIPE_GRACE_MS 200
/* Reads of each pipe (64 KiB each) taken when they are cut: what a pipe
 * can hold (64 KiB by default, 1 MiB at most). */
#define RUN_CUT_READS 16
/* Longest sleep between two looks at the caller's cancel and the child's
 * exit while it holds its pipes open. */
#define RUN_POLL_MS 50
/* ... and while the caller may cancel. */
#define RUN_CANCEL_POLL_MS 20

struct run_child {
	/* In: set before run_start(); borrowed.  argv, env and what are needed
	 * through run_start() only, the rest through the run. */
	char *const *argv;
	char *const *env;       /* from run_env() */
	const char *what;       /* names the child in run_start()'s errors */
	const char *in;         /* stdin, written then closed; NULL: closed at once */
	size_t in_len;
	int64_t timeout_ms;     /* the deadline, from run_start(); 0: none */
	int64_t cancel_grace_ms;
	struct core_buf *out, *err;     /* the caller's (NULL: dropped) ... */
	size_t out_keep, err_keep;      /* ... which keep this many bytes */
	/* Each piece of stdout as it is read, then once (NULL, 0) at its end
	 * (end of file, or its pipe cut); not called after run_kill() or a
	 * cancel.  NULL: stdout goes into out. */
	void (*on_out)(struct run_child *c, const char *p, size_t n);
	/* The child has exited but its pipes are still open after the grace:
	 * non-zero waits on (until the deadline).  NULL: never. */
	int (*hold_pipes)(struct run_child *c);
	/* Once, when it has been reaped (the Out fields set).  May be NULL. */
	void (*on_done)(struct run_child *c);
	void *ctx;              /* the callbacks' */

	/* Out: valid after run_wait_all(). */
	int exited;             /* the child itself has ended (seen or reaped) */
	int exited_ok;          /* ... with status 0 */
	int timed_out;          /* the deadline passed; 2: it had exited already
	                           and a process it started held its pipes */
	int cancelled, killed;  /* the caller cancelled; its group was killed */
	int code, signal;       /* its exit status (-1 when killed), or the signal
	                           that killed it (0: none); 0, 0 when it was
	                           reaped behind our back (SIGCHLD ignored) */

	/* Private to run.c. */
	pid_t pid;
	int in_fd, out_fd, err_fd;
	size_t in_off;
	int64_t deadline, exited_at, kill_at;
	int done, quiet;
};

/*
 * The environment for a child: ours minus the keys of the policy
 * (spawn_provider_key()) not named in allow, minus the names set in add,
 * plus add's "NAME=VALUE" entries (allow and add NULL-terminated, or NULL).
 * The array is new (free() it), its strings borrowed: ours and add's must
 * live through the run.  NULL when out of memory.
 */
char **run_env(const char *const *allow, const char *const *add);

/*
 * Start c (its In fields set; the rest is initialised here).  CORE_ESYS
 * (pipe, fork: "cannot start WHAT: fork: ...") or CORE_EINTERNAL (no key
 * policy) with nothing left running; the child is then done and
 * run_child_release() may be called as after a run.
 */
enum core_status run_start(struct run_child *c, struct core_err *e);

/*
 * Feed and read children[0..n) (started with run_start()) until every one
 * is done, killing each at its deadline; cancelled(ctx), polled every
 * RUN_CANCEL_POLL_MS at most (NULL: never), cancels them all.  Returns
 * CORE_OK, or CORE_ESYS "poll: why" (e filled at once, before the
 * children are killed, reaped and given to on_done() all the same).
 * Children that are done are skipped, so it may be called again.
 */
enum core_status run_wait_all(struct run_child *const *children, size_t n,
                              int (*cancelled)(void *ctx), void *ctx, struct core_err *e);

/* Start c and wait for it alone (run_start(), run_wait_all()). */
enum core_status run_child(struct run_child *c, int (*cancelled)(void *ctx), void *ctx,
                           struct core_err *e);

/*
 * Append to out how a child ended, in coproc_describe()'s words (the docs
 * command, handlers, transforms, MCP servers): "exited with status CODE",
 * "was killed by signal SIG (Name)" (sig > 0), or "ended" (code < 0 and
 * sig 0: neither).  code and sig as a run_child's Out fields.  (Tools and
 * credential commands keep their own, shorter wording.)
 */
void run_describe_end(struct core_buf *out, int code, int sig);

/* Give up on c: SIGKILL to its group (once).  It is still reaped by
 * run_wait_all(). */
void run_kill(struct run_child *c);

/* Kill and reap c if it still runs and close its pipes (out and err stay
 * the caller's).  A done child has nothing left to release. */
void run_child_release(struct run_child *c);

#endif
