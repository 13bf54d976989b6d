/* render.c - output as a person reads it (render.h). */
#include <string.h>

#include "render.h"

enum core_status render_init(struct render *r, int color, struct render_sink sink)
{
	*r = (struct render){ .sink = sink, .color = color, .msg_index = -1 };
	r->tools_open = json_array();
	return r->tools_open ? CORE_OK : CORE_ENOMEM;
}

void render_release(struct render *r)
{
	json_decref(r->tools_open);
	r->tools_open = NULL;
	json_decref(r->delegates);
	r->delegates = NULL;
}

void render_delegates(struct render *r, json_t *names)
{
	json_decref(r->delegates);
	r->delegates = names;
}

/* End the text line (before a tool line, a new message, the turn's end). */
static enum core_status end_line(struct render *r)
{
	enum core_status st = CORE_OK;
	if (r->midline)
		st = r->sink.text(r->sink.ctx, "\n", 1);
	r->midline = 0;
	if (!st)
		st = r->sink.flush(r->sink.ctx);
	return st;
}

/* The first open request of this name was answered. */
static void close_tool(struct render *r, const char *name)
{
	size_t i;
	json_t *p;
	json_array_foreach(r->tools_open, i, p)
		if (name && !strcmp(json_string_value(p), name)) {
			json_array_remove(r->tools_open, i);
			return;
		}
}

/* "tool NAME [WHAT] <compact JSON of v, cut short>", WHAT (ok, error,
 * interrupted) coloured when r->color; an error's text (a string v) is
 * shown whole, as text.  Out of memory, the JSON is left out (and then
 * the line). */
static void tool_line(const struct render *r, const char *name, const json_t *v,
                      const char *what, const char *color)
{
	enum { SHORT = 72 };
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_buf line = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	size_t n = 0;
	if (v && json_is_string(v) && what && !strcmp(what, "error")) {
		if (!core_buf_add(&b, json_string_value(v), json_string_length(v)))
			n = b.len;
	} else if (v && !jv_dump(v, &b)) {
		n = b.len;
		if (n > SHORT) {
			n = SHORT;
			while (n && ((unsigned char)b.p[n] & 0xC0) == 0x80)
				n--;    /* not inside a UTF-8 sequence */
		}
	}
	const char *dim = r->color ? "\033[2m" : "", *off = r->color ? "\033[0m" : "";
	const char *sub = name ? json_string_value(json_object_get(r->delegates, name)) : NULL;
	enum core_status st = core_buf_addf(&line, "%s%s %s%s", dim, sub ? "delegate" : "tool",
	                                    sub ? sub : name ? name : "?", off);
	if (!st && what)
		st = core_buf_addf(&line, " %s%s%s", r->color ? color : "", what, off);
	if (!st && n)
		st = core_buf_addf(&line, " %s%.*s%s%s", dim, (int)n, b.p, n < b.len ? "..." : "",
		                   off);
	if (!st)
		r->sink.note(r->sink.ctx, line.p, line.len);
	core_buf_release(&line);
	core_buf_release(&b);
}

/* An output that is the error a tool answered with: {"error": TEXT} and
 * nothing else, as an MCP isError result or arguments that failed the
 * tool's input schema become (runtime_tools.c, mcp.h). */
static int is_error_output(const json_t *out)
{
	return json_is_object(out) && json_object_size(out) == 1
	    && json_is_string(json_object_get(out, "error"));
}

/* A tool request or response part: its line, and the open requests. */
static void tool_part(struct render *r, const json_t *req, const json_t *res,
                      const json_t *intr)
{
	const char *name = json_string_value(json_object_get(req ? req : res, "name"));
	if (intr)
		tool_line(r, name, json_is_true(intr) ? NULL : intr, "interrupted", "\033[33m");
	else if (res && is_error_output(json_object_get(res, "output")))
		tool_line(r, name, json_object_get(json_object_get(res, "output"), "error"), "error",
		          "\033[31m");
	else if (res && name && json_object_get(r->delegates, name)) {
		/* a delegation's answer: the sub-agent's response */
		const json_t *v = json_object_get(json_object_get(res, "output"), "response");
		const char *t = json_string_value(v);
		if (t && !strncmp(t, "Error calling agent ", 20))
			tool_line(r, name, v, "error", "\033[31m");
		else
			tool_line(r, name, v, "ok", "\033[32m");
	}
	else if (res)
		tool_line(r, name, json_object_get(res, "output"), "ok", "\033[32m");
	else
		tool_line(r, name, json_object_get(req, "input"), NULL, NULL);
	if (req && !intr)
		json_array_append_new(r->tools_open, json_string(name ? name : "?"));
	else if (res || intr)
		close_tool(r, name);
}

enum core_status render_chunk(struct render *r, const json_t *chunk)
{
	const json_t *mc = json_object_get(chunk, "modelChunk");
	const char *role = json_string_value(json_object_get(mc, "role"));
	enum core_status st = CORE_OK;
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(mc, "content"), i, p) {
		const json_t *t = json_object_get(p, "text");
		const json_t *req = json_object_get(p, "toolRequest");
		const json_t *res = json_object_get(p, "toolResponse");
		const json_t *intr = json_object_get(json_object_get(p, "metadata"), "interrupt");
		json_int_t index = json_integer_value(json_object_get(mc, "index"));
		if (role && !strcmp(role, "model") && json_is_string(t) && json_string_length(t)) {
			if (index != r->msg_index && (st = end_line(r)))
				return st;
			r->msg_index = index;
			if ((st = r->sink.text(r->sink.ctx, json_string_value(t),
			                       json_string_length(t))))
				return st;
			r->midline = json_string_value(t)[json_string_length(t) - 1] != '\n';
		} else if ((req || res) && !(st = end_line(r))) {
			tool_part(r, req, res, intr);
		}
		if (st)
			return st;
	}
	const json_t *te = json_object_get(chunk, "turnEnd");
	if (te) {
		const char *reason = json_string_value(json_object_get(te, "finishReason"));
		json_array_foreach(r->tools_open, i, p)
			if (reason && !strcmp(reason, "failed"))
				tool_line(r, json_string_value(p), NULL, "error", "\033[31m");
		json_array_clear(r->tools_open);
		r->msg_index = -1;
		st = end_line(r);
	}
	return st ? st : r->sink.flush(r->sink.ctx);
}

enum core_status render_summary(const char *prog, const json_t *output, const char *session,
                                const json_t *u, const char *trace, int color,
                                struct core_buf *b)
{
	const char *reason = json_string_value(json_object_get(output, "finishReason"));
	const char *snap = json_string_value(json_object_get(output, "snapshotId"));
	const char *unit = json_object_get(u, "inputTokens") || json_object_get(u, "outputTokens")
	                 ? "tokens" : json_object_get(u, "inputCharacters") ? "characters" : NULL;
	char usage[96] = "";
	if (unit) {
		int tokens = unit[0] == 't';
		snprintf(usage, sizeof usage, ", %" JSON_INTEGER_FORMAT " %s in, %" JSON_INTEGER_FORMAT
		         " out", json_integer_value(json_object_get(u, tokens ? "inputTokens"
		                                                           : "inputCharacters")),
		         unit, json_integer_value(json_object_get(u, tokens ? "outputTokens"
		                                                             : "outputCharacters")));
	}
	return core_buf_addf(b, "%s%s: %s, session %s%s%s%s%s%s%s", color ? "\033[2m" : "", prog,
	                     reason && *reason ? reason : "completed", session,
	                     snap ? ", snapshot " : "", snap ? snap : "", usage,
	                     trace ? ", trace " : "", trace ? trace : "", color ? "\033[0m" : "");
}

enum core_status render_agent_row(const json_t *agent, int width, struct core_buf *b)
{
	const char *desc = json_string_value(json_object_get(agent, "description"));
	const char *err = json_string_value(json_object_get(agent, "error"));
	enum core_status st = core_buf_addf(b, "%-*s ", width > 1 ? width - 1 : 0,
	                                    json_string_value(json_object_get(agent, "name")));
	if (!st && err)
		st = core_buf_addf(b, "error: %s", err);
	else if (!st)
		st = core_buf_adds(b, desc ? desc
		                           : json_string_value(json_object_get(agent, "path")));
	return st ? CORE_ENOMEM : CORE_OK;
}

enum core_status render_model_row(const json_t *row, int width, struct core_buf *b)
{
	const json_t *keys = json_object_get(row, "keyVariables"), *v;
	const char *from = json_string_value(json_object_get(row, "keyFrom"));
	const char *base = json_string_value(json_object_get(row, "baseUrl"));
	/* The column, and a space after a longer name. */
	enum core_status st = core_buf_addf(b, "%-*s ", width > 1 ? width - 1 : 0,
	                                    json_string_value(json_object_get(row, "provider")));
	size_t i;
	if (!base)
		st = st ? st : core_buf_adds(b, "offline, no key");
	else if (from)
		st = st ? st : core_buf_addf(b, "key from %s, %s", from, base);
	else if (!json_array_size(keys) || json_is_true(json_object_get(row, "keyOptional")))
		st = st ? st : core_buf_addf(b, "no key needed, %s", base);
	else {
		json_array_foreach(keys, i, v)
			st = st ? st : core_buf_addf(b, "%s%s", i ? " or " : "",
			                             json_string_value(v));
		st = st ? st : core_buf_addf(b, ": not set, %s", base);
	}
	json_array_foreach(json_object_get(row, "models"), i, v)
		st = st ? st : core_buf_addf(b, "\n  %s", json_string_value(v));
	/* an agent server's row: how its agents are named */
	if ((v = json_object_get(row, "agents")) && json_is_string(v))
		st = st ? st : core_buf_addf(b, "\n  agents: --url %s, url: %s",
		                             json_string_value(v), json_string_value(v));
	if (!st && json_object_get(row, "error"))
		st = core_buf_addf(b, "\n  (cannot list: %s)", json_string_value(json_object_get(
		                   json_object_get(row, "error"), "message")));
	return st ? CORE_ENOMEM : CORE_OK;
}
