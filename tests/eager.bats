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
		*'"stop"'*) echo stopped >>"$WAITING.stop"; exit 0 ;;
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
gone() { ! ps -o stat= -p "$1" 2>/dev/null | grep -qv Z; }

msg() { printf '{"message":{"content":[{"text":"%s"}]}}\n' "$1"; }
has_line() { grep -q "$2" "$1" 2>/dev/null; }
id_of() { jq -r .output.snapshotId <<<"$1"; }

# start ARGS...: agent-run in the background reading the fifo "in" (kept
# open for writing on fd 4), stdout in out, stderr in err.
start() {
	"$@" <in >out 2>err 3>&- &
	pid=$!
	exec 4>in
}
finish() {
	rc=0
	timeout 20 tail --pid="$pid" -f /dev/null || true
	wait "$pid" || rc=$?
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
