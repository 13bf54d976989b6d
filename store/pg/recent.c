/*
 * recent.c - the PostgreSQL backend's sessions newest first: step 5's
 * agentkit_recent (schema.c), read in keyset batches down its index, each
 * session's latest row joined by its ID.  See the recent operation in
 * backend.h.
 */
#include "pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum core_status pg_recent(struct store *h, size_t first, store_session_fn fn, void *ctx,
                           struct core_err *e)
{
	/* after (updated_ns $1, session_id $2): older, or as old with a
	 * greater ID */
	static const char head[] =
		"SELECT r.session_id, r.row_count, s.meta, r.updated_ns FROM agentkit_recent r"
		" JOIN agentkit_snapshots s ON s.snapshot_id = r.latest_id"
		" ORDER BY r.updated_ns DESC, r.session_id LIMIT $1";
	static const char next[] =
		"SELECT r.session_id, r.row_count, s.meta, r.updated_ns FROM agentkit_recent r"
		" JOIN agentkit_snapshots s ON s.snapshot_id = r.latest_id"
		" WHERE r.updated_ns <= $2::bigint AND (r.updated_ns < $2::bigint OR r.session_id > $3)"
		" ORDER BY r.updated_ns DESC, r.session_id LIMIT $1";
	struct pg_store *s = pg_store(h);
	char after[STORE_ID_MAX + 1] = "", when[24] = "", want[24];
	enum core_status st = CORE_OK;
	size_t batch = first && first < PG_BATCH ? first : PG_BATCH;
	int n, more;
	do {
		const char *p[3] = { want, when, after };
		PGresult *r;
		snprintf(want, sizeof want, "%zu", batch);
		if ((st = pg_exec(s, when[0] ? next : head, when[0] ? 3 : 1, p, &r, "list sessions",
		                  e)) != CORE_OK)
			return st;
		n = PQntuples(r);
		st = pg_sessions_each(r, fn, ctx, e);
		if (n) {
			snprintf(after, sizeof after, "%s", PQgetvalue(r, n - 1, 0));
			snprintf(when, sizeof when, "%s", PQgetvalue(r, n - 1, 3));
		}
		PQclear(r);
		more = (size_t)n == batch;
		batch = PG_BATCH;
	} while (st == CORE_OK && more);
	return st;
}
