/*
 * fuzz_tool_manifest.c - tool manifests (libcore/agent/tools.c tool_load).
 *
 * Input: the manifest file tools/fz.json.
 * Invariants:
 *  - a refused manifest says which ("tool manifest" or "tool 'fz'" in the
 *    message) and returns no tool;
 *  - a loaded tool has a name, a definition the model can be sent (an
 *    object with that name, a string description and an object
 *    inputSchema, dumping as JSON), a command to run and a positive
 *    timeout.
 */
#include "fuzz.h"

#include <string.h>
#include <sys/stat.h>

#include "../../libcore/base/json.h"
#include "../../libcore/agent/tools.h"

static char *dirs[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	size_t n = strlen(fuzz_tmpdir()) + 8;
	dirs[0] = malloc(n);
	snprintf(dirs[0], n, "%s/tools", fuzz_tmpdir());
	mkdir(dirs[0], 0700);
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tool *t = NULL;
	struct core_err e = { 0 };
	free(fuzz_write("tools/fz.json", data, size));
	enum core_status st = tool_load("fz", dirs, &t, &e);
	if (st != CORE_OK) {
		FUZZ_CHECK(!t, "a refused manifest gave a tool");
		FUZZ_CHECK(strstr(e.msg, "tool manifest") || strstr(e.msg, "tool 'fz'"),
		           "a refusal that does not name the manifest: %s", e.msg);
		return 0;
	}
	FUZZ_CHECK(t && t->name, "no name");
	const json_t *d = t->definition;
	FUZZ_CHECK(json_is_object(d), "no definition");
	FUZZ_CHECK(jv_is_string(json_object_get(d, "name")) &&
	           !strcmp(json_string_value(json_object_get(d, "name")), t->name),
	           "the definition's name is not the tool's");
	FUZZ_CHECK(jv_is_string(json_object_get(d, "description")), "no description");
	FUZZ_CHECK(json_is_object(json_object_get(d, "inputSchema")), "no inputSchema");
	free(fuzz_dump(d));
	FUZZ_CHECK(t->argv && t->argv[0], "no command");
	FUZZ_CHECK(t->timeout_ms > 0, "timeout %lld ms", (long long)t->timeout_ms);
	tool_free(t);
	return 0;
}
