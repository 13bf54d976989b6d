/*
 * runtime_resume.c - resuming a turn's interrupted tool requests
 * (runtime-semantics §3.7): the input's respond and restart entries
 * checked against the history (ValidateResumeAgainstHistory), then
 * applied to the pending model message.
 */
#include "runtime_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/json.h"
#include "tools.h"

/* ---- resume validation (§3.7, ValidateResumeAgainstHistory) ---- */

/* Does the tool request or response body name this call (a missing name or
 * ref counts as "")? */
static int names_call(const json_t *body, const char *name, const char *ref)
{
	const char *n = json_string_value(json_object_get(body, "name"));
	const char *r = json_string_value(json_object_get(body, "ref"));
	return body && !strcmp(n ? n : "", name) && !strcmp(r ? r : "", ref);
}

/* The entry of resume.field (whose body is under key) naming this call. */
static const json_t *resume_entry(const json_t *resume, const char *field, const char *key,
                                  const char *name, const char *ref)
{
	size_t j;
	json_t *p;
	json_array_foreach(json_object_get(resume, field), j, p)
		if (names_call(json_object_get(p, key), name, ref))
			return p;
	return NULL;
}

static int find_in(const json_t *history, long idx, const char *name, const char *ref,
                   const json_t **found)
{
	const json_t *m = json_array_get(history, (size_t)idx);
	if (strcmp(rt_role_of(m), "model"))
		return 0;
	const json_t *content = json_object_get(m, "content");
	for (size_t i = json_array_size(content); i-- > 0;) {
		const json_t *tr = json_object_get(json_array_get(content, i), "toolRequest");
		if (names_call(tr, name, ref)) {
			if (found)
				*found = tr;
			return 1;
		}
	}
	return 0;
}

static enum core_status unresolved(const json_t *history, long pending, const char *field,
                                   const char *name, const char *ref, struct core_err *e)
{
	char refs[300] = "";
	if (*ref)
		snprintf(refs, sizeof refs, " (ref: %s)", ref);
	for (long i = pending - 1; i >= 0; i--)
		if (find_in(history, i, name, ref, NULL))
			return core_fail(e, CORE_EINVAL,
			                 "resume.%s references tool \"%s\"%s from an earlier turn which is no longer pending; only tool requests from the most recent model response can be resumed",
			                 field, name, refs);
	return core_fail(e, CORE_EINVAL,
	                 "resume.%s references tool \"%s\"%s which was not found in session history",
	                 field, name, refs);
}

enum core_status rt_validate_resume(const json_t *resume, const json_t *history,
                                    struct core_err *e)
{
	long pending = -1;
	for (size_t i = json_array_size(history); i-- > 0;)
		if (!strcmp(rt_role_of(json_array_get(history, i)), "model")) {
			pending = (long)i;
			break;
		}
	static const char *const fields[] = { "restart", "respond" };
	for (int f = 0; f < 2; f++) {
		size_t i;
		json_t *p;
		json_array_foreach(json_object_get(resume, fields[f]), i, p) {
			const json_t *body = json_object_get(p, f == 0 ? "toolRequest" : "toolResponse");
			if (!json_is_object(body))
				continue;
			const char *name = json_string_value(json_object_get(body, "name"));
			const char *ref = json_string_value(json_object_get(body, "ref"));
			const json_t *orig = NULL;
			name = name ? name : "";
			ref = ref ? ref : "";
			if (pending < 0 || !find_in(history, pending, name, ref, &orig))
				return unresolved(history, pending < 0 ? 0 : pending, fields[f], name, ref, e);
			if (f == 0) {
				const json_t *a = json_object_get(body, "input"), *b = json_object_get(orig, "input");
				if (!jv_equal(a ? a : json_null(), b ? b : json_null())) {
					char refs[300] = "";
					if (*ref)
						snprintf(refs, sizeof refs, " (ref: %s)", ref);
					return core_fail(e, CORE_EINVAL,
					                 "resume.restart for tool \"%s\"%s has modified inputs that do not match the original tool request in session history; restart inputs must exactly match the interrupted tool request",
					                 name, refs);
				}
			}
		}
	}
	return CORE_OK;
}


/* ---- applying a resume ---- */

/* What a resume does to the parts of the pending model message. */
struct resume_work {
	json_t *content;        /* the parts (of the history message's copy) */
	size_t np;
	json_t **resp;          /* [np]: the toolResponse part answering part i, or NULL */
	size_t *ridx;           /* the parts whose request is restarted, in order */
	const json_t **rmeta;   /* their "resumed" metadata */
	const json_t *meta;     /* the input's resume.metadata (borrowed), or NULL */
	struct tool_call *calls; /* their calls */
	size_t nreq, nrestart;
};

static int work_init(struct resume_work *w, json_t *content, struct turn_result *r)
{
	w->content = content;
	w->np = json_array_size(content);
	w->resp = calloc(w->np + 1, sizeof *w->resp);
	w->ridx = calloc(w->np + 1, sizeof *w->ridx);
	w->rmeta = calloc(w->np + 1, sizeof *w->rmeta);
	w->calls = calloc(w->np + 1, sizeof *w->calls);
	if (w->resp && w->ridx && w->rmeta && w->calls)
		return 0;
	core_fail(&r->err, CORE_ENOMEM, "out of memory");
	return 1;
}

static void work_release(struct resume_work *w)
{
	for (size_t k = 0; w->calls && k < w->nrestart; k++)
		tool_call_release(&w->calls[k]);
	for (size_t i = 0; w->resp && i < w->np; i++)
		json_decref(w->resp[i]);
	free(w->resp);
	free(w->ridx);
	free(w->rmeta);
	free(w->calls);
}

/* The request's interrupt is resolved: remembered as resolvedInterrupt. */
static void resolve_interrupt(json_t *part, json_t *intr)
{
	if (intr)
		rt_set_meta(part, "resolvedInterrupt", json_incref(intr));
	rt_del_meta(part, "interrupt");
}

/*
 * Tool request part i: answered by a respond entry, restarted by a restart
 * entry, or answered by the output it had when the round was interrupted.
 * Non-zero with r filled when none of these handles it.
 */
static int resolve_part(struct resume_work *w, const json_t *resume, size_t i,
                        struct turn_result *r)
{
	json_t *part = json_array_get(w->content, i);
	json_t *tr = json_object_get(part, "toolRequest");
	const char *name = json_string_value(json_object_get(tr, "name"));
	const char *ref = json_string_value(json_object_get(tr, "ref"));
	name = name ? name : "";
	ref = ref ? ref : "";
	json_t *md = json_object_get(part, "metadata");
	json_t *intr = json_object_get(md, "interrupt");
	const json_t *hit = resume_entry(resume, "respond", "toolResponse", name, ref);
	if (hit) {
		json_t *rp = json_deep_copy(hit);
		if (!json_object_get(json_object_get(rp, "metadata"), "interruptResponse"))
			rt_set_meta(rp, "interruptResponse", json_true());
		w->resp[i] = rp;
		resolve_interrupt(part, intr);
		rt_del_meta(part, "pendingOutput");
		return 0;
	}
	if ((hit = resume_entry(resume, "restart", "toolRequest", name, ref))) {
		const json_t *res = json_object_get(json_object_get(hit, "metadata"), "resumed");
		/* the entry's own resume data, else the input's resume.metadata */
		w->rmeta[w->nrestart] = res ? res : w->meta ? w->meta : json_true();
		w->ridx[w->nrestart++] = i;
		resolve_interrupt(part, intr);
		return 0;
	}
	json_t *pend = json_object_get(md, "pendingOutput");
	if (pend) {
		json_t *trp = json_pack("{s:O}", "name", json_object_get(tr, "name"));
		if (json_object_get(tr, "ref"))
			json_object_set(trp, "ref", json_object_get(tr, "ref"));
		json_object_set(trp, "output", pend);
		w->resp[i] = json_pack("{s:o, s:{s:s}}", "toolResponse", trp, "metadata", "source", "pending");
		rt_del_meta(part, "pendingOutput");
		return 0;
	}
	core_fail(&r->err, CORE_EINVAL,
	          "generate: unresolved tool request \"%s\" was not handled by the resume argument; supply a respond or restart entry for every interrupted tool request",
	          name);
	return 1;
}

/* A restarted call interrupted again: what is resolved is kept as pending
 * output for the next resume, the new interrupts are marked and streamed,
 * and the turn ends interrupted. */
static void interrupted_again(struct runtime *rt, struct resume_work *w, struct turn_result *r)
{
	json_t *ints = json_array();
	for (size_t i = 0; i < w->np; i++)
		if (w->resp[i])
			rt_set_meta(json_array_get(w->content, i), "pendingOutput",
			            json_incref(json_object_get(json_object_get(w->resp[i], "toolResponse"),
			                                        "output")));
	for (size_t k = 0; k < w->nrestart; k++)
		if (w->calls[k].interrupt) {
			json_t *part = json_array_get(w->content, w->ridx[k]);
			rt_del_meta(part, "resolvedInterrupt");
			rt_set_meta(part, "interrupt", json_incref(w->calls[k].interrupt));
			json_array_append(ints, part);
		}
	rt_emit_interrupts(rt, ints);
	json_decref(ints);
	r->err.st = CORE_OK;
	snprintf(r->reason, sizeof r->reason, "interrupted");
	r->committed = 1;
}

/*
 * Run the restarted requests again (a restart must match the original
 * input exactly, so the original request runs), the tools seeing their
 * resume data.  0 when every one answered; 1 when the turn is over (a
 * failure, or interrupted again).
 */
static int run_restarts(struct gen *g, json_t *m, struct resume_work *w, struct turn_result *r)
{
	int interrupted = 0;
	for (size_t k = 0; k < w->nrestart; k++)
		rt_set_meta(json_array_get(w->content, w->ridx[k]), "resumed",
		            json_incref((json_t *)w->rmeta[k]));
	if (rt_run_calls(g->rt, m, w->ridx, w->rmeta, w->calls, w->nrestart, r))
		return 1;
	for (size_t k = 0; k < w->nrestart; k++) {
		json_t *part = json_array_get(w->content, w->ridx[k]);
		const json_t *tr = json_object_get(part, "toolRequest");
		rt_del_meta(part, "resumed");
		if (w->calls[k].st) {
			rt_tool_failed(r, json_string_value(json_object_get(tr, "name")), &w->calls[k]);
			g->committable = 1;
			return 1;
		}
		if (w->calls[k].interrupt)
			interrupted = 1;
		else
			w->resp[w->ridx[k]] = rt_tool_response_part(tr, &w->calls[k]);
	}
	if (interrupted)
		interrupted_again(g->rt, w, r);
	return interrupted;
}

/* The answers, in the order of their requests, as the resumed tool
 * message (streamed, then appended to the conversation). */
static void append_answers(struct gen *g, struct resume_work *w)
{
	json_t *tcontent = json_array();
	for (size_t i = 0; i < w->np; i++)
		if (w->resp[i]) {
			json_array_append_new(tcontent, w->resp[i]);
			w->resp[i] = NULL;
		}
	/* "resumed": the input's resume.metadata, else true (as Genkit's) */
	json_t *tmsg = json_pack("{s:O, s:{s:O}, s:s}", "content", tcontent, "metadata", "resumed",
	                         w->meta ? w->meta : json_true(), "role", "tool");
	rt_emit_tool_message(g->rt, tcontent);
	json_decref(tcontent);
	json_array_append_new(g->msgs, tmsg);
	g->committable = 1;
}

int rt_apply_resume(struct gen *g, const json_t *resume, struct turn_result *r)
{
	size_t n = json_array_size(g->msgs);
	json_t *m = n ? json_array_get(g->msgs, n - 1) : NULL;
	struct resume_work w = { 0 };
	int over = 1;
	if (!m || strcmp(rt_role_of(m), "model")) {
		core_fail(&r->err, CORE_EINVAL,
		          "generate: cannot resume: the conversation does not end with a model message requesting tools");
		return 1;
	}
	/* Work on a copy: the history message changes (resolved interrupts). */
	m = json_deep_copy(m);
	json_array_set_new(g->msgs, n - 1, m);
	if (work_init(&w, json_object_get(m, "content"), r))
		goto out;
	if (json_is_object(json_object_get(resume, "metadata")))
		w.meta = json_object_get(resume, "metadata");
	for (size_t i = 0; i < w.np; i++) {
		if (!json_object_get(json_array_get(w.content, i), "toolRequest"))
			continue;
		w.nreq++;
		if (resolve_part(&w, resume, i, r))
			goto out;
	}
	if (!w.nreq) {
		core_fail(&r->err, CORE_EINVAL,
		          "generate: cannot resume: the last model message has no tool requests");
		goto out;
	}
	if (w.nrestart && run_restarts(g, m, &w, r))
		goto out;
	append_answers(g, &w);
	over = 0;
out:
	work_release(&w);
	return over;
}
