/* feed.c - a run's inputs fed to its turns (feed.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "agent_trace.h"
#include "answer.h"
#include "detach.h"
#include "feed.h"
#include "intake.h"
#include "../base/lines.h"
#include "runtime.h"
#include "../../store/store.h"

static enum core_status set_init(json_t *init, const char *key, json_t *v,
                                 struct core_err *e)
{
	if (json_object_get(init, key)) {
		json_decref(v);
		return core_fail(e, CORE_EUSAGE, "the init's '%s' is given twice (--init and a flag)",
		                 key);
	}
	json_object_set_new(init, key, v);
	return CORE_OK;
}

/* --state FILE as JSON (bounded by max); NULL with e set. */
static json_t *read_state(const char *file, size_t max, struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(max);
	json_t *s = NULL;
	if (!core_buf_read_file(&b, file, e))
		s = jv_parse(b.p ? b.p : "", b.len, file, 0, e);
	core_buf_release(&b);
	return s;
}

enum core_status feed_init(const struct feed_init *f, json_t **init, struct core_err *e)
{
	enum core_status st = CORE_OK;
	if (f->json) {
		if (!(*init = jv_parse(f->json, strlen(f->json), "--init", 0, e)))
			return e->st;
	} else if (!(*init = json_object())) {
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	if (!json_is_object(*init))
		return CORE_OK;         /* rt_open() reports it */
	if (f->session_id && (st = set_init(*init, "sessionId", json_string(f->session_id), e)))
		return st;
	if (f->snapshot_id && (st = set_init(*init, "snapshotId", json_string(f->snapshot_id), e)))
		return st;
	if (f->state_file) {
		json_t *s = read_state(f->state_file, f->max, e);
		if (!s)
			return e->st;
		st = set_init(*init, "state", s, e);
	}
	return st;
}

enum core_status feed_continue(struct store *s, const char *agent, json_t *init,
                               struct core_err *e)
{
	struct store_session_filter f = { agent, 0, STORE_HEARTBEAT_TIMEOUT_MS };
	json_t *list = NULL;
	enum core_status st = store_recent_sessions(s, &f, &list, e);
	if (st)
		return st;
	const char *sid = json_string_value(json_object_get(json_array_get(list, 0),
	                                                    "sessionId"));
	if (!sid)
		st = core_fail(e, CORE_ENOTFOUND, "no session of agent '%s' to continue "
		               "(start one without --continue)", agent);
	else
		json_object_set_new(init, "sessionId", json_string(sid));
	json_decref(list);
	return st;
}

json_t *feed_user_message(const char *text, size_t len)
{
	return json_pack("{s:{s:[{s:s%}], s:s}}", "message", "content", "text", text, len,
	                 "role", "user");
}

enum core_status feed_first_text(const char *first_message, const struct core_buf *piped,
                                 struct core_buf *b)
{
	if (first_message && core_buf_addf(b, "%s\n\n", first_message))
		return CORE_ENOMEM;
	return core_buf_add(b, piped->p, piped->len) ? CORE_ENOMEM : CORE_OK;
}

/* The person's answers to the interrupted requests of the last turn, as
 * its resume input; NULL when one went unanswered (or no memory). */
static json_t *ask_person(struct feed *f)
{
	struct runtime *rt = f->det->rt;
	json_t *pending = answer_pending(rt_last_message(rt)), *part, *input = NULL;
	size_t i, n = json_array_size(pending);
	struct answer *a = n ? calloc(n, sizeof *a) : NULL;
	struct core_err e = { 0 };
	if (!a)
		goto out;
	json_array_foreach(pending, i, part) {
		const json_t *req = json_object_get(part, "toolRequest");
		const char *ref = json_string_value(json_object_get(req, "ref"));
		int yes = f->approve(f->approve_ctx, part);
		if (yes < 0 || *f->stop)
			goto out;
		a[i] = (struct answer){ yes ? ANSWER_APPROVE : ANSWER_DENY,
		                        ref && *ref ? ref : json_string_value(json_object_get(req, "name")),
		                        NULL, NULL, "the prompt" };
	}
	if (answer_resume(rt_last_message(rt), rt_session_id(rt), a, n, &input, &e))
		input = NULL;
out:
	free(a);
	json_decref(pending);
	return input;
}

/*
 * One input's turn; then, while a person answers the tool requests it
 * paused on (f->approve), the resumes, each a turn of its own.
 */
enum core_status feed_turn(struct feed *f, const json_t *in)
{
	struct runtime *rt = f->det->rt;
	enum core_status st = rt_turn(rt, in);
	while (!st && f->approve && !*f->stop && f->det->role == DETACH_NONE &&
	       !strcmp(rt_last_reason(rt), "interrupted")) {
		json_t *resume = ask_person(f);
		if (!resume)
			break;
		st = rt_turn(rt, resume);
		json_decref(resume);
	}
	return st;
}

/* Queue an input for the background; a failure ends the invocation. */
static enum core_status queue_input(struct detach_run *d, const json_t *in)
{
	struct core_err e = { 0 };
	enum core_status st = in ? detach_queue_add(&d->queue, in, &e)
	                         : core_fail(&e, CORE_ENOMEM, "out of memory");
	if (st)
		rt_fail(d->rt, st, e.msg);
	return st;
}

/* intake_parse_line(), an error ending the invocation (rt_fail). */
static enum core_status parse_input(struct runtime *rt, const char *line, size_t len,
                                    size_t lineno, json_t **in)
{
	struct core_err e = { 0 };
	enum core_status st = intake_parse_line(line, len, lineno, in, &e);
	if (st)
		rt_fail(rt, st, e.msg);
	return st;
}

void feed_messages(struct feed *f, const char *const *messages, size_t n,
                   const struct core_buf *piped, int detach)
{
	struct detach_run *d = f->det;
	struct core_buf first = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = CORE_OK;
	if (piped && feed_first_text(n ? messages[0] : NULL, piped, &first)) {
		rt_fail(d->rt, CORE_ENOMEM, "out of memory");
		core_buf_release(&first);
		return;
	}
	for (size_t i = 0; i < (n ? n : piped != NULL || f->attach) && !st; i++) {
		json_t *in = i == 0 && piped ? feed_user_message(first.p, first.len)
		             : i < n ? feed_user_message(messages[i], strlen(messages[i]))
		             : json_pack("{s:{s:[], s:s}}", "message", "content", "role", "user");
		json_t *content = json_object_get(json_object_get(in, "message"), "content");
		if (i == 0 && f->attach && in && json_array_extend(content, (json_t *)f->attach)) {
			json_decref(in);
			in = NULL;
		}
		if (detach)
			st = queue_input(d, in);
		else
			st = in ? feed_turn(f, in) : CORE_ENOMEM;
		json_decref(in);
	}
	if (detach && !st && !*f->stop)
		detach_start(d);
	core_buf_release(&first);
}

/*
 * Queue stdin's lines: all of them (--detach), or only those already
 * written (a "detach" line: the reader drains what is there without
 * blocking, later lines are not read).
 */
static enum core_status queue_stdin(struct detach_run *d, struct core_lines *lr, int nonblock)
{
	struct core_err e = { 0 };
	enum core_status st = CORE_OK;
	int fl = nonblock ? fcntl(0, F_GETFL) : -1;
	int restore = fl >= 0 && !(fl & O_NONBLOCK) && fcntl(0, F_SETFL, fl | O_NONBLOCK) == 0;
	char *line;
	size_t len;
	for (;;) {
		st = core_lines_next(lr, &line, &len, &e);
		if (st == CORE_ESYS && nonblock && (e.sys == EAGAIN || e.sys == EWOULDBLOCK)) {
			st = CORE_OK;
			break;
		}
		if (st) {
			rt_fail(d->rt, st == CORE_ESYS ? CORE_ESYS : CORE_EINVAL, e.msg);
			break;
		}
		if (!line)
			break;
		json_t *in;
		if ((st = parse_input(d->rt, line, len, lr->lineno, &in)))
			break;
		if (in && (st = queue_input(d, in))) {
			json_decref(in);
			break;
		}
		json_decref(in);
	}
	if (restore)
		fcntl(0, F_SETFL, fl);
	return st;
}

/* The lines of lr, one turn each, until a detach line, the end, a stop
 * or a failed turn. */
static void run_lines(struct feed *f, struct core_lines *lr)
{
	struct detach_run *d = f->det;
	struct core_err e = { 0 };
	enum core_status st;
	char *line;
	size_t len;
	for (;;) {
		agent_trace_idle();     /* the next line may be long in coming */
		if ((st = core_lines_next(lr, &line, &len, &e))) {
			rt_fail(d->rt, st == CORE_ESYS ? CORE_ESYS : CORE_EINVAL, e.msg);
			break;
		}
		if (!line || *f->stop)
			break;
		json_t *in;
		if (parse_input(d->rt, line, len, lr->lineno, &in))
			break;
		if (!in)
			continue;
		if (json_is_true(json_object_get(in, "detach"))) {
			/* §2.1: this input (if it has a payload) and the lines
			 * already written go to the background. */
			st = queue_input(d, in);
			json_decref(in);
			if (!st && !(*d->store && queue_stdin(d, lr, 1)))
				detach_start(d);
			break;
		}
		st = feed_turn(f, in);
		json_decref(in);
		if (st)
			break;
	}
}

void feed_stdin(struct feed *f, const struct core_buf *ahead, size_t max_record,
                int detach_all)
{
	struct detach_run *d = f->det;
	struct core_lines lr;
	core_lines_init(&lr, 0, "<stdin>", max_record);
	/* The bytes read ahead to see the format come first. */
	if (ahead->len && core_buf_add(&lr.buf, ahead->p, ahead->len)) {
		rt_fail(d->rt, CORE_ENOMEM, "out of memory");
		core_lines_release(&lr);
		return;
	}
	if (detach_all) {
		if (!queue_stdin(d, &lr, 0) && !*f->stop)
			detach_start(d);
	} else {
		run_lines(f, &lr);
	}
	core_lines_release(&lr);
}

/*
 * Detach with every input the intake holds (§2.1, §2.2): before a turn,
 * or (in_flight) from inside the turn that is running.  The process that
 * runs the turns detaches in place when it is the back of a split run, and
 * forks the worker otherwise (no turn is running then: input that is all
 * there is read before the first turn).  The back then prints the detached
 * output, becomes the worker and lets the front exit.
 */
static void feed_detach(struct feed *f, int in_flight)
{
	struct detach_run *d = f->det;
	struct core_err e = { 0 };
	if (f->back)
		prctl(PR_SET_PDEATHSIG, 0);     /* the worker outlives the front */
	enum core_status st = intake_hand_over(f->intake, d, &e);
	if (st) {
		rt_fail(d->rt, st, e.msg);
		f->detach_failed = in_flight;
		return;
	}
	if (!f->back) {
		detach_start(d);
		return;
	}
	if (detach_here(d, in_flight)) {
		f->detach_failed = in_flight;
		return;
	}
	f->detached(f->ctx);
	detach_daemonize(d);
	intake_detached(&f->front_fd);
}

int feed_in_turn(struct feed *f)
{
	if (f->det->role == DETACH_NONE && !f->detach_failed && f->intake
	    && f->intake->threaded && intake_detach_read(f->intake))
		feed_detach(f, 1);      /* a detach line arrived while this turn runs */
	return f->detach_failed;
}

void feed_intake(struct feed *f)
{
	struct detach_run *d = f->det;
	for (;;) {
		json_t *next;
		struct core_err err = { 0 };
		if (intake_idle(f->intake))
			agent_trace_idle();     /* the wait may be long */
		enum intake_next got = intake_take(f->intake, f->stop, &next, &err);
		if (got == INTAKE_DETACH) {
			feed_detach(f, 0);
			break;
		}
		if (got == INTAKE_END) {
			if (err.st && !*f->stop)
				rt_fail(d->rt, err.st, err.msg);
			break;
		}
		enum core_status st = feed_turn(f, next);
		json_decref(next);
		if (d->role != DETACH_NONE || st)
			break;
	}
	if (d->role == DETACH_WORKER && f->back)
		detach_finish(d);
}
