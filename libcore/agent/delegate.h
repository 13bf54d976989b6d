/*
 * delegate.h - agents that call agents: Genkit's agents middleware
 * (go/plugins/middleware/exp/agents.go) for prompt files.
 *
 * Front matter `agents:` names the sub-agents an agent may delegate to,
 * as a list of refs, or as Genkit's whole options object:
 *
 *     agents: [researcher, {name: reviewer, description: Reviews drafts.}]
 *
 *     agents:
 *       agents: [researcher]
 *       toolPrefix: delegate_to     (default; "" gives bare agent names)
 *       maxDelegations: 0           (per turn; 0: no limit)
 *       historyLength: 0            (recent user/model text messages sent)
 *       artifactStrategy: inline    (or session)
 *       async: false                (background delegation, task tools)
 *       maxDepth: 3                 (agentkit: levels of sub-agents below)
 *       maxTotalDelegations: 0      (agentkit: per agent-run; 0: no limit)
 *       timeout: 10m                (agentkit: one delegation's bound)
 *
 * A ref's name is looked up as NAME.prompt in the referring prompt file's
 * directory, then on the agent search path (agent.h).  At load the whole
 * graph of sub-agents is read: a cycle, or a chain deeper than maxDepth
 * (counting the depth this process runs at, $AGENTKIT_DELEGATION_DEPTH),
 * is refused with CORE_EINVAL naming the chain.
 *
 * The model gets one tool per sub-agent, PREFIX_NAME, input {"task"}; a
 * call runs `agent-run PATH` (the agent-run beside this program) as a
 * child through run.h, on the same store in a session of its own, with
 * the task as its one input.  With historyLength > 0 the sub-session
 * starts from a row (written first, by this process) holding the last
 * historyLength user/model text messages of the request that asked.  The
 * call's output: {"response", "artifacts"?, "sessionId", "snapshotId"};
 * a sub-agent that fails, is aborted or times out answers
 * {"response": "Error calling agent \"NAME\": REASON", ...}, which the
 * model reads as Genkit's middleware gives it: the parent's turn goes on.
 * A sub-agent that interrupts interrupts the call, with the metadata
 * {"agent", "sessionId", "snapshotId", "interrupts"}; a restart whose
 * resumed is {"snapshotId", "resume": INPUT} resumes that row with INPUT
 * (without a store: Genkit's text answer).
 * With async, {"background": true} starts the sub-agent with --detach and
 * answers a task ID "NAME:SNAPSHOT"; check_background_tasks,
 * wait_for_background_tasks and abort_background_tasks read, wait for and
 * abort those rows through the store.
 * docs/agents.md is the user's account.
 *
 * Ownership: a struct delegate_config belongs to its struct agent; a
 * struct delegate_run to its runtime, and it must outlive the tools it
 * made (their impl).  Nothing here prints or exits.
 */
#ifndef CORE_DELEGATE_H
#define CORE_DELEGATE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/status.h"

#define DELEGATE_DEFAULT_MAX_DEPTH 3
#define DELEGATE_DEFAULT_TIMEOUT_MS (10 * 60 * 1000)
#define DELEGATE_DEFAULT_PREFIX "delegate_to"
/* The marker of the system text part the sub-agents block is (Go's). */
#define DELEGATE_MARKER "agents-instructions"
/* What a sub-agent's agent-run may write on stdout (its chunks and its
 * final line) and on stderr that a delegation keeps. */
#define DELEGATE_MAX_OUTPUT ((size_t)64 << 20)
#define DELEGATE_STDERR_KEEP 2048

struct store;
struct tool;
struct delegate_config;
struct delegate_run;

/*
 * Read front matter meta's `agents` (none: *out NULL, CORE_OK) for the
 * prompt file path (agent name name), resolving the sub-agents in path's
 * directory then dirs (NULL-terminated), and check the graph they make.
 * CORE_EINVAL "PATH: agents: ..." (a malformed value, a cycle, too
 * deep), CORE_ENOTFOUND (a sub-agent not found), CORE_ENOMEM.
 */
enum core_status delegate_config_load(const json_t *meta, const char *path, const char *name,
                                      char *const *dirs, struct delegate_config **out,
                                      struct core_err *e);
void delegate_config_free(struct delegate_config *c);  /* NULL ok */

/*
 * For agent-run --describe: the delegation tools' definitions appended to
 * tools, and d's "agents": [{"name", "tool", "path", "description"?}]
 * with d's "delegation": the options in effect.  CORE_ENOMEM.
 */
enum core_status delegate_describe(const struct delegate_config *c, json_t *tools, json_t *d,
                                   struct core_err *e);

/* {TOOL: AGENT} for every delegation tool (render.h); NULL without memory. */
json_t *delegate_names(const struct delegate_config *c);

/*
 * The delegations of one runtime.  store points at the runtime's store
 * handle (it may change: a detached worker's, reopened), NULL for a
 * client-managed run (the sub-agents are then client-managed too, and
 * history goes in their init state, as Genkit sends it);
 * store_location is where it is (the children open it), key_file the
 * agent's (or NULL).  NULL when out of memory.
 */
struct delegate_run *delegate_run_new(const struct delegate_config *c, struct store *const *store,
                                      const char *store_location, const char *key_file);
void delegate_run_free(struct delegate_run *r);         /* NULL ok */

/* The number of delegation tools (0 with a NULL r), and the i-th, new
 * (tool_free()). CORE_ENOMEM. */
size_t delegate_tool_count(const struct delegate_run *r);
enum core_status delegate_tool(struct delegate_run *r, size_t i, struct tool **out,
                               struct core_err *e);

/*
 * Before a model call: put the <sub-agents> block into messages (the
 * request; the tagged part refreshed, else appended to the first system
 * message, else a system message in front), and keep a copy of them for
 * historyLength.  No-op with a NULL r.
 */
void delegate_augment(struct delegate_run *r, json_t *messages);

/* The parent's run ended aborted: every background task it started that
 * is still pending is flipped to aborting (as agent-abort does), so its
 * worker stops.  No-op with a NULL r or without a store. */
void delegate_abort_children(struct delegate_run *r);

/*
 * The link of this process's session to the delegation that started it
 * ($AGENTKIT_DELEGATION, read and removed from the environment at the
 * first call, so a tool's agent-run does not claim it): borrowed
 * {"parentSessionId", "parentSnapshotId", "agent", "tool"}, or NULL.
 */
const json_t *delegate_parent_link(void);

/*
 * What the parent had left of its usage budget when it started this
 * process ($AGENTKIT_DELEGATION_BUDGET, taken with the link): borrowed
 * {"totalTokens": N, ...}, N >= 0, or NULL.  The runtime holds this run to
 * it beside the agent's own maxUsage.
 */
const json_t *delegate_parent_budget(void);

#endif
