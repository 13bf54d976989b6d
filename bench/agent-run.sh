#!/usr/bin/env bash
# agent-run.sh - whole-process costs of agent-run with the echo model and
# the store (numbers for issue 4).
#
#   bench/agent-run.sh [BUILD]      (default build; well under a minute)
#   N=50 bench/agent-run.sh         fewer rounds (default 300)
#
# Times are medians of N rounds in which the commands take turns
# (bench/abtime), ratios the medians of the rounds' ratios; every run's exit
# status is checked, and each command's output once.  Prints "name value
# unit" lines, and rows of the results table (bench/lib.sh):
#   true, nostore_turn, durable_turn
#                     whole-process cost on tmpfs (/dev/shm) of /bin/true,
#                     an echo turn with --no-store and a durable one, and
#                     the ratios (issue 13's goal: durable at most 2x
#                     /bin/true)
#   libs_*            the same for a program that does nothing, linked with
#                     agentkit's libraries, and with libpq as well: what
#                     loading them costs every process, and what loading
#                     libpq at start would (needs cc)
#   *_instructions, *_syscalls, *_page_faults
#                     the figures that stay put on a loaded machine:
#                     instructions (valgrind --tool=callgrind, with a 1 GiB
#                     map: valgrind cannot reserve the default 64 GiB, and
#                     the run would fail),
#                     system calls (strace -c) and page faults (perf stat),
#                     each when the tool is installed
#   turn_1, turn_1000 one echo turn of 3.2 KB in a new session, and in a
#                     session of 1,000 such turns (one more each round)
#   turn_10k, rss_10k the same turn, and its peak RSS, after 10,000 turns'
#                     history (33 MB, imported as one row)
#   script_turn_1, script_turn_10k, script_rss_10k
#                     the same for the script model (script/PATH), which
#                     counts model messages: the rows record the count, so
#                     its turns need not read the history either
#   store_growth_*    bytes the store file grows per turn, early in a
#                     session and on the 10,000-turn session
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init agent-run
build=${1:-build}
n=${N:-300}
case $build in /*) bin="$build/bin" ;; *) bin="$top/$build/bin" ;; esac
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export AGENTKIT_STORE="$work/store"
cd "$work"

now_ns() { date +%s%N; }
size() { stat -c %s "$AGENTKIT_STORE/data.mdb"; }

shm=$work
[ -d /dev/shm ] && [ -w /dev/shm ] && shm=$(mktemp -d /dev/shm/agentkit-bench.XXXXXX) &&
	trap 'rm -rf "$work" "$shm"' EXIT
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }
# a do-nothing program linked as agentkit's binaries are, and the same
# linked with libpq too (the libraries the PostgreSQL backend brings:
# libssl, libcrypto, Kerberos, LDAP, GnuTLS, ...): what every process
# would pay if agentkit linked libpq rather than loading it at the first
# PostgreSQL open
libs_nopq=$(cd "$top" && make --no-print-directory -s -p -n BUILD="$build" 2>/dev/null |
	sed -n 's/^LDLIBS *:= *//p' | head -n 1)
libs_pq="$libs_nopq $(pkg-config --libs libpq 2>/dev/null || echo -lpq)"
have_cc=
if [ -n "$libs_nopq" ] && echo 'int main(void) { return 0; }' >"$work/nop.c" &&
	cc -o "$work/nop_pq" "$work/nop.c" -Wl,--no-as-needed $libs_pq 2>/dev/null &&
	cc -o "$work/nop_nopq" "$work/nop.c" -Wl,--no-as-needed $libs_nopq 2>/dev/null; then
	have_cc=1
fi
bench_expect '"finishReason":"stop"' "$bin/agent-run" --no-store --model echo -m hi
bench_expect '"finishReason":"stop"' "$bin/agent-run" --store "$shm/store" --model echo -m hi
bench_pairs "$n" /bin/true "$bin/agent-run --no-store --model echo -m hi" \
	"$bin/agent-run --store $shm/store --model echo -m hi"
t_true=${bench_t[0]} t_nostore=${bench_t[1]} t_durable=${bench_t[2]}
echo "true $t_true us"
echo "nostore_turn $t_nostore us ($(ratio "$t_nostore" "$t_true")x /bin/true)"
echo "durable_turn $t_durable us ($(ratio "$t_durable" "$t_true")x /bin/true, $(ratio "$t_durable" "$t_nostore")x --no-store; issue 13's target: at most 2x /bin/true)"
inv() { awk -v r="$1" 'BEGIN { printf "%.3f", 1 / r }'; }
bench_row "echo turn, --no-store, vs /bin/true" "$t_nostore" "$t_true" us - "/bin/true" "$(inv "${bench_r[1]}")"
bench_row "durable echo turn (tmpfs) vs /bin/true" "$t_durable" "$t_true" us '<=2' "/bin/true" "$(inv "${bench_r[2]}")"
if [ -n "$have_cc" ]; then
	bench_pairs "$n" /bin/true "$work/nop_pq" "$work/nop_nopq"
	t_pq=${bench_t[1]} t_nopq=${bench_t[2]}
	echo "libs_with_libpq $t_pq us ($(ratio "$t_pq" "$t_true")x /bin/true: $(ldd "$work/nop_pq" | wc -l) objects)"
	echo "libs_without_libpq $t_nopq us ($(ratio "$t_nopq" "$t_true")x /bin/true: $(ldd "$work/nop_nopq" | wc -l) objects)"
	bench_row "load agentkit's libraries and libpq" "$t_pq" "${bench_t[0]}" us - "/bin/true" "$(inv "${bench_r[1]}")"
	bench_row "load agentkit's libraries without libpq" "$t_nopq" "${bench_t[0]}" us - "/bin/true" "$(inv "${bench_r[2]}")"
fi
# figure NAME CMD...: instructions, system calls and page faults of CMD
figure() {
	local name=$1
	shift
	local n rc
	if command -v valgrind >/dev/null; then
		rc=0
		AGENTKIT_STORE_MAPSIZE=1073741824 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
			"$@" 2>"$work/vg.txt" >/dev/null || rc=$?
		[ "$rc" = 0 ] || bench_fail "$name under valgrind: exit status $rc: $(tail -n 3 "$work/vg.txt")"
		n=$(sed -n 's/.*Collected : *//p' "$work/vg.txt")
		[ -n "$n" ] || bench_fail "$name: no instruction count from valgrind"
		echo "${name}_instructions $n"
		printf -v "insn_$name" %s "$n"
	fi
	if command -v strace >/dev/null; then
		strace -f -c -o "$work/strace.txt" "$@" >/dev/null 2>&1 || bench_fail "$name under strace failed"
		n=$(awk '$NF == "total" { print $4 }' "$work/strace.txt")
		[ -z "$n" ] || echo "${name}_syscalls $n"
	fi
	if command -v perf >/dev/null && perf stat -e page-faults true >/dev/null 2>&1; then
		perf stat -x, -e page-faults -r 20 "$@" 2>"$work/perf.txt" >/dev/null || bench_fail "$name under perf failed"
		n=$(awk -F, '/page-faults/ { print $1 }' "$work/perf.txt")
		[ -z "$n" ] || echo "${name}_page_faults $n"
	fi
}
figure true /bin/true
figure nostore_turn "$bin/agent-run" --no-store --model echo -m hi
figure durable_turn "$bin/agent-run" --store "$shm/store" --model echo -m hi
if [ -n "$have_cc" ]; then
	figure libs_with_libpq "$work/nop_pq"
	figure libs_without_libpq "$work/nop_nopq"
fi
if [ -n "${insn_true:-}" ]; then
	bench_row "echo turn, --no-store: instructions" "$insn_nostore_turn" "$insn_true" instructions - /bin/true
	bench_row "durable echo turn: instructions" "$insn_durable_turn" "$insn_true" instructions - /bin/true
fi

# Long sessions (issue 31): turn N costs about turn 1.  Turns of 3.2 KB
# (an echoed 1.6 KB message); turn 1 is the same message in a new session.
msg=$(printf 'word%04d ' $(seq 178))
"$bin/agent-run" --model echo --session grow -m "$msg" >/dev/null
for i in $(seq 999); do "$bin/agent-run" --model echo --session grow -m "$msg" >/dev/null; done
bench_expect '"finishReason":"stop"' "$bin/agent-run" --model echo --session grow -m "$msg"
bench_pairs "$(( n / 6 + 1 ))" "$bin/agent-run --model echo -m \"$msg\"" \
	"$bin/agent-run --model echo --session grow -m \"$msg\""
echo "turn_1 ${bench_t[0]} us/turn"
echo "turn_1000 ${bench_t[1]} us/turn"
bench_row "echo turn 1,000 of a session of 3.2 KB turns vs turn 1" "${bench_t[1]}" "${bench_t[0]}" us \
	'<=1.5' "turn 1" "$(inv "${bench_r[1]}")"

# Store growth per turn (50 more turns of "grow").
s0=$(size)
for i in $(seq 50); do "$bin/agent-run" --model echo --session grow -m "$msg" >/dev/null; done
s1=$(size)
echo "store_growth_1000 $(( (s1 - s0) / 50 )) bytes/turn (session of 1,000 3.2 KB turns)"

# 10,000 turns' history (20,000 messages of 1.6 KB: 33 MB), imported as
# one completed row.
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
jq -cn --arg now "$now" --arg m "$msg" '{snapshotId: "big0", sessionId: "big", status: "completed",
	createdAt: $now, updatedAt: $now, finishReason: "stop",
	state: {sessionId: "big", messages: [range(10000) | ({role: "user", content: [{text: "\(.) \($m)"}]}, {role: "model", content: [{text: "\(.) \($m)"}]})]}}' \
	>"$work/big.json"
history=$(jq -c .state.messages "$work/big.json" | wc -c)
"$bin/agent-snap" import <"$work/big.json" >/dev/null
rm -f "$work/big.json"
echo "history_10k $history bytes"
peak() { # CMD...: the peak RSS of CMD in KiB; fails the script when CMD does
	/usr/bin/time -o "$work/time.txt" -f '%M' "$@" >/dev/null || bench_fail "$*: exit status $?"
	tail -n 1 "$work/time.txt"
}
rss=$(peak "$bin/agent-run" --model echo --session big -m "$msg")
echo "rss_10k $rss KiB"
bench_row "echo turn 10,000: peak RSS / the history's bytes" "$(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }')" \
	"$(awk -v b="$history" 'BEGIN { printf "%.1f", b / 1048576 }')" MiB '<=1.5' "the history"
rss_small=$(peak "$bin/agent-run" --model echo --no-store -m "tiny")
echo "rss_small $rss_small KiB (one turn, no history, no store)"

s0=$(size)
for i in $(seq 20); do "$bin/agent-run" --model echo --session big -m "$msg" >/dev/null; done
s1=$(size)
echo "store_growth_10k $(( (s1 - s0) / 20 )) bytes/turn (session of 10,000 turns)"
bench_pairs 20 "$bin/agent-run --model echo -m \"$msg\"" "$bin/agent-run --model echo --session big -m \"$msg\""
echo "turn_10k ${bench_t[1]} us/turn (session of 10,000 turns)"
bench_row "echo turn 10,000 (33 MB of history) vs turn 1" "${bench_t[1]}" "${bench_t[0]}" us '<=3' "turn 1" \
	"$(inv "${bench_r[1]}")"
figure echo_turn_1 "$bin/agent-run" --model echo -m "$msg"
figure echo_turn_10k "$bin/agent-run" --model echo --session big -m "$msg"
if [ -n "${insn_echo_turn_1:-}" ]; then
	bench_row "echo turn 10,000: instructions vs turn 1" \
		"$insn_echo_turn_10k" "$insn_echo_turn_1" instructions '<=3' "turn 1"
fi

# The script model on the same session: its first turn there reads the
# history (the imported row records no model-message count), the rows it
# writes record one, and its turns after that leave the history in the
# store (issue 31: turn 10,000 at most 3x turn 1).
printf '%s\n' '{"when": {"match": "."}, "text": "ok"}' >"$work/script.ndjson"
sm="--model script/$work/script.ndjson"
bench_expect '"finishReason":"stop"' "$bin/agent-run" $sm --session big -m first
bench_pairs 20 "$bin/agent-run $sm -m hello" "$bin/agent-run $sm --session big -m big"
echo "script_turn_1 ${bench_t[0]} us/turn"
echo "script_turn_10k ${bench_t[1]} us/turn (session of 10,000 turns)"
bench_row "script-model turn 10,000 vs turn 1" "${bench_t[1]}" "${bench_t[0]}" us \
	'<=3' "turn 1" "$(inv "${bench_r[1]}")"
rss=$(peak "$bin/agent-run" $sm --session big -m "one more")
echo "script_rss_10k $rss KiB"
figure script_turn_1 "$bin/agent-run" $sm -m hello
figure script_turn_10k "$bin/agent-run" $sm --session big -m big
if [ -n "${insn_script_turn_1:-}" ]; then
	bench_row "script-model turn 10,000: instructions vs turn 1" \
		"$insn_script_turn_10k" "$insn_script_turn_1" instructions '<=3' "turn 1"
fi
bench_done
