/*
 * provider_http.c - the HTTP side of a provider call (provider_common.h):
 * POST and stream with retries decided by what was emitted, the bound on
 * one response, GET of a models endpoint, status mapping and error
 * messages with the key and URL secrets taken out.
 */
#include "provider_common.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../base/buf.h"
#include "../base/json.h"
#include "../base/util.h"

enum core_status prov_http_status(long s)
{
	switch (s) {
	case 400: case 413: case 422: return CORE_EREJECTED;
	case 401: return CORE_EUNAUTH;
	case 402: case 403: return CORE_EPERM;
	case 404: return CORE_ENOTFOUND;
	case 408: case 504: return CORE_EDEADLINE;
	case 409: return CORE_ABORTED;
	case 429: return CORE_EEXHAUSTED;
	case 502: case 503: case 529: return CORE_EUNAVAILABLE;
	}
	if (s >= 500)
		return CORE_EINTERNAL;
	return CORE_EINTERNAL;
}

const char *prov_http_reason(long s)
{
	switch (s) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 402: return "Payment Required";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 529: return "Overloaded";
	}
	return "";
}

json_t *prov_parse(struct prov_out *o, const char *data, size_t n)
{
	json_t *v = jv_parse(data, n, o->what, 0, o->e);
	if (!v) {
		/* A garbled stream is the model's failure, not malformed input
		 * of the caller (DESIGN §8). */
		if (o->e)
			o->e->st = CORE_EINTERNAL;
		core_err_prefix(o->e, "%s: bad stream event", o->what);
	}
	return v;
}

/*
 * Remove the key, and tokens that look like a masked copy of it (OpenAI
 * answers "Incorrect API key provided: sk-abc***xyz"), from a message.
 */
static void redact(struct core_err *e, const char *key)
{
	char out[sizeof e->msg];
	size_t klen, o = 0;
	const char *p;
	if (!e || !key || (klen = strlen(key)) < 4)
		return;
	for (p = e->msg; *p && o + 16 < sizeof out;) {
		int tokstart = p == e->msg || p[-1] == ' ' || p[-1] == '"' || p[-1] == '\'' ||
		               p[-1] == ':' || p[-1] == '=' || p[-1] == '(';
		if (!strncmp(p, key, klen) ||
		    (tokstart && klen >= 8 && !strncmp(p, key, 4))) {
			size_t t = strcspn(p, " \"',;)");
			memcpy(out + o, "[redacted]", 10);
			o += 10;
			p += t > klen && !strncmp(p, key, klen) ? klen : t;
			continue;
		}
		out[o++] = *p++;
	}
	out[o] = 0;
	memcpy(e->msg, out, o + 1);
}

struct post_ctx {
	struct prov_out *o;
	sse_event_fn on_event;
	enum core_status (*on_error)(void *, struct http_error *, struct core_err *);
	void *ctx;
	const char *terminator;
	size_t bytes;                   /* this attempt's body bytes */
	size_t max;                     /* the most one response may bring */
};

/* ---- retry and stream plumbing (http.h callbacks) ---- */

static void post_attempt(void *ud)
{
	struct post_ctx *pc = ud;
	prov_out_reset(pc->o);
	pc->bytes = 0;
	if (pc->o->on_reset)
		pc->o->on_reset(pc->ctx);
}

static enum core_status post_body(void *ud, const char *p, size_t n, struct core_err *e)
{
	struct post_ctx *pc = ud;
	enum core_status st;
	/* The whole reply is bounded, not only each event: a stream of
	 * small deltas would otherwise grow the message without end (only
	 * the idle timeout stops a server that keeps talking).  Not retried:
	 * the same request would bring the same flood. */
	if (n > pc->max - pc->bytes)
		return core_fail(e, CORE_EINTERNAL, "%s: the response passed %zu bytes (the limit; "
		                 "set AGENTKIT_HTTP_MAX_RESPONSE to raise it)", pc->o->what, pc->max);
	pc->bytes += n;
	st = sse_feed(&pc->o->sse, p, n, e);
	/* An event over the cap is a garbled stream: the model's failure. */
	if (st == CORE_ETOOBIG)
		st = e->st = CORE_EINTERNAL;
	return st;
}

/* The body ended: flush the framing; without the terminator it was cut. */
static enum core_status post_end(void *ud, struct core_err *e)
{
	struct post_ctx *pc = ud;
	enum core_status st = sse_finish(&pc->o->sse, e);
	if (!st && !pc->o->done)
		st = core_fail(e, CORE_EUNAVAILABLE,
		               "%s: the stream ended before %s (truncated after %zu bytes)",
		               pc->o->what, pc->terminator, pc->bytes);
	return st;
}

static int post_emitted(void *ud)
{
	struct post_ctx *pc = ud;
	return pc->o->emitted > 0;
}

static enum core_status post_error(void *ud, struct http_error *he, struct core_err *e)
{
	struct post_ctx *pc = ud;
	return pc->on_error(pc->ctx, he, e);
}

static int post_cancelled(void *ud)
{
	struct post_ctx *pc = ud;
	const struct model_stream *s = pc->o->stream;
	return s && s->cancelled && s->cancelled(s->ctx);
}

/*
 * A call's headers and limits: the provider's headers (as many as fit),
 * then ours, in all[CALL_HEADERS]; the limits from the environment.
 */
#define CALL_HEADERS (PROV_HEADERS_MAX + 8)
static enum core_status call_init(struct http_call *c, const char **all, const char **from,
                                  const char *const *headers, const char *const *header_from,
                                  const char *const *ours, struct core_err *e)
{
	size_t n = 0, k = 0;
	while (ours[k])
		k++;
	for (; headers && headers[n]; n++) {
		if (n + k >= CALL_HEADERS - 1)
			return core_fail(e, CORE_EINVAL, "more than %d request headers",
			                 PROV_HEADERS_MAX);
		all[n] = headers[n];
		from[n] = header_from ? header_from[n] : NULL;
	}
	for (k = 0; ours[k]; k++, n++) {
		all[n] = ours[k];
		from[n] = NULL;
	}
	all[n] = NULL;
	memset(c, 0, sizeof *c);
	c->headers = all;
	c->header_from = from;
	return http_limits_from_env(&c->limits, e);
}

/* The call's total deadline: the target's, else AGENTKIT_MODEL_TIMEOUT,
 * else PROV_TIMEOUT_MS. */
static enum core_status call_deadline(const struct prov_out *o, struct http_call *c,
                                      struct core_err *e)
{
	if (o->timeout_ms > 0) {
		c->limits.total_ms = o->timeout_ms;
		c->deadline_what = o->timeout_what;
		return CORE_OK;
	}
	c->deadline_what = "the model timeout; set AGENTKIT_MODEL_TIMEOUT or --model-timeout "
	                   "to raise it";
	return core_duration_setting(NULL, NULL, "AGENTKIT_MODEL_TIMEOUT", PROV_TIMEOUT_MS,
	                             &c->limits.total_ms, e);
}

/* AGENTKIT_HTTP_MAX_RESPONSE, a size, when set (else *max is kept). */
static enum core_status response_max(size_t *max, struct core_err *e)
{
	const char *v = getenv("AGENTKIT_HTTP_MAX_RESPONSE");
	struct core_err pe = { 0 };
	uint64_t n;
	if (!v || !*v)
		return CORE_OK;
	if (core_parse_size(v, &n, &pe))
		return core_fail(e, CORE_EUSAGE, "AGENTKIT_HTTP_MAX_RESPONSE: %s", pe.msg);
	if (!n)
		return core_fail(e, CORE_EUSAGE, "AGENTKIT_HTTP_MAX_RESPONSE: must be positive");
	*max = n > SIZE_MAX ? SIZE_MAX : (size_t)n;
	return CORE_OK;
}

/* A failed call's message: neither the key nor a secret in a URL it quotes. */
static void scrub_message(struct core_err *e, const char *key)
{
	redact(e, key);
	if (e)
		core_url_redact_text(e->msg, sizeof e->msg);
}

enum core_status prov_post(struct prov_out *o, const char *url,
                           const char *const *headers, const char *body, size_t len,
                           enum sse_mode mode, sse_event_fn on_event,
                           enum core_status (*on_error)(void *, struct http_error *,
                                                        struct core_err *),
                           void *ctx, const char *terminator,
                           struct model_response *resp)
{
	const char *type = mode == SSE_MODE_NDJSON ? "application/x-ndjson" : "text/event-stream";
	const char *all[CALL_HEADERS], *from[CALL_HEADERS];
	char accept[64];
	struct post_ctx pc = { o, on_event, on_error, ctx, terminator, 0, PROV_RESPONSE_MAX };
	struct http_call c;
	struct http_result res;
	enum core_status st;
	snprintf(accept, sizeof accept, "Accept: %s", type);
	const char *ours[] = { "Content-Type: application/json", accept, NULL };
	if ((st = call_init(&c, all, from, headers, o->header_from, ours, o->e)) ||
	    (st = call_deadline(o, &c, o->e)) || (st = response_max(&pc.max, o->e)))
		return st;
	sse_init(&o->sse, mode, PROV_EVENT_MAX, on_event, ctx);
	c.url = url;
	c.body = body;
	c.body_len = len;
	c.stream_type = type;
	c.what = o->what;
	c.on_attempt = post_attempt;
	c.on_body = post_body;
	c.on_error = post_error;
	c.cancelled = post_cancelled;
	c.emitted = post_emitted;
	c.on_end = post_end;
	c.ctx = &pc;
	st = http_post(&c, &res, o->e);
	if (st)
		scrub_message(o->e, o->key);
	else
		prov_out_finish(o, resp);
	return st;
}

/* ---- GET of a models endpoint (agent-run --list-models) ---- */

struct get_ctx {
	struct prov_out *o;
	struct core_buf body;
};

static enum core_status get_body(void *ud, const char *p, size_t n, struct core_err *e)
{
	struct get_ctx *g = ud;
	if (core_buf_add(&g->body, p, n))
		return core_fail(e, CORE_EINTERNAL, "%s: the model list is over %zu bytes",
		                 g->o->what, (size_t)PROV_EVENT_MAX);
	return CORE_OK;
}

static enum core_status get_error(void *ud, struct http_error *he, struct core_err *e)
{
	struct get_ctx *g = ud;
	json_t *doc = json_loadb(he->body, he->body_len, 0, NULL);
	const json_t *err = json_object_get(doc, "error");
	const char *msg = json_is_string(err) ? json_string_value(err)
	                : json_string_value(json_object_get(err, "message"));
	enum core_status st = prov_fail_http(g->o, he, prov_http_status(he->status), msg, e);
	json_decref(doc);
	return st;
}

enum core_status prov_get_json(const char *what, const char *url, const char *const *headers,
                               const char *key, json_t **doc, struct core_err *e)
{
	struct prov_out o;
	struct get_ctx g = { &o, CORE_BUF_INIT(PROV_EVENT_MAX) };
	struct http_call c;
	const char *all[CALL_HEADERS], *from[CALL_HEADERS];
	static const char *const ours[] = { "Accept: application/json", NULL };
	enum core_status st;
	*doc = NULL;
	prov_out_init(&o, what, NULL, e);
	o.key = key;
	if ((st = call_init(&c, all, from, headers, NULL, ours, e)))
		goto out;
	c.limits.retries = 0;
	if (c.limits.connect_ms > 10000)
		c.limits.connect_ms = 10000;
	c.url = url;
	c.what = what;
	c.on_body = get_body;
	c.on_error = get_error;
	c.ctx = &g;
	if (!(st = http_post(&c, NULL, e))) {
		json_error_t je;
		*doc = json_loadb(g.body.p ? g.body.p : "", g.body.len, 0, &je);
		if (!*doc)
			st = core_fail(e, CORE_EINTERNAL, "%s: the model list is not JSON: %s",
			               what, je.text);
	}
	if (st)
		scrub_message(e, key);
out:
	core_buf_release(&g.body);
	prov_out_release(&o);
	return st;
}

enum core_status prov_fail_http(struct prov_out *o, const struct http_error *he,
                                enum core_status st, const char *msg,
                                struct core_err *e)
{
	char snippet[201];
	if (!msg || !*msg) {
		/* Not the expected error document: show its start, one line. */
		size_t n = he->body_len < 200 ? he->body_len : 200, i;
		memcpy(snippet, he->body, n);
		snippet[n] = 0;
		for (i = 0; i < n; i++)
			if (snippet[i] == '\n' || snippet[i] == '\r' || snippet[i] == '\t')
				snippet[i] = ' ';
		msg = snippet;
	}
	if (he->status >= 200 && he->status <= 299)
		return core_fail(e, st, "%s: unexpected Content-Type '%s' for a stream (HTTP %ld)%s%s",
		                 o->what, he->content_type, he->status, *msg ? ": " : "", msg);
	core_fail(e, st, "%s: HTTP %ld%s%s%s%s", o->what, he->status,
	          *prov_http_reason(he->status) ? " " : "", prov_http_reason(he->status),
	          *msg ? ": " : "", msg);
	if (he->request_id && *he->request_id) {
		size_t n = strlen(e->msg);
		snprintf(e->msg + n, sizeof e->msg - n, " (request id %s)", he->request_id);
	}
	return st;
}

int64_t prov_delay_hint(const char *text, const char *after)
{
	const char *p = text ? strstr(text, after) : NULL;
	char *end;
	double v;
	if (!p)
		return -1;
	p += strlen(after);
	while (*p == ' ' || *p == '"')
		p++;
	v = strtod(p, &end);
	if (end == p || v < 0)
		return -1;
	if (!strncmp(end, "ms", 2))
		return (int64_t)v;
	if (*end == 's')
		return (int64_t)(v * 1000.0);
	if (*end == 'm')
		return (int64_t)(v * 60000.0);
	return -1;
}
