/*
 * provider_row_test.c - a provider is registered by one row of
 * libcore/model/registry.c's table, and from that row alone it is found
 * by name, answers calls, is listed by --list-models, suggested for a
 * near miss, and has its key kept from every child (spawn.h).
 *
 * The test builds the registry with one more row (REGISTRY_TEST_ROW), a
 * provider that exists only here, as HACKING.md's recipe adds one.
 */
#include <string.h>

#include "../../libcore/model/model.h"

extern const struct model_provider model_testonly;
#define REGISTRY_TEST_ROW &model_testonly
#include "../../libcore/model/registry.c"

#include "tap.h"

static enum core_status testonly_generate(const char *name, const struct model_request *req,
                                          const struct model_stream *stream,
                                          struct model_response *resp, struct core_err *e)
{
	resp->message = json_pack("{s:s, s:[{s:s}]}", "role", "model", "content", "text", name);
	snprintf(resp->finish_reason, sizeof resp->finish_reason, "stop");
	return resp->message ? CORE_OK : core_fail(e, CORE_ENOMEM, "out of memory");
}

static const char *const testonly_keys[] = { "TESTONLY_API_KEY", NULL };

const struct model_provider model_testonly = {
	.prefix = "testonly",
	.generate = testonly_generate,
	.key_vars = testonly_keys,
};

int main(void)
{
	struct core_err e = { 0 };
	size_t n = 0;
	while (model_provider_name(n))
		n++;
	report(n == 8 && !strcmp(model_provider_name(7), "testonly"),
	       "the row is the table's eighth provider", model_provider_name(n ? n - 1 : 0));

	json_t *msgs = json_pack("[{s:s, s:[{s:s}]}]", "role", "user", "content", "text", "hi");
	struct model_request req = { .messages = msgs };
	struct model_response resp = { 0 };
	enum core_status st = model_generate("testonly/m1", &req, NULL, &resp, &e);
	const char *text = json_string_value(json_object_get(
		json_array_get(json_object_get(resp.message, "content"), 0), "text"));
	report(st == CORE_OK && text && !strcmp(text, "m1"),
	       "a call of testonly/NAME goes to its generate", st ? e.msg : text);
	model_response_release(&resp);
	json_decref(msgs);

	e.msg[0] = 0;
	st = model_check("testonl/m1", &e);
	report(st == CORE_ENOTFOUND && strstr(e.msg, "did you mean 'testonly/m1'"),
	       "a near miss is told the provider's name", e.msg);

	report(model_key_variable("TESTONLY_API_KEY=secret"),
	       "its key variable is kept from children", NULL);
	report(!model_key_variable("TESTONLY_API_KEYS=x"), "and only that variable", NULL);

	json_t *rows = NULL;
	int failed = 0;
	unsetenv("AGENTKIT_MODELS_FILE");
	setenv("XDG_CONFIG_HOME", "/nonexistent-agentkit-test", 1);
	st = model_list(NULL, &rows, &failed, &e);
	const json_t *last = json_array_get(rows, 7);
	report(st == CORE_OK && !strcmp(json_string_value(json_object_get(last, "provider")) ?
	                                json_string_value(json_object_get(last, "provider")) : "",
	                                "testonly"),
	       "--list-models lists it", st ? e.msg : NULL);
	json_decref(rows);
	return tap_end();
}
