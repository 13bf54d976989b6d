#!/usr/bin/env bash
# fleet.sh - what one writer per session and the detached worker's lease
# cost (numbers for issue 25), on LMDB and on PostgreSQL.
#
#   bench/fleet.sh [BUILD]        (default build; ~40 seconds)
#
# handoff: a writer waiting on a busy session holds it this long after the
# holder released it (another process; the target is within 5 ms).
# wake: a waiter in another process (agent-wait's loop) holds a row this
# long after the write that settled it committed; on PostgreSQL over TCP
# with scram-sha-256, as another host reaches it (the target is 10 ms).
# beat: one heartbeat, the lease's renewal.  PostgreSQL: against
# AGENTKIT_BENCH_PG_URL when set, else throwaway servers with durable
# commits on a Unix socket, and on TCP (scripts/pg-test-server); skipped
# without one.
#   N=50 bench/fleet.sh           fewer hand-offs and wake-ups (default 200)
set -eu -o pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init fleet
build=${1:-build}
n=${N:-200}
cd "$top"
make --no-print-directory -s "$build/bench/fleet/bench-fleet" BUILD="$build" >/dev/null
b="$top/$build/bench/fleet/bench-fleet"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-fleet.XXXXXX")
dir= tcpdir=
trap 'rm -rf "$tmp"; [ -z "$dir" ] || scripts/pg-test-server stop "$dir"
	[ -z "$tcpdir" ] || scripts/pg-test-server stop "$tcpdir"' EXIT
o=$tmp/out
# run BACKEND ARGS...: bench-fleet ARGS, its lines shown (BACKEND_ first) and kept
run() { local p=$1; shift; "$b" "$@" | sed "s/^/${p}_/" >"$o" || bench_fail "bench-fleet $1 failed"; cat "$o"; }
# row BACKEND NAME MEASURE TEXT GOAL_US: a p50 of the last run as a row
row() {
	bench_row "$2: $4, p50" "$(bench_pick "$o" "$1_$3_p50")" - us "<=$5" -
}
echo "## LMDB"
run lmdb handoff "$tmp/store" "$n"
row lmdb LMDB handoff "a waiting writer takes a released session" 5000
run lmdb wake "$tmp/store" "$n"
row lmdb LMDB wake "a waiter wakes after a finalize" 10000
run lmdb beats "$tmp/store" $((n * 10))
url=${AGENTKIT_BENCH_PG_URL:-}
if [ -z "$url" ]; then
	if ! scripts/pg-test-server have; then
		echo "# fleet.sh: no PostgreSQL server binaries (install postgresql): PostgreSQL skipped"
		bench_done
		exit 0
	fi
	dir="$tmp/pg"
	url=$(scripts/pg-test-server start "$dir" --durable)
fi
echo "## PostgreSQL"
run pg handoff "$url" "$n"
row pg PostgreSQL handoff "a waiting writer takes a released session" 5000
run pg beats "$url" $((n * 10))
if [ -z "${AGENTKIT_BENCH_PG_URL:-}" ]; then
	tcpdir="$tmp/pg-tcp"
	url=$(scripts/pg-test-server start "$tcpdir" --tcp 127.0.0.1)
fi
run pg_tcp wake "$url" "$n"
row pg_tcp "PostgreSQL over TCP" wake "a waiter on another connection wakes after a finalize" 10000
bench_done
