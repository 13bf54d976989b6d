/*
 * template_render.c - render a compiled template (template.c) against a
 * context.
 *
 * Rendering walks the tree with a context stack (pushed only by blocks that
 * change the context: each, with, sections, as in Handlebars 4) and a stack
 * of loop frames for @index/@key/@first/@last.  Recursion depth is bounded
 * by TPL_MAX_DEPTH at compile time.
 */
#include "template.h"
#include "template_int.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"

static enum core_status nomem(struct core_err *e)
{
	return core_fail(e, CORE_ENOMEM, "out of memory");
}

struct frame {
	json_t *index, *key, *first, *last;   /* owned */
};

struct rstate {
	const struct tpl *t;
	const json_t *root, *state;
	const json_t *ctx[TPL_MAX_DEPTH + 2];
	size_t nctx;
	struct frame fr[TPL_MAX_DEPTH + 2];
	size_t nfr;
	json_t *tmp;            /* array keeping computed values (lengths) alive */
	struct tpl_output *out;
	struct core_err *e;
};

void tpl_output_release(struct tpl_output *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < o->n; i++) {
		free(o->v[i].text);
		free(o->v[i].extra);
		json_decref(o->v[i].meta);
	}
	free(o->v);
	memset(o, 0, sizeof(*o));
}

static struct tpl_piece *out_push(struct rstate *R, enum tpl_piece_kind kind)
{
	struct tpl_output *o = R->out;

	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 8;
		struct tpl_piece *v = realloc(o->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		o->v = v;
		o->cap = cap;
	}
	memset(&o->v[o->n], 0, sizeof(o->v[0]));
	o->v[o->n].kind = kind;
	return &o->v[o->n++];
}

static enum core_status emit(struct rstate *R, const char *s, size_t n)
{
	struct tpl_output *o = R->out;
	struct tpl_piece *p;

	if (n == 0)
		return CORE_OK;
	if (n > TPL_MAX_OUTPUT - o->bytes)
		return core_fail(R->e, CORE_ETOOBIG, "%s: rendered prompt is larger than %d bytes",
		                 R->t->name, TPL_MAX_OUTPUT);
	p = o->n && o->v[o->n - 1].kind == TPL_TEXT ? &o->v[o->n - 1] : NULL;
	if (!p && !(p = out_push(R, TPL_TEXT)))
		return nomem(R->e);
	char *nt = realloc(p->text, p->text_len + n + 1);
	if (!nt)
		return nomem(R->e);
	memcpy(nt + p->text_len, s, n);
	p->text_len += n;
	nt[p->text_len] = 0;
	p->text = nt;
	o->bytes += n;
	return CORE_OK;
}

static const json_t *keep(struct rstate *R, json_t *v)
{
	if (!v || json_array_append_new(R->tmp, v))
		return NULL;
	return v;
}

static const json_t *seg_lookup(struct rstate *R, const json_t *v, const char *seg)
{
	if (!v)
		return NULL;
	if (json_is_object(v))
		return json_object_get(v, seg);
	if (json_is_array(v)) {
		if (strcmp(seg, "length") == 0)
			return keep(R, json_integer((json_int_t)json_array_size(v)));
		if (*seg && strspn(seg, "0123456789") == strlen(seg) && strlen(seg) < 19)
			return json_array_get(v, (size_t)strtoull(seg, NULL, 10));
		return NULL;
	}
	if (jv_is_string(v) && strcmp(seg, "length") == 0) {
		/* JavaScript counts UTF-16 code units */
		const unsigned char *s = (const unsigned char *)json_string_value(v);
		size_t n = json_string_length(v), u = 0;
		for (size_t i = 0; i < n; i++)
			if ((s[i] & 0xC0) != 0x80)
				u += (s[i] >= 0xF0) ? 2 : 1;
		return keep(R, json_integer((json_int_t)u));
	}
	return NULL;
}

static const json_t *resolve(struct rstate *R, const struct texpr *x)
{
	const json_t *v;

	if (x->undef)
		return NULL;
	if (x->lit)
		return x->lit;
	switch (x->dv) {
	case DV_ROOT: v = R->root; break;
	case DV_STATE: v = R->state; break;
	case DV_INDEX: return R->nfr ? R->fr[R->nfr - 1].index : NULL;
	case DV_KEY: return R->nfr ? R->fr[R->nfr - 1].key : NULL;
	case DV_FIRST: return R->nfr ? R->fr[R->nfr - 1].first : NULL;
	case DV_LAST: return R->nfr ? R->fr[R->nfr - 1].last : NULL;
	default:
		if (x->depth >= R->nctx)
			return NULL;
		v = R->ctx[R->nctx - 1 - x->depth];
		break;
	}
	for (size_t i = 0; i < x->nsegs && v; i++)
		v = seg_lookup(R, v, x->segs[i]);
	return v;
}

/* Append v as Handlebars would print it (containers as compact JSON). */
static enum core_status to_text(const json_t *v, struct core_buf *b)
{
	if (!v || json_is_null(v))
		return CORE_OK;
	if (jv_is_string(v))
		return core_buf_add(b, json_string_value(v), json_string_length(v));
	if (json_is_true(v))
		return core_buf_adds(b, "true");
	if (json_is_false(v))
		return core_buf_adds(b, "false");
	if (json_is_real(v)) {
		double d = json_real_value(v);
		if (d == floor(d) && fabs(d) < 1e21)
			return core_buf_addf(b, "%.0f", d == 0 ? 0.0 : d);
	}
	return jv_dump(v, b);
}

static enum core_status emit_value(struct rstate *R, const json_t *v)
{
	struct core_buf b = CORE_BUF_INIT(TPL_MAX_OUTPUT);
	enum core_status st = to_text(v, &b);

	if (st == CORE_OK)
		st = emit(R, b.p, b.len);
	else
		st = core_fail(R->e, st, "%s: value too large to render", R->t->name);
	core_buf_release(&b);
	return st;
}

static enum core_status pretty(const json_t *v, int ind, int level,
                               struct core_buf *b)
{
	enum core_status st;
	size_t i, n;

	if (level > JV_MAX_DEPTH)
		return CORE_EINVAL;
	if (json_is_object(v) && json_object_size(v)) {
		const char *k;
		json_t *x;
		n = 0;
		if ((st = core_buf_addc(b, '{')))
			return st;
		json_object_foreach((json_t *)v, k, x) {
			if ((n++ && (st = core_buf_addc(b, ','))) ||
			    (st = core_buf_addf(b, "\n%*s", ind * (level + 1), "")) ||
			    (st = jv_dump_string(k, strlen(k), b)) ||
			    (st = core_buf_add(b, ": ", 2)) ||
			    (st = pretty(x, ind, level + 1, b)))
				return st;
		}
		return core_buf_addf(b, "\n%*s}", ind * level, "");
	}
	if (json_is_array(v) && (n = json_array_size(v))) {
		if ((st = core_buf_addc(b, '[')))
			return st;
		for (i = 0; i < n; i++)
			if ((i && (st = core_buf_addc(b, ','))) ||
			    (st = core_buf_addf(b, "\n%*s", ind * (level + 1), "")) ||
			    (st = pretty(json_array_get(v, i), ind, level + 1, b)))
				return st;
		return core_buf_addf(b, "\n%*s]", ind * level, "");
	}
	return jv_dump(v, b);
}

static int falsy(const json_t *v)
{
	return !v || json_is_null(v) || json_is_false(v) ||
	       (jv_is_string(v) && json_string_length(v) == 0) ||
	       (jv_is_number(v) && !jv_is_bignum(v) && jv_number_value(v) == 0);
}

/* Handlebars' isEmpty: falsy except 0, plus the empty array. */
static int is_empty(const json_t *v)
{
	if (json_is_array(v))
		return json_array_size(v) == 0;
	return falsy(v) && !jv_is_number(v);
}

/* JavaScript ===: containers by identity, scalars by value. */
static int strict_eq(const json_t *a, const json_t *b)
{
	if (!a || !b)
		return a == b;
	if (jv_is_number(a) && jv_is_number(b))
		return jv_equal(a, b);
	if (json_is_object(a) || json_is_array(a))
		return a == b;
	if (json_typeof(a) != json_typeof(b))
		return 0;
	return jv_equal(a, b);
}

static enum core_status render_list(struct rstate *R, const struct tlist *l);

static enum core_status with_ctx(struct rstate *R, const json_t *ctx,
                                 const struct tlist *l)
{
	enum core_status st;

	R->ctx[R->nctx++] = ctx;
	st = render_list(R, l);
	R->nctx--;
	return st;
}

static enum core_status render_each(struct rstate *R, const struct tnode *n,
                                    const json_t *v)
{
	enum core_status st = CORE_OK;
	size_t count = 0, i = 0;
	struct frame *f;

	if (json_is_array(v))
		count = json_array_size(v);
	else if (json_is_object(v))
		count = json_object_size(v);
	if (count == 0)
		return render_list(R, &n->inv);
	f = &R->fr[R->nfr++];
	if (json_is_array(v)) {
		for (i = 0; i < count && !st; i++) {
			memset(f, 0, sizeof(*f));
			f->index = json_integer((json_int_t)i);
			f->first = json_boolean(i == 0);
			f->last = json_boolean(i + 1 == count);
			if (!f->index)
				st = nomem(R->e);
			else
				st = with_ctx(R, json_array_get(v, i), &n->prog);
			json_decref(f->index);
		}
	} else {
		const char *k;
		json_t *x;
		json_object_foreach((json_t *)v, k, x) {
			memset(f, 0, sizeof(*f));
			f->index = json_integer((json_int_t)i);
			f->key = json_string(k);
			f->first = json_boolean(i == 0);
			f->last = json_boolean(i + 1 == count);
			i++;
			if (!f->index || !f->key)
				st = nomem(R->e);
			else
				st = with_ctx(R, x, &n->prog);
			json_decref(f->index);
			json_decref(f->key);
			if (st)
				break;
		}
	}
	R->nfr--;
	return st;
}

static enum core_status render_block(struct rstate *R, const struct tnode *n)
{
	const json_t *a = n->nparams ? resolve(R, &n->params[0]) : NULL;
	const struct tlist *yes = &n->prog, *no = &n->inv;
	const struct texpr *iz;

	switch (n->h) {
	case H_IF:
	case H_UNLESS: {
		int zero = (iz = tpl_hash_get(n, "includeZero")) && !falsy(resolve(R, iz));
		int truth = !((!zero && falsy(a)) || is_empty(a));
		if (n->h == H_UNLESS)
			truth = !truth;
		return render_list(R, truth ? yes : no);
	}
	case H_IFEQ:
	case H_UNLESSEQ: {
		int eq = strict_eq(a, resolve(R, &n->params[1]));
		if (n->h == H_UNLESSEQ)
			eq = !eq;
		return render_list(R, eq ? yes : no);
	}
	case H_WITH:
		if (is_empty(a))
			return render_list(R, no);
		return with_ctx(R, a, yes);
	case H_EACH:
		return render_each(R, n, a);
	case H_SECT:
	case H_INVSECT: {
		/* Handlebars' blockHelperMissing ({{^x}} swaps the branches) */
		if (n->h == H_INVSECT) {
			yes = &n->inv;
			no = &n->prog;
		}
		if (a && json_is_true(a))
			return render_list(R, yes);
		if (!a || json_is_null(a) || json_is_false(a))
			return render_list(R, no);
		if (json_is_array(a)) {
			if (json_array_size(a) == 0)
				return render_list(R, no);
			if (n->h == H_SECT)
				return render_each(R, n, a);
			return render_list(R, yes);
		}
		return with_ctx(R, a, yes);
	}
	default:
		return CORE_OK;
	}
}

static enum core_status text_of(struct rstate *R, const json_t *v, char **out)
{
	struct core_buf b = CORE_BUF_INIT(TPL_MAX_OUTPUT);
	enum core_status st = to_text(v, &b);

	if (st) {
		core_buf_release(&b);
		return core_fail(R->e, st, "%s: value too large to render", R->t->name);
	}
	*out = core_buf_detach(&b, NULL);
	return CORE_OK;
}

/* {{json value indent=N}}: the value's JSON, pretty with N (at most 10) spaces. */
static enum core_status render_json(struct rstate *R, const struct tnode *n, const json_t *a)
{
	const struct texpr *ix = tpl_hash_get(n, "indent");
	const json_t *iv = ix ? resolve(R, ix) : NULL;
	int ind = 0;
	struct core_buf b = CORE_BUF_INIT(TPL_MAX_OUTPUT);
	enum core_status st;

	if (iv && jv_is_number(iv) && !jv_is_bignum(iv)) {
		double d = jv_number_value(iv);
		ind = d > 10 ? 10 : d < 1 ? 0 : (int)d;
	}
	if (!a)
		st = core_buf_adds(&b, "null");
	else if (ind)
		st = pretty(a, ind, 0, &b);
	else
		st = jv_dump(a, &b);
	if (st == CORE_OK)
		st = emit(R, b.p, b.len);
	else
		st = core_fail(R->e, st, "%s:%zu: {{json}}: value too large or too deep",
		               R->t->name, n->line);
	core_buf_release(&b);
	return st;
}

/* {{role "name" key=value...}}: a role piece, its hash as text metadata. */
static enum core_status render_role(struct rstate *R, const struct tnode *n, const json_t *a)
{
	json_t *meta = NULL;
	struct tpl_piece *p;
	enum core_status st;

	if (!a || !jv_is_string(a))
		return core_fail(R->e, CORE_EINVAL, "%s:%zu: {{role}} needs a string, got %s",
		                 R->t->name, n->line, a ? jv_type_name(a) : "nothing");
	if (!tpl_valid_role(json_string_value(a)))
		return core_fail(R->e, CORE_EINVAL,
		                 "%s:%zu: {{role}}: unknown role \"%.64s\" (expected \"system\", \"user\", \"model\" or \"tool\")",
		                 R->t->name, n->line, json_string_value(a));
	if (n->nhash && !(meta = json_object()))
		return nomem(R->e);
	for (size_t k = 0; k < n->nhash; k++) {
		char *s = NULL;
		if ((st = text_of(R, resolve(R, &n->hash[k].val), &s))) {
			json_decref(meta);
			return st;
		}
		json_t *sv = json_string(s);
		free(s);
		if (!sv || json_object_set_new(meta, n->hash[k].key, sv)) {
			json_decref(meta);
			return core_fail(R->e, CORE_EINVAL, "%s:%zu: {{role}}: '%s' is not valid UTF-8",
			                 R->t->name, n->line, n->hash[k].key);
		}
	}
	if (!(p = out_push(R, TPL_ROLE)) || !(p->text = strdup(json_string_value(a)))) {
		json_decref(meta);
		return nomem(R->e);
	}
	p->text_len = strlen(p->text);
	p->meta = meta;
	p->line = n->line;
	return CORE_OK;
}

/* {{media url=... contentType=...}}: a media piece. */
static enum core_status render_media(struct rstate *R, const struct tnode *n)
{
	const json_t *url = resolve(R, tpl_hash_get(n, "url"));
	const struct texpr *cx = tpl_hash_get(n, "contentType");
	const json_t *ct = cx ? resolve(R, cx) : NULL;
	struct tpl_piece *p;
	enum core_status st;

	if (!url || !jv_is_string(url) || json_string_length(url) == 0)
		return core_fail(R->e, CORE_EINVAL, "%s:%zu: {{media}}: url must be a non-empty string, got %s",
		                 R->t->name, n->line, url ? jv_type_name(url) : "nothing");
	if (!(p = out_push(R, TPL_MEDIA)))
		return nomem(R->e);
	p->line = n->line;
	if ((st = text_of(R, url, &p->text)))
		return st;
	p->text_len = strlen(p->text);
	if (!falsy(ct) && (st = text_of(R, ct, &p->extra)))
		return st;
	return CORE_OK;
}

static enum core_status render_helper(struct rstate *R, const struct tnode *n)
{
	const json_t *a = n->nparams ? resolve(R, &n->params[0]) : NULL;
	struct tpl_piece *p;
	enum core_status st;

	switch (n->h) {
	case H_JSON:
		return render_json(R, n, a);
	case H_ROLE:
		return render_role(R, n, a);
	case H_HISTORY:
		if (!(p = out_push(R, TPL_HISTORY)))
			return nomem(R->e);
		p->line = n->line;
		return CORE_OK;
	case H_MEDIA:
		return render_media(R, n);
	case H_SECTION:
		if (!(p = out_push(R, TPL_SECTION)))
			return nomem(R->e);
		p->line = n->line;
		if ((st = text_of(R, a, &p->text)))
			return st;
		p->text_len = strlen(p->text);
		return CORE_OK;
	case H_LOOKUP: {
		const json_t *k = resolve(R, &n->params[1]);
		const json_t *v = NULL;
		if (k && jv_is_string(k))
			v = seg_lookup(R, a, json_string_value(k));
		else if (k && json_is_integer(k) && json_is_array(a) && json_integer_value(k) >= 0)
			v = json_array_get(a, (size_t)json_integer_value(k));
		return emit_value(R, v);
	}
	default:
		return CORE_OK;
	}
}

static enum core_status render_list(struct rstate *R, const struct tlist *l)
{
	enum core_status st = CORE_OK;

	for (size_t i = 0; i < l->n && !st; i++) {
		const struct tnode *n = &l->v[i];
		switch (n->kind) {
		case N_TEXT: st = emit(R, n->text, n->len); break;
		case N_VALUE: st = emit_value(R, resolve(R, &n->params[0])); break;
		case N_HELPER: st = render_helper(R, n); break;
		case N_BLOCK: st = render_block(R, n); break;
		}
	}
	return st;
}

enum core_status tpl_render(const struct tpl *t, const json_t *context,
                            const json_t *state, struct tpl_output *out,
                            struct core_err *e)
{
	struct rstate R;
	enum core_status st;

	memset(&R, 0, sizeof(R));
	R.t = t;
	R.root = context;
	R.state = state;
	R.out = out;
	R.e = e;
	R.ctx[R.nctx++] = context;
	if (!(R.tmp = json_array()))
		return nomem(e);
	st = render_list(&R, &t->body);
	json_decref(R.tmp);
	return st;
}
