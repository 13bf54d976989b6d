/*
 * intake.h - agentkit's eager intake (runtime-semantics §2.1; docs/detach.md
 * "Eager intake"): stdin's AgentInput lines, read as they arrive and
 * queued for the turns of one agent-run invocation, and the front/back
 * split of the process that lets a reader outlive the caller's view of it.
 *
 * A reader thread fills the queue while turns run (the back process of a
 * split run), or the thread that runs the turns fills it on demand from
 * input that is all there (stdin at end of file, intake_all_there()).  The
 * reader stops at end of file, at the first line that is not a good input
 * (its error is handed to the turns after the lines before it), or after
 * a detach line: that line and every line already written behind it are
 * queued at once and `detach` turns true.
 *
 * One struct intake per process, used by the thread that runs the turns
 * (and its own reader thread).  Nothing here prints or exits.  The stop
 * signals (SIGINT, SIGTERM, SIGHUP) and their handlers are the caller's:
 * its handler sets the flag intake_take() is given, and the signals must
 * reach the thread that calls intake_take() (the reader thread blocks
 * them; no other thread may take them while it waits).
 *
 *   intake_stdin_wait()  how long -m waits for stdin (the flag, the variable)
 *   intake_read_stdin()  what stdin holds: NDJSON, text (read whole), nothing
 *   intake_init()        before anything else: intake_release() is safe
 *   intake_all_there()   read what stdin holds now, without waiting
 *   intake_split()       fork the back that runs the invocation (optional)
 *   intake_start()       the queue over stdin, with or without a reader
 *   intake_take()        the next input for a turn, a detach, or the end
 *   intake_hand_over()   every waiting input to a detached run's queue
 *   intake_release()     stop the reader, free what is queued
 */
#ifndef CORE_INTAKE_H
#define CORE_INTAKE_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "../base/buf.h"
#include "../base/json.h"
#include "../base/lines.h"
#include "../base/status.h"

struct detach_run;

#define INTAKE_MAX_INPUTS 1000                  /* inputs read ahead of the turns */
#define INTAKE_MAX_BYTES ((size_t)64 << 20)     /* ... and their text, at most */

struct intake_item {
	json_t *in;
	size_t len;             /* its line's length, for INTAKE_MAX_BYTES */
};

/* The fields are the intake's own; callers read only `on` and `threaded`. */
struct intake {
	int on;                 /* intake_start() succeeded in part: the inputs come from here */
	int threaded;           /* a reader thread fills it */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t room;    /* the reader waits for room */
	struct core_lines lr;   /* the reader's */
	struct intake_item *q;  /* q[head..n) wait for their turn */
	size_t head, n, cap, bytes;
	int done, quit;         /* the reader stopped; is told to stop */
	atomic_int detach;      /* a detach line was read: q holds it and the drain */
	struct core_err err;    /* why the reader stopped short (st CORE_OK: it did not) */
	int wake[2];            /* "the queue changed", to the turns */
	int stop[2];            /* "stop reading", to the reader thread */
	int own_fd;             /* lr.fd is the reader's own description of stdin */
	int restore_fl;         /* stdin's flags to put back, or -1 */
};

/* What stdin holds. */
enum intake_kind { INTAKE_NONE, INTAKE_NDJSON, INTAKE_TEXT };

/*
 * What fd 0 holds, in *kind: format (INTAKE_NDJSON or INTAKE_TEXT; 0: ask
 * the input), else NDJSON when its first non-blank byte is '{' and text
 * otherwise; only blanks (or /dev/null, a closed stdin) is INTAKE_NONE.
 * Text is read whole into in (at most max_record bytes, valid UTF-8); for
 * NDJSON in keeps the bytes read ahead, for the reader to go on after.
 * in is initialised here (its earlier contents, if any, are leaked: pass
 * an empty one).  *stop turning non-zero while a read waits (a stop
 * signal interrupts it) leaves INTAKE_NONE.
 * Errors: CORE_ESYS "cannot read <stdin>", CORE_ETOOBIG (text longer than
 * max_record), CORE_EINVAL (text not UTF-8), CORE_ENOMEM.
 */
enum core_status intake_read_stdin(int format, size_t max_record,
                                   const volatile sig_atomic_t *stop, struct core_buf *in,
                                   int *kind, struct core_err *e);

/*
 * Wait at most timeout_ms for stdin (fd 0) to have a byte, or its end:
 * how agent-run -m bounds a stdin that is open but silent (a CI runner's,
 * ssh's, a co-process's).  1 when it has (or poll cannot tell: the read
 * will), 0 when the time ran out - nothing was read, so what comes later
 * stays on stdin - or when *stop turned non-zero while it waited.
 */
int intake_stdin_ready(int64_t timeout_ms, const volatile sig_atomic_t *stop);

/*
 * How long agent-run -m waits for stdin (intake_stdin_ready()): flag
 * (--stdin-timeout) when not NULL, else $AGENTKIT_STDIN_TIMEOUT when set
 * and not empty, else 3s; 0 is allowed (stdin is never read).  *text is
 * the value used, for messages (flag, the variable's or a static).
 * Errors: CORE_EUSAGE "NAME: invalid duration ...", NAME the flag's or
 * the variable's.
 */
enum core_status intake_stdin_wait(const char *flag, const char **text, int64_t *ms,
                                   struct core_err *e);

void intake_init(struct intake *in);

/*
 * One stdin line as an AgentInput (rt_input_check()): *in is a new
 * reference, or NULL for a "null" line.  Errors: the JSON's (CORE_EINVAL,
 * naming <stdin>:lineno), or CORE_EINVAL with rt_input_check()'s message
 * and "(at <stdin>:LINENO)".  Any thread.
 */
enum core_status intake_parse_line(const char *line, size_t len, size_t lineno, json_t **in,
                                   struct core_err *e);

/*
 * Read what fd 0 already holds, without waiting, onto ahead (whose maximum
 * it raises to INTAKE_MAX_BYTES and one read): 1 when that reaches the end
 * of stdin (every input is there: no reader needs to outlive a turn), 0
 * when a writer may still send more (or more than INTAKE_MAX_BYTES is
 * there, or memory ran out).  A read error counts as the end: the reader
 * reports it.
 */
int intake_all_there(struct core_buf *ahead);

/*
 * Split the process (docs/detach.md "Eager intake"): the process the
 * caller started stays as the front, which only waits and forwards the
 * stop signals (SIGINT, SIGTERM, SIGHUP, those not ignored on entry) to
 * the back; the back runs the invocation.  The back is a grandchild in a
 * session of its own (never a session leader), re-parented to the front,
 * a child subreaper, so the front can wait for it; it has the caller's
 * stdin, stdout and stderr and no other descriptor of the caller's
 * (detach_close_others()), and gets SIGTERM when the front dies.  stdio is
 * flushed before the fork.  The front must have no other thread: it
 * takes the stop signals through a signalfd, with them blocked, and puts
 * its signal mask back before it returns.
 *
 * Returns 1 in the back (*front_fd: the pipe to the front, the caller's to
 * close; intake_detached() writes to it), 0 in the front (*front_exit: the
 * back's exit status, 0 when it detached; *front_sig: the signal that
 * ended the back, 0 if none, for the caller to end itself with), -1 when
 * the split failed before anything started (the run goes on unsplit).
 */
int intake_split(int *front_fd, int *front_exit, int *front_sig);

/* The back of a split run has detached: let the front exit 0 and close
 * *front_fd (set to -1).  A front that is gone has nothing to wait for. */
void intake_detached(int *front_fd);

/*
 * Start the intake over stdin, after the bytes in ahead (copied; they may
 * be many records: the record limit is max_record, not the buffer's).
 * threaded: with a reader thread, which blocks the stop signals (they are
 * the calling thread's); the reader reads its own non-blocking
 * description of stdin, never fd 0 (a stop signal may put /dev/null
 * there).  Errors: CORE_ENOMEM, CORE_ESYS (e->sys: why) with "cannot start
 * reading <stdin>".  On failure in->on may be 1: release it as always.
 */
enum core_status intake_start(struct intake *in, const struct core_buf *ahead,
                              size_t max_record, int threaded, struct core_err *e);

/* What intake_take() found. */
enum intake_next {
	INTAKE_INPUT,           /* *next: the input for the next turn (new reference) */
	INTAKE_DETACH,          /* a detach line: the queue holds it and the drain */
	INTAKE_END,             /* no more: *err the reader's error (st CORE_OK: none) */
};

/*
 * The next input, waiting for the reader (or, without a reader thread,
 * reading on demand) until there is one, a detach, the end, or *stop is
 * non-zero (a stop signal: INTAKE_END).  With a reader thread the stop
 * signals are held from the check of *stop until the wait sleeps (they
 * are let in only then, by ppoll()), so a signal's handler need not wake
 * the wait: its EINTR does.
 */
enum intake_next intake_take(struct intake *in, const volatile sig_atomic_t *stop,
                             json_t **next, struct core_err *err);

/* Whether intake_take() would wait now: a reader thread, nothing queued,
 * no end and no detach yet.  (Without a reader the input is all there.) */
int intake_idle(struct intake *in);

/* Whether a detach line has been read (any thread, no lock). */
int intake_detach_read(struct intake *in);

/*
 * Stop the reader (it lets go of its descriptor: a worker holds nothing of
 * its caller's), then move every waiting input to d's queue
 * (detach_queue_add()) and the reader's error to d->tail.  The inputs are
 * let go of either way.  Errors: the queue's (CORE_ENOMEM, a full queue),
 * in e; d->tail is then unchanged.
 */
enum core_status intake_hand_over(struct intake *in, struct detach_run *d, struct core_err *e);

/* Stop the reader thread (waiting for stdin or for room) and let go of its
 * descriptor, putting back stdin's flags; the queue stays. */
void intake_stop(struct intake *in);

void intake_release(struct intake *in);

#endif
