/*
 * fuzz_provider.c - the streamed replies of the HTTP providers
 * (libcore/model/provider_openai.c, provider_anthropic.c, provider_gemini.c,
 * provider_ollama.c, provider_responses.c over provider_common.c, http.c
 * and sse.c).
 *
 * Input: byte 0 picks the provider (4 mod 8: openai-responses, else mod 4:
 * openai, anthropic, googleai, ollama), byte 1 the reply (mod 8: mostly 200 with the stream's type;
 * 200 as application/json, 400, 401, 429, 500), the rest is the response
 * body.  A server thread on 127.0.0.1 answers each call with it, so the
 * real path runs: the request encoder (a history with a tool call and
 * its response), libcurl, the status and type checks, SSE or NDJSON
 * framing, the provider's event decoder, the error-body mapping.
 * Retries are off (AGENTKIT_HTTP_RETRIES=0), so one input is one request.
 * Invariants:
 *  - a call fails with a message that is valid UTF-8 (error bodies hold any
 *    bytes) and never holds the API key it sent, or
 *    answers a model message (content an array of part objects) with a
 *    finish reason and usage that is an object or absent;
 *  - every streamed chunk is a model chunk with a content array, and the
 *    text streamed is the text of the final message.
 */
#include "fuzz.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../libcore/base/buf.h"
#include "../../libcore/base/json.h"
#include "../../libcore/base/utf8.h"
#include "../../libcore/model/registry.h"

#define KEY "fuzzkey-5ecret-value"

static int listen_fd;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char reply_head[256];            /* status line and headers */
static const uint8_t *reply_body;
static size_t reply_len;

static void write_all(int fd, const void *p, size_t n)
{
	const char *s = p;
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* Read the request (headers and a Content-Length body), answer, close. */
static void *serve(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(listen_fd, NULL, NULL);
		char buf[65536];
		size_t have = 0;
		long want = -1;
		if (fd < 0)
			continue;
		for (;;) {
			ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
			if (r <= 0)
				break;
			have += (size_t)r;
			buf[have] = 0;
			char *end = strstr(buf, "\r\n\r\n");
			if (end && want < 0) {
				char *cl = strcasestr(buf, "\r\ncontent-length:");
				want = (long)(end + 4 - buf) + (cl ? strtol(cl + 17, NULL, 10) : 0);
			}
			if (want >= 0 && (long)have >= want)
				break;
			if (have == sizeof buf - 1)
				break;
		}
		/* Copy the reply while the client still waits for it: once it
		 * has read enough it may fail the call, and the input is gone. */
		pthread_mutex_lock(&mu);
		struct core_buf reply = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		core_buf_adds(&reply, reply_head);
		core_buf_add(&reply, reply_body, reply_len);
		pthread_mutex_unlock(&mu);
		write_all(fd, reply.p, reply.len);
		core_buf_release(&reply);
		close(fd);
	}
	return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct sockaddr_in a = { 0 };
	socklen_t alen = sizeof a;
	pthread_t th;
	char url[64];
	signal(SIGPIPE, SIG_IGN);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof a) ||
	    listen(listen_fd, 16) || getsockname(listen_fd, (struct sockaddr *)&a, &alen)) {
		perror("fuzz: listen");
		abort();
	}
	snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(a.sin_port));
	setenv("OPENAI_BASE_URL", url, 1);
	setenv("ANTHROPIC_BASE_URL", url, 1);
	setenv("GEMINI_BASE_URL", url, 1);
	setenv("OLLAMA_HOST", url, 1);
	setenv("OPENAI_API_KEY", KEY, 1);
	setenv("ANTHROPIC_API_KEY", KEY, 1);
	setenv("GEMINI_API_KEY", KEY, 1);
	setenv("AGENTKIT_HTTP_RETRIES", "0", 1);
	setenv("AGENTKIT_HTTP_CONNECT_TIMEOUT", "10s", 1);
	setenv("AGENTKIT_HTTP_IDLE_TIMEOUT", "10s", 1);
	unsetenv("http_proxy");
	unsetenv("HTTP_PROXY");
	unsetenv("all_proxy");
	unsetenv("ALL_PROXY");
	if (pthread_create(&th, NULL, serve, NULL))
		abort();
	pthread_detach(th);
	(void)argc;
	(void)argv;
	return 0;
}

struct seen {
	struct core_buf text;
};

static void add_texts(struct core_buf *b, const json_t *content)
{
	size_t i;
	const json_t *p;
	json_array_foreach(content, i, p) {
		const json_t *t = json_object_get(p, "text");
		if (jv_is_string(t))
			core_buf_add(b, json_string_value(t), json_string_length(t));
	}
}

static enum core_status on_chunk(void *ctx, const json_t *chunk)
{
	struct seen *s = ctx;
	const json_t *content = json_object_get(chunk, "content");
	FUZZ_CHECK(json_is_array(content), "a chunk without content");
	FUZZ_CHECK(!strcmp(json_string_value(json_object_get(chunk, "role")), "model"),
	           "a chunk not from the model");
	add_texts(&s->text, content);
	return CORE_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const models[] = {
		"openai/gpt-fuzz", "anthropic/claude-fuzz", "googleai/gemini-fuzz", "ollama/llama-fuzz",
		"openai-responses/gpt-fuzz",
	};
	static const char *const sse_type[] = {
		"text/event-stream", "text/event-stream", "text/event-stream", "application/x-ndjson",
		"text/event-stream",
	};
	char head[sizeof reply_head];
	if (size < 2)
		return 0;
	int which = data[0] % 8 == 4 ? 4 : data[0] % 4;
	switch (data[1] % 8) {
	case 4:
		snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
		         "Connection: close\r\n\r\n");
		break;
	case 5:
		snprintf(head, sizeof head, "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
		         "Connection: close\r\n\r\n");
		break;
	case 6:
		snprintf(head, sizeof head, "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
		         "Retry-After: 1\r\nConnection: close\r\n\r\n",
		         data[1] & 8 ? "429 Too Many Requests" : "401 Unauthorized");
		break;
	case 7:
		snprintf(head, sizeof head, "HTTP/1.1 500 Internal Server Error\r\n"
		         "Content-Type: text/plain\r\nConnection: close\r\n\r\n");
		break;
	default:
		snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\n"
		         "Connection: close\r\n\r\n", sse_type[which]);
	}
	pthread_mutex_lock(&mu);
	memcpy(reply_head, head, sizeof head);
	reply_body = data + 2;
	reply_len = size - 2;
	pthread_mutex_unlock(&mu);

	struct core_err e = { 0 };
	struct seen s = { CORE_BUF_INIT(CORE_BUF_UNLIMITED) };
	struct model_stream stream = { on_chunk, NULL, &s };
	/* A history with a tool call (without input, as a client state may
	 * hold it) and its response, so each request encoder runs too. */
	json_t *msgs = json_pack("[{s:s, s:[{s:s}]}, {s:s, s:[{s:{s:s, s:s}}]},"
	                         " {s:s, s:[{s:{s:s, s:s, s:{s:b}}}]}, {s:s, s:[{s:s}]}]",
	                         "role", "user", "content", "text", "hi",
	                         "role", "model", "content", "toolRequest", "name", "addTask",
	                         "ref", "r1",
	                         "role", "tool", "content", "toolResponse", "name", "addTask",
	                         "ref", "r1", "output", "ok", 1,
	                         "role", "user", "content", "text", "go on");
	json_t *tools = json_pack("[{s:s, s:s, s:{s:s}}]", "name", "addTask", "description", "d",
	                          "inputSchema", "type", "object");
	struct model_request req = { .messages = msgs, .tools = tools };
	struct model_response resp = { 0 };
	enum core_status st = model_generate(models[which], &req, &stream, &resp, &e);
	if (st != CORE_OK) {
		FUZZ_CHECK(e.msg[0], "a failed call without a message");
		FUZZ_CHECK(utf8_valid(e.msg, strlen(e.msg)) == strlen(e.msg),
		           "the message is not valid UTF-8");
		/* Ollama sends no key, so it has none to hide. */
		FUZZ_CHECK(which == 3 || !strstr(e.msg, KEY), "the key is in the message: %s", e.msg);
	} else {
		const json_t *content = json_object_get(resp.message, "content");
		size_t i;
		const json_t *p;
		struct core_buf final = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		FUZZ_CHECK(json_is_array(content), "the answer has no content");
		json_array_foreach(content, i, p)
			FUZZ_CHECK(json_is_object(p), "part %zu is not an object", i);
		FUZZ_CHECK(!resp.usage || json_is_object(resp.usage), "usage is not an object");
		add_texts(&final, content);
		FUZZ_CHECK(final.len == s.text.len && (!final.len || !memcmp(final.p, s.text.p, final.len)),
		           "streamed text '%s' is not the final text '%s'",
		           s.text.p ? s.text.p : "", final.p ? final.p : "");
		free(fuzz_dump(resp.message));
		core_buf_release(&final);
	}
	model_response_release(&resp);
	core_buf_release(&s.text);
	json_decref(msgs);
	json_decref(tools);
	return 0;
}
