/* mcp.c - MCP servers as a tool source (mcp.h): the protocol spoken to
 * one server, the set of servers, and the calls; the transport that
 * carries the messages is mcp_transport.h's (stdio: mcp_stdio.c);
 * mcp_config.c reads the configuration and names the tools. */
#include "mcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_trace.h"
#include "mcp_transport.h"
#include "../base/buf.h"
#include "../base/json.h"
#include "../base/trace.h"
#include "../base/util.h"

/* tools/list pages followed before the server is called broken. */
#define MAX_PAGES 1000
/* Writing notifications/cancelled after a call ended: a server that reads
 * its stdin has room for it at once; one that does not is killed then
 * (post()), so the note adds at most this to a call that timed out or a
 * stop. */
#define NOTE_TIMEOUT_MS 100
/* How long past its deadline a request may still take an answer the
 * server wrote in time, while the client waited on another server. */
#define LATE_MS 100
/* The slice of a wait on one server while others have requests waiting. */
#define SHARE_MS 20

static const char *const accepted[] = { "2025-11-25", "2025-06-18", "2025-03-26", NULL };

static const char *str_or(const json_t *v, const char *dflt)
{
	const char *s = json_string_value(v);
	return s ? s : dflt;
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

/* ---- one server ---- */

/* A request sent, waiting for its answer (rpc_begin(), rpc_end()): on its
 * server's list until it is done.  Several wait at once, each with its
 * own deadline and stop; the answers come in any order. */
struct pending {
	struct pending *next;
	const char *method;     /* static */
	json_int_t id;
	int64_t deadline, bound_ms;
	struct mcp_cancel cancel;
	int done;
	enum core_status st;
	struct core_err err;
	json_t *result;         /* the answer's, until rpc_end() */
};

struct mcp_server {
	const struct mcp_server_config *cfg;
	struct mcp_transport *t;        /* NULL: not started (in this process) */
	json_int_t next_id;
	struct pending *waiting;        /* the requests sent and not answered */
	struct pending one, init;       /* rpc()'s; initialize's (handshake_begin()) */
	int64_t hs_deadline;            /* the handshake's */
	char version[32];               /* the protocol version it answered */
	int64_t start_ns, ready_ns;     /* its start-up, for its span (mcp_set_trace()) */
	int begun;                      /* mcp_set_begin() started it */
	int broken;             /* exited or broke the protocol: why */
	struct core_err why;
	int list_changed;       /* notifications/tools/list_changed since the last list */
	int too_long;           /* broken by a message over maxResultBytes */
	int offer;              /* OFFER_*: which of its tools the agent is given */
	struct mcp_set *set;
	json_t *sel;            /* OFFER_LISTED: the MCP names selected */
};

enum { OFFER_NONE, OFFER_ALL, OFFER_LISTED };

/* The calls find their tool by name at each call (see call()): a refresh
 * moves the array. */
struct mcp_tool {
	struct mcp_server *srv;
	char name[MCP_TOOL_NAME_MAX + 1];
	json_t *def;            /* the server's Tool object */
};

struct mcp_set {
	struct mcp_server **servers;
	size_t nservers;
	struct mcp_tool *tools;
	size_t ntools;
	struct tool_source source;
	mcp_stderr_fn *sink;
	void *sink_ctx;
	mcp_elicit_fn *elicit;          /* mcp_set_elicit(), or NULL */
	void *elicit_ctx;
	struct mcp_cancel cancel;       /* mcp_set_cancel(): start-up, re-lists */
};

static int64_t left_ms(int64_t deadline)
{
	int64_t left = deadline - core_now_mono_ms();
	return left > 0 ? left : 0;
}

/* Opened before a fork (a detached worker's caller): the parent's. */
static int inherited(const struct mcp_transport *t)
{
	return t->pid != getpid();
}

/* Fail with msg and the server's stderr tail; broken: every later call
 * fails so. */
static enum core_status server_fail(struct mcp_server *s, int broken, enum core_status st,
                                    const char *msg, struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	core_buf_adds(&b, msg);
	s->t->ops->tail(s->t, msg, &b);
	core_fail(e, st, "%s", b.p ? b.p : msg);
	core_buf_release(&b);
	if (broken && !s->broken) {
		s->broken = 1;
		s->why = *e;
	}
	return st;
}

/*
 * Send msg within timeout_ms (cancel may be NULL).  A send that fails
 * leaves the stream cut inside a message, or the server not reading its
 * input: it is broken and killed at once (waiting on it longer could
 * only block the run).  method names the request in messages, as rpc()
 * does; bound_ms (> 0) is the bound of that request, named when the
 * server stopped reading: "did not answer tools/call within 1500 ms: it
 * stopped reading its input".
 */
static enum core_status post(struct mcp_server *s, json_t *msg /* consumed */,
                             const char *method, int64_t timeout_ms, int64_t bound_ms,
                             const struct mcp_cancel *cancel, struct core_err *e)
{
	struct core_err we = { 0 };
	char msgbuf[1400];
	enum core_status st = msg ? s->t->ops->send(s->t, msg, timeout_ms, cancel, &we)
	                          : core_fail(&we, CORE_ENOMEM, "out of memory");
	json_decref(msg);
	if (!st)
		return CORE_OK;
	if (st == CORE_ENOMEM)
		return core_fail(e, st, "out of memory");
	if (st == CORE_EDEADLINE && bound_ms > 0)
		snprintf(msgbuf, sizeof msgbuf, "mcp server '%s' did not answer %s within %lld ms: "
		         "it stopped reading its input", s->cfg->name, method, (long long)bound_ms);
	else if (st == CORE_ECANCELLED)
		snprintf(msgbuf, sizeof msgbuf, "mcp server '%s': %s cancelled", s->cfg->name,
		         method);
	else
		snprintf(msgbuf, sizeof msgbuf, "%s (during %s)", we.msg, method);
	server_fail(s, 1, st, msgbuf, e);
	s->t->ops->kill(s->t);
	return st;
}

/*
 * The working directory as a root: a file:// URI (RFC 3986: each byte
 * but the unreserved ones and '/' percent-encoded) in *uri and its last
 * segment in *name (new strings).  A working directory that cannot be
 * read is no root: CORE_ESYS.
 */
static enum core_status cwd_root(char **uri, char **name)
{
	char *dir = getcwd(NULL, 0);
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	*uri = *name = NULL;
	if (!dir)
		return CORE_ESYS;
	core_buf_adds(&b, "file://");
	for (const unsigned char *p = (const unsigned char *)dir; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~/", *p))
			core_buf_addc(&b, (char)*p);
		else
			core_buf_addf(&b, "%%%02X", *p);
	}
	const char *last = strrchr(dir, '/');
	*name = strdup(last && last[1] ? last + 1 : "/");
	free(dir);
	if (!b.p || !*name) {
		free(*name);
		*name = NULL;
		core_buf_release(&b);
		return CORE_ENOMEM;
	}
	*uri = b.p;
	return CORE_OK;
}

/*
 * A message of the server's own, read while request method waits: a
 * request is answered within the
 * call's time left (the server's request is part of the call): ping with
 * {}, roots/list with the working directory, elicitation/create with the
 * person's answer (mcp_set_elicit()), or a decline when there is nobody
 * to ask, anything else -32601;
 * notifications/tools/list_changed is noted, other notifications dropped.
 */
static enum core_status from_server(struct mcp_server *s, const json_t *msg,
                                    const char *method, int64_t left_ms, int64_t bound_ms,
                                    const struct mcp_cancel *cancel, struct core_err *e)
{
	const char *asked = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");
	if (!id) {
		if (asked && !strcmp(asked, "notifications/tools/list_changed"))
			s->list_changed = 1;
		return CORE_OK;
	}
	if (!asked || !strcmp(asked, "ping"))
		return post(s, json_pack("{s:s, s:O, s:{}}", "jsonrpc", "2.0", "id", id, "result"),
		            method, left_ms, bound_ms, cancel, e);
	if (!strcmp(asked, "roots/list")) {
		json_t *roots = json_array();
		char *uri = NULL, *name = NULL;
		if (roots && !cwd_root(&uri, &name))
			json_array_append_new(roots, json_pack("{s:s, s:s}", "uri", uri, "name", name));
		free(uri);
		free(name);
		return post(s, json_pack("{s:s, s:O, s:{s:o}}", "jsonrpc", "2.0", "id", id, "result",
		                         "roots", roots), method, left_ms, bound_ms, cancel, e);
	}
	if (!strcmp(asked, "elicitation/create")) {
		json_t *answer = NULL;
		if (!s->set->elicit ||
		    s->set->elicit(s->set->elicit_ctx, s->cfg->name, json_object_get(msg, "params"),
		                   core_now_mono_ms() + left_ms, &answer) || !answer) {
			json_decref(answer);
			answer = json_pack("{s:s}", "action", "decline");
		}
		return post(s, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result",
		                         answer), method, left_ms, bound_ms, cancel, e);
	}
	return post(s, json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error",
	                         "code", -32601, "message", "Method not found"),
	            method, left_ms, bound_ms, cancel, e);
}

/* The first 80 bytes of a (valid UTF-8) line, cut at a character. */
static void line_head(const char *line, size_t len, struct core_buf *b)
{
	size_t i = 0;
	for (; i < len && (i < 80 || ((unsigned char)line[i] & 0xC0) == 0x80); i++)
		core_buf_addc(b, (unsigned char)line[i] < ' ' ? '?' : line[i]);
	if (i < len)
		core_buf_adds(b, "...");
}

/* After a call ended without its answer: tell the server, within a
 * moment (a server that does not read its input is killed by post()). */
static void cancel_request(struct mcp_server *s, const char *method, json_int_t id,
                           const char *reason)
{
	struct core_err ignore = { 0 };
	if (!strcmp(method, "initialize") || s->broken)
		return;
	post(s, json_pack("{s:s, s:s, s:{s:I, s:s}}", "jsonrpc", "2.0", "method",
	                  "notifications/cancelled", "params", "requestId", id, "reason", reason),
	     method, NOTE_TIMEOUT_MS, 0, NULL, &ignore);
}

/* p's outcome: off its server's list of requests waiting. */
static void settle(struct mcp_server *s, struct pending *p, enum core_status st,
                   const struct core_err *e)
{
	for (struct pending **q = &s->waiting; *q; q = &(*q)->next)
		if (*q == p) {
			*q = p->next;
			break;
		}
	p->done = 1;
	p->st = st;
	if (st)
		p->err = *e;
}

/* The server broke (exited, a line too long or not JSON-RPC, a send cut):
 * every request still waiting fails, each named as it would alone:
 * "MSG (during METHOD)" when during, else MSG. */
static void fail_waiting(struct mcp_server *s, enum core_status st, const char *msg, int during)
{
	char msgbuf[1400];
	while (s->waiting) {
		struct pending *p = s->waiting;
		struct core_err e = { 0 };
		if (during)
			snprintf(msgbuf, sizeof msgbuf, "%s (during %s)", msg, p->method);
		server_fail(s, 1, st, during ? msgbuf : msg, &e);
		settle(s, p, st, &e);
	}
}

/* p's time is up (CORE_EDEADLINE) or its caller stopped (CORE_ECANCELLED):
 * the server is told, the request fails. */
static void expire(struct mcp_server *s, struct pending *p, enum core_status st)
{
	struct core_err e = { 0 };
	char msgbuf[1400];
	settle(s, p, CORE_OK, NULL);
	cancel_request(s, p->method, p->id, st == CORE_EDEADLINE ? "timeout" : "cancelled");
	if (st == CORE_ECANCELLED) {
		core_fail(&e, st, "mcp server '%s': %s cancelled", s->cfg->name, p->method);
	} else {
		snprintf(msgbuf, sizeof msgbuf, "mcp server '%s' did not answer %s within %lld ms",
		         s->cfg->name, p->method, (long long)p->bound_ms);
		server_fail(s, 0, st, msgbuf, &e);
	}
	p->st = st;
	p->err = e;
	if (s->broken)          /* the note could not be written: killed */
		fail_waiting(s, s->why.st, s->why.msg, 0);
}

static int stopped(const struct pending *p)
{
	return p->cancel.fn && p->cancel.fn(p->cancel.ctx);
}

/*
 * Expire what waits past its deadline or is stopped.  A request past its
 * deadline gets one more look at what the server wrote meanwhile (its
 * answer may have come while the client waited on another server), up to
 * LATE_MS: *wait is 1 ms then, else the time to the nearest deadline.
 */
static void expire_due(struct mcp_server *s, int64_t *wait, int *overdue)
{
	int64_t now = core_now_mono_ms();
	*wait = INT64_MAX;
	*overdue = 0;
	for (struct pending *p = s->waiting, *next; p; p = next) {
		next = p->next;
		if (stopped(p))
			expire(s, p, CORE_ECANCELLED);
		else if (p->deadline + LATE_MS <= now)
			expire(s, p, CORE_EDEADLINE);
		else if (p->deadline <= now)
			*overdue = 1;
		else if (p->deadline - now < *wait)
			*wait = p->deadline - now;
		if (s->broken)
			return;         /* everything failed: next was settled too */
	}
	if (*overdue)
		*wait = 1;
}

/* A message that is not JSON-RPC: the server is broken. */
static void not_jsonrpc(struct mcp_server *s, const char *line, size_t len)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	/* stdio's words for stdio; an HTTP server's message is one body or event */
	int lines = s->cfg->transport == &mcp_transport_stdio;
	core_buf_addf(&b, lines ? "mcp server '%s' wrote a line that is not a JSON-RPC message "
	              "on stdout: '" : "mcp server '%s' sent a message that is not JSON-RPC: '",
	              s->cfg->name);
	line_head(line, len, &b);
	core_buf_adds(&b, lines ? "' (an MCP server may write only JSON-RPC there; logs go "
	              "to stderr)" : "'");
	fail_waiting(s, CORE_EINTERNAL, b.p ? b.p : "", 0);
	core_buf_release(&b);
}

/* Nothing more can be received (st: exited, a line too long, ...). */
static void receive_failed(struct mcp_server *s, enum core_status st, const char *msg)
{
	if (st == CORE_ETOOBIG && !s->broken)
		s->too_long = 1;
	fail_waiting(s, st == CORE_ETOOBIG ? CORE_ETOOBIG : CORE_EINTERNAL, msg, 1);
}

/* The answer msg (consumed) to the request p: its result object, or its
 * JSON-RPC error. */
static void take_answer(struct mcp_server *s, struct pending *p, json_t *msg)
{
	const json_t *err = json_object_get(msg, "error");
	struct core_err e = { 0 };
	char msgbuf[1400];
	if (err) {
		const char *m = json_string_value(json_object_get(err, "message"));
		snprintf(msgbuf, sizeof msgbuf, "mcp server '%s': %s failed: %s (code %lld)",
		         s->cfg->name, p->method, m ? m : "no message",
		         (long long)json_integer_value(json_object_get(err, "code")));
		json_decref(msg);
		settle(s, p, server_fail(s, 0, CORE_EINTERNAL, msgbuf, &e), &e);
		return;
	}
	p->result = json_incref(json_object_get(msg, "result"));
	json_decref(msg);
	if (json_is_object(p->result)) {
		settle(s, p, CORE_OK, NULL);
		return;
	}
	json_decref(p->result);
	p->result = NULL;
	snprintf(msgbuf, sizeof msgbuf, "mcp server '%s' answered %s without a result object",
	         s->cfg->name, p->method);
	settle(s, p, server_fail(s, 0, CORE_EINTERNAL, msgbuf, &e), &e);
}

/* The message msg (consumed) while p waits: the server's own request or
 * notification, an answer to one of the requests waiting (in any order),
 * or a late answer to one that ended (dropped). */
static void dispatch(struct mcp_server *s, struct pending *p, json_t *msg)
{
	const json_t *rid = json_object_get(msg, "id");
	struct core_err e = { 0 };
	if (json_object_get(msg, "method")) {
		if (from_server(s, msg, p->method, left_ms(p->deadline), p->bound_ms, &p->cancel, &e)) {
			/* p's words; the others fail as the server broke */
			settle(s, p, e.st, &e);
			if (s->broken)
				fail_waiting(s, s->why.st, s->why.msg, 0);
		}
		json_decref(msg);
		return;
	}
	for (struct pending *q = s->waiting; json_is_integer(rid) && q; q = q->next)
		if (json_integer_value(rid) == q->id) {
			take_answer(s, q, msg);
			return;
		}
	json_decref(msg);
}

/*
 * Read one message of the server's while p (on s->waiting) waits, at
 * most cap_ms, or expire what is due.  The deadlines and the stop hold
 * however fast the server writes: messages already read ahead do not
 * wait.
 */
static void pump(struct mcp_server *s, struct pending *p, int64_t cap_ms)
{
	struct core_err re = { 0 }, pe = { 0 };
	const char *line;
	size_t len;
	int64_t wait;
	int overdue;
	expire_due(s, &wait, &overdue);
	if (p->done)
		return;
	if (wait > cap_ms)
		wait = cap_ms;
	enum core_status st = s->t->ops->receive(s->t, wait, &p->cancel, &line, &len, &re);
	if (st == CORE_EDEADLINE && wait == cap_ms && !overdue)
		return;         /* only the cap: nothing was due */
	if (st == CORE_EDEADLINE || st == CORE_ECANCELLED) {
		int64_t now = core_now_mono_ms();
		for (struct pending *q = s->waiting, *next; q && !s->broken; q = next) {
			next = q->next;
			if (st == CORE_ECANCELLED ? stopped(q) : q->deadline <= now)
				expire(s, q, st);
		}
		return;
	}
	if (st == CORE_ENOMEM) {
		settle(s, p, core_fail(&re, st, "out of memory"), &re);
		return;
	}
	if (st) {
		receive_failed(s, st, re.msg);
		return;
	}
	json_t *msg = jv_parse(line, len, "stdout", 0, &pe);
	if (json_is_object(msg) && !strcmp(str_or(json_object_get(msg, "jsonrpc"), ""), "2.0")) {
		dispatch(s, p, msg);
		return;
	}
	json_decref(msg);
	not_jsonrpc(s, line, len);
}

/*
 * Send a request without waiting for its answer: p (the caller's, zeroed
 * here) waits on the server's list until rpc_end().  A request that
 * cannot be sent fails at once (p done).
 */
static enum core_status rpc_begin(struct mcp_server *s, const char *method, json_t *params,
                                  int64_t timeout_ms, const struct mcp_cancel *cancel,
                                  struct pending *p, struct core_err *e)
{
	enum core_status st;
	memset(p, 0, sizeof *p);
	p->method = method;
	p->id = ++s->next_id;
	p->deadline = core_now_mono_ms() + timeout_ms;
	p->bound_ms = timeout_ms;
	if (cancel)
		p->cancel = *cancel;
	p->done = 1;
	if (s->broken) {
		json_decref(params);
		*e = s->why;
		return p->st = e->st;
	}
	json_t *req = json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id", p->id, "method",
	                        method, "params", params ? params : json_object());
	if ((st = post(s, req, method, timeout_ms, timeout_ms, cancel, e))) {
		if (s->broken)
			fail_waiting(s, s->why.st, s->why.msg, 0);
		p->err = *e;
		return p->st = st;
	}
	p->done = 0;
	p->next = s->waiting;
	s->waiting = p;
	return CORE_OK;
}

/* The other servers of s's set with requests waiting, each given a look
 * (what it wrote is taken, its transfers move): 1 if there is one. */
static int pump_others(struct mcp_server *s)
{
	int others = 0;
	for (size_t k = 0; k < s->set->nservers; k++) {
		struct mcp_server *o = s->set->servers[k];
		if (o == s || !o->waiting || !o->t || inherited(o->t))
			continue;
		others = 1;
		pump(o, o->waiting, 1);
	}
	return others;
}

/* Wait for p's answer (rpc_begin() sent it), answering the server's own
 * requests meanwhile and taking the answers of the others waiting as they
 * come; *result is the result (new reference).  While other servers have
 * requests waiting too (a round's calls, start-ups), the wait on s is cut
 * in slices of SHARE_MS, each other server looked at between them: their
 * answers are taken, their deadlines held, and an HTTP server's
 * transfers move, as they would if the client waited on it alone. */
static enum core_status rpc_end(struct mcp_server *s, struct pending *p, json_t **result,
                                struct core_err *e)
{
	while (!p->done)
		pump(s, p, pump_others(s) ? SHARE_MS : INT64_MAX);
	*result = p->result;
	p->result = NULL;
	if (p->st)
		*e = p->err;
	return p->st;
}

/* One request (one at a time: the server's own pending): send it, read
 * until its answer. */
static enum core_status rpc(struct mcp_server *s, const char *method, json_t *params,
                            int64_t timeout_ms, const struct mcp_cancel *cancel,
                            json_t **result, struct core_err *e)
{
	*result = NULL;
	if (rpc_begin(s, method, params, timeout_ms, cancel, &s->one, e))
		return s->one.st;
	return rpc_end(s, &s->one, result, e);
}

static int listed(char *const *names, const char *name)
{
	for (char *const *p = names; p && *p; p++)
		if (!strcmp(*p, name))
			return 1;
	return 0;
}

/* A server that failed to start is of no use: UNAVAILABLE (a timeout
 * stays DEADLINE_EXCEEDED, a stop CANCELLED), and broken for good.  One
 * whose start-up was cancelled is killed at once: the run is stopping,
 * and a server that has not answered initialize need not be asked to
 * end (mcp_set_free() would wait its grace twice on a silent one). */
static enum core_status unavailable(struct mcp_server *s, struct core_err *e)
{
	if (e->st != CORE_EDEADLINE && e->st != CORE_ENOMEM && e->st != CORE_ESYS &&
	    e->st != CORE_ECANCELLED)
		e->st = CORE_EUNAVAILABLE;
	s->broken = 1;
	s->why = *e;
	if (e->st == CORE_ECANCELLED && s->t && !inherited(s->t))
		s->t->ops->kill(s->t);
	return e->st;
}

static enum core_status list_tools(struct mcp_server *s, int64_t deadline,
                                   const struct mcp_cancel *cancel, json_t *tools,
                                   struct core_err *e);

/* Start a handshake: initialize sent (s->init), within startupTimeout
 * from now.  Errors as unavailable(). */
static enum core_status handshake_begin(struct mcp_server *s, const struct mcp_cancel *cancel,
                                        struct core_err *e)
{
	const struct mcp_server_config *c = s->cfg;
	s->hs_deadline = core_now_mono_ms() + c->startup_timeout_ms;
	json_t *params = json_pack("{s:s, s:{s:{}}, s:{s:s, s:s}}", "protocolVersion",
	                           MCP_PROTOCOL_VERSION, "capabilities", "roots", "clientInfo",
	                           "name", "agentkit", "version", AGENTKIT_VERSION);
	/* form elicitation, when a person can be asked */
	if (params && s->set->elicit)
		json_object_set_new(json_object_get(params, "capabilities"), "elicitation",
		                    json_pack("{s:{}}", "form"));
	if (rpc_begin(s, "initialize", params, c->startup_timeout_ms, cancel, &s->init, e))
		return unavailable(s, e);
	return CORE_OK;
}

/* The rest of it: initialize's answer, initialized, tools/list: the tool
 * objects into *tools; cancel (may be NULL) stops it, CORE_ECANCELLED. */
static enum core_status handshake_end(struct mcp_server *s, const struct mcp_cancel *cancel,
                                      json_t *tools, struct core_err *e)
{
	const struct mcp_server_config *c = s->cfg;
	int64_t deadline = s->hs_deadline;
	char msgbuf[1400];
	json_t *res;

	if (rpc_end(s, &s->init, &res, e))
		return unavailable(s, e);
	const char *v = json_string_value(json_object_get(res, "protocolVersion"));
	int ok = 0;
	for (int i = 0; v && accepted[i]; i++)
		ok |= !strcmp(v, accepted[i]);
	if (!ok) {
		snprintf(msgbuf, sizeof msgbuf, "mcp server '%s' answered protocol version '%s'; "
		         "agentkit speaks 2025-11-25, 2025-06-18 and 2025-03-26", c->name,
		         v ? v : "(none)");
		json_decref(res);
		return server_fail(s, 1, CORE_EUNAVAILABLE, msgbuf, e);
	}
	snprintf(s->version, sizeof s->version, "%s", v);
	json_decref(res);
	if (post(s, json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method",
	                      "notifications/initialized"), "initialize", left_ms(deadline),
	         c->startup_timeout_ms, cancel, e))
		return unavailable(s, e);
	return list_tools(s, deadline, cancel, tools, e);
}

static enum core_status handshake(struct mcp_server *s, const struct mcp_cancel *cancel,
                                  json_t *tools, struct core_err *e)
{
	enum core_status st = handshake_begin(s, cancel, e);
	return st ? st : handshake_end(s, cancel, tools, e);
}

/* tools/list, every page, the tools kept (include, exclude, tasks) into
 * *tools; the server's list_changed flag is cleared by a complete list. */
static enum core_status list_tools(struct mcp_server *s, int64_t deadline,
                                   const struct mcp_cancel *cancel, json_t *tools,
                                   struct core_err *e)
{
	const struct mcp_server_config *c = s->cfg;
	char msgbuf[1400];
	json_t *res, *params;
	enum core_status st;
	char *cursor = NULL;
	for (int page = 0;; page++) {
		if (page == MAX_PAGES) {
			free(cursor);
			snprintf(msgbuf, sizeof msgbuf, "mcp server '%s' gave more than %d pages of "
			         "tools", c->name, MAX_PAGES);
			return server_fail(s, 1, CORE_EINTERNAL, msgbuf, e);
		}
		params = cursor ? json_pack("{s:s}", "cursor", cursor) : json_object();
		free(cursor);
		cursor = NULL;
		if ((st = rpc(s, "tools/list", params, left_ms(deadline), cancel, &res, e)))
			return unavailable(s, e);
		const json_t *list = json_object_get(res, "tools"), *t;
		size_t i;
		if (!json_is_array(list)) {
			json_decref(res);
			snprintf(msgbuf, sizeof msgbuf, "mcp server '%s' answered tools/list without a "
			         "\"tools\" list", c->name);
			return server_fail(s, 1, CORE_EINTERNAL, msgbuf, e);
		}
		json_array_foreach(list, i, t) {
			const char *task = json_string_value(json_object_get(
				json_object_get(t, "execution"), "taskSupport"));
			if (!jv_is_string(json_object_get(t, "name")) ||
			    !json_is_object(json_object_get(t, "inputSchema"))) {
				json_decref(res);
				snprintf(msgbuf, sizeof msgbuf, "mcp server '%s' listed a tool without a "
				         "name or an inputSchema object", c->name);
				return server_fail(s, 1, CORE_EINTERNAL, msgbuf, e);
			}
			if (task && !strcmp(task, "required"))
				continue;       /* needs MCP tasks, which agentkit does not speak */
			if ((c->include && !listed(c->include, json_string_value(json_object_get(t, "name")))) ||
			    listed(c->exclude, json_string_value(json_object_get(t, "name"))))
				continue;
			json_array_append(tools, (json_t *)t);
		}
		const char *next = json_string_value(json_object_get(res, "nextCursor"));
		if (next && *next && !(cursor = strdup(next))) {
			json_decref(res);
			return core_fail(e, CORE_ENOMEM, "out of memory");
		}
		json_decref(res);
		if (!cursor) {
			s->list_changed = 0;
			return CORE_OK;
		}
	}
}

struct mcp_set *mcp_set_new(void)
{
	return calloc(1, sizeof(struct mcp_set));
}

void mcp_set_stderr(struct mcp_set *s, mcp_stderr_fn *fn, void *ctx)
{
	s->sink = fn;
	s->sink_ctx = ctx;
}

void mcp_set_elicit(struct mcp_set *s, mcp_elicit_fn *fn, void *ctx)
{
	s->elicit = fn;
	s->elicit_ctx = ctx;
}

void mcp_set_cancel(struct mcp_set *s, int (*cancelled)(void *ctx), void *ctx)
{
	s->cancel = (struct mcp_cancel){ cancelled, ctx };
}

/* Start srv (srv->t) over the transport its entry names. */
static enum core_status spawn_server(struct mcp_server *srv, struct core_err *e)
{
	return srv->cfg->transport->open(srv->cfg, srv->set->sink, srv->set->sink_ctx,
	                                 &srv->t, e);
}

static void trace_start_up(struct mcp_server *s);

/*
 * In a process forked after the server started (a detached worker) the
 * server is the parent's, and its pipes were closed with every other
 * inherited descriptor: start this process's own, once, at its first
 * call.  The tools stay those the parent listed.
 */
static enum core_status own_server(struct mcp_server *s, const struct mcp_cancel *cancel,
                                   struct core_err *e)
{
	enum core_status st;
	json_t *tools;
	if (!inherited(s->t))
		return CORE_OK;
	s->t->ops->close(s->t, 0);      /* the memory only: the server is the parent's */
	s->t = NULL;
	s->broken = 0;
	s->list_changed = 0;
	s->too_long = 0;
	s->version[0] = 0;
	s->start_ns = core_now_ns();
	s->ready_ns = 0;
	if (!(st = spawn_server(s, e))) {
		if (!(tools = json_array()))
			return core_fail(e, CORE_ENOMEM, "out of memory");
		st = handshake(s, cancel, tools, e);
		json_decref(tools);
	}
	s->ready_ns = core_now_ns();
	if (st && !s->broken) {
		s->broken = 1;
		s->why = *e;
	}
	trace_start_up(s);
	return st;
}

/* Add srv's tools (the Tool objects of its list) to the set, named for
 * the model; a name another server's tool has is CORE_EUSAGE naming both
 * (none of the list is added then). */
static enum core_status add_tools(struct mcp_set *s, struct mcp_server *srv,
                                  const json_t *tools, struct core_err *e)
{
	const struct mcp_server_config *c = srv->cfg;
	size_t first = s->ntools, i;
	json_t *t;
	struct mcp_tool *more = realloc(s->tools, (s->ntools + json_array_size(tools) + 1) *
	                                sizeof *s->tools);
	if (!more)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	s->tools = more;
	json_array_foreach(tools, i, t) {
		struct mcp_tool *mt = &s->tools[s->ntools];
		const char *tn = json_string_value(json_object_get(t, "name"));
		mcp_tool_name(c->prefix, tn, mt->name);
		for (size_t j = 0; j < s->ntools; j++) {
			if (strcmp(s->tools[j].name, mt->name))
				continue;
			core_fail(e, CORE_EUSAGE, "mcp tool '%s' of server '%s' and tool '%s' of server "
			          "'%s' are both named '%s' for the model",
			          json_string_value(json_object_get(s->tools[j].def, "name")),
			          s->tools[j].srv->cfg->name, tn, c->name, mt->name);
			for (size_t k = first; k < s->ntools; k++)
				json_decref(s->tools[k].def);
			s->ntools = first;
			return CORE_EUSAGE;
		}
		mt->srv = srv;
		mt->def = json_incref(t);
		s->ntools++;
	}
	return CORE_OK;
}

enum core_status mcp_set_begin(struct mcp_set *s, const struct mcp_server_config *c,
                               struct core_err *e)
{
	struct mcp_server *srv = calloc(1, sizeof *srv);
	struct mcp_server **grown = realloc(s->servers, (s->nservers + 1) * sizeof *s->servers);
	enum core_status st;
	if (grown)
		s->servers = grown;
	if (!srv || !grown) {
		free(srv);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	srv->cfg = c;
	srv->set = s;
	srv->offer = OFFER_ALL;
	srv->start_ns = core_now_ns();
	/* A server that cannot be started stays in the set too, broken: an
	 * optional one's selections are not errors (mcp_set_select()). */
	s->servers[s->nservers++] = srv;
	if (s->cancel.fn && s->cancel.fn(s->cancel.ctx)) {
		/* Stopped before its turn came: not started at all. */
		core_fail(e, CORE_ECANCELLED, "mcp server '%s': start-up cancelled", c->name);
		srv->broken = 1;
		srv->why = *e;
		return CORE_ECANCELLED;
	}
	if ((st = spawn_server(srv, e))) {
		srv->broken = 1;
		srv->why = *e;
		return st;
	}
	srv->begun = 1;
	return handshake_begin(srv, &s->cancel, e);
}

enum core_status mcp_set_finish(struct mcp_set *s, const struct mcp_server_config *c,
                                struct core_err *e)
{
	struct mcp_server *srv = NULL;
	enum core_status st;
	json_t *tools;
	for (size_t i = s->nservers; !srv && i-- > 0;)
		if (s->servers[i]->cfg == c)
			srv = s->servers[i];
	if (!srv)
		return core_fail(e, CORE_ENOMEM, "out of memory");     /* its begin had none */
	if (!srv->begun || srv->broken) {
		srv->ready_ns = srv->ready_ns ? srv->ready_ns : core_now_ns();
		*e = srv->why;
		return e->st;
	}
	srv->begun = 0;
	if (!(tools = json_array()))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	if (!(st = handshake_end(srv, &s->cancel, tools, e)))
		st = add_tools(s, srv, tools, e);
	json_decref(tools);
	srv->ready_ns = core_now_ns();
	return st;
}

enum core_status mcp_set_start(struct mcp_set *s, const struct mcp_server_config *c,
                               struct core_err *e)
{
	enum core_status st = mcp_set_begin(s, c, e);
	return st == CORE_ENOMEM || st == CORE_ECANCELLED ? st : mcp_set_finish(s, c, e);
}

size_t mcp_set_count(const struct mcp_set *s)
{
	return s->ntools;
}

const char *mcp_set_name(const struct mcp_set *s, size_t i)
{
	return s->tools[i].name;
}

json_t *mcp_set_row(const struct mcp_set *s, size_t i)
{
	const struct mcp_tool *t = &s->tools[i];
	const json_t *d = json_object_get(t->def, "description");
	const json_t *a = json_object_get(t->def, "annotations");
	return json_pack("{s:s, s:s, s:O, s:O, s:O, s:O}", "server", t->srv->cfg->name,
	                 "name", t->name, "mcpName", json_object_get(t->def, "name"),
	                 "description", d ? d : json_null(),
	                 "inputSchema", json_object_get(t->def, "inputSchema"),
	                 "annotations", a ? a : json_null());
}

/* ---- calls ---- */

/* A media part for a base64 block of type mime. */
static enum core_status media_part(json_t *parts, const char *mime, const char *data)
{
	struct core_buf url = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	core_buf_addf(&url, "data:%s;base64,%s", mime ? mime : "application/octet-stream",
	              data ? data : "");
	json_t *p = json_pack("{s:{s:s, s:s}}", "media", "contentType",
	                      mime ? mime : "application/octet-stream", "url", url.p ? url.p : "");
	core_buf_release(&url);
	return p && !json_array_append_new(parts, p) ? CORE_OK : CORE_ENOMEM;
}

static enum core_status map_result(const json_t *res, json_t **output, json_t *parts)
{
	struct core_buf text = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	const json_t *content = json_object_get(res, "content"), *b;
	const json_t *structured = json_object_get(res, "structuredContent");
	int has_text = 0, after_link = 0;
	size_t i;
	core_buf_adds(&text, "");
	json_array_foreach(content, i, b) {
		const char *type = str_or(json_object_get(b, "type"), "");
		const char *mime = json_string_value(json_object_get(b, "mimeType"));
		/* Text blocks join as they are (a JSON text may come in pieces);
		 * a resource link is a line of its own. */
		if (after_link && (!strcmp(type, "text") || !strcmp(type, "resource")))
			core_buf_addc(&text, '\n');
		after_link = !strcmp(type, "resource_link");
		if (!strcmp(type, "text")) {
			core_buf_adds(&text, str_or(json_object_get(b, "text"), ""));
			has_text = 1;
		} else if (!strcmp(type, "image") || !strcmp(type, "audio")) {
			if (media_part(parts, mime, json_string_value(json_object_get(b, "data"))))
				goto nomem;
		} else if (!strcmp(type, "resource_link")) {
			const char *name = json_string_value(json_object_get(b, "title"));
			if (!name)
				name = json_string_value(json_object_get(b, "name"));
			core_buf_addf(&text, "%sResource Link: %s at %s", has_text ? "\n" : "",
			              name ? name : "?",
			              str_or(json_object_get(b, "uri"), "?"));
			has_text = 1;
		} else if (!strcmp(type, "resource")) {
			const json_t *r = json_object_get(b, "resource");
			const char *t = json_string_value(json_object_get(r, "text"));
			if (t) {
				core_buf_adds(&text, t);
				has_text = 1;
			} else if (media_part(parts, json_string_value(json_object_get(r, "mimeType")),
			                      json_string_value(json_object_get(r, "blob")))) {
				goto nomem;
			}
		}
	}
	if (json_is_true(json_object_get(res, "isError"))) {
		*output = json_pack("{s:s}", "error", text.p);
	} else if (structured && !json_is_null(structured)) {
		*output = json_incref((json_t *)structured);
	} else if (has_text) {
		struct core_err pe = { 0 };
		*output = jv_parse(text.p, text.len, "text", 0, &pe);
		if (!*output)
			*output = json_string(text.p);
	} else {
		*output = json_null();
	}
	core_buf_release(&text);
	return *output ? CORE_OK : CORE_ENOMEM;
nomem:
	core_buf_release(&text);
	return CORE_ENOMEM;
}

/* A call started (call_start()), for call_finish(). */
struct mcp_call {
	struct pending p;
	struct mcp_server *srv;
};

static enum core_status call_start(const struct tool *t, const json_t *input,
                                   const struct tool_context *ctx, int (*cancelled)(void *),
                                   void *cctx, void **pending, struct core_err *e)
{
	struct mcp_set *set = t->impl;
	struct mcp_tool *mt = NULL;
	struct mcp_call *mc;
	enum core_status st;
	*pending = NULL;
	for (size_t i = 0; !mt && i < set->ntools; i++)
		if (!strcmp(set->tools[i].name, t->name))
			mt = &set->tools[i];
	if (!mt)
		return core_fail(e, CORE_EUNAVAILABLE, "%s no longer offers tool '%s'", t->manifest,
		                 t->name);
	struct mcp_server *s = mt->srv;
	struct mcp_cancel cancel = { cancelled, cctx };
	/* A worker's own start is part of its first call: its stop ends it. */
	if (s->t && (st = own_server(s, &cancel, e)))
		return st;
	if (!s->t)
		return core_fail(e, CORE_EUNAVAILABLE, "mcp server '%s' could not be started in "
		                 "this process", s->cfg->name);
	json_t *meta = json_pack("{s:I, s:s, s:s, s:s, s:I}", "progressToken", s->next_id + 1,
	                         "dev.agentkit/sessionId", or_empty(ctx->session_id),
	                         "dev.agentkit/snapshotId", or_empty(ctx->snapshot_id),
	                         "dev.agentkit/parentSnapshotId", or_empty(ctx->parent_snapshot_id),
	                         "dev.agentkit/turnIndex", (json_int_t)ctx->turn_index);
	/* The W3C context, in the key MCP reserves for it (2026-07-28). */
	if (meta && ctx->traceparent) {
		json_object_set_new(meta, "traceparent", json_string(ctx->traceparent));
		if (trace_tracestate())
			json_object_set_new(meta, "tracestate", json_string(trace_tracestate()));
	}
	json_t *params = json_pack("{s:O, s:o, s:o}", "name", json_object_get(mt->def, "name"),
	                           "arguments", json_is_object(input) ?
	                           json_incref((json_t *)input) : json_object(),
	                           "_meta", meta);
	if (!params || !(mc = calloc(1, sizeof *mc))) {
		json_decref(params);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	mc->srv = s;
	/* A call that cannot be sent is finished with its failure. */
	rpc_begin(s, "tools/call", params, s->cfg->call_timeout_ms, &cancel, &mc->p, e);
	*pending = mc;
	return CORE_OK;
}

static enum core_status call_finish(const struct tool *t, void *pending, json_t **output,
                                    json_t **interrupt, json_t *parts,
                                    const struct tool_events *ev, struct core_err *e)
{
	struct mcp_call *mc = pending;
	struct mcp_server *s = mc->srv;
	json_t *res = NULL;
	enum core_status st = rpc_end(s, &mc->p, &res, e);
	free(mc);
	*output = NULL;
	(void)t;
	(void)ev;
	(void)interrupt;
	if (st == CORE_ETOOBIG && s->too_long) {
		/* One rule for size: a result up to maxResultBytes goes to the
		 * model whole, a longer one is a tool error the model sees (the
		 * turn goes on); the server's stream is cut then, so its later
		 * calls are such errors too. */
		char msg[600];
		snprintf(msg, sizeof msg, "mcp server '%s' answered with more than %zu bytes "
		         "(its maxResultBytes); it cannot be called again in this run",
		         s->cfg->name, s->cfg->max_result_bytes);
		*output = json_pack("{s:s}", "error", msg);
		return *output ? CORE_OK : core_fail(e, CORE_ENOMEM, "out of memory");
	}
	if (st)
		return st;
	st = map_result(res, output, parts);
	json_decref(res);
	return st ? core_fail(e, st, "out of memory") : CORE_OK;
}

/* OpenTelemetry's MCP attributes for a span of s's request method (of
 * tool, a JSON string, or NULL): a new object of strings, or NULL. */
static json_t *span_attrs(struct mcp_server *s, const char *method, const json_t *tool)
{
	const struct mcp_transport_ops *ops = s->cfg->transport;
	const char *session = s->t && ops->session ? ops->session(s->t) : NULL;
	json_t *a = json_pack("{s:s, s:O?}", "mcp.method.name", method, "gen_ai.tool.name", tool);
	if (a && ops->network)
		json_object_set_new(a, "network.transport", json_string(ops->network));
	if (a && s->version[0])
		json_object_set_new(a, "mcp.protocol.version", json_string(s->version));
	if (a && session)
		json_object_set_new(a, "mcp.session.id", json_string(session));
	return a;
}

/* s's start-up as a span, once tracing is on. */
static void trace_start_up(struct mcp_server *s)
{
	json_t *a = span_attrs(s, "initialize", NULL);
	agent_trace_mcp_start(s->cfg->name, s->start_ns, s->ready_ns ? s->ready_ns : s->start_ns,
	                      s->broken ? s->why.st : CORE_OK, s->broken ? s->why.msg : NULL, a);
	json_decref(a);
}

void mcp_set_trace(const struct mcp_set *s)
{
	for (size_t i = 0; i < s->nservers; i++)
		trace_start_up(s->servers[i]);
}

static enum core_status source_load(void *ctx, const char *name, struct tool **out,
                                    struct core_err *e)
{
	struct mcp_set *s = ctx;
	for (size_t i = 0; i < s->ntools; i++) {
		struct mcp_tool *mt = &s->tools[i];
		if (strcmp(mt->name, name))
			continue;
		struct tool *t = calloc(1, sizeof *t);
		const json_t *d = json_object_get(mt->def, "description");
		if (!t || !(t->name = strdup(mt->name)) ||
		    asprintf(&t->manifest, "mcp server '%s'", mt->srv->cfg->name) < 0 ||
		    !(t->definition = json_pack("{s:s, s:o, s:O}", "name", mt->name,
		                                "description", d ? json_incref((json_t *)d)
		                                                 : json_string(""),
		                                "inputSchema",
		                                json_object_get(mt->def, "inputSchema")))) {
			tool_free(t);
			return core_fail(e, CORE_ENOMEM, "out of memory");
		}
		t->input_schema = json_object_get(t->definition, "inputSchema");
		t->timeout_ms = mt->srv->cfg->call_timeout_ms;
		t->start = call_start;
		t->finish = call_finish;
		t->impl = s;
		/* OpenTelemetry's MCP conventions, on the tool's span (the
		 * conventions say not to make a second one). */
		t->span_attrs = span_attrs(mt->srv, "tools/call", json_object_get(mt->def, "name"));
		*out = t;
		return CORE_OK;
	}
	return CORE_ENOTFOUND;
}

static int has_name(const json_t *names, const char *name)
{
	size_t i;
	json_t *n;
	json_array_foreach(names, i, n)
		if (!strcmp(json_string_value(n), name))
			return 1;
	return 0;
}

/* Append to names the tools of srv from the first-th on that its offer
 * gives the agent. */
static enum core_status offer_tools(struct mcp_set *s, const struct mcp_server *srv,
                                    size_t first, json_t *names, struct core_err *e)
{
	for (size_t k = first; k < s->ntools; k++) {
		const struct mcp_tool *mt = &s->tools[k];
		const json_t *mn = json_object_get(mt->def, "name");
		int given = srv->offer == OFFER_ALL;
		size_t i;
		json_t *v;
		if (mt->srv != srv)
			continue;
		json_array_foreach(srv->sel, i, v)
			given |= json_equal((json_t *)mn, v);
		if (given && !has_name(names, mt->name) &&
		    json_array_append_new(names, json_string(mt->name)))
			return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	return CORE_OK;
}

enum core_status mcp_set_select(struct mcp_set *s, json_t *names, int restrict_,
                                struct core_err *e)
{
	json_t *kept = json_array(), *v;
	enum core_status st = CORE_OK;
	size_t i;
	if (!kept)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	for (size_t k = 0; k < s->nservers; k++)
		s->servers[k]->offer = restrict_ ? OFFER_NONE : OFFER_ALL;
	json_array_foreach(names, i, v) {
		const char *n = json_string_value(v), *slash = strchr(n, '/');
		struct mcp_server *srv = NULL;
		for (size_t k = 0; slash && !srv && k < s->nservers; k++)
			if (strlen(s->servers[k]->cfg->name) == (size_t)(slash - n) &&
			    !strncmp(s->servers[k]->cfg->name, n, (size_t)(slash - n)))
				srv = s->servers[k];
		if (!srv && slash && !strcmp(slash + 1, "*")) {
			st = core_fail(e, CORE_EUSAGE, "tool '%s': no mcp server '%.*s' is configured",
			               n, (int)(slash - n), n);
			break;
		}
		if (!srv) {
			if (json_array_append(kept, v))
				st = core_fail(e, CORE_ENOMEM, "out of memory");
			continue;
		}
		if (!strcmp(slash + 1, "*")) {
			srv->offer = OFFER_ALL;
			continue;
		}
		int found = srv->broken;        /* an optional server that failed: no tools */
		for (size_t k = 0; !found && k < s->ntools; k++)
			found = s->tools[k].srv == srv &&
			        !strcmp(json_string_value(json_object_get(s->tools[k].def, "name")),
			                slash + 1);
		if (!found) {
			st = core_fail(e, CORE_EUSAGE, "tool '%s': mcp server '%s' has no tool '%s'", n,
			               srv->cfg->name, slash + 1);
			break;
		}
		if (srv->offer == OFFER_NONE)
			srv->offer = OFFER_LISTED;
		if ((!srv->sel && !(srv->sel = json_array())) ||
		    json_array_append_new(srv->sel, json_string(slash + 1))) {
			st = core_fail(e, CORE_ENOMEM, "out of memory");
			break;
		}
	}
	if (!st && json_array_clear(names))
		st = core_fail(e, CORE_ENOMEM, "out of memory");
	json_array_foreach(kept, i, v)
		if (!st && json_array_append(names, v))
			st = core_fail(e, CORE_ENOMEM, "out of memory");
	for (size_t k = 0; !st && k < s->nservers; k++)
		st = offer_tools(s, s->servers[k], 0, names, e);
	json_decref(kept);
	return st;
}

/*
 * Before a model call: re-list the tools of each server that sent
 * notifications/tools/list_changed, replace its tools in the set and in
 * names (the agent's), as its offer gives them.
 */
static enum core_status source_refresh(void *ctx, json_t *names, int *changed,
                                       struct core_err *e)
{
	struct mcp_set *s = ctx;
	enum core_status st;
	*changed = 0;
	for (size_t k = 0; k < s->nservers; k++) {
		struct mcp_server *srv = s->servers[k];
		json_t *tools;
		if (!srv->list_changed || srv->broken || !srv->t || inherited(srv->t))
			continue;
		if (!(tools = json_array()))
			return core_fail(e, CORE_ENOMEM, "out of memory");
		if ((st = list_tools(srv, core_now_mono_ms() + srv->cfg->startup_timeout_ms,
		                     &s->cancel, tools, e))) {
			json_decref(tools);
			return st;
		}
		size_t kept = 0;
		for (size_t i = 0; i < s->ntools; i++) {
			if (s->tools[i].srv != srv) {
				s->tools[kept++] = s->tools[i];
				continue;
			}
			for (size_t j = json_array_size(names); j-- > 0;)
				if (!strcmp(json_string_value(json_array_get(names, j)), s->tools[i].name))
					json_array_remove(names, j);
			json_decref(s->tools[i].def);
		}
		s->ntools = kept;
		st = add_tools(s, srv, tools, e);
		json_decref(tools);
		if (st == CORE_EUSAGE)  /* mid-run a collision is the server's doing */
			e->st = st = CORE_EINTERNAL;
		if (st || (st = offer_tools(s, srv, kept, names, e)))
			return st;
		*changed = 1;
	}
	return CORE_OK;
}

const struct tool_source *mcp_set_source(struct mcp_set *s)
{
	s->source.refresh = source_refresh;
	s->source.load = source_load;
	s->source.ctx = s;
	return &s->source;
}

void mcp_set_free(struct mcp_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->ntools; i++)
		json_decref(s->tools[i].def);
	free(s->tools);
	for (size_t i = 0; i < s->nservers; i++) {
		if (s->servers[i]->t)
			s->servers[i]->t->ops->close(s->servers[i]->t, MCP_SHUTDOWN_GRACE_MS);
		json_decref(s->servers[i]->sel);
		free(s->servers[i]);
	}
	free(s->servers);
	free(s);
}
