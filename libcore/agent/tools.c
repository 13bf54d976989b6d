/* tools.c - tool manifests and parallel tool calls over pipes (no shell). */
#include "tools.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/json.h"
#include "../base/lines.h"
#include "../base/utf8.h"
#include "../base/util.h"
#include "agent_trace.h"

#define MANIFEST_MAX ((size_t)1 << 20)
#define STDERR_KEEP 2048
#define TOOL_LINE_MAX ((size_t)64 << 20)

/* The context variables the runtime sets itself. */
static const char *const context_vars[] = {
	"AGENTKIT_SESSION_ID", "AGENTKIT_SNAPSHOT_ID", "AGENTKIT_PARENT_SNAPSHOT_ID",
	"AGENTKIT_TURN_INDEX", NULL
};

void tool_free(struct tool *t)
{
	if (!t)
		return;
	free(t->name);
	free(t->manifest);
	json_decref(t->definition);
	json_decref(t->span_attrs);
	core_strv_free(t->argv);
	core_strv_free(t->env_allow);
	free(t);
}

static int is_file(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* A string array member as a NULL-terminated vector; dir (non-NULL) prefixes
 * a first element that contains '/' and is not absolute. */
static enum core_status strv_from(const json_t *arr, const char *dir, char ***out,
                                  const char *path, const char *what, struct core_err *e)
{
	size_t n = json_array_size(arr), i;
	const json_t *v;
	char **vec = calloc(n + 1, sizeof *vec);
	if (!vec)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	json_array_foreach(arr, i, v) {
		if (!jv_is_string(v)) {
			core_strv_free(vec);
			return core_fail(e, CORE_EINVAL, "tool manifest %s: '%s' must be a list of strings",
			                 path, what);
		}
		const char *s = json_string_value(v);
		if (dir && i == 0 && strchr(s, '/') && s[0] != '/') {
			size_t len = strlen(dir) + strlen(s) + 2;
			if ((vec[i] = malloc(len)))
				snprintf(vec[i], len, "%s/%s", dir, s);
		} else {
			vec[i] = strdup(s);
		}
		if (!vec[i]) {
			core_strv_free(vec);
			return core_fail(e, CORE_ENOMEM, "out of memory");
		}
	}
	*out = vec;
	return CORE_OK;
}

/* A positive whole number from a manifest member: a JSON integer, or (for
 * sizes) a string such as "16M".  0 when it is neither. */
static size_t positive_count(const json_t *v, int size)
{
	uint64_t n = 0;
	struct core_err ignore = { 0 };
	if (json_is_integer(v) && json_integer_value(v) > 0)
		n = (uint64_t)json_integer_value(v);
	else if (size && jv_is_string(v) && core_parse_size(json_string_value(v), &n, &ignore))
		n = 0;
	return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

/* maxOutputBytes, maxOutputLines: caps on one call's stdout. */
static enum core_status read_limits(struct tool *t, const json_t *m, struct core_err *e)
{
	const json_t *v;
	t->max_output_bytes = TOOL_DEFAULT_MAX_OUTPUT_BYTES;
	t->max_output_lines = TOOL_DEFAULT_MAX_OUTPUT_LINES;
	if ((v = json_object_get(m, "maxOutputBytes")) && !(t->max_output_bytes = positive_count(v, 1)))
		return core_fail(e, CORE_EINVAL, "tool manifest %s: 'maxOutputBytes' must be a positive "
		                 "size (a number of bytes, or \"16M\")", t->manifest);
	if ((v = json_object_get(m, "maxOutputLines")) && !(t->max_output_lines = positive_count(v, 0)))
		return core_fail(e, CORE_EINVAL, "tool manifest %s: 'maxOutputLines' must be a positive "
		                 "integer", t->manifest);
	return CORE_OK;
}

/* The manifest's "timeout": a duration ("30s") or a number of seconds. */
static enum core_status read_timeout(struct tool *t, const json_t *m, struct core_err *e)
{
	const json_t *v = json_object_get(m, "timeout");
	struct core_err de = { 0 };
	t->timeout_ms = TOOL_DEFAULT_TIMEOUT_MS;
	if (!v)
		return CORE_OK;
	if (jv_is_string(v)) {
		if (core_parse_duration(json_string_value(v), &t->timeout_ms, &de))
			return core_fail(e, CORE_EINVAL, "tool manifest %s: 'timeout': %s", t->manifest,
			                 de.msg);
	} else if (json_is_number(v) && json_number_value(v) > 0 && json_number_value(v) <= 9e12) {
		/* Seconds; bounded as durations are, so the cast is defined. */
		t->timeout_ms = (int64_t)(json_number_value(v) * 1000 + 0.5);
	} else {
		return core_fail(e, CORE_EINVAL, "tool manifest %s: 'timeout' must be a duration ('30s')",
		                 t->manifest);
	}
	if (t->timeout_ms <= 0)
		return core_fail(e, CORE_EINVAL, "tool manifest %s: 'timeout' must be at least 1ms",
		                 t->manifest);
	return CORE_OK;
}

static enum core_status read_manifest(struct tool *t, const char *stem, struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(MANIFEST_MAX);
	struct core_err pe = { 0 };
	enum core_status st;
	json_t *m = NULL;
	const json_t *v;
	char *dir = NULL;

	if ((st = core_buf_read_file(&b, t->manifest, &pe))) {
		core_buf_release(&b);
		return core_fail(e, st, "tool '%s': %s", stem, pe.msg);
	}
	m = jv_parse(b.p ? b.p : "", b.len, t->manifest, 0, &pe);
	core_buf_release(&b);
	if (!m)
		return core_fail(e, pe.st, "tool manifest: %s", pe.msg);
	if (!json_is_object(m)) {
		st = core_fail(e, CORE_EINVAL, "tool manifest %s: must be a JSON object", t->manifest);
		goto out;
	}
	const char *slash = strrchr(t->manifest, '/');
	dir = slash ? strndup(t->manifest, (size_t)(slash - t->manifest)) : strdup(".");
	if (!dir)
		goto nomem;
	v = json_object_get(m, "name");
	if (v && !jv_is_string(v)) {
		st = core_fail(e, CORE_EINVAL, "tool manifest %s: 'name' must be a string", t->manifest);
		goto out;
	}
	if (!(t->name = strdup(v ? json_string_value(v) : stem)))
		goto nomem;
	if (!(t->definition = json_pack("{s:s, s:s}", "name", t->name, "description", "")))
		goto nomem;
	if ((v = json_object_get(m, "description"))) {
		if (!jv_is_string(v)) {
			st = core_fail(e, CORE_EINVAL, "tool manifest %s: 'description' must be a string",
			               t->manifest);
			goto out;
		}
		json_object_set(t->definition, "description", (json_t *)v);
	}
	static const char *const schemas[] = { "inputSchema", "outputSchema" };
	for (int i = 0; i < 2; i++)
		if ((v = json_object_get(m, schemas[i]))) {
			if (!json_is_object(v)) {
				st = core_fail(e, CORE_EINVAL, "tool manifest %s: '%s' must be an object",
				               t->manifest, schemas[i]);
				goto out;
			}
			json_object_set(t->definition, schemas[i], (json_t *)v);
		}
	t->input_schema = json_object_get(t->definition, "inputSchema");
	if (!t->input_schema)
		json_object_set_new(t->definition, "inputSchema", json_pack("{s:s}", "type", "object"));

	if ((st = read_timeout(t, m, e)) || (st = read_limits(t, m, e)))
		goto out;
	if ((v = json_object_get(m, "command"))) {
		if (!json_is_array(v) || !json_array_size(v)) {
			st = core_fail(e, CORE_EINVAL, "tool manifest %s: 'command' must be a non-empty list of strings",
			               t->manifest);
			goto out;
		}
		if ((st = strv_from(v, dir, &t->argv, t->manifest, "command", e)))
			goto out;
	} else {
		size_t len = strlen(dir) + strlen(stem) + 2;
		if (!(t->argv = calloc(2, sizeof *t->argv)) || !(t->argv[0] = malloc(len)))
			goto nomem;
		snprintf(t->argv[0], len, "%s/%s", dir, stem);
	}
	if ((v = json_object_get(m, "env"))) {
		if (!json_is_array(v)) {
			st = core_fail(e, CORE_EINVAL, "tool manifest %s: 'env' must be a list of strings",
			               t->manifest);
			goto out;
		}
		if ((st = strv_from(v, NULL, &t->env_allow, t->manifest, "env", e)))
			goto out;
	}
	st = CORE_OK;
	goto out;
nomem:
	st = core_fail(e, CORE_ENOMEM, "out of memory");
out:
	free(dir);
	json_decref(m);
	return st;
}

static const struct tool_source *source;

void tool_set_source(const struct tool_source *src)
{
	source = src;
}

enum core_status tool_source_refresh(json_t *names, int *changed, struct core_err *e)
{
	*changed = 0;
	return source && source->refresh ? source->refresh(source->ctx, names, changed, e)
	                                 : CORE_OK;
}

enum core_status tool_load(const char *name, char *const *dirs, struct tool **out,
                           struct core_err *e)
{
	struct tool *t;
	struct core_buf p = CORE_BUF_INIT(PATH_MAX), tried = CORE_BUF_INIT(8192);
	enum core_status st;
	char *stem = NULL;

	if (source && !strchr(name, '/') && (st = source->load(source->ctx, name, out, e)) !=
	    CORE_ENOTFOUND)
		return st;
	if (!(t = calloc(1, sizeof *t)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	if (strchr(name, '/')) {
		if (!is_file(name)) {
			st = core_fail(e, CORE_ENOTFOUND, "tool '%s' not found", name);
			goto fail;
		}
		core_buf_adds(&p, name);
	} else {
		for (char *const *d = dirs; d && *d; d++) {
			core_buf_reset(&p);
			if (core_buf_addf(&p, "%s/%s.json", *d, name)) {
				st = core_fail(e, CORE_EINVAL, "tool name '%s' is too long", name);
				goto fail;
			}
			if (is_file(p.p))
				break;
			core_buf_addf(&tried, "%s%s", tried.len ? ", " : "", *d);
			core_buf_reset(&p);
		}
		if (!p.len) {
			st = core_fail(e, CORE_ENOTFOUND, "tool '%s' not found (searched: %s)", name,
			               tried.len ? tried.p : "nothing");
			goto fail;
		}
	}
	t->manifest = core_buf_detach(&p, NULL);
	const char *base = strrchr(t->manifest, '/');
	base = base ? base + 1 : t->manifest;
	size_t n = strlen(base);
	if (n > 5 && !strcmp(base + n - 5, ".json"))
		n -= 5;
	if (!(stem = strndup(base, n))) {
		st = core_fail(e, CORE_ENOMEM, "out of memory");
		goto fail;
	}
	if ((st = read_manifest(t, stem, e)))
		goto fail;
	free(stem);
	core_buf_release(&tried);
	*out = t;
	return CORE_OK;
fail:
	free(stem);
	core_buf_release(&p);
	core_buf_release(&tried);
	tool_free(t);
	return st;
}

/* ---- running ---- */

void tool_call_release(struct tool_call *c)
{
	json_decref(c->output);
	json_decref(c->interrupt);
	json_decref(c->parts);
	c->output = c->interrupt = c->parts = NULL;
	core_buf_release(&c->stdin_buf);
	core_buf_release(&c->out_buf);
	core_buf_release(&c->err_buf);
}

/* The turn's context and, when tracing, the tool span's TRACEPARENT, as
 * the "NAME=VALUE" entries the child's environment adds (they replace ours).
 * A new vector (core_strv_free()), NULL when out of memory. */
static char **context_env(const struct tool_context *ctx, const struct trace_span *span)
{
	char tp[AGENT_TRACE_ENV_MAX], num[32];
	char **add = calloc(6, sizeof *add);
	size_t k = 0;
	if (!add)
		return NULL;
	if (!agent_trace_env(span, tp) && !(add[k++] = strdup(tp)))
		goto nomem;
	snprintf(num, sizeof num, "%ld", ctx->turn_index);
	const char *vals[] = { ctx->session_id, ctx->snapshot_id, ctx->parent_snapshot_id, num };
	for (int i = 0; i < 4; i++) {
		size_t len = strlen(context_vars[i]) + strlen(vals[i] ? vals[i] : "") + 2;
		if (!(add[k] = malloc(len)))
			goto nomem;
		snprintf(add[k++], len, "%s=%s", context_vars[i], vals[i] ? vals[i] : "");
	}
	return add;
nomem:
	core_strv_free(add);
	return NULL;
}

/* Mark the call failed (first failure wins) and stop the tool. */
static void call_fail(struct tool_call *c, enum core_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void call_fail(struct tool_call *c, enum core_status st, const char *fmt, ...)
{
	if (c->st == CORE_OK) {
		va_list ap;
		va_start(ap, fmt);
		c->st = st;
		c->err.st = st;
		vsnprintf(c->err.msg, sizeof c->err.msg, fmt, ap);
		va_end(ap);
		utf8_fix_cstr(c->err.msg, sizeof c->err.msg);  /* the tool's stderr is in it */
	}
	run_kill(&c->run);
}

static void handle_line(struct tool_call *c, const char *line, size_t len, size_t lineno,
                        const struct tool_events *ev)
{
	struct core_err pe = { 0 };
	if (c->output || c->interrupt) {
		call_fail(c, CORE_EINTERNAL, "wrote a line after its final line (at stdout:%zu)", lineno);
		return;
	}
	json_t *v = jv_parse(line, len, "stdout", lineno, &pe);
	if (!v) {
		call_fail(c, CORE_EINTERNAL, "wrote malformed output: %s", pe.msg);
		return;
	}
	const char *key;
	json_t *val;
	if (!json_is_object(v) || json_object_size(v) != 1) {
		call_fail(c, CORE_EINTERNAL,
		          "wrote an unknown line (want one of custom, customPatch, artifact, part, output, interrupt) (at stdout:%zu)",
		          lineno);
		json_decref(v);
		return;
	}
	json_object_foreach(v, key, val) {
		struct core_err ee = { 0 };
		if (!strcmp(key, "output")) {
			c->output = json_incref(val);
		} else if (!strcmp(key, "interrupt")) {
			c->interrupt = json_is_null(val) ? json_true() : json_incref(val);
		} else if (!strcmp(key, "part")) {
			if (!json_is_object(val))
				call_fail(c, CORE_EINTERNAL, "'part' must be an object (at stdout:%zu)", lineno);
			else
				json_array_append(c->parts, val);
		} else if (!strcmp(key, "artifact")) {
			if (!json_is_object(val) || !json_is_array(json_object_get(val, "parts")))
				call_fail(c, CORE_EINTERNAL, "'artifact' must be an object with 'parts' (at stdout:%zu)",
				          lineno);
			else if (ev && ev->artifact && ev->artifact(ev->ctx, c->tool, val, &ee))
				call_fail(c, ee.st, "%s (at stdout:%zu)", ee.msg, lineno);
		} else if (!strcmp(key, "custom") || !strcmp(key, "customPatch")) {
			int is_patch = key[6] == 'P';
			if (is_patch && !json_is_array(val))
				call_fail(c, CORE_EINTERNAL, "'customPatch' must be an array (at stdout:%zu)", lineno);
			else if (ev && ev->custom && ev->custom(ev->ctx, c->tool, val, is_patch, &ee))
				call_fail(c, ee.st, "%s (at stdout:%zu)", ee.msg, lineno);
		} else {
			call_fail(c, CORE_EINTERNAL,
			          "wrote an unknown line '%s' (want one of custom, customPatch, artifact, part, output, interrupt) (at stdout:%zu)",
			          key, lineno);
		}
	}
	json_decref(v);
}

/* Process the complete lines in out_buf (every line counts towards
 * maxOutputLines, blank ones too: each costs a pass over this loop). */
static void drain_lines(struct tool_call *c, const struct tool_events *ev, int eof)
{
	size_t start = 0;
	if (!c->out_buf.len)
		return;         /* nothing yet (out_buf.p may be NULL: no NULL + 0) */
	for (;;) {
		char *base = c->out_buf.p + start;
		size_t avail = c->out_buf.len - start;
		char *nl = avail ? memchr(base, '\n', avail) : NULL;
		if (!nl && !(eof && avail))
			break;
		size_t n = nl ? (size_t)(nl - base) : avail;
		size_t m = n;
		while (m && (base[m - 1] == '\r' || base[m - 1] == ' ' || base[m - 1] == '\t'))
			m--;
		size_t s = 0;
		while (s < m && (base[s] == ' ' || base[s] == '\t'))
			s++;
		if (++c->out_lines > c->tool->max_output_lines)
			call_fail(c, CORE_EINTERNAL, "wrote more than %zu lines on stdout (the limit; set "
			          "\"maxOutputLines\" in %s to raise it)", c->tool->max_output_lines,
			          c->tool->manifest);
		if (c->st == CORE_OK
		    && (c->out_values += core_json_values(base + s, m - s))
		       > CORE_VALUE_LIMIT(c->tool->max_output_bytes))
			call_fail(c, CORE_EINTERNAL, "wrote more than %zu JSON values on stdout (the limit, "
			          "one per %d bytes of \"maxOutputBytes\"; set it in %s to raise it)",
			          CORE_VALUE_LIMIT(c->tool->max_output_bytes), CORE_VALUE_BYTES,
			          c->tool->manifest);
		if (s < m && c->st == CORE_OK)
			handle_line(c, base + s, m - s, c->out_lines, ev);
		start += nl ? n + 1 : n;
	}
	if (start) {
		memmove(c->out_buf.p, c->out_buf.p + start, c->out_buf.len - start);
		c->out_buf.len -= start;
		c->out_buf.p[c->out_buf.len] = 0;
	}
}

static void finish(struct tool_call *c)
{
	char tail[STDERR_KEEP + 16] = "";
	if (c->err_buf.len) {
		(void)core_buf_fix_text(&c->err_buf);   /* a NUL must not end the text */
		size_t n = c->err_buf.len;
		while (n && (c->err_buf.p[n - 1] == '\n' || c->err_buf.p[n - 1] == '\r'))
			n--;
		if (n)
			snprintf(tail, sizeof tail, ": %.*s", (int)n, c->err_buf.p);
	}
	if (c->run.timed_out) {
		c->st = CORE_OK;
		call_fail(c, CORE_EDEADLINE, "timed out after %lldms%s%s", (long long)c->tool->timeout_ms,
		          c->run.timed_out == 2 ? " (it had exited without a final line; a process it started kept its "
		                      "output open)" : "", tail);
		return;
	}
	if (c->run.cancelled)
		call_fail(c, CORE_ECANCELLED, "cancelled");
	if (c->st != CORE_OK) {
		size_t len = strlen(c->err.msg);
		snprintf(c->err.msg + len, sizeof c->err.msg - len, "%s", tail);
		utf8_fix_cstr(c->err.msg, sizeof c->err.msg);
		return;
	}
	if (c->run.signal) {
		call_fail(c, CORE_EINTERNAL, "killed by signal %d%s", c->run.signal, tail);
	} else if (c->run.code) {
		call_fail(c, CORE_EINTERNAL, "exited with status %d%s", c->run.code, tail);
	} else if (!c->output && !c->interrupt) {
		call_fail(c, CORE_EINTERNAL, "exited without an output or interrupt line%s", tail);
	}
}

/* The tool's stdout as it comes (capped at maxOutputBytes, dropped once
 * the call has failed), its lines handled as they complete; (NULL, 0): its
 * end. */
static void tool_out(struct run_child *rc, const char *p, size_t n)
{
	struct tool_call *c = rc->ctx;
	if (!p) {
		drain_lines(c, c->ev, 1);
		return;
	}
	if (c->st != CORE_OK)
		return;
	if ((c->out_bytes += n) > c->tool->max_output_bytes)
		call_fail(c, CORE_EINTERNAL, "wrote more than %zu bytes on stdout (the limit; set "
		          "\"maxOutputBytes\" in %s to raise it)", c->tool->max_output_bytes,
		          c->tool->manifest);
	else if (core_buf_add(&c->out_buf, p, n))
		call_fail(c, CORE_EINTERNAL, "wrote a line longer than %zu bytes", (size_t)TOOL_LINE_MAX);
	drain_lines(c, c->ev, 0);
}

/* A tool that exited 0 without a final line is waited for until the
 * timeout: something it started may still print it.  Waiting cannot
 * change the outcome of one that printed it, or failed. */
static int tool_holds(struct run_child *rc)
{
	struct tool_call *c = rc->ctx;
	return rc->exited_ok && c->st == CORE_OK && !c->output && !c->interrupt;
}

static void tool_done(struct run_child *rc)
{
	struct tool_call *c = rc->ctx;
	if (c->poll_err->st)
		call_fail(c, c->poll_err->st, "cannot run tools: %s", c->poll_err->msg);
	finish(c);
	agent_trace_tool_end(c->span, c->st, c->err.msg, c->interrupt, c->output);
}

/* Start in-process call c (its span begun): *pending for its finish, or
 * NULL when it failed at once (ended then).  CORE_ENOMEM: not started. */
static enum core_status start_in_process(struct tool_call *c, const struct tool_context *ctx,
                                         const struct tool_events *ev, void **pending)
{
	memset(&c->run, 0, sizeof c->run);
	c->run.done = 1;
	c->output = c->interrupt = NULL;
	core_buf_init(&c->stdin_buf, 0);
	core_buf_init(&c->out_buf, 0);
	core_buf_init(&c->err_buf, 0);
	memset(&c->err, 0, sizeof c->err);
	if (!(c->parts = json_array()))
		return CORE_ENOMEM;
	/* The call's span, and its traceparent for the server (without the
	 * "TRACEPARENT=" of the environment form). */
	struct tool_context cc = *ctx;
	char tp[AGENT_TRACE_ENV_MAX];
	c->span = agent_trace_tool_begin(c->tool->name, c->input);
	agent_trace_tool_attrs(c->span, c->tool->span_attrs);
	cc.traceparent = agent_trace_env(c->span, tp) ? NULL : strchr(tp, '=') + 1;
	cc.resumed = c->resumed;
	c->st = c->tool->start(c->tool, c->input, &cc, ev ? ev->cancelled : NULL,
	                       ev ? ev->ctx : NULL, pending, &c->err);
	if (c->st)
		agent_trace_tool_end(c->span, c->st, c->err.msg, NULL, NULL);
	return CORE_OK;
}

/* The in-process tools (an MCP server's) of a round, before the
 * executables start: every call started (sent to its server), then each
 * finished, so that they run at the same time, each with its own timeout.
 * Only CORE_ENOMEM fails the round (the calls started are finished). */
static enum core_status run_in_process(struct tool_call *calls, size_t n,
                                       const struct tool_context *ctx,
                                       const struct tool_events *ev, struct core_err *e)
{
	void **pending = calloc(n + 1, sizeof *pending);
	enum core_status st = pending ? CORE_OK : CORE_ENOMEM;
	for (size_t i = 0; i < n && !st; i++)
		if (calls[i].tool->start)
			st = start_in_process(&calls[i], ctx, ev, &pending[i]);
	for (size_t i = 0; pending && i < n; i++) {
		struct tool_call *c = &calls[i];
		if (!pending[i])
			continue;
		c->st = c->tool->finish(c->tool, pending[i], &c->output, &c->interrupt, c->parts, ev,
		                        &c->err);
		agent_trace_tool_end(c->span, c->st, c->err.msg, c->interrupt, c->output);
	}
	free(pending);
	return st ? core_fail(e, st, "out of memory") : CORE_OK;
}

/* An executable call's state before its start: its buffers, and its stdin
 * line (input, custom state, resume, context).  CORE_ENOMEM only. */
static enum core_status prepare_executable(struct tool_call *c, const json_t *custom,
                                           const struct tool_context *ctx)
{
	enum core_status st;
	memset(&c->run, 0, sizeof c->run);
	c->run.done = 1;
	c->st = CORE_OK;
	c->output = c->interrupt = NULL;
	c->out_lines = c->out_bytes = c->out_values = 0;
	core_buf_init(&c->stdin_buf, CORE_BUF_UNLIMITED);
	core_buf_init(&c->out_buf, TOOL_LINE_MAX);
	core_buf_init(&c->err_buf, STDERR_KEEP + 1);
	if (!(c->parts = json_array()))
		return CORE_ENOMEM;
	json_t *in = json_pack("{s:O?, s:O?}", "input", c->input ? c->input : json_null(),
	                       "custom", custom ? custom : json_null());
	if (!in)
		return CORE_ENOMEM;
	if (c->resumed)
		json_object_set(in, "resumed", (json_t *)c->resumed);
	json_object_set_new(in, "context", json_pack("{s:s, s:s, s:s, s:i}",
	                    "sessionId", ctx->session_id ? ctx->session_id : "",
	                    "snapshotId", ctx->snapshot_id ? ctx->snapshot_id : "",
	                    "parentSnapshotId", ctx->parent_snapshot_id ? ctx->parent_snapshot_id : "",
	                    "turnIndex", (int)ctx->turn_index));
	st = jv_dump(in, &c->stdin_buf);
	json_decref(in);
	if (st || core_buf_addc(&c->stdin_buf, '\n'))
		return CORE_ENOMEM;
	return CORE_OK;
}

/* Start an executable call (its span begun): its stdin line, its
 * environment, the bounds of its run.  CORE_ENOMEM (nothing started), or
 * run_start()'s failure (the span ended with it). */
static enum core_status start_call(struct tool_call *c, const json_t *custom,
                                   const struct tool_context *ctx, struct core_err *e)
{
	enum core_status st;
	char **add = NULL, **env = NULL, what[300];
	if (prepare_executable(c, custom, ctx))
		return CORE_ENOMEM;
	c->span = agent_trace_tool_begin(c->tool->name, c->input);
	if (!(add = context_env(ctx, c->span)) ||
	    !(env = run_env((const char *const *)c->tool->env_allow, (const char *const *)add))) {
		core_strv_free(add);
		return CORE_ENOMEM;
	}
	snprintf(what, sizeof what, "tool '%s'", c->tool->name);
	c->run = (struct run_child){
		.argv = c->tool->argv, .env = env, .what = what,
		.in = c->stdin_buf.p, .in_len = c->stdin_buf.len,
		.timeout_ms = c->tool->timeout_ms, .cancel_grace_ms = TOOL_KILL_GRACE_MS,
		.err = &c->err_buf, .err_keep = STDERR_KEEP,
		.on_out = tool_out, .hold_pipes = tool_holds, .on_done = tool_done, .ctx = c,
	};
	st = run_start(&c->run, e);
	free(env);
	core_strv_free(add);
	if (st)
		agent_trace_tool_end(c->span, st, e->msg, NULL, NULL);
	return st;
}

enum core_status tools_run(struct tool_call *calls, size_t n, const json_t *custom,
                           const struct tool_context *ctx, const struct tool_events *ev,
                           struct core_err *e)
{
	struct run_child **runs = calloc(n + 1, sizeof *runs);
	struct core_err pe = { 0 };
	enum core_status st = CORE_OK;
	size_t k = 0;
	if (!runs)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	if ((st = run_in_process(calls, n, ctx, ev, e)))
		goto out;
	for (size_t i = 0; i < n && !st; i++) {
		struct tool_call *c = &calls[i];
		if (c->tool->start)
			continue;
		c->ev = ev;
		c->poll_err = &pe;
		if ((st = start_call(c, custom, ctx, e)) == CORE_ENOMEM)
			goto nomem;
		/* A start that failed stops the ones already started. */
		for (size_t j = 0; st && j < k; j++)
			call_fail(runs[j]->ctx, st, "%s", e->msg);
		if (!st)
			runs[k++] = &c->run;
	}
	if (run_wait_all(runs, k, ev ? ev->cancelled : NULL, ev ? ev->ctx : NULL, &pe) && !st) {
		st = core_fail(e, pe.st, "cannot run tools: %s", pe.msg);
		for (size_t j = 0; j < k; j++)
			call_fail(runs[j]->ctx, st, "%s", e->msg);
	}
	goto out;
nomem:
	st = core_fail(e, CORE_ENOMEM, "out of memory");
	for (size_t j = 0; j < k; j++)
		run_child_release(runs[j]);
out:
	free(runs);
	return st;
}
