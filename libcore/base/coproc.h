/*
 * coproc.h - a long-lived co-process spoken to in NDJSON over pipes.
 *
 * Custom agents (--exec) and state/stream transforms are commands that stay
 * up for the whole invocation: agentkit writes a line to the command's
 * stdin and reads lines from its stdout, with a timeout on every wait.
 *
 * The command is a string run with /bin/sh -c (as cron and git run their
 * command strings), in its own process group, with the caller's environment
 * minus the provider keys (spawn_provider_key(): every key variable of
 * registry.c's providers) plus the variables the caller adds, and no descriptor
 * of ours but the three pipes (everything above 2 is closed in the child).
 * Its stderr is captured (the first COPROC_STDERR_MAX bytes are kept, the
 * rest drained; or the last ones, struct coproc_limits) for error
 * messages.  coproc_start_argv() runs a command given as an argv, without
 * a shell (MCP servers).
 *
 * Failures are named, never guessed: the command exited (with its status),
 * closed its stdout, wrote a line longer than the limit or more than its
 * budget (struct coproc_limits), or did not answer within the timeout.
 * coproc_close() ends the process and always reaps it: close its stdin,
 * wait up to the grace period, SIGTERM the group, wait the grace again,
 * SIGKILL.  No zombies are left behind.
 *
 * When the command has exited but a process it started still holds its
 * stdout or stdin (`sleep 100 &` in a script), the pipes are given
 * COPROC_PIPE_GRACE_MS more; then the rest of its process group is killed
 * and stdout counts as closed: a wait ends with how the command exited,
 * not with the timeout.
 *
 * The caller must ignore SIGPIPE (cmd/cli.c does): a write to a command
 * that is gone fails with EPIPE, reported as "closed its stdin".
 *
 * Ownership: struct coproc owns its descriptors, buffers and the child;
 * coproc_free() closes (as coproc_close) and frees.  Nothing here prints
 * or exits.
 */
#ifndef CORE_COPROC_H
#define CORE_COPROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "buf.h"
#include "status.h"

#define COPROC_STDERR_MAX 2048
#define COPROC_DEFAULT_GRACE_MS 1000
#define COPROC_DEFAULT_MAX_LINE ((size_t)64 << 20)
/* How long the pipes may stay open after the command itself has exited. */
#define COPROC_PIPE_GRACE_MS 200

/*
 * What the command may write on stdout.  bytes and lines cap what
 * coproc_read_line() takes (blank lines and newlines included) between two
 * coproc_budget() calls: one turn of a custom agent, one answer of a
 * transform.  bytes also allows CORE_VALUE_LIMIT(bytes) JSON values
 * (lines.h: core_json_values), counted before a line is handed out.  The
 * knobs are the settings that raise each limit, named in the failure's
 * message; the strings must outlive the coproc (literals).
 */
struct coproc_limits {
	size_t line;            /* longest line; 0: COPROC_DEFAULT_MAX_LINE */
	size_t bytes, lines;    /* 0: no cap */
	const char *line_knob, *bytes_knob, *lines_knob;   /* or NULL */
	int stderr_tail;        /* keep the last COPROC_STDERR_MAX bytes of
	                           stderr instead of the first */
	/* Given each piece of stderr as it is read (it is kept all the same),
	 * or NULL; stderr_ctx is its first argument. */
	void (*on_stderr)(void *stderr_ctx, const char *p, size_t n);
	void *stderr_ctx;
};

struct coproc {
	pid_t pid;              /* 0 once reaped */
	pid_t owner;            /* the process that started it */
	int in_fd, out_fd, err_fd;
	char *what;             /* "state transform 'jq ...'" for messages */
	struct coproc_limits lim;
	size_t max_line;        /* longest line accepted from the command */
	size_t lineno;          /* lines read so far */
	size_t used_bytes, used_lines, used_values;  /* taken since the last coproc_budget() */
	const char *scope;      /* "in one turn", for messages; borrowed */
	int64_t exited_at;      /* when the command was seen ended (0: not yet) */
	struct core_buf rbuf;   /* stdout read-ahead */
	size_t rstart;          /* first unconsumed byte of rbuf */
	struct core_buf errbuf; /* the head (or tail) of stderr */
	int err_dropped;        /* stderr had more than errbuf keeps */
	int out_eof, err_eof;
	int wstatus;            /* waitpid status once reaped */
	int reaped;
};

/* Cancellation: polled at least every 50 ms while waiting; non-zero stops
 * the wait with CORE_ECANCELLED.  fn may be NULL. */
struct coproc_cancel {
	int (*fn)(void *ctx);
	void *ctx;
};

/*
 * Start cmd with /bin/sh -c.  what names it in messages (copied).  env_add
 * is a NULL-terminated list of "NAME=VALUE" strings added to (or replacing
 * in) the environment; may be NULL.  lim (copied; NULL: a 64 MiB line, no
 * budget) caps what it may write.
 * Errors: CORE_ESYS (pipe, fork), CORE_ENOMEM.  A command that cannot be
 * executed shows up later as an exit (127) with sh's message on stderr.
 */
enum core_status coproc_start(const char *cmd, const char *what,
                              const char *const *env_add, const struct coproc_limits *lim,
                              struct coproc **out, struct core_err *e);

/*
 * Start argv without a shell (argv[0] with a '/' as is, else on PATH), in
 * directory cwd (NULL: ours); otherwise as coproc_start().  A command
 * that cannot be executed, or a cwd it cannot enter, shows up later as an
 * exit (127 or 126) with the reason on its stderr.
 */
enum core_status coproc_start_argv(char *const argv[], const char *cwd, const char *what,
                                   const char *const *env_add,
                                   const struct coproc_limits *lim, struct coproc **out,
                                   struct core_err *e);

/* Start counting the budget's bytes and lines afresh; scope ("in one
 * turn", borrowed, may be NULL) says in messages what they counted over. */
void coproc_budget(struct coproc *c, const char *scope);

/*
 * Write p[0..n) and a newline to the command's stdin, waiting at most
 * timeout_ms (< 0: forever) for room.  While waiting, stdout is read ahead
 * and stderr drained, so a command that writes while it reads cannot
 * deadlock us.  The descriptor is non-blocking: a command that stops
 * reading never blocks us past timeout_ms, and the wait sleeps in poll()
 * (at most 50 ms between cancellation checks), never spins.  Errors
 * (messages name the command and, when it has ended, its exit and stderr):
 * CORE_EINTERNAL (it closed its stdin or exited), CORE_EDEADLINE ("did not
 * read its input within N ms"), CORE_ECANCELLED, CORE_ETOOBIG (read-ahead
 * over the line limit: "wrote more than N bytes without reading its
 * input"), CORE_ESYS.  On any error part of the line may have been
 * written: the stream is then no longer whole.
 */
enum core_status coproc_write_line(struct coproc *c, const char *p, size_t n,
                                   int64_t timeout_ms,
                                   const struct coproc_cancel *cancel,
                                   struct core_err *e);

/* jv_dump(v) as one line, then coproc_write_line(). */
enum core_status coproc_write_json(struct coproc *c, const json_t *v,
                                   int64_t timeout_ms,
                                   const struct coproc_cancel *cancel,
                                   struct core_err *e);

/*
 * Read the next non-blank line from stdout, waiting at most timeout_ms
 * (< 0: forever).  *line points into c (valid until the next call; NUL
 * terminated, newline and a trailing '\r' removed).  Errors:
 * CORE_EINTERNAL "closed its output" (EOF before a line: the message says
 * how it exited if it did), CORE_ETOOBIG (a line over the limit, or more
 * than the budget: "wrote more than N lines on stdout in one turn (the
 * limit; set KNOB to raise it)"), CORE_EDEADLINE, CORE_ECANCELLED,
 * CORE_ESYS.
 */
enum core_status coproc_read_line(struct coproc *c, int64_t timeout_ms,
                                  const struct coproc_cancel *cancel,
                                  char **line, size_t *len, struct core_err *e);

/*
 * Read one line and parse it as JSON (*v a new reference).  A line that is
 * not JSON is CORE_EINTERNAL "wrote malformed output: ..." naming the line;
 * other errors as coproc_read_line().
 */
enum core_status coproc_read_json(struct coproc *c, int64_t timeout_ms,
                                  const struct coproc_cancel *cancel,
                                  json_t **v, struct core_err *e);

/*
 * End the command: close its stdin, wait up to grace_ms (< 0: the default)
 * for it to exit on its own, then SIGTERM its process group, wait grace_ms
 * again, then SIGKILL, and reap it.  Returns 1 when it exited on its own
 * with status 0, else 0.  Idempotent.
 */
int coproc_close(struct coproc *c, int64_t grace_ms);

/* Kill the process group at once (SIGKILL) and reap. */
void coproc_kill(struct coproc *c);

/* Non-zero once the command has been reaped (coproc_close, coproc_kill, or
 * seen exiting while waiting). */
int coproc_exited(const struct coproc *c);

/*
 * Append to out how the command ended and what it said: "exited with
 * status 3", "was killed by signal 9", or "is still running", followed by
 * ": <stderr head>" (or "...<tail>") when it wrote to stderr.
 */
void coproc_describe(struct coproc *c, struct core_buf *out);

/* The captured head of stderr (never NULL; may be ""). */
const char *coproc_stderr(const struct coproc *c);

/*
 * Non-zero in a forked child of the process that started the command (a
 * detached worker): the command is not ours to talk to or wait for.
 * coproc_free() then only frees the memory: the pipes' descriptors are the
 * owner's, closed in the worker with every other inherited one
 * (detach_fork()), and their numbers may be the worker's own by now (its
 * store), so they are not closed again.
 */
int coproc_inherited(const struct coproc *c);

void coproc_free(struct coproc *c);     /* NULL is a no-op */

#endif
