/* json.c - exact-number JSON on top of jansson; see json.h. */
#include "json.h"
#include "json_int.h"
#include "utf8.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define BIGNUM_TAG '\xff'
#define PARSE_FLAGS (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL)

int jv_is_bignum(const json_t *v)
{
	return json_is_string(v) && json_string_length(v) > 1
	       && json_string_value(v)[0] == BIGNUM_TAG;
}

int jv_is_string(const json_t *v)
{
	return json_is_string(v) && !jv_is_bignum(v);
}

int jv_is_number(const json_t *v)
{
	return json_is_number(v) || jv_is_bignum(v);
}

double jv_number_value(const json_t *v)
{
	if (jv_is_bignum(v))
		return strtod(json_string_value(v) + 1, NULL);
	return json_number_value(v);
}

json_t *jv_bignum(const char *p, size_t n)
{
	char *s = malloc(n + 1);
	json_t *v;
	if (!s)
		return NULL;
	s[0] = BIGNUM_TAG;
	memcpy(s + 1, p, n);
	v = json_stringn_nocheck(s, n + 1);
	free(s);
	return v;
}

const char *jv_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "object";
	case JSON_ARRAY: return "array";
	case JSON_STRING: return jv_is_bignum(v) ? "number" : "string";
	case JSON_INTEGER:
	case JSON_REAL: return "number";
	case JSON_TRUE:
	case JSON_FALSE: return "boolean";
	default: return "null";
	}
}

/*
 * The rare path: jansson refused a number as too large.  Copy the text,
 * turning every number token that jansson cannot hold into a string
 * "\u0000\u00XX<text>" (XX chosen so that no string in the input starts the
 * same way), parse that, then swap those strings for bignums.
 */
static int is_num_char(char c)
{
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.'
	       || c == 'e' || c == 'E';
}

int jv_read_number(const char *p, size_t n, int64_t *i, double *d)
{
	char tmp[64], *t = tmp;
	int real = 0, ok;
	for (size_t k = 0; k < n; k++)
		if (p[k] == '.' || p[k] == 'e' || p[k] == 'E')
			real = 1;
	if (n >= sizeof tmp && !(t = malloc(n + 1)))
		return -1;
	memcpy(t, p, n);
	t[n] = 0;
	errno = 0;
	*d = strtod(t, NULL);
	ok = !isinf(*d);
	if (!real) {
		errno = 0;
		*i = strtoll(t, NULL, 10);
		ok = errno != ERANGE;
	}
	if (t != tmp)
		free(t);
	return ok;
}

/* Would jansson refuse this number token (or memory ran out)? */
static int too_big(const char *p, size_t n)
{
	int64_t i;
	double d;
	return jv_read_number(p, n, &i, &d) != 1;
}

static char *memcasemem(const char *h, size_t hn, const char *n, size_t nn)
{
	for (size_t i = 0; i + nn <= hn; i++)
		if (!strncasecmp(h + i, n, nn))
			return (char *)h + i;
	return NULL;
}

static int unmark(json_t *v, const char *mark, int depth)
{
	size_t i;
	const char *k;
	json_t *c;
	if (depth > JV_MAX_DEPTH)
		return 0;
	if (json_is_object(v)) {
		json_object_foreach(v, k, c) {
			if (json_is_string(c) && json_string_length(c) > 2
			    && !memcmp(json_string_value(c), mark, 2)) {
				json_t *b = jv_bignum(json_string_value(c) + 2,
				                      json_string_length(c) - 2);
				if (!b || json_object_set_new(v, k, b))
					return -1;
			} else if (unmark(c, mark, depth + 1) < 0)
				return -1;
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, c) {
			if (json_is_string(c) && json_string_length(c) > 2
			    && !memcmp(json_string_value(c), mark, 2)) {
				json_t *b = jv_bignum(json_string_value(c) + 2,
				                      json_string_length(c) - 2);
				if (!b || json_array_set_new(v, i, b))
					return -1;
			} else if (unmark(c, mark, depth + 1) < 0)
				return -1;
		}
	}
	return 0;
}

static json_t *parse_bignums(const char *p, size_t n, json_error_t *jerr)
{
	char esc[16], mark[2] = { 0, 0 };
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	json_t *v = NULL;
	int in_str = 0;
	size_t i = 0;

	for (int x = 1; x < 32 && !mark[1]; x++) {
		snprintf(esc, sizeof esc, "\"\\u0000\\u%04x", x);
		if (!memcasemem(p, n, esc, strlen(esc)))
			mark[1] = (char)x;
	}
	if (!mark[1])
		return NULL;
	snprintf(esc, sizeof esc, "\"\\u0000\\u%04x", mark[1]);
	while (i < n) {
		char c = p[i];
		if (in_str) {
			size_t j = i;
			while (j < n && p[j] != '"' && p[j] != '\\')
				j++;
			if (j < n && p[j] == '\\')
				j = j + 2 > n ? n : j + 2;
			else if (j < n)
				in_str = 0, j++;
			if (core_buf_add(&b, p + i, j - i))
				goto out;
			i = j;
		} else if (c == '"') {
			in_str = 1;
			if (core_buf_addc(&b, c))
				goto out;
			i++;
		} else if (c == '-' || (c >= '0' && c <= '9')) {
			size_t j = i;
			while (j < n && is_num_char(p[j]))
				j++;
			if (too_big(p + i, j - i)) {
				if (core_buf_adds(&b, esc) || core_buf_add(&b, p + i, j - i)
				    || core_buf_addc(&b, '"'))
					goto out;
			} else if (core_buf_add(&b, p + i, j - i))
				goto out;
			i = j;
		} else {
			if (core_buf_addc(&b, c))
				goto out;
			i++;
		}
	}
	v = json_loadb(b.p, b.len, PARSE_FLAGS, jerr);
	if (v && json_is_string(v) && json_string_length(v) > 2
	    && !memcmp(json_string_value(v), mark, 2)) {
		/* the whole document is one big number */
		json_t *big = jv_bignum(json_string_value(v) + 2, json_string_length(v) - 2);
		json_decref(v);
		v = big;
	} else if (v && unmark(v, mark, 0) < 0) {
		json_decref(v);
		v = NULL;
	}
out:
	core_buf_release(&b);
	return v;
}

json_t *jv_parse_jansson(const char *p, size_t n, const char *name,
                         size_t lineno, struct core_err *e)
{
	json_error_t jerr;
	json_t *v = json_loadb(p, n, PARSE_FLAGS, &jerr);
	/* jansson: "too big integer", "too big negative integer" */
	if (!v && (strstr(jerr.text, "too big") || strstr(jerr.text, "real number overflow"))) {
		json_error_t again;
		v = parse_bignums(p, n, &again);
	}
	if (v)
		return v;
	if (json_error_code(&jerr) == json_error_out_of_memory) {
		core_fail(e, CORE_ENOMEM, "out of memory reading %s", name);
		return NULL;
	}
	if (lineno)
		core_fail(e, CORE_EINVAL, "invalid JSON: %s (at %s:%zu)",
		          jerr.text, name, lineno);
	else
		core_fail(e, CORE_EINVAL, "invalid JSON: %s (at %s:%d:%d)",
		          jerr.text, name, jerr.line, jerr.column);
	return NULL;
}

json_t *jv_error_new(enum core_status st, const char *msg)
{
	size_t n = strlen(msg);
	char *fixed = utf8_valid(msg, n) == n ? NULL : utf8_dup(msg, n);
	json_t *err = json_pack("{s:s, s:s}", "status", core_status_name(st),
	                        "message", fixed ? fixed : msg);
	free(fixed);
	return err;
}

/* ---- writing ---- */

static const char hexdig[] = "0123456789abcdef";

/*
 * Copy the run from s[i] of bytes that need no escape to q; the run's end.
 * Sixteen bytes at a time with SSE2 (every x86-64 has it), else eight
 * (jw_esc_mask()), each block stored whole - the caller has room for all of
 * s[i..n), and what follows the run overwrites the bytes past it - then
 * the tail as one last block that overlaps the bytes already copied, so
 * no byte is looked at alone unless s[i..n) is shorter than a word.
 */
static size_t plain_run(const char *s, size_t i, size_t n, char *q)
{
	size_t start = i;
#if defined(__SSE2__)
	const __m128i ctl = _mm_set1_epi8(0x1f), quote = _mm_set1_epi8('"'),
	              bsl = _mm_set1_epi8('\\');
	while (n - i >= 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		unsigned m;
		_mm_storeu_si128((__m128i *)(void *)q, x);
		m = (unsigned)_mm_movemask_epi8(_mm_or_si128(
		        _mm_cmpeq_epi8(_mm_max_epu8(x, ctl), ctl),
		        _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bsl))));
		if (m)
			return i + (size_t)__builtin_ctz(m);
		i += 16;
		q += 16;
	}
#endif
	while (n - i >= 8) {
		uint64_t x = jw_load8(s + i), m = jw_esc_mask(x);
		memcpy(q, &x, 8);
		if (m)
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			return i + (size_t)(__builtin_ctzll(m) >> 3);
#else
			break;
#endif
		i += 8;
		q += 8;
	}
	if (i < n && n - start >= 8) {
		/* the last eight bytes, some of them copied already */
		uint64_t x = jw_load8(s + n - 8);
		if (!jw_esc_mask(x)) {
			memcpy(q - (i - (n - 8)), &x, 8);
			return n;
		}
	}
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == '"' || c == '\\')
			break;
		*q++ = (char)c;
		i++;
	}
	return i;
}

/* The escape of byte c (one that needs one) at q; its length. */
static size_t escape_byte(unsigned char c, char *q)
{
	q[0] = '\\';
	switch (c) {
	case '"': q[1] = '"'; return 2;
	case '\\': q[1] = '\\'; return 2;
	case '\n': q[1] = 'n'; return 2;
	case '\t': q[1] = 't'; return 2;
	case '\r': q[1] = 'r'; return 2;
	case '\b': q[1] = 'b'; return 2;
	case '\f': q[1] = 'f'; return 2;
	}
	q[1] = 'u'; q[2] = '0'; q[3] = '0';
	q[4] = hexdig[c >> 4]; q[5] = hexdig[c & 15];
	return 6;
}

/*
 * By runs: room for the quoted string without escapes is made once, and
 * each run of plain bytes is copied into it as it is scanned; an escape
 * makes room for itself, the rest of s and the closing quote only when the
 * buffer has not got it (never more than the whole string needs, so a
 * bounded buffer holds what fits).
 */
enum core_status jv_dump_string(const char *s, size_t n, struct core_buf *out)
{
	enum core_status st;
	size_t i = 0, run;
	if (jw_string_short(s, n, out))
		return CORE_OK;
	/* room for the quotes and the NUL; the call only when short of it */
	if ((out->cap - out->len < n + 3 || out->len + n + 2 > out->max)
	    && (st = core_buf_grow(out, n + 2)))
		return st;
	out->p[out->len++] = '"';
	for (;;) {
		run = plain_run(s, i, n, out->p + out->len);
		out->len += run - i;
		if (run == n)
			break;
		char esc[6];
		size_t k = escape_byte((unsigned char)s[run], esc);
		/* room for the escape, the rest of s, the quote and the NUL */
		if (out->cap - out->len < k + (n - run) + 1
		    && (st = core_buf_grow(out, k + (n - run)))) {
			out->p[out->len] = 0;
			return st;
		}
		memcpy(out->p + out->len, esc, k);
		out->len += k;
		i = run + 1;
	}
	out->p[out->len++] = '"';
	out->p[out->len] = 0;
	return CORE_OK;
}

size_t jv_string_end(const char *p, size_t n)
{
	size_t i = 0;
	for (;;) {
#if defined(__SSE2__)
		const __m128i quote = _mm_set1_epi8('"'), bsl = _mm_set1_epi8('\\');
#define HITS(x) _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bsl))
		unsigned m = 0;
		/* thirty-two bytes a step while they last, then sixteen */
		while (n - i >= 32) {
			__m128i a = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
			__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + i + 16));
			if (_mm_movemask_epi8(_mm_or_si128(HITS(a), HITS(b))))
				break;
			i += 32;
		}
		while (n - i >= 16) {
			__m128i x = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
			if ((m = (unsigned)_mm_movemask_epi8(HITS(x))))
				break;
			i += 16;
		}
#undef HITS
		if (m)
			i += (size_t)__builtin_ctz(m);
		else
#endif
			while (i < n && p[i] != '"' && p[i] != '\\')
				i++;
		if (i < n && p[i] == '"')
			return i;
		i += 2;                 /* a backslash and the byte it escapes */
		if (i >= n)
			return n;
	}
}

/*
 * d as the decimal m / 10^k with the fewest digits after the point (k <=
 * 8, m below 10^15), when one reads back as d exactly: what the %.15g
 * below writes for it, without printf's or strtod's cost.  Exact: m and
 * 10^k are doubles exactly, so m / 10^k is the double nearest the decimal,
 * as strtod would read it; and a decimal of at most 15 digits that is
 * within a rounding of d is d rounded to 15 digits.  Only where %g writes
 * no exponent (1e-4 <= |d| < 1e15) and not for 0 (-0 has its sign).
 */
static int short_real(double d, char *tmp, int *len)
{
	static const double p10[] = { 1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8 };
	double a = d < 0 ? -d : d;
	if (!(a >= 1e-4 && a < 1e15))
		return 0;
	for (int k = 0; k <= 8; k++) {
		double x = a * p10[k];
		unsigned long long m;
		size_t n;
		if (x >= 1e15)
			return 0;
		m = (unsigned long long)(x + 0.5);
		if ((double)m / p10[k] != a)
			continue;
		if (k && m % 10 == 0)
			return 0;   /* cannot be: a shorter k matched first */
		/* the digits of m, with the point k places from the right */
		n = jw_digits(m);
		char *q = tmp;
		if (d < 0)
			*q++ = '-';
		if (n <= (size_t)k) {
			*q++ = '0';
			*q++ = '.';
			for (size_t z = n; z < (size_t)k; z++)
				*q++ = '0';
			jw_put_digits(m, q + n);
			q += n;
		} else {
			jw_put_digits(m / (unsigned long long)p10[k], q + (n - (size_t)k));
			q += n - (size_t)k;
			*q++ = '.';
			if (k) {
				unsigned long long f = m % (unsigned long long)p10[k];
				for (int z = k - 1; z >= 0; z--, f /= 10)
					q[z] = (char)('0' + f % 10);
				q += k;
			} else
				*q++ = '0';
		}
		*len = (int)(q - tmp);
		return 1;
	}
	return 0;
}

enum core_status jv_dump_real(double d, struct core_buf *out)
{
	char tmp[40];
	int len = 0;
	if (short_real(d, tmp, &len))
		return core_buf_add(out, tmp, (size_t)len);
	/* Shortest of 15..17 significant digits that reads back exactly. */
	for (int prec = 15; prec <= 17; prec++) {
		len = snprintf(tmp, sizeof tmp, "%.*g", prec, d);
		if (prec == 17 || strtod(tmp, NULL) == d)
			break;
	}
	if (!strpbrk(tmp, ".eEn")) {
		tmp[len++] = '.';
		tmp[len++] = '0';
		tmp[len] = 0;
	}
	return core_buf_add(out, tmp, (size_t)len);
}

enum core_status jv_dump_int(int64_t i, struct core_buf *out)
{
	return jw_int(i, out);
}

static enum core_status dump(const json_t *v, struct core_buf *out, int depth)
{
	enum core_status st;
	if (depth > JV_MAX_DEPTH * 4)
		return CORE_EINVAL;
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		const char *k;
		json_t *c;
		int first = 1;
		if ((st = core_buf_addc(out, '{')))
			return st;
		/* Iterate the non-const API: jansson has no const iterator. */
		json_object_foreach((json_t *)v, k, c) {
			if (!first && (st = core_buf_addc(out, ',')))
				return st;
			first = 0;
			if ((st = jv_dump_string(k, json_object_iter_key_len(
			                 json_object_key_to_iter(k)), out))
			    || (st = core_buf_addc(out, ':'))
			    || (st = dump(c, out, depth + 1)))
				return st;
		}
		return core_buf_addc(out, '}');
	}
	case JSON_ARRAY: {
		size_t n = json_array_size(v);
		if ((st = core_buf_addc(out, '[')))
			return st;
		for (size_t i = 0; i < n; i++) {
			if (i && (st = core_buf_addc(out, ',')))
				return st;
			if ((st = dump(json_array_get(v, i), out, depth + 1)))
				return st;
		}
		return core_buf_addc(out, ']');
	}
	case JSON_STRING:
		if (jv_is_bignum(v))
			return core_buf_add(out, json_string_value(v) + 1,
			                    json_string_length(v) - 1);
		return jv_dump_string(json_string_value(v), json_string_length(v), out);
	case JSON_INTEGER:
		return jv_dump_int(json_integer_value(v), out);
	case JSON_REAL:
		return jv_dump_real(json_real_value(v), out);
	case JSON_TRUE:
		return core_buf_add(out, "true", 4);
	case JSON_FALSE:
		return core_buf_add(out, "false", 5);
	default:
		return core_buf_add(out, "null", 4);
	}
}

enum core_status jv_dump(const json_t *v, struct core_buf *out)
{
	return dump(v, out, 0);
}

/* ---- equality ---- */

/*
 * A number's text read as an exact decimal: value = 0.D x 10^(X + s),
 * where D are the significant digits (m[f..l] without the '.'), X the
 * exponent as written and s the place of the first significant digit.
 */
struct dec {
	int neg, zero;
	const char *m;          /* mantissa: digits with at most one '.' */
	size_t f, l;            /* first and last significant digit in m */
	int64_t s;
	const char *x;          /* exponent digits, leading zeros skipped */
	size_t xn;
	int xneg;
};

static void dec_read(const char *p, size_t n, struct dec *d)
{
	size_t i = 0, end, ip = 0, k = 0;
	memset(d, 0, sizeof *d);
	if (i < n && (p[i] == '-' || p[i] == '+'))
		d->neg = p[i++] == '-';
	d->m = p + i;
	for (end = i; end < n && p[end] != 'e' && p[end] != 'E'; end++)
		;
	n -= (size_t)(d->m - p);
	end -= (size_t)(d->m - p);
	d->zero = 1;
	for (i = 0; i < end; i++) {
		if (d->m[i] == '.') {
			ip = k;
			continue;
		}
		k++;
		if (d->m[i] != '0') {
			if (d->zero)
				d->f = i, d->s = (int64_t)k - 1;
			d->zero = 0;
			d->l = i;
		}
	}
	if (!memchr(d->m, '.', end))
		ip = k;
	d->s = (int64_t)ip - d->s;
	if (end < n) {
		i = end + 1;
		if (i < n && (d->m[i] == '-' || d->m[i] == '+'))
			d->xneg = d->m[i++] == '-';
		while (i < n && d->m[i] == '0')
			i++;
		d->x = d->m + i;
		d->xn = n - i;
	}
}

/* |a| - |b| for digit strings with |a| >= |b|, as an int64 when it is
 * below 10^18, else -1. */
static int64_t mag_sub(const char *a, size_t an, const char *b, size_t bn)
{
	int64_t r = 0;
	int borrow = 0;
	size_t top = an;
	char *t = malloc(an ? an : 1);
	if (!t)
		return -1;
	for (size_t i = 0; i < an; i++) {
		int x = a[an - 1 - i] - '0' - borrow - (i < bn ? b[bn - 1 - i] - '0' : 0);
		borrow = x < 0;
		t[an - 1 - i] = (char)('0' + (x < 0 ? x + 10 : x));
	}
	for (top = 0; top < an && t[top] == '0'; top++)
		;
	if (an - top > 18)
		r = -1;
	else
		for (size_t i = top; i < an; i++)
			r = r * 10 + (t[i] - '0');
	free(t);
	return r;
}

static int mag_cmp(const char *a, size_t an, const char *b, size_t bn)
{
	if (an != bn)
		return an < bn ? -1 : 1;
	return memcmp(a, b, an);
}

/* X1 + s1 == X2 + s2, the exponents of two decimals, exactly. */
static int exp_equal(const struct dec *a, const struct dec *b)
{
	int64_t d = b->s - a->s;    /* does X1 - X2 == d? */
	if (a->xn <= 17 && b->xn <= 17) {
		int64_t x1 = 0, x2 = 0;
		for (size_t i = 0; i < a->xn; i++)
			x1 = x1 * 10 + (a->x[i] - '0');
		for (size_t i = 0; i < b->xn; i++)
			x2 = x2 * 10 + (b->x[i] - '0');
		return (a->xneg ? -x1 : x1) - (b->xneg ? -x2 : x2) == d;
	}
	/* One exponent has 18 digits or more: |X1 - X2| is small only when
	 * both have the same sign and nearly the same magnitude. */
	if (a->xneg != b->xneg && a->xn && b->xn)
		return 0;
	{
		int c = mag_cmp(a->x, a->xn, b->x, b->xn);
		int64_t m = c >= 0 ? mag_sub(a->x, a->xn, b->x, b->xn)
		                   : mag_sub(b->x, b->xn, a->x, a->xn);
		int neg = (c < 0) != (a->xn ? a->xneg : b->xneg);   /* sign of X1 - X2 */
		if (m < 0)
			return 0;
		return (neg ? -m : m) == d;
	}
}

/* Two number texts (JSON syntax) equal as exact decimals: 1e2 == 100.0,
 * -0 == 0, 12345678901234567890 != 12345678901234567891. */
static int dec_equal(const char *p, size_t pn, const char *q, size_t qn)
{
	struct dec a, b;
	size_t i, j;
	dec_read(p, pn, &a);
	dec_read(q, qn, &b);
	if (a.zero || b.zero)
		return a.zero && b.zero;
	if (a.neg != b.neg)
		return 0;
	for (i = a.f, j = b.f; i <= a.l && j <= b.l; i++, j++) {
		if (a.m[i] == '.')
			i++;
		if (b.m[j] == '.')
			j++;
		if (a.m[i] != b.m[j])
			return 0;
	}
	if (i <= a.l || j <= b.l)
		return 0;
	return exp_equal(&a, &b);
}

/*
 * The exact decimal text of an integer or of an integral real (glibc
 * prints every digit of "%.0f"); 0 for a real with a fraction, which no
 * bignum can equal (bignums are integers past 64 bits or reals past the
 * double range).
 */
static int num_text(const struct jv_num *v, char *buf, size_t size, size_t *n)
{
	int len;
	if (v->kind == JV_NUM_INT)
		len = snprintf(buf, size, "%" PRId64, v->i);
	else if (v->d == floor(v->d))
		len = snprintf(buf, size, "%.0f", v->d);
	else
		return 0;
	if (len < 0 || (size_t)len >= size)
		return 0;
	*n = (size_t)len;
	return 1;
}

int jv_num_equal(const struct jv_num *a, const struct jv_num *b)
{
	if (a->kind == JV_NUM_INT && b->kind == JV_NUM_INT)
		return a->i == b->i;
	if (a->kind == JV_NUM_TEXT || b->kind == JV_NUM_TEXT) {
		/* Digit for digit: doubles would call 2^64 and 2^64 + 1 equal. */
		char tmp[400];
		const char *p = a->s, *q = b->s;
		size_t pn = a->n, qn = b->n;
		if (a->kind != JV_NUM_TEXT) {
			if (!num_text(a, tmp, sizeof tmp, &pn))
				return 0;
			p = tmp;
		}
		if (b->kind != JV_NUM_TEXT) {
			if (!num_text(b, tmp, sizeof tmp, &qn))
				return 0;
			q = tmp;
		}
		return dec_equal(p, pn, q, qn);
	}
	if (a->kind == JV_NUM_INT || b->kind == JV_NUM_INT) {
		/* Exact for integral reals in range (2^53 + 1 != 2^53). */
		int64_t i = a->kind == JV_NUM_INT ? a->i : b->i;
		double d = a->kind == JV_NUM_INT ? b->d : a->d;
		if (d >= -9223372036854775808.0 && d < 9223372036854775808.0
		    && d == floor(d))
			return (int64_t)d == i;
		return 0;
	}
	return a->d == b->d;
}

static void num_of(const json_t *v, struct jv_num *n)
{
	memset(n, 0, sizeof *n);
	if (json_is_integer(v))
		n->kind = JV_NUM_INT, n->i = json_integer_value(v);
	else if (json_is_real(v))
		n->kind = JV_NUM_REAL, n->d = json_real_value(v);
	else
		n->kind = JV_NUM_TEXT, n->s = json_string_value(v) + 1,
		n->n = json_string_length(v) - 1;
}

static int num_equal(const json_t *a, const json_t *b)
{
	struct jv_num x, y;
	num_of(a, &x);
	num_of(b, &y);
	return jv_num_equal(&x, &y);
}

/*
 * Deep equality, two ways: loose (jv_equal: numbers by value, objects as
 * key sets) or exact (jv_same: what jv_dump would write, so types, key
 * order and the bits of reals count).
 */
static int equal(const json_t *a, const json_t *b, int exact)
{
	if (a == b)
		return 1;
	if (!a || !b)
		return 0;
	if (!exact && (jv_is_number(a) || jv_is_number(b)))
		return jv_is_number(a) && jv_is_number(b) && num_equal(a, b);
	if (json_typeof(a) != json_typeof(b))
		return 0;
	switch (json_typeof(a)) {
	case JSON_OBJECT: {
		const char *k;
		json_t *c;
		void *i, *j;
		if (json_object_size(a) != json_object_size(b))
			return 0;
		if (!exact) {
			json_object_foreach((json_t *)a, k, c) {
				json_t *d = json_object_getn(b, k, json_object_iter_key_len(
				                                 json_object_key_to_iter(k)));
				if (!d || !equal(c, d, 0))
					return 0;
			}
			return 1;
		}
		for (i = json_object_iter((json_t *)a), j = json_object_iter((json_t *)b);
		     i && j; i = json_object_iter_next((json_t *)a, i),
		             j = json_object_iter_next((json_t *)b, j)) {
			size_t n = json_object_iter_key_len(i);
			if (n != json_object_iter_key_len(j) ||
			    memcmp(json_object_iter_key(i), json_object_iter_key(j), n) ||
			    !equal(json_object_iter_value(i), json_object_iter_value(j), 1))
				return 0;
		}
		return !i && !j;
	}
	case JSON_ARRAY: {
		size_t n = json_array_size(a);
		if (n != json_array_size(b))
			return 0;
		for (size_t i = 0; i < n; i++)
			if (!equal(json_array_get(a, i), json_array_get(b, i), exact))
				return 0;
		return 1;
	}
	case JSON_STRING:   /* bignums too, when exact: their text is the string */
		return json_string_length(a) == json_string_length(b)
		       && !memcmp(json_string_value(a), json_string_value(b),
		                  json_string_length(a));
	case JSON_INTEGER:
		return json_integer_value(a) == json_integer_value(b);
	case JSON_REAL: {
		double x = json_real_value(a), y = json_real_value(b);
		return !memcmp(&x, &y, sizeof x);
	}
	default:
		return 1;   /* true, false, null */
	}
}

int jv_equal(const json_t *a, const json_t *b)
{
	return equal(a, b, 0);
}

int jv_same(const json_t *a, const json_t *b)
{
	return equal(a, b, 1);
}

json_t *jv_object_insert_at(const json_t *src, size_t pos, const char *key, json_t *val)
{
	json_t *out = json_object();
	const char *k;
	json_t *x;
	size_t i = 0;
	if (!out) {
		json_decref(val);
		return NULL;
	}
	json_object_foreach((json_t *)src, k, x) {
		if (i++ == pos)
			json_object_set_new(out, key, val), val = NULL;
		json_object_set(out, k, x);
	}
	if (val)
		json_object_set_new(out, key, val);
	return out;
}

json_t *jv_host_pid(void)
{
	char host[256] = "";
	if (gethostname(host, sizeof host - 1))
		host[0] = 0;
	return json_pack("{s:s, s:I}", "host", host, "pid", (json_int_t)getpid());
}
