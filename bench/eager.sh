#!/usr/bin/env bash
# eager.sh - what eager intake (docs/detach.md "Eager intake") costs an
# attached turn, whole process, with the echo model and the store.
#
#   bench/eager.sh [BUILD [BASELINE]]
#
# BASELINE is another agent-run binary (say, one built before the change):
# each case then runs with both and prints both.  Cases:
#   echo_turn   echo '{"message":...}' | agent-run   (stdin at its end: no split)
#   m_turn      agent-run -m hi                      (no stdin read)
#   live_turn   one line from a writer that stays 20 ms longer (the split:
#               front, back, reader thread; the 20 ms are in both)
# Wall time with hyperfine when installed (200 runs, its shell's start
# subtracted), else a loop of 50; CPU time of the pipeline with perf stat
# when installed.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
bins=("$top/$build/bin/agent-run")
[ -z "${2:-}" ] || bins+=("$2")
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export AGENTKIT_STORE="$work/store"
cd "$work"
line='{"message":{"content":[{"text":"hi"}]}}'

case_cmd() {
	case $1 in
	echo_turn) echo "echo '$line' | $2 --model echo >/dev/null" ;;
	m_turn) echo "$2 --model echo -m hi </dev/null >/dev/null" ;;
	live_turn) echo "{ echo '$line'; sleep 0.02; } | $2 --model echo >/dev/null" ;;
	esac
}

mean_us() {
	local cmd=$1
	if command -v hyperfine >/dev/null 2>&1; then
		hyperfine --style none --warmup 10 --runs 200 --export-json "$work/h.json" "$cmd" \
			>/dev/null 2>&1
		jq -r '.results[0] | "mean \(.mean * 1e6 | floor) us, median \(.median * 1e6 | floor) us, sd \(.stddev * 1e6 | floor) us"' "$work/h.json"
	else
		local t0 t1
		t0=$(date +%s%N)
		for _ in $(seq 50); do bash -c "$cmd"; done
		t1=$(date +%s%N)
		echo "mean $(( (t1 - t0) / 50 / 1000 )) us (with the shell's start)"
	fi
}

# CPU time (task-clock) of the whole pipeline: on a shared machine wall
# time is mostly the wait for a core, CPU time is what the process costs.
cpu_ms() {
	printf '#!/bin/sh\n%s\n' "$1" >"$work/case.sh"
	chmod +x "$work/case.sh"
	perf stat -r 100 -x, -e task-clock "$work/case.sh" 2>&1 >/dev/null \
		| awk -F, '/task-clock/ { printf "cpu %.2f ms", $1 }'
}

for c in echo_turn m_turn live_turn; do
	for b in "${bins[@]}"; do
		label=$([ "$b" = "${bins[0]}" ] && echo this || echo baseline)
		cpu=""
		if command -v perf >/dev/null 2>&1; then
			cpu=", $(cpu_ms "$(case_cmd "$c" "$b")")"
		fi
		echo "$c $label $(mean_us "$(case_cmd "$c" "$b")")$cpu"
	done
done
