/*
 * bench-otlp.c - what an OTLP request costs agentkit to encode, per span:
 * http/protobuf (protobuf-c's generated code) against http/json
 * (trace.c's writer), each also gzip-compressed (zlib, as the exporter
 * thread does it for OTEL_EXPORTER_OTLP_COMPRESSION=gzip).
 *
 *   bench-otlp SPANS ROUNDS
 *
 * Records SPANS spans shaped as an agent's (a tool loop's model and tool
 * spans: Genkit's attributes, GenAI ones, usage, a finish reason, every
 * tenth failed with its exception event), then encodes the one request
 * ROUNDS times each way.  Prints "name value unit" lines: nanoseconds and
 * bytes per span.  Encoding runs under the recorder's mutex on the turn's
 * thread; compression runs on the exporter thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zlib.h>

#include "../../libcore/base/buf.h"
#include "../../libcore/base/trace.h"

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static size_t gzip_len(const struct core_buf *b)
{
	z_stream zs;
	memset(&zs, 0, sizeof zs);
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY))
		return 0;
	uLong bound = deflateBound(&zs, (uLong)b->len);
	unsigned char *out = malloc(bound);
	size_t n = 0;
	if (out) {
		zs.next_in = (Bytef *)b->p;
		zs.avail_in = (uInt)b->len;
		zs.next_out = out;
		zs.avail_out = (uInt)bound;
		if (deflate(&zs, Z_FINISH) == Z_STREAM_END)
			n = zs.total_out;
	}
	deflateEnd(&zs);
	free(out);
	return n;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: bench-otlp SPANS ROUNDS\n");
		return 100;
	}
	int spans = atoi(argv[1]), rounds = atoi(argv[2]);
	struct trace_config c;
	setenv("AGENTKIT_TRACE", "1", 1);
	unsetenv("TRACEPARENT");
	unsetenv("OTEL_TRACES_SAMPLER");
	if (trace_config_from_env(&c, 1, "/dev/null", "agent-run", "0.1.0") || trace_init(&c))
		return 1;
	struct trace_span *root = trace_start(NULL, "inline", TRACE_INTERNAL, 0);
	json_t *fr = json_pack("[s]", "stop");
	for (int i = 0; i < spans; i++) {
		int tool = i % 2;
		char path[200];
		snprintf(path, sizeof path, "/{inline,t:action,s:agent}/{runTurn-1,t:flowStep}/"
		         "{generate,t:util}/{%s,t:action,s:%s}", tool ? "read_file" : "openai/gpt-4o",
		         tool ? "tool" : "model");
		struct trace_span *s = trace_start(root, tool ? "read_file" : "openai/gpt-4o",
		                                   tool ? TRACE_INTERNAL : TRACE_CLIENT, 0);
		trace_attr_str(s, "genkit:name", tool ? "read_file" : "openai/gpt-4o");
		trace_attr_str(s, "genkit:type", "action");
		trace_attr_str(s, "genkit:metadata:subtype", tool ? "tool" : "model");
		trace_attr_str(s, "genkit:path", path);
		trace_attr_str(s, "gen_ai.operation.name", tool ? "execute_tool" : "chat");
		if (tool) {
			trace_attr_str(s, "gen_ai.tool.name", "read_file");
			trace_attr_str(s, "gen_ai.tool.type", "function");
		} else {
			trace_attr_str(s, "gen_ai.request.model", "openai/gpt-4o");
			trace_attr_str(s, "gen_ai.provider.name", "openai");
			trace_attr_int(s, "gen_ai.usage.input_tokens", 1200 + i);
			trace_attr_int(s, "gen_ai.usage.output_tokens", 80 + i);
			trace_attr_strs(s, "gen_ai.response.finish_reasons", fr);
		}
		int bad = i % 10 == 9;
		trace_attr_str(s, "genkit:state", bad ? "error" : "success");
		if (bad) {
			const char *ev[] = { "exception.type", "INTERNAL", "exception.message",
			                     "exited with status 3: no such file", NULL };
			trace_attr_str(s, "error.type", "INTERNAL");
			trace_event(s, "exception", ev);
		}
		trace_end(s, bad ? TRACE_STATUS_ERROR : TRACE_UNSET,
		          bad ? "exited with status 3: no such file" : NULL);
	}
	json_decref(fr);
	static const char *const names[] = { "json", "protobuf" };
	for (int pb = 0; pb < 2; pb++) {
		struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		size_t n = 0;
		double t0 = now_ns();
		for (int r = 0; r < rounds; r++) {
			b.len = 0;
			if (trace_request_encode(pb, &b, &n) || (int)n != spans)
				return 1;
		}
		double enc = (now_ns() - t0) / rounds / spans;
		t0 = now_ns();
		size_t zlen = 0;
		for (int r = 0; r < rounds; r++)
			zlen = gzip_len(&b);
		double z = (now_ns() - t0) / rounds / spans;
		printf("%s_encode %.0f ns/span\n", names[pb], enc);
		printf("%s_bytes %.0f bytes/span\n", names[pb], (double)b.len / spans);
		printf("%s_gzip %.0f ns/span\n", names[pb], z);
		printf("%s_gzip_bytes %.0f bytes/span\n", names[pb], (double)zlen / spans);
		core_buf_release(&b);
	}
	trace_end(root, TRACE_UNSET, NULL);
	trace_finish(NULL, &(struct core_err){ 0 });
	return 0;
}
