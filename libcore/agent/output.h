/*
 * output.h - what an agent invocation writes on stdout, in agent-run's
 * three formats (docs/agent-run.md): NDJSON (every AgentStreamChunk, then
 * one final line, {"output": AgentOutput} or {"error": ...}), text (the
 * model's text as it streams, render.h, tool lines and the summary for
 * stderr) or json (only the final AgentOutput object).
 *
 * Nothing here writes to a file: the bytes for stdout and the lines for
 * stderr go to the caller's sink (agent-run's checked stdout, cli.h).
 * The first write failure is kept in st and err, for the caller to
 * report once; a reader that went away (CORE_EPIPE) also sets gone, the
 * caller stop of runtime-semantics §2.5.  One struct output per process,
 * used by the thread that runs the turns.
 *
 *   output_init()     the format and the sink; output_release() is safe after
 *   output_line()     one JSON value as one line (--list, --describe, rows)
 *   output_chunk()    one AgentStreamChunk as the format shows it
 *   output_agents()   the agents of --list: NDJSON lines, or a table (text)
 *   output_row()      output_line() as a row callback (mcp_run_list())
 *   output_model()    one row of --list-models, or its last line (text)
 *   output_error()    the {"error": ...} line of an invocation that never started
 *   output_final()    the final line: {"output": ...}, or the object alone
 *   output_summary()  text: the run's summary line for stderr
 *   output_watch()    whether stdout is a pipe, for output_gone()
 *   output_gone()     whether the reader of stdout went away
 */
#ifndef CORE_OUTPUT_H
#define CORE_OUTPUT_H

#include "render.h"
#include "../base/buf.h"
#include "../base/json.h"
#include "../base/status.h"

/* Where the output goes; ctx is the caller's. */
struct output_sink {
	/* n bytes for stdout: CORE_EPIPE when its reader went away, another
	 * status with e's message for any other failure. */
	enum core_status (*write)(void *ctx, const char *p, size_t n, struct core_err *e);
	/* stdout's bytes so far out now; errors as write's. */
	enum core_status (*flush)(void *ctx, struct core_err *e);
	/* One whole line for stderr, without its newline: stdout's bytes so
	 * far are to be out first. */
	void (*note)(void *ctx, const char *line, size_t n);
	void *ctx;
};

enum output_format { OUTPUT_NDJSON, OUTPUT_TEXT, OUTPUT_JSON };

struct output {
	enum output_format format;
	int color;              /* text: tool lines and the summary coloured */
	struct output_sink sink;
	struct render view;     /* text: the chunks as a person reads them */
	struct core_buf line;   /* the line being written */
	enum core_status st;    /* the first write failure (CORE_OK: none) */
	struct core_err err;    /* ... its message */
	int pipe;               /* stdout is a pipe or socket (output_watch()) */
	int gone;               /* ... whose reader went away: a caller stop */
};

/* Errors: CORE_ENOMEM.  output_release() is safe after a failure. */
enum core_status output_init(struct output *o, enum output_format format, int color,
                             struct output_sink sink);
void output_release(struct output *o);

/*
 * v as one line of compact JSON (jv_dump()), then flushed, whatever the
 * format.  Its status: CORE_ENOMEM, or the sink's (message in o->err).
 * It does not touch o->st: the caller reports it.
 */
enum core_status output_line(struct output *o, const json_t *v);

/* agent-run --list's agents (agent_ext_list()): output_line() for each,
 * or with text a table, render_agent_row() in a column as wide as the
 * widest name; up to the first failure, its status as output_line()'s. */
enum core_status output_agents(struct output *o, const json_t *agents);

/* output_line() for ctx, a struct output: its message copied to e. */
enum core_status output_row(void *ctx, const json_t *row, struct core_err *e);

/*
 * One row of model_list() (registry.h): a table line (text; the name in
 * a column width wide, render_model_row()) or an NDJSON line; with row
 * NULL, text only, the last line: "default model (AGENTKIT_MODEL): NAME"
 * (dflt, or "not set").  Its status as output_line()'s.
 */
enum core_status output_model(struct output *o, const json_t *row, int width,
                              const char *dflt);

/*
 * One chunk: an NDJSON line, the text view, or nothing (json).  After a
 * write failed nothing more is written and that status is returned again
 * (it is o->st; CORE_EPIPE sets o->gone).
 */
enum core_status output_chunk(struct output *o, const json_t *chunk);

/* Unless text: {"error": {"status", "message"}} for e, a failure to write
 * it ignored (the caller reports e itself). */
void output_error(struct output *o, const struct core_err *e);

/*
 * The final line of a run: {"output": output} (NDJSON), output itself
 * (json), nothing (text: the caller writes the summary), whether or not
 * a write failed before.  Its status as output_line()'s.
 */
enum core_status output_final(struct output *o, const json_t *output);

/* Text: render_summary() of the run (prog its name) as a line for
 * stderr; out of memory leaves it out. */
void output_summary(struct output *o, const char *prog, const json_t *output,
                    const char *session, const json_t *usage, const char *trace);

/* From now on output_gone() polls stdout when it is a pipe or socket. */
void output_watch(struct output *o);

/* Whether the reader of stdout went away (a write's EPIPE, or a pipe
 * whose reader closed it: POLLERR, POLLHUP).  Any time; never blocks. */
int output_gone(struct output *o);

#endif
