#!/usr/bin/env bash
# detach.sh - detached runs: abort latency, wake-up latency of agent-wait,
# CPU of idle waiters and workers (numbers for issue 6).
#
#   bench/detach.sh [BUILD]      (default build; ~1.5 minutes)
#   N=50 CPU_SECONDS=20 bench/detach.sh
#
# Prints "name value unit" lines:
#   abort_to_aborted_p50/p90/max   agent-abort returning -> the row's
#                                  finalize time (its updatedAt), with a
#                                  scripted model stream in flight
#   commit_to_wait_p50/p90/max     the worker's final commit (its log line
#                                  written when store_save returned) ->
#                                  a waiting agent-wait has exited (as its
#                                  parent shell sees it)
#   cpu_*                          CPU time (user+system) over CPU_SECONDS,
#                                  scaled to one minute
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init detach
build=${1:-build}
n=${N:-30}
cpu_seconds=${CPU_SECONDS:-60}
cd "$top"
make --no-print-directory -s BUILD="$build" "$build/bin/agent-run" "$build/bin/agent-wait" \
	"$build/bin/agent-abort" "$build/bin/agent-snap" >/dev/null
PATH="$top/$build/bin:$PATH"
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export AGENTKIT_STORE="$work/store"
cd "$work"

cat >slow.ndjson <<'EOF'
{"when": {"user": "stream"}, "chunks": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"], "delay": "500ms"}
{"when": {"user": "short"}, "chunks": ["done"], "delay": "300ms"}
{"when": {"user": "idle"}, "chunks": ["never"], "delay": "1h"}
EOF

# ns_of RFC3339 -> nanoseconds since the epoch
ns_of() { date -d "$1" +%s%N; }
# now in nanoseconds (bash's clock, no process)
now_ns() { local t=$EPOCHREALTIME; echo "${t/./}000"; }
launch() { agent-run --model script/slow.ndjson --heartbeat-interval "${2:-30s}" --detach -m "$1" | jq -r .output.snapshotId; }
beating() { [ "$(agent-snap -m "$1" | jq -r '.heartbeatAt != .createdAt')" = true ]; }
stats() {   # name what < values (ns) -> p50, p90, max in ms, and a row
	sort -n | awk -v name="$1" '{ v[NR] = $1 } END {
		p50 = v[int((NR + 1) * 0.5)]; p90 = v[int(NR * 0.9 + 0.5)]; max = v[NR]
		printf "%s_p50 %.2f ms\n%s_p90 %.2f ms\n%s_max %.2f ms\n", name, p50 / 1e6, name, p90 / 1e6, name, max / 1e6 }' \
		>"$work/stats"
	cat "$work/stats"
	bench_row "$2, p50" "$(awk -v n="$1_p50" '$1 == n { print $2 }' "$work/stats")" - ms - -
}

echo "## abort -> aborted, model stream in flight ($n runs)"
for i in $(seq "$n"); do
	id=$(launch stream 50ms)
	k=0
	until beating "$id"; do
		k=$((k + 1)); [ "$k" -lt 500 ] || bench_fail "run $i: no heartbeat in 10 s"
		sleep 0.02
	done
	sleep 0.1
	agent-abort "$id" >/dev/null
	t=$(now_ns)
	row=$(agent-wait "$id" || true)
	[ "$(jq -r .status <<<"$row")" = aborted ] || { echo "run $i: not aborted: $row" >&2; exit 1; }
	echo $(( $(ns_of "$(jq -r .updatedAt <<<"$row")") - t )) >>"$work/abort.ns"
done
stats abort_to_aborted "agent-abort -> row aborted, stream in flight" <"$work/abort.ns"

echo "## final commit -> agent-wait returns ($n runs)"
for i in $(seq "$n"); do
	id=$(launch short)
	agent-wait "$id" >row.json &
	pid=$!
	wait "$pid" || bench_fail "run $i: agent-wait failed: $(cat row.json)"
	t=$(now_ns)
	[ "$(jq -r .status row.json)" = completed ] || bench_fail "run $i: not completed: $(cat row.json)"
	# The commit is durable when store_save returns; the worker logs that
	# moment ("finalized ...") right after.
	# (agent-wait may return before that line is written: wait for it).
	k=0
	until fin=$(sed -n 's/^\([^ ]*\) .*finalized .*/\1/p' "$AGENTKIT_STORE/logs/$id.log") && [ -n "$fin" ]; do
		k=$((k + 1)); [ "$k" -lt 1000 ] || bench_fail "run $i: no 'finalized' line in 10 s"
		sleep 0.01
	done
	echo $(( t - $(ns_of "$fin") )) >>"$work/commit.ns"
done
stats commit_to_wait "final commit -> a waiting agent-wait exits" <"$work/commit.ns"

echo "## CPU over ${cpu_seconds}s, scaled to a minute"
tck=$(getconf CLK_TCK)
cpu_ms() { awk '{ print ($14 + $15) * 1000 / '"$tck"' }' "$1"; }
worker_pid() { sed -n '1s/.*agent-run\[\([0-9]*\)\].*/\1/p' "$AGENTKIT_STORE/logs/$1.log"; }
# The heartbeat thread: the worker's task that is not its main thread.
beat_tid() { ls "/proc/$1/task" | grep -vx "$1" | head -n 1; }
# Workers whose model waits an hour (polling for an abort every 20 ms, as
# the network providers do), beating every 30 s (the default) and every 1 s.
idle30=$(launch idle 30s)
idle1=$(launch idle 1s)
w30=$(worker_pid "$idle30")
w1=$(worker_pid "$idle1")
agent-wait "$idle30" >/dev/null 2>&1 &
waiter=$!
sleep 0.5
files=("/proc/$w30/stat" "/proc/$w30/task/$(beat_tid "$w30")/stat"
	"/proc/$w1/stat" "/proc/$w1/task/$(beat_tid "$w1")/stat" "/proc/$waiter/stat")
names=(cpu_worker_30s_beats cpu_worker_30s_beats_heartbeat_thread
	cpu_worker_1s_beats cpu_worker_1s_beats_heartbeat_thread cpu_waiting_agent_wait)
c0=()
for f in "${files[@]}"; do c0+=("$(cpu_ms "$f")"); done
sleep "$cpu_seconds"
for k in "${!files[@]}"; do
	awk -v n="${names[$k]}" -v a="${c0[$k]}" -v b="$(cpu_ms "${files[$k]}")" -v s="$cpu_seconds" \
		'BEGIN { printf "%s %.1f ms/min\n", n, (b - a) * 60 / s }'
done
agent-abort "$idle30" "$idle1" >/dev/null
wait "$waiter" || true
agent-wait "$idle1" >/dev/null || true
bench_done
