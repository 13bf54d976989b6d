#!/usr/bin/env bats
# The store under stress: many processes at once, kill -9 inside writes,
# map growth and a full map.

load test_helper

setup() {
	common_setup
	SW="$AGENTKIT_BIN/../tests/helpers/store-worker"
	[ -x "$SW" ] || skip "store-worker not built"
}

# Every row of every session reads back whole, and deleting everything
# leaves no message node or reference count behind (the counts were right).
check_consistent() {
	local n
	run -0 --separate-stderr agent-snap export
	n=$(wc -l <<<"$output")
	run -0 --separate-stderr agent-snap sessions
	for sid in $(jq -r .sessionId <<<"$output"); do
		agent-snap rm "$sid" >/dev/null
	done
	run -0 mdb_stat -s msg "$AGENTKIT_STORE"
	assert_output --partial "Entries: 0"
	run -0 mdb_stat -s node "$AGENTKIT_STORE"
	assert_output --partial "Entries: 0"
	run -0 mdb_stat -s bysess "$AGENTKIT_STORE"
	assert_output --partial "Entries: 0"
}

@test "16 processes at once: no lost update, every row intact, readers never blocked" {
	requires xargs mdb_stat
	"$SW" incr counter 1 >/dev/null
	seq 16 | xargs -P 16 -I{} sh -c '
		"$0" incr counter 20 &&
		"$0" turn "s{}" "r{}-1" "" one >/dev/null &&
		"$0" turn "s{}" "r{}-2" "r{}-1" two >/dev/null &&
		"$0" turn "s{}" "r{}-3" "r{}-2" three >/dev/null &&
		agent-snap -m "r{}-1" >/dev/null && agent-snap sessions >/dev/null' "$SW"
	run -0 --separate-stderr "$SW" get counter
	assert_equal "$(jq .state.custom.n <<<"$output")" 321
	run -0 --separate-stderr agent-snap sessions
	assert_equal "$(grep -c '"snapshots":3' <<<"$output")" 16
	for k in 1 7 16; do   # (bats' run uses $i)
		run -0 --separate-stderr agent-snap --session "s$k"
		assert_equal "$(jq -c '[.snapshotId, (.state.messages | length)]' <<<"$output")" "[\"r$k-3\",6]"
	done
	check_consistent
}

@test "kill -9 inside writes leaves the store consistent and committed rows intact" {
	requires mdb_stat
	for round in 1 2 3 4 5; do
		"$SW" hammer "k$round" &
		pid=$!
		sleep "0.$((RANDOM % 3 + 1))"
		kill -9 "$pid"
		wait "$pid" 2>/dev/null || true
		# the chain of committed turns is whole: row i has 2*(i+1) messages
		run -0 --separate-stderr agent-snap log "k$round"
		rows=${#lines[@]}
		[ "$rows" -gt 0 ]
		run -0 --separate-stderr agent-snap --session "k$round"
		assert_equal "$(jq '.state.messages | length' <<<"$output")" $((2 * rows))
	done
	# a writer after the kills is not blocked by a dead one
	run -0 --separate-stderr "$SW" incr after 3
	check_consistent
}

@test "a small map grows instead of failing" {
	export AGENTKIT_STORE_MAPSIZE=64K
	big=$(printf 'x%.0s' $(seq 3000))
	for i in $(seq 60); do
		echo "{\"snapshotId\":\"g$i\",\"sessionId\":\"grow\",\"state\":{\"custom\":\"$big$i\"}}"
	done >rows.ndjson
	run -0 --separate-stderr agent-snap import <rows.ndjson
	assert_output '{"imported":60}'
	run -0 --separate-stderr agent-snap g60
	assert_equal "$(jq -r .state.custom <<<"$output")" "${big}60"
	[ "$(stat -c %s "$AGENTKIT_STORE/data.mdb")" -gt 65536 ]
	# from a pipe: the rows are spooled, and read again after the growth
	export AGENTKIT_STORE="$BATS_TEST_TMPDIR/piped"
	run -0 --separate-stderr bash -c 'cat rows.ndjson | agent-snap import'
	assert_output '{"imported":60}'
	run -0 --separate-stderr agent-snap export
	assert_equal "$(jq -r .state.custom <<<"$output" | sort | sha1sum)" \
		"$(jq -r .state.custom rows.ndjson | sort | sha1sum)"
	[ -z "$(ls -A "$AGENTKIT_STORE" | grep -vxE 'data.mdb|lock.mdb|wake|write.lock')" ]
}

@test "an exhausted map fails cleanly with 111 and keeps what was committed" {
	export AGENTKIT_STORE_MAPSIZE=64K AGENTKIT_STORE_MAPSIZE_MAX=256K
	echo '{"snapshotId":"before","sessionId":"full"}' | agent-snap import >/dev/null
	big=$(printf 'y%.0s' $(seq 4000))
	for i in $(seq 100); do
		echo "{\"snapshotId\":\"f$i\",\"sessionId\":\"full\",\"state\":{\"custom\":\"$big$i\"}}"
	done >rows.ndjson
	run -111 --separate-stderr agent-snap import <rows.ndjson
	assert_output ""
	assert_equal "$stderr" "agent-snap: import snapshots: the store is full (its map reached 262144 bytes)"
	run -4 agent-snap -m f1
	run -0 --separate-stderr agent-snap -m before
	# a single save that fits still works on the full-size map
	run -0 --separate-stderr "$SW" save small '{"sessionId":"full"}'
}
