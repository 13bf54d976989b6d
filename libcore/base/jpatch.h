/*
 * jpatch.h - JSON Patch (RFC 6902) over JSON Pointer (RFC 6901).
 *
 * Two directions:
 *
 *  - jpatch_diff() computes a patch that turns one document into another.
 *    By default it is Genkit's Diff exactly (runtime-semantics §5.1): object
 *    members in byte-wise sorted key order, arrays by index, appends as
 *    "/-" in order, tail removals backwards, a change of type or scalar as a
 *    replace (the root as path "").  With JPATCH_MINIMAL arrays are aligned
 *    by a longest-common-subsequence diff (Myers), so an insertion in the
 *    middle of a list is one "add" instead of a replace per later element.
 *
 *  - jpatch_apply() applies a patch.  Strict mode follows RFC 6902 and 6901
 *    to the letter; JPATCH_LENIENT follows Genkit's ApplyPatch
 *    (runtime-semantics §5.2): missing containers are created, a remove or
 *    replace of a missing member is a no-op, and its error messages are
 *    Genkit's ("jsonpatch: test failed at \"/a\"").
 *
 * Operations are written the way Genkit's JSONPatchOperation marshals:
 * members in the order "from" (only when set), "op", "path", "value", and
 * "value" is always present (a remove carries "value":null).
 *
 * Numbers compare by value (1 == 1.0) and keep their exact text otherwise
 * (see json.h).  Nothing here prints or exits.
 */
#ifndef CORE_JPATCH_H
#define CORE_JPATCH_H

#include <jansson.h>

#include "buf.h"
#include "jfast.h"
#include "json.h"
#include "status.h"

/* Flags of jpatch_diff() and jpatch_apply(). */
enum {
	JPATCH_MINIMAL = 1 << 0,  /* diff: align arrays by LCS */
	JPATCH_LENIENT = 1 << 1,  /* apply: Genkit's lenient rules */
	JPATCH_INPLACE = 1 << 2,  /* apply: the caller drops the document on
	                             error, so no atomic copy is needed */
};

/*
 * Deepest document nesting a patch may produce.  Documents come from the
 * parser at most JV_MAX_DEPTH deep; a patch may nest a value below a
 * pointer, and this bound keeps every later walk (and jv_dump, which
 * stops at JV_MAX_DEPTH * 4) within reach.
 */
#define JPATCH_MAX_DEPTH (JV_MAX_DEPTH * 2)

/*
 * Compute the patch that turns from into to and append it to out as
 * compact JSON (one array, the bytes jv_dump() would write for it).
 *
 * @param[in]  from, to  borrowed documents (any JSON value)
 * @param[in]  flags     0 or JPATCH_MINIMAL
 * @param[out] out       the patch is appended
 * @param[out] nops      its number of operations
 * @return CORE_OK; CORE_EINVAL when a document nests deeper than
 *         JPATCH_MAX_DEPTH; CORE_ENOMEM, CORE_ETOOBIG (out's maximum).
 */
enum core_status jpatch_diff_jn(const struct jn *from, const struct jn *to,
                                unsigned flags, struct core_buf *out,
                                size_t *nops, struct core_err *e);

/* jpatch_diff_jn() for jansson trees: *patch is a new array of operations
 * (the caller json_decref()s it), NULL on error. */
enum core_status jpatch_diff(const json_t *from, const json_t *to,
                             unsigned flags, json_t **patch,
                             struct core_err *e);

/*
 * Apply patch to *doc.
 *
 * @param[in,out] doc    the document (owned by the caller), patched in
 *                       place.  On error it is left exactly as it was,
 *                       unless JPATCH_INPLACE is set, in which case it is
 *                       left in an unspecified (but valid, releasable)
 *                       state.  Strings of the document may borrow its
 *                       text (struct jn_doc); values from the patch are
 *                       copied with their own strings, so the patch and
 *                       its text may go once this returns.
 * @param[in]     patch  borrowed, never modified
 * @param[in]     flags  JPATCH_LENIENT, JPATCH_INPLACE
 * @return CORE_OK;
 *         CORE_EINVAL  the patch is malformed (not an array, an operation
 *                      not an object, missing or mistyped members, a bad
 *                      pointer, an unknown op) or, in strict mode, does not
 *                      apply (a missing path, an index out of range);
 *         CORE_FAILED  a "test" operation did not hold;
 *         CORE_ENOMEM.
 *         Messages name the operation: "patch op 3: 'path' must be a
 *         string"; in lenient mode they end in Genkit's own text.
 */
enum core_status jpatch_apply_jn(struct jn *doc, const struct jn *patch,
                                 unsigned flags, struct core_err *e);

/* jpatch_apply_jn() for jansson trees: on success *doc is replaced by a
 * new tree (the old one is released); on error it is left as it was
 * (JPATCH_INPLACE makes no difference here). */
enum core_status jpatch_apply(json_t **doc, const json_t *patch,
                              unsigned flags, struct core_err *e);

/*
 * Append the RFC 6901 escaped form of the token s[0..n) ("~" as "~0",
 * "/" as "~1") to out.
 */
enum core_status jpatch_escape_token(const char *s, size_t n,
                                     struct core_buf *out);

#endif
