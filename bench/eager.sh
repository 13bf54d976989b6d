#!/usr/bin/env bash
# eager.sh - what eager intake (docs/detach.md "Eager intake") costs an
# attached turn, whole process, with the echo model and the store.
#
#   bench/eager.sh [BUILD [BASELINE [RUNS]]]
#
# BASELINE is another agent-run binary (say, one built before the change):
# each case then runs it and this build's in turn, run after run (ABAB...),
# so both see the same load on a shared machine.  Cases:
#   echo_turn   echo '{"message":...}' | agent-run   (stdin at its end: no split)
#   m_turn      agent-run -m hi                      (no stdin read)
#   live_turn   one line from a writer that stays 20 ms longer (the split:
#               front, back, reader thread; the 20 ms are in both)
# Prints the median of RUNS (default 200) wall times of the whole pipeline
# (a /bin/sh script, the same for both), and the CPU time of a run (user +
# system, the shell's included).  Each case's output is checked once.  Interleaved rather than
# hyperfine's one command after the other: on 2 shared cores the load
# drifts more between two hyperfine batches than the cases differ.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init eager
build=${1:-build}
runs=${3:-${N:-200}}
bins=("$top/$build/bin/agent-run")
[ -z "${2:-}" ] || bins+=("$2")
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export AGENTKIT_STORE="$work/store"
cd "$work"
line='{"message":{"content":[{"text":"hi"}]}}'

# case NAME BIN: the case's script for BIN
case_script() {
	local f="$work/$1.$2.sh"
	case $1 in
	echo_turn) cmd="echo '$line' | \"$3\" --model echo" ;;
	m_turn) cmd="\"$3\" --model echo -m hi </dev/null" ;;
	live_turn) cmd="{ echo '$line'; sleep 0.02; } | \"$3\" --model echo" ;;
	esac
	printf '#!/bin/sh\n%s >"${OUT:-/dev/null}"\n' "$cmd" >"$f"
	chmod +x "$f"
	echo "$f"
}

# median FILE: the median of the microseconds in FILE
median() {
	sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

for c in echo_turn m_turn live_turn; do
	scripts=()
	for i in "${!bins[@]}"; do
		scripts+=("$(case_script "$c" "$i" "${bins[$i]}")")
		: >"$work/t.$i"
		: >"$work/cpu.$i"
	done
	for s in "${scripts[@]}"; do   # check the output, warm the caches and the store
		OUT=$work/out "$s" || bench_fail "$c: $s: exit status $?"
		grep -q '"finishReason":"stop"' "$work/out" || bench_fail "$c: $s: no finished turn: $(head -c 300 "$work/out")"
		"$s"
	done
	for _ in $(seq "$runs"); do
		for i in "${!scripts[@]}"; do
			t0=$(date +%s%N)
			"${scripts[$i]}" || bench_fail "$c: ${scripts[$i]}: exit status $?"
			t1=$(date +%s%N)
			echo $(( (t1 - t0) / 1000 )) >>"$work/t.$i"
		done
	done
	for i in "${!scripts[@]}"; do
		label=$([ "$i" = 0 ] && echo this || echo baseline)
		# CPU: a separate pass, 50 runs under bash's times.
		cpu=$( { time -p bash -c "for _ in \$(seq 50); do '${scripts[$i]}'; done" ; } 2>&1 \
			| awk '/^user/ { u = $2 } /^sys/ { s = $2 } END { printf "%.2f", (u + s) * 1000 / 50 }')
		med[$i]=$(median "$work/t.$i")
		echo "$c $label median ${med[$i]} us, cpu $cpu ms/run"
	done
	if [ "${#scripts[@]}" = 2 ]; then
		bench_row "$c, this build vs the baseline" "${med[0]}" "${med[1]}" us - "baseline ${bins[1]}"
	else
		bench_row "$c (a whole /bin/sh pipeline)" "${med[0]}" - us - -
	fi
done
bench_done
