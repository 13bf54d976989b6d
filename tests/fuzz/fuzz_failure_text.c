/*
 * fuzz_failure_text.c - bytes a child writes on stderr as it fails, through
 * the whole turn to the output (DESIGN §9: text is valid UTF-8 once it is
 * inside; one outcome).
 *
 * Input: byte 0 picks the source (even: a tool the scripted model calls,
 * odd: a custom agent's handler), byte 1 the exit status (1 to 255), the
 * rest is what the child writes on stderr before it exits.  Both are real
 * processes run by the runtime, as agent-run runs them.
 * Invariants:
 *  - the invocation fails, and its output has an error with a status and
 *    a message (jansson holds only valid UTF-8, so a byte that is not
 *    cannot erase it) and the finish reason failed;
 *  - the row status and the exit status come from the one mapping:
 *    core_outcome_row() says failed, rt_exit_status() CORE_FAILED;
 *  - stderr that is printable ASCII is in the message as written.
 */
#include "fuzz.h"

#include <signal.h>
#include <string.h>

#include "../../libcore/agent/agent.h"
#include "../../libcore/agent/agent_ext.h"
#include "../../libcore/agent/runtime.h"
#include "../../libcore/base/buf.h"
#include "../../libcore/base/json.h"
#include "../../libcore/base/spawn.h"
#include "../../libcore/model/registry.h"

static struct agent *tool_agent, *exec_agent;
static char *handler_cmd;
static json_t *input;

static struct agent *load(const char *model, const char *tool)
{
	const char *tools[2] = { tool, NULL };
	struct agent_spec spec = { 0 };
	struct agent *a = NULL;
	struct core_err e = { 0 };
	spec.model = model;
	spec.tools = tool ? tools : NULL;
	if (agent_load(&spec, &a, &e)) {
		fprintf(stderr, "fuzz: %s\n", e.msg);
		abort();
	}
	return a;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	char *err = fuzz_write("child-stderr", "", 0), *code = fuzz_write("child-exit", "1", 1);
	spawn_protect_keys(model_key_variable, NULL);
	signal(SIGPIPE, SIG_IGN);
	setenv("AGENTKIT_EXEC_TIMEOUT", "20s", 1);
	core_buf_addf(&b, "#!/bin/sh\ncat >/dev/null\ncat '%s' >&2\nexit $(cat '%s')\n", err, code);
	free(fuzz_write("fz", b.p, b.len));
	core_buf_reset(&b);
	core_buf_adds(&b, "{\"description\": \"fuzz\", \"timeout\": \"20s\"}");
	char *manifest = fuzz_write("fz.json", b.p, b.len);
	core_buf_reset(&b);
	core_buf_adds(&b, "{\"toolRequests\": [{\"name\": \"fz\", \"ref\": \"1\", \"input\": {}}]}\n");
	char *script = fuzz_write("model.ndjson", b.p, b.len);
	core_buf_reset(&b);
	core_buf_addf(&b, "script/%s", script);
	tool_agent = load(b.p, manifest);
	exec_agent = load("echo", NULL);
	core_buf_reset(&b);
	core_buf_addf(&b, "cat '%s' >&2; exit $(cat '%s')", err, code);
	handler_cmd = core_buf_detach(&b, NULL);
	input = json_pack("{s:{s:[{s:s}]}}", "message", "content", "text", "hi");
	free(err);
	free(code);
	free(manifest);
	free(script);
	(void)argc;
	(void)argv;
	return 0;
}

/* Printable ASCII, short enough to be kept whole in a message. */
static int plain(const uint8_t *p, size_t n)
{
	if (!n || n > 200)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (p[i] < 0x21 || p[i] > 0x7e)
			return 0;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
		struct agent_ext_spec xs = { 0 };
	struct agent_ext *x = NULL;
	struct rt_config cfg = { 0 };
	struct runtime *rt = NULL;
	struct core_err e = { 0 };
	char code[8];
	if (size < 2)
		return 0;
	int handler = data[0] & 1;
	snprintf(code, sizeof code, "%d", data[1] ? data[1] : 1);
	free(fuzz_write("child-exit", code, strlen(code)));
	free(fuzz_write("child-stderr", data + 2, size - 2));
	cfg.agent = handler ? exec_agent : tool_agent;
	if (handler) {
		xs.exec = handler_cmd;
		FUZZ_CHECK(!agent_ext_load(exec_agent, &xs, &x, &e), "%s", e.msg);
		cfg.ext = x;
	}
	cfg.sink = &fuzz_rt_sink;
	FUZZ_CHECK(rt_open(&cfg, &rt, &e) == CORE_OK, "cannot open the runtime: %s", e.msg);
	(void)rt_turn(rt, input);
	rt_finish(rt);
	json_t *out = rt_output(rt);
	FUZZ_CHECK(json_is_object(out), "no output");
	const json_t *err = json_object_get(out, "error");
	const char *status = json_string_value(json_object_get(err, "status"));
	const char *msg = json_string_value(json_object_get(err, "message"));
	const char *reason = json_string_value(json_object_get(out, "finishReason"));
	FUZZ_CHECK(status && msg && *msg, "the failure lost its error");
	FUZZ_CHECK(reason && !strcmp(reason, "failed"), "finish reason %s", reason ? reason : "(none)");
	FUZZ_CHECK(!strcmp(core_outcome_row(core_status_from_name(status), reason), "failed"),
	           "the row would not read failed");
	FUZZ_CHECK(rt_exit_status(rt, out) == CORE_FAILED, "exit status %d",
	           core_exit_code(rt_exit_status(rt, out)));
	if (plain(data + 2, size - 2)) {
		char want[256];
		snprintf(want, sizeof want, "%.*s", (int)(size - 2), (const char *)data + 2);
		FUZZ_CHECK(strstr(msg, want), "stderr '%s' is not in the message '%s'", want, msg);
	}
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "%s\n", msg);
	json_decref(out);
	rt_free(rt);
	agent_ext_free(x);
	return 0;
}
