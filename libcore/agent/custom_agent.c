/* custom_agent.c - the --exec protocol: a handler co-process runs each turn. */
#include "custom_agent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "agent_trace.h"
#include "../base/json.h"
#include "../model/registry.h"
#include "session.h"

struct custom_agent {
	char *cmd, *what;
	int64_t timeout_ms;
	struct coproc_limits lim;
	struct coproc *cp;
	struct coproc_cancel cancel;
	int broken;             /* a protocol failure stopped the handler */
	struct core_err broken_err;
	int turns;              /* turns run (the handler was started) */
};

enum core_status custom_agent_new(const char *cmd, int64_t timeout_ms, size_t max_bytes,
                                  size_t max_lines, struct custom_agent **out,
                                  struct core_err *e)
{
	struct custom_agent *ca = calloc(1, sizeof *ca);
	size_t n = strlen(cmd);
	if (!ca || !(ca->cmd = strdup(cmd)) || !(ca->what = malloc(100))) {
		custom_agent_free(ca);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	snprintf(ca->what, 100, "custom agent '%.*s%s'", n > 60 ? 57 : (int)n, cmd,
	         n > 60 ? "..." : "");
	ca->timeout_ms = timeout_ms > 0 ? timeout_ms : CUSTOM_AGENT_DEFAULT_TIMEOUT_MS;
	/* What a turn's lines add up to (history, artifacts, custom state)
	 * lives in agent-run's memory: the budget bounds it. */
	ca->lim.bytes = max_bytes ? max_bytes : CUSTOM_AGENT_DEFAULT_MAX_BYTES;
	ca->lim.lines = max_lines ? max_lines : CUSTOM_AGENT_DEFAULT_MAX_LINES;
	ca->lim.bytes_knob = "AGENTKIT_EXEC_MAX_BYTES";
	ca->lim.lines_knob = "AGENTKIT_EXEC_MAX_LINES";
	*out = ca;
	return CORE_OK;
}

/*
 * In a forked detached worker the handler is the caller's child, not ours
 * (coproc_inherited(): coproc_free() only forgets it).  The worker starts a
 * handler of its own at its first turn.
 */
static void forget_inherited(struct custom_agent *ca)
{
	if (!ca->cp || !coproc_inherited(ca->cp))
		return;
	coproc_free(ca->cp);
	ca->cp = NULL;
}

void custom_agent_free(struct custom_agent *ca)
{
	if (!ca)
		return;
	forget_inherited(ca);
	coproc_free(ca->cp);
	free(ca->cmd);
	free(ca->what);
	free(ca);
}

static int cancelled(struct custom_agent *ca)
{
	return ca->cancel.fn && ca->cancel.fn(ca->cancel.ctx);
}

/* Tell the handler to stop, then stop it. */
static void stop_handler(struct custom_agent *ca, const char *reason)
{
	if (!ca->cp)
		return;
	if (reason) {
		json_t *stop = json_pack("{s:{s:s}}", "stop", "reason", reason);
		struct core_err ignore = { 0 };
		if (stop)
			coproc_write_json(ca->cp, stop, 200, NULL, &ignore);
		json_decref(stop);
	}
	coproc_close(ca->cp, 500);
}

static void outcome_fail(struct ca_outcome *o, enum core_status st, const char *msg)
{
	o->committed = 0;
	o->keep_going = 0;
	core_fail(&o->err, st ? st : CORE_EINTERNAL, "%s", msg);
}

/* A protocol failure: the handler is stopped for good. */
static void broke(struct custom_agent *ca, struct ca_outcome *o, const struct core_err *e)
{
	enum core_status st = e->st;
	if (st == CORE_ECANCELLED) {
		stop_handler(ca, "aborted");
		o->committed = 0;
		core_fail(&o->err, CORE_ABORTED, "%s: aborted", ca->what);
	} else {
		if (st != CORE_EDEADLINE && st != CORE_ENOMEM && st != CORE_ESYS)
			st = CORE_EINTERNAL;
		if (ca->cp)
			coproc_kill(ca->cp);
		outcome_fail(o, st, e->msg);
	}
	ca->broken = 1;
	ca->broken_err = o->err;
	ca->broken_err.sys = e->sys;
}

/* A ModelResponseChunk with its members in Go's order and the defaults
 * filled in (content [], index 0, role model); new reference. */
static json_t *chunk_shaped(const json_t *v)
{
	static const char *const keys[] = { "aggregated", "content", "custom", "index", "role" };
	json_t *c = json_object();
	const char *k;
	json_t *m;
	for (int i = 0; i < 5; i++)
		if ((m = json_object_get(v, keys[i])))
			json_object_set_new(c, keys[i], json_deep_copy(m));
	if (!json_object_get(c, "content"))
		json_object_set_new(c, "content", json_array());
	if (!json_object_get(c, "index"))
		json_object_set_new(c, "index", json_integer(0));
	if (!json_object_get(c, "role"))
		json_object_set_new(c, "role", json_string("model"));
	json_object_foreach((json_t *)v, k, m)
		if (!json_object_get(c, k))
			json_object_set_new(c, k, json_deep_copy(m));
	return c;
}

/* ---- generate requests served by agentkit's models ---- */

struct gen_stream {
	struct custom_agent *ca;
	struct session *s;
	int stream, forward;
	enum core_status st;
	struct core_err err;
};

static enum core_status gen_chunk(void *ctx, const json_t *chunk)
{
	struct gen_stream *g = ctx;
	if (g->forward)
		session_emit(g->s, "modelChunk", chunk_shaped(chunk));
	if (g->stream && !g->st) {
		json_t *line = json_pack("{s:O}", "generateChunk", chunk);
		g->st = line ? coproc_write_json(g->ca->cp, line, g->ca->timeout_ms, &g->ca->cancel, &g->err)
		             : CORE_ENOMEM;
		json_decref(line);
	}
	return g->st;
}

static int gen_cancelled(void *ctx)
{
	struct gen_stream *g = ctx;
	return cancelled(g->ca);
}

/* The default conversation: the agent's system text, then the history. */
static json_t *default_messages(struct session *s)
{
	const struct agent *a = session_agent(s);
	json_t *msgs = json_array();
	if (a->system)
		json_array_append_new(msgs, json_pack("{s:[{s:s}], s:s}", "content", "text", a->system,
		                                      "role", "system"));
	json_array_extend(msgs, session_messages(s));
	return msgs;
}

/*
 * Serve {"generate": req}.  Model failures are answered to the handler (it
 * decides); only a broken pipe to the handler fails here (e filled).
 */
static enum core_status serve_generate(struct custom_agent *ca, struct session *s,
                                       const json_t *req, struct core_err *e)
{
	const struct agent *a = session_agent(s);
	const json_t *v;
	const char *model = json_string_value(json_object_get(req, "model"));
	struct gen_stream g = { ca, s, json_is_true(json_object_get(req, "stream")),
	                        json_is_true(json_object_get(req, "forward")), CORE_OK, { 0 } };
	struct model_request mr = { 0 };
	struct model_stream ms = { gen_chunk, gen_cancelled, &g };
	struct model_response resp = { 0 };
	struct core_err me = { 0 };
	json_t *msgs = NULL, *answer;
	enum core_status st;

	if (!model)
		model = a->model;
	if (!json_is_object(req)) {
		st = core_fail(&me, CORE_EINVAL, "generate: the request must be an object");
	} else if (!model) {
		st = core_fail(&me, CORE_EINVAL, "generate: no model (give \"model\" or --model)");
	} else if ((v = json_object_get(req, "messages")) && !json_is_array(v)) {
		st = core_fail(&me, CORE_EINVAL, "generate: \"messages\" must be an array of messages");
	} else if ((v = json_object_get(req, "tools")) && !json_is_array(v)) {
		st = core_fail(&me, CORE_EINVAL, "generate: \"tools\" must be an array of tool definitions");
	} else if ((v = json_object_get(req, "config")) && !json_is_object(v)) {
		st = core_fail(&me, CORE_EINVAL, "generate: \"config\" must be an object");
	} else {
		v = json_object_get(req, "messages");
		msgs = v ? json_incref((json_t *)v) : default_messages(s);
		mr.messages = msgs;
		mr.tools = json_object_get(req, "tools");
		mr.config = json_object_get(req, "config") ? json_object_get(req, "config") : a->config;
		mr.key_file = a->key_file;
		st = model_generate(model, &mr, &ms, &resp, &me);
		json_decref(msgs);
		if (g.st) {
			model_response_release(&resp);
			*e = g.err;
			return g.st;
		}
	}
	if (st) {
		answer = json_pack("{s:{s:o}}", "generated", "error", jv_error_new(st, me.msg));
	} else {
		answer = json_pack("{s:{s:O, s:s}}", "generated", "message",
		                   resp.message ? resp.message : json_null(), "finishReason", resp.finish_reason);
		if (answer && resp.usage)
			json_object_set(json_object_get(answer, "generated"), "usage", resp.usage);
		if (resp.usage)
			session_add_usage(s, resp.usage);
	}
	model_response_release(&resp);
	if (!answer)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	st = coproc_write_json(ca->cp, answer, ca->timeout_ms, &ca->cancel, e);
	json_decref(answer);
	return st;
}

/* ---- one turn ---- */

static int is_parts(const json_t *v)
{
	size_t i;
	json_t *p;
	if (!json_is_array(v))
		return 0;
	json_array_foreach(v, i, p)
		if (!json_is_object(p))
			return 0;
	return 1;
}

static int is_message(const json_t *m)
{
	const json_t *c = json_object_get(m, "content"), *r = json_object_get(m, "role");
	return json_is_object(m) && (!c || is_parts(c)) && (!r || jv_is_string(r));
}

static enum core_status bad_line(struct custom_agent *ca, const char *why, struct core_err *e)
{
	return core_fail(e, CORE_EINTERNAL, "%s wrote %s (at stdout:%zu)", ca->what, why,
	                 ca->cp->lineno);
}

/*
 * Handle one line of a turn.  *over is set when the turn is over (done or
 * fail).  Errors are protocol failures.
 */
static enum core_status turn_line(struct custom_agent *ca, struct session *s, json_t *line,
                                  struct ca_outcome *o, int *over, struct core_err *e)
{
	if (!json_is_object(line) || json_object_size(line) != 1)
		return bad_line(ca, "a line that is not an object with one member", e);
	void *it = json_object_iter(line);
	const char *key = json_object_iter_key(it);
	json_t *v = json_object_iter_value(it);
	if (!strcmp(key, "modelChunk")) {
		if (!json_is_object(v) || (json_object_get(v, "content") && !is_parts(json_object_get(v, "content"))))
			return bad_line(ca, "a malformed modelChunk", e);
		session_emit(s, "modelChunk", chunk_shaped(v));
	} else if (!strcmp(key, "artifact")) {
		if (!json_is_object(v) || !is_parts(json_object_get(v, "parts")))
			return bad_line(ca, "an artifact without a \"parts\" array", e);
		session_add_artifact(s, v);
	} else if (!strcmp(key, "message")) {
		if (!is_message(v))
			return bad_line(ca, "a malformed message", e);
		session_add_message(s, v);
	} else if (!strcmp(key, "messages")) {
		size_t i;
		json_t *m;
		if (!json_is_array(v))
			return bad_line(ca, "\"messages\" that is not an array", e);
		json_array_foreach(v, i, m)
			if (!is_message(m))
				return bad_line(ca, "a malformed message in \"messages\"", e);
		session_set_messages(s, v);
	} else if (!strcmp(key, "custom") || !strcmp(key, "customPatch")) {
		struct core_err ue = { 0 };
		enum core_status st = session_update_custom(s, v, key[6] == 'P', &ue);
		if (st == CORE_EINVAL || st == CORE_FAILED)
			return core_fail(e, CORE_EINTERNAL, "%s wrote a bad customPatch (at stdout:%zu): %s",
			                 ca->what, ca->cp->lineno, ue.msg);
		if (st) {
			/* The state transform failed closed: the turn fails with its
			 * status (the handler is stopped). */
			*e = ue;
			return st;
		}
	} else if (!strcmp(key, "generate")) {
		return serve_generate(ca, s, v, e);
	} else if (!strcmp(key, "done")) {
		const json_t *r = json_object_get(v, "finishReason");
		if (!json_is_object(v) || (r && !jv_is_string(r)))
			return bad_line(ca, "a malformed done", e);
		o->err.st = CORE_OK;
		o->committed = 1;
		snprintf(o->reason, sizeof o->reason, "%s", r ? json_string_value(r) : "");
		*over = 1;
	} else if (!strcmp(key, "fail")) {
		const json_t *sv = json_object_get(v, "status"), *m = json_object_get(v, "message");
		if (!json_is_object(v) || (sv && !jv_is_string(sv)) || (m && !jv_is_string(m)))
			return bad_line(ca, "a malformed fail", e);
		enum core_status st = sv ? core_status_from_name(json_string_value(sv)) : CORE_EINTERNAL;
		core_fail(&o->err, st == CORE_OK ? CORE_EINTERNAL : st, "%s",
		          m ? json_string_value(m) : "turn failed");
		o->committed = json_is_true(json_object_get(v, "committed"));
		o->keep_going = json_is_true(json_object_get(v, "continue"));
		*over = 1;
	} else {
		return bad_line(ca, "an unknown line", e);
	}
	return CORE_OK;
}

static enum core_status start(struct custom_agent *ca, struct session *s, struct core_err *e)
{
	char sid[300];
	snprintf(sid, sizeof sid, "AGENTKIT_SESSION_ID=%s", session_id(s));
	char tp[AGENT_TRACE_ENV_MAX];
	const char *env[] = { sid, NULL, NULL };
	agent_trace_env_add(env, tp);   /* the invocation's span: the handler outlives turns */
	return coproc_start(ca->cmd, ca->what, env, &ca->lim, &ca->cp, e);
}

void custom_agent_turn(struct custom_agent *ca, struct session *s, const json_t *input,
                       const json_t *docs, struct ca_outcome *o)
{
	struct core_err e = { 0 };
	json_t *turn = NULL, *line = NULL;
	int over = 0;
	memset(o, 0, sizeof *o);
	if (ca->broken) {
		outcome_fail(o, ca->broken_err.st, ca->broken_err.msg);
		return;
	}
	/* The caller's stop (SIGINT, abort) ends the waits. */
	ca->cancel = (struct coproc_cancel){ session_cancelled, s };
	forget_inherited(ca);
	if (!ca->cp && start(ca, s, &e))
		goto broken;
	ca->turns++;
	turn = json_pack("{s:{s:O, s:o, s:O}}", "turn", "input", input, "context", session_context(s),
	                 "state", session_state(s));
	if (!turn) {
		core_fail(&e, CORE_ENOMEM, "out of memory");
		goto broken;
	}
	if (docs)
		json_object_set(json_object_get(turn, "turn"), "docs", (json_t *)docs);
	coproc_budget(ca->cp, "in one turn");
	if (coproc_write_json(ca->cp, turn, ca->timeout_ms, &ca->cancel, &e))
		goto broken;
	while (!over) {
		if (coproc_read_json(ca->cp, ca->timeout_ms, &ca->cancel, &line, &e))
			goto broken;
		enum core_status st = turn_line(ca, s, line, o, &over, &e);
		json_decref(line);
		line = NULL;
		if (st)
			goto broken;
	}
	json_decref(turn);
	return;
broken:
	json_decref(turn);
	broke(ca, o, &e);
}

/* A session edit line (custom, customPatch, message(s), artifact). */
static int after_run_edit(json_t *line)
{
	static const char *const kinds[] = { "custom", "customPatch", "message", "messages", "artifact" };
	for (int i = 0; i < 5; i++)
		if (json_object_get(line, kinds[i]))
			return 1;
	return 0;
}

enum core_status custom_agent_finish(struct custom_agent *ca, int ok_so_far, json_t **result,
                                     struct core_err *e)
{
	*result = NULL;
	forget_inherited(ca);   /* a worker whose handler never started: nothing to end */
	if (!ca->cp)
		return CORE_OK;
	if (!ok_so_far || ca->broken) {
		stop_handler(ca, NULL);
		return CORE_OK;
	}
	/* End of input: close stdin, take an optional result, expect exit 0. */
	struct coproc *c = ca->cp;
	json_t *line = NULL;
	enum core_status st;
	close(c->in_fd);
	c->in_fd = -1;
	coproc_budget(c, "after the last turn");
	for (;;) {
		char *text;
		size_t len;
		struct core_err le = { 0 };
		st = coproc_read_line(c, ca->timeout_ms, &ca->cancel, &text, &len, &le);
		if (st == CORE_EINTERNAL && c->out_eof)
			break;          /* closed its output: see how it exited */
		if (st) {
			*e = le;
			e->st = st == CORE_EDEADLINE || st == CORE_ECANCELLED ? st : CORE_EINTERNAL;
			coproc_kill(c);
			json_decref(*result);
			*result = NULL;
			return e->st;
		}
		struct core_err pe = { 0 };
		line = jv_parse(text, len, "stdout", c->lineno, &pe);
		const json_t *r = json_object_get(line, "result");
		if (json_is_object(line) && json_object_size(line) == 1 && !r && after_run_edit(line)) {
			/* Session edits after the last turn: like a Genkit agent
			 * mutating its session after Run, never snapshotted. */
			json_decref(line);
			continue;
		}
		if (!line || !json_is_object(line) || json_object_size(line) != 1 || !json_is_object(r) || *result) {
			core_fail(e, CORE_EINTERNAL, "%s wrote %s after its last turn (at stdout:%zu)", ca->what,
			          !line ? "malformed output" : *result ? "a second result" : "a line other than {\"result\": {...}}",
			          c->lineno);
			json_decref(line);
			coproc_kill(c);
			json_decref(*result);
			*result = NULL;
			return CORE_EINTERNAL;
		}
		*result = json_incref((json_t *)r);
		json_decref(line);
	}
	if (!coproc_close(c, ca->timeout_ms < 5000 ? ca->timeout_ms : 5000)) {
		struct core_buf how = CORE_BUF_INIT(COPROC_STDERR_MAX + 256);
		coproc_describe(c, &how);
		core_fail(e, CORE_EINTERNAL, "%s %s", ca->what, how.p ? how.p : "failed");
		core_buf_release(&how);
		json_decref(*result);
		*result = NULL;
		return CORE_EINTERNAL;
	}
	return CORE_OK;
}
