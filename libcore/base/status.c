/* status.c - status texts, Genkit status names and the exit-code table. */
#include "status.h"
#include "utf8.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *text;
	const char *name;   /* Genkit canonical status */
	int exit;
} table[CORE_STATUS_MAX] = {
	[CORE_OK]            = { "success", "OK", 0 },
	[CORE_FAILED]        = { "failed", "INTERNAL", 1 },
	[CORE_ABORTED]       = { "aborted", "ABORTED", 2 },
	[CORE_EXPIRED]       = { "expired", "DEADLINE_EXCEEDED", 3 },
	[CORE_ENOTFOUND]     = { "not found", "NOT_FOUND", 4 },
	[CORE_EPRECONDITION] = { "failed precondition", "FAILED_PRECONDITION", 5 },
	[CORE_INTERRUPTED]   = { "interrupted", "OK", 6 },
	[CORE_UNUSABLE]      = { "finished without a usable result", "OK", 7 },
	[CORE_EUSAGE]        = { "usage error", "INVALID_ARGUMENT", 100 },
	[CORE_EINVAL]        = { "malformed input", "INVALID_ARGUMENT", 101 },
	[CORE_ETOOBIG]       = { "input too large", "INVALID_ARGUMENT", 101 },
	[CORE_ESYS]          = { "system failure", "INTERNAL", 111 },
	[CORE_ENOMEM]        = { "out of memory", "RESOURCE_EXHAUSTED", 111 },
	[CORE_ETIMEOUT]      = { "timed out", "DEADLINE_EXCEEDED", 124 },
	/* 141 is what a shell reports for a process killed by SIGPIPE: the
	 * quiet stop a filter makes when its reader goes away. */
	[CORE_EPIPE]         = { "broken pipe", "CANCELLED", 141 },
	[CORE_ECONFLICT]     = { "already exists", "ALREADY_EXISTS", 1 },
	[CORE_EINTERNAL]     = { "internal error", "INTERNAL", 1 },
	[CORE_EUNAVAILABLE]  = { "unavailable", "UNAVAILABLE", 1 },
	[CORE_EPERM]         = { "permission denied", "PERMISSION_DENIED", 1 },
	[CORE_EUNAUTH]       = { "unauthenticated", "UNAUTHENTICATED", 1 },
	[CORE_EEXHAUSTED]    = { "resource exhausted", "RESOURCE_EXHAUSTED", 1 },
	[CORE_ECANCELLED]    = { "cancelled", "CANCELLED", 2 },
	[CORE_EDEADLINE]     = { "deadline exceeded", "DEADLINE_EXCEEDED", 1 },
	/* Genkit names a provider's 400 INVALID_ARGUMENT, but the request was
	 * agentkit's, not the caller's malformed input (DESIGN §8). */
	[CORE_EREJECTED]     = { "rejected by the provider", "INVALID_ARGUMENT", 1 },
	/* Likewise a provider's FAILED_PRECONDITION: exit 5 is for agentkit's
	 * own preconditions (state mode, a pending row, detach's store). */
	[CORE_EUNMET]        = { "a provider's precondition failed", "FAILED_PRECONDITION", 1 },
	/* A key or credential found missing before the first call: nothing
	 * ran, a precondition of the run (5), as Genkit names it.  A key the
	 * provider refuses (HTTP 401) is CORE_EUNAUTH, a model failure. */
	[CORE_ENOKEY]        = { "no credentials", "UNAUTHENTICATED", 5 },
	/* The run's own limit, as max turns is (2), under its own name. */
	[CORE_EBUDGET]       = { "usage budget spent", "RESOURCE_EXHAUSTED", 2 },
};

static int valid(enum core_status st)
{
	return (unsigned)st < CORE_STATUS_MAX && table[st].text;
}

const char *core_strerror(enum core_status st)
{
	return valid(st) ? table[st].text : "unknown status";
}

int core_exit_code(enum core_status st)
{
	return valid(st) ? table[st].exit : 111;
}

const char *core_status_name(enum core_status st)
{
	return valid(st) ? table[st].name : "UNKNOWN";
}

enum core_status core_status_from_name(const char *name)
{
	static const struct { const char *name; enum core_status st; } names[] = {
		{ "OK", CORE_OK },
		{ "CANCELLED", CORE_ECANCELLED },
		{ "INVALID_ARGUMENT", CORE_EINVAL },
		{ "DEADLINE_EXCEEDED", CORE_EDEADLINE },
		{ "NOT_FOUND", CORE_ENOTFOUND },
		{ "ALREADY_EXISTS", CORE_ECONFLICT },
		{ "PERMISSION_DENIED", CORE_EPERM },
		{ "UNAUTHENTICATED", CORE_EUNAUTH },
		{ "RESOURCE_EXHAUSTED", CORE_EEXHAUSTED },
		{ "FAILED_PRECONDITION", CORE_EPRECONDITION },
		{ "ABORTED", CORE_ABORTED },
		{ "UNAVAILABLE", CORE_EUNAVAILABLE },
	};
	if (name)
		for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
			if (!strcmp(name, names[i].name))
				return names[i].st;
	return CORE_EINTERNAL;
}

static enum core_status vfail(struct core_err *e, enum core_status st,
                              const char *fmt, va_list ap)
{
	if (e) {
		e->st = st;
		e->sys = 0;
		vsnprintf(e->msg, sizeof e->msg, fmt, ap);
		utf8_fix_cstr(e->msg, sizeof e->msg);
	}
	return st;
}

enum core_status core_fail(struct core_err *e, enum core_status st,
                           const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(e, st, fmt, ap);
	va_end(ap);
	return st;
}

enum core_status core_fail_sys(struct core_err *e, const char *fmt, ...)
{
	int sys = errno;
	enum core_status st = sys == ENOMEM ? CORE_ENOMEM : CORE_ESYS;
	va_list ap;
	va_start(ap, fmt);
	vfail(e, st, fmt, ap);
	va_end(ap);
	if (e) {
		size_t n = strlen(e->msg);
		snprintf(e->msg + n, sizeof e->msg - n, ": %s", strerror(sys));
		utf8_fix_cstr(e->msg, sizeof e->msg);
		e->sys = sys;
	}
	errno = sys;
	return st;
}

void core_err_prefix(struct core_err *e, const char *fmt, ...)
{
	char head[256], old[sizeof e->msg];
	size_t h, o;
	va_list ap;
	if (!e)
		return;
	va_start(ap, fmt);
	vsnprintf(head, sizeof head, fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof old);
	h = strlen(head);
	o = strnlen(old, sizeof old - 1);
	/* head + ": " + old, truncated to the buffer. */
	memcpy(e->msg, head, h);
	memcpy(e->msg + h, ": ", 2);
	if (o > sizeof e->msg - h - 3)
		o = sizeof e->msg - h - 3;
	memcpy(e->msg + h + 2, old, o);
	e->msg[h + 2 + o] = 0;
	utf8_fix_cstr(e->msg, sizeof e->msg);
}

enum core_status core_finish_status(const char *reason)
{
	if (!reason || !*reason || !strcmp(reason, "stop") || !strcmp(reason, "other") ||
	    !strcmp(reason, "unknown"))
		return CORE_OK;
	if (!strcmp(reason, "interrupted"))
		return CORE_INTERRUPTED;
	if (!strcmp(reason, "aborted"))
		return CORE_ABORTED;
	if (!strcmp(reason, "failed"))
		return CORE_FAILED;
	return CORE_UNUSABLE;
}

const char *core_outcome_row(enum core_status st, const char *reason)
{
	if (reason && !strcmp(reason, "aborted"))
		return "aborted";
	if (st != CORE_OK || (reason && !strcmp(reason, "failed")))
		return "failed";
	return "completed";
}

enum core_status core_outcome_exit(enum core_status st, const char *reason)
{
	if (st == CORE_OK)
		return core_finish_status(reason);
	if (reason && !strcmp(reason, "aborted"))
		return CORE_ABORTED;
	switch (st) {
	case CORE_EUSAGE:
		/* a bad setting met once the work began: as its output's
		 * INVALID_ARGUMENT says, malformed input */
		return CORE_EINVAL;
	case CORE_EINVAL: case CORE_ETOOBIG: case CORE_ENOTFOUND:
	case CORE_EPRECONDITION: case CORE_ENOKEY: case CORE_ESYS: case CORE_ENOMEM:
		return st;
	default:
		return CORE_FAILED;
	}
}
