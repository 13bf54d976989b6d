/*
 * bench-store.c - measurements of the snapshot store (bench/store.sh runs
 * them).  Each mode prints "name value unit" lines.
 *
 *   bench-store turns DIR N            durable turn-end commits/s (one
 *                                      writer, 2 messages of ~1.5 KB per
 *                                      turn) vs raw LMDB synced txns of the
 *                                      same bytes, saves naming their base
 *                                      (as agent-run's) and plain ones
 *   bench-store latest DIR SESSIONS ROWS   latest-by-session, in-process
 *   bench-store meta DIR               metadata read, 1 MB vs 1 KB state
 *   bench-store growth DIR N           data.mdb bytes for an N-turn session
 *   bench-store wake DIR N AGENT_WAIT  agent-wait wake-up latency and CPU
 *
 * Raw LMDB is used only as the baseline (bench code, not the store).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lmdb.h>

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

static void die(const char *what, const struct core_err *e)
{
	fprintf(stderr, "bench-store: %s: %s\n", what, e ? e->msg : strerror(errno));
	exit(1);
}

static struct store *open_store(const char *dir)
{
	struct store *s;
	struct core_err e = { 0 };
	if (store_open(dir, &s, &e) != CORE_OK)
		die("open", &e);
	return s;
}

/* ---- turns ---- */

static char filler[1600];

static json_t *message(const char *role, int turn)
{
	char text[1700];
	snprintf(text, sizeof text, "turn %d: %s", turn, filler);
	return json_pack("{s:s,s:[{s:s}]}", "role", role, "content", "text", text);
}

struct turn_ctx {
	json_t *state;          /* live session state, grows by 2 messages */
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
	return CORE_OK;
}

/* Raw LMDB: synced txns each putting the bytes a turn writes. */
struct raw {
	MDB_env *env;
	MDB_dbi dbi;
	char *val;
	size_t bytes;
	long next;
};

static void raw_open(struct raw *r, const char *dir, size_t bytes)
{
	MDB_txn *t;
	r->bytes = bytes;
	r->next = 0;
	if (!(r->val = malloc(bytes)))
		die("raw", NULL);
	memset(r->val, 'x', bytes);
	mkdir(dir, 0700);
	if (mdb_env_create(&r->env) || mdb_env_set_mapsize(r->env, (size_t)1 << 32) ||
	    mdb_env_set_maxdbs(r->env, 4) || mdb_env_open(r->env, dir, MDB_NOTLS, 0600) ||
	    mdb_txn_begin(r->env, NULL, 0, &t) || mdb_dbi_open(t, "raw", MDB_CREATE, &r->dbi) ||
	    mdb_txn_commit(t))
		die("raw open", NULL);
}

/* Seconds for k synced txns. */
static double raw_batch(struct raw *r, int k)
{
	double t0 = now_s();
	while (k-- > 0) {
		char key[32];
		MDB_val kv = { (size_t)snprintf(key, sizeof key, "row-%08ld", r->next++), key };
		MDB_val d = { r->bytes, r->val };
		MDB_txn *t;
		if (mdb_txn_begin(r->env, NULL, 0, &t) || mdb_put(t, r->dbi, &kv, &d, 0) ||
		    mdb_txn_commit(t))
			die("raw txn", NULL);
	}
	return now_s() - t0;
}

static void raw_close(struct raw *r)
{
	mdb_env_close(r->env);
	free(r->val);
}

/* Time spent on commits and on raw txns: all turns, and the last tenth. */
struct timing {
	double store, raw, store_last, raw_last;
	int n, n_last;
};

/*
 * n turns of one session.  With raw, every block of 10 commits is followed
 * by 10 raw txns, so both see the same disk weather.  *bytes (optional)
 * gets the turn's raw message bytes.
 */
#define BLOCK 10
static void run_turns(struct store *s, const char *sid, int n, int based, size_t *bytes,
                      struct raw *raw, struct timing *tm)
{
	struct turn_ctx t = { json_pack("{s:[],s:{s:i},s:s}", "messages", "custom", "turn", 0,
	                                "sessionId", sid), sid, "" };
	char id[64], parent[64] = "";
	struct core_err e = { 0 };
	double t0 = now_s();
	int i;
	for (i = 0; i < n; i++) {
		json_t *msgs = json_object_get(t.state, "messages");
		json_t *u = message("user", i), *m = message("model", i);
		if (bytes) {
			struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
			jv_dump(u, &b);
			jv_dump(m, &b);
			*bytes = b.len;
			core_buf_release(&b);
		}
		json_array_append_new(msgs, u);
		json_array_append_new(msgs, m);
		snprintf(id, sizeof id, "%s-%06d", sid, i);
		t.parent = parent;
		/* based: the history continues the parent's, as agent-run says */
		struct store_base base = { parent, 2 * (size_t)i };
		if (store_save_on(s, id, 0, based && i ? &base : NULL, fn_turn, &t, NULL,
		                  &e) != CORE_OK)
			die("save", &e);
		memcpy(parent, id, sizeof id);
		if (tm && ((i + 1) % BLOCK == 0 || i + 1 == n)) {
			int k = (i % BLOCK) + 1, last = i + 1 > n - n / 10;
			double ds = now_s() - t0, dr = raw ? raw_batch(raw, k) : 0;
			tm->store += ds;
			tm->raw += dr;
			tm->n += k;
			if (last) {
				tm->store_last += ds;
				tm->raw_last += dr;
				tm->n_last += k;
			}
			t0 = now_s();
		}
	}
	json_decref(t.state);
}

static void report(const char *name, int n, double store_s, double raw_s)
{
	printf("turn_commits_per_s_%s %.0f commits/s, raw %.0f txn/s, ratio %.0f %%\n",
	       name, n / store_s, n / raw_s, 100 * raw_s / store_s);
}

static void bench_turns(const char *dir, int n)
{
	static const char *const how[2] = { "compared", "based" };
	struct core_buf raw = CORE_BUF_INIT(4096);
	struct raw r;
	struct store *s;
	size_t bytes = 0;
	char name[96], sid[32];
	core_buf_addf(&raw, "%s-raw", dir);
	s = open_store(dir);
	/* the bytes a turn writes: two messages plus ~600 B of row, state
	 * and index */
	run_turns(s, "probe", 1, 0, &bytes, NULL, NULL);
	raw_open(&r, raw.p, bytes + 600);
	printf("raw txn size %zu B (interleaved in blocks of %d)\n", bytes + 600, BLOCK);
	/* based: each save names its parent as its base (what agent-run
	 * does); compared: plain saves, the store finds the shared history
	 * itself (the handle's copy of the last history) */
	for (int b = 1; b >= 0; b--) {
		struct timing a = { 0 }, l = { 0 };
		snprintf(sid, sizeof sid, "short-%s", how[b]);
		run_turns(s, sid, 20, b, NULL, &r, &a);
		snprintf(sid, sizeof sid, "long-%s", how[b]);
		run_turns(s, sid, n, b, NULL, &r, &l);
		snprintf(name, sizeof name, "first20_%s", how[b]);
		report(name, a.n, a.store, a.raw);
		snprintf(name, sizeof name, "%d_turns_%s", n, how[b]);
		report(name, l.n, l.store, l.raw);
		snprintf(name, sizeof name, "last_%d_of_%d_%s", l.n_last, n, how[b]);
		report(name, l.n_last, l.store_last, l.raw_last);
	}
	store_close(s);
	raw_close(&r);
	core_buf_release(&raw);
}

/* ---- latest ---- */

static void bench_latest(const char *dir, int sessions, int rows)
{
	struct store *s = open_store(dir);
	struct core_err e = { 0 };
	json_t **batch = calloc(10000, sizeof *batch);
	int i, k, n = 0, reps = 200000;
	double t0, full, meta;
	for (i = 0; i < sessions; i++)
		for (k = 0; k < rows; k++) {
			char sid[32], id[48], t[CORE_TIME_MAX];
			snprintf(sid, sizeof sid, "sess-%07d", i);
			snprintf(id, sizeof id, "%s-%03d", sid, k);
			core_time_format((int64_t)1700000000 * 1000000000 + (int64_t)k * 1000000000, t);
			batch[n++] = json_pack("{s:s,s:s,s:s,s:s,s:s,s:{s:[{s:s}]}}", "snapshotId", id,
			                       "sessionId", sid, "createdAt", t, "updatedAt", t,
			                       "status", "completed", "state", "messages", "role", "user");
			if (n == 10000) {
				if (store_put_rows(s, batch, n, &e) != CORE_OK)
					die("put", &e);
				while (n)
					json_decref(batch[--n]);
			}
		}
	if (n && store_put_rows(s, batch, n, &e) != CORE_OK)
		die("put", &e);
	while (n)
		json_decref(batch[--n]);
	srand(1);
	for (int pass = 0; pass < 2; pass++) {
		t0 = now_s();
		for (i = 0; i < reps; i++) {
			char sid[32];
			json_t *row;
			snprintf(sid, sizeof sid, "sess-%07d", rand() % sessions);
			if (store_latest(s, sid, pass ? 0 : STORE_METADATA_ONLY, &row, &e) != CORE_OK)
				die("latest", &e);
			json_decref(row);
		}
		if (pass)
			full = (now_s() - t0) / reps * 1e6;
		else
			meta = (now_s() - t0) / reps * 1e6;
	}
	printf("rows %d (%d sessions x %d)\n", sessions * rows, sessions, rows);
	printf("latest_metadata_only %.2f us/op\n", meta);
	printf("latest_full_row %.2f us/op\n", full);
	free(batch);
	store_close(s);
}

/* ---- metadata read vs state size ---- */

static double meta_read(struct store *s, const char *id, int reps)
{
	struct core_err e = { 0 };
	double t0 = now_s();
	int i;
	for (i = 0; i < reps; i++) {
		json_t *row;
		if (store_get(s, id, STORE_METADATA_ONLY, &row, &e) != CORE_OK)
			die("get", &e);
		json_decref(row);
	}
	return (now_s() - t0) / reps * 1e6;
}

static void bench_meta(const char *dir)
{
	struct store *s = open_store(dir);
	struct core_err e = { 0 };
	size_t sizes[2] = { 1024, 1 << 20 };
	const char *ids[2] = { "small", "big" };
	double us[2];
	int i;
	for (i = 0; i < 2; i++) {
		char *text = malloc(sizes[i] + 1);
		json_t *row;
		memset(text, 'z', sizes[i]);
		text[sizes[i]] = 0;
		row = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:{s:s}}", "snapshotId", ids[i],
		                "sessionId", "m", "createdAt", "2026-01-01T00:00:00Z",
		                "updatedAt", "2026-01-01T00:00:00Z", "status", "pending",
		                "heartbeatAt", "2026-01-01T00:00:00Z", "state", "custom", text);
		if (store_put(s, row, &e) != CORE_OK)
			die("put", &e);
		json_decref(row);
		free(text);
	}
	meta_read(s, "small", 20000);
	for (i = 0; i < 2; i++)
		us[i] = meta_read(s, ids[i], 200000);
	printf("metadata_read_1KB_state %.2f us/op\n", us[0]);
	printf("metadata_read_1MB_state %.2f us/op\n", us[1]);
	printf("metadata_ratio_1MB_vs_1KB %.2f x\n", us[1] / us[0]);
	store_close(s);
}

/* ---- growth ---- */

static void bench_growth(const char *dir, int n)
{
	struct store *s = open_store(dir);
	struct core_buf p = CORE_BUF_INIT(4096);
	struct stat st;
	size_t bytes = 0;
	double t0 = now_s();
	run_turns(s, "grow", n, 1, &bytes, NULL, NULL);
	store_close(s);
	core_buf_addf(&p, "%s/data.mdb", dir);
	stat(p.p, &st);
	printf("turns %d, raw transcript %zu bytes (%zu per turn)\n", n, bytes * n, bytes);
	printf("data_mdb_size %lld bytes\n", (long long)st.st_size);
	printf("data_mdb_allocated %lld bytes\n", (long long)st.st_blocks * 512);
	printf("growth_ratio %.2f x raw transcript\n", (double)st.st_size / (bytes * n));
	printf("one_copy_per_snapshot_would_be %.0f MB\n",
	       (double)bytes * n * (n + 1) / 2 / 1e6);
	printf("growth_run_seconds %.1f s\n", now_s() - t0);
	core_buf_release(&p);
}

/* ---- agent-wait wake-up ---- */

static enum core_status fn_finalize(const json_t *existing, json_t **next, void *ctx,
                                    struct core_err *e)
{
	*next = json_deep_copy(existing);
	json_object_set_new(*next, "status", json_string("completed"));
	json_object_del(*next, "heartbeatAt");
	return CORE_OK;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static pid_t spawn_wait(const char *bin, const char *dir, const char *id)
{
	posix_spawn_file_actions_t fa;
	char *argv[] = { (char *)bin, "--store", (char *)dir, "--metadata-only", (char *)id, NULL };
	pid_t pid;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (posix_spawn(&pid, bin, &fa, NULL, argv, environ))
		die("spawn", NULL);
	posix_spawn_file_actions_destroy(&fa);
	return pid;
}

static void bench_wake(const char *dir, int n, const char *bin)
{
	struct store *s = open_store(dir);
	struct core_err e = { 0 };
	double *lat = calloc(n, sizeof *lat);
	struct rusage ru;
	char t[CORE_TIME_MAX], id[32];
	int i, status;
	pid_t pid;
	double t0, cpu;
	for (i = 0; i < n; i++) {
		json_t *row;
		struct timespec pause = { 0, 60 * 1000000 };
		snprintf(id, sizeof id, "w-%d", i);
		core_time_format(core_now_ns(), t);
		row = json_pack("{s:s,s:s,s:s,s:s,s:s}", "snapshotId", id, "sessionId", "wake",
		                "createdAt", t, "status", "pending", "heartbeatAt", t);
		store_put(s, row, &e);
		json_decref(row);
		pid = spawn_wait(bin, dir, id);
		nanosleep(&pause, NULL);        /* let it start and block */
		if (store_save(s, id, STORE_METADATA_ONLY, fn_finalize, NULL, NULL, &e) != CORE_OK)
			die("finalize", &e);
		t0 = now_s();                   /* after the commit */
		waitpid(pid, &status, 0);
		lat[i] = (now_s() - t0) * 1e3;
	}
	qsort(lat, n, sizeof *lat, cmp_double);
	printf("wake_latency_p50 %.2f ms (commit -> agent-wait exited, %d runs)\n", lat[n / 2], n);
	printf("wake_latency_p90 %.2f ms\n", lat[n * 9 / 10]);
	/* CPU of a process that waits 3 s without any change */
	{
		json_t *row;
		struct timespec pause = { 3, 0 };
		core_time_format(core_now_ns(), t);
		row = json_pack("{s:s,s:s,s:s,s:s}", "snapshotId", "idle", "sessionId", "wake",
		                "createdAt", t, "status", "pending");
		store_put(s, row, &e);
		json_decref(row);
		pid = spawn_wait(bin, dir, "idle");
		nanosleep(&pause, NULL);
		kill(pid, SIGTERM);
		wait4(pid, &status, 0, &ru);
		cpu = ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3 +
		      ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3;
		printf("agent_wait_cpu_while_waiting_3s %.1f ms total (startup included)\n", cpu);
	}
	free(lat);
	store_close(s);
}

int main(int argc, char **argv)
{
	memset(filler, 'a', sizeof filler - 1);
	filler[1450] = 0;
	if (argc >= 4 && !strcmp(argv[1], "turns"))
		bench_turns(argv[2], atoi(argv[3]));
	else if (argc >= 5 && !strcmp(argv[1], "latest"))
		bench_latest(argv[2], atoi(argv[3]), atoi(argv[4]));
	else if (argc >= 3 && !strcmp(argv[1], "meta"))
		bench_meta(argv[2]);
	else if (argc >= 4 && !strcmp(argv[1], "growth"))
		bench_growth(argv[2], atoi(argv[3]));
	else if (argc >= 5 && !strcmp(argv[1], "wake"))
		bench_wake(argv[2], atoi(argv[3]), argv[4]);
	else {
		fprintf(stderr, "usage: bench-store turns|latest|meta|growth|wake DIR ...\n");
		return 100;
	}
	return 0;
}
