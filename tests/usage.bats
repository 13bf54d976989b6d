#!/usr/bin/env bats
# Token usage in the machine-readable output: each turn's in turnEnd, the
# invocation's in the final line (and --format json), the session's in
# state.usage (Genkit's SessionState.usage), the rows agent-snap prints
# and the totals of agent-snap sessions.

load test_helper

setup() {
	common_setup
	printf '%s\n' \
		'{"text":"one","usage":{"inputTokens":10,"outputTokens":2,"cachedContentTokens":4}}' \
		'{"text":"two","usage":{"inputTokens":20,"outputTokens":3,"totalTokens":23,"thoughtsTokens":1}}' \
		'{"text":"three","usage":{"inputTokens":30,"outputTokens":5}}' >u.ndjson
}

@test "usage: each turn's in turnEnd, the invocation's in the output line, the session's in state.usage" {
	run -0 --separate-stderr agent-run --model script/u.ndjson --session u1 -m a -m b
	final=${lines[-1]}
	run -0 jq -c 'select(.turnEnd) | .turnEnd.usage' <<<"$output"
	# a provider's missing totalTokens is input + output
	assert_output '{"inputTokens":10,"outputTokens":2,"cachedContentTokens":4,"totalTokens":12}
{"inputTokens":20,"outputTokens":3,"totalTokens":23,"thoughtsTokens":1}'
	run -0 jq -c '.output.usage' <<<"$final"
	assert_output '{"inputTokens":30,"outputTokens":5,"cachedContentTokens":4,"totalTokens":35,"thoughtsTokens":1}'
	# a later invocation: its own usage in the output, the session's summed in the state
	run -0 --separate-stderr agent-run --model script/u.ndjson --session u1 -m c --format json
	assert_equal "$(jq -c .usage <<<"$output")" '{"inputTokens":30,"outputTokens":5,"totalTokens":35}'
	run -0 --separate-stderr agent-snap --session u1
	assert_equal "$(jq -c .state.usage <<<"$output")" '{"inputTokens":60,"outputTokens":10,"cachedContentTokens":4,"totalTokens":70,"thoughtsTokens":1}'
}

@test "usage: agent-snap log gives each row its turn's, sessions the session's total" {
	run -0 --separate-stderr agent-run --model script/u.ndjson --session u1 -m a -m b
	run -0 --separate-stderr agent-run --model script/u.ndjson --session u1 -m c
	run -0 --separate-stderr agent-snap log u1
	run -0 jq -c '.usage.totalTokens' <<<"$output"
	assert_output '12
23
35'
	run -0 --separate-stderr agent-snap sessions
	assert_equal "$(jq -c '[.sessionId, .usage]' <<<"$output")" '["u1",{"inputTokens":60,"outputTokens":10,"cachedContentTokens":4,"totalTokens":70,"thoughtsTokens":1}]'
	run -0 --separate-stderr agent-snap sessions --format text
	assert_line --index 0 --regexp '^SESSION +UPDATED \(UTC\) +STATUS +ROWS +TOKENS +AGENT +TITLE$'
	assert_line --index 1 --regexp '^u1 +[0-9-]{10} [0-9:]{8}  completed +3 +70  inline +a$'
}

@test "usage: a turn with a tool round sums its model calls" {
	printf '%s\n' '{"text":"Noting it.","toolRequests":[{"name":"addTask","ref":"t1","input":{"title":"buy milk"}}],"usage":{"inputTokens":12,"outputTokens":5}}' \
		'{"text":"Saved.","usage":{"inputTokens":20,"outputTokens":4}}' >notes.ndjson
	run -0 --separate-stderr agent-run --no-store --model script/notes.ndjson \
		--tool "$FIXTURES/tools/addTask.json" -m 'note: buy milk'
	assert_equal "$(jq -c 'select(.turnEnd) | .turnEnd.usage' <<<"$output")" '{"inputTokens":32,"outputTokens":9,"totalTokens":41}'
	assert_equal "$(jq -c '[.output.usage, .output.state.usage]' <<<"${lines[-1]}")" '[{"inputTokens":32,"outputTokens":9,"totalTokens":41},{"inputTokens":32,"outputTokens":9,"totalTokens":41}]'
}

@test "usage: a model that reports none leaves usage out of turnEnd, the output and the state" {
	printf '%s\n' '{"text":"quiet"}' >quiet.ndjson
	run -0 --separate-stderr agent-run --no-store --model script/quiet.ndjson -m hi
	assert_equal "$(jq -c 'select(.turnEnd)' <<<"$output")" '{"turnEnd":{"finishReason":"stop"}}'
	assert_equal "$(jq -c '.output | [has("usage"), (.state | has("usage"))]' <<<"${lines[-1]}")" '[false,false]'
}

@test "usage: --state with a usage member is accepted and summed; a malformed one is 101" {
	printf '%s\n' '{"messages":[],"usage":{"inputTokens":100,"outputTokens":50,"totalTokens":150,"custom":{"cacheCreationInputTokens":7}}}' >state.json
	run -0 --separate-stderr agent-run --no-store --model script/u.ndjson --state state.json -m a --format json
	assert_equal "$(jq -c '[.usage, .state.usage]' <<<"$output")" '[{"inputTokens":10,"outputTokens":2,"cachedContentTokens":4,"totalTokens":12},{"inputTokens":110,"outputTokens":52,"totalTokens":162,"custom":{"cacheCreationInputTokens":7},"cachedContentTokens":4}]'
	# the state it printed goes back in as it is
	jq -c .state <<<"$output" >next.json
	run -0 --separate-stderr agent-run --no-store --model script/u.ndjson --state next.json -m b --format json
	assert_equal "$(jq -c .state.usage.totalTokens <<<"$output")" 185
	for bad in '[]|'"'"'usage'"'"' must be an object, not array' \
		'{"inputTokens":-1}|usage.inputTokens must be a non-negative number' \
		'{"outputTokens":"3"}|usage.outputTokens must be a non-negative number' \
		'{"custom":{"x":true}}|usage.custom.x must be a non-negative number'; do
		printf '{"messages":[],"usage":%s}\n' "${bad%%|*}" >bad.json
		run -101 --separate-stderr agent-run --no-store --model echo --state bad.json -m a
		assert_equal "$stderr" "agent-run: invalid state: ${bad#*|}"
		assert_equal "$(jq -r .error.message <<<"$output")" "invalid state: ${bad#*|}"
	done
}

@test "usage: a detached run's row holds the usage of all its turns" {
	run -0 --separate-stderr agent-run --model script/u.ndjson --session d1 --detach -m a -m b
	snap=$(jq -r .output.snapshotId <<<"$output")
	run -0 --separate-stderr agent-wait --timeout 30s "$snap"
	assert_equal "$(jq -c .state.usage.totalTokens <<<"$output")" 35
	run -0 --separate-stderr agent-snap log d1
	assert_equal "$(jq -c .usage.totalTokens <<<"$output")" 35
}

@test "usage: a custom agent's generate requests count as the runtime's own calls" {
	requires jq
	run -0 --separate-stderr agent-run --no-store --model echo --exec "$TOP/tests/fixtures/custom/scripted.sh" -m 'gen two'
	assert_equal "$(jq -c 'select(.turnEnd) | .turnEnd.usage' <<<"$output")" '{"inputMessages":1,"inputCharacters":7,"outputMessages":1,"outputCharacters":7}'
	assert_equal "$(jq -c '[.output.usage.outputCharacters, .output.state.usage.outputCharacters]' <<<"${lines[-1]}")" '[7,7]'
}

@test "budget: --max-tokens-total ends the run as max turns does, RESOURCE_EXHAUSTED, exit 2" {
	printf '%s\n' '{"text":"Noting it.","toolRequests":[{"name":"addTask","ref":"t1","input":{"title":"buy milk"}}],"usage":{"inputTokens":12,"outputTokens":5}}' \
		'{"text":"Saved.","usage":{"inputTokens":20,"outputTokens":4}}' \
		'{"fallback":true,"text":"more","usage":{"inputTokens":30,"outputTokens":3}}' >notes.ndjson
	# spent after the first call: the tool round it asks for does not run
	run -2 --separate-stderr agent-run --session b1 --model script/notes.ndjson \
		--tool "$FIXTURES/tools/addTask.json" -m note --max-tokens-total 10
	assert_equal "$stderr" 'agent-run: generate: usage budget spent: 17 of 10 totalTokens (maxUsage, --max-tokens-total)'
	assert_equal "$(jq -c '[.output.finishReason, .output.error.status, .output.usage.totalTokens]' <<<"${lines[-1]}")" '["aborted","RESOURCE_EXHAUSTED",17]'
	assert_equal "$(agent-snap --session b1 | jq -c '[.status, .finishReason]')" '["aborted","aborted"]'
	# spent by a turn that finished: it keeps its answer, the next turn does not begin
	run -2 --separate-stderr agent-run --no-store --model script/notes.ndjson \
		--tool "$FIXTURES/tools/addTask.json" -m note -m again --max-tokens-total 40
	assert_equal "$stderr" 'agent-run: usage budget spent: 41 of 40 totalTokens (maxUsage, --max-tokens-total)'
	assert_equal "$(jq -c '[.output.state.messages[-1].content[0].text, (.output.state.messages | length)]' <<<"${lines[-1]}")" '["Saved.",4]'
	run -100 --separate-stderr agent-run --no-store --model echo -m x --max-tokens-total 0
	assert_equal "${stderr%%$'\n'*}" "agent-run: --max-tokens-total must be a whole number of tokens, 1 or more, not '0'"
}

@test "budget: front matter maxUsage, a number of tokens or an object of counts" {
	mkdir -p agents
	printf -- '---\nmodel: script/%s\nmaxUsage: {outputTokens: 2}\n---\n' "$PWD/u.ndjson" >agents/thrifty.prompt
	run -2 --separate-stderr agent-run thrifty --no-store -m a -m b
	assert_equal "$stderr" 'agent-run: usage budget spent: 2 of 2 outputTokens (maxUsage, --max-tokens-total)'
	printf -- '---\nmodel: script/%s\nmaxUsage: 1000\n---\n' "$PWD/u.ndjson" >agents/roomy.prompt
	run -0 --separate-stderr agent-run roomy --no-store -m a -m b
	# the command line's total wins over the file's
	run -2 --separate-stderr agent-run roomy --no-store -m a -m b --max-tokens-total 12
	printf -- '---\nmodel: echo\nmaxUsage: {totalTokens: many}\n---\n' >agents/bad.prompt
	run -101 --separate-stderr agent-run bad --no-store -m a
	assert_equal "$stderr" "agent-run: agents/bad.prompt: maxUsage: 'totalTokens' must be a whole number greater than 0"
}
