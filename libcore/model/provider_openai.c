/*
 * provider_openai.c - "openai/MODEL": Chat Completions, streamed (SSE).
 *
 * Also reaches the OpenAI-compatible servers (Ollama /v1, llama.cpp, vLLM)
 * through OPENAI_BASE_URL.  Parallel tool calls arrive as argument
 * fragments keyed by index; they are assembled and handed on whole when
 * the choice finishes.
 */
#include "provider_common.h"

#include <stdlib.h>
#include <string.h>

#include "../base/json.h"

#define MAX_CALLS 128

struct oai_call {
	char *id, *name;
	struct core_buf args;
	int used;
};

struct oai {
	struct prov_out o;          /* first: prov_post's ctx */
	struct oai_call calls[MAX_CALLS];
	int ncalls;                 /* highest index used + 1 */
	int calls_sent;
	char refusal;
};

const char *const prov_openai_key_vars[] = { "OPENAI_API_KEY", NULL };
const char *const prov_openai_url_vars[] = { "OPENAI_BASE_URL", NULL };
/* As the OpenAI SDKs send them. */
const struct model_env_header prov_openai_env_headers[] = {
	{ "OPENAI_ORG_ID", "OpenAI-Organization" },
	{ "OPENAI_PROJECT_ID", "OpenAI-Project" },
	{ NULL, NULL },
};
#define DEFAULT_URL "https://api.openai.com/v1"

/* ---- request ---- */

/*
 * One media part as a Chat Completions content part: images as image_url,
 * wav/mp3 data as input_audio, other data (a PDF, ...) as a file; NULL
 * with e set for what the API cannot take (audio or a document by URL).
 */
static json_t *media_content(const json_t *m, struct core_err *e)
{
	const char *url = json_string_value(json_object_get(m, "url"));
	const char *ct = json_string_value(json_object_get(m, "contentType"));
	char *mime = NULL;
	const char *data = NULL;
	json_t *p = NULL;
	int inline_data = prov_data_url(url, &mime, &data);
	const char *type = ct ? ct : mime ? mime : "";
	if (!*type || !strncmp(type, "image/", 6)) {
		p = json_pack("{s:s, s:{s:s}}", "type", "image_url", "image_url", "url", url);
	} else if (inline_data && (!strcmp(type, "audio/wav") || !strcmp(type, "audio/x-wav") ||
	                           !strcmp(type, "audio/mpeg") || !strcmp(type, "audio/mp3"))) {
		p = json_pack("{s:s, s:{s:s, s:s}}", "type", "input_audio", "input_audio", "data", data,
		              "format", strstr(type, "wav") ? "wav" : "mp3");
	} else if (inline_data && strncmp(type, "audio/", 6) && strncmp(type, "video/", 6)) {
		const char *ext = strchr(type, '/');
		char *fname = prov_strf("file.%s", ext ? ext + 1 : "bin");
		p = json_pack("{s:s, s:{s:s, s:s}}", "type", "file", "file", "filename",
		              fname ? fname : "file", "file_data", url);
		free(fname);
	} else {
		core_fail(e, CORE_EINVAL, "openai: cannot send media of type '%s'%s (images, wav/mp3 "
		          "audio and documents as data: URLs are supported)", type,
		          inline_data ? "" : " by URL");
	}
	free(mime);
	return p;
}

/* A user turn's content; NULL with e set for media the API cannot take. */
static json_t *user_content(const json_t *content, struct core_err *e)
{
	json_t *arr, *p;
	size_t i;
	/* Text only: a plain string, which every compatible server takes. */
	if (!prov_has_media(content))
		return prov_text(content);
	arr = json_array();
	json_array_foreach(content, i, p) {
		const json_t *m = json_object_get(p, "media");
		const json_t *t = json_object_get(p, "text");
		if (m && jv_is_string(json_object_get(m, "url"))) {
			json_t *mp = media_content(m, e);
			if (!mp) {
				json_decref(arr);
				return NULL;
			}
			json_array_append_new(arr, mp);
		} else if (jv_is_string(t) && !json_object_get(p, "toolResponse")) {
			json_array_append_new(arr, json_pack("{s:s, s:O}", "type", "text", "text", t));
		}
	}
	return arr;
}

/*
 * Media a tool returned (toolResponse.content) cannot ride in a tool
 * message, which is text only: they follow the round's tool messages as
 * one user message, each led by the tool it came from.  NULL when there
 * is none; with e set when a media part cannot be sent.
 */
static json_t *tool_media_message(const json_t *responses, struct core_err *e)
{
	json_t *arr = json_array(), *p, *q;
	size_t i, j;
	json_array_foreach(responses, i, p) {
		const json_t *r = json_object_get(p, "toolResponse");
		int first = 1;
		json_array_foreach(json_object_get(r, "content"), j, q) {
			const json_t *m = json_object_get(q, "media");
			json_t *mp;
			if (!m || !jv_is_string(json_object_get(m, "url")))
				continue;
			if (first) {
				char *t = prov_strf("Media returned by tool '%s':",
				                    json_string_value(json_object_get(r, "name")) ?: "");
				json_array_append_new(arr, json_pack("{s:s, s:s}", "type", "text", "text", t ? t : ""));
				free(t);
				first = 0;
			}
			if (!(mp = media_content(m, e))) {
				json_decref(arr);
				return NULL;
			}
			json_array_append_new(arr, mp);
		}
	}
	if (!json_array_size(arr)) {
		json_decref(arr);
		return NULL;
	}
	return json_pack("{s:s, s:o}", "role", "user", "content", arr);
}

static json_t *oai_tool_call(const json_t *tr)
{
	const char *name = json_string_value(json_object_get(tr, "name"));
	const char *ref = json_string_value(json_object_get(tr, "ref"));
	const json_t *input = json_object_get(tr, "input");
	char *args = input ? prov_dump(input) : strdup("{}");
	json_t *c;
	/* Genkit's rule: the call id is the ref, else the tool's name. */
	c = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", ref && *ref ? ref : name ? name : "",
	              "type", "function", "function", "name", name ? name : "",
	              "arguments", args ? args : "{}");
	free(args);
	return c;
}

/* A model message: one assistant message of its text and its tool calls. */
static enum core_status model_message(const json_t *content, struct prov_walk *w,
                                      struct core_err *e)
{
	json_t *a = json_object(), *calls = json_array(), *p;
	json_t *t = prov_text(content);
	size_t j;
	json_array_foreach(content, j, p)
		if (json_object_get(p, "toolRequest"))
			json_array_append_new(calls, oai_tool_call(json_object_get(p, "toolRequest")));
	json_object_set_new(a, "role", json_string("assistant"));
	json_object_set_new(a, "content", t && (json_string_length(t) || !json_array_size(calls))
	                    ? json_incref(t) : json_null());
	if (json_array_size(calls))
		json_object_set(a, "tool_calls", calls);
	json_decref(calls);
	json_decref(t);
	return prov_walk_add(w, a, e);
}

/* A tool message: one tool message per response, in the order of the
 * calls, then the media they returned (tool_media_message). */
static enum core_status tool_messages(const json_t *prev_model, const json_t *msg,
                                      struct prov_walk *w, struct core_err *e)
{
	json_t *rs = prov_ordered_responses(prev_model, msg), *p, *media;
	struct core_err me = { 0 };
	enum core_status st = CORE_OK;
	size_t j;
	json_array_foreach(rs, j, p) {
		const json_t *r = json_object_get(p, "toolResponse");
		const char *ref = json_string_value(json_object_get(r, "ref"));
		const char *name = json_string_value(json_object_get(r, "name"));
		char *out_text = prov_output_text(json_object_get(r, "output"));
		st = prov_walk_add(w, json_pack("{s:s, s:s, s:s}", "role", "tool",
		        "tool_call_id", ref && *ref ? ref : name ? name : "",
		        "content", out_text ? out_text : "null"), e);
		free(out_text);
		if (st)
			break;
	}
	media = st ? NULL : tool_media_message(rs, &me);
	json_decref(rs);
	if (me.st)
		return core_fail(e, me.st, "%s", me.msg);
	return media ? prov_walk_add(w, media, e) : st;
}

static const struct prov_roles roles = { user_content, model_message, tool_messages };

/* A plain stored message: its text as the content, as above. */
static enum core_status plain_message(struct prov_walk *w, const struct prov_plain *m,
                                      struct core_err *e)
{
	return prov_walk_joined(w, m->model ? "assistant" : "user", m, 0, e);
}

static const struct prov_walker walker = { prov_roles_step, plain_message, NULL };

static void map_config(json_t *body, const json_t *cfg, int official)
{
	static const char *const skip[] = { "temperature", "maxOutputTokens", "topP", "topK",
		"stopSequences", "presencePenalty", "frequencyPenalty", "seed", "version",
		"apiKey", "stream", "stream_options", "model", "messages", "tools", NULL };
	if (!cfg)
		return;
	prov_map(body, "temperature", cfg, "temperature");
	/* max_tokens is deprecated at OpenAI (reasoning models refuse it), but
	 * it is what the compatible servers know. */
	prov_map(body, official ? "max_completion_tokens" : "max_tokens", cfg, "maxOutputTokens");
	prov_map(body, "top_p", cfg, "topP");
	prov_map(body, "stop", cfg, "stopSequences");
	prov_map(body, "presence_penalty", cfg, "presencePenalty");
	prov_map(body, "frequency_penalty", cfg, "frequencyPenalty");
	prov_map(body, "seed", cfg, "seed");
	prov_pass_through(body, cfg, skip);
}

/* ---- response ---- */

static void map_usage(struct oai *s, const json_t *u)
{
	json_t *g = json_object();
	const json_t *v;
	if ((v = json_object_get(u, "prompt_tokens")) && json_is_integer(v))
		json_object_set(g, "inputTokens", (json_t *)v);
	if ((v = json_object_get(u, "completion_tokens")) && json_is_integer(v))
		json_object_set(g, "outputTokens", (json_t *)v);
	if ((v = json_object_get(u, "total_tokens")) && json_is_integer(v))
		json_object_set(g, "totalTokens", (json_t *)v);
	v = json_object_get(json_object_get(u, "completion_tokens_details"), "reasoning_tokens");
	if (json_is_integer(v) && json_integer_value(v))
		json_object_set(g, "thoughtsTokens", (json_t *)v);
	v = json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens");
	if (json_is_integer(v) && json_integer_value(v))
		json_object_set(g, "cachedContentTokens", (json_t *)v);
	json_decref(s->o.usage);
	s->o.usage = g;
}

static const char *map_finish(const char *f)
{
	if (!strcmp(f, "stop") || !strcmp(f, "tool_calls"))
		return "stop";
	if (!strcmp(f, "length"))
		return "length";
	if (!strcmp(f, "content_filter"))
		return "blocked";
	return "other";
}

static void calls_clear(struct oai *s)
{
	for (int i = 0; i < s->ncalls; i++) {
		free(s->calls[i].id);
		free(s->calls[i].name);
		core_buf_release(&s->calls[i].args);
		memset(&s->calls[i], 0, sizeof s->calls[i]);
	}
	s->ncalls = 0;
	s->calls_sent = 0;
}

/* Hand on the assembled tool calls, once. */
static enum core_status send_calls(struct oai *s)
{
	enum core_status st;
	if (s->calls_sent)
		return CORE_OK;
	s->calls_sent = 1;
	for (int i = 0; i < s->ncalls; i++) {
		struct oai_call *c = &s->calls[i];
		json_t *input, *tr;
		if (!c->used)
			continue;
		if (!c->args.len) {
			input = json_object();
		} else {
			struct core_err pe = {0};
			input = jv_parse(c->args.p, c->args.len, "arguments", 0, &pe);
			if (!input)
				return core_fail(s->o.e, CORE_EINTERNAL,
				                 "openai: tool call '%s' has invalid JSON arguments: %s",
				                 c->name ? c->name : "", pe.msg);
		}
		tr = json_pack("{s:s, s:o}", "name", c->name ? c->name : "", "input", input);
		if (c->id && *c->id)
			json_object_set_new(tr, "ref", json_string(c->id));
		if ((st = prov_emit(&s->o, json_pack("{s:o}", "toolRequest", tr))))
			return st;
	}
	return CORE_OK;
}

static enum core_status add_call_delta(struct oai *s, const json_t *d)
{
	const json_t *ix = json_object_get(d, "index"), *fn = json_object_get(d, "function");
	const json_t *args = json_object_get(fn, "arguments");
	const char *id = json_string_value(json_object_get(d, "id"));
	const char *name = json_string_value(json_object_get(fn, "name"));
	json_int_t i;
	struct oai_call *c;
	if (json_is_integer(ix)) {
		i = json_integer_value(ix);
	} else {
		/* No index (some compatible servers, one call at a time): a
		 * delta continues the last call unless it starts with a new id. */
		i = s->ncalls ? s->ncalls - 1 : 0;
		if (s->ncalls && id && *id && s->calls[i].id && strcmp(s->calls[i].id, id))
			i++;
	}
	if (i < 0 || i >= MAX_CALLS)
		return core_fail(s->o.e, CORE_EINTERNAL, "openai: tool call index %lld out of range",
		                 (long long)i);
	c = &s->calls[i];
	if (!c->used) {
		c->used = 1;
		core_buf_init(&c->args, PROV_EVENT_MAX);
	}
	if (i >= s->ncalls)
		s->ncalls = (int)i + 1;
	/* Never overwrite a stored id or name with an empty one. */
	if (id && *id && !c->id)
		c->id = strdup(id);
	if (name && *name && !c->name)
		c->name = strdup(name);
	if (jv_is_string(args)) {
		if (core_buf_add(&c->args, json_string_value(args), json_string_length(args)))
			return core_fail(s->o.e, CORE_EINTERNAL, "openai: tool call arguments too long");
	} else if (json_is_object(args)) {
		/* Some proxies send the arguments as an object. */
		char *t = prov_dump(args);
		core_buf_reset(&c->args);
		core_buf_adds(&c->args, t ? t : "{}");
		free(t);
	}
	return CORE_OK;
}

static enum core_status stream_error(struct oai *s, const json_t *err)
{
	const char *msg = json_string_value(json_object_get(err, "message"));
	const char *type = json_string_value(json_object_get(err, "type"));
	const json_t *code = json_object_get(err, "code");
	enum core_status st = CORE_EINTERNAL;
	if (json_is_integer(code))
		st = prov_http_status((long)json_integer_value(code));
	else if (type && strstr(type, "rate_limit"))
		st = CORE_EEXHAUSTED;
	else if (type && (strstr(type, "overloaded") || strstr(type, "unavailable")))
		st = CORE_EUNAVAILABLE;
	if (!msg && jv_is_string(err))
		msg = json_string_value(err);
	return core_fail(s->o.e, st, "openai: error in stream: %s%s%s%s", msg ? msg : "unknown error",
	                 type ? " (" : "", type ? type : "", type ? ")" : "");
}

static enum core_status on_event(void *ctx, const char *type, const char *data, size_t n)
{
	struct oai *s = ctx;
	json_t *v, *ch;
	size_t i;
	enum core_status st = CORE_OK;
	if (n == 6 && !memcmp(data, "[DONE]", 6)) {
		s->o.done = 1;
		return send_calls(s);
	}
	if (!n)
		return CORE_OK;
	if (!(v = prov_parse(&s->o, data, n)))
		return s->o.e ? s->o.e->st : CORE_EINVAL;
	if (json_object_get(v, "error") || !strcmp(type, "error")) {
		st = stream_error(s, json_object_get(v, "error") ? json_object_get(v, "error") : v);
		json_decref(v);
		return st;
	}
	json_array_foreach(json_object_get(v, "choices"), i, ch) {
		const json_t *d = json_object_get(ch, "delta");
		const json_t *t, *tc, *fr = json_object_get(ch, "finish_reason");
		const json_t *ix = json_object_get(ch, "index");
		size_t j;
		if (json_is_integer(ix) && json_integer_value(ix) != 0)
			continue; /* n > 1: only the first choice is the reply */
		t = json_object_get(d, "reasoning_content");
		if (!jv_is_string(t))
			t = json_object_get(d, "reasoning");
		if (jv_is_string(t) && json_string_length(t) &&
		    (st = prov_emit(&s->o, json_pack("{s:O}", "reasoning", t))))
			break;
		t = json_object_get(d, "content");
		if (jv_is_string(t) && json_string_length(t) &&
		    (st = prov_emit(&s->o, json_pack("{s:O}", "text", t))))
			break;
		t = json_object_get(d, "refusal");
		if (jv_is_string(t) && json_string_length(t)) {
			s->refusal = 1;
			if ((st = prov_emit(&s->o, json_pack("{s:O}", "text", t))))
				break;
		}
		json_array_foreach(json_object_get(d, "tool_calls"), j, tc)
			if ((st = add_call_delta(s, tc)))
				break;
		if (st)
			break;
		if (jv_is_string(fr)) {
			snprintf(s->o.finish, sizeof s->o.finish, "%s",
			         s->refusal ? "blocked" : map_finish(json_string_value(fr)));
			/* The reply is whole: a server that then ends the stream
			 * without data: [DONE] (after the usage chunk, or without
			 * one) is not cut short, as the OpenAI SDKs read it. */
			s->o.done = 1;
			if ((st = send_calls(s)))
				break;
		}
	}
	if (!st && json_is_object(json_object_get(v, "usage")))
		map_usage(s, json_object_get(v, "usage"));
	json_decref(v);
	return st;
}

static enum core_status on_error(void *ctx, struct http_error *he, struct core_err *e)
{
	struct oai *s = ctx;
	struct core_err pe = {0};
	json_t *doc = jv_parse(he->body, he->body_len, "error", 0, &pe);
	const json_t *err = json_object_get(doc, "error");
	const char *msg, *code;
	enum core_status st;
	/* vLLM's older flat shape: {"object":"error","message":...}. */
	if (!json_is_object(err) && json_is_object(doc) && json_object_get(doc, "message"))
		err = doc;
	msg = json_string_value(json_object_get(err, "message"));
	if (!msg && jv_is_string(err))
		msg = json_string_value(err);
	code = json_string_value(json_object_get(err, "code"));
	if (he->status >= 200 && he->status <= 299) {
		st = err ? stream_error(s, err) : prov_fail_http(&s->o, he, CORE_EUNAVAILABLE, msg, e);
		json_decref(doc);
		return st;
	}
	st = prov_openai_http_error(&s->o, he, msg, code, e);
	json_decref(doc);
	return st;
}

enum core_status prov_openai_http_error(struct prov_out *o, struct http_error *he,
                                        const char *msg, const char *code, struct core_err *e)
{
	if (code && !strcmp(code, "insufficient_quota"))
		he->retryable = 0; /* billing: waiting does not help */
	if (he->retry_after_ms < 0)
		he->retry_after_ms = prov_delay_hint(msg, "try again in");
	return prov_fail_http(o, he, prov_http_status(he->status), msg, e);
}

static void on_attempt_reset(void *ctx)
{
	struct oai *s = ctx;
	calls_clear(s);
	s->refusal = 0;
}

/* Structured output: Genkit's compat_oai response_format (strict, named
 * "output"), unless the config sets one. */
static void set_response_format(json_t *b, const json_t *output)
{
	const json_t *schema = json_object_get(output, "schema");
	if (!output || json_object_get(b, "response_format"))
		return;
	json_object_set_new(b, "response_format", schema
	        ? json_pack("{s:s, s:{s:s, s:O, s:b}}", "type", "json_schema", "json_schema",
	                    "name", "output", "schema", schema, "strict", 1)
	        : json_pack("{s:s}", "type", "json_object"));
}

static enum core_status oai_build(void *state, const char *name, const char *base,
                                  const struct model_request *req, struct prov_body *body,
                                  struct core_err *e)
{
	struct prov_walk w;
	enum core_status st;
	json_t *b = NULL;
	(void)state;
	prov_walk_init(&w, "openai", (void *)&roles);
	if ((st = prov_walk(&walker, req, &w, e)))
		goto out;
	/* the messages go where the placeholder is (prov_walk_body()) */
	if (!(b = json_pack("{s:s, s:n}", "model", name, "messages"))) {
		st = core_fail(e, CORE_ENOMEM, "openai: out of memory");
		goto out;
	}
	if (json_array_size(req->tools))
		json_object_set_new(b, "tools", prov_function_tools(req->tools));
	json_object_set_new(b, "stream", json_true());
	json_object_set_new(b, "stream_options", json_pack("{s:b}", "include_usage", 1));
	map_config(b, req->config, !strcmp(base, DEFAULT_URL));
	set_response_format(b, req->output);
	st = prov_walk_body(b, "messages", &w, body, e);
out:
	json_decref(b);
	prov_walk_release(&w);
	return st;
}

static void oai_release(void *state)
{
	calls_clear(state);
}

extern const struct model_provider model_openai;

const struct prov_dialect prov_dialect_openai = {
	.p = &model_openai,
	.size = sizeof(struct oai),
	.url_fmt = "%s/chat/completions",
	.auth_fmt = "Authorization: Bearer %s",
	.build = oai_build,
	.mode = SSE_MODE_SSE,
	.on_event = on_event,
	.on_error = on_error,
	.on_reset = on_attempt_reset,
	.release = oai_release,
	.terminator = "data: [DONE]",
};

/* GET /models: {"data": [{"id": "gpt-4o", ...}]}. */
static enum core_status oai_list(const char *key_file, json_t *row, struct core_err *e)
{
	static const char *const auth[] = { "Authorization: Bearer %s" };
	json_t *doc;
	enum core_status st = prov_list_get(&model_openai, row, key_file, "/models", auth, NULL,
	                                    &doc, e);
	if (!st && doc)
		st = prov_list_models(row, "openai", json_object_get(doc, "data"), "id", NULL);
	json_decref(doc);
	return st;
}

const struct model_provider model_openai = {
	.prefix = "openai",
	.dialect = &prov_dialect_openai,
	.list = oai_list,
	.key_vars = prov_openai_key_vars,
	.url_vars = prov_openai_url_vars,
	.default_url = DEFAULT_URL,
	.env_headers = prov_openai_env_headers,
};
