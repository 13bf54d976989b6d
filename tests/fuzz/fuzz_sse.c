/*
 * fuzz_sse.c - the SSE and NDJSON framing of provider streams
 * (libcore/base/sse.c) and the NDJSON record reader of stdin (libcore/base/lines.c).
 *
 * Input: a mode byte (bit 0: 0 SSE, 1 NDJSON), then the stream.
 * Invariants:
 *  - the events do not depend on how the bytes arrive: the whole stream
 *    in one slice, one byte at a time, and slices cut at sizes drawn from
 *    the input all give the same events (types and data) and the same
 *    status;
 *  - an event's data is NUL-terminated at its length;
 *  - core_lines hands out records without a newline, never blank, never longer than its bound (or fails saying so).
 */
#include "fuzz.h"

#include <string.h>
#include <unistd.h>

#include "../../libcore/base/buf.h"
#include "../../libcore/base/lines.h"
#include "../../libcore/base/sse.h"

static enum core_status record(void *ctx, const char *type, const char *data, size_t n)
{
	struct core_buf *out = ctx;
	FUZZ_CHECK(data[n] == 0, "event data not NUL-terminated");
	core_buf_addf(out, "%s|%zu|", type ? type : "(ndjson)", n);
	core_buf_add(out, data, n);
	core_buf_addc(out, '\n');
	return CORE_OK;
}

/* Feed s[0..n) in slices of the sizes cut[] gives (cycled); 0 means one
 * slice.  Appends the events and the final status to out. */
static void run(enum sse_mode mode, const char *s, size_t n, const uint8_t *cut,
                size_t ncut, struct core_buf *out)
{
	struct sse_parser p;
	struct core_err e = { 0 };
	enum core_status st = CORE_OK;
	size_t off = 0, k = 0;
	sse_init(&p, mode, (size_t)1 << 20, record, out);
	while (off < n && !st) {
		size_t len = ncut ? (size_t)1 + cut[k++ % ncut] % 17 : n;
		if (len > n - off)
			len = n - off;
		st = sse_feed(&p, s + off, len, &e);
		off += len;
	}
	if (!st)
		st = sse_finish(&p, &e);
	core_buf_addf(out, "status %d\n", (int)st);
	sse_release(&p);
}

static void lines(const char *s, size_t n, size_t max)
{
	int fds[2];
	struct core_lines r;
	struct core_err e = { 0 };
	char *line;
	size_t len, count = 0;
	enum core_status st;
	if (pipe(fds))
		return;
	/* Inputs are at most a few KiB: the pipe holds them whole. */
	if (write(fds[1], s, n) != (ssize_t)n) {
		close(fds[0]);
		close(fds[1]);
		return;
	}
	close(fds[1]);
	core_lines_init(&r, fds[0], "fuzz", max);
	while ((st = core_lines_next(&r, &line, &len, &e)) == CORE_OK && line) {
		count++;
		FUZZ_CHECK(len <= max, "a record of %zu bytes past the bound %zu", len, max);
		FUZZ_CHECK(!memchr(line, '\n', len), "a record holds a newline");
		FUZZ_CHECK(line[len] == 0, "a record not NUL-terminated");
		FUZZ_CHECK(strspn(line, " \t\r") < len || memchr(line, 0, len),
		           "a blank record");
		FUZZ_CHECK(r.lineno >= count, "line numbers go back");
	}
	if (st != CORE_OK)
		FUZZ_CHECK(st == CORE_ETOOBIG && e.msg[0], "core_lines failed: %s", e.msg);
	core_lines_release(&r);
	close(fds[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	enum sse_mode mode = data[0] & 1 ? SSE_MODE_NDJSON : SSE_MODE_SSE;
	const char *s = (const char *)data + 1;
	size_t n = size - 1;
	static const uint8_t one[] = { 0 };
	struct core_buf whole = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_buf bytes = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_buf cut = CORE_BUF_INIT(CORE_BUF_UNLIMITED);

	run(mode, s, n, NULL, 0, &whole);
	run(mode, s, n, one, 1, &bytes);
	run(mode, s, n, data, size, &cut);
	FUZZ_CHECK(whole.len == bytes.len && !memcmp(whole.p, bytes.p, whole.len),
	           "one slice and one byte at a time differ:\n%s---\n%s", whole.p, bytes.p);
	FUZZ_CHECK(whole.len == cut.len && !memcmp(whole.p, cut.p, whole.len),
	           "one slice and cut slices differ:\n%s---\n%s", whole.p, cut.p);
	core_buf_release(&whole);
	core_buf_release(&bytes);
	core_buf_release(&cut);

	lines(s, n, CORE_LINES_DEFAULT_MAX);
	lines(s, n, 16);
	return 0;
}
