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

# old_entries DIR: the test's store as an agentkit before the listing
# entries made it: every table, but recent's values are the latest
# snapshotId alone and recentof has no mark (key "\1").
old_entries() {
	local db
	mkdir -m 700 "$1"
	for db in meta state msg node bysess sess wlog queue recent recentof; do
		mdb_dump -s "$db" "$AGENTKIT_STORE" | python3 -c '
import sys
db, out, data = sys.argv[1], [], False
lines = sys.stdin.read().split("\n")
i = 0
while i < len(lines):
    l = lines[i]
    if data and l.startswith(" "):
        k, v = l, lines[i + 1]
        i += 2
        if db == "recentof" and k == " 01":
            continue
        if db == "recent":
            b = bytes.fromhex(v[1:])
            assert b[0] == 1, "a recent value without its entry"
            v = " " + b[2:2 + b[1]].hex()
        out += [k, v]
        continue
    data = data or l == "HEADER=END"
    out.append(l)
    i += 1
print("\n".join(out), end="")' "$db" >"$db.dump"
		mdb_load -s "$db" -f "$db.dump" "$1" 2>/dev/null
	done
	chmod 600 "$1"/*
}

# recent_values DIR: the first byte of each of recent's values, in hex
# (01: an entry with its listing line; else a snapshotId's first letter).
recent_values() { mdb_dump -s recent "$1" | sed -n '/HEADER=END/,$p' | sed -n '3~2p' | cut -c2-3 | sort -u | tr '\n' ' '; }

# read_only MAKE: MAKE "$MNT/old" on a tmpfs at $MNT, then the tmpfs
# remounted read-only (the test skips where it cannot be).
read_only() {
	[ "$(id -u)" = 0 ] || skip "needs root to mount a tmpfs"
	MNT="$BATS_TEST_TMPDIR/mnt"
	mkdir "$MNT"
	mount -t tmpfs -o size=8m,mode=0700 tmpfs "$MNT" 2>/dev/null || { MNT=""; skip "cannot mount a tmpfs here"; }
	"$1" "$MNT/old"
	mount -o remount,ro "$MNT" || skip "cannot remount the tmpfs read-only"
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
	# recentof holds the mark that every entry has its listing entry
	assert_equal "$(entries old recent) $(entries old recentof)" "5 6"
	# then kept by every write: a turn moves its session first
	"$SW" --store old turn s-b n1 aborted-1 hello >/dev/null
	run -0 --separate-stderr agent-snap --store old sessions --limit 2
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .snapshots]' <<<"$output" | tr '\n' ' ')" '["s-b","n1",3] ["s-c","interrupted-1",2] '
	assert_equal "$(entries old recent)" 5
	# and the new store lists as the old one did
	run -0 --separate-stderr agent-snap sessions --format ndjson
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .snapshots]' <<<"$output" | tr '\n' ' ')" "$WANT"
}

@test "an index whose entries an older agentkit made is made again at a read-write open" {
	old_entries old
	assert_equal "$(recent_values old)" "$(printf '%s ' 61 65 69 6e 74)"
	assert_equal "$(entries old recentof)" 5
	run -0 --separate-stderr agent-snap --store old sessions --format ndjson
	assert_equal "$stderr" ""
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .snapshots]' <<<"$output" | tr '\n' ' ')" "$WANT"
	assert_equal "$(recent_values old)" "01 "
	assert_equal "$(entries old recentof)" 6
	# the same lines, byte for byte, as the store that always had them
	run -0 agent-snap sessions --format ndjson
	want=$output
	run -0 agent-snap --store old sessions --format ndjson
	assert_equal "$output" "$want"
}

@test "an older store opened read-only lists in the same order, by sorting" {
	read_only old_store
	run -0 --separate-stderr agent-snap --store "$MNT/old" sessions --format ndjson
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .snapshots]' <<<"$output" | tr '\n' ' ')" "$WANT"
	run -0 --separate-stderr agent-snap --store "$MNT/old" sessions --limit 2 --since 2026-01-02T00:00:00Z
	assert_equal "$(jq -r .sessionId <<<"$output" | tr '\n' ' ')" "s-c t "
	assert_equal "$(tables "$MNT/old")" "bysess meta msg node queue sess state wlog "
	umount "$MNT"
	MNT=""
}

@test "an index whose entries an older agentkit made, opened read-only, lists from the rows" {
	read_only old_entries
	run -0 agent-snap sessions --format ndjson
	want=$output
	run -0 --separate-stderr agent-snap --store "$MNT/old" sessions --format ndjson
	assert_equal "$stderr" ""
	assert_equal "$output" "$want"
	run -0 --separate-stderr agent-snap --store "$MNT/old" sessions --limit 2 --agent tasks
	assert_equal "$(jq -r .sessionId <<<"$output" | tr '\n' ' ')" "$(jq -r 'select(.agent == "tasks") | .sessionId' <<<"$want" | head -2 | tr '\n' ' ')"
	assert_equal "$(recent_values "$MNT/old")" "$(printf '%s ' 61 65 69 6e 74)"
	umount "$MNT"
	MNT=""
}

teardown() {
	if [ -n "${MNT:-}" ]; then umount "$MNT" 2>/dev/null || true; fi
}
