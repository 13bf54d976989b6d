/*
 * serve.h - the agent path over HTTP with Genkit's own wire (agent-serve).
 *
 * An HTTP server (GNU libmicrohttpd, a thread per connection) that serves
 * every agent of the agent path as Genkit's genkit.Handler and
 * AgentRoutes do, so that Genkit's remoteAgent({url}) clients work
 * unchanged (docs/serve.md has the routes and shapes):
 *   POST /NAME                  one turn: {"data": AgentInput, "init"?:
 *                               AgentInit}; SSE when the client asks for it
 *                               (Accept: text/event-stream or ?stream=true),
 *                               else {"result": AgentOutput}
 *   POST /NAME/getSnapshot      {"data": {snapshotId | sessionId, metadataOnly?}}
 *   POST /NAME/waitForSnapshot  {"data": {snapshotId, sessionId?, metadataOnly?}},
 *                               answered when the row settles or at the cap
 *   POST /NAME/abort            {"data": {snapshotId}}
 *   GET  /                      {"agents": [descriptor, ...]}
 *
 * Every request that runs something runs it in a child: a turn is
 * agent-run NAME (its NDJSON in, its NDJSON out, read line by line), the
 * companions are agent-snap, agent-wait and agent-abort.  A crash of one
 * is that request's error, never the server's.  A client that goes away
 * mid-turn (its socket closed) stops the turn as a caller's SIGTERM does:
 * the child's process group is sent SIGTERM and the row is written
 * aborted.
 *
 * Bounds: the body (413 past max_body), turns at once (503 with
 * Retry-After past max_turns), connections at once, the idle time of a
 * connection, the headers' memory, a turn's duration (turn_timeout_ms:
 * then cancelled as a disconnect is).
 *
 * Auth: with tokens, every request needs "Authorization: Bearer TOKEN"
 * with one of them (compared in constant time for a given length); else
 * 401 with WWW-Authenticate.  Tokens are never logged nor given to
 * children.  With auth_command (after the tokens, if both), every request
 * runs it with {"method", "path", "headers": {lowercased: value}} on
 * stdin: exit 0 with a JSON object on stdout admits it, that object the
 * context a turn's agent-run gets as $AGENTKIT_CONTEXT (its tools and
 * handlers inherit it); any other end refuses it, 401, or 403 when its
 * stdout says {"status": "PERMISSION_DENIED"}.
 *
 * Nothing here prints: the access log (one line per request: client,
 * method, path, status, milliseconds, session and snapshot IDs) and
 * libmicrohttpd's own messages go to cfg->log.
 *
 * Ownership: struct serve owns the daemon and its threads; serve_stop()
 * drains and frees it.  cfg's strings are borrowed for the server's life.
 */
#ifndef CORE_SERVE_H
#define CORE_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

struct serve_config {
	const char *host;               /* numeric address to bind: 127.0.0.1, ::1, 0.0.0.0 */
	unsigned port;                  /* 0: any free port (serve_port() says which) */
	int listen_fd;                  /* >= 0: a listening socket to serve instead of
	                                   host:port (serve_listen_unix(),
	                                   serve_listen_activated()); the server owns it
	                                   from serve_start() on, and closes it */
	const char *bin_dir;            /* where agent-run, agent-snap, agent-wait and
	                                   agent-abort are */
	const char *agents_dir;         /* --agents DIR, or NULL */
	const char *store;              /* --store, or NULL: the children's default */
	int no_store;                   /* client-managed: agent-run --no-store */
	size_t max_body;                /* bytes of a request body */
	unsigned max_turns;             /* turns at once */
	unsigned max_connections;
	unsigned idle_timeout_s;        /* a connection idle this long is closed */
	int64_t turn_timeout_ms;        /* a turn running longer is cancelled */
	int64_t wait_cap_ms;            /* waitForSnapshot answers by then */
	const char *const *tokens;      /* NULL-terminated bearer tokens, or NULL: no auth */
	const char *auth_command;       /* Genkit's context provider as a command, or NULL */
	void (*log)(void *ctx, const char *line);   /* one line, no newline */
	void *log_ctx;
};

struct serve;

/* Bind and start serving.  CORE_EUSAGE (a bad address), CORE_ESYS
 * (cannot bind: "cannot listen on HOST:PORT: why"), CORE_ENOMEM. */
enum core_status serve_start(const struct serve_config *cfg, struct serve **out,
                             struct core_err *e);

/* The port the server listens on. */
unsigned serve_port(const struct serve *s);

/*
 * Stop accepting, let the requests in flight finish for up to drain_ms,
 * then cancel what is left (turns get SIGTERM, as a disconnect), close
 * every connection and free s.  Returns how many requests were cancelled.
 */
unsigned serve_stop(struct serve *s, int64_t drain_ms);

/*
 * A Unix stream socket bound at path and listening, for listen_fd; its
 * file is made 0600 (the owner alone may connect; chmod or the directory
 * open it further).  A socket file there that no server answers on is
 * replaced; one a server answers on is CORE_ESYS ("another server listens
 * there"), any other file CORE_EUSAGE.  The caller unlinks path when done.
 */
enum core_status serve_listen_unix(const char *path, int *fd, struct core_err *e);

/*
 * The socket systemd's socket activation passed (LISTEN_PID is this
 * process, LISTEN_FDS is 1: fd 3), made close-on-exec, and the variables
 * unset so that no child sees them; *fd -1 when none was passed to this
 * process.  More than one socket, or one that is not a listening stream
 * socket: CORE_EUSAGE.
 */
enum core_status serve_listen_activated(int *fd, struct core_err *e);

/* What fd listens on, for the log: "http://127.0.0.1:8080",
 * "http://[::1]:8080" or "unix:PATH"; *local: a loopback address or a
 * Unix socket.  CORE_ESYS, CORE_EUSAGE (neither TCP nor Unix). */
enum core_status serve_listen_describe(int fd, char *buf, size_t n, int *local,
                                       struct core_err *e);

/* Is host a loopback address (127.0.0.0/8, ::1)?  Numeric only. */
int serve_is_loopback(const char *host);

/* HTTP status for a Genkit status name ("NOT_FOUND" -> 404), as Genkit's
 * status package maps them; 500 for an unknown name. */
int serve_http_code(const char *status_name);

#endif
