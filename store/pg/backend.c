/*
 * backend.c - the PostgreSQL backend's row of store.c's table: a store in
 * a PostgreSQL database shared by many hosts, for the locations
 * "postgresql://...", "postgres://..." (libpq's URIs) and "pg:" (libpq's
 * own PG* variables and service files).  See backend.h, and pg.h for the
 * files that implement it.
 */
#include "pg.h"

static const char *const schemes[] = { "postgresql", "postgres", NULL };
static const char *const locations[] = { "pg:", NULL };

const struct store_backend store_pg_backend = {
	.name = "PostgreSQL",
	.schemes = schemes,
	.locations = locations,
	.append = 1,
	.open = pg_open,
	.close = pg_close,
	.get = pg_get,
	.latest = pg_latest,
	.message_texts = pg_message_texts,
	.save = pg_save,
	.put_stream = pg_put_stream,
	.change_seq = pg_change_seq,
	.wait_change = pg_wait_change,
	.sessions = pg_sessions,
	.recent = pg_recent,
	.session_rows = pg_session_rows,
	.delete_session = pg_delete_session,
	.prune_session = pg_prune_session,
	.migrate = pg_migrate,
	.session_lock = pg_session_lock,
	.session_unlock = pg_session_unlock,
	.park = pg_park,
	.log_append = pg_log_append,
	.log_lines = pg_log_lines,
	.claim = pg_claim,
	.queued = pg_queued,
};
