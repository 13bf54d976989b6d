#!/usr/bin/env bats
# Fuzzing (docs/fuzzing.md): a short seeded pass of every fuzz target with
# the deterministic driver, on the build under test - so `make check` fuzzes
# the plain build and the ASan+UBSan one.  Each target runs its seed corpus
# (tests/fuzz/corpus/TARGET, which keeps the inputs that once broke
# something), then seeded mutants, until its run count or 5 s.  The same
# seed gives the same inputs: a failure replays with the command printed.

load test_helper

setup() {
	common_setup
	FUZZ="$(dirname "$AGENTKIT_BIN")/fuzz"
}

# fuzz_pass TARGET RUNS
fuzz_pass() {
	local bin="$FUZZ/fuzz_$1"
	[ -x "$bin" ] || fail "fuzz_$1 is not built (make all builds it)"
	TMPDIR=$BATS_TEST_TMPDIR run --separate-stderr "$bin" -runs="$2" -max_total_time=5 -seed=1 \
		-artifact_prefix="$BATS_TEST_TMPDIR/" "$TOP/tests/fuzz/corpus/$1"
	[ "$status" -eq 0 ] || fail "fuzz_$1 failed ($status): $stderr"
	assert_regex "$stderr" "fuzz_$1: [0-9]+ runs in .* no crash"
}

@test "fuzz: JSON documents parse, dump and read back the same" { fuzz_pass json 5000; }
@test "fuzz: JSON Patch diff and apply round-trip, failed applies change nothing" { fuzz_pass jpatch 3000; }
@test "fuzz: SSE and NDJSON framing do not depend on how bytes arrive" { fuzz_pass sse 3000; }
@test "fuzz: prompt files (front matter and body) load and render" { fuzz_pass prompt 3000; }
@test "fuzz: templates compile and render deterministically" { fuzz_pass template 5000; }
@test "fuzz: AgentInit and AgentInput lines run as turns" { fuzz_pass agent_input 2000; }
@test "fuzz: import rows read back as written" { fuzz_pass import 500; }
@test "fuzz: provider streams and error bodies, key never echoed" { fuzz_pass provider 500; }
@test "fuzz: script model replies" { fuzz_pass script 300; }
@test "fuzz: tool manifests" { fuzz_pass tool_manifest 300; }
@test "fuzz: tool output lines" { fuzz_pass tool_output 50; }
@test "fuzz: custom-agent handler output" { fuzz_pass handler 50; }
@test "fuzz: MCP server answers: a message naming the server, valid UTF-8, or a result; no wait past its bound" { fuzz_pass mcp 100; }
@test "fuzz: what a failing tool or handler writes on stderr reaches the output, valid UTF-8" { fuzz_pass failure_text 100; }
@test "fuzz: Genkit's wire as agent-run --url reads it: the same however the bytes arrive, nothing after the result" { fuzz_pass wire 5000; }

@test "fuzz: every target has a test here and a seed corpus" {
	for src in "$TOP"/tests/fuzz/fuzz_*.c; do
		t=$(basename "$src" .c)
		t=${t#fuzz_}
		grep -q "fuzz_pass $t " "$BATS_TEST_FILENAME" || fail "no test runs fuzz_$t"
		[ -n "$(ls "$TOP/tests/fuzz/corpus/$t" 2>/dev/null)" ] || fail "no seeds for fuzz_$t"
	done
}

@test "fuzz: the driver replays a file once and is reproducible from its seed" {
	bin="$FUZZ/fuzz_json"
	run -0 --separate-stderr "$bin" "$TOP/tests/fuzz/corpus/json/object"
	assert_regex "$stderr" "running .*/object \(43 bytes\)"
	run -0 --separate-stderr "$bin" -runs=300 -seed=7 "$TOP/tests/fuzz/corpus/json"
	assert_regex "$stderr" "300 runs in .* \(seed 7, 10 seeds, inputs [0-9a-f]{16}\), no crash"
	first=${stderr##*inputs }
	run -0 --separate-stderr "$bin" -runs=300 -seed=7 "$TOP/tests/fuzz/corpus/json"
	[ "${stderr##*inputs }" = "$first" ] || fail "seed 7 ran different inputs: $stderr"
	run -0 --separate-stderr "$bin" -runs=300 -seed=8 "$TOP/tests/fuzz/corpus/json"
	[ "${stderr##*inputs }" != "$first" ] || fail "seeds 7 and 8 ran the same inputs"
}
