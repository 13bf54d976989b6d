/*
 * fuzz_template.c - the Handlebars subset of prompt bodies
 * (libcore/base/template.c), compiled and rendered without front matter.
 *
 * Input: a template.
 * Invariants:
 *  - a refused template names itself and a line within it: "t:LINE: ...";
 *  - rendering is deterministic: twice, the same pieces;
 *  - pieces are well formed: a text piece has its length, the text bytes
 *    counted stay within TPL_MAX_OUTPUT, adjacent text pieces are merged,
 *    and a tag piece names a line of the template.
 */
#include "fuzz.h"

#include <string.h>

#include "../../libcore/base/json.h"
#include "../../libcore/base/template.h"

static json_t *context, *state;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct core_err e = { 0 };
	static const char c[] = "{\"name\":\"Ada\",\"list\":[1,2.5,\"three\",[4],{\"k\":\"v\"}],"
	                        "\"obj\":{\"a\":{\"b\":true},\"odd key\":0,\"e\":\"\"},"
	                        "\"flag\":false,\"none\":null,\"big\":12345678901234567890,"
	                        "\"role\":\"system\",\"url\":\"https://x/y.png\"}";
	static const char s[] = "{\"tasks\":[{\"title\":\"a\"}],\"n\":3}";
	context = jv_parse(c, sizeof c - 1, "context", 0, &e);
	state = jv_parse(s, sizeof s - 1, "state", 0, &e);
	if (!context || !state)
		abort();
	(void)argc;
	(void)argv;
	return 0;
}

/* The source's line count: tags must name a line within it. */
static size_t lines_of(const uint8_t *p, size_t n)
{
	size_t l = 1;
	for (size_t i = 0; i < n; i++)
		l += p[i] == '\n';
	return l;
}

static void check_pieces(const struct tpl_output *o, size_t nlines)
{
	size_t bytes = 0;
	for (size_t i = 0; i < o->n; i++) {
		const struct tpl_piece *pc = &o->v[i];
		if (pc->kind == TPL_TEXT) {
			FUZZ_CHECK(pc->text || !pc->text_len, "text piece without text");
			FUZZ_CHECK(i == 0 || o->v[i - 1].kind != TPL_TEXT,
			           "adjacent text pieces %zu and %zu not merged", i - 1, i);
			bytes += pc->text_len;
		} else {
			FUZZ_CHECK(pc->line >= 1 && pc->line <= nlines,
			           "tag piece %zu at line %zu of %zu", i, pc->line, nlines);
		}
	}
	FUZZ_CHECK(bytes <= TPL_MAX_OUTPUT, "%zu text bytes rendered", bytes);
}

static int same_pieces(const struct tpl_output *a, const struct tpl_output *b)
{
	if (a->n != b->n)
		return 0;
	for (size_t i = 0; i < a->n; i++) {
		const struct tpl_piece *x = &a->v[i], *y = &b->v[i];
		if (x->kind != y->kind || x->text_len != y->text_len ||
		    (x->text_len && memcmp(x->text, y->text, x->text_len)) ||
		    !x->extra != !y->extra || (x->extra && strcmp(x->extra, y->extra)) ||
		    !x->meta != !y->meta || (x->meta && !jv_same(x->meta, y->meta)))
			return 0;
	}
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tpl *t = NULL;
	struct core_err e = { 0 };
	enum core_status st = tpl_compile((const char *)data, size, "t", 1, &t, &e);
	if (st != CORE_OK) {
		FUZZ_CHECK(!t, "a refused template was returned");
		FUZZ_CHECK(!strncmp(e.msg, "t:", 2) || st == CORE_ENOMEM || st == CORE_ETOOBIG,
		           "a refusal that does not name the template: %s", e.msg);
		if (!strncmp(e.msg, "t:", 2)) {
			long line = strtol(e.msg + 2, NULL, 10);
			FUZZ_CHECK(line >= 1 && (size_t)line <= lines_of(data, size),
			           "an error at a line outside the template: %s", e.msg);
		}
		return 0;
	}
	struct tpl_output o1 = { 0 }, o2 = { 0 };
	struct core_err e1 = { 0 }, e2 = { 0 };
	enum core_status s1 = tpl_render(t, context, state, &o1, &e1);
	enum core_status s2 = tpl_render(t, context, state, &o2, &e2);
	FUZZ_CHECK(s1 == s2 && !strcmp(e1.msg, e2.msg), "rendering twice differs: %s / %s",
	           e1.msg, e2.msg);
	FUZZ_CHECK(same_pieces(&o1, &o2), "rendering twice gives different pieces");
	if (s1 == CORE_OK)
		check_pieces(&o1, lines_of(data, size));
	(void)tpl_has_history(t);
	tpl_output_release(&o1);
	tpl_output_release(&o2);
	tpl_free(t);
	return 0;
}
