/*
 * mcp_run.h - an invocation's MCP servers, from the configuration files to
 * the agent's tools (docs/mcp.md): which files are read, which servers an
 * agent adds, the order they start in, what an optional server's failure
 * does, which tools the agent is given, and what --mcp-list lists.
 *
 * mcp.h is the mechanism: one configuration file or object read, one
 * server started, one selection made.  This file is the policy agent-run
 * follows with them, kept apart from mcp.c and mcp_config.c because it
 * needs the agent (agent.h), which they do not know of, and from
 * cmd/agent-run.c because none of it is about the command line.  The
 * caller keeps the struct mcp_config (zeroed; mcp_config_release()) and
 * the struct mcp_set (mcp_set_new(), mcp_set_stderr(); mcp_set_free())
 * and decides what to show; nothing here prints or exits.  What the
 * caller is told on the way (a server that failed and the others went
 * on, a tool listed) comes through the callbacks below, the servers'
 * stderr lines through mcp_set_stderr()'s.
 *
 * The order of the servers is cfg's: the configuration files' in the
 * order given, then the prompt's mcpServers, then the manifests on the
 * tool path.  They start at the same time (each spawned or connected to
 * and sent initialize, then each one's handshake finished in that
 * order), each within its own startupTimeout: the start-up of all takes
 * about as long as the slowest one's; their outcomes are taken in order.
 */
#ifndef CORE_MCP_RUN_H
#define CORE_MCP_RUN_H

#include <stddef.h>

#include <jansson.h>

#include "agent.h"
#include "mcp.h"
#include "../base/status.h"

/* The environment variable naming configuration files, colon-separated. */
#define MCP_CONFIG_VARIABLE "AGENTKIT_MCP_CONFIG"

/*
 * Read the configuration files into cfg: files[0..n) (--mcp-config, in
 * order), or when n is 0 those $AGENTKIT_MCP_CONFIG names, colon-separated
 * (empty entries skipped).  Neither: cfg stays as it is.  Stops at the
 * first file that fails.  Errors as mcp_config_load(); CORE_ENOMEM.
 */
enum core_status mcp_run_load(struct mcp_config *cfg, const char *const *files, size_t n,
                              struct core_err *e);

/*
 * Add the servers the agent a brings: its prompt's mcpServers (paths in
 * them relative to the prompt file's directory, as every path of a prompt
 * file), then the manifests NAME.mcp.json its tools select on its tool
 * path (mcp_config_manifests()).  Errors as mcp_config_add(), then as
 * mcp_config_manifests(): CORE_EUSAGE (a variable unset, a name in two
 * places, ...), CORE_EINVAL (malformed), CORE_ENOMEM.
 */
enum core_status mcp_run_add_agent(struct mcp_config *cfg, const struct agent *a,
                                   struct core_err *e);

/* A server's failure to start, e naming it, when the others still start. */
typedef void mcp_failed_fn(void *ctx, const struct core_err *e);

/*
 * Start every server of cfg (borrowed: it must outlive s) into s, all at
 * once (mcp_set_begin() each, then mcp_set_finish() each in order), before
 * the first model call.  An optional server ("optional": true) that fails
 * goes to skipped(ctx, e) (the caller warns: the run goes on without its
 * tools) and the next one's outcome is taken; any other failure stops
 * with it (the servers after it end with the set): CORE_EUSAGE (two tools with one name, naming both servers),
 * else the server's (mcp_set_start(): CORE_EUNAVAILABLE, CORE_EDEADLINE,
 * ...).  A stop (mcp_set_cancel()) ends the start-ups in flight at once,
 * an optional server's too, every server's then broken (mcp_run_tools() then gives no MCP tool and finds
 * every selection valid): CORE_ECANCELLED.  The servers started stay in
 * s either way.
 */
enum core_status mcp_run_start(struct mcp_set *s, const struct mcp_config *cfg,
                               mcp_failed_fn *skipped, void *ctx, struct core_err *e);

/*
 * Give the agent a the tools of s, once mcp_run_start() succeeded: s
 * becomes the tool source (tool_set_source()) and a->tools is rewritten
 * by mcp_set_select().  A prompt that lists tools gets only the MCP tools
 * it selects; ncli is the number of a->tools' entries that came from the
 * command line (--tool, at its end), so a->tools holding more means the
 * prompt lists tools.  Errors as mcp_set_select(): CORE_EUSAGE (an entry
 * naming no server or no tool of its server), CORE_ENOMEM.
 */
enum core_status mcp_run_tools(struct mcp_set *s, struct agent *a, size_t ncli,
                               struct core_err *e);

/* One tool's line of --mcp-list (mcp_set_row(), borrowed); non-zero, with
 * e filled, stops the list. */
typedef enum core_status mcp_row_fn(void *ctx, const json_t *row, struct core_err *e);

/*
 * agent-run --mcp-list [only]: start the servers of cfg (borrowed, as
 * above) into s at the same time (above), only the one named only when it is not
 * NULL, and give each one's tools to row(ctx, row, e), in the servers'
 * order, as soon as it has listed them.  A server that fails to start
 * goes to failed(ctx, e) and the next one starts.  Returns CORE_OK when
 * every server started and listed its tools; CORE_FAILED when one did
 * not (each one told to failed already); CORE_ECANCELLED, stopping, at a
 * stop (mcp_set_cancel()); CORE_EUSAGE, stopping, for two
 * tools with one name (naming both servers) or when only names no server
 * of cfg ("no mcp server 'NAME' is configured"); CORE_ENOMEM; or row's
 * status, stopping.
 */
enum core_status mcp_run_list(struct mcp_set *s, const struct mcp_config *cfg, const char *only,
                              mcp_row_fn *row, mcp_failed_fn *failed, void *ctx,
                              struct core_err *e);

#endif
