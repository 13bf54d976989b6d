#!/usr/bin/env bats
# agent-abort: pending -> aborting (runtime-semantics §2.4), --wait.

load test_helper

setup() {
	common_setup
	SW="$AGENTKIT_BIN/../tests/helpers/store-worker"
	agent-snap import <"$FIXTURES/store/rows.ndjson" >/dev/null
}

pending() {
	local now
	now=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
	echo "{\"snapshotId\":\"$1\",\"sessionId\":\"live\",\"status\":\"pending\",\"createdAt\":\"2026-01-01T00:00:00Z\",\"updatedAt\":\"2026-01-01T00:00:00Z\",\"heartbeatAt\":\"$now\",\"state\":{\"custom\":\"kept\"}}" |
		agent-snap import >/dev/null
}

@test "a pending row flips to aborting: updatedAt now, heartbeatAt and state untouched" {
	pending a1
	before=$(agent-snap a1)
	run -0 --separate-stderr agent-abort a1
	assert_output '{"snapshotId":"a1","previousStatus":"pending","status":"aborting"}'
	after=$(agent-snap a1)
	assert_equal "$(jq -r .status <<<"$after")" aborting
	assert_equal "$(jq -r .heartbeatAt <<<"$after")" "$(jq -r .heartbeatAt <<<"$before")"
	assert_equal "$(jq -c .state <<<"$after")" '{"custom":"kept"}'
	[ "$(jq -r .updatedAt <<<"$after")" != "2026-01-01T00:00:00Z" ]
	assert_equal "$(jq -r .createdAt <<<"$after")" "2026-01-01T00:00:00Z"
}

@test "aborting and settled rows are a no-op reporting their status" {
	pending a2
	agent-abort a2 >/dev/null
	u=$(agent-snap -m a2 | jq -r .updatedAt)
	run -0 --separate-stderr agent-abort a2 done-1 failed-1 aborted-1 empty-status
	assert_output '{"snapshotId":"a2","previousStatus":"aborting","status":"aborting"}
{"snapshotId":"done-1","previousStatus":"completed","status":"completed"}
{"snapshotId":"failed-1","previousStatus":"failed","status":"failed"}
{"snapshotId":"aborted-1","previousStatus":"aborted","status":"aborted"}
{"snapshotId":"empty-status","previousStatus":"completed","status":"completed"}'
	assert_equal "$(agent-snap -m a2 | jq -r .updatedAt)" "$u"
	run -0 agent-snap export s-a
	assert_output "$(head -2 "$FIXTURES/store/rows.ndjson")"
}

@test "missing IDs exit 4; the others are still aborted" {
	pending a3
	run -4 --separate-stderr agent-abort nope a3
	assert_output '{"snapshotId":"a3","previousStatus":"pending","status":"aborting"}'
	assert_equal "$stderr" "agent-abort: snapshot 'nope' not found"
}

@test "--wait returns the row the worker finalized" {
	pending a4
	"$SW" run a4 100ms 1000 >worker.out &
	run -0 --separate-stderr agent-abort --wait --timeout 20s a4
	assert_output '{"snapshotId":"a4","previousStatus":"pending","status":"aborted"}'
	wait
	assert_equal "$(jq -r '.status + " " + .finishReason' worker.out)" "aborted aborted"
	run -2 agent-wait a4
}

@test "--wait with a dead worker ends when the row expires; --timeout gives 124" {
	pending a5
	run -124 --separate-stderr agent-abort --wait --timeout 300ms a5
	assert_output ""
	assert_equal "$stderr" "agent-abort: timed out after 300ms waiting for the rows to be finalized"
	AGENTKIT_HEARTBEAT_TIMEOUT=200ms run -0 --separate-stderr agent-abort --wait --timeout 20s a5
	assert_output '{"snapshotId":"a5","previousStatus":"aborting","status":"expired"}'
}

@test "bad arguments" {
	run -100 agent-abort
	run -100 agent-abort --timeout 1s x
	run -100 agent-abort ""
}

@test "no store at the path: not found (4), and none is created" {
	run -4 --separate-stderr agent-abort --store typo x
	assert_output ""
	assert_equal "$stderr" "agent-abort: no store at typo (set --store or AGENTKIT_STORE)"
	[ ! -e typo ]
	mkdir -m 700 empty
	run -4 --separate-stderr agent-abort --store empty x
	assert_equal "$stderr" "agent-abort: no store at empty (set --store or AGENTKIT_STORE)"
	[ -z "$(ls -A empty)" ]
}
