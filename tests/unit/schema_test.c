/*
 * schema_test.c - unit tests for libcore/schema: each keyword accepting and
 * rejecting, the exact message and JSON Pointer of a mismatch, $ref,
 * combinators, and schemas that cannot be used.
 */
#include <stdio.h>
#include <string.h>

#include "../../libcore/base/json.h"
#include "../../libcore/base/schema.h"
#include "tap.h"

struct tc {
	const char *schema, *value;
	const char *want;       /* "" for a match, else the whole message */
};

static const struct tc cases[] = {
	/* booleans, type */
	{ "true", "[1]", "" },
	{ "false", "1", "no value is allowed here" },
	{ "{}", "null", "" },
	{ "{\"type\":\"object\"}", "null", "expected an object, got null" },
	{ "{\"type\":\"string\"}", "\"x\"", "" },
	{ "{\"type\":\"string\"}", "12345678901234567890123", "expected a string, got a number" },
	{ "{\"type\":\"integer\"}", "3", "" },
	{ "{\"type\":\"integer\"}", "3.0", "" },
	{ "{\"type\":\"integer\"}", "3.5", "expected an integer, got a number" },
	{ "{\"type\":\"integer\"}", "123456789012345678901234567890", "" },
	{ "{\"type\":\"number\"}", "1e400", "" },
	{ "{\"type\":\"boolean\"}", "0", "expected a boolean, got a number" },
	{ "{\"type\":\"null\"}", "false", "expected null, got a boolean" },
	{ "{\"type\":[\"string\",\"null\"]}", "null", "" },
	{ "{\"type\":[\"string\",\"null\"]}", "{}", "expected one of [\"string\",\"null\"], got an object" },
	{ "{\"type\":\"string\",\"nullable\":true}", "null", "" },
	/* enum, const */
	{ "{\"enum\":[\"a\",1]}", "1.0", "" },
	{ "{\"enum\":[\"a\",1]}", "\"b\"", "must be one of [\"a\",1]" },
	{ "{\"const\":{\"k\":[1]}}", "{\"k\":[1]}", "" },
	{ "{\"const\":{\"k\":[1]}}", "{\"k\":[2]}", "must be {\"k\":[1]}" },
	/* numbers */
	{ "{\"minimum\":1,\"maximum\":3}", "3", "" },
	{ "{\"minimum\":1}", "0.5", "0.5 is less than the minimum 1" },
	{ "{\"maximum\":3}", "4", "4 is more than the maximum 3" },
	{ "{\"exclusiveMinimum\":1}", "1", "1 must be more than 1" },
	{ "{\"exclusiveMaximum\":3}", "3", "3 must be less than 3" },
	{ "{\"minimum\":1,\"exclusiveMinimum\":true}", "1", "1 is less than the minimum (exclusive) 1" },
	{ "{\"multipleOf\":0.1}", "0.3", "" },
	{ "{\"multipleOf\":2}", "3", "3 is not a multiple of 2" },
	{ "{\"minimum\":1}", "\"not a number\"", "" },
	/* strings */
	{ "{\"minLength\":2,\"maxLength\":3}", "\"\xc3\xa9t\xc3\xa9\"", "" },
	{ "{\"minLength\":2}", "\"\xc3\xa9\"", "a string of 1 characters is shorter than the minimum 2" },
	{ "{\"maxLength\":1}", "\"ab\"", "a string of 2 characters is longer than the maximum 1" },
	{ "{\"type\":\"string\",\"pattern\":\"^x$\",\"format\":\"email\"}", "\"y\"", "" },
	/* objects */
	{ "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}",
	  "{\"city\":\"Paris\"}", "" },
	{ "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}",
	  "{}", "missing required property \"city\"" },
	{ "{\"properties\":{\"city\":{\"type\":\"string\"}}}", "{\"city\":7}",
	  "/city: expected a string, got a number" },
	{ "{\"properties\":{\"a/b~c\":{\"properties\":{\"d\":{\"type\":\"integer\"}}}}}",
	  "{\"a/b~c\":{\"d\":\"x\"}}", "/a~1b~0c/d: expected an integer, got a string" },
	{ "{\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"a\":1,\"b\":2}",
	  "unexpected property \"b\"" },
	{ "{\"additionalProperties\":{\"type\":\"integer\"}}", "{\"n\":1,\"m\":\"x\"}",
	  "/m: expected an integer, got a string" },
	{ "{\"patternProperties\":{\"^x\":{}},\"additionalProperties\":false}", "{\"y\":1}", "" },
	{ "{\"minProperties\":1}", "{}", "0 properties, fewer than the minimum 1" },
	{ "{\"maxProperties\":1}", "{\"a\":1,\"b\":2}", "2 properties, more than the maximum 1" },
	/* arrays */
	{ "{\"items\":{\"type\":\"integer\"}}", "[1,2,\"x\"]", "/2: expected an integer, got a string" },
	{ "{\"prefixItems\":[{\"type\":\"string\"}],\"items\":false}", "[\"a\"]", "" },
	{ "{\"prefixItems\":[{\"type\":\"string\"}],\"items\":false}", "[\"a\",1]",
	  "2 items, more than the 1 allowed" },
	{ "{\"items\":[{\"type\":\"string\"}],\"additionalItems\":{\"type\":\"integer\"}}", "[\"a\",1,\"b\"]",
	  "/2: expected an integer, got a string" },
	{ "{\"minItems\":2}", "[1]", "1 items, fewer than the minimum 2" },
	{ "{\"maxItems\":1}", "[1,2]", "2 items, more than the maximum 1" },
	{ "{\"uniqueItems\":true}", "[1,{\"a\":1},1.0]", "items 0 and 2 are equal (uniqueItems)" },
	{ "{\"uniqueItems\":true}", "[1,2]", "" },
	/* combinators */
	{ "{\"allOf\":[{\"minimum\":1},{\"maximum\":2}]}", "3", "3 is more than the maximum 2" },
	{ "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "2", "" },
	{ "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "[]",
	  "matches none of the anyOf schemas" },
	{ "{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}", "1.5", "" },
	{ "{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}", "1",
	  "matches 2 of the oneOf schemas, not exactly one" },
	{ "{\"not\":{\"type\":\"null\"}}", "null", "matches the schema under \"not\"" },
	{ "{\"properties\":{\"q\":{\"anyOf\":[{\"type\":\"string\"}]}}}", "{\"q\":1}",
	  "/q: matches none of the anyOf schemas" },
	/* $ref */
	{ "{\"$defs\":{\"city\":{\"type\":\"string\"}},\"properties\":{\"c\":{\"$ref\":\"#/$defs/city\"}}}",
	  "{\"c\":1}", "/c: expected a string, got a number" },
	{ "{\"definitions\":{\"n\":{\"type\":\"integer\"}},\"items\":{\"$ref\":\"#/definitions/n\"}}",
	  "[1,2]", "" },
	{ "{\"properties\":{\"next\":{\"$ref\":\"#\"}},\"type\":\"object\"}", "{\"next\":{\"next\":{}}}", "" },
	{ "{\"properties\":{\"next\":{\"$ref\":\"#\"}},\"type\":\"object\"}", "{\"next\":{\"next\":3}}",
	  "/next/next: expected an object, got a number" },
	/* every mismatch of an object's members and an array's items, in
	 * order; a combinator's branch still says only that it failed */
	{ "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"}},\"required\":[\"path\",\"encoding\"],\"additionalProperties\":false}",
	  "{\"path\":1,\"n\":\"x\",\"mode\":2}",
	  "missing required property \"encoding\"; /path: expected a string, got a number; /n: expected an integer, got a string; unexpected property \"mode\"" },
	{ "{\"items\":{\"type\":\"string\"}}", "[1,\"a\",{\"b\":2}]",
	  "/0: expected a string, got a number; /2: expected a string, got an object" },
	{ "{\"properties\":{\"a\":{\"properties\":{\"x\":{\"type\":\"string\"},\"y\":{\"type\":\"string\"}}}}}",
	  "{\"a\":{\"x\":1,\"y\":2}}",
	  "/a/x: expected a string, got a number; /a/y: expected a string, got a number" },
	{ "{\"anyOf\":[{\"required\":[\"a\",\"b\"]},{\"type\":\"string\"}]}", "{}",
	  "matches none of the anyOf schemas" },
	/* unusable schemas */
	{ "{\"$ref\":\"#/nowhere\"}", "1", "the input schema is unusable: cannot resolve $ref #/nowhere" },
	{ "{\"$ref\":\"#\"}", "1", "the input schema is unusable: nested more than 64 deep (a $ref loop?)" },
	{ "{\"properties\":{\"a\":3}}", "{\"a\":1}",
	  "the input schema is unusable: a schema must be an object or a boolean" },
	{ "{\"anyOf\":[{\"$ref\":\"#/x\"}]}", "1", "the input schema is unusable: cannot resolve $ref #/x" },
};

int main(void)
{
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const struct tc *t = &cases[i];
		struct core_err e = { 0 };
		json_t *s = jv_parse(t->schema, strlen(t->schema), "schema", 0, &e);
		json_t *v = jv_parse(t->value, strlen(t->value), "value", 0, &e);
		enum core_status st = s && v ? schema_check(s, v, &e) : CORE_ESYS;
		const char *got = st == CORE_OK ? "" : e.msg;
		/* a value's mismatch is CORE_EINVAL, an unusable schema
		 * CORE_EINTERNAL (runtime_tools.c tells the model only the
		 * first) */
		enum core_status want_st = !*t->want ? CORE_OK
		                         : strstr(t->want, "the input schema is unusable") == t->want
		                         ? CORE_EINTERNAL : CORE_EINVAL;
		char name[1024], detail[2048];
		snprintf(name, sizeof name, "%s against %s", t->value, t->schema);
		snprintf(detail, sizeof detail, "want: %s (status %d), got: %s (status %d)", t->want,
		         (int)want_st, got, (int)st);
		report(s && v && !strcmp(got, t->want) && st == want_st,
		       name, detail);
		json_decref(s);
		json_decref(v);
	}
	/* Mismatches past the message's room end it with "; ..." */
	{
		struct core_err e = { 0 };
		json_t *s = json_pack("{s:{s:s}}", "items", "type", "string"), *v = json_array();
		for (int i = 0; i < 200; i++)
			json_array_append_new(v, json_integer(i));
		enum core_status st = schema_check(s, v, &e);
		size_t len = strlen(e.msg);
		report(st == CORE_EINVAL && len > 900 && len < sizeof e.msg &&
		       !strncmp(e.msg, "/0: expected a string, got a number; /1: ", 41) &&
		       !strcmp(e.msg + len - 5, "; ..."), "200 mismatches: as many as fit, then \"; ...\"",
		       e.msg);
		json_decref(s);
		json_decref(v);
	}
	return tap_end();
}
