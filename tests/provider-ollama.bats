#!/usr/bin/env bats
# provider-ollama.bats - ollama/MODEL (native /api/chat NDJSON) shapes.

load test_helper
load provider_helper

setup() { provider_setup; }
teardown() { mock_stop; }

start() {
	printf '%s\n' "$1" >script.json
	mock_start ollama script.json
}

@test "ollama: request shape: system message, tools, options" {
	start '{"text":"Hello there world"}'
	req_simple ollama/llama3.2 | jq -c '.config += {"topK":40,"num_ctx":8192,"think":true}' >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -c '{path,auth}' "$MOCK_LOG")" '{"path":"/api/chat","auth":"none"}'
	assert_equal "$(jq -c .body "$MOCK_LOG")" '{"model":"llama3.2","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"Weather in Paris and Tokyo?"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],"stream":true,"think":true,"options":{"temperature":0.2,"num_predict":256,"top_k":40,"num_ctx":8192}}'
	assert_equal "$(jq -c .response.usage <<<"${lines[-1]}")" '{"inputTokens":10,"outputTokens":3}'
}

@test "ollama: parallel tool calls with ids, thinking" {
	start '{"reasoning":"hmm","tools":[{"name":"get_weather","args":{"city":"Paris"},"id":"call_k3x9q2ab"},{"name":"get_weather","args":{"city":"Tokyo"}}]}'
	req_simple ollama/llama3.2 >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -c .response.message <<<"${lines[-1]}")" '{"role":"model","content":[{"reasoning":"hmm"},{"toolRequest":{"name":"get_weather","input":{"city":"Paris"},"ref":"call_k3x9q2ab"}},{"toolRequest":{"name":"get_weather","input":{"city":"Tokyo"}}}]}'
}

@test "ollama: round trip: one tool message per result, tool_name, call order" {
	start '{"text":"Done."}'
	req_roundtrip ollama/llama3.2 >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -c '.body.messages[2:]' "$MOCK_LOG")" '[{"role":"assistant","content":"Checking both.","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}},{"function":{"name":"get_weather","arguments":{"city":"Tokyo"}}}]},{"role":"tool","content":"{\"tempC\":18,\"sky\":\"rain\"}","tool_name":"get_weather","tool_call_id":"call_a1"},{"role":"tool","content":"{\"tempC\":24,\"sky\":\"clear\"}","tool_name":"get_weather","tool_call_id":"call_b2"}]'
}

@test "ollama: done_reason length" {
	start '{"text":"Hi","finish":"length"}'
	req_simple ollama/llama3.2 >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -r .response.finishReason <<<"${lines[-1]}")" length
}

@test "ollama: a 404 keeps Ollama's message" {
	start '{"status":404,"message":"model \"nope\" not found, try pulling it first"}'
	req_simple ollama/nope >req.json
	run -4 --separate-stderr "$MODEL_CALL" <req.json
	assert_output '{"error":{"status":"NOT_FOUND","message":"ollama: HTTP 404 Not Found: model \"nope\" not found, try pulling it first"}}'
}

@test "ollama: OLLAMA_HOST as a URL" {
	start '{"text":"Hello there world"}'
	export OLLAMA_HOST="http://127.0.0.1:$MOCK_PORT/"
	req_simple ollama/llama3.2 >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
}
