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
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) bdir=$build ;; *) bdir=$top/$build ;; esac
make --no-print-directory -s -C "$top" "$bdir/bench/trace/bench-otlp" BUILD="$build" >/dev/null
"$bdir/bench/trace/bench-otlp" 100 500

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
{
	read -r json
	read -r pb
	read -r pbz
} < <("$top/bench/abtime" 300 "OTEL_EXPORTER_OTLP_PROTOCOL=http/json $ar" \
	"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf $ar" \
	"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_EXPORTER_OTLP_COMPRESSION=gzip $ar")
echo "run_json $json us"
echo "run_protobuf $pb us"
echo "run_protobuf_gzip $pbz us"
awk -v a="$pb" -v b="$json" 'BEGIN { printf "protobuf_run_overhead %.1f %%\n", (a - b) * 100 / b }'
