/* cli_doc.c - what the agentkit commands generate from their option and
 * subcommand tables: --help, the man page (--man) and the bash, zsh and
 * fish completions (--completion SHELL).  See cli.h. */
#include "cli.h"
#include "cli_int.h"
#include "../libcore/model/endpoints.h"
#include "../libcore/model/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef AGENTKIT_VERSION
#define AGENTKIT_VERSION "unknown"
#endif

/*
 * ---- what every man page says ----
 *
 * One list for every command: the variables are shared (the store, the
 * agent path and the provider keys matter to several commands), and a
 * page that lists them all stands alone.
 */
struct cli_env {
	const char *name;
	const char *meaning;
};
static const struct cli_env environment[] = {
	{ "AGENTKIT_STORE", "the snapshot store (--store overrides); default ${XDG_STATE_HOME:-$HOME/.local/state}/agentkit/store" },
	{ "AGENTKIT_PATH", "colon-separated directories searched for NAME.prompt after --agents DIR and before ./agents and ${XDG_CONFIG_HOME:-$HOME/.config}/agentkit/agents" },
	{ "AGENTKIT_DELEGATION", "set by agent-run for a sub-agent it runs (front matter agents:): the delegation its session is linked to; taken out of the environment at start" },
	{ "AGENTKIT_DELEGATION_BUDGET", "set by agent-run for a sub-agent it runs: what was left of its usage budget, {\"totalTokens\": N, ...}, which bounds the sub-agent beside its own maxUsage; taken out of the environment at start" },
	{ "AGENTKIT_DELEGATION_DEPTH", "how deep in a chain of sub-agents this agent-run runs (0 or unset: at the top), held to the agents' maxDepth" },
	{ "AGENTKIT_MODEL", "the model when neither --model nor the prompt file names one" },
	{ "AGENTKIT_KEY_FILE", "a file holding the provider key (--key-file overrides)" },
	{ "AGENTKIT_MODELS_FILE", "the models file of named endpoints, JSON or (named .yaml, .yml) YAML (default ${XDG_CONFIG_HOME:-$HOME/.config}/agentkit/models.json or models.yaml); every variable it names is kept from tools like a key" },
	{ "AGENTKIT_HEARTBEAT_INTERVAL", "how often a detached worker heartbeats its row (default 30s)" },
	{ "AGENTKIT_HEARTBEAT_TIMEOUT", "a pending row whose heartbeat is older than this reads expired (default 60s)" },
	{ "AGENTKIT_BUSY_TIMEOUT", "the longest agent-run --session waits for the session's other writer, as --busy-timeout (default 15m)" },
	{ "AGENTKIT_EXEC_TIMEOUT", "the longest a custom agent's handler may be silent (default 5m)" },
	{ "AGENTKIT_EXEC_MAX_BYTES, AGENTKIT_EXEC_MAX_LINES", "the most a custom agent's handler may print in one turn (default 64M, 100000 lines)" },
	{ "AGENTKIT_TRANSFORM_MAX_LINE", "the longest answer a state or stream transform may give (default 64M)" },
	{ "AGENTKIT_TRANSFORM_TIMEOUT", "the longest a state or stream transform, or a docs command, may take to answer (default 30s)" },
	{ "AGENTKIT_STDIN_TIMEOUT", "with -m, the longest agent-run waits for stdin's first byte before it goes on without stdin, as --stdin-timeout (default 3s; 0: stdin is not read)" },
	{ "AGENTKIT_CONTEXT", "set by agent-serve --auth-command for a turn's agent-run: the JSON context the command printed, which the agent's tools and handlers inherit" },
	{ "AGENTKIT_MCP_CONFIG", "colon-separated MCP configuration files ({\"mcpServers\": ...}) whose servers' tools agent-run gives the agent, when no --mcp-config is given" },
	{ "AGENTKIT_HTTP_CONNECT_TIMEOUT", "model requests and --url requests: connection timeout (default 30s)" },
	{ "AGENTKIT_HTTP_IDLE_TIMEOUT", "model requests and --url requests: the longest silence in a response (default 10m)" },
	{ "AGENTKIT_MODEL_TIMEOUT", "model requests: the longest one model call may take, retries included, as agent-run --model-timeout (default 10m; a models-file endpoint's \"timeout\" wins)" },
	{ "AGENTKIT_HTTP_RETRIES", "model requests: retries of a failed request (default 3)" },
	{ "AGENTKIT_HTTP_BACKOFF", "model requests: the first retry's wait, doubling (default 500ms)" },
	{ "AGENTKIT_HTTP_RETRY_BUDGET", "model requests: no retry wait ends later than this (default 2m)" },
	{ "AGENTKIT_HTTP_MAX_RESPONSE", "model requests: the most bytes one streamed response may bring (default 64M)" },
	{ "AGENTKIT_STORE_MAPSIZE, AGENTKIT_STORE_MAPSIZE_MAX", "the store's initial and largest map size" },
	{ "AGENTKIT_STORE_LOCK_TIMEOUT", "the longest a writer waits for the store's write lock, and for a store on a server to come back after its connection was lost (default 60s)" },
	{ "AGENTKIT_STORE_ALLOW_REMOTE", "1: open a store on a network file system anyway" },
	{ "AGENTKIT_STORE_VERIFY", "1: check every save's kept messages against its base (slow; for tests)" },
	{ "AGENTKIT_TEST_PG_SCHEMA_STEPS", "tests only: N, know only the first N steps of the PostgreSQL schema (to make a store of an older version)" },
	{ "AGENTKIT_SESSION_ID, AGENTKIT_SNAPSHOT_ID, AGENTKIT_PARENT_SNAPSHOT_ID, AGENTKIT_TURN_INDEX", "set by agent-run for tools and custom agent handlers" },
	{ "AGENTKIT_TRACE", "1 or true: agent-run exports OpenTelemetry traces, as --trace (docs/tracing.md)" },
	{ "AGENTKIT_TRACE_EXIT_TIMEOUT", "the most a traced agent-run waits for its collector in all, at exit (default 1s; 0: not at all); spans it has not answered for by then are dropped and counted in one line on stderr" },
	{ NULL, NULL }
};
/* After the providers' variables, which come from their table (model.h). */
static const struct cli_env environment_after[] = {
	{ "CURL_CA_BUNDLE, SSL_CERT_FILE, SSL_CERT_DIR", "the CA certificates model requests trust" },
	{ "OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TIMEOUT, OTEL_BSP_MAX_QUEUE_SIZE, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_SDK_DISABLED, GENKIT_TELEMETRY_SERVER", "agent-run's trace export, as the OpenTelemetry SDKs read them (docs/tracing.md)" },
	{ "TRACEPARENT, TRACESTATE", "the trace a traced agent-run continues; set for its tools, handlers and transforms" },
	{ "XDG_STATE_HOME, XDG_CONFIG_HOME, HOME", "where the default store and the personal agent directory are" },
	{ "NO_COLOR", "set and not empty: no colour in text output, even on a terminal" },
	{ NULL, NULL }
};

static const char files_text[] =
	".TP\n.I ${XDG_STATE_HOME:\\-$HOME/.local/state}/agentkit/store/\n"
	"the default store: data.mdb, lock.mdb and wake (LMDB)\n"
	".TP\n.I STORE/logs/SNAPSHOT_ID.log\n"
	"a detached worker's stderr; its log is in the store (agent\\-snap worker\\-log ID)\n"
	".TP\n.I ./agents/NAME.prompt\n"
	"an agent in the working directory; its tools in ./agents/tools/\n"
	".TP\n.I ${XDG_CONFIG_HOME:\\-$HOME/.config}/agentkit/agents/NAME.prompt\n"
	"your own agents, found from any directory; the last directory of the "
	"agent path (after \\-\\-agents, $AGENTKIT_PATH and ./agents)\n"
	".TP\n.I ${XDG_CONFIG_HOME:\\-$HOME/.config}/agentkit/models.json \\fRor\\fP models.yaml\n"
	"named model endpoints (\\-\\-model NAME/MODEL; $AGENTKIT_MODELS_FILE overrides)\n"
	".TP\n.I DIR/tools/NAME.json\n"
	"a tool's manifest beside its executable, in the tools/ directory "
	"beside the prompt file or of any agent directory\n";

/* The pages generated from docs/ (scripts/md2man; installed by make
 * install), by document; "docs/NAME.md" in the text names the page. */
static const struct {
	const char *doc, *page;
} doc_pages[] = {
	{ "prompts", "agentkit-prompts(5)" },
	{ "agent-run", "agentkit-agent-run(7)" },
	{ "custom-agents", "agentkit-custom-agents(7)" },
	{ "providers", "agentkit-providers(7)" },
	{ "detach", "agentkit-detach(7)" },
	{ "transforms", "agentkit-transforms(7)" },
	{ "store", "agentkit-store(7)" },
	{ "json", "agentkit-json(7)" },
	{ "tracing", "agentkit-tracing(7)" },
	{ "mcp", "agentkit-mcp(7)" },
	{ "serve", "agentkit-serve(7)" },
	{ "queue", "agentkit-queue(7)" },
	{ "agents", "agentkit-agents(7)" },
};
static const char see_also[] =
	"agent-run(1), agent-snap(1), agent-wait(1), agent-abort(1), agent-serve(1), "
	"agent-worker(1), "
	"jpatch-diff(1), jpatch-apply(1), agentkit-prompts(5), "
	"agentkit-tools(5), agentkit-script-model(5), agentkit-agent-run(7), "
	"agentkit-custom-agents(7), agentkit-providers(7), agentkit-detach(7), "
	"agentkit-transforms(7), agentkit-store(7), agentkit-json(7), agentkit-tracing(7),"
	" agentkit-mcp(7), agentkit-serve(7), agentkit-queue(7), agentkit-agents(7)";

/* ---- help ---- */

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
		/* a word longer than a whole line (a path) is cut after its last
		 * '/' that fits, else at the margin */
		while (col + len > HELP_WIDTH && HELP_WIDTH > col) {
			int fit = HELP_WIDTH - col, k = fit;
			while (k > 0 && w[k - 1] != '/')
				k--;
			if (k > 0)
				fit = k;
			printf("%.*s\n%*s", fit, w, indent, "");
			w += fit;
			len -= fit;
			col = indent;
		}
		printf("%.*s", len, w);
		col += len;
		p = we;
	}
	putchar('\n');
}

/*
 * An example's command line: as written when it fits, else broken at blanks
 * with a shell line continuation (" \"), so that it still runs when pasted.
 */
static void example_command(const char *line, size_t n)
{
	int indent = 0;
	while (indent + (int)n > HELP_WIDTH) {
		size_t cut = (size_t)(HELP_WIDTH - 2 - indent);
		while (cut > 0 && line[cut] != ' ')
			cut--;
		if (!cut)
			break;
		printf("%.*s \\\n    ", (int)cut, line);
		line += cut + 1;
		n -= cut + 1;
		indent = 4;
	}
	printf("%.*s\n", (int)n, line);
}

static void help_opt(const struct cli_opt *o, void *ctx)
{
	char left[64];
	(void)ctx;
	if (cli_is_short(o->key))
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

void cli_help(void)
{
	printf("%s -", cli_cur->name);
	wrap(cli_cur->purpose, strlen(cli_cur->purpose), (int)strlen(cli_cur->name) + 2, 2);
	putchar('\n');
	for (const char *p = cli_cur->synopsis; *p;) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		int col = printf("%s%s ", p == cli_cur->synopsis ? "Usage: " : "       ", cli_cur->name);
		wrap(p, len, col, col);
		p += len + (e ? 1 : 0);
	}
	for (const struct cli_sub *sub = cli_cur->subs; sub && sub->name; sub++) {
		char line[256];
		int col = printf("       %s ", cli_cur->name);
		cli_sub_line(sub, line, sizeof line);
		wrap(line, strlen(line), col, col);
	}
	if (cli_cur->description) {
		/* Paragraphs are separated by blank lines in the source text. */
		for (const char *p = cli_cur->description; *p;) {
			const char *e = strstr(p, "\n\n");
			size_t len = e ? (size_t)(e - p) : strlen(p);
			putchar('\n');
			wrap(p, len, 0, 0);
			p += len + (e ? 2 : 0);
		}
	}
	if (cli_cur->subs) {
		printf("\nSubcommands:\n");
		for (const struct cli_sub *sub = cli_cur->subs; sub->name; sub++) {
			int col = printf("  %s", sub->name);
			wrap(sub->synopsis, strlen(sub->synopsis), col, 2);
			printf("      ");
			wrap(sub->help, strlen(sub->help), 6, 6);
		}
	}
	printf("\nOptions:\n");
	cli_each_opt(help_opt, NULL);
	if (cli_cur->examples) {
		printf("\nExamples:\n");
		for (const char *p = cli_cur->examples; *p;) {
			const char *e = strchr(p, '\n');
			size_t len = e ? (size_t)(e - p) : strlen(p);
			if (len > 2 && p[0] == ' ' && p[1] == ' ') {
				printf("  ");
				wrap(p + 2, len - 2, 2, 2);
			} else {
				example_command(p, len);
			}
			p += len + (e ? 1 : 0);
		}
	}
	printf("\nExit status:\n");
	for (const struct cli_exitcode *x = cli_cur->exits; x->code >= 0; x++) {
		printf("  %-4d  ", x->code);
		wrap(x->meaning, strlen(x->meaning), 8, 8);
	}
	printf("\nagentkit %s\n", AGENTKIT_VERSION);
}

/* The man page of docs/NAME.md at s ("docs/" matched), or NULL; *len is
 * the reference's length. */
static const char *doc_page(const char *s, size_t n, size_t *len)
{
	for (size_t k = 0; k < sizeof doc_pages / sizeof doc_pages[0]; k++) {
		size_t dl = strlen(doc_pages[k].doc);
		*len = 5 + dl + 3;
		if (*len <= n && !strncmp(s + 5, doc_pages[k].doc, dl) && !strncmp(s + 5 + dl, ".md", 3))
			return doc_pages[k].page;
	}
	return NULL;
}

/* roff: escape backslashes and leading dots/quotes; a reference to
 * docs/NAME.md becomes the installed page's name. */
static void roff(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t len;
		const char *page = n - i > 5 && !strncmp(s + i, "docs/", 5)
		                 ? doc_page(s + i, n - i, &len) : NULL;
		if (page) {
			roff(page, strlen(page));
			i += len - 1;
		} else if (s[i] == '\\')
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
	if (cli_is_short(o->key))
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

static void man_env(const struct cli_env *v)
{
	for (; v->name; v++) {
		printf(".TP\n.B ");
		roffs(v->name);
		printf("\n");
		roffs(v->meaning);
		printf("\n");
	}
}

/* "A, B or C": variables of which the first one set wins. */
static void man_alternatives(const char *const *v)
{
	for (const char *const *x = v; x && *x; x++) {
		if (x != v)
			printf(x[1] ? ", " : " or ");
		roffs(*x);
	}
}

/* A provider's variables, as its table entry names them. */
static void man_provider_env(const struct model_provider *p)
{
	if (!p->key_vars && !p->url_vars)
		return;
	printf(".TP\n.B ");
	man_alternatives(p->key_vars);
	printf("%s", p->key_vars && p->url_vars ? ", " : "");
	man_alternatives(p->url_vars);
	printf("\n");
	roffs(p->prefix);
	roffs("/... models: ");
	roffs(!p->key_vars ? "" : p->key_vars[1] ? "the key (the first variable set) and "
	                                          : "the key and ");
	roffs("the endpoint (default ");
	roffs(p->default_url ? p->default_url : "");
	printf(")\n");
	for (const struct model_env_header *h = p->env_headers; h && h->var; h++) {
		printf(".TP\n.B ");
		roffs(h->var);
		printf("\n");
		roffs(p->prefix);
		roffs("/... models: sent as the ");
		roffs(h->header);
		roffs(" header when set");
		printf("\n");
	}
}

void cli_man(void)
{
	const char *p;
	printf(".TH %s 1 \"\" \"agentkit %s\" \"agentkit\"\n", cli_cur->name,
	       AGENTKIT_VERSION);
	printf(".SH NAME\n%s \\- ", cli_cur->name);
	roffs(cli_cur->purpose);
	printf("\n.SH SYNOPSIS\n");
	for (p = cli_cur->synopsis; *p;) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		printf(".B %s\n", cli_cur->name);
		roff(p, len);
		printf("\n.br\n");
		p += len + (e ? 1 : 0);
	}
	for (const struct cli_sub *sub = cli_cur->subs; sub && sub->name; sub++) {
		char line[256];
		printf(".B %s\n", cli_cur->name);
		roffs(cli_sub_line(sub, line, sizeof line));
		printf("\n.br\n");
	}
	if (cli_cur->description) {
		printf(".SH DESCRIPTION\n");
		for (p = cli_cur->description; *p;) {
			const char *e = strstr(p, "\n\n");
			size_t len = e ? (size_t)(e - p) : strlen(p);
			printf(".PP\n");
			roff(p, len);
			printf("\n");
			p += len + (e ? 2 : 0);
		}
	}
	if (cli_cur->subs) {
		printf(".SH SUBCOMMANDS\n");
		for (const struct cli_sub *sub = cli_cur->subs; sub->name; sub++) {
			printf(".TP\n\\fB");
			roffs(sub->name);
			printf("\\fR%s", *sub->synopsis ? " " : "");
			roffs(sub->synopsis);
			printf("\n");
			roffs(sub->help);
			printf("\n");
		}
	}
	printf(".SH OPTIONS\n");
	cli_each_opt(man_opt, NULL);
	if (cli_cur->examples) {
		printf(".SH EXAMPLES\n.nf\n");
		roffs(cli_cur->examples);
		printf(".fi\n");
	}
	printf(".SH EXIT STATUS\n");
	for (const struct cli_exitcode *x = cli_cur->exits; x->code >= 0; x++) {
		printf(".TP\n.B %d\n", x->code);
		roffs(x->meaning);
		printf("\n");
	}
	printf(".SH ENVIRONMENT\n");
	man_env(environment);
	for (size_t i = 0; model_provider_at(i); i++)
		man_provider_env(model_provider_at(i));
	man_env(environment_after);
	printf(".SH FILES\n%s", files_text);
	printf(".SH SEE ALSO\n");
	roffs(see_also);
	printf("\n");
}

/* ---- completions ---- */

static const char *words_of(const struct cli_opt *o)
{
	const struct cli_value *v = cli_value_of(o);
	return v && v->words ? v->words : !strcmp(o->arg, "SHELL") ? "bash zsh fish" : "";
}

/*
 * The shell pipelines that list the candidates kept elsewhere, one per
 * line, silent on any error.  They read only what the commands print
 * (NDJSON keys, not their order), so a store or agent that cannot be read
 * offers nothing rather than an error under the user's cursor.
 */
static const char list_agents[] =
	"agent-run --list 2>/dev/null | grep -o '\"name\":\"[^\"]*\"' | cut -d'\"' -f4";
static const char list_sessions[] =
	"agent-snap sessions 2>/dev/null | head -n 200 | grep -o '\"sessionId\":\"[^\"]*\"' | cut -d'\"' -f4";
static const char list_snapshots[] =
	"agent-snap sessions 2>/dev/null | head -n 200 | grep -o '\"snapshotId\":\"[^\"]*\"' | cut -d'\"' -f4";
/* The models file's endpoints and their models (agent-run
 * --list-model-names, which asks no endpoint), and the models of the newest
 * sessions: the names a user has run, offline.  script/ names are left out
 * (they resolve from their prompt file; script/ completes files instead),
 * and so is echo, which is a provider word. */
static const char list_models[] =
	"{ agent-run --list-model-names 2>/dev/null; agent-snap sessions 2>/dev/null | head -n 200"
	" | grep -o '\"model\":\"[^\"]*\"' | cut -d'\"' -f4; }"
	" | grep -v -e '^script/' -e '^echo$' | sort -u";
/* The providers, as model names start: "echo script/ openai/ ...".  Only
 * echo has no name after it. */
static const char *model_words(void)
{
	static char words[512];
	const char *p;
	size_t n = 0;
	for (size_t i = 0; (p = model_provider_name(i)) && n < sizeof words; i++)
		n += (size_t)snprintf(words + n, sizeof words - n, "%s%s%s", n ? " " : "", p,
		                      strcmp(p, "echo") ? "/" : "");
	return words;
}

static void list_opt(const struct cli_opt *o, void *ctx)
{
	(void)ctx;
	printf("--%s\n", o->name);
}

static void bash_word(const struct cli_opt *o, void *ctx)
{
	(void)ctx;
	printf(" --%s", o->name);
	if (cli_is_short(o->key))
		printf(" -%c", o->key);
}

/* bash: the compgen call that offers a kind's candidates for $cur. */
static void bash_kind(enum cli_kind kind, const char *words, const char *fn)
{
	switch (kind) {
	case CLI_FILE: printf("COMPREPLY=($(compgen -f -- \"$cur\"))"); break;
	case CLI_DIR: printf("COMPREPLY=($(compgen -d -- \"$cur\"))"); break;
	case CLI_COMMAND: printf("COMPREPLY=($(compgen -c -- \"$cur\"))"); break;
	case CLI_AGENT:
		printf("COMPREPLY=($(compgen -W \"$(%s_list agents)\" -- \"$cur\")"
		       " $(compgen -f -X '!*.prompt' -- \"$cur\") $(compgen -d -- \"$cur\"))", fn);
		break;
	case CLI_MODEL:
		/* "openai/" takes no space after it; a whole name does */
		printf("if [[ $cur == script/* ]]; then COMPREPLY=($(compgen -f -P script/ -- \"${cur#script/}\"));"
		       " else COMPREPLY=($(compgen -W '%s' -- \"$cur\") $(compgen -W \"$(%s_list models)\""
		       " -- \"$cur\")); [[ \" ${COMPREPLY[*]} \" != *'/ '* ]] ||"
		       " compopt -o nospace 2>/dev/null; fi", model_words(), fn);
		break;
	case CLI_SESSION:
		printf("COMPREPLY=($(compgen -W \"$(%s_list sessions)\" -- \"$cur\"))", fn);
		break;
	case CLI_SNAPSHOT:
		printf("COMPREPLY=($(compgen -W \"$(%s_list snapshots)\" -- \"$cur\"))", fn);
		break;
	case CLI_WORDS: printf("COMPREPLY=($(compgen -W '%s' -- \"$cur\"))", words); break;
	default: printf("COMPREPLY=()"); break;
	}
}

static void bash_arg(const struct cli_opt *o, void *ctx)
{
	if (!o->arg)
		return;
	printf("\t--%s", o->name);
	if (cli_is_short(o->key))
		printf("|-%c", o->key);
	printf(")\n\t\t");
	bash_kind(cli_kind_of(o), words_of(o), ctx);
	printf("; return;;\n");
}

static void bash(const char *fn)
{
	enum cli_kind ops = cli_cur->operands ? cli_cur->operands : CLI_FILE;
	printf("# bash completion for %s (generated by %s --completion bash)\n",
	       cli_cur->name, cli_cur->name);
	printf("%s_list()\n{\n\tcase $1 in\n"
	       "\tagents) %s ;;\n\tsessions) %s ;;\n\tsnapshots) %s ;;\n\tmodels) %s ;;\n\tesac\n}\n",
	       fn, list_agents, list_sessions, list_snapshots, list_models);
	printf("%s()\n{\n\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n", fn);
	/* "--format=te<Tab>": bash splits at '=' (COMP_WORDBREAKS) */
	printf("\tif [[ $cur == = ]]; then cur=; elif [[ $prev == = ]]; then"
	       " prev=${COMP_WORDS[COMP_CWORD-2]}; fi\n");
	printf("\tcase $prev in\n");
	cli_each_opt(bash_arg, (void *)fn);
	printf("\tesac\n");
	printf("\tif [[ $cur == -* ]]; then\n\t\tCOMPREPLY=($(compgen -W '");
	cli_each_opt(bash_word, NULL);
	printf("' -- \"$cur\"))\n\t\treturn\n\tfi\n");
	if (cli_cur->subs)
		printf("\tif [[ $COMP_CWORD -eq 1 ]]; then\n\t\tCOMPREPLY=($(compgen -W '%s' -- \"$cur\")"
		       " $(compgen -W \"$(%s_list snapshots)\" -- \"$cur\"))\n\t\treturn\n\tfi\n",
		       cli_sub_words(), fn);
	printf("\t");
	bash_kind(ops, "", fn);
	printf("\n}\ncomplete -o filenames -F %s %s\n", fn, cli_cur->name);
}

/* Help text safe inside single quotes and zsh's [...] descriptions. */
static void plain(const char *s)
{
	for (; *s; s++)
		if (!strchr("'[]:\\`$", *s))
			putchar(*s);
}

/* zsh: an _arguments action for a kind. */
static void zsh_action(enum cli_kind kind, const char *words, const char *fn)
{
	switch (kind) {
	case CLI_FILE: printf("_files"); break;
	case CLI_DIR: printf("_files -/"); break;
	case CLI_COMMAND: printf("_command_names -e"); break;
	case CLI_AGENT: printf("%s_agents", fn); break;
	case CLI_MODEL: printf("%s_models", fn); break;
	case CLI_SESSION: printf("%s_sessions", fn); break;
	case CLI_SNAPSHOT: printf("%s_snapshots", fn); break;
	case CLI_WORDS: printf("(%s)", words); break;
	default: printf(" "); break;
	}
}

static void zsh_opt(const struct cli_opt *o, void *ctx)
{
	const char *fn = ctx;
	if (cli_is_short(o->key))
		printf("  '(-%c --%s)'{-%c,--%s%s}'[", o->key, o->name, o->key,
		       o->name, o->arg ? "=" : "");
	else
		printf("  '--%s%s[", o->name, o->arg ? "=" : "");
	plain(o->help);
	printf("]");
	if (o->arg) {
		printf(":");
		plain(o->arg);
		printf(":");
		zsh_action(cli_kind_of(o), words_of(o), fn);
	}
	printf("' \\\n");
}

static void zsh(const char *fn)
{
	enum cli_kind ops = cli_cur->operands ? cli_cur->operands : CLI_FILE;
	printf("#compdef %s\n# zsh completion for %s (generated by %s --completion zsh)\n",
	       cli_cur->name, cli_cur->name, cli_cur->name);
	printf("%s_agents() { local -a w; w=(${(f)\"$(%s)\"}); compadd -a w; _files -g '*.prompt' }\n",
	       fn, list_agents);
	printf("%s_sessions() { local -a w; w=(${(f)\"$(%s)\"}); compadd -a w }\n", fn, list_sessions);
	printf("%s_snapshots() { local -a w; w=(${(f)\"$(%s)\"}); compadd -a w }\n", fn, list_snapshots);
	printf("%s_models() { if [[ $PREFIX == script/* ]]; then compset -P 'script/'; _files;"
	       " else compadd -S '' -- %s; local -a w; w=(${(f)\"$(%s)\"}); compadd -a w; fi }\n",
	       fn, model_words(), list_models);
	printf("_arguments -s \\\n");
	cli_each_opt(zsh_opt, (void *)fn);
	if (cli_cur->subs)
		printf("  '1:command:(%s)' \\\n", cli_sub_words());
	printf("  '*:operand:");
	zsh_action(ops, "", fn);
	printf("'\n");
}

/* fish: the -a argument (candidates) or -F for a kind. */
static void fish_args(enum cli_kind kind, const char *words, const char *fn)
{
	switch (kind) {
	case CLI_FILE: printf(" -rF"); break;
	case CLI_DIR: printf(" -xa '(__fish_complete_directories)'"); break;
	case CLI_COMMAND: printf(" -xa '(__fish_complete_command)'"); break;
	case CLI_AGENT: printf(" -ka '(%s_list agents)'", fn); break;
	case CLI_MODEL: printf(" -xa '%s (%s_list models)'", model_words(), fn); break;
	case CLI_SESSION: printf(" -xa '(%s_list sessions)'", fn); break;
	case CLI_SNAPSHOT: printf(" -xa '(%s_list snapshots)'", fn); break;
	case CLI_WORDS: printf(" -xa '%s'", words); break;
	default: printf(" -x"); break;
	}
}

static void fish_opt(const struct cli_opt *o, void *ctx)
{
	printf("complete -c %s", cli_cur->name);
	if (cli_is_short(o->key))
		printf(" -s %c", o->key);
	printf(" -l %s", o->name);
	if (o->arg)
		fish_args(cli_kind_of(o), words_of(o), ctx);
	printf(" -d '");
	plain(o->help);
	printf("'\n");
}

static void fish(const char *fn)
{
	enum cli_kind ops = cli_cur->operands ? cli_cur->operands : CLI_FILE;
	printf("# fish completion for %s (generated by %s --completion fish)\n",
	       cli_cur->name, cli_cur->name);
	printf("function %s_list\n\tswitch $argv[1]\n\tcase agents\n\t\t%s\n"
	       "\tcase sessions\n\t\t%s\n\tcase snapshots\n\t\t%s\n\tcase models\n\t\t%s\n"
	       "\tend\nend\n", fn, list_agents, list_sessions, list_snapshots, list_models);
	cli_each_opt(fish_opt, (void *)fn);
	if (cli_cur->subs)
		printf("complete -c %s -n '__fish_use_subcommand' -a '%s'\n",
		       cli_cur->name, cli_sub_words());
	if (ops != CLI_FILE) {
		printf("complete -c %s", cli_cur->name);
		fish_args(ops, "", fn);
		printf("\n");
	}
}

int cli_completion(const char *shell)
{
	char fn[64];
	size_t i;
	snprintf(fn, sizeof fn, "_agentkit_%s", cli_cur->name);
	for (i = 0; fn[i]; i++)
		if (fn[i] == '-')
			fn[i] = '_';
	if (!strcmp(shell, "bash"))
		bash(fn);
	else if (!strcmp(shell, "zsh"))
		zsh(fn);
	else if (!strcmp(shell, "fish"))
		fish(fn);
	else
		return cli_usage("unknown shell '%s' (bash, zsh or fish)", shell);
	return CORE_OK;
}

void cli_list_options(void)
{
	cli_each_opt(list_opt, NULL);
}

void cli_list_model_names(void)
{
	json_t *names = endpoints_model_names(), *v;
	size_t i;
	json_array_foreach(names, i, v)
		printf("%s\n", json_string_value(v));
	json_decref(names);
}
