/*
 * tools.h - executable tools: manifests, and running tool calls in parallel.
 *
 * A tool is an executable plus a JSON manifest NAME.json found in the
 * agent's tool directories (agent.h: tools/ beside the prompt file, tools/
 * under each agent search-path directory, ./tools), or given as a path to a
 * manifest (anything containing '/').  The manifest:
 *
 *   {"name": "addTask",                 (defaults to the file's stem)
 *    "description": "Add a task.",
 *    "inputSchema": {...}, "outputSchema": {...},      (optional)
 *    "command": ["./add-task", "--flag"],  (optional; default: the file NAME
 *                                           beside the manifest)
 *    "timeout": "30s",                  (optional; default 60s)
 *    "maxOutputBytes": "64M",           (optional; a size, default 64 MiB)
 *    "maxOutputLines": 100000,          (optional; default 100000)
 *    "env": ["OPENAI_API_KEY"]}         (optional; provider keys it may see)
 *
 * command[0] containing '/' is relative to the manifest's directory;
 * without '/' it is searched on PATH.  No shell is involved.
 *
 * Protocol (docs/agent-run.md): the tool reads one JSON object on stdin,
 * {"input", "custom", "resumed"?, "context": {sessionId, snapshotId,
 * parentSnapshotId, turnIndex}}, the same context in AGENTKIT_SESSION_ID,
 * AGENTKIT_SNAPSHOT_ID, AGENTKIT_PARENT_SNAPSHOT_ID, AGENTKIT_TURN_INDEX,
 * and writes NDJSON on stdout: any number of {"custom": NEW},
 * {"customPatch": [ops]}, {"artifact": {...}}, {"part": {...}}, then
 * exactly one {"output": ...} or {"interrupt": METADATA}, and exits 0.
 * Anything else - a non-zero exit, a signal, a timeout, a malformed or
 * extra line, no final line, more stdout than maxOutputBytes or
 * maxOutputLines - fails the call, with the tool's stderr (up to 2 KiB) in
 * the message.  The environment is the caller's minus the provider keys
 * (*_API_KEY of the built-in providers) unless the manifest names them.
 *
 * The call ends when the tool has exited and its pipes are closed, or
 * TOOL_PIPE_GRACE_MS after it exited when a process it started still holds
 * them, provided it printed its final line or failed (a tool that exited 0
 * without a final line is waited for until the timeout: something it
 * started may still print it).  Then whatever is left of its process group
 * is killed and the tool is reaped.
 */
#ifndef CORE_TOOLS_H
#define CORE_TOOLS_H

#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "../base/buf.h"
#include "../base/run.h"
#include "../base/status.h"

#define TOOL_DEFAULT_TIMEOUT_MS 60000
/* Default caps on one call's stdout (docs/agent-run.md says why). */
#define TOOL_DEFAULT_MAX_OUTPUT_BYTES ((size_t)64 << 20)
#define TOOL_DEFAULT_MAX_OUTPUT_LINES ((size_t)100000)
/* How long the pipes may stay open after the tool itself has exited. */
#define TOOL_PIPE_GRACE_MS RUN_PIPE_GRACE_MS

struct tool;
struct tool_context;

/*
 * A tool served in this process instead of by an executable (an MCP
 * server's tool, mcp.h), in two halves so that a round's calls overlap:
 * start sends one call with input (borrowed; NULL: none) and sets
 * *pending (the tool's, for finish) without waiting for its outcome, or
 * fails with e (then nothing is pending: the call failed so).
 * cancelled(cctx), polled while a call waits, stops it with
 * CORE_ECANCELLED.  finish waits for a started call, sets *output (a new
 * reference) and appends media parts to parts, or fails with e (the
 * message names who failed, the call fails with it), and frees pending;
 * every started call is finished, in any order (the outcomes of the
 * others that come meanwhile are kept for their own finish).  ev (may be
 * NULL) takes what the call gives the session meanwhile (a delegation's
 * artifacts, delegate.h).  A call that interrupts sets *interrupt (a new
 * reference: its metadata) instead of *output.
 */
typedef enum core_status tool_start_fn(const struct tool *t, const json_t *input,
                                       const struct tool_context *ctx,
                                       int (*cancelled)(void *), void *cctx, void **pending,
                                       struct core_err *e);
struct tool_events;
typedef enum core_status tool_finish_fn(const struct tool *t, void *pending, json_t **output,
                                        json_t **interrupt, json_t *parts,
                                        const struct tool_events *ev, struct core_err *e);

struct tool {
	char *name;
	char *manifest;        /* the manifest's path */
	json_t *definition;    /* {name, description, inputSchema, outputSchema?}
	                          as the model sees it */
	const json_t *input_schema;  /* the manifest's inputSchema (borrowed from
	                                definition), or NULL: none declared */
	char **argv;           /* NULL-terminated; argv[0] resolved */
	char **env_allow;      /* NULL-terminated provider variables to keep */
	int64_t timeout_ms;
	size_t max_output_bytes, max_output_lines;   /* caps on one call's stdout */
	tool_start_fn *start;  /* set: served in-process (argv NULL) ... */
	tool_finish_fn *finish;
	void *impl;            /* ... with this (borrowed: its source's) */
	json_t *span_attrs;    /* string attributes for each call's span (an
	                          MCP tool's mcp.*), owned; or NULL */
};

/*
 * Where tool_load() looks before the tool directories: the MCP servers of
 * the invocation (mcp.h).  load returns CORE_ENOTFOUND for a name that is
 * not its own, else fills *out (freed with tool_free()) or fails.  One
 * source per process, set by the program (NULL: none); borrowed, it must
 * outlive every tool_load().
 */
struct tool_source {
	enum core_status (*load)(void *ctx, const char *name, struct tool **out,
	                         struct core_err *e);
	/* Before each model call: bring names (the agent's tool names) up to
	 * date with the source's tools, *changed non-zero when they or a
	 * definition changed (the caller loads its tools again).  May be NULL. */
	enum core_status (*refresh)(void *ctx, json_t *names, int *changed,
	                            struct core_err *e);
	void *ctx;
};
void tool_set_source(const struct tool_source *src);

/* The source's refresh of names (above); *changed 0 without a source. */
enum core_status tool_source_refresh(json_t *names, int *changed, struct core_err *e);

/*
 * Find and read tool name's manifest in dirs (NULL-terminated).
 * Errors: CORE_ENOTFOUND ("tool 'x' not found (searched: ...)"),
 * CORE_EINVAL (a malformed manifest, named with its path), CORE_ESYS.
 */
enum core_status tool_load(const char *name, char *const *dirs, struct tool **out,
                           struct core_err *e);
void tool_free(struct tool *t);     /* NULL is a no-op */

/* What a tool is told about the turn it runs in (strings borrowed). */
struct tool_context {
	const char *session_id, *snapshot_id, *parent_snapshot_id;
	long turn_index;
	/* The W3C traceparent of the call's span when tracing (an in-process
	 * tool's call gets it: MCP's _meta.traceparent), else NULL. */
	const char *traceparent;
	/* A restarted call's metadata.resumed (runtime-semantics §3.7), for an
	 * in-process tool's start; NULL otherwise. */
	const json_t *resumed;
	/* What is left of the run's usage budget when the round starts,
	 * {"totalTokens": N, ...} (N >= 0), or NULL for no budget: a
	 * delegation's sub-agent gets at most that (delegate.h). */
	const json_t *budget_left;
};

/*
 * Side effects streamed by running tools, delivered in arrival order while
 * the tools run.  A non-OK return fails that call with e's message.
 * Values are borrowed for the call.
 */
struct tool_events {
	/* {"custom": NEW} (is_patch 0) or {"customPatch": ops} (is_patch 1). */
	enum core_status (*custom)(void *ctx, const struct tool *t, const json_t *value,
	                           int is_patch, struct core_err *e);
	enum core_status (*artifact)(void *ctx, const struct tool *t, const json_t *artifact,
	                             struct core_err *e);
	void *ctx;
	/* Polled while tools run (every TOOL_CANCEL_POLL_MS at most); non-zero
	 * cancels every running call: SIGTERM to its process group, SIGKILL
	 * after TOOL_KILL_GRACE_MS; the calls fail with CORE_ECANCELLED.  May be
	 * NULL. */
	int (*cancelled)(void *ctx);
	/* A GenerationUsage the call spent on model calls of its own (a
	 * sub-agent's, delegate.h): added to the run's, the turn's and the
	 * session's usage as the runtime's own calls are.  May be NULL. */
	void (*usage)(void *ctx, const struct tool *t, const json_t *usage);
};

#define TOOL_CANCEL_POLL_MS RUN_CANCEL_POLL_MS
#define TOOL_KILL_GRACE_MS 2000

/* One call: fill tool and input (and resumed), read the results. */
struct trace_span;

struct tool_call {
	const struct tool *tool;   /* in */
	const json_t *input;       /* in: the request's input, or NULL */
	const json_t *resumed;     /* in: restart metadata (true or an object), or NULL */

	enum core_status st;       /* out: CORE_OK, or why the call failed ... */
	struct core_err err;       /* ... with the message (stderr included) */
	json_t *output;            /* out: the output value (owned), if any */
	json_t *interrupt;         /* out: interrupt metadata (owned), if it interrupted */
	json_t *parts;             /* out: array of parts from {"part"} lines (owned) */

	/* Private to tools.c. */
	struct run_child run;
	struct core_buf stdin_buf, out_buf, err_buf;
	size_t out_lines, out_bytes, out_values;
	const struct tool_events *ev;
	const struct core_err *poll_err;
	struct trace_span *span;   /* its span while it runs (agent_trace.h), or NULL */
};

/*
 * Run calls[0..n) at the same time and wait for all of them (the calls of
 * in-process tools first: every one started, then each finished, so
 * that the calls to one MCP server overlap; then the executables in
 * parallel).  custom is the
 * session's custom state each tool gets on stdin.  Per-call outcomes are in
 * calls[i].st; the return value is non-OK only when tools could not be run
 * at all (CORE_ESYS, CORE_ENOMEM).  Release results with tool_call_release().
 */
enum core_status tools_run(struct tool_call *calls, size_t n, const json_t *custom,
                           const struct tool_context *ctx, const struct tool_events *ev,
                           struct core_err *e);
void tool_call_release(struct tool_call *c);

#endif
