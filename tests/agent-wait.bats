#!/usr/bin/env bats
# agent-wait: blocks until rows settle; exit codes from the outcome.

load test_helper

setup() {
	common_setup
	SW="$AGENTKIT_BIN/../tests/helpers/store-worker"
	agent-snap import <"$FIXTURES/store/rows.ndjson" >/dev/null
}

# pending ID: stage a live pending row (heartbeat now).
pending() {
	local now
	now=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
	echo "{\"snapshotId\":\"$1\",\"sessionId\":\"${2:-live}\",\"status\":\"pending\",\"createdAt\":\"$now\",\"updatedAt\":\"$now\",\"heartbeatAt\":\"$now\"}" |
		agent-snap import >/dev/null
}

@test "settled rows return at once with the outcome's exit code" {
	run -0 --separate-stderr agent-wait done-1
	assert_output "$(head -1 "$FIXTURES/store/rows.ndjson")"
	run -0 agent-wait empty-status
	run -1 agent-wait failed-1
	run -2 agent-wait aborted-1
	run -3 agent-wait stale-pending
	run -3 agent-wait stale-aborting
	run -7 agent-wait length-1
	run -6 agent-wait interrupted-1
	run -4 --separate-stderr agent-wait nope
	assert_equal "$stderr" "agent-wait: snapshot 'nope' not found"
}

@test "several IDs: rows in argument order, the highest exit code wins" {
	run -4 --separate-stderr agent-wait -m failed-1 nope done-1
	assert_equal "$(jq -r .snapshotId <<<"$output" | tr '\n' ' ')" "failed-1 done-1 "
	run -7 agent-wait failed-1 length-1 aborted-1
	run -3 agent-wait done-1 stale-pending failed-1
}

@test "--metadata-only prints rows without state; default prints the full row" {
	run -0 --separate-stderr agent-wait --metadata-only done-1
	refute_output --partial '"state"'
	run -0 --separate-stderr agent-wait done-1
	assert_output --partial '"state"'
}

@test "blocks while pending, wakes on the worker's finalize" {
	pending w1
	( sleep 0.3; "$SW" finalize w1 completed stop >/dev/null ) &
	run -0 --separate-stderr agent-wait --timeout 20s w1
	assert_equal "$(jq -r '.status + " " + .finishReason' <<<"$output")" "completed stop"
	assert_equal "$stderr" ""
}

@test "aborting is not terminal: the wait rides out the abort window" {
	pending w2
	"$SW" abort w2 >/dev/null
	( sleep 0.3; "$SW" finalize w2 >/dev/null ) &
	run -2 --separate-stderr agent-wait --timeout 20s w2
	assert_equal "$(jq -r .status <<<"$output")" aborted
}

@test "a dead worker: the row expires and the wait ends with 3" {
	pending w3
	AGENTKIT_HEARTBEAT_TIMEOUT=300ms run -3 --separate-stderr agent-wait --timeout 20s w3
	assert_equal "$(jq -r .status <<<"$output")" expired
}

@test "a live worker that heartbeats keeps the row alive until it finishes" {
	pending w4
	"$SW" run w4 100ms 8 >/dev/null &
	AGENTKIT_HEARTBEAT_TIMEOUT=500ms run -0 --separate-stderr agent-wait --timeout 20s w4
	assert_equal "$(jq -r .status <<<"$output")" completed
}

@test "--timeout: 124, settled rows still printed" {
	pending w5
	run -124 --separate-stderr agent-wait --timeout 200ms w5 done-1
	assert_equal "$(jq -r .snapshotId <<<"$output")" done-1
	assert_equal "$stderr" "agent-wait: timed out after 200ms with 1 of 2 rows unsettled"
	run -100 --separate-stderr agent-wait --timeout soon w5
}

@test "--session waits on the session's latest row" {
	pending w6 sess-w
	( sleep 0.2; "$SW" finalize w6 failed failed >/dev/null ) &
	run -1 --separate-stderr agent-wait --session sess-w --timeout 20s
	assert_equal "$(jq -r .snapshotId <<<"$output")" w6
	run -4 --separate-stderr agent-wait --session nobody
	assert_equal "$stderr" "agent-wait: no snapshot found for session 'nobody'"
	run -100 agent-wait --session sess-w w6
}

@test "a row deleted while waiting counts as missing" {
	pending w7 gone
	( sleep 0.2; agent-snap rm gone >/dev/null ) &
	run -4 --separate-stderr agent-wait --timeout 20s w7
	assert_equal "$stderr" "agent-wait: snapshot 'w7' not found"
}

@test "bad arguments" {
	run -100 agent-wait
	run -100 --separate-stderr agent-wait ""
	assert_equal "$(head -1 <<<"$stderr")" "agent-wait: invalid snapshot ID '': must not be empty"
	touch f
	run -111 --separate-stderr agent-wait --store f x
	assert_equal "$stderr" "agent-wait: cannot open store 'f': not a directory"
}

@test "no store at the path: not found (4), and none is created" {
	run -4 --separate-stderr agent-wait --store typo x
	assert_output ""
	assert_equal "$stderr" "agent-wait: no store at typo (set --store or AGENTKIT_STORE)"
	run -4 --separate-stderr agent-wait --store typo --session s
	assert_equal "$stderr" "agent-wait: no store at typo (set --store or AGENTKIT_STORE)"
	[ ! -e typo ]
	mkdir -m 700 empty
	run -4 --separate-stderr agent-wait --store empty x
	assert_equal "$stderr" "agent-wait: no store at empty (set --store or AGENTKIT_STORE)"
	[ -z "$(ls -A empty)" ]
}
