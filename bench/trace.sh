#!/usr/bin/env bash
# trace.sh - what tracing costs a whole agent-run process (issue 18's
# measure: at most 10% over an untraced turn).
#
#   bench/trace.sh [BUILD]      (default build; about two minutes)
#
# Prints "name value unit" lines.  Times are medians of 500 rounds in which
# the commands take turns (bench/abtime), of a one-turn agent with
# --no-store, on tmpfs when /dev/shm is there:
#   untraced          an echo turn, no tracing
#   console           the same, --trace-file to a file (one OTLP JSON line)
#   otlp              the same, --trace to a loopback receiver that answers
#                     at once as a collector does (bench/otlp-sink): one POST
#   otlp_refused      the same, --trace to a port that refuses: libcurl's
#                     load (an echo run never needs it otherwise) and a
#                     refused connect, no receiver in it
#   curl_load         a program that only loads libcurl.so.4 and calls
#                     curl_global_init(), over /bin/true: what otlp costs an
#                     echo run before it sends anything
#   provider, provider_otlp
#                     a turn of an OpenAI-dialect model served by
#                     scripts/mock-model on loopback, untraced and --trace
#                     (otlp to bench/otlp-sink): libcurl is loaded either
#                     way, as in every run with a real model
#   *_overhead        a traced run's cost over its untraced one, in %
#   slow_turns3, slow_turns1
#                     wall time of one three-turn and one one-turn echo
#                     run, --trace to scripts/otlp-receiver --delay 8 (a
#                     collector that answers after 8 s), timed once each:
#                     what a slow collector costs (the exit's wait,
#                     AGENTKIT_TRACE_EXIT_TIMEOUT, 1s, and never per turn)
#   *_instructions    with valgrind: instructions of one echo run untraced
#                     and console (callgrind), figures a busy machine does
#                     not move
#   N=100 bench/trace.sh        fewer rounds (default 500)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init trace
build=${1:-build}
case $build in /*) bin="$build/bin" ;; *) bin="$top/$build/bin" ;; esac
base=${TMPDIR:-/tmp}
[ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
work=$(mktemp -d "$base/agentkit-bench-trace.XXXXXX")
sink= mock= slow=
trap '[ -z "$sink" ] || kill "$sink" 2>/dev/null; [ -z "$mock" ] || kill "$mock" 2>/dev/null
	[ -z "$slow" ] || kill "$slow" 2>/dev/null
	rm -rf "$work"' EXIT
cd "$work"
unset OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT OTEL_TRACES_EXPORTER \
	OTEL_SDK_DISABLED AGENTKIT_TRACE TRACEPARENT GENKIT_TELEMETRY_SERVER http_proxy HTTP_PROXY

wait_file() { for _ in $(seq 1 200); do [ -s "$1" ] && return; sleep 0.025; done; }
"$top/bench/otlp-sink" "$work/port" &
sink=$!
echo '{"text": "hello", "repeat": 100000}' >"$work/turns.ndjson"
"$top/scripts/mock-model" --dialect openai --script "$work/turns.ndjson" --log /dev/null \
	--port-file "$work/mport" >/dev/null 2>&1 &
mock=$!
wait_file "$work/port"
wait_file "$work/mport"
port=$(cat "$work/port") mport=$(cat "$work/mport")

cat >"$work/curl_load.c" <<'C'
#include <dlfcn.h>
int main(void)
{
	void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	int (*init)(long) = h ? (int (*)(long))dlsym(h, "curl_global_init") : 0;
	return init ? init(3) : 1;
}
C
${CC:-cc} -O2 -o "$work/curl_load" "$work/curl_load.c" -ldl

n=${N:-500}
ar="$bin/agent-run --no-store --model echo --system hi -m hello"
pv="$bin/agent-run --no-store --model openai/gpt-4o --system hi -m hello"
export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$port"
export OPENAI_BASE_URL="http://127.0.0.1:$mport/v1" OPENAI_API_KEY=sk-bench
bench_expect '"finishReason":"stop"' $ar
bench_expect '"finishReason":"stop"' $ar --trace
bench_expect '"finishReason":"stop"' $pv
bench_expect '"finishReason":"stop"' $pv --trace
bench_expect '"finishReason":"stop"' $ar --trace-file "$work/t.ndjson"
[ -s "$work/t.ndjson" ] || bench_fail "--trace-file wrote nothing"
# The refused port's run says so on stderr (abtime sends it to /dev/null).
bench_pairs "$n" "$ar" "$ar --trace-file $work/t.ndjson" "$ar --trace" \
	"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1 $ar --trace"
plain=${bench_t[0]} console=${bench_t[1]} otlp=${bench_t[2]} refused=${bench_t[3]}
inv() { awk -v r="$1" 'BEGIN { printf "%.3f", 1 / r }'; }
bench_row "echo turn --trace-file vs untraced" "$console" "$plain" us '<=1.10' "untraced" "$(inv "${bench_r[1]}")"
bench_row "echo turn --trace (OTLP) vs untraced" "$otlp" "$plain" us '<=1.10' "untraced" "$(inv "${bench_r[2]}")"
bench_pairs "$n" /bin/true "$work/curl_load"
truebin=${bench_t[0]} curl=${bench_t[1]}
bench_pairs $((n / 2)) "$pv" "$pv --trace"
provider=${bench_t[0]} provider_otlp=${bench_t[1]}
bench_row "provider turn --trace vs untraced" "$provider_otlp" "$provider" us '<=1.05' "untraced" "$(inv "${bench_r[1]}")"

# A collector that answers after 8 s: once each, not 500 rounds.
"$top/scripts/otlp-receiver" --port-file "$work/sport" --log /dev/null --delay 8 --idle 60 &
slow=$!
wait_file "$work/sport"
sport=$(cat "$work/sport")
wall() {
	local t0
	t0=$(date +%s%N)
	OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$sport" "$@" >/dev/null 2>&1 ||
		bench_fail "$* against a slow collector: exit status $?"
	echo $((($(date +%s%N) - t0) / 1000000))
}
slow3=$(wall $ar -m two -m three --trace)
slow1=$(wall $ar --trace)
kill "$slow" 2>/dev/null || true
slow=

pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (a - b) * 100 / b }'; }
echo "untraced $plain us"
echo "console $console us"
echo "otlp $otlp us"
echo "otlp_refused $refused us"
echo "curl_load $((curl - truebin)) us"
echo "console_overhead $(pct "$console" "$plain") %"
echo "otlp_overhead $(pct "$otlp" "$plain") %"
echo "otlp_refused_overhead $(pct "$refused" "$plain") %"
echo "slow_turns3 $slow3 ms"
echo "slow_turns1 $slow1 ms"
echo "provider $provider us"
echo "provider_otlp $provider_otlp us"
echo "provider_otlp_overhead $(pct "$provider_otlp" "$provider") %"
if command -v valgrind >/dev/null; then
	refs() {
		valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>"$work/vg.txt" >/dev/null ||
			bench_fail "$* under valgrind: exit status $?"
		awk '/refs:/ { gsub(",", "", $NF); print $NF }' "$work/vg.txt"
	}
	i_plain=$(refs $ar)
	i_console=$(refs $ar --trace-file "$work/t.ndjson")
	echo "untraced_instructions $i_plain instructions"
	echo "console_instructions $i_console instructions"
	echo "console_instructions_overhead $(pct "$i_console" "$i_plain") %"
fi
bench_done
