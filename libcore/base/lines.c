/* lines.c - bounded NDJSON record reader. */
#include "lines.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

void core_lines_init(struct core_lines *r, int fd, const char *name, size_t max)
{
	memset(r, 0, sizeof *r);
	r->fd = fd;
	r->name = name;
	r->max = max;
	r->next_lineno = 1;
	/* One record plus a read block of slack. */
	core_buf_init(&r->buf, max + 65536 + 1);
}

void core_lines_release(struct core_lines *r)
{
	core_buf_release(&r->buf);
}

static int blank(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
			return 0;
	return 1;
}

enum core_status core_lines_next(struct core_lines *r, char **line, size_t *len,
                                 struct core_err *e)
{
	for (;;) {
		/* Nothing read yet: buf.p is NULL, and NULL + 0 is undefined. */
		char *base = r->buf.p ? r->buf.p + r->start : NULL;
		size_t avail = r->buf.len - r->start;
		char *nl = avail > r->scanned
		         ? memchr(base + r->scanned, '\n', avail - r->scanned) : NULL;
		if (nl || (r->eof && avail)) {
			size_t n = nl ? (size_t)(nl - base) : avail;
			r->lineno = r->next_lineno++;
			r->start += nl ? n + 1 : n;
			r->scanned = 0;
			if (n > r->max)
				return core_fail(e, CORE_ETOOBIG,
				                 "record at %s:%zu is longer than %zu bytes",
				                 r->name, r->lineno, r->max);
			if (n && base[n - 1] == '\r')
				n--;
			base[n] = 0;
			if (blank(base, n))
				continue;
			*line = base;
			*len = n;
			return CORE_OK;
		}
		if (r->eof) {
			*line = NULL;
			*len = 0;
			return CORE_OK;
		}
		r->scanned = avail;
		if (avail > r->max)
			return core_fail(e, CORE_ETOOBIG,
			                 "record at %s:%zu is longer than %zu bytes",
			                 r->name, r->next_lineno, r->max);
		/* Slide the partial record to the front before reading more. */
		if (r->start) {
			memmove(r->buf.p, base, avail);
			r->buf.len = avail;
			r->start = 0;
		}
		enum core_status st = core_buf_grow(&r->buf, 65536);
		if (st)
			return core_fail(e, st, "reading %s: out of memory", r->name);
		ssize_t got = read(r->fd, r->buf.p + r->buf.len, 65536);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return core_fail_sys(e, "cannot read %s", r->name);
		}
		if (got == 0)
			r->eof = 1;
		r->buf.len += (size_t)got;
		r->buf.p[r->buf.len] = 0;
	}
}

int core_lines_ready(struct core_lines *r)
{
	size_t avail = r->buf.len - r->start;
	char *nl;
	if (r->eof)
		return 1;
	if (avail <= r->scanned)
		return 0;
	nl = memchr(r->buf.p + r->start + r->scanned, '\n', avail - r->scanned);
	/* what was searched holds no newline: the next call starts past it */
	r->scanned = nl ? (size_t)(nl - (r->buf.p + r->start)) : avail;
	return nl != NULL;
}

size_t core_json_values(const char *p, size_t n)
{
	size_t count = 1;
	int in_string = 0;
	for (size_t i = 0; i < n; i++) {
		char ch = p[i];
		if (in_string) {
			if (ch == '\\')
				i++;
			else if (ch == '"')
				in_string = 0;
		} else if (ch == '"') {
			in_string = 1;
		} else if (ch == '{' || ch == '[' || ch == ',') {
			count++;
		}
	}
	return count;
}
