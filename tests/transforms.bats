#!/usr/bin/env bats
# State and stream transforms (runtime-semantics §7.1-7.2, §9.3), grounding
# with --docs (docs/transforms.md), and transforms that misbehave.

load test_helper

setup() {
	common_setup
	requires jq
	H="$TOP/tests/fixtures/custom/scripted.sh"
	REDACT="jq --unbuffered -c 'del(.custom.secret)'"
}

# A custom agent with the redacting state transform in its front matter.
secret_agent() {
	mkdir -p agents
	cat >agents/vault.prompt <<-EOF
	---
	exec: $H
	stateTransform: $REDACT
	description: Keeps a secret.
	---
	EOF
}

# ---- state transform ----

@test "state transform: a secret never reaches stdout while the stored row keeps it" {
	secret_agent
	run -0 --separate-stderr agent-run vault -m secret
	[[ "$output" != *hunter* ]]
	[ "$(chunks | jq -c 'select(.customPatch)')" = '{"customPatch":[{"op":"replace","path":"","value":{"counter":1}}]}
{"customPatch":[{"op":"replace","path":"/counter","value":2}]}' ]
	id=$(last | jq -r .output.snapshotId)
	sid=$(last | jq -r .output.sessionId)
	# The raw row keeps the secret; getSnapshot through the agent does not.
	[ "$(agent-snap "$id" | jq -c .state.custom)" = '{"counter":2,"secret":"hunter3"}' ]
	run -0 --separate-stderr agent-snap -a vault "$id"
	[ "$(printf '%s\n' "$output" | jq -c '[.state.custom, .state.sessionId == "'"$sid"'", .snapshotId == "'"$id"'"]')" = '[{"counter":2},true,true]' ]
	run -0 --separate-stderr agent-snap -a vault --session "$sid"
	[[ "$output" != *hunter* ]]
}

@test "state transform: the client-managed output state is transformed and the patches stay consistent" {
	run -0 --separate-stderr agent-run --no-store --exec "$H" --state-transform "$REDACT" -m secret -m twice -m secret
	[[ "$output" != *hunter* ]]
	[ "$(last | jq -c '.output.state.custom')" = '{"counter":2}' ]
	# Replaying the streamed patches rebuilds exactly the transformed state.
	[ "$(chunks | jpatch-apply --stream --final)" = '{"counter":2}' ]
}

@test "state transform: sessionId is re-stamped after the transform" {
	run -0 --separate-stderr agent-run --no-store --model echo \
		--state-transform "jq --unbuffered -c '.sessionId = \"forged\"'" -m hi
	[ "$(last | jq -c '.output.state.sessionId == .output.sessionId')" = true ]
}

@test "state transform: null omits the state (success), patches carry null" {
	run -0 --separate-stderr agent-run --no-store --exec "$H" --state-transform "jq --unbuffered -c 'null'" -m one
	[ "$(chunks | jq -c 'select(.customPatch)')" = '{"customPatch":[{"op":"replace","path":"","value":null}]}' ]
	[ "$(last | jq -c '[.output.finishReason, (.output | has("state"))]')" = '["stop",false]' ]
}

@test "state transform: an error fails a successful client-managed output closed, with its status (§9.1 94)" {
	run -1 --separate-stderr agent-run --no-store --model echo \
		--state-transform "jq --unbuffered -c '{error: {status: \"PERMISSION_DENIED\", message: \"no peeking\"}}'" -m hi
	[ "$(last | jq -c '.output | del(.sessionId)')" = '{"error":{"status":"PERMISSION_DENIED","message":"no peeking"},"finishReason":"failed"}' ]
	[ "$stderr" = "agent-run: no peeking" ]
}

@test "state transform: on a failed output a transform error just omits the state" {
	run -1 --separate-stderr agent-run --no-store --exec "$H" \
		--state-transform "jq --unbuffered -c 'if .custom then . else {error: {status: \"PERMISSION_DENIED\", message: \"no\"}} end'" -m boom-end
	[ "$(last | jq -c '.output | [.error, has("state")]')" = '[{"status":"UNAVAILABLE","message":"model timeout"},false]' ]
	[ "$stderr" = "agent-run: the state is omitted from the failed output: no
agent-run: model timeout" ]
}

@test "state transform: an error during a customPatch fails the invocation closed" {
	run -1 --separate-stderr agent-run --exec "$H" \
		--state-transform "jq --unbuffered -c '{error: {status: \"PERMISSION_DENIED\", message: \"denied\"}}'" -m one
	[ "$(chunks | jq -c 'select(.customPatch)')" = "" ]
	[ "$(last | jq -c '[.output.finishReason, .output.error]')" = '["failed",{"status":"PERMISSION_DENIED","message":"denied"}]' ]
}

@test "state transform: an error fails agent-snap -a with its status; the raw row is intact (§9.1 95)" {
	secret_agent
	run -0 --separate-stderr agent-run vault -m one
	id=$(last | jq -r .output.snapshotId)
	cat >agents/locked.prompt <<-'EOF'
	---
	stateTransform: jq --unbuffered -c '{error:{status:"PERMISSION_DENIED",message:"locked"}}'
	---
	EOF
	run -1 --separate-stderr agent-snap -a locked "$id"
	[ "$output" = "" ]
	[ "$stderr" = "agent-snap: locked" ]
	run -0 --separate-stderr agent-snap "$id"
	[ "$(printf '%s\n' "$output" | jq -c .state.custom)" = '{"counter":1}' ]
	run -4 --separate-stderr agent-snap -a nosuch "$id"
}

# ---- stream transform (§9.3) ----

@test "stream transform: redacts model chunks on the wire, never the output (§9.3 156)" {
	run -0 --separate-stderr agent-run --no-store --model echo \
		--stream-transform "jq --unbuffered -c '(.modelChunk.content[]?.text) |= gsub(\"42\"; \"[REDACTED]\")'" -m 'the answer is 42'
	[ "$(chunks | jq -r 'select(.modelChunk) | .modelChunk.content[].text' | tr -d '\n')" = "the answer is [REDACTED]" ]
	[ "$(last | jq -r .output.message.content[0].text)" = "the answer is 42" ]
}

@test "stream transform: null drops from the wire and keeps the side effects (§9.3 157)" {
	run -0 --separate-stderr agent-run --no-store --exec "$H" \
		--stream-transform "jq --unbuffered -c 'if .artifact then null else . end'" -m artifacts
	[ "$(chunks | jq -c 'select(.artifact)')" = "" ]
	[ "$(last | jq -c '[.output.artifacts[].name]')" = '["code.go","notes.md"]' ]
}

@test "stream transform: owns its copy; renaming on the wire keeps the real name (§9.3 158)" {
	run -0 --separate-stderr agent-run --no-store --exec "$H" \
		--stream-transform "jq --unbuffered -c 'if .artifact then .artifact.name = \"renamed.go\" else . end'" -m artifacts
	[ "$(chunks | jq -r 'select(.artifact) | .artifact.name' | sort -u)" = renamed.go ]
	[ "$(last | jq -c '[.output.artifacts[].name]')" = '["code.go","notes.md"]' ]
}

@test "stream transform: reshaping TurnEnd hides the ID on the wire only (§9.3 159)" {
	run -0 --separate-stderr agent-run --exec "$H" \
		--stream-transform "jq --unbuffered -c 'if .turnEnd then del(.turnEnd.snapshotId) else . end'" -m one
	[ "$(chunks | jq -c 'select(.turnEnd)')" = '{"turnEnd":{"finishReason":"stop"}}' ]
	id=$(last | jq -r .output.snapshotId)
	[ -n "$id" ] && [ "$id" != null ]
	run -0 --separate-stderr agent-snap "$id"
}

@test "stream transform: an error fails the invocation closed, nothing more forwarded (§9.3 160)" {
	run -1 --separate-stderr agent-run --no-store --model echo \
		--stream-transform "jq --unbuffered -c 'if .modelChunk then {error: {status: \"PERMISSION_DENIED\", message: \"not on the wire\"}} else . end'" -m hi -m again
	[ "$(printf '%s\n' "$output" | wc -l)" -eq 1 ]
	[ "$(last | jq -c '[.output.finishReason, .output.error]')" = '["failed",{"status":"PERMISSION_DENIED","message":"not on the wire"}]' ]
	# The turn itself went through (committed); the second never ran.
	[ "$(last | jq -c '[.output.state.messages[].content[0].text]')" = '["hi","hi"]' ]
}

@test "stream transform: the patches it passes apply to the transformed state" {
	run -0 --separate-stderr agent-run --no-store --exec "$H" --state-transform "$REDACT" \
		--stream-transform "jq --unbuffered -c ." -m secret
	[ "$(chunks | jpatch-apply --stream --final)" = "$(last | jq -c .output.state.custom)" ]
}

# ---- transforms that misbehave: each fails closed ----

@test "a transform that crashes, closes, hangs, writes garbage or a non-object fails closed" {
	run -1 --separate-stderr agent-run --no-store --model echo --stream-transform "echo oops >&2; exit 2" -m hi
	[ "$(last | jq -c '[.output.error.status, .output.error.message]')" = "[\"INTERNAL\",\"stream transform 'echo oops >&2; exit 2' exited with status 2: oops\"]" ]
	run -1 --separate-stderr agent-run --no-store --model echo --stream-transform "read -r l; exit 0" -m hi
	[ "$(last | jq -r .output.error.message)" = "stream transform 'read -r l; exit 0' exited with status 0" ]
	AGENTKIT_TRANSFORM_TIMEOUT=300ms run -1 --separate-stderr agent-run --no-store --model echo --stream-transform "sleep 20" -m hi
	[ "$(last | jq -c .output.error)" = "{\"status\":\"DEADLINE_EXCEEDED\",\"message\":\"stream transform 'sleep 20' did not answer within 300 ms\"}" ]
	run -1 --separate-stderr agent-run --no-store --model echo --stream-transform "while read -r l; do echo nope; done" -m hi
	[[ "$(last | jq -r .output.error.message)" == "stream transform 'while read -r l; do echo nope; done' wrote malformed output: invalid JSON"*"(at stdout:1)" ]]
	run -1 --separate-stderr agent-run --no-store --model echo --stream-transform "jq --unbuffered -c '[.]'" -m hi
	[ "$(last | jq -r .output.error.message)" = "stream transform 'jq --unbuffered -c '[.]'' answered array at line 1, not an object or null" ]
	AGENTKIT_TRANSFORM_TIMEOUT=300ms run -1 --separate-stderr agent-run --no-store --model echo --state-transform "sleep 20" -m hi
	[ "$(last | jq -c '[.output.error.status, (.output | has("state"))]')" = '["DEADLINE_EXCEEDED",false]' ]
}

@test "a bad AGENTKIT_TRANSFORM_TIMEOUT is a usage error" {
	AGENTKIT_TRANSFORM_TIMEOUT=soon run -100 --separate-stderr agent-run --no-store --model echo --state-transform cat -m hi
	[[ "$stderr" == "agent-run: AGENTKIT_TRANSFORM_TIMEOUT: "* ]]
}

# ---- a stop while a transform or the docs command is silent ----

# start ARGS...: agent-run in the background (stdout in out, stderr in err).
start() {
	agent-run --no-store "$@" </dev/null >out 2>err 3>&- &
	pid=$!
}
# stop SIG PIDFILE: once the command wrote its pid, stop agent-run; it must
# end within 10 s (the transforms' timeout is 30 s), else it is killed.
stop() {
	wait_for 10 test -s "$2"
	kill -"$1" "$pid"
	timeout 10 tail --pid="$pid" -f /dev/null || kill -KILL "$pid"
	rc=0
	wait "$pid" || rc=$?
}
SILENT='echo $$ >silent.pid; exec sleep 100'

@test "SIGTERM while a stream transform never answers: aborted within its grace, the final line, the transform ended" {
	# the state transform answers: the aborted output's state still goes through it
	start --model echo --stream-transform "$SILENT" \
		--state-transform "jq --unbuffered -c '.custom = {shaped: true}'" -m hi
	stop TERM silent.pid
	[ "$rc" -eq 2 ]
	[ "$(wc -l <out)" -eq 1 ]
	[ "$(jq -c '.output | [.finishReason, .error, .state.custom]' out)" = '["aborted",{"status":"CANCELLED","message":"context canceled"},{"shaped":true}]' ]
	[ "$(cat err)" = "agent-run: stopped by SIGTERM" ]
	! kill -0 "$(cat silent.pid)" 2>/dev/null
}

@test "SIGINT while the state transform never answers on the final output: aborted, the state left out" {
	env --default-signal=INT agent-run --no-store --model echo --state-transform "$SILENT" -m hi \
		</dev/null >out 2>err 3>&- &
	pid=$!
	stop INT silent.pid
	[ "$rc" -eq 2 ]
	[ "$(tail -n 1 out | jq -c '.output | [.finishReason, .error, has("state"), has("message")]')" = '["aborted",{"status":"CANCELLED","message":"context canceled"},false,false]' ]
	[ "$(cat err)" = "agent-run: stopped" ]
	! kill -0 "$(cat silent.pid)" 2>/dev/null
}

@test "SIGTERM while the docs command is silent: the turn aborted at once, uncommitted, the command ended" {
	agent-run --model echo --docs "$SILENT" -m hi </dev/null >out 2>err 3>&- &
	pid=$!
	stop TERM silent.pid
	[ "$rc" -eq 2 ]
	[ "$(tail -n 1 out | jq -c '.output | [.finishReason, .error, has("snapshotId")]')" = '["aborted",{"status":"CANCELLED","message":"context canceled"},false]' ]
	[ "$(cat err)" = "agent-run: stopped by SIGTERM" ]
	! kill -0 "$(cat silent.pid)" 2>/dev/null
	run -0 agent-snap sessions
	[ -z "$output" ]
}

# ---- grounding (--docs) ----

@test "grounding: the docs command gets the conversation, the turn's request gets the context part" {
	cat >docs.sh <<-'EOF'
	#!/bin/sh
	tee -a docs-in.ndjson | jq -c '[("about " + .[-1].content[0].text), {content: [{text: "second"}], metadata: {ref: "r2"}}]'
	EOF
	chmod +x docs.sh
	run -0 --separate-stderr agent-run --no-store --model echo --docs ./docs.sh -m cats -m dogs
	# The echo model answers with every user text part: the question and the context.
	[ "$(last | jq -c '.output.message.content[0].text')" = '"dogs\n\nUse the following information to complete your task:\n\n- [0]: about dogs\n- [r2]: second\n\n"' ]
	# The history keeps the question as asked.
	[ "$(last | jq -c '[.output.state.messages[] | select(.role == "user") | .content]')" = '[[{"text":"cats"}],[{"text":"dogs"}]]' ]
	[ "$(jq -c '[.[] | .content[0].text[0:4]]' docs-in.ndjson)" = '["cats"]
["cats","cats","dogs"]' ]
}

@test "grounding: docs from the front matter; an empty list adds nothing" {
	mkdir agents
	printf -- '---\nmodel: echo\ndocs: echo []\n---\n{{role "system"}}Be brief.\n{{history}}\n' >agents/g.prompt
	run -0 --separate-stderr agent-run g --no-store -m plain
	[ "$(last | jq -r .output.message.content[0].text)" = plain ]
}

@test "grounding: a failing docs command fails the turn uncommitted" {
	run -1 --separate-stderr agent-run --model echo --docs "echo down >&2; exit 1" -m one
	[ "$(last | jq -c '[.output.finishReason, .output.error, has("snapshotId")]')" = "[\"failed\",{\"status\":\"INTERNAL\",\"message\":\"docs: docs command 'echo down >&2; exit 1' exited with status 1: down\"},false]" ]
	run -1 --separate-stderr agent-run --no-store --model echo --docs "echo '{}'" -m one
	[ "$(last | jq -r .output.error.message)" = "docs: docs command 'echo '{}'' must print an array of documents, not object" ]
	run -1 --separate-stderr agent-run --no-store --model echo --docs "echo '[1]'" -m one
	[ "$(last | jq -r .output.error.message)" = "docs: docs command 'echo '[1]'': document 0 is neither a string nor {\"content\": [parts]}" ]
}

@test "grounding: a docs command silent for AGENTKIT_TRANSFORM_TIMEOUT fails the turn, named by what it did not do" {
	AGENTKIT_TRANSFORM_TIMEOUT=300ms run -1 --separate-stderr timeout 20 agent-run --no-store --model echo --docs 'sleep 20' -m hi
	[ "$(last | jq -c .output.error)" = "{\"status\":\"DEADLINE_EXCEEDED\",\"message\":\"docs: docs command 'sleep 20' did not answer within 300 ms\"}" ]
	# a conversation larger than a pipe holds, never read
	big=$(head -c 100000 /dev/zero | tr '\0' a)
	AGENTKIT_TRANSFORM_TIMEOUT=300ms run -1 --separate-stderr timeout 20 agent-run --no-store --model echo --docs 'sleep 20' -m "$big"
	[ "$(last | jq -c .output.error)" = "{\"status\":\"DEADLINE_EXCEEDED\",\"message\":\"docs: docs command 'sleep 20' did not read its input within 300 ms\"}" ]
}

@test "grounding: a docs command that closed its output but runs on is ended a second later" {
	SECONDS=0
	AGENTKIT_TRANSFORM_TIMEOUT=30s run -1 --separate-stderr timeout 20 agent-run --no-store --model echo --docs 'echo []; exec >&-; sleep 20' -m hi
	[ "$(last | jq -r .output.error.message)" = "docs: docs command 'echo []; exec >&-; sleep 20' was killed by signal 15 (Terminated)" ]
	[ "$SECONDS" -lt 10 ]
}

@test "grounding: a custom agent gets the documents in its turn line" {
	run -0 --separate-stderr agent-run --no-store --exec "$H" --docs "echo '[\"d1\"]'" -m docs
	[ "$(last | jq -r .output.message.content[0].text)" = '[{"content":[{"text":"d1"}]}]' ]
}
