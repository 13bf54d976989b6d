/*
 * remote.h - one turn of an agent served with Genkit's wire (agent-serve,
 * or a Genkit JS, Go or Python app): the client side of serve.h, as
 * Genkit's remoteAgent transport runs it (docs/serve.md "The wire").
 *
 * POST URL {"data": AgentInput, "init": AgentInit} with Accept:
 * text/event-stream; each event {"message": chunk} goes to on_chunk, the
 * last is {"result": AgentOutput} or {"error": {status, message}}.  A
 * non-2xx answer is an error too: its body {"status", "message"} (Genkit
 * JS express, agent-serve), {"error": ...} or plain text (Genkit Go), its
 * status by the HTTP code where the body names none.  A turn is never
 * replayed: a transport failure is final.
 *
 * Nothing here prints.  Headers are the caller's ("Name: value"); they
 * never appear in a message.
 */
#ifndef CORE_REMOTE_H
#define CORE_REMOTE_H

#include <jansson.h>

#include "../base/status.h"

struct remote_turn {
	const char *url;
	const char *const *headers;     /* NULL-terminated, or NULL */
	const json_t *input;            /* AgentInput */
	const json_t *init;             /* AgentInit, or NULL: {} */
	/* Each chunk as it arrives; non-OK stops the turn with that status. */
	enum core_status (*on_chunk)(void *ctx, const json_t *chunk, struct core_err *e);
	int (*cancelled)(void *ctx);    /* polled; non-zero closes the connection */
	void *ctx;
};

/*
 * Run one turn.  CORE_OK with *final a new {"output": AgentOutput} or
 * {"error": {"status", "message"}} (the server's answer).  Otherwise no
 * answer came: CORE_EUNAVAILABLE (cannot connect, the stream ended
 * without a result: "... ended before its result"), CORE_ECANCELLED,
 * CORE_EINTERNAL (an event that is not Genkit's), CORE_ENOMEM, or
 * on_chunk's status.
 */
enum core_status remote_run_turn(const struct remote_turn *t, json_t **final,
                                 struct core_err *e);

/*
 * The reader of remote_run_turn() on its own, for bytes that came some
 * other way (and the fuzz target, tests/fuzz/fuzz_wire.c): feed a turn's
 * answer as it arrives, then end it.  Chunks go to on_chunk (may be NULL)
 * as they are framed; remote_stream_end() gives the final line as
 * remote_run_turn() does (*final new) or the status: CORE_EINTERNAL for a
 * frame or event that is not Genkit's, CORE_ETOOBIG for one over 64 MiB,
 * CORE_EUNAVAILABLE for a stream that ends without its result, each
 * message beginning with url; after a failed feed, end gives that status
 * again.  NULL from remote_stream_new(): out of memory.
 */
struct remote_stream;
struct remote_stream *remote_stream_new(const char *url,
                                        enum core_status (*on_chunk)(void *ctx,
                                                                     const json_t *chunk,
                                                                     struct core_err *e),
                                        void *ctx);
enum core_status remote_stream_feed(struct remote_stream *rs, const char *p, size_t n,
                                    struct core_err *e);
enum core_status remote_stream_end(struct remote_stream *rs, json_t **final,
                                   struct core_err *e);
void remote_stream_free(struct remote_stream *rs);

/* The turns of agent-run --url: each input in order, each turn's init the
 * last one's snapshotId (server-managed) or state (client-managed). */
struct remote_invocation {
	const char *url;
	const char *const *headers;
	const char *const *messages;    /* -m texts ... */
	size_t nmsg;
	const json_t *inputs;           /* ... or an array of AgentInputs (wins) */
	const json_t *init;             /* the first turn's AgentInit, or NULL */
	int detach;                     /* -m turns are sent with "detach": true */
	enum core_status (*on_chunk)(void *ctx, const json_t *chunk, struct core_err *e);
	int (*cancelled)(void *ctx);
	void *ctx;
};

/*
 * Run the turns up to the first that does not complete (failed, aborted,
 * interrupted, detached) or the first error; *final is the last turn's
 * {"output": ...} or {"error": ...} (new), or NULL with the status of
 * remote_run_turn() when no answer came.
 */
enum core_status remote_invoke(const struct remote_invocation *ri, json_t **final,
                               struct core_err *e);

/*
 * POST url {"data": data} and take {"result": ...}: *result new.  The
 * server's error is e with its status (CORE_ENOTFOUND for NOT_FOUND, ...)
 * and message; *route_missing (may be NULL) is set for a 404 that names no
 * status (the server has no such route).  CORE_EUNAVAILABLE: no answer.
 */
enum core_status remote_call(const char *url, const char *const *headers, const json_t *data,
                             int (*cancelled)(void *ctx), void *ctx, json_t **result,
                             int *route_missing, struct core_err *e);

/*
 * One row through the server's getSnapshot companion (URL is the agent's
 * turn route; "/getSnapshot" is appended): by snapshot_id, else the
 * latest of session_id.  metadata_only is asked for ("metadataOnly") and
 * also applied here: a server that ignores it (Genkit JS) still gives no
 * state.  *row new, as the server shaped it.  The server's errors are
 * remote_call()'s, in its words (NOT_FOUND: CORE_ENOTFOUND); a null
 * result is CORE_ENOTFOUND too, "snapshot 'ID' not found".
 */
enum core_status remote_get_snapshot(const char *url, const char *const *headers,
                                     const char *snapshot_id, const char *session_id,
                                     int metadata_only, int (*cancelled)(void *ctx),
                                     void *ctx, json_t **row, struct core_err *e);

/* A wait on a row through a server's companions. */
struct remote_wait_req {
	const char *url;                /* the agent's turn route */
	const char *const *headers;
	const char *id;
	int metadata_only;
	int64_t deadline_ms;            /* monotonic; < 0: none */
	int (*cancelled)(void *ctx);
	void (*on_fallback)(void *ctx); /* told once when polling begins; may be NULL */
	void *ctx;
};

/*
 * Until the row reads terminal (completed, failed, aborted, expired):
 * waitForSnapshot again and again (at most once a second past the
 * server's cap), or, where the server has no such route (Genkit JS),
 * getSnapshot polled with a backoff from 500 ms to 5 s.  *row new.
 * CORE_ETIMEOUT past the deadline, CORE_ECANCELLED, or remote_call()'s.
 */
enum core_status remote_wait(const struct remote_wait_req *w, json_t **row, struct core_err *e);

#endif
