/*
 * mcp_transport_test.c - an MCP transport is added by one file and one
 * row of libcore/agent/mcp_transport.c's table, and the client (mcp.c)
 * speaks its protocol over it unchanged: an entry of its "type" starts,
 * initializes and lists its tools, a call goes out and its result comes
 * back mapped, the server's ping is answered, a JSON-RPC error carries the
 * transport's tail, two calls started at once get their own answers when
 * the server answers the second first, and the set's end closes it.  A type that no row
 * takes is an unusable entry: a usage error when it is started.
 *
 * The transport exists only here: a server in memory, answering each
 * request as it is sent (or, holding, a call's answer kept until the
 * client waits, the last held given first).  The test builds the table with its row
 * (MCP_TRANSPORT_TEST_ROW), as HACKING.md's recipe adds one.
 */
#include <string.h>
#include <unistd.h>

#include "../../libcore/agent/mcp_transport.h"

extern const struct mcp_transport_ops mcp_transport_memory;
#define MCP_TRANSPORT_TEST_ROW &mcp_transport_memory
#include "../../libcore/agent/mcp_transport.c"

#include "../../libcore/agent/mcp.h"
#include "../../libcore/agent/tools.h"
#include "../../libcore/base/buf.h"
#include "tap.h"

/* ---- the transport ---- */

#define QUEUE 8

struct memory {
	struct mcp_transport head;
	char *queue[QUEUE];     /* lines the server has written, oldest first */
	size_t n;
	char *taken;            /* the line receive handed out last */
	json_t *held;           /* holding: the calls' answers not yet given */
};

static int opened, closed, pongs, holding;
static char sent_call[256];

static void push(struct memory *m, json_t *msg)
{
	if (m->n < QUEUE)
		m->queue[m->n++] = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
}

static enum core_status memory_open(const struct mcp_server_config *c,
                                    void (*sink)(void *, const char *, const char *),
                                    void *sink_ctx, struct mcp_transport **out,
                                    struct core_err *e)
{
	struct memory *m = calloc(1, sizeof *m);
	if (!m)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	m->head = (struct mcp_transport){ &mcp_transport_memory, getpid() };
	m->held = json_array();
	opened++;
	*out = &m->head;
	return CORE_OK;
}

/* The server: answers initialize, tools/list and tools/call (a ping of
 * its own first), takes the client's answer to its ping. */
static enum core_status memory_send(struct mcp_transport *t, const json_t *msg,
                                    int64_t timeout_ms, const struct mcp_cancel *cancel,
                                    struct core_err *e)
{
	struct memory *m = (struct memory *)t;
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");
	if (!method) {
		pongs += json_is_object(json_object_get(msg, "result"));
		return CORE_OK;
	}
	if (!id)
		return CORE_OK;         /* notifications/initialized */
	if (!strcmp(method, "initialize")) {
		push(m, json_pack("{s:s, s:O, s:{s:s, s:{}, s:{s:s}}}", "jsonrpc", "2.0", "id", id,
		                  "result", "protocolVersion", "2025-06-18", "capabilities",
		                  "serverInfo", "name", "memory"));
	} else if (!strcmp(method, "tools/list")) {
		push(m, json_pack("{s:s, s:O, s:{s:[{s:s, s:{s:s}}, {s:s, s:{s:s}}]}}", "jsonrpc",
		                  "2.0", "id", id, "result", "tools", "name", "echo", "inputSchema",
		                  "type", "object", "name", "fail", "inputSchema", "type", "object"));
	} else if (!strcmp(method, "tools/call")) {
		const json_t *p = json_object_get(msg, "params");
		const char *tool = json_string_value(json_object_get(p, "name"));
		char *args = json_dumps(json_object_get(p, "arguments"), JSON_COMPACT);
		snprintf(sent_call, sizeof sent_call, "%s %s", tool ? tool : "?", args ? args : "");
		free(args);
		push(m, json_pack("{s:s, s:s, s:s}", "jsonrpc", "2.0", "id", "ping-1", "method",
		                  "ping"));
		if (tool && !strcmp(tool, "fail"))
			push(m, json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id,
			                  "error", "code", -32000, "message", "nope"));
		else {
			char text[64];
			snprintf(text, sizeof text, "{\"ok\": %d}", (int)json_integer_value(
			         json_object_get(json_object_get(p, "arguments"), "x")));
			json_t *a = json_pack("{s:s, s:O, s:{s:[{s:s, s:s}]}}", "jsonrpc", "2.0", "id",
			                      id, "result", "content", "type", "text", "text", text);
			if (holding)
				json_array_append_new(m->held, a);
			else
				push(m, a);
		}
	}
	return CORE_OK;
}

static enum core_status memory_receive(struct mcp_transport *t, int64_t timeout_ms,
                                       const struct mcp_cancel *cancel, const char **msg,
                                       size_t *len, struct core_err *e)
{
	struct memory *m = (struct memory *)t;
	free(m->taken);
	m->taken = NULL;
	if (!m->n && json_array_size(m->held)) {
		size_t last = json_array_size(m->held) - 1;
		push(m, json_incref(json_array_get(m->held, last)));
		json_array_remove(m->held, last);
	}
	if (!m->n)
		return core_fail(e, CORE_EDEADLINE, "silent");
	m->taken = m->queue[0];
	memmove(m->queue, m->queue + 1, --m->n * sizeof *m->queue);
	*msg = m->taken;
	*len = strlen(m->taken);
	return CORE_OK;
}

static void memory_tail(struct mcp_transport *t, const char *msg, struct core_buf *b)
{
	core_buf_adds(b, " (memory: the tail)");
}

static void memory_kill(struct mcp_transport *t)
{
}

static void memory_close(struct mcp_transport *t, int64_t grace_ms)
{
	struct memory *m = (struct memory *)t;
	while (m->n)
		free(m->queue[--m->n]);
	json_decref(m->held);
	free(m->taken);
	free(m);
	closed++;
}

const struct mcp_transport_ops mcp_transport_memory = {
	.type = "memory",
	.open = memory_open,
	.send = memory_send,
	.receive = memory_receive,
	.tail = memory_tail,
	.kill = memory_kill,
	.close = memory_close,
};

/* ---- the client over it ---- */

static enum core_status call_tool(const char *name, json_t **output, struct core_err *e)
{
	struct tool *t = NULL;
	struct tool_context ctx = { "s1", "snap1", "", 0, NULL, NULL, NULL };
	json_t *input = pj("{\"x\": 1}"), *parts = json_array();
	enum core_status st = tool_load(name, NULL, &t, e);
	*output = NULL;
	void *pending = NULL;
	if (!st)
		st = t->start(t, input, &ctx, NULL, NULL, &pending, e);
	if (!st)
		st = t->finish(t, pending, output, NULL, parts, NULL, e);
	tool_free(t);
	json_decref(input);
	json_decref(parts);
	return st;
}

int main(void)
{
	struct mcp_config cfg;
	struct core_err e = { 0 };
	json_t *servers = pj("{\"mem\": {\"type\": \"memory\", \"command\": \"-\"}}");
	memset(&cfg, 0, sizeof cfg);
	enum core_status st = mcp_config_add(&cfg, servers, "test.json", NULL, &e);
	report(!st && cfg.n == 1 && cfg.servers[0].transport == &mcp_transport_memory,
	       "an entry of its type is given the row's transport", st ? e.msg : NULL);
	json_decref(servers);

	struct mcp_set *set = mcp_set_new();
	st = mcp_set_start(set, &cfg.servers[0], &e);
	report(!st && opened == 1 && mcp_set_count(set) == 2 &&
	       !strcmp(mcp_set_name(set, 0), "mem_echo"),
	       "the server starts over it: initialize, tools/list", st ? e.msg : NULL);

	json_t *out = NULL;
	tool_set_source(mcp_set_source(set));
	st = call_tool("mem_echo", &out, &e);
	report(!st && json_integer_value(json_object_get(out, "ok")) == 1,
	       "a call's result comes back mapped", st ? e.msg : NULL);
	check_str("the call sent the tool's MCP name and arguments", sent_call, "echo {\"x\":1}");
	check_int("the server's ping was answered", pongs, 1);
	json_decref(out);

	st = call_tool("mem_fail", &out, &e);
	report(st == CORE_EINTERNAL &&
	       !strcmp(e.msg, "mcp server 'mem': tools/call failed: nope (code -32000) "
	                      "(memory: the tail)"),
	       "a JSON-RPC error carries the transport's tail", e.msg);

	/* Two calls at once, the second answered first. */
	struct tool *t = NULL;
	struct tool_context ctx = { "s1", "snap1", "", 0, NULL, NULL, NULL };
	json_t *in1 = pj("{\"x\": 1}"), *in2 = pj("{\"x\": 2}"), *parts = json_array();
	json_t *out1 = NULL, *out2 = NULL;
	void *p1 = NULL, *p2 = NULL;
	holding = 1;
	st = tool_load("mem_echo", NULL, &t, &e);
	if (!st && !(st = t->start(t, in1, &ctx, NULL, NULL, &p1, &e)) &&
	    !(st = t->start(t, in2, &ctx, NULL, NULL, &p2, &e)) &&
	    !(st = t->finish(t, p1, &out1, NULL, parts, NULL, &e)))
		st = t->finish(t, p2, &out2, NULL, parts, NULL, &e);
	report(!st && json_integer_value(json_object_get(out1, "ok")) == 1 &&
	       json_integer_value(json_object_get(out2, "ok")) == 2,
	       "two calls at once: each gets its own answer, the second answered first",
	       st ? e.msg : NULL);
	check_int("both calls' pings were answered", pongs, 4);
	holding = 0;
	json_decref(out1);
	json_decref(out2);
	json_decref(in1);
	json_decref(in2);
	json_decref(parts);
	tool_free(t);
	tool_set_source(NULL);

	mcp_set_free(set);
	check_int("the set's end closes it", closed, 1);
	mcp_config_release(&cfg);

	memset(&cfg, 0, sizeof cfg);
	servers = pj("{\"web\": {\"type\": \"websocket\", \"command\": \"-\"}}");
	st = mcp_config_add(&cfg, servers, "test.json", NULL, &e);
	/* kept, unusable: it fails when started, with the reading's error */
	set = mcp_set_new();
	if (!st)
		st = mcp_set_start(set, &cfg.servers[0], &e);
	report(st == CORE_EUSAGE &&
	       !strcmp(e.msg, "mcp config test.json: server 'web': unknown type 'websocket' "
	                      "(agentkit takes \"stdio\", \"http\" and \"sse\")"),
	       "a type no row takes is an unusable entry, a usage error when started", e.msg);
	mcp_set_free(set);
	json_decref(servers);
	mcp_config_release(&cfg);
	return tap_end();
}
