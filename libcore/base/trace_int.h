/* trace_int.h - what trace.c and trace_env.c share; not for other files. */
#ifndef CORE_TRACE_INT_H
#define CORE_TRACE_INT_H

#include <jansson.h>

#define DEFAULT_ENDPOINT "http://localhost:4318/v1/traces"
#define DEFAULT_TIMEOUT_MS 10000

/* Set key in an OTLP KeyValue array (replacing), consuming kv (NULL: a
 * failed allocation, nothing set). */
void trace_kv_set(json_t *arr, json_t *kv);

#endif
