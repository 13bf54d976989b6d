#!/usr/bin/env bash
# mcp.sh - what an MCP server costs agent-run (numbers for issue 17), with
# tests/fixtures/mcp/fake-server run by python3 directly (no shims).
#
#   bench/mcp.sh [BUILD]            (default build; well under a minute;
#                                   PYTHON names the python3 to run)
#
# Prints "name value unit" lines, each the median wall time of a whole
# agent-run process with the script model, N rounds (default 50) in which
# the five take turns (bench/abtime); each command's output is checked once:
#   turn_plain        one turn, no tool, no MCP server
#   turn_mcp_idle     the same with one MCP server configured: its start-up
#                     (exec, initialize, tools/list) before the first model
#                     call, and its shutdown (stdin closed, it exits)
#   python_start      python3 -c pass, the floor of the server's start
#   round_mcp         one MCP tool call and a second model call
#   round_exec        the same call to the equivalent executable tool (a
#                     python3 script speaking the tool protocol)
#   mcp_call_overhead round_mcp - turn_mcp_idle, exec_call_overhead
#                     round_exec - turn_plain
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init mcp
build=${1:-build}
case $build in /*) bin="$build/bin" ;; *) bin="$top/$build/bin" ;; esac
py=${PYTHON:-$(command -v python3)} || { echo "mcp.sh: no python3; skipped" >&2; exit 0; }
py=$("$py" -c 'import sys; print(sys.executable)')
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"

printf '{"mcpServers": {"fake": {"command": "%s", "args": ["%s", "normal"]}}}\n' \
	"$py" "$top/tests/fixtures/mcp/fake-server" >mcp.json
cat >echo-tool <<-PY
#!$py
import json, sys
req = json.loads(sys.stdin.readline())
print(json.dumps({"output": "echo: " + req["input"].get("text", "")}))
PY
chmod +x echo-tool
echo '{"name": "fake_echo", "command": ["./echo-tool"]}' >fake_echo.json
echo '{"text": "hi"}' >plain.ndjson
printf '%s\n' '{"toolRequests": [{"name": "fake_echo", "ref": "1", "input": {"text": "x"}}]}' \
	'{"text": "ok"}' >round.ndjson

run="$bin/agent-run --no-store -m hi --model"
bench_expect '"hi"' $run script/plain.ndjson
bench_expect '"hi"' $run script/plain.ndjson --mcp-config mcp.json
bench_expect '"echo: x"' $run script/round.ndjson --mcp-config mcp.json
bench_expect '"echo: x"' $run script/round.ndjson --tool ./fake_echo.json
bench_pairs "${N:-50}" "$run script/plain.ndjson" "$run script/plain.ndjson --mcp-config mcp.json" \
	"$py -c pass" "$run script/round.ndjson --mcp-config mcp.json" \
	"$run script/round.ndjson --tool ./fake_echo.json"
t_plain=${bench_t[0]} t_idle=${bench_t[1]} t_py=${bench_t[2]} t_mcp=${bench_t[3]} t_exec=${bench_t[4]}
echo "turn_plain $t_plain us"
echo "turn_mcp_idle $t_idle us (+$(( t_idle - t_plain )) us for one server)"
echo "python_start $t_py us"
echo "round_mcp $t_mcp us"
echo "round_exec $t_exec us"
echo "mcp_call_overhead $(( t_mcp - t_idle )) us"
echo "exec_call_overhead $(( t_exec - t_plain )) us"
py_v=$("$py" --version)
bench_row "MCP tool call round vs an executable tool's" "$t_mcp" "$t_exec" us - "$py_v (both servers)"
bench_row "one idle MCP server's start and stop" "$((t_idle - t_plain))" "$t_py" us - "$py_v start-up"
bench_done
