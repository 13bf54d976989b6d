/* cli_parse.c - a command line read against the command's tables: its
 * options (getopt_long, "did you mean", values checked and --store
 * passwords hidden), the common options (--help, --man, --completion,
 * ... answered by cli_doc.c) and its subcommand, with the checks of its
 * operands and of the options only some subcommands take.  See cli.h. */
#include "cli.h"
#include "cli_int.h"
#include "../libcore/base/suggest.h"
#include "../libcore/base/utf8.h"
#include "../store/store.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef AGENTKIT_VERSION
#define AGENTKIT_VERSION "unknown"
#endif

static const struct cli_opt hidden_opts[] = {
	{ CLI_OPT_LIST, "list-options", NULL, NULL },
	{ CLI_OPT_MODEL_NAMES, "list-model-names", NULL, NULL },
	{ 0 }
};

/* ---- the subcommand ---- */

/* The options given to cli_next(), by their index in cli_cur->opts. */
static unsigned char seen[128];

static const struct cli_sub *sub_named(const char *name)
{
	for (const struct cli_sub *sub = cli_cur->subs; sub && sub->name; sub++)
		if (!strcmp(sub->name, name))
			return sub;
	return NULL;
}

enum core_status cli_sub_find(int *argc, char ***argv, const struct cli_sub **sub)
{
	const char *names[64], *near;
	size_t n = 0;
	*sub = NULL;
	if (*argc < 1)
		return CORE_OK;
	if ((*sub = sub_named((*argv)[0]))) {
		(*argc)--;
		(*argv)++;
		return CORE_OK;
	}
	/* A mistyped subcommand (agent-snap lgo SID) is not read as an
	 * operand of the plain form. */
	for (const struct cli_sub *s = cli_cur->subs; s && s->name && n < 63; s++)
		names[n++] = s->name;
	names[n] = NULL;
	if ((near = core_closest((*argv)[0], strlen((*argv)[0]), names)))
		return cli_usage("unknown subcommand '%s' (did you mean '%s'?); %s '%s %s %s'",
		                 (*argv)[0], near, cli_cur->plain_hint, cli_cur->name,
		                 cli_cur->plain_sub, (*argv)[0]);
	return CORE_OK;
}

/* "a, b and c": the subcommands that take option name. */
static void takers(const char *name, char *buf, size_t size)
{
	size_t n = 0, count = 0, k = 0;
	buf[0] = 0;
	for (const struct cli_sub *s = cli_cur->subs; s && s->name; s++)
		count += cli_listed(s->opts, name);
	for (const struct cli_sub *s = cli_cur->subs; s && s->name && n < size; s++)
		if (cli_listed(s->opts, name)) {
			k++;
			const char *sep = k == 1 ? "" : k == count ? " and " : ", ";
			n += (size_t)snprintf(buf + n, size - n, "%s%s", sep, s->name);
		}
}

enum core_status cli_sub_check(const struct cli_sub *sub, int argc)
{
	const struct cli_sub *as = sub ? sub : sub_named(cli_cur->plain_sub);
	if (sub && sub->max == 0 && argc > 0)
		return cli_usage("%s takes no operands", sub->name);
	if (sub && sub->min == 1 && sub->max == 1 && argc != 1)
		return cli_usage("%s takes one %s", sub->name, sub->operand);
	if (sub && argc < sub->min)
		return cli_usage("%s needs %ss", sub->name, sub->operand);
	if (sub && sub->max == 1 && argc > 1)
		return cli_usage("%s takes at most one %s", sub->name, sub->operand);
	if (sub && sub->max >= 0 && argc > sub->max)
		return cli_usage("%s takes at most %d %ss", sub->name, sub->max, sub->operand);
	for (size_t i = 0; cli_cur->opts && cli_cur->opts[i].name && i < sizeof seen; i++) {
		const char *name = cli_cur->opts[i].name;
		char who[256];
		if (!seen[i] || (as && cli_listed(as->opts, name)))
			continue;
		takers(name, who, sizeof who);
		if (*who)
			return cli_usage("--%s applies to %s", name, who);
	}
	return CORE_OK;
}

/* ---- the options ---- */

static struct option *longs;
static char shorts[128];

static void build_longs(void)
{
	size_t n = 0, k = 0, s = 0;
	const struct cli_opt *sets[] = { cli_cur->opts, cli_common_opts, hidden_opts };
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
			if (cli_is_short(o->key) && s + 3 < sizeof shorts) {
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
	for (const struct cli_opt *o = cli_cur->opts; o && o->name && n < 100; o++)
		names[n++] = o->name;
	for (const struct cli_opt *o = cli_common_opts; o->name; o++)
		names[n++] = o->name;
	names[n] = NULL;
	return core_closest(arg + 2, strcspn(arg + 2, "="), names);
}

/*
 * The option values cli_next() hands out as copies (a --store value whose
 * password was wiped from the command line, TEXT made valid UTF-8): they
 * live as long as the process (the option's value points at one), and a
 * list keeps them reachable for the leak checker.
 */
struct kept_arg {
	struct kept_arg *next;
	char text[];
};
static struct kept_arg *kept_args;

/* Room for n bytes and a NUL, kept for the process; exits without memory. */
static char *kept_buf(size_t n)
{
	struct kept_arg *k = malloc(sizeof *k + n + 1);
	if (!k) {
		cli_warn("out of memory");
		cli_exit(CORE_ENOMEM);
	}
	k->next = kept_args;
	kept_args = k;
	return k->text;
}

/*
 * arg, the value of a --store option inside the command line, with each
 * password (store_location_password()) wiped from the command line the
 * kernel shows as /proc/PID/cmdline (ps, a same-user tool): the value is
 * copied to the heap and, in the original bytes, each password becomes
 * "***" (or as many '*' as it is long, when shorter) and the rest moves
 * up over the difference, NULs after it, as mysql does with -p.  A
 * detached worker is a fork of this process: it shows the same wiped
 * line.  Returns the copy (arg itself when it holds no password).
 */
static const char *hide_store_password(char *arg)
{
	size_t n = strlen(arg), at = 0, len, r = 0, w = 0;
	char *copy;
	if (!store_location_password(arg, &at, &len))
		return arg;
	copy = memcpy(kept_buf(n), arg, n + 1);
	/* From the copy into arg: what is written never passes what is read. */
	for (at = 0; store_location_password(copy, &at, &len); at = r) {
		size_t stars = len < 3 ? len : 3;
		memmove(arg + w, copy + r, at - r);
		w += at - r;
		memset(arg + w, '*', stars);
		w += stars;
		r = at + len;
	}
	memmove(arg + w, copy + r, n - r);
	w += n - r;
	memset(arg + w, 0, n - w);
	return copy;
}

/*
 * An option's value as text from outside (DESIGN §9): a path, a
 * directory, a command or an agent (a name or a .prompt file) is the
 * system's bytes and kept as they are; TEXT (-m, --system) is made valid
 * UTF-8, each bad byte U+FFFD (utf8.h); any other value (an ID, a name,
 * JSON, a duration) must be valid UTF-8 already: a usage error otherwise.
 */
static const char *checked_value(const struct cli_opt *o, const char *v)
{
	size_t n = strlen(v);
	char *fixed;
	if (utf8_valid(v, n) == n)
		return v;
	switch (cli_kind_of(o)) {
	case CLI_FILE: case CLI_DIR: case CLI_COMMAND: case CLI_AGENT:
		return v;
	default:
		break;
	}
	fixed = kept_buf(utf8_fixed_len(v, n));
	utf8_fix_copy(fixed, v, n);
	if (!strcmp(o->arg, "TEXT"))
		return fixed;
	cli_usage("--%s: '%s' is not valid UTF-8", o->name, fixed);
	cli_exit(CORE_EUSAGE);
}

/* The option of the table named by the long name s[0..n) (getopt_long's
 * rule: exact, else the one it abbreviates), or NULL. */
static const struct cli_opt *long_opt(const char *s, size_t n)
{
	const struct cli_opt *found = NULL;
	int many = 0;
	for (const struct cli_opt *o = cli_cur->opts; o && o->name; o++) {
		if (strlen(o->name) == n && !strncmp(o->name, s, n))
			return o;
		if (!strncmp(o->name, s, n)) {
			many += found != NULL;
			found = o;
		}
	}
	return many ? NULL : found;
}

static const struct cli_opt *short_opt(char c)
{
	for (const struct cli_opt *o = cli_cur->opts; o && o->name; o++)
		if (o->key == (unsigned char)c && cli_is_short(o->key))
			return o;
	return NULL;
}

static int dropped(const struct cli_opt *o, const int *drop)
{
	for (; o && *drop; drop++)
		if (o->key == *drop)
			return 1;
	return 0;
}

/* One word, in single quotes unless it needs none. */
static enum core_status add_word(struct core_buf *b, const char *w)
{
	enum core_status st = b->len ? core_buf_addc(b, ' ') : CORE_OK;
	if (*w && !w[strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	                       "0123456789_./:=@%+,-")])
		return st ? st : core_buf_adds(b, w);
	st = st ? st : core_buf_addc(b, '\'');
	for (; !st && *w; w++)
		st = *w == '\'' ? core_buf_adds(b, "'\\''") : core_buf_addc(b, *w);
	return st ? st : core_buf_addc(b, '\'');
}

enum core_status cli_command_line(char *const *args, int n, const int *drop,
                                  struct core_buf *b)
{
	enum core_status st = n > 0 ? add_word(b, args[0]) : CORE_OK;
	int operands = 0;
	for (int i = 1; !st && i < n; i++) {
		const char *a = args[i];
		const struct cli_opt *o = NULL;
		int takes_next = 0;
		if (operands || a[0] != '-' || !a[1]) {
			st = add_word(b, a);
			continue;
		}
		if (!strcmp(a, "--")) {
			operands = 1;
		} else if (a[1] == '-') {
			o = long_opt(a + 2, strcspn(a + 2, "="));
			takes_next = o && o->arg && !strchr(a, '=');
		} else {
			/* A cluster of flags ends at the first that takes a value:
			 * the rest of the word, or the next one, is that value. */
			for (const char *c = a + 1; *c; c++) {
				const struct cli_opt *x = short_opt(*c);
				if (x && dropped(x, drop))
					o = x;
				if (x && x->arg) {
					takes_next = !c[1];
					o = o ? o : x;
					break;
				}
			}
		}
		if (!dropped(o, drop)) {
			st = add_word(b, a);
			if (!st && takes_next && i + 1 < n)
				st = add_word(b, args[++i]);
		} else if (takes_next) {
			i++;
		}
	}
	return st;
}

int cli_next(int argc, char **argv, const char **arg)
{
	int c, idx = -1;
	if (!longs)
		build_longs();
	opterr = 0;
	c = getopt_long(argc, argv, shorts, longs, &idx);
	*arg = optarg;
	switch (c) {
	case CLI_OPT_HELP:
		cli_help();
		cli_exit(CORE_OK);
	case CLI_OPT_VERSION:
		printf("%s (agentkit) %s\n", cli_cur->name, AGENTKIT_VERSION);
		cli_exit(CORE_OK);
	case CLI_OPT_MAN:
		cli_man();
		cli_exit(CORE_OK);
	case CLI_OPT_LIST:
		cli_list_options();
		cli_exit(CORE_OK);
	case CLI_OPT_MODEL_NAMES:
		cli_list_model_names();
		cli_exit(CORE_OK);
	case CLI_OPT_COMPLETION:
		cli_exit(cli_completion(optarg));
	case '?':
		if (optopt && optopt < CLI_LONG)
			cli_usage("unknown option '-%c'", optopt);
		else if (near_option(argv[optind - 1]))   /* the name, not its "=value" */
			cli_usage("unknown option '%.*s' (did you mean '--%s'?)",
			          (int)strcspn(argv[optind - 1], "="), argv[optind - 1],
			          near_option(argv[optind - 1]));
		else
			cli_usage("unknown option '%.*s'", (int)strcspn(argv[optind - 1], "="),
			          argv[optind - 1]);
		cli_exit(CORE_EUSAGE);
	case ':':
		if (optopt && optopt < CLI_LONG)
			cli_usage("option '-%c' needs a value", optopt);
		else
			cli_usage("option '%s' needs a value", argv[optind - 1]);
		cli_exit(CORE_EUSAGE);
	default:
		for (size_t i = 0; cli_cur->opts && cli_cur->opts[i].name && i < sizeof seen; i++)
			if (cli_cur->opts[i].key == c) {
				seen[i] = 1;
				if (optarg && !strcmp(cli_cur->opts[i].name, "store"))
					*arg = hide_store_password(optarg);
				else if (optarg)
					*arg = checked_value(&cli_cur->opts[i], optarg);
			}
		return c;
	}
}
