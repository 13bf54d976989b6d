/* mcp_run.c - an invocation's MCP servers, from the configuration files to
 * the agent's tools; see mcp_run.h. */
#include "mcp_run.h"

#include <stdlib.h>
#include <string.h>

#include "tools.h"

enum core_status mcp_run_load(struct mcp_config *cfg, const char *const *files, size_t n,
                              struct core_err *e)
{
	enum core_status st = CORE_OK;
	for (size_t i = 0; !st && i < n; i++)
		st = mcp_config_load(cfg, files[i], e);
	/* The variable only stands in for the flag: --mcp-config given, it is
	 * not read, so a command line says which servers run. */
	for (const char *p = n ? NULL : getenv(MCP_CONFIG_VARIABLE); !st && p && *p;) {
		size_t len = strcspn(p, ":");
		char *file = strndup(p, len);
		if (!file)
			return core_fail(e, CORE_ENOMEM, "out of memory");
		if (len)
			st = mcp_config_load(cfg, file, e);
		free(file);
		p += len + (p[len] == ':');
	}
	return st;
}

enum core_status mcp_run_add_agent(struct mcp_config *cfg, const struct agent *a,
                                   struct core_err *e)
{
	size_t shared = cfg->n;
	enum core_status st = CORE_OK;
	/* Front matter comes only with a prompt file, so a->path is set. */
	if (a->mcp_servers) {
		char *dir = strdup(a->path);
		if (!dir)
			return core_fail(e, CORE_ENOMEM, "out of memory");
		char *slash = strrchr(dir, '/');
		st = mcp_config_add(cfg, a->mcp_servers, a->path, slash ? (*slash = 0, dir) : ".", e);
		free(dir);
	}
	if (!st && !(st = mcp_config_manifests(cfg, a->tools, a->tool_dirs, e)))
		mcp_config_settle(cfg, shared, a->tools);
	return st;
}

enum core_status mcp_run_start(struct mcp_set *s, const struct mcp_config *cfg,
                               mcp_failed_fn *skipped, void *ctx, struct core_err *e)
{
	enum core_status stopped = CORE_OK;
	/* Every server is spawned and asked to initialize first: they start
	 * up at the same time.  Their outcomes are taken in order. */
	for (size_t i = 0; i < cfg->n; i++) {
		struct core_err later = { 0 };
		mcp_set_begin(s, &cfg->servers[i], &later);
	}
	for (size_t i = 0; i < cfg->n; i++) {
		struct core_err later = { 0 };
		/* After a stop each server's start-up ends cancelled, broken
		 * (mcp_set_finish()): the agent's selections of it stay valid. */
		enum core_status st = mcp_set_finish(s, &cfg->servers[i], stopped ? &later : e);
		if (st == CORE_ECANCELLED) {
			stopped = st;
			continue;
		}
		/* A name collision is the configuration's mistake: even an
		 * optional server's stops the run. */
		if ((st == CORE_EUSAGE && !cfg->servers[i].unusable) ||
		    (st && !cfg->servers[i].optional))
			return st;
		if (st)
			skipped(ctx, e);
	}
	return stopped;
}

enum core_status mcp_run_tools(struct mcp_set *s, struct agent *a, size_t ncli,
                               struct core_err *e)
{
	tool_set_source(mcp_set_source(s));
	/* The prompt's entries come before the --tool values. */
	return mcp_set_select(s, a->tools, json_array_size(a->tools) > ncli, e);
}

enum core_status mcp_run_list(struct mcp_set *s, const struct mcp_config *cfg, const char *only,
                              mcp_row_fn *row, mcp_failed_fn *failed, void *ctx,
                              struct core_err *e)
{
	enum core_status result = CORE_OK, st;
	int found = 0;
	for (size_t i = 0; i < cfg->n; i++) {
		struct core_err later = { 0 };
		if (!only || !strcmp(only, cfg->servers[i].name))
			mcp_set_begin(s, &cfg->servers[i], &later);
	}
	for (size_t i = 0; i < cfg->n; i++) {
		if (only && strcmp(only, cfg->servers[i].name))
			continue;
		found = 1;
		size_t first = mcp_set_count(s);
		st = mcp_set_finish(s, &cfg->servers[i], e);
		if ((st == CORE_EUSAGE && !cfg->servers[i].unusable) || st == CORE_ECANCELLED)
			return st;
		if (st) {
			/* A health check: every server is tried, and each
			 * failure named. */
			failed(ctx, e);
			result = CORE_FAILED;
			continue;
		}
		for (size_t k = first; k < mcp_set_count(s); k++) {
			json_t *r = mcp_set_row(s, k);
			if (!r)
				return core_fail(e, CORE_ENOMEM, "out of memory");
			st = row(ctx, r, e);
			json_decref(r);
			if (st)
				return st;
		}
	}
	if (only && !found)
		return core_fail(e, CORE_EUSAGE, "no mcp server '%s' is configured", only);
	return result;
}
