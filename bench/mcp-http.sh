#!/usr/bin/env bash
# mcp-http.sh - a remote MCP call: agent-run against the official
# TypeScript SDK client (bench/mcp-http-client.cjs), both reaching the same
# Streamable HTTP server (tests/fixtures/mcp/http-server.cjs, bearer
# token) over 127.0.0.1.  Needs node and scripts/mcp-servers' packages.
#
#   bench/mcp-http.sh [BUILD]
#
# Prints "name value unit" lines, each the median wall time of a whole
# process over N rounds (default 30) in which the three take turns
# (bench/abtime), the ratios the medians of the rounds' ratios:
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
. "$top/bench/lib.sh"
bench_init mcp-http
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

printf '{"mcpServers": {"fx": {"type": "http", "url": "%s", "headers": {"Authorization": "Bearer bench"}}}}\n' "$url" >mcp.json
printf '%s\n' '{"toolRequests": [{"name": "fx_echo", "ref": "1", "input": {"text": "x"}}]}' \
	'{"text": "ok"}' >round.ndjson
[ -s port ] || bench_fail "the MCP server did not start"
bench_expect '"echo: x"' "$bin/agent-run" --no-store -m hi --model script/round.ndjson --mcp-config mcp.json
export MCP_MODULES=$mods
bench_expect '' node "$top/bench/mcp-http-client.cjs" "$url" bench
bench_pairs "${N:-30}" "$bin/agent-run --no-store -m hi --model script/round.ndjson --mcp-config mcp.json" \
	"node $top/bench/mcp-http-client.cjs $url bench" "node -e ''"
t_ar=${bench_t[0]} t_sdk=${bench_t[1]} t_node=${bench_t[2]}
sdk_v="@modelcontextprotocol/sdk $(node -p "require('$mods/@modelcontextprotocol/sdk/package.json').version") (node $(node --version))"
bench_row "remote MCP call (Streamable HTTP) vs the TypeScript SDK client" "$t_ar" "$t_sdk" us '<=1' "$sdk_v" "${bench_r[1]}"
echo "remote_agentrun $t_ar us"
echo "remote_sdk $t_sdk us"
echo "node_start $t_node us"
echo "ratio $(awk -v a="$t_ar" -v b="$t_sdk" 'BEGIN { printf "%.2f", a / b }')"
echo "ratio_net $(awk -v a="$t_ar" -v b="$t_sdk" -v n="$t_node" 'BEGIN { printf "%.2f", a / (b - n) }')"
bench_done
