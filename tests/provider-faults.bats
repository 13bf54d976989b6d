#!/usr/bin/env bats
# provider-faults.bats - every provider against every fault scripts/mock-model
# injects: split reads, CRLF, keep-alives, mid-stream errors, truncation, cut
# connections, 429/5xx retries, stalls, wrong content type, cancellation.

load test_helper
load provider_helper

setup() { provider_setup; }
teardown() { mock_stop; }

DIALECTS="openai gemini anthropic ollama"
HELLO_MSG='{"role":"model","content":[{"text":"Hello there world"}]}'

# run_turns DIALECT TURNS-JSON [driver args...]: one call against a fresh mock.
run_turns() {
	local d=$1 turns=$2
	shift 2
	mock_stop
	printf '%s\n' "$turns" >"$BATS_TEST_TMPDIR/script.json"
	mock_start "$d" "$BATS_TEST_TMPDIR/script.json" test-key-0123456789
	req_simple "$(model_for "$d")" >"$BATS_TEST_TMPDIR/req.json"
	run --separate-stderr "$MODEL_CALL" "$@" <"$BATS_TEST_TMPDIR/req.json"
}

assert_hello() {
	assert_equal "$status" 0
	assert_equal "${#lines[@]}" 4
	assert_equal "${lines[0]}" '{"role":"model","index":0,"content":[{"text":"Hello "}]}'
	assert_equal "${lines[1]}" '{"role":"model","index":0,"content":[{"text":"there "}]}'
	assert_equal "${lines[2]}" '{"role":"model","index":0,"content":[{"text":"world"}]}'
	assert_equal "$(jq -c '.response.message' <<<"${lines[3]}")" "$HELLO_MSG"
	assert_equal "$(jq -r '.response.finishReason' <<<"${lines[3]}")" stop
	assert_equal "$stderr" ""
}

@test "clean text stream, every dialect" {
	for d in $DIALECTS; do
		run_turns "$d" '{"text":"Hello there world"}'
		assert_hello
		assert_equal "$(mock_requests)" 1
	done
}

@test "one byte per write" {
	for d in $DIALECTS; do
		run_turns "$d" '{"text":"Hello there world","split":1}'
		assert_hello
	done
}

@test "random split points (inside data:, escapes, CR LF pairs)" {
	for d in $DIALECTS; do
		run_turns "$d" '{"text":"Hello there world","split":"random","crlf":true}'
		assert_hello
	done
}

@test "CRLF framing and keep-alive comments" {
	for d in $DIALECTS; do
		run_turns "$d" '{"text":"Hello there world","crlf":true,"comments":true}'
		assert_hello
	done
}

@test "LF framing where the service uses CRLF (gemini)" {
	run_turns gemini '{"text":"Hello there world","crlf":false}'
	assert_hello
}

@test "mid-stream error: partial output, the provider's status, no retry" {
	for d in $DIALECTS; do
		run_turns "$d" '{"text":"Hello there world","midError":true}'
		assert_equal "${#lines[@]}" 2
		assert_equal "${lines[0]}" '{"role":"model","index":0,"content":[{"text":"Hello "}]}'
		case $d in
		openai) want='{"status":"INTERNAL","message":"openai: error in stream: The server had an error while processing your request. Sorry about that! (server_error)"}' ;;
		gemini) want='{"status":"INTERNAL","message":"googleai: error in stream: Internal error encountered. (INTERNAL)"}' ;;
		anthropic) want='{"status":"UNAVAILABLE","message":"anthropic: error in stream: Overloaded (overloaded_error)"}' ;;
		ollama) want='{"status":"INTERNAL","message":"ollama: error in stream: an error was encountered while running the model"}' ;;
		esac
		assert_equal "$(jq -c .error <<<"${lines[1]}")" "$want"
		assert_equal "$status" 1
		assert_equal "$(mock_requests)" 1
	done
}

@test "truncated stream (no terminator) fails after output, never replayed" {
	for d in $DIALECTS; do
		run_turns "$d" '{"text":"Hello there world","truncate":true}'
		assert_equal "$status" 1
		assert_equal "${lines[0]}" '{"role":"model","index":0,"content":[{"text":"Hello "}]}'
		assert_equal "$(jq -r .error.status <<<"${lines[-1]}")" UNAVAILABLE
		assert_regex "$(jq -r .error.message <<<"${lines[-1]}")" 'the stream ended before .*truncated after [0-9]+ bytes'
		assert_equal "$(mock_requests)" 1
	done
}

@test "connection cut after output fails, never replayed" {
	for d in $DIALECTS; do
		run_turns "$d" '[{"text":"Hello there world","cutEvents":3},{"text":"again"}]'
		assert_equal "$status" 1
		assert_equal "${lines[0]}" '{"role":"model","index":0,"content":[{"text":"Hello "}]}'
		assert_equal "$(jq -r .error.status <<<"${lines[-1]}")" UNAVAILABLE
		assert_equal "$(mock_requests)" 1
	done
}

@test "429 with retry-after-ms is retried" {
	for d in $DIALECTS; do
		run_turns "$d" '[{"status":429,"headers":{"retry-after-ms":"20"}},{"text":"Hello there world"}]'
		assert_hello
		assert_equal "$(mock_requests)" 2
	done
}

@test "500, 503 and 529 are retried with backoff" {
	for d in $DIALECTS; do
		run_turns "$d" '[{"status":500},{"status":503},{"status":529},{"text":"Hello there world"}]'
		assert_hello
		assert_equal "$(mock_requests)" 4
		# Each attempt sent the same body.
		assert_equal "$(jq -c .body "$MOCK_LOG" | sort -u | wc -l)" 1
	done
}

@test "retries are bounded in count" {
	export AGENTKIT_HTTP_RETRIES=2
	for d in $DIALECTS; do
		run_turns "$d" '[{"status":503,"repeat":5}]'
		assert_equal "$status" 1
		assert_equal "${#lines[@]}" 1
		assert_equal "$(jq -r .error.status <<<"${lines[0]}")" UNAVAILABLE
		assert_regex "$(jq -r .error.message <<<"${lines[0]}")" '^[a-z]+: HTTP 503 Service Unavailable: .*\(gave up after 3 attempts\)$'
		assert_equal "$(mock_requests)" 3
	done
}

@test "retries are bounded in time" {
	export AGENTKIT_HTTP_RETRY_BUDGET=100ms
	for d in $DIALECTS; do
		run_turns "$d" '[{"status":429,"headers":{"retry-after-ms":"5000"}},{"text":"Hello there world"}]'
		assert_equal "$status" 1
		assert_equal "$(jq -r .error.status <<<"${lines[0]}")" RESOURCE_EXHAUSTED
		assert_regex "$(jq -r .error.message <<<"${lines[0]}")" '\(gave up after 1 attempts: waiting 5000 ms more would pass the retry budget of 100 ms\)$'
		assert_equal "$(mock_requests)" 1
	done
}

@test "x-should-retry: false overrides the status" {
	for d in $DIALECTS; do
		run_turns "$d" '[{"status":503,"headers":{"x-should-retry":"false"}},{"text":"Hello there world"}]'
		assert_equal "$status" 1
		assert_equal "$(mock_requests)" 1
	done
}

@test "400 is not retried and keeps the provider's message" {
	for d in $DIALECTS; do
		run_turns "$d" '[{"status":400,"message":"bad things"},{"text":"Hello there world"}]'
		# The provider refused a request agentkit built: a model failure
		# (DESIGN §8), Genkit's status name kept.
		assert_equal "$status" 1
		assert_equal "$(jq -r .error.status <<<"${lines[0]}")" INVALID_ARGUMENT
		# OpenAI and Anthropic send a request id; the message names it
		case $d in
		openai|anthropic) tail=' (request id req_mock01)' ;;
		*) tail= ;;
		esac
		assert_regex "$(jq -r .error.message <<<"${lines[0]}")" "^[a-z]+: HTTP 400 Bad Request: bad things${tail//[()]/.}\$"
		assert_equal "$(mock_requests)" 1
	done
}

@test "HTTP statuses map to Genkit's classes" {
	export AGENTKIT_HTTP_RETRIES=0
	for pair in 401:UNAUTHENTICATED 403:PERMISSION_DENIED 404:NOT_FOUND 504:DEADLINE_EXCEEDED; do
		run_turns openai "{\"status\":${pair%%:*}}"
		assert_equal "$(jq -r .error.status <<<"${lines[-1]}")" "${pair#*:}"
		assert_equal "$status" "$(case ${pair#*:} in NOT_FOUND) echo 4 ;; *) echo 1 ;; esac)"
	done
}

@test "a stalled stream after output hits the inactivity timeout, not retried" {
	export AGENTKIT_HTTP_IDLE_TIMEOUT=300ms
	for d in $DIALECTS; do
		run_turns "$d" '{"text":"Hello there world","stall":3}'
		assert_equal "$status" 1
		assert_equal "$(jq -r .error.status <<<"${lines[-1]}")" UNAVAILABLE
		assert_regex "$(jq -r .error.message <<<"${lines[-1]}")" 'no data from http://127.0.0.1:[0-9]+/.* for 300 ms \(inactivity timeout\)$'
		assert_equal "$(mock_requests)" 1
	done
}

@test "a stall before any body byte is retried" {
	export AGENTKIT_HTTP_IDLE_TIMEOUT=300ms
	for d in openai anthropic; do
		run_turns "$d" '[{"text":"x","stallBefore":2},{"text":"Hello there world"}]'
		assert_hello
		assert_equal "$(mock_requests)" 2
	done
}

@test "a wrong content type is an error, not a stream" {
	for d in $DIALECTS; do
		run_turns "$d" '{"text":"Hello there world","contentType":"text/html"}'
		assert_equal "$status" 1
		assert_equal "${#lines[@]}" 1
		assert_regex "$(jq -r .error.message <<<"${lines[0]}")" "unexpected Content-Type 'text/html' for a stream \\(HTTP 200\\)"
	done
}

@test "a JSON error body at HTTP 200 is the provider's error" {
	run_turns openai '{"raw":"{\"error\":{\"message\":\"model is loading\",\"type\":\"unavailable_error\",\"code\":503}}","contentType":"application/json"}'
	assert_equal "$status" 1
	assert_equal "$(jq -c .error <<<"${lines[0]}")" '{"status":"UNAVAILABLE","message":"openai: error in stream: model is loading (unavailable_error)"}'
}

@test "cancellation stops a stalled stream at once" {
	for d in $DIALECTS; do
		run_turns "$d" '{"text":"Hello there world","stall":30}' --cancel-after 1
		assert_equal "$status" 2
		assert_equal "${#lines[@]}" 2
		assert_equal "${lines[1]}" "{\"error\":{\"status\":\"CANCELLED\",\"message\":\"$( [ "$d" = gemini ] && echo googleai || echo "$d"): cancelled\"}}"
	done
}

@test "SIGTERM cancels a call waiting on the network" {
	mock_stop
	printf '%s\n' '{"text":"Hello there world","stall":30}' >"$BATS_TEST_TMPDIR/script.json"
	mock_start openai "$BATS_TEST_TMPDIR/script.json" k-0123456789
	req_simple openai/gpt-4o >req.json
	"$MODEL_CALL" <req.json >out.ndjson 2>err.txt 3>&- &
	pid=$!
	for _ in $(seq 1 200); do [ -s out.ndjson ] && break; sleep 0.025; done
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	assert_equal "$rc" 2
	assert_equal "$(tail -n 1 out.ndjson)" '{"error":{"status":"CANCELLED","message":"openai: cancelled"}}'
}

@test "connection refused is retried, then UNAVAILABLE" {
	export AGENTKIT_HTTP_RETRIES=1
	# A port nobody listens on: bind, note it, close.
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	export OPENAI_BASE_URL="http://127.0.0.1:$port/v1" OPENAI_API_KEY=k-0123456789
	req_simple openai/gpt-4o >req.json
	run -1 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -r .error.status <<<"$output")" UNAVAILABLE
	assert_regex "$(jq -r .error.message <<<"$output")" "^openai: http://127.0.0.1:$port/v1/chat/completions: .*\\(gave up after 2 attempts\\)$"
}

@test "a response past AGENTKIT_HTTP_MAX_RESPONSE fails the turn (INTERNAL, exit 1), never retried; under it all is well" {
	chunks=$(jq -c -n '[range(400) | "0123456789"]')
	args=$(jq -c -n '{"q": ([range(2000) | "x"] | join(""))}')
	for d in openai responses gemini anthropic ollama; do
		what=$(model_for "$d")
		what=${what%%/*}
		mock_stop
		printf '%s\n' "{\"chunks\":$chunks}" "{\"chunks\":$chunks}" "{\"tools\":[{\"name\":\"greet\",\"args\":$args,\"id\":\"call_1\"}]}" >"$BATS_TEST_TMPDIR/script.ndjson"
		mock_start "$d" "$BATS_TEST_TMPDIR/script.ndjson" test-key-0123456789
		export OPENAI_API_KEY=test-key-0123456789
		# 4000 bytes of text take more than 2K on every wire: cut after the
		# first deltas were streamed.
		AGENTKIT_HTTP_MAX_RESPONSE=2K run -1 --separate-stderr agent-run --no-store --model "$(model_for "$d")" -m hi
		assert_equal "$(tail -n 1 <<<"$output" | jq -c '[.output.finishReason, .output.error]')" \
			"[\"failed\",{\"status\":\"INTERNAL\",\"message\":\"generate: $what: the response passed 2048 bytes (the limit; set AGENTKIT_HTTP_MAX_RESPONSE to raise it)\"}]"
		assert_equal "$(mock_requests)" 1
		# The default bound (64M) takes it whole.
		run -0 --separate-stderr agent-run --no-store --model "$(model_for "$d")" -m hi
		assert_equal "$(tail -n 1 <<<"$output" | jq -r '.output.message.content[0].text | length')" 4000
		# Tool arguments past it, before anything was streamed: not retried either.
		AGENTKIT_HTTP_MAX_RESPONSE=1K run -1 --separate-stderr agent-run --no-store --model "$(model_for "$d")" \
			--tool "$TOP/tests/fixtures/tools/greet.json" -m hi
		assert_equal "$(tail -n 1 <<<"$output" | jq -r .output.error.message)" \
			"generate: $what: the response passed 1024 bytes (the limit; set AGENTKIT_HTTP_MAX_RESPONSE to raise it)"
		assert_equal "$(mock_requests)" 3
	done
	# A value that is no size fails the turn before a request, as the other
	# AGENTKIT_HTTP_* settings do.
	AGENTKIT_HTTP_MAX_RESPONSE=lots run -101 --separate-stderr agent-run --no-store --model openai/gpt-4o -m hi
	assert_equal "$(tail -n 1 <<<"$output" | jq -r .output.error.message)" \
		"generate: AGENTKIT_HTTP_MAX_RESPONSE: invalid size 'lots' (use e.g. 4096, 64K, 16M, 1G)"
	assert_equal "$(mock_requests)" 3
}

@test "a stream that trickles keep-alives for ever fails at the model timeout (DEADLINE_EXCEEDED, exit 1), never retried" {
	# Never idle for 20 s, never done, far under the 64M cap: only the
	# total deadline ends it.
	export AGENTKIT_MODEL_TIMEOUT=1s
	# Bounded here so that code without the deadline fails instead of
	# hanging.
	printf '#!/bin/sh\nexec timeout 20 "%s" "$@"\n' "$MODEL_CALL" >"$BATS_TEST_TMPDIR/model-call"
	chmod +x "$BATS_TEST_TMPDIR/model-call"
	MODEL_CALL=$BATS_TEST_TMPDIR/model-call
	for d in $DIALECTS; do
		what=$(model_for "$d")
		what=${what%%/*}
		run_turns "$d" '[{"text":"Hello there world","trickle":100},{"text":"Hello there world"}]'
		assert_equal "$status" 1
		assert_equal "${lines[0]}" '{"role":"model","index":0,"content":[{"text":"Hello "}]}'
		assert_equal "$(jq -r .error.status <<<"${lines[-1]}")" DEADLINE_EXCEEDED
		assert_regex "$(jq -r .error.message <<<"${lines[-1]}")" \
			"^$what: no complete reply from http://127.0.0.1:[0-9]+/.* within 1000 ms \\(the model timeout; set AGENTKIT_MODEL_TIMEOUT or --model-timeout to raise it\\)\$"
		assert_equal "$(mock_requests)" 1
	done
	# Through agent-run, with the flag.
	mock_stop
	printf '%s\n' '{"text":"Hello there world","trickle":100}' >"$BATS_TEST_TMPDIR/script.json"
	mock_start openai "$BATS_TEST_TMPDIR/script.json" test-key-0123456789
	unset AGENTKIT_MODEL_TIMEOUT
	run -1 --separate-stderr timeout 20 agent-run --no-store --model openai/gpt-4o --model-timeout 1s -m hi
	assert_equal "$(tail -n 1 <<<"$output" | jq -c '[.output.finishReason, .output.error.status]')" \
		'["failed","DEADLINE_EXCEEDED"]'
}

@test "retries stay inside the model timeout: a wait that would pass it is not started" {
	export AGENTKIT_MODEL_TIMEOUT=1s AGENTKIT_HTTP_BACKOFF=5s
	run_turns openai '[{"status":503},{"text":"Hello there world"}]'
	assert_equal "$status" 1
	assert_equal "$(jq -r .error.status <<<"${lines[0]}")" UNAVAILABLE
	assert_regex "$(jq -r .error.message <<<"${lines[0]}")" \
		'\(gave up after 1 attempts: waiting [0-9]+ ms more would pass the deadline of 1000 ms\)$'
	assert_equal "$(mock_requests)" 1
	# A Retry-After the deadline leaves room for is still honoured.
	export AGENTKIT_MODEL_TIMEOUT=10s
	run_turns openai '[{"status":429,"headers":{"retry-after-ms":"20"}},{"text":"Hello there world"}]'
	assert_hello
	# A value that is no duration fails before a request, as the other
	# settings do.
	AGENTKIT_MODEL_TIMEOUT=soon run -100 --separate-stderr "$MODEL_CALL" <"$BATS_TEST_TMPDIR/req.json"
	assert_equal "$output" '{"error":{"status":"INVALID_ARGUMENT","message":"AGENTKIT_MODEL_TIMEOUT: invalid duration '"'soon'"' (use e.g. 250ms, 30s, 5m, 1h)"}}'
	assert_equal "$(mock_requests)" 2
}

@test "an error body with a byte that is not UTF-8 keeps the provider's message and class" {
	export AGENTKIT_HTTP_RETRIES=0
	# "\u00ff" in bodyBytes is the byte 0xFF on the wire.
	run_turns openai '{"status":400,"bodyBytes":"{\"error\":{\"message\":\"bad \u00ff thing\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}"}'
	assert_equal "$status" 1
	assert_equal "$output" '{"error":{"status":"INVALID_ARGUMENT","message":"openai: HTTP 400 Bad Request: bad � thing (request id req_mock01)"}}'
	run_turns anthropic '{"status":401,"bodyBytes":"{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"key \u00ff invalid\"}}"}'
	assert_equal "$status" 1
	assert_equal "$output" '{"error":{"status":"UNAUTHENTICATED","message":"anthropic: HTTP 401 Unauthorized: key � invalid (request id req_mock01)"}}'
	# Gemini's class comes from the document's details.
	run_turns gemini '{"status":400,"bodyBytes":"{\"error\":{\"code\":400,\"message\":\"API key \u00ff not valid.\",\"status\":\"INVALID_ARGUMENT\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":\"API_KEY_INVALID\"}]}}"}'
	assert_equal "$(jq -c .error <<<"$output")" '{"status":"UNAUTHENTICATED","message":"googleai: HTTP 400 Bad Request: API key � not valid."}'
	# A body that is not JSON at all still shows its start, made valid.
	run_turns ollama '{"status":500,"bodyBytes":"<html>\u00fe\u00ff oops</html>"}'
	assert_equal "$(jq -c .error <<<"$output")" '{"status":"INTERNAL","message":"ollama: HTTP 500 Internal Server Error: <html>�� oops</html>"}'
}
