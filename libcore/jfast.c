/* jfast.c - the fast path of jv_parse(); see jfast.h. */
#include "jfast.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buf.h"
#include "json.h"

/* Stay well inside jansson's own limit, and let it judge anything deeper. */
#define FAST_MAX_DEPTH (JSON_PARSER_MAX_DEPTH - 16)

struct fp {
	const char *p, *end;
	char *scratch;          /* unescaped string bytes */
	size_t cap;
};

static void ws(struct fp *f)
{
	while (f->p < f->end && (*f->p == ' ' || *f->p == '\n' || *f->p == '\r'
	                         || *f->p == '\t'))
		f->p++;
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
			size_t k = jv_utf8_decode((const unsigned char *)f->p,
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
		if (f->end - f->p < 2)
			return 0;
		{
			char e = f->p[1], out[4];
			uint32_t u, lo;
			f->p += 2;
			switch (e) {
			case '"': case '\\': case '/':
				out[0] = e;
				break;
			case 'b': out[0] = '\b'; break;
			case 'f': out[0] = '\f'; break;
			case 'n': out[0] = '\n'; break;
			case 'r': out[0] = '\r'; break;
			case 't': out[0] = '\t'; break;
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
				if (u < 0x80) {
					out[0] = (char)u;
					if (!put(f, &len, out, 1))
						return 0;
				} else if (u < 0x800) {
					out[0] = (char)(0xc0 | (u >> 6));
					out[1] = (char)(0x80 | (u & 0x3f));
					if (!put(f, &len, out, 2))
						return 0;
				} else if (u < 0x10000) {
					out[0] = (char)(0xe0 | (u >> 12));
					out[1] = (char)(0x80 | ((u >> 6) & 0x3f));
					out[2] = (char)(0x80 | (u & 0x3f));
					if (!put(f, &len, out, 3))
						return 0;
				} else {
					out[0] = (char)(0xf0 | (u >> 18));
					out[1] = (char)(0x80 | ((u >> 12) & 0x3f));
					out[2] = (char)(0x80 | ((u >> 6) & 0x3f));
					out[3] = (char)(0x80 | (u & 0x3f));
					if (!put(f, &len, out, 4))
						return 0;
				}
				continue;
			default:
				return 0;
			}
			if (!put(f, &len, out, 1))
				return 0;
		}
	}
}

static int digit(char c)
{
	return c >= '0' && c <= '9';
}

static json_t *number(struct fp *f)
{
	const char *s = f->p, *q = f->p;
	int real = 0;
	if (q < f->end && *q == '-')
		q++;
	if (q >= f->end || !digit(*q))
		return NULL;
	if (*q == '0')
		q++;
	else
		while (q < f->end && digit(*q))
			q++;
	if (q < f->end && *q == '.') {
		real = 1;
		q++;
		if (q >= f->end || !digit(*q))
			return NULL;
		while (q < f->end && digit(*q))
			q++;
	}
	if (q < f->end && (*q == 'e' || *q == 'E')) {
		real = 1;
		q++;
		if (q < f->end && (*q == '+' || *q == '-'))
			q++;
		if (q >= f->end || !digit(*q))
			return NULL;
		while (q < f->end && digit(*q))
			q++;
	}
	/* The token must end here, as jansson's lexer would end it. */
	if (q < f->end && (digit(*q) || (*q >= 'a' && *q <= 'z')
	                   || (*q >= 'A' && *q <= 'Z') || *q == '.' || *q == '-'
	                   || *q == '+'))
		return NULL;
	f->p = q;
	if (!real) {
		size_t nd = (size_t)(q - s) - (*s == '-');
		if (nd <= 18) {
			const char *d = s + (*s == '-');
			int64_t v = 0;
			while (d < q)
				v = v * 10 + (*d++ - '0');
			return json_integer(*s == '-' ? -v : v);
		}
		{
			char tmp[32];
			long long v;
			if ((size_t)(q - s) >= sizeof tmp)
				return NULL;
			memcpy(tmp, s, (size_t)(q - s));
			tmp[q - s] = 0;
			errno = 0;
			v = strtoll(tmp, NULL, 10);
			if (errno)
				return NULL;
			return json_integer(v);
		}
	}
	{
		char tmp[64];
		double d;
		if ((size_t)(q - s) >= sizeof tmp)
			return NULL;
		memcpy(tmp, s, (size_t)(q - s));
		tmp[q - s] = 0;
		errno = 0;
		d = strtod(tmp, NULL);
		if (isinf(d) || isnan(d))
			return NULL;
		return json_real(d);
	}
}

static json_t *value(struct fp *f, int depth);

static json_t *object(struct fp *f, int depth)
{
	json_t *o = json_object(), *v;
	const char *k;
	char *key = NULL;
	size_t kn, size;
	if (!o)
		return NULL;
	ws(f);
	if (f->p < f->end && *f->p == '}') {
		f->p++;
		return o;
	}
	for (;;) {
		if (f->p >= f->end || *f->p != '"')
			goto fail;
		f->p++;
		if (!string(f, &k, &kn) || memchr(k, 0, kn))
			goto fail;
		/* An unescaped key points into the input; an escaped one into
		 * scratch, which the value may reuse: keep a copy of it. */
		if (k == f->scratch) {
			if (!(key = malloc(kn + 1)))
				goto fail;
			memcpy(key, k, kn);
			k = key;
		}
		ws(f);
		if (f->p >= f->end || *f->p != ':')
			goto fail;
		f->p++;
		ws(f);
		v = value(f, depth + 1);
		/* A duplicate key replaces a member instead of adding one:
		 * jansson rejects those, so let it say so (one hash, not two). */
		size = json_object_size(o);
		if (!v || json_object_setn_new_nocheck(o, k, kn, v)
		    || json_object_size(o) == size)
			goto fail;
		free(key);
		key = NULL;
		ws(f);
		if (f->p >= f->end)
			goto fail;
		if (*f->p == '}') {
			f->p++;
			return o;
		}
		if (*f->p != ',')
			goto fail;
		f->p++;
		ws(f);
	}
fail:
	free(key);
	json_decref(o);
	return NULL;
}

static json_t *array(struct fp *f, int depth)
{
	json_t *a = json_array(), *v;
	if (!a)
		return NULL;
	ws(f);
	if (f->p < f->end && *f->p == ']') {
		f->p++;
		return a;
	}
	for (;;) {
		if (!(v = value(f, depth + 1)) || json_array_append_new(a, v))
			goto fail;
		ws(f);
		if (f->p >= f->end)
			goto fail;
		if (*f->p == ']') {
			f->p++;
			return a;
		}
		if (*f->p != ',')
			goto fail;
		f->p++;
		ws(f);
	}
fail:
	json_decref(a);
	return NULL;
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

static json_t *value(struct fp *f, int depth)
{
	const char *s;
	size_t n;
	if (depth > FAST_MAX_DEPTH || f->p >= f->end)
		return NULL;
	switch (*f->p) {
	case '{':
		f->p++;
		return object(f, depth);
	case '[':
		f->p++;
		return array(f, depth);
	case '"':
		f->p++;
		if (!string(f, &s, &n))
			return NULL;
		return json_stringn_nocheck(s, n);
	case 't':
		return word(f, "true", 4) ? json_true() : NULL;
	case 'f':
		return word(f, "false", 5) ? json_false() : NULL;
	case 'n':
		return word(f, "null", 4) ? json_null() : NULL;
	default:
		return number(f);
	}
}

json_t *jv_parse_fast(const char *p, size_t n)
{
	static int c_locale = -1;
	struct fp f = { p, p + n, NULL, 0 };
	json_t *v;

	/* jansson reads reals with '.' whatever the locale; strtod does not. */
	if (c_locale < 0)
		c_locale = localeconv()->decimal_point[0] == '.'
		           && !localeconv()->decimal_point[1];
	if (!c_locale)
		return NULL;
	ws(&f);
	v = value(&f, 1);
	if (v) {
		ws(&f);
		if (f.p != f.end) {
			json_decref(v);
			v = NULL;
		}
	}
	free(f.scratch);
	return v;
}

enum core_status jv_load_file(const char *path, size_t max, json_t **out,
                              struct core_err *e)
{
	const char *name = strcmp(path, "-") ? path : "<stdin>";
	struct core_buf b = CORE_BUF_INIT(max);
	enum core_status st;
	/* read, not mmap: a file truncated under a mapping would kill the
	 * process with SIGBUS instead of giving an error */
	*out = NULL;
	if (!(st = core_buf_read_file(&b, path, e))
	    && !(*out = jv_parse(b.p ? b.p : "", b.len, name, 0, e)))
		st = e->st;
	core_buf_release(&b);
	return st;
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
#endif
}

void jv_drop_at_exit(json_t *v)
{
#ifdef JFAST_NO_ARENA
	json_decref(v);
#else
	(void)v;
#endif
}
