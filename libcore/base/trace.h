/*
 * trace.h - a span recorder and its OpenTelemetry exporters (OTLP/HTTP with
 * protobuf or JSON bodies, gzip-compressed or not, and a console exporter
 * writing JSON requests as lines).
 *
 * The recorder knows nothing of agents: it keeps spans (IDs, name, kind,
 * times, typed attributes, status), and on trace_flush() encodes the ended
 * ones as one ExportTraceServiceRequest and hands it to the exporter.  What
 * the spans are called and carry is the caller's (libcore/agent/agent_trace.h
 * gives them Genkit's names).
 *
 * There is one recorder per process (trace_init()), so that the hooks that
 * record spans are single calls; every function is a no-op while tracing is
 * off, and every function taking a span accepts NULL.  Calls are serialised
 * by a mutex.  The recorder belongs to the process that called trace_init():
 * a forked child (a detached worker) exports nothing it inherited unless it
 * calls trace_adopt().
 *
 * Encoding: http/protobuf (the default) packs an ExportTraceServiceRequest
 * with protobuf-c's code generated from the vendored opentelemetry-proto
 * files (a message tree borrowing the spans' strings, freed at once);
 * http/json and the console write proto's JSON mapping: trace and span
 * IDs as lowercase hex, times as decimal strings of nanoseconds since the epoch,
 * kind and status code as integers, 64-bit integer attributes as decimal
 * strings ("intValue":"42"), flags with the W3C sampled bit and the
 * "is remote" bits (0x100, and 0x200 when the parent came from TRACEPARENT).
 * IDs are random (getrandom(2)), never all zero.
 *
 * Sampling (cfg.sampler) is decided once, at trace_init(), for the
 * process's trace: an unsampled one keeps span IDs (children's
 * TRACEPARENT says 00) and exports nothing.
 *
 * Export never slows or hurts the run.  The console exporter writes its
 * line at once (a local write); requests to a collector (OTLP) and to
 * Genkit's telemetry server are queued for one exporter thread, so a flush
 * costs a turn the encoding only, however slow the collector.  The queue
 * holds at most cfg.queue_max spans (OTEL_BSP_MAX_QUEUE_SIZE, 2048): more
 * are dropped and counted.  The process waits for the thread at most
 * cfg.wait_ms (AGENTKIT_TRACE_EXIT_TIMEOUT, 1s) in all: at trace_finish()
 * and at trace_quiesce() together; what is still queued or in flight then
 * is cancelled and counted, and trace_finish() reports the count.  A
 * failure is remembered (the first one, for trace_finish() to report) and
 * turns export there off for the rest of the process, so a collector that
 * is down costs one bounded POST, not one per turn.  Only HTTP 429, 502,
 * 503 and 504 are retried, within the timeout's budget (Retry-After
 * honoured within it).  The thread blocks every signal.  Nothing here
 * prints or exits.
 */
#ifndef CORE_TRACE_H
#define CORE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "buf.h"
#include "status.h"

enum trace_exporter { TRACE_OFF, TRACE_OTLP, TRACE_CONSOLE };
/* OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (the SDKs' default) or http/json. */
enum trace_protocol { TRACE_PROTOBUF, TRACE_JSON };
/* OTEL_TRACES_SAMPLER (sdk-environment-variables.md). */
enum trace_sampler {
	TRACE_PARENT_ALWAYS_ON, TRACE_ALWAYS_ON, TRACE_ALWAYS_OFF, TRACE_RATIO,
	TRACE_PARENT_ALWAYS_OFF, TRACE_PARENT_RATIO
};

/* SpanKind and Status.code as trace.proto numbers them. */
enum trace_kind { TRACE_INTERNAL = 1, TRACE_SERVER = 2, TRACE_CLIENT = 3 };
enum trace_code { TRACE_UNSET = 0, TRACE_STATUS_OK = 1, TRACE_STATUS_ERROR = 2 };

#define TRACE_HEADERS_MAX 32
#define TRACE_PARENT_LEN 55     /* "00-" 32 "-" 16 "-" 2 */

/*
 * What trace_config_from_env() settled.  Strings are owned (released by
 * trace_config_release()).
 */
struct trace_config {
	enum trace_exporter exporter;   /* TRACE_OFF: no OTLP or console export */
	char *url;                      /* otlp: the traces endpoint */
	enum trace_protocol protocol;   /* otlp: the body's encoding */
	int gzip;                       /* otlp: Content-Encoding: gzip */
	enum trace_sampler sampler;
	double ratio;                   /* TRACE_RATIO, TRACE_PARENT_RATIO: 0..1 */
	char *genkit_url;               /* GENKIT_TELEMETRY_SERVER + "/api/traces", or NULL */
	char *headers[TRACE_HEADERS_MAX + 1];   /* "Name: value", NULL-terminated */
	int64_t timeout_ms;             /* one export's budget */
	int64_t wait_ms;                /* the most the process waits for its exports */
	size_t queue_max;               /* spans waiting to be sent, at most */
	char *file;                     /* console: NULL is stderr */
	char *ca_file, *cert_file, *key_file;   /* TLS files, or NULL */
	json_t *resource;               /* OTLP KeyValue array */
	char parent[TRACE_PARENT_LEN + 1];  /* the inbound TRACEPARENT, or "" */
	char *tracestate;               /* the inbound TRACESTATE, or NULL */
	char note[300];                 /* a warning for people, or "" */
};

/*
 * Read the standard variables (docs/tracing.md): on when flag_on (--trace)
 * or AGENTKIT_TRACE is 1/true, or file is given (console to that file);
 * OTEL_SDK_DISABLED=true always wins, OTEL_TRACES_EXPORTER picks otlp
 * (default), console or none.  The otlp endpoint is
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, else OTEL_EXPORTER_OTLP_ENDPOINT
 * + "/v1/traces", else http://localhost:4318/v1/traces; headers from
 * OTEL_EXPORTER_OTLP_HEADERS then ..._TRACES_HEADERS (percent-decoded; the
 * second wins per name); timeout from ..._TRACES_TIMEOUT or ..._TIMEOUT
 * (ms, default 10000); TLS files from ..._CERTIFICATE, ..._CLIENT_CERTIFICATE,
 * ..._CLIENT_KEY.  OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL http/protobuf
 * (default) or http/json; grpc or anything else turns tracing off with a
 * note.  OTEL_EXPORTER_OTLP_(TRACES_)COMPRESSION gzip or none (default;
 * anything else: none, noted).  OTEL_TRACES_SAMPLER and _ARG: always_on,
 * always_off, traceidratio, parentbased_always_on (default),
 * parentbased_always_off, parentbased_traceidratio; an unknown one is
 * noted and parentbased_always_on used, as the SDKs do; a bad ratio is
 * noted and 1.0 used.  Resource: OTEL_RESOURCE_ATTRIBUTES, then service.name from
 * OTEL_SERVICE_NAME else the one there else default_service, service.version
 * = version.  GENKIT_TELEMETRY_SERVER (with tracing on) adds Genkit's
 * telemetry server as a second destination: each flush is also posted to
 * URL/api/traces in Genkit's trace format (go/core/tracing/store.go), even
 * with OTEL_TRACES_EXPORTER=none.  TRACEPARENT (validated; an invalid one is ignored with a note)
 * and TRACESTATE are read here (the parent-based samplers follow its
 * sampled flag; trace_init() decides).  Problems never fail: they leave a note
 * (c->note) and, where nothing sensible is left, tracing off.  Only
 * CORE_ENOMEM is returned.
 */
enum core_status trace_config_from_env(struct trace_config *c, int flag_on, const char *file,
                                       const char *default_service, const char *version);
void trace_config_release(struct trace_config *c);

/* The traces endpoint from the two variables' values (either may be NULL
 * or ""), as trace_config_from_env() builds it; writes at most n bytes. */
void trace_endpoint(const char *traces_endpoint, const char *base, char *out, size_t n);

/* Parse a W3C traceparent; 0 and the parts (lowercase hex) when valid
 * (version 00 or a later one, non-zero IDs), -1 otherwise. */
int trace_parse_parent(const char *v, char trace_id[33], char span_id[17], unsigned *flags);

/* Whether c records anything (an exporter or the Genkit server). */
int trace_config_on(const struct trace_config *c);

/*
 * Install the process's recorder with config c (taken over: c is left
 * released).  A config that exports nowhere installs nothing.  Spans started before
 * trace_init() are not recorded.  CORE_ENOMEM.
 */
enum core_status trace_init(struct trace_config *c);
int trace_on(void);             /* whether spans are recorded */
/* Whether this process's trace is sampled: its spans are exported.  An
 * unsampled trace still has span IDs, so that children's TRACEPARENT
 * carries the decision (flags 00); its spans are dropped at flush. */
int trace_sampled(void);

struct trace_span;

/*
 * Start a span: a child of parent, or of the inbound TRACEPARENT when
 * parent is NULL (a new trace without one).  start_ns 0 is now.  Returns
 * NULL when tracing is off or without memory.  The span is the recorder's;
 * the caller's pointer is valid until trace_end().
 */
struct trace_span *trace_start(const struct trace_span *parent, const char *name,
                               enum trace_kind kind, int64_t start_ns);
/*
 * Start a span in a trace of its own, not the process's: a child of the
 * remote span traceparent names (a W3C traceparent, its tracestate
 * kept for the trace), or, without a valid one, the root of a new trace.
 * The sampler decides for that trace as trace_init() does for the
 * process's (a parent-based one follows traceparent's flag).  Spans
 * started under it belong to its trace; trace_traceparent() gives it for
 * a child process.  A server's span per request.  NULL as trace_start().
 */
struct trace_span *trace_start_remote(const char *traceparent, const char *tracestate,
                                      const char *name, enum trace_kind kind,
                                      int64_t start_ns);
/* Give s another name (before trace_end()). */
void trace_rename(struct trace_span *s, const char *name);
/* Typed attributes; a key set again replaces its value.  Strings (keys,
 * values, span names, messages) are kept valid UTF-8: a byte that is not
 * becomes U+FFFD, so a request is always valid JSON. */
void trace_attr_str(struct trace_span *s, const char *key, const char *v);
void trace_attr_int(struct trace_span *s, const char *key, int64_t v);
void trace_attr_bool(struct trace_span *s, const char *key, int v);
/* A string array (the JSON strings of arr; others skipped). */
void trace_attr_strs(struct trace_span *s, const char *key, const json_t *arr);
/* An event at now: name and NULL-terminated key, value string pairs
 * (attrs may be NULL); "exception" with exception.type and
 * exception.message is the one for a failure (semconv exceptions). */
void trace_event(struct trace_span *s, const char *name, const char *const *attrs);
/* End the span now with this status (msg may be NULL; kept for ERROR). */
void trace_end(struct trace_span *s, enum trace_code code, const char *msg);
/* The same at end_ns (CLOCK_REALTIME ns, as start_ns; 0: now): a span
 * recorded after the fact (an MCP server's start-up, before tracing). */
void trace_end_at(struct trace_span *s, enum trace_code code, const char *msg, int64_t end_ns);

/* "00-<trace>-<span>-FLAGS" of s (01 sampled, 00 not) (NULL: the inbound parent) into out; 0 when
 * there is one, -1 when tracing is off or there is none. */
int trace_traceparent(const struct trace_span *s, char out[TRACE_PARENT_LEN + 1]);
/* The inbound TRACESTATE (borrowed), or NULL. */
const char *trace_tracestate(void);
/* The trace ID (32 hex, borrowed), or NULL when tracing is off or the
 * trace is not sampled (nobody will find it). */
const char *trace_id(void);

/*
 * Export the ended spans as one request per destination: written at once
 * to the console, queued for the exporter thread for a URL (whose outcome
 * trace_finish() reports).  CORE_OK when there was nothing to write or it
 * was written or queued; otherwise the console's failure or CORE_ENOMEM
 * (also remembered for trace_finish(); export there is off from then on).
 */
enum core_status trace_flush(struct core_err *e);

/*
 * The process's end: flush, wait for the exporter thread within what is
 * left of cfg.wait_ms, cancel what it has not sent, free the recorder.
 * Reports in e the first export failure of the process, "trace export
 * failed: URL: why", else, when spans were dropped, CORE_EDEADLINE "trace:
 * N spans dropped: the collector at URL did not answer within 1s" (or
 * CORE_EEXHAUSTED "... fell behind (2048 spans waiting)" when only the
 * queue's bound dropped them); the URL without credentials.  *dropped
 * (dropped may be NULL) is the count: the most spans one destination
 * never got.  CORE_OK when all was sent.  Safe when tracing is off.
 */
enum core_status trace_finish(size_t *dropped, struct core_err *e);

/*
 * Before a fork() whose child carries on the work (a detached worker):
 * wait for the exporter thread within what is left of cfg.wait_ms, cancel
 * what it has not sent (counted, as at trace_finish()), and end it, so no
 * request is in flight inside libcurl (its locks, and OpenSSL's, held by a
 * thread the child does not have) when the process forks.  The next flush
 * starts the thread again.  A fork that only execs needs none of this.
 */
void trace_quiesce(void);

/*
 * In a forked child that carries on the parent's work (a detached worker):
 * the recorder becomes this process's, the spans the parent still had are
 * dropped (the parent ends and exports them), and a span started with no
 * parent becomes a child of parent (the parent's span, flagged remote: it
 * lives in another process).  parent NULL: the inbound parent stays.
 * The child has no exporter thread (the next flush starts one), nothing
 * queued, and a wait bound of its own.
 */
void trace_adopt(const struct trace_span *parent);

/* The request trace_flush() would send for the ended spans, without
 * sending or dropping them (tests); NULL when off.  genkit: in Genkit's
 * telemetry-server format instead of OTLP's. */
json_t *trace_request_peek(int genkit);
/* The same request as the OTLP exporter encodes it, appended to b without
 * sending or dropping the spans (the benchmark): protobuf's bytes, else
 * JSON's text; *n the spans in it.  CORE_ENOMEM. */
enum core_status trace_request_encode(int protobuf, struct core_buf *b, size_t *n);

#endif
