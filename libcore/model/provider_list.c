/*
 * provider_list.c - the --list-models rows of the HTTP providers
 * (provider_common.h): where the key and base URL come from, the models
 * endpoint's reply as model names.
 */
#include "provider_common.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../base/buf.h"
#include "../base/json.h"
#include "../base/util.h"

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
		if (!st && !(st = prov_env_headers(p, &h, e))) {
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
