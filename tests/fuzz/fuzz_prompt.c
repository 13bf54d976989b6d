/*
 * fuzz_prompt.c - prompt files: YAML front matter (libyaml, libcore/agent/prompt.c)
 * and the Handlebars body (libcore/base/template.c), loaded and rendered as a
 * turn renders them.
 *
 * Input: a whole prompt file.
 * Invariants:
 *  - a refused file says where: the message starts "fuzz.prompt:";
 *  - the front matter is a JSON object that dumps and parses back equal;
 *  - rendering is deterministic (twice, byte-identical messages) and gives
 *    an array of messages, each with a role of the four and a content
 *    array, where the history appears whole, tagged and in order (once,
 *    or once per rendered {{history}}).
 */
#include "fuzz.h"

#include <string.h>

#include "../../libcore/base/json.h"
#include "../../libcore/agent/prompt.h"

static json_t *input, *state, *history;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct core_err e = { 0 };
	static const char in[] = "{\"name\":\"Ada\",\"items\":[1,\"two\",{\"x\":null}],\"n\":0}";
	static const char st[] = "{\"tasks\":[{\"title\":\"a\",\"done\":false},"
	                         "{\"title\":\"b\",\"done\":true}],\"count\":2}";
	static const char hi[] = "[{\"role\":\"user\",\"content\":[{\"text\":\"H1\"}]},"
	                         "{\"role\":\"model\",\"content\":[{\"text\":\"H2\"}]}]";
	input = jv_parse(in, sizeof in - 1, "input", 0, &e);
	state = jv_parse(st, sizeof st - 1, "state", 0, &e);
	history = jv_parse(hi, sizeof hi - 1, "history", 0, &e);
	if (!input || !state || !history)
		abort();
	(void)argc;
	(void)argv;
	return 0;
}

static int valid_role(const char *r)
{
	return r && (!strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "model") ||
	             !strcmp(r, "tool"));
}

static void check_messages(const json_t *msgs)
{
	size_t i, seen = 0;
	const json_t *m;
	FUZZ_CHECK(json_is_array(msgs), "render gave no array");
	json_array_foreach(msgs, i, m) {
		const json_t *md = json_object_get(m, "metadata");
		FUZZ_CHECK(valid_role(json_string_value(json_object_get(m, "role"))),
		           "message %zu has a bad role", i);
		FUZZ_CHECK(json_is_array(json_object_get(m, "content")),
		           "message %zu has no content array", i);
		if (json_is_true(json_object_get(md, "_genkit_history"))) {
			/* Each rendered {{history}} places the whole history. */
			const json_t *h = json_array_get(history, seen % json_array_size(history));
			FUZZ_CHECK(jv_equal(json_object_get(m, "content"),
			                    json_object_get(h, "content")),
			           "history message %zu out of order", seen);
			seen++;
		}
	}
	FUZZ_CHECK(seen && seen % json_array_size(history) == 0,
	           "%zu history messages placed for a history of %zu", seen,
	           json_array_size(history));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct prompt *p = NULL;
	struct core_err e = { 0 };
	enum core_status st = prompt_parse((const char *)data, size, "fuzz.prompt", &p, &e);
	if (st != CORE_OK) {
		FUZZ_CHECK(!p, "a refused prompt was returned");
		FUZZ_CHECK(!strncmp(e.msg, "fuzz.prompt", 11) || st == CORE_ENOMEM ||
		           st == CORE_ETOOBIG, "a refusal that does not name the file: %s", e.msg);
		return 0;
	}
	const json_t *meta = prompt_meta(p);
	FUZZ_CHECK(json_is_object(meta), "front matter is not an object");
	char *text = fuzz_dump(meta);
	json_t *back = jv_parse(text, strlen(text), "meta", 0, &e);
	FUZZ_CHECK(back && jv_equal(back, meta), "front matter does not dump and read back: %s",
	           text);
	json_decref(back);
	free(text);

	json_t *m1 = NULL, *m2 = NULL;
	struct core_err e1 = { 0 }, e2 = { 0 };
	enum core_status s1 = prompt_render(p, input, state, history, &m1, &e1);
	enum core_status s2 = prompt_render(p, input, state, history, &m2, &e2);
	FUZZ_CHECK(s1 == s2 && !strcmp(e1.msg, e2.msg), "rendering twice differs: %s / %s",
	           e1.msg, e2.msg);
	if (s1 == CORE_OK) {
		FUZZ_CHECK(jv_same(m1, m2), "rendering twice gives different messages");
		check_messages(m1);
	} else {
		FUZZ_CHECK(!strncmp(e1.msg, "fuzz.prompt", 11) || s1 == CORE_ETOOBIG ||
		           s1 == CORE_ENOMEM, "a render error that does not name the file: %s",
		           e1.msg);
	}
	json_decref(m1);
	json_decref(m2);
	prompt_free(p);
	return 0;
}
