/* cli.c - what every agentkit command stands on: the command being run,
 * messages, checked output, the end, and the walkers of its option and
 * subcommand tables; the help, man page and completions generated from the
 * tables are cli_doc.c's, the parsing of a command line cli_parse.c's.
 * See cli.h. */
#include "cli.h"
#include "cli_int.h"
#include "../libcore/model/model.h"
#include "../libcore/model/registry.h"
#include "../libcore/base/spawn.h"
#include "../libcore/base/util.h"
#include "../store/store.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *cli_progname = "agentkit";
const struct cli_prog *cli_cur;

const struct cli_opt cli_common_opts[] = {
	{ CLI_OPT_HELP, "help", NULL, "show this help and exit" },
	{ CLI_OPT_VERSION, "version", NULL, "print the version and exit" },
	{ CLI_OPT_MAN, "man", NULL, "print the man page (roff) and exit" },
	{ CLI_OPT_COMPLETION, "completion", "SHELL", "print the completion script for SHELL (bash, zsh, fish) and exit" },
	{ 0 }
};

void cli_start(const struct cli_prog *p)
{
	static char outbuf[1 << 16];
	cli_cur = p;
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

enum core_status cli_push_arg(const char ***v, size_t *n, const char *arg)
{
	const char **nv = realloc(*v, (*n + 2) * sizeof *nv);
	if (!nv)
		return cli_report(&(struct core_err){ CORE_ENOMEM, 0, "out of memory" });
	nv[(*n)++] = arg;
	nv[*n] = NULL;
	*v = nv;
	return CORE_OK;
}

enum core_status cli_push_header(const char ***v, size_t *n, const char *arg)
{
	if (!strchr(arg, ':'))
		return cli_usage("--header must be 'NAME: VALUE'");
	return cli_push_arg(v, n, arg);
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

enum core_status cli_count(const char *flag, const char *arg, long max, int64_t *out)
{
	char *end;
	long n = strtol(arg, &end, 10);
	if (!*arg || *end || n < 1 || n > max)
		return cli_usage("%s must be a number from 1 to %ld, got '%s'", flag, max, arg);
	*out = n;
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

enum core_status cli_flush_idle(struct core_lines *r, struct core_err *e)
{
	return core_lines_ready(r) ? CORE_OK : cli_flush(e);
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

noreturn void cli_leave(int code)
{
	if (CORE_EXIT_FREES)
		exit(code);
	fflush(NULL);
	_exit(code);
}

/* ---- the option table ---- */

void cli_each_opt(void (*fn)(const struct cli_opt *, void *), void *ctx)
{
	for (const struct cli_opt *o = cli_cur->opts; o && o->name; o++)
		fn(o, ctx);
	for (const struct cli_opt *o = cli_common_opts; o->name; o++)
		fn(o, ctx);
}

int cli_is_short(int key)
{
	return key > 0 && key < CLI_LONG;
}

/* What the command's value table says about o, or NULL. */
const struct cli_value *cli_value_of(const struct cli_opt *o)
{
	for (const struct cli_value *v = cli_cur->values; v && v->opt; v++)
		if (!strcmp(v->opt, o->name))
			return v;
	return NULL;
}

/* The kind of o's value: the value table's, else from its placeholder. */
enum cli_kind cli_kind_of(const struct cli_opt *o)
{
	static const struct {
		const char *arg;
		enum cli_kind kind;
	} by_arg[] = {
		{ "FILE", CLI_FILE }, { "PATH", CLI_FILE }, { "DIR", CLI_DIR },
		{ "CMD", CLI_COMMAND }, { "SID", CLI_SESSION }, { "AGENT", CLI_AGENT },
		{ "SHELL", CLI_WORDS },
	};
	const struct cli_value *v = cli_value_of(o);
	if (v && v->kind != CLI_AUTO)
		return v->kind;
	for (size_t i = 0; i < sizeof by_arg / sizeof by_arg[0]; i++)
		if (!strcmp(o->arg, by_arg[i].arg))
			return by_arg[i].kind;
	return CLI_TEXT;
}

/* ---- the subcommand table ---- */

/* Is name one of the space-separated words of list (may be NULL)? */
int cli_listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		size_t len = strcspn(p, " ");
		if (len == n && !strncmp(p, name, n))
			return 1;
		p += len;
		p += strspn(p, " ");
	}
	return 0;
}

/* "[OPTION]... NAME SYNOPSIS": a subcommand's synopsis line. */
const char *cli_sub_line(const struct cli_sub *sub, char *buf, size_t size)
{
	snprintf(buf, size, "[OPTION]... %s%s%s", sub->name, *sub->synopsis ? " " : "",
	         sub->synopsis);
	return buf;
}

/* The subcommand words, space-separated, for the completions. */
const char *cli_sub_words(void)
{
	static char words[1024];
	size_t n = 0;
	for (const struct cli_sub *sub = cli_cur->subs; sub && sub->name; sub++)
		n += (size_t)snprintf(words + n, n < sizeof words ? sizeof words - n : 0, "%s%s",
		                      n ? " " : "", sub->name);
	return words;
}

/* ---- the secrets policy ---- */

int cli_secret_variable(const char *entry)
{
	return model_key_variable(entry) || store_secret_variable(entry);
}

void cli_protect_secrets(void)
{
	struct core_err e = { 0 };
	if (spawn_protect_keys(cli_secret_variable, &e))
		cli_exit(cli_report(&e));
}
