/*
 * backend.c - the LMDB backend's row of store.c's table: the embedded
 * default, a store in a directory (see backend.h, and lm.h for the
 * files that implement it).
 */
#include "lm.h"

const struct store_backend store_lmdb_backend = {
	.name = "LMDB",
	.schemes = NULL,
	.open = lm_open,
	.close = lm_close,
	.get = lm_get,
	.latest = lm_latest,
	.message_texts = lm_message_texts,
	.save = lm_save,
	.put_stream = lm_put_stream,
	.change_seq = lm_change_seq,
	.wait_change = lm_wait_change,
	.sessions = lm_sessions,
	.recent = lm_recent,
	.session_rows = lm_session_rows,
	.delete_session = lm_delete_session,
	.prune_session = lm_prune_session,
	.session_lock = lm_session_lock,
	.session_unlock = lm_session_unlock,
	.append = 1,
	.log_append = lm_log_append,
	.log_lines = lm_log_lines,
	.claim = lm_claim,
	.queued = lm_queued,
	/* every meta and state record begins with its format's version
	 * byte (lm.h), 1 in all of them: no store-wide steps to apply */
	.format_version = 1,
};
