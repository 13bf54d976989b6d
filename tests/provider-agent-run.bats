#!/usr/bin/env bats
# agent-run end to end over each real provider's wire protocol (against
# scripts/mock-model): a tool interrupt, a resume in a second process that
# sends the answer back to the model, and a caller stop while the model
# stream stalls.

load test_helper
load provider_helper

setup() { provider_setup; }
teardown() { mock_stop; }

TOOLS="$TOP/tests/fixtures/tools"

# interrupt_resume DIALECT: turn 1 asks the interrupting tool, the resume
# answers it and the model's second reply ends the turn.
interrupt_resume() {
	local dialect=$1 model
	model=$(model_for "$dialect")
	printf '%s\n' '{"tools":[{"name":"ask","args":{"q":"which color?"},"id":"call_1"}]}' \
		'{"text":"Blue it is."}' >turns.ndjson
	mock_start "$dialect" turns.ndjson sk-test-1234
	run -6 --separate-stderr agent-run --model "$model" --tool "$TOOLS/ask.json" -m paint
	[ "$(last | jq -r .output.finishReason)" = interrupted ] || fail "turn 1: $output"
	sid=$(last | jq -r .output.sessionId)
	ref=$(last | jq -r '.output.message.content[] | select(.toolRequest) | .toolRequest.ref')
	[ -n "$ref" ] && [ "$ref" != null ] || fail "no ref: $output"
	[ "$(last | jq -c '[.output.message.content[] | select(.toolRequest) | .metadata.interrupt]')" = '[{"question":"which color?"}]' ]

	run -0 --separate-stderr agent-run --model "$model" --tool "$TOOLS/ask.json" --session "$sid" \
		<<<'{"resume":{"respond":[{"toolResponse":{"name":"ask","ref":"'"$ref"'","output":"blue-answer"}}]}}'
	[ "$(last | jq -r .output.message.content[0].text)" = "Blue it is." ] || fail "turn 2: $output"
	[ "$(mock_requests)" = 2 ]
	# The first request declared the tool; the second carried the answer back.
	[ "$(jq -s '.[0].body | tostring | (contains("ask") and (contains("which color") | not))' "$MOCK_LOG")" = true ]
	[ "$(jq -s '.[1].body | tostring | contains("blue-answer")' "$MOCK_LOG")" = true ]
	auth=ok; [ "$dialect" = ollama ] && auth=none   # Ollama takes no key
	[ "$(jq -s -c '[.[].auth] | unique' "$MOCK_LOG")" = "[\"$auth\"]" ]
	# The key never reached the store.
	run -1 grep -r sk-test-1234 "$AGENTKIT_STORE"
}

@test "openai: interrupt, resume in a second process, the answer reaches the model" {
	interrupt_resume openai
}

@test "gemini: interrupt, resume in a second process, the answer reaches the model" {
	interrupt_resume gemini
}

@test "anthropic: interrupt, resume in a second process, the answer reaches the model" {
	interrupt_resume anthropic
}

@test "ollama: interrupt, resume in a second process, the answer reaches the model" {
	interrupt_resume ollama
}

@test "a caller stop (SIGTERM) during a stalled stream cancels the request and exits 2 with the resume point" {
	printf '%s\n' '{"chunks":["Thinking ","hard"],"stall":30}' >turns.ndjson
	mock_start openai turns.ndjson sk-test-1234
	agent-run --model openai/gpt-4o -m hi >out.ndjson 2>err.txt 3>&- &
	pid=$!
	for _ in $(seq 1 200); do
		grep -q modelChunk out.ndjson 2>/dev/null && break
		sleep 0.025
	done
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 2 ] || fail "exit $rc: $(cat err.txt)"
	[ "$(tail -n 1 out.ndjson | jq -c '[.output.finishReason, .output.error.status]')" = '["aborted","CANCELLED"]' ]
}

@test "--key-file and AGENTKIT_KEY_FILE give the provider its key; a wrong key fails without echoing it" {
	printf '%s\n' '{"text":"hi there"}' '{"text":"again"}' >turns.ndjson
	mock_start anthropic turns.ndjson sk-file-5678
	unset ANTHROPIC_API_KEY
	printf 'sk-file-5678\n' >key.txt
	run -0 --separate-stderr agent-run --model anthropic/claude-sonnet-4-5 --key-file key.txt -m hello
	[ "$(last | jq -r .output.message.content[0].text)" = "hi there" ]
	AGENTKIT_KEY_FILE=key.txt run -0 --separate-stderr agent-run --no-store --model anthropic/claude-sonnet-4-5 -m hello
	[ "$(last | jq -r .output.message.content[0].text)" = "again" ]
	[ "$(jq -s -c '[.[].auth]' "$MOCK_LOG")" = '["ok","ok"]' ]
	printf 'sk-wrong-0000\n' >bad.txt
	run -1 --separate-stderr agent-run --model anthropic/claude-sonnet-4-5 --key-file bad.txt -m hello
	[ "$(last | jq -r .output.error.status)" = UNAUTHENTICATED ]
	[[ "$output$stderr" != *sk-wrong-0000* ]] || fail "the key was echoed"
	run -1 grep -r -e sk-file-5678 -e sk-wrong-0000 "$AGENTKIT_STORE"
}

# tool_loop DIALECT [CA_VAR]: one turn, two model calls (a tool round
# between them) in one process: the second call reuses the first one's
# connection.  With CA_VAR, that variable names the mock's certificate.
tool_loop() {
	local dialect=$1 model
	model=$(model_for "$dialect")
	printf '%s\n' '{"tools":[{"name":"greet","args":{"name":"Ada"},"id":"call_1"}]}' \
		'{"text":"Greeted."}' >turns.ndjson
	mock_start "$dialect" turns.ndjson sk-test-1234
	[ -z "${2-}" ] || export "$2=$MOCK_CERT"
	run -0 --separate-stderr agent-run --model "$model" --tool "$TOOLS/greet.json" -m hi
	[ "$(last | jq -r .output.message.content[0].text)" = Greeted. ] || fail "$output"
	[ "$(mock_requests)" = 2 ]
	[ "$(jq -s '.[1].body | tostring | contains("hello Ada")' "$MOCK_LOG")" = true ]
	assert_equal "$(jq -s '[.[].peer] | unique | length' "$MOCK_LOG")" 1
}

# The message of a provider without its key.
nokey() { echo "$1: no API key: set $2, or name a file holding it with --key-file FILE or AGENTKIT_KEY_FILE"; }

@test "a missing key is found before the first turn and before --detach returns: exit 5, UNAUTHENTICATED, nothing sent" {
	printf '%s\n' '{"text":"unused"}' >turns.ndjson
	mock_start openai turns.ndjson sk-file-5678
	unset AGENTKIT_KEY_FILE OPENAI_API_KEY GEMINI_API_KEY ANTHROPIC_API_KEY
	local m
	m=$(nokey openai OPENAI_API_KEY)
	for how in "" --detach "--format json" "--format text"; do
		# shellcheck disable=SC2086
		run -5 --separate-stderr agent-run --model openai/gpt-4o-mini $how -m hi
		assert_equal "$stderr" "agent-run: $m"
		if [ "$how" = "--format text" ]; then
			assert_output ""
		else
			assert_output "{\"error\":{\"status\":\"UNAUTHENTICATED\",\"message\":\"$m\"}}"
		fi
	done
	# The NDJSON input path too, and for every provider that needs a key.
	run -5 --separate-stderr agent-run --no-store --model anthropic/claude-sonnet-4-5 <<<'{"message":{"role":"user","content":[{"text":"hi"}]}}'
	assert_equal "$stderr" "agent-run: $(nokey anthropic 'ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN')"
	run -5 --separate-stderr agent-run --no-store --model googleai/gemini-2.5-flash -m hi
	assert_equal "$stderr" "agent-run: $(nokey googleai 'GOOGLE_API_KEY or GEMINI_API_KEY')"
	run -5 --separate-stderr agent-run --no-store --model openai-responses/gpt-5 -m hi
	assert_equal "$stderr" "agent-run: $(nokey openai-responses OPENAI_API_KEY)"
	# A key file that holds nothing is no key either.
	: >empty.key
	AGENTKIT_KEY_FILE=empty.key run -5 --separate-stderr agent-run --no-store --model openai/gpt-4o -m hi
	assert_equal "$stderr" "agent-run: openai: key file 'empty.key' is empty"
	# Nothing ran: no request, no session, no worker.
	assert_equal "$(wc -l <"$MOCK_LOG")" 0
	# (no store was made: exit 4; on PostgreSQL the store is there, empty)
	run --separate-stderr agent-snap sessions
	assert_output ""
	# With the key the same command runs.
	printf 'sk-file-5678\n' >key.txt
	AGENTKIT_KEY_FILE=key.txt run -0 --separate-stderr agent-run --no-store --model openai/gpt-4o-mini -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" unused
}

@test "what needs no key runs without one: echo, script, an Ollama server, a custom agent's handler" {
	printf '%s\n' '{"text":"local"}' >turns.ndjson
	mock_start ollama turns.ndjson
	unset AGENTKIT_KEY_FILE OLLAMA_API_KEY
	run -0 --separate-stderr agent-run --no-store --model echo -m hi
	script '{"text":"scripted"}'
	run -0 --separate-stderr agent-run --no-store --model "script/$BATS_TEST_TMPDIR/model.ndjson" -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" scripted
	run -0 --separate-stderr agent-run --no-store --model ollama/llama3.2 -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" local
	# A handler picks its models, and this one calls none.
	run -0 --separate-stderr agent-run --no-store --model openai/gpt-4o \
		--exec "$TOP/examples/handlers/echo-upper.sh" -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" HI
	assert_equal "$stderr" ""
}

@test "openai: a tool loop's model calls share one kept-alive connection" {
	tool_loop openai
}

@test "anthropic: a tool loop's model calls share one kept-alive connection" {
	tool_loop anthropic
}

@test "a detach line after an attached turn: the worker, detached in place, goes on on its own connection" {
	printf '%s\n' '{"text":"first"}' '{"text":"second"}' >turns.ndjson
	mock_start openai turns.ndjson sk-test-1234
	# The detach line comes once turn one's row is written (docs/detach.md,
	# "Eager intake": one sent with it would detach turn one too).
	run -0 --separate-stderr agent-run --model openai/gpt-4o < <(
		exec 3>&-
		echo '{"message":{"content":[{"text":"one"}]}}'
		wait_for 20 eval '[ -n "$(agent-snap sessions 2>/dev/null)" ]'
		echo '{"detach":true,"message":{"content":[{"text":"two"}]}}')
	id=$(last | jq -r .output.snapshotId)
	run -0 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, [.state.messages[] | .content[0].text]]' <<<"$output")" \
		'["completed",["one","first","two","second"]]'
	[ "$(mock_requests)" = 2 ]
	# The back process that ran turn one is the worker: the same process,
	# the same kept-alive connection (no handle crossed a fork).
	assert_equal "$(jq -s '[.[].peer] | unique | length' "$MOCK_LOG")" 1
	grep -q "worker started in place" "$AGENTKIT_STORE/logs/$id.log"
	grep -q "Sanitizer\|runtime error:" "$AGENTKIT_STORE"/logs/*.log && fail "$(cat "$AGENTKIT_STORE"/logs/*.log)"
	true
}

@test "https: the certificate CURL_CA_BUNDLE names is trusted; the tool loop's calls share one TLS connection" {
	MOCK_TLS=1 tool_loop openai CURL_CA_BUNDLE
}

@test "https: SSL_CERT_FILE is honoured as the curl tool honours it" {
	MOCK_TLS=1 tool_loop anthropic SSL_CERT_FILE
}

@test "https: an untrusted certificate fails at once with curl's reason, and is not retried" {
	echo '{"text":"never"}' >turns.ndjson
	MOCK_TLS=1 mock_start openai turns.ndjson sk-test-1234
	run -1 --separate-stderr agent-run --model openai/gpt-4o -m hi
	[[ "$stderr" == *"SSL certificate problem: self-signed certificate"* ]] || fail "$stderr"
	[[ "$stderr" != *"gave up after"* ]] || fail "retried: $stderr"
	assert_equal "$(last | jq -r .output.error.status)" UNAVAILABLE
	[ "$(mock_requests)" = 0 ]
}
