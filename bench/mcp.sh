#!/usr/bin/env bash
# mcp.sh - what an MCP server costs agent-run (numbers for issue 17), with
# tests/fixtures/mcp/fake-server run by python3 directly (no shims).
#
#   bench/mcp.sh [BUILD]            (default build; well under a minute;
#                                   PYTHON names the python3 to run)
#
# Prints "name value unit" lines, each the mean wall time of a whole
# agent-run process with the script model (hyperfine when installed):
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
build=${1:-build}
case $build in /*) bin="$build/bin" ;; *) bin="$top/$build/bin" ;; esac
py=${PYTHON:-$(command -v python3)} || { echo "mcp.sh: no python3; skipped" >&2; exit 0; }
py=$("$py" -c 'import sys; print(sys.executable)')
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"

mean_us() {
	local n=$1 t0 t1
	shift
	if command -v hyperfine >/dev/null; then
		hyperfine -N -w 5 -r "$n" --export-json "$work/hf.json" "$*" >/dev/null 2>&1 &&
			jq '.results[0].mean * 1e6 | floor' "$work/hf.json" && return
	fi
	t0=$(date +%s%N)
	for _ in $(seq "$n"); do "$@" >/dev/null; done
	t1=$(date +%s%N)
	echo $(( (t1 - t0) / n / 1000 ))
}

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
t_plain=$(mean_us 50 $run script/plain.ndjson)
t_idle=$(mean_us 50 $run script/plain.ndjson --mcp-config mcp.json)
t_py=$(mean_us 50 "$py" -c pass)
t_mcp=$(mean_us 50 $run script/round.ndjson --mcp-config mcp.json)
t_exec=$(mean_us 50 $run script/round.ndjson --tool ./fake_echo.json)
echo "turn_plain $t_plain us"
echo "turn_mcp_idle $t_idle us (+$(( t_idle - t_plain )) us for one server)"
echo "python_start $t_py us"
echo "round_mcp $t_mcp us"
echo "round_exec $t_exec us"
echo "mcp_call_overhead $(( t_mcp - t_idle )) us"
echo "exec_call_overhead $(( t_exec - t_plain )) us"
