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
#
# Whole processes, medians of interleaved pairs (bench/abtime): a durable
# echo turn against a process that loads libpq, connects and inserts the
# same bytes (bench-pg insert1); turn 1,000 of a session against turn 1
# (wall time, and the client's instructions under valgrind); the export
# of an N/4-turn session against LMDB's export of the same rows;
# agent-snap sessions over 20*N one-turn sessions, per session.  The
# sessions are made with synchronous_commit off (not timed).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init pg
build=${1:-build}
n=${N:-1000}
cd "$top"
make --no-print-directory -s "$build/bin/agent-wait" "$build/bin/agent-run" "$build/bin/agent-snap" \
	"$build/bench/pg/bench-pg" BUILD="$build" >/dev/null
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
bin="$top/$build/bin"
inv() { awk -v r="$1" 'BEGIN { printf "%.3f", 1 / r }'; }
# a 1,450-byte word that does not compress: a message of a turn's size
word=$(head -c 1100 /dev/urandom | base64 -w 0 | head -c 1450)
echo "## one durable echo turn as a whole process vs a raw libpq process (the same bytes)"
u=$(fresh p1)
bench_expect '"finishReason":"stop"' "$bin/agent-run" --store "$u" --model echo -m "$word"
bench_expect '' "$b" insert1 "$u"
bench_pairs 20 "$bin/agent-run --store $u --model echo -m $word" "$b insert1 $u"
echo "durable_turn_process ${bench_t[0]} us; raw_libpq_process ${bench_t[1]} us"
bench_row "durable echo turn process vs raw libpq process" "${bench_t[0]}" "${bench_t[1]}" us \
	'>=0.7' "raw libpq ($pg_v)" "$(inv "${bench_r[1]}")"
echo "## turn 1,000 of a session vs turn 1 (echo model: O(new) reads and writes)"
u=$(fresh p2)
for ((i = 0; i < 1000; i++)); do
	"$bin/agent-run" --store "$u%20-csynchronous_commit%3Doff" --model echo --session long -m "$word" >/dev/null ||
		bench_fail "agent-run turn $i of the long session failed"
done
bench_expect '"finishReason":"stop"' "$bin/agent-run" --store "$u" --model echo --session long -m "$word"
bench_pairs 20 "$bin/agent-run --store $u --model echo --session long -m $word" \
	"$bin/agent-run --store $u --model echo -m $word"
echo "turn_1000 ${bench_t[0]} us; turn_1 ${bench_t[1]} us"
bench_row "echo turn 1,000 vs turn 1 (PostgreSQL, wall)" "${bench_t[0]}" "${bench_t[1]}" us \
	'<=1.5' "turn 1" "${bench_r[1]}"
if command -v valgrind >/dev/null; then
	insn() { # CMD...: the client's instructions
		local rc=0
		valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" >/dev/null 2>"$o.vg" || rc=$?
		[ "$rc" = 0 ] || bench_fail "$* under valgrind: exit status $rc: $(tail -n 3 "$o.vg")"
		sed -n 's/.*Collected : *//p' "$o.vg" | grep . || bench_fail "no instruction count from valgrind"
	}
	i1000=$(insn "$bin/agent-run" --store "$u" --model echo --session long -m "$word")
	i1=$(insn "$bin/agent-run" --store "$u" --model echo -m "$word")
	rm -f "$o.vg"
	echo "turn_1000_instructions $i1000; turn_1_instructions $i1"
	bench_row "echo turn 1,000 vs turn 1 (PostgreSQL, instructions)" "$i1000" "$i1" insn '<=1.5' "turn 1"
fi
echo "## export of a $((n / 4))-turn session vs LMDB's, the same bytes"
u=$(fresh p3)
for ((i = 0; i < n / 4; i++)); do
	"$bin/agent-run" --store "$u%20-csynchronous_commit%3Doff" --model echo --session ex -m "$word" >/dev/null ||
		bench_fail "agent-run turn $i of the exported session failed"
done
lm=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-pgbench-lmdb.XXXXXX")
trap '[ -z "$dir" ] || scripts/pg-test-server stop "$dir"; rm -rf "$o" "$lm"' EXIT
"$bin/agent-snap" --store "$u" export ex >"$o" || bench_fail "export from PostgreSQL failed"
[ "$(wc -l <"$o")" = $((n / 4)) ] || bench_fail "export gave $(wc -l <"$o") rows, not $((n / 4))"
bytes=$(wc -c <"$o")
"$bin/agent-snap" --store "$lm/s" import <"$o" >/dev/null || bench_fail "import into LMDB failed"
"$bin/agent-snap" --store "$lm/s" export ex | cmp -s - "$o" || bench_fail "the two exports differ"
bench_pairs 5 "$bin/agent-snap --store $u export ex" "$bin/agent-snap --store $lm/s export ex"
echo "export_pg ${bench_t[0]} us; export_lmdb ${bench_t[1]} us ($bytes bytes)"
bench_row "export a $((n / 4))-turn session ($((bytes / 1048576)) MiB) vs LMDB" "${bench_t[0]}" \
	"${bench_t[1]}" us '<=2' "LMDB" "${bench_r[1]}"
echo "## sessions newest first, $((n * 20)) sessions"
u=$(fresh ls)
bench_session_rows $((n * 20)) >"$o.rows"
bench_expect "{\"imported\":$((n * 20))}" "$bin/agent-snap" --store "$u%20-csynchronous_commit%3Doff" \
	import "$o.rows"
rm -f "$o.rows"
bench_expect '"sessionId":"s-' "$bin/agent-snap" --store "$u" sessions --format ndjson
[ "$(wc -l <"$bench_out")" = $((n * 20)) ] || bench_fail "sessions printed $(wc -l <"$bench_out") lines"
awk -F '"updatedAt":"' '{ split($2, a, "\""); if (NR > 1 && a[1] > last) bad = 1; last = a[1] }
	END { exit bad }' "$bench_out" || bench_fail "sessions: not newest first"
bench_pairs 7 "$bin/agent-snap --store $u sessions --format ndjson"
bench_row "sessions, per session ($((n * 20)) sessions, PostgreSQL)" \
	"$(awk -v t="${bench_t[0]}" -v k=$((n * 20)) 'BEGIN { printf "%.3f", t / k }')" - us '<=5' -
echo "## latest by session, $((n * 1000)) rows"
run latest "$(fresh 3)" $((n * 1000))
bench_row "latest by session, p50 ($((n * 1000)) rows)" "$(bench_pick "$o" latest_by_session_p50)" - us - -
echo "## bytes per turn, $n-turn session of ~3 KB turns"
run growth "$(fresh 4)" "$n"
echo "## wake-ups across processes (and connections)"
run wake "$(fresh 5)" 40 "$top/$build/bin/agent-wait"
bench_row "wake a waiting agent-wait, p50" "$(bench_pick "$o" wake_latency_p50)" - ms - -
bench_done
