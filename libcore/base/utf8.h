/*
 * utf8.h - text from outside made valid UTF-8 where it enters.
 *
 * Bytes agentkit did not write - a child's stderr, an HTTP body, an MCP
 * server's line, a file name, an argument - may hold anything.  JSON
 * strings must be valid UTF-8 (jansson refuses the rest), so text that is
 * kept, stored or printed is made valid first: each byte that does not
 * start a valid sequence, and each NUL, becomes U+FFFD (EF BF BD), the
 * rest is kept as it is.  Valid means what jansson accepts: no overlong
 * forms, no surrogates, nothing past U+10FFFF.
 *
 * core_fail() and core_err_prefix() run every failure message through
 * utf8_fix_cstr(), so no message is ever lost to a byte (DESIGN §9);
 * core_buf_add_text() and core_buf_fix_text() (buf.h) do it for a buffer.
 */
#ifndef CORE_UTF8_H
#define CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>


/*
 * The UTF-8 sequence at s[0..n) (n > 0).  Its length (1 for ASCII) with
 * the code point in *cp, or 0 when invalid or cut short.
 */
size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* How many bytes of s[0..n) are valid UTF-8 without NUL before the first
 * that is not (n: all of them). */
size_t utf8_valid(const char *s, size_t n);

/* The length of s[0..n) made valid (each bad byte 3 bytes), without a NUL. */
size_t utf8_fixed_len(const char *s, size_t n);

/* s[0..n) made valid into out, which holds utf8_fixed_len(s, n) + 1 bytes;
 * NUL-terminated. */
void utf8_fix_copy(char *out, const char *s, size_t n);

/* A malloc'd valid copy of s[0..n), NUL-terminated; NULL without memory. */
char *utf8_dup(const char *s, size_t n);

/*
 * Make the NUL-terminated text in s (an array of cap bytes) valid, in
 * place.  What no longer fits is cut at a character boundary, so the
 * text stays valid: a message buffer keeps the start of its message.
 */
void utf8_fix_cstr(char *s, size_t cap);

#endif
