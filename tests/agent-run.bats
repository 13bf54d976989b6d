#!/usr/bin/env bats
# agent-run: I/O, turns, client-managed state, init and input validation
# (runtime-semantics §3.1-3.4, §3.9, §4.1; DESIGN.md §2).

load test_helper

setup() {
	common_setup
	SCRIPTS="$FIXTURES/scripts"
	TOOLS="$FIXTURES/tools"
}

@test "echo: one turn streams chunks, a turnEnd, then exactly one output line" {
	run -0 --separate-stderr agent-run --no-store --model echo -m "hello there world"
	[ -z "$stderr" ]
	[ "$(chunks)" = '{"modelChunk":{"content":[{"text":"hello"}],"index":0,"role":"model"}}
{"modelChunk":{"content":[{"text":" there"}],"index":0,"role":"model"}}
{"modelChunk":{"content":[{"text":" world"}],"index":0,"role":"model"}}
{"turnEnd":{"finishReason":"stop","usage":{"inputMessages":1,"inputCharacters":17,"outputMessages":1,"outputCharacters":17}}}' ]
	sid=$(last | jq -r .output.sessionId)
	[[ "$sid" =~ ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$ ]]
	[ "$(last | jq -c 'del(.output.sessionId, .output.state.sessionId)')" = '{"output":{"finishReason":"stop","message":{"content":[{"text":"hello there world"}],"role":"model"},"state":{"messages":[{"content":[{"text":"hello there world"}],"role":"user"},{"content":[{"text":"hello there world"}],"role":"model"}],"usage":{"inputMessages":1,"inputCharacters":17,"outputMessages":1,"outputCharacters":17}},"usage":{"inputMessages":1,"inputCharacters":17,"outputMessages":1,"outputCharacters":17}}}' ]
	[ "$(last | jq -r .output.state.sessionId)" = "$sid" ]
}

@test "multi-turn: each -m is one turn, each ending with its turnEnd (BasicMultiTurn)" {
	run -0 --separate-stderr agent-run --no-store --model echo -m one -m two
	[ "$(chunks | jq -c 'keys[0]' | tr '\n' ' ')" = '"modelChunk" "turnEnd" "modelChunk" "turnEnd" ' ]
	[ "$(last | jq -c '[.output.state.messages[] | [.role, .content[0].text]]')" = '[["user","one"],["model","one"],["user","two"],["model","two"]]' ]
}

@test "stdin: one AgentInput per line, in order; null and blank lines are skipped" {
	printf '%s\n' '{"message":{"role":"user","content":[{"text":"a"}]}}' 'null' '' \
		'{"message":{"content":[{"text":"b"}]}}' >in.ndjson
	run -0 --separate-stderr agent-run --no-store --model echo <in.ndjson
	[ "$(chunks | grep -c turnEnd)" = 2 ]
	[ "$(last | jq -c '[.output.state.messages[].content[0].text]')" = '["a","a","b","b"]' ]
}

@test "no input at all: the invocation still has a session ID and no snapshot, and stderr says nothing ran" {
	run -0 --separate-stderr agent-run --no-store --model echo </dev/null
	[ "$(printf '%s\n' "$output" | wc -l)" = 1 ]
	[ "$(last | jq -c '.output | keys')" = '["sessionId","state"]' ]
	[ "$stderr" = 'agent-run: no input: stdin is empty and no -m was given; nothing ran' ]
	run -0 --separate-stderr agent-run --no-store --model echo --format text </dev/null
	[ "${stderr%%$'\n'*}" = 'agent-run: no input: stdin is empty and no -m was given; nothing ran' ]
}

# silent_stdin CMD...: CMD with a stdin that is open but never written (a
# FIFO whose writer sleeps), as a CI runner or ssh gives it; the writer is
# killed afterwards.
silent_stdin() {
	rm -f silent && mkfifo silent
	(exec 3>silent; sleep 30) &
	local writer=$!
	run --separate-stderr timeout 20 "$@" <silent
	kill "$writer" 2>/dev/null
	wait "$writer" 2>/dev/null || true
}

@test "stdin with -m: an open but silent stdin is waited on for --stdin-timeout, then the turn goes on without it, said once" {
	silent_stdin agent-run --no-store --model echo -m hi --stdin-timeout 200ms
	[ "$status" = 0 ]
	[ "$(last | jq -c '.output.message.content')" = '[{"text":"hi"}]' ]
	[ "$stderr" = "agent-run: no input on stdin within 200ms: going on without it (give </dev/null, or --stdin-timeout 0, to not read stdin)" ]
	# the default is 3s, also from the environment
	silent_stdin agent-run --no-store --model echo -m hi
	[ "$status" = 0 ]
	[[ "$stderr" == "agent-run: no input on stdin within 3s: going on"* ]]
	AGENTKIT_STDIN_TIMEOUT=100ms silent_stdin agent-run --no-store --model echo -m hi
	[ "$status" = 0 ]
	[[ "$stderr" == "agent-run: no input on stdin within 100ms: going on"* ]]
	# 0: stdin is never read, and nothing is said
	silent_stdin agent-run --no-store --model echo -m hi --stdin-timeout 0
	[ "$status" = 0 ]
	[ "$stderr" = "" ]
}

@test "stdin with -m: bytes that come within the wait join the turn; later ones stay unread on stdin" {
	run -0 --separate-stderr sh -c '(sleep 0.3; echo context) | agent-run --no-store --model echo -m hi --stdin-timeout 10s'
	[ "$(last | jq -c '.output.message.content')" = '[{"text":"hi\n\ncontext\n"}]' ]
	[ "$stderr" = "" ]
	# later bytes are left on stdin for whoever reads it next
	run -0 --separate-stderr sh -c '(sleep 1; echo late) | { agent-run --no-store --model echo -m hi --stdin-timeout 100ms | tail -n 1 | jq -c .output.message.content; cat; }'
	[ "$output" = $'[{"text":"hi"}]\nlate' ]
}

@test "stdin with -m: a bad --stdin-timeout or AGENTKIT_STDIN_TIMEOUT is a usage error" {
	run -100 --separate-stderr agent-run --no-store --model echo -m hi --stdin-timeout soon </dev/null
	[ "${stderr%%$'\n'*}" = "agent-run: --stdin-timeout: invalid duration 'soon' (use e.g. 250ms, 30s, 5m, 1h)" ]
	AGENTKIT_STDIN_TIMEOUT=-1s run -100 --separate-stderr agent-run --no-store --model echo -m hi </dev/null
	[[ "${stderr%%$'\n'*}" == "agent-run: AGENTKIT_STDIN_TIMEOUT: "* ]]
}

@test "client-managed: --state seeds the conversation, keeps its session ID and custom state (ClientManagedState)" {
	cat >state.json <<-'EOF'
	{"sessionId":"client-chosen-id","custom":{"counter":5},"messages":[{"role":"user","content":[{"text":"x"}]},{"role":"model","content":[{"text":"x"}]}]}
	EOF
	run -0 --separate-stderr agent-run --no-store --state state.json --model echo -m y
	[ "$(last | jq -c '.output | [.sessionId, .state.sessionId, .state.custom, (.state.messages | length), has("snapshotId")]')" = '["client-chosen-id","client-chosen-id",{"counter":5},4,false]' ]
	# The caller's file is untouched.
	[ "$(jq -c '.messages | length' state.json)" = 2 ]
}

@test "client-managed: a state without a session ID gets a fresh one (ClientManagedState_MintsSessionID)" {
	echo '{"messages":[]}' >state.json
	run -0 --separate-stderr agent-run --no-store --state state.json --model echo -m y
	[ -n "$(last | jq -r '.output.sessionId | select(length == 36)')" ]
}

@test "--format text prints the streamed text and a summary on stderr" {
	run -0 --separate-stderr agent-run --no-store --format text --model echo -m "hi there"
	[ "$output" = "hi there" ]
	[[ "$stderr" =~ ^agent-run:\ stop,\ session\ [0-9a-f-]{36},\ 8\ characters\ in,\ 8\ out$ ]]
}

@test "init: state with a store is FAILED_PRECONDITION (5), one error line (InitFailure_FailsActionWithStatus)" {
	echo '{}' >state.json
	run -5 --separate-stderr agent-run --state state.json --model echo -m hi
	[ "$output" = '{"error":{"status":"FAILED_PRECONDITION","message":"state provided but agent has a session store configured (server-managed state); use snapshot ID instead"}}' ]
	[ "$stderr" = 'agent-run: state provided but agent has a session store configured (server-managed state); use snapshot ID instead
agent-run: --state FILE is for client-managed runs: add --no-store (or resume from the store with --session ID)' ]
}

@test "init: snapshot or session ID without a store is FAILED_PRECONDITION" {
	run -5 --separate-stderr agent-run --no-store --snapshot s1 --model echo -m hi
	[ "$output" = '{"error":{"status":"FAILED_PRECONDITION","message":"snapshot ID \"s1\" provided but agent has no session store configured (client-managed state); use state instead"}}' ]
	run -5 --separate-stderr agent-run --no-store --session abc --model echo -m hi
	[ "$output" = '{"error":{"status":"FAILED_PRECONDITION","message":"session ID \"abc\" provided but agent has no session store configured (client-managed state); the conversation'"'"'s identity rides inside the state object (SessionState.SessionID)"}}' ]
}

@test "init: state with a session or snapshot ID is INVALID_ARGUMENT (101)" {
	echo '{}' >state.json
	run -101 --separate-stderr agent-run --no-store --state state.json --session abc --model echo -m hi
	[ "$output" = '{"error":{"status":"INVALID_ARGUMENT","message":"state is mutually exclusive with session ID and snapshot ID; a client-managed conversation'"'"'s identity rides inside the state (SessionState.SessionID)"}}' ]
}

@test "init: unknown fields are rejected, {} is accepted (JSONInitRejectsUnknownFields)" {
	run -101 --separate-stderr agent-run --no-store --init '{"bogus":true}' --model echo -m hi
	[ "$output" = '{"error":{"status":"INVALID_ARGUMENT","message":"invalid AgentInit: unknown field \"bogus\""}}' ]
	run -0 --separate-stderr agent-run --no-store --init '{}' --model echo -m hi
	echo '{"messages":[],"bogus":1}' >state.json
	run -101 --separate-stderr agent-run --no-store --state state.json --model echo -m hi
	[ "$output" = '{"error":{"status":"INVALID_ARGUMENT","message":"invalid state: unknown field \"bogus\""}}' ]
}

@test "input: a message with a role other than user fails the turn, INVALID_ARGUMENT, model never called" {
	script '{"text":"should not be said"}'
	echo '{"message":{"role":"model","content":[{"text":"hi"}]}}' >in
	run -101 --separate-stderr agent-run --no-store --model "script/$BATS_TEST_TMPDIR/model.ndjson" <in
	[ "$(chunks)" = '{"turnEnd":{"finishReason":"failed"}}' ]
	[ "$(last | jq -c '.output | del(.sessionId, .state.sessionId)')" = '{"error":{"status":"INVALID_ARGUMENT","message":"agent input message must have role \"user\", got \"model\""},"finishReason":"failed","state":{"messages":[]}}' ]
	[ "$stderr" = 'agent-run: agent input message must have role "user", got "model"' ]
}

@test "input: tool parts in a user message are rejected (PromptAgent_RejectsInvalidInputMessage)" {
	for part in '{"toolRequest":{"name":"t"}}' '{"toolResponse":{"name":"t","output":1}}'; do
		echo "{\"message\":{\"role\":\"user\",\"content\":[$part]}}" >in
		run -101 --separate-stderr agent-run --no-store --model echo <in
		[ "$(last | jq -r .output.error.message)" = 'agent input message must not contain tool request or response parts; use AgentInput.Resume instead' ]
	done
}

@test "input: an empty input cannot start a conversation; resume:{} counts as empty" {
	for in in '{}' '{"resume":{}}'; do
		run -101 --separate-stderr agent-run --no-store --model echo <<<"$in"
		[ "$(last | jq -c .output.error)" = '{"status":"INVALID_ARGUMENT","message":"agent input message or resume is required to start a conversation"}' ]
	done
}

@test "input: a malformed line ends the invocation with a failed output naming the line" {
	printf '%s\n' '{"message":{"content":[{"text":"a"}]}}' '{"message":' '{"message":{"content":[{"text":"c"}]}}' >in
	run -101 --separate-stderr agent-run --no-store --model echo <in
	[ "$(chunks | grep -c turnEnd)" = 1 ]
	[ "$(last | jq -r .output.error.status)" = INVALID_ARGUMENT ]
	[[ "$(last | jq -r .output.error.message)" == *"(at <stdin>:2)"* ]]
	# The last good state: the first turn.
	[ "$(last | jq -c '[.output.state.messages[].content[0].text]')" = '["a","a"]' ]
}

@test "input: unknown fields and wrong types are invalid AgentInputs" {
	run -101 --separate-stderr agent-run --no-store --model echo <<<'{"mesage":{}}'
	[ "$(last | jq -r .output.error.message)" = 'invalid AgentInput: unknown field "mesage" (at <stdin>:1)' ]
	run -101 --separate-stderr agent-run --no-store --model echo --input-format ndjson <<<'[1]'
	[ "$(last | jq -r .output.error.message)" = 'invalid AgentInput: must be a JSON object, not array (at <stdin>:1)' ]
}

@test "input: a line over --max-record is refused with its line number" {
	run -101 --separate-stderr agent-run --no-store --max-record 64 --model echo \
		<<<'{"message":{"content":[{"text":"0123456789012345678901234567890123456789012345678901234567890123456789"}]}}'
	[ "$(last | jq -r .output.error.status)" = INVALID_ARGUMENT ]
	[[ "$(last | jq -r .output.error.message)" == *"<stdin>:1"* ]]
}

@test "agents: an unknown agent is NOT_FOUND (4) with an error line; no agent at all is a usage error" {
	run -4 --separate-stderr agent-run nosuch -m hi
	[ "$output" = '{"error":{"status":"NOT_FOUND","message":"agent '"'"'nosuch'"'"' not found (searched: agents, '"$XDG_CONFIG_HOME"'/agentkit/agents)"}}' ]
	run -100 --separate-stderr agent-run -m hi
	[ -z "$output" ]
	[ "$stderr" = "agent-run: no agent: give an agent name, a .prompt file, or --model (or set AGENTKIT_MODEL: agent-run --list-models)
try 'agent-run --help'" ]
}

@test "models: an unknown provider is NOT_FOUND (4) before any turn starts" {
	run -4 --separate-stderr agent-run --no-store --model nosuch/x -m hi
	[ "$output" = '{"error":{"status":"NOT_FOUND","message":"model '"'"'nosuch/x'"'"' not found (unknown provider '"'"'nosuch'"'"')"}}' ]
}

@test "failed turn, client-managed: rolled back, the output carries the last good state (FailedTurn_ClientManagedReturnsLastGoodState)" {
	script '{"when":{"user":"one"},"text":"echo: one"}' '{"when":{"user":"two"},"text":"echo: two"}' \
		'{"when":{"user":"boom"},"chunks":["partial"],"error":{"status":"UNAVAILABLE","message":"model timeout"}}'
	run -1 --separate-stderr agent-run --no-store --model "script/$BATS_TEST_TMPDIR/model.ndjson" -m one -m two -m boom -m never
	[ "$(chunks | jq -c 'select(.turnEnd)')" = '{"turnEnd":{"finishReason":"stop"}}
{"turnEnd":{"finishReason":"stop"}}
{"turnEnd":{"finishReason":"failed"}}' ]
	[ "$(last | jq -c '.output | [.finishReason, .error, (.state.messages | length), .state.messages[-1].content[0].text]')" = '["failed",{"status":"UNAVAILABLE","message":"generate: model timeout"},4,"echo: two"]' ]
	[ "$stderr" = "agent-run: generate: model timeout" ]
}

@test "failed turn: the last good state is resumable and {} re-attempts the conversation (FailedTurn_LastGoodStateIsResumable)" {
	script '{"when":{"user":"one"},"text":"first"}' '{"when":{"user":"two"},"error":{"status":"UNAVAILABLE","message":"down"}}'
	run -1 --separate-stderr agent-run --no-store --model "script/$BATS_TEST_TMPDIR/model.ndjson" -m one -m two
	last | jq -c .output.state >good.json
	[ "$(jq -c '.messages | length' good.json)" = 2 ]
	# Retry: add the message again, with a model that answers now.
	script '{"when":{"user":"two"},"text":"second"}'
	run -0 --separate-stderr agent-run --no-store --state good.json --model "script/$BATS_TEST_TMPDIR/model.ndjson" -m two
	[ "$(last | jq -c '[.output.finishReason, (.output.state.messages | length)]')" = '["stop",4]' ]
	# An empty input re-runs the conversation as it stands (last message: user).
	last | jq -c '.output.state | .messages |= .[:3]' >three.json
	run -0 --separate-stderr agent-run --no-store --state three.json --model "script/$BATS_TEST_TMPDIR/model.ndjson" <<<'{}'
	[ "$(last | jq -c '[.output.state.messages[].content[0].text]')" = '["one","first","two","second"]' ]
}

@test "finish reasons: length and blocked exit 7, other and empty exit 0, forwarded verbatim (PromptAgent_ForwardsFinishReason)" {
	for fr in length blocked; do
		script "{\"text\":\"cut\",\"finishReason\":\"$fr\"}"
		run -7 --separate-stderr agent-run --no-store --model "script/$BATS_TEST_TMPDIR/model.ndjson" -m hi
		[ "$(chunks | tail -n 1)" = "{\"turnEnd\":{\"finishReason\":\"$fr\"}}" ]
		[ "$(last | jq -r .output.finishReason)" = "$fr" ]
	done
	script '{"text":"ok","finishReason":"other"}'
	run -0 --separate-stderr agent-run --no-store --model "script/$BATS_TEST_TMPDIR/model.ndjson" -m hi
	script '{"text":"ok","finishReason":""}'
	run -0 --separate-stderr agent-run --no-store --model "script/$BATS_TEST_TMPDIR/model.ndjson" -m hi
	[ "$(chunks | tail -n 1)" = '{"turnEnd":{}}' ]
	[ "$(last | jq -c '.output | has("finishReason")')" = false ]
}

@test "script model: no reply for a request is a clear failure" {
	script '{"text":"only one"}'
	run -5 --separate-stderr agent-run --no-store --model "script/$BATS_TEST_TMPDIR/model.ndjson" -m a -m b
	[ "$(last | jq -r .output.error.message)" = "generate: script model: $BATS_TEST_TMPDIR/model.ndjson has no reply for this request (model messages so far: 1, last user text: \"b\")" ]
	run -4 --separate-stderr agent-run --no-store --model script/nonexistent.ndjson -m a
	[ "$(last | jq -r .output.error.status)" = NOT_FOUND ]
}

@test "detach without a store resolves as a failed output, FAILED_PRECONDITION (Detach_RequiresStore)" {
	run -5 --separate-stderr agent-run --no-store --model echo <<<'{"detach":true,"message":{"content":[{"text":"x"}]}}'
	[ "$(last | jq -c '.output | [.finishReason, .error]')" = '["failed",{"status":"FAILED_PRECONDITION","message":"agent \"inline\": detach requires a session store"}]' ]
}

@test "stdout: a full disk fails with 111; a closed pipe is a quiet stop" {
	[ -w /dev/full ] || skip "no /dev/full"
	run -111 --separate-stderr bash -c 'agent-run --no-store --model echo -m hi >/dev/full'
	[ "$stderr" = "agent-run: unable to write output: No space left on device" ]
	# Whether the reader is gone before the last write is a race: a clean
	# finish (0), a caller stop of the turn in flight (2, tests/signals.bats)
	# or the quiet stop (141), never a crash or a message.
	run --separate-stderr bash -c 'agent-run --no-store --model echo -m "a b c d e f" -m again | head -c 1 >/dev/null; exit "${PIPESTATUS[0]}"'
	[ "$status" = 0 ] || [ "$status" = 2 ] || [ "$status" = 141 ]
	[ -z "$stderr" ]
}

@test "argv: -m text that is not UTF-8 is sent with U+FFFD; an ID or a tool name that is not is a usage error naming the option" {
	run -0 --separate-stderr agent-run --no-store --model echo -m $'bad \xff arg \xe2\x82' </dev/null
	[ "$(last | jq -c .output.message.content)" = "$(jq -nc '[{text: "bad \ufffd arg \ufffd\ufffd"}]')" ]
	run -100 --separate-stderr agent-run --model echo --session $'s\xffx' -m hi </dev/null
	[ "$stderr" = $'agent-run: --session: \'s\uFFFDx\' is not valid UTF-8\ntry \'agent-run --help\'' ]
	[ "$output" = "" ]
	run -100 --separate-stderr agent-run --no-store --model echo --tool $'t\xff' -m hi </dev/null
	[ "${stderr%%$'\n'*}" = $'agent-run: --tool: \'t\uFFFD\' is not valid UTF-8' ]
	# a path is the system's bytes: a store directory named so is used
	run -0 --separate-stderr agent-run --store "$BATS_TEST_TMPDIR/st"$'\xff' --model echo -m hi </dev/null
	[ "$(agent-snap --store "$BATS_TEST_TMPDIR/st"$'\xff' "$(last | jq -r .output.snapshotId)" | jq -r .status)" = completed ]
}
