/*
 * json_test.c - unit tests for jv_equal(), the equality of JSON Patch's
 * test op, Genkit's Diff, schema enum/const and the runtime's check that a
 * resume.restart carries the interrupted tool request's inputs unchanged:
 * numbers by exact value, integers past 2^63 digit for digit.  And the
 * fast parser's strings, scanned eight bytes at a time, against
 * jansson's: each byte that ends a plain run at each offset of a word.
 */
#include <stdio.h>
#include <string.h>

#include "../../libcore/base/json.h"
#include "tap.h"

struct tc {
	const char *a, *b;
	int equal;
};

static const struct tc cases[] = {
	{ "1", "1.0", 1 },
	{ "1e2", "100", 1 },
	{ "-0", "0.0", 1 },
	{ "12345678901234567890", "12345678901234567890", 1 },
	{ "12345678901234567890", "12345678901234567891", 0 },
	{ "123456789012345678901234", "123456789012345678901235", 0 },
	{ "-12345678901234567890", "-12345678901234567891", 0 },
	{ "-12345678901234567890", "12345678901234567890", 0 },
	{ "18446744073709551616", "1.8446744073709551616e19", 1 },
	{ "18446744073709551617", "1.8446744073709551616e19", 0 },
	{ "12345678901234567890", "12345678901234567890.0", 0 },  /* a double */
	{ "9223372036854775808", "9223372036854775807", 0 },
	{ "-9223372036854775809", "-9223372036854775808", 0 },
	{ "1e400", "10e399", 1 },
	{ "1e400", "1e401", 0 },
	{ "1e400", "-1e400", 0 },
	{ "1.5e400", "15e399", 1 },
	{ "1e99999999999999999999", "10e99999999999999999998", 1 },
	{ "1e99999999999999999999", "1e99999999999999999998", 0 },
	{ "{\"q\":[1,{\"n\":12345678901234567890}]}",
	  "{\"q\":[1.0,{\"n\":12345678901234567890}]}", 1 },
	{ "{\"q\":[1,{\"n\":12345678901234567890}]}",
	  "{\"q\":[1,{\"n\":12345678901234567891}]}", 0 },
	{ "\"12345678901234567890\"", "12345678901234567890", 0 },
};

/* A string of n plain bytes with special inserted at offset k: jv_parse()
 * must read it as jansson does, or refuse it as jansson does. */
static int same_string(size_t n, size_t k, const char *special)
{
	char text[128];
	size_t sl = strlen(special), len = 0;
	text[len++] = '"';
	for (size_t i = 0; i < n; i++) {
		if (i == k) {
			memcpy(text + len, special, sl);
			len += sl;
		}
		text[len++] = (char)('a' + i % 26);
	}
	text[len++] = '"';
	struct core_err e = { 0 };
	json_t *got = jv_parse(text, len, "t", 0, &e);
	json_t *want = json_loadb(text, len, JSON_DECODE_ANY, NULL);
	int ok = (!got && !want) || (got && want && json_equal(got, want));
	json_decref(got);
	json_decref(want);
	return ok;
}

static void strings(void)
{
	static const char *const specials[] = {
		"\\\"", "\\\\", "\"", "\\", "\\n", "\\u00e9", "\x01", "\x1f", "\xc3\xa9",
		"\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xff", "\xc3", " ", "\x7f", "\x21", "\x23",
		"\x5b", "\x5d",
	};
	for (size_t s = 0; s < sizeof specials / sizeof *specials; s++) {
		int ok = 1;
		for (size_t n = 0; n <= 40 && ok; n++)
			for (size_t k = 0; k <= n && ok; k++)
				ok = same_string(n, k, specials[s]);
		char name[96];
		snprintf(name, sizeof name, "fast strings: special %zu (bytes %02x...) at every offset "
		         "as jansson reads it", s, (unsigned char)specials[s][0]);
		report(ok, name, NULL);
	}
}

int main(void)
{
	strings();
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const struct tc *t = &cases[i];
		struct core_err e = { 0 };
		json_t *a = jv_parse(t->a, strlen(t->a), "a", 0, &e);
		json_t *b = jv_parse(t->b, strlen(t->b), "b", 0, &e);
		char name[512];
		snprintf(name, sizeof name, "%s %s %s", t->a, t->equal ? "==" : "!=", t->b);
		report(a && b && jv_equal(a, b) == t->equal && jv_equal(b, a) == t->equal,
		       name, NULL);
		json_decref(a);
		json_decref(b);
	}
	return tap_end();
}
