/*
 * buf.h - the growable, always-bounded byte buffer.
 *
 * Every heap byte agentkit owns for text lives in a struct core_buf.  Each
 * buffer has a maximum: growing past it fails with CORE_ETOOBIG instead of
 * exhausting memory or truncating silently.  The contents are always
 * NUL-terminated (p[len] == 0) once anything was added.
 *
 * Lifecycle (git's vocabulary): CORE_BUF_INIT(max) or core_buf_init();
 * core_buf_reset() empties it keeping the memory; core_buf_release() frees
 * it and leaves it empty and reusable; core_buf_detach() hands the bytes to
 * the caller (free()).  Releasing a zeroed buffer is a no-op.
 */
#ifndef CORE_BUF_H
#define CORE_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include "status.h"

struct core_buf {
	char *p;
	size_t len, cap, max;
};

#define CORE_BUF_UNLIMITED ((size_t)-1 / 2)
#define CORE_BUF_INIT(m) { NULL, 0, 0, (m) }

void core_buf_init(struct core_buf *b, size_t max);
void core_buf_reset(struct core_buf *b);
void core_buf_release(struct core_buf *b);
/* The bytes (NUL-terminated, never NULL); the buffer is left empty. */
char *core_buf_detach(struct core_buf *b, size_t *len);

/* Make room for n more bytes.  CORE_ETOOBIG past max, CORE_ENOMEM. */
enum core_status core_buf_grow(struct core_buf *b, size_t n);
/* The out-of-line paths of core_buf_add() and core_buf_addc(): grow, then
 * append. */
enum core_status core_buf_add_grow(struct core_buf *b, const void *p, size_t n);

/* Append n bytes (a byte).  Inline: the JSON writers append a token at a
 * time, and a call per token was most of writing a document. */
static inline enum core_status core_buf_add(struct core_buf *b, const void *p,
                                            size_t n)
{
	if (n < b->cap - b->len && b->len + n <= b->max) {
		memcpy(b->p + b->len, p, n);
		b->len += n;
		b->p[b->len] = 0;
		return CORE_OK;
	}
	return core_buf_add_grow(b, p, n);
}

static inline enum core_status core_buf_addc(struct core_buf *b, char c)
{
	if (b->len + 1 < b->cap && b->len < b->max) {
		b->p[b->len++] = c;
		b->p[b->len] = 0;
		return CORE_OK;
	}
	return core_buf_add_grow(b, &c, 1);
}

enum core_status core_buf_adds(struct core_buf *b, const char *s);
enum core_status core_buf_addf(struct core_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
enum core_status core_buf_vaddf(struct core_buf *b, const char *fmt, va_list ap);

/* Append s[0..n) made valid UTF-8 (utf8.h: U+FFFD for each bad byte and
 * NUL).  CORE_ETOOBIG past max, CORE_ENOMEM. */
enum core_status core_buf_add_text(struct core_buf *b, const char *s, size_t n);

/* Make the contents valid UTF-8 in place (b may grow by 2 bytes per bad
 * byte).  CORE_ETOOBIG past max, CORE_ENOMEM; b is unchanged then. */
enum core_status core_buf_fix_text(struct core_buf *b);

/*
 * Read a whole file ("-" is stdin) into b, appending.  Fails with
 * CORE_ETOOBIG past b->max, CORE_ENOTFOUND when there is no such file
 * (e->sys ENOENT), CORE_ESYS (message names the file).
 */
enum core_status core_buf_read_file(struct core_buf *b, const char *path,
                                    struct core_err *e);

#endif
