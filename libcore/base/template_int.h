/*
 * template_int.h - internal to the template files: the tree the compiler
 * (template.c) builds and the renderer (template_render.c) walks.
 * Ownership: a struct tpl owns every node, expression and string in it
 * (tpl_free()).
 */
#ifndef CORE_TEMPLATE_INT_H
#define CORE_TEMPLATE_INT_H

#include <stddef.h>

#include <jansson.h>

enum helper {
	H_NONE,
	/* inline helpers */
	H_JSON, H_ROLE, H_HISTORY, H_MEDIA, H_SECTION, H_LOOKUP,
	/* block helpers */
	H_IF, H_UNLESS, H_EACH, H_WITH, H_IFEQ, H_UNLESSEQ,
	/* mustache sections: {{#path}} and {{^path}} */
	H_SECT, H_INVSECT,
};

enum dvar { DV_NONE, DV_ROOT, DV_INDEX, DV_KEY, DV_FIRST, DV_LAST, DV_STATE };

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

/* Non-zero for a role {{role}} accepts: system, user, model, tool. */
int tpl_valid_role(const char *r);

/* The value of a hash argument (key=value) of node, borrowed, or NULL. */
const struct texpr *tpl_hash_get(const struct tnode *node, const char *key);

#endif
