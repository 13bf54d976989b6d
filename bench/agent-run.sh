#!/usr/bin/env bash
# agent-run.sh - whole-process costs of agent-run with the echo model and
# the store (numbers for issue 4).
#
#   bench/agent-run.sh [BUILD]      (default build; well under a minute)
#
# Prints "name value unit" lines:
#   true, nostore_turn, durable_turn
#                     whole-process cost on tmpfs (/dev/shm) of /bin/true,
#                     an echo turn with --no-store and a durable one, mean of
#                     300 each, and the ratios (issue 13's goal: durable at
#                     most 2x /bin/true)
#   libs_*            the same for a program that does nothing, linked with
#                     agentkit's libraries with and without libpq: what
#                     loading them costs every process (needs cc)
#   *_instructions, *_syscalls, *_page_faults
#                     the figures that stay put on a loaded machine:
#                     instructions (valgrind --tool=callgrind; its count of
#                     the durable turn includes ~6.5M of a calloc() LMDB
#                     makes that valgrind clears by hand and Linux does not),
#                     system calls (strace -c) and page faults (perf stat),
#                     each when the tool is installed
#   turn_1            one turn of a fresh session (mean of 50 processes)
#   turn_100          one turn of a growing session, 100 turns as 100 processes
#   rss_10k           peak RSS of one turn on a 10,000-message session
#   store_growth_*    bytes the store file grows per turn, early in a
#                     session and on the 10,000-message session
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) bin="$build/bin" ;; *) bin="$top/$build/bin" ;; esac
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export AGENTKIT_STORE="$work/store"
cd "$work"

now_ns() { date +%s%N; }
size() { stat -c %s "$AGENTKIT_STORE/data.mdb"; }

# mean_us N CMD...: the mean wall time of one run of CMD, in microseconds:
# hyperfine's (no shell, warmed up) when it is installed, else a loop's.
mean_us() {
	local n=$1 t0 t1
	shift
	if command -v hyperfine >/dev/null; then
		hyperfine -N -w 20 -r "$n" --export-json "$work/hf.json" "$*" >/dev/null 2>&1 &&
			jq '.results[0].mean * 1e6 | floor' "$work/hf.json" && return
	fi
	t0=$(now_ns)
	for _ in $(seq "$n"); do "$@" >/dev/null; done
	t1=$(now_ns)
	echo $(( (t1 - t0) / n / 1000 ))
}
shm=$work
[ -d /dev/shm ] && [ -w /dev/shm ] && shm=$(mktemp -d /dev/shm/agentkit-bench.XXXXXX) &&
	trap 'rm -rf "$work" "$shm"' EXIT
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }
# a do-nothing program linked as agentkit's binaries are, with and without
# libpq (the libraries the PostgreSQL backend brings: libssl, libcrypto,
# Kerberos, LDAP, GnuTLS, ...)
libs_pq=$(cd "$top" && make --no-print-directory -s -p -n BUILD="$build" 2>/dev/null |
	sed -n 's/^LDLIBS *:= *//p' | head -n 1)
libs_nopq=$(sed "s/$(pkg-config --libs libpq 2>/dev/null || echo -lpq)//" <<<"$libs_pq")
have_cc=
if [ -n "$libs_pq" ] && echo 'int main(void) { return 0; }' >"$work/nop.c" &&
	cc -o "$work/nop_pq" "$work/nop.c" -Wl,--no-as-needed $libs_pq 2>/dev/null &&
	cc -o "$work/nop_nopq" "$work/nop.c" -Wl,--no-as-needed $libs_nopq 2>/dev/null; then
	have_cc=1
fi
t_true=$(mean_us 300 /bin/true)
t_nostore=$(mean_us 300 "$bin/agent-run" --no-store --model echo -m hi)
t_durable=$(mean_us 300 "$bin/agent-run" --store "$shm/store" --model echo -m hi)
echo "true $t_true us"
echo "nostore_turn $t_nostore us ($(ratio "$t_nostore" "$t_true")x /bin/true)"
echo "durable_turn $t_durable us ($(ratio "$t_durable" "$t_true")x /bin/true, $(ratio "$t_durable" "$t_nostore")x --no-store; issue 13's target: at most 2x /bin/true)"
if [ -n "$have_cc" ]; then
	t_pq=$(mean_us 300 "$work/nop_pq")
	t_nopq=$(mean_us 300 "$work/nop_nopq")
	echo "libs_with_libpq $t_pq us ($(ratio "$t_pq" "$t_true")x /bin/true: $(ldd "$work/nop_pq" | wc -l) objects)"
	echo "libs_without_libpq $t_nopq us ($(ratio "$t_nopq" "$t_true")x /bin/true: $(ldd "$work/nop_nopq" | wc -l) objects)"
fi
# figure NAME CMD...: instructions, system calls and page faults of CMD
figure() {
	local name=$1 n
	shift
	if command -v valgrind >/dev/null; then
		n=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
			sed -n 's/.*Collected : *//p')
		[ -z "$n" ] || echo "${name}_instructions $n"
	fi
	if command -v strace >/dev/null; then
		n=$(strace -f -c -o "$work/strace.txt" "$@" >/dev/null 2>&1 &&
			awk '$NF == "total" { print $4 }' "$work/strace.txt")
		[ -z "$n" ] || echo "${name}_syscalls $n"
	fi
	if command -v perf >/dev/null; then
		n=$(perf stat -x, -e page-faults -r 20 "$@" 2>&1 >/dev/null | awk -F, '/page-faults/ { print $1 }')
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

t0=$(now_ns)
for i in $(seq 50); do "$bin/agent-run" --model echo -m "hello $i" >/dev/null; done
t1=$(now_ns)
echo "turn_1 $(( (t1 - t0) / 50 / 1000 )) us/turn"

t0=$(now_ns)
"$bin/agent-run" --model echo --session grow -m "turn 0" >/dev/null
for i in $(seq 99); do "$bin/agent-run" --model echo --session grow -m "turn $i" >/dev/null; done
t1=$(now_ns)
echo "turn_100 $(( (t1 - t0) / 100 / 1000 )) us/turn"

# Store growth per turn early in a session (turns 101-150 of "grow").
s0=$(size)
for i in $(seq 50); do "$bin/agent-run" --model echo --session grow -m "more $i" >/dev/null; done
s1=$(size)
echo "store_growth_small $(( (s1 - s0) / 50 )) bytes/turn (session of ~200-300 messages)"

# A 10,000-message session, imported as one completed row.
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
jq -cn --arg now "$now" '{snapshotId: "big0", sessionId: "big", status: "completed",
	createdAt: $now, updatedAt: $now, finishReason: "stop",
	state: {sessionId: "big", messages: [range(5000) | ({role: "user", content: [{text: "question number \(.) about something"}]}, {role: "model", content: [{text: "answer number \(.) with a few more words in it"}]})]}}' \
	| "$bin/agent-snap" import >/dev/null
rss=$( { /usr/bin/time -f '%M' "$bin/agent-run" --model echo --session big -m "one more" >/dev/null; } 2>&1 | tail -n 1)
echo "rss_10k $rss KiB"
rss_small=$( { /usr/bin/time -f '%M' "$bin/agent-run" --model echo --no-store -m "tiny" >/dev/null; } 2>&1 | tail -n 1)
echo "rss_small $rss_small KiB (one turn, no history, no store)"

s0=$(size)
t0=$(now_ns)
for i in $(seq 20); do "$bin/agent-run" --model echo --session big -m "big $i" >/dev/null; done
t1=$(now_ns)
s1=$(size)
echo "turn_10k $(( (t1 - t0) / 20 / 1000 )) us/turn (session of 10,000+ messages)"
echo "store_growth_10k $(( (s1 - s0) / 20 )) bytes/turn (session of 10,000+ messages)"
