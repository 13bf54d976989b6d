/*
 * store_test.c - unit tests for store/store.c, the store interface over its
 * backends: how a location chooses a backend (a directory path, a URL of
 * the PostgreSQL backend or "pg:", a URL no backend takes, refused with
 * its password redacted),
 * the checks made before any backend runs, the messages store.c writes
 * for the backends, and the passwords a location holds (path.c); and a
 * long session's turn that reads only the last message and appends
 * (STORE_LAST_MESSAGE, STORE_APPEND).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../libcore/base/json.h"
#include "../../store/store.h"
#include "tap.h"

static char tmp[] = "/tmp/agentkit-store-test.XXXXXX";

/* Opening location fails with want and exactly msg. */
static void refused(const char *name, const char *location, enum core_status want,
                    const char *msg)
{
	struct core_err e = { 0 };
	struct store *s = (struct store *)1;
	enum core_status st = store_open(location, &s, &e);
	char got[1200];
	snprintf(got, sizeof got, "status %s, message '%s'", core_status_name(st), e.msg);
	report(st == want && !s && !strcmp(e.msg, msg), name, got);
	if (s != (struct store *)1)
		store_close(s);
}

static void test_locations(void)
{
	char path[256];
	struct core_err e = { 0 };
	struct store *s = NULL;
	struct stat st;

	refused("a URL no backend takes is refused, its password redacted",
	        "redis://alice:s3cret@cache.example:6379/0", CORE_EUSAGE,
	        "'redis://***@cache.example:6379/0' is not a store directory: "
	        "this agentkit has the LMDB and PostgreSQL backends");
	refused("a postgresql:// URL opens the PostgreSQL backend: no server is a system "
	        "error, the password redacted",
	        "postgresql://alice:s3cret@/agentkit?host=/nonexistent", CORE_ESYS,
	        "cannot connect to the store at 'postgresql://***@/agentkit?host=***': "
	        "connection to server on socket \"/nonexistent/.s.PGSQL.5432\" failed: "
	        "No such file or directory");
	refused("a postgres:// URL too, any case", "POSTGRES://bob@/agentkit?host=/nonexistent",
	        CORE_ESYS, "cannot connect to the store at 'POSTGRES://***@/agentkit?host=***': "
	        "connection to server on socket \"/nonexistent/.s.PGSQL.5432\" failed: "
	        "No such file or directory");
	setenv("PGHOST", "/nonexistent", 1);
	refused("pg: leaves the connection to libpq's PG* variables", "pg:", CORE_ESYS,
	        "cannot connect to the store at 'pg:': connection to server on socket "
	        "\"/nonexistent/.s.PGSQL.5432\" failed: No such file or directory");
	unsetenv("PGHOST");
	snprintf(path, sizeof path, "%s/pg:store", tmp);
	report(store_open(path, &s, &e) == CORE_OK && s, "a path with a colon is a directory",
	       e.msg);
	store_close(s);
	report(stat(path, &st) == 0 && S_ISDIR(st.st_mode), "the directory was created",
	       path);
	s = NULL;
	report(chdir(tmp) == 0 && store_open("postgresql:rel", &s, &e) == CORE_OK && s,
	       "a relative path that starts like a scheme is a directory", e.msg);
	store_close(s);
	snprintf(path, sizeof path, "%s/absent", tmp);
	s = NULL;
	report(store_open_flags(path, STORE_OPEN_EXISTING, &s, &e) == CORE_ENOTFOUND && !s,
	       "STORE_OPEN_EXISTING and no store", e.msg);
}

static enum core_status make_row(const json_t *existing, json_t **next, void *ctx,
                                 struct core_err *e)
{
	*next = json_pack("{s:s,s:s,s:{s:[{s:s}]}}", "sessionId", "s1", "createdAt",
	                  "2026-01-01T00:00:00Z", "state", "messages", "role", "user");
	return CORE_OK;
}

static enum core_status no_row(const json_t *existing, json_t **next, void *ctx,
                               struct core_err *e)
{
	*next = json_pack("{s:s}", "status", "pending");
	return CORE_OK;
}

static enum core_status count(const json_t *row, void *ctx)
{
	++*(int *)ctx;
	return CORE_OK;
}

static void test_dispatch(void)
{
	char path[256];
	struct core_err e = { 0 };
	struct store *s = NULL;
	json_t *row = NULL;
	size_t n = 9;
	int rows = 0;

	snprintf(path, sizeof path, "%s/store", tmp);
	report(store_open(path, &s, &e) == CORE_OK, "open a directory store", e.msg);
	if (!s)
		return;
	report(store_save(s, "r1", 0, make_row, NULL, &row, &e) == CORE_OK &&
	       !strcmp(json_string_value(json_object_get(row, "status")), "completed") &&
	       !strcmp(json_string_value(json_object_get(row, "snapshotId")), "r1"),
	       "a save's row is shaped: snapshotId, default status", e.msg);
	json_decref(row);
	row = NULL;
	memset(&e, 0, sizeof e);
	report(store_save(s, "r2", 0, no_row, NULL, NULL, &e) == CORE_EINVAL &&
	       !strcmp(e.msg, "store requires sessionId to be set on the snapshot"),
	       "a save without a session is refused", e.msg);
	memset(&e, 0, sizeof e);
	report(store_get(s, "nope", 0, &row, &e) == CORE_ENOTFOUND && !row &&
	       !strcmp(e.msg, "snapshot 'nope' not found"), "get: the absent row's message",
	       e.msg);
	memset(&e, 0, sizeof e);
	report(store_get(s, "", 0, &row, &e) == CORE_EINVAL &&
	       !strcmp(e.msg, "invalid snapshot ID '': must not be empty"),
	       "get: an empty ID never reaches the backend", e.msg);
	memset(&e, 0, sizeof e);
	report(store_latest(s, "", 0, &row, &e) == CORE_EINVAL &&
	       !strcmp(e.msg, "session ID is empty"), "latest: an empty session", e.msg);
	memset(&e, 0, sizeof e);
	report(store_latest(s, "s2", 0, &row, &e) == CORE_ENOTFOUND &&
	       !strcmp(e.msg, "no snapshot found for session 's2'"),
	       "latest: a session without rows", e.msg);
	memset(&e, 0, sizeof e);
	report(store_session_rows(s, "s1", STORE_METADATA_ONLY, count, &rows, &e) ==
	       CORE_OK && rows == 1, "session rows are counted", e.msg);
	memset(&e, 0, sizeof e);
	report(store_session_rows(s, "s2", 0, count, &rows, &e) == CORE_ENOTFOUND &&
	       !strcmp(e.msg, "no snapshot found for session 's2'"),
	       "session rows: none is not found", e.msg);
	memset(&e, 0, sizeof e);
	report(store_delete_session(s, "s2", &n, NULL, NULL, &e) == CORE_ENOTFOUND && n == 0,
	       "delete: a session without rows", e.msg);
	memset(&e, 0, sizeof e);
	report(store_delete_session(s, "s1", &n, NULL, NULL, &e) == CORE_OK && n == 1,
	       "delete: the session's rows", e.msg);
	store_close(s);
	memset(&e, 0, sizeof e);
	report(store_get(NULL, "r1", 0, &row, &e) == CORE_EPRECONDITION &&
	       !strcmp(e.msg, "store is not open"), "no handle", e.msg);
}

/* The passwords store_location_password() finds in loc, "|"-joined. */
static void passwords(const char *name, const char *loc, const char *want)
{
	char got[512] = "";
	size_t at = 0, len, n = 0;
	while (store_location_password(loc, &at, &len)) {
		n += (size_t)snprintf(got + n, sizeof got - n, "%s%.*s", n ? "|" : "", (int)len,
		                      loc + at);
		at += len;
	}
	report(!strcmp(got, want), name, got);
}

static void test_secrets(void)
{
	passwords("a URL's userinfo password", "postgresql://u:pw@db/x", "pw");
	passwords("userinfo and query passwords, in order",
	          "postgresql://u:a%40b@/x?host=/s&password=kw&sslmode=require", "a%40b|kw");
	passwords("a user without a password, a directory, pg:", "postgresql://u@db/x", "");
	passwords("no password in a path", "/tmp/password=x", "");
	passwords("a ':' after the authority is no password", "postgresql://db/x:y@z", "");
	passwords("an empty password is none", "postgresql://u:@db/x?password=", "");
	passwords("libpq's keyword form, quoted", "host=h password='a b\\'c' user=u", "a b\\'c");
	passwords("the keyword at the start", "password=x dbname=y", "x");
	passwords("not a longer keyword's tail", "postgresql://db/x?oldpassword=x", "");
	report(store_secret_variable("PGPASSWORD=x") && store_secret_variable("PGPASSFILE=/p") &&
	       store_secret_variable("PGPASSWORD") &&
	       store_secret_variable("AGENTKIT_STORE=postgresql://u:pw@db/x") &&
	       store_secret_variable("AGENTKIT_STORE=pg:?password=x"),
	       "PGPASSWORD, PGPASSFILE and a store location with a password are secrets", "");
	report(!store_secret_variable("AGENTKIT_STORE=/home/u/store") &&
	       !store_secret_variable("AGENTKIT_STORE=postgresql://u@db/x") &&
	       !store_secret_variable("PGPASSWORDX=y") && !store_secret_variable("PGHOST=h") &&
	       !store_secret_variable("AGENTKIT_STORE_VERIFY=postgresql://u:pw@db/x"),
	       "a location without a password, and other variables, are not", "");
}

/* ---- a turn that appends ---- */

/* fn for a row of session "a" whose messages are ctx (a JSON array text). */
static enum core_status put_msgs(const json_t *existing, json_t **next, void *ctx,
                                 struct core_err *e)
{
	(void)existing;
	(void)e;
	*next = json_pack("{s:s, s:s, s:{s:o, s:{s:i}}}", "sessionId", "a", "status", "completed",
	                  "state", "messages", pj(ctx), "custom", "n", 1);
	return *next ? CORE_OK : CORE_ENOMEM;
}

/* The messages of row id as compact text, with how many precede them. */
static char *texts(struct store *s, const char *id, unsigned flags)
{
	json_t *row = NULL;
	struct core_err e = { 0 };
	if (store_get(s, id, flags, &row, &e))
		return strdup(e.msg);
	json_t *v = json_pack("{s:O?, s:O?}", "m", json_object_get(json_object_get(row, "state"),
	                      "messages"), "before", json_object_get(json_object_get(row,
	                      STORE_INFO_KEY), "messagesBefore"));
	char *out = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(v);
	json_decref(row);
	return out;
}

/* The appends on the store at path (a backend that appends), by two handles. */
static void test_append(const char *path, const char *backend)
{
	struct core_err e = { 0 };
	struct store *s = NULL, *other = NULL;
	char *got, what[64];
	if (store_open(path, &s, &e) || store_open(path, &other, &e)) {
		report(0, "append: open", e.msg);
		return;
	}
	snprintf(what, sizeof what, "append: the %s backend appends", backend);
	report(store_can_append(s), what, NULL);
	store_save(s, "p", 0, put_msgs, "[\"m1\",\"m2\",\"m3\"]", NULL, &e);
	got = texts(s, "p", STORE_LAST_MESSAGE);
	check_str("append: a read of the last message says how many precede it", got,
	          "{\"before\":2,\"m\":[\"m3\"]}");
	free(got);
	/* a handle that read the base chains onto it by reference */
	struct store_base base = { "p", 3 };
	report(store_save_on(s, "c1", STORE_APPEND, &base, put_msgs, "[\"m4\"]", NULL, &e) ==
	       CORE_OK, "append: a save after the base's kept messages", e.msg);
	got = texts(other, "c1", 0);
	check_str("append: the row holds the base's messages, then the new", got,
	          "{\"before\":null,\"m\":[\"m1\",\"m2\",\"m3\",\"m4\"]}");
	free(got);
	/* a handle that never read it reads its messages to chain them */
	struct store_base two = { "p", 2 };
	report(store_save_on(other, "c2", STORE_APPEND, &two, put_msgs, "[\"x\"]", NULL, &e) ==
	       CORE_OK, "append: a base this handle never read", e.msg);
	got = texts(s, "c2", 0);
	check_str("append: a fork after the base's first two", got,
	          "{\"before\":null,\"m\":[\"m1\",\"m2\",\"x\"]}");
	free(got);
	got = texts(s, "c2", STORE_LAST_MESSAGE);
	check_str("append: the fork's last message", got, "{\"before\":2,\"m\":[\"x\"]}");
	free(got);
	/* a base that is gone: refused, nothing written */
	struct store_base gone = { "nope", 1 };
	memset(&e, 0, sizeof e);
	report(store_save_on(other, "c3", STORE_APPEND, &gone, put_msgs, "[\"y\"]", NULL, &e) ==
	       CORE_ESYS && strstr(e.msg, "the history of row 'nope' this turn follows is gone"),
	       "append: a base that is gone is refused", e.msg);
	got = texts(s, "c3", 0);
	check_str("append: ... and nothing is written", got, "snapshot 'c3' not found");
	free(got);
	memset(&e, 0, sizeof e);
	report(store_save_on(s, "c4", STORE_APPEND, NULL, put_msgs, "[\"y\"]", NULL, &e) ==
	       CORE_EINVAL, "append: no base, no append", e.msg);
	store_close(other);
	store_close(s);
}

int main(void)
{
	char cmd[300];
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	test_locations();
	test_dispatch();
	test_secrets();
	snprintf(cmd, sizeof cmd, "%s/append", tmp);
	test_append(cmd, "LMDB");
	/* AGENTKIT_TEST_PG_URL: the same on PostgreSQL, in a schema of its own */
	const char *pg = getenv("AGENTKIT_TEST_PG_URL");
	if (pg && *pg) {
		char url[1024], sql[1200];
		snprintf(url, sizeof url, "%s%coptions=-csearch_path%%3Dunit_append_%ld", pg,
		         strchr(pg, '?') ? '&' : '?', (long)getpid());
		snprintf(sql, sizeof sql, "psql -qAtX '%s' -c 'CREATE SCHEMA unit_append_%ld'", pg,
		         (long)getpid());
		if (system(sql) == 0)
			test_append(url, "PostgreSQL");
		else
			report(0, "append (PostgreSQL): a schema of its own", sql);
		snprintf(sql, sizeof sql, "psql -qAtX '%s' -c 'SET client_min_messages = warning; DROP SCHEMA unit_append_%ld CASCADE'",
		         pg, (long)getpid());
		if (system(sql) != 0)
			fprintf(stderr, "store_test: could not drop the schema: %s\n", sql);
	}
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "store_test: could not remove %s\n", tmp);
	return tap_end();
}
