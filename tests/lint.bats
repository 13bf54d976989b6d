#!/usr/bin/env bats
# scripts/lint, the style rules CI holds the tree to: banned calls, library
# code that prints, placeholders, and the floors of libcore (no upward
# include, no circle in the include graph, no circle of calls inside a
# folder).  Each rule is shown to fail on a copy of the tree with one line
# broken.

load test_helper

setup() {
	common_setup
	top="$TOP"
	copy="$BATS_TEST_TMPDIR/tree"
	mkdir -p "$copy"
	cp -R "$top/cmd" "$top/libcore" "$top/store" "$top/scripts" "$copy/"
}

@test "the tree is clean" {
	run --separate-stderr "$top/scripts/lint"
	[ "$status" -eq 0 ] || fail "$stderr"
	[ "$output" = "lint: clean" ]
}

@test "a base file including a model header fails, naming the line" {
	printf '#include "../model/model.h"\n' >>"$copy/libcore/base/buf.c"
	run --separate-stderr "$copy/scripts/lint"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"lint: a lower floor includes a higher one:"* ]]
	[[ "$stderr" == *'libcore/base/buf.c:'*'#include "../model/model.h"'* ]]
}

@test "the store including the agent floor fails" {
	printf '#include "../libcore/agent/runtime.h"\n' >>"$copy/store/path.c"
	run --separate-stderr "$copy/scripts/lint"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *'store/path.c:'*'#include "../libcore/agent/runtime.h"'* ]]
}

@test "a backend's library header outside its folder fails, naming the line" {
	# store/NAME/build.mk's "# lint: owns <HEADER>": lmdb.h is store/lmdb/'s
	printf '#include <lmdb.h>\n' >>"$copy/store/path.c"
	printf '#include <libpq-fe.h>\n' >>"$copy/store/lmdb/env.c"
	run --separate-stderr "$copy/scripts/lint"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"lint: only store/lmdb/ includes lmdb.h:"* ]]
	[[ "$stderr" == *'store/path.c:'*'#include <lmdb.h>'* ]]
	[[ "$stderr" == *"only store/pg/ includes libpq-fe.h:"* ]]
	[[ "$stderr" == *'store/lmdb/env.c:'*'#include <libpq-fe.h>'* ]]
}

@test "an include circle inside a floor fails, naming its files" {
	# lines.h already includes buf.h: buf.c including lines.h closes a loop
	printf '#include "lines.h"\n' >>"$copy/libcore/base/buf.c"
	run --separate-stderr "$copy/scripts/lint"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"lint: include circles"* ]]
	[[ "$stderr" == *"libcore/base/buf"* ]]
	[[ "$stderr" == *"libcore/base/lines"* ]]
}

@test "library code that prints fails" {
	printf 'void f(void) { puts("x"); }\n' >>"$copy/libcore/model/model.c"
	run --separate-stderr "$copy/scripts/lint"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"must not print or exit"* ]]
}

@test "a circle of calls between the files of a folder fails, naming the files and the symbols" {
	build="$(dirname "$AGENTKIT_BIN")"
	[ -f "$build/libcore/base/buf.o" ] || skip "no objects in $build (make first)"
	mkdir -p "$copy/build"
	cp -R "$build/cmd" "$build/libcore" "$build/store" "$copy/build/"
	find "$copy/build" -name '*.o' -exec touch {} +
	run --separate-stderr "$copy/scripts/lint" "$copy/build"
	[ "$status" -eq 0 ] || fail "the copy is not clean: $stderr"
	# lines.c already calls buf.c; buf.c calling lines.c closes a loop
	printf '#include "lines.h"\nvoid lint_probe(void) { core_lines_release(0); }\n' \
		>>"$copy/libcore/base/buf.c"
	cc -std=c11 -D_GNU_SOURCE -c -o "$copy/build/libcore/base/buf.o" "$copy/libcore/base/buf.c"
	run --separate-stderr "$copy/scripts/lint" "$copy/build"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"lint: call circles inside a folder"* ]]
	[[ "$stderr" == *"libcore/base/buf -> libcore/base/lines: core_lines_release"* ]]
}
