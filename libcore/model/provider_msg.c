/*
 * provider_msg.c - Genkit message helpers the provider dialects share
 * (provider_common.h): text and tool outputs as wire text, media URLs,
 * tool responses in call order, config mapping, tool declarations, and
 * the walk of a conversation by role of the OpenAI-style wires.
 */
#include "provider_common.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../base/buf.h"
#include "../base/json.h"
#include "../base/util.h"

/* ---- Genkit message helpers ---- */

char *prov_text(const json_t *content)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	size_t i;
	json_t *p;
	json_array_foreach(content, i, p) {
		const json_t *t = json_object_get(p, "text");
		if (jv_is_string(t) && json_object_size(p) - (json_object_get(p, "metadata") != NULL) == 1)
			core_buf_add(&b, json_string_value(t), json_string_length(t));
	}
	return core_buf_detach(&b, NULL);
}

char *prov_dump(const json_t *v)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (jv_dump(v ? v : json_null(), &b)) {
		core_buf_release(&b);
		return NULL;
	}
	return core_buf_detach(&b, NULL);
}

char *prov_output_text(const json_t *output)
{
	if (jv_is_string(output))
		return strndup(json_string_value(output), json_string_length(output));
	return prov_dump(output);
}

int prov_data_url(const char *url, char **mime, const char **data)
{
	const char *semi, *comma;
	if (strncmp(url, "data:", 5))
		return 0;
	comma = strchr(url, ',');
	semi = strstr(url, ";base64,");
	if (!comma || !semi || semi + 7 != comma)
		return 0;
	*mime = strndup(url + 5, (size_t)(semi - url - 5));
	*data = comma + 1;
	return *mime != NULL;
}

json_t *prov_ordered_responses(const json_t *prev_model, const json_t *tool_msg)
{
	json_t *out = json_array(), *reqs = json_array(), *left = json_array();
	const json_t *content = json_object_get(tool_msg, "content");
	size_t i, j;
	json_t *p;
	json_array_foreach(json_object_get(prev_model, "content"), i, p)
		if (json_object_get(p, "toolRequest"))
			json_array_append(reqs, json_object_get(p, "toolRequest"));
	json_array_foreach(content, i, p)
		if (json_object_get(p, "toolResponse"))
			json_array_append(left, p);
	/* For each request in order, take the response with its ref, else
	 * the first with its name. */
	json_array_foreach(reqs, i, p) {
		const char *ref = json_string_value(json_object_get(p, "ref"));
		const char *name = json_string_value(json_object_get(p, "name"));
		size_t hit = (size_t)-1;
		json_t *r;
		json_array_foreach(left, j, r) {
			const json_t *tr = json_object_get(r, "toolResponse");
			const char *rref = json_string_value(json_object_get(tr, "ref"));
			if (ref && rref && !strcmp(ref, rref)) {
				hit = j;
				break;
			}
		}
		if (hit == (size_t)-1)
			json_array_foreach(left, j, r) {
				const json_t *tr = json_object_get(r, "toolResponse");
				const char *rname = json_string_value(json_object_get(tr, "name"));
				const char *rref = json_string_value(json_object_get(tr, "ref"));
				if (name && rname && !strcmp(name, rname) && (!ref || !rref)) {
					hit = j;
					break;
				}
			}
		if (hit != (size_t)-1) {
			json_array_append(out, json_array_get(left, hit));
			json_array_remove(left, hit);
		}
	}
	json_array_extend(out, left);
	json_decref(left);
	json_decref(reqs);
	return out;
}

void prov_pass_through(json_t *dst, const json_t *config, const char *const *skip)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)config, k, v) {
		int known = 0;
		for (const char *const *s = skip; *s && !known; s++)
			known = !strcmp(*s, k);
		if (!known && !json_object_get(dst, k))
			json_object_set(dst, k, v);
	}
}

const json_t *prov_cfg(const json_t *config, const char *key)
{
	const json_t *v = json_object_get(config, key);
	return v && !json_is_null(v) ? v : NULL;
}

void prov_map(json_t *dst, const char *key, const json_t *config, const char *from)
{
	const json_t *v = prov_cfg(config, from);
	if (v)
		json_object_set(dst, key, (json_t *)v);
}

char *prov_strf(const char *fmt, ...)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	va_list ap;
	enum core_status st;
	va_start(ap, fmt);
	st = core_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	if (st) {
		core_buf_release(&b);
		return NULL;
	}
	return core_buf_detach(&b, NULL);
}

json_t *prov_tool_decl(const json_t *tool, const char *schema_key)
{
	const json_t *schema = json_object_get(tool, "inputSchema");
	json_t *d = json_pack("{s:O}", "name", json_object_get(tool, "name"));
	if (!d)
		return NULL;
	if (json_object_get(tool, "description"))
		json_object_set(d, "description", json_object_get(tool, "description"));
	json_object_set_new(d, schema_key, json_is_object(schema)
	                    ? json_incref((json_t *)schema)
	                    : json_pack("{s:s, s:{}}", "type", "object", "properties"));
	return d;
}

json_t *prov_function_tools(const json_t *tools)
{
	json_t *arr = json_array(), *t;
	size_t i;
	json_array_foreach(tools, i, t)
		json_array_append_new(arr, json_pack("{s:s, s:o}", "type", "function",
		                                     "function", prov_tool_decl(t, "parameters")));
	return arr;
}

enum core_status prov_walk_roles(const struct prov_roles *r, const json_t *msgs, json_t *out,
                                 struct core_err *e)
{
	const json_t *prev_model = NULL;
	enum core_status st;
	size_t i;
	json_t *m;
	json_array_foreach(msgs, i, m) {
		const char *role = json_string_value(json_object_get(m, "role"));
		const json_t *content = json_object_get(m, "content");
		if (!role || !json_is_array(content))
			return core_fail(e, CORE_EINVAL, "%s: message %zu has no role or content",
			                 r->what, i);
		if (!strcmp(role, "system")) {
			char *t = prov_text(content);
			json_array_append_new(out, json_pack("{s:s, s:s}", "role", "system",
			                                     "content", t ? t : ""));
			free(t);
		} else if (!strcmp(role, "user")) {
			json_t *uc = r->user(content, e);
			if (!uc)
				return e->st;
			json_array_append_new(out, json_pack("{s:s, s:o}", "role", "user", "content", uc));
		} else if (!strcmp(role, "model")) {
			if ((st = r->model(content, out, e)))
				return st;
			prev_model = m;
		} else if (!strcmp(role, "tool")) {
			if ((st = r->tool_msg(prev_model, m, out, e)))
				return st;
		} else {
			return core_fail(e, CORE_EINVAL, "%s: message %zu has unknown role '%s'", r->what,
			                 i, role);
		}
	}
	return CORE_OK;
}
