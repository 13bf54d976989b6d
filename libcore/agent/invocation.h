/*
 * invocation.h - one agent invocation as agent-run runs it (docs/agent-run.md,
 * docs/detach.md, runtime-semantics §2): the caller stops, stdin, the eager
 * intake's front/back split, the MCP servers, tracing, the store and the
 * runtime, the inputs fed to the turns, the final output and the release of
 * it all.  It is the glue between the command line and the modules that do
 * the work (intake.h, feed.h, mcp_run.h, detach.h, runtime.h, agent_ext.h,
 * agent_trace.h, output.h); the command keeps its options, which of these
 * it calls, its messages and its exit status.
 *
 * The order of a run:
 *   invocation_init()         before anything else: invocation_close() is safe
 *   invocation_model_timeout() --model-timeout, with the options
 *   (the command fills init, agent and ext: feed_init(), agent_load(), ...)
 *   invocation_catch_stops()  SIGINT, SIGTERM, SIGHUP are caller stops from now
 *   invocation_read_stdin()   what stdin holds
 *   invocation_start_intake() NDJSON read while turns run; maybe the split
 *   invocation_start_mcp()    the servers, before the first model call
 *   invocation_trace()        tracing, in the process that runs the turns
 *   invocation_open()         the store and the runtime
 *   invocation_run()          the inputs, one turn each; maybe detached
 *   invocation_finish()       the final AgentOutput and the exit status
 *   invocation_close()        the root span ended, everything released
 *
 * Nothing here prints or exits: what the command is told on the way comes
 * through struct invocation_sink, and stdout's bytes through the struct
 * output (output.h).  One struct invocation per process, used by the
 * thread that runs the turns.  The stop signals' handler and its flag are
 * this file's (the process's one file-scope state): the first signal is a
 * caller stop (§2.5), a second one ends the process as the signal does by
 * default.
 */
#ifndef CORE_INVOCATION_H
#define CORE_INVOCATION_H

#include <stdint.h>

#include "agent.h"
#include "agent_ext.h"
#include "detach.h"
#include "feed.h"
#include "intake.h"
#include "mcp.h"
#include "mcp_run.h"
#include "output.h"
#include "runtime.h"
#include "../base/buf.h"
#include "../base/json.h"
#include "../base/status.h"
#include "../../store/store.h"

/* What the invocation tells its command; ctx is the command's.  Every
 * member must be set, but elicit and approve may be NULL. */
struct invocation_sink {
	/* A message for people: the runtime's, tracing's notes. */
	void (*warn)(void *ctx, const char *msg);
	/* One line of a detached worker's log, without the newline (its
	 * stderr is the log file; the command adds the time and its name). */
	void (*log)(void *ctx, const char *line);
	/* One line an MCP server wrote on its stderr. */
	void (*mcp_line)(void *ctx, const char *server, const char *line);
	/* A person to ask an MCP server's questions (mcp_set_elicit()), or
	 * NULL: nobody is there, and servers are told the client does not
	 * elicit. */
	mcp_elicit_fn *elicit;
	/* The back of a split run detached in place: the caller's detached
	 * output now (invocation_detached()), its status the back's. */
	enum core_status (*detached)(void *ctx);
	/* A person to approve or deny each tool request a turn paused on
	 * (feed.h's approve: 1, 0, or -1 for no answer), or NULL: nobody is
	 * there, and an interrupted turn ends the invocation's turn as it is. */
	int (*approve)(void *ctx, const json_t *part);
	void *ctx;
};

/* The store and the runtime. */
struct invocation_open {
	int no_store;                   /* client-managed state: no store */
	const char *store_path;         /* --store, or NULL: store_default_path() */
	int cont;                       /* --continue: the agent's latest session */
	int64_t hb_interval_ms;         /* a detached worker's beat */
	int64_t hb_timeout_ms;          /* a pending row older is presumed dead */
	enum rt_busy on_busy;           /* a session's other writer: wait, fail, fork */
	int64_t busy_timeout_ms;        /* ... waited for this long at most */
	const char *claimed_id;         /* agent-run --claimed: the queued run's row */
};

/*
 * The fields are the invocation's; the command reads them and fills init,
 * agent and ext (which it loads: agent_load(), agent_ext_load()) and out
 * (output_init()) itself.  Everything here goes with invocation_close().
 */
struct invocation {
	struct invocation_sink sink;
	int64_t t0;                     /* when the run started (the root span's start) */
	struct output out;              /* stdout */
	json_t *init;                   /* the AgentInit */
	struct agent *agent;
	struct agent_ext *ext;          /* --exec, transforms, --docs (agent_ext.h) */
	struct mcp_config mcp;          /* the MCP servers configured (docs/mcp.md) */
	struct mcp_set *mcp_set;        /* ... once started */
	struct core_buf store_dir;
	struct store *store;
	struct runtime *rt;
	struct detach_run det;          /* the background, once detached */
	json_t *output;                 /* the final AgentOutput */
	int stdin_open;                 /* fd 0 was open when the invocation started */
	int stdin_kind;                 /* INTAKE_NONE, INTAKE_NDJSON or INTAKE_TEXT */
	int stdin_silent;               /* no byte came within the wait: stdin unread */
	struct core_buf in;             /* stdin's text, or the NDJSON bytes read ahead */
	struct intake intake;           /* NDJSON inputs read while turns run */
	struct feed feed;               /* the inputs to the turns (feed.h) */
	int front_exit;                 /* front: the back's exit status, or -1 */
	struct invocation_open opened;  /* as invocation_open() was called */
};

/* Zero inv and set what every later call needs: the sink (copied), the
 * start time, whether fd 0 is open. */
void invocation_init(struct invocation *inv, const struct invocation_sink *sink);

/*
 * --model-timeout DURATION: the bound of each model call, retries included
 * (provider_common.h), set as AGENTKIT_MODEL_TIMEOUT, which every call
 * reads (a detached worker's too).  Errors: CORE_EUSAGE, naming the flag
 * (not a positive duration; out of memory).
 */
enum core_status invocation_model_timeout(const char *value, struct core_err *e);

/*
 * From now on the first SIGINT, SIGTERM or SIGHUP is a caller stop: the
 * turn in flight is cancelled, a blocked read of stdin sees its end (fd 0
 * becomes /dev/null), and invocation_stop_signal() names it.  SIGINT and
 * SIGHUP ignored on entry stay ignored.  Also from now on the reader of
 * stdout going away is one (output_watch()).
 */
void invocation_catch_stops(struct invocation *inv);

/* The stop signal taken, or 0. */
int invocation_stop_signal(void);

/* Forget the stop signal taken: the next one is a first one again (the
 * chat goes on after Ctrl-C stopped a turn).  Stdin stays what the stop
 * made it (/dev/null). */
void invocation_stop_clear(void);

/* How agent-run reads stdin (its flags). */
struct invocation_stdin {
	int format;             /* --input-format: INTAKE_NDJSON, INTAKE_TEXT, or 0 */
	size_t max_record;      /* --max-record */
	int messages;           /* -m was given */
	int64_t wait_ms;        /* with -m, how long to wait for stdin's first byte */
};

/*
 * What stdin holds (intake_read_stdin()), in inv->stdin_kind.  A closed
 * stdin is not read, nor a terminal when -m gives the input, nor (with
 * -m) a stdin whose first byte does not come within wait_ms: then
 * stdin_silent is set, and what comes later stays unread.  A stop signal
 * while reading leaves INTAKE_NONE.  Errors as intake_read_stdin().
 */
enum core_status invocation_read_stdin(struct invocation *inv, const struct invocation_stdin *s,
                                       struct core_err *e);

/*
 * NDJSON on stdin that is not a terminal is read eagerly: all of it now
 * when it is all there, else by the back process of a split run while its
 * turns run (intake_split()).  A terminal, detach (--detach, which reads
 * everything first) and a split that could not start read between turns
 * (feed_stdin()).  In the front of a split run inv->front_exit is the
 * back's exit status (>= 0) and *sig the signal that ended the back, or 0:
 * the front is to end as the back did.  Errors as intake_start().
 */
enum core_status invocation_start_intake(struct invocation *inv, int detach,
                                         size_t max_record, int *sig, struct core_err *e);

/*
 * A new inv->mcp_set, its servers' stderr lines to the sink's mcp_line and
 * cancelled by a caller stop.  Errors: CORE_ENOMEM (inv->mcp_set NULL).
 */
enum core_status invocation_mcp_set(struct invocation *inv, struct core_err *e);

/*
 * Start every MCP server (inv->mcp and the agent's own, mcp_run_add_agent())
 * into a new set (invocation_mcp_set()), before the first model call (in
 * the back of a split run, which runs the turns).  An optional server that
 * fails goes to skipped (mcp_run_start()).  A stop during start-up is no
 * error: the run goes on to end aborted before its first turn, and the
 * agent is given no MCP tool (mcp_run_tools() is the caller's).  Errors:
 * the set's (inv->mcp_set NULL), else mcp_run_add_agent()'s and
 * mcp_run_start()'s.
 */
enum core_status invocation_start_mcp(struct invocation *inv, mcp_failed_fn *skipped,
                                      void *ctx, struct core_err *e);

/* Tracing (docs/tracing.md, trace.h) as agent-run's flags set it. */
struct invocation_trace {
	int on, content, semconv;       /* --trace, --trace-content, --trace-names semconv */
	const char *file;               /* --trace-file, or NULL */
	const char *service, *version;  /* the default service name; the version */
};

/*
 * Start tracing and the invocation's root span (after the agent is
 * loaded: the span names it), in the process that runs the invocation:
 * never on stdout, never in the exit status.  Its notes and failures are
 * the sink's warnings.
 */
void invocation_trace(struct invocation *inv, const struct invocation_trace *t);


/* The default --busy-timeout: longer than a turn's model call may take. */
#define INVOCATION_BUSY_TIMEOUT_MS (15 * 60 * 1000)

/* The settings' flags as given (borrowed; NULL: not given). */
struct invocation_flags {
	const char *hb_interval, *hb_timeout;   /* --heartbeat-interval, -timeout */
	const char *on_busy, *busy_timeout;     /* --on-busy, --busy-timeout */
};

/*
 * The settings into o, each the flag, else its environment variable, else
 * the default: the heartbeat interval ($AGENTKIT_HEARTBEAT_INTERVAL, else
 * Genkit's 30s) and timeout (store_heartbeat_timeout()), --on-busy ("wait",
 * "fail" or "fork"; default wait) and --busy-timeout
 * ($AGENTKIT_BUSY_TIMEOUT, else INVOCATION_BUSY_TIMEOUT_MS).  CORE_EUSAGE
 * with the message.
 */
enum core_status invocation_settings(const struct invocation_flags *f,
                                     struct invocation_open *o, struct core_err *e);

/*
 * Open the store (unless no_store; cont: feed_continue()) and the runtime
 * over inv->agent, inv->init and inv->ext, its chunks through the stream
 * transform to inv->out, cancelled by a caller stop, the reader of stdout
 * gone, a detach line read while a turn runs, or (in a detached worker)
 * the abort flip; then the detached run's settings.  Errors: the store's
 * (inv->store NULL) and feed_continue()'s, then rt_open()'s.
 */
enum core_status invocation_open(struct invocation *inv, const struct invocation_open *o,
                                 struct core_err *e);

/*
 * A new runtime on the same conversation, after a turn that ended the
 * invocation (failed, or stopped by a caller stop): the session's latest
 * row (with a store), else the last good state, as invocation_open()
 * opened it.  Errors: rt_open()'s, CORE_ENOMEM; inv->rt is then NULL.
 */
enum core_status invocation_reopen(struct invocation *inv, struct core_err *e);

/*
 * The inputs: the eager intake's, else stdin's NDJSON lines, else the n
 * messages (-m) with stdin's text joining the first (feed.h); detach:
 * --detach.  How they went is in the runtime (rt_output()) and, once
 * detached, in inv->det.role: DETACH_WORKER (inv->det.worker_st is the
 * status) or DETACH_CALLER (the caller prints invocation_detached()).
 */
void invocation_run(struct invocation *inv, const char *const *messages, size_t n,
                    int detach, size_t max_record);

/*
 * agent-run --claimed: run the queued run row (the claimed pending row,
 * metadata only: its info's run.inputs) as its detached worker would
 * (detach_run_worker() on the row, after invocation_open() with
 * claimed_id), in this process.  inv->det.worker_st is how the row ended.
 * Errors (nothing ran): CORE_ENOMEM, CORE_ETOOBIG from the inputs.
 */
enum core_status invocation_run_claimed(struct invocation *inv, const json_t *row,
                                        struct core_err *e);

/*
 * The detached output (§2.2 step 6) in inv->output: {"finishReason":
 * "detached", "sessionId", "snapshotId"}.  Errors: CORE_ENOMEM.
 */
enum core_status invocation_detached(struct invocation *inv);

/*
 * The final AgentOutput of an attached run in inv->output (NULL: out of
 * memory, the status is then CORE_ENOMEM): a stop between turns aborts
 * the invocation, a custom agent's end and the state transform shape it
 * (a failed output whose state had to be omitted: *note says why, else
 * its st is CORE_OK).  Returns the exit status (rt_exit_status()).
 */
enum core_status invocation_finish(struct invocation *inv, struct core_err *note);

/* End the root span (st the exit status), flush the traces (a failed
 * export or dropped spans: the sink's warning), release everything; the
 * process ends after it, so the session's history is left to the kernel
 * (CORE_EXIT_FREES, util.h). */
void invocation_close(struct invocation *inv, enum core_status st);

#endif
