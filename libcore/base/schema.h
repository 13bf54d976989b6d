/*
 * schema.h - checking a value against a JSON Schema: a tool's input
 * against its manifest's inputSchema before the tool runs.
 *
 * The keywords tool schemas use, in the draft 2020-12 and draft-07
 * spellings: boolean schemas; type (one or a list; "integer" admits
 * integral reals and big integers); enum, const; minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum (numbers, or draft-04 booleans),
 * multipleOf; minLength, maxLength (in code points); properties, required,
 * additionalProperties, minProperties, maxProperties; items, prefixItems
 * (and draft-07 array items), additionalItems, minItems, maxItems,
 * uniqueItems; allOf, anyOf, oneOf, not; $ref to "#" or into the root
 * schema ("#/$defs/x", "#/definitions/x"); OpenAPI's nullable.  Other
 * keywords are annotations here and pass: format, pattern and
 * patternProperties (an object with patternProperties gets no
 * additionalProperties check, since which keys the patterns cover is not
 * known), title, description, default, examples.
 *
 * Nothing here allocates a result or prints.
 */
#ifndef CORE_SCHEMA_H
#define CORE_SCHEMA_H

#include <jansson.h>

#include "status.h"

/*
 * CORE_OK when v matches schema.  Otherwise CORE_EINVAL and a message
 * for each mismatch found, led by where it is in v as a JSON Pointer:
 * "/city: expected a string, got a number", "missing required property
 * \"title\"" (at the root).  Every member of an object and item of an
 * array is checked, so one message may list several, in order, "; "
 * between (as many as fit whole in e->msg, then "; ..."); past a value's
 * first mismatch of its own (a wrong type), its other keywords are not
 * checked, and a branch of anyOf/oneOf/not says only that it failed.  A schema that is itself unusable (too
 * deeply nested, a $ref that cannot be resolved, a subschema that is not
 * an object or a boolean) is CORE_EINTERNAL, "the input schema is
 * unusable: ...": no value matches it, and no other value would.
 */
enum core_status schema_check(const json_t *schema, const json_t *v, struct core_err *e);

#endif
