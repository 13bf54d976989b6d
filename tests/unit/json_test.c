/*
 * json_test.c - unit tests for jv_equal(), the equality of JSON Patch's
 * test op, Genkit's Diff, schema enum/const and the runtime's check that a
 * resume.restart carries the interrupted tool request's inputs unchanged:
 * numbers by exact value, integers past 2^63 digit for digit.
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

int main(void)
{
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
