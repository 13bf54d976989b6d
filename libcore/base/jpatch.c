/* jpatch.c - what JSON Patch diff (jpatch_diff.c) and apply (jpatch_apply.c)
 * share: nesting depth and pointer escaping; see jpatch.h. */
#include "jpatch.h"
#include "jpatch_int.h"

size_t jp_depth_of(const struct jn *v, size_t limit)
{
	size_t d = 0, c, n = jn_size(v);
	if (!jp_is_container(v))
		return 0;
	if (!limit)
		return 1;
	for (size_t i = 0; i < n && d < limit; i++) {
		const struct jn *x = v->t == JN_OBJ ? &jn_mem_at(v, i)->v : jn_at(v, i);
		if (jp_is_container(x) && (c = jp_depth_of(x, limit - 1)) > d)
			d = c;
	}
	return d + 1;
}

enum core_status jpatch_escape_token(const char *s, size_t n,
                                     struct core_buf *out)
{
	enum core_status st;
	size_t i = 0, run;
	while (i < n) {
		run = i;
		while (run < n && s[run] != '~' && s[run] != '/')
			run++;
		if (run > i && (st = core_buf_add(out, s + i, run - i)))
			return st;
		if (run == n)
			break;
		if ((st = core_buf_add(out, s[run] == '~' ? "~0" : "~1", 2)))
			return st;
		i = run + 1;
	}
	return CORE_OK;
}
