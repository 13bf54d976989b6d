#!/usr/bin/env bats
# agent-run: executable tools, custom state, artifacts, parallel calls,
# tool failures, max turns, interrupts and resume validation
# (runtime-semantics §3.4, §3.6-3.8; DESIGN.md §3).

load test_helper

setup() {
	common_setup
	SCRIPTS="$FIXTURES/scripts"
	TOOLS="$FIXTURES/tools"
}

M="script/model.ndjson"

@test "tool loop: two rounds leave six session messages (PromptAgent_ToolLoopMessages)" {
	script '{"toolRequests":[{"name":"greet","ref":"1","input":{"name":"ann"}}]}' \
		'{"toolRequests":[{"name":"farewell","ref":"2","input":{"name":"ann"}}]}' '{"text":"done"}'
	run -0 --separate-stderr agent-run --no-store --model $M --tool "$TOOLS/greet.json" --tool "$TOOLS/farewell.json" -m hi
	[ "$(last | jq -c '[.output.state.messages[] | .role + ":" + (.content[0] | .text // .toolRequest.name // .toolResponse.output)]')" = '["user:hi","model:greet","tool:hello ann","model:farewell","tool:bye ann","model:done"]' ]
	# Chunk indexes count the messages generated in the turn.
	[ "$(chunks | jq -c 'select(.modelChunk) | [.modelChunk.role, .modelChunk.index]' | tr -d '\n')" = '["model",0]["tool",1]["model",2]["tool",3]["model",4]' ]
}

@test "tools are found in ./tools by name, and a missing one is NOT_FOUND at start" {
	mkdir tools
	cp "$TOOLS/greet" "$TOOLS/greet.json" tools/
	script '{"toolRequests":[{"name":"greet","ref":"1","input":{}}]}' '{"text":"ok"}'
	run -0 --separate-stderr agent-run --no-store --model $M --tool greet -m hi
	run -4 --separate-stderr agent-run --no-store --model $M --tool nosuch -m hi
	[ "$output" = '{"error":{"status":"NOT_FOUND","message":"tool '"'"'nosuch'"'"' not found (searched: agents/tools, '"$XDG_CONFIG_HOME"'/agentkit/agents/tools, tools)"}}' ]
}

@test "a tool the model asks for but the agent lacks is NOT_FOUND" {
	script '{"toolRequests":[{"name":"greet","ref":"1","input":{}}]}'
	run -4 --separate-stderr agent-run --no-store --model $M -m hi
	[ "$(last | jq -c .output.error)" = '{"status":"NOT_FOUND","message":"generate: tool \"greet\" not found"}' ]
}

@test "custom state: first patch of a turn replaces the document, later ones are diffs; jpatch-apply follows it" {
	script '{"toolRequests":[{"name":"addTask","ref":"1","input":{"title":"milk"}}]}' \
		'{"toolRequests":[{"name":"addTask","ref":"2","input":{"title":"eggs"}}]}' \
		'{"toolRequests":[{"name":"toggleTask","ref":"3","input":{"id":1}}]}' '{"text":"ok"}' \
		'{"toolRequests":[{"name":"toggleTask","ref":"4","input":{"id":2}}]}' '{"text":"ok too"}'
	run -0 --separate-stderr agent-run --no-store --model $M --tool "$TOOLS/addTask.json" --tool "$TOOLS/toggleTask.json" -m go -m more
	[ "$(chunks | jq -c 'select(.customPatch) | .customPatch')" = '[{"op":"replace","path":"","value":{"tasks":[{"id":1,"title":"milk","done":false}],"nextId":2}}]
[{"op":"replace","path":"/nextId","value":3},{"op":"add","path":"/tasks/-","value":{"id":2,"title":"eggs","done":false}}]
[{"op":"replace","path":"/tasks/0/done","value":true}]
[{"op":"replace","path":"","value":{"tasks":[{"id":1,"title":"milk","done":true},{"id":2,"title":"eggs","done":true}],"nextId":3}}]' ]
	# The live document ends equal to the final state.
	live=$(printf '%s\n' "$output" | jpatch-apply --stream --final)
	[ "$live" = "$(last | jq -c .output.state.custom)" ]
	[ "$live" = '{"tasks":[{"id":1,"title":"milk","done":true},{"id":2,"title":"eggs","done":true}],"nextId":3}' ]
	# The second turn starts over with a whole-document replace.
	[ "$(chunks | jq -c 'select(.customPatch or .turnEnd) | keys[0]' | tr -d '\n')" = '"customPatch""customPatch""customPatch""turnEnd""customPatch""turnEnd"' ]
}

@test "artifacts: streamed as sent, replaced by name in the output; parts ride on the tool response (Artifacts)" {
	script '{"toolRequests":[{"name":"artifacts","ref":"1","input":{}}]}' '{"text":"ok"}'
	run -0 --separate-stderr agent-run --no-store --model $M --tool "$TOOLS/artifacts.json" -m hi
	[ "$(chunks | jq -c 'select(.artifact) | .artifact')" = '{"name":"code.go","parts":[{"text":"v1"}]}
{"name":"notes.md","parts":[{"text":"n"}]}
{"name":"code.go","parts":[{"text":"v2"}]}' ]
	[ "$(last | jq -c .output.artifacts)" = '[{"name":"code.go","parts":[{"text":"v2"}]},{"name":"notes.md","parts":[{"text":"n"}]}]' ]
	[ "$(last | jq -c '.output.state.messages[2].content[0].toolResponse')" = '{"name":"artifacts","ref":"1","output":"sent","content":[{"text":"see code.go"}]}' ]
}

@test "parallel tool requests run at the same time and answer in one tool message" {
	mkdir rdv
	export RENDEZVOUS_DIR="$BATS_TEST_TMPDIR/rdv"
	run -0 --separate-stderr agent-run --no-store --model "script/$SCRIPTS/parallel.ndjson" --tool "$TOOLS/rendezvous.json" -m go
	[ "$(last | jq -c '.output.state.messages[2] | [.role, [.content[].toolResponse.output]]')" = '["tool",["a met b","b met a"]]' ]
}

@test "tool context: stdin and environment carry the turn context; provider keys are hidden (TurnContext)" {
	script '{"toolRequests":[{"name":"context","ref":"1","input":{}}]}' '{"text":"a"}' \
		'{"toolRequests":[{"name":"context","ref":"2","input":{}}]}' '{"text":"b"}'
	export OPENAI_API_KEY=sk-secret AGENTKIT_SNAPSHOT_ID=stale
	run -0 --separate-stderr agent-run --model $M --tool "$TOOLS/context.json" -m one -m two
	ids=$(chunks | jq -r 'select(.turnEnd) | .turnEnd.snapshotId' | tr '\n' ' ')
	sid=$(last | jq -r .output.sessionId)
	set -- $ids
	first=$(agent-snap "$1" | jq -c '.state.messages[2].content[0].toolResponse.output')
	[ "$first" = "{\"stdin\":{\"sessionId\":\"$sid\",\"snapshotId\":\"$1\",\"parentSnapshotId\":\"\",\"turnIndex\":0},\"env\":{\"sessionId\":\"$sid\",\"snapshotId\":\"$1\",\"parentSnapshotId\":\"\",\"turnIndex\":\"0\",\"openaiKey\":\"unset\"}}" ]
	second=$(agent-snap "$2" | jq -c '.state.messages[6].content[0].toolResponse.output.stdin')
	[ "$second" = "{\"sessionId\":\"$sid\",\"snapshotId\":\"$2\",\"parentSnapshotId\":\"$1\",\"turnIndex\":1}" ]
	# Client-managed: no snapshot IDs.  A manifest may ask for a key.
	script '{"toolRequests":[{"name":"secret","ref":"1","input":{}}]}' '{"text":"a"}'
	run -0 --separate-stderr agent-run --no-store --model $M --tool "$TOOLS/secret.json" -m one
	[ "$(last | jq -c '.output.state.messages[2].content[0].toolResponse.output.env | [.snapshotId, .parentSnapshotId, .openaiKey]')" = '["","","sk-secret"]' ]
}

@test "tool failure: non-zero exit fails the turn with the tool's stderr; the row keeps the user message (§3.4, §3.8)" {
	script '{"toolRequests":[{"name":"fail","ref":"1","input":{}}]}'
	run -1 --separate-stderr agent-run --model $M --tool "$TOOLS/fail.json" -m hi
	[ "$stderr" = 'agent-run: generate: tool "fail" failed: exited with status 3: boom: the disk is on fire' ]
	[ "$(chunks | tail -n 1 | jq -c '.turnEnd | [.finishReason, (.snapshotId | length)]')" = '["failed",36]' ]
	snap=$(last | jq -r .output.snapshotId)
	[ "$(agent-snap "$snap" | jq -c '[.status, .finishReason, .error, [.state.messages[].role]]')" = '["failed","failed",{"status":"INTERNAL","message":"generate: tool \"fail\" failed: exited with status 3: boom: the disk is on fire"},["user"]]' ]
}

@test "arguments that fail the input schema go back to the model as a tool error, the tool not run; its next call succeeds (exit 0)" {
	export READFILE_LOG="$BATS_TEST_TMPDIR/calls"
	# readFile: path a string, encoding one of utf-8/base64, both required,
	# nothing else.  Round 0 also calls greet (no schema), which runs.
	script '{"toolRequests":[{"name":"greet","ref":"g","input":{"name":"ann"}},{"name":"readFile","ref":"1","input":{"path":123,"encoding":"utf-8"}}]}' \
		'{"toolRequests":[{"name":"readFile","ref":"2","input":{"path":"a.txt","encoding":"latin-1"}}]}' \
		'{"toolRequests":[{"name":"readFile","ref":"3","input":{"path":"a.txt"}}]}' \
		'{"toolRequests":[{"name":"readFile","ref":"4","input":{"path":"a.txt","encoding":"utf-8","mode":"r"}}]}' \
		'{"toolRequests":[{"name":"readFile","ref":"5","input":{"path":"a.txt","encoding":"utf-8"}}]}' \
		'{"text":"done"}'
	run -0 --separate-stderr agent-run --model $M --tool "$TOOLS/greet.json" --tool "$TOOLS/readFile.json" --trace-file t.ndjson -m hi
	[ -z "$stderr" ]
	# What the model is sent back: the stream's tool chunks, one per round.
	[ "$(chunks | jq -c 'select(.modelChunk.role == "tool") | [.modelChunk.content[].toolResponse]')" = '[{"name":"greet","ref":"g","output":"hello ann"},{"name":"readFile","ref":"1","output":{"error":"invalid arguments for tool '"'"'readFile'"'"': /path: expected a string, got a number"}}]
[{"name":"readFile","ref":"2","output":{"error":"invalid arguments for tool '"'"'readFile'"'"': /encoding: must be one of [\"utf-8\",\"base64\"]"}}]
[{"name":"readFile","ref":"3","output":{"error":"invalid arguments for tool '"'"'readFile'"'"': missing required property \"encoding\""}}]
[{"name":"readFile","ref":"4","output":{"error":"invalid arguments for tool '"'"'readFile'"'"': unexpected property \"mode\""}}]
[{"name":"readFile","ref":"5","output":"read a.txt as utf-8"}]' ]
	# The tool ran once, with the arguments that fit.
	[ "$(cat "$READFILE_LOG")" = '{"path":"a.txt","encoding":"utf-8"}' ]
	[ "$(last | jq -r .output.message.content[0].text)" = done ]
	# The committed conversation holds the errors as the model saw them.
	snap=$(last | jq -r .output.snapshotId)
	[ "$(agent-snap "$snap" | jq -c '[.status, .finishReason, [.state.messages[].role], .state.messages[4].content[0].toolResponse.output]')" = '["completed","stop",["user","model","tool","model","tool","model","tool","model","tool","model","tool","model"],{"error":"invalid arguments for tool '"'"'readFile'"'"': /encoding: must be one of [\"utf-8\",\"base64\"]"}]' ]
	# Each rejected call has a span with the error, none the turn's failure.
	[ "$(jq -c '(.body // .) | .resourceSpans[].scopeSpans[].spans[] | select(.name == "readFile") | [.status.code, .status.message // null]' t.ndjson)" = '[2,"invalid arguments for tool '"'"'readFile'"'"': /path: expected a string, got a number"]
[2,"invalid arguments for tool '"'"'readFile'"'"': /encoding: must be one of [\"utf-8\",\"base64\"]"]
[2,"invalid arguments for tool '"'"'readFile'"'"': missing required property \"encoding\""]
[2,"invalid arguments for tool '"'"'readFile'"'"': unexpected property \"mode\""]
[0,null]' ]
	[ "$(jq -c '[(.body // .) | .resourceSpans[].scopeSpans[].spans[] | .attributes[] | select(.key == "genkit:isFailureSource")] | length' t.ndjson | sort -u)" = 0 ]
}

@test "argument errors count as tool rounds: with max turns 1 the run ends aborted (2)" {
	export READFILE_LOG="$BATS_TEST_TMPDIR/calls"
	# every mismatch of the input in one message
	script '{"toolRequests":[{"name":"readFile","ref":"1","input":{"path":123}}]}' \
		'{"toolRequests":[{"name":"readFile","ref":"2","input":{"path":"a.txt","encoding":"utf-8"}}]}' '{"text":"done"}'
	run -2 --separate-stderr agent-run --model $M --tool "$TOOLS/readFile.json" --max-turns 1 -m hi
	[ "$(chunks | jq -c 'select(.modelChunk.role == "tool") | .modelChunk.content[0].toolResponse.output')" = '{"error":"invalid arguments for tool '"'"'readFile'"'"': missing required property \"encoding\"; /path: expected a string, got a number"}' ]
	[ "$(last | jq -c '.output | [.finishReason, .error]')" = '["aborted",{"status":"ABORTED","message":"generate: exceeded maximum tool call iterations (1)"}]' ]
	[ "$(agent-snap "$(last | jq -r .output.snapshotId)" | jq -c '[.status, .finishReason, [.state.messages[].role]]')" = '["aborted","aborted",["user","model","tool"]]' ]
	[ ! -e "$READFILE_LOG" ]
	# With one more turn the corrected call runs and the turn completes.
	run -0 --separate-stderr agent-run --no-store --model $M --tool "$TOOLS/readFile.json" --max-turns 2 -m hi
	[ "$(cat "$READFILE_LOG")" = '{"path":"a.txt","encoding":"utf-8"}' ]
	[ "$(last | jq -r .output.message.content[0].text)" = done ]
}

@test "text mode shows an argument error as the tool's error line, then the model's answer" {
	script '{"toolRequests":[{"name":"readFile","ref":"1","input":{"path":123,"encoding":"utf-8"}}]}' \
		'{"toolRequests":[{"name":"readFile","ref":"2","input":{"path":"a.txt","encoding":"utf-8"}}]}' '{"text":"done"}'
	run -0 --separate-stderr agent-run --no-store --format text --model $M --tool "$TOOLS/readFile.json" -m hi
	[ "$output" = done ]
	[ "$(sed -n 1,4p <<<"$stderr")" = "tool readFile {\"path\":123,\"encoding\":\"utf-8\"}
tool readFile error invalid arguments for tool 'readFile': /path: expected a string, got a number
tool readFile {\"path\":\"a.txt\",\"encoding\":\"utf-8\"}
tool readFile ok \"read a.txt as utf-8\"" ]
}

@test "an argument error beside an interrupt waits as pending output and reaches the model on resume" {
	script '{"toolRequests":[{"name":"ask","ref":"q1","input":{"q":"which color?"}},{"name":"readFile","ref":"r1","input":{"path":1,"encoding":"utf-8"}}]}' \
		'{"when":{"models":1},"text":"Thanks."}'
	run -6 --separate-stderr agent-run --model $M --tool "$TOOLS/ask.json" --tool "$TOOLS/readFile.json" -m paint
	[ "$(last | jq -c '.output.message.content[1].metadata')" = '{"pendingOutput":{"error":"invalid arguments for tool '"'"'readFile'"'"': /path: expected a string, got a number"}}' ]
	sid=$(last | jq -r .output.sessionId)
	run -0 --separate-stderr agent-run --model $M --tool "$TOOLS/ask.json" --tool "$TOOLS/readFile.json" --session "$sid" \
		<<<'{"resume":{"respond":[{"toolResponse":{"name":"ask","ref":"q1","output":"blue"}}]}}'
	[ "$(chunks | head -n 1 | jq -c '.modelChunk.content[1]')" = '{"toolResponse":{"name":"readFile","ref":"r1","output":{"error":"invalid arguments for tool '"'"'readFile'"'"': /path: expected a string, got a number"}},"metadata":{"source":"pending"}}' ]
	[ "$(last | jq -r .output.message.content[0].text)" = Thanks. ]
}

@test "a tool whose input schema is unusable fails the turn: no arguments could fix it" {
	printf '{"inputSchema": {"$ref": "#/nowhere"}, "command": ["%s"]}\n' "$TOOLS/greet" >broken.json
	script '{"toolRequests":[{"name":"greet","ref":"1","input":{}},{"name":"broken","ref":"2","input":{}}]}'
	run -1 --separate-stderr agent-run --model $M --tool "$TOOLS/greet.json" --tool ./broken.json -m hi
	[ "$stderr" = 'agent-run: generate: tool "broken" failed: invalid input: the input schema is unusable: cannot resolve $ref #/nowhere' ]
	[ "$(chunks | jq -c 'select(.modelChunk.role == "tool")')" = "" ]
	snap=$(last | jq -r .output.snapshotId)
	[ "$(agent-snap "$snap" | jq -c '[.status, .error.status, [.state.messages[].role]]')" = '["failed","INTERNAL",["user"]]' ]
}

@test "tool failure: a later round commits what the completed rounds left; timeouts and garbage are failures" {
	script '{"toolRequests":[{"name":"greet","ref":"g","input":{}}]}' '{"toolRequests":[{"name":"slow","ref":"s","input":{}}]}'
	run -1 --separate-stderr agent-run --no-store --model $M --tool "$TOOLS/greet.json" --tool "$TOOLS/slow.json" -m hi
	[ "$stderr" = 'agent-run: generate: tool "slow" failed: timed out after 300ms: still thinking' ]
	[ "$(last | jq -c '[.output.state.messages[].role]')" = '["user","model","tool"]' ]
	script '{"toolRequests":[{"name":"garbage","ref":"1","input":{}}]}'
	run -1 --separate-stderr agent-run --no-store --model $M --tool "$TOOLS/garbage.json" -m hi
	[ "$stderr" = "agent-run: generate: tool \"garbage\" failed: wrote malformed output: invalid JSON: invalid token near 'this' (at stdout:1)" ]
}

@test "max turns: the tool loop stops with aborted (2) and the row is aborted" {
	script '{"toolRequests":[{"name":"greet","ref":"1","input":{}}]}' '{"toolRequests":[{"name":"greet","ref":"2","input":{}}]}'
	run -2 --separate-stderr agent-run --model $M --tool "$TOOLS/greet.json" --max-turns 1 -m hi
	[ "$(last | jq -c '.output | [.finishReason, .error]')" = '["aborted",{"status":"ABORTED","message":"generate: exceeded maximum tool call iterations (1)"}]' ]
	[ "$(agent-snap "$(last | jq -r .output.snapshotId)" | jq -c '[.status, .finishReason, [.state.messages[].role]]')" = '["aborted","aborted",["user","model","tool"]]' ]
	run -100 --separate-stderr agent-run --model echo --max-turns 0 -m hi
}

@test "interrupt: the turn ends interrupted (6) with a tool chunk of the interrupt parts (PromptAgent_ForwardsInterruptedFinishReason)" {
	run -6 --separate-stderr agent-run --model "script/$SCRIPTS/ask.ndjson" --tool "$TOOLS/ask.json" --tool "$TOOLS/greet.json" -m paint
	[ "$(chunks | jq -c 'select(.modelChunk.role == "tool") | .modelChunk')" = '{"content":[{"toolRequest":{"name":"ask","ref":"q1","input":{"q":"which color?"}},"metadata":{"interrupt":{"question":"which color?"}}}],"index":0,"role":"tool"}' ]
	[ "$(last | jq -c '.output | [.finishReason, [.message.content[].metadata]]')" = '["interrupted",[null,{"interrupt":{"question":"which color?"}},{"pendingOutput":"hello ann"}]]' ]
	[ "$(agent-snap "$(last | jq -r .output.snapshotId)" | jq -c '[.status, .finishReason]')" = '["completed","interrupted"]' ]
}

@test "resume: respond answers the interrupt, pending outputs are replayed, the model goes on" {
	run -6 --separate-stderr agent-run --model "script/$SCRIPTS/ask.ndjson" --tool "$TOOLS/ask.json" --tool "$TOOLS/greet.json" -m paint
	sid=$(last | jq -r .output.sessionId)
	run -0 --separate-stderr agent-run --model "script/$SCRIPTS/ask.ndjson" --tool "$TOOLS/ask.json" --tool "$TOOLS/greet.json" --session "$sid" \
		<<<'{"resume":{"respond":[{"toolResponse":{"name":"ask","ref":"q1","output":"blue"}}]}}'
	[ "$(chunks | head -n 1)" = '{"modelChunk":{"content":[{"toolResponse":{"name":"ask","ref":"q1","output":"blue"},"metadata":{"interruptResponse":true}},{"toolResponse":{"name":"greet","ref":"g1","output":"hello ann"},"metadata":{"source":"pending"}}],"index":0,"role":"tool"}}' ]
	[ "$(last | jq -r .output.message.content[0].text)" = "Thanks for answering." ]
	[ "$(agent-snap --session "$sid" | jq -c '.state.messages[1].content[1].metadata')" = '{"resolvedInterrupt":{"question":"which color?"}}' ]
}

@test "resume: a restarted tool sees its resume data" {
	run -6 --separate-stderr agent-run --model "script/$SCRIPTS/ask.ndjson" --tool "$TOOLS/ask.json" --tool "$TOOLS/greet.json" -m paint
	snap=$(last | jq -r .output.snapshotId)
	run -0 --separate-stderr agent-run --model "script/$SCRIPTS/ask.ndjson" --tool "$TOOLS/ask.json" --tool "$TOOLS/greet.json" --snapshot "$snap" \
		<<<'{"resume":{"restart":[{"toolRequest":{"name":"ask","ref":"q1","input":{"q":"which color?"}},"metadata":{"resumed":{"color":"red"}}}]}}'
	[ "$(chunks | head -n 1 | jq -c '.modelChunk.content[0].toolResponse.output')" = '{"answer":{"color":"red"}}' ]
}

@test "resume: a restart that interrupts again commits as interrupted without calling the model (PromptAgent_RestartInterruptsAgain)" {
	script '{"toolRequests":[{"name":"ask","ref":"q1","input":{"q":"?"}}]}'
	run -6 --separate-stderr agent-run --model $M --tool "$TOOLS/ask.json" -m hi
	snap=$(last | jq -r .output.snapshotId)
	# resumed:false makes the ask tool interrupt again; the script has no second reply.
	run -6 --separate-stderr agent-run --model $M --tool "$TOOLS/ask.json" --snapshot "$snap" \
		<<<'{"resume":{"restart":[{"toolRequest":{"name":"ask","ref":"q1","input":{"q":"?"}},"metadata":{"resumed":false}}]}}'
	[ -z "$stderr" ]
	row=$(agent-snap "$(last | jq -r .output.snapshotId)")
	[ "$(jq -c '[.status, .finishReason, .parentId == "'"$snap"'", (.state.messages | length), .state.messages[1].content[0].metadata]' <<<"$row")" = '["completed","interrupted",true,2,{"interrupt":{"question":"?"}}]' ]
}

@test "resume validation: every case of ValidateResumeAgainstHistory, with its exact message, before anything runs" {
	script '{"toolRequests":[{"name":"greet","ref":"old","input":{"name":"x"}}]}' '{"text":"done"}' \
		'{"toolRequests":[{"name":"ask","ref":"q1","input":{"n":1}}]}'
	run -6 --separate-stderr agent-run --model $M --tool "$TOOLS/ask.json" --tool "$TOOLS/greet.json" -m one -m two
	sid=$(last | jq -r .output.sessionId)
	snap=$(last | jq -r .output.snapshotId)
	check() {
		run -101 --separate-stderr agent-run --model $M --tool "$TOOLS/ask.json" --tool "$TOOLS/greet.json" --snapshot "$snap" <<<"$1"
		[ "$(last | jq -c .output.error)" = "{\"status\":\"INVALID_ARGUMENT\",\"message\":$2}" ] || { echo "got: $(last)"; return 1; }
		[ "$(chunks)" = '{"turnEnd":{"finishReason":"failed"}}' ]
		[ "$(last | jq -r .output.snapshotId)" = "$snap" ]
	}
	check '{"resume":{"respond":[{"toolResponse":{"name":"greet","ref":"old","output":1}}]}}' \
		'"resume.respond references tool \"greet\" (ref: old) from an earlier turn which is no longer pending; only tool requests from the most recent model response can be resumed"'
	check '{"resume":{"respond":[{"toolResponse":{"name":"ask","ref":"nope","output":1}}]}}' \
		'"resume.respond references tool \"ask\" (ref: nope) which was not found in session history"'
	check '{"resume":{"restart":[{"toolRequest":{"name":"nosuch","input":{}}}]}}' \
		'"resume.restart references tool \"nosuch\" which was not found in session history"'
	check '{"resume":{"restart":[{"toolRequest":{"name":"ask","ref":"q1","input":{"n":2}}}]}}' \
		'"resume.restart for tool \"ask\" (ref: q1) has modified inputs that do not match the original tool request in session history; restart inputs must exactly match the interrupted tool request"'
	# Restarts are checked before responds; 1 equals 1.0.
	check '{"resume":{"respond":[{"toolResponse":{"name":"x","ref":"y"}}],"restart":[{"toolRequest":{"name":"ask","ref":"q1","input":{"n":3}}}]}}' \
		'"resume.restart for tool \"ask\" (ref: q1) has modified inputs that do not match the original tool request in session history; restart inputs must exactly match the interrupted tool request"'
	run -6 --separate-stderr agent-run --model $M --tool "$TOOLS/ask.json" --snapshot "$snap" \
		<<<'{"resume":{"restart":[{"toolRequest":{"name":"ask","ref":"q1","input":{"n":1.0}},"metadata":{"resumed":false}}]}}'
	# The store holds no row from the rejected attempts.
	[ "$(agent-snap log "$sid" | wc -l)" = 3 ]
}

@test "resume: after a completed round the old requests are no longer pending" {
	script '{"toolRequests":[{"name":"greet","ref":"g","input":{}}]}' '{"text":"done"}'
	run -0 --separate-stderr agent-run --model $M --tool "$TOOLS/greet.json" -m hi
	snap=$(last | jq -r .output.snapshotId)
	run -101 --separate-stderr agent-run --model $M --tool "$TOOLS/greet.json" --snapshot "$snap" \
		<<<'{"resume":{"respond":[{"toolResponse":{"name":"greet","ref":"g","output":1}}]}}'
	[ "$(last | jq -r .output.error.message)" = 'resume.respond references tool "greet" (ref: g) from an earlier turn which is no longer pending; only tool requests from the most recent model response can be resumed' ]
}

@test "a tool request without a ref streams with the ref agentkit mints, the one its toolResponse and the history carry" {
	echo '{"sessionId":"s1"}' >state.json
	script '{"toolRequests":[{"name":"greet","input":{"name":"ann"}},{"name":"greet","input":{"name":"bob"}}]}' '{"text":"done"}'
	run -0 --separate-stderr agent-run --no-store --state state.json --model $M --tool "$TOOLS/greet.json" -m hi
	a=$(chunks | head -n 1 | jq -r '.modelChunk.content[0].toolRequest.ref')
	b=$(chunks | head -n 1 | jq -r '.modelChunk.content[1].toolRequest.ref')
	uuid='^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'
	[[ $a =~ $uuid && $b =~ $uuid && $a != "$b" ]]
	[ "$output" = '{"modelChunk":{"content":[{"toolRequest":{"name":"greet","input":{"name":"ann"},"ref":"'$a'"}},{"toolRequest":{"name":"greet","input":{"name":"bob"},"ref":"'$b'"}}],"index":0,"role":"model"}}
{"modelChunk":{"content":[{"toolResponse":{"name":"greet","ref":"'$a'","output":"hello ann"}},{"toolResponse":{"name":"greet","ref":"'$b'","output":"hello bob"}}],"index":1,"role":"tool"}}
{"modelChunk":{"content":[{"text":"done"}],"index":2,"role":"model"}}
{"turnEnd":{"finishReason":"stop"}}
{"output":{"finishReason":"stop","message":{"content":[{"text":"done"}],"role":"model"},"sessionId":"s1","state":{"messages":[{"content":[{"text":"hi"}],"role":"user"},{"content":[{"toolRequest":{"name":"greet","input":{"name":"ann"},"ref":"'$a'"}},{"toolRequest":{"name":"greet","input":{"name":"bob"},"ref":"'$b'"}}],"role":"model"},{"content":[{"toolResponse":{"name":"greet","ref":"'$a'","output":"hello ann"}},{"toolResponse":{"name":"greet","ref":"'$b'","output":"hello bob"}}],"role":"tool"},{"content":[{"text":"done"}],"role":"model"}],"sessionId":"s1"}}}' ]
}

@test "custom state starts null: a patch below the root names the null root once, exit 1" {
	mkdir -p tools
	printf '#!/bin/sh\ncat >/dev/null\necho '"'"'{"customPatch": [{"op": "add", "path": "/notes", "value": []}]}'"'"'\necho '"'"'{"output": 1}'"'"'\n' >tools/note
	chmod +x tools/note
	echo '{}' >tools/note.json
	script '{"toolRequests":[{"name":"note","ref":"n","input":{}}]}' '{"text":"ok"}'
	run -1 --separate-stderr agent-run --no-store --model $M --tool note -m hi
	[ "$(last | jq -c .output.error)" = "{\"status\":\"INTERNAL\",\"message\":\"generate: tool \\\"note\\\" failed: bad customPatch: patch op 0: path '/notes': the document is null, not an object or array (at stdout:1)\"}" ]
	[ "$stderr" = "agent-run: generate: tool \"note\" failed: bad customPatch: patch op 0: path '/notes': the document is null, not an object or array (at stdout:1)" ]
	# Setting the root first is what a fresh session needs.
	printf '#!/bin/sh\ncat >/dev/null\necho '"'"'{"customPatch": [{"op": "add", "path": "", "value": {}}, {"op": "add", "path": "/notes", "value": []}]}'"'"'\necho '"'"'{"output": 1}'"'"'\n' >tools/note
	run -0 --separate-stderr agent-run --no-store --model $M --tool note -m hi
	[ "$(last | jq -c .output.state.custom)" = '{"notes":[]}' ]
}

@test "text mode ends an interrupted turn with the command that resumes it, and that command resumes it" {
	run -6 --separate-stderr agent-run --format text --model "script/$SCRIPTS/ask.ndjson" \
		--tool "$TOOLS/ask.json" -m 'paint it' --tool "$TOOLS/greet.json"
	sid=$(agent-snap sessions | jq -r .sessionId)
	assert_equal "$(tail -n 3 <<<"$stderr" | sed 's/snapshot [0-9a-f-]*$/snapshot S/')" "agent-run: interrupted, session $sid, snapshot S
agent-run: interrupted: ask (ref q1) waits for an answer; resume it with (ANSWER: the tool's output, any JSON value; or --approve REF to run it again, approved, or --deny REF):
  agent-run --format text --model script/$SCRIPTS/ask.ndjson --tool $TOOLS/ask.json --tool $TOOLS/greet.json --session $sid --respond 'q1=ANSWER'"
	cmd=$(tail -n 1 <<<"$stderr" | sed 's/^  //; s/=ANSWER/="blue"/')
	run -0 --separate-stderr bash -c "$cmd"
	assert_output "Thanks for answering."
	# Not in NDJSON, where the output line has the interrupt; not without a store.
	run -6 --separate-stderr agent-run --model "script/$SCRIPTS/ask.ndjson" --tool "$TOOLS/ask.json" \
		--tool "$TOOLS/greet.json" -m paint
	assert_equal "$stderr" ""
	run -6 --separate-stderr agent-run --no-store --format text --model "script/$SCRIPTS/ask.ndjson" \
		--tool "$TOOLS/ask.json" --tool "$TOOLS/greet.json" -m paint
	[[ $stderr != *"resume it with"* ]] || fail "$stderr"
}
