/*
 * frontmatter.h - the YAML front matter of a prompt file (prompt.c), and
 * the same YAML-to-JSON conversion for agentkit's other YAML files (the
 * models file, endpoints.c).  This is the one file that includes yaml.h.
 */
#ifndef CORE_FRONTMATTER_H
#define CORE_FRONTMATTER_H

#include <stddef.h>

#include <jansson.h>

#include "status.h"

/* Deepest front-matter nesting; most JSON values front matter may expand
 * to (aliases included). */
#define PROMPT_MAX_YAML_DEPTH 64
#define PROMPT_MAX_YAML_NODES 100000

/*
 * Parse fm[0..n), the text between a prompt file's "---" lines, into *out:
 * a new JSON object (an empty front matter is {}).  name and line0 (the
 * file line of fm's first line) place messages: "NAME:LINE: ...".  The
 * fields agentkit reads are type-checked (model, description, name:
 * strings; config, input, output: mappings; tools: a sequence of names;
 * maxTurns: an integer >= 0; input.default: a mapping).  On error *out is
 * NULL: CORE_EINVAL (bad YAML, more than one document, nesting deeper
 * than PROMPT_MAX_YAML_DEPTH, more than PROMPT_MAX_YAML_NODES values, a
 * field of the wrong type), CORE_ENOMEM.
 */
enum core_status frontmatter_parse(const char *fm, size_t n, const char *name, size_t line0,
                                   json_t **out, struct core_err *e);

/*
 * Parse text[0..n), one YAML document, into *out: a new JSON value (the
 * conversion of frontmatter_parse: YAML 1.2 core-schema scalars, anchors
 * and aliases, at most PROMPT_MAX_YAML_DEPTH deep and PROMPT_MAX_YAML_NODES
 * values; an empty document is null).  No field is type-checked.  On
 * error *out is NULL: CORE_EINVAL "invalid YAML: WHY (at NAME:LINE)" (bad
 * YAML, more than one document, the bounds, a tag other than the core
 * schema's), CORE_ENOMEM.
 */
enum core_status yaml_to_json(const char *text, size_t n, const char *name, json_t **out,
                              struct core_err *e);

#endif
