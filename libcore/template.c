/*
 * template.c - compile and render the Handlebars subset of template.h.
 *
 * Three stages.  The tokenizer cuts the source into text and tags ({{...}})
 * and records line numbers.  The whitespace pass then applies Handlebars'
 * rules on the flat token list: "~" strips all whitespace on its side, and a
 * block, else or comment tag alone on its line takes that line's
 * indentation and newline with it ("standalone").  Handlebars decides this
 * on its AST, but a tag's neighbours in the AST are exactly its neighbours in
 * the token list, so the flat pass gives the same result.  Finally a
 * recursive-descent parser builds the node tree, resolving helper names at
 * compile time (Dotprompt compiles with knownHelpersOnly), so an unknown
 * helper is an error before anything renders.
 *
 * Rendering walks the tree with a context stack (pushed only by blocks that
 * change the context: each, with, sections, as in Handlebars 4) and a stack
 * of loop frames for @index/@key/@first/@last.  Recursion depth is bounded
 * by TPL_MAX_DEPTH at compile time.
 */
#include "template.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"

/* ---------------------------------------------------------------- nodes */

enum helper {
	H_NONE,
	/* inline helpers */
	H_JSON, H_ROLE, H_HISTORY, H_MEDIA, H_SECTION, H_LOOKUP,
	/* block helpers */
	H_IF, H_UNLESS, H_EACH, H_WITH, H_IFEQ, H_UNLESSEQ,
	/* mustache sections: {{#path}} and {{^path}} */
	H_SECT, H_INVSECT,
};

static const struct {
	const char *name;
	enum helper h;
	int block;
	int nparams;
} helpers[] = {
	{ "json", H_JSON, 0, 1 },
	{ "role", H_ROLE, 0, 1 },
	{ "history", H_HISTORY, 0, 0 },
	{ "media", H_MEDIA, 0, 0 },
	{ "section", H_SECTION, 0, 1 },
	{ "lookup", H_LOOKUP, 0, 2 },
	{ "if", H_IF, 1, 1 },
	{ "unless", H_UNLESS, 1, 1 },
	{ "each", H_EACH, 1, 1 },
	{ "with", H_WITH, 1, 1 },
	{ "ifEquals", H_IFEQ, 1, 2 },
	{ "unlessEquals", H_UNLESSEQ, 1, 2 },
};

enum dvar { DV_NONE, DV_ROOT, DV_INDEX, DV_KEY, DV_FIRST, DV_LAST, DV_STATE };

static const struct {
	const char *name;
	enum dvar dv;
} dvars[] = {
	{ "root", DV_ROOT }, { "index", DV_INDEX }, { "key", DV_KEY },
	{ "first", DV_FIRST }, { "last", DV_LAST }, { "state", DV_STATE },
};

struct texpr {
	json_t *lit;            /* literal value, or NULL for a path */
	int undef;              /* the literal `undefined` */
	enum dvar dv;           /* data variable (@x) or DV_NONE */
	unsigned depth;         /* number of ../ */
	char **segs;
	size_t nsegs;
};

struct thash {
	char *key;
	struct texpr val;
};

enum node_kind { N_TEXT, N_VALUE, N_HELPER, N_BLOCK };

struct tlist {
	struct tnode *v;
	size_t n, cap;
};

struct tnode {
	enum node_kind kind;
	enum helper h;
	size_t line;
	char *text;             /* N_TEXT: the text; N_BLOCK: the name to close */
	size_t len;
	struct texpr *params;
	size_t nparams;
	struct thash *hash;
	size_t nhash;
	struct tlist prog, inv;
};

struct tpl {
	char *name;
	struct tlist body;
	int has_history;
};

static void expr_release(struct texpr *x)
{
	json_decref(x->lit);
	for (size_t i = 0; i < x->nsegs; i++)
		free(x->segs[i]);
	free(x->segs);
	memset(x, 0, sizeof(*x));
}

static void list_release(struct tlist *l);

static void node_release(struct tnode *n)
{
	free(n->text);
	for (size_t i = 0; i < n->nparams; i++)
		expr_release(&n->params[i]);
	free(n->params);
	for (size_t i = 0; i < n->nhash; i++) {
		free(n->hash[i].key);
		expr_release(&n->hash[i].val);
	}
	free(n->hash);
	list_release(&n->prog);
	list_release(&n->inv);
}

static void list_release(struct tlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		node_release(&l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static struct tnode *list_push(struct tlist *l)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		struct tnode *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		l->v = v;
		l->cap = cap;
	}
	memset(&l->v[l->n], 0, sizeof(l->v[0]));
	return &l->v[l->n++];
}

void tpl_free(struct tpl *t)
{
	if (!t)
		return;
	list_release(&t->body);
	free(t->name);
	free(t);
}

int tpl_has_history(const struct tpl *t)
{
	return t && t->has_history;
}

/* ------------------------------------------------------------ tokenizer */

enum tag_type {
	TG_COMMENT = '!', TG_OPEN = '#', TG_CLOSE = '/', TG_INV = '^',
	TG_ELSE = 'e', TG_VALUE = 'v',
};

struct tok {
	int is_tag;
	char *text;             /* TEXT: owned text */
	size_t len;
	size_t line;
	/* tags */
	enum tag_type type;
	const char *body;       /* expression text inside the braces */
	size_t blen;
	int strip_l, strip_r;   /* ~ on the left / right */
	/* whitespace pass (text): bytes to drop at each end */
	size_t cut_l, cut_r;
};

struct parser {
	const char *name;
	const char *src;
	size_t n;
	struct tok *toks;
	size_t ntoks, cap;
	size_t pos;
	size_t last_line;
	struct core_err *e;
	int has_history;
};

static enum core_status perr(struct parser *P, size_t line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static enum core_status perr(struct parser *P, size_t line, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return core_fail(P->e, CORE_EINVAL, "%s:%zu: %s", P->name, line, msg);
}

static enum core_status nomem(struct core_err *e)
{
	return core_fail(e, CORE_ENOMEM, "out of memory");
}

static struct tok *tok_push(struct parser *P)
{
	if (P->ntoks == P->cap) {
		size_t cap = P->cap ? P->cap * 2 : 32;
		struct tok *v = realloc(P->toks, cap * sizeof(*v));
		if (!v)
			return NULL;
		P->toks = v;
		P->cap = cap;
	}
	memset(&P->toks[P->ntoks], 0, sizeof(P->toks[0]));
	return &P->toks[P->ntoks++];
}

static size_t count_nl(const char *p, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += p[i] == '\n';
	return c;
}

/* Emit the pending text buffer as a TEXT token. */
static enum core_status flush_text(struct parser *P, struct core_buf *txt,
                                   size_t line)
{
	struct tok *t;

	if (txt->len == 0)
		return CORE_OK;
	if (!(t = tok_push(P)))
		return nomem(P->e);
	t->len = txt->len;
	t->text = core_buf_detach(txt, NULL);
	t->line = line;
	return CORE_OK;
}

/*
 * Find the end of a tag whose expression starts at k: the index of the
 * closing "}}" (or "}}}" for a triple-stash), skipping quoted strings.
 */
static int find_close(const char *s, size_t n, size_t k, int triple,
                      size_t *end)
{
	for (size_t m = k; m + 1 < n; m++) {
		if (s[m] == '"' || s[m] == '\'') {
			char q = s[m];
			for (m++; m < n && s[m] != q; m++)
				if (s[m] == '\\' && m + 1 < n)
					m++;
			if (m >= n)
				return -1;
			continue;
		}
		if (s[m] == '}' && s[m + 1] == '}') {
			if (triple && (m + 2 >= n || s[m + 2] != '}'))
				return -1;
			*end = m;
			return 0;
		}
	}
	return -1;
}

static int is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
	       c == '\v';
}

static enum core_status tokenize(struct parser *P, size_t first_line)
{
	const char *s = P->src;
	size_t n = P->n, i = 0, line = first_line, txt_line = first_line;
	struct core_buf txt = CORE_BUF_INIT(TPL_MAX_SOURCE + 16);
	enum core_status st = CORE_OK;

	while (i < n) {
		const char *p = memmem(s + i, n - i, "{{", 2);
		size_t j = p ? (size_t)(p - s) : n;

		if (txt.len == 0)
			txt_line = line;
		if (p && j > i && s[j - 1] == '\\' && !(j - 1 > i && s[j - 2] == '\\')) {
			/* \{{ : a literal "{{"; text runs on to the next {{ */
			if ((st = core_buf_add(&txt, s + i, j - 1 - i)) ||
			    (st = core_buf_add(&txt, "{{", 2)))
				goto fail;
			line += count_nl(s + i, j + 2 - i);
			i = j + 2;
			continue;
		}
		if (p && j > i && s[j - 1] == '\\') {
			/* \\{{ : one literal backslash, then a real tag */
			st = core_buf_add(&txt, s + i, j - 1 - i);
		} else {
			st = core_buf_add(&txt, s + i, j - i);
		}
		if (st)
			goto fail;
		line += count_nl(s + i, j - i);
		i = j;
		if (i >= n)
			break;
		if ((st = flush_text(P, &txt, txt_line)))
			goto fail;

		/* a tag at i */
		size_t k = i + 2, end, next;
		int triple = 0, strip_l = 0, strip_r = 0;
		enum tag_type type;
		if (k < n && s[k] == '{') {
			triple = 1;
			k++;
		}
		if (k < n && s[k] == '~') {
			strip_l = 1;
			k++;
		}
		if (!triple && k < n && s[k] == '!') {
			const char *c;
			type = TG_COMMENT;
			if (n - k >= 3 && memcmp(s + k, "!--", 3) == 0) {
				c = memmem(s + k + 3, n - k - 3, "--", 2);
				for (; c; c = memmem(c + 1, n - (size_t)(c + 1 - s), "--", 2)) {
					size_t m = (size_t)(c - s) + 2;
					if (m < n && s[m] == '~')
						m++;
					if (m + 1 < n && s[m] == '}' && s[m + 1] == '}')
						break;
				}
				if (!c)
					goto unclosed;
				end = (size_t)(c - s) + 2;
				if (end < n && s[end] == '~') {
					strip_r = 1;
					end++;
				}
				next = end + 2;
				end = (size_t)(c - s);
			} else {
				c = memmem(s + k, n - k, "}}", 2);
				if (!c)
					goto unclosed;
				end = (size_t)(c - s);
				next = end + 2;
				if (end > k && s[end - 1] == '~') {
					strip_r = 1;
					end--;
				}
			}
		} else {
			if (find_close(s, n, k, triple, &end) != 0)
				goto unclosed;
			next = end + (triple ? 3 : 2);
			if (end > k && s[end - 1] == '~') {
				strip_r = 1;
				end--;
			}
			while (k < end && is_ws(s[k]))
				k++;
			if (triple || (k < end && s[k] == '&')) {
				type = TG_VALUE;
				if (!triple)
					k++;
			} else if (k < end && (s[k] == '#' || s[k] == '/' || s[k] == '^')) {
				type = (enum tag_type)s[k];
				k++;
			} else if (k < end && s[k] == '>') {
				st = perr(P, line, "partials are not supported ({{>...}})");
				goto fail;
			} else if (k < end && s[k] == '*') {
				st = perr(P, line, "decorators are not supported ({{*...}})");
				goto fail;
			} else if (end - k >= 4 && memcmp(s + k, "else", 4) == 0 &&
			           (end - k == 4 || is_ws(s[k + 4]))) {
				type = TG_ELSE;
				k += 4;
			} else {
				type = TG_VALUE;
			}
			if (type == TG_INV) {
				size_t m = k;
				while (m < end && is_ws(s[m]))
					m++;
				if (m == end)
					type = TG_ELSE;    /* {{^}} is {{else}} */
			}
		}
		struct tok *t = tok_push(P);
		if (!t) {
			st = nomem(P->e);
			goto fail;
		}
		t->is_tag = 1;
		t->type = type;
		t->body = s + k;
		t->blen = end > k ? end - k : 0;
		t->line = line;
		t->strip_l = strip_l;
		t->strip_r = strip_r;
		line += count_nl(s + i, next - i);
		i = next;
		continue;
unclosed:
		st = perr(P, line, "unclosed '%s' (no matching '%s')",
		          triple ? "{{{" : "{{", triple ? "}}}" : "}}");
		goto fail;
	}
	st = flush_text(P, &txt, txt_line);
	/* the line of the last byte, for "unclosed ..." at the end */
	P->last_line = line - (n > 0 && s[n - 1] == '\n' && line > first_line);
fail:
	core_buf_release(&txt);
	return st;
}

/* Handlebars' standalone tests (isPrevWhitespace / isNextWhitespace). */
static int prev_ws(const struct parser *P, size_t t)
{
	const struct tok *p;
	size_t k;

	if (t == 0)
		return 1;
	p = &P->toks[t - 1];
	if (p->is_tag)
		return 0;
	for (k = p->len; k > 0 && is_ws(p->text[k - 1]); k--)
		if (p->text[k - 1] == '\n')
			return 1;
	return k == 0 && t - 1 == 0;
}

static int next_ws(const struct parser *P, size_t t)
{
	const struct tok *x;
	size_t k;

	if (t + 1 >= P->ntoks)
		return 1;
	x = &P->toks[t + 1];
	if (x->is_tag)
		return 0;
	for (k = 0; k < x->len && is_ws(x->text[k]); k++)
		if (x->text[k] == '\n')
			return 1;
	return k == x->len && t + 2 == P->ntoks;
}

static void whitespace_pass(struct parser *P)
{
	for (size_t t = 0; t < P->ntoks; t++) {
		struct tok *k = &P->toks[t];
		struct tok *pv = t > 0 && !P->toks[t - 1].is_tag ? &P->toks[t - 1] : NULL;
		struct tok *nx = t + 1 < P->ntoks && !P->toks[t + 1].is_tag ? &P->toks[t + 1] : NULL;

		if (!k->is_tag)
			continue;
		if (k->strip_l && pv) {
			size_t m = pv->len;
			while (m > 0 && is_ws(pv->text[m - 1]))
				m--;
			if (pv->len - m > pv->cut_r)
				pv->cut_r = pv->len - m;
		}
		if (k->strip_r && nx) {
			size_t m = 0;
			while (m < nx->len && is_ws(nx->text[m]))
				m++;
			if (m > nx->cut_l)
				nx->cut_l = m;
		}
		if (k->type == TG_VALUE)
			continue;
		if (!prev_ws(P, t) || !next_ws(P, t))
			continue;
		if (pv) {
			size_t m = pv->len;
			while (m > 0 && (pv->text[m - 1] == ' ' || pv->text[m - 1] == '\t'))
				m--;
			if (pv->len - m > pv->cut_r)
				pv->cut_r = pv->len - m;
		}
		if (nx) {
			size_t m = 0;
			while (m < nx->len && (nx->text[m] == ' ' || nx->text[m] == '\t'))
				m++;
			if (m < nx->len && nx->text[m] == '\r' && m + 1 < nx->len &&
			    nx->text[m + 1] == '\n')
				m++;
			if (m < nx->len && nx->text[m] == '\n')
				m++;
			if (m > nx->cut_l)
				nx->cut_l = m;
		}
	}
}

/* ---------------------------------------------------------- expressions */

static int is_id_char(unsigned char c)
{
	if (c <= ' ' || c == 0x7f)
		return 0;
	return !strchr("!\"#%&'()*+,./;<=>@[\\]^`{|}~", c);
}

struct lexer {
	struct parser *P;
	const char *s;
	size_t n, i, line;
};

static void lx_skip(struct lexer *L)
{
	while (L->i < L->n && is_ws(L->s[L->i]))
		L->i++;
}

static enum core_status add_seg(struct lexer *L, struct texpr *x,
                                const char *p, size_t n)
{
	char **v = realloc(x->segs, (x->nsegs + 1) * sizeof(*v));
	if (!v)
		return nomem(L->P->e);
	x->segs = v;
	if (!(v[x->nsegs] = strndup(p, n)))
		return nomem(L->P->e);
	x->nsegs++;
	return CORE_OK;
}

/* Parse a path at L->i: [@]seg(sep seg)* where seg is ID, [literal], .., ., this */
static enum core_status parse_path(struct lexer *L, struct texpr *x)
{
	const char *s = L->s;
	size_t start = L->i;
	int data = 0, named = 0;   /* named: a real segment seen */
	enum core_status st;

	if (L->i < L->n && s[L->i] == '@') {
		data = 1;
		L->i++;
	}
	for (;;) {
		size_t a = L->i, b;
		if (L->i < L->n && s[L->i] == '[') {
			const char *c = memchr(s + L->i, ']', L->n - L->i);
			if (!c)
				return perr(L->P, L->line, "unclosed '[' in path '%.*s'",
				            (int)(L->n - start), s + start);
			a = L->i + 1;
			b = (size_t)(c - s);
			L->i = b + 1;
			if ((st = add_seg(L, x, s + a, b - a)))
				return st;
			named = 1;
		} else if (L->n - L->i >= 2 && s[L->i] == '.' && s[L->i + 1] == '.') {
			L->i += 2;
			if (named || data)
				return perr(L->P, L->line, "invalid path '%.*s': '..' only at the start",
				            (int)(L->i - start), s + start);
			x->depth++;
		} else if (L->i < L->n && s[L->i] == '.') {
			L->i++;
			if (named || data || x->depth)
				return perr(L->P, L->line, "invalid path '%.*s'",
				            (int)(L->i - start), s + start);
		} else {
			while (L->i < L->n && is_id_char((unsigned char)s[L->i]))
				L->i++;
			b = L->i;
			if (a == b)
				return perr(L->P, L->line, "invalid path '%.*s'",
				            (int)(L->i - start + (L->i < L->n)), s + start);
			if (b - a == 4 && memcmp(s + a, "this", 4) == 0 && !named && !data) {
				if (x->depth)
					return perr(L->P, L->line, "invalid path '%.*s'",
					            (int)(b - start), s + start);
			} else if (data && !named && x->nsegs == 0 && x->dv == DV_NONE) {
				size_t k;
				for (k = 0; k < sizeof(dvars) / sizeof(dvars[0]); k++)
					if (strlen(dvars[k].name) == b - a &&
					    memcmp(dvars[k].name, s + a, b - a) == 0)
						break;
				if (k == sizeof(dvars) / sizeof(dvars[0]))
					return perr(L->P, L->line, "unknown data variable '@%.*s'",
					            (int)(b - a), s + a);
				x->dv = dvars[k].dv;
				named = 1;
			} else {
				if ((st = add_seg(L, x, s + a, b - a)))
					return st;
				named = 1;
			}
		}
		/* a separator ("." or "/") with something after it */
		if (L->i + 1 < L->n && (s[L->i] == '.' || s[L->i] == '/') &&
		    !is_ws(s[L->i + 1])) {
			L->i++;
			continue;
		}
		break;
	}
	if (data && x->dv == DV_NONE)
		return perr(L->P, L->line, "invalid data variable '%.*s'",
		            (int)(L->i - start), s + start);
	if (x->dv != DV_NONE && x->dv != DV_ROOT && x->dv != DV_STATE && x->nsegs)
		return perr(L->P, L->line, "invalid path '%.*s'",
		            (int)(L->i - start), s + start);
	if (L->i < L->n && !is_ws(s[L->i]) && s[L->i] != '=')
		return perr(L->P, L->line, "invalid path '%.*s'",
		            (int)(L->i + 1 - start), s + start);
	return CORE_OK;
}

/* A number literal: -?[0-9]+(.[0-9]+)? followed by whitespace or the end. */
static int number_len(const char *s, size_t n)
{
	size_t i = 0;

	if (i < n && s[i] == '-')
		i++;
	if (i >= n || !isdigit((unsigned char)s[i]))
		return 0;
	while (i < n && isdigit((unsigned char)s[i]))
		i++;
	if (i + 1 < n && s[i] == '.' && isdigit((unsigned char)s[i + 1])) {
		i++;
		while (i < n && isdigit((unsigned char)s[i]))
			i++;
	}
	if (i < n && !is_ws(s[i]))
		return 0;
	return (int)i;
}

/* Parse one value (literal or path) at L->i. */
static enum core_status parse_value(struct lexer *L, struct texpr *x)
{
	const char *s = L->s + L->i;
	size_t n = L->n - L->i;
	int nl;

	if (n == 0)
		return perr(L->P, L->line, "missing value");
	if (s[0] == '"' || s[0] == '\'') {
		struct core_buf b = CORE_BUF_INIT(TPL_MAX_SOURCE);
		size_t k;
		for (k = 1; k < n && s[k] != s[0]; k++) {
			if (s[k] == '\\' && k + 1 < n && s[k + 1] == s[0])
				k++;
			if (core_buf_addc(&b, s[k])) {
				core_buf_release(&b);
				return nomem(L->P->e);
			}
		}
		if (k >= n) {
			core_buf_release(&b);
			return perr(L->P, L->line, "unterminated string literal");
		}
		x->lit = json_stringn(b.p ? b.p : "", b.len);
		core_buf_release(&b);
		if (!x->lit)
			return perr(L->P, L->line, "string literal is not valid UTF-8");
		L->i += k + 1;
		if (L->i < L->n && !is_ws(L->s[L->i]))
			return perr(L->P, L->line, "unexpected '%c' after string literal",
			            L->s[L->i]);
		return CORE_OK;
	}
	if (s[0] == '(')
		return perr(L->P, L->line, "sub-expressions are not supported");
	if (s[0] == '|' || (s[0] == 'a' && n >= 3 && memcmp(s, "as", 2) == 0 &&
	                    is_ws(s[2]) && memchr(s, '|', n)))
		return perr(L->P, L->line, "block parameters are not supported");
	if ((nl = number_len(s, n)) > 0) {
		struct core_err ign = {0};
		x->lit = jv_parse(s, (size_t)nl, "", 1, &ign);
		if (!x->lit)
			return nomem(L->P->e);
		L->i += (size_t)nl;
		return CORE_OK;
	}
	static const struct {
		const char *w;
		int kind;
	} words[] = { { "true", 1 }, { "false", 2 }, { "null", 3 }, { "undefined", 4 } };
	for (size_t k = 0; k < 4; k++) {
		size_t wl = strlen(words[k].w);
		if (n >= wl && memcmp(s, words[k].w, wl) == 0 && (n == wl || is_ws(s[wl]))) {
			switch (words[k].kind) {
			case 1: x->lit = json_true(); break;
			case 2: x->lit = json_false(); break;
			case 3: x->lit = json_null(); break;
			default: x->undef = 1; break;
			}
			L->i += wl;
			return CORE_OK;
		}
	}
	return parse_path(L, x);
}

/* Whether a hash pair key=... starts at L->i. */
static size_t hash_key_len(const struct lexer *L)
{
	size_t k = L->i;

	while (k < L->n && is_id_char((unsigned char)L->s[k]))
		k++;
	if (k > L->i && k < L->n && L->s[k] == '=')
		return k - L->i;
	return 0;
}

/* Parse "name params... key=value..." into node (params[0] is the name). */
static enum core_status parse_call(struct parser *P, const char *s, size_t n,
                                   size_t line, struct tnode *node)
{
	struct lexer L = { P, s, n, 0, line };
	enum core_status st;

	lx_skip(&L);
	while (L.i < L.n) {
		size_t kl = hash_key_len(&L);
		if (kl) {
			struct thash *h = realloc(node->hash, (node->nhash + 1) * sizeof(*h));
			if (!h)
				return nomem(P->e);
			node->hash = h;
			h = &h[node->nhash];
			memset(h, 0, sizeof(*h));
			if (!(h->key = strndup(L.s + L.i, kl)))
				return nomem(P->e);
			node->nhash++;
			for (size_t k = 0; k + 1 < node->nhash; k++)
				if (strcmp(node->hash[k].key, h->key) == 0)
					return perr(P, line, "duplicate hash argument '%s'", h->key);
			L.i += kl + 1;
			if ((st = parse_value(&L, &h->val)))
				return st;
		} else {
			struct texpr *v;
			if (node->nhash)
				return perr(P, line, "positional argument after key=value arguments");
			v = realloc(node->params, (node->nparams + 1) * sizeof(*v));
			if (!v)
				return nomem(P->e);
			node->params = v;
			memset(&v[node->nparams], 0, sizeof(*v));
			node->nparams++;
			if ((st = parse_value(&L, &v[node->nparams - 1])))
				return st;
		}
		lx_skip(&L);
	}
	if (node->nparams == 0)
		return perr(P, line, "empty expression");
	return CORE_OK;
}

/* Drop params[0] (the helper name) once the helper is known. */
static void shift_name(struct tnode *node)
{
	expr_release(&node->params[0]);
	memmove(node->params, node->params + 1,
	        (node->nparams - 1) * sizeof(node->params[0]));
	node->nparams--;
}

/* The helper a name expression refers to, if it is a bare identifier. */
static int helper_index(const struct texpr *x)
{
	if (x->lit || x->undef || x->dv != DV_NONE || x->depth || x->nsegs != 1)
		return -1;
	for (size_t k = 0; k < sizeof(helpers) / sizeof(helpers[0]); k++)
		if (strcmp(helpers[k].name, x->segs[0]) == 0)
			return (int)k;
	return -1;
}

static int valid_role(const char *r)
{
	return !strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "model") ||
	       !strcmp(r, "tool");
}

static const struct texpr *hash_get(const struct tnode *node, const char *key)
{
	for (size_t k = 0; k < node->nhash; k++)
		if (strcmp(node->hash[k].key, key) == 0)
			return &node->hash[k].val;
	return NULL;
}

/* Check arity and arguments of an inline helper. */
static enum core_status check_inline(struct parser *P, struct tnode *node, int hk)
{
	const char *name = helpers[hk].name;

	if (node->nparams != (size_t)helpers[hk].nparams)
		return perr(P, node->line, "{{%s}} takes %d argument%s, got %zu", name,
		            helpers[hk].nparams, helpers[hk].nparams == 1 ? "" : "s",
		            node->nparams);
	switch (node->h) {
	case H_JSON:
		for (size_t k = 0; k < node->nhash; k++)
			if (strcmp(node->hash[k].key, "indent"))
				return perr(P, node->line, "{{json}}: unknown argument '%s'",
				            node->hash[k].key);
		break;
	case H_ROLE:
		if (node->params[0].lit) {
			const json_t *r = node->params[0].lit;
			if (!jv_is_string(r))
				return perr(P, node->line, "{{role}} needs a string, got %s",
				            jv_type_name(r));
			if (!valid_role(json_string_value(r)))
				return perr(P, node->line,
				            "{{role}}: unknown role \"%s\" (expected \"system\", \"user\", \"model\" or \"tool\")",
				            json_string_value(r));
		} else if (node->params[0].undef) {
			return perr(P, node->line, "{{role}} needs a string, got undefined");
		}
		break;
	case H_MEDIA:
		if (!hash_get(node, "url"))
			return perr(P, node->line, "{{media}} needs url=...");
		for (size_t k = 0; k < node->nhash; k++)
			if (strcmp(node->hash[k].key, "url") &&
			    strcmp(node->hash[k].key, "contentType"))
				return perr(P, node->line, "{{media}}: unknown argument '%s'",
				            node->hash[k].key);
		break;
	case H_HISTORY:
	case H_SECTION:
	case H_LOOKUP:
		if (node->nhash)
			return perr(P, node->line, "{{%s}} takes no key=value arguments", name);
		break;
	default:
		break;
	}
	return CORE_OK;
}

/* ---------------------------------------------------------------- parse */

static enum core_status parse_list(struct parser *P, struct tlist *out,
                                   unsigned depth);

static void tag_name(const struct tok *t, const char **p, size_t *n)
{
	size_t a = 0, b;

	while (a < t->blen && is_ws(t->body[a]))
		a++;
	b = a;
	while (b < t->blen && !is_ws(t->body[b]))
		b++;
	*p = t->body + a;
	*n = b - a;
}

/*
 * Fill a block node from the expression of its opening tag (or of a chained
 * {{else helper ...}}).  inverted: {{^path}}.
 */
static enum core_status setup_block(struct parser *P, struct tnode *node,
                                    const struct tok *t, int inverted,
                                    const char *body, size_t blen)
{
	enum core_status st;
	int hk;

	node->kind = N_BLOCK;
	node->line = t->line;
	if ((st = parse_call(P, body, blen, t->line, node)))
		return st;
	hk = helper_index(&node->params[0]);
	if (hk >= 0 && !helpers[hk].block)
		return perr(P, t->line, "'%s' is not a block helper; use {{%s ...}}",
		            helpers[hk].name, helpers[hk].name);
	if (hk >= 0 && inverted)
		return perr(P, t->line, "{{^%s}} is not supported; use {{#unless}} or {{else}}",
		            helpers[hk].name);
	if (hk < 0) {
		const struct texpr *x = &node->params[0];
		if (x->lit || x->undef)
			return perr(P, t->line, "a block needs a helper or a path");
		if (node->nparams > 1 || node->nhash) {
			if (x->nsegs == 1 && x->dv == DV_NONE && !x->depth)
				return perr(P, t->line, "unknown helper '%s'", x->segs[0]);
			return perr(P, t->line, "a section takes no arguments");
		}
		node->h = inverted ? H_INVSECT : H_SECT;
		return CORE_OK;
	}
	node->h = helpers[hk].h;
	shift_name(node);
	if (node->nparams != (size_t)helpers[hk].nparams)
		return perr(P, t->line, "{{#%s}} takes %d argument%s, got %zu",
		            helpers[hk].name, helpers[hk].nparams,
		            helpers[hk].nparams == 1 ? "" : "s", node->nparams);
	for (size_t k = 0; k < node->nhash; k++)
		if (!((node->h == H_IF || node->h == H_UNLESS) &&
		      strcmp(node->hash[k].key, "includeZero") == 0))
			return perr(P, t->line, "{{#%s}}: unknown argument '%s'",
			            helpers[hk].name, node->hash[k].key);
	return CORE_OK;
}

/*
 * Parse the inside of a block until its {{/name}} (not consumed), handling
 * {{else}} and chained {{else helper ...}}.
 */
static enum core_status parse_block_body(struct parser *P, struct tnode *node,
                                         unsigned depth)
{
	enum core_status st;
	struct tok *t;

	if ((st = parse_list(P, &node->prog, depth)))
		return st;
	if (P->pos >= P->ntoks)
		return CORE_OK;
	t = &P->toks[P->pos];
	if (t->type != TG_ELSE)
		return CORE_OK;
	P->pos++;
	size_t a = 0;
	while (a < t->blen && is_ws(t->body[a]))
		a++;
	if (a == t->blen) {
		if ((st = parse_list(P, &node->inv, depth)))
			return st;
		if (P->pos < P->ntoks && P->toks[P->pos].type == TG_ELSE)
			return perr(P, P->toks[P->pos].line,
			            "second {{else}} in the block opened at line %zu",
			            node->line);
		return CORE_OK;
	}
	/* {{else if x}}: the inverse is one block that runs to the same close */
	if (depth + 1 > TPL_MAX_DEPTH)
		return perr(P, t->line, "blocks nested deeper than %d", TPL_MAX_DEPTH);
	struct tnode *child = list_push(&node->inv);
	if (!child)
		return nomem(P->e);
	if ((st = setup_block(P, child, t, 0, t->body + a, t->blen - a)))
		return st;
	return parse_block_body(P, child, depth + 1);
}

static enum core_status parse_tag(struct parser *P, struct tlist *out,
                                  struct tok *t, unsigned depth)
{
	struct tnode *node;
	enum core_status st;
	int hk;

	switch (t->type) {
	case TG_COMMENT:
		P->pos++;
		return CORE_OK;
	case TG_VALUE:
		P->pos++;
		if (!(node = list_push(out)))
			return nomem(P->e);
		node->line = t->line;
		node->kind = N_VALUE;
		if ((st = parse_call(P, t->body, t->blen, t->line, node)))
			return st;
		hk = helper_index(&node->params[0]);
		if (hk >= 0 && helpers[hk].block)
			return perr(P, t->line, "'%s' is a block helper; use {{#%s ...}}...{{/%s}}",
			            helpers[hk].name, helpers[hk].name, helpers[hk].name);
		if (hk >= 0) {
			node->kind = N_HELPER;
			node->h = helpers[hk].h;
			shift_name(node);
			if (node->h == H_HISTORY)
				P->has_history = 1;
			return check_inline(P, node, hk);
		}
		if (node->nparams > 1 || node->nhash) {
			const struct texpr *x = &node->params[0];
			if (x->nsegs == 1 && x->dv == DV_NONE && !x->depth && !x->lit)
				return perr(P, t->line, "unknown helper '%s'", x->segs[0]);
			return perr(P, t->line, "unexpected arguments after a value");
		}
		return CORE_OK;
	case TG_OPEN:
	case TG_INV: {
		const char *nm;
		size_t nl;
		if (depth + 1 > TPL_MAX_DEPTH)
			return perr(P, t->line, "blocks nested deeper than %d", TPL_MAX_DEPTH);
		P->pos++;
		if (!(node = list_push(out)))
			return nomem(P->e);
		tag_name(t, &nm, &nl);
		if (!(node->text = strndup(nm, nl)))
			return nomem(P->e);
		node->len = nl;
		if ((st = setup_block(P, node, t, t->type == TG_INV, t->body, t->blen)))
			return st;
		if ((st = parse_block_body(P, node, depth + 1)))
			return st;
		if (P->pos >= P->ntoks)
			return perr(P, P->last_line, "unclosed {{%c%s}} opened at line %zu",
			            t->type == TG_INV ? '^' : '#', node->text, node->line);
		struct tok *c = &P->toks[P->pos];
		tag_name(c, &nm, &nl);
		if (nl != node->len || memcmp(nm, node->text, nl) != 0)
			return perr(P, c->line, "{{/%.*s}} does not match {{%c%s}} opened at line %zu",
			            (int)nl, nm, t->type == TG_INV ? '^' : '#', node->text,
			            node->line);
		P->pos++;
		return CORE_OK;
	}
	case TG_CLOSE: {
		const char *nm;
		size_t nl;
		tag_name(t, &nm, &nl);
		return perr(P, t->line, "{{/%.*s}} without a matching {{#%.*s}}",
		            (int)nl, nm, (int)nl, nm);
	}
	case TG_ELSE:
		return perr(P, t->line, "{{else}} outside a block");
	}
	return CORE_OK;
}

/*
 * Parse nodes into out until the end, a {{/...}} or an {{else}} (left at
 * P->pos for the caller), the latter two only inside a block (depth > 0).
 */
static enum core_status parse_list(struct parser *P, struct tlist *out,
                                   unsigned depth)
{
	enum core_status st;

	while (P->pos < P->ntoks) {
		struct tok *t = &P->toks[P->pos];
		if (!t->is_tag) {
			size_t a = t->cut_l, b = t->len > t->cut_r ? t->len - t->cut_r : 0;
			P->pos++;
			if (a >= b)
				continue;
			struct tnode *node = list_push(out);
			if (!node)
				return nomem(P->e);
			node->kind = N_TEXT;
			node->line = t->line;
			if (!(node->text = malloc(b - a + 1)))
				return nomem(P->e);
			memcpy(node->text, t->text + a, b - a);
			node->text[b - a] = 0;
			node->len = b - a;
			continue;
		}
		if (depth > 0 && (t->type == TG_CLOSE || t->type == TG_ELSE))
			return CORE_OK;
		if ((st = parse_tag(P, out, t, depth)))
			return st;
	}
	return CORE_OK;
}

enum core_status tpl_compile(const char *src, size_t len, const char *name,
                             size_t first_line, struct tpl **out,
                             struct core_err *e)
{
	struct parser P = {0};
	struct tpl *t;
	enum core_status st;

	*out = NULL;
	if (!name)
		name = "<template>";
	if (len > TPL_MAX_SOURCE)
		return core_fail(e, CORE_ETOOBIG, "%s: template is larger than %d bytes",
		                 name, TPL_MAX_SOURCE);
	if (!(t = calloc(1, sizeof(*t))) || !(t->name = strdup(name))) {
		free(t);
		return nomem(e);
	}
	P.name = name;
	P.src = src;
	P.n = len;
	P.e = e;
	P.last_line = first_line;
	if ((st = tokenize(&P, first_line)))
		goto out;
	whitespace_pass(&P);
	st = parse_list(&P, &t->body, 0);
	t->has_history = P.has_history;
out:
	for (size_t i = 0; i < P.ntoks; i++)
		free(P.toks[i].text);
	free(P.toks);
	if (st) {
		tpl_free(t);
		return st;
	}
	*out = t;
	return CORE_OK;
}

/* --------------------------------------------------------------- render */

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
		int zero = (iz = hash_get(n, "includeZero")) && !falsy(resolve(R, iz));
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

static enum core_status render_helper(struct rstate *R, const struct tnode *n)
{
	const json_t *a = n->nparams ? resolve(R, &n->params[0]) : NULL;
	struct tpl_piece *p;
	enum core_status st;

	switch (n->h) {
	case H_JSON: {
		const struct texpr *ix = hash_get(n, "indent");
		const json_t *iv = ix ? resolve(R, ix) : NULL;
		int ind = 0;
		struct core_buf b = CORE_BUF_INIT(TPL_MAX_OUTPUT);
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
	case H_ROLE: {
		json_t *meta = NULL;
		if (!a || !jv_is_string(a))
			return core_fail(R->e, CORE_EINVAL, "%s:%zu: {{role}} needs a string, got %s",
			                 R->t->name, n->line, a ? jv_type_name(a) : "nothing");
		if (!valid_role(json_string_value(a)))
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
	case H_HISTORY:
		if (!(p = out_push(R, TPL_HISTORY)))
			return nomem(R->e);
		p->line = n->line;
		return CORE_OK;
	case H_MEDIA: {
		const json_t *url = resolve(R, hash_get(n, "url"));
		const struct texpr *cx = hash_get(n, "contentType");
		const json_t *ct = cx ? resolve(R, cx) : NULL;
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
