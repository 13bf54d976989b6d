/* util.h - small helpers shared across agentkit: durations, sizes, clocks,
 * RFC 3339 times, UUIDs and string vectors. */
#ifndef CORE_UTIL_H
#define CORE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/*
 * A duration as agentkit spells it: "250ms", "30s", "5m", "1h", or a bare
 * number of seconds ("1.5").  On success *ms holds milliseconds.
 * CORE_EUSAGE (message in e) for anything else or a negative value.
 */
enum core_status core_parse_duration(const char *s, int64_t *ms,
                                     struct core_err *e);

/*
 * A positive duration setting: flag_value when given (named flag_name in
 * messages), else the environment variable env (when set and not empty),
 * else dflt_ms.  CORE_EUSAGE "NAME: invalid duration ..." or "NAME: must be
 * positive" otherwise.
 */
enum core_status core_duration_setting(const char *flag_name, const char *flag_value,
                                       const char *env, int64_t dflt_ms, int64_t *ms,
                                       struct core_err *e);

/* A byte size: "4096", "64K", "64M", "1G" (powers of 1024). */
enum core_status core_parse_size(const char *s, uint64_t *bytes,
                                 struct core_err *e);

/* Milliseconds on the monotonic clock. */
int64_t core_now_mono_ms(void);

/* A duration in messages, as the user would give it: "300ms" unless a
 * whole number of seconds, then "15s".  Returns buf. */
#define CORE_DURATION_MAX 24
const char *core_duration_text(int64_t ms, char buf[CORE_DURATION_MAX]);


/* ---- time and IDs ---- */

/* Nanoseconds since the epoch, wall clock. */
int64_t core_now_ns(void);

/*
 * RFC 3339 in UTC with nanoseconds, as Go writes time.Time:
 * "2026-11-30T04:27:34.123456789Z" (trailing zeros of the fraction dropped,
 * no fraction when zero).  buf must hold CORE_TIME_MAX bytes.
 */
#define CORE_TIME_MAX 40
void core_time_format(int64_t ns, char *buf);
/* Parse RFC 3339 (any offset, optional fraction).  CORE_EINVAL if not,
 * CORE_ETOOBIG for a time outside what int64 nanoseconds hold (about the
 * years 1678 to 2262; Go's zero time "0001-01-01T00:00:00Z" is one). */
enum core_status core_time_parse(const char *s, int64_t *ns);

/*
 * CORE_EXIT_FREES is 1 in a sanitizer build, else 0.  What lives until the
 * process ends (a session's history) is freed at its end only then, so
 * leak checks stay exact; a plain build leaves it to the kernel, which
 * drops it whole, rather than walk it (a 10,000-message history: 27 M
 * instructions, a tenth of its turn).
 */
#if defined(__SANITIZE_ADDRESS__)
#define CORE_EXIT_FREES 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CORE_EXIT_FREES 1
#endif
#endif
#ifndef CORE_EXIT_FREES
#define CORE_EXIT_FREES 0
#endif

/* A random (version 4) UUID, lower case; buf must hold 37 bytes. */
void core_uuid(char *buf);
/* The name-based (version 5, SHA-1) UUID of name in agentkit's own
 * namespace: the same name gives the same UUID on every host. */
void core_uuid_named(char *buf, const char *name);

/* Free a NULL-terminated vector of malloc'd strings and the vector
 * itself; NULL is a no-op. */
void core_strv_free(char **v);

/*
 * A library loaded on first use rather than at start-up (libcurl):
 * dlopen(soname) and resolve names[i] into *slots[i] for i < n.  Returns 1,
 * or 0 with why (whylen bytes) saying what is missing.  The library stays
 * loaded.
 */
int core_dl_load(const char *soname, const char *const *names, void **const *slots,
                 size_t n, char *why, size_t whylen);

#endif
