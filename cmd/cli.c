/* cli.c - option parsing, help, man pages, completions and checked output
 * shared by the agentkit commands.  See cli.h. */
#include "cli.h"
#include "../libcore/suggest.h"
#include "../libcore/util.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef AGENTKIT_VERSION
#define AGENTKIT_VERSION "unknown"
#endif

const char *cli_progname = "agentkit";
static const struct cli_prog *prog;

enum {
	OPT_HELP = 'h',
	OPT_VERSION = CLI_LONG + 200,
	OPT_MAN,
	OPT_COMPLETION,
	OPT_LIST,
};

static const struct cli_opt common_opts[] = {
	{ OPT_HELP, "help", NULL, "show this help and exit" },
	{ OPT_VERSION, "version", NULL, "print the version and exit" },
	{ 0 }
};
static const struct cli_opt hidden_opts[] = {
	{ OPT_MAN, "man", NULL, NULL },
	{ OPT_COMPLETION, "completion", "SHELL", NULL },
	{ OPT_LIST, "list-options", NULL, NULL },
	{ 0 }
};

void cli_start(const struct cli_prog *p)
{
	static char outbuf[1 << 16];
	prog = p;
	cli_progname = p->name;
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
}

/* ---- messages ---- */

void cli_warn(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fprintf(stderr, "%s: ", cli_progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

enum core_status cli_report(const struct core_err *e)
{
	if (e->st != CORE_EPIPE && e->st != CORE_OK)
		cli_warn("%s", e->msg[0] ? e->msg : core_strerror(e->st));
	return e->st;
}

enum core_status cli_usage(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", cli_progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\ntry '%s --help'\n", cli_progname);
	return CORE_EUSAGE;
}

enum core_status cli_size(const char *flag, const char *arg, size_t *out)
{
	struct core_err e = { 0 };
	uint64_t v;
	if (core_parse_size(arg, &v, &e))
		return cli_usage("%s: %s", flag, e.msg);
	if (!v || v > SIZE_MAX / 2)
		return cli_usage("%s: '%s' is out of range", flag, arg);
	*out = (size_t)v;
	return CORE_OK;
}

/* ---- output ---- */

static enum core_status out_error(struct core_err *e)
{
	if (errno == EPIPE)
		return core_fail(e, CORE_EPIPE, "broken pipe");
	return core_fail_sys(e, "unable to write output");
}

enum core_status cli_write(const void *p, size_t n, struct core_err *e)
{
	if (n && fwrite(p, 1, n, stdout) != n)
		return out_error(e);
	return CORE_OK;
}

enum core_status cli_write_line(const struct core_buf *b, struct core_err *e)
{
	if ((b->len && fwrite(b->p, 1, b->len, stdout) != b->len)
	    || putchar('\n') == EOF)
		return out_error(e);
	return CORE_OK;
}

enum core_status cli_write_json(const json_t *v, struct core_err *e)
{
	/* One buffer per process, reused: a line is written whole or not at all. */
	static struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st;
	core_buf_reset(&b);
	if ((st = jv_dump(v, &b)))
		return core_fail(e, st, "cannot write a JSON line: %s", core_strerror(st));
	return cli_write_line(&b, e);
}

enum core_status cli_flush(struct core_err *e)
{
	if (fflush(stdout) == EOF)
		return out_error(e);
	return CORE_OK;
}

int cli_finish(enum core_status st)
{
	struct core_err e = { 0 };
	int bad = fflush(stdout) == EOF || ferror(stdout);
	int saved = errno;
	if (fclose(stdout) == EOF && !bad) {
		bad = 1;
		saved = errno;
	}
	if (bad && st != CORE_EPIPE) {
		errno = saved;
		if (out_error(&e) == CORE_EPIPE)
			st = CORE_EPIPE;
		else if (st == CORE_OK || st == CORE_FAILED) {
			cli_report(&e);
			st = e.st;
		}
	}
	return core_exit_code(st);
}

noreturn void cli_exit(enum core_status st)
{
	exit(cli_finish(st));
}

/* ---- the option table ---- */

static void each_opt(void (*fn)(const struct cli_opt *, void *), void *ctx)
{
	for (const struct cli_opt *o = prog->opts; o && o->name; o++)
		fn(o, ctx);
	for (const struct cli_opt *o = common_opts; o->name; o++)
		fn(o, ctx);
}

static int is_short(int key)
{
	return key > 0 && key < CLI_LONG;
}

#define HELP_WIDTH 79

/*
 * Print text[0..n) word-wrapped to HELP_WIDTH: the first line continues a
 * line already at column col, later lines start with indent spaces.  Runs of
 * blanks collapse; a newline in the text ends the line.
 */
static void wrap(const char *text, size_t n, int col, int indent)
{
	const char *p = text, *end = text + n;
	while (p < end) {
		const char *w = p;
		while (w < end && *w == ' ')
			w++;
		if (w < end && *w == '\n') {
			putchar('\n');
			printf("%*s", indent, "");
			col = indent;
			p = w + 1;
			continue;
		}
		const char *we = w;
		while (we < end && *we != ' ' && *we != '\n')
			we++;
		if (we == w)
			break;
		int len = (int)(we - w);
		if (col > indent && col + 1 + len > HELP_WIDTH) {
			printf("\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			putchar(' ');
			col++;
		}
		printf("%.*s", len, w);
		col += len;
		p = we;
	}
	putchar('\n');
}

static void help_opt(const struct cli_opt *o, void *ctx)
{
	char left[64];
	(void)ctx;
	if (is_short(o->key))
		snprintf(left, sizeof left, "-%c, --%s%s%s", o->key, o->name,
		         o->arg ? "=" : "", o->arg ? o->arg : "");
	else
		snprintf(left, sizeof left, "    --%s%s%s", o->name,
		         o->arg ? "=" : "", o->arg ? o->arg : "");
	if (strlen(left) > 24)
		printf("  %s\n  %24s  ", left, "");
	else
		printf("  %-24s  ", left);
	wrap(o->help, strlen(o->help), 28, 28);
}

static void print_lines(const char *first, const char *rest, const char *text)
{
	const char *p = text;
	int n = 0;
	while (*p) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		printf("%s%s %.*s\n", n++ ? rest : first, cli_progname, (int)len, p);
		p += len + (e ? 1 : 0);
	}
}

static void help(void)
{
	printf("%s - %s\n\n", prog->name, prog->purpose);
	print_lines("Usage: ", "       ", prog->synopsis);
	if (prog->description) {
		/* Paragraphs are separated by blank lines in the source text. */
		for (const char *p = prog->description; *p;) {
			const char *e = strstr(p, "\n\n");
			size_t len = e ? (size_t)(e - p) : strlen(p);
			putchar('\n');
			wrap(p, len, 0, 0);
			p += len + (e ? 2 : 0);
		}
	}
	printf("\nOptions:\n");
	each_opt(help_opt, NULL);
	if (prog->examples) {
		size_t n = strlen(prog->examples);
		printf("\nExamples:\n%s%s", prog->examples,
		       n && prog->examples[n - 1] != '\n' ? "\n" : "");
	}
	printf("\nExit status:\n");
	for (const struct cli_exitcode *x = prog->exits; x->code >= 0; x++) {
		printf("  %-4d  ", x->code);
		wrap(x->meaning, strlen(x->meaning), 8, 8);
	}
	printf("\nagentkit %s\n", AGENTKIT_VERSION);
}

/* roff: escape backslashes and leading dots/quotes. */
static void roff(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\')
			fputs("\\e", stdout);
		else if (s[i] == '-')
			fputs("\\-", stdout);
		else if ((s[i] == '.' || s[i] == '\'') && (i == 0 || s[i - 1] == '\n'))
			fputs("\\&.", stdout);
		else
			putchar(s[i]);
	}
}

static void roffs(const char *s)
{
	roff(s, strlen(s));
}

static void man_opt(const struct cli_opt *o, void *ctx)
{
	(void)ctx;
	printf(".TP\n.B ");
	if (is_short(o->key))
		printf("\\-%c, ", o->key);
	printf("\\-\\-");
	roffs(o->name);
	if (o->arg) {
		printf("=");
		roffs(o->arg);
	}
	printf("\n");
	roffs(o->help);
	printf("\n");
}

static void man(void)
{
	const char *p;
	printf(".TH %s 1 \"\" \"agentkit %s\" \"agentkit\"\n", prog->name,
	       AGENTKIT_VERSION);
	printf(".SH NAME\n%s \\- ", prog->name);
	roffs(prog->purpose);
	printf("\n.SH SYNOPSIS\n");
	for (p = prog->synopsis; *p;) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		printf(".B %s\n", prog->name);
		roff(p, len);
		printf("\n.br\n");
		p += len + (e ? 1 : 0);
	}
	if (prog->description) {
		printf(".SH DESCRIPTION\n");
		for (p = prog->description; *p;) {
			const char *e = strstr(p, "\n\n");
			size_t len = e ? (size_t)(e - p) : strlen(p);
			printf(".PP\n");
			roff(p, len);
			printf("\n");
			p += len + (e ? 2 : 0);
		}
	}
	printf(".SH OPTIONS\n");
	each_opt(man_opt, NULL);
	if (prog->examples) {
		printf(".SH EXAMPLES\n.nf\n");
		roffs(prog->examples);
		printf(".fi\n");
	}
	printf(".SH EXIT STATUS\n");
	for (const struct cli_exitcode *x = prog->exits; x->code >= 0; x++) {
		printf(".TP\n.B %d\n", x->code);
		roffs(x->meaning);
		printf("\n");
	}
}

/* ---- completions ---- */

static void list_opt(const struct cli_opt *o, void *ctx)
{
	(void)ctx;
	printf("--%s\n", o->name);
}

static void bash_word(const struct cli_opt *o, void *ctx)
{
	(void)ctx;
	printf(" --%s", o->name);
	if (is_short(o->key))
		printf(" -%c", o->key);
}

static void bash_arg(const struct cli_opt *o, void *ctx)
{
	(void)ctx;
	if (o->arg) {
		printf("|--%s", o->name);
		if (is_short(o->key))
			printf("|-%c", o->key);
	}
}

/* Help text safe inside single quotes and zsh's [...] descriptions. */
static void plain(const char *s)
{
	for (; *s; s++)
		if (!strchr("'[]:\\`$", *s))
			putchar(*s);
}

static void zsh_opt(const struct cli_opt *o, void *ctx)
{
	(void)ctx;
	if (is_short(o->key))
		printf("  '(-%c --%s)'{-%c,--%s%s}'[", o->key, o->name, o->key,
		       o->name, o->arg ? "=" : "");
	else
		printf("  '--%s%s[", o->name, o->arg ? "=" : "");
	plain(o->help);
	printf("]%s' \\\n", o->arg ? ":value:_files" : "");
}

static void fish_opt(const struct cli_opt *o, void *ctx)
{
	(void)ctx;
	printf("complete -c %s", prog->name);
	if (is_short(o->key))
		printf(" -s %c", o->key);
	printf(" -l %s%s -d '", o->name, o->arg ? " -r" : "");
	plain(o->help);
	printf("'\n");
}

static int completion(const char *shell)
{
	char fn[64];
	size_t i;
	snprintf(fn, sizeof fn, "_agentkit_%s", prog->name);
	for (i = 0; fn[i]; i++)
		if (fn[i] == '-')
			fn[i] = '_';
	if (!strcmp(shell, "bash")) {
		printf("# bash completion for %s (generated by %s --completion bash)\n",
		       prog->name, prog->name);
		printf("%s()\n{\n\tlocal cur=${COMP_WORDS[COMP_CWORD]}"
		       " prev=${COMP_WORDS[COMP_CWORD-1]}\n", fn);
		printf("\tcase $prev in\n\t__none__");
		each_opt(bash_arg, NULL);
		printf(")\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\")); return;;\n\tesac\n");
		printf("\tif [[ $cur == -* ]]; then\n\t\tCOMPREPLY=($(compgen -W '");
		each_opt(bash_word, NULL);
		printf("' -- \"$cur\"))\n\telse\n\t\tCOMPREPLY=($(compgen -W '%s' -- \"$cur\")"
		       " $(compgen -f -- \"$cur\"))\n\tfi\n}\n",
		       prog->subcommands ? prog->subcommands : "");
		printf("complete -o filenames -F %s %s\n", fn, prog->name);
	} else if (!strcmp(shell, "zsh")) {
		printf("#compdef %s\n# zsh completion for %s (generated by %s"
		       " --completion zsh)\n_arguments -s \\\n", prog->name,
		       prog->name, prog->name);
		each_opt(zsh_opt, NULL);
		if (prog->subcommands)
			printf("  '1:command:(%s)' \\\n", prog->subcommands);
		printf("  '*:file:_files'\n");
	} else if (!strcmp(shell, "fish")) {
		printf("# fish completion for %s (generated by %s --completion fish)\n",
		       prog->name, prog->name);
		each_opt(fish_opt, NULL);
		if (prog->subcommands)
			printf("complete -c %s -n '__fish_use_subcommand' -a '%s'\n",
			       prog->name, prog->subcommands);
	} else {
		return cli_usage("unknown shell '%s' (bash, zsh or fish)", shell);
	}
	return CORE_OK;
}

/* ---- parsing ---- */

static struct option *longs;
static char shorts[128];

static void build(void)
{
	size_t n = 0, k = 0, s = 0;
	const struct cli_opt *sets[] = { prog->opts, common_opts, hidden_opts };
	for (k = 0; k < 3; k++)
		for (const struct cli_opt *o = sets[k]; o && o->name; o++)
			n++;
	longs = calloc(n + 1, sizeof *longs);
	if (!longs) {
		cli_warn("out of memory");
		cli_exit(CORE_ENOMEM);
	}
	shorts[s++] = ':';
	for (n = 0, k = 0; k < 3; k++)
		for (const struct cli_opt *o = sets[k]; o && o->name; o++, n++) {
			longs[n].name = o->name;
			longs[n].has_arg = o->arg ? required_argument : no_argument;
			longs[n].val = o->key;
			if (is_short(o->key) && s + 3 < sizeof shorts) {
				shorts[s++] = (char)o->key;
				if (o->arg)
					shorts[s++] = ':';
			}
		}
}

/* The long option closest to an unknown "--name[=value]" (did you mean),
 * or NULL. */
static const char *near_option(const char *arg)
{
	const char *names[128];
	size_t n = 0;
	if (strncmp(arg, "--", 2))
		return NULL;
	for (const struct cli_opt *o = prog->opts; o && o->name && n < 100; o++)
		names[n++] = o->name;
	for (const struct cli_opt *o = common_opts; o->name; o++)
		names[n++] = o->name;
	names[n] = NULL;
	return core_closest(arg + 2, strcspn(arg + 2, "="), names);
}

int cli_next(int argc, char **argv, const char **arg)
{
	int c, idx = -1;
	if (!longs)
		build();
	opterr = 0;
	c = getopt_long(argc, argv, shorts, longs, &idx);
	*arg = optarg;
	switch (c) {
	case OPT_HELP:
		help();
		cli_exit(CORE_OK);
	case OPT_VERSION:
		printf("%s (agentkit) %s\n", prog->name, AGENTKIT_VERSION);
		cli_exit(CORE_OK);
	case OPT_MAN:
		man();
		cli_exit(CORE_OK);
	case OPT_LIST:
		each_opt(list_opt, NULL);
		cli_exit(CORE_OK);
	case OPT_COMPLETION:
		cli_exit(completion(optarg));
	case '?':
		if (optopt && optopt < CLI_LONG)
			cli_usage("unknown option '-%c'", optopt);
		else if (near_option(argv[optind - 1]))
			cli_usage("unknown option '%s' (did you mean '--%s'?)", argv[optind - 1],
			          near_option(argv[optind - 1]));
		else
			cli_usage("unknown option '%s'", argv[optind - 1]);
		cli_exit(CORE_EUSAGE);
	case ':':
		if (optopt && optopt < CLI_LONG)
			cli_usage("option '-%c' needs a value", optopt);
		else
			cli_usage("option '%s' needs a value", argv[optind - 1]);
		cli_exit(CORE_EUSAGE);
	default:
		return c;
	}
}
