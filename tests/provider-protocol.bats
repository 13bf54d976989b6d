#!/usr/bin/env bats
# provider-protocol.bats - the protocol edges through agent-run against
# scripts/mock-model: retries decided by what reached the caller, streams
# without [DONE] or tool-call indexes, long Retry-After, Gemini's reasons
# and key order, media each dialect can or cannot take, tool media,
# Anthropic's redacted thinking, thinking budget, cache settings, and
# request ids in errors.

load test_helper
load provider_helper

setup() { provider_setup; }
teardown() { mock_stop; }

# turns DIALECT TURN...: the mock with these turns (one per argument).
turns() {
	local d=$1
	shift
	mock_stop
	printf '%s\n' "$@" >"$BATS_TEST_TMPDIR/turns.ndjson"
	mock_start "$d" "$BATS_TEST_TMPDIR/turns.ndjson" sk-test-1234
}

# agent DIALECT [agent-run args...]: one client-managed run.
agent() {
	local d=$1
	shift
	run --separate-stderr agent-run --no-store --model "$(model_for "$d")" "$@"
}

@test "R1: an overloaded error as the first event is retried (nothing was emitted)" {
	turns anthropic '{"errorFirst":true}' '{"text":"Hello there world"}'
	agent anthropic -m hi
	assert_equal "$status" 0
	assert_equal "$(last | jq -r .output.message.content[0].text)" "Hello there world"
	assert_equal "$(mock_requests)" 2
}

@test "R1: a stream cut before any emitted part is retried, every dialect" {
	for d in openai gemini anthropic ollama; do
		# OpenAI's and Anthropic's first events carry no part.
		n=0; case $d in openai) n=1 ;; anthropic) n=2 ;; esac
		turns "$d" "{\"text\":\"Hello there world\",\"cutEvents\":$n}" '{"text":"Hello there world"}'
		agent "$d" -m hi
		assert_equal "$status" 0
		assert_equal "$(last | jq -r .output.message.content[0].text)" "Hello there world"
		assert_equal "$(jq -c 'select(.modelChunk) | .modelChunk.content[0].text' <<<"$output" | paste -sd ' ')" '"Hello " "there " "world"'
		assert_equal "$(mock_requests)" 2
	done
}

@test "S1: an OpenAI-compatible stream ending after finish_reason and usage without [DONE] is whole" {
	turns openai '{"text":"Hello there world","noDone":true,"usage":{"input":7,"output":3}}'
	agent openai -m hi
	assert_equal "$status" 0
	assert_equal "$(last | jq -r .output.message.content[0].text)" "Hello there world"
	assert_equal "$(mock_requests)" 1
	# A stream cut before its finish_reason is still truncated.
	turns openai '{"text":"Hello there world","truncate":true}' '{"text":"again"}'
	agent openai -m hi
	assert_equal "$status" 1
	assert_regex "$(last | jq -r .output.error.message)" 'the stream ended before data: \[DONE\] \(truncated after [0-9]+ bytes\)$'
	assert_equal "$(mock_requests)" 1
}

@test "S2: tool-call deltas without index assemble one call at a time" {
	turns openai '{"tools":[{"name":"greet","args":{"name":"Ann"},"id":"call_1"},{"name":"greet","args":{"name":"Bob"},"id":"call_2"}],"noIndex":true}' \
		'{"text":"done"}'
	agent openai --tool "$TOP/tests/fixtures/tools/greet.json" -m hi
	assert_equal "$status" 0
	assert_equal "$(jq -s -c '.[1].body.messages[1].tool_calls | map({id, a: .function.arguments})' "$MOCK_LOG")" \
		'[{"id":"call_1","a":"{\"name\":\"Ann\"}"},{"id":"call_2","a":"{\"name\":\"Bob\"}"}]'
	assert_equal "$(jq -s -c '[.[1].body.messages[2,3] | .content]' "$MOCK_LOG")" '["hello Ann","hello Bob"]'
}

@test "B7: a Retry-After above 60 s is ignored: the call backs off and retries" {
	for d in openai anthropic; do
		turns "$d" '{"status":429,"headers":{"Retry-After":"3600"}}' '{"text":"Hello there world"}'
		agent "$d" -m hi
		assert_equal "$status" 0
		assert_equal "$(mock_requests)" 2
	done
}

@test "B7: a wait past the budget says so truthfully" {
	export AGENTKIT_HTTP_RETRY_BUDGET=1s
	turns openai '{"status":503,"headers":{"Retry-After":"30"}}' '{"text":"Hello there world"}'
	agent openai -m hi
	assert_equal "$status" 1
	assert_equal "$(last | jq -r .output.error.message)" 'generate: openai: HTTP 503 Service Unavailable: The server is overloaded or not ready yet. (request id req_mock01) (gave up after 1 attempts: waiting 30000 ms more would pass the retry budget of 1000 ms)'
}

@test "B5: a Gemini SAFETY finish carries its finishMessage and ratings into the output" {
	turns gemini '{"text":"Partial","finish":"SAFETY","finishMessage":"The response was blocked for safety.","safety":[{"category":"HARM_CATEGORY_HARASSMENT","probability":"NEGLIGIBLE"},{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH","blocked":true}]}'
	agent gemini -m hi
	assert_equal "$status" 7
	assert_equal "$(last | jq -r .output.finishReason)" blocked
	assert_equal "$(last | jq -c .output.message.metadata)" '{"finishReason":"SAFETY","finishMessage":"The response was blocked for safety.","safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH","blocked":true}]}'
}

@test "B5: a blocked Gemini prompt says why" {
	turns gemini '{"blocked":true,"blockReason":"PROHIBITED_CONTENT"}'
	agent gemini -m hi
	assert_equal "$status" 7
	assert_equal "$(last | jq -c '[.output.finishReason, .output.message.metadata]')" '["blocked",{"blockReason":"PROHIBITED_CONTENT"}]'
	turns gemini '{"text":"x","finish":"OTHER"}'
	agent gemini -m hi
	assert_equal "$status" 0
	assert_equal "$(last | jq -c '[.output.finishReason, .output.message.metadata]')" '["other",{"finishReason":"OTHER"}]'
}

@test "B6: GOOGLE_API_KEY wins over GEMINI_API_KEY, as Google's SDK has it" {
	turns gemini '{"text":"Hello there world"}'
	export GOOGLE_API_KEY=sk-test-1234 GEMINI_API_KEY=the-other-key
	agent gemini -m hi
	assert_equal "$status" 0
	assert_equal "$(jq -r .auth "$MOCK_LOG")" ok
}

PDF='{"media":{"url":"data:application/pdf;base64,JVBERi0xLjQ=","contentType":"application/pdf"}}'
WAV='{"media":{"url":"data:audio/wav;base64,UklGRg==","contentType":"audio/wav"}}'
MP4='{"media":{"url":"data:video/mp4;base64,AAAA","contentType":"video/mp4"}}'
PNG='{"media":{"url":"data:image/png;base64,iVBORw0K","contentType":"image/png"}}'

@test "B1: OpenAI gets documents as file parts and audio as input_audio" {
	turns openai '{"text":"read"}'
	agent openai <<<"{\"message\":{\"role\":\"user\",\"content\":[{\"text\":\"read these\"},$PDF,$WAV,$PNG]}}"
	assert_equal "$status" 0
	assert_equal "$(jq -c '.body.messages[0].content' "$MOCK_LOG")" '[{"type":"text","text":"read these"},{"type":"file","file":{"filename":"file.pdf","file_data":"data:application/pdf;base64,JVBERi0xLjQ="}},{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0K"}}]'
}

@test "B1: media a dialect cannot take is refused with a clear error, before any request" {
	turns openai '{"text":"never"}'
	agent openai <<<"{\"message\":{\"role\":\"user\",\"content\":[{\"text\":\"watch\"},$MP4]}}"
	assert_equal "$status" 101
	assert_equal "$(last | jq -c .output.error)" '{"status":"INVALID_ARGUMENT","message":"generate: openai: cannot send media of type '"'"'video/mp4'"'"' (images, wav/mp3 audio and documents as data: URLs are supported)"}'
	assert_equal "$(mock_requests)" 0
	turns ollama '{"text":"never"}'
	agent ollama <<<"{\"message\":{\"role\":\"user\",\"content\":[{\"text\":\"read\"},$PDF]}}"
	assert_equal "$status" 101
	assert_equal "$(last | jq -r .output.error.message)" "generate: ollama: cannot send media of type 'application/pdf' (images only)"
	assert_equal "$(mock_requests)" 0
}

# A tool that returns an image part besides its output.
shot_tool() {
	mkdir -p tools
	printf '%s\n' '{"description":"Takes a screenshot."}' >tools/shot.json
	cat >tools/shot <<SH
#!/bin/sh
cat >/dev/null
echo '{"part":$PNG}'
echo '{"output":"taken"}'
SH
	chmod +x tools/shot
}

@test "B4: media returned by a tool reach each dialect" {
	shot_tool
	for d in openai gemini anthropic ollama; do
		turns "$d" '{"tools":[{"name":"shot","args":{},"id":"call_1"}]}' '{"text":"I see it"}'
		agent "$d" --tool ./tools/shot.json -m look
		assert_equal "$status" 0
		case $d in
		openai) assert_equal "$(jq -s -c '.[1].body.messages[2:]' "$MOCK_LOG")" '[{"role":"tool","tool_call_id":"call_1","content":"taken"},{"role":"user","content":[{"type":"text","text":"Media returned by tool '"'"'shot'"'"':"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0K"}}]}]' ;;
		gemini) assert_equal "$(jq -s -c '.[1].body.contents[2].parts[0].functionResponse' "$MOCK_LOG")" '{"name":"shot","id":"call_1","response":{"name":"shot","content":"taken"},"parts":[{"inlineData":{"mimeType":"image/png","data":"iVBORw0K"}}]}' ;;
		anthropic) assert_equal "$(jq -s -c '.[1].body.messages[2].content[0]' "$MOCK_LOG")" '{"type":"tool_result","tool_use_id":"call_1","content":[{"type":"text","text":"taken"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0K"}}]}' ;;
		ollama) assert_equal "$(jq -s -c '.[1].body.messages[2]' "$MOCK_LOG")" '{"role":"tool","content":"taken","tool_name":"shot","tool_call_id":"call_1","images":["iVBORw0K"]}' ;;
		esac
	done
}

@test "B2: Anthropic redacted_thinking is kept and replayed unchanged in the tool loop" {
	turns anthropic '{"redacted":"EncRypTeD==","tools":[{"name":"greet","args":{"name":"Ann"},"id":"toolu_1"}]}' '{"text":"done"}'
	agent anthropic --tool "$TOP/tests/fixtures/tools/greet.json" -m hi
	assert_equal "$status" 0
	assert_equal "$(jq -s -c '.[1].body.messages[1].content' "$MOCK_LOG")" '[{"type":"redacted_thinking","data":"EncRypTeD=="},{"type":"tool_use","id":"toolu_1","name":"greet","input":{"name":"Ann"}}]'
	assert_equal "$(last | jq -c '.output.state.messages[1].content[0]')" '{"custom":{"redactedThinking":"EncRypTeD=="}}'
}

@test "B3: a Gemini thoughtSignature on an empty text part is replayed" {
	turns gemini '{"tools":[{"name":"greet","args":{"name":"Ann"}}],"emptySignature":"c2lnLWVtcHR5"}' '{"text":"done"}'
	agent gemini --tool "$TOP/tests/fixtures/tools/greet.json" -m hi
	assert_equal "$status" 0
	assert_equal "$(jq -s -c '.[1].body.contents[1].parts' "$MOCK_LOG")" '[{"functionCall":{"name":"greet","args":{"name":"Ann"}}},{"text":"","thoughtSignature":"c2lnLWVtcHR5"}]'
}

@test "anthropic: a thinking budget at or above the default raises max_tokens" {
	turns anthropic '{"text":"ok"}'
	agent anthropic --config '{"thinking":{"type":"enabled","budget_tokens":10000}}' -m hi
	assert_equal "$status" 0
	assert_equal "$(jq -c '[.body.max_tokens, .body.thinking]' "$MOCK_LOG")" '[14096,{"type":"enabled","budget_tokens":10000}]'
	turns anthropic '{"text":"ok"}'
	agent anthropic --config '{"thinking":{"type":"enabled","budget_tokens":2048}}' -m hi
	assert_equal "$(jq -c .body.max_tokens "$MOCK_LOG")" 4096
}

@test "anthropic: cache_control on the system prompt and tools from config; cache writes reported" {
	turns anthropic '{"text":"ok","cacheCreated":1800}'
	agent anthropic --system 'Be terse.' --tool "$TOP/tests/fixtures/tools/greet.json" \
		--config '{"cacheSystem":true,"cacheTools":{"type":"ephemeral","ttl":"1h"}}' -m hi
	assert_equal "$status" 0
	assert_equal "$(jq -c '[.body.system, .body.tools[-1].cache_control, (.body | has("cacheSystem"))]' "$MOCK_LOG")" \
		'[[{"type":"text","text":"Be terse.","cache_control":{"type":"ephemeral"}}],{"type":"ephemeral","ttl":"1h"},false]'
	assert_equal "$(last | jq -c '.output.state.messages[-1]' )" '{"content":[{"text":"ok"}],"role":"model"}'
	# Cache writes are in the call's usage (GenerationUsage.custom).
	turns anthropic '{"text":"ok","cacheCreated":1800,"usage":{"input":5,"output":1}}'
	req_simple anthropic/claude-sonnet-4-5 >req.json
	run -0 --separate-stderr "$MODEL_CALL" <req.json
	assert_equal "$(jq -c .response.usage <<<"${lines[-1]}")" '{"inputTokens":5,"outputTokens":1,"custom":{"cacheCreationInputTokens":1800}}'
}

@test "provider errors name the request id" {
	turns openai '{"status":400,"message":"bad things"}'
	agent openai -m hi
	assert_equal "$(last | jq -r .output.error.message)" 'generate: openai: HTTP 400 Bad Request: bad things (request id req_mock01)'
	turns anthropic '{"status":400,"message":"bad things"}'
	agent anthropic -m hi
	assert_equal "$(last | jq -r .output.error.message)" 'generate: anthropic: HTTP 400 Bad Request: bad things (request id req_mock01)'
}

@test "a provider's HTTP 400 is a model failure: exit 1, Genkit's INVALID_ARGUMENT kept" {
	for d in openai gemini anthropic ollama; do
		turns "$d" '{"status":400,"message":"bad things"}'
		agent "$d" -m hi
		assert_equal "$status" 1
		local p=${d/gemini/googleai} tail=
		case $d in openai|anthropic) tail=' (request id req_mock01)' ;; esac
		assert_equal "$(last | jq -c '[.output.finishReason, .output.error]')" \
			"[\"failed\",{\"status\":\"INVALID_ARGUMENT\",\"message\":\"generate: $p: HTTP 400 Bad Request: bad things$tail\"}]"
		assert_equal "$stderr" "agent-run: generate: $p: HTTP 400 Bad Request: bad things$tail"
		assert_equal "$(mock_requests)" 1
	done
	# Anthropic's in-stream invalid_request_error is the same rejection.
	turns anthropic '{"status":413,"message":"too big"}'
	agent anthropic -m hi
	assert_equal "$status" 1
	assert_equal "$(last | jq -r .output.error.status)" INVALID_ARGUMENT
}

@test "a provider's FAILED_PRECONDITION (Gemini's unsupported location) is a model failure: exit 1, the name kept" {
	turns gemini '{"status":400,"type":"FAILED_PRECONDITION","message":"User location is not supported for the API use."}'
	agent gemini -m hi
	assert_equal "$status" 1
	assert_equal "$(last | jq -c '[.output.finishReason, .output.error]')" \
		'["failed",{"status":"FAILED_PRECONDITION","message":"generate: googleai: HTTP 400 Bad Request: User location is not supported for the API use."}]'
	assert_equal "$(mock_requests)" 1
}

@test "a garbled stream is a model failure (exit 1), not malformed input" {
	turns openai '{"raw":"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}\n\n"}'
	agent openai -m hi
	assert_equal "$status" 1
	assert_equal "$(last | jq -r .output.error.status)" INTERNAL
	assert_regex "$(last | jq -r .output.error.message)" '^generate: openai: bad stream event: '
}
