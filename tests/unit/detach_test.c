/*
 * detach_test.c - unit tests for libcore/detach's queue and worker
 * (runtime-semantics §2.1-2.3).  The worker runs here, in this process,
 * against a temporary store: no fork, no agent-run.  Each case opens an
 * invocation with the echo model or a script model, writes the pending
 * row, runs detach_run_worker() and reads the finalized row: completed,
 * failed at the first failed turn, aborted by the abort flip (pending ->
 * aborting, written with store_save() while the worker runs) or by a stop
 * signal, or left alone when someone else settled it.  Then the worker
 * detached in place from inside a turn (detach_here(), detach_finish()):
 * the turn in flight goes on unstreamed and rowless, or is rolled back to
 * the last committed row by an abort.
 */
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../libcore/agent/agent.h"
#include "../../libcore/base/buf.h"
#include "../../libcore/agent/detach.h"
#include "../../libcore/base/json.h"
#include "../../libcore/agent/runtime.h"
#include "../../libcore/base/util.h"
#include "../../store/store.h"
#include "tap.h"

static char tmpdir[PATH_MAX], store_path[PATH_MAX + 8], script_path[PATH_MAX + 32];

static char *dump(const json_t *v)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (!v)
		return strdup("(null)");
	if (jv_dump(v, &b))
		return strdup("(dump failed)");
	return core_buf_detach(&b, NULL);
}

/* Compare v's compact JSON with want. */
static void check_json(const char *name, const json_t *v, const char *want)
{
	char *got = dump(v), detail[4096];
	snprintf(detail, sizeof detail, "got %s, want %s", got, want);
	report(!strcmp(got, want), name, detail);
	free(got);
}

static json_t *msg(const char *text)
{
	return json_pack("{s:{s:s, s:[{s:s}]}}", "message", "role", "user", "content",
	                 "text", text);
}

/* ---- the queue ---- */

static void test_queue(void)
{
	struct detach_queue q = { 0 };
	struct core_err e = { 0 };
	json_t *one = msg("one"), *bare = pj("{\"detach\": true}");
	json_t *two = pj("{\"detach\": true, \"message\": {\"role\": \"user\", "
	                 "\"content\": [{\"text\": \"two\"}]}}");
	json_t *resume = pj("{\"detach\": true, \"resume\": {\"respond\": []}}");
	int ok = !detach_queue_add(&q, one, &e) && !detach_queue_add(&q, bare, &e)
	      && !detach_queue_add(&q, two, &e) && !detach_queue_add(&q, resume, &e);
	report(ok, "queue: inputs are added", e.msg);
	check_int("queue: a detach input without a payload is not queued", (long)q.n, 2);
	json_t *got = json_array();
	for (size_t i = 0; i < q.n; i++)
		json_array_append(got, q.in[i]);
	check_json("queue: in order, \"detach\" cleared", got,
	           "[{\"message\":{\"role\":\"user\",\"content\":[{\"text\":\"one\"}]}},"
	           "{\"message\":{\"role\":\"user\",\"content\":[{\"text\":\"two\"}]}}]");
	json_decref(got);
	/* The queue holds copies: the caller's inputs are its own. */
	report(json_is_true(json_object_get(two, "detach")) && q.in[1] != two,
	       "queue: the caller's input is untouched", NULL);
	json_object_set_new(one, "detach", json_true());
	report(!json_object_get(q.in[0], "detach"), "queue: a later change to the input "
	       "does not reach the queue", NULL);
	json_decref(one);
	json_decref(two);
	json_decref(bare);
	json_decref(resume);
	report(q.in[0]->refcount == 1 && q.in[1]->refcount == 1,
	       "queue: it owns the one reference to each input", NULL);
	detach_queue_release(&q);
	report(!q.in && !q.n && !q.cap, "queue: released empty", NULL);
	detach_queue_release(&q);       /* twice is harmless */
}

/* ---- the worker ---- */

struct fixture {
	struct agent *agent;
	struct store *s;
	struct runtime *rt;
	struct detach_run d;
	json_t *pending;        /* the pending row as written */
	json_t *row;            /* the row after the worker */
	json_t *log;            /* the worker's log lines */
	int chunks;             /* chunks that reached the sink */
	const char *flip_to;    /* written over the row when the worker starts */
	int signal;             /* the stop signal the sink reports */
	int here;               /* detach_here(in flight) at the next cancelled() */
	const char *here_flip;  /* ... then write this over the row */
	int chunks_at_detach;   /* chunks that had reached the sink by then */
};

static enum core_status on_chunk(void *ctx, const json_t *chunk)
{
	struct fixture *f = ctx;
	f->chunks++;
	return CORE_OK;
}

static enum core_status fn_flip(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e);

static int cancelled(void *ctx)
{
	struct fixture *f = ctx;
	if (f->here) {
		/* A detach line read while the turn runs (agent-run's back). */
		f->here = 0;
		f->chunks_at_detach = f->chunks;
		if (detach_here(&f->d, 1))
			fprintf(stderr, "detach_test: detach_here failed\n");
		struct core_err e = { 0 };
		if (f->here_flip && store_save(f->s, f->d.id, 0, fn_flip, (void *)f->here_flip,
		                               NULL, &e))
			fprintf(stderr, "detach_test: cannot flip the row: %s\n", e.msg);
	}
	return f->signal || detach_aborted(&f->d);
}

static int stopped(void *ctx)
{
	struct fixture *f = ctx;
	return f->signal;
}

/* What agent-abort writes (§2.4): pending -> aborting, updatedAt now. */
static enum core_status fn_flip(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e)
{
	char now[CORE_TIME_MAX];
	*next = NULL;
	if (!existing)
		return CORE_OK;
	*next = json_deep_copy(existing);
	core_time_format(core_now_ns(), now);
	json_object_set_new(*next, "status", json_string(ctx));
	json_object_set_new(*next, "updatedAt", json_string(now));
	return CORE_OK;
}

/* The log line; at "worker started" (the watcher runs, the turns have not
 * begun) another handle flips the row, as agent-abort would. */
static void on_log(void *ctx, const char *line)
{
	struct fixture *f = ctx;
	json_array_append_new(f->log, json_string(line));
	if (f->flip_to && !strncmp(line, "worker started", 14)) {
		struct core_err e = { 0 };
		struct store *h = NULL;
		if (store_open(store_path, &h, &e) || store_save(h, f->d.id, 0, fn_flip,
		                                                 (void *)f->flip_to, NULL, &e))
			fprintf(stderr, "detach_test: cannot flip the row: %s\n", e.msg);
		store_close(h);
	}
}

/* An invocation of an inline agent on model, and the pending row of its
 * session; then the worker on the inputs (NULL-terminated texts). */
static enum core_status run_worker(struct fixture *f, const char *model,
                                   const char *const *texts)
{
	struct core_err e = { 0 };
	struct agent_spec spec = { .model = model };
	f->log = json_array();
	if (agent_load(&spec, &f->agent, &e) || store_open(store_path, &f->s, &e)) {
		fprintf(stderr, "detach_test: %s\n", e.msg);
		exit(2);
	}
	struct rt_sink sink = { on_chunk, NULL, f };
	struct rt_config cfg = {
		.agent = f->agent, .store = f->s, .sink = &sink,
		.cancelled = cancelled, .cancel_ctx = f,
	};
	if (rt_open(&cfg, &f->rt, &e)) {
		fprintf(stderr, "detach_test: rt_open: %s\n", e.msg);
		exit(2);
	}
	for (size_t i = 0; texts[i]; i++) {
		json_t *in = msg(texts[i]);
		if (detach_queue_add(&f->d.queue, in, &e))
			exit(2);
		json_decref(in);
	}
	if (detach_pending(f->s, rt_session_id(f->rt), rt_last_snapshot_id(f->rt),
	                   rt_next_created_ns(f->rt), 0, &f->pending, &e)) {
		fprintf(stderr, "detach_test: detach_pending: %s\n", e.msg);
		exit(2);
	}
	f->d.rt = f->rt;
	f->d.agent = f->agent->name;
	f->d.store = &f->s;     /* the worker closes it and leaves its own */
	f->d.store_path = store_path;
	f->d.hb_interval_ms = 50;
	f->d.sink = (struct detach_sink){ on_log, stopped, f };
	enum core_status st = detach_run_worker(&f->d, f->pending, NULL);
	const char *id = json_string_value(json_object_get(f->pending, "snapshotId"));
	if (!f->s || store_get(f->s, id, 0, &f->row, &e)) {
		fprintf(stderr, "detach_test: the row: %s\n", f->s ? e.msg : "no store handle");
		exit(2);
	}
	return st;
}

static void fixture_release(struct fixture *f)
{
	rt_free(f->rt);
	store_close(f->s);
	agent_free(f->agent);
	detach_run_release(&f->d);
	json_decref(f->pending);
	json_decref(f->row);
	json_decref(f->log);
}

/* The row's members that the outcome decides. */
static json_t *outcome(const json_t *row)
{
	json_t *o = json_object(), *v;
	static const char *const keys[] = { "status", "finishReason", "error", "heartbeatAt" };
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
		if ((v = json_object_get(row, keys[i])))
			json_object_set(o, keys[i], v);
	return o;
}

/* "role:text" of each message of the row's state. */
static json_t *messages(const json_t *row)
{
	json_t *out = json_array(), *m;
	size_t i;
	json_array_foreach(json_object_get(json_object_get(row, "state"), "messages"), i, m) {
		const char *role = json_string_value(json_object_get(m, "role"));
		const char *text = json_string_value(json_object_get(
			json_array_get(json_object_get(m, "content"), 0), "text"));
		char buf[256];
		snprintf(buf, sizeof buf, "%s:%s", role ? role : "?", text ? text : "?");
		json_array_append_new(out, json_string(buf));
	}
	return out;
}

static const char *log_line(const struct fixture *f, size_t i)
{
	return json_string_value(json_array_get(f->log, i));
}

static void test_completed(void)
{
	struct fixture f = { 0 };
	static const char *const in[] = { "one", "two", NULL };
	enum core_status st = run_worker(&f, "echo", in);
	check_int("completed: the worker's status is the row's outcome", st, CORE_OK);
	check_int("completed: it is the worker", f.d.role, DETACH_WORKER);
	json_t *o = outcome(f.row), *m = messages(f.row);
	check_json("completed: completed, finish reason stop, no beat left", o,
	           "{\"status\":\"completed\",\"finishReason\":\"stop\"}");
	check_json("completed: every queued turn in the state", m,
	           "[\"user:one\",\"model:one\",\"user:two\",\"model:two\"]");
	json_decref(o);
	json_decref(m);
	report(json_equal(json_object_get(f.row, "createdAt"),
	                  json_object_get(f.pending, "createdAt"))
	       && json_equal(json_object_get(f.row, "sessionId"),
	                     json_object_get(f.pending, "sessionId"))
	       && !json_object_get(f.row, "parentId"),
	       "completed: createdAt and session of the pending row, no parent", NULL);
	check_int("completed: a detached run streams nothing", f.chunks, 0);
	char want[512];
	snprintf(want, sizeof want, "worker started: agent inline, session %s, snapshot %s, "
	         "parent (none), 2 inputs, heartbeat every 50ms", rt_session_id(f.rt), f.d.id);
	check_str("completed: the log names the worker", log_line(&f, 0), want);
	check_str("completed: the log, turn 1", log_line(&f, 1), "input 1 of 2: turn done");
	check_str("completed: the log, turn 2", log_line(&f, 2), "input 2 of 2: turn done");
	check_str("completed: the log, the finalize", log_line(&f, 3),
	          "finalized completed, finish reason stop");
	check_int("completed: nothing more on the log", (long)json_array_size(f.log), 4);
	report(!f.d.watch, "completed: the watcher is gone", NULL);
	fixture_release(&f);
}

static void test_failed(void)
{
	struct fixture f = { 0 };
	static const char *const in[] = { "fine", "fail", "never", NULL };
	enum core_status st = run_worker(&f, script_path, in);
	check_int("failed: the worker's status", st, CORE_FAILED);
	json_t *o = outcome(f.row), *m = messages(f.row);
	check_json("failed: failed with the model's error", o,
	           "{\"status\":\"failed\",\"finishReason\":\"failed\",\"error\":"
	           "{\"status\":\"UNAVAILABLE\",\"message\":\"generate: model melted\"}}");
	check_json("failed: the state through the last committed turn", m,
	           "[\"user:fine\",\"model:ok\"]");
	json_decref(o);
	json_decref(m);
	check_str("failed: the log, the failed turn", log_line(&f, 2),
	          "input 2 of 3: the invocation ended");
	check_str("failed: no input after it", log_line(&f, 3),
	          "finalized failed, finish reason failed: generate: model melted");
	fixture_release(&f);
}

static void test_abort_flip(void)
{
	struct fixture f = { .flip_to = "aborting" };
	static const char *const in[] = { "slow", "never", NULL };
	enum core_status st = run_worker(&f, script_path, in);
	check_int("abort: the worker's status", st, CORE_ABORTED);
	json_t *o = outcome(f.row), *m = messages(f.row);
	check_json("abort: aborting -> aborted, no beat left", o,
	           "{\"status\":\"aborted\",\"finishReason\":\"aborted\"}");
	check_json("abort: the turn in flight was cancelled and rolled back", m, "[]");
	json_decref(o);
	json_decref(m);
	check_str("abort: the log, the cancelled turn", log_line(&f, 1),
	          "input 1 of 2: the invocation ended");
	check_str("abort: the log, the flip", log_line(&f, 2), "the abort flip was seen");
	check_str("abort: the log, the finalize", log_line(&f, 3),
	          "finalized aborted, finish reason aborted");
	report(!detach_aborted(&f.d), "abort: detach_aborted() is 0 once the worker ended", NULL);
	fixture_release(&f);
}

static void test_stop_signal(void)
{
	struct fixture f = { .signal = SIGTERM };
	static const char *const in[] = { "one", NULL };
	enum core_status st = run_worker(&f, "echo", in);
	check_int("signal: the worker's status", st, CORE_ABORTED);
	json_t *o = outcome(f.row);
	check_json("signal: aborted, the caller's stop as the error", o,
	           "{\"status\":\"aborted\",\"finishReason\":\"aborted\",\"error\":"
	           "{\"status\":\"CANCELLED\",\"message\":\"context canceled\"}}");
	json_decref(o);
	check_str("signal: the log names it", log_line(&f, 2), "stopped by signal 15");
	fixture_release(&f);
}

static void test_settled(void)
{
	struct fixture f = { .flip_to = "aborted" };
	static const char *const in[] = { "slow", NULL };
	enum core_status st = run_worker(&f, script_path, in);
	check_int("settled: nothing to report", st, CORE_OK);
	check_str("settled: the row someone else settled stays", json_string_value(
	          json_object_get(f.row, "status")), "aborted");
	report(!json_object_get(f.row, "finishReason") && !json_object_get(f.row, "state"),
	       "settled: nothing written over it", NULL);
	check_str("settled: the log says so", log_line(&f, 3),
	          "the row was already settled; nothing written");
	fixture_release(&f);
}

static void test_no_store(void)
{
	struct core_err e = { 0 };
	struct agent *a = NULL;
	struct runtime *rt = NULL;
	struct store *none = NULL;
	struct agent_spec spec = { .model = "echo" };
	struct rt_sink sink = { on_chunk, NULL, NULL };
	struct rt_config cfg = { .sink = &sink };
	if (agent_load(&spec, &a, &e) || !(cfg.agent = a) || rt_open(&cfg, &rt, &e)) {
		fprintf(stderr, "detach_test: %s\n", e.msg);
		exit(2);
	}
	struct detach_run d = { .rt = rt, .agent = a->name, .store = &none,
	                        .store_path = store_path };
	enum core_status st = detach_start(&d);
	check_int("no store: FAILED_PRECONDITION", st, CORE_EPRECONDITION);
	check_int("no store: not detached", d.role, DETACH_NONE);
	json_t *out = rt_output(rt);
	check_json("no store: the invocation's failed output", json_object_get(out, "error"),
	           "{\"status\":\"FAILED_PRECONDITION\",\"message\":"
	           "\"agent \\\"inline\\\": detach requires a session store\"}");
	json_decref(out);
	detach_run_release(&d);
	rt_free(rt);
	agent_free(a);
}

/*
 * Detach in place in the middle of a turn (agent-run's back process): one
 * attached turn commits its row, then the second turn detaches from inside
 * its cancelled() poll and goes on; detach_finish() runs the queue.
 */
static void run_here(struct fixture *f, const char *model, const char *mid,
                     const struct core_err *tail, json_t **first_row)
{
	struct core_err e = { 0 };
	struct agent_spec spec = { .model = model };
	f->log = json_array();
	if (agent_load(&spec, &f->agent, &e) || store_open(store_path, &f->s, &e)) {
		fprintf(stderr, "detach_test: %s\n", e.msg);
		exit(2);
	}
	struct rt_sink sink = { on_chunk, NULL, f };
	struct rt_config cfg = {
		.agent = f->agent, .store = f->s, .sink = &sink,
		.cancelled = cancelled, .cancel_ctx = f,
	};
	if (rt_open(&cfg, &f->rt, &e)) {
		fprintf(stderr, "detach_test: rt_open: %s\n", e.msg);
		exit(2);
	}
	f->d.rt = f->rt;
	f->d.agent = f->agent->name;
	f->d.store = &f->s;
	f->d.store_path = store_path;
	f->d.hb_interval_ms = 50;
	f->d.sink = (struct detach_sink){ on_log, stopped, f };
	json_t *in = msg("one");
	if (rt_turn(f->rt, in) || store_get(f->s, rt_last_snapshot_id(f->rt), 0, first_row, &e))
		exit(2);
	json_decref(in);
	in = msg("after");
	if (detach_queue_add(&f->d.queue, in, &e))
		exit(2);
	json_decref(in);
	if (tail)
		f->d.tail = *tail;
	f->here = 1;
	in = msg(mid);
	rt_turn(f->rt, in);
	json_decref(in);
	detach_finish(&f->d);
	if (store_get(f->s, f->d.id, 0, &f->row, &e)) {
		fprintf(stderr, "detach_test: the row: %s\n", e.msg);
		exit(2);
	}
}

static void test_here_in_flight(void)
{
	struct fixture f = { 0 };
	json_t *first = NULL;
	struct core_err tail = { CORE_EINVAL, 0, "invalid JSON: bad (at <stdin>:4)" };
	run_here(&f, "echo", "mid", &tail, &first);
	check_int("in place: the worker", f.d.role, DETACH_WORKER);
	report(json_equal(json_object_get(f.row, "parentId"), json_object_get(first, "snapshotId")),
	       "in place: the pending row's parent is the last committed row", NULL);
	json_t *o = outcome(f.row), *m = messages(f.row);
	check_json("in place: the turn in flight and the queue ran, then the tail failed it", o,
	           "{\"status\":\"failed\",\"finishReason\":\"failed\",\"error\":"
	           "{\"status\":\"INVALID_ARGUMENT\",\"message\":\"invalid JSON: bad (at <stdin>:4)\"}}");
	check_json("in place: the state has the turn in flight and the queued one", m,
	           "[\"user:one\",\"model:one\",\"user:mid\",\"model:mid\",\"user:after\",\"model:after\"]");
	check_int("in place: nothing streamed after the detach", f.chunks, f.chunks_at_detach);
	char want[sizeof tail.msg + 8];
	snprintf(want, sizeof want, "then: %s", tail.msg);
	check_str("in place: the log names the tail", log_line(&f, 1), want);
	json_decref(o);
	json_decref(m);
	json_decref(first);
	fixture_release(&f);
}

static void test_here_rollback(void)
{
	struct fixture f = { .here_flip = "aborting" };
	json_t *first = NULL;
	run_here(&f, script_path, "slow", NULL, &first);
	json_t *o = outcome(f.row), *m = messages(f.row);
	check_json("in place, aborted: the turn in flight is cancelled", o,
	           "{\"status\":\"aborted\",\"finishReason\":\"aborted\"}");
	check_json("in place, aborted: the state rolls back to the last committed row", m,
	           "[\"user:one\",\"model:ok\"]");
	json_decref(o);
	json_decref(m);
	json_decref(first);
	fixture_release(&f);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

int main(void)
{
	const char *t = getenv("BATS_TEST_TMPDIR");
	if (!t || !*t)
		t = getenv("TMPDIR");
	snprintf(tmpdir, sizeof tmpdir, "%s/detach_test.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("detach_test: mkdtemp");
		return 2;
	}
	snprintf(store_path, sizeof store_path, "%s/store", tmpdir);
	snprintf(script_path, sizeof script_path, "script/%s/model.ndjson", tmpdir);
	FILE *fp = fopen(script_path + 7, "w");
	if (!fp) {
		perror("detach_test: the script");
		return 2;
	}
	/* "slow" streams its first chunk after 10 s: only a cancelled turn
	 * ends sooner, and a cancelled one commits nothing. */
	fputs("{\"when\": {\"user\": \"fail\"}, \"error\": {\"status\": \"UNAVAILABLE\", "
	      "\"message\": \"model melted\"}}\n"
	      "{\"when\": {\"user\": \"slow\"}, \"chunks\": [\"a \", \"b \"], \"delay\": \"10s\"}\n"
	      "{\"text\": \"ok\"}\n", fp);
	fclose(fp);

	test_queue();
	test_completed();
	test_failed();
	test_abort_flip();
	test_stop_signal();
	test_settled();
	test_no_store();
	test_here_in_flight();
	test_here_rollback();

	nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return tap_end();
}
