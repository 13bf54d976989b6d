/*
 * mcp_run_test.c - unit tests for libcore/agent/mcp_run's policy, with no
 * server that answers: which configuration files are read
 * ($AGENTKIT_MCP_CONFIG only without files, empty entries skipped, the
 * first failure stops), a prompt's servers taken from its directory, an
 * optional server's failure handed to the callback while a required one's
 * stops the start, and --mcp-list's outcomes (a failed server,
 * an unknown name).  The servers that fail are a command that does not
 * exist: it exits 127 at once.  tests/mcp.bats drives the rest against
 * real servers.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../libcore/agent/agent.h"
#include "../../libcore/agent/mcp.h"
#include "../../libcore/agent/mcp_run.h"
#include "tap.h"

static char tmpdir[PATH_MAX];

/* tmpdir/NAME holding one server, NAME without ".json"; its path. */
static const char *write_config(const char *name, char *path, size_t size)
{
	snprintf(path, size, "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(2);
	}
	fprintf(f, "{\"mcpServers\": {\"%.*s\": {\"command\": \"srv\"}}}\n",
	        (int)(strlen(name) - 5), name);
	fclose(f);
	return path;
}

/* The names of cfg's servers, space-separated. */
static const char *names(const struct mcp_config *cfg)
{
	static char buf[256];
	size_t n = 0;
	buf[0] = 0;
	for (size_t i = 0; i < cfg->n; i++)
		n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", i ? " " : "",
		                      cfg->servers[i].name);
	return buf;
}

static void test_load(void)
{
	char a[PATH_MAX + 16], b[PATH_MAX + 16], env[3 * PATH_MAX];
	struct mcp_config cfg = { 0 };
	struct core_err e = { 0 };
	write_config("one.json", a, sizeof a);
	write_config("two.json", b, sizeof b);

	snprintf(env, sizeof env, ":%s::%s:", b, a);
	setenv(MCP_CONFIG_VARIABLE, env, 1);
	check_int("load: the variable's files", mcp_run_load(&cfg, NULL, 0, &e), CORE_OK);
	check_str("load: in its order, empty entries skipped", names(&cfg), "two one");
	mcp_config_release(&cfg);

	const char *files[] = { a, NULL };
	setenv(MCP_CONFIG_VARIABLE, "/nonexistent/mcp.json", 1);
	memset(&cfg, 0, sizeof cfg);
	check_int("load: files given, the variable is not read",
	          mcp_run_load(&cfg, files, 1, &e), CORE_OK);
	check_str("load: only the files' servers", names(&cfg), "one");
	mcp_config_release(&cfg);

	memset(&cfg, 0, sizeof cfg);
	snprintf(env, sizeof env, "%s:/nonexistent/mcp.json:%s", a, b);
	setenv(MCP_CONFIG_VARIABLE, env, 1);
	report(mcp_run_load(&cfg, NULL, 0, &e) != CORE_OK, "load: a missing file fails", NULL);
	check_str("load: the files after it are not read", names(&cfg), "one");
	mcp_config_release(&cfg);

	unsetenv(MCP_CONFIG_VARIABLE);
	memset(&cfg, 0, sizeof cfg);
	check_int("load: neither files nor variable", mcp_run_load(&cfg, NULL, 0, &e), CORE_OK);
	check_int("load: no server", (long)cfg.n, 0);
	mcp_config_release(&cfg);
}

static void test_add_agent(void)
{
	struct mcp_config cfg = { 0 };
	struct core_err e = { 0 };
	char *dirs[] = { NULL };
	struct agent a = { .path = "agents/x.prompt", .tool_dirs = dirs,
	                   .mcp_servers = pj("{\"p\": {\"command\": \"./srv\", \"cwd\": \"sub\"},"
	                                     " \"q\": {\"command\": \"./srv\"}}"),
	                   .tools = pj("[]") };
	check_int("agent: the prompt's servers", mcp_run_add_agent(&cfg, &a, &e), CORE_OK);
	check_str("agent: both added", names(&cfg), "p q");
	if (cfg.n == 2) {
		check_str("agent: a relative cwd is the prompt's directory's", cfg.servers[0].cwd,
		          "agents/sub");
		check_str("agent: a command with a cwd is left to it", cfg.servers[0].argv[0], "./srv");
		check_str("agent: a relative command without cwd is the prompt's directory's",
		          cfg.servers[1].argv[0], "agents/./srv");
	}
	mcp_config_release(&cfg);
	json_decref(a.mcp_servers);

	memset(&cfg, 0, sizeof cfg);
	a.path = "x.prompt";
	a.mcp_servers = pj("{\"p\": {\"command\": \"./srv\"}}");
	check_int("agent: a prompt in the working directory", mcp_run_add_agent(&cfg, &a, &e),
	          CORE_OK);
	if (cfg.n == 1)
		check_str("agent: its directory is '.'", cfg.servers[0].argv[0], "././srv");
	mcp_config_release(&cfg);
	json_decref(a.mcp_servers);
	json_decref(a.tools);
}

static int nfailed;
static char last_failed[1024];

static void on_failed(void *ctx, const struct core_err *e)
{
	nfailed++;
	snprintf(last_failed, sizeof last_failed, "%s", e->msg);
}

static int nrows;

static enum core_status on_row(void *ctx, const json_t *row, struct core_err *e)
{
	nrows++;
	return CORE_OK;
}

/* cfg from a literal mcpServers object. */
static void config(struct mcp_config *cfg, const char *servers)
{
	struct core_err e = { 0 };
	json_t *v = pj(servers);
	memset(cfg, 0, sizeof *cfg);
	if (mcp_config_add(cfg, v, "test.json", NULL, &e)) {
		fprintf(stderr, "bad test config: %s\n", e.msg);
		exit(2);
	}
	json_decref(v);
}

static void test_start(void)
{
	struct mcp_config cfg;
	struct core_err e = { 0 };
	struct mcp_set *s = mcp_set_new();
	config(&cfg, "{\"gone\": {\"command\": \"no-such-mcp-server\", \"optional\": true}}");
	nfailed = 0;
	check_int("start: an optional server that fails is no failure",
	          mcp_run_start(s, &cfg, on_failed, NULL, &e), CORE_OK);
	check_int("start: ... but told to the callback", nfailed, 1);
	report(strstr(last_failed, "mcp server 'gone'") != NULL, "start: the message names it",
	       last_failed);
	mcp_set_free(s);
	mcp_config_release(&cfg);

	s = mcp_set_new();
	config(&cfg, "{\"gone\": {\"command\": \"no-such-mcp-server\"},"
	             " \"later\": {\"command\": \"no-such-mcp-server\", \"optional\": true}}");
	nfailed = 0;
	memset(&e, 0, sizeof e);
	report(mcp_run_start(s, &cfg, on_failed, NULL, &e) != CORE_OK,
	       "start: a required server that fails stops the start", NULL);
	check_int("start: ... before the next one starts", nfailed, 0);
	report(strstr(e.msg, "mcp server 'gone'") != NULL, "start: e names it", e.msg);
	mcp_set_free(s);
	mcp_config_release(&cfg);
}

static void test_list(void)
{
	struct mcp_config cfg;
	struct core_err e = { 0 };
	struct mcp_set *s = mcp_set_new();
	config(&cfg, "{\"a\": {\"command\": \"no-such-mcp-server\"},"
	             " \"b\": {\"command\": \"no-such-mcp-server\"}}");
	nfailed = nrows = 0;
	check_int("list: servers that fail", mcp_run_list(s, &cfg, NULL, on_row, on_failed, NULL, &e),
	          CORE_FAILED);
	check_int("list: each one told, the next one tried", nfailed, 2);
	check_int("list: no row", nrows, 0);
	mcp_set_free(s);

	s = mcp_set_new();
	nfailed = 0;
	check_int("list NAME: only that one", mcp_run_list(s, &cfg, "b", on_row, on_failed, NULL, &e),
	          CORE_FAILED);
	check_int("list NAME: one told", nfailed, 1);
	report(strstr(last_failed, "mcp server 'b'") != NULL, "list NAME: it is b", last_failed);
	mcp_set_free(s);

	s = mcp_set_new();
	nfailed = 0;
	check_int("list NAME: no such server",
	          mcp_run_list(s, &cfg, "nosuch", on_row, on_failed, NULL, &e), CORE_EUSAGE);
	check_str("list NAME: the message", e.msg, "no mcp server 'nosuch' is configured");
	check_int("list NAME: nothing started", nfailed, 0);
	mcp_set_free(s);
	mcp_config_release(&cfg);
}

int main(void)
{
	snprintf(tmpdir, sizeof tmpdir, "%s/mcp_run_test.XXXXXX",
	         getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	test_load();
	test_add_agent();
	test_start();
	test_list();
	char path[PATH_MAX + 16];
	snprintf(path, sizeof path, "%s/one.json", tmpdir);
	unlink(path);
	snprintf(path, sizeof path, "%s/two.json", tmpdir);
	unlink(path);
	rmdir(tmpdir);
	return tap_end();
}
