#!/usr/bin/env bats
# provider-anthropic.bats - anthropic/MODEL (Messages API) request and reply shapes.

load test_helper
load provider_helper

setup() { provider_setup; }
teardown() { mock_stop; }

start() {
	printf '%s\n' "$1" >script.json
	mock_start anthropic script.json sk-ant-api03-abcdefgh
}

@test "anthropic: request shape: top-level system, max_tokens, headers" {
	start '{"text":"Hello there world"}'
	req_simple anthropic/claude-sonnet-4-5 >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -c '{path,auth,k:.headers["x-api-key"],v:.headers["anthropic-version"]}' "$MOCK_LOG")" \
		'{"path":"/v1/messages","auth":"ok","k":"<present>","v":"2023-06-01"}'
	assert_equal "$(jq -c .body "$MOCK_LOG")" '{"model":"claude-sonnet-4-5","max_tokens":256,"system":"Be terse.","messages":[{"role":"user","content":[{"type":"text","text":"Weather in Paris and Tokyo?"}]}],"tools":[{"name":"get_weather","description":"Current weather for a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"stream":true,"temperature":0.2}'
	assert_equal "$(jq -c .response.usage <<<"${lines[-1]}")" '{"inputTokens":10,"outputTokens":3}'
}

@test "anthropic: parallel tool_use blocks from input_json_delta fragments, split reads" {
	start '{"text":"Checking both.","tools":[{"name":"get_weather","args":{"city":"Paris"},"id":"toolu_01A"},{"name":"get_weather","args":{"city":"Tokyo"},"id":"toolu_01B"}],"split":"random","comments":true}'
	req_simple anthropic/claude-sonnet-4-5 >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -c .response.message <<<"${lines[-1]}")" '{"role":"model","content":[{"text":"Checking both."},{"toolRequest":{"name":"get_weather","ref":"toolu_01A","input":{"city":"Paris"}}},{"toolRequest":{"name":"get_weather","ref":"toolu_01B","input":{"city":"Tokyo"}}}]}'
	assert_equal "$(jq -r .response.finishReason <<<"${lines[-1]}")" stop
}

@test "anthropic: round trip: tool_result blocks first, in tool_use order" {
	start '{"text":"Done."}'
	req_roundtrip anthropic/claude-sonnet-4-5 | jq -c '.messages += [{"role":"user","content":[{"text":"And Rome?"}]}]' >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -c .body.messages "$MOCK_LOG")" '[{"role":"user","content":[{"type":"text","text":"Weather in Paris and Tokyo?"}]},{"role":"assistant","content":[{"type":"text","text":"Checking both."},{"type":"tool_use","id":"call_a1","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"call_b2","name":"get_weather","input":{"city":"Tokyo"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_a1","content":"{\"tempC\":18,\"sky\":\"rain\"}"},{"type":"tool_result","tool_use_id":"call_b2","content":"{\"tempC\":24,\"sky\":\"clear\"}"},{"type":"text","text":"And Rome?"}]}]'
}

@test "anthropic: thinking with its signature, and back unchanged" {
	start '[{"text":"Hi","reasoning":"Let me think"},{"text":"ok"}]'
	req_simple anthropic/claude-sonnet-4-5 >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	msg=$(jq -c .response.message <<<"${lines[-1]}")
	assert_equal "$msg" '{"role":"model","content":[{"reasoning":"Let me think","metadata":{"signature":"sig_mock"}},{"text":"Hi"}]}'
	jq -c --argjson m "$msg" '.messages += [$m, {"role":"user","content":[{"text":"more"}]}]' req.json >req2.json
	run -0 --separate-stderr "$MODEL_CALL" <req2.json
	assert_equal "$(tail -n 1 "$MOCK_LOG" | jq -c '.body.messages[1].content[0]')" '{"type":"thinking","thinking":"Let me think","signature":"sig_mock"}'
}

@test "anthropic: max_tokens stop is length; config keys mapped" {
	start '{"text":"Hi","finish":"max_tokens"}'
	req_simple anthropic/claude-sonnet-4-5 | jq -c '.config += {"topK":40,"stopSequences":["X"],"metadata":{"user_id":"u1"}}' >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -r .response.finishReason <<<"${lines[-1]}")" length
	assert_equal "$(jq -c '.body|{top_k,stop_sequences,metadata}' "$MOCK_LOG")" '{"top_k":40,"stop_sequences":["X"],"metadata":{"user_id":"u1"}}'
}

@test "anthropic: a wrong key is UNAUTHENTICATED" {
	start '{"text":"unused"}'
	export ANTHROPIC_API_KEY=sk-ant-wrong-0000
	req_simple anthropic/claude-sonnet-4-5 >req.json
	run -1 --separate-stderr "$MODEL_CALL" <req.json
	assert_output '{"error":{"status":"UNAUTHENTICATED","message":"anthropic: HTTP 401 Unauthorized: invalid x-api-key"}}'
}

@test "anthropic: no key fails before any request" {
	start '{"text":"unused"}'
	unset ANTHROPIC_API_KEY
	req_simple anthropic/claude-sonnet-4-5 >req.json
	run -1 --separate-stderr "$MODEL_CALL" <req.json
	assert_output '{"error":{"status":"UNAUTHENTICATED","message":"anthropic: no API key: set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN, or name a file holding it with --key-file FILE or AGENTKIT_KEY_FILE"}}'
	assert_equal "$(mock_requests)" 0
}
