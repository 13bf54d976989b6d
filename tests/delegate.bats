#!/usr/bin/env bats
# Agents that call agents (docs/agents.md): front matter `agents:` gives
# the model one delegate_to_NAME tool per sub-agent (Genkit's agents
# middleware), each call a child agent-run in a session of its own on the
# same store, linked both ways; limits (maxDelegations, depth, cycles,
# timeout) and failures as the parent's model reads them.

load test_helper

SPID=

setup() {
	common_setup
	mkdir -p agents/tools
}

teardown() {
	[ -z "$SPID" ] || kill "$SPID" 2>/dev/null || true
	[ -z "$SPID" ] || wait "$SPID" 2>/dev/null || true
}

# agent NAME FRONT-MATTER-LINE...: agents/NAME.prompt with a system line.
agent() {
	local name=$1
	shift
	{
		echo ---
		printf '%s\n' "$@"
		echo ---
		echo '{{role "system"}}You are '"$name"'.'
		echo '{{history}}'
	} >"agents/$name.prompt"
}

# lead_script TOOL INPUT: the lead asks for TOOL once, then answers "done".
lead_script() {
	printf '%s\n' "{\"when\": {\"round\": 0}, \"toolRequests\": [{\"name\": \"$1\", \"ref\": \"r1\", \"input\": $2}]}" \
		'{"when": {"round": 1}, "text": "done"}' >agents/lead.ndjson
}

# The output of the tool response of the run in $output (the first).
tool_out() { chunks | jq -c 'select(.modelChunk.role == "tool") | .modelChunk.content[0].toolResponse.output' | head -n 1; }

@test "a delegation: the sub-agent's reply is the response, the sessions linked both ways" {
	agent lead 'model: script/lead.ndjson' 'agents: [researcher]'
	agent researcher 'description: Finds facts.' 'model: echo'
	lead_script delegate_to_researcher '{"task": "find facts"}'
	run -0 --separate-stderr agent-run lead -m hi
	[ "$(last | jq -r .output.message.content[0].text)" = done ]
	parent_session=$(last | jq -r .output.sessionId)
	parent_snap=$(last | jq -r .output.snapshotId)
	out=$(tool_out)
	[ "$(jq -r .response <<<"$out")" = "find facts" ]
	[ "$(jq -c 'keys' <<<"$out")" = '["response","sessionId","snapshotId"]' ]
	sub=$(jq -r .sessionId <<<"$out")
	sub_snap=$(jq -r .snapshotId <<<"$out")
	[ "$sub" != "$parent_session" ]
	# the sub-session's row is the one the response names: the task, the reply
	run -0 agent-snap --session "$sub"
	[ "$(jq -r .snapshotId <<<"$output")" = "$sub_snap" ]
	[ "$(jq -c '[.state.messages[] | .role + ":" + .content[0].text]' <<<"$output")" = '["user:find facts","model:find facts"]' ]
	# ... and its metadata names the parent's session and snapshot
	run -0 agent-snap export "$sub"
	[ "$(jq -c .agentkit.delegation <<<"$output")" = "{\"parentSessionId\":\"$parent_session\",\"parentSnapshotId\":\"$parent_snap\",\"agent\":\"lead\",\"tool\":\"delegate_to_researcher\"}" ]
	[ "$(jq -r .agentkit.agent <<<"$output")" = researcher ]
	# the parent's session keeps the link in its tool response
	run -0 agent-snap --session "$parent_session"
	[ "$(jq -r '.state.messages[2].content[0].toolResponse.output.sessionId' <<<"$output")" = "$sub" ]
}

# delegate_two_deep: lead delegates to researcher, which delegates to
# reviewer (echo); sets lead_sid, lead_snap and sub (the researcher's
# session) from the run.
delegate_two_deep() {
	agent lead 'model: script/lead.ndjson' 'agents: [researcher]'
	agent researcher 'model: script/researcher.ndjson' 'agents: [reviewer]'
	agent reviewer 'model: echo'
	lead_script delegate_to_researcher '{"task": "find facts"}'
	printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "delegate_to_reviewer", "ref": "q1", "input": {"task": "check facts"}}]}' \
		'{"when": {"round": 1}, "text": "facts"}' >agents/researcher.ndjson
	run -0 --separate-stderr agent-run lead -m hi
	lead_sid=$(last | jq -r .output.sessionId)
	lead_snap=$(last | jq -r .output.snapshotId)
	sub=$(tool_out | jq -r .sessionId)
}

@test "agent-snap log shows the delegations as a tree: the session's rows, then each sub-session's, deeper" {
	delegate_two_deep
	run -0 agent-snap log "$lead_sid"
	assert_equal "${#lines[@]}" 3
	assert_equal "$(jq -c '[.sessionId == "'"$lead_sid"'", has("depth"), has("delegation")]' <<<"${lines[0]}")" '[true,false,false]'
	assert_equal "$(jq -c '[.sessionId == "'"$sub"'", .depth, .delegation.agent, .delegation.tool, .delegation.parentSessionId == "'"$lead_sid"'", .delegation.parentSnapshotId == "'"$lead_snap"'"]' <<<"${lines[1]}")" \
		'[true,1,"lead","delegate_to_researcher",true,true]'
	assert_equal "$(jq -c '[.depth, .delegation.agent, .delegation.tool, .delegation.parentSessionId == "'"$sub"'"]' <<<"${lines[2]}")" \
		'[2,"researcher","delegate_to_reviewer",true]'
	# the sub-session's own log starts from it
	run -0 agent-snap log "$sub"
	assert_equal "$(printf '%s\n' "${lines[@]}" | jq -r '.depth // 0' | tr '\n' ' ')" "0 1 "
}

@test "agent-snap show shows the delegations as log does: text, NDJSON and JSON" {
	delegate_two_deep
	sub_snap=$(tool_out | jq -r .snapshotId)
	run -0 --separate-stderr agent-snap show "$lead_sid"
	# the lead's four messages, then a heading and the researcher's four, then the reviewer's two
	assert_equal "$(jq -c 'if .role then .role + ":" + (.content[0].text // (.content[0] | keys[0])) else [.depth, .agent, .delegation.agent, .delegation.tool] end' <<<"$output")" \
'"user:hi"
"model:toolRequest"
"tool:toolResponse"
"model:done"
[1,"researcher","lead","delegate_to_researcher"]
"user:find facts"
"model:toolRequest"
"tool:toolResponse"
"model:facts"
[2,"reviewer","researcher","delegate_to_reviewer"]
"user:check facts"
"model:check facts"'
	assert_equal "$(jq -c 'select(.depth == 1) | [.sessionId == "'"$sub"'", .snapshotId == "'"$sub_snap"'", .delegation.parentSessionId == "'"$lead_sid"'", .delegation.parentSnapshotId == "'"$lead_snap"'"]' <<<"$output")" '[true,true,true,true]'
	run -0 --separate-stderr agent-snap show --format text "$lead_sid"
	assert_equal "$(grep '^===' <<<"$output")" "=== depth 1: researcher, session $sub, delegated by lead with delegate_to_researcher
=== depth 2: reviewer, session $(jq -r '.state.messages[2].content[0].toolResponse.output.sessionId' < <(agent-snap --session "$sub")), delegated by researcher with delegate_to_reviewer"
	assert_line --index 0 'user: hi'
	assert_line --index 7 'user: find facts'
	assert_line --index -1 'model: check facts'
	run -0 --separate-stderr agent-snap show --format json "$lead_sid"
	assert_equal "$(jq -c '[.sessionId == "'"$lead_sid"'", (.messages | length), [.delegations[] | [.depth, .agent, .status, (.messages | length), .messages[0].content[0].text]]]' <<<"$output")" \
		'[true,4,[[1,"researcher","completed",4,"find facts"],[2,"reviewer","completed",2,"check facts"]]]'
	# a sub-session's show starts from it; a session without delegations has no heading
	run -0 --separate-stderr agent-snap show --format json "$sub"
	assert_equal "$(jq -c '[.delegations[] | .depth]' <<<"$output")" '[1]'
	run -0 --separate-stderr agent-snap show --format json "$(jq -r '.delegations[0].sessionId' <<<"$output")"
	assert_equal "$(jq -c 'has("delegations")' <<<"$output")" false
}

@test "--describe lists the delegation tools, the sub-agents and the options" {
	agent lead 'model: echo' 'agents: {agents: [researcher, {name: reviewer, description: Reviews drafts.}], toolPrefix: ask, maxDelegations: 2, historyLength: 4, artifactStrategy: session, timeout: 30s}'
	agent researcher 'description: Finds facts.' 'model: echo'
	agent reviewer 'model: echo'
	run -0 --separate-stderr agent-run lead --describe
	[ "$(jq -c '[.tools[] | [.name, .description]]' <<<"$output")" = '[["ask_researcher","Delegates a task to the \"researcher\" sub-agent."],["ask_reviewer","Reviews drafts."]]' ]
	[ "$(jq -c '.tools[0].inputSchema' <<<"$output")" = '{"type":"object","properties":{"task":{"type":"string","description":"A clear, self-contained description of the task to delegate."}},"required":["task"],"additionalProperties":false}' ]
	[ "$(jq -c '.tools[0].outputSchema.properties.artifacts.items.properties | keys' <<<"$output")" = '["name"]' ]
	[ "$(jq -c '[.agents[] | [.name, .tool, .path, .description]]' <<<"$output")" = '[["researcher","ask_researcher","agents/researcher.prompt","Finds facts."],["reviewer","ask_reviewer","agents/reviewer.prompt","Reviews drafts."]]' ]
	[ "$(jq -c .delegation <<<"$output")" = '{"toolPrefix":"ask","maxDelegations":2,"historyLength":4,"artifactStrategy":"session","maxDepth":3,"maxTotalDelegations":0,"timeout":"30s","async":false}' ]
}

@test "the model's request holds the <sub-agents> block in its system message" {
	agent lead 'model: script/lead.ndjson' 'agents: [researcher, {name: reviewer, description: Reviews drafts.}]'
	agent researcher 'description: Finds facts.' 'model: echo'
	agent reviewer 'model: echo'
	echo '{"text": "ok"}' >agents/lead.ndjson
	run -0 --separate-stderr agent-run lead --trace-file t.jsonl --trace-content -m hi
	block=$(jq -r '.. | objects | select(.key? == "genkit:input") | .value.stringValue' t.jsonl |
		jq -rs '[.[] | select(.messages?)][0].messages[0].content[1].text')
	expected='<sub-agents>
You can delegate tasks to specialized sub-agents using their delegation tools:
  - delegate_to_researcher: Finds facts.
  - delegate_to_reviewer: Reviews drafts.

When a task is better handled by a specialized agent, delegate it using the appropriate tool. Provide a clear, self-contained task description.
</sub-agents>'
	[ "$block" = "$expected" ]
}

@test "historyLength 2: the sub-session starts from exactly the last two user/model texts" {
	agent lead 'model: script/lead.ndjson' 'agents: {agents: [researcher], historyLength: 2}'
	agent researcher 'model: script/sub.ndjson'
	printf '%s\n' '{"when": {"user": "one"}, "text": "ok one"}' \
		'{"when": {"user": "two", "round": 0}, "toolRequests": [{"name": "delegate_to_researcher", "input": {"task": "the task"}}]}' \
		'{"when": {"user": "two", "round": 1}, "text": "done"}' >agents/lead.ndjson
	# the sub-agent's model says how many model messages its request held
	echo '{"when": {"models": 1}, "text": "saw one model message"}' >agents/sub.ndjson
	run -0 --separate-stderr agent-run lead -m one
	sid=$(last | jq -r .output.sessionId)
	run -0 --separate-stderr agent-run lead --session "$sid" -m two
	out=$(tool_out)
	[ "$(jq -r .response <<<"$out")" = "saw one model message" ]
	run -0 agent-snap --session "$(jq -r .sessionId <<<"$out")"
	[ "$(jq -c '[.state.messages[] | .role + ":" + .content[0].text]' <<<"$output")" = '["model:ok one","user:two","user:the task","model:saw one model message"]' ]
	# the row it started from holds the history alone, linked to the parent
	seed=$(jq -r .parentId <<<"$output")
	run -0 agent-snap get "$seed"
	[ "$(jq -c '[.state.messages[] | .role + ":" + .content[0].text]' <<<"$output")" = '["model:ok one","user:two"]' ]
}

@test "historyLength 0 (the default) sends the task alone" {
	agent lead 'model: script/lead.ndjson' 'agents: [researcher]'
	agent researcher 'model: script/sub.ndjson'
	printf '%s\n' '{"when": {"user": "one"}, "text": "ok one"}' \
		'{"when": {"user": "two", "round": 0}, "toolRequests": [{"name": "delegate_to_researcher", "input": {"task": "the task"}}]}' \
		'{"when": {"user": "two", "round": 1}, "text": "done"}' >agents/lead.ndjson
	echo '{"when": {"models": 0}, "text": "saw none"}' >agents/sub.ndjson
	run -0 --separate-stderr agent-run lead -m one
	run -0 --separate-stderr agent-run lead --session "$(last | jq -r .output.sessionId)" -m two
	[ "$(tool_out | jq -r .response)" = "saw none" ]
}

# A sub-agent whose tool writes an artifact.
artifact_agent() {
	agent researcher 'model: script/sub.ndjson' 'tools: [note]'
	printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "note", "input": {}}]}' \
		'{"when": {"round": 1}, "text": "wrote notes"}' >agents/sub.ndjson
	printf '#!/bin/sh\ncat >/dev/null\n' >agents/tools/note
	echo 'echo '"'"'{"artifact": {"name": "notes", "parts": [{"text": "line 1"}, {"text": "line 2"}]}}'"'" >>agents/tools/note
	echo 'echo '"'"'{"output": "ok"}'"'" >>agents/tools/note
	chmod +x agents/tools/note
	echo '{"description": "Write notes."}' >agents/tools/note.json
}

@test "artifactStrategy inline: the content in the response, the artifact in the parent's session" {
	agent lead 'model: script/lead.ndjson' 'agents: [researcher]'
	artifact_agent
	lead_script delegate_to_researcher '{"task": "take notes"}'
	run -0 --separate-stderr agent-run lead -m hi
	[ "$(tool_out | jq -c '[.response, .artifacts]')" = '["wrote notes",[{"name":"researcher_1/notes","content":"line 1\nline 2"}]]' ]
	[ "$(last | jq -cS '.output.artifacts')" = '[{"metadata":{"invocationId":"researcher_1","source":"researcher"},"name":"researcher_1/notes","parts":[{"text":"line 1"},{"text":"line 2"}]}]' ]
	# streamed as the parent's artifact chunk, and kept in its session
	[ "$(chunks | jq -r 'select(.artifact) | .artifact.name')" = researcher_1/notes ]
	run -0 agent-snap --session "$(last | jq -r .output.sessionId)"
	[ "$(jq -r '.state.artifacts[0].name' <<<"$output")" = researcher_1/notes ]
}

@test "artifactStrategy session: the response names the artifact, the session holds it" {
	agent lead 'model: script/lead.ndjson' 'agents: {agents: [researcher], artifactStrategy: session}'
	artifact_agent
	lead_script delegate_to_researcher '{"task": "take notes"}'
	run -0 --separate-stderr agent-run lead -m hi
	[ "$(tool_out | jq -c '.artifacts')" = '[{"name":"researcher_1/notes"}]' ]
	[ "$(last | jq -c '[.output.artifacts[] | .name, .parts]')" = '["researcher_1/notes",[{"text":"line 1"},{"text":"line 2"}]]' ]
}

@test "a failing sub-agent is an error the parent's model reads, and the turn goes on" {
	agent lead 'model: script/lead.ndjson' 'agents: [researcher]'
	agent researcher 'model: script/sub.ndjson'
	echo '{"error": {"status": "UNAVAILABLE", "message": "model melted"}}' >agents/sub.ndjson
	lead_script delegate_to_researcher '{"task": "t"}'
	run -0 --separate-stderr agent-run lead -m hi
	[ "$(tool_out | jq -r .response)" = 'Error calling agent "researcher": generate: model melted' ]
	[ "$(last | jq -r .output.message.content[0].text)" = done ]
	# a first turn that failed committed no row: there is nothing to link
	[ "$(tool_out | jq -c keys)" = '["response"]' ]
}

@test "a sub-agent that runs out of turns is an error with its reason" {
	agent lead 'model: script/lead.ndjson' 'agents: [researcher]'
	agent researcher 'model: script/sub.ndjson' 'maxTurns: 1' 'tools: [note]'
	echo '{"when": {}, "toolRequests": [{"name": "note", "input": {}}]}' >agents/sub.ndjson
	printf '#!/bin/sh\ncat >/dev/null\necho %s\n' "'{\"output\": 1}'" >agents/tools/note
	chmod +x agents/tools/note
	echo '{}' >agents/tools/note.json
	lead_script delegate_to_researcher '{"task": "t"}'
	run -0 --separate-stderr agent-run lead -m hi
	[ "$(tool_out | jq -r .response)" = 'Error calling agent "researcher": generate: exceeded maximum tool call iterations (1)' ]
	# it committed its turn aborted: the response links it
	run -0 agent-snap --session "$(tool_out | jq -r .sessionId)"
	[ "$(jq -r .status <<<"$output")" = aborted ]
}

@test "a sub-agent past the timeout is killed and answers an error" {
	agent lead 'model: script/lead.ndjson' 'agents: {agents: [researcher], timeout: 300ms}'
	agent researcher 'model: script/sub.ndjson'
	echo '{"chunks": ["a", "b"], "delay": "5s"}' >agents/sub.ndjson
	lead_script delegate_to_researcher '{"task": "t"}'
	SECONDS=0
	run -0 --separate-stderr agent-run lead -m hi
	[ "$(tool_out | jq -r .response)" = 'Error calling agent "researcher": timed out after 300ms' ]
	[ "$SECONDS" -lt 5 ]
}

@test "an interrupt inside a sub-agent is the parent's interrupt, and resumes through it" {
	agent lead 'model: script/lead.ndjson' 'agents: [researcher]'
	agent researcher 'model: script/sub.ndjson' 'tools: [ask]'
	printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "ask", "ref": "q1", "input": {"q": "which?"}}]}' \
		'{"when": {"round": 1}, "text": "answered"}' >agents/sub.ndjson
	printf '#!/bin/sh\ncat >/dev/null\necho %s\n' "'{\"interrupt\": {\"question\": \"which?\"}}'" >agents/tools/ask
	chmod +x agents/tools/ask
	echo '{}' >agents/tools/ask.json
	printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "delegate_to_researcher", "ref": "d1", "input": {"task": "t"}}]}' \
		'{"when": {"round": 1}, "text": "lead done"}' >agents/lead.ndjson
	run -6 --separate-stderr agent-run lead -m hi
	sid=$(last | jq -r .output.sessionId)
	meta=$(last | jq -c '.output.message.content[0].metadata.interrupt')
	sub=$(jq -r .sessionId <<<"$meta")
	[ "$(jq -c '[.agent, .interrupts]' <<<"$meta")" = '["researcher",[{"toolRequest":{"name":"ask","ref":"q1","input":{"q":"which?"}},"metadata":{"interrupt":{"question":"which?"}}}]]' ]
	# the sub-session is interrupted at the row the metadata names
	run -0 agent-snap --session "$sub"
	[ "$(jq -r '[.snapshotId, .finishReason] | join(" ")' <<<"$output")" = "$(jq -r .snapshotId <<<"$meta") interrupted" ]
	# the parent's restart carries the sub-agent's resume input
	jq -c '{resume: {restart: [{toolRequest: {name: "delegate_to_researcher", ref: "d1", input: {task: "t"}},
		metadata: {resumed: {snapshotId: .snapshotId, resume: {respond: [{toolResponse: {name: "ask", ref: "q1", output: "blue"}}]}}}}]}}' \
		<<<"$meta" >resume.ndjson
	run -0 --separate-stderr agent-run lead --session "$sid" <resume.ndjson
	[ "$(last | jq -r .output.message.content[0].text)" = "lead done" ]
	[ "$(tool_out | jq -c '[.response, .sessionId]')" = "[\"answered\",\"$sub\"]" ]
	run -0 agent-snap --session "$sub"
	[ "$(jq -c '[.state.messages[] | .content[0] | .text // .toolRequest.name // .toolResponse.output]' <<<"$output")" = '["t","ask","blue","answered"]' ]
}

@test "a restart of a delegation without the sub-agent's resume input is an error for the model" {
	agent lead 'model: script/lead.ndjson' 'agents: [researcher]'
	agent researcher 'model: script/sub.ndjson' 'tools: [ask]'
	echo '{"when": {"round": 0}, "toolRequests": [{"name": "ask", "ref": "q1", "input": {}}]}' >agents/sub.ndjson
	printf '#!/bin/sh\ncat >/dev/null\necho %s\n' "'{\"interrupt\": true}'" >agents/tools/ask
	chmod +x agents/tools/ask
	echo '{}' >agents/tools/ask.json
	lead_script delegate_to_researcher '{"task": "t"}'
	run -6 --separate-stderr agent-run lead -m hi
	sid=$(last | jq -r .output.sessionId)
	echo '{"resume": {"restart": [{"toolRequest": {"name": "delegate_to_researcher", "ref": "r1", "input": {"task": "t"}}, "metadata": {"resumed": {"x": 1}}}]}}' >resume.ndjson
	run -0 --separate-stderr agent-run lead --session "$sid" <resume.ndjson
	[ "$(tool_out | jq -r .response)" = 'Error calling agent "researcher": a restarted delegation needs metadata.resumed {"snapshotId": the interrupt'"'"'s, "resume": {"respond" or "restart": [...]}} (the sub-agent'"'"'s resume input)' ]
}

@test "client-managed: an interrupt inside a sub-agent comes back as Genkit's text" {
	agent lead 'model: script/lead.ndjson' 'agents: [researcher]'
	agent researcher 'model: script/sub.ndjson' 'tools: [ask]'
	echo '{"toolRequests": [{"name": "ask", "input": {}}]}' >agents/sub.ndjson
	printf '#!/bin/sh\ncat >/dev/null\necho %s\n' "'{\"interrupt\": {\"question\": \"which?\"}}'" >agents/tools/ask
	chmod +x agents/tools/ask
	echo '{}' >agents/tools/ask.json
	lead_script delegate_to_researcher '{"task": "t"}'
	run -0 --separate-stderr agent-run --no-store lead -m hi
	[ "$(tool_out | jq -r .response)" = 'Sub-agent "researcher" interrupted for additional input and could not complete the task. Interactive sub-agent interrupts are not currently supported; try delegating a more self-contained task.' ]
}

@test "maxDelegations: the call past the limit answers Genkit's words, nothing runs" {
	agent lead 'model: script/lead.ndjson' 'agents: {agents: [researcher], maxDelegations: 1}'
	agent researcher 'model: echo'
	printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "delegate_to_researcher", "input": {"task": "a"}}, {"name": "delegate_to_researcher", "input": {"task": "b"}}]}' \
		'{"when": {"round": 1}, "text": "done"}' >agents/lead.ndjson
	run -0 --separate-stderr agent-run lead -m hi
	[ "$(chunks | jq -c 'select(.modelChunk.role == "tool") | [.modelChunk.content[].toolResponse.output.response]')" = '["a","Delegation limit reached (1). Complete the task using information already gathered."]' ]
	run -0 agent-snap sessions
	[ "$(jq -s length <<<"$output")" -eq 2 ]
}

@test "maxTotalDelegations bounds a whole run" {
	agent lead 'model: script/lead.ndjson' 'agents: {agents: [researcher], maxTotalDelegations: 1}'
	agent researcher 'model: echo'
	printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "delegate_to_researcher", "input": {"task": "a"}}]}' \
		'{"when": {"round": 1}, "text": "done"}' >agents/lead.ndjson
	run -0 --separate-stderr agent-run lead -m one -m two
	[ "$(chunks | jq -c 'select(.modelChunk.role == "tool") | .modelChunk.content[0].toolResponse.output.response')" = '"a"
"Delegation limit reached (1 in this run). Complete the task using information already gathered."' ]
}

@test "a cycle is refused when the agent is loaded, naming it" {
	agent a 'model: echo' 'agents: [b]'
	agent b 'model: echo' 'agents: [c]'
	agent c 'model: echo' 'agents: [a]'
	run -101 --separate-stderr agent-run a -m hi
	[ "$stderr" = 'agent-run: agents/a.prompt: agents: delegation cycle: a -> b -> c -> a' ]
	[ "$output" = '{"error":{"status":"INVALID_ARGUMENT","message":"agents/a.prompt: agents: delegation cycle: a -> b -> c -> a"}}' ]
	run -101 --separate-stderr agent-run b --describe
	[ "$stderr" = 'agent-run: agents/b.prompt: agents: delegation cycle: b -> c -> a -> b' ]
}

@test "depth: three levels below run, a fourth is refused; maxDepth raises it" {
	agent top 'model: echo' 'agents: [l1]'
	agent l1 'model: script/l1.ndjson' 'agents: [l2]'
	agent l2 'model: script/l2.ndjson' 'agents: [l3]'
	agent l3 'model: echo'
	echo '{"when": {"round": 0}, "toolRequests": [{"name": "delegate_to_l2", "input": {"task": "go"}}]}' >agents/l1.ndjson
	echo '{"when": {"round": 1}, "text": "l1 done"}' >>agents/l1.ndjson
	echo '{"when": {"round": 0}, "toolRequests": [{"name": "delegate_to_l3", "input": {"task": "go"}}]}' >agents/l2.ndjson
	echo '{"when": {"round": 1}, "text": "l2 done"}' >>agents/l2.ndjson
	run -0 --separate-stderr agent-run l1 -m hi
	[ "$(last | jq -r .output.message.content[0].text)" = "l1 done" ]
	run -0 --separate-stderr agent-run top --describe
	agent l3 'model: echo' 'agents: [l4]'
	agent l4 'model: echo'
	run -101 --separate-stderr agent-run top --describe
	[ "$stderr" = 'agent-run: agents/top.prompt: agents: delegation deeper than maxDepth 3: top -> l1 -> l2 -> l3 -> l4' ]
	agent top 'model: echo' 'agents: {agents: [l1], maxDepth: 4}'
	run -0 --separate-stderr agent-run top --describe
	# a sub-agent knows its depth: l2 run as a delegation at depth 2 has one level left
	AGENTKIT_DELEGATION_DEPTH=2 run -101 --separate-stderr agent-run l2 --describe
	[ "$stderr" = 'agent-run: agents/l2.prompt: agents: delegation deeper than maxDepth 3: l2 -> l3 -> l4' ]
}

@test "bad agents values are refused with the file named" {
	agent lead 'model: echo' 'agents: []'
	run -101 --separate-stderr agent-run lead --describe
	[ "$stderr" = "agent-run: agents/lead.prompt: agents: requires at least one agent (a list of names or {name, description} objects)" ]
	agent lead 'model: echo' 'agents: {agents: [x], artifactStrategy: both}'
	run -101 --separate-stderr agent-run lead --describe
	[ "$stderr" = "agent-run: agents/lead.prompt: agents: artifactStrategy must be inline or session" ]
	agent lead 'model: echo' 'agents: {agents: [x], maxturns: 1}'
	run -101 --separate-stderr agent-run lead --describe
	[[ $stderr == "agent-run: agents/lead.prompt: agents: unknown option 'maxturns' "* ]]
	agent lead 'model: echo' 'agents: [nosuch]'
	run -4 --separate-stderr agent-run lead --describe
	[[ $stderr == "agent-run: agents/lead.prompt: agents: agent 'nosuch' not found (searched: agents, "* ]]
}

@test "toolPrefix '' names the tools after the agents" {
	agent lead 'model: script/lead.ndjson' "agents: {agents: [researcher], toolPrefix: ''}"
	agent researcher 'model: echo'
	lead_script researcher '{"task": "bare"}'
	run -0 --separate-stderr agent-run lead -m hi
	[ "$(tool_out | jq -r .response)" = bare ]
}

@test "text mode shows delegate lines" {
	agent lead 'model: script/lead.ndjson' 'agents: [researcher]'
	agent researcher 'model: echo'
	lead_script delegate_to_researcher '{"task": "find facts"}'
	run -0 --separate-stderr agent-run lead --format text -m hi
	[ "$output" = done ]
	[ "$(sed -n 1,2p <<<"$stderr")" = 'delegate researcher {"task":"find facts"}
delegate researcher ok "find facts"' ]
}

@test "client-managed: the sub-agent runs without a store, history in its init state" {
	agent lead 'model: script/lead.ndjson' 'agents: {agents: [researcher], historyLength: 1}'
	agent researcher 'model: script/sub.ndjson'
	lead_script delegate_to_researcher '{"task": "t"}'
	echo '{"when": {"user": "t"}, "text": "seen"}' >agents/sub.ndjson
	run -0 --separate-stderr agent-run --no-store lead -m hi
	[ "$(tool_out | jq -r .response)" = seen ]
	[ "$(tool_out | jq -c keys)" = '["response"]' ]
	[ ! -e "$AGENTKIT_STORE" ] || is_pg
}

@test "stopping the parent stops the sub-agent with it" {
	agent lead 'model: script/lead.ndjson' 'agents: [researcher]'
	agent researcher 'model: script/sub.ndjson'
	echo '{"chunks": ["a", "b", "c"], "delay": "1s"}' >agents/sub.ndjson
	lead_script delegate_to_researcher '{"task": "t"}'
	agent-run lead -m hi >out.ndjson 2>err.txt &
	pid=$!
	for _ in $(seq 100); do
		pgrep -f "agents/researcher.prompt" >/dev/null && break
		sleep 0.05
	done
	sleep 0.3
	SECONDS=0
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 2 ]
	[ "$SECONDS" -lt 2 ]
	[ "$(tail -n 1 out.ndjson | jq -r .output.finishReason)" = aborted ]
	# the sub-agent got the stop (SIGTERM) and is gone
	run -1 pgrep -f "agents/researcher.prompt"
}

# Background delegation (Go's Agents.Async): the lead launches in turn
# "go", then its later turns use the task tools on the ID it was given.
bg_setup() {
	export AGENTKIT_HEARTBEAT_INTERVAL=200ms AGENTKIT_HEARTBEAT_TIMEOUT=15s
	agent lead 'model: script/lead.ndjson' 'agents: {agents: [researcher], async: true}'
	agent researcher 'model: script/sub.ndjson'
	printf '%s\n' '{"when": {"user": "go", "round": 0}, "toolRequests": [{"name": "delegate_to_researcher", "input": {"task": "slow task", "background": true}}]}' \
		'{"when": {"user": "go", "round": 1}, "text": "started"}' >agents/lead.ndjson
	echo "{\"chunks\": [\"fa\", \"cts\"], \"delay\": \"$1\"}" >agents/sub.ndjson
	run -0 --separate-stderr agent-run lead -m go
	task=$(tool_out | jq -r .taskId)
	sid=$(last | jq -r .output.sessionId)
}

# then_call TEXT TOOL INPUT: the lead's reply to TEXT calls TOOL once.
then_call() {
	printf '%s\n' "{\"when\": {\"user\": \"$1\", \"round\": 0}, \"toolRequests\": [{\"name\": \"$2\", \"input\": $3}]}" \
		"{\"when\": {\"user\": \"$1\", \"round\": 1}, \"text\": \"ok\"}" >>agents/lead.ndjson
}

@test "background: the launch answers a task ID at once, the wait gets the result" {
	bg_setup 1s
	snap=${task#researcher:}
	[ "$(tool_out | jq -r .response)" = "Background task $task started for agent \"researcher\". Collect the result with check_background_tasks or wait_for_background_tasks." ]
	[ "$(tool_out | jq -c '[.status, .snapshotId == "'"$snap"'", (.sessionId | length)]')" = '["pending",true,36]' ]
	sub=$(tool_out | jq -r .sessionId)
	# it runs detached, on its own row
	run -0 agent-snap get "$snap"
	[ "$(jq -r .status <<<"$output")" = pending ]
	then_call wait wait_for_background_tasks "{\"taskIds\": [\"$task\"], \"timeoutSeconds\": 30}"
	run -0 --separate-stderr agent-run lead --session "$sid" -m wait
	[ "$(tool_out | jq -c .)" = "{\"tasks\":[{\"taskId\":\"$task\",\"agent\":\"researcher\",\"status\":\"completed\",\"response\":\"facts\"}]}" ]
	# the finalized row names the parent
	run -0 agent-snap export "$sub"
	[ "$(jq -r .agentkit.delegation.parentSessionId <<<"$output")" = "$sid" ]
	then_call check check_background_tasks "{\"taskIds\": [\"$task\", \"nobody:x\", \"researcher:nosuch\"]}"
	run -0 --separate-stderr agent-run lead --session "$sid" -m check
	[ "$(tool_out | jq -c '[.tasks[] | [.status, .response // .error]]')" = '[["completed","facts"],["unknown","task ID \"nobody:x\" does not match any configured agent (expected \"<agent>:<snapshotId>\")"],["unknown","No record of this task exists (snapshot '"'nosuch'"' not found). Delegate the task again if the result is still needed."]]' ]
	[ "$(agent-run lead --describe | jq -c '[.tools[].name]')" = '["delegate_to_researcher","check_background_tasks","wait_for_background_tasks","abort_background_tasks"]' ]
}

@test "background: a bounded wait times out with the task pending, then the abort stops it" {
	bg_setup 3s
	then_call wait wait_for_background_tasks "{\"taskIds\": [\"$task\"], \"timeoutSeconds\": 1}"
	SECONDS=0
	run -0 --separate-stderr agent-run lead --session "$sid" -m wait
	[ "$SECONDS" -lt 3 ]
	[ "$(tool_out | jq -c .)" = "{\"tasks\":[{\"taskId\":\"$task\",\"agent\":\"researcher\",\"status\":\"pending\"}],\"timedOut\":true,\"note\":\"Stopped waiting; the pending tasks are still running. Check them again later.\"}" ]
	then_call stop abort_background_tasks "{\"taskIds\": [\"$task\"]}"
	run -0 --separate-stderr agent-run lead --session "$sid" -m stop
	[ "$(tool_out | jq -c '.tasks[0] | [.previousStatus, .status]')" = '["pending","aborting"]' ]
	run -2 agent-wait --timeout 10s "${task#researcher:}"
	then_call check check_background_tasks "{\"taskIds\": [\"$task\"]}"
	run -0 --separate-stderr agent-run lead --session "$sid" -m check
	[ "$(tool_out | jq -c '.tasks[0] | [.status, .error]')" = '["aborted","The task was aborted before it finished."]' ]
}

@test "background: an aborted parent aborts the tasks it started" {
	export AGENTKIT_HEARTBEAT_INTERVAL=200ms AGENTKIT_HEARTBEAT_TIMEOUT=15s
	agent lead 'model: script/lead.ndjson' 'agents: {agents: [researcher], async: true}'
	agent researcher 'model: script/sub.ndjson'
	printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "delegate_to_researcher", "input": {"task": "t", "background": true}}]}' \
		'{"when": {"round": 1}, "chunks": ["thinking ", "on"], "delay": "3s"}' >agents/lead.ndjson
	echo '{"chunks": ["a", "b", "c"], "delay": "2s"}' >agents/sub.ndjson
	agent-run lead -m hi >out.ndjson 2>err.txt &
	pid=$!
	for _ in $(seq 100); do
		grep -q toolResponse out.ndjson && break
		sleep 0.05
	done
	task=$(grep toolResponse out.ndjson | jq -r '.modelChunk.content[0].toolResponse.output.taskId')
	[ "${task%%:*}" = researcher ]
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 2 ]
	run -2 agent-wait --timeout 10s "${task#researcher:}"
	[ "$(jq -r .status <<<"$output")" = aborted ]
}

@test "background without a store is Go's refusal, and the task tools say why" {
	agent lead 'model: script/lead.ndjson' 'agents: {agents: [researcher], async: true}'
	agent researcher 'model: echo'
	lead_script delegate_to_researcher '{"task": "t", "background": true}'
	run -0 --separate-stderr agent-run --no-store lead -m hi
	[ "$(tool_out | jq -r .response)" = 'Error calling agent "researcher": this agent lacks a session store that supports background work, so it cannot run tasks in the background. Delegate to it without "background" instead.' ]
}

@test "background: agent-abort of a detached parent aborts the tasks its worker started" {
	export AGENTKIT_HEARTBEAT_INTERVAL=200ms AGENTKIT_HEARTBEAT_TIMEOUT=15s
	agent lead 'model: script/lead.ndjson' 'agents: {agents: [researcher], async: true}'
	agent researcher 'model: script/sub.ndjson'
	printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "delegate_to_researcher", "input": {"task": "t", "background": true}}]}' \
		'{"when": {"round": 1}, "chunks": ["thinking ", "on"], "delay": "3s"}' >agents/lead.ndjson
	echo '{"chunks": ["a", "b", "c"], "delay": "2s"}' >agents/sub.ndjson
	run -0 --separate-stderr agent-run lead --detach -m hi
	parent=$(last | jq -r .output.snapshotId)
	# the task's session appears once its worker wrote its pending row
	# (a pending row names no agent yet: it is the session that is not the parent's)
	for _ in $(seq 100); do
		child=$(agent-snap sessions 2>/dev/null | jq -r "select(.snapshotId != \"$parent\") | .snapshotId")
		[ -n "$child" ] && break
		sleep 0.05
	done
	[ -n "$child" ]
	run -0 agent-snap get "$child"
	[ "$(jq -r .status <<<"$output")" = pending ]
	run -0 agent-abort "$parent"
	run -2 agent-wait --timeout 10s "$parent"
	run -2 agent-wait --timeout 10s "$child"
	[ "$(jq -r .status <<<"$output")" = aborted ]
}

@test "traces: the sub-agent's spans nest under the delegation's tool span" {
	unset OTEL_EXPORTER_OTLP_TRACES_ENDPOINT OTEL_SDK_DISABLED OTEL_TRACES_EXPORTER TRACEPARENT
	export OTEL_EXPORTER_OTLP_PROTOCOL=http/json AGENTKIT_TRACE=1
	agent lead 'model: script/lead.ndjson' 'agents: [researcher]'
	agent researcher 'model: echo'
	lead_script delegate_to_researcher '{"task": "find facts"}'
	log=$BATS_TEST_TMPDIR/otlp.ndjson
	"$TOP/scripts/otlp-receiver" --port-file port --log "$log" --idle 20 3>&- &
	recv=$!
	for _ in $(seq 1 200); do
		[ -s port ] && break
		sleep 0.025
	done
	OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$(cat port)" run -0 --separate-stderr agent-run lead -m hi
	kill "$recv"
	spans=$(jq -c '.body.resourceSpans[].scopeSpans[].spans[]' "$log")
	tool=$(jq -c 'select(.name == "delegate_to_researcher")' <<<"$spans")
	sub=$(jq -c 'select(.name == "researcher")' <<<"$spans")
	[ "$(jq -r .parentSpanId <<<"$sub")" = "$(jq -r .spanId <<<"$tool")" ]
	[ "$(jq -r .traceId <<<"$sub")" = "$(jq -r .traceId <<<"$tool")" ]
	[ "$(jq -r '[.attributes[] | select(.key == "agentkit.delegate.agent") | .value.stringValue][0]' <<<"$tool")" = researcher ]
}

@test "background with queue: the task is a queued run that any agent-worker takes" {
	export AGENTKIT_HEARTBEAT_INTERVAL=200ms AGENTKIT_HEARTBEAT_TIMEOUT=15s
	agent lead 'model: script/lead.ndjson' 'agents: {agents: [researcher], async: true, queue: research}'
	agent researcher 'model: script/sub.ndjson'
	printf '%s\n' '{"when": {"user": "go", "round": 0}, "toolRequests": [{"name": "delegate_to_researcher", "input": {"task": "slow task", "background": true}}]}' \
		'{"when": {"user": "go", "round": 1}, "text": "started"}' >agents/lead.ndjson
	echo '{"chunks": ["fa", "cts"]}' >agents/sub.ndjson
	run -0 --separate-stderr agent-run lead -m go
	task=$(tool_out | jq -r .taskId)
	sid=$(last | jq -r .output.sessionId)
	# queued, not running: no worker yet
	run -0 agent-snap runs
	assert_equal "$(jq -r '.queue + " " + .agent + " " + .status + " " + .snapshotId' <<<"$output")" \
		"research researcher queued ${task#researcher:}"
	run -0 timeout 30 agent-worker --queue research --once
	then_call wait wait_for_background_tasks "{\"taskIds\": [\"$task\"], \"timeoutSeconds\": 30}"
	run -0 --separate-stderr agent-run lead --session "$sid" -m wait
	[ "$(tool_out | jq -c .)" = "{\"tasks\":[{\"taskId\":\"$task\",\"agent\":\"researcher\",\"status\":\"completed\",\"response\":\"facts\"}]}" ]
	# a bad queue name is refused when the lead loads
	agent lead 'model: script/lead.ndjson' 'agents: {agents: [researcher], async: true, queue: ""}'
	run -101 --separate-stderr agent-run lead -m go
	[[ "$stderr" == *"agents: queue must be a queue's name (1 to 128 bytes)"* ]]
}

# A sub-agent with a tool, note, that does nothing but answer ok.
note_tool() {
	printf '#!/bin/sh\ncat >/dev/null\necho '"'"'{"output": "ok"}'"'"'\n' >agents/tools/note
	chmod +x agents/tools/note
	echo '{"description": "Write notes."}' >agents/tools/note.json
}

@test "usage: a sub-agent's usage is its parent's, in turnEnd, the output and the state; its share is the sub-session's" {
	agent lead 'model: script/lead.ndjson' 'agents: [researcher]'
	agent researcher 'model: script/sub.ndjson'
	printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "delegate_to_researcher", "ref": "r1", "input": {"task": "t"}}], "usage": {"inputTokens": 10, "outputTokens": 2}}' \
		'{"when": {"round": 1}, "text": "done", "usage": {"inputTokens": 20, "outputTokens": 3}}' >agents/lead.ndjson
	echo '{"text": "facts", "usage": {"inputTokens": 5, "outputTokens": 1}}' >agents/sub.ndjson
	run -0 --separate-stderr agent-run lead -m hi
	sid=$(last | jq -r .output.sessionId)
	sub=$(tool_out | jq -r .sessionId)
	assert_equal "$(chunks | jq -c 'select(.turnEnd) | .turnEnd.usage')" '{"inputTokens":35,"outputTokens":6,"totalTokens":41}'
	assert_equal "$(last | jq -c .output.usage.totalTokens)" 41
	assert_equal "$(agent-snap --session "$sid" | jq -c .state.usage.totalTokens)" 41
	# the tree: the parent's row holds the total, the sub-session's row its share
	run -0 agent-snap log "$sid"
	assert_equal "$(jq -c '[.sessionId == "'"$sub"'", .usage.totalTokens]' <<<"$output")" '[false,41]
[true,6]'
	# a later turn adds to the session's total
	run -0 --separate-stderr agent-run lead --session "$sid" -m again
	assert_equal "$(last | jq -c .output.usage.totalTokens)" 41
	assert_equal "$(agent-snap --session "$sid" | jq -c .state.usage.totalTokens)" 82
}

@test "budget: the parent's counts its sub-agents' tokens; a sub-agent gets what is left and stops there" {
	note_tool
	agent lead 'model: script/lead.ndjson' 'agents: [researcher]'
	agent researcher 'model: script/sub.ndjson' 'tools: [note]' 'maxTurns: 50'
	printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "delegate_to_researcher", "ref": "r1", "input": {"task": "t"}}], "usage": {"inputTokens": 10, "outputTokens": 2}}' \
		'{"when": {"round": 1}, "text": "never asked", "usage": {"inputTokens": 1, "outputTokens": 1}}' >agents/lead.ndjson
	# a runaway: it calls its tool for ever, 10 tokens a call
	echo '{"fallback": true, "toolRequests": [{"name": "note", "input": {}}], "usage": {"inputTokens": 8, "outputTokens": 2}}' >agents/sub.ndjson
	run -2 --separate-stderr agent-run lead -m hi --max-tokens-total 30
	# 18 left when it started: it stopped after 20, as a tool error for the parent
	assert_equal "$(tool_out | jq -r .response)" 'Error calling agent "researcher": generate: usage budget spent: 20 of 18 totalTokens (what the delegating agent had left)'
	# 12 + 20: the parent's budget is spent, no model call follows the round
	assert_equal "$stderr" 'agent-run: generate: usage budget spent: 32 of 30 totalTokens (maxUsage, --max-tokens-total)'
	assert_equal "$(last | jq -c '[.output.finishReason, .output.error.status, .output.usage.totalTokens]')" '["aborted","RESOURCE_EXHAUSTED",32]'
	sub=$(tool_out | jq -r .sessionId)
	run -0 agent-snap --session "$sub"
	assert_equal "$(jq -c '[.status, .state.usage.totalTokens]' <<<"$output")" '["aborted",20]'
	# the sub-agent's own budget, when lower, is the one it meets
	agent researcher 'model: script/sub.ndjson' 'tools: [note]' 'maxTurns: 50' 'maxUsage: 5'
	run -0 --separate-stderr agent-run lead -m hi --max-tokens-total 1000
	assert_equal "$(tool_out | jq -r .response)" 'Error calling agent "researcher": generate: usage budget spent: 10 of 5 totalTokens (maxUsage, --max-tokens-total)'
	assert_equal "$(last | jq -c .output.usage.totalTokens)" 24
}

# serve_remote: agent-serve on a free loopback port, on a store of its own,
# serving remote/ (a researcher on a script model); $URL, $SPID.
serve_remote() {
	mkdir -p remote
	printf -- '---\nmodel: script/%s/remote/sub.ndjson\n---\n{{role "system"}}You are remote.\n{{history}}\n' \
		"$PWD" >remote/researcher.prompt
	AGENTKIT_STORE=$PWD/remote-store agent-serve --listen 127.0.0.1:0 --agents remote 2>serve.log &
	SPID=$!
	for _ in $(seq 100); do grep -q 'listening on' serve.log && break; sleep 0.05; done
	URL=$(sed -n 's/^agent-serve: listening on //p' serve.log)
	[ -n "$URL" ]
}

@test "url: a remote sub-agent: its reply, usage and sub-session come from the server; its failures are tool errors" {
	serve_remote
	agent lead 'model: script/lead.ndjson' 'agents: {agents: [researcher], historyLength: 2, async: true}'
	agent researcher "url: $URL/researcher"
	lead_script delegate_to_researcher '{"task": "find facts"}'
	echo '{"text": "remote facts", "usage": {"inputTokens": 4, "outputTokens": 2}}' >remote/sub.ndjson
	run -0 --separate-stderr agent-run lead -m hi
	out=$(tool_out)
	assert_equal "$(jq -c '[.response, (.sessionId | length), (.snapshotId | length)]' <<<"$out")" '["remote facts",36,36]'
	assert_equal "$(chunks | jq -c 'select(.turnEnd) | .turnEnd.usage.totalTokens')" 6
	# the sub-session is the server's, and it got the task alone (no history:
	# a remote agent keeps its own sessions)
	sub=$(jq -r .sessionId <<<"$out")
	run -0 agent-snap --url "$URL/researcher" --session "$sub"
	assert_equal "$(jq -c '[.snapshotId, [.state.messages[] | .role + ":" + .content[0].text]]' <<<"$output")" \
		"[\"$(jq -r .snapshotId <<<"$out")\",[\"user:find facts\",\"model:remote facts\"]]"
	run -4 agent-snap --session "$sub"
	# the remote agent fails: the parent's model reads the server's reason
	echo '{"error": {"status": "UNAVAILABLE", "message": "model melted"}}' >remote/sub.ndjson
	run -0 --separate-stderr agent-run lead -m hi
	assert_equal "$(tool_out | jq -c .)" '{"response":"Error calling agent \"researcher\": generate: model melted"}'
	assert_equal "$(last | jq -r .output.message.content[0].text)" done
	# background: refused, the task tools could not follow the server's rows
	lead_script delegate_to_researcher '{"task": "t", "background": true}'
	run -0 --separate-stderr agent-run lead -m hi
	assert_equal "$(tool_out | jq -r .response)" 'Error calling agent "researcher": it is a remote agent (url:), which cannot run in the background. Delegate to it without "background" instead.'
	# the server gone: an error that names it, and the parent goes on
	kill "$SPID"
	wait "$SPID" || true
	SPID=
	lead_script delegate_to_researcher '{"task": "find facts"}'
	run -0 --separate-stderr agent-run lead -m hi
	[[ "$(tool_out | jq -r .response)" == "Error calling agent \"researcher\": the agent server: $URL/researcher: "*"Couldn't connect to server" ]]
	assert_equal "$(last | jq -r .output.message.content[0].text)" done
}

# A detached lead that launches a background task in turn "go", then
# calls gate (a tool that waits for the file "open"), then waits for its
# task: detached_lead SUB-REPLY starts it; $parent is its snapshot, $task
# the task's ID once open_gate has written the wait into the script.
detached_lead() {
	export AGENTKIT_HEARTBEAT_INTERVAL=200ms AGENTKIT_HEARTBEAT_TIMEOUT=15s
	agent lead 'model: script/lead.ndjson' 'tools: [gate]' 'agents: {agents: [researcher], async: true}'
	agent researcher 'model: script/sub.ndjson'
	printf '#!/bin/sh\ncat >/dev/null\nfor i in $(seq 600); do [ -e %s/open ] && break; sleep 0.05; done\necho '"'"'{"output": "open"}'"'"'\n' \
		"$PWD" >agents/tools/gate
	chmod +x agents/tools/gate
	echo '{"description": "Waits for the gate to open."}' >agents/tools/gate.json
	printf '%s\n' '{"when": {"user": "go", "round": 0}, "toolRequests": [{"name": "delegate_to_researcher", "input": {"task": "t", "background": true}}]}' \
		'{"when": {"user": "go", "round": 1}, "toolRequests": [{"name": "gate", "input": {}}]}' \
		'{"when": {"user": "go", "round": 3}, "text": "all done"}' >agents/lead.ndjson
	echo "$1" >agents/sub.ndjson
	run -0 --separate-stderr agent-run lead --detach -m go
	parent=$(last | jq -r .output.snapshotId)
	psid=$(last | jq -r .output.sessionId)
}

# The task's ID (its pending row is the one that is not the parent's), the
# wait for it put in the lead's script, and the gate opened.
open_gate() {
	local child=
	for _ in $(seq 200); do
		child=$(agent-snap sessions 2>/dev/null | jq -r "select(.snapshotId != \"$parent\") | .snapshotId")
		[ -n "$child" ] && break
		sleep 0.05
	done
	[ -n "$child" ]
	task=researcher:$child
	echo "{\"when\": {\"user\": \"go\", \"round\": 2}, \"toolRequests\": [{\"name\": \"wait_for_background_tasks\", \"input\": {\"taskIds\": [\"$task\"], \"timeoutSeconds\": 60}}]}" >>agents/lead.ndjson
	touch open
}

@test "background: a detached parent waits for its own tasks, and agent-wait on it gets their results and usage" {
	detached_lead '{"chunks": ["fa", "cts"], "delay": "500ms", "usage": {"inputTokens": 5, "outputTokens": 1}}'
	open_gate
	run -0 --separate-stderr agent-wait --timeout 60s "$parent"
	assert_equal "$(jq -c '[.status, .finishReason, .state.messages[-1].content[0].text]' <<<"$output")" '["completed","stop","all done"]'
	# the wait's answer, in the parent's history: the task completed
	assert_equal "$(jq -c '[.state.messages[] | .content[] | .toolResponse | select(.name == "wait_for_background_tasks") | .output]' <<<"$output")" \
		"[{\"tasks\":[{\"taskId\":\"$task\",\"agent\":\"researcher\",\"status\":\"completed\",\"response\":\"facts\"}]}]"
	# collected, its usage is the parent's: the detached run's row and the state
	assert_equal "$(jq -c .state.usage.totalTokens <<<"$output")" 6
	run -0 agent-snap log "$psid"
	assert_equal "$(jq -c 'select(.sessionId == "'"$psid"'") | .usage.totalTokens' <<<"$output")" 6
	# a later check reports it again, but does not count it again
	then_call check check_background_tasks "{\"taskIds\": [\"$task\"]}"
	run -0 --separate-stderr agent-run lead --session "$psid" -m check
	assert_equal "$(tool_out | jq -r '.tasks[0].status')" completed
	assert_equal "$(last | jq -c .output.usage)" null
	assert_equal "$(agent-snap --session "$psid" | jq -c .state.usage.totalTokens)" 6
}

@test "background: agent-abort of a detached parent waiting for its tasks aborts them" {
	detached_lead '{"chunks": ["a", "b", "c"], "delay": "3s"}'
	open_gate
	run -0 agent-abort "$parent"
	run -2 --separate-stderr agent-wait --timeout 30s "$parent"
	assert_equal "$(jq -r .status <<<"$output")" aborted
	run -2 --separate-stderr agent-wait --timeout 30s "${task#researcher:}"
	assert_equal "$(jq -r .status <<<"$output")" aborted
}
