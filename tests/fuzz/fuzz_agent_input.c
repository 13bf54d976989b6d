/*
 * fuzz_agent_input.c - AgentInit and AgentInput lines (libcore/agent/runtime.c),
 * read as agent-run reads stdin: each line parsed (jv_parse), checked
 * (rt_input_check) and run as one turn (rt_turn) of an inline agent on the
 * echo model with client-managed state; a bad line ends the invocation
 * (rt_fail) as it does there.
 *
 * Input: line 1 is the AgentInit JSON (empty: a session whose model asked
 * for a tool "ask", ref "q1", and was interrupted, so resume lines have
 * something to answer), each further line one AgentInput.
 * Invariants:
 *  - every chunk is an object; each completed turn sends one turnEnd;
 *  - the output is an object with a sessionId; a failed one has an error
 *    with a status and a message;
 *  - the state the output returns opens again as the next invocation's
 *    init (what a client does with it).
 */
#include "fuzz.h"

#include <string.h>

#include "../../libcore/agent/agent.h"
#include "../../libcore/base/json.h"
#include "../../libcore/agent/runtime.h"

static struct agent *agent;
static json_t *default_init;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct agent_spec spec = { 0 };
	struct core_err e = { 0 };
	static const char init[] =
		"{\"state\":{\"messages\":["
		"{\"role\":\"user\",\"content\":[{\"text\":\"which color?\"}]},"
		"{\"role\":\"model\",\"content\":[{\"toolRequest\":{\"name\":\"ask\",\"ref\":\"q1\","
		"\"input\":{\"q\":\"color?\"}}}]}],"
		"\"custom\":{\"n\":1}}}";
	spec.model = "echo";
	if (agent_load(&spec, &agent, &e)) {
		fprintf(stderr, "fuzz: %s\n", e.msg);
		abort();
	}
	default_init = jv_parse(init, sizeof init - 1, "init", 0, &e);
	if (!default_init)
		abort();
	(void)argc;
	(void)argv;
	return 0;
}

struct sink {
	size_t chunks, turn_ends;
};

static enum core_status on_chunk(void *ctx, const json_t *chunk)
{
	struct sink *s = ctx;
	FUZZ_CHECK(json_is_object(chunk), "a chunk that is not an object");
	s->chunks++;
	if (json_object_get(chunk, "turnEnd"))
		s->turn_ends++;
	return CORE_OK;
}

static void on_warn(void *ctx, const char *msg)
{
	(void)ctx;
	(void)msg;
}

static struct runtime *open_rt(const json_t *init, struct sink *s, struct core_err *e)
{
	static struct rt_sink sink = { on_chunk, on_warn, NULL };
	struct rt_config cfg = { 0 };
	struct runtime *rt = NULL;
	sink.ctx = s;
	cfg.agent = agent;
	cfg.init = init;
	cfg.sink = &sink;
	return rt_open(&cfg, &rt, e) == CORE_OK ? rt : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *first, *rest;
	size_t nfirst, nrest;
	struct core_err e = { 0 };
	struct sink s = { 0, 0 };
	json_t *init;
	size_t turns = 0, lineno = 1;

	fuzz_split(data, size, '\n', &first, &nfirst, &rest, &nrest);
	if (nfirst) {
		if (!(init = jv_parse((const char *)first, nfirst, "init", 0, &e)))
			return 0;
	} else {
		init = json_incref(default_init);
	}
	struct runtime *rt = open_rt(init, &s, &e);
	json_decref(init);
	if (!rt) {
		FUZZ_CHECK(e.st != CORE_OK && e.msg[0], "a refused init without a message");
		return 0;
	}
	while (nrest) {
		const uint8_t *line, *next;
		size_t nline, nnext;
		fuzz_split(rest, nrest, '\n', &line, &nline, &next, &nnext);
		rest = next;
		nrest = nnext;
		lineno++;
		if (!nline)
			continue;
		struct core_err le = { 0 };
		json_t *in = jv_parse((const char *)line, nline, "<stdin>", lineno, &le);
		if (!in) {
			rt_fail(rt, le.st, le.msg);
			break;
		}
		if (json_is_null(in)) {
			json_decref(in);
			continue;
		}
		if (rt_input_check(in, &le)) {
			FUZZ_CHECK(le.msg[0], "a refused input without a message");
			rt_fail(rt, CORE_EINVAL, le.msg);
			json_decref(in);
			break;
		}
		size_t before = s.turn_ends;
		enum core_status st = rt_turn(rt, in);
		json_decref(in);
		if (st != CORE_OK)
			break;
		turns++;
		FUZZ_CHECK(s.turn_ends == before + 1, "a completed turn sent %zu turnEnds",
		           s.turn_ends - before);
		if (turns == 4)
			break;
	}

	json_t *out = rt_output(rt);
	FUZZ_CHECK(json_is_object(out), "no output");
	FUZZ_CHECK(jv_is_string(json_object_get(out, "sessionId")), "an output without sessionId");
	const json_t *err = json_object_get(out, "error");
	if (err)
		FUZZ_CHECK(jv_is_string(json_object_get(err, "status")) &&
		           jv_is_string(json_object_get(err, "message")),
		           "an error without status and message");
	(void)rt_output_status(out);
	char *text = fuzz_dump(out);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "%zu turns, %zu chunks: %s\n", turns, s.chunks, text);
	free(text);
	const json_t *state = json_object_get(out, "state");
	if (state) {
		struct sink s2 = { 0, 0 };
		struct core_err e2 = { 0 };
		json_t *again = json_pack("{s:O}", "state", state);
		struct runtime *rt2 = open_rt(again, &s2, &e2);
		FUZZ_CHECK(rt2, "the returned state does not open again: %s", e2.msg);
		rt_free(rt2);
		json_decref(again);
	}
	json_decref(out);
	rt_free(rt);
	return 0;
}
