/*
 * render_test.c - unit tests for libcore/render (agent-run --format text
 * and the --list-models table).  The sink writes into one log here, "O:"
 * before what would go to stdout, "E:" before each stderr line, so a test
 * sees both streams and their order.
 */
#include <stdio.h>
#include <string.h>

#include "../../libcore/base/buf.h"
#include "../../libcore/base/json.h"
#include "../../libcore/agent/render.h"
#include "tap.h"

static struct core_buf log_buf = CORE_BUF_INIT(CORE_BUF_UNLIMITED);

static enum core_status log_text(void *ctx, const char *p, size_t n)
{
	core_buf_adds(&log_buf, "O:");
	return core_buf_add(&log_buf, p, n);
}

static enum core_status log_flush(void *ctx)
{
	return CORE_OK;
}

static void log_note(void *ctx, const char *line, size_t n)
{
	core_buf_adds(&log_buf, "E:");
	core_buf_add(&log_buf, line, n);
	core_buf_adds(&log_buf, "\n");
}

static const struct render_sink sink = { log_text, log_flush, log_note, NULL };

/* Render the chunks (a JSON array literal); the log is the result. */
static const char *render_all(int color, const char *chunks)
{
	struct render r;
	json_t *a = pj(chunks), *c;
	size_t i;
	core_buf_reset(&log_buf);
	if (render_init(&r, color, sink))
		return "(no memory)";
	json_array_foreach(a, i, c)
		if (render_chunk(&r, c))
			break;
	render_release(&r);
	json_decref(a);
	core_buf_addc(&log_buf, 0);
	return log_buf.p;
}

static void check(const char *name, const char *got, const char *want)
{
	char detail[1024];
	snprintf(detail, sizeof detail, "got [%s]", got);
	report(!strcmp(got, want), name, detail);
}

#define TEXT(i, t) "{\"modelChunk\":{\"role\":\"model\",\"index\":" #i \
	",\"content\":[{\"text\":\"" t "\"}]}}"

static void test_chunks(void)
{
	check("the model's text streams; a new message starts a new line",
	      render_all(0, "[" TEXT(0, "Hel") "," TEXT(0, "lo") "," TEXT(1, "Bye") ","
	                 "{\"turnEnd\":{\"finishReason\":\"stop\"}}]"),
	      "O:HelO:loO:\nO:ByeO:\n");
	check("a tool request and its answer are a line each after the text",
	      render_all(0, "[" TEXT(0, "Looking.") ","
	                 "{\"modelChunk\":{\"role\":\"model\",\"index\":0,\"content\":"
	                 "[{\"toolRequest\":{\"name\":\"search\",\"input\":{\"q\":\"milk\"}}}]}},"
	                 "{\"modelChunk\":{\"role\":\"tool\",\"index\":1,\"content\":"
	                 "[{\"toolResponse\":{\"name\":\"search\",\"output\":[1,2]}}]}},"
	                 "{\"turnEnd\":{\"finishReason\":\"stop\"}}]"),
	      "O:Looking.O:\nE:tool search {\"q\":\"milk\"}\nE:tool search ok [1,2]\n");
	check("a request still open when the turn fails is the one that failed",
	      render_all(0, "[{\"modelChunk\":{\"role\":\"model\",\"content\":[{\"toolRequest\":"
	                 "{\"name\":\"rm\"}}]}},{\"turnEnd\":{\"finishReason\":\"failed\"}}]"),
	      "E:tool rm\nE:tool rm error\n");
	check("an interrupt is named, coloured on a terminal",
	      render_all(1, "[{\"modelChunk\":{\"role\":\"model\",\"content\":[{\"toolRequest\":"
	                 "{\"name\":\"ask\"},\"metadata\":{\"interrupt\":true}}]}}]"),
	      "E:\033[2mtool ask\033[0m \033[33minterrupted\033[0m\n");
	check("long tool JSON is cut short, never inside a UTF-8 sequence",
	      render_all(0, "[{\"modelChunk\":{\"role\":\"tool\",\"content\":[{\"toolResponse\":"
	                 "{\"name\":\"t\",\"output\":\"" "0123456789012345678901234567890123456789"
	                 "012345678901234567890123456789\xc3\xa9xyz\"}}]}}]"),
	      "E:tool t ok \"0123456789012345678901234567890123456789"
	      "012345678901234567890123456789...\n");
}

static void test_summary(void)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	json_t *out = pj("{\"finishReason\":\"stop\",\"snapshotId\":\"r1\"}");
	json_t *u = pj("{\"inputTokens\":12,\"outputTokens\":30}");
	render_summary("agent-run", out, "s1", u, NULL, 0, &b);
	core_buf_addc(&b, 0);
	check("the summary names the reason, session, snapshot and tokens", b.p,
	      "agent-run: stop, session s1, snapshot r1, 12 tokens in, 30 out");
	json_decref(out);
	json_decref(u);
	core_buf_reset(&b);
	out = pj("{\"finishReason\":\"\"}");
	u = pj("{\"inputCharacters\":5,\"outputCharacters\":7}");
	render_summary("agent-run", out, "s2", u, NULL, 1, &b);
	core_buf_addc(&b, 0);
	check("characters for models that count those; no reason is completed; dim", b.p,
	      "\033[2magent-run: completed, session s2, 5 characters in, 7 out\033[0m");
	json_decref(out);
	json_decref(u);
	core_buf_release(&b);
}

static void row_in(const char *name, const char *json, int width, const char *want)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	json_t *r = pj(json);
	render_model_row(r, width, &b);
	core_buf_addc(&b, 0);
	check(name, b.p, want);
	json_decref(r);
	core_buf_release(&b);
}

static void row(const char *name, const char *json, const char *want)
{
	row_in(name, json, 10, want);
}

static void test_model_rows(void)
{
	row("an offline provider", "{\"provider\":\"echo\"}", "echo      offline, no key");
	row("a key that is set, its models",
	    "{\"provider\":\"openai\",\"keyFrom\":\"OPENAI_API_KEY\","
	    "\"baseUrl\":\"https://api.openai.com/v1\",\"models\":[\"gpt-4o\",\"o3\"]}",
	    "openai    key from OPENAI_API_KEY, https://api.openai.com/v1\n  gpt-4o\n  o3");
	row("keys not set, and why the list failed", "{\"provider\":\"gemini\",\"keyVariables\":"
	    "[\"GOOGLE_API_KEY\",\"GEMINI_API_KEY\"],\"baseUrl\":\"https://g\",\"error\":"
	    "{\"message\":\"denied\"}}",
	    "gemini    GOOGLE_API_KEY or GEMINI_API_KEY: not set, https://g\n"
	    "  (cannot list: denied)");
	row("an optional key", "{\"provider\":\"ollama\",\"keyVariables\":[\"OLLAMA_API_KEY\"],"
	    "\"keyOptional\":true,\"baseUrl\":\"http://localhost:11434\"}",
	    "ollama    no key needed, http://localhost:11434");
	row("a long name keeps a space", "{\"provider\":\"anthropic1\"}",
	    "anthropic1 offline, no key");
	row_in("a wider column", "{\"provider\":\"echo\"}", 17, "echo             offline, no key");
}

int main(void)
{
	test_chunks();
	test_summary();
	test_model_rows();
	core_buf_release(&log_buf);
	return tap_end();
}
