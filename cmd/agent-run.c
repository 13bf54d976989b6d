/* agent-run.c - run an agent: AgentInput in, AgentStreamChunk NDJSON out,
 * one final output line. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "../libcore/agent/agent.h"
#include "../libcore/agent/agent_ext.h"
#include "../libcore/agent/detach.h"
#include "../libcore/base/json.h"
#include "../libcore/base/lines.h"
#include "../libcore/model/model.h"
#include "../libcore/agent/mcp.h"
#include "../libcore/agent/runtime.h"
#include "../libcore/base/spawn.h"
#include "../libcore/base/util.h"
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
	OPT_DETACH = 'd',
	OPT_CONTINUE = 'c',
	OPT_HB_INTERVAL = CLI_LONG + 100,
	OPT_HB_TIMEOUT,
	OPT_EXEC = CLI_LONG + 300,
	OPT_DOCS,
	OPT_STATE_TRANSFORM,
	OPT_STREAM_TRANSFORM,
	OPT_LIST,
	OPT_INPUT_FORMAT = CLI_LONG + 400,
	OPT_LIST_MODELS,
	OPT_OUTPUT_SCHEMA = CLI_LONG + 500,
	OPT_JSON,
	OPT_MCP_CONFIG = CLI_LONG + 600,
	OPT_MCP_LIST,
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
	{ OPT_LIST, "list", NULL, "list the agents on the agent path with their descriptions and exit" },
	{ OPT_MCP_CONFIG, "mcp-config", "FILE", "start the MCP servers of FILE ({\"mcpServers\": ...}, "
	  "as .mcp.json) and give the agent their tools (repeatable; also $AGENTKIT_MCP_CONFIG, "
	  "colon-separated; docs/mcp.md)" },
	{ OPT_MCP_LIST, "mcp-list", NULL, "start the MCP servers (only the one named by the operand, if "
	  "given), print one NDJSON line per tool and exit: 1 names a server that failed" },
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

/* What stdin holds (read_stdin()). */
enum { STDIN_NONE, STDIN_NDJSON, STDIN_TEXT };

struct out_ctx {
	int text;               /* --format text */
	int json;               /* --format json: the final object only */
	int color;              /* text: colour on stderr (a terminal, no NO_COLOR) */
	int midline;            /* text printed without a newline yet */
	json_int_t msg_index;   /* text: the model message last printed, or -1 */
	json_t *tools_open;     /* text: names of tool requests not answered yet */
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
	const char **messages, **tools;         /* NULL-terminated, or NULL */
	size_t nmsg, ntools;
	size_t max_record;
	int text;                       /* --format text (default: stdout is a terminal) */
	int json;                       /* --format json: only the final object */
	int input_format;               /* --input-format: STDIN_NDJSON, STDIN_TEXT, or 0 */
	int no_store, describe, detach, list, list_models, cont;
	const char **mcp_configs;       /* --mcp-config, NULL-terminated, or NULL */
	size_t nmcp;
	int mcp_list;
};

/*
 * Eager intake (runtime-semantics §2.1; docs/detach.md): stdin's AgentInput
 * lines, read as they arrive and queued for the turns.  A reader thread
 * fills it while turns run (the back process of a split run), or the main
 * thread fills it on demand from input that is all there (stdin at end of
 * file).  The reader stops at end of file, at the first line that is not a
 * good input (err, handed to the turns after the lines before it), or
 * after a detach line: that line and every line already written behind it
 * are queued at once and "detach" turns true.
 */
#define INTAKE_MAX_INPUTS 1000                  /* inputs read ahead of the turns */
#define INTAKE_MAX_BYTES ((size_t)64 << 20)     /* ... and their text, at most */

struct intake_item {
	json_t *in;
	size_t len;             /* its line's length, for INTAKE_MAX_BYTES */
};

struct intake {
	int on;                 /* the inputs come from here (else run_stdin()) */
	int threaded;           /* a reader thread fills it */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t room;    /* the reader waits for room */
	struct core_lines lr;   /* the reader's */
	struct intake_item *q;  /* q[head..n) wait for their turn */
	size_t head, n, cap, bytes;
	int done, quit;         /* the reader stopped; is told to stop */
	atomic_int detach;      /* a detach line was read: q holds it and the drain */
	struct core_err err;    /* why the reader stopped short (st CORE_OK: it did not) */
	int wake[2];            /* "the queue changed" (and stop signals), to the turns */
	int stop[2];            /* "stop reading", to the reader thread */
	int own_fd;             /* lr.fd is the reader's own description of stdin */
	int restore_fl;         /* stdin's flags to put back, or -1 */
};

/* What main() holds; released at its out: label. */
struct run {
	struct run_opts opts;
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
	int stdin_kind;                 /* STDIN_NONE, STDIN_NDJSON or STDIN_TEXT */
	struct core_buf in;             /* stdin's text, or the NDJSON bytes read ahead */
	struct intake intake;           /* NDJSON inputs read while turns run */
	int back;                       /* this is the back process of a split run */
	int front_fd;                   /* back: the pipe to the front, or -1 */
	int front_exit;                 /* front: the back's exit status, or -1 */
	int detach_failed;              /* a detach in the middle of a turn failed */
	struct mcp_config mcp;          /* the MCP servers configured (docs/mcp.md) */
	struct mcp_set *mcp_set;        /* ... once started */
};

/* ---- caller stops (runtime-semantics §2.5) ---- */

/* The first SIGINT/SIGTERM/SIGHUP.  With the wake pipe of the intake (the
 * handler's way to wake the turn loop waiting for input) and the front's
 * back process (where it forwards the signals), agent-run's file-scope
 * state: a signal handler reaches nothing else. */
static volatile sig_atomic_t stop_signal;
static int wake_fd = -1;
static volatile pid_t back_pid;

static void on_stop_signal(int sig)
{
	if (stop_signal) {
		/* The second one: end at once, as the signal does by default. */
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	stop_signal = sig;
	/* A read of stdin blocked between turns sees EOF after EINTR, and a
	 * turn loop waiting for the intake wakes up.  open, dup2, write and
	 * close are async-signal-safe; errno is the interrupted code's. */
	int saved = errno;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		close(null);
	}
	if (wake_fd >= 0) {
		ssize_t w = write(wake_fd, "s", 1);
		(void)w;        /* a full pipe is awake already */
	}
	errno = saved;
}

/* The front of a split run: every stop signal is the back's to handle
 * (it is in a session of its own, so the terminal's reach only the front). */
static void on_front_signal(int sig)
{
	int saved = errno;
	if (back_pid > 0)
		kill(back_pid, sig);
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

static void detach_in_turn(struct run *r);

/* The runtime's cancelled(): a stop signal, the reader of stdout gone, or
 * (in the detached worker) the abort flip.  It is also where a turn sees a
 * detach line that arrived while it runs. */
static int run_cancelled(void *ctx)
{
	struct run *r = ctx;
	struct out_ctx *o = &r->o;
	if (stop_signal || o->gone)
		return 1;
	if (r->det.role == DETACH_NONE && !r->detach_failed && r->intake.threaded
	    && atomic_load(&r->intake.detach))
		detach_in_turn(r);      /* a detach line arrived while this turn runs */
	if (r->detach_failed)
		return 1;
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

/* End the text line on stdout (before a tool line, a new message, the
 * turn's end). */
static enum core_status end_line(struct out_ctx *o)
{
	enum core_status st = CORE_OK;
	if (o->midline)
		st = cli_write("\n", 1, &o->err);
	o->midline = 0;
	if (!st)
		st = cli_flush(&o->err);
	return st;
}

/* Text mode: the first open request of this name was answered. */
static void close_tool(struct out_ctx *o, const char *name)
{
	size_t i;
	json_t *p;
	json_array_foreach(o->tools_open, i, p)
		if (name && !strcmp(json_string_value(p), name)) {
			json_array_remove(o->tools_open, i);
			return;
		}
}

/* Text mode: "tool NAME [WHAT] <compact JSON of v, cut short>" on stderr,
 * WHAT (ok, error, interrupted) coloured when o->color. */
static void tool_line(const struct out_ctx *o, const char *name, const json_t *v,
                      const char *what, const char *color)
{
	enum { SHORT = 72 };
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	size_t n = 0;
	if (v && !jv_dump(v, &b)) {
		n = b.len;
		if (n > SHORT) {
			n = SHORT;
			while (n && ((unsigned char)b.p[n] & 0xC0) == 0x80)
				n--;    /* not inside a UTF-8 sequence */
		}
	}
	fflush(stdout);
	const char *dim = o->color ? "\033[2m" : "", *off = o->color ? "\033[0m" : "";
	fprintf(stderr, "%stool %s%s", dim, name ? name : "?", off);
	if (what)
		fprintf(stderr, " %s%s%s", o->color ? color : "", what, off);
	if (n)
		fprintf(stderr, " %s%.*s%s%s", dim, (int)n, b.p, n < b.len ? "..." : "", off);
	fputc('\n', stderr);
	core_buf_release(&b);
}

/*
 * Text mode: the model's text on stdout, a line break between model
 * messages; each tool request and its outcome on stderr, one line each
 * (a request still open when the turn fails is the one that failed).
 */
static enum core_status show_text(struct out_ctx *o, const json_t *chunk)
{
	const json_t *mc = json_object_get(chunk, "modelChunk");
	const char *role = json_string_value(json_object_get(mc, "role"));
	enum core_status st = CORE_OK;
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(mc, "content"), i, p) {
		const json_t *t = json_object_get(p, "text");
		const json_t *req = json_object_get(p, "toolRequest");
		const json_t *res = json_object_get(p, "toolResponse");
		const json_t *intr = json_object_get(json_object_get(p, "metadata"), "interrupt");
		json_int_t index = json_integer_value(json_object_get(mc, "index"));
		if (role && !strcmp(role, "model") && json_is_string(t) && json_string_length(t)) {
			if (index != o->msg_index && (st = end_line(o)))
				return st;
			o->msg_index = index;
			if ((st = cli_write(json_string_value(t), json_string_length(t), &o->err)))
				return st;
			o->midline = json_string_value(t)[json_string_length(t) - 1] != '\n';
		} else if ((req || res) && !(st = end_line(o))) {
			const char *name = json_string_value(json_object_get(req ? req : res, "name"));
			if (intr)
				tool_line(o, name, json_is_true(intr) ? NULL : intr, "interrupted", "\033[33m");
			else if (res)
				tool_line(o, name, json_object_get(res, "output"), "ok", "\033[32m");
			else
				tool_line(o, name, json_object_get(req, "input"), NULL, NULL);
			if (req && !intr)
				json_array_append_new(o->tools_open, json_string(name ? name : "?"));
			else if (res || intr)
				close_tool(o, name);
		}
		if (st)
			return st;
	}
	const json_t *te = json_object_get(chunk, "turnEnd");
	if (te) {
		const char *reason = json_string_value(json_object_get(te, "finishReason"));
		json_array_foreach(o->tools_open, i, p)
			if (reason && !strcmp(reason, "failed"))
				tool_line(o, json_string_value(p), NULL, "error", "\033[31m");
		json_array_clear(o->tools_open);
		o->msg_index = -1;
		st = end_line(o);
	}
	return st ? st : cli_flush(&o->err);
}

static enum core_status show_chunk(void *ctx, const json_t *chunk)
{
	struct out_ctx *o = ctx;
	enum core_status st = CORE_OK;
	if (o->st)
		return o->st;
	if (o->json)
		return CORE_OK;
	st = o->text ? show_text(o, chunk) : write_json(o, chunk);
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
	const json_t *keys = json_object_get(row, "keyVariables"), *v;
	const char *from = json_string_value(json_object_get(row, "keyFrom"));
	const char *base = json_string_value(json_object_get(row, "baseUrl"));
	/* A column of 10, and a space after a longer name. */
	enum core_status st = core_buf_addf(&b, "%-9s ", json_string_value(json_object_get(row,
	                                                                   "provider")));
	size_t i;
	if (!base)
		st = st ? st : core_buf_adds(&b, "offline, no key");
	else if (from)
		st = st ? st : core_buf_addf(&b, "key from %s, %s", from, base);
	else if (!json_array_size(keys) || json_is_true(json_object_get(row, "keyOptional")))
		st = st ? st : core_buf_addf(&b, "no key needed, %s", base);
	else {
		json_array_foreach(keys, i, v)
			st = st ? st : core_buf_addf(&b, "%s%s", i ? " or " : "",
			                             json_string_value(v));
		st = st ? st : core_buf_addf(&b, ": not set, %s", base);
	}
	json_array_foreach(json_object_get(row, "models"), i, v)
		st = st ? st : core_buf_addf(&b, "\n  %s", json_string_value(v));
	if (!st && json_object_get(row, "error"))
		st = core_buf_addf(&b, "\n  (cannot list: %s)", json_string_value(json_object_get(
		                   json_object_get(row, "error"), "message")));
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
		json_t *line = json_pack("{s:{s:s, s:s}}", "error", "status", core_status_name(e->st),
		                         "message", e->msg);
		if (line)
			write_json(o, line);
		json_decref(line);
	}
	return e->st;
}

static enum core_status set_init(json_t *init, const char *key, json_t *v)
{
	if (json_object_get(init, key)) {
		json_decref(v);
		return cli_usage("the init's '%s' is given twice (--init and a flag)", key);
	}
	json_object_set_new(init, key, v);
	return CORE_OK;
}

static json_t *user_message(const char *text, size_t len)
{
	return json_pack("{s:{s:[{s:s%}], s:s}}", "message", "content", "text", text, len,
	                 "role", "user");
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

/* Queue an input for the background; a failure ends the invocation. */
static enum core_status queue_input(struct detach_run *d, const json_t *in)
{
	struct core_err e = { 0 };
	enum core_status st = in ? detach_queue_add(&d->queue, in, &e)
	                         : core_fail(&e, CORE_ENOMEM, "out of memory");
	if (st)
		rt_fail(d->rt, st, e.msg);
	return st;
}

/* One stdin line as an AgentInput: *in is NULL for a "null" line; e names
 * the line of an error.  Any thread. */
static enum core_status parse_line(const char *line, size_t len, size_t lineno, json_t **in,
                                   struct core_err *e)
{
	*in = jv_parse(line, len, "<stdin>", lineno, e);
	if (!*in)
		return e->st;
	if (json_is_null(*in)) {
		json_decref(*in);
		*in = NULL;
		return CORE_OK;
	}
	if (rt_input_check(*in, e)) {
		char msg[sizeof e->msg];
		snprintf(msg, sizeof msg, "%s", e->msg);
		core_fail(e, CORE_EINVAL, "%s (at <stdin>:%zu)", msg, lineno);
		json_decref(*in);
		*in = NULL;
		return CORE_EINVAL;
	}
	return CORE_OK;
}

/* parse_line(), an error ending the invocation (rt_fail). */
static enum core_status parse_input(struct runtime *rt, const char *line, size_t len,
                                    size_t lineno, json_t **in)
{
	struct core_err e = { 0 };
	enum core_status st = parse_line(line, len, lineno, in, &e);
	if (st)
		rt_fail(rt, st, e.msg);
	return st;
}

/*
 * Queue stdin's lines: all of them (--detach), or only those already
 * written (a "detach" line: the reader drains what is there without
 * blocking, later lines are not read).
 */
static enum core_status queue_stdin(struct detach_run *d, struct core_lines *lr, int nonblock)
{
	struct core_err e = { 0 };
	enum core_status st = CORE_OK;
	int fl = nonblock ? fcntl(0, F_GETFL) : -1;
	int restore = fl >= 0 && !(fl & O_NONBLOCK) && fcntl(0, F_SETFL, fl | O_NONBLOCK) == 0;
	char *line;
	size_t len;
	for (;;) {
		st = core_lines_next(lr, &line, &len, &e);
		if (st == CORE_ESYS && nonblock && (e.sys == EAGAIN || e.sys == EWOULDBLOCK)) {
			st = CORE_OK;
			break;
		}
		if (st) {
			rt_fail(d->rt, st == CORE_ESYS ? CORE_ESYS : CORE_EINVAL, e.msg);
			break;
		}
		if (!line)
			break;
		json_t *in;
		if ((st = parse_input(d->rt, line, len, lr->lineno, &in)))
			break;
		if (in && (st = queue_input(d, in))) {
			json_decref(in);
			break;
		}
		json_decref(in);
	}
	if (restore)
		fcntl(0, F_SETFL, fl);
	return st;
}

/* Run stdin's AgentInput lines (after the bytes in ahead); stops at the
 * first failed turn, or detaches at a "detach" line. */
static enum core_status run_stdin(struct detach_run *d, const struct core_buf *ahead,
                                  size_t max_record, int detach_all)
{
	struct core_lines lr;
	struct core_err e = { 0 };
	enum core_status st = CORE_OK;
	char *line;
	size_t len;
	core_lines_init(&lr, 0, "<stdin>", max_record);
	/* The bytes read_stdin() took to see the format come first. */
	if (ahead->len && core_buf_add(&lr.buf, ahead->p, ahead->len)) {
		rt_fail(d->rt, CORE_ENOMEM, "out of memory");
		core_lines_release(&lr);
		return CORE_ENOMEM;
	}
	if (detach_all) {
		if (!(st = queue_stdin(d, &lr, 0)) && !stop_signal)
			st = detach_start(d);
		core_lines_release(&lr);
		return st;
	}
	for (;;) {
		if ((st = core_lines_next(&lr, &line, &len, &e))) {
			rt_fail(d->rt, st == CORE_ESYS ? CORE_ESYS : CORE_EINVAL, e.msg);
			break;
		}
		if (!line || stop_signal)
			break;
		json_t *in;
		if ((st = parse_input(d->rt, line, len, lr.lineno, &in)))
			break;
		if (!in)
			continue;
		if (json_is_true(json_object_get(in, "detach"))) {
			/* §2.1: this input (if it has a payload) and the lines
			 * already written go to the background. */
			st = queue_input(d, in);
			json_decref(in);
			if (st)
				break;
			if (*d->store && (st = queue_stdin(d, &lr, 1)))
				break;
			st = detach_start(d);
			break;
		}
		st = rt_turn(d->rt, in);
		json_decref(in);
		if (st)
			break;
	}
	core_lines_release(&lr);
	return st;
}

/* ---- eager intake and the front/back split (docs/detach.md "Eager intake") ---- */

static enum core_status print_detached(struct run *r);

static void intake_wake(struct intake *in)
{
	if (in->wake[1] >= 0) {
		ssize_t w = write(in->wake[1], "i", 1);
		(void)w;        /* a full pipe is awake already */
	}
}

static int intake_full(const struct intake *in)
{
	return in->n - in->head >= INTAKE_MAX_INPUTS || in->bytes >= INTAKE_MAX_BYTES;
}

/* Append to q (the lock held, or no reader thread). */
static enum core_status intake_append(struct intake *in, json_t *v, size_t len)
{
	if (in->n == in->cap) {
		if (in->head) {
			/* Slide the waiting inputs to the front first. */
			memmove(in->q, in->q + in->head, (in->n - in->head) * sizeof *in->q);
			in->n -= in->head;
			in->head = 0;
		}
		if (in->n == in->cap) {
			size_t cap = in->cap ? 2 * in->cap : 16;
			struct intake_item *q = realloc(in->q, cap * sizeof *q);
			if (!q)
				return CORE_ENOMEM;
			in->q = q;
			in->cap = cap;
		}
	}
	in->q[in->n++] = (struct intake_item){ v, len };
	in->bytes += len;
	return CORE_OK;
}

/* The reader stops: e (NULL: end of file) is what the turns get after
 * the inputs before it. */
static void intake_end(struct intake *in, const struct core_err *e)
{
	pthread_mutex_lock(&in->mu);
	if (e)
		in->err = *e;
	in->done = 1;
	pthread_mutex_unlock(&in->mu);
	intake_wake(in);
}

/*
 * The next record of stdin; an error in e with agent-run's status for it.
 * The reader thread's descriptor does not block: with wait it sleeps until
 * stdin has more or it is told to stop (CORE_ECANCELLED); without, "no
 * more for now" is CORE_ESYS with EAGAIN.
 */
static enum core_status intake_next(struct intake *in, int wait, char **line, size_t *len,
                                    struct core_err *e)
{
	enum core_status st;
	for (;;) {
		st = core_lines_next(&in->lr, line, len, e);
		if (!wait || !in->threaded || st != CORE_ESYS
		    || (e->sys != EAGAIN && e->sys != EWOULDBLOCK))
			break;
		struct pollfd p[2] = { { .fd = in->lr.fd, .events = POLLIN },
		                       { .fd = in->stop[0], .events = POLLIN } };
		while (poll(p, 2, -1) < 0 && errno == EINTR)
			;
		if (p[1].revents)
			return CORE_ECANCELLED;
	}
	if (st && st != CORE_ESYS)
		e->st = st = CORE_EINVAL;
	return st;
}

/*
 * A detach line was read (§2.1): it and every line already written behind
 * it (read without waiting; later lines are not read) join the queue at
 * once, then "detach" turns true and the reader stops.  A malformed line
 * among them ends the drain and becomes the tail error.
 */
static void intake_detach(struct intake *in, json_t *v, size_t len)
{
	struct intake_item *got = malloc(16 * sizeof *got);
	size_t n = 0, cap = 16;
	struct core_err tail = { 0 };
	int fd = in->lr.fd, fl = fcntl(fd, F_GETFL);
	int restore = fl >= 0 && !(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
	if (got)
		got[n++] = (struct intake_item){ v, len };
	else
		core_fail(&tail, CORE_ENOMEM, "out of memory");
	while (got && n < DETACH_QUEUE_MAX) {
		char *line;
		size_t ll;
		struct core_err e = { 0 };
		json_t *w = NULL;
		enum core_status st = intake_next(in, 0, &line, &ll, &e);
		if (st == CORE_ESYS && (e.sys == EAGAIN || e.sys == EWOULDBLOCK))
			break;
		if (!st && line)
			st = parse_line(line, ll, in->lr.lineno, &w, &e);
		if (st) {
			tail = e;
			break;
		}
		if (!line)
			break;
		if (!w)
			continue;
		if (n == cap) {
			struct intake_item *g = realloc(got, 2 * cap * sizeof *g);
			if (!g) {
				json_decref(w);
				core_fail(&tail, CORE_ENOMEM, "out of memory");
				break;
			}
			got = g;
			cap *= 2;
		}
		got[n++] = (struct intake_item){ w, ll };
	}
	if (restore)
		fcntl(fd, F_SETFL, fl);
	pthread_mutex_lock(&in->mu);
	for (size_t i = 0; i < n; i++)
		if (intake_append(in, got[i].in, got[i].len)) {
			for (; i < n; i++)
				json_decref(got[i].in);
			core_fail(&tail, CORE_ENOMEM, "out of memory");
		}
	if (!got)
		json_decref(v);
	in->err = tail;
	in->done = 1;
	atomic_store(&in->detach, 1);
	pthread_mutex_unlock(&in->mu);
	free(got);
	intake_wake(in);
}

/* Read stdin into the queue until the reader stops (or, without a reader
 * thread, until the queue is full). */
static void intake_fill(struct intake *in)
{
	for (;;) {
		pthread_mutex_lock(&in->mu);
		while (in->threaded && intake_full(in) && !in->quit)
			pthread_cond_wait(&in->room, &in->mu);
		int stop = in->quit || in->done || (!in->threaded && intake_full(in));
		pthread_mutex_unlock(&in->mu);
		if (stop)
			return;
		char *line;
		size_t len;
		struct core_err e = { 0 };
		json_t *v = NULL;
		enum core_status st = intake_next(in, 1, &line, &len, &e);
		if (st == CORE_ECANCELLED)
			return;         /* told to stop */
		if (!st && line)
			st = parse_line(line, len, in->lr.lineno, &v, &e);
		if (st || !line) {
			intake_end(in, st ? &e : NULL);
			return;
		}
		if (!v)
			continue;
		if (json_is_true(json_object_get(v, "detach"))) {
			intake_detach(in, v, len);
			return;
		}
		pthread_mutex_lock(&in->mu);
		st = in->quit ? CORE_ECANCELLED : intake_append(in, v, len);
		pthread_mutex_unlock(&in->mu);
		if (st == CORE_ECANCELLED) {
			json_decref(v);
			return;
		}
		if (st) {
			json_decref(v);
			intake_end(in, &(struct core_err){ CORE_ENOMEM, 0, "out of memory" });
			return;
		}
		intake_wake(in);
	}
}

static void *intake_main(void *arg)
{
	intake_fill(arg);
	return NULL;
}

/*
 * The reader thread's descriptor: one that never blocks, so the reader can
 * wait for stdin and for "stop" at once, and that is not fd 0 (a stop
 * signal puts /dev/null there).  A pipe or FIFO is opened again (its own
 * open file description: O_NONBLOCK stays ours, not the caller's); a
 * socket is duplicated and O_NONBLOCK until the intake ends; other files
 * (regular ones) do not block anyway.
 */
static int reader_fd(struct intake *in)
{
	struct stat sb;
	int fd = -1;
	if (fstat(0, &sb) < 0 || !(S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode)))
		return 0;
	if (S_ISFIFO(sb.st_mode))
		fd = open("/proc/self/fd/0", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && (fd = fcntl(0, F_DUPFD_CLOEXEC, 3)) >= 0) {
		int fl = fcntl(fd, F_GETFL);
		if (fl >= 0 && !(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0)
			in->restore_fl = fl;
	}
	if (fd < 0)
		return 0;
	in->own_fd = 1;
	return fd;
}

/* The intake over stdin after the bytes read ahead; threaded: with a
 * reader thread (the stop signals are the main thread's). */
static enum core_status intake_start(struct run *r, int threaded)
{
	struct intake *in = &r->intake;
	in->restore_fl = -1;
	core_lines_init(&in->lr, threaded ? reader_fd(in) : 0, "<stdin>", r->opts.max_record);
	pthread_mutex_init(&in->mu, NULL);
	pthread_cond_init(&in->room, NULL);
	in->on = 1;
	/* The bytes read ahead may be many records (stdin_complete()): the
	 * record limit is the reader's, not the buffer's. */
	if (in->lr.buf.max < r->in.len + 65537)
		in->lr.buf.max = r->in.len + 65537;
	if (r->in.len && core_buf_add(&in->lr.buf, r->in.p, r->in.len))
		return CORE_ENOMEM;
	if (!threaded)
		return CORE_OK;
	if (pipe2(in->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		in->wake[0] = in->wake[1] = -1;
		return CORE_ESYS;
	}
	if (pipe2(in->stop, O_CLOEXEC) < 0) {
		in->stop[0] = in->stop[1] = -1;
		return CORE_ESYS;
	}
	wake_fd = in->wake[1];
	sigset_t stops, old;
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stops, &old);
	in->threaded = 1;
	int rc = pthread_create(&in->thread, NULL, intake_main, in);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		in->threaded = 0;
	return rc ? CORE_ESYS : CORE_OK;
}

/* Stop the reader thread (waiting for stdin or for room) and let go of
 * its descriptor: a worker holds nothing of its caller's. */
static void intake_stop(struct intake *in)
{
	if (in->threaded) {
		pthread_mutex_lock(&in->mu);
		in->quit = 1;
		pthread_cond_broadcast(&in->room);
		pthread_mutex_unlock(&in->mu);
		ssize_t w = write(in->stop[1], "q", 1);
		(void)w;        /* one byte in an empty pipe */
		pthread_join(in->thread, NULL);
		in->threaded = 0;
	}
	if (in->restore_fl >= 0) {
		fcntl(in->lr.fd, F_SETFL, in->restore_fl);
		in->restore_fl = -1;
	}
	if (in->own_fd) {
		close(in->lr.fd);
		in->own_fd = 0;
	}
}

static void intake_release(struct intake *in)
{
	if (!in->on)
		return;
	intake_stop(in);
	for (size_t i = in->head; i < in->n; i++)
		json_decref(in->q[i].in);
	free(in->q);
	core_lines_release(&in->lr);
	pthread_mutex_destroy(&in->mu);
	pthread_cond_destroy(&in->room);
	wake_fd = -1;
	for (int i = 0; i < 2; i++) {
		if (in->wake[i] >= 0)
			close(in->wake[i]);
		if (in->stop[i] >= 0)
			close(in->stop[i]);
	}
}

/* Wait for the reader (or a stop signal) to change something. */
static void intake_wait(struct intake *in)
{
	struct pollfd p = { .fd = in->wake[0], .events = POLLIN };
	char buf[64];
	if (poll(&p, 1, -1) > 0)
		while (read(in->wake[0], buf, sizeof buf) > 0)
			;
}

/*
 * Detach with every input the intake holds (§2.1, §2.2): before a turn,
 * or (in_flight) from inside the turn that is running.  The process that
 * runs the turns detaches in place when it is the back of a split run, and
 * forks the worker otherwise (no turn is running then: input that is all
 * there is read before the first turn).  The back then prints the detached
 * output, becomes the worker and lets the front exit.
 */
static void detach_now(struct run *r, int in_flight)
{
	struct intake *in = &r->intake;
	struct detach_run *d = &r->det;
	enum core_status st = CORE_OK;
	if (r->back)
		prctl(PR_SET_PDEATHSIG, 0);     /* the worker outlives the front */
	intake_stop(in);
	for (; in->head < in->n; in->head++) {
		if (!st)
			st = queue_input(d, in->q[in->head].in);
		json_decref(in->q[in->head].in);
	}
	in->bytes = 0;
	if (st) {
		r->detach_failed = in_flight;
		return;
	}
	d->tail = in->err;
	if (!r->back) {
		detach_start(d);
		return;
	}
	if (detach_here(d, in_flight)) {
		r->detach_failed = in_flight;
		return;
	}
	print_detached(r);
	detach_daemonize(d);
	if (r->front_fd >= 0) {
		ssize_t w = write(r->front_fd, "d", 1);
		(void)w;        /* a front that is gone has nothing to wait for */
		close(r->front_fd);
		r->front_fd = -1;
	}
}

static void detach_in_turn(struct run *r)
{
	detach_now(r, 1);
}

/*
 * Run the intake's inputs, one turn each, until the end of input, the
 * reader's error (after the turns before it), a turn that ends the
 * invocation, a stop signal, or a detach.
 */
static void run_intake(struct run *r)
{
	struct intake *in = &r->intake;
	for (;;) {
		json_t *next = NULL;
		struct core_err err = { 0 };
		int detach = 0;
		pthread_mutex_lock(&in->mu);
		for (;;) {
			if (atomic_load(&in->detach)) {
				detach = 1;
				break;
			}
			if (in->head < in->n) {
				next = in->q[in->head].in;
				in->bytes -= in->q[in->head].len;
				in->head++;
				pthread_cond_signal(&in->room);
				break;
			}
			if (in->done || stop_signal)
				break;
			pthread_mutex_unlock(&in->mu);
			if (in->threaded)
				intake_wait(in);
			else
				intake_fill(in);
			pthread_mutex_lock(&in->mu);
		}
		if (!next && !detach)
			err = in->err;
		pthread_mutex_unlock(&in->mu);
		if (detach) {
			detach_now(r, 0);
			break;
		}
		if (!next) {
			if (err.st && !stop_signal)
				rt_fail(r->rt, err.st, err.msg);
			break;
		}
		enum core_status st = rt_turn(r->rt, next);
		json_decref(next);
		if (r->det.role != DETACH_NONE || st)
			break;
	}
	if (r->det.role == DETACH_WORKER && r->back)
		detach_finish(&r->det);
}

/*
 * Read what stdin already holds, without waiting, after the bytes read
 * ahead: 1 when that reaches its end (every input is there: no reader
 * needs to outlive a turn), 0 when a writer may still send more (or more
 * than INTAKE_MAX_BYTES is there).
 */
static int stdin_complete(struct run *r)
{
	char chunk[65536];
	struct pollfd p = { .fd = 0, .events = POLLIN };
	if (r->in.max < INTAKE_MAX_BYTES + sizeof chunk)
		r->in.max = INTAKE_MAX_BYTES + sizeof chunk;
	while (r->in.len <= INTAKE_MAX_BYTES) {
		if (poll(&p, 1, 0) != 1)
			return 0;
		ssize_t got = read(0, chunk, sizeof chunk);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return 1;       /* the end, or an error the reader will report */
		if (core_buf_add(&r->in, chunk, (size_t)got))
			return 0;
	}
	return 0;
}

/* The front: wait for the back to detach (exit 0 at once) or to end (its
 * exit status, or its death by a signal, is ours). */
static int front_wait(int fd, pid_t back)
{
	char c = 0;
	ssize_t n;
	int status;
	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	if (n == 1 && c == 'd')
		return core_exit_code(CORE_OK);
	while (waitpid(back, &status, 0) < 0)
		if (errno != EINTR)
			return core_exit_code(CORE_ESYS);
	if (WIFSIGNALED(status)) {
		signal(WTERMSIG(status), SIG_DFL);
		raise(WTERMSIG(status));
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : core_exit_code(CORE_ESYS);
}

/*
 * Split the run (docs/detach.md "Eager intake"): the process the caller
 * started stays as the front, which only waits and forwards the stop
 * signals; the back runs the invocation.  The back is a grandchild in a
 * session of its own (never a session leader), re-parented to the front,
 * a child subreaper, so the front can wait for it; it has the caller's
 * stdin, stdout and stderr and no other descriptor of the caller's.
 * Returns 1 in the back, 0 in the front (r->front_exit set), -1 when the
 * split failed before anything started (the run goes on unsplit).
 */
static int split(struct run *r)
{
	int fds[2];
	sigset_t stops, old;
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGHUP);
	pid_t front = getpid();
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0 || pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	sigprocmask(SIG_BLOCK, &stops, &old);
	fflush(stdout);
	fflush(stderr);
	pid_t a = fork();
	if (a < 0) {
		close(fds[0]);
		close(fds[1]);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return -1;
	}
	if (a == 0) {
		pid_t mid = getpid();
		pid_t b = setsid() < 0 ? -1 : fork();
		if (b != 0) {
			/* The middle process: the back's pid to the front. */
			ssize_t w = write(fds[1], &b, sizeof b);
			_exit(w == sizeof b && b > 0 ? 0 : 1);
		}
		close(fds[0]);
		detach_close_others(fds[1]);
		r->back = 1;
		r->front_fd = fds[1];
		/* Once re-parented to the front (the middle process exits at
		 * once), the front's death is a caller stop: SIGTERM, as if
		 * forwarded.  A detach clears it. */
		while (getppid() == mid)
			nanosleep(&(struct timespec){ 0, 100000 }, NULL);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (getppid() != front)
			raise(SIGTERM);         /* the front is gone already */
		return 1;
	}
	close(fds[1]);
	pid_t b = -1;
	ssize_t got;
	int status;
	while (waitpid(a, &status, 0) < 0 && errno == EINTR)
		;
	while ((got = read(fds[0], &b, sizeof b)) < 0 && errno == EINTR)
		;
	if (got != sizeof b || b <= 0) {
		close(fds[0]);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return -1;
	}
	back_pid = b;
	static const int sigs[] = { SIGINT, SIGHUP, SIGTERM };
	for (int i = 0; i < 3; i++) {
		struct sigaction sa, cur;
		/* Signals agent-run ignores (on entry) stay ignored. */
		if (sigaction(sigs[i], NULL, &cur) == 0 && cur.sa_handler == SIG_IGN)
			continue;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_front_signal;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = SA_RESTART;
		sigaction(sigs[i], &sa, NULL);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	r->front_exit = front_wait(fds[0], b);
	close(fds[0]);
	return 0;
}

/* ---- main's phases ---- */

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
				op->input_format = STDIN_NDJSON;
			else if (!strcmp(arg, "text"))
				op->input_format = STDIN_TEXT;
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
		case OPT_STATE_TRANSFORM: xspec->state_transform = arg; break;
		case OPT_STREAM_TRANSFORM: xspec->stream_transform = arg; break;
		case OPT_LIST: op->list = 1; break;
		case OPT_MCP_CONFIG: st = push_arg(&op->mcp_configs, &op->nmcp, arg); break;
		case OPT_MCP_LIST: op->mcp_list = 1; break;
		case OPT_JSON: spec->json_output = 1; break;
		case OPT_OUTPUT_SCHEMA: spec->output_schema = arg; break;
		case OPT_HB_INTERVAL: op->hb_interval = arg; break;
		case OPT_HB_TIMEOUT: op->hb_timeout = arg; break;
		case OPT_MAX_RECORD:
			st = cli_size("--max-record", arg, &op->max_record);
			break;
		}
	}
	if (st)
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

/* --state FILE as JSON (bounded by --max-record); NULL with e set. */
static json_t *read_state(const char *file, size_t max, struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(max);
	json_t *s = NULL;
	if (!core_buf_read_file(&b, file, e))
		s = jv_parse(b.p ? b.p : "", b.len, file, 0, e);
	core_buf_release(&b);
	return s;
}

/* The init: --init, then the flags (each key given once). */
static enum core_status build_init(struct run *r)
{
	const struct run_opts *op = &r->opts;
	struct core_err e = { 0 };
	enum core_status st = CORE_OK;
	if (op->init_json) {
		r->init = jv_parse(op->init_json, strlen(op->init_json), "--init", 0, &e);
		if (!r->init)
			return init_failed(&r->o, &e);
	} else if (!(r->init = json_object())) {
		return report_oom();
	}
	if (!json_is_object(r->init))
		return CORE_OK;         /* rt_open() reports it */
	if (op->session && (st = set_init(r->init, "sessionId", json_string(op->session))))
		return st;
	if (op->snapshot && (st = set_init(r->init, "snapshotId", json_string(op->snapshot))))
		return st;
	if (op->state_file) {
		json_t *s = read_state(op->state_file, (size_t)op->max_record, &e);
		if (!s)
			return init_failed(&r->o, &e);
		st = set_init(r->init, "state", s);
	}
	return st;
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

/* --continue: the agent's most recently updated session becomes the init's. */
static enum core_status continue_session(struct run *r, struct core_err *e)
{
	struct store_session_filter f = { r->agent->name, 0, STORE_HEARTBEAT_TIMEOUT_MS };
	json_t *list = NULL;
	enum core_status st = store_recent_sessions(r->store, &f, &list, e);
	if (st)
		return st;
	const char *sid = json_string_value(json_object_get(json_array_get(list, 0),
	                                                    "sessionId"));
	if (!sid)
		st = core_fail(e, CORE_ENOTFOUND, "no session of agent '%s' to continue "
		               "(start one without --continue)", r->agent->name);
	else
		json_object_set_new(r->init, "sessionId", json_string(sid));
	json_decref(list);
	return st;
}

/* Heartbeat settings, the store (unless --no-store) and the runtime. */
static enum core_status open_runtime(struct run *r)
{
	const struct run_opts *op = &r->opts;
	struct core_err e = { 0 };
	int64_t hb_interval, hb_timeout;
	enum core_status st;
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
			st = continue_session(r, &e);
		if (st)
			return init_failed(&r->o, &e);
	}
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
	r->det.rt = r->rt;
	r->det.agent = r->agent->name;
	r->det.ext = r->ext;
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

/* The format of stdin whose first non-blank byte is c. */
static int stdin_format(const struct run_opts *op, int c)
{
	if (op->input_format)
		return op->input_format;
	return c == '{' ? STDIN_NDJSON : STDIN_TEXT;
}

/*
 * What stdin holds, in r->stdin_kind: --input-format, else NDJSON when its
 * first non-blank byte is '{' and text otherwise; only blanks (or /dev/null,
 * a closed stdin) is no input.  A terminal is not read when -m gives the
 * input.  Text is read whole into r->in (at most --max-record bytes, UTF-8);
 * for NDJSON r->in keeps the bytes read ahead and run_stdin() goes on.
 * A stop signal while reading leaves no input: the run ends aborted.
 */
static enum core_status read_stdin(struct run *r)
{
	const struct run_opts *op = &r->opts;
	struct core_err e = { 0 };
	char chunk[4096];
	size_t seen = 0;
	int first = 0;          /* the first non-blank byte, once read */
	r->stdin_kind = STDIN_NONE;
	if (!r->stdin_open || (op->nmsg && isatty(0)))
		return CORE_OK;
	/* A read may go one chunk past the limit before the format is known. */
	core_buf_init(&r->in, op->max_record + sizeof chunk);
	while (!first || stdin_format(op, first) == STDIN_TEXT) {
		ssize_t got = read(0, chunk, sizeof chunk);
		if (got < 0 && errno == EINTR && !stop_signal)
			continue;
		if (got < 0 && !stop_signal) {
			core_fail_sys(&e, "cannot read <stdin>");
			return init_failed(&r->o, &e);
		}
		if (got <= 0)
			break;
		enum core_status st = core_buf_add(&r->in, chunk, (size_t)got);
		if (st == CORE_ENOMEM)
			return report_oom();
		for (; seen < r->in.len && !first; seen++)
			if (!strchr(" \t\r\n", r->in.p[seen]))
				first = (unsigned char)r->in.p[seen];
		if (st || (first && stdin_format(op, first) == STDIN_TEXT
		           && r->in.len > op->max_record)) {
			core_fail(&e, CORE_ETOOBIG, "text on <stdin> is longer than %zu bytes "
			          "(--max-record)", op->max_record);
			return init_failed(&r->o, &e);
		}
	}
	if (stop_signal || !first)
		return CORE_OK;
	r->stdin_kind = stdin_format(op, first);
	if (r->stdin_kind == STDIN_NDJSON && op->nmsg)
		return cli_usage("-m and NDJSON on stdin both give turns: use one (or "
		                 "--input-format text to send stdin as text after the -m text)");
	if (r->stdin_kind == STDIN_TEXT) {
		json_t *t = json_stringn(r->in.p, r->in.len);
		if (!t) {
			core_fail(&e, CORE_EINVAL, "text on <stdin> is not valid UTF-8");
			return init_failed(&r->o, &e);
		}
		json_decref(t);
	}
	return CORE_OK;
}

/*
 * Each -m TEXT as one turn, or (--detach) queued for the background; text
 * from stdin joins the first turn after a blank line, or is the one turn
 * when there is no -m.
 */
static void run_messages(struct detach_run *d, const char *const *messages, size_t n,
                         const struct core_buf *piped, int detach)
{
	struct core_buf first = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = CORE_OK;
	if (piped && ((n && core_buf_addf(&first, "%s\n\n", messages[0]))
	              || core_buf_add(&first, piped->p, piped->len))) {
		rt_fail(d->rt, CORE_ENOMEM, "out of memory");
		core_buf_release(&first);
		return;
	}
	for (size_t i = 0; i < (n ? n : piped != NULL) && !st; i++) {
		json_t *in = i == 0 && piped ? user_message(first.p, first.len)
		                             : user_message(messages[i], strlen(messages[i]));
		if (detach)
			st = queue_input(d, in);
		else
			st = in ? rt_turn(d->rt, in) : CORE_ENOMEM;
		json_decref(in);
	}
	if (detach && !st && !stop_signal)
		detach_start(d);
	core_buf_release(&first);
}

/*
 * NDJSON on stdin that is not a terminal is read eagerly: all of it now
 * when it is all there, else by the back process of a split run while its
 * turns run (split()).  A terminal, --detach (which reads everything
 * first) and a split that could not start read between turns
 * (run_stdin()).
 */
static enum core_status start_intake(struct run *r)
{
	if (r->stdin_kind != STDIN_NDJSON || r->opts.detach || isatty(0))
		return CORE_OK;
	int complete = stdin_complete(r);
	int side = complete ? -1 : split(r);
	if (side == 0 || (side < 0 && !complete))
		return CORE_OK;         /* the front (the back ran it), or no split */
	enum core_status st = intake_start(r, side == 1);
	if (st == CORE_ENOMEM)
		return report_oom();
	if (st)
		return cli_report(&(struct core_err){ st, errno, "cannot start reading <stdin>" });
	return CORE_OK;
}

/* The inputs: -m, else stdin.  How they went is in the runtime
 * (rt_output) and, once detached, in r->det.role. */
static void run_inputs(struct run *r)
{
	const struct core_buf *text = r->stdin_kind == STDIN_TEXT ? &r->in : NULL;
	if (r->intake.on)
		run_intake(r);
	else if (r->stdin_kind == STDIN_NDJSON)
		run_stdin(&r->det, &r->in, r->opts.max_record, r->opts.detach);
	else
		run_messages(&r->det, r->opts.messages, r->opts.nmsg, text, r->opts.detach);
}

/* §2.2 step 6: the caller's detached output, at once. */
static enum core_status print_detached(struct run *r)
{
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
 * 12 tokens in, 30 out" (characters for models that count those).
 */
static void print_summary(struct run *r)
{
	const char *reason = json_string_value(json_object_get(r->output, "finishReason"));
	const char *snap = json_string_value(json_object_get(r->output, "snapshotId"));
	const json_t *u = rt_usage(r->rt);
	const char *unit = json_object_get(u, "inputTokens") || json_object_get(u, "outputTokens")
	                 ? "tokens" : json_object_get(u, "inputCharacters") ? "characters" : NULL;
	char usage[96] = "";
	if (unit) {
		int tokens = unit[0] == 't';
		snprintf(usage, sizeof usage, ", %" JSON_INTEGER_FORMAT " %s in, %" JSON_INTEGER_FORMAT
		         " out", json_integer_value(json_object_get(u, tokens ? "inputTokens"
		                                                           : "inputCharacters")),
		         unit, json_integer_value(json_object_get(u, tokens ? "outputTokens"
		                                                             : "outputCharacters")));
	}
	fflush(stdout);
	fprintf(stderr, "%s%s: %s, session %s%s%s%s%s\n", r->o.color ? "\033[2m" : "",
	        cli_progname, reason && *reason ? reason : "completed", rt_session_id(r->rt),
	        snap ? ", snapshot " : "", snap ? snap : "", usage, r->o.color ? "\033[0m" : "");
}

/* The final line of an attached run: {"output": AgentOutput} (or, with
 * --format text, a summary on stderr); its status is the exit status. */
static enum core_status print_output(struct run *r)
{
	struct out_ctx *o = &r->o;
	struct core_err e = { 0 };
	if (stop_signal || o->gone)
		rt_abort(r->rt);        /* stopped between turns; a no-op once a turn ended it */
	agent_ext_finish(r->ext, r->rt);        /* a custom agent's end, failed transforms */
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

/* ---- MCP servers (docs/mcp.md) ---- */

/* The --mcp-config files, else those of $AGENTKIT_MCP_CONFIG (colon-separated). */
static enum core_status load_mcp(struct run *r)
{
	struct core_err e = { 0 };
	enum core_status st = CORE_OK;
	const char *env = getenv("AGENTKIT_MCP_CONFIG");
	for (size_t i = 0; !st && i < r->opts.nmcp; i++)
		st = mcp_config_load(&r->mcp, r->opts.mcp_configs[i], &e);
	for (const char *p = r->opts.nmcp ? NULL : env; !st && p && *p;) {
		size_t n = strcspn(p, ":");
		char *file = strndup(p, n);
		if (!file)
			return report_oom();
		if (n)
			st = mcp_config_load(&r->mcp, file, &e);
		free(file);
		p += n + (p[n] == ':');
	}
	if (st == CORE_EUSAGE)
		return cli_usage("%s", e.msg);
	return st ? cli_report(&e) : CORE_OK;
}

/* Start every server and give the agent their tools (before the first
 * model call; in the back process of a split run, which runs the turns). */
static enum core_status start_mcp(struct run *r)
{
	struct core_err e = { 0 };
	if (r->agent->mcp_servers) {
		/* Paths in a prompt file are relative to its directory. */
		char *dir = strdup(r->agent->path);
		if (!dir)
			return report_oom();
		char *slash = strrchr(dir, '/');
		enum core_status fst = mcp_config_add(&r->mcp, r->agent->mcp_servers, r->agent->path,
		                                      slash ? (*slash = 0, dir) : ".", &e);
		free(dir);
		if (fst)
			return fst == CORE_EUSAGE ? cli_usage("%s", e.msg) : init_failed(&r->o, &e);
	}
	if (!r->mcp.n)
		return CORE_OK;
	if (!(r->mcp_set = mcp_set_new()))
		return report_oom();
	for (size_t i = 0; i < r->mcp.n; i++) {
		enum core_status st = mcp_set_start(r->mcp_set, &r->mcp.servers[i], &e);
		if (st == CORE_EUSAGE)
			return cli_usage("%s", e.msg);
		if (st && r->mcp.servers[i].optional)
			cli_warn("%s (an optional server: the run goes on without its tools)", e.msg);
		else if (st)
			return init_failed(&r->o, &e);
	}
	tool_set_source(mcp_set_source(r->mcp_set));
	for (size_t i = 0; i < mcp_set_count(r->mcp_set); i++) {
		const char *name = mcp_set_name(r->mcp_set, i);
		size_t k;
		json_t *t;
		int listed = 0;
		json_array_foreach(r->agent->tools, k, t)
			listed |= !strcmp(json_string_value(t), name);
		if (!listed && json_array_append_new(r->agent->tools, json_string(name)))
			return report_oom();
	}
	return CORE_OK;
}

/* agent-run --mcp-list [NAME]: each server's tools, one line each. */
static enum core_status list_mcp(struct run *r)
{
	const char *only = r->opts.spec.name;
	enum core_status failed = CORE_OK;
	struct core_err e = { 0 };
	int found = 0;
	if (!r->mcp.n)
		return cli_usage("--mcp-list needs --mcp-config FILE or $AGENTKIT_MCP_CONFIG");
	if (!(r->mcp_set = mcp_set_new()))
		return report_oom();
	for (size_t i = 0; i < r->mcp.n; i++) {
		if (only && strcmp(only, r->mcp.servers[i].name))
			continue;
		found = 1;
		size_t first = mcp_set_count(r->mcp_set);
		enum core_status st = mcp_set_start(r->mcp_set, &r->mcp.servers[i], &e);
		if (st == CORE_EUSAGE)
			return cli_usage("%s", e.msg);
		if (st) {
			cli_report(&e);
			failed = CORE_FAILED;
			continue;
		}
		for (size_t k = first; k < mcp_set_count(r->mcp_set); k++) {
			json_t *row = mcp_set_row(r->mcp_set, k);
			if (!row)
				return report_oom();
			st = write_json(&r->o, row);
			json_decref(row);
			if (st)
				return cli_report(&r->o.err);
		}
	}
	if (!found)
		return cli_usage("no mcp server '%s' is configured", only);
	return failed;
}

int main(int argc, char **argv)
{
	struct run r = { .store_dir = CORE_BUF_INIT(4096), .in = CORE_BUF_INIT(0),
	                 .intake.wake = { -1, -1 }, .intake.stop = { -1, -1 },
	                 .front_fd = -1, .front_exit = -1 };
	enum core_status st;

	cli_start(&prog);
	r.stdin_open = fcntl(0, F_GETFD) != -1;
	/* Before any child or thread: no core dump, keys out of /proc/PID/environ. */
	if ((st = spawn_protect_keys(model_key_variable, NULL)))
		goto out;
	core_buf_init(&r.o.line, CORE_BUF_UNLIMITED);
	if ((st = parse_options(argc, argv, &r.opts)))
		goto out;
	r.o.text = r.opts.text;
	r.o.json = r.opts.json;
	r.o.color = r.o.text && isatty(2) && !(getenv("NO_COLOR") && *getenv("NO_COLOR"));
	r.o.msg_index = -1;
	if (!(r.o.tools_open = json_array())) {
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
	json_decref(r.o.tools_open);
	core_buf_release(&r.o.line);
	if (r.front_fd >= 0)
		close(r.front_fd);
	/* The front of a split run exits as its back did. */
	return r.front_exit >= 0 ? r.front_exit : cli_finish(st);
}
