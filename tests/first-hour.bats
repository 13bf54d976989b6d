#!/usr/bin/env bats
# The first hour with agentkit, habits from llm and claude -p included:
# text on stdin, guard rails with a next step, "did you mean", model
# discovery (agent-run --list-models), AGENTKIT_MODEL, --format json and
# the text mode (docs/agent-run.md "Input", "Output"; docs/providers.md).

load test_helper
load provider_helper

setup() {
	provider_setup
	unset AGENTKIT_MODEL AGENTKIT_KEY_FILE NO_COLOR OLLAMA_HOST OPENAI_BASE_URL
	unset GEMINI_BASE_URL GOOGLE_GEMINI_BASE_URL ANTHROPIC_BASE_URL
}
teardown() { mock_stop; }

# The text of the first user message the model saw, from --format json.
first_user() { jq -r '.state.messages[0].content[0].text'; }

# ---- text on stdin ----

@test "stdin text with -m: the -m text, a blank line, then the piped text reach the model" {
	printf 'diff --git a/x b/x\n+new line\n' >diff.txt
	run -0 --separate-stderr bash -c 'cat diff.txt | agent-run --no-store --model echo --format json -m "review this"'
	[ -z "$stderr" ]
	assert_equal "$(first_user <<<"$output")" "review this

diff --git a/x b/x
+new line"
	assert_equal "$(jq -r '.message.content[0].text' <<<"$output")" "$(first_user <<<"$output")"
	# With several -m, the text joins the first turn; the others are their own.
	run -0 --separate-stderr bash -c 'echo piped | agent-run --no-store --model echo --format json -m one -m two'
	assert_equal "$(jq -c '[.state.messages[] | select(.role == "user") | .content[0].text]' <<<"$output")" '["one\n\npiped\n","two"]'
}

@test "stdin text without -m is one turn" {
	run -0 --separate-stderr bash -c 'echo hello | agent-run --no-store --model echo --format text'
	assert_equal "$output" "hello"
	[[ "$stderr" =~ ^agent-run:\ stop,\ session\ [0-9a-f-]{36},\ 6\ characters\ in,\ 6\ out$ ]]
	run -0 --separate-stderr bash -c 'printf "two\nlines\n" | agent-run --no-store --model echo'
	assert_equal "$(printf '%s\n' "$output" | grep -c turnEnd)" 1
	assert_equal "$(printf '%s\n' "$output" | tail -n 1 | jq -c .output.state.messages[0])" '{"content":[{"text":"two\nlines\n"}],"role":"user"}'
}

@test "stdin that is empty, blank, /dev/null or closed is no input" {
	for how in '</dev/null' '<<<"   "' '<&-'; do
		run -0 --separate-stderr bash -c "agent-run --no-store --model echo --format json $how"
		assert_equal "$(jq -c 'keys' <<<"$output")" '["sessionId","state"]'
		run -0 --separate-stderr bash -c "agent-run --no-store --model echo --format json -m hi $how"
		assert_equal "$(first_user <<<"$output")" hi
	done
}

@test "a terminal on stdin is not read when -m gives the input" {
	requires script timeout
	run -0 timeout 20 script -qec "agent-run --no-store --model echo --format json -m hi | jq -r .message.content[0].text" /dev/null
	assert_equal "${output//$'\r'/}" "hi"
}

@test "NDJSON on stdin with -m is refused, naming both; nothing runs" {
	run -100 --separate-stderr bash -c $'echo \'{"message":{"content":[{"text":"a"}]}}\' | agent-run --no-store --model echo -m hi'
	assert_equal "$output" ""
	assert_equal "$stderr" "agent-run: -m and NDJSON on stdin both give turns: use one (or --input-format text to send stdin as text after the -m text)
try 'agent-run --help'"
}

@test "--input-format decides: text sends JSON as text, ndjson parses text as JSON" {
	run -0 --separate-stderr bash -c $'echo \'{"a":1}\' | agent-run --no-store --model echo --format json --input-format text -m data'
	assert_equal "$(first_user <<<"$output")" 'data

{"a":1}'
	run -101 --separate-stderr bash -c 'echo hello | agent-run --no-store --model echo --input-format ndjson'
	assert_equal "$(tail -n 1 <<<"$output" | jq -r .output.error.message)" "invalid JSON: invalid token near 'hello' (at <stdin>:1)"
	# Auto-detection: only '{' starts NDJSON.
	run -0 --separate-stderr bash -c 'echo "[1]" | agent-run --no-store --model echo --format json'
	assert_equal "$(first_user <<<"$output")" '[1]'
	run -100 --separate-stderr agent-run --no-store --model echo --input-format yaml
	assert_equal "$stderr" "agent-run: --input-format must be ndjson or text, not 'yaml'
try 'agent-run --help'"
}

@test "stdin text over --max-record, or not UTF-8, is malformed input (101)" {
	run -101 --separate-stderr bash -c 'head -c 5000 /dev/zero | tr "\0" a | agent-run --no-store --model echo --max-record 4K -m hi'
	assert_equal "$output" '{"error":{"status":"INVALID_ARGUMENT","message":"text on <stdin> is longer than 4096 bytes (--max-record)"}}'
	assert_equal "$stderr" "agent-run: text on <stdin> is longer than 4096 bytes (--max-record)"
	run -101 --separate-stderr bash -c 'printf "\xff\xfe" | agent-run --no-store --model echo -m hi'
	assert_equal "$output" '{"error":{"status":"INVALID_ARGUMENT","message":"text on <stdin> is not valid UTF-8"}}'
	# Exactly the limit is fine.
	run -0 --separate-stderr bash -c 'head -c 4096 /dev/zero | tr "\0" a | agent-run --no-store --model echo --max-record 4K --format json'
	assert_equal "$(first_user <<<"$output" | wc -c)" 4097
}

# ---- guard rails ----

@test "-s 'two words' is not a session ID: refused with the options meant" {
	run -100 --separate-stderr agent-run --model echo -s 'You are terse.' -m hi
	assert_equal "$output" ""
	assert_equal "$stderr" "agent-run: --session 'You are terse.' is not a session ID (IDs have no spaces); for a system instruction use --system TEXT, to send text use -m TEXT
try 'agent-run --help'"
	# Nothing ran: not even the store was created.
	[ ! -e "$AGENTKIT_STORE" ]
}

@test "an agent name with spaces is refused: to send text use -m" {
	run -100 --separate-stderr agent-run 'hello world'
	assert_equal "$stderr" "agent-run: 'hello world' is not an agent name (names have no spaces); to send text use -m TEXT
try 'agent-run --help'"
	run -4 --separate-stderr agent-run hello
	[[ "${stderr%%$'\n'*}" == "agent-run: agent 'hello' not found (searched: agents"* ]]
	assert_equal "${stderr#*$'\n'}" "agent-run: agent-run --list lists the agents; to send text use -m TEXT"
}

@test "--model ecoh: not found at once, with did you mean and the providers" {
	run -4 --separate-stderr agent-run --model ecoh -m hi
	assert_equal "$output" '{"error":{"status":"NOT_FOUND","message":"model '"'"'ecoh'"'"' not found: did you mean '"'"'echo'"'"'?"}}'
	assert_equal "$stderr" "agent-run: model 'ecoh' not found: did you mean 'echo'?
agent-run: models are echo, script/PATH or PROVIDER/NAME; providers: openai, openai-responses, googleai, anthropic, ollama (agent-run --list-models)"
	# Nothing ran: not even the store was created.
	[ ! -e "$AGENTKIT_STORE" ]
}

@test "--model gpt-4o and friends: model names are PROVIDER/NAME" {
	run -4 --separate-stderr agent-run --no-store --model gpt-4o -m hi
	assert_equal "${stderr%%$'\n'*}" "agent-run: model 'gpt-4o' not found: model names are PROVIDER/NAME: did you mean 'openai/gpt-4o'?"
	run -4 --separate-stderr agent-run --no-store --model claude-sonnet-4-5 -m hi
	assert_equal "${stderr%%$'\n'*}" "agent-run: model 'claude-sonnet-4-5' not found: model names are PROVIDER/NAME: did you mean 'anthropic/claude-sonnet-4-5'?"
	run -4 --separate-stderr agent-run --no-store --model google/gemini-2.5-flash -m hi
	assert_equal "${stderr%%$'\n'*}" "agent-run: model 'google/gemini-2.5-flash' not found (unknown provider 'google'): did you mean 'googleai/gemini-2.5-flash'?"
	run -4 --separate-stderr agent-run --no-store --model opneai/gpt-4o -m hi
	assert_equal "${stderr%%$'\n'*}" "agent-run: model 'opneai/gpt-4o' not found (unknown provider 'opneai'): did you mean 'openai/gpt-4o'?"
	run -4 --separate-stderr agent-run --no-store --model openai -m hi
	assert_equal "${stderr%%$'\n'*}" "agent-run: model 'openai' names no model: use openai/NAME"
	run -4 --separate-stderr agent-run --no-store --model echo/x -m hi
	assert_equal "${stderr%%$'\n'*}" "agent-run: model 'echo/x' not found (the echo model has no variants): did you mean 'echo'?"
	# A prompt file's model is checked too, before the first turn.
	mkdir agents
	printf -- '---\nmodel: ecoh\n---\nhi\n' >agents/typo.prompt
	run -4 --separate-stderr agent-run typo -m hi
	assert_equal "${stderr%%$'\n'*}" "agent-run: model 'ecoh' not found: did you mean 'echo'?"
}

@test "a mistyped option suggests the one meant, in every binary" {
	run -100 --separate-stderr agent-run --sesion x -m hi
	assert_equal "$stderr" "agent-run: unknown option '--sesion' (did you mean '--session'?)
try 'agent-run --help'"
	run -100 --separate-stderr agent-snap --stroe=x sessions
	assert_equal "$stderr" "agent-snap: unknown option '--stroe' (did you mean '--store'?)
try 'agent-snap --help'"
	run -100 --separate-stderr agent-wait --timout 1s x
	assert_equal "${stderr%%$'\n'*}" "agent-wait: unknown option '--timout' (did you mean '--timeout'?)"
	run -100 --separate-stderr jpatch-diff --exitcode a b
	assert_equal "${stderr%%$'\n'*}" "jpatch-diff: unknown option '--exitcode' (did you mean '--exit-code'?)"
}

@test "agent-snap lgo SID: did you mean 'log'" {
	run -100 --separate-stderr agent-snap lgo 0b5c6f57-1f4a-4f7e-9a53-7f1b8a6b2d1e
	assert_equal "$output" ""
	assert_equal "$stderr" "agent-snap: unknown subcommand 'lgo' (did you mean 'log'?); to read a snapshot of that ID use 'agent-snap get lgo'
try 'agent-snap --help'"
	run -100 --separate-stderr agent-snap sesions
	assert_equal "${stderr%%$'\n'*}" "agent-snap: unknown subcommand 'sesions' (did you mean 'sessions'?); to read a snapshot of that ID use 'agent-snap get sesions'"
}

@test "state-mode refusals keep Genkit's message in the JSON and add agent-run's next step" {
	echo '{}' >state.json
	run -5 --separate-stderr agent-run --state state.json --model echo -m hi
	assert_equal "$(jq -r .error.message <<<"$output")" "state provided but agent has a session store configured (server-managed state); use snapshot ID instead"
	assert_equal "${stderr#*$'\n'}" "agent-run: --state FILE is for client-managed runs: add --no-store (or resume from the store with --session ID)"
	run -5 --separate-stderr agent-run --no-store --snapshot s1 --model echo -m hi
	assert_equal "${stderr#*$'\n'}" "agent-run: --session and --snapshot resume from the store: drop --no-store (or pass --state FILE)"
	run -101 --separate-stderr agent-run --no-store --state state.json --session abc --model echo -m hi
	assert_equal "${stderr#*$'\n'}" "agent-run: give --state FILE or --session/--snapshot, not both"
}

# ---- models ----

@test "AGENTKIT_MODEL is the model when neither the prompt nor --model names one" {
	AGENTKIT_MODEL=echo run -0 --separate-stderr agent-run --no-store --format json -m hi
	assert_equal "$(jq -r .message.content[0].text <<<"$output")" hi
	# The prompt's model wins over it, --model over both.
	mkdir agents
	printf '{"text":"from the prompt'"'"'s model"}\n' >agents/said.ndjson
	printf -- '---\nmodel: script/%s\n---\n' "$PWD/agents/said.ndjson" >agents/scripted.prompt
	AGENTKIT_MODEL=echo run -0 --separate-stderr agent-run scripted --no-store --format json -m hi
	assert_equal "$(jq -r .message.content[0].text <<<"$output")" "from the prompt's model"
	AGENTKIT_MODEL=script/nowhere run -0 --separate-stderr agent-run scripted --no-store --model echo --format json -m hi
	assert_equal "$(jq -r .message.content[0].text <<<"$output")" hi
	# A typo in it is caught like one in --model.
	AGENTKIT_MODEL=ecoh run -4 --separate-stderr agent-run --no-store -m hi
	assert_equal "${stderr%%$'\n'*}" "agent-run: model 'ecoh' not found: did you mean 'echo'?"
}

@test "--list-models without keys: every provider, its variables, no key, the base URL; nothing asked" {
	export OPENAI_BASE_URL=http://127.0.0.1:9/v1
	run -0 --separate-stderr agent-run --list-models
	[ -z "$stderr" ]
	assert_equal "$output" '{"provider":"echo","models":["echo"]}
{"provider":"script","models":["script/PATH"]}
{"provider":"openai","keyVariables":["OPENAI_API_KEY"],"keyFrom":null,"baseUrl":"http://127.0.0.1:9/v1","baseUrlVariables":["OPENAI_BASE_URL"],"headerVariables":["OPENAI_ORG_ID","OPENAI_PROJECT_ID"]}
{"provider":"openai-responses","keyVariables":["OPENAI_API_KEY"],"keyFrom":null,"baseUrl":"http://127.0.0.1:9/v1","baseUrlVariables":["OPENAI_BASE_URL"],"headerVariables":["OPENAI_ORG_ID","OPENAI_PROJECT_ID"]}
{"provider":"googleai","keyVariables":["GOOGLE_API_KEY","GEMINI_API_KEY"],"keyFrom":null,"baseUrl":"https://generativelanguage.googleapis.com","baseUrlVariables":["GEMINI_BASE_URL","GOOGLE_GEMINI_BASE_URL"]}
{"provider":"anthropic","keyVariables":["ANTHROPIC_API_KEY","ANTHROPIC_AUTH_TOKEN"],"keyFrom":null,"baseUrl":"https://api.anthropic.com","baseUrlVariables":["ANTHROPIC_BASE_URL"]}
{"provider":"ollama","keyVariables":["OLLAMA_API_KEY"],"keyFrom":null,"baseUrl":"http://127.0.0.1:11434","baseUrlVariables":["OLLAMA_HOST"],"keyOptional":true}'
	AGENTKIT_MODEL=echo run -0 --separate-stderr agent-run --list-models --format text
	assert_equal "$output" "echo             offline, no key
  echo
script           offline, no key
  script/PATH
openai           OPENAI_API_KEY: not set, http://127.0.0.1:9/v1
openai-responses OPENAI_API_KEY: not set, http://127.0.0.1:9/v1
googleai         GOOGLE_API_KEY or GEMINI_API_KEY: not set, https://generativelanguage.googleapis.com
anthropic        ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN: not set, https://api.anthropic.com
ollama           no key needed, http://127.0.0.1:11434
default model (AGENTKIT_MODEL): echo"
}

@test "--list-models with a key: each provider's own list through its models endpoint" {
	echo '[]' >none.json
	for dialect in openai gemini anthropic ollama; do
		mock_start "$dialect" none.json sk-test-1234
		# Only this provider is asked (its key set; Ollama: its host).
		host=$OLLAMA_HOST
		unset OPENAI_API_KEY GEMINI_API_KEY ANTHROPIC_API_KEY OLLAMA_HOST
		case $dialect in
		ollama) export OLLAMA_HOST=$host ;;
		*) export "${dialect^^}_API_KEY=sk-test-1234" ;;
		esac
		run -0 --separate-stderr agent-run --list-models
		[ -z "$stderr" ] || fail "$dialect: $stderr"
		provider=${dialect/gemini/googleai}
		row=$(jq -c "select(.provider == \"$provider\")" <<<"$output")
		case $dialect in
		ollama) want='["ollama/mock-large:latest","ollama/mock-small:latest"]' ;;
		*) want="[\"$provider/mock-large\",\"$provider/mock-small\"]" ;;
		esac
		assert_equal "$(jq -c .models <<<"$row")" "$want"
		[ "$dialect" = ollama ] || assert_equal "$(jq -r .keyFrom <<<"$row")" "${dialect^^}_API_KEY"
		# One GET on the dialect's endpoint, with the key where the dialect wants it.
		assert_equal "$(jq -c '[.method, .path, .auth]' "$MOCK_LOG")" \
			"$(case $dialect in
			openai) echo '["GET","/v1/models","ok"]' ;;
			gemini) echo '["GET","/v1beta/models","ok"]' ;;
			anthropic) echo '["GET","/v1/models","ok"]' ;;
			ollama) echo '["GET","/api/tags","none"]' ;;
			esac)"
		[[ "$output" != *sk-test-1234* ]] || fail "the key was printed"
		mock_stop
	done
}

@test "--list-models: a rejected key is named on stderr, in the row, exit 1; user and password never shown" {
	echo '[]' >none.json
	mock_start openai none.json sk-right-1234
	unset GEMINI_API_KEY ANTHROPIC_API_KEY OLLAMA_HOST
	export OPENAI_API_KEY=sk-wrong-5678 OPENAI_BASE_URL="http://me:hunter2@127.0.0.1:$MOCK_PORT/v1"
	run -1 --separate-stderr agent-run --list-models
	row=$(jq -c 'select(.provider == "openai")' <<<"$output")
	assert_equal "$(jq -r .baseUrl <<<"$row")" "http://***@127.0.0.1:$MOCK_PORT/v1"
	assert_equal "$(jq -c .error <<<"$row")" '{"status":"UNAUTHENTICATED","message":"openai: HTTP 401 Unauthorized: Incorrect API key provided: [redacted] You can find your API key at https://platform.openai.com/account/api-keys."}'
	assert_equal "$stderr" "agent-run: openai: HTTP 401 Unauthorized: Incorrect API key provided: [redacted] You can find your API key at https://platform.openai.com/account/api-keys."
	[[ "$output$stderr" != *hunter2* && "$output$stderr" != *sk-wrong* ]] || fail "a secret was printed"
}

# ---- output formats ----

@test "--format json prints one final object, the AgentOutput" {
	run -0 --separate-stderr agent-run --no-store --model echo --format json -m 'hi there'
	[ -z "$stderr" ]
	assert_equal "$(printf '%s\n' "$output" | wc -l)" 1
	assert_equal "$(jq -c 'del(.sessionId, .state.sessionId)' <<<"$output")" '{"finishReason":"stop","message":{"content":[{"text":"hi there"}],"role":"model"},"state":{"messages":[{"content":[{"text":"hi there"}],"role":"user"},{"content":[{"text":"hi there"}],"role":"model"}],"usage":{"inputMessages":1,"inputCharacters":8,"outputMessages":1,"outputCharacters":8}},"usage":{"inputMessages":1,"inputCharacters":8,"outputMessages":1,"outputCharacters":8}}'
	# An invocation that never started still ends with its error object.
	run -4 --separate-stderr agent-run --no-store --model ecoh --format json -m hi
	assert_equal "$(jq -r .error.status <<<"$output")" NOT_FOUND
	run -100 --separate-stderr agent-run --format yaml
	assert_equal "${stderr%%$'\n'*}" "agent-run: --format must be ndjson, text or json, not 'yaml'"
}

# A turn that says something, calls a tool, then says more.
tool_script() {
	printf '%s\n' '{"text":"Noting it.","toolRequests":[{"name":"addTask","ref":"t1","input":{"title":"buy milk"}}],"usage":{"inputTokens":12,"outputTokens":5}}' \
		'{"text":"Saved your note.","usage":{"inputTokens":20,"outputTokens":4}}' >notes.ndjson
}

@test "text mode: tool calls on stderr one line each, a line break between model messages, usage in the summary" {
	tool_script
	run -0 --separate-stderr agent-run --no-store --format text --model script/notes.ndjson \
		--tool "$FIXTURES/tools/addTask.json" -m 'note: buy milk'
	assert_equal "$output" "Noting it.
Saved your note."
	[[ "$stderr" =~ ^"tool addTask {\"title\":\"buy milk\"}
tool addTask ok {\"id\":1,\"title\":\"buy milk\",\"done\":false}
agent-run: stop, session "[0-9a-f-]{36}", 32 tokens in, 9 out"$ ]] || fail "stderr: $stderr"
	# A failing tool reads "error", then the failure.
	printf '%s\n' '{"toolRequests":[{"name":"fail","ref":"x","input":{"a":1}}]}' >fail.ndjson
	run -1 --separate-stderr agent-run --no-store --format text --model script/fail.ndjson \
		--tool "$FIXTURES/tools/fail.json" -m go
	assert_equal "$(sed -n 1,3p <<<"$stderr")" 'tool fail {"a":1}
tool fail error
agent-run: generate: tool "fail" failed: exited with status 3: boom: the disk is on fire'
}

@test "text mode: colour only on a terminal, never with NO_COLOR" {
	requires script timeout
	tool_script
	cmd="agent-run --no-store --format text --model script/notes.ndjson --tool $FIXTURES/tools/addTask.json -m note"
	# A pipe: no colour (the test above asserts plain lines); a terminal: colour.
	run -0 timeout 20 script -qec "$cmd" /dev/null
	[[ "$output" == *$'\e[32mok\e[0m'* ]] || fail "no colour on a terminal: $output"
	NO_COLOR=1 run -0 timeout 20 script -qec "$cmd" /dev/null
	[[ "$output" != *$'\e['* ]] || fail "colour despite NO_COLOR: $output"
	[[ "$output" == *"tool addTask ok "* ]]
}

@test "agent-wait: a stop signal clears the status line" {
	requires script timeout
	now=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
	echo "{\"snapshotId\":\"w1\",\"sessionId\":\"live\",\"status\":\"pending\",\"createdAt\":\"$now\",\"updatedAt\":\"$now\",\"heartbeatAt\":\"$now\"}" |
		agent-snap import >/dev/null
	# exec: script runs the command with $SHELL -c (sh when SHELL is unset, as
	# under cron or CI), and dash would otherwise keep itself between.
	timeout 20 script -qfec "exec agent-wait --heartbeat-timeout 1h w1" typescript >/dev/null 2>&1 </dev/null &
	spid=$!
	wait_for 10 grep -qs 'pending' typescript
	# timeout's child is script, script's child agent-wait.
	wpid=$(pgrep -P "$(pgrep -P "$spid")")
	kill -INT "$wpid"
	rc=0
	wait "$spid" || rc=$?
	assert_equal "$rc" 130
	# The last bytes agent-wait wrote to the terminal erase the status line.
	run python3 -c 'import sys; d = open("typescript", "rb").read().split(b"\nScript done")[0]; print(repr(d[-4:]))'
	assert_equal "$output" "b'\\r\\x1b[K'"
}

# ---- the smaller inconsistencies (docs/agent-run.md "Messages and next steps") ----

@test "--frmat=json: the did-you-mean names the option, not its value" {
	run -100 --separate-stderr agent-run --frmat=json -m hi
	assert_equal "$stderr" "agent-run: unknown option '--frmat' (did you mean '--format'?)
try 'agent-run --help'"
	run -100 --separate-stderr agent-run --nosuch=secret-value -m hi
	assert_equal "${stderr%%$'\n'*}" "agent-run: unknown option '--nosuch'"
}

@test "--max-turns abc is not a number; 0 is out of range" {
	run -100 --separate-stderr agent-run --model echo --max-turns abc -m hi
	assert_equal "${stderr%%$'\n'*}" "agent-run: --max-turns: 'abc' is not a number (give a count of rounds, 1 or more)"
	run -100 --separate-stderr agent-run --model echo --max-turns 0 -m hi
	assert_equal "${stderr%%$'\n'*}" "agent-run: --max-turns must be from 1 to 1000000, got '0'"
}

@test "an unknown agent: did you mean the closest agent on the path; a missing tool names each folder once" {
	mkdir agents
	printf -- '---\nmodel: echo\ndescription: Runs at night.\n---\nhi\n' >agents/nightly.prompt
	printf -- '---\nmodel: echo\ntools: [nope]\n---\nhi\n' >agents/tooled.prompt
	run -4 --separate-stderr agent-run nightli -m hi
	assert_output "{\"error\":{\"status\":\"NOT_FOUND\",\"message\":\"agent 'nightli' not found (searched: agents, $XDG_CONFIG_HOME/agentkit/agents): did you mean 'nightly'?\"}}"
	assert_equal "$stderr" "agent-run: agent 'nightli' not found (searched: agents, $XDG_CONFIG_HOME/agentkit/agents): did you mean 'nightly'?
agent-run: agent-run --list lists the agents; to send text use -m TEXT"
	run -4 --separate-stderr agent-run --no-store tooled -m hi
	assert_equal "$stderr" "agent-run: tool 'nope' not found (searched: agents/tools, $XDG_CONFIG_HOME/agentkit/agents/tools, tools)"
}

@test "agent-run --list --format text is a table; NDJSON otherwise" {
	mkdir agents
	printf -- '---\nmodel: echo\ndescription: Runs at night.\n---\nhi\n' >agents/nightly.prompt
	printf -- '---\nmodel: echo\n---\nhi\n' >agents/x.prompt
	printf -- '---\nmodel: [\n---\n' >agents/broken-one.prompt
	run -0 --separate-stderr agent-run --list --format text
	assert_equal "$output" "broken-one  error: agents/broken-one.prompt:3: invalid front matter: while parsing a flow node did not find expected node content
nightly     Runs at night.
x           agents/x.prompt"
	run -0 --separate-stderr agent-run --list
	assert_equal "$(jq -r .name <<<"$output" | paste -sd,)" broken-one,nightly,x
}

@test "a file the command line names that is not there is not found (4), as a missing models file is" {
	run -4 --separate-stderr agent-run --no-store --model echo --output-schema nosuch.json -m hi
	assert_output '{"error":{"status":"NOT_FOUND","message":"--output-schema: cannot open '"'nosuch.json'"': No such file or directory"}}'
	assert_equal "$stderr" "agent-run: --output-schema: cannot open 'nosuch.json': No such file or directory"
	run -4 --separate-stderr agent-run --no-store --model echo --state nosuch.json -m hi
	assert_equal "$stderr" "agent-run: cannot open 'nosuch.json': No such file or directory"
	echo '{}' >a.json
	run -4 --separate-stderr jpatch-diff a.json nosuch.json
	assert_equal "$stderr" "jpatch-diff: cannot open 'nosuch.json': No such file or directory"
	run -4 --separate-stderr jpatch-apply nosuch.json a.json
	assert_equal "$stderr" "jpatch-apply: cannot open 'nosuch.json': No such file or directory"
}

@test "agent-abort --wait -m ID: -m is taken, as agent-wait and agent-snap take it" {
	run -0 --separate-stderr agent-run --model echo -m hi
	id=$(last | jq -r .output.snapshotId)
	run -0 --separate-stderr agent-abort --wait -m "$id"
	assert_output "{\"snapshotId\":\"$id\",\"previousStatus\":\"completed\",\"status\":\"completed\"}"
	assert_equal "$stderr" ""
}
