/*
 * json_dump_test.c - jv_dump_string(), the one string escaper of every JSON
 * writer agentkit has (jv_dump, jn_dump, the jpatch tools, traces,
 * templates): byte for byte what jansson writes, for strings of every
 * length up to 80 with the bytes that need an escape at every place, on
 * buffers that already hold text and on ones whose room runs out (the
 * sanitizer build checks the writes stay inside the buffer).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../libcore/base/buf.h"
#include "../../libcore/base/json.h"
#include "tap.h"

/* Bytes to build strings of: plain ASCII, every kind of escape, and the
 * two bytes of U+00E9 (kept together so the string stays UTF-8). */
static const char *const atoms[] = {
	"a", "Z", " ", "~", "\"", "\\", "\n", "\t", "\r", "\b", "\f",
	"\x01", "\x1f", "\x7f", "/", "\xc3\xa9",
};
#define NATOMS (sizeof atoms / sizeof *atoms)

/* What jansson writes for s[0..n), or NULL; with the hex digits of its
 * \u escapes in lower case, as agentkit (and Genkit's Go) writes them (no
 * atom holds A-F, so only the escapes change). */
static char *jansson_dump(const char *s, size_t n)
{
	json_t *v = json_stringn(s, n);
	char *out = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
	json_decref(v);
	for (char *p = out; p && (p = strstr(p, "\\u")); p += 2)
		for (int i = 2; i < 6; i++)
			if (p[i] >= 'A' && p[i] <= 'F')
				p[i] = (char)(p[i] - 'A' + 'a');
	return out;
}

/* Build a string of about len bytes from atoms picked by seed. */
static size_t build(char *s, size_t len, unsigned *seed)
{
	size_t n = 0;
	while (n < len) {
		*seed = *seed * 1103515245u + 12345u;
		const char *a = (*seed >> 16) % 3 ? atoms[(*seed >> 8) % 4]
		                                  : atoms[(*seed >> 8) % NATOMS];
		size_t k = strlen(a);
		if (n + k > len)
			break;
		memcpy(s + n, a, k);
		n += k;
	}
	return n;
}

static int same_as_jansson(const char *s, size_t n, const char *prefix)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	char *want = jansson_dump(s, n);
	size_t pn = strlen(prefix);
	int ok = want && !core_buf_adds(&b, prefix) && !jv_dump_string(s, n, &b)
	         && b.len == pn + strlen(want) && !memcmp(b.p, prefix, pn)
	         && !strcmp(b.p + pn, want) && b.p[b.len] == 0;
	free(want);
	core_buf_release(&b);
	return ok;
}

int main(void)
{
	char s[128], name[64];
	unsigned seed = 18;
	int bad = 0, tried = 0;

	/* Every length, many mixes, behind prefixes of 0 to 9 bytes (so the
	 * runs fall on every alignment of the buffer). */
	for (size_t len = 0; len <= 80; len++)
		for (int r = 0; r < 40; r++) {
			size_t n = build(s, len, &seed);
			tried++;
			if (!same_as_jansson(s, n, &"xxxxxxxxx"[r % 10])) {
				bad++;
				if (bad < 5)
					fprintf(stderr, "# differs: length %zu, round %d\n", n, r);
			}
		}
	snprintf(name, sizeof name, "%d strings as jansson writes them", tried);
	report(!bad, name, NULL);

	/* One escape at every place of a plain string of every length to
	 * 40: the short strings' overlapping words, the long ones' blocks and
	 * their last, overlapping one. */
	bad = 0;
	for (size_t len = 1; len <= 40; len++)
		for (size_t at = 0; at < len; at++)
			for (size_t k = 0; k < NATOMS; k++) {
				memset(s, 'q', len);
				s[at] = atoms[k][0];
				if (atoms[k][1])
					continue;       /* one byte atoms only */
				bad += !same_as_jansson(s, len, &"xxxxxxx"[at % 8]);
			}
	report(!bad, "an escape at every place of a word-scanned string", NULL);

	{
		/* All escapes: six bytes each, many times the room made first. */
		struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		memset(s, '\x01', 100);
		int ok = !jv_dump_string(s, 100, &b) && b.len == 602
		         && !strncmp(b.p, "\"\\u0001\\u0001", 13) && b.p[601] == '"';
		core_buf_release(&b);
		report(ok, "100 control bytes are 600 bytes of escapes", NULL);
	}

	{
		/* Room that runs out in the middle: CORE_ETOOBIG, within max. */
		int ok = 1;
		for (size_t max = 0; max < 30; max++) {
			struct core_buf b = CORE_BUF_INIT(max);
			enum core_status st = jv_dump_string("ab\"cd\\ef\nghijklmnop", 19, &b);
			/* "ab\"cd\\ef\nghijklmnop" quoted is 24 bytes */
			ok &= max >= 24 ? st == CORE_OK && b.len == 24
			                : st == CORE_ETOOBIG && b.len <= max;
			core_buf_release(&b);
		}
		report(ok, "a bounded buffer stops at its max", NULL);
	}

	{
		/* core_buf_add / core_buf_addc respect max on their fast path. */
		struct core_buf b = CORE_BUF_INIT(100);
		int ok = !core_buf_add(&b, "0123456789", 10);
		b.max = 12;
		ok &= !core_buf_addc(&b, 'a') && !core_buf_add(&b, "b", 1)
		      && core_buf_addc(&b, 'c') == CORE_ETOOBIG
		      && core_buf_add(&b, "c", 1) == CORE_ETOOBIG
		      && b.len == 12 && !strcmp(b.p, "0123456789ab");
		core_buf_release(&b);
		report(ok, "a buffer's max holds with room left in it", NULL);
	}
	{
		/* Integers: the one-digit path, the digit loop, the extremes;
		 * and a bounded buffer that runs out of room mid-number. */
		static const struct { int64_t i; const char *s; } ints[] = {
			{ 0, "0" }, { 9, "9" }, { 10, "10" }, { -1, "-1" }, { -10, "-10" },
			{ INT64_MAX, "9223372036854775807" },
			{ INT64_MIN, "-9223372036854775808" },
		};
		int ok = 1;
		for (size_t k = 0; k < sizeof ints / sizeof *ints; k++) {
			struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
			ok &= !core_buf_adds(&b, "[") && !jv_dump_int(ints[k].i, &b)
			      && !strcmp(b.p + 1, ints[k].s);
			core_buf_release(&b);
			for (size_t max = 0; max < 24; max++) {
				struct core_buf c = CORE_BUF_INIT(max);
				enum core_status st = jv_dump_int(ints[k].i, &c);
				ok &= strlen(ints[k].s) <= max ? !st && !strcmp(c.p, ints[k].s)
				                               : st == CORE_ETOOBIG && c.len == 0;
				core_buf_release(&c);
			}
		}
		report(ok, "integers as decimal digits, within a buffer's max", NULL);
	}
	{
		/* Every number of digits, both sides of each power of ten, as
		 * printf writes them (two digits are written at a time). */
		int ok = 1;
		unsigned long long p = 1;
		for (int k = 0; k <= 18; k++, p *= 10)
			for (int d = -1; d <= 1; d++)
				for (int sign = 1; sign >= -1; sign -= 2) {
					int64_t i = (int64_t)p + d;
					char want[32];
					struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
					i *= sign;
					snprintf(want, sizeof want, "%" PRId64, i);
					ok &= !jv_dump_int(i, &b) && b.len == strlen(want)
					      && !strcmp(b.p, want);
					core_buf_release(&b);
				}
		report(ok, "integers of every length as printf writes them", NULL);
	}
	{
		/* Reals: what "%.15g" .. "%.17g" (the shortest that reads
		 * back) writes, for short decimals of every size and sign,
		 * the edges of the range written without printf, and random
		 * doubles of every exponent. */
		int ok = 1, seen = 0;
		unsigned long long x = 88172645463325252ULL;
		for (int r = 0; r < 200000; r++) {
			double d;
			char want[40];
			int len = 0;
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			if (r % 4 == 0)
				memcpy(&d, &x, sizeof d);
			else if (r % 4 == 1)
				d = (double)(long long)(x % 2000000001) / 1000.0 - 1e6;
			else if (r % 4 == 2)
				d = (double)(x % 1000000000000000ULL)
				    / (double)(1ULL << (x >> 60)) / 1e4;
			else {
				static const double edge[] = { 1e-4, 9.9999e-5, 1e15, 999999999999999.0,
				                               999999999999999.9, 0.1, 1.0, 100.0, 5e-324,
				                               1.7976931348623157e308, 0.30000000000000004 };
				d = edge[(x >> 8) % (sizeof edge / sizeof *edge)] * (x & 1 ? -1 : 1);
			}
			if (d != d || d - d != 0)
				continue;       /* NaN, inf: JSON has none */
			for (int prec = 15; prec <= 17; prec++) {
				len = snprintf(want, sizeof want, "%.*g", prec, d);
				if (prec == 17 || strtod(want, NULL) == d)
					break;
			}
			if (!strpbrk(want, ".eEn"))
				memcpy(want + len, ".0", 3);
			struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
			if (jv_dump_real(d, &b) || strcmp(b.p, want)) {
				if (ok)
					fprintf(stderr, "# %.17g: %s, not %s\n", d, b.p, want);
				ok = 0;
			}
			seen++;
			core_buf_release(&b);
		}
		snprintf(name, sizeof name, "%d reals as the shortest of %%.15g..%%.17g", seen);
		report(ok, name, NULL);
	}
	return tap_end();
}
