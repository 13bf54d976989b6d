/*
 * run_test.c - unit tests for libcore/base/run.c's bounds on a child run
 * to completion: idle_ms (no stdout for so long ends it; 2 when its stdin
 * was never read), eof_grace_ms (a child that closed its stdout but runs
 * on gets SIGTERM, then SIGKILL), a budget held by on_out() with
 * run_kill(), and the shared words for how a child ended.  The children
 * are /bin/sh scripts; each case is bounded by its own limits.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../libcore/base/run.h"
#include "../../libcore/base/spawn.h"
#include "../../libcore/base/util.h"
#include "tap.h"

static int no_key(const char *entry)
{
	(void)entry;
	return 0;
}

/* Run script with sh -c; the child's Out fields in *c, its stdout in out,
 * how long it took in *ms. */
static enum core_status sh(struct run_child *c, const char *script, struct core_buf *out,
                           int64_t *ms)
{
	char *const argv[] = { "/bin/sh", "-c", (char *)script, NULL };
	char **env = run_env(NULL, NULL);
	struct core_err e = { 0 };
	int64_t t0 = core_now_mono_ms();
	c->argv = argv;
	c->env = env;
	c->what = "the test's child";
	c->out = out;
	c->out_keep = 4096;
	enum core_status st = run_child(c, NULL, NULL, &e);
	*ms = core_now_mono_ms() - t0;
	free(env);
	return st;
}

static void test_idle(void)
{
	struct core_buf out = CORE_BUF_INIT(8192);
	struct run_child c = { .idle_ms = 200 };
	int64_t ms;
	check_int("idle: a silent child: run_child() is CORE_OK", sh(&c, "exec sleep 5", &out, &ms), 0);
	check_int("idle: a silent child is ended (idled 1)", c.idled, 1);
	check_int("idle: ... by SIGKILL", c.signal, SIGKILL);
	report(ms >= 200 && ms < 2000, "idle: ... after idle_ms, not its own end", NULL);

	/* Output keeps it alive: four lines 300 ms apart, 1.2 s in all, each
	 * within 1 s. */
	core_buf_reset(&out);
	c = (struct run_child){ .idle_ms = 1000 };
	sh(&c, "for i in 1 2 3 4; do echo x; sleep 0.3; done", &out, &ms);
	check_int("idle: a child that writes in time is not ended", c.idled, 0);
	check_int("idle: ... and exits 0", c.code, 0);
	check_str("idle: ... its output whole", out.p, "x\nx\nx\nx\n");

	/* A stdin larger than a pipe, never read. */
	size_t n = 300000;
	char *big = malloc(n);
	memset(big, 'a', n);
	c = (struct run_child){ .idle_ms = 200, .in = big, .in_len = n };
	sh(&c, "exec sleep 5", &out, &ms);
	check_int("idle: a child that does not read its stdin: idled 2", c.idled, 2);
	free(big);
	core_buf_release(&out);
}

static void test_eof_grace(void)
{
	struct core_buf out = CORE_BUF_INIT(8192);
	struct run_child c = { .eof_grace_ms = 200, .idle_ms = 100 };
	int64_t ms;
	sh(&c, "echo done; exec >&-; exec sleep 5", &out, &ms);
	check_str("eof grace: what it wrote before closing stdout is kept", out.p, "done\n");
	check_int("eof grace: a child that closed stdout gets SIGTERM", c.signal, SIGTERM);
	check_int("eof grace: ... and idle_ms no longer counts", c.idled, 0);
	report(ms >= 200 && ms < 2000, "eof grace: ... eof_grace_ms after", NULL);

	c = (struct run_child){ .eof_grace_ms = 200 };
	sh(&c, "exec >&-; trap '' TERM; exec sleep 5", &out, &ms);
	check_int("eof grace: one that ignores SIGTERM gets SIGKILL", c.signal, SIGKILL);
	report(ms >= 400 && ms < 2500, "eof grace: ... eof_grace_ms later again", NULL);

	c = (struct run_child){ .eof_grace_ms = 2000 };
	sh(&c, "exec >&-; sleep 0.2; exit 3", &out, &ms);
	check_int("eof grace: one that exits within it keeps its status", c.code, 3);
	check_int("eof grace: ... no signal", c.signal, 0);
	core_buf_release(&out);
}

/* on_out's budget: 100000 bytes. */
static size_t seen;
static void budget(struct run_child *c, const char *p, size_t n)
{
	if (p && (seen += n) > 100000)
		run_kill(c);
}

static void test_budget(void)
{
	struct run_child c = { .on_out = budget };
	int64_t ms;
	seen = 0;
	sh(&c, "exec yes", NULL, &ms);
	report(c.killed && c.signal == SIGKILL, "budget: on_out's run_kill() ends a child that "
	       "writes without end", NULL);
	report(seen > 100000 && seen < 100000 + 16 * 65536, "budget: ... within a read or so of it",
	       NULL);
}

static void test_words(void)
{
	struct core_buf b = CORE_BUF_INIT(4096);
	struct core_err e = { 0 };
	run_describe_end(&b, 2, 0);
	run_describe_said(&b, "no such\nthing \n\n", 16, "", "...");
	check_str("words: an exit and what it said, on one line", b.p,
	          "exited with status 2: no such thing...");
	core_buf_reset(&b);
	run_describe_end(&b, -1, SIGTERM);
	run_describe_said(&b, " \n", 2, "...", "...");
	check_str("words: a signal, and nothing said", b.p, "was killed by signal 15 (Terminated)");
	run_over_budget(&e, "x", 10, "lines", "in one turn", "K");
	check_str("words: over a budget, with scope and knob", e.msg,
	          "x wrote more than 10 lines on stdout in one turn (the limit; set K to raise it)");
	run_over_budget(&e, "x", 10, "bytes", NULL, NULL);
	check_str("words: over a budget, bare", e.msg, "x wrote more than 10 bytes on stdout (the limit)");
	run_line_too_long(&e, "x", 5, NULL);
	check_str("words: a line too long", e.msg, "x wrote a line longer than 5 bytes");
	core_buf_release(&b);
}

int main(void)
{
	struct core_err e = { 0 };
	signal(SIGPIPE, SIG_IGN);
	if (spawn_protect_keys(no_key, &e))
		return 2;
	test_idle();
	test_eof_grace();
	test_budget();
	test_words();
	return tap_end();
}
