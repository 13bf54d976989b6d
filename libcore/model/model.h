/*
 * model.h - the model layer: one interface for every provider.
 *
 * A model is named "provider/name" ("echo", "script/PATH", "openai/gpt-4o",
 * "googleai/gemini-2.5-flash", "anthropic/claude-...", "ollama/llama3"), or
 * "endpoint/name" for a named endpoint of the models file (endpoints.h).
 * model_generate() finds the provider by prefix and runs one generate call:
 * the request is Genkit-shaped JSON (messages, tool definitions, config),
 * the response streams as Genkit ModelResponseChunk objects through a
 * callback and ends with the final message, finish reason and usage.
 *
 * Providers never print, never exit, and never put a credential into an
 * error message.
 */
#ifndef CORE_MODEL_H
#define CORE_MODEL_H

#include <jansson.h>

#include "../base/buf.h"
#include "../base/status.h"

struct model_request {
	const json_t *messages;   /* array of Message (role, content[, metadata]) */
	const json_t *tools;      /* array of {name, description, inputSchema,
	                             outputSchema?} or NULL */
	const json_t *config;     /* object (temperature, maxOutputTokens, ...) or NULL */
	const char *key_file;     /* optional file holding the provider's key */
	const json_t *output;     /* structured output {"format":"json","schema"?}
	                             (structured.h) or NULL for text */
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

/*
 * Run one generate call with the model called name.  On failure: a status
 * naming Genkit's class (CORE_EUNAVAILABLE, CORE_EUNAUTH, CORE_EPERM,
 * CORE_ENOTFOUND for an unknown provider or model, CORE_EEXHAUSTED,
 * CORE_EINVAL, CORE_EINTERNAL, CORE_ECANCELLED) and the provider's message.
 */
enum core_status model_generate(const char *name, const struct model_request *req,
                                const struct model_stream *stream,
                                struct model_response *resp, struct core_err *e);

/*
 * Whether name can name a model, before any call is made: a known provider
 * or endpoint and a name after it (echo alone, script/PATH, PROVIDER/NAME,
 * ENDPOINT/NAME).  Whether the provider serves that name is known only when
 * it is called.  A models file that cannot be read fails it for every name
 * (its error: CORE_EINVAL, CORE_ENOTFOUND, CORE_ESYS), since the variables
 * it names could not be kept from the run's children.
 * CORE_ENOTFOUND otherwise, with a "did you mean" where one is likely:
 * "ecoh" → 'echo', "gpt-4o" → 'openai/gpt-4o', "google/x" → 'googleai/x'.
 */
enum core_status model_check(const char *name, struct core_err *e);

/* The i-th provider's prefix ("echo", "script", "openai", ...; static),
 * NULL past the last. */
const char *model_provider_name(size_t i);

/* Append the joined text parts of the last user message to out (nothing
 * when there is none; out->p is then "").  The offline models answer it. */
enum core_status model_last_user_text(const json_t *messages, struct core_buf *out);

/*
 * agent-run --list-models: one row per provider, in the table's order (a
 * new array in *rows):
 *   {"provider", "models": ["PROVIDER/NAME", ...]?,
 *    "keyVariables": [...], "keyFrom": VARIABLE|"key file"|null,
 *    "baseUrl", "baseUrlVariables": [...], "headerVariables": [...]?,
 *    "keyOptional": true?, "error": {"status", "message"}?}
 * The offline providers (echo, script) have only provider and models.  An
 * HTTP provider's own list (its models endpoint) is asked for when its key
 * is set (Ollama: when OLLAMA_HOST or OLLAMA_API_KEY is set); a failure
 * goes into that row's "error" and *failed is set.  Then one row per
 * endpoint of the models file (endpoints_list).  key_file is the key file
 * (--key-file, $AGENTKIT_KEY_FILE) or NULL.  Errors: the models file's
 * (nothing in *rows then), CORE_ENOMEM.
 */
enum core_status model_list(const char *key_file, json_t **rows, int *failed,
                            struct core_err *e);

/*
 * A provider: one entry of model.c's table, defined in the provider's own
 * file (model_echo.c, provider_openai.c, ...).
 *
 * prefix is the part of a model name before '/'; generate runs one call
 * (name is the part after the '/'); list (may be NULL) fills the
 * provider's --list-models row (see model_list) and returns a listing
 * failure.  The rest describes what an HTTP provider reads from the
 * environment, as data that --list-models reports and that keeps the keys
 * from every child process (spawn.h): key_vars, the variables holding its
 * key (the first one set wins; NULL when it needs none; Ollama's is
 * optional), url_vars, the
 * variables naming its endpoint (the first one set wins; NULL for none),
 * and default_url, the endpoint when none is set.  The offline providers
 * leave them NULL.
 */
/* A variable whose value a provider sends as a header when it is set. */
struct model_env_header {
	const char *var, *header;
};

struct model_provider {
	const char *prefix;
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

/* The i-th provider of the table (static), NULL past the last. */
const struct model_provider *model_provider_at(size_t i);

/*
 * Is the environment entry "NAME=value" (or a bare NAME) a key or header
 * variable of some provider in the table, or a variable the models file
 * names?  What the processes agentkit starts (tools, custom agent
 * handlers, transforms, credential commands) never inherit.
 */
int model_key_variable(const char *entry);

#endif
