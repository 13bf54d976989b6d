/* endpoints.c - the models file's named endpoints; see endpoints.h. */
#include "endpoints.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/buf.h"
#include "../base/frontmatter.h"
#include "../base/http.h"
#include "../base/json.h"
#include "provider_common.h"
#include "../base/run.h"
#include "../base/spawn.h"
#include "../base/utf8.h"
#include "../base/util.h"

#define FILE_MAX ((size_t)1 << 20)         /* a models file is small */
#define CRED_TIMEOUT_MS 30000
#define CRED_OUT_MAX ((size_t)64 << 10)
#define CRED_TTL_MS (5 * 60 * 1000)        /* a plain-text token's default life */
#define CRED_MARGIN_NS ((int64_t)30 * 1000000000)

struct endpoint {
	const char *name;                  /* borrowed from the document */
	const struct prov_dialect *d;      /* NULL for a genkit endpoint */
	const char *dialect;
	int agents;                        /* "genkit": agents on Genkit's wire */
	const char *base;                  /* as written, or NULL: the dialect's */
	const char *key_var, *key_file, *key_header;
	const json_t *cred_cmd;            /* array of strings or NULL */
	int64_t cred_ttl_ms;
	int64_t timeout_ms;                /* "timeout", 0: the default */
	const json_t *headers, *query, *models;
	/* The credential command's token, kept for the process (under lock). */
	char *token;
	int64_t token_until_ns;
};

static struct {
	pthread_once_t once;
	pthread_mutex_t lock;
	char path[4096];
	json_t *doc;
	struct endpoint *eps;
	size_t n;
	char **vars;                       /* every variable the file names */
	size_t nvars;
	struct core_err err;
} tab = { .once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER };

static const struct {
	const char *name;
	const struct prov_dialect *d;
} dialects[] = {
	{ "openai", &prov_dialect_openai },
	{ "openai-responses", &prov_dialect_openai_responses },
	{ "anthropic", &prov_dialect_anthropic },
	{ "googleai", &prov_dialect_googleai },
	{ "ollama", &prov_dialect_ollama },
};

/* ---- reading the file ---- */

static enum core_status bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "models file: SPOT: why (at PATH)" into tab.err. */
static enum core_status bad(const char *fmt, ...)
{
	char what[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	return core_fail(&tab.err, CORE_EINVAL, "models file: %s (at %s)", what, tab.path);
}

static int var_start(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int name_char(char c)
{
	return var_start(c) || (c >= '0' && c <= '9');
}

/* The length of the variable reference at s ("$NAME", "${NAME}"; s[0] is
 * '$'), its name at *name (*nlen bytes); 0 when it is none. */
static size_t var_ref(const char *s, const char **name, size_t *nlen)
{
	size_t n = 0;
	if (s[1] == '{') {
		while (name_char(s[2 + n]))
			n++;
		if (!n || !var_start(s[2]) || s[2 + n] != '}')
			return 0;
		*name = s + 2;
		*nlen = n;
		return n + 3;
	}
	if (!var_start(s[1]))
		return 0;
	while (name_char(s[1 + n]))
		n++;
	*name = s + 1;
	*nlen = n;
	return n + 1;
}

static enum core_status add_var(const char *name, size_t len)
{
	for (size_t i = 0; i < tab.nvars; i++)
		if (strlen(tab.vars[i]) == len && !strncmp(tab.vars[i], name, len))
			return CORE_OK;
	char **v = realloc(tab.vars, (tab.nvars + 1) * sizeof *v);
	if (!v)
		return core_fail(&tab.err, CORE_ENOMEM, "out of memory");
	tab.vars = v;
	if (!(v[tab.nvars] = strndup(name, len)))
		return core_fail(&tab.err, CORE_ENOMEM, "out of memory");
	tab.nvars++;
	return CORE_OK;
}

/* Check a value's variable references and note the variables. */
static enum core_status scan_value(const char *s, const char *ep, const char *spot)
{
	for (const char *p = strchr(s, '$'); p; p = strchr(p, '$')) {
		const char *name;
		size_t nlen, n;
		if (p[1] == '$') {
			p += 2;
			continue;
		}
		if (!(n = var_ref(p, &name, &nlen)))
			return bad("endpoint '%s': %s: a '$' that names no variable (write $NAME, "
			           "${NAME}, or $$ for a '$')", ep, spot);
		if (add_var(name, nlen))
			return tab.err.st;
		p += n;
	}
	return CORE_OK;
}

/* A header name agentkit can send as given: an HTTP token, no '%'. */
static int header_name_ok(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!name_char(*s) && !strchr("!#$&'*+-.^`|~", *s))
			return 0;
	return 1;
}

/* An object of string values (headers, query, models); NULL is fine. */
static enum core_status string_map(const json_t *v, const char *ep, const char *member,
                                   int vars, int names_are_headers)
{
	const char *k;
	json_t *x;
	if (!v)
		return CORE_OK;
	if (!json_is_object(v))
		return bad("endpoint '%s': \"%s\" must be an object of strings", ep, member);
	json_object_foreach((json_t *)v, k, x) {
		char spot[256];
		if (!json_is_string(x))
			return bad("endpoint '%s': \"%s\": '%s' must be a string", ep, member, k);
		if (names_are_headers && !header_name_ok(k))
			return bad("endpoint '%s': \"%s\": '%s' is not a header name", ep, member, k);
		if (!*k)
			return bad("endpoint '%s': \"%s\": an empty name", ep, member);
		snprintf(spot, sizeof spot, "\"%s\": '%s'", member, k);
		if (vars && scan_value(json_string_value(x), ep, spot))
			return tab.err.st;
	}
	return CORE_OK;
}

static const char *str_member(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* The endpoint's members: each one known, the strings strings. */
static enum core_status check_members(const char *name, const json_t *o)
{
	static const char *const known[] = { "dialect", "baseUrl", "keyVariable", "keyFile",
		"keyHeader", "credentialCommand", "credentialTtl", "timeout", "headers", "query",
		"models", NULL };
	const char *k;
	json_t *x;
	json_object_foreach((json_t *)o, k, x) {
		const char *const *m = known;
		while (*m && strcmp(*m, k))
			m++;
		if (!*m)
			return bad("endpoint '%s': unknown member \"%s\"", name, k);
	}
	for (const char *const *m = known; *m; m++) {
		x = json_object_get(o, *m);
		if (x && !json_is_string(x) && strcmp(*m, "credentialCommand") && strcmp(*m, "headers")
		    && strcmp(*m, "query") && strcmp(*m, "models"))
			return bad("endpoint '%s': \"%s\" must be a string", name, *m);
	}
	return CORE_OK;
}

/* Its key's variable, header and credential command (with credentialTtl),
 * ep's members set. */
static enum core_status read_key_source(struct endpoint *ep, const char *name, const json_t *o)
{
	json_t *x;
	size_t i;
	if (ep->key_var) {
		if (!var_start(*ep->key_var))
			return bad("endpoint '%s': \"keyVariable\": not a variable name", name);
		for (const char *p = ep->key_var; *p; p++)
			if (!name_char(*p))
				return bad("endpoint '%s': \"keyVariable\": not a variable name", name);
		if (add_var(ep->key_var, strlen(ep->key_var)))
			return tab.err.st;
	}
	if (ep->key_header && !header_name_ok(ep->key_header))
		return bad("endpoint '%s': \"keyHeader\": not a header name", name);
	if (ep->cred_cmd) {
		if (!json_is_array(ep->cred_cmd) || !json_array_size(ep->cred_cmd))
			return bad("endpoint '%s': \"credentialCommand\" must be a non-empty array of "
			           "strings (the command and its arguments, run without a shell)", name);
		json_array_foreach(ep->cred_cmd, i, x)
			if (!json_is_string(x))
				return bad("endpoint '%s': \"credentialCommand\": item %zu is not a string",
				           name, i);
	}
	ep->cred_ttl_ms = CRED_TTL_MS;
	if (str_member(o, "credentialTtl")) {
		struct core_err de = { 0 };
		if (!ep->cred_cmd)
			return bad("endpoint '%s': \"credentialTtl\" without \"credentialCommand\"", name);
		if (core_parse_duration(str_member(o, "credentialTtl"), &ep->cred_ttl_ms, &de))
			return bad("endpoint '%s': \"credentialTtl\": %s", name, de.msg);
	}
	return CORE_OK;
}

/* Its "models": a list of model ids, or an object of aliases. */
static enum core_status check_models(const struct endpoint *ep, const char *name)
{
	json_t *x;
	size_t i;
	if (json_is_array(ep->models)) {
		/* The endpoint's own list of model ids, for --list-models and
		 * completion; a name off the list still goes to the endpoint. */
		json_array_foreach(ep->models, i, x)
			if (!json_is_string(x) || !json_string_length(x) ||
			    strlen(json_string_value(x)) != json_string_length(x))
				return bad("endpoint '%s': \"models\": item %zu is not a model name", name,
				           i + 1);
	} else if (ep->models && !json_is_object(ep->models)) {
		return bad("endpoint '%s': \"models\" must be a list of model names or an object "
		           "of aliases", name);
	} else if (string_map(ep->models, name, "models", 0, 0)) {
		return tab.err.st;
	}
	return CORE_OK;
}

static enum core_status read_endpoint(struct endpoint *ep, const char *name, const json_t *o)
{
	const char *dialect;
	size_t i;
	enum core_status st;
	memset(ep, 0, sizeof *ep);
	ep->name = name;
	if (!*name || strchr(name, '/'))
		return bad("endpoint '%s': a name must be non-empty and without '/'", name);
	if (!json_is_object(o))
		return bad("endpoint '%s' must be an object", name);
	if ((st = check_members(name, o)))
		return st;
	if (!(dialect = str_member(o, "dialect")))
		return bad("endpoint '%s': no \"dialect\" (openai, openai-responses, anthropic, "
		           "googleai, ollama or genkit)", name);
	for (i = 0; i < sizeof dialects / sizeof dialects[0]; i++)
		if (!strcmp(dialects[i].name, dialect))
			ep->d = dialects[i].d;
	/* genkit: a server of agents on Genkit's wire (--url NAME/AGENT), no
	 * model dialect */
	ep->agents = !strcmp(dialect, "genkit");
	if (!ep->d && !ep->agents)
		return bad("endpoint '%s': \"dialect\": '%s' is none of openai, "
		           "openai-responses, anthropic, googleai, ollama, genkit", name, dialect);
	if (ep->agents && !str_member(o, "baseUrl"))
		return bad("endpoint '%s': a genkit endpoint needs its \"baseUrl\" (the server's, "
		           "which AGENT is appended to)", name);
	if (ep->agents && json_object_get(o, "models"))
		return bad("endpoint '%s': a genkit endpoint serves agents, not \"models\"", name);
	ep->dialect = dialect;
	ep->base = str_member(o, "baseUrl");
	ep->key_var = str_member(o, "keyVariable");
	ep->key_file = str_member(o, "keyFile");
	ep->key_header = str_member(o, "keyHeader");
	ep->cred_cmd = json_object_get(o, "credentialCommand");
	ep->headers = json_object_get(o, "headers");
	ep->query = json_object_get(o, "query");
	ep->models = json_object_get(o, "models");
	if (!!ep->key_var + !!ep->key_file + !!ep->cred_cmd > 1)
		return bad("endpoint '%s': give one of \"keyVariable\", \"keyFile\" and "
		           "\"credentialCommand\"", name);
	if (ep->base && scan_value(ep->base, name, "\"baseUrl\""))
		return tab.err.st;
	if ((st = read_key_source(ep, name, o)))
		return st;
	if (str_member(o, "timeout")) {
		struct core_err de = { 0 };
		if (core_parse_duration(str_member(o, "timeout"), &ep->timeout_ms, &de))
			return bad("endpoint '%s': \"timeout\": %s", name, de.msg);
		if (ep->timeout_ms <= 0)
			return bad("endpoint '%s': \"timeout\": must be positive", name);
	}
	if (string_map(ep->headers, name, "headers", 1, 1) ||
	    string_map(ep->query, name, "query", 1, 0))
		return tab.err.st;
	return check_models(ep, name);
}

/* Is path a YAML file by its name (.yaml, .yml)? */
static int yaml_name(const char *path)
{
	size_t n = strlen(path);
	return (n > 5 && !strcmp(path + n - 5, ".yaml")) || (n > 4 && !strcmp(path + n - 4, ".yml"));
}

/*
 * The default place: DIR/models.json, DIR/models.yaml or DIR/models.yml
 * into tab.path.  None: 0.  More than one is refused rather than one
 * picked by a rule the user has to remember: an edit of the file that is
 * not read would be silently lost.  A path that cannot be looked at (a
 * directory we may not enter) holds no file of ours.
 */
static enum core_status default_file(const char *dir, int *found)
{
	static const char *const names[] = { "models.json", "models.yaml", "models.yml" };
	const char *seen = NULL;
	struct stat sb;
	*found = 0;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		char path[sizeof tab.path];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		if (stat(path, &sb) && (errno == ENOENT || errno == ENOTDIR || errno == EACCES))
			continue;
		if (seen)
			return core_fail(&tab.err, CORE_EINVAL, "models file: both %s and %s are in %s: "
			                 "keep one (or name one in AGENTKIT_MODELS_FILE)", seen,
			                 names[i], dir);
		seen = names[i];
		snprintf(tab.path, sizeof tab.path, "%s", path);
	}
	*found = seen != NULL;
	return CORE_OK;
}

static enum core_status load_file(void)
{
	const char *named = getenv("AGENTKIT_MODELS_FILE"), *cfg = getenv("XDG_CONFIG_HOME");
	struct core_buf b = CORE_BUF_INIT(FILE_MAX);
	const json_t *eps;
	const char *k;
	json_t *x;
	char dir[sizeof tab.path - 16];
	int found;
	size_t i = 0;
	if (named && *named) {
		snprintf(tab.path, sizeof tab.path, "%s", named);
	} else {
		if (cfg && *cfg)
			snprintf(dir, sizeof dir, "%s/agentkit", cfg);
		else if (getenv("HOME") && *getenv("HOME"))
			snprintf(dir, sizeof dir, "%s/.config/agentkit", getenv("HOME"));
		else
			return CORE_OK;
		if (default_file(dir, &found))
			return tab.err.st;
		if (!found)
			return CORE_OK;
	}
	if (core_buf_read_file(&b, tab.path, &tab.err)) {
		int absent = tab.err.st == CORE_ENOTFOUND;
		core_buf_release(&b);
		if (absent && !(named && *named)) {
			memset(&tab.err, 0, sizeof tab.err);
			return CORE_OK;
		}
		if (tab.err.st == CORE_ETOOBIG)
			return core_fail(&tab.err, CORE_EINVAL, "models file: over %zu bytes (at %s)",
			                 FILE_MAX, tab.path);
		core_err_prefix(&tab.err, "models file (AGENTKIT_MODELS_FILE)");
		return tab.err.st;
	}
	if (yaml_name(tab.path))
		yaml_to_json(b.p ? b.p : "", b.len, tab.path, &tab.doc, &tab.err);
	else
		tab.doc = jv_parse(b.p ? b.p : "", b.len, tab.path, 0, &tab.err);
	core_buf_release(&b);
	if (!tab.doc) {
		if (tab.err.st != CORE_ENOMEM)
			tab.err.st = CORE_EINVAL;
		core_err_prefix(&tab.err, "models file");
		return tab.err.st;
	}
	if (!json_is_object(tab.doc))
		return bad("the file must be an object {\"endpoints\": {...}}");
	json_object_foreach(tab.doc, k, x)
		if (strcmp(k, "endpoints"))
			return bad("unknown member \"%s\" (the file holds \"endpoints\")", k);
	eps = json_object_get(tab.doc, "endpoints");
	if (!eps)
		return CORE_OK;
	if (!json_is_object(eps))
		return bad("\"endpoints\" must be an object of endpoints by name");
	if (!(tab.eps = calloc(json_object_size(eps) + 1, sizeof *tab.eps)))
		return core_fail(&tab.err, CORE_ENOMEM, "out of memory");
	json_object_foreach((json_t *)eps, k, x) {
		if (read_endpoint(&tab.eps[i], k, x))
			return tab.err.st;
		tab.n = ++i;
	}
	return CORE_OK;
}

static void load_once(void)
{
	if (load_file()) {
		/* A file that is not right stands for no endpoint at all. */
		free(tab.eps);
		tab.eps = NULL;
		tab.n = 0;
	}
}

const char *endpoints_file(void)
{
	pthread_once(&tab.once, load_once);
	return tab.path[0] ? tab.path : NULL;
}

enum core_status endpoints_load(struct core_err *e)
{
	pthread_once(&tab.once, load_once);
	if (tab.err.st && e)
		*e = tab.err;
	return tab.err.st;
}

const struct endpoint *endpoints_find(const char *name, size_t len)
{
	if (endpoints_load(NULL))
		return NULL;
	for (size_t i = 0; i < tab.n; i++)
		if (strlen(tab.eps[i].name) == len && !strncmp(tab.eps[i].name, name, len))
			return &tab.eps[i];
	return NULL;
}

const char *endpoints_name(size_t i)
{
	endpoints_load(NULL);
	return i < tab.n ? tab.eps[i].name : NULL;
}

int endpoints_variable(const char *entry)
{
	size_t len = strcspn(entry, "=");
	endpoints_load(NULL);
	for (size_t i = 0; i < tab.nvars; i++)
		if (strlen(tab.vars[i]) == len && !strncmp(tab.vars[i], entry, len))
			return 1;
	return 0;
}

/* ---- a call ---- */

/*
 * A value with its variables expanded into out.  CORE_EUNAUTH naming the
 * variable (never its value) when one is unset or empty.
 */
static enum core_status expand_vars(const struct endpoint *ep, const char *spot, const char *s,
                                    struct core_buf *out, struct core_err *e)
{
	core_buf_reset(out);
	for (const char *p = s; *p;) {
		const char *name, *v;
		size_t nlen, n;
		char var[256];
		if (*p != '$') {
			n = strcspn(p, "$");
			if (core_buf_add(out, p, n))
				return core_fail(e, CORE_ENOMEM, "%s: out of memory", ep->name);
			p += n;
			continue;
		}
		if (p[1] == '$') {
			if (core_buf_addc(out, '$'))
				return core_fail(e, CORE_ENOMEM, "%s: out of memory", ep->name);
			p += 2;
			continue;
		}
		n = var_ref(p, &name, &nlen);   /* checked when the file was read */
		snprintf(var, sizeof var, "%.*s", (int)nlen, name);
		v = getenv(var);
		if (!v || !*v)
			return core_fail(e, CORE_EUNAUTH, "%s: %s names %s, which is not set (models file "
			                 "%s)", ep->name, spot, var, tab.path);
		if (core_buf_adds(out, v))
			return core_fail(e, CORE_ENOMEM, "%s: out of memory", ep->name);
		p += n;
	}
	return core_buf_add(out, "", 0) ? core_fail(e, CORE_ENOMEM, "%s: out of memory", ep->name)
	                                : CORE_OK;
}

/* Percent-encode s (all but RFC 3986's unreserved characters) onto out. */
static enum core_status add_encoded(struct core_buf *out, const char *s)
{
	enum core_status st = CORE_OK;
	for (; *s && !st; s++) {
		unsigned char c = (unsigned char)*s;
		if (name_char((char)c) || c == '-' || c == '.' || c == '~')
			st = core_buf_addc(out, (char)c);
		else
			st = core_buf_addf(out, "%%%02X", c);
	}
	return st;
}

static void trim(struct core_buf *b)
{
	size_t s = 0;
	if (!b->p)
		return;
	while (b->len && strchr(" \t\r\n", b->p[b->len - 1]))
		b->p[--b->len] = 0;
	while (s < b->len && strchr(" \t\r\n", b->p[s]))
		s++;
	memmove(b->p, b->p + s, b->len - s + 1);
	b->len -= s;
}

/* How the credential command ended, as the call's outcome: a timeout
 * (DEADLINE_EXCEEDED), a failure with its stderr's first line
 * (UNAUTHENTICATED), or CORE_OK.  err is made valid text and trimmed. */
static enum core_status cred_outcome(const char *name, const struct run_child *c,
                                     struct core_buf *err, struct core_err *e)
{
	/* Outside bytes: its stderr may be quoted in a message or a row. */
	core_buf_fix_text(err);
	trim(err);
	if (c->timed_out)
		return core_fail(e, CORE_EDEADLINE, "%s: the credential command did not finish "
		                 "within %d s", name, CRED_TIMEOUT_MS / 1000);
	if (!c->code && !c->signal)
		return CORE_OK;
	/* The first line of its stderr says why ("not logged in"), cut at a
	 * character's boundary. */
	size_t why = err->p ? strcspn(err->p, "\r\n") : 0;
	if (why > 200)
		why = utf8_valid(err->p, 200);
	return core_fail(e, CORE_EUNAUTH, "%s: the credential command %s %d%s%.*s", name,
	                 c->signal ? "was killed by signal" : "exited", c->signal ? c->signal : c->code,
	                 why ? ": " : "", (int)why, err->p ? err->p : "");
}

/*
 * Run the credential command: its stdout into out, its stderr (the start
 * of it, made valid UTF-8) into err, CRED_OUT_MAX bytes of each.  Bounded
 * by CRED_TIMEOUT_MS; run.h says how it ends (what it left running goes
 * with it).
 */
static enum core_status run_command(const char *name, const json_t *cmd, struct core_buf *out,
                                    struct core_buf *err, struct core_err *e)
{
	size_t n = json_array_size(cmd);
	char **argv = calloc(n + 1, sizeof *argv), **env = run_env(NULL, NULL);
	struct run_child c = { .argv = argv, .env = env, .what = "the credential command",
	                       .timeout_ms = CRED_TIMEOUT_MS, .out = out, .out_keep = CRED_OUT_MAX,
	                       .err = err, .err_keep = CRED_OUT_MAX }, *cp = &c;
	enum core_status st = CORE_OK;
	if (!argv || !env)
		st = core_fail(e, CORE_ENOMEM, "%s: out of memory", name);
	for (size_t i = 0; !st && i < n; i++)
		argv[i] = (char *)json_string_value(json_array_get(cmd, i));
	if (!st && (st = run_start(&c, e)))
		core_err_prefix(e, "%s", name);
	else if (!st && (st = run_wait_all(&cp, 1, NULL, NULL, e)))
		core_err_prefix(e, "%s: the credential command", name);
	free(argv);
	free(env);
	return st ? st : cred_outcome(name, &c, err, e);
}

/* A token from the command's output and the time it stops being valid. */
static enum core_status parse_token(const char *name, int64_t ttl_ms, struct core_buf *out,
                                    char **token, int64_t *until, struct core_err *e)
{
	int64_t now = core_now_ns();
	trim(out);
	if (out->len && out->p[0] == '{') {
		struct core_err pe = { 0 };
		json_t *doc = jv_parse(out->p, out->len, "credential", 0, &pe);
		const json_t *t = json_object_get(doc, "token");
		const json_t *at = json_object_get(doc, "expiresAt");
		const json_t *in = json_object_get(doc, "expiresIn");
		int64_t ns;
		*until = now + (int64_t)ttl_ms * 1000000;
		if (!json_is_string(t) || !json_string_length(t)) {
			json_decref(doc);
			return core_fail(e, CORE_EUNAUTH, "%s: the credential command printed JSON "
			                 "without a \"token\" string", name);
		}
		if (json_is_string(at) && !core_time_parse(json_string_value(at), &ns))
			*until = ns;
		else if (json_is_number(at))
			*until = (int64_t)(json_number_value(at) * 1e9);
		else if (json_is_number(in))
			*until = now + (int64_t)(json_number_value(in) * 1e9);
		else if (at || in) {
			json_decref(doc);
			return core_fail(e, CORE_EUNAUTH, "%s: the credential command's \"expiresAt\" is "
			                 "not an RFC 3339 time or Unix seconds", name);
		}
		*token = strdup(json_string_value(t));
		json_decref(doc);
	} else {
		const char *p = out->p ? out->p : "";
		size_t n = 0;
		while (n < out->len && p[n] != '\r' && p[n] != '\n')
			n++;
		if (!n)
			return core_fail(e, CORE_EUNAUTH, "%s: the credential command printed no token",
			                 name);
		if (memchr(p, 0, n))
			return core_fail(e, CORE_EUNAUTH, "%s: the credential command's token holds a "
			                 "NUL byte", name);
		*token = strndup(out->p, n);
		*until = now + (int64_t)ttl_ms * 1000000;
	}
	return *token ? CORE_OK : core_fail(e, CORE_ENOMEM, "%s: out of memory", name);
}

enum core_status credential_run(const char *name, const json_t *cmd, int64_t ttl_ms,
                                char **token, int64_t *until_ns, struct core_err *e)
{
	struct core_buf out = CORE_BUF_INIT(CRED_OUT_MAX + 1);
	struct core_buf err = CORE_BUF_INIT(3 * CRED_OUT_MAX + 1);  /* room to be made valid */
	enum core_status st;
	*token = NULL;
	if (!(st = run_command(name, cmd, &out, &err, e)))
		st = parse_token(name, ttl_ms, &out, token, until_ns, e);
	if (out.p)
		explicit_bzero(out.p, out.len);
	core_buf_release(&out);
	core_buf_release(&err);
	return st;
}

/* The endpoint's token: the one kept while it has life left, else a new
 * one from the command.  *token is the caller's (prov_secret_free). */
static enum core_status cred_token(struct endpoint *ep, char **token, struct core_err *e)
{
	enum core_status st = CORE_OK;
	int64_t until = 0;
	/* One command at a time: two calls at once need one token. */
	pthread_mutex_lock(&tab.lock);
	if (ep->token && core_now_ns() + CRED_MARGIN_NS < ep->token_until_ns) {
		*token = strdup(ep->token);
		if (!*token)
			st = core_fail(e, CORE_ENOMEM, "%s: out of memory", ep->name);
		goto out;
	}
	prov_secret_free(ep->token);
	ep->token = NULL;
	if (!(st = credential_run(ep->name, ep->cred_cmd, ep->cred_ttl_ms, token, &until, e))) {
		ep->token = strdup(*token);
		ep->token_until_ns = until;
	}
out:
	pthread_mutex_unlock(&tab.lock);
	return st;
}

static void cred_forget(struct endpoint *ep)
{
	pthread_mutex_lock(&tab.lock);
	prov_secret_free(ep->token);
	ep->token = NULL;
	pthread_mutex_unlock(&tab.lock);
}

/* The key, its header format ("Name: %s", in fmt) and where it came from
 * (*from, for a message). */
static enum core_status endpoint_key(struct endpoint *ep, const struct model_request *req,
                                     char **key, char *fmt, size_t fmtlen, const char **from,
                                     struct core_err *e)
{
	enum core_status st = CORE_OK;
	const char *dflt = ep->d && ep->d->auth_fmt ? ep->d->auth_fmt : "Authorization: Bearer %s";
	*key = NULL;
	*from = ep->key_var ? ep->key_var : ep->cred_cmd ? "the credential command's token"
	                                                 : "the key file's key";
	if (ep->cred_cmd) {
		st = cred_token(ep, key, e);
		dflt = "Authorization: Bearer %s";
	} else if (ep->key_var) {
		const char *const vars[] = { ep->key_var, NULL };
		const char *v = getenv(ep->key_var);
		st = v && *v ? prov_key(ep->name, vars, NULL, key, e)
		   : core_fail(e, CORE_EUNAUTH, "%s: no API key: set %s (models file %s)", ep->name,
		               ep->key_var, tab.path);
	} else if (ep->key_file) {
		/* Only the endpoint's own: --key-file holds a built-in
		 * provider's key, which must not go to another server. */
		static const char *const none[] = { "", NULL };
		st = prov_key(ep->name, none, ep->key_file, key, e);
	}
	if (ep->key_header)
		snprintf(fmt, fmtlen, "%s: %%s", ep->key_header);
	else
		snprintf(fmt, fmtlen, "%s", dflt);
	return st;
}

/* Each variable a value of the endpoint names (baseUrl, headers, query)
 * set, as a call expands them (expand_vars()). */
static enum core_status check_vars(const struct endpoint *ep, struct core_err *e)
{
	struct core_buf val = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = CORE_OK;
	const char *k;
	json_t *x;
	char spot[300];
	if (ep->base)
		st = expand_vars(ep, "\"baseUrl\"", ep->base, &val, e);
	json_object_foreach((json_t *)ep->headers, k, x) {
		snprintf(spot, sizeof spot, "header '%s'", k);
		if (st || (st = expand_vars(ep, spot, json_string_value(x), &val, e)))
			break;
	}
	json_object_foreach((json_t *)ep->query, k, x) {
		snprintf(spot, sizeof spot, "query parameter '%s'", k);
		if (st || (st = expand_vars(ep, spot, json_string_value(x), &val, e)))
			break;
	}
	if (val.p)
		explicit_bzero(val.p, val.len);
	core_buf_release(&val);
	return st;
}

/* A genkit endpoint named as a model. */
static enum core_status not_models(const struct endpoint *ep, struct core_err *e)
{
	return core_fail(e, CORE_EUSAGE, "%s: a genkit endpoint serves agents, not models: run "
	                 "them with --url %s/AGENT or url: %s/AGENT (models file %s)", ep->name,
	                 ep->name, ep->name, tab.path);
}

enum core_status endpoints_check_credentials(const struct endpoint *cep, struct core_err *e)
{
	struct endpoint *ep = (struct endpoint *)cep;
	const char *argv0 = json_string_value(json_array_get(ep->cred_cmd, 0)), *from;
	char *key = NULL, fmt[320];
	enum core_status st = CORE_OK;
	if (ep->agents)
		return not_models(ep, e);
	/* The command itself runs at the first call: it may be slow, or ask
	 * a person; here only that it is there. */
	if (ep->cred_cmd && !spawn_program_found(argv0))
		st = core_fail(e, CORE_ENOKEY, "%s: the credential command '%s' is not found "
		               "(models file %s)", ep->name, argv0, tab.path);
	else if (!ep->cred_cmd)
		st = endpoint_key(ep, NULL, &key, fmt, sizeof fmt, &from, e);
	if (!st)
		st = check_vars(ep, e);
	prov_secret_free(key);
	return prov_key_missing(st, e);
}

enum core_status endpoints_generate(const struct endpoint *cep, const char *model,
                                    const struct model_request *req,
                                    const struct model_stream *stream,
                                    struct model_response *resp, struct core_err *e)
{
	struct endpoint *ep = (struct endpoint *)cep;
	struct core_buf base = CORE_BUF_INIT(CORE_BUF_UNLIMITED), val = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_buf query = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct prov_headers h = { 0 };
	const char *alias = json_string_value(json_object_get(ep->models, model)), *k;
	char *key = NULL, fmt[320];
	const char *from = NULL;
	json_t *x;
	enum core_status st;
	if (ep->agents)
		return not_models(ep, e);
	if ((st = endpoint_key(ep, req, &key, fmt, sizeof fmt, &from, e)))
		goto out;
	if (ep->base) {
		if ((st = expand_vars(ep, "\"baseUrl\"", ep->base, &base, e)))
			goto out;
	} else if (ep->d == &prov_dialect_ollama) {
		st = core_buf_addf(&base, "http://%s", ep->d->p->default_url);
	} else {
		st = core_buf_adds(&base, ep->d->p->default_url);
	}
	while (!st && base.len && base.p[base.len - 1] == '/')
		base.p[--base.len] = 0;
	json_object_foreach((json_t *)ep->headers, k, x) {
		char spot[300];
		snprintf(spot, sizeof spot, "header '%s'", k);
		if (st || (st = expand_vars(ep, spot, json_string_value(x), &val, e)))
			break;
		if ((st = prov_headers_add(&h, k, val.p, e)))
			core_err_prefix(e, "%s", ep->name);
	}
	json_object_foreach((json_t *)ep->query, k, x) {
		char spot[300];
		snprintf(spot, sizeof spot, "query parameter '%s'", k);
		if (st || (st = expand_vars(ep, spot, json_string_value(x), &val, e)))
			break;
		if ((query.len && core_buf_addc(&query, '&')) || add_encoded(&query, k) ||
		    core_buf_addc(&query, '=') || add_encoded(&query, val.p))
			st = core_fail(e, CORE_ENOMEM, "%s: out of memory", ep->name);
	}
	if (st || (st = core_buf_add(&base, "", 0)) || (st = core_buf_add(&query, "", 0))) {
		if (st == CORE_ENOMEM)
			core_fail(e, st, "%s: out of memory", ep->name);
		goto out;
	}
	struct prov_target t = { .what = ep->name, .base = base.p, .key = key, .key_from = from,
	                         .auth_fmt = key ? fmt : NULL, .headers = (const char *const *)h.v,
	                         .query = query.p, .timeout_ms = ep->timeout_ms,
	                         .timeout_what = "the endpoint's \"timeout\" in the models file" };
	st = prov_generate_to(ep->d, &t, alias ? alias : model, req, stream, resp, e);
	/* Refused, or not sendable (a line break): the next call asks for a
	 * new token. */
	if ((st == CORE_EUNAUTH || st == CORE_EINVAL) && ep->cred_cmd)
		cred_forget(ep);
out:
	prov_headers_release(&h);
	prov_secret_free(key);
	if (val.p)
		explicit_bzero(val.p, val.len);
	if (query.p)
		explicit_bzero(query.p, query.len);
	core_buf_release(&val);
	core_buf_release(&query);
	core_buf_release(&base);
	return st;
}

/* ---- agents on Genkit's wire ---- */

enum core_status endpoints_agent_target(const char *ref, char **url, struct prov_headers *h,
                                        struct core_err *e)
{
	const char *slash = strchr(ref, '/'), *from, *k;
	const struct endpoint *cep = slash ? endpoints_find(ref, (size_t)(slash - ref)) : NULL;
	struct endpoint *ep = (struct endpoint *)cep;
	struct core_buf base = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_buf val = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	char *key = NULL, fmt[320];
	json_t *x;
	size_t nq = 0;
	enum core_status st;
	*url = NULL;
	if ((st = endpoints_load(e)))
		return st;
	if (!ep)
		return core_fail(e, CORE_EUSAGE, "'%s' is neither an http:// or https:// URL nor "
		                 "NAME/AGENT of a genkit endpoint of the models file (%s)", ref,
		                 tab.path[0] ? tab.path : "none");
	if (!ep->agents)
		return core_fail(e, CORE_EUSAGE, "%.*s: a %s endpoint serves models, not agents: "
		                 "an agent server is \"dialect\": \"genkit\" (models file %s)",
		                 (int)(slash - ref), ref, ep->dialect, tab.path);
	if ((st = endpoint_key(ep, NULL, &key, fmt, sizeof fmt, &from, e)) ||
	    (st = expand_vars(ep, "\"baseUrl\"", ep->base, &base, e)))
		goto out;
	while (base.len && base.p[base.len - 1] == '/')
		base.p[--base.len] = 0;
	if (core_buf_addc(&base, '/') || core_buf_adds(&base, slash + 1)) {
		st = core_fail(e, CORE_ENOMEM, "%s: out of memory", ep->name);
		goto out;
	}
	json_object_foreach((json_t *)ep->query, k, x) {
		char spot[300];
		snprintf(spot, sizeof spot, "query parameter '%s'", k);
		if ((st = expand_vars(ep, spot, json_string_value(x), &val, e)))
			goto out;
		if (core_buf_addc(&base, nq++ ? '&' : '?') ||
		    add_encoded(&base, k) || core_buf_addc(&base, '=') || add_encoded(&base, val.p)) {
			st = core_fail(e, CORE_ENOMEM, "%s: out of memory", ep->name);
			goto out;
		}
	}
	if (key) {
		char hdr[320];
		const char *colon = strchr(fmt, ':');
		snprintf(hdr, sizeof hdr, "%.*s", colon ? (int)(colon - fmt) : 0, fmt);
		/* fmt is "Name: [prefix ]%s": the value is its part after ": " */
		struct core_buf hv = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		const char *pct = strstr(fmt, "%s");
		if (!colon || !pct || core_buf_add(&hv, colon + 2, (size_t)(pct - colon - 2)) ||
		    core_buf_adds(&hv, key)) {
			core_buf_release(&hv);
			st = core_fail(e, CORE_ENOMEM, "%s: out of memory", ep->name);
			goto out;
		}
		st = prov_headers_add(h, hdr, hv.p, e);
		explicit_bzero(hv.p, hv.len);
		core_buf_release(&hv);
		if (st) {
			core_err_prefix(e, "%s", ep->name);
			goto out;
		}
	}
	json_object_foreach((json_t *)ep->headers, k, x) {
		char spot[300];
		snprintf(spot, sizeof spot, "header '%s'", k);
		if ((st = expand_vars(ep, spot, json_string_value(x), &val, e)))
			goto out;
		if ((st = prov_headers_add(h, k, val.p, e))) {
			core_err_prefix(e, "%s", ep->name);
			goto out;
		}
	}
	if (core_buf_addc(&base, '\0')) {
		st = core_fail(e, CORE_ENOMEM, "%s: out of memory", ep->name);
		goto out;
	}
	*url = base.p;
	base.p = NULL;
out:
	prov_secret_free(key);
	if (val.p)
		explicit_bzero(val.p, val.len);
	core_buf_release(&val);
	core_buf_release(&base);
	return st;
}

/* ---- --list-models ---- */

static json_t *names_of(const json_t *obj)
{
	json_t *a = json_array(), *x;
	const char *k;
	json_object_foreach((json_t *)obj, k, x)
		json_array_append_new(a, json_string(k));
	return a;
}

/* "NAME/MODEL" onto a for each of ep's models: its list, or its aliases. */
static void model_names(const struct endpoint *ep, json_t *a)
{
	const char *k;
	json_t *x;
	size_t i;
	if (json_is_array(ep->models)) {
		json_array_foreach(ep->models, i, x) {
			char *full = prov_strf("%s/%s", ep->name, json_string_value(x));
			json_array_append_new(a, full ? json_string(full) : NULL);
			free(full);
		}
		return;
	}
	json_object_foreach((json_t *)ep->models, k, x) {
		char *full = prov_strf("%s/%s", ep->name, k);
		json_array_append_new(a, full ? json_string(full) : NULL);
		free(full);
	}
}

json_t *endpoints_model_names(void)
{
	json_t *a = json_array();
	if (!a || endpoints_load(NULL))
		return a;
	for (size_t i = 0; i < tab.n; i++) {
		if (tab.eps[i].agents)  /* agents, not models */
			continue;
		char *pre = prov_strf("%s/", tab.eps[i].name);
		json_array_append_new(a, pre ? json_string(pre) : NULL);
		free(pre);
		model_names(&tab.eps[i], a);
	}
	return a;
}

enum core_status endpoints_list(json_t *rows, struct core_err *e)
{
	enum core_status st = endpoints_load(e);
	if (st)
		return st;
	for (size_t i = 0; i < tab.n; i++) {
		const struct endpoint *ep = &tab.eps[i];
		const char *from = NULL;
		char pub[2048];
		json_t *models = json_array();
		if (ep->cred_cmd)
			from = "credential command";
		else if (ep->key_file)
			from = "key file";
		else if (ep->key_var && getenv(ep->key_var) && *getenv(ep->key_var))
			from = ep->key_var;
		core_url_redact(ep->base ? ep->base : ep->d->p->default_url, pub, sizeof pub);
		model_names(ep, models);
		json_t *row = json_pack("{s:s, s:s, s:[], s:o, s:s, s:o, s:o, s:o, s:s}",
		                        "provider", ep->name, "dialect", ep->dialect,
		                        "keyVariables", "keyFrom", from ? json_string(from) : json_null(),
		                        "baseUrl", pub, "headers", names_of(ep->headers),
		                        "query", names_of(ep->query), "models", models,
		                        "modelsFile", tab.path);
		/* An agent server: no models; its agents are NAME/AGENT (--url, url:). */
		if (row && ep->agents) {
			char *form = prov_strf("%s/AGENT", ep->name);
			json_object_del(row, "models");
			if (!form || json_object_set_new(row, "agents", json_string(form))) {
				free(form);
				json_decref(row);
				return core_fail(e, CORE_ENOMEM, "out of memory");
			}
			free(form);
		}
		if (row && ep->key_var)
			json_array_append_new(json_object_get(row, "keyVariables"),
			                      json_string(ep->key_var));
		if (!row || json_array_append_new(rows, row))
			return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	return CORE_OK;
}

const struct prov_dialect *endpoints_dialect(const struct endpoint *ep)
{
	return ep->d;
}
