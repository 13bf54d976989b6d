/*
 * endpoints.h - the models file: named endpoints that "--model NAME/MODEL"
 * reaches (docs/providers.md "Named endpoints").
 *
 * The file is AGENTKIT_MODELS_FILE when set, else models.json, models.yaml
 * or models.yml in ${XDG_CONFIG_HOME:-$HOME/.config}/agentkit (no file
 * there: no endpoints; more than one there: CORE_EINVAL, keep one).  A
 * name ending .yaml or .yml is read as YAML (frontmatter.h's conversion),
 * any other as JSON.  It is read once per process, on the first call of
 * any function here, and kept for the process's life:
 *
 *   {"endpoints": {"NAME": {
 *       "dialect": "openai" | "openai-responses" | "anthropic" | "googleai" |
 *                  "ollama" | "genkit" (agents on Genkit's wire: no models,
 *                  a baseUrl; endpoints_agent_target()),
 *       "baseUrl": URL,                  (default: the dialect's own)
 *       "keyVariable": VAR | "keyFile": PATH | "credentialCommand": [ARGV],
 *       "keyHeader": HEADER-NAME,        (default: the dialect's key header;
 *                                          Authorization: Bearer for a
 *                                          credential command)
 *       "credentialTtl": DURATION,       (plain-text tokens; default 5m)
 *       "headers": {NAME: VALUE}, "query": {NAME: VALUE},
 *       "models": {ALIAS: MODEL-ID} | [MODEL-ID]}}}  (aliases, or the
 *                                          endpoint's list; other names
 *                                          go to the endpoint as given)
 *
 * Values of baseUrl, headers and query may name variables: $NAME or
 * ${NAME}, $$ for a '$'; they are expanded at each call.  Every variable
 * the file names (keyVariable and those in values) is kept from the
 * processes agentkit starts, as the providers' keys are (spawn.h).
 *
 * A credential command runs without a shell, with agentkit's environment
 * minus the keys, for at most 30 s; its stdout is the token: plain text
 * (valid for credentialTtl) or {"token": T, "expiresAt": RFC3339 or Unix
 * seconds, "expiresIn": seconds}.  The token is kept in memory for the
 * process and used again while at least 30 s of its life remain; a call
 * the endpoint answers 401 forgets it.
 *
 * Errors name the file and the spot, never a value that may be a secret.
 * A file that cannot be read as a models file is CORE_EINVAL (a named
 * AGENTKIT_MODELS_FILE that does not exist: CORE_ENOTFOUND); every
 * function that needs the file returns that error each time.
 */
#ifndef CORE_ENDPOINTS_H
#define CORE_ENDPOINTS_H

#include <jansson.h>

#include "model.h"

struct endpoint;

/*
 * Run a credential command as the models file's are run (above: no
 * shell, the environment minus the keys, 30 s at most) and take its
 * token: *token (the caller's; wipe it, prov_secret_free()) and the time
 * it stops being valid (*until_ns, core_now_ns()'s clock; plain text:
 * ttl_ms from now).  name begins every message (never the token).  For
 * other configurations with a credentialCommand (MCP servers' headers);
 * the caller keeps the token while at least CREDENTIAL_MARGIN_MS remain.
 * Errors: CORE_EUNAUTH (it failed, printed no token), CORE_EDEADLINE,
 * CORE_ESYS, CORE_ENOMEM.
 */
#define CREDENTIAL_MARGIN_MS 30000
enum core_status credential_run(const char *name, const json_t *cmd, int64_t ttl_ms,
                                char **token, int64_t *until_ns, struct core_err *e);

/* Read the file if not yet read; its error, if any (the same each call). */
enum core_status endpoints_load(struct core_err *e);

/* The endpoint called name (its first len bytes), NULL when none is or
 * the file could not be read. */
const struct endpoint *endpoints_find(const char *name, size_t len);

/* The models file's path, NULL when there is none. */
const char *endpoints_file(void);

/* The i-th endpoint's name (in the file's order), NULL past the last. */
const char *endpoints_name(size_t i);

/* Is the environment entry "NAME=..." (or NAME) a variable the file names? */
int endpoints_variable(const char *entry);

/* One generate call of model (an alias of the endpoint, else the model id
 * itself) at endpoint ep; messages are prefixed with the endpoint's name.
 * Errors: the dialect's, and CORE_EUNAUTH / CORE_EINVAL for a key or a
 * variable that is not set or a credential command that fails. */
enum core_status endpoints_generate(const struct endpoint *ep, const char *model,
                                    const struct model_request *req,
                                    const struct model_stream *stream,
                                    struct model_response *resp, struct core_err *e);

/*
 * Are ep's credentials there, before any call: its keyVariable set, its
 * keyFile readable and not empty, its credentialCommand's program found
 * (spawn_program_found(); it is not run), and every variable its baseUrl,
 * headers and query name set.  Errors: CORE_ENOKEY naming what is
 * missing and the models file; a key file that cannot be read:
 * CORE_ENOTFOUND, CORE_ESYS; CORE_ENOMEM.
 */
enum core_status endpoints_check_credentials(const struct endpoint *ep, struct core_err *e);

/* The dialect endpoint ep speaks (its "dialect"'s table). */
const struct prov_dialect *endpoints_dialect(const struct endpoint *ep);

/*
 * Append one --list-models row per endpoint to rows, in the file's order:
 *   {"provider": NAME, "dialect", "keyVariables": [VAR]|[], "keyFrom":
 *    VAR|"key file"|"credential command"|null, "baseUrl" (as written,
 *    variables unexpanded, user and password as ***@), "headers": [NAME],
 *    "query": [NAME], "models": ["NAME/MODEL", ...] (its list or its
 *    aliases), "modelsFile": PATH}
 * Nothing is asked of the endpoints.  Errors: the file's, CORE_ENOMEM.
 */
enum core_status endpoints_list(json_t *rows, struct core_err *e);

/*
 * The names completion offers for --model, without asking any endpoint:
 * "NAME/" for each endpoint, then "NAME/MODEL" for each of its models
 * (its list, or its aliases), in the file's order.  A new array, empty
 * when there is no file or it cannot be read (completion stays quiet);
 * NULL only when out of memory.
 */
json_t *endpoints_model_names(void);

/*
 * An agent of a server on Genkit's wire named in the models file: ref is
 * "NAME/AGENT" (AGENT may hold more '/': NAME/AGENT/getSnapshot) and NAME
 * an endpoint with "dialect": "genkit".  *url (malloc()ed) is its
 * baseUrl expanded, without trailing '/', then "/AGENT" and its query
 * parameters; h gets its key as its keyHeader (default "Authorization:
 * Bearer KEY"; a credential command's token likewise), then its headers.
 * Errors name the endpoint, never a value: CORE_EUSAGE (no such endpoint,
 * or one of a model dialect), CORE_EUNAUTH (a key or variable not set, a
 * credential command that failed), CORE_EINVAL, CORE_ENOMEM.
 */
struct prov_headers;
enum core_status endpoints_agent_target(const char *ref, char **url, struct prov_headers *h,
                                        struct core_err *e);

#endif
