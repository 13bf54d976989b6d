/*
 * strset.h - a set of strings that costs little more than their bytes:
 * the strings one after another in one buffer, found through an
 * open-addressed table of their offsets.  For a set that grows with what
 * a command reads (agent-snap log remembers every parent it saw, to mark
 * forks), where a JSON object took five times the memory.
 *
 * Ownership: the set owns copies of what is added; strset_release() frees
 * them.  A zeroed struct strset is an empty set.
 */
#ifndef CORE_STRSET_H
#define CORE_STRSET_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct strset {
	struct core_buf bytes;          /* the strings, each NUL-ended */
	uint32_t *slot;                 /* offset + 1 into bytes; 0: empty */
	size_t cap, n;                  /* slots (a power of two), strings */
};

/* Add s: 1 when it was there already, 0 when added, -1 out of memory
 * (the set is as it was). */
int strset_add(struct strset *set, const char *s);
void strset_release(struct strset *set);

#endif
