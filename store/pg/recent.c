/*
 * recent.c - the PostgreSQL backend's sessions newest first: step 5's
 * agentkit_recent (schema.c), read in keyset batches down its index.
 * From step 6 on each session's listing entry is read from that table
 * alone, and only a session without one (written before the step, or by
 * an older agentkit since) has its latest row joined for its metadata;
 * before it, every session's row is.  See the recent operation in
 * backend.h.
 */
#include "pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* after (updated_ns $2, session_id $3): older, or as old with a greater ID */
#define AFTER " WHERE r.updated_ns <= $2::bigint AND (r.updated_ns < $2::bigint OR r.session_id > $3)"
#define ORDER " ORDER BY r.updated_ns DESC, r.session_id LIMIT $1"

/* Step 5's: session, row count, the latest row's metadata, time (text). */
#define JOINED "SELECT r.session_id, r.row_count, s.meta, r.updated_ns FROM agentkit_recent r" \
	" JOIN agentkit_snapshots s ON s.snapshot_id = r.latest_id"

/* Step 6's: session, row count, entry, the latest row's metadata where
 * there is no entry, time (binary: the entry as its bytes).  The CASE
 * reads the row only for such a session (a join would look up every
 * session's row and then drop the metadata). */
#define ENTRIES "SELECT r.session_id, r.row_count, r.entry, CASE WHEN r.entry IS NULL" \
	" THEN (SELECT x.meta FROM agentkit_snapshots x WHERE x.snapshot_id = r.latest_id) END," \
	" r.updated_ns FROM agentkit_recent r"

/* The sessions of one batch of ENTRIES, as fn is given them. */
static enum core_status each_entry(PGresult *r, store_session_fn fn, void *ctx,
                                   struct core_err *e)
{
	enum core_status st = CORE_OK;
	for (int i = 0; i < PQntuples(r) && st == CORE_OK; i++) {
		struct store_session_info si = { 0 };
		json_t *latest = NULL;
		si.session_id = PQgetvalue(r, i, 0);
		si.rows = (size_t)get_be64((const unsigned char *)PQgetvalue(r, i, 1));
		if (!PQgetisnull(r, i, 2)) {
			si.entry = PQgetvalue(r, i, 2);
			si.entry_len = (size_t)PQgetlength(r, i, 2);
		} else if (PQgetisnull(r, i, 3)) {
			continue;       /* its latest row went meanwhile */
		} else if ((st = pg_row_join(PQgetvalue(r, i, 3), NULL, NULL, NULL, NULL, NULL,
		                             NULL, &latest, e)) != CORE_OK) {
			break;
		}
		si.latest = latest;
		st = fn(&si, ctx);
		json_decref(latest);
	}
	return st;
}

enum core_status pg_recent(struct store *h, size_t first, store_session_fn fn, void *ctx,
                           struct core_err *e)
{
	static const char joined_head[] = JOINED ORDER, joined_next[] = JOINED AFTER ORDER;
	static const char entries_head[] = ENTRIES ORDER, entries_next[] = ENTRIES AFTER ORDER;
	struct pg_store *s = pg_store(h);
	int entries = s->steps >= PG_STEP_ENTRIES;
	char after[STORE_ID_MAX + 1] = "", when[24] = "", want[24];
	enum core_status st = CORE_OK;
	size_t batch = first && first < PG_BATCH ? first : PG_BATCH;
	int n, more;
	do {
		const char *p[3] = { want, when, after };
		const char *sql = entries ? (when[0] ? entries_next : entries_head)
		                          : (when[0] ? joined_next : joined_head);
		PGresult *r;
		snprintf(want, sizeof want, "%zu", batch);
		if ((st = (entries ? pg_exec_binary : pg_exec)(s, sql, when[0] ? 3 : 1, p, &r,
		                                               "list sessions", e)) != CORE_OK)
			return st;
		n = PQntuples(r);
		st = entries ? each_entry(r, fn, ctx, e) : pg_sessions_each(r, fn, ctx, e);
		if (n) {
			snprintf(after, sizeof after, "%s", PQgetvalue(r, n - 1, 0));
			if (entries)
				snprintf(when, sizeof when, "%lld", (long long)(int64_t)get_be64(
				         (const unsigned char *)PQgetvalue(r, n - 1, 4)));
			else
				snprintf(when, sizeof when, "%s", PQgetvalue(r, n - 1, 3));
		}
		PQclear(r);
		more = (size_t)n == batch;
		batch = PG_BATCH;
	} while (st == CORE_OK && more);
	return st;
}
