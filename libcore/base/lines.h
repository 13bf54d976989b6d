/*
 * lines.h - a bounded reader of newline-terminated records (NDJSON).
 *
 * Reads from a file descriptor with read(2), so a record is handed out as
 * soon as its newline arrives (live streams work), and never holds more
 * than max bytes of one record: a longer record fails with CORE_ETOOBIG and
 * the message names its line ("record at <stdin>:17 is longer than ...").
 * A final record without a newline is still a record.  Empty lines (or
 * lines of only blanks) are skipped, as NDJSON readers do.
 */
#ifndef CORE_LINES_H
#define CORE_LINES_H

#include "buf.h"

struct core_lines {
	int fd;
	const char *name;       /* for messages: "<stdin>" or a path; borrowed */
	size_t lineno;          /* line number of the record last returned */
	size_t max;             /* longest record accepted, in bytes */
	struct core_buf buf;    /* read-ahead */
	size_t start;           /* first unconsumed byte in buf */
	size_t scanned;         /* bytes after start already searched for '\n' */
	size_t next_lineno;
	int eof;
};

/* Default record limit: 64 MiB, changed with --max-record. */
#define CORE_LINES_DEFAULT_MAX ((size_t)64 << 20)

void core_lines_init(struct core_lines *r, int fd, const char *name, size_t max);
void core_lines_release(struct core_lines *r);

/*
 * The next record: *line points into the reader (valid until the next call;
 * NUL-terminated, newline and a trailing '\r' removed) and *len is its
 * length.  At end of input returns CORE_OK with *line == NULL.
 * Errors: CORE_ETOOBIG, CORE_ESYS, CORE_ENOMEM.
 */
enum core_status core_lines_next(struct core_lines *r, char **line, size_t *len,
                                 struct core_err *e);

/*
 * 1 when the next core_lines_next() returns without reading: a whole
 * record is already read ahead, or the input has ended.  A stream filter
 * flushes its output only when this is 0, before it would wait for input:
 * what it printed is out as soon as it is idle, in one write for all the
 * records that arrived together.
 */
int core_lines_ready(struct core_lines *r);

/*
 * An upper bound on the JSON values in the text p[0..n): its opening
 * brackets and commas outside strings, plus one.  Parsed, a value costs
 * jansson 30 to 200 bytes whatever its text (`{}` is two bytes), so a
 * limit on output bytes alone does not bound memory: CORE_VALUE_LIMIT()
 * is the values allowed with a limit of bytes (one per CORE_VALUE_BYTES,
 * at least 1024), and this count is known before the text is parsed.
 */
size_t core_json_values(const char *p, size_t n);
#define CORE_VALUE_BYTES 64
#define CORE_VALUE_LIMIT(bytes) \
	((bytes) / CORE_VALUE_BYTES > 1024 ? (bytes) / CORE_VALUE_BYTES : (size_t)1024)

#endif
