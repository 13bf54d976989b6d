/* registry.c - find a model's provider by its name and run a generate call. */
#include "registry.h"

#include <stdlib.h>
#include <string.h>

#include "endpoints.h"
#include "model.h"
#include "provider_common.h"
#include "../base/json.h"
#include "../base/suggest.h"

/*
 * The providers.  Each lives in its own file (model_echo.c, model_script.c,
 * provider_openai.c, ...) and defines one struct model_provider, its
 * environment variables included; adding a provider is one line here,
 * and its key is then hidden from every child process (spawn.h).
 */
extern const struct model_provider model_echo;
extern const struct model_provider model_script;
extern const struct model_provider model_openai;
extern const struct model_provider model_openai_responses;
extern const struct model_provider model_googleai;
extern const struct model_provider model_anthropic;
extern const struct model_provider model_ollama;

static const struct model_provider *const providers[] = {
	&model_echo,
	&model_script,
	&model_openai,
	&model_openai_responses,
	&model_googleai,
	&model_anthropic,
	&model_ollama,
#ifdef REGISTRY_TEST_ROW
	/* tests/unit/provider_row_test.c: a provider that exists only in
	 * the test, registered the way a new one is, by this one row */
	REGISTRY_TEST_ROW,
#endif
};

#define NPROVIDERS (sizeof providers / sizeof providers[0])

const struct model_provider *model_provider_at(size_t i)
{
	return i < NPROVIDERS ? providers[i] : NULL;
}

const char *model_provider_name(size_t i)
{
	return i < NPROVIDERS ? providers[i]->prefix : NULL;
}

enum core_status model_key_variables_text(struct core_buf *b)
{
	enum core_status st = CORE_OK;
	const char *sep = "";
	for (size_t i = 0; !st && i < NPROVIDERS; i++) {
		const char *const *v = providers[i]->key_vars;
		int seen = 0;
		for (size_t j = 0; j < i && !seen; j++)
			seen = providers[j]->key_vars == v;     /* openai's two dialects */
		if (seen || !v || !*v)
			continue;
		for (const char *join = sep; !st && *v; v++, join = " or ")
			if (!(st = core_buf_adds(b, join)))
				st = core_buf_adds(b, *v);
		sep = ", ";
	}
	return st;
}

int model_key_variable(const char *entry)
{
	size_t len = strcspn(entry, "=");
	for (size_t i = 0; i < NPROVIDERS; i++) {
		for (const char *const *v = providers[i]->key_vars; v && *v; v++)
			if (strlen(*v) == len && !strncmp(*v, entry, len))
				return 1;
		for (const struct model_env_header *h = providers[i]->env_headers; h && h->var; h++)
			if (strlen(h->var) == len && !strncmp(h->var, entry, len))
				return 1;
	}
	return endpoints_variable(entry);
}

/* The provider named by name's part before '/' (all of it without one). */
static const struct model_provider *find_provider(const char *name);

/*
 * The models file, read once (endpoints_load()), and refused when one of
 * its endpoints takes a provider's name: that endpoint could never be
 * reached.  The check is the registry's, which knows the providers;
 * endpoints.c stands below it.
 */
static enum core_status load_endpoints(struct core_err *e)
{
	enum core_status st = endpoints_load(e);
	const char *n;
	for (size_t i = 0; !st && (n = endpoints_name(i)); i++)
		if (find_provider(n))
			st = core_fail(e, CORE_EINVAL, "models file: endpoint '%s': the name of a "
			               "built-in provider (at %s)", n, endpoints_file());
	return st;
}

/* The provider named by name's part before '/' (all of it without one). */
static const struct model_provider *find_provider(const char *name)
{
	size_t plen = strcspn(name, "/");
	for (size_t i = 0; i < NPROVIDERS; i++)
		if (strlen(providers[i]->prefix) == plen && !strncmp(providers[i]->prefix, name, plen))
			return providers[i];
	return NULL;
}

/*
 * Model names people bring from the providers' own tools, without the
 * provider: the provider their family belongs to.  Only for a hint.
 */
static const struct {
	const char *start, *provider;
} families[] = {
	{ "gpt-", "openai" }, { "chatgpt-", "openai" }, { "o1", "openai" }, { "o3", "openai" },
	{ "o4-", "openai" }, { "text-embedding-", "openai" },
	{ "gemini-", "googleai" },
	{ "claude-", "anthropic" },
	{ "llama", "ollama" }, { "qwen", "ollama" }, { "mistral", "ollama" }, { "mixtral", "ollama" },
	{ "gemma", "ollama" }, { "phi", "ollama" }, { "deepseek", "ollama" }, { "codellama", "ollama" },
};

/* Provider names of other tools, and what agentkit calls them. */
static const struct {
	const char *other, *provider;
} aliases[] = {
	{ "google", "googleai" }, { "gemini", "googleai" },
	{ "claude", "anthropic" }, { "gpt", "openai" },
};

enum core_status model_check(const char *name, struct core_err *e)
{
	const struct model_provider *p = find_provider(name);
	const char *slash = strchr(name, '/'), *rest = slash ? slash + 1 : "";
	size_t plen = strcspn(name, "/");
	enum core_status st;
	/* A models file that cannot be read fails every run: the variables
	 * it names could not be kept from the run's tools. */
	if ((st = load_endpoints(e)))
		return st;
	if (p && (!strcmp(p->prefix, "echo") ? !slash : *rest))
		return CORE_OK;
	if (!p && slash && endpoints_find(name, plen)) {
		if (*rest)
			return CORE_OK;
		return core_fail(e, CORE_ENOTFOUND, "model '%s' names no model: use %.*s/NAME", name,
		                 (int)plen, name);
	}
	if (p && !strcmp(p->prefix, "echo"))
		return core_fail(e, CORE_ENOTFOUND, "model '%s' not found (the echo model has no "
		                 "variants): did you mean 'echo'?", name);
	if (p)
		return core_fail(e, CORE_ENOTFOUND, "model '%s' names no %s: use %s/%s", name,
		                 strcmp(p->prefix, "script") ? "model" : "script file", p->prefix,
		                 strcmp(p->prefix, "script") ? "NAME" : "PATH");
	if (!*name)
		return core_fail(e, CORE_ENOTFOUND, "no model name given");
	if (!slash) {
		for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
			if (!strncmp(name, families[i].start, strlen(families[i].start)))
				return core_fail(e, CORE_ENOTFOUND, "model '%s' not found: model names "
				                 "are PROVIDER/NAME: did you mean '%s/%s'?", name,
				                 families[i].provider, name);
		static const char *const offline[] = { "echo", NULL };
		const char *near = core_closest(name, strlen(name), offline);
		if (near)
			return core_fail(e, CORE_ENOTFOUND, "model '%s' not found: did you mean '%s'?",
			                 name, near);
		return core_fail(e, CORE_ENOTFOUND, "model '%s' not found: model names are "
		                 "PROVIDER/NAME", name);
	}
	/* The providers' names and the endpoints' (as many as fit). */
	const char *names[NPROVIDERS + 64 + 1];
	size_t nn = 0;
	for (size_t i = 0; i < NPROVIDERS; i++)
		names[nn++] = model_provider_name(i);
	for (size_t i = 0; nn < NPROVIDERS + 64 && endpoints_name(i); i++)
		names[nn++] = endpoints_name(i);
	names[nn] = NULL;
	const char *near = core_closest(name, plen, names);
	for (size_t i = 0; !near && i < sizeof aliases / sizeof aliases[0]; i++)
		if (strlen(aliases[i].other) == plen && !strncmp(aliases[i].other, name, plen))
			near = aliases[i].provider;
	if (near)
		return core_fail(e, CORE_ENOTFOUND, "model '%s' not found (unknown provider '%.*s'): "
		                 "did you mean '%s/%s'?", name, (int)plen, name, near, rest);
	return core_fail(e, CORE_ENOTFOUND, "model '%s' not found (unknown provider '%.*s')",
	                 name, (int)plen, name);
}

enum core_status model_list(const char *key_file, json_t **rows, int *failed,
                            struct core_err *e)
{
	enum core_status fst;
	*failed = 0;
	*rows = NULL;
	if ((fst = load_endpoints(e)))
		return fst;
	if (!(*rows = json_array()))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	for (size_t i = 0; i < NPROVIDERS; i++) {
		const struct model_provider *p = providers[i];
		struct core_err le = { 0 };
		enum core_status st = CORE_OK;
		json_t *row = json_pack("{s:s}", "provider", p->prefix);
		if (row && !strcmp(p->prefix, "echo"))
			st = json_object_set_new(row, "models", json_pack("[s]", "echo")) ? CORE_ENOMEM : 0;
		else if (row && !strcmp(p->prefix, "script"))
			st = json_object_set_new(row, "models", json_pack("[s]", "script/PATH"))
			   ? CORE_ENOMEM : 0;
		else if (row && p->list && (st = p->list(key_file, row, &le)) && st != CORE_ENOMEM) {
			*failed = 1;
			if (json_object_set_new(row, "error", jv_error_new(st, le.msg)))
				st = CORE_ENOMEM;
			else
				st = CORE_OK;
		}
		if (st)
			json_decref(row);
		if (!row || st || json_array_append_new(*rows, row)) {
			json_decref(*rows);
			*rows = NULL;
			return core_fail(e, CORE_ENOMEM, "out of memory");
		}
	}
	if ((fst = endpoints_list(*rows, e))) {
		json_decref(*rows);
		*rows = NULL;
	}
	return fst;
}

enum core_status model_check_credentials(const char *name, const char *key_file,
                                         struct core_err *e)
{
	const struct model_provider *p = find_provider(name);
	const char *slash = strchr(name, '/');
	const struct endpoint *ep;
	enum core_status st;
	if ((st = load_endpoints(e)))
		return st;
	if (p)          /* echo and script have their own generate, and no key */
		return p->dialect ? prov_check_key(p->dialect, key_file, e) : CORE_OK;
	if (slash && (ep = endpoints_find(name, (size_t)(slash - name))))
		return endpoints_check_credentials(ep, e);
	return model_check(name, e);
}

enum core_status model_generate(const char *name, const struct model_request *req,
                                const struct model_stream *stream,
                                struct model_response *resp, struct core_err *e)
{
	const struct model_provider *p = find_provider(name);
	const char *slash = strchr(name, '/');
	const struct endpoint *ep;
	enum core_status st;
	if ((st = load_endpoints(e)))
		return st;
	/* A provider has a dialect or its own generate (model.h). */
	if (p && p->dialect)
		return prov_generate(p->dialect, slash ? slash + 1 : "", req, stream, resp, e);
	if (p)
		return p->generate(slash ? slash + 1 : "", req, stream, resp, e);
	if (slash && slash[1] && (ep = endpoints_find(name, (size_t)(slash - name))))
		return endpoints_generate(ep, slash + 1, req, stream, resp, e);
	return model_check(name, e);
}

int model_takes_history(const char *name)
{
	const struct model_provider *p = find_provider(name);
	const char *slash = strchr(name, '/');
	if (p)
		return p->dialect != NULL;
	return slash && slash[1] && load_endpoints(NULL) == CORE_OK &&
	       endpoints_find(name, (size_t)(slash - name));
}

enum core_status model_check_request(const char *name, const struct model_request *req,
                                     struct core_err *e)
{
	const struct model_provider *p = find_provider(name);
	const char *slash = strchr(name, '/');
	const struct endpoint *ep;
	const struct prov_dialect *d = NULL;
	enum core_status st;
	struct prov_body body = PROV_BODY_INIT;
	if ((st = load_endpoints(e)))
		return st;
	if (p)
		d = p->dialect;         /* NULL: echo and script, which take anything */
	else if (slash && slash[1] && (ep = endpoints_find(name, (size_t)(slash - name))))
		d = endpoints_dialect(ep);
	else
		return model_check(name, e);
	if (!d)
		return CORE_OK;
	void *state = calloc(1, d->size);
	if (!state)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	st = d->build(state, slash ? slash + 1 : "", "", req, &body, e);
	core_buf_release(&body.buf);
	if (d->release)
		d->release(state);
	free(state);
	return st;
}
