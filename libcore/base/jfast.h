/*
 * jfast.h - compact JSON documents for the jpatch tools, and the fast path
 * of jv_parse().
 *
 * A jansson tree costs 100-200 bytes a value (a json_t, a hashtable with
 * buckets per object, a list node and a copy per key and string): a 10 MB
 * document became a 100+ MB tree, and clearing those pages was most of a
 * JSON Patch run.  A struct jn is 16 bytes; an object member 32; strings
 * and keys without escapes point into the document's text rather than
 * being copied, so a parsed document costs about two to three times its
 * text (the text included).
 *
 * jn_parse() reads the common case straight from the buffer and gives up
 * on anything it is not certain of - invalid JSON, duplicate keys, a NUL in
 * a key, nesting near the depth limit - so that jansson itself runs then
 * (jv_parse()) and every error message and rejection stays jansson's; the
 * tree jansson built is then converted.  Integers past 64 bits and reals
 * past the double range become JN_BIG nodes holding their exact text, as
 * jv_parse() makes bignums.  jv_parse() in turn builds its json_t from a
 * struct jn, so there is one parser.
 *
 * Ownership: a struct jn owns its containers and the strings marked own;
 * other strings borrow the text the document was parsed from, which must
 * outlive it (struct jn_doc keeps the two together).  jn_release() frees
 * what a node owns.  Nodes are values: moving one is a struct copy.
 */
#ifndef CORE_JFAST_H
#define CORE_JFAST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "status.h"

enum jn_type {
	JN_NULL, JN_FALSE, JN_TRUE, JN_INT, JN_REAL,
	JN_BIG,         /* a number jansson cannot hold: its exact text */
	JN_STR, JN_ARR, JN_OBJ
};

struct jn_box;

struct jn {
	uint8_t t;              /* enum jn_type */
	uint8_t own;            /* JN_STR, JN_BIG: s is owned */
	uint16_t spare;         /* (JN_ARR, JN_OBJ: with own and n, the
	                           place jn_redump() keeps) */
	uint32_t n;             /* JN_STR, JN_BIG: bytes of s */
	union {
		int64_t i;
		double d;
		const char *s;
		struct jn_box *b;       /* JN_ARR, JN_OBJ: NULL when empty */
	} u;
};

struct jn_mem {                 /* an object member */
	const char *k;
	uint32_t kn;
	uint8_t kown;           /* k is owned */
	struct jn v;
};

/* Longest string, and most elements or members, a document may hold. */
#define JN_MAX_LEN ((size_t)UINT32_MAX - 1)

#define JN_NULL_INIT { JN_NULL, 0, 0, 0, { 0 } }

/* Elements or members of a container (0 for anything else). */
size_t jn_size(const struct jn *v);
/* Borrowed pointers into a container; valid until it is next changed. */
struct jn *jn_at(const struct jn *arr, size_t i);
struct jn_mem *jn_mem_at(const struct jn *obj, size_t i);
struct jn *jn_get(const struct jn *obj, const char *k, size_t kn);

/* Set member k (copied) of obj to v (taken, also on error): a present
 * member keeps its place, a new one goes last.  CORE_ENOMEM, CORE_ETOOBIG. */
enum core_status jn_set(struct jn *obj, const char *k, size_t kn, struct jn v);
/* Remove member k; its value goes to *out (owned) or is released when out
 * is NULL.  0 when there is no such member. */
int jn_del(struct jn *obj, const char *k, size_t kn, struct jn *out);
/* Insert v (taken) before element i (i <= size). */
enum core_status jn_insert(struct jn *arr, size_t i, struct jn v);
/* Remove element i (< size) into *out or release it. */
void jn_remove(struct jn *arr, size_t i, struct jn *out);
/* Free what v owns; v becomes null. */
void jn_release(struct jn *v);
/* A deep copy; own_all copies borrowed strings too (for a copy that must
 * outlive v's text).  CORE_ENOMEM. */
enum core_status jn_copy(const struct jn *v, int own_all, struct jn *out);
/* An empty object or array. */
struct jn jn_container(enum jn_type t);

/* Deep equality as jv_equal(): numbers by exact value, objects as sets. */
int jn_equal(const struct jn *a, const struct jn *b);
/* Append v as jv_dump() would write it.  CORE_EINVAL past JV_MAX_DEPTH * 4
 * levels, CORE_ENOMEM, CORE_ETOOBIG. */
enum core_status jn_dump(const struct jn *v, struct core_buf *out);
/*
 * Write a document again and again as it changes (jpatch-apply --stream:
 * the live document after each patch), copying from the last line the
 * bytes of every container that did not change.  r->line holds the line
 * written (no newline), in jn_dump()'s bytes; the containers of the tree
 * remember where they were in it, so one struct jn_redump serves one
 * tree.  Whoever changes the tree in place calls jn_touch() on every
 * container from the root down to the one it changes (JSON Patch's write
 * paths do), and jn_unplace() on a container it moves to another parent;
 * containers made anew (parsed, copied, built) have no place and are
 * written in full.  Errors as jn_dump(); after one the next line is
 * written in full.
 */
struct jn_redump {
	struct core_buf line;   /* the last line */
	struct core_buf next;   /* the line being written */
};
#define JN_REDUMP_INIT { CORE_BUF_INIT(CORE_BUF_UNLIMITED), CORE_BUF_INIT(CORE_BUF_UNLIMITED) }
enum core_status jn_redump(struct jn_redump *r, struct jn *root);
void jn_redump_release(struct jn_redump *r);
/* v (a container; anything else is a no-op) changed: its last bytes are
 * stale.  jn_unplace(): v moved; where it was says nothing.  Neither
 * costs anything but two bits of the node. */
void jn_touch(struct jn *v);
void jn_unplace(struct jn *v);

/* "object", "array", "string", "number", "boolean", "null". */
const char *jn_type_name(const struct jn *v);

/* Conversions; NULL / CORE_ENOMEM when memory runs out.  jn_from_json
 * copies every string (also CORE_ETOOBIG past JN_MAX_LEN). */
json_t *jn_to_json(const struct jn *v);
enum core_status jn_from_json(const json_t *v, struct jn *out);

/*
 * Parse p[0..n) into *out, borrowing p for strings: p must outlive *out.
 * name and lineno as for jv_parse(), whose messages it gives.  CORE_EINVAL,
 * CORE_ENOMEM, CORE_ETOOBIG.
 */
enum core_status jn_parse(const char *p, size_t n, const char *name,
                          size_t lineno, struct jn *out, struct core_err *e);

/* The fast path of jv_parse(): a new reference, or NULL (no error) for
 * jansson to judge - also for a document with a number jansson refuses,
 * so that jv_parse() makes its bignums as it always has. */
json_t *jv_parse_fast(const char *p, size_t n);

/* A document and the text its strings borrow. */
struct jn_doc {
	struct jn root;
	char *text;
};

#define JN_DOC_INIT { JN_NULL_INIT, NULL }

/*
 * Read and parse the whole file path ("-" is stdin) into d, whose text is
 * kept for the strings.  A file larger than max bytes fails with
 * CORE_ETOOBIG.  On error d is left empty, with the message in e
 * (CORE_EINVAL names the file, line and column).
 */
enum core_status jn_load_file(const char *path, size_t max, struct jn_doc *d,
                              struct core_err *e);
/* Parse p[0..n) into d from a copy of the text (for a line buffer about
 * to be reused). */
enum core_status jn_load_copy(const char *p, size_t n, const char *name,
                              size_t lineno, struct jn_doc *d,
                              struct core_err *e);
void jn_doc_release(struct jn_doc *d);

/*
 * Give jansson and struct jn a faster allocator for the rest of the
 * process: size-class free lists over large mappings advised as
 * transparent huge pages (one page fault per 2 MB instead of per 4 KB),
 * no consolidation passes.  Memory freed is reused, never returned to the
 * system: meant for the jpatch filters, whose peak is one or two
 * documents.  Call before any JSON value exists; thread-safe (per-thread
 * free lists).
 * Sanitizer builds keep malloc so leak and bounds checks stay exact.
 */
void jv_fast_alloc(void);

/*
 * Drop d just before the process exits.  Like git's UNLEAK: walking a
 * 10 MB tree to free it costs milliseconds that the kernel does for free
 * at exit, so plain builds skip it; sanitizer builds release it so leak
 * checking stays exact.
 */
void jn_drop_at_exit(struct jn_doc *d);

#endif
