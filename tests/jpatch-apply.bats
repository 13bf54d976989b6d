#!/usr/bin/env bats
# jpatch-apply: strict RFC 6902 messages and exit codes, Genkit's lenient
# rules (runtime-semantics §5.2, one test per rule), --stream over patches
# and agent-run chunks, and bad input.

load test_helper

setup() { common_setup; }

apply() { # DOC-JSON PATCH-JSON [flags...]: run jpatch-apply on two files
	printf '%s' "$1" >doc.json
	printf '%s' "$2" >patch.json
	shift 2
	run --separate-stderr jpatch-apply "$@" doc.json patch.json
}

# ---- strict ----

@test "strict: the six ops, ~0/~1 and '-' in one patch" {
	apply '{"a":{"b~c":1,"d/e":[1,2]}}' '[{"op":"add","path":"/a/d~1e/-","value":3},{"op":"replace","path":"/a/b~0c","value":9},{"op":"copy","from":"/a/b~0c","path":"/x"},{"op":"move","from":"/x","path":"/a/d~1e/0"},{"op":"remove","path":"/a/d~1e/1"},{"op":"test","path":"/a/d~1e","value":[9.0,2,3]}]'
	[ "$status" -eq 0 ]
	assert_output '{"a":{"b~c":9,"d/e":[9,2,3]}}'
}

@test "strict: a path that does not exist is 101, names the op and the patch, prints nothing" {
	apply '{"a":1}' '[{"op":"add","path":"/b","value":1},{"op":"remove","path":"/a/b"}]'
	[ "$status" -eq 101 ]
	[ -z "$output" ]
	assert_equal "$stderr" "jpatch-apply: patch op 1: path '/a/b' does not exist (at patch.json)"
}

@test "strict: an add with nowhere to go names what is wrong: a null or scalar root, the missing or scalar ancestor" {
	apply 'null' '[{"op":"add","path":"/notes","value":[]}]'
	[ "$status" -eq 101 ]
	assert_equal "$stderr" "jpatch-apply: patch op 0: path '/notes': the document is null, not an object or array (at patch.json)"
	apply '"x"' '[{"op":"add","path":"/a/b","value":1}]'
	assert_equal "$stderr" "jpatch-apply: patch op 0: path '/a/b': the document is a string, not an object or array (at patch.json)"
	apply '{"a":1}' '[{"op":"add","path":"/a/b/c","value":1}]'
	assert_equal "$stderr" "jpatch-apply: patch op 0: path '/a/b/c': '/a' is a number, not an object or array (at patch.json)"
	apply '{"a":{"x~y":[]}}' '[{"op":"add","path":"/a/x~0y/0/c","value":1}]'
	assert_equal "$stderr" "jpatch-apply: patch op 0: path '/a/x~0y/0/c': '/a/x~0y/0' does not exist (at patch.json)"
	apply '{}' '[{"op":"add","path":"/a/b","value":1}]'
	assert_equal "$stderr" "jpatch-apply: patch op 0: path '/a/b': '/a' does not exist (at patch.json)"
	[ -z "$output" ]
	# A move or copy to such a path says the same of its target.
	apply '{"v":1}' '[{"op":"copy","from":"/v","path":"/w/x"}]'
	assert_equal "$stderr" "jpatch-apply: patch op 0: path '/w/x': '/w' does not exist (at patch.json)"
}

@test "strict: index rules (leading zeros, out of range, not a number)" {
	apply '[1,2]' '[{"op":"add","path":"/01","value":0}]'
	[ "$status" -eq 101 ]
	assert_equal "$stderr" "jpatch-apply: patch op 0: path '/01': '01' is not an array index (at patch.json)"
	apply '[1,2]' '[{"op":"add","path":"/3","value":0}]'
	assert_equal "$stderr" "jpatch-apply: patch op 0: path '/3': index 3 is out of range (the array has 2 elements) (at patch.json)"
	apply '[1,2]' '[{"op":"add","path":"/2","value":0}]'
	[ "$status" -eq 0 ]
	assert_output '[1,2,0]'
}

@test "strict: a failed test is exit 1; numbers compare by value" {
	apply '{"n":1}' '[{"op":"test","path":"/n","value":1.0}]'
	[ "$status" -eq 0 ]
	apply '{"n":1}' '[{"op":"test","path":"/n","value":"1"}]'
	[ "$status" -eq 1 ]
	[ -z "$output" ]
	assert_equal "$stderr" "jpatch-apply: patch op 0: test failed at '/n' (at patch.json)"
}

@test "test compares integers past 2^63 digit for digit (strict and lenient)" {
	apply '{"x":12345678901234567890}' '[{"op":"test","path":"/x","value":12345678901234567891}]'
	[ "$status" -eq 1 ] && [ -z "$output" ]
	assert_equal "$stderr" "jpatch-apply: patch op 0: test failed at '/x' (at patch.json)"
	apply '{"x":12345678901234567890}' '[{"op":"test","path":"/x","value":12345678901234567891}]' --lenient
	[ "$status" -eq 1 ]
	assert_equal "$stderr" 'jpatch-apply: patch op 0: jsonpatch: test failed at "/x" (at patch.json)'
	apply '[-123456789012345678901234]' '[{"op":"test","path":"/0","value":-123456789012345678901235}]'
	[ "$status" -eq 1 ]
	# equal values pass: the same digits, 2^64 as a real, 1e2 as 100
	apply '{"x":12345678901234567890,"z":18446744073709551616,"y":1e2}' '[{"op":"test","path":"/x","value":12345678901234567890},{"op":"test","path":"/z","value":1.8446744073709551616e19},{"op":"test","path":"/y","value":100}]'
	[ "$status" -eq 0 ]
	assert_output '{"x":12345678901234567890,"z":18446744073709551616,"y":100.0}'
	# a real is the double it reads as: 12345678901234567890.0 is 12345678901234567168
	apply '{"x":12345678901234567890}' '[{"op":"test","path":"/x","value":12345678901234567890.0}]'
	[ "$status" -eq 1 ]
}

@test "strict: malformed patches are 101 with the op index and what is wrong" {
	apply '{}' '{"op":"add"}'
	assert_equal "$stderr" "jpatch-apply: a patch must be an array, not object (at patch.json)"
	apply '{}' '[{"op":"add","path":"/a","value":1},5]'
	assert_equal "$stderr" "jpatch-apply: patch op 1: must be an object, not number (at patch.json)"
	apply '{}' '[{"path":"/a"}]'
	assert_equal "$stderr" "jpatch-apply: patch op 0: missing 'op' (at patch.json)"
	apply '{}' '[{"op":"add","path":3,"value":1}]'
	assert_equal "$stderr" "jpatch-apply: patch op 0: 'path' must be a string, not number (at patch.json)"
	apply '{}' '[{"op":"move","path":"/a"}]'
	assert_equal "$stderr" "jpatch-apply: patch op 0: missing 'from' (at patch.json)"
	apply '{}' '[{"op":"add","path":"/a"}]'
	assert_equal "$stderr" "jpatch-apply: patch op 0: missing 'value' (at patch.json)"
	apply '{}' '[{"op":"frob","path":"/a"}]'
	assert_equal "$stderr" "jpatch-apply: patch op 0: unknown op 'frob' (at patch.json)"
	apply '{}' '[{"op":"add","path":"a","value":1}]'
	assert_equal "$stderr" "jpatch-apply: patch op 0: invalid JSON pointer 'a' in 'path': must be empty or start with '/' (at patch.json)"
	apply '{}' '[{"op":"add","path":"/a~2","value":1}]'
	assert_equal "$stderr" "jpatch-apply: patch op 0: invalid JSON pointer '/a~2' in 'path': '~' must be followed by '0' or '1' (at patch.json)"
	[ "$status" -eq 101 ]
	[ -z "$output" ]
}

@test "strict: move into its own child fails; move onto itself is a no-op" {
	apply '{"a":{"b":1}}' '[{"op":"move","from":"/a","path":"/a/b/c"}]'
	[ "$status" -eq 101 ]
	assert_equal "$stderr" "jpatch-apply: patch op 0: cannot move '/a' into its own child '/a/b/c' (at patch.json)"
	apply '{"a":{"b":1}}' '[{"op":"move","from":"/a","path":"/a"}]'
	assert_output '{"a":{"b":1}}'
}

@test "values round trip exactly: big integers, 0.1, \\u0000, key order, unicode" {
	apply '{"z":1,"a":2,"m":3}' '[{"op":"add","path":"/big","value":123456789012345678901234567890},{"op":"add","path":"/f","value":0.1},{"op":"add","path":"/s","value":"a\u0000b\u00e9"},{"op":"replace","path":"/a","value":2.50}]'
	[ "$status" -eq 0 ]
	assert_output '{"z":1,"a":2.5,"m":3,"big":123456789012345678901234567890,"f":0.1,"s":"a\u0000bé"}'
	# negative ones too, just past the 64-bit range and far beyond
	apply '[-9223372036854775809,-455265009763967318716549719312,9223372036854775808]' '[]'
	[ "$status" -eq 0 ]
	assert_output '[-9223372036854775809,-455265009763967318716549719312,9223372036854775808]'
	# a document that is one big number, and a patch test against it
	apply '123456789012345678901234567890' '[{"op":"test","path":"","value":123456789012345678901234567890}]'
	[ "$status" -eq 0 ]
	assert_output '123456789012345678901234567890'
}

@test "bad input: malformed JSON, duplicate keys, raw NUL, deep nesting" {
	apply '{"a":' '[]'
	[ "$status" -eq 101 ]
	[[ "$stderr" == "jpatch-apply: invalid JSON: "*"(at doc.json:1:"*")" ]] || fail "$stderr"
	apply '{}' '[{"op":"add","op":"remove","path":"/a"}]'
	[ "$status" -eq 101 ]
	[[ "$stderr" == *"duplicate object key"* ]] || fail "$stderr"
	printf '{"a":"\0"}' >nul.json
	printf '[]' >p.json
	run -101 jpatch-apply nul.json p.json
	python3 -c 'print("{\"a\":" * 100000 + "1" + "}" * 100000)' >deep.json
	run -101 --separate-stderr jpatch-apply deep.json p.json
	[[ "$stderr" == "jpatch-apply: invalid JSON: maximum parsing depth reached"* ]] || fail "$stderr"
	# a patch that would nest a deep value below a deep path is refused
	python3 -c 'print("[{\"op\":\"add\",\"path\":\"" + "/a" * 2100 + "\",\"value\":" + "[" * 2040 + "]" * 2040 + "}]")' >p2.json
	printf '{}' >d.json
	run -101 --separate-stderr jpatch-apply --lenient d.json p2.json
	[[ "$stderr" == "jpatch-apply: patch op 0: the value would nest deeper than 4096 levels (at p2.json)" ]] || fail "$stderr"
}

@test "usage: operand count, both stdin, --final without --stream" {
	run -100 --separate-stderr jpatch-apply doc.json
	run -100 --separate-stderr jpatch-apply - - </dev/null
	assert_equal "$stderr" "jpatch-apply: DOC and PATCH cannot both be stdin
try 'jpatch-apply --help'"
	run -100 --separate-stderr jpatch-apply --final a b
}

@test "stdin as PATCH; /dev/full is 111" {
	printf '{}' >doc.json
	run -0 jpatch-apply doc.json - <<<'[{"op":"add","path":"/a","value":1}]'
	assert_output '{"a":1}'
	run -111 --separate-stderr sh -c 'echo "[]" | jpatch-apply doc.json - >/dev/full'
	assert_equal "$stderr" "jpatch-apply: unable to write output: No space left on device"
}

# ---- lenient: Genkit's ApplyPatch, rule by rule ----

@test "lenient: pointer must start with '/': Genkit's message, 101" {
	apply '{}' '[{"op":"add","path":"x","value":1}]' --lenient
	[ "$status" -eq 101 ]
	assert_equal "$stderr" 'jpatch-apply: patch op 0: jsonpatch: invalid JSON Pointer "x": must start with "/" (at patch.json)'
}

@test "lenient: tokens unescape ~1 then ~0" {
	apply '{}' '[{"op":"add","path":"/~01~10","value":1}]' --lenient
	assert_output '{"~1/0":1}'
}

@test "lenient: add/replace at the root replace the document" {
	apply '{"a":1}' '[{"op":"add","path":"","value":[1]}]' --lenient
	assert_output '[1]'
	apply 'null' '[{"op":"replace","path":"","value":{"b":2}}]' --lenient
	assert_output '{"b":2}'
}

@test "lenient: missing containers are created; replace of a missing key adds it" {
	apply '{"a":1}' '[{"op":"replace","path":"/x/y/z","value":1}]' --lenient
	assert_output '{"a":1,"x":{"y":{"z":1}}}'
	apply 'null' '[{"op":"add","path":"/a","value":1}]' --lenient
	assert_output '{"a":1}'
	apply '{"a":null}' '[{"op":"add","path":"/a/b","value":1}]' --lenient
	assert_output '{"a":{"b":1}}'
}

@test "lenient: a primitive where a container is needed becomes an object" {
	apply '{"a":5}' '[{"op":"add","path":"/a/b/c","value":1}]' --lenient
	assert_output '{"a":{"b":{"c":1}}}'
	apply '"s"' '[{"op":"add","path":"/k","value":1}]' --lenient
	assert_output '{"k":1}'
	apply '[[1],2]' '[{"op":"add","path":"/1/x","value":1}]' --lenient
	assert_output '[[1],{"x":1}]'
}

@test "lenient: array indexes as Go's Atoi (+1, 01), out of range is a no-op" {
	apply '{"a":[1,2]}' '[{"op":"add","path":"/a/5/b","value":1},{"op":"add","path":"/a/+1","value":9},{"op":"add","path":"/a/01/q","value":3}]' --lenient
	assert_output '{"a":[1,{"q":3},2]}'
}

@test "lenient: '-' appends for add and replace; add idx<=len inserts, beyond is a no-op" {
	apply '{"a":[1,2]}' '[{"op":"replace","path":"/a/-","value":3},{"op":"replace","path":"/a/7","value":0},{"op":"add","path":"/a/9","value":0},{"op":"add","path":"/a/0","value":0},{"op":"add","path":"/a/4","value":4}]' --lenient
	assert_output '{"a":[0,1,2,3,4]}'
}

@test "lenient: remove of missing members, bad indexes and '-' is a no-op; root becomes null" {
	apply '{"a":[1,2]}' '[{"op":"remove","path":"/a/-"},{"op":"remove","path":"/a/9"},{"op":"remove","path":"/nope/x"},{"op":"remove","path":"/a/x"}]' --lenient
	assert_output '{"a":[1,2]}'
	apply '{"a":1}' '[{"op":"remove","path":""}]' --lenient
	assert_output 'null'
}

@test "lenient: test compares a missing value as null; failure aborts the whole patch (exit 1)" {
	apply '{"a":1}' '[{"op":"test","path":"/missing","value":null},{"op":"test","path":"/a","value":1.0}]' --lenient
	assert_output '{"a":1}'
	apply '{"a":1}' '[{"op":"add","path":"/b","value":1},{"op":"test","path":"/a","value":2}]' --lenient
	[ "$status" -eq 1 ]
	[ -z "$output" ]
	assert_equal "$stderr" 'jpatch-apply: patch op 1: jsonpatch: test failed at "/a" (at patch.json)'
}

@test "lenient: move and copy of a missing value carry null" {
	apply '{"a":{"b":1}}' '[{"op":"move","from":"/nope","path":"/m"},{"op":"move","from":"/a/b","path":"/c"},{"op":"copy","from":"/c","path":"/d/e"}]' --lenient
	assert_output '{"a":{},"m":null,"c":1,"d":{"e":1}}'
}

@test "lenient: unknown op is Genkit's error (after the pointer check); null ops are skipped" {
	apply '{}' '[{"op":"nope","path":"/x"}]' --lenient
	[ "$status" -eq 101 ]
	assert_equal "$stderr" 'jpatch-apply: patch op 0: jsonpatch: unsupported op "nope" (at patch.json)'
	apply '{}' '[{"op":"nope","path":"x"}]' --lenient
	assert_equal "$stderr" 'jpatch-apply: patch op 0: jsonpatch: invalid JSON Pointer "x": must start with "/" (at patch.json)'
	apply '{}' '[null,{"op":"add","path":"/a","value":1}]' --lenient
	assert_output '{"a":1}'
}

@test "lenient: messages quote like Go's %q" {
	apply '{}' '[{"op":"test","path":"/a\n\u0001\"é\u2028","value":3}]' --lenient
	assert_equal "$stderr" 'jpatch-apply: patch op 0: jsonpatch: test failed at "/a\n\x01\"é\u2028" (at patch.json)'
}

# ---- stream ----

@test "--stream: the live document after each patch, flushed per line" {
	printf '{}' >init.json
	run -0 --separate-stderr jpatch-apply --stream init.json <<'EOF2'
[{"op":"add","path":"/a","value":1}]
[{"op":"add","path":"/b","value":[1]}]

[{"op":"remove","path":"/a"}]
EOF2
	assert_output '{"a":1}
{"a":1,"b":[1]}
{"b":[1]}'
	mkfifo in
	jpatch-apply --stream <in >out &
	exec 7>in
	echo '[{"op":"replace","path":"","value":{"x":1}}]' >&7
	for _ in $(seq 100); do [ -s out ] && break; sleep 0.05; done
	run cat out
	assert_output '{"x":1}'
	exec 7>&-
	wait
}

@test "--stream --lenient: patches that arrive together are out before it waits, a skipped one too" {
	mkfifo in
	jpatch-apply --stream --lenient <in >out 2>err &
	exec 7>in
	printf '%s\n' '[{"op":"add","path":"","value":{"x":1}}]' '[{"op":"add","path":"/y","value":2}]' \
		'not json' >&7
	for _ in $(seq 100); do [ "$(wc -l <out)" -ge 2 ] && [ -s err ] && break; sleep 0.05; done
	run cat out
	assert_output '{"x":1}
{"x":1,"y":2}'
	exec 7>&-
	wait
}

@test "--stream: agent-run chunks: customPatch applied, other chunks skipped; --final" {
	cat >chunks.ndjson <<'EOF2'
{"customPatch":[{"op":"replace","path":"","value":{"status":"start","n":0}}]}
{"modelChunk":{"role":"model","content":[{"text":"hi"}]}}
{"customPatch":[{"op":"replace","path":"/n","value":1}]}
{"turnEnd":{}}
{"customPatch":[{"op":"add","path":"/items","value":["a"]}]}
{"output":{"finishReason":"stop"}}
EOF2
	run -0 --separate-stderr jpatch-apply --stream <chunks.ndjson
	assert_output '{"status":"start","n":0}
{"status":"start","n":1}
{"status":"start","n":1,"items":["a"]}'
	run -0 --separate-stderr jpatch-apply --stream --final <chunks.ndjson
	assert_output '{"status":"start","n":1,"items":["a"]}'
}

@test "--stream strict: a bad patch stops the stream naming its line (101, or 1 for test)" {
	printf '%s\n' '[{"op":"replace","path":"","value":{"a":1}}]' '{"turnEnd":{}}' '[{"op":"remove","path":"/zz"}]' '[{"op":"add","path":"/b","value":2}]' >p.ndjson
	run -101 --separate-stderr jpatch-apply --stream <p.ndjson
	assert_output '{"a":1}'
	assert_equal "$stderr" "jpatch-apply: patch op 0: path '/zz' does not exist (at <stdin>:3)"
	printf '%s\n' '[{"op":"replace","path":"","value":{"a":1}}]' '[{"op":"test","path":"/a","value":2}]' >t.ndjson
	run -1 --separate-stderr jpatch-apply --stream <t.ndjson
	assert_equal "$stderr" "jpatch-apply: patch op 0: test failed at '/a' (at <stdin>:2)"
	printf '%s\n' '[]' '{"a":' >m.ndjson
	run -101 --separate-stderr jpatch-apply --stream <m.ndjson
	[[ "$stderr" == "jpatch-apply: invalid JSON: "*"(at <stdin>:2)" ]] || fail "$stderr"
	run -101 --separate-stderr jpatch-apply --stream <<<'"just a string"'
	assert_equal "$stderr" "jpatch-apply: a record must be a patch (an array) or an agent-run chunk (an object), not string (at <stdin>:1)"
}

@test "--stream --lenient: bad patches are skipped with a warning; the last good document stays" {
	cat >p.ndjson <<'EOF2'
[{"op":"replace","path":"","value":{"a":1}}]
[{"op":"add","path":"/b","value":2},{"op":"test","path":"/a","value":5}]
{"customPatch":[{"op":"frob","path":"/x"}]}
{"a":
[{"op":"add","path":"/c","value":3}]
EOF2
	run -0 --separate-stderr jpatch-apply --stream --lenient <p.ndjson
	assert_output '{"a":1}
{"a":1,"c":3}'
	[[ "$stderr" == 'jpatch-apply: patch op 1: jsonpatch: test failed at "/a" (at <stdin>:2); patch skipped
jpatch-apply: patch op 0: jsonpatch: unsupported op "frob" (at <stdin>:3); patch skipped
jpatch-apply: invalid JSON: '*'(at <stdin>:4); patch skipped' ]] || fail "$stderr"
}

# each_line [FLAGS]: every line of out.ndjson (the stream's document after
# each record of patches.ndjson) is byte for byte what jpatch-apply FLAGS
# writes from the line before (or init.json) and that patch, in a process
# of its own: what the stream copies from its last line is never stale.
each_line() {
	local i=0 prev=init.json patch want
	while IFS= read -r patch; do
		i=$((i + 1))
		# an agent-run chunk: its customPatch (no jq: it rounds big numbers)
		patch=${patch#'{"customPatch":'}
		printf '%s\n' "${patch%'}'}" >p.json
		want=$(jpatch-apply "$@" "$prev" p.json) || { echo "line $i: the patch fails alone"; return 1; }
		sed -n "${i}p" out.ndjson >prev.json
		prev=prev.json
		[ "$want" = "$(cat prev.json)" ] || { echo "line $i: got $(cat prev.json), want $want"; return 1; }
	done <patches.ndjson
	[ "$i" -eq "$(wc -l <out.ndjson)" ]
}

@test "--stream writes what did not change from the line before: each line as a fresh apply" {
	printf 'null\n' >init.json
	cat >patches.ndjson <<'EOF'
[{"op":"add","path":"","value":{"a":{"x":[1,2,{"k":"v"}]},"b":[{"m":1},{"m":2},{"m":3}],"~/k":{"z":{"d":[1]}}}}]
[{"op":"add","path":"/b/1","value":{"m":9}}]
{"customPatch":[{"op":"move","from":"/b/0","path":"/a/x/1"}]}
[{"op":"copy","from":"/a","path":"/c"}]
[{"op":"replace","path":"/c/x/0","value":5}]
[{"op":"add","path":"/~0~1k/y","value":[]},{"op":"add","path":"/~0~1k/z/d/0","value":{"w":[0]}}]
[{"op":"remove","path":"/b/0"}]
[{"op":"move","from":"/a/x","path":"/b/-"}]
[{"op":"test","path":"/c/x/0","value":5}]
[]
[{"op":"add","path":"/b/0/new","value":{"deep":{"er":[1]}}},{"op":"move","from":"/~0~1k/z","path":"/b/0/new/z"}]
[{"op":"replace","path":"/b/0/new/z/d/0/w","value":"\u00e9\"\\"}]
[{"op":"move","from":"/b","path":"/b2"},{"op":"copy","from":"/b2/0","path":"/b2/-"}]
[{"op":"replace","path":"/b2/0/m","value":0}]
[{"op":"remove","path":"/a"},{"op":"add","path":"/a","value":[[],{}]}]
[{"op":"add","path":"/a/0/-","value":1},{"op":"add","path":"/a/1/k","value":2}]
[{"op":"replace","path":"","value":[1,[2,[3]],{"s":[4]}]}]
[{"op":"add","path":"/1/1/-","value":{"q":1}},{"op":"remove","path":"/0"}]
[{"op":"move","from":"/1","path":"/0/-"}]
EOF
	jpatch-apply --stream init.json <patches.ndjson >out.ndjson
	run -0 each_line
	assert_equal "$(tail -1 out.ndjson)" '[[2,[3,{"q":1}],{"s":[4]}]]'
	jpatch-apply --stream --lenient init.json <patches.ndjson >out.ndjson
	run -0 each_line --lenient
	assert_equal "$(tail -1 out.ndjson)" '[[2,[3,{"q":1}],{"s":[4]}]]'
}

@test "--stream as fresh applies over 300 generated edits (arrays, moves, '~' and '/' keys)" {
	python3 "$TOP/tests/jpatch-gen.py" docs 11 300 >docs.ndjson
	jpatch-diff --minimal --stream docs.ndjson >patches.ndjson
	printf 'null\n' >init.json
	jpatch-apply --stream init.json <patches.ndjson >out.ndjson
	run -0 each_line
	jpatch-diff --stream docs.ndjson >patches.ndjson
	jpatch-apply --stream --lenient init.json <patches.ndjson >out.ndjson
	run -0 each_line --lenient
}

@test "--stream: a record over --max-record is an error naming its line" {
	run -101 --separate-stderr jpatch-apply --stream --max-record 16 <<<'[{"op":"add","path":"/aaaaaaaa","value":1}]'
	[[ "$stderr" == *"<stdin>:1"* ]] || fail "$stderr"
}

@test "peak memory of a large apply stays within 6 times the input" {
	grep -q __asan_init "$(command -v jpatch-apply)" && skip "sanitizer build: memory is ASan's"
	python3 "$TOP/tests/jpatch-gen.py" records 2 36000 >doc.json
	printf '[{"op":"replace","path":"/records/100/n","value":-1},{"op":"move","from":"/records/5","path":"/records/-"},{"op":"add","path":"/records/7/tags/0","value":"x"}]' >patch.json
	run -0 python3 "$TOP/tests/jpatch-gen.py" rss jpatch-apply doc.json patch.json
	input=$(( $(wc -c <doc.json) / 1024 ))
	echo "peak ${output} KB for ${input} KB of input"
	[ "$output" -gt 0 ] && [ "$output" -le $(( 6 * input )) ]
}

# A document of 1 MiB or more is parsed compacting (its strings moved down
# in its own text, the rest given back): the bytes must come out the same.
@test "a large document round trips byte for byte: escapes, shared keys, big numbers" {
	python3 - >big.json <<'PY'
import json
recs = []
for i in range(9000):
    recs.append({"id": "r%d" % i, "": "", "k\"ey\n": "a\\b\u0001\u00e9\U0001f600",
                 "long": "x" * (i % 70), "word": ["alpha", "bravo", "alpha"][i % 3],
                 "n": i * 7919 - 30000, "t": i % 2 == 0, "z": None})
text = json.dumps({"records": recs, "tail": "end"}, separators=(",", ":"),
                  ensure_ascii=False)
# a number past 64 bits keeps its digits
print(text[:-1] + ',"big":18446744073709551617123}')
PY
	[ "$(wc -c <big.json)" -gt 1048576 ]
	printf '[]' >p.json
	run -0 --separate-stderr jpatch-apply big.json p.json
	[ "$output" = "$(cat big.json)" ] || fail "the document changed"
	printf '[{"op":"test","path":"/big","value":18446744073709551617123},{"op":"copy","from":"/records/8999","path":"/last"}]' >p.json
	run -0 --separate-stderr jpatch-apply big.json p.json
	[[ "$output" == *',"last":{"id":"r8999","":"","k\"ey\n":"a\\b\u0001'*'","long":"'* ]] || fail "${output: -300}"
}

@test "a large document that the fast parse refuses still gets jansson's message" {
	python3 -c 'print("{\"pad\":\"" + "p" * 1200000 + "\",\"a\":1,\n\"a\":2}")' >dup.json
	printf '[]' >p.json
	run -101 --separate-stderr jpatch-apply dup.json p.json
	assert_equal "$stderr" "jpatch-apply: invalid JSON: duplicate object key near '\"a\"' (at dup.json:2:3)"
	python3 -c 'print("[\"" + "q" * 1200000 + "\",\n  tru]")' >bad.json
	run -101 --separate-stderr jpatch-apply bad.json p.json
	[[ "$stderr" == "jpatch-apply: invalid JSON: "*"(at bad.json:2:"*")" ]] || fail "$stderr"
}
