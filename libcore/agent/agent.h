/*
 * agent.h - an agent's definition: where its prompt, model, tools and limits
 * come from.
 *
 * An agent is either a Dotprompt file (NAME.prompt, found by name on the
 * agent search path or given as a path) or defined inline by flags
 * (--model, --system, --tool, --max-turns, --config).  Flags given with a
 * prompt file override its front matter (model, config, maxTurns; --tool
 * adds tools).
 *
 * The agent search path, in order: the --agents directory, each entry of
 * $AGENTKIT_PATH (colon-separated), then ./agents.  A name containing '/'
 * or ending in ".prompt" is a path.
 *
 * Tools are looked up (tools.h) in tools/ beside the agent's prompt file,
 * then in tools/ under each directory of the search path, then ./tools; the
 * same list is agent->tool_dirs.
 *
 * Ownership: struct agent owns everything it points to; agent_free()
 * releases it (NULL is a no-op).
 */
#ifndef CORE_AGENT_H
#define CORE_AGENT_H

#include <jansson.h>

#include "../base/status.h"

#define AGENT_DEFAULT_MAX_TURNS 5

struct prompt;
struct delegate_config;

struct agent {
	char *name;             /* the agent's name ("inline" without a file) */
	char *path;             /* the prompt file, or NULL for an inline agent */
	char *description;      /* or NULL */
	char *model;            /* "echo", "script/PATH", "openai/gpt-4o", ... */
	char *url;              /* front matter url: the agent is served there
	                           (remote.h; docs/serve.md), or NULL */
	char *system;           /* inline system text, or NULL */
	json_t *config;         /* object or NULL */
	json_t *tools;          /* array of tool names (strings) */
	int max_turns;          /* > 0 */
	int concurrency;        /* front matter concurrency: its queued runs at
	                           once, fleet-wide (docs/queue.md); 0: any */
	int max_attempts;       /* front matter maxAttempts: a queued run's
	                           claims (docs/queue.md); 0: the default */
	json_t *input;          /* the prompt's input (--input or its default), or NULL */
	json_t *state_schema;   /* front matter state schema, or NULL */
	json_t *mcp_servers;    /* front matter mcpServers (docs/mcp.md), or NULL */
	json_t *output;         /* structured output spec (structured.h), or NULL */
	json_t *max_usage;      /* the run's usage budget: {"totalTokens": N, ...},
	                           positive integers (maxUsage, --max-tokens-total),
	                           or NULL */
	struct prompt *prompt;  /* the parsed prompt file, or NULL */
	char **tool_dirs;       /* NULL-terminated directories searched for tools */
	struct delegate_config *delegation; /* front matter agents: its
	                           sub-agents (delegate.h), or NULL */
	char *key_file;         /* the provider key's file (--key-file,
	                           $AGENTKIT_KEY_FILE), or NULL: the provider's
	                           own environment variable */
};

/* What the command line says about an agent. */
struct agent_spec {
	const char *name;        /* agent name or path (operand), or NULL for inline */
	const char *agents_dir;  /* --agents DIR, or NULL */
	const char *prompt;      /* --prompt NAME: a shared prompt, or NULL */
	const char *input_json;  /* --input JSON for the prompt, or NULL */
	const char *model;       /* --model, or NULL */
	const char *system;      /* --system, or NULL */
	const char *config_json; /* --config JSON object, or NULL */
	const char *const *tools;/* --tool values, NULL-terminated (may be NULL) */
	int max_turns;           /* --max-turns, 0 when not given */
	long long max_tokens_total; /* --max-tokens-total, 0 when not given */
	int model_optional;      /* a custom agent (--exec) may have no model */
	const char *key_file;    /* --key-file, or NULL */
	const char *default_model; /* $AGENTKIT_MODEL: the model when neither
	                            * --model nor the front matter names one */
	const char *output_schema; /* --output-schema FILE (JSON Schema), or NULL */
	int json_output;         /* --json: the reply must be JSON */
};

/*
 * The agent search path: agents_dir (--agents, may be NULL), each directory
 * of $AGENTKIT_PATH, "agents", then ${XDG_CONFIG_HOME:-$HOME/.config}/
 * agentkit/agents (left out when neither variable is set).  *dirs is a new
 * NULL-terminated list freed with agent_path_free().  CORE_ENOMEM.
 */
enum core_status agent_search_path(const char *agents_dir, char ***dirs);
void agent_path_free(char **dirs);              /* NULL ok */

/*
 * Build the agent the spec describes.  Errors: CORE_ENOTFOUND (no such
 * agent on the path: "agent 'x' not found (searched: ...)"), CORE_EINVAL
 * (a malformed prompt file, --config or --input; the message names the file
 * and line), CORE_EUSAGE (no model anywhere, max turns < 1), CORE_ESYS.
 */
enum core_status agent_load(const struct agent_spec *spec, struct agent **out,
                            struct core_err *e);
void agent_free(struct agent *a);

/* The descriptor (agent-run --describe) is agent_ext_describe(), agent_ext.h. */

#endif
