/* agent-run.c - run an agent: AgentInput in, AgentStreamChunk NDJSON out,
 * one final output line.
 *
 * The command line only: options, the init, the output (NDJSON, text,
 * json) and the stop signals.  Near 1,150 lines as one unit: its option
 * table and help text (~210 lines) open it, as in every cmd/ file, and
 * each phase of main() is one of those four jobs; the rest is libcore's:
 * the eager intake (intake.h), the inputs fed to the turns (feed.h),
 * text rendering (render.h), detached runs (detach.h), the MCP servers
 * (mcp_run.h), the runtime (runtime.h), tracing (agent_trace.h,
 * trace.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "../libcore/agent/agent.h"
#include "../libcore/agent/agent_ext.h"
#include "../libcore/agent/agent_trace.h"
#include "../libcore/agent/detach.h"
#include "../libcore/agent/feed.h"
#include "../libcore/agent/intake.h"
#include "../libcore/base/json.h"
#include "../libcore/base/lines.h"
#include "../libcore/model/model.h"
#include "../libcore/agent/mcp.h"
#include "../libcore/agent/mcp_run.h"
#include "../libcore/agent/render.h"
#include "../libcore/agent/runtime.h"
#include "../libcore/base/spawn.h"
#include "../libcore/base/trace.h"
#include "../libcore/base/util.h"
#include "../libcore/model/registry.h"
#include "../store/store.h"

enum {
	OPT_MESSAGE = 'm',
	OPT_SESSION = 's',
	OPT_FORMAT = 'f',
	OPT_MODEL = CLI_LONG + 1,
	OPT_SYSTEM,
	OPT_TOOL,
	OPT_MAX_TURNS,
	OPT_CONFIG,
	OPT_AGENTS,
	OPT_PROMPT,
	OPT_INPUT,
	OPT_SNAPSHOT,
	OPT_STATE,
	OPT_INIT,
	OPT_STORE,
	OPT_NO_STORE,
	OPT_DESCRIBE,
	OPT_MAX_RECORD,
	OPT_KEY_FILE,
	OPT_MODEL_TIMEOUT,
	OPT_DETACH = 'd',
	OPT_CONTINUE = 'c',
	OPT_HB_INTERVAL = CLI_LONG + 100,
	OPT_HB_TIMEOUT,
	OPT_STDIN_TIMEOUT,
	OPT_EXEC = CLI_LONG + 300,
	OPT_DOCS,
	OPT_STATE_TRANSFORM,
	OPT_STREAM_TRANSFORM,
	OPT_LIST,
	OPT_INPUT_FORMAT = CLI_LONG + 400,
	OPT_LIST_MODELS,
	OPT_OUTPUT_SCHEMA = CLI_LONG + 500,
	OPT_JSON,
	OPT_TRACE = CLI_LONG + 600,
	OPT_TRACE_FILE,
	OPT_TRACE_CONTENT,
	OPT_TRACE_NAMES,
	OPT_MCP_CONFIG = CLI_LONG + 610,
	OPT_MCP_LIST,
	OPT_VERBOSE,
};

static const struct cli_opt opts[] = {
	{ OPT_MESSAGE, "message", "TEXT", "run one turn with this user text (repeatable: one turn each)" },
	{ OPT_SESSION, "session", "ID", "resume the session's latest snapshot, or start a session under ID" },
	{ OPT_SNAPSHOT, "snapshot", "ID", "resume from this snapshot (with --session: it must belong to it)" },
	{ OPT_CONTINUE, "continue", NULL, "resume this agent's most recently updated session (agent-snap sessions)" },
	{ OPT_STATE, "state", "FILE", "client-managed: start from this SessionState (needs --no-store)" },
	{ OPT_INIT, "init", "JSON", "the AgentInit object {sessionId, snapshotId, state} as JSON" },
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
	{ OPT_KEY_FILE, "key-file", "FILE",
	  "read the model provider's API key from FILE (default $AGENTKIT_KEY_FILE, else the "
	  "provider's variable: OPENAI_API_KEY, GOOGLE_API_KEY or GEMINI_API_KEY, "
	  "ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN, OLLAMA_API_KEY); not for the models "
	  "file's endpoints" },
	{ OPT_MODEL_TIMEOUT, "model-timeout", "DURATION",
	  "each model call, retries included, fails DEADLINE_EXCEEDED past this (default "
	  "$AGENTKIT_MODEL_TIMEOUT, else 10m; a models-file endpoint's \"timeout\" wins)" },
	{ OPT_DETACH, "detach", NULL, "read every input first, then run them in a background worker and print "
	  "the pending snapshot ID at once (docs/detach.md)" },
	{ OPT_HB_INTERVAL, "heartbeat-interval", "DURATION",
	  "a detached worker beats its row this often (default $AGENTKIT_HEARTBEAT_INTERVAL, else 30s)" },
	{ OPT_HB_TIMEOUT, "heartbeat-timeout", "DURATION",
	  "a pending row whose beat is older is presumed dead (default $AGENTKIT_HEARTBEAT_TIMEOUT, else 60s)" },
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
	{ OPT_LIST, "list", NULL, "list the agents on the agent path with their descriptions and exit" },
	{ OPT_MCP_CONFIG, "mcp-config", "FILE", "start the MCP servers of FILE ({\"mcpServers\": ...}, "
	  "as .mcp.json) and give the agent their tools (repeatable; also $AGENTKIT_MCP_CONFIG, "
	  "colon-separated; docs/mcp.md)" },
	{ OPT_MCP_LIST, "mcp-list", NULL, "start the MCP servers (only the one named by the operand, if "
	  "given), print one NDJSON line per tool and exit: 1 names a server that failed" },
	{ OPT_VERBOSE, "verbose", NULL, "show what the MCP servers write on stderr, each line as "
	  "'agent-run: mcp NAME: LINE' (a detached worker's log always has them)" },
	{ OPT_LIST_MODELS, "list-models", NULL,
	  "list the model providers and the models file's endpoints, the key each needs and "
	  "whether it is set, the base URL, and (with a key) the provider's models; a table on "
	  "a terminal, else NDJSON" },
	{ 0 }
};

static const struct cli_exitcode exits[] = {
	{ 0, "completed with a usable result (finish reason stop, other, unknown or empty); detached" },
	{ 1, "the turn failed (a model or tool failure)" },
	{ 2, "aborted (max turns; SIGINT, SIGTERM, SIGHUP or a closed stdout stopped the run)" },
	{ 4, "not found: the agent, a tool, the model or the snapshot" },
	{ 5, "failed precondition (wrong state mode, resume of a pending row)" },
	{ 6, "interrupted: a tool interrupted; resume with a {\"resume\":...} input" },
	{ 7, "finished without a usable result (finish reason length or blocked)" },
	{ 100, "usage error" },
	{ 101, "malformed input (bad NDJSON, an invalid AgentInput or init)" },
	{ 111, "system failure (cannot open the store, commit a turn (full disk) or write output)" },
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
	{ 0 }
};

static const struct cli_prog prog = {
	.name = "agent-run",
	.purpose = "run an agent turn by turn and stream what it does as NDJSON",
	.synopsis = "[OPTION]... [AGENT] [-m TEXT]...\n[OPTION]... --model NAME [--system TEXT] [--tool NAME]... [-m TEXT]...",
	.description =
	"Runs AGENT (a name looked up as NAME.prompt in --agents DIR, "
	"$AGENTKIT_PATH and ./agents, or a path to a .prompt file), or an "
	"inline agent defined by --model, --system, --tool, --max-turns and "
	"--config.  Each -m TEXT is one turn.  Text piped on stdin joins the "
	"first -m turn after a blank line (git diff | agent-run reviewer -m "
	"'review this'); without -m it is one turn of its own.  NDJSON on stdin "
	"(first non-blank byte '{', or --input-format ndjson) is one AgentInput "
	"per line ({\"message\":...}, {\"resume\":{...}}, {} to re-attempt), "
	"run in order; it cannot be combined with -m.  NDJSON lines are read as "
	"they arrive, also while a turn runs, and queued (a detach line then "
	"detaches at once).  A terminal on stdin is not read when -m is given.\n\n"
	"stdout is NDJSON: the AgentStreamChunk objects of every turn "
	"(modelChunk, customPatch, artifact, turnEnd), flushed one by one, "
	"then exactly one final line: {\"output\": AgentOutput}, or "
	"{\"error\": {\"status\", \"message\"}} when the invocation never "
	"started (bad init, unknown agent, model or snapshot).  --format json "
	"prints only that final object (the AgentOutput itself).  --format text "
	"prints the model's text as it streams, each tool call and its outcome "
	"on stderr, and a summary with the usage (colour on a terminal unless "
	"NO_COLOR is set).\n\n"
	"Sessions are server-managed by default: every committed turn writes "
	"one snapshot to the store, --session ID resumes a session's latest "
	"snapshot (or starts one under ID) and --snapshot ID a given one.  "
	"With --no-store the state is client-managed: pass it in with --state "
	"FILE and take it from output.state.  The session ID is printed on "
	"every output.\n\n"
	"Tools are executables with a JSON manifest (tools/NAME.json beside "
	"the agent, in DIR/tools of the agent path, or ./tools); see "
	"docs/agent-run.md for the tool protocol and the script/PATH model "
	"format.\n\n"
	"Detached runs (docs/detach.md): --detach, or an input line with "
	"\"detach\": true, writes a \"pending\" snapshot row, prints "
	"{\"output\": {\"finishReason\": \"detached\", \"sessionId\", "
	"\"snapshotId\"}} and exits 0 at once, while a background worker (its "
	"own session, stdio detached) runs the inputs read so far, beats the row "
	"and finalizes it completed, failed or aborted.  Follow it with "
	"agent-wait ID, stop it with agent-abort ID.  The worker's log is "
	"STORE/logs/ID.log beside the store (for a store on a server, "
	"~/.local/state/agentkit/logs/ID.log on the worker's host); agent-snap "
	"worker-log ID prints it.\n\n"
	"SIGINT, SIGTERM and SIGHUP (or the reader of stdout going away) stop an "
	"attached run: the turn in flight is cancelled, a turn that committed is "
	"written \"aborted\", the final line still names the resume point, exit "
	"2.  A second signal ends agent-run at once.",
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
	"$ echo '{\"resume\":{\"respond\":[...]}}' | agent-run tasks --session \"$id\"\n"
	"  answer an interrupted tool and go on\n"
	"$ id=$(agent-run tasks --detach -m 'plan the week' | jq -r .output.snapshotId)\n"
	"  run in the background; then: agent-wait --timeout 10m \"$id\"",
	.exits = exits,
	.values = values,
	.operands = CLI_AGENT,
};


struct out_ctx {
	int text;               /* --format text */
	int json;               /* --format json: the final object only */
	int color;              /* text: colour on stderr (a terminal, no NO_COLOR) */
	struct render view;     /* text: the chunks as a person reads them */
	enum core_status st;    /* first write failure */
	struct core_err err;
	struct core_buf line;
	int pipe;               /* stdout is a pipe or socket */
	int gone;               /* ... whose reader went away: a caller stop */
};

/* The command line, as parse_options() leaves it. */
struct run_opts {
	struct agent_spec spec;         /* the agent; spec.tools is tools */
	struct agent_ext_spec xspec;    /* --exec, --docs, the transforms */
	const char *store_path, *state_file, *init_json, *session, *snapshot;
	const char *hb_interval, *hb_timeout;   /* the flags, or NULL */
	const char *stdin_wait;         /* --stdin-timeout as given, else the variable's, else "3s" */
	int64_t stdin_wait_ms;
	const char **messages, **tools;         /* NULL-terminated, or NULL */
	size_t nmsg, ntools;
	size_t max_record;
	int text;                       /* --format text (default: stdout is a terminal) */
	int json;                       /* --format json: only the final object */
	int input_format;               /* --input-format: INTAKE_NDJSON, INTAKE_TEXT, or 0 */
	int no_store, describe, detach, list, list_models, cont;
	int trace, trace_content;       /* --trace, --trace-content */
	int trace_semconv;              /* --trace-names semconv */
	const char *trace_file;         /* --trace-file */
	const char **mcp_configs;       /* --mcp-config, NULL-terminated, or NULL */
	size_t nmcp;
	int mcp_list;
	int verbose;
};

/* What main() holds; released at its out: label. */
struct run {
	struct run_opts opts;
	int64_t t0;                     /* when the run started (the root span's start) */
	struct out_ctx o;
	json_t *init;                   /* the AgentInit */
	struct agent *agent;
	struct core_buf store_dir;
	struct store *store;
	struct runtime *rt;
	struct agent_ext *ext;          /* --exec, transforms, --docs (agent_ext.h) */
	struct detach_run det;          /* the background, once detached */
	json_t *output;                 /* the final AgentOutput */
	int stdin_open;                 /* fd 0 was open when agent-run started */
	int stdin_kind;                 /* INTAKE_NONE, INTAKE_NDJSON or INTAKE_TEXT */
	struct core_buf in;             /* stdin's text, or the NDJSON bytes read ahead */
	struct intake intake;           /* NDJSON inputs read while turns run */
	struct feed feed;               /* the inputs to the turns (feed.h) */
	int front_exit;                 /* front: the back's exit status, or -1 */
	struct mcp_config mcp;          /* the MCP servers configured (docs/mcp.md) */
	struct mcp_set *mcp_set;        /* ... once started */
};

/* ---- caller stops (runtime-semantics §2.5) ---- */

/* The first SIGINT/SIGTERM/SIGHUP: agent-run's one file-scope state.  A
 * turn loop waiting for the intake wakes by the signal's EINTR
 * (intake_take()); the front of a split run forwards the signals to its
 * back (intake_split()). */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	if (stop_signal) {
		/* The second one: end at once, as the signal does by default. */
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	stop_signal = sig;
	/* A read of stdin blocked between turns sees EOF after EINTR.  open,
	 * dup2 and close are async-signal-safe; errno is the interrupted
	 * code's. */
	int saved = errno;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		close(null);
	}
	errno = saved;
}

static void catch_stop_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;        /* no SA_RESTART: a blocked read returns EINTR */
	static const int sigs[] = { SIGINT, SIGHUP, SIGTERM };
	for (int i = 0; i < 3; i++) {
		struct sigaction old;
		/* SIGINT and SIGHUP ignored on entry (a background job of a
		 * script, nohup) stay ignored, as Unix tools do. */
		if (sigs[i] != SIGTERM && sigaction(sigs[i], NULL, &old) == 0
		    && old.sa_handler == SIG_IGN)
			continue;
		sigaction(sigs[i], &sa, NULL);
	}
}

/* The runtime's cancelled(): a stop signal, the reader of stdout gone, or
 * (in the detached worker) the abort flip.  It is also where a turn sees a
 * detach line that arrived while it runs. */
static int run_cancelled(void *ctx)
{
	struct run *r = ctx;
	struct out_ctx *o = &r->o;
	if (stop_signal || o->gone)
		return 1;
	if (feed_in_turn(&r->feed))
		return 1;       /* a detach line arrived while this turn ran, and failed */
	if (r->det.role == DETACH_WORKER)
		return detach_aborted(&r->det);
	if (o->pipe) {
		struct pollfd p = { .fd = 1, .events = 0 };
		if (poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)))
			o->gone = 1;
	}
	return o->gone;
}

static enum core_status write_json(struct out_ctx *o, const json_t *v)
{
	core_buf_reset(&o->line);
	if (jv_dump(v, &o->line))
		return core_fail(&o->err, CORE_ENOMEM, "out of memory");
	enum core_status st = cli_write_line(&o->line, &o->err);
	if (!st)
		st = cli_flush(&o->err);
	return st;
}

/* Text mode's sink (render.h): stdout through cli_write(), tool lines on
 * stderr after what stdout holds. */
static enum core_status view_text(void *ctx, const char *p, size_t n)
{
	struct out_ctx *o = ctx;
	return cli_write(p, n, &o->err);
}

static enum core_status view_flush(void *ctx)
{
	struct out_ctx *o = ctx;
	return cli_flush(&o->err);
}

static void view_note(void *ctx, const char *line, size_t n)
{
	fflush(stdout);
	fprintf(stderr, "%.*s\n", (int)n, line);
}

static enum core_status show_chunk(void *ctx, const json_t *chunk)
{
	struct out_ctx *o = ctx;
	enum core_status st = CORE_OK;
	if (o->st)
		return o->st;
	if (o->json)
		return CORE_OK;
	st = o->text ? render_chunk(&o->view, chunk) : write_json(o, chunk);
	if (st == CORE_EPIPE)
		o->gone = 1;
	if (st)
		o->st = st;
	return st;
}

/* §7.2: the stream transform on every forwarded chunk; null drops it, a
 * failure stops the stream and fails the invocation (agent_ext_failed). */
static enum core_status on_chunk(void *ctx, const json_t *chunk)
{
	struct run *r = ctx;
	struct core_err e = { 0 };
	json_t *shown = NULL;
	if (agent_ext_chunk(r->ext, chunk, &shown, &e) || !shown)
		return CORE_OK;
	enum core_status st = show_chunk(&r->o, shown);
	json_decref(shown);
	return st;
}

/* agent-run --list: the agents on the agent path, one per line. */
static enum core_status list_agents(struct out_ctx *o, const char *agents_dir)
{
	struct core_err e = { 0 };
	json_t *list = NULL, *a;
	size_t i;
	enum core_status st = agent_ext_list(agents_dir, &list, &e);
	if (st)
		return cli_report(&e);
	json_array_foreach(list, i, a)
		if ((st = write_json(o, a)))
			break;
	json_decref(list);
	if (st && st != CORE_EPIPE)
		cli_report(&o->err);
	return st;
}

/* One provider of --list-models as a person reads it. */
static enum core_status model_row_text(const json_t *row, struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = render_model_row(row, &b);
	st = st ? core_fail(e, st, "out of memory") : cli_write_line(&b, e);
	core_buf_release(&b);
	return st;
}

/*
 * agent-run --list-models: one row per provider (model_list), a table on a
 * terminal and NDJSON otherwise.  A provider whose list could not be read
 * is named on stderr and the exit status is 1; the other rows still print.
 */
static enum core_status list_models(struct out_ctx *o, const char *key_file)
{
	struct core_err e = { 0 };
	json_t *rows = NULL, *row;
	size_t i;
	int failed;
	const char *dflt = getenv("AGENTKIT_MODEL");
	if (!key_file)
		key_file = getenv("AGENTKIT_KEY_FILE");
	enum core_status st = model_list(key_file, &rows, &failed, &e);
	if (st)
		return cli_report(&e);
	json_array_foreach(rows, i, row) {
		const json_t *err = json_object_get(row, "error");
		if (err)
			cli_warn("%s", json_string_value(json_object_get(err, "message")));
		if ((st = o->text ? model_row_text(row, &o->err) : write_json(o, row)))
			break;
	}
	if (!st && o->text) {
		struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		st = core_buf_addf(&b, "default model (AGENTKIT_MODEL): %s",
		                   dflt && *dflt ? dflt : "not set");
		st = st ? core_fail(&o->err, st, "out of memory") : cli_write_line(&b, &o->err);
		core_buf_release(&b);
	}
	json_decref(rows);
	if (st && st != CORE_EPIPE)
		cli_report(&o->err);
	return st ? st : failed ? CORE_FAILED : CORE_OK;
}

static void on_warn(void *ctx, const char *msg)
{
	cli_warn("%s", msg);
}

/* The final {"error": ...} line of an invocation that never started. */
static enum core_status init_failed(struct out_ctx *o, const struct core_err *e)
{
	cli_report(e);
	if (!o->text) {
		json_t *line = json_pack("{s:o}", "error", jv_error_new(e->st, e->msg));
		if (line)
			write_json(o, line);
		json_decref(line);
	}
	return e->st;
}

/* ---- detached runs (runtime-semantics §2; docs/detach.md; libcore/agent/detach.h) ---- */

/* The worker's log lines (stderr is the log file): "TIME agent-run[PID]: line". */
static void worker_log(void *ctx, const char *line)
{
	char now[CORE_TIME_MAX];
	core_time_format(core_now_ns(), now);
	fprintf(stderr, "%s %s[%ld]: %s\n", now, cli_progname, (long)getpid(), line);
}

/* A SIGTERM (SIGINT, SIGHUP) to the worker finalizes its row aborted. */
static int worker_stopped(void *ctx)
{
	return (int)stop_signal;
}

static enum core_status report_oom(void)
{
	return cli_report(&(struct core_err){ CORE_ENOMEM, 0, "out of memory" });
}

/* Append arg to the NULL-terminated *v of *n items (-m, --tool). */
static enum core_status push_arg(const char ***v, size_t *n, const char *arg)
{
	const char **nv = realloc(*v, (*n + 2) * sizeof *nv);
	if (!nv)
		return report_oom();
	nv[(*n)++] = arg;
	nv[*n] = NULL;
	*v = nv;
	return CORE_OK;
}

static int has_space(const char *s)
{
	return s && s[strcspn(s, " \t\n")];
}

/* --stdin-timeout, else $AGENTKIT_STDIN_TIMEOUT, else 3s; 0 is allowed. */
static enum core_status stdin_wait_setting(struct run_opts *op)
{
	struct core_err e = { 0 };
	const char *env = getenv("AGENTKIT_STDIN_TIMEOUT");
	const char *name = op->stdin_wait ? "--stdin-timeout" : "AGENTKIT_STDIN_TIMEOUT";
	if (!op->stdin_wait)
		op->stdin_wait = env && *env ? env : "3s";
	if (core_parse_duration(op->stdin_wait, &op->stdin_wait_ms, &e))
		return cli_usage("%s: %s", name, e.msg);
	return CORE_OK;
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

static enum core_status parse_options(int argc, char **argv, struct run_opts *op)
{
	struct agent_spec *spec = &op->spec;
	struct agent_ext_spec *xspec = &op->xspec;
	const char *arg, *format = NULL;
	enum core_status st = CORE_OK;
	int key;
	op->max_record = CORE_LINES_DEFAULT_MAX;
	while (!st && (key = cli_next(argc, argv, &arg)) != -1) {
		switch (key) {
		case OPT_MESSAGE: st = push_arg(&op->messages, &op->nmsg, arg); break;
		case OPT_TOOL: st = push_arg(&op->tools, &op->ntools, arg); break;
		case OPT_SESSION: op->session = arg; break;
		case OPT_SNAPSHOT: op->snapshot = arg; break;
		case OPT_CONTINUE: op->cont = 1; break;
		case OPT_STATE: op->state_file = arg; break;
		case OPT_INIT: op->init_json = arg; break;
		case OPT_STORE: op->store_path = arg; break;
		case OPT_NO_STORE: op->no_store = 1; break;
		case OPT_AGENTS: spec->agents_dir = arg; break;
		case OPT_PROMPT: spec->prompt = arg; break;
		case OPT_INPUT: spec->input_json = arg; break;
		case OPT_MODEL: spec->model = arg; break;
		case OPT_SYSTEM: spec->system = arg; break;
		case OPT_CONFIG: spec->config_json = arg; break;
		case OPT_DESCRIBE: op->describe = 1; break;
		case OPT_FORMAT: format = arg; break;
		case OPT_INPUT_FORMAT:
			if (!strcmp(arg, "ndjson"))
				op->input_format = INTAKE_NDJSON;
			else if (!strcmp(arg, "text"))
				op->input_format = INTAKE_TEXT;
			else
				st = cli_usage("--input-format must be ndjson or text, not '%s'", arg);
			break;
		case OPT_LIST_MODELS: op->list_models = 1; break;
		case OPT_MAX_TURNS: {
			char *end;
			long n = strtol(arg, &end, 10);
			if (*arg == 0 || *end || n < 1 || n > 1000000)
				st = cli_usage("max turns must be greater than 0, got '%s'", arg);
			spec->max_turns = (int)n;
			break;
		}
		case OPT_DETACH: op->detach = 1; break;
		case OPT_EXEC: xspec->exec = arg; spec->model_optional = 1; break;
		case OPT_DOCS: xspec->docs = arg; break;
		case OPT_KEY_FILE: spec->key_file = arg; break;
		case OPT_MODEL_TIMEOUT: {
			/* Read by every model call (provider_http.c), also a
			 * detached worker's. */
			struct core_err de = { 0 };
			int64_t ms;
			if (core_duration_setting("--model-timeout", arg, NULL, 0, &ms, &de))
				st = cli_usage("%s", de.msg);
			else if (setenv("AGENTKIT_MODEL_TIMEOUT", arg, 1))
				st = cli_usage("--model-timeout: out of memory");
			break;
		}
		case OPT_STATE_TRANSFORM: xspec->state_transform = arg; break;
		case OPT_STREAM_TRANSFORM: xspec->stream_transform = arg; break;
		case OPT_LIST: op->list = 1; break;
		case OPT_MCP_CONFIG: st = push_arg(&op->mcp_configs, &op->nmcp, arg); break;
		case OPT_MCP_LIST: op->mcp_list = 1; break;
		case OPT_VERBOSE: op->verbose = 1; break;
		case OPT_JSON: spec->json_output = 1; break;
		case OPT_OUTPUT_SCHEMA: spec->output_schema = arg; break;
		case OPT_HB_INTERVAL: op->hb_interval = arg; break;
		case OPT_HB_TIMEOUT: op->hb_timeout = arg; break;
		case OPT_STDIN_TIMEOUT: op->stdin_wait = arg; break;
		case OPT_TRACE: op->trace = 1; break;
		case OPT_TRACE_FILE: op->trace_file = arg; break;
		case OPT_TRACE_CONTENT: op->trace_content = 1; break;
		case OPT_TRACE_NAMES:
			if (strcmp(arg, "genkit") && strcmp(arg, "semconv"))
				st = cli_usage("--trace-names must be genkit or semconv, not '%s'", arg);
			op->trace_semconv = !strcmp(arg, "semconv");
			break;
		case OPT_MAX_RECORD:
			st = cli_size("--max-record", arg, &op->max_record);
			break;
		}
	}
	if (st)
		return st;
	if ((st = stdin_wait_setting(op)))
		return st;
	if (optind < argc)
		spec->name = argv[optind++];
	if (optind < argc)
		return cli_usage("unexpected argument '%s'", argv[optind]);
	if ((st = check_habits(op)))
		return st;
	if (format && strcmp(format, "ndjson") && strcmp(format, "text") && strcmp(format, "json"))
		return cli_usage("--format must be ndjson, text or json, not '%s'", format);
	op->text = format ? !strcmp(format, "text") : isatty(1);
	op->json = format && !strcmp(format, "json");
	if (op->no_store && op->store_path)
		return cli_usage("--store and --no-store exclude each other");
	if (op->cont && (op->session || op->snapshot || op->state_file || op->init_json ||
	                 op->no_store))
		return cli_usage("--continue picks the session: drop --session, --snapshot, "
		                 "--state, --init and --no-store");
	spec->tools = op->tools;
	spec->default_model = getenv("AGENTKIT_MODEL");
	return CORE_OK;
}

/* The init: --init, then the flags (each key given once). */
static enum core_status build_init(struct run *r)
{
	const struct run_opts *op = &r->opts;
	struct core_err e = { 0 };
	struct feed_init f = { op->init_json, op->session, op->snapshot, op->state_file,
	                       op->max_record };
	enum core_status st = feed_init(&f, &r->init, &e);
	if (st == CORE_EUSAGE)
		return cli_usage("%s", e.msg);
	if (st == CORE_ENOMEM && !r->init && !op->init_json)
		return report_oom();
	return st ? init_failed(&r->o, &e) : CORE_OK;
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

/* The agent and its extensions (ext); its model is checked before any
 * turn starts (except for --describe, which describes it as it is). */
static enum core_status load_agent(struct run *r)
{
	struct core_err e = { 0 };
	enum core_status st = agent_load(&r->opts.spec, &r->agent, &e);
	if (st == CORE_ENOTFOUND && !r->agent) {
		init_failed(&r->o, &e);
		cli_warn("agent-run --list lists the agents; to send text use -m TEXT");
		return st;
	}
	if (!st)
		st = agent_ext_load(r->agent, &r->opts.xspec, &r->ext, &e);
	if (st)
		return st == CORE_EUSAGE ? cli_usage("%s", e.msg) : init_failed(&r->o, &e);
	if (r->agent->model && !r->opts.describe && (st = model_check(r->agent->model, &e))) {
		init_failed(&r->o, &e);
		/* A models file that cannot be read is no misspelt model. */
		if (strncmp(e.msg, "models file", 11))
			models_hint();
	}
	return st;
}

/* agent-run --describe: the agent's descriptor line. */
static enum core_status describe_agent(struct run *r)
{
	struct core_err e = { 0 };
	json_t *d = NULL;
	enum core_status st = agent_ext_describe(r->agent, r->ext, !r->opts.no_store, &d, &e);
	if (st)
		return init_failed(&r->o, &e);
	st = write_json(&r->o, d);
	json_decref(d);
	if (st)
		cli_report(&r->o.err);
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
	if (st == CORE_EPRECONDITION && op->state_file && !op->no_store)
		cli_warn("--state FILE is for client-managed runs: add --no-store (or resume "
		         "from the store with --session ID)");
	else if (st == CORE_EPRECONDITION && ids && op->no_store)
		cli_warn("--session and --snapshot resume from the store: drop --no-store (or "
		         "pass --state FILE)");
	else if (st == CORE_EINVAL && ids && op->state_file)
		cli_warn("give --state FILE or --session/--snapshot, not both");
}

/*
 * Tracing (docs/tracing.md), in the process that runs the invocation (the
 * back of a split run): never on stdout, never in the exit status.
 */
static void trace_open(struct run *r)
{
	struct trace_config c;
	if (trace_config_from_env(&c, r->opts.trace, r->opts.trace_file, "agent-run",
	                          AGENTKIT_VERSION)) {
		cli_warn("tracing off: out of memory");
		return;
	}
	if (c.note[0])
		cli_warn("%s", c.note);
	if (trace_init(&c))
		cli_warn("tracing off: out of memory");
	agent_trace_options(r->opts.trace_content, r->opts.trace_semconv);
	agent_trace_begin(r->agent->name, r->agent->model, r->t0);
}

/* End the root span, flush, and say in one line if an export failed or
 * spans were dropped (the collector did not answer within the bound). */
static void trace_close(struct run *r, enum core_status st)
{
	struct core_err e = { 0 };
	agent_trace_end(st, r->output);
	if (trace_finish(NULL, &e))
		cli_warn("%s", e.msg);
}

/* Heartbeat settings, the store (unless --no-store) and the runtime. */
static enum core_status open_runtime(struct run *r)
{
	const struct run_opts *op = &r->opts;
	struct core_err e = { 0 };
	int64_t hb_interval, hb_timeout;
	enum core_status st;
	trace_open(r);
	/* Heartbeats: the flags, else the environment, else Genkit's. */
	if (core_duration_setting("--heartbeat-interval", op->hb_interval,
	                          "AGENTKIT_HEARTBEAT_INTERVAL", DETACH_HEARTBEAT_INTERVAL_MS,
	                          &hb_interval, &e)
	    || store_heartbeat_timeout(op->hb_timeout, &hb_timeout, &e))
		return cli_usage("%s", e.msg);
	if (!op->no_store) {
		if (!(st = store_default_path(op->store_path, &r->store_dir, &e)))
			st = store_open(r->store_dir.p, &r->store, &e);
		if (!st && op->cont)
			st = feed_continue(r->store, r->agent->name, r->init, &e);
		if (st)
			return init_failed(&r->o, &e);
	}
	agent_ext_set_cancel(r->ext, run_cancelled, r);        /* its docs and transforms */
	struct rt_sink sink = { on_chunk, on_warn, r };        /* rt_open() copies it */
	struct rt_config cfg = {
		.agent = r->agent, .store = r->store, .init = r->init, .sink = &sink,
		.heartbeat_timeout_ms = hb_timeout,
		.cancelled = run_cancelled, .cancel_ctx = r,
		.ext = r->ext,
	};
	if ((st = rt_open(&cfg, &r->rt, &e))) {
		init_failed(&r->o, &e);
		init_next_step(op, st);
		return st;
	}
	agent_trace_session(rt_session_id(r->rt));
	r->det.rt = r->rt;
	r->det.agent = r->agent->name;
	r->det.store = &r->store;
	r->det.store_path = r->store_dir.p;
	r->det.hb_interval_ms = hb_interval;
	r->det.sink = (struct detach_sink){ worker_log, worker_stopped, r };
	return CORE_OK;
}

/* Caller stops (§2.5) from here on. */
static void watch_caller_stops(struct out_ctx *o)
{
	struct stat sb;
	o->pipe = fstat(1, &sb) == 0 && (S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode));
	catch_stop_signals();
}

/*
 * What stdin holds (intake_read_stdin()), in r->stdin_kind.  A terminal is
 * not read when -m gives the input, nor a stdin whose first byte does not
 * come within --stdin-timeout (said once; what comes later stays unread).
 * A stop signal while reading leaves no input: the run ends aborted.
 * Without -m, an empty stdin is said to have run nothing.
 */
static enum core_status read_stdin(struct run *r)
{
	const struct run_opts *op = &r->opts;
	struct core_err e = { 0 };
	r->stdin_kind = INTAKE_NONE;
	if (!r->stdin_open || (op->nmsg && isatty(0)))
		return CORE_OK;
	if (op->nmsg && !intake_stdin_ready(op->stdin_wait_ms, &stop_signal)) {
		if (op->stdin_wait_ms && !stop_signal)
			cli_warn("no input on stdin within %s: going on without it (give "
			         "</dev/null, or --stdin-timeout 0, to not read stdin)", op->stdin_wait);
		return CORE_OK;
	}
	enum core_status st = intake_read_stdin(op->input_format, op->max_record, &stop_signal,
	                                        &r->in, &r->stdin_kind, &e);
	if (st)
		return st == CORE_ENOMEM && !e.sys ? cli_report(&e) : init_failed(&r->o, &e);
	if (r->stdin_kind == INTAKE_NDJSON && op->nmsg)
		return cli_usage("-m and NDJSON on stdin both give turns: use one (or "
		                 "--input-format text to send stdin as text after the -m text)");
	if (!op->nmsg && r->stdin_kind == INTAKE_NONE && !stop_signal)
		cli_warn("no input: stdin is empty and no -m was given; nothing ran");
	return CORE_OK;
}

/*
 * NDJSON on stdin that is not a terminal is read eagerly: all of it now
 * when it is all there, else by the back process of a split run while its
 * turns run (intake_split()).  A terminal, --detach (which reads
 * everything first) and a split that could not start read between turns
 * (feed_stdin()).
 */
static enum core_status start_intake(struct run *r)
{
	struct core_err e = { 0 };
	int sig = 0;
	if (r->stdin_kind != INTAKE_NDJSON || r->opts.detach || isatty(0))
		return CORE_OK;
	int complete = intake_all_there(&r->in);
	int side = complete ? -1 : intake_split(&r->feed.front_fd, &r->front_exit, &sig);
	if (side == 0 && sig) {
		/* The back died of a signal: so does the front. */
		signal(sig, SIG_DFL);
		raise(sig);
	}
	if (side == 0 || (side < 0 && !complete))
		return CORE_OK;         /* the front (the back ran it), or no split */
	r->feed.back = side == 1;
	enum core_status st = intake_start(&r->intake, &r->in, r->opts.max_record, side == 1, &e);
	return st ? cli_report(&e) : CORE_OK;
}

/* The inputs: -m, else stdin.  How they went is in the runtime
 * (rt_output) and, once detached, in r->det.role. */
static void run_inputs(struct run *r)
{
	const struct core_buf *text = r->stdin_kind == INTAKE_TEXT ? &r->in : NULL;
	if (r->intake.on)
		feed_intake(&r->feed);
	else if (r->stdin_kind == INTAKE_NDJSON)
		feed_stdin(&r->feed, &r->in, r->opts.max_record, r->opts.detach);
	else
		feed_messages(&r->feed, r->opts.messages, r->opts.nmsg, text, r->opts.detach);
}

/* §2.2 step 6: the caller's detached output, at once (also the feed's
 * detached(), in the back of a split run). */
static enum core_status print_detached(void *ctx)
{
	struct run *r = ctx;
	const char *session = rt_session_id(r->rt);
	r->output = json_pack("{s:s, s:s, s:s}", "finishReason", "detached",
	                      "sessionId", session, "snapshotId", r->det.id);
	if (!r->output)
		return CORE_ENOMEM;
	if (r->o.text) {
		fprintf(stderr, "%s: detached, session %s, snapshot %s (log: %s)\n", cli_progname,
		        session, r->det.id, r->det.log.p);
		return CORE_OK;
	}
	json_t *line = r->o.json ? json_incref(r->output) : json_pack("{s:O}", "output", r->output);
	enum core_status st = line ? write_json(&r->o, line) : CORE_ENOMEM;
	json_decref(line);
	if (st)
		cli_report(&r->o.err);
	return st;
}

/*
 * Text mode's summary on stderr: "agent-run: stop, session S, snapshot R,
 * 12 tokens in, 30 out" (characters for models that count those), and
 * ", trace T" when tracing.
 */
static void print_summary(struct run *r)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (!render_summary(cli_progname, r->output, rt_session_id(r->rt), rt_usage(r->rt),
	                    trace_id(), r->o.color, &b)) {
		fflush(stdout);
		fprintf(stderr, "%s\n", b.p);
	}
	core_buf_release(&b);
}

/* The final line of an attached run: {"output": AgentOutput} (or, with
 * --format text, a summary on stderr); its status is the exit status. */
static enum core_status print_output(struct run *r)
{
	struct out_ctx *o = &r->o;
	struct core_err e = { 0 };
	if (stop_signal || o->gone)
		rt_abort(r->rt);        /* stopped between turns; a no-op once a turn ended it */
	rt_finish(r->rt);       /* a custom agent's end, failed transforms */
	if (!(r->output = rt_output(r->rt)))
		return report_oom();
	if (agent_ext_output(r->ext, r->output, &e))       /* its result, the state transform */
		cli_warn("the state is omitted from the failed output: %s", e.msg);
	enum core_status st = rt_exit_status(r->rt, r->output);
	const json_t *err = json_object_get(r->output, "error");
	const char *err_status = json_string_value(json_object_get(err, "status"));
	if (err && stop_signal && err_status && !strcmp(err_status, "CANCELLED"))
		/* The output keeps Genkit's CANCELLED "context canceled"; people
		 * who pressed Ctrl-C read what happened. */
		cli_warn("interrupted%s", stop_signal == SIGINT ? ""
		         : stop_signal == SIGTERM ? " by SIGTERM" : " by SIGHUP");
	else if (err && !o->gone)       /* a reader that went away is a quiet stop */
		cli_warn("%s", json_string_value(json_object_get(err, "message")));
	if (o->json) {
		if (!o->st)
			o->st = write_json(o, r->output);
	} else if (!o->text) {
		json_t *line = json_pack("{s:O}", "output", r->output);
		if (!o->st && line)
			o->st = write_json(o, line);
		json_decref(line);
	} else {
		print_summary(r);
	}
	if (o->st && o->st != CORE_EPIPE)
		st = cli_report(&o->err);
	int null;
	if (o->gone && st == CORE_ABORTED && (null = open("/dev/null", O_WRONLY | O_CLOEXEC)) >= 0) {
		/* The reader went away and the run ended as a caller stop: exit
		 * with that (2), not with the quiet EPIPE stop. */
		dup2(null, 1);
		close(null);
		clearerr(stdout);
	}
	return st;
}

/* ---- MCP servers (docs/mcp.md; libcore/agent/mcp_run.h) ---- */

/* A server's stderr line: shown with --verbose, and in a detached worker
 * (its stderr is its log). */
static void mcp_stderr_line(void *ctx, const char *server, const char *line)
{
	struct run *r = ctx;
	if (r->opts.verbose || r->det.role == DETACH_WORKER)
		cli_warn("mcp %s: %s", server, line);
}

static enum core_status new_mcp_set(struct run *r)
{
	if (!(r->mcp_set = mcp_set_new()))
		return report_oom();
	mcp_set_stderr(r->mcp_set, mcp_stderr_line, r);
	/* A stop ends a server's start-up at once (never set before
	 * watch_caller_stops(): --describe and --mcp-list keep SIGTERM's
	 * default). */
	mcp_set_cancel(r->mcp_set, run_cancelled, r);
	return CORE_OK;
}

static enum core_status load_mcp(struct run *r)
{
	struct core_err e = { 0 };
	enum core_status st = mcp_run_load(&r->mcp, r->opts.mcp_configs, r->opts.nmcp, &e);
	if (st == CORE_EUSAGE)
		return cli_usage("%s", e.msg);
	return st ? cli_report(&e) : CORE_OK;
}

static void mcp_skipped(void *ctx, const struct core_err *e)
{
	cli_warn("%s (an optional server: the run goes on without its tools)", e->msg);
}

/* Start every server and give the agent their tools (before the first
 * model call; in the back process of a split run, which runs the turns). */
static enum core_status start_mcp(struct run *r)
{
	struct core_err e = { 0 };
	enum core_status st = mcp_run_add_agent(&r->mcp, r->agent, &e);
	if (!st && (st = new_mcp_set(r)))
		return st;
	if (!st)
		st = mcp_run_start(r->mcp_set, &r->mcp, mcp_skipped, r, &e);
	/* A stop during start-up: the run goes on to end aborted before its
	 * first turn, as after a stop while stdin is read (print_output());
	 * every server is broken, so the agent is given no MCP tool. */
	if (st == CORE_ECANCELLED)
		st = CORE_OK;
	if (st)
		return st == CORE_EUSAGE ? cli_usage("%s", e.msg) : init_failed(&r->o, &e);
	if ((st = mcp_run_tools(r->mcp_set, r->agent, r->opts.ntools, &e)))
		return st == CORE_EUSAGE ? cli_usage("%s", e.msg) : cli_report(&e);
	return CORE_OK;
}

static enum core_status mcp_list_row(void *ctx, const json_t *row, struct core_err *e)
{
	struct run *r = ctx;
	enum core_status st = write_json(&r->o, row);
	if (st)
		*e = r->o.err;
	return st;
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
	if (!r->mcp.n)
		return cli_usage("--mcp-list needs --mcp-config FILE or $AGENTKIT_MCP_CONFIG");
	if ((st = new_mcp_set(r)))
		return st;
	st = mcp_run_list(r->mcp_set, &r->mcp, r->opts.spec.name, mcp_list_row,
	                  mcp_list_failed, r, &e);
	if (st == CORE_EUSAGE)
		return cli_usage("%s", e.msg);
	/* CORE_FAILED: each failed server is named already. */
	return st && st != CORE_FAILED ? cli_report(&e) : st;
}

int main(int argc, char **argv)
{
	struct run r = { .store_dir = CORE_BUF_INIT(4096), .in = CORE_BUF_INIT(0),
	                 .front_exit = -1 };
	struct render_sink view = { view_text, view_flush, view_note, &r.o };
	enum core_status st;

	cli_start(&prog);
	intake_init(&r.intake);
	r.feed = (struct feed){ .det = &r.det, .intake = &r.intake, .stop = &stop_signal,
	                        .front_fd = -1, .detached = print_detached, .ctx = &r };
	r.t0 = core_now_ns();
	r.stdin_open = fcntl(0, F_GETFD) != -1;
	/* Before any child or thread: no core dump, keys out of /proc/PID/environ. */
	if ((st = spawn_protect_keys(cli_secret_variable, NULL)))
		goto out;
	core_buf_init(&r.o.line, CORE_BUF_UNLIMITED);
	if ((st = parse_options(argc, argv, &r.opts)))
		goto out;
	r.o.text = r.opts.text;
	r.o.json = r.opts.json;
	r.o.color = r.o.text && isatty(2) && !(getenv("NO_COLOR") && *getenv("NO_COLOR"));
	if (render_init(&r.o.view, r.o.color, view)) {
		st = report_oom();
		goto out;
	}
	if (r.opts.list_models) {
		st = list_models(&r.o, r.opts.spec.key_file);
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
		st = list_agents(&r.o, r.opts.spec.agents_dir);
		goto out;
	}
	if ((st = load_agent(&r)))
		goto out;
	if (r.opts.describe) {
		if (!(st = start_mcp(&r)))
			st = describe_agent(&r);
		goto out;
	}
	watch_caller_stops(&r.o);
	if ((st = read_stdin(&r)))
		goto out;
	if ((st = start_intake(&r)) || r.front_exit >= 0 || (st = start_mcp(&r)) ||
	    (st = open_runtime(&r)))
		goto out;
	run_inputs(&r);
	switch (r.det.role) {
	case DETACH_WORKER: st = r.det.worker_st; break;
	case DETACH_CALLER: st = print_detached(&r); break;
	default: st = print_output(&r); break;
	}
out:
	trace_close(&r, st);
	json_decref(r.output);
	detach_run_release(&r.det);
	rt_free(r.rt);
	store_close(r.store);
	core_buf_release(&r.store_dir);
	agent_ext_free(r.ext);
	agent_free(r.agent);
	json_decref(r.init);
	free(r.opts.messages);
	free(r.opts.tools);
	free(r.opts.mcp_configs);
	mcp_set_free(r.mcp_set);
	mcp_config_release(&r.mcp);
	core_buf_release(&r.in);
	intake_release(&r.intake);
	render_release(&r.o.view);
	core_buf_release(&r.o.line);
	if (r.feed.front_fd >= 0)
		close(r.feed.front_fd);
	/* The front of a split run exits as its back did. */
	return r.front_exit >= 0 ? r.front_exit : cli_finish(st);
}
