/*
 * cli_ask.h - asking the person at the terminal: an MCP server's
 * elicitation/create, put as questions on /dev/tty (docs/mcp.md,
 * "Elicitation"), and the approval of a tool request a turn paused on
 * (docs/agent-run.md, "Answering an interrupt").
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

/*
 * A feed approve callback (feed.h): "approve NAME INPUT? [y/N] " for one
 * interrupted toolRequest part (INPUT cut after 72 bytes with "..."),
 * read from the terminal within ASK_APPROVE_MS.  1 for y or yes, 0 for
 * n, no or an empty answer, -1 for none (the terminal ended, Ctrl-C, the
 * bound passed, or three answers that are neither).
 */
#define ASK_APPROVE_MS (30 * 60 * 1000)
int ask_approve(void *ctx, const json_t *part);

#endif
