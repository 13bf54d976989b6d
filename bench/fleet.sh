#!/usr/bin/env bash
# fleet.sh - what one writer per session and the detached worker's lease
# cost (numbers for issue 25), on LMDB and on PostgreSQL.
#
#   bench/fleet.sh [BUILD]        (default build; ~20 seconds)
#
# handoff: a writer waiting on a busy session holds it this long after the
# holder released it (another process; the target is within 5 ms).
# beat: one heartbeat, the lease's renewal.  PostgreSQL: against
# AGENTKIT_BENCH_PG_URL when set, else a throwaway server with durable
# commits on a Unix socket (scripts/pg-test-server); skipped without one.
#   N=50 bench/fleet.sh           fewer hand-offs (default 200)
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
dir=
trap 'rm -rf "$tmp"; [ -z "$dir" ] || scripts/pg-test-server stop "$dir"' EXIT
o=$tmp/out
# run BACKEND ARGS...: bench-fleet ARGS, its lines shown (BACKEND_ first) and kept
run() { local p=$1; shift; "$b" "$@" | sed "s/^/${p}_/" >"$o" || bench_fail "bench-fleet $1 failed"; cat "$o"; }
rows() { # BACKEND NAME
	bench_row "$2: a waiting writer takes a released session, p50" \
		"$(bench_pick "$o" "$1_handoff_p50")" - us '<=5000' -
}
echo "## LMDB"
run lmdb handoff "$tmp/store" "$n"
rows lmdb LMDB
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
rows pg PostgreSQL
run pg beats "$url" $((n * 10))
bench_done
