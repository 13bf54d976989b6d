/*
 * provider_anthropic.c - "anthropic/MODEL": the Messages API, streamed.
 *
 * System messages become the top-level "system"; tool messages become user
 * messages whose tool_result blocks come first (the API's rule), in the
 * order of the tool_use blocks they answer.  Tool input arrives as
 * input_json_delta fragments, assembled per block index and handed on
 * whole at content_block_stop.
 */
#include "provider_common.h"

#include <stdlib.h>
#include <string.h>

#include "../base/json.h"

#define MAX_BLOCKS 256

/* Structured output rides on a forced tool of this name (see
 * output_tool()); its input comes back as the reply's text. */
#define OUTPUT_TOOL "output"

struct block {
	int tool;
	char *id, *name;
	struct core_buf json;
};

struct anth {
	struct prov_out o;
	struct block blocks[MAX_BLOCKS];
	long input_tokens, cached_tokens, cache_created;
	int output_tool;            /* 1: OUTPUT_TOOL is the answer; 2: wrapped in "value" */
};

/* ANTHROPIC_AUTH_TOKEN (a gateway's bearer token) only when there is no
 * API key, as the Anthropic SDKs read them. */
static const char *const key_vars[] = { "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", NULL };
static const char *const auth_fmts[] = { "x-api-key: %s", "Authorization: Bearer %s" };
static const char *const url_vars[] = { "ANTHROPIC_BASE_URL", NULL };
#define API_VERSION "anthropic-version: 2023-06-01"

/* ---- request ---- */

static json_t *media_block(const json_t *m)
{
	const char *url = json_string_value(json_object_get(m, "url"));
	char *mime = NULL;
	const char *data;
	json_t *b;
	if (!url)
		return NULL;
	if (prov_data_url(url, &mime, &data)) {
		b = json_pack("{s:s, s:{s:s, s:s, s:s}}", "type", strncmp(mime, "image/", 6) ? "document" : "image",
		              "source", "type", "base64", "media_type", mime, "data", data);
		free(mime);
		return b;
	}
	return json_pack("{s:s, s:{s:s, s:s}}", "type", "image", "source", "type", "url", "url", url);
}

static json_t *tool_input(const json_t *in)
{
	if (json_is_object(in))
		return json_incref((json_t *)in);
	if (!in || json_is_null(in))
		return json_object();
	return json_pack("{s:O}", "input", in);
}

/*
 * The walk's state: the system texts, and the last message, kept open so
 * that the blocks of the next message with its role join it (the API
 * wants the roles to alternate): its role and its blocks as JSON values
 * separated by commas.
 */
struct anth_walk {
	struct core_buf sys;
	const char *role;               /* the open message's, or NULL */
	struct core_buf blocks;
};

/* Write the open message out. */
static enum core_status flush(struct prov_walk *w, struct core_err *e)
{
	struct anth_walk *a = w->ctx;
	struct core_buf *o = &w->out;
	if (!a->role)
		return CORE_OK;
	if (prov_walk_begin(w, e) || core_buf_grow(o, a->blocks.len + 40))
		return core_fail(e, CORE_ENOMEM, "anthropic: out of memory");
	core_buf_adds(o, "{\"role\":\"");
	core_buf_adds(o, a->role);
	core_buf_adds(o, "\",\"content\":[");
	core_buf_add(o, a->blocks.p, a->blocks.len);
	core_buf_add(o, "]}", 2);
	a->role = NULL;
	core_buf_reset(&a->blocks);
	return CORE_OK;
}

/* Add blocks (JSON values separated by commas) to the open message if it
 * has role, else open a message with them.  front: put them before the
 * message's own blocks. */
static enum core_status add_blocks(struct prov_walk *w, const char *role,
                                   const char *blocks, size_t n, int front,
                                   struct core_err *e)
{
	struct anth_walk *a = w->ctx;
	struct core_buf *b = &a->blocks;
	enum core_status st = CORE_OK;
	if (!n)
		return CORE_OK;
	if (a->role && !strcmp(a->role, role)) {
		if (!front)
			st = core_buf_addc(b, ',') || core_buf_add(b, blocks, n) ? CORE_ENOMEM : CORE_OK;
		else if (!(st = core_buf_grow(b, n + 1))) {
			memmove(b->p + n + 1, b->p, b->len + 1);
			memcpy(b->p, blocks, n);
			b->p[n] = ',';
			b->len += n + 1;
		}
		return st ? core_fail(e, CORE_ENOMEM, "anthropic: out of memory") : CORE_OK;
	}
	if ((st = flush(w, e)))
		return st;
	a->role = role;
	return core_buf_add(b, blocks, n) ? core_fail(e, CORE_ENOMEM, "anthropic: out of memory")
	                                  : CORE_OK;
}

/* add_blocks() of a JSON array's elements (consumed). */
static enum core_status add_array(struct prov_walk *w, const char *role, json_t *arr,
                                  int front, struct core_err *e)
{
	struct core_buf t = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = CORE_OK;
	if (json_array_size(arr)) {
		if (jv_dump(arr, &t))
			st = core_fail(e, CORE_ENOMEM, "anthropic: out of memory");
		else                    /* the elements, without the brackets */
			st = add_blocks(w, role, t.p + 1, t.len - 2, front, e);
	}
	core_buf_release(&t);
	json_decref(arr);
	return st;
}

static enum core_status tool_blocks(struct prov_walk *w, const json_t *m, struct core_err *e)
{
	json_t *rs = prov_ordered_responses(w->prev_model, m), *blocks = json_array(), *p;
	size_t j;
	json_array_foreach(rs, j, p) {
		const json_t *r = json_object_get(p, "toolResponse");
		const char *ref = json_string_value(json_object_get(r, "ref"));
		const char *name = json_string_value(json_object_get(r, "name"));
		char *t = prov_output_text(json_object_get(r, "output"));
		json_t *tc = json_pack("[{s:s, s:s}]", "type", "text", "text", t ? t : ""), *q;
		size_t k;
		/* Images the tool returned ride in the tool_result. */
		json_array_foreach(json_object_get(r, "content"), k, q) {
			json_t *mb = json_object_get(q, "media") ? media_block(json_object_get(q, "media")) : NULL;
			if (mb)
				json_array_append_new(tc, mb);
		}
		json_array_append_new(blocks, json_pack("{s:s, s:s, s:o}", "type", "tool_result",
		        "tool_use_id", ref && *ref ? ref : name ? name : "", "content",
		        json_array_size(tc) > 1 ? json_incref(tc) : json_string(t ? t : "")));
		json_decref(tc);
		free(t);
	}
	json_decref(rs);
	return add_array(w, "user", blocks, 1, e);
}

static enum core_status anth_step(struct prov_walk *w, const char *role, const json_t *m,
                                  struct core_err *e)
{
	struct anth_walk *a = w->ctx;
	const json_t *content = json_object_get(m, "content");
	json_t *blocks, *p;
	size_t j;
	if (!strcmp(role, "system")) {
		json_t *t = prov_text(content);
		if (!t || (a->sys.len && json_string_length(t) && core_buf_adds(&a->sys, "\n\n")) ||
		    core_buf_add(&a->sys, json_string_value(t), json_string_length(t))) {
			json_decref(t);
			return core_fail(e, CORE_ENOMEM, "anthropic: out of memory");
		}
		json_decref(t);
		return CORE_OK;
	}
	if (!strcmp(role, "tool"))
		return tool_blocks(w, m, e);
	blocks = json_array();
	json_array_foreach(content, j, p) {
		const json_t *t = json_object_get(p, "text"), *v;
		if ((v = json_object_get(p, "toolRequest"))) {
			const char *ref = json_string_value(json_object_get(v, "ref"));
			const char *name = json_string_value(json_object_get(v, "name"));
			json_array_append_new(blocks, json_pack("{s:s, s:s, s:s, s:o}", "type", "tool_use",
			        "id", ref && *ref ? ref : name ? name : "", "name", name ? name : "",
			        "input", tool_input(json_object_get(v, "input"))));
		} else if ((v = json_object_get(p, "media"))) {
			/* The Messages API takes images and documents (PDF) only. */
			const char *ct = json_string_value(json_object_get(v, "contentType"));
			if (ct && (!strncmp(ct, "audio/", 6) || !strncmp(ct, "video/", 6))) {
				json_decref(blocks);
				return core_fail(e, CORE_EINVAL, "anthropic: cannot send media of "
				                 "type '%s' (images and PDFs are supported)", ct);
			}
			json_t *b = media_block(v);
			if (b)
				json_array_append_new(blocks, b);
		} else if ((v = json_object_get(p, "reasoning")) && jv_is_string(v)) {
			/* Thinking goes back unchanged, and only with its signature. */
			const json_t *sig = json_object_get(json_object_get(p, "metadata"), "signature");
			if (jv_is_string(sig))
				json_array_append_new(blocks, json_pack("{s:s, s:O, s:O}", "type", "thinking",
				                                        "thinking", v, "signature", sig));
		} else if ((v = json_object_get(json_object_get(p, "custom"), "redactedThinking")) &&
		           jv_is_string(v)) {
			/* Encrypted thinking goes back exactly as it came. */
			json_array_append_new(blocks, json_pack("{s:s, s:O}", "type", "redacted_thinking",
			                                        "data", v));
		} else if (jv_is_string(t) && json_string_length(t)) {
			json_array_append_new(blocks, json_pack("{s:s, s:O}", "type", "text", "text", t));
		}
	}
	return add_array(w, strcmp(role, "model") ? "user" : "assistant", blocks, 0, e);
}

/* A plain stored message: its non-empty texts as text blocks. */
static enum core_status anth_plain(struct prov_walk *w, const struct prov_plain *m,
                                   struct core_err *e)
{
	struct core_buf t = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = CORE_OK;
	for (size_t i = 0; i < m->n && !st; i++) {
		if (!m->text[i].n)
			continue;
		if ((t.len && core_buf_addc(&t, ',')) ||
		    core_buf_adds(&t, "{\"type\":\"text\",\"text\":\"") ||
		    core_buf_add(&t, m->text[i].p, m->text[i].n) || core_buf_add(&t, "\"}", 2))
			st = core_fail(e, CORE_ENOMEM, "anthropic: out of memory");
	}
	if (!st)
		st = add_blocks(w, m->model ? "assistant" : "user", t.p, t.len, 0, e);
	core_buf_release(&t);
	return st;
}

static const struct prov_walker walker = { anth_step, anth_plain, flush };

static json_t *build_tools(const json_t *tools)
{
	json_t *arr = json_array(), *t;
	size_t i;
	json_array_foreach(tools, i, t)
		json_array_append_new(arr, prov_tool_decl(t, "input_schema"));
	return arr;
}

/*
 * Structured output.  The Messages API constrains a reply only through a
 * tool's input schema, so the schema becomes the tool OUTPUT_TOOL and the
 * request forces it: tool_choice {"type":"tool"} when it is the only
 * tool, "any" when the agent's tools may run first.  A config that sets
 * tool_choice or thinking (which allows only "auto") leaves the choice to
 * the model.  A schema that is not an object is wrapped as {"value": …}
 * (input schemas must be objects) and unwrapped on the way back.
 */
static enum core_status output_tool(struct anth *s, json_t *b, const json_t *output,
                                    const json_t *cfg, struct core_err *e)
{
	const json_t *schema = json_object_get(output, "schema");
	const char *type = json_string_value(json_object_get(schema, "type"));
	json_t *tools = json_object_get(b, "tools"), *t, *in;
	size_t i;
	if (!output)
		return CORE_OK;
	json_array_foreach(tools, i, t)
		if (!strcmp(json_string_value(json_object_get(t, "name")) ?: "", OUTPUT_TOOL))
			return core_fail(e, CORE_EINVAL, "anthropic: the tool '%s' clashes with the "
			                 "structured output tool of that name", OUTPUT_TOOL);
	s->output_tool = !schema || (type && !strcmp(type, "object")) ? 1 : 2;
	if (!schema)
		in = json_pack("{s:s}", "type", "object");
	else if (s->output_tool == 1)
		in = json_incref((json_t *)schema);
	else
		in = json_pack("{s:s, s:{s:O}, s:[s]}", "type", "object", "properties", "value", schema,
		               "required", "value");
	if (!tools) {
		json_object_set_new(b, "tools", json_array());
		tools = json_object_get(b, "tools");
	}
	json_array_append_new(tools, json_pack("{s:s, s:s, s:o}", "name", OUTPUT_TOOL, "description",
	                      "Give your final answer as this tool's input.", "input_schema", in));
	if (!prov_cfg(cfg, "tool_choice") && !prov_cfg(cfg, "thinking"))
		json_object_set_new(b, "tool_choice", json_array_size(tools) == 1
		                    ? json_pack("{s:s, s:s}", "type", "tool", "name", OUTPUT_TOOL)
		                    : json_pack("{s:s}", "type", "any"));
	return CORE_OK;
}

/* cacheSystem / cacheTools in the config: true (an ephemeral breakpoint)
 * or a cache_control object, put on the system prompt and the last tool. */
static json_t *cache_control(const json_t *cfg, const char *key)
{
	const json_t *v = prov_cfg(cfg, key);
	if (json_is_true(v))
		return json_pack("{s:s}", "type", "ephemeral");
	return json_is_object(v) ? json_deep_copy(v) : NULL;
}

/* ---- response ---- */

static void blocks_clear(struct anth *s)
{
	for (int i = 0; i < MAX_BLOCKS; i++) {
		free(s->blocks[i].id);
		free(s->blocks[i].name);
		core_buf_release(&s->blocks[i].json);
		memset(&s->blocks[i], 0, sizeof s->blocks[i]);
	}
}

static const char *map_stop(const char *r)
{
	if (!strcmp(r, "end_turn") || !strcmp(r, "stop_sequence") || !strcmp(r, "tool_use"))
		return "stop";
	if (!strcmp(r, "max_tokens") || !strcmp(r, "model_context_window_exceeded"))
		return "length";
	if (!strcmp(r, "refusal"))
		return "blocked";
	return "other";
}

static enum core_status error_type_status(const char *t)
{
	static const struct { const char *type; enum core_status st; } map[] = {
		{ "invalid_request_error", CORE_EREJECTED }, { "authentication_error", CORE_EUNAUTH },
		{ "billing_error", CORE_EPERM }, { "permission_error", CORE_EPERM },
		{ "not_found_error", CORE_ENOTFOUND }, { "request_too_large", CORE_EREJECTED },
		{ "rate_limit_error", CORE_EEXHAUSTED }, { "timeout_error", CORE_EDEADLINE },
		{ "api_error", CORE_EINTERNAL }, { "overloaded_error", CORE_EUNAVAILABLE },
	};
	for (size_t i = 0; t && i < sizeof map / sizeof map[0]; i++)
		if (!strcmp(map[i].type, t))
			return map[i].st;
	return CORE_EINTERNAL;
}

static void set_usage(struct anth *s, const json_t *out_tokens)
{
	json_t *u = json_object();
	json_object_set_new(u, "inputTokens", json_integer(s->input_tokens));
	if (json_is_integer(out_tokens))
		json_object_set(u, "outputTokens", (json_t *)out_tokens);
	if (s->cached_tokens)
		json_object_set_new(u, "cachedContentTokens", json_integer(s->cached_tokens));
	/* GenerationUsage has no field for cache writes: custom carries it. */
	if (s->cache_created)
		json_object_set_new(u, "custom", json_pack("{s:I}", "cacheCreationInputTokens",
		                                           (json_int_t)s->cache_created));
	json_decref(s->o.usage);
	s->o.usage = u;
}

/* Attach a thinking block's signature to the reasoning part it ends. */
static void add_signature(struct anth *s, const json_t *sig)
{
	size_t n;
	json_t *last;
	prov_flush(&s->o);
	n = json_array_size(s->o.parts);
	last = n ? json_array_get(s->o.parts, n - 1) : NULL;
	if (last && json_object_get(last, "reasoning")) {
		json_t *md = json_object_get(last, "metadata");
		if (!md)
			json_object_set_new(last, "metadata", md = json_object());
		json_object_set(md, "signature", (json_t *)sig);
	}
}

static enum core_status on_event(void *ctx, const char *type, const char *data, size_t n)
{
	struct anth *s = ctx;
	json_t *v = prov_parse(&s->o, data, n);
	const char *t;
	const json_t *ix;
	struct block *b = NULL;
	enum core_status st = CORE_OK;
	if (!v)
		return s->o.e ? s->o.e->st : CORE_EINVAL;
	t = json_string_value(json_object_get(v, "type"));
	if (!t)
		t = type;
	ix = json_object_get(v, "index");
	if (json_is_integer(ix) && json_integer_value(ix) >= 0 && json_integer_value(ix) < MAX_BLOCKS)
		b = &s->blocks[json_integer_value(ix)];
	if (!strcmp(t, "error")) {
		const json_t *err = json_object_get(v, "error");
		const char *et = json_string_value(json_object_get(err, "type"));
		const char *msg = json_string_value(json_object_get(err, "message"));
		st = core_fail(s->o.e, error_type_status(et), "anthropic: error in stream: %s (%s)",
		               msg ? msg : "unknown error", et ? et : "error");
	} else if (!strcmp(t, "message_start")) {
		const json_t *u = json_object_get(json_object_get(v, "message"), "usage");
		s->input_tokens = (long)json_integer_value(json_object_get(u, "input_tokens"));
		s->cached_tokens = (long)json_integer_value(json_object_get(u, "cache_read_input_tokens"));
		s->cache_created = (long)json_integer_value(json_object_get(u, "cache_creation_input_tokens"));
		set_usage(s, json_object_get(u, "output_tokens"));
	} else if (!strcmp(t, "content_block_start") && b) {
		const json_t *cb = json_object_get(v, "content_block");
		const char *bt = json_string_value(json_object_get(cb, "type"));
		if (bt && (!strcmp(bt, "tool_use") || !strcmp(bt, "server_tool_use"))) {
			const char *id = json_string_value(json_object_get(cb, "id"));
			const char *name = json_string_value(json_object_get(cb, "name"));
			b->tool = 1;
			free(b->id);
			free(b->name);
			b->id = strdup(id ? id : "");
			b->name = strdup(name ? name : "");
			core_buf_release(&b->json);
			core_buf_init(&b->json, PROV_EVENT_MAX);
		} else if (bt && !strcmp(bt, "redacted_thinking") &&
		           jv_is_string(json_object_get(cb, "data"))) {
			/* Kept whole (as Genkit's custom part) to be replayed. */
			st = prov_emit(&s->o, json_pack("{s:{s:O}}", "custom", "redactedThinking",
			                                 json_object_get(cb, "data")));
		}
	} else if (!strcmp(t, "content_block_delta")) {
		const json_t *d = json_object_get(v, "delta"), *x;
		const char *dt = json_string_value(json_object_get(d, "type"));
		if (!dt) {
			/* unknown shape: ignore */
		} else if (!strcmp(dt, "text_delta") && jv_is_string(x = json_object_get(d, "text")) &&
		           json_string_length(x)) {
			st = prov_emit(&s->o, json_pack("{s:O}", "text", x));
		} else if (!strcmp(dt, "thinking_delta") && jv_is_string(x = json_object_get(d, "thinking")) &&
		           json_string_length(x)) {
			st = prov_emit(&s->o, json_pack("{s:O}", "reasoning", x));
		} else if (!strcmp(dt, "signature_delta") && jv_is_string(x = json_object_get(d, "signature"))) {
			add_signature(s, x);
		} else if (!strcmp(dt, "input_json_delta") && b && b->tool &&
		           jv_is_string(x = json_object_get(d, "partial_json"))) {
			if (core_buf_add(&b->json, json_string_value(x), json_string_length(x)))
				st = core_fail(s->o.e, CORE_EINTERNAL, "anthropic: tool input too long");
		}
	} else if (!strcmp(t, "content_block_stop") && b && b->tool) {
		json_t *input;
		struct core_err pe = {0};
		input = b->json.len ? jv_parse(b->json.p, b->json.len, "input", 0, &pe) : json_object();
		if (!input) {
			st = core_fail(s->o.e, CORE_EINTERNAL, "anthropic: tool call '%s' has invalid JSON input: %s",
			               b->name, pe.msg);
		} else if (s->output_tool && !strcmp(b->name, OUTPUT_TOOL)) {
			/* The structured answer: its input is the reply's text. */
			char *text = prov_dump(s->output_tool == 2 ? json_object_get(input, "value") : input);
			json_decref(input);
			st = text ? prov_emit(&s->o, json_pack("{s:s}", "text", text))
			          : core_fail(s->o.e, CORE_ENOMEM, "anthropic: out of memory");
			free(text);
		} else {
			st = prov_emit(&s->o, json_pack("{s:{s:s, s:s, s:o}}", "toolRequest", "name", b->name,
			                                 "ref", b->id, "input", input));
		}
		b->tool = 0;
	} else if (!strcmp(t, "message_delta")) {
		const char *r = json_string_value(json_object_get(json_object_get(v, "delta"), "stop_reason"));
		if (r)
			snprintf(s->o.finish, sizeof s->o.finish, "%s", map_stop(r));
		set_usage(s, json_object_get(json_object_get(v, "usage"), "output_tokens"));
	} else if (!strcmp(t, "message_stop")) {
		s->o.done = 1;
	}
	/* ping and event types added later: nothing to do. */
	json_decref(v);
	return st;
}

static enum core_status on_error(void *ctx, struct http_error *he, struct core_err *e)
{
	struct anth *s = ctx;
	struct core_err pe = {0};
	json_t *doc = jv_parse(he->body, he->body_len, "error", 0, &pe);
	const json_t *err = json_object_get(doc, "error");
	const char *msg = json_string_value(json_object_get(err, "message"));
	const char *et = json_string_value(json_object_get(err, "type"));
	enum core_status st;
	if (he->status >= 200 && he->status <= 299)
		st = prov_fail_http(&s->o, he, et ? error_type_status(et) : CORE_EUNAVAILABLE, msg, e);
	else
		st = prov_fail_http(&s->o, he, prov_http_status(he->status), msg, e);
	json_decref(doc);
	return st;
}

static void on_attempt_reset(void *ctx)
{
	struct anth *s = ctx;
	blocks_clear(s);
	s->input_tokens = s->cached_tokens = s->cache_created = 0;
}

/*
 * max_tokens: maxOutputTokens, else 4096 (the API requires one); when the
 * config's thinking budget is not below that default, the default is
 * raised above it (budget + 4096) instead of the API's 400.
 */
static json_t *max_tokens(const json_t *cfg)
{
	const json_t *budget = json_object_get(prov_cfg(cfg, "thinking"), "budget_tokens");
	if (prov_cfg(cfg, "maxOutputTokens"))
		return json_incref((json_t *)prov_cfg(cfg, "maxOutputTokens"));
	if (json_is_integer(budget) && json_integer_value(budget) >= 4096)
		return json_integer(json_integer_value(budget) + 4096);
	return json_integer(4096);
}

static enum core_status anth_build(void *state, const char *name, const char *base,
                                   const struct model_request *req, struct prov_body *body,
                                   struct core_err *e)
{
	static const char *const skip[] = { "temperature", "maxOutputTokens", "topP", "topK",
		"stopSequences", "version", "apiKey", "stream", "model", "messages", "system",
		"tools", "cacheSystem", "cacheTools", NULL };
	struct anth *s = state;
	struct anth_walk a = { CORE_BUF_INIT(CORE_BUF_UNLIMITED), NULL,
	                       CORE_BUF_INIT(CORE_BUF_UNLIMITED) };
	struct prov_walk w;
	json_t *b = NULL, *system = NULL;
	const json_t *cfg = req->config;
	enum core_status st;
	(void)base;
	prov_walk_init(&w, "anthropic", &a);
	if ((st = prov_walk(&walker, req, &w, e)))
		goto out;
	if (!(b = json_pack("{s:s}", "model", name))) {
		st = core_fail(e, CORE_ENOMEM, "anthropic: out of memory");
		goto out;
	}
	json_object_set_new(b, "max_tokens", max_tokens(cfg));
	/* the system texts are valid UTF-8, and so is their join */
	if (a.sys.len && (system = json_stringn_nocheck(a.sys.p, a.sys.len))) {
		json_t *cc = cache_control(cfg, "cacheSystem");
		if (cc)
			json_object_set_new(b, "system", json_pack("[{s:s, s:O, s:o}]", "type", "text",
			                                           "text", system, "cache_control", cc));
		else
			json_object_set(b, "system", system);
	}
	json_object_set_new(b, "messages", json_null());      /* prov_walk_body()'s placeholder */
	if (json_array_size(req->tools)) {
		json_t *tools = build_tools(req->tools), *cc = cache_control(cfg, "cacheTools");
		if (cc)
			json_object_set_new(json_array_get(tools, json_array_size(tools) - 1),
			                    "cache_control", cc);
		json_object_set_new(b, "tools", tools);
	}
	if ((st = output_tool(s, b, req->output, cfg, e)))
		goto out;
	json_object_set_new(b, "stream", json_true());
	prov_map(b, "temperature", cfg, "temperature");
	prov_map(b, "top_p", cfg, "topP");
	prov_map(b, "top_k", cfg, "topK");
	prov_map(b, "stop_sequences", cfg, "stopSequences");
	if (cfg)
		prov_pass_through(b, cfg, skip);
	st = prov_walk_body(b, "messages", &w, body, e);
out:
	json_decref(b);
	json_decref(system);
	prov_walk_release(&w);
	core_buf_release(&a.sys);
	core_buf_release(&a.blocks);
	return st;
}

static void anth_release(void *state)
{
	blocks_clear(state);
}

extern const struct model_provider model_anthropic;

const struct prov_dialect prov_dialect_anthropic = {
	.p = &model_anthropic,
	.size = sizeof(struct anth),
	.url_fmt = "%s/v1/messages",
	.auth_fmt = "x-api-key: %s",
	.auth_fmts = auth_fmts,
	.extra_header = API_VERSION,
	.build = anth_build,
	.mode = SSE_MODE_SSE,
	.on_event = on_event,
	.on_error = on_error,
	.on_reset = on_attempt_reset,
	.release = anth_release,
	.terminator = "message_stop",
};

/* GET /v1/models: {"data": [{"id": "claude-...", ...}], "has_more"}. */
static enum core_status anth_list(const char *key_file, json_t *row, struct core_err *e)
{
	json_t *doc;
	enum core_status st = prov_list_get(&model_anthropic, row, key_file,
	                                    "/v1/models?limit=1000", auth_fmts, API_VERSION,
	                                    &doc, e);
	if (!st && doc)
		st = prov_list_models(row, "anthropic", json_object_get(doc, "data"), "id", NULL);
	json_decref(doc);
	return st;
}

const struct model_provider model_anthropic = {
	.prefix = "anthropic",
	.dialect = &prov_dialect_anthropic,
	.list = anth_list,
	.key_vars = key_vars,
	.url_vars = url_vars,
	.default_url = "https://api.anthropic.com",
};
