#!/usr/bin/env bats
# jpatch-apply against the json-patch-tests suite (tests.json and
# spec_tests.json), strict mode, through the real binary, and the diff/apply
# round trip on thousands of generated document pairs.

load test_helper

setup() { common_setup; }

SUITE="$TESTDATA/json-patch-tests"

@test "json-patch-tests tests.json: every enabled case passes (3 disabled)" {
	run -0 python3 "$TOP/tests/jpatch-conformance.py" "$SUITE/tests.json"
	assert_output --partial "92 passed, 0 failed, 3 disabled"
}

@test "json-patch-tests spec_tests.json: every enabled case passes (1 disabled)" {
	run -0 python3 "$TOP/tests/jpatch-conformance.py" "$SUITE/spec_tests.json"
	assert_output --partial "16 passed, 0 failed, 1 disabled"
}

@test "conformance driver can fail: a wrong expectation is reported" {
	printf '%s\n' '[{"doc":{},"patch":[{"op":"add","path":"/a","value":1}],"expected":{"a":2}},' \
		'{"doc":{},"patch":[{"op":"add","path":"/a","value":1}],"error":"x"}]' >bad.json
	run -1 python3 "$TOP/tests/jpatch-conformance.py" bad.json
	assert_output --partial "0 passed, 2 failed, 0 disabled"
}

# Round trip: for 3,000 generated documents (each an edit of the one
# before: inserts, deletions and moves in arrays, key changes, type
# changes, keys with '~' and '/'), diff every consecutive pair and apply
# the patches: the documents must come back exactly.
roundtrip() { # diff-flags apply-flags
	python3 "$TOP/tests/jpatch-gen.py" docs 7 3000 >docs.ndjson
	jpatch-diff $1 --stream docs.ndjson >patches.ndjson
	[ "$(wc -l <patches.ndjson)" -eq 3000 ]
	jpatch-apply $2 --stream <patches.ndjson >out.ndjson
	run -0 python3 "$TOP/tests/jpatch-gen.py" check docs.ndjson out.ndjson
	assert_output "3000 documents match"
}

@test "round trip: Genkit diff, strict apply, 3,000 pairs" {
	roundtrip "" ""
}

@test "round trip: Genkit diff, lenient apply, 3,000 pairs" {
	roundtrip "" "--lenient"
}

@test "round trip: --minimal diff, strict apply, 3,000 pairs; patches are smaller" {
	roundtrip "--minimal" ""
	minimal=$(wc -c <patches.ndjson)
	genkit=$(jpatch-diff --stream docs.ndjson | wc -c)
	[ "$minimal" -lt "$genkit" ]
}

@test "round trip: --minimal on long arrays (2,000 elements, shifted, edited) stays exact" {
	python3 - >docs.ndjson <<'PY'
import json, random
r = random.Random(3)
a = list(range(2000))
print(json.dumps(a))
for k in range(40):
    b = list(a)
    for _ in range(r.randint(1, 30)):
        op = r.random()
        if op < 0.4: b.insert(r.randrange(len(b) + 1), {"n": r.random()})
        elif op < 0.8 and b: del b[r.randrange(len(b))]
        elif b: b[r.randrange(len(b))] = [r.randint(0, 9)]
    print(json.dumps(b)); a = b
# and one completely different array: the fallback must stay exact
print(json.dumps([str(i) for i in range(3000)]))
PY
	jpatch-diff --minimal --stream docs.ndjson >patches.ndjson
	jpatch-apply --stream <patches.ndjson >out.ndjson
	run -0 python3 "$TOP/tests/jpatch-gen.py" check docs.ndjson out.ndjson
	# a single insertion in the middle is one add, not a cascade of replaces
	printf '[1,2,3,4,5]\n' >x.json
	printf '[1,2,9,3,4,5]\n' >y.json
	run -0 jpatch-diff --minimal x.json y.json
	assert_output '[{"op":"add","path":"/2","value":9}]'
}
