#!/usr/bin/env bats
# agent-run and MCP servers: the configuration, the stdio client against a
# python3 fake server (tests/fixtures/mcp/fake-server), MCP tools called by
# a scripted model, and --mcp-list (docs/mcp.md).

load test_helper
load provider_helper

teardown() { mock_stop; }

setup() {
	provider_setup
	SERVER="$FIXTURES/mcp/fake-server"
	command -v python3 >/dev/null || skip "python3 is not installed"
	# mode, then extra members of the server entry
	config normal
}

config() {
	local mode=$1
	shift
	printf '{"mcpServers": {"fake": {"command": "%s", "args": ["%s"], "env": {"FAKE_ENV": "${FAKE_VALUE:-unset}"}, "startupTimeout": "%s", "timeout": 1500%s}}}\n' \
		"$SERVER" "$mode" "${STARTUP:-2s}" "${1:+, $1}" >mcp.json
}

call() { script "{\"toolRequests\":[{\"name\":\"$1\",\"ref\":\"1\",\"input\":${2:-{\}}}]}" '{"text":"done"}'; }
M="script/model.ndjson"
# The one tool response of the turn, from its tool chunk.
response() { printf '%s\n' "$output" | jq -c 'select(.modelChunk.role == "tool") | .modelChunk.content[0].toolResponse'; }

@test "--mcp-list: one NDJSON line per tool, task-only tools left out, names mapped" {
	run -0 --separate-stderr agent-run --mcp-config mcp.json --mcp-list
	[ "$(printf '%s\n' "$output" | jq -r .name | tr '\n' ' ')" = 'fake_echo fake_sum fake_json fake_oops fake_rpcerror fake_crash fake_garbage fake_sleep fake_meta fake_ping fake_image fake_link fake_dotted_name fake_linktext fake_big fake_caps fake_roots fake_elicit ' ]
	[ "$(printf '%s\n' "$output" | head -n 1)" = '{"server":"fake","name":"fake_echo","mcpName":"echo","description":"Echo the text.","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"text":{"type":"string"}},"required":["text"]},"annotations":{"readOnlyHint":true}}' ]
	[ "$(printf '%s\n' "$output" | jq -c 'select(.mcpName == "json")')" = '{"server":"fake","name":"fake_json","mcpName":"json","description":null,"inputSchema":{"type":"object"},"annotations":null}' ]
	[ "$(printf '%s\n' "$output" | jq -r 'select(.mcpName == "dotted.name") | .name')" = fake_dotted_name ]
	[ -z "$stderr" ]
}

@test "--mcp-list follows tools/list pages to the end" {
	config paged
	run -0 --separate-stderr agent-run --mcp-config mcp.json --mcp-list
	[ "$(printf '%s\n' "$output" | wc -l)" -eq 18 ]
	[ "$(printf '%s\n' "$output" | tail -n 1 | jq -r .mcpName)" = elicit ]
}

@test "--mcp-list NAME lists one server; an unknown one is a usage error" {
	printf '{"mcpServers": {"other": {"command": "%s"}}}\n' "$SERVER" >other.json
	run -0 --separate-stderr agent-run --mcp-config mcp.json --mcp-config other.json --mcp-list other
	[ "$(printf '%s\n' "$output" | jq -r .server | sort -u)" = other ]
	run -100 --separate-stderr agent-run --mcp-config mcp.json --mcp-list nosuch
	[ "$stderr" = "agent-run: no mcp server 'nosuch' is configured
try 'agent-run --help'" ]
	run -100 --separate-stderr agent-run --mcp-list
	[ "${stderr%%$'\n'*}" = "agent-run: --mcp-list needs --mcp-config FILE or \$AGENTKIT_MCP_CONFIG" ]
}

@test "AGENTKIT_MCP_CONFIG names the files when no --mcp-config is given" {
	printf '{"mcpServers": {"other": {"command": "%s"}}}\n' "$SERVER" >other.json
	AGENTKIT_MCP_CONFIG="$PWD/mcp.json::other.json" run -0 --separate-stderr agent-run --mcp-list
	[ "$(printf '%s\n' "$output" | jq -r .server | sort -u | tr '\n' ' ')" = 'fake other ' ]
	AGENTKIT_MCP_CONFIG=/nonexistent run -0 --separate-stderr agent-run --mcp-config other.json --mcp-list
}

@test "\${VAR} and \${VAR:-default} expand; an unset variable is a usage error naming it" {
	printf '{"mcpServers": {"fake": {"command": "%s", "args": ["${MODE}"], "env": {"FAKE_ENV": "${FAKE_VALUE:-dflt}"}}}}\n' "$SERVER" >vars.json
	call fake_meta
	# required (the agent names it): a usage error; else a warning
	run -100 --separate-stderr agent-run --no-store --model $M --mcp-config vars.json --tool 'fake/*' -m go
	[ "$stderr" = "agent-run: mcp config vars.json: server 'fake': args[0]: variable 'MODE' is not set (set it, or write \${MODE:-default})
try 'agent-run --help'" ]
	[ -z "$output" ]
	# the server saw its arguments and environment expanded (its stderr says so)
	call fake_crash
	MODE=normal FAKE_VALUE=set run -1 --separate-stderr agent-run --no-store --model $M --mcp-config vars.json -m go
	[[ $stderr == *"starting in normal mode (cwd "*", FAKE_ENV=set)"* ]]
	MODE=normal run -1 --separate-stderr agent-run --no-store --model $M --mcp-config vars.json -m go
	[[ $stderr == *"FAKE_ENV=dflt)"* ]]
}

@test "malformed configurations are named; stdio only; a server twice is a usage error" {
	echo '{"servers": {}}' >bad.json
	run -101 --separate-stderr agent-run --mcp-config bad.json --mcp-list
	[ "$stderr" = "agent-run: mcp config bad.json: no \"mcpServers\" object" ]
	echo '{"mcpServers": {"web": {"type": "ws", "url": "wss://example.com/mcp"}}}' >http.json
	run -1 --separate-stderr agent-run --mcp-config http.json --mcp-list
	[ "$stderr" = "agent-run: mcp config http.json: server 'web': unknown type 'ws' (agentkit takes \"stdio\", \"http\" and \"sse\")" ]
	run -100 --separate-stderr agent-run --mcp-config mcp.json --mcp-config mcp.json --mcp-list
	[ "${stderr%%$'\n'*}" = "agent-run: mcp server 'fake' is configured twice: in mcp.json and in mcp.json" ]
	echo '{"mcpServers": {"off": {"command": "nosuch", "disabled": true}}}' >off.json
	run -0 --separate-stderr agent-run --mcp-config off.json --mcp-config mcp.json --mcp-list
}

@test "two tools that map to one name are a usage error naming both servers; long names are shortened" {
	printf '{"mcpServers": {"a.b": {"command": "%s"}, "a_b": {"command": "%s"}}}\n' "$SERVER" "$SERVER" >two.json
	script '{"text":"never"}'
	run -100 --separate-stderr agent-run --no-store --model $M --mcp-config two.json -m go
	[ "$stderr" = "agent-run: mcp tool 'echo' of server 'a.b' and tool 'echo' of server 'a_b' are both named 'a_b_echo' for the model
try 'agent-run --help'" ]
	[ -z "$output" ]
	long=server-with-a-name-far-longer-than-any-provider-accepts-for-a-tool
	printf '{"mcpServers": {"%s": {"command": "%s"}, "9lives": {"command": "%s"}}}\n' "$long" "$SERVER" "$SERVER" >long.json
	run -0 --separate-stderr agent-run --mcp-config long.json --mcp-list
	names=$(printf '%s\n' "$output" | jq -r .name)
	[ "$(grep -c . <<<"$names")" -eq 36 ]
	# each fits ^[A-Za-z_][A-Za-z0-9_-]{0,63}$, and all differ
	[ -z "$(grep -vE '^[A-Za-z_][A-Za-z0-9_-]{0,63}$' <<<"$names")" ]
	[ "$(sort -u <<<"$names" | wc -l)" -eq 36 ]
	[ "$(grep -m1 '^_9lives' <<<"$names")" = _9lives_echo ]
	first=$(head -n 1 <<<"$names")
	[ "${#first}" -eq 64 ] && [[ $first == server-with-a-name-far-longer-than-any-provider-accepts_* ]]
	# stable: the same name in every run
	run -0 --separate-stderr agent-run --mcp-config long.json --mcp-list
	[ "$(printf '%s\n' "$output" | head -n 1 | jq -r .name)" = "$first" ]
}

@test "includeTools, excludeTools (which wins) and prefix choose and name the tools" {
	config normal '"includeTools": ["echo", "sum", "json"], "excludeTools": ["json", "nosuch"], "prefix": "db."'
	run -0 --separate-stderr agent-run --mcp-config mcp.json --mcp-list
	[ "$(printf '%s\n' "$output" | jq -c '[.name, .mcpName]' | tr -d '\n')" = '["db_echo","echo"]["db_sum","sum"]' ]
	config normal '"prefix": ""'
	run -0 --separate-stderr agent-run --mcp-config mcp.json --mcp-list
	[ "$(printf '%s\n' "$output" | head -n 1 | jq -r .name)" = echo ]
	config normal '"includeTools": "echo"'
	run -1 --separate-stderr agent-run --mcp-config mcp.json --mcp-list
	[ "$stderr" = "agent-run: mcp config mcp.json: server 'fake': 'includeTools' must be a list of tool names" ]
}

@test "an optional server that fails is a warning; the run goes on without its tools" {
	printf '{"mcpServers": {"gone": {"command": "no-such-mcp-server", "optional": true}, "fake": {"command": "%s"}}}\n' "$SERVER" >opt.json
	call fake_echo '{"text":"still here"}'
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config opt.json -m go
	[ "$stderr" = "agent-run: mcp server 'gone' exited with status 127: cannot execute 'no-such-mcp-server': No such file or directory (during initialize) (not required: the run goes on without its tools)" ]
	[ "$(response | jq -c .output)" = '"echo: still here"' ]
	# --mcp-list, a health check, still says it failed
	run -1 --separate-stderr agent-run --mcp-config opt.json --mcp-list
	[ "$(printf '%s\n' "$output" | jq -r .server | sort -u)" = fake ]
}

@test "MCP tools through a scripted model: text, structured output, JSON text, media, links" {
	script '{"toolRequests":[{"name":"fake_echo","ref":"1","input":{"text":"hi"}},{"name":"fake_sum","ref":"2","input":{"a":2,"b":3}},{"name":"fake_json","ref":"3","input":{}},{"name":"fake_image","ref":"4","input":{}},{"name":"fake_link","ref":"5","input":{}}]}' '{"text":"done"}'
	run -0 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[ "$(last | jq -c '[.output.state.messages[2].content[].toolResponse | [.name, .ref, .output, .content]]')" = '[["fake_echo","1","echo: hi",null],["fake_sum","2",{"sum":5},null],["fake_json","3",{"a":[1,2]},null],["fake_image","4","a dot",[{"media":{"contentType":"image/png","url":"data:image/png;base64,iVBORw0K"}}]],["fake_link","5","Resource Link: a.txt at file:///tmp/a.txt",null]]' ]
	[ "$(last | jq -r .output.message.content[0].text)" = done ]
	[ -z "$stderr" ]
}

@test "the providers are offered the MCP tools with their schemas (Gemini's without \$schema)" {
	for dialect in openai gemini; do
		printf '%s\n' '{"tools":[{"name":"fake_echo","args":{"text":"hi"},"id":"call_1"}]}' \
			'{"text":"said hi"}' >turns.ndjson
		mock_start $dialect turns.ndjson sk-test-1234
		run -0 --separate-stderr agent-run --no-store --model "$(model_for $dialect)" --mcp-config mcp.json -m go
		[ "$(last | jq -r .output.message.content[0].text)" = "said hi" ] || fail "$dialect: $output $stderr"
		[ "$(response | jq -c .output)" = '"echo: hi"' ]
		[ "$(jq -s '.[0].body | tostring | contains("fake_echo") and contains("Echo the text.")' "$MOCK_LOG")" = true ]
		[ "$(jq -s '.[1].body | tostring | contains("echo: hi")' "$MOCK_LOG")" = true ]
		mock_stop
	done
	[ "$(jq -s '.[0].body | tostring | contains("$schema")' "$MOCK_LOG")" = false ]
}

@test "every call carries _meta: a progress token, the session, snapshot and turn" {
	call fake_meta
	run -0 --separate-stderr agent-run --model $M --mcp-config mcp.json -m go
	sid=$(last | jq -r .output.sessionId)
	snap=$(last | jq -r .output.snapshotId)
	[ "$(response | jq -c '.output | [(.progressToken | type), .["dev.agentkit/sessionId"], .["dev.agentkit/snapshotId"], .["dev.agentkit/turnIndex"]]')" = "[\"number\",\"$sid\",\"$snap\",0]" ]
}

@test "the server's ping is answered, its other requests refused with -32601" {
	call fake_ping
	run -0 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[ "$(response | jq -c .output)" = '{"pong":{"jsonrpc":"2.0","id":"s1","result":{}},"refused":{"jsonrpc":"2.0","id":"s2","error":{"code":-32601,"message":"Method not found"}}}' ]
}

@test "isError is an {\"error\"} output and the turn goes on" {
	call fake_oops
	run -0 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[ "$(response | jq -c .output)" = '{"error":"no such row"}' ]
	[ "$(last | jq -r .output.message.content[0].text)" = done ]
	# text mode shows it as the tool's error
	run -0 --separate-stderr agent-run --no-store --format text --model $M --mcp-config mcp.json -m go
	[ "$output" = done ]
	[ "$(sed -n 2p <<<"$stderr")" = 'tool fake_oops error no such row' ]
}

@test "arguments that fail the inputSchema go back to the model as a tool error, the server not called; the next call succeeds" {
	# fake_echo: text a required string
	script '{"toolRequests":[{"name":"fake_echo","ref":"1","input":{"text":5}}]}' \
		'{"toolRequests":[{"name":"fake_echo","ref":"2","input":{}}]}' \
		'{"toolRequests":[{"name":"fake_echo","ref":"3","input":{"text":"hi"}}]}' '{"text":"done"}'
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config mcp.json --trace-file t.ndjson -m go
	[ "$(printf '%s\n' "$output" | jq -c 'select(.modelChunk.role == "tool") | .modelChunk.content[0].toolResponse.output')" = '{"error":"invalid arguments for tool '"'"'fake_echo'"'"': /text: expected a string, got a number"}
{"error":"invalid arguments for tool '"'"'fake_echo'"'"': missing required property \"text\""}
"echo: hi"' ]
	[ "$(last | jq -r .output.message.content[0].text)" = done ]
	[ -z "$stderr" ]
	# One tools/call reached the server: the rejected calls' spans are
	# their own, with no MCP request under them.
	[ "$(jq -c '(.body // .) | .resourceSpans[].scopeSpans[].spans[] | select(.name == "fake_echo") | .status.code' t.ndjson | tr '\n' ' ')" = '2 2 0 ' ]
	# the schemas mode's nullable: kind must be "memo", nothing else allowed
	config schemas '"includeTools": ["nullable"]'
	script '{"toolRequests":[{"name":"fake_nullable","ref":"1","input":{"kind":"todo"}},{"name":"fake_nullable","ref":"2","input":{"note":"x","extra":1}}]}' \
		'{"toolRequests":[{"name":"fake_nullable","ref":"3","input":{"note":null,"kind":"memo"}}]}' '{"text":"done"}'
	run -0 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[ "$(printf '%s\n' "$output" | jq -c 'select(.modelChunk.role == "tool") | [.modelChunk.content[].toolResponse.output]')" = '[{"error":"invalid arguments for tool '"'"'fake_nullable'"'"': /kind: must be \"memo\""},{"error":"invalid arguments for tool '"'"'fake_nullable'"'"': unexpected property \"extra\""}]
[{"kind":"memo","note":null}]' ]
	[ "$(last | jq -r .output.message.content[0].text)" = done ]
}

@test "with max turns 1 an argument error ends the run aborted (2)" {
	script '{"toolRequests":[{"name":"fake_echo","ref":"1","input":{"text":5}}]}' \
		'{"toolRequests":[{"name":"fake_echo","ref":"2","input":{"text":"hi"}}]}' '{"text":"done"}'
	run -2 --separate-stderr agent-run --no-store --model $M --mcp-config mcp.json --max-turns 1 -m go
	[ "$(response | jq -c .output)" = '{"error":"invalid arguments for tool '"'"'fake_echo'"'"': /text: expected a string, got a number"}' ]
	[ "$(last | jq -c '.output | [.finishReason, .error]')" = '["aborted",{"status":"ABORTED","message":"generate: exceeded maximum tool call iterations (1)"}]' ]
}

@test "a provider's model is sent the argument error as the tool's result" {
	printf '%s\n' '{"tools":[{"name":"fake_echo","args":{"text":5},"id":"call_1"}]}' \
		'{"tools":[{"name":"fake_echo","args":{"text":"hi"},"id":"call_2"}]}' '{"text":"said hi"}' >turns.ndjson
	mock_start openai turns.ndjson sk-test-1234
	run -0 --separate-stderr agent-run --no-store --model "$(model_for openai)" --mcp-config mcp.json -m go
	[ "$(last | jq -r .output.message.content[0].text)" = "said hi" ]
	[ "$(jq -s -c '.[1].body.messages[-1] | [.role, .tool_call_id, .content]' "$MOCK_LOG")" = '["tool","call_1","{\"error\":\"invalid arguments for tool '"'"'fake_echo'"'"': /text: expected a string, got a number\"}"]' ]
	[ "$(jq -s -c '.[2].body.messages[-1] | [.role, .tool_call_id, .content]' "$MOCK_LOG")" = '["tool","call_2","echo: hi"]' ]
}

@test "a JSON-RPC error fails the call like a failing tool, with the server's stderr" {
	call fake_rpcerror
	run -1 --separate-stderr agent-run --model $M --mcp-config mcp.json -m go
	[ "$stderr" = "agent-run: generate: tool \"fake_rpcerror\" failed: mcp server 'fake': tools/call failed: database offline (code -32000) (stderr: fake-server: starting in normal mode (cwd $(basename "$PWD"), FAKE_ENV=unset))" ]
	[ "$(last | jq -c .output.error.status)" = '"INTERNAL"' ]
}

@test "a server that crashes mid-call fails the call with its exit and stderr" {
	call fake_crash
	run -1 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[ "$stderr" = "agent-run: generate: tool \"fake_crash\" failed: mcp server 'fake' exited with status 3: fake-server: starting in normal mode (cwd $(basename "$PWD"), FAKE_ENV=unset) fake-server: crashing on purpose (during tools/call)" ]
}

@test "garbage on stdout mid-call is an error naming the server, not a hang" {
	call fake_garbage
	run -1 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[[ $stderr == "agent-run: generate: tool \"fake_garbage\" failed: mcp server 'fake' wrote a line that is not a JSON-RPC message on stdout: 'debug: this is not JSON' (an MCP server may write only JSON-RPC there; logs go to stderr) (stderr: fake-server: starting"* ]]
}

@test "a call that outlives the server's timeout fails DEADLINE_EXCEEDED; the server is ended" {
	call fake_sleep
	start=$(date +%s)
	FAKE_PIDFILE=$PWD/server.pid run -1 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[[ $stderr == "agent-run: generate: tool \"fake_sleep\" failed: mcp server 'fake' did not answer tools/call within 1500 ms (stderr: "* ]]
	# 1.5 s of call, then stdin closed, 2 s, SIGTERM: well under the server's 30 s sleep
	[ $(( $(date +%s) - start )) -lt 15 ]
	[ -s server.pid ] && ! kill -0 "$(cat server.pid)" 2>/dev/null
}

@test "start-up failures: silent, a banner on stdout, a newer protocol, a missing command" {
	script '{"text":"never"}'
	# a server that says it started, then nothing: a shell, which has said
	# so long before the deadline even on a busy machine (python3 may not)
	printf '#!/bin/sh\necho "silent-server: starting (FAKE_ENV=$FAKE_ENV)" >&2\nexec sleep 30\n' >silent.sh
	chmod +x silent.sh
	printf '{"mcpServers": {"fake": {"command": "./silent.sh", "env": {"FAKE_ENV": "${FAKE_VALUE:-unset}"}, "startupTimeout": "2s"}}}\n' >silent.json
	run -1 --separate-stderr agent-run --no-store --model $M --mcp-config silent.json --tool 'fake/*' -m go
	[ "$stderr" = "agent-run: mcp server 'fake' did not answer initialize within 2000 ms (stderr: silent-server: starting (FAKE_ENV=unset))" ]
	[ "$output" = "{\"error\":{\"status\":\"DEADLINE_EXCEEDED\",\"message\":\"mcp server 'fake' did not answer initialize within 2000 ms (stderr: silent-server: starting (FAKE_ENV=unset))\"}}" ]
	config banner
	run -1 --separate-stderr agent-run --no-store --model $M --mcp-config mcp.json --tool 'fake/*' -m go
	[[ $stderr == "agent-run: mcp server 'fake' wrote a line that is not a JSON-RPC message on stdout: 'Server v1.0 listening on stdio' (an MCP server may write only JSON-RPC there; logs go to stderr) (stderr: "* ]]
	[ "$(jq -r .error.status <<<"$output")" = UNAVAILABLE ]
	config newer
	run -1 --separate-stderr agent-run --no-store --model $M --mcp-config mcp.json --tool 'fake/*' -m go
	[[ $stderr == "agent-run: mcp server 'fake' answered protocol version '2099-01-01'; agentkit speaks 2025-11-25, 2025-06-18 and 2025-03-26 (stderr: "* ]]
	echo '{"mcpServers": {"gone": {"command": "no-such-mcp-server"}}}' >gone.json
	run -1 --separate-stderr agent-run --no-store --model $M --mcp-config gone.json --tool 'gone/*' -m go
	[[ $stderr == "agent-run: mcp server 'gone' exited with status 127: cannot execute 'no-such-mcp-server': No such file or directory"* ]]
	# not required (the agent names no tool of it): a warning, the run goes on
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config gone.json -m go
	[ "$stderr" = "agent-run: mcp server 'gone' exited with status 127: cannot execute 'no-such-mcp-server': No such file or directory (during initialize) (not required: the run goes on without its tools)" ]
}

@test "--mcp-list exits 1 naming the server that failed, and lists the others" {
	printf '{"mcpServers": {"broken": {"command": "%s", "args": ["newer"]}, "ok": {"command": "%s"}}}\n' "$SERVER" "$SERVER" >two.json
	run -1 --separate-stderr agent-run --mcp-config two.json --mcp-list
	[[ $stderr == "agent-run: mcp server 'broken' answered protocol version '2099-01-01';"* ]]
	[ "$(printf '%s\n' "$output" | jq -r .server | sort -u)" = ok ]
}

@test "the server runs in cwd, without a shell, with no provider key unless its env names one" {
	mkdir -p srvdir
	config normal '"cwd": "srvdir"'
	call fake_crash
	OPENAI_API_KEY=sk-test run -1 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[[ $stderr == *"(cwd srvdir, FAKE_ENV=unset)"* ]]
	# a shell would expand this; the server gets it as is
	printf '{"mcpServers": {"fake": {"command": "%s", "args": ["$$HOME;x"]}}}\n' "$SERVER" >lit.json
	OPENAI_API_KEY=sk-test run -1 --separate-stderr agent-run --no-store --model $M --mcp-config lit.json -m go
	[[ $stderr == *'starting in $HOME;x mode'* ]]
	cat >env.py <<-'PY'
	#!/usr/bin/env python3
	import os, sys
	sys.stderr.write("key=%s\n" % os.environ.get("OPENAI_API_KEY", "none"))
	PY
	chmod +x env.py
	printf '{"mcpServers": {"e": {"command": "./env.py"}, "k": {"command": "./env.py", "env": {"OPENAI_API_KEY": "${OPENAI_API_KEY}"}}}}\n' >keys.json
	OPENAI_API_KEY=sk-test run -1 --separate-stderr agent-run --mcp-config keys.json --mcp-list e
	[[ $stderr == *"key=none"* ]]
	OPENAI_API_KEY=sk-test run -1 --separate-stderr agent-run --mcp-config keys.json --mcp-list k
	[[ $stderr == *"key=sk-test"* ]]
}

@test "--describe lists the MCP tools among the agent's tools" {
	run -0 --separate-stderr agent-run --model echo --mcp-config mcp.json --describe
	[ "$(jq -c '[.tools[].name] | .[0:3]' <<<"$output")" = '["fake_echo","fake_sum","fake_json"]' ]
	[ "$(jq -c '.tools[0]' <<<"$output")" = '{"name":"fake_echo","description":"Echo the text.","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}' ]
}

# The pinned reference servers (scripts/mcp-servers), run with node.
reference_servers() {
	local mods="$TOP/bench/out/mcp/node_modules/@modelcontextprotocol"
	command -v node >/dev/null || skip "node is not installed"
	[ -f "$mods/server-everything/dist/index.js" ] && [ -f "$mods/server-filesystem/dist/index.js" ] ||
		skip "the reference MCP servers are not installed (run scripts/mcp-servers)"
	mkdir -p root
	echo "hello file" >root/note.txt
	printf '{"mcpServers": {"everything": {"command": "node", "args": ["%s"]}, "fs": {"command": "node", "args": ["%s", "%s"]}}}\n' \
		"$mods/server-everything/dist/index.js" "$mods/server-filesystem/dist/index.js" "$PWD/root" >ref.json
}

@test "reference servers: --mcp-list lists both, the task-only tool left out" {
	reference_servers
	run -0 --separate-stderr agent-run --mcp-config ref.json --mcp-list
	names=$(printf '%s\n' "$output" | jq -r .name)
	grep -qx everything_get-tiny-image <<<"$names"
	grep -qx fs_read_text_file <<<"$names"
	! grep -q simulate-research-query <<<"$names"
	[ "$(printf '%s\n' "$output" | jq -c 'select(.name == "fs_read_text_file") | [.server, .mcpName, .annotations.readOnlyHint]')" = '["fs","read_text_file",true]' ]
	# they log to stderr; agent-run keeps it to itself
	[ -z "$stderr" ]
}

@test "reference servers: text, structured content, an image, resource links, isError" {
	reference_servers
	script '{"toolRequests":[{"name":"everything_echo","ref":"1","input":{"message":"hi"}},{"name":"everything_get-structured-content","ref":"2","input":{"location":"New York"}},{"name":"everything_get-tiny-image","ref":"3","input":{}},{"name":"everything_get-resource-links","ref":"4","input":{"count":1}},{"name":"fs_read_text_file","ref":"5","input":{"path":"'"$PWD"'/root/note.txt"}},{"name":"fs_read_text_file","ref":"6","input":{"path":"/etc/passwd"}}]}' '{"text":"done"}'
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config ref.json -m go
	tr=$(printf '%s\n' "$output" | jq -c 'select(.modelChunk.role == "tool") | .modelChunk.content[].toolResponse')
	[ "$(jq -c 'select(.ref == "1") | .output' <<<"$tr")" = '"Echo: hi"' ]
	[ "$(jq -c 'select(.ref == "2") | .output | keys' <<<"$tr")" = '["conditions","humidity","temperature"]' ]
	[ "$(jq -c 'select(.ref == "3") | [.content[].media.contentType, (.content[0].media.url | startswith("data:image/png;base64,iVBOR"))]' <<<"$tr")" = '["image/png",true]' ]
	[[ $(jq -r 'select(.ref == "4") | .output' <<<"$tr") == *"Resource Link: "*" at demo://resource/"* ]]
	[ "$(jq -c 'select(.ref == "5") | .output' <<<"$tr")" = '{"content":"hello file\n"}' ]
	[[ $(jq -r 'select(.ref == "6") | .output.error' <<<"$tr") == "Access denied - path outside allowed directories: /etc/passwd"* ]]
	[ "$(last | jq -r .output.message.content[0].text)" = done ]
}

@test "reference servers: get-env shows the server no provider key" {
	reference_servers
	script '{"toolRequests":[{"name":"everything_get-env","ref":"1","input":{}}]}' '{"text":"done"}'
	OPENAI_API_KEY=sk-test-secret MCP_VISIBLE=yes run -0 --separate-stderr agent-run --no-store --model $M --mcp-config ref.json -m go
	env=$(response | jq -r .output)
	[[ $env == *MCP_VISIBLE* ]]
	[[ $env != *sk-test-secret* ]]
}

@test "a detached worker starts its own servers; the caller's are ended" {
	call fake_meta
	FAKE_PIDFILE=$PWD/server.pid run -0 --separate-stderr agent-run --model $M --mcp-config mcp.json --detach -m go
	id=$(jq -r .output.snapshotId <<<"$output")
	sid=$(jq -r .output.sessionId <<<"$output")
	run -0 --separate-stderr timeout 20 agent-wait "$id"
	[ "$(jq -c '[.status, (.state.messages[2].content[0].toolResponse.output | .["dev.agentkit/sessionId"])]' <<<"$output")" = "[\"completed\",\"$sid\"]" ]
	# the worker's own server wrote the file last; it is gone with the worker
	[ -s server.pid ]
	for _ in $(seq 50); do kill -0 "$(cat server.pid)" 2>/dev/null || break; sleep 0.1; done
	! kill -0 "$(cat server.pid)" 2>/dev/null
}

@test "SIGINT during an MCP call: the call is cancelled, the turn aborted, the server ended" {
	printf '{"mcpServers": {"fake": {"command": "%s", "timeout": "60s"}}}\n' "$SERVER" >slow.json
	call fake_sleep
	FAKE_PIDFILE=$PWD/server.pid env --default-signal=INT agent-run --no-store --model $M \
		--mcp-config slow.json -m go >out 2>err 3>&- &
	pid=$!
	for _ in $(seq 100); do [ -s server.pid ] && break; sleep 0.05; done
	sleep 0.5       # the call is in flight: the server sleeps in it
	kill -INT "$pid"
	rc=0
	timeout 20 tail --pid="$pid" -f /dev/null || true
	wait "$pid" || rc=$?
	[ "$rc" -eq 2 ]
	[ "$(tail -n 1 out | jq -c '[.output.finishReason, .output.error.status]')" = '["aborted","CANCELLED"]' ]
	[ "$(cat err)" = "agent-run: stopped" ]
	! kill -0 "$(cat server.pid)" 2>/dev/null
}

@test "a prompt's front matter mcpServers: starts its servers; one also in a file is a usage error" {
	mkdir -p agents
	cp "$SERVER" agents/fake-server
	# a relative command is the prompt file's, as its other paths
	cat >agents/helper.prompt <<-EOF2
	---
	model: script/model.ndjson
	mcpServers:
	  fake:
	    command: ./fake-server
	    args: ["normal"]
	---
	You help.
	EOF2
	script '{"toolRequests":[{"name":"fake_echo","ref":"1","input":{"text":"from the prompt"}}]}' '{"text":"done"}'
	cp model.ndjson agents/
	run -0 --separate-stderr agent-run --no-store helper -m go
	[ "$(response | jq -c .output)" = '"echo: from the prompt"' ]
	mkdir -p elsewhere && cd elsewhere
	run -0 --separate-stderr agent-run --no-store --agents ../agents helper -m go
	[ "$(response | jq -c .output)" = '"echo: from the prompt"' ]
	cd ..
	run -100 --separate-stderr agent-run --no-store helper --mcp-config mcp.json -m go
	[ "$stderr" = "agent-run: mcp server 'fake' is configured twice: in mcp.json and in agents/helper.prompt
try 'agent-run --help'" ]
	printf -- '---\nmodel: echo\nmcpServers: [1]\n---\nhi\n' >agents/bad.prompt
	run -101 --separate-stderr agent-run --no-store bad -m go
	[ "$stderr" = "agent-run: agents/bad.prompt: mcpServers must be an object of servers" ]
}

@test "traced: an MCP call is a tool span, and its _meta carries that span's traceparent and the tracestate" {
	call fake_meta
	run -0 --separate-stderr env TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 \
		TRACESTATE=vendor=x agent-run --no-store --model $M --mcp-config mcp.json \
		--trace-file t.ndjson -m go
	tp=$(response | jq -r '.output.traceparent')
	[ "$(response | jq -r '.output.tracestate')" = vendor=x ]
	span=$(jq -c '.resourceSpans[].scopeSpans[].spans[] | select(.name == "fake_meta")' t.ndjson)
	[ -n "$span" ]
	[ "$(printf '%s' "$span" | jq -r .traceId)" = 0af7651916cd43dd8448eb211c80319c ]
	[ "$tp" = "00-0af7651916cd43dd8448eb211c80319c-$(printf '%s' "$span" | jq -r .spanId)-01" ]
	# untraced, no traceparent at all
	run -0 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[ "$(response | jq -c '.output | has("traceparent")')" = false ]
}

@test "notifications/tools/list_changed: the next model call lists the server's tools again" {
	config changes
	printf '%s\n' '{"tools":[{"name":"fake_echo","args":{"text":"hi"},"id":"call_1"}]}' \
		'{"tools":[{"name":"fake_fresh","args":{},"id":"call_2"}]}' '{"text":"done"}' >turns.ndjson
	mock_start openai turns.ndjson sk-test-1234
	run -0 --separate-stderr agent-run --no-store --model "$(model_for openai)" --mcp-config mcp.json -m go
	[ "$(last | jq -c '[.output.state.messages[] | select(.role == "tool") | .content[0].toolResponse.output]')" = '["echo: hi","fresh"]' ]
	names() { jq -s -c ".[$1].body.tools | map(.function.name) | map(select(. == \"fake_fresh\" or . == \"fake_sleep\"))" "$MOCK_LOG"; }
	[ "$(names 0)" = '["fake_sleep"]' ]
	[ "$(names 1)" = '["fake_fresh"]' ]
	[ "$(names 2)" = '["fake_fresh"]' ]
	[ -z "$stderr" ]
}

@test "a prompt's tools: NAME/* and NAME/tool select the MCP tools offered; unknown ones are usage errors" {
	mkdir -p agents/tools
	printf '{"name":"local","description":"A local tool.","command":["true"]}\n' >agents/tools/local.json
	printf '{"mcpServers": {"other": {"command": "%s", "prefix": "o_"}}}\n' "$SERVER" >other.json
	tools() { printf -- '---\nmodel: echo\ntools: %s\n---\nYou help.\n' "$1" >agents/pick.prompt; }
	described() { jq -c '[.tools[].name]' <<<"$output"; }
	tools '[local, fake/echo, fake/sum]'
	run -0 --separate-stderr agent-run --agents agents --mcp-config mcp.json --mcp-config other.json pick --describe
	[ "$(described)" = '["local","fake_echo","fake_sum"]' ]
	tools '[other/*]'
	run -0 --separate-stderr agent-run --agents agents --mcp-config mcp.json --mcp-config other.json pick --describe
	[ "$(jq -c '[.tools[].name] | [length, .[0], (map(select(startswith("fake_"))) | length)]' <<<"$output")" = '[18,"o_echo",0]' ]
	# only local: no MCP tool at all
	tools '[local]'
	run -0 --separate-stderr agent-run --agents agents --mcp-config mcp.json pick --describe
	[ "$(described)" = '["local"]' ]
	# no tools: list: every tool of every server, as with --mcp-config alone
	printf -- '---\nmodel: echo\n---\nYou help.\n' >agents/all.prompt
	run -0 --separate-stderr agent-run --agents agents --mcp-config mcp.json all --describe
	[ "$(jq '.tools | length' <<<"$output")" = 18 ]
	# a selected tool is called; one not selected is not the agent's
	tools '[fake/echo]'
	script '{"toolRequests":[{"name":"fake_echo","ref":"1","input":{"text":"picked"}}]}' '{"text":"done"}'
	run -0 --separate-stderr agent-run --no-store --agents agents --mcp-config mcp.json --model $M pick -m go
	[ "$(response | jq -c .output)" = '"echo: picked"' ]
	call fake_sum '{"a":1,"b":2}'
	run -4 --separate-stderr agent-run --no-store --agents agents --mcp-config mcp.json --model $M pick -m go
	[ "$stderr" = 'agent-run: generate: tool "fake_sum" not found' ]
	tools '[fake/nosuch]'
	run -100 --separate-stderr agent-run --agents agents --mcp-config mcp.json pick --describe
	[ "$stderr" = "agent-run: tool 'fake/nosuch': mcp server 'fake' has no tool 'nosuch'
try 'agent-run --help'" ]
	tools '[nosrv/*]'
	run -100 --separate-stderr agent-run --agents agents --mcp-config mcp.json pick --describe
	[ "$stderr" = "agent-run: tool 'nosrv/*': no mcp server 'nosrv' is configured
try 'agent-run --help'" ]
	# an optional server that cannot start: its entries give nothing, not an error
	printf '{"mcpServers": {"gone": {"command": "/nonexistent/server", "optional": true}}}\n' >gone.json
	tools '[local, gone/*, gone/echo]'
	run -0 --separate-stderr agent-run --agents agents --mcp-config gone.json pick --describe
	[ "$(described)" = '["local"]' ]
	[[ $stderr == *"(not required: the run goes on without its tools)"* ]]
}

@test "a server manifest tools/NAME.mcp.json on the tool path serves an agent that lists NAME/*" {
	mkdir -p agents/tools
	cp "$SERVER" agents/tools/fake-server
	# a relative command is the manifest's directory's, as an executable tool's
	printf '{"command": "./fake-server", "args": ["normal"], "includeTools": ["echo", "sum"]}\n' >agents/tools/mine.mcp.json
	printf -- '---\nmodel: script/model.ndjson\ntools: [mine/*]\n---\nYou help.\n' >agents/man.prompt
	script '{"toolRequests":[{"name":"mine_echo","ref":"1","input":{"text":"manifest"}}]}' '{"text":"done"}'
	cp model.ndjson agents/
	mkdir -p elsewhere && cd elsewhere
	run -0 --separate-stderr agent-run --no-store --agents ../agents man -m go
	[ "$(response | jq -c .output)" = '"echo: manifest"' ]
	run -0 --separate-stderr agent-run --agents ../agents man --describe
	[ "$(jq -c '[.tools[].name]' <<<"$output")" = '["mine_echo","mine_sum"]' ]
	cd ..
	# a server configured by name wins over the manifest; without a selection it is not read
	printf '{"mcpServers": {"mine": {"command": "%s", "includeTools": ["json"]}}}\n' "$SERVER" >mine.json
	run -0 --separate-stderr agent-run --agents agents --mcp-config mine.json man --describe
	[ "$(jq -c '[.tools[].name]' <<<"$output")" = '["mine_json"]' ]
	printf -- '---\nmodel: echo\n---\nYou help.\n' >agents/none.prompt
	run -0 --separate-stderr agent-run --agents agents none --describe
	[ "$(jq -c '.tools' <<<"$output")" = '[]' ]
	printf '{"args": []}\n' >agents/tools/bad.mcp.json
	printf -- '---\nmodel: echo\ntools: [bad/*]\n---\nYou help.\n' >agents/bad.prompt
	run -101 --separate-stderr agent-run --agents agents bad --describe
	[[ $stderr == *"agents/tools/bad.mcp.json"* ]]
}

@test "--verbose shows the server's stderr prefixed; a detached worker's log keeps it" {
	call fake_echo '{"text":"hi"}'
	run -0 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[ -z "$stderr" ]
	run -0 --separate-stderr agent-run --verbose --no-store --model $M --mcp-config mcp.json -m go
	[ "$stderr" = "agent-run: mcp fake: fake-server: starting in normal mode (cwd $(basename "$PWD"), FAKE_ENV=unset)" ]
	run -0 --separate-stderr agent-run --verbose --mcp-config mcp.json --mcp-list
	[ "$stderr" = "agent-run: mcp fake: fake-server: starting in normal mode (cwd $(basename "$PWD"), FAKE_ENV=unset)" ]
	# the worker's own server, in the worker's log (the caller shows nothing without --verbose)
	call fake_crash
	run -0 --separate-stderr agent-run --model $M --mcp-config mcp.json --detach -m go
	[ -z "$stderr" ]
	id=$(jq -r .output.snapshotId <<<"$output")
	run -1 --separate-stderr timeout 20 agent-wait "$id"
	[ "$(jq -r .status <<<"$output")" = failed ]
	run -0 --separate-stderr agent-snap worker-log "$id"
	# as the worker's other lines: "TIME agent-run[PID]: mcp fake: ..."
	[[ $output == *"Z agent-run["*"]: mcp fake: fake-server: starting in normal mode"* ]]
	[[ $output == *"Z agent-run["*"]: mcp fake: fake-server: crashing on purpose"* ]]
}

@test "Gemini: a schema beyond its Schema subset goes as parametersJsonSchema, the mock's checks pass" {
	config schemas '"includeTools": ["echo", "nullable"]'
	printf '%s\n' '{"tools":[{"name":"fake_nullable","args":{"note":null,"kind":"memo"},"id":"call_1"}]}' \
		'{"text":"noted"}' >turns.ndjson
	mock_start gemini turns.ndjson sk-test-1234
	run -0 --separate-stderr agent-run --no-store --model "$(model_for gemini)" --mcp-config mcp.json -m go
	[ "$(last | jq -r .output.message.content[0].text)" = noted ] || fail "$output $stderr"
	[ "$(response | jq -c .output)" = '{"kind":"memo","note":null}' ]
	[ "$(jq -s -c '.[0].body.tools[0].functionDeclarations' "$MOCK_LOG")" = '[{"name":"fake_echo","description":"Echo the text.","parameters":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}},{"name":"fake_nullable","description":"Take a nullable note.","parametersJsonSchema":{"type":"object","additionalProperties":false,"properties":{"note":{"type":["string","null"]},"kind":{"$ref":"#/$defs/kind"}},"$defs":{"kind":{"const":"memo"}}}}]' ]
	mock_stop
	# the mock answers such a schema in "parameters" as Gemini does
	printf '%s\n' '{"contents":[{"role":"user","parts":[{"text":"x"}]}],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"object","properties":{"n":{"type":["string","null"]}}}}]}]}' >req.json
	mock_start gemini turns.ndjson sk-test-1234
	run curl -s -H 'x-goog-api-key: sk-test-1234' -H 'content-type: application/json' --data @req.json "$GEMINI_BASE_URL/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
	[[ $output == *"Proto field is not repeating, cannot start list."* ]] || fail "$output"
}

@test "a result past the server's maxResultBytes is a tool error the model sees; up to it goes whole" {
	config normal '"maxResultBytes": "4K"'
	big=$(head -c 6000 /dev/zero | tr '\0' x)
	script "{\"toolRequests\":[{\"name\":\"fake_echo\",\"ref\":\"1\",\"input\":{\"text\":\"$big\"}}]}" \
		'{"toolRequests":[{"name":"fake_echo","ref":"2","input":{"text":"again"}}]}' '{"text":"done"}'
	run -0 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[ "$(last | jq -r .output.message.content[0].text)" = done ] || fail "$output $stderr"
	[ "$(printf '%s\n' "$output" | jq -c 'select(.modelChunk.role == "tool") | .modelChunk.content[0].toolResponse.output')" = '{"error":"mcp server '"'fake'"' answered with more than 4096 bytes (its maxResultBytes); it cannot be called again in this run"}
{"error":"mcp server '"'fake'"' answered with more than 4096 bytes (its maxResultBytes); it cannot be called again in this run"}' ]
	# just under the limit: whole
	call fake_big
	export FAKE_BIG=4000
	run -0 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[ "$(response | jq -r '.output | length')" = 4000 ]
}

@test "a resource link is a line of its own between text blocks" {
	call fake_linktext
	run -0 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[ "$(response | jq -c .output)" = '"see\nResource Link: a.txt at file:///tmp/a.txt\nand more"' ]
}

@test "roots are advertised and roots/list answers the working directory as a file:// URI" {
	mkdir -p 'dir with space%'
	cd 'dir with space%'
	cp ../mcp.json .
	call fake_caps
	cp ../model.ndjson .
	run -0 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[ "$(response | jq -c .output)" = '{"roots":{}}' ] || fail "$output $stderr"
	call fake_roots
	cp ../model.ndjson .
	run -0 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	uri="file://$(python3 -c 'import os, urllib.parse; print(urllib.parse.quote(os.getcwd()))')"
	[[ $uri == *dir%20with%20space%25 ]]
	[ "$(response | jq -c .output)" = '{"jsonrpc":"2.0","id":"r1","result":{"roots":[{"uri":"'"$uri"'","name":"dir with space%"}]}}' ]
}

@test "elicitation/create off a terminal is declined" {
	call fake_elicit
	run -0 --separate-stderr agent-run --no-store --model $M --mcp-config mcp.json -m go </dev/null
	[ "$(response | jq -c .output)" = '{"jsonrpc":"2.0","id":"e1","result":{"action":"decline"}}' ] || fail "$output $stderr"
}

# at_tty INPUT CMD...: CMD on a terminal of its own (script(1)'s, not the
# helpers' script), INPUT typed at it; the terminal's text in tty.out.
at_tty() {
	local input=$1
	shift
	printf "%s" "$input" | command script -qec "$(printf "%q " "$@")" tty.out >/dev/null 2>&1
}

@test "elicitation/create on a terminal asks the person: answered, declined, cancelled" {
	requires script
	schema='{"type":"object","properties":{"branch":{"type":"string","title":"Branch","description":"to deploy"},"count":{"type":"integer"},"force":{"type":"boolean","default":false},"env":{"type":"string","enum":["dev","prod"]},"tags":{"type":"array","items":{"enum":["a","b","c"]}}},"required":["branch","env"]}'
	call fake_elicit "{\"message\":\"Deploy \u001b[31mwhere\u001b[0m?\",\"schema\":$schema}"
	# an answer per field: a refused one is asked again; a server's escape bytes are shown as ?
	at_tty $'y\nmain\nthree\n3\n\n2\na, c\n' agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	grep -q "mcp server 'fake' asks: Deploy ?\[31mwhere?\[0m?" tty.out
	grep -q "  Branch: to deploy (branch, text, required): " tty.out
	grep -q "  not a whole number" tty.out
	grep -q "  env (env, one of: 1 dev, 2 prod, required): " tty.out
	output=$(sed -n 's/\r$//; /^{/p' tty.out)
	[ "$(response | jq -c .output.result)" = '{"action":"accept","content":{"branch":"main","count":3,"force":false,"env":"prod","tags":["a","c"]}}' ] || fail "$(cat tty.out)"
	# the capability is advertised only where a person can answer
	call fake_caps
	at_tty '' agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	output=$(sed -n 's/\r$//; /^{/p' tty.out)
	[ "$(response | jq -c .output)" = '{"roots":{},"elicitation":{"form":{}}}' ] || fail "$(cat tty.out)"
	call fake_elicit
	at_tty $'n\n' agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	output=$(sed -n 's/\r$//; /^{/p' tty.out)
	[ "$(response | jq -c .output.result)" = '{"action":"decline"}' ]
	at_tty $'c\n' agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	output=$(sed -n 's/\r$//; /^{/p' tty.out)
	[ "$(response | jq -c .output.result)" = '{"action":"cancel"}' ]
}

@test "a session resumed by a second agent-run calls the MCP tools again, its history kept" {
	# the script model answers by the count of model messages so far
	script '{"toolRequests":[{"name":"fake_echo","ref":"1","input":{"text":"one"}}]}' '{"text":"done"}' \
		'{"toolRequests":[{"name":"fake_echo","ref":"2","input":{"text":"two"}}]}' '{"text":"done"}'
	run -0 --separate-stderr agent-run --model $M --mcp-config mcp.json -m go
	sid=$(last | jq -r .output.sessionId)
	run -0 --separate-stderr agent-run --model $M --mcp-config mcp.json --session "$sid" -m again
	[ "$(last | jq -r .output.sessionId)" = "$sid" ]
	run -0 --separate-stderr agent-snap --session "$sid"
	[ "$(printf '%s\n' "$output" | jq -c '[.state.messages[].content[] | .toolResponse.output // empty]')" = '["echo: one","echo: two"]' ]
}

# ---- servers that misbehave: none of them wedges the run ----

# A server that pings without reading its stdin, with a timeout of 60 s.
stall() {
	printf '{"mcpServers": {"fake": {"command": "%s", "args": ["pingflood"], "timeout": "60s"}}}\n' \
		"$SERVER" >stall.json
}
# ended PID: it ends within 10 s, else it and the server are killed and the test fails.
ended() {
	timeout 10 tail --pid="$1" -f /dev/null && return 0
	kill -KILL "$1" "$(cat server.pid)" 2>/dev/null
	return 1
}
flooding() { echo "fake-server: starting in pingflood mode (cwd $(basename "$PWD"), FAKE_ENV=unset) fake-server: flooding"; }

@test "a server that pings without reading its stdin: the call's timeout fails it, naming the server; it is killed" {
	call fake_echo '{"text":"hi"}'
	config pingflood
	FAKE_PINGS=5000 FAKE_PIDFILE=$PWD/server.pid run -1 --separate-stderr timeout 30 agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[ "$stderr" = "agent-run: generate: tool \"fake_echo\" failed: mcp server 'fake' did not answer tools/call within 1500 ms: it stopped reading its input (stderr: $(flooding))" ]
	[ "$(last | jq -c '[.output.finishReason, .output.error.status]')" = '["failed","INTERNAL"]' ]
	! kill -0 "$(cat server.pid)" 2>/dev/null
	# pings without end: its read-ahead reaches maxResultBytes first
	config pingflood '"maxResultBytes": 65536'
	FAKE_PIDFILE=$PWD/server.pid run -1 --separate-stderr timeout 30 agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[ "$stderr" = "agent-run: generate: tool \"fake_echo\" failed: mcp server 'fake' wrote more than 65536 bytes without reading its input (during tools/call) (stderr: $(flooding))" ]
	! kill -0 "$(cat server.pid)" 2>/dev/null
}

@test "SIGTERM while a server that stopped reading holds the call: aborted at once, the final line, the server ended" {
	stall
	call fake_echo '{"text":"hi"}'
	FAKE_PINGS=5000 FAKE_PIDFILE=$PWD/server.pid agent-run --no-store --model $M \
		--mcp-config stall.json -m go >out 2>err 3>&- &
	pid=$!
	wait_for 10 test -s server.pid
	sleep 1         # the pings are read, the answers fill its stdin
	kill -TERM "$pid"
	ended "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 2 ]
	[ "$(tail -n 1 out | jq -c '[.output.finishReason, .output.error.status]')" = '["aborted","CANCELLED"]' ]
	[ "$(cat err)" = "agent-run: stopped by SIGTERM" ]
	wait_for 10 eval '! kill -0 "$(cat server.pid)" 2>/dev/null'
}

@test "agent-abort of a detached run held by a server that stopped reading: it heartbeats, then ends aborted" {
	stall
	call fake_echo '{"text":"hi"}'
	export AGENTKIT_HEARTBEAT_INTERVAL=100ms
	FAKE_PINGS=5000 FAKE_PIDFILE=$PWD/server.pid run -0 --separate-stderr agent-run --model $M --mcp-config stall.json --detach -m go
	id=$(jq -r .output.snapshotId <<<"$output")
	log="$(logs_dir)/$id.log"
	wait_for 10 grep -q "fake-server: flooding" "$log"
	worker=$(sed -n '1s/.*agent-run\[\([0-9]*\)\].*/\1/p' "$log")
	sleep 1         # the answers fill its stdin
	# the heartbeat goes on while the call is stuck
	b1=$(agent-snap -m "$id" | jq -r .heartbeatAt)
	wait_for 10 eval '[ "$(agent-snap -m "$id" | jq -r .heartbeatAt)" != "$b1" ]'
	run -0 agent-abort "$id"
	ended "$worker"
	run -2 --separate-stderr timeout 20 agent-wait "$id"
	[ "$(jq -c '[.status, .finishReason]' <<<"$output")" = '["aborted","aborted"]' ]
	wait_for 10 eval '! kill -0 "$(cat server.pid)" 2>/dev/null'
}

@test "bytes that are not UTF-8 from a server become U+FFFD: the message and the final line are kept" {
	script '{"text":"never"}'
	config badbytes
	run -1 --separate-stderr agent-run --no-store --model $M --mcp-config mcp.json --tool 'fake/*' -m go
	msg="mcp server 'fake' wrote a line that is not a JSON-RPC message on stdout: 'Server v1.0 caf� �� �� listening' (an MCP server may write only JSON-RPC there; logs go to stderr) (stderr: fake-server: starting in badbytes mode (cwd $(basename "$PWD"), FAKE_ENV=unset) fake-server: log caf� �� ��)"
	[ "$stderr" = "agent-run: $msg" ]
	[ "$(jq -c .error <<<"$output")" = "$(jq -nc --arg m "$msg" '{status: "UNAVAILABLE", message: $m}')" ]
	# --verbose passes its stderr on, valid
	run -1 --separate-stderr agent-run --verbose --no-store --model $M --mcp-config mcp.json --tool 'fake/*' -m go
	[ "${stderr%%$'\n'*}" = "agent-run: mcp fake: fake-server: starting in badbytes mode (cwd $(basename "$PWD"), FAKE_ENV=unset)" ]
	[ "$(sed -n 2p <<<"$stderr")" = "agent-run: mcp fake: fake-server: log caf� �� ��" ]
	# mid-call: a result's text, a stray line and stderr
	config badcall
	call fake_echo '{"text":"hi"}'
	run -0 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	[ "$(response | jq -c .output)" = '"caf� �� ��"' ]
	call fake_garbage
	run -1 --separate-stderr agent-run --no-store --format ndjson --model $M --mcp-config mcp.json -m go
	msg="generate: tool \"fake_garbage\" failed: mcp server 'fake' wrote a line that is not a JSON-RPC message on stdout: 'debug: caf� �� ��' (an MCP server may write only JSON-RPC there; logs go to stderr) (stderr: fake-server: starting in badcall mode (cwd $(basename "$PWD"), FAKE_ENV=unset) fake-server: failing caf� �� ��)"
	[ "$stderr" = "agent-run: $msg" ]
	[ "$(last | jq -c .output.error)" = "$(jq -nc --arg m "$msg" '{status: "INTERNAL", message: $m}')" ]
}

@test "SIGTERM or SIGINT during a silent server's start-up: aborted before the first turn, at once; the servers ended" {
	script '{"text":"never"}'
	# the three start at once: ok and later answer, fake (optional) never
	# answers initialize within its 30 s; the agent selects tools of all three
	printf '{"mcpServers": {"ok": {"command": "%s", "env": {"FAKE_PIDFILE": "%s/ok.pid"}}, "fake": {"command": "%s", "args": ["silent"], "startupTimeout": "30s", "optional": true, "env": {"FAKE_PIDFILE": "%s/server.pid"}}, "later": {"command": "%s", "env": {"FAKE_PIDFILE": "%s/later.pid"}}}}\n' \
		"$SERVER" "$PWD" "$SERVER" "$PWD" "$SERVER" "$PWD" >startup.json
	mkdir agents
	printf -- '---\ntools: [fake/*, later/echo, ok/echo]\n---\n{{history}}\n' >agents/a.prompt
	for sig in TERM INT; do
		rm -f ./*.pid
		env --default-signal=INT agent-run a --model $M --mcp-config startup.json -m go \
			</dev/null >out 2>err 3>&- &
		pid=$!
		wait_for 10 test -s server.pid
		kill -"$sig" "$pid"
		ended "$pid"
		rc=0
		wait "$pid" || rc=$?
		[ "$rc" -eq 2 ]
		[ "$(wc -l <out)" -eq 1 ]
		[ "$(jq -c '.output | [.finishReason, .error, has("snapshotId")]' out)" = '["aborted",{"status":"CANCELLED","message":"context canceled"},false]' ]
		[ "$(cat err)" = "agent-run: stopped$([ "$sig" = INT ] || echo " by SIGTERM")" ]
		! kill -0 "$(cat server.pid)" 2>/dev/null
		wait_for 10 eval '! kill -0 "$(cat ok.pid)" 2>/dev/null'
		wait_for 10 eval '! kill -0 "$(cat later.pid)" 2>/dev/null'
	done
	run -0 agent-snap sessions
	[ -z "$output" ]
}

@test "agent-abort of a detached run while its worker's own server is silent at start-up: it ends aborted at once" {
	call fake_echo '{"text":"hi"}'
	# the caller's server answers; the worker's own (the second) never does
	STARTUP=30s config normal
	FAKE_ONCE=$PWD/once FAKE_PIDFILE=$PWD/server.pid run -0 --separate-stderr agent-run --model $M --mcp-config mcp.json --detach -m go
	id=$(jq -r .output.snapshotId <<<"$output")
	log="$(logs_dir)/$id.log"
	wait_for 10 grep -q "fake-server: starting in silent mode" "$log"
	worker=$(sed -n '1s/.*agent-run\[\([0-9]*\)\].*/\1/p' "$log")
	run -0 agent-abort "$id"
	ended "$worker"
	run -2 --separate-stderr timeout 20 agent-wait "$id"
	[ "$(jq -c '[.status, .finishReason]' <<<"$output")" = '["aborted","aborted"]' ]
	wait_for 10 eval '! kill -0 "$(cat server.pid)" 2>/dev/null'
}
