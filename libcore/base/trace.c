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
#include "utf8.h"
#include "util.h"

/* The most an export reply is read: the collector's answer is a small
 * ExportTraceServiceResponse, kept only for a message. */
#define REPLY_MAX 4096

/*
 * A span's attributes are kept as C values and the request is written as
 * text straight from them: a jansson tree per attribute (three objects
 * and a hash table each) made tracing cost more than the echo turn it
 * traced.  Strings are stored valid UTF-8 (an invalid byte becomes
 * U+FFFD), so every request is valid JSON.
 */
enum attr_type { ATTR_STR, ATTR_INT, ATTR_BOOL, ATTR_STRS };

struct attr {
	struct attr *next;
	enum attr_type type;
	int64_t i;              /* ATTR_INT, ATTR_BOOL */
	char *s;                /* ATTR_STR: the value, in this allocation */
	json_t *strs;           /* ATTR_STRS: an array of JSON strings (owned) */
	char key[];
};

struct trace_span {
	char span_id[17];
	char parent_id[17];     /* "" for a root */
	int remote_parent;      /* the parent is the inbound TRACEPARENT */
	char *name;
	enum trace_kind kind;
	int64_t start_ns, end_ns;
	struct attr *attrs;     /* in the order first set */
	enum trace_code code;
	char *msg;
	int ended;
	struct trace_span *next;
};

struct tracer {
	struct trace_config cfg;
	char *resource;         /* cfg.resource as JSON text */
	char trace_id[33];
	char remote_span[17];   /* the inbound parent span, or "" */
	unsigned flags;         /* W3C trace flags */
	pid_t owner;
	struct trace_span *spans;       /* oldest first */
	struct trace_span **tail;       /* where the next span is linked */
	int failed;             /* the export failed: it is off */
	int genkit_failed;      /* the post to the Genkit server failed: it is off */
	struct core_err first;  /* the first failure */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct tracer *T;

/* ---- the process ---- */

/*
 * The recorder checks on every hook that it is in the process that owns
 * it, and every span needs random bytes: getpid() and getrandom() are
 * system calls each time, so the pid is kept and random bytes are drawn
 * a pool at a time.  A fork() clears both (forked()): a detached worker
 * must neither pass for its launcher nor reuse its launcher's bytes,
 * which would repeat its span IDs.  Both are used under the mutex, or
 * before the recorder is installed.
 */
static pid_t self;
static unsigned char pool[64];
static size_t pool_left;

static void forked(void)
{
	self = 0;
	pool_left = 0;
}

static void at_fork(void)
{
	pthread_atfork(NULL, NULL, forked);
}

static pid_t self_pid(void)
{
	if (!self)
		self = getpid();
	return self;
}

/* n (<= sizeof pool) random bytes into b. */
static void random_bytes(unsigned char *b, size_t n)
{
	if (pool_left < n) {
		size_t got = 0;
		while (got < sizeof pool) {
			ssize_t r = getrandom(pool + got, sizeof pool - got, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				/* No entropy source: the clock and the pid, still
				 * unique enough to keep spans apart. */
				uint64_t x = (uint64_t)core_now_ns() ^ ((uint64_t)getpid() << 32);
				for (; got < sizeof pool;
				     got++, x = x * 6364136223846793005ULL + 1442695040888963407ULL)
					pool[got] = (unsigned char)(x >> 56);
				break;
			}
			got += (size_t)r;
		}
		pool_left = sizeof pool;
	}
	memcpy(b, pool + sizeof pool - pool_left, n);
	pool_left -= n;
}

/* n random bytes as 2n lowercase hex digits, never all zero. */
static void random_hex(char *out, size_t n)
{
	unsigned char b[16];
	static const char hx[] = "0123456789abcdef";
	int zero = 1;
	while (zero) {
		random_bytes(b, n);
		for (size_t i = 0; i < n; i++)
			zero &= !b[i];
	}
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[b[i] >> 4];
		out[2 * i + 1] = hx[b[i] & 15];
	}
	out[2 * n] = 0;
}

/* ---- strings ---- */

/* ---- the recorder ---- */

enum core_status trace_init(struct trace_config *c)
{
	if (!trace_config_on(c)) {
		trace_config_release(c);
		return CORE_OK;
	}
	struct tracer *t = calloc(1, sizeof *t);
	struct core_buf res = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (!t || jv_dump(c->resource, &res) || core_buf_addc(&res, 0)) {
		core_buf_release(&res);
		free(t);
		trace_config_release(c);
		return CORE_ENOMEM;
	}
	t->cfg = *c;
	memset(c, 0, sizeof *c);
	t->resource = res.p;
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, at_fork);
	t->owner = self_pid();
	t->flags = 1;
	t->tail = &t->spans;
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
	return T && T->owner == self_pid() ? T : NULL;
}

int trace_on(void)
{
	pthread_mutex_lock(&mu);
	int on = mine() != NULL;
	pthread_mutex_unlock(&mu);
	return on;
}

static void free_attrs(struct attr *a)
{
	while (a) {
		struct attr *next = a->next;
		json_decref(a->strs);
		free(a);
		a = next;
	}
}

static void free_span(struct trace_span *s)
{
	free(s->name);
	free(s->msg);
	free_attrs(s->attrs);
	free(s);
}

struct trace_span *trace_start(const struct trace_span *parent, const char *name,
                               enum trace_kind kind, int64_t start_ns)
{
	pthread_mutex_lock(&mu);
	struct tracer *t = mine();
	struct trace_span *s = t ? calloc(1, sizeof *s) : NULL;
	if (s && !(s->name = utf8_dup(name, strlen(name)))) {
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
		*t->tail = s;
		t->tail = &s->next;
	}
	pthread_mutex_unlock(&mu);
	return s;
}

void trace_rename(struct trace_span *s, const char *name)
{
	char *n = s ? utf8_dup(name, strlen(name)) : NULL;
	if (!n)
		return;
	pthread_mutex_lock(&mu);
	free(s->name);
	s->name = n;
	pthread_mutex_unlock(&mu);
}

/* A new attribute with room for a string value of vlen bytes. */
static struct attr *attr_new(const char *key, enum attr_type type, size_t vlen)
{
	size_t klen = utf8_fixed_len(key, strlen(key));
	struct attr *a = malloc(sizeof *a + klen + 1 + vlen);
	if (!a)
		return NULL;
	a->next = NULL;
	a->type = type;
	a->i = 0;
	a->s = vlen ? a->key + klen + 1 : NULL;
	a->strs = NULL;
	utf8_fix_copy(a->key, key, strlen(key));
	return a;
}

/* Give s attribute a (taken over), in place of one with its key. */
static void attr_set(struct trace_span *s, struct attr *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&mu);
	struct attr **pp = &s->attrs;
	while (*pp && strcmp((*pp)->key, a->key))
		pp = &(*pp)->next;
	if (*pp) {
		a->next = (*pp)->next;
		(*pp)->next = NULL;
		free_attrs(*pp);
	}
	*pp = a;
	pthread_mutex_unlock(&mu);
}

void trace_attr_str(struct trace_span *s, const char *key, const char *v)
{
	if (!s || !v)
		return;
	size_t n = strlen(v), len = utf8_fixed_len(v, n);
	struct attr *a = attr_new(key, ATTR_STR, len + 1);
	if (a)
		utf8_fix_copy(a->s, v, n);
	attr_set(s, a);
}

void trace_attr_int(struct trace_span *s, const char *key, int64_t v)
{
	struct attr *a = s ? attr_new(key, ATTR_INT, 0) : NULL;
	if (a)
		a->i = v;
	attr_set(s, a);
}

void trace_attr_bool(struct trace_span *s, const char *key, int v)
{
	struct attr *a = s ? attr_new(key, ATTR_BOOL, 0) : NULL;
	if (a)
		a->i = !!v;
	attr_set(s, a);
}

void trace_attr_strs(struct trace_span *s, const char *key, const json_t *arr)
{
	struct attr *a = s ? attr_new(key, ATTR_STRS, 0) : NULL;
	size_t i;
	json_t *e;
	if (a && !(a->strs = json_array())) {
		free(a);
		return;
	}
	json_array_foreach(arr, i, e)
		if (a && json_is_string(e))
			json_array_append(a->strs, e);
	attr_set(s, a);
}

void trace_end(struct trace_span *s, enum trace_code code, const char *msg)
{
	if (!s)
		return;
	pthread_mutex_lock(&mu);
	s->end_ns = core_now_ns();
	s->code = code;
	if (msg && code == TRACE_STATUS_ERROR)
		s->msg = utf8_dup(msg, strlen(msg));
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

/* ---- encoding (OTLP's JSON mapping) ---- */

/* An encoder: text appended to b; the first failure sticks in st. */
struct enc {
	struct core_buf *b;
	enum core_status st;
};

static void put_n(struct enc *w, const char *p, size_t n)
{
	if (!w->st)
		w->st = core_buf_add(w->b, p, n);
}

/* A string literal, its length known at compile time. */
#define put(w, lit) put_n(w, "" lit, sizeof lit - 1)

static void put_str(struct enc *w, const char *s)
{
	if (!w->st)
		w->st = jv_dump_string(s, strlen(s), w->b);
}

static void put_int(struct enc *w, int64_t i)
{
	if (!w->st)
		w->st = jv_dump_int(i, w->b);
}

/* A 64-bit integer as OTLP writes it: a decimal string. */
static void put_int_str(struct enc *w, int64_t i)
{
	put(w, "\"");
	put_int(w, i);
	put(w, "\"");
}

static void put_any(struct enc *w, const struct attr *a)
{
	size_t i;
	json_t *e;
	switch (a->type) {
	case ATTR_STR:
		put(w, "{\"stringValue\":");
		put_str(w, a->s);
		break;
	case ATTR_INT:
		put(w, "{\"intValue\":");
		put_int_str(w, a->i);
		break;
	case ATTR_BOOL:
		if (a->i)
			put(w, "{\"boolValue\":true");
		else
			put(w, "{\"boolValue\":false");
		break;
	case ATTR_STRS:
		put(w, "{\"arrayValue\":{\"values\":[");
		json_array_foreach(a->strs, i, e) {
			if (i)
				put(w, ",");
			put(w, "{\"stringValue\":");
			if (!w->st)
				w->st = jv_dump(e, w->b);
			put(w, "}");
		}
		put(w, "]}");
		break;
	}
	put(w, "}");
}

static void put_span(struct enc *w, const struct tracer *t, const struct trace_span *s)
{
	put(w, "{\"traceId\":\"");
	put_n(w, t->trace_id, 32);
	put(w, "\",\"spanId\":\"");
	put_n(w, s->span_id, 16);
	if (s->parent_id[0]) {
		put(w, "\",\"parentSpanId\":\"");
		put_n(w, s->parent_id, 16);
	}
	put(w, "\"");
	if (t->cfg.tracestate) {
		put(w, ",\"traceState\":");
		put_str(w, t->cfg.tracestate);
	}
	/* W3C flags, and "is remote" known (0x100), set (0x200) when the
	 * parent came from TRACEPARENT. */
	put(w, ",\"flags\":");
	put_int(w, (t->flags & 0xff) | 0x100 | (s->remote_parent ? 0x200 : 0));
	put(w, ",\"name\":");
	put_str(w, s->name);
	put(w, ",\"kind\":");
	put_int(w, s->kind);
	put(w, ",\"startTimeUnixNano\":");
	put_int_str(w, s->start_ns);
	put(w, ",\"endTimeUnixNano\":");
	put_int_str(w, s->end_ns);
	put(w, ",\"attributes\":[");
	for (const struct attr *a = s->attrs; a; a = a->next) {
		if (a != s->attrs)
			put(w, ",");
		put(w, "{\"key\":");
		put_str(w, a->key);
		put(w, ",\"value\":");
		put_any(w, a);
		put(w, "}");
	}
	put(w, "],\"droppedAttributesCount\":0,\"events\":[],\"droppedEventsCount\":0,"
	       "\"links\":[],\"droppedLinksCount\":0,\"status\":{\"code\":");
	put_int(w, s->code);
	if (s->msg) {
		put(w, ",\"message\":");
		put_str(w, s->msg);
	}
	put(w, "}}");
}

/* The ExportTraceServiceRequest for the ended spans, oldest first, into
 * b; *n says how many went in (0: b is untouched). */
static enum core_status request(const struct tracer *t, struct core_buf *b, size_t *n)
{
	struct enc w = { b, CORE_OK };
	*n = 0;
	for (const struct trace_span *s = t->spans; s; s = s->next) {
		if (!s->ended)
			continue;
		if (!(*n)++) {
			/* Room for a run's spans at once (about 1 KB each). */
			if (!w.st)
				w.st = core_buf_grow(b, 8192);
			put(&w, "{\"resourceSpans\":[{\"resource\":{\"attributes\":");
			put_n(&w, t->resource, strlen(t->resource));
			put(&w, "},\"scopeSpans\":[{\"scope\":{\"name\":\"agentkit\",\"version\":");
			put_str(&w, AGENTKIT_VERSION);
			put(&w, "},\"spans\":[");
		} else {
			put(&w, ",");
		}
		put_span(&w, t, s);
	}
	if (*n)
		put(&w, "]}]}]}");
	return w.st;
}

/* ---- Genkit's telemetry-server format (go/core/tracing/store.go) ---- */

/* An attribute's value as the plain JSON value Genkit's attributes hold. */
static json_t *plain(const struct attr *a)
{
	switch (a->type) {
	case ATTR_STR: return json_string(a->s);
	case ATTR_INT: return json_integer(a->i);
	case ATTR_BOOL: return json_boolean(a->i);
	case ATTR_STRS: return json_copy(a->strs);
	}
	return NULL;
}

static json_t *genkit_span(const struct tracer *t, const struct trace_span *s)
{
	static const char *const kinds[] = { "UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT" };
	json_t *attrs = json_object();
	for (const struct attr *a = s->attrs; a; a = a->next)
		json_object_set_new(attrs, a->key, plain(a));
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
	int any = 0, named = 0;
	if (!spans || !(o = json_pack("{s:s}", "traceId", t->trace_id))) {
		json_decref(spans);
		return NULL;
	}
	for (const struct trace_span *s = t->spans; s; s = s->next) {
		if (!s->ended)
			continue;
		json_object_set_new(spans, s->span_id, genkit_span(t, s));
		any = 1;
		if (!named && (!s->parent_id[0] || s->remote_parent)) {
			json_object_set_new(o, "displayName", json_string(s->name));
			json_object_set_new(o, "startTime", json_real(s->start_ns / 1e6));
			json_object_set_new(o, "endTime", json_real(s->end_ns / 1e6));
			named = 1;
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
	size_t n = 0;
	json_t *r = NULL;
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	pthread_mutex_lock(&mu);
	if (mine() && genkit)
		r = genkit_request(T);
	else if (mine() && !request(T, &b, &n) && n)
		r = json_loadb(b.p, b.len, 0, NULL);
	pthread_mutex_unlock(&mu);
	core_buf_release(&b);
	return r;
}

static void drop_ended(struct tracer *t, int all)
{
	struct trace_span **pp = &t->spans;
	while (*pp) {
		struct trace_span *s = *pp;
		if (all || s->ended) {
			*pp = s->next;
			free_span(s);
		} else {
			pp = &s->next;
		}
	}
	t->tail = pp;
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

/* Send one encoded request to one destination (url NULL: the console). */
static enum core_status send_to(struct tracer *t, struct core_buf *body, const char *url,
                                int otlp, struct core_err *e)
{
	return url ? post(t, url, otlp, body, e) : write_line(t, body, e);
}

enum core_status trace_flush(struct core_err *e)
{
	enum core_status st = CORE_OK, gst = CORE_OK;
	struct core_buf body = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_buf gbody = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	pthread_mutex_lock(&mu);
	struct tracer *t = mine();
	size_t n = 0;
	int primary = t && t->cfg.exporter != TRACE_OFF && !t->failed;
	int genkit = t && t->cfg.genkit_url && !t->genkit_failed;
	const char *url = t && t->cfg.exporter == TRACE_OTLP ? t->cfg.url : NULL;
	if (primary && (st = request(t, &body, &n)))
		core_fail(e, st, "out of memory");
	else if (n)
		st = send_to(t, &body, url, 1, e);
	if (st)
		failed(t, url, st, &t->failed, e);
	/* Genkit's format is built as a tree: it is only for a developer's
	 * telemetry server, never on a fleet's path. */
	json_t *greq = genkit ? genkit_request(t) : NULL;
	struct core_err ge = { 0 };
	if (greq && (gst = jv_dump(greq, &gbody)))
		core_fail(&ge, gst, "out of memory");
	else if (greq)
		gst = send_to(t, &gbody, t->cfg.genkit_url, 0, &ge);
	json_decref(greq);
	if (gst) {
		failed(t, t->cfg.genkit_url, gst, &t->genkit_failed, &ge);
		if (!st)
			*e = ge;
	}
	if (t)
		drop_ended(t, 0);
	pthread_mutex_unlock(&mu);
	core_buf_release(&body);
	core_buf_release(&gbody);
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
		free(t->resource);
		free(t);
		T = NULL;
	}
	pthread_mutex_unlock(&mu);
	return st;
}

void trace_adopt(const struct trace_span *parent)
{
	pthread_mutex_lock(&mu);
	if (T && T->owner != self_pid()) {
		T->owner = self_pid();
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
