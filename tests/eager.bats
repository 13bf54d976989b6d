#!/usr/bin/env bats
# Inputs that arrive while a turn runs (runtime-semantics §2.1-2.3;
# docs/detach.md "Eager intake"): a detach line detaches at once, the turn
# in flight goes on in the worker; and a detach after a custom agent's
# turn.  Timing is asserted by ordering: the blocking turn waits for a file
# the test creates only after it has read agent-run's detached output.

load test_helper

setup() {
	common_setup
	requires jq mkfifo
	D="$FIXTURES/detach"
	H="$FIXTURES/custom/scripted.sh"
	export AGENTKIT_HEARTBEAT_INTERVAL=100ms AGENTKIT_HEARTBEAT_TIMEOUT=5s
	export GO="$BATS_TEST_TMPDIR/go" WAITING="$BATS_TEST_TMPDIR/waiting"
	mkfifo in
	# A custom agent whose "block" turn waits for $GO (a file this test
	# makes) and says it is waiting in $WAITING; other turns count.
	cat >block.sh <<-'EOF'
	#!/bin/sh
	while IFS= read -r line; do
		case $line in
		*'"stop"'*) exit 0 ;;
		*'"turn"'*) ;;
		*) continue ;;
		esac
		n=$(printf '%s\n' "$line" | jq -r '(.turn.state.custom.n // 0) + 1')
		text=$(printf '%s\n' "$line" | jq -r '.turn.input.message.content[0].text')
		if [ "$text" = block ]; then
			: >"$WAITING"
			while [ ! -e "$GO" ]; do sleep 0.05; done
		fi
		echo "{\"message\":{\"role\":\"model\",\"content\":[{\"text\":\"did $text\"}]}}"
		echo "{\"custom\":{\"n\":$n}}"
		echo '{"done":{"finishReason":"stop"}}'
	done
	EOF
	chmod +x block.sh
}

teardown() {
	local log pid
	exec 4>&- 2>/dev/null || true
	for log in "$AGENTKIT_STORE"/logs/*.log; do
		[ -f "$log" ] || continue
		pid=$(sed -n '1s/.*agent-run\[\([0-9]*\)\].*/\1/p' "$log")
		[ -z "$pid" ] || wait_for 20 gone "$pid"
	done
	if grep -l "Sanitizer\|runtime error:" "$AGENTKIT_STORE"/logs/*.log 2>/dev/null; then
		cat "$AGENTKIT_STORE"/logs/*.log >&2
		return 1
	fi
}

# start ARGS...: agent-run in the background reading the fifo "in" (kept
# open for writing on fd 4), stdout in out, stderr in err.
start() {
	"$@" <in >out 2>err 3>&- &
	pid=$!
	exec 4>in
}
# send LINE...: the lines in one write, so they are all there when the
# first is read.
send() {
	printf '%s\n' "$@" >lines
	cat lines >&4
}

# ---- a detach after a custom agent's turn (issue: the handler's pipes) ----

@test "a bare detach after a custom agent's turn: the worker finalizes the row completed" {
	start agent-run --exec "$H"
	msg one >&4
	wait_for 10 has_line out turnEnd
	echo '{"detach":true}' >&4
	finish
	assert_equal "$rc" 0
	assert_equal "$(cat err)" ""
	first=$(jq -r 'select(.turnEnd) | .turnEnd.snapshotId' out)
	id=$(id_of "$(tail -n 1 out)")
	run -0 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, .finishReason, .parentId == "'"$first"'", has("error"), .state.custom, [.state.messages[].content[0].text]]' <<<"$output")" \
		'["completed","stop",true,false,{"counter":1},["one","echo: one"]]'
}

@test "a detach with a message after a custom agent's turn: the worker's own handler runs it" {
	start agent-run --exec "$H"
	msg one >&4
	wait_for 10 has_line out turnEnd
	echo '{"detach":true,"message":{"content":[{"text":"two"}]}}' >&4
	finish
	assert_equal "$rc" 0
	id=$(id_of "$(tail -n 1 out)")
	run -0 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, .finishReason, .state.custom, [.state.messages[].content[0].text]]' <<<"$output")" \
		'["completed","stop",{"counter":2},["one","echo: one","two","echo: two"]]'
}

# ---- a detach line while a turn runs ----

@test "a bare detach while a custom agent's turn blocks: the detached output at once, the turn goes on in the worker" {
	start agent-run --exec "$BATS_TEST_TMPDIR/block.sh"
	msg block >&4
	wait_for 10 test -e "$WAITING"
	echo '{"detach":true}' >&4
	finish
	# agent-run has returned while the turn still waits for $GO.
	assert_equal "$rc" 0
	assert_equal "$(cat err)" ""
	assert_equal "$(wc -l <out)" 1
	assert_equal "$(jq -c '.output | [.finishReason, keys]' out)" '["detached",["finishReason","sessionId","snapshotId"]]'
	id=$(id_of "$(cat out)")
	sid=$(jq -r .output.sessionId out)
	run -0 agent-snap -m "$id"
	assert_equal "$(jq -c '[.status, has("parentId")]' <<<"$output")" '["pending",false]'
	: >"$GO"
	run -0 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, .finishReason, has("parentId"), .state.custom, [.state.messages[].content[0].text]]' <<<"$output")" \
		'["completed","stop",false,{"n":1},["block","did block"]]'
	# The turn in flight wrote no row of its own: one row, the finalized pending one.
	assert_equal "$(agent-snap log "$sid" | wc -l)" 1
	grep -q "worker started in place: .* parent (none), 0 inputs" "$AGENTKIT_STORE/logs/$id.log"
	# the same lines in the store, as the file has them
	wait_for 20 eval 'grep -q "finalized completed" "$AGENTKIT_STORE/logs/$id.log"'
	assert_equal "$(agent-snap worker-log "$id")" "$(cat "$AGENTKIT_STORE/logs/$id.log")"
}

@test "a detach with a message while turn one blocks: no parent, both turns in the background" {
	start agent-run --exec "$BATS_TEST_TMPDIR/block.sh"
	msg block >&4
	wait_for 10 test -e "$WAITING"
	echo '{"message":{"content":[{"text":"two"}]},"detach":true}' >&4
	finish
	assert_equal "$rc" 0
	assert_equal "$(wc -l <out)" 1
	id=$(id_of "$(cat out)")
	run -0 agent-snap -m "$id"
	assert_equal "$(jq -c '[.status, has("parentId")]' <<<"$output")" '["pending",false]'
	: >"$GO"
	run -0 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, has("parentId"), .state.custom, [.state.messages[].content[0].text]]' <<<"$output")" \
		'["completed",false,{"n":2},["block","did block","two","did two"]]'
}

@test "a detach while a slow scripted model streams: the pending row's parent is the last committed row" {
	start agent-run --model "script/$D/convo.ndjson"
	msg one >&4
	wait_for 10 has_line out turnEnd
	first=$(jq -r 'select(.turnEnd) | .turnEnd.snapshotId' out)
	msg slow >&4
	wait_for 10 has_line out '"text":"a "'
	send '{"detach":true}' "$(msg three)"
	finish
	assert_equal "$rc" 0
	# Turn one streamed and committed; the slow turn's chunks stop at the detach.
	assert_equal "$(jq -c 'select(.turnEnd) | .turnEnd.snapshotId' out | wc -l)" 1
	id=$(id_of "$(tail -n 1 out)")
	run -0 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, .finishReason, .parentId == "'"$first"'", [.state.messages[] | .role + ":" + ([.content[].text] | join(""))]]' <<<"$output")" \
		'["completed","stop",true,["user:one","model:ok 0","user:slow","model:a b c d e f g h i j ","user:three","model:ok 2"]]'
	assert_equal "$(agent-snap log "$(jq -r .sessionId <<<"$output")" | wc -l)" 2
}

@test "an abort of the detached row stops the turn in flight: aborted, rolled back to the last committed row" {
	start agent-run --exec "$BATS_TEST_TMPDIR/block.sh"
	msg one >&4
	wait_for 10 has_line out turnEnd
	first=$(jq -r 'select(.turnEnd) | .turnEnd.snapshotId' out)
	msg block >&4
	wait_for 10 test -e "$WAITING"
	echo '{"detach":true}' >&4
	finish
	assert_equal "$rc" 0
	id=$(id_of "$(tail -n 1 out)")
	run -0 agent-abort "$id"
	run -2 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, .finishReason, .parentId == "'"$first"'", .state.custom, [.state.messages[].content[0].text]]' <<<"$output")" \
		'["aborted","aborted",true,{"n":1},["one","did one"]]'
	grep -q "the abort flip was seen" "$AGENTKIT_STORE/logs/$id.log"
}

@test "an abort of a row detached while a slow model streams stops the stream" {
	start agent-run --model "script/$D/convo.ndjson"
	msg slow >&4
	wait_for 10 has_line out '"text":"a "'
	echo '{"detach":true}' >&4
	finish
	id=$(id_of "$(tail -n 1 out)")
	run -0 agent-abort "$id"
	run -2 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, .finishReason, .state.messages]' <<<"$output")" '["aborted","aborted",[]]'
	grep -q "the abort flip was seen" "$AGENTKIT_STORE/logs/$id.log"
}

# ---- inputs that are not a detach ----

@test "inputs sent while a turn runs are queued and run in order, attached" {
	start agent-run --exec "$BATS_TEST_TMPDIR/block.sh"
	msg block >&4
	wait_for 10 test -e "$WAITING"
	msg two >&4
	msg three >&4
	exec 4>&-
	: >"$GO"
	finish
	assert_equal "$rc" 0
	assert_equal "$(jq -c 'select(.turnEnd) | .turnEnd.finishReason' out | tr -d '\n')" '"stop""stop""stop"'
	assert_equal "$(tail -n 1 out | jq -c '[.output.finishReason, [.output.state.messages[]?.content[0].text]]')" '["stop",[]]'
	sid=$(tail -n 1 out | jq -r .output.sessionId)
	assert_equal "$(agent-snap --session "$sid" | jq -c '[.state.messages[].content[0].text]')" \
		'["block","did block","two","did two","three","did three"]'
}

@test "end of input while a turn runs changes nothing: the turn finishes and commits" {
	start agent-run --exec "$BATS_TEST_TMPDIR/block.sh"
	msg block >&4
	wait_for 10 test -e "$WAITING"
	exec 4>&-
	sleep 0.2
	kill -0 "$pid"
	: >"$GO"
	finish
	assert_equal "$rc" 0
	row=$(jq -r 'select(.turnEnd) | .turnEnd.snapshotId' out)
	assert_equal "$(tail -n 1 out | jq -c '[.output.finishReason, .output.snapshotId == "'"$row"'"]')" '["stop",true]'
}

@test "a malformed line sent while a turn runs fails the invocation after that turn, as between turns" {
	start agent-run --exec "$BATS_TEST_TMPDIR/block.sh"
	msg block >&4
	wait_for 10 test -e "$WAITING"
	echo '{"message":' >&4
	msg never >&4
	: >"$GO"
	finish
	assert_equal "$rc" 101
	row=$(jq -r 'select(.turnEnd) | .turnEnd.snapshotId' out)
	assert_equal "$(tail -n 1 out | jq -c '[.output.finishReason, .output.error.status, .output.snapshotId == "'"$row"'"]')" \
		'["failed","INVALID_ARGUMENT",true]'
	grep -q '(at <stdin>:2)' err
}

@test "a malformed line after a detach line: the worker runs the turns before it, then fails the row" {
	start agent-run --exec "$BATS_TEST_TMPDIR/block.sh"
	msg block >&4
	wait_for 10 test -e "$WAITING"
	send '{"detach":true}' "$(msg two)" '{"message":'

	finish
	assert_equal "$rc" 0
	id=$(id_of "$(tail -n 1 out)")
	: >"$GO"
	run -1 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, .error.status, .state.custom, [.state.messages[].content[0].text]]' <<<"$output")" \
		'["failed","INVALID_ARGUMENT",{"n":2},["block","did block","two","did two"]]'
	[[ "$(jq -r .error.message <<<"$output")" == *"(at <stdin>:4)" ]]
}

@test "SIGTERM while a turn blocks and inputs wait: a caller stop, exit 2" {
	start agent-run --exec "$BATS_TEST_TMPDIR/block.sh"
	msg one >&4
	wait_for 10 has_line out turnEnd
	first=$(jq -r 'select(.turnEnd) | .turnEnd.snapshotId' out)
	msg block >&4
	wait_for 10 test -e "$WAITING"
	msg two >&4
	kill -TERM "$pid"
	finish
	assert_equal "$rc" 2
	assert_equal "$(tail -n 1 out | jq -c '[.output.finishReason, .output.error.status, .output.snapshotId == "'"$first"'"]')" \
		'["aborted","CANCELLED",true]'
	assert_equal "$(cat err)" "agent-run: stopped by SIGTERM"
}

@test "all of stdin there at once: a detach line anywhere detaches before the first turn" {
	run -0 --separate-stderr agent-run --model "script/$D/convo.ndjson" <<<"$(msg one; echo '{"detach":true}'; msg two)"
	assert_equal "${#lines[@]}" 1
	id=$(id_of "$output")
	run -0 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, has("parentId"), [.state.messages[].content[0].text]]' <<<"$output")" \
		'["completed",false,["one","ok 0","two","ok 1"]]'
}

@test "a worker detached in place heartbeats, and SIGTERM to it finalizes the row aborted" {
	start agent-run --exec "$BATS_TEST_TMPDIR/block.sh"
	msg block >&4
	wait_for 10 test -e "$WAITING"
	echo '{"detach":true}' >&4
	finish
	id=$(id_of "$(tail -n 1 out)")
	b1=$(agent-snap -m "$id" | jq -r .heartbeatAt)
	wait_for 10 eval '[ "$(agent-snap -m "$id" | jq -r .heartbeatAt)" != "$b1" ]'
	wpid=$(sed -n '1s/.*agent-run\[\([0-9]*\)\]: worker started in place.*/\1/p' "$AGENTKIT_STORE/logs/$id.log")
	[ -n "$wpid" ]
	[ "$wpid" != "$pid" ]
	kill -TERM "$wpid"
	run -2 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, .finishReason, .state.messages]' <<<"$output")" '["aborted","aborted",[]]'
	grep -q "stopped by signal 15" "$AGENTKIT_STORE/logs/$id.log"
}

@test "a detach line while a turn runs, without a store: the turn stops, FAILED_PRECONDITION, exit 5" {
	start agent-run --no-store --model "script/$D/convo.ndjson"
	msg slow >&4
	wait_for 10 has_line out '"text":"a "'
	echo '{"detach":true}' >&4
	finish
	assert_equal "$rc" 5
	assert_equal "$(jq -c 'select(.turnEnd) | .turnEnd' out)" '{"finishReason":"aborted"}'
	assert_equal "$(tail -n 1 out | jq -c '.output | [.finishReason, .error]')" \
		'["failed",{"status":"FAILED_PRECONDITION","message":"agent \"inline\": detach requires a session store"}]'
	assert_equal "$(cat err)" 'agent-run: agent "inline": detach requires a session store'
}

@test "stdin read ahead beyond --max-record in many lines: every line is a turn" {
	for i in $(seq 2000); do msg "$i"; done >many
	run -0 --separate-stderr agent-run --no-store --model echo --max-record 64 --format json <many
	assert_equal "$(jq -r '.state.messages | length' <<<"$output")" 4000
	assert_equal "$(jq -r '.message.content[0].text' <<<"$output")" 2000
}

@test "the caller's agent-run killed while a turn runs: the run stops as a caller stop" {
	start agent-run --exec "$BATS_TEST_TMPDIR/block.sh"
	msg one >&4
	wait_for 10 has_line out turnEnd
	msg block >&4
	wait_for 10 test -e "$WAITING"
	kill -9 "$pid"
	finish
	assert_equal "$rc" 137
	# The back saw SIGTERM: its final line names the resume point, turn one's row.
	first=$(jq -r 'select(.turnEnd) | .turnEnd.snapshotId' out | head -n 1)
	wait_for 10 has_line out '"output"'
	assert_equal "$(tail -n 1 out | jq -c '[.output.finishReason, .output.snapshotId == "'"$first"'"]')" '["aborted",true]'
	run -0 agent-snap sessions
	assert_equal "$(agent-snap log "$(jq -r .output.sessionId <(tail -n 1 out))" | wc -l)" 1
}
