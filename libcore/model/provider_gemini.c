/*
 * provider_gemini.c - "googleai/MODEL": the Gemini API,
 * streamGenerateContent?alt=sse.
 *
 * Gemini usually sends no call ids: a functionCall is matched to its
 * functionResponse by position and name.  So tool requests get a ref only
 * when Gemini gave an id (kept in the part's metadata.callId too, since
 * the runtime gives refless requests refs of its own); going back, calls
 * and responses carry an id only when Gemini gave one, and responses are
 * put in the order of the calls they answer.  Thought signatures ride in
 * metadata.signature and go back unchanged.
 */
#include "provider_common.h"

#include <stdlib.h>
#include <string.h>

#include "../base/json.h"

struct gem {
	struct prov_out o;
};

/* Google's SDKs prefer GOOGLE_API_KEY when both are set. */
static const char *const key_vars[] = { "GOOGLE_API_KEY", "GEMINI_API_KEY", NULL };
static const char *const url_vars[] = { "GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL", NULL };

/* ---- request ---- */

/* JSON Schema keys the Gemini Schema subset refuses, removed recursively. */
static json_t *clean_schema(const json_t *s)
{
	json_t *out;
	if (json_is_array(s)) {
		size_t i;
		json_t *v;
		out = json_array();
		json_array_foreach(s, i, v)
			json_array_append_new(out, clean_schema(v));
		return out;
	}
	if (!json_is_object(s))
		return json_deep_copy(s);
	out = json_object();
	{
		const char *k;
		json_t *v;
		json_object_foreach((json_t *)s, k, v) {
			if (!strcmp(k, "$schema") || !strcmp(k, "additionalProperties"))
				continue;
			json_object_set_new(out, k, clean_schema(v));
		}
	}
	return out;
}

/* Keywords of Gemini's Schema (the OpenAPI subset "parameters" takes)
 * besides type, properties, items and anyOf, which hold schemas. */
static const char *const subset_keys[] = {
	"format", "title", "description", "nullable", "enum", "maxItems", "minItems",
	"required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern",
	"example", "propertyOrdering", "default", "minimum", "maximum", NULL
};

/*
 * Whether schema s says nothing the Schema subset cannot (once $schema and
 * additionalProperties are removed): a type array ("type": ["string",
 * "null"]), $ref and $defs, oneOf, allOf, const, ... do not fit, and such
 * a schema (MCP servers write them) goes as parametersJsonSchema, plain
 * JSON Schema, which Gemini accepts whole.
 */
static int fits_subset(const json_t *s)
{
	const char *k;
	json_t *v;
	if (!json_is_object(s))
		return 0;
	json_object_foreach((json_t *)s, k, v) {
		int known = 0;
		size_t i;
		json_t *x;
		if (!strcmp(k, "$schema") || !strcmp(k, "additionalProperties"))
			continue;
		if (!strcmp(k, "type")) {
			if (!json_is_string(v))
				return 0;
		} else if (!strcmp(k, "properties")) {
			const char *pk;
			json_object_foreach(v, pk, x)
				if (!fits_subset(x))
					return 0;
		} else if (!strcmp(k, "items")) {
			if (!fits_subset(v))
				return 0;
		} else if (!strcmp(k, "anyOf")) {
			json_array_foreach(v, i, x)
				if (!fits_subset(x))
					return 0;
		} else {
			for (i = 0; subset_keys[i] && !known; i++)
				known = !strcmp(k, subset_keys[i]);
			if (!known)
				return 0;
		}
	}
	return 1;
}

static json_t *media_part(const json_t *m)
{
	const char *url = json_string_value(json_object_get(m, "url"));
	const char *ct = json_string_value(json_object_get(m, "contentType"));
	char *mime = NULL;
	const char *data;
	json_t *p;
	if (!url)
		return NULL;
	if (prov_data_url(url, &mime, &data)) {
		p = json_pack("{s:{s:s, s:s}}", "inlineData", "mimeType", ct ? ct : mime, "data", data);
		free(mime);
		return p;
	}
	p = json_pack("{s:{s:s}}", "fileData", "fileUri", url);
	if (ct)
		json_object_set_new(json_object_get(p, "fileData"), "mimeType", json_string(ct));
	return p;
}

static void add_signature(json_t *part, const json_t *src)
{
	const json_t *sig = json_object_get(json_object_get(src, "metadata"), "signature");
	if (jv_is_string(sig))
		json_object_set(part, "thoughtSignature", (json_t *)sig);
}

/* The request part of prev_model that response r answers (or NULL). */
static const json_t *call_for(const json_t *prev_model, const json_t *r, size_t pos)
{
	const char *ref = json_string_value(json_object_get(r, "ref"));
	size_t i, n = 0;
	json_t *p;
	json_array_foreach(json_object_get(prev_model, "content"), i, p) {
		const json_t *tr = json_object_get(p, "toolRequest");
		const char *tref;
		if (!tr)
			continue;
		tref = json_string_value(json_object_get(tr, "ref"));
		if (ref && tref && !strcmp(ref, tref))
			return p;
		if (!ref && n == pos)
			return p;
		n++;
	}
	return NULL;
}

/* The functionResponse part for the j-th tool response p, answering a
 * call of the model turn prev_model. */
static json_t *function_response(const json_t *prev_model, const json_t *p, size_t j)
{
	const json_t *r = json_object_get(p, "toolResponse");
	const json_t *out = json_object_get(r, "output");
	const json_t *call = call_for(prev_model, r, j);
	const json_t *cid = json_object_get(json_object_get(call, "metadata"), "callId");
	json_t *fr = json_pack("{s:O}", "name", json_object_get(r, "name"));
	if (jv_is_string(cid))
		json_object_set(fr, "id", (json_t *)cid);
	json_object_set_new(fr, "response", json_is_object(out)
	        ? json_incref((json_t *)out)
	        : json_pack("{s:O, s:O}", "name", json_object_get(r, "name"),
	                    "content", out ? out : json_null()));
	/* Media the tool returned: functionResponse.parts. */
	json_t *fparts = json_array(), *q;
	size_t k;
	json_array_foreach(json_object_get(r, "content"), k, q) {
		json_t *mp = json_object_get(q, "media") ? media_part(json_object_get(q, "media")) : NULL;
		if (mp)
			json_array_append_new(fparts, mp);
	}
	if (json_array_size(fparts))
		json_object_set(fr, "parts", fparts);
	json_decref(fparts);
	return json_pack("{s:o}", "functionResponse", fr);
}

/* The Gemini part for the Genkit part p of a user, model or system turn;
 * NULL for what Gemini is not sent. */
static json_t *gemini_part(const json_t *p)
{
	const json_t *v, *t = json_object_get(p, "text");
	json_t *part = NULL;
	if ((v = json_object_get(p, "toolRequest"))) {
		const json_t *in = json_object_get(v, "input");
		const json_t *cid = json_object_get(json_object_get(p, "metadata"), "callId");
		json_t *fc = json_pack("{s:O}", "name", json_object_get(v, "name"));
		if (jv_is_string(cid))
			json_object_set(fc, "id", (json_t *)cid);
		json_object_set_new(fc, "args", json_is_object(in) ? json_incref((json_t *)in)
		                    : in && !json_is_null(in) ? json_pack("{s:O}", "input", in)
		                    : json_object());
		part = json_pack("{s:o}", "functionCall", fc);
		add_signature(part, p);
	} else if ((v = json_object_get(p, "media"))) {
		part = media_part(v);
	} else if ((v = json_object_get(p, "reasoning")) && jv_is_string(v)) {
		part = json_pack("{s:O, s:b}", "text", v, "thought", 1);
		add_signature(part, p);
	} else if ((v = json_object_get(p, "custom")) && json_is_object(v)) {
		part = json_deep_copy(v);
	} else if (jv_is_string(t) && (json_string_length(t) ||
	           json_object_get(json_object_get(p, "metadata"), "signature"))) {
		/* An empty text part may carry the turn's thought
		 * signature; it goes back with it. */
		part = json_pack("{s:O}", "text", t);
		add_signature(part, p);
	}
	return part;
}

/* One message as a Content of the request; system parts go to the
 * systemInstruction (w->ctx, an array). */
static enum core_status gem_step(struct prov_walk *w, const char *role, const json_t *m,
                                 struct core_err *e)
{
	json_t *parts = json_array(), *p;
	size_t j;
	if (!strcmp(role, "tool")) {
		json_t *rs = prov_ordered_responses(w->prev_model, m);
		json_array_foreach(rs, j, p)
			json_array_append_new(parts, function_response(w->prev_model, p, j));
		json_decref(rs);
		role = "user";
	} else {
		json_array_foreach(json_object_get(m, "content"), j, p) {
			json_t *part = gemini_part(p);
			if (part)
				json_array_append_new(parts, part);
		}
		if (!strcmp(role, "system")) {
			json_array_extend(w->ctx, parts);
			json_decref(parts);
			return CORE_OK;
		}
	}
	if (!json_array_size(parts)) {
		json_decref(parts);
		return CORE_OK;
	}
	return prov_walk_add(w, json_pack("{s:s, s:o}", "role", role, "parts", parts), e);
}

/* A plain stored message: its non-empty texts as text parts (gemini_part). */
static enum core_status gem_plain(struct prov_walk *w, const struct prov_plain *m,
                                  struct core_err *e)
{
	struct core_buf *o = &w->out;
	size_t i, len = 0, parts = 0;
	for (i = 0; i < m->n; i++) {
		len += m->text[i].n;
		parts += m->text[i].n > 0;
	}
	if (!parts)
		return CORE_OK;
	if (prov_walk_begin(w, e) || core_buf_grow(o, len + 16 * parts + 32))
		return core_fail(e, CORE_ENOMEM, "googleai: out of memory");
	core_buf_adds(o, m->model ? "{\"role\":\"model\",\"parts\":["
	                          : "{\"role\":\"user\",\"parts\":[");
	for (i = 0; i < m->n; i++) {
		if (!m->text[i].n)
			continue;
		core_buf_adds(o, "{\"text\":\"");
		core_buf_add(o, m->text[i].p, m->text[i].n);
		core_buf_adds(o, --parts ? "\"}," : "\"}");
	}
	core_buf_add(o, "]}", 2);
	return CORE_OK;
}

static const struct prov_walker walker = { gem_step, gem_plain, NULL };

static json_t *build_tools(const json_t *tools)
{
	json_t *decls = json_array(), *t;
	size_t i;
	json_array_foreach(tools, i, t) {
		const json_t *schema = json_object_get(t, "inputSchema");
		json_t *d = json_pack("{s:O}", "name", json_object_get(t, "name"));
		if (json_object_get(t, "description"))
			json_object_set(d, "description", json_object_get(t, "description"));
		if (json_is_object(schema) && fits_subset(schema)) {
			json_object_set_new(d, "parameters", clean_schema(schema));
		} else if (json_is_object(schema)) {
			json_t *js = json_deep_copy(schema);
			json_object_del(js, "$schema");
			json_object_set_new(d, "parametersJsonSchema", js);
		}
		json_array_append_new(decls, d);
	}
	return json_pack("[{s:o}]", "functionDeclarations", decls);
}

static void map_config(json_t *b, const json_t *cfg)
{
	static const char *const top[] = { "safetySettings", "toolConfig", "cachedContent",
		"labels", NULL };
	static const char *const skip[] = { "safetySettings", "toolConfig", "cachedContent",
		"labels", "version", "apiKey", "contents", "systemInstruction", "tools", NULL };
	json_t *gc = json_object();
	if (cfg) {
		for (const char *const *k = top; *k; k++)
			prov_map(b, *k, cfg, *k);
		/* Genkit's names are Gemini's names; everything else is passed
		 * into generationConfig as given (temperature, topK, ...). */
		prov_pass_through(gc, cfg, skip);
	}
	if (json_object_size(gc))
		json_object_set(b, "generationConfig", gc);
	json_decref(gc);
}

/* Structured output: JSON mode and the schema as plain JSON Schema
 * (responseJsonSchema; the older responseSchema subset refuses much of
 * it), unless the config sets them. */
static void set_response_format(json_t *b, const json_t *output)
{
	const json_t *schema = json_object_get(output, "schema");
	json_t *gc;
	if (!output)
		return;
	if (!(gc = json_object_get(b, "generationConfig"))) {
		json_object_set_new(b, "generationConfig", json_object());
		gc = json_object_get(b, "generationConfig");
	}
	if (!json_object_get(gc, "responseMimeType"))
		json_object_set_new(gc, "responseMimeType", json_string("application/json"));
	if (schema && !json_object_get(gc, "responseSchema") && !json_object_get(gc, "responseJsonSchema"))
		json_object_set(gc, "responseJsonSchema", (json_t *)schema);
}

/* ---- response ---- */

static const char *map_finish(const char *f)
{
	static const char *const blocked[] = { "SAFETY", "RECITATION", "LANGUAGE", "BLOCKLIST",
		"PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT",
		"IMAGE_RECITATION", NULL };
	static const char *const other[] = { "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL",
		"NO_IMAGE", "IMAGE_OTHER", "OTHER", "MISSING_THOUGHT_SIGNATURE",
		"TOO_MANY_TOOL_CALLS", NULL };
	if (!strcmp(f, "STOP"))
		return "stop";
	if (!strcmp(f, "MAX_TOKENS"))
		return "length";
	for (const char *const *b = blocked; *b; b++)
		if (!strcmp(*b, f))
			return "blocked";
	for (const char *const *o = other; *o; o++)
		if (!strcmp(*o, f))
			return "other";
	return "unknown";
}

static void map_usage(struct gem *s, const json_t *u)
{
	static const char *const from[] = { "promptTokenCount", "candidatesTokenCount",
		"totalTokenCount", "thoughtsTokenCount", "cachedContentTokenCount" };
	static const char *const to[] = { "inputTokens", "outputTokens", "totalTokens",
		"thoughtsTokens", "cachedContentTokens" };
	json_t *g = json_object();
	for (size_t i = 0; i < 5; i++) {
		const json_t *v = json_object_get(u, from[i]);
		if (json_is_integer(v))
			json_object_set(g, to[i], (json_t *)v);
	}
	json_decref(s->o.usage);
	s->o.usage = g;
}

static json_t *signed_part(json_t *part, const json_t *src, const char *cid)
{
	const json_t *sig = json_object_get(src, "thoughtSignature");
	json_t *md = NULL;
	if (jv_is_string(sig) || cid) {
		md = json_object();
		if (jv_is_string(sig))
			json_object_set(md, "signature", (json_t *)sig);
		if (cid)
			json_object_set_new(md, "callId", json_string(cid));
		json_object_set_new(part, "metadata", md);
	}
	return part;
}

static enum core_status status_from_doc(const json_t *err, long http)
{
	const char *name = json_string_value(json_object_get(err, "status"));
	size_t i;
	json_t *d;
	json_array_foreach(json_object_get(err, "details"), i, d) {
		const char *reason = json_string_value(json_object_get(d, "reason"));
		if (reason && !strcmp(reason, "API_KEY_INVALID"))
			return CORE_EUNAUTH;
	}
	if (name && strcmp(name, "UNKNOWN")) {
		enum core_status st = core_status_from_name(name);
		if (st == CORE_EINVAL)
			return CORE_EREJECTED; /* Gemini refused what agentkit sent */
		if (st == CORE_EPRECONDITION)
			return CORE_EUNMET;    /* Gemini's condition, not the caller's */
		if (st != CORE_EINTERNAL || !strcmp(name, "INTERNAL"))
			return st;
	}
	return http ? prov_http_status(http) : CORE_EINTERNAL;
}

/*
 * Why a turn ended short (a blocked prompt, a SAFETY or OTHER finish):
 * the final message's metadata gets Gemini's reason (key: "blockReason"
 * or "finishReason"), its finishMessage (or blockReasonMessage) and the
 * safetyRatings that were not NEGLIGIBLE, so the output says why.
 */
static void why_finished(struct gem *s, const json_t *src, const char *key, const char *reason)
{
	const json_t *msg = json_object_get(src, "finishMessage");
	json_t *r;
	json_t *ratings = json_array();
	size_t i;
	if (!msg)
		msg = json_object_get(src, "blockReasonMessage");
	json_decref(s->o.meta);
	s->o.meta = json_pack("{s:s}", key, reason);
	if (jv_is_string(msg))
		json_object_set(s->o.meta, "finishMessage", (json_t *)msg);
	json_array_foreach(json_object_get(src, "safetyRatings"), i, r) {
		const char *pr = json_string_value(json_object_get(r, "probability"));
		if (json_is_true(json_object_get(r, "blocked")) || (pr && strcmp(pr, "NEGLIGIBLE")))
			json_array_append(ratings, r);
	}
	if (json_array_size(ratings))
		json_object_set(s->o.meta, "safetyRatings", ratings);
	json_decref(ratings);
}

static enum core_status on_event(void *ctx, const char *type, const char *data, size_t n)
{
	struct gem *s = ctx;
	json_t *v = prov_parse(&s->o, data, n), *p;
	const json_t *cand, *fr, *err;
	enum core_status st = CORE_OK;
	size_t i;
	if (!v)
		return s->o.e ? s->o.e->st : CORE_EINVAL;
	if ((err = json_object_get(v, "error"))) {
		const char *msg = json_string_value(json_object_get(err, "message"));
		const char *name = json_string_value(json_object_get(err, "status"));
		st = core_fail(s->o.e, status_from_doc(err, (long)json_integer_value(json_object_get(err, "code"))),
		               "googleai: error in stream: %s%s%s%s", msg ? msg : "unknown error",
		               name ? " (" : "", name ? name : "", name ? ")" : "");
		json_decref(v);
		return st;
	}
	if (json_is_object(json_object_get(v, "usageMetadata")))
		map_usage(s, json_object_get(v, "usageMetadata"));
	cand = json_array_get(json_object_get(v, "candidates"), 0);
	if (!cand) {
		const char *br = json_string_value(json_object_get(json_object_get(v, "promptFeedback"),
		                                                   "blockReason"));
		if (br) {
			snprintf(s->o.finish, sizeof s->o.finish, "blocked");
			s->o.done = 1;
			why_finished(s, json_object_get(v, "promptFeedback"), "blockReason", br);
		}
		json_decref(v);
		return CORE_OK;
	}
	json_array_foreach(json_object_get(json_object_get(cand, "content"), "parts"), i, p) {
		const json_t *t = json_object_get(p, "text"), *x;
		json_t *part = NULL;
		if ((x = json_object_get(p, "functionCall"))) {
			const char *id = json_string_value(json_object_get(x, "id"));
			const json_t *args = json_object_get(x, "args");
			if (!jv_is_string(json_object_get(x, "name"))) {
				st = core_fail(s->o.e, CORE_EINTERNAL,
				               "googleai: a function call without a name in the stream");
				break;
			}
			/* 'o' takes the new empty object's only reference. */
			json_t *tr = args ? json_pack("{s:O, s:O}", "name", json_object_get(x, "name"),
			                              "input", args)
			                  : json_pack("{s:O, s:o}", "name", json_object_get(x, "name"),
			                              "input", json_object());
			if (id && *id)
				json_object_set_new(tr, "ref", json_string(id));
			else
				id = NULL;
			part = signed_part(json_pack("{s:o}", "toolRequest", tr), p, id);
		} else if (jv_is_string(t) && json_is_true(json_object_get(p, "thought"))) {
			part = signed_part(json_pack("{s:O}", "reasoning", t), p, NULL);
		} else if (jv_is_string(t)) {
			if (!json_string_length(t) && !json_object_get(p, "thoughtSignature"))
				continue;
			part = signed_part(json_pack("{s:O}", "text", t), p, NULL);
		} else if ((x = json_object_get(p, "inlineData"))) {
			const char *mime = json_string_value(json_object_get(x, "mimeType"));
			const char *d = json_string_value(json_object_get(x, "data"));
			char *url = NULL;
			if (mime && d && (url = prov_strf("data:%s;base64,%s", mime, d))) {
				part = json_pack("{s:{s:s, s:s}}", "media", "url", url, "contentType", mime);
				free(url);
			}
		} else if (json_object_size(p)) {
			/* executableCode, codeExecutionResult, ...: kept as custom. */
			part = json_pack("{s:O}", "custom", p);
		}
		if (part && (st = prov_emit(&s->o, part)))
			break;
	}
	if (!st && jv_is_string(fr = json_object_get(cand, "finishReason"))) {
		snprintf(s->o.finish, sizeof s->o.finish, "%s", map_finish(json_string_value(fr)));
		s->o.done = 1;
		if (strcmp(s->o.finish, "stop") || json_object_get(cand, "finishMessage"))
			why_finished(s, cand, "finishReason", json_string_value(fr));
	}
	json_decref(v);
	return st;
}

static enum core_status on_error(void *ctx, struct http_error *he, struct core_err *e)
{
	struct gem *s = ctx;
	struct core_err pe = {0};
	json_t *doc = jv_parse(he->body, he->body_len, "error", 0, &pe);
	const json_t *err = json_object_get(doc, "error"), *d;
	const char *msg = json_string_value(json_object_get(err, "message"));
	enum core_status st = err ? status_from_doc(err, he->status) : prov_http_status(he->status);
	size_t i;
	if (he->status >= 200 && he->status <= 299 && !err)
		st = CORE_EUNAVAILABLE;
	json_array_foreach(json_object_get(err, "details"), i, d) {
		const char *delay = json_string_value(json_object_get(d, "retryDelay"));
		if (delay && he->retry_after_ms < 0)
			he->retry_after_ms = prov_delay_hint(delay, "");
	}
	/* A daily quota does not come back by waiting. */
	if (he->status == 429 && strstr(he->body, "PerDay"))
		he->retryable = 0;
	st = prov_fail_http(&s->o, he, st, msg, e);
	json_decref(doc);
	return st;
}

/* The name goes into the URL's path: a query or a fragment would cut it. */
static int gem_bad_name(const char *name)
{
	return !*name || strchr(name, '?') || strchr(name, '#');
}

static const char *gem_url_name(const char *name)
{
	return !strncmp(name, "models/", 7) ? name + 7 : name;
}

/*
 * Vertex AI serves the same generateContent under a project and a
 * location, or (express mode, with an API key) under the publisher alone:
 * a base URL whose path names a project and a location (".../v1/projects/
 * P/locations/L") or a publisher (".../publishers/google") is Vertex's,
 * and the model goes under its publisher; any other base is the Gemini
 * API's.
 */
static char *gem_url(const char *base, const char *name)
{
	const char *path = strstr(base, "://");
	path = path ? strchr(path + 3, '/') : NULL;
	if (!path || (!strstr(path, "/publishers/") &&
	              (!strstr(path, "/projects/") || !strstr(path, "/locations/"))))
		return prov_strf(prov_dialect_googleai.url_fmt, base, name);
	return prov_strf("%s%s/models/%s:streamGenerateContent?alt=sse", base,
	                 strstr(path, "/publishers/") ? "" : "/publishers/google", name);
}

static enum core_status gem_build(void *state, const char *name, const char *base,
                                  const struct model_request *req, struct prov_body *body,
                                  struct core_err *e)
{
	json_t *sys = json_array(), *b = NULL;
	struct prov_walk w;
	enum core_status st;
	(void)state;
	(void)name;
	(void)base;
	prov_walk_init(&w, "googleai", sys);
	if (!sys)
		st = core_fail(e, CORE_ENOMEM, "googleai: out of memory");
	else if (!(st = prov_walk(&walker, req, &w, e)) &&
	         !(b = json_pack("{s:n}", "contents")))      /* prov_walk_body()'s placeholder */
		st = core_fail(e, CORE_ENOMEM, "googleai: out of memory");
	if (!st) {
		if (json_array_size(sys))
			json_object_set_new(b, "systemInstruction", json_pack("{s:O}", "parts", sys));
		if (json_array_size(req->tools))
			json_object_set_new(b, "tools", build_tools(req->tools));
		map_config(b, req->config);
		set_response_format(b, req->output);
		st = prov_walk_body(b, "contents", &w, body, e);
	}
	prov_walk_release(&w);
	json_decref(b);
	json_decref(sys);
	return st;
}

extern const struct model_provider model_googleai;

const struct prov_dialect prov_dialect_googleai = {
	.p = &model_googleai,
	.size = sizeof(struct gem),
	.bad_name = gem_bad_name,
	.url_fmt = "%s/v1beta/models/%s:streamGenerateContent?alt=sse",
	.url_name = gem_url_name,
	.url = gem_url,
	.auth_fmt = "x-goog-api-key: %s",
	.build = gem_build,
	.mode = SSE_MODE_SSE,
	.on_event = on_event,
	.on_error = on_error,
	.terminator = "a chunk with a finishReason",
};

/* GET /v1beta/models: {"models": [{"name": "models/gemini-2.5-flash",
 * "supportedGenerationMethods": [...]}]}; only models that generate. */
static enum core_status gem_list(const char *key_file, json_t *row, struct core_err *e)
{
	static const char *const auth[] = { "x-goog-api-key: %s", "x-goog-api-key: %s" };
	json_t *doc, *gen = json_array(), *m, *how;
	size_t i, j;
	enum core_status st = prov_list_get(&model_googleai, row, key_file,
	                                    "/v1beta/models?pageSize=1000", auth, NULL, &doc, e);
	json_array_foreach(json_object_get(doc, "models"), i, m) {
		const json_t *methods = json_object_get(m, "supportedGenerationMethods");
		int generates = !methods;
		json_array_foreach(methods, j, how)
			generates |= json_is_string(how) && !strcmp(json_string_value(how),
			                                            "generateContent");
		if (generates)
			json_array_append(gen, m);
	}
	if (!st && doc)
		st = gen ? prov_list_models(row, "googleai", gen, "name", "models/") : CORE_ENOMEM;
	json_decref(gen);
	json_decref(doc);
	return st;
}

const struct model_provider model_googleai = {
	.prefix = "googleai",
	.dialect = &prov_dialect_googleai,
	.list = gem_list,
	.key_vars = key_vars,
	.url_vars = url_vars,
	.default_url = "https://generativelanguage.googleapis.com",
};
