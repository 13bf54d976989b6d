#!/usr/bin/env bats
# Secrets stay where they belong (docs/providers.md "Keys and secrets"): a
# tool cannot read the provider keys from its parent's /proc files, and a
# password or key in a provider URL never reaches a message, a row or a
# worker log.

load test_helper
load provider_helper

setup() { provider_setup; }
teardown() { mock_stop; }

PEEK="$TOP/tests/fixtures/secrets/peek.json"
KEY=sk-secret-peek-1234567890

# The tool's report, from the request that carried it back to the model.
peek_report() { jq -s -c '.[1].body.messages[] | select(.role == "tool") | .content | fromjson' "$MOCK_LOG"; }

# A model that calls peek once, then answers.
peek_script() {
	printf '%s\n' '{"tools":[{"name":"peek","args":{},"id":"call_1"}]}' '{"text":"seen"}' >turns.ndjson
}

@test "a tool reads no key from its parent's environment block; the run still authenticates" {
	peek_script
	mock_start openai turns.ndjson "$KEY"
	export GEMINI_API_KEY=gm-secret-peek-0987654321
	run -0 --separate-stderr agent-run --model openai/gpt-4o --tool "$PEEK" -m look
	assert_equal "$(last | jq -r .output.message.content[0].text)" seen
	# Both requests carried the key: the first before the tool ran, the
	# second after the environment block was wiped.
	assert_equal "$(jq -s -c '[.[].auth]' "$MOCK_LOG")" '["ok","ok"]'
	report=$(peek_report)
	[ -n "$report" ] || fail "no tool report in: $(cat "$MOCK_LOG")"
	environ=$(jq -r .environ <<<"$report")
	# The names stay (the values are wiped), other variables are intact,
	# the command line is not touched.
	[[ $environ == *"OPENAI_API_KEY="* ]] || fail "environ: $environ"
	[[ $environ == *"OPENAI_BASE_URL=http://127.0.0.1:$MOCK_PORT/v1"* ]] || fail "environ: $environ"
	[[ $environ != *"$KEY"* && $environ != *gm-secret-peek* ]] || fail "a key is readable: $environ"
	assert_equal "$(jq -r .cmdline <<<"$report")" "agent-run --model openai/gpt-4o --tool $PEEK -m look "
	# The tool's own environment never had them.
	[[ $(jq -r .own <<<"$report") != *secret-peek* ]] || fail "the tool got a key"
	run -1 grep -r secret-peek "$AGENTKIT_STORE"
}

@test "agent-run is not dumpable: a tool of the same user cannot read its /proc files or a core" {
	requires setpriv
	peek_script
	mock_start openai turns.ndjson "$KEY"
	local as=()
	# Root reads every process's files: run agent-run as an unprivileged
	# user then, so the tool is a same-user process without privilege.
	if [ "$(id -u)" = 0 ]; then
		as=(setpriv --reuid 65534 --regid 65534 --clear-groups)
		chmod 755 "$BATS_TEST_TMPDIR"
		# a checkout under a directory only root may enter (mktemp -d)
		"${as[@]}" test -x "$(command -v agent-run)" -a -r "$PEEK" ||
			skip "user 65534 cannot reach agent-run or the tool in this checkout"
	fi
	run -0 --separate-stderr "${as[@]}" agent-run --no-store --model openai/gpt-4o --tool "$PEEK" -m look
	report=$(peek_report)
	assert_equal "$(jq -c '[.owner, (.uid | tonumber > 0), (.environ | startswith("unreadable")), (.cmdline | startswith("agent-run"))]' <<<"$report")" \
		'["0",true,true,true]'
}

# A provider URL with a password and a key in its query, on a port where
# nothing listens.
bad_urls() {
	export AGENTKIT_HTTP_RETRIES=0 OPENAI_API_KEY=sk-test-1234
	export OPENAI_BASE_URL="http://agent:hunter2-pw@127.0.0.1:1/v1?api_key=qk-secret-77"
}

@test "a password in a provider URL reaches neither stderr, the output, a row nor the worker log" {
	bad_urls
	local want="openai: http://***@127.0.0.1:1/v1?api_key=***: "
	run -1 --separate-stderr agent-run --model openai/gpt-4o --session pw -m hi
	[[ $(last | jq -r .output.error.message) == "generate: $want"* ]] || fail "output: $(last)"
	[[ $stderr == "agent-run: generate: $want"* ]] || fail "stderr: $stderr"
	# Detached: the finalized row and the worker log.
	run -0 --separate-stderr agent-run --model openai/gpt-4o --session pw --detach -m again
	id=$(jq -r .output.snapshotId <<<"$output")
	run -1 --separate-stderr agent-wait --timeout 20 "$id"
	[[ $(jq -r .error.message <<<"$output") == "generate: $want"* ]] || fail "row: $output"
	run -0 agent-snap worker-log "$id"
	assert_output --partial "finalized failed, finish reason failed: generate: $want"
	run -1 grep -r -e hunter2 -e qk-secret "$AGENTKIT_STORE"
}

@test "a key in the query of a URL a provider's error quotes is redacted" {
	printf '%s\n' '{"status":500,"message":"bad request to https://generativelanguage.googleapis.com/v1beta/models/x:streamGenerateContent?alt=sse&key=AIza-secret-123 (see https://u:p@docs.example/errors)"}' >turns.ndjson
	mock_start gemini turns.ndjson gm-key-1234
	export AGENTKIT_HTTP_RETRIES=0
	run -1 --separate-stderr agent-run --model googleai/gemini-2.5-flash --session q -m hi
	assert_equal "$(last | jq -r .output.error.message)" \
		"generate: googleai: HTTP 500 Internal Server Error: bad request to https://generativelanguage.googleapis.com/v1beta/models/x:streamGenerateContent?alt=***&key=*** (see https://***@docs.example/errors)"
	[[ $stderr != *AIza-secret* && $stderr != *u:p@* ]] || fail "stderr: $stderr"
}

@test "every key variable agent-run --list-models names is hidden from a tool" {
	# The variables as the provider table reports them, none set (so no
	# provider is asked for its models).
	vars=$(env -u OLLAMA_HOST agent-run --list-models | jq -r '.keyVariables[]?, .headerVariables[]?')
	[[ $'\n'$vars$'\n' == *$'\nOPENAI_API_KEY\n'* ]] || fail "list-models names: $vars"
	mkdir -p tools
	printf '#!/bin/sh\ncat >/dev/null\nenv >"%s/tool.env"\necho '"'"'{"output": "seen"}'"'"'\n' \
		"$BATS_TEST_TMPDIR" >tools/env
	chmod +x tools/env
	echo '{}' >tools/env.json
	printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "env", "input": {}}]}' \
		'{"when": {"round": 1}, "text": "done"}' >s.ndjson
	for v in $vars; do
		export "$v=secret-value-of-$v"
	done
	export AGENTKIT_TEST_VISIBLE=visible-to-tools
	run -0 --separate-stderr agent-run --no-store --model script/s.ndjson --tool env -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" done
	# The tool ran and saw the rest of the environment, but no key.
	grep -qx 'AGENTKIT_TEST_VISIBLE=visible-to-tools' tool.env || fail "tool env: $(cat tool.env)"
	for v in $vars; do
		! grep -q "^$v=" tool.env || fail "$v reached the tool"
	done
	! grep -q secret-value-of tool.env || fail "a key reached the tool: $(grep secret-value-of tool.env)"
}

# The store's credentials: libpq's password variables and a store URL with
# a password (in its userinfo and its query), for the children of a run
# that uses none of them (--no-store).
DUMP="$TOP/tests/fixtures/secrets/dump"
STORE_SECRETS='pg-secret-pw|pgpass-secret|url-secret|kw-secret'
store_secrets() {
	export DUMP_DIR="$BATS_TEST_TMPDIR" AGENTKIT_TEST_VISIBLE=visible-to-children
	export PGPASSWORD=pg-secret-pw PGPASSFILE="$BATS_TEST_TMPDIR/pgpass-secret"
	export AGENTKIT_STORE="postgresql://agentkit:url-secret@db.invalid/agentkit?sslmode=disable&password=kw-secret"
}

# no_store_secret ROLE: the child saw the rest of the environment, and
# neither it nor agent-run's environment block and command line (which
# it can read as root) holds a store credential.
no_store_secret() {
	grep -qx AGENTKIT_TEST_VISIBLE=visible-to-children "$1.env" || fail "$1 env: $(cat "$1.env")"
	! grep -E '^(PGPASSWORD|PGPASSFILE|AGENTKIT_STORE)=' "$1.env" || fail "a store variable reached the $1"
	! grep -E "$STORE_SECRETS" "$1.env" || fail "a store password reached the $1"
	[ -s "$1.parent" ] || fail "the $1 read nothing of agent-run"
	! grep -E "$STORE_SECRETS" "$1.parent" || fail "the $1 read a store password from agent-run"
}

@test "no tool, MCP server, credential command or handler sees PGPASSWORD, PGPASSFILE or a store URL's password" {
	store_secrets
	printf '{"command": ["%s", "tool"]}\n' "$DUMP" >dump.json
	printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "dump", "input": {}}]}' \
		'{"when": {"round": 1}, "text": "done"}' >s.ndjson
	run -0 --separate-stderr agent-run --no-store --model script/s.ndjson --tool ./dump.json -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" done
	no_store_secret tool
	printf '{"mcpServers": {"d": {"command": "%s", "args": ["mcp"]}}}\n' "$DUMP" >mcp.json
	run -1 --separate-stderr agent-run --no-store --mcp-config mcp.json --mcp-list d
	no_store_secret mcp
	mkdir -p "$XDG_CONFIG_HOME/agentkit"
	printf '{"endpoints": {"gw": {"dialect": "openai", "baseUrl": "http://127.0.0.1:1/v1", "credentialCommand": ["%s", "cred"]}}}\n' \
		"$DUMP" >"$XDG_CONFIG_HOME/agentkit/models.json"
	AGENTKIT_HTTP_RETRIES=0 run -1 --separate-stderr agent-run --no-store --model gw/m -m hi
	no_store_secret cred
	run -0 --separate-stderr agent-run --no-store --exec "$DUMP handler" -m hi
	no_store_secret handler
}

@test "a tool whose manifest names PGPASSWORD gets it; a store location without a password reaches tools as it is" {
	store_secrets
	printf '{"command": ["%s", "tool"], "env": ["PGPASSWORD"]}\n' "$DUMP" >dump.json
	printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "dump", "input": {}}]}' \
		'{"when": {"round": 1}, "text": "done"}' >s.ndjson
	run -0 --separate-stderr agent-run --no-store --model script/s.ndjson --tool ./dump.json -m hi
	grep -qx PGPASSWORD=pg-secret-pw tool.env || fail "tool env: $(cat tool.env)"
	! grep -E '^(PGPASSFILE|AGENTKIT_STORE)=' tool.env || fail "an unnamed store variable reached the tool"
	export AGENTKIT_STORE="postgresql://agentkit@db.invalid/agentkit?sslmode=disable"
	run -0 --separate-stderr agent-run --no-store --model script/s.ndjson --tool ./dump.json -m hi
	grep -qx "AGENTKIT_STORE=$AGENTKIT_STORE" tool.env || fail "tool env: $(cat tool.env)"
}
