/* serve.c - agent-serve's HTTP layer: routes, auth, limits, the daemon
 * (serve.h).  Answers are serve_wire.c's, children serve_run.c's. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "serve_int.h"
#include "../base/json.h"
#include "../base/trace.h"
#include "../base/util.h"

/* Headers and the connection's buffers: bigger header blocks get 431. */
#define SERVE_CONN_MEMORY (64 * 1024)

int serve_is_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
	struct serve *s = cls;
	char line[1024];
	size_t n;
	vsnprintf(line, sizeof line, fmt, ap);
	n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	serve_log(s, "libmicrohttpd: %s", line);
}

/* ---- auth ---- */

/* Constant time for a given presented length: every byte of every token
 * is looked at, whether or not an earlier one matched. */
static int token_ok(const struct serve *s, const char *got)
{
	size_t n = strlen(got);
	int ok = 0;
	for (const char *const *t = s->cfg.tokens; *t; t++) {
		size_t m = strlen(*t);
		unsigned char diff = (unsigned char)(m != n);
		for (size_t i = 0; i < n; i++)
			diff |= (unsigned char)((unsigned char)got[i] ^
			                        (unsigned char)(m ? (*t)[i % m] : 0));
		ok |= !diff;
	}
	return ok;
}

static int authorized(struct serve_req *r)
{
	const char *h;
	if (!r->s->cfg.tokens || !*r->s->cfg.tokens)
		return 1;
	h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7))
		return 0;
	h += 7;
	while (*h == ' ')
		h++;
	return *h && token_ok(r->s, h);
}

/* ---- routing ---- */

static int valid_name(const char *p, size_t n)
{
	if (!n || n > SERVE_NAME_MAX || *p == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(p[i] == '-' || p[i] == '_' || p[i] == '.' || (p[i] >= '0' && p[i] <= '9') ||
		      (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z')))
			return 0;
	return 1;
}

/* Is NAME.prompt on the agent path? */
static int agent_exists(const struct serve *s, const char *name)
{
	char **dirs = NULL;
	int found = 0;
	if (agent_search_path(s->cfg.agents_dir, &dirs) != CORE_OK)
		return 0;
	for (char **d = dirs; d && *d && !found; d++) {
		char path[4096];
		if ((size_t)snprintf(path, sizeof path, "%s/%s.prompt", *d, name) < sizeof path)
			found = access(path, R_OK) == 0;
	}
	agent_path_free(dirs);
	return found;
}

static const struct { const char *suffix; enum serve_route route; } companions[] = {
	{ "getSnapshot", SERVE_SNAPSHOT }, { "waitForSnapshot", SERVE_WAIT },
	{ "abort", SERVE_ABORT },
};

/* The route of url; 0 when it names one (else an answer was queued). */
static int route(struct serve_req *r, const char *url, enum MHD_Result *ret)
{
	const char *p = url + (*url == '/'), *slash = strchr(p, '/');
	size_t n = slash ? (size_t)(slash - p) : strlen(p);
	if (!*p) {
		r->route = SERVE_LIST;
		if (strcmp(r->method, "GET"))
			return *ret = serve_error(r, "NOT_FOUND", "%s /: the listing is GET /",
			                          r->method), -1;
		r->routed = 1;
		return 0;
	}
	if (strcmp(r->method, "POST"))
		return *ret = serve_error(r, "NOT_FOUND", "%s %s: agents are served by POST",
		                          r->method, url), -1;
	if (!valid_name(p, n))
		return *ret = serve_error(r, "NOT_FOUND", "no agent at '%s'", url), -1;
	memcpy(r->agent, p, n);
	r->agent[n] = '\0';
	r->route = SERVE_TURN;
	if (slash) {
		size_t i;
		for (i = 0; i < sizeof companions / sizeof *companions; i++)
			if (!strcmp(slash + 1, companions[i].suffix))
				break;
		if (i == sizeof companions / sizeof *companions)
			return *ret = serve_error(r, "NOT_FOUND", "no route '%s': an agent's "
			                          "are getSnapshot, waitForSnapshot and abort",
			                          url), -1;
		r->route = companions[i].route;
		if (r->s->cfg.no_store)
			return *ret = serve_error(r, "NOT_FOUND", "agent '%s' has no %s route: "
			                          "it is client-managed (agent-serve --no-store)",
			                          r->agent, slash + 1), -1;
	}
	if (!agent_exists(r->s, r->agent))
		return *ret = serve_error(r, "NOT_FOUND", "agent '%s' not found", r->agent), -1;
	r->routed = 1;
	return 0;
}

/* ---- a request's life ---- */

/* The request's SERVER span (with tracing on): a child of the caller's
 * traceparent, else the root of a trace of its own; named by its method
 * until its route is known (span names stay few: an unknown path is no
 * name). */
static void span_start(struct serve_req *r)
{
	r->span = trace_start_remote(serve_trace_header(r->conn, "traceparent"),
	                             serve_trace_header(r->conn, "tracestate"), r->method,
	                             TRACE_SERVER, 0);
	trace_attr_str(r->span, "http.request.method", r->method);
	trace_attr_str(r->span, "url.path", r->path);
}

static void span_end(struct serve_req *r, int code)
{
	char name[16 + SERVE_NAME_MAX + 32], status[16];
	if (!r->span)
		return;
	if (r->routed) {
		snprintf(name, sizeof name, "%s %s", r->method, r->path);
		trace_rename(r->span, name);
	}
	trace_attr_int(r->span, "http.response.status_code", code);
	if (*r->session)
		trace_attr_str(r->span, "gen_ai.conversation.id", r->session);
	if (*r->snapshot)
		trace_attr_str(r->span, "genkit:metadata:agent:snapshotId", r->snapshot);
	/* semconv: a 5xx's error.type is its code */
	snprintf(status, sizeof status, "%d", code);
	if (code >= 500 || r->cancelled)
		trace_attr_str(r->span, "error.type", r->cancelled ? "cancelled" : status);
	trace_end(r->span, code >= 500 ? TRACE_STATUS_ERROR : TRACE_UNSET, NULL);
	r->span = NULL;
	trace_flush(NULL);
}

static struct serve_req *req_new(struct serve *s, struct MHD_Connection *conn,
                                 const char *method, const char *url)
{
	struct serve_req *r = calloc(1, sizeof *r);
	if (!r || !(r->path = strdup(url))) {
		free(r);
		return NULL;
	}
	atomic_init(&r->refs, 1);
	atomic_fetch_add(&s->active, 1);
	r->s = s;
	r->conn = conn;
	r->t0 = core_now_mono_ms();
	snprintf(r->method, sizeof r->method, "%s", method);
	core_buf_init(&r->body, s->cfg.max_body + 1);
	span_start(r);
	return r;
}

/* The first call: everything that can be decided before the body. */
static enum MHD_Result begin(struct serve_req *r, const char *url)
{
	enum MHD_Result ret = MHD_YES;
	const char *cl;
	if (atomic_load(&r->s->draining))
		return serve_error(r, "UNAVAILABLE", "agent-serve is shutting down");
	if (!authorized(r))
		return serve_error(r, "UNAUTHENTICATED", "a bearer token is required "
		                   "(Authorization: Bearer TOKEN)");
	if (r->s->cfg.auth_command) {
		int admitted = 0;
		ret = serve_auth_command(r, &admitted);
		if (!admitted)
			return ret;
	}
	if (route(r, url, &ret))
		return ret;
	cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
	/* too big to read: answered at once, the body left unread */
	if (cl && strtoull(cl, NULL, 10) > r->s->cfg.max_body && !(r->defer = 0))
		return serve_error_code(r, 413, "RESOURCE_EXHAUSTED", "the body has %s bytes, more than "
		                   "the limit of %zu (agent-serve --max-body)", cl,
		                   r->s->cfg.max_body);
	if (r->route == SERVE_TURN) {
		if ((unsigned)atomic_fetch_add(&r->s->turns, 1) >= r->s->cfg.max_turns) {
			atomic_fetch_sub(&r->s->turns, 1);
			return serve_error(r, "UNAVAILABLE", "%u turns are running, the limit "
			                   "(agent-serve --max-concurrent); retry later",
			                   r->s->cfg.max_turns);
		}
		r->turn_slot = 1;
	}
	return MHD_YES;
}

/* {"data": ..., "init"?: ...} */
static enum MHD_Result dispatch(struct serve_req *r)
{
	struct core_err e = { 0 };
	json_t *body = NULL, *data;
	enum MHD_Result ret;
	if (r->route == SERVE_LIST)
		return serve_list(r);
	if (r->body.len && !(body = jv_parse(r->body.p, r->body.len, "the request body", 0, &e)))
		return serve_error(r, "INVALID_ARGUMENT", "%s", e.msg);
	if (body && !json_is_object(body)) {
		json_decref(body);
		return serve_error(r, "INVALID_ARGUMENT", "the request body must be an "
		                   "object {\"data\": ...}");
	}
	data = json_object_get(body, "data");
	switch (r->route) {
	case SERVE_TURN:
		ret = serve_turn(r, data, json_object_get(body, "init"));
		break;
	case SERVE_SNAPSHOT:
		ret = serve_get_snapshot(r, data);
		break;
	case SERVE_WAIT:
		ret = serve_wait_snapshot(r, data);
		break;
	default:
		ret = serve_abort(r, data);
		break;
	}
	json_decref(body);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls)
{
	struct serve *s = cls;
	struct serve_req *r = *con_cls;
	(void)version;
	if (!r) {
		const char *cl, *te;
		if (!(r = req_new(s, conn, method, url)))
			return MHD_NO;
		*con_cls = r;
		cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
		te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Transfer-Encoding");
		r->defer = (cl && strtoull(cl, NULL, 10) > 0) || te;
		return begin(r, url);
	}
	if (r->answered) {
		/* an early answer: the body is read and dropped, then it goes */
		if (*upload_size) {
			*upload_size = 0;
			return MHD_YES;
		}
		return serve_answer_late(r);
	}
	if (*upload_size) {
		/* A body with no Content-Length (chunked) that grows past the
		 * limit: the connection is closed, nothing more is read. */
		if (r->body.len + *upload_size > s->cfg.max_body ||
		    core_buf_add(&r->body, upload, *upload_size) != CORE_OK) {
			r->code = 413;
			return MHD_NO;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	r->defer = 0;
	return dispatch(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
	struct serve *s = cls;
	struct serve_req *r = *con_cls;
	char ids[300] = "";
	(void)conn;
	if (!r)
		return;
	*con_cls = NULL;
	/* libmicrohttpd saw the client go between two reads of the stream
	 * (before client_gone() did): the turn is cancelled all the same, as
	 * its response is freed (SIGTERM, the row written aborted). */
	if (why != MHD_REQUEST_TERMINATED_COMPLETED_OK && r->streaming)
		r->cancelled = 1;
	if (*r->session)
		snprintf(ids + strlen(ids), sizeof ids - strlen(ids), " session=%s", r->session);
	if (*r->snapshot)
		snprintf(ids + strlen(ids), sizeof ids - strlen(ids), " snapshot=%s", r->snapshot);
	serve_log(s, "%s %s %d %lldms%s%s", r->method, r->path, r->code ? r->code : 500,
	          (long long)(core_now_mono_ms() - r->t0), ids,
	          r->cancelled ? " cancelled" :
	          why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " closed");
	span_end(r, r->code ? r->code : 500);
	serve_req_release(r);
}

/* ---- the daemon ---- */

static enum core_status parse_addr(const struct serve_config *cfg, struct sockaddr_storage *ss,
                                   int *v6, struct core_err *e)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	memset(ss, 0, sizeof *ss);
	*v6 = 0;
	if (inet_pton(AF_INET, cfg->host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)cfg->port);
		return CORE_OK;
	}
	if (inet_pton(AF_INET6, cfg->host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)cfg->port);
		*v6 = 1;
		return CORE_OK;
	}
	return core_fail(e, CORE_EUSAGE, "'%s' is not a numeric IPv4 or IPv6 address",
	                 cfg->host);
}

enum core_status serve_start(const struct serve_config *cfg, struct serve **out,
                             struct core_err *e)
{
	struct sockaddr_storage ss;
	struct serve *s;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD |
	                 MHD_USE_ITC | MHD_USE_ERROR_LOG;
	int v6 = 0;
	enum core_status st;
	*out = NULL;
	if (cfg->listen_fd < 0 && (st = parse_addr(cfg, &ss, &v6, e)) != CORE_OK)
		return st;
	if (!(s = calloc(1, sizeof *s)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	s->cfg = *cfg;
	atomic_init(&s->active, 0);
	atomic_init(&s->turns, 0);
	atomic_init(&s->stopping, 0);
	atomic_init(&s->draining, 0);
	pthread_mutex_init(&s->warm_mu, NULL);
	pthread_cond_init(&s->keep_cv, NULL);
	/* The address, or the socket given (each option's own argument type). */
	struct MHD_OptionItem where[] = {
		cfg->listen_fd >= 0
		? (struct MHD_OptionItem){ MHD_OPTION_LISTEN_SOCKET, cfg->listen_fd, NULL }
		: (struct MHD_OptionItem){ MHD_OPTION_SOCK_ADDR, 0, &ss },
		{ MHD_OPTION_END, 0, NULL },
	};
	errno = 0;
	s->d = MHD_start_daemon(flags | (v6 ? MHD_USE_IPv6 : 0), (uint16_t)cfg->port, NULL, NULL,
	                        on_request, s,
	                        MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, s,
	                        MHD_OPTION_ARRAY, where,
	                        MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections,
	                        MHD_OPTION_CONNECTION_TIMEOUT, cfg->idle_timeout_s,
	                        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SERVE_CONN_MEMORY,
	                        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
	                        MHD_OPTION_END);
	if (!s->d) {
		int err = errno;
		pthread_mutex_destroy(&s->warm_mu);
		pthread_cond_destroy(&s->keep_cv);
		free(s);
		if (cfg->listen_fd >= 0) {
			close(cfg->listen_fd);
			return core_fail(e, CORE_ESYS, "cannot serve the listening socket: %s",
			                 err ? strerror(err) : "libmicrohttpd refused to start");
		}
		return core_fail(e, CORE_ESYS, "cannot listen on %s:%u: %s", cfg->host, cfg->port,
		                 err ? strerror(err) : "libmicrohttpd refused to start");
	}
	serve_keeper_start(s);
	serve_warm(s);
	*out = s;
	return CORE_OK;
}

unsigned serve_port(const struct serve *s)
{
	const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	return i ? i->port : 0;
}

unsigned serve_stop(struct serve *s, int64_t drain_ms)
{
	int64_t end = core_now_mono_ms() + drain_ms;
	unsigned left;
	int fd = MHD_quiesce_daemon(s->d);
	/* Connections kept alive may still send requests: refused from now. */
	atomic_store(&s->draining, 1);
	serve_warm_end(s);
	while (atomic_load(&s->active) > 0 && core_now_mono_ms() < end)
		usleep(20 * 1000);
	left = (unsigned)atomic_load(&s->active);
	atomic_store(&s->stopping, 1);
	/* The cancelled turns end their children (SIGTERM, then the group is
	 * killed past the grace), so this wait is bounded by that grace. */
	end = core_now_mono_ms() + SERVE_KILL_GRACE_MS + 2000;
	while (atomic_load(&s->active) > 0 && core_now_mono_ms() < end)
		usleep(20 * 1000);
	MHD_stop_daemon(s->d);
	if (fd >= 0)
		close(fd);
	/* the last turns' children reaped; none is started ahead now */
	serve_keeper_stop(s);
	serve_warm_end(s);
	pthread_mutex_destroy(&s->warm_mu);
	pthread_cond_destroy(&s->keep_cv);
	free(s);
	return left;
}
