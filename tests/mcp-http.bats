#!/usr/bin/env bats
# agent-run and remote MCP servers (docs/mcp.md "Remote servers"):
# Streamable HTTP against a server written with the official TypeScript SDK
# (tests/fixtures/mcp/http-server.cjs) that wants a bearer token, and
# server-everything's own streamableHttp and sse modes; a shared config
# that mixes stdio, http and unusable entries.  Needs node and the pinned
# packages of scripts/mcp-servers.

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
	command -v node >/dev/null || skip "node is not installed"
	[ -f "$MODS/@modelcontextprotocol/sdk/package.json" ] &&
		[ -f "$MODS/@modelcontextprotocol/server-everything/dist/index.js" ] ||
		skip "the MCP packages are not installed (run scripts/mcp-servers)"
}

# fixture: start the SDK server (TOKEN=secret), $PORT its port.
fixture() {
	rm -f port
	MCP_MODULES="$MODS" TOKEN=secret PORTFILE="$PWD/port" node "$FIXTURES/mcp/http-server.cjs" 2>fixture.log &
	PIDS+=($!)
	for _ in $(seq 100); do [ -s port ] && break; sleep 0.1; done
	PORT=$(cat port)
}

# everything MODE: server-everything over HTTP, $EPORT its port.
everything() {
	EPORT=$(( 20000 + RANDOM % 20000 ))
	PORT=$EPORT node "$MODS/@modelcontextprotocol/server-everything/dist/index.js" "$1" >everything.log 2>&1 &
	PIDS+=($!)
	for _ in $(seq 100); do grep -q "$EPORT" everything.log 2>/dev/null && break; sleep 0.1; done
}

call() { script "{\"toolRequests\":[{\"name\":\"$1\",\"ref\":\"1\",\"input\":${2:-{\}}}]}" '{"text":"done"}'; }
response() { printf '%s\n' "$output" | jq -c 'select(.modelChunk.role == "tool") | .modelChunk.content[].toolResponse.output'; }

@test "Streamable HTTP with a bearer token from headers (\${VAR}, \$VAR) and a credential command" {
	fixture
	printf '{"mcpServers": {"fx": {"type": "http", "url": "http://127.0.0.1:%s/mcp", "headers": {"Authorization": "Bearer ${TK}"}}}}\n' "$PORT" >a.json
	TK=secret run -0 --separate-stderr agent-run --mcp-config a.json --mcp-list
	[ "$(printf '%s\n' "$output" | jq -r .name | tr '\n' ' ')" = 'fx_echo fx_drop fx_drop_get fx_seen fx_nap fx_die ' ]
	[ -z "$stderr" ]
	call fx_echo '{"text":"over http"}'
	TK=secret run -0 --separate-stderr agent-run --no-store --model $M --mcp-config a.json -m go
	[ "$(response)" = '"echo: over http"' ]
	# Gemini CLI's httpUrl and $VAR
	printf '{"mcpServers": {"fx": {"httpUrl": "http://127.0.0.1:%s/mcp", "headers": {"Authorization": "Bearer $TK"}}}}\n' "$PORT" >g.json
	TK=secret run -0 --separate-stderr agent-run --no-store --model $M --mcp-config g.json -m go
	[ "$(response)" = '"echo: over http"' ]
	# a credential command's token, never in a message
	printf '#!/bin/sh\necho "{\\"token\\": \\"secret\\", \\"expiresIn\\": 3600}"\n' >cred
	chmod +x cred
	printf '{"mcpServers": {"fx": {"url": "http://127.0.0.1:%s/mcp", "credentialCommand": ["%s/cred"]}}}\n' "$PORT" "$PWD" >c.json
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config c.json --tool 'fx/*' -m go
	[ "$(response)" = '"echo: over http"' ]
}

@test "a 401 names the server and says how to give a token" {
	fixture
	printf '{"mcpServers": {"fx": {"type": "http", "url": "http://127.0.0.1:%s/mcp", "headers": {"Authorization": "Bearer wrong"}}}}\n' "$PORT" >a.json
	run -1 --separate-stderr agent-run --mcp-config a.json --mcp-list
	[ "$stderr" = "agent-run: mcp server 'fx' (http://127.0.0.1:$PORT/mcp) answered 401 Unauthorized: give it a token in the entry's \"headers\" (\"Authorization\": \"Bearer \${TOKEN}\") or a \"credentialCommand\" (agentkit does not run OAuth's browser sign-in) (during initialize)" ]
	[ -z "$output" ]
	[[ $stderr != *wrong* ]]
	# required by the agent: the run fails naming it
	script '{"text":"never"}'
	run -1 --separate-stderr agent-run --no-store --model $M --mcp-config a.json --tool 'fx/*' -m go
	[[ $stderr == "agent-run: mcp server 'fx' (http://127.0.0.1:$PORT/mcp) answered 401 Unauthorized: "* ]]
}

@test "a dropped answer stream is resumed with Last-Event-ID; so is the GET stream" {
	fixture
	printf '{"mcpServers": {"fx": {"type": "http", "url": "http://127.0.0.1:%s/mcp", "headers": {"Authorization": "Bearer secret"}}}}\n' "$PORT" >a.json
	call fx_drop
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config a.json -m go
	[ "$(response)" = '"answered after the drop"' ]
	script '{"toolRequests":[{"name":"fx_drop_get","ref":"1","input":{}}]}' \
		'{"toolRequests":[{"name":"fx_seen","ref":"2","input":{}}]}' '{"text":"done"}'
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config a.json -m go
	seen=$(printf '%s\n' "$output" | jq -c 'select(.modelChunk.role == "tool") | .modelChunk.content[0].toolResponse.output' | tail -n 1)
	# run 1: its GET stream (no id yet), the answer's stream resumed with its
	# last id; run 2: its GET stream, opened again after the drop with the
	# id of the event it carried
	[ "$(jq length <<<"$seen")" -eq 4 ]
	[ "$(jq -r '.[0], .[2]' <<<"$seen" | tr '\n' ' ')" = 'null null ' ]
	[[ $(jq -r '.[1]' <<<"$seen") == *-*_[0-9]* ]]
	[[ $(jq -r '.[3]' <<<"$seen") == _GET_stream_[0-9]* ]]
}

@test "a server that dies mid-stream fails the call naming it" {
	fixture
	printf '{"mcpServers": {"fx": {"type": "http", "url": "http://127.0.0.1:%s/mcp", "headers": {"Authorization": "Bearer secret"}}}}\n' "$PORT" >a.json
	call fx_die
	run -1 --separate-stderr agent-run --no-store --model $M --mcp-config a.json -m go
	# the server's death is seen either on the stream it cut or on the
	# reconnect that resumes it: libcurl's words for either, whole
	prefix="agent-run: generate: tool \"fx_die\" failed: mcp server 'fx' cannot be reached at http://127.0.0.1:$PORT/mcp: "
	case $stderr in
	"${prefix}Recv failure: Connection reset by peer (during tools/call)") ;;
	"${prefix}Failed to connect to 127.0.0.1 port $PORT after "[0-9]*" ms: Couldn't connect to server (during tools/call)") ;;
	*) fail "$stderr" ;;
	esac
}

@test "server-everything's streamableHttp and sse modes; a bare url falls back to HTTP+SSE" {
	everything streamableHttp
	printf '{"mcpServers": {"ev": {"type": "http", "url": "http://127.0.0.1:%s/mcp"}}}\n' "$EPORT" >s.json
	call ev_echo '{"message":"streamed"}'
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config s.json -m go
	[ "$(response)" = '"Echo: streamed"' ]
	everything sse
	printf '{"mcpServers": {"old": {"type": "sse", "url": "http://127.0.0.1:%s/sse"}, "auto": {"url": "http://127.0.0.1:%s/sse"}}}\n' "$EPORT" "$EPORT" >l.json
	call old_echo '{"message":"legacy"}'
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config l.json -m go
	[ "$(response)" = '"Echo: legacy"' ]
	call auto_echo '{"message":"fallback"}'
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config l.json -m go
	[ "$(response)" = '"Echo: fallback"' ]
}

@test "a shared .mcp.json mixing stdio, http and unusable entries never poisons a run" {
	fixture
	command -v python3 >/dev/null || skip "python3 is not installed"
	printf '{"mcpServers": {"local": {"command": "%s"}, "fx": {"type": "http", "url": "http://127.0.0.1:%s/mcp", "headers": {"Authorization": "Bearer secret"}}, "ws": {"type": "websocket", "url": "ws://x"}, "nocmd": {"args": ["x"]}, "down": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}}\n' \
		"$FIXTURES/mcp/fake-server" "$PORT" >.mcp.json
	script '{"toolRequests":[{"name":"fx_echo","ref":"1","input":{"text":"a"}},{"name":"local_echo","ref":"2","input":{"text":"b"}}]}' '{"text":"done"}'
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config .mcp.json -m go
	[ "$(response | tr '\n' ' ')" = '"echo: a" "echo: b" ' ]
	# (libcurl counts the connect's time until it is looked at: the servers
	# start at once, and down's outcome is taken after the others')
	[[ $stderr == "agent-run: mcp config .mcp.json: server 'ws': unknown type 'websocket' (agentkit takes \"stdio\", \"http\" and \"sse\") (not required: the run goes on without its tools)
agent-run: mcp config .mcp.json: server 'nocmd': 'command' must be a non-empty string (not required: the run goes on without its tools)
agent-run: mcp server 'down' cannot be reached at http://127.0.0.1:1/mcp: Failed to connect to 127.0.0.1 port 1 after "[0-9]*" ms: Couldn't connect to server (during initialize) (not required: the run goes on without its tools)" ]]
	# an entry the agent names is required: the run fails naming it
	script '{"text":"never"}'
	run -100 --separate-stderr agent-run --no-store --model $M --mcp-config .mcp.json --tool 'ws/*' -m go
	[ "$stderr" = "agent-run: mcp config .mcp.json: server 'ws': unknown type 'websocket' (agentkit takes \"stdio\", \"http\" and \"sse\")
try 'agent-run --help'" ]
	run -1 --separate-stderr agent-run --no-store --model $M --mcp-config .mcp.json --tool 'down/*' -m go
	[[ ${stderr##*$'\n'} == "agent-run: mcp server 'down' cannot be reached at http://127.0.0.1:1/mcp: "*"Couldn't connect to server (during initialize)" ]]
	[ "$(jq -r .error.status <<<"$output")" = UNAVAILABLE ]
}
