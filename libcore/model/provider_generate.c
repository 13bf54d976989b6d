/*
 * provider_generate.c - one generate call of an HTTP model provider
 * (prov_generate, prov_generate_to in provider_common.h): the model name
 * checked, the key, base URL and headers found (provider_common.c), the
 * URL and body built by the dialect, and the POST (provider_http.c).
 */
#include "provider_common.h"

#include <stdlib.h>
#include <string.h>

#include "../base/json.h"

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

enum core_status prov_check_key(const struct prov_dialect *d, const char *key_file,
                                struct core_err *e)
{
	const char *fmt, *from;
	char *key = NULL;
	enum core_status st;
	if (!d->auth_fmt && !d->auth_fmts)
		return CORE_OK;
	st = provider_key(d->p, key_file, d->auth_fmts, d->auth_fmt, d->key_optional, &key, &fmt,
	                  &from, e);
	prov_secret_free(key);
	return prov_key_missing(st, e);
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
	struct prov_body b = PROV_BODY_INIT;
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
	st = prov_post(o, url, headers, b.buf.p + b.at, b.buf.len - b.at, d->mode, d->on_event, d->on_error, o, d->terminator,
	               resp);
out:
	if (d->release)
		d->release(o);
	prov_out_release(o);
	core_buf_release(&b.buf);
	prov_secret_free(auth);
	free(url);
	free(o);
	return st;
}
