/* transform.c - state and stream transforms: NDJSON filters that fail closed. */
#include "transform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/coproc.h"
#include "../base/json.h"
#include "../base/util.h"
#include "agent_trace.h"

struct transform {
	char *kind, *cmd, *what;
	int64_t timeout_ms;
	struct coproc_limits lim;
	struct coproc *cp;
	enum core_status failed;     /* sticky failure */
	struct core_err err;
	int (*cancelled)(void *ctx); /* the caller's stop, or NULL */
	void *cancel_ctx;
};

/* One line's wait: the caller's stop, TRANSFORM_STOP_GRACE_MS after it
 * was first seen in this line's wait. */
struct line_wait {
	const struct transform *t;
	int64_t stopped_at;     /* 0: no stop seen yet */
};

static int grace_over(void *ctx)
{
	struct line_wait *w = ctx;
	if (!w->t->cancelled(w->t->cancel_ctx))
		return 0;
	int64_t now = core_now_mono_ms();
	if (!w->stopped_at)
		w->stopped_at = now;
	return now - w->stopped_at >= TRANSFORM_STOP_GRACE_MS;
}

enum core_status transform_new(const char *kind, const char *cmd, int64_t timeout_ms,
                               size_t max_line, struct transform **out, struct core_err *e)
{
	struct transform *t = calloc(1, sizeof *t);
	size_t n = strlen(cmd);
	if (!t || !(t->kind = strdup(kind)) || !(t->cmd = strdup(cmd))
	    || !(t->what = malloc(strlen(kind) + 80))) {
		transform_free(t);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	/* Messages name the command, shortened. */
	snprintf(t->what, strlen(kind) + 80, "%s '%.*s%s'", kind, n > 60 ? 57 : (int)n, cmd,
	         n > 60 ? "..." : "");
	t->timeout_ms = timeout_ms > 0 ? timeout_ms : TRANSFORM_DEFAULT_TIMEOUT_MS;
	/* One line out per line in: an answer (with any blank lines before
	 * it) is all a transform may write, so that is its budget too. */
	t->lim.line = max_line ? max_line : TRANSFORM_DEFAULT_MAX_LINE;
	t->lim.bytes = t->lim.line + 1;
	t->lim.line_knob = t->lim.bytes_knob = "AGENTKIT_TRANSFORM_MAX_LINE";
	*out = t;
	return CORE_OK;
}

void transform_free(struct transform *t)
{
	if (!t)
		return;
	coproc_free(t->cp);
	free(t->kind);
	free(t->cmd);
	free(t->what);
	free(t);
}

void transform_set_cancel(struct transform *t, int (*cancelled)(void *ctx), void *ctx)
{
	t->cancelled = cancelled;
	t->cancel_ctx = ctx;
}

int transform_failed(const struct transform *t, struct core_err *e)
{
	if (t->failed && e)
		*e = t->err;
	return t->failed != CORE_OK;
}

const char *transform_command(const struct transform *t)
{
	return t->cmd;
}

/* Remember the failure, stop the command, return the status. */
static enum core_status broken(struct transform *t, const struct core_err *e)
{
	/* Too much output is the command misbehaving, like malformed output. */
	t->failed = e->st && e->st != CORE_ETOOBIG ? e->st : CORE_EINTERNAL;
	t->err = *e;
	t->err.st = t->failed;
	if (t->cp) {
		coproc_kill(t->cp);
		coproc_free(t->cp);
		t->cp = NULL;
	}
	return t->failed;
}

static enum core_status again(struct transform *t, struct core_err *e)
{
	if (e)
		*e = t->err;
	return t->failed;
}

/* {"error": {"status": NAME, "message": TEXT}}: 1 and e filled. */
static int error_answer(struct transform *t, const json_t *v, struct core_err *e)
{
	const json_t *err = json_object_get(v, "error");
	if (!json_is_object(v) || json_object_size(v) != 1 || !json_is_object(err))
		return 0;
	const char *name = json_string_value(json_object_get(err, "status"));
	const char *msg = json_string_value(json_object_get(err, "message"));
	enum core_status st = name ? core_status_from_name(name) : CORE_EINTERNAL;
	if (st == CORE_OK)
		st = CORE_EINTERNAL;
	core_fail(e, st, "%s", msg && *msg ? msg : "transform failed");
	return 1;
}

enum core_status transform_apply(struct transform *t, const json_t *in, json_t **out,
                                 struct core_err *e)
{
	struct core_err le = { 0 };
	json_t *v = NULL;
	*out = NULL;
	if (t->failed)
		return again(t, e);
	if (t->cp && coproc_inherited(t->cp)) {
		coproc_free(t->cp);     /* a detached worker starts its own */
		t->cp = NULL;
	}
	char tp[AGENT_TRACE_ENV_MAX];
	const char *env[2] = { NULL, NULL };
	agent_trace_env_add(env, tp);   /* the invocation's span: it outlives turns */
	if (!t->cp && coproc_start(t->cmd, t->what, env, &t->lim, &t->cp, &le))
		return broken(t, &le), again(t, e);
	coproc_budget(t->cp, "for one answer");
	struct line_wait w = { t, 0 };
	struct coproc_cancel cancel = { grace_over, &w };
	const struct coproc_cancel *c = t->cancelled ? &cancel : NULL;
	if (coproc_write_json(t->cp, in, t->timeout_ms, c, &le)
	    || coproc_read_json(t->cp, t->timeout_ms, c, &v, &le)) {
		if (le.st == CORE_ECANCELLED)
			core_fail(&le, CORE_ECANCELLED, "%s did not answer within %d ms of the stop",
			          t->what, TRANSFORM_STOP_GRACE_MS);
		return broken(t, &le), again(t, e);
	}
	if (json_is_null(v)) {
		json_decref(v);
		return CORE_OK;
	}
	if (error_answer(t, v, &le)) {
		json_decref(v);
		return broken(t, &le), again(t, e);
	}
	if (!json_is_object(v)) {
		core_fail(&le, CORE_EINTERNAL, "%s answered %s at line %zu, not an object or null",
		          t->what, jv_type_name(v), t->cp->lineno);
		json_decref(v);
		return broken(t, &le), again(t, e);
	}
	*out = v;
	return CORE_OK;
}

enum core_status transform_state(struct transform *t, const json_t *state,
                                 const char *session_id, json_t **out, struct core_err *e)
{
	enum core_status st = transform_apply(t, state, out, e);
	if (st || !*out)
		return st;
	if (session_id && json_object_set_new(*out, "sessionId", json_string(session_id))) {
		json_decref(*out);
		*out = NULL;
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	return CORE_OK;
}

enum core_status transform_output(struct transform *t, json_t *output, struct core_err *e)
{
	const json_t *state = json_object_get(output, "state");
	json_t *view = NULL;
	if (!state)
		return CORE_OK;
	const char *sid = json_string_value(json_object_get(output, "sessionId"));
	enum core_status st = transform_state(t, state, sid, &view, e);
	if (st && !json_object_get(output, "error")) {
		/* A successful output fails closed: the error, no state (members
		 * in Go's order); stopped while it was shaped, it is aborted as
		 * a caller's stop is, with Genkit's context error. */
		json_t *keep = json_copy(output);
		int stop = st == CORE_ECANCELLED;
		json_object_clear(output);
		json_object_set_new(output, "error", jv_error_new(st, stop ? "context canceled"
		                                                           : e->msg));
		json_object_set_new(output, "finishReason", json_string(stop ? "aborted" : "failed"));
		json_object_set(output, "sessionId", json_object_get(keep, "sessionId"));
		if (json_object_get(keep, "snapshotId"))
			json_object_set(output, "snapshotId", json_object_get(keep, "snapshotId"));
		json_decref(keep);
		return CORE_OK;
	}
	if (st || !view) {
		json_object_del(output, "state");
		return st;
	}
	json_object_set_new(output, "state", view);
	return CORE_OK;
}
