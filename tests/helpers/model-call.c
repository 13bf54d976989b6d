/*
 * model-call.c - test driver for the model layer: one model_generate call.
 *
 *   model-call [--cancel-after N] [--key-file FILE] [--stored AT:N] <request.json
 *
 * Reads {"model","messages","tools","config"} from stdin, prints each
 * streamed chunk as one NDJSON line, then {"response":{...}} or
 * {"error":{"status","message"}}.  SIGINT/SIGTERM cancel the call (through
 * the stream's cancelled() callback); --cancel-after N cancels once N
 * chunks were printed.  --stored AT:N hands messages AT..AT+N-1 to the
 * provider as a stored history (model_request.history: each as the text
 * jv_dump() writes, as the store keeps it), the others as messages: the
 * request must come out as it does with all of them as messages.  Exit
 * status: 0, or core_exit_code() of the failure.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../libcore/base/buf.h"
#include "../../libcore/base/json.h"
#include "../../libcore/model/registry.h"

static volatile sig_atomic_t got_signal;

/* --stored: the messages handed as stored text. */
struct stored {
	json_t *msgs;
};

static enum core_status stored_each(void *ctx, model_history_fn fn, void *arg,
                                    struct core_err *e)
{
	struct stored *s = ctx;
	enum core_status st = CORE_OK;
	size_t i;
	json_t *m;
	json_array_foreach(s->msgs, i, m) {
		struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		st = jv_dump(m, &b) ? core_fail(e, CORE_ENOMEM, "out of memory")
		                    : fn(arg, b.p, b.len, e);
		core_buf_release(&b);
		if (st)
			break;
	}
	return st;
}
static long chunks, cancel_after;

static void on_signal(int sig)
{
	(void)sig;
	got_signal = 1;
}

static void print(const json_t *v)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (jv_dump(v, &b) == CORE_OK) {
		fwrite(b.p, 1, b.len, stdout);
		fputc('\n', stdout);
		fflush(stdout);
	}
	core_buf_release(&b);
}

static enum core_status on_chunk(void *ctx, const json_t *chunk)
{
	(void)ctx;
	print(chunk);
	chunks++;
	return CORE_OK;
}

static int is_cancelled(void *ctx)
{
	(void)ctx;
	return got_signal || (cancel_after > 0 && chunks >= cancel_after);
}

int main(int argc, char **argv)
{
	struct core_buf in = CORE_BUF_INIT((size_t)256 << 20);
	struct core_err e = {0};
	struct model_request req = {0};
	struct model_stream stream = { on_chunk, is_cancelled, NULL };
	struct model_response resp = {0};
	struct sigaction sa;
	enum core_status st;
	json_t *doc = NULL, *out;
	const char *model;
	long stored_at = -1, stored_n = 0;
	struct stored stored = { NULL };
	struct model_history hist = { 0 };

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--cancel-after") && i + 1 < argc)
			cancel_after = strtol(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--key-file") && i + 1 < argc)
			req.key_file = argv[++i];
		else if (!strcmp(argv[i], "--stored") && i + 1 < argc &&
		         sscanf(argv[++i], "%ld:%ld", &stored_at, &stored_n) == 2 && stored_at >= 0 &&
		         stored_n >= 0)
			;
		else {
			fprintf(stderr, "usage: model-call [--cancel-after N] [--key-file FILE] "
			        "[--stored AT:N] <request.json\n");
			return core_exit_code(CORE_EUSAGE);
		}
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	if ((st = core_buf_read_file(&in, "-", &e)))
		goto out;
	if (!(doc = jv_parse(in.p ? in.p : "", in.len, "<stdin>", 0, &e))) {
		st = e.st;
		goto out;
	}
	model = json_string_value(json_object_get(doc, "model"));
	if (!model) {
		st = core_fail(&e, CORE_EINVAL, "request has no \"model\" string");
		goto out;
	}
	req.messages = json_object_get(doc, "messages");
	if (stored_at >= 0) {
		json_t *all = json_object_get(doc, "messages"), *rest = json_array();
		stored.msgs = json_array();
		for (size_t i = 0; i < json_array_size(all); i++)
			json_array_append(i >= (size_t)stored_at && i < (size_t)(stored_at + stored_n)
			                  ? stored.msgs : rest, json_array_get(all, i));
		hist.count = json_array_size(stored.msgs);
		hist.at = (size_t)stored_at;
		hist.each = stored_each;
		hist.ctx = &stored;
		json_object_set_new(doc, "messages", rest);
		req.messages = rest;
		req.history = &hist;
	}
	req.tools = json_object_get(doc, "tools");
	req.config = json_object_get(doc, "config");
	st = model_generate(model, &req, &stream, &resp, &e);
out:
	if (st == CORE_OK) {
		out = json_pack("{s:{s:O, s:s}}", "response", "message", resp.message,
		                "finishReason", resp.finish_reason);
		if (resp.usage)
			json_object_set(json_object_get(out, "response"), "usage", resp.usage);
	} else {
		out = json_pack("{s:{s:s, s:s}}", "error", "status", core_status_name(st),
		                "message", e.msg);
	}
	print(out);
	json_decref(out);
	json_decref(doc);
	json_decref(stored.msgs);
	model_response_release(&resp);
	core_buf_release(&in);
	return st == CORE_OK ? 0 : core_exit_code(st);
}
