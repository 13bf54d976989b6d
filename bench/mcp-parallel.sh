#!/usr/bin/env bash
# mcp-parallel.sh - MCP calls and start-ups at the same time (issue 29):
# four 500 ms calls to one server in one tool round, over stdio
# (tests/fixtures/mcp/fake-server's nap, python3) and Streamable HTTP
# (tests/fixtures/mcp/http-server.cjs's nap, node and scripts/mcp-servers'
# packages; left out without them), and six servers that each take 300 ms
# to answer initialize.
#
#   bench/mcp-parallel.sh [BUILD]      (RUNS=7 rounds; about a minute)
#
# Every figure is the median wall time of a whole agent-run process
# (bench/abtime: the commands take turns, a new order each round; a run
# that exits non-zero stops the benchmark, which then fails).  Prints
# "name value unit" lines:
#   par4_stdio        a round of four 500 ms calls to one stdio server
#                     and a second model call, start-up included
#   idle_stdio        the same server configured, no call: its start-up
#   par4_stdio_round  par4_stdio - idle_stdio: the round (goal <= 600 ms;
#                     one call after another: 2000 ms)
#   par1_stdio_round  the same round with one 500 ms call: the floor
#   par4_http, idle_http, par4_http_round, par1_http_round   the same
#                     over Streamable HTTP
#   plain             a turn without a server
#   start1            one server that answers initialize after 300 ms
#   start6            six such servers
#   start6_serial     what six would take one after another:
#                     plain + 6 x (start1 - plain)
#   start_ratio       start6 / start1 (goal: about 1; above it by what
#                     six python3 start-ups cost the CPU more than one,
#                     with as many cores as there are)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) bin="$build/bin" ;; *) bin="$top/$build/bin" ;; esac
runs=${RUNS:-7}
py=$(command -v python3) || { echo "mcp-parallel.sh: no python3; skipped" >&2; exit 0; }
mods=$top/bench/out/mcp/node_modules
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench.XXXXXX")
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
fake=$top/tests/fixtures/mcp/fake-server

# naps FILE TOOL [N]: a script model asking TOOL for N (4) 500 ms naps at
# once.
naps() {
	local reqs='' i
	for i in $(seq "${3:-4}"); do
		reqs+="{\"name\": \"$2\", \"ref\": \"$i\", \"input\": {\"ms\": 500, \"text\": \"n$i\"}},"
	done
	printf '%s\n' "{\"toolRequests\": [${reqs%,}]}" '{"text": "ok"}' >"$1"
}
# check WHAT CMD...: one run of CMD must succeed with four answers.
check() {
	local what=$1 out
	shift
	out=$("$@") || { echo "mcp-parallel.sh: $what: agent-run failed" >&2; exit 1; }
	[ "$(printf '%s\n' "$out" | grep -o '"n[1-4] after 500ms"' | sort -u | wc -l)" -eq 4 ] ||
		{ echo "mcp-parallel.sh: $what: the four answers did not come" >&2; exit 1; }
}
# times CMD...: bench/abtime's medians (us), one a line; fails loudly.
times() {
	"$top/bench/abtime" "$runs" "$@" || { echo "mcp-parallel.sh: a run failed" >&2; exit 1; }
}

printf '{"mcpServers": {"fake": {"command": "%s", "args": ["%s", "naps"]}}}\n' "$py" "$fake" >stdio.json
servers=
for i in 1 2 3 4 5 6; do
	servers+="\"s$i\": {\"command\": \"$py\", \"args\": [\"$fake\"], \"env\": {\"FAKE_INIT_DELAY\": \"0.3\"}},"
done
printf '{"mcpServers": {%s}}\n' "${servers%,}" >six.json
printf '{"mcpServers": {"s1": {"command": "%s", "args": ["%s"], "env": {"FAKE_INIT_DELAY": "0.3"}}}}\n' \
	"$py" "$fake" >one.json
naps stdio.ndjson fake_nap
naps stdio1.ndjson fake_nap 1
echo '{"text": "ok"}' >plain.ndjson
run="$bin/agent-run --no-store -m hi --model"
check stdio $run script/stdio.ndjson --mcp-config stdio.json

http=
if command -v node >/dev/null && [ -f "$mods/@modelcontextprotocol/sdk/package.json" ]; then
	MCP_MODULES=$mods PORTFILE=$work/port node "$top/tests/fixtures/mcp/http-server.cjs" 2>/dev/null &
	server=$!
	for _ in $(seq 100); do [ -s port ] && break; sleep 0.1; done
	[ -s port ] || { echo "mcp-parallel.sh: the HTTP fixture did not start" >&2; exit 1; }
	printf '{"mcpServers": {"fx": {"type": "http", "url": "http://127.0.0.1:%s/mcp"}}}\n' "$(cat port)" >http.json
	naps http.ndjson fx_nap
	naps http1.ndjson fx_nap 1
	check http $run script/http.ndjson --mcp-config http.json
	http=1
else
	echo "mcp-parallel.sh: no node or MCP SDK (scripts/mcp-servers): HTTP left out" >&2
fi

cmds=("$run script/stdio.ndjson --mcp-config stdio.json"
      "$run script/plain.ndjson --mcp-config stdio.json"
      "$run script/plain.ndjson --mcp-config one.json"
      "$run script/plain.ndjson --mcp-config six.json"
      "$run script/plain.ndjson"
      "$run script/stdio1.ndjson --mcp-config stdio.json")
[ -z "$http" ] || cmds+=("$run script/http.ndjson --mcp-config http.json"
                         "$run script/plain.ndjson --mcp-config http.json"
                         "$run script/http1.ndjson --mcp-config http.json")
medians=$(times "${cmds[@]}")
mapfile -t t <<<"$medians"
[ "${#t[@]}" -eq "${#cmds[@]}" ] || { echo "mcp-parallel.sh: a run failed" >&2; exit 1; }

ms() { awk -v us="$1" 'BEGIN { printf "%.0f", us / 1000 }'; }
echo "par4_stdio $(ms "${t[0]}") ms"
echo "idle_stdio $(ms "${t[1]}") ms"
echo "par4_stdio_round $(ms $(( t[0] - t[1] ))) ms (goal <= 600)"
echo "par1_stdio_round $(ms $(( t[5] - t[1] ))) ms"
if [ -n "$http" ]; then
	echo "par4_http $(ms "${t[6]}") ms"
	echo "idle_http $(ms "${t[7]}") ms"
	echo "par4_http_round $(ms $(( t[6] - t[7] ))) ms (goal <= 600)"
	echo "par1_http_round $(ms $(( t[8] - t[7] ))) ms"
fi
echo "plain $(ms "${t[4]}") ms"
echo "start1 $(ms "${t[2]}") ms"
echo "start6 $(ms "${t[3]}") ms"
echo "start6_serial $(ms $(( t[4] + 6 * (t[2] - t[4]) ))) ms"
echo "start_ratio $(awk -v a="${t[3]}" -v b="${t[2]}" 'BEGIN { printf "%.2f", a / b }')"
