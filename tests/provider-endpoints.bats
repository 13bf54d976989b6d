#!/usr/bin/env bats
# provider-endpoints.bats - the providers' other variables (OPENAI_ORG_ID,
# OPENAI_PROJECT_ID, ANTHROPIC_AUTH_TOKEN, OLLAMA_API_KEY) and the named
# endpoints of the models file (docs/providers.md "Named endpoints"),
# through agent-run against scripts/mock-model.

load test_helper
load provider_helper

setup() {
	provider_setup
	unset OPENAI_ORG_ID OPENAI_PROJECT_ID ANTHROPIC_AUTH_TOKEN OLLAMA_API_KEY AGENTKIT_MODELS_FILE
}
teardown() { mock_stop; }

# A tool "env" that writes its environment to tool.env.
env_tool() {
	mkdir -p tools
	printf '#!/bin/sh\ncat >/dev/null\nenv >"%s/tool.env"\necho '"'"'{"output": "seen"}'"'"'\n' \
		"$BATS_TEST_TMPDIR" >tools/env
	chmod +x tools/env
	echo '{}' >tools/env.json
}

# turns DIALECT KEY TURN...: the mock with these turns.
turns() {
	local d=$1 key=$2
	shift 2
	mock_stop
	printf '%s\n' "$@" >"$BATS_TEST_TMPDIR/turns.ndjson"
	mock_start "$d" "$BATS_TEST_TMPDIR/turns.ndjson" "$key"
}

# The mock's turns for one tool round: call env, then answer.
ENV_CALL='{"tools":[{"name":"env","args":{},"id":"call_1"}]}'

# tool_saw VAR: did the tool's environment have VAR?
tool_saw() { grep -q "^$1=" "$BATS_TEST_TMPDIR/tool.env"; }

@test "OPENAI_ORG_ID and OPENAI_PROJECT_ID go as OpenAI-Organization and OpenAI-Project, hidden from tools" {
	env_tool
	turns openai sk-test-1234 "$ENV_CALL" '{"text":"done"}'
	export OPENAI_ORG_ID=org-test77 OPENAI_PROJECT_ID=proj_test88
	run -0 --separate-stderr agent-run --no-store --model openai/gpt-4o --tool env -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" done
	assert_equal "$(jq -s -c 'map([.auth, .headers["openai-organization"], .headers["openai-project"]]) | unique' "$MOCK_LOG")" \
		'[["ok","org-test77","proj_test88"]]'
	! tool_saw OPENAI_ORG_ID || fail "the tool saw OPENAI_ORG_ID"
	! tool_saw OPENAI_PROJECT_ID || fail "the tool saw OPENAI_PROJECT_ID"
	tool_saw OPENAI_BASE_URL || fail "the tool lost the rest: $(cat tool.env)"
	# Without them no such header is sent.
	unset OPENAI_ORG_ID OPENAI_PROJECT_ID
	turns openai sk-test-1234 '{"text":"done"}'
	run -0 --separate-stderr agent-run --no-store --model openai/gpt-4o -m hi
	assert_equal "$(jq -c '.headers | [has("openai-organization"), has("openai-project")]' "$MOCK_LOG")" '[false,false]'
	# --list-models names them and sends them with the list request.
	export OPENAI_ORG_ID=org-test77
	unset GEMINI_API_KEY ANTHROPIC_API_KEY OLLAMA_HOST
	run -0 --separate-stderr agent-run --list-models
	assert_equal "$(jq -c 'select(.provider == "openai") | .headerVariables' <<<"$output")" '["OPENAI_ORG_ID","OPENAI_PROJECT_ID"]'
	assert_equal "$(jq -s -c '.[-1] | [.method, .path, .headers["openai-organization"]]' "$MOCK_LOG")" '["GET","/v1/models","org-test77"]'
}

@test "ANTHROPIC_AUTH_TOKEN is sent as a bearer token when ANTHROPIC_API_KEY is unset, hidden from tools" {
	env_tool
	turns anthropic tok-test-1234 "$ENV_CALL" '{"text":"done"}'
	unset ANTHROPIC_API_KEY
	export ANTHROPIC_AUTH_TOKEN=tok-test-1234
	run -0 --separate-stderr agent-run --no-store --model anthropic/claude-sonnet-4-5 --tool env -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" done
	assert_equal "$(jq -s -c 'map([.auth, .headers.authorization, (.headers | has("x-api-key"))]) | unique' "$MOCK_LOG")" \
		'[["ok","<present>",false]]'
	! tool_saw ANTHROPIC_AUTH_TOKEN || fail "the tool saw ANTHROPIC_AUTH_TOKEN"
	! grep -q tok-test-1234 tool.env || fail "the token reached the tool"
	# --list-models asks with the same header.
	unset OPENAI_API_KEY GEMINI_API_KEY OLLAMA_HOST
	run -0 --separate-stderr agent-run --list-models
	assert_equal "$(jq -r 'select(.provider == "anthropic") | .keyFrom' <<<"$output")" ANTHROPIC_AUTH_TOKEN
	assert_equal "$(jq -s -c '.[-1] | [.method, .path, .auth, .headers.authorization]' "$MOCK_LOG")" '["GET","/v1/models","ok","<present>"]'
	# With both set the API key wins (x-api-key), as the SDKs read them.
	turns anthropic sk-test-1234 '{"text":"done"}'
	export ANTHROPIC_API_KEY=sk-test-1234
	run -0 --separate-stderr agent-run --no-store --model anthropic/claude-sonnet-4-5 -m hi
	assert_equal "$(jq -c '[.auth, .headers["x-api-key"], (.headers | has("authorization"))]' "$MOCK_LOG")" '["ok","<present>",false]'
}

@test "OLLAMA_API_KEY goes to Ollama as a bearer token, hidden from tools; without it no key is sent" {
	env_tool
	turns ollama ol-test-1234 "$ENV_CALL" '{"text":"done"}'
	export OLLAMA_API_KEY=ol-test-1234
	run -0 --separate-stderr agent-run --no-store --model ollama/llama3.2 --tool env -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" done
	assert_equal "$(jq -s -c 'map([.auth, .headers.authorization]) | unique' "$MOCK_LOG")" '[["ok","<present>"]]'
	! tool_saw OLLAMA_API_KEY || fail "the tool saw OLLAMA_API_KEY"
	unset OPENAI_API_KEY GEMINI_API_KEY ANTHROPIC_API_KEY
	run -0 --separate-stderr agent-run --list-models --format text
	assert_equal "$(grep '^ollama' <<<"$output")" "ollama           key from OLLAMA_API_KEY, http://127.0.0.1:$MOCK_PORT"
	unset OLLAMA_API_KEY
	turns ollama ol-test-1234 '{"text":"done"}'
	# A key file (another provider's key) never goes to Ollama.
	echo sk-openai-not-for-ollama >key.txt
	AGENTKIT_KEY_FILE=$PWD/key.txt run -0 --separate-stderr agent-run --no-store --model ollama/llama3.2 -m hi
	assert_equal "$(jq -c '[.auth, (.headers | has("authorization"))]' "$MOCK_LOG")" '["none",false]'
}

# ---- the models file ----

MOCKS=()

# second_mock NAME DIALECT KEY TURN...: another mock beside $MOCK_PID; its
# port in ${NAME}_PORT, its log in $BATS_TEST_TMPDIR/NAME.ndjson.
second_mock() {
	local name=$1 dialect=$2 key=$3
	shift 3
	printf '%s\n' "$@" >"$BATS_TEST_TMPDIR/$name.turns"
	: >"$BATS_TEST_TMPDIR/$name.ndjson"
	"$MOCK" --dialect "$dialect" --script "$BATS_TEST_TMPDIR/$name.turns" --key "$key" \
		--port-file "$BATS_TEST_TMPDIR/$name.port" --log "$BATS_TEST_TMPDIR/$name.ndjson" \
		>/dev/null 2>"$BATS_TEST_TMPDIR/$name.err" 3>&- &
	MOCKS+=($!)
	for _ in $(seq 1 200); do
		[ -s "$BATS_TEST_TMPDIR/$name.port" ] && break
		sleep 0.025
	done
	printf -v "${name^^}_PORT" '%s' "$(cat "$BATS_TEST_TMPDIR/$name.port")"
}

teardown() {
	mock_stop
	for p in "${MOCKS[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
}

models_file() {
	mkdir -p "$XDG_CONFIG_HOME/agentkit"
	cat >"$XDG_CONFIG_HOME/agentkit/models.json"
}

@test "two endpoints side by side: an alias, an extra header and query parameter, each with its own key" {
	second_mock local openai lk-local-1234 '{"text":"from local"}'
	second_mock claude anthropic ck-claude-5678 '{"text":"from claude"}'
	models_file <<JSON
{"endpoints": {
  "local": {"dialect": "openai", "baseUrl": "http://127.0.0.1:$LOCAL_PORT/v1", "keyVariable": "LOCAL_KEY",
            "headers": {"X-Team": "agents", "X-Gateway": "gw-\${GW_TOKEN}-\$\$"},
            "query": {"api-version": "2024-10-21"},
            "models": {"fast": "llama-3.1-8b"}},
  "claude": {"dialect": "anthropic", "baseUrl": "http://127.0.0.1:$CLAUDE_PORT/", "keyVariable": "CLAUDE_KEY",
             "headers": {"anthropic-beta": "tools-2024-04-04"}}
}}
JSON
	export LOCAL_KEY=lk-local-1234 CLAUDE_KEY=ck-claude-5678 GW_TOKEN=g7
	run -0 --separate-stderr agent-run --no-store --model local/fast -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" "from local"
	assert_equal "$(jq -c '[.path, .query, .auth, .headers["x-team"], .headers["x-gateway"], .body.model]' local.ndjson)" \
		'["/v1/chat/completions",{"api-version":"2024-10-21"},"ok","agents","gw-g7-$","llama-3.1-8b"]'
	run -0 --separate-stderr agent-run --no-store --model claude/claude-haiku-4-5 -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" "from claude"
	assert_equal "$(jq -c '[.path, .auth, .headers["anthropic-beta"], .headers["anthropic-version"], .body.model]' claude.ndjson)" \
		'["/v1/messages","ok","tools-2024-04-04","2023-06-01","claude-haiku-4-5"]'
	# The endpoints' rows in --list-models; nothing is asked of them.
	unset OPENAI_API_KEY GEMINI_API_KEY ANTHROPIC_API_KEY OLLAMA_HOST
	run -0 --separate-stderr agent-run --list-models
	assert_equal "$(jq -c 'select(.dialect)' <<<"$output")" \
"{\"provider\":\"local\",\"dialect\":\"openai\",\"keyVariables\":[\"LOCAL_KEY\"],\"keyFrom\":\"LOCAL_KEY\",\"baseUrl\":\"http://127.0.0.1:$LOCAL_PORT/v1\",\"headers\":[\"X-Team\",\"X-Gateway\"],\"query\":[\"api-version\"],\"models\":[\"local/fast\"],\"modelsFile\":\"$XDG_CONFIG_HOME/agentkit/models.json\"}
{\"provider\":\"claude\",\"dialect\":\"anthropic\",\"keyVariables\":[\"CLAUDE_KEY\"],\"keyFrom\":\"CLAUDE_KEY\",\"baseUrl\":\"http://127.0.0.1:$CLAUDE_PORT/\",\"headers\":[\"anthropic-beta\"],\"query\":[],\"models\":[],\"modelsFile\":\"$XDG_CONFIG_HOME/agentkit/models.json\"}"
	assert_equal "$(wc -l <local.ndjson)$(wc -l <claude.ndjson)" 11
	run -0 --separate-stderr agent-run --list-models --format text
	assert_equal "$(grep -A1 '^local' <<<"$output")" "local            key from LOCAL_KEY, http://127.0.0.1:$LOCAL_PORT/v1
  local/fast"
}

@test "every variable the models file names is hidden from tools; the run still authenticates" {
	env_tool
	second_mock local openai lk-local-1234 "$ENV_CALL" '{"text":"done"}'
	models_file <<JSON
{"endpoints": {"local": {"dialect": "openai", "baseUrl": "http://127.0.0.1:$LOCAL_PORT/v1",
  "keyVariable": "LOCAL_KEY", "headers": {"api-key": "\$AZURE_STYLE_KEY"}, "query": {"sig": "\$SIG_VALUE"}}}}
JSON
	export LOCAL_KEY=lk-local-1234 AZURE_STYLE_KEY=az-secret-99 SIG_VALUE=sig-secret-77
	run -0 --separate-stderr agent-run --no-store --model local/m --tool env -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" done
	assert_equal "$(jq -s -c 'map([.auth, .headers["api-key"], .query.sig]) | unique' local.ndjson)" '[["ok","<present>","sig-secret-77"]]'
	for v in LOCAL_KEY AZURE_STYLE_KEY SIG_VALUE; do
		! tool_saw "$v" || fail "the tool saw $v"
	done
	! grep -q -- '-secret-\|lk-local' tool.env || fail "a secret reached the tool"
	tool_saw PATH || fail "the tool lost the rest"
}

# A credential command that counts its runs in cred.count and prints $1.
cred_command() {
	cat >cred.sh <<SH
#!/bin/sh
echo run >>"$BATS_TEST_TMPDIR/cred.count"
printf '%s\n' '$1'
SH
	chmod +x cred.sh
	: >cred.count
}

@test "a credential command's token is the bearer key, run once per process while it is valid" {
	env_tool
	second_mock gw openai tok-from-cmd-42 "$ENV_CALL" '{"text":"done"}' '{"text":"again"}'
	cred_command tok-from-cmd-42
	models_file <<JSON
{"endpoints": {"gw": {"dialect": "openai", "baseUrl": "http://127.0.0.1:$GW_PORT/v1",
  "credentialCommand": ["$BATS_TEST_TMPDIR/cred.sh", "ignored-arg"], "credentialTtl": "1h"}}}
JSON
	# Two model calls (a tool round) in one process: the command runs once.
	run -0 --separate-stderr agent-run --no-store --model gw/m --tool env -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" done
	assert_equal "$(jq -s -c 'map([.auth, .headers.authorization])' gw.ndjson)" '[["ok","<present>"],["ok","<present>"]]'
	assert_equal "$(wc -l <cred.count)" 1
	! grep -q tok-from-cmd tool.env || fail "the token reached the tool"
	# A new process asks again.
	run -0 --separate-stderr agent-run --no-store --model gw/m -m hi
	assert_equal "$(wc -l <cred.count)" 2
	run -0 --separate-stderr agent-run --list-models
	assert_equal "$(jq -r 'select(.provider == "gw") | .keyFrom' <<<"$output")" "credential command"
	run -0 --separate-stderr agent-run --list-models --format text
	assert_equal "$(grep '^gw' <<<"$output")" "gw               key from credential command, http://127.0.0.1:$GW_PORT/v1"
	# Listing never runs the command.
	assert_equal "$(wc -l <cred.count)" 2
}

@test "a credential command's JSON names the expiry; a token about to expire is not kept" {
	second_mock gw openai tok-json-7 '{"tools":[{"name":"greet","args":{"name":"Ann"},"id":"call_1"}]}' '{"text":"done"}'
	cred_command '{"token":"tok-json-7","expiresIn":10}'
	models_file <<JSON
{"endpoints": {"gw": {"dialect": "openai", "baseUrl": "http://127.0.0.1:$GW_PORT/v1",
  "credentialCommand": ["$BATS_TEST_TMPDIR/cred.sh"]}}}
JSON
	run -0 --separate-stderr agent-run --no-store --model gw/m --tool "$TOP/tests/fixtures/tools/greet.json" -m hi
	assert_equal "$(jq -s -c 'map(.auth)' gw.ndjson)" '["ok","ok"]'
	# 10 s of life is under the 30 s margin: each call asks for a new one.
	assert_equal "$(wc -l <cred.count)" 2
}

@test "a failing credential command fails the turn with its message, valid UTF-8, never a token" {
	cat >cred.sh <<'SH'
#!/bin/sh
echo "not logged in: run 'gcloud auth login'" >&2
echo "second line" >&2
exit 3
SH
	chmod +x cred.sh
	models_file <<JSON
{"endpoints": {"gw": {"dialect": "openai", "baseUrl": "http://127.0.0.1:9/v1",
  "credentialCommand": ["$BATS_TEST_TMPDIR/cred.sh"]}}}
JSON
	run -1 --separate-stderr agent-run --no-store --model gw/m -m hi
	assert_equal "$(last | jq -c .output.error)" \
		"{\"status\":\"UNAUTHENTICATED\",\"message\":\"generate: gw: the credential command exited 3: not logged in: run 'gcloud auth login'\"}"
	# stderr that is not UTF-8 keeps its message, each bad byte U+FFFD
	printf '#!/bin/sh\nprintf "not logged in \\377 here\\n" >&2\nexit 3\n' >cred.sh
	run -1 --separate-stderr agent-run --no-store --model gw/m -m hi
	assert_equal "$(last | jq -c .output.error)" \
		'{"status":"UNAUTHENTICATED","message":"generate: gw: the credential command exited 3: not logged in � here"}'
	# The start of a long line is cut at a character's boundary, not
	# inside one ("é" is bytes 200 and 201).
	long=$(printf 'x%.0s' $(seq 1 199))
	printf '#!/bin/sh\nprintf "%sé and more\\n" >&2\nexit 3\n' "$long" >cred.sh
	run -1 --separate-stderr agent-run --no-store --model gw/m -m hi
	assert_equal "$(last | jq -r .output.error.message)" "generate: gw: the credential command exited 3: $long"
}

@test "a bad models file: exit 101, the message names the file and the spot, never a value" {
	models_file <<'JSON'
{"endpoints": {"local": {"dialect": "openai",
  "headers": {"api-key": "sk-literal-secret"},}}}
JSON
	f=$XDG_CONFIG_HOME/agentkit/models.json
	run -101 --separate-stderr agent-run --no-store --model echo -m hi
	assert_equal "$stderr" "agent-run: models file: invalid JSON: string or '}' expected near '}' (at $f:2:47)"
	assert_equal "$(last | jq -r .error.status)" INVALID_ARGUMENT
	run -101 --separate-stderr agent-run --list-models
	assert_equal "$stderr" "agent-run: models file: invalid JSON: string or '}' expected near '}' (at $f:2:47)"
	echo '{"endpoints": {"local": {"dialect": "opnai", "headers": {"api-key": "sk-literal-secret"}}}}' >"$f"
	run -101 --separate-stderr agent-run --no-store --model local/x -m hi
	assert_equal "$stderr" "agent-run: models file: endpoint 'local': \"dialect\": 'opnai' is none of openai, openai-responses, anthropic, googleai, ollama, genkit (at $f)"
	echo '{"endpoints": {"openai": {"dialect": "openai"}}}' >"$f"
	run -101 --separate-stderr agent-run --no-store --model echo -m hi
	assert_equal "$stderr" "agent-run: models file: endpoint 'openai': the name of a built-in provider (at $f)"
	echo '{"endpoints": {"x": {"dialect": "openai", "query": {"k": "a$ b"}, "keyFile": "k", "keyVariable": "K"}}}' >"$f"
	run -101 --separate-stderr agent-run --no-store --model echo -m hi
	assert_equal "$stderr" "agent-run: models file: endpoint 'x': give one of \"keyVariable\", \"keyFile\" and \"credentialCommand\" (at $f)"
	echo '{"endpoints": {"x": {"dialect": "openai", "headers": {"h": "a$ b"}}}}' >"$f"
	run -101 --separate-stderr agent-run --no-store --model echo -m hi
	assert_equal "$stderr" "agent-run: models file: endpoint 'x': \"headers\": 'h': a '\$' that names no variable (write \$NAME, \${NAME}, or \$\$ for a '\$') (at $f)"
	echo '{"endpoints": {"x": {"dialect": "openai", "baseURL": "http://h"}}}' >"$f"
	run -101 --separate-stderr agent-run --no-store --model echo -m hi
	assert_equal "$stderr" "agent-run: models file: endpoint 'x': unknown member \"baseURL\" (at $f)"
	[[ $stderr != *sk-literal* ]]
	# A file named by AGENTKIT_MODELS_FILE that is not there is not found (4).
	AGENTKIT_MODELS_FILE=$BATS_TEST_TMPDIR/none.json run -4 --separate-stderr agent-run --no-store --model echo -m hi
	assert_equal "$stderr" "agent-run: models file (AGENTKIT_MODELS_FILE): cannot open '$BATS_TEST_TMPDIR/none.json': No such file or directory"
	# No file at the default place: no endpoints, nothing to say.
	rm "$f"
	run -0 --separate-stderr agent-run --no-store --model echo -m hi
	assert_equal "$stderr" ""
}

@test "an endpoint's unset variable fails before the first turn naming the variable; an unknown endpoint is not found" {
	models_file <<'JSON'
{"endpoints": {"azure": {"dialect": "openai", "baseUrl": "http://127.0.0.1:9/v1",
  "headers": {"api-key": "$AZURE_OPENAI_KEY"}}}}
JSON
	local mf=$XDG_CONFIG_HOME/agentkit/models.json
	run -5 --separate-stderr agent-run --no-store --model azure/gpt-4o -m hi
	assert_output "{\"error\":{\"status\":\"UNAUTHENTICATED\",\"message\":\"azure: header 'api-key' names AZURE_OPENAI_KEY, which is not set (models file $mf)\"}}"
	assert_equal "$stderr" "agent-run: azure: header 'api-key' names AZURE_OPENAI_KEY, which is not set (models file $mf)"
	echo '{"endpoints": {"azure": {"dialect": "openai", "keyVariable": "AZURE_OPENAI_API_KEY"}}}' >"$mf"
	run -5 --separate-stderr agent-run --no-store --model azure/gpt-4o -m hi
	assert_output "{\"error\":{\"status\":\"UNAUTHENTICATED\",\"message\":\"azure: no API key: set AZURE_OPENAI_API_KEY (models file $mf)\"}}"
	assert_equal "$stderr" "agent-run: azure: no API key: set AZURE_OPENAI_API_KEY (models file $mf)"
	run -4 --separate-stderr agent-run --no-store --model azure/ -m hi
	assert_equal "${stderr%%$'\n'*}" "agent-run: model 'azure/' names no model: use azure/NAME"
	run -4 --separate-stderr agent-run --no-store --model azur/gpt-4o -m hi
	assert_equal "${stderr%%$'\n'*}" "agent-run: model 'azur/gpt-4o' not found (unknown provider 'azur'): did you mean 'azure/gpt-4o'?"
	# A credential command that is not there, found before it would run;
	# an endpoint's key file that holds nothing.
	echo '{"endpoints": {"gw": {"dialect": "openai", "credentialCommand": ["no-such-helper", "x"]}}}' >"$mf"
	run -5 --separate-stderr agent-run --no-store --model gw/m --detach -m hi
	assert_output "{\"error\":{\"status\":\"UNAUTHENTICATED\",\"message\":\"gw: the credential command 'no-such-helper' is not found (models file $mf)\"}}"
	: >empty.key
	echo "{\"endpoints\": {\"gw\": {\"dialect\": \"openai\", \"keyFile\": \"$PWD/empty.key\"}}}" >"$mf"
	run -5 --separate-stderr agent-run --no-store --model gw/m -m hi
	assert_equal "$stderr" "agent-run: gw: key file '$PWD/empty.key' is empty"
}

@test "the models file's variables are wiped from agent-run's environment block too" {
	second_mock local openai lk-local-1234 '{"tools":[{"name":"peek","args":{},"id":"call_1"}]}' '{"text":"seen"}'
	models_file <<JSON
{"endpoints": {"local": {"dialect": "openai", "baseUrl": "http://127.0.0.1:$LOCAL_PORT/v1",
  "keyVariable": "LOCAL_KEY", "headers": {"X-Extra": "\$EXTRA_SECRET"}}}}
JSON
	export LOCAL_KEY=lk-local-1234 EXTRA_SECRET=ex-secret-4321
	run -0 --separate-stderr agent-run --no-store --model local/m --tool "$TOP/tests/fixtures/secrets/peek.json" -m look
	report=$(jq -s -c '.[1].body.messages[] | select(.role == "tool") | .content | fromjson' local.ndjson)
	[ -n "$report" ] || fail "no report: $(cat local.ndjson)"
	[[ $(jq -r .environ <<<"$report") != *lk-local-1234* && $(jq -r .environ <<<"$report") != *ex-secret* ]] ||
		fail "a secret is readable: $report"
	[[ $(jq -r .own <<<"$report") != *lk-local* && $(jq -r .own <<<"$report") != *ex-secret* ]] || fail "the tool got one"
	assert_equal "$(jq -s -c 'map(.auth)' local.ndjson)" '["ok","ok"]'
}

@test "a YAML models file (models.yaml, .yml, AGENTKIT_MODELS_FILE) is read as the JSON one; two at the default place are refused" {
	second_mock local openai lk-local-1234 '{"text":"from yaml"}' '{"text":"from yml"}' '{"text":"named"}'
	mkdir -p "$XDG_CONFIG_HOME/agentkit"
	cat >"$XDG_CONFIG_HOME/agentkit/models.yaml" <<YAML
# endpoints of this machine
endpoints:
  local:
    dialect: openai
    baseUrl: http://127.0.0.1:$LOCAL_PORT/v1
    keyVariable: LOCAL_KEY
    headers: {X-Team: agents, X-Gateway: "gw-\${GW_TOKEN}"}
    query:
      api-version: 2024-10-21
    models:
      fast: llama-3.1-8b
YAML
	export LOCAL_KEY=lk-local-1234 GW_TOKEN=g7
	run -0 --separate-stderr agent-run --no-store --model local/fast -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" "from yaml"
	assert_equal "$(jq -c '[.path, .query, .auth, .headers["x-team"], .headers["x-gateway"], .body.model]' local.ndjson)" \
		'["/v1/chat/completions",{"api-version":"2024-10-21"},"ok","agents","gw-g7","llama-3.1-8b"]'
	unset OPENAI_API_KEY GEMINI_API_KEY ANTHROPIC_API_KEY OLLAMA_HOST
	run -0 --separate-stderr agent-run --list-models
	assert_equal "$(jq -r 'select(.provider == "local") | .modelsFile' <<<"$output")" "$XDG_CONFIG_HOME/agentkit/models.yaml"
	# .yml is the same file.
	mv "$XDG_CONFIG_HOME/agentkit/models.yaml" "$XDG_CONFIG_HOME/agentkit/models.yml"
	run -0 --separate-stderr agent-run --no-store --model local/fast -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" "from yml"
	# Two files at the default place: which one is meant is not guessed.
	echo '{"endpoints": {}}' >"$XDG_CONFIG_HOME/agentkit/models.json"
	run -101 --separate-stderr agent-run --no-store --model local/fast -m hi
	assert_equal "$stderr" "agent-run: models file: both models.json and models.yml are in $XDG_CONFIG_HOME/agentkit: keep one (or name one in AGENTKIT_MODELS_FILE)"
	run -101 --separate-stderr agent-run --list-models
	assert_equal "$stderr" "agent-run: models file: both models.json and models.yml are in $XDG_CONFIG_HOME/agentkit: keep one (or name one in AGENTKIT_MODELS_FILE)"
	# AGENTKIT_MODELS_FILE wins over the default place; its name says YAML.
	cp "$XDG_CONFIG_HOME/agentkit/models.yml" "$BATS_TEST_TMPDIR/mine.yaml"
	AGENTKIT_MODELS_FILE=$BATS_TEST_TMPDIR/mine.yaml run -0 --separate-stderr agent-run --no-store --model local/fast -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" named
	# Bad YAML names the file and the line; a value of the wrong type the member.
	printf 'endpoints:\n  local: {dialect: openai\n' >"$BATS_TEST_TMPDIR/bad.yaml"
	AGENTKIT_MODELS_FILE=$BATS_TEST_TMPDIR/bad.yaml run -101 --separate-stderr agent-run --no-store --model echo -m hi
	assert_equal "$stderr" "agent-run: models file: invalid YAML: while parsing a flow mapping did not find expected ',' or '}' (at $BATS_TEST_TMPDIR/bad.yaml:3)"
	printf 'endpoints:\n  local:\n    dialect: openai\n    headers: {X-Count: 5}\n' >"$BATS_TEST_TMPDIR/bad.yaml"
	AGENTKIT_MODELS_FILE=$BATS_TEST_TMPDIR/bad.yaml run -101 --separate-stderr agent-run --no-store --model echo -m hi
	assert_equal "$stderr" "agent-run: models file: endpoint 'local': \"headers\": 'X-Count' must be a string (at $BATS_TEST_TMPDIR/bad.yaml)"
}

# complete_model WORD: what bash completion offers for agent-run --model WORD.
complete_model() {
	COMP_WORDS=(agent-run --model "$1") COMP_CWORD=2 COMPREPLY=()
	_agentkit_agent_run || true
	printf '%s\n' "${COMPREPLY[@]}"
}

@test "an endpoint's own model list: --list-models shows it, --model completion offers ENDPOINT/MODEL" {
	second_mock local openai lk-local-1234 '{"text":"listed"}' '{"text":"unlisted"}'
	models_file <<JSON
{"endpoints": {
  "local": {"dialect": "openai", "baseUrl": "http://127.0.0.1:$LOCAL_PORT/v1", "keyVariable": "LOCAL_KEY",
            "models": ["qwen2.5-coder:7b", "llama-3.1-8b"]},
  "lab": {"dialect": "ollama", "models": {"fast": "llama3.2:1b"}}
}}
JSON
	export LOCAL_KEY=lk-local-1234
	run -0 --separate-stderr agent-run --no-store --model local/qwen2.5-coder:7b -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" listed
	# A name off the list still goes to the endpoint as it is.
	run -0 --separate-stderr agent-run --no-store --model local/other-model -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" unlisted
	assert_equal "$(jq -s -c 'map(.body.model)' local.ndjson)" '["qwen2.5-coder:7b","other-model"]'
	unset OPENAI_API_KEY GEMINI_API_KEY ANTHROPIC_API_KEY OLLAMA_HOST
	run -0 --separate-stderr agent-run --list-models
	assert_equal "$(jq -c 'select(.dialect) | [.provider, .models]' <<<"$output")" \
		'["local",["local/qwen2.5-coder:7b","local/llama-3.1-8b"]]
["lab",["lab/fast"]]'
	run -0 --separate-stderr agent-run --list-models --format text
	assert_equal "$(grep -A2 '^local' <<<"$output")" "local            key from LOCAL_KEY, http://127.0.0.1:$LOCAL_PORT/v1
  local/qwen2.5-coder:7b
  local/llama-3.1-8b"
	# Completion: the endpoints and their models, asking none of them.
	: >local.ndjson
	run -0 --separate-stderr agent-run --list-model-names
	assert_equal "$output" "local/
local/qwen2.5-coder:7b
local/llama-3.1-8b
lab/
lab/fast"
	source <(agent-run --completion bash)
	assert_equal "$(complete_model l)" "$(printf '%s\n' lab/ lab/fast local/ local/llama-3.1-8b local/qwen2.5-coder:7b)"
	assert_equal "$(complete_model local/q)" local/qwen2.5-coder:7b
	assert_equal "$(wc -l <local.ndjson)" 0
	# A list that is not one is refused like any bad member.
	sed -i 's/\["qwen2.5-coder:7b", "llama-3.1-8b"\]/["qwen", 7]/' "$XDG_CONFIG_HOME/agentkit/models.json"
	run -101 --separate-stderr agent-run --list-models
	assert_equal "$stderr" "agent-run: models file: endpoint 'local': \"models\": item 2 is not a model name (at $XDG_CONFIG_HOME/agentkit/models.json)"
	# A bad file: completion stays quiet.
	run -0 --separate-stderr agent-run --list-model-names
	assert_equal "$output$stderr" ""
}

@test "Vertex AI: a googleai endpoint whose base names a project and a location, a credential command's bearer token" {
	env_tool
	second_mock vertex gemini ya29.tok-vertex-1 "$ENV_CALL" '{"text":"from vertex"}' '{"text":"again"}' '{"text":"express"}'
	cred_command ya29.tok-vertex-1
	models_file <<JSON
{"endpoints": {
  "vertex": {"dialect": "googleai",
             "baseUrl": "http://127.0.0.1:$VERTEX_PORT/v1/projects/\$GCP_PROJECT/locations/us-central1",
             "credentialCommand": ["$BATS_TEST_TMPDIR/cred.sh"], "models": ["gemini-2.5-flash"]},
  "vertex-pub": {"dialect": "googleai",
                 "baseUrl": "http://127.0.0.1:$VERTEX_PORT/v1/projects/p2/locations/global/publishers/google",
                 "credentialCommand": ["$BATS_TEST_TMPDIR/cred.sh"]}
}}
JSON
	export GCP_PROJECT=my-proj
	run -0 --separate-stderr agent-run --no-store --model vertex/gemini-2.5-flash --tool env -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" "from vertex"
	assert_equal "$(jq -s -c 'map([.path, .query, .auth, .headers.authorization, (.headers | has("x-goog-api-key"))]) | unique' vertex.ndjson)" \
		'[["/v1/projects/my-proj/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent",{"alt":"sse"},"ok","<present>",false]]'
	# The body is the Gemini API's: the tool round went back as functionResponse.
	assert_equal "$(jq -s -c '.[1].body.contents | map(.role)' vertex.ndjson)" '["user","model","user"]'
	assert_equal "$(jq -s -c '.[1].body.contents[2].parts[0].functionResponse.name' vertex.ndjson)" '"env"'
	assert_equal "$(wc -l <cred.count)" 1
	! grep -q tok-vertex tool.env || fail "the token reached the tool"
	# A base that goes on to the publisher is used as it is.
	run -0 --separate-stderr agent-run --no-store --model vertex-pub/models/gemini-2.5-pro -m hi
	assert_equal "$(jq -s -c '.[-1] | [.path, .auth]' vertex.ndjson)" \
		'["/v1/projects/p2/locations/global/publishers/google/models/gemini-2.5-pro:streamGenerateContent","ok"]'
	# Express mode: the publisher without a project, an API key.
	cat >"$BATS_TEST_TMPDIR/express.json" <<JSON
{"endpoints": {"express": {"dialect": "googleai", "baseUrl": "http://127.0.0.1:$VERTEX_PORT/v1/publishers/google",
  "keyVariable": "VERTEX_KEY"}}}
JSON
	VERTEX_KEY=ya29.tok-vertex-1 AGENTKIT_MODELS_FILE=$BATS_TEST_TMPDIR/express.json \
		run -0 --separate-stderr agent-run --no-store --model express/gemini-2.5-flash -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" express
	assert_equal "$(jq -s -c '.[-1] | [.path, .auth, .headers["x-goog-api-key"], (.headers | has("authorization"))]' vertex.ndjson)" \
		'["/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent","ok","<present>",false]'
	# A token Vertex refuses: UNAUTHENTICATED with Google's message, exit 1.
	mock_stop
	for p in "${MOCKS[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done
	MOCKS=()
	second_mock vertex2 gemini ya29.the-right-one '{"text":"unused"}'
	sed -i "s/:$VERTEX_PORT/:$VERTEX2_PORT/" "$XDG_CONFIG_HOME/agentkit/models.json"
	run -1 --separate-stderr agent-run --no-store --model vertex/gemini-2.5-flash -m hi
	assert_equal "$(last | jq -c .output.error)" \
		'{"status":"UNAUTHENTICATED","message":"generate: vertex: HTTP 401 Unauthorized: Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."}'
	assert_equal "$(jq -s -c 'map(.auth)' vertex2.ndjson)" '["wrong"]'
}

# ---- bounds on what comes from outside ----

@test "a credential token or key with a line break fails the call naming its source, never the value; nothing is sent" {
	second_mock gw openai tok-1 '{"text":"done"}' '{"text":"done"}'
	# JSON escapes: the token holds CR LF and a header of its own.
	cred_command '{"token":"tok-1\r\nX-Evil: yes"}'
	models_file <<JSON
{"endpoints": {"gw": {"dialect": "openai", "baseUrl": "http://127.0.0.1:$GW_PORT/v1",
  "credentialCommand": ["$BATS_TEST_TMPDIR/cred.sh"]}}}
JSON
	run -1 --separate-stderr agent-run --no-store --model gw/m -m hi
	assert_equal "$(last | jq -c .output.error)" \
		'{"status":"UNAUTHENTICATED","message":"generate: gw: the credential command'"'"'s token holds a line break (CR or LF), which would end its header: nothing was sent"}'
	[[ $output$stderr != *X-Evil* ]] || fail "the value reached a message"
	# A token cut by a NUL byte is refused, not sent in part.
	printf '#!/bin/sh\nprintf "tok-1\\000X-Evil: yes\\n"\n' >cred.sh
	run -1 --separate-stderr agent-run --no-store --model gw/m -m hi
	assert_equal "$(last | jq -c .output.error)" \
		'{"status":"UNAUTHENTICATED","message":"generate: gw: the credential command'"'"'s token holds a NUL byte"}'
	# A provider's key variable with a line break inside, and a key file with a NUL.
	turns openai sk-0123456789 '{"text":"done"}'
	OPENAI_API_KEY=$'sk-0123456789\r\nX-Evil: yes' run -1 --separate-stderr agent-run --no-store --model openai/gpt-4o -m hi
	assert_equal "$(last | jq -r .output.error.message)" \
		"generate: openai: OPENAI_API_KEY holds a line break (CR or LF), which would end its header: nothing was sent"
	# (a key file is read before the first turn: refused then, exit 5)
	printf 'sk-0123456789\0X-Evil: yes\n' >key.txt
	run -5 --separate-stderr agent-run --no-store --model openai/gpt-4o --key-file key.txt -m hi
	assert_equal "$(last | jq -r .error.message)" "openai: key file 'key.txt' holds a NUL byte"
	# A trailing line end is the shell's, not the key's: it still works.
	OPENAI_API_KEY=$'sk-0123456789\n' run -0 --separate-stderr agent-run --no-store --model openai/gpt-4o -m hi
	assert_equal "$(jq -s -c 'map(.auth)' "$MOCK_LOG")" '["ok"]'
	assert_equal "$(wc -l <gw.ndjson)" 0
}

@test "a credential command that leaves a child holding its stdout is done when it exits; the child goes with it" {
	second_mock gw openai tok-bg-1 '{"text":"done"}'
	cat >cred.sh <<SH
#!/bin/sh
echo tok-bg-1
sleep 60 &
echo \$! >"$BATS_TEST_TMPDIR/bg.pid"
SH
	chmod +x cred.sh
	models_file <<JSON
{"endpoints": {"gw": {"dialect": "openai", "baseUrl": "http://127.0.0.1:$GW_PORT/v1",
  "credentialCommand": ["$BATS_TEST_TMPDIR/cred.sh"]}}}
JSON
	# The command's bound is 30 s: without the reaping the call waits it out.
	run -0 --separate-stderr timeout 10 agent-run --no-store --model gw/m -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" done
	assert_equal "$(jq -s -c 'map(.auth)' gw.ndjson)" '["ok"]'
	# Killed with the group (a zombie until init reaps it is gone too).
	pid=$(cat bg.pid)
	for _ in $(seq 1 100); do
		st=$(ps -o stat= -p "$pid" || true)
		[ -z "$st" ] || [[ $st == Z* ]] && break
		sleep 0.05
	done
	[ -z "$st" ] || [[ $st == Z* ]] || fail "the command's child outlived it ($st)"
}


@test "an endpoint's \"timeout\" bounds each of its calls, and wins over AGENTKIT_MODEL_TIMEOUT" {
	second_mock slow openai k-slow-1 '{"text":"Hello there world","trickle":100}'
	models_file <<JSON
{"endpoints": {"slow": {"dialect": "openai", "baseUrl": "http://127.0.0.1:$SLOW_PORT/v1",
  "keyVariable": "SLOW_KEY", "timeout": "1s"}}}
JSON
	SLOW_KEY=k-slow-1 AGENTKIT_MODEL_TIMEOUT=1h run -1 --separate-stderr timeout 20 agent-run --no-store --model slow/m -m hi
	assert_equal "$(last | jq -r .output.error.status)" DEADLINE_EXCEEDED
	assert_regex "$(last | jq -r .output.error.message)" \
		'^generate: slow: no complete reply from http://127.0.0.1:[0-9]+/v1/chat/completions within 1000 ms \(the endpoint'"'"'s "timeout" in the models file\)$'
	assert_equal "$(wc -l <slow.ndjson)" 1
	f=$XDG_CONFIG_HOME/agentkit/models.json
	echo '{"endpoints": {"slow": {"dialect": "openai", "timeout": "soon"}}}' >"$f"
	run -101 --separate-stderr agent-run --no-store --model echo -m hi
	assert_equal "$stderr" "agent-run: models file: endpoint 'slow': \"timeout\": invalid duration 'soon' (use e.g. 250ms, 30s, 5m, 1h) (at $f)"
}
