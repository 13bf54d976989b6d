/*
 * registry_test.c - unit tests for the table of providers
 * (libcore/model/registry.c): every provider keeps model.h's rule, exactly
 * one of a dialect and its own generate, and a dialect's provider is the
 * one that names it, so a call and --list-models read the same variables.
 */
#include <stdio.h>

#include "../../libcore/model/provider_common.h"
#include "../../libcore/model/registry.h"
#include "tap.h"

int main(void)
{
	const struct model_provider *p;
	size_t n = 0, http = 0;
	for (size_t i = 0; (p = model_provider_at(i)); i++) {
		char name[160], detail[160];
		n++;
		snprintf(name, sizeof name, "%s: a dialect or a generate, not both", p->prefix);
		snprintf(detail, sizeof detail, "dialect %s, generate %s",
		         p->dialect ? "set" : "NULL", p->generate ? "set" : "NULL");
		report(!p->dialect != !p->generate, name, detail);
		if (!p->dialect)
			continue;
		http++;
		snprintf(name, sizeof name, "%s: its dialect names it back", p->prefix);
		snprintf(detail, sizeof detail, "the dialect's provider is '%s'",
		         p->dialect->p ? p->dialect->p->prefix : "(none)");
		report(p->dialect->p == p, name, detail);
	}
	/* The table has both kinds: the offline echo and script, and the
	 * HTTP providers (openai and the others). */
	report(n > http && http > 0, "both kinds of provider are in the table", NULL);
	return tap_end();
}
