/* http.c - streaming POST over libcurl with timeouts, retries, cancellation. */
#include "http.h"

#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "buf.h"
#include "utf8.h"
#include "util.h"

#ifndef AGENTKIT_VERSION
#define AGENTKIT_VERSION "0"
#endif

/* How often cancellation and the inactivity clock are checked. */
#define POLL_MS 20
/* Longest error body kept; the rest is dropped (messages need the start).
 * Its buffer has room for it made valid UTF-8 (3 bytes per bad byte). */
#define ERR_BODY_MAX (1u << 20)
#define ERR_BODY_ROOM (3u * ERR_BODY_MAX)
#define BACKOFF_CAP_MS 8000
/* A server's Retry-After above this is ignored for the backoff (the
 * Stainless SDKs' rule): waiting minutes inside one call helps nobody. */
#define RETRY_AFTER_MAX_MS 60000

/*
 * libcurl is loaded with the first request rather than at start-up: with
 * the thirty-odd libraries it brings it is most of the start-up time of
 * agent-run and agent-snap (about 4 ms), and a run with an offline model,
 * or a command that never calls a model, does not need it.
 */
#define LIBCURL "libcurl.so.4"
static struct {
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	const char *(*easy_strerror)(CURLcode);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_cleanup)(CURLM *);
	CURLMcode (*multi_add_handle)(CURLM *, CURL *);
	CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
	CURLMcode (*multi_perform)(CURLM *, int *);
	CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned int, int, int *);
	CURLMsg *(*multi_info_read)(CURLM *, int *);
	const char *(*multi_strerror)(CURLMcode);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	time_t (*getdate)(const char *, const time_t *);
	CURLcode (*easy_pause)(CURL *, int);
	CURLMcode (*multi_wakeup)(CURLM *);
	int ok;
	char why[256];          /* why not, when !ok */
} cu;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void init_curl(void)
{
	static const char *const names[] = {
		"curl_global_init", "curl_easy_init", "curl_easy_cleanup", "curl_easy_setopt",
		"curl_easy_getinfo", "curl_easy_strerror", "curl_multi_init",
		"curl_multi_cleanup", "curl_multi_add_handle", "curl_multi_remove_handle",
		"curl_multi_perform", "curl_multi_poll", "curl_multi_info_read",
		"curl_multi_strerror", "curl_slist_append", "curl_slist_free_all",
		"curl_getdate", "curl_easy_pause", "curl_multi_wakeup",
	};
	void **slots[] = {
		(void **)&cu.global_init, (void **)&cu.easy_init, (void **)&cu.easy_cleanup,
		(void **)&cu.easy_setopt, (void **)&cu.easy_getinfo, (void **)&cu.easy_strerror,
		(void **)&cu.multi_init, (void **)&cu.multi_cleanup, (void **)&cu.multi_add_handle,
		(void **)&cu.multi_remove_handle, (void **)&cu.multi_perform,
		(void **)&cu.multi_poll, (void **)&cu.multi_info_read, (void **)&cu.multi_strerror,
		(void **)&cu.slist_append, (void **)&cu.slist_free_all, (void **)&cu.getdate,
		(void **)&cu.easy_pause, (void **)&cu.multi_wakeup,
	};
	CURLcode rc;
	if (!core_dl_load(LIBCURL, names, slots, sizeof names / sizeof *names, cu.why,
	                  sizeof cu.why))
		return;
	if ((rc = cu.global_init(CURL_GLOBAL_DEFAULT)) != CURLE_OK) {
		snprintf(cu.why, sizeof cu.why, "%s", cu.easy_strerror(rc));
		return;
	}
	cu.ok = 1;
}

/*
 * One multi handle per thread, kept between calls: the easy handles added
 * to a multi handle share its connection cache, so the model calls of a
 * tool loop or of a multi-turn session reuse the open (TLS) connection
 * instead of a new handshake each.  A thread's handle is freed when the
 * thread exits; the main thread's lives as long as the process.
 *
 * A forked child (the detached worker, which closes the fds it inherits,
 * or a tool before its exec) abandons the handle untouched: its sockets
 * are the parent's, or closed and their numbers soon reused by other
 * files, so libcurl must never look at them again.  The child starts a
 * pool of its own when it calls.
 */
static pthread_key_t pool_key;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static int pool_ok;
static CURLM *pool_abandoned;   /* kept reachable, never used */

static void pool_free(void *m)
{
	cu.multi_cleanup(m);
}

static void pool_forget(void)
{
	CURLM *m = pthread_getspecific(pool_key);
	/* The worker is forked twice (it daemonizes): the second fork has no
	 * handle of its own yet and must not forget the first one's. */
	if (m)
		pool_abandoned = m;
	pthread_setspecific(pool_key, NULL);
}

static void pool_init(void)
{
	pool_ok = pthread_key_create(&pool_key, pool_free) == 0 &&
	          pthread_atfork(NULL, NULL, pool_forget) == 0;
}

/* This thread's multi handle (NULL when out of memory); *own says the
 * caller must clean it up (no pool could be kept). */
static CURLM *pool_multi(int *own)
{
	CURLM *m;
	pthread_once(&pool_once, pool_init);
	if (pool_ok && (m = pthread_getspecific(pool_key))) {
		*own = 0;
		return m;
	}
	m = cu.multi_init();
	*own = !pool_ok || pthread_setspecific(pool_key, m) != 0;
	return m;
}

static enum core_status env_ms(const char *name, int64_t *out, struct core_err *e)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return CORE_OK;
	if (core_parse_duration(v, out, e)) {
		core_err_prefix(e, "%s", name);
		return e ? e->st : CORE_EUSAGE;
	}
	return CORE_OK;
}

enum core_status http_limits_from_env(struct http_limits *l, struct core_err *e)
{
	const char *v;
	enum core_status st;
	l->connect_ms = 30000;
	l->idle_ms = 600000;
	l->retries = 3;
	l->budget_ms = 120000;
	l->backoff_ms = 500;
	if ((st = env_ms("AGENTKIT_HTTP_CONNECT_TIMEOUT", &l->connect_ms, e)) ||
	    (st = env_ms("AGENTKIT_HTTP_IDLE_TIMEOUT", &l->idle_ms, e)) ||
	    (st = env_ms("AGENTKIT_HTTP_RETRY_BUDGET", &l->budget_ms, e)) ||
	    (st = env_ms("AGENTKIT_HTTP_BACKOFF", &l->backoff_ms, e)))
		return st;
	v = getenv("AGENTKIT_HTTP_RETRIES");
	if (v && *v) {
		char *end;
		long n = strtol(v, &end, 10);
		if (*end || n < 0 || n > 100)
			return core_fail(e, CORE_EUSAGE,
			                 "AGENTKIT_HTTP_RETRIES: '%s' is not a count from 0 to 100", v);
		l->retries = (int)n;
	}
	return CORE_OK;
}

int64_t http_parse_retry_after(const char *v)
{
	char *end;
	double s;
	while (*v == ' ' || *v == '\t')
		v++;
	if (!*v)
		return -1;
	s = strtod(v, &end);
	if (end != v) {
		while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
			end++;
		if (!*end)
			return s < 0 ? -1 : (int64_t)(s * 1000.0);
	}
	pthread_once(&curl_once, init_curl);
	if (cu.ok) {
		time_t t = cu.getdate(v, NULL);
		if (t == (time_t)-1)
			return -1;
		t -= time(NULL);
		return t < 0 ? 0 : (int64_t)t * 1000;
	}
	return -1;
}

/* One attempt's state, shared with the libcurl callbacks. */
struct attempt {
	const struct http_call *c;
	CURL *h;
	int started;             /* first body byte seen: mode decided */
	int err_mode;            /* collecting an error document */
	long status;
	char ctype[128];
	int64_t retry_after_ms;  /* from headers, -1 none */
	int should_retry;        /* x-should-retry: -1 absent, 0, 1 */
	char request_id[128];    /* x-request-id / request-id, or "" */
	int64_t last_rx;         /* monotonic ms of the last byte received */
	size_t passed;           /* 2xx body bytes given to on_body */
	struct core_buf errbody;
	enum core_status body_st;/* on_body's failure, if any */
	struct core_err *e;
};

static int ct_is(const char *ct, const char *prefix)
{
	return !strncasecmp(ct, prefix, strlen(prefix));
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct attempt *a = ud;
	size_t len = size * n, nl, vl;
	const char *colon;
	char val[256];
	a->last_rx = core_now_mono_ms();
	if (len >= 5 && !memcmp(p, "HTTP/", 5)) {
		/* A new response (after 100 Continue, say): forget the last. */
		a->ctype[0] = 0;
		a->retry_after_ms = -1;
		a->should_retry = -1;
		a->request_id[0] = 0;
		return len;
	}
	colon = memchr(p, ':', len);
	if (!colon)
		return len;
	nl = (size_t)(colon - p);
	colon++;
	while (colon < p + len && (*colon == ' ' || *colon == '\t'))
		colon++;
	vl = (size_t)(p + len - colon);
	while (vl && (colon[vl - 1] == '\r' || colon[vl - 1] == '\n' || colon[vl - 1] == ' '))
		vl--;
	if (vl >= sizeof val)
		vl = sizeof val - 1;
	memcpy(val, colon, vl);
	val[vl] = 0;
#define IS(name) (nl == sizeof(name) - 1 && !strncasecmp(p, name, nl))
	if (IS("content-type")) {
		/* Longer content types are cut; only the media type is read. */
		size_t cn = vl < sizeof a->ctype - 1 ? vl : sizeof a->ctype - 1;
		memcpy(a->ctype, val, cn);
		a->ctype[cn] = 0;
	} else if (IS("retry-after-ms")) {
		char *end;
		double ms = strtod(val, &end);
		if (end != val && ms >= 0)
			a->retry_after_ms = (int64_t)ms;
	} else if (IS("retry-after")) {
		/* retry-after-ms, when also present, is more precise and wins. */
		if (a->retry_after_ms < 0)
			a->retry_after_ms = http_parse_retry_after(val);
	} else if (IS("x-request-id") || IS("request-id")) {
		snprintf(a->request_id, sizeof a->request_id, "%.127s", val);
	} else if (IS("x-should-retry")) {
		if (!strcasecmp(val, "true"))
			a->should_retry = 1;
		else if (!strcasecmp(val, "false"))
			a->should_retry = 0;
	}
#undef IS
	return len;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
	struct attempt *a = ud;
	size_t len = size * n;
	a->last_rx = core_now_mono_ms();
	if (!a->started) {
		const char *want = a->c->stream_type;
		a->started = 1;
		cu.easy_getinfo(a->h, CURLINFO_RESPONSE_CODE, &a->status);
		if (a->status < 200 || a->status > 299)
			a->err_mode = 1;
		else if (want && a->ctype[0] && !ct_is(a->ctype, want))
			a->err_mode = 1;
	}
	if (a->err_mode) {
		size_t room = ERR_BODY_MAX - a->errbody.len;
		core_buf_add(&a->errbody, p, len < room ? len : room);
		return len;
	}
	a->passed += len;
	a->body_st = a->c->on_body(a->c->ctx, p, len, a->e);
	return a->body_st ? 0 : len;
}

static int is_cancelled(const struct http_call *c)
{
	return c->cancelled && c->cancelled(c->ctx);
}

/* Sleep ms, waking every POLL_MS to check cancellation. */
static enum core_status nap(const struct http_call *c, int64_t ms, struct core_err *e)
{
	int64_t end = core_now_mono_ms() + ms;
	for (;;) {
		int64_t left = end - core_now_mono_ms();
		struct timespec ts;
		if (is_cancelled(c))
			return core_fail(e, CORE_ECANCELLED, "%s: cancelled", c->what);
		if (left <= 0)
			return CORE_OK;
		if (left > POLL_MS)
			left = POLL_MS;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)left * 1000000L;
		nanosleep(&ts, NULL);
	}
}

static int status_retryable(long s)
{
	return s == 408 || s == 409 || s == 429 || (s >= 500 && s <= 599);
}

/* ---- URLs in messages ---- */

/* A bounded writer: keeps what fits (n - 1 bytes), always terminated. */
struct wr {
	char *p;
	size_t n, len;
};

static void wr_put(struct wr *w, const char *s, size_t len)
{
	size_t room = w->n - 1 - w->len;
	if (len > room)
		len = room;
	memcpy(w->p + w->len, s, len);
	w->len += len;
	w->p[w->len] = 0;
}

/* Write url[0, len) redacted (core_url_redact). */
static void redact_url(struct wr *w, const char *url, size_t len)
{
	const char *end = url + len, *p = url, *sep = NULL;
	for (const char *q = url; q + 3 <= end; q++)
		if (!strncmp(q, "://", 3)) {
			sep = q;
			break;
		}
	if (sep && memchr(url, '/', (size_t)(sep - url)) == NULL) {
		wr_put(w, url, (size_t)(sep + 3 - url));
		p = sep + 3;
	}
	/* The authority: userinfo is everything up to its last '@'. */
	const char *auth_end = p;
	while (auth_end < end && !strchr("/?#", *auth_end))
		auth_end++;
	const char *at = NULL;
	for (const char *q = p; q < auth_end; q++)
		if (*q == '@')
			at = q;
	if (at) {
		wr_put(w, "***", 3);
		p = at;
	}
	const char *path_end = p;
	while (path_end < end && *path_end != '?' && *path_end != '#')
		path_end++;
	wr_put(w, p, (size_t)(path_end - p));
	if (path_end == end || *path_end == '#')
		return;         /* the fragment is dropped */
	/* The query: names kept, every value "***". */
	p = path_end;
	while (p < end && *p != '#') {
		const char *param = p + 1, *stop = param;
		while (stop < end && !strchr("&;#", *stop))
			stop++;
		wr_put(w, p, 1);        /* '?', '&' or ';' */
		const char *eq = memchr(param, '=', (size_t)(stop - param));
		if (eq) {
			wr_put(w, param, (size_t)(eq + 1 - param));
			if (eq + 1 < stop)
				wr_put(w, "***", 3);
		} else if (stop > param) {
			wr_put(w, "***", 3);
		}
		p = stop;
	}
}

void core_url_redact(const char *url, char *out, size_t n)
{
	struct wr w = { out, n, 0 };
	if (!n)
		return;
	out[0] = 0;
	redact_url(&w, url, strlen(url));
}

void core_url_redact_text(char *msg, size_t n)
{
	char *copy;
	const char *p, *s;
	size_t len = strlen(msg);
	if (!strstr(msg, "://") || !(copy = malloc(len + 1)))
		return;
	memcpy(copy, msg, len + 1);
	struct wr w = { msg, n, 0 };
	msg[0] = 0;
	for (p = copy; (s = strstr(p, "://"));) {
		/* Back over the scheme ([A-Za-z][A-Za-z0-9+.-]*), forward to the
		 * end of the token. */
		const char *b = s;
		while (b > p && (isalnum((unsigned char)b[-1]) || strchr("+.-", b[-1])))
			b--;
		while (b < s && !isalpha((unsigned char)*b))
			b++;
		const char *e = s + 3;
		while (*e && !isspace((unsigned char)*e) && !strchr("\"'<>`", *e))
			e++;
		while (e > s + 3 && strchr(".,:;!?)]", e[-1]))
			e--;        /* the sentence's punctuation, not the URL's */
		wr_put(&w, p, (size_t)(b - p));
		if (b == s)
			wr_put(&w, s, (size_t)(e - s));     /* no scheme: not a URL */
		else
			redact_url(&w, b, (size_t)(e - b));
		p = e;
	}
	wr_put(&w, p, strlen(p));
	free(copy);
}

static void set_common(CURL *h, const struct http_call *c, struct curl_slist *hdrs,
                       struct attempt *a, char *errbuf)
{
	cu.easy_setopt(h, CURLOPT_URL, c->url);
	if (c->body) {
		cu.easy_setopt(h, CURLOPT_POST, 1L);
		cu.easy_setopt(h, CURLOPT_POSTFIELDS, c->body);
		cu.easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->body_len);
	} else {
		cu.easy_setopt(h, CURLOPT_HTTPGET, 1L);
	}
	cu.easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	cu.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	cu.easy_setopt(h, CURLOPT_WRITEDATA, a);
	cu.easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	cu.easy_setopt(h, CURLOPT_HEADERDATA, a);
	http_easy_defaults(h, c->limits.connect_ms, errbuf);
	cu.easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
	if (c->ca_file)
		cu.easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
	if (c->cert_file)
		cu.easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
	if (c->key_file)
		cu.easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
}

enum outcome { DONE, RETRY, FAIL };

/* Transport failures that are configuration, not weather. */
static int transport_permanent(CURLcode rc)
{
	switch (rc) {
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_URL_MALFORMAT:
	case CURLE_NOT_BUILT_IN:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
		return 1;
	default:
		return 0;
	}
}

__attribute__((format(printf, 2, 3)))
static void err_suffix(struct core_err *e, const char *fmt, ...)
{
	va_list ap;
	size_t n;
	if (!e)
		return;
	n = strlen(e->msg);
	va_start(ap, fmt);
	vsnprintf(e->msg + n, sizeof e->msg - n, fmt, ap);
	va_end(ap);
}

/* Did this attempt hand anything to the caller?  Then it is never replayed. */
static int emitted_any(const struct http_call *c, const struct attempt *a)
{
	return c->emitted ? c->emitted(c->ctx) : a->passed > 0;
}

static const char *deadline_what(const struct http_call *c)
{
	return c->deadline_what ? c->deadline_what : "total deadline";
}

/* Why transfer() stopped: the transfer ended, or attempt_once() gave up. */
enum halt { RAN, CANCELLED, IDLE, LATE };

/*
 * Drive the transfer on m until it ends, is cancelled, has had no data
 * for the idle limit or passes deadline; *rc is its result when it ended
 * (errbuf the text of a failure of the multi handle).
 */
static enum halt transfer(const struct http_call *c, CURL *h, CURLM *m,
                          const struct attempt *a, int64_t deadline,
                          char *errbuf, CURLcode *rc)
{
	enum halt why = RAN;
	int running = 1, left;
	CURLMsg *msg;

	for (;;) {
		CURLMcode mc = cu.multi_perform(m, &running);
		if (mc != CURLM_OK) {
			*rc = CURLE_OUT_OF_MEMORY;
			snprintf(errbuf, CURL_ERROR_SIZE, "%s", cu.multi_strerror(mc));
			break;
		}
		if (!running)
			break;
		if (is_cancelled(c)) {
			why = CANCELLED;
			break;
		}
		if (c->limits.idle_ms > 0 &&
		    core_now_mono_ms() - a->last_rx > c->limits.idle_ms) {
			why = IDLE;
			break;
		}
		if (deadline && core_now_mono_ms() >= deadline) {
			why = LATE;
			break;
		}
		cu.multi_poll(m, NULL, 0, POLL_MS, NULL);
	}
	while ((msg = cu.multi_info_read(m, &left)))
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == h)
			*rc = msg->data.result;
	return why;
}

/* An error reply (or a 2xx of another type than the stream's), handed to
 * on_error(): RETRY or FAIL as it judges, *delay the server's wish. */
static enum outcome error_reply(const struct http_call *c, struct attempt *a,
                                enum core_status *st, int64_t *delay,
                                struct core_err *e)
{
	struct http_error he;
	int twoxx = a->status >= 200 && a->status <= 299;

	/* Outside bytes: valid UTF-8 before anyone parses or quotes them
	 * (a byte 0xFF would otherwise make the JSON unreadable and
	 * lose the provider's message and class).  Without memory the
	 * body stays as it came; the message is still made valid. */
	core_buf_fix_text(&a->errbody);
	he.status = a->status;
	he.body = a->errbody.p ? a->errbody.p : "";
	he.body_len = a->errbody.len;
	he.content_type = a->ctype;
	he.retryable = !twoxx && status_retryable(a->status);
	if (!twoxx && a->should_retry >= 0)
		he.retryable = a->should_retry;
	he.retry_after_ms = a->retry_after_ms;
	he.request_id = a->request_id;
	*st = c->on_error(c->ctx, &he, e);
	*delay = he.retry_after_ms;
	core_buf_release(&a->errbody);
	return he.retryable ? RETRY : FAIL;
}

/* One request, given up at deadline (monotonic ms; 0: none).  Returns DONE
 * (OK), FAIL (st final) or RETRY (st/e hold the error; *delay the server's
 * wish or -1). */
static enum outcome attempt_once(const struct http_call *c, CURL *h, CURLM *m,
                                 struct curl_slist *hdrs, int64_t deadline,
                                 struct http_result *res, enum core_status *st,
                                 int64_t *delay, struct core_err *e)
{
	struct attempt a;
	char errbuf[CURL_ERROR_SIZE] = "";
	char where[512];
	CURLcode rc = CURLE_OK;
	enum halt why;
	memset(&a, 0, sizeof a);
	a.c = c;
	a.h = h;
	a.retry_after_ms = -1;
	a.should_retry = -1;
	a.e = e;
	core_buf_init(&a.errbody, ERR_BODY_ROOM);
	a.last_rx = core_now_mono_ms();
	*delay = -1;
	core_url_redact(c->url, where, sizeof where);

	if (c->on_attempt)
		c->on_attempt(c->ctx);
	set_common(h, c, hdrs, &a, errbuf);
	res->attempts++;
	cu.multi_add_handle(m, h);
	why = transfer(c, h, m, &a, deadline, errbuf, &rc);
	cu.multi_remove_handle(m, h);
	if (!a.started)
		cu.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a.status);
	res->status = a.status;
	res->body_bytes += a.passed;

	if (why == CANCELLED) {
		*st = core_fail(e, CORE_ECANCELLED, "%s: cancelled", c->what);
		goto fail;
	}
	if (why == LATE && !a.body_st) {
		/* The call's whole time is used up: another attempt has none. */
		*st = core_fail(e, CORE_EDEADLINE, "%s: no complete reply from %s within %lld ms (%s)",
		                c->what, where, (long long)c->limits.total_ms, deadline_what(c));
		goto fail;
	}
	if (!a.body_st && why != IDLE && rc == CURLE_OK && !a.err_mode && c->on_end &&
	    a.status >= 200 && a.status <= 299)
		a.body_st = c->on_end(c->ctx, e);
	if (a.body_st) {
		*st = a.body_st;
		/* A stream that failed before anything reached the caller (an
		 * overloaded error as the first event, a cut) is tried again. */
		if (!emitted_any(c, &a) && (a.body_st == CORE_EUNAVAILABLE ||
		    a.body_st == CORE_EEXHAUSTED || a.body_st == CORE_EDEADLINE))
			return RETRY;
		goto fail;
	}
	if (why == IDLE) {
		*st = core_fail(e, CORE_EUNAVAILABLE,
		                "%s: no data from %s for %lld ms (inactivity timeout)",
		                c->what, where, (long long)c->limits.idle_ms);
		goto transport;
	}
	if (rc != CURLE_OK && !(a.err_mode && a.status)) {
		*st = core_fail(e, CORE_EUNAVAILABLE, "%s: %s: %s", c->what, where,
		                errbuf[0] ? errbuf : cu.easy_strerror(rc));
		goto transport;
	}
	if (a.err_mode || a.status < 200 || a.status > 299)
		return error_reply(c, &a, st, delay, e);
	core_buf_release(&a.errbody);
	*st = CORE_OK;
	return DONE;
transport:
	core_buf_release(&a.errbody);
	/* Retry only while nothing of the body was passed on, and never what
	 * another attempt cannot change (a certificate, a bad URL). */
	return emitted_any(c, &a) || transport_permanent(rc) || c->retry_status_only ? FAIL : RETRY;
fail:
	core_buf_release(&a.errbody);
	return FAIL;
}

/*
 * Header i holds a line break: refused, naming where its value came from
 * (the caller's header_from) or the header's name, never the value.  A
 * value with a source is a credential (a key, a token): one that cannot
 * be sent is UNAUTHENTICATED, as a missing key or a token with a NUL is;
 * any other header is the caller's malformed configuration.
 */
static enum core_status bad_header(const struct http_call *c, size_t i, struct core_err *e)
{
	const char *from = c->header_from ? c->header_from[i] : NULL;
	const char *h = c->headers[i];
	if (from)
		return core_fail(e, CORE_EUNAUTH, "%s: %s holds a line break (CR or LF), which would "
		                 "end its header: nothing was sent", c->what, from);
	return core_fail(e, CORE_EINVAL, "%s: the value of header '%.*s' holds a line break (CR "
	                 "or LF), which would end the header: nothing was sent", c->what,
	                 (int)strcspn(h, ":\r\n"), h);
}

enum core_status http_post(const struct http_call *c, struct http_result *res,
                           struct core_err *e)
{
	struct http_result dummy;
	struct curl_slist *hdrs = NULL;
	enum core_status st = CORE_OK;
	int64_t start = core_now_mono_ms(), deadline = 0;
	unsigned seed = (unsigned)core_now_ns() ^ (unsigned)(uintptr_t)&dummy;
	CURL *h = NULL;
	CURLM *m = NULL;
	int retry, own_m = 0;

	if (!res)
		res = &dummy;
	memset(res, 0, sizeof *res);
	pthread_once(&curl_once, init_curl);
	if (!cu.ok)
		return core_fail(e, CORE_ESYS, "%s: cannot use libcurl: %s", c->what, cu.why);
	for (const char *const *p = c->headers; p && *p; p++) {
		struct curl_slist *n;
		if (strpbrk(*p, "\r\n")) {
			st = bad_header(c, (size_t)(p - c->headers), e);
			goto out;
		}
		n = cu.slist_append(hdrs, *p);
		if (!n) {
			st = core_fail(e, CORE_ENOMEM, "%s: out of memory", c->what);
			goto out;
		}
		hdrs = n;
	}
	/* No "Expect: 100-continue" round trip for large bodies. */
	{
		struct curl_slist *n = cu.slist_append(hdrs, "Expect:");
		if (!n) {
			st = core_fail(e, CORE_ENOMEM, "%s: out of memory", c->what);
			goto out;
		}
		hdrs = n;
	}
	h = cu.easy_init();
	m = pool_multi(&own_m);
	if (!h || !m) {
		st = core_fail(e, CORE_ENOMEM, "%s: cannot create a libcurl handle", c->what);
		goto out;
	}
	if (c->limits.total_ms > 0)
		deadline = start + c->limits.total_ms;
	for (retry = 0;; retry++) {
		int64_t delay, backoff;
		enum outcome o = attempt_once(c, h, m, hdrs, deadline, res, &st, &delay, e);
		if (o != RETRY)
			break;
		if (retry >= c->limits.retries) {
			if (retry)
				err_suffix(e, " (gave up after %d attempts)", retry + 1);
			break;
		}
		backoff = c->limits.backoff_ms;
		for (int i = 0; i < retry && backoff < BACKOFF_CAP_MS; i++)
			backoff *= 2;
		if (backoff > BACKOFF_CAP_MS)
			backoff = BACKOFF_CAP_MS;
		/* Jitter: take off up to a quarter, so clients spread out. */
		backoff -= (int64_t)((double)backoff * 0.25 * (rand_r(&seed) / (RAND_MAX + 1.0)));
		if (delay < 0 || delay > RETRY_AFTER_MAX_MS)
			delay = backoff;
		if (core_now_mono_ms() + delay - start > c->limits.budget_ms) {
			err_suffix(e, " (gave up after %d attempts: waiting %lld ms more would pass "
			           "the retry budget of %lld ms)", retry + 1, (long long)delay,
			           (long long)c->limits.budget_ms);
			break;
		}
		if (deadline && core_now_mono_ms() + delay >= deadline) {
			err_suffix(e, " (gave up after %d attempts: waiting %lld ms more would pass "
			           "the deadline of %lld ms)", retry + 1, (long long)delay,
			           (long long)c->limits.total_ms);
			break;
		}
		if ((st = nap(c, delay, e)))
			break;
	}
out:
	if (m && own_m)
		cu.multi_cleanup(m);
	if (h)
		cu.easy_cleanup(h);
	cu.slist_free_all(hdrs);
	return st;
}

/* ---- libcurl for the other transports (http.h) ---- */

static struct http_curl api;

const struct http_curl *http_curl(struct core_err *e)
{
	pthread_once(&curl_once, init_curl);
	if (!cu.ok) {
		core_fail(e, CORE_EUNAVAILABLE, "cannot load %s: %s", LIBCURL, cu.why);
		return NULL;
	}
	api = (struct http_curl){
		cu.easy_init, cu.easy_cleanup, cu.easy_setopt, cu.easy_getinfo,
		cu.easy_strerror, cu.easy_pause, cu.multi_init, cu.multi_cleanup,
		cu.multi_add_handle, cu.multi_remove_handle, cu.multi_perform, cu.multi_poll,
		cu.multi_wakeup, cu.multi_info_read, cu.slist_append, cu.slist_free_all,
	};
	return &api;
}

void http_easy_defaults(CURL *h, int64_t connect_ms, char *errbuf)
{
	const char *ca;
	cu.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	cu.easy_setopt(h, CURLOPT_NOPROGRESS, 1L);
	cu.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
	cu.easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	cu.easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	cu.easy_setopt(h, CURLOPT_USERAGENT, "agentkit/" AGENTKIT_VERSION);
	cu.easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	cu.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	/* The curl tool's CA variables; libcurl itself only knows its
	 * compiled-in defaults.  Proxy variables libcurl reads itself. */
	if ((ca = getenv("CURL_CA_BUNDLE")) && *ca)
		cu.easy_setopt(h, CURLOPT_CAINFO, ca);
	else if ((ca = getenv("SSL_CERT_FILE")) && *ca)
		cu.easy_setopt(h, CURLOPT_CAINFO, ca);
	if ((ca = getenv("SSL_CERT_DIR")) && *ca)
		cu.easy_setopt(h, CURLOPT_CAPATH, ca);
}
