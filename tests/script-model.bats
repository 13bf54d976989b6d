#!/usr/bin/env bats
# The script model (docs/agent-run.md "The script model"): "match" (a
# regular expression on the user's text, its groups filled into the reply),
# "round" (the step of the tool loop), "call" (the invocation's call order),
# replies that do not stream or stream scripted chunks, the fallback.

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

# The scripts below run client-managed with a fixed session ID, so every
# NDJSON line agent-run prints can be compared whole.
sess() { echo '{"sessionId":"s1"}' >state.json; }

@test "call: the i-th model call of the invocation, counting every turn and tool round" {
	sess
	mkdir -p tools
	printf '#!/bin/sh\ncat >/dev/null\necho '"'"'{"output": 1}'"'"'\n' >tools/one
	chmod +x tools/one
	echo '{}' >tools/one.json
	printf '%s\n' '{"when": {"call": 2}, "text": "third"}' \
		'{"when": {"call": 0}, "toolRequests": [{"name": "one", "ref": "r", "input": {}}]}' \
		'{"when": {"call": 1}, "text": "second"}' >s.ndjson
	run -0 --separate-stderr agent-run --no-store --state state.json --tool one --model script/s.ndjson -m a -m b
	[ -z "$stderr" ]
	[ "$output" = '{"modelChunk":{"content":[{"toolRequest":{"name":"one","ref":"r","input":{}}}],"index":0,"role":"model"}}
{"modelChunk":{"content":[{"toolResponse":{"name":"one","ref":"r","output":1}}],"index":1,"role":"tool"}}
{"modelChunk":{"content":[{"text":"second"}],"index":2,"role":"model"}}
{"turnEnd":{"finishReason":"stop"}}
{"modelChunk":{"content":[{"text":"third"}],"index":0,"role":"model"}}
{"turnEnd":{"finishReason":"stop"}}
{"output":{"finishReason":"stop","message":{"content":[{"text":"third"}],"role":"model"},"sessionId":"s1","state":{"messages":[{"content":[{"text":"a"}],"role":"user"},{"content":[{"toolRequest":{"name":"one","ref":"r","input":{}}}],"role":"model"},{"content":[{"toolResponse":{"name":"one","ref":"r","output":1}}],"role":"tool"},{"content":[{"text":"second"}],"role":"model"},{"content":[{"text":"b"}],"role":"user"},{"content":[{"text":"third"}],"role":"model"}],"sessionId":"s1"}}}' ]
}

@test "call restarts with each invocation; models (the session's call order) goes on" {
	printf '%s\n' '{"when": {"call": 0, "models": 0}, "text": "new session"}' \
		'{"when": {"call": 0, "models": 1}, "text": "resumed, first call here"}' >s.ndjson
	run -0 --separate-stderr agent-run --model script/s.ndjson -m a
	sid=$(printf '%s\n' "$output" | tail -n 1 | jq -r .output.sessionId)
	[ "$(text)" = "new session" ]
	run -0 --separate-stderr agent-run --model script/s.ndjson --session "$sid" -m b
	[ "$(text)" = "resumed, first call here" ]
	# A third invocation: models is 2, which no reply names.
	run -5 --separate-stderr agent-run --model script/s.ndjson --session "$sid" -m c
	[ "$(printf '%s\n' "$output" | tail -n 1 | jq -r .output.error.message)" = 'generate: script model: s.ndjson has no reply for this request (model messages so far: 2, last user text: "c")' ]
}

@test "stream false: one final message and no modelChunk line" {
	sess
	printf '%s\n' '{"stream": false, "text": "all at once", "finishReason": "length"}' >s.ndjson
	run -7 --separate-stderr agent-run --no-store --state state.json --model script/s.ndjson -m a
	[ "$output" = '{"turnEnd":{"finishReason":"length"}}
{"output":{"finishReason":"length","message":{"content":[{"text":"all at once"}],"role":"model"},"sessionId":"s1","state":{"messages":[{"content":[{"text":"a"}],"role":"user"},{"content":[{"text":"all at once"}],"role":"model"}],"sessionId":"s1"}}}' ]
}

@test "stream false with tool requests: only the tool round's chunk streams" {
	sess
	mkdir -p tools
	printf '#!/bin/sh\ncat >/dev/null\necho '"'"'{"output": "ok"}'"'"'\n' >tools/t
	chmod +x tools/t
	echo '{}' >tools/t.json
	printf '%s\n' '{"stream": false, "text": "asking", "toolRequests": [{"name": "t", "ref": "x", "input": {}}]}' \
		'{"stream": false, "text": "done"}' >s.ndjson
	run -0 --separate-stderr agent-run --no-store --state state.json --tool t --model script/s.ndjson -m a
	[ "$(printf '%s\n' "$output" | sed '$d')" = '{"modelChunk":{"content":[{"toolResponse":{"name":"t","ref":"x","output":"ok"}}],"index":1,"role":"tool"}}
{"turnEnd":{"finishReason":"stop"}}' ]
	[ "$(printf '%s\n' "$output" | tail -n 1 | jq -c '[.output.state.messages[1].content, .output.message]')" = '[[{"text":"asking"},{"toolRequest":{"name":"t","ref":"x","input":{}}}],{"content":[{"text":"done"}],"role":"model"}]' ]
}

@test "stream array: exactly the scripted chunks stream, the message is the reply's own" {
	sess
	printf '%s\n' '{"stream": ["dra", [{"text": "ft"}, {"reasoning": "hm"}], []], "chunks": ["fi", "nal"]}' >s.ndjson
	run -0 --separate-stderr agent-run --no-store --state state.json --model script/s.ndjson -m a
	[ "$output" = '{"modelChunk":{"content":[{"text":"dra"}],"index":0,"role":"model"}}
{"modelChunk":{"content":[{"text":"ft"},{"reasoning":"hm"}],"index":0,"role":"model"}}
{"turnEnd":{"finishReason":"stop"}}
{"output":{"finishReason":"stop","message":{"content":[{"text":"final"}],"role":"model"},"sessionId":"s1","state":{"messages":[{"content":[{"text":"a"}],"role":"user"},{"content":[{"text":"final"}],"role":"model"}],"sessionId":"s1"}}}' ]
}

@test "stream array then error: the chunks stream, the turn fails with the scripted status, exit 1" {
	sess
	printf '%s\n' '{"stream": ["part"], "error": {"status": "UNAVAILABLE", "message": "model timeout"}}' >s.ndjson
	run -1 --separate-stderr agent-run --no-store --state state.json --model script/s.ndjson -m a
	[ "$output" = '{"modelChunk":{"content":[{"text":"part"}],"index":0,"role":"model"}}
{"turnEnd":{"finishReason":"failed"}}
{"output":{"error":{"status":"UNAVAILABLE","message":"generate: model timeout"},"finishReason":"failed","sessionId":"s1","state":{"messages":[],"sessionId":"s1"}}}' ]
	[ "$stderr" = "agent-run: generate: model timeout" ]
}

@test "fallback: answers after the positional replies run out; when {} answers before them" {
	sess
	printf '%s\n' '{"fallback": true, "text": "anything else"}' '{"text": "first"}' '{"text": "second"}' >s.ndjson
	run -0 --separate-stderr agent-run --no-store --state state.json --model script/s.ndjson -m a -m b -m c
	[ "$(printf '%s\n' "$output" | tail -n 1 | jq -c '[.output.state.messages[] | select(.role == "model") | .content[0].text]')" = '["first","second","anything else"]' ]
	printf '%s\n' '{"text": "first"}' '{"when": {}, "text": "always"}' >s.ndjson
	run -0 --separate-stderr agent-run --no-store --state state.json --model script/s.ndjson -m a
	[ "$(text)" = always ]
}

@test "a misspelt when key, a bad type, a bad stream or fallback fail the call naming the line" {
	printf '%s\n' '{"when": {"cal": 1}, "text": "x"}' >s.ndjson
	run -101 --separate-stderr agent-run --no-store --model script/s.ndjson -m a
	[ "$stderr" = "agent-run: generate: script model: 'when' has an unknown key 'cal' (want user, match, models, round or call) (at s.ndjson:1)" ]
	printf '%s\n' '# one' '{"when": {"call": "1"}, "text": "x"}' >s.ndjson
	run -101 --separate-stderr agent-run --no-store --model script/s.ndjson -m a
	[ "$stderr" = "agent-run: generate: script model: 'when.call' must be a non-negative integer (at s.ndjson:2)" ]
	printf '%s\n' '{"when": "always", "text": "x"}' >s.ndjson
	run -101 --separate-stderr agent-run --no-store --model script/s.ndjson -m a
	[ "$stderr" = "agent-run: generate: script model: 'when' must be an object (at s.ndjson:1)" ]
	printf '%s\n' '{"when": {}, "fallback": true, "text": "x"}' >s.ndjson
	run -101 --separate-stderr agent-run --no-store --model script/s.ndjson -m a
	[ "$stderr" = "agent-run: generate: script model: 'fallback' must be true or false, on a reply without 'when' (at s.ndjson:1)" ]
	printf '%s\n' '{"stream": [1], "text": "x"}' >s.ndjson
	run -101 --separate-stderr agent-run --no-store --model script/s.ndjson -m a
	[ "$stderr" = "agent-run: generate: script model: s.ndjson: 'stream' must be true, false or an array of chunks (each an array of parts or a string)" ]
	[ "$(printf '%s\n' "$output" | jq -sc 'map(keys[0])')" = '["turnEnd","output"]' ]
}

@test "the call-order example of docs/agent-run.md answers as documented" {
	sess
	sed -n "/^By the invocation's call order/,/^A slow stream/p" "$TOP/docs/agent-run.md" |
		sed -n '/^```$/,/^```$/p' | grep -v '^```' >s.ndjson
	[ "$(wc -l <s.ndjson)" -eq 3 ]
	run -1 --separate-stderr agent-run --no-store --state state.json --model script/s.ndjson -m a -m b -m c
	[ "$output" = '{"turnEnd":{"finishReason":"stop"}}
{"modelChunk":{"content":[{"text":"dra"}],"index":0,"role":"model"}}
{"modelChunk":{"content":[{"text":"ft"}],"index":0,"role":"model"}}
{"turnEnd":{"finishReason":"stop"}}
{"turnEnd":{"finishReason":"failed"}}
{"output":{"error":{"status":"UNAVAILABLE","message":"generate: model timeout"},"finishReason":"failed","sessionId":"s1","state":{"messages":[{"content":[{"text":"a"}],"role":"user"},{"content":[{"text":"one message, no chunks"}],"role":"model"},{"content":[{"text":"b"}],"role":"user"},{"content":[{"text":"final"}],"role":"model"}],"sessionId":"s1"}}}' ]
}

# A script model reads the last user text and counts the model messages,
# so a resumed session's history stays in the store: the row records how
# many model messages it holds ("modelMessages" in its agentkit member).
@test "models across a session: the count each row records, its history left unread" {
	printf '{"text": "r%s"}\n' 0 1 2 3 4 5 6 7 >s.ndjson
	for turn in 0 1 2; do
		run -0 --separate-stderr agent-run --model script/s.ndjson --session S -m "turn $turn"
		[ "$(text)" = "r$turn" ]
	done
	run -0 agent-snap export S
	[ "$(printf '%s\n' "$output" | tail -n 1 | jq -c '[.agentkit.modelMessages, (.state.messages | length)]')" = '[3,6]' ]
	# A row that says it holds 3 model messages: the next turn is the 4th
	# model call, though the four messages stored hold one.
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	jq -cn --arg now "$now" '{snapshotId: "c0", sessionId: "C", status: "completed",
		createdAt: $now, updatedAt: $now, finishReason: "stop", agentkit: {modelMessages: 3},
		state: {sessionId: "C", messages: [{role: "user", content: [{text: "a"}]},
		{role: "user", content: [{text: "b"}]}, {role: "user", content: [{text: "c"}]},
		{role: "model", content: [{text: "d"}]}]}}' | agent-snap import >/dev/null
	run -0 --separate-stderr agent-run --model script/s.ndjson --session C -m next
	[ "$(text)" = r3 ]
	run -0 agent-snap export C
	[ "$(printf '%s\n' "$output" | tail -n 1 | jq -c '[.agentkit.modelMessages, (.state.messages | length)]')" = '[4,6]' ]
	# A count no history could hold (more than its messages) is not
	# believed: that history is read.
	jq -cn --arg now "$now" '{snapshotId: "d0", sessionId: "D", status: "completed",
		createdAt: $now, updatedAt: $now, finishReason: "stop", agentkit: {modelMessages: 9},
		state: {sessionId: "D", messages: [{role: "user", content: [{text: "a"}]},
		{role: "model", content: [{text: "b"}]}]}}' | agent-snap import >/dev/null
	run -0 --separate-stderr agent-run --model script/s.ndjson --session D -m next
	[ "$(text)" = r1 ]
}

@test "models from a row that records no count: the history is read, and the new row has it" {
	printf '{"text": "r%s"}\n' 0 1 2 3 >s.ndjson
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	jq -cn --arg now "$now" '{snapshotId: "o0", sessionId: "O", status: "completed",
		createdAt: $now, updatedAt: $now, finishReason: "stop",
		state: {sessionId: "O", messages: [{role: "user", content: [{text: "a"}]},
		{role: "model", content: [{text: "b"}]}, {role: "user", content: [{text: "c"}]},
		{role: "model", content: [{text: "d"}]}]}}' | agent-snap import >/dev/null
	run -0 --separate-stderr agent-run --model script/s.ndjson --session O -m next
	[ "$(text)" = r2 ]
	run -0 --separate-stderr agent-run --model script/s.ndjson --session O -m last
	[ "$(text)" = r3 ]
	run -0 agent-snap export O
	[ "$(printf '%s\n' "$output" | tail -n 1 | jq -c '[.agentkit.modelMessages, (.state.messages | length)]')" = '[4,8]' ]
}
