/*
 * cli_int.h - internal to cmd/cli.c, cmd/cli_doc.c and cmd/cli_parse.c:
 * the command being run and the table walkers that parsing and the
 * generators share.  cli_parse.c stands on the other two, cli_doc.c on
 * cli.c.
 */
#ifndef CMD_CLI_INT_H
#define CMD_CLI_INT_H

#include <stddef.h>

#include "cli.h"

/* The command cli_start() was given; borrowed for the process. */
extern const struct cli_prog *cli_cur;

/* --help, --version, --man and --completion: every command has them;
 * cli_next() answers them, and the hidden --list-options and
 * --list-model-names the completions call. */
extern const struct cli_opt cli_common_opts[];
enum {
	CLI_OPT_HELP = 'h',
	CLI_OPT_VERSION = CLI_LONG + 200,
	CLI_OPT_MAN,
	CLI_OPT_COMPLETION,
	CLI_OPT_LIST,
	CLI_OPT_MODEL_NAMES,
};

/* fn(o, ctx) for each of the command's options, then the common ones. */
void cli_each_opt(void (*fn)(const struct cli_opt *, void *), void *ctx);

/* What the command's value table says about o, or NULL. */
const struct cli_value *cli_value_of(const struct cli_opt *o);
/* The kind of o's value: the value table's, else from its placeholder
 * (FILE and PATH a file, DIR, CMD, SID, AGENT, SHELL; else CLI_TEXT). */
enum cli_kind cli_kind_of(const struct cli_opt *o);

/* Non-zero when key is a short option's letter (not a CLI_LONG key). */
int cli_is_short(int key);

/* Is name one of the space-separated words of list (may be NULL)? */
int cli_listed(const char *list, const char *name);

/* "[OPTION]... NAME SYNOPSIS": a subcommand's synopsis line, in buf. */
const char *cli_sub_line(const struct cli_sub *sub, char *buf, size_t size);

/* The subcommand words, space-separated (a static buffer). */
const char *cli_sub_words(void);

/* The generators (cli_doc.c), all on stdout. */
void cli_help(void);
void cli_man(void);
int cli_completion(const char *shell);  /* enum core_status */
void cli_list_options(void);            /* the long options, one per line */
/* The models file's model names completion offers, one per line (quiet:
 * nothing when there is no file or it cannot be read). */
void cli_list_model_names(void);

#endif
