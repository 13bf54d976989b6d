/*
 * structured.h - structured output: an agent that asks for JSON.
 *
 * A prompt's front matter `output: {format: json, schema: {...}}` (or
 * agent-run's --json / --output-schema FILE) becomes the output spec
 * {"format":"json","schema"?: JSON Schema} that every model request
 * carries (model_request.output); each provider sends it the way its API
 * constrains the reply (docs/providers.md).  The final model message of a
 * turn is then checked here, as Genkit's JSON format does: its text
 * (inside a ```json fence if there is one) must parse as JSON and match
 * the schema.
 *
 * Ownership: json_t * results are new references; arguments are borrowed
 * except where a function says it edits one.
 */
#ifndef CORE_STRUCTURED_H
#define CORE_STRUCTURED_H

#include <jansson.h>

#include "../base/status.h"

/*
 * The output spec for a front matter `output` mapping (where names it in
 * messages, e.g. "agents/x.prompt"): *spec is {"format":"json",
 * "schema"?} for format json (a schema alone implies json), NULL for
 * format text or no output.  CORE_EINVAL for another format, a schema
 * that is not a JSON Schema object or boolean, or a Picoschema (the
 * Dotprompt shorthand, which agentkit does not read: the message says to
 * write JSON Schema).
 */
enum core_status structured_spec(const json_t *output, const char *where, json_t **spec,
                                 struct core_err *e);

/*
 * Check a final model message against spec: its plain text parts joined,
 * a ```json fence stripped, parsed and checked against spec's schema.  On
 * success the text parts of message are replaced by one text part holding
 * the JSON text (so message is edited) and *value (may be NULL) is the
 * parsed value.  CORE_EINTERNAL when the reply is not JSON or does not
 * match, the message naming the spot: "structured output: the model's
 * reply: invalid JSON: ... (at reply:1:9)", "structured output: the
 * model's reply does not match the output schema: /city: expected a
 * string, got a number".
 */
enum core_status structured_check(const json_t *spec, json_t *message, json_t **value,
                                  struct core_err *e);

#endif
