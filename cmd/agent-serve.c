/* agent-serve.c - serve the agent path over HTTP with Genkit's own wire. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../libcore/agent/serve.h"
#include "../libcore/base/spawn.h"
#include "../libcore/base/trace.h"
#include "../libcore/base/util.h"

enum {
	OPT_LISTEN = 'l',
	OPT_STORE = 's',
	OPT_AGENTS = CLI_LONG + 1,
	OPT_NO_STORE,
	OPT_TOKENS,
	OPT_AUTH_COMMAND,
	OPT_INSECURE,
	OPT_MAX_BODY,
	OPT_MAX_TURNS,
	OPT_MAX_CONN,
	OPT_IDLE,
	OPT_TURN_TIMEOUT,
	OPT_WAIT_CAP,
	OPT_DRAIN,
};

static const struct cli_opt opts[] = {
	{ OPT_LISTEN, "listen", "ADDR:PORT",
	  "listen on this numeric address and port (default 127.0.0.1:8080; port 0: "
	  "any free one; [::1]:PORT for IPv6), or unix:PATH for a Unix socket (made 0600); "
	  "a socket passed by systemd's socket activation (LISTEN_FDS) is used instead "
	  "when --listen is not given" },
	{ OPT_AGENTS, "agents", "DIR", "serve the agents of DIR first (then $AGENTKIT_PATH, ./agents)" },
	{ OPT_STORE, "store", "PATH",
	  "the snapshot store (default $AGENTKIT_STORE, then the XDG state dir)" },
	{ OPT_NO_STORE, "no-store", NULL,
	  "client-managed state: no store, the state travels in init and output.state; "
	  "no companion routes" },
	{ OPT_TOKENS, "auth-token-file", "FILE",
	  "require 'Authorization: Bearer TOKEN' with one of the tokens of FILE (one a "
	  "line; blank lines and lines starting with # are skipped)" },
	{ OPT_AUTH_COMMAND, "auth-command", "CMD",
	  "run CMD (/bin/sh -c) for every request with {method, path, headers} on stdin: "
	  "exit 0 with a JSON object admits it (the turn's tools see it as $AGENTKIT_CONTEXT), "
	  "else 401 (403 when it prints {\"status\": \"PERMISSION_DENIED\"})" },
	{ OPT_INSECURE, "insecure-no-auth", NULL,
	  "listen on a non-loopback address without --auth-token-file or --auth-command" },
	{ OPT_MAX_BODY, "max-body", "SIZE", "refuse request bodies over SIZE (default 4M)" },
	{ OPT_MAX_TURNS, "max-concurrent", "N",
	  "run at most N turns at once; past that 503 with Retry-After (default 16)" },
	{ OPT_MAX_CONN, "max-connections", "N", "accept at most N connections at once (default 256)" },
	{ OPT_IDLE, "idle-timeout", "DURATION",
	  "close a connection that sends nothing for DURATION, headers included "
	  "(default 60s; whole seconds)" },
	{ OPT_TURN_TIMEOUT, "turn-timeout", "DURATION",
	  "cancel a turn running longer than DURATION, as a disconnect does (default 30m)" },
	{ OPT_WAIT_CAP, "max-snapshot-wait", "DURATION",
	  "waitForSnapshot answers with the row as it stands after DURATION (default 60s)" },
	{ OPT_DRAIN, "drain-timeout", "DURATION",
	  "on SIGTERM, let requests in flight finish for DURATION, then cancel them "
	  "(default 30s)" },
	{ 0 }
};

static const struct cli_exitcode exits[] = {
	{ 0, "stopped by SIGTERM or SIGINT, every request finished" },
	{ 2, "stopped by SIGTERM or SIGINT, requests still running past --drain-timeout were cancelled" },
	{ 4, "the token file was not found" },
	{ 100, "usage error (a non-loopback address without auth, a bad address, more "
	       "than one socket passed by systemd)" },
	{ 111, "system failure (cannot listen)" },
	{ -1, NULL }
};

static const struct cli_prog prog = {
	.name = "agent-serve",
	.purpose = "serve agents over HTTP with Genkit's own wire",
	.synopsis = "[OPTION]...",
	.description =
	"Serves every agent of the agent path over HTTP, as Genkit's genkit.Handler "
	"and AgentRoutes do, so that Genkit's clients (remoteAgent({url}) of "
	"genkit/beta/client) reach them unchanged: POST /NAME runs one turn "
	"({\"data\": AgentInput, \"init\": AgentInit}; server-sent events when the "
	"client sends Accept: text/event-stream or ?stream=true, else {\"result\": "
	"AgentOutput}), POST /NAME/getSnapshot, /NAME/waitForSnapshot and "
	"/NAME/abort are its companions, GET / lists the agents' descriptors.  "
	"docs/serve.md has the shapes.\n\n"
	"Each turn runs in its own agent-run child (the one beside agent-serve), "
	"with its NDJSON as input and output: sessions, state, interrupts and "
	"detached runs are agent-run's, and a crash is that request's error.  A "
	"client that disconnects mid-turn stops it as SIGTERM stops agent-run: the "
	"row is written aborted.\n\n"
	"Without --auth-token-file anyone who reaches the port may run the agents, "
	"so agent-serve listens only on a loopback address then, unless "
	"--insecure-no-auth.  TLS is a reverse proxy's.  One line per request goes "
	"to stderr: method, path, status, milliseconds, session and snapshot IDs.  "
	"SIGTERM or SIGINT stops accepting, drains (--drain-timeout) and exits.\n\n"
	"Started by systemd's socket activation (a .socket unit with ListenStream=, "
	"Accept=no), agent-serve serves the one socket systemd passes (LISTEN_PID, "
	"LISTEN_FDS), TCP or Unix, under the same auth rule.",
	.opts = opts,
	.examples =
	"$ agent-serve --listen 127.0.0.1:8080 --agents agents\n"
	"  serve ./agents; from node: remoteAgent({url: 'http://127.0.0.1:8080/tasks'})\n"
	"$ curl -s localhost:8080/tasks -d '{\"data\":{\"message\":{\"role\":\"user\",\"content\":[{\"text\":\"hi\"}]}}}'\n"
	"  one turn, the AgentOutput in {\"result\": ...}\n"
	"$ agent-serve --listen 0.0.0.0:8080 --auth-token-file /etc/agentkit/tokens\n"
	"  on every interface, with bearer tokens\n"
	"$ agent-serve --listen unix:$XDG_RUNTIME_DIR/agents.sock\n"
	"  on a Unix socket only its owner may use; curl --unix-socket reaches it",
	.exits = exits,
};

struct opts {
	struct serve_config cfg;
	const char *listen, *token_file;
	const char *unix_path;          /* --listen unix:PATH: bound here, unlinked at exit */
	int listen_given;
	char where[PATH_MAX + 16];      /* what a given socket listens on, for the log */
	int insecure;
	int64_t drain_ms;
	char host[64];
	char bin_dir[PATH_MAX];
	char **tokens;
};

/* HOST:PORT or [HOST]:PORT */
static enum core_status parse_listen(struct opts *o)
{
	const char *s = o->listen, *colon = strrchr(s, ':'), *h = s;
	size_t n;
	char *end;
	unsigned long port;
	if (!colon)
		return cli_usage("--listen: '%s' is not ADDR:PORT", s);
	n = (size_t)(colon - s);
	if (*s == '[' && n >= 2 && s[n - 1] == ']') {
		h = s + 1;
		n -= 2;
	}
	port = strtoul(colon + 1, &end, 10);
	if (!n || n >= sizeof o->host || *end || end == colon + 1 || port > 65535)
		return cli_usage("--listen: '%s' is not ADDR:PORT", s);
	memcpy(o->host, h, n);
	o->host[n] = '\0';
	o->cfg.host = o->host;
	o->cfg.port = (unsigned)port;
	return CORE_OK;
}

static enum core_status read_tokens(struct opts *o)
{
	struct core_err e = { 0 };
	struct core_buf b = CORE_BUF_INIT(1 << 20);
	size_t n = 0;
	char *line, *save = NULL;
	enum core_status st = core_buf_read_file(&b, o->token_file, &e);
	if (st != CORE_OK) {
		if (st == CORE_ESYS && e.sys == ENOENT)
			e.st = CORE_ENOTFOUND;  /* a missing input file is 4 */
		return cli_report(&e);
	}
	if (core_buf_addc(&b, '\0') != CORE_OK || !(o->tokens = calloc(b.len / 2 + 2, sizeof *o->tokens))) {
		core_buf_release(&b);
		return cli_report(&(struct core_err){ .st = CORE_ENOMEM, .msg = "out of memory" });
	}
	for (line = strtok_r(b.p, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
		size_t len;
		while (*line == ' ' || *line == '\t')
			line++;
		len = strlen(line);
		while (len && (line[len - 1] == ' ' || line[len - 1] == '\t'))
			line[--len] = '\0';
		if (len && *line != '#' && !(o->tokens[n++] = strdup(line)))
			return cli_report(&(struct core_err){ .st = CORE_ENOMEM, .msg = "out of memory" });
	}
	/* the file's bytes are not kept past here */
	memset(b.p, 0, b.len);
	core_buf_release(&b);
	if (!n)
		return cli_usage("--auth-token-file: '%s' has no token", o->token_file);
	o->cfg.tokens = (const char *const *)o->tokens;
	return CORE_OK;
}

static enum core_status find_bin_dir(struct opts *o)
{
	ssize_t n = readlink("/proc/self/exe", o->bin_dir, sizeof o->bin_dir - 1);
	char *slash;
	if (n <= 0)
		return cli_report(&(struct core_err){ .st = CORE_ESYS,
		                  .msg = "cannot find agent-serve's own directory (/proc/self/exe)" });
	o->bin_dir[n] = '\0';
	if ((slash = strrchr(o->bin_dir, '/')))
		*slash = '\0';
	o->cfg.bin_dir = o->bin_dir;
	return CORE_OK;
}

static void log_line(void *ctx, const char *line)
{
	(void)ctx;
	fprintf(stderr, "agent-serve: %s\n", line);
}

/*
 * The children are agent-run, agent-snap, agent-wait and agent-abort: the
 * programs that use the provider keys and the store's credentials, and
 * hide them from their own children (tools, handlers).  So agent-serve
 * hides none from them; it keeps them out of /proc/PID/environ all the
 * same (spawn_protect_keys() makes it non-dumpable).
 */
static int no_secret(const char *entry)
{
	(void)entry;
	return 0;
}

/* Tracing, as agent-run's from the environment (AGENTKIT_TRACE=1 and the
 * OTEL_* variables, docs/tracing.md): a SERVER span per request, its
 * turn's spans under it. */
static void trace_start_server(void)
{
	struct trace_config c;
	if (trace_config_from_env(&c, 0, NULL, "agent-serve", AGENTKIT_VERSION) != CORE_OK) {
		cli_warn("tracing off: out of memory");
		return;
	}
	if (c.note[0])
		cli_warn("%s", c.note);
	if (trace_init(&c) != CORE_OK)
		cli_warn("tracing off: out of memory");
}

static enum core_status serve(struct opts *o)
{
	struct core_err e = { 0 };
	struct serve *s;
	sigset_t set;
	int sig = 0;
	unsigned left;
	enum core_status st;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	/* Blocked before the daemon's threads exist, so they inherit it and
	 * only sigwait() below takes these signals. */
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	trace_start_server();
	if ((st = serve_start(&o->cfg, &s, &e)) != CORE_OK)
		return st == CORE_EUSAGE ? cli_usage("--listen: %s", e.msg) : cli_report(&e);
	if (o->where[0])
		fprintf(stderr, "agent-serve: listening on %s\n", o->where);
	else
		fprintf(stderr, strchr(o->host, ':') ? "agent-serve: listening on http://[%s]:%u\n"
		                                     : "agent-serve: listening on http://%s:%u\n",
		        o->host, serve_port(s));
	while (sigwait(&set, &sig) == 0 && sig == SIGHUP)
		;
	fprintf(stderr, "agent-serve: %s: draining\n", strsignal(sig));
	left = serve_stop(s, o->drain_ms);
	if (trace_finish(NULL, &e) != CORE_OK)
		cli_warn("%s", e.msg);
	if (left) {
		cli_warn("cancelled %u request%s still running after the drain", left,
		         left == 1 ? "" : "s");
		return CORE_ABORTED;
	}
	return CORE_OK;
}

static enum core_status parse_count(const char *flag, const char *arg, unsigned *out)
{
	char *end;
	unsigned long v = strtoul(arg, &end, 10);
	if (!*arg || *end || !v || v > 100000)
		return cli_usage("%s: '%s' is not a count from 1 to 100000", flag, arg);
	*out = (unsigned)v;
	return CORE_OK;
}

static enum core_status parse_ms(const char *flag, const char *arg, int64_t *out)
{
	struct core_err e = { 0 };
	if (core_parse_duration(arg, out, &e) != CORE_OK)
		return cli_usage("%s: %s", flag, e.msg);
	return CORE_OK;
}

static enum core_status option(struct opts *o, int c, const char *arg)
{
	int64_t idle;
	enum core_status st;
	switch (c) {
	case OPT_LISTEN: o->listen = arg; o->listen_given = 1; return CORE_OK;
	case OPT_AGENTS: o->cfg.agents_dir = arg; return CORE_OK;
	case OPT_STORE: o->cfg.store = arg; return CORE_OK;
	case OPT_NO_STORE: o->cfg.no_store = 1; return CORE_OK;
	case OPT_TOKENS: o->token_file = arg; return CORE_OK;
	case OPT_AUTH_COMMAND: o->cfg.auth_command = arg; return CORE_OK;
	case OPT_INSECURE: o->insecure = 1; return CORE_OK;
	case OPT_MAX_BODY: return cli_size("--max-body", arg, &o->cfg.max_body);
	case OPT_MAX_TURNS: return parse_count("--max-concurrent", arg, &o->cfg.max_turns);
	case OPT_MAX_CONN: return parse_count("--max-connections", arg, &o->cfg.max_connections);
	case OPT_IDLE:
		if ((st = parse_ms("--idle-timeout", arg, &idle)) != CORE_OK)
			return st;
		o->cfg.idle_timeout_s = idle < 1000 ? 1 : (unsigned)(idle / 1000);
		return CORE_OK;
	case OPT_TURN_TIMEOUT: return parse_ms("--turn-timeout", arg, &o->cfg.turn_timeout_ms);
	case OPT_WAIT_CAP: return parse_ms("--max-snapshot-wait", arg, &o->cfg.wait_cap_ms);
	case OPT_DRAIN: return parse_ms("--drain-timeout", arg, &o->drain_ms);
	}
	return CORE_OK;
}

/*
 * Where to listen: the socket systemd passed (when --listen is not
 * given), a Unix socket (unix:PATH, bound later), or ADDR:PORT.  *local:
 * a loopback address or a Unix socket, which may go without auth.
 */
static enum core_status choose_listen(struct opts *o, int *local)
{
	struct core_err e = { 0 };
	int fd;
	if (serve_listen_activated(&fd, &e) != CORE_OK)
		return cli_usage("%s", e.msg);
	if (fd >= 0) {
		o->cfg.listen_fd = fd;
		if (o->listen_given)
			return cli_usage("--listen and a socket passed by systemd (LISTEN_FDS) "
			                 "exclude each other");
		if (serve_listen_describe(fd, o->where, sizeof o->where, local, &e) != CORE_OK)
			return e.st == CORE_EUSAGE ? cli_usage("%s", e.msg) : cli_report(&e);
		return CORE_OK;
	}
	if (!strncmp(o->listen, "unix:", 5)) {
		o->unix_path = o->listen + 5;
		if (!*o->unix_path)
			return cli_usage("--listen: 'unix:' names no socket path");
		*local = 1;
		return CORE_OK;
	}
	if (parse_listen(o) != CORE_OK)
		return CORE_EUSAGE;
	*local = serve_is_loopback(o->host);
	return CORE_OK;
}

static enum core_status run(struct opts *o)
{
	struct core_err e = { 0 };
	enum core_status st;
	int local = 0;
	if ((st = choose_listen(o, &local)) != CORE_OK)
		return st;
	if (o->cfg.no_store && o->cfg.store)
		return cli_usage("--store and --no-store exclude each other");
	if (o->token_file && (st = read_tokens(o)) != CORE_OK)
		return st;
	if (!o->token_file && !o->cfg.auth_command && !o->insecure && !local)
		return cli_usage("%s%s%s is not a loopback address: give --auth-token-file, "
		                 "or --insecure-no-auth to serve anyone who reaches it",
		                 o->where[0] ? "the socket systemd passed (" : "--listen ",
		                 o->where[0] ? o->where : o->listen, o->where[0] ? ")" : "");
	if ((st = find_bin_dir(o)) != CORE_OK)
		return st;
	if (spawn_protect_keys(no_secret, &e) != CORE_OK)
		return cli_report(&e);
	if (o->unix_path) {
		if (serve_listen_unix(o->unix_path, &o->cfg.listen_fd, &e) != CORE_OK)
			return e.st == CORE_EUSAGE ? cli_usage("--listen: %s", e.msg) : cli_report(&e);
		snprintf(o->where, sizeof o->where, "unix:%s", o->unix_path);
	}
	st = serve(o);
	/* the socket file is ours alone: gone with the server */
	if (o->unix_path && o->cfg.listen_fd >= 0)
		unlink(o->unix_path);
	return st;
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	const char *arg;
	int c;
	enum core_status st = CORE_OK;
	cli_start(&prog);
	o.listen = "127.0.0.1:8080";
	o.cfg.listen_fd = -1;
	o.cfg.max_body = (size_t)4 << 20;
	o.cfg.max_turns = 16;
	o.cfg.max_connections = 256;
	o.cfg.idle_timeout_s = 60;
	o.cfg.turn_timeout_ms = 30 * 60 * 1000;
	o.cfg.wait_cap_ms = 60 * 1000;
	o.cfg.log = log_line;
	o.drain_ms = 30 * 1000;
	while ((c = cli_next(argc, argv, &arg)) != -1 && st == CORE_OK)
		st = option(&o, c, arg);
	if (st == CORE_OK && optind < argc)
		st = cli_usage("unexpected operand '%s'", argv[optind]);
	if (st == CORE_OK)
		st = run(&o);
	return cli_finish(st);
}
