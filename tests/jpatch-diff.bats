#!/usr/bin/env bats
# jpatch-diff: Genkit's Diff byte for byte, --minimal, --stream,
# --exit-code, and bad input.

load test_helper

setup() { common_setup; }

diff_of() { # FROM-JSON TO-JSON [flags...]: run jpatch-diff on two files
	printf '%s\n' "$1" >from.json
	printf '%s\n' "$2" >to.json
	shift 2
	run -0 --separate-stderr jpatch-diff "$@" from.json to.json
	[ -z "$stderr" ] || fail "stderr: $stderr"
}

@test "object members in byte-wise sorted key order, interleaved add/remove/replace" {
	diff_of '{"b":1,"a":2,"B":3,"aa":4}' '{"a":3,"c":5,"B":3,"aa":4,"Z":0}'
	assert_output '[{"op":"add","path":"/Z","value":0},{"op":"replace","path":"/a","value":3},{"op":"remove","path":"/b","value":null},{"op":"add","path":"/c","value":5}]'
}

@test "arrays by index: appends as /- in order, tail removed backwards" {
	diff_of '{"x":[1,2,3]}' '{"x":[1,9,3,4,5]}'
	assert_output '[{"op":"replace","path":"/x/1","value":9},{"op":"add","path":"/x/-","value":4},{"op":"add","path":"/x/-","value":5}]'
	diff_of '[1,2,3,4,5]' '[0,2]'
	assert_output '[{"op":"replace","path":"/0","value":0},{"op":"remove","path":"/4","value":null},{"op":"remove","path":"/3","value":null},{"op":"remove","path":"/2","value":null}]'
}

@test "root changes: replace at path \"\" (null to object, type change, scalar)" {
	diff_of 'null' '{"a":1}'
	assert_output '[{"op":"replace","path":"","value":{"a":1}}]'
	diff_of '{"a":1}' '[1]'
	assert_output '[{"op":"replace","path":"","value":[1]}]'
	diff_of '"x"' '"y"'
	assert_output '[{"op":"replace","path":"","value":"y"}]'
	diff_of '{"a":{"b":1}}' '{"a":[1]}'
	assert_output '[{"op":"replace","path":"/a","value":[1]}]'
}

@test "keys escaped ~0 and ~1, nested paths, empty key" {
	diff_of '{"a/b":{"c~d":1},"":0}' '{"a/b":{"c~d":2},"":1}'
	assert_output '[{"op":"replace","path":"/","value":1},{"op":"replace","path":"/a~1b/c~0d","value":2}]'
}

@test "equal documents: empty patch; numbers compare by value (1 == 1.0)" {
	diff_of '{"a":[1,{"b":null}],"n":1}' '{"n":1.0,"a":[1.0,{"b":null}]}'
	assert_output '[]'
}

@test "values are kept exactly: big integers, 0.1, \\u0000, key order of added values" {
	diff_of '{}' '{"a":{"z":123456789012345678901234567890,"b":0.1,"s":"x\u0000y"}}'
	assert_output '[{"op":"add","path":"/a","value":{"z":123456789012345678901234567890,"b":0.1,"s":"x\u0000y"}}]'
}

@test "integers past 2^63 compare digit for digit; 1e2 equals 100 (--exit-code)" {
	printf '{"x":12345678901234567890}' >a.json
	printf '{"x":12345678901234567891}' >b.json
	run -1 --separate-stderr jpatch-diff --exit-code a.json b.json
	assert_output '[{"op":"replace","path":"/x","value":12345678901234567891}]'
	run -0 --separate-stderr jpatch-diff --exit-code a.json a.json
	assert_output '[]'
	diff_of '[123456789012345678901234,-12345678901234567890,-99999999999999999999]' \
		'[123456789012345678901235,-12345678901234567891,-99999999999999999999]'
	assert_output '[{"op":"replace","path":"/0","value":123456789012345678901235},{"op":"replace","path":"/1","value":-12345678901234567891}]'
	# by value: 1e2 == 100, 2^64 == 18446744073709551616.0, 1e400 == 10e399
	diff_of '[1e2,18446744073709551616,1e400,-0]' '[100,1.8446744073709551616e19,10e399,0.0]'
	assert_output '[]'
	# but 2^64 + 1 is not the double next to it, and 1e400 is not 1e401
	diff_of '[18446744073709551617,1e400]' '[1.8446744073709551616e19,1e401]'
	assert_output '[{"op":"replace","path":"/0","value":1.8446744073709552e+19},{"op":"replace","path":"/1","value":1e401}]'
	diff_of '[1,2,12345678901234567890,3]' '[1,2,12345678901234567891,3]' --minimal
	assert_output '[{"op":"replace","path":"/2","value":12345678901234567891}]'
}

@test "--exit-code: 1 when the documents differ, 0 when equal" {
	printf '{"a":1}' >a.json
	printf '{"a":2}' >b.json
	run -1 --separate-stderr jpatch-diff --exit-code a.json b.json
	assert_output '[{"op":"replace","path":"/a","value":2}]'
	run -0 --separate-stderr jpatch-diff --exit-code a.json a.json
	assert_output '[]'
	run -0 jpatch-diff a.json b.json
}

@test "stdin as FROM or TO; both stdin is a usage error" {
	printf '[1]' >a.json
	run -0 jpatch-diff - a.json <<<'[]'
	assert_output '[{"op":"add","path":"/-","value":1}]'
	run -100 --separate-stderr jpatch-diff - - <<<'[]'
	[ "$stderr" = "jpatch-diff: FROM and TO cannot both be stdin
try 'jpatch-diff --help'" ]
	run -100 --separate-stderr jpatch-diff a.json
	assert_equal "$stderr" "jpatch-diff: expected FROM and TO, got 1 operand
try 'jpatch-diff --help'"
}

@test "--stream: one patch per record, first against null or --from" {
	printf '%s\n' '{"a":1}' '{"a":2}' '' '{"a":2}' '[1]' >s.ndjson
	run -0 --separate-stderr jpatch-diff --stream s.ndjson
	assert_output '[{"op":"replace","path":"","value":{"a":1}}]
[{"op":"replace","path":"/a","value":2}]
[]
[{"op":"replace","path":"","value":[1]}]'
	printf '{"a":0}' >base.json
	run -0 --separate-stderr jpatch-diff --stream --from base.json <s.ndjson
	assert_line -n 0 '[{"op":"replace","path":"/a","value":1}]'
	run -1 jpatch-diff --stream --exit-code <<<'{"a":1}'
}

@test "--stream flushes each patch as its record arrives" {
	mkfifo in
	jpatch-diff --stream <in >out &
	exec 7>in
	echo '{"a":1}' >&7
	for _ in $(seq 100); do [ -s out ] && break; sleep 0.05; done
	run cat out
	assert_output '[{"op":"replace","path":"","value":{"a":1}}]'
	exec 7>&-
	wait
}

@test "--stream: a malformed record names its line (101)" {
	printf '%s\n' '{"a":1}' '{"a":' >s.ndjson
	run -101 --separate-stderr jpatch-diff --stream s.ndjson
	assert_output '[{"op":"replace","path":"","value":{"a":1}}]'
	[[ "$stderr" == "jpatch-diff: invalid JSON: "*"(at s.ndjson:2)" ]] || fail "$stderr"
	run -101 --separate-stderr jpatch-diff --stream --max-record 10 <<<'{"aaaaaaaaaaaaaaaa":1}'
	[[ "$stderr" == *"<stdin>:1"* ]] || fail "$stderr"
}

@test "bad input: malformed JSON (101, file and position), missing file (4), duplicate keys" {
	printf '{"a":1,}' >bad.json
	printf '{}' >ok.json
	run -101 --separate-stderr jpatch-diff bad.json ok.json
	[ -z "$output" ]
	[[ "$stderr" == "jpatch-diff: invalid JSON: "*"(at bad.json:1:"*")" ]] || fail "$stderr"
	run -4 --separate-stderr jpatch-diff nope.json ok.json
	[[ "$stderr" == "jpatch-diff: cannot open 'nope.json': No such file or directory" ]] || fail "$stderr"
	printf '{"a":1,"a":2}' >dup.json
	run -101 --separate-stderr jpatch-diff dup.json ok.json
	[[ "$stderr" == *"duplicate object key"* ]] || fail "$stderr"
}

@test "bad input: 100,000 levels of nesting is a clean error, not a crash" {
	python3 -c 'print("[" * 100000 + "]" * 100000)' >deep.json
	printf '[]' >ok.json
	run -101 --separate-stderr jpatch-diff deep.json ok.json
	[[ "$stderr" == "jpatch-diff: invalid JSON: maximum parsing depth reached"* ]] || fail "$stderr"
	# the deepest document the parser accepts still diffs
	python3 -c 'print("[" * 2000 + "1" + "]" * 2000)' >d1.json
	python3 -c 'print("[" * 2000 + "2" + "]" * 2000)' >d2.json
	run -0 jpatch-diff d1.json d2.json
	[[ "$output" == '[{"op":"replace","path":"/0/0/0/'*'/0","value":2}]' ]]
}

@test "raw NUL byte in the input is rejected; an escaped one round trips" {
	printf '{"a":"x\0y"}' >nul.json
	printf '{}' >ok.json
	run -101 --separate-stderr jpatch-diff nul.json ok.json
	printf '{"a":"x\\u0000y"}' >esc.json
	run -0 jpatch-diff ok.json esc.json
	assert_output '[{"op":"add","path":"/a","value":"x\u0000y"}]'
}

@test "output errors: /dev/full is 111, a closed pipe is quiet" {
	printf '{"a":1}' >a.json
	printf '{"a":2}' >b.json
	run -111 --separate-stderr sh -c 'jpatch-diff a.json b.json >/dev/full'
	[[ "$stderr" == "jpatch-diff: unable to write output: No space left on device" ]] || fail "$stderr"
	python3 -c 'import json; print(json.dumps([{"k": i} for i in range(200000)]))' >big.json
	run --separate-stderr sh -c 'jpatch-diff a.json big.json | head -c 10 >/dev/null'
	[ -z "$stderr" ] || fail "$stderr"
}

@test "peak memory of a large diff stays within 6 times the input" {
	grep -q __asan_init "$(command -v jpatch-diff)" && skip "sanitizer build: memory is ASan's"
	python3 "$TOP/tests/jpatch-gen.py" records 2 36000 >a.json
	python3 "$TOP/tests/jpatch-gen.py" records 3 36000 >b.json
	run -0 python3 "$TOP/tests/jpatch-gen.py" rss jpatch-diff a.json b.json
	input=$(( ($(wc -c <a.json) + $(wc -c <b.json)) / 1024 ))
	echo "peak ${output} KB for ${input} KB of input"
	[ "$output" -gt 0 ] && [ "$output" -le $(( 6 * input )) ]
}
