/*
 * cli.h - what every agentkit command shares on the command line.
 *
 * Only cmd/ prints or exits; this is where it does so.  Each command
 * describes itself once in a struct cli_prog (usage, option table, examples,
 * exit codes); from that one description cli_next() parses options
 * (getopt_long), and --help, --version, the man page (--man) and the shell
 * completions (--completion bash|zsh|fish) are generated, so they cannot
 * drift apart.  The man page adds the sections every command shares:
 * ENVIRONMENT, FILES and SEE ALSO.  --list-options prints the long options, one per line, for
 * tests and completion scripts.
 *
 * Messages go to stderr in one grammar: "prog: what failed: why", input
 * errors naming their place "(at <stdin>:17)".  Data goes to stdout only
 * through cli_write(), which reports a failed write (">/dev/full") and
 * treats a reader that went away (EPIPE) as a quiet stop.
 */
#ifndef CMD_CLI_H
#define CMD_CLI_H

#include <stdnoreturn.h>
#include <stddef.h>

#include "../libcore/buf.h"
#include "../libcore/json.h"
#include "../libcore/status.h"

/*
 * What an option's value, or a command's operands, are: the shell
 * completions offer candidates by kind.  The lists that live elsewhere are
 * read when the user presses Tab, quietly (no message, nothing on error):
 * agent names from "agent-run --list", session and snapshot IDs from
 * "agent-snap sessions" (at most 200).
 */
enum cli_kind {
	CLI_AUTO,       /* from the placeholder: FILE and PATH a file, DIR a
	                   directory, CMD a command, SID a session ID, AGENT an
	                   agent name, SHELL bash/zsh/fish; otherwise free text */
	CLI_TEXT,       /* free text: nothing offered */
	CLI_FILE,
	CLI_DIR,
	CLI_COMMAND,
	CLI_AGENT,      /* agent names on the agent path, and .prompt files */
	CLI_MODEL,      /* the providers (echo, script/FILE, openai/, ...) */
	CLI_SESSION,    /* session IDs in the store */
	CLI_SNAPSHOT,   /* snapshot IDs in the store (each session's latest) */
	CLI_WORDS,      /* one of the words given in struct cli_value */
};

/* Option keys above 255 are long-only. */
struct cli_opt {
	int key;            /* short letter, or CLI_LONG + n */
	const char *name;   /* long name without "--" */
	const char *arg;    /* value placeholder ("FILE"), NULL for a flag */
	const char *help;   /* one line */
};

/* What an option's value is, where its placeholder does not say:
 * { .opt = "format", .kind = CLI_WORDS, .words = "ndjson text" }. */
struct cli_value {
	const char *opt;    /* the long option's name */
	enum cli_kind kind;
	const char *words;  /* CLI_WORDS: the space-separated values */
};
#define CLI_LONG 256

struct cli_exitcode {
	int code;
	const char *meaning;
};

struct cli_prog {
	const char *name;
	const char *purpose;        /* one line, for --help and the man page */
	const char *synopsis;       /* "[OPTION]... DOC PATCH", lines split by \n */
	const char *description;    /* paragraphs */
	const struct cli_opt *opts; /* terminated by { 0 } */
	const char *examples;       /* "$ command\n  what it does\n..." */
	const struct cli_exitcode *exits;   /* terminated by { -1, NULL } */
	const char *subcommands;    /* space-separated words, for completion */
	const struct cli_value *values; /* terminated by { 0 }; may be NULL */
	enum cli_kind operands;     /* what the operands are (CLI_AUTO: files) */
};

extern const char *cli_progname;

/* Remember the program, ignore SIGPIPE (EPIPE is handled), set stdout up. */
void cli_start(const struct cli_prog *prog);

/*
 * The next option: its key, with *arg set to its value (or NULL); -1 when
 * the options end (optind is then the first operand).  Handles --help,
 * --version, --man, --completion and --list-options itself (printing and
 * exiting 0) and exits 100 with a message on an unknown option or a
 * missing value.
 */
int cli_next(int argc, char **argv, const char **arg);

/* "prog: message" on stderr. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print e's message (nothing for CORE_EPIPE) and return e->st. */
enum core_status cli_report(const struct core_err *e);
/* Print "prog: message" and "try 'prog --help'"; return CORE_EUSAGE. */
enum core_status cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A size flag's value ("64M"), at least 1 and at most SIZE_MAX / 2:
 * CORE_OK with *out, else cli_usage() naming the flag. */
enum core_status cli_size(const char *flag, const char *arg, size_t *out);

/* Write to stdout.  CORE_EPIPE when the reader went away, CORE_ESYS
 * (message in e) for any other failure. */
enum core_status cli_write(const void *p, size_t n, struct core_err *e);
/* Write b's bytes and a newline. */
enum core_status cli_write_line(const struct core_buf *b, struct core_err *e);
/* Write v as one line of compact JSON (jv_dump) and a newline. */
enum core_status cli_write_json(const json_t *v, struct core_err *e);
enum core_status cli_flush(struct core_err *e);

/*
 * The single exit path of every main(): flush and close stdout (a failure
 * there turns success into 111 with "unable to write output"), and return
 * the exit code for st.
 */
int cli_finish(enum core_status st);

/* Unconditional exit with st's code, after cli_finish()'s checks. */
noreturn void cli_exit(enum core_status st);

#endif
