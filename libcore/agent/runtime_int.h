/*
 * runtime_int.h - what the runner's files share (runtime.h is the
 * interface): the invocation, a turn's result, and the steps one file
 * runs for another.
 *
 *   runtime.c         the invocation: open, a turn, its commit, the output
 *   runtime_init.c    init and input validation, loading the session (§4)
 *   runtime_loop.c    the prompt-backed turn: render, generate, tools (§3.4)
 *   runtime_resume.c  resuming interrupted tool requests (§3.7)
 *   runtime_tools.c   the agent's tools loaded, and tool requests run, for
 *                     both of those
 *
 * Each stands only on those listed below it (runtime.c on all of them).
 *
 * The live session (state, identity, chunks, customPatch) is the
 * session's (session.h); the runner owns it.  Failures are a
 * struct core_err, in the turn's result or returned.
 */
#ifndef CORE_RUNTIME_INT_H
#define CORE_RUNTIME_INT_H

#include <stddef.h>

#include "../model/model.h"
#include "runtime.h"
#include "session.h"

struct tool;
struct tool_call;
struct delegate_run;

struct runtime {
	const struct agent *agent;
	struct store *store;
	int64_t hb_timeout_ms;
	enum rt_busy on_busy;
	int64_t busy_timeout_ms;
	const char *claimed_id;         /* rt_config's */
	char *locked_session;   /* the session whose writer lock this holds */
	int64_t last_created_ns; /* createdAt of the row the next one follows */
	int detached;           /* rt_detach(): no rows, no chunks, last_good kept */
	struct agent_ext *ext;  /* custom agent, transforms, grounding, or NULL */
	struct session *s;      /* the live session */
	json_t *last_good;      /* client-managed: state at the last commit (or the initial one) */
	char last_reason[32];

	struct tool **tools;    /* the agent's tools */
	size_t ntools;
	json_t *tool_defs;      /* their definitions, for the model */
	struct delegate_run *delegate; /* the sub-agents' (delegate.h), or NULL */

	/* The generate call in flight. */
	long msg_index;         /* ModelResponseChunk index within the generate call */
	json_t *minted_refs;    /* refs given to the model call's streamed ref-less
	                           tool requests, in order, or NULL */

	/* The invocation's end. */
	int ended;
	char end_reason[32];    /* failed or aborted */
	json_t *error;          /* {status, message} */
	enum core_status sys_st; /* CORE_ESYS/CORE_ENOMEM: a system failure ended it */
	enum core_status end_st; /* the status of the error that ended it */
	json_t *resumed_title;  /* the resumed row's title, while its history
	                           is deferred (session_defer_history()) */
	long resumed_models;    /* the "model" messages of that deferred part
	                           (the row's "modelMessages"), -1 unknown */
	char *turn_text;        /* the user text of the turn in flight, cut to
	                           RT_INPUT_MAX, until it commits; NULL for none */
};

/* How much of an uncommitted turn's user text a row records (rt_row_info). */
#define RT_INPUT_MAX 4096

/* How a turn ended: err.st is CORE_OK or the failure's status, err.msg
 * its message. */
struct turn_result {
	int committed;
	char reason[32];
	struct core_err err;
};

/* Whether a's model reads no more of the history than its end (the echo
 * and script models), so that a resumed one may stay in the store. */
int rt_model_reads_end(const struct agent *a);
/* Whether the model's request is written from a resumed history's stored
 * text (model_takes_history()), which may then stay unread: the model's
 * provider takes it, and nothing else of the run reads the messages (no
 * sub-agents, which get the conversation; no trace of content, which
 * records the request). */
int rt_history_as_text(const struct runtime *rt);
/* A deferred history's messages as the store keeps them (struct
 * model_history's each(); ctx: the runtime). */
enum core_status rt_history_texts(void *ctx, model_history_fn fn, void *arg,
                                  struct core_err *e);
/* How many of msgs have the role "model". */
long rt_count_models(const json_t *msgs);

/* End the invocation with reason (failed, aborted) and this error. */
void rt_end(struct runtime *rt, const char *reason, enum core_status st, const char *msg);

/* ---- runtime_init.c ---- */

/* Check the AgentInit's shape (§4.1): CORE_EINVAL with Genkit's message. */
enum core_status rt_init_check(const json_t *init, struct core_err *e);
/* Load the session a checked AgentInit names (§4.2). */
enum core_status rt_load(struct runtime *rt, const json_t *init, struct core_err *e);

/* ---- runtime_loop.c ---- */

/* A prompt-backed turn (the input's message already in the history). */
void rt_agent_turn(struct runtime *rt, const json_t *input, struct turn_result *r);

/* ---- runtime_tools.c ---- */

/* Load the agent's tools into rt->tools, their definitions into
 * rt->tool_defs. */
enum core_status rt_load_tools(struct runtime *rt, struct core_err *e);
/* Before a model call: the tool source's refresh (tools.h); when the
 * agent's tools changed, they are loaded again. */
enum core_status rt_refresh_tools(struct runtime *rt, struct core_err *e);
/* Whether the caller stopped the invocation (ctx: the runtime), for the
 * model stream and the tools. */
int rt_stopped(void *ctx);
/* The role of a message ("" when it has none). */
const char *rt_role_of(const json_t *m);
/* Set or remove a member of a part's metadata (an emptied one goes). */
void rt_set_meta(json_t *part, const char *key, json_t *value /* consumed */);
void rt_del_meta(json_t *part, const char *key);
/* The toolResponse part answering request req with call c's result. */
json_t *rt_tool_response_part(const json_t *req, const struct tool_call *c);
/* Fail r with call c's failure of tool name (INTERNAL). */
void rt_tool_failed(struct turn_result *r, const char *name, const struct tool_call *c);
/*
 * Run the tool requests (parts idx[0..n) of model message m) in parallel;
 * resumed[i] (may be NULL) is the restart metadata of a resumed call.
 * Results land in calls[]; a call whose input fails its tool's schema is
 * not run, its output the error the model is given ({"error": "invalid
 * arguments for tool 'x': ..."}).  Non-zero with r filled (and calls[]
 * released) when a tool is missing, its schema is unusable, or the calls
 * could not be run.
 */
int rt_run_calls(struct runtime *rt, json_t *m, const size_t *idx,
                 const json_t *const *resumed, struct tool_call *calls, size_t n,
                 struct turn_result *r);
/* Emit the tool message's content as a modelChunk (the next index). */
void rt_emit_tool_message(struct runtime *rt, const json_t *content);
/* Emit the interrupted requests ints as the tool-role chunk (index 0). */
void rt_emit_interrupts(struct runtime *rt, const json_t *ints);

/* ---- runtime_resume.c ---- */

/* The generate call of one prompt-backed turn. */
struct gen {
	struct runtime *rt;
	json_t *msgs;           /* rendered messages + generated ones, tagged */
	size_t rounds;          /* completed tool rounds */
	int committable;        /* a partial response exists (a round or a resume ran) */
	size_t models_before;   /* model messages of the history that msgs
	                           leaves out (struct model_request) */
	size_t history_at;      /* where the history's first message is in
	                           msgs (a stored part goes before it) */
};

/* ValidateResumeAgainstHistory (§3.7): every respond/restart entry names a
 * tool request of the last model message.  CORE_EINVAL with Genkit's
 * message. */
enum core_status rt_validate_resume(const json_t *resume, const json_t *history,
                                    struct core_err *e);

/*
 * Resume the pending model message (the last of g->msgs) with the input's
 * respond/restart parts (validated).  0: go on to the model; 1: the turn
 * is over (r filled: interrupted again, or a failure).
 */
int rt_apply_resume(struct gen *g, const json_t *resume, struct turn_result *r);

#endif
