/* jpatch_diff.c - the RFC 6902 patch between two compact documents, as
 * Genkit's aix.Diff writes it, and the minimal mode's array alignment; see
 * jpatch.h. */
#include "jpatch.h"
#include "jpatch_int.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dctx {
	struct core_buf *out;
	size_t nops;
	struct core_buf path;
	unsigned flags;
	struct core_err *e;
};

/* Write {"op":op,"path":<current path>,"value":value} (NULL for null),
 * as jv_dump() writes Genkit's operation. */
static enum core_status emit(struct dctx *c, const char *op,
                             const struct jn *value)
{
	enum core_status st;
	if ((c->nops && (st = core_buf_addc(c->out, ',')))
	    || (st = core_buf_adds(c->out, "{\"op\":\""))
	    || (st = core_buf_adds(c->out, op))
	    || (st = core_buf_adds(c->out, "\",\"path\":"))
	    || (st = jv_dump_string(c->path.len ? c->path.p : "", c->path.len, c->out))
	    || (st = core_buf_adds(c->out, ",\"value\":"))
	    || (st = value ? jn_dump(value, c->out) : core_buf_adds(c->out, "null"))
	    || (st = core_buf_addc(c->out, '}')))
		return st;
	c->nops++;
	return CORE_OK;
}

static enum core_status push_index(struct dctx *c, size_t i)
{
	char tmp[24], *q = tmp + sizeof tmp;
	do
		*--q = (char)('0' + i % 10);
	while (i /= 10);
	*--q = '/';
	return core_buf_add(&c->path, q, (size_t)(tmp + sizeof tmp - q));
}

struct key {
	const struct jn_mem *m;
	int side;           /* 0 from, 1 to */
};

static int key_cmp(const void *a, const void *b)
{
	const struct key *x = a, *y = b;
	size_t n = x->m->kn < y->m->kn ? x->m->kn : y->m->kn;
	int r = memcmp(x->m->k, y->m->k, n);
	if (r)
		return r;
	if (x->m->kn != y->m->kn)
		return x->m->kn < y->m->kn ? -1 : 1;
	return x->side - y->side;
}

static int same_key(const struct key *x, const struct key *y)
{
	return x->m->kn == y->m->kn && !memcmp(x->m->k, y->m->k, x->m->kn);
}

static enum core_status walk(struct dctx *c, const struct jn *from,
                             const struct jn *to, size_t depth);

/* Members of both objects sorted together (by key bytes, from before to):
 * a key in both is a pair, one alone a remove or an add. */
static enum core_status walk_object(struct dctx *c, const struct jn *from,
                                    const struct jn *to, size_t depth)
{
	size_t nf = jn_size(from), nt = jn_size(to), nk = 0;
	struct key *keys;
	enum core_status st = CORE_OK;

	if (!nf && !nt)
		return CORE_OK;
	if (!(keys = malloc((nf + nt) * sizeof *keys)))
		return CORE_ENOMEM;
	for (size_t i = 0; i < nf; i++)
		keys[nk++] = (struct key){ jn_mem_at(from, i), 0 };
	for (size_t i = 0; i < nt; i++)
		keys[nk++] = (struct key){ jn_mem_at(to, i), 1 };
	qsort(keys, nk, sizeof *keys, key_cmp);
	for (size_t i = 0; i < nk && !st; i++) {
		size_t mark = c->path.len;
		int pair = i + 1 < nk && same_key(&keys[i], &keys[i + 1]);
		if ((st = core_buf_addc(&c->path, '/'))
		    || (st = jpatch_escape_token(keys[i].m->k, keys[i].m->kn, &c->path)))
			break;
		if (pair)
			st = walk(c, &keys[i].m->v, &keys[i + 1].m->v, depth + 1), i++;
		else if (keys[i].side == 0)
			st = emit(c, "remove", NULL);
		else
			st = emit(c, "add", &keys[i].m->v);
		c->path.len = mark;
	}
	free(keys);
	return st;
}

/* Genkit's array rule: by index, appends as "/-", tail removed backwards. */
static enum core_status walk_array_index(struct dctx *c, const struct jn *from,
                                         const struct jn *to, size_t depth)
{
	size_t nf = jn_size(from), nt = jn_size(to);
	size_t common = nf < nt ? nf : nt, mark = c->path.len;
	enum core_status st = CORE_OK;

	for (size_t i = 0; i < common && !st; i++) {
		if (!(st = push_index(c, i)))
			st = walk(c, jn_at(from, i), jn_at(to, i), depth + 1);
		c->path.len = mark;
	}
	if (st)
		return st;
	if (nt > nf && (st = core_buf_add(&c->path, "/-", 2)))
		return st;
	for (size_t i = nf; i < nt && !st; i++)
		st = emit(c, "add", jn_at(to, i));
	c->path.len = mark;
	for (size_t i = nf; i > nt && !st; i--) {
		if (!(st = push_index(c, i - 1)))
			st = emit(c, "remove", NULL);
		c->path.len = mark;
	}
	return st;
}

/* ---- minimal mode: Myers' O(ND) alignment of array elements ---- */

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

static uint64_t bytes_hash(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
	return h;
}

/* A structural hash consistent with jn_equal (numbers by value, object
 * member order ignored). */
static uint64_t vhash(const struct jn *v, size_t depth)
{
	uint64_t h;
	size_t n = jn_size(v);
	if (depth > JPATCH_MAX_DEPTH)
		return 7;
	switch (v->t) {
	case JN_INT:
	case JN_REAL:
	case JN_BIG: {
		double d = v->t == JN_INT ? (double)v->u.i : v->u.d;
		uint64_t bits;
		int64_t i;
		if (v->t == JN_BIG)
			jv_read_number(v->u.s, v->n, &i, &d);
		if (d == 0)
			d = 0;  /* -0 == 0 */
		memcpy(&bits, &d, sizeof bits);
		return mix(bits ^ 0x9e3779b97f4a7c15ULL);
	}
	case JN_OBJ:
		h = 0x51;
		for (size_t i = 0; i < n; i++) {
			const struct jn_mem *m = jn_mem_at(v, i);
			h += mix(bytes_hash(m->k, m->kn) * 31 + vhash(&m->v, depth + 1));
		}
		return mix(h);
	case JN_ARR:
		h = 0xa7;
		for (size_t i = 0; i < n; i++)
			h = mix(h * 31 + vhash(jn_at(v, i), depth + 1));
		return h;
	case JN_STR:
		return mix(bytes_hash(v->u.s, v->n));
	case JN_TRUE:
		return 1;
	case JN_FALSE:
		return 2;
	default:
		return 3;
	}
}

struct seq {
	const struct jn **v;
	uint64_t *h;
};

static int seq_eq(const struct seq *a, size_t i, const struct seq *b, size_t j)
{
	return a->h[i] == b->h[j] && jn_equal(a->v[i], b->v[j]);
}

/* Edit operations of the alignment, in order. */
enum { E_MATCH, E_DEL, E_INS };

/*
 * Align a[0..n) with b[0..m) (both non-empty, no common prefix or
 * suffix).  On success *script holds the edits in order and *len their
 * count.  Gives up (returns 0, no error) when the edit distance passes
 * dmax: the caller then falls back to the index diff, so time stays
 * O((n + m) * dmax) and memory O(dmax^2).
 */
static int myers(const struct seq *a, size_t n, const struct seq *b, size_t m,
                 size_t dmax, unsigned char **script, size_t *len,
                 enum core_status *st)
{
	long N = (long)n, M = (long)m, D = -1, off;
	long lim = (long)dmax, *v, **trace;
	unsigned char *out;
	size_t outn = 0;

	*st = CORE_OK;
	if (lim > N + M)
		lim = N + M;
	off = lim + 1;
	v = calloc((size_t)(2 * off + 1), sizeof *v);
	trace = calloc((size_t)lim + 1, sizeof *trace);
	if (!v || !trace) {
		free(v);
		free(trace);
		*st = CORE_ENOMEM;
		return 0;
	}
	v[off + 1] = 0;
	for (long d = 0; d <= lim && D < 0; d++) {
		/* Keep V as it was before round d: V[-d-1 .. d+1]. */
		trace[d] = malloc((size_t)(2 * d + 3) * sizeof **trace);
		if (!trace[d]) {
			*st = CORE_ENOMEM;
			break;
		}
		memcpy(trace[d], v + off - d - 1, (size_t)(2 * d + 3) * sizeof *v);
		for (long k = -d; k <= d; k += 2) {
			long x, y;
			if (k == -d || (k != d && v[off + k - 1] < v[off + k + 1]))
				x = v[off + k + 1];
			else
				x = v[off + k - 1] + 1;
			y = x - k;
			while (x < N && y < M && seq_eq(a, (size_t)x, b, (size_t)y))
				x++, y++;
			v[off + k] = x;
			if (x >= N && y >= M) {
				D = d;
				break;
			}
		}
	}
	if (D >= 0 && (out = malloc((size_t)(N + M) + 1))) {
		/* Walk back from (N, M), writing the script back to front. */
		long x = N, y = M;
		size_t pos = (size_t)(N + M);
		for (long d = D; d >= 0; d--) {
			long *tv = trace[d] + d + 1; /* tv[k] == V[k] before round d */
			long k = x - y, pk, px, py;
			if (k == -d || (k != d && tv[k - 1] < tv[k + 1]))
				pk = k + 1;
			else
				pk = k - 1;
			px = tv[pk];
			py = px - pk;
			while (x > px && y > py) {
				out[--pos] = E_MATCH;
				x--, y--;
			}
			if (d > 0)
				out[--pos] = x == px ? E_INS : E_DEL;
			x = px, y = py;
		}
		outn = (size_t)(N + M) - pos;
		memmove(out, out + pos, outn);
		*script = out;
		*len = outn;
	} else if (D >= 0)
		*st = CORE_ENOMEM;
	for (long d = 0; d <= lim; d++)
		free(trace[d]);
	free(trace);
	free(v);
	return D >= 0 && !*st;
}

/*
 * The edit script of the middles a[0..n) and b[0..m) (not both empty):
 * Myers' within a work budget, else the alignment by index.  *script is
 * new (free() it), *len its length.
 */
static enum core_status edit_script(const struct seq *a, size_t n,
                                    const struct seq *b, size_t m,
                                    unsigned char **script, size_t *len)
{
	size_t budget, dmax;
	enum core_status st = CORE_OK;

	if (!n || !m) {
		/* Only deletions or only insertions. */
		if (!(*script = malloc(n + m + 1)))
			return CORE_ENOMEM;
		memset(*script, n ? E_DEL : E_INS, n + m);
		*len = n + m;
		return CORE_OK;
	}
	/*
	 * Work budget: about 2e7 element comparisons, at most 1024 edits.
	 * Myers only has to beat aligning the middle by index (a changed
	 * element costs a deletion and an insertion there), so the search
	 * stops at that cost: records edited in place never pay for it.
	 */
	budget = 20000000 / (n + m + 1);
	dmax = budget < 32 ? 32 : budget > 1024 ? 1024 : budget;
	size_t common = n < m ? n : m, icost = n > m ? n - m : m - n;
	for (size_t t = 0; t < common; t++)
		icost += seq_eq(a, t, b, t) ? 0 : 2;  /* >= 2: a[0] != b[0] */
	if (dmax >= icost)
		dmax = icost - 1;
	if (dmax && myers(a, n, b, m, dmax, script, len, &st))
		return CORE_OK;
	if (st)
		return st;
	/* The index alignment of the middle, as a script. */
	if (!(*script = malloc(2 * (n + m) + 1)))
		return CORE_ENOMEM;
	*len = 0;
	for (size_t t = 0; t < common; t++) {
		if (seq_eq(a, t, b, t))
			(*script)[(*len)++] = E_MATCH;
		else
			(*script)[(*len)++] = E_DEL, (*script)[(*len)++] = E_INS;
	}
	for (size_t t = common; t < n; t++)
		(*script)[(*len)++] = E_DEL;
	for (size_t t = common; t < m; t++)
		(*script)[(*len)++] = E_INS;
	return CORE_OK;
}

/*
 * Turn the script into operations, from index pre.  pos is the index in
 * the array as patched so far (elements before it already equal to[]).  A
 * run of deletions and insertions pairs its elements up front and diffs
 * them in place (a changed record becomes edits inside it), then removes
 * or inserts the rest.
 */
static enum core_status run_script(struct dctx *c, const struct seq *a,
                                   const struct seq *b, size_t pre,
                                   const unsigned char *script, size_t len,
                                   size_t depth)
{
	size_t pos = pre, i = pre, j = pre, s = 0, mark = c->path.len;
	enum core_status st = CORE_OK;

	while (s < len && !st) {
		size_t k = 0, ins = 0, p;
		if (script[s] == E_MATCH) {
			pos++, i++, j++, s++;
			continue;
		}
		while (s < len && script[s] != E_MATCH) {
			if (script[s] == E_DEL)
				k++;
			else
				ins++;
			s++;
		}
		p = k < ins ? k : ins;
		for (size_t t = 0; t < p && !st; t++) {
			if (!(st = push_index(c, pos + t)))
				st = walk(c, a->v[i + t], b->v[j + t], depth + 1);
			c->path.len = mark;
		}
		for (size_t t = p; t < k && !st; t++) {
			if (!(st = push_index(c, pos + p)))
				st = emit(c, "remove", NULL);
			c->path.len = mark;
		}
		for (size_t t = p; t < ins && !st; t++) {
			if (!(st = push_index(c, pos + t)))
				st = emit(c, "add", b->v[j + t]);
			c->path.len = mark;
		}
		pos += ins, i += k, j += ins;
	}
	return st;
}

static enum core_status walk_array_minimal(struct dctx *c, const struct jn *from,
                                           const struct jn *to, size_t depth)
{
	size_t nf = jn_size(from), nt = jn_size(to);
	size_t pre = 0, suf = 0, n, m, len = 0;
	struct seq a = { 0 }, b = { 0 };
	unsigned char *script = NULL;
	enum core_status st = CORE_OK;

	a.v = malloc((nf + 1) * sizeof *a.v);
	a.h = malloc((nf + 1) * sizeof *a.h);
	b.v = malloc((nt + 1) * sizeof *b.v);
	b.h = malloc((nt + 1) * sizeof *b.h);
	if (!a.v || !a.h || !b.v || !b.h) {
		st = CORE_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nf; i++) {
		a.v[i] = jn_at(from, i);
		a.h[i] = vhash(a.v[i], depth);
	}
	for (size_t i = 0; i < nt; i++) {
		b.v[i] = jn_at(to, i);
		b.h[i] = vhash(b.v[i], depth);
	}
	while (pre < nf && pre < nt && seq_eq(&a, pre, &b, pre))
		pre++;
	while (suf < nf - pre && suf < nt - pre
	       && seq_eq(&a, nf - 1 - suf, &b, nt - 1 - suf))
		suf++;
	n = nf - pre - suf;
	m = nt - pre - suf;
	if (!n && !m)
		goto out;
	{
		struct seq a2 = { a.v + pre, a.h + pre }, b2 = { b.v + pre, b.h + pre };
		if ((st = edit_script(&a2, n, &b2, m, &script, &len)))
			goto out;
	}
	st = run_script(c, &a, &b, pre, script, len, depth);
out:
	free(script);
	free(a.v);
	free(a.h);
	free(b.v);
	free(b.h);
	return st;
}

/*
 * Equal with members in the same order: most of two versions of a large
 * document is, and proving it in one ordered pass is much cheaper than
 * sorting the keys of every object to find nothing.  0 may still be equal
 * (members in another order, 1 against 1.0 inside); walk() then looks
 * closer.  Each level of walk() may scan again what the level above
 * scanned up to a difference, so walk() asks only in the top SAME_DEPTH
 * levels: at most that many passes over a document.
 */
#define SAME_DEPTH 32

static int same_ordered(const struct jn *a, const struct jn *b, size_t depth)
{
	size_t n = jn_size(a);
	if (a->t != b->t || n != jn_size(b) || depth > JPATCH_MAX_DEPTH)
		return 0;
	switch (a->t) {
	case JN_OBJ:
		for (size_t i = 0; i < n; i++) {
			const struct jn_mem *x = jn_mem_at(a, i), *y = jn_mem_at(b, i);
			if (x->kn != y->kn || memcmp(x->k, y->k, x->kn)
			    || !same_ordered(&x->v, &y->v, depth + 1))
				return 0;
		}
		return 1;
	case JN_ARR:
		for (size_t i = 0; i < n; i++)
			if (!same_ordered(jn_at(a, i), jn_at(b, i), depth + 1))
				return 0;
		return 1;
	default:
		return jn_equal(a, b);
	}
}

static enum core_status walk(struct dctx *c, const struct jn *from,
                             const struct jn *to, size_t depth)
{
	if (from == to)
		return CORE_OK;
	if (depth > JPATCH_MAX_DEPTH)
		return core_fail(c->e, CORE_EINVAL,
		                 "document nests deeper than %d levels",
		                 JPATCH_MAX_DEPTH);
	if (depth <= SAME_DEPTH && jp_is_container(from) && same_ordered(from, to, depth))
		return CORE_OK;
	if (from->t == JN_OBJ && to->t == JN_OBJ)
		return walk_object(c, from, to, depth);
	if (from->t == JN_ARR && to->t == JN_ARR) {
		if (c->flags & JPATCH_MINIMAL)
			return walk_array_minimal(c, from, to, depth);
		return walk_array_index(c, from, to, depth);
	}
	if (jn_equal(from, to))
		return CORE_OK;
	return emit(c, "replace", to);
}

enum core_status jpatch_diff_jn(const struct jn *from, const struct jn *to,
                                unsigned flags, struct core_buf *out,
                                size_t *nops, struct core_err *e)
{
	struct dctx c = { 0 };
	enum core_status st;

	c.out = out;
	c.flags = flags;
	c.e = e;
	core_buf_init(&c.path, CORE_BUF_UNLIMITED);
	if (!(st = core_buf_addc(out, '['))
	    && !(st = walk(&c, from, to, 0)))
		st = core_buf_addc(out, ']');
	core_buf_release(&c.path);
	*nops = c.nops;
	if (st == CORE_ENOMEM || st == CORE_ETOOBIG)
		return core_fail(e, st, "%s computing a patch", st == CORE_ENOMEM
		                 ? "out of memory" : "too large a patch");
	return st;
}

enum core_status jpatch_diff(const json_t *from, const json_t *to,
                             unsigned flags, json_t **patch,
                             struct core_err *e)
{
	struct jn a = JN_NULL_INIT, b = JN_NULL_INIT;
	struct core_buf out = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st;
	size_t nops;

	*patch = NULL;
	if ((from && (st = jn_from_json(from, &a))) || (to && (st = jn_from_json(to, &b))))
		core_fail(e, st, "out of memory computing a patch");
	else if (!(st = jpatch_diff_jn(&a, &b, flags, &out, &nops, e))
	         && !(*patch = jv_parse(out.p, out.len, "patch", 0, e)))
		st = e->st;
	jn_release(&a);
	jn_release(&b);
	core_buf_release(&out);
	return st;
}
