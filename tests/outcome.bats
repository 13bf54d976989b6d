#!/usr/bin/env bats
# One outcome, three faces (DESIGN §9): a run's row status, its finish
# reason, its error and its exit code come from one value through one
# mapping, attached and detached alike.  Every failure source is run both
# ways; the text it fails with is plain ASCII for one source and holds
# bytes that are not UTF-8 (0xFF, a cut sequence) for the next, which must
# arrive as U+FFFD, never erase the message.  The sources: a tool, a
# custom agent's handler, a credential command, an MCP server's start-up,
# call and stray line, a provider's status and body.  The store as a
# source (a commit that fails: exit 111, the output naming the cause and
# the last committed row) is tests/full-disk.bats's, which needs a tmpfs.

load test_helper
load provider_helper

setup() {
	provider_setup
	export AGENTKIT_HTTP_RETRIES=0
	export AGENTKIT_HEARTBEAT_INTERVAL=100ms AGENTKIT_HEARTBEAT_TIMEOUT=10s
	export AGENTKIT_STDIN_TIMEOUT=0
	mkdir -p tools
}

teardown() { mock_stop; }

# tool NAME STDERR-PRINTF EXIT: a tool that fails that way.
tool() {
	printf '#!/bin/sh\ncat >/dev/null\nprintf '"'%s'"' >&2\nexit %s\n' "$2" "$3" >"tools/$1"
	chmod +x "tools/$1"
	echo '{"description": "fails"}' >"tools/$1.json"
}

# script REPLY...: the scripted model's replies: test_helper.bash's
# script(), but into model.ndjson of the current directory, not the test's.
script() { printf '%s\n' "$@" >model.ndjson; }

# agree EXIT MESSAGE AGENT-RUN-ARGS...: the run fails with exit EXIT and the
# error message MESSAGE (jq's -r text: U+FFFD for a bad byte), attached and
# detached: the output's error and finish reason, the row's status, finish
# reason and error (the turn's row attached, the finalized row detached),
# stderr, and agent-wait's exit all say the same.  Leaves the detached
# row's ID in $id.
agree() {
	local want=$1 msg=$2 out row
	shift 2
	run --separate-stderr agent-run "$@" -m hi
	[ "$status" = "$want" ] || fail "attached: exit $status, not $want: $stderr"
	out=$(last | jq -c '.output | [.finishReason, .error]')
	[ "$(last | jq -r .output.error.message)" = "$msg" ] ||
		fail "attached: the message is '$(last | jq -r .output.error.message)'"
	[ "$(last | jq -r .output.finishReason)" = failed ]
	[ "$stderr" = "agent-run: $msg" ] || fail "attached: stderr is '$stderr'"
	# A failure that committed nothing (a custom agent's, §9.1 18) ends at
	# the previous row: no row of its own to read.
	id=$(last | jq -r '.output.snapshotId // empty')
	if [ -n "$id" ]; then
		row=$(agent-snap "$id" | jq -c '[.finishReason, .error]')
		[ "$row" = "$out" ] || fail "attached: the row says $row, the output $out"
		[ "$(agent-snap "$id" | jq -r .status)" = failed ]
	fi

	run -0 --separate-stderr agent-run "$@" -m hi --detach
	id=$(last | jq -r .output.snapshotId)
	run --separate-stderr agent-wait --timeout 30s "$id"
	[ "$status" = "$want" ] || fail "detached: agent-wait exit $status, not $want"
	row=$(agent-snap "$id" | jq -c '[.finishReason, .error]')
	[ "$row" = "$out" ] || fail "detached: the row says $row, attached said $out"
	[ "$(agent-snap "$id" | jq -r .status)" = failed ]
}

@test "a tool's failure, ASCII: exit 1, the row failed with its error, attached and detached" {
	tool bad 'the disk is on fire\n' 3
	script '{"toolRequests":[{"name":"bad","ref":"1","input":{}}]}'
	agree 1 'generate: tool "bad" failed: exited with status 3: the disk is on fire' \
		--model script/model.ndjson --tool tools/bad.json
}

@test "a tool's failure, bytes that are not UTF-8: the same, each bad byte U+FFFD" {
	tool bad 'bad \377 stderr \342\202\n' 3
	script '{"toolRequests":[{"name":"bad","ref":"1","input":{}}]}'
	agree 1 $'generate: tool "bad" failed: exited with status 3: bad \uFFFD stderr \uFFFD\uFFFD' \
		--model script/model.ndjson --tool tools/bad.json
}

@test "a custom agent's handler, bytes that are not UTF-8: exit 1 and the row failed, attached and detached" {
	printf '#!/bin/sh\nprintf "handler \\377 broke\\n" >&2\nexit 4\n' >handler.sh
	chmod +x handler.sh
	agree 1 $'custom agent \'./handler.sh\' exited with status 4: handler \uFFFD broke' \
		--exec ./handler.sh
}

@test "a credential command's failure, ASCII: exit 1, UNAUTHENTICATED in the output and the row, attached and detached" {
	printf '#!/bin/sh\necho "not logged in" >&2\nexit 3\n' >cred.sh
	chmod +x cred.sh
	mkdir -p "$XDG_CONFIG_HOME/agentkit"
	cat >"$XDG_CONFIG_HOME/agentkit/models.json" <<-JSON
	{"endpoints": {"gw": {"dialect": "openai", "baseUrl": "http://127.0.0.1:9/v1",
	  "credentialCommand": ["$BATS_TEST_TMPDIR/cred.sh"]}}}
	JSON
	agree 1 'generate: gw: the credential command exited 3: not logged in' --model gw/m
	[ "$(agent-snap "$id" | jq -r .error.status)" = UNAUTHENTICATED ]
}

# mcp MODE: the fake MCP server (tests/fixtures/mcp/fake-server) in MODE.
mcp() {
	printf '{"mcpServers": {"fake": {"command": "%s", "args": ["%s"], "timeout": 1500}}}\n' \
		"$FIXTURES/mcp/fake-server" "$1" >mcp.json
}

@test "an MCP server's start-up, bytes that are not UTF-8: the {\"error\"} line and exit 1, attached and with --detach, and no row" {
	mcp badbytes
	script '{"text":"never"}'
	msg=$'mcp server \'fake\' wrote a line that is not a JSON-RPC message on stdout: \'Server v1.0 caf\uFFFD \uFFFD\uFFFD \uFFFD\uFFFD listening\' (an MCP server may write only JSON-RPC there; logs go to stderr) (stderr: fake-server: starting in badbytes mode (cwd '"$(basename "$PWD")"$', FAKE_ENV=-) fake-server: log caf\uFFFD \uFFFD\uFFFD \uFFFD\uFFFD)'
	# required (the agent names it): a server that is not required only warns
	for detach in "" --detach; do
		run -1 --separate-stderr agent-run --model script/model.ndjson --mcp-config mcp.json --tool 'fake/*' -m hi $detach
		[ "$(last | jq -r '.error | [.status, .message] | @tsv')" = "UNAVAILABLE	$msg" ]
		[ "$stderr" = "agent-run: $msg" ]
	done
	# nothing was written (on a store never opened, agent-snap finds none)
	[ "$(agent-snap sessions 2>/dev/null)" = "" ]
}

@test "an MCP call's JSON-RPC error, ASCII: exit 1 and the row failed, attached and detached" {
	mcp normal
	script '{"toolRequests":[{"name":"fake_rpcerror","ref":"1","input":{}}]}'
	agree 1 "generate: tool \"fake_rpcerror\" failed: mcp server 'fake': tools/call failed: database offline (code -32000) (stderr: fake-server: starting in normal mode (cwd $(basename "$PWD"), FAKE_ENV=-))" \
		--model script/model.ndjson --mcp-config mcp.json
}

@test "an MCP server's stray line mid-call, bytes that are not UTF-8: exit 1 and the row failed, attached and detached" {
	mcp badcall
	script '{"toolRequests":[{"name":"fake_garbage","ref":"1","input":{}}]}'
	agree 1 $'generate: tool "fake_garbage" failed: mcp server \'fake\' wrote a line that is not a JSON-RPC message on stdout: \'debug: caf\uFFFD \uFFFD\uFFFD \uFFFD\uFFFD\' (an MCP server may write only JSON-RPC there; logs go to stderr) (stderr: fake-server: starting in badcall mode (cwd '"$(basename "$PWD")"$', FAKE_ENV=-) fake-server: failing caf\uFFFD \uFFFD\uFFFD \uFFFD\uFFFD)' \
		--model script/model.ndjson --mcp-config mcp.json
}

# provider DIALECT TURN: the mock model server answers every call with TURN.
provider() {
	printf '%s\n' "$2" | jq -c '. + {repeat: 10}' >"$BATS_TEST_TMPDIR/turns.json"
	mock_start "$1" "$BATS_TEST_TMPDIR/turns.json" test-key-0123456789
}

@test "a provider's HTTP 429, ASCII: exit 1, RESOURCE_EXHAUSTED in the output and the row, attached and detached" {
	provider anthropic '{"status":429,"message":"slow down"}'
	agree 1 'generate: anthropic: HTTP 429 Too Many Requests: slow down (request id req_mock01)' \
		--model anthropic/claude-sonnet-4-5
	[ "$(agent-snap "$id" | jq -r .error.status)" = RESOURCE_EXHAUSTED ]
}

@test "a provider's HTTP 400 whose body is not UTF-8: exit 1 (a model failure, not 101), INVALID_ARGUMENT, attached and detached" {
	# "\u00ff" in bodyBytes is the byte 0xFF on the wire.
	provider openai '{"status":400,"bodyBytes":"{\"error\":{\"message\":\"bad \u00ff thing\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}"}'
	agree 1 $'generate: openai: HTTP 400 Bad Request: bad \uFFFD thing (request id req_mock01)' \
		--model openai/gpt-4o
	[ "$(agent-snap "$id" | jq -r .error.status)" = INVALID_ARGUMENT ]
}
