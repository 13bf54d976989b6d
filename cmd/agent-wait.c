/* agent-wait.c - block until snapshots settle, print the settled rows and
 * exit with how they ended. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../libcore/agent/remote.h"
#include "../libcore/base/json.h"
#include "../libcore/base/util.h"
#include "../store/store.h"

enum {
	OPT_STORE = 's',
	OPT_SESSION = 'S',
	OPT_METADATA = 'm',
	OPT_TIMEOUT = 't',
	OPT_HB_TIMEOUT = CLI_LONG + 1,
	OPT_POLL,
	OPT_URL,
	OPT_HEADER,
	OPT_VERBOSE,
};

static const struct cli_opt opts[] = {
	{ OPT_STORE, "store", "PATH",
	  "the store directory (default $AGENTKIT_STORE, else "
	  "${XDG_STATE_HOME:-$HOME/.local/state}/agentkit/store)" },
	{ OPT_SESSION, "session", "SID", "wait on the session's latest row" },
	{ OPT_TIMEOUT, "timeout", "DURATION", "give up after DURATION (exit 124)" },
	{ OPT_METADATA, "metadata-only", NULL, "print the rows without their state" },
	{ OPT_HB_TIMEOUT, "heartbeat-timeout", "DURATION",
	  "a row whose heartbeat is older reads \"expired\" and ends the wait "
	  "(default $AGENTKIT_HEARTBEAT_TIMEOUT, else 60s)" },
	{ OPT_POLL, "poll", "DURATION",
	  "re-read at least this often even without a wake-up (default 2s)" },
	{ OPT_URL, "url", "URL",
	  "wait through the companion routes of the agent a server serves at URL "
	  "(agent-serve, a Genkit app; docs/serve.md), not in a store; NAME/AGENT: a "
	  "genkit endpoint of the models file" },
	{ OPT_HEADER, "header", "'NAME: VALUE'", "with --url: send this header (repeatable)" },
	{ OPT_VERBOSE, "verbose", NULL,
	  "with --url: say so on stderr when the server has no waitForSnapshot and "
	  "getSnapshot is polled instead" },
	{ 0 }
};

static const struct cli_exitcode exits[] = {
	{ 0, "every row completed with a usable result (finish reason stop, other, "
	     "unknown or none)" },
	{ 1, "a row failed" },
	{ 2, "a row was aborted" },
	{ 3, "a row expired (its worker stopped heartbeating)" },
	{ 4, "a snapshot or session was not found, or there is no store at the path" },
	{ 6, "a row completed interrupted (waits for a resume)" },
	{ 7, "a row completed without a usable result (length, blocked)" },
	{ 100, "usage error" },
	{ 111, "system failure (cannot open the store, cannot write output)" },
	{ 124, "--timeout ran out" },
	{ -1, NULL }
};

static const struct cli_prog prog = {
	.name = "agent-wait",
	.purpose = "wait until agentkit snapshots settle",
	.synopsis = "[OPTION]... ID...\n[OPTION]... --session SID",
	.description =
	"Blocks until every snapshot ID reads terminal, then prints the rows "
	"(one per line, in argument order, shaped as agent-snap prints them).  "
	"\"pending\" and \"aborting\" are not terminal: a wait rides out an "
	"abort and returns the finalized \"aborted\" row.  A pending or aborting "
	"row whose worker stopped heartbeating reads \"expired\", which is "
	"terminal, except for a queued run (agent-run --queue): a worker takes it "
	"again or gives up on it, so only its status settles the wait "
	"(docs/queue.md).  --session SID waits on the session's latest row at the "
	"time of the call.\n\n"
	"Waiting costs no CPU: a writer that changes a status wakes every "
	"waiter (a futex on the store's \"wake\" file; on PostgreSQL, NOTIFY); "
	"the rows are also re-read every --poll interval and when a heartbeat "
	"can expire.  A store on a server that restarts mid-wait does not end "
	"the wait: agent-wait reconnects, backing off from 0.2 s to 5 s, and "
	"reads the rows again; a server gone longer than "
	"$AGENTKIT_STORE_LOCK_TIMEOUT (default 60s) ends it with exit 111 "
	"(\"lost the connection to the store ... and could not reconnect "
	"within 60s\").  When "
	"stderr is a terminal a one-line status with the elapsed time is shown "
	"there; otherwise agent-wait is silent until it prints.\n\n"
	"The exit status says how the rows ended (see below).  With several "
	"IDs it is the highest of their codes, so any missing row (4) outranks "
	"a failure (1), and a completion without a usable result (7) outranks "
	"everything but a timeout.  On --timeout the rows that did settle are "
	"still printed.",
	.opts = opts,
	.examples =
	"$ id=$(agent-run --detach -m 'summarize the logs' | jq -r .output.snapshotId)\n"
	"$ agent-wait --timeout 10m \"$id\" | jq -r '.state.messages[-1].content[0].text'\n"
	"  start a run in the background, then wait for its answer\n"
	"$ agent-wait --session nightly --metadata-only >/dev/null && echo ok\n"
	"  branch on how the latest run of a session ended",
	.exits = exits,
	.operands = CLI_SNAPSHOT,
};

struct tty {
	int on;
	size_t total;
	int64_t start;
};

static void progress(size_t unsettled, void *ctx)
{
	struct tty *t = ctx;
	if (!t->on)
		return;
	fprintf(stderr, "\r%s: %zu of %zu pending, %llds\033[K", cli_progname, unsettled,
	        t->total, (long long)((core_now_mono_ms() - t->start) / 1000));
	fflush(stderr);
}

/* A stop signal while the status line is up: clear it, then end as the
 * signal does by default. */
static void clear_and_die(int sig)
{
	static const char clear[] = "\r\033[K";
	ssize_t n = write(2, clear, sizeof clear - 1);
	(void)n;
	signal(sig, SIG_DFL);
	raise(sig);
}

static void clear_on_signals(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa, old;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = clear_and_die;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		/* A signal ignored on entry (nohup) stays ignored. */
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
}

struct opts {
	const char *store, *session;
	unsigned flags;
	int64_t timeout_ms, hb_timeout_ms, poll_ms;
	const char *url;
	const char **headers;
	size_t nheaders;
	int verbose;
};

/* ---- --url: the server's companions (remote.h) ---- */

static volatile sig_atomic_t stopped;

static void on_stop(int sig)
{
	stopped = sig;
}

static int remote_cancelled(void *ctx)
{
	return stopped != 0;
}

static void on_fallback(void *ctx)
{
	const struct opts *o = ctx;
	if (o->verbose)
		cli_warn("%s has no waitForSnapshot route: polling getSnapshot (every 0.5s "
		         "to 5s)", o->url);
}

/* The session's latest row's ID, through getSnapshot. */
static enum core_status remote_latest(const struct opts *o, json_t **row, struct core_err *e)
{
	char url[4096];
	json_t *data = json_pack("{s:s,s:b}", "sessionId", o->session, "metadataOnly", 1);
	enum core_status st;
	snprintf(url, sizeof url, "%s/getSnapshot", o->url);
	st = data ? remote_call(url, o->headers, data, remote_cancelled, NULL, row, NULL, e)
	          : core_fail(e, CORE_ENOMEM, "out of memory");
	json_decref(data);
	return st;
}

static enum core_status run_remote(const struct opts *o, int argc, char **argv)
{
	struct core_err e = { 0 };
	json_t *latest = NULL;
	enum core_status st = CORE_OK, worst = CORE_OK;
	int64_t deadline = o->timeout_ms >= 0 ? core_now_mono_ms() + o->timeout_ms : -1;
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	if (o->session) {
		if ((st = remote_latest(o, &latest, &e)) != CORE_OK)
			return cli_report(&e);
		argc = 1;
	}
	for (int i = 0; i < argc; i++) {
		struct remote_wait_req w = { o->url, o->headers, latest ? json_string_value(
		                             json_object_get(latest, "snapshotId")) : argv[i],
		                             !!(o->flags & STORE_METADATA_ONLY), deadline,
		                             remote_cancelled, on_fallback, (void *)o };
		json_t *row = NULL;
		struct core_err pe = { 0 };
		enum core_status one;
		if (!w.id) {
			st = cli_report(&(struct core_err){ CORE_EINTERNAL, 0, "the server's row has "
			                "no snapshotId" });
			break;
		}
		if ((one = remote_wait(&w, &row, &e)) == CORE_OK) {
			one = store_outcome(row);
			st = cli_write_json(row, &pe);
			json_decref(row);
			if (st) {
				cli_report(&pe);
				break;
			}
		} else if (one == CORE_ENOTFOUND || one == CORE_ETIMEOUT) {
			cli_report(&e);
		} else {
			st = cli_report(&e);
			break;
		}
		if (core_exit_code(one) > core_exit_code(worst))
			worst = one;
	}
	json_decref(latest);
	return st ? st : worst;
}

static enum core_status run(const struct opts *o, int argc, char **argv)
{
	struct core_err e = { 0 };
	struct store *s = NULL;
	struct tty t = { isatty(2), (size_t)argc, core_now_mono_ms() };
	json_t **rows = NULL, *latest = NULL;
	const char **ids = NULL;
	enum core_status st, worst = CORE_OK;
	size_t i, n = (size_t)argc;

	if (o->session && argc)
		return cli_usage("give IDs or --session, not both");
	if (!o->session && !argc)
		return cli_usage("expected snapshot IDs or --session SID");
	if (o->url)
		return run_remote(o, argc, argv);
	for (i = 0; i < n; i++)
		if (store_check_id(argv[i], "snapshot ID", &e) != CORE_OK)
			return cli_usage("%s", e.msg);
	if ((st = store_open_default(o->store, STORE_OPEN_EXISTING | STORE_OPEN_READONLY, &s,
	                             &e)) != CORE_OK) {
		return st == CORE_EUSAGE ? cli_usage("%s", e.msg) : cli_report(&e);
	}
	if (o->session) {
		if ((st = store_latest(s, o->session, STORE_METADATA_ONLY, &latest, &e)) != CORE_OK)
			goto out;
		n = t.total = 1;
	}
	ids = calloc(n, sizeof *ids);
	rows = calloc(n, sizeof *rows);
	if (!ids || !rows) {
		st = core_fail(&e, CORE_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++)
		ids[i] = latest ? json_string_value(json_object_get(latest, "snapshotId"))
		                : argv[i];
	if (t.on)
		clear_on_signals();
	st = store_wait_terminal(s, ids, n, o->flags, o->hb_timeout_ms,
	                         o->timeout_ms >= 0 ? core_now_mono_ms() + o->timeout_ms : -1,
	                         t.on && o->poll_ms > 1000 ? 1000 : o->poll_ms, rows,
	                         progress, &t, &e);
	if (t.on)
		fprintf(stderr, "\r\033[K");
	if (st != CORE_OK && st != CORE_ETIMEOUT)
		goto out;
	if (st == CORE_ETIMEOUT) {
		size_t left = 0;
		for (i = 0; i < n; i++)
			left += !rows[i];
		core_fail(&e, CORE_ETIMEOUT, "timed out after %lldms with %zu of %zu rows unsettled",
		          (long long)o->timeout_ms, left, n);
		worst = CORE_ETIMEOUT;
	}
	for (i = 0; i < n; i++) {
		struct core_err pe = { 0 };
		enum core_status one;
		if (rows[i]) {
			one = store_outcome(rows[i]);
			if ((st = cli_write_json(rows[i], &pe)) != CORE_OK) {
				cli_report(&pe);
				goto out_quiet;
			}
		} else if (worst == CORE_ETIMEOUT) {
			continue;
		} else {
			cli_warn("snapshot '%s' not found", ids[i]);
			one = CORE_ENOTFOUND;
		}
		if (core_exit_code(one) > core_exit_code(worst))
			worst = one;
	}
	st = worst;
	if (st == CORE_ETIMEOUT)
		cli_report(&e);
	goto out_quiet;
out:
	if (st != CORE_OK)
		cli_report(&e);
out_quiet:
	if (rows)
		for (i = 0; i < n; i++)
			json_decref(rows[i]);
	free(rows);
	free(ids);
	json_decref(latest);
	store_close(s);
	return st;
}

int main(int argc, char **argv)
{
	struct opts o = { NULL, NULL, 0, -1, 0, 2000, NULL, NULL, 0, 0 };
	struct core_err e = { 0 };
	const char *arg, *hb = NULL;
	int c;

	cli_start(&prog);
	/* A store password (PGPASSWORD, one in AGENTKIT_STORE) out of /proc/PID/environ. */
	cli_protect_secrets();
	while ((c = cli_next(argc, argv, &arg)) != -1) {
		switch (c) {
		case OPT_STORE: o.store = arg; break;
		case OPT_SESSION: o.session = arg; break;
		case OPT_METADATA: o.flags |= STORE_METADATA_ONLY; break;
		case OPT_TIMEOUT:
			if (core_parse_duration(arg, &o.timeout_ms, &e) != CORE_OK)
				return cli_finish(cli_usage("--timeout: %s", e.msg));
			break;
		case OPT_POLL:
			if (core_parse_duration(arg, &o.poll_ms, &e) != CORE_OK || o.poll_ms <= 0)
				return cli_finish(cli_usage("--poll: invalid duration '%s'", arg));
			break;
		case OPT_HB_TIMEOUT: hb = arg; break;
		case OPT_URL: o.url = arg; break;
		case OPT_VERBOSE: o.verbose = 1; break;
		case OPT_HEADER: {
			enum core_status hs = cli_push_header(&o.headers, &o.nheaders, arg);
			if (hs != CORE_OK)
				return cli_finish(hs);
			break;
		}
		}
	}
	if (store_heartbeat_timeout(hb, &o.hb_timeout_ms, &e) != CORE_OK)
		return cli_finish(cli_usage("%s", e.msg));
	return cli_finish(run(&o, argc - optind, argv + optind));
}
