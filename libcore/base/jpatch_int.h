/*
 * jpatch_int.h - internal to the JSON Patch files (jpatch.c, jpatch_diff.c,
 * jpatch_apply.c): what diff and apply share.
 */
#ifndef CORE_JPATCH_INT_H
#define CORE_JPATCH_INT_H

#include <stddef.h>

#include "jfast.h"

/* Non-zero for an object or an array (inline: the diff walk asks it of
 * every value). */
static inline int jp_is_container(const struct jn *v)
{
	return v->t == JN_OBJ || v->t == JN_ARR;
}

/*
 * Nesting depth of v: 0 for a scalar, 1 for a flat container...  Stops
 * counting past limit (returns limit + 1), so a walk never goes deeper
 * than limit frames.
 */
size_t jp_depth_of(const struct jn *v, size_t limit);

#endif
