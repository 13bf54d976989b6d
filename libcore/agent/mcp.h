/*
 * mcp.h - MCP servers as a tool source: the configuration, a client for
 * each server, and their tools as agentkit tools (tools.h).
 *
 * Configuration (docs/mcp.md): files in the shared shape
 *
 *   {"mcpServers": {"NAME": {"command": "node", "args": ["server.js"],
 *                            "env": {"K": "V"}, "cwd": "dir",
 *                            "timeout": "60s", "startupTimeout": "30s",
 *                            "maxResultBytes": "4M", "disabled": false,
 *                            "includeTools": [...], "excludeTools": [...],
 *                            "prefix": "NAME_", "optional": false}}}
 *
 * read only when named (--mcp-config, AGENTKIT_MCP_CONFIG).  ${VAR} and
 * ${VAR:-default} expand in command, args, env values and cwd; an unset
 * variable without a default is CORE_EUSAGE naming it; so are $VAR and
 * $$ (a '$').  HTTP servers: {"type": "http"|"sse", "url", "headers",
 * "credentialCommand", "credentialTtl"}, Gemini CLI's "httpUrl"
 * (Streamable HTTP), a bare "url" (Streamable HTTP, then HTTP+SSE; see
 * mcp_http.c); url and headers values expand too.  An entry that cannot
 * be used (an unknown type, a bad member, a variable unset) does not fail
 * the reading: it is kept, and fails when started (with the message the
 * reading gave), so one bad entry of a shared file never stops a run that
 * does not need it (mcp_config_settle()).
 * Other members are ignored (the format is shared with other clients).
 * timeout and startupTimeout are durations ("30s") or numbers of
 * milliseconds (as Gemini CLI writes them).
 *
 * The client reaches a server through the transport its entry's "type"
 * names (mcp_transport.h: "stdio", "http", "sse").  A stdio server runs as
 * a co-process (coproc.h, mcp_stdio.c): argv without a shell, in its own
 * process group, with the caller's environment minus the provider keys
 * plus its "env", stderr captured (the last 2 KiB, attached to every
 * failure's message; and line by line to mcp_set_stderr()'s sink).  The
 * client speaks JSON-RPC 2.0, one object per line: initialize asking for 2025-11-25 (2025-06-18 and 2025-03-26
 * answers are accepted, anything else is a failure naming the version),
 * notifications/initialized, tools/list until no nextCursor, then
 * tools/call per call; the client's capabilities are {"roots": {}}.
 * Server requests are answered: ping with {}, roots/list with the
 * working directory (a file:// URI, percent-encoded), elicitation/create
 * with {"action": "decline"} (not advertised), everything else with
 * -32601.  notifications/tools/list_changed marks
 * the server for a new tools/list before the next model call (the
 * tool source's refresh, tools.h); other notifications are dropped.
 *
 * Failures name the server ("mcp server 'fs' ..."): it did not start or
 * answer within startupTimeout, exited, wrote a line that is not a JSON
 * object (the server is then unusable: nothing it writes later can be
 * trusted), a line over maxResultBytes, or a JSON-RPC error.  A call that
 * times out sends notifications/cancelled (given 100 ms: a server that
 * has no room for it is killed) and fails CORE_EDEADLINE; the server goes
 * on (a late answer is dropped).  A server that exited or
 * broke the protocol fails every later call with the first reason.
 *
 * Shutdown (mcp_set_free): close the server's stdin, wait up to 2 s,
 * SIGTERM its process group, 2 s more, SIGKILL; always reaped.
 *
 * Nothing here prints or exits.
 */
#ifndef CORE_MCP_H
#define CORE_MCP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "tools.h"
#include "../base/status.h"

#define MCP_PROTOCOL_VERSION "2025-11-25"
#define MCP_DEFAULT_STARTUP_TIMEOUT_MS 30000
#define MCP_DEFAULT_CALL_TIMEOUT_MS TOOL_DEFAULT_TIMEOUT_MS
#define MCP_DEFAULT_MAX_RESULT_BYTES ((size_t)4 << 20)
#define MCP_SHUTDOWN_GRACE_MS 2000
/* Longest tool name the providers all accept. */
#define MCP_TOOL_NAME_MAX 64

struct mcp_transport_ops;

/* One server entry, expanded.  Owned by its struct mcp_config. */
struct mcp_server_config {
	char *name;
	char *file;             /* the configuration file it came from */
	const struct mcp_transport_ops *transport;  /* its "type"'s (mcp_transport.h) */
	char **argv;            /* command and args, NULL-terminated */
	char **env;             /* "NAME=VALUE" from "env", NULL-terminated */
	char *cwd;              /* or NULL */
	int64_t startup_timeout_ms, call_timeout_ms;
	size_t max_result_bytes;
	char **include, **exclude;  /* MCP tool names, NULL-terminated, or NULL:
	                               no list (exclude wins) */
	char *prefix;           /* before each tool's name (default "NAME_") */
	int optional;           /* a failure to start is a warning (the caller's) */
	int agents;             /* from the agent's own prompt or a manifest */
	/* HTTP transports ("http", "sse", a bare "url"): */
	char *url;              /* expanded; NULL for stdio */
	char **headers;         /* "Name: value", expanded, NULL-terminated */
	json_t *cred_cmd;       /* credentialCommand (an array of strings) or NULL */
	int64_t cred_ttl_ms;    /* credentialTtl (a plain-text token's life) */
	/* An entry agentkit cannot use: its transport is mcp_transport_unusable,
	 * whose open fails with this (the reading's error, naming the file). */
	enum core_status unusable_st;
	char *unusable;
};

struct mcp_config {
	struct mcp_server_config *servers;
	size_t n;
};

/*
 * Read the configuration file path and add its servers to cfg (zeroed
 * before the first call).  A server name already in cfg is CORE_EUSAGE
 * naming both files.  Errors: CORE_EUSAGE (a variable unset, an
 * unsupported type), CORE_EINVAL (malformed: "mcp config FILE: ..."),
 * CORE_ENOTFOUND / CORE_ESYS (cannot read it), CORE_ENOMEM.
 */
enum core_status mcp_config_load(struct mcp_config *cfg, const char *path,
                                 struct core_err *e);
/* The same for a "mcpServers" object already read (a prompt's front
 * matter), named path in messages; dir (or NULL) is the directory a
 * relative cwd, or a relative command with a '/' and no cwd, is taken
 * from (the prompt file's). */
enum core_status mcp_config_add(struct mcp_config *cfg, const json_t *servers,
                                const char *path, const char *dir, struct core_err *e);
/*
 * Server manifests on the tool path: for each entry "NAME/..." of names
 * (an agent's tools) whose server NAME is not in cfg, the first
 * NAME.mcp.json in dirs (agent->tool_dirs), one server entry (the members
 * of one mcpServers entry), is added as server NAME, its relative cwd and
 * command taken from the manifest's directory.  No manifest: nothing is
 * added (mcp_set_select() then names the entry).  Errors as
 * mcp_config_add(), the manifest named.
 */
enum core_status mcp_config_manifests(struct mcp_config *cfg, const json_t *names,
                                      char *const *dirs, struct core_err *e);
void mcp_config_release(struct mcp_config *cfg);

/*
 * Which servers the agent requires: those of cfg from index shared on
 * (its prompt's mcpServers, its manifests) and those its tool list names
 * ("NAME/..."), unless "optional": true.  Every other server (a shared
 * file's that the agent does not name) becomes optional: an entry that
 * cannot be used, or a server that fails to start, is then a warning.
 */
void mcp_config_settle(struct mcp_config *cfg, size_t shared, const json_t *names);

/* The invocation's running servers and their tools. */
struct mcp_set;

/* A new, empty set; NULL without memory. */
struct mcp_set *mcp_set_new(void);

/*
 * What the servers write on stderr, line by line (without the newline;
 * a last line without one at the end; a line over 1 MiB in pieces), to
 * fn(ctx, server name, line) besides the tail kept for messages; set
 * before the servers start (mcp_set_start(), and a detached worker's own
 * start).  Without it stderr is only kept.
 */
typedef void mcp_stderr_fn(void *ctx, const char *server, const char *line);
void mcp_set_stderr(struct mcp_set *s, mcp_stderr_fn *fn, void *ctx);

/*
 * A person to ask: a server's elicitation/create goes to fn(ctx, server
 * name, the request's params, deadline, &result), which sets result to
 * the ElicitResult to send ({"action": "accept", "content": {...}},
 * "decline" or "cancel"; a new reference) by deadline (the call's end,
 * core_now_mono_ms()'s clock).  Set before the servers start: they are
 * then told the client elicits (capabilities.elicitation).  Without it no
 * server is told so, and every request is declined.
 */
typedef enum core_status mcp_elicit_fn(void *ctx, const char *server, const json_t *params,
                                       int64_t deadline_ms, json_t **result);
void mcp_set_elicit(struct mcp_set *s, mcp_elicit_fn *fn, void *ctx);

/*
 * The caller's stop: cancelled(ctx), polled at least every 50 ms, ends a
 * server's start-up (initialize, tools/list) and a later re-list of its
 * tools (notifications/tools/list_changed) at once with CORE_ECANCELLED
 * ("mcp server 'NAME': initialize cancelled"), the server killed and
 * broken (its tools are not added); mcp_set_start() after the stop adds
 * the server broken without starting it ("start-up cancelled").  Set
 * before the servers start; without it each start-up is bounded by its
 * startupTimeout only.  A call takes its own cancellation (tools.h), and
 * so does a detached worker's own start of a server, at its first call.
 */
void mcp_set_cancel(struct mcp_set *s, int (*cancelled)(void *ctx), void *ctx);

/*
 * Start the server c (borrowed; it must outlive the set), initialize it
 * and list its tools (those includeTools names, if given, minus those
 * excludeTools names), each named "<prefix><tool>" mapped to
 * ^[A-Za-z_][A-Za-z0-9_-]{0,63}$ (other characters become '_', a leading
 * digit or '-' gets a '_' before it, a longer name keeps its first 55
 * characters, '_' and 8 hex digits of a hash of the whole name).  Tools
 * whose execution.taskSupport is "required" are left out.  Errors: the
 * server's failure (CORE_EUNAVAILABLE, CORE_EDEADLINE, CORE_EINTERNAL,
 * CORE_ETOOBIG, ...); CORE_ECANCELLED (mcp_set_cancel()); CORE_EUSAGE when a name collides with one already
 * in the set, naming both servers.  A failed server stays in the set
 * until mcp_set_free() (which ends it); its tools are not added.
 */
enum core_status mcp_set_start(struct mcp_set *s, const struct mcp_server_config *c,
                               struct core_err *e);
/*
 * The same in two halves, so that servers start at the same time:
 * mcp_set_begin() adds the server, spawns it (or opens its connection)
 * and sends initialize without waiting; mcp_set_finish() waits for its
 * answer, finishes the handshake and adds the tools.  Call begin for
 * every server, then finish for each (c the same pointer).  A failure of
 * begin is given again by finish (which every begun server needs, to be
 * either started or broken); begin's own return is only for a caller
 * that looks (CORE_ENOMEM: nothing added, finish says so too).
 */
enum core_status mcp_set_begin(struct mcp_set *s, const struct mcp_server_config *c,
                               struct core_err *e);
enum core_status mcp_set_finish(struct mcp_set *s, const struct mcp_server_config *c,
                                struct core_err *e);

/*
 * Once tracing is on (it begins after the servers started): each
 * server's start-up as an "mcp.initialize" span under the invocation's
 * root span, from its spawn to its tools listed (agent_trace.h), with
 * OpenTelemetry's MCP attributes.  A no-op while tracing is off.
 */
void mcp_set_trace(const struct mcp_set *s);


/* Number of tools, and the i-th's name as the model sees it (borrowed). */
size_t mcp_set_count(const struct mcp_set *s);
const char *mcp_set_name(const struct mcp_set *s, size_t i);

/*
 * The i-th tool for agent-run --mcp-list: {"server", "name", "mcpName",
 * "description", "inputSchema", "annotations"} (description and
 * annotations null when the server gave none).  New reference or NULL.
 */
json_t *mcp_set_row(const struct mcp_set *s, size_t i);

/*
 * The set as tool_set_source() wants it (borrowed from s): tool_load() of
 * a name in the set gives a tool whose calls go to its server as
 * tools/call with _meta {progressToken, dev.agentkit/sessionId,
 * dev.agentkit/snapshotId, dev.agentkit/parentSnapshotId,
 * dev.agentkit/turnIndex}.  Results: structuredContent is the output;
 * else the text blocks joined (resource links as "Resource Link: NAME at
 * URI", a line of their own), parsed as JSON when they parse, else the text; no text: null.
 * Images, audio and blobs are media parts.  isError: {"error": text}, and
 * the call succeeds (the model reads it); so does an answer longer than
 * maxResultBytes ({"error": "... answered with more than N bytes ..."},
 * the server broken).  The calls of a round overlap (tools.h's
 * start/finish): each is sent with its own id, and the answers are taken
 * in any order, each call with its own timeout, stop and maxResultBytes;
 * a server that breaks fails every call waiting on it.  In a process
 * forked after the
 * servers started (a detached worker) the servers are the parent's: the
 * first call there starts that process's own (initialize again; the tools
 * stay those listed first), ended by its mcp_set_free().
 */
const struct tool_source *mcp_set_source(struct mcp_set *s);

/*
 * Give the agent the set's tools: names is its tool list (its prompt's
 * tools: and --tool), rewritten in place.  An entry "NAME/X" selects
 * tools of server NAME: X "*" every one, else its tool of MCP name X; the
 * entries are replaced by the names the model sees, after the other
 * entries; restrict_ non-zero (the prompt lists tools): only the
 * selected tools are given, else every tool of every server.  X "*"
 * for no server of the set, or "NAME/tool" for a tool the server does
 * not list, is CORE_EUSAGE naming it; "DIR/x" for no server is left as
 * it is (a manifest's path).  The selection stays for the refresh: a
 * server that sent notifications/tools/list_changed has its tools listed
 * again before the next model call, and the agent's names follow.
 */
enum core_status mcp_set_select(struct mcp_set *s, json_t *names, int restrict_,
                                struct core_err *e);

/* End every server (the shutdown above) and free.  NULL is a no-op. */
void mcp_set_free(struct mcp_set *s);

/* "fs_" + "read.file" as the model sees it: "fs_read_file".  out must hold
 * MCP_TOOL_NAME_MAX + 1 bytes. */
void mcp_tool_name(const char *prefix, const char *tool, char *out);

#endif
