/*
 * bench-pg.c - measurements of the PostgreSQL snapshot store (bench/pg.sh
 * runs them against a server with durable commits).  Each mode prints
 * "name value unit" lines.
 *
 *   bench-pg turns URL N W       durable turn-end commits/s with W writers
 *                                (each its own session and messages, 2
 *                                new messages of 1.5 KB per turn, saves
 *                                naming their base as agent-run's do) vs
 *                                raw libpq
 *                                BEGIN/INSERT/COMMIT of the same bytes (the
 *                                turn's row as the store writes it), in 10
 *                                rounds that alternate the two
 *   bench-pg latest URL ROWS     latest-by-session among ROWS rows
 *   bench-pg growth URL N        bytes per turn of an N-turn session
 *   bench-pg insert1 URL         the peer of one durable agent-run turn as
 *                                a whole process: connect, BEGIN, INSERT
 *                                a turn's bytes (two 1.5 KB messages) into
 *                                bench_raw (made if missing), COMMIT, exit
 *   bench-pg wake URL N AGENT_WAIT   commit -> agent-wait exits; abort ->
 *                                a watching worker (its own process and
 *                                connection) sees it
 *
 * libpq is used directly only for the baseline and for staging rows (bench
 * code, not the store).
 */
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "../../libcore/base/json.h"
#include "../../libcore/base/util.h"
#include "../../store/store.h"

extern char **environ;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *why)
{
	fprintf(stderr, "bench-pg: %s: %s\n", what, why);
	exit(1);
}

static struct store *open_store(const char *url)
{
	struct store *s;
	struct core_err e = { 0 };
	if (store_open(url, &s, &e) != CORE_OK)
		die("open", e.msg);
	return s;
}

static PGconn *raw_conn(const char *url)
{
	PGconn *c = PQconnectdb(url);
	if (PQstatus(c) != CONNECTION_OK)
		die("connect", PQerrorMessage(c));
	return c;
}

static void raw_exec(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
		die(sql, PQerrorMessage(c));
	PQclear(r);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* ---- turns ---- */

/* Text of pseudo-random words, so that neither the store's rows nor the
 * baseline's compress (PostgreSQL compresses texts over 2 KB: a repeated
 * letter would make the baseline write almost nothing); a user message
 * and a model message take different parts of it. */
static char filler[3200];

static void fill(void)
{
	uint32_t x = 12345;
	size_t i;
	for (i = 0; i < sizeof filler - 1; i++) {
		x = x * 1103515245u + 12345u;
		filler[i] = (x >> 16) % 7 == 0 ? ' ' : (char)('a' + (x >> 16) % 26);
	}
}

/* A message of session sid's turn, MSG_LEN bytes of text whatever the
 * tag, so that the baseline writes as many.  The tag makes each session's
 * messages its own: the store keeps one copy of each distinct history, so
 * a message another session had already written would be no new bytes
 * (and writers that save the same message at once wait on each other). */
#define MSG_LEN 1460
static json_t *message(const char *sid, const char *role, int turn)
{
	char text[MSG_LEN + 1];
	int n = snprintf(text, sizeof text, "%s turn %d: ", sid, turn);
	if (n < 0 || n >= MSG_LEN / 2)
		die("message", "session ID too long");
	memcpy(text + n, filler + (strcmp(role, "user") ? 1600 : 0), MSG_LEN - (size_t)n);
	text[MSG_LEN] = 0;
	return json_pack("{s:s,s:[{s:s}]}", "role", role, "content", "text", text);
}

struct turn_ctx {
	json_t *state;
	const char *sid, *parent;
};

static enum core_status fn_turn(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e)
{
	struct turn_ctx *t = ctx;
	char now[CORE_TIME_MAX];
	core_time_format(core_now_ns(), now);
	*next = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:O}", "sessionId", t->sid,
	                  "parentId", t->parent, "createdAt", now, "updatedAt", now,
	                  "status", "completed", "finishReason", "stop", "state", t->state);
	return *next ? CORE_OK : CORE_ENOMEM;
}

/* The bytes a turn adds, for the baseline: its row with its two new
 * messages as the store would write them (jv_dump()). */
static char *turn_text(const char *sid, int turn)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct turn_ctx t = { json_pack("{s:[o,o],s:s}", "messages", message(sid, "user", turn),
	                                message(sid, "model", turn), "sessionId", sid), sid, "x" };
	json_t *row = NULL;
	char *text;
	fn_turn(NULL, &row, &t, NULL);
	json_object_set_new(row, "snapshotId", json_string("probe-0"));
	if (!row || jv_dump(row, &b) != CORE_OK || !(text = strdup(b.p)))
		die("turn text", "out of memory");
	json_decref(row);
	json_decref(t.state);
	core_buf_release(&b);
	return text;
}

/* n turns of session sid through the store, saved as the runtime saves a
 * turn (a new ID: STORE_NEW); the seconds they took. */
static double store_turns(const char *url, const char *sid, int n)
{
	struct store *s = open_store(url);
	struct core_err e = { 0 };
	struct turn_ctx t = { json_pack("{s:[],s:s}", "messages", "sessionId", sid), sid, "" };
	json_t *msgs = json_object_get(t.state, "messages");
	char id[64], prev[64] = "";
	double t0 = now_s();
	int i;
	for (i = 0; i < n; i++) {
		struct store_base base = { prev, json_array_size(msgs) };
		json_array_append_new(msgs, message(sid, "user", i));
		json_array_append_new(msgs, message(sid, "model", i));
		snprintf(id, sizeof id, "%s-%d", sid, i);
		t.parent = prev;
		if (store_save_on(s, id, STORE_NEW, *prev ? &base : NULL, fn_turn, &t, NULL, &e) != CORE_OK)
			die("save", e.msg);
		snprintf(prev, sizeof prev, "%s", id);
	}
	t0 = now_s() - t0;
	json_decref(t.state);
	store_close(s);
	return t0;
}

/* The baseline: n BEGIN/INSERT/COMMIT of body, one connection. */
static double raw_turns(const char *url, const char *table, int n, const char *body)
{
	PGconn *c = raw_conn(url);
	char sql[256];
	double t0;
	int i;
	snprintf(sql, sizeof sql, "INSERT INTO %s (body) VALUES ($1)", table);
	t0 = now_s();
	for (i = 0; i < n; i++) {
		const char *p[1] = { body };
		PGresult *r;
		raw_exec(c, "BEGIN");
		r = PQexecParams(c, sql, 1, NULL, p, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			die("raw insert", PQerrorMessage(c));
		PQclear(r);
		raw_exec(c, "COMMIT");
	}
	t0 = now_s() - t0;
	PQfinish(c);
	return t0;
}

/* w processes at once, each running fn; the wall time.  A process that
 * failed fails the bench: its turns were not made. */
static double parallel(int w, void (*fn)(int k, void *), void *ctx)
{
	double t0 = now_s();
	int k, status, failed = 0;
	for (k = 0; k < w; k++) {
		pid_t p = fork();
		if (p < 0)
			die("fork", strerror(errno));
		if (p == 0) {
			fn(k, ctx);
			_exit(0);
		}
	}
	for (k = 0; k < w; k++)
		if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			failed++;
	if (failed)
		die("parallel", "a writer failed");
	return now_s() - t0;
}

struct par { const char *url; int n; const char *body; int round; };

static void par_store(int k, void *ctx)
{
	struct par *p = ctx;
	char sid[48];
	snprintf(sid, sizeof sid, "w%d-r%d-%d", k, p->round, getpid());
	store_turns(p->url, sid, p->n);
}

static void par_raw(int k, void *ctx)
{
	struct par *p = ctx;
	raw_turns(p->url, "bench_raw", p->n, p->body);
}

#define ROUNDS 10

/*
 * n turns with w writers, in ROUNDS rounds that alternate the store and
 * the baseline, so that a shared machine's load and the disk's moods
 * weigh on both alike; the ratio is the median of the rounds' ratios
 * (with the lowest and highest), the rates are over all rounds.
 */
static void bench_turns(const char *url, int n, int w)
{
	PGconn *c = raw_conn(url);
	char *body = turn_text("probe", 0);
	struct par p = { url, n / ROUNDS / w, body, 0 };
	double ts = 0, tr = 0, ratio[ROUNDS];
	int k, total = p.n * w * ROUNDS;
	/* the store's schema first, so that it is not in the timing */
	store_close(open_store(url));
	raw_exec(c, "CREATE TABLE bench_raw (id bigserial PRIMARY KEY, body text NOT NULL)");
	for (k = 0; k < ROUNDS; k++) {
		double s1, r1;
		p.round = k;
		if (w == 1) {
			char sid[32];
			snprintf(sid, sizeof sid, "solo%d", k);
			s1 = store_turns(url, sid, p.n);
			r1 = raw_turns(url, "bench_raw", p.n, body);
		} else {
			s1 = parallel(w, par_store, &p);
			r1 = parallel(w, par_raw, &p);
		}
		ts += s1;
		tr += r1;
		ratio[k] = r1 / s1 * 100;
	}
	qsort(ratio, ROUNDS, sizeof ratio[0], cmp_double);
	printf("turn_commits_per_s_%dw %.0f /s (%d turns, %zu new bytes each)\n", w,
	       total / ts, total, strlen(body));
	printf("raw_libpq_commits_per_s_%dw %.0f /s (BEGIN, INSERT of those bytes, COMMIT)\n",
	       w, total / tr);
	printf("store_vs_raw_%dw %.0f %% (median of %d rounds, %.0f-%.0f %%; issue 13's "
	       "target: at least 70 %%)\n", w, (ratio[ROUNDS / 2 - 1] + ratio[ROUNDS / 2]) / 2,
	       ROUNDS, ratio[0], ratio[ROUNDS - 1]);
	raw_exec(c, "DROP TABLE bench_raw");
	free(body);
	PQfinish(c);
}

/* ---- latest ---- */

static void bench_latest(const char *url, int rows)
{
	struct store *s = open_store(url);
	PGconn *c = raw_conn(url);
	struct core_err e = { 0 };
	double *lat = calloc(1000, sizeof *lat);
	char sql[1024], sid[32];
	int i;
	/* rows rows in rows/10 sessions, staged with SQL (the bench's shortcut) */
	snprintf(sql, sizeof sql,
	         "INSERT INTO agentkit_snapshots (snapshot_id, session_id, created_ns, status, meta)"
	         " SELECT 'r' || i, 's' || (i %% %d), i, 'completed',"
	         " json_build_object('snapshotId', 'r' || i, 'sessionId', 's' || (i %% %d),"
	         " 'status', 'completed')::text FROM generate_series(1, %d) AS i",
	         rows / 10, rows / 10, rows);
	raw_exec(c, sql);
	raw_exec(c, "VACUUM ANALYZE agentkit_snapshots");
	for (i = 0; i < 1000; i++) {
		json_t *row;
		double t0;
		snprintf(sid, sizeof sid, "s%d", (i * 7919) % (rows / 10));
		t0 = now_s();
		if (store_latest(s, sid, STORE_METADATA_ONLY, &row, &e) != CORE_OK)
			die("latest", e.msg);
		lat[i] = (now_s() - t0) * 1e6;
		json_decref(row);
	}
	qsort(lat, 1000, sizeof *lat, cmp_double);
	printf("latest_by_session_p50 %.0f us (%d rows, metadata, Unix socket)\n", lat[500], rows);
	printf("latest_by_session_p99 %.0f us\n", lat[990]);
	free(lat);
	PQfinish(c);
	store_close(s);
}

/* ---- growth ---- */

static void bench_growth(const char *url, int n)
{
	PGconn *c = raw_conn(url);
	PGresult *r;
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	json_t *m0 = message("growth", "user", 0), *m1 = message("growth", "model", 0);
	long long total, wal;
	double raw;
	/* the WAL a turn writes: what each commit must get to disk */
	raw_exec(c, "CREATE TEMP TABLE bench_lsn AS SELECT pg_current_wal_lsn() AS l");
	store_turns(url, "growth", n);
	r = PQexec(c, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), l)::bigint FROM bench_lsn");
	wal = atoll(PQgetvalue(r, 0, 0));
	PQclear(r);
	raw_exec(c, "VACUUM agentkit_snapshots, agentkit_nodes");
	r = PQexec(c, "SELECT pg_total_relation_size('agentkit_snapshots') +"
	           " pg_total_relation_size('agentkit_nodes')");
	total = atoll(PQgetvalue(r, 0, 0));
	PQclear(r);
	/* the transcript: every message once */
	if (jv_dump(m0, &b) != CORE_OK || jv_dump(m1, &b) != CORE_OK)
		die("growth", "out of memory");
	raw = (double)b.len * n;
	json_decref(m0);
	json_decref(m1);
	core_buf_release(&b);
	printf("bytes_per_turn_%d %.0f B (tables and indexes)\n", n, (double)total / n);
	printf("store_vs_transcript_%d %.2f x\n", n, total / raw);
	printf("wal_per_turn_%d %.0f B (the server's, other sessions' included)\n", n,
	       (double)wal / n);
	PQfinish(c);
}

/* ---- wake ---- */

static enum core_status fn_status(const json_t *existing, json_t **next, void *ctx,
                                  struct core_err *e)
{
	char now[CORE_TIME_MAX];
	if (!existing)
		return CORE_OK;
	core_time_format(core_now_ns(), now);
	*next = json_copy((json_t *)existing);
	json_object_set_new(*next, "status", json_string(ctx));
	json_object_set_new(*next, "updatedAt", json_string(now));
	return CORE_OK;
}

static void put_pending(struct store *s, const char *id)
{
	struct core_err e = { 0 };
	char t[CORE_TIME_MAX];
	json_t *row;
	core_time_format(core_now_ns(), t);
	row = json_pack("{s:s,s:s,s:s,s:s,s:s}", "snapshotId", id, "sessionId", "wake",
	                "createdAt", t, "status", "pending", "heartbeatAt", t);
	if (store_put(s, row, &e) != CORE_OK)
		die("put", e.msg);
	json_decref(row);
}

/* A worker's abort watch, as libcore/agent/detach.c's: sequence, read, wait. */
static void watch(const char *url, const char *id, int ready)
{
	struct store *s = open_store(url);
	struct core_err e = { 0 };
	int said = 0;
	for (;;) {
		uint32_t seq = store_change_seq(s);
		json_t *row = NULL;
		const char *st;
		if (store_get(s, id, STORE_METADATA_ONLY, &row, &e) != CORE_OK)
			_exit(1);
		st = json_string_value(json_object_get(row, "status"));
		if (st && strcmp(st, "pending")) {
			json_decref(row);
			break;
		}
		json_decref(row);
		if (!said++ && write(ready, "r", 1) != 1)
			_exit(1);
		store_wait_change(s, seq, 30000, &e);
	}
	store_close(s);
	_exit(0);
}

static void bench_wake(const char *url, int n, const char *bin)
{
	struct store *s = open_store(url);
	struct core_err e = { 0 };
	double *lat = calloc(n, sizeof *lat), t0;
	char id[32], *argv[5];
	int i, status;
	pid_t pid;
	for (i = 0; i < n; i++) {
		struct timespec pause = { 0, 150 * 1000000 };
		snprintf(id, sizeof id, "w-%d-%d", getpid(), i);
		put_pending(s, id);
		argv[0] = (char *)bin;
		argv[1] = "--store";
		argv[2] = (char *)url;
		argv[3] = id;
		argv[4] = NULL;
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		if (posix_spawn(&pid, bin, &fa, NULL, argv, environ))
			die("spawn", strerror(errno));
		posix_spawn_file_actions_destroy(&fa);
		nanosleep(&pause, NULL);        /* let it start and block */
		if (store_save(s, id, 0, fn_status, "completed", NULL, &e) != CORE_OK)
			die("finalize", e.msg);
		t0 = now_s();
		waitpid(pid, &status, 0);
		lat[i] = (now_s() - t0) * 1e3;
	}
	qsort(lat, n, sizeof *lat, cmp_double);
	printf("wake_latency_p50 %.2f ms (commit -> agent-wait exited, %d runs)\n", lat[n / 2], n);
	printf("wake_latency_p90 %.2f ms\n", lat[n * 9 / 10]);
	for (i = 0; i < n; i++) {
		int fds[2];
		char c;
		snprintf(id, sizeof id, "a-%d-%d", getpid(), i);
		put_pending(s, id);
		if (pipe(fds))
			die("pipe", strerror(errno));
		if ((pid = fork()) == 0) {
			close(fds[0]);
			watch(url, id, fds[1]);
		}
		close(fds[1]);
		if (read(fds[0], &c, 1) != 1)
			die("watcher", "did not start");
		close(fds[0]);
		if (store_save(s, id, 0, fn_status, "aborting", NULL, &e) != CORE_OK)
			die("abort", e.msg);
		t0 = now_s();
		waitpid(pid, &status, 0);
		lat[i] = (now_s() - t0) * 1e3;
	}
	qsort(lat, n, sizeof *lat, cmp_double);
	printf("abort_seen_p50 %.2f ms (abort commit -> a watching worker saw it, %d runs)\n",
	       lat[n / 2], n);
	printf("abort_seen_p90 %.2f ms\n", lat[n * 9 / 10]);
	free(lat);
	store_close(s);
}

static void insert1(const char *url)
{
	PGconn *c = raw_conn(url);
	json_t *u = message("insert1", "user", 1), *m = message("insert1", "model", 1);
	char *a = json_dumps(u, JSON_COMPACT), *b = json_dumps(m, JSON_COMPACT);
	char *body = malloc(strlen(a) + strlen(b) + 2);
	sprintf(body, "%s\n%s", a, b);
	raw_exec(c, "CREATE TABLE IF NOT EXISTS bench_raw (id bigserial PRIMARY KEY, "
	         "body text NOT NULL)");
	const char *p[1] = { body };
	raw_exec(c, "BEGIN");
	PGresult *r = PQexecParams(c, "INSERT INTO bench_raw (body) VALUES ($1)", 1, NULL, p,
	                           NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		die("raw insert", PQerrorMessage(c));
	PQclear(r);
	raw_exec(c, "COMMIT");
	PQfinish(c);
	free(a);
	free(b);
	free(body);
	json_decref(u);
	json_decref(m);
}

/* ---- claims: the work queue's claim vs a raw SKIP LOCKED loop ---- */

static enum core_status fn_queued(const json_t *existing, json_t **next, void *ctx,
                                  struct core_err *e)
{
	char now[CORE_TIME_MAX];
	core_time_format(core_now_ns(), now);
	*next = json_pack("{s:s, s:s, s:s, s:s, s:{s:i, s:i, s:{s:s, s:s, s:i, s:i, s:i, s:i},"
	                  " s:{s:[], s:[{s:{s:s, s:[{s:s}]}}]}}}",
	                  "createdAt", now, "sessionId", (const char *)ctx, "status", "pending",
	                  "updatedAt", now, "agentkit", "heartbeatTimeout", 60000, "epoch", 0,
	                  "queue", "name", "bench", "agent", "echo", "concurrency", 0, "attempt", 0,
	                  "maxAttempts", 3, "notBefore", 0, "run", "args", "inputs", "message",
	                  "role", "user", "content", "text", "hi");
	return *next ? CORE_OK : CORE_ENOMEM;
}

/* What a worker's run ends with: the row settled (a finalize's write). */
static enum core_status fn_done(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e)
{
	char now[CORE_TIME_MAX];
	core_time_format(core_now_ns(), now);
	*next = json_pack("{s:O, s:O, s:s, s:s, s:s}", "createdAt",
	                  json_object_get(existing, "createdAt"), "sessionId",
	                  json_object_get(existing, "sessionId"), "status", "completed",
	                  "finishReason", "stop", "updatedAt", now);
	return *next ? CORE_OK : CORE_ENOMEM;
}

static void enqueue(const char *url, int n, int round)
{
	struct store *s = open_store(url);
	struct core_err e = { 0 };
	char id[64], sid[64];
	for (int i = 0; i < n; i++) {
		snprintf(id, sizeof id, "q%d-%d", round, i);
		snprintf(sid, sizeof sid, "s%d-%d", round, i);
		if (store_save(s, id, 0, fn_queued, sid, NULL, &e) != CORE_OK)
			die("enqueue", e.msg);
	}
	store_close(s);
}

static void par_claim(int k, void *ctx)
{
	static const char *const queues[] = { "bench", NULL };
	struct store *s = open_store(((struct par *)ctx)->url);
	struct core_err e = { 0 };
	for (;;) {
		json_t *row = NULL;
		enum core_status st = store_claim(s, queues, 0, &row, NULL, &e);
		if (st == CORE_ENOTFOUND)
			break;
		if (st)
			die("claim", e.msg);
		if (!row)
			continue;
		if (store_save(s, json_string_value(json_object_get(row, "snapshotId")),
		               STORE_METADATA_ONLY, fn_done, NULL, NULL, &e))
			die("finish", e.msg);
		json_decref(row);
	}
	store_close(s);
}

/* The peer: the same table shape (a queue index beside the rows), claimed
 * with FOR UPDATE SKIP LOCKED and settled as a job queue does it. */
static void par_raw_claim(int k, void *ctx)
{
	PGconn *c = raw_conn(((struct par *)ctx)->url);
	for (;;) {
		PGresult *r;
		raw_exec(c, "BEGIN");
		r = PQexec(c, "SELECT snapshot_id FROM bench_rawq WHERE queue = 'bench' AND "
		           "ready_ns <= 0 ORDER BY ready_ns, snapshot_id LIMIT 1 FOR UPDATE SKIP LOCKED");
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
			die("raw claim", PQerrorMessage(c));
		if (!PQntuples(r)) {
			PQclear(r);
			raw_exec(c, "COMMIT");
			break;
		}
		const char *p[1] = { PQgetvalue(r, 0, 0) };
		char id[64];
		snprintf(id, sizeof id, "%s", p[0]);
		PQclear(r);
		p[0] = id;
		r = PQexecParams(c, "UPDATE bench_rawq SET ready_ns = 9e18, lease_ns = 1 WHERE "
		                 "snapshot_id = $1", 1, NULL, p, NULL, NULL, 0);
		PQclear(r);
		r = PQexecParams(c, "UPDATE bench_raws SET meta = meta || ' claimed' WHERE "
		                 "snapshot_id = $1", 1, NULL, p, NULL, NULL, 0);
		PQclear(r);
		raw_exec(c, "COMMIT");
		r = PQexecParams(c, "WITH d AS (DELETE FROM bench_rawq WHERE snapshot_id = $1) "
		                 "UPDATE bench_raws SET status = 'completed' WHERE snapshot_id = $1",
		                 1, NULL, p, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			die("raw finish", PQerrorMessage(c));
		PQclear(r);
	}
	PQfinish(c);
}

/*
 * n queued runs claimed and settled by w processes, in rounds that
 * alternate agentkit's claim (store_claim() and the finalize's write)
 * with the peer's loop on tables of the same shape; claims per second
 * over all rounds, the ratio the median of the rounds'.
 */
static void bench_claims(const char *url, int n, int w)
{
	PGconn *c = raw_conn(url);
	double ours = 0, raw = 0, ratios[ROUNDS / 2];
	raw_exec(c, "CREATE TABLE IF NOT EXISTS bench_raws (snapshot_id text PRIMARY KEY, "
	         "status text, meta text)");
	raw_exec(c, "CREATE TABLE IF NOT EXISTS bench_rawq (snapshot_id text PRIMARY KEY, "
	         "queue text, agent text, concurrency integer, ready_ns bigint, lease_ns bigint)");
	raw_exec(c, "CREATE INDEX IF NOT EXISTS bench_rawq_ready ON bench_rawq (queue, ready_ns, "
	         "snapshot_id)");
	for (int round = 0; round < ROUNDS / 2; round++) {
		struct par p = { url, n, NULL, round };
		char sql[512];
		enqueue(url, n, round);
		double a = parallel(w, par_claim, &p);
		raw_exec(c, "TRUNCATE bench_raws, bench_rawq");
		snprintf(sql, sizeof sql, "INSERT INTO bench_raws SELECT 'q' || i, 'pending', "
		         "repeat('x', 300) FROM generate_series(1, %d) i; INSERT INTO bench_rawq "
		         "SELECT 'q' || i, 'bench', 'echo', 0, 0, 0 FROM generate_series(1, %d) i", n, n);
		raw_exec(c, sql);
		double b = parallel(w, par_raw_claim, &p);
		ours += a;
		raw += b;
		ratios[round] = b / a;
	}
	qsort(ratios, ROUNDS / 2, sizeof *ratios, cmp_double);
	printf("claims_per_s_%dw %.0f 1/s\n", w, n * (ROUNDS / 2) / ours);
	printf("raw_claims_per_s_%dw %.0f 1/s\n", w, n * (ROUNDS / 2) / raw);
	printf("claims_vs_raw_%dw %.0f %%\n", w, ratios[ROUNDS / 4] * 100);
	PQfinish(c);
}

int main(int argc, char **argv)
{
	fill();
	if (argc >= 3 && !strcmp(argv[1], "insert1")) {
		insert1(argv[2]);
		return 0;
	}
	if (argc >= 5 && !strcmp(argv[1], "turns"))
		bench_turns(argv[2], (int)strtol(argv[3], NULL, 10), (int)strtol(argv[4], NULL, 10));
	else if (argc >= 4 && !strcmp(argv[1], "latest"))
		bench_latest(argv[2], (int)strtol(argv[3], NULL, 10));
	else if (argc >= 4 && !strcmp(argv[1], "growth"))
		bench_growth(argv[2], (int)strtol(argv[3], NULL, 10));
	else if (argc >= 5 && !strcmp(argv[1], "claims"))
		bench_claims(argv[2], (int)strtol(argv[3], NULL, 10), (int)strtol(argv[4], NULL, 10));
	else if (argc >= 5 && !strcmp(argv[1], "wake"))
		bench_wake(argv[2], (int)strtol(argv[3], NULL, 10), argv[4]);
	else {
		fprintf(stderr, "usage: bench-pg turns|latest|growth|insert1|claims|wake URL ...\n");
		return 100;
	}
	return 0;
}
