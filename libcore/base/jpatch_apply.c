/* jpatch_apply.c - applying a JSON Patch to a compact document in place:
 * strict RFC 6902 and Genkit's lenient applyOp, with the messages Genkit
 * gives; see jpatch.h. */
#include "jpatch.h"
#include "jpatch_int.h"
#include "utf8.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A reference token of a parsed pointer: bytes, not NUL-terminated. */
struct tok {
	const char *p;
	size_t n;
};

struct ptr {
	struct tok *t;
	size_t n;
	char *mem;          /* decoded token bytes */
};

static void ptr_release(struct ptr *p)
{
	free(p->t);
	free(p->mem);
	memset(p, 0, sizeof *p);
}

/* Printable as Go's strconv.Quote judges (IsPrint, roughly). */
static int go_printable(uint32_t c)
{
	if (c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0xa0) || c == 0xad)
		return 0;
	if ((c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f)
	    || (c >= 0x205f && c <= 0x206f) || c == 0x3000 || c == 0xfeff
	    || (c >= 0xfff9 && c <= 0xfffb) || c == 0xfffe || c == 0xffff)
		return 0;
	return 1;
}

/*
 * Quote s[0..n) for a message.  go != 0 renders Go's %q (strconv.Quote),
 * as Genkit's messages do; otherwise 'single quotes' with control bytes
 * escaped.  Never fails: a buffer that cannot grow is cut short.
 */
static void quote(struct core_buf *b, const char *s, size_t n, int go)
{
	const unsigned char *u = (const unsigned char *)s;
	char q = go ? '"' : '\'';
	size_t i = 0, len;
	uint32_t cp;
	core_buf_reset(b);
	core_buf_addc(b, q);
	while (i < n) {
		unsigned char c = u[i];
		len = utf8_decode(u + i, n - i, &cp);
		if (!len) {
			core_buf_addf(b, "\\x%02x", c);
			i++;
			continue;
		}
		if (cp == (uint32_t)q || cp == '\\')
			core_buf_addc(b, '\\'), core_buf_addc(b, (char)cp);
		else if (cp == '\n')
			core_buf_adds(b, "\\n");
		else if (cp == '\t')
			core_buf_adds(b, "\\t");
		else if (cp == '\r')
			core_buf_adds(b, "\\r");
		else if (go && cp == '\a')
			core_buf_adds(b, "\\a");
		else if (go && cp == '\b')
			core_buf_adds(b, "\\b");
		else if (go && cp == '\f')
			core_buf_adds(b, "\\f");
		else if (go && cp == '\v')
			core_buf_adds(b, "\\v");
		else if (cp < 0x80 && !go_printable(cp))
			core_buf_addf(b, "\\x%02x", (unsigned)cp);
		else if (go && !go_printable(cp))
			core_buf_addf(b, cp > 0xffff ? "\\U%08x" : "\\u%04x",
			              (unsigned)cp);
		else
			core_buf_add(b, s + i, len);
		i += len;
	}
	core_buf_addc(b, q);
}

enum opkind { OP_ADD, OP_REMOVE, OP_REPLACE, OP_MOVE, OP_COPY, OP_TEST, OP_BAD };

static const char *const op_names[] = {
	"add", "remove", "replace", "move", "copy", "test"
};

struct op {
	enum opkind kind;
	const char *name;           /* the "op" text (may be unknown) */
	size_t name_n;
	const char *path, *from;    /* raw pointer texts */
	size_t path_n, from_n;
	const struct jn *value;     /* borrowed from the patch; NULL = null */
	struct ptr pp, fp;
	int skip;                   /* lenient: a null operation */
};

struct actx {
	unsigned flags;
	size_t opi;
	const struct op *op;
	struct core_err *e;
	struct core_buf q1, q2;
};

static enum core_status afail(struct actx *c, enum core_status st,
                              const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static enum core_status afail(struct actx *c, enum core_status st,
                              const char *fmt, ...)
{
	char msg[900];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return core_fail(c->e, st, "patch op %zu: %s", c->opi, msg);
}

static const char *q(struct actx *c, struct core_buf *b, const char *s,
                     size_t n)
{
	quote(b, s, n, (c->flags & JPATCH_LENIENT) != 0);
	return b->p ? b->p : "''";
}

static const char *qpath(struct actx *c)
{
	return q(c, &c->q1, c->op->path, c->op->path_n);
}

/*
 * Split a pointer into unescaped tokens.  Strict: RFC 6901 ("~" must be
 * followed by "0" or "1").  Lenient: Genkit's rules ("~1" then "~0"
 * replaced; any other "~" kept).
 */
static enum core_status parse_ptr(struct actx *c, const char *s, size_t n,
                                  struct ptr *p, const char *what)
{
	size_t nt = 0, i;
	char *w;
	int lenient = (c->flags & JPATCH_LENIENT) != 0;

	memset(p, 0, sizeof *p);
	if (!n)
		return CORE_OK;
	if (s[0] != '/') {
		if (lenient)
			return afail(c, CORE_EINVAL,
			             "jsonpatch: invalid JSON Pointer %s: must start with \"/\"",
			             q(c, &c->q2, s, n));
		return afail(c, CORE_EINVAL,
		             "invalid JSON pointer %s in '%s': must be empty or start with '/'",
		             q(c, &c->q2, s, n), what);
	}
	for (i = 0; i < n; i++)
		nt += s[i] == '/';
	if (nt > JPATCH_MAX_DEPTH)
		return afail(c, CORE_EINVAL, "'%s' has more than %d tokens",
		             what, JPATCH_MAX_DEPTH);
	p->t = malloc(nt * sizeof *p->t);
	p->mem = malloc(n);
	if (!p->t || !p->mem) {
		ptr_release(p);
		return core_fail(c->e, CORE_ENOMEM, "out of memory");
	}
	w = p->mem;
	for (i = 1; i <= n; i++) {
		const char *start = w;
		while (i < n && s[i] != '/') {
			if (s[i] == '~' && i + 1 < n && (s[i + 1] == '0' || s[i + 1] == '1')) {
				*w++ = s[i + 1] == '0' ? '~' : '/';
				i += 2;
			} else if (s[i] == '~' && !lenient) {
				enum core_status st = afail(c, CORE_EINVAL,
				        "invalid JSON pointer %s in '%s': '~' must be followed by '0' or '1'",
				        q(c, &c->q2, s, n), what);
				ptr_release(p);
				return st;
			} else
				*w++ = s[i++];
		}
		p->t[p->n++] = (struct tok){ start, (size_t)(w - start) };
	}
	return CORE_OK;
}

/* Strict array index: "0" or a digit string without leading zeros. */
static int strict_index(const struct tok *t, size_t *idx)
{
	size_t v = 0;
	if (!t->n || (t->p[0] == '0' && t->n > 1))
		return 0;
	for (size_t i = 0; i < t->n; i++) {
		if (t->p[i] < '0' || t->p[i] > '9')
			return 0;
		if (v > ((size_t)-1 - 9) / 10)
			return 0;
		v = v * 10 + (size_t)(t->p[i] - '0');
	}
	*idx = v;
	return 1;
}

/*
 * Genkit's arrayIndex: Go's strconv.Atoi (an optional sign, then digits,
 * within int64), negative rejected; "-" is the length when allow_end.
 */
static int lenient_index(const struct tok *t, size_t len, int allow_end,
                         size_t *idx)
{
	size_t i = 0;
	uint64_t v = 0;
	int neg = 0;
	if (t->n == 1 && t->p[0] == '-') {
		*idx = len;
		return allow_end;
	}
	if (t->n && (t->p[0] == '+' || t->p[0] == '-'))
		neg = t->p[0] == '-', i = 1;
	if (i == t->n)
		return 0;
	for (; i < t->n; i++) {
		if (t->p[i] < '0' || t->p[i] > '9')
			return 0;
		if (v > (UINT64_C(9223372036854775808) - 9) / 10 + 1)
			return 0;
		v = v * 10 + (uint64_t)(t->p[i] - '0');
		if (v > UINT64_C(9223372036854775808))
			return 0;
	}
	if (neg ? v > 0 : v > UINT64_C(9223372036854775807))
		return 0;   /* negative, or past int64 */
	*idx = v > SIZE_MAX ? SIZE_MAX : (size_t)v;
	return 1;
}

/* ---- reading an operation ---- */

static int ascii_ieq(const char *a, size_t an, const char *b)
{
	size_t bn = strlen(b);
	if (an != bn)
		return 0;
	for (size_t i = 0; i < an; i++) {
		char x = a[i], y = b[i];
		if (x >= 'A' && x <= 'Z')
			x = (char)(x - 'A' + 'a');
		if (x != y)
			return 0;
	}
	return 1;
}

/*
 * The members op, path, from, value of an operation object.  Strict: exact
 * names.  Lenient: as Go's encoding/json fills Genkit's struct: names match
 * case-insensitively, a later member wins, null leaves a string unset.
 */
static void read_member(struct actx *c, const struct jn *o, const char *name,
                        const struct jn **out, int *present)
{
	size_t n = jn_size(o);
	*present = 0;
	*out = NULL;
	if (!(c->flags & JPATCH_LENIENT)) {
		const struct jn *v = jn_get(o, name, strlen(name));
		if (v) {
			*present = 1;
			*out = v;
		}
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct jn_mem *m = jn_mem_at(o, i);
		if (!ascii_ieq(m->k, m->kn, name))
			continue;
		if (m->v.t == JN_NULL && strcmp(name, "value"))
			continue;
		*present = 1;
		*out = &m->v;
	}
}

static enum core_status read_string(struct actx *c, const struct jn *o,
                                    const char *name, const char **s,
                                    size_t *n, int required)
{
	const struct jn *v;
	int present;
	read_member(c, o, name, &v, &present);
	*s = "";
	*n = 0;
	if (!present) {
		if (required && !(c->flags & JPATCH_LENIENT))
			return afail(c, CORE_EINVAL, "missing '%s'", name);
		return CORE_OK;
	}
	if (v->t != JN_STR)
		return afail(c, CORE_EINVAL, "'%s' must be a string, not %s", name,
		             jn_type_name(v));
	*s = v->n ? v->u.s : "";
	*n = v->n;
	return CORE_OK;
}

static enum core_status read_op(struct actx *c, const struct jn *o, struct op *op)
{
	enum core_status st;
	int lenient = (c->flags & JPATCH_LENIENT) != 0, present;

	memset(op, 0, sizeof *op);
	c->op = op;
	if (lenient && o->t == JN_NULL) {
		op->skip = 1;
		return CORE_OK;
	}
	if (o->t != JN_OBJ)
		return afail(c, CORE_EINVAL, "must be an object, not %s",
		             jn_type_name(o));
	if ((st = read_string(c, o, "op", &op->name, &op->name_n, 1))
	    || (st = read_string(c, o, "path", &op->path, &op->path_n, 1)))
		return st;
	op->kind = OP_BAD;
	for (int k = 0; k < OP_BAD; k++)
		if (op->name_n == strlen(op_names[k])
		    && !memcmp(op->name, op_names[k], op->name_n))
			op->kind = (enum opkind)k;
	if (op->kind == OP_BAD && !lenient)
		return afail(c, CORE_EINVAL, "unknown op %s",
		             q(c, &c->q2, op->name, op->name_n));
	/* Go type-checks "from" whatever the op; RFC 6902 reads it for move
	 * and copy only. */
	if ((lenient || op->kind == OP_MOVE || op->kind == OP_COPY)
	    && (st = read_string(c, o, "from", &op->from, &op->from_n, 1)))
		return st;
	read_member(c, o, "value", &op->value, &present);
	if (!present && !lenient
	    && (op->kind == OP_ADD || op->kind == OP_REPLACE || op->kind == OP_TEST))
		return afail(c, CORE_EINVAL, "missing 'value'");
	if (op->value && op->value->t == JN_NULL)
		op->value = NULL;
	/* Genkit parses the path before it looks at the op. */
	if ((st = parse_ptr(c, op->path, op->path_n, &op->pp, "path")))
		return st;
	if (op->kind == OP_BAD)
		return afail(c, CORE_EINVAL, "jsonpatch: unsupported op %s",
		             q(c, &c->q2, op->name, op->name_n));
	if ((op->kind == OP_MOVE || op->kind == OP_COPY)
	    && (st = parse_ptr(c, op->from, op->from_n, &op->fp, "from")))
		return st;
	if (op->value && op->pp.n + jp_depth_of(op->value, JPATCH_MAX_DEPTH)
	                 > JPATCH_MAX_DEPTH)
		return afail(c, CORE_EINVAL,
		             "the value would nest deeper than %d levels",
		             JPATCH_MAX_DEPTH);
	return CORE_OK;
}

static enum core_status oom(struct actx *c)
{
	return core_fail(c->e, CORE_ENOMEM, "out of memory");
}

/* A copy of the op's value for the document: every string owned, since a
 * patch read from a stream line does not outlive it. */
static enum core_status value_copy(struct actx *c, struct jn *out)
{
	*out = (struct jn)JN_NULL_INIT;
	if (c->op->value && jn_copy(c->op->value, 1, out))
		return oom(c);
	return CORE_OK;
}

/* Set *slot to v (taken), releasing what was there. */
static void put(struct jn *slot, struct jn v)
{
	jn_release(slot);
	*slot = v;
}

static enum core_status mem_status(struct actx *c, enum core_status st)
{
	if (st == CORE_ETOOBIG)
		return afail(c, st, "a container would hold more than %zu members",
		             JN_MAX_LEN);
	return st ? oom(c) : CORE_OK;
}

/* ---- strict (RFC 6902) ---- */

/* The value at t[0..n) or NULL. */
static struct jn *sget(struct jn *root, const struct tok *t, size_t n)
{
	struct jn *cur = root;
	for (size_t i = 0; i < n && cur; i++) {
		if (cur->t == JN_OBJ)
			cur = jn_get(cur, t[i].p, t[i].n);
		else if (cur->t == JN_ARR) {
			size_t idx;
			if (!strict_index(&t[i], &idx) || idx >= jn_size(cur))
				return NULL;
			cur = jn_at(cur, idx);
		} else
			return NULL;
	}
	return cur;
}

/* sget() on the way to a change: every container it passes, and the one
 * it finds, is marked changed (jn_touch(): jn_redump() writes it anew). */
static struct jn *sget_w(struct jn *root, const struct tok *t, size_t n)
{
	struct jn *cur = root;
	for (size_t i = 0; cur; i++) {
		jn_touch(cur);
		if (i == n)
			break;
		cur = sget(cur, &t[i], 1);
	}
	return cur;
}

static enum core_status not_found(struct actx *c, const char *s, size_t n)
{
	return afail(c, CORE_EINVAL, "path %s does not exist", q(c, &c->q2, s, n));
}

/* The length of raw's text for its first k tokens ("" for the root). */
static size_t raw_prefix(const char *raw, size_t rawn, size_t k)
{
	size_t i, seen = 0;
	for (i = 0; i < rawn; i++)
		if (raw[i] == '/' && seen++ == k)
			break;
	return i;
}

/*
 * An add whose target has no container to go in: name what is wrong, the
 * first missing ancestor or the one that is not a container (the document
 * itself when it is null, as a custom state is before its first update).
 */
static enum core_status no_parent(struct actx *c, struct jn *doc, const struct ptr *p,
                                  const char *raw, size_t rawn)
{
	struct jn *cur = doc, *next;
	size_t k;
	for (k = 0; k + 1 < p->n; k++, cur = next) {
		if (!(next = sget(cur, &p->t[k], 1)))
			break;
	}
	if (cur->t != JN_OBJ && cur->t != JN_ARR) {
		const char *a = cur->t == JN_NULL ? "" : "a ";
		if (!k)
			return afail(c, CORE_EINVAL, "path %s: the document is %s%s, not an object or array",
			             q(c, &c->q1, raw, rawn), a, jn_type_name(cur));
		return afail(c, CORE_EINVAL, "path %s: %s is %s%s, not an object or array",
		             q(c, &c->q1, raw, rawn), q(c, &c->q2, raw, raw_prefix(raw, rawn, k)),
		             a, jn_type_name(cur));
	}
	return afail(c, CORE_EINVAL, "path %s: %s does not exist", q(c, &c->q1, raw, rawn),
	             q(c, &c->q2, raw, raw_prefix(raw, rawn, k + 1)));
}

/* Add value (taken) at p: RFC 6902 4.1. */
static enum core_status sadd(struct actx *c, struct jn *doc, const struct ptr *p,
                             const char *raw, size_t rawn, struct jn value)
{
	struct jn *parent;
	const struct tok *last;
	if (!p->n) {
		put(doc, value);
		return CORE_OK;
	}
	last = &p->t[p->n - 1];
	parent = sget_w(doc, p->t, p->n - 1);
	if (parent && parent->t == JN_OBJ)
		return mem_status(c, jn_set(parent, last->p, last->n, value));
	if (parent && parent->t == JN_ARR) {
		size_t idx, len = jn_size(parent);
		if (last->n == 1 && last->p[0] == '-')
			idx = len;
		else if (!strict_index(last, &idx)) {
			jn_release(&value);
			return afail(c, CORE_EINVAL, "path %s: %s is not an array index",
			             q(c, &c->q1, raw, rawn),
			             q(c, &c->q2, last->p, last->n));
		} else if (idx > len) {
			jn_release(&value);
			return afail(c, CORE_EINVAL,
			             "path %s: index %zu is out of range (the array has %zu elements)",
			             q(c, &c->q1, raw, rawn), idx, len);
		}
		return mem_status(c, jn_insert(parent, idx, value));
	}
	jn_release(&value);
	return no_parent(c, doc, p, raw, rawn);
}

/* Remove the value at p, into *out when out is set (a move). */
static enum core_status sremove(struct actx *c, struct jn *doc, const struct ptr *p,
                                const char *raw, size_t rawn, struct jn *out)
{
	struct jn *parent;
	const struct tok *last;
	size_t idx;
	if (!p->n)
		return afail(c, CORE_EINVAL, "cannot remove the whole document");
	last = &p->t[p->n - 1];
	parent = sget_w(doc, p->t, p->n - 1);
	if (parent && parent->t == JN_OBJ) {
		if (!jn_del(parent, last->p, last->n, out))
			return not_found(c, raw, rawn);
		return CORE_OK;
	}
	if (parent && parent->t == JN_ARR && strict_index(last, &idx)
	    && idx < jn_size(parent)) {
		jn_remove(parent, idx, out);
		return CORE_OK;
	}
	return not_found(c, raw, rawn);
}

static enum core_status sreplace(struct actx *c, struct jn *doc,
                                 const struct ptr *p, struct jn value)
{
	struct jn *v = sget_w(doc, p->t, p->n);  /* the root always exists */
	if (v) {
		put(v, value);
		return CORE_OK;
	}
	jn_release(&value);
	return not_found(c, c->op->path, c->op->path_n);
}

static int tok_eq(const struct tok *a, const struct tok *b)
{
	return a->n == b->n && !memcmp(a->p, b->p, a->n);
}

static enum core_status apply_strict(struct actx *c, struct jn *doc,
                                     const struct op *op)
{
	const struct jn null = JN_NULL_INIT;
	struct jn *v, val;
	enum core_status st;
	switch (op->kind) {
	case OP_ADD:
		if ((st = value_copy(c, &val)))
			return st;
		return sadd(c, doc, &op->pp, op->path, op->path_n, val);
	case OP_REMOVE:
		return sremove(c, doc, &op->pp, op->path, op->path_n, NULL);
	case OP_REPLACE:
		if ((st = value_copy(c, &val)))
			return st;
		return sreplace(c, doc, &op->pp, val);
	case OP_TEST:
		v = sget(doc, op->pp.t, op->pp.n);
		if (!v)
			return afail(c, CORE_FAILED, "test failed: path %s does not exist",
			             qpath(c));
		if (!jn_equal(v, op->value ? op->value : &null))
			return afail(c, CORE_FAILED, "test failed at %s", qpath(c));
		return CORE_OK;
	case OP_COPY:
	case OP_MOVE:
		v = sget(doc, op->fp.t, op->fp.n);
		if (!v)
			return afail(c, CORE_EINVAL, "'from' path %s does not exist",
			             q(c, &c->q2, op->from, op->from_n));
		if (op->pp.n + jp_depth_of(v, JPATCH_MAX_DEPTH) > JPATCH_MAX_DEPTH)
			return afail(c, CORE_EINVAL,
			             "the value would nest deeper than %d levels",
			             JPATCH_MAX_DEPTH);
		if (op->kind == OP_COPY) {
			if (jn_copy(v, 0, &val))
				return oom(c);
			return sadd(c, doc, &op->pp, op->path, op->path_n, val);
		}
		if (op->fp.n <= op->pp.n) {
			size_t i = 0;
			while (i < op->fp.n && tok_eq(&op->fp.t[i], &op->pp.t[i]))
				i++;
			if (i == op->fp.n && op->fp.n == op->pp.n)
				return CORE_OK;     /* moving a value onto itself */
			if (i == op->fp.n)
				return afail(c, CORE_EINVAL,
				             "cannot move %s into its own child %s",
				             q(c, &c->q2, op->from, op->from_n), qpath(c));
		}
		if ((st = sremove(c, doc, &op->fp, op->from, op->from_n, &val)))
			return st;
		jn_unplace(&val);       /* a new parent: its old place says nothing */
		return sadd(c, doc, &op->pp, op->path, op->path_n, val);
	default:
		return afail(c, CORE_EINVAL, "unknown op");
	}
}

/* ---- lenient (Genkit's applyOp) ---- */

static int lenient_get_index(const struct jn *arr, const struct tok *t, size_t *idx)
{
	return lenient_index(t, jn_size(arr), 0, idx) && *idx < jn_size(arr);
}

static struct jn *lget(struct jn *node, const struct tok *t, size_t n)
{
	struct jn *cur = node;
	for (size_t i = 0; i < n; i++) {
		size_t idx;
		if (cur->t == JN_OBJ)
			cur = jn_get(cur, t[i].p, t[i].n);
		else if (cur->t == JN_ARR && lenient_get_index(cur, &t[i], &idx))
			cur = jn_at(cur, idx);
		else
			return NULL;
		if (!cur)
			return NULL;
	}
	return cur;
}

/* setMember: value taken. */
static enum core_status lset_member(struct jn *node, const struct tok *t,
                                    struct jn value, int is_add)
{
	size_t idx, len;
	if (node->t == JN_ARR) {
		len = jn_size(node);
		if (t->n == 1 && t->p[0] == '-')
			return jn_insert(node, len, value);
		if (!lenient_index(t, len, is_add, &idx)
		    || (is_add ? idx > len : idx >= len)) {
			jn_release(&value);
			return CORE_OK;
		}
		if (is_add)
			return jn_insert(node, idx, value);
		put(jn_at(node, idx), value);
		return CORE_OK;
	}
	if (node->t != JN_OBJ)
		put(node, jn_container(JN_OBJ));
	return jn_set(node, t->p, t->n, value);
}

/* setPath: value taken; the node is changed in place. */
static enum core_status lset(struct jn *node, const struct tok *t, size_t n,
                             struct jn value, int is_add)
{
	struct jn *child;
	enum core_status st;
	size_t idx;
	jn_touch(node);         /* for jn_redump(), as sget_w() */
	if (!n) {
		put(node, value);
		return CORE_OK;
	}
	if (node->t == JN_NULL)
		*node = jn_container(JN_OBJ);
	if (n == 1)
		return lset_member(node, t, value, is_add);
	if (node->t == JN_ARR) {
		if (!lenient_get_index(node, t, &idx)) {
			jn_release(&value);
			return CORE_OK;
		}
		child = jn_at(node, idx);
		if (!jp_is_container(child))
			put(child, jn_container(JN_OBJ));
		return lset(child, t + 1, n - 1, value, is_add);
	}
	/* A scalar where a container is needed becomes an object. */
	if (node->t != JN_OBJ)
		put(node, jn_container(JN_OBJ));
	child = jn_get(node, t->p, t->n);
	if (!child || !jp_is_container(child)) {
		if ((st = jn_set(node, t->p, t->n, jn_container(JN_OBJ)))) {
			jn_release(&value);
			return st;
		}
		child = jn_get(node, t->p, t->n);
	}
	return lset(child, t + 1, n - 1, value, is_add);
}

/* removePath: in place; the root removed becomes null. */
static void lremove(struct jn *node, const struct tok *t, size_t n)
{
	struct jn *child;
	size_t idx;
	jn_touch(node);
	if (!n) {
		jn_release(node);
		return;
	}
	if (n == 1) {
		if (node->t == JN_OBJ)
			jn_del(node, t->p, t->n, NULL);
		else if (node->t == JN_ARR && lenient_get_index(node, t, &idx))
			jn_remove(node, idx, NULL);
		return;
	}
	if (node->t == JN_OBJ) {
		if ((child = jn_get(node, t->p, t->n)))
			lremove(child, t + 1, n - 1);
	} else if (node->t == JN_ARR && lenient_get_index(node, t, &idx))
		lremove(jn_at(node, idx), t + 1, n - 1);
}

static enum core_status apply_lenient(struct actx *c, struct jn *doc,
                                      const struct op *op)
{
	const struct jn null = JN_NULL_INIT;
	struct jn *v, val = JN_NULL_INIT;
	enum core_status st;
	switch (op->kind) {
	case OP_ADD:
	case OP_REPLACE:
		if ((st = value_copy(c, &val)))
			return st;
		return mem_status(c, lset(doc, op->pp.t, op->pp.n, val,
		                          op->kind == OP_ADD));
	case OP_REMOVE:
		lremove(doc, op->pp.t, op->pp.n);
		return CORE_OK;
	case OP_TEST:
		v = lget(doc, op->pp.t, op->pp.n);
		if (!jn_equal(v ? v : &null, op->value ? op->value : &null))
			return afail(c, CORE_FAILED, "jsonpatch: test failed at %s",
			             qpath(c));
		return CORE_OK;
	case OP_MOVE:
	case OP_COPY:
		v = lget(doc, op->fp.t, op->fp.n);
		if (v && op->pp.n + jp_depth_of(v, JPATCH_MAX_DEPTH) > JPATCH_MAX_DEPTH)
			return afail(c, CORE_EINVAL,
			             "the value would nest deeper than %d levels",
			             JPATCH_MAX_DEPTH);
		if (v && jn_copy(v, 0, &val))
			return oom(c);
		if (op->kind == OP_MOVE)
			lremove(doc, op->fp.t, op->fp.n);
		return mem_status(c, lset(doc, op->pp.t, op->pp.n, val, 1));
	default:
		return afail(c, CORE_EINVAL, "jsonpatch: unsupported op %s",
		             q(c, &c->q2, op->name, op->name_n));
	}
}

/*
 * Atomicity.  Every malformed operation is caught while reading the patch,
 * before the document is touched.  What is left can fail only at run time:
 * in strict mode any operation (a missing path), a move even after its
 * removal; in lenient mode a test, and a move or copy that would nest too
 * deep.  When such an operation comes after a change, the patch runs on a
 * copy so that a failure leaves the caller's document as it was.
 */
static int needs_copy(const struct op *ops, size_t n, unsigned flags)
{
	int changed = 0;
	if (flags & JPATCH_INPLACE)
		return 0;
	for (size_t i = 0; i < n; i++) {
		int can_fail;
		if (ops[i].skip)
			continue;
		if (flags & JPATCH_LENIENT)
			can_fail = ops[i].kind == OP_TEST || ops[i].kind == OP_MOVE
			           || ops[i].kind == OP_COPY;
		else
			can_fail = 1;
		if (can_fail && (changed || ops[i].kind == OP_MOVE))
			return 1;
		if (ops[i].kind != OP_TEST)
			changed = 1;
	}
	return 0;
}

enum core_status jpatch_apply_jn(struct jn *doc, const struct jn *patch,
                                 unsigned flags, struct core_err *e)
{
	struct actx c = { 0 };
	struct op *ops = NULL;
	size_t n = 0, i;
	enum core_status st = CORE_OK;
	struct jn copy, *work = doc;

	c.flags = flags;
	c.e = e;
	core_buf_init(&c.q1, 4096);
	core_buf_init(&c.q2, 4096);
	if (patch->t != JN_ARR) {
		st = core_fail(e, CORE_EINVAL, "a patch must be an array, not %s",
		               jn_type_name(patch));
		goto out;
	}
	n = jn_size(patch);
	if (n && !(ops = calloc(n, sizeof *ops))) {
		st = core_fail(e, CORE_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n && !st; i++) {
		c.opi = i;
		st = read_op(&c, jn_at(patch, i), &ops[i]);
	}
	if (st)
		goto out;

	if (needs_copy(ops, n, flags)) {
		if (jn_copy(doc, 0, &copy)) {
			st = core_fail(e, CORE_ENOMEM, "out of memory");
			goto out;
		}
		work = &copy;
	}
	for (i = 0; i < n && !st; i++) {
		if (ops[i].skip)
			continue;
		c.opi = i;
		c.op = &ops[i];
		st = (flags & JPATCH_LENIENT) ? apply_lenient(&c, work, &ops[i])
		                              : apply_strict(&c, work, &ops[i]);
	}
	if (work == &copy) {
		/* on error the copy goes; the caller's document is intact */
		if (!st)
			put(doc, copy);
		else
			jn_release(&copy);
	}
out:
	for (i = 0; ops && i < n; i++) {
		ptr_release(&ops[i].pp);
		ptr_release(&ops[i].fp);
	}
	free(ops);
	core_buf_release(&c.q1);
	core_buf_release(&c.q2);
	return st;
}

enum core_status jpatch_apply(json_t **doc, const json_t *patch,
                              unsigned flags, struct core_err *e)
{
	struct jn d = JN_NULL_INIT, p = JN_NULL_INIT;
	enum core_status st;
	json_t *r;

	if ((*doc && (st = jn_from_json(*doc, &d))) || (st = jn_from_json(patch, &p)))
		core_fail(e, st, "out of memory");
	else if (!(st = jpatch_apply_jn(&d, &p, flags | JPATCH_INPLACE, e))) {
		if ((r = jn_to_json(&d))) {
			json_decref(*doc);
			*doc = r;
		} else
			st = core_fail(e, CORE_ENOMEM, "out of memory");
	}
	jn_release(&d);
	jn_release(&p);
	return st;
}
