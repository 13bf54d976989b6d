/*
 * prompt.h - Dotprompt prompt files: YAML front matter and a template body.
 *
 * A prompt file is
 *
 *     ---                      (optional; blank and '#' lines may precede it)
 *     model: echo
 *     tools: [addTask]
 *     input: {default: {name: you}}
 *     ---
 *     {{role "system"}}Help {{name}}. Tasks: {{json @state.tasks}}
 *     {{history}}
 *
 * The front matter is parsed with libyaml into JSON: plain scalars resolve
 * as YAML 1.2's core schema does (null ~ true false, ints incl. 0x/0o,
 * floats), quoted scalars stay strings, aliases are expanded (bounded),
 * duplicate keys, non-mapping front matter and values that JSON cannot hold
 * (.inf, .nan) are errors.  The body (trimmed, as Dotprompt trims it) is
 * compiled once by base/template.h and rendered per turn.
 *
 * Rendering follows Dotprompt's toMessages(): text before any {{role}} is a
 * user message; {{role "x"}} starts a new message (or renames the current
 * one while it is still empty); {{history}} places the history there and
 * continues with a "model" message; whitespace-only messages and text parts
 * are dropped, other text is kept exactly.  Without a rendered {{history}}
 * the history goes before the final message if it is a user message, else
 * at the end (runtime-semantics §3.5).
 *
 * All errors name the file and its real line: "agents/x.prompt:3: invalid
 * front matter: ...".  Ownership: prompt_load/prompt_parse return a prompt
 * the caller frees with prompt_free; it owns everything it hands out as
 * borrowed.
 */
#ifndef CORE_PROMPT_H
#define CORE_PROMPT_H

#include <stddef.h>

#include <jansson.h>

#include "../base/frontmatter.h"
#include "../base/status.h"

/* Largest prompt file accepted (the front matter's own limits are
 * PROMPT_MAX_YAML_DEPTH and PROMPT_MAX_YAML_NODES, frontmatter.h). */
#define PROMPT_MAX_FILE (1024 * 1024)

struct prompt;                          /* opaque; owns everything */

/*
 * Load a prompt file.  Relative paths in its front matter resolve from the
 * file's directory: "model: script/PATH" becomes "script/DIR/PATH", and a
 * command key (exec, docs, stateTransform, streamTransform) whose first
 * word is a relative path with a '/' ("./handler") gets DIR, quoted for
 * /bin/sh, before that word; prompt_meta() returns the resolved values.
 * CORE_ENOTFOUND ("prompt file 'x' not found"),
 * CORE_EINVAL (front matter or template error, with file:line),
 * CORE_ETOOBIG (over PROMPT_MAX_FILE), CORE_ESYS, CORE_ENOMEM.
 */
enum core_status prompt_load(const char *path, struct prompt **out,
                             struct core_err *e);

/* Parse a prompt from text[0..len); source_name names it in messages. */
enum core_status prompt_parse(const char *text, size_t len,
                              const char *source_name, struct prompt **out,
                              struct core_err *e);

void prompt_free(struct prompt *p);     /* NULL ok */

/*
 * The front matter as a JSON object (borrowed, valid until prompt_free):
 * model, config, tools, input {schema, default}, output, maxTurns,
 * description and every other key as written.  Checked at load: model and
 * description are strings, tools an array of strings, config/input/output
 * mappings, input.default a mapping, maxTurns a non-negative integer.
 */
const json_t *prompt_meta(const struct prompt *p);

/* The name given at load (the path for prompt_load). */
const char *prompt_source(const struct prompt *p);

/* Whether the body contains a {{history}} marker (rendered or not). */
int prompt_has_history_marker(const struct prompt *p);

/*
 * Render the prompt into an array of Genkit Messages
 * ({"role","content":[parts],"metadata"?}).
 *   input    the prompt input (object or NULL), shallow-merged over the
 *            front matter's input.default
 *   state    the session's custom state, seen as {{@state}} (may be NULL)
 *   history  array of Messages or NULL; placed per runtime-semantics §3.5.
 *            History messages in the result are deep copies whose metadata
 *            carries "_genkit_history": true; rendered messages carry no tag.
 * *messages is a new reference.  Errors: CORE_EINVAL (input not an object,
 * history not an array of message objects, a render error with file:line),
 * CORE_ETOOBIG, CORE_ENOMEM.
 */
enum core_status prompt_render(const struct prompt *p, const json_t *input,
                               const json_t *state, const json_t *history,
                               json_t **messages, struct core_err *e);

#endif
