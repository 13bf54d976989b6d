#!/usr/bin/env bash
# trace.sh - what tracing costs a whole agent-run process (issue 18's
# measure: at most 10% over an untraced echo turn).
#
#   bench/trace.sh [BUILD]      (default build; about a minute)
#
# Prints "name value unit" lines, each the mean of 200 runs of a one-turn
# echo agent with --no-store, on tmpfs when /dev/shm is there:
#   untraced          no tracing
#   console           --trace-file to a file (one OTLP JSON line a run)
#   otlp              --trace to a loopback receiver (scripts/otlp-receiver,
#                     one POST a run)
#   otlp_refused      --trace to a port that refuses the connection: the
#                     cost of loading libcurl (an echo run never needs it
#                     otherwise) with no receiver's time in it
#   *_overhead        the traced runs' cost over the untraced one, in %
#   provider, provider_otlp
#                     the same turn with an OpenAI-dialect model served by
#                     scripts/mock-model on loopback, untraced and --trace
#                     (otlp): libcurl is loaded either way, so this is the
#                     cost of the spans and the POST alone
#   *_instructions    with valgrind: instructions of one run (callgrind),
#                     untraced and console, the figure a busy machine does
#                     not move
# hyperfine (-N, warmed up) when installed, else a shell loop.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) bin="$build/bin" ;; *) bin="$top/$build/bin" ;; esac
base=${TMPDIR:-/tmp}
[ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
work=$(mktemp -d "$base/agentkit-bench-trace.XXXXXX")
recv= mock=
trap '[ -z "$recv" ] || kill "$recv" 2>/dev/null; [ -z "$mock" ] || kill "$mock" 2>/dev/null
	rm -rf "$work"' EXIT
cd "$work"
unset OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT OTEL_TRACES_EXPORTER \
	OTEL_SDK_DISABLED AGENTKIT_TRACE TRACEPARENT http_proxy HTTP_PROXY

"$top/scripts/otlp-receiver" --port-file "$work/port" --log /dev/null --idle 120 &
recv=$!
for _ in $(seq 1 200); do [ -s "$work/port" ] && break; sleep 0.025; done
port=$(cat "$work/port")
echo '{"text": "hello", "repeat": 100000}' >"$work/turns.ndjson"
"$top/scripts/mock-model" --dialect openai --script "$work/turns.ndjson" --log /dev/null \
	--port-file "$work/mport" >/dev/null 2>&1 &
mock=$!
for _ in $(seq 1 200); do [ -s "$work/mport" ] && break; sleep 0.025; done
mport=$(cat "$work/mport")

n=200
ar="$bin/agent-run --no-store --model echo --system hi -m hello"
mean_us() {
	if command -v hyperfine >/dev/null; then
		hyperfine -N -w 20 -r "$n" --export-json "$work/hf.json" "$1" >/dev/null 2>&1 &&
			jq '.results[0].mean * 1e6 | floor' "$work/hf.json" && return
	fi
	local t0 t1
	t0=$(date +%s%N)
	for _ in $(seq "$n"); do sh -c "$1" >/dev/null 2>&1; done
	t1=$(date +%s%N)
	echo $(((t1 - t0) / n / 1000))
}

plain=$(mean_us "$ar")
console=$(mean_us "$ar --trace-file $work/t.ndjson")
refused=$(OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1 mean_us "$ar --trace")
export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$port"
otlp=$(mean_us "$ar --trace")
export OPENAI_BASE_URL="http://127.0.0.1:$mport/v1" OPENAI_API_KEY=sk-bench
pv="$bin/agent-run --no-store --model openai/gpt-4o --system hi -m hello"
provider=$(OTEL_EXPORTER_OTLP_ENDPOINT= mean_us "$pv")
provider_otlp=$(mean_us "$pv --trace")
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (a - b) * 100 / b }'; }
echo "untraced $plain us"
echo "console $console us"
echo "otlp $otlp us"
echo "otlp_refused $refused us"
echo "console_overhead $(pct "$console" "$plain") %"
echo "otlp_overhead $(pct "$otlp" "$plain") %"
echo "otlp_refused_overhead $(pct "$refused" "$plain") %"
echo "provider $provider us"
echo "provider_otlp $provider_otlp us"
echo "provider_otlp_overhead $(pct "$provider_otlp" "$provider") %"
if command -v valgrind >/dev/null; then
	refs() {
		valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
			awk '/refs:/ { gsub(",", "", $NF); print $NF }'
	}
	unset OTEL_EXPORTER_OTLP_ENDPOINT
	i_plain=$(refs $ar)
	i_console=$(refs $ar --trace-file "$work/t.ndjson")
	echo "untraced_instructions $i_plain instructions"
	echo "console_instructions $i_console instructions"
	echo "console_instructions_overhead $(pct "$i_console" "$i_plain") %"
fi
