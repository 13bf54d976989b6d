/*
 * serve_int.h - what serve.c (HTTP, routes, auth) and serve_run.c (the
 * children a request runs) share.  Private to them.
 */
#ifndef CORE_SERVE_INT_H
#define CORE_SERVE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <jansson.h>
#include <microhttpd.h>

#include "serve.h"
#include "../base/buf.h"

#define SERVE_NAME_MAX 200
/* A child told to stop (SIGTERM) has this long before its group is killed:
 * time for agent-run to write its row aborted. */
#define SERVE_KILL_GRACE_MS 5000

struct serve {
	struct serve_config cfg;
	struct MHD_Daemon *d;
	atomic_int active;      /* requests in flight */
	atomic_int turns;       /* turns holding a slot */
	atomic_int draining;    /* SIGTERM came: no new requests */
	atomic_int stopping;    /* the drain is over: cancel what runs */
	/* The keeper thread's work, under warm_mu (serve_run.c): an
	 * agent-run --serve-child started ahead of the next turn (its exec
	 * and start-up off the turn's path), or NULL; whether one is wanted;
	 * the children of ended turns still to reap, and how many. */
	pthread_mutex_t warm_mu;
	pthread_cond_t keep_cv;
	pthread_t keeper;
	int keeper_up, keep_quit, want_warm, nended;
	struct coproc *warm;
	struct serve_ended *ended;
};

enum serve_route { SERVE_LIST, SERVE_TURN, SERVE_SNAPSHOT, SERVE_WAIT, SERVE_ABORT };

struct serve_turn;

/* One request; freed when both the connection and a streamed response
 * are done with it (refs). */
struct serve_req {
	struct serve *s;
	struct MHD_Connection *conn;
	atomic_int refs;
	int64_t t0;
	char method[16];
	char *path;
	char agent[SERVE_NAME_MAX + 1];
	enum serve_route route;
	int routed;             /* the path named a route (route()) */
	struct trace_span *span;        /* the request's SERVER span, or NULL */
	struct core_buf body;
	int answered, code, turn_slot, cancelled;
	int streaming;          /* a streamed turn has not read its final line yet */
	char session[128], snapshot[128];     /* for the access log */
	char *context;          /* the auth command's context (JSON), or NULL */
	/* An answer decided before the body (401, 404, 503) waits until the
	 * body is read: queued at once, the close that follows would meet
	 * unread bytes and reset the connection, losing the answer. */
	int defer;
	struct MHD_Response *late;
	unsigned late_code;
};

void serve_log(struct serve *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A header's value when it is visible ASCII of at most 512 bytes (a W3C
 * trace header), else NULL (borrowed from the connection). */
const char *serve_trace_header(struct MHD_Connection *conn, const char *name);
enum MHD_Result serve_answer(struct serve_req *r, int code, const char *type,
                             const char *body, size_t len);
/* The answer r->defer held back, queued now that the body is read. */
enum MHD_Result serve_answer_late(struct serve_req *r);
enum MHD_Result serve_error_code(struct serve_req *r, int code, const char *status,
                                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#define serve_error(r, ...) serve_error_code((r), 0, __VA_ARGS__)
enum MHD_Result serve_result(struct serve_req *r, json_t *v);
void serve_note_ids(struct serve_req *r, const json_t *v);
void serve_req_release(struct serve_req *r);
/* The request's turn slot given back (when its child's final line is
 * read, before the answer's last byte: a client's next turn must find it
 * free); once. */
void serve_slot_free(struct serve_req *r);

/*
 * The keeper (serve_run.c), a thread that does a turn's work that no
 * answer waits for: serve_warm() asks it to start the next turn's
 * agent-run ahead when there is none; a turn whose final line is read
 * hands it its child to reap.  serve_keeper_start() starts it (without
 * it, that work is done in the caller, as before); serve_warm_end() ends
 * the child started ahead (the drain); serve_keeper_stop(), once no
 * request is left, reaps what is left and joins it.
 */
void serve_keeper_start(struct serve *s);
void serve_keeper_stop(struct serve *s);
void serve_warm(struct serve *s);
void serve_warm_end(struct serve *s);

/* serve_run.c: the routes that run a child, and the auth command. */
enum MHD_Result serve_auth_command(struct serve_req *r, int *admitted);
enum MHD_Result serve_turn(struct serve_req *r, const json_t *data, const json_t *init);
enum MHD_Result serve_get_snapshot(struct serve_req *r, const json_t *data);
enum MHD_Result serve_wait_snapshot(struct serve_req *r, const json_t *data);
enum MHD_Result serve_abort(struct serve_req *r, const json_t *data);
enum MHD_Result serve_list(struct serve_req *r);

#endif
