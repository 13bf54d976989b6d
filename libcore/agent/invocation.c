/* invocation.c - one agent invocation as agent-run runs it; see invocation.h. */
#include "invocation.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_trace.h"
#include "delegate.h"
#include "render.h"
#include "../base/trace.h"
#include "../base/util.h"

/* ---- caller stops (runtime-semantics §2.5) ---- */

/* The first SIGINT/SIGTERM/SIGHUP.  A turn loop waiting for the intake
 * wakes by the signal's EINTR (intake_take()); the front of a split run
 * forwards the signals to its back (intake_split()). */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	if (stop_signal) {
		/* The second one: end at once, as the signal does by default. */
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	stop_signal = sig;
	/* A read of stdin blocked between turns sees EOF after EINTR.  open,
	 * dup2 and close are async-signal-safe; errno is the interrupted
	 * code's. */
	int saved = errno;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		close(null);
	}
	errno = saved;
}

void invocation_catch_stops(struct invocation *inv)
{
	struct sigaction sa;
	output_watch(&inv->out);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;        /* no SA_RESTART: a blocked read returns EINTR */
	static const int sigs[] = { SIGINT, SIGHUP, SIGTERM };
	for (int i = 0; i < 3; i++) {
		struct sigaction old;
		/* SIGINT and SIGHUP ignored on entry (a background job of a
		 * script, nohup) stay ignored, as Unix tools do. */
		if (sigs[i] != SIGTERM && sigaction(sigs[i], NULL, &old) == 0
		    && old.sa_handler == SIG_IGN)
			continue;
		sigaction(sigs[i], &sa, NULL);
	}
}

int invocation_stop_signal(void)
{
	return (int)stop_signal;
}

void invocation_stop_clear(void)
{
	stop_signal = 0;
}

/* The runtime's cancelled(): a stop signal, the reader of stdout gone, or
 * (in the detached worker) the abort flip.  It is also where a turn sees a
 * detach line that arrived while it runs. */
static int cancelled(void *ctx)
{
	struct invocation *inv = ctx;
	if (stop_signal || inv->out.gone)
		return 1;
	if (feed_in_turn(&inv->feed))
		return 1;       /* a detach line arrived while this turn ran, and failed */
	if (inv->det.role == DETACH_WORKER)
		return detach_aborted(&inv->det);
	return output_gone(&inv->out);
}

/* ---- the parts ---- */

static enum core_status detached(void *ctx)
{
	struct invocation *inv = ctx;
	return inv->sink.detached(inv->sink.ctx);
}

void invocation_init(struct invocation *inv, const struct invocation_sink *sink)
{
	*inv = (struct invocation){ .sink = *sink, .store_dir = CORE_BUF_INIT(4096),
	                            .in = CORE_BUF_INIT(0), .front_exit = -1 };
	intake_init(&inv->intake);
	inv->feed = (struct feed){ .det = &inv->det, .intake = &inv->intake,
	                           .stop = &stop_signal, .front_fd = -1, .detached = detached,
	                           .ctx = inv };
	inv->t0 = core_now_ns();
	inv->stdin_open = fcntl(0, F_GETFD) != -1;
}

enum core_status invocation_model_timeout(const char *value, struct core_err *e)
{
	int64_t ms;
	if (core_duration_setting("--model-timeout", value, NULL, 0, &ms, e))
		return CORE_EUSAGE;
	if (setenv("AGENTKIT_MODEL_TIMEOUT", value, 1))
		return core_fail(e, CORE_EUSAGE, "--model-timeout: out of memory");
	return CORE_OK;
}

enum core_status invocation_read_stdin(struct invocation *inv, const struct invocation_stdin *s,
                                       struct core_err *e)
{
	inv->stdin_kind = INTAKE_NONE;
	if (!inv->stdin_open || (s->messages && isatty(0)))
		return CORE_OK;
	if (s->messages && !intake_stdin_ready(s->wait_ms, &stop_signal)) {
		inv->stdin_silent = 1;
		return CORE_OK;
	}
	return intake_read_stdin(s->format, s->max_record, &stop_signal, &inv->in,
	                         &inv->stdin_kind, e);
}

enum core_status invocation_start_intake(struct invocation *inv, int detach,
                                         size_t max_record, int *sig, struct core_err *e)
{
	*sig = 0;
	if (inv->stdin_kind != INTAKE_NDJSON || detach || isatty(0))
		return CORE_OK;
	int complete = intake_all_there(&inv->in);
	int side = complete ? -1 : intake_split(&inv->feed.front_fd, &inv->front_exit, sig);
	if (side == 0 || (side < 0 && !complete))
		return CORE_OK;         /* the front (the back ran it), or no split */
	inv->feed.back = side == 1;
	return intake_start(&inv->intake, &inv->in, max_record, side == 1, e);
}

/* A server's stderr line, to the sink. */
static void mcp_line(void *ctx, const char *server, const char *line)
{
	struct invocation *inv = ctx;
	inv->sink.mcp_line(inv->sink.ctx, server, line);
}

enum core_status invocation_mcp_set(struct invocation *inv, struct core_err *e)
{
	if (!(inv->mcp_set = mcp_set_new()))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	mcp_set_stderr(inv->mcp_set, mcp_line, inv);
	if (inv->sink.elicit)
		mcp_set_elicit(inv->mcp_set, inv->sink.elicit, inv->sink.ctx);
	/* A stop ends a server's start-up at once (stop_signal is set only
	 * once invocation_catch_stops() ran: --describe and --mcp-list keep
	 * SIGTERM's default). */
	mcp_set_cancel(inv->mcp_set, cancelled, inv);
	return CORE_OK;
}

enum core_status invocation_start_mcp(struct invocation *inv, mcp_failed_fn *skipped,
                                      void *ctx, struct core_err *e)
{
	enum core_status st = invocation_mcp_set(inv, e);
	if (!st)
		st = mcp_run_add_agent(&inv->mcp, inv->agent, e);
	if (!st)
		st = mcp_run_start(inv->mcp_set, &inv->mcp, skipped, ctx, e);
	/* A stop during start-up: the run goes on to end aborted before its
	 * first turn, as after a stop while stdin is read; every server is
	 * broken, so the agent is given no MCP tool. */
	return st == CORE_ECANCELLED ? CORE_OK : st;
}

void invocation_trace(struct invocation *inv, const struct invocation_trace *t)
{
	struct trace_config c;
	if (trace_config_from_env(&c, t->on, t->file, t->service, t->version)) {
		inv->sink.warn(inv->sink.ctx, "tracing off: out of memory");
		return;
	}
	if (c.note[0])
		inv->sink.warn(inv->sink.ctx, c.note);
	if (trace_init(&c))
		inv->sink.warn(inv->sink.ctx, "tracing off: out of memory");
	agent_trace_options(t->content, t->semconv);
	agent_trace_begin(inv->agent->name, inv->agent->model, inv->t0);
	/* The servers started before tracing began: their spans now. */
	if (inv->mcp_set)
		mcp_set_trace(inv->mcp_set);
}

/* §7.2: the stream transform on every forwarded chunk; null drops it, a
 * failure stops the stream and fails the invocation (agent_ext_failed). */
static enum core_status on_chunk(void *ctx, const json_t *chunk)
{
	struct invocation *inv = ctx;
	struct core_err e = { 0 };
	json_t *shown = NULL;
	if (agent_ext_chunk(inv->ext, chunk, &shown, &e) || !shown)
		return CORE_OK;
	enum core_status st = output_chunk(&inv->out, shown);
	json_decref(shown);
	return st;
}

static void on_warn(void *ctx, const char *msg)
{
	struct invocation *inv = ctx;
	inv->sink.warn(inv->sink.ctx, msg);
}

static void worker_log(void *ctx, const char *line)
{
	struct invocation *inv = ctx;
	inv->sink.log(inv->sink.ctx, line);
}

/* A SIGTERM (SIGINT, SIGHUP) to the worker finalizes its row aborted. */
static int worker_stopped(void *ctx)
{
	return (int)stop_signal;
}

enum core_status invocation_settings(const struct invocation_flags *f,
                                     struct invocation_open *o, struct core_err *e)
{
	static const char *const names[] = { [RT_BUSY_WAIT] = "wait", [RT_BUSY_FAIL] = "fail",
	                                     [RT_BUSY_FORK] = "fork" };
	const char *on_busy = f->on_busy;
	size_t i;
	if (core_duration_setting("--heartbeat-interval", f->hb_interval,
	                          "AGENTKIT_HEARTBEAT_INTERVAL", DETACH_HEARTBEAT_INTERVAL_MS,
	                          &o->hb_interval_ms, e)
	    || store_heartbeat_timeout(f->hb_timeout, &o->hb_timeout_ms, e))
		return CORE_EUSAGE;
	o->on_busy = RT_BUSY_WAIT;
	for (i = 0; on_busy && i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(on_busy, names[i]))
			break;
	if (on_busy && i == sizeof names / sizeof names[0])
		return core_fail(e, CORE_EUSAGE, "--on-busy must be wait, fail or fork, got '%s'",
		                 on_busy);
	if (on_busy)
		o->on_busy = (enum rt_busy)i;
	return core_duration_setting("--busy-timeout", f->busy_timeout, "AGENTKIT_BUSY_TIMEOUT",
	                             INVOCATION_BUSY_TIMEOUT_MS, &o->busy_timeout_ms, e);
}

static enum core_status open_rt(struct invocation *inv, const struct invocation_open *o,
                                struct core_err *e);

enum core_status invocation_open(struct invocation *inv, const struct invocation_open *o,
                                 struct core_err *e)
{
	enum core_status st;
	if (!o->no_store) {
		if (!(st = store_default_path(o->store_path, &inv->store_dir, e)))
			st = store_open(inv->store_dir.p, &inv->store, e);
		if (!st && o->cont)
			st = feed_continue(inv->store, inv->agent->name, inv->init, e);
		if (st)
			return st;
	}
	inv->opened = *o;
	agent_ext_set_cancel(inv->ext, cancelled, inv);         /* its docs and transforms */
	return open_rt(inv, o, e);
}

enum core_status invocation_reopen(struct invocation *inv, struct core_err *e)
{
	json_t *init = NULL;
	if (inv->store) {
		init = json_pack("{s:s}", "sessionId", rt_session_id(inv->rt));
	} else {
		json_t *out = rt_output(inv->rt);
		const json_t *state = json_object_get(out, "state");
		init = state ? json_pack("{s:O}", "state", state) : NULL;
		json_decref(out);
	}
	if (!init)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	rt_free(inv->rt);
	inv->rt = inv->det.rt = NULL;
	json_decref(inv->init);
	inv->init = init;
	return open_rt(inv, &inv->opened, e);
}

/* The runtime of invocation_open() over inv->init. */
static enum core_status open_rt(struct invocation *inv, const struct invocation_open *o,
                                struct core_err *e)
{
	enum core_status st;
	struct rt_sink sink = { on_chunk, on_warn, inv };       /* rt_open() copies it */
	struct rt_config cfg = {
		.agent = inv->agent, .store = inv->store, .init = inv->init, .sink = &sink,
		.store_location = inv->store ? inv->store_dir.p : NULL,
		.heartbeat_timeout_ms = o->hb_timeout_ms,
		.cancelled = cancelled, .cancel_ctx = inv,
		.ext = inv->ext,
		.on_busy = o->on_busy, .busy_timeout_ms = o->busy_timeout_ms,
		.claimed_id = o->claimed_id,
	};
	if ((st = rt_open(&cfg, &inv->rt, e)))
		return st;
	if (inv->agent->delegation)
		render_delegates(&inv->out.view, delegate_names(inv->agent->delegation));
	agent_trace_session(rt_session_id(inv->rt));
	inv->feed.approve = inv->sink.approve;  /* set by now: the command's options are read */
	inv->feed.approve_ctx = inv->sink.ctx;
	inv->det.rt = inv->rt;
	inv->det.agent = inv->agent->name;
	inv->det.store = &inv->store;
	inv->det.store_path = inv->store_dir.p;
	inv->det.hb_interval_ms = o->hb_interval_ms;
	inv->det.lease_ms = o->hb_timeout_ms;
	inv->det.sink = (struct detach_sink){ worker_log, worker_stopped, inv };
	return CORE_OK;
}

void invocation_run(struct invocation *inv, const char *const *messages, size_t n,
                    int detach, size_t max_record)
{
	const struct core_buf *text = inv->stdin_kind == INTAKE_TEXT ? &inv->in : NULL;
	if (inv->intake.on)
		feed_intake(&inv->feed);
	else if (inv->stdin_kind == INTAKE_NDJSON)
		feed_stdin(&inv->feed, &inv->in, max_record, detach);
	else
		feed_messages(&inv->feed, messages, n, text, detach);
}

enum core_status invocation_run_claimed(struct invocation *inv, const json_t *row,
                                        struct core_err *e)
{
	const json_t *run = json_object_get(json_object_get(row, STORE_INFO_KEY), "run"), *in;
	enum core_status st;
	size_t i;
	json_array_foreach(json_object_get(run, "inputs"), i, in)
		if ((st = detach_queue_add(&inv->det.queue, in, e)))
			return st;
	rt_unlock_session(inv->rt);     /* a worker runs without it, as a detached one */
	inv->det.worker_st = detach_run_worker(&inv->det, row, NULL);
	return CORE_OK;
}

enum core_status invocation_detached(struct invocation *inv)
{
	json_decref(inv->output);
	inv->output = json_pack("{s:s, s:s, s:s}", "finishReason", "detached",
	                        "sessionId", inv->det.session[0] ? inv->det.session
	                                                         : rt_session_id(inv->rt),
	                        "snapshotId", inv->det.id);
	return inv->output ? CORE_OK : CORE_ENOMEM;
}

enum core_status invocation_finish(struct invocation *inv, struct core_err *note)
{
	*note = (struct core_err){ 0 };
	if (stop_signal || inv->out.gone)
		rt_abort(inv->rt);      /* stopped between turns; a no-op once a turn ended it */
	rt_finish(inv->rt);     /* a custom agent's end, failed transforms */
	if (!(inv->output = rt_output(inv->rt)))
		return CORE_ENOMEM;
	/* Its result, the state transform; only a non-OK return is a note
	 * (e may be filled on the way all the same). */
	note->st = agent_ext_output(inv->ext, inv->output, note);
	return rt_exit_status(inv->rt, inv->output);
}

void invocation_close(struct invocation *inv, enum core_status st)
{
	struct core_err e = { 0 };
	agent_trace_end(st, inv->output);
	if (trace_finish(NULL, &e))
		inv->sink.warn(inv->sink.ctx, e.msg);
	json_decref(inv->output);
	detach_run_release(&inv->det);
	rt_leave_at_exit(inv->rt);
	rt_free(inv->rt);
	store_close(inv->store);
	core_buf_release(&inv->store_dir);
	agent_ext_free(inv->ext);
	agent_free(inv->agent);
	json_decref(inv->init);
	mcp_set_free(inv->mcp_set);
	mcp_config_release(&inv->mcp);
	core_buf_release(&inv->in);
	intake_release(&inv->intake);
	output_release(&inv->out);
	if (inv->feed.front_fd >= 0)
		close(inv->feed.front_fd);
}
