#!/usr/bin/env bats
# MCP calls and start-ups at the same time (docs/mcp.md "Parallel calls
# and start-ups"): a round's calls to one server multiplexed by JSON-RPC id
# over stdio (the python3 fake server's nap, answered from threads) and
# Streamable HTTP (the SDK fixture's nap), answers out of order, one call
# timing out while the others succeed, a server dying with calls
# outstanding, servers starting at once, and the spans of both.

load test_helper
load provider_helper

MODS="$TOP/bench/out/mcp/node_modules"
M="script/model.ndjson"
PIDS=()

teardown() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	mock_stop
}

setup() {
	provider_setup
	SERVER="$FIXTURES/mcp/fake-server"
	command -v python3 >/dev/null || skip "python3 is not installed"
	printf '{"mcpServers": {"fake": {"command": "%s", "args": ["naps"], "timeout": 1000}}}\n' "$SERVER" >mcp.json
}

# naps TOOL MS:TEXT...: one model message asking TOOL for each nap at
# once, then "done".
naps() {
	local tool=$1 out='{"toolRequests":[' i=0
	shift
	for a in "$@"; do
		i=$((i + 1))
		out+="{\"name\":\"$tool\",\"ref\":\"$i\",\"input\":{\"ms\":${a%%:*},\"text\":\"${a#*:}\"}},"
	done
	script "${out%,}]}" '{"text":"done"}'
}
# The tool responses of the turn, in the order the model is given them.
responses() { printf '%s\n' "$output" | jq -c 'select(.modelChunk.role == "tool") | [.modelChunk.content[].toolResponse | [.ref, .output]]'; }
# timed CMD...: run CMD (bats' run), $ms its wall time.
timed() {
	local t0
	t0=$(date +%s%N)
	"$@"
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
}
spans() { jq -c '(.body // .) | .resourceSpans[].scopeSpans[].spans[]' "$1"; }
# The string attribute KEY of each span named NAME, one a line.
attrs() { spans "$1" | jq -r --arg n "$2" --arg k "$3" 'select(.name == $n) | [.attributes[] | select(.key == $k) | .value.stringValue][0]'; }

@test "four 500 ms calls to one stdio server take about 500 ms, their results in the model's order" {
	naps fake_nap 500:a 500:b 500:c 500:d
	timed run -0 --separate-stderr agent-run --no-store --model $M --mcp-config mcp.json -m go
	[ "$(responses)" = '[["1","a after 500ms"],["2","b after 500ms"],["3","c after 500ms"],["4","d after 500ms"]]' ]
	[ "$(last | jq -r .output.message.content[0].text)" = done ]
	# one after another would be 2 s (and the start-up)
	[ "$ms" -lt 1500 ]
}

@test "answers that come out of order reach their own calls" {
	naps fake_nap 900:slow 500:b 300:c 10:first
	timed run -0 --separate-stderr agent-run --no-store --model $M --mcp-config mcp.json -m go
	[ "$(responses)" = '[["1","slow after 900ms"],["2","b after 500ms"],["3","c after 300ms"],["4","first after 10ms"]]' ]
	# one after another: 1.7 s
	[ "$ms" -lt 1500 ]
}

@test "the server's own requests during parallel calls are answered; the calls go on" {
	script '{"toolRequests":[{"name":"fake_nap","ref":"1","input":{"ms":400,"text":"a"}},{"name":"fake_ping","ref":"2","input":{}},{"name":"fake_roots","ref":"3","input":{}},{"name":"fake_nap","ref":"4","input":{"ms":300,"text":"b"}}]}' '{"text":"done"}'
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config mcp.json -m go
	[ "$(responses | jq -c '.[0], .[1], .[3]')" = '["1","a after 400ms"]
["2",{"pong":{"jsonrpc":"2.0","id":"s1","result":{}},"refused":{"jsonrpc":"2.0","id":"s2","error":{"code":-32601,"message":"Method not found"}}}]
["4","b after 300ms"]' ]
	[ "$(responses | jq -r '.[2][1].result.roots[0].name')" = "$(basename "$PWD")" ]
}

@test "one call that outlives its timeout fails alone; the others answered" {
	naps fake_nap 600:a 3000:late 600:c
	timed run -1 --separate-stderr agent-run --no-store --model $M --mcp-config mcp.json --trace-file t.ndjson -m go
	[ "$stderr" = "agent-run: generate: tool \"fake_nap\" failed: mcp server 'fake' did not answer tools/call within 1000 ms (stderr: fake-server: starting in naps mode (cwd $(basename "$PWD"), FAKE_ENV=-))" ]
	# the timeout's 1 s, not 2.2 s of calls one after another
	[ "$ms" -lt 1800 ]
	[ "$(spans t.ndjson | jq -c 'select(.name == "fake_nap") | .status.code' | tr '\n' ' ')" = '0 2 0 ' ]
	[ "$(spans t.ndjson | jq -r 'select(.name == "fake_nap" and .status.code == 2) | .status.message')" = "mcp server 'fake' did not answer tools/call within 1000 ms (stderr: fake-server: starting in naps mode (cwd $(basename "$PWD"), FAKE_ENV=-))" ]
}

@test "a server that dies with calls outstanding fails each of them as one call alone" {
	naps fake_nap 400:a 400:b
	# a third request that crashes the server while both nap
	sed -i 's/}}]}$/}},{"name":"fake_crash","ref":"3","input":{}}]}/' model.ndjson
	run -1 --separate-stderr agent-run --no-store --model $M --mcp-config mcp.json --trace-file t.ndjson -m go
	msg="mcp server 'fake' exited with status 3: fake-server: starting in naps mode (cwd $(basename "$PWD"), FAKE_ENV=-) fake-server: crashing on purpose (during tools/call)"
	[ "$stderr" = "agent-run: generate: tool \"fake_nap\" failed: $msg" ]
	[ "$(spans t.ndjson | jq -r 'select(.name == "fake_nap" or .name == "fake_crash") | .status.message' | sort -u)" = "$msg" ]
}

@test "servers start at the same time: three that take 1 s each to initialize start in about 1 s" {
	printf '{"mcpServers": {"a": {"command": "%s", "env": {"FAKE_INIT_DELAY": "1"}}, "b": {"command": "%s", "env": {"FAKE_INIT_DELAY": "1"}}, "c": {"command": "%s", "env": {"FAKE_INIT_DELAY": "1"}}}}\n' \
		"$SERVER" "$SERVER" "$SERVER" >three.json
	script '{"toolRequests":[{"name":"c_echo","ref":"1","input":{"text":"third"}}]}' '{"text":"done"}'
	timed run -0 --separate-stderr agent-run --no-store --model $M --mcp-config three.json --trace-file t.ndjson -m go
	[ "$(responses)" = '[["1","echo: third"]]' ]
	# one after another: 3 s
	[ "$ms" -lt 2500 ]
	# a span each, from its spawn to its tools listed, under the root span
	[ "$(attrs t.ndjson mcp.initialize agentkit.mcp.server | tr '\n' ' ')" = 'a b c ' ]
	[ "$(attrs t.ndjson mcp.initialize mcp.method.name | sort -u)" = initialize ]
	[ "$(attrs t.ndjson mcp.initialize mcp.protocol.version | sort -u)" = 2025-11-25 ]
	[ "$(attrs t.ndjson mcp.initialize network.transport | sort -u)" = pipe ]
	root=$(spans t.ndjson | jq -r 'select(.name == "inline") | .spanId')
	[ "$(spans t.ndjson | jq -r 'select(.name == "mcp.initialize") | .parentSpanId' | sort -u)" = "$root" ]
	[ "$(spans t.ndjson | jq -c 'select(.name == "mcp.initialize") | ((.endTimeUnixNano | tonumber) - (.startTimeUnixNano | tonumber)) >= 1e9' | sort -u)" = true ]
	# the tool span carries the conventions too
	[ "$(attrs t.ndjson c_echo mcp.method.name)" = tools/call ]
	[ "$(attrs t.ndjson c_echo gen_ai.tool.name)" = echo ]
	[ "$(attrs t.ndjson c_echo network.transport)" = pipe ]
	[ "$(attrs t.ndjson c_echo mcp.protocol.version)" = 2025-11-25 ]
}

@test "an optional server that fails to start: a failed mcp.initialize span, not the run's failure" {
	printf '{"mcpServers": {"ok": {"command": "%s"}, "gone": {"command": "/nonexistent/server", "optional": true}}}\n' "$SERVER" >two.json
	script '{"text":"done"}'
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config two.json --trace-file t.ndjson -m go
	[ "$(spans t.ndjson | jq -c 'select(.name == "mcp.initialize") | [(.attributes[] | select(.key == "agentkit.mcp.server") | .value.stringValue), .status.code]' | tr '\n' ' ')" = '["ok",0] ["gone",2] ' ]
	! spans t.ndjson | jq -e 'select(.name == "mcp.initialize") | .attributes[] | select(.key == "genkit:isFailureSource")'
}

@test "four 500 ms calls to one Streamable HTTP server take about 500 ms (concurrent POSTs); with a stdio server too" {
	command -v node >/dev/null || skip "node is not installed"
	[ -f "$MODS/@modelcontextprotocol/sdk/package.json" ] || skip "the MCP packages are not installed (run scripts/mcp-servers)"
	rm -f port
	MCP_MODULES="$MODS" PORTFILE="$PWD/port" node "$FIXTURES/mcp/http-server.cjs" 2>fixture.log &
	PIDS+=($!)
	wait_for 10 test -s port
	printf '{"mcpServers": {"fx": {"type": "http", "url": "http://127.0.0.1:%s/mcp"}}}\n' "$(cat port)" >h.json
	naps fx_nap 500:a 500:b 500:c 500:d
	timed run -0 --separate-stderr agent-run --no-store --model $M --mcp-config h.json --trace-file t.ndjson -m go
	[ "$(responses)" = '[["1","a after 500ms"],["2","b after 500ms"],["3","c after 500ms"],["4","d after 500ms"]]' ]
	[ "$ms" -lt 1500 ]
	naps fx_nap 600:slow 20:quick
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config h.json -m go
	[ "$(responses)" = '[["1","slow after 600ms"],["2","quick after 20ms"]]' ]
	# calls to a stdio server and an HTTP one overlap too
	printf '{"mcpServers": {"fake": {"command": "%s", "args": ["naps"]}, "fx": {"type": "http", "url": "http://127.0.0.1:%s/mcp"}}}\n' "$SERVER" "$(cat port)" >both.json
	script '{"toolRequests":[{"name":"fake_nap","ref":"1","input":{"ms":800,"text":"pipe"}},{"name":"fx_nap","ref":"2","input":{"ms":800,"text":"tcp"}}]}' '{"text":"done"}'
	timed run -0 --separate-stderr agent-run --no-store --model $M --mcp-config both.json -m go
	[ "$(responses)" = '[["1","pipe after 800ms"],["2","tcp after 800ms"]]' ]
	# one after another: 1.6 s
	[ "$ms" -lt 1500 ]
	# the session the server gave, on the start-up's span and the calls'
	sid=$(attrs t.ndjson mcp.initialize mcp.session.id)
	[[ $sid =~ ^[0-9a-f-]{36}$ ]]
	[ "$(attrs t.ndjson fx_nap mcp.session.id | sort -u)" = "$sid" ]
	[ "$(attrs t.ndjson fx_nap network.transport | sort -u)" = tcp ]
	[ "$(attrs t.ndjson mcp.initialize network.transport)" = tcp ]
}
