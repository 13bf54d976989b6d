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
#   N=200 bench/pg.sh               fewer turns (default 1000) and rows
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init pg
build=${1:-build}
n=${N:-1000}
cd "$top"
make --no-print-directory -s "$build/bin/agent-wait" "$build/bench/pg/bench-pg" BUILD="$build" >/dev/null
b="$top/$build/bench/pg/bench-pg"
url=${AGENTKIT_BENCH_PG_URL:-}
dir=
trap '[ -z "$dir" ] || scripts/pg-test-server stop "$dir"' EXIT
if [ -z "$url" ]; then
	if ! scripts/pg-test-server have; then
		echo "# pg.sh: no PostgreSQL server binaries (install postgresql): skipped"
		bench_done
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

o=$(mktemp "${TMPDIR:-/tmp}/agentkit-pgbench-out.XXXXXX")
trap '[ -z "$dir" ] || scripts/pg-test-server stop "$dir"; rm -f "$o"' EXIT
# run ARGS...: bench-pg ARGS, its lines shown and kept in $o
run() { "$b" "$@" >"$o" || bench_fail "bench-pg $1 failed"; cat "$o"; }
pg_v="PostgreSQL $(psql -V | awk '{ print $3 }')"
turns() { # N WRITERS
	local w=$2
	run turns "$(fresh "t$w")" "$1" "$w"
	[ "$(bench_pick "$o" "turn_commits_per_s_${w}w")" != 0 ] || bench_fail "no turns were timed ($1 turns, $w writers)"
	bench_row "durable turns/s vs raw libpq, $w writer(s)" "$(bench_pick "$o" "turn_commits_per_s_${w}w")" \
		"$(bench_pick "$o" "raw_libpq_commits_per_s_${w}w")" 1/s '>=0.7' "raw libpq ($pg_v)" \
		"$(awk -v p="$(bench_pick "$o" "store_vs_raw_${w}w")" 'BEGIN { printf "%.3f", p / 100 }')"
}
echo "## durable turn-end commits vs raw libpq BEGIN/INSERT/COMMIT of the same bytes"
turns "$n" 1
turns $((n < 200 ? 320 : n * 16 / 10)) 16
echo "## latest by session, $((n * 1000)) rows"
run latest "$(fresh 3)" $((n * 1000))
bench_row "latest by session, p50 ($((n * 1000)) rows)" "$(bench_pick "$o" latest_by_session_p50)" - us - -
echo "## bytes per turn, $n-turn session of ~3 KB turns"
run growth "$(fresh 4)" "$n"
echo "## wake-ups across processes (and connections)"
run wake "$(fresh 5)" 40 "$top/$build/bin/agent-wait"
bench_row "wake a waiting agent-wait, p50" "$(bench_pick "$o" wake_latency_p50)" - ms - -
bench_done
