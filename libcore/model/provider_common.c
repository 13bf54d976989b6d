/*
 * provider_common.c - one generate call of an HTTP model provider: the
 * streamed-output accumulator, the key and base URL from the environment,
 * the extra headers, and the generate skeleton (prov_generate).  The
 * HTTP/SSE plumbing is provider_http.c's, the --list-models rows
 * provider_list.c's, the message helpers provider_msg.c's; all are
 * described in provider_common.h.
 */
#include "provider_common.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../base/buf.h"
#include "../base/json.h"
#include "../base/util.h"

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

void prov_out_finish(struct prov_out *o, struct model_response *resp)
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
	/* A trailing CR or LF is the file's or the shell's, not the key's. */
	while (n && s[n - 1] && strchr(" \t\r\n", s[n - 1]))
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
		{
			const char *nl = b.p ? memchr(b.p, '\n', b.len) : NULL;
			n = nl ? (size_t)(nl - b.p) : b.len;
		}
		if (n && memchr(b.p, 0, n)) {
			/* A C string would cut the key there: never send a part. */
			core_buf_release(&b);
			return core_fail(e, CORE_EUNAUTH, "%s: key file '%s' holds a NUL byte", what,
			                 key_file);
		}
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

enum core_status prov_env_headers(const struct model_provider *p, struct prov_headers *h,
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
                                     const char **from, struct core_err *e)
{
	size_t which = 0;
	enum core_status st;
	*key = NULL;
	*fmt = NULL;
	*from = NULL;
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
	*from = key_file && *key_file ? "the key file's key" : p->key_vars[which];
	return CORE_OK;
}

enum core_status prov_generate(const struct prov_dialect *d, const char *name,
                               const struct model_request *req,
                               const struct model_stream *stream,
                               struct model_response *resp, struct core_err *e)
{
	const char *what = d->p->prefix, *fmt = NULL, *from = NULL;
	struct prov_headers h = { 0 };
	char *key = NULL, *base = NULL;
	enum core_status st;
	/* The name first: a call that cannot be right fails before the key
	 * is even looked for. */
	if ((st = check_name(d, what, name, e)))
		return st;
	if ((d->auth_fmt || d->auth_fmts) &&
	    (st = provider_key(d->p, req->key_file, d->auth_fmts, d->auth_fmt, d->key_optional,
	                       &key, &fmt, &from, e)))
		goto out;
	if ((st = prov_env_headers(d->p, &h, e)))
		goto out;
	base = d->base_url ? d->base_url() : prov_env_url(d->p->url_vars, d->p->default_url);
	if (!base) {
		st = core_fail(e, CORE_ENOMEM, "%s: out of memory", what);
		goto out;
	}
	struct prov_target t = { .what = what, .base = base, .key = key, .key_from = from,
	                         .auth_fmt = fmt, .headers = (const char *const *)h.v };
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
	const char *headers[PROV_HEADERS_MAX + 3], *from[PROV_HEADERS_MAX + 3] = { NULL };
	size_t nh = 0;
	json_t *b = NULL;
	enum core_status st;
	if ((st = check_name(d, what, name, e)))
		return st;
	if (!(o = calloc(1, d->size)))
		return core_fail(e, CORE_ENOMEM, "%s: out of memory", what);
	prov_out_init(o, what, stream, e);
	o->key = t->key;
	o->header_from = from;
	o->timeout_ms = t->timeout_ms;
	o->timeout_what = t->timeout_what;
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
	if (auth) {
		from[nh] = t->key_from;
		headers[nh++] = auth;
	}
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
