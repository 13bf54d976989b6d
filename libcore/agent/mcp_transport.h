/*
 * mcp_transport.h - how the MCP client reaches a server: the manual for a
 * transport's author (not part of mcp.h; only libcore/agent/mcp*.c
 * include this).
 *
 * mcp.c speaks the protocol: JSON-RPC framing, request ids, the answers
 * to the server's own requests, notifications, tools/list paging and the
 * mapping of results.  It reaches each server through a struct
 * mcp_transport_ops, a table of function pointers chosen once, when the
 * configuration is read, from the entry's "type" (no "type" is "stdio"):
 * mcp_config.c asks mcp_transport_find() and keeps the table in the
 * entry (struct mcp_server_config's transport).  A type that no
 * transport takes makes the entry unusable (mcp_transport_unusable: its
 * open fails with CORE_EUSAGE naming it).
 *
 * Adding a transport is one file and one row: libcore/agent/mcp_NAME.c
 * defines a const struct mcp_transport_ops and the functions it points
 * to (with its extern below), and mcp_transport.c's transports[] lists
 * it (tests/unit/mcp_transport_test.c adds one so).  The members of its
 * entries that stdio does not have are read in mcp_config.c's
 * server_entry() into struct mcp_server_config.
 *
 * One message is one JSON-RPC object; the transport carries it whole
 * (stdio: one line) and knows nothing of what it says.  Several requests
 * may wait on one server at once (a round's calls are all sent before
 * any answer is read: mcp.c matches the answers to them by id), so send
 * never waits for an answer, and receive gives the messages in the order
 * the server sent them, whichever request they belong to.  Every operation
 * that can fail returns an enum core_status and fills e with a message
 * naming the server ("mcp server 'NAME' ..."), never printing and never
 * exiting.  A cancel may be NULL, or have a NULL fn; fn(ctx) is polled at
 * least every 50 ms while an operation waits, and a non-zero answer ends
 * the wait with CORE_ECANCELLED.  Waits sleep (poll()); none spins.
 *
 * The operations and what each must guarantee:
 *
 *   open     Start or connect to the server c describes (borrowed: it
 *            outlives the transport) and set *out to the transport's own
 *            handle, whose first member is a struct mcp_transport with
 *            ops and pid (this process) filled in.  Nothing is sent: mcp.c
 *            initializes.  No message of the server's may be longer than
 *            c->max_result_bytes, nor may more than that wait unread.
 *            What the server says beside its messages (stdio: its
 *            stderr) goes line by line, made valid UTF-8, to
 *            sink(sink_ctx, c->name, line) when sink is not NULL: lines
 *            without the newline, a line over 1 MiB in pieces, a last
 *            line without a newline at close.  stdio: c->argv without a
 *            shell, in c->cwd, in its own process group, with the
 *            caller's environment minus the provider keys plus c->env
 *            (coproc_start_argv()); a program that cannot be run is seen
 *            at the first receive, as an exit.  Errors: CORE_ESYS,
 *            CORE_ENOMEM.
 *   send     Write msg (borrowed) within timeout_ms (0: if there is room at
 *            once; the client never waits without a bound).  While it waits
 *            for room, what the server writes is read ahead (up to
 *            max_result_bytes), so a server that writes while it reads
 *            cannot deadlock the client.  CORE_ENOMEM: nothing was
 *            written.  Any other failure (CORE_EDEADLINE: the server did
 *            not take it in time; CORE_ECANCELLED; CORE_EINTERNAL: it
 *            closed its input or exited; CORE_ETOOBIG: it wrote more than
 *            max_result_bytes meanwhile; CORE_ESYS) may have left part of
 *            a message sent: the stream is no longer whole, and the client
 *            takes the server as broken, takes tail() for its message,
 *            then kill()s it.
 *   receive  The server's next message, within timeout_ms (> 0): *msg
 *            points into the transport (valid until the next operation on
 *            it), *len bytes, already valid UTF-8 (stdio: a byte that is
 *            not becomes U+FFFD; blank lines are skipped).  Errors:
 *            CORE_EDEADLINE, CORE_ECANCELLED (the server goes on: a late
 *            answer is the client's to drop); CORE_EINTERNAL, the server
 *            ended (the message says how: "exited with status 3", with
 *            its stderr) or its stream is lost; CORE_ETOOBIG, a message
 *            over max_result_bytes; CORE_ESYS.  After any of these last
 *            three nothing more can be received.  CORE_ENOMEM: only the
 *            making valid of one message failed (it is lost).
 *   tail     Append to b, a message of the client's about the server
 *            whose text begins with msg, what the server said beside its
 *            messages, for the reader (stdio: " (stderr: ...tail)", the
 *            last 2 KiB of its stderr on one line, made valid UTF-8),
 *            unless msg already carries it (stdio: a message of its own
 *            naming a server that ended says how, with the tail).
 *   kill     End the server at once (stdio: SIGKILL to its process group,
 *            reaped); a server whose stream is cut, or one the client
 *            stops waiting for, is not asked to end.  Later sends and
 *            receives fail as after an exit.
 *   session  Optional: the server's session ID, for traces.
 *   close    End the server and free the transport.  stdio: close the
 *            server's stdin, wait up to grace_ms for it to exit, SIGTERM
 *            its process group, grace_ms more, SIGKILL; always reaped;
 *            the sink gets a last line without a newline.
 *
 * Across fork(): a transport opened before a fork (by a detached run's
 * caller) is inherited by the child (head.pid is not the child's pid).
 * It is not the child's to use: the child calls no operation on it but
 * close, which then frees only the child's memory (stdio: the pipes were
 * closed with every other inherited descriptor, their numbers may be the
 * child's own by now, and the server is the parent's to end).  mcp.c
 * then opens the child's own, at its first call of the server, and
 * initializes it again.
 */
#ifndef CORE_MCP_TRANSPORT_H
#define CORE_MCP_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "../base/buf.h"
#include "../base/status.h"

struct mcp_server_config;

/* The caller's stop: fn(ctx) non-zero ends a wait.  fn may be NULL. */
struct mcp_cancel {
	int (*fn)(void *ctx);
	void *ctx;
};

/* The head of every transport's handle. */
struct mcp_transport {
	const struct mcp_transport_ops *ops;
	pid_t pid;              /* the process that opened it */
};

struct mcp_transport_ops {
	const char *type;       /* the entry's "type": "stdio" */
	const char *network;    /* OpenTelemetry's network.transport: "pipe", "tcp" */
	enum core_status (*open)(const struct mcp_server_config *c,
	                         void (*sink)(void *sink_ctx, const char *server,
	                                      const char *line),
	                         void *sink_ctx, struct mcp_transport **out,
	                         struct core_err *e);
	enum core_status (*send)(struct mcp_transport *t, const json_t *msg,
	                         int64_t timeout_ms, const struct mcp_cancel *cancel,
	                         struct core_err *e);
	enum core_status (*receive)(struct mcp_transport *t, int64_t timeout_ms,
	                            const struct mcp_cancel *cancel, const char **msg,
	                            size_t *len, struct core_err *e);
	void (*tail)(struct mcp_transport *t, const char *msg, struct core_buf *b);
	void (*kill)(struct mcp_transport *t);
	void (*close)(struct mcp_transport *t, int64_t grace_ms);
	/* The session the server gave (Streamable HTTP's Mcp-Session-Id),
	 * borrowed until the next operation, or NULL; the member may be
	 * NULL (no sessions). */
	const char *(*session)(struct mcp_transport *t);
};

/* The transport that takes type (mcp_transport.c's transports[]), or
 * NULL. */
const struct mcp_transport_ops *mcp_transport_find(const char *type);

extern const struct mcp_transport_ops mcp_transport_stdio;     /* mcp_stdio.c */
extern const struct mcp_transport_ops mcp_transport_http;      /* mcp_http.c */
extern const struct mcp_transport_ops mcp_transport_sse;       /* mcp_http.c */
/* A bare "url": Streamable HTTP, falling back to HTTP+SSE (not a type). */
extern const struct mcp_transport_ops mcp_transport_url;       /* mcp_http.c */
/* An entry that cannot be used: open fails with the reading's error
 * (mcp_server_config.unusable); not a type either. */
extern const struct mcp_transport_ops mcp_transport_unusable;  /* mcp_config.c */

#endif
