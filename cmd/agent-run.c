/* agent-run.c - run an agent: AgentInput in, AgentStreamChunk NDJSON out,
 * one final output line.
 *
 * The command line only: the options, the calls that run the invocation
 * phase by phase (libcore/agent/invocation.h: stdin, the eager intake, the
 * MCP servers, tracing, the store and the runtime, the inputs, the end),
 * the messages each phase may give, and the exit status.  What stdout
 * carries in each --format is output.h's. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_ask.h"
#include "cli_chat.h"
#include "../libcore/agent/answer.h"
#include "../libcore/agent/invocation.h"
#include "../libcore/agent/remote.h"
#include "../libcore/base/attach.h"
#include "../libcore/base/trace.h"
#include "../libcore/base/util.h"
#include "../libcore/model/registry.h"

/* The options' keys: the short letters, then long-only groups (the values
 * are the table's alone: each only has to be unique). */
enum {
	OPT_MESSAGE = 'm', OPT_SESSION = 's', OPT_FORMAT = 'f', OPT_DETACH = 'd',
	OPT_CONTINUE = 'c',
	OPT_MODEL = CLI_LONG + 1, OPT_SYSTEM, OPT_TOOL, OPT_MAX_TURNS, OPT_CONFIG, OPT_AGENTS,
	OPT_PROMPT, OPT_INPUT, OPT_SNAPSHOT, OPT_STATE, OPT_INIT, OPT_STORE, OPT_NO_STORE,
	OPT_DESCRIBE, OPT_MAX_RECORD, OPT_KEY_FILE, OPT_MODEL_TIMEOUT,
	OPT_HB_INTERVAL = CLI_LONG + 100, OPT_HB_TIMEOUT, OPT_STDIN_TIMEOUT, OPT_ON_BUSY,
	OPT_BUSY_TIMEOUT,
	OPT_EXEC = CLI_LONG + 300, OPT_DOCS, OPT_STATE_TRANSFORM, OPT_STREAM_TRANSFORM, OPT_LIST,
	OPT_INPUT_FORMAT = CLI_LONG + 400, OPT_LIST_MODELS,
	OPT_OUTPUT_SCHEMA = CLI_LONG + 500, OPT_JSON,
	OPT_TRACE = CLI_LONG + 600, OPT_TRACE_FILE, OPT_TRACE_CONTENT, OPT_TRACE_NAMES,
	OPT_MCP_CONFIG = CLI_LONG + 610, OPT_MCP_LIST, OPT_VERBOSE,
	OPT_URL = CLI_LONG + 700, OPT_HEADER,
	OPT_QUEUE = CLI_LONG + 800, OPT_KEY, OPT_NOT_BEFORE, OPT_MAX_ATTEMPTS, OPT_CONCURRENCY,
	OPT_CLAIMED, OPT_STORE_FD,
	OPT_APPROVE = CLI_LONG + 900, OPT_DENY, OPT_REASON, OPT_RESPOND, OPT_NO_PROMPT, OPT_NO_HISTORY,
	OPT_ATTACH = 'a', OPT_MAX_TOKENS_TOTAL = CLI_LONG + 920,
};

/* Not const: key_file_help() writes --key-file's help at start-up. */
static struct cli_opt opts[] = {
	{ OPT_MESSAGE, "message", "TEXT", "run one turn with this user text (repeatable: one turn each)" },
	{ OPT_SESSION, "session", "ID", "resume the session's latest snapshot, or start a session under ID" },
	{ OPT_SNAPSHOT, "snapshot", "ID", "resume from this snapshot (with --session: it must belong to it)" },
	{ OPT_CONTINUE, "continue", NULL, "resume this agent's most recently updated session (agent-snap sessions)" },
	{ OPT_STATE, "state", "FILE", "client-managed: start from this SessionState (needs --no-store)" },
	{ OPT_INIT, "init", "JSON", "the AgentInit object {sessionId, snapshotId, state} as JSON" },
	{ OPT_MAX_TOKENS_TOTAL, "max-tokens-total", "N", "the run's budget: once its model calls "
	  "have used N tokens in all (totalTokens), no more tool round or turn begins; the run ends "
	  "aborted, RESOURCE_EXHAUSTED (front matter maxUsage)" },
	{ OPT_ATTACH, "attach", "FILE", "add FILE ('-': stdin) to the first turn's message: an image, "
	  "PDF or audio as media, a text file as text; the type from its content (repeatable; "
	  "20 MiB each, 50 MiB in all)" },
	{ OPT_APPROVE, "approve", "REF", "resume the paused session: run the interrupted tool request "
	  "REF (its ref, or its tool's name) again, approved (repeatable)" },
	{ OPT_DENY, "deny", "REF", "resume the paused session: the interrupted request REF does not "
	  "run; the model reads that the user denied it (repeatable)" },
	{ OPT_REASON, "reason", "TEXT", "with --deny: why, told to the model" },
	{ OPT_RESPOND, "respond", "REF=JSON", "resume the paused session: JSON (any JSON value) is "
	  "the output of the interrupted request REF (repeatable)" },
	{ OPT_NO_PROMPT, "no-prompt", NULL, "do not ask on the terminal to approve a tool request "
	  "a turn paused on: end the turn interrupted" },
	{ OPT_NO_HISTORY, "no-history", NULL, "the chat neither reads nor writes its history file "
	  "($XDG_STATE_HOME/agentkit/chat_history)" },
	{ OPT_STORE, "store", "PATH", "the snapshot store (default $AGENTKIT_STORE, then the XDG state dir)" },
	{ OPT_NO_STORE, "no-store", NULL, "client-managed state: no store, the final state is in output.state" },
	{ OPT_AGENTS, "agents", "DIR", "look for NAME.prompt in DIR first (then $AGENTKIT_PATH, ./agents)" },
	{ OPT_PROMPT, "prompt", "NAME", "render this shared prompt (with --input) instead of the agent's own" },
	{ OPT_INPUT, "input", "JSON", "the prompt's input (default: its front matter's input.default)" },
	{ OPT_MODEL, "model", "NAME", "the model: echo, script/PATH, provider/name (overrides the prompt's; "
	  "default $AGENTKIT_MODEL)" },
	{ OPT_SYSTEM, "system", "TEXT", "inline agent: the system instruction" },
	{ OPT_TOOL, "tool", "NAME", "give the agent this tool (a name or a manifest path; repeatable)" },
	{ OPT_MAX_TURNS, "max-turns", "N", "stop the tool loop after N rounds, aborted (default 5)" },
	{ OPT_CONFIG, "config", "JSON", "model configuration object (temperature, maxOutputTokens, ...)" },
	{ OPT_JSON, "json", NULL, "the model must answer in JSON: sent as the provider's JSON mode, checked, "
	  "the value in output.output (docs/providers.md)" },
	{ OPT_OUTPUT_SCHEMA, "output-schema", "FILE", "the model must answer JSON matching this JSON Schema "
	  "(implies --json; replaces the prompt's output schema)" },
	{ OPT_INPUT_FORMAT, "input-format", "FORMAT",
	  "stdin is ndjson (AgentInput lines) or text (one user message); default: ndjson "
	  "when its first non-blank byte is '{', else text" },
	{ OPT_STDIN_TIMEOUT, "stdin-timeout", "DURATION",
	  "with -m, wait this long for stdin's first byte, then go on without stdin "
	  "(default $AGENTKIT_STDIN_TIMEOUT, else 3s; 0: never read stdin)" },
	{ OPT_FORMAT, "format", "FORMAT",
	  "ndjson (default when stdout is not a terminal), text, or json (only the final "
	  "AgentOutput object)" },
	{ OPT_DESCRIBE, "describe", NULL, "print the agent's descriptor and exit" },
	{ OPT_MAX_RECORD, "max-record", "SIZE", "refuse input lines longer than SIZE (default 64M)" },
	{ OPT_KEY_FILE, "key-file", "FILE",      /* the help: key_file_help() */
	  "read the model provider's API key from FILE" },
	{ OPT_MODEL_TIMEOUT, "model-timeout", "DURATION",
	  "each model call, retries included, fails DEADLINE_EXCEEDED past this (default "
	  "$AGENTKIT_MODEL_TIMEOUT, else 10m; a models-file endpoint's \"timeout\" wins)" },
	{ OPT_DETACH, "detach", NULL, "read every input first, then run them in a background worker and print "
	  "the pending snapshot ID at once (docs/detach.md)" },
	{ OPT_QUEUE, "queue", "NAME", "read every input first, then queue the run on NAME for any "
	  "agent-worker of the store to take, and print its pending snapshot ID at once "
	  "(docs/queue.md)" },
	{ OPT_KEY, "key", "KEY", "with --queue: run once per KEY: a later launch with KEY, from any "
	  "host, prints the first one's IDs and does nothing else while its row exists" },
	{ OPT_NOT_BEFORE, "not-before", "TIME", "with --queue: no worker takes the run before TIME "
	  "(RFC 3339, or a duration from now by the store's clock)" },
	{ OPT_MAX_ATTEMPTS, "max-attempts", "N", "with --queue: give up (failed) after N claims "
	  "whose worker was lost (default: the front matter's maxAttempts, else the "
	  "worker's --max-attempts, else 3)" },
	{ OPT_CONCURRENCY, "concurrency", "N", "with --queue: at most N runs of this agent at once "
	  "across every worker and queue (default: the front matter's concurrency, else any)" },
	{ OPT_CLAIMED, "claimed", "ID", "run the queued run ID that this process's agent-worker "
	  "claimed (agent-worker starts agent-run so; docs/queue.md)" },
	{ OPT_STORE_FD, "store-fd", "FD", "read the store's location from descriptor FD (how "
	  "agent-worker passes it: never in argv)" },
	{ OPT_HB_INTERVAL, "heartbeat-interval", "DURATION",
	  "a detached worker beats its row this often (default $AGENTKIT_HEARTBEAT_INTERVAL, else 30s)" },
	{ OPT_HB_TIMEOUT, "heartbeat-timeout", "DURATION",
	  "a pending row whose beat is older is presumed dead (default $AGENTKIT_HEARTBEAT_TIMEOUT, else 60s)" },
	{ OPT_ON_BUSY, "on-busy", "HOW", "--session while another writer's turn runs on it: wait "
	  "(default), fail (exit 5) or fork (both branch from the latest; docs/store.md)" },
	{ OPT_BUSY_TIMEOUT, "busy-timeout", "DURATION", "--on-busy wait waits this long at most, "
	  "then exit 124 (default $AGENTKIT_BUSY_TIMEOUT, else 15m)" },
	{ OPT_EXEC, "exec", "CMD", "a custom agent: the handler command CMD runs each turn (docs/custom-agents.md)" },
	{ OPT_DOCS, "docs", "CMD", "grounding: CMD gets the conversation, prints documents for the turn (docs/transforms.md)" },
	{ OPT_STATE_TRANSFORM, "state-transform", "CMD", "filter the state clients see through CMD, an NDJSON filter" },
	{ OPT_STREAM_TRANSFORM, "stream-transform", "CMD", "filter every streamed chunk through CMD (null drops it)" },
	{ OPT_TRACE, "trace", NULL, "export OpenTelemetry traces (OTEL_TRACES_EXPORTER: otlp, console; "
	  "also $AGENTKIT_TRACE=1; docs/tracing.md)" },
	{ OPT_TRACE_FILE, "trace-file", "FILE", "trace to FILE: one OTLP JSON request per line (implies --trace)" },
	{ OPT_TRACE_CONTENT, "trace-content", NULL, "traces also record prompts, replies, tool input and "
	  "output and states (cut at 64K)" },
	{ OPT_TRACE_NAMES, "trace-names", "NAMES", "span names: genkit (default) or semconv (invoke_agent, "
	  "chat, execute_tool)" },
	{ OPT_LIST, "list", NULL, "list the agents on the agent path with their descriptions and exit; a table on a terminal (--format text), else NDJSON" },
	{ OPT_MCP_CONFIG, "mcp-config", "FILE", "start the MCP servers of FILE ({\"mcpServers\": ...}, "
	  "as .mcp.json) and give the agent their tools (repeatable; also $AGENTKIT_MCP_CONFIG, "
	  "colon-separated; docs/mcp.md)" },
	{ OPT_MCP_LIST, "mcp-list", NULL, "start the MCP servers (only the one named by the operand, if "
	  "given), print one NDJSON line per tool and exit: 1 names a server that failed" },
	{ OPT_VERBOSE, "verbose", NULL, "show what the MCP servers write on stderr, each line as "
	  "'agent-run: mcp NAME: LINE' (a detached worker's log always has them)" },
	{ OPT_URL, "url", "URL", "run the turns on the agent a server serves at URL with Genkit's wire "
	  "(agent-serve, a Genkit app; docs/serve.md), not on a local one; NAME/AGENT: a "
	  "genkit endpoint of the models file" },
	{ OPT_HEADER, "header", "'NAME: VALUE'", "with --url: send this header (repeatable), e.g. "
	  "'Authorization: Bearer TOKEN'" },
	{ OPT_LIST_MODELS, "list-models", NULL,
	  "list the model providers and the models file's endpoints, the key each needs and "
	  "whether it is set, the base URL, and (with a key) the provider's models; a table on "
	  "a terminal, else NDJSON" },
	{ 0 }
};

static const struct cli_exitcode exits[] = {
	{ 0, "completed with a usable result (finish reason stop, other, unknown or empty); detached" },
	{ 1, "the turn failed (a model or tool failure)" },
	{ 2, "aborted: max turns (the output's error status ABORTED), the usage budget "
	  "(RESOURCE_EXHAUSTED), or SIGINT, SIGTERM, SIGHUP or a closed stdout stopped the run "
	  "(CANCELLED)" },
	{ 4, "not found: the agent, a tool, the model, the snapshot or a file the command line "
	  "names" },
	{ 5, "failed precondition (wrong state mode, resume of a pending row, a busy session "
	  "with --on-busy fail); the model's key or credential is not set (UNAUTHENTICATED, "
	  "found before the first turn)" },
	{ 6, "interrupted: a tool interrupted; resume with a {\"resume\":...} input" },
	{ 7, "finished without a usable result (finish reason length or blocked)" },
	{ 100, "usage error" },
	{ 101, "malformed input (bad NDJSON, an invalid AgentInput or init)" },
	{ 111, "system failure (cannot open the store, commit a turn (full disk) or write output)" },
	{ 124, "timed out: the session stayed busy past --busy-timeout" },
	{ -1, NULL }
};

/* What option values are, for the shell completions. */
static const struct cli_value values[] = {
	{ .opt = "session", .kind = CLI_SESSION },
	{ .opt = "snapshot", .kind = CLI_SNAPSHOT },
	{ .opt = "model", .kind = CLI_MODEL },
	{ .opt = "prompt", .kind = CLI_AGENT },
	{ .opt = "format", .kind = CLI_WORDS, .words = "ndjson text json" },
	{ .opt = "input-format", .kind = CLI_WORDS, .words = "ndjson text" },
	{ .opt = "trace-names", .kind = CLI_WORDS, .words = "genkit semconv" },
	{ .opt = "on-busy", .kind = CLI_WORDS, .words = "wait fail fork" },
	{ 0 }
};

static const struct cli_prog prog = {
	.name = "agent-run",
	.purpose = "run an agent turn by turn and stream what it does as NDJSON",
	.synopsis = "[OPTION]... [AGENT] [-m TEXT]...\n[OPTION]... --model NAME [--system TEXT] [--tool NAME]... [-m TEXT]...",
	.description =
	"Runs AGENT (a name looked up as NAME.prompt in --agents DIR, $AGENTKIT_PATH "
	"and ./agents, or a path to a .prompt file), or an inline agent defined by "
	"--model, --system, --tool, --max-turns and --config.  Each -m TEXT is one "
	"turn.  Text piped on stdin joins the first -m turn after a blank line (git "
	"diff | agent-run reviewer -m 'review this'); without -m it is one turn of its "
	"own.  NDJSON on stdin (first non-blank byte '{', or --input-format ndjson) is "
	"one AgentInput per line ({\"message\":...}, {\"resume\":{...}}, {} to "
	"re-attempt), run in order; it cannot be combined with -m.  NDJSON lines are "
	"read as they arrive, also while a turn runs, and queued (a detach line then "
	"detaches at once).  A terminal on stdin is not read when -m is given.  With "
	"stdin and stdout on a terminal and no -m, agent-run is a chat: each line typed "
	"is a turn of the session, /help lists its commands, Ctrl-C stops a turn, "
	"Ctrl-D ends it.  -a FILE adds an image, PDF, audio or text file to the first "
	"turn.  A tool request a turn pauses on is asked on the terminal ('approve NAME "
	"INPUT? [y/N]'), or answered later with --approve, --deny or --respond.\n\n"
	"stdout is NDJSON: the AgentStreamChunk objects of every turn (modelChunk, "
	"customPatch, artifact, turnEnd), flushed one by one, then exactly one final "
	"line: {\"output\": AgentOutput}, or {\"error\": {\"status\", \"message\"}} "
	"when the invocation never started (bad init, unknown agent, model or "
	"snapshot).  --format json prints only that final object (the AgentOutput "
	"itself).  --format text prints the model's text as it streams, each tool call "
	"and its outcome on stderr, and a summary with the usage (colour on a terminal "
	"unless NO_COLOR is set).\n\n"
	"Sessions are server-managed by default: every committed turn writes one "
	"snapshot to the store, --session ID resumes a session's latest snapshot (or "
	"starts one under ID) and --snapshot ID a given one.  With --no-store the state "
	"is client-managed: pass it in with --state FILE and take it from output.state. "
	" The session ID is printed on every output.\n\n"
	"Tools are executables with a JSON manifest (tools/NAME.json beside the agent, "
	"in DIR/tools of the agent path, or ./tools); see docs/agent-run.md for the "
	"tool protocol and the script/PATH model format.\n\n"
	"Detached runs (docs/detach.md): --detach, or an input line with \"detach\": "
	"true, writes a \"pending\" snapshot row, prints {\"output\": "
	"{\"finishReason\": \"detached\", \"sessionId\", \"snapshotId\"}} and exits 0 "
	"at once, while a background worker (its own session, stdio detached) runs the "
	"inputs read so far, beats the row and finalizes it completed, failed or "
	"aborted.  Follow it with agent-wait ID, stop it with agent-abort ID.  The "
	"worker's log is in the store: agent-snap worker-log ID prints it on any host.  "
	"Its stderr goes to STORE/logs/ID.log beside the store (for a store on a "
	"server, ~/.local/state/agentkit/logs/ID.log on the worker's host), or to "
	"/dev/null when that host cannot keep one.\n\n"
	"SIGINT, SIGTERM and SIGHUP (or the reader of stdout going away) stop an "
	"attached run: the turn in flight is cancelled, a turn that committed is "
	"written \"aborted\", the final line still names the resume point, exit 2.  A "
	"second signal ends agent-run at once.",
	.opts = opts,
	.examples =
	"$ agent-run --no-store --model echo -m hi\n"
	"  one turn with the offline echo model, state in output.state\n"
	"$ git diff | agent-run reviewer -m 'review this' --format json\n"
	"  the turn is the -m text, a blank line, the diff; only the output object\n"
	"$ agent-run tasks -m 'add buy milk' | jpatch-apply --stream\n"
	"  run the tasks agent and follow its custom state live\n"
	"$ agent-run tasks --session \"$id\" -m 'and mark it done'\n"
	"  continue a session from its latest snapshot\n"
	"$ agent-run deployer --session \"$id\" --approve d1\n"
	"  run the tool request the turn paused on again, approved, and go on\n"
	"$ agent-run describer -m 'what is this?' -a photo.jpg\n"
	"  attach a picture to the turn\n"
	"$ id=$(agent-run tasks --detach -m 'plan the week' | jq -r .output.snapshotId)\n"
	"  run in the background; then: agent-wait --timeout 10m \"$id\"",
	.exits = exits,
	.values = values,
	.operands = CLI_AGENT,
};

/* The command line, as parse_options() leaves it. */
struct run_opts {
	struct agent_spec spec;         /* the agent; spec.tools is tools */
	struct agent_ext_spec xspec;    /* --exec, --docs, the transforms */
	struct invocation_stdin in;     /* -m, --input-format, --max-record, --stdin-timeout */
	struct invocation_open open;    /* --no-store, --store, --continue (heartbeats later) */
	struct invocation_trace trace;  /* --trace, --trace-file, --trace-content, --trace-names */
	const char *state_file, *init_json, *session, *snapshot;
	struct invocation_flags flags;          /* the duration flags, or NULL */
	const char *stdin_wait;         /* --stdin-timeout as given, else the variable's, else "3s" */
	const char **messages, **tools;         /* NULL-terminated, or NULL */
	size_t nmsg, ntools;
	const char *url;                /* --url: a remote agent (remote.h) */
	const char **headers;           /* --header, NULL-terminated, or NULL */
	size_t nheaders;
	enum output_format format;      /* --format (default: text when stdout is a terminal) */
	int describe, detach, list, list_models;
	const char **mcp_configs;       /* --mcp-config, NULL-terminated, or NULL */
	size_t nmcp;
	int mcp_list, verbose;
	struct detach_enqueue enq;      /* --queue and its options (enq.queue NULL: none) */
	const char *not_before;         /* --not-before as given */
	int concurrency_set;
	json_t *run_args;               /* the options a queued run's worker is given */
	const char *claimed;            /* --claimed ID */
	const char *store_fd;           /* --store-fd FD */
	struct answer *answers;         /* --approve, --deny, --respond, in order */
	size_t nanswers;
	json_t *outputs;                /* --respond's values (owns them) */
	const char **attach;            /* -a FILE, NULL-terminated, or NULL */
	size_t nattach;
	json_t *parts;                  /* ... read: their parts (owned) */
	int no_prompt;                  /* --no-prompt */
	int no_history;                 /* --no-history */
	int chat;                       /* a person at the terminal, no input given */
};

/* What main() holds; released at its out: label. */
struct run {
	struct run_opts opts;
	struct invocation inv;          /* the run itself (invocation.h) */
	struct core_buf store_loc;      /* --store-fd: the location read */
	json_t *claimed;                /* --claimed: the queued run's row */
	char **args;                    /* argv as given, before options were read */
	int nargs;
};

static enum core_status out_write(void *ctx, const char *p, size_t n, struct core_err *e)
{
	return cli_write(p, n, e);
}

static enum core_status out_flush(void *ctx, struct core_err *e)
{
	return cli_flush(e);
}

/* A text-mode line for stderr (a tool line), after what stdout holds. */
static void out_note(void *ctx, const char *line, size_t n)
{
	fflush(stdout);
	fprintf(stderr, "%.*s\n", (int)n, line);
}

static enum core_status report_oom(void)
{
	return cli_report(&(struct core_err){ CORE_ENOMEM, 0, "out of memory" });
}

/* The final {"error": ...} line of an invocation that never started. */
/* The last init failure, for a claimed run's row (claimed_failed()). */
static struct core_err init_failure;

static enum core_status init_failed(struct output *o, const struct core_err *e)
{
	init_failure = *e;
	cli_report(e);
	output_error(o, e);
	return e->st;
}

/* agent-run --list: the agents on the agent path, a table (text) or one NDJSON line each. */
static enum core_status list_agents(struct output *o, const char *agents_dir)
{
	struct core_err e = { 0 };
	json_t *list = NULL;
	enum core_status st = agent_ext_list(agents_dir, &list, &e);
	if (st)
		return cli_report(&e);
	if ((st = output_agents(o, list)) && st != CORE_EPIPE)
		cli_report(&o->err);
	json_decref(list);
	return st;
}

/*
 * agent-run --list-models: one row per provider (model_list), a table on a
 * terminal and NDJSON otherwise.  A provider whose list could not be read
 * is named on stderr and the exit status is 1; the other rows still print.
 */
static enum core_status list_models(struct output *o, const char *key_file)
{
	struct core_err e = { 0 };
	json_t *rows = NULL, *row;
	size_t i;
	int failed, width = 10;
	if (!key_file)
		key_file = getenv("AGENTKIT_KEY_FILE");
	enum core_status st = model_list(key_file, &rows, &failed, &e);
	if (st)
		return cli_report(&e);
	/* The name column: the widest name and a space (10 at least). */
	json_array_foreach(rows, i, row) {
		size_t n = strlen(json_string_value(json_object_get(row, "provider")));
		if ((int)n + 1 > width && n < 80)
			width = (int)n + 1;
	}
	json_array_foreach(rows, i, row) {
		const json_t *err = json_object_get(row, "error");
		if (err)
			cli_warn("%s", json_string_value(json_object_get(err, "message")));
		if ((st = output_model(o, row, width, NULL)))
			break;
	}
	if (!st)
		st = output_model(o, NULL, width, getenv("AGENTKIT_MODEL"));
	json_decref(rows);
	if (st && st != CORE_EPIPE)
		cli_report(&o->err);
	return st ? st : failed ? CORE_FAILED : CORE_OK;
}

/* Append arg to the NULL-terminated *v of *n items (-m, --tool). */

static int has_space(const char *s)
{
	return s && s[strcspn(s, " \t\n")];
}

/*
 * Values that are almost surely text meant for something else, a habit
 * from other tools (llm's -s is --system): IDs and agent names have no
 * blanks.  A path to a prompt file may.
 */
static enum core_status check_habits(const struct run_opts *op)
{
	const char *name = op->spec.name;
	if (has_space(op->session))
		return cli_usage("--session '%s' is not a session ID (IDs have no spaces); for a "
		                 "system instruction use --system TEXT, to send text use -m TEXT",
		                 op->session);
	if (has_space(op->snapshot))
		return cli_usage("--snapshot '%s' is not a snapshot ID (IDs have no spaces)",
		                 op->snapshot);
	if (has_space(name) && !strchr(name, '/')
	    && !(strlen(name) > 7 && !strcmp(name + strlen(name) - 7, ".prompt")))
		return cli_usage("'%s' is not an agent name (names have no spaces); to send text "
		                 "use -m TEXT", name);
	return CORE_OK;
}

/* The options that travel with a queued run to its worker: what defines
 * the agent and how it runs (docs/queue.md); not the inputs, the session,
 * the store or the output. */
static int travels(int key)
{
	static const int keys[] = {
		OPT_AGENTS, OPT_PROMPT, OPT_INPUT, OPT_MODEL, OPT_SYSTEM, OPT_TOOL, OPT_MAX_TURNS,
		OPT_CONFIG, OPT_JSON, OPT_OUTPUT_SCHEMA, OPT_KEY_FILE, OPT_MODEL_TIMEOUT, OPT_EXEC,
		OPT_DOCS, OPT_STATE_TRANSFORM, OPT_STREAM_TRANSFORM, OPT_TRACE, OPT_TRACE_FILE,
		OPT_TRACE_CONTENT, OPT_TRACE_NAMES, OPT_MCP_CONFIG, OPT_VERBOSE, OPT_HB_INTERVAL,
		OPT_HB_TIMEOUT, OPT_MAX_TOKENS_TOTAL, 0,
	};
	for (const int *k = keys; *k; k++)
		if (*k == key)
			return 1;
	return 0;
}

static enum core_status add_travel(struct run_opts *op, int key, const char *arg)
{
	const struct cli_opt *o = opts;
	char flag[64];
	while (o->key && o->key != key)
		o++;
	snprintf(flag, sizeof flag, "--%s", o->name);
	if ((!op->run_args && !(op->run_args = json_array())) ||
	    json_array_append_new(op->run_args, json_string(flag)) ||
	    (o->arg && json_array_append_new(op->run_args, json_string(arg))))
		return report_oom();
	return CORE_OK;
}

/* --approve REF, --deny REF, --respond REF=JSON: one answer more. */
static enum core_status push_answer(struct run_opts *op, int key, const char *arg)
{
	static const char *const flags[] = { "--approve", "--deny", "--respond" };
	enum answer_kind kind = key == OPT_APPROVE ? ANSWER_APPROVE : key == OPT_DENY ? ANSWER_DENY
	                        : ANSWER_RESPOND;
	struct answer a = { kind, arg, NULL, NULL, flags[kind] };
	struct core_err e = { 0 };
	if (kind == ANSWER_RESPOND) {
		const char *eq = strchr(arg, '=');
		char *ref;
		if (!eq || eq == arg)
			return cli_usage("--respond takes REF=JSON (the request's ref, '=', the tool's "
			                 "output as JSON), not '%s'", arg);
		json_t *v = jv_parse(eq + 1, strlen(eq + 1), "--respond", 0, &e);
		if (!v)
			return cli_usage("--respond '%s': %s", arg, e.msg);
		if (!op->outputs && !(op->outputs = json_array()))
			return report_oom();
		if (json_array_append_new(op->outputs, v) || !(ref = strndup(arg, (size_t)(eq - arg))))
			return report_oom();
		/* the ref's copy lives as long as the outputs: a string beside them */
		json_array_append_new(op->outputs, json_string(ref));
		free(ref);
		a.ref = json_string_value(json_array_get(op->outputs, json_array_size(op->outputs) - 1));
		a.output = v;
	} else if (!*arg) {
		return cli_usage("%s needs a ref (or a tool name)", flags[kind]);
	}
	struct answer *na = realloc(op->answers, (op->nanswers + 1) * sizeof *na);
	if (!na || !a.ref)
		return report_oom();
	op->answers = na;
	op->answers[op->nanswers++] = a;
	return CORE_OK;
}

/* --reason TEXT: the last --deny's. */
static enum core_status take_reason(struct run_opts *op, const char *arg)
{
	struct answer *a = op->nanswers ? &op->answers[op->nanswers - 1] : NULL;
	if (!a || a->kind != ANSWER_DENY)
		return cli_usage("--reason goes after the --deny REF it explains");
	if (a->reason)
		return cli_usage("--deny '%s' has two reasons: give --reason once", a->ref);
	a->reason = arg;
	return CORE_OK;
}

/* One option into op (--format's value into *format, checked once all are read). */
static enum core_status take_option(struct run_opts *op, int key, const char *arg,
                                    const char **format)
{
	struct agent_spec *spec = &op->spec;
	struct agent_ext_spec *xspec = &op->xspec;
	struct core_err e = { 0 };
	if (travels(key) && add_travel(op, key, arg))
		return CORE_ENOMEM;
	switch (key) {
	case OPT_QUEUE:
		if (!*arg || strlen(arg) > STORE_QUEUE_NAME_MAX)
			return cli_usage("--queue: a queue's name is 1 to %d bytes", STORE_QUEUE_NAME_MAX);
		op->enq.queue = arg;
		break;
	case OPT_KEY: op->enq.key = arg; break;
	case OPT_NOT_BEFORE: op->not_before = arg; break;
	case OPT_MAX_ATTEMPTS: return cli_count("--max-attempts", arg, 1000, &op->enq.max_attempts);
	case OPT_CONCURRENCY:
		op->concurrency_set = 1;
		return cli_count("--concurrency", arg, 100000, &op->enq.concurrency);
	case OPT_CLAIMED: op->claimed = arg; break;
	case OPT_STORE_FD: op->store_fd = arg; break;
	case OPT_MESSAGE: return cli_push_arg(&op->messages, &op->nmsg, arg);
	case OPT_TOOL: return cli_push_arg(&op->tools, &op->ntools, arg);
	case OPT_HEADER: return cli_push_header(&op->headers, &op->nheaders, arg);
	case OPT_URL: op->url = arg; break;
	case OPT_SESSION: op->session = arg; break;
	case OPT_SNAPSHOT: op->snapshot = arg; break;
	case OPT_CONTINUE: op->open.cont = 1; break;
	case OPT_STATE: op->state_file = arg; break;
	case OPT_INIT: op->init_json = arg; break;
	case OPT_STORE: op->open.store_path = arg; break;
	case OPT_NO_STORE: op->open.no_store = 1; break;
	case OPT_AGENTS: spec->agents_dir = arg; break;
	case OPT_PROMPT: spec->prompt = arg; break;
	case OPT_INPUT: spec->input_json = arg; break;
	case OPT_MODEL: spec->model = arg; break;
	case OPT_SYSTEM: spec->system = arg; break;
	case OPT_CONFIG: spec->config_json = arg; break;
	case OPT_DESCRIBE: op->describe = 1; break;
	case OPT_FORMAT: *format = arg; break;
	case OPT_INPUT_FORMAT:
		if (strcmp(arg, "ndjson") && strcmp(arg, "text"))
			return cli_usage("--input-format must be ndjson or text, not '%s'", arg);
		op->in.format = !strcmp(arg, "text") ? INTAKE_TEXT : INTAKE_NDJSON;
		break;
	case OPT_LIST_MODELS: op->list_models = 1; break;
	case OPT_MAX_TURNS: {
		char *end;
		long n = strtol(arg, &end, 10);
		if (*arg == 0 || *end)
			return cli_usage("--max-turns: '%s' is not a number (give a count of "
			                 "rounds, 1 or more)", arg);
		if (n < 1 || n > 1000000)
			return cli_usage("--max-turns must be from 1 to 1000000, got '%s'", arg);
		spec->max_turns = (int)n;
		break;
	}
	case OPT_DETACH: op->detach = 1; break;
	case OPT_EXEC: xspec->exec = arg; spec->model_optional = 1; break;
	case OPT_DOCS: xspec->docs = arg; break;
	case OPT_KEY_FILE: spec->key_file = arg; break;
	case OPT_MODEL_TIMEOUT:
		if (invocation_model_timeout(arg, &e))
			return cli_usage("%s", e.msg);
		break;
	case OPT_STATE_TRANSFORM: xspec->state_transform = arg; break;
	case OPT_STREAM_TRANSFORM: xspec->stream_transform = arg; break;
	case OPT_LIST: op->list = 1; break;
	case OPT_MCP_CONFIG: return cli_push_arg(&op->mcp_configs, &op->nmcp, arg);
	case OPT_MCP_LIST: op->mcp_list = 1; break;
	case OPT_VERBOSE: op->verbose = 1; break;
	case OPT_JSON: spec->json_output = 1; break;
	case OPT_OUTPUT_SCHEMA: spec->output_schema = arg; break;
	case OPT_HB_INTERVAL: op->flags.hb_interval = arg; break;
	case OPT_HB_TIMEOUT: op->flags.hb_timeout = arg; break;
	case OPT_ON_BUSY: op->flags.on_busy = arg; break;
	case OPT_BUSY_TIMEOUT: op->flags.busy_timeout = arg; break;
	case OPT_STDIN_TIMEOUT: op->stdin_wait = arg; break;
	case OPT_TRACE: op->trace.on = 1; break;
	case OPT_TRACE_FILE: op->trace.file = arg; break;
	case OPT_TRACE_CONTENT: op->trace.content = 1; break;
	case OPT_TRACE_NAMES:
		if (strcmp(arg, "genkit") && strcmp(arg, "semconv"))
			return cli_usage("--trace-names must be genkit or semconv, not '%s'", arg);
		op->trace.semconv = !strcmp(arg, "semconv");
		break;
	case OPT_MAX_RECORD: return cli_size("--max-record", arg, &op->in.max_record);
	case OPT_APPROVE: case OPT_DENY: case OPT_RESPOND: return push_answer(op, key, arg);
	case OPT_REASON: return take_reason(op, arg);
	case OPT_NO_PROMPT: op->no_prompt = 1; break;
	case OPT_NO_HISTORY: op->no_history = 1; break;
	case OPT_ATTACH: return cli_push_arg(&op->attach, &op->nattach, arg);
	case OPT_MAX_TOKENS_TOTAL: {
		char *end;
		errno = 0;
		long long n = strtoll(arg, &end, 10);
		if (!*arg || *end || errno || n < 1)
			return cli_usage("--max-tokens-total must be a whole number of tokens, 1 or "
			                 "more, not '%s'", arg);
		spec->max_tokens_total = n;
		break;
	}
	}
	return CORE_OK;
}

/* --queue and --claimed: what goes with them (docs/queue.md). */
static enum core_status queue_options(struct run_opts *op)
{
	struct core_err e = { 0 };
	if (!op->enq.queue && (op->enq.key || op->not_before || op->enq.max_attempts ||
	                       op->concurrency_set))
		return cli_usage("--key, --not-before, --max-attempts and --concurrency go with "
		                 "--queue");
	if (op->enq.queue && (op->open.no_store || op->url || op->state_file))
		return cli_usage("--queue needs the store: drop --no-store, --state and --url");
	if (op->enq.key && (!*op->enq.key || strlen(op->enq.key) > STORE_ID_MAX))
		return cli_usage("--key: a key is 1 to %d bytes", STORE_ID_MAX);
	if (op->not_before) {
		int64_t ns, ms;
		if (core_time_parse(op->not_before, &ns) == CORE_OK)
			op->enq.not_before_ns = ns;
		else if (core_parse_duration(op->not_before, &ms, &e) == CORE_OK)
			op->enq.delay_ms = ms;
		else
			return cli_usage("--not-before: '%s' is neither an RFC 3339 time nor a duration",
			                 op->not_before);
	}
	if (op->enq.queue) {
		op->detach = 1;         /* every input first, as --detach reads them */
		/* the agent by name, resolved on the worker's agent path */
		if (op->spec.name && ((!op->run_args && !(op->run_args = json_array())) ||
		                      json_array_append_new(op->run_args, json_string(op->spec.name))))
			return report_oom();
		if (!op->run_args && !(op->run_args = json_array()))
			return report_oom();
		op->enq.args = op->run_args;
	}
	if (op->store_fd && op->open.store_path)
		return cli_usage("--store and --store-fd exclude each other");
	if (op->claimed && (op->nmsg || op->session || op->snapshot || op->open.cont ||
	                    op->init_json || op->state_file || op->open.no_store ||
	                    op->enq.queue || op->detach || op->url))
		return cli_usage("--claimed runs a queued run's own inputs on its own session: drop "
		                 "-m, --session, --snapshot, --continue, --init, --state, --no-store, "
		                 "--queue, --detach and --url");
	return CORE_OK;
}

static enum core_status parse_options(int argc, char **argv, struct run_opts *op)
{
	const char *arg, *format = NULL;
	struct core_err e = { 0 };
	enum core_status st = CORE_OK;
	int key;
	op->in.max_record = CORE_LINES_DEFAULT_MAX;
	op->trace.service = "agent-run";
	op->trace.version = AGENTKIT_VERSION;
	while (!st && (key = cli_next(argc, argv, &arg)) != -1)
		st = take_option(op, key, arg, &format);
	if (st)
		return st;
	if (intake_stdin_wait(op->stdin_wait, &op->stdin_wait, &op->in.wait_ms, &e))
		return cli_usage("%s", e.msg);
	op->in.messages = op->nmsg > 0;
	if (optind < argc)
		op->spec.name = argv[optind++];
	if (optind < argc)
		return cli_usage("unexpected argument '%s'", argv[optind]);
	if ((st = check_habits(op)))
		return st;
	if (format && strcmp(format, "ndjson") && strcmp(format, "text") && strcmp(format, "json"))
		return cli_usage("--format must be ndjson, text or json, not '%s'", format);
	op->format = !format ? (isatty(1) ? OUTPUT_TEXT : OUTPUT_NDJSON)
	             : !strcmp(format, "text") ? OUTPUT_TEXT
	             : !strcmp(format, "json") ? OUTPUT_JSON : OUTPUT_NDJSON;
	if (op->open.no_store && op->open.store_path)
		return cli_usage("--store and --no-store exclude each other");
	if (op->open.cont && (op->session || op->snapshot || op->state_file || op->init_json ||
	                      op->open.no_store))
		return cli_usage("--continue picks the session: drop --session, --snapshot, "
		                 "--state, --init and --no-store");
	if ((st = queue_options(op)))
		return st;
	if (op->nanswers && op->nmsg)
		return cli_usage("-m and --approve, --deny or --respond both give the turn's input: "
		                 "use one");
	if (op->nanswers && !op->session && !op->snapshot && !op->open.cont && !op->state_file &&
	    !op->init_json)
		return cli_usage("--approve, --deny and --respond answer a paused session: name it "
		                 "with --session ID (or --snapshot ID, --continue, --state FILE)");
	if (op->nanswers && op->url)
		return cli_usage("--approve, --deny and --respond answer a local session: with --url, "
		                 "send the {\"resume\": ...} line on stdin");
	size_t stdin_attach = 0;
	for (size_t i = 0; i < op->nattach; i++)
		stdin_attach += !strcmp(op->attach[i], "-");
	if (stdin_attach > 1)
		return cli_usage("-a - reads stdin once: give it once");
	if (op->nattach && op->nanswers)
		return cli_usage("-a adds to a message: a resume (--approve, --deny, --respond) has "
		                 "none");
	/* Stdin and stdout on a terminal and no input given: a chat. */
	op->chat = !op->nmsg && !op->nanswers && !op->nattach && !op->detach && !op->url &&
	           !op->in.format && !op->describe && !op->list && !op->list_models &&
	           !op->mcp_list && op->format == OUTPUT_TEXT && isatty(0) && isatty(1);
	if (op->nanswers || stdin_attach || op->chat) { /* stdin is not read as input */
		op->in.messages = 1;
		op->in.wait_ms = 0;
	}
	op->spec.tools = op->tools;
	op->spec.default_model = getenv("AGENTKIT_MODEL");
	return CORE_OK;
}

/* The answers' resume (answer.h) as the invocation's one input line. */
static enum core_status answers_input(struct run *r)
{
	struct core_err e = { 0 };
	json_t *input = NULL;
	enum core_status st = answer_resume(rt_last_message(r->inv.rt), rt_session_id(r->inv.rt),
	                                    r->opts.answers, r->opts.nanswers, &input, &e);
	if (st)
		return init_failed(&r->inv.out, &e);
	core_buf_release(&r->inv.in);
	r->inv.in = (struct core_buf)CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (jv_dump(input, &r->inv.in) || core_buf_addc(&r->inv.in, '\n')) {
		json_decref(input);
		return report_oom();
	}
	json_decref(input);
	r->inv.stdin_kind = INTAKE_NDJSON;
	return CORE_OK;
}

/* ---- the invocation (invocation.h), phase by phase ---- */

/* The init: --init, then the flags (each key given once). */
static enum core_status build_init(struct run *r)
{
	const struct run_opts *op = &r->opts;
	struct core_err e = { 0 };
	struct feed_init f = { op->init_json, op->session, op->snapshot, op->state_file,
	                       op->in.max_record };
	enum core_status st = feed_init(&f, &r->inv.init, &e);
	if (st == CORE_EUSAGE)
		return cli_usage("%s", e.msg);
	if (st == CORE_ENOMEM && !r->inv.init && !op->init_json)
		return report_oom();
	return st ? init_failed(&r->inv.out, &e) : CORE_OK;
}

/* "agent-run: models are ..." after a model that is not one. */
static void models_hint(void)
{
	const char *p, *sep = " ";
	fprintf(stderr, "%s: models are echo, script/PATH or PROVIDER/NAME; providers:", cli_progname);
	for (size_t i = 0; (p = model_provider_name(i)); i++)
		if (strcmp(p, "echo") && strcmp(p, "script")) {
			fprintf(stderr, "%s%s", sep, p);
			sep = ", ";
		}
	fprintf(stderr, " (agent-run --list-models)\n");
}

/* The agent and its extensions (ext); its model and the model's
 * credentials are checked before any turn starts (except for --describe,
 * which describes it as it is). */
static enum core_status load_agent(struct run *r)
{
	struct invocation *inv = &r->inv;
	struct core_err e = { 0 };
	enum core_status st = agent_load(&r->opts.spec, &inv->agent, &e);
	if (st == CORE_ENOTFOUND && !inv->agent && !strncmp(e.msg, "agent '", 7)) {
		init_failed(&inv->out, &e);
		cli_warn("agent-run --list lists the agents; to send text use -m TEXT");
		return st;
	}
	if (!st)
		st = agent_ext_load(inv->agent, &r->opts.xspec, &inv->ext, &e);
	if (st)
		return st == CORE_EUSAGE ? cli_usage("%s", e.msg) : init_failed(&inv->out, &e);
	/* A remote agent's model (url:) is its server's. */
	if (!inv->agent->model || inv->agent->url || r->opts.describe)
		return CORE_OK;
	if ((st = model_check(inv->agent->model, &e))) {
		init_failed(&inv->out, &e);
		/* A models file that cannot be read is no misspelt model. */
		if (strncmp(e.msg, "models file", 11))
			models_hint();
		return st;
	}
	/* Its key before anything runs (a custom agent's handler picks its
	 * models and may call none). */
	if (!agent_ext_is_custom(inv->ext) &&
	    (st = model_check_credentials(inv->agent->model, inv->agent->key_file, &e)))
		init_failed(&inv->out, &e);
	return st;
}

/* -a FILE...: each file's part (attach.h), and whether the agent's model
 * takes it, asked before anything runs. */
static enum core_status read_attachments(struct run *r)
{
	struct run_opts *op = &r->opts;
	struct core_err e = { 0 };
	size_t used = 0;
	enum core_status st;
	if (!op->nattach)
		return CORE_OK;
	if (!(op->parts = json_array()))
		return report_oom();
	for (size_t i = 0; i < op->nattach; i++) {
		json_t *part = NULL, *msgs;
		if ((st = attach_part(op->attach[i], &used, &part, &e)))
			return st == CORE_EUSAGE ? cli_usage("%s", e.msg) : init_failed(&r->inv.out, &e);
		json_array_append_new(op->parts, part);
		if (!r->inv.agent || !r->inv.agent->model || r->inv.agent->url)
			continue;       /* a custom agent's handler, a server, picks its models */
		if (!(msgs = json_pack("[{s:s, s:[O]}]", "role", "user", "content", part)))
			return report_oom();
		struct model_request req = { .messages = msgs };
		st = model_check_request(r->inv.agent->model, &req, &e);
		json_decref(msgs);
		if (st)
			return st == CORE_ENOMEM ? report_oom()
			       : cli_usage("attach '%s': %s", strcmp(op->attach[i], "-") ? op->attach[i]
			                   : "stdin", e.msg);
	}
	r->inv.feed.attach = op->parts;
	return CORE_OK;
}

/* agent-run --describe: the agent's descriptor line. */
static enum core_status describe_agent(struct run *r)
{
	struct core_err e = { 0 };
	json_t *d = NULL;
	enum core_status st = agent_ext_describe(r->inv.agent, r->inv.ext, !r->opts.open.no_store,
	                                         &d, &e);
	if (st)
		return init_failed(&r->inv.out, &e);
	if ((st = output_line(&r->inv.out, d)))
		cli_report(&r->inv.out.err);    /* nothing for CORE_EPIPE */
	json_decref(d);
	return st;
}

/*
 * The next step after an init that Genkit refused over the state mode: its
 * messages (kept exact in the JSON line) speak of Genkit's options, this
 * line of agent-run's flags.
 */
static void init_next_step(const struct run_opts *op, enum core_status st)
{
	int ids = op->session || op->snapshot;
	if (st == CORE_EPRECONDITION && op->state_file && !op->open.no_store)
		cli_warn("--state FILE is for client-managed runs: add --no-store (or resume "
		         "from the store with --session ID)");
	else if (st == CORE_EPRECONDITION && ids && op->open.no_store)
		cli_warn("--session and --snapshot resume from the store: drop --no-store (or "
		         "pass --state FILE)");
	else if (st == CORE_EINVAL && ids && op->state_file)
		cli_warn("give --state FILE or --session/--snapshot, not both");
}

/* What stdin holds; what agent-run says of a silent or empty one. */
static enum core_status read_stdin(struct run *r)
{
	const struct run_opts *op = &r->opts;
	struct core_err e = { 0 };
	enum core_status st = invocation_read_stdin(&r->inv, &op->in, &e);
	if (st)
		return st == CORE_ENOMEM && !e.sys ? cli_report(&e) : init_failed(&r->inv.out, &e);
	if (r->inv.stdin_silent && op->in.wait_ms && !invocation_stop_signal())
		cli_warn("no input on stdin within %s: going on without it (give "
		         "</dev/null, or --stdin-timeout 0, to not read stdin)", op->stdin_wait);
	if (r->inv.stdin_kind == INTAKE_NDJSON && op->nattach)
		return cli_usage("-a adds to the -m or stdin text turn; NDJSON inputs carry their "
		                 "own parts");
	if (r->inv.stdin_kind == INTAKE_NDJSON && op->nmsg)
		return cli_usage("-m and NDJSON on stdin both give turns: use one (or "
		                 "--input-format text to send stdin as text after the -m text)");
	if (!op->nmsg && !op->nanswers && !op->nattach && !op->chat &&
	    r->inv.stdin_kind == INTAKE_NONE &&
	    !invocation_stop_signal())
		cli_warn("no input: stdin is empty and no -m was given; nothing ran");
	return CORE_OK;
}

/* The eager intake; the front of a split run ends as its back did. */
static enum core_status start_intake(struct run *r)
{
	struct core_err e = { 0 };
	int sig;
	if (invocation_start_intake(&r->inv, r->opts.detach, r->opts.in.max_record, &sig, &e))
		return cli_report(&e);
	if (sig) {
		/* The back died of a signal: so does the front. */
		signal(sig, SIG_DFL);
		raise(sig);
	}
	return CORE_OK;
}

/* ---- MCP servers (docs/mcp.md; libcore/agent/mcp_run.h) ---- */

/* A server's stderr line: shown with --verbose, and in a detached worker
 * (its stderr is its log). */
static void worker_log(void *ctx, const char *line);

/* A worker's MCP lines and warnings are lines of its log (docs/detach.md). */
static void mcp_stderr_line(void *ctx, const char *server, const char *line)
{
	struct run *r = ctx;
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (r->inv.det.role == DETACH_WORKER && !core_buf_addf(&b, "mcp %s: %s", server, line))
		worker_log(r, b.p);
	else if (r->opts.verbose || r->inv.det.role == DETACH_WORKER)
		cli_warn("mcp %s: %s", server, line);
	core_buf_release(&b);
}

static enum core_status load_mcp(struct run *r)
{
	struct core_err e = { 0 };
	enum core_status st = mcp_run_load(&r->inv.mcp, r->opts.mcp_configs, r->opts.nmcp, &e);
	if (st == CORE_EUSAGE)
		return cli_usage("%s", e.msg);
	return st ? cli_report(&e) : CORE_OK;
}

static void mcp_skipped(void *ctx, const struct core_err *e)
{
	cli_warn("%s (not required: the run goes on without its tools)", e->msg);
}

/* Start every server and give the agent their tools. */
static enum core_status start_mcp(struct run *r)
{
	struct invocation *inv = &r->inv;
	struct core_err e = { 0 };
	enum core_status st = invocation_start_mcp(inv, mcp_skipped, r, &e);
	if (st)
		return st == CORE_EUSAGE ? cli_usage("%s", e.msg)
		     : inv->mcp_set ? init_failed(&inv->out, &e) : cli_report(&e);
	if ((st = mcp_run_tools(inv->mcp_set, inv->agent, r->opts.ntools, &e)))
		return st == CORE_EUSAGE ? cli_usage("%s", e.msg) : cli_report(&e);
	return CORE_OK;
}

static void mcp_list_failed(void *ctx, const struct core_err *e)
{
	cli_report(e);
}

/* agent-run --mcp-list [NAME]: each server's tools, one line each. */
static enum core_status list_mcp(struct run *r)
{
	struct core_err e = { 0 };
	enum core_status st;
	if (!r->inv.mcp.n)
		return cli_usage("--mcp-list needs --mcp-config FILE or $AGENTKIT_MCP_CONFIG");
	if (invocation_mcp_set(&r->inv, &e))
		return cli_report(&e);
	st = mcp_run_list(r->inv.mcp_set, &r->inv.mcp, r->opts.spec.name, output_row,
	                  mcp_list_failed, &r->inv.out, &e);
	if (st == CORE_EUSAGE)
		return cli_usage("%s", e.msg);
	/* CORE_FAILED: each failed server is named already. */
	return st && st != CORE_FAILED ? cli_report(&e) : st;
}

/* Tracing, the heartbeat settings, the store (unless --no-store) and the
 * runtime. */
static enum core_status open_runtime(struct run *r)
{
	const struct run_opts *op = &r->opts;
	struct core_err e = { 0 };
	struct invocation_open o = op->open;
	enum core_status st;
	o.claimed_id = op->claimed;
	invocation_trace(&r->inv, &op->trace);
	if (invocation_settings(&op->flags, &o, &e))
		return cli_usage("%s", e.msg);
	if ((st = invocation_open(&r->inv, &o, &e))) {
		init_failed(&r->inv.out, &e);
		if (r->inv.store || op->open.no_store)       /* the runtime refused the init */
			init_next_step(op, st);
	}
	return st;
}

/* --store-fd FD: the store's location, read whole from FD (then closed). */
static enum core_status store_from_fd(struct run *r)
{
	struct core_err e = { 0 };
	char *end;
	long fd = strtol(r->opts.store_fd, &end, 10);
	if (!*r->opts.store_fd || *end || fd < 0 || fd > 1024)
		return cli_usage("--store-fd: '%s' is not a descriptor", r->opts.store_fd);
	char path[32];
	snprintf(path, sizeof path, "/dev/fd/%ld", fd);
	core_buf_init(&r->store_loc, 65536);
	if (core_buf_read_file(&r->store_loc, path, &e)) {
		cli_warn("cannot read the store's location from descriptor %ld: %s", fd, e.msg);
		return CORE_ESYS;
	}
	close((int)fd);
	while (r->store_loc.len && r->store_loc.p[r->store_loc.len - 1] == '\n')
		r->store_loc.p[--r->store_loc.len] = 0;
	if (!r->store_loc.len || core_buf_addc(&r->store_loc, 0) || !r->store_loc.p[0]) {
		cli_warn("descriptor %ld gave no store location", fd);
		return CORE_ESYS;
	}
	r->opts.open.store_path = r->store_loc.p;
	return CORE_OK;
}

/* --claimed ID: the queued run's row, whose session and parent the run
 * resumes (the inputs come with it: invocation_run_claimed()). */
static enum core_status read_claimed(struct run *r)
{
	struct run_opts *op = &r->opts;
	struct core_err e = { 0 };
	struct store *s = NULL;
	enum core_status st = store_open_default(op->open.store_path, STORE_OPEN_EXISTING, &s, &e);
	if (!st)
		st = store_get(s, op->claimed, STORE_METADATA_ONLY, &r->claimed, &e);
	store_close(s);
	if (!st && !store_queue_of(r->claimed))
		st = core_fail(&e, CORE_EPRECONDITION, "snapshot '%s' is not a queued run",
		               op->claimed);
	if (st) {
		cli_warn("%s", e.msg);
		return st;
	}
	op->session = json_string_value(json_object_get(r->claimed, "sessionId"));
	op->snapshot = json_string_value(json_object_get(r->claimed, "parentId"));
	return CORE_OK;
}

/* A claimed run that cannot start here (its agent, model or key): its row
 * settles failed, so no worker takes it again for the same reason. */
static void claimed_failed(struct run *r, enum core_status st)
{
	struct core_err e = { 0 }, why = { 0 };
	struct store *s = NULL;
	core_fail(&why, st, "the run could not start on this worker: %s",
	          init_failure.st ? init_failure.msg : core_strerror(st));
	if (!store_open_default(r->opts.open.store_path, STORE_OPEN_EXISTING, &s, &e))
		detach_settle_failed(s, r->claimed, &why, &e);
	if (e.st)
		cli_warn("%s", e.msg);
	store_close(s);
}

/* §2.2 step 6: the caller's detached output, at once (also the feed's
 * detached(), in the back of a split run). */
static enum core_status print_detached(void *ctx)
{
	struct run *r = ctx;
	struct invocation *inv = &r->inv;
	enum core_status st;
	if (invocation_detached(inv))
		return CORE_ENOMEM;
	if (inv->out.format == OUTPUT_TEXT && inv->det.enq) {
		fprintf(stderr, "%s: %s, session %s, snapshot %s (agent-wait %s)\n", cli_progname,
		        inv->det.existed ? "already queued under this key" : "queued",
		        inv->det.session, inv->det.id, inv->det.id);
		return CORE_OK;
	}
	if (inv->out.format == OUTPUT_TEXT) {
		if (inv->det.log.len)
			fprintf(stderr, "%s: detached, session %s, snapshot %s (log: %s)\n",
			        cli_progname, rt_session_id(inv->rt), inv->det.id, inv->det.log.p);
		else
			fprintf(stderr, "%s: detached, session %s, snapshot %s (log: agent-snap "
			        "worker-log %s)\n", cli_progname, rt_session_id(inv->rt), inv->det.id,
			        inv->det.id);
		return CORE_OK;
	}
	if ((st = output_final(&inv->out, inv->output)))
		cli_report(&inv->out.err);
	return st;
}

/*
 * Text mode, a turn that paused on a tool interrupt: the command that
 * resumes it, answering every interrupted request with --respond
 * 'REF=ANSWER' (ANSWER stands for each tool's output, any JSON value):
 * the same command line without its inputs, its answers and the options
 * that pick the session, then --session SID.  A client-managed run has no
 * session to resume by.
 */
static void resume_hint(struct run *r)
{
	static const int drop[] = { OPT_MESSAGE, OPT_SESSION, OPT_SNAPSHOT, OPT_CONTINUE,
	                            OPT_DETACH, OPT_INIT, OPT_INPUT_FORMAT, OPT_APPROVE,
	                            OPT_DENY, OPT_REASON, OPT_RESPOND, 0 };
	const json_t *out = r->inv.output, *part;
	const char *reason = json_string_value(json_object_get(out, "finishReason"));
	struct core_buf cmd = CORE_BUF_INIT(CORE_BUF_UNLIMITED), names = CORE_BUF_INIT(4096);
	json_t *pending = NULL;
	size_t i;
	if (!reason || strcmp(reason, "interrupted") || r->opts.open.no_store ||
	    !(pending = answer_pending(json_object_get(out, "message"))) || !json_array_size(pending))
		goto out;
	if (cli_command_line(r->args, r->nargs, drop, &cmd) ||
	    core_buf_addf(&cmd, " --session %s", rt_session_id(r->inv.rt)))
		goto out;
	json_array_foreach(pending, i, part) {
		const json_t *req = json_object_get(part, "toolRequest");
		const char *name = json_string_value(json_object_get(req, "name"));
		const char *ref = json_string_value(json_object_get(req, "ref"));
		const char *word = ref && *ref ? ref : name ? name : "";
		core_buf_addf(&names, "%s%s%s%s%s", names.len ? ", " : "", name ? name : "",
		              ref ? " (ref " : "", ref ? ref : "", ref ? ")" : "");
		/* in single quotes, so that a JSON ANSWER needs no more quoting */
		core_buf_adds(&cmd, " --respond '");
		for (const char *c = word; *c; c++)
			if (*c == '\'')
				core_buf_adds(&cmd, "'\\''");
			else
				core_buf_addc(&cmd, *c);
		core_buf_adds(&cmd, "=ANSWER'");
	}
	cli_warn("interrupted: %s waits for an answer; resume it with (ANSWER: the tool's "
	         "output, any JSON value; or --approve REF to run it again, approved, or --deny "
	         "REF):\n  %s", names.p ? names.p : "", cmd.p);
out:
	json_decref(pending);
	core_buf_release(&cmd);
	core_buf_release(&names);
}

/* The final line of an attached run: {"output": AgentOutput} (or, with
 * --format text, a summary on stderr); its status is the exit status. */
static enum core_status print_output(struct run *r)
{
	struct output *o = &r->inv.out;
	struct core_err note;
	enum core_status st = invocation_finish(&r->inv, &note);
	int sig = invocation_stop_signal(), null;
	if (!r->inv.output)
		return report_oom();
	if (note.st)
		cli_warn("the state is omitted from the failed output: %s", note.msg);
	const json_t *err = json_object_get(r->inv.output, "error");
	const char *err_status = json_string_value(json_object_get(err, "status"));
	if (err && sig && err_status && !strcmp(err_status, "CANCELLED"))
		/* The output keeps Genkit's CANCELLED "context canceled"; people
		 * who pressed Ctrl-C read what happened. */
		cli_warn("stopped%s", sig == SIGINT ? "" : sig == SIGTERM ? " by SIGTERM"
		         : " by SIGHUP");
	else if (err && !o->gone)       /* a reader that went away is a quiet stop */
		cli_warn("%s", json_string_value(json_object_get(err, "message")));
	if (o->format == OUTPUT_TEXT) {   /* "agent-run: stop, session S, ..., 30 out" */
		output_summary(o, cli_progname, r->inv.output, rt_session_id(r->inv.rt),
		               rt_usage(r->inv.rt), trace_id());
		resume_hint(r);
	} else if (!o->st)
		o->st = output_final(o, r->inv.output);
	if (o->st && o->st != CORE_EPIPE)
		st = cli_report(&o->err);
	if (o->gone && st == CORE_ABORTED && (null = open("/dev/null", O_WRONLY | O_CLOEXEC)) >= 0) {
		/* The reader went away and the run ended as a caller stop: exit
		 * with that (2), not with the quiet EPIPE stop. */
		dup2(null, 1);
		close(null);
		clearerr(stdout);
	}
	return st;
}

/* ---- the chat (docs/agent-run.md, "Chat") ---- */

static const char chat_help[] =
	"  /help      these lines\n"
	"  /session   the session's ID and its latest snapshot (resume it later with\n"
	"             --session ID, or --continue)\n"
	"  /usage     the session's token counts so far\n"
	"  /quit      end the chat (also /exit, or Ctrl-D on an empty line)\n"
	"  Ctrl-C stops the turn that runs and keeps the chat.\n";

/* A line beginning with '/': 1 when it ends the chat. */
static int chat_command(struct run *r, const char *line)
{
	struct runtime *rt = r->inv.rt;
	const char *snap = rt_last_snapshot_id(rt);
	if (!strcmp(line, "/quit") || !strcmp(line, "/exit"))
		return 1;
	if (!strcmp(line, "/help")) {
		fputs(chat_help, stderr);
	} else if (!strcmp(line, "/session")) {
		fprintf(stderr, "session %s%s%s\n", rt_session_id(rt), snap ? ", snapshot " : "",
		        snap ? snap : "");
	} else if (!strcmp(line, "/usage")) {
		json_t *out = rt_output(rt);
		const json_t *u = json_object_get(json_object_get(out, "state"), "usage");
		struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		if (!u && r->inv.store) {       /* a server-managed state is the row's */
			struct core_err e = { 0 };
			json_t *row = NULL;
			if (snap && !store_get(r->inv.store, snap, 0, &row, &e))
				u = json_object_get(json_object_get(row, "state"), "usage");
			if (u && !jv_dump(u, &b))
				fprintf(stderr, "usage %s\n", b.p);
			json_decref(row);
		} else if (u && !jv_dump(u, &b)) {
			fprintf(stderr, "usage %s\n", b.p);
		}
		if (!b.len)
			fprintf(stderr, "usage: no model has reported any yet\n");
		core_buf_release(&b);
		json_decref(out);
	} else {
		fprintf(stderr, "%s: unknown command '%s' (/help lists them)\n", cli_progname, line);
	}
	return 0;
}

/*
 * Each line typed is one turn of the session; its text streams, tool
 * lines and the approval prompt as in text mode.  A turn that failed or
 * was stopped (Ctrl-C) is told, and the chat goes on from the session's
 * latest row.  The end (Ctrl-D, /quit) prints the summary; the exit
 * status is the last turn's.
 */
static enum core_status run_chat(struct run *r)
{
	struct invocation *inv = &r->inv;
	struct core_err e = { 0 };
	char why[256];
	struct chat_line *c = chat_line_open(cli_progname, !r->opts.no_history, why, sizeof why);
	if (!c) {
		core_fail(&e, CORE_ESYS, "no chat: %s (give -m TEXT, or pipe the input)", why);
		return cli_report(&e);
	}
	fprintf(stderr, "%s: chat with %s, session %s; /help for commands, Ctrl-D to end\n",
	        cli_progname, inv->agent->name, rt_session_id(inv->rt));
	for (;;) {
		char *line = NULL;
		int got = chat_line_read(c, "> ", &line);
		if (got < 0 || (got > 0 && invocation_stop_signal())) {
			invocation_stop_clear();        /* Ctrl-C at the prompt: a new line */
			fputc('\n', stderr);
			free(line);
			continue;
		}
		if (!got) {
			fputc('\n', stderr);   /* after the prompt Ctrl-D ended */
			break;
		}
		char *t = line + strspn(line, " \t");
		size_t n = strlen(t);
		while (n && (t[n - 1] == ' ' || t[n - 1] == '\t'))
			t[--n] = 0;
		if (*t == '/') {
			int end = chat_command(r, t);
			free(line);
			if (end)
				break;
			continue;
		}
		json_t *in = n ? feed_user_message(t, n) : NULL;
		enum core_status st = in ? feed_turn(&inv->feed, in) : CORE_OK;
		json_decref(in);
		free(line);
		if (inv->out.gone)
			break;
		if (!st)
			continue;
		/* The turn ended the runtime: say why, and go on from the row. */
		json_t *out = rt_output(inv->rt);
		const char *msg = json_string_value(json_object_get(json_object_get(out, "error"),
		                                                    "message"));
		if (invocation_stop_signal())
			cli_warn("stopped");
		else
			cli_warn("%s", msg ? msg : "the turn failed");
		json_decref(out);
		invocation_stop_clear();
		if ((st = invocation_reopen(inv, &e))) {
			chat_line_close(c);
			return cli_report(&e);
		}
	}
	chat_line_close(c);
	return print_output(r);
}

/* ---- --url: the turns on a server (remote.h) ---- */

static enum core_status remote_chunk(void *ctx, const json_t *chunk, struct core_err *e)
{
	struct run *r = ctx;
	enum core_status st = output_chunk(&r->inv.out, chunk);
	if (st)
		*e = r->inv.out.err;
	return st;
}

static int remote_cancelled(void *ctx)
{
	return invocation_stop_signal() != 0;
}

/* Without -m: stdin is AgentInput lines (*lines set; lines may be NULL),
 * or one message of text; with lines, an empty stdin is one empty message
 * (for -a's parts). */
static enum core_status remote_inputs(struct run *r, json_t **inputs, int *lines)
{
	struct core_buf b = CORE_BUF_INIT(r->opts.in.max_record);
	struct core_err e = { 0 };
	char chunk[65536], *p, *end;
	ssize_t n;
	size_t lineno = 0;
	if (isatty(0))
		return cli_usage("no input: give -m TEXT, or AgentInput lines on stdin");
	while ((n = read(0, chunk, sizeof chunk)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || core_buf_add(&b, chunk, (size_t)n)) {
			core_buf_release(&b);
			return cli_report(&(struct core_err){ n < 0 ? CORE_ESYS : CORE_ETOOBIG, 0,
			                  "cannot read stdin (or it is over --max-record)" });
		}
	}
	if (!(*inputs = json_array()) || core_buf_addc(&b, '\0')) {
		core_buf_release(&b);
		return report_oom();
	}
	p = b.p + strspn(b.p, " \t\r\n");
	if (*p && *p != '{') {
		json_array_append_new(*inputs, json_pack("{s:{s:s,s:[{s:s}]}}", "message", "role",
		                                         "user", "content", "text", p));
		core_buf_release(&b);
		return CORE_OK;
	}
	for (p = b.p; *p; p = *end ? end + 1 : end) {
		json_t *v;
		end = p + strcspn(p, "\n");
		lineno++;
		if (p[strspn(p, " \t\r")] == '\n' || !p[strspn(p, " \t\r")])
			continue;
		if (!(v = jv_parse(p, (size_t)(end - p), "<stdin>", lineno, &e)) || !json_is_object(v)) {
			json_decref(v);
			if (!e.st)
				core_fail(&e, CORE_EINVAL, "an AgentInput must be an object (at <stdin>:%zu)",
				          lineno);
			core_buf_release(&b);
			return init_failed(&r->inv.out, &e);
		}
		json_array_append_new(*inputs, v);
	}
	if (lines)
		*lines = json_array_size(*inputs) != 0;
	core_buf_release(&b);
	if (!json_array_size(*inputs) && lines)  /* -a alone: a message of the parts */
		return json_array_append_new(*inputs, json_pack("{s:{s:s,s:[]}}", "message", "role",
		                             "user", "content")) ? report_oom() : CORE_OK;
	if (!json_array_size(*inputs))
		return cli_usage("no input: stdin is empty and no -m was given; nothing ran");
	return CORE_OK;
}

/* The final line of the remote turns, and the exit status it means. */
static enum core_status remote_final(struct run *r, const json_t *final)
{
	struct output *o = &r->inv.out;
	const json_t *out = json_object_get(final, "output");
	const json_t *err = json_object_get(out ? out : final, "error");
	const char *status = json_string_value(json_object_get(err, "status"));
	const char *msg = json_string_value(json_object_get(err, "message")), *reason;
	enum core_status st = status ? core_status_from_name(status) : CORE_OK;
	if (!out) {
		struct core_err e = { 0 };
		core_fail(&e, st ? st : CORE_EINTERNAL, "%s", msg ? msg : "the server failed");
		return init_failed(o, &e);
	}
	if (msg)
		cli_warn("%s", msg);
	if (o->format == OUTPUT_TEXT)
		output_summary(o, cli_progname, out,
		               json_string_value(json_object_get(out, "sessionId")), NULL, NULL);
	else if (!o->st)
		o->st = output_final(o, out);
	if (o->st && o->st != CORE_EPIPE)
		return cli_report(&o->err);
	reason = json_string_value(json_object_get(out, "finishReason"));
	/* detached: the server took the turn, as a local --detach's 0 */
	return reason && !strcmp(reason, "detached") ? CORE_OK : core_outcome_exit(st, reason);
}

/*
 * -a FILE with --url: the turns as AgentInputs, the parts added to the
 * first one's message after its text, as Genkit's wire carries media
 * parts: the -m texts, else stdin's text or nothing (stdin a terminal, or
 * the attachment).  The server's model takes the parts or refuses them.
 */
static enum core_status remote_attach_inputs(struct run *r, json_t **inputs)
{
	struct run_opts *op = &r->opts;
	enum core_status st;
	json_t *content;
	int stdin_used = 0, lines = 0;
	for (size_t i = 0; i < op->nattach; i++)
		stdin_used |= !strcmp(op->attach[i], "-");
	if ((st = read_attachments(r)))
		return st;
	if (op->nmsg) {
		if (!(*inputs = json_array()))
			return report_oom();
		for (size_t i = 0; i < op->nmsg; i++)
			if (json_array_append_new(*inputs, json_pack("{s:{s:s,s:[{s:s}]}}", "message",
			                          "role", "user", "content", "text", op->messages[i])))
				return report_oom();
	} else if (stdin_used || isatty(0)) {
		if (!(*inputs = json_pack("[{s:{s:s,s:[]}}]", "message", "role", "user", "content")))
			return report_oom();
	} else if ((st = remote_inputs(r, inputs, &lines))) {
		return st;
	}
	content = json_object_get(json_object_get(json_array_get(*inputs, 0), "message"),
	                          "content");
	if (lines || !json_is_array(content))
		return cli_usage("-a adds to the -m or stdin text turn; AgentInput lines carry their "
		                 "own parts");
	if (json_array_extend(content, op->parts))
		return report_oom();
	if (op->detach)
		for (size_t i = 0; i < json_array_size(*inputs); i++)
			json_object_set_new(json_array_get(*inputs, i), "detach", json_true());
	return CORE_OK;
}

static enum core_status run_remote(struct run *r, const char *url)
{
	struct remote_invocation ri = { url, r->opts.headers, r->opts.messages,
	                                r->opts.nmsg, NULL, r->inv.init, r->opts.detach,
	                                remote_chunk, remote_cancelled, r };
	struct core_err e = { 0 };
	json_t *inputs = NULL, *final = NULL;
	enum core_status st = CORE_OK;
	if (r->opts.url && r->opts.spec.name)
		return cli_usage("--url names the agent: drop the operand '%s'", r->opts.spec.name);
	if (r->opts.nattach)
		st = remote_attach_inputs(r, &inputs);
	else if (!r->opts.nmsg)
		st = remote_inputs(r, &inputs, NULL);
	if (st)
		goto out;
	ri.inputs = inputs;
	invocation_catch_stops(&r->inv);
	st = remote_invoke(&ri, &final, &e);
	if (st == CORE_ECANCELLED && invocation_stop_signal()) {
		/* A caller stop, as a local turn's: the connection closed, the
		 * server cancels the turn. */
		json_decref(final);
		final = json_pack("{s:{s:s,s:{s:s,s:s}}}", "output", "finishReason", "aborted",
		                  "error", "status", "CANCELLED", "message", "context canceled");
		st = CORE_OK;
	}
	if (st)
		st = r->inv.out.st ? cli_report(&r->inv.out.err) : init_failed(&r->inv.out, &e);
	else
		st = final ? remote_final(r, final) : report_oom();
out:
	json_decref(inputs);
	json_decref(final);
	return st;
}

static void on_warn(void *ctx, const char *msg)
{
	struct run *r = ctx;
	if (r->inv.det.role == DETACH_WORKER)
		worker_log(r, msg);
	else
		cli_warn("%s", msg);
}

/* The worker's log lines, "agent-run[PID]: line" at a time: to the store
 * (agent-snap worker-log prints them) and to stderr (the log file, when
 * this host keeps one) as "TIME agent-run[PID]: line". */
static void worker_log(void *ctx, const char *line)
{
	struct run *r = ctx;
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	char now[CORE_TIME_MAX];
	int64_t at = core_now_ns();
	core_time_format(at, now);
	if (core_buf_addf(&b, "%s[%ld]: %s", cli_progname, (long)getpid(), line)) {
		fprintf(stderr, "%s %s[%ld]: %s\n", now, cli_progname, (long)getpid(), line);
	} else {
		fprintf(stderr, "%s %s\n", now, b.p);
		detach_log_store(&r->inv.det, at, b.p);
	}
	core_buf_release(&b);
}

/* --key-file's help names the key variables of the providers' table. */
static void key_file_help(void)
{
	static struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (core_buf_adds(&b, "read the model provider's API key from FILE (default "
	                  "$AGENTKIT_KEY_FILE, else the provider's variable: ")
	    || model_key_variables_text(&b)
	    || core_buf_adds(&b, "); not for the models file's endpoints"))
		return;         /* out of memory: the row keeps its short help */
	for (struct cli_opt *o = opts; o->name; o++)
		if (o->key == OPT_KEY_FILE)
			o->help = b.p;
}

/* agent-run --claimed: the queued run, as its detached worker; a run
 * that cannot start here settles failed. */
static enum core_status run_claimed(struct run *r)
{
	struct core_err e = { 0 };
	enum core_status st;
	if ((st = start_mcp(r)) || (st = open_runtime(r))) {
		claimed_failed(r, st);
		return st;
	}
	if ((st = invocation_run_claimed(&r->inv, r->claimed, &e))) {
		init_failure = e;
		claimed_failed(r, st);
		return cli_report(&e);
	}
	return r->inv.det.worker_st;
}

/*
 * agent-run --serve-child (agent-serve's, docs/serve.md "Each turn in its
 * own process"): started ahead of a turn, this process waits on stdin for
 * its words, then runs as if started with them.  They come as 8 decimal
 * digits N, then N bytes: {"argv": [WORD, ...], "env": ["NAME=value", ...]}
 * and a newline; the turn's NDJSON input follows on the same stdin, read
 * as usual.  Exact reads, so nothing of the input is taken.  End of input
 * first: exit 0 (agent-serve did not need it); anything else malformed:
 * exit 100.
 */
#define SERVE_CHILD_WORDS_MAX ((size_t)16 << 20)

static int read_exact(char *p, size_t n)
{
	while (n) {
		ssize_t k = read(0, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static void serve_child_words(int *argc, char ***argv)
{
	char len[9] = "", *end, *buf, *argv0 = (*argv)[0];
	size_t n;
	json_t *doc, *words, *env, *w;
	size_t i;
	if (read_exact(len, 8))
		exit(0);
	n = strtoul(len, &end, 10);
	if (*end || !n || n > SERVE_CHILD_WORDS_MAX || !(buf = malloc(n)) || read_exact(buf, n))
		exit(100);
	doc = json_loadb(buf, n, JSON_DISABLE_EOF_CHECK, NULL);
	free(buf);
	words = json_object_get(doc, "argv");
	env = json_object_get(doc, "env");
	if (!json_is_array(words) || !(*argv = calloc(json_array_size(words) + 2, sizeof **argv)))
		exit(100);
	(*argv)[0] = argv0;
	*argc = 1;
	json_array_foreach(words, i, w)
		if (!json_is_string(w) || !((*argv)[(*argc)++] = strdup(json_string_value(w))))
			exit(100);
	json_array_foreach(env, i, w) {
		char *kv = json_is_string(w) ? strdup(json_string_value(w)) : NULL;
		if (!kv || !strchr(kv, '=') || putenv(kv))
			exit(100);
	}
	json_decref(doc);
}

int main(int argc, char **argv)
{
	struct run r = { 0 };
	/* an MCP server's questions go to a person at the terminal, if any */
	int person = ask_available();
	struct invocation_sink sink = {
		.warn = on_warn, .log = worker_log, .mcp_line = mcp_stderr_line,
		.elicit = person ? ask_elicit : NULL, .detached = print_detached,
		.ctx = &r,
	};
	struct output_sink out = { out_write, out_flush, out_note, NULL };
	enum core_status st;

	if (argc == 2 && !strcmp(argv[1], "--serve-child"))
		serve_child_words(&argc, &argv);
	key_file_help();
	cli_start(&prog);
	invocation_init(&r.inv, &sink);
	/* The words as given, for resume_hint(): getopt reorders argv. */
	if (!(r.args = calloc((size_t)argc + 1, sizeof *r.args))) {
		st = report_oom();
		goto out;
	}
	memcpy(r.args, argv, (size_t)argc * sizeof *argv);
	r.nargs = argc;
	/* Before any child or thread: no core dump, keys out of /proc/PID/environ. */
	cli_protect_secrets();
	if ((st = parse_options(argc, argv, &r.opts)))
		goto out;
	if (r.opts.store_fd && (st = store_from_fd(&r)))
		goto out;
	if (r.opts.claimed && (st = read_claimed(&r)))
		goto out;
	/* A tool request a turn pauses on is asked of the person at the
	 * terminal, and the turn goes on in this process. */
	if (person && isatty(0) && isatty(1) && !r.opts.no_prompt && !r.opts.detach)
		r.inv.sink.approve = ask_approve;
	int color = r.opts.format == OUTPUT_TEXT && isatty(2)
	            && !(getenv("NO_COLOR") && *getenv("NO_COLOR"));
	if (output_init(&r.inv.out, r.opts.format, color, out)) {
		st = report_oom();
		goto out;
	}
	if (r.opts.list_models) {
		st = list_models(&r.inv.out, r.opts.spec.key_file);
		goto out;
	}
	if ((st = load_mcp(&r)))
		goto out;
	if (r.opts.mcp_list) {
		st = list_mcp(&r);
		goto out;
	}
	if ((st = build_init(&r)))
		goto out;
	if (r.opts.list) {
		st = list_agents(&r.inv.out, r.opts.spec.agents_dir);
		goto out;
	}
	if (r.opts.url) {
		st = run_remote(&r, r.opts.url);
		goto out;
	}
	if ((st = load_agent(&r))) {
		if (r.opts.claimed)
			claimed_failed(&r, st);
		goto out;
	}
	if (r.inv.agent->url && !r.opts.describe) {
		/* url: in the prompt file: a remote agent, resolved by name */
		st = run_remote(&r, r.inv.agent->url);
		goto out;
	}
	if (r.opts.describe) {
		if (!(st = start_mcp(&r)))
			st = describe_agent(&r);
		goto out;
	}
	if ((st = read_attachments(&r)))
		goto out;
	invocation_catch_stops(&r.inv);
	if (r.opts.claimed) {
		st = run_claimed(&r);
		goto out;
	}
	if ((st = read_stdin(&r)))
		goto out;
	if ((st = start_intake(&r)) || r.inv.front_exit >= 0 || (st = start_mcp(&r)) ||
	    (st = open_runtime(&r)) || (r.opts.nanswers && (st = answers_input(&r))))
		goto out;
	if (r.opts.enq.queue) {
		/* the limit is the agent's: its name, the flag, else its front matter */
		r.opts.enq.agent = r.inv.agent->name ? r.inv.agent->name : "";
		if (!r.opts.concurrency_set)
			r.opts.enq.concurrency = r.inv.agent->concurrency;
		if (!r.opts.enq.max_attempts)
			r.opts.enq.max_attempts = r.inv.agent->max_attempts;
		r.inv.det.enq = &r.opts.enq;
	}
	if (r.opts.chat) {
		st = run_chat(&r);
		goto out;
	}
	invocation_run(&r.inv, r.opts.messages, r.opts.nmsg, r.opts.detach, r.opts.in.max_record);
	switch (r.inv.det.role) {
	case DETACH_WORKER: st = r.inv.det.worker_st; break;
	case DETACH_CALLER: st = print_detached(&r); break;
	default: st = print_output(&r); break;
	}
out:
	invocation_close(&r.inv, st);
	json_decref(r.claimed);
	json_decref(r.opts.run_args);
	core_buf_release(&r.store_loc);
	free(r.opts.messages);
	free(r.opts.tools);
	free(r.args);
	free(r.opts.headers);
	free(r.opts.mcp_configs);
	free(r.opts.answers);
	free(r.opts.attach);
	json_decref(r.opts.parts);
	json_decref(r.opts.outputs);
	/* The front of a split run exits as its back did. */
	cli_leave(r.inv.front_exit >= 0 ? r.inv.front_exit : cli_finish(st));
}
