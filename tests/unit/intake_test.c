/*
 * intake_test.c - unit tests for libcore/intake (the eager intake of
 * agent-run's stdin, runtime-semantics §2.1) and feed's input shaping.
 * Each case puts the read end of a pipe on fd 0, writes lines into it and
 * reads them back through the intake in this process: the line check,
 * the format of stdin, the queue with and without its reader thread, the
 * error after the good lines, the detach drain and its hand-over to a
 * detached run's queue.  Then feed's shaping of the first turn's text and
 * of the AgentInit from the flags.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../libcore/base/buf.h"
#include "../../libcore/agent/detach.h"
#include "../../libcore/agent/feed.h"
#include "../../libcore/agent/intake.h"
#include "../../libcore/base/json.h"
#include "tap.h"

static volatile sig_atomic_t no_stop;

/* fd 0 becomes a pipe holding text; with keep_open, *writer is its
 * still-open write end (else the pipe is at end of file after text). */
static void stdin_pipe(const char *text, int keep_open, int *writer)
{
	int p[2];
	if (pipe(p) < 0) {
		perror("pipe");
		exit(2);
	}
	size_t n = strlen(text);
	if (n && write(p[1], text, n) != (ssize_t)n) {
		perror("write");
		exit(2);
	}
	dup2(p[0], 0);
	close(p[0]);
	if (keep_open)
		*writer = p[1];
	else
		close(p[1]);
}

/* The text of an input's first content part, or "". */
static const char *text_of(const json_t *in)
{
	const char *t = json_string_value(json_object_get(json_array_get(json_object_get(
	        json_object_get(in, "message"), "content"), 0), "text"));
	return t ? t : "";
}

static void test_parse_line(void)
{
	struct core_err e = { 0 };
	json_t *in = NULL;
	const char *good = "{\"message\":{\"role\":\"user\",\"content\":[{\"text\":\"hi\"}]}}";
	enum core_status st = intake_parse_line(good, strlen(good), 1, &in, &e);
	report(!st && in && !strcmp(text_of(in), "hi"), "a good line is its AgentInput", e.msg);
	json_decref(in);

	st = intake_parse_line("null", 4, 2, &in, &e);
	report(!st && !in, "a null line is no input", e.msg);

	st = intake_parse_line("{\"message\":", 11, 3, &in, &e);
	report(st == CORE_EINVAL && !in && strstr(e.msg, "<stdin>:3"),
	       "bad JSON fails and names its line", e.msg);

	const char *bad = "{\"resume\":5}";
	st = intake_parse_line(bad, strlen(bad), 7, &in, &e);
	report(st == CORE_EINVAL && !in && strstr(e.msg, "'resume' must be an object")
	       && strstr(e.msg, "(at <stdin>:7)"),
	       "an invalid AgentInput fails with the check's message and its line", e.msg);
}

static void test_read_stdin(void)
{
	struct core_err e = { 0 };
	struct core_buf b;
	int kind;
	enum core_status st;

	stdin_pipe("  \n{\"message\":{}}\n{}\n", 0, NULL);
	st = intake_read_stdin(0, 1024, &no_stop, &b, &kind, &e);
	report(!st && kind == INTAKE_NDJSON && b.len >= 3 && !memcmp(b.p, "  \n", 3),
	       "a first non-blank '{' is NDJSON, the bytes read ahead kept", e.msg);
	core_buf_release(&b);

	stdin_pipe("review this\nplease\n", 0, NULL);
	st = intake_read_stdin(0, 1024, &no_stop, &b, &kind, &e);
	report(!st && kind == INTAKE_TEXT && b.len == 19 && !memcmp(b.p, "review this\nplease\n", 19),
	       "other text is read whole", e.msg);
	core_buf_release(&b);

	stdin_pipe("{\"not\": \"ndjson\"}", 0, NULL);
	st = intake_read_stdin(INTAKE_TEXT, 1024, &no_stop, &b, &kind, &e);
	report(!st && kind == INTAKE_TEXT && b.len == 17, "--input-format text wins over '{'",
	       e.msg);
	core_buf_release(&b);

	stdin_pipe(" \t\r\n\n", 0, NULL);
	st = intake_read_stdin(0, 1024, &no_stop, &b, &kind, &e);
	report(!st && kind == INTAKE_NONE, "only blanks is no input", e.msg);
	core_buf_release(&b);

	stdin_pipe("0123456789abcdef", 0, NULL);
	st = intake_read_stdin(0, 10, &no_stop, &b, &kind, &e);
	report(st == CORE_ETOOBIG && !strcmp(e.msg, "text on <stdin> is longer than 10 bytes "
	                                     "(--max-record)"),
	       "text over --max-record fails", e.msg);
	core_buf_release(&b);

	stdin_pipe("caf\xc3(", 0, NULL);
	st = intake_read_stdin(0, 1024, &no_stop, &b, &kind, &e);
	report(st == CORE_EINVAL && !strcmp(e.msg, "text on <stdin> is not valid UTF-8"),
	       "text that is not UTF-8 fails", e.msg);
	core_buf_release(&b);
}

static void test_all_there(void)
{
	struct core_buf b = CORE_BUF_INIT(0);
	int w = -1;
	stdin_pipe("{}\n{}\n", 0, NULL);
	report(intake_all_there(&b) == 1 && b.len == 6, "input at its end is all there", NULL);
	core_buf_release(&b);
	core_buf_init(&b, 0);
	stdin_pipe("{}\n", 1, &w);
	report(intake_all_there(&b) == 0 && b.len == 3, "a writer still there may send more",
	       NULL);
	close(w);
	core_buf_release(&b);
}

#define MSG(t) "{\"message\":{\"role\":\"user\",\"content\":[{\"text\":\"" t "\"}]}}\n"

/* Take every input: their texts joined by ',' in got, and what ended it. */
static enum intake_next take_all(struct intake *in, char *got, size_t size,
                                 struct core_err *err)
{
	enum intake_next n;
	json_t *next;
	got[0] = 0;
	while ((n = intake_take(in, &no_stop, &next, err)) == INTAKE_INPUT) {
		size_t len = strlen(got);
		snprintf(got + len, size - len, "%s%s", len ? "," : "", text_of(next));
		json_decref(next);
	}
	return n;
}

static void test_queue(int threaded)
{
	struct intake in;
	struct core_err e = { 0 }, err = { 0 };
	struct core_buf ahead = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	char got[256];
	const char *name;
	core_buf_adds(&ahead, MSG("a"));
	stdin_pipe(MSG("b") "null\n" MSG("c"), 0, NULL);
	intake_init(&in);
	enum core_status st = intake_start(&in, &ahead, 1024, threaded, &e);
	enum intake_next n = st ? INTAKE_END : take_all(&in, got, sizeof got, &err);
	name = threaded ? "reader thread: the inputs in order after the bytes read ahead"
	                : "on demand: the inputs in order after the bytes read ahead";
	report(!st && n == INTAKE_END && !err.st && !strcmp(got, "a,b,c")
	       && in.threaded == threaded, name, st ? e.msg : got);
	intake_release(&in);

	stdin_pipe(MSG("a") MSG("b") "{\"message\":\n" MSG("d"), 0, NULL);
	core_buf_reset(&ahead);
	intake_init(&in);
	st = intake_start(&in, &ahead, 1024, threaded, &e);
	n = st ? INTAKE_INPUT : take_all(&in, got, sizeof got, &err);
	name = threaded ? "reader thread: a bad line ends the intake after the lines before it"
	                : "on demand: a bad line ends the intake after the lines before it";
	report(!st && n == INTAKE_END && err.st == CORE_EINVAL && strstr(err.msg, "<stdin>:3")
	       && !strcmp(got, "a,b"), name, err.msg);
	intake_release(&in);
	core_buf_release(&ahead);
}

static void test_live(void)
{
	struct intake in;
	struct core_err e = { 0 }, err = { 0 };
	struct core_buf ahead = CORE_BUF_INIT(0);
	json_t *next = NULL;
	int w = -1;
	stdin_pipe("", 1, &w);
	intake_init(&in);
	enum core_status st = intake_start(&in, &ahead, 1024, 1, &e);
	ssize_t wr = write(w, MSG("live"), strlen(MSG("live")));
	enum intake_next n = st || wr < 0 ? INTAKE_END : intake_take(&in, &no_stop, &next, &err);
	report(n == INTAKE_INPUT && !strcmp(text_of(next), "live"),
	       "reader thread: a line written while the writer stays is taken at once", e.msg);
	json_decref(next);
	close(w);
	n = st ? INTAKE_INPUT : intake_take(&in, &no_stop, &next, &err);
	report(n == INTAKE_END && !err.st, "reader thread: the writer's close is the end", NULL);
	intake_release(&in);
}

static void test_detach(void)
{
	struct intake in;
	struct detach_run d;
	struct core_err e = { 0 }, err = { 0 };
	struct core_buf ahead = CORE_BUF_INIT(0);
	json_t *next = NULL;
	int w = -1;
	const char *rest = "{\"detach\":true,\"message\":{\"role\":\"user\","
	                   "\"content\":[{\"text\":\"b\"}]}}\n" MSG("c") "{\"oops\n";
	stdin_pipe(MSG("a"), 1, &w);
	intake_init(&in);
	enum core_status st = intake_start(&in, &ahead, 1024, 1, &e);
	enum intake_next n = st ? INTAKE_END : intake_take(&in, &no_stop, &next, &err);
	report(n == INTAKE_INPUT && !strcmp(text_of(next), "a"), "the line before a detach is a turn",
	       e.msg);
	json_decref(next);
	/* All at once: the reader drains what is written behind the detach. */
	if (write(w, rest, strlen(rest)) != (ssize_t)strlen(rest))
		st = CORE_ESYS;
	n = st ? INTAKE_END : intake_take(&in, &no_stop, &next, &err);
	report(n == INTAKE_DETACH && intake_detach_read(&in),
	       "a detach line detaches before the lines behind it are turns", NULL);
	memset(&d, 0, sizeof d);
	st = intake_hand_over(&in, &d, &e);
	report(!st && d.queue.n == 2 && !strcmp(text_of(d.queue.in[0]), "b")
	       && !json_object_get(d.queue.in[0], "detach")
	       && !strcmp(text_of(d.queue.in[1]), "c")
	       && d.tail.st == CORE_EINVAL && strstr(d.tail.msg, "<stdin>:4"),
	       "the detach line and those already written go to the background, then the error",
	       st ? e.msg : d.tail.msg);
	detach_queue_release(&d.queue);
	close(w);
	intake_release(&in);
}

static void test_first_text(void)
{
	struct core_buf piped = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	core_buf_adds(&piped, "diff --git a b\n");
	enum core_status st = feed_first_text("review this", &piped, &b);
	report(!st && b.len == 28 && !memcmp(b.p, "review this\n\ndiff --git a b\n", 28),
	       "piped text joins the first -m after a blank line", NULL);
	core_buf_reset(&b);
	st = feed_first_text(NULL, &piped, &b);
	report(!st && b.len == 15 && !memcmp(b.p, "diff --git a b\n", 15),
	       "without -m the piped text is the turn", NULL);
	json_t *m = feed_user_message("hi\n", 3);
	json_t *want = pj("{\"message\":{\"content\":[{\"text\":\"hi\\n\"}],\"role\":\"user\"}}");
	report(m && json_equal(m, want), "a user message is one text part", NULL);
	json_decref(m);
	json_decref(want);
	m = feed_user_message("\xff", 1);
	report(!m, "text that is not UTF-8 is no message", NULL);
	core_buf_release(&b);
	core_buf_release(&piped);
}

static void test_feed_init(void)
{
	struct core_err e = { 0 };
	json_t *init = NULL, *want;
	char path[] = "/tmp/intake_test_state.XXXXXX";
	struct feed_init f = { .json = "{\"snapshotId\":\"r1\"}", .session_id = "s1", .max = 1024 };
	enum core_status st = feed_init(&f, &init, &e);
	want = pj("{\"snapshotId\":\"r1\",\"sessionId\":\"s1\"}");
	report(!st && json_equal(init, want), "--init, then the flags", e.msg);
	json_decref(init);
	json_decref(want);

	f = (struct feed_init){ .json = "{\"sessionId\":\"a\"}", .session_id = "b", .max = 1024 };
	st = feed_init(&f, &init, &e);
	report(st == CORE_EUSAGE && !strcmp(e.msg, "the init's 'sessionId' is given twice "
	                                    "(--init and a flag)"),
	       "a key given twice is a usage error", e.msg);
	json_decref(init);

	f = (struct feed_init){ .json = "[1]", .session_id = "b", .max = 1024 };
	st = feed_init(&f, &init, &e);
	report(!st && json_is_array(init), "an init that is not an object is left to rt_open()",
	       e.msg);
	json_decref(init);

	int fd = mkstemp(path);
	ssize_t w = fd < 0 ? -1 : write(fd, "{\"messages\":[]}", 15);
	if (fd >= 0)
		close(fd);
	f = (struct feed_init){ .state_file = path, .max = 1024 };
	st = w == 15 ? feed_init(&f, &init, &e) : CORE_ESYS;
	want = pj("{\"state\":{\"messages\":[]}}");
	report(!st && json_equal(init, want), "--state FILE is the init's state", e.msg);
	json_decref(init);
	json_decref(want);
	f.max = 4;
	st = feed_init(&f, &init, &e);
	report(st == CORE_ETOOBIG, "a state file over its limit fails", e.msg);
	json_decref(init);
	unlink(path);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_parse_line();
	test_read_stdin();
	test_all_there();
	test_queue(0);
	test_queue(1);
	test_live();
	test_detach();
	test_first_text();
	test_feed_init();
	return tap_end();
}
