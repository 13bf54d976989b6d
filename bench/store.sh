#!/usr/bin/env bash
# store.sh - benchmarks of the LMDB snapshot store (numbers for issue 3).
#
#   bench/store.sh [BUILD]        (default build; ~1-2 minutes)
#
# Runs in a scratch directory under ${TMPDIR:-/tmp} on the same filesystem
# for the store and the raw-LMDB baseline; prints "name value unit" lines.
#   N=300 bench/store.sh          fewer turns (default 1000) and sessions
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init store
build=${1:-build}
n=${N:-1000}
cd "$top"
make --no-print-directory -s "$build/bin/agent-wait" "$build/bench/store/bench-store" BUILD="$build" >/dev/null
b="$top/$build/bench/store/bench-store"
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

o=$work/out
# run ARGS...: bench-store ARGS, its lines shown and kept in $o
run() { "$b" "$@" >"$o" || bench_fail "bench-store $1 failed"; cat "$o"; }
echo "## durable turn-end commits, one writer (sync commits)"
for k in $((n / 10)) $((n * 3 / 10)) "$n"; do
	run turns "$work/turns$k" "$k"
done
name=$(awk '$1 ~ /^turn_commits_per_s_/ { v = $1 } END { print v }' "$o")
bench_row "durable turn-end commits/s vs raw LMDB txn/s ($n turns)" "$(bench_pick "$o" "$name")" \
	"$(bench_pick "$o" "$name" 5)" 1/s - "raw LMDB (the same bytes)"
echo "## latest by session, in-process"
run latest "$work/latest" $((n * 100)) 10
bench_row "latest by session, metadata only" "$(bench_pick "$o" latest_metadata_only)" - us/op - -
echo "## metadata read, state size"
run meta "$work/meta"
echo "## bytes on disk, $n-turn session of ~3 KB turns"
run growth "$work/growth" "$n"
bench_row "store file / raw transcript ($n turns)" "$(bench_pick "$o" growth_ratio)" - x - -
echo "## agent-wait wake-up after a status commit (whole process)"
run wake "$work/wake" 40 "$top/$build/bin/agent-wait"
bench_row "wake a waiting agent-wait, p50" "$(bench_pick "$o" wake_latency_p50)" - ms - -
bench_done
