#!/usr/bin/env bats
# provider-gemini.bats - googleai/MODEL (Gemini API) request and reply shapes.

load test_helper
load provider_helper

setup() { provider_setup; }
teardown() { mock_stop; }

start() {
	printf '%s\n' "$1" >script.json
	mock_start gemini script.json AIzaSyMockKey0123456789
}

@test "googleai: request shape: systemInstruction, functionDeclarations, generationConfig" {
	start '{"text":"Hello there world"}'
	req_simple googleai/gemini-2.5-flash >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -c '{path,query,auth,k:.headers["x-goog-api-key"]}' "$MOCK_LOG")" \
		'{"path":"/v1beta/models/gemini-2.5-flash:streamGenerateContent","query":{"alt":"sse"},"auth":"ok","k":"<present>"}'
	assert_equal "$(jq -c .body "$MOCK_LOG")" '{"contents":[{"role":"user","parts":[{"text":"Weather in Paris and Tokyo?"}]}],"systemInstruction":{"parts":[{"text":"Be terse."}]},"tools":[{"functionDeclarations":[{"name":"get_weather","description":"Current weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}],"generationConfig":{"temperature":0.2,"maxOutputTokens":256}}'
	assert_equal "$(jq -c .response.usage <<<"${lines[-1]}")" '{"inputTokens":10,"outputTokens":3,"totalTokens":13}'
}

@test "googleai: parallel functionCalls without ids, signatures kept" {
	start '{"tools":[{"name":"get_weather","args":{"city":"Paris"},"signature":"c2lnMQ=="},{"name":"get_weather","args":{"city":"Tokyo"}}]}'
	req_simple googleai/gemini-2.5-flash >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -c .response.message <<<"${lines[-1]}")" '{"role":"model","content":[{"toolRequest":{"name":"get_weather","input":{"city":"Paris"}},"metadata":{"signature":"c2lnMQ=="}},{"toolRequest":{"name":"get_weather","input":{"city":"Tokyo"}}}]}'
	assert_equal "$(jq -r .response.finishReason <<<"${lines[-1]}")" stop
}

@test "googleai: round trip: functionResponses in call order, no ids, scalars wrapped" {
	start '{"text":"Done."}'
	req_roundtrip googleai/gemini-2.5-flash | jq -c '.messages[3].content[0].toolResponse.output = "sunny"' >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -c .body.contents "$MOCK_LOG")" '[{"role":"user","parts":[{"text":"Weather in Paris and Tokyo?"}]},{"role":"model","parts":[{"text":"Checking both."},{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}},{"functionCall":{"name":"get_weather","args":{"city":"Tokyo"}}}]},{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"tempC":18,"sky":"rain"}}},{"functionResponse":{"name":"get_weather","response":{"name":"get_weather","content":"sunny"}}}]}]'
}

@test "googleai: call ids Gemini gave are echoed back" {
	start '[{"tools":[{"name":"get_weather","args":{"city":"Paris"},"id":"fc-1"}]},{"text":"ok"}]'
	req_simple googleai/gemini-2.5-flash >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	msg=$(jq -c .response.message <<<"${lines[-1]}")
	assert_equal "$msg" '{"role":"model","content":[{"toolRequest":{"name":"get_weather","input":{"city":"Paris"},"ref":"fc-1"},"metadata":{"callId":"fc-1"}}]}'
	jq -c --argjson m "$msg" '.messages += [$m, {"role":"tool","content":[{"toolResponse":{"name":"get_weather","ref":"fc-1","output":{"t":1}}}]}]' req.json >req2.json
	run -0 --separate-stderr "$MODEL_CALL" <req2.json
	assert_equal "$(tail -n 1 "$MOCK_LOG" | jq -c '.body.contents[1:]')" '[{"role":"model","parts":[{"functionCall":{"name":"get_weather","id":"fc-1","args":{"city":"Paris"}}}]},{"role":"user","parts":[{"functionResponse":{"name":"get_weather","id":"fc-1","response":{"t":1}}}]}]'
}

@test "googleai: finish reasons and a blocked prompt" {
	start '[{"text":"Hi","finish":"MAX_TOKENS"},{"text":"Hi","finish":"SAFETY"},{"blocked":true}]'
	req_simple googleai/gemini-2.5-flash >req.json
	for want in length blocked blocked; do
		run -0 --separate-stderr "$MODEL_CALL" <req.json
		assert_equal "$(jq -r .response.finishReason <<<"${lines[-1]}")" "$want"
	done
}

@test "googleai: RetryInfo retryDelay in the body is honoured" {
	start '[{"status":429,"retryDelay":"0.05s"},{"text":"Hello there world"}]'
	req_simple googleai/gemini-2.5-flash >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(mock_requests)" 2
}

@test "googleai: a bad key (400 API_KEY_INVALID) is UNAUTHENTICATED" {
	start '{"text":"unused"}'
	export GEMINI_API_KEY=AIzaWrongWrong
	req_simple googleai/gemini-2.5-flash >req.json
	run -1 --separate-stderr "$MODEL_CALL" <req.json
	assert_output '{"error":{"status":"UNAUTHENTICATED","message":"googleai: HTTP 400 Bad Request: API key not valid. Please pass a valid API key."}}'
}

@test "googleai: GOOGLE_API_KEY and GOOGLE_GEMINI_BASE_URL work too" {
	start '{"text":"Hello there world"}'
	export GOOGLE_API_KEY=$GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL=$GEMINI_BASE_URL
	unset GEMINI_API_KEY GEMINI_BASE_URL
	req_simple googleai/gemini-2.5-flash >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -r .auth "$MOCK_LOG")" ok
}

@test "googleai: no key names both variables" {
	start '{"text":"unused"}'
	unset GEMINI_API_KEY
	req_simple googleai/gemini-2.5-flash >req.json
	run -1 --separate-stderr "$MODEL_CALL" <req.json
	assert_output '{"error":{"status":"UNAUTHENTICATED","message":"googleai: no API key: set GOOGLE_API_KEY or GEMINI_API_KEY, or name a file holding it with --key-file FILE or AGENTKIT_KEY_FILE"}}'
}
