/* utf8.c - validating UTF-8 and replacing what is not (utf8.h). */
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

#define REPLACEMENT "\xef\xbf\xbd"      /* U+FFFD */

size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len, i;
	uint32_t c = s[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, c &= 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, c &= 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, c &= 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff)))
	    || (len == 4 && (c < 0x10000 || c > 0x10ffff)))
		return 0;
	*cp = c;
	return len;
}

/* ASCII, which nearly all text is, is stepped over without decoding. */
size_t utf8_valid(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	uint32_t cp;
	size_t i = 0, k;
	while (i < n) {
		if (u[i] && u[i] < 0x80) {
			i++;
			continue;
		}
		if (!u[i] || !(k = utf8_decode(u + i, n - i, &cp)))
			break;
		i += k;
	}
	return i;
}

size_t utf8_fixed_len(const char *s, size_t n)
{
	size_t len = 0, k;
	while ((k = utf8_valid(s, n)) < n) {
		len += k + 3;           /* the valid run, then U+FFFD */
		s += k + 1;
		n -= k + 1;
	}
	return len + n;
}

void utf8_fix_copy(char *out, const char *s, size_t n)
{
	size_t k;
	while ((k = utf8_valid(s, n)) < n) {
		memmove(out, s, k);
		memcpy(out + k, REPLACEMENT, 3);
		out += k + 3;
		s += k + 1;
		n -= k + 1;
	}
	memmove(out, s, n);
	out[n] = 0;
}

char *utf8_dup(const char *s, size_t n)
{
	char *d = malloc(utf8_fixed_len(s, n) + 1);
	if (d)
		utf8_fix_copy(d, s, n);
	return d;
}

void utf8_fix_cstr(char *s, size_t cap)
{
	size_t n = strlen(s), cut;
	char *d;
	if (utf8_valid(s, n) == n)
		return;
	if (!(d = utf8_dup(s, n))) {
		s[utf8_valid(s, n)] = 0;        /* no memory: cut at the bad byte */
		return;
	}
	/* d[cut] is the first byte that does not fit; a continuation byte
	 * there means its character began before: cut at its first byte. */
	cut = strlen(d);
	if (cut >= cap)
		for (cut = cap - 1; cut && ((unsigned char)d[cut] & 0xc0) == 0x80; cut--)
			;
	memcpy(s, d, cut);
	s[cut] = 0;
	free(d);
}
