#!/usr/bin/env bats
# Custom agents (agent-run --exec, docs/custom-agents.md): the NDJSON
# protocol, runtime-semantics §9.1 scenarios, and handlers that misbehave.

load test_helper

setup() {
	common_setup
	requires jq
	H="$TOP/tests/fixtures/custom/scripted.sh"
	EX="$TOP/examples/handlers"
}

# The output without its random IDs.
norm() { last | jq -c 'del(.output.sessionId, .output.state.sessionId, .output.snapshotId)'; }

@test "echo-upper.sh: a POSIX sh handler answers each turn, client-managed" {
	run -0 --separate-stderr agent-run --no-store --exec "$EX/echo-upper.sh" -m hello -m again
	[ "$(chunks)" = '{"modelChunk":{"content":[{"text":"HELLO"}],"index":0,"role":"model"}}
{"customPatch":[{"op":"replace","path":"","value":{"turns":1,"last":"HELLO"}}]}
{"turnEnd":{"finishReason":"stop"}}
{"modelChunk":{"content":[{"text":"AGAIN"}],"index":0,"role":"model"}}
{"customPatch":[{"op":"replace","path":"","value":{"turns":2,"last":"AGAIN"}}]}
{"turnEnd":{"finishReason":"stop"}}' ]
	[ "$(norm)" = '{"output":{"finishReason":"stop","message":{"content":[{"text":"AGAIN"}],"role":"model"},"state":{"custom":{"turns":2,"last":"AGAIN"},"messages":[{"content":[{"text":"hello"}],"role":"user"},{"content":[{"text":"HELLO"}],"role":"model"},{"content":[{"text":"again"}],"role":"user"},{"content":[{"text":"AGAIN"}],"role":"model"}]}}}' ]
	[ "$stderr" = "" ]
}

@test "counter.py: a Python handler generates with agentkit's model and goes on after a failed turn" {
	requires python3
	run -0 --separate-stderr agent-run --model echo --exec "python3 $EX/counter.py" -m hi -m fail -m there
	[ "$(chunks | jq -c 'select(.turnEnd) | .turnEnd.finishReason')" = '"stop"
"failed"
"stop"' ]
	# The forwarded model chunks of both generate calls.
	[ "$(chunks | jq -r 'select(.modelChunk) | .modelChunk.content[].text' | tr -d '\n')" = "hithere" ]
	[ "$(last | jq -c '.output.artifacts')" = '[{"name":"count.txt","parts":[{"text":"2"}]}]' ]
	sid=$(last | jq -r .output.sessionId)
	[ "$(agent-snap --session "$sid" | jq -c '[.state.custom, [.state.messages[].content[0].text]]')" = '[{"count":2,"asked":["hi","there"]},["hi","hi","fail","there","there"]]' ]
	# Two committed turns: the failed one wrote no row.
	[ "$(agent-snap log "$sid" | wc -l)" -eq 2 ]
}

@test "custom loop continuing after a failed turn: one/boom/two ends stop with 5 messages (§9.1 23)" {
	run -0 --separate-stderr agent-run --no-store --exec "$H" -m one -m boom -m two
	[ "$(chunks | jq -c 'select(.turnEnd)')" = '{"turnEnd":{"finishReason":"stop"}}
{"turnEnd":{"finishReason":"failed"}}
{"turnEnd":{"finishReason":"stop"}}' ]
	[ "$(last | jq -c '[.output.finishReason, .output.error, [.output.state.messages[].content[0].text], .output.state.custom]')" = '["stop",null,["one","echo: one","boom","two","echo: two"],{"counter":2}]' ]
	[ "$stderr" = "" ]
}

@test "a failed turn without continue ends the invocation at the previous row (§9.1 18, 21)" {
	run -1 --separate-stderr agent-run --exec "$H" -m one -m boom-end -m never
	first=$(chunks | jq -r 'select(.turnEnd) | .turnEnd.snapshotId' | head -n 1)
	[ "$(chunks | jq -c 'select(.turnEnd)' | tail -n 1)" = '{"turnEnd":{"finishReason":"failed"}}' ]
	[ "$(last | jq -c '[.output.finishReason, .output.error, .output.snapshotId == "'"$first"'"]')" = '["failed",{"status":"UNAVAILABLE","message":"model timeout"},true]' ]
	sid=$(last | jq -r .output.sessionId)
	[ "$(agent-snap log "$sid" | wc -l)" -eq 1 ]
	[ "$stderr" = "agent-run: model timeout" ]
}

@test "client-managed: an uncommitted failure returns the last good state (§9.1 16)" {
	run -1 --separate-stderr agent-run --no-store --exec "$H" -m one -m two -m boom-end
	[ "$(norm)" = '{"output":{"error":{"status":"UNAVAILABLE","message":"model timeout"},"finishReason":"failed","state":{"custom":{"counter":2},"messages":[{"content":[{"text":"one"}],"role":"user"},{"content":[{"text":"echo: one"}],"role":"model"},{"content":[{"text":"two"}],"role":"user"},{"content":[{"text":"echo: two"}],"role":"model"}]}}}' ]
}

@test "a committed failure snapshots under failed and advances the last good state (§9.1 19, 20)" {
	run -1 --separate-stderr agent-run --exec "$H" -m partial
	id=$(last | jq -r .output.snapshotId)
	[ "$(chunks | jq -r 'select(.turnEnd) | .turnEnd.snapshotId')" = "$id" ]
	[ "$(agent-snap "$id" | jq -c '[.status, .finishReason, .error, .state.custom, [.state.messages[].content[0].text]]')" = '["failed","failed",{"status":"UNAVAILABLE","message":"model timeout"},{"counter":5},["partial","as far as it got"]]' ]
	run -1 --separate-stderr agent-run --no-store --exec "$H" -m partial
	[ "$(last | jq -c '[.output.state.custom, .output.state.messages[-1].content[0].text]')" = '[{"counter":5},"as far as it got"]' ]
}

@test "artifacts: three sent, two kept, same name replaced in place (§9.1 7, 11)" {
	run -0 --separate-stderr agent-run --exec "$H" -m artifacts
	[ "$(chunks | jq -c 'select(.artifact)')" = '{"artifact":{"name":"code.go","parts":[{"text":"v1"}]}}
{"artifact":{"name":"notes.md","parts":[{"text":"n"}]}}
{"artifact":{"name":"code.go","parts":[{"text":"v2"}]}}' ]
	[ "$(last | jq -c .output.artifacts)" = '[{"name":"code.go","parts":[{"text":"v2"}]},{"name":"notes.md","parts":[{"text":"n"}]}]' ]
	id=$(last | jq -r .output.snapshotId)
	[ "$(agent-snap "$id" | jq -c '.state.artifacts | length')" = 2 ]
}

@test "set messages replaces the history (§9.1 26)" {
	run -0 --separate-stderr agent-run --no-store --exec "$H" -m one -m set
	[ "$(last | jq -c '[.output.finishReason, .output.state.messages]')" = '[null,[{"content":[{"text":"only me"}],"role":"model"}]]' ]
}

@test "custom state streams as customPatch: a whole replace first, then diffs, unchanged emits nothing (§3.6)" {
	run -0 --separate-stderr agent-run --no-store --exec "$H" -m twice -m twice
	[ "$(chunks | jq -c 'select(.customPatch)')" = '{"customPatch":[{"op":"replace","path":"","value":{"counter":1,"items":["alpha"]}}]}
{"customPatch":[{"op":"add","path":"/items/-","value":"beta"}]}
{"customPatch":[{"op":"replace","path":"","value":{"counter":1,"items":["alpha"]}}]}
{"customPatch":[{"op":"add","path":"/items/-","value":"beta"}]}' ]
	# The patches rebuild the final custom state.
	[ "$(chunks | jpatch-apply --stream --final)" = "$(last | jq -c .output.state.custom)" ]
}

@test "a mutation after the last turn is not snapshotted (§9.1 50)" {
	AFTER=mutate run -0 --separate-stderr agent-run --exec "$H" -m one
	sid=$(last | jq -r .output.sessionId)
	[ "$(agent-snap log "$sid" | wc -l)" -eq 1 ]
	[ "$(agent-snap --session "$sid" | jq -c .state.custom)" = '{"counter":1}' ]
}

@test "a result after the last turn overrides the output's finish reason only (§9.1 110)" {
	AFTER=result run -0 --separate-stderr agent-run --exec "$H" -m one
	[ "$(last | jq -r .output.finishReason)" = other ]
	[ "$(chunks | jq -r 'select(.turnEnd) | .turnEnd.finishReason')" = stop ]
	[ "$(agent-snap "$(last | jq -r .output.snapshotId)" | jq -r .finishReason)" = stop ]
}

@test "the turn context: reserved ID = TurnEnd ID = row, parents chain; client-managed IDs empty (§9.1 15)" {
	run -0 --separate-stderr agent-run --exec "$H" -m ctx -m ctx
	ids=$(chunks | jq -r 'select(.turnEnd) | .turnEnd.snapshotId')
	id0=$(echo "$ids" | head -n 1) id1=$(echo "$ids" | tail -n 1)
	sid=$(last | jq -r .output.sessionId)
	[ "$(agent-snap "$id0" | jq -c .state.custom)" = "{\"sessionId\":\"$sid\",\"snapshotId\":\"$id0\",\"parentSnapshotId\":\"\",\"turnIndex\":0}" ]
	[ "$(agent-snap "$id1" | jq -c .state.custom)" = "{\"sessionId\":\"$sid\",\"snapshotId\":\"$id1\",\"parentSnapshotId\":\"$id0\",\"turnIndex\":1}" ]
	run -0 --separate-stderr agent-run --no-store --exec "$H" -m ctx
	[ "$(last | jq -c '.output.state.custom | [.snapshotId, .parentSnapshotId, .turnIndex]')" = '["","",0]' ]
}

@test "generate: a handler's model call is served by agentkit, streamed back and forwarded" {
	run -0 --separate-stderr agent-run --no-store --model echo --exec "$H" -m 'gen with three words'
	n=$(chunks | jq -c 'select(.modelChunk)' | wc -l)
	[ "$n" -ge 2 ]
	[ "$(chunks | jq -r 'select(.modelChunk) | .modelChunk | [.role, .index] | @tsv' | sort -u)" = "$(printf 'model\t0')" ]
	[ "$(last | jq -c '[.output.state.custom.chunks, .output.message.content[0].text, .output.finishReason]')" = "[$n,\"gen with three words\",\"stop\"]" ]
}

@test "generate: a model failure is answered to the handler, which fails the turn with its status" {
	run -4 --separate-stderr agent-run --no-store --exec "$H" -m gen-bad
	[ "$(last | jq -c '[.output.finishReason, .output.error.status]')" = '["failed","NOT_FOUND"]' ]
}

@test "exec in the front matter: a custom agent needs no model" {
	mkdir agents
	printf -- '---\nexec: %s\ndescription: Scripted.\n---\n' "$H" >agents/scripted.prompt
	run -0 --separate-stderr agent-run scripted --no-store -m one
	[ "$(last | jq -r .output.message.content[0].text)" = "echo: one" ]
	# --exec overrides it.
	run -0 --separate-stderr agent-run scripted --no-store --exec "$EX/echo-upper.sh" -m one
	[ "$(last | jq -r .output.message.content[0].text)" = "ONE" ]
}

@test "a detached custom agent runs in the worker and finalizes the row" {
	run -0 --separate-stderr agent-run --exec "$H" --detach -m one -m two
	id=$(last | jq -r .output.snapshotId)
	[ "$(last | jq -r .output.finishReason)" = detached ]
	run -0 --separate-stderr agent-wait "$id"
	[ "$(printf '%s\n' "$output" | jq -c '[.status, .finishReason, .state.custom, (.state.messages | length)]')" = '["completed","stop",{"counter":2},4]' ]
}

# ---- handlers that misbehave ----

@test "a handler that crashes fails the invocation with its exit status and stderr, at the last row" {
	run -1 --separate-stderr agent-run --exec "$H" -m one -m crash
	first=$(chunks | jq -r 'select(.turnEnd) | .turnEnd.snapshotId' | head -n 1)
	[ "$(last | jq -c '[.output.finishReason, .output.error.status, .output.snapshotId == "'"$first"'"]')" = '["failed","INTERNAL",true]' ]
	msg=$(last | jq -r .output.error.message)
	[ "$msg" = "custom agent '$H' exited with status 3: handler crashed on purpose" ]
	[ "$stderr" = "agent-run: $msg" ]
}

@test "a handler that exits after its first turn fails the second" {
	cat >once.sh <<-'EOF'
	#!/bin/sh
	read -r line
	echo '{"done":{"finishReason":"stop"}}'
	EOF
	chmod +x once.sh
	run -1 --separate-stderr agent-run --no-store --exec ./once.sh -m one -m two
	[ "$(chunks | jq -c 'select(.turnEnd)')" = '{"turnEnd":{"finishReason":"stop"}}
{"turnEnd":{"finishReason":"failed"}}' ]
	[ "$(last | jq -r .output.error.message)" = "custom agent './once.sh' exited with status 0" ]
	# The last good state: the first turn.
	[ "$(last | jq -c '[.output.state.messages[].content[0].text]')" = '["one"]' ]
}

@test "a handler that hangs past AGENTKIT_EXEC_TIMEOUT is killed: DEADLINE_EXCEEDED, no process left" {
	cat >hang.sh <<-'EOF'
	#!/bin/sh
	echo $$ >handler.pid
	read -r line
	sleep 30 &
	echo $! >child.pid
	wait
	EOF
	chmod +x hang.sh
	AGENTKIT_EXEC_TIMEOUT=300ms run -1 --separate-stderr agent-run --no-store --exec ./hang.sh -m one
	[ "$(last | jq -c '[.output.finishReason, .output.error]')" = "[\"failed\",{\"status\":\"DEADLINE_EXCEEDED\",\"message\":\"custom agent './hang.sh' did not answer within 300 ms\"}]" ]
	gone "$(cat handler.pid)"
	gone "$(cat child.pid)"
}

@test "a handler that writes garbage, an unknown line or a bad patch fails the invocation naming the line" {
	run -1 --separate-stderr agent-run --no-store --exec "$H" -m garbage
	[[ "$(last | jq -r .output.error.message)" == "custom agent '$H' wrote malformed output: invalid JSON:"*"(at stdout:1)" ]]
	run -1 --separate-stderr agent-run --no-store --exec "$H" -m unknown
	[ "$(last | jq -r .output.error.message)" = "custom agent '$H' wrote an unknown line (at stdout:1)" ]
	run -1 --separate-stderr agent-run --no-store --exec "$H" -m badpatch
	[[ "$(last | jq -r .output.error.message)" == "custom agent '$H' wrote a bad customPatch (at stdout:1): "* ]]
	[ "$(last | jq -r .output.error.status)" = INTERNAL ]
}

@test "a handler that closes its stdout mid-turn fails the invocation" {
	run -1 --separate-stderr agent-run --no-store --exec "$H" -m close
	[ "$(last | jq -r .output.error.message)" = "custom agent '$H' closed its output (is still running)" ]
}

@test "a handler that fails or writes garbage after the last turn fails the invocation" {
	AFTER=fail run -1 --separate-stderr agent-run --no-store --exec "$H" -m one
	[ "$(last | jq -c '[.output.finishReason, .output.error, (.output.state.messages | length)]')" = "[\"failed\",{\"status\":\"INTERNAL\",\"message\":\"custom agent '$H' exited with status 4: cleanup failed\"},2]" ]
	AFTER=garbage run -1 --separate-stderr agent-run --no-store --exec "$H" -m one
	[ "$(last | jq -r .output.error.message)" = "custom agent '$H' wrote malformed output after its last turn (at stdout:4)" ]
	AGENTKIT_EXEC_TIMEOUT=300ms AFTER=hang run -1 --separate-stderr agent-run --no-store --exec "$H" -m one
	[ "$(last | jq -r .output.error.status)" = DEADLINE_EXCEEDED ]
}

@test "a handler command that does not exist fails the first turn" {
	run -1 --separate-stderr agent-run --no-store --exec ./no-such-handler -m one
	[[ "$(last | jq -r .output.error.message)" == "custom agent './no-such-handler' exited with status 127: "*"not found" ]]
}

@test "the handler's environment has no provider keys" {
	cat >env.sh <<-'EOF'
	#!/bin/sh
	read -r line
	k=$(env | grep -c '_API_KEY=' || true)
	echo "{\"custom\":{\"keys\":$k,\"sid\":\"$AGENTKIT_SESSION_ID\"}}"
	echo '{"done":{}}'
	EOF
	chmod +x env.sh
	OPENAI_API_KEY=sk-x ANTHROPIC_API_KEY=y run -0 --separate-stderr agent-run --no-store --exec ./env.sh -m one
	[ "$(last | jq -c '[.output.state.custom.keys, .output.state.custom.sid == .output.sessionId]')" = '[0,true]' ]
}

@test "SIGTERM during a turn: the handler is told to stop, the turn ends aborted at the last row" {
	cat >wait.sh <<-'EOF'
	#!/bin/sh
	while read -r line; do
		case $line in
		*'"stop"'*) echo stopped >stop.log; exit 0 ;;
		*'"text":"wait"'*) touch waiting ;;
		*) echo '{"done":{"finishReason":"stop"}}' ;;
		esac
	done
	EOF
	chmod +x wait.sh
	agent-run --exec ./wait.sh -m one -m wait >out.ndjson 2>err.txt &
	pid=$!
	wait_for 20 test -e waiting
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 2 ]
	output=$(cat out.ndjson)
	first=$(chunks | jq -r 'select(.turnEnd) | .turnEnd.snapshotId' | head -n 1)
	[ "$(last | jq -c '[.output.finishReason, .output.error.status, .output.snapshotId == "'"$first"'"]')" = '["aborted","CANCELLED",true]' ]
	[ "$(cat stop.log)" = stopped ]
}

@test "a detached custom agent is aborted: the handler is told to stop, the row ends aborted" {
	cat >"$BATS_TEST_TMPDIR/wait.sh" <<-'EOF2'
	#!/bin/sh
	while read -r line; do
		case $line in
		*'"stop"'*) echo stopped >"$D/stop.log"; exit 0 ;;
		*'"text":"wait"'*) touch "$D/waiting" ;;
		*) echo '{"custom":{"counter":1}}'; echo '{"done":{"finishReason":"stop"}}' ;;
		esac
	done
	EOF2
	chmod +x "$BATS_TEST_TMPDIR/wait.sh"
	export D="$BATS_TEST_TMPDIR"
	run -0 --separate-stderr agent-run --exec "$D/wait.sh" --detach -m one -m wait
	id=$(last | jq -r .output.snapshotId)
	wait_for 20 test -e "$D/waiting"
	run -0 --separate-stderr agent-abort "$id"
	run -2 --separate-stderr agent-wait "$id"
	[ "$(printf '%s\n' "$output" | jq -c '[.status, .finishReason, .state.custom]')" = '["aborted","aborted",{"counter":1}]' ]
	[ "$(cat "$D/stop.log")" = stopped ]
}

@test "a handler's bad customPatch is named once, with its op and path" {
	run -1 --separate-stderr agent-run --no-store --exec "$H" -m badpatch
	[ "$(last | jq -c .output.error)" = "{\"status\":\"INTERNAL\",\"message\":\"custom agent '$H' wrote a bad customPatch (at stdout:1): patch op 0: path '/nope/deeper' does not exist\"}" ]
}
