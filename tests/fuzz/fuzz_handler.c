/*
 * fuzz_handler.c - what a custom agent's handler writes
 * (libcore/agent/custom_agent.c, libcore/agent/agent_ext.c, through the runtime).
 *
 * Input: the handler's whole stdout.  The handler is a real process
 * (/bin/sh -c: print the input, close stdout, read stdin to its end), run
 * for an invocation of two turns with client-managed state, then finished
 * as agent-run finishes it (its optional {"result"}, its exit status, the
 * AgentResult shaping the output).  Generate requests go to the echo model.
 * Invariants:
 *  - every chunk is an object; the output is an object with a sessionId,
 *    and a failed one has an error with a status and a message;
 *  - the state the output returns opens again as the next init.
 */
#include "fuzz.h"

#include <signal.h>
#include <string.h>

#include "../../libcore/agent/agent.h"
#include "../../libcore/agent/agent_ext.h"
#include "../../libcore/base/buf.h"
#include "../../libcore/base/json.h"
#include "../../libcore/agent/runtime.h"
#include "../../libcore/base/spawn.h"
#include "../../libcore/model/registry.h"

static struct agent *agent;
static char *cmd;
static json_t *inputs[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct agent_spec spec = { 0 };
	struct core_err e = { 0 };
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	char *out = fuzz_write("handler-out", "", 0);
	spawn_protect_keys(model_key_variable, NULL);
	signal(SIGPIPE, SIG_IGN);
	setenv("AGENTKIT_EXEC_TIMEOUT", "20s", 1);
	spec.model = "echo";
	if (agent_load(&spec, &agent, &e)) {
		fprintf(stderr, "fuzz: %s\n", e.msg);
		abort();
	}
	core_buf_addf(&b, "cat '%s'; exec >&-; cat >/dev/null", out);
	cmd = core_buf_detach(&b, NULL);
	free(out);
	inputs[0] = json_pack("{s:{s:s, s:[{s:s}]}}", "message", "role", "user", "content",
	                      "text", "one");
	inputs[1] = json_pack("{s:{s:[{s:s}]}}", "message", "content", "text", "two");
	(void)argc;
	(void)argv;
	return 0;
}

static struct runtime *open_rt(const json_t *init, struct agent_ext *x, struct core_err *e)
{
		struct rt_config cfg = { 0 };
	struct runtime *rt = NULL;
	cfg.agent = agent;
	cfg.init = init;
	cfg.sink = &fuzz_rt_sink;
	cfg.ext = x;
	return rt_open(&cfg, &rt, e) == CORE_OK ? rt : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agent_ext_spec spec = { 0 };
	struct agent_ext *x = NULL;
	struct core_err e = { 0 };
	free(fuzz_write("handler-out", data, size));
	spec.exec = cmd;
	if (agent_ext_load(agent, &spec, &x, &e)) {
		fprintf(stderr, "fuzz: %s\n", e.msg);
		abort();
	}
	struct runtime *rt = open_rt(NULL, x, &e);
	FUZZ_CHECK(rt, "cannot open the runtime: %s", e.msg);
	for (int i = 0; i < 2; i++)
		if (rt_turn(rt, inputs[i]) != CORE_OK)
			break;
	rt_finish(rt);
	json_t *out = rt_output(rt);
	FUZZ_CHECK(json_is_object(out), "no output");
	struct core_err oe = { 0 };
	(void)agent_ext_output(x, out, &oe);
	FUZZ_CHECK(jv_is_string(json_object_get(out, "sessionId")), "an output without sessionId");
	const json_t *err = json_object_get(out, "error");
	if (err)
		FUZZ_CHECK(jv_is_string(json_object_get(err, "status")) &&
		           jv_is_string(json_object_get(err, "message")),
		           "an error without status and message");
	char *text = fuzz_dump(out);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "%s\n", text);
	free(text);
	const json_t *state = json_object_get(out, "state");
	if (state) {
		struct core_err e2 = { 0 };
		json_t *again = json_pack("{s:O}", "state", state);
		struct runtime *rt2 = open_rt(again, NULL, &e2);
		FUZZ_CHECK(rt2, "the returned state does not open again: %s", e2.msg);
		rt_free(rt2);
		json_decref(again);
	}
	json_decref(out);
	rt_free(rt);
	agent_ext_free(x);
	return 0;
}
