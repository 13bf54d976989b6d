/*
 * status.h - the one status type of agentkit.
 *
 * Every function in libcore/ and store/ that can fail returns an
 * enum core_status and, where the caller passes one, fills a struct core_err
 * with a formatted detail message.  Only cmd/ turns a status into a message
 * on stderr and an exit code (core_exit_code()).
 *
 * Values are append-only: never renumber, never reuse.  A retired value stays
 * with a NOT USED comment.
 */
#ifndef CORE_STATUS_H
#define CORE_STATUS_H

#include <stddef.h>

enum core_status {
	CORE_OK = 0,
	CORE_FAILED,        /* a run or snapshot ended failed; a test op failed;
	                       documents differ (jpatch-diff --exit-code) */
	CORE_ABORTED,       /* caller stop, agent-abort, max turns */
	CORE_EXPIRED,       /* worker presumed dead (heartbeat stale) */
	CORE_ENOTFOUND,     /* snapshot, session, agent, tool */
	CORE_EPRECONDITION, /* wrong state mode, resume of a pending row, ... */
	CORE_INTERRUPTED,   /* turn paused on a tool interrupt */
	CORE_UNUSABLE,      /* finished without a usable result (length, blocked) */
	CORE_EUSAGE,        /* bad flags or arguments */
	CORE_EINVAL,        /* malformed input: bad JSON, bad patch, bad record */
	CORE_ETOOBIG,       /* input over a configured limit (malformed input) */
	CORE_ESYS,          /* system failure; errno kept in core_err.sys */
	CORE_ENOMEM,        /* out of memory */
	CORE_ETIMEOUT,      /* agent-wait --timeout ran out */
	CORE_EPIPE,         /* the reader of stdout went away: a quiet stop */
	CORE_ECONFLICT,     /* ALREADY_EXISTS: a write lost a race it must not win */
	CORE_EINTERNAL,     /* INTERNAL: a failure inside a model, tool or handler */
	CORE_EUNAVAILABLE,  /* UNAVAILABLE: a provider or peer could not be reached */
	CORE_EPERM,         /* PERMISSION_DENIED */
	CORE_EUNAUTH,       /* UNAUTHENTICATED */
	CORE_EEXHAUSTED,    /* RESOURCE_EXHAUSTED: rate limits, quotas, a full store */
	CORE_ECANCELLED,    /* CANCELLED: the work's context ended */
	CORE_EDEADLINE,     /* DEADLINE_EXCEEDED: a tool or model took too long */
	CORE_EREJECTED,     /* INVALID_ARGUMENT from a provider: it refused a request
	                       agentkit built (HTTP 400); a model failure, exit 1 */
	CORE_EUNMET,        /* FAILED_PRECONDITION from a provider (Gemini's "location
	                       not supported"): its condition, not agentkit's; exit 1 */
	CORE_ENOKEY,        /* UNAUTHENTICATED found before any call: the model's key
	                       or credential is not there (exit 5, a precondition) */
	CORE_EBUDGET,       /* RESOURCE_EXHAUSTED: the run's usage budget is spent
	                       (maxUsage, --max-tokens-total); ends it aborted, exit 2 */
	CORE_STATUS_MAX
};

/*
 * A failure's detail.  Zero-initialise it (struct core_err e = {0};) and pass
 * it down; the function that fails first fills it, callers above may prefix
 * context with core_err_prefix().
 */
struct core_err {
	enum core_status st;
	int sys;            /* errno for CORE_ESYS, else 0 */
	char msg[1024];     /* "what failed: why"; truncated past its size */
};

/* A short text for a status ("not found"); static storage. */
const char *core_strerror(enum core_status st);

/* The exit code of agentkit's table (DESIGN.md "Exit codes").  The only
 * function that knows the numbers. */
int core_exit_code(enum core_status st);

/* Genkit's canonical status name ("NOT_FOUND", "INVALID_ARGUMENT", ...) for
 * errors written into JSON; and back (unknown names give CORE_EINTERNAL). */
const char *core_status_name(enum core_status st);
enum core_status core_status_from_name(const char *name);

/*
 * How a turn that ended without an error ended, by its finish reason (the
 * one mapping agent-run's and agent-wait's exit codes share): stop, other,
 * unknown or none → CORE_OK; interrupted → CORE_INTERRUPTED; aborted →
 * CORE_ABORTED; failed → CORE_FAILED; any other (length, blocked, ...) →
 * CORE_UNUSABLE.
 */
enum core_status core_finish_status(const char *reason);

/*
 * A run's outcome, the one mapping its faces come from (DESIGN §9 "One
 * outcome"), attached, detached or queued alike: st is CORE_OK or the
 * status of the failure that ended the work, reason its finish reason.
 *
 * core_outcome_row(): the row's status: "aborted" for the reason
 * aborted, "failed" for a failure (or the reason failed), else
 * "completed" (an interrupted turn too, as Genkit has it).
 *
 * core_outcome_exit(): the status whose exit code the command exits
 * with: core_finish_status(reason) without a failure; CORE_ABORTED for
 * the reason aborted; the failure's own status when it is the caller's
 * or the system's (malformed input, not found, a precondition, missing
 * credentials, a system failure or no memory: the invocation could not go
 * on; a usage error
 * met once the work began is malformed input);
 * CORE_FAILED for every other failure (a tool, a model, a provider's
 * rejection, a handler: the work failed).
 */
const char *core_outcome_row(enum core_status st, const char *reason);
enum core_status core_outcome_exit(enum core_status st, const char *reason);

/* Fill e (may be NULL) and return st.  The message is printf-formatted. */
enum core_status core_fail(struct core_err *e, enum core_status st,
                           const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Like core_fail with CORE_ESYS (or CORE_ENOMEM for ENOMEM), appending
 * ": strerror(errno)" and keeping errno in e->sys. */
enum core_status core_fail_sys(struct core_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Put "fmt: " in front of e->msg (context added on the way up). */
void core_err_prefix(struct core_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
