/*
 * answer.h - a person's answers to the tool requests a turn paused on
 * (docs/agent-run.md, "Answering an interrupt"): agent-run's --approve,
 * --deny and --respond, and the terminal's approval prompt, made into
 * the {"resume": ...} AgentInput that resumes the turn.
 *
 * The answers are matched against the interrupted requests of the
 * session's last model message (what rt_last_message() gives); the
 * resume is then validated by the runtime as any other (§3.7).
 *
 *   approve  {"resume":{"restart":[{"toolRequest": the request as it was,
 *            "metadata":{"resumed":{"approved":true}}}]}}: the tool runs
 *            again and reads "resumed" on its stdin
 *   deny     {"resume":{"respond":[{"toolResponse":{"name","ref","output":
 *            {"error":"denied by the user[: REASON]"}}}]}}: the tool does
 *            not run; the model reads the refusal
 *   respond  the same respond with the given output (any JSON value)
 *
 * Nothing here prints or exits.  Values are borrowed; what is returned is
 * a new reference.
 */
#ifndef CORE_ANSWER_H
#define CORE_ANSWER_H

#include <stddef.h>

#include <jansson.h>

#include "../base/status.h"

enum answer_kind { ANSWER_APPROVE, ANSWER_DENY, ANSWER_RESPOND };

struct answer {
	enum answer_kind kind;
	const char *ref;        /* the request's ref, or its tool's name when one
	                           interrupted request has that name */
	const char *reason;     /* deny: why, or NULL */
	const json_t *output;   /* respond: the tool's output */
	const char *flag;       /* for messages: "--approve", ... */
};

/* The toolRequest parts of message whose metadata marks them
 * interrupted, in order (a new array of borrowed-then-shared parts; an
 * empty one when there are none or message is NULL; NULL without
 * memory). */
json_t *answer_pending(const json_t *message);

/*
 * The resume input answering the interrupted requests of message, one
 * answer each, in *input.  Errors: CORE_EPRECONDITION "session 'S' has no
 * interrupted tool request to answer (...)" (sid names it; why: its latest
 * turn did not end interrupted, or it has no turn), CORE_EINVAL when an
 * answer names no interrupted request ("--approve 'x': no interrupted
 * tool request has ref or name 'x' (interrupted: deploy (ref d1))"), a
 * name several requests have, or a request answered twice; CORE_ENOMEM.
 */
enum core_status answer_resume(const json_t *message, const char *sid,
                               const struct answer *a, size_t n, json_t **input,
                               struct core_err *e);

/* "NAME (ref REF), ..." for the requests of answer_pending(), into buf of
 * size bytes (cut when longer). */
void answer_describe(const json_t *pending, char *buf, size_t size);

#endif
