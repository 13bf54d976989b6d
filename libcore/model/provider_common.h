/*
 * provider_common.h - what the HTTP model providers (provider_*.c) share:
 * keys and base URLs from the environment, the streamed-output
 * accumulator (provider_common.c); the HTTP/SSE plumbing and status
 * mapping (provider_http.c); the generate skeleton (prov_generate,
 * provider_generate.c); the --list-models rows (provider_list.c); small
 * Genkit message helpers and the walk of a conversation by role
 * (provider_msg.c).
 *
 * Ownership: functions returning char * or json_t * return new memory or a
 * new reference for the caller; const json_t * arguments are borrowed.
 */
#ifndef CORE_PROVIDER_COMMON_H
#define CORE_PROVIDER_COMMON_H

#include <jansson.h>

#include "../base/http.h"
#include "model.h"
#include "../base/sse.h"

/* Longest streamed event or NDJSON line accepted (base64 media can be big). */
#define PROV_EVENT_MAX ((size_t)64 << 20)
/* Most body bytes one model response may bring (all its text, reasoning,
 * tool arguments and framing), unless AGENTKIT_HTTP_MAX_RESPONSE says
 * otherwise: past it the call fails, INTERNAL, without a retry. */
#define PROV_RESPONSE_MAX ((size_t)64 << 20)
/* The longest one model call may take, retries included, unless
 * AGENTKIT_MODEL_TIMEOUT (agent-run --model-timeout) or an endpoint's
 * "timeout" says otherwise: past it the call fails, DEADLINE_EXCEEDED.
 * Ten minutes, the OpenAI and Anthropic SDKs' request timeout: a slow
 * reasoning model's whole answer fits, a stream that trickles keep-alives
 * for ever does not (the idle timeout never fires on it). */
#define PROV_TIMEOUT_MS ((int64_t)10 * 60 * 1000)

/*
 * One generate call's output side.  Providers embed it first in their own
 * state.  parts accumulates the final message content: consecutive text
 * deltas merge into one text part, consecutive reasoning deltas into one
 * reasoning part.
 */
struct prov_out {
	const char *what;               /* "openai", for messages */
	const struct model_stream *stream;
	struct core_err *e;
	const char *key;                /* redacted from every message; may be NULL */
	/* Where each of prov_post's headers came from, parallel to them
	 * (http_call.header_from); may be NULL. */
	const char *const *header_from;
	/* The call's total deadline and what it is, for the message;
	 * 0: AGENTKIT_MODEL_TIMEOUT, else PROV_TIMEOUT_MS. */
	int64_t timeout_ms;
	const char *timeout_what;
	json_t *parts;                  /* final content; owned */
	json_t *usage;                  /* GenerationUsage or NULL; owned */
	char finish[32];                /* Genkit finish reason */
	int done;                       /* the stream's terminator was seen */
	int emitted;                    /* chunks handed to the caller */
	struct sse_parser sse;
	/* The trailing text or reasoning part still being merged; kept as
	 * bytes so n deltas cost O(n), moved into parts by prov_flush(). */
	struct core_buf tail;
	const char *tail_key;           /* "text", "reasoning" or NULL */
	json_t *meta;                   /* the final message's metadata (why a
	                                   turn was blocked, ...) or NULL; owned */
	/* Called with prov_post's ctx when an attempt starts over (a retry
	 * before anything was emitted): forget provider parse state.  May be
	 * NULL. */
	void (*on_reset)(void *ctx);
};

void prov_out_init(struct prov_out *o, const char *what,
                   const struct model_stream *stream, struct core_err *e);
void prov_out_release(struct prov_out *o);
/* Forget the output of a failed attempt (nothing was emitted yet). */
void prov_out_reset(struct prov_out *o);

/*
 * Stream one part to the caller as a ModelResponseChunk and add it to the
 * final content.  Consumes part.  Errors: the chunk callback's status.
 */
enum core_status prov_emit(struct prov_out *o, json_t *part);
/* Add a part to the final content without streaming it.  Consumes part. */
void prov_add_part(struct prov_out *o, json_t *part);
/* Move the merged trailing part into parts (before looking at parts). */
void prov_flush(struct prov_out *o);
/* Move the result into resp: the message (with o's metadata), the finish
 * reason and the usage (prov_post, on success). */
void prov_out_finish(struct prov_out *o, struct model_response *resp);

/*
 * The API key: the key file's first line when req->key_file is set, else
 * the first non-empty variable of envs (NULL-terminated).  *key is
 * malloc()ed.  CORE_EUNAUTH when none is found; the message names the
 * variables, never a value.
 */
enum core_status prov_key(const char *what, const char *const *envs,
                          const char *key_file, char **key, struct core_err *e);
/* prov_key(), and *which (may be NULL) is the index in envs of the
 * variable the key came from (0 for a key file). */
enum core_status prov_key_from(const char *what, const char *const *envs,
                               const char *key_file, char **key, size_t *which,
                               struct core_err *e);
/* The first non-empty variable of envs, else dflt, without a trailing '/'.
 * malloc()ed; NULL only when out of memory. */
char *prov_env_url(const char *const *envs, const char *dflt);

/*
 * POST the JSON text body[0..len) to url, with the provider's headers (NULL-
 * terminated, may be NULL) then Content-Type and the Accept of mode's
 * stream, and feed the streamed reply, framed by mode, to on_event (ctx =
 * the provider state, whose first member is o); on success the response
 * goes into resp (message, finish reason, usage).  on_error maps an error document.  A
 * stream that ends without o->done set is a truncated stream
 * (CORE_EUNAVAILABLE); a reply past PROV_RESPONSE_MAX (or
 * AGENTKIT_HTTP_MAX_RESPONSE, a size; a bad value is CORE_EUSAGE) is
 * CORE_EINTERNAL.  The whole call, retries included, is bounded by
 * o->timeout_ms, else AGENTKIT_MODEL_TIMEOUT (a duration; a bad value is
 * CORE_EUSAGE), else PROV_TIMEOUT_MS: past it CORE_EDEADLINE.  A header
 * with a line break is CORE_EUNAUTH naming o->header_from's source (a
 * credential), CORE_EINVAL for any other header.
 * Retries (http.h) are decided by o->emitted: an
 * attempt that failed before any chunk reached the caller is tried again
 * (o and the provider's state, through o->on_reset, start over).  Every
 * failure message has the key redacted.
 */
enum core_status prov_post(struct prov_out *o, const char *url,
                           const char *const *headers, const char *body, size_t len,
                           enum sse_mode mode, sse_event_fn on_event,
                           enum core_status (*on_error)(void *, struct http_error *,
                                                        struct core_err *),
                           void *ctx, const char *terminator,
                           struct model_response *resp);

/*
 * GET url with headers (NULL-terminated, may be NULL) and parse the JSON
 * reply into *doc (a new reference): the providers' models endpoints.
 * Failures map as a generate call's do (prov_http_status, the provider's
 * error message from {"error":{"message"}} or {"error":"..."}), named by
 * what, with key redacted.  No retries and a connect timeout of at most
 * 10s: a listing is asked for by a person waiting for it.
 */
enum core_status prov_get_json(const char *what, const char *url, const char *const *headers,
                               const char *key, json_t **doc, struct core_err *e);

/*
 * The --list-models row of an HTTP provider (model.h): the key's
 * variables and where the key comes from (never the key), the base URL
 * (user and password removed) and its variables.  *key is the key
 * (malloc()ed; free with prov_secret_free) or NULL when none is set.
 */
enum core_status prov_list_row(json_t *row, const char *const *key_envs, const char *key_file,
                               const char *const *url_envs, const char *base, char **key);
/*
 * The --list-models of provider p, which has a key: its row
 * (prov_list_row, from p's variables and default URL, and p's header
 * variables), then, when a key is set, GET base + path with the key's
 * header auth_fmts[i] (a printf format for the key; i is the index in
 * p->key_vars of the variable it came from, 0 for a key file), extra (may
 * be NULL) and the headers of p's header variables that are set.  *doc is
 * the reply (a new reference), NULL when no key is set.  Errors:
 * prov_get_json's, CORE_ENOMEM.
 */
enum core_status prov_list_get(const struct model_provider *p, json_t *row,
                               const char *key_file, const char *path,
                               const char *const *auth_fmts, const char *extra, json_t **doc,
                               struct core_err *e);
/* Set row's "headerVariables" to p's env_headers variables. */
enum core_status prov_list_header_vars(json_t *row, const struct model_provider *p);

/* Most headers one call sends besides agentkit's own. */
#define PROV_HEADERS_MAX 40

/* A call's extra "Name: value" headers: v is NULL-terminated; each string
 * is owned and wiped when released (a header may carry a credential). */
struct prov_headers {
	char *v[PROV_HEADERS_MAX + 1];
	size_t n;
};
/* Add "name: value".  CORE_EINVAL for a value with a line break (it would
 * forge headers) or past PROV_HEADERS_MAX; CORE_ENOMEM.  Neither message
 * holds the value. */
enum core_status prov_headers_add(struct prov_headers *h, const char *name, const char *value,
                                  struct core_err *e);
void prov_headers_release(struct prov_headers *h);
/* Add the headers of p's env_headers variables that are set (OpenAI's
 * organization and project).  Errors: prov_headers_add's, prefixed with
 * p's name and the variable. */
enum core_status prov_env_headers(const struct model_provider *p, struct prov_headers *h,
                                  struct core_err *e);
/* Set row's "models" to "PREFIX/NAME" for each item of list (its string
 * member field, less a leading strip when given), sorted. */
enum core_status prov_list_models(json_t *row, const char *prefix, const json_t *list,
                                  const char *field, const char *strip);

/*
 * A request body: its JSON text is buf.p + at, buf.len - at bytes long.
 * It is the walk's own buffer: the members before the messages are
 * written into room the walk left in front of them, so that a long
 * history is never copied once more (prov_walk_body()).
 */
struct prov_body {
	struct core_buf buf;
	size_t at;
};
#define PROV_BODY_INIT { CORE_BUF_INIT(CORE_BUF_UNLIMITED), 0 }
#define PROV_HEAD 4096          /* the room a walk leaves in front */

/*
 * ---- one generate call of an HTTP provider ----
 *
 * Every HTTP provider's generate is the same skeleton (prov_generate):
 * check the model name, read the key and the base URL from the provider's
 * variables (struct model_provider), build the URL and the request body,
 * POST it with the key's header and stream the reply through the
 * dialect's event parser.  A provider file describes what differs in one
 * struct prov_dialect.
 */
struct prov_dialect {
	const struct model_provider *p;
	/* The call's state, a struct whose first member is struct prov_out
	 * (prov_post's ctx); zeroed before the call. */
	size_t size;
	/* Non-zero for a model name the API cannot take, reported as "bad
	 * model name"; NULL: only an empty name is refused. */
	int (*bad_name)(const char *name);
	/* The base URL when it is not p's first url_vars else default_url
	 * (malloc()ed, NULL when out of memory); NULL for that rule. */
	char *(*base_url)(void);
	/* The endpoint: a printf format given the base URL then the model
	 * name, which it may leave unused ("%s/chat/completions"). */
	const char *url_fmt;
	/* A name rewritten before url_fmt (Gemini drops "models/"); may be
	 * NULL. */
	const char *(*url_name)(const char *name);
	/* The endpoint when it depends on the base URL (a Gemini base on
	 * Vertex AI has its own path): base and the (url_name'd) model name
	 * to a new URL, NULL when out of memory; NULL: url_fmt. */
	char *(*url)(const char *base, const char *name);
	const char *auth_fmt;           /* the key's header ("x-api-key: %s"),
	                                   NULL for a provider without a key */
	/* The key's header per variable of p->key_vars (parallel to it; a
	 * key file uses the first), when they differ (Anthropic: x-api-key,
	 * or Authorization: Bearer for ANTHROPIC_AUTH_TOKEN); NULL: auth_fmt
	 * for every one. */
	const char *const *auth_fmts;
	/* The key is optional and comes only from p->key_vars, never the key
	 * file (which may hold another provider's key); none set: the call
	 * goes without. */
	int key_optional;
	const char *extra_header;       /* one more header, or NULL */
	/* The request body (an empty one given) for model name at base;
	 * state is the call's state (the parser may need what the request
	 * asked for).  Errors go into e. */
	enum core_status (*build)(void *state, const char *name, const char *base,
	                          const struct model_request *req, struct prov_body *body,
	                          struct core_err *e);
	enum sse_mode mode;
	sse_event_fn on_event;
	enum core_status (*on_error)(void *state, struct http_error *he, struct core_err *e);
	void (*on_reset)(void *state);  /* prov_out.on_reset; may be NULL */
	void (*release)(void *state);   /* free what the parser holds; may be NULL */
	const char *terminator;         /* what ends a complete stream, for messages */
};

/* A credential found missing before any call (CORE_EUNAUTH) as the
 * precondition it is then: CORE_ENOKEY, the message kept (e may be NULL);
 * any other status as it is. */
enum core_status prov_key_missing(enum core_status st, struct core_err *e);

/*
 * Is d's key there, before any call: the key file (read, then wiped) or
 * one of p's variables, as prov_generate() would take it; CORE_OK for a
 * dialect without a key or with an optional one.  Errors: CORE_ENOKEY
 * naming the variables, --key-file and AGENTKIT_KEY_FILE (an empty key
 * file or one with a NUL byte too); a key file that cannot be read:
 * CORE_ENOTFOUND, CORE_ESYS; CORE_ENOMEM.
 */
enum core_status prov_check_key(const struct prov_dialect *d, const char *key_file,
                                struct core_err *e);

/* One generate call of d's provider, the one whose dialect is d (model.h;
 * registry.c runs it): the key from p's variables or the key file, the
 * base URL from p's variables, the headers of p's env_headers that are
 * set; then prov_generate_to().  The message of every failure is prefixed
 * with the provider's name. */
enum core_status prov_generate(const struct prov_dialect *d, const char *name,
                               const struct model_request *req,
                               const struct model_stream *stream,
                               struct model_response *resp, struct core_err *e);

/*
 * Where one call goes and how it authenticates: from a provider's
 * variables (prov_generate) or from a named endpoint of the models file
 * (endpoints.h).  Everything is borrowed for the call.
 */
struct prov_target {
	const char *what;               /* the name in messages ("openai", "local") */
	const char *base;               /* base URL without a trailing '/' */
	const char *key;                /* the credential, redacted from every
	                                   message; NULL: none */
	const char *key_from;           /* where key came from, for a message
	                                   ("OPENAI_API_KEY", "the credential
	                                   command's token"); NULL: its header */
	const char *auth_fmt;           /* the key's header, a printf format for
	                                   it; NULL: the key is not sent */
	const char *const *headers;     /* more "Name: value" headers (NULL-
	                                   terminated, may be NULL) */
	const char *query;              /* "a=b&c=d" added to the URL, or NULL */
	int64_t timeout_ms;             /* the call's deadline (prov_out); 0: the
	                                   default */
	const char *timeout_what;       /* what it is, for the message */
};

/* One generate call of dialect d to target t (model name, URL from d's
 * url_fmt and t's base and query, t's headers after d's). */
enum core_status prov_generate_to(const struct prov_dialect *d, const struct prov_target *t,
                                  const char *name, const struct model_request *req,
                                  const struct model_stream *stream,
                                  struct model_response *resp, struct core_err *e);

/* OpenAI's account variables (provider_openai.c): its key, its base URL
 * and the ones sent as headers, shared by the Chat Completions and the
 * Responses dialects, which reach the same account. */
extern const char *const prov_openai_key_vars[], *const prov_openai_url_vars[];
extern const struct model_env_header prov_openai_env_headers[];
/* An OpenAI error document's HTTP failure (4xx/5xx), for both dialects
 * (msg and code from {"error": {"message", "code"}}, may be NULL): the
 * status's class, insufficient_quota final, a "try again in Ns" hint as
 * the retry delay when no header gave one; prov_fail_http()'s result. */
enum core_status prov_openai_http_error(struct prov_out *o, struct http_error *he,
                                        const char *msg, const char *code, struct core_err *e);

/* The dialects, for the models file's endpoints: openai (Chat
 * Completions), openai-responses (the Responses API), anthropic, googleai,
 * ollama. */
extern const struct prov_dialect prov_dialect_openai, prov_dialect_openai_responses,
	prov_dialect_anthropic, prov_dialect_googleai, prov_dialect_ollama;

/* Genkit's class for an HTTP status (400 INVALID_ARGUMENT as
 * CORE_EREJECTED, a model failure; 401
 * UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 409 ABORTED,
 * 429 RESOURCE_EXHAUSTED, 503/502/529 UNAVAILABLE, 504 DEADLINE_EXCEEDED,
 * other 5xx INTERNAL). */
enum core_status prov_http_status(long status);
/* A short text for an HTTP status ("Too Many Requests"), "" if unknown. */
const char *prov_http_reason(long status);

/*
 * Fill e for a failed reply: "WHAT: HTTP 429 Too Many Requests: MSG", or
 * for a 2xx reply of the wrong type "WHAT: unexpected Content-Type ...",
 * ending "(request id ID)" when the reply named one.
 * msg may be NULL (then the start of the body is used).  Returns st.
 */
enum core_status prov_fail_http(struct prov_out *o, const struct http_error *he,
                                enum core_status st, const char *msg,
                                struct core_err *e);
/* A "try again in 1.5s" / "retryDelay":"37s" style hint in text, in ms;
 * -1 if none.  after is the text that precedes the number. */
int64_t prov_delay_hint(const char *text, const char *after);

/* Parse a streamed event's JSON; CORE_EINTERNAL in o->e naming the provider
 * (a garbled stream is a model failure). */
json_t *prov_parse(struct prov_out *o, const char *data, size_t n);

/* ---- Genkit message helpers ---- */

/* The text parts of a content array joined, as a new JSON string ("" when
 * none); NULL when out of memory. */
json_t *prov_text(const json_t *content);
/* Whether a content array has a media part with a URL. */
int prov_has_media(const json_t *content);
/* A toolResponse output as wire text: a string as is, else compact JSON. */
char *prov_output_text(const json_t *output);
/* printf into new memory (malloc()ed); NULL when out of memory. */
char *prov_strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Compact JSON of v; malloc()ed, NULL on failure. */
char *prov_dump(const json_t *v);

/*
 * One tool declaration in the shape most providers share: {"name",
 * "description"?, schema_key: the tool's inputSchema, or an empty object
 * schema when it has none}.  A new reference.
 */
json_t *prov_tool_decl(const json_t *tool, const char *schema_key);

/* The tools as OpenAI-style [{"type":"function","function":decl}] (OpenAI,
 * Ollama).  A new reference. */
json_t *prov_function_tools(const json_t *tools);

/* Wipe a secret (a key, an Authorization header) and free it; NULL is a
 * no-op. */
void prov_secret_free(char *s);
/*
 * A media URL split: for "data:TYPE;base64,DATA" *mime (malloc()ed) and
 * *data (pointing into url) are set and 1 is returned; 0 for other URLs.
 */
int prov_data_url(const char *url, char **mime, const char **data);
/*
 * The toolResponse parts of a tool message, ordered as the toolRequest
 * parts of the model message before it (matched by ref, then by name);
 * unmatched responses keep their order at the end.  New array of borrowed
 * part references (json_incref'd).
 */
json_t *prov_ordered_responses(const json_t *prev_model, const json_t *tool_msg);
/*
 * ---- a conversation as the wire's messages ----
 *
 * A dialect writes a call's conversation as its wire messages, one Genkit
 * message at a time and in order: the stored history first
 * (model_request.history: the text a long session's earlier messages are
 * stored as), then the request's messages from history->at on, with those
 * before it ahead of the stored ones.  The wire messages are JSON text in
 * one buffer, and the body is written around them (prov_walk_body()), so that
 * a stored message need not become a parsed tree and then text again:
 *
 *  - a plain stored message - role user or model, text parts and nothing
 *    else, most of a long conversation - is written from its stored bytes
 *    by the walker's plain(): the text parts' JSON strings are copied as
 *    they are stored, escapes and all;
 *  - any other message is parsed (a stored one) and given to step().
 *
 * The walk checks each message first: a role and a content array ("WHAT:
 * message N has no role or content"), the role one of system, user, model
 * and tool ("WHAT: message N has unknown role 'R'"), N counting from the
 * conversation's first message.  It keeps the last model message walked
 * (a plain one stands as a model message without tool requests, which is
 * all a tool message's walk asks of it).
 */
struct prov_span {
	const char *p;
	size_t n;
};

/* A plain message: its role and its text parts, each as the body of its
 * JSON string (escaped as stored, without the quotes). */
#define PROV_PLAIN_MAX 16       /* more parts: parsed instead */
struct prov_plain {
	int model;                      /* role "model", else "user" */
	size_t n;
	struct prov_span text[PROV_PLAIN_MAX];
};

/*
 * Whether json[0..n) is a plain message in one of the two forms messages
 * are stored in (compact): {"content":[{"text":"..."},...],"role":"user"}
 * (the session's, members in Go's order) or {"role":"user","content":[...]}
 * (an import's from Genkit JS), the role "user" or "model", with at most
 * PROV_PLAIN_MAX parts; *m says what it holds.  0 for anything else.
 */
int prov_plain_scan(const char *json, size_t n, struct prov_plain *m);

struct prov_walk {
	const char *what;               /* the provider, for messages */
	struct core_buf out;            /* the wire messages: JSON values
	                                   separated by commas */
	size_t count;                   /* how many */
	const json_t *prev_model;       /* the last model message walked, or
	                                   NULL: none yet */
	json_t *owned;                  /* prev_model when the walk parsed it */
	json_t *blank;                  /* prev_model after a plain one */
	void *ctx;                      /* the dialect's own state */
};

struct prov_walker {
	/* One message (role checked: system, user, model or tool); its wire
	 * messages go to w (prov_walk_add()). */
	enum core_status (*step)(struct prov_walk *w, const char *role, const json_t *m,
	                         struct core_err *e);
	/* A plain stored message, written from its text (prov_walk_begin());
	 * NULL: such a message is parsed and given to step(). */
	enum core_status (*plain)(struct prov_walk *w, const struct prov_plain *m,
	                          struct core_err *e);
	/* After the last message (a message still open is written); may be
	 * NULL. */
	enum core_status (*end)(struct prov_walk *w, struct core_err *e);
};

/* Walk req's conversation with k into w, which prov_walk_init() made
 * (once: the walk leaves room in front for prov_walk_body()).
 * Errors: the checks above, a stored message that does not parse
 * (CORE_ESYS: the store is corrupt), the history's own, the walker's. */
void prov_walk_init(struct prov_walk *w, const char *what, void *ctx);
enum core_status prov_walk(const struct prov_walker *k, const struct model_request *req,
                           struct prov_walk *w, struct core_err *e);
void prov_walk_release(struct prov_walk *w);
/* Add the wire message msg (consumed; NULL: out of memory). */
enum core_status prov_walk_add(struct prov_walk *w, json_t *msg, struct core_err *e);
/* Begin a wire message the walker writes itself into w->out. */
enum core_status prov_walk_begin(struct prov_walk *w, struct core_err *e);
/* Write a plain message m as {"role":ROLE,"content":"its texts joined"};
 * with skip_empty nothing when they join to "". */
enum core_status prov_walk_joined(struct prov_walk *w, const char *role,
                                  const struct prov_plain *m, int skip_empty,
                                  struct core_err *e);


/* The request body from w, which it empties: b as compact JSON, where b's
 * member key (a placeholder) holds w's wire messages as an array. */
enum core_status prov_walk_body(const json_t *b, const char *key, struct prov_walk *w,
                                struct prov_body *body, struct core_err *e);

/*
 * The roles of the OpenAI-style wires (Chat Completions and the Responses
 * API), one message each: system: {"role":"system","content": its text
 * parts joined}; user: {"role":"user","content": user(content)} (NULL from
 * user: its error in e); model: model(content, w, e); tool: tool_msg(
 * prev_model, msg, w, e), prev_model being the model message before it
 * (NULL if none).  prov_roles_step() is their walker's step().
 */
struct prov_roles {
	json_t *(*user)(const json_t *content, struct core_err *e);
	enum core_status (*model)(const json_t *content, struct prov_walk *w, struct core_err *e);
	enum core_status (*tool_msg)(const json_t *prev_model, const json_t *msg,
	                             struct prov_walk *w, struct core_err *e);
};
/* w->ctx is the struct prov_roles. */
enum core_status prov_roles_step(struct prov_walk *w, const char *role, const json_t *m,
                                 struct core_err *e);

/* Copy config keys not in skip (NULL-terminated) into dst. */
void prov_pass_through(json_t *dst, const json_t *config, const char *const *skip);
/* Config value of key or NULL (borrowed). */
const json_t *prov_cfg(const json_t *config, const char *key);
/* Set dst[key] = config[from] when present (new reference). */
void prov_map(json_t *dst, const char *key, const json_t *config, const char *from);

#endif
