/*
 * fuzz_script.c - the script model's reply files (libcore/model/model_script.c),
 * through model_generate("script/PATH") as agent-run calls it.
 *
 * Input: the script file.  It answers three requests: no model message yet,
 * one, two (the positional replies), each with a last user text "hi".
 * Invariants:
 *  - a call fails with a message, or answers a model message whose
 *    content is an array of parts and a finish reason;
 *  - the text streamed in chunks is the text of the final message, and
 *    every chunk is a ModelResponseChunk;
 *  - the answer depends on the request only: asking twice gives the same.
 * A script that may name "call" (a reply chosen by the process's call count)
 * or "stream" (chunks given apart from the message) breaks the last two by
 * design: for such an input only the first is checked.
 * A "delay" would make the run slow: the stream is cancelled at the
 * second poll between two chunks, so no input waits more than one poll.
 */
#include "fuzz.h"

#include <string.h>

#include "../../libcore/base/buf.h"
#include "../../libcore/base/json.h"
#include "../../libcore/model/registry.h"

struct seen {
	struct core_buf text;
	int polls;
};

/* The input may choose replies by call count or stream its own chunks. */
static int loose;

static enum core_status on_chunk(void *ctx, const json_t *chunk)
{
	struct seen *s = ctx;
	size_t i;
	const json_t *p;
	FUZZ_CHECK(json_is_array(json_object_get(chunk, "content")) &&
	           !strcmp(json_string_value(json_object_get(chunk, "role")), "model"),
	           "a malformed chunk");
	json_array_foreach(json_object_get(chunk, "content"), i, p)
		if (jv_is_string(json_object_get(p, "text")))
			core_buf_add(&s->text, json_string_value(json_object_get(p, "text")),
			             json_string_length(json_object_get(p, "text")));
	s->polls = 0;
	return CORE_OK;
}

static int on_poll(void *ctx)
{
	struct seen *s = ctx;
	return ++s->polls > 1;
}

static json_t *request(size_t models)
{
	json_t *msgs = json_array();
	for (size_t i = 0; i < models; i++) {
		json_array_append_new(msgs, json_pack("{s:s, s:[{s:s}]}", "role", "user",
		                                      "content", "text", "q"));
		json_array_append_new(msgs, json_pack("{s:s, s:[{s:s}]}", "role", "model",
		                                      "content", "text", "a"));
	}
	json_array_append_new(msgs, json_pack("{s:s, s:[{s:s}]}", "role", "user",
	                                      "content", "text", "hi"));
	return msgs;
}

/* One call; the response (or the error) as text, for comparing. */
static char *call(const char *name, const json_t *msgs)
{
	struct seen s = { CORE_BUF_INIT(CORE_BUF_UNLIMITED), 0 };
	struct model_stream stream = { on_chunk, on_poll, &s };
	struct model_request req = { .messages = msgs };
	struct model_response resp = { 0 };
	struct core_err e = { 0 };
	struct core_buf out = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = model_generate(name, &req, &stream, &resp, &e);
	if (st != CORE_OK) {
		FUZZ_CHECK(e.msg[0], "a failed call without a message");
		core_buf_addf(&out, "error %d %s", (int)st, e.msg);
	} else {
		const json_t *content = json_object_get(resp.message, "content");
		size_t i;
		const json_t *p;
		FUZZ_CHECK(!strcmp(json_string_value(json_object_get(resp.message, "role")), "model"),
		           "the answer is not a model message");
		FUZZ_CHECK(json_is_array(content), "the answer has no content");
		FUZZ_CHECK(resp.finish_reason[0], "no finish reason");
		json_array_foreach(content, i, p) {
			const json_t *t = json_object_get(p, "text");
			/* The script's text part comes first and holds what streamed. */
			if (jv_is_string(t) && s.text.len && !loose) {
				FUZZ_CHECK(json_string_length(t) == s.text.len &&
				           !memcmp(json_string_value(t), s.text.p, s.text.len),
				           "the streamed text is not the message's text");
				break;
			}
		}
		char *m = fuzz_dump(resp.message);
		core_buf_addf(&out, "ok %s %s", resp.finish_reason, m);
		free(m);
		if (resp.usage) {
			m = fuzz_dump(resp.usage);
			core_buf_adds(&out, m);
			free(m);
		}
	}
	model_response_release(&resp);
	core_buf_release(&s.text);
	return core_buf_detach(&out, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *path = fuzz_write("script.ndjson", data, size);
	loose = memmem(data, size, "call", 4) || memmem(data, size, "stream", 6);
	size_t len = strlen(path) + 8;
	char *name = malloc(len);
	snprintf(name, len, "script/%s", path);
	for (size_t models = 0; models < 3; models++) {
		json_t *msgs = request(models);
		char *a = call(name, msgs), *b = call(name, msgs);
		FUZZ_CHECK(loose || !strcmp(a, b), "asking twice differs:\n%s\n%s", a, b);
		free(a);
		free(b);
		json_decref(msgs);
	}
	free(name);
	free(path);
	return 0;
}
