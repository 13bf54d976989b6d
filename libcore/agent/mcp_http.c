/*
 * mcp_http.c - MCP's HTTP transports (mcp_transport.h): Streamable HTTP
 * (2025-11-25, type "http"), the legacy HTTP+SSE transport (2024-11-05,
 * type "sse"), and a bare "url", which tries the first and falls back to
 * the second as the specification's backwards-compatibility section says
 * (a POST of initialize answered 400, 404 or 405).
 *
 * All transfers of one server run on one libcurl multi handle, driven
 * only while send() or receive() runs (no thread of its own): receive()
 * polls it in slices of at most 50 ms, checking the cancel between them,
 * until a message is queued or its deadline passes.  A lock makes send()
 * and receive() safe from two threads (curl_multi_wakeup() cuts a slice
 * short for a send).
 *
 * Streamable HTTP: every message is a POST with Accept: application/json,
 * text/event-stream; a request's answer is one JSON body or an SSE stream
 * (its events are queued in order); a notification or a response gets 202.
 * The Mcp-Session-Id of initialize's answer goes on every later request,
 * MCP-Protocol-Version (the one initialize answered) once it is known.
 * After notifications/initialized a GET opens the stream of the server's
 * own messages (405: the server has none).  A stream cut, or ended before
 * its request's answer, is resumed by a GET with Last-Event-ID when its
 * events had ids (at most RESUME_MAX times in a row); the GET stream is
 * opened again so too.  close() DELETEs the session.
 *
 * HTTP+SSE: a GET of the URL opens the stream; its "endpoint" event names
 * the URL (same origin) the messages are POSTed to, their answers come on
 * the stream.  Messages sent before it are held, then POSTed in order.
 *
 * Failures: a server that cannot be reached, a stream cut that cannot be
 * resumed, 401 and 403 (the message says how to give a token), 404 to a
 * session (it ended) and the end of the HTTP+SSE stream break the
 * transport (CORE_EINTERNAL, CORE_EUNAUTH).  Another status to a request
 * becomes that request's JSON-RPC error (-32603, "HTTP 500: ..." with the
 * start of the body), unless the body is a JSON-RPC message itself.  One
 * message over max_result_bytes is CORE_ETOOBIG; a transfer pauses while
 * max_result_bytes of messages wait unread.
 *
 * The token of a credentialCommand is fetched at open and again when
 * less than CREDENTIAL_MARGIN_MS of its life remain, and forgotten at a
 * 401; it is kept in memory only, wiped when freed, never in a message.
 */
#include "mcp_transport.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "mcp.h"
#include "../base/http.h"
#include "../base/sse.h"
#include "../base/utf8.h"
#include "../base/util.h"
#include "../model/endpoints.h"

#define SLICE_MS 50
#define RESUME_MAX 3
#define ERR_KEEP 2048           /* of an error body, for its message */
#define CONNECT_MS 30000
#define DELETE_MS 2000

enum mode { M_STREAMABLE, M_LEGACY, M_AUTO };
enum kind { K_POST, K_GET, K_RESUME, K_LEGACY_GET, K_DELETE };

struct hx;

struct xfer {
	struct xfer *next;
	struct hx *t;
	CURL *h;
	enum kind kind;
	struct curl_slist *hdrs;
	char *body;             /* a POST's message */
	size_t body_len;
	json_t *id;             /* the request's id, or NULL */
	int initialize;
	long status;
	int sse, json, answered, paused, resumes;
	struct core_buf buf;    /* a JSON body, or an error body's start */
	struct sse_parser p;
	enum core_status fail;  /* a parse failure in a callback */
	struct core_err why;
	char errbuf[CURL_ERROR_SIZE];
};

struct msg {
	struct msg *next;
	size_t len;
	char p[];
};

struct hx {
	struct mcp_transport head;
	const struct mcp_server_config *c;
	const struct http_curl *cu;
	enum mode mode;
	CURLM *m;
	pthread_mutex_t lock;
	struct xfer *xfers;
	struct msg *qh, *qt;
	size_t qbytes;
	char *cur;              /* the message receive() gave last */
	char *session, *version, *post_url;
	json_t *held;           /* HTTP+SSE: messages before the endpoint */
	char *init_body;        /* a bare url: initialize, for the fallback */
	int get_started, get_none, get_fails;
	char get_last[256];     /* the GET stream's last event id */
	int64_t get_at_ns;      /* open the GET stream again from then */
	enum core_status dead;
	struct core_err why;
	char *token;
	int64_t token_until;
	char shown[512];        /* the URL for messages, redacted */
};

static void xfer_free(struct xfer *x);

/* ---- the queue ---- */

static enum core_status enqueue(struct hx *t, const char *p, size_t n)
{
	struct msg *m;
	char *fixed = NULL;
	if (utf8_valid(p, n) != n) {
		if (!(fixed = utf8_dup(p, n)))
			return CORE_ENOMEM;
		p = fixed;
		n = strlen(fixed);
	}
	if (!(m = malloc(sizeof *m + n + 1))) {
		free(fixed);
		return CORE_ENOMEM;
	}
	m->next = NULL;
	m->len = n;
	memcpy(m->p, p, n);
	m->p[n] = 0;
	free(fixed);
	if (t->qt)
		t->qt->next = m;
	else
		t->qh = m;
	t->qt = m;
	t->qbytes += n;
	return CORE_OK;
}

static void die(struct hx *t, enum core_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void die(struct hx *t, enum core_status st, const char *fmt, ...)
{
	va_list ap;
	if (t->dead)
		return;
	t->dead = st;
	t->why.st = st;
	va_start(ap, fmt);
	vsnprintf(t->why.msg, sizeof t->why.msg, fmt, ap);
	va_end(ap);
	core_url_redact_text(t->why.msg, sizeof t->why.msg);
}

/* A request that got an HTTP failure instead of an answer: its JSON-RPC
 * error, so the call fails and the server goes on. */
static void answer_error(struct hx *t, struct xfer *x, const char *what)
{
	json_t *m = json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", x->id, "error",
	                      "code", -32603, "message", what);
	char *s = m ? json_dumps(m, JSON_COMPACT) : NULL;
	if (!s || enqueue(t, s, strlen(s)))
		die(t, CORE_ENOMEM, "mcp server '%s': out of memory", t->c->name);
	free(s);
	json_decref(m);
}

/* ---- requests ---- */

static enum core_status fresh_token(struct hx *t, struct core_err *e)
{
	char what[300];
	if (!t->c->cred_cmd || (t->token && core_now_ns() + (int64_t)CREDENTIAL_MARGIN_MS *
	                                    1000000 < t->token_until))
		return CORE_OK;
	if (t->token) {
		explicit_bzero(t->token, strlen(t->token));
		free(t->token);
		t->token = NULL;
	}
	snprintf(what, sizeof what, "mcp server '%s'", t->c->name);
	return credential_run(what, t->c->cred_cmd, t->c->cred_ttl_ms, &t->token,
	                      &t->token_until, e);
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	struct hx *t = x->t;
	size_t len = size * n, k;
	if (len > 5 && !strncmp(p, "HTTP/", 5)) {
		const char *sp = memchr(p, ' ', len);
		x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		x->sse = x->json = 0;
		return len;
	}
	for (k = len; k && (p[k - 1] == '\r' || p[k - 1] == '\n'); k--)
		;
	if (k > 13 && !strncasecmp(p, "content-type:", 13)) {
		const char *v = p + 13;
		while (*v == ' ')
			v++;
		x->sse = !strncasecmp(v, "text/event-stream", 17);
		x->json = !strncasecmp(v, "application/json", 16);
	} else if (k > 15 && !strncasecmp(p, "mcp-session-id:", 15) && x->initialize &&
	           x->status / 100 == 2) {
		const char *v = p + 15;
		while (*v == ' ')
			v++;
		free(t->session);
		/* visible ASCII only (the spec's rule), else not kept */
		t->session = strndup(v, (size_t)(p + k - v));
		for (char *c = t->session; c && *c; c++)
			if (*c < 0x21 || *c > 0x7e) {
				free(t->session);
				t->session = NULL;
				break;
			}
	}
	return len;
}

/* A message of the server's from a stream or a body. */
static enum core_status got(struct xfer *x, const char *p, size_t n)
{
	struct hx *t = x->t;
	if (x->id || x->initialize) {
		json_t *doc = json_loadb(p, n, 0, NULL);
		const json_t *id = json_object_get(doc, "id");
		if (x->id && id && json_equal(id, x->id) && !json_object_get(doc, "method"))
			x->answered = 1;
		const json_t *v = json_object_get(json_object_get(doc, "result"), "protocolVersion");
		if (x->initialize && x->answered && json_is_string(v)) {
			free(t->version);
			t->version = strdup(json_string_value(v));
		}
		json_decref(doc);
	}
	return enqueue(t, p, n);
}

static void resolve_endpoint(struct hx *t, const char *data);

static enum core_status on_event(void *ctx, const char *type, const char *data, size_t n)
{
	struct xfer *x = ctx;
	if (x->kind == K_LEGACY_GET && !strcmp(type, "endpoint")) {
		resolve_endpoint(x->t, data);
		return CORE_OK;
	}
	if (strcmp(type, "message") || !n)
		return CORE_OK;         /* a priming event, or another type */
	return got(x, data, n);
}

static size_t on_write(char *p, size_t size, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	struct hx *t = x->t;
	size_t len = size * n;
	enum core_status st;
	if (x->status / 100 != 2) {
		if (x->buf.len < ERR_KEEP)
			core_buf_add(&x->buf, p, len < ERR_KEEP ? len : ERR_KEEP);
		return len;
	}
	/* No more than max_result_bytes wait unread. */
	if (t->qbytes >= t->c->max_result_bytes) {
		x->paused = 1;
		return CURL_WRITEFUNC_PAUSE;
	}
	if (x->sse) {
		if ((st = sse_feed(&x->p, p, len, &x->why))) {
			x->fail = st;
			return 0;
		}
		return len;
	}
	if ((st = core_buf_add(&x->buf, p, len))) {
		x->fail = st;
		core_fail(&x->why, st, st == CORE_ETOOBIG ? "an answer longer than %zu bytes (the "
		          "server's maxResultBytes)" : "out of memory", t->c->max_result_bytes);
		return 0;
	}
	return len;
}

static struct xfer *xfer_new(struct hx *t, enum kind kind, const char *url, const char *body,
                             size_t body_len, const char *last_id, struct core_err *e)
{
	const struct http_curl *cu = t->cu;
	struct xfer *x = calloc(1, sizeof *x);
	char line[600];
	if (!x || !(x->h = cu->easy_init())) {
		free(x);
		core_fail(e, CORE_ENOMEM, "mcp server '%s': out of memory", t->c->name);
		return NULL;
	}
	x->t = t;
	x->kind = kind;
	core_buf_init(&x->buf, kind == K_POST ? t->c->max_result_bytes : ERR_KEEP + 1);
	sse_init(&x->p, SSE_MODE_SSE, t->c->max_result_bytes, on_event, x);
	http_easy_defaults(x->h, CONNECT_MS, x->errbuf);
	cu->easy_setopt(x->h, CURLOPT_URL, url);
	cu->easy_setopt(x->h, CURLOPT_HEADERFUNCTION, on_header);
	cu->easy_setopt(x->h, CURLOPT_HEADERDATA, x);
	cu->easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_write);
	cu->easy_setopt(x->h, CURLOPT_WRITEDATA, x);
	cu->easy_setopt(x->h, CURLOPT_PRIVATE, x);
	struct curl_slist *h = NULL;
	if (kind == K_POST) {
		if (!(x->body = malloc(body_len + 1)))
			goto nomem;
		memcpy(x->body, body, body_len);
		x->body[body_len] = 0;
		x->body_len = body_len;
		cu->easy_setopt(x->h, CURLOPT_POST, 1L);
		cu->easy_setopt(x->h, CURLOPT_POSTFIELDS, x->body);
		cu->easy_setopt(x->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
		h = cu->slist_append(h, "Content-Type: application/json");
		h = h ? cu->slist_append(h, t->mode == M_LEGACY ? "Accept: application/json"
		                          : "Accept: application/json, text/event-stream") : NULL;
	} else if (kind == K_DELETE) {
		cu->easy_setopt(x->h, CURLOPT_CUSTOMREQUEST, "DELETE");
		cu->easy_setopt(x->h, CURLOPT_TIMEOUT_MS, (long)DELETE_MS);
	} else {
		h = cu->slist_append(h, "Accept: text/event-stream");
	}
	if (t->session && t->mode != M_LEGACY) {
		snprintf(line, sizeof line, "Mcp-Session-Id: %s", t->session);
		h = cu->slist_append(h, line);
	}
	if (t->version && t->mode != M_LEGACY) {
		snprintf(line, sizeof line, "MCP-Protocol-Version: %.100s", t->version);
		h = cu->slist_append(h, line);
	}
	if (last_id && *last_id) {
		snprintf(line, sizeof line, "Last-Event-ID: %s", last_id);
		h = cu->slist_append(h, line);
	}
	for (char **u = t->c->headers; u && *u; u++)
		h = cu->slist_append(h, *u);
	if (t->token) {
		char *auth;
		if (asprintf(&auth, "Authorization: Bearer %s", t->token) < 0)
			goto nomem;
		h = cu->slist_append(h, auth);
		explicit_bzero(auth, strlen(auth));
		free(auth);
	}
	if (!h && kind != K_DELETE)
		goto nomem;
	x->hdrs = h;
	cu->easy_setopt(x->h, CURLOPT_HTTPHEADER, h);
	if (cu->multi_add_handle(t->m, x->h) != CURLM_OK)
		goto nomem;
	x->next = t->xfers;
	t->xfers = x;
	return x;
nomem:
	cu->slist_free_all(h);
	x->hdrs = NULL;
	xfer_free(x);
	core_fail(e, CORE_ENOMEM, "mcp server '%s': out of memory", t->c->name);
	return NULL;
}

static void xfer_free(struct xfer *x)
{
	if (!x)
		return;
	const struct http_curl *cu = x->t->cu;
	if (x->h) {
		if (x->t->m)
			cu->multi_remove_handle(x->t->m, x->h);
		cu->easy_cleanup(x->h);
	}
	if (x->hdrs) {
		/* the slist holds the Authorization header */
		for (struct curl_slist *s = x->hdrs; s; s = s->next)
			explicit_bzero(s->data, strlen(s->data));
		cu->slist_free_all(x->hdrs);
	}
	free(x->body);
	json_decref(x->id);
	core_buf_release(&x->buf);
	sse_release(&x->p);
	free(x);
}

static void unlink_xfer(struct hx *t, struct xfer *x)
{
	for (struct xfer **p = &t->xfers; *p; p = &(*p)->next)
		if (*p == x) {
			*p = x->next;
			break;
		}
	xfer_free(x);
}

/* POST one message (body) to where messages go now. */
static enum core_status post(struct hx *t, const char *body, size_t len, const json_t *id,
                             int initialize, struct core_err *e)
{
	struct xfer *x;
	enum core_status st;
	if ((st = fresh_token(t, e)))
		return st;
	x = xfer_new(t, K_POST, t->mode == M_LEGACY ? t->post_url : t->c->url, body, len, NULL, e);
	if (!x)
		return e->st;
	x->id = id ? json_deep_copy(id) : NULL;
	x->initialize = initialize;
	return CORE_OK;
}

/* The "endpoint" event: the URL the messages go to, the same origin. */
static void resolve_endpoint(struct hx *t, const char *data)
{
	const char *base = t->c->url;
	size_t origin = strcspn(base + strcspn(base, ":") + 3, "/?#") + strcspn(base, ":") + 3;
	char *u = NULL;
	if (!strncmp(data, "http://", 7) || !strncmp(data, "https://", 8)) {
		if (strncmp(data, base, origin) || (data[origin] && data[origin] != '/')) {
			die(t, CORE_EINTERNAL, "mcp server '%s' (%s) named an endpoint on "
			    "another origin", t->c->name, t->shown);
			return;
		}
		u = strdup(data);
	} else if (data[0] == '/') {
		if (asprintf(&u, "%.*s%s", (int)origin, base, data) < 0)
			u = NULL;
	} else {
		size_t dir = strcspn(base, "?#");
		while (dir > origin && base[dir - 1] != '/')
			dir--;
		if (asprintf(&u, "%.*s%s%s", (int)dir, base, dir == origin ? "/" : "", data) < 0)
			u = NULL;
	}
	if (!u) {
		die(t, CORE_ENOMEM, "mcp server '%s': out of memory", t->c->name);
		return;
	}
	if (u[strcspn(u, "\r\n ")]) {
		free(u);
		die(t, CORE_EINTERNAL, "mcp server '%s' (%s) named a malformed endpoint",
		    t->c->name, t->shown);
		return;
	}
	free(t->post_url);
	t->post_url = u;
}

/* The messages held for the endpoint, in order, once it is known (not in
 * a libcurl callback: no transfer may be added there). */
static void flush_held(struct hx *t)
{
	size_t i;
	json_t *v;
	struct core_err e = { 0 };
	json_array_foreach(t->held, i, v) {
		const char *s = json_string_value(json_array_get(v, 0));
		const json_t *id = json_array_get(v, 1);
		if (post(t, s, strlen(s), json_is_null(id) ? NULL : id,
		         json_is_true(json_array_get(v, 2)), &e)) {
			die(t, e.st, "%s", e.msg);
			return;
		}
	}
	json_array_clear(t->held);
}

/* 401 and 403: the server wants a token it was not given. */
static void unauthorized(struct hx *t, long status)
{
	if (t->token) {
		explicit_bzero(t->token, strlen(t->token));
		free(t->token);
		t->token = NULL;
	}
	die(t, CORE_EUNAUTH, "mcp server '%s' (%s) answered %ld %s: give it a token in the "
	    "entry's \"headers\" (\"Authorization\": \"Bearer ${TOKEN}\") or a "
	    "\"credentialCommand\" (agentkit does not run OAuth's browser sign-in)", t->c->name,
	    t->shown, status, status == 401 ? "Unauthorized" : "Forbidden");
}

static void start_get(struct hx *t, enum kind kind, const char *last, int resumes,
                      const json_t *id)
{
	struct core_err e = { 0 };
	struct xfer *x;
	if (fresh_token(t, &e)) {
		die(t, e.st, "%s", e.msg);
		return;
	}
	if (!(x = xfer_new(t, kind, t->c->url, NULL, 0, last, &e))) {
		die(t, e.st, "%s", e.msg);
		return;
	}
	x->resumes = resumes;
	x->id = id ? json_deep_copy(id) : NULL;
	if (kind == K_GET)
		t->get_started = 1;
}

/* The start of an error body, on one line, for a message. */
static void body_start(struct xfer *x, char *out, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < x->buf.len && k + 4 < n; i++) {
		char c = x->buf.p[i];
		out[k++] = c == '\n' || c == '\r' || c == '\t' ? ' ' : c;
	}
	out[k] = 0;
	utf8_fix_cstr(out, n);
	while (k && out[k - 1] == ' ')
		out[--k] = 0;
}

/* A transfer ended (rc, libcurl's result). */
static void done(struct hx *t, struct xfer *x, CURLcode rc)
{
	const char *cerr = x->errbuf[0] ? x->errbuf : t->cu->easy_strerror(rc);
	char what[ERR_KEEP + 100], start[600];
	struct core_err fe = { 0 };
	long s = x->status;
	int ok2 = s / 100 == 2;

	if (x->fail) {
		/* a message too long, or no memory for one */
		die(t, x->fail, "mcp server '%s' (%s): %s", t->c->name, t->shown,
		    x->why.msg);
		return;
	}
	if (rc == CURLE_OK && ok2 && x->sse && sse_finish(&x->p, &fe)) {
		die(t, fe.st, "mcp server '%s' (%s): %s", t->c->name, t->shown, fe.msg);
		return;
	}
	if (x->kind == K_DELETE)
		return;
	if (rc == CURLE_OK && (s == 401 || s == 403)) {
		unauthorized(t, s);
		return;
	}

	if (x->kind == K_LEGACY_GET) {
		if (rc != CURLE_OK) {
			die(t, CORE_EINTERNAL, "mcp server '%s' (%s): its event stream was cut: %s",
			    t->c->name, t->shown, cerr);
			return;
		}
		if (!ok2) {
			body_start(x, start, sizeof start);
			die(t, CORE_EINTERNAL, "mcp server '%s' (%s) answered the event stream's "
			    "GET with HTTP %ld%s%s", t->c->name, t->shown, s, *start ? ": " : "",
			    start);
			return;
		}
		die(t, CORE_EINTERNAL, "mcp server '%s' (%s) ended its event stream",
		    t->c->name, t->shown);
		return;
	}

	if (x->kind == K_GET) {
		t->get_started = 0;
		if (rc == CURLE_OK && !ok2) {
			/* 405: no stream of its own; anything else: none either */
			t->get_none = 1;
			return;
		}
		if (x->p.id_set)
			snprintf(t->get_last, sizeof t->get_last, "%s", x->p.last_id);
		t->get_fails = x->p.events ? 0 : t->get_fails + 1;
		if (t->get_fails >= RESUME_MAX)
			t->get_none = 1;
		else
			t->get_at_ns = core_now_ns() + (int64_t)(t->get_fails * 100) * 1000000;
		return;
	}

	/* K_POST and K_RESUME */
	if (rc != CURLE_OK && !(x->sse && ok2)) {
		die(t, CORE_EINTERNAL, "mcp server '%s' cannot be reached at %s: %s",
		    t->c->name, t->shown, cerr);
		return;
	}
	if (ok2 && x->initialize && t->mode == M_AUTO)
		t->mode = M_STREAMABLE;
	if (!ok2) {
		if (t->mode == M_AUTO && x->initialize && (s == 400 || s == 404 || s == 405)) {
			/* an HTTP+SSE server: its stream, then initialize again */
			t->mode = M_LEGACY;
			json_t *h = json_pack("[s,O,b]", x->body, x->id, 1);
			if (!h || json_array_append_new(t->held, h)) {
				die(t, CORE_ENOMEM, "mcp server '%s': out of memory", t->c->name);
				return;
			}
			start_get(t, K_LEGACY_GET, NULL, 0, NULL);
			return;
		}
		if (s == 404 && t->session && t->mode == M_STREAMABLE) {
			die(t, CORE_EINTERNAL, "mcp server '%s' (%s) ended the session (HTTP 404)",
			    t->c->name, t->shown);
			return;
		}
		/* the SDKs answer a bad request with a JSON-RPC error body */
		json_t *doc = x->buf.len ? json_loadb(x->buf.p, x->buf.len, 0, NULL) : NULL;
		int rpc = x->id && json_equal(json_object_get(doc, "id"), x->id) &&
		          json_object_get(doc, "error");
		json_decref(doc);
		if (rpc) {
			if (enqueue(t, x->buf.p, x->buf.len))
				die(t, CORE_ENOMEM, "mcp server '%s': out of memory", t->c->name);
			return;
		}
		if (!x->id)
			return;         /* a notification or response refused: nothing waits */
		body_start(x, start, sizeof start);
		snprintf(what, sizeof what, "HTTP %ld%s%s", s, *start ? ": " : "", start);
		answer_error(t, x, what);
		return;
	}
	if (!x->sse) {
		/* HTTP+SSE answers on its stream: a POST's body is "Accepted" */
		if (x->json && t->mode != M_LEGACY && x->buf.len && got(x, x->buf.p, x->buf.len))
			die(t, CORE_ENOMEM, "mcp server '%s': out of memory", t->c->name);
		return;
	}
	if (!x->id || x->answered)
		return;
	/* A stream that ended, or was cut, before its answer. */
	if (x->p.id_set && x->resumes < RESUME_MAX && t->mode == M_STREAMABLE) {
		start_get(t, K_RESUME, x->p.last_id, x->resumes + 1, x->id);
		return;
	}
	if (rc != CURLE_OK) {
		die(t, CORE_EINTERNAL, "mcp server '%s' (%s): the stream of an answer was cut: "
		    "%s", t->c->name, t->shown, cerr);
		return;
	}
	answer_error(t, x, "the server ended the answer's stream without an answer");
}

/* Run the transfers once: what can move moves, what ended is handled. */
static void drive(struct hx *t)
{
	const struct http_curl *cu = t->cu;
	int running, left;
	CURLMsg *m;
	cu->multi_perform(t->m, &running);
	if (t->post_url && json_array_size(t->held) && !t->dead)
		flush_held(t);
	while ((m = cu->multi_info_read(t->m, &left)))
		if (m->msg == CURLMSG_DONE) {
			struct xfer *x = NULL;
			cu->easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
			CURLcode rc = m->data.result;
			if (x) {
				done(t, x, rc);
				unlink_xfer(t, x);
			}
		}
	if (t->mode == M_STREAMABLE && t->version && !t->get_started && !t->get_none &&
	    !t->dead && t->get_at_ns && core_now_ns() >= t->get_at_ns) {
		t->get_at_ns = 0;
		start_get(t, K_GET, t->get_last, 0, NULL);
	}
}

/* ---- the operations ---- */

static enum core_status http_open_mode(const struct mcp_server_config *c, enum mode mode,
                                       const struct mcp_transport_ops *ops,
                                       struct mcp_transport **out, struct core_err *e)
{
	struct core_err le = { 0 };
	const struct http_curl *cu = http_curl(&le);
	struct hx *t;
	enum core_status st;
	if (!cu)
		return core_fail(e, le.st, "mcp server '%s': %s", c->name, le.msg);
	if (!(t = calloc(1, sizeof *t)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	t->head = (struct mcp_transport){ ops, getpid() };
	t->c = c;
	t->cu = cu;
	t->mode = mode;
	core_url_redact(c->url, t->shown, sizeof t->shown);
	pthread_mutex_init(&t->lock, NULL);
	if (!(t->m = cu->multi_init()) || !(t->held = json_array())) {
		ops->close(&t->head, 0);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	if ((st = fresh_token(t, e))) {
		ops->close(&t->head, 0);
		return st;
	}
	if (mode == M_LEGACY)
		start_get(t, K_LEGACY_GET, NULL, 0, NULL);
	if (t->dead) {
		core_fail(e, t->dead, "%s", t->why.msg);
		ops->close(&t->head, 0);
		return e->st;
	}
	*out = &t->head;
	return CORE_OK;
}

static enum core_status streamable_open(const struct mcp_server_config *c,
                                        void (*sink)(void *, const char *, const char *),
                                        void *sink_ctx, struct mcp_transport **out,
                                        struct core_err *e)
{
	(void)sink, (void)sink_ctx;
	return http_open_mode(c, M_STREAMABLE, &mcp_transport_http, out, e);
}

static enum core_status sse_open(const struct mcp_server_config *c,
                                 void (*sink)(void *, const char *, const char *),
                                 void *sink_ctx, struct mcp_transport **out,
                                 struct core_err *e)
{
	(void)sink, (void)sink_ctx;
	return http_open_mode(c, M_LEGACY, &mcp_transport_sse, out, e);
}

static enum core_status url_open(const struct mcp_server_config *c,
                                 void (*sink)(void *, const char *, const char *),
                                 void *sink_ctx, struct mcp_transport **out,
                                 struct core_err *e)
{
	(void)sink, (void)sink_ctx;
	return http_open_mode(c, M_AUTO, &mcp_transport_url, out, e);
}

static enum core_status http_send(struct mcp_transport *tr, const json_t *msg,
                                  int64_t timeout_ms, const struct mcp_cancel *cancel,
                                  struct core_err *e)
{
	struct hx *t = (struct hx *)tr;
	enum core_status st = CORE_OK;
	const json_t *id = json_object_get(msg, "id");
	const char *method = json_string_value(json_object_get(msg, "method"));
	char *body;
	(void)timeout_ms, (void)cancel;
	if (!(body = json_dumps(msg, JSON_COMPACT)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	t->cu->multi_wakeup(t->m);
	pthread_mutex_lock(&t->lock);
	if (t->dead) {
		st = core_fail(e, t->dead == CORE_ENOMEM ? CORE_EINTERNAL : t->dead, "%s",
		               t->why.msg);
	} else if (t->mode == M_LEGACY && !t->post_url) {
		json_t *h = json_pack("[s,O?,b]", body, method ? id : NULL,
		                      method && !strcmp(method, "initialize"));
		if (!h || json_array_append_new(t->held, h))
			st = core_fail(e, CORE_ENOMEM, "out of memory");
	} else {
		int init = method && !strcmp(method, "initialize");
		st = post(t, body, strlen(body), method ? id : NULL, init, e);
		if (!st && method && !strcmp(method, "notifications/initialized"))
			t->get_at_ns = core_now_ns();
		if (!st)
			drive(t);
	}
	pthread_mutex_unlock(&t->lock);
	free(body);
	return st;
}

static enum core_status http_receive(struct mcp_transport *tr, int64_t timeout_ms,
                                     const struct mcp_cancel *cancel, const char **msg,
                                     size_t *len, struct core_err *e)
{
	struct hx *t = (struct hx *)tr;
	int64_t end = core_now_ns() + timeout_ms * 1000000;
	enum core_status st;
	pthread_mutex_lock(&t->lock);
	free(t->cur);
	t->cur = NULL;
	for (;;) {
		if (t->qh) {
			struct msg *m = t->qh;
			if (!(t->qh = m->next))
				t->qt = NULL;
			t->qbytes -= m->len;
			/* the message's own memory, handed out as it is */
			memmove(m, m->p, m->len + 1);
			t->cur = (char *)m;
			*msg = t->cur;
			*len = strlen(t->cur);
			for (struct xfer *x = t->xfers; x; x = x->next)
				if (x->paused && t->qbytes < t->c->max_result_bytes) {
					x->paused = 0;
					t->cu->easy_pause(x->h, CURLPAUSE_CONT);
				}
			pthread_mutex_unlock(&t->lock);
			return CORE_OK;
		}
		if (t->dead) {
			st = core_fail(e, t->dead == CORE_ENOMEM ? CORE_EINTERNAL : t->dead, "%s",
			               t->why.msg);
			break;
		}
		if (cancel && cancel->fn && cancel->fn(cancel->ctx)) {
			st = core_fail(e, CORE_ECANCELLED, "mcp server '%s': cancelled", t->c->name);
			break;
		}
		int64_t left = (end - core_now_ns()) / 1000000;
		if (left <= 0) {
			st = core_fail(e, CORE_EDEADLINE, "mcp server '%s' did not answer within %lld ms",
			               t->c->name, (long long)timeout_ms);
			break;
		}
		drive(t);
		if (t->qh || t->dead)
			continue;
		t->cu->multi_poll(t->m, NULL, 0, (int)(left < SLICE_MS ? left : SLICE_MS), NULL);
		drive(t);
	}
	pthread_mutex_unlock(&t->lock);
	return st;
}

static const char *http_session(struct mcp_transport *tr)
{
	return ((struct hx *)tr)->session;
}

static void http_tail(struct mcp_transport *t, const char *msg, struct core_buf *b)
{
	/* nothing is said beside the messages */
	(void)t, (void)msg, (void)b;
}

static void drop_all(struct hx *t)
{
	while (t->xfers) {
		struct xfer *x = t->xfers;
		t->xfers = x->next;
		xfer_free(x);
	}
}

static void http_kill(struct mcp_transport *tr)
{
	struct hx *t = (struct hx *)tr;
	pthread_mutex_lock(&t->lock);
	drop_all(t);
	die(t, CORE_EINTERNAL, "mcp server '%s' (%s) was stopped", t->c->name, t->shown);
	pthread_mutex_unlock(&t->lock);
}

static void http_close(struct mcp_transport *tr, int64_t grace_ms)
{
	struct hx *t = (struct hx *)tr;
	if (!t)
		return;
	/* Inherited across fork: the connections are the parent's; only
	 * this process's memory is freed (the handles are left alone). */
	if (t->head.pid == getpid()) {
		drop_all(t);
		if (t->session && t->mode == M_STREAMABLE && t->m && !t->dead) {
			struct core_err e = { 0 };
			int64_t end = core_now_ns() + (grace_ms < DELETE_MS ? grace_ms : DELETE_MS) *
			              1000000;
			if (xfer_new(t, K_DELETE, t->c->url, NULL, 0, NULL, &e))
				while (t->xfers && core_now_ns() < end) {
					t->cu->multi_poll(t->m, NULL, 0, SLICE_MS, NULL);
					drive(t);
				}
			drop_all(t);
		}
		if (t->m)
			t->cu->multi_cleanup(t->m);
	} else {
		while (t->xfers) {
			struct xfer *x = t->xfers;
			t->xfers = x->next;
			x->h = NULL;
			x->hdrs = NULL;     /* libcurl's memory: left as it is */
			xfer_free(x);
		}
	}
	for (struct msg *m = t->qh, *n; m; m = n) {
		n = m->next;
		free(m);
	}
	if (t->token) {
		explicit_bzero(t->token, strlen(t->token));
		free(t->token);
	}
	pthread_mutex_destroy(&t->lock);
	json_decref(t->held);
	free(t->init_body);
	free(t->cur);
	free(t->session);
	free(t->version);
	free(t->post_url);
	free(t);
}

const struct mcp_transport_ops mcp_transport_http = {
	.type = "http",
	.network = "tcp",
	.session = http_session,
	.open = streamable_open,
	.send = http_send,
	.receive = http_receive,
	.tail = http_tail,
	.kill = http_kill,
	.close = http_close,
};

const struct mcp_transport_ops mcp_transport_sse = {
	.type = "sse",
	.network = "tcp",
	.session = http_session,
	.open = sse_open,
	.send = http_send,
	.receive = http_receive,
	.tail = http_tail,
	.kill = http_kill,
	.close = http_close,
};

const struct mcp_transport_ops mcp_transport_url = {
	.type = "url",
	.network = "tcp",
	.session = http_session,
	.open = url_open,
	.send = http_send,
	.receive = http_receive,
	.tail = http_tail,
	.kill = http_kill,
	.close = http_close,
};
