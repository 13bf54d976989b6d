/* serve_run.c - the children an agent-serve request runs: a turn is
 * agent-run (a co-process read line by line, streamed as SSE), the
 * companions are agent-snap, agent-wait and agent-abort run to completion
 * (serve_int.h). */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "agent_ext.h"
#include "serve_int.h"
#include "../base/coproc.h"
#include "../base/json.h"
#include "../base/run.h"
#include "../base/spawn.h"
#include "../base/trace.h"
#include "../base/util.h"

#define ARGV_MAX 24
/* What a companion may print, and say on stderr. */
#define TOOL_OUT_MAX ((size_t)64 << 20)
#define TOOL_ERR_MAX 4096
/* A companion (agent-snap, agent-abort) is done well within this. */
#define TOOL_TIMEOUT_MS 30000

struct argv {
	char *v[ARGV_MAX + 1];
	size_t n;
	char bin[4096];
};

static void argv_init(struct argv *a, const struct serve *s, const char *prog)
{
	snprintf(a->bin, sizeof a->bin, "%s/%s", s->cfg.bin_dir, prog);
	a->v[0] = a->bin;
	a->n = 1;
	a->v[1] = NULL;
}

static void argv_add(struct argv *a, const char *arg)
{
	if (a->n < ARGV_MAX) {
		a->v[a->n++] = (char *)arg;
		a->v[a->n] = NULL;
	}
}

/* The options every child shares: the agent path and the store. */
static void argv_common(struct argv *a, const struct serve *s, int store)
{
	if (s->cfg.agents_dir) {
		argv_add(a, "--agents");
		argv_add(a, s->cfg.agents_dir);
	}
	if (store && s->cfg.store) {
		argv_add(a, "--store");
		argv_add(a, s->cfg.store);
	}
}

/* Has the client closed its end?  (A turn then stops as on SIGTERM.) */
static int client_gone(struct serve_req *r)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct pollfd p;
	if (!ci)
		return 0;
	p.fd = ci->connect_fd;
	p.events = POLLRDHUP;
	p.revents = 0;
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static int req_cancelled(void *ctx)
{
	struct serve_req *r = ctx;
	if (atomic_load(&r->s->stopping) || client_gone(r))
		r->cancelled = 1;
	return r->cancelled;
}

/* ---- a turn ---- */

struct serve_turn {
	struct serve_req *r;
	struct coproc *cp;
	int64_t deadline;
	int64_t stop_at;        /* when the child was sent SIGTERM (0: not yet) */
	char state_file[64];    /* init.state given to agent-run --state, or "" */
	struct core_buf frame;  /* the SSE bytes not yet handed to the client */
	size_t pos;
	int done;
	int ended;              /* its final line is read */
};

/*
 * A client gone ends the read at once (nobody is left to answer).  The
 * turn timeout and the end of the drain stop the turn instead: SIGTERM
 * once, and agent-run's final line (the turn aborted, its resume point)
 * is still read and sent, for at most the grace.
 */
static int turn_cancelled(void *ctx)
{
	struct serve_turn *t = ctx;
	int64_t now = core_now_mono_ms();
	if (client_gone(t->r))
		return t->r->cancelled = 1;
	if (!t->stop_at && (now >= t->deadline || atomic_load(&t->r->s->stopping))) {
		t->stop_at = now;
		t->r->cancelled = 1;
		spawn_signal(t->cp->pid, SIGTERM);
	}
	return t->stop_at && now - t->stop_at > SERVE_KILL_GRACE_MS;
}

/* End the child: SIGTERM when the turn is cancelled and was not told yet
 * (agent-run then writes its row aborted; a second signal would end it at
 * once), then the grace, then its group killed. */
static void serve_reap(struct serve *s, struct coproc *cp);

/* A turn whose final line is read, and not cancelled, is over: its child
 * goes to the keeper to be reaped while the answer goes out. */
static void turn_stop(struct serve_turn *t)
{
	if (t->cp && t->ended && !t->r->cancelled) {
		serve_reap(t->r->s, t->cp);
		t->cp = NULL;
		serve_slot_free(t->r);
	}
	if (t->cp) {
		if (t->r->cancelled && !t->stop_at && !coproc_exited(t->cp))
			spawn_signal(t->cp->pid, SIGTERM);
		t->stop_at = t->stop_at ? t->stop_at : core_now_mono_ms();
		coproc_close(t->cp, SERVE_KILL_GRACE_MS);
		coproc_free(t->cp);
		t->cp = NULL;
		serve_slot_free(t->r);
	}
	if (*t->state_file) {
		unlink(t->state_file);
		*t->state_file = '\0';
	}
}

static void turn_free(struct serve_turn *t)
{
	struct serve *s = t->r->s;
	turn_stop(t);
	core_buf_release(&t->frame);
	serve_req_release(t->r);
	free(t);
	/* the next turn's child, now that this one's answer is out */
	serve_warm(s);
}

/* A client-managed init's state goes to agent-run in a private file (it
 * can outgrow an argument). */
static enum core_status write_state(struct serve_turn *t, const json_t *state,
                                    struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	const char *tmp = getenv("TMPDIR");
	enum core_status st;
	int fd;
	snprintf(t->state_file, sizeof t->state_file, "%s/agent-serve-XXXXXX",
	         tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
	if ((fd = mkstemp(t->state_file)) < 0) {
		*t->state_file = '\0';
		return core_fail_sys(e, "cannot create the state file");
	}
	if ((st = jv_dump(state, &b)) == CORE_OK && write(fd, b.p, b.len) != (ssize_t)b.len)
		st = core_fail_sys(e, "cannot write the state file");
	close(fd);
	core_buf_release(&b);
	return st;
}

/* The request's W3C trace context as agent-run's TRACEPARENT and
 * TRACESTATE (which it validates): the turn's spans become children of
 * the request's SERVER span, or without one (tracing off here) of the
 * caller's.  Only visible ASCII is passed on. */
static size_t trace_env(struct serve_req *r, char *env[3])
{
	static const char *const vars[] = { "TRACEPARENT", "TRACESTATE" };
	char own[TRACE_PARENT_LEN + 1];
	const char *v[2] = { NULL, serve_trace_header(r->conn, "tracestate") };
	size_t k = 0;
	if (!r->span)
		v[0] = serve_trace_header(r->conn, "traceparent");
	else if (!trace_traceparent(r->span, own))
		v[0] = own;
	for (size_t i = 0; i < 2; i++)
		if (v[i] && asprintf(&env[k], "%s=%s", vars[i], v[i]) > 0)
			k++;
		else if (v[i])
			env[k] = NULL;
	return k;
}

/* ---- the keeper: the next turn's agent-run started ahead, ended
 * turns' children reaped ---- */

struct serve_ended {
	struct coproc *cp;
	struct serve_ended *next;
};

static void warm_start(struct serve *s)
{
	struct core_err e = { 0 };
	struct coproc *cp = NULL;
	char bin[4096], arg[] = "--serve-child";
	char *argv[] = { bin, arg, NULL };
	if (atomic_load(&s->draining))
		return;
	pthread_mutex_lock(&s->warm_mu);
	if (s->warm) {
		pthread_mutex_unlock(&s->warm_mu);
		return;
	}
	pthread_mutex_unlock(&s->warm_mu);
	snprintf(bin, sizeof bin, "%s/agent-run", s->cfg.bin_dir);
	if (coproc_start_argv(argv, NULL, "agent-run", NULL, NULL, &cp, &e) != CORE_OK)
		return;         /* the turn starts its own, and says why */
	pthread_mutex_lock(&s->warm_mu);
	if (!s->warm && !atomic_load(&s->draining)) {
		s->warm = cp;
		cp = NULL;
	}
	pthread_mutex_unlock(&s->warm_mu);
	coproc_free(cp);
}

/* The child of a turn that is over exits on its own once its final line
 * is written; it is reaped within SERVE_KILL_GRACE_MS (then its group is
 * killed), no answer waiting on that.  Past max_turns children
 * waiting to be reaped, the turn reaps its own: the processes a server
 * holds stay bounded. */
static void serve_reap(struct serve *s, struct coproc *cp)
{
	struct serve_ended *x = malloc(sizeof *x);
	pthread_mutex_lock(&s->warm_mu);
	if (x && s->keeper_up && !s->keep_quit && s->nended < (int)s->cfg.max_turns) {
		x->cp = cp;
		x->next = s->ended;
		s->ended = x;
		s->nended++;
		pthread_cond_signal(&s->keep_cv);
		cp = NULL;
		x = NULL;
	}
	pthread_mutex_unlock(&s->warm_mu);
	free(x);
	if (cp) {
		coproc_close(cp, SERVE_KILL_GRACE_MS);
		coproc_free(cp);
	}
}

void serve_warm(struct serve *s)
{
	pthread_mutex_lock(&s->warm_mu);
	if (s->keeper_up) {
		s->want_warm = 1;
		pthread_cond_signal(&s->keep_cv);
		pthread_mutex_unlock(&s->warm_mu);
		return;
	}
	pthread_mutex_unlock(&s->warm_mu);
	warm_start(s);
}

/* The next turn's child first, then the reaping. */
static void *keeper(void *arg)
{
	struct serve *s = arg;
	pthread_mutex_lock(&s->warm_mu);
	for (;;) {
		struct serve_ended *x;
		while (!s->want_warm && !s->ended && !s->keep_quit)
			pthread_cond_wait(&s->keep_cv, &s->warm_mu);
		if (s->want_warm) {
			s->want_warm = 0;
			pthread_mutex_unlock(&s->warm_mu);
			warm_start(s);
			pthread_mutex_lock(&s->warm_mu);
		} else if ((x = s->ended)) {
			s->ended = x->next;
			s->nended--;
			pthread_mutex_unlock(&s->warm_mu);
			coproc_close(x->cp, SERVE_KILL_GRACE_MS);
			coproc_free(x->cp);
			free(x);
			pthread_mutex_lock(&s->warm_mu);
		} else {
			break;
		}
	}
	pthread_mutex_unlock(&s->warm_mu);
	return NULL;
}

void serve_keeper_start(struct serve *s)
{
	s->keeper_up = !pthread_create(&s->keeper, NULL, keeper, s);
}

void serve_keeper_stop(struct serve *s)
{
	if (!s->keeper_up)
		return;
	pthread_mutex_lock(&s->warm_mu);
	s->keep_quit = 1;
	s->want_warm = 0;
	pthread_cond_signal(&s->keep_cv);
	pthread_mutex_unlock(&s->warm_mu);
	pthread_join(s->keeper, NULL);
	s->keeper_up = 0;
}

void serve_warm_end(struct serve *s)
{
	struct coproc *cp;
	pthread_mutex_lock(&s->warm_mu);
	cp = s->warm;
	s->warm = NULL;
	pthread_mutex_unlock(&s->warm_mu);
	/* its stdin closed: it reads the end and exits 0 */
	coproc_free(cp);
}

/* The child started ahead, when there is one still waiting. */
static struct coproc *warm_take(struct serve *s)
{
	struct coproc *cp;
	pthread_mutex_lock(&s->warm_mu);
	cp = s->warm;
	s->warm = NULL;
	pthread_mutex_unlock(&s->warm_mu);
	if (cp && coproc_exited(cp)) {
		coproc_free(cp);
		cp = NULL;
	}
	return cp;
}

/* Its words (agent-run's serve_child_words()): 8 digits of length, then
 * {"argv", "env"} and a newline. */
static enum core_status warm_words(struct serve_turn *t, char *const *argv, char *const *env,
                                   const struct coproc_cancel *cancel, struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	json_t *doc = json_pack("{s:[],s:[]}", "argv", "env");
	enum core_status st = doc ? CORE_OK : core_fail(e, CORE_ENOMEM, "out of memory");
	for (size_t i = 1; !st && argv[i]; i++)
		if (json_array_append_new(json_object_get(doc, "argv"), json_string(argv[i])))
			st = core_fail(e, CORE_ENOMEM, "out of memory");
	for (size_t i = 0; !st && env[i]; i++)
		if (json_array_append_new(json_object_get(doc, "env"), json_string(env[i])))
			st = core_fail(e, CORE_ENOMEM, "out of memory");
	if (!st && ((st = core_buf_adds(&b, "00000000")) || (st = jv_dump(doc, &b))))
		core_fail(e, st, "out of memory");
	if (!st) {
		char len[9];
		snprintf(len, sizeof len, "%08zu", b.len - 8 + 1);
		memcpy(b.p, len, 8);
		st = coproc_write_line(t->cp, b.p, b.len, 10000, cancel, e);
	}
	json_decref(doc);
	core_buf_release(&b);
	return st;
}

static enum core_status turn_start(struct serve_turn *t, const json_t *data, const json_t *init,
                                   struct core_err *e)
{
	struct serve *s = t->r->s;
	struct coproc_cancel cancel = { turn_cancelled, t };
	struct core_buf in = CORE_BUF_INIT(CORE_BUF_UNLIMITED), ib = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	json_t *rest = NULL;
	struct argv a;
	char *env[4] = { NULL, NULL, NULL, NULL };
	size_t k;
	enum core_status st;
	argv_init(&a, s, "agent-run");
	argv_add(&a, t->r->agent);
	argv_common(&a, s, !s->cfg.no_store);
	if (s->cfg.no_store)
		argv_add(&a, "--no-store");
	argv_add(&a, "--input-format");
	argv_add(&a, "ndjson");
	argv_add(&a, "--format");
	argv_add(&a, "ndjson");
	if (init && json_object_size(init)) {
		const json_t *state = json_object_get(init, "state");
		if (!(rest = json_deep_copy(init)))
			return core_fail(e, CORE_ENOMEM, "out of memory");
		if (state && s->cfg.no_store) {
			if ((st = write_state(t, state, e)) != CORE_OK)
				goto out;
			json_object_del(rest, "state");
			argv_add(&a, "--state");
			argv_add(&a, t->state_file);
		}
		if (json_object_size(rest)) {
			if ((st = jv_dump(rest, &ib)) != CORE_OK ||
			    (st = core_buf_addc(&ib, '\0')) != CORE_OK)
				goto out;
			argv_add(&a, "--init");
			argv_add(&a, ib.p);
		}
	}
	if ((st = jv_dump(data, &in)) != CORE_OK)
		goto out;
	k = trace_env(t->r, env);
	/* the auth command's context, for the tools and handlers to read */
	if (t->r->context && asprintf(&env[k], "AGENTKIT_CONTEXT=%s", t->r->context) < 0)
		env[k] = NULL;
	/* the child started ahead, told its words; else one started now */
	if ((t->cp = warm_take(s)) && warm_words(t, a.v, env, &cancel, e) != CORE_OK) {
		coproc_free(t->cp);
		t->cp = NULL;
	}
	if (!t->cp && (st = coproc_start_argv(a.v, NULL, "agent-run", (const char *const *)env,
	                                      NULL, &t->cp, e)) != CORE_OK)
		goto out;
	/* An agent-run that exits before it reads (a prompt file that does
	 * not load) has written its final {"error"} line: that is the answer. */
	if ((st = coproc_write_line(t->cp, in.p, in.len, 10000, &cancel, e)) == CORE_EINTERNAL)
		st = CORE_OK;
	spawn_close_fd(&t->cp->in_fd);
out:
	free(env[0]);
	free(env[1]);
	free(env[2]);
	json_decref(rest);
	core_buf_release(&in);
	core_buf_release(&ib);
	return st;
}

static int line_is(const char *line, const char *key)
{
	size_t n = strlen(key);
	return !strncmp(line, "{\"", 2) && !strncmp(line + 2, key, n) &&
	       !strncmp(line + 2 + n, "\":", 2);
}

/* The next line of agent-run: a chunk (*final NULL), or the final line
 * parsed (*final set: {"output": ...} or {"error": ...}).  A child that
 * ends without one is an INTERNAL error line, made here. */
static enum core_status turn_next(struct serve_turn *t, char **line, size_t *len, json_t **final,
                                  struct core_err *e)
{
	struct coproc_cancel cancel = { turn_cancelled, t };
	enum core_status st;
	*final = NULL;
	st = coproc_read_line(t->cp, -1, &cancel, line, len, e);
	if (st == CORE_ECANCELLED)
		return st;
	if (st != CORE_OK) {
		*final = json_pack("{s:o}", "error", jv_error_new(CORE_EINTERNAL, e->msg));
		return *final ? CORE_OK : core_fail(e, CORE_ENOMEM, "out of memory");
	}
	if (line_is(*line, "output") || line_is(*line, "error")) {
		t->ended = 1;
		if (!(*final = jv_parse(*line, *len, "agent-run's output", 1, e)))
			*final = json_pack("{s:o}", "error", jv_error_new(CORE_EINTERNAL, e->msg));
	}
	return CORE_OK;
}

/* The final line as the answer of a plain (not streamed) request. */
static enum MHD_Result answer_final(struct serve_req *r, json_t *final)
{
	json_t *out = json_object_get(final, "output"), *err = json_object_get(final, "error");
	const char *status = json_string_value(json_object_get(err, "status"));
	const char *msg = json_string_value(json_object_get(err, "message"));
	if (out) {
		serve_note_ids(r, out);
		return serve_result(r, json_incref(out));
	}
	return serve_error(r, status ? status : "INTERNAL", "%s", msg ? msg : "the turn failed");
}

/* One SSE frame for a line: {"message": chunk}, {"result": output} or
 * {"error": {status, message}}, as Genkit's streaming handler writes them. */
static enum core_status frame(struct serve_turn *t, const char *line, size_t len,
                              json_t *final, struct core_err *e)
{
	struct core_buf *b = &t->frame;
	enum core_status st = CORE_OK;
	if (!final) {
		if ((st = core_buf_adds(b, "data: {\"message\":")) == CORE_OK &&
		    (st = core_buf_add(b, line, len)) == CORE_OK)
			st = core_buf_adds(b, "}\n\n");
		return st ? core_fail(e, st, "out of memory") : CORE_OK;
	}
	if (json_object_get(final, "output")) {
		json_t *res = json_pack("{s:O}", "result", json_object_get(final, "output"));
		serve_note_ids(t->r, json_object_get(final, "output"));
		if (!res)
			return core_fail(e, CORE_ENOMEM, "out of memory");
		json_decref(final);
		final = res;
	}
	if ((st = core_buf_adds(b, "data: ")) == CORE_OK && (st = jv_dump(final, b)) == CORE_OK)
		st = core_buf_adds(b, "\n\n");
	json_decref(final);
	return st ? core_fail(e, st, "cannot write the result") : CORE_OK;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct serve_turn *t = cls;
	struct core_err e = { 0 };
	size_t n;
	(void)pos;
	while (t->pos >= t->frame.len) {
		char *line;
		size_t len;
		json_t *final;
		t->frame.len = 0;
		t->pos = 0;
		if (t->done) {
			turn_stop(t);
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		if (turn_next(t, &line, &len, &final, &e) != CORE_OK) {
			turn_stop(t);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		t->done = final != NULL;
		t->r->streaming = !t->done;
		if (frame(t, line, len, final, &e) != CORE_OK) {
			turn_stop(t);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
	}
	n = t->frame.len - t->pos < max ? t->frame.len - t->pos : max;
	memcpy(buf, t->frame.p + t->pos, n);
	t->pos += n;
	return (ssize_t)n;
}

static void sse_free(void *cls)
{
	turn_free(cls);
}

static int wants_stream(struct serve_req *r)
{
	const char *acc = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Accept");
	const char *q = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "stream");
	return (acc && strstr(acc, "text/event-stream")) || (q && !strcmp(q, "true"));
}

static enum MHD_Result turn_plain(struct serve_turn *t)
{
	struct core_err e = { 0 };
	enum MHD_Result ret;
	for (;;) {
		char *line;
		size_t len;
		json_t *final;
		if (turn_next(t, &line, &len, &final, &e) != CORE_OK) {
			turn_stop(t);
			ret = serve_error(t->r, "CANCELLED", "the turn was cancelled");
			break;
		}
		if (final) {
			turn_stop(t);
			ret = answer_final(t->r, final);
			json_decref(final);
			break;
		}
	}
	turn_free(t);
	return ret;
}

enum MHD_Result serve_turn(struct serve_req *r, const json_t *data, const json_t *init)
{
	struct core_err e = { 0 };
	struct serve_turn *t;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	if (!json_is_object(data))
		return serve_error(r, "INVALID_ARGUMENT", "the body must be {\"data\": AgentInput, "
		                   "\"init\"?: AgentInit}: data is %s",
		                   data ? jv_type_name(data) : "missing");
	if (init && !json_is_null(init) && !json_is_object(init))
		return serve_error(r, "INVALID_ARGUMENT", "init must be an AgentInit object, "
		                   "not %s", jv_type_name(init));
	if (!(t = calloc(1, sizeof *t)))
		return MHD_NO;
	t->r = r;
	atomic_fetch_add(&r->refs, 1);
	t->deadline = core_now_mono_ms() + r->s->cfg.turn_timeout_ms;
	core_buf_init(&t->frame, CORE_BUF_UNLIMITED);
	if (turn_start(t, data, json_is_object(init) ? init : NULL, &e) != CORE_OK) {
		turn_free(t);
		return serve_error(r, "INTERNAL", "cannot start the turn: %s", e.msg);
	}
	if (!wants_stream(r))
		return turn_plain(t);
	r->streaming = 1;
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, sse_read, t,
	                                         sse_free);
	if (!resp) {
		turn_free(t);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	ret = MHD_queue_response(r->conn, 200, resp);
	MHD_destroy_response(resp);
	r->code = 200;
	r->answered = 1;
	return ret;
}

/* ---- the companions ---- */

struct tool {
	struct core_buf out, err;
	int code;
};

static enum core_status run_tool(struct serve_req *r, char *const *argv, int64_t timeout_ms,
                                 struct tool *tl, struct core_err *e)
{
	struct run_child c;
	char **env = run_env(NULL, NULL);
	enum core_status st;
	core_buf_init(&tl->out, CORE_BUF_UNLIMITED);
	core_buf_init(&tl->err, CORE_BUF_UNLIMITED);
	if (!env)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	memset(&c, 0, sizeof c);
	c.argv = argv;
	c.env = env;
	c.what = argv[0];
	c.timeout_ms = timeout_ms;
	c.cancel_grace_ms = 1000;
	c.out = &tl->out;
	c.err = &tl->err;
	c.out_keep = TOOL_OUT_MAX;
	c.err_keep = TOOL_ERR_MAX;
	st = run_child(&c, req_cancelled, r, e);
	run_child_release(&c);
	free(env);
	tl->code = c.exited ? c.code : -1;
	if (st == CORE_OK && !c.exited)
		st = core_fail(e, c.cancelled ? CORE_ECANCELLED : CORE_EDEADLINE,
		               "%s did not finish", argv[0]);
	return st;
}

static void tool_release(struct tool *tl)
{
	core_buf_release(&tl->out);
	core_buf_release(&tl->err);
}

/* What the child said on stderr, its "agent-snap: " and newline left out. */
static const char *tool_said(struct tool *tl)
{
	char *p, *colon;
	if (core_buf_addc(&tl->err, '\0') != CORE_OK || !tl->err.p)
		return "";
	p = tl->err.p;
	if ((colon = strstr(p, ": ")) && !strncmp(p, "agent-", 6) && colon - p < 16)
		p = colon + 2;
	p[strcspn(p, "\n")] = '\0';
	return p;
}

/* A companion's failure by its exit status: 4 not found, 100/101 the
 * request's fault, 5 a precondition, the rest the server's. */
static enum MHD_Result tool_error(struct serve_req *r, struct tool *tl, const char *op,
                                  const char *notfound)
{
	const char *said = tool_said(tl);
	switch (tl->code) {
	case 4:
		return serve_error(r, "NOT_FOUND", "%s: %s", op, notfound);
	case 100:
	case 101:
		return serve_error(r, "INVALID_ARGUMENT", "%s: %s", op, said);
	case 5:
		return serve_error(r, "FAILED_PRECONDITION", "%s: %s", op, said);
	default:
		return serve_error(r, "INTERNAL", "%s: %s", op, *said ? said : "failed");
	}
}

/* The first line of a companion's stdout, parsed. */
static json_t *tool_json(struct tool *tl)
{
	struct core_err e = { 0 };
	size_t n = tl->out.len;
	if (!n)
		return NULL;
	if (memchr(tl->out.p, '\n', n))
		n = (size_t)((char *)memchr(tl->out.p, '\n', n) - tl->out.p);
	return jv_parse(tl->out.p, n, "the answer", 1, &e);
}

/* A string member of the request (NULL when absent); *bad set when it is
 * there but not a non-empty string. */
static const char *member(const json_t *data, const char *key, int *bad)
{
	const json_t *v = json_object_get(data, key);
	if (!v || json_is_null(v))
		return NULL;
	if (!json_is_string(v) || !*json_string_value(v)) {
		*bad = 1;
		return NULL;
	}
	return json_string_value(v);
}

/*
 * The url: of the agent's prompt file (new), or NULL: a local agent, or
 * one that does not load (its companion then reads the store and says
 * what it finds).  A remote agent's companions are its server's: the
 * child is agent-snap, agent-wait or agent-abort --url URL, as its turns
 * are agent-run's on that server.
 */
static char *agent_url(struct serve_req *r)
{
	struct agent_spec spec = { .name = r->agent, .agents_dir = r->s->cfg.agents_dir,
	                           .model_optional = 1 };
	struct core_err e = { 0 };
	struct agent *ag = NULL;
	char *url = NULL;
	if (agent_load(&spec, &ag, &e) == CORE_OK && ag->url)
		url = strdup(ag->url);
	agent_free(ag);
	return url;
}

/* The child's way to the rows: --url URL, or the store (and the agent). */
static void argv_rows(struct argv *a, struct serve_req *r, const char *url, int agent)
{
	if (url) {
		argv_add(a, "--url");
		argv_add(a, url);
		return;
	}
	if (agent) {
		argv_common(a, r->s, 1);
		argv_add(a, "--agent");
		argv_add(a, r->agent);
	} else if (r->s->cfg.store) {
		argv_add(a, "--store");
		argv_add(a, r->s->cfg.store);
	}
}

static enum MHD_Result snapshot_read(struct serve_req *r, const char *op, const char *sid,
                                     const char *session, int meta)
{
	struct core_err e = { 0 };
	struct argv a;
	struct tool tl;
	char nf[512];
	enum MHD_Result ret;
	json_t *row;
	char *url = agent_url(r);
	argv_init(&a, r->s, "agent-snap");
	argv_rows(&a, r, url, 1);
	if (meta)
		argv_add(&a, "--metadata-only");
	if (session) {
		argv_add(&a, "--session");
		argv_add(&a, session);
	}
	if (sid) {
		argv_add(&a, "get");
		argv_add(&a, sid);
	}
	if (sid)
		snprintf(nf, sizeof nf, "snapshot \"%s\" not found", sid);
	else
		snprintf(nf, sizeof nf, "no snapshot found for session \"%s\"", session);
	if (run_tool(r, a.v, TOOL_TIMEOUT_MS, &tl, &e) != CORE_OK)
		ret = serve_error(r, "INTERNAL", "%s: %s", op, e.msg);
	else if (tl.code || !(row = tool_json(&tl)))
		ret = tool_error(r, &tl, op, nf);
	else {
		serve_note_ids(r, row);
		ret = serve_result(r, row);
	}
	tool_release(&tl);
	free(url);
	return ret;
}

enum MHD_Result serve_get_snapshot(struct serve_req *r, const json_t *data)
{
	int bad = 0;
	const char *sid = member(data, "snapshotId", &bad);
	const char *session = member(data, "sessionId", &bad);
	if (!json_is_object(data) || bad || (!sid && !session))
		return serve_error(r, "INVALID_ARGUMENT", "getSnapshot: the body must be "
		                   "{\"data\": {\"snapshotId\" or \"sessionId\"}}");
	return snapshot_read(r, "getSnapshot", sid, session,
	                     json_is_true(json_object_get(data, "metadataOnly")));
}

enum MHD_Result serve_wait_snapshot(struct serve_req *r, const json_t *data)
{
	struct core_err e = { 0 };
	struct argv a;
	struct tool tl;
	char cap[32], nf[512];
	enum MHD_Result ret;
	json_t *row;
	char *url;
	enum core_status st;
	int bad = 0, meta;
	const char *sid = member(data, "snapshotId", &bad);
	const char *session = member(data, "sessionId", &bad);
	if (!json_is_object(data) || bad || !sid)
		return serve_error(r, "INVALID_ARGUMENT", "waitForSnapshot: snapshotId is required");
	meta = json_is_true(json_object_get(data, "metadataOnly"));
	snprintf(cap, sizeof cap, "%lldms", (long long)r->s->cfg.wait_cap_ms);
	snprintf(nf, sizeof nf, "snapshot \"%s\" not found", sid);
	url = agent_url(r);
	argv_init(&a, r->s, "agent-wait");
	argv_rows(&a, r, url, 0);
	argv_add(&a, "--timeout");
	argv_add(&a, cap);
	if (meta)
		argv_add(&a, "--metadata-only");
	argv_add(&a, sid);
	st = run_tool(r, a.v, r->s->cfg.wait_cap_ms + TOOL_TIMEOUT_MS, &tl, &e);
	free(url);
	if (st != CORE_OK) {
		tool_release(&tl);
		return serve_error(r, "INTERNAL", "waitForSnapshot: %s", e.msg);
	}
	/* Past the cap, the row as it stands (Genkit's WithMaxSnapshotWait). */
	if (tl.code == 124) {
		tool_release(&tl);
		return snapshot_read(r, "waitForSnapshot", sid, session, meta);
	}
	if (tl.code == 4 || tl.code >= 100 || tl.code < 0 || !(row = tool_json(&tl)))
		ret = tool_error(r, &tl, "waitForSnapshot", nf);
	else if (session && strcmp(session, json_string_value(json_object_get(row, "sessionId"))
	                                    ? json_string_value(json_object_get(row, "sessionId"))
	                                    : "")) {
		ret = serve_error(r, "INVALID_ARGUMENT", "waitForSnapshot: snapshot \"%s\" does "
		                  "not belong to session \"%s\"", sid, session);
		json_decref(row);
	} else {
		serve_note_ids(r, row);
		ret = serve_result(r, row);
	}
	tool_release(&tl);
	return ret;
}

enum MHD_Result serve_abort(struct serve_req *r, const json_t *data)
{
	struct core_err e = { 0 };
	struct argv a;
	struct tool tl;
	char nf[512];
	enum MHD_Result ret;
	json_t *line;
	char *url;
	enum core_status st;
	int bad = 0;
	const char *sid = member(data, "snapshotId", &bad);
	if (!json_is_object(data) || bad || !sid)
		return serve_error(r, "INVALID_ARGUMENT", "abort: snapshotId is required");
	snprintf(nf, sizeof nf, "snapshot \"%s\" not found", sid);
	url = agent_url(r);
	argv_init(&a, r->s, "agent-abort");
	argv_rows(&a, r, url, 0);
	argv_add(&a, sid);
	st = run_tool(r, a.v, TOOL_TIMEOUT_MS, &tl, &e);
	free(url);
	if (st != CORE_OK)
		ret = serve_error(r, "INTERNAL", "abort: %s", e.msg);
	else if (tl.code || !(line = tool_json(&tl)))
		ret = tool_error(r, &tl, "abort", nf);
	else {
		/* AgentAbortResponse: {snapshotId, status} */
		json_object_del(line, "previousStatus");
		serve_note_ids(r, line);
		ret = serve_result(r, line);
	}
	tool_release(&tl);
	return ret;
}

/* GET /: {"agents": [the descriptor of each agent (agent-run --describe)]} */
enum MHD_Result serve_list(struct serve_req *r)
{
	struct core_err e = { 0 };
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	json_t *list = NULL, *agents = json_array(), *entry;
	enum MHD_Result ret;
	size_t i;
	if (!agents || agent_ext_list(r->s->cfg.agents_dir, &list, &e) != CORE_OK) {
		json_decref(agents);
		return serve_error(r, "INTERNAL", "cannot list the agents: %s", e.msg);
	}
	json_array_foreach(list, i, entry) {
		const char *name = json_string_value(json_object_get(entry, "name"));
		struct argv a;
		struct tool tl;
		json_t *d = NULL;
		if (!name || json_object_get(entry, "error"))
			continue;
		argv_init(&a, r->s, "agent-run");
		argv_add(&a, name);
		argv_common(&a, r->s, !r->s->cfg.no_store);
		if (r->s->cfg.no_store)
			argv_add(&a, "--no-store");
		argv_add(&a, "--describe");
		if (run_tool(r, a.v, TOOL_TIMEOUT_MS, &tl, &e) == CORE_OK && !tl.code)
			d = tool_json(&tl);
		json_array_append_new(agents, d ? d : json_pack("{s:s,s:s}", "name", name,
		                                                "error", tool_said(&tl)));
		tool_release(&tl);
	}
	json_decref(list);
	list = json_pack("{s:o}", "agents", agents);
	if (list && jv_dump(list, &b) == CORE_OK)
		ret = serve_answer(r, 200, "application/json", b.p, b.len);
	else
		ret = MHD_NO;
	json_decref(list);
	core_buf_release(&b);
	return ret;
}

/* ---- the auth command (Genkit's context provider) ---- */

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
	json_t *headers = cls;
	char name[256];
	size_t i;
	(void)kind;
	for (i = 0; key[i] && i < sizeof name - 1; i++)
		name[i] = (char)(key[i] >= 'A' && key[i] <= 'Z' ? key[i] + 32 : key[i]);
	name[i] = '\0';
	json_object_set_new(headers, name, json_string(value ? value : ""));
	return MHD_YES;
}

#define AUTH_TIMEOUT_MS 10000

enum MHD_Result serve_auth_command(struct serve_req *r, int *admitted)
{
	struct core_err e = { 0 };
	struct core_buf in = CORE_BUF_INIT(CORE_BUF_UNLIMITED), ctx = CORE_BUF_INIT(1 << 20);
	json_t *headers = json_object(), *req = NULL, *out = NULL;
	char *script = spawn_exec_script(r->s->cfg.auth_command);
	char *argv[] = { "/bin/sh", "-c", script ? script : (char *)r->s->cfg.auth_command, NULL };
	struct run_child c;
	char **env = run_env(NULL, NULL);
	const char *status;
	enum MHD_Result ret;
	*admitted = 0;
	if (headers)
		MHD_get_connection_values(r->conn, MHD_HEADER_KIND, add_header, headers);
	req = json_pack("{s:s,s:s,s:O}", "method", r->method, "path", r->path, "headers", headers);
	if (!env || !req || jv_dump(req, &in) != CORE_OK) {
		ret = serve_error(r, "INTERNAL", "the auth command: out of memory");
		goto out;
	}
	memset(&c, 0, sizeof c);
	c.argv = argv;
	c.env = env;
	c.what = "the auth command";
	c.in = in.p;
	c.in_len = in.len;
	c.timeout_ms = AUTH_TIMEOUT_MS;
	c.out = &ctx;
	c.out_keep = 1 << 20;
	c.cancel_grace_ms = 500;
	if (run_child(&c, req_cancelled, r, &e) != CORE_OK || (!c.exited_ok && c.code < 0)) {
		ret = serve_error(r, "UNAVAILABLE", "the auth command did not answer: %s",
		                  e.msg[0] ? e.msg : "it was stopped");
		run_child_release(&c);
		goto out;
	}
	run_child_release(&c);
	out = ctx.len ? jv_parse(ctx.p, ctx.len, "the auth command's output", 0, &e) : NULL;
	status = json_string_value(json_object_get(out, "status"));
	if (!c.exited_ok) {
		const char *msg = json_string_value(json_object_get(out, "message"));
		ret = serve_error(r, status && !strcmp(status, "PERMISSION_DENIED")
		                  ? "PERMISSION_DENIED" : "UNAUTHENTICATED", "%s",
		                  msg ? msg : "the auth command refused the request");
	} else if (!json_is_object(out)) {
		ret = serve_error(r, "INTERNAL", "the auth command admitted the request but printed "
		                  "no JSON object (its context)");
	} else {
		core_buf_reset(&in);
		if (jv_dump(out, &in) == CORE_OK && core_buf_addc(&in, '\0') == CORE_OK)
			r->context = core_buf_detach(&in, NULL);
		*admitted = r->context != NULL;
		ret = *admitted ? MHD_YES : serve_error(r, "INTERNAL", "out of memory");
	}
out:
	free(script);
	free(env);
	json_decref(headers);
	json_decref(req);
	json_decref(out);
	core_buf_release(&in);
	core_buf_release(&ctx);
	return ret;
}
