/* mcp_config.c - the MCP servers' configuration (mcpServers files, a
 * prompt's front matter, tools/NAME.mcp.json manifests) and the names
 * their tools get; see mcp.h. */
#include "mcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp_transport.h"
#include "../base/buf.h"
#include "../base/json.h"
#include "../base/util.h"

/* A configuration file is read whole, like a prompt file. */
#define CONFIG_MAX ((size_t)1 << 20)

/* ---- configuration ---- */

static int var_char(char c, int first)
{
	return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (!first && c >= '0' && c <= '9');
}

static enum core_status unset(const char *file, const char *server, const char *where,
                              const char *name, struct core_err *e)
{
	return core_fail(e, CORE_EUSAGE, "mcp config %s: server '%s': %s: variable '%s' is not "
	                 "set (set it, or write ${%s:-default})", file, server, where,
	                 name ? name : "?", name ? name : "?");
}

/* Expand ${VAR}, ${VAR:-default} and $VAR (Gemini CLI's) in s into a new
 * string (*out); $$ is a '$', and a '$' before anything else stays.
 * where says what is expanded in messages ("args[1]"). */
static enum core_status expand(const char *s, const char *file, const char *server,
                               const char *where, char **out, struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	const char *p = s;
	core_buf_adds(&b, "");
	while (*p) {
		const char *d = strchr(p, '$');
		if (!d) {
			core_buf_adds(&b, p);
			break;
		}
		core_buf_add(&b, p, (size_t)(d - p));
		if (d[1] == '$' || (d[1] != '{' && !var_char(d[1], 1))) {
			core_buf_addc(&b, '$');
			p = d + 1 + (d[1] == '$');
			continue;
		}
		if (d[1] != '{') {
			const char *n = d + 1, *q = n;
			while (var_char(*q, q == n))
				q++;
			char *name = strndup(n, (size_t)(q - n));
			const char *v = name ? getenv(name) : NULL;
			if (!v) {
				unset(file, server, where, name, e);
				free(name);
				core_buf_release(&b);
				return CORE_EUSAGE;
			}
			core_buf_adds(&b, v);
			free(name);
			p = q;
			continue;
		}
		const char *n = d + 2, *q = n;
		while (var_char(*q, q == n))
			q++;
		const char *close = strchr(q, '}');
		if (q == n || !close || (*q != '}' && strncmp(q, ":-", 2))) {
			core_buf_release(&b);
			return core_fail(e, CORE_EUSAGE, "mcp config %s: server '%s': %s: malformed "
			                 "'${' (write ${VAR} or ${VAR:-default})", file, server, where);
		}
		char *name = strndup(n, (size_t)(q - n));
		const char *v = name ? getenv(name) : NULL;
		if (*q == ':' && (!v || !*v)) {
			core_buf_add(&b, q + 2, (size_t)(close - q - 2));
		} else if (!v) {
			unset(file, server, where, name, e);
			free(name);
			core_buf_release(&b);
			return CORE_EUSAGE;
		} else {
			core_buf_adds(&b, v);
		}
		free(name);
		p = close + 1;
	}
	*out = core_buf_detach(&b, NULL);
	return CORE_OK;
}

static enum core_status timeout_field(const json_t *entry, const char *key, int64_t dflt,
                                      const char *file, const char *server, int64_t *ms,
                                      struct core_err *e)
{
	const json_t *v = json_object_get(entry, key);
	struct core_err de = { 0 };
	*ms = dflt;
	if (!v)
		return CORE_OK;
	if (jv_is_string(v) && !core_parse_duration(json_string_value(v), ms, &de) && *ms > 0)
		return CORE_OK;
	if (json_is_integer(v) && json_integer_value(v) > 0 &&
	    json_integer_value(v) <= (json_int_t)1 << 40) {
		*ms = json_integer_value(v);
		return CORE_OK;
	}
	return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': '%s' must be a duration "
	                 "('30s') or a number of milliseconds", file, server, key);
}

/* A list of tool names (includeTools, excludeTools), or NULL when absent. */
static enum core_status names_field(const json_t *entry, const char *key, const char *file,
                                    const char *server, char ***out, struct core_err *e)
{
	const json_t *v = json_object_get(entry, key), *n;
	size_t i;
	*out = NULL;
	if (!v)
		return CORE_OK;
	if (!json_is_array(v))
		goto bad;
	if (!(*out = calloc(json_array_size(v) + 1, sizeof **out)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	json_array_foreach(v, i, n) {
		if (!jv_is_string(n))
			goto bad;
		if (!((*out)[i] = strdup(json_string_value(n))))
			return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	return CORE_OK;
bad:
	return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': '%s' must be a list of "
	                 "tool names", file, server, key);
}

/* *p relative to dir: "DIR/p" when p is a relative path and dir is given. */
static enum core_status rebase(char **p, const char *dir, struct core_err *e)
{
	char *q;
	if (!dir || !*p || **p == '/')
		return CORE_OK;
	if (asprintf(&q, "%s/%s", dir, *p) < 0)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	free(*p);
	*p = q;
	return CORE_OK;
}

/* A stdio entry's members: command, args, env, cwd. */
static enum core_status stdio_fields(struct mcp_server_config *sc, const char *file,
                                     const char *dir, const char *name, const json_t *entry,
                                     struct core_err *e)
{
	const json_t *cmd = json_object_get(entry, "command");
	const json_t *args = json_object_get(entry, "args");
	const json_t *env = json_object_get(entry, "env");
	const json_t *cwd = json_object_get(entry, "cwd");
	enum core_status st;
	char where[64];
	size_t i, k = 0;
	const char *key;
	json_t *v;

	if (!jv_is_string(cmd) || !*json_string_value(cmd))
		return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': 'command' must be a "
		                 "non-empty string", file, name);
	if (args && !json_is_array(args))
		return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': 'args' must be a list "
		                 "of strings", file, name);
	if (env && !json_is_object(env))
		return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': 'env' must be an "
		                 "object of strings", file, name);
	if (cwd && !jv_is_string(cwd))
		return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': 'cwd' must be a "
		                 "string", file, name);
	if (!(sc->argv = calloc(json_array_size(args) + 2, sizeof *sc->argv)) ||
	    !(sc->env = calloc(json_object_size(env) + 1, sizeof *sc->env)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	if ((st = expand(json_string_value(cmd), file, name, "command", &sc->argv[0], e)))
		return st;
	json_array_foreach(args, i, v) {
		if (!jv_is_string(v))
			return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': 'args' must be "
			                 "a list of strings", file, name);
		snprintf(where, sizeof where, "args[%zu]", i);
		if ((st = expand(json_string_value(v), file, name, where, &sc->argv[i + 1], e)))
			return st;
	}
	json_object_foreach((json_t *)env, key, v) {
		char *val = NULL;
		if (!jv_is_string(v) || !*key || strchr(key, '='))
			return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': 'env' must be an "
			                 "object of strings", file, name);
		snprintf(where, sizeof where, "env.%.50s", key);
		if ((st = expand(json_string_value(v), file, name, where, &val, e)))
			return st;
		if (asprintf(&sc->env[k], "%s=%s", key, val) < 0) {
			sc->env[k] = NULL;
			free(val);
			return core_fail(e, CORE_ENOMEM, "out of memory");
		}
		k++;
		free(val);
	}
	if (cwd && (st = expand(json_string_value(cwd), file, name, "cwd", &sc->cwd, e)))
		return st;
	/* From a prompt file: its directory, as for its other paths; a
	 * command with a cwd is the child's, relative to that cwd. */
	if ((st = rebase(&sc->cwd, dir, e)) ||
	    (!sc->cwd && strchr(sc->argv[0], '/') && (st = rebase(&sc->argv[0], dir, e))))
		return st;
	return CORE_OK;
}

/* An HTTP entry's members: the URL (url or httpUrl, in urlkey), headers,
 * credentialCommand and credentialTtl. */
static enum core_status http_fields(struct mcp_server_config *sc, const char *file,
                                    const char *name, const json_t *entry, const char *urlkey,
                                    struct core_err *e)
{
	const json_t *url = json_object_get(entry, urlkey);
	const json_t *hdrs = json_object_get(entry, "headers");
	const json_t *cmd = json_object_get(entry, "credentialCommand");
	const json_t *ttl = json_object_get(entry, "credentialTtl");
	enum core_status st;
	char where[80];
	size_t i, k = 0;
	const char *key;
	json_t *v;

	if (json_object_get(entry, "command"))
		return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': both 'command' and "
		                 "'%s' (a server is run or reached, not both)", file, name, urlkey);
	if (!jv_is_string(url) || !*json_string_value(url))
		return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': '%s' must be a "
		                 "non-empty string", file, name, urlkey);
	if ((st = expand(json_string_value(url), file, name, urlkey, &sc->url, e)))
		return st;
	if (strncmp(sc->url, "http://", 7) && strncmp(sc->url, "https://", 8))
		return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': '%s' must be an "
		                 "http:// or https:// URL", file, name, urlkey);
	if (hdrs && !json_is_object(hdrs))
		return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': 'headers' must be an "
		                 "object of strings", file, name);
	if (!(sc->headers = calloc(json_object_size(hdrs) + 1, sizeof *sc->headers)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	json_object_foreach((json_t *)hdrs, key, v) {
		char *val = NULL;
		if (!jv_is_string(v) || !*key || key[strcspn(key, ":\r\n \t")])
			return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': 'headers' must be "
			                 "an object of strings", file, name);
		snprintf(where, sizeof where, "headers.%.50s", key);
		if ((st = expand(json_string_value(v), file, name, where, &val, e)))
			return st;
		/* A line break would end the header and forge the next; the
		 * value may be a secret, so only its name is said. */
		if (val[strcspn(val, "\r\n")]) {
			explicit_bzero(val, strlen(val));
			free(val);
			return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': %s holds a line "
			                 "break", file, name, where);
		}
		if (asprintf(&sc->headers[k], "%s: %s", key, val) < 0) {
			sc->headers[k] = NULL;
			free(val);
			return core_fail(e, CORE_ENOMEM, "out of memory");
		}
		k++;
		explicit_bzero(val, strlen(val));
		free(val);
	}
	if (cmd) {
		if (!json_is_array(cmd) || !json_array_size(cmd))
			goto badcmd;
		json_array_foreach(cmd, i, v)
			if (!jv_is_string(v) || !*json_string_value(v))
				goto badcmd;
		sc->cred_cmd = json_deep_copy(cmd);
		if (!sc->cred_cmd)
			return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	sc->cred_ttl_ms = 5 * 60 * 1000;
	if (ttl) {
		struct core_err de = { 0 };
		if (!cmd)
			return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': 'credentialTtl' "
			                 "without 'credentialCommand'", file, name);
		if (!jv_is_string(ttl) || core_parse_duration(json_string_value(ttl),
		                                               &sc->cred_ttl_ms, &de) ||
		    sc->cred_ttl_ms <= 0)
			return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': 'credentialTtl' "
			                 "must be a duration ('5m')", file, name);
	}
	return CORE_OK;
badcmd:
	return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': 'credentialCommand' must "
	                 "be a non-empty list of strings (a program and its arguments)", file,
	                 name);
}

static enum core_status server_entry(struct mcp_server_config *sc, const char *file,
                                     const char *dir, const char *name, const json_t *entry,
                                     struct core_err *e)
{
	const json_t *type = json_object_get(entry, "type");
	const json_t *size = json_object_get(entry, "maxResultBytes");
	const char *urlkey = "url";
	enum core_status st;

	if (!(sc->name = strdup(name)) || !(sc->file = strdup(file)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	/* The transport: "type" when given (Claude Code's "stdio", "http",
	 * "sse"); else Gemini CLI's "httpUrl" is Streamable HTTP, a "command"
	 * is stdio, and a bare "url" (Gemini's HTTP+SSE, Genkit's Streamable
	 * HTTP) is tried as Streamable HTTP, then HTTP+SSE. */
	if (type && !jv_is_string(type))
		return core_fail(e, CORE_EUSAGE, "mcp config %s: server '%s': 'type' must be "
		                 "\"stdio\", \"http\" or \"sse\"", file, name);
	if (type)
		sc->transport = mcp_transport_find(json_string_value(type));
	else if (json_object_get(entry, "httpUrl"))
		sc->transport = &mcp_transport_http, urlkey = "httpUrl";
	else if (json_object_get(entry, "command") || !json_object_get(entry, "url"))
		sc->transport = &mcp_transport_stdio;
	else
		sc->transport = &mcp_transport_url;
	if (!sc->transport)
		return core_fail(e, CORE_EUSAGE, "mcp config %s: server '%s': unknown type '%s' "
		                 "(agentkit takes \"stdio\", \"http\" and \"sse\")", file, name,
		                 json_string_value(type));
	if (type && sc->transport != &mcp_transport_stdio && !json_object_get(entry, "url") &&
	    json_object_get(entry, "httpUrl"))
		urlkey = "httpUrl";
	/* the HTTP transports' members; any other's are stdio's */
	int http = sc->transport == &mcp_transport_http || sc->transport == &mcp_transport_sse ||
	           sc->transport == &mcp_transport_url;
	if ((st = http ? http_fields(sc, file, name, entry, urlkey, e)
	               : stdio_fields(sc, file, dir, name, entry, e)))
		return st;
	if ((st = timeout_field(entry, "timeout", MCP_DEFAULT_CALL_TIMEOUT_MS, file, name,
	                        &sc->call_timeout_ms, e)) ||
	    (st = timeout_field(entry, "startupTimeout", MCP_DEFAULT_STARTUP_TIMEOUT_MS, file,
	                        name, &sc->startup_timeout_ms, e)))
		return st;
	if ((st = names_field(entry, "includeTools", file, name, &sc->include, e)) ||
	    (st = names_field(entry, "excludeTools", file, name, &sc->exclude, e)))
		return st;
	const json_t *prefix = json_object_get(entry, "prefix");
	if (prefix && !jv_is_string(prefix))
		return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': 'prefix' must be a "
		                 "string", file, name);
	if (prefix ? !(sc->prefix = strdup(json_string_value(prefix)))
	           : asprintf(&sc->prefix, "%s_", name) < 0) {
		sc->prefix = NULL;
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	const json_t *opt = json_object_get(entry, "optional");
	if (opt && !json_is_boolean(opt))
		return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': 'optional' must be "
		                 "true or false", file, name);
	sc->optional = json_is_true(opt);
	sc->max_result_bytes = MCP_DEFAULT_MAX_RESULT_BYTES;
	if (size) {
		uint64_t n = 0;
		struct core_err se = { 0 };
		if (jv_is_string(size) ? core_parse_size(json_string_value(size), &n, &se) != CORE_OK
		                       : !json_is_integer(size) || json_integer_value(size) <= 0 ||
		                         (n = (uint64_t)json_integer_value(size), 0))
			n = 0;
		if (n < 1024 || n > ((uint64_t)1 << 32))
			return core_fail(e, CORE_EINVAL, "mcp config %s: server '%s': 'maxResultBytes' "
			                 "must be a size from 1K to 4G", file, name);
		sc->max_result_bytes = (size_t)n;
	}
	return CORE_OK;
}

static void server_config_release(struct mcp_server_config *sc)
{
	core_strv_free(sc->include);
	core_strv_free(sc->exclude);
	free(sc->prefix);
	free(sc->name);
	free(sc->file);
	core_strv_free(sc->argv);
	core_strv_free(sc->env);
	free(sc->cwd);
	free(sc->url);
	if (sc->headers)
		for (char **h = sc->headers; *h; h++)
			explicit_bzero(*h, strlen(*h));
	core_strv_free(sc->headers);
	json_decref(sc->cred_cmd);
	free(sc->unusable);
}

/*
 * An entry that cannot be used (e's message) is kept as one: it fails to
 * start with that message, and is skipped like any server that fails to
 * start when nothing requires it (mcp_config_settle()).
 */
static enum core_status unusable(struct mcp_server_config *sc, const char *file,
                                 const char *name, const json_t *entry, struct core_err *e)
{
	const json_t *opt = json_object_get(entry, "optional");
	enum core_status why = e->st;
	server_config_release(sc);
	memset(sc, 0, sizeof *sc);
	sc->transport = &mcp_transport_unusable;
	sc->unusable_st = why;
	sc->optional = json_is_true(opt);
	if (!(sc->name = strdup(name)) || !(sc->file = strdup(file)) ||
	    !(sc->unusable = strdup(e->msg)) || asprintf(&sc->prefix, "%s_", name) < 0) {
		sc->prefix = NULL;
		server_config_release(sc);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	return CORE_OK;
}

void mcp_config_settle(struct mcp_config *cfg, size_t shared, const json_t *names)
{
	for (size_t i = 0; i < cfg->n; i++) {
		struct mcp_server_config *sc = &cfg->servers[i];
		size_t k, len = strlen(sc->name);
		json_t *v;
		int named = 0;
		sc->agents = i >= shared;
		json_array_foreach(names, k, v) {
			const char *n = json_string_value(v);
			named |= n && !strncmp(n, sc->name, len) && n[len] == '/';
		}
		if (!sc->agents && !named)
			sc->optional = 1;
	}
}

enum core_status mcp_config_load(struct mcp_config *cfg, const char *path,
                                 struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(CONFIG_MAX);
	struct core_err pe = { 0 };
	enum core_status st;
	json_t *doc;

	if ((st = core_buf_read_file(&b, path, &pe))) {
		core_buf_release(&b);
		return core_fail(e, st, "mcp config: %s", pe.msg);
	}
	doc = jv_parse(b.p ? b.p : "", b.len, path, 0, &pe);
	core_buf_release(&b);
	if (!doc)
		return core_fail(e, pe.st == CORE_ENOMEM ? CORE_ENOMEM : CORE_EINVAL,
		                 "mcp config: %s", pe.msg);
	const json_t *servers = json_object_get(doc, "mcpServers");
	if (!json_is_object(servers)) {
		json_decref(doc);
		return core_fail(e, CORE_EINVAL, "mcp config %s: no \"mcpServers\" object", path);
	}
	st = mcp_config_add(cfg, servers, path, NULL, e);
	json_decref(doc);
	return st;
}

enum core_status mcp_config_add(struct mcp_config *cfg, const json_t *servers,
                                const char *path, const char *dir, struct core_err *e)
{
	enum core_status st = CORE_OK;
	const char *name;
	json_t *entry;
	if (!json_is_object(servers))
		return core_fail(e, CORE_EINVAL, "mcp config %s: mcpServers must be an object", path);
	json_object_foreach((json_t *)servers, name, entry) {
		if (json_is_object(entry) && json_is_true(json_object_get(entry, "disabled")))
			continue;
		for (size_t i = 0; i < cfg->n; i++)
			if (!strcmp(cfg->servers[i].name, name)) {
				st = core_fail(e, CORE_EUSAGE, "mcp server '%s' is configured twice: in %s "
				               "and in %s", name, cfg->servers[i].file, path);
				break;
			}
		if (st)
			break;
		struct mcp_server_config *grown = realloc(cfg->servers,
		                                          (cfg->n + 1) * sizeof *cfg->servers);
		if (!grown) {
			st = core_fail(e, CORE_ENOMEM, "out of memory");
			break;
		}
		cfg->servers = grown;
		memset(&cfg->servers[cfg->n], 0, sizeof *cfg->servers);
		struct mcp_server_config *sc = &cfg->servers[cfg->n];
		st = json_is_object(entry)
		     ? server_entry(sc, path, dir, name, entry, e)
		     : core_fail(e, CORE_EINVAL, "mcp config %s: server '%s' must be an object",
		                 path, name);
		if (st == CORE_ENOMEM) {
			server_config_release(sc);
			break;
		}
		if (st && (st = unusable(sc, path, name, entry, e)))
			break;
		cfg->n++;
	}
	return st;
}

enum core_status mcp_config_manifests(struct mcp_config *cfg, const json_t *names,
                                      char *const *dirs, struct core_err *e)
{
	size_t i;
	json_t *v;
	json_array_foreach(names, i, v) {
		const char *n = json_string_value(v), *slash = strchr(n, '/');
		int known = 0;
		if (!slash || slash == n || memchr(n, '.', (size_t)(slash - n)))
			continue;       /* no server name ("/abs", "./x", "../x") */
		for (size_t k = 0; !known && k < cfg->n; k++)
			known = strlen(cfg->servers[k].name) == (size_t)(slash - n) &&
			        !strncmp(cfg->servers[k].name, n, (size_t)(slash - n));
		for (char *const *d = dirs; !known && d && *d; d++) {
			char *path;
			enum core_status st;
			if (asprintf(&path, "%s/%.*s.mcp.json", *d, (int)(slash - n), n) < 0)
				return core_fail(e, CORE_ENOMEM, "out of memory");
			if (access(path, F_OK)) {
				free(path);
				continue;
			}
			/* One server entry, its paths the manifest's directory's (as an
			 * executable tool's manifest). */
			struct core_buf b = CORE_BUF_INIT(CONFIG_MAX);
			struct core_err pe = { 0 };
			json_t *doc = NULL;
			if ((st = core_buf_read_file(&b, path, &pe)))
				st = core_fail(e, st, "mcp server manifest: %s", pe.msg);
			else if (!(doc = jv_parse(b.p ? b.p : "", b.len, path, 0, &pe)))
				st = core_fail(e, pe.st == CORE_ENOMEM ? CORE_ENOMEM : CORE_EINVAL,
				               "mcp server manifest: %s", pe.msg);
			core_buf_release(&b);
			if (!st) {
				char *name = strndup(n, (size_t)(slash - n));
				json_t *one = name ? json_pack("{s:O}", name, doc) : NULL;
				st = one ? mcp_config_add(cfg, one, path, *d, e)
				         : core_fail(e, CORE_ENOMEM, "out of memory");
				json_decref(one);
				free(name);
			}
			json_decref(doc);
			free(path);
			if (st)
				return st;
			known = 1;
		}
	}
	return CORE_OK;
}

void mcp_config_release(struct mcp_config *cfg)
{
	for (size_t i = 0; i < cfg->n; i++)
		server_config_release(&cfg->servers[i]);
	free(cfg->servers);
	cfg->servers = NULL;
	cfg->n = 0;
}

/* ---- names ---- */

void mcp_tool_name(const char *prefix, const char *tool, char *out)
{
	char full[1024];
	size_t n = 0;
	int len = snprintf(full, sizeof full, "%s%s", prefix, tool);
	size_t flen = len < 0 ? 0 : (size_t)len < sizeof full ? (size_t)len : sizeof full - 1;
	uint32_t h = 2166136261u;      /* FNV-1a: stable across runs and builds */
	for (size_t i = 0; i < flen; i++)
		h = (h ^ (unsigned char)full[i]) * 16777619u;
	if (!var_char(full[0], 1))
		out[n++] = '_';
	for (size_t i = 0; i < flen && n < 1023 && n <= MCP_TOOL_NAME_MAX; i++) {
		char c = full[i];
		out[n++] = var_char(c, 0) || c == '-' ? c : '_';
	}
	if (n > MCP_TOOL_NAME_MAX)
		n = (size_t)snprintf(out + 55, MCP_TOOL_NAME_MAX + 1 - 55, "_%08x", h) + 55;
	out[n] = 0;
}

/* ---- the transport of an entry that cannot be used ---- */

static enum core_status unusable_open(const struct mcp_server_config *c,
                                      void (*sink)(void *, const char *, const char *),
                                      void *sink_ctx, struct mcp_transport **out,
                                      struct core_err *e)
{
	(void)sink;
	(void)sink_ctx;
	*out = NULL;
	return core_fail(e, c->unusable_st, "%s", c->unusable);
}

/* open never succeeds: nothing below is ever called. */
static enum core_status unusable_send(struct mcp_transport *t, const json_t *msg,
                                      int64_t timeout_ms, const struct mcp_cancel *cancel,
                                      struct core_err *e)
{
	(void)t, (void)msg, (void)timeout_ms, (void)cancel;
	return core_fail(e, CORE_EINTERNAL, "mcp server: unusable entry");
}

static enum core_status unusable_receive(struct mcp_transport *t, int64_t timeout_ms,
                                         const struct mcp_cancel *cancel, const char **msg,
                                         size_t *len, struct core_err *e)
{
	(void)t, (void)timeout_ms, (void)cancel, (void)msg, (void)len;
	return core_fail(e, CORE_EINTERNAL, "mcp server: unusable entry");
}

static void unusable_tail(struct mcp_transport *t, const char *msg, struct core_buf *b)
{
	(void)t, (void)msg, (void)b;
}

static void unusable_kill(struct mcp_transport *t)
{
	(void)t;
}

static void unusable_close(struct mcp_transport *t, int64_t grace_ms)
{
	(void)t, (void)grace_ms;
}

const struct mcp_transport_ops mcp_transport_unusable = {
	.type = "(unusable)",
	.open = unusable_open,
	.send = unusable_send,
	.receive = unusable_receive,
	.tail = unusable_tail,
	.kill = unusable_kill,
	.close = unusable_close,
};
