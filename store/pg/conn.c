/*
 * conn.c - the PostgreSQL backend's connection: libpq's parameters with a
 * bounded connect timeout, statements, SQLSTATEs as core_status, libpq's
 * texts scrubbed of credentials, reconnects.  See pg.h.
 */
#include "pg.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "../../libcore/base/http.h"
#include "../../libcore/base/util.h"

/* libpq prints a server's NOTICEs on stderr by default; the store never
 * prints. */
static void quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

void pg_scrub(const struct pg_store *s, char *msg, size_t n)
{
	char *p, *nl;
	size_t k;
	/* libpq's texts end in a newline and may add an indented hint */
	if ((nl = strchr(msg, '\n')))
		*nl = 0;
	core_url_redact_text(msg, n);
	if (!s || !s->secret || !(k = strlen(s->secret)))
		return;
	while ((p = strstr(msg, s->secret))) {
		memmove(p + 3, p + k, strlen(p + k) + 1);
		memcpy(p, "***", 3);
	}
}

/* libpq's last error on the connection, one line, scrubbed. */
static void conn_error(const struct pg_store *s, char *buf, size_t n)
{
	snprintf(buf, n, "%s", s->conn ? PQerrorMessage(s->conn) : "out of memory");
	pg_scrub(s, buf, n);
	if (!*buf)
		snprintf(buf, n, "the connection failed");
}

/* ---- every answer within a bound ---- */

/* When what is sent now must have been answered: within the statement
 * bound (pg.h), or by the caller's deadline (store_set_deadline()) when
 * that comes first. */
static int64_t answer_by(struct pg_store *s)
{
	int64_t end = core_now_mono_ms() + s->lock_ms + s->connect_ms + s->extra_ms;
	s->cut = 0;
	if (s->head.deadline > 0 && s->head.deadline < end) {
		s->cut_by_caller = 1;
		return s->head.deadline;
	}
	s->cut_by_caller = 0;
	return end;
}

/*
 * Give the connection up: the server did not answer in time (a silent
 * network drops every packet, and a statement in flight keeps TCP's
 * keepalives from ever probing).  Its socket is shut, so libpq takes it
 * as lost and the next call reconnects; the server rolls back what was
 * open when it notices.  No PQcancel(): libpq 15's connects and waits,
 * through the same silent network, without a bound.
 */
static void cut(struct pg_store *s)
{
	s->cut = 1;
	shutdown(PQsocket(s->conn), SHUT_RDWR);
	/* read to the end: CONNECTION_BAD.  An answer that came in as the
	 * bound passed is read first (and left: the statement was given
	 * up), so more than one read may be needed. */
	for (int i = 0; i < 64 && PQstatus(s->conn) == CONNECTION_OK; i++)
		if (!PQconsumeInput(s->conn))
			break;
}

/* Wait until what was sent has gone and the next result can be taken
 * without blocking: 0; -1 when end passed first (the connection is cut)
 * or the connection failed (libpq says why). */
static int await(struct pg_store *s, int64_t end)
{
	for (;;) {
		int more = PQflush(s->conn), rc;
		struct pollfd p = { PQsocket(s->conn), POLLIN, 0 };
		int64_t left;
		if (more < 0)
			return -1;
		if (!more && !PQisBusy(s->conn))
			return 0;
		if ((left = end - core_now_mono_ms()) <= 0) {
			cut(s);
			return -1;
		}
		if (more)
			p.events |= POLLOUT;
		rc = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (rc < 0 && errno != EINTR)
			return -1;
		if (rc > 0 && (p.revents & (POLLIN | POLLERR | POLLHUP)) &&
		    !PQconsumeInput(s->conn))
			return -1;
	}
}

/* The next result of what was sent, waiting until end at most; NULL at
 * the end of the results, or when the connection failed or was cut. */
static PGresult *next_result(struct pg_store *s, int64_t end)
{
	return await(s, end) ? NULL : PQgetResult(s->conn);
}

/* The answer to what was sent (sent non-zero), as PQexec() gives it: the
 * last result, or the first failure; NULL when the connection failed or
 * was cut (PQresultStatus(NULL) is PGRES_FATAL_ERROR). */
static PGresult *answer(struct pg_store *s, int sent, int64_t end)
{
	PGresult *keep = NULL, *r;
	if (!sent)
		return NULL;
	for (;;) {
		if (await(s, end)) {
			PQclear(keep);
			return NULL;
		}
		if (!(r = PQgetResult(s->conn)))
			return keep;
		if (keep && PQresultStatus(keep) == PGRES_FATAL_ERROR) {
			PQclear(r);
		} else {
			PQclear(keep);
			keep = r;
		}
	}
}

PGresult *pg_query(struct pg_store *s, const char *sql)
{
	int64_t end = answer_by(s);
	return answer(s, PQsendQuery(s->conn, sql), end);
}

/* The connection given up (cut()): how long was waited, and for what. */
static enum core_status cut_fail(struct pg_store *s, const char *what, struct core_err *e)
{
	int64_t ms = s->lock_ms + s->connect_ms;
	s->dropped = 0;         /* an answer lost in flight: not retried */
	s->last_state[0] = 0;
	if (s->cut_by_caller)
		return core_fail(e, CORE_ETIMEOUT, "%s: the store at '%s' did not answer in "
		                 "time", what, s->where);
	char d[CORE_DURATION_MAX];
	core_fail(e, CORE_ESYS, "%s: the store at '%s' did not answer within %s (the network "
	          "may be cut); the connection is given up", what, s->where,
	          core_duration_text(ms, d));
	if (e)
		e->sys = ETIMEDOUT;
	return CORE_ESYS;
}

/* A failed statement as a status: the SQLSTATE says which. */
static enum core_status fail_res(struct pg_store *s, PGresult *r, const char *what,
                                 struct core_err *e)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	const char *primary = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	char msg[512];
	enum core_status st = CORE_ESYS;
	int sys = EIO;
	if (s->cut)
		return cut_fail(s, what, e);
	/* a connection lost mid-transaction: the transaction is worth
	 * another try once it is back (pg_retryable) */
	s->dropped = PQstatus(s->conn) != CONNECTION_OK;
	if (primary) {
		snprintf(msg, sizeof msg, "%s", primary);
		pg_scrub(s, msg, sizeof msg);
	} else {
		conn_error(s, msg, sizeof msg);
	}
	if (!state || !strncmp(state, "08", 2) || !strncmp(state, "57P", 3)) {
		sys = ECONNRESET;
	} else if (!strcmp(state, "55P03")) {
		/* lock_timeout: another writer holds the row */
		if (s->lock_ms % 1000)
			core_fail(e, CORE_ESYS, "%s: timed out waiting for the row's lock after "
			          "%lldms", what, (long long)s->lock_ms);
		else
			core_fail(e, CORE_ESYS, "%s: timed out waiting for the row's lock after "
			          "%llds", what, (long long)(s->lock_ms / 1000));
		if (e)
			e->sys = ETIMEDOUT;
		memcpy(s->last_state, state, 6);
		return CORE_ESYS;
	} else if (!strcmp(state, "53100")) {
		sys = ENOSPC;
	} else if (!strcmp(state, "25006")) {
		sys = EROFS;
	} else if (!strcmp(state, "42501")) {
		sys = EACCES;
	} else if (!strcmp(state, "53200")) {
		st = CORE_ENOMEM;
	}
	core_fail(e, st, "%s: %s", what, msg);
	if (e) {
		e->sys = st == CORE_ESYS ? sys : 0;
		/* the SQLSTATE rides along for pg_retryable() */
		if (state && strlen(state) == 5)
			memcpy(s->last_state, state, 6);
		else
			s->last_state[0] = 0;
	}
	return st;
}

int pg_retryable(const struct pg_store *s)
{
	return !strcmp(s->last_state, "40001") || !strcmp(s->last_state, "40P01") ||
	       !strcmp(s->last_state, "23503") || !strcmp(s->last_state, "23505") ||
	       s->dropped;
}

void pg_clock(struct pg_store *s, int64_t server_us, int64_t t0, int64_t t1)
{
	s->head.clock_offset_ns = server_us * 1000 - (t0 / 2 + t1 / 2);
}

/*
 * Connection-level settings, on every (re)connect: local ones only on
 * the first (lock_timeout rides in the startup packet's options, the
 * server's clock on the schema check, pg_schema()); after a reconnect,
 * LISTEN again and the server's clock, in one round trip.
 */
static enum core_status session_setup(struct pg_store *s, int again, struct core_err *e)
{
	PGresult *r;
	enum core_status st = CORE_OK;
	PQsetNoticeProcessor(s->conn, quiet, NULL);
	/* sends never block: every wait is await()'s, bounded */
	if (PQsetnonblocking(s->conn, 1)) {
		char msg[512];
		conn_error(s, msg, sizeof msg);
		return core_fail(e, CORE_ESYS, "set up the connection: %s", msg);
	}
	if (!again)
		return CORE_OK;
	int64_t t0 = core_now_ns();
	r = pg_query(s, s->listening ? "LISTEN " PG_CHANNEL "; SELECT " PG_CLOCK_SQL
	                             : "SELECT " PG_CLOCK_SQL);
	int64_t t1 = core_now_ns();
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
		st = fail_res(s, r, "set up the connection", e);
	else
		pg_clock(s, strtoll(PQgetvalue(r, 0, 0), NULL, 10), t0, t1);
	PQclear(r);
	return st;
}

static enum core_status connect_fail(struct pg_store *s, struct core_err *e)
{
	char msg[512];
	conn_error(s, msg, sizeof msg);
	core_fail(e, CORE_ESYS, "cannot connect to the store at '%s': %s", s->where, msg);
	if (e)
		e->sys = ECONNREFUSED;
	return CORE_ESYS;
}

/* The reconnect window passed: the last reason, and how long it tried. */
static enum core_status lost(struct pg_store *s, struct core_err *e)
{
	char msg[512], d[CORE_DURATION_MAX];
	conn_error(s, msg, sizeof msg);
	core_fail(e, CORE_ESYS, "lost the connection to the store at '%s' and could not "
	          "reconnect within %s: %s", s->where, core_duration_text(s->lock_ms, d), msg);
	if (e)
		e->sys = ETIMEDOUT;
	return CORE_ESYS;
}

/* A connection re-established: what the server forgot is set up again. */
static enum core_status reconnected(struct pg_store *s, struct core_err *e)
{
	int i;
	s->retry_at = s->backoff_ms = s->lost_at = 0;
	/* notifications sent while the connection was down are lost: wake
	 * the waiters, who re-read */
	s->seq++;
	s->in_txn = 0;
	for (i = 0; i < PG_NPREP; i++)
		s->prep[i].prepared = 0;        /* the server forgot them */
	return session_setup(s, 1, e);
}

void pg_nap(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);           /* a signal cuts it short: the caller looks again */
}

void pg_park(struct store *h)
{
	struct pg_store *s = pg_store(h);
	if (s->in_txn || !s->conn)
		return;
	PQfinish(s->conn);
	s->conn = NULL;
	s->parked = 1;
}

/* A parked handle's connection, made again at once; on failure the
 * handle is one whose connection was lost, from now. */
static enum core_status unpark(struct pg_store *s, struct core_err *e)
{
	s->parked = 0;
	s->retry_at = s->backoff_ms = s->lost_at = 0;
	s->in_txn = 0;
	for (int i = 0; i < PG_NPREP; i++)
		s->prep[i].prepared = 0;
	return pg_connect(s, s->conninfo, e);
}

/* Whether the connection can take a statement: up, and no statement of
 * an earlier call still in flight on it (one given up at its bound whose
 * answer came in meanwhile; libpq would refuse the next with "another
 * command is already in progress"). */
static int usable(struct pg_store *s)
{
	return PQstatus(s->conn) == CONNECTION_OK &&
	       PQtransactionStatus(s->conn) != PQTRANS_ACTIVE;
}

enum core_status pg_reconnect(struct pg_store *s, int64_t until, struct core_err *e)
{
	int64_t now = core_now_mono_ms(), end, t;
	if (s->parked && unpark(s, e) == CORE_OK)
		return CORE_OK;
	if (usable(s))
		return CORE_OK;
	if (!s->lost_at)
		s->lost_at = now;
	end = s->lost_at + s->lock_ms;
	for (;;) {
		if (now >= s->retry_at) {
			PQreset(s->conn);
			if (PQstatus(s->conn) == CONNECTION_OK)
				return reconnected(s, e);
			s->backoff_ms = s->backoff_ms ? (s->backoff_ms * 2 > 5000 ? 5000
			                                                          : s->backoff_ms * 2)
			                              : 200;
			now = core_now_mono_ms();
			s->retry_at = now + s->backoff_ms;
		}
		if (now >= end)
			return lost(s, e);
		if (until <= now) {
			connect_fail(s, e);
			if (e)
				e->st = CORE_ETIMEOUT;
			return CORE_ETIMEOUT;
		}
		t = s->retry_at;
		if (until < t)
			t = until;
		if (end < t)
			t = end;
		pg_nap(t - now);
		now = core_now_mono_ms();
	}
}

enum core_status pg_ensure(struct pg_store *s, struct core_err *e)
{
	enum core_status st;
	if (usable(s))
		return CORE_OK;
	/* a waiter's handle (it LISTENs) reconnects in pg_wait_change(),
	 * within the time its caller waits: here it tries when the backoff
	 * allows and fails at once in between; any other handle waits here,
	 * within the window, so that a server's restart fails no write */
	st = pg_reconnect(s, s->listening ? core_now_mono_ms() : INT64_MAX, e);
	if (st == CORE_ETIMEOUT) {
		if (e)
			e->st = CORE_ESYS;
		st = CORE_ESYS;
	}
	return st;
}

/* The prepared-statement slot of sql, counting this use (uses is 1 on
 * the first); NULL when the table is full (the statement then always
 * goes unprepared).  *name receives the slot's statement name. */
static struct pg_prep *prep_slot(struct pg_store *s, const char *sql, char *name, size_t n)
{
	struct pg_prep *p = NULL, *free_slot = NULL;
	int i;
	for (i = 0; i < PG_NPREP && !p; i++) {
		if (s->prep[i].sql && !strcmp(s->prep[i].sql, sql))
			p = &s->prep[i];
		else if (!s->prep[i].sql && !free_slot)
			free_slot = &s->prep[i];
	}
	if (!p) {
		if (!free_slot || !(free_slot->sql = strdup(sql)))
			return NULL;
		p = free_slot;
		p->uses = 0;
	}
	snprintf(name, n, "agentkit_%d", (int)(p - s->prep));
	if (!p->prepared)
		p->uses++;
	return p;
}

/* One statement, prepared when it runs the second time (see pg_prep);
 * its results in binary (PostgreSQL's send format) when binary is set. */
static PGresult *run(struct pg_store *s, const char *sql, int n, const char *const *params,
                     int binary)
{
	char name[16];
	struct pg_prep *p = prep_slot(s, sql, name, sizeof name);
	int64_t end = answer_by(s);
	if (p && !p->prepared && p->uses >= 2) {
		PGresult *r = answer(s, PQsendPrepare(s->conn, name, sql, n, NULL), end);
		p->prepared = PQresultStatus(r) == PGRES_COMMAND_OK;
		if (!p->prepared)
			return r;
		PQclear(r);
	}
	if (!p || !p->prepared)
		return answer(s, PQsendQueryParams(s->conn, sql, n, NULL, params, NULL, NULL,
		                                   binary), end);
	return answer(s, PQsendQueryPrepared(s->conn, name, n, params, NULL, NULL, binary), end);
}

static enum core_status exec(struct pg_store *s, const char *sql, int n,
                             const char *const *params, int binary, PGresult **res,
                             const char *what, struct core_err *e)
{
	enum core_status st;
	int tries;
	*res = NULL;
	s->last_state[0] = 0;
	s->dropped = 0;
	for (tries = 0;; tries++) {
		PGresult *r;
		ExecStatusType x;
		if (!s->in_txn && (st = pg_ensure(s, e)) != CORE_OK)
			return st;
		r = run(s, sql, n, params, binary);
		x = PQresultStatus(r);
		if (x == PGRES_COMMAND_OK || x == PGRES_TUPLES_OK) {
			*res = r;
			return CORE_OK;
		}
		/* a server restarted between two statements: once more on a new
		 * connection, unless a transaction was open (it is gone) */
		if (!s->in_txn && tries == 0 && PQstatus(s->conn) != CONNECTION_OK && !s->cut) {
			PQclear(r);
			continue;
		}
		st = fail_res(s, r, what, e);
		PQclear(r);
		return st;
	}
}

enum core_status pg_exec(struct pg_store *s, const char *sql, int n,
                         const char *const *params, PGresult **res, const char *what,
                         struct core_err *e)
{
	return exec(s, sql, n, params, 0, res, what, e);
}

enum core_status pg_exec_binary(struct pg_store *s, const char *sql, int n,
                                const char *const *params, PGresult **res, const char *what,
                                struct core_err *e)
{
	return exec(s, sql, n, params, 1, res, what, e);
}

enum core_status pg_cmd(struct pg_store *s, const char *sql, const char *what,
                        struct core_err *e)
{
	enum core_status st;
	PGresult *r;
	s->last_state[0] = 0;
	s->dropped = 0;
	if (!s->in_txn && (st = pg_ensure(s, e)) != CORE_OK)
		return st;
	/* the simple protocol: one message, nothing to parse or plan */
	r = pg_query(s, sql);
	st = PQresultStatus(r) == PGRES_COMMAND_OK ? CORE_OK : fail_res(s, r, what, e);
	PQclear(r);
	if (st == CORE_OK && !strcmp(sql, "BEGIN"))
		s->in_txn = 1;
	else if (!strcmp(sql, "COMMIT"))
		s->in_txn = 0;
	return st;
}

/* Whether a pipeline sent outside a transaction commits one (then it is
 * never sent twice: it may have committed before the connection broke):
 * it holds a COMMIT, or it begins none, and its sync commits the implicit
 * one its statements ran in. */
static int ends_txn(const struct pg_stmt *q, int n)
{
	int i;
	for (i = 0; i < n; i++)
		if (!strcmp(q[i].sql, "COMMIT"))
			return 1;
	return strncmp(q[0].sql, "BEGIN", 5) != 0;
}

/* Send q[0..n) and a sync, then read every result up to the sync: the
 * successful ones into q[i].res, the first failure into *bad. */
static void pipe_once(struct pg_store *s, struct pg_stmt *q, int n, PGresult **bad)
{
	struct pg_prep *prep[2 * PG_PIPE_MAX];
	int stmt[2 * PG_PIPE_MAX], nsent = 0, synced, i, k;
	PGresult *r;
	int64_t end = answer_by(s);
	*bad = NULL;
	if (!PQenterPipelineMode(s->conn))
		return;
	for (i = 0; i < n; i++) {
		char name[16];
		struct pg_prep *p = prep_slot(s, q[i].sql, name, sizeof name);
		int ok = 1;
		if (p && !p->prepared) {
			/* the PREPARE goes ahead of the statement, in the same
			 * round trip, from its first use (it costs nothing more:
			 * a generic plan is made once, where an unnamed statement
			 * would be planned again on its next use); prepared is
			 * undone if the server refused */
			if ((ok = PQsendPrepare(s->conn, name, q[i].sql, q[i].n, NULL))) {
				p->prepared = 1;
				prep[nsent] = p;
				stmt[nsent++] = -1;
			}
		}
		if (ok)
			ok = p && p->prepared
			     ? PQsendQueryPrepared(s->conn, name, q[i].n, q[i].params, q[i].lengths,
			                           q[i].formats, 0)
			     : PQsendQueryParams(s->conn, q[i].sql, q[i].n, NULL, q[i].params,
			                         q[i].lengths, q[i].formats, 0);
		if (!ok)
			break;
		prep[nsent] = NULL;
		stmt[nsent++] = i;
	}
	synced = PQpipelineSync(s->conn);
	for (k = 0; k < nsent; k++) {
		while ((r = next_result(s, end))) {
			ExecStatusType x = PQresultStatus(r);
			if ((x == PGRES_COMMAND_OK || x == PGRES_TUPLES_OK) && stmt[k] >= 0 &&
			    !q[stmt[k]].res) {
				q[stmt[k]].res = r;
				continue;
			}
			if (x != PGRES_COMMAND_OK && x != PGRES_TUPLES_OK) {
				if (prep[k])
					prep[k]->prepared = 0;
				if (x != PGRES_PIPELINE_ABORTED && !*bad) {
					*bad = r;
					continue;
				}
			}
			PQclear(r);
		}
		if (PQstatus(s->conn) != CONNECTION_OK)
			break;
	}
	/* up to the sync; a failure here is the commit's of an implicit
	 * transaction (a pipeline that began none), and ends as a result does */
	while (synced && PQstatus(s->conn) == CONNECTION_OK && !await(s, end)) {
		ExecStatusType x;
		if (!(r = PQgetResult(s->conn)))
			continue;
		if ((x = PQresultStatus(r)) == PGRES_PIPELINE_SYNC) {
			PQclear(r);
			break;
		}
		if (x != PGRES_COMMAND_OK && x != PGRES_TUPLES_OK && !*bad)
			*bad = r;
		else
			PQclear(r);
	}
	/* a send that failed leaves *bad NULL: libpq's connection error
	 * says why */
	PQexitPipelineMode(s->conn);
}

enum core_status pg_pipeline(struct pg_store *s, struct pg_stmt *q, int n, const char *what,
                             struct core_err *e)
{
	enum core_status st = CORE_OK;
	int tries, i, outside = !s->in_txn;
	PGTransactionStatusType t;
	s->last_state[0] = 0;
	s->dropped = 0;
	for (tries = 0;; tries++) {
		PGresult *bad;
		int whole = 1;
		for (i = 0; i < n; i++)
			q[i].res = NULL;
		if (outside && (st = pg_ensure(s, e)) != CORE_OK)
			return st;
		pipe_once(s, q, n, &bad);
		for (i = 0; i < n; i++)
			whole = whole && q[i].res;
		whole = whole && !bad;
		t = PQtransactionStatus(s->conn);
		s->in_txn = t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
		if (whole) {
			PQclear(bad);
			return CORE_OK;
		}
		pg_pipeline_clear(q, n);
		/* a server restarted between two transactions: once more on a
		 * new connection (see pg_exec()) */
		if (outside && tries == 0 && PQstatus(s->conn) != CONNECTION_OK &&
		    !ends_txn(q, n) && !s->cut) {
			PQclear(bad);
			continue;
		}
		st = fail_res(s, bad, what, e);
		PQclear(bad);
		return st;
	}
}

void pg_pipeline_clear(struct pg_stmt *q, int n)
{
	int i;
	for (i = 0; i < n; i++) {
		PQclear(q[i].res);
		q[i].res = NULL;
	}
}

enum core_status pg_script(struct pg_store *s, const char *sql, const char *what,
                           struct core_err *e)
{
	PGresult *r = pg_query(s, sql);
	enum core_status st = CORE_OK;
	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
		st = fail_res(s, r, what, e);
	PQclear(r);
	return st;
}

void pg_rollback(struct pg_store *s)
{
	if (PQstatus(s->conn) == CONNECTION_OK)
		PQclear(pg_query(s, "ROLLBACK"));
	s->in_txn = 0;
}

/*
 * The connection parameters: the location as libpq's dbname (a URL, or
 * "" for "pg:", which leaves everything to PG* variables and service
 * files), our application name as a fallback, UTF-8, a connect timeout
 * when neither the URL nor PGCONNECT_TIMEOUT sets one, so an unreachable
 * server fails within it instead of hanging, and TCP keepalives probing
 * an idle connection after 30 s, so a waiter whose server vanished from
 * the network (no FIN, no RST) notices within about a minute.  What the
 * URL sets wins.
 */
/* A connect_timeout's value (seconds) as libpq takes it, in ms: less
 * than 2 is 2, and none or 0 (no limit in libpq) is ours,
 * PG_CONNECT_TIMEOUT. */
static int64_t connect_ms(const char *v)
{
	long sec = v && *v ? strtol(v, NULL, 10) : 0;
	if (sec <= 0)
		sec = strtol(PG_CONNECT_TIMEOUT, NULL, 10);
	return (int64_t)(sec < 2 ? 2 : sec) * 1000;
}

enum core_status pg_connect(struct pg_store *s, const char *conninfo, struct core_err *e)
{
	static const char *const probe[][2] = {
		{ "keepalives_idle", "30" }, { "keepalives_interval", "10" },
		{ "keepalives_count", "3" }, { "tcp_user_timeout", PG_TCP_USER_TIMEOUT },
	};
	enum { NPROBE = sizeof probe / sizeof probe[0] };
	const char *keys[12], *vals[12];
	PQconninfoOption *opts, *o;
	char *err = NULL, *options = NULL;
	int n = 0, has_timeout = 0, has_probe[NPROBE] = { 0 };
	size_t i;
	const char *env = getenv("PGCONNECT_TIMEOUT");
	s->connect_ms = connect_ms(env);
	if (!(opts = PQconninfoParse(conninfo, &err))) {
		char msg[512];
		snprintf(msg, sizeof msg, "%s", err ? err : "out of memory");
		PQfreemem(err);
		pg_scrub(s, msg, sizeof msg);
		return core_fail(e, CORE_EUSAGE, "invalid store URL '%s': %s", s->where, msg);
	}
	for (o = opts; o->keyword; o++) {
		if (!strcmp(o->keyword, "password") && o->val && *o->val && !s->secret &&
		    !(s->secret = strdup(o->val))) {
			PQconninfoFree(opts);
			return core_fail(e, CORE_ENOMEM, "open the store: out of memory");
		}
		if (!strcmp(o->keyword, "connect_timeout") && o->val && *o->val) {
			has_timeout = 1;
			s->connect_ms = connect_ms(o->val);
		}
		for (i = 0; i < NPROBE; i++)
			if (!strcmp(o->keyword, probe[i][0]) && o->val && *o->val)
				has_probe[i] = 1;
		/* the store's lock_timeout, after the location's own options
		 * (or PGOPTIONS): set at connect, no round trip of its own; and
		 * generic plans for the statements prepared from their second
		 * use (pg_prep), all key lookups, unless the location chose:
		 * the server's first five custom plans re-planned each of a
		 * worker's first turns (put_new's bind 0.22 ms, against 0.02) */
		if (!strcmp(o->keyword, "options") && !options) {
			const char *v = o->val && *o->val ? o->val : getenv("PGOPTIONS");
			int chose = v && strstr(v, "plan_cache_mode");
			if (asprintf(&options, "%s%s-c lock_timeout=%lld%s", v ? v : "",
			             v && *v ? " " : "", (long long)s->lock_ms,
			             chose ? "" : " -c plan_cache_mode=force_generic_plan") < 0)
				options = NULL;
		}
	}
	PQconninfoFree(opts);
	if (!options) {
		PQfreemem(err);
		return core_fail(e, CORE_ENOMEM, "open the store: out of memory");
	}
	if (!has_timeout && !(env && *env)) {
		keys[n] = "connect_timeout";
		vals[n++] = PG_CONNECT_TIMEOUT;
	}
	for (i = 0; i < NPROBE; i++)
		if (!has_probe[i]) {
			keys[n] = probe[i][0];
			vals[n++] = probe[i][1];
		}
	keys[n] = "dbname";
	vals[n++] = conninfo;
	keys[n] = "fallback_application_name";
	vals[n++] = "agentkit";
	keys[n] = "client_encoding";
	vals[n++] = "UTF8";
	keys[n] = "options";
	vals[n++] = options;
	keys[n] = NULL;
	vals[n] = NULL;
	s->conn = PQconnectdbParams(keys, vals, 1);
	free(options);
	if (!s->conn)
		return core_fail(e, CORE_ENOMEM, "open the store: out of memory");
	if (PQstatus(s->conn) != CONNECTION_OK)
		return connect_fail(s, e);
	return session_setup(s, 0, e);
}
