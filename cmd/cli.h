/*
 * cli.h - what every agentkit command shares on the command line.
 *
 * Only cmd/ prints or exits; this is where it does so.  Each command
 * describes itself once in a struct cli_prog (usage, option table, examples,
 * exit codes); from that one description cli_next() parses options
 * (getopt_long), and --help, --version, the man page (--man) and the shell
 * completions (--completion bash|zsh|fish) are generated, so they cannot
 * drift apart.  A command with subcommands describes each in the same way,
 * as a row of struct cli_sub.  The man page adds the sections every
 * command shares: ENVIRONMENT (the model providers' variables read from
 * their table, model.h), FILES and SEE ALSO.  --list-options prints the
 * long options, one per line, for tests and completion scripts, and
 * --list-model-names the models file's endpoints and their models (from
 * the file alone, quietly), for the completion of models.
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

#include "../libcore/base/buf.h"
#include "../libcore/base/json.h"
#include "../libcore/base/lines.h"
#include "../libcore/base/status.h"

/*
 * What an option's value, or a command's operands, are: the shell
 * completions offer candidates by kind.  The lists that live elsewhere are
 * read when the user presses Tab, quietly (no message, nothing on error):
 * agent names from "agent-run --list"; session and snapshot IDs, and the
 * models run, from "agent-snap sessions" (its first 200 rows); the models
 * file's models from "agent-run --list-model-names".
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
	CLI_MODEL,      /* the providers (echo, script/FILE, openai/, ...), then the
	                   models file's endpoints and their models, and the
	                   models of the newest sessions in the store */
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

/*
 * A subcommand: one row of a command's table (cli_prog.subs).  From the
 * table come the dispatch (cli_sub_find, with "did you mean" for a
 * mistyped word), the checks of the operand count and of the options
 * (cli_sub_check), the synopsis lines, the Subcommands section of --help
 * and of the man page, and the words the shell completions offer.
 */
struct cli_sub {
	const char *name;       /* the word: "log" */
	const char *synopsis;   /* what follows the word: "[--keep N] [SID]", may be "" */
	int min, max;           /* how many operands it takes; max -1: no limit */
	const char *operand;    /* one operand in messages: "SID" ("log takes one
	                           SID"), plural with "s" ("rm needs session IDs") */
	enum cli_kind kind;     /* what the operands are */
	/* The long options (space-separated names) that only some
	 * subcommands take and this one does: an option named in some row's
	 * opts is refused by every other row ("--since applies to
	 * sessions").  NULL: none. */
	const char *opts;
	unsigned flags;         /* the command's own: what the handler needs */
	const char *help;       /* one paragraph */
	/* The handler: ctx is the command's own state, argc and argv the
	 * operands after the word. */
	enum core_status (*run)(void *ctx, int argc, char **argv);
};

struct cli_prog {
	const char *name;
	const char *purpose;        /* one line, for --help and the man page */
	const char *synopsis;       /* "[OPTION]... DOC PATCH", lines split by \n */
	const char *description;    /* paragraphs */
	const struct cli_opt *opts; /* terminated by { 0 } */
	const char *examples;       /* "$ command\n  what it does\n..." */
	const struct cli_exitcode *exits;   /* terminated by { -1, NULL } */
	const struct cli_sub *subs; /* terminated by { 0 }; may be NULL */
	/* With subs: the row whose options apply when the first operand is
	 * no subcommand word (the command's plain form), and what to say for
	 * a first operand close to a word ("lgo"), before "'PROG PLAIN lgo'":
	 * "to read a snapshot of that ID use". */
	const char *plain_sub;
	const char *plain_hint;
	const struct cli_value *values; /* terminated by { 0 }; may be NULL */
	enum cli_kind operands;     /* what the operands are (CLI_AUTO: files) */
};

extern const char *cli_progname;

/* Remember the program, ignore SIGPIPE (EPIPE is handled), set stdout up. */
void cli_start(const struct cli_prog *prog);

/*
 * The secrets policy every command gives spawn_protect_keys() (spawn.h):
 * the provider keys (model_key_variable(): the provider table and the
 * models file) and the store's credentials (store_secret_variable():
 * PGPASSWORD, PGPASSFILE, an AGENTKIT_STORE that holds a password).  No
 * tool, MCP server, handler, transform or credential command inherits
 * one unless its manifest names it.  Every command that takes --store
 * gives it at the start of main, after cli_start(): cli_protect_secrets()
 * (spawn_protect_keys(cli_secret_variable); out of memory, the only way
 * it fails, is reported and the exit).
 */
int cli_secret_variable(const char *entry);
void cli_protect_secrets(void);

/*
 * The next option: its key, with *arg set to its value (or NULL); -1 when
 * the options end (optind is then the first operand).  The value of an
 * option named "store" that holds a password is a copy, the password
 * wiped from the command line (/proc/PID/cmdline, ps) as soon as it is
 * parsed.  Handles --help,
 * --version, --man, --completion and --list-options itself (printing and
 * exiting 0) and exits 100 with a message on an unknown option or a
 * missing value.
 */
int cli_next(int argc, char **argv, const char **arg);

/*
 * The command line args[0..n) (a copy of argv made before cli_next()
 * reordered it; args[0] the program) onto b as a shell reads it, each
 * word quoted where it must be, less the options whose keys are in drop
 * (ended by 0) and their values: the same command again, for a message
 * that names the next step.  A password cli_next() wiped reads as it now
 * does ("***").  Errors: CORE_ENOMEM.
 */
enum core_status cli_command_line(char *const *args, int n, const int *drop,
                                  struct core_buf *b);

/*
 * The subcommand named by the first of the *argc operands at *argv: *sub,
 * with the word dropped from *argc and *argv; *sub NULL when the first
 * operand is none of the words (or there is none).  A first operand one
 * typo away from a word is a usage error (printed; CORE_EUSAGE): "unknown
 * subcommand 'lgo' (did you mean 'log'?); ...".
 */
enum core_status cli_sub_find(int *argc, char ***argv, const struct cli_sub **sub);
/*
 * Whether sub (NULL: the plain form, as prog->plain_sub) takes argc
 * operands and the options given to cli_next(); a usage error (printed;
 * CORE_EUSAGE) when not: "log takes one SID", "--since applies to
 * sessions".
 */
enum core_status cli_sub_check(const struct cli_sub *sub, int argc);

/* "prog: message" on stderr. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print e's message (nothing for CORE_EPIPE) and return e->st. */
enum core_status cli_report(const struct core_err *e);
/* Print "prog: message" and "try 'prog --help'"; return CORE_EUSAGE. */
enum core_status cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Append arg (borrowed) to the NULL-terminated vector *v of *n entries
 * (grown with realloc(); free() it).  Out of memory: printed, CORE_ENOMEM. */
enum core_status cli_push_arg(const char ***v, size_t *n, const char *arg);
/* A --header value ("NAME: VALUE") appended as cli_push_arg() does; one
 * without a colon is cli_usage(). */
enum core_status cli_push_header(const char ***v, size_t *n, const char *arg);
/* A size flag's value ("64M"), at least 1 and at most SIZE_MAX / 2:
 * CORE_OK with *out, else cli_usage() naming the flag. */
enum core_status cli_size(const char *flag, const char *arg, size_t *out);
/* A count flag's value, 1 to max: CORE_OK with *out, else cli_usage()
 * "FLAG must be a number from 1 to MAX, got 'ARG'". */
enum core_status cli_count(const char *flag, const char *arg, long max, int64_t *out);

/* Write to stdout.  CORE_EPIPE when the reader went away, CORE_ESYS
 * (message in e) for any other failure. */
enum core_status cli_write(const void *p, size_t n, struct core_err *e);
/* Write b's bytes and a newline. */
enum core_status cli_write_line(const struct core_buf *b, struct core_err *e);
/* Write v as one line of compact JSON (jv_dump) and a newline. */
enum core_status cli_write_json(const json_t *v, struct core_err *e);
enum core_status cli_flush(struct core_err *e);
/* A stream filter's flush, before reading its next record: only when that
 * read would wait (core_lines_ready() is 0), so records that arrived
 * together cost one write and nothing printed waits for more input. */
enum core_status cli_flush_idle(struct core_lines *r, struct core_err *e);

/*
 * The single exit path of every main(): flush and close stdout (a failure
 * there turns success into 111 with "unable to write output"), and return
 * the exit code for st.
 */
int cli_finish(enum core_status st);

/* Unconditional exit with st's code, after cli_finish()'s checks. */
noreturn void cli_exit(enum core_status st);

/*
 * End the process with code once everything it owns is written and closed
 * (after cli_finish()): every stdio stream is flushed, then the process
 * ends without the libraries' exit handlers (OpenSSL's clean-up walks its
 * tables for about 0.5 M instructions, 3% of a model turn) and without
 * freeing the heap, which the kernel drops whole.  Sanitizer builds exit()
 * as usual, so leak checking stays exact.
 */
noreturn void cli_leave(int code);

#endif
