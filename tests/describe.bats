#!/usr/bin/env bats
# Agent descriptors (agent-run NAME --describe, AgentMetadata) and the agent
# list (agent-run --list).

load test_helper

setup() {
	common_setup
	requires jq
	mkdir -p agents/tools
	cat >agents/tools/addTask.json <<-'EOF'
	{"name": "addTask", "description": "Add a task.",
	 "inputSchema": {"type": "object", "properties": {"title": {"type": "string"}}},
	 "outputSchema": {"type": "string"}}
	EOF
	printf '#!/bin/sh\necho "{\\"output\\": \\"ok\\"}"\n' >agents/tools/addTask
	chmod +x agents/tools/addTask
}

@test "describe: name, description, model, tools with schemas, metadata.agent (server, abortable, stateSchema)" {
	cat >agents/tasks.prompt <<-'EOF'
	---
	model: echo
	description: Keeps a task list.
	tools: [addTask]
	stateSchema:
	  type: object
	  properties:
	    tasks: {type: array}
	---
	{{role "system"}}Tasks.
	EOF
	run -0 --separate-stderr agent-run tasks --describe
	[ "$output" = '{"name":"tasks","description":"Keeps a task list.","model":"echo","tools":[{"name":"addTask","description":"Add a task.","inputSchema":{"type":"object","properties":{"title":{"type":"string"}}},"outputSchema":{"type":"string"}}],"maxTurns":5,"metadata":{"description":"Keeps a task list.","agent":{"stateManagement":"server","abortable":true,"stateSchema":{"type":"object","properties":{"tasks":{"type":"array"}}}}}}' ]
	[ "$stderr" = "" ]
}

@test "describe: client-managed is not abortable; no schema, no description" {
	printf -- '---\nmodel: echo\n---\nhi\n' >agents/plain.prompt
	run -0 --separate-stderr agent-run plain --no-store --describe
	[ "$output" = '{"name":"plain","model":"echo","tools":[],"maxTurns":5,"metadata":{"agent":{"stateManagement":"client"}}}' ]
	run -0 --separate-stderr agent-run --model echo --max-turns 3 --describe
	[ "$output" = '{"name":"inline","model":"echo","tools":[],"maxTurns":3,"metadata":{"agent":{"stateManagement":"server","abortable":true}}}' ]
}

@test "describe: the output the model must give, from the front matter or the command line" {
	printf -- '---\nmodel: echo\noutput:\n  schema: {type: object, properties: {ok: {type: boolean}}}\n---\nhi\n' >agents/judge.prompt
	run -0 --separate-stderr agent-run judge --describe
	assert_equal "$(jq -c .output <<<"$output")" '{"format":"json","schema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}'
	run -0 --separate-stderr agent-run --model echo --json --describe
	assert_equal "$(jq -c .output <<<"$output")" '{"format":"json"}'
	run -0 --separate-stderr agent-run --model echo --describe
	assert_equal "$(jq -c 'has("output")' <<<"$output")" false
}

@test "describe: the state schema from a file beside the prompt, or state.schema" {
	echo '{"type":"object","properties":{"counter":{"type":"integer"}}}' >agents/counter.schema.json
	printf -- '---\nmodel: echo\nstateSchema: counter.schema.json\n---\nhi\n' >agents/c.prompt
	run -0 --separate-stderr agent-run c --describe
	[ "$(printf '%s\n' "$output" | jq -c .metadata.agent.stateSchema)" = '{"type":"object","properties":{"counter":{"type":"integer"}}}' ]
	printf -- '---\nmodel: echo\nstate:\n  schema: {type: object}\n---\nhi\n' >agents/d.prompt
	run -0 --separate-stderr agent-run d --describe
	[ "$(printf '%s\n' "$output" | jq -c .metadata.agent.stateSchema)" = '{"type":"object"}' ]
	printf -- '---\nmodel: echo\nstateSchema: missing.json\n---\nhi\n' >agents/e.prompt
	run -101 --separate-stderr agent-run e --describe
	[[ "$stderr" == "agent-run: agents/e.prompt: stateSchema: "* ]]
	[ "$(printf '%s\n' "$output" | jq -r .error.status)" = INVALID_ARGUMENT ]
}

@test "describe: a custom agent" {
	printf -- '---\nexec: cat\ndescription: Custom.\n---\n' >agents/x.prompt
	run -0 --separate-stderr agent-run x --describe
	[ "$output" = '{"name":"x","description":"Custom.","tools":[],"maxTurns":5,"custom":true,"metadata":{"description":"Custom.","agent":{"stateManagement":"server","abortable":true}}}' ]
}

@test "describe: a missing tool or agent is not found" {
	printf -- '---\nmodel: echo\ntools: [nope]\n---\nhi\n' >agents/t.prompt
	run -4 --separate-stderr agent-run t --describe
	[[ "$stderr" == "agent-run: tool 'nope' not found"* ]]
	run -4 --separate-stderr agent-run nosuch --describe
}

@test "describe: a front-matter exec that is not a string is malformed" {
	printf -- '---\nmodel: echo\nexec: [a, b]\n---\nhi\n' >agents/bad.prompt
	run -101 --separate-stderr agent-run bad --describe
	[ "$stderr" = "agent-run: agents/bad.prompt: 'exec' must be a command string" ]
}

@test "list: the agents on the path, sorted, the first of a name wins, broken files marked" {
	mkdir -p lib more
	printf -- '---\nmodel: echo\ndescription: From agents.\n---\nhi\n' >agents/b.prompt
	printf -- '---\nmodel: echo\ndescription: From lib.\n---\nhi\n' >lib/b.prompt
	printf -- '---\nmodel: echo\ndescription: Alpha.\n---\nhi\n' >lib/a.prompt
	printf -- '---\nmodel: [echo\n---\nhi\n' >more/broken.prompt
	printf -- '---\nmodel: echo\n---\nhi\n' >more/c.prompt
	echo 'not a prompt' >more/readme.txt
	AGENTKIT_PATH="$BATS_TEST_TMPDIR/more" run -0 --separate-stderr agent-run --list --agents lib
	[ "$(printf '%s\n' "$output" | jq -c 'del(.error)')" = "{\"name\":\"a\",\"description\":\"Alpha.\",\"path\":\"lib/a.prompt\"}
{\"name\":\"b\",\"description\":\"From lib.\",\"path\":\"lib/b.prompt\"}
{\"name\":\"broken\",\"path\":\"$BATS_TEST_TMPDIR/more/broken.prompt\"}
{\"name\":\"c\",\"path\":\"$BATS_TEST_TMPDIR/more/c.prompt\"}" ]
	[[ "$(printf '%s\n' "$output" | jq -r 'select(.name == "broken") | .error')" == *"broken.prompt:3: invalid front matter"* ]]
	run -0 --separate-stderr agent-run --list --agents /nonexistent
	[ "$(printf '%s\n' "$output" | jq -r .name | tr '\n' ' ')" = "b " ]
}
