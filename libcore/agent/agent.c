/* agent.c - agent definitions from prompt files or flags, and lookup by name. */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/buf.h"
#include "../base/json.h"
#include "../base/suggest.h"
#include "../base/util.h"
#include "delegate.h"
#include "prompt.h"
#include "structured.h"

/* ---- small string lists ---- */

/* Add s to the list, unless it is there: a folder searched twice would
 * be named twice in "searched: ...". */
static enum core_status list_add(char ***list, size_t *n, const char *s)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*list)[i], s))
			return CORE_OK;
	char **l = realloc(*list, (*n + 2) * sizeof *l);
	if (!l)
		return CORE_ENOMEM;
	*list = l;
	if (!(l[*n] = strdup(s)))
		return CORE_ENOMEM;
	l[++*n] = NULL;
	return CORE_OK;
}

/* The agent search path: --agents, $AGENTKIT_PATH, ./agents, then the
 * user's own ${XDG_CONFIG_HOME:-$HOME/.config}/agentkit/agents (left out
 * when neither variable is set). */
static enum core_status search_path(const char *agents_dir, char ***dirs, size_t *n)
{
	*dirs = NULL;
	*n = 0;
	enum core_status st;
	if (agents_dir && (st = list_add(dirs, n, agents_dir)))
		return st;
	const char *env = getenv("AGENTKIT_PATH");
	if (env && *env) {
		char *copy = strdup(env), *save = NULL;
		if (!copy)
			return CORE_ENOMEM;
		for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
			if ((st = list_add(dirs, n, d))) {
				free(copy);
				return st;
			}
		free(copy);
	}
	if ((st = list_add(dirs, n, "agents")))
		return st;
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	struct core_buf p = CORE_BUF_INIT(PATH_MAX);
	if (xdg && *xdg == '/')
		st = core_buf_addf(&p, "%s/agentkit/agents", xdg);
	else if (home && *home)
		st = core_buf_addf(&p, "%s/.config/agentkit/agents", home);
	if (!st && p.len)
		st = list_add(dirs, n, p.p);
	core_buf_release(&p);
	return st;
}

enum core_status agent_search_path(const char *agents_dir, char ***dirs)
{
	size_t n;
	enum core_status st = search_path(agents_dir, dirs, &n);
	if (st) {
		core_strv_free(*dirs);
		*dirs = NULL;
	}
	return st;
}

void agent_path_free(char **dirs)
{
	core_strv_free(dirs);
}

static int is_file(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The agent on the search path whose name is closest to name (suggest.h)
 * into near (NAME_MAX + 1 bytes; "" for none); near itself, or NULL. */
static const char *closest_agent(const char *name, char **dirs, char *near)
{
	*near = 0;
	for (char **d = dirs; *d; d++) {
		DIR *dh = opendir(*d);
		struct dirent *de;
		while (dh && (de = readdir(dh))) {
			size_t n = strlen(de->d_name);
			char stem[NAME_MAX + 1];
			if (n <= 7 || strcmp(de->d_name + n - 7, ".prompt"))
				continue;
			snprintf(stem, sizeof stem, "%.*s", (int)(n - 7), de->d_name);
			/* The earlier of two as close wins, as in core_closest(). */
			const char *cands[] = { *near ? near : stem, stem, NULL };
			const char *best = core_closest(name, strlen(name), cands);
			if (best == stem)
				memcpy(near, stem, strlen(stem) + 1);
		}
		if (dh)
			closedir(dh);
	}
	return *near ? near : NULL;
}

/*
 * Find NAME.prompt on the search path, or take name as a path.  *found is a
 * new string.
 */
static enum core_status find_prompt(const char *name, char **dirs, char **found,
                                    struct core_err *e)
{
	size_t len = strlen(name);
	if (strchr(name, '/') || (len > 7 && !strcmp(name + len - 7, ".prompt"))) {
		if (!is_file(name))
			return core_fail(e, CORE_ENOTFOUND, "agent '%s' not found", name);
		if (!(*found = strdup(name)))
			return core_fail(e, CORE_ENOMEM, "out of memory");
		return CORE_OK;
	}
	struct core_buf p = CORE_BUF_INIT(PATH_MAX), tried = CORE_BUF_INIT(8192);
	for (char **d = dirs; *d; d++) {
		core_buf_reset(&p);
		if (core_buf_addf(&p, "%s/%s.prompt", *d, name)) {
			core_buf_release(&p);
			core_buf_release(&tried);
			return core_fail(e, CORE_EINVAL, "agent name '%s' is too long", name);
		}
		if (is_file(p.p)) {
			*found = core_buf_detach(&p, NULL);
			core_buf_release(&tried);
			return CORE_OK;
		}
		core_buf_addf(&tried, "%s%s", tried.len ? ", " : "", *d);
	}
	char near[NAME_MAX + 1];
	if (closest_agent(name, dirs, near))
		core_fail(e, CORE_ENOTFOUND, "agent '%s' not found (searched: %s): did you mean "
		          "'%s'?", name, tried.len ? tried.p : "", near);
	else
		core_fail(e, CORE_ENOTFOUND, "agent '%s' not found (searched: %s)", name,
		          tried.len ? tried.p : "");
	core_buf_release(&p);
	core_buf_release(&tried);
	return CORE_ENOTFOUND;
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

/* The base name of a prompt file without ".prompt". */
static char *stem_of(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	size_t n = strlen(b);
	if (n > 7 && !strcmp(b + n - 7, ".prompt"))
		n -= 7;
	return strndup(b, n);
}

static enum core_status parse_json_flag(const char *what, const char *text, int want_object,
                                        json_t **out, struct core_err *e)
{
	struct core_err pe = { 0 };
	json_t *v = jv_parse(text, strlen(text), what, 0, &pe);
	if (!v)
		return core_fail(e, pe.st == CORE_ENOMEM ? CORE_ENOMEM : CORE_EUSAGE,
		                 "%s: %s", what, pe.msg);
	if (want_object && !json_is_object(v)) {
		json_decref(v);
		return core_fail(e, CORE_EUSAGE, "%s must be a JSON object", what);
	}
	*out = v;
	return CORE_OK;
}

static enum core_status set_str(char **dst, const char *s, struct core_err *e)
{
	free(*dst);
	*dst = NULL;
	if (s && !(*dst = strdup(s)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	return CORE_OK;
}

/* --output-schema FILE (a JSON Schema, replacing the front matter's) and
 * --json (JSON without a schema unless one is set). */
static enum core_status output_flags(struct agent *a, const struct agent_spec *spec,
                                     struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(PROMPT_MAX_FILE);
	json_t *schema;
	if (spec->output_schema) {
		enum core_status st = core_buf_read_file(&b, spec->output_schema, e);
		schema = st ? NULL : jv_parse(b.p ? b.p : "", b.len, spec->output_schema, 0, e);
		core_buf_release(&b);
		if (!schema) {
			core_err_prefix(e, "--output-schema");
			return e->st;
		}
		if (!json_is_object(schema) && !json_is_boolean(schema)) {
			json_decref(schema);
			return core_fail(e, CORE_EINVAL, "--output-schema: '%s' must hold a JSON Schema object",
			                 spec->output_schema);
		}
		json_decref(a->output);
		a->output = json_pack("{s:s, s:o}", "format", "json", "schema", schema);
	} else if (spec->json_output && !a->output) {
		a->output = json_pack("{s:s}", "format", "json");
	}
	if ((spec->output_schema || spec->json_output) && !a->output)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	return CORE_OK;
}

/* Copy what the prompt's front matter says into the agent. */
static enum core_status from_front_matter(struct agent *a, struct core_err *e)
{
	const json_t *meta = prompt_meta(a->prompt), *v;
	if (!meta)
		return CORE_OK;
	if ((v = json_object_get(meta, "model")) && jv_is_string(v)
	    && set_str(&a->model, json_string_value(v), e))
		return CORE_ENOMEM;
	if ((v = json_object_get(meta, "description")) && jv_is_string(v)
	    && set_str(&a->description, json_string_value(v), e))
		return CORE_ENOMEM;
	if ((v = json_object_get(meta, "url"))) {
		/* A remote agent: its turns run where it is served. */
		const char *u = jv_is_string(v) ? json_string_value(v) : "";
		size_t name = strcspn(u, "/:");
		/* or NAME/AGENT: a genkit endpoint of the models file, resolved
		 * when the turn is sent (endpoints.h) */
		if (strncmp(u, "http://", 7) && strncmp(u, "https://", 8) &&
		    !(name && u[name] == '/' && u[name + 1]))
			return core_fail(e, CORE_EINVAL, "%s: url must be an http:// or https:// URL, "
			                 "or NAME/AGENT of a genkit endpoint of the models file", a->path);
		if (a->model)
			return core_fail(e, CORE_EINVAL, "%s: url and model exclude each other: a "
			                 "remote agent's model is its server's", a->path);
		if (set_str(&a->url, u, e))
			return CORE_ENOMEM;
	}
	if ((v = json_object_get(meta, "config")) && json_is_object(v))
		a->config = json_deep_copy(v);
	if ((v = json_object_get(meta, "maxTurns"))) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
			return core_fail(e, CORE_EINVAL, "%s: maxTurns must be greater than 0, got %s",
			                 a->path, json_is_integer(v) ? "a negative number" : jv_type_name(v));
		if (json_integer_value(v) > 0)
			a->max_turns = (int)json_integer_value(v);
	}
	if ((v = json_object_get(meta, "concurrency"))) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 100000)
			return core_fail(e, CORE_EINVAL, "%s: concurrency must be a number from 1 to "
			                 "100000 (queued runs of the agent at once), got %s", a->path,
			                 json_is_integer(v) ? "another number" : jv_type_name(v));
		a->concurrency = (int)json_integer_value(v);
	}
	if ((v = json_object_get(meta, "maxAttempts"))) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 1000)
			return core_fail(e, CORE_EINVAL, "%s: maxAttempts must be a number from 1 to "
			                 "1000 (claims of a queued run whose worker was lost), got %s",
			                 a->path, json_is_integer(v) ? "another number" : jv_type_name(v));
		a->max_attempts = (int)json_integer_value(v);
	}
	if ((v = json_object_get(meta, "maxUsage"))) {
		/* a number is the total tokens; an object names its counts */
		const char *k;
		json_t *lim;
		a->max_usage = json_is_integer(v) ? json_pack("{s:O}", "totalTokens", v)
		               : json_is_object(v) && json_object_size(v) ? json_deep_copy(v) : NULL;
		if (!a->max_usage)
			return core_fail(e, CORE_EINVAL, "%s: maxUsage must be a number of tokens or an "
			                 "object of usage counts ({totalTokens: N, ...})", a->path);
		json_object_foreach(a->max_usage, k, lim)
			if (!json_is_integer(lim) || json_integer_value(lim) < 1)
				return core_fail(e, CORE_EINVAL, "%s: maxUsage: '%s' must be a whole number "
				                 "greater than 0", a->path, k);
	}
	if ((v = json_object_get(meta, "tools"))) {
		size_t i;
		json_t *t;
		if (!json_is_array(v))
			return core_fail(e, CORE_EINVAL, "%s: tools must be a list of tool names", a->path);
		json_array_foreach(v, i, t) {
			if (!jv_is_string(t))
				return core_fail(e, CORE_EINVAL, "%s: tools must be a list of tool names",
				                 a->path);
			json_array_append(a->tools, t);
		}
	}
	if ((v = json_object_get(meta, "mcpServers"))) {
		if (!json_is_object(v))
			return core_fail(e, CORE_EINVAL, "%s: mcpServers must be an object of servers",
			                 a->path);
		a->mcp_servers = json_deep_copy(v);
	}
	if ((v = json_object_get(meta, "output"))) {
		enum core_status st = structured_spec(v, a->path, &a->output, e);
		if (st)
			return st;
	}
	if ((v = json_object_get(meta, "state")) && json_is_object(v)) {
		const json_t *schema = json_object_get(v, "schema");
		a->state_schema = json_deep_copy(schema ? schema : v);
	}
	return CORE_OK;
}

/* The tool folders, in search order: the prompt's own tools/ (with a
 * prompt file), each agents folder's tools/, then ./tools.  -1 without
 * memory. */
static int add_tool_dirs(struct agent *a, char **dirs)
{
	size_t ntools = 0;

	if (a->path) {
		char *d = dir_of(a->path);
		if (!d)
			return -1;
		struct core_buf tp = CORE_BUF_INIT(PATH_MAX);
		enum core_status st = core_buf_addf(&tp, "%s/tools", d);
		free(d);
		if (st || list_add(&a->tool_dirs, &ntools, tp.p)) {
			core_buf_release(&tp);
			return -1;
		}
		core_buf_release(&tp);
	}
	for (char **d = dirs; *d; d++) {
		struct core_buf tp = CORE_BUF_INIT(PATH_MAX);
		if (core_buf_addf(&tp, "%s/tools", *d) || list_add(&a->tool_dirs, &ntools, tp.p)) {
			core_buf_release(&tp);
			return -1;
		}
		core_buf_release(&tp);
	}
	return list_add(&a->tool_dirs, &ntools, "tools") ? -1 : 0;
}

/* What the command line sets over the front matter: model, system,
 * config, output, input, tools, max turns, key file. */
static enum core_status apply_spec(struct agent *a, const struct agent_spec *spec,
                                   struct core_err *e)
{
	enum core_status st;

	if (spec->model && set_str(&a->model, spec->model, e))
		goto nomem;
	if (!a->model && spec->default_model && *spec->default_model
	    && set_str(&a->model, spec->default_model, e))
		goto nomem;
	if (spec->system && set_str(&a->system, spec->system, e))
		goto nomem;
	if (spec->config_json) {
		json_decref(a->config);
		a->config = NULL;
		if ((st = parse_json_flag("--config", spec->config_json, 1, &a->config, e)))
			return st;
	}
	if ((st = output_flags(a, spec, e)))
		return st;
	if (spec->input_json) {
		json_decref(a->input);
		a->input = NULL;
		if ((st = parse_json_flag("--input", spec->input_json, 0, &a->input, e)))
			return st;
	}
	for (const char *const *t = spec->tools; t && *t; t++)
		if (json_array_append_new(a->tools, json_string(*t)))
			goto nomem;
	if (spec->max_turns < 0)
		return core_fail(e, CORE_EUSAGE, "max turns must be greater than 0, got %d",
		                 spec->max_turns);
	if (spec->max_turns > 0)
		a->max_turns = spec->max_turns;
	if (spec->max_tokens_total > 0) {       /* over the front matter's total */
		if (!a->max_usage && !(a->max_usage = json_object()))
			goto nomem;
		json_object_set_new(a->max_usage, "totalTokens",
		                    json_integer((json_int_t)spec->max_tokens_total));
	}
	const char *kf = spec->key_file ? spec->key_file : getenv("AGENTKIT_KEY_FILE");
	if (kf && *kf && !(a->key_file = strdup(kf)))
		goto nomem;
	return CORE_OK;
nomem:
	return core_fail(e, CORE_ENOMEM, "out of memory");
}

enum core_status agent_load(const struct agent_spec *spec, struct agent **out,
                            struct core_err *e)
{
	enum core_status st = CORE_ENOMEM;
	struct agent *a = calloc(1, sizeof *a);
	char **dirs = NULL;
	size_t ndirs = 0;
	if (!a || !(a->tools = json_array()))
		goto nomem;
	a->max_turns = AGENT_DEFAULT_MAX_TURNS;
	if ((st = search_path(spec->agents_dir, &dirs, &ndirs)))
		goto nomem;

	const char *file = spec->prompt ? spec->prompt : spec->name;
	if (file) {
		if ((st = find_prompt(file, dirs, &a->path, e)))
			goto fail;
		if ((st = prompt_load(a->path, &a->prompt, e)))
			goto fail;
		if (!(a->name = stem_of(spec->name ? spec->name : a->path)))
			goto nomem;
		if ((st = from_front_matter(a, e)))
			goto fail;
		if ((st = delegate_config_load(prompt_meta(a->prompt), a->path, a->name, dirs,
		                               &a->delegation, e)))
			goto fail;
	} else if (!(a->name = strdup("inline"))) {
		goto nomem;
	}
	if (add_tool_dirs(a, dirs))
		goto nomem;
	if ((st = apply_spec(a, spec, e)))
		goto fail;
	/* A custom agent (--exec, or exec: in the front matter) needs no model. */
	if (!a->model && !a->url && !spec->model_optional
	    && !(a->prompt && json_object_get(prompt_meta(a->prompt), "exec"))) {
		st = a->path
		   ? core_fail(e, CORE_EINVAL, "%s: no model (set 'model' in the front matter, use "
		               "--model, or set AGENTKIT_MODEL)", a->path)
		   : core_fail(e, CORE_EUSAGE, "no agent: give an agent name, a .prompt file, or "
		               "--model (or set AGENTKIT_MODEL: agent-run --list-models)");
		goto fail;
	}
	core_strv_free(dirs);
	*out = a;
	return CORE_OK;
nomem:
	st = core_fail(e, CORE_ENOMEM, "out of memory");
fail:
	core_strv_free(dirs);
	agent_free(a);
	return st;
}

void agent_free(struct agent *a)
{
	if (!a)
		return;
	free(a->name);
	free(a->path);
	free(a->description);
	free(a->model);
	free(a->url);
	free(a->system);
	free(a->key_file);
	json_decref(a->config);
	json_decref(a->output);
	json_decref(a->max_usage);
	json_decref(a->tools);
	json_decref(a->input);
	json_decref(a->state_schema);
	json_decref(a->mcp_servers);
	prompt_free(a->prompt);
	delegate_config_free(a->delegation);
	core_strv_free(a->tool_dirs);
	free(a);
}
