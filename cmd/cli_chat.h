/*
 * cli_chat.h - the line a person types in agent-run's chat (docs/agent-run.md,
 * "Chat"): a prompt with line editing and history from libedit (BSD's
 * editline, loaded on first use), on /dev/tty, so that stdin can be what
 * the caller's signals make of it.
 */
#ifndef CMD_CLI_CHAT_H
#define CMD_CLI_CHAT_H

struct chat_line;

/*
 * The editor on /dev/tty, prog naming it (libedit's ~/.editrc section);
 * NULL with why (whylen bytes) when libedit or the terminal is missing.
 * With history, the lines of earlier chats come back from
 * ${XDG_STATE_HOME:-$HOME/.local/state}/agentkit/chat_history, and each
 * line typed is written there (mode 0600, the last 500), except one that
 * begins with a blank, is over 4 KiB, or holds a word shaped like a key
 * or token (sk-..., AIza..., ghp_..., Bearer ..., token=...).
 */
struct chat_line *chat_line_open(const char *prog, int history, char *why, size_t whylen);

/*
 * One line typed after prompt, without its newline, in *line (malloc'd,
 * the caller's), and entered in the history: 1; 0 at the end (Ctrl-D on
 * an empty line, the terminal gone); -1 when a signal came (Ctrl-C).
 */
int chat_line_read(struct chat_line *c, const char *prompt, char **line);

void chat_line_close(struct chat_line *c);     /* NULL is a no-op */

#endif
