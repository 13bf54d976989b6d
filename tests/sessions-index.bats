#!/usr/bin/env bats
# The LMDB store's index of sessions newest first (the recent and recentof
# tables, docs/store.md "Listing sessions"): a store made before it gains
# it at its first read-write open, built once from its rows; a read-only
# open of such a store lists by sorting, in the same order.  PostgreSQL's
# step 5 has its tests in store-pg.bats.

load test_helper

setup() {
	common_setup
	requires mdb_dump mdb_load mdb_stat
	agent-snap import <"$FIXTURES/store/rows.ndjson" >/dev/null
	printf '%s\n' '{"snapshotId":"t-1","sessionId":"t","createdAt":"2026-01-03T00:01:00Z","updatedAt":"2026-01-03T00:01:00Z"}' |
		agent-snap import >/dev/null
	SW="$AGENTKIT_BIN/../tests/helpers/store-worker"
	# t ties s-c's time: by session ID
	WANT='["s-c","interrupted-1",2] ["t","t-1",1] ["s-b","aborted-1",2] ["s-a","empty-status",2] ["s-d","no-beat",3] '
}

# old_store DIR: the test's store as an agentkit before the index made it:
# the same tables but recent and recentof (LMDB's own dump and load).
old_store() {
	local db
	mkdir -m 700 "$1"
	for db in meta state msg node bysess sess wlog queue; do
		mdb_dump -s "$db" "$AGENTKIT_STORE" >"$db.dump"
		mdb_load -s "$db" -f "$db.dump" "$1" 2>/dev/null
	done
	chmod 600 "$1"/*
}

# tables DIR: the store's named tables, one line.
tables() { mdb_stat -a "$1" | sed -n 's/^Status of //p' | grep -v 'Main DB' | tr '\n' ' '; }

# entries DIR TABLE: how many entries the table holds.
entries() { mdb_stat -s "$2" "$1" | sed -n 's/^ *Entries: //p'; }

@test "an older store gains the index at its first read-write open, built from its rows" {
	old_store old
	assert_equal "$(tables old)" "bysess meta msg node queue sess state wlog "
	run -0 --separate-stderr agent-snap --store old sessions --format ndjson
	assert_equal "$stderr" ""
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .snapshots]' <<<"$output" | tr '\n' ' ')" "$WANT"
	assert_equal "$(tables old)" "bysess meta msg node queue recent recentof sess state wlog "
	assert_equal "$(entries old recent) $(entries old recentof)" "5 5"
	# then kept by every write: a turn moves its session first
	"$SW" --store old turn s-b n1 aborted-1 hello >/dev/null
	run -0 --separate-stderr agent-snap --store old sessions --limit 2
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .snapshots]' <<<"$output" | tr '\n' ' ')" '["s-b","n1",3] ["s-c","interrupted-1",2] '
	assert_equal "$(entries old recent)" 5
	# and the new store lists as the old one did
	run -0 --separate-stderr agent-snap sessions --format ndjson
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .snapshots]' <<<"$output" | tr '\n' ' ')" "$WANT"
}

@test "an older store opened read-only lists in the same order, by sorting" {
	[ "$(id -u)" = 0 ] || skip "needs root to mount a tmpfs"
	MNT="$BATS_TEST_TMPDIR/mnt"
	mkdir "$MNT"
	mount -t tmpfs -o size=8m,mode=0700 tmpfs "$MNT" 2>/dev/null || { MNT=""; skip "cannot mount a tmpfs here"; }
	old_store "$MNT/old"
	mount -o remount,ro "$MNT" || skip "cannot remount the tmpfs read-only"
	run -0 --separate-stderr agent-snap --store "$MNT/old" sessions --format ndjson
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .snapshots]' <<<"$output" | tr '\n' ' ')" "$WANT"
	run -0 --separate-stderr agent-snap --store "$MNT/old" sessions --limit 2 --since 2026-01-02T00:00:00Z
	assert_equal "$(jq -r .sessionId <<<"$output" | tr '\n' ' ')" "s-c t "
	assert_equal "$(tables "$MNT/old")" "bysess meta msg node queue sess state wlog "
	umount "$MNT"
	MNT=""
}

teardown() {
	if [ -n "${MNT:-}" ]; then umount "$MNT" 2>/dev/null || true; fi
}
