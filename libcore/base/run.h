/*
 * run.h - run a child to completion: how agentkit runs tools, credential
 * commands and the docs command (modelled on git's run-command.c).
 * Co-processes that hold a protocol for the whole invocation (MCP stdio
 * servers, custom-agent handlers, transforms) are coproc.c's, which takes
 * its rules from here and spawn.h: the environment (run_env()), the group
 * killed and the child reaped (spawn_signal(), spawn_reap()), how a child
 * ended in words (run_status(), run_describe_end(), run_describe_said())
 * and what a child that wrote too much is told (run_over_budget(),
 * run_line_too_long()).
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
 *   - it writes nothing on stdout for idle_ms: its group is killed (idled
 *     set);
 *   - its stdout has closed but it runs on: eof_grace_ms later SIGTERM to
 *     its group, SIGKILL eof_grace_ms after that (as coproc_close());
 *   - on_out() ends it (a budget: run_kill() from the callback);
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
	/* No stdout for this long ends it (0: no limit).  Its clock starts at
	 * run_start(), again when stdin is all written (or refused), and
	 * again at each read of stdout; with eof_grace_ms it stops when
	 * stdout closes. */
	int64_t idle_ms;
	int64_t eof_grace_ms;   /* see above; 0: the deadline alone */
	int64_t cancel_grace_ms;
	struct core_buf *out, *err;     /* the caller's (NULL: dropped) ... */
	size_t out_keep, err_keep;      /* ... which keep this many bytes */
	/* Each piece of stdout as it is read, then once (NULL, 0) at its end
	 * (end of file, or its pipe cut); not called after run_kill() or a
	 * cancel.  NULL: stdout goes into out.  It may call run_kill(c): a
	 * budget it holds the child to (the reason is the caller's to keep). */
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
	int idled;              /* idle_ms passed: 1; 2 while its stdin was
	                           still being written (it did not read it) */
	int cancelled, killed;  /* the caller cancelled; its group was killed */
	int code, signal;       /* its exit status (-1 when killed), or the signal
	                           that killed it (0: none); 0, 0 when it was
	                           reaped behind our back (SIGCHLD ignored) */

	/* Private to run.c. */
	pid_t pid;
	int in_fd, out_fd, err_fd;
	size_t in_off;
	int64_t deadline, exited_at, kill_at, active_at, eof_at;
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

/* A wait status as a run_child's code and signal: the exit status and 0,
 * or -1 and the signal that killed it. */
void run_status(int wstatus, int *code, int *sig);

/*
 * Append to out how a child ended, in coproc_describe()'s words (the docs
 * command, handlers, transforms, MCP servers): "exited with status CODE",
 * "was killed by signal SIG (Name)" (sig > 0), or "ended" (code < 0 and
 * sig 0: neither).  code and sig as a run_child's Out fields.  (Tools and
 * credential commands keep their own, shorter wording.)
 */
void run_describe_end(struct core_buf *out, int code, int sig);

/*
 * Then what it said: ": " and s[0..n) (its stderr kept) on one line,
 * newlines as spaces and trailing blanks dropped, between before and
 * after ("..." where some of it was dropped, else ""); nothing when it
 * said nothing.
 */
void run_describe_said(struct core_buf *out, const char *s, size_t n, const char *before,
                       const char *after);

/*
 * The failures of a child that wrote more than its bounds allow, named
 * WHAT in the message: CORE_ETOOBIG "WHAT wrote more than LIMIT UNIT on
 * stdout[ SCOPE] (the limit[; set KNOB to raise it])" (scope, knob may be
 * NULL), and "WHAT wrote a line longer than MAX bytes[ (the limit; set
 * KNOB to raise it)]".
 */
enum core_status run_over_budget(struct core_err *e, const char *what, size_t limit,
                                 const char *unit, const char *scope, const char *knob);
enum core_status run_line_too_long(struct core_err *e, const char *what, size_t max,
                                   const char *knob);

/* Give up on c: SIGKILL to its group (once).  It is still reaped by
 * run_wait_all(). */
void run_kill(struct run_child *c);

/* Kill and reap c if it still runs and close its pipes (out and err stay
 * the caller's).  A done child has nothing left to release. */
void run_child_release(struct run_child *c);

#endif
