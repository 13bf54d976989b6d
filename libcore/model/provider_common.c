/*
 * provider_common.c - the parts of an HTTP model provider's call: the
 * streamed-output accumulator, the key and base URL from the environment,
 * the extra headers.  The HTTP/SSE plumbing is provider_http.c's, the
 * generate skeleton that joins them provider_generate.c's (prov_generate),
 * the --list-models rows provider_list.c's, the message helpers
 * provider_msg.c's; all are described in provider_common.h.
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
	core_fail(e, CORE_EUNAUTH, "%s: no API key: set %s, or name a file holding it with "
	          "--key-file FILE or AGENTKIT_KEY_FILE", what, b.p ? b.p : "");
	core_buf_release(&b);
	return CORE_EUNAUTH;
}

enum core_status prov_key_missing(enum core_status st, struct core_err *e)
{
	if (st != CORE_EUNAUTH)
		return st;
	if (e)
		e->st = CORE_ENOKEY;
	return CORE_ENOKEY;
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
