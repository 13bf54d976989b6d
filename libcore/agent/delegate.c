/* delegate.c - sub-agents as tools, each call a child agent-run in a
 * session of its own (delegate.h). */
#include "delegate.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/buf.h"
#include "../base/json.h"
#include "../base/run.h"
#include "../base/spawn.h"
#include "../base/util.h"
#include "../../store/store.h"
#include "prompt.h"
#include "session.h"
#include "tools.h"

extern char **environ;

struct delegate_ref {
	char *name;             /* the agent's name, as the ref gives it */
	char *description;      /* the ref's own, or NULL */
	char *discovered;       /* the sub-agent's front matter description, or NULL */
	char *path;             /* its prompt file */
	int remote;             /* it names a remote agent (url:, docs/serve.md) */
};

struct delegate_config {
	struct delegate_ref *refs;
	size_t nrefs;
	char *owner;            /* the agent these are of */
	char *prefix;
	long max_delegations, max_total, history_length;
	int session_strategy;   /* artifactStrategy session (else inline) */
	long max_depth;
	int64_t timeout_ms;
	int async;              /* background delegation and the task tools */
	char *queue;            /* background tasks go to this queue (agent-run
	                           --queue, docs/queue.md), not to a local worker */
	int prefix_given;       /* toolPrefix was written (it names the task tools) */
	char *search;           /* the agent search path, ':'-joined, for the children */
};

/* ---- reading the front matter ---- */

static int is_file(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
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

/* NAME.prompt in from's directory, then in dirs: a new string. */
static enum core_status find_sub(const char *from, const char *name, char *const *dirs,
                                 char **found, struct core_err *e)
{
	char *own = dir_of(from);
	struct core_buf p = CORE_BUF_INIT(PATH_MAX), tried = CORE_BUF_INIT(8192);
	enum core_status st = own ? CORE_ENOTFOUND : CORE_ENOMEM;
	for (long i = -1; own && st == CORE_ENOTFOUND && (i < 0 || dirs[i]); i++) {
		const char *d = i < 0 ? own : dirs[i];
		core_buf_reset(&p);
		if (core_buf_addf(&p, "%s/%s.prompt", d, name)) {
			st = core_fail(e, CORE_EINVAL, "%s: agents: name '%s' is too long", from, name);
			break;
		}
		if (is_file(p.p)) {
			*found = core_buf_detach(&p, NULL);
			st = *found ? CORE_OK : CORE_ENOMEM;
		} else {
			core_buf_addf(&tried, "%s%s", tried.len ? ", " : "", d);
		}
	}
	if (st == CORE_ENOTFOUND)
		core_fail(e, st, "%s: agents: agent '%s' not found (searched: %s)", from, name,
		          tried.len ? tried.p : "");
	else if (st == CORE_ENOMEM)
		core_fail(e, st, "out of memory");
	free(own);
	core_buf_release(&p);
	core_buf_release(&tried);
	return st;
}

/* A name usable in a tool name and a file name: letters, digits, '_', '-'. */
static int good_name(const char *s)
{
	if (!*s || strlen(s) > 64)
		return 0;
	for (; *s; s++)
		if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') &&
		    !(*s >= '0' && *s <= '9') && *s != '_' && *s != '-')
			return 0;
	return 1;
}

/* The refs and options of value v (a list, or Genkit's options object). */
static enum core_status parse(const json_t *v, const char *path, struct delegate_config *c,
                              struct core_err *e)
{
	const json_t *list = v, *o;
	static const char *const known[] = {
		"agents", "toolPrefix", "maxDelegations", "historyLength", "artifactStrategy",
		"maxDepth", "maxTotalDelegations", "timeout", "async", "queue", NULL
	};
	c->max_depth = DELEGATE_DEFAULT_MAX_DEPTH;
	c->timeout_ms = DELEGATE_DEFAULT_TIMEOUT_MS;
	if (json_is_object(v)) {
		const char *k;
		json_t *x;
		json_object_foreach((json_t *)v, k, x) {
			size_t i = 0;
			while (known[i] && strcmp(known[i], k))
				i++;
			if (!known[i])
				return core_fail(e, CORE_EINVAL, "%s: agents: unknown option '%s' (options: "
				                 "agents, toolPrefix, maxDelegations, historyLength, "
				                 "artifactStrategy, async, queue, maxDepth, "
				                 "maxTotalDelegations, timeout)", path, k);
		}
		list = json_object_get(v, "agents");
		if ((o = json_object_get(v, "toolPrefix")) && !jv_is_string(o))
			return core_fail(e, CORE_EINVAL, "%s: agents: toolPrefix must be a string", path);
		if (o && !(c->prefix = strdup(json_string_value(o))))
			return core_fail(e, CORE_ENOMEM, "out of memory");
		c->prefix_given = o != NULL;
		if ((o = json_object_get(v, "async")) && !json_is_boolean(o))
			return core_fail(e, CORE_EINVAL, "%s: agents: async must be true or false", path);
		c->async = json_is_true(o);
		if ((o = json_object_get(v, "queue")) &&
		    (!jv_is_string(o) || !*json_string_value(o) ||
		     strlen(json_string_value(o)) > STORE_QUEUE_NAME_MAX))
			return core_fail(e, CORE_EINVAL, "%s: agents: queue must be a queue's name (1 to "
			                 "%d bytes)", path, STORE_QUEUE_NAME_MAX);
		if (o && !(c->queue = strdup(json_string_value(o))))
			return core_fail(e, CORE_ENOMEM, "out of memory");
		struct { const char *key; long *dst; long min; } ints[] = {
			{ "maxDelegations", &c->max_delegations, 0 },
			{ "historyLength", &c->history_length, 0 },
			{ "maxDepth", &c->max_depth, 1 },
			{ "maxTotalDelegations", &c->max_total, 0 },
		};
		for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
			if (!(o = json_object_get(v, ints[i].key)))
				continue;
			if (!json_is_integer(o) || json_integer_value(o) < ints[i].min ||
			    json_integer_value(o) > 1000000)
				return core_fail(e, CORE_EINVAL, "%s: agents: %s must be an integer "
				                 "from %ld, got %s", path, ints[i].key, ints[i].min,
				                 json_is_integer(o) ? "one out of range" : jv_type_name(o));
			*ints[i].dst = (long)json_integer_value(o);
		}
		if ((o = json_object_get(v, "artifactStrategy"))) {
			const char *s = jv_is_string(o) ? json_string_value(o) : "";
			if (strcmp(s, "inline") && strcmp(s, "session"))
				return core_fail(e, CORE_EINVAL, "%s: agents: artifactStrategy must be "
				                 "inline or session", path);
			c->session_strategy = !strcmp(s, "session");
		}
		if ((o = json_object_get(v, "timeout"))) {
			struct core_err de = { 0 };
			const char *s = jv_is_string(o) ? json_string_value(o) : NULL;
			char num[32];
			if (json_is_integer(o)) {
				snprintf(num, sizeof num, "%lld", (long long)json_integer_value(o));
				s = num;
			}
			if (!s || core_parse_duration(s, &c->timeout_ms, &de) || c->timeout_ms <= 0)
				return core_fail(e, CORE_EINVAL, "%s: agents: timeout must be a duration "
				                 "greater than 0 (250ms, 30s, 5m)", path);
		}
	}
	if (!c->prefix && !(c->prefix = strdup(DELEGATE_DEFAULT_PREFIX)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	if (!json_is_array(list) || !json_array_size(list))
		return core_fail(e, CORE_EINVAL, "%s: agents: requires at least one agent (a list of "
		                 "names or {name, description} objects)", path);
	if (!(c->refs = calloc(json_array_size(list), sizeof *c->refs)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	size_t i;
	json_t *r;
	json_array_foreach(list, i, r) {
		struct delegate_ref *ref = &c->refs[c->nrefs++];
		const json_t *n = json_is_object(r) ? json_object_get(r, "name") : r;
		const json_t *d = json_is_object(r) ? json_object_get(r, "description") : NULL;
		if (json_is_object(r)) {
			const char *k;
			json_t *x;
			json_object_foreach(r, k, x)
				if (strcmp(k, "name") && strcmp(k, "description"))
					return core_fail(e, CORE_EINVAL, "%s: agents: unknown member '%s' "
					                 "of an agent (name, description)", path, k);
		}
		if (!jv_is_string(n) || !good_name(json_string_value(n)))
			return core_fail(e, CORE_EINVAL, "%s: agents: every agent must have a name "
			                 "(letters, digits, '_' and '-')", path);
		if (d && !jv_is_string(d))
			return core_fail(e, CORE_EINVAL, "%s: agents: the description of '%s' must be "
			                 "a string", path, json_string_value(n));
		if (!(ref->name = strdup(json_string_value(n))) ||
		    (d && !(ref->description = strdup(json_string_value(d)))))
			return core_fail(e, CORE_ENOMEM, "out of memory");
		for (size_t j = 0; j + 1 < c->nrefs; j++)
			if (!strcmp(c->refs[j].name, ref->name))
				return core_fail(e, CORE_EINVAL, "%s: agents: '%s' is named twice", path,
				                 ref->name);
	}
	return CORE_OK;
}

/* ---- the graph: cycles and depth ---- */

struct chain {
	const char *names[64];
	size_t n;
};

static void chain_text(const struct chain *ch, const char *last, struct core_buf *b)
{
	for (size_t i = 0; i < ch->n; i++)
		core_buf_addf(b, "%s -> ", ch->names[i]);
	core_buf_adds(b, last);
}

/* What a config holds (c itself stays: walk()'s is on its stack). */
static void config_release(struct delegate_config *c)
{
	for (size_t i = 0; i < c->nrefs; i++) {
		free(c->refs[i].name);
		free(c->refs[i].description);
		free(c->refs[i].discovered);
		free(c->refs[i].path);
	}
	free(c->refs);
	free(c->owner);
	free(c->prefix);
	free(c->queue);
	free(c->search);
}

/*
 * Walk the sub-agents of the prompt at path (its agents value v) below
 * the chain so far: a name already on it is a cycle; a chain longer
 * than room more levels is too deep.  top names the file in messages.
 */
static enum core_status walk(const json_t *v, const char *path, const char *name,
                             char *const *dirs, struct chain *ch, long room, long max_depth,
                             const char *top, struct core_err *e)
{
	struct delegate_config c = { 0 };
	enum core_status st = parse(v, path, &c, e);
	ch->names[ch->n++] = name;
	for (size_t i = 0; !st && i < c.nrefs; i++) {
		struct delegate_ref *r = &c.refs[i];
		struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		int cycle = 0;
		for (size_t j = 0; j < ch->n; j++)
			cycle |= !strcmp(ch->names[j], r->name);
		if (cycle) {
			chain_text(ch, r->name, &b);
			st = core_fail(e, CORE_EINVAL, "%s: agents: delegation cycle: %s", top,
			               b.p ? b.p : r->name);
		} else if (room < 1 || ch->n >= sizeof ch->names / sizeof ch->names[0]) {
			chain_text(ch, r->name, &b);
			st = core_fail(e, CORE_EINVAL, "%s: agents: delegation deeper than maxDepth %ld: "
			               "%s", top, max_depth, b.p ? b.p : r->name);
		} else if (!(st = find_sub(path, r->name, dirs, &r->path, e))) {
			struct prompt *p = NULL;
			if ((st = prompt_load(r->path, &p, e)) == CORE_OK) {
				const json_t *sub = json_object_get(prompt_meta(p), "agents");
				if (sub)
					st = walk(sub, r->path, r->name, dirs, ch, room - 1, max_depth, top, e);
			}
			prompt_free(p);
		}
		core_buf_release(&b);
	}
	ch->n--;
	config_release(&c);
	return st;
}

/* The depth this process runs at: 0 at the top. */
static long own_depth(void)
{
	const char *d = getenv("AGENTKIT_DELEGATION_DEPTH");
	char *end;
	long n = d ? strtol(d, &end, 10) : 0;
	return d && *d && !*end && n > 0 && n < 1000 ? n : 0;
}

enum core_status delegate_config_load(const json_t *meta, const char *path, const char *name,
                                      char *const *dirs, struct delegate_config **out,
                                      struct core_err *e)
{
	const json_t *v = json_object_get(meta, "agents");
	struct delegate_config *c;
	enum core_status st;
	*out = NULL;
	if (!v)
		return CORE_OK;
	if (!(c = calloc(1, sizeof *c)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	if ((st = parse(v, path, c, e)))
		goto fail;
	/* The whole graph, from this agent; a process that is itself a
	 * delegation has fewer levels left. */
	struct chain ch = { .n = 0 };
	long room = c->max_depth - own_depth();
	if (room < 1) {
		st = core_fail(e, CORE_EINVAL, "%s: agents: delegation deeper than maxDepth %ld: "
		               "'%s' runs at depth %ld", path, c->max_depth, name, own_depth());
		goto fail;
	}
	if ((st = walk(v, path, name, dirs, &ch, room, c->max_depth, path, e)))
		goto fail;
	for (size_t i = 0; i < c->nrefs; i++) {
		struct prompt *p = NULL;
		if ((st = find_sub(path, c->refs[i].name, dirs, &c->refs[i].path, e)) ||
		    (st = prompt_load(c->refs[i].path, &p, e)))
			goto fail;
		const json_t *d = json_object_get(prompt_meta(p), "description");
		c->refs[i].remote = json_object_get(prompt_meta(p), "url") != NULL;
		if (jv_is_string(d) && !(c->refs[i].discovered = strdup(json_string_value(d))))
			st = core_fail(e, CORE_ENOMEM, "out of memory");
		prompt_free(p);
		if (st)
			goto fail;
	}
	struct core_buf s = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	for (char *const *d = dirs; d && *d; d++)
		if (!strchr(*d, ':'))
			core_buf_addf(&s, "%s%s", s.len ? ":" : "", *d);
	if (!(c->owner = strdup(name)) || !(c->search = s.p ? core_buf_detach(&s, NULL)
	                                                    : strdup(""))) {
		core_buf_release(&s);
		st = core_fail(e, CORE_ENOMEM, "out of memory");
		goto fail;
	}
	*out = c;
	return CORE_OK;
fail:
	delegate_config_free(c);
	return st;
}

void delegate_config_free(struct delegate_config *c)
{
	if (!c)
		return;
	config_release(c);
	free(c);
}

/* ---- the tools ---- */

static char *tool_name(const struct delegate_config *c, const char *agent)
{
	char *s = NULL;
	if (!*c->prefix)
		return strdup(agent);
	return asprintf(&s, "%s_%s", c->prefix, agent) < 0 ? NULL : s;
}

static json_t *definition(const struct delegate_config *c, const struct delegate_ref *r)
{
	char *name = tool_name(c, r->name), *desc = NULL;
	if (!name)
		return NULL;
	if (!r->description && asprintf(&desc, "Delegates a task to the \"%s\" sub-agent.",
	                                r->name) < 0) {
		free(name);
		return NULL;
	}
	json_t *art = c->session_strategy
	            ? json_pack("{s:s, s:{s:{s:s}}}", "type", "object", "properties", "name",
	                        "type", "string")
	            : json_pack("{s:s, s:{s:{s:s}, s:{s:s}}}", "type", "object", "properties",
	                        "name", "type", "string", "content", "type", "string");
	json_t *d = json_pack("{s:s, s:s, s:{s:s, s:{s:{s:s, s:s}}, s:[s], s:b}, "
	                      "s:{s:s, s:{s:{s:s}, s:{s:s, s:o}, s:{s:s}, s:{s:s}}, s:[s]}}",
	                      "name", name, "description", r->description ? r->description : desc,
	                      "inputSchema", "type", "object", "properties", "task",
	                      "type", "string", "description",
	                      "A clear, self-contained description of the task to delegate.",
	                      "required", "task", "additionalProperties", 0,
	                      "outputSchema", "type", "object", "properties",
	                      "response", "type", "string",
	                      "artifacts", "type", "array", "items", art,
	                      "sessionId", "type", "string", "snapshotId", "type", "string",
	                      "required", "response");
	free(name);
	free(desc);
	if (d && c->async) {
		json_t *in = json_object_get(d, "inputSchema");
		json_object_set_new(json_object_get(in, "properties"), "background",
		                    json_pack("{s:s, s:s}", "type", "boolean", "description",
		                              "Run the delegation in the background. The tool "
		                              "returns immediately with a taskId; collect the result "
		                              "later with check_background_tasks or "
		                              "wait_for_background_tasks."));
		json_t *op = json_object_get(json_object_get(d, "outputSchema"), "properties");
		json_object_set_new(op, "taskId", json_pack("{s:s}", "type", "string"));
		json_object_set_new(op, "status", json_pack("{s:s}", "type", "string"));
	}
	return d;
}

/* ---- the background-task tools (Go's Agents.Async) ---- */

enum task_tool { TASK_CHECK, TASK_WAIT, TASK_ABORT, TASK_TOOLS };

static const char *const task_base[TASK_TOOLS] = {
	"check_background_tasks", "wait_for_background_tasks", "abort_background_tasks",
};

/* Go's rule: the bare names unless toolPrefix was written. */
static char *task_tool_name(const struct delegate_config *c, enum task_tool k)
{
	char *s = NULL;
	if (!c->prefix_given || !*c->prefix)
		return strdup(task_base[k]);
	return asprintf(&s, "%s_%s", c->prefix, task_base[k]) < 0 ? NULL : s;
}

static json_t *task_definition(const struct delegate_config *c, enum task_tool k)
{
	static const char *const desc[TASK_TOOLS] = {
		"Returns the current status of background sub-agent tasks without waiting, "
		"including results for tasks that finished.",
		"Waits until the given background sub-agent tasks finish and returns their "
		"results. Set timeoutSeconds to bound the wait; on timeout the current statuses "
		"are returned.",
		"Aborts background sub-agent tasks that are still running and returns their "
		"statuses.",
	};
	char *name = task_tool_name(c, k);
	json_t *d = name ? json_pack("{s:s, s:s, s:{s:s, s:{s:{s:s, s:{s:s}, s:s}}, s:[s]}}",
	                             "name", name, "description", desc[k], "inputSchema",
	                             "type", "object", "properties", "taskIds", "type", "array",
	                             "items", "type", "string", "description",
	                             "Task IDs returned by background delegations (form "
	                             "\"<agent>:<snapshotId>\").", "required", "taskIds") : NULL;
	free(name);
	if (d && k == TASK_WAIT)
		json_object_set_new(json_object_get(json_object_get(d, "inputSchema"), "properties"),
		                    "timeoutSeconds", json_pack("{s:s, s:s}", "type", "integer",
		                    "description", "Maximum seconds to wait before returning the "
		                    "current statuses. 0 or omitted waits until every task settles "
		                    "(at most the delegation timeout); a negative value returns the "
		                    "current statuses immediately."));
	return d;
}

enum core_status delegate_describe(const struct delegate_config *c, json_t *tools, json_t *d,
                                   struct core_err *e)
{
	json_t *list = json_array();
	if (!list)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	for (size_t i = 0; i < c->nrefs; i++) {
		const struct delegate_ref *r = &c->refs[i];
		json_t *def = definition(c, r);
		const char *desc = r->description ? r->description : r->discovered;
		json_t *a = def ? json_pack("{s:s, s:O, s:s}", "name", r->name, "tool",
		                            json_object_get(def, "name"), "path", r->path) : NULL;
		if (a && desc)
			json_object_set_new(a, "description", json_string(desc));
		if (!a || json_array_append_new(tools, def) || json_array_append_new(list, a)) {
			json_decref(list);
			return core_fail(e, CORE_ENOMEM, "out of memory");
		}
	}
	for (int k = 0; c->async && k < TASK_TOOLS; k++)
		if (json_array_append_new(tools, task_definition(c, (enum task_tool)k))) {
			json_decref(list);
			return core_fail(e, CORE_ENOMEM, "out of memory");
		}
	char dur[CORE_DURATION_MAX];
	json_object_set_new(d, "agents", list);
	json_object_set_new(d, "delegation", json_pack("{s:s, s:I, s:I, s:s, s:I, s:I, s:s}",
	                    "toolPrefix", c->prefix, "maxDelegations", (json_int_t)c->max_delegations,
	                    "historyLength", (json_int_t)c->history_length,
	                    "artifactStrategy", c->session_strategy ? "session" : "inline",
	                    "maxDepth", (json_int_t)c->max_depth,
	                    "maxTotalDelegations", (json_int_t)c->max_total,
	                    "timeout", core_duration_text(c->timeout_ms, dur)));
	json_object_set_new(json_object_get(d, "delegation"), "async", json_boolean(c->async));
	return CORE_OK;
}

json_t *delegate_names(const struct delegate_config *c)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < c->nrefs; i++) {
		char *tn = tool_name(c, c->refs[i].name);
		if (!tn || json_object_set_new(o, tn, json_string(c->refs[i].name))) {
			free(tn);
			json_decref(o);
			return NULL;
		}
		free(tn);
	}
	return o;
}

/* ---- one runtime's delegations ---- */

struct delegate_tool {
	struct delegate_run *run;
	const struct delegate_ref *ref;     /* a delegation's, or NULL ... */
	int task;                           /* ... a task tool (enum task_tool) */
};

struct delegate_run {
	const struct delegate_config *c;
	struct store *const *store;
	char *store_location, *key_file, *agent_run;
	struct delegate_tool *tools;
	json_t *conversation;   /* the last request's messages */
	json_t *launched;       /* snapshot IDs of the background tasks started */
	json_t *counted;        /* task IDs whose usage this run counted: true */
	long turn;              /* the turn the count is of */
	long in_turn, total;    /* delegations this turn, this run */
};

struct delegate_run *delegate_run_new(const struct delegate_config *c, struct store *const *store,
                                      const char *store_location, const char *key_file)
{
	struct delegate_run *r;
	char self[PATH_MAX];
	ssize_t n;
	if (!c)
		return NULL;
	if (!(r = calloc(1, sizeof *r)))
		return NULL;
	r->c = c;
	r->store = store;
	r->turn = -1;
	/* agent-run beside this program; where that cannot be read, the name
	 * (the call then says it cannot start it). */
	n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = 0;
		char *slash = strrchr(self, '/');
		*slash = 0;
		if (asprintf(&r->agent_run, "%s/agent-run", self) < 0)
			r->agent_run = NULL;
	} else {
		r->agent_run = strdup("agent-run");
	}
	if (!r->agent_run || !(r->tools = calloc(c->nrefs + TASK_TOOLS, sizeof *r->tools)) ||
	    !(r->launched = json_array()) || !(r->counted = json_object()) ||
	    (store_location && !(r->store_location = strdup(store_location))) ||
	    (key_file && !(r->key_file = strdup(key_file)))) {
		delegate_run_free(r);
		return NULL;
	}
	for (size_t i = 0; i < c->nrefs; i++)
		r->tools[i] = (struct delegate_tool){ r, &c->refs[i], -1 };
	for (int k = 0; k < TASK_TOOLS; k++)
		r->tools[c->nrefs + k] = (struct delegate_tool){ r, NULL, k };
	return r;
}

void delegate_run_free(struct delegate_run *r)
{
	if (!r)
		return;
	free(r->store_location);
	free(r->key_file);
	free(r->agent_run);
	free(r->tools);
	json_decref(r->conversation);
	json_decref(r->launched);
	json_decref(r->counted);
	free(r);
}

size_t delegate_tool_count(const struct delegate_run *r)
{
	return r ? r->c->nrefs + (r->c->async ? TASK_TOOLS : 0) : 0;
}

static tool_start_fn call_start;
static tool_finish_fn call_finish;

enum core_status delegate_tool(struct delegate_run *r, size_t i, struct tool **out,
                               struct core_err *e)
{
	struct tool *t = calloc(1, sizeof *t);
	const struct delegate_ref *ref = i < r->c->nrefs ? &r->c->refs[i] : NULL;
	if (!t || !(t->definition = ref ? definition(r->c, ref)
	                                : task_definition(r->c, (enum task_tool)(i - r->c->nrefs))) ||
	    !(t->name = strdup(json_string_value(json_object_get(t->definition, "name")))) ||
	    asprintf(&t->manifest, "agent '%s'", ref ? ref->name : "background tasks") < 0) {
		if (t)
			t->manifest = NULL;
		tool_free(t);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	t->input_schema = json_object_get(t->definition, "inputSchema");
	t->timeout_ms = r->c->timeout_ms;
	t->start = call_start;
	t->finish = call_finish;
	t->impl = &r->tools[i];
	if (ref)
		t->span_attrs = json_pack("{s:s, s:s}", "agentkit.delegate.agent", ref->name,
		                          "agentkit.delegate.path", ref->path);
	*out = t;
	return CORE_OK;
}

/* ---- the system block ---- */

static int has_marker(const json_t *part)
{
	return json_is_true(json_object_get(json_object_get(part, "metadata"), DELEGATE_MARKER));
}

void delegate_augment(struct delegate_run *r, json_t *messages)
{
	if (!r)
		return;
	json_decref(r->conversation);
	r->conversation = json_deep_copy(messages);
	const struct delegate_config *c = r->c;
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	core_buf_adds(&b, "<sub-agents>\nYou can delegate tasks to specialized sub-agents using "
	              "their delegation tools:\n");
	for (size_t i = 0; i < c->nrefs; i++) {
		const struct delegate_ref *ref = &c->refs[i];
		const char *d = ref->description ? ref->description : ref->discovered;
		char *tn = tool_name(c, ref->name);
		core_buf_addf(&b, "  - %s: %s\n", tn ? tn : ref->name,
		              d && *d ? d : "No description available.");
		free(tn);
	}
	core_buf_adds(&b, "\nWhen a task is better handled by a specialized agent, delegate it "
	              "using the appropriate tool. Provide a clear, self-contained task "
	              "description.\n</sub-agents>");
	json_t *part = b.p ? json_pack("{s:s, s:{s:b}}", "text", b.p, "metadata",
	                               DELEGATE_MARKER, 1) : NULL;
	core_buf_release(&b);
	if (!part)
		return;
	size_t i, j;
	json_t *m, *p;
	/* A tagged part is refreshed in place (the request is a copy each
	 * call, so this is the caller's own tag). */
	json_array_foreach(messages, i, m)
		json_array_foreach(json_object_get(m, "content"), j, p)
			if (has_marker(p)) {
				json_array_set_new(json_object_get(m, "content"), j, part);
				return;
			}
	json_array_foreach(messages, i, m) {
		const char *role = json_string_value(json_object_get(m, "role"));
		json_t *content = json_object_get(m, "content");
		if (role && !strcmp(role, "system") && json_is_array(content)) {
			json_array_append_new(content, part);
			return;
		}
	}
	json_array_insert_new(messages, 0, json_pack("{s:s, s:[o]}", "role", "system",
	                                             "content", part));
}

/* ---- the link to the parent ---- */

/* $NAME as a JSON object (NULL for none), taken out of the environment. */
static json_t *take_env_object(const char *name)
{
	const char *v = getenv(name);
	json_t *j = v && *v ? json_loads(v, 0, NULL) : NULL;
	if (!json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	unsetenv(name);
	return j;
}

static json_t *parent_link, *parent_budget;

/* Both at the first call, so that a tool's agent-run claims neither. */
static void take_parent(void)
{
	static int taken;
	if (taken)
		return;
	taken = 1;
	parent_link = take_env_object("AGENTKIT_DELEGATION");
	json_t *b = take_env_object("AGENTKIT_DELEGATION_BUDGET");
	const char *k;
	json_t *v;
	/* counts of tokens, whole and not negative; anything else is no limit */
	json_object_foreach(b, k, v)
		if (json_is_integer(v) && json_integer_value(v) >= 0) {
			if (!parent_budget)
				parent_budget = json_object();
			json_object_set(parent_budget, k, v);
		}
	json_decref(b);
}

const json_t *delegate_parent_link(void)
{
	take_parent();
	return parent_link;
}

const json_t *delegate_parent_budget(void)
{
	take_parent();
	return parent_budget;
}

/* ---- a call ---- */

struct call {
	const struct delegate_tool *dt;
	const struct tool_events *ev;
	json_t *done;           /* the output, when it was decided without a child */
	struct run_child run;
	struct core_buf out, err, in;
	char **env, **argv, **add;
	char sub_session[40], seed[40];
	long number;            /* this delegation's number in its turn */
	int background;         /* started detached: the answer is a task ID */
	const char *inv_suffix; /* the artifacts' NAME_SUFFIX, else NAME_number */
	json_t *input;          /* a task tool's input */
	int (*cancelled)(void *);
	void *cctx;
};

static json_t *text_response(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *text_response(const char *fmt, ...)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	va_list ap;
	va_start(ap, fmt);
	core_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	json_t *o = json_pack("{s:s}", "response", b.p ? b.p : "");
	core_buf_release(&b);
	return o;
}

/* The last historyLength user/model messages of the request, each its
 * non-empty text parts only (Go's recentTextHistory). */
static json_t *recent_history(const json_t *msgs, long n)
{
	json_t *out = json_array();
	size_t i, j;
	json_t *m, *p;
	json_array_foreach(msgs, i, m) {
		const char *role = json_string_value(json_object_get(m, "role"));
		if (!role || (strcmp(role, "user") && strcmp(role, "model")))
			continue;
		json_t *parts = json_array();
		json_array_foreach(json_object_get(m, "content"), j, p) {
			const char *t = json_string_value(json_object_get(p, "text"));
			if (t && *t && json_object_size(p) == 1 + !!json_object_get(p, "metadata"))
				json_array_append_new(parts, json_pack("{s:s}", "text", t));
		}
		if (json_array_size(parts))
			json_array_append_new(out, json_pack("{s:s, s:o}", "role", role,
			                                     "content", parts));
		else
			json_decref(parts);
	}
	while (json_array_size(out) > (size_t)n)
		json_array_remove(out, 0);
	return out;
}

static enum core_status add_env(char ***add, size_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static enum core_status add_env(char ***add, size_t *n, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	va_start(ap, fmt);
	int k = vasprintf(&s, fmt, ap);
	va_end(ap);
	char **l = k < 0 ? NULL : realloc(*add, (*n + 2) * sizeof *l);
	if (!l) {
		free(k < 0 ? NULL : s);
		return CORE_ENOMEM;
	}
	l[(*n)++] = s;
	l[*n] = NULL;
	*add = l;
	return CORE_OK;
}

static enum core_status add_arg(char ***argv, size_t *n, const char *s)
{
	char **l = realloc(*argv, (*n + 2) * sizeof *l);
	if (!l)
		return CORE_ENOMEM;
	*argv = l;
	if (!(l[*n] = strdup(s)))
		return CORE_ENOMEM;
	l[++*n] = NULL;
	return CORE_OK;
}

/* The sub-session's first row: the history it starts from, linked to the
 * parent's snapshot. */
struct seed_ctx {
	json_t *row;
};

static enum core_status seed_fn(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e)
{
	struct seed_ctx *s = ctx;
	(void)existing;
	(void)e;
	*next = json_incref(s->row);
	return CORE_OK;
}

static enum core_status write_seed(struct call *k, const json_t *history, const json_t *link,
                                   struct core_err *e)
{
	struct store *s = *k->dt->run->store;
	char now[CORE_TIME_MAX];
	core_time_format(store_now_ns(s), now);
	json_t *state = json_pack("{s:O, s:s}", "messages", history, "sessionId", k->sub_session);
	json_t *info = json_pack("{s:s, s:O}", "agent", k->dt->ref->name, "delegation", link);
	struct session_row sr = {
		.created_at = now, .updated_at = now, .session_id = k->sub_session,
		.snapshot_id = k->seed, .state = state, .status = "completed", .info = info,
	};
	struct seed_ctx sc = { session_row(&sr) };
	enum core_status st = sc.row ? store_save(s, k->seed, 0, seed_fn, &sc, NULL, e)
	                             : core_fail(e, CORE_ENOMEM, "out of memory");
	json_decref(sc.row);
	json_decref(state);
	json_decref(info);
	if (st)
		core_err_prefix(e, "cannot start sub-agent '%s'", k->dt->ref->name);
	return st;
}

static void call_free(struct call *k)
{
	if (!k)
		return;
	json_decref(k->done);
	json_decref(k->input);
	core_buf_release(&k->out);
	core_buf_release(&k->err);
	core_buf_release(&k->in);
	free(k->env);
	core_strv_free(k->argv);
	core_strv_free(k->add);
	free(k);
}

/* Whether the limits let one more delegation start; else the response
 * that says so (Go's words for maxDelegations). */
static json_t *over_limit(struct delegate_run *r, long turn)
{
	if (turn != r->turn) {
		r->turn = turn;
		r->in_turn = 0;
	}
	if (r->c->max_delegations > 0 && r->in_turn >= r->c->max_delegations)
		return text_response("Delegation limit reached (%ld). Complete the task using "
		                     "information already gathered.", r->c->max_delegations);
	if (r->c->max_total > 0 && r->total >= r->c->max_total)
		return text_response("Delegation limit reached (%ld in this run). Complete the "
		                     "task using information already gathered.", r->c->max_total);
	r->in_turn++;
	r->total++;
	return NULL;
}

static enum core_status call_start(const struct tool *t, const json_t *input,
                                   const struct tool_context *ctx, int (*cancelled)(void *),
                                   void *cctx, void **pending, struct core_err *e)
{
	const struct delegate_tool *dt = t->impl;
	struct delegate_run *r = dt->run;
	struct call *k = calloc(1, sizeof *k);
	size_t nargv = 0, nadd = 0;
	enum core_status st = CORE_ENOMEM;
	json_t *link = NULL, *history = NULL, *msg = NULL;
	*pending = NULL;
	if (!k)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	k->dt = dt;
	k->cancelled = cancelled;
	k->cctx = cctx;
	core_buf_init(&k->out, DELEGATE_MAX_OUTPUT + 1);
	core_buf_init(&k->err, DELEGATE_STDERR_KEEP + 1);
	core_buf_init(&k->in, CORE_BUF_UNLIMITED);
	if (!dt->ref) {
		/* a task tool: it runs in its finish */
		k->input = json_incref((json_t *)input);
		*pending = k;
		return CORE_OK;
	}
	const json_t *resumed = ctx->resumed;
	const char *resume_snap = json_string_value(json_object_get(resumed, "snapshotId"));
	if (json_is_object(resumed) && (!resume_snap ||
	                                !json_is_object(json_object_get(resumed, "resume")))) {
		k->done = text_response("Error calling agent \"%s\": a restarted delegation needs "
		                        "metadata.resumed {\"snapshotId\": the interrupt's, "
		                        "\"resume\": {\"respond\" or \"restart\": [...]}} (the "
		                        "sub-agent's resume input)", dt->ref->name);
		*pending = k;
		return k->done ? CORE_OK : core_fail(e, CORE_ENOMEM, "out of memory");
	}
	k->background = !resume_snap && r->c->async &&
	                json_is_true(json_object_get(input, "background"));
	if (k->background && !(r->store && *r->store)) {
		/* Go's words for an agent that cannot detach */
		k->done = text_response("Error calling agent \"%s\": this agent lacks a session "
		                        "store that supports background work, so it cannot run "
		                        "tasks in the background. Delegate to it without "
		                        "\"background\" instead.", dt->ref->name);
		*pending = k;
		return k->done ? CORE_OK : core_fail(e, CORE_ENOMEM, "out of memory");
	}
	if (k->background && dt->ref->remote) {
		/* its rows are the server's: the task tools, which read this
		 * store, could not follow it */
		k->done = text_response("Error calling agent \"%s\": it is a remote agent (url:), "
		                        "which cannot run in the background. Delegate to it without "
		                        "\"background\" instead.", dt->ref->name);
		*pending = k;
		return k->done ? CORE_OK : core_fail(e, CORE_ENOMEM, "out of memory");
	}
	/* a resumed delegation goes on; it is not another one */
	if (!resume_snap && (k->done = over_limit(r, ctx->turn_index))) {
		*pending = k;
		return CORE_OK;
	}
	k->number = r->in_turn;
	const char *task = json_string_value(json_object_get(input, "task"));
	int stored = r->store && *r->store;
	core_uuid(k->sub_session);
	if (!(link = json_pack("{s:s, s:s, s:s, s:s}", "parentSessionId",
	                       ctx->session_id ? ctx->session_id : "", "parentSnapshotId",
	                       ctx->snapshot_id ? ctx->snapshot_id : "", "agent", r->c->owner,
	                       "tool", t->name)) ||
	    !(history = r->c->history_length > 0 && !k->background && !dt->ref->remote
	                ? recent_history(r->conversation, r->c->history_length)
	                : json_array()))
		goto nomem;
	if (add_arg(&k->argv, &nargv, r->agent_run) || add_arg(&k->argv, &nargv, dt->ref->path) ||
	    add_arg(&k->argv, &nargv, "--format") || add_arg(&k->argv, &nargv, "ndjson") ||
	    add_arg(&k->argv, &nargv, "--input-format") || add_arg(&k->argv, &nargv, "ndjson"))
		goto nomem;
	if (resume_snap && stored) {
		/* the sub-session's interrupted row, resumed with the input given */
		if (add_arg(&k->argv, &nargv, "--snapshot") || add_arg(&k->argv, &nargv, resume_snap))
			goto nomem;
	} else if (k->background) {
		/* detached (docs/detach.md), or queued for any host's worker
		 * (docs/queue.md): the final line names the pending row */
		if ((r->c->queue ? add_arg(&k->argv, &nargv, "--queue") ||
		                   add_arg(&k->argv, &nargv, r->c->queue)
		                 : add_arg(&k->argv, &nargv, "--detach")) ||
		    add_arg(&k->argv, &nargv, "--session") || add_arg(&k->argv, &nargv, k->sub_session))
			goto nomem;
	} else if (stored && json_array_size(history)) {
		core_uuid(k->seed);
		if ((st = write_seed(k, history, link, e)))
			goto fail;
		if (add_arg(&k->argv, &nargv, "--snapshot") || add_arg(&k->argv, &nargv, k->seed))
			goto nomem;
	} else if (stored) {
		if (add_arg(&k->argv, &nargv, "--session") ||
		    add_arg(&k->argv, &nargv, k->sub_session))
			goto nomem;
	} else {
		/* client-managed: the history in the init state, as Genkit sends it */
		json_t *init = json_pack("{s:{s:O}}", "state", "messages", history);
		struct core_buf ib = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		st = init ? jv_dump(init, &ib) : CORE_ENOMEM;
		json_decref(init);
		if (st || add_arg(&k->argv, &nargv, "--no-store") ||
		    (json_array_size(history) && (add_arg(&k->argv, &nargv, "--init") ||
		                                  add_arg(&k->argv, &nargv, ib.p)))) {
			core_buf_release(&ib);
			goto nomem;
		}
		core_buf_release(&ib);
	}
	if (!(msg = resume_snap ? json_pack("{s:O}", "resume", json_object_get(resumed, "resume"))
	                        : json_pack("{s:{s:s, s:[{s:s}]}}", "message", "role", "user",
	                                    "content", "text", task ? task : "")) ||
	    jv_dump(msg, &k->in) || core_buf_addc(&k->in, '\n'))
		goto nomem;
	/* The child's environment: ours without the keys, then what it needs
	 * to be this agent's sub-agent: the store, the keys (it is agentkit,
	 * and calls the models), the link, the depth, the agent path, the
	 * trace. */
	struct core_buf lb = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (jv_dump(link, &lb) || add_env(&k->add, &nadd, "AGENTKIT_DELEGATION=%s", lb.p) ||
	    add_env(&k->add, &nadd, "AGENTKIT_DELEGATION_DEPTH=%ld", own_depth() + 1) ||
	    add_env(&k->add, &nadd, "AGENTKIT_PATH=%s", r->c->search) ||
	    (r->store_location && add_env(&k->add, &nadd, "AGENTKIT_STORE=%s", r->store_location)) ||
	    (r->key_file && add_env(&k->add, &nadd, "AGENTKIT_KEY_FILE=%s", r->key_file)) ||
	    (ctx->traceparent && add_env(&k->add, &nadd, "TRACEPARENT=%s", ctx->traceparent))) {
		core_buf_release(&lb);
		goto nomem;
	}
	core_buf_release(&lb);
	if (ctx->budget_left) {
		/* what the parent has left is the sub-agent's budget too */
		struct core_buf bb = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		st = jv_dump(ctx->budget_left, &bb) ? CORE_ENOMEM
		   : add_env(&k->add, &nadd, "AGENTKIT_DELEGATION_BUDGET=%s", bb.p);
		core_buf_release(&bb);
		if (st)
			goto nomem;
	}
	for (char **v = environ; v && *v; v++)
		if (spawn_provider_key(*v) && strncmp(*v, "AGENTKIT_STORE=", 15) &&
		    add_env(&k->add, &nadd, "%s", *v))
			goto nomem;
	if (!(k->env = run_env(NULL, (const char *const *)k->add)))
		goto nomem;
	char what[200];
	snprintf(what, sizeof what, "sub-agent '%s'", dt->ref->name);
	k->run = (struct run_child){
		.argv = k->argv, .env = k->env, .what = what,
		.in = k->in.p, .in_len = k->in.len,
		.timeout_ms = t->timeout_ms, .cancel_grace_ms = TOOL_KILL_GRACE_MS,
		.out = &k->out, .out_keep = DELEGATE_MAX_OUTPUT,
		.err = &k->err, .err_keep = DELEGATE_STDERR_KEEP,
	};
	if ((st = run_start(&k->run, e)))
		goto fail;
	json_decref(link);
	json_decref(history);
	json_decref(msg);
	*pending = k;
	return CORE_OK;
nomem:
	st = core_fail(e, CORE_ENOMEM, "out of memory");
fail:
	json_decref(link);
	json_decref(history);
	json_decref(msg);
	call_free(k);
	return st;
}

/* The last line of the child's stdout, parsed; NULL for none. */
static json_t *final_line(const struct core_buf *out)
{
	size_t n = out->len;
	if (!n)
		return NULL;
	while (n && out->p[n - 1] == '\n')
		n--;
	size_t b = n;
	while (b && out->p[b - 1] != '\n')
		b--;
	json_t *j = json_loadb(out->p + b, n - b, 0, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* Text parts of a message or artifact joined by newlines (Go's
 * messageText, artifactText). */
static char *parts_text(const json_t *parts)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	size_t i;
	json_t *p;
	json_array_foreach(parts, i, p) {
		const char *t = json_string_value(json_object_get(p, "text"));
		if (t && *t)
			core_buf_addf(&b, "%s%s", b.len ? "\n" : "", t);
	}
	return b.p ? core_buf_detach(&b, NULL) : strdup("");
}

/* The sub-agent's artifacts: merged into this session, namespaced
 * NAME_N/ARTIFACT and tagged with their source, and listed in out. */
static enum core_status take_artifacts(struct call *k, const struct tool *t, const json_t *arts,
                                       json_t *out, struct core_err *e)
{
	const struct delegate_run *r = k->dt->run;
	const char *agent = k->dt->ref->name;
	char inv[128];
	json_t *list = json_array(), *a;
	size_t i;
	if (k->inv_suffix)
		snprintf(inv, sizeof inv, "%s_%s", agent, k->inv_suffix);
	else
		snprintf(inv, sizeof inv, "%s_%ld", agent, k->number);
	json_array_foreach(arts, i, a) {
		const char *name = json_string_value(json_object_get(a, "name"));
		if (!name || !*name)
			continue;
		json_t *na = json_deep_copy(a), *md = json_object_get(na, "metadata");
		char *full = NULL;
		if (!json_is_object(md)) {
			md = json_object();
			json_object_set_new(na, "metadata", md);
		}
		if (asprintf(&full, "%s/%s", inv, name) < 0)
			full = NULL;
		json_object_set_new(md, "source", json_string(agent));
		json_object_set_new(md, "invocationId", json_string(inv));
		json_object_set_new(na, "name", json_string(full ? full : name));
		enum core_status st = k->ev && k->ev->artifact ? k->ev->artifact(k->ev->ctx, t, na, e)
		                                               : CORE_OK;
		json_t *entry = json_pack("{s:s}", "name", full ? full : name);
		if (!r->c->session_strategy) {
			char *text = parts_text(json_object_get(a, "parts"));
			json_object_set_new(entry, "content", json_string(text ? text : ""));
			free(text);
		}
		json_array_append_new(list, entry);
		free(full);
		json_decref(na);
		if (st) {
			json_decref(list);
			return st;
		}
	}
	if (json_array_size(list))
		json_object_set_new(out, "artifacts", list);
	else
		json_decref(list);
	return CORE_OK;
}

/* The child's end in words, for a call that has no final line. */
static void child_end(struct call *k, struct core_buf *b)
{
	if (k->run.timed_out) {
		char d[CORE_DURATION_MAX];
		core_buf_addf(b, "timed out after %s", core_duration_text(k->run.timeout_ms, d));
		return;
	}
	core_buf_adds(b, "agent-run ");
	run_describe_end(b, k->run.code, k->run.signal);
	core_buf_fix_text(&k->err);
	run_describe_said(b, k->err.p ? k->err.p : "", k->err.len, "", "");
}

/* ---- the background tasks: check, wait, abort ---- */

static const char no_task_ids[] =
	"No task IDs given. Pass the taskId values returned by background delegations.";

/* The sub-agent whose name (the longest) prefixes "NAME:" to id; the
 * snapshot ID after it in *snap. */
static const struct delegate_ref *task_ref(const struct delegate_config *c, const char *id,
                                           const char **snap)
{
	const struct delegate_ref *best = NULL;
	size_t best_len = 0;
	for (size_t i = 0; i < c->nrefs; i++) {
		size_t n = strlen(c->refs[i].name);
		if (strlen(id) > n + 1 && !strncmp(id, c->refs[i].name, n) && id[n] == ':' &&
		    n + 1 > best_len) {
			best = &c->refs[i];
			best_len = n + 1;
		}
	}
	*snap = id + best_len;
	return best;
}

static int64_t task_hb_timeout(void)
{
	int64_t ms = STORE_HEARTBEAT_TIMEOUT_MS;
	struct core_err e = { 0 };
	if (store_heartbeat_timeout(NULL, &ms, &e))
		ms = STORE_HEARTBEAT_TIMEOUT_MS;
	return ms;
}

static int settled(const char *status)
{
	return strcmp(status, "pending") && strcmp(status, "aborting") && strcmp(status, "unknown");
}

/* Whether task id's usage was counted already: by this run, or by an
 * earlier one that reported it settled (a task tool's answer in the
 * conversation says so). */
static int task_counted(const struct delegate_run *r, const char *id)
{
	size_t i, j, t;
	json_t *m, *p, *rep;
	if (json_object_get(r->counted, id))
		return 1;
	json_array_foreach(r->conversation, i, m)
		json_array_foreach(json_object_get(m, "content"), j, p) {
			const json_t *out = json_object_get(json_object_get(p, "toolResponse"), "output");
			json_array_foreach(json_object_get(out, "tasks"), t, rep) {
				const char *rid = json_string_value(json_object_get(rep, "taskId"));
				const char *st = json_string_value(json_object_get(rep, "status"));
				if (rid && st && !strcmp(rid, id) && settled(st))
					return 1;
			}
		}
	return 0;
}

/* One task's report (Go's backgroundTaskReport) from its row, read now. */
static json_t *task_report(struct call *k, const struct tool *t, const char *id,
                           struct core_err *e)
{
	struct delegate_run *r = k->dt->run;
	const char *snap;
	const struct delegate_ref *ref = task_ref(r->c, id, &snap);
	json_t *rep = json_pack("{s:s}", "taskId", id), *row = NULL;
	struct core_err re = { 0 };
	char msg[sizeof re.msg + 200];
	if (!rep)
		return NULL;
	if (!ref) {
		snprintf(msg, sizeof msg, "task ID \"%s\" does not match any configured agent "
		         "(expected \"<agent>:<snapshotId>\")", id);
		json_object_set_new(rep, "status", json_string("unknown"));
		json_object_set_new(rep, "error", json_string(msg));
		return rep;
	}
	json_object_set_new(rep, "agent", json_string(ref->name));
	enum core_status got = store_get(*r->store, snap, 0, &row, &re);
	if (got) {
		if (got == CORE_ENOTFOUND)
			snprintf(msg, sizeof msg, "No record of this task exists (%s). Delegate the "
			         "task again if the result is still needed.", re.msg);
		else
			snprintf(msg, sizeof msg, "Could not read the task's status: %s. Check "
			         "again later.", re.msg);
		json_object_set_new(rep, "status", json_string("unknown"));
		json_object_set_new(rep, "error", json_string(msg));
		return rep;
	}
	/* the task's invocation's usage, which shaping takes away */
	json_t *used = json_incref(json_object_get(json_object_get(row, STORE_INFO_KEY), "usage"));
	store_shape(row, store_now_ns(*r->store), store_row_hb_timeout(row, task_hb_timeout()));
	const char *status = json_string_value(json_object_get(row, "status"));
	const char *fr = json_string_value(json_object_get(row, "finishReason"));
	const json_t *state = json_object_get(row, "state");
	status = status && *status ? status : "completed";
	json_object_set_new(rep, "status", json_string(status));
	/* collected: its usage is the parent's, once */
	if (settled(status) && !task_counted(r, id)) {
		json_object_set_new(r->counted, id, json_true());
		if (k->ev && k->ev->usage && json_object_size(used))
			k->ev->usage(k->ev->ctx, t, used);
	}
	json_decref(used);
	if (!strcmp(status, "completed") && fr && !strcmp(fr, "interrupted")) {
		snprintf(msg, sizeof msg, "Sub-agent \"%s\" interrupted for additional input and "
		         "could not complete the task. Interactive sub-agent interrupts are not "
		         "currently supported; try delegating a more self-contained task.", ref->name);
		json_object_set_new(rep, "error", json_string(msg));
	} else if (!strcmp(status, "completed")) {
		const json_t *msgs = json_object_get(state, "messages");
		const json_t *tip = json_array_get(msgs, json_array_size(msgs) - 1);
		char *text = parts_text(json_object_get(tip, "content"));
		json_object_set_new(rep, "response", json_string(text && *text ? text : "(no response)"));
		free(text);
		/* the artifacts, named NAME_SNAPSHOT/ARTIFACT (Go's first 8) */
		struct call kk = *k;
		char num[16];
		kk.dt = &r->tools[ref - r->c->refs];     /* the delegation's own */
		snprintf(num, sizeof num, "%.8s", snap);
		kk.number = 0;
		kk.inv_suffix = num;
		if (take_artifacts(&kk, t, json_object_get(state, "artifacts"), rep, e)) {
			json_decref(row);
			json_decref(rep);
			return NULL;
		}
	} else if (!strcmp(status, "failed")) {
		const char *m = json_string_value(json_object_get(json_object_get(row, "error"),
		                                                  "message"));
		json_object_set_new(rep, "error", json_string(m && *m ? m : "Unknown sub-agent failure."));
	} else if (!strcmp(status, "aborted")) {
		json_object_set_new(rep, "error", json_string("The task was aborted before it finished."));
	} else if (!strcmp(status, "expired")) {
		json_object_set_new(rep, "error", json_string("The background worker stopped reporting "
		                    "progress and is presumed dead. Delegate the task again if the "
		                    "result is still needed."));
	}
	json_decref(row);
	return rep;
}

/* pending -> aborting (agent-abort's flip); the status before in ctx. */
struct flip_ctx {
	struct store *s;
	char previous[32];
};

static enum core_status flip_fn(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e)
{
	struct flip_ctx *c = ctx;
	const char *st = json_string_value(json_object_get(existing, "status"));
	char now[CORE_TIME_MAX];
	*next = NULL;
	if (!existing)
		return CORE_OK;
	snprintf(c->previous, sizeof c->previous, "%s", st && *st ? st : "completed");
	if (strcmp(c->previous, "pending"))
		return CORE_OK;
	if (!(*next = json_deep_copy(existing)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	core_time_format(store_now_ns(c->s), now);
	json_object_set_new(*next, "status", json_string("aborting"));
	json_object_set_new(*next, "updatedAt", json_string(now));
	return CORE_OK;
}

static enum core_status abort_row(struct store *s, const char *snap, char previous[32],
                                  struct core_err *e)
{
	struct flip_ctx fc = { s, "" };
	enum core_status st = store_save(s, snap, STORE_METADATA_ONLY, flip_fn, &fc, NULL, e);
	snprintf(previous, 32, "%s", fc.previous);
	return st;
}

void delegate_abort_children(struct delegate_run *r)
{
	size_t i;
	json_t *id;
	if (!r || !r->store || !*r->store)
		return;
	json_array_foreach(r->launched, i, id) {
		struct core_err e = { 0 };
		char previous[32];
		(void)abort_row(*r->store, json_string_value(id), previous, &e);
	}
}

static enum core_status task_finish(struct call *k, const struct tool *t, json_t **output,
                                    struct core_err *e)
{
	struct delegate_run *r = k->dt->run;
	const json_t *ids = json_object_get(k->input, "taskIds");
	json_t *out = json_object(), *tasks = json_array(), *id;
	size_t i, n = json_array_size(ids);
	enum core_status st = CORE_OK;
	if (!out || !tasks)
		goto nomem;
	if (!n) {
		json_decref(tasks);
		json_object_set_new(out, "note", json_string(no_task_ids));
		*output = out;
		return CORE_OK;
	}
	if (!r->store || !*r->store) {
		json_object_set_new(out, "note", json_string("There are no background tasks: this "
		                    "agent runs without a store."));
		json_decref(tasks);
		*output = out;
		return CORE_OK;
	}
	json_t **rows = calloc(n + 1, sizeof *rows);
	const char **snaps = calloc(n + 1, sizeof *snaps);
	if (!rows || !snaps) {
		free(rows);
		free(snaps);
		goto nomem;
	}
	json_array_foreach(ids, i, id) {
		const char *s = json_string_value(id);
		if (!task_ref(r->c, s ? s : "", &snaps[i]))
			snaps[i] = NULL;
	}
	if (k->dt->task == TASK_ABORT) {
		json_array_foreach(ids, i, id) {
			char previous[32] = "";
			struct core_err ae = { 0 };
			if (snaps[i])
				(void)abort_row(*r->store, snaps[i], previous, &ae);
			json_t *rep = task_report(k, t, json_string_value(id), e);
			if (!rep)
				goto fail;
			if (*previous)
				json_object_set_new(rep, "previousStatus", json_string(previous));
			json_array_append_new(tasks, rep);
		}
	} else {
		json_int_t secs = json_integer_value(json_object_get(k->input, "timeoutSeconds"));
		int timed_out = 0;
		if (k->dt->task == TASK_WAIT && secs >= 0) {
			/* the wait agent-wait does (store_wait_terminal), in slices so that
			 * the caller's stop is seen; 0 waits at most the delegation timeout */
			int64_t bound = secs > 0 && secs < r->c->timeout_ms / 1000 ? secs * 1000
			              : r->c->timeout_ms;
			int64_t deadline = core_now_mono_ms() + bound;
			size_t m = 0;
			for (i = 0; i < n; i++)
				if (snaps[i])
					snaps[m++] = snaps[i];
			for (;;) {
				int64_t now = core_now_mono_ms(), until = now + 200;
				struct core_err we = { 0 };
				if (k->cancelled && k->cancelled(k->cctx)) {
					st = core_fail(e, CORE_ECANCELLED, "the wait for background tasks "
					               "was stopped with its caller");
					goto fail;
				}
				for (i = 0; i < m; i++) {
					json_decref(rows[i]);
					rows[i] = NULL;
				}
				st = store_wait_terminal(*r->store, snaps, m, STORE_METADATA_ONLY,
				                         task_hb_timeout(), until < deadline ? until : deadline,
				                         50, rows, NULL, NULL, &we);
				if (st == CORE_OK)
					break;
				if (st != CORE_ETIMEOUT) {
					*e = we;
					goto fail;
				}
				if (core_now_mono_ms() >= deadline) {
					timed_out = 1;
					break;
				}
			}
			st = CORE_OK;
		}
		json_array_foreach(ids, i, id) {
			json_t *rep = task_report(k, t, json_string_value(id) ? json_string_value(id) : "",
			                          e);
			if (!rep)
				goto fail;
			if (!strcmp(json_string_value(json_object_get(rep, "status")), "pending") &&
			    k->dt->task == TASK_WAIT)
				timed_out = 1;
			json_array_append_new(tasks, rep);
		}
		if (timed_out) {
			json_object_set_new(out, "timedOut", json_true());
			json_object_set_new(out, "note", json_string("Stopped waiting; the pending tasks "
			                    "are still running. Check them again later."));
		}
	}
	for (i = 0; i < n; i++)
		json_decref(rows[i]);
	free(rows);
	free(snaps);
	json_object_set_new(out, "tasks", tasks);
	/* tasks first, as Go's result has it */
	json_t *ordered = json_pack("{s:O}", "tasks", tasks);
	const char *key;
	json_t *v;
	json_object_foreach(out, key, v)
		if (strcmp(key, "tasks"))
			json_object_set(ordered, key, v);
	json_decref(out);
	*output = ordered;
	return CORE_OK;
fail:
	for (i = 0; i < n; i++)
		json_decref(rows[i]);
	free(rows);
	free(snaps);
	json_decref(tasks);
	json_decref(out);
	return st ? st : e->st ? e->st : CORE_ENOMEM;
nomem:
	json_decref(tasks);
	json_decref(out);
	return core_fail(e, CORE_ENOMEM, "out of memory");
}

static enum core_status call_finish(const struct tool *t, void *pending, json_t **output,
                                    json_t **interrupt, json_t *parts,
                                    const struct tool_events *ev, struct core_err *e)
{
	struct call *k = pending;
	const char *agent = k->dt->ref ? k->dt->ref->name : "";
	enum core_status st = CORE_OK;
	struct core_buf why = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	json_t *fin = NULL, *out = NULL;
	(void)parts;
	*output = NULL;
	k->ev = ev;
	if (!k->dt->ref) {
		st = task_finish(k, t, output, e);
		call_free(k);
		return st;
	}
	if (k->done) {
		*output = json_incref(k->done);
		call_free(k);
		return CORE_OK;
	}
	struct run_child *rc = &k->run;
	if ((st = run_wait_all(&rc, 1, k->cancelled, k->cctx, e)))
		goto end;
	if (k->run.cancelled) {
		st = core_fail(e, CORE_ECANCELLED, "sub-agent '%s' was stopped with its caller", agent);
		goto end;
	}
	fin = k->run.timed_out ? NULL : final_line(&k->out);
	const json_t *o = json_object_get(fin, "output");
	const json_t *err = json_object_get(fin, "error");
	const char *fr = json_string_value(json_object_get(o, "finishReason"));
	/* what the sub-agent's invocation spent is the parent's too, however
	 * it ended (a background one's counts when it is collected) */
	const json_t *used = json_object_get(o, "usage");
	if (!k->background && ev && ev->usage && json_object_size(used))
		ev->usage(ev->ctx, t, used);
	if (!o && err) {
		const char *m = json_string_value(json_object_get(err, "message"));
		core_buf_adds(&why, m ? m : "it could not start");
	} else if (!o) {
		child_end(k, &why);
	} else if (fr && (!strcmp(fr, "failed") || !strcmp(fr, "aborted"))) {
		const char *m = json_string_value(json_object_get(json_object_get(o, "error"),
		                                                  "message"));
		core_buf_adds(&why, m && *m ? m : "Unknown sub-agent failure.");
	}
	if (why.len || !o) {
		out = text_response("Error calling agent \"%s\": %s", agent, why.p ? why.p : "");
	} else if (k->background && fr && !strcmp(fr, "detached") &&
	           json_is_string(json_object_get(o, "snapshotId"))) {
		const char *snap = json_string_value(json_object_get(o, "snapshotId"));
		char *check = task_tool_name(k->dt->run->c, TASK_CHECK);
		char *wait = task_tool_name(k->dt->run->c, TASK_WAIT);
		char *task = NULL;
		if (asprintf(&task, "%s:%s", agent, snap) < 0)
			task = NULL;
		out = check && wait && task
		    ? text_response("Background task %s started for agent \"%s\". Collect the "
		                    "result with %s or %s.", task, agent, check, wait) : NULL;
		if (out) {
			json_object_set_new(out, "taskId", json_string(task));
			json_object_set_new(out, "status", json_string("pending"));
			json_array_append_new(k->dt->run->launched, json_string(snap));
		}
		free(check);
		free(wait);
		free(task);
	} else if (fr && !strcmp(fr, "interrupted") && interrupt &&
	           json_is_string(json_object_get(o, "snapshotId"))) {
		/* The sub-agent's interrupt is the parent's: its metadata names
		 * the sub-session's row and holds the sub-agent's own interrupted
		 * requests; a restart with {"resume": ...} resumes it there. */
		json_t *ints = json_array();
		size_t i;
		json_t *p;
		json_array_foreach(json_object_get(json_object_get(o, "message"), "content"), i, p)
			if (json_object_get(json_object_get(p, "metadata"), "interrupt"))
				json_array_append(ints, p);
		*interrupt = json_pack("{s:s, s:O, s:O, s:o}", "agent", agent, "sessionId",
		                       json_object_get(o, "sessionId"), "snapshotId",
		                       json_object_get(o, "snapshotId"), "interrupts", ints);
		if (!*interrupt)
			st = core_fail(e, CORE_ENOMEM, "out of memory");
		goto end;
	} else if (fr && !strcmp(fr, "interrupted")) {
		out = text_response("Sub-agent \"%s\" interrupted for additional input and could "
		                    "not complete the task. Interactive sub-agent interrupts are not "
		                    "currently supported; try delegating a more self-contained task.",
		                    agent);
	} else {
		char *text = parts_text(json_object_get(json_object_get(o, "message"), "content"));
		out = json_pack("{s:s}", "response", text && *text ? text : "(no response)");
		free(text);
		if (out && (st = take_artifacts(k, t, json_object_get(o, "artifacts"), out, e)))
			goto end;
	}
	if (!out) {
		st = core_fail(e, CORE_ENOMEM, "out of memory");
		goto end;
	}
	/* The link from the parent: the sub-session and its last row, when
	 * it has one (a first turn that failed committed none; a client-managed
	 * sub-agent keeps no rows). */
	const char *sid = json_string_value(json_object_get(o, "sessionId"));
	const char *snap = json_string_value(json_object_get(o, "snapshotId"));
	if (!snap && *k->seed) {
		sid = k->sub_session;
		snap = k->seed;
	}
	if (sid && snap) {
		json_object_set_new(out, "sessionId", json_string(sid));
		json_object_set_new(out, "snapshotId", json_string(snap));
	}
	*output = out;
	out = NULL;
end:
	json_decref(out);
	json_decref(fin);
	core_buf_release(&why);
	call_free(k);
	return st;
}
