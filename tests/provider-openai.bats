#!/usr/bin/env bats
# provider-openai.bats - openai/MODEL (Chat Completions) request and reply shapes.

load test_helper
load provider_helper

setup() { provider_setup; }
teardown() { mock_stop; }

start() {
	printf '%s\n' "$1" >script.json
	mock_start openai script.json sk-proj-abcdefgh12345678
}

@test "openai: request shape: system message, stream options, tools, config, auth header" {
	start '{"text":"Hello there world"}'
	req_simple openai/gpt-4o >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -c '{path,auth,a:.headers.authorization,ct:.headers["content-type"]}' "$MOCK_LOG")" \
		'{"path":"/v1/chat/completions","auth":"ok","a":"<present>","ct":"application/json"}'
	assert_equal "$(jq -c .body "$MOCK_LOG")" '{"model":"gpt-4o","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"Weather in Paris and Tokyo?"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],"stream":true,"stream_options":{"include_usage":true},"temperature":0.2,"max_tokens":256}'
	assert_equal "$(jq -c .response.usage <<<"${lines[-1]}")" '{"inputTokens":10,"outputTokens":3,"totalTokens":13}'
}

@test "openai: parallel tool calls assembled from interleaved fragments" {
	start '{"tools":[{"name":"get_weather","args":{"city":"Paris"},"id":"call_a1"},{"name":"get_weather","args":{"city":"Tokyo"},"id":"call_b2"}],"interleave":true,"split":"random"}'
	req_simple openai/gpt-4o >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "${#lines[@]}" 3
	assert_equal "${lines[0]}" '{"role":"model","index":0,"content":[{"toolRequest":{"name":"get_weather","input":{"city":"Paris"},"ref":"call_a1"}}]}'
	assert_equal "${lines[1]}" '{"role":"model","index":0,"content":[{"toolRequest":{"name":"get_weather","input":{"city":"Tokyo"},"ref":"call_b2"}}]}'
	assert_equal "$(jq -c .response.finishReason <<<"${lines[2]}")" '"stop"'
}

@test "openai: a single tool call with no arguments" {
	start '{"tools":[{"name":"now","rawArgs":"","id":"call_x"}]}'
	req_simple openai/gpt-4o >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "${lines[0]}" '{"role":"model","index":0,"content":[{"toolRequest":{"name":"now","input":{},"ref":"call_x"}}]}'
}

@test "openai: round trip: tool_calls with ids, one tool message per result in call order" {
	start '{"text":"Paris 18C rain, Tokyo 24C clear."}'
	req_roundtrip openai/gpt-4o >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -c .body.messages "$MOCK_LOG")" '[{"role":"system","content":"Be terse."},{"role":"user","content":"Weather in Paris and Tokyo?"},{"role":"assistant","content":"Checking both.","tool_calls":[{"id":"call_a1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_b2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Tokyo\"}"}}]},{"role":"tool","tool_call_id":"call_a1","content":"{\"tempC\":18,\"sky\":\"rain\"}"},{"role":"tool","tool_call_id":"call_b2","content":"{\"tempC\":24,\"sky\":\"clear\"}"}]'
}

@test "openai: reasoning deltas, finish length, unknown config passed through" {
	start '{"text":"Hi","reasoning":"Think hard","finish":"length"}'
	req_simple openai/gpt-4o | jq -c '.config += {"topP":0.9,"stopSequences":["END"],"reasoning_effort":"low"}' >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -c .response.message <<<"${lines[-1]}")" '{"role":"model","content":[{"reasoning":"Think hard"},{"text":"Hi"}]}'
	assert_equal "$(jq -r .response.finishReason <<<"${lines[-1]}")" length
	assert_equal "$(jq -c '.body|{top_p,stop,reasoning_effort}' "$MOCK_LOG")" '{"top_p":0.9,"stop":["END"],"reasoning_effort":"low"}'
}

@test "openai: a wrong key is UNAUTHENTICATED and the key never shows" {
	start '{"text":"unused"}'
	export OPENAI_API_KEY=sk-proj-wrongwrong9999
	req_simple openai/gpt-4o >req.json
	run -1 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -r .error.status <<<"$output")" UNAUTHENTICATED
	assert_regex "$(jq -r .error.message <<<"$output")" '^openai: HTTP 401 Unauthorized: Incorrect API key provided: \[redacted\]'
	refute_output --partial wrongwrong
	refute_output --partial sk-p
	assert_equal "$(jq -r .auth "$MOCK_LOG")" wrong
}

@test "openai: no key at all fails before any request" {
	start '{"text":"unused"}'
	unset OPENAI_API_KEY
	req_simple openai/gpt-4o >req.json
	run -1 --separate-stderr "$MODEL_CALL" <req.json
	assert_output '{"error":{"status":"UNAUTHENTICATED","message":"openai: no API key: set OPENAI_API_KEY, or name a file holding it with --key-file FILE or AGENTKIT_KEY_FILE"}}'
	assert_equal "$(mock_requests)" 0
}

@test "openai: the key file wins over the variable" {
	start '{"text":"Hello there world"}'
	printf 'sk-proj-abcdefgh12345678\n' >key.txt
	export OPENAI_API_KEY=sk-other
	req_simple openai/gpt-4o >req.json
	run -0 --separate-stderr "$MODEL_CALL" --key-file key.txt <req.json
	assert_equal "$(jq -r .auth "$MOCK_LOG")" ok
}

@test "openai: Retry-After in seconds is honoured" {
	start '[{"status":429,"headers":{"Retry-After":"1"}},{"text":"Hello there world"}]'
	req_simple openai/gpt-4o >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(mock_requests)" 2
}

@test "openai: an insufficient_quota 429 is final" {
	start '[{"status":429,"code":"insufficient_quota","message":"You exceeded your current quota."},{"text":"x"}]'
	req_simple openai/gpt-4o >req.json
	run -1 --separate-stderr "$MODEL_CALL" <req.json
	assert_output '{"error":{"status":"RESOURCE_EXHAUSTED","message":"openai: HTTP 429 Too Many Requests: You exceeded your current quota. (request id req_mock01)"}}'
	assert_equal "$(mock_requests)" 1
}

@test "openai: the mock rejects a tool message order the service rejects" {
	start '{"text":"x"}'
	req_roundtrip openai/gpt-4o | jq -c '.messages |= map(select(.role != "tool"))' >req.json
	# The service's 400: a model failure (exit 1), INVALID_ARGUMENT kept.
	run -1 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -r .error.status <<<"$output")" INVALID_ARGUMENT
	assert_regex "$(jq -r .error.message <<<"$output")" "must be followed by tool messages"
}

@test "openai: unknown model name parts go through as the model id" {
	start '{"text":"Hello there world"}'
	req_simple openai/org/model:7b >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -r .body.model "$MOCK_LOG")" org/model:7b
}
