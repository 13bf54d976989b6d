/*
 * feed.h - agentkit's inputs fed to the turns of one agent-run invocation
 * (runtime-semantics §2.1, §2.2; docs/agent-run.md, docs/detach.md): each
 * -m TEXT (and text piped on stdin) as a user message, stdin's AgentInput
 * lines read between turns, or the eager intake's queue (intake.h); and
 * the detach that a "detach" input, or --detach, asks for.
 *
 * How the inputs went is the runtime's (rt_output(), rt_exit_status()):
 * a failure to read or queue an input ends the invocation with rt_fail(),
 * a failed turn stops the feed.  Once detached, f->det->role says which
 * side this process is (detach.h).  Nothing here prints or exits; the
 * detached output of the back of a split run is printed by the caller's
 * detached() callback.
 *
 * Before the turns, feed_init() shapes the invocation's AgentInit from
 * the command line's flags (and feed_continue() from the store).
 *
 * The caller fills a struct feed (det and its runtime open, stop pointing
 * at its stop-signal flag) and calls one of feed_messages(), feed_stdin()
 * or feed_intake(); its cancelled() callback of the runtime calls
 * feed_in_turn().  The struct borrows everything it points at; front_fd
 * stays the caller's to close.
 */
#ifndef CORE_FEED_H
#define CORE_FEED_H

#include <signal.h>

#include "../base/buf.h"
#include "../base/json.h"
#include "../base/status.h"

struct detach_run;
struct intake;
struct store;

/* The command line's parts of an AgentInit (runtime-semantics §1). */
struct feed_init {
	const char *json;               /* --init JSON, or NULL */
	const char *session_id;         /* --session ID, or NULL */
	const char *snapshot_id;        /* --snapshot ID, or NULL */
	const char *state_file;         /* --state FILE, or NULL */
	size_t max;                     /* the state file's limit (--max-record) */
};

/*
 * The AgentInit in *init (a new reference): the JSON parsed, else {};
 * then sessionId, snapshotId and state from the flags, each key given
 * once.  An init that is not an object is returned as it is, for
 * rt_open() to refuse.  On error *init may be set all the same (release
 * it).  Errors: the JSON's (naming "--init"), the state file's (its read,
 * its JSON, naming the file), CORE_EUSAGE "the init's 'KEY' is given
 * twice (--init and a flag)", CORE_ENOMEM.
 */
enum core_status feed_init(const struct feed_init *f, json_t **init, struct core_err *e);

/*
 * --continue: the agent's most recently updated session in s becomes
 * init's sessionId.  Errors: the store's, CORE_ENOTFOUND "no session of
 * agent 'AGENT' to continue (start one without --continue)".
 */
enum core_status feed_continue(struct store *s, const char *agent, json_t *init,
                               struct core_err *e);

struct feed {
	struct detach_run *det;         /* the background; det->rt the invocation */
	struct intake *intake;          /* the eager intake (feed_intake()), or NULL */
	const volatile sig_atomic_t *stop;      /* non-zero: a caller stop (SIGINT, ...) */
	int back;                       /* this is the back of a split run */
	int front_fd;                   /* back: the pipe to the front, or -1 */
	int detach_failed;              /* a detach in the middle of a turn failed */
	/* The back, once detached in place: print the caller's detached output. */
	enum core_status (*detached)(void *ctx);
	void *ctx;
	/* A person to answer a turn that paused on tool interrupts, or NULL:
	 * approve(approve_ctx, part) for each interrupted toolRequest part
	 * (answer_pending()) returns 1 to approve it, 0 to deny it, -1 for no
	 * answer (the turn stays interrupted); with every one answered, the
	 * resume (answer_resume()) runs as the next turn, in this process. */
	int (*approve)(void *ctx, const json_t *part);
	void *approve_ctx;
	/* Parts (agent-run -a FILE) added to the first message of
	 * feed_messages(), which is then a turn even without text; NULL:
	 * none.  Borrowed. */
	const json_t *attach;
};

/*
 * One input's turn (rt_turn()), then while f->approve answers the tool
 * requests it paused on, their resumes: CORE_OK while the invocation goes
 * on, else the status that ended it.
 */
enum core_status feed_turn(struct feed *f, const json_t *in);

/*
 * {"message": {"content": [{"text": TEXT}], "role": "user"}} for len bytes
 * of text (valid UTF-8); NULL when out of memory or not UTF-8.
 */
json_t *feed_user_message(const char *text, size_t len);

/*
 * The first turn's text when stdin's text is piped: the first -m TEXT, a
 * blank line, then the piped text; the piped text alone without -m.
 * Appended to b.  Errors: CORE_ENOMEM (or b's maximum).
 */
enum core_status feed_first_text(const char *first_message, const struct core_buf *piped,
                                 struct core_buf *b);

/*
 * Each of the n messages as one turn, or (detach) queued for the
 * background and then detached (unless *f->stop); piped (stdin's text, or
 * NULL) joins the first turn, or is the one turn when n is 0.
 */
void feed_messages(struct feed *f, const char *const *messages, size_t n,
                   const struct core_buf *piped, int detach);

/*
 * Run stdin's AgentInput lines (fd 0, after the bytes in ahead, each at
 * most max_record bytes), read between turns; stops at the first failed
 * turn or *f->stop, or detaches at a "detach" line (with the lines already
 * written behind it).  detach_all (--detach): every line is read and
 * queued first, then the run detaches.
 */
void feed_stdin(struct feed *f, const struct core_buf *ahead, size_t max_record,
                int detach_all);

/*
 * Run the intake's inputs, one turn each, until its end, the reader's
 * error (after the turns before it), a turn that ends the invocation, a
 * stop, or a detach (feed_detach()).  A back that became the worker
 * finishes it (detach_finish()).
 */
void feed_intake(struct feed *f);

/*
 * From inside a running turn (the runtime's cancelled()): a detach line
 * the intake's reader has read detaches now, the turn going on in the
 * background.  Returns non-zero when such a detach failed (the turn must
 * stop: the invocation is failed).
 */
int feed_in_turn(struct feed *f);

#endif
