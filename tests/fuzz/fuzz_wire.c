/*
 * fuzz_wire.c - Genkit's wire as agentkit's client reads a turn's answer
 * (libcore/agent/remote.c, remote_stream_*: what agent-run --url reads
 * from agent-serve or a Genkit app): frames ended by a blank line, each
 * "data: JSON" or express's "error: JSON", or a plain JSON answer;
 * events {"message"}, {"result"} or {"error"}.
 *
 * Input: the server's answer body.
 * Invariants:
 *  - the chunks and the outcome do not depend on how the bytes arrive:
 *    the whole body in one slice, one byte at a time, and slices cut at
 *    sizes drawn from the input give the same chunks, final line and
 *    status;
 *  - a success has exactly one final line, {"output": V} or {"error": V},
 *    that dumps and reads back; a failure is one of the documented
 *    statuses with a message that begins with the URL, valid UTF-8;
 *  - nothing counts after the result: a chunk frame appended to a body
 *    that gave one changes neither the chunks nor the final line.
 */
#include "fuzz.h"

#include <string.h>

#include "../../libcore/agent/remote.h"
#include "../../libcore/base/buf.h"
#include "../../libcore/base/json.h"
#include "../../libcore/base/utf8.h"

#define URL "http://fuzz.invalid/agent"

struct seen {
	struct core_buf log;
};

static enum core_status on_chunk(void *ctx, const json_t *chunk, struct core_err *e)
{
	struct seen *s = ctx;
	char *d;
	FUZZ_CHECK(chunk != NULL, "a NULL chunk");
	d = fuzz_dump(chunk);
	core_buf_addf(&s->log, "chunk %s\n", d);
	free(d);
	return CORE_OK;
}

/* Feed data in slices of the sizes cut[] gives (cycled), 0: one slice;
 * the chunks, then the final line or the status, into s->log. */
static void run(const char *data, size_t n, const uint8_t *cut, size_t ncut, struct seen *s)
{
	struct remote_stream *rs = remote_stream_new(URL, on_chunk, s);
	struct core_err e = { 0 };
	enum core_status st = CORE_OK;
	json_t *final = NULL;
	size_t off = 0, k = 0;
	FUZZ_CHECK(rs != NULL, "out of memory");
	while (off < n && !st) {
		size_t len = ncut ? (size_t)1 + cut[k++ % ncut] % 23 : n;
		if (len > n - off)
			len = n - off;
		st = remote_stream_feed(rs, data + off, len, &e);
		off += len;
	}
	if (!st)
		st = remote_stream_end(rs, &final, &e);
	if (st == CORE_OK) {
		const char *key;
		json_t *v;
		char *d;
		FUZZ_CHECK(json_is_object(final) && json_object_size(final) == 1,
		           "a final line that is not one member");
		json_object_foreach(final, key, v)
			FUZZ_CHECK(!strcmp(key, "output") || !strcmp(key, "error"),
			           "a final line with %s", key);
		d = fuzz_dump(final);
		json_t *back = json_loads(d, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
		FUZZ_CHECK(back && json_equal(back, final), "the final line does not read back: %s", d);
		json_decref(back);
		core_buf_addf(&s->log, "final %s\n", d);
		free(d);
	} else {
		FUZZ_CHECK(st == CORE_EINTERNAL || st == CORE_ETOOBIG || st == CORE_EUNAVAILABLE,
		           "status %d: %s", (int)st, e.msg);
		FUZZ_CHECK(!strncmp(e.msg, URL ": ", strlen(URL) + 2), "a message without the URL: %s",
		           e.msg);
		FUZZ_CHECK(utf8_valid(e.msg, strlen(e.msg)) == strlen(e.msg), "a message that is not UTF-8: %s", e.msg);
		core_buf_addf(&s->log, "status %d %s\n", (int)st, e.msg);
	}
	json_decref(final);
	remote_stream_free(rs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t one[] = { 0 };
	static const char more[] = "\n\ndata: {\"message\":{\"after\":true}}\n\n";
	struct seen whole = { CORE_BUF_INIT(CORE_BUF_UNLIMITED) };
	struct seen bytes = { CORE_BUF_INIT(CORE_BUF_UNLIMITED) };
	struct seen cut = { CORE_BUF_INIT(CORE_BUF_UNLIMITED) };
	struct seen after = { CORE_BUF_INIT(CORE_BUF_UNLIMITED) };
	const char *s = (const char *)data;

	run(s, size, NULL, 0, &whole);
	run(s, size, one, 1, &bytes);
	run(s, size, data, size, &cut);
	core_buf_addc(&whole.log, '\0');
	core_buf_addc(&bytes.log, '\0');
	core_buf_addc(&cut.log, '\0');
	FUZZ_CHECK(!strcmp(whole.log.p, bytes.log.p),
	           "one slice and one byte at a time differ:\n%s---\n%s", whole.log.p, bytes.log.p);
	FUZZ_CHECK(!strcmp(whole.log.p, cut.log.p),
	           "one slice and cut slices differ:\n%s---\n%s", whole.log.p, cut.log.p);
	/* nothing counts after the result: a chunk sent after it changes nothing */
	if (strstr(whole.log.p, "\nfinal {") || !strncmp(whole.log.p, "final {", 7)) {
		char *more_input = malloc(size + sizeof more);
		FUZZ_CHECK(more_input != NULL, "out of memory");
		memcpy(more_input, data, size);
		memcpy(more_input + size, more, sizeof more - 1);
		run(more_input, size + sizeof more - 1, NULL, 0, &after);
		core_buf_addc(&after.log, '\0');
		FUZZ_CHECK(!strcmp(whole.log.p, after.log.p), "a chunk after the result counts:\n%s"
		           "---\n%s", whole.log.p, after.log.p);
		free(more_input);
	}
	core_buf_release(&after.log);
	core_buf_release(&whole.log);
	core_buf_release(&bytes.log);
	core_buf_release(&cut.log);
	return 0;
}
