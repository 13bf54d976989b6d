/*
 * template.h - the Handlebars subset of Dotprompt prompt bodies.
 *
 * A template is compiled once into a tree of nodes (tpl_compile) and rendered
 * many times (tpl_render).  Rendering does not produce one string with
 * "<<<dotprompt:role:...>>>" markers as Dotprompt does: it produces a list of
 * pieces (text, role switch, history marker, media, section), so a value in
 * the input can never forge a role switch.  prompt.c turns pieces into
 * messages exactly as Dotprompt's toMessages() would.
 *
 * Language (Handlebars semantics, compiled as Dotprompt does it:
 * knownHelpersOnly, noEscape):
 *   {{path}} {{{path}}} {{&path}}   value; never HTML-escaped (noEscape);
 *              missing and null print nothing, numbers as JavaScript prints
 *              them; arrays and objects print as compact JSON (Handlebars
 *              would print "a,b" / "[object Object]": deliberately different)
 *   paths      this . foo.bar ../x this.x ./x foo.[odd key] items.0 items.length
 *   data       @root @index @key @first @last @state (the session's custom state)
 *   literals   "str" 'str' 12 -1.5 true false null undefined
 *   {{#if x}}..{{else}}..{{/if}}   falsy: false null "" 0 [] missing
 *                                  (includeZero=true makes 0 truthy)
 *   {{#unless x}} {{#each x}} (@index @key @first @last, {{else}} when empty)
 *   {{#with x}} {{#x}} sections, {{^x}} inverted sections, {{else if y}} chains
 *   {{#ifEquals a b}} {{#unlessEquals a b}}   strict equality (===)
 *   {{json x}} {{json x indent=2}}  JSON text of x (jv_dump; missing: null)
 *   {{role "system"}} {{role "user" purpose="p"}}   start a message
 *   {{history}} {{media url=u contentType=t}} {{section "name"}} {{lookup o k}}
 *   {{! c }} {{!-- c --}}  comments; {{~ ~}} whitespace control; standalone
 *   block and comment lines are removed as Handlebars does; \{{ is literal.
 * Not supported (compile errors): partials, decorators, sub-expressions,
 * block parameters, helpers other than the above.
 *
 * Ownership: tpl_compile returns a struct tpl the caller frees with
 * tpl_free (NULL ok).  A struct tpl_output is zero-initialised by the caller,
 * filled by tpl_render and released with tpl_output_release.
 */
#ifndef CORE_TEMPLATE_H
#define CORE_TEMPLATE_H

#include <stddef.h>

#include <jansson.h>

#include "status.h"

/* Bounds: deepest block nesting, largest template, largest rendering. */
#define TPL_MAX_DEPTH 64
#define TPL_MAX_SOURCE (1024 * 1024)
#define TPL_MAX_OUTPUT (8 * 1024 * 1024)

struct tpl;

enum tpl_piece_kind {
	TPL_TEXT,       /* text: the rendered text (text_len bytes) */
	TPL_ROLE,       /* text: role name; meta: role metadata object or NULL */
	TPL_HISTORY,    /* the {{history}} marker */
	TPL_MEDIA,      /* text: url; extra: content type or NULL */
	TPL_SECTION,    /* text: section name */
};

struct tpl_piece {
	enum tpl_piece_kind kind;
	char *text;
	size_t text_len;
	char *extra;
	json_t *meta;   /* owned reference or NULL */
	size_t line;    /* source line of the tag (0 for text) */
};

struct tpl_output {
	struct tpl_piece *v;
	size_t n, cap;
	size_t bytes;   /* text bytes so far (bounded by TPL_MAX_OUTPUT) */
};

/*
 * Compile src[0..len).  name and first_line say where the text came from:
 * errors read "NAME:LINE: message" with LINE counted from first_line for
 * the first byte of src.  CORE_EINVAL (syntax, unknown helper, unbalanced
 * block, bad path, nesting deeper than TPL_MAX_DEPTH), CORE_ETOOBIG (over
 * TPL_MAX_SOURCE), CORE_ENOMEM.
 */
enum core_status tpl_compile(const char *src, size_t len, const char *name,
                             size_t first_line, struct tpl **out,
                             struct core_err *e);
void tpl_free(struct tpl *t);

/* Whether the template contains a {{history}} marker anywhere. */
int tpl_has_history(const struct tpl *t);

/*
 * Render t with context (the root value for paths; may be NULL) and state
 * (the value of @state; may be NULL), appending pieces to out.  Adjacent
 * text is merged into one TPL_TEXT piece.  Errors: CORE_EINVAL "NAME:LINE:
 * ..." (a dynamic role name that is not system/user/model/tool, a media url
 * that is not a string), CORE_ETOOBIG past TPL_MAX_OUTPUT, CORE_ENOMEM.
 * On error out holds what was rendered so far; release it either way.
 */
enum core_status tpl_render(const struct tpl *t, const json_t *context,
                            const json_t *state, struct tpl_output *out,
                            struct core_err *e);
void tpl_output_release(struct tpl_output *out);

#endif
