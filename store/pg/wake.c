/*
 * wake.c - the PostgreSQL backend's wake-ups: the handle's connection
 * LISTENs on PG_CHANNEL from its first change_seq(), and the sequence
 * counts the notifications it received.  Writers NOTIFY at commit, so a
 * wake-up never comes before the row can be read; a notification lost
 * with a dropped connection moves the sequence on reconnect (pg_reconnect),
 * and store_wait_terminal()'s bounded re-reads cover the rest.  A waiter
 * sleeps in poll() on the connection's socket: no CPU while nothing
 * changes.  See pg.h.
 */
#include "pg.h"

#include <errno.h>
#include <poll.h>

#include "../../libcore/base/util.h"

/* Count the notifications libpq has received (some arrive with query
 * results and wait in its queue). */
static void drain(struct pg_store *s)
{
	PGnotify *n;
	/* a connection that cannot be read counts as a change: the caller
	 * re-reads, and the read reconnects or fails, never a spin here */
	if (!PQconsumeInput(s->conn))
		s->seq++;
	while ((n = PQnotifies(s->conn))) {
		s->seq++;
		PQfreemem(n);
	}
}

uint32_t pg_change_seq(struct store *h)
{
	struct pg_store *s = pg_store(h);
	/* a lost connection is not waited for here but in pg_wait_change(),
	 * within the caller's wait; LISTEN goes with its reconnect */
	if (!s->listening && PQstatus(s->conn) != CONNECTION_OK) {
		s->listening = 1;
	} else if (!s->listening) {
		PGresult *r = pg_query(s, "LISTEN " PG_CHANNEL);
		if (PQresultStatus(r) == PGRES_COMMAND_OK || PQstatus(s->conn) != CONNECTION_OK)
			s->listening = 1;
		PQclear(r);
	}
	drain(s);
	return s->seq;
}

enum core_status pg_wait_change(struct store *h, uint32_t seq, int64_t timeout_ms,
                                struct core_err *e)
{
	struct pg_store *s = pg_store(h);
	int64_t end = core_now_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	enum core_status st;
	for (;;) {
		struct pollfd p;
		int64_t left;
		int rc;
		/* a lost connection is re-established within the caller's
		 * wait (and the reconnect window: pg_reconnect()); once it is
		 * back the sequence has moved */
		if (PQstatus(s->conn) != CONNECTION_OK &&
		    (st = pg_reconnect(s, end, e)) != CORE_OK)
			return st == CORE_ETIMEOUT ? core_fail(e, CORE_ETIMEOUT, "timed out") : st;
		drain(s);
		if (s->seq != seq)
			return CORE_OK;
		if ((left = end - core_now_mono_ms()) <= 0)
			return core_fail(e, CORE_ETIMEOUT, "timed out");
		p.fd = PQsocket(s->conn);
		p.events = POLLIN;
		p.revents = 0;
		rc = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (rc < 0 && errno == EINTR)
			return CORE_OK;         /* a signal: the caller looks again */
		if (rc < 0)
			return core_fail_sys(e, "wait for a change");
	}
}
