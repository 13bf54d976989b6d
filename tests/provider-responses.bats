#!/usr/bin/env bats
# provider-responses.bats - openai-responses/MODEL: OpenAI's Responses API
# through agent-run against scripts/mock-model --dialect responses: the
# typed stream, function calls, reasoning summaries and encrypted
# reasoning replayed across a tool loop, finish reasons, errors,
# structured output, and the dialect on a named endpoint.

load test_helper
load provider_helper

setup() { provider_setup; }
teardown() { mock_stop; }

turns() {
	mock_stop
	printf '%s\n' "$@" >"$BATS_TEST_TMPDIR/turns.ndjson"
	mock_start responses "$BATS_TEST_TMPDIR/turns.ndjson" sk-test-1234
}

agent() {
	run --separate-stderr agent-run --no-store --model openai-responses/gpt-5 "$@"
}

@test "responses: a text stream, the request it answers, usage" {
	turns '{"text":"Hello there world","usage":{"input":7,"output":3}}'
	agent --system 'Be terse.' -m hi
	assert_equal "$status" 0
	assert_equal "$(jq -c 'select(.modelChunk) | .modelChunk.content' <<<"$output" | paste -sd ' ')" \
		'[{"text":"Hello "}] [{"text":"there "}] [{"text":"world"}]'
	assert_equal "$(last | jq -c '[.output.finishReason, .output.message]')" \
		'["stop",{"content":[{"text":"Hello there world"}],"role":"model"}]'
	assert_equal "$(jq -c '[.method, .path, .auth]' "$MOCK_LOG")" '["POST","/v1/responses","ok"]'
	assert_equal "$(jq -c .body "$MOCK_LOG")" \
		'{"model":"gpt-5","input":[{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}],"stream":true,"store":false,"include":["reasoning.encrypted_content"]}'
	req_simple openai-responses/gpt-5 >req.json
	turns '{"text":"ok","usage":{"input":7,"output":3}}'
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -c .response.usage <<<"${lines[-1]}")" '{"inputTokens":7,"outputTokens":3,"totalTokens":10}'
	assert_equal "$(jq -c '.body | [.tools, .temperature, .max_output_tokens]' "$MOCK_LOG")" \
		'[[{"name":"get_weather","description":"Current weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"type":"function","strict":false}],0.2,256]'
}

@test "responses: reasoning summaries stream; encrypted reasoning and the call are replayed in the tool loop" {
	turns '{"reasoning":"Greet Ann first.","encrypted":"enc_opaque_1","tools":[{"name":"greet","args":{"name":"Ann"},"id":"call_a1"}]}' \
		'{"text":"Done."}'
	agent --tool "$TOP/tests/fixtures/tools/greet.json" -m 'greet ann'
	assert_equal "$status" 0
	assert_equal "$(jq -c 'select(.modelChunk.role == "model") | .modelChunk.content[0] | keys[0]' <<<"$output" | paste -sd ' ')" \
		'"reasoning" "reasoning" "toolRequest" "text"'
	assert_equal "$(last | jq -c '.output.state.messages[1].content')" \
		'[{"reasoning":"Greet Ann first.","metadata":{"itemId":"rs_mock0","encryptedContent":"enc_opaque_1"}},{"toolRequest":{"name":"greet","input":{"name":"Ann"},"ref":"call_a1"}}]'
	assert_equal "$(jq -s -c '.[1].body.input[1:]' "$MOCK_LOG")" \
		'[{"type":"reasoning","id":"rs_mock0","summary":[{"type":"summary_text","text":"Greet Ann first."}],"encrypted_content":"enc_opaque_1"},{"type":"function_call","call_id":"call_a1","name":"greet","arguments":"{\"name\":\"Ann\"}"},{"type":"function_call_output","call_id":"call_a1","output":"hello Ann"}]'
	assert_equal "$(last | jq -r .output.message.content[0].text)" Done.
}

@test "responses: encrypted reasoning without a summary is kept and replayed, not streamed" {
	turns '{"encrypted":"enc_only","tools":[{"name":"greet","args":{"name":"Bo"},"id":"call_b"}]}' '{"text":"ok"}'
	agent --tool "$TOP/tests/fixtures/tools/greet.json" -m hi
	assert_equal "$status" 0
	assert_equal "$(jq -c 'select(.modelChunk.role == "model") | .modelChunk.content[0] | keys[0]' <<<"$output" | paste -sd ' ')" '"toolRequest" "text"'
	assert_equal "$(jq -s -c '.[1].body.input[1]' "$MOCK_LOG")" '{"type":"reasoning","id":"rs_mock0","summary":[],"encrypted_content":"enc_only"}'
}

@test "responses: incomplete, failed, a stream error and an HTTP 400 end the turn as they should" {
	turns '{"text":"Hello there","finish":"max_output_tokens"}'
	agent -m hi
	assert_equal "$status" 7
	assert_equal "$(last | jq -r .output.finishReason)" length
	turns '{"text":"Hello","finish":"content_filter"}'
	agent -m hi
	assert_equal "$status" 7
	assert_equal "$(last | jq -r .output.finishReason)" blocked
	turns '{"text":"Hello","finish":"failed","message":"The model melted."}'
	agent -m hi
	assert_equal "$status" 1
	assert_equal "$(last | jq -c .output.error)" '{"status":"INTERNAL","message":"generate: openai-responses: the response failed: The model melted. (server_error)"}'
	turns '{"text":"Hello there","midError":true}'
	agent -m hi
	assert_equal "$status" 1
	assert_equal "$(last | jq -r .output.error.message)" 'generate: openai-responses: error in stream: The server had an error while processing your request. (server_error)'
	turns '{"status":400,"message":"Unsupported parameter: temperature"}'
	agent -m hi
	assert_equal "$status" 1
	assert_equal "$(last | jq -c .output.error)" '{"status":"INVALID_ARGUMENT","message":"generate: openai-responses: HTTP 400 Bad Request: Unsupported parameter: temperature (request id req_mock01)"}'
	turns '{"text":"Hello there world","truncate":true}' '{"text":"again"}'
	agent -m hi
	assert_equal "$status" 1
	assert_regex "$(last | jq -r .output.error.message)" 'the stream ended before response\.completed \(truncated after [0-9]+ bytes\)$'
}

@test "responses: structured output goes as text.format and the reply is checked" {
	turns '{"text":"{\"city\":\"Paris\"}"}'
	echo '{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}' >schema.json
	agent --output-schema schema.json -m where
	assert_equal "$status" 0
	assert_equal "$(jq -c .body.text "$MOCK_LOG")" \
		'{"format":{"type":"json_schema","name":"output","schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}}'
	assert_equal "$(last | jq -c .output.output)" '{"city":"Paris"}'
}

@test "responses: the dialect of a named endpoint; its key from the endpoint's variable" {
	turns '{"text":"from the gateway"}'
	mkdir -p "$XDG_CONFIG_HOME/agentkit"
	echo "{\"endpoints\": {\"gw\": {\"dialect\": \"openai-responses\", \"baseUrl\": \"http://127.0.0.1:$MOCK_PORT/v1\", \"keyVariable\": \"GW_KEY\"}}}" \
		>"$XDG_CONFIG_HOME/agentkit/models.json"
	unset OPENAI_API_KEY
	GW_KEY=sk-test-1234 run -0 --separate-stderr agent-run --no-store --model gw/gpt-5-mini -m hi
	assert_equal "$(last | jq -r .output.message.content[0].text)" "from the gateway"
	assert_equal "$(jq -c '[.path, .auth, .body.model]' "$MOCK_LOG")" '["/v1/responses","ok","gpt-5-mini"]'
}
