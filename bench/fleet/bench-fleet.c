/*
 * bench-fleet.c - what one writer per session and the worker's lease
 * cost (bench/fleet.sh runs it).  Each mode prints "name value unit"
 * lines.
 *
 *   bench-fleet handoff STORE N   the session writer lock handed from a
 *                                 holder to a writer waiting for it in
 *                                 another process: from the unlock to the
 *                                 waiter holding it, median and p90 of N
 *   bench-fleet beats STORE N     a heartbeat (the lease's renewal: a
 *                                 metadata-only save of a pending row),
 *                                 median and p90 of N
 *   bench-fleet wake STORE N      a waiter in another process, asleep on a
 *                                 pending row, woken by its finalize: from
 *                                 the finalize's commit to the waiter
 *                                 holding the settled row, median and p90
 *   bench-fleet take STORE SID    (the waiter: prints when it got the lock)
 *   bench-fleet watch STORE ID    (the waiter: prints when the row settled)
 *
 * STORE is a directory (LMDB) or a PostgreSQL URL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../libcore/base/json.h"
#include "../../libcore/base/util.h"
#include "../../store/store.h"

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void die(const char *what, const struct core_err *e)
{
	fprintf(stderr, "bench-fleet: %s: %s\n", what, e->msg);
	exit(1);
}

static struct store *open_store(const char *where)
{
	struct store *s;
	struct core_err e = { 0 };
	if (store_open(where, &s, &e) != CORE_OK)
		die("open", &e);
	return s;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void report(const char *name, double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp);
	printf("%s_p50 %.0f us\n%s_p90 %.0f us\n", name, v[n / 2], name, v[n * 9 / 10]);
}

static int take(const char *where, const char *sid)
{
	struct store *s = open_store(where);
	struct core_err e = { 0 };
	printf("ready\n");
	fflush(stdout);
	if (store_session_lock(s, sid, 10000, &e) != CORE_OK)
		die("lock", &e);
	printf("%.0f\n", now_us());
	fflush(stdout);
	store_session_unlock(s, sid);
	store_close(s);
	return 0;
}

static int watch(const char *where, const char *id)
{
	struct store *s = open_store(where);
	struct core_err e = { 0 };
	json_t *row = NULL;
	const char *ids[1] = { id };
	store_change_seq(s);            /* subscribed (PostgreSQL: LISTEN) */
	printf("ready\n");
	fflush(stdout);
	if (store_wait_terminal(s, ids, 1, STORE_METADATA_ONLY, 60000, core_now_mono_ms() + 10000,
	                        2000, &row, NULL, NULL, &e) != CORE_OK)
		die("wait", &e);
	printf("%.0f\n", now_us());
	fflush(stdout);
	json_decref(row);
	store_close(s);
	return 0;
}

/* The waiter in another process: ready, then the time it reports. */
static FILE *spawn(const char *self, const char *mode, const char *where, const char *arg,
                   pid_t *pid)
{
	char line[64];
	int fd[2];
	if (pipe(fd))
		exit(1);
	if ((*pid = fork()) == 0) {
		dup2(fd[1], 1);
		execl(self, self, mode, where, arg, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	FILE *f = fdopen(fd[0], "r");
	if (!f || !fgets(line, sizeof line, f))         /* "ready": it opened the store */
		exit(1);
	/* long enough for it to be asleep */
	struct timespec ts = { 0, 30 * 1000000L };
	nanosleep(&ts, NULL);
	return f;
}

static double reported(FILE *f, pid_t pid)
{
	char line[64];
	int status;
	if (!fgets(line, sizeof line, f))
		exit(1);
	fclose(f);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "bench-fleet: the waiter failed\n");
		exit(1);
	}
	return strtod(line, NULL);
}

static void handoff(const char *self, const char *where, int n)
{
	struct store *s = open_store(where);
	double *v = calloc((size_t)n, sizeof *v);
	for (int i = 0; i < n; i++) {
		char sid[32];
		struct core_err e = { 0 };
		pid_t pid;
		snprintf(sid, sizeof sid, "handoff-%d", i);
		if (store_session_lock(s, sid, 0, &e) != CORE_OK)
			die("lock", &e);
		FILE *f = spawn(self, "take", where, sid, &pid);
		double released = now_us();
		store_session_unlock(s, sid);
		v[i] = reported(f, pid) - released;
	}
	report("handoff", v, n);
	store_close(s);
	free(v);
}

static enum core_status fn_put(const json_t *existing, json_t **next, void *ctx,
                               struct core_err *e)
{
	(void)existing;
	(void)e;
	*next = json_incref(ctx);
	return CORE_OK;
}

static enum core_status fn_beat(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e)
{
	char now[CORE_TIME_MAX];
	(void)ctx;
	core_time_format(core_now_ns(), now);
	if (!(*next = json_deep_copy(existing)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	json_object_set_new(*next, "heartbeatAt", json_string(now));
	return CORE_OK;
}

static enum core_status fn_settle(const json_t *existing, json_t **next, void *ctx,
                                  struct core_err *e)
{
	(void)ctx;
	if (!(*next = json_deep_copy(existing)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	json_object_set_new(*next, "status", json_string("completed"));
	return CORE_OK;
}

static void wake(const char *self, const char *where, int n)
{
	struct store *s = open_store(where);
	double *v = calloc((size_t)n, sizeof *v);
	char now[CORE_TIME_MAX];
	for (int i = 0; i < n; i++) {
		char id[32];
		struct core_err e = { 0 };
		pid_t pid;
		snprintf(id, sizeof id, "wake-%d", i);
		core_time_format(core_now_ns(), now);
		json_t *row = json_pack("{s:s,s:s,s:s,s:s}", "sessionId", "wake", "status",
		                        "pending", "createdAt", now, "heartbeatAt", now);
		if (store_save(s, id, 0, fn_put, row, NULL, &e) != CORE_OK)
			die("save", &e);
		json_decref(row);
		FILE *f = spawn(self, "watch", where, id, &pid);
		if (store_save(s, id, STORE_METADATA_ONLY, fn_settle, NULL, NULL, &e) != CORE_OK)
			die("settle", &e);
		double committed = now_us();
		v[i] = reported(f, pid) - committed;
	}
	report("wake", v, n);
	store_close(s);
	free(v);
}

static void beats(const char *where, int n)
{
	struct store *s = open_store(where);
	struct core_err e = { 0 };
	char now[CORE_TIME_MAX];
	double *v = calloc((size_t)n, sizeof *v);
	core_time_format(core_now_ns(), now);
	json_t *row = json_pack("{s:s,s:s,s:s,s:s,s:{s:i}}", "sessionId", "beats", "status",
	                        "pending", "createdAt", now, "heartbeatAt", now, STORE_INFO_KEY,
	                        "heartbeatTimeout", 60000);
	if (store_save(s, "beating", 0, fn_put, row, NULL, &e) != CORE_OK)
		die("save", &e);
	for (int i = 0; i < n; i++) {
		double t = now_us();
		if (store_save(s, "beating", STORE_METADATA_ONLY, fn_beat, NULL, NULL, &e))
			die("beat", &e);
		v[i] = now_us() - t;
	}
	report("beat", v, n);
	json_decref(row);
	store_close(s);
	free(v);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "take"))
		return take(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "watch"))
		return watch(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "wake"))
		wake(argv[0], argv[2], atoi(argv[3]));
	else if (argc == 4 && !strcmp(argv[1], "handoff"))
		handoff(argv[0], argv[2], atoi(argv[3]));
	else if (argc == 4 && !strcmp(argv[1], "beats"))
		beats(argv[2], atoi(argv[3]));
	else {
		fprintf(stderr, "usage: bench-fleet handoff|wake|beats STORE N\n");
		return 100;
	}
	return 0;
}
