#!/usr/bin/env bats
# Caller stops of attached runs (runtime-semantics §2.5): SIGINT, SIGTERM,
# SIGHUP and a closed stdout cancel the turn in flight, write a committed
# turn's row "aborted", still print the final line, and exit 2.

load test_helper

setup() {
	common_setup
	D="$FIXTURES/detach"
	export HANG_PIDFILE="$BATS_TEST_TMPDIR/hang.pids"
	AR=(agent-run --model "script/$D/convo.ndjson" --tool "$D/greet.json" --tool "$D/hang.json"
		--tool "$D/stubborn.json")
}

# start ARGS...: agent-run in the background with SIGINT at its default (a
# script's background jobs ignore it), stdout in out, stderr in err.
start() {
	env --default-signal=INT,HUP "${AR[@]}" "$@" <&0 >out 2>err 3>&- &
	pid=$!
}

@test "SIGINT while the model streams: the turn ends aborted, no row, exit 2" {
	start -m slow
	wait_for 10 has_line out modelChunk
	kill -INT "$pid"
	finish
	assert_equal "$rc" 2
	assert_equal "$(tail -n 2 out | head -n 1)" '{"turnEnd":{"finishReason":"aborted"}}'
	assert_equal "$(tail -n 1 out | jq -c '.output | [.finishReason, .error, has("snapshotId")]')" \
		'["aborted",{"status":"CANCELLED","message":"context canceled"},false]'
	assert_equal "$(cat err)" "agent-run: stopped"
	run -0 agent-snap sessions
	assert_output ""
}

@test "SIGTERM and SIGHUP are caller stops too; the resume point is the last committed row" {
	for sig in TERM HUP; do
		rm -f out
		start < <(exec 3>&-; msg one; sleep 0.2; msg slow)
		wait_for 10 has_line out '"text":"a "'
		first=$(jq -r 'select(.turnEnd) | .turnEnd.snapshotId' out | head -n 1)
		kill -"$sig" "$pid"
		finish
		assert_equal "$rc" 2
		assert_equal "$(tail -n 1 out | jq -r '.output.finishReason + " " + .output.snapshotId')" "aborted $first"
		run -0 agent-snap -m "$first"
		assert_equal "$(jq -r .status <<<"$output")" completed
	done
}

@test "a turn that committed before the stop is written aborted and is the resume point" {
	start -m greet-then-slow
	wait_for 10 has_line out '"role":"tool"'
	kill -INT "$pid"
	finish
	assert_equal "$rc" 2
	row=$(tail -n 1 out | jq -r .output.snapshotId)
	assert_equal "$(jq -c 'select(.turnEnd) | .turnEnd' out)" '{"finishReason":"aborted","snapshotId":"'"$row"'"}'
	run -2 agent-wait "$row"
	assert_equal "$(jq -c '[.status, .finishReason, .error.status, [.state.messages[].role]]' <<<"$output")" \
		'["aborted","aborted","CANCELLED",["user","model","tool"]]'
	run -0 "${AR[@]}" --snapshot "$row" -m one
}

@test "SIGINT between turns (blocked on stdin) ends the run at once" {
	mkfifo in
	exec 4<>in
	start <in
	msg one >&4
	wait_for 10 has_line out turnEnd
	first=$(jq -r 'select(.turnEnd) | .turnEnd.snapshotId' out)
	kill -INT "$pid"
	finish
	assert_equal "$rc" 2
	assert_equal "$(tail -n 1 out | jq -c '.output | [.finishReason, .error.status, .snapshotId]')" \
		'["aborted","CANCELLED","'"$first"'"]'
	exec 4>&-
}

@test "SIGINT while a tool runs: the tool's process group is ended" {
	start -m hang
	wait_for 10 test -s "$HANG_PIDFILE"
	wait_for 10 eval '[ "$(wc -l <"$HANG_PIDFILE")" = 2 ]'
	kill -INT "$pid"
	finish
	assert_equal "$rc" 2
	for p in $(cat "$HANG_PIDFILE"); do
		wait_for 10 eval "! kill -0 $p 2>/dev/null"
	done
}

@test "a second SIGINT exits at once" {
	start -m stuck
	wait_for 10 test -s "$HANG_PIDFILE"
	kill -INT "$pid"
	sleep 0.2
	kill -INT "$pid"
	finish
	# Killed by SIGINT (128 + 2), before the final line.
	assert_equal "$rc" 130
	run ! grep -q '"output"' out
	kill -9 "$(cat "$HANG_PIDFILE")" 2>/dev/null || true
}

@test "the reader of stdout going away is a caller stop: exit 2" {
	run --separate-stderr bash -c '"$@" | head -c 10 >/dev/null; exit "${PIPESTATUS[0]}"' _ "${AR[@]}" -m slow
	assert_equal "$status" 2
	assert_equal "$stderr" ""
}

@test "--format text: the summary names the stop" {
	env --default-signal=INT "${AR[@]}" --format text -m slow >out 2>err 3>&- &
	pid=$!
	wait_for 10 has_line out "a "
	kill -INT "$pid"
	finish
	assert_equal "$rc" 2
	[[ "$(tail -n 1 err)" =~ ^agent-run:\ aborted,\ session\ [0-9a-f-]+$ ]]
}

@test "ignored SIGINT stays ignored (nohup, background jobs of scripts)" {
	env --ignore-signal=INT "${AR[@]}" -m slow >out 2>err 3>&- &
	pid=$!
	wait_for 10 has_line out modelChunk
	kill -INT "$pid"
	sleep 0.3
	kill -0 "$pid"
	kill -TERM "$pid"
	finish
	assert_equal "$rc" 2
}
