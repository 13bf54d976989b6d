#!/usr/bin/env bats
# provider-history.bats - a conversation handed to a provider partly as the
# text the store keeps it in (model_request.history: a long session's
# earlier messages, which the runtime does not parse) must go on the wire
# byte for byte as it does when every message is handed parsed: the mock
# logs the SHA-256 of each body as sent.

load test_helper
load provider_helper

setup() { provider_setup; }
teardown() { mock_stop; }

# A conversation of every shape a walk meets: plain messages (role user or
# model, text parts only; members in either order) with escapes,
# non-ASCII, NUL, empty and several texts; and messages that are not plain (system, a text part with
# metadata, a message's own metadata, a tool request and its response,
# media, more text parts than a plain message holds).  The system text is
# longer than the room a walk leaves for the members before the messages
# (PROV_HEAD), where Anthropic's body puts it.
conversation() {
	local model=$1 many
	many=$(jq -cn '[range(17) | {text: "part \(.) "}]')
	jq -cn --arg model "$model" --argjson many "$many" '{model: $model,
	tools: [{name: "lookup", description: "Look a thing up",
	         inputSchema: {type: "object", properties: {q: {type: "string"}}}}],
	messages: [
		{role: "system", content: [{text: ("Be terse." + ([range(600) | " padding"] | add))}]},
		{content: [{text: "hello \"quoted\" \\ back\nslash é 😀 \u0000 nul / </script>"}], role: "user"},
		{content: [{text: "and a second one"}], role: "user"},
		{content: [{text: "hi"}, {text: ""}, {text: " there"}], role: "model"},
		{content: [{text: ""}], role: "user"},
		{content: [{text: "let me look"}, {toolRequest: {name: "lookup", ref: "r1", input: {q: "x"}}}], role: "model"},
		{content: [{toolResponse: {name: "lookup", ref: "r1", output: {v: 1}}}], role: "tool"},
		{role: "model", content: [{text: "found it"}]},
		{content: [{reasoning: "so"}, {text: "thinking"}], role: "model"},
		{content: [{text: "aloud"}], role: "model"},
		{content: [{text: "with context", metadata: {purpose: "context"}}], role: "user"},
		{content: [{text: ""}], role: "model"},
		{content: [{text: "mine"}], metadata: {x: 1}, role: "user"},
		{content: [{text: "ok"}], role: "model"},
		{content: ($many + [{media: {url: "data:image/png;base64,iVBORw0KGgo=", contentType: "image/png"}}]), role: "user"},
		{content: [{text: "a picture"}], role: "model"},
		{content: [{text: "the last question"}], role: "user"}
	]}'
}

@test "a stored history goes on the wire as the same bytes as parsed messages, in every dialect" {
	local d n=17
	for d in openai responses gemini anthropic ollama; do
		printf '%s\n' '{"text":"ok","repeat":20}' >script.json
		mock_start "$d" script.json k-history-test
		conversation "$(model_for "$d")" >req.json
		run -0 --separate-stderr "$MODEL_CALL" <req.json
		local splits=(0:$n 1:$((n - 1)) 0:5 3:7 5:1 16:1 $n:0 1:0 6:8 1:2 8:2)
		for s in "${splits[@]}"; do
			run -0 --separate-stderr "$MODEL_CALL" --stored "$s" <req.json
		done
		assert_equal "$(mock_requests)" $((${#splits[@]} + 1))
		# every body the same bytes as the first (all parsed)
		assert_equal "$(jq -r .bodySha256 "$MOCK_LOG" | sort -u | wc -l | tr -d ' ')" 1
		# and the walk saw everything: the last question is there
		grep -q 'the last question' <(jq -c .body "$MOCK_LOG" | head -n 1)
		mock_stop
	done
}

@test "a stored message is checked as a parsed one is, counted from the conversation's first" {
	printf '%s\n' '{"text":"ok"}' >script.json
	mock_start openai script.json k-history-test
	jq -cn '{model: "openai/gpt-4o", messages: [{content: [{text: "a"}], role: "user"},
		{content: [{text: "b"}], role: 7}]}' >req.json
	run -101 --separate-stderr "$MODEL_CALL" --stored 0:2 <req.json
	assert_equal "$(jq -r .error.message <<<"$output")" "openai: message 1 has no role or content"
	assert_equal "$(mock_requests)" 0
}

# resumed DIALECT AGENT...: a session of a tool round and two turns of
# the agent AGENT... names (flags, or a prompt file and flags); the turn
# that resumes it by --session sends its history from the store's text,
# and a branch from the same row whose history is read whole (a trace that
# records content reads it) must send the same bytes.
resumed() {
	local d=$1 model sid row
	shift
	model=$(model_for "$d")
	printf '%s\n' '{"tools":[{"name":"greet","args":{"name":"Ann"},"id":"call_1"}]}' \
		'{"text":"Said \"hello\" to Ann."}' '{"text":"Again, Ann."}' '{"text":"Again, Ann."}' \
		>turns.ndjson
	mock_start "$d" turns.ndjson k-history-test
	local a=("$@" --model "$model")
	run -0 --separate-stderr agent-run "${a[@]}" -m 'greet Ann, "now" é'
	sid=$(last | jq -r .output.sessionId)
	row=$(last | jq -r .output.snapshotId)
	run -0 --separate-stderr agent-run "${a[@]}" --session "$sid" -m again
	assert_equal "$(last | jq -r .output.message.content[0].text)" "Again, Ann."
	local texts=$(last | jq -r .output.snapshotId)
	run -0 --separate-stderr agent-run "${a[@]}" --snapshot "$row" --trace-content \
		--trace-file "$BATS_TEST_TMPDIR/trace.ndjson" -m again
	local whole=$(last | jq -r .output.snapshotId)
	assert_equal "$(mock_requests)" 4
	assert_equal "$(jq -r .bodySha256 "$MOCK_LOG" | sed -n 3,4p | sort -u | wc -l | tr -d ' ')" 1
	# the history is all there
	local body=$(jq -c .body "$MOCK_LOG" | sed -n 3p) w
	for w in 'Be brief.' 'greet Ann, \"now\" é' 'hello Ann' 'Said \"hello\"' again; do
		[[ $body == *"$w"* ]] || fail "$d: no '$w' in $body"
	done
	# and the row the text-read turn wrote holds the conversation as the
	# branch's does (a template that places the history twice keeps it
	# twice), the whole of it
	local roles
	roles=$("$AGENTKIT_BIN/agent-snap" "$texts" | jq -c '[.state.messages[].role]')
	assert_equal "$roles" "$("$AGENTKIT_BIN/agent-snap" "$whole" | jq -c '[.state.messages[].role]')"
	[ "${TWICE-}" ] || assert_equal "$roles" '["user","model","tool","model","user","model"]'
	mock_stop
}

@test "a resumed session sends its history from the store's text, as the same bytes as read whole" {
	local d
	for d in openai responses gemini anthropic ollama; do
		resumed "$d" --system 'Be brief.' --tool "$TOP/tests/fixtures/tools/greet.json"
	done
}

# prompt NAME BODY: a prompt file agents/NAME.prompt with the greet tool
# and BODY as its template.
prompt() {
	mkdir -p agents/tools
	cp "$TOP"/tests/fixtures/tools/greet{,.json} agents/tools/
	printf -- '---\ntools: [greet]\n---\n%s\n' "$2" >"agents/$1.prompt"
}

@test "a prompt file's history goes from the store's text where the template puts it" {
	prompt placed $'{{role "system"}}\nBe brief.\n{{history}}\n{{role "user"}}\nKind regards.'
	prompt implied $'{{role "system"}}\nBe brief.\n{{role "user"}}\nKind regards.'
	# twice: the stored part has no one place, and the history is read whole
	prompt twice $'{{role "system"}}\nBe brief.\n{{history}}\n{{role "user"}}\nAgain:\n{{history}}'
	local d p
	for p in placed implied twice; do
		for d in openai anthropic; do
			TWICE=${p#placed} TWICE=${TWICE#implied} resumed "$d" --agents agents "$p"
		done
	done
}
