#!/usr/bin/env bash
# queue.sh - the work queue (docs/queue.md): what an enqueue costs against
# a durable turn, how soon a run is taken again after its worker's kill -9,
# runs per second through agent-worker, and (PostgreSQL) claims per second
# with 8 workers against a raw FOR UPDATE SKIP LOCKED loop on the same
# table shape.
#
#   bench/queue.sh [BUILD]       (default build; ~1 minute)
#   N=100 bench/queue.sh         runs per measure (default 200)
#
# The PostgreSQL part uses AGENTKIT_BENCH_PG_URL when set, else a
# throwaway durable server (scripts/pg-test-server); without the server
# binaries it is skipped.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init queue
build=${1:-build}
n=${N:-200}
cd "$top"
make --no-print-directory -s BUILD="$build" "$build/bin/agent-run" "$build/bin/agent-worker" \
	"$build/bin/agent-snap" "$build/bin/agent-wait" "$build/bench/pg/bench-pg" >/dev/null
bin="$top/$build/bin"
PATH="$bin:$PATH"
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench.XXXXXX")
pgdir=
trap '[ -z "$pgdir" ] || "$top/scripts/pg-test-server" stop "$pgdir"; rm -rf "$work"' EXIT
export AGENTKIT_STORE="$work/store"
cd "$work"

echo "## an enqueue vs a durable echo turn (LMDB, whole process)"
bench_expect '"finishReason":"detached"' agent-run --model echo --queue q -m hi
bench_pairs "$((n / 4 + 1))" "$bin/agent-run --model echo --queue q -m hi" "$bin/agent-run --model echo -m hi"
echo "enqueue_us ${bench_t[0]} us"
echo "durable_turn_us ${bench_t[1]} us"
bench_row "enqueue vs a durable turn" "${bench_t[0]}" "${bench_t[1]}" us '<=1.2' \
	"agent-run durable echo turn" "${bench_r[1]}"

echo "## $n echo runs through agent-worker --concurrency 8 (LMDB)"
rm -rf "$AGENTKIT_STORE"
for i in $(seq "$n"); do
	agent-run --model echo --queue q -m "run $i" >/dev/null
done
t0=$EPOCHREALTIME
agent-worker --queue q --once --concurrency 8 2>"$work/w.log"
t1=$EPOCHREALTIME
done_n=$(agent-snap sessions --format ndjson | jq -r .status | grep -c completed || true)
[ "$done_n" = "$n" ] || bench_fail "$done_n of $n runs completed"
rate=$(awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN { printf "%.0f", n / (b - a) }')
echo "runs_per_s_8 $rate 1/s"
bench_row "echo runs/s, one worker --concurrency 8 (LMDB)" "$rate" - 1/s - -

echo "## pickup after kill -9 of the worker (LMDB, heartbeat timeout 2s)"
printf '%s\n' '{"fallback": true, "chunks": ["a", "b", "c", "d"], "delay": "1s"}' >slow.ndjson
export AGENTKIT_HEARTBEAT_INTERVAL=200ms AGENTKIT_HEARTBEAT_TIMEOUT=2s
: >pickups
for r in 1 2 3 4 5; do
	id=$(agent-run --model script/slow.ndjson --queue p -m slow | jq -r .output.snapshotId)
	agent-worker --queue p 2>/dev/null &
	a=$!
	for _ in $(seq 100); do
		[ "$(agent-snap runs | jq -r 'select(.queue == "p") | .status')" = running ] && break
		sleep 0.05
	done
	child=$(pgrep -P "$a" -f 'agent-run --claimed' | head -1)
	agent-worker --queue p 2>/dev/null &
	b=$!
	killed=$EPOCHREALTIME
	kill -9 "$child" "$a"
	wait "$a" 2>/dev/null || true
	for _ in $(seq 200); do
		[ "$(agent-snap runs | jq -r 'select(.queue == "p") | .attempt')" = 2 ] && break
		sleep 0.02
	done
	taken=$EPOCHREALTIME
	kill "$b"
	wait "$b" 2>/dev/null || true
	pkill -9 -f "agent-run --claimed $id" 2>/dev/null || true
	awk -v a="$killed" -v b="$taken" 'BEGIN { printf "%.0f\n", (b - a) * 1000 }' >>pickups
done
pick=$(sort -n pickups | sed -n 3p)
echo "pickup_after_kill_p50 $pick ms"
bench_row "pickup after kill -9 (lease 2000 ms + 1 s)" "$pick" 3000 ms '<=1' "the lease timeout + 1 s"

echo "## agent-abort of a claimed run -> the row aborted (LMDB)"
: >aborts
agent-worker --queue p 2>/dev/null &
a=$!
for r in 1 2 3 4 5 6 7; do
	id=$(agent-run --model script/slow.ndjson --queue p -m slow | jq -r .output.snapshotId)
	for _ in $(seq 200); do
		[ "$(agent-snap runs | jq -r --arg id "$id" 'select(.snapshotId == $id) | .status')" = running ] && break
		sleep 0.02
	done
	t0=$EPOCHREALTIME
	agent-abort --wait --timeout 10s "$id" >abort.out || bench_fail "abort $r did not settle"
	t1=$EPOCHREALTIME
	[ "$(jq -r .status abort.out)" = aborted ] || bench_fail "abort $r: $(cat abort.out)"
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", (b - a) * 1000 }' >>aborts
done
kill "$a"
wait "$a" 2>/dev/null || true
ab=$(sort -n aborts | sed -n 4p)
echo "abort_claimed_p50 $ab ms"
bench_row "abort of a claimed run, p50 (agent-abort --wait)" "$ab" 100 ms '<=1' "the goal, 100 ms"
unset AGENTKIT_HEARTBEAT_INTERVAL AGENTKIT_HEARTBEAT_TIMEOUT

echo "## claims/s, 8 workers, vs a raw FOR UPDATE SKIP LOCKED loop (PostgreSQL)"
url=${AGENTKIT_BENCH_PG_URL:-}
if [ -z "$url" ] && ! "$top/scripts/pg-test-server" have; then
	echo "# queue.sh: no PostgreSQL server binaries: the claims row is skipped"
	bench_done
	exit 0
fi
if [ -z "$url" ]; then
	pgdir=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-pgbench.XXXXXX")
	url=$(cd / && "$top/scripts/pg-test-server" start "$pgdir" --durable)
fi
schema="bench_q_$$"
(cd / && psql "$url" -qAtX -c "CREATE SCHEMA $schema") >/dev/null
sep='?'
[[ $url == *'?'* ]] && sep='&'
"$top/$build/bench/pg/bench-pg" claims "$url${sep}options=-csearch_path%3D$schema" "$n" 8 >out ||
	bench_fail "bench-pg claims failed"
cat out
pg_v="PostgreSQL $(cd / && psql -V | awk '{ print $3 }')"
bench_row "claims/s, 8 workers, vs raw SKIP LOCKED" "$(bench_pick out claims_per_s_8w)" \
	"$(bench_pick out raw_claims_per_s_8w)" 1/s '>=0.5' "raw libpq SKIP LOCKED ($pg_v)" \
	"$(awk -v p="$(bench_pick out claims_vs_raw_8w)" 'BEGIN { printf "%.3f", p / 100 }')"
bench_done
