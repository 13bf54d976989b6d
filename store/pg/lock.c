/*
 * lock.c - the PostgreSQL backend's session writer locks: a session-level
 * advisory lock per session ID (store_session_lock() in store.h).  A
 * waiter sleeps in the server's lock queue, let in the moment the holder
 * unlocks or its connection ends; the wait is bounded by lock_timeout,
 * set to the caller's timeout for that one statement.  See pg.h.
 */
#include "pg.h"

#include <stdio.h>
#include <string.h>

#define KEY "hashtextextended('agentkit session ' || $1, 0)"

static enum core_status busy(const char *sid, struct core_err *e)
{
	return core_fail(e, CORE_ETIMEOUT, "session \"%s\" is busy", sid);
}

/* SET lock_timeout (ms; the store's own again with s->lock_ms). */
static enum core_status set_lock_timeout(struct pg_store *s, int64_t ms, struct core_err *e)
{
	char sql[64];
	snprintf(sql, sizeof sql, "SET lock_timeout = %lld", (long long)ms);
	return pg_cmd(s, sql, "lock the session", e);
}

enum core_status pg_session_lock(struct store *h, const char *sid, int64_t timeout_ms,
                                 struct core_err *e)
{
	struct pg_store *s = pg_store(h);
	const char *p[1] = { sid };
	PGresult *r;
	enum core_status st;
	int got;
	/* a free session costs one round trip; a busy one waits below */
	if ((st = pg_exec(s, "SELECT pg_try_advisory_lock(" KEY ")", 1, p, &r,
	                  "lock the session", e)) != CORE_OK)
		return st;
	got = !strcmp(PQgetvalue(r, 0, 0), "t");
	PQclear(r);
	if (got)
		return CORE_OK;
	if (timeout_ms <= 0)
		return busy(sid, e);
	if ((st = set_lock_timeout(s, timeout_ms, e)) != CORE_OK)
		return st;
	s->extra_ms = timeout_ms;       /* the answer may take that long */
	st = pg_exec(s, "SELECT pg_advisory_lock(" KEY ")", 1, p, &r, "lock the session", e);
	s->extra_ms = 0;
	PQclear(r);
	if (st == CORE_ESYS && !strcmp(s->last_state, "55P03"))
		st = busy(sid, e);
	if (PQstatus(s->conn) == CONNECTION_OK) {
		struct core_err le = { 0 };
		enum core_status rs = set_lock_timeout(s, s->lock_ms, &le);
		if (st == CORE_OK && rs != CORE_OK) {
			*e = le;
			st = rs;
		}
	}
	return st;
}

void pg_session_unlock(struct store *h, const char *sid)
{
	struct pg_store *s = pg_store(h);
	const char *p[1] = { sid };
	PGresult *r = NULL;
	/* a connection lost meanwhile took the lock with it */
	if (PQstatus(s->conn) != CONNECTION_OK)
		return;
	if (pg_exec(s, "SELECT pg_advisory_unlock(" KEY ")", 1, p, &r, "unlock the session",
	            NULL) == CORE_OK)
		PQclear(r);
}
