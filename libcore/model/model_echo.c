/*
 * model_echo.c - the "echo" model: answers with the last user message's text.
 *
 * Offline and deterministic: the reply is the text of the last user message
 * of the request (its text parts joined), streamed in up to three chunks
 * split at word boundaries, finish reason "stop", and usage counted in
 * characters and messages.  It never requests tools.
 */
#include "model.h"

#include <stdio.h>
#include <string.h>

#include "../base/buf.h"

#define ECHO_CHUNKS 3

static size_t count_chars(const json_t *messages)
{
	size_t n = 0, i, j;
	const json_t *m, *part;
	json_array_foreach(messages, i, m)
		json_array_foreach(json_object_get(m, "content"), j, part)
			n += json_string_length(json_object_get(part, "text"));
	return n;
}

static enum core_status send_chunk(const struct model_stream *stream, const char *p, size_t n)
{
	if (stream && stream->cancelled && stream->cancelled(stream->ctx))
		return CORE_ECANCELLED;
	if (!stream || !stream->chunk || !n)
		return CORE_OK;
	json_t *c = json_pack("{s:s, s:i, s:[{s:s%}]}", "role", "model", "index", 0,
	                      "content", "text", p, n);
	if (!c)
		return CORE_ENOMEM;
	enum core_status st = stream->chunk(stream->ctx, c);
	json_decref(c);
	return st;
}

static enum core_status echo_generate(const char *name, const struct model_request *req,
                                      const struct model_stream *stream,
                                      struct model_response *resp, struct core_err *e)
{
	struct core_buf text = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st;
	if (*name)
		return core_fail(e, CORE_ENOTFOUND, "model 'echo/%s' not found (the echo model has no variants)",
		                 name);
	if (model_last_user_text(req->messages, &text))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	const char *p = text.p ? text.p : "";

	/*
	 * Chunk boundaries: a third of the text each, moved forward to the next
	 * space so words (and UTF-8 sequences) stay whole.
	 */
	size_t len = text.len, start = 0;
	for (int c = 1; c <= ECHO_CHUNKS && start < len; c++) {
		size_t end = c == ECHO_CHUNKS ? len : len * (size_t)c / ECHO_CHUNKS;
		if (end < start)
			end = start;
		while (end < len && p[end] != ' ')
			end++;
		if (end > start && (st = send_chunk(stream, p + start, end - start))) {
			core_buf_release(&text);
			return core_fail(e, st, "echo: %s", core_strerror(st));
		}
		start = end;
	}
	resp->message = json_pack("{s:s, s:[{s:s%}]}", "role", "model", "content", "text", p, len);
	resp->usage = json_pack("{s:I, s:I, s:I, s:I}",
	                        "inputMessages", (json_int_t)json_array_size(req->messages),
	                        "inputCharacters", (json_int_t)count_chars(req->messages),
	                        "outputMessages", (json_int_t)1,
	                        "outputCharacters", (json_int_t)len);
	core_buf_release(&text);
	if (!resp->message || !resp->usage) {
		model_response_release(resp);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	snprintf(resp->finish_reason, sizeof resp->finish_reason, "stop");
	return CORE_OK;
}

const struct model_provider model_echo = { .prefix = "echo", .generate = echo_generate };
