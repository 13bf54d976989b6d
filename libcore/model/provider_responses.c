/*
 * provider_responses.c - "openai-responses/MODEL": OpenAI's Responses API
 * (POST {base}/responses), streamed as typed SSE events.
 *
 * The conversation is sent whole each call (store: false), so reasoning
 * survives a tool loop only as the encrypted reasoning items the API hands
 * out when asked (include: reasoning.encrypted_content): they are kept on
 * the reasoning part's metadata and replayed unchanged.  Reasoning
 * summaries stream as reasoning parts.  A function call's arguments stream
 * as fragments; the call is handed on whole when its item is done.
 */
#include "provider_common.h"

#include <stdlib.h>
#include <string.h>

#include "../base/json.h"

#define MAX_CALLS 128

struct rcall {
	char *item_id, *call_id, *name;
	struct core_buf args;
};

struct rsp {
	struct prov_out o;          /* first: prov_post's ctx */
	struct rcall calls[MAX_CALLS];
	int ncalls;
	int refusal;
	int summary_streamed;       /* reasoning text was emitted for the item in progress */
};

#define WHAT "openai-responses"

/* ---- request ---- */

/* A media part as an input item part: images as input_image, other data
 * (a PDF, ...) as input_file; audio and video are refused. */
static json_t *media_input(const json_t *m, struct core_err *e)
{
	const char *url = json_string_value(json_object_get(m, "url"));
	const char *ct = json_string_value(json_object_get(m, "contentType"));
	char *mime = NULL;
	const char *data = NULL;
	json_t *p = NULL;
	int inline_data = prov_data_url(url, &mime, &data);
	const char *type = ct ? ct : mime ? mime : "";
	if (!*type || !strncmp(type, "image/", 6)) {
		p = json_pack("{s:s, s:s}", "type", "input_image", "image_url", url);
	} else if (inline_data && strncmp(type, "audio/", 6) && strncmp(type, "video/", 6)) {
		const char *ext = strchr(type, '/');
		char *fname = prov_strf("file.%s", ext ? ext + 1 : "bin");
		p = json_pack("{s:s, s:s, s:s}", "type", "input_file", "filename", fname ? fname : "file",
		              "file_data", url);
		free(fname);
	} else {
		core_fail(e, CORE_EINVAL, WHAT ": cannot send media of type '%s'%s (images, and "
		          "documents as data: URLs, are supported)", type, inline_data ? "" : " by URL");
	}
	free(mime);
	return p;
}

/* A user turn's content: a string when text only, else input parts. */
static json_t *user_content(const json_t *content, struct core_err *e)
{
	json_t *arr, *p;
	size_t i;
	if (!prov_has_media(content))
		return prov_text(content);
	arr = json_array();
	json_array_foreach(content, i, p) {
		const json_t *m = json_object_get(p, "media"), *t = json_object_get(p, "text");
		if (m && jv_is_string(json_object_get(m, "url"))) {
			json_t *mp = media_input(m, e);
			if (!mp) {
				json_decref(arr);
				return NULL;
			}
			json_array_append_new(arr, mp);
		} else if (jv_is_string(t)) {
			json_array_append_new(arr, json_pack("{s:s, s:O}", "type", "input_text", "text", t));
		}
	}
	return arr;
}

static enum core_status add_assistant_text(struct prov_walk *w, struct core_buf *text,
                                           struct core_err *e)
{
	enum core_status st = CORE_OK;
	if (text->len)
		st = prov_walk_add(w, json_pack("{s:s, s:o}", "role", "assistant", "content",
		                                 json_stringn_nocheck(text->p, text->len)), e);
	core_buf_reset(text);
	return st;
}

/* A model message as input items, in the order of its parts: text as an
 * assistant message, reasoning that came from this API as its reasoning
 * item, tool requests as function_call items. */
static enum core_status model_items(const json_t *content, struct prov_walk *w,
                                    struct core_err *e)
{
	struct core_buf text = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = CORE_OK;
	size_t i;
	json_t *p;
	json_array_foreach(content, i, p) {
		const json_t *t = json_object_get(p, "text"), *r = json_object_get(p, "reasoning");
		const json_t *tr = json_object_get(p, "toolRequest"), *md = json_object_get(p, "metadata");
		if (jv_is_string(t) && !tr) {
			if (core_buf_add(&text, json_string_value(t), json_string_length(t))) {
				st = core_fail(e, CORE_ENOMEM, WHAT ": out of memory");
				break;
			}
		} else if (jv_is_string(r) && json_object_get(md, "itemId")) {
			const json_t *enc = json_object_get(md, "encryptedContent");
			json_t *item;
			if ((st = add_assistant_text(w, &text, e)))
				break;
			item = json_pack("{s:s, s:O, s:[]}", "type", "reasoning", "id",
			                 json_object_get(md, "itemId"), "summary");
			if (item && json_string_length(r))
				json_array_append_new(json_object_get(item, "summary"),
				                      json_pack("{s:s, s:O}", "type", "summary_text", "text", r));
			if (item && jv_is_string(enc))
				json_object_set(item, "encrypted_content", (json_t *)enc);
			if ((st = prov_walk_add(w, item, e)))
				break;
		} else if (tr) {
			const char *name = json_string_value(json_object_get(tr, "name"));
			const char *ref = json_string_value(json_object_get(tr, "ref"));
			const json_t *input = json_object_get(tr, "input");
			char *args = input ? prov_dump(input) : strdup("{}");
			if (!(st = add_assistant_text(w, &text, e)))
				/* Genkit's rule: the call id is the ref, else the tool's name. */
				st = prov_walk_add(w, json_pack("{s:s, s:s, s:s, s:s}", "type",
				                                "function_call", "call_id",
				                                ref && *ref ? ref : name ? name : "",
				                                "name", name ? name : "",
				                                "arguments", args ? args : "{}"), e);
			free(args);
			if (st)
				break;
		}
	}
	if (!st)
		st = add_assistant_text(w, &text, e);
	core_buf_release(&text);
	return st;
}

/* Tool outputs as function_call_output items; media a tool returned
 * follow as one user message (an output item carries text only). */
static enum core_status tool_items(const json_t *prev_model, const json_t *msg,
                                   struct prov_walk *w, struct core_err *e)
{
	json_t *rs = prov_ordered_responses(prev_model, msg), *media = json_array(), *p, *q;
	size_t i, j;
	enum core_status st = CORE_OK;
	json_array_foreach(rs, i, p) {
		const json_t *r = json_object_get(p, "toolResponse");
		const char *ref = json_string_value(json_object_get(r, "ref"));
		const char *name = json_string_value(json_object_get(r, "name"));
		char *text = prov_output_text(json_object_get(r, "output"));
		st = prov_walk_add(w, json_pack("{s:s, s:s, s:s}", "type", "function_call_output",
		                                "call_id", ref && *ref ? ref : name ? name : "",
		                                "output", text ? text : "null"), e);
		free(text);
		if (st)
			goto out;
		json_array_foreach(json_object_get(r, "content"), j, q) {
			const json_t *m = json_object_get(q, "media");
			json_t *mp;
			if (!m || !jv_is_string(json_object_get(m, "url")))
				continue;
			if (!(mp = media_input(m, e))) {
				st = e->st;
				goto out;
			}
			json_array_append_new(media, mp);
		}
	}
	if (json_array_size(media))
		st = prov_walk_add(w, json_pack("{s:s, s:O}", "role", "user", "content", media), e);
out:
	json_decref(media);
	json_decref(rs);
	return st;
}

static const struct prov_roles roles = { user_content, model_items, tool_items };

/* A plain stored message: a user message of its text, an assistant
 * message of its text unless that is empty (model_items()). */
static enum core_status plain_items(struct prov_walk *w, const struct prov_plain *m,
                                    struct core_err *e)
{
	return prov_walk_joined(w, m->model ? "assistant" : "user", m, m->model, e);
}

static const struct prov_walker walker = { prov_roles_step, plain_items, NULL };

static json_t *function_tools(const json_t *tools)
{
	json_t *arr = json_array(), *t;
	size_t i;
	json_array_foreach(tools, i, t) {
		json_t *d = prov_tool_decl(t, "parameters");
		if (d) {
			json_object_set_new(d, "type", json_string("function"));
			json_object_set_new(d, "strict", json_false());
		}
		json_array_append_new(arr, d);
	}
	return arr;
}

static enum core_status rsp_build(void *state, const char *name, const char *base,
                                  const struct model_request *req, struct prov_body *body,
                                  struct core_err *e)
{
	static const char *const skip[] = { "temperature", "maxOutputTokens", "topP", "topK",
		"stopSequences", "version", "apiKey", "stream", "model", "input", "tools", NULL };
	const json_t *cfg = req->config, *schema = json_object_get(req->output, "schema");
	struct prov_walk w;
	json_t *b;
	enum core_status st;
	(void)state;
	(void)base;
	prov_walk_init(&w, WHAT, (void *)&roles);
	if ((st = prov_walk(&walker, req, &w, e)))
		goto out;
	/* the input goes where the placeholder is (prov_walk_body()) */
	if (!(b = json_pack("{s:s, s:n, s:b}", "model", name, "input", "stream", 1))) {
		st = core_fail(e, CORE_ENOMEM, WHAT ": out of memory");
		goto out;
	}
	if (json_array_size(req->tools))
		json_object_set_new(b, "tools", function_tools(req->tools));
	if (cfg) {
		prov_map(b, "temperature", cfg, "temperature");
		prov_map(b, "max_output_tokens", cfg, "maxOutputTokens");
		prov_map(b, "top_p", cfg, "topP");
		prov_pass_through(b, cfg, skip);
	}
	/* Stateless unless the config says otherwise: the history is sent
	 * each time, and reasoning comes back encrypted to be replayed. */
	if (!json_object_get(b, "store"))
		json_object_set_new(b, "store", json_false());
	if (!json_object_get(b, "include"))
		json_object_set_new(b, "include", json_pack("[s]", "reasoning.encrypted_content"));
	/* Structured output, as Chat Completions' response_format says it. */
	if (req->output && !json_object_get(b, "text"))
		json_object_set_new(b, "text", json_pack("{s:o}", "format", schema
		        ? json_pack("{s:s, s:s, s:O, s:b}", "type", "json_schema", "name", "output",
		                    "schema", schema, "strict", 1)
		        : json_pack("{s:s}", "type", "json_object")));
	st = prov_walk_body(b, "input", &w, body, e);
	json_decref(b);
out:
	prov_walk_release(&w);
	return st;
}

/* ---- response ---- */

static void calls_clear(struct rsp *s)
{
	for (int i = 0; i < s->ncalls; i++) {
		free(s->calls[i].item_id);
		free(s->calls[i].call_id);
		free(s->calls[i].name);
		core_buf_release(&s->calls[i].args);
	}
	memset(s->calls, 0, sizeof s->calls);
	s->ncalls = 0;
}

static struct rcall *find_call(struct rsp *s, const char *item_id)
{
	for (int i = 0; item_id && i < s->ncalls; i++)
		if (s->calls[i].item_id && !strcmp(s->calls[i].item_id, item_id))
			return &s->calls[i];
	return NULL;
}

static void map_usage(struct rsp *s, const json_t *u)
{
	json_t *g;
	const json_t *v;
	if (!json_is_object(u) || !(g = json_object()))
		return;
	if (json_is_integer(v = json_object_get(u, "input_tokens")))
		json_object_set(g, "inputTokens", (json_t *)v);
	if (json_is_integer(v = json_object_get(u, "output_tokens")))
		json_object_set(g, "outputTokens", (json_t *)v);
	if (json_is_integer(v = json_object_get(u, "total_tokens")))
		json_object_set(g, "totalTokens", (json_t *)v);
	v = json_object_get(json_object_get(u, "output_tokens_details"), "reasoning_tokens");
	if (json_is_integer(v) && json_integer_value(v))
		json_object_set(g, "thoughtsTokens", (json_t *)v);
	v = json_object_get(json_object_get(u, "input_tokens_details"), "cached_tokens");
	if (json_is_integer(v) && json_integer_value(v))
		json_object_set(g, "cachedContentTokens", (json_t *)v);
	json_decref(s->o.usage);
	s->o.usage = g;
}

static enum core_status error_status(const char *code)
{
	if (!code)
		return CORE_EINTERNAL;
	if (strstr(code, "rate_limit"))
		return CORE_EEXHAUSTED;
	if (!strcmp(code, "server_is_overloaded") || !strcmp(code, "slow_down"))
		return CORE_EUNAVAILABLE;
	if (!strcmp(code, "invalid_prompt") || !strcmp(code, "context_length_exceeded"))
		return CORE_EREJECTED;
	return CORE_EINTERNAL;
}

/* A function call whose item is done: handed on whole. */
static enum core_status call_done(struct rsp *s, const json_t *item)
{
	const char *id = json_string_value(json_object_get(item, "id"));
	const char *call_id = json_string_value(json_object_get(item, "call_id"));
	const char *name = json_string_value(json_object_get(item, "name"));
	const json_t *args = json_object_get(item, "arguments");
	struct rcall *c = find_call(s, id);
	const char *text = jv_is_string(args) ? json_string_value(args) : c ? c->args.p : NULL;
	size_t len = jv_is_string(args) ? json_string_length(args) : c ? c->args.len : 0;
	struct core_err pe = { 0 };
	json_t *input, *tr;
	if (!name && c)
		name = c->name;
	if (!call_id && c)
		call_id = c->call_id;
	input = len ? jv_parse(text, len, "arguments", 0, &pe) : json_object();
	if (!input)
		return core_fail(s->o.e, CORE_EINTERNAL, WHAT ": tool call '%s' has invalid JSON "
		                 "arguments: %s", name ? name : "", pe.msg);
	tr = json_pack("{s:s, s:o}", "name", name ? name : "", "input", input);
	if (tr && call_id && *call_id)
		json_object_set_new(tr, "ref", json_string(call_id));
	return prov_emit(&s->o, json_pack("{s:o}", "toolRequest", tr));
}

/* A reasoning item is done: its id and encrypted content ride on the
 * reasoning part (the one streamed for it, else a new one). */
static enum core_status reasoning_done(struct rsp *s, const json_t *item)
{
	const json_t *id = json_object_get(item, "id"), *enc = json_object_get(item, "encrypted_content");
	json_t *md = json_object(), *last, *sp;
	size_t n, i;
	enum core_status st = CORE_OK;
	if (jv_is_string(id))
		json_object_set(md, "itemId", (json_t *)id);
	if (jv_is_string(enc))
		json_object_set(md, "encryptedContent", (json_t *)enc);
	prov_flush(&s->o);
	n = json_array_size(s->o.parts);
	last = n ? json_array_get(s->o.parts, n - 1) : NULL;
	if (s->summary_streamed && last && json_object_get(last, "reasoning")) {
		if (json_object_size(md))
			json_object_set_new(last, "metadata", md);
		else
			json_decref(md);
	} else {
		/* Not streamed (or no summary at all): the summary from the item. */
		struct core_buf text = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		json_array_foreach(json_object_get(item, "summary"), i, sp) {
			const json_t *t = json_object_get(sp, "text");
			if (jv_is_string(t))
				core_buf_addf(&text, "%s%s", text.len ? "\n\n" : "", json_string_value(t));
		}
		json_t *part = json_pack("{s:s, s:o}", "reasoning", text.p ? text.p : "", "metadata", md);
		if (text.len)
			st = prov_emit(&s->o, part);
		else if (json_object_size(md))
			prov_add_part(&s->o, part);
		else
			json_decref(part);
		core_buf_release(&text);
	}
	s->summary_streamed = 0;
	return st;
}

static void rsp_finish(struct rsp *s, const json_t *resp, const char *event)
{
	const char *reason = json_string_value(json_object_get(json_object_get(resp,
	                                       "incomplete_details"), "reason"));
	const char *f = "stop";
	if (!strcmp(event, "response.incomplete"))
		f = reason && !strcmp(reason, "max_output_tokens") ? "length"
		  : reason && !strcmp(reason, "content_filter") ? "blocked" : "other";
	else if (s->refusal)
		f = "blocked";
	snprintf(s->o.finish, sizeof s->o.finish, "%s", f);
	map_usage(s, json_object_get(resp, "usage"));
	s->o.done = 1;
}

static enum core_status on_event(void *ctx, const char *type, const char *data, size_t n)
{
	struct rsp *s = ctx;
	json_t *v;
	const json_t *d, *item;
	const char *t;
	enum core_status st = CORE_OK;
	if (!n)
		return CORE_OK;
	if (!(v = prov_parse(&s->o, data, n)))
		return s->o.e ? s->o.e->st : CORE_EINTERNAL;
	t = json_string_value(json_object_get(v, "type"));
	if (!t)
		t = type;
	d = json_object_get(v, "delta");
	item = json_object_get(v, "item");
	if (!strcmp(t, "response.output_text.delta") && jv_is_string(d) && json_string_length(d)) {
		st = prov_emit(&s->o, json_pack("{s:O}", "text", d));
	} else if (!strcmp(t, "response.refusal.delta") && jv_is_string(d) && json_string_length(d)) {
		s->refusal = 1;
		st = prov_emit(&s->o, json_pack("{s:O}", "text", d));
	} else if ((!strcmp(t, "response.reasoning_summary_text.delta") ||
	            !strcmp(t, "response.reasoning_text.delta")) &&
	           jv_is_string(d) && json_string_length(d)) {
		s->summary_streamed = 1;
		st = prov_emit(&s->o, json_pack("{s:O}", "reasoning", d));
	} else if (!strcmp(t, "response.output_item.added") &&
	           !strcmp(json_string_value(json_object_get(item, "type")) ?: "", "function_call")) {
		struct rcall *c;
		if (s->ncalls >= MAX_CALLS) {
			st = core_fail(s->o.e, CORE_EINTERNAL, WHAT ": more than %d tool calls", MAX_CALLS);
		} else {
			c = &s->calls[s->ncalls++];
			c->item_id = strdup(json_string_value(json_object_get(item, "id")) ?: "");
			c->call_id = strdup(json_string_value(json_object_get(item, "call_id")) ?: "");
			c->name = strdup(json_string_value(json_object_get(item, "name")) ?: "");
			core_buf_init(&c->args, PROV_EVENT_MAX);
		}
	} else if (!strcmp(t, "response.function_call_arguments.delta") && jv_is_string(d)) {
		struct rcall *c = find_call(s, json_string_value(json_object_get(v, "item_id")));
		if (c && core_buf_add(&c->args, json_string_value(d), json_string_length(d)))
			st = core_fail(s->o.e, CORE_EINTERNAL, WHAT ": tool call arguments too long");
	} else if (!strcmp(t, "response.output_item.done")) {
		const char *it = json_string_value(json_object_get(item, "type")) ?: "";
		if (!strcmp(it, "function_call"))
			st = call_done(s, item);
		else if (!strcmp(it, "reasoning"))
			st = reasoning_done(s, item);
	} else if (!strcmp(t, "response.completed") || !strcmp(t, "response.incomplete")) {
		rsp_finish(s, json_object_get(v, "response"), t);
	} else if (!strcmp(t, "response.failed") || !strcmp(t, "error")) {
		const json_t *err = !strcmp(t, "error") ? v
		                  : json_object_get(json_object_get(v, "response"), "error");
		const char *msg = json_string_value(json_object_get(err, "message"));
		const char *code = json_string_value(json_object_get(err, "code"));
		st = core_fail(s->o.e, error_status(code), WHAT ": %s: %s%s%s%s",
		               !strcmp(t, "error") ? "error in stream" : "the response failed",
		               msg ? msg : "unknown error", code ? " (" : "", code ? code : "",
		               code ? ")" : "");
	}
	/* response.created, .in_progress, content_part, *.done and event
	 * types added later: nothing to do. */
	json_decref(v);
	return st;
}

static enum core_status on_error(void *ctx, struct http_error *he, struct core_err *e)
{
	struct rsp *s = ctx;
	struct core_err pe = { 0 };
	json_t *doc = jv_parse(he->body, he->body_len, "error", 0, &pe);
	const json_t *err = json_object_get(doc, "error");
	const char *msg = json_string_value(json_object_get(err, "message"));
	const char *code = json_string_value(json_object_get(err, "code"));
	enum core_status st;
	if (he->status >= 200 && he->status <= 299)
		st = prov_fail_http(&s->o, he, err ? CORE_EINTERNAL : CORE_EUNAVAILABLE, msg, e);
	else
		st = prov_openai_http_error(&s->o, he, msg, code, e);
	json_decref(doc);
	return st;
}

static void rsp_reset(void *ctx)
{
	struct rsp *s = ctx;
	calls_clear(s);
	s->refusal = 0;
	s->summary_streamed = 0;
}

static void rsp_release(void *state)
{
	calls_clear(state);
}

extern const struct model_provider model_openai_responses;

const struct prov_dialect prov_dialect_openai_responses = {
	.p = &model_openai_responses,
	.size = sizeof(struct rsp),
	.url_fmt = "%s/responses",
	.auth_fmt = "Authorization: Bearer %s",
	.build = rsp_build,
	.mode = SSE_MODE_SSE,
	.on_event = on_event,
	.on_error = on_error,
	.on_reset = rsp_reset,
	.release = rsp_release,
	.terminator = "response.completed",
};

/* Its models are OpenAI's, listed under openai: only the key and URL. */
static enum core_status rsp_list(const char *key_file, json_t *row, struct core_err *e)
{
	char *base = prov_env_url(prov_openai_url_vars, model_openai_responses.default_url);
	char *key = NULL;
	enum core_status st = base ? prov_list_row(row, prov_openai_key_vars, key_file,
	                                           prov_openai_url_vars, base, &key)
	                           : CORE_ENOMEM;
	if (!st)
		st = prov_list_header_vars(row, &model_openai_responses);
	prov_secret_free(key);
	free(base);
	return st == CORE_ENOMEM ? core_fail(e, st, WHAT ": out of memory") : st;
}

const struct model_provider model_openai_responses = {
	.prefix = WHAT,
	.dialect = &prov_dialect_openai_responses,
	.list = rsp_list,
	.key_vars = prov_openai_key_vars,
	.url_vars = prov_openai_url_vars,
	.default_url = "https://api.openai.com/v1",
	.env_headers = prov_openai_env_headers,
};
