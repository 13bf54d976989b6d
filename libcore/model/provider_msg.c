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

json_t *prov_text(const json_t *content)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	size_t i;
	json_t *p, *s;
	json_array_foreach(content, i, p) {
		const json_t *t = json_object_get(p, "text");
		if (jv_is_string(t) && json_object_size(p) - (json_object_get(p, "metadata") != NULL) == 1
		    && core_buf_add(&b, json_string_value(t), json_string_length(t))) {
			core_buf_release(&b);
			return NULL;
		}
	}
	/* the parts' texts are valid UTF-8, and so is their join */
	s = json_stringn_nocheck(b.p ? b.p : "", b.len);
	core_buf_release(&b);
	return s;
}

int prov_has_media(const json_t *content)
{
	size_t i;
	json_t *p;
	json_array_foreach(content, i, p)
		if (jv_is_string(json_object_get(json_object_get(p, "media"), "url")))
			return 1;
	return 0;
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

/* ---- a conversation as the wire's messages ---- */

void prov_walk_init(struct prov_walk *w, const char *what, void *ctx)
{
	memset(w, 0, sizeof *w);
	w->what = what;
	core_buf_init(&w->out, CORE_BUF_UNLIMITED);
	w->ctx = ctx;
}

void prov_walk_release(struct prov_walk *w)
{
	core_buf_release(&w->out);
	json_decref(w->owned);
	json_decref(w->blank);
	w->owned = w->blank = NULL;
	w->prev_model = NULL;
}

enum core_status prov_walk_begin(struct prov_walk *w, struct core_err *e)
{
	if (w->count++ && core_buf_addc(&w->out, ','))
		return core_fail(e, CORE_ENOMEM, "%s: out of memory", w->what);
	return CORE_OK;
}

enum core_status prov_walk_add(struct prov_walk *w, json_t *msg, struct core_err *e)
{
	enum core_status st = msg ? prov_walk_begin(w, e) : CORE_ENOMEM;
	if (!st && jv_dump(msg, &w->out))
		st = CORE_ENOMEM;
	json_decref(msg);
	return st ? core_fail(e, st, "%s: out of memory", w->what) : CORE_OK;
}

enum core_status prov_walk_joined(struct prov_walk *w, const char *role,
                                  const struct prov_plain *m, int skip_empty,
                                  struct core_err *e)
{
	size_t i, len = 0;
	struct core_buf *o = &w->out;
	for (i = 0; i < m->n; i++)
		len += m->text[i].n;
	if (skip_empty && !len)
		return CORE_OK;
	if (prov_walk_begin(w, e) || core_buf_grow(o, len + strlen(role) + 32))
		return core_fail(e, CORE_ENOMEM, "%s: out of memory", w->what);
	core_buf_adds(o, "{\"role\":\"");
	core_buf_adds(o, role);
	core_buf_adds(o, "\",\"content\":\"");
	for (i = 0; i < m->n; i++)
		core_buf_add(o, m->text[i].p, m->text[i].n);
	core_buf_add(o, "\"}", 2);
	return CORE_OK;
}

int prov_plain_scan(const char *p, size_t n, struct prov_plain *m)
{
	const char *end = p + n;
	int role_first;
	size_t k;
#define TAKE(lit) (end - p >= (ptrdiff_t)sizeof lit - 1 && !memcmp(p, lit, sizeof lit - 1) \
                   ? (p += sizeof lit - 1, 1) : 0)
#define ROLE() (TAKE("user\"") ? (m->model = 0, 1) : TAKE("model\"") ? (m->model = 1, 1) : 0)
	if ((role_first = TAKE("{\"role\":\"")) ? !ROLE() || !TAKE(",\"content\":[")
	                                           : !TAKE("{\"content\":["))
		return 0;
	m->n = 0;
	while (p < end && *p != ']') {
		if (m->n == PROV_PLAIN_MAX || (m->n && *p++ != ',') || !TAKE("{\"text\":\""))
			return 0;
		k = jv_string_end(p, (size_t)(end - p));
		if (end - p - (ptrdiff_t)k < 2 || p[k + 1] != '}')
			return 0;
		m->text[m->n].p = p;
		m->text[m->n++].n = k;
		p += k + 2;
	}
	if (role_first ? !TAKE("]}") : !TAKE("],\"role\":\"") || !ROLE() || !TAKE("}"))
		return 0;
#undef ROLE
#undef TAKE
	return p == end;
}

struct walk_arg {
	const struct prov_walker *k;
	struct prov_walk *w;
	size_t index;
};

/* One parsed message m; own: the walk's to keep or drop (consumed). */
static enum core_status walk_one(struct walk_arg *a, const json_t *m, json_t *own,
                                 struct core_err *e)
{
	struct prov_walk *w = a->w;
	const char *role = json_string_value(json_object_get(m, "role"));
	enum core_status st;
	size_t i = a->index++;
	if (!role || !json_is_array(json_object_get(m, "content")))
		st = core_fail(e, CORE_EINVAL, "%s: message %zu has no role or content", w->what, i);
	else if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "model") &&
	         strcmp(role, "tool"))
		st = core_fail(e, CORE_EINVAL, "%s: message %zu has unknown role '%s'", w->what, i,
		               role);
	else
		st = a->k->step(w, role, m, e);
	if (!st && !strcmp(role, "model")) {
		json_decref(w->owned);
		w->owned = own;
		w->prev_model = m;
	} else {
		json_decref(own);
	}
	return st;
}

/* One stored message (model_history_fn). */
static enum core_status walk_stored(void *arg, const char *json, size_t n, struct core_err *e)
{
	struct walk_arg *a = arg;
	struct prov_walk *w = a->w;
	struct prov_plain pm;
	struct core_err pe = { 0 };
	json_t *m;
	if (a->k->plain && prov_plain_scan(json, n, &pm)) {
		enum core_status st = a->k->plain(w, &pm, e);
		a->index++;
		if (!st && pm.model) {
			if (!w->blank && !(w->blank = json_pack("{s:[], s:s}", "content", "role", "model")))
				return core_fail(e, CORE_ENOMEM, "%s: out of memory", w->what);
			json_decref(w->owned);
			w->owned = NULL;
			w->prev_model = w->blank;
		}
		return st;
	}
	if (!(m = jv_parse(json, n, "store", 0, &pe)))
		return core_fail(e, pe.st == CORE_ENOMEM ? CORE_ENOMEM : CORE_ESYS,
		                 "%s: message %zu of the stored history: %s", w->what, a->index,
		                 pe.msg);
	return walk_one(a, m, m, e);
}

enum core_status prov_walk(const struct prov_walker *k, const struct model_request *req,
                           struct prov_walk *w, struct core_err *e)
{
	const struct model_history *h = req->history;
	size_t at = h ? h->at : 0, i, n = json_array_size(req->messages);
	struct walk_arg a = { k, w, 0 };
	enum core_status st = CORE_OK;
	/* room for the body's members before the messages (prov_walk_body()) */
	if (core_buf_grow(&w->out, PROV_HEAD + 1))
		return core_fail(e, CORE_ENOMEM, "%s: out of memory", w->what);
	memset(w->out.p, ' ', PROV_HEAD);
	w->out.len = PROV_HEAD;
	w->out.p[w->out.len] = 0;
	for (i = 0; i < n && !st; i++) {
		if (i == at && h && h->count)
			st = h->each(h->ctx, walk_stored, &a, e);
		if (!st)
			st = walk_one(&a, json_array_get(req->messages, i), NULL, e);
	}
	if (!st && at >= n && h && h->count)
		st = h->each(h->ctx, walk_stored, &a, e);
	if (!st && k->end)
		st = k->end(w, e);
	return st;
}

/* One member "k":v of an object, a comma first unless first. */
static enum core_status member(const char *k, const json_t *v, int first, struct core_buf *out)
{
	enum core_status st;
	if ((!first && (st = core_buf_addc(out, ','))) ||
	    (st = jv_dump_string(k, strlen(k), out)) || (st = core_buf_addc(out, ':')))
		return st;
	return v ? jv_dump(v, out) : core_buf_addc(out, '[');
}

/* b's members up to key's opening bracket ({..."key":[), or after it,
 * from the closing one (],...}), to out. */
static enum core_status members(const json_t *b, const char *key, int after,
                                struct core_buf *out)
{
	const char *k;
	json_t *v;
	int past = 0, first = 1;
	enum core_status st = core_buf_addc(out, after ? ']' : '{');
	json_object_foreach((json_t *)b, k, v) {
		int here = !strcmp(k, key);
		if (st)
			break;
		if (!after)
			st = member(k, here ? NULL : v, first, out);
		else if (past)
			st = member(k, v, 0, out);
		first = 0;
		if (here && !after)
			break;
		past |= here;
	}
	return st ? st : after ? core_buf_addc(out, '}') : CORE_OK;
}

enum core_status prov_walk_body(const json_t *b, const char *key, struct prov_walk *w,
                                struct prov_body *body, struct core_err *e)
{
	struct core_buf pre = CORE_BUF_INIT(CORE_BUF_UNLIMITED), *o = &w->out;
	enum core_status st = members(b, key, 0, &pre);
	size_t room = o->len >= PROV_HEAD ? PROV_HEAD : 0;
	if (!st && pre.len > room) {
		/* no room for them: the messages move up */
		if (!(st = core_buf_grow(o, pre.len - room))) {
			memmove(o->p + pre.len, o->p + room, o->len - room + 1);
			o->len += pre.len - room;
			room = pre.len;
		}
	}
	if (!st) {
		memcpy(o->p + room - pre.len, pre.p, pre.len);
		st = members(b, key, 1, o);
	}
	if (!st) {
		core_buf_release(&body->buf);
		body->buf = *o;
		body->at = room - pre.len;
		core_buf_init(o, CORE_BUF_UNLIMITED);
	}
	core_buf_release(&pre);
	return st ? core_fail(e, st, "%s: cannot encode the request", w->what) : CORE_OK;
}

enum core_status prov_roles_step(struct prov_walk *w, const char *role, const json_t *m,
                                 struct core_err *e)
{
	const struct prov_roles *r = w->ctx;
	const json_t *content = json_object_get(m, "content");
	if (!strcmp(role, "system"))
		return prov_walk_add(w, json_pack("{s:s, s:o}", "role", "system", "content",
		                                  prov_text(content)), e);
	if (!strcmp(role, "user")) {
		json_t *uc = r->user(content, e);
		return uc ? prov_walk_add(w, json_pack("{s:s, s:o}", "role", "user", "content", uc), e)
		          : e->st;
	}
	if (!strcmp(role, "model"))
		return r->model(content, w, e);
	return r->tool_msg(w->prev_model, m, w, e);
}
