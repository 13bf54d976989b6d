#!/usr/bin/env bash
# fleet.sh - what one writer per session and the detached worker's lease
# cost (numbers for issue 25), on LMDB and on PostgreSQL.
#
#   bench/fleet.sh [BUILD]        (default build; ~20 seconds)
#
# handoff: a writer waiting on a busy session holds it this long after the
# holder released it (another process; the target is within 5 ms).
# wake: a waiter in another process (agent-wait's loop) holds a row this
# long after the write that settled it committed; on PostgreSQL over TCP
# with scram-sha-256, as another host reaches it (the target is 10 ms).
# beat: one heartbeat, the lease's renewal.  PostgreSQL: against
# AGENTKIT_BENCH_PG_URL when set, else a throwaway server with durable
# commits on a Unix socket (scripts/pg-test-server); skipped without one.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
cd "$top"
make --no-print-directory -s "$build/bench/fleet/bench-fleet" BUILD="$build" >/dev/null
b="$top/$build/bench/fleet/bench-fleet"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-fleet.XXXXXX")
dir= tcpdir=
trap 'rm -rf "$tmp"; [ -z "$dir" ] || scripts/pg-test-server stop "$dir"
	[ -z "$tcpdir" ] || scripts/pg-test-server stop "$tcpdir"' EXIT
echo "## LMDB"
"$b" handoff "$tmp/store" 200 | sed 's/^/lmdb_/'
"$b" wake "$tmp/store" 200 | sed 's/^/lmdb_/'
"$b" beats "$tmp/store" 2000 | sed 's/^/lmdb_/'
url=${AGENTKIT_BENCH_PG_URL:-}
if [ -z "$url" ]; then
	if ! scripts/pg-test-server have; then
		echo "# fleet.sh: no PostgreSQL server binaries (install postgresql): PostgreSQL skipped"
		exit 0
	fi
	dir="$tmp/pg"
	url=$(scripts/pg-test-server start "$dir" --durable)
fi
echo "## PostgreSQL"
"$b" handoff "$url" 200 | sed 's/^/pg_/'
"$b" beats "$url" 2000 | sed 's/^/pg_/'
if [ -z "${AGENTKIT_BENCH_PG_URL:-}" ]; then
	tcpdir="$tmp/pg-tcp"
	url=$(scripts/pg-test-server start "$tcpdir" --tcp 127.0.0.1)
fi
"$b" wake "$url" 200 | sed 's/^/pg_tcp_/'
