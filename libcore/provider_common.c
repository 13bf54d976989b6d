/* provider_common.c - plumbing shared by the HTTP model providers. */
#include "provider_common.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "util.h"

void prov_out_init(struct prov_out *o, const char *what,
                   const struct model_stream *stream, struct core_err *e)
{
	memset(o, 0, sizeof *o);
	o->what = what;
	o->stream = stream;
	o->e = e;
	o->parts = json_array();
	core_buf_init(&o->tail, CORE_BUF_UNLIMITED);
}

void prov_out_release(struct prov_out *o)
{
	json_decref(o->parts);
	json_decref(o->usage);
	json_decref(o->meta);
	o->parts = o->usage = o->meta = NULL;
	sse_release(&o->sse);
	core_buf_release(&o->tail);
	o->tail_key = NULL;
}

void prov_out_reset(struct prov_out *o)
{
	json_array_clear(o->parts);
	core_buf_reset(&o->tail);
	o->tail_key = NULL;
	json_decref(o->usage);
	json_decref(o->meta);
	o->usage = o->meta = NULL;
	o->finish[0] = 0;
	o->done = 0;
	o->emitted = 0;
	sse_reset(&o->sse);
}

/* Is p exactly {"KEY": string} (no metadata)? */
static const json_t *only_string(const json_t *p, const char *key)
{
	const json_t *v = json_object_get(p, key);
	return v && json_object_size(p) == 1 && jv_is_string(v) ? v : NULL;
}

void prov_flush(struct prov_out *o)
{
	if (o->tail_key) {
		json_array_append_new(o->parts, json_pack("{s:s%}", o->tail_key,
		                                          o->tail.p ? o->tail.p : "", o->tail.len));
		o->tail_key = NULL;
	}
	core_buf_reset(&o->tail);
}

void prov_add_part(struct prov_out *o, json_t *part)
{
	static const char *const merge[] = { "text", "reasoning" };
	for (size_t i = 0; i < 2; i++) {
		const json_t *v = only_string(part, merge[i]);
		if (!v)
			continue;
		if (o->tail_key != merge[i])
			prov_flush(o);
		if (core_buf_add(&o->tail, json_string_value(v), json_string_length(v)) == CORE_OK) {
			o->tail_key = merge[i];
			json_decref(part);
			return;
		}
	}
	prov_flush(o);
	json_array_append_new(o->parts, part);
}

enum core_status prov_emit(struct prov_out *o, json_t *part)
{
	enum core_status st = CORE_OK;
	if (o->stream && o->stream->chunk) {
		json_t *chunk = json_pack("{s:s, s:i, s:[O]}", "role", "model", "index", 0,
		                          "content", part);
		if (!chunk) {
			json_decref(part);
			return core_fail(o->e, CORE_ENOMEM, "%s: out of memory", o->what);
		}
		o->emitted++;
		st = o->stream->chunk(o->stream->ctx, chunk);
		json_decref(chunk);
		if (st)
			core_fail(o->e, st, "%s: stopped by the stream's reader (%s)", o->what,
			          core_strerror(st));
	}
	prov_add_part(o, part);
	return st;
}

/* Move the result into resp (message, finish reason, usage). */
static void prov_out_finish(struct prov_out *o, struct model_response *resp)
{
	prov_flush(o);
	resp->message = json_pack("{s:s, s:O}", "role", "model", "content", o->parts);
	if (resp->message && json_object_size(o->meta))
		json_object_set(resp->message, "metadata", o->meta);
	snprintf(resp->finish_reason, sizeof resp->finish_reason, "%s", o->finish);
	resp->usage = o->usage;
	o->usage = NULL;
}

static char *trim_dup(const char *s, size_t n)
{
	while (n && (s[0] == ' ' || s[0] == '\t'))
		s++, n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		n--;
	return strndup(s, n);
}

enum core_status prov_key(const char *what, const char *const *envs,
                          const char *key_file, char **key, struct core_err *e)
{
	return prov_key_from(what, envs, key_file, key, NULL, e);
}

enum core_status prov_key_from(const char *what, const char *const *envs,
                               const char *key_file, char **key, size_t *which,
                               struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(64 * 1024);
	*key = NULL;
	if (which)
		*which = 0;
	if (key_file && *key_file) {
		enum core_status st = core_buf_read_file(&b, key_file, e);
		size_t n;
		if (st) {
			core_buf_release(&b);
			core_err_prefix(e, "%s: key file", what);
			return st;
		}
		n = strcspn(b.p ? b.p : "", "\n");
		*key = trim_dup(b.p ? b.p : "", n);
		core_buf_release(&b);
		if (!*key)
			return core_fail(e, CORE_ENOMEM, "%s: out of memory", what);
		if (!**key) {
			free(*key);
			*key = NULL;
			return core_fail(e, CORE_EUNAUTH, "%s: key file '%s' is empty", what, key_file);
		}
		return CORE_OK;
	}
	for (const char *const *v = envs; *v; v++) {
		const char *s = getenv(*v);
		if (s && *s) {
			if (which)
				*which = (size_t)(v - envs);
			*key = trim_dup(s, strlen(s));
			return *key ? CORE_OK : core_fail(e, CORE_ENOMEM, "%s: out of memory", what);
		}
	}
	core_buf_adds(&b, envs[0]);
	for (const char *const *v = envs + 1; *v; v++)
		core_buf_addf(&b, "%s%s", v[1] ? ", " : " or ", *v);
	core_fail(e, CORE_EUNAUTH, "%s: no API key: set %s or give a key file", what,
	          b.p ? b.p : "");
	core_buf_release(&b);
	return CORE_EUNAUTH;
}

char *prov_env_url(const char *const *envs, const char *dflt)
{
	const char *s = dflt;
	size_t n;
	for (const char *const *v = envs; *v; v++) {
		const char *x = getenv(*v);
		if (x && *x) {
			s = x;
			break;
		}
	}
	n = strlen(s);
	while (n && s[n - 1] == '/')
		n--;
	return strndup(s, n);
}

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
static enum core_status call_init(struct http_call *c, const char **all,
                                  const char *const *headers, const char *const *ours,
                                  struct core_err *e)
{
	size_t n = 0, k = 0;
	while (ours[k])
		k++;
	for (; headers && *headers; headers++) {
		if (n + k >= CALL_HEADERS - 1)
			return core_fail(e, CORE_EINVAL, "more than %d request headers",
			                 PROV_HEADERS_MAX);
		all[n++] = *headers;
	}
	for (k = 0; ours[k]; k++)
		all[n++] = ours[k];
	all[n] = NULL;
	memset(c, 0, sizeof *c);
	c->headers = all;
	return http_limits_from_env(&c->limits, e);
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
                           const char *const *headers, const json_t *b,
                           enum sse_mode mode, sse_event_fn on_event,
                           enum core_status (*on_error)(void *, struct http_error *,
                                                        struct core_err *),
                           void *ctx, const char *terminator,
                           struct model_response *resp)
{
	const char *type = mode == SSE_MODE_NDJSON ? "application/x-ndjson" : "text/event-stream";
	const char *all[CALL_HEADERS];
	char accept[64];
	struct post_ctx pc = { o, on_event, on_error, ctx, terminator, 0, PROV_RESPONSE_MAX };
	struct http_call c;
	struct http_result res;
	enum core_status st;
	char *body = prov_dump(b);
	if (!body)
		return core_fail(o->e, CORE_ENOMEM, "%s: cannot encode the request", o->what);
	snprintf(accept, sizeof accept, "Accept: %s", type);
	const char *ours[] = { "Content-Type: application/json", accept, NULL };
	if ((st = call_init(&c, all, headers, ours, o->e)) ||
	    (st = response_max(&pc.max, o->e)))
		goto out;
	sse_init(&o->sse, mode, PROV_EVENT_MAX, on_event, ctx);
	c.url = url;
	c.body = body;
	c.body_len = strlen(body);
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
out:
	free(body);
	return st;
}

/* ---- models endpoints (agent-run --list-models) ---- */

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
	const char *all[CALL_HEADERS];
	static const char *const ours[] = { "Accept: application/json", NULL };
	enum core_status st;
	*doc = NULL;
	prov_out_init(&o, what, NULL, e);
	o.key = key;
	if ((st = call_init(&c, all, headers, ours, e)))
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

static json_t *string_array(const char *const *v)
{
	json_t *a = json_array();
	for (; a && v && *v; v++)
		json_array_append_new(a, json_string(*v));
	return a;
}

enum core_status prov_list_row(json_t *row, const char *const *key_envs, const char *key_file,
                               const char *const *url_envs, const char *base, char **key)
{
	struct core_err e = { 0 };
	const char *from = NULL;
	char pub[2048];
	core_url_redact(base, pub, sizeof pub);
	*key = NULL;
	if (key_envs && key_file && *key_file)
		from = "key file";
	for (const char *const *v = key_envs; v && *v && !from; v++)
		if (getenv(*v) && *getenv(*v))
			from = *v;
	/* The key itself only when the list will be asked for with it; a key
	 * file that cannot be read reads as no key. */
	if (from && prov_key("list", key_envs, key_file, key, &e) == CORE_ENOMEM)
		from = NULL;
	if (json_object_set_new(row, "keyVariables", string_array(key_envs))
	    || json_object_set_new(row, "keyFrom", from && *key ? json_string(from) : json_null())
	    || json_object_set_new(row, "baseUrl", json_string(pub))
	    || json_object_set_new(row, "baseUrlVariables", string_array(url_envs))) {
		prov_secret_free(*key);
		*key = NULL;
		return CORE_ENOMEM;
	}
	return CORE_OK;
}

void prov_headers_release(struct prov_headers *h)
{
	for (size_t i = 0; i < h->n; i++)
		prov_secret_free(h->v[i]);
	h->n = 0;
	h->v[0] = NULL;
}

enum core_status prov_headers_add(struct prov_headers *h, const char *name, const char *value,
                                  struct core_err *e)
{
	if (strpbrk(value, "\r\n"))
		return core_fail(e, CORE_EINVAL, "the value of header '%s' holds a line break", name);
	if (h->n >= PROV_HEADERS_MAX)
		return core_fail(e, CORE_EINVAL, "more than %d request headers", PROV_HEADERS_MAX);
	if (!(h->v[h->n] = prov_strf("%s: %s", name, value)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	h->v[++h->n] = NULL;
	return CORE_OK;
}

/* The headers of p's variables that are set (OpenAI's organization and
 * project). */
static enum core_status env_headers(const struct model_provider *p, struct prov_headers *h,
                                    struct core_err *e)
{
	for (const struct model_env_header *x = p->env_headers; x && x->var; x++) {
		const char *v = getenv(x->var);
		enum core_status st;
		if (v && *v && (st = prov_headers_add(h, x->header, v, e))) {
			core_err_prefix(e, "%s: %s", p->prefix, x->var);
			return st;
		}
	}
	return CORE_OK;
}

enum core_status prov_list_get(const struct model_provider *p, json_t *row,
                               const char *key_file, const char *path,
                               const char *const *auth_fmts, const char *extra, json_t **doc,
                               struct core_err *e)
{
	char *base = prov_env_url(p->url_vars, p->default_url), *key = NULL, *url = NULL;
	char *auth = NULL;
	struct prov_headers h = { 0 };
	size_t which = 0;
	enum core_status st = base ? prov_list_row(row, p->key_vars, key_file, p->url_vars, base,
	                                           &key)
	                           : CORE_ENOMEM;
	*doc = NULL;
	if (!st && p->env_headers)
		st = prov_list_header_vars(row, p);
	if (!st && key) {
		/* Which variable the key came from picks its header. */
		for (const char *const *v = p->key_vars; !(key_file && *key_file) && v && *v; v++)
			if (getenv(*v) && *getenv(*v)) {
				which = (size_t)(v - p->key_vars);
				break;
			}
		url = prov_strf("%s%s", base, path);
		auth = prov_strf(auth_fmts[which], key);
		if (!url || !auth)
			st = CORE_ENOMEM;
		if (!st && !(st = env_headers(p, &h, e))) {
			const char *headers[PROV_HEADERS_MAX + 3] = { auth, extra };
			size_t n = extra ? 2 : 1;
			for (size_t i = 0; i < h.n; i++)
				headers[n++] = h.v[i];
			headers[n] = NULL;
			st = prov_get_json(p->prefix, url, headers, key, doc, e);
		}
	}
	prov_headers_release(&h);
	prov_secret_free(auth);
	prov_secret_free(key);
	free(url);
	free(base);
	return st == CORE_ENOMEM ? core_fail(e, st, "%s: out of memory", p->prefix) : st;
}

enum core_status prov_list_header_vars(json_t *row, const struct model_provider *p)
{
	json_t *a = json_array();
	for (const struct model_env_header *x = p->env_headers; a && x && x->var; x++)
		if (json_array_append_new(a, json_string(x->var))) {
			json_decref(a);
			return CORE_ENOMEM;
		}
	return json_object_set_new(row, "headerVariables", a) ? CORE_ENOMEM : CORE_OK;
}

/* A name the dialect cannot take fails before anything else is looked for. */
static enum core_status check_name(const struct prov_dialect *d, const char *what,
                                   const char *name, struct core_err *e)
{
	if (d->bad_name && d->bad_name(name))
		return core_fail(e, CORE_ENOTFOUND, "%s: bad model name '%s' (use %s/MODEL)", what,
		                 name, what);
	if (!*name)
		return core_fail(e, CORE_ENOTFOUND, "%s: no model name (use %s/MODEL)", what, what);
	return CORE_OK;
}

/*
 * The key of a provider: the key file, else its first variable that is
 * set, and the header that variable goes in.  An optional key comes only
 * from the variables; *key is NULL without an error when none is set.
 */
static enum core_status provider_key(const struct model_provider *p, const char *key_file,
                                     const char *const *auth_fmts, const char *auth_fmt,
                                     int optional, char **key, const char **fmt,
                                     struct core_err *e)
{
	size_t which = 0;
	enum core_status st;
	*key = NULL;
	*fmt = NULL;
	if (optional) {
		/* Only its own variable: a key file (AGENTKIT_KEY_FILE) set for
		 * another provider must not reach a server that needs none. */
		int set = 0;
		key_file = NULL;
		for (const char *const *v = p->key_vars; v && *v && !set; v++)
			set = getenv(*v) && *getenv(*v);
		if (!set)
			return CORE_OK;
	}
	if ((st = prov_key_from(p->prefix, p->key_vars, key_file, key, &which, e)))
		return st;
	*fmt = auth_fmts ? auth_fmts[which] : auth_fmt;
	return CORE_OK;
}

enum core_status prov_generate(const struct prov_dialect *d, const char *name,
                               const struct model_request *req,
                               const struct model_stream *stream,
                               struct model_response *resp, struct core_err *e)
{
	const char *what = d->p->prefix, *fmt = NULL;
	struct prov_headers h = { 0 };
	char *key = NULL, *base = NULL;
	enum core_status st;
	/* The name first: a call that cannot be right fails before the key
	 * is even looked for. */
	if ((st = check_name(d, what, name, e)))
		return st;
	if ((d->auth_fmt || d->auth_fmts) &&
	    (st = provider_key(d->p, req->key_file, d->auth_fmts, d->auth_fmt, d->key_optional,
	                       &key, &fmt, e)))
		goto out;
	if ((st = env_headers(d->p, &h, e)))
		goto out;
	base = d->base_url ? d->base_url() : prov_env_url(d->p->url_vars, d->p->default_url);
	if (!base) {
		st = core_fail(e, CORE_ENOMEM, "%s: out of memory", what);
		goto out;
	}
	struct prov_target t = { what, base, key, fmt, (const char *const *)h.v, NULL };
	st = prov_generate_to(d, &t, name, req, stream, resp, e);
out:
	prov_headers_release(&h);
	prov_secret_free(key);
	free(base);
	return st;
}

enum core_status prov_generate_to(const struct prov_dialect *d, const struct prov_target *t,
                                  const char *name, const struct model_request *req,
                                  const struct model_stream *stream,
                                  struct model_response *resp, struct core_err *e)
{
	const char *what = t->what;
	struct prov_out *o;
	char *url = NULL, *auth = NULL;
	const char *headers[PROV_HEADERS_MAX + 3];
	size_t nh = 0;
	json_t *b = NULL;
	enum core_status st;
	if ((st = check_name(d, what, name, e)))
		return st;
	if (!(o = calloc(1, d->size)))
		return core_fail(e, CORE_ENOMEM, "%s: out of memory", what);
	prov_out_init(o, what, stream, e);
	o->key = t->key;
	url = d->url ? d->url(t->base, d->url_name ? d->url_name(name) : name)
	             : prov_strf(d->url_fmt, t->base, d->url_name ? d->url_name(name) : name);
	if (url && t->query && *t->query) {
		char *q = prov_strf("%s%c%s", url, strchr(url, '?') ? '&' : '?', t->query);
		free(url);
		url = q;
	}
	if (!url || (t->key && t->auth_fmt && !(auth = prov_strf(t->auth_fmt, t->key)))) {
		st = core_fail(e, CORE_ENOMEM, "%s: out of memory", what);
		goto out;
	}
	if ((st = d->build(o, name, t->base, req, &b, e)))
		goto out;
	if (auth)
		headers[nh++] = auth;
	if (d->extra_header)
		headers[nh++] = d->extra_header;
	for (const char *const *x = t->headers; x && *x && nh < PROV_HEADERS_MAX + 2; x++)
		headers[nh++] = *x;
	headers[nh] = NULL;
	/* Each attempt starts clean: prov_post resets o, on_reset the
	 * provider's parse state. */
	o->on_reset = d->on_reset;
	st = prov_post(o, url, headers, b, d->mode, d->on_event, d->on_error, o, d->terminator,
	               resp);
out:
	if (d->release)
		d->release(o);
	prov_out_release(o);
	json_decref(b);
	prov_secret_free(auth);
	free(url);
	free(o);
	return st;
}

static int by_string(const void *a, const void *b)
{
	return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

enum core_status prov_list_models(json_t *row, const char *prefix, const json_t *list,
                                  const char *field, const char *strip)
{
	size_t i, n = 0;
	json_t *m, **v = calloc(json_array_size(list) + 1, sizeof *v), *out = json_array();
	if (!v || !out)
		goto nomem;
	json_array_foreach(list, i, m) {
		const char *name = json_string_value(json_object_get(m, field));
		if (!name)
			continue;
		if (strip && !strncmp(name, strip, strlen(strip)))
			name += strlen(strip);
		char *full = prov_strf("%s/%s", prefix, name);
		v[n] = full ? json_string(full) : NULL;
		free(full);
		if (!v[n++])
			goto nomem;
	}
	qsort(v, n, sizeof *v, by_string);
	for (i = 0; i < n; i++) {
		json_array_append_new(out, v[i]);
		v[i] = NULL;
	}
	free(v);
	return json_object_set_new(row, "models", out) ? CORE_ENOMEM : CORE_OK;
nomem:
	for (i = 0; v && i < n; i++)
		json_decref(v[i]);
	free(v);
	json_decref(out);
	return CORE_ENOMEM;
}

/* ---- Genkit message helpers ---- */

char *prov_text(const json_t *content)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	size_t i;
	json_t *p;
	json_array_foreach(content, i, p) {
		const json_t *t = json_object_get(p, "text");
		if (jv_is_string(t) && json_object_size(p) - (json_object_get(p, "metadata") != NULL) == 1)
			core_buf_add(&b, json_string_value(t), json_string_length(t));
	}
	return core_buf_detach(&b, NULL);
}

char *prov_dump(const json_t *v)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (jv_dump(v ? v : json_null(), &b)) {
		core_buf_release(&b);
		return NULL;
	}
	return core_buf_detach(&b, NULL);
}

char *prov_output_text(const json_t *output)
{
	if (jv_is_string(output))
		return strndup(json_string_value(output), json_string_length(output));
	return prov_dump(output);
}

int prov_data_url(const char *url, char **mime, const char **data)
{
	const char *semi, *comma;
	if (strncmp(url, "data:", 5))
		return 0;
	comma = strchr(url, ',');
	semi = strstr(url, ";base64,");
	if (!comma || !semi || semi + 7 != comma)
		return 0;
	*mime = strndup(url + 5, (size_t)(semi - url - 5));
	*data = comma + 1;
	return *mime != NULL;
}

json_t *prov_ordered_responses(const json_t *prev_model, const json_t *tool_msg)
{
	json_t *out = json_array(), *reqs = json_array(), *left = json_array();
	const json_t *content = json_object_get(tool_msg, "content");
	size_t i, j;
	json_t *p;
	json_array_foreach(json_object_get(prev_model, "content"), i, p)
		if (json_object_get(p, "toolRequest"))
			json_array_append(reqs, json_object_get(p, "toolRequest"));
	json_array_foreach(content, i, p)
		if (json_object_get(p, "toolResponse"))
			json_array_append(left, p);
	/* For each request in order, take the response with its ref, else
	 * the first with its name. */
	json_array_foreach(reqs, i, p) {
		const char *ref = json_string_value(json_object_get(p, "ref"));
		const char *name = json_string_value(json_object_get(p, "name"));
		size_t hit = (size_t)-1;
		json_t *r;
		json_array_foreach(left, j, r) {
			const json_t *tr = json_object_get(r, "toolResponse");
			const char *rref = json_string_value(json_object_get(tr, "ref"));
			if (ref && rref && !strcmp(ref, rref)) {
				hit = j;
				break;
			}
		}
		if (hit == (size_t)-1)
			json_array_foreach(left, j, r) {
				const json_t *tr = json_object_get(r, "toolResponse");
				const char *rname = json_string_value(json_object_get(tr, "name"));
				const char *rref = json_string_value(json_object_get(tr, "ref"));
				if (name && rname && !strcmp(name, rname) && (!ref || !rref)) {
					hit = j;
					break;
				}
			}
		if (hit != (size_t)-1) {
			json_array_append(out, json_array_get(left, hit));
			json_array_remove(left, hit);
		}
	}
	json_array_extend(out, left);
	json_decref(left);
	json_decref(reqs);
	return out;
}

void prov_pass_through(json_t *dst, const json_t *config, const char *const *skip)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)config, k, v) {
		int known = 0;
		for (const char *const *s = skip; *s && !known; s++)
			known = !strcmp(*s, k);
		if (!known && !json_object_get(dst, k))
			json_object_set(dst, k, v);
	}
}

const json_t *prov_cfg(const json_t *config, const char *key)
{
	const json_t *v = json_object_get(config, key);
	return v && !json_is_null(v) ? v : NULL;
}

void prov_map(json_t *dst, const char *key, const json_t *config, const char *from)
{
	const json_t *v = prov_cfg(config, from);
	if (v)
		json_object_set(dst, key, (json_t *)v);
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

char *prov_strf(const char *fmt, ...)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	va_list ap;
	enum core_status st;
	va_start(ap, fmt);
	st = core_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	if (st) {
		core_buf_release(&b);
		return NULL;
	}
	return core_buf_detach(&b, NULL);
}

json_t *prov_tool_decl(const json_t *tool, const char *schema_key)
{
	const json_t *schema = json_object_get(tool, "inputSchema");
	json_t *d = json_pack("{s:O}", "name", json_object_get(tool, "name"));
	if (!d)
		return NULL;
	if (json_object_get(tool, "description"))
		json_object_set(d, "description", json_object_get(tool, "description"));
	json_object_set_new(d, schema_key, json_is_object(schema)
	                    ? json_incref((json_t *)schema)
	                    : json_pack("{s:s, s:{}}", "type", "object", "properties"));
	return d;
}

json_t *prov_function_tools(const json_t *tools)
{
	json_t *arr = json_array(), *t;
	size_t i;
	json_array_foreach(tools, i, t)
		json_array_append_new(arr, json_pack("{s:s, s:o}", "type", "function",
		                                     "function", prov_tool_decl(t, "parameters")));
	return arr;
}

void prov_secret_free(char *s)
{
	if (s) {
		/* volatile: the wipe must not be optimised away before free() */
		volatile char *p = s;
		while (*p)
			*p++ = 0;
		free(s);
	}
}
