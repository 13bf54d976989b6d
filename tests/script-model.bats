#!/usr/bin/env bats
# The script model's "match" (a regular expression on the user's text, its
# groups filled into the reply) and "round" (the step of the tool loop).

load test_helper

setup() { common_setup; }

text() { printf '%s\n' "$output" | tail -n 1 | jq -r '.output.message.content[0].text'; }

@test "match: the first matching reply wins, \$1 is its group, \$\$ a dollar, case ignored" {
	printf '%s\n' '{"when": {"match": "^add (.+)$"}, "text": "Added $1 for $$5 ($0)."}' \
		'{"when": {}, "text": "fallback"}' >s.ndjson
	run -0 --separate-stderr agent-run --no-store --model script/s.ndjson -m 'ADD milk'
	[ "$(text)" = 'Added milk for $5 (ADD milk).' ]
	run -0 --separate-stderr agent-run --no-store --model script/s.ndjson -m 'remove milk'
	[ "$(text)" = fallback ]
}

@test "round: 0 asks for a tool, 1 answers after its result, in any turn of a session" {
	mkdir -p tools
	printf '#!/bin/sh\ncat >/dev/null\necho '"'"'{"output": 42}'"'"'\n' >tools/answer
	chmod +x tools/answer
	echo '{}' >tools/answer.json
	printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "answer", "input": {}}]}' \
		'{"when": {"round": 1}, "text": "it is 42"}' >s.ndjson
	run -0 --separate-stderr agent-run --model script/s.ndjson --tool answer -m one
	[ "$(text)" = "it is 42" ]
	sid=$(printf '%s\n' "$output" | tail -n 1 | jq -r .output.sessionId)
	run -0 --separate-stderr agent-run --model script/s.ndjson --tool answer --session "$sid" -m two
	[ "$(text)" = "it is 42" ]
	[ "$(agent-snap --session "$sid" | jq '.state.messages | length')" -eq 8 ]
}

@test "match: a bad regular expression names the script's line" {
	printf '%s\n' '# comment' '{"when": {"match": "(unclosed"}, "text": "x"}' >s.ndjson
	run -101 --separate-stderr agent-run --no-store --model script/s.ndjson -m hi
	[[ $stderr == *"'match' must be a POSIX extended regular expression (at s.ndjson:2)"* ]]
}
