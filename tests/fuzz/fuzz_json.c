/*
 * fuzz_json.c - JSON documents (libcore/base/json.c, libcore/base/jfast.c).
 *
 * Input: any bytes, parsed as one JSON document as every command reads one.
 * Invariants:
 *  - parse -> dump -> parse gives an equal (jv_equal) and byte-identical
 *    (jv_same) tree, and dumping that again gives the same text;
 *  - the fast parser agrees with jansson: when jv_parse_fast() accepts a
 *    text, jansson accepts it too and builds the same tree (jv_same);
 *  - jv_equal is reflexive.
 */
#include "fuzz.h"

#include <string.h>

#include "../../libcore/base/jfast.h"
#include "../../libcore/base/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	struct core_err e = { 0 };
	json_t *v = jv_parse(p, size, "fuzz", 0, &e);
	json_t *fast = jv_parse_fast(p, size);
	json_error_t jerr;
	json_t *slow = json_loadb(p, size,
	                          JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL,
	                          &jerr);

	if (fast) {
		FUZZ_CHECK(slow, "the fast parser accepted what jansson refuses: %s", jerr.text);
		FUZZ_CHECK(jv_same(fast, slow), "the fast parser built a different tree");
		FUZZ_CHECK(v, "jv_parse refused what the fast parser accepts: %s", e.msg);
	}
	if (slow)
		FUZZ_CHECK(v && jv_same(v, slow), "jv_parse differs from jansson");
	if (!v) {
		FUZZ_CHECK(e.st != CORE_OK && e.msg[0], "a refusal without a message");
		goto out;
	}
	FUZZ_CHECK(jv_equal(v, v), "jv_equal is not reflexive");

	char *d1 = fuzz_dump(v);
	struct core_err e2 = { 0 };
	json_t *v2 = jv_parse(d1, strlen(d1), "dump", 0, &e2);
	FUZZ_CHECK(v2, "the dump does not parse back: %s: %s", e2.msg, d1);
	FUZZ_CHECK(jv_equal(v, v2), "the dump parses back to a different value: %s", d1);
	FUZZ_CHECK(jv_same(v, v2), "the dump parses back to a different tree: %s", d1);
	char *d2 = fuzz_dump(v2);
	FUZZ_CHECK(!strcmp(d1, d2), "the dump is not stable: %s then %s", d1, d2);
	free(d1);
	free(d2);
	json_decref(v2);
out:
	json_decref(v);
	json_decref(fast);
	json_decref(slow);
	return 0;
}
