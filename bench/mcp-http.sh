#!/usr/bin/env bash
# mcp-http.sh - a remote MCP call: agent-run against the official
# TypeScript SDK client (bench/mcp-http-client.cjs), both reaching the same
# Streamable HTTP server (tests/fixtures/mcp/http-server.cjs, bearer
# token) over 127.0.0.1.  Needs node and scripts/mcp-servers' packages.
#
#   bench/mcp-http.sh [BUILD]
#
# Prints "name value unit" lines, each the mean wall time of a whole
# process (hyperfine when installed):
#   remote_agentrun  agent-run: connect, initialize, tools/list, one
#                    tools/call (echo) between two script-model turns,
#                    DELETE of the session
#   remote_sdk       node + the SDK client: connect, initialize,
#                    tools/list, the same call, DELETE
#   node_start       node -e '' (most of remote_sdk is node's start-up)
#   ratio            remote_agentrun / remote_sdk (target <= 1)
#   ratio_net        remote_agentrun / (remote_sdk - node_start): the
#                    client's work without node's start-up
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) bin="$build/bin" ;; *) bin="$top/$build/bin" ;; esac
mods=$top/bench/out/mcp/node_modules
command -v node >/dev/null || { echo "mcp-http.sh: no node; skipped" >&2; exit 0; }
[ -f "$mods/@modelcontextprotocol/sdk/package.json" ] ||
	{ echo "mcp-http.sh: the MCP SDK is not installed (scripts/mcp-servers); skipped" >&2; exit 0; }
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench.XXXXXX")
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
MCP_MODULES=$mods TOKEN=bench PORTFILE=$work/port node "$top/tests/fixtures/mcp/http-server.cjs" 2>/dev/null &
server=$!
for _ in $(seq 100); do [ -s port ] && break; sleep 0.1; done
url="http://127.0.0.1:$(cat port)/mcp"

mean_us() {
	local n=$1 t0 t1
	shift
	if command -v hyperfine >/dev/null; then
		hyperfine -N -w 3 -r "$n" --export-json "$work/hf.json" "$*" >/dev/null 2>&1 &&
			jq '.results[0].mean * 1e6 | floor' "$work/hf.json" && return
	fi
	t0=$(date +%s%N)
	for _ in $(seq "$n"); do "$@" >/dev/null; done
	t1=$(date +%s%N)
	echo $(( (t1 - t0) / n / 1000 ))
}

printf '{"mcpServers": {"fx": {"type": "http", "url": "%s", "headers": {"Authorization": "Bearer bench"}}}}\n' "$url" >mcp.json
printf '%s\n' '{"toolRequests": [{"name": "fx_echo", "ref": "1", "input": {"text": "x"}}]}' \
	'{"text": "ok"}' >round.ndjson
"$bin/agent-run" --no-store -m hi --model script/round.ndjson --mcp-config mcp.json | grep -q '"echo: x"' ||
	{ echo "mcp-http.sh: agent-run's call failed" >&2; exit 1; }
MCP_MODULES=$mods node "$top/bench/mcp-http-client.cjs" "$url" bench ||
	{ echo "mcp-http.sh: the SDK client's call failed" >&2; exit 1; }
t_ar=$(mean_us 30 "$bin/agent-run" --no-store -m hi --model script/round.ndjson --mcp-config mcp.json)
export MCP_MODULES=$mods
t_sdk=$(mean_us 30 node "$top/bench/mcp-http-client.cjs" "$url" bench)
t_node=$(mean_us 30 node -e '')
echo "remote_agentrun $t_ar us"
echo "remote_sdk $t_sdk us"
echo "node_start $t_node us"
echo "ratio $(awk -v a="$t_ar" -v b="$t_sdk" 'BEGIN { printf "%.2f", a / b }')"
echo "ratio_net $(awk -v a="$t_ar" -v b="$t_sdk" -v n="$t_node" 'BEGIN { printf "%.2f", a / (b - n) }')"
