/* remote.c - one turn against Genkit's wire over HTTP (remote.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remote.h"
#include "../base/buf.h"
#include "../base/http.h"
#include "../base/json.h"
#include "../base/utf8.h"
#include "../base/util.h"
#include "../model/endpoints.h"
#include "../model/provider_common.h"

#define REMOTE_MAX_EVENT ((size_t)64 << 20)
#define REMOTE_MAX_HEADERS 64
/* ours, the caller's, the models file's */
#define REMOTE_HV_MAX (4 + REMOTE_MAX_HEADERS + PROV_HEADERS_MAX)

/*
 * Where a request goes: url as given (http://, https://), or NAME/AGENT...
 * of a genkit endpoint of the models file, expanded, with that endpoint's
 * key and headers (endpoints_agent_target()).  Messages keep naming the
 * url as given.  A missing key is CORE_ENOKEY, as a model endpoint's.
 */
struct target {
	const char *url;
	char *owned;
	struct prov_headers eh;
};

static enum core_status target_open(struct target *t, const char *url, struct core_err *e)
{
	enum core_status st;
	memset(t, 0, sizeof *t);
	t->url = url;
	if (!strncmp(url, "http://", 7) || !strncmp(url, "https://", 8))
		return CORE_OK;
	if ((st = endpoints_agent_target(url, &t->owned, &t->eh, e)) != CORE_OK)
		return prov_key_missing(st, e);
	t->url = t->owned;
	return CORE_OK;
}

/* hv[*n...]: the caller's headers, then the endpoint's; NULL-terminated. */
static void target_headers(const struct target *t, const char *const *caller, const char **hv,
                           size_t *n)
{
	for (const char *const *h = caller; h && *h && *n < 4 + REMOTE_MAX_HEADERS; h++)
		hv[(*n)++] = *h;
	for (size_t i = 0; i < t->eh.n && *n < REMOTE_HV_MAX; i++)
		hv[(*n)++] = t->eh.v[i];
	hv[*n] = NULL;
}

static void target_close(struct target *t)
{
	prov_headers_release(&t->eh);
	free(t->owned);
}

struct turn {
	const struct remote_turn *t;
	struct core_buf pending;        /* bytes of the frame not yet ended */
	json_t *final;
	struct core_err *e;
	int emitted;
};

static enum core_status on_event(struct turn *tr, const char *data, size_t n)
{
	struct core_err pe = { 0 };
	json_t *v, *m;
	enum core_status st = CORE_OK;
	if (tr->final)          /* nothing counts after the result */
		return CORE_OK;
	if (!(v = jv_parse(data, n, "the server's event", 1, &pe)) || !json_is_object(v)) {
		json_decref(v);
		return core_fail(tr->e, CORE_EINTERNAL, "%s: an event that is not Genkit's: %s",
		                 tr->t->url, pe.msg[0] ? pe.msg : "not an object");
	}
	tr->emitted = 1;
	if ((m = json_object_get(v, "message")))
		st = tr->t->on_chunk ? tr->t->on_chunk(tr->t->ctx, m, tr->e) : CORE_OK;
	else if ((m = json_object_get(v, "result")))
		tr->final = json_pack("{s:O}", "output", m);
	else if ((m = json_object_get(v, "error")))
		tr->final = json_pack("{s:O}", "error", m);
	else
		st = core_fail(tr->e, CORE_EINTERNAL, "%s: an event with neither message, "
		               "result nor error", tr->t->url);
	json_decref(v);
	return st;
}

/* A frame that is not Genkit's, its first 60 bytes (of the frame alone)
 * in the message, made valid UTF-8. */
static enum core_status not_genkit(struct turn *tr, const char *f, size_t n, struct core_err *e)
{
	char *shown = utf8_dup(f, n < 60 ? n : 60);
	enum core_status st = core_fail(e, CORE_EINTERNAL, "%s: a frame that is not Genkit's: %s",
	                                tr->t->url, shown ? shown : "");
	free(shown);
	return st;
}

/*
 * The stream framed as Genkit's own client reads it (streamFlow): frames
 * end with a blank line, each is "data: JSON", or "error: JSON" as
 * Genkit JS express writes a failure (not an SSE field: a generic SSE
 * parser would drop it).
 */
static enum core_status frames(struct turn *tr, int at_end, struct core_err *e)
{
	struct core_buf *b = &tr->pending;
	size_t start = 0;
	enum core_status st = CORE_OK;
	for (;;) {
		char *end = b->len > start ? memmem(b->p + start, b->len - start, "\n\n", 2) : NULL;
		size_t n = end ? (size_t)(end - (b->p + start)) : at_end ? b->len - start : 0;
		const char *f = b->p + start;
		if (!n && !end)
			break;
		while (n && (*f == '\n' || *f == '\r')) {
			f++;
			n--;
		}
		if (tr->final)          /* nothing counts after the result */
			;
		else if (n > 5 && !strncmp(f, "data:", 5))
			st = on_event(tr, f + 5, n - 5);
		else if (n > 6 && !strncmp(f, "error:", 6))
			st = on_event(tr, f + 6, n - 6);
		else if (n && *f == '{')        /* a server that answered without streaming */
			st = on_event(tr, f, n);
		else if (n)
			st = not_genkit(tr, f, n, e);
		start = end ? (size_t)(end - b->p) + 2 : b->len;
		if (st || !end)
			break;
	}
	if (start) {            /* (an empty body has no buffer at all) */
		memmove(b->p, b->p + start, b->len - start);
		b->len -= start;
	}
	return st;
}

static enum core_status on_body(void *ctx, const char *p, size_t n, struct core_err *e)
{
	struct turn *tr = ctx;
	tr->e = e;
	if (core_buf_add(&tr->pending, p, n))
		return core_fail(e, CORE_ETOOBIG, "%s: an event over %zu bytes", tr->t->url,
		                 REMOTE_MAX_EVENT);
	return frames(tr, 0, e);
}

static enum core_status on_end(void *ctx, struct core_err *e)
{
	struct turn *tr = ctx;
	enum core_status st;
	tr->e = e;
	if ((st = frames(tr, 1, e)) != CORE_OK)
		return st;
	return tr->final ? CORE_OK : core_fail(e, CORE_EUNAVAILABLE, "%s: the stream ended "
	                                       "before its result", tr->t->url);
}

/* The status an HTTP code stands for, where the body names none. */
static const char *code_status(long code)
{
	static const struct { long code; const char *name; } map[] = {
		{ 400, "INVALID_ARGUMENT" }, { 401, "UNAUTHENTICATED" }, { 403, "PERMISSION_DENIED" },
		{ 404, "NOT_FOUND" }, { 409, "ABORTED" }, { 413, "RESOURCE_EXHAUSTED" },
		{ 429, "RESOURCE_EXHAUSTED" }, { 499, "CANCELLED" }, { 501, "UNIMPLEMENTED" },
		{ 503, "UNAVAILABLE" }, { 504, "DEADLINE_EXCEEDED" },
	};
	for (size_t i = 0; i < sizeof map / sizeof *map; i++)
		if (map[i].code == code)
			return map[i].name;
	return "INTERNAL";
}

/* A non-2xx answer as the final {"error": {...}} line. */
static enum core_status on_error(void *ctx, struct http_error *err, struct core_err *e)
{
	struct turn *tr = ctx;
	struct core_err pe = { 0 };
	json_t *body = err->body_len ? jv_parse(err->body, err->body_len, "the error", 0, &pe) : NULL;
	json_t *obj = json_is_object(json_object_get(body, "error")) ? json_object_get(body, "error")
	                                                             : body;
	const char *status = json_string_value(json_object_get(obj, "status"));
	const char *msg = json_string_value(json_object_get(obj, "message"));
	char text[512];
	err->retryable = 0;
	if (!err->status) {
		json_decref(body);
		return core_fail(e, CORE_EUNAVAILABLE, "%s: no answer", tr->t->url);
	}
	if (!msg) {
		snprintf(text, sizeof text, "%s: HTTP %ld%s%.*s", tr->t->url, err->status,
		         err->body_len ? ": " : "", (int)strcspn(err->body, "\n"), err->body);
		msg = text;
	}
	/* Genkit's status names are [A-Z_]; express's own 400 says
	 * "INVALID ARGUMENT". */
	if (!status || !*status || status[strspn(status, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_")])
		status = code_status(err->status);
	tr->final = json_pack("{s:{s:s,s:s}}", "error", "status", status, "message", msg);
	json_decref(body);
	return tr->final ? CORE_OK : core_fail(e, CORE_ENOMEM, "out of memory");
}

static int emitted(void *ctx)
{
	(void)ctx;
	return 1;               /* a turn is never sent twice */
}

enum core_status remote_run_turn(const struct remote_turn *t, json_t **final,
                                 struct core_err *e)
{
	struct core_buf body = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	const char *headers[REMOTE_HV_MAX + 1], *tp;
	char tph[256];
	struct http_call c;
	struct turn tr;
	struct target to;
	json_t *env;
	size_t n = 0;
	enum core_status st;
	*final = NULL;
	memset(&tr, 0, sizeof tr);
	tr.t = t;
	tr.e = e;
	if ((st = target_open(&to, t->url, e)) != CORE_OK)
		return st;
	headers[n++] = "Accept: text/event-stream";
	headers[n++] = "Content-Type: application/json";
	/* The caller's trace context goes on to the server (W3C). */
	if ((tp = getenv("TRACEPARENT")) && *tp && strlen(tp) < 200 &&
	    snprintf(tph, sizeof tph, "traceparent: %s", tp) > 0)
		headers[n++] = tph;
	target_headers(&to, t->headers, headers, &n);
	env = t->init ? json_pack("{s:O,s:O}", "data", t->input, "init", t->init)
	              : json_pack("{s:O,s:{}}", "data", t->input, "init");
	if (!env || jv_dump(env, &body) != CORE_OK) {
		json_decref(env);
		core_buf_release(&body);
		target_close(&to);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	json_decref(env);
	core_buf_init(&tr.pending, REMOTE_MAX_EVENT);
	memset(&c, 0, sizeof c);
	c.url = to.url;
	c.headers = headers;
	c.body = body.p;
	c.body_len = body.len;
	/* Genkit JS express streams as text/plain, and its client checks no
	 * type: neither does this. */
	c.stream_type = NULL;
	c.what = "the agent server";
	/* AGENTKIT_HTTP_CONNECT_TIMEOUT and _IDLE_TIMEOUT bound it (a server
	 * silent that long ends the turn); no retry. */
	if ((st = http_limits_from_env(&c.limits, e)) != CORE_OK) {
		core_buf_release(&tr.pending);
		core_buf_release(&body);
		target_close(&to);
		return st;
	}
	c.limits.retries = 0;
	c.on_body = on_body;
	c.on_error = on_error;
	c.on_end = on_end;
	c.emitted = emitted;
	c.cancelled = t->cancelled;
	c.ctx = &tr;
	c.retry_status_only = 1;
	st = http_post(&c, NULL, e);
	if (!st && !tr.final)
		st = core_fail(e, CORE_EUNAVAILABLE, "%s: no result", t->url);
	if (tr.final && (st == CORE_OK || st == CORE_EUNAVAILABLE)) {
		*final = tr.final;
		st = CORE_OK;
	} else {
		json_decref(tr.final);
	}
	core_buf_release(&tr.pending);
	core_buf_release(&body);
	target_close(&to);
	return st;
}

/* ---- the reader alone ---- */

struct remote_stream {
	struct remote_turn t;
	struct turn tr;
	enum core_status failed;
	struct core_err err;
};

struct remote_stream *remote_stream_new(const char *url,
                                        enum core_status (*on_chunk)(void *ctx,
                                                                     const json_t *chunk,
                                                                     struct core_err *e),
                                        void *ctx)
{
	struct remote_stream *rs = calloc(1, sizeof *rs);
	if (!rs)
		return NULL;
	rs->t.url = url;
	rs->t.on_chunk = on_chunk;
	rs->t.ctx = ctx;
	rs->tr.t = &rs->t;
	rs->tr.e = &rs->err;
	core_buf_init(&rs->tr.pending, REMOTE_MAX_EVENT);
	return rs;
}

enum core_status remote_stream_feed(struct remote_stream *rs, const char *p, size_t n,
                                    struct core_err *e)
{
	if (rs->failed)
		return core_fail(e, rs->failed, "%s", rs->err.msg);
	if ((rs->failed = on_body(&rs->tr, p, n, &rs->err)) != CORE_OK)
		return core_fail(e, rs->failed, "%s", rs->err.msg);
	return CORE_OK;
}

enum core_status remote_stream_end(struct remote_stream *rs, json_t **final,
                                   struct core_err *e)
{
	*final = NULL;
	if (!rs->failed)
		rs->failed = on_end(&rs->tr, &rs->err);
	if (rs->failed)
		return core_fail(e, rs->failed, "%s", rs->err.msg);
	*final = rs->tr.final;
	rs->tr.final = NULL;
	return CORE_OK;
}

void remote_stream_free(struct remote_stream *rs)
{
	if (!rs)
		return;
	json_decref(rs->tr.final);
	core_buf_release(&rs->tr.pending);
	free(rs);
}

/* ---- an invocation: the turns of agent-run --url ---- */

static json_t *text_input(const char *text)
{
	return json_pack("{s:{s:s,s:[{s:s}]}}", "message", "role", "user", "content", "text", text);
}

/* The init of the turn after out: its snapshot (server-managed), else its
 * state (client-managed). */
static json_t *next_init(const json_t *out)
{
	const json_t *id = json_object_get(out, "snapshotId"), *state = json_object_get(out, "state");
	if (json_is_string(id) && *json_string_value(id))
		return json_pack("{s:O}", "snapshotId", id);
	if (state)
		return json_pack("{s:O}", "state", state);
	return NULL;
}

enum core_status remote_invoke(const struct remote_invocation *ri, json_t **final,
                               struct core_err *e)
{
	size_t n = ri->inputs ? json_array_size(ri->inputs) : ri->nmsg;
	json_t *init = ri->init ? json_incref((json_t *)ri->init) : NULL;
	enum core_status st = CORE_OK;
	*final = NULL;
	for (size_t i = 0; i < n && st == CORE_OK; i++) {
		struct remote_turn t = { ri->url, ri->headers, NULL, init, ri->on_chunk,
		                         ri->cancelled, ri->ctx };
		json_t *in = ri->inputs ? json_incref(json_array_get(ri->inputs, i))
		                        : text_input(ri->messages[i]);
		const json_t *out;
		const char *reason;
		if (in && ri->detach && !ri->inputs)
			json_object_set_new(in, "detach", json_true());
		if (!(t.input = in)) {
			st = core_fail(e, CORE_ENOMEM, "out of memory");
			break;
		}
		json_decref(*final);
		*final = NULL;
		st = remote_run_turn(&t, final, e);
		json_decref(in);
		if (st || !(out = json_object_get(*final, "output")))
			break;
		reason = json_string_value(json_object_get(out, "finishReason"));
		/* A failed, aborted or interrupted turn ends the invocation, as
		 * a local one does. */
		if (reason && (!strcmp(reason, "failed") || !strcmp(reason, "aborted") ||
		               !strcmp(reason, "interrupted") || !strcmp(reason, "detached")))
			break;
		json_decref(init);
		init = next_init(out);
	}
	json_decref(init);
	return st;
}

/* ---- the companions: one plain request each ---- */

struct call {
	const char *url;
	struct core_buf body;
	int route_missing;
};

static enum core_status call_body(void *ctx, const char *p, size_t n, struct core_err *e)
{
	struct call *c = ctx;
	return core_buf_add(&c->body, p, n) ? core_fail(e, CORE_ETOOBIG, "%s: the answer is too "
	                                                "large", c->url) : CORE_OK;
}

/* The server's error as e: its JSON {"status", "message"} (or {"error":
 * ...}), else the HTTP code's status; a 404 without one is a route the
 * server does not have. */
static enum core_status call_error(void *ctx, struct http_error *err, struct core_err *e)
{
	struct call *c = ctx;
	struct core_err pe = { 0 };
	json_t *body = err->body_len ? jv_parse(err->body, err->body_len, "the error", 0, &pe) : NULL;
	json_t *obj = json_is_object(json_object_get(body, "error")) ? json_object_get(body, "error")
	                                                             : body;
	const char *status = json_string_value(json_object_get(obj, "status"));
	const char *msg = json_string_value(json_object_get(obj, "message"));
	enum core_status st;
	err->retryable = 0;
	if (!err->status) {
		json_decref(body);
		return core_fail(e, CORE_EUNAVAILABLE, "%s: no answer", c->url);
	}
	if (!status || !*status || status[strspn(status, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_")])
		status = code_status(err->status);
	c->route_missing = err->status == 404 && !msg;
	st = core_status_from_name(status);
	if (msg)
		core_fail(e, st, "%s", msg);
	else
		core_fail(e, st, "%s: HTTP %ld", c->url, err->status);
	json_decref(body);
	return st;
}

enum core_status remote_call(const char *url, const char *const *headers, const json_t *data,
                             int (*cancelled)(void *ctx), void *ctx, json_t **result,
                             int *route_missing, struct core_err *e)
{
	struct core_buf req = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct call c = { url, CORE_BUF_INIT((size_t)64 << 20), 0 };
	const char *hv[REMOTE_HV_MAX + 1];
	struct http_call hc;
	struct target to;
	json_t *env, *v = NULL;
	size_t n = 0;
	enum core_status st;
	*result = NULL;
	if (route_missing)
		*route_missing = 0;
	if ((st = target_open(&to, url, e)) != CORE_OK)
		return st;
	env = json_pack("{s:O}", "data", data);
	hv[n++] = "Accept: application/json";
	hv[n++] = "Content-Type: application/json";
	target_headers(&to, headers, hv, &n);
	if (!env || jv_dump(env, &req) != CORE_OK) {
		json_decref(env);
		core_buf_release(&req);
		target_close(&to);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	json_decref(env);
	memset(&hc, 0, sizeof hc);
	hc.url = to.url;
	hc.headers = hv;
	hc.body = req.p;
	hc.body_len = req.len;
	hc.what = "the agent server";
	if ((st = http_limits_from_env(&hc.limits, e)) != CORE_OK) {
		core_buf_release(&req);
		target_close(&to);
		return st;
	}
	hc.limits.retries = 0;
	hc.on_body = call_body;
	hc.on_error = call_error;
	hc.emitted = emitted;
	hc.cancelled = cancelled;
	hc.ctx = &c;
	hc.retry_status_only = 1;
	st = http_post(&hc, NULL, e);
	if (!st && !(v = jv_parse(c.body.p ? c.body.p : "", c.body.len, url, 0, e)))
		st = core_fail(e, CORE_EINTERNAL, "%s: the answer is not JSON", url);
	if (!st) {
		const char *m = json_string_value(json_object_get(json_object_get(v, "error"),
		                                                  "message"));
		if (json_object_get(v, "error"))
			st = core_fail(e, CORE_EINTERNAL, "%s: %s", url, m ? m : "the server failed");
		else
			*result = json_incref(json_object_get(v, "result"));
	}
	if (route_missing)
		*route_missing = c.route_missing;
	json_decref(v);
	core_buf_release(&req);
	core_buf_release(&c.body);
	target_close(&to);
	return st;
}

enum core_status remote_get_snapshot(const char *url, const char *const *headers,
                                     const char *snapshot_id, const char *session_id,
                                     int metadata_only, int (*cancelled)(void *ctx),
                                     void *ctx, json_t **row, struct core_err *e)
{
	char to[4096];
	json_t *data = snapshot_id ? json_pack("{s:s}", "snapshotId", snapshot_id)
	                           : json_pack("{s:s}", "sessionId", session_id);
	enum core_status st;
	*row = NULL;
	if (!data || (metadata_only && json_object_set_new(data, "metadataOnly", json_true()))) {
		json_decref(data);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	if ((size_t)snprintf(to, sizeof to, "%s/getSnapshot", url) >= sizeof to) {
		json_decref(data);
		return core_fail(e, CORE_EUSAGE, "the URL is too long");
	}
	st = remote_call(to, headers, data, cancelled, ctx, row, NULL, e);
	json_decref(data);
	if (st == CORE_OK && !json_is_object(*row)) {
		json_decref(*row);
		*row = NULL;
		/* A row that is not there as a null result, not an error. */
		return snapshot_id ? core_fail(e, CORE_ENOTFOUND, "snapshot '%s' not found",
		                               snapshot_id)
		                   : core_fail(e, CORE_ENOTFOUND, "no snapshot found for "
		                               "session '%s'", session_id);
	}
	if (st == CORE_OK && metadata_only)
		json_object_del(*row, "state");
	return st;
}

static int row_terminal(const json_t *row)
{
	const char *s = json_string_value(json_object_get(row, "status"));
	return !s || !*s || !strcmp(s, "completed") || !strcmp(s, "failed") ||
	       !strcmp(s, "aborted") || !strcmp(s, "expired");
}

/* Sleep ms, waking early for a cancel. */
static int nap(int64_t ms, int (*cancelled)(void *ctx), void *ctx)
{
	for (; ms > 0; ms -= 20) {
		if (cancelled && cancelled(ctx))
			return 1;
		usleep(20 * 1000);
	}
	return cancelled && cancelled(ctx);
}

enum core_status remote_wait(const struct remote_wait_req *w, json_t **row, struct core_err *e)
{
	char url[4096];
	json_t *data = json_pack("{s:s,s:b}", "snapshotId", w->id, "metadataOnly", w->metadata_only);
	int64_t backoff = 500;
	int polling = 0;
	enum core_status st = CORE_OK;
	*row = NULL;
	if (!data)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	for (;;) {
		int missing = 0;
		snprintf(url, sizeof url, "%s/%s", w->url, polling ? "getSnapshot" : "waitForSnapshot");
		json_decref(*row);
		*row = NULL;
		st = remote_call(url, w->headers, data, w->cancelled, w->ctx, row, &missing, e);
		if (st == CORE_ENOTFOUND && missing && !polling) {
			/* Genkit JS serves no waitForSnapshot: poll getSnapshot. */
			polling = 1;
			if (w->on_fallback)
				w->on_fallback(w->ctx);
			continue;
		}
		if (st || row_terminal(*row))
			break;
		if (w->deadline_ms >= 0 && core_now_mono_ms() >= w->deadline_ms) {
			st = core_fail(e, CORE_ETIMEOUT, "snapshot '%s' is still %s", w->id,
			               json_string_value(json_object_get(*row, "status")));
			break;
		}
		/* Past the server's cap the row came as it stands: ask again, at
		 * most once a second (as Genkit's handle); polling backs off to 5s. */
		if (nap(polling ? backoff : 1000, w->cancelled, w->ctx)) {
			st = core_fail(e, CORE_ECANCELLED, "the wait was cancelled");
			break;
		}
		if (polling && (backoff *= 2) > 5000)
			backoff = 5000;
	}
	if (st) {
		json_decref(*row);
		*row = NULL;
	}
	json_decref(data);
	return st;
}
