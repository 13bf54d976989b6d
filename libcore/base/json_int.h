/*
 * json_int.h - internal to the JSON writers (json.c, jfast.c): the
 * word-at-a-time test of which bytes of a string need an escape, inline so
 * that a writer can put a short key or string straight into its buffer.
 */
#ifndef CORE_JSON_INT_H
#define CORE_JSON_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"

/*
 * The bytes of word x that need an escape - below 0x20, '"' or '\\' - as
 * the high bit of each (SWAR: a byte equal to k is a zero in x ^ k, and a
 * subtraction borrows out of a byte below its subtrahend).  A borrow can
 * mark a byte above a true one, never below it, so the lowest mark is
 * exact and the mask is 0 exactly when no byte needs one; bytes of 0x80
 * and up never mark.
 */
static inline uint64_t jw_esc_mask(uint64_t x)
{
	const uint64_t ones = 0x0101010101010101u;
	return ((x - ones * 0x20) | ((x ^ ones * '"') - ones)
	        | ((x ^ ones * '\\') - ones)) & ~x & (ones * 0x80);
}

/* The longest string jw_copy_short() takes. */
#define JW_SHORT 32

static inline uint64_t jw_load8(const char *p)
{
	uint64_t x;
	memcpy(&x, p, 8);
	return x;
}

static inline uint32_t jw_load4(const char *p)
{
	uint32_t x;
	memcpy(&x, p, 4);
	return x;
}

/*
 * Copy s[0..n) (n <= JW_SHORT) to q when no byte of it needs an escape:
 * 1, else 0 with nothing copied.  No loop: loads that overlap in the
 * middle cover any length (17..32 bytes as four words, 8..16 as two, 4..7
 * as two halves, 1..3 as the first, middle and last byte), stored only
 * after all are checked.  Most strings of a document (keys, words, ids) end here.
 */
static inline __attribute__((always_inline)) int
jw_copy_short(const char *s, size_t n, char *q)
{
	if (n > 16) {
		/* 17..32 bytes: the first sixteen and the last sixteen */
		uint64_t a = jw_load8(s), b = jw_load8(s + 8),
		         c = jw_load8(s + n - 16), d = jw_load8(s + n - 8);
		if (jw_esc_mask(a) | jw_esc_mask(b) | jw_esc_mask(c) | jw_esc_mask(d))
			return 0;
		memcpy(q, &a, 8);
		memcpy(q + 8, &b, 8);
		memcpy(q + n - 16, &c, 8);
		memcpy(q + n - 8, &d, 8);
	} else if (n >= 8) {
		uint64_t a = jw_load8(s), b = jw_load8(s + n - 8);
		if (jw_esc_mask(a) | jw_esc_mask(b))
			return 0;
		memcpy(q, &a, 8);
		memcpy(q + n - 8, &b, 8);
	} else if (n >= 4) {
		uint32_t a = jw_load4(s), b = jw_load4(s + n - 4);
		if (jw_esc_mask((uint64_t)a | (uint64_t)b << 32))
			return 0;
		memcpy(q, &a, 4);
		memcpy(q + n - 4, &b, 4);
	} else if (n) {
		/* the five unused bytes are 'a', which needs no escape */
		uint64_t x = (uint64_t)(unsigned char)s[0]
		             | (uint64_t)(unsigned char)s[n >> 1] << 8
		             | (uint64_t)(unsigned char)s[n - 1] << 16
		             | 0x6161616161000000u;
		if (jw_esc_mask(x))
			return 0;
		q[0] = s[0];
		q[n >> 1] = s[n >> 1];
		q[n - 1] = s[n - 1];
	}
	return 1;
}

/*
 * s[0..n) as a JSON string straight into out, when it is short (JW_SHORT),
 * needs no escape and out has room: 1.  Otherwise 0, with nothing
 * written: jv_dump_string() then does it.
 */
static inline int jw_string_short(const char *s, size_t n, struct core_buf *out)
{
	char *q;
	if (n > JW_SHORT || out->cap - out->len < n + 3 || out->len + n + 2 > out->max)
		return 0;
	q = out->p + out->len;
	if (!jw_copy_short(s, n, q + 1))
		return 0;
	q[0] = '"';
	q[n + 1] = '"';
	q[n + 2] = 0;
	out->len += n + 2;
	return 1;
}

/* "00" .. "99": an integer is written two digits a division. */
static const char jw_digit_pairs[201] =
	"00010203040506070809101112131415161718192021222324"
	"25262728293031323334353637383940414243444546474849"
	"50515253545556575859606162636465666768697071727374"
	"75767778798081828384858687888990919293949596979899";

/* Decimal digits of u (1 to 20). */
static inline size_t jw_digits(unsigned long long u)
{
	size_t n = 1;
	while (u >= 10000)
		u /= 10000, n += 4;
	return n + (u >= 10) + (u >= 100) + (u >= 1000);
}

/* u as n digits ending at end (written backwards, two at a time). */
static inline void jw_put_digits(unsigned long long u, char *end)
{
	while (u >= 100) {
		unsigned d = (unsigned)(u % 100) * 2;
		u /= 100;
		end -= 2;
		end[0] = jw_digit_pairs[d];
		end[1] = jw_digit_pairs[d + 1];
	}
	if (u >= 10) {
		end[-2] = jw_digit_pairs[u * 2];
		end[-1] = jw_digit_pairs[u * 2 + 1];
	} else
		end[-1] = (char)('0' + u);
}

/* jv_dump_int(), inline. */
static inline enum core_status jw_int(int64_t i, struct core_buf *out)
{
	unsigned long long u = i < 0 ? 0ULL - (unsigned long long)i
	                             : (unsigned long long)i;
	size_t n = jw_digits(u) + (i < 0);
	enum core_status st;
	/* room for the digits and the NUL; the call only when short of it */
	if ((out->cap - out->len <= n || out->len + n > out->max)
	    && (st = core_buf_grow(out, n)))
		return st;
	if (i < 0)
		out->p[out->len] = '-';
	out->len += n;
	jw_put_digits(u, out->p + out->len);
	out->p[out->len] = 0;
	return CORE_OK;
}

#endif
