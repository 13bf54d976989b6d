/* buf.c - bounded growable buffers. */
#include "buf.h"
#include "utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void core_buf_init(struct core_buf *b, size_t max)
{
	b->p = NULL;
	b->len = b->cap = 0;
	b->max = max;
}

void core_buf_reset(struct core_buf *b)
{
	b->len = 0;
	if (b->p)
		b->p[0] = 0;
}

void core_buf_release(struct core_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

char *core_buf_detach(struct core_buf *b, size_t *len)
{
	char *p = b->p ? b->p : calloc(1, 1);
	if (len)
		*len = b->len;
	b->p = NULL;
	b->len = b->cap = 0;
	return p;
}

enum core_status core_buf_grow(struct core_buf *b, size_t n)
{
	size_t need, cap;
	char *p;
	if (n > b->max || b->len > b->max - n)
		return CORE_ETOOBIG;
	need = b->len + n + 1;
	if (need <= b->cap)
		return CORE_OK;
	/* Double, as cheap amortised growth; the NUL byte sits past max. */
	cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap = cap > (size_t)-1 / 2 ? need : cap * 2;
	if (cap > b->max + 1)
		cap = b->max + 1 > need ? b->max + 1 : need;
	p = realloc(b->p, cap);
	if (!p)
		return CORE_ENOMEM;
	b->p = p;
	b->cap = cap;
	return CORE_OK;
}

enum core_status core_buf_add_grow(struct core_buf *b, const void *p, size_t n)
{
	enum core_status st = core_buf_grow(b, n);
	if (st)
		return st;
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = 0;
	return CORE_OK;
}

enum core_status core_buf_adds(struct core_buf *b, const char *s)
{
	return core_buf_add(b, s, strlen(s));
}

enum core_status core_buf_vaddf(struct core_buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n;
	enum core_status st;
	va_copy(cp, ap);
	n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0)
		return CORE_EINVAL;
	st = core_buf_grow(b, (size_t)n);
	if (st)
		return st;
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return CORE_OK;
}

enum core_status core_buf_addf(struct core_buf *b, const char *fmt, ...)
{
	va_list ap;
	enum core_status st;
	va_start(ap, fmt);
	st = core_buf_vaddf(b, fmt, ap);
	va_end(ap);
	return st;
}

enum core_status core_buf_read_file(struct core_buf *b, const char *path,
                                    struct core_err *e)
{
	int stdin_ = !strcmp(path, "-");
	int fd = stdin_ ? 0 : open(path, O_RDONLY | O_CLOEXEC);
	enum core_status st = CORE_OK;
	struct stat sb;
	if (fd < 0 && errno == ENOENT) {
		/* A file the caller named that is not there: not found (exit 4,
		 * DESIGN §8), errno kept for callers that tell it apart. */
		core_fail_sys(e, "cannot open '%s'", path);
		if (e)
			e->st = CORE_ENOTFOUND;
		return CORE_ENOTFOUND;
	}
	if (fd < 0)
		return core_fail_sys(e, "cannot open '%s'", path);
	/* a regular file in one read: room for all of it and the read that
	 * sees its end (the loop still copes if it grows or shrinks) */
	if (!fstat(fd, &sb) && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
	    (uint64_t)sb.st_size < b->max)
		core_buf_grow(b, (size_t)sb.st_size + 65536 < b->max
		                 ? (size_t)sb.st_size + 65536 : b->max);
	for (;;) {
		ssize_t n;
		st = core_buf_grow(b, 65536);
		if (st == CORE_ETOOBIG && b->len < b->max)
			st = core_buf_grow(b, b->max - b->len);
		if (st == CORE_ETOOBIG) {
			/* Full to max: fine only if the file ends here. */
			char c;
			while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
				;
			if (n == 0) {
				st = CORE_OK;
				break;
			}
		}
		if (st) {
			if (st == CORE_ETOOBIG)
				core_fail(e, st, "'%s' is larger than %zu bytes",
				          stdin_ ? "<stdin>" : path, b->max);
			else
				core_fail(e, st, "reading '%s': out of memory", path);
			break;
		}
		n = read(fd, b->p + b->len, b->cap - b->len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			st = core_fail_sys(e, "cannot read '%s'", stdin_ ? "<stdin>" : path);
			break;
		}
		if (n == 0)
			break;
		b->len += (size_t)n;
		b->p[b->len] = 0;
	}
	if (!stdin_)
		close(fd);
	return st;
}

enum core_status core_buf_add_text(struct core_buf *b, const char *s, size_t n)
{
	size_t len = utf8_fixed_len(s, n);
	enum core_status st = core_buf_grow(b, len);
	if (st)
		return st;
	utf8_fix_copy(b->p + b->len, s, n);
	b->len += len;
	return CORE_OK;
}

enum core_status core_buf_fix_text(struct core_buf *b)
{
	size_t len;
	char *d;
	if (!b->p || utf8_valid(b->p, b->len) == b->len)
		return CORE_OK;
	len = utf8_fixed_len(b->p, b->len);
	if (len > b->max)
		return CORE_ETOOBIG;
	if (!(d = malloc(len + 1)))
		return CORE_ENOMEM;
	utf8_fix_copy(d, b->p, b->len);
	free(b->p);
	b->p = d;
	b->len = len;
	b->cap = len + 1;
	return CORE_OK;
}
