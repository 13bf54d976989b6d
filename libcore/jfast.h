/*
 * jfast.h - the fast path of jv_parse().
 *
 * jansson's parser reads one character at a time through a stream
 * abstraction; on large documents it is the bulk of a jpatch run (10 MB in
 * about 0.25 s).  jv_parse_fast() parses the common case directly from the
 * buffer into the same jansson tree (same types, same key order, same
 * values), and gives up - returning NULL, no error - on anything it is not
 * certain of: invalid JSON, duplicate keys, a NUL in a key, an integer or
 * real jansson would refuse as too large, nesting near the depth limit,
 * out of memory.  jv_parse() then runs jansson itself, so every error
 * message, every rejection and the bignum handling stay jansson's.
 */
#ifndef CORE_JFAST_H
#define CORE_JFAST_H

#include <jansson.h>
#include <stddef.h>

#include "status.h"

/* A new reference to the value in p[0..n), or NULL to fall back. */
json_t *jv_parse_fast(const char *p, size_t n);

/*
 * Read and parse the whole file path ("-" is stdin) with jv_parse().  A
 * regular file is mapped rather than copied into a heap buffer (for a
 * 10 MB document that saves a copy and a costly free).  A file larger than
 * max bytes fails with CORE_ETOOBIG.  On success *out is a new reference;
 * on error NULL, with the message in e (CORE_EINVAL names the file, line
 * and column).
 */
enum core_status jv_load_file(const char *path, size_t max, json_t **out,
                              struct core_err *e);

/*
 * Give jansson a faster allocator for the rest of the process: size-class
 * free lists over large mappings advised as transparent huge pages.  Big
 * trees then cost one page fault per 2 MB instead of per 4 KB (the kernel's
 * page clearing was the largest single cost of a 10 MB diff), and no
 * consolidation passes.  Memory freed is reused, never returned to the
 * system: meant for the jpatch filters, whose peak is one or two documents.
 * Call before any JSON value exists; thread-safe (per-thread lists).
 * Sanitizer builds keep malloc so leak and bounds checks stay exact.
 */
void jv_fast_alloc(void);

/*
 * Drop v just before the process exits.  Like git's UNLEAK: walking a
 * 10 MB tree to free it costs tens of milliseconds that the kernel does
 * for free at exit, so plain builds skip it; sanitizer builds release it
 * so leak checking stays exact.
 */
void jv_drop_at_exit(json_t *v);

#endif
