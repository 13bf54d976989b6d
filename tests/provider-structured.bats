#!/usr/bin/env bats
# provider-structured.bats - structured output through agent-run: each
# dialect's way of asking for JSON (scripts/mock-model logs the request),
# the parsed value in output.output, and a reply that is not the JSON asked
# for failing the turn.

load test_helper
load provider_helper

setup() { provider_setup; }
teardown() { mock_stop; }

SCHEMA='{"type":"object","properties":{"city":{"type":"string"},"tempC":{"type":"integer"}},"required":["city","tempC"],"additionalProperties":false}'
ANSWER='{"city":"Paris","tempC":18}'

# structured DIALECT TURN: one turn with --output-schema against the mock.
structured() {
	printf '%s\n' "$SCHEMA" >schema.json
	printf '%s\n' "$2" >turns.json
	mock_start "$1" turns.json sk-test-1234
	run --separate-stderr agent-run --no-store --model "$(model_for "$1")" --output-schema schema.json -m 'Weather in Paris?'
}

@test "openai: response_format json_schema (strict, named output); the value in output.output" {
	structured openai '{"chunks":["{\"city\":","\"Paris\",\"tempC\":18}"]}'
	assert_equal "$status" 0
	assert_equal "$(jq -c .body.response_format "$MOCK_LOG")" "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"output\",\"schema\":$SCHEMA,\"strict\":true}}"
	assert_equal "$(last | jq -c .output.output)" "$ANSWER"
	assert_equal "$(last | jq -c .output.message)" '{"content":[{"text":"{\"city\":\"Paris\",\"tempC\":18}"}],"role":"model"}'
	# Streamed chunks stay text chunks.
	assert_equal "$(jq -c 'select(.modelChunk) | .modelChunk.content' <<<"$output" | paste -sd ' ')" '[{"text":"{\"city\":"}] [{"text":"\"Paris\",\"tempC\":18}"}]'
}

@test "gemini: responseMimeType application/json and responseJsonSchema" {
	structured gemini "{\"text\":$(jq -Rs . <<<"$ANSWER")}"
	assert_equal "$status" 0
	assert_equal "$(jq -c .body.generationConfig "$MOCK_LOG")" "{\"responseMimeType\":\"application/json\",\"responseJsonSchema\":$SCHEMA}"
	assert_equal "$(last | jq -c .output.output)" "$ANSWER"
}

@test "anthropic: a forced output tool, its input unwrapped to the reply's text" {
	structured anthropic "{\"tools\":[{\"name\":\"output\",\"args\":$ANSWER,\"id\":\"toolu_9\"}]}"
	assert_equal "$status" 0
	assert_equal "$(jq -c '[.body.tools, .body.tool_choice]' "$MOCK_LOG")" "[[{\"name\":\"output\",\"description\":\"Give your final answer as this tool's input.\",\"input_schema\":$SCHEMA}],{\"type\":\"tool\",\"name\":\"output\"}]"
	assert_equal "$(last | jq -c .output.output)" "$ANSWER"
	assert_equal "$(last | jq -c .output.message)" '{"content":[{"text":"{\"city\":\"Paris\",\"tempC\":18}"}],"role":"model"}'
	assert_equal "$(last | jq -r .output.finishReason)" stop
	assert_equal "$(jq -c 'select(.modelChunk) | .modelChunk.content' <<<"$output")" '[{"text":"{\"city\":\"Paris\",\"tempC\":18}"}]'
}

@test "anthropic: with the agent's tools the choice is any; a non-object schema is wrapped" {
	printf '%s\n' '{"type":"array","items":{"type":"string"}}' >schema.json
	printf '%s\n' '{"tools":[{"name":"greet","args":{"name":"Ann"},"id":"toolu_1"}]}' \
		'{"tools":[{"name":"output","args":{"value":["rain","wind"]},"id":"toolu_2"}]}' >turns.ndjson
	mock_start anthropic turns.ndjson sk-test-1234
	run -0 --separate-stderr agent-run --no-store --model anthropic/claude-sonnet-4-5 \
		--tool "$TOP/tests/fixtures/tools/greet.json" --output-schema schema.json -m 'Paris?'
	assert_equal "$(jq -s -c '[.[] | .body.tool_choice]' "$MOCK_LOG")" '[{"type":"any"},{"type":"any"}]'
	assert_equal "$(jq -s -c '.[0].body.tools[1]' "$MOCK_LOG")" '{"name":"output","description":"Give your final answer as this tool'"'"'s input.","input_schema":{"type":"object","properties":{"value":{"type":"array","items":{"type":"string"}}},"required":["value"]}}'
	assert_equal "$(last | jq -c .output.output)" '["rain","wind"]'
}

@test "ollama: format is the schema" {
	structured ollama "{\"text\":$(jq -Rs . <<<"$ANSWER")}"
	assert_equal "$status" 0
	assert_equal "$(jq -c .body.format "$MOCK_LOG")" "$SCHEMA"
	assert_equal "$(last | jq -c .output.output)" "$ANSWER"
}

@test "--json without a schema: JSON mode in each dialect" {
	for d in openai gemini ollama; do
		mock_stop
		printf '%s\n' '{"text":"[1, 2]"}' >turns.json
		mock_start "$d" turns.json sk-test-1234
		run -0 --separate-stderr agent-run --no-store --model "$(model_for "$d")" --json -m 'numbers'
		assert_equal "$(last | jq -c .output.output)" '[1,2]'
		case $d in
		openai) assert_equal "$(jq -c .body.response_format "$MOCK_LOG")" '{"type":"json_object"}' ;;
		gemini) assert_equal "$(jq -c .body.generationConfig "$MOCK_LOG")" '{"responseMimeType":"application/json"}' ;;
		ollama) assert_equal "$(jq -c .body.format "$MOCK_LOG")" '"json"' ;;
		esac
	done
}

@test "a reply that is not JSON fails the turn, naming the spot" {
	structured openai '{"text":"{\"city\": Paris}"}'
	assert_equal "$status" 1
	assert_equal "$(last | jq -c .output.error)" '{"status":"INTERNAL","message":"generate: structured output: the model'"'"'s reply: invalid JSON: invalid token near '"'"'Paris'"'"' (at reply:1:14)"}'
	assert_equal "$(last | jq -r .output.finishReason)" failed
	# The failed turn's text still streamed, as text.
	assert_equal "$(jq -c 'select(.modelChunk) | .modelChunk.content[0] | keys' <<<"$output" | sort -u)" '["text"]'
	assert_equal "$(jq -c 'select(.turnEnd) | .turnEnd | del(.usage)' <<<"$output")" '{"finishReason":"failed"}'
	assert_equal "$stderr" "agent-run: generate: structured output: the model's reply: invalid JSON: invalid token near 'Paris' (at reply:1:14)"
}

@test "a reply that does not match the schema fails the turn, naming the spot" {
	structured gemini '{"text":"{\"city\":\"Paris\",\"tempC\":\"warm\"}"}'
	assert_equal "$status" 1
	assert_equal "$(last | jq -r .output.error.message)" 'generate: structured output: the model'"'"'s reply does not match the output schema: /tempC: expected an integer, got a string'
	# Nothing of the failed turn is kept in the state.
	assert_equal "$(last | jq -c .output.state.messages)" '[]'
}

@test "a fenced reply is unwrapped; the message keeps the JSON text" {
	structured ollama '{"text":"```json\n{\"city\":\"Paris\",\"tempC\":18}\n```"}'
	assert_equal "$status" 0
	assert_equal "$(last | jq -c .output.output)" "$ANSWER"
	assert_equal "$(last | jq -c .output.message.content)" '[{"text":"{\"city\":\"Paris\",\"tempC\":18}"}]'
}

@test "prompt front matter: output.schema in Picoschema becomes JSON Schema" {
	mkdir -p agents
	cat >agents/weather.prompt <<'PROMPT'
---
model: openai/gpt-4o
output:
  format: json
  schema:
    city: string, the city asked about
    tempC?: integer
    sky(enum): [sun, rain]
    tags(array): string
---
Weather please.
PROMPT
	printf '%s\n' '{"text":"{\"city\":\"Paris\",\"tempC\":null,\"sky\":\"rain\",\"tags\":[]}"}' >turns.json
	mock_start openai turns.json sk-test-1234
	run -0 --separate-stderr agent-run --no-store --agents agents weather -m go
	assert_equal "$(jq -c .body.response_format.json_schema.schema "$MOCK_LOG")" '{"type":"object","properties":{"city":{"type":"string","description":"the city asked about"},"tempC":{"type":["integer","null"]},"sky":{"enum":["sun","rain"]},"tags":{"type":"array","items":{"type":"string"}}},"required":["city","sky","tags"],"additionalProperties":false}'
	assert_equal "$(last | jq -c .output.output)" '{"city":"Paris","tempC":null,"sky":"rain","tags":[]}'
}

@test "bad output settings are refused before any model call" {
	mkdir -p agents
	printf -- '---\nmodel: echo\noutput: {format: yaml}\n---\nhi\n' >agents/a.prompt
	run -101 --separate-stderr agent-run --no-store --agents agents a -m x
	assert_regex "$stderr" "output.format must be json or text, got 'yaml'"
	printf '%s\n' '[1' >bad.json
	run -101 --separate-stderr agent-run --no-store --model echo --output-schema bad.json -m x
	assert_regex "$stderr" '^agent-run: --output-schema: invalid JSON: .*\(at bad.json:2:0\)$'
}

@test "the echo model's reply is checked like any other" {
	printf '%s\n' "$SCHEMA" >schema.json
	run -0 --separate-stderr agent-run --no-store --model echo --output-schema schema.json -m "$ANSWER"
	assert_equal "$(last | jq -c .output.output)" "$ANSWER"
	run -1 --separate-stderr agent-run --no-store --model echo --output-schema schema.json -m '{"city":"Paris"}'
	assert_equal "$(last | jq -r .output.error.message)" 'generate: structured output: the model'"'"'s reply does not match the output schema: missing required property "tempC"'
}
