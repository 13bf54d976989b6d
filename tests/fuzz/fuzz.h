/*
 * fuzz.h - what agentkit's fuzz targets share (tests/fuzz/fuzz_*.c).
 *
 * Each target defines LLVMFuzzerTestOneInput() and links either with
 * libFuzzer (clang -fsanitize=fuzzer, `make fuzz`) or with driver.c, the
 * deterministic mutation driver gcc builds for `make check`.  A target
 * checks invariants with FUZZ_CHECK: a broken one prints what broke and
 * aborts, so both engines save the input as a crash.
 */
#ifndef FUZZ_FUZZ_H
#define FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional; called once before the first input. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "fuzz: invariant broken at %s:%d: %s: ", \
		        __FILE__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
		abort(); \
	} \
} while (0)

/* A private directory for this process's files (made once, removed at
 * exit).  Never NULL: aborts when it cannot be made. */
const char *fuzz_tmpdir(void);

/* Write data[0..n) to dir/name, replacing it; returns the path (static
 * buffer per call site is the caller's business: the result is malloc()ed). */
char *fuzz_write(const char *name, const void *data, size_t n);

/*
 * Split the input at the first separator byte: *a is data[0..i), *b the
 * rest after it.  Without a separator the whole input is *a and *b is
 * empty.
 */
void fuzz_split(const uint8_t *data, size_t size, uint8_t sep,
                const uint8_t **a, size_t *na, const uint8_t **b, size_t *nb);

/* A runtime sink (runtime.h) for targets that run turns: every chunk
 * must be an object; warnings are dropped. */
struct rt_sink;
extern const struct rt_sink fuzz_rt_sink;

/* jv_dump() into a malloc()ed NUL-terminated string; aborts on failure. */
char *fuzz_dump(const json_t *v);

#endif
