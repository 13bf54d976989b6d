/*
 * fuzz_jpatch.c - JSON Patch diff and apply (libcore/base/jpatch.c).
 *
 * Input: three lines - document A, document B, a patch (the rest).
 * Invariants, for every pair that parses:
 *  - apply(diff(A, B), A) == B, for Genkit's diff and the minimal (LCS)
 *    diff, applied strictly and leniently, and again after the patch is
 *    dumped and parsed back (what jpatch-diff | jpatch-apply does);
 *  - diff(A, A) is the empty patch;
 * and for the fuzzed patch, in strict and lenient mode:
 *  - a failed apply leaves the document exactly as it was (byte-identical);
 *  - a failed apply says why (a status and a message);
 *  - the in-place mode neither crashes nor leaks on any patch.
 */
#include "fuzz.h"

#include <string.h>

#include "../../libcore/base/jpatch.h"
#include "../../libcore/base/json.h"

static json_t *parse(const uint8_t *p, size_t n)
{
	struct core_err e = { 0 };
	return jv_parse((const char *)p, n, "fuzz", 0, &e);
}

static void roundtrip(const json_t *a, const json_t *b, unsigned dflags)
{
	struct core_err e = { 0 };
	json_t *patch = NULL;
	enum core_status st = jpatch_diff(a, b, dflags, &patch, &e);
	if (st == CORE_EINVAL) /* too deep: a documented refusal */
		return;
	FUZZ_CHECK(st == CORE_OK && patch, "diff failed: %s", e.msg);

	char *text = fuzz_dump(patch);
	json_t *reread = jv_parse(text, strlen(text), "patch", 0, &e);
	FUZZ_CHECK(reread, "the patch does not parse back: %s", e.msg);
	const json_t *patches[2] = { patch, reread };
	for (int k = 0; k < 2; k++) {
		for (unsigned aflags = 0; aflags <= JPATCH_LENIENT; aflags += JPATCH_LENIENT) {
			json_t *doc = json_deep_copy(a);
			struct core_err ae = { 0 };
			st = jpatch_apply(&doc, patches[k], aflags, &ae);
			FUZZ_CHECK(st == CORE_OK, "diff %u applied with flags %u fails: %s: %s",
			           dflags, aflags, ae.msg, text);
			FUZZ_CHECK(jv_equal(doc, b), "apply(diff(A, B), A) != B (diff %u, apply %u): %s",
			           dflags, aflags, text);
			json_decref(doc);
		}
	}
	json_decref(reread);
	free(text);
	json_decref(patch);
}

static void apply_fuzzed(const json_t *a, const json_t *patch, unsigned flags)
{
	struct core_err e = { 0 };
	json_t *doc = json_deep_copy(a);
	json_t *before = json_deep_copy(a);
	enum core_status st = jpatch_apply(&doc, patch, flags, &e);
	if (st != CORE_OK) {
		FUZZ_CHECK(e.msg[0], "a failed apply without a message");
		FUZZ_CHECK(st == CORE_EINVAL || st == CORE_FAILED || st == CORE_ENOMEM,
		           "unexpected status %s", core_strerror(st));
		if (!(flags & JPATCH_INPLACE))
			FUZZ_CHECK(jv_same(doc, before), "a failed apply changed the document: %s",
			           e.msg);
	}
	json_decref(doc);
	json_decref(before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *pa, *rest, *pb, *pp;
	size_t na, nrest, nb, np;
	fuzz_split(data, size, '\n', &pa, &na, &rest, &nrest);
	fuzz_split(rest, nrest, '\n', &pb, &nb, &pp, &np);
	json_t *a = parse(pa, na), *b = parse(pb, nb), *patch = parse(pp, np);

	if (a && b) {
		roundtrip(a, b, 0);
		roundtrip(a, b, JPATCH_MINIMAL);
	}
	if (a) {
		struct core_err e = { 0 };
		json_t *same = NULL;
		if (jpatch_diff(a, a, 0, &same, &e) == CORE_OK)
			FUZZ_CHECK(json_array_size(same) == 0, "diff(A, A) is not empty");
		json_decref(same);
	}
	if (a && patch) {
		apply_fuzzed(a, patch, 0);
		apply_fuzzed(a, patch, JPATCH_LENIENT);
		apply_fuzzed(a, patch, JPATCH_INPLACE);
		apply_fuzzed(a, patch, JPATCH_LENIENT | JPATCH_INPLACE);
	}
	json_decref(a);
	json_decref(b);
	json_decref(patch);
	return 0;
}
