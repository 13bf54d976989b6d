#!/usr/bin/env bash
# otlp.sh - OTLP's two encodings compared: what http/protobuf (the
# default, protobuf-c) and http/json cost agentkit, per span and per run.
#
#   bench/otlp.sh [BUILD]      (default build; about a minute)
#
# Prints "name value unit" lines:
#   {json,protobuf}_encode     ns a span costs the turn to encode (one
#                              request of 100 agent-shaped spans, 500 times)
#   {json,protobuf}_bytes      bytes a span takes in the request
#   {json,protobuf}_gzip       ns a span costs the exporter thread to gzip
#   {json,protobuf}_gzip_bytes bytes a span takes gzip-compressed
#   run_{json,protobuf,protobuf_gzip}
#                              median wall time of a one-turn echo run
#                              traced to a loopback collector that answers
#                              at once (bench/otlp-sink), 300 rounds in turn
#                              (bench/abtime)
#   protobuf_run_overhead      run_protobuf over run_json, in %
#   N=50 bench/otlp.sh          fewer rounds (default 300)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init otlp
build=${1:-build}
case $build in /*) bdir=$build ;; *) bdir=$top/$build ;; esac
rel=${bdir#"$top"/}
make --no-print-directory -s -C "$top" "$rel/bench/trace/bench-otlp" BUILD="$rel" >/dev/null ||
	bench_fail "cannot build bench-otlp"
"$bdir/bench/trace/bench-otlp" 100 500 || bench_fail "bench-otlp failed"

base=${TMPDIR:-/tmp}
[ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
work=$(mktemp -d "$base/agentkit-bench-otlp.XXXXXX")
sink=
trap '[ -z "$sink" ] || kill "$sink" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
unset OTEL_EXPORTER_OTLP_TRACES_ENDPOINT OTEL_TRACES_EXPORTER OTEL_SDK_DISABLED AGENTKIT_TRACE \
	TRACEPARENT GENKIT_TELEMETRY_SERVER OTEL_TRACES_SAMPLER OTEL_EXPORTER_OTLP_COMPRESSION \
	OTEL_EXPORTER_OTLP_TRACES_PROTOCOL http_proxy HTTP_PROXY
"$top/bench/otlp-sink" "$work/port" &
sink=$!
for _ in $(seq 1 200); do [ -s "$work/port" ] && break; sleep 0.025; done
export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$(cat "$work/port")"
ar="$bdir/bin/agent-run --no-store --model echo --system hi -m hello --trace"
bench_expect '"finishReason":"stop"' $ar
bench_pairs "${N:-300}" "OTEL_EXPORTER_OTLP_PROTOCOL=http/json $ar" \
	"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf $ar" \
	"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_EXPORTER_OTLP_COMPRESSION=gzip $ar"
json=${bench_t[0]} pb=${bench_t[1]} pbz=${bench_t[2]}
bench_row "traced echo turn, OTLP http/protobuf vs http/json" "$pb" "$json" us - "http/json" \
	"$(awk -v r="${bench_r[1]}" 'BEGIN { printf "%.3f", 1 / r }')"
echo "run_json $json us"
echo "run_protobuf $pb us"
echo "run_protobuf_gzip $pbz us"
awk -v a="$pb" -v b="$json" 'BEGIN { printf "protobuf_run_overhead %.1f %%\n", (a - b) * 100 / b }'
bench_done
