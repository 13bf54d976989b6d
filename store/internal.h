/*
 * internal.h - helpers shared by the files of store/ (not part of the
 * store interface; nothing outside store/ includes this).
 */
#ifndef STORE_INTERNAL_H
#define STORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <sys/stat.h>

/*
 * An RFC 3339 time as nanoseconds since the epoch, never overflowing:
 * Go's zero time ("0001-01-01T00:00:00Z") and other years before 1678 give
 * INT64_MIN, years after 2261 give INT64_MAX.  Returns 0 when s is not a
 * time (*ns untouched), 1 on success.
 */
int st_time_ns(const char *s, int64_t *ns);

/*
 * The time a session listing orders a row's session by (store.h
 * store_sessions_recent()): its updatedAt as store_shape() shows it (Go's
 * zero time reads as createdAt), INT64_MIN when it is missing or not a
 * time, so such sessions come last.
 */
int64_t st_updated_ns(const json_t *row);
/* The updatedAt store_shape() shows (borrowed; NULL when there is none):
 * createdAt where updatedAt is missing or Go's zero time. */
const json_t *st_shown_updated(const json_t *row);
/* The heartbeat a row's status may expire by (store_shape()): heartbeatAt
 * in nanoseconds when the status is pending or aborting and heartbeatAt is
 * a time, else INT64_MIN.  st_expired(): has that beat gone stale by
 * now_ns, given timeout_ms (store_row_hb_timeout())? */
int64_t st_expiry_beat(const json_t *row);
int st_expired(int64_t beat_ns, int64_t now_ns, int64_t timeout_ms);

/* Is st owned by the user, or by root (who can change anything anyway)?
 * The trust checks' rule for the store's directories and files (path.c). */
int st_owner_ok(const struct stat *st);

/* The string member key of row, or NULL when absent or not a string. */
const char *st_str(const json_t *row, const char *key);
/* The integer member key of row, or 0 when absent or not an integer. */
int64_t st_int(const json_t *row, const char *key);

/* Set key of row's STORE_INFO_KEY object (made when absent) to v, which
 * it consumes.  Non-zero when out of memory. */
int st_info_set(json_t *row, const char *key, json_t *v);

/* Big-endian integers in keys and entries (byte order is number order). */

static inline void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

static inline uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void put_be64(unsigned char *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static inline uint64_t get_be64(const unsigned char *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

#endif
