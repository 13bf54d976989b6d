/* agent_ext.c - custom agents, transforms, grounding and descriptors wired
 * to an agent definition. */
#include "agent_ext.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "agent_trace.h"
#include "delegate.h"
#include "../base/buf.h"
#include "../base/json.h"
#include "../base/lines.h"
#include "prompt.h"
#include "session.h"
#include "tools.h"
#include "transform.h"
#include "../base/run.h"
#include "../base/spawn.h"
#include "../base/util.h"

struct agent_ext {
	char *docs_cmd;
	int64_t transform_timeout_ms;
	struct custom_agent *custom;
	struct transform *state_tf, *stream_tf;
	json_t *state_schema;   /* or NULL */
	json_t *docs;           /* this turn's documents, or NULL */
	json_t *result;         /* a custom agent's AgentResult, or NULL */
	int (*cancelled)(void *ctx);    /* the caller's stop (agent_ext_set_cancel()) */
	void *cancel_ctx;
};

static const char context_preface[] = "\n\nUse the following information to complete your task:\n\n";

/* ---- loading ---- */

/*
 * A positive limit from the environment variable env (when set and not
 * empty): a size ("64M") when is_size, else a whole number; 0 when unset.
 */
static enum core_status limit_setting(const char *env, int is_size, size_t *out,
                                      struct core_err *e)
{
	const char *v = getenv(env);
	uint64_t n = 0;
	char *end = NULL;
	struct core_err pe = { 0 };
	*out = 0;
	if (!v || !*v)
		return CORE_OK;
	if (is_size) {
		if (core_parse_size(v, &n, &pe))
			return core_fail(e, CORE_EUSAGE, "%s: %s", env, pe.msg);
	} else {
		errno = 0;
		n = *v >= '0' && *v <= '9' ? strtoull(v, &end, 10) : 0;
		if (!end || *end || errno)
			return core_fail(e, CORE_EUSAGE, "%s: invalid number '%s'", env, v);
	}
	if (!n)
		return core_fail(e, CORE_EUSAGE, "%s: must be positive", env);
	*out = n > SIZE_MAX ? SIZE_MAX : (size_t)n;
	return CORE_OK;
}

/* A string front-matter key, or the flag that overrides it. */
static enum core_status pick(const struct agent *a, const char *flag, const char *key,
                             const char **out, struct core_err *e)
{
	*out = flag;
	if (flag || !a->prompt)
		return CORE_OK;
	const json_t *v = json_object_get(prompt_meta(a->prompt), key);
	if (!v || json_is_null(v))
		return CORE_OK;
	if (!jv_is_string(v) || !json_string_length(v))
		return core_fail(e, CORE_EINVAL, "%s: '%s' must be a command string", a->path, key);
	*out = json_string_value(v);
	return CORE_OK;
}

/* stateSchema: an object, or a file name relative to the prompt file. */
static enum core_status load_schema(const struct agent *a, json_t **out, struct core_err *e)
{
	const json_t *v = a->prompt ? json_object_get(prompt_meta(a->prompt), "stateSchema") : NULL;
	*out = NULL;
	if (!v || json_is_null(v)) {
		if (a->state_schema)
			*out = json_deep_copy(a->state_schema);
		return CORE_OK;
	}
	if (json_is_object(v)) {
		*out = json_deep_copy(v);
		return CORE_OK;
	}
	if (!jv_is_string(v))
		return core_fail(e, CORE_EINVAL, "%s: 'stateSchema' must be a JSON schema or a file name",
		                 a->path);
	struct core_buf path = CORE_BUF_INIT(PATH_MAX), text = CORE_BUF_INIT((size_t)16 << 20);
	const char *file = json_string_value(v), *slash = strrchr(a->path, '/');
	struct core_err re = { 0 };
	enum core_status st;
	if (*file == '/' || !slash)
		st = core_buf_adds(&path, file);
	else
		st = core_buf_addf(&path, "%.*s/%s", (int)(slash - a->path), a->path, file);
	if (!st)
		st = core_buf_read_file(&text, path.p, &re);
	if (!st && !(*out = jv_parse(text.p ? text.p : "", text.len, path.p, 0, &re)))
		st = re.st;
	if (st)
		core_fail(e, st == CORE_ENOMEM ? CORE_ENOMEM : CORE_EINVAL, "%s: stateSchema: %s",
		          a->path, re.msg);
	core_buf_release(&path);
	core_buf_release(&text);
	return st ? e->st : CORE_OK;
}

enum core_status agent_ext_load(const struct agent *a, const struct agent_ext_spec *spec,
                                struct agent_ext **out, struct core_err *e)
{
	struct agent_ext *x = calloc(1, sizeof *x);
	const char *exec, *docs, *stf, *xtf;
	int64_t exec_ms;
	size_t exec_bytes, exec_lines, tf_line;
	enum core_status st;
	if (!x)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	if ((st = pick(a, spec->exec, "exec", &exec, e)) || (st = pick(a, spec->docs, "docs", &docs, e))
	    || (st = pick(a, spec->state_transform, "stateTransform", &stf, e))
	    || (st = pick(a, spec->stream_transform, "streamTransform", &xtf, e))
	    || (st = core_duration_setting(NULL, NULL, "AGENTKIT_EXEC_TIMEOUT", 0, &exec_ms, e))
	    || (st = core_duration_setting(NULL, NULL, "AGENTKIT_TRANSFORM_TIMEOUT",
	                                     TRANSFORM_DEFAULT_TIMEOUT_MS, &x->transform_timeout_ms, e))
	    || (st = limit_setting("AGENTKIT_EXEC_MAX_BYTES", 1, &exec_bytes, e))
	    || (st = limit_setting("AGENTKIT_EXEC_MAX_LINES", 0, &exec_lines, e))
	    || (st = limit_setting("AGENTKIT_TRANSFORM_MAX_LINE", 1, &tf_line, e))
	    || (st = load_schema(a, &x->state_schema, e)))
		goto fail;
	if ((exec && (st = custom_agent_new(exec, exec_ms, exec_bytes, exec_lines, &x->custom, e)))
	    || (stf && (st = transform_new("state transform", stf, x->transform_timeout_ms, tf_line,
	                                   &x->state_tf, e)))
	    || (xtf && (st = transform_new("stream transform", xtf, x->transform_timeout_ms, tf_line,
	                                   &x->stream_tf, e))))
		goto fail;
	if (docs && !(x->docs_cmd = strdup(docs))) {
		st = core_fail(e, CORE_ENOMEM, "out of memory");
		goto fail;
	}
	*out = x;
	return CORE_OK;
fail:
	agent_ext_free(x);
	return st;
}

void agent_ext_free(struct agent_ext *x)
{
	if (!x)
		return;
	custom_agent_free(x->custom);
	transform_free(x->state_tf);
	transform_free(x->stream_tf);
	free(x->docs_cmd);
	json_decref(x->state_schema);
	json_decref(x->docs);
	json_decref(x->result);
	free(x);
}

int agent_ext_reads_history(const struct agent_ext *x)
{
	return x && (x->custom || x->state_tf || x->docs_cmd);
}

int agent_ext_is_custom(const struct agent_ext *x)
{
	return x && x->custom;
}

void agent_ext_set_cancel(struct agent_ext *x, int (*cancelled)(void *ctx), void *ctx)
{
	if (!x)
		return;
	x->cancelled = cancelled;
	x->cancel_ctx = ctx;
	if (x->state_tf)
		transform_set_cancel(x->state_tf, cancelled, ctx);
	if (x->stream_tf)
		transform_set_cancel(x->stream_tf, cancelled, ctx);
}

struct transform *agent_ext_state_transform(struct agent_ext *x)
{
	return x ? x->state_tf : NULL;
}

struct custom_agent *agent_ext_custom(struct agent_ext *x)
{
	return x ? x->custom : NULL;
}

/* ---- grounding ---- */

/* A document as Genkit's Document: strings become one text part. */
static json_t *document_of(const json_t *d)
{
	if (jv_is_string(d))
		return json_pack("{s:[{s:O}]}", "content", "text", d);
	const json_t *c = json_object_get(d, "content");
	size_t i;
	json_t *p;
	if (!json_is_array(c))
		return NULL;
	json_array_foreach(c, i, p)
		if (!json_is_object(p))
			return NULL;
	return json_deep_copy(d);
}

/* A retrieval command's whole output (one JSON value, any number of lines)
 * is held to be parsed: 64 MiB of it at most.  What is kept of its stderr
 * for a message, and how long it has to exit once its stdout has closed
 * (then SIGTERM, and SIGKILL as long again later). */
#define DOCS_MAX_OUTPUT ((size_t)64 << 20)
#define DOCS_STDERR_KEEP 2048
#define DOCS_EXIT_GRACE_MS 1000

/* A docs command's run: its stdout taken line by line into out (blank
 * lines skipped, a trailing '\r' dropped, each line given a newline), held
 * to its budget of bytes and JSON values (run_kill() when over). */
struct docs_run {
	struct run_child rc;
	const char *what;
	struct core_buf part;   /* a line still coming */
	struct core_buf out;    /* the lines so far */
	size_t bytes, values;   /* taken so far (blank lines, newlines too) */
	enum core_status st;    /* the run's failure, in err */
	struct core_err err;
};

static void docs_fail(struct docs_run *d, enum core_status st)
{
	d->st = st;
	run_kill(&d->rc);
}

/* The budget, with pending bytes of a line still coming; 0 when within. */
static int docs_budget(struct docs_run *d, size_t pending)
{
	if (d->bytes + pending > DOCS_MAX_OUTPUT)
		docs_fail(d, run_over_budget(&d->err, d->what, DOCS_MAX_OUTPUT, "bytes", NULL, NULL));
	else if (d->values > CORE_VALUE_LIMIT(DOCS_MAX_OUTPUT))
		docs_fail(d, run_over_budget(&d->err, d->what, CORE_VALUE_LIMIT(DOCS_MAX_OUTPUT),
		                             "JSON values", NULL, NULL));
	return d->st != CORE_OK;
}

/* One line of stdout, p[0..n) without its newline (took: with it). */
static void docs_line(struct docs_run *d, const char *p, size_t n, size_t took)
{
	size_t i = 0;
	enum core_status st;
	d->bytes += took;
	if (n && p[n - 1] == '\r')
		n--;
	while (i < n && (p[i] == ' ' || p[i] == '\t'))
		i++;
	if (i == n)
		return;
	if (n > DOCS_MAX_OUTPUT) {
		docs_fail(d, run_line_too_long(&d->err, d->what, DOCS_MAX_OUTPUT, NULL));
		return;
	}
	d->values += core_json_values(p, n);
	if (docs_budget(d, 0))
		return;
	if ((st = core_buf_add(&d->out, p, n)) || (st = core_buf_addc(&d->out, '\n')))
		docs_fail(d, core_fail(&d->err, st, "%s wrote too much", d->what));
}

/* run_child's on_out: the complete lines of what came; (NULL, 0): the
 * last one, without its newline. */
static void docs_out(struct run_child *rc, const char *p, size_t n)
{
	struct docs_run *d = rc->ctx;
	size_t start = 0;
	if (d->st)
		return;
	if (p && core_buf_add(&d->part, p, n)) {
		docs_fail(d, core_fail(&d->err, CORE_ENOMEM, "out of memory reading from %s", d->what));
		return;
	}
	while (!d->st && start < d->part.len) {
		char *base = d->part.p + start, *nl = memchr(base, '\n', d->part.len - start);
		if (!nl && p)
			break;
		size_t len = nl ? (size_t)(nl - base) : d->part.len - start;
		start += nl ? len + 1 : len;
		docs_line(d, base, len, nl ? len + 1 : len);
	}
	if (start) {
		memmove(d->part.p, d->part.p + start, d->part.len - start);
		d->part.len -= start;
		d->part.p[d->part.len] = 0;
	}
	if (!d->st && d->part.len > DOCS_MAX_OUTPUT)
		docs_fail(d, run_line_too_long(&d->err, d->what, DOCS_MAX_OUTPUT, NULL));
	else if (!d->st)
		docs_budget(d, d->part.len);
}

/* Run the docs command (sh -c) with history on its stdin until it ends;
 * CORE_OK with its output in d->out, or the failure in e (named d->what):
 * it did not start, it was stopped, it did not answer or read its input
 * within timeout_ms, it wrote more than its budget, or it failed. */
static enum core_status docs_run(struct agent_ext *x, struct docs_run *d, const char *in,
                                 size_t in_len, struct core_err *e)
{
	char *execd = spawn_exec_script(x->docs_cmd);  /* "exec CMD": CMD holds the pipes */
	char *const argv[] = { "/bin/sh", "-c", execd ? execd : x->docs_cmd, NULL };
	char tp[AGENT_TRACE_ENV_MAX];
	const char *add[2] = { agent_trace_env(NULL, tp) ? NULL : tp, NULL };  /* the turn's span */
	char **env = run_env(NULL, add);
	struct core_buf err = CORE_BUF_INIT(DOCS_STDERR_KEEP + 1);
	enum core_status st;
	d->rc = (struct run_child){
		.argv = argv, .env = env, .what = d->what, .in = in, .in_len = in_len,
		.idle_ms = x->transform_timeout_ms, .eof_grace_ms = DOCS_EXIT_GRACE_MS,
		.err = &err, .err_keep = DOCS_STDERR_KEEP, .on_out = docs_out, .ctx = d,
	};
	if (!env)
		st = core_fail(e, CORE_ENOMEM, "out of memory");
	else if (!(st = run_child(&d->rc, x->cancelled, x->cancel_ctx, e)) && d->st)
		*e = d->err, st = d->st;
	else if (!st && d->rc.cancelled)
		st = core_fail(e, CORE_ECANCELLED, "%s: cancelled", d->what);
	else if (!st && d->rc.idled)
		st = core_fail(e, CORE_EDEADLINE, "%s did not %s within %lld ms", d->what,
		               d->rc.idled == 2 ? "read its input" : "answer",
		               (long long)x->transform_timeout_ms);
	else if (!st && (d->rc.code || d->rc.signal)) {
		struct core_buf how = CORE_BUF_INIT(DOCS_STDERR_KEEP + 256);
		run_describe_end(&how, d->rc.code, d->rc.signal);
		run_describe_said(&how, err.p ? err.p : "", err.len, "",
		                  err.len >= DOCS_STDERR_KEEP ? "..." : "");
		st = core_fail(e, CORE_EINTERNAL, "%s %s", d->what, how.p ? how.p : "failed");
		core_buf_release(&how);
	}
	run_child_release(&d->rc);
	free(env);
	free(execd);
	core_buf_release(&err);
	return st;
}

/* The documents of the command's output: an array of them, each a string
 * or {"content": [parts]}; NULL with le filled when it is none. */
static json_t *docs_of(const char *what, const struct core_buf *out, struct core_err *le)
{
	struct core_err pe = { 0 };
	json_t *raw = jv_parse(out->p ? out->p : "", out->len, "stdout", 0, &pe), *docs = NULL, *d;
	size_t i;
	if (!raw) {
		core_fail(le, CORE_EINTERNAL, "%s wrote malformed output: %s", what, pe.msg);
		return NULL;
	}
	if (!json_is_array(raw)) {
		core_fail(le, CORE_EINTERNAL, "%s must print an array of documents, not %s", what,
		          jv_type_name(raw));
		json_decref(raw);
		return NULL;
	}
	docs = json_array();
	json_array_foreach(raw, i, d) {
		json_t *doc = document_of(d);
		if (!doc) {
			core_fail(le, CORE_EINTERNAL,
			          "%s: document %zu is neither a string nor {\"content\": [parts]}", what, i);
			json_decref(docs);
			docs = NULL;
			break;
		}
		json_array_append_new(docs, doc);
	}
	json_decref(raw);
	return docs;
}

enum core_status agent_ext_ground(struct agent_ext *x, const json_t *history, struct core_err *e)
{
	struct core_buf in = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_err le = { 0 };
	enum core_status st;
	if (!x)
		return CORE_OK;
	json_decref(x->docs);
	x->docs = NULL;
	if (!x->docs_cmd)
		return CORE_OK;
	char what[100];
	size_t n = strlen(x->docs_cmd);
	snprintf(what, sizeof what, "docs command '%.*s%s'", n > 60 ? 57 : (int)n, x->docs_cmd,
	         n > 60 ? "..." : "");
	struct docs_run d = { .what = what, .part = CORE_BUF_INIT(CORE_BUF_UNLIMITED),
	                      .out = CORE_BUF_INIT(DOCS_MAX_OUTPUT) };
	/* The conversation, one line; grounding is the turn's work: a stop
	 * ends it at once.  A command that answers without reading it (echo
	 * '[...]') is judged by its output and exit status, not by the broken
	 * pipe. */
	json_t *empty = history ? NULL : json_array();
	if (!history && !empty)
		st = core_fail(&le, CORE_ENOMEM, "out of memory");
	else if ((st = jv_dump(history ? history : empty, &in)) || (st = core_buf_addc(&in, '\n')))
		core_fail(&le, st, "cannot encode a line for %s", what);
	else if (!(st = docs_run(x, &d, in.p, in.len, &le)) && !(x->docs = docs_of(what, &d.out, &le)))
		st = le.st;
	if (st)
		core_fail(e, st == CORE_EDEADLINE || st == CORE_ENOMEM || st == CORE_ECANCELLED ? st
		          : CORE_EINTERNAL, "docs: %s", le.msg);
	json_decref(empty);
	core_buf_release(&in);
	core_buf_release(&d.part);
	core_buf_release(&d.out);
	return st ? e->st : CORE_OK;
}

/* Genkit's contextItemTemplate: "- [ref|id|index]: text\n". */
static void context_item(struct core_buf *b, const json_t *doc, size_t index)
{
	const json_t *md = json_object_get(doc, "metadata");
	const json_t *key = json_object_get(md, "ref");
	if (!key)
		key = json_object_get(md, "id");
	core_buf_adds(b, "- [");
	if (jv_is_string(key))
		core_buf_adds(b, json_string_value(key));
	else if (key) {
		struct core_buf k = CORE_BUF_INIT(4096);
		jv_dump(key, &k);
		core_buf_adds(b, k.p ? k.p : "");
		core_buf_release(&k);
	} else
		core_buf_addf(b, "%zu", index);
	core_buf_adds(b, "]: ");
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(doc, "content"), i, p) {
		const json_t *t = json_object_get(p, "text");
		if (jv_is_string(t))
			core_buf_add(b, json_string_value(t), json_string_length(t));
	}
	core_buf_addc(b, '\n');
}

void agent_ext_augment(struct agent_ext *x, json_t *messages)
{
	if (!x || !json_array_size(x->docs))
		return;
	for (size_t i = json_array_size(messages); i-- > 0;) {
		json_t *m = json_array_get(messages, i);
		const char *role = json_string_value(json_object_get(m, "role"));
		if (!role || strcmp(role, "user"))
			continue;
		struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		core_buf_adds(&b, context_preface);
		size_t k;
		json_t *d;
		json_array_foreach(x->docs, k, d)
			context_item(&b, d, k);
		core_buf_addc(&b, '\n');
		json_t *copy = json_copy(m);
		json_t *content = json_object_get(m, "content");
		content = json_is_array(content) ? json_copy(content) : json_array();
		json_array_append_new(content, json_pack("{s:s, s:{s:s}}", "text", b.p ? b.p : "",
		                                         "metadata", "purpose", "context"));
		json_object_set_new(copy, "content", content);
		json_array_set_new(messages, i, copy);
		core_buf_release(&b);
		return;
	}
}

/* ---- the runner's hooks (runtime.h) ---- */

void agent_ext_turn(struct agent_ext *x, struct session *s, const json_t *input,
                    struct ca_outcome *o)
{
	memset(o, 0, sizeof *o);
	if (agent_ext_ground(x, session_messages(s), &o->err))
		return;
	custom_agent_turn(x->custom, s, input, x->docs_cmd ? x->docs : NULL, o);
}

/* t failed closed, and not by the caller's stop: the run's outcome is
 * then the stop's (aborted), not the transform's. */
static int failed_closed(const struct transform *t, struct core_err *e)
{
	struct core_err te = { 0 };
	if (!t || !transform_failed(t, &te) || te.st == CORE_ECANCELLED)
		return 0;
	if (e)
		*e = te;
	return 1;
}

int agent_ext_failed(struct agent_ext *x, struct core_err *e)
{
	if (!x)
		return 0;
	return failed_closed(x->state_tf, e) || failed_closed(x->stream_tf, e);
}

/* ---- agent-run's hooks ---- */

enum core_status agent_ext_chunk(struct agent_ext *x, const json_t *chunk, json_t **out,
                                 struct core_err *e)
{
	if (!x || !x->stream_tf) {
		*out = json_incref((json_t *)chunk);
		return CORE_OK;
	}
	return transform_apply(x->stream_tf, chunk, out, e);
}

enum core_status agent_ext_finish(struct agent_ext *x, int ok, struct core_err *e)
{
	enum core_status st;
	if (!x)
		return CORE_OK;
	if (x->custom) {
		json_decref(x->result);
		x->result = NULL;
		if ((st = custom_agent_finish(x->custom, ok, &x->result, e)) && ok)
			return st;
	}
	if (ok && agent_ext_failed(x, e))
		return e->st ? e->st : CORE_EINTERNAL;
	return CORE_OK;
}

enum core_status agent_ext_output(struct agent_ext *x, json_t *output, struct core_err *e)
{
	if (!x)
		return CORE_OK;
	if (x->result && !json_object_get(output, "error")) {
		/* AgentResult: message and artifacts replace the session's;
		 * a non-empty finishReason overrides the last turn's. */
		static const char *const keys[] = { "artifacts", "finishReason", "message" };
		json_t *o = json_copy(output);
		json_object_clear(output);
		for (int i = 0; i < 3; i++) {
			const json_t *v = json_object_get(x->result, keys[i]);
			if (i == 1 && (!jv_is_string(v) || !json_string_length(v)))
				v = NULL;
			if (!v)
				v = json_object_get(o, keys[i]);
			if (v && !json_is_null(v))
				json_object_set(output, keys[i], (json_t *)v);
		}
		static const char *const rest[] = { "sessionId", "snapshotId", "state" };
		for (int i = 0; i < 3; i++)
			if (json_object_get(o, rest[i]))
				json_object_set(output, rest[i], json_object_get(o, rest[i]));
		json_decref(o);
	}
	if (x->state_tf)
		return transform_output(x->state_tf, output, e);
	return CORE_OK;
}

/* ---- agent-snap ---- */

enum core_status agent_ext_snap_open(const char *name, const char *agents_dir,
                                     struct agent_ext **out, struct core_err *e)
{
	struct agent_spec spec = { 0 };
	struct agent_ext_spec xspec = { 0 };
	struct agent *a = NULL;
	spec.name = name;
	spec.agents_dir = agents_dir;
	spec.model_optional = 1;
	enum core_status st = agent_load(&spec, &a, e);
	if (!st)
		st = agent_ext_load(a, &xspec, out, e);
	agent_free(a);
	return st;
}

enum core_status agent_ext_snap_row(struct agent_ext *x, json_t *row, struct core_err *e)
{
	const json_t *state = json_object_get(row, "state");
	json_t *view = NULL;
	if (!x || !x->state_tf || !state)
		return CORE_OK;
	enum core_status st = transform_state(x->state_tf, state,
	                                      json_string_value(json_object_get(row, "sessionId")),
	                                      &view, e);
	if (st)
		return st;
	if (view)
		json_object_set_new(row, "state", view);
	else
		json_object_del(row, "state");
	return CORE_OK;
}

/* ---- descriptors ---- */

enum core_status agent_ext_describe(const struct agent *a, const struct agent_ext *x,
                                    int server_managed, json_t **out, struct core_err *e)
{
	json_t *d = json_object(), *tools = json_array(), *meta = json_object(), *am = json_object();
	enum core_status st0;
	size_t i;
	json_t *name;
	if (!d || !tools || !meta || !am) {
		json_decref(d);
		json_decref(tools);
		json_decref(meta);
		json_decref(am);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	json_array_foreach(a->tools, i, name) {
		struct tool *t;
		enum core_status st = tool_load(json_string_value(name), a->tool_dirs, &t, e);
		if (st) {
			json_decref(d);
			json_decref(tools);
			json_decref(meta);
			json_decref(am);
			return st;
		}
		json_array_append(tools, t->definition);
		tool_free(t);
	}
	json_object_set_new(d, "name", json_string(a->name));
	if (a->description)
		json_object_set_new(d, "description", json_string(a->description));
	if (a->model)
		json_object_set_new(d, "model", json_string(a->model));
	json_object_set_new(d, "tools", tools);
	json_object_set_new(d, "maxTurns", json_integer(a->max_turns));
	if (a->delegation && (st0 = delegate_describe(a->delegation, tools, d, e))) {
		json_decref(d);
		json_decref(meta);
		json_decref(am);
		return st0;
	}
	/* what the model must answer (front matter output, --json,
	 * --output-schema): {"format": "json", "schema"?} */
	if (a->output)
		json_object_set(d, "output", a->output);
	if (agent_ext_is_custom(x))
		json_object_set_new(d, "custom", json_true());
	json_object_set_new(am, "stateManagement", json_string(server_managed ? "server" : "client"));
	/* Every agentkit store can observe aborts (SnapshotSubscriber). */
	if (server_managed)
		json_object_set_new(am, "abortable", json_true());
	if (x && x->state_schema)
		json_object_set(am, "stateSchema", x->state_schema);
	else if (a->state_schema)
		json_object_set(am, "stateSchema", a->state_schema);
	if (a->description)
		json_object_set_new(meta, "description", json_string(a->description));
	json_object_set_new(meta, "agent", am);
	json_object_set_new(d, "metadata", meta);
	*out = d;
	return CORE_OK;
}

static int by_name(const void *pa, const void *pb)
{
	const json_t *a = *(json_t *const *)pa, *b = *(json_t *const *)pb;
	return strcmp(json_string_value(json_object_get(a, "name")),
	              json_string_value(json_object_get(b, "name")));
}

static enum core_status scan_dir(const char *dir, json_t *found, struct core_err *e)
{
	DIR *dh = opendir(dir);
	struct dirent *de;
	if (!dh)
		return CORE_OK;         /* a missing directory lists nothing */
	while ((de = readdir(dh))) {
		size_t n = strlen(de->d_name);
		if (n <= 7 || strcmp(de->d_name + n - 7, ".prompt") || de->d_name[0] == '.')
			continue;
		char stem[NAME_MAX + 1];
		snprintf(stem, sizeof stem, "%.*s", (int)(n - 7), de->d_name);
		if (json_object_get(found, stem))
			continue;
		struct core_buf path = CORE_BUF_INIT(PATH_MAX);
		struct prompt *p = NULL;
		struct core_err pe = { 0 };
		core_buf_addf(&path, "%s/%s", dir, de->d_name);
		json_t *entry = json_pack("{s:s}", "name", stem);
		if (prompt_load(path.p, &p, &pe)) {
			json_object_set_new(entry, "error", json_string(pe.msg));
		} else {
			const json_t *desc = json_object_get(prompt_meta(p), "description");
			if (jv_is_string(desc))
				json_object_set(entry, "description", (json_t *)desc);
		}
		prompt_free(p);
		json_object_set_new(entry, "path", json_string(path.p));
		json_object_set_new(found, stem, entry);
		core_buf_release(&path);
	}
	closedir(dh);
	return CORE_OK;
}

enum core_status agent_ext_list(const char *agents_dir, json_t **out, struct core_err *e)
{
	json_t *found = json_object();
	enum core_status st = CORE_OK;
	if (!found)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	char **dirs = NULL;
	if (agent_search_path(agents_dir, &dirs)) {
		json_decref(found);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	for (char **d = dirs; *d && !st; d++)
		st = scan_dir(*d, found, e);
	agent_path_free(dirs);
	size_t n = json_object_size(found), k = 0;
	json_t **v = calloc(n + 1, sizeof *v);
	const char *key;
	json_t *val;
	if (!v) {
		json_decref(found);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	json_object_foreach(found, key, val)
		v[k++] = val;
	qsort(v, n, sizeof *v, by_name);
	json_t *list = json_array();
	for (k = 0; k < n; k++)
		json_array_append(list, v[k]);
	free(v);
	json_decref(found);
	*out = list;
	return st;
}
