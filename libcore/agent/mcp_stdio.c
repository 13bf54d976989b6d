/* mcp_stdio.c - MCP's stdio transport (mcp_transport.h): the server a
 * co-process (coproc.h), one message a line on its stdin and stdout, its
 * stderr kept for messages and given line by line to the sink. */
#include "mcp_transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp.h"
#include "../base/buf.h"
#include "../base/coproc.h"
#include "../base/utf8.h"

/* A stderr line longer than this goes to the sink in pieces. */
#define ERRLINE_MAX ((size_t)1 << 20)

struct stdio {
	struct mcp_transport head;
	struct coproc *cp;
	const char *name;       /* the server's, borrowed from its config */
	void (*sink)(void *sink_ctx, const char *server, const char *line);
	void *sink_ctx;
	struct core_buf errline; /* stderr after its last newline, for the sink */
	char *fixed;            /* the last line received, made valid UTF-8 */
};

static struct coproc_cancel cancel_of(const struct mcp_cancel *c)
{
	return c ? (struct coproc_cancel){ c->fn, c->ctx } : (struct coproc_cancel){ 0 };
}

/* Line by line to the sink; a line longer than ERRLINE_MAX is given in
 * pieces. */
static void stdio_stderr(void *ctx, const char *p, size_t n)
{
	struct stdio *s = ctx;
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '\n' && !core_buf_addc(&s->errline, p[i]) &&
		    s->errline.len < ERRLINE_MAX)
			continue;
		/* made valid where it enters: the sink prints it, a
		 * worker's log keeps it */
		if (core_buf_fix_text(&s->errline))
			s->errline.len = 0;
		if (s->errline.len || p[i] == '\n')
			s->sink(s->sink_ctx, s->name, s->errline.p ? s->errline.p : "");
		s->errline.len = 0;
		if (s->errline.p)
			s->errline.p[0] = 0;
	}
}

static enum core_status stdio_open(const struct mcp_server_config *c,
                                   void (*sink)(void *, const char *, const char *),
                                   void *sink_ctx, struct mcp_transport **out,
                                   struct core_err *e)
{
	struct stdio *s = calloc(1, sizeof *s);
	char what[300];
	enum core_status st;
	if (!s)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	s->head = (struct mcp_transport){ &mcp_transport_stdio, getpid() };
	s->name = c->name;
	s->sink = sink;
	s->sink_ctx = sink_ctx;
	core_buf_init(&s->errline, CORE_BUF_UNLIMITED);
	snprintf(what, sizeof what, "mcp server '%s'", c->name);
	struct coproc_limits lim = { .line = c->max_result_bytes,
	                             .line_knob = "the server's maxResultBytes",
	                             .stderr_tail = 1,
	                             .on_stderr = sink ? stdio_stderr : NULL,
	                             .stderr_ctx = s };
	if ((st = coproc_start_argv(c->argv, c->cwd, what, (const char *const *)c->env, &lim,
	                            &s->cp, e))) {
		core_buf_release(&s->errline);
		free(s);
		return st;
	}
	*out = &s->head;
	return CORE_OK;
}

static enum core_status stdio_send(struct mcp_transport *t, const json_t *msg,
                                   int64_t timeout_ms, const struct mcp_cancel *cancel,
                                   struct core_err *e)
{
	struct stdio *s = (struct stdio *)t;
	struct coproc_cancel cc = cancel_of(cancel);
	return coproc_write_json(s->cp, msg, timeout_ms, &cc, e);
}

static enum core_status stdio_receive(struct mcp_transport *t, int64_t timeout_ms,
                                      const struct mcp_cancel *cancel, const char **msg,
                                      size_t *len, struct core_err *e)
{
	struct stdio *s = (struct stdio *)t;
	struct coproc_cancel cc = cancel_of(cancel);
	enum core_status st;
	char *line;
	free(s->fixed);
	s->fixed = NULL;
	if ((st = coproc_read_line(s->cp, timeout_ms, &cc, &line, len, e)))
		/* the read-ahead lost: the stream is no longer whole */
		return st == CORE_ENOMEM ? CORE_EINTERNAL : st;
	/* The server's bytes become valid UTF-8 here, where they enter: a
	 * stray byte in a string is U+FFFD, not a line refused. */
	if (utf8_valid(line, *len) != *len) {
		if (!(s->fixed = utf8_dup(line, *len)))
			return core_fail(e, CORE_ENOMEM, "out of memory");
		line = s->fixed;
		*len = strlen(line);
	}
	*msg = line;
	return CORE_OK;
}

static void stdio_tail(struct mcp_transport *t, const char *msg, struct core_buf *b)
{
	struct stdio *s = (struct stdio *)t;
	const char *tail = coproc_stderr(s->cp);
	size_t n = strlen(tail);
	/* coproc's own messages for a server that ended carry its stderr */
	if (!strncmp(msg, "mcp server '", 12) && coproc_exited(s->cp))
		return;
	while (n && (tail[n - 1] == '\n' || tail[n - 1] == ' ' || tail[n - 1] == '\r'))
		n--;
	if (!n)
		return;
	core_buf_adds(b, " (stderr: ");
	if (s->cp->err_dropped)
		core_buf_adds(b, "...");
	/* The tail may start inside a character, and holds what the server
	 * wrote: made valid here, where it joins our text. */
	for (size_t i = 0, j; i < n; i = j + 1) {
		for (j = i; j < n && tail[j] != '\n'; j++)
			;
		core_buf_add_text(b, tail + i, j - i);
		if (j < n)
			core_buf_addc(b, ' ');
	}
	core_buf_addc(b, ')');
}

static void stdio_kill(struct mcp_transport *t)
{
	coproc_kill(((struct stdio *)t)->cp);
}

static void stdio_close(struct mcp_transport *t, int64_t grace_ms)
{
	struct stdio *s = (struct stdio *)t;
	if (!s)
		return;
	/* Inherited across fork: the pipes and the server are the
	 * parent's, and so is a last stderr line. */
	int ours = t->pid == getpid();
	if (ours)
		coproc_close(s->cp, grace_ms);
	coproc_free(s->cp);
	if (ours && s->sink && s->errline.len && !core_buf_fix_text(&s->errline))
		s->sink(s->sink_ctx, s->name, s->errline.p);
	core_buf_release(&s->errline);
	free(s->fixed);
	free(s);
}

const struct mcp_transport_ops mcp_transport_stdio = {
	.type = "stdio",
	.network = "pipe",
	.open = stdio_open,
	.send = stdio_send,
	.receive = stdio_receive,
	.tail = stdio_tail,
	.kill = stdio_kill,
	.close = stdio_close,
};
