/*
 * template.c - compile the Handlebars subset of template.h into a tree.
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
 * The compiler is one unit on purpose: the tokenizer, the whitespace pass,
 * the expression parser and the block parser share one parser state and
 * its messages; rendering (template_render.c) shares only the tree.
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

/* ---------------------------------------------------------------- nodes */

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

static const struct {
	const char *name;
	enum dvar dv;
} dvars[] = {
	{ "root", DV_ROOT }, { "index", DV_INDEX }, { "key", DV_KEY },
	{ "first", DV_FIRST }, { "last", DV_LAST }, { "state", DV_STATE },
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

/*
 * The end of a comment tag whose '!' is at k: *end where its body ends,
 * *next past its closing braces, *strip_r for a '~' before them; -1 when
 * it is not closed.  "{{!-- ... --}}" may hold "}}", "{{! ... }}" may not.
 */
static int comment_close(const char *s, size_t n, size_t k, size_t *end,
                         size_t *next, int *strip_r)
{
	const char *c;

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
			return -1;
		*end = (size_t)(c - s) + 2;
		if (*end < n && s[*end] == '~') {
			*strip_r = 1;
			(*end)++;
		}
		*next = *end + 2;
		*end = (size_t)(c - s);
		return 0;
	}
	c = memmem(s + k, n - k, "}}", 2);
	if (!c)
		return -1;
	*end = (size_t)(c - s);
	*next = *end + 2;
	if (*end > k && s[*end - 1] == '~') {
		*strip_r = 1;
		(*end)--;
	}
	return 0;
}

/*
 * The kind of a tag that is not a comment, from its body s[*k..end) (past
 * the braces and any '~'); *k moves past the sigil ('#', '&', "else", ...).
 */
static enum core_status tag_kind(struct parser *P, size_t line, const char *s,
                                 size_t *k, size_t end, int triple,
                                 enum tag_type *type)
{
	while (*k < end && is_ws(s[*k]))
		(*k)++;
	if (triple || (*k < end && s[*k] == '&')) {
		*type = TG_VALUE;
		if (!triple)
			(*k)++;
	} else if (*k < end && (s[*k] == '#' || s[*k] == '/' || s[*k] == '^')) {
		*type = (enum tag_type)s[*k];
		(*k)++;
	} else if (*k < end && s[*k] == '>') {
		return perr(P, line, "partials are not supported ({{>...}})");
	} else if (*k < end && s[*k] == '*') {
		return perr(P, line, "decorators are not supported ({{*...}})");
	} else if (end - *k >= 4 && memcmp(s + *k, "else", 4) == 0 &&
	           (end - *k == 4 || is_ws(s[*k + 4]))) {
		*type = TG_ELSE;
		*k += 4;
	} else {
		*type = TG_VALUE;
	}
	if (*type == TG_INV) {
		size_t m = *k;
		while (m < end && is_ws(s[m]))
			m++;
		if (m == end)
			*type = TG_ELSE;    /* {{^}} is {{else}} */
	}
	return CORE_OK;
}

/* The tag whose "{{" is at i, pushed as a token; *next is the index past it. */
static enum core_status push_tag(struct parser *P, size_t i, size_t line,
                                 size_t *next)
{
	const char *s = P->src;
	size_t n = P->n, k = i + 2, end;
	int triple = 0, strip_l = 0, strip_r = 0;
	enum tag_type type = TG_VALUE;
	enum core_status st;
	struct tok *t;

	if (k < n && s[k] == '{') {
		triple = 1;
		k++;
	}
	if (k < n && s[k] == '~') {
		strip_l = 1;
		k++;
	}
	if (!triple && k < n && s[k] == '!') {
		type = TG_COMMENT;
		if (comment_close(s, n, k, &end, next, &strip_r) != 0)
			goto unclosed;
	} else {
		if (find_close(s, n, k, triple, &end) != 0)
			goto unclosed;
		*next = end + (triple ? 3 : 2);
		if (end > k && s[end - 1] == '~') {
			strip_r = 1;
			end--;
		}
		if ((st = tag_kind(P, line, s, &k, end, triple, &type)))
			return st;
	}
	if (!(t = tok_push(P)))
		return nomem(P->e);
	t->is_tag = 1;
	t->type = type;
	t->body = s + k;
	t->blen = end > k ? end - k : 0;
	t->line = line;
	t->strip_l = strip_l;
	t->strip_r = strip_r;
	return CORE_OK;
unclosed:
	return perr(P, line, "unclosed '%s' (no matching '%s')",
	            triple ? "{{{" : "{{", triple ? "}}}" : "}}");
}

static enum core_status tokenize(struct parser *P, size_t first_line)
{
	const char *s = P->src;
	size_t n = P->n, i = 0, line = first_line, txt_line = first_line;
	struct core_buf txt = CORE_BUF_INIT(TPL_MAX_SOURCE + 16);
	enum core_status st = CORE_OK;

	while (i < n) {
		const char *p = memmem(s + i, n - i, "{{", 2);
		size_t j = p ? (size_t)(p - s) : n, next = 0;

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
		if ((st = flush_text(P, &txt, txt_line)) ||
		    (st = push_tag(P, i, line, &next)))
			goto fail;
		line += count_nl(s + i, next - i);
		i = next;
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

int tpl_valid_role(const char *r)
{
	return !strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "model") ||
	       !strcmp(r, "tool");
}

const struct texpr *tpl_hash_get(const struct tnode *node, const char *key)
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
			if (!tpl_valid_role(json_string_value(r)))
				return perr(P, node->line,
				            "{{role}}: unknown role \"%s\" (expected \"system\", \"user\", \"model\" or \"tool\")",
				            json_string_value(r));
		} else if (node->params[0].undef) {
			return perr(P, node->line, "{{role}} needs a string, got undefined");
		}
		break;
	case H_MEDIA:
		if (!tpl_hash_get(node, "url"))
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
