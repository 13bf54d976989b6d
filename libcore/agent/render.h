/*
 * render.h - agentkit's output as a person reads it (agent-run --format
 * text, the --list-models table): the model's text as it streams, one
 * line per tool request and outcome, and the summary line of a run.
 *
 * Nothing here writes to a file: a struct render hands its text to the
 * caller's sink, the formatters append to a struct core_buf.  Colours are
 * ANSI SGR sequences, used only when the caller says so (a terminal, no
 * NO_COLOR).
 */
#ifndef CORE_RENDER_H
#define CORE_RENDER_H

#include "../base/buf.h"
#include "../base/json.h"
#include "../base/status.h"

/* Where rendered text goes; ctx is the caller's. */
struct render_sink {
	/* n bytes of the model's text for stdout; an error stops the render. */
	enum core_status (*text)(void *ctx, const char *p, size_t n);
	/* stdout's text so far out now (the end of a line, of a chunk). */
	enum core_status (*flush)(void *ctx);
	/* One whole line for stderr, without its newline (a tool line):
	 * whatever text went to stdout before it is to be out first. */
	void (*note)(void *ctx, const char *line, size_t n);
	void *ctx;
};

/*
 * Text mode over a run's AgentStreamChunks: the model's text on stdout, a
 * line break between model messages; each tool request and its outcome
 * on stderr, "tool NAME [ok|error|interrupted] <compact JSON, cut short>"
 * (a request still open when the turn fails is the one that failed;
 * an output that is only {"error": TEXT} - an MCP isError result,
 * arguments that failed the tool's schema - reads "error TEXT", whole).
 */
struct render {
	struct render_sink sink;
	int color;              /* tool lines coloured */
	int midline;            /* text sent without a newline yet */
	json_int_t msg_index;   /* the model message last shown, or -1 */
	json_t *tools_open;     /* names of tool requests not answered yet */
	json_t *delegates;      /* tool name -> sub-agent name (delegate.h), or NULL */
};

/* Errors: CORE_ENOMEM.  render_release() is safe after a failure. */
enum core_status render_init(struct render *r, int color, struct render_sink sink);
void render_release(struct render *r);

/* The delegation tools (an object: tool name -> sub-agent name;
 * consumed): their lines read "delegate AGENT ..." instead of "tool NAME
 * ...", and an answer that is a failed delegation reads as an error. */
void render_delegates(struct render *r, json_t *names);

/* One chunk; the sink's first error is returned. */
enum core_status render_chunk(struct render *r, const json_t *chunk);

/*
 * The summary of a run's AgentOutput on b: "PROG: stop, session S,
 * snapshot R, 12 tokens in, 30 out, trace T" (characters for models that
 * count those; "completed" for an empty finish reason; the trace part only
 * when trace, the run's trace ID, is not NULL), dim when color.
 * Errors: CORE_ENOMEM.
 */
enum core_status render_summary(const char *prog, const json_t *output, const char *session,
                                const json_t *usage, const char *trace, int color,
                                struct core_buf *b);

/*
 * One provider row of model_list() (model.h) on b, as the --list-models
 * table shows it: the name in a column width wide (a name as wide or
 * wider gets one space after it; the caller gives the widest name plus
 * one), where its key comes from (or that it is not set) and its base
 * URL, then its models indented, one a line, and why they could not be
 * listed; an agent server's row ("agents": "NAME/AGENT") says how its
 * agents are named.  Errors: CORE_ENOMEM.
 */
enum core_status render_model_row(const json_t *row, int width, struct core_buf *b);

/*
 * One agent of agent-run --list (agent_ext_list()) on b: its name in a
 * column width wide (a space after a wider one), then its description,
 * or "error: MESSAGE" for a file that does not load, or its path when it
 * has neither.  Errors: CORE_ENOMEM.
 */
enum core_status render_agent_row(const json_t *agent, int width, struct core_buf *b);

#endif
