/*
 * wlog.c - the PostgreSQL backend's worker logs: a detached run's lines
 * in agentkit_worker_log (pg.h), one autocommitted INSERT per line that
 * writes only while the row exists, read in line_id order; the deletion
 * of a row deletes its lines in the same transaction (ops.c).  See
 * store_log_append() in store.h.
 */
#include "pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum core_status pg_log_append(struct store *h, const char *snapshot_id, int64_t at_ns,
                               const char *text, struct core_err *e)
{
	static const char sql[] =
		"INSERT INTO agentkit_worker_log (snapshot_id, at_ns, body)"
		" SELECT $1, $2::bigint, $3 WHERE EXISTS"
		" (SELECT 1 FROM agentkit_snapshots WHERE snapshot_id = $1) RETURNING line_id";
	struct pg_store *s = pg_store(h);
	char at[24];
	const char *p[3] = { snapshot_id, at, text };
	PGresult *r = NULL;
	enum core_status st;
	snprintf(at, sizeof at, "%" PRId64, at_ns);
	/* a log line never waits for a reconnect (pg_ensure()): the worker's
	 * next write of a row does; a parked handle (store_park()) connects
	 * at once, as for any call */
	if (!s->parked && PQstatus(s->conn) != CONNECTION_OK)
		return core_fail(e, CORE_ESYS, "append to the worker log: the connection to the "
		                 "store at '%s' is lost; the line is dropped", s->where);
	if ((st = pg_exec(s, sql, 3, p, &r, "append to the worker log", e)) != CORE_OK)
		return st;
	st = PQntuples(r) ? CORE_OK : CORE_ENOTFOUND;
	PQclear(r);
	return st;
}

#define LINES 256        /* per read */

enum core_status pg_log_lines(struct store *h, const char *snapshot_id, store_log_fn fn,
                              void *ctx, struct core_err *e)
{
	static const char sql[] =
		"SELECT line_id, at_ns, body FROM agentkit_worker_log"
		" WHERE snapshot_id = $1 AND line_id > $2::bigint ORDER BY line_id LIMIT $3::integer";
	struct pg_store *s = pg_store(h);
	char after[24] = "0", limit[16];
	const char *p[3] = { snapshot_id, after, limit };
	enum core_status st = CORE_OK;
	long total = 0;
	int n, i;
	snprintf(limit, sizeof limit, "%d", LINES);
	do {
		PGresult *r = NULL;
		if ((st = pg_exec(s, sql, 3, p, &r, "read the worker log", e)) != CORE_OK)
			return st;
		n = PQntuples(r);
		for (i = 0; i < n && st == CORE_OK; i++)
			st = fn(strtoll(PQgetvalue(r, i, 1), NULL, 10), PQgetvalue(r, i, 2), ctx);
		if (n)
			snprintf(after, sizeof after, "%s", PQgetvalue(r, n - 1, 0));
		total += n;
		PQclear(r);
	} while (st == CORE_OK && n == LINES);
	return st == CORE_OK && !total ? CORE_ENOTFOUND : st;
}
