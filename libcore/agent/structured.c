/* structured.c - structured output: the spec and the check (see structured.h). */
#include "structured.h"

#include <stdlib.h>
#include <string.h>

#include "../base/buf.h"
#include "../base/json.h"
#include "../base/schema.h"

#define PICO_MAX_DEPTH 32

/* Dotprompt's "type, description" split: *type trimmed into buf. */
static const char *pico_split(const char *s, char *type, size_t tn)
{
	const char *comma = strchr(s, ',');
	size_t n = comma ? (size_t)(comma - s) : strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	while (n && (*s == ' ' || *s == '\t'))
		s++, n--;
	snprintf(type, tn, "%.*s", (int)n, s);
	if (!comma)
		return NULL;
	for (comma++; *comma == ' ' || *comma == '\t'; comma++)
		;
	return *comma ? comma : NULL;
}

static json_t *pico(const json_t *v, const char *where, int depth, struct core_err *e);

/* A Picoschema scalar: "string", "integer, the count", "any". */
static json_t *pico_scalar(const char *s, const char *where, struct core_err *e)
{
	static const char *const scalars[] = { "string", "boolean", "null", "number",
	                                       "integer", "any", NULL };
	char type[64];
	const char *desc = pico_split(s, type, sizeof type);
	json_t *out;
	for (const char *const *t = scalars; *t; t++)
		if (!strcmp(*t, type)) {
			out = strcmp(type, "any") ? json_pack("{s:s}", "type", type) : json_object();
			if (out && desc)
				json_object_set_new(out, "description", json_string(desc));
			return out;
		}
	core_fail(e, CORE_EINVAL, "%s: output schema: unknown Picoschema type '%s'", where, type);
	return NULL;
}

/* Make prop's type nullable (an optional Picoschema field). */
static void pico_nullable(json_t *prop)
{
	const json_t *t = json_object_get(prop, "type");
	if (jv_is_string(t))
		json_object_set_new(prop, "type", json_pack("[O,s]", t, "null"));
}

/* One Picoschema object, as Dotprompt's parsePico() converts it. */
static json_t *pico_object(const json_t *v, const char *where, int depth, struct core_err *e)
{
	json_t *props = json_object(), *req = json_array();
	json_t *out = json_pack("{s:s, s:o, s:o, s:b}", "type", "object", "properties", props,
	                        "required", req, "additionalProperties", 0);
	const char *key;
	json_t *val;
	if (!out)
		goto nomem;
	json_object_foreach((json_t *)v, key, val) {
		char name[256], type[64];
		const char *paren = strchr(key, '('), *desc = NULL;
		size_t n = paren ? (size_t)(paren - key) : strlen(key);
		int optional = n && key[n - 1] == '?';
		json_t *prop;
		if (!strcmp(key, "(*)")) {
			if (!(prop = pico(val, where, depth + 1, e)))
				goto fail;
			json_object_set_new(out, "additionalProperties", prop);
			continue;
		}
		snprintf(name, sizeof name, "%.*s", (int)(n - optional), key);
		if (!optional)
			json_array_append_new(req, json_string(name));
		if (!paren) {
			if (!(prop = pico(val, where, depth + 1, e)))
				goto fail;
			if (optional)
				pico_nullable(prop);
		} else {
			char inner[256];
			const char *close = strrchr(paren, ')');
			if (!close) {
				core_fail(e, CORE_EINVAL, "%s: output schema: '%s': missing ')'", where, key);
				goto fail;
			}
			snprintf(inner, sizeof inner, "%.*s", (int)(close - paren - 1), paren + 1);
			desc = pico_split(inner, type, sizeof type);
			if (!strcmp(type, "array")) {
				json_t *items = pico(val, where, depth + 1, e);
				if (!items)
					goto fail;
				prop = json_pack("{s:s, s:o}", "type", "array", "items", items);
				if (optional)
					pico_nullable(prop);
			} else if (!strcmp(type, "object")) {
				if (!(prop = pico(val, where, depth + 1, e)))
					goto fail;
				if (optional)
					pico_nullable(prop);
			} else if (!strcmp(type, "enum") && json_is_array(val)) {
				json_t *en = json_deep_copy(val);
				size_t i;
				json_t *x;
				int has_null = 0;
				json_array_foreach(en, i, x)
					has_null |= json_is_null(x);
				if (optional && !has_null)
					json_array_append_new(en, json_null());
				prop = json_pack("{s:o}", "enum", en);
			} else {
				core_fail(e, CORE_EINVAL, "%s: output schema: '%s': unknown Picoschema type '%s'",
				          where, key, type);
				goto fail;
			}
			if (prop && desc)
				json_object_set_new(prop, "description", json_string(desc));
		}
		if (!prop)
			goto nomem;
		json_object_set_new(props, name, prop);
	}
	if (!json_array_size(req))
		json_object_del(out, "required");
	return out;
nomem:
	core_fail(e, CORE_ENOMEM, "out of memory");
fail:
	json_decref(out);
	return NULL;
}

static json_t *pico(const json_t *v, const char *where, int depth, struct core_err *e)
{
	if (depth > PICO_MAX_DEPTH) {
		core_fail(e, CORE_EINVAL, "%s: output schema nested too deeply", where);
		return NULL;
	}
	if (jv_is_string(v))
		return pico_scalar(json_string_value(v), where, e);
	if (json_is_object(v))
		return pico_object(v, where, depth, e);
	core_fail(e, CORE_EINVAL, "%s: output schema: expected a Picoschema type or mapping, got %s",
	          where, jv_type_name(v));
	return NULL;
}

/* Dotprompt's rule: a top-level type object/array or a properties mapping
 * is JSON Schema; anything else is Picoschema. */
static json_t *to_json_schema(const json_t *s, const char *where, struct core_err *e)
{
	const char *type = json_string_value(json_object_get(s, "type"));
	if (json_is_boolean(s) || (type && (!strcmp(type, "object") || !strcmp(type, "array"))))
		return json_deep_copy(s);
	if (json_is_object(json_object_get(s, "properties"))) {
		json_t *c = json_deep_copy(s);
		json_object_set_new(c, "type", json_string("object"));
		return c;
	}
	return pico(s, where, 0, e);
}

enum core_status structured_spec(const json_t *output, const char *where, json_t **spec,
                                 struct core_err *e)
{
	const json_t *format = json_object_get(output, "format");
	const json_t *schema = json_object_get(output, "schema");
	json_t *js = NULL;
	*spec = NULL;
	if (!output || (!format && !schema))
		return CORE_OK;
	if (format && (!jv_is_string(format) || (strcmp(json_string_value(format), "json") &&
	                                         strcmp(json_string_value(format), "text"))))
		return core_fail(e, CORE_EINVAL, "%s: output.format must be json or text, got %s%s%s",
		                 where, jv_is_string(format) ? "'" : "",
		                 jv_is_string(format) ? json_string_value(format) : jv_type_name(format),
		                 jv_is_string(format) ? "'" : "");
	if (format && !strcmp(json_string_value(format), "text"))
		return CORE_OK;
	if (schema && !json_is_null(schema) && !(js = to_json_schema(schema, where, e)))
		return e->st ? e->st : core_fail(e, CORE_ENOMEM, "out of memory");
	*spec = json_pack("{s:s}", "format", "json");
	if (!*spec) {
		json_decref(js);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	if (js)
		json_object_set_new(*spec, "schema", js);
	return CORE_OK;
}

/* A plain text part: {"text"} with at most metadata beside it. */
static int is_text_part(const json_t *p)
{
	return jv_is_string(json_object_get(p, "text")) &&
	       json_object_size(p) - (json_object_get(p, "metadata") != NULL) == 1;
}

/* Genkit's ExtractJSONFromMarkdown: the body of the first ```json (or
 * bare ```) fence, else the whole text; trimmed. */
static void extract_json(const char *s, size_t n, const char **out, size_t *on)
{
	const char *f = memmem(s, n, "```", 3);
	if (f) {
		const char *body = f + 3, *end = s + n, *close;
		if ((size_t)(end - body) >= 4 && !strncasecmp(body, "json", 4))
			body += 4;
		close = memmem(body, (size_t)(end - body), "```", 3);
		if (close) {
			s = body;
			n = (size_t)(close - body);
		}
	}
	while (n && strchr(" \t\r\n", *s))
		s++, n--;
	while (n && strchr(" \t\r\n", s[n - 1]))
		n--;
	*out = s;
	*on = n;
}

enum core_status structured_check(const json_t *spec, json_t *message, json_t **value,
                                  struct core_err *e)
{
	struct core_buf text = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	json_t *content = json_object_get(message, "content"), *p, *v = NULL;
	const json_t *schema = json_object_get(spec, "schema");
	const char *js;
	size_t i, n, first = (size_t)-1;
	enum core_status st = CORE_OK;
	struct core_err pe = { 0 };
	if (value)
		*value = NULL;
	json_array_foreach(content, i, p)
		if (is_text_part(p)) {
			const json_t *t = json_object_get(p, "text");
			if (first == (size_t)-1)
				first = i;
			if (core_buf_add(&text, json_string_value(t), json_string_length(t)))
				goto nomem;
		}
	extract_json(text.p ? text.p : "", text.len, &js, &n);
	if (!n) {
		st = core_fail(e, CORE_EINTERNAL,
		               "structured output: the model's reply has no text (JSON was asked for)");
		goto out;
	}
	if (!(v = jv_parse(js, n, "reply", 0, &pe))) {
		st = pe.st == CORE_ENOMEM ? core_fail(e, CORE_ENOMEM, "out of memory")
		   : core_fail(e, CORE_EINTERNAL, "structured output: the model's reply: %s", pe.msg);
		goto out;
	}
	if (schema && schema_check(schema, v, &pe)) {
		st = core_fail(e, CORE_EINTERNAL,
		               "structured output: the model's reply does not match the output schema: %s",
		               pe.msg);
		goto out;
	}
	/* Genkit's JSON format keeps the extracted JSON as the message's text. */
	for (i = json_array_size(content); i-- > 0;)
		if (is_text_part(json_array_get(content, i)))
			json_array_remove(content, i);
	if (json_array_insert_new(content, first, json_pack("{s:s%}", "text", js, n)))
		goto nomem;
	if (value)
		*value = json_incref(v);
	goto out;
nomem:
	st = core_fail(e, CORE_ENOMEM, "out of memory");
out:
	json_decref(v);
	core_buf_release(&text);
	return st;
}
