#!/usr/bin/env bash
# kill-storm.sh SW DIR ROUNDS WRITERS: a kill storm among store writers,
# run as a plain script (outside bats, whose per-command tracing slows the
# loop enough to change what the kills hit).
#
# Each round: a new store DIR/rN with a counter, WRITERS processes doing 15
# read-modify-writes of it (store-worker incr), 2..WRITERS/2 of them
# SIGKILLed at once after 2-150 ms.  Every survivor must then finish
# within 60 s and the counter must hold every survivor's increments.
# Prints "ROUNDS rounds, K kills, H hung"; exits 1 when a survivor hung
# or an increment was lost.
set -u
sw=$1 dir=$2 rounds=$3 writers=$4
kills=0 hung=0 bad=0
for r in $(seq "$rounds"); do
	export AGENTKIT_STORE="$dir/r$r"
	"$sw" incr c 1 >/dev/null || exit 1
	pids=()
	for _ in $(seq "$writers"); do
		"$sw" incr c 15 >/dev/null 2>&1 &
		pids+=($!)
	done
	n=$((RANDOM % (writers / 2 - 1) + 2))
	vp=()
	for v in $(seq 0 $((writers - 1)) | shuf -n "$n"); do
		vp+=("${pids[$v]}")
		pids[v]=""
	done
	sleep "0.$(printf '%03d' $((RANDOM % 149 + 2)))"
	kill -9 "${vp[@]}" 2>/dev/null
	kills=$((kills + n))
	end=$((SECONDS + 60))
	for p in "${pids[@]}"; do
		[ -n "$p" ] || continue
		while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do
			sleep 0.05
		done
		if kill -0 "$p" 2>/dev/null; then
			echo "round $r: pid $p still running after 60 s ($(cat "/proc/$p/wchan" 2>/dev/null))" >&2
			kill -9 "$p"
			hung=$((hung + 1))
		elif ! wait "$p"; then
			echo "round $r: pid $p failed" >&2
			bad=$((bad + 1))
		fi
	done
	wait 2>/dev/null
	c=$("$sw" get c | jq .state.custom.n)
	if [ "$c" -lt $((1 + 15 * (writers - n))) ] || [ "$c" -gt $((1 + 15 * writers)) ]; then
		echo "round $r: counter $c after $n of $writers writers were killed" >&2
		bad=$((bad + 1))
	fi
done
echo "$rounds rounds, $kills kills, $hung hung"
[ "$hung" -eq 0 ] && [ "$bad" -eq 0 ]
