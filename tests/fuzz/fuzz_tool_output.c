/*
 * fuzz_tool_output.c - what a tool writes on stdout (libcore/agent/tools.c
 * tools_run): the NDJSON lines {"custom"}, {"customPatch"}, {"artifact"},
 * {"part"}, then one {"output"} or {"interrupt"}.
 *
 * Input: the tool's stdout.  The tool is a real process (a shell script
 * that reads its request, then prints the input), so this runs the whole
 * call: spawn, pipes, line framing, parsing, exit status.
 * Invariants:
 *  - a call either fails with a message, or ends with exactly one of an
 *    output and an interrupt, equal to the value of the last non-blank
 *    line; parts is an array of objects;
 *  - custom and artifact events arrive only with the shapes the protocol
 *    gives them.
 */
#include "fuzz.h"

#include <signal.h>
#include <string.h>
#include <sys/stat.h>

#include "../../libcore/base/json.h"
#include "../../libcore/agent/tools.h"
#include "../../libcore/base/spawn.h"
#include "../../libcore/model/registry.h"

static struct tool *tool;

static enum core_status on_custom(void *ctx, const struct tool *t, const json_t *value,
                                  int is_patch, struct core_err *e)
{
	FUZZ_CHECK(!is_patch || json_is_array(value), "a customPatch that is not an array");
	return CORE_OK;
}

static enum core_status on_artifact(void *ctx, const struct tool *t, const json_t *a,
                                    struct core_err *e)
{
	FUZZ_CHECK(json_is_object(a) && json_is_array(json_object_get(a, "parts")),
	           "an artifact without parts");
	return CORE_OK;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_err e = { 0 };
	char *dirs[2] = { NULL, NULL };
	spawn_protect_keys(model_key_variable, NULL);
	signal(SIGPIPE, SIG_IGN);
	core_buf_addf(&b, "%s/tools", fuzz_tmpdir());
	mkdir(b.p, 0700);
	core_buf_reset(&b);
	char *out_path = fuzz_write("tool-out", "", 0);
	core_buf_addf(&b, "#!/bin/sh\ncat >/dev/null\nexec cat '%s'\n", out_path);
	free(out_path);
	free(fuzz_write("tools/fz", b.p, b.len));
	core_buf_reset(&b);
	core_buf_adds(&b, "{\"description\": \"fuzz\", \"timeout\": \"20s\"}");
	free(fuzz_write("tools/fz.json", b.p, b.len));
	core_buf_reset(&b);
	core_buf_addf(&b, "%s/tools", fuzz_tmpdir());
	dirs[0] = b.p;
	if (tool_load("fz", dirs, &tool, &e)) {
		fprintf(stderr, "fuzz: %s\n", e.msg);
		abort();
	}
	core_buf_release(&b);
	(void)argc;
	(void)argv;
	return 0;
}

/* The last non-blank line of p[0..n), parsed, or NULL. */
static json_t *last_line(const char *p, size_t n)
{
	struct core_err e = { 0 };
	size_t end = n;
	for (;;) {
		while (end && strchr(" \t\r\n", p[end - 1]))
			end--;
		if (!end)
			return NULL;
		size_t start = end;
		while (start && p[start - 1] != '\n')
			start--;
		while (start < end && (p[start] == ' ' || p[start] == '\t'))
			start++;
		if (start < end)
			return jv_parse(p + start, end - start, "last", 1, &e);
		end = start;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tool_call c;
	struct core_err e = { 0 };
	struct tool_events ev = { on_custom, on_artifact, NULL, NULL, NULL };
	struct tool_context ctx = { "s1", "snap1", "", 0, NULL, NULL, NULL };
	json_t *custom = json_object();
	free(fuzz_write("tool-out", data, size));
	memset(&c, 0, sizeof c);
	c.tool = tool;
	enum core_status st = tools_run(&c, 1, custom, &ctx, &ev, &e);
	FUZZ_CHECK(st == CORE_OK, "tools_run failed: %s", e.msg);
	if (c.st != CORE_OK) {
		FUZZ_CHECK(c.err.msg[0], "a failed call without a message");
	} else {
		FUZZ_CHECK(!c.output != !c.interrupt, "output %p, interrupt %p",
		           (void *)c.output, (void *)c.interrupt);
		json_t *last = last_line((const char *)data, size);
		FUZZ_CHECK(last && json_object_size(last) == 1, "success without a final line");
		const json_t *want = json_object_get(last, c.output ? "output" : "interrupt");
		FUZZ_CHECK(want, "the final line is not the call's result");
		if (c.interrupt && json_is_null(want))
			FUZZ_CHECK(json_is_true(c.interrupt), "a null interrupt is not true");
		else
			FUZZ_CHECK(jv_equal(want, c.output ? c.output : c.interrupt),
			           "the result is not the final line's value");
		json_decref(last);
		size_t i;
		const json_t *p;
		FUZZ_CHECK(json_is_array(c.parts), "parts is not an array");
		json_array_foreach(c.parts, i, p)
			FUZZ_CHECK(json_is_object(p), "part %zu is not an object", i);
	}
	tool_call_release(&c);
	json_decref(custom);
	return 0;
}
