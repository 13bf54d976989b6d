/*
 * trace_test.c - unit tests for the span recorder and its OTLP/JSON
 * encoding (libcore/base/trace.h): endpoint construction, traceparent
 * parsing, header decoding, IDs, times, enums and typed attributes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../libcore/base/trace.h"
#include "tap.h"

static int is_hex(const char *s, size_t n)
{
	if (!s || strlen(s) != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdef", s[i]))
			return 0;
	return 1;
}

static int is_digits(const char *s)
{
	if (!s || !*s)
		return 0;
	return strspn(s, "0123456789") == strlen(s);
}

static void endpoints(void)
{
	static const struct { const char *te, *base, *want; } c[] = {
		{ NULL, NULL, "http://localhost:4318/v1/traces" },
		{ NULL, "http://h:1", "http://h:1/v1/traces" },
		{ NULL, "http://h:1/", "http://h:1/v1/traces" },
		{ NULL, "http://h:1/mycollector/", "http://h:1/mycollector/v1/traces" },
		{ "http://t:2/custom", "http://h:1", "http://t:2/custom" },
		{ "http://t:2", NULL, "http://t:2/" },
		{ "", "http://h:1", "http://h:1/v1/traces" },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		char out[256];
		trace_endpoint(c[i].te, c[i].base, out, sizeof out);
		char name[300];
		snprintf(name, sizeof name, "endpoint %s + %s", c[i].te ? c[i].te : "-",
		         c[i].base ? c[i].base : "-");
		report(!strcmp(out, c[i].want), name, out);
	}
}

static void parents(void)
{
	char t[33], s[17];
	unsigned f;
	report(!trace_parse_parent("00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
	                           t, s, &f) && !strcmp(t, "0af7651916cd43dd8448eb211c80319c") &&
	       !strcmp(s, "00f067aa0ba902b7") && f == 1, "traceparent parses", NULL);
	static const char *const bad[] = {
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
		"00-0AF7651916CD43DD8448EB211C80319C-00f067aa0ba902b7-01",
		"ff-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
		"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01-x",
		"00-0af7651916cd43dd8448eb211c8031-00f067aa0ba902b7-01",
		"garbage",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		report(trace_parse_parent(bad[i], t, s, &f) == -1, bad[i], NULL);
	report(!trace_parse_parent("01-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00-x",
	                           t, s, &f) && f == 0, "a later version may add fields", NULL);
}

static void config(void)
{
	struct trace_config c;
	setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20t, x-a=1", 1);
	setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "X-A=2", 1);
	setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=fromattrs,team=a%2Cb", 1);
	trace_config_from_env(&c, 1, NULL, "agent-run", "9.9");
	report(c.exporter == TRACE_OTLP, "otlp is the default exporter", NULL);
	report(c.headers[0] && !strcmp(c.headers[0], "Authorization: Bearer t") &&
	       c.headers[1] && !strcmp(c.headers[1], "X-A: 2") && !c.headers[2],
	       "headers are percent-decoded, the traces variable wins", c.headers[0]);
	char *res = json_dumps(c.resource, JSON_COMPACT);
	report(res && strstr(res, "\"key\":\"service.name\",\"value\":{\"stringValue\":\"fromattrs\"}") &&
	       strstr(res, "\"stringValue\":\"a,b\"") && strstr(res, "\"stringValue\":\"9.9\""),
	       "resource attributes decoded, service.name kept", res);
	free(res);
	trace_config_release(&c);
	setenv("OTEL_SERVICE_NAME", "svc", 1);
	setenv("OTEL_SDK_DISABLED", "TRUE", 1);
	trace_config_from_env(&c, 1, NULL, "agent-run", "9.9");
	report(c.exporter == TRACE_OFF, "OTEL_SDK_DISABLED=TRUE wins over the flag", NULL);
	trace_config_release(&c);
	unsetenv("OTEL_SDK_DISABLED");
	setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", 1);
	trace_config_from_env(&c, 1, NULL, "agent-run", "9.9");
	report(c.exporter == TRACE_OFF && strstr(c.note, "'grpc'"), "grpc turns tracing off",
	       c.note);
	trace_config_release(&c);
	unsetenv("OTEL_EXPORTER_OTLP_PROTOCOL");
	setenv("TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00", 1);
	trace_config_from_env(&c, 1, NULL, "agent-run", "9.9");
	report(c.exporter == TRACE_OTLP && c.parent[0] && !c.note[0] &&
	       c.sampler == TRACE_PARENT_ALWAYS_ON && c.protocol == TRACE_PROTOBUF && !c.gzip,
	       "an unsampled parent is kept for the sampler; protobuf, no gzip by default",
	       c.note);
	trace_config_release(&c);
	unsetenv("TRACEPARENT");
	setenv("OTEL_TRACES_SAMPLER", "sometimes", 1);
	setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json", 1);
	setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip", 1);
	trace_config_from_env(&c, 1, NULL, "agent-run", "9.9");
	report(c.sampler == TRACE_PARENT_ALWAYS_ON && c.protocol == TRACE_JSON && c.gzip &&
	       !strcmp(c.note, "OTEL_TRACES_SAMPLER 'sometimes' is not a known sampler: "
	               "parentbased_always_on used"),
	       "an unknown sampler is noted, parentbased_always_on used", c.note);
	trace_config_release(&c);
	setenv("OTEL_TRACES_SAMPLER", "traceidratio", 1);
	setenv("OTEL_TRACES_SAMPLER_ARG", "0.25", 1);
	trace_config_from_env(&c, 1, NULL, "agent-run", "9.9");
	report(c.sampler == TRACE_RATIO && c.ratio == 0.25 && !c.note[0], "traceidratio 0.25",
	       c.note);
	trace_config_release(&c);
	unsetenv("OTEL_TRACES_SAMPLER");
	unsetenv("OTEL_TRACES_SAMPLER_ARG");
	unsetenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL");
	unsetenv("OTEL_EXPORTER_OTLP_COMPRESSION");
	trace_config_from_env(&c, 0, NULL, "agent-run", "9.9");
	report(c.exporter == TRACE_OFF, "off without the flag or AGENTKIT_TRACE", NULL);
	trace_config_release(&c);
}

static void spans(void)
{
	struct trace_config c;
	setenv("TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01", 1);
	trace_config_from_env(&c, 0, "/dev/null", "agent-run", "9.9");
	report(c.exporter == TRACE_CONSOLE && c.parent[0], "a trace file means console", NULL);
	trace_init(&c);
	struct trace_span *root = trace_start(NULL, "root", TRACE_INTERNAL, 0);
	struct trace_span *kid = trace_start(root, "kid", TRACE_CLIENT, 0);
	trace_attr_str(kid, "s", "v");
	trace_attr_int(kid, "n", 42);
	trace_attr_int(kid, "n", 43);
	trace_attr_bool(kid, "b", 1);
	json_t *arr = pj("[\"stop\", 3]");
	trace_attr_strs(kid, "a", arr);
	trace_attr_str(kid, "u", "a\xff\"b\xc3\xa9");
	json_decref(arr);
	char tp[TRACE_PARENT_LEN + 1];
	report(!trace_traceparent(kid, tp) && !strncmp(tp, "00-0af7651916cd43dd8448eb211c80319c-", 36) &&
	       !strcmp(tp + 52, "-01"), "traceparent of a span", tp);
	trace_end(kid, TRACE_STATUS_ERROR, "boom");
	trace_end(root, TRACE_UNSET, "ignored");
	json_t *req = trace_request_peek(0);
	json_t *sp = json_object_get(json_array_get(json_object_get(json_array_get(
		json_object_get(req, "resourceSpans"), 0), "scopeSpans"), 0), "spans");
	report(json_array_size(sp) == 2, "two ended spans in one request", NULL);
	json_t *r = json_array_get(sp, 0), *k = json_array_get(sp, 1);
	const char *rid = json_string_value(json_object_get(r, "spanId"));
	report(is_hex(json_string_value(json_object_get(r, "traceId")), 32) && is_hex(rid, 16),
	       "hex IDs", NULL);
	report(!strcmp(json_string_value(json_object_get(r, "parentSpanId")), "00f067aa0ba902b7") &&
	       json_integer_value(json_object_get(r, "flags")) == 0x301,
	       "the root's parent is the inbound span, flagged remote", NULL);
	report(!strcmp(json_string_value(json_object_get(k, "parentSpanId")), rid) &&
	       json_integer_value(json_object_get(k, "flags")) == 0x101, "the child's parent", NULL);
	report(is_digits(json_string_value(json_object_get(k, "startTimeUnixNano"))) &&
	       is_digits(json_string_value(json_object_get(k, "endTimeUnixNano"))) &&
	       strlen(json_string_value(json_object_get(k, "startTimeUnixNano"))) >= 19,
	       "nanosecond strings", NULL);
	report(json_integer_value(json_object_get(k, "kind")) == 3 &&
	       json_integer_value(json_object_get(json_object_get(k, "status"), "code")) == 2 &&
	       !strcmp(json_string_value(json_object_get(json_object_get(k, "status"), "message")),
	               "boom") && !json_object_get(json_object_get(r, "status"), "message"),
	       "integer kind and status, message only on error", NULL);
	char *at = json_dumps(json_object_get(k, "attributes"), JSON_COMPACT);
	report(at && !strcmp(at, "[{\"key\":\"s\",\"value\":{\"stringValue\":\"v\"}},"
	                          "{\"key\":\"n\",\"value\":{\"intValue\":\"43\"}},"
	                          "{\"key\":\"b\",\"value\":{\"boolValue\":true}},"
	                          "{\"key\":\"a\",\"value\":{\"arrayValue\":{\"values\":"
	                          "[{\"stringValue\":\"stop\"}]}}},"
	                          "{\"key\":\"u\",\"value\":{\"stringValue\":"
	                          "\"a\xef\xbf\xbd\\\"b\xc3\xa9\"}}]"),
	       "typed attributes, a key set twice replaced, an invalid byte as U+FFFD", at);
	free(at);
	json_decref(req);
	struct core_err e = { 0 };
	report(!trace_finish(NULL, &e), "console export to a file", e.msg);
	report(!trace_on() && !trace_start(NULL, "x", TRACE_INTERNAL, 0), "off after finish", NULL);
	unsetenv("TRACEPARENT");
}

/* A server's spans: each request in a trace of its own. */
static void remote_spans(void)
{
	struct trace_config c;
	trace_config_from_env(&c, 0, "/dev/null", "agent-serve", "9.9");
	trace_init(&c);
	struct trace_span *a = trace_start_remote(
		"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01", "k=v", "POST /chat",
		TRACE_SERVER, 0);
	struct trace_span *kid = trace_start(a, "kid", TRACE_INTERNAL, 0);
	struct trace_span *b = trace_start_remote("garbage", NULL, "POST", TRACE_SERVER, 0);
	struct trace_span *off = trace_start_remote(
		"00-1af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00", NULL, "POST", TRACE_SERVER,
		0);
	char tp[TRACE_PARENT_LEN + 1], tb[TRACE_PARENT_LEN + 1], toff[TRACE_PARENT_LEN + 1];
	report(!trace_traceparent(kid, tp) && !strncmp(tp, "00-0af7651916cd43dd8448eb211c80319c-", 36) &&
	       !strcmp(tp + 52, "-01"), "a child of a request's span is in the request's trace", tp);
	char tid[33] = "";
	report(!trace_traceparent(b, tb) && strncmp(tb, "00-0af7651916cd43dd8448eb211c80319c-", 36) &&
	       memcpy(tid, tb + 3, 32) && is_hex(tid, 32) && !strcmp(tb + 52, "-01"),
	       "without a valid traceparent, a new sampled trace", tb);
	report(!trace_traceparent(off, toff) && !strcmp(toff + 52, "-00"),
	       "an unsampled parent's flag is followed", toff);
	trace_end(kid, TRACE_UNSET, NULL);
	trace_end(a, TRACE_UNSET, NULL);
	trace_end(b, TRACE_UNSET, NULL);
	trace_end(off, TRACE_UNSET, NULL);
	json_t *req = trace_request_peek(0);
	json_t *sp = json_object_get(json_array_get(json_object_get(json_array_get(
		json_object_get(req, "resourceSpans"), 0), "scopeSpans"), 0), "spans");
	json_t *ja = json_array_get(sp, 0), *jk = json_array_get(sp, 1), *jb = json_array_get(sp, 2);
	report(json_array_size(sp) == 3, "the unsampled trace's span is not exported", NULL);
	report(!strcmp(json_string_value(json_object_get(ja, "traceId")),
	               "0af7651916cd43dd8448eb211c80319c") &&
	       !strcmp(json_string_value(json_object_get(ja, "parentSpanId")), "00f067aa0ba902b7") &&
	       json_integer_value(json_object_get(ja, "flags")) == 0x301 &&
	       !strcmp(json_string_value(json_object_get(ja, "traceState")), "k=v") &&
	       !strcmp(json_string_value(json_object_get(jk, "traceState")), "k=v") &&
	       !strcmp(json_string_value(json_object_get(jk, "traceId")),
	               "0af7651916cd43dd8448eb211c80319c"),
	       "the request's span: its caller's trace, parent and tracestate", NULL);
	report(!strncmp(json_string_value(json_object_get(jb, "traceId")), tb + 3, 32) &&
	       !json_object_get(jb, "parentSpanId") && !json_object_get(jb, "traceState"),
	       "a new trace's span is a root", NULL);
	json_decref(req);
	struct core_err e = { 0 };
	report(!trace_finish(NULL, &e), "finish", e.msg);
}

int main(void)
{
	endpoints();
	parents();
	config();
	spans();
	remote_spans();
	return tap_end();
}
