/*
 * store-worker.c - a test helper that drives the store interface the way
 * the runtime does: raw reads, SaveSnapshot with the runtime's functions
 * (heartbeat, finalize, abort), a detached worker loop, RMW counters and
 * turn rows with growing histories.  Prints JSON on stdout; exits with
 * core_exit_code() of the outcome.
 *
 *   store-worker [--store PATH] [--metadata-only] [--new] COMMAND ARGS...
 *     (--new: saves and incr say STORE_NEW, as a turn's save does)
 *     get ID | latest SID            raw rows (unshaped), "null" not found
 *     texts ID N                     the first N messages of ID's state as
 *                                    the store keeps them, a line each
 *     save ID JSON                   SaveSnapshot with fn returning JSON
 *                                    (ID "" mints one); prints the row
 *     noop ID                        SaveSnapshot whose fn writes nothing
 *     beat ID                        one heartbeat (Genkit's beatHeartbeat)
 *     finalize ID [STATUS [REASON]]  finalizePendingSnapshot's rewrite
 *     abort ID                       abortPendingSnapshot; prints status
 *     run ID INTERVAL BEATS          a detached worker: beat every
 *                                    INTERVAL; finalize "aborted" when the
 *                                    abort flip is seen, else "completed"
 *                                    after BEATS beats
 *     incr ID N                      N read-modify-writes of state.custom.n
 *     turn SID ID PARENT TEXT        a turn row: the parent's messages plus
 *                                    a user and a model message
 *     hammer SID                     write turn rows forever (kill -9 test)
 *     log ID N TEXT                  append N worker log lines "TEXT 1"..
 *                                    (TEXT alone when N is 1); prints
 *                                    {"appended": N, "usPerAppend": mean}
 *     subscribe ID TIMEOUT           print the status, then every change,
 *                                    until terminal/missing/TIMEOUT
 *     history SID                    a long-lived writer of one session:
 *                                    NDJSON edits on stdin change one live
 *                                    message array in place, as a runtime
 *                                    holding a session would:
 *                                      {"append":MSG}  {"truncate":N}
 *                                      {"edit":[I,KEY,VALUE]} (in place)
 *                                      {"save":ID}  (parent: the last save;
 *                                                    prints the messages)
 *                                      {"save":ID,"kept":K,"base":B}  with
 *                                        store_save_on(): K messages kept
 *                                        from B (default: the last save)
 *                                      {"rm":true}  (the session, through
 *                                                    another handle)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../libcore/base/json.h"
#include "../../libcore/base/util.h"
#include "../../store/store.h"

static unsigned flags;

static void now_str(char *buf)
{
	core_time_format(core_now_ns(), buf);
}

static enum core_status print_text(void *ctx, const char *json, size_t n, struct core_err *e)
{
	(void)ctx;
	(void)e;
	fwrite(json, 1, n, stdout);
	putchar('\n');
	return CORE_OK;
}

static void print(const json_t *v)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (!v)
		core_buf_adds(&b, "null");
	else
		jv_dump(v, &b);
	printf("%s\n", b.p);
	fflush(stdout);
	core_buf_release(&b);
}

static enum core_status fn_const(const json_t *existing, json_t **next, void *ctx,
                                 struct core_err *e)
{
	*next = json_deep_copy(ctx);
	return CORE_OK;
}

static enum core_status fn_noop(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e)
{
	*next = NULL;
	return CORE_OK;
}

static const char *status_of(const json_t *row)
{
	const json_t *s = json_object_get(row, "status");
	return json_is_string(s) ? json_string_value(s) : "";
}

static enum core_status fn_beat(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e)
{
	char t[CORE_TIME_MAX];
	*next = NULL;
	if (!existing || store_status_terminal(status_of(existing)))
		return CORE_OK;
	*next = json_deep_copy(existing);
	now_str(t);
	json_object_set_new(*next, "heartbeatAt", json_string(t));
	return CORE_OK;
}

struct fin {
	const char *status, *reason;
};

static enum core_status fn_finalize(const json_t *existing, json_t **next, void *ctx,
                                    struct core_err *e)
{
	struct fin *f = ctx;
	char t[CORE_TIME_MAX];
	json_t *state = json_pack("{s:[]}", "messages");
	now_str(t);
	*next = NULL;
	if (existing && !strcmp(status_of(existing), "aborting")) {
		*next = json_deep_copy(existing);
		json_object_set_new(*next, "status", json_string("aborted"));
		json_object_set_new(*next, "finishReason", json_string("aborted"));
		json_object_set_new(*next, "state", state);
		json_object_set_new(*next, "updatedAt", json_string(t));
		json_object_del(*next, "heartbeatAt");
		return CORE_OK;
	}
	if (!existing || store_status_terminal(status_of(existing))) {
		json_decref(state);
		return CORE_OK;
	}
	*next = json_object();
	json_object_set(*next, "sessionId", json_object_get(existing, "sessionId"));
	if (json_object_get(existing, "parentId"))
		json_object_set(*next, "parentId", json_object_get(existing, "parentId"));
	json_object_set(*next, "createdAt", json_object_get(existing, "createdAt"));
	json_object_set_new(*next, "updatedAt", json_string(t));
	json_object_set_new(*next, "status", json_string(f->status));
	if (f->reason)
		json_object_set_new(*next, "finishReason", json_string(f->reason));
	if (!strcmp(f->status, "failed"))
		json_object_set_new(*next, "error",
		                    json_pack("{s:s,s:s}", "status", "INTERNAL",
		                              "message", "generate: model melted"));
	json_object_set_new(*next, "state", state);
	return CORE_OK;
}

static enum core_status fn_abort(const json_t *existing, json_t **next, void *ctx,
                                 struct core_err *e)
{
	char t[CORE_TIME_MAX];
	*next = NULL;
	if (!existing || strcmp(status_of(existing), "pending"))
		return CORE_OK;
	*next = json_deep_copy(existing);
	now_str(t);
	json_object_set_new(*next, "status", json_string("aborting"));
	json_object_set_new(*next, "updatedAt", json_string(t));
	return CORE_OK;
}

static enum core_status fn_incr(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e)
{
	json_t *n;
	char t[CORE_TIME_MAX];
	if (existing) {
		*next = json_deep_copy(existing);
		n = json_object_get(json_object_get(json_object_get(*next, "state"), "custom"), "n");
		json_integer_set(n, json_integer_value(n) + 1);
		return CORE_OK;
	}
	now_str(t);
	*next = json_pack("{s:s,s:s,s:s,s:{s:{s:i}}}", "sessionId", "counter",
	                  "createdAt", t, "updatedAt", t, "state", "custom", "n", 1);
	return CORE_OK;
}

struct turn {
	json_t *parent_state;
	const char *sid, *parent, *text;
};

static enum core_status fn_turn(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e)
{
	struct turn *tu = ctx;
	char t[CORE_TIME_MAX];
	json_t *state = tu->parent_state ? json_deep_copy(tu->parent_state)
	                                 : json_pack("{s:[],s:{}}", "messages", "custom");
	json_t *msgs = json_object_get(state, "messages");
	now_str(t);
	json_array_append_new(msgs, json_pack("{s:s,s:[{s:s}]}", "role", "user",
	                                      "content", "text", tu->text));
	json_array_append_new(msgs, json_pack("{s:s,s:[{s:s}]}", "role", "model",
	                                      "content", "text", tu->text));
	json_object_set_new(state, "sessionId", json_string(tu->sid));
	*next = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:o}", "sessionId", tu->sid,
	                  "parentId", tu->parent, "createdAt", t, "updatedAt", t,
	                  "status", "completed", "finishReason", "stop", "state", state);
	return CORE_OK;
}

static enum core_status do_turn(struct store *s, const char *sid, const char *id,
                                const char *parent, const char *text, json_t **out,
                                struct core_err *e)
{
	struct turn tu = { NULL, sid, parent, text };
	json_t *prow = NULL;
	enum core_status st;
	if (*parent) {
		if ((st = store_get(s, parent, 0, &prow, e)) != CORE_OK)
			return st;
		tu.parent_state = json_object_get(prow, "state");
	}
	st = store_save(s, id, 0, fn_turn, &tu, out, e);
	json_decref(prow);
	return st;
}

struct hist {
	const char *sid;
	char parent[STORE_ID_MAX + 1];
	json_t *msgs;           /* live, changed in place between saves */
};

static enum core_status fn_hist(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e)
{
	struct hist *h = ctx;
	char now[CORE_TIME_MAX];
	now_str(now);
	*next = json_pack("{s:s,s:s,s:s,s:s,s:{s:O}}", "sessionId", h->sid, "parentId",
	                  h->parent, "createdAt", now, "status", "completed", "state",
	                  "messages", h->msgs);
	return *next ? CORE_OK : core_fail(e, CORE_ENOMEM, "out of memory");
}

static enum core_status run_history(struct store *s, const char *path, const char *sid,
                                    struct core_err *e)
{
	struct hist h = { sid, "", json_array() };
	enum core_status st = CORE_OK;
	char line[65536];
	size_t lineno = 0;
	while (st == CORE_OK && fgets(line, sizeof line, stdin)) {
		json_t *cmd = jv_parse(line, strlen(line), "stdin", ++lineno, e), *x;
		if (!cmd)
			return e->st;
		if ((x = json_object_get(cmd, "append"))) {
			json_array_append(h.msgs, x);
		} else if ((x = json_object_get(cmd, "truncate"))) {
			while (json_array_size(h.msgs) > (size_t)json_integer_value(x))
				json_array_remove(h.msgs, json_array_size(h.msgs) - 1);
		} else if ((x = json_object_get(cmd, "edit"))) {
			json_object_set(json_array_get(h.msgs, json_integer_value(json_array_get(x, 0))),
			                json_string_value(json_array_get(x, 1)), json_array_get(x, 2));
		} else if ((x = json_object_get(cmd, "save"))) {
			const json_t *b = json_object_get(cmd, "base");
			struct store_base base = { b ? json_string_value(b) : h.parent,
			                           (size_t)json_integer_value(json_object_get(cmd, "kept")) };
			st = store_save_on(s, json_string_value(x), 0,
			                   json_object_get(cmd, "kept") ? &base : NULL, fn_hist, &h,
			                   NULL, e);
			snprintf(h.parent, sizeof h.parent, "%s", json_string_value(x));
			print(h.msgs);
		} else if (json_object_get(cmd, "rm")) {
			struct store *other;
			if ((st = store_open(path, &other, e)) == CORE_OK) {
				st = store_delete_session(other, sid, NULL, NULL, NULL, e);
				store_close(other);
			}
		}
		json_decref(cmd);
	}
	json_decref(h.msgs);
	return st;
}

static int64_t duration(const char *s)
{
	int64_t ms = 0;
	struct core_err e = { 0 };
	if (core_parse_duration(s, &ms, &e) != CORE_OK) {
		fprintf(stderr, "store-worker: %s\n", e.msg);
		exit(100);
	}
	return ms;
}

static enum core_status run_worker(struct store *s, const char *id, int64_t interval,
                                   long beats, struct core_err *e)
{
	struct fin f = { "completed", "stop" };
	json_t *row = NULL;
	enum core_status st;
	long i;
	for (i = 0; i < beats; i++) {
		uint32_t seq = store_change_seq(s);
		if ((st = store_get(s, id, STORE_METADATA_ONLY, &row, e)) != CORE_OK)
			return st;
		if (!strcmp(status_of(row), "aborting") || !strcmp(status_of(row), "aborted")) {
			json_decref(row);
			f.status = "aborted";
			f.reason = "aborted";
			break;
		}
		json_decref(row);
		st = store_wait_change(s, seq, interval, e);
		if (st == CORE_OK)
			continue;       /* a status changed: re-read */
		if (st != CORE_ETIMEOUT)
			return st;
		if ((st = store_save(s, id, STORE_METADATA_ONLY, fn_beat, NULL, NULL, e)) != CORE_OK)
			return st;
	}
	st = store_save(s, id, 0, fn_finalize, &f, &row, e);
	if (st == CORE_OK)
		print(row);
	json_decref(row);
	return st;
}

/* log ID N TEXT: N appends, timed. */
static enum core_status log_lines(struct store *s, const char *id, long n, const char *text,
                                  struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = CORE_OK;
	int64_t t0 = core_now_ns();
	long k;
	for (k = 1; k <= n && st == CORE_OK; k++) {
		core_buf_reset(&b);
		if (n == 1 ? core_buf_adds(&b, text) : core_buf_addf(&b, "%s %ld", text, k))
			st = core_fail(e, CORE_ENOMEM, "out of memory");
		else
			st = store_log_append(s, id, core_now_ns(), b.p, e);
	}
	if (st == CORE_OK)
		printf("{\"appended\":%ld,\"usPerAppend\":%.1f}\n", n,
		       n ? (double)(core_now_ns() - t0) / 1000.0 / (double)n : 0.0);
	core_buf_release(&b);
	return st;
}

int main(int argc, char **argv)
{
	struct core_buf path = CORE_BUF_INIT(4096);
	struct core_err e = { 0 };
	const char *store_arg = NULL, *cmd;
	struct store *s = NULL;
	json_t *row = NULL;
	enum core_status st;
	int i = 1;

	for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
		if (!strcmp(argv[i], "--store") && i + 1 < argc)
			store_arg = argv[++i];
		else if (!strcmp(argv[i], "--metadata-only"))
			flags |= STORE_METADATA_ONLY;
		else if (!strcmp(argv[i], "--new"))
			flags |= STORE_NEW;
		else
			break;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: store-worker [--store PATH] COMMAND ARGS...\n");
		return 100;
	}
	cmd = argv[i++];
	argc -= i;
	argv += i;
	if ((st = store_default_path(store_arg, &path, &e)) != CORE_OK ||
	    (st = store_open(path.p, &s, &e)) != CORE_OK)
		goto out;

#define NEED(n) do { if (argc < (n)) { fprintf(stderr, "store-worker %s: missing arguments\n", cmd); st = CORE_EUSAGE; goto out; } } while (0)
	if (!strcmp(cmd, "get") || !strcmp(cmd, "latest")) {
		NEED(1);
		st = (*cmd == 'g' ? store_get : store_latest)(s, argv[0], flags, &row, &e);
		print(st == CORE_OK ? row : NULL);
	} else if (!strcmp(cmd, "texts")) {
		NEED(2);
		st = store_message_texts(s, argv[0], (size_t)atol(argv[1]), print_text, NULL, &e);
	} else if (!strcmp(cmd, "save")) {
		json_t *v;
		NEED(2);
		if (!(v = jv_parse(argv[1], strlen(argv[1]), "argv", 1, &e))) {
			st = e.st;
			goto out;
		}
		st = store_save(s, argv[0], flags, fn_const, v, &row, &e);
		json_decref(v);
		if (st == CORE_OK)
			print(row);
	} else if (!strcmp(cmd, "noop")) {
		NEED(1);
		st = store_save(s, argv[0], flags, fn_noop, NULL, &row, &e);
		if (st == CORE_OK)
			print(row);
	} else if (!strcmp(cmd, "beat")) {
		NEED(1);
		st = store_save(s, argv[0], STORE_METADATA_ONLY, fn_beat, NULL, &row, &e);
		if (st == CORE_OK)
			print(row);
	} else if (!strcmp(cmd, "finalize")) {
		struct fin f = { argc > 1 ? argv[1] : "completed", argc > 2 ? argv[2] : NULL };
		NEED(1);
		st = store_save(s, argv[0], 0, fn_finalize, &f, &row, &e);
		if (st == CORE_OK)
			print(row);
	} else if (!strcmp(cmd, "abort")) {
		NEED(1);
		st = store_save(s, argv[0], STORE_METADATA_ONLY, fn_abort, NULL, &row, &e);
		if (st == CORE_OK)
			print(row);
	} else if (!strcmp(cmd, "run")) {
		NEED(3);
		st = run_worker(s, argv[0], duration(argv[1]), atol(argv[2]), &e);
	} else if (!strcmp(cmd, "incr")) {
		long n, k;
		NEED(2);
		n = atol(argv[1]);
		for (k = 0, st = CORE_OK; k < n && st == CORE_OK; k++)
			st = store_save(s, argv[0], flags & STORE_NEW, fn_incr, NULL, NULL, &e);
	} else if (!strcmp(cmd, "turn")) {
		NEED(4);
		st = do_turn(s, argv[0], argv[1], argv[2], argv[3], &row, &e);
		if (st == CORE_OK)
			print(row);
	} else if (!strcmp(cmd, "hammer")) {
		char parent[64] = "", id[64];
		long k;
		NEED(1);
		for (k = 0, st = CORE_OK; st == CORE_OK; k++) {
			snprintf(id, sizeof id, "h-%ld-%06ld", (long)getpid(), k);
			st = do_turn(s, argv[0], id, parent, "0123456789abcdef0123456789abcdef", &row, &e);
			json_decref(row);
			row = NULL;
			memcpy(parent, id, sizeof id);
		}
	} else if (!strcmp(cmd, "history")) {
		NEED(1);
		st = run_history(s, path.p, argv[0], &e);
	} else if (!strcmp(cmd, "log")) {
		NEED(3);
		st = log_lines(s, argv[0], atol(argv[1]), argv[2], &e);
	} else if (!strcmp(cmd, "subscribe")) {
		int64_t end;
		char last[32] = "";
		NEED(2);
		end = core_now_mono_ms() + duration(argv[1]);
		for (;;) {
			uint32_t seq = store_change_seq(s);
			json_t *r = NULL;
			const char *stt;
			st = store_get(s, argv[0], STORE_METADATA_ONLY, &r, &e);
			if (st == CORE_ENOTFOUND) {
				printf("closed\n");
				st = CORE_OK;
				break;
			}
			if (st != CORE_OK)
				break;
			stt = status_of(r);
			if (strcmp(stt, last)) {
				printf("%s\n", stt);
				fflush(stdout);
				snprintf(last, sizeof last, "%s", stt);
			}
			json_decref(r);
			if (store_status_terminal(last))
				break;
			st = store_wait_change(s, seq, end - core_now_mono_ms(), &e);
			if (st == CORE_ETIMEOUT) {
				printf("timeout\n");
				break;
			}
			if (st != CORE_OK)
				break;
		}
	} else {
		fprintf(stderr, "store-worker: unknown command '%s'\n", cmd);
		st = CORE_EUSAGE;
	}
out:
	if (st != CORE_OK && st != CORE_ENOTFOUND && st != CORE_ETIMEOUT)
		fprintf(stderr, "store-worker: %s\n", e.msg);
	json_decref(row);
	store_close(s);
	core_buf_release(&path);
	return core_exit_code(st);
}
