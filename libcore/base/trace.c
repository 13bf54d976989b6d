/*
 * trace.c - the span recorder, its OTLP/JSON encoding and its exporters
 * (trace_env.c reads their configuration from the OTEL_* variables).
 *
 * One recorder per process, behind a mutex: the hooks that feed it sit in
 * the turn loop, the tool runner and the model call, and each must stay a
 * single call, so nothing carries a recorder handle around.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "buf.h"
#include "http.h"
#include "json.h"
#include "trace.h"
#include "trace_int.h"
#include "util.h"

/* The most an export reply is read: the collector's answer is a small
 * ExportTraceServiceResponse, kept only for a message. */
#define REPLY_MAX 4096

struct trace_span {
	char span_id[17];
	char parent_id[17];     /* "" for a root */
	int remote_parent;      /* the parent is the inbound TRACEPARENT */
	char *name;
	enum trace_kind kind;
	int64_t start_ns, end_ns;
	json_t *attrs;          /* OTLP KeyValue array */
	enum trace_code code;
	char *msg;
	int ended;
	struct trace_span *next;
};

struct tracer {
	struct trace_config cfg;
	char trace_id[33];
	char remote_span[17];   /* the inbound parent span, or "" */
	unsigned flags;         /* W3C trace flags */
	pid_t owner;
	struct trace_span *spans;       /* newest first */
	int failed;             /* the export failed: it is off */
	int genkit_failed;      /* the post to the Genkit server failed: it is off */
	struct core_err first;  /* the first failure */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct tracer *T;

/* Set key in an OTLP KeyValue array (replacing), consuming kv. */
void trace_kv_set(json_t *arr, json_t *kv)
{
	const char *k = json_string_value(json_object_get(kv, "key"));
	size_t i;
	json_t *e;
	if (!kv)
		return;
	json_array_foreach(arr, i, e) {
		if (!strcmp(json_string_value(json_object_get(e, "key")), k)) {
			json_array_set_new(arr, i, kv);
			return;
		}
	}
	json_array_append_new(arr, kv);
}

/* ---- IDs ---- */

/* n random bytes as 2n lowercase hex digits, never all zero. */
static void random_hex(char *out, size_t n)
{
	unsigned char b[16];
	static const char hx[] = "0123456789abcdef";
	int zero = 1;
	while (zero) {
		size_t got = 0;
		while (got < n) {
			ssize_t r = getrandom(b + got, n - got, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				/* No entropy source: the clock and the pid, still
				 * unique enough to keep spans apart. */
				uint64_t x = (uint64_t)core_now_ns() ^ ((uint64_t)getpid() << 32);
				for (; got < n; got++, x = x * 6364136223846793005ULL + 1442695040888963407ULL)
					b[got] = (unsigned char)(x >> 56);
				break;
			}
			got += (size_t)r;
		}
		for (size_t i = 0; i < n; i++)
			zero &= !b[i];
	}
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[b[i] >> 4];
		out[2 * i + 1] = hx[b[i] & 15];
	}
	out[2 * n] = 0;
}

/* ---- the recorder ---- */

enum core_status trace_init(struct trace_config *c)
{
	if (!trace_config_on(c)) {
		trace_config_release(c);
		return CORE_OK;
	}
	struct tracer *t = calloc(1, sizeof *t);
	if (!t) {
		trace_config_release(c);
		return CORE_ENOMEM;
	}
	t->cfg = *c;
	memset(c, 0, sizeof *c);
	t->owner = getpid();
	t->flags = 1;
	if (t->cfg.parent[0])
		trace_parse_parent(t->cfg.parent, t->trace_id, t->remote_span, &t->flags);
	else
		random_hex(t->trace_id, 16);
	pthread_mutex_lock(&mu);
	T = t;
	pthread_mutex_unlock(&mu);
	return CORE_OK;
}

/* Under the mutex: the recorder, when this process records. */
static struct tracer *mine(void)
{
	return T && T->owner == getpid() ? T : NULL;
}

int trace_on(void)
{
	pthread_mutex_lock(&mu);
	int on = mine() != NULL;
	pthread_mutex_unlock(&mu);
	return on;
}

struct trace_span *trace_start(const struct trace_span *parent, const char *name,
                               enum trace_kind kind, int64_t start_ns)
{
	pthread_mutex_lock(&mu);
	struct tracer *t = mine();
	struct trace_span *s = t ? calloc(1, sizeof *s) : NULL;
	if (s && (!(s->name = strdup(name)) || !(s->attrs = json_array()))) {
		free(s->name);
		free(s);
		s = NULL;
	}
	if (s) {
		random_hex(s->span_id, 8);
		if (parent) {
			memcpy(s->parent_id, parent->span_id, sizeof s->parent_id);
		} else if (t->remote_span[0]) {
			memcpy(s->parent_id, t->remote_span, sizeof s->parent_id);
			s->remote_parent = 1;
		}
		s->kind = kind;
		s->start_ns = start_ns ? start_ns : core_now_ns();
		s->next = t->spans;
		t->spans = s;
	}
	pthread_mutex_unlock(&mu);
	return s;
}

void trace_rename(struct trace_span *s, const char *name)
{
	char *n = s ? strdup(name) : NULL;
	if (!n)
		return;
	pthread_mutex_lock(&mu);
	free(s->name);
	s->name = n;
	pthread_mutex_unlock(&mu);
}

static void attr(struct trace_span *s, const char *key, json_t *value)
{
	if (!s || !value) {
		json_decref(value);
		return;
	}
	pthread_mutex_lock(&mu);
	trace_kv_set(s->attrs, json_pack("{s:s, s:o}", "key", key, "value", value));
	pthread_mutex_unlock(&mu);
}

void trace_attr_str(struct trace_span *s, const char *key, const char *v)
{
	if (s && v)
		attr(s, key, json_pack("{s:s}", "stringValue", v));
}

void trace_attr_int(struct trace_span *s, const char *key, int64_t v)
{
	char num[24];
	snprintf(num, sizeof num, "%lld", (long long)v);
	if (s)
		attr(s, key, json_pack("{s:s}", "intValue", num));
}

void trace_attr_bool(struct trace_span *s, const char *key, int v)
{
	if (s)
		attr(s, key, json_pack("{s:b}", "boolValue", v));
}

void trace_attr_strs(struct trace_span *s, const char *key, const json_t *arr)
{
	if (!s)
		return;
	json_t *vals = json_array();
	size_t i;
	json_t *e;
	json_array_foreach(arr, i, e)
		if (json_is_string(e))
			json_array_append_new(vals, json_pack("{s:O}", "stringValue", e));
	attr(s, key, json_pack("{s:{s:o}}", "arrayValue", "values", vals));
}

void trace_end(struct trace_span *s, enum trace_code code, const char *msg)
{
	if (!s)
		return;
	pthread_mutex_lock(&mu);
	s->end_ns = core_now_ns();
	s->code = code;
	if (msg && code == TRACE_STATUS_ERROR)
		s->msg = strdup(msg);
	s->ended = 1;
	pthread_mutex_unlock(&mu);
}

int trace_traceparent(const struct trace_span *s, char out[TRACE_PARENT_LEN + 1])
{
	pthread_mutex_lock(&mu);
	struct tracer *t = mine();
	int r = -1;
	const char *sid = s ? s->span_id : t ? t->remote_span : "";
	if (t && *sid) {
		snprintf(out, TRACE_PARENT_LEN + 1, "00-%s-%s-%02x", t->trace_id, sid, t->flags & 0xff);
		r = 0;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

const char *trace_tracestate(void)
{
	pthread_mutex_lock(&mu);
	const char *v = mine() ? T->cfg.tracestate : NULL;
	pthread_mutex_unlock(&mu);
	return v;
}

const char *trace_id(void)
{
	pthread_mutex_lock(&mu);
	const char *v = mine() ? T->trace_id : NULL;
	pthread_mutex_unlock(&mu);
	return v;
}

/* ---- encoding ---- */

static json_t *nanos(int64_t ns)
{
	char num[24];
	snprintf(num, sizeof num, "%lld", (long long)ns);
	return json_string(num);
}

static json_t *span_json(const struct tracer *t, const struct trace_span *s)
{
	json_t *o = json_object(), *st = json_object();
	if (!o || !st) {
		json_decref(o);
		json_decref(st);
		return NULL;
	}
	json_object_set_new(o, "traceId", json_string(t->trace_id));
	json_object_set_new(o, "spanId", json_string(s->span_id));
	if (s->parent_id[0])
		json_object_set_new(o, "parentSpanId", json_string(s->parent_id));
	if (t->cfg.tracestate)
		json_object_set_new(o, "traceState", json_string(t->cfg.tracestate));
	/* W3C flags, and "is remote" known (0x100), set (0x200) when the
	 * parent came from TRACEPARENT. */
	json_object_set_new(o, "flags", json_integer((t->flags & 0xff) | 0x100 |
	                                             (s->remote_parent ? 0x200 : 0)));
	json_object_set_new(o, "name", json_string(s->name));
	json_object_set_new(o, "kind", json_integer(s->kind));
	json_object_set_new(o, "startTimeUnixNano", nanos(s->start_ns));
	json_object_set_new(o, "endTimeUnixNano", nanos(s->end_ns));
	json_object_set(o, "attributes", s->attrs);
	json_object_set_new(o, "droppedAttributesCount", json_integer(0));
	json_object_set_new(o, "events", json_array());
	json_object_set_new(o, "droppedEventsCount", json_integer(0));
	json_object_set_new(o, "links", json_array());
	json_object_set_new(o, "droppedLinksCount", json_integer(0));
	json_object_set_new(st, "code", json_integer(s->code));
	if (s->msg)
		json_object_set_new(st, "message", json_string(s->msg));
	json_object_set_new(o, "status", st);
	return o;
}

/* The request for the ended spans, oldest first; NULL without memory or
 * when none has ended (*n says how many went in). */
static json_t *request(const struct tracer *t, size_t *n)
{
	json_t *spans = json_array();
	*n = 0;
	if (!spans)
		return NULL;
	for (const struct trace_span *s = t->spans; s; s = s->next) {
		if (!s->ended)
			continue;
		json_t *j = span_json(t, s);
		if (!j || json_array_insert_new(spans, 0, j)) {
			json_decref(spans);
			return NULL;
		}
		(*n)++;
	}
	if (!*n) {
		json_decref(spans);
		return NULL;
	}
	return json_pack("{s:[{s:{s:O}, s:[{s:{s:s, s:s}, s:o}]}]}",
	                 "resourceSpans", "resource", "attributes", t->cfg.resource,
	                 "scopeSpans", "scope", "name", "agentkit", "version", AGENTKIT_VERSION,
	                 "spans", spans);
}

/* ---- Genkit's telemetry-server format (go/core/tracing/store.go) ---- */

/* An OTLP AnyValue as the plain JSON value Genkit's attributes hold. */
static json_t *plain(const json_t *any)
{
	const json_t *v;
	if ((v = json_object_get(any, "stringValue")))
		return json_copy((json_t *)v);
	if ((v = json_object_get(any, "boolValue")))
		return json_copy((json_t *)v);
	if ((v = json_object_get(any, "intValue")))
		return json_integer(strtoll(json_string_value(v), NULL, 10));
	json_t *arr = json_array(), *e;
	size_t i;
	json_array_foreach(json_object_get(json_object_get(any, "arrayValue"), "values"), i, e)
		json_array_append_new(arr, plain(e));
	return arr;
}

static json_t *genkit_span(const struct tracer *t, const struct trace_span *s)
{
	static const char *const kinds[] = { "UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT" };
	json_t *attrs = json_object(), *kv;
	size_t i;
	json_array_foreach(s->attrs, i, kv)
		json_object_set_new(attrs, json_string_value(json_object_get(kv, "key")),
		                    plain(json_object_get(kv, "value")));
	json_t *o = json_pack("{s:s, s:s, s:f, s:f, s:o, s:s, s:s, s:{s:s, s:s}, s:{s:b}, "
	                      "s:{s:i}, s:{s:[]}}",
	                      "spanId", s->span_id, "traceId", t->trace_id,
	                      "startTime", s->start_ns / 1e6, "endTime", s->end_ns / 1e6,
	                      "attributes", attrs, "displayName", s->name,
	                      "spanKind", kinds[s->kind <= TRACE_CLIENT ? s->kind : 0],
	                      "instrumentationLibrary", "name", "agentkit",
	                      "version", AGENTKIT_VERSION,
	                      "sameProcessAsParentSpan", "value", !s->remote_parent,
	                      "status", "code", (int)s->code,
	                      "timeEvents", "timeEvent");
	if (o && s->parent_id[0])
		json_object_set_new(o, "parentSpanId", json_string(s->parent_id));
	if (o && s->msg)
		json_object_set_new(json_object_get(o, "status"), "message", json_string(s->msg));
	return o;
}

/* The ended spans as one Genkit TraceData; the trace's name and times
 * come from its root span (no parent in this process) when it is among
 * them, as Genkit's exporter sets them. */
static json_t *genkit_request(const struct tracer *t)
{
	json_t *spans = json_object(), *o;
	int any = 0;
	if (!spans || !(o = json_pack("{s:s}", "traceId", t->trace_id))) {
		json_decref(spans);
		return NULL;
	}
	for (const struct trace_span *s = t->spans; s; s = s->next) {
		if (!s->ended)
			continue;
		json_object_set_new(spans, s->span_id, genkit_span(t, s));
		any = 1;
		if (!s->parent_id[0] || s->remote_parent) {
			json_object_set_new(o, "displayName", json_string(s->name));
			json_object_set_new(o, "startTime", json_real(s->start_ns / 1e6));
			json_object_set_new(o, "endTime", json_real(s->end_ns / 1e6));
		}
	}
	json_object_set_new(o, "spans", spans);
	if (!any) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *trace_request_peek(int genkit)
{
	size_t n;
	pthread_mutex_lock(&mu);
	json_t *r = !mine() ? NULL : genkit ? genkit_request(T) : request(T, &n);
	pthread_mutex_unlock(&mu);
	return r;
}

static void drop_ended(struct tracer *t, int all)
{
	struct trace_span **pp = &t->spans;
	while (*pp) {
		struct trace_span *s = *pp;
		if (all || s->ended) {
			*pp = s->next;
			free(s->name);
			free(s->msg);
			json_decref(s->attrs);
			free(s);
		} else {
			pp = &s->next;
		}
	}
}

/* ---- exporters ---- */

struct reply {
	struct core_buf body;
};

static enum core_status on_body(void *ctx, const char *p, size_t n, struct core_err *e)
{
	struct reply *r = ctx;
	/* Only the head is kept: the answer is for a message at most. */
	if (r->body.len + n < REPLY_MAX)
		core_buf_add(&r->body, p, n);
	return CORE_OK;
}

static enum core_status on_error(void *ctx, struct http_error *he, struct core_err *e)
{
	/* exporter.md: only 429, 502, 503 and 504 are retryable; a 400 or
	 * any other answer is final. */
	he->retryable = he->status == 429 || he->status == 502 || he->status == 503 ||
	                he->status == 504;
	char head[160];
	size_t n = he->body_len < sizeof head - 1 ? he->body_len : sizeof head - 1;
	memcpy(head, he->body, n);
	head[n] = 0;
	for (char *p = head; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return core_fail(e, he->status == 429 ? CORE_EEXHAUSTED : CORE_EUNAVAILABLE,
	                 "HTTP %ld%s%s", he->status, *head ? ": " : "", head);
}

/* POST body to url; the OTLP headers and TLS files only go to the OTLP
 * endpoint (otlp), never to the Genkit server. */
static enum core_status post(struct tracer *t, const char *url, int otlp,
                             const struct core_buf *body, struct core_err *e)
{
	const char *hdrs[TRACE_HEADERS_MAX + 2];
	size_t k = 0;
	hdrs[k++] = "Content-Type: application/json";
	for (int i = 0; otlp && t->cfg.headers[i]; i++)
		hdrs[k++] = t->cfg.headers[i];
	hdrs[k] = NULL;
	struct reply r = { CORE_BUF_INIT(REPLY_MAX) };
	struct http_call c = {
		.url = url, .headers = hdrs, .body = body->p, .body_len = body->len,
		.what = "trace export",
		.limits = { .connect_ms = t->cfg.timeout_ms, .idle_ms = t->cfg.timeout_ms,
		            .retries = 3, .budget_ms = t->cfg.timeout_ms, .backoff_ms = 200 },
		.on_body = on_body, .on_error = on_error, .ctx = &r,
		.retry_status_only = 1,
		.ca_file = otlp ? t->cfg.ca_file : NULL, .cert_file = otlp ? t->cfg.cert_file : NULL,
		.key_file = otlp ? t->cfg.key_file : NULL,
	};
	enum core_status st = http_post(&c, NULL, e);
	core_buf_release(&r.body);
	return st;
}

static enum core_status write_line(struct tracer *t, struct core_buf *body, struct core_err *e)
{
	int fd = 2, own = 0;
	if (t->cfg.file) {
		if ((fd = open(t->cfg.file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0)
			return core_fail_sys(e, "'%s'", t->cfg.file);
		own = 1;
	}
	enum core_status st = core_buf_addc(body, '\n');
	/* One write: lines of concurrent runs appending to one file stay
	 * whole (O_APPEND). */
	for (size_t off = 0; !st && off < body->len;) {
		ssize_t w = write(fd, body->p + off, body->len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			st = core_fail_sys(e, "%s", t->cfg.file ? t->cfg.file : "stderr");
		else
			off += (size_t)w;
	}
	if (own && close(fd) && !st)
		st = core_fail_sys(e, "'%s'", t->cfg.file);
	return st;
}

/* A destination failed: export there stops, the first failure is kept
 * for trace_finish(), and e says it. */
static void failed(struct tracer *t, const char *url, enum core_status st, int *flag,
                   struct core_err *e)
{
	char where[512];
	if (url)
		core_url_redact(url, where, sizeof where);
	else
		snprintf(where, sizeof where, "console");
	/* http_post() names itself and the URL already: say it once. */
	const char *why = e->msg;
	size_t wl = strlen(where);
	if (!strncmp(why, "trace export: ", 14))
		why += 14;
	if (!strncmp(why, where, wl) && !strncmp(why + wl, ": ", 2))
		why += wl + 2;
	*flag = 1;
	struct core_err fe = { 0 };
	core_fail(&fe, st, "trace export failed: %s: %s", where, why);
	if (!t->first.st)
		t->first = fe;
	*e = fe;
}

/* Encode and send one request to one destination. */
static enum core_status send_to(struct tracer *t, json_t *req, const char *url, int otlp,
                                struct core_err *e)
{
	struct core_buf body = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = jv_dump(req, &body);
	if (st)
		core_fail(e, st, "out of memory");
	else if (url)
		st = post(t, url, otlp, &body, e);
	else
		st = write_line(t, &body, e);
	core_buf_release(&body);
	return st;
}

enum core_status trace_flush(struct core_err *e)
{
	enum core_status st = CORE_OK, gst = CORE_OK;
	pthread_mutex_lock(&mu);
	struct tracer *t = mine();
	size_t n = 0;
	int primary = t && t->cfg.exporter != TRACE_OFF && !t->failed;
	int genkit = t && t->cfg.genkit_url && !t->genkit_failed;
	json_t *req = primary ? request(t, &n) : NULL;
	json_t *greq = genkit ? genkit_request(t) : NULL;
	if (t)
		drop_ended(t, 0);
	const char *url = t && t->cfg.exporter == TRACE_OTLP ? t->cfg.url : NULL;
	if (req && (st = send_to(t, req, url, 1, e)))
		failed(t, url, st, &t->failed, e);
	struct core_err ge = { 0 };
	if (greq && (gst = send_to(t, greq, t->cfg.genkit_url, 0, &ge))) {
		failed(t, t->cfg.genkit_url, gst, &t->genkit_failed, &ge);
		if (!st)
			*e = ge;
	}
	json_decref(req);
	json_decref(greq);
	pthread_mutex_unlock(&mu);
	return st ? st : gst;
}

enum core_status trace_finish(struct core_err *e)
{
	struct core_err fe = { 0 };
	trace_flush(&fe);
	pthread_mutex_lock(&mu);
	struct tracer *t = mine();
	enum core_status st = CORE_OK;
	if (t) {
		if (t->first.st) {
			*e = t->first;
			st = t->first.st;
		}
		drop_ended(t, 1);
		trace_config_release(&t->cfg);
		free(t);
		T = NULL;
	}
	pthread_mutex_unlock(&mu);
	return st;
}

void trace_adopt(const struct trace_span *parent)
{
	pthread_mutex_lock(&mu);
	if (T && T->owner != getpid()) {
		T->owner = getpid();
		if (parent)
			memcpy(T->remote_span, parent->span_id, sizeof T->remote_span);
		drop_ended(T, 1);       /* parent is among them: copied first */
		/* The child reports to its own stderr (a worker's log): the
		 * parent's failures are the parent's to report. */
		T->failed = T->genkit_failed = 0;
		memset(&T->first, 0, sizeof T->first);
	}
	pthread_mutex_unlock(&mu);
}
