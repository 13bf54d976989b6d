#!/usr/bin/env bats
# Runs each C unit test program (tests/unit/*.c, built into BUILD/tests/unit/).
# A unit program prints "ok N - name" / "not ok N - name" lines and exits
# non-zero when any case failed.

load test_helper

setup() { common_setup; }

@test "C unit tests pass" {
	dir="$(dirname "$AGENTKIT_BIN")/tests/unit"
	[ -d "$dir" ] || skip "no unit tests built"
	n=0
	for t in "$dir"/*; do
		[ -x "$t" ] || continue
		n=$((n + 1))
		run --separate-stderr "$t"
		[ "$status" -eq 0 ] || fail "$(basename "$t") failed ($status): $output $stderr"
	done
	[ "$n" -gt 0 ] || skip "no unit tests built"
}
