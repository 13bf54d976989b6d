/*
 * registry.h - the providers' table: find a model's provider by its name
 * and run one generate call (model.h is the interface the providers
 * implement).  A name is "provider/name", or "endpoint/name" for a named
 * endpoint of the models file (endpoints.h); the providers come first, and
 * a models file whose endpoint takes a provider's name is refused.
 *
 * Nothing here prints or exits; the table is static, so every function may
 * be called from any thread once the models file was read.
 */
#ifndef CORE_REGISTRY_H
#define CORE_REGISTRY_H

#include <jansson.h>

#include "model.h"
#include "../base/buf.h"

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

/*
 * Are the credentials of the model called name there, before any call
 * (agent-run asks before the first turn and before --detach returns): a
 * provider's key in key_file (--key-file, $AGENTKIT_KEY_FILE; NULL: none)
 * or its variables (none needed by echo, script, or a provider whose key
 * is optional), an endpoint's as endpoints_check_credentials() says.
 * Nothing is sent and no credential command is run.  Errors: CORE_ENOKEY
 * (UNAUTHENTICATED, exit 5) naming the variables, --key-file and
 * AGENTKIT_KEY_FILE; a key file that cannot be read (CORE_ENOTFOUND,
 * CORE_ESYS); model_check()'s for a name that is no model; CORE_ENOMEM.
 */
enum core_status model_check_credentials(const char *name, const char *key_file,
                                         struct core_err *e);

/*
 * Whether the model called name writes its request from a stored history
 * as the store keeps it (model_request.history): every HTTP provider and
 * endpoint does; echo and script read messages alone, and an unknown name
 * takes nothing.
 */
int model_takes_history(const char *name);

/*
 * Whether the model called name can take what req's messages hold (the
 * media of an attachment), before any call: the request body is built as
 * the call would build it, and nothing is sent.  echo and script take
 * anything.  Errors: the provider's ("openai: cannot send media of type
 * 'audio/ogg' ..."), model_check()'s, CORE_ENOMEM.
 */
enum core_status model_check_request(const char *name, const struct model_request *req,
                                     struct core_err *e);

/* The i-th provider's prefix ("echo", "script", "openai", ...; static),
 * NULL past the last. */
const char *model_provider_name(size_t i);

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

/* The i-th provider of the table (static), NULL past the last. */
const struct model_provider *model_provider_at(size_t i);

/*
 * The providers' key variables as a person reads them, appended to b: each
 * provider's in the table's order, "A or B" for one provider's, ", "
 * between providers ("OPENAI_API_KEY, GOOGLE_API_KEY or GEMINI_API_KEY,
 * ..."); a list two providers share is named once.  Errors: CORE_ENOMEM
 * (or b's maximum).
 */
enum core_status model_key_variables_text(struct core_buf *b);

/*
 * Is the environment entry "NAME=value" (or a bare NAME) a key or header
 * variable of some provider in the table, or a variable the models file
 * names?  What the processes agentkit starts (tools, custom agent
 * handlers, transforms, credential commands) never inherit.
 */
int model_key_variable(const char *entry);

#endif
