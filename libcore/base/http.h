/*
 * http.h - one HTTP POST with streaming body, retries and cancellation
 * (libcurl), as the model providers need it.
 *
 * http_post() sends a JSON body and hands the response body of a 2xx reply
 * to the caller's on_body function slice by slice as it arrives.  Around
 * that it does what every provider needs and none should repeat:
 *
 *  - timeouts: a connect timeout, an inactivity timeout (no byte for N
 *    ms) and, when the caller gives one, a total deadline for the whole
 *    call, retries and their waits included (a stream that trickles a
 *    keep-alive for ever is never idle); the idle timeout and the
 *    deadline are apart so that long silent thinking and long streams
 *    both work;
 *  - headers: one whose name or value holds a CR or LF (it would end the
 *    header and forge the next) fails the call before anything is sent,
 *    the message naming where the value came from, never the value;
 *  - retries on 408, 409, 429, 5xx, 529 and on transport failures (not
 *    on what another attempt cannot change: a certificate, a URL), with
 *    exponential backoff and jitter as the OpenAI and Anthropic SDKs do
 *    (first delay doubled, capped at 8 s, minus up to 25 %), honouring
 *    x-should-retry, retry-after-ms, Retry-After (seconds or an HTTP date;
 *    a wish above 60 s is ignored, as the SDKs do) and a hint from the
 *    error body (on_error), bounded in count and in total time, and only
 *    while nothing was emitted to the caller (emitted): a stream cut after
 *    output started is reported, never replayed;
 *  - cancellation: cancelled() is polled at least every 20 ms (while
 *    connecting, waiting for bytes and sleeping between attempts) and stops
 *    the transfer with CORE_ECANCELLED;
 *  - a non-2xx reply, or a 2xx reply whose Content-Type is application/json
 *    when a stream was expected, is collected (bounded) and given to
 *    on_error, which maps the provider's error document;
 *  - proxies from the environment (libcurl reads http_proxy, https_proxy,
 *    no_proxy itself) and CA settings as the curl tool reads them
 *    (CURL_CA_BUNDLE, SSL_CERT_FILE, SSL_CERT_DIR).
 *
 * Limits come from the environment, read by http_limits_from_env():
 * AGENTKIT_HTTP_CONNECT_TIMEOUT (default 30s), AGENTKIT_HTTP_IDLE_TIMEOUT
 * (default 10m), AGENTKIT_HTTP_RETRIES (default 3), AGENTKIT_HTTP_RETRY_BUDGET
 * (default 2m), AGENTKIT_HTTP_BACKOFF (first delay, default 500ms; doubled
 * each attempt, capped at 8s); durations as util.h spells them.
 *
 * Thread safety: libcurl is initialised once (pthread_once); one http_post
 * per thread at a time is fine.  Nothing here prints.
 */
#ifndef CORE_HTTP_H
#define CORE_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "status.h"

struct http_limits {
	int64_t connect_ms;
	int64_t idle_ms;
	int retries;             /* retries after the first attempt */
	int64_t budget_ms;       /* no retry is started past this much time */
	int64_t backoff_ms;      /* first backoff delay */
	int64_t total_ms;        /* the whole call's deadline; 0: none */
};

/* The defaults, overridden by the AGENTKIT_HTTP_* variables.  A malformed
 * variable is CORE_EUSAGE with a message naming it. */
enum core_status http_limits_from_env(struct http_limits *l, struct core_err *e);

/* What on_error learns about a failed reply and may adjust. */
struct http_error {
	long status;             /* HTTP status; 0 for a transport failure */
	const char *body;        /* the error body (NUL-terminated), may be "" */
	size_t body_len;
	const char *content_type;/* may be "" */
	int retryable;           /* in: the status-code decision; out: final */
	int64_t retry_after_ms;  /* in: from headers, -1 if none; out: final */
	const char *request_id;  /* x-request-id or request-id header, or "" */
};

struct http_call {
	const char *url;
	const char *const *headers;   /* "Name: value" strings, NULL-terminated */
	/* Where each header's value came from, for the message when it
	 * holds a line break ("the credential command's token",
	 * "OPENAI_API_KEY"): parallel to headers, NULL (or a NULL entry)
	 * for "header 'Name'". */
	const char *const *header_from;
	const char *body;             /* request body (JSON), kept for replays;
	                                 NULL sends a GET instead of the POST */
	size_t body_len;
	/* The Content-Type prefix a streamed reply has ("text/event-stream");
	 * NULL accepts any.  A 2xx reply with a different type, or with
	 * application/json, goes to on_error. */
	const char *stream_type;
	const char *what;             /* for messages: "openai" */
	struct http_limits limits;
	/* What limits.total_ms is, for the message when it passes ("the
	 * model timeout; set AGENTKIT_MODEL_TIMEOUT ..."); NULL: "total
	 * deadline". */
	const char *deadline_what;

	/* A new attempt starts: forget parse state from a previous one. */
	void (*on_attempt)(void *ctx);
	/* Bytes of a 2xx body.  Non-OK stops the transfer; that status and
	 * the message in e are http_post()'s result. */
	enum core_status (*on_body)(void *ctx, const char *p, size_t n,
	                            struct core_err *e);
	/*
	 * A failed reply: fill e with the mapped status and the provider's
	 * message (never a credential) and return that status; may change
	 * err->retryable (a quota 429 is final) and err->retry_after_ms (a
	 * body hint).  Also called for a 2xx reply of the wrong type, with
	 * retryable 0.
	 */
	enum core_status (*on_error)(void *ctx, struct http_error *err,
	                             struct core_err *e);
	int (*cancelled)(void *ctx);  /* may be NULL */
	/*
	 * Retry decisions (may be NULL, then "any 2xx body byte was passed
	 * on" counts as output): non-zero once something of this attempt
	 * reached the caller, after which the attempt is never replayed.
	 * Until then a transport failure, or an on_body/on_end failure whose
	 * status is UNAVAILABLE, RESOURCE_EXHAUSTED or DEADLINE_EXCEEDED (an
	 * overloaded error as a stream's first event, a stream cut short), is
	 * retried like a 503.
	 */
	int (*emitted)(void *ctx);
	/* A 2xx body ended: non-OK when it was incomplete (may be NULL). */
	enum core_status (*on_end)(void *ctx, struct core_err *e);
	void *ctx;
	/* Non-zero: a transport failure is final; only what on_error marks
	 * retryable is tried again (the trace exporter's rule). */
	int retry_status_only;
	/* TLS files beside the CA variables (NULL: none): a CA bundle that
	 * wins over CURL_CA_BUNDLE, a client certificate and its key. */
	const char *ca_file, *cert_file, *key_file;
};

/* What happened, for callers and tests. */
struct http_result {
	long status;             /* HTTP status of the last attempt (0: none) */
	int attempts;            /* requests sent */
	size_t body_bytes;       /* 2xx body bytes passed to on_body */
};

/*
 * Run the call.  CORE_OK when a 2xx body was read to its end (the caller's
 * parser decides whether it was complete).  Otherwise: the status from
 * on_body or on_error, CORE_ECANCELLED, CORE_EUNAVAILABLE for transport
 * failures and the inactivity timeout, CORE_EDEADLINE when limits.total_ms
 * passed (never retried; a retry whose wait would end past it is not
 * started, the last failure is the result then), CORE_EINVAL for a header
 * with a line break, CORE_ENOMEM.  The error body given to on_error has
 * been made valid UTF-8 (utf8.h), so a stray byte never hides the
 * provider's error document.  res may be NULL.
 */
enum core_status http_post(const struct http_call *c, struct http_result *res,
                           struct core_err *e);

/* Parse a Retry-After value (seconds, fractional allowed, or an HTTP
 * date) into milliseconds from now; -1 if unparseable.  Exposed for tests. */
int64_t http_parse_retry_after(const char *v);

/*
 * A URL fit for a message (an error, a log line): the userinfo
 * ("user:password@") shows as "***@", every query value as "***" (the
 * names stay: "?alt=***&key=***"), the fragment is dropped; scheme, host,
 * port and path stay.  Writes at most n bytes, NUL included, to out
 * (truncating).  Every URL agentkit puts in a message goes through here.
 */
void core_url_redact(const char *url, char *out, size_t n);

/*
 * The same for every URL ("scheme://..." up to a space or quote) inside a
 * message of buffer size n, in place: for texts that may quote a URL (a
 * libcurl error, a provider's error body).  Without memory the text is
 * left as is.
 */
void core_url_redact_text(char *msg, size_t n);

/*
 * libcurl itself, for a transport that drives its own transfers (MCP's
 * HTTP transports: long-lived streams beside requests, on one multi
 * handle).  libcurl is loaded on first use (above); http_curl() loads it
 * and gives its functions, or NULL with CORE_EUNAVAILABLE saying why.
 * Thread safety as libcurl's: one multi handle, one thread at a time
 * (multi_wakeup from any).
 */
struct http_curl {
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	const char *(*easy_strerror)(CURLcode);
	CURLcode (*easy_pause)(CURL *, int);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_cleanup)(CURLM *);
	CURLMcode (*multi_add_handle)(CURLM *, CURL *);
	CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
	CURLMcode (*multi_perform)(CURLM *, int *);
	CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned int, int, int *);
	CURLMcode (*multi_wakeup)(CURLM *);
	CURLMsg *(*multi_info_read)(CURLM *, int *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
};
const struct http_curl *http_curl(struct core_err *e);

/* The options every agentkit transfer has (http_post()'s): no signals,
 * connect timeout, TCP keep-alive, the user agent, http and https only,
 * the curl tool's CA variables; errors into errbuf (CURL_ERROR_SIZE). */
void http_easy_defaults(CURL *h, int64_t connect_ms, char *errbuf);

#endif
