/*
 * jfast.c - compact JSON documents and the fast path of jv_parse(); see
 * jfast.h.
 *
 * One unit on purpose: the parser builds containers straight into the
 * boxes (members, key index) that the container operations below grow and
 * search, with the allocator at the end of the file; apart, the box layout
 * and the allocator hooks would become an interface for three files.
 */
#include "jfast.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "json.h"
#include "json_int.h"
#include "utf8.h"

/* Stay well inside jansson's own limit, and let it judge anything deeper. */
#define FAST_MAX_DEPTH (JSON_PARSER_MAX_DEPTH - 16)

/* Strings a compacting parse remembers, to keep one copy of each. */
#define SEEN_SLOTS 256
#define SEEN_MAX 32             /* longest string looked up */

struct fp {
	const char *p, *end;
	char *scratch;          /* unescaped string bytes */
	size_t cap;
	int bigs;               /* numbers jansson alone would refuse */
	/* Compacting (jn_load_file()): the strings' bytes are moved down
	 * to w, in the text itself, and the pages the parse has left
	 * behind are given back; NULL otherwise. */
	char *w;
	const char *given;      /* the text below it is given back */
	struct seen { const char *s; size_t n; } *seen;    /* SEEN_SLOTS */
};

static void ws(struct fp *f)
{
	while (f->p < f->end && (*f->p == ' ' || *f->p == '\n' || *f->p == '\r'
	                         || *f->p == '\t'))
		f->p++;
}

/* After an object's member or an array's element: 1 when a ',' says
 * another follows, 0 when close ends the container, -1 on anything else. */
static int next_item(struct fp *f, char close)
{
	ws(f);
	if (f->p >= f->end)
		return -1;
	if (*f->p == close) {
		f->p++;
		return 0;
	}
	if (*f->p != ',')
		return -1;
	f->p++;
	ws(f);
	return 1;
}

static int hex4(const char *p, uint32_t *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			*v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			*v |= (uint32_t)(c - 'A' + 10);
		else
			return 0;
	}
	return 1;
}

static int put(struct fp *f, size_t *len, const char *s, size_t n)
{
	if (!n)
		return 1;
	if (*len + n > f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 256;
		char *q;
		while (cap < *len + n)
			cap *= 2;
		if (!(q = realloc(f->scratch, cap)))
			return 0;
		f->scratch = q;
		f->cap = cap;
	}
	memcpy(f->scratch + *len, s, n);
	*len += n;
	return 1;
}

/* Code point u as UTF-8 onto the scratch bytes. */
static inline int put_utf8(struct fp *f, size_t *len, uint32_t u)
{
	char out[4];

	if (u < 0x80) {
		out[0] = (char)u;
		return put(f, len, out, 1);
	}
	if (u < 0x800) {
		out[0] = (char)(0xc0 | (u >> 6));
		out[1] = (char)(0x80 | (u & 0x3f));
		return put(f, len, out, 2);
	}
	if (u < 0x10000) {
		out[0] = (char)(0xe0 | (u >> 12));
		out[1] = (char)(0x80 | ((u >> 6) & 0x3f));
		out[2] = (char)(0x80 | (u & 0x3f));
		return put(f, len, out, 3);
	}
	out[0] = (char)(0xf0 | (u >> 18));
	out[1] = (char)(0x80 | ((u >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((u >> 6) & 0x3f));
	out[3] = (char)(0x80 | (u & 0x3f));
	return put(f, len, out, 4);
}

/*
 * The escape at f->p (its backslash) onto the scratch bytes, f->p past it;
 * 0 on a bad or cut-off escape, a lone or unpaired surrogate.
 */
static inline int escape(struct fp *f, size_t *len)
{
	char e, c;
	uint32_t u, lo;

	if (f->end - f->p < 2)
		return 0;
	e = f->p[1];
	f->p += 2;
	switch (e) {
	case '"': case '\\': case '/':
		c = e;
		break;
	case 'b': c = '\b'; break;
	case 'f': c = '\f'; break;
	case 'n': c = '\n'; break;
	case 'r': c = '\r'; break;
	case 't': c = '\t'; break;
	case 'u':
		if (f->end - f->p < 4 || !hex4(f->p, &u))
			return 0;
		f->p += 4;
		if (u >= 0xdc00 && u <= 0xdfff)
			return 0;
		if (u >= 0xd800 && u <= 0xdbff) {
			if (f->end - f->p < 6 || f->p[0] != '\\' || f->p[1] != 'u'
			    || !hex4(f->p + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
				return 0;
			f->p += 6;
			u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
		}
		return put_utf8(f, len, u);
	default:
		return 0;
	}
	return put(f, len, &c, 1);
}

/*
 * Skip the plain bytes at f->p, eight at a time: no quote, backslash,
 * control byte or byte of a multibyte character, up to the one that
 * stops them (the byte loop in string() then only has the last few bytes
 * of the text to look at).  A word has such a
 * byte when any of its bytes is below 0x20, is 0x22 or 0x5c (a byte equal
 * to k is a zero in x ^ k), or has its top bit set.
 */
static inline void plain_run(struct fp *f)
{
	const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
	while (f->end - f->p >= 8) {
		uint64_t x;
		memcpy(&x, f->p, 8);
		uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
		/* a subtraction borrows only at a byte that stops the run, so
		 * the word is marked exactly when it holds one, and its
		 * lowest mark is one (a borrow marks only bytes above) */
		uint64_t m = ((x - ones * 0x20) | (q - ones) | (b - ones) | x) & high;
		if (m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			f->p += __builtin_ctzll(m) >> 3;
#endif
			return;
		}
		f->p += 8;
	}
}

/*
 * A string starting after its opening quote.  *s and *n receive the bytes
 * (pointing into the input when there was no escape, else into scratch).
 */
static int string(struct fp *f, const char **s, size_t *n)
{
	const char *start = f->p, *run;
	size_t len = 0;
	int escaped = 0;

	for (;;) {
		run = f->p;
		plain_run(f);
		while (f->p < f->end) {
			unsigned char c = (unsigned char)*f->p;
			if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80)
				break;
			f->p++;
		}
		if (f->p >= f->end)
			return 0;
		unsigned char c = (unsigned char)*f->p;
		if (c >= 0x80) {
			uint32_t cp;
			size_t k = utf8_decode((const unsigned char *)f->p,
			                          (size_t)(f->end - f->p), &cp);
			if (!k)
				return 0;
			f->p += k;
			if (escaped && !put(f, &len, run, (size_t)(f->p - run)))
				return 0;
			continue;
		}
		if (c < 0x20)
			return 0;
		if (escaped && !put(f, &len, run, (size_t)(f->p - run)))
			return 0;
		if (c == '"') {
			if (!escaped) {
				*s = start;
				*n = (size_t)(f->p - start);
			} else {
				*s = f->scratch ? f->scratch : "";
				*n = len;
			}
			f->p++;
			return 1;
		}
		/* A backslash: switch to the scratch buffer. */
		if (!escaped) {
			escaped = 1;
			if (!put(f, &len, start, (size_t)(f->p - start)))
				return 0;
		}
		if (!escape(f, &len))
			return 0;
	}
}

/* ---- memory ---- */

/* jv_fast_alloc() swaps these for the arena below. */
static void *(*mem_alloc)(size_t) = malloc;
static void (*mem_free)(void *) = free;
static void *(*mem_realloc)(void *, size_t) = realloc;
static void (*mem_trim)(void);  /* gives back what the arena has not used */

static void *jn_alloc(size_t n)
{
	return mem_alloc(n ? n : 1);
}

static void jn_free(void *p)
{
	mem_free(p);
}

static void *jn_realloc(void *p, size_t n)
{
	return mem_realloc(p, n ? n : 1);
}

/* Containers: a box, then its items. */
struct jn_box {
	uint32_t n, cap;
	uint32_t *idx;          /* objects past IDX_MIN members: a hash of
	                           positions + 1, 2 * cap slots; or NULL */
};

#define ITEMS(b) ((struct jn *)((b) + 1))
#define MEMS(b) ((struct jn_mem *)((b) + 1))
#define IDX_MIN 16

/*
 * A container's place in jn_redump()'s last line lives in the node's
 * bytes strings use (own, spare, n: 56 bits): rel, the bytes from its
 * parent's first byte to its own, and len, its length, 27 bits each
 * (a container past 128 MiB, or that far into its parent, is not
 * placed: it is written in full), and two flags.  A node moved keeps
 * them (an array's items shift); jn_copy() clears them in the copy.
 */
enum { PLACE_BITS = 27, PLACED = 1, DIRTY = 2 };
#define PLACE_MAX (((uint64_t)1 << PLACE_BITS) - 1)

static uint64_t place_of(const struct jn *v)
{
	return (uint64_t)v->n | (uint64_t)v->spare << 32 | (uint64_t)v->own << 48;
}

static void place_set(struct jn *v, uint64_t p)
{
	v->n = (uint32_t)p;
	v->spare = (uint16_t)(p >> 32);
	v->own = (uint8_t)(p >> 48);
}

static unsigned place_flags(const struct jn *v)
{
	return (unsigned)(place_of(v) >> (2 * PLACE_BITS));
}

static size_t item_size(const struct jn *c)
{
	return c->t == JN_OBJ ? sizeof(struct jn_mem) : sizeof(struct jn);
}

static struct jn_box *box_new(size_t n, size_t item)
{
	struct jn_box *b;
	if (n > JN_MAX_LEN || !(b = jn_alloc(sizeof *b + n * item)))
		return NULL;
	b->n = 0;
	b->cap = (uint32_t)n;
	b->idx = NULL;
	return b;
}

static uint64_t key_hash(const char *k, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)k[i]) * 0x100000001b3ULL;
	return h ^ (h >> 29);
}

/* Build (or rebuild) the index of b; 0 when memory runs out (lookups
 * then scan). */
static size_t idx_slots(const struct jn_box *b)
{
	size_t slots = 2 * (size_t)b->cap;
	while (slots & (slots - 1))
		slots &= slots - 1;
	return slots * 2;       /* a power of two past twice cap */
}

static int idx_build(struct jn_box *b)
{
	size_t slots = idx_slots(b), mask = slots - 1;
	jn_free(b->idx);
	if (!(b->idx = jn_alloc(slots * sizeof *b->idx)))
		return 0;
	memset(b->idx, 0, slots * sizeof *b->idx);
	for (uint32_t i = 0; i < b->n; i++) {
		size_t h = key_hash(MEMS(b)[i].k, MEMS(b)[i].kn) & mask;
		while (b->idx[h])
			h = (h + 1) & mask;
		b->idx[h] = i + 1;
	}
	return 1;
}

static long mem_find(const struct jn *obj, const char *k, size_t kn)
{
	struct jn_box *b = obj->u.b;
	if (obj->t != JN_OBJ || !b)
		return -1;
	if (b->n > IDX_MIN && (b->idx || idx_build(b))) {
		size_t mask = idx_slots(b) - 1, h = key_hash(k, kn) & mask;
		for (; b->idx[h]; h = (h + 1) & mask) {
			struct jn_mem *m = &MEMS(b)[b->idx[h] - 1];
			if (m->kn == kn && !memcmp(m->k, k, kn))
				return (long)b->idx[h] - 1;
		}
		return -1;
	}
	for (uint32_t i = 0; i < b->n; i++)
		if (MEMS(b)[i].kn == kn && !memcmp(MEMS(b)[i].k, k, kn))
			return (long)i;
	return -1;
}

size_t jn_size(const struct jn *v)
{
	return (v->t == JN_ARR || v->t == JN_OBJ) && v->u.b ? v->u.b->n : 0;
}

struct jn *jn_at(const struct jn *arr, size_t i)
{
	return &ITEMS(arr->u.b)[i];
}

struct jn_mem *jn_mem_at(const struct jn *obj, size_t i)
{
	return &MEMS(obj->u.b)[i];
}

struct jn *jn_get(const struct jn *obj, const char *k, size_t kn)
{
	long i = mem_find(obj, k, kn);
	return i < 0 ? NULL : &MEMS(obj->u.b)[i].v;
}

struct jn jn_container(enum jn_type t)
{
	struct jn v = JN_NULL_INIT;
	v.t = (uint8_t)t;
	return v;
}

/* Room for one more item in container c. */
static enum core_status grow(struct jn *c)
{
	struct jn_box *b = c->u.b, *nb;
	size_t item = item_size(c), cap;
	if (b && b->n < b->cap)
		return CORE_OK;
	cap = b ? (size_t)b->cap * 2 : 4;
	if (cap < 4)
		cap = 4;
	if (cap > JN_MAX_LEN)
		cap = JN_MAX_LEN;
	if (b && b->n >= cap)
		return CORE_ETOOBIG;
	/* realloc: a large box grows in place (mremap), untouched pages
	 * cost nothing, and no second copy is alive at once */
	if (!(nb = jn_realloc(b, sizeof *nb + cap * item)))
		return CORE_ENOMEM;
	if (!b)
		nb->n = 0, nb->idx = NULL;
	jn_free(nb->idx);       /* sized for the old cap: rebuilt on demand */
	nb->idx = NULL;
	nb->cap = (uint32_t)cap;
	c->u.b = nb;
	return CORE_OK;
}

enum core_status jn_set(struct jn *obj, const char *k, size_t kn, struct jn v)
{
	long i = mem_find(obj, k, kn);
	enum core_status st;
	struct jn_mem *m;
	char *key;
	if (i >= 0) {
		jn_release(&MEMS(obj->u.b)[i].v);
		MEMS(obj->u.b)[i].v = v;
		return CORE_OK;
	}
	if (kn > JN_MAX_LEN || (st = grow(obj)) || !(key = jn_alloc(kn))) {
		jn_release(&v);
		return kn > JN_MAX_LEN ? CORE_ETOOBIG : st ? st : CORE_ENOMEM;
	}
	memcpy(key, k, kn);
	m = &MEMS(obj->u.b)[obj->u.b->n++];
	*m = (struct jn_mem){ key, (uint32_t)kn, 1, v };
	if (obj->u.b->idx) {
		/* the index has room: it was built for cap members */
		size_t mask = idx_slots(obj->u.b) - 1, h = key_hash(k, kn) & mask;
		while (obj->u.b->idx[h])
			h = (h + 1) & mask;
		obj->u.b->idx[h] = obj->u.b->n;
	}
	return CORE_OK;
}

int jn_del(struct jn *obj, const char *k, size_t kn, struct jn *out)
{
	long i = mem_find(obj, k, kn);
	struct jn_box *b;
	struct jn_mem *m;
	if (i < 0)
		return 0;
	b = obj->u.b;
	m = &MEMS(b)[i];
	if (m->kown)
		jn_free((char *)m->k);
	if (out)
		*out = m->v;
	else
		jn_release(&m->v);
	memmove(m, m + 1, (b->n - (size_t)i - 1) * sizeof *m);
	b->n--;
	jn_free(b->idx);        /* positions moved: rebuilt on demand */
	b->idx = NULL;
	return 1;
}

enum core_status jn_insert(struct jn *arr, size_t i, struct jn v)
{
	enum core_status st = grow(arr);
	struct jn_box *b = arr->u.b;
	if (st) {
		jn_release(&v);
		return st;
	}
	memmove(&ITEMS(b)[i + 1], &ITEMS(b)[i], (b->n - i) * sizeof(struct jn));
	ITEMS(b)[i] = v;
	b->n++;
	return CORE_OK;
}

void jn_remove(struct jn *arr, size_t i, struct jn *out)
{
	struct jn_box *b = arr->u.b;
	if (out)
		*out = ITEMS(b)[i];
	else
		jn_release(&ITEMS(b)[i]);
	memmove(&ITEMS(b)[i], &ITEMS(b)[i + 1], (b->n - i - 1) * sizeof(struct jn));
	b->n--;
}

void jn_release(struct jn *v)
{
	struct jn_box *b = v->u.b;
	if ((v->t == JN_STR || v->t == JN_BIG) && v->own)
		jn_free((char *)v->u.s);
	else if (v->t == JN_ARR && b) {
		for (uint32_t i = 0; i < b->n; i++)
			jn_release(&ITEMS(b)[i]);
		jn_free(b);
	} else if (v->t == JN_OBJ && b) {
		for (uint32_t i = 0; i < b->n; i++) {
			if (MEMS(b)[i].kown)
				jn_free((char *)MEMS(b)[i].k);
			jn_release(&MEMS(b)[i].v);
		}
		jn_free(b->idx);
		jn_free(b);
	}
	*v = (struct jn)JN_NULL_INIT;
}

static char *bytes_dup(const char *s, size_t n)
{
	char *p = jn_alloc(n);
	if (p && n)
		memcpy(p, s, n);
	return p;
}

enum core_status jn_copy(const struct jn *v, int own_all, struct jn *out)
{
	struct jn_box *b = v->u.b, *nb;
	*out = *v;
	if ((v->t == JN_STR || v->t == JN_BIG) && (v->own || own_all)) {
		if (!(out->u.s = bytes_dup(v->u.s, v->n))) {
			*out = (struct jn)JN_NULL_INIT;
			return CORE_ENOMEM;
		}
		out->own = 1;
		return CORE_OK;
	}
	if ((v->t != JN_ARR && v->t != JN_OBJ) || !b)
		return CORE_OK;
	place_set(out, 0);      /* a copy has no place in any line */
	out->u.b = NULL;
	if (!(nb = box_new(b->n, item_size(v)))) {
		*out = (struct jn)JN_NULL_INIT;
		return CORE_ENOMEM;
	}
	out->u.b = nb;
	for (uint32_t i = 0; i < b->n; i++) {
		enum core_status st;
		if (v->t == JN_ARR) {
			st = jn_copy(&ITEMS(b)[i], own_all, &ITEMS(nb)[i]);
		} else {
			struct jn_mem *m = &MEMS(b)[i], *nm = &MEMS(nb)[i];
			*nm = *m;
			nm->v = (struct jn)JN_NULL_INIT;
			nm->kown = m->kown || own_all;
			if (nm->kown && !(nm->k = bytes_dup(m->k, m->kn)))
				st = CORE_ENOMEM;
			else
				st = jn_copy(&m->v, own_all, &nm->v);
			if (st && nm->k != m->k)
				jn_free((char *)nm->k);
		}
		if (st) {
			jn_release(out);
			return st;
		}
		nb->n++;
	}
	return CORE_OK;
}

/* ---- the parser ---- */

static int digit(char c)
{
	return c >= '0' && c <= '9';
}

/*
 * Give back the pages between the compacted bytes and the parse: nothing
 * below w (which holds the strings so far) and nothing at p or after
 * (still to be read), 256 KiB at a time, or all of it at the end.
 */
static void give_back(struct fp *f, int all)
{
	const uintptr_t page = 4096;
	uintptr_t lo = ((uintptr_t)f->w + page - 1) & ~(page - 1);
	uintptr_t hi = (uintptr_t)f->p & ~(page - 1);
	if (lo < (uintptr_t)f->given)
		lo = (uintptr_t)f->given;
	if (hi > lo && (all || hi - lo >= ((uintptr_t)1 << 18))) {
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
		f->given = (const char *)hi;
	}
}

/*
 * The bytes s[0..n) kept in the compacted text: moved down to w (never
 * above where they were: each string took at least its own length of
 * text, quotes and escapes included), or the copy made of the same bytes
 * before, for short ones.  Returns where they now are.
 */
static const char *compact(struct fp *f, const char *s, size_t n, int share)
{
	const char *r = f->w;
	unsigned h = 0;
	if (share && n && n <= SEEN_MAX) {
		h = ((unsigned)n * 131u + (unsigned char)s[0] * 31u
		     + (unsigned char)s[n - 1] + (unsigned char)s[n >> 1] * 7u)
		    % SEEN_SLOTS;
		if (f->seen[h].n == n && !memcmp(f->seen[h].s, s, n))
			return f->seen[h].s;
	}
	memmove(f->w, s, n);
	f->w += n;
	if (share && n && n <= SEEN_MAX) {
		f->seen[h].s = r;
		f->seen[h].n = n;
	}
	give_back(f, 0);
	return r;
}

/* A number token; JN_BIG for one jansson would refuse as too large. */
static int number(struct fp *f, struct jn *v)
{
	const char *s = f->p, *q = f->p;
	int real = 0;
	double x;
	size_t len;
	if (q < f->end && *q == '-')
		q++;
	if (q >= f->end || !digit(*q))
		return 0;
	if (*q == '0')
		q++;
	else
		while (q < f->end && digit(*q))
			q++;
	if (q < f->end && *q == '.') {
		real = 1;
		q++;
		if (q >= f->end || !digit(*q))
			return 0;
		while (q < f->end && digit(*q))
			q++;
	}
	if (q < f->end && (*q == 'e' || *q == 'E')) {
		real = 1;
		q++;
		if (q < f->end && (*q == '+' || *q == '-'))
			q++;
		if (q >= f->end || !digit(*q))
			return 0;
		while (q < f->end && digit(*q))
			q++;
	}
	/* The token must end here, as jansson's lexer would end it. */
	if (q < f->end && (digit(*q) || (*q >= 'a' && *q <= 'z')
	                   || (*q >= 'A' && *q <= 'Z') || *q == '.' || *q == '-'
	                   || *q == '+'))
		return 0;
	f->p = q;
	len = (size_t)(q - s);
	if (!real && len - (*s == '-') <= 18) {
		const char *d = s + (*s == '-');
		int64_t i = 0;
		while (d < q)
			i = i * 10 + (*d++ - '0');
		v->t = JN_INT;
		v->u.i = *s == '-' ? -i : i;
		return 1;
	}
	switch (jv_read_number(s, len, &v->u.i, &x)) {
	case 1:
		v->t = real ? JN_REAL : JN_INT;
		if (real)
			v->u.d = x;
		return 1;
	case -1:
		return 0;
	}
	if (len > JN_MAX_LEN)
		return 0;
	f->bigs = 1;
	v->t = JN_BIG;
	v->own = 0;
	v->n = (uint32_t)len;
	v->u.s = f->w ? compact(f, s, len, 0) : s;
	return 1;
}

/*
 * Value stacks: the elements and members of the containers being read,
 * each stack laid out as a box so that the outermost container on it
 * (the big array of a large document, say) takes the stack itself as its
 * box instead of a copy: an array of five million numbers then peaks at
 * its size, not twice it.
 */
struct stacks {
	struct jn_box *ab, *mb;
	size_t an, acap, mn, mcap;
};

#define SA(st) ITEMS((st)->ab)
#define SM(st) MEMS((st)->mb)

/* Room for one more item on a stack. */
static int stack_room(struct jn_box **b, size_t n, size_t *cap, size_t item)
{
	size_t c = *cap ? *cap * 2 : 64;
	struct jn_box *q;
	if (n < *cap)
		return 1;
	if (!(q = jn_realloc(*b, sizeof *q + c * item)))
		return 0;
	*b = q;
	*cap = c;
	return 1;
}

static int value(struct fp *f, struct stacks *st, int depth, struct jn *v);

/* Fill string node v (or key k) from string(): borrowed from the input,
 * or an owned copy of an escaped string. */
static int take_string(struct fp *f, const char *s, size_t n, const char **out,
                       uint8_t *own)
{
	if (n > JN_MAX_LEN)
		return 0;
	*own = 0;
	if (f->w) {
		*out = compact(f, s, n, 1);
		return 1;
	}
	*out = s;
	if (s == f->scratch && n) {
		if (!(*out = bytes_dup(s, n)))
			return 0;
		*own = 1;
	}
	return 1;
}

/* Close a container: move its items base..n of the stack *sb into a box
 * (the stack itself when they start at its bottom). */
static int close_box(struct jn *c, struct jn_box **sb, size_t *cap, size_t base,
                     size_t n, size_t item)
{
	if (n == base)
		return 1;
	if (n - base > JN_MAX_LEN)
		return 0;
	if (!base) {
		struct jn_box *b = jn_realloc(*sb, sizeof *b + n * item);
		if (!b)
			return 0;
		*sb = NULL;
		*cap = 0;
		c->u.b = b;
		b->idx = NULL;
	} else {
		if (!(c->u.b = box_new(n - base, item)))
			return 0;
		memcpy(c->u.b + 1, (char *)(*sb + 1) + base * item, (n - base) * item);
	}
	c->u.b->n = c->u.b->cap = (uint32_t)(n - base);
	return 1;
}

/* Any duplicate key among m[0..n)?  Small objects compare pairwise; large
 * ones build their lookup index on the way (or give up). */
static int has_dup(struct jn *o)
{
	struct jn_box *b = o->u.b;
	if (!b)
		return 0;
	if (b->n <= IDX_MIN) {
		for (uint32_t i = 1; i < b->n; i++)
			for (uint32_t j = 0; j < i; j++)
				if (MEMS(b)[i].kn == MEMS(b)[j].kn
				    && (!MEMS(b)[i].kn || MEMS(b)[i].k[0] == MEMS(b)[j].k[0])
				    && !memcmp(MEMS(b)[i].k, MEMS(b)[j].k, MEMS(b)[i].kn))
					return 1;
		return 0;
	}
	{
		size_t slots = idx_slots(b), mask = slots - 1;
		if (!(b->idx = jn_alloc(slots * sizeof *b->idx)))
			return 1;
		memset(b->idx, 0, slots * sizeof *b->idx);
		for (uint32_t i = 0; i < b->n; i++) {
			struct jn_mem *m = &MEMS(b)[i];
			size_t h = key_hash(m->k, m->kn) & mask;
			for (; b->idx[h]; h = (h + 1) & mask) {
				struct jn_mem *x = &MEMS(b)[b->idx[h] - 1];
				if (x->kn == m->kn && !memcmp(x->k, m->k, m->kn))
					return 1;
			}
			b->idx[h] = i + 1;
		}
	}
	return 0;
}

static int object(struct fp *f, struct stacks *st, int depth, struct jn *o)
{
	size_t base = st->mn;
	const char *k;
	size_t kn;
	*o = jn_container(JN_OBJ);
	ws(f);
	if (f->p < f->end && *f->p == '}') {
		f->p++;
		return 1;
	}
	for (;;) {
		struct jn_mem m = { 0 };
		if (f->p >= f->end || *f->p != '"')
			goto fail;
		f->p++;
		if (!string(f, &k, &kn) || memchr(k, 0, kn)
		    || !take_string(f, k, kn, &m.k, &m.kown))
			goto fail;
		m.kn = (uint32_t)kn;
		if (!stack_room(&st->mb, st->mn, &st->mcap, sizeof m)) {
			if (m.kown)
				jn_free((char *)m.k);
			goto fail;
		}
		SM(st)[st->mn++] = m;
		ws(f);
		if (f->p >= f->end || *f->p != ':')
			goto fail;
		f->p++;
		ws(f);
		if (!value(f, st, depth + 1, &m.v))
			goto fail;
		SM(st)[st->mn - 1].v = m.v;
		int more = next_item(f, '}');
		if (more < 0)
			goto fail;
		if (!more)
			break;
	}
	if (!close_box(o, &st->mb, &st->mcap, base, st->mn, sizeof(struct jn_mem)))
		goto fail;
	st->mn = base;
	/* jansson rejects duplicate keys: let it say so */
	if (has_dup(o)) {
		jn_release(o);
		return 0;
	}
	return 1;
fail:
	while (st->mn > base) {
		struct jn_mem *m = &SM(st)[--st->mn];
		if (m->kown)
			jn_free((char *)m->k);
		jn_release(&m->v);
	}
	return 0;
}

static int array(struct fp *f, struct stacks *st, int depth, struct jn *a)
{
	size_t base = st->an;
	struct jn r;
	*a = jn_container(JN_ARR);
	ws(f);
	if (f->p < f->end && *f->p == ']') {
		f->p++;
		return 1;
	}
	for (;;) {
		if (!value(f, st, depth + 1, &r))
			goto fail;
		if (!stack_room(&st->ab, st->an, &st->acap, sizeof r)) {
			jn_release(&r);
			goto fail;
		}
		SA(st)[st->an++] = r;
		int more = next_item(f, ']');
		if (more < 0)
			goto fail;
		if (!more)
			break;
	}
	if (!close_box(a, &st->ab, &st->acap, base, st->an, sizeof(struct jn)))
		goto fail;
	st->an = base;
	return 1;
fail:
	while (st->an > base)
		jn_release(&SA(st)[--st->an]);
	return 0;
}

static int word(struct fp *f, const char *w, size_t n)
{
	if ((size_t)(f->end - f->p) < n || memcmp(f->p, w, n))
		return 0;
	f->p += n;
	/* "truex" is one bad token to jansson. */
	if (f->p < f->end && ((*f->p >= 'a' && *f->p <= 'z')
	                      || (*f->p >= 'A' && *f->p <= 'Z') || digit(*f->p)))
		return 0;
	return 1;
}

/* One value into *v (not into a value stack, which nested containers
 * move as they grow). */
static int value(struct fp *f, struct stacks *st, int depth, struct jn *v)
{
	struct jn r = JN_NULL_INIT;
	const char *s;
	size_t n;
	int ok;

	if (depth > FAST_MAX_DEPTH || f->p >= f->end)
		return 0;
	switch (*f->p) {
	case '{':
		f->p++;
		ok = object(f, st, depth, &r);
		break;
	case '[':
		f->p++;
		ok = array(f, st, depth, &r);
		break;
	case '"':
		f->p++;
		r.t = JN_STR;
		ok = string(f, &s, &n) && take_string(f, s, n, &r.u.s, &r.own);
		r.n = (uint32_t)n;
		if (!ok)
			r.t = JN_NULL;
		break;
	case 't':
		ok = word(f, "true", 4), r.t = JN_TRUE;
		break;
	case 'f':
		ok = word(f, "false", 5), r.t = JN_FALSE;
		break;
	case 'n':
		ok = word(f, "null", 4);
		break;
	default:
		ok = number(f, &r);
	}
	if (!ok)
		return 0;
	*v = r;
	return 1;
}

/* The fast parse: 1 with *out, or 0 for jansson to judge.  *bigs is set
 * when the document holds a JN_BIG. */
static int parse_fast(const char *p, size_t n, struct jn *out, int *bigs,
                      char *text)
{
	static int c_locale = -1;
	struct fp f = { p, p + n, NULL, 0, 0, NULL, NULL, NULL };
	struct stacks st = { 0 };
	struct seen seen[SEEN_SLOTS];
	int ok;

	if (text) {
		/* compacting: the text is ours to overwrite */
		memset(seen, 0, sizeof seen);
		f.w = text;
		f.given = text;
		f.seen = seen;
	}

	/* jansson reads reals with '.' whatever the locale; strtod does not. */
	if (c_locale < 0)
		c_locale = localeconv()->decimal_point[0] == '.'
		           && !localeconv()->decimal_point[1];
	if (!c_locale)
		return 0;
	*out = (struct jn)JN_NULL_INIT;
	ws(&f);
	ok = value(&f, &st, 1, out);
	if (ok) {
		ws(&f);
		if (f.p != f.end) {
			jn_release(out);
			ok = 0;
		}
	}
	if (ok && text)
		give_back(&f, 1);
	*bigs = f.bigs;
	free(f.scratch);
	jn_free(st.ab);
	jn_free(st.mb);
	return ok;
}

enum core_status jn_parse(const char *p, size_t n, const char *name,
                          size_t lineno, struct jn *out, struct core_err *e)
{
	json_t *v;
	enum core_status st;
	int bigs;
	*out = (struct jn)JN_NULL_INIT;
	if (parse_fast(p, n, out, &bigs, NULL))
		return CORE_OK;
	if (!(v = jv_parse_jansson(p, n, name, lineno, e)))
		return e->st;
	/* jansson took it (nesting near the limit, say): convert its tree */
	if ((st = jn_from_json(v, out)))
		core_fail(e, st, "%s: %s", name, st == CORE_ETOOBIG
		          ? "a string or container is too large"
		          : "out of memory");
	json_decref(v);
	return st;
}

/* json.h's one parser: the fast path first, jansson when it gives up.
 * It lives here so that json.c stands alone below jfast.c. */
json_t *jv_parse(const char *p, size_t n, const char *name, size_t lineno,
                 struct core_err *e)
{
	json_t *v = jv_parse_fast(p, n);    /* NULL: let jansson judge */
	return v ? v : jv_parse_jansson(p, n, name, lineno, e);
}

json_t *jv_parse_fast(const char *p, size_t n)
{
	struct jn v;
	json_t *r = NULL;
	int bigs;
	if (!parse_fast(p, n, &v, &bigs, NULL))
		return NULL;
	/* bignums are jv_parse()'s to make, after jansson refused them */
	if (!bigs)
		r = jn_to_json(&v);
	jn_release(&v);
	return r;
}

/* ---- conversions ---- */

json_t *jn_to_json(const struct jn *v)
{
	struct jn_box *b = v->u.b;
	json_t *r = NULL;
	switch (v->t) {
	case JN_NULL: return json_null();
	case JN_TRUE: return json_true();
	case JN_FALSE: return json_false();
	case JN_INT: return json_integer(v->u.i);
	case JN_REAL: return json_real(v->u.d);
	case JN_BIG: return jv_bignum(v->u.s, v->n);
	case JN_STR: return json_stringn_nocheck(v->u.s, v->n);
	case JN_ARR:
		if (!(r = json_array()))
			return NULL;
		for (uint32_t i = 0; b && i < b->n; i++)
			if (json_array_append_new(r, jn_to_json(&ITEMS(b)[i])))
				return json_decref(r), NULL;
		return r;
	default:
		if (!(r = json_object()))
			return NULL;
		for (uint32_t i = 0; b && i < b->n; i++) {
			json_t *c = jn_to_json(&MEMS(b)[i].v);
			if (!c || json_object_setn_new_nocheck(r, MEMS(b)[i].k,
			                                       MEMS(b)[i].kn, c))
				return json_decref(r), NULL;
		}
		return r;
	}
}

enum core_status jn_from_json(const json_t *v, struct jn *out)
{
	enum core_status st = CORE_OK;
	*out = (struct jn)JN_NULL_INIT;
	switch (json_typeof(v)) {
	case JSON_TRUE: out->t = JN_TRUE; return CORE_OK;
	case JSON_FALSE: out->t = JN_FALSE; return CORE_OK;
	case JSON_NULL: return CORE_OK;
	case JSON_INTEGER:
		out->t = JN_INT;
		out->u.i = json_integer_value(v);
		return CORE_OK;
	case JSON_REAL:
		out->t = JN_REAL;
		out->u.d = json_real_value(v);
		return CORE_OK;
	case JSON_STRING: {
		int big = jv_is_bignum(v);
		size_t n = json_string_length(v) - (size_t)big;
		if (n > JN_MAX_LEN)
			return CORE_ETOOBIG;
		if (!(out->u.s = bytes_dup(json_string_value(v) + big, n)))
			return CORE_ENOMEM;
		out->t = big ? JN_BIG : JN_STR;
		out->own = 1;
		out->n = (uint32_t)n;
		return CORE_OK;
	}
	case JSON_ARRAY: {
		size_t i;
		json_t *x;
		*out = jn_container(JN_ARR);
		json_array_foreach(v, i, x) {
			struct jn c;
			if ((st = jn_from_json(x, &c))
			    || (st = jn_insert(out, jn_size(out), c)))
				break;
		}
		break;
	}
	default: {
		const char *k;
		json_t *x;
		*out = jn_container(JN_OBJ);
		json_object_foreach((json_t *)v, k, x) {
			struct jn c;
			if ((st = jn_from_json(x, &c))
			    || (st = jn_set(out, k, json_object_iter_key_len(
			                           json_object_key_to_iter(k)), c)))
				break;
		}
	}
	}
	if (st)
		jn_release(out);
	return st;
}

/* ---- reading, writing, comparing ---- */

static enum core_status dump(const struct jn *v, struct core_buf *out, int depth);

/*
 * One value.  Inline, so that the loops over a container's items write
 * their scalars without a call: most of a document is short strings and
 * small integers, and a call per token was most of writing one.
 */
static inline enum core_status dump_value(const struct jn *v, struct core_buf *out,
                                          int depth)
{
	switch (v->t) {
	case JN_NULL: return core_buf_add(out, "null", 4);
	case JN_TRUE: return core_buf_add(out, "true", 4);
	case JN_FALSE: return core_buf_add(out, "false", 5);
	case JN_INT: return jw_int(v->u.i, out);
	case JN_REAL: return jv_dump_real(v->u.d, out);
	case JN_BIG: return core_buf_add(out, v->u.s, v->n);
	case JN_STR:
		if (jw_string_short(v->u.s, v->n, out))
			return CORE_OK;
		return jv_dump_string(v->u.s, v->n, out);
	default:
		return dump(v, out, depth);
	}
}

/* A member's key and its ':', after a ',' unless it is the first. */
static inline enum core_status dump_key(const struct jn_mem *m, int first,
                                        struct core_buf *out)
{
	enum core_status st;
	size_t kn = m->kn;
	if (kn <= JW_SHORT && out->cap - out->len > kn + 4 && out->len + kn + 4 <= out->max) {
		char *q = out->p + out->len;
		*q = ',';
		q += !first;
		if (jw_copy_short(m->k, kn, q + 1)) {
			q[0] = '"';
			q[kn + 1] = '"';
			q[kn + 2] = ':';
			q[kn + 3] = 0;
			out->len = (size_t)(q - out->p) + kn + 3;
			return CORE_OK;
		}
	}
	if ((!first && (st = core_buf_addc(out, ',')))
	    || (st = jv_dump_string(m->k, kn, out)))
		return st;
	return core_buf_addc(out, ':');
}

static enum core_status dump(const struct jn *v, struct core_buf *out, int depth)
{
	struct jn_box *b = v->t == JN_ARR || v->t == JN_OBJ ? v->u.b : NULL;
	enum core_status st;
	if (depth > JV_MAX_DEPTH * 4)
		return CORE_EINVAL;
	/* the items' depth, scalars too: dump_value() checks none */
	if (b && b->n && depth + 1 > JV_MAX_DEPTH * 4)
		return CORE_EINVAL;
	switch (v->t) {
	case JN_ARR:
		if ((st = core_buf_addc(out, '[')))
			return st;
		for (uint32_t i = 0; b && i < b->n; i++)
			if ((i && (st = core_buf_addc(out, ',')))
			    || (st = dump_value(&ITEMS(b)[i], out, depth + 1)))
				return st;
		return core_buf_addc(out, ']');
	case JN_OBJ:
		if ((st = core_buf_addc(out, '{')))
			return st;
		for (uint32_t i = 0; b && i < b->n; i++)
			if ((st = dump_key(&MEMS(b)[i], !i, out))
			    || (st = dump_value(&MEMS(b)[i].v, out, depth + 1)))
				return st;
		return core_buf_addc(out, '}');
	default:
		return dump_value(v, out, depth);
	}
}

enum core_status jn_dump(const struct jn *v, struct core_buf *out)
{
	return dump(v, out, 0);
}

/* ---- writing again what changed ---- */

static int is_box(const struct jn *v)
{
	return (v->t == JN_ARR || v->t == JN_OBJ) && v->u.b;
}

void jn_touch(struct jn *v)
{
	if (is_box(v))
		place_set(v, place_of(v) | (uint64_t)DIRTY << (2 * PLACE_BITS));
}

void jn_unplace(struct jn *v)
{
	if (is_box(v))
		place_set(v, 0);
}

#define NOWHERE SIZE_MAX

/* Is the node whose place is p (place_of()) a container placed and
 * clean, within prev when its parent began at old?  (Only containers
 * are ever placed: a string's own bit is below the flags.) */
static inline int clean_at(const struct core_buf *prev, uint64_t p, size_t old)
{
	return (p >> (2 * PLACE_BITS)) == PLACED &&
	       old + (p & PLACE_MAX) + (p >> PLACE_BITS & PLACE_MAX) <= prev->len;
}

/*
 * Array items *i.. of b, from the first (clean_at()) on while each is
 * clean and follows the last in prev after one ',': one copy of their
 * bytes, and each one's new place.  *i ends at the last one copied.
 */
static enum core_status copy_run(const struct core_buf *prev, struct jn_box *b, size_t *i,
                                 size_t old, size_t parent, struct core_buf *out)
{
	struct jn *items = ITEMS(b);
	uint64_t p = place_of(&items[*i]);
	size_t from = old + (p & PLACE_MAX), to = from + (p >> PLACE_BITS & PLACE_MAX);
	size_t j, at = out->len, shift;
	enum core_status st;
	for (j = *i + 1; j < b->n; j++) {
		p = place_of(&items[j]);
		if (!clean_at(prev, p, old) || old + (p & PLACE_MAX) != to + 1)
			break;
		to = old + (p & PLACE_MAX) + (p >> PLACE_BITS & PLACE_MAX);
	}
	if ((st = core_buf_add(out, prev->p + from, to - from)))
		return st;
	/* each moves by the same bytes: from old + rel to at + rel - from */
	shift = at - parent;
	for (size_t k = *i; k < j; k++) {
		size_t rel;
		p = place_of(&items[k]);
		rel = old + (p & PLACE_MAX) - from + shift;
		place_set(&items[k], rel <= PLACE_MAX ? (p & ~PLACE_MAX) | rel : 0);
	}
	*i = j - 1;
	return CORE_OK;
}

/*
 * v as dump() writes it, at depth.  old: where v's parent began in prev
 * (NOWHERE: unknown, or v is the root of a first line); parent: where
 * it begins in out.  A container placed and clean is its bytes of prev;
 * any other is written item by item, its clean containers copied.
 * Every container written records its new place.
 */
static enum core_status redump(const struct core_buf *prev, struct jn *v, size_t old,
                               size_t parent, struct core_buf *out, int depth)
{
	struct jn_box *b;
	uint64_t p = place_of(v), rel = p & PLACE_MAX, len = p >> PLACE_BITS & PLACE_MAX;
	unsigned flags = place_flags(v);
	size_t start = out->len, i;
	enum core_status st = CORE_OK;
	if (!is_box(v))
		return dump_value(v, out, depth);
	b = v->u.b;
	if (old != NOWHERE && (flags & PLACED) && old + rel + len <= prev->len)
		old += rel;
	else
		old = NOWHERE;
	if (old != NOWHERE && !(flags & DIRTY)) {
		st = core_buf_add(out, prev->p + old, len);
	} else {
		if (depth > JV_MAX_DEPTH * 4 || (b->n && depth + 1 > JV_MAX_DEPTH * 4))
			return CORE_EINVAL;
		st = core_buf_addc(out, v->t == JN_ARR ? '[' : '{');
		for (i = 0; !st && i < b->n; i++) {
			struct jn *item = &ITEMS(b)[i];
			if (v->t == JN_ARR) {
				if (i)
					st = core_buf_addc(out, ',');
				if (!st && old != NOWHERE && clean_at(prev, place_of(item), old))
					st = copy_run(prev, b, &i, old, start, out);
				else if (!st)
					st = redump(prev, item, old, start, out, depth + 1);
				continue;
			}
			st = dump_key(&MEMS(b)[i], !i, out);
			if (!st)
				st = redump(prev, &MEMS(b)[i].v, old, start, out, depth + 1);
		}
		if (!st)
			st = core_buf_addc(out, v->t == JN_ARR ? ']' : '}');
	}
	if (st)
		return st;
	rel = start - parent;
	len = out->len - start;
	place_set(v, rel <= PLACE_MAX && len <= PLACE_MAX
	             ? rel | len << PLACE_BITS | (uint64_t)PLACED << (2 * PLACE_BITS) : 0);
	return CORE_OK;
}

enum core_status jn_redump(struct jn_redump *r, struct jn *root)
{
	struct core_buf t;
	enum core_status st;
	core_buf_reset(&r->next);
	st = redump(&r->line, root, r->line.len ? 0 : NOWHERE, 0, &r->next, 0);
	if (st) {
		/* places half recorded: the next line starts afresh */
		core_buf_reset(&r->line);
		return st;
	}
	t = r->line;
	r->line = r->next;
	r->next = t;
	return CORE_OK;
}

void jn_redump_release(struct jn_redump *r)
{
	core_buf_release(&r->line);
	core_buf_release(&r->next);
}

static int is_num(const struct jn *v)
{
	return v->t == JN_INT || v->t == JN_REAL || v->t == JN_BIG;
}

static void num_of(const struct jn *v, struct jv_num *n)
{
	memset(n, 0, sizeof *n);
	if (v->t == JN_INT)
		n->kind = JV_NUM_INT, n->i = v->u.i;
	else if (v->t == JN_REAL)
		n->kind = JV_NUM_REAL, n->d = v->u.d;
	else
		n->kind = JV_NUM_TEXT, n->s = v->u.s, n->n = v->n;
}

int jn_equal(const struct jn *a, const struct jn *b)
{
	struct jn_box *x = a->u.b, *y = b->u.b;
	if (is_num(a) || is_num(b)) {
		struct jv_num p, q;
		if (!is_num(a) || !is_num(b))
			return 0;
		num_of(a, &p);
		num_of(b, &q);
		return jv_num_equal(&p, &q);
	}
	if (a->t != b->t)
		return 0;
	switch (a->t) {
	case JN_STR:
		return a->n == b->n && !memcmp(a->u.s, b->u.s, a->n);
	case JN_ARR:
		if (jn_size(a) != jn_size(b))
			return 0;
		for (uint32_t i = 0; x && i < x->n; i++)
			if (!jn_equal(&ITEMS(x)[i], &ITEMS(y)[i]))
				return 0;
		return 1;
	case JN_OBJ:
		if (jn_size(a) != jn_size(b))
			return 0;
		for (uint32_t i = 0; x && i < x->n; i++) {
			const struct jn *c = jn_get(b, MEMS(x)[i].k, MEMS(x)[i].kn);
			if (!c || !jn_equal(&MEMS(x)[i].v, c))
				return 0;
		}
		return 1;
	default:
		return 1;
	}
}

const char *jn_type_name(const struct jn *v)
{
	switch (v->t) {
	case JN_OBJ: return "object";
	case JN_ARR: return "array";
	case JN_STR: return "string";
	case JN_INT:
	case JN_REAL:
	case JN_BIG: return "number";
	case JN_TRUE:
	case JN_FALSE: return "boolean";
	default: return "null";
	}
}

/* A file's text, read whole into *text (n bytes). */
static enum core_status read_text(const char *path, size_t max, char **text,
                                  size_t *n, struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(max);
	enum core_status st;
	/* read, not mmap: a file truncated under a mapping would kill the
	 * process with SIGBUS instead of giving an error */
	if ((st = core_buf_read_file(&b, path, e))) {
		core_buf_release(&b);
		return st;
	}
	*text = core_buf_detach(&b, n);
	return CORE_OK;
}

/* Documents from this size up are compacted as they are parsed. */
#define COMPACT_MIN ((size_t)1 << 20)

/*
 * A large regular file is parsed compacting (struct fp): its strings are
 * moved down to the start of the text and the rest is given back page by
 * page as the parse passes, so a document holds its strings once (each
 * distinct short key once) instead of its whole text.  That overwrites
 * the text; when the fast parse gives up on it, the file is read again
 * for jansson to judge - unless it changed in between, which is said.
 */
enum core_status jn_load_file(const char *path, size_t max, struct jn_doc *d,
                              struct core_err *e)
{
	const char *name = strcmp(path, "-") ? path : "<stdin>";
	struct stat before, after;
	enum core_status st;
	size_t n;
	int bigs;

	*d = (struct jn_doc)JN_DOC_INIT;
	int regular = strcmp(path, "-") && !stat(path, &before) && S_ISREG(before.st_mode);
	if ((st = read_text(path, max, &d->text, &n, e)))
		return st;
	if (regular && n >= COMPACT_MIN) {
		if (parse_fast(d->text, n, &d->root, &bigs, d->text)) {
			if (mem_trim)
				mem_trim();
			return CORE_OK;
		}
		jn_doc_release(d);
		if (stat(path, &after) || after.st_ino != before.st_ino
		    || after.st_dev != before.st_dev || after.st_size != before.st_size
		    || after.st_mtim.tv_sec != before.st_mtim.tv_sec
		    || after.st_mtim.tv_nsec != before.st_mtim.tv_nsec)
			return core_fail(e, CORE_ESYS, "'%s' changed while it was read", path);
		if ((st = read_text(path, max, &d->text, &n, e)))
			return st;
	}
	if ((st = jn_parse(d->text, n, name, 0, &d->root, e)))
		jn_doc_release(d);
	return st;
}

enum core_status jn_load_copy(const char *p, size_t n, const char *name,
                              size_t lineno, struct jn_doc *d,
                              struct core_err *e)
{
	enum core_status st;
	*d = (struct jn_doc)JN_DOC_INIT;
	if (!(d->text = malloc(n ? n : 1)))
		return core_fail(e, CORE_ENOMEM, "out of memory reading %s", name);
	memcpy(d->text, p, n);
	if ((st = jn_parse(d->text, n, name, lineno, &d->root, e)))
		jn_doc_release(d);
	return st;
}

void jn_doc_release(struct jn_doc *d)
{
	jn_release(&d->root);
	free(d->text);
	d->text = NULL;
}

/* ---- the allocator ---- */

#if defined(__SANITIZE_ADDRESS__)
#define JFAST_NO_ARENA 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JFAST_NO_ARENA 1
#endif
#endif

#ifndef JFAST_NO_ARENA
#define ARENA_MAP ((size_t)32 << 20)
#define ARENA_FIRST ((size_t)1 << 20)
#define ARENA_CLASSES 40          /* blocks of 16 .. 640 bytes, header included */
#define ARENA_BIG 0xffff

struct arena_free {
	struct arena_free *next;
};

static __thread char *arena_p, *arena_end;
static __thread unsigned arena_regions;
static __thread struct arena_free *arena_lists[ARENA_CLASSES];

static void *arena_malloc(size_t n)
{
	size_t cls = (n + 8 + 15) / 16, sz;
	uint64_t *h;
	if (cls > ARENA_CLASSES) {
		if (!(h = malloc(n + 16)))
			return NULL;
		h[1] = ARENA_BIG;
		return h + 2;
	}
	if (arena_lists[cls - 1]) {
		struct arena_free *f = arena_lists[cls - 1];
		arena_lists[cls - 1] = f->next;
		return f;
	}
	sz = cls * 16;
	if ((size_t)(arena_end - arena_p) < sz) {
		/* The first region is small and of ordinary pages, so a tiny
		 * document costs no 2 MB huge-page fault (the kernel zeroes
		 * every page it hands out); large documents get huge pages. */
		size_t map = arena_regions++ ? ARENA_MAP : ARENA_FIRST;
		void *m = mmap(NULL, map, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED)
			return NULL;
		if (map == ARENA_MAP)
			madvise(m, map, MADV_HUGEPAGE);
		/* Blocks start 8 bytes in, so that the block after the header
		 * is 16-byte aligned. */
		arena_p = (char *)m + 8;
		arena_end = (char *)m + map;
	}
	h = (uint64_t *)arena_p;
	arena_p += sz;
	h[0] = cls;
	return h + 1;
}

static void arena_free(void *p);

/* Give back the pages of this thread's region past its last block: a
 * huge page faulted in whole is mostly unused at the end of a parse. */
static void arena_trim(void)
{
	const uintptr_t page = 4096;
	uintptr_t lo = ((uintptr_t)arena_p + page - 1) & ~(page - 1);
	if (arena_regions > 1 && lo < (uintptr_t)arena_end)
		madvise((void *)lo, (uintptr_t)arena_end - lo, MADV_DONTNEED);
}

/* Blocks past the size classes are malloc's, so a large one grows or
 * shrinks in place (mremap) rather than by copying. */
static void *arena_realloc(void *p, size_t n)
{
	uint64_t *h;
	void *q;
	size_t old;
	if (!p)
		return arena_malloc(n);
	h = (uint64_t *)p - 1;
	if (h[0] == ARENA_BIG && (n + 8 + 15) / 16 > ARENA_CLASSES) {
		if (!(h = realloc((uint64_t *)p - 2, n + 16)))
			return NULL;
		return h + 2;
	}
	old = h[0] == ARENA_BIG ? n : h[0] * 16 - 8;
	if (!(q = arena_malloc(n)))
		return NULL;
	memcpy(q, p, old < n ? old : n);
	arena_free(p);
	return q;
}

static void arena_free(void *p)
{
	uint64_t *h;
	if (!p)
		return;
	h = (uint64_t *)p - 1;
	if (h[0] == ARENA_BIG) {
		free((uint64_t *)p - 2);
		return;
	}
	((struct arena_free *)p)->next = arena_lists[h[0] - 1];
	arena_lists[h[0] - 1] = p;
}

#endif

void jv_fast_alloc(void)
{
#ifndef JFAST_NO_ARENA
	json_set_alloc_funcs(arena_malloc, arena_free);
	mem_alloc = arena_malloc;
	mem_free = arena_free;
	mem_realloc = arena_realloc;
	mem_trim = arena_trim;
#endif
}

void jn_drop_at_exit(struct jn_doc *d)
{
#ifdef JFAST_NO_ARENA
	jn_doc_release(d);
#else
	(void)d;
#endif
}
