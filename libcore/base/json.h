/*
 * json.h - JSON values for agentkit: jansson trees with exact numbers.
 *
 * agentkit uses jansson's json_t for every JSON value.  jansson alone would
 * reject integers beyond 64 bits and print reals with 17 significant digits
 * (0.1 as 0.10000000000000001); these functions close both gaps:
 *
 *  - jv_parse() reads with jansson (duplicate keys rejected, any value at the
 *    top, \u0000 allowed).  Only when jansson refuses a number as too large
 *    does it rewrite those number tokens and parse again, so the common path
 *    costs nothing extra.  Such a number becomes a "bignum": a jansson string
 *    whose first byte is 0xFF followed by the number's exact text.  0xFF
 *    never occurs in UTF-8, and jansson validates every string it parses or
 *    builds with json_string(), so no real string can be mistaken for one.
 *  - jv_dump() writes compact JSON: object keys in insertion order (jansson
 *    keeps it), reals in the shortest form that reads back to the same
 *    double (with ".0" kept on integral reals), bignums verbatim.
 *  - jv_equal() is deep equality where numbers compare by value (1 == 1.0),
 *    as JSON Patch's test op and Genkit's Diff require.
 *
 * Code that checks types must use jv_is_string()/jv_is_number(), which know
 * bignums, rather than json_is_string()/json_is_number().
 *
 * Ownership: functions returning json_t * return a new reference (the caller
 * json_decref()s it); functions taking const json_t * borrow.
 */
#ifndef CORE_JSON_H
#define CORE_JSON_H

#include <stdint.h>

#include <jansson.h>

#include "buf.h"

/* Deepest nesting accepted by the parser (jansson's own limit). */
#define JV_MAX_DEPTH JSON_PARSER_MAX_DEPTH

/*
 * Parse one JSON value from p[0..n).  name and lineno say where the text
 * came from, for messages: with lineno > 0 the text is that NDJSON line,
 * with lineno == 0 it is a whole file and jansson's line and column are
 * named.  On error returns NULL with CORE_EINVAL in e ("invalid JSON: ...
 * (at doc.json:3:14)") or CORE_ENOMEM.  Defined in jfast.c: it tries
 * jfast.c's parser first and falls back to jv_parse_jansson(), so json.c
 * itself never includes jfast.h (the JSON layer has no include circle).
 */
json_t *jv_parse(const char *p, size_t n, const char *name, size_t lineno,
                 struct core_err *e);

/* jv_parse() without its fast path: jansson itself (jfast.c falls back
 * to it). */
json_t *jv_parse_jansson(const char *p, size_t n, const char *name,
                         size_t lineno, struct core_err *e);

/* Append v as compact JSON to out.  CORE_ETOOBIG, CORE_ENOMEM, CORE_EINVAL
 * (nesting deeper than JV_MAX_DEPTH * 4). */
enum core_status jv_dump(const json_t *v, struct core_buf *out);

/* Deep equality; numbers by exact value: bignums digit for digit (never
 * through a double), reals as the double they hold, 1 == 1.0 == 1e0. */
int jv_equal(const json_t *a, const json_t *b);

/*
 * Sameness as bytes: 1 when jv_dump() would write exactly the same text for
 * a and b (same types, same key order, bitwise-equal reals).  As cheap as
 * memcmp over the strings; the store uses it to recognise history it has
 * already hashed without serializing it again.
 */
int jv_same(const json_t *a, const json_t *b);

/* A number as jv_equal() compares it: an integer, a real, or the exact
 * text of a bignum (without its tag byte). */
struct jv_num {
	enum { JV_NUM_INT, JV_NUM_REAL, JV_NUM_TEXT } kind;
	int64_t i;
	double d;
	const char *s;
	size_t n;
};
int jv_num_equal(const struct jv_num *a, const struct jv_num *b);

/*
 * Read the number token p[0..n) (JSON syntax, any length) as jansson
 * does: an integer (no '.', 'e' or 'E') into *i, and its nearest double
 * (for any token, possibly infinite) into *d.  1 when jansson holds it, 0
 * when it would refuse it as too large (an integer past 64 bits, a real
 * past the double range), -1 when memory ran out.
 */
int jv_read_number(const char *p, size_t n, int64_t *i, double *d);

/* The writer's forms of an integer and of a real ("100.0", "0.1"). */
enum core_status jv_dump_int(int64_t i, struct core_buf *out);
enum core_status jv_dump_real(double d, struct core_buf *out);

int jv_is_bignum(const json_t *v);
int jv_is_string(const json_t *v);     /* a string that is not a bignum */
int jv_is_number(const json_t *v);     /* integer, real or bignum */
double jv_number_value(const json_t *v);
/* A new bignum from the number text p[0..n) (not validated). */
json_t *jv_bignum(const char *p, size_t n);

/* A new object: src's members with (key, val) inserted at position pos
 * (at the end past the last), in order: the stores put a row's state and a
 * state's messages back where they were.  Consumes val; NULL when out of
 * memory. */
json_t *jv_object_insert_at(const json_t *src, size_t pos, const char *key, json_t *val);

/* A new error object {"status": core_status_name(st), "message": msg},
 * the shape of every error agentkit writes into JSON (outputs, rows,
 * answers); msg is made valid UTF-8 (utf8.h).  NULL without memory. */
json_t *jv_error_new(enum core_status st, const char *msg);

/* This process as a lease holder names it: {"host": its host name, "pid"}
 * (a detached run's worker, a queued run's claim).  NULL without memory. */
json_t *jv_host_pid(void);

/* Name of v's type for messages: "object", "array", "string", "number",
 * "boolean", "null". */
const char *jv_type_name(const json_t *v);

/* Append s[0..n) as a JSON string literal (quotes and escapes) to out. */
enum core_status jv_dump_string(const char *s, size_t n, struct core_buf *out);

/*
 * Where the JSON string literal whose body starts at p (just past its
 * opening quote) ends: the offset in p[0..n) of its closing quote, or n
 * when there is none.  Escapes are stepped over, not read, and nothing is
 * validated: it is for text a JSON writer made (what the store keeps),
 * sixteen bytes a step.
 */
size_t jv_string_end(const char *p, size_t n);

#endif
