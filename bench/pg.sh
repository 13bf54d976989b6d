#!/usr/bin/env bash
# pg.sh - benchmarks of the PostgreSQL snapshot store (numbers for issue 13).
#
#   bench/pg.sh [BUILD]        (default build; ~1 minute)
#
# Against AGENTKIT_BENCH_PG_URL when set, else a throwaway server with
# PostgreSQL's durable defaults (fsync, synchronous_commit) that
# scripts/pg-test-server starts on a Unix socket under ${TMPDIR:-/tmp} and
# removes at the end.  Each mode runs on a fresh schema of its own.
# Prints "name value unit" lines; skipped (exit 0) without the server.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
cd "$top"
make --no-print-directory -s "$build/bin/agent-wait" "$build/bench/pg/bench-pg" BUILD="$build" >/dev/null
b="$top/$build/bench/pg/bench-pg"
url=${AGENTKIT_BENCH_PG_URL:-}
dir=
trap '[ -z "$dir" ] || scripts/pg-test-server stop "$dir"' EXIT
if [ -z "$url" ]; then
	if ! scripts/pg-test-server have; then
		echo "# pg.sh: no PostgreSQL server binaries (install postgresql): skipped"
		exit 0
	fi
	dir=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-pgbench.XXXXXX")
	url=$(scripts/pg-test-server start "$dir" --durable)
fi
# fresh N: a URL whose search_path is a new schema
fresh() {
	local schema="bench_$$_$1" sep='?'
	psql "$url" -qAtX -c "CREATE SCHEMA $schema" >/dev/null
	[[ $url == *'?'* ]] && sep='&'
	echo "$url${sep}options=-csearch_path%3D$schema"
}

echo "## durable turn-end commits vs raw libpq BEGIN/INSERT/COMMIT of the same bytes"
"$b" turns "$(fresh 1)" 1000 1
"$b" turns "$(fresh 2)" 1600 16
echo "## latest by session, 1M rows"
"$b" latest "$(fresh 3)" 1000000
echo "## bytes per turn, 1,000-turn session of ~3 KB turns"
"$b" growth "$(fresh 4)" 1000
echo "## wake-ups across processes (and connections)"
"$b" wake "$(fresh 5)" 40 "$top/$build/bin/agent-wait"
