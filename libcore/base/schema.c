/* schema.c - a value against a JSON Schema (see schema.h). */
#include "schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "jpatch.h"
#include "json.h"

#define MAX_DEPTH 64

struct ctx {
	const json_t *root;     /* for $ref */
	struct core_buf path;   /* JSON Pointer of the value being checked */
	struct core_err *e;
	int quiet;              /* inside anyOf/oneOf/not: failures say nothing */
	int depth;
	int broken;             /* the schema itself is unusable */
	int fails;              /* mismatches reported so far */
	int cut;                /* e->msg is full: "; ..." ends it */
};

/* "a ", "an " or nothing before a JSON type's name in a message. */
static const char *article(const char *type)
{
	return !strcmp(type, "null") ? "" : strchr("aeiou", *type) ? "an " : "a ";
}

__attribute__((format(printf, 2, 3)))
static int fail(struct ctx *c, const char *fmt, ...)
{
	char msg[sizeof c->e->msg], item[2 * sizeof c->e->msg];
	va_list ap;
	if (c->quiet || !c->e || c->broken || c->cut)
		return 0;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (c->path.len)
		snprintf(item, sizeof item, "%s: %s", c->path.p, msg);
	else
		snprintf(item, sizeof item, "%s", msg);
	if (!c->fails++) {
		core_fail(c->e, CORE_EINVAL, "%s", item);
		return 0;
	}
	/* Later mismatches follow, "; " between, while they fit whole. */
	size_t len = strlen(c->e->msg), n = strlen(item);
	if (len + 2 + n + sizeof "; ..." <= sizeof c->e->msg) {
		memcpy(c->e->msg + len, "; ", 2);      /* it fits: checked above */
		memcpy(c->e->msg + len + 2, item, n + 1);
	} else {
		if (len + sizeof "; ..." <= sizeof c->e->msg)
			snprintf(c->e->msg + len, sizeof c->e->msg - len, "; ...");
		c->cut = 1;
	}
	return 0;
}

/* A problem with the schema, not the value: reported even when quiet. */
__attribute__((format(printf, 2, 3)))
static int broken(struct ctx *c, const char *fmt, ...)
{
	char msg[sizeof c->e->msg];
	va_list ap;
	if (c->broken++ || !c->e)
		return 0;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* the schema's trouble replaces any value's, in a class of its own:
	 * no value can fix it */
	core_fail(c->e, CORE_EINTERNAL, "the input schema is unusable: %s", msg);
	return 0;
}

static int is_integer(const json_t *v)
{
	if (json_is_integer(v))
		return 1;
	if (json_is_real(v)) {
		double d = json_real_value(v);
		return isfinite(d) && d == floor(d);
	}
	return jv_is_bignum(v) && !strpbrk(json_string_value(v) + 1, ".eE");
}

static int type_is(const char *t, const json_t *v)
{
	if (!strcmp(t, "integer"))
		return is_integer(v);
	if (!strcmp(t, "number"))
		return jv_is_number(v);
	if (!strcmp(t, "string"))
		return jv_is_string(v);
	if (!strcmp(t, "object"))
		return json_is_object(v);
	if (!strcmp(t, "array"))
		return json_is_array(v);
	if (!strcmp(t, "boolean"))
		return json_is_boolean(v);
	if (!strcmp(t, "null"))
		return json_is_null(v);
	return 0;
}

/* The value as short text for a message. */
static void shown(const json_t *v, char *out, size_t n)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (jv_dump(v, &b) == CORE_OK && b.len < 120)
		snprintf(out, n, "%s", b.p);
	else
		snprintf(out, n, "%.*s...", b.len ? 116 : 0, b.p ? b.p : "");
	core_buf_release(&b);
}

static int check(struct ctx *c, const json_t *s, const json_t *v);

/* Check v against s with the pointer extended by one token. */
static int check_at(struct ctx *c, const json_t *s, const json_t *v, const char *key,
                    size_t klen, size_t index)
{
	size_t keep = c->path.len;
	int ok;
	if (core_buf_addc(&c->path, '/') != CORE_OK)
		return broken(c, "out of memory");
	if (key ? jpatch_escape_token(key, klen, &c->path) != CORE_OK
	        : core_buf_addf(&c->path, "%zu", index) != CORE_OK)
		return broken(c, "out of memory");
	ok = check(c, s, v);
	c->path.len = keep;
	c->path.p[keep] = 0;
	return ok;
}

/* Check quietly: does v match s?  (A broken schema still reports.) */
static int matches(struct ctx *c, const json_t *s, const json_t *v)
{
	int quiet = c->quiet, ok;
	c->quiet = 1;
	ok = check(c, s, v);
	c->quiet = quiet;
	return ok;
}

static const json_t *resolve(struct ctx *c, const char *ref)
{
	const json_t *at = c->root;
	const char *p;
	if (strcmp(ref, "#") && strncmp(ref, "#/", 2))
		return NULL;
	for (p = ref + 1; *p == '/' && at;) {
		char tok[256];
		size_t n = 0;
		for (p++; *p && *p != '/'; p++) {
			char ch = *p;
			if (ch == '~' && (p[1] == '0' || p[1] == '1'))
				ch = *++p == '0' ? '~' : '/';
			if (n + 1 >= sizeof tok)
				return NULL;
			tok[n++] = ch;
		}
		tok[n] = 0;
		if (json_is_object(at)) {
			at = json_object_get(at, tok);
		} else if (json_is_array(at)) {
			char *end;
			unsigned long i = strtoul(tok, &end, 10);
			at = *tok && !*end ? json_array_get(at, i) : NULL;
		} else {
			at = NULL;
		}
	}
	return at;
}

static int check_number(struct ctx *c, const json_t *s, const json_t *v)
{
	double d = jv_number_value(v), m;
	const json_t *x, *emin = json_object_get(s, "exclusiveMinimum"),
	              *emax = json_object_get(s, "exclusiveMaximum");
	if ((x = json_object_get(s, "minimum")) && json_is_number(x)) {
		m = json_number_value(x);
		if (json_is_true(emin) ? d <= m : d < m)
			return fail(c, "%g is less than the minimum %s%g",
			            d, json_is_true(emin) ? "(exclusive) " : "", m);
	}
	if ((x = json_object_get(s, "maximum")) && json_is_number(x)) {
		m = json_number_value(x);
		if (json_is_true(emax) ? d >= m : d > m)
			return fail(c, "%g is more than the maximum %s%g",
			            d, json_is_true(emax) ? "(exclusive) " : "", m);
	}
	if (json_is_number(emin) && d <= json_number_value(emin))
		return fail(c, "%g must be more than %g", d, json_number_value(emin));
	if (json_is_number(emax) && d >= json_number_value(emax))
		return fail(c, "%g must be less than %g", d, json_number_value(emax));
	if ((x = json_object_get(s, "multipleOf")) && json_is_number(x) &&
	    (m = json_number_value(x)) > 0) {
		double q = d / m;
		if (fabs(q - round(q)) > 1e-9 * fmax(1.0, fabs(q)))
			return fail(c, "%g is not a multiple of %g", d, m);
	}
	return 1;
}

static int check_string(struct ctx *c, const json_t *s, const json_t *v)
{
	const unsigned char *p = (const unsigned char *)json_string_value(v);
	size_t len = json_string_length(v), cps = 0, i;
	const json_t *x;
	for (i = 0; i < len; i++)
		cps += (p[i] & 0xC0) != 0x80;
	if ((x = json_object_get(s, "minLength")) && json_is_integer(x) &&
	    (json_int_t)cps < json_integer_value(x))
		return fail(c, "a string of %zu characters is shorter than the minimum %lld",
		            cps, (long long)json_integer_value(x));
	if ((x = json_object_get(s, "maxLength")) && json_is_integer(x) &&
	    (json_int_t)cps > json_integer_value(x))
		return fail(c, "a string of %zu characters is longer than the maximum %lld",
		            cps, (long long)json_integer_value(x));
	return 1;
}

static int check_object(struct ctx *c, const json_t *s, const json_t *v)
{
	const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
	const json_t *addl = json_object_get(s, "additionalProperties"), *x;
	const char *k;
	json_t *m;
	size_t i;
	int ok = 1;
	/* Every mismatch of the object's members is reported, not only the
	 * first: a model can then fix them in one go.  Quiet (a combinator's
	 * branch), the first decides. */
	json_array_foreach(req, i, m)
		if (json_is_string(m) && !json_object_get(v, json_string_value(m))) {
			ok = fail(c, "missing required property \"%s\"", json_string_value(m));
			if (c->quiet || c->broken)
				return 0;
		}
	json_object_foreach((json_t *)v, k, m) {
		size_t klen = json_object_iter_key_len(json_object_key_to_iter(k));
		const json_t *ps = json_is_object(props) ? json_object_getn(props, k, klen) : NULL;
		int good = 1;
		if (ps)
			good = check_at(c, ps, m, k, klen, 0);
		else if (addl && !json_object_get(s, "patternProperties"))
			good = json_is_false(addl) ? fail(c, "unexpected property \"%s\"", k)
			                           : check_at(c, addl, m, k, klen, 0);
		if (!good) {
			ok = 0;
			if (c->quiet || c->broken)
				return 0;
		}
	}
	if (!ok)
		return 0;
	if ((x = json_object_get(s, "minProperties")) && json_is_integer(x) &&
	    (json_int_t)json_object_size(v) < json_integer_value(x))
		return fail(c, "%zu properties, fewer than the minimum %lld", json_object_size(v),
		            (long long)json_integer_value(x));
	if ((x = json_object_get(s, "maxProperties")) && json_is_integer(x) &&
	    (json_int_t)json_object_size(v) > json_integer_value(x))
		return fail(c, "%zu properties, more than the maximum %lld", json_object_size(v),
		            (long long)json_integer_value(x));
	return 1;
}

static int check_array(struct ctx *c, const json_t *s, const json_t *v)
{
	const json_t *prefix = json_object_get(s, "prefixItems"), *items = json_object_get(s, "items");
	const json_t *rest = items, *x;
	size_t n = json_array_size(v), np = 0, i, j;
	int ok = 1;
	if (json_is_array(items)) {             /* draft-07 tuple */
		prefix = items;
		rest = json_object_get(s, "additionalItems");
	}
	if (json_is_array(prefix))
		np = json_array_size(prefix);
	for (i = 0; i < n; i++) {
		const json_t *is = i < np ? json_array_get(prefix, i) : rest;
		if (is && json_is_false(is))
			return fail(c, "%zu items, more than the %zu allowed", n, np);
		if (is && !check_at(c, is, json_array_get(v, i), NULL, 0, i)) {
			ok = 0;     /* every item's mismatch, as for members */
			if (c->quiet || c->broken)
				return 0;
		}
	}
	if (!ok)
		return 0;
	if ((x = json_object_get(s, "minItems")) && json_is_integer(x) &&
	    (json_int_t)n < json_integer_value(x))
		return fail(c, "%zu items, fewer than the minimum %lld", n,
		            (long long)json_integer_value(x));
	if ((x = json_object_get(s, "maxItems")) && json_is_integer(x) &&
	    (json_int_t)n > json_integer_value(x))
		return fail(c, "%zu items, more than the maximum %lld", n,
		            (long long)json_integer_value(x));
	if (json_is_true(json_object_get(s, "uniqueItems")))
		for (i = 0; i < n; i++)
			for (j = i + 1; j < n; j++)
				if (jv_equal(json_array_get(v, i), json_array_get(v, j)))
					return fail(c, "items %zu and %zu are equal (uniqueItems)", i, j);
	return 1;
}

static int check(struct ctx *c, const json_t *s, const json_t *v)
{
	const json_t *x;
	size_t i, hits;
	json_t *m;
	char text[160];
	int ok = 1;

	if (json_is_true(s))
		return 1;
	if (json_is_false(s))
		return fail(c, "no value is allowed here");
	if (!json_is_object(s))
		return broken(c, "a schema must be an object or a boolean");
	if (c->depth >= MAX_DEPTH)
		return broken(c, "nested more than %d deep (a $ref loop?)", MAX_DEPTH);
	c->depth++;
	if (json_is_true(json_object_get(s, "nullable")) && json_is_null(v))
		goto out;
	if ((x = json_object_get(s, "$ref"))) {
		const json_t *to = json_is_string(x) ? resolve(c, json_string_value(x)) : NULL;
		if (!to) {
			ok = broken(c, "cannot resolve $ref %s", json_is_string(x)
			            ? json_string_value(x) : "(not a string)");
			goto out;
		}
		if (!(ok = check(c, to, v)))
			goto out;
	}
	if ((x = json_object_get(s, "type"))) {
		int hit = 0;
		if (json_is_string(x))
			hit = type_is(json_string_value(x), v);
		json_array_foreach(x, i, m)
			hit |= json_is_string(m) && type_is(json_string_value(m), v);
		if (!hit) {
			const char *got = jv_type_name(v);
			if (json_is_string(x))
				snprintf(text, sizeof text, "%s%s", article(json_string_value(x)),
				         json_string_value(x));
			else
				shown(x, text, sizeof text);
			ok = fail(c, "expected %s%s, got %s%s", json_is_string(x) ? "" : "one of ",
			          text, article(got), got);
			goto out;
		}
	}
	if ((x = json_object_get(s, "enum")) && json_is_array(x)) {
		hits = 0;
		json_array_foreach(x, i, m)
			hits += jv_equal(m, v);
		if (!hits) {
			shown(x, text, sizeof text);
			ok = fail(c, "must be one of %s", text);
			goto out;
		}
	}
	if ((x = json_object_get(s, "const")) && !jv_equal(x, v)) {
		shown(x, text, sizeof text);
		ok = fail(c, "must be %s", text);
		goto out;
	}
	if (jv_is_number(v))
		ok = check_number(c, s, v);
	else if (jv_is_string(v))
		ok = check_string(c, s, v);
	else if (json_is_object(v))
		ok = check_object(c, s, v);
	else if (json_is_array(v))
		ok = check_array(c, s, v);
	if (!ok)
		goto out;
	json_array_foreach(json_object_get(s, "allOf"), i, m)
		if (!(ok = check(c, m, v)))
			goto out;
	if ((x = json_object_get(s, "anyOf")) && json_is_array(x)) {
		hits = 0;
		json_array_foreach(x, i, m)
			if (!hits && matches(c, m, v))
				hits++;
		if (!hits && !(ok = c->broken ? 0 : fail(c, "matches none of the anyOf schemas")))
			goto out;
	}
	if ((x = json_object_get(s, "oneOf")) && json_is_array(x)) {
		hits = 0;
		json_array_foreach(x, i, m)
			hits += matches(c, m, v);
		if (hits != 1 && !(ok = c->broken ? 0 : fail(c, "matches %zu of the oneOf schemas, not exactly one", hits)))
			goto out;
	}
	if ((x = json_object_get(s, "not")) && matches(c, x, v))
		ok = c->broken ? 0 : fail(c, "matches the schema under \"not\"");
out:
	c->depth--;
	return ok && !c->broken;
}

enum core_status schema_check(const json_t *schema, const json_t *v, struct core_err *e)
{
	struct ctx c = { .root = schema, .path = CORE_BUF_INIT(CORE_BUF_UNLIMITED), .e = e };
	int ok = check(&c, schema, v ? v : json_null());
	core_buf_release(&c.path);
	if (ok)
		return CORE_OK;
	return e && e->st ? e->st : CORE_EINVAL;
}
