/* wait.c - waiting for rows to settle, over any store backend.  See
 * store_wait_terminal() in store.h. */
#include "store.h"
#include "internal.h"

#include <errno.h>
#include <stdlib.h>

#include "../libcore/base/util.h"

/* How long until a pending/aborting row could read expired (ms), or -1. */
static int64_t until_expiry(const json_t *row, int64_t now_ns, int64_t hb_timeout_ms)
{
	const char *hb = st_str(row, "heartbeatAt");
	int64_t ns, left;
	if (!hb || !st_time_ns(hb, &ns) || ns == INT64_MIN)
		return -1;
	left = (ns + hb_timeout_ms * 1000000 - now_ns) / 1000000 + 1;
	return left < 1 ? 1 : left;
}

/*
 * Whether a read failed because the store's server went away (a restart, a
 * failover): the connection was reset or refused.  The row is then
 * unsettled, not failed: store_wait_change() re-establishes the
 * connection within the time it waits, and fails (errno ETIMEDOUT) once
 * the backend's reconnect window has passed; only the backends on a
 * server report these.
 */
static int server_gone(enum core_status st, struct core_err *e)
{
	if (st != CORE_ESYS || !e || (e->sys != ECONNRESET && e->sys != ECONNREFUSED))
		return 0;
	e->st = CORE_OK;
	e->msg[0] = 0;
	return 1;
}

enum core_status store_wait_terminal(struct store *s, const char *const *ids,
                                     size_t n, unsigned flags,
                                     int64_t hb_timeout_ms, int64_t deadline_ms,
                                     int64_t poll_ms, json_t **rows,
                                     void (*progress)(size_t unsettled, void *),
                                     void *ctx, struct core_err *e)
{
	size_t i;
	for (i = 0; i < n; i++)
		rows[i] = NULL;
	unsigned char *done = calloc(n ? n : 1, 1);
	enum core_status st = CORE_OK;
	if (!done)
		return core_fail(e, CORE_ENOMEM, "wait: out of memory");
	/* no read outlasts the wait, even on a silent network */
	store_set_deadline(s, deadline_ms >= 0 ? (deadline_ms > 0 ? deadline_ms : 1) : 0);
	for (;;) {
		/* subscribe (take the sequence), then read */
		uint32_t seq = store_change_seq(s);
		int64_t now_ns = store_now_ns(s), sleep_ms = poll_ms, now;
		size_t left = 0;
		for (i = 0; i < n; i++) {
			json_t *row = NULL;
			if (done[i])
				continue;
			st = store_get(s, ids[i], STORE_METADATA_ONLY, &row, e);
			if (st == CORE_ENOTFOUND) {
				done[i] = 1;
				continue;
			}
			if (server_gone(st, e)) {
				left++;
				continue;
			}
			if (st != CORE_OK)
				goto out;
			int64_t row_hb_ms = store_row_hb_timeout(row, hb_timeout_ms);
			/* a queued run that expired waits for a worker to take it
			 * again (or to give up on it): only its status settles it */
			int queued = store_queue_of(row) != NULL;
			store_shape(row, now_ns, queued ? INT64_MAX / 2000000 : hb_timeout_ms);
			if (store_status_terminal(st_str(row, "status"))) {
				/* one full read fetches the row returned */
				if (!(flags & STORE_METADATA_ONLY)) {
					json_decref(row);
					st = store_get(s, ids[i], 0, &row, e);
					if (st == CORE_ENOTFOUND) {
						done[i] = 1;
						continue;
					}
					if (server_gone(st, e)) {
						left++;
						continue;
					}
					if (st != CORE_OK)
						goto out;
					store_shape(row, now_ns, hb_timeout_ms);
				}
				rows[i] = row;
				done[i] = 1;
				continue;
			}
			{
				int64_t x = queued ? -1 : until_expiry(row, now_ns, row_hb_ms);
				if (x >= 0 && x < sleep_ms)
					sleep_ms = x;
			}
			json_decref(row);
			left++;
		}
		if (progress)
			progress(left, ctx);
		if (!left) {
			st = CORE_OK;
			break;
		}
		now = core_now_mono_ms();
		if (deadline_ms >= 0) {
			if (now >= deadline_ms) {
				st = core_fail(e, CORE_ETIMEOUT, "timed out");
				break;
			}
			if (deadline_ms - now < sleep_ms)
				sleep_ms = deadline_ms - now;
		}
		st = store_wait_change(s, seq, sleep_ms, e);
		if (st != CORE_OK && st != CORE_ETIMEOUT)
			break;
		if (e)
			e->st = CORE_OK, e->msg[0] = 0;
	}
out:
	store_set_deadline(s, 0);
	free(done);
	return st;
}
