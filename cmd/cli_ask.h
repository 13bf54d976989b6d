/*
 * cli_ask.h - asking the person at the terminal: an MCP server's
 * elicitation/create, put as questions on /dev/tty (docs/mcp.md,
 * "Elicitation").
 *
 * The terminal is /dev/tty, not stdin and stdout, which carry a
 * pipeline's data: a run whose output goes to jq can still be answered.
 * Nothing the server sends reaches the terminal raw: its control bytes
 * (an escape sequence among them) are shown as '?'.
 */
#ifndef CMD_CLI_ASK_H
#define CMD_CLI_ASK_H

#include <stdint.h>

#include <jansson.h>

#include "../libcore/base/status.h"

/* Whether there is a person to ask: stderr is a terminal and /dev/tty
 * opens (a detached worker has none). */
int ask_available(void);

/*
 * An mcp_elicit_fn (mcp.h): the server's message, then each field of its
 * requestedSchema (string, number, integer, boolean, a choice of enum or
 * oneOf values, or an array of such choices), read as typed by deadline.
 * *result is the ElicitResult: accept with the content, decline ("n" at
 * the first question, or a mode other than "form"), or cancel ("c", the
 * terminal gone, three answers a field refuses, or the deadline).
 */
enum core_status ask_elicit(void *ctx, const char *server, const json_t *params,
                            int64_t deadline_ms, json_t **result);

#endif
