/*
 * frontmatter.c - a prompt file's YAML front matter as one JSON object:
 * libyaml's events converted to jansson values (YAML 1.2 core schema
 * scalars, anchors and aliases, a bound on the values made), then the
 * type checks on the fields agentkit reads; see frontmatter.h.
 */
#include "frontmatter.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "buf.h"
#include "json.h"

struct anchor {
	char *name;
	json_t *v;
};

/* Where a top-level (or input./output.) value started, for messages. */
struct keyline {
	char *key;
	size_t line;
};

struct yconv {
	yaml_parser_t p;
	const char *name;
	size_t line0;           /* file line of the front matter's first line */
	struct core_err *e;
	struct anchor *anchors;
	size_t nanchors;
	size_t nodes;
	struct keyline *kl;
	size_t nkl;
	int plain;              /* yaml_to_json(): "invalid YAML: ... (at NAME:LINE)" */
};

static enum core_status yerr(struct yconv *Y, size_t yline, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static enum core_status yerr(struct yconv *Y, size_t yline, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (Y->plain)
		return core_fail(Y->e, CORE_EINVAL, "invalid YAML: %s (at %s:%zu)", msg, Y->name,
		                 yline + 1);
	return core_fail(Y->e, CORE_EINVAL, "%s:%zu: invalid front matter: %s",
	                 Y->name, Y->line0 + yline, msg);
}

static enum core_status next_event(struct yconv *Y, yaml_event_t *ev)
{
	if (yaml_parser_parse(&Y->p, ev))
		return CORE_OK;
	if (Y->p.error == YAML_MEMORY_ERROR)
		return core_fail(Y->e, CORE_ENOMEM, "out of memory");
	if (Y->p.context)
		return yerr(Y, Y->p.problem_mark.line, "%s %s",
		            Y->p.context, Y->p.problem ? Y->p.problem : "");
	return yerr(Y, Y->p.problem_mark.line, "%s",
	            Y->p.problem ? Y->p.problem : "YAML syntax error");
}

static size_t count_values(const json_t *v)
{
	size_t n = 1, i;
	const char *k;
	json_t *x;

	if (json_is_array(v))
		for (i = 0; i < json_array_size(v); i++)
			n += count_values(json_array_get(v, i));
	else if (json_is_object(v))
		json_object_foreach((json_t *)v, k, x)
			n += count_values(x);
	return n;
}

static int all_of(const char *s, size_t n, const char *set)
{
	return n > 0 && strspn(s, set) >= n;
}

/* A decimal integer text (sign optional) as JSON: integer or exact bignum. */
static json_t *decimal_int(const char *s, size_t n)
{
	char *end;
	long long v;
	size_t i = 0;
	int neg = 0;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno == 0 && end == s + n)
		return json_integer(v);
	if (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-';
		i = 1;
	}
	while (i + 1 < n && s[i] == '0')
		i++;
	struct core_buf b = CORE_BUF_INIT(n + 2);
	json_t *r = NULL;
	if ((!neg || core_buf_addc(&b, '-') == CORE_OK) &&
	    core_buf_add(&b, s + i, n - i) == CORE_OK)
		r = jv_bignum(b.p, b.len);
	core_buf_release(&b);
	return r;
}

static int is_float_text(const char *s, size_t n)
{
	size_t i = 0, d = 0;

	if (i < n && (s[i] == '+' || s[i] == '-'))
		i++;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++, d++;
	if (i < n && s[i] == '.') {
		i++;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++, d++;
	}
	if (d == 0)
		return 0;
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		size_t e0;
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		e0 = i;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == e0)
			return 0;
	}
	return i == n;
}

enum want { W_ANY, W_STR, W_INT, W_FLOAT, W_BOOL, W_NULL };

/*
 * Resolve a scalar the way YAML 1.2's core schema does (for plain scalars
 * or an explicit tag).  Returns a new value, or NULL with *why set.
 */
static json_t *resolve_scalar(const char *s, size_t n, enum want w,
                              const char **why)
{
	size_t i;
	char *end;

	*why = NULL;
	if (w == W_STR)
		return json_stringn(s, n);
	if ((w == W_ANY || w == W_NULL) &&
	    (n == 0 || (n == 1 && s[0] == '~') || (n == 4 && (!strcmp(s, "null") ||
	     !strcmp(s, "Null") || !strcmp(s, "NULL")))))
		return json_null();
	if (w == W_ANY || w == W_BOOL) {
		if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
			return json_true();
		if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
			return json_false();
	}
	if (w == W_ANY || w == W_INT) {
		i = (n > 0 && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
		if (all_of(s + i, n - i, "0123456789"))
			return decimal_int(s, n);
		if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o') &&
		    all_of(s + 2, n - 2, s[1] == 'x' ? "0123456789abcdefABCDEF" : "01234567")) {
			errno = 0;
			unsigned long long v = strtoull(s + 2, &end, s[1] == 'x' ? 16 : 8);
			if (errno || v > (unsigned long long)LLONG_MAX) {
				*why = "integer out of range";
				return NULL;
			}
			return json_integer((json_int_t)v);
		}
	}
	if (w == W_ANY || w == W_FLOAT) {
		const char *t = s + ((n > 0 && (s[0] == '+' || s[0] == '-')) ? 1 : 0);
		if (!strcmp(t, ".inf") || !strcmp(t, ".Inf") || !strcmp(t, ".INF") ||
		    !strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN")) {
			*why = "infinity and NaN cannot be represented in JSON";
			return NULL;
		}
		if (is_float_text(s, n)) {
			double d = strtod(s, &end);
			if (!isfinite(d)) {
				*why = "number out of range";
				return NULL;
			}
			return json_real(d);
		}
	}
	if (w == W_ANY)
		return json_stringn(s, n);
	*why = "value does not match its tag";
	return NULL;
}

static enum core_status conv_node(struct yconv *Y, yaml_event_t *ev,
                                  unsigned depth, const char *parent,
                                  json_t **out);

static enum core_status keep_anchor(struct yconv *Y, const yaml_char_t *name,
                                    json_t *v)
{
	struct anchor *a;

	if (!name)
		return CORE_OK;
	a = realloc(Y->anchors, (Y->nanchors + 1) * sizeof(*a));
	if (!a)
		return core_fail(Y->e, CORE_ENOMEM, "out of memory");
	Y->anchors = a;
	if (!(a[Y->nanchors].name = strdup((const char *)name)))
		return core_fail(Y->e, CORE_ENOMEM, "out of memory");
	a[Y->nanchors++].v = json_incref(v);
	return CORE_OK;
}

static enum core_status note_key(struct yconv *Y, const char *parent,
                                 const char *key, size_t line)
{
	struct keyline *k = realloc(Y->kl, (Y->nkl + 1) * sizeof(*k));
	size_t n = (parent ? strlen(parent) + 1 : 0) + strlen(key) + 1;

	if (!k)
		return core_fail(Y->e, CORE_ENOMEM, "out of memory");
	Y->kl = k;
	if (!(k[Y->nkl].key = malloc(n)))
		return core_fail(Y->e, CORE_ENOMEM, "out of memory");
	snprintf(k[Y->nkl].key, n, "%s%s%s", parent ? parent : "", parent ? "." : "", key);
	k[Y->nkl++].line = line;
	return CORE_OK;
}

static enum core_status conv_mapping(struct yconv *Y, yaml_event_t *start,
                                     unsigned depth, const char *parent,
                                     json_t **out)
{
	json_t *obj = json_object();
	enum core_status st = CORE_OK;

	if (!obj)
		return core_fail(Y->e, CORE_ENOMEM, "out of memory");
	for (;;) {
		yaml_event_t k, v;
		json_t *val = NULL;
		char *key;

		if ((st = next_event(Y, &k)))
			break;
		if (k.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&k);
			break;
		}
		if (k.type != YAML_SCALAR_EVENT) {
			st = yerr(Y, k.start_mark.line, "mapping keys must be plain strings");
			yaml_event_delete(&k);
			break;
		}
		size_t kline = k.start_mark.line, klen = k.data.scalar.length;
		key = strndup((const char *)k.data.scalar.value, klen);
		yaml_event_delete(&k);
		if (!key) {
			st = core_fail(Y->e, CORE_ENOMEM, "out of memory");
			break;
		}
		if (strlen(key) != klen) {
			st = yerr(Y, kline, "NUL byte in a key");
			free(key);
			break;
		}
		if (json_object_get(obj, key)) {
			st = yerr(Y, kline, "duplicate key '%s'", key);
			free(key);
			break;
		}
		if ((st = next_event(Y, &v))) {
			free(key);
			break;
		}
		size_t vline = v.start_mark.line;
		const char *child = NULL;
		if (depth == 0)
			child = key;
		st = conv_node(Y, &v, depth + 1, child, &val);
		if (st == CORE_OK && depth <= 1 && (depth == 0 || parent))
			st = note_key(Y, parent, key, vline);
		if (st == CORE_OK && json_object_set_new(obj, key, val))
			st = yerr(Y, kline, "key '%s' is not valid UTF-8", key);
		free(key);
		if (st)
			break;
	}
	if (st) {
		json_decref(obj);
		return st;
	}
	if ((st = keep_anchor(Y, start->data.mapping_start.anchor, obj))) {
		json_decref(obj);
		return st;
	}
	*out = obj;
	return CORE_OK;
}

static enum core_status conv_sequence(struct yconv *Y, yaml_event_t *start,
                                      unsigned depth, json_t **out)
{
	json_t *arr = json_array();
	enum core_status st = CORE_OK;

	if (!arr)
		return core_fail(Y->e, CORE_ENOMEM, "out of memory");
	for (;;) {
		yaml_event_t v;
		json_t *val = NULL;

		if ((st = next_event(Y, &v)))
			break;
		if (v.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&v);
			break;
		}
		if ((st = conv_node(Y, &v, depth + 1, NULL, &val)))
			break;
		if (json_array_append_new(arr, val)) {
			st = core_fail(Y->e, CORE_ENOMEM, "out of memory");
			break;
		}
	}
	if (st == CORE_OK)
		st = keep_anchor(Y, start->data.sequence_start.anchor, arr);
	if (st) {
		json_decref(arr);
		return st;
	}
	*out = arr;
	return CORE_OK;
}

static enum core_status conv_scalar(struct yconv *Y, yaml_event_t *ev, json_t **out)
{
	const char *tag = (const char *)ev->data.scalar.tag;
	const char *s = (const char *)ev->data.scalar.value;
	size_t n = ev->data.scalar.length;
	enum want w = W_ANY;
	const char *why;
	json_t *v;

	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		w = W_STR;
	if (tag) {
		static const struct { const char *t; enum want w; } tags[] = {
			{ "!", W_STR }, { YAML_STR_TAG, W_STR }, { YAML_INT_TAG, W_INT },
			{ YAML_FLOAT_TAG, W_FLOAT }, { YAML_BOOL_TAG, W_BOOL },
			{ YAML_NULL_TAG, W_NULL },
		};
		size_t k;
		for (k = 0; k < sizeof(tags) / sizeof(tags[0]); k++)
			if (!strcmp(tag, tags[k].t))
				break;
		if (k == sizeof(tags) / sizeof(tags[0]))
			return yerr(Y, ev->start_mark.line, "unsupported tag '%s'", tag);
		w = tags[k].w;
	}
	if (strlen(s) != n && w != W_STR)
		return yerr(Y, ev->start_mark.line, "NUL byte in a scalar");
	v = resolve_scalar(s, n, w, &why);
	if (!v)
		return why ? yerr(Y, ev->start_mark.line, "'%.40s': %s", s, why)
		           : yerr(Y, ev->start_mark.line, "scalar is not valid UTF-8");
	*out = v;
	return keep_anchor(Y, ev->data.scalar.anchor, v);
}

/* Convert the node that starts with ev (consumed) into *out. */
static enum core_status conv_node(struct yconv *Y, yaml_event_t *ev,
                                  unsigned depth, const char *parent,
                                  json_t **out)
{
	enum core_status st;

	*out = NULL;
	if (depth > PROMPT_MAX_YAML_DEPTH) {
		st = yerr(Y, ev->start_mark.line, "nested deeper than %d levels",
		          PROMPT_MAX_YAML_DEPTH);
		yaml_event_delete(ev);
		return st;
	}
	if (++Y->nodes > PROMPT_MAX_YAML_NODES) {
		st = yerr(Y, ev->start_mark.line, "more than %d values",
		          PROMPT_MAX_YAML_NODES);
		yaml_event_delete(ev);
		return st;
	}
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		st = conv_scalar(Y, ev, out);
		break;
	case YAML_SEQUENCE_START_EVENT:
		st = conv_sequence(Y, ev, depth, out);
		break;
	case YAML_MAPPING_START_EVENT:
		st = conv_mapping(Y, ev, depth, parent, out);
		break;
	case YAML_ALIAS_EVENT: {
		const char *a = (const char *)ev->data.alias.anchor;
		size_t k;
		st = CORE_OK;
		for (k = Y->nanchors; k > 0; k--)
			if (!strcmp(Y->anchors[k - 1].name, a))
				break;
		if (k == 0) {
			st = yerr(Y, ev->start_mark.line, "unknown alias '*%s'", a);
			break;
		}
		Y->nodes += count_values(Y->anchors[k - 1].v);
		if (Y->nodes > PROMPT_MAX_YAML_NODES) {
			st = yerr(Y, ev->start_mark.line, "more than %d values (aliases expanded)",
			          PROMPT_MAX_YAML_NODES);
			break;
		}
		*out = json_incref(Y->anchors[k - 1].v);
		break;
	}
	default:
		st = yerr(Y, ev->start_mark.line, "unexpected YAML event");
		break;
	}
	if (st && *out) {
		json_decref(*out);
		*out = NULL;
	}
	yaml_event_delete(ev);
	return st;
}

static size_t key_line(const struct yconv *Y, const char *key)
{
	for (size_t i = 0; i < Y->nkl; i++)
		if (!strcmp(Y->kl[i].key, key))
			return Y->kl[i].line;
	return 0;
}

/* Type checks on the fields agentkit reads. */
static enum core_status check_meta(struct yconv *Y, json_t *meta)
{
	static const struct { const char *key; int type; } fields[] = {
		{ "model", JSON_STRING }, { "description", JSON_STRING },
		{ "name", JSON_STRING }, { "config", JSON_OBJECT },
		{ "input", JSON_OBJECT }, { "output", JSON_OBJECT },
		{ "tools", JSON_ARRAY }, { "maxTurns", JSON_INTEGER },
	};
	static const char *tnames[] = { "a mapping", "a sequence", "a string",
	                                "an integer" };

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const json_t *v = json_object_get(meta, fields[i].key);
		int ok;
		if (!v)
			continue;
		switch (fields[i].type) {
		case JSON_STRING: ok = jv_is_string(v); break;
		case JSON_INTEGER: ok = json_is_integer(v); break;
		default: ok = json_typeof(v) == (json_type)fields[i].type; break;
		}
		if (!ok)
			return yerr(Y, key_line(Y, fields[i].key), "'%s' must be %s, got %s",
			            fields[i].key, tnames[fields[i].type], jv_type_name(v));
	}
	const json_t *tools = json_object_get(meta, "tools");
	for (size_t i = 0; tools && i < json_array_size(tools); i++)
		if (!jv_is_string(json_array_get(tools, i)))
			return yerr(Y, key_line(Y, "tools"), "'tools' must list tool names (strings), item %zu is %s",
			            i + 1, jv_type_name(json_array_get(tools, i)));
	const json_t *mt = json_object_get(meta, "maxTurns");
	if (mt && json_integer_value(mt) < 0)
		return yerr(Y, key_line(Y, "maxTurns"), "max turns must be greater than 0, got %lld",
		            (long long)json_integer_value(mt));
	const json_t *in = json_object_get(meta, "input");
	const json_t *def = in ? json_object_get(in, "default") : NULL;
	if (def && !json_is_object(def))
		return yerr(Y, key_line(Y, "input.default"), "'input.default' must be a mapping, got %s",
		            jv_type_name(def));
	return CORE_OK;
}

/*
 * The one document of Y's input into *doc (NULL for an empty one); with
 * mapping set it must be a mapping.
 */
static enum core_status parse_doc(struct yconv *Y, int mapping, json_t **doc)
{
	yaml_event_t ev;
	enum core_status st;
	int docs = 0;

	*doc = NULL;
	for (;;) {
		if ((st = next_event(Y, &ev)))
			return st;
		if (ev.type == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			return CORE_OK;
		}
		if (ev.type == YAML_STREAM_START_EVENT || ev.type == YAML_DOCUMENT_END_EVENT) {
			yaml_event_delete(&ev);
			continue;
		}
		if (ev.type == YAML_DOCUMENT_START_EVENT) {
			if (docs++) {
				st = yerr(Y, ev.start_mark.line, "more than one YAML document");
				yaml_event_delete(&ev);
				return st;
			}
			yaml_event_delete(&ev);
			continue;
		}
		size_t line = ev.start_mark.line;
		yaml_event_type_t type = ev.type;
		if ((st = conv_node(Y, &ev, 0, NULL, doc)))
			return st;
		if (json_is_null(*doc) && type == YAML_SCALAR_EVENT) {
			/* an empty document (only comments) */
			json_decref(*doc);
			*doc = NULL;
			continue;
		}
		if (mapping && !json_is_object(*doc))
			return yerr(Y, line, "expected a mapping of keys, got %s", jv_type_name(*doc));
	}
}

static void yconv_release(struct yconv *Y)
{
	for (size_t i = 0; i < Y->nanchors; i++) {
		free(Y->anchors[i].name);
		json_decref(Y->anchors[i].v);
	}
	free(Y->anchors);
	for (size_t i = 0; i < Y->nkl; i++)
		free(Y->kl[i].key);
	free(Y->kl);
	yaml_parser_delete(&Y->p);
}

enum core_status frontmatter_parse(const char *fm, size_t n, const char *name, size_t line0,
                                   json_t **out, struct core_err *e)
{
	struct yconv Y;
	enum core_status st;
	json_t *doc = NULL;

	memset(&Y, 0, sizeof(Y));
	Y.name = name;
	Y.line0 = line0;
	Y.e = e;
	*out = NULL;
	if (!yaml_parser_initialize(&Y.p))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	yaml_parser_set_input_string(&Y.p, (const unsigned char *)fm, n);
	if ((st = parse_doc(&Y, 1, &doc)))
		goto out;
	if (!doc && !(doc = json_object())) {
		st = core_fail(e, CORE_ENOMEM, "out of memory");
		goto out;
	}
	st = check_meta(&Y, doc);
out:
	if (st) {
		json_decref(doc);
		doc = NULL;
	}
	*out = doc;
	yconv_release(&Y);
	return st;
}

enum core_status yaml_to_json(const char *text, size_t n, const char *name, json_t **out,
                              struct core_err *e)
{
	struct yconv Y;
	enum core_status st;
	json_t *doc = NULL;

	memset(&Y, 0, sizeof(Y));
	Y.name = name;
	Y.e = e;
	Y.plain = 1;
	*out = NULL;
	if (!yaml_parser_initialize(&Y.p))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	yaml_parser_set_input_string(&Y.p, (const unsigned char *)text, n);
	st = parse_doc(&Y, 0, &doc);
	if (!st && !doc && !(doc = json_null()))
		st = core_fail(e, CORE_ENOMEM, "out of memory");
	if (st) {
		json_decref(doc);
		doc = NULL;
	}
	*out = doc;
	yconv_release(&Y);
	return st;
}
