#!/usr/bin/env bash
# store.sh - benchmarks of the LMDB snapshot store (numbers for issue 3).
#
#   bench/store.sh [BUILD]        (default build; ~1-2 minutes)
#
# Runs in a scratch directory under ${TMPDIR:-/tmp} on the same filesystem
# for the store and the raw-LMDB baseline; prints "name value unit" lines.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
cd "$top"
make --no-print-directory -s "$build/bin/agent-wait" "$build/bench/store/bench-store" BUILD="$build" >/dev/null
b="$top/$build/bench/store/bench-store"
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "## durable turn-end commits, one writer (sync commits)"
for n in 100 300 1000; do
	"$b" turns "$work/turns$n" "$n"
done
echo "## latest by session, in-process"
"$b" latest "$work/latest" 100000 10
echo "## metadata read, state size"
"$b" meta "$work/meta"
echo "## bytes on disk, 1,000-turn session of ~3 KB turns"
"$b" growth "$work/growth" 1000
echo "## agent-wait wake-up after a status commit (whole process)"
"$b" wake "$work/wake" 40 "$top/$build/bin/agent-wait"
