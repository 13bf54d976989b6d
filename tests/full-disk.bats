#!/usr/bin/env bats
# A full disk (DESIGN.md §8: a turn whose commit failed never reports
# success).  The store lives on a small tmpfs; turns with large messages
# run until the disk is full.  For every run: exit 0 exactly when its row
# exists; exit 111 with a failed output naming "No space left on device"
# and the last committed row as the resume point; no row torn.  Needs to
# mount a tmpfs (root, as in CI); skipped with a message elsewhere.

load test_helper

setup() {
	common_setup
	export AGENTKIT_HEARTBEAT_INTERVAL=100ms AGENTKIT_HEARTBEAT_TIMEOUT=30s
	DISK="$BATS_TEST_TMPDIR/disk"
	mkdir -p "$DISK"
	mount -t tmpfs -o size=1m,mode=0700 agentkit-full-disk "$DISK" 2>/dev/null ||
		skip "cannot mount a 1 MiB tmpfs here (needs root): the full-disk run is not tested"
	export AGENTKIT_STORE="$DISK/store"
	# Space the detached run gets back after the disk has filled.
	head -c 131072 /dev/zero >"$DISK/ballast"
}

# The detached run's worker must be gone before the disk is unmounted (its
# log is open there), and its log must hold no sanitizer report.
teardown() {
	local pid status=0
	for pid in $(sed -s -n '1s/.*agent-run\[\([0-9]*\)\].*/\1/p' "$AGENTKIT_STORE"/logs/*.log 2>/dev/null); do
		wait_for 20 gone "$pid" || status=1
	done
	grep -H "Sanitizer\|runtime error:" "$AGENTKIT_STORE"/logs/*.log >&2 2>/dev/null && status=1
	mountpoint -q "$DISK" && umount "$DISK"
	return "$status"
}

# input KB I: an AgentInput line whose message is KB kilobytes of the I-th
# letter (no two turns alike), for agent-run's stdin.
input() {
	local t
	t=$(printf "\\%03o" $((97 + $2 % 26)))
	head -c "$(($1 * 1024))" /dev/zero | tr '\0' "$t" | jq -Rc '{message: {content: [{text: .}]}}'
}

# The reserved snapshot ID a failed commit names in its message.
lost_id() { sed -n "s/.*snapshot '\([0-9a-f-]*\)'.*/\1/p" <<<"$1" | head -n 1; }

# check_run STATUS OUTPUT STDERR LAST: one run against the contract; sets
# LAST to the row it committed.
check_run() {
	local rc=$1 out=$2 err=$3 final id
	final=$(tail -n 1 <<<"$out")
	case $rc in
	0)
		assert_equal "$(jq -r .output.finishReason <<<"$final")" stop
		id=$(jq -r .output.snapshotId <<<"$final")
		agent-snap -m "$id" >/dev/null || fail "exit 0 but its row $id is missing"
		assert_equal "$(grep '^{"turnEnd"' <<<"$out" | jq -c .turnEnd.snapshotId)" "\"$id\""
		LAST=$id
		;;
	111)
		assert_equal "$(jq -r '[.output.finishReason, .output.error.status] | join(" ")' <<<"$final")" "failed INTERNAL"
		local msg
		msg=$(jq -r .output.error.message <<<"$final")
		[[ $msg == *"No space left on device"* ]] || fail "the message hides the cause: $msg"
		[[ $err == *"No space left on device"* ]] || fail "stderr hides the cause: $err"
		[[ $msg != *"Input/output error"* ]] || fail "EIO named: $msg"
		assert_equal "$(jq -r '.output.snapshotId // "none"' <<<"$final")" "${LAST:-none}"
		# The turnEnd claims no row (its usage is the turn's: the model
		# call was made), and the reserved row does not exist.
		assert_equal "$(grep '^{"turnEnd"' <<<"$out" | jq -c '.turnEnd | del(.usage)')" '{"finishReason":"failed"}'
		id=$(lost_id "$msg")
		[ -n "$id" ] || fail "no snapshot named in: $msg"
		run -4 agent-snap -m "$id"
		;;
	*) fail "exit $rc: $err" ;;
	esac
}

@test "a full disk: exit 0 exactly for the turns whose rows exist, 111 with the real cause for the others" {
	local n out err rc ok=0 failed=0 LAST=
	for n in $(seq 1 30); do
		rc=0
		out=$(input 64 "$n" | agent-run --model echo --session k 2>"$BATS_TEST_TMPDIR/err") || rc=$?
		err=$(cat "$BATS_TEST_TMPDIR/err")
		check_run "$rc" "$out" "$err"
		if [ "$rc" = 0 ]; then ok=$((ok + 1)); else failed=$((failed + 1)); fi
		[ "$failed" -lt 2 ] || break
	done
	echo "# full disk: $n runs of 64 KiB turns on 1 MiB, $ok exit 0 (rows), $failed exit 111" >&3
	[ "$ok" -gt 0 ] && [ "$failed" -eq 2 ] || fail "the disk did not fill: $ok ok, $failed failed"
	# Every row reads back whole: one per successful run, the chain intact.
	run -0 agent-snap log k
	assert_equal "${#lines[@]}" "$ok"
	for id in $(jq -r .snapshotId <<<"$output"); do
		agent-snap "$id" | jq -e '.state.messages | length > 0' >/dev/null || fail "row $id is torn"
	done
	assert_equal "$(agent-snap --session k | jq -r .snapshotId)" "$LAST"
	# A new session on the full disk: nothing committed, so no resume point.
	LAST=
	rc=0
	out=$(input 64 0 | agent-run --model echo --session fresh 2>"$BATS_TEST_TMPDIR/err") || rc=$?
	assert_equal "$rc" 111
	check_run "$rc" "$out" "$(cat "$BATS_TEST_TMPDIR/err")"
	run -4 agent-snap --session fresh
}

@test "a full disk: several turns in one run stop at the first failed commit" {
	local LAST= rc=0 out err named n
	out=$(for n in 1 2 3 4 5 6 7 8 9 10 11 12; do input 64 "$n"; done |
		agent-run --model echo --session multi 2>"$BATS_TEST_TMPDIR/err") || rc=$?
	err=$(cat "$BATS_TEST_TMPDIR/err")
	assert_equal "$rc" 111
	# Rows for the turns before the failure, none after it: the turnEnds
	# name exactly those rows, the last turnEnd is the failed one.
	named=$(grep '^{"turnEnd"' <<<"$out" | jq -r '.turnEnd.snapshotId // "failed"')
	echo "# one run of 12 turns: $(($(wc -l <<<"$named") - 1)) committed, then exit $rc" >&3
	assert_equal "$(tail -n 1 <<<"$named")" failed
	assert_equal "$(grep -c failed <<<"$named")" 1
	LAST=$(grep -v failed <<<"$named" | tail -n 1)
	check_run "$rc" "$(grep -v '"turnEnd":{"finishReason":"stop"' <<<"$out")" "$err"
	run -0 agent-snap log multi
	assert_equal "${#lines[@]}" "$(($(wc -l <<<"$named") - 1))"
}

@test "a full disk: a detached run whose work cannot be committed is finalized failed, the log names the cause" {
	local n id parent
	for n in $(seq 1 30); do
		input 64 "$n" | agent-run --model echo --session k >/dev/null 2>&1 || break
	done
	[ "$n" -lt 30 ] || fail "the disk did not fill"
	parent=$(agent-snap --session k | jq -r .snapshotId)
	# Room for the pending row and the log, not for the work.
	rm "$DISK/ballast"
	run -0 --separate-stderr agent-run --model echo --session k --detach < <(input 400 0)
	id=$(jq -r .output.snapshotId <<<"$output")
	assert_equal "$(jq -r .output.finishReason <<<"$output")" detached
	run -1 --separate-stderr agent-wait --timeout 20 "$id"
	assert_equal "$(jq -c '[.status, .finishReason, .error.status, .parentId == "'"$parent"'"]' <<<"$output")" \
		'["failed","failed","INTERNAL",true]'
	[[ $(jq -r .error.message <<<"$output") == *"No space left on device"* ]] || fail "row hides the cause: $output"
	# Its state is the parent's: the detached turn is not in it.
	assert_equal "$(agent-snap "$id" | jq -c .state.messages)" "$(agent-snap "$parent" | jq -c .state.messages)"
	run -0 agent-snap worker-log "$id"
	assert_output --partial "cannot finalize the row: cannot commit the detached work (snapshot '$id'): save snapshot: the store is full (No space left on device); the row is finalized failed with the state before the detach"
}

@test "a full disk: an import that does not fit exits 111 with the real cause, the store still reads" {
	local n
	for n in 1 2 3 4 5 6 7 8 9 10 11 12; do
		head -c 131072 /dev/zero | tr '\0' "$(printf '\\%03o' $((97 + n)))" |
			jq -Rc --arg n "$n" '{createdAt: "2026-01-01T00:00:00Z", sessionId: ("s" + $n),
				snapshotId: ("00000000-0000-4000-8000-0000000000" + ($n | if length < 2 then "0" + . else . end)),
				state: {messages: [{role: "user", content: [{text: .}]}], sessionId: ("s" + $n)},
				status: "completed", updatedAt: "2026-01-01T00:00:00Z"}'
	done >"$BATS_TEST_TMPDIR/rows.ndjson"
	run -111 --separate-stderr agent-snap import <"$BATS_TEST_TMPDIR/rows.ndjson"
	[[ $stderr == *"No space left on device"* ]] || fail "stderr hides the cause: $stderr"
	[[ $stderr != *"Input/output error"* ]] || fail "EIO named: $stderr"
	run -0 agent-snap sessions
}
