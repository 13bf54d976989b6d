/*
 * model.h - the model layer: one interface for every provider.
 *
 * A model is named "provider/name" ("echo", "script/PATH", "openai/gpt-4o",
 * "googleai/gemini-2.5-flash", "anthropic/claude-...", "ollama/llama3"), or
 * "endpoint/name" for a named endpoint of the models file (endpoints.h).
 * This header is what a provider implements and what a call carries: the
 * request is Genkit-shaped JSON (messages, tool definitions, config), the
 * response streams as Genkit ModelResponseChunk objects through a callback
 * and ends with the final message, finish reason and usage.  registry.h
 * finds a model's provider by its name and runs the call.
 *
 * Providers never print, never exit, and never put a credential into an
 * error message.
 */
#ifndef CORE_MODEL_H
#define CORE_MODEL_H

#include <jansson.h>

#include "../base/buf.h"
#include "../base/status.h"

/*
 * Messages of a conversation kept as the store keeps them: a long
 * session's earlier history, which the runtime did not read (store.h's
 * STORE_LAST_MESSAGE), handed to a provider that writes its request from
 * the stored text rather than from parsed messages (model_takes_history(),
 * registry.h).  each() hands the count messages to fn in order, each as
 * the JSON text of one Message as it is stored (compact, valid UTF-8),
 * borrowed for the call; it stops at fn's first failure and returns it, or
 * returns its own (a store that cannot be read) with e set.
 */
typedef enum core_status (*model_history_fn)(void *arg, const char *json, size_t n,
                                             struct core_err *e);
struct model_history {
	size_t count;             /* the messages */
	size_t at;                /* they come before messages[at] */
	enum core_status (*each)(void *ctx, model_history_fn fn, void *arg, struct core_err *e);
	void *ctx;
};

struct model_request {
	const json_t *messages;   /* array of Message (role, content[, metadata]) */
	const struct model_history *history;  /* more messages, stored (above),
	                             or NULL: messages is the whole conversation */
	const json_t *tools;      /* array of {name, description, inputSchema,
	                             outputSchema?} or NULL */
	const json_t *config;     /* object (temperature, maxOutputTokens, ...) or NULL */
	const char *key_file;     /* optional file holding the provider's key */
	const json_t *output;     /* structured output {"format":"json","schema"?}
	                             (structured.h) or NULL for text */
	size_t models_before;     /* "model" messages of the conversation that
	                             come before messages[0] and are left out
	                             (a resumed history left in the store, for a
	                             model that reads no more than its end);
	                             0 when messages is the whole conversation */
};

struct model_stream {
	/*
	 * Called for each streamed chunk, in order: a ModelResponseChunk
	 * {"role":"model","index":0,"content":[parts]} (borrowed for the call).
	 * A non-OK return cancels the call and is returned by model_generate().
	 * May be NULL.
	 */
	enum core_status (*chunk)(void *ctx, const json_t *chunk);
	/* Polled often (at least every 50 ms while waiting on the network):
	 * non-zero cancels the call with CORE_ECANCELLED.  May be NULL. */
	int (*cancelled)(void *ctx);
	void *ctx;
};

struct model_response {
	json_t *message;          /* Message with role "model"; owned */
	char finish_reason[32];   /* stop, length, blocked, other, unknown, "" */
	json_t *usage;            /* {"inputTokens", "outputTokens", ...} or NULL; owned */
};

/* Release what a response owns; a zeroed response is a no-op. */
void model_response_release(struct model_response *r);

/* Append the joined text parts of the last user message to out (nothing
 * when there is none; out->p is then "").  The offline models answer it. */
enum core_status model_last_user_text(const json_t *messages, struct core_buf *out);

/*
 * A provider: one entry of registry.c's table, defined in the provider's own
 * file (model_echo.c, provider_openai.c, ...).
 *
 * prefix is the part of a model name before '/'.  A provider sets exactly
 * one of dialect and generate, the two ways its calls run (name is the
 * part after the '/'): an HTTP provider names its dialect, the description
 * of its API that prov_generate() (provider_common.h) runs a call with; a
 * provider that does not speak HTTP (echo, script) has its own generate.
 * registry.c runs the dialect when there is one, else generate.  list (may
 * be NULL) fills the provider's --list-models row (see model_list,
 * registry.h) and returns a listing failure.  The rest describes what an
 * HTTP provider reads from the environment, as data that --list-models
 * reports and that keeps the keys from every child process (spawn.h):
 * key_vars, the variables holding its key (the first one set wins; NULL
 * when it needs none; Ollama's is optional), url_vars, the variables
 * naming its endpoint (the first one set wins; NULL for none), and
 * default_url, the endpoint when none is set.  The offline providers leave
 * them NULL.
 */
/* A variable whose value a provider sends as a header when it is set. */
struct model_env_header {
	const char *var, *header;
};

/* An HTTP API's dialect, defined in provider_common.h. */
struct prov_dialect;

struct model_provider {
	const char *prefix;
	const struct prov_dialect *dialect;
	enum core_status (*generate)(const char *name, const struct model_request *req,
	                             const struct model_stream *stream,
	                             struct model_response *resp, struct core_err *e);
	enum core_status (*list)(const char *key_file, json_t *row, struct core_err *e);
	const char *const *key_vars;
	const char *const *url_vars;
	const char *default_url;
	/* More variables it reads, each sent as one header when set (OpenAI's
	 * OPENAI_ORG_ID → OpenAI-Organization); ended by {NULL}; NULL for
	 * none.  Kept from children like the keys. */
	const struct model_env_header *env_headers;
};

#endif
