/*
 * provider_ollama.c - "ollama/MODEL": Ollama's native /api/chat, streamed
 * as NDJSON.  No key.  The server is OLLAMA_HOST ("host", "host:port" or
 * a URL; default 127.0.0.1:11434).  Tool calls arrive whole; tool results
 * go back one "tool" message per result, with tool_name (and tool_call_id
 * when the call had an id).
 */
#include "provider_common.h"

#include <stdlib.h>
#include <string.h>

#include "../base/json.h"

struct oll {
	struct prov_out o;
};

/* ---- request ---- */

static json_t *tool_calls(const json_t *content)
{
	json_t *arr = json_array(), *p;
	size_t i;
	json_array_foreach(content, i, p) {
		const json_t *tr = json_object_get(p, "toolRequest"), *in;
		json_t *c;
		if (!tr)
			continue;
		in = json_object_get(tr, "input");
		c = json_pack("{s:{s:O, s:o}}", "function", "name", json_object_get(tr, "name"),
		              "arguments", json_is_object(in) ? json_incref((json_t *)in)
		              : in && !json_is_null(in) ? json_pack("{s:O}", "input", in) : json_object());
		json_array_append_new(arr, c);
	}
	return arr;
}

/* The images of content as base64 strings (Ollama's "images"); NULL
 * with e set for media it cannot take: other types, or an image by URL. */
static json_t *images(const json_t *content, struct core_err *e)
{
	json_t *arr = json_array(), *p;
	size_t i;
	json_array_foreach(content, i, p) {
		const json_t *m = json_object_get(p, "media");
		const char *url = json_string_value(json_object_get(m, "url"));
		const char *ct = json_string_value(json_object_get(m, "contentType"));
		char *mime = NULL;
		const char *data;
		int ok;
		if (!url)
			continue;
		if (!prov_data_url(url, &mime, &data)) {
			json_decref(arr);
			core_fail(e, CORE_EINVAL, "ollama: cannot send media by URL (give images as data: URLs)");
			return NULL;
		}
		ok = !strncmp(ct ? ct : mime, "image/", 6);
		if (!ok)
			core_fail(e, CORE_EINVAL, "ollama: cannot send media of type '%s' (images only)",
			          ct ? ct : mime);
		free(mime);
		if (!ok) {
			json_decref(arr);
			return NULL;
		}
		json_array_append_new(arr, json_string(data));
	}
	return arr;
}

static char *reasoning_text(const json_t *content)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	json_t *p;
	size_t i;
	json_array_foreach(content, i, p) {
		const json_t *r = json_object_get(p, "reasoning");
		if (jv_is_string(r))
			core_buf_add(&b, json_string_value(r), json_string_length(r));
	}
	return core_buf_detach(&b, NULL);
}

static enum core_status oll_step(struct prov_walk *w, const char *role, const json_t *m,
                                 struct core_err *e)
{
	const json_t *content = json_object_get(m, "content");
	enum core_status st;
	json_t *msg, *x;
	if (!strcmp(role, "tool")) {
		json_t *rs = prov_ordered_responses(w->prev_model, m), *p;
		size_t j;
		json_array_foreach(rs, j, p) {
			const json_t *r = json_object_get(p, "toolResponse");
			const char *ref = json_string_value(json_object_get(r, "ref"));
			char *ot = prov_output_text(json_object_get(r, "output"));
			msg = json_pack("{s:s, s:s, s:O}", "role", "tool", "content", ot ? ot : "",
			                "tool_name", json_object_get(r, "name"));
			if (ref && *ref)
				json_object_set_new(msg, "tool_call_id", json_string(ref));
			free(ot);
			/* Images the tool returned ride on its message. */
			if (!(x = images(json_object_get(r, "content"), e))) {
				json_decref(msg);
				json_decref(rs);
				return e->st;
			}
			if (json_array_size(x))
				json_object_set(msg, "images", x);
			json_decref(x);
			if ((st = prov_walk_add(w, msg, e))) {
				json_decref(rs);
				return st;
			}
		}
		json_decref(rs);
		return CORE_OK;
	}
	msg = json_pack("{s:s, s:o}", "role", strcmp(role, "model") ? role : "assistant",
	                "content", prov_text(content));
	if (!(x = images(content, e))) {
		json_decref(msg);
		return e->st;
	}
	if (json_array_size(x))
		json_object_set(msg, "images", x);
	json_decref(x);
	if (!strcmp(role, "model")) {
		char *r = reasoning_text(content);
		if (r && *r)
			json_object_set_new(msg, "thinking", json_string(r));
		free(r);
		x = tool_calls(content);
		if (json_array_size(x))
			json_object_set(msg, "tool_calls", x);
		json_decref(x);
	}
	return prov_walk_add(w, msg, e);
}

/* A plain stored message: its text as the content (oll_step()). */
static enum core_status oll_plain(struct prov_walk *w, const struct prov_plain *m,
                                  struct core_err *e)
{
	return prov_walk_joined(w, m->model ? "assistant" : "user", m, 0, e);
}

static const struct prov_walker walker = { oll_step, oll_plain, NULL };

static void map_config(json_t *b, const json_t *cfg)
{
	static const char *const top[] = { "format", "think", "keep_alive", NULL };
	static const char *const skip[] = { "temperature", "maxOutputTokens", "topP", "topK",
		"stopSequences", "seed", "format", "think", "keep_alive", "version", "apiKey",
		"options", "model", "messages", "tools", "stream", NULL };
	json_t *opts = json_object();
	if (cfg) {
		for (const char *const *k = top; *k; k++)
			prov_map(b, *k, cfg, *k);
		if (json_is_object(prov_cfg(cfg, "options")))
			json_object_update(opts, (json_t *)prov_cfg(cfg, "options"));
		prov_map(opts, "temperature", cfg, "temperature");
		prov_map(opts, "num_predict", cfg, "maxOutputTokens");
		prov_map(opts, "top_p", cfg, "topP");
		prov_map(opts, "top_k", cfg, "topK");
		prov_map(opts, "stop", cfg, "stopSequences");
		prov_map(opts, "seed", cfg, "seed");
		/* Anything else is a Modelfile parameter (num_ctx, min_p, ...). */
		prov_pass_through(opts, cfg, skip);
	}
	if (json_object_size(opts))
		json_object_set(b, "options", opts);
	json_decref(opts);
}

/* ---- response ---- */

static enum core_status on_event(void *ctx, const char *type, const char *data, size_t n)
{
	struct oll *s = ctx;
	json_t *v = prov_parse(&s->o, data, n), *c;
	const json_t *msg, *x, *err;
	enum core_status st = CORE_OK;
	size_t i;
	(void)type;
	if (!v)
		return s->o.e ? s->o.e->st : CORE_EINVAL;
	if ((err = json_object_get(v, "error"))) {
		const char *m = json_string_value(err);
		if (!m)
			m = json_string_value(json_object_get(err, "message"));
		st = core_fail(s->o.e, CORE_EINTERNAL, "ollama: error in stream: %s", m ? m : "unknown error");
		json_decref(v);
		return st;
	}
	msg = json_object_get(v, "message");
	if (jv_is_string(x = json_object_get(msg, "thinking")) && json_string_length(x))
		st = prov_emit(&s->o, json_pack("{s:O}", "reasoning", x));
	if (!st && jv_is_string(x = json_object_get(msg, "content")) && json_string_length(x))
		st = prov_emit(&s->o, json_pack("{s:O}", "text", x));
	json_array_foreach(json_object_get(msg, "tool_calls"), i, c) {
		const json_t *fn = json_object_get(c, "function"), *args;
		const char *id = json_string_value(json_object_get(c, "id"));
		json_t *tr;
		if (st)
			break;
		args = json_object_get(fn, "arguments");
		if (!jv_is_string(json_object_get(fn, "name"))) {
			st = core_fail(s->o.e, CORE_EINTERNAL, "ollama: a tool call without a name in the stream");
			break;
		}
		if (jv_is_string(args)) {
			/* Arguments as a JSON string (an OpenAI habit): decode. */
			struct core_err pe = {0};
			json_t *a = jv_parse(json_string_value(args), json_string_length(args), "arguments", 0, &pe);
			tr = json_pack("{s:O, s:o}", "name", json_object_get(fn, "name"), "input",
			               a ? a : json_incref((json_t *)args));
		} else if (args) {
			tr = json_pack("{s:O, s:O}", "name", json_object_get(fn, "name"), "input", args);
		} else {
			/* 'o' takes the new object's only reference ('O' leaked it). */
			tr = json_pack("{s:O, s:o}", "name", json_object_get(fn, "name"), "input",
			               json_object());
		}
		if (id && *id)
			json_object_set_new(tr, "ref", json_string(id));
		st = prov_emit(&s->o, json_pack("{s:o}", "toolRequest", tr));
	}
	if (!st && json_is_true(json_object_get(v, "done"))) {
		const char *r = json_string_value(json_object_get(v, "done_reason"));
		json_t *u = json_object();
		snprintf(s->o.finish, sizeof s->o.finish, "%s", r && !strcmp(r, "length") ? "length" : "stop");
		if (json_is_integer(x = json_object_get(v, "prompt_eval_count")))
			json_object_set(u, "inputTokens", (json_t *)x);
		if (json_is_integer(x = json_object_get(v, "eval_count")))
			json_object_set(u, "outputTokens", (json_t *)x);
		if (json_object_size(u)) {
			json_decref(s->o.usage);
			s->o.usage = u;
		} else {
			json_decref(u);
		}
		s->o.done = 1;
	}
	json_decref(v);
	return st;
}

static enum core_status on_error(void *ctx, struct http_error *he, struct core_err *e)
{
	struct oll *s = ctx;
	struct core_err pe = {0};
	json_t *doc = jv_parse(he->body, he->body_len, "error", 0, &pe);
	const json_t *err = json_object_get(doc, "error");
	const char *msg = json_string_value(err);
	enum core_status st;
	if (!msg)
		msg = json_string_value(json_object_get(err, "message"));
	if (he->status >= 200 && he->status <= 299)
		st = prov_fail_http(&s->o, he, err ? CORE_EINTERNAL : CORE_EUNAVAILABLE, msg, e);
	else
		st = prov_fail_http(&s->o, he, prov_http_status(he->status), msg, e);
	json_decref(doc);
	return st;
}

static const char *const url_vars[] = { "OLLAMA_HOST", NULL };
/* Optional: a local server needs none; Ollama's cloud (and a proxy in
 * front of a server) takes it as a bearer token. */
static const char *const key_vars[] = { "OLLAMA_API_KEY", NULL };
#define AUTH_FMT "Authorization: Bearer %s"
#define DEFAULT_HOST "127.0.0.1:11434"

/* OLLAMA_HOST as Ollama reads it: scheme and port optional. */
static char *host_url(void)
{
	const char *h = getenv(url_vars[0]);
	const char *scheme = "http://", *rest, *colon;
	char *url = NULL;
	size_t n;
	if (!h || !*h)
		h = DEFAULT_HOST;
	if (strstr(h, "://"))
		scheme = "";
	rest = *scheme ? h : strstr(h, "://") + 3;
	n = strcspn(rest, "/");
	if (rest[0] == '[') {
		/* [v6]:port */
		const char *close = memchr(rest, ']', n);
		colon = close && close + 1 < rest + n && close[1] == ':' ? close + 1 : NULL;
	} else {
		colon = memchr(rest, ':', n);
	}
	n = strlen(h);
	while (n && h[n - 1] == '/')
		n--;
	if (!(url = prov_strf("%s%.*s%s", scheme, (int)n, h, colon ? "" : ":11434")))
		return NULL;
	/* "0.0.0.0" binds everywhere on the server side; connect locally. */
	if (!strncmp(url, "http://0.0.0.0", 14)) {
		memcpy(url + 7, "127.0.0", 7);
	}
	return url;
}

static enum core_status oll_build(void *state, const char *name, const char *base,
                                  const struct model_request *req, struct prov_body *body,
                                  struct core_err *e)
{
	struct prov_walk w;
	json_t *b = NULL;
	enum core_status st;
	(void)state;
	(void)base;
	prov_walk_init(&w, "ollama", NULL);
	if ((st = prov_walk(&walker, req, &w, e)))
		goto out;
	/* the messages go where the placeholder is (prov_walk_body()) */
	if (!(b = json_pack("{s:s, s:n}", "model", name, "messages"))) {
		st = core_fail(e, CORE_ENOMEM, "ollama: out of memory");
		goto out;
	}
	if (json_array_size(req->tools))
		json_object_set_new(b, "tools", prov_function_tools(req->tools));
	json_object_set_new(b, "stream", json_true());
	map_config(b, req->config);
	/* Structured output: format is the schema, or "json" (unless the
	 * config sets a format). */
	if (req->output && !json_object_get(b, "format"))
		json_object_set_new(b, "format", json_object_get(req->output, "schema")
		                    ? json_incref(json_object_get(req->output, "schema"))
		                    : json_string("json"));
	st = prov_walk_body(b, "messages", &w, body, e);
out:
	json_decref(b);
	prov_walk_release(&w);
	return st;
}

extern const struct model_provider model_ollama;

const struct prov_dialect prov_dialect_ollama = {
	.p = &model_ollama,
	.size = sizeof(struct oll),
	.base_url = host_url,
	.url_fmt = "%s/api/chat",
	.auth_fmt = AUTH_FMT,
	.key_optional = 1,
	.build = oll_build,
	.mode = SSE_MODE_NDJSON,
	.on_event = on_event,
	.on_error = on_error,
	.terminator = "a \"done\": true line",
};

/* GET /api/tags: {"models": [{"name": "llama3.2:latest", ...}]}.  Asked
 * only when OLLAMA_HOST says where a server is: Ollama needs no key. */
static enum core_status oll_list(const char *key_file, json_t *row, struct core_err *e)
{
	char *base = host_url(), *key = NULL, *url = NULL, *auth = NULL;
	json_t *doc = NULL;
	const char *host = getenv(url_vars[0]);
	/* Its key only from OLLAMA_API_KEY, never the key file (see
	 * prov_dialect.key_optional). */
	enum core_status st = base ? prov_list_row(row, model_ollama.key_vars, NULL,
	                                           model_ollama.url_vars, base, &key)
	                           : CORE_ENOMEM;
	if (!st && json_object_set_new(row, "keyOptional", json_true()))
		st = CORE_ENOMEM;
	if (!st && ((host && *host) || key)) {
		url = prov_strf("%s/api/tags", base);
		auth = key ? prov_strf(AUTH_FMT, key) : NULL;
		const char *headers[] = { auth, NULL };
		st = !url || (key && !auth) ? CORE_ENOMEM
		   : prov_get_json("ollama", url, headers, key, &doc, e);
		if (!st)
			st = prov_list_models(row, "ollama", json_object_get(doc, "models"), "name", NULL);
	}
	json_decref(doc);
	prov_secret_free(auth);
	prov_secret_free(key);
	free(url);
	free(base);
	return st == CORE_ENOMEM ? core_fail(e, st, "ollama: out of memory") : st;
}

const struct model_provider model_ollama = {
	.prefix = "ollama",
	.dialect = &prov_dialect_ollama,
	.list = oll_list,
	.key_vars = key_vars,
	.url_vars = url_vars,
	.default_url = DEFAULT_HOST,
};
