/*
 * tap.h - what the C unit tests share: TAP lines ("ok 3 - name", "not ok
 * 4 - name" with a "#   detail" line) and a JSON literal parser that
 * stops the test on a typo in the test itself.  Header-only: each
 * tests/unit/NAME.c is its own program, built into BUILD/tests/unit/NAME;
 * scripts/runtests runs every one and counts each case as a test.
 *
 * One case: AGENTKIT_UNIT_CASE=TEXT reports only the cases whose name
 * contains TEXT (every case still runs: cases may build on each other).
 *
 *   report(ok, name, detail)    one test; detail (may be NULL) on failure
 *   check_str(name, got, want)  report() that got (may be NULL) is want
 *   check_int(name, got, want)  report() that got == want
 *   pj(text)                    jv_parse() of a literal, new reference;
 *                               NULL text gives NULL; a bad one exits 2
 *   tap_end()                   the plan line "1..N"; the exit status
 */
#ifndef TESTS_UNIT_TAP_H
#define TESTS_UNIT_TAP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../libcore/base/json.h"

static int ntest, nfail;

static void report(int ok, const char *name, const char *detail)
{
	const char *only = getenv("AGENTKIT_UNIT_CASE");
	if (only && *only && !strstr(name, only))
		return;
	ntest++;
	if (ok) {
		printf("ok %d - %s\n", ntest, name);
		return;
	}
	nfail++;
	printf("not ok %d - %s\n", ntest, name);
	if (detail)
		printf("#   %s\n", detail);
}

static inline void check_str(const char *name, const char *got, const char *want)
{
	char detail[2048];
	snprintf(detail, sizeof detail, "got '%s', want '%s'", got ? got : "(null)", want);
	report(got && !strcmp(got, want), name, detail);
}

static inline void check_int(const char *name, long got, long want)
{
	char detail[128];
	snprintf(detail, sizeof detail, "got %ld, want %ld", got, want);
	report(got == want, name, detail);
}

static inline json_t *pj(const char *s)
{
	struct core_err e = { 0 };
	json_t *v;
	if (!s)
		return NULL;
	if (!(v = jv_parse(s, strlen(s), "test", 1, &e))) {
		fprintf(stderr, "bad test JSON: %s: %s\n", s, e.msg);
		exit(2);
	}
	return v;
}

static inline int tap_end(void)
{
	printf("1..%d\n", ntest);
	return nfail ? 1 : 0;
}

#endif
