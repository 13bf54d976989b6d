/*
 * fuzz_mcp.c - what an MCP server writes on stdout (libcore/agent/mcp.c,
 * coproc.c): the answers to initialize, tools/list and tools/call, its
 * own requests (ping) and notifications, and whatever else.
 *
 * Input: the server's whole stdout.  The server is a real process (/bin/sh:
 * print the input, then read stdin to its end), started as agent-run
 * starts one, with its first tool called once if it lists any.  The
 * client numbers its requests 1 (initialize), 2 (tools/list), 3
 * (tools/call), which the seeds answer.
 * Invariants:
 *  - the start and the call each succeed or fail with a message that
 *    names the server and is valid UTF-8 (so it reaches a final line);
 *  - a call's output is JSON that dumps;
 *  - nothing waits past its bound: startupTimeout and the call's timeout
 *    (300 ms each here), and the shutdown's, in all under 10 s.
 */
#include "fuzz.h"

#include <signal.h>
#include <string.h>

#include "../../libcore/agent/mcp.h"
#include "../../libcore/agent/tools.h"
#include "../../libcore/base/buf.h"
#include "../../libcore/base/json.h"
#include "../../libcore/base/spawn.h"
#include "../../libcore/base/utf8.h"
#include "../../libcore/base/util.h"
#include "../../libcore/model/registry.h"

static json_t *servers;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	char *out = fuzz_write("server-out", "", 0);
	spawn_protect_keys(model_key_variable, NULL);
	signal(SIGPIPE, SIG_IGN);
	core_buf_addf(&b, "cat '%s'; exec cat >/dev/null", out);
	servers = json_pack("{s:{s:s, s:[s, s], s:i, s:i, s:s}}", "fz", "command", "/bin/sh",
	                    "args", "-c", b.p, "timeout", 300, "startupTimeout", 300,
	                    "maxResultBytes", "64K");
	FUZZ_CHECK(servers, "out of memory");
	core_buf_release(&b);
	free(out);
	(void)argc;
	(void)argv;
	return 0;
}

static void check_message(const struct core_err *e, const char *what)
{
	size_t n = strlen(e->msg);
	FUZZ_CHECK(n, "%s failed without a message", what);
	FUZZ_CHECK(utf8_valid(e->msg, n) == n, "%s: the message is not valid UTF-8", what);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "%s: %s\n", what, e->msg);
	FUZZ_CHECK(strstr(e->msg, "'fz'"), "%s: the message does not name the server: %s",
	           what, e->msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mcp_config cfg;
	struct core_err e = { 0 };
	int64_t t0 = core_now_mono_ms();
	memset(&cfg, 0, sizeof cfg);
	free(fuzz_write("server-out", data, size));
	FUZZ_CHECK(!mcp_config_add(&cfg, servers, "fuzz.json", NULL, &e), "%s", e.msg);
	struct mcp_set *set = mcp_set_new();
	FUZZ_CHECK(set, "out of memory");
	if (mcp_set_start(set, &cfg.servers[0], &e)) {
		check_message(&e, "the start");
	} else if (mcp_set_count(set)) {
		struct tool *t = NULL;
		struct tool_call c;
		struct tool_context ctx = { "s1", "snap1", "", 0, NULL, NULL, NULL };
		struct tool_events ev = { 0 };
		json_t *custom = json_object(), *input = json_object();
		tool_set_source(mcp_set_source(set));
		FUZZ_CHECK(!tool_load(mcp_set_name(set, 0), NULL, &t, &e), "%s", e.msg);
		memset(&c, 0, sizeof c);
		c.tool = t;
		c.input = input;
		FUZZ_CHECK(!tools_run(&c, 1, custom, &ctx, &ev, &e), "tools_run: %s", e.msg);
		if (c.st)
			check_message(&c.err, "the call");
		else if (c.output) {
			char *text = fuzz_dump(c.output);
			if (getenv("FUZZ_VERBOSE"))
				fprintf(stderr, "the call: %s\n", text);
			free(text);
		}
		tool_call_release(&c);
		tool_free(t);
		tool_set_source(NULL);
		json_decref(custom);
		json_decref(input);
	}
	mcp_set_free(set);
	mcp_config_release(&cfg);
	int64_t took = core_now_mono_ms() - t0;
	FUZZ_CHECK(took < 10000, "the input took %lld ms", (long long)took);
	return 0;
}
