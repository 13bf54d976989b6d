/*
 * trace.c - the span recorder, its OTLP encodings (protobuf through
 * protobuf-c's generated code, and JSON) and its exporters
 * (trace_env.c reads their configuration from the OTEL_* variables).
 *
 * One recorder per process, behind a mutex: the hooks that feed it sit in
 * the turn loop, the tool runner and the model call, and each must stay a
 * single call, so nothing carries a recorder handle around.
 *
 * The HTTP destinations are posted to by one exporter thread, so a turn
 * only encodes its spans and queues the request: a collector that takes
 * eight seconds to answer costs the turn nothing.  The thread is started
 * by the first request, blocks every signal (they are the main thread's:
 * the stop signals wake the turn loop by EINTR), and ends at
 * trace_finish() or trace_quiesce().  What the process waits for it, at
 * exit and before a detach's fork together, is bounded by cfg.wait_ms;
 * what is still queued or in flight then is cancelled and counted.
 *
 * One unit on purpose: the recorder, the encoder and the exporter thread
 * share one tracer (struct tracer, T) under one mutex, and each reads the
 * others' parts of it; apart, that struct and its lock would become a
 * header for three files, and the encoder and the exporter, reading
 * trace.h's configuration while trace.c calls them, a circle.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

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

/* An event of a span ("exception"), its attributes strings. */
struct event {
	struct event *next;
	int64_t t_ns;
	struct attr *attrs;
	char name[];
};

struct trace_span {
	char span_id[17];
	char trace_id[33];      /* its trace's: the process's, or its own */
	unsigned flags;         /* its trace's W3C flags: bit 0, sampled */
	int own;                /* in a trace of its own (trace_start_remote()) */
	char *state;            /* own: the trace's tracestate (owned), or NULL */
	char parent_id[17];     /* "" for a root */
	int remote_parent;      /* the parent is the inbound TRACEPARENT */
	char *name;
	enum trace_kind kind;
	int64_t start_ns, end_ns;
	struct attr *attrs;     /* in the order first set */
	struct event *events;   /* oldest first */
	enum trace_code code;
	char *msg;
	int ended;
	struct trace_span *next;
};

/* One encoded request for one HTTP destination, queued for the thread. */
struct job {
	struct job *next;
	struct core_buf body;
	const char *url;        /* cfg.url or cfg.genkit_url */
	int dest;               /* DEST_OTLP or DEST_GENKIT */
	size_t spans;
};

enum { DEST_OTLP, DEST_GENKIT };

struct tracer {
	struct trace_config cfg;
	char *resource;         /* cfg.resource as JSON text */
	char trace_id[33];
	char remote_span[17];   /* the inbound parent span, or "" */
	unsigned flags;         /* W3C trace flags: bit 0 is the sampling decision */
	int sampled;            /* spans are exported (else dropped at flush) */
	pid_t owner;
	struct trace_span *spans;       /* oldest first */
	struct trace_span **tail;       /* where the next span is linked */
	int failed[2];          /* a destination failed: export there is off */
	struct core_err first;  /* the first failure */
	/* The exporter thread; all under mu but cancel, which the request in
	 * flight polls. */
	struct job *queue, **qtail;
	size_t queued;          /* spans in the queue and in flight */
	pthread_t thread;
	int running;            /* started and not joined */
	int busy;               /* a request is in flight */
	int stop;               /* end once the queue is empty */
	atomic_int cancel;      /* stop the request in flight, drop the rest */
	int64_t wait_left_ms;   /* what the process may still wait for exports */
	int finishing;          /* in trace_finish(): the main thread sends the
	                           last request itself, cut at deadline_ms */
	int64_t deadline_ms;
	size_t dropped[2];      /* spans a destination never got */
	int late;               /* some were dropped at the wait's bound */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;     /* a job, or stop */
static pthread_cond_t idle_cv;  /* a job done (CLOCK_MONOTONIC: timed waits) */
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

static void init_idle_cv(void)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&idle_cv, &a);
	pthread_condattr_destroy(&a);
}

/*
 * fork() is taken with the mutex held, so a child never inherits it
 * locked by the exporter thread; the child has no exporter thread, so its
 * copy says none runs and its condition variables start anew (the
 * thread's wait in them did not come along).  A child that carries on the
 * work (a detached worker) is forked after trace_quiesce(), so no request
 * was in flight inside libcurl; a tool's child only execs.
 */
static void fork_prepare(void)
{
	pthread_mutex_lock(&mu);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&mu);
}

static void forked(void)
{
	self = 0;
	pool_left = 0;
	if (T) {
		T->running = T->busy = T->stop = 0;
		atomic_store(&T->cancel, 0);
	}
	work_cv = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	init_idle_cv();
	pthread_mutex_unlock(&mu);
}

static void at_fork(void)
{
	init_idle_cv();
	pthread_atfork(fork_prepare, fork_parent, forked);
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

/* ---- the recorder ---- */

/*
 * The sampler's decision for the trace (one per process: its root span's).
 * The parent-based ones follow an inbound TRACEPARENT's sampled flag
 * (remoteParentSampled always_on, remoteParentNotSampled always_off, the
 * SDKs' defaults) and use their root sampler without one.  traceidratio
 * keeps a trace when the trace ID's last 8 bytes, read big-endian and
 * shifted right once, are below ratio * 2^63 (as the Go SDK), so every
 * process of a trace decides alike.
 */
static int sample(const struct trace_config *c, int has_parent, const char *trace_id,
                  unsigned flags)
{
	enum trace_sampler s = c->sampler;
	if (has_parent && (s == TRACE_PARENT_ALWAYS_ON || s == TRACE_PARENT_ALWAYS_OFF ||
	                     s == TRACE_PARENT_RATIO))
		return flags & 1;
	switch (s) {
	case TRACE_ALWAYS_ON:
	case TRACE_PARENT_ALWAYS_ON:
		return 1;
	case TRACE_ALWAYS_OFF:
	case TRACE_PARENT_ALWAYS_OFF:
		return 0;
	case TRACE_RATIO:
	case TRACE_PARENT_RATIO:
		break;
	}
	uint64_t x = strtoull(trace_id + 16, NULL, 16) >> 1;
	return c->ratio >= 1.0 || (double)x < c->ratio * 9223372036854775808.0;
}

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
	t->qtail = &t->queue;
	t->wait_left_ms = t->cfg.wait_ms;
	if (t->cfg.parent[0])
		trace_parse_parent(t->cfg.parent, t->trace_id, t->remote_span, &t->flags);
	else
		random_hex(t->trace_id, 16);
	t->sampled = sample(&t->cfg, t->cfg.parent[0] != 0, t->trace_id, t->flags);
	t->flags = t->sampled ? t->flags | 1 : t->flags & ~1u;
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

int trace_sampled(void)
{
	pthread_mutex_lock(&mu);
	int on = mine() && T->sampled;
	pthread_mutex_unlock(&mu);
	return on;
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
	for (struct event *ev = s->events, *next; ev; ev = next) {
		next = ev->next;
		free_attrs(ev->attrs);
		free(ev);
	}
	free(s->name);
	free(s->msg);
	free(s->state);
	free_attrs(s->attrs);
	free(s);
}

/* Under the mutex: a new span of t named name, its ID drawn, linked
 * last; the caller sets its trace.  NULL without memory. */
static struct trace_span *span_new(struct tracer *t, const char *name, enum trace_kind kind,
                                   int64_t start_ns)
{
	struct trace_span *s = calloc(1, sizeof *s);
	if (s && !(s->name = utf8_dup(name, strlen(name)))) {
		free(s);
		return NULL;
	}
	if (!s)
		return NULL;
	random_hex(s->span_id, 8);
	s->kind = kind;
	s->start_ns = start_ns ? start_ns : core_now_ns();
	*t->tail = s;
	t->tail = &s->next;
	return s;
}

struct trace_span *trace_start(const struct trace_span *parent, const char *name,
                               enum trace_kind kind, int64_t start_ns)
{
	pthread_mutex_lock(&mu);
	struct tracer *t = mine();
	struct trace_span *s = t ? span_new(t, name, kind, start_ns) : NULL;
	if (s && parent) {
		memcpy(s->trace_id, parent->trace_id, sizeof s->trace_id);
		s->flags = parent->flags;
		s->own = parent->own;
		s->state = parent->state ? strdup(parent->state) : NULL;
		memcpy(s->parent_id, parent->span_id, sizeof s->parent_id);
	} else if (s) {
		memcpy(s->trace_id, t->trace_id, sizeof s->trace_id);
		s->flags = t->flags;
		if (t->remote_span[0]) {
			memcpy(s->parent_id, t->remote_span, sizeof s->parent_id);
			s->remote_parent = 1;
		}
	}
	pthread_mutex_unlock(&mu);
	return s;
}

struct trace_span *trace_start_remote(const char *traceparent, const char *tracestate,
                                      const char *name, enum trace_kind kind,
                                      int64_t start_ns)
{
	pthread_mutex_lock(&mu);
	struct tracer *t = mine();
	struct trace_span *s = t ? span_new(t, name, kind, start_ns) : NULL;
	if (s) {
		s->own = 1;
		if (traceparent &&
		    !trace_parse_parent(traceparent, s->trace_id, s->parent_id, &s->flags)) {
			s->remote_parent = 1;
			s->state = tracestate && *tracestate ? strdup(tracestate) : NULL;
		} else {
			s->parent_id[0] = 0;
			s->flags = 1;
			random_hex(s->trace_id, 16);
		}
		s->flags = sample(&t->cfg, s->remote_parent, s->trace_id, s->flags) ? s->flags | 1
		                                                                     : s->flags & ~1u;
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

void trace_event(struct trace_span *s, const char *name, const char *const *attrs)
{
	if (!s)
		return;
	size_t n = strlen(name), len = utf8_fixed_len(name, n);
	struct event *ev = malloc(sizeof *ev + len + 1);
	if (!ev)
		return;
	ev->next = NULL;
	ev->t_ns = core_now_ns();
	ev->attrs = NULL;
	utf8_fix_copy(ev->name, name, n);
	struct attr **tail = &ev->attrs;
	for (size_t i = 0; attrs && attrs[i] && attrs[i + 1]; i += 2) {
		size_t vn = strlen(attrs[i + 1]), vlen = utf8_fixed_len(attrs[i + 1], vn);
		struct attr *a = attr_new(attrs[i], ATTR_STR, vlen + 1);
		if (!a)
			break;
		utf8_fix_copy(a->s, attrs[i + 1], vn);
		*tail = a;
		tail = &a->next;
	}
	pthread_mutex_lock(&mu);
	struct event **pp = &s->events;
	while (*pp)
		pp = &(*pp)->next;
	*pp = ev;
	pthread_mutex_unlock(&mu);
}

void trace_end(struct trace_span *s, enum trace_code code, const char *msg)
{
	trace_end_at(s, code, msg, 0);
}

void trace_end_at(struct trace_span *s, enum trace_code code, const char *msg, int64_t end_ns)
{
	if (!s)
		return;
	pthread_mutex_lock(&mu);
	s->end_ns = end_ns ? end_ns : core_now_ns();
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
		snprintf(out, TRACE_PARENT_LEN + 1, "00-%s-%s-%02x", s ? s->trace_id : t->trace_id,
		         sid, (s ? s->flags : t->flags) & 0xff);
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
	const char *v = mine() && T->sampled ? T->trace_id : NULL;
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

static void put_attrs(struct enc *w, const struct attr *attrs)
{
	put(w, "[");
	for (const struct attr *a = attrs; a; a = a->next) {
		if (a != attrs)
			put(w, ",");
		put(w, "{\"key\":");
		put_str(w, a->key);
		put(w, ",\"value\":");
		put_any(w, a);
		put(w, "}");
	}
	put(w, "]");
}

/* A span's tracestate: its own trace's, or the process's. */
static const char *span_state(const struct tracer *t, const struct trace_span *s)
{
	return s->own ? s->state : t->cfg.tracestate;
}

/* Whether a span goes into a request: ended, and its trace sampled. */
static int exported(const struct trace_span *s)
{
	return s->ended && (s->flags & 1);
}

static void put_span(struct enc *w, const struct tracer *t, const struct trace_span *s)
{
	put(w, "{\"traceId\":\"");
	put_n(w, s->trace_id, 32);
	put(w, "\",\"spanId\":\"");
	put_n(w, s->span_id, 16);
	if (s->parent_id[0]) {
		put(w, "\",\"parentSpanId\":\"");
		put_n(w, s->parent_id, 16);
	}
	put(w, "\"");
	if (span_state(t, s)) {
		put(w, ",\"traceState\":");
		put_str(w, span_state(t, s));
	}
	/* W3C flags, and "is remote" known (0x100), set (0x200) when the
	 * parent came from TRACEPARENT. */
	put(w, ",\"flags\":");
	put_int(w, (s->flags & 0xff) | 0x100 | (s->remote_parent ? 0x200 : 0));
	put(w, ",\"name\":");
	put_str(w, s->name);
	put(w, ",\"kind\":");
	put_int(w, s->kind);
	put(w, ",\"startTimeUnixNano\":");
	put_int_str(w, s->start_ns);
	put(w, ",\"endTimeUnixNano\":");
	put_int_str(w, s->end_ns);
	put(w, ",\"attributes\":");
	put_attrs(w, s->attrs);
	put(w, ",\"droppedAttributesCount\":0,\"events\":[");
	for (const struct event *ev = s->events; ev; ev = ev->next) {
		if (ev != s->events)
			put(w, ",");
		put(w, "{\"timeUnixNano\":");
		put_int_str(w, ev->t_ns);
		put(w, ",\"name\":");
		put_str(w, ev->name);
		put(w, ",\"attributes\":");
		put_attrs(w, ev->attrs);
		put(w, ",\"droppedAttributesCount\":0}");
	}
	put(w, "],\"droppedEventsCount\":0,"
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
		if (!exported(s))
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

/* ---- encoding (OTLP's protobuf, through protobuf-c) ---- */

typedef Opentelemetry__Proto__Common__V1__AnyValue PbAny;
typedef Opentelemetry__Proto__Common__V1__ArrayValue PbArray;
typedef Opentelemetry__Proto__Common__V1__KeyValue PbKV;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope PbScope;
typedef Opentelemetry__Proto__Resource__V1__Resource PbResource;
typedef Opentelemetry__Proto__Trace__V1__Span PbSpan;
typedef Opentelemetry__Proto__Trace__V1__Span__Event PbEvent;
typedef Opentelemetry__Proto__Trace__V1__Status PbStatus;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans PbScopeSpans;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans PbResourceSpans;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest PbRequest;

/*
 * The messages of one request live in an arena, freed at once after
 * packing; strings are borrowed from the spans (protobuf-c's pack only
 * reads them), so building the tree copies no text.
 */
struct chunk {
	struct chunk *next;
	max_align_t data[];
};

struct arena {
	struct chunk *head;
	size_t used, cap;
	int failed;
};

#define ARENA_CHUNK 16384

/* n zeroed bytes, aligned for any message; NULL (a->failed) without memory. */
static void *ar_new(struct arena *a, size_t n)
{
	n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
	if (!a->head || a->used + n > a->cap) {
		size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
		struct chunk *c = malloc(sizeof *c + cap);
		if (!c) {
			a->failed = 1;
			return NULL;
		}
		c->next = a->head;
		a->head = c;
		a->used = 0;
		a->cap = cap;
	}
	char *p = (char *)a->head->data + a->used;
	a->used += n;
	memset(p, 0, n);
	return p;
}

static void ar_free(struct arena *a)
{
	for (struct chunk *c = a->head, *next; c; c = next) {
		next = c->next;
		free(c);
	}
}

/* An array of n message pointers. */
#define AR_VEC(a, n, type) ((type **)ar_new((a), (n) * sizeof(type *) + 1))

/* hex (2n digits) as n bytes. */
static ProtobufCBinaryData pb_id(struct arena *a, const char *hex, size_t n)
{
	ProtobufCBinaryData d = { 0, NULL };
	uint8_t *b = ar_new(a, n);
	if (!b)
		return d;
	/* The IDs are random_hex()'s or TRACEPARENT's, validated lowercase. */
	for (size_t i = 0; i < n; i++) {
		int hi = hex[2 * i], lo = hex[2 * i + 1];
		hi = hi <= '9' ? hi - '0' : hi - 'a' + 10;
		lo = lo <= '9' ? lo - '0' : lo - 'a' + 10;
		b[i] = (uint8_t)(hi << 4 | lo);
	}
	d.len = n;
	d.data = b;
	return d;
}

static PbAny *pb_str_value(struct arena *a, const char *v)
{
	PbAny *any = ar_new(a, sizeof *any);
	if (!any)
		return NULL;
	opentelemetry__proto__common__v1__any_value__init(any);
	any->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	any->string_value = (char *)v;
	return any;
}

static PbAny *pb_any(struct arena *a, const struct attr *at)
{
	if (at->type == ATTR_STR)
		return pb_str_value(a, at->s);
	PbAny *any = ar_new(a, sizeof *any);
	if (!any)
		return NULL;
	opentelemetry__proto__common__v1__any_value__init(any);
	switch (at->type) {
	case ATTR_STR:
		break;
	case ATTR_INT:
		any->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		any->int_value = at->i;
		break;
	case ATTR_BOOL:
		any->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
		any->bool_value = at->i != 0;
		break;
	case ATTR_STRS: {
		PbArray *arr = ar_new(a, sizeof *arr);
		size_t n = json_array_size(at->strs);
		if (!arr)
			return NULL;
		opentelemetry__proto__common__v1__array_value__init(arr);
		arr->values = AR_VEC(a, n, PbAny);
		for (size_t i = 0; arr->values && i < n; i++)
			arr->values[arr->n_values++] =
				pb_str_value(a, json_string_value(json_array_get(at->strs, i)));
		any->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE;
		any->array_value = arr;
		break;
	}
	}
	return any;
}

static PbKV *pb_kv(struct arena *a, const char *key, PbAny *v)
{
	PbKV *kv = ar_new(a, sizeof *kv);
	if (!kv)
		return NULL;
	opentelemetry__proto__common__v1__key_value__init(kv);
	kv->key = (char *)key;
	kv->value = v;
	return kv;
}

/* The attributes as KeyValues; *n their count. */
static PbKV **pb_attrs(struct arena *a, const struct attr *attrs, size_t *n)
{
	size_t k = 0;
	for (const struct attr *at = attrs; at; at = at->next)
		k++;
	PbKV **v = AR_VEC(a, k, PbKV);
	*n = 0;
	for (const struct attr *at = attrs; v && at; at = at->next)
		v[(*n)++] = pb_kv(a, at->key, pb_any(a, at));
	return v;
}

static PbSpan *pb_span(struct arena *a, const struct tracer *t, const struct trace_span *s)
{
	PbSpan *p = ar_new(a, sizeof *p);
	PbStatus *st = ar_new(a, sizeof *st);
	if (!p || !st)
		return NULL;
	opentelemetry__proto__trace__v1__span__init(p);
	opentelemetry__proto__trace__v1__status__init(st);
	p->trace_id = pb_id(a, s->trace_id, 16);
	p->span_id = pb_id(a, s->span_id, 8);
	if (s->parent_id[0])
		p->parent_span_id = pb_id(a, s->parent_id, 8);
	if (span_state(t, s))
		p->trace_state = (char *)span_state(t, s);
	p->flags = (s->flags & 0xff) | 0x100 | (s->remote_parent ? 0x200 : 0);
	p->name = s->name;
	p->kind = (Opentelemetry__Proto__Trace__V1__Span__SpanKind)s->kind;
	p->start_time_unix_nano = (uint64_t)s->start_ns;
	p->end_time_unix_nano = (uint64_t)s->end_ns;
	p->attributes = pb_attrs(a, s->attrs, &p->n_attributes);
	size_t ne = 0;
	for (const struct event *ev = s->events; ev; ev = ev->next)
		ne++;
	p->events = AR_VEC(a, ne, PbEvent);
	for (const struct event *ev = s->events; p->events && ev; ev = ev->next) {
		PbEvent *pe = ar_new(a, sizeof *pe);
		if (!pe)
			break;
		opentelemetry__proto__trace__v1__span__event__init(pe);
		pe->time_unix_nano = (uint64_t)ev->t_ns;
		pe->name = (char *)ev->name;
		pe->attributes = pb_attrs(a, ev->attrs, &pe->n_attributes);
		p->events[p->n_events++] = pe;
	}
	st->code = (Opentelemetry__Proto__Trace__V1__Status__StatusCode)s->code;
	if (s->msg)
		st->message = s->msg;
	p->status = st;
	return p;
}

/* The ExportTraceServiceRequest for the ended spans, oldest first,
 * packed onto b; *n says how many went in (0: b is untouched). */
static enum core_status request_pb(const struct tracer *t, struct core_buf *b, size_t *n)
{
	struct arena a = { 0 };
	PbRequest req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
	PbResourceSpans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT, *rsp = &rs;
	PbResource res = OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
	PbScopeSpans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT, *ssp = &ss;
	PbScope scope = OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
	enum core_status st = CORE_OK;
	size_t k = 0;
	*n = 0;
	for (const struct trace_span *s = t->spans; s; s = s->next)
		k += exported(s);
	if (!k)
		return CORE_OK;
	ss.spans = AR_VEC(&a, k, PbSpan);
	for (const struct trace_span *s = t->spans; ss.spans && s; s = s->next)
		if (exported(s))
			ss.spans[ss.n_spans++] = pb_span(&a, t, s);
	scope.name = "agentkit";
	scope.version = AGENTKIT_VERSION;
	ss.scope = &scope;
	size_t nr = json_array_size(t->cfg.resource), i;
	json_t *kv;
	res.attributes = AR_VEC(&a, nr, PbKV);
	json_array_foreach(t->cfg.resource, i, kv) {
		if (!res.attributes)
			break;
		const char *v = json_string_value(json_object_get(json_object_get(kv, "value"),
		                                                  "stringValue"));
		res.attributes[res.n_attributes++] =
			pb_kv(&a, json_string_value(json_object_get(kv, "key")),
			      pb_str_value(&a, v ? v : ""));
	}
	rs.resource = &res;
	rs.scope_spans = &ssp;
	rs.n_scope_spans = 1;
	req.resource_spans = &rsp;
	req.n_resource_spans = 1;
	if (a.failed) {
		st = CORE_ENOMEM;
	} else {
		size_t len =
			opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(&req);
		if (!(st = core_buf_grow(b, len + 1))) {
			b->len += opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(
				&req, (uint8_t *)b->p + b->len);
			*n = k;
		}
	}
	ar_free(&a);
	return st;
}

enum core_status trace_request_encode(int protobuf, struct core_buf *b, size_t *n)
{
	pthread_mutex_lock(&mu);
	enum core_status st = CORE_OK;
	*n = 0;
	if (mine())
		st = protobuf ? request_pb(T, b, n) : request(T, b, n);
	pthread_mutex_unlock(&mu);
	return st;
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
	                      "spanId", s->span_id, "traceId", s->trace_id,
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
	/* TimeEvent: {time (ms), annotation: {attributes, description}}. */
	json_t *evs = json_object_get(json_object_get(o, "timeEvents"), "timeEvent");
	for (const struct event *ev = s->events; o && ev; ev = ev->next) {
		json_t *ea = json_object();
		for (const struct attr *a = ev->attrs; ea && a; a = a->next)
			json_object_set_new(ea, a->key, plain(a));
		json_array_append_new(evs, json_pack("{s:f, s:{s:o, s:s}}", "time", ev->t_ns / 1e6,
		                                     "annotation", "attributes", ea ? ea : json_object(),
		                                     "description", ev->name));
	}
	return o;
}

/* The ended spans of trace trace_id as one Genkit TraceData; the trace's
 * name and times come from its root span (no parent in this process)
 * when it is among them, as Genkit's exporter sets them. */
static json_t *genkit_request(const struct tracer *t, const char *trace_id)
{
	json_t *spans = json_object(), *o;
	int any = 0, named = 0;
	if (!spans || !(o = json_pack("{s:s}", "traceId", trace_id))) {
		json_decref(spans);
		return NULL;
	}
	for (const struct trace_span *s = t->spans; s; s = s->next) {
		if (!exported(s) || strcmp(s->trace_id, trace_id))
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
		r = genkit_request(T, T->trace_id);
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
	struct tracer *t;
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
	/* A protobuf answer (google.rpc.Status) is bytes: only its text shows. */
	for (char *p = head; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
	return core_fail(e, he->status == 429 ? CORE_EEXHAUSTED : CORE_EUNAVAILABLE,
	                 "HTTP %ld%s%s", he->status, *head ? ": " : "", head);
}

/* Whether the wait's bound ran out: what is not sent now is dropped. */
static int cut(struct tracer *t)
{
	return atomic_load(&t->cancel) || (t->finishing && core_now_mono_ms() >= t->deadline_ms);
}

/* http_post() polls this every 20 ms at most. */
static int on_cancelled(void *ctx)
{
	struct reply *r = ctx;
	return cut(r->t);
}

/* POST a job's body (without the mutex: cfg is not changed while the
 * thread runs); the OTLP headers and TLS files only go to the OTLP
 * endpoint, never to the Genkit server. */
/* body gzip-compressed (RFC 1952) into z. */
static enum core_status gzip_body(const struct core_buf *body, struct core_buf *z,
                                  struct core_err *e)
{
	z_stream zs;
	memset(&zs, 0, sizeof zs);
	/* 15 + 16: a gzip wrapper rather than zlib's. */
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
	                 Z_DEFAULT_STRATEGY) != Z_OK)
		return core_fail(e, CORE_ENOMEM, "gzip: out of memory");
	uLong bound = deflateBound(&zs, (uLong)body->len);
	enum core_status st = core_buf_grow(z, bound);
	if (!st) {
		zs.next_in = (Bytef *)body->p;
		zs.avail_in = (uInt)body->len;
		zs.next_out = (Bytef *)z->p;
		zs.avail_out = (uInt)bound;
		if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
			st = core_fail(e, CORE_EINTERNAL, "gzip: the request did not compress");
		else
			z->len = zs.total_out;
	} else {
		core_fail(e, st, "gzip: out of memory");
	}
	deflateEnd(&zs);
	return st;
}

static enum core_status post(struct tracer *t, const struct job *j, struct core_err *e)
{
	int otlp = j->dest == DEST_OTLP;
	int gz = otlp && t->cfg.gzip;
	const char *hdrs[TRACE_HEADERS_MAX + 3];
	size_t k = 0;
	hdrs[k++] = otlp && t->cfg.protocol == TRACE_PROTOBUF
	            ? "Content-Type: application/x-protobuf" : "Content-Type: application/json";
	if (gz)
		hdrs[k++] = "Content-Encoding: gzip";
	for (int i = 0; otlp && t->cfg.headers[i]; i++)
		hdrs[k++] = t->cfg.headers[i];
	hdrs[k] = NULL;
	struct core_buf z = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (gz) {
		enum core_status zst = gzip_body(&j->body, &z, e);
		if (zst) {
			core_buf_release(&z);
			return zst;
		}
	}
	const struct core_buf *body = gz ? &z : &j->body;
	struct reply r = { CORE_BUF_INIT(REPLY_MAX), t };
	struct http_call c = {
		.url = j->url, .headers = hdrs, .body = body->p, .body_len = body->len,
		.what = "trace export",
		.limits = { .connect_ms = t->cfg.timeout_ms, .idle_ms = t->cfg.timeout_ms,
		            .retries = 3, .budget_ms = t->cfg.timeout_ms, .backoff_ms = 200 },
		.on_body = on_body, .on_error = on_error, .cancelled = on_cancelled, .ctx = &r,
		.retry_status_only = 1,
		.ca_file = otlp ? t->cfg.ca_file : NULL, .cert_file = otlp ? t->cfg.cert_file : NULL,
		.key_file = otlp ? t->cfg.key_file : NULL,
	};
	enum core_status st = http_post(&c, NULL, e);
	core_buf_release(&r.body);
	core_buf_release(&z);
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

/* Under the mutex: a destination failed: export there stops, the first
 * failure is kept for trace_finish(), and e says it. */
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

static void job_free(struct job *j)
{
	core_buf_release(&j->body);
	free(j);
}

/* Under the mutex: the queue's first job, taken off it (NULL: empty). */
static struct job *job_take(struct tracer *t)
{
	struct job *j = t->queue;
	if (j && !(t->queue = j->next))
		t->qtail = &t->queue;
	return j;
}

/*
 * Under the mutex: send the queued jobs in order, the mutex released
 * around each POST; with wait, as the thread does, sleep for more until
 * told to stop, else return once the queue is empty.  A job for a
 * destination that failed is discarded (the failure is what is reported);
 * one cancelled at the bound, or queued after it, is counted as dropped.
 */
static void work(struct tracer *t, int wait)
{
	for (;;) {
		while (wait && !t->queue && !t->stop)
			pthread_cond_wait(&work_cv, &mu);
		struct job *j = job_take(t);
		if (!j)
			break;
		enum core_status st = CORE_OK;
		struct core_err e = { 0 };
		if (cut(t)) {
			st = CORE_ECANCELLED;
		} else if (!t->failed[j->dest]) {
			t->busy = 1;
			pthread_mutex_unlock(&mu);
			st = post(t, j, &e);
			pthread_mutex_lock(&mu);
			t->busy = 0;
		}
		if (st == CORE_ECANCELLED && cut(t)) {
			t->dropped[j->dest] += j->spans;
			t->late = 1;
		} else if (st) {
			failed(t, j->url, st, &t->failed[j->dest], &e);
		}
		t->queued -= j->spans;
		job_free(j);
		pthread_cond_broadcast(&idle_cv);
	}
}

static void *exporter(void *arg)
{
	pthread_mutex_lock(&mu);
	work(arg, 1);
	pthread_mutex_unlock(&mu);
	return NULL;
}

/*
 * Under the mutex: queue body (taken over) for url; start the thread if
 * it is not running.  A request that would take the queue past
 * cfg.queue_max spans is dropped (counted), unless the queue is empty: a
 * turn larger than the bound is still sent.  Returns 1 when the caller
 * is to send the queue itself: in trace_finish() (the thread has ended),
 * or when no thread could be started (as before there was one).
 */
static int enqueue(struct tracer *t, struct core_buf *body, const char *url, int dest,
                   size_t spans)
{
	struct job *j = NULL;
	int full = t->queued && t->queued + spans > t->cfg.queue_max;
	if (full || !(j = calloc(1, sizeof *j))) {
		t->dropped[dest] += spans;
		core_buf_release(body);
		return 0;
	}
	j->body = *body;
	*body = (struct core_buf)CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	j->url = url;
	j->dest = dest;
	j->spans = spans;
	*t->qtail = j;
	t->qtail = &j->next;
	t->queued += spans;
	if (t->running) {
		pthread_cond_signal(&work_cv);
		return 0;
	}
	if (t->finishing)
		return 1;
	/* Every signal blocked in the thread, so they go to the main one. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	t->running = !pthread_create(&t->thread, NULL, exporter, t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return !t->running;
}

/*
 * Under the mutex: wait for the queue to empty, within what the process
 * may still wait; then cancel what is left (counted) and join the thread.
 * The mutex is released while waiting and joining.
 */
static void settle(struct tracer *t)
{
	if (!t->running)
		return;
	int64_t start = core_now_mono_ms();
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += (time_t)(t->wait_left_ms / 1000);
	dl.tv_nsec += (long)(t->wait_left_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	while ((t->queue || t->busy) && pthread_cond_timedwait(&idle_cv, &mu, &dl) != ETIMEDOUT)
		;
	int64_t spent = core_now_mono_ms() - start;
	t->wait_left_ms = spent < t->wait_left_ms ? t->wait_left_ms - spent : 0;
	if (t->queue || t->busy) {
		t->late = 1;
		atomic_store(&t->cancel, 1);
	}
	t->stop = 1;
	pthread_cond_broadcast(&work_cv);
	pthread_mutex_unlock(&mu);
	pthread_join(t->thread, NULL);
	pthread_mutex_lock(&mu);
	t->running = t->stop = 0;
	atomic_store(&t->cancel, 0);
}

enum core_status trace_flush(struct core_err *e)
{
	enum core_status st = CORE_OK;
	struct core_buf body = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_buf gbody = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	pthread_mutex_lock(&mu);
	struct tracer *t = mine();
	size_t n = 0;
	int sync = 0;
	/* An unsampled trace's spans are dropped: no destination gets them
	 * (exported()). */
	int primary = t && t->cfg.exporter != TRACE_OFF && !t->failed[DEST_OTLP];
	int genkit = t && t->cfg.genkit_url && !t->failed[DEST_GENKIT];
	int pb = t && t->cfg.exporter == TRACE_OTLP && t->cfg.protocol == TRACE_PROTOBUF;
	if (primary && (st = pb ? request_pb(t, &body, &n) : request(t, &body, &n)))
		core_fail(e, st, "out of memory");
	else if (n && t->cfg.exporter == TRACE_CONSOLE)
		st = write_line(t, &body, e);   /* a local write: at once */
	else if (n)
		sync |= enqueue(t, &body, t->cfg.url, DEST_OTLP, n);
	if (st)
		failed(t, t->cfg.exporter == TRACE_OTLP ? t->cfg.url : NULL, st,
		       &t->failed[DEST_OTLP], e);
	/* Genkit's format is built as a tree: it is only for a developer's
	 * telemetry server, never on a fleet's path.  One TraceData per
	 * trace, the first time a span of it comes up. */
	for (const struct trace_span *s = genkit ? t->spans : NULL; s; s = s->next) {
		const struct trace_span *seen = t->spans;
		while (seen != s && (!exported(seen) || strcmp(seen->trace_id, s->trace_id)))
			seen = seen->next;
		if (!exported(s) || seen != s || t->failed[DEST_GENKIT])
			continue;
		json_t *greq = genkit_request(t, s->trace_id);
		if (greq && jv_dump(greq, &gbody)) {
			struct core_err ge = { 0 };
			core_fail(&ge, CORE_ENOMEM, "out of memory");
			failed(t, t->cfg.genkit_url, CORE_ENOMEM, &t->failed[DEST_GENKIT], &ge);
			if (!st)
				*e = ge;
			st = CORE_ENOMEM;
		} else if (greq) {
			sync |= enqueue(t, &gbody, t->cfg.genkit_url, DEST_GENKIT,
			                json_object_size(json_object_get(greq, "spans")));
		}
		json_decref(greq);
	}
	if (t)
		drop_ended(t, 0);
	if (sync)
		work(t, 0);
	pthread_mutex_unlock(&mu);
	core_buf_release(&body);
	core_buf_release(&gbody);
	return st;
}

void trace_quiesce(void)
{
	pthread_mutex_lock(&mu);
	struct tracer *t = mine();
	if (t)
		settle(t);
	pthread_mutex_unlock(&mu);
}

/* "1s", "1.5s", "250ms": a bound as the message says it. */
static void say_ms(int64_t ms, char *out, size_t n)
{
	if (ms % 1000 == 0)
		snprintf(out, n, "%llds", (long long)(ms / 1000));
	else if (ms > 1000)
		snprintf(out, n, "%.1fs", ms / 1000.0);
	else
		snprintf(out, n, "%lldms", (long long)ms);
}

/*
 * The last request (the invocation's span) goes to the thread when it
 * runs (its connection is open), and the wait is for both; else this
 * thread sends it itself, cut at what is left of the wait: a run of one
 * turn, which sends nothing before, never starts a thread and costs what
 * the synchronous export did.
 */
enum core_status trace_finish(size_t *dropped, struct core_err *e)
{
	struct core_err fe = { 0 };
	pthread_mutex_lock(&mu);
	struct tracer *t = mine();
	if (t && !t->running) {
		t->finishing = 1;
		t->deadline_ms = core_now_mono_ms() + t->wait_left_ms;
	}
	pthread_mutex_unlock(&mu);
	trace_flush(&fe);
	pthread_mutex_lock(&mu);
	t = mine();
	enum core_status st = CORE_OK;
	if (dropped)
		*dropped = 0;
	if (t) {
		settle(t);
		int d = t->dropped[DEST_GENKIT] > t->dropped[DEST_OTLP] ? DEST_GENKIT : DEST_OTLP;
		if (dropped)
			*dropped = t->dropped[d];
		if (t->first.st) {
			*e = t->first;
			st = t->first.st;
		} else if (t->dropped[d]) {
			char where[512], bound[32];
			core_url_redact(d == DEST_GENKIT ? t->cfg.genkit_url : t->cfg.url, where,
			                sizeof where);
			say_ms(t->cfg.wait_ms, bound, sizeof bound);
			st = t->late ? CORE_EDEADLINE : CORE_EEXHAUSTED;
			if (t->late)
				core_fail(e, st, "trace: %zu span%s dropped: the collector at %s did "
				          "not answer within %s", t->dropped[d],
				          t->dropped[d] == 1 ? "" : "s", where, bound);
			else
				core_fail(e, st, "trace: %zu span%s dropped: the collector at %s fell "
				          "behind (%zu spans waiting)", t->dropped[d],
				          t->dropped[d] == 1 ? "" : "s", where, t->cfg.queue_max);
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
		/* The launcher's queue is the launcher's to send (empty after
		 * trace_quiesce()); the child reports to its own stderr (a
		 * worker's log): the parent's failures are the parent's to
		 * report, and the child has a wait of its own. */
		for (struct job *j; (j = job_take(T));)
			job_free(j);
		T->queued = 0;
		T->failed[DEST_OTLP] = T->failed[DEST_GENKIT] = 0;
		T->dropped[DEST_OTLP] = T->dropped[DEST_GENKIT] = 0;
		T->late = 0;
		T->wait_left_ms = T->cfg.wait_ms;
		memset(&T->first, 0, sizeof T->first);
	}
	pthread_mutex_unlock(&mu);
}
