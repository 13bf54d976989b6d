/*
 * model-call.c - test driver for the model layer: one model_generate call.
 *
 *   model-call [--cancel-after N] [--key-file FILE] <request.json
 *
 * Reads {"model","messages","tools","config"} from stdin, prints each
 * streamed chunk as one NDJSON line, then {"response":{...}} or
 * {"error":{"status","message"}}.  SIGINT/SIGTERM cancel the call (through
 * the stream's cancelled() callback); --cancel-after N cancels once N
 * chunks were printed.  Exit status: 0, or core_exit_code() of the failure.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../libcore/base/buf.h"
#include "../../libcore/base/json.h"
#include "../../libcore/model/registry.h"

static volatile sig_atomic_t got_signal;
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

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--cancel-after") && i + 1 < argc)
			cancel_after = strtol(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--key-file") && i + 1 < argc)
			req.key_file = argv[++i];
		else {
			fprintf(stderr, "usage: model-call [--cancel-after N] [--key-file FILE] <request.json\n");
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
	model_response_release(&resp);
	core_buf_release(&in);
	return st == CORE_OK ? 0 : core_exit_code(st);
}
