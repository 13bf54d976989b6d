#!/usr/bin/env bats
# History a person can read: what each row records beside Genkit's shape,
# sessions newest first, show, and agent-run --continue.

load test_helper

setup() {
	common_setup
	mkdir -p agents
	printf -- '---\nmodel: echo\ndescription: says it back\n---\n{{role "system"}}You repeat.\n{{history}}\n' >agents/parrot.prompt
}

@test "a turn's row records agent, model, title and usage; shaped reads leave them out" {
	run -0 --separate-stderr agent-run parrot --session p1 -m $'plan  the\n  week' -m second
	run -0 --separate-stderr agent-snap export p1
	rows=$(jq -sc 'sort_by(.createdAt) | map(.agentkit)' <<<"$output")
	run -0 jq -c '.[0] | [.agent, .model, .title, .usage.outputMessages, .usage.outputCharacters]' <<<"$rows"
	assert_output '["parrot","echo","plan the week",1,16]'
	# the second turn's usage is its own, not the invocation's sum
	run -0 jq -c '.[1] | [.title, .usage.outputCharacters]' <<<"$rows"
	assert_output '["plan the week",6]'
	run -0 --separate-stderr agent-snap --session p1
	refute_output --partial agentkit
	run -0 --separate-stderr agent-wait "$(jq -r .snapshotId <<<"$output")"
	refute_output --partial agentkit
}

@test "a long first message makes a title shortened on a character boundary" {
	long="$(printf 'é%.0s' {1..100})"
	run -0 --separate-stderr agent-run parrot --session t1 -m "$long"
	run -0 --separate-stderr agent-snap sessions --format ndjson
	title=$(jq -r .title <<<"$output")
	assert_equal "$title" "$(printf 'é%.0s' {1..35})…"
}

@test "sessions: newest first, with agent, title and rows; filters by agent and time" {
	run -0 agent-run parrot --session old -m one
	run -0 agent-run --model echo --session mid -m two
	run -0 agent-run parrot --session new -m three -m four
	run -0 --separate-stderr agent-snap sessions
	run -0 jq -c '[.sessionId, .agent, .title, .snapshots, .status]' <<<"$output"
	assert_output $'["new","parrot","three",2,"completed"]\n["mid","inline","two",1,"completed"]\n["old","parrot","one",1,"completed"]'
	run -0 --separate-stderr agent-snap sessions --agent parrot
	assert_equal "$(jq -r .sessionId <<<"$output" | tr '\n' ' ')" "new old "
	run -0 --separate-stderr agent-snap sessions --agent nobody
	assert_output ''
	run -0 --separate-stderr agent-snap sessions --since 1h
	assert_equal "${#lines[@]}" 3
	run -0 --separate-stderr agent-snap sessions --since 2200-01-01T00:00:00Z
	assert_output ''
	run -100 --separate-stderr agent-snap sessions --since yesterday
	assert_equal "$stderr" "agent-snap: invalid --since 'yesterday' (an RFC 3339 time or a duration)
try 'agent-snap --help'"
	run -100 --separate-stderr agent-snap log new --since 1h
	assert_equal "$(head -1 <<<"$stderr")" 'agent-snap: --since applies to sessions'
}

@test "sessions --format text is a table" {
	run -0 agent-run parrot --session s1 -m 'hello there'
	run -0 --separate-stderr agent-snap sessions --format text
	assert_line --index 0 --regexp '^SESSION +UPDATED \(UTC\) +STATUS +ROWS +TOKENS +AGENT +TITLE$'
	assert_line --index 1 --regexp '^s1 +[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}  completed +1 +-  parrot +hello there$'
}

@test "show prints the conversation: NDJSON messages, or text" {
	run -0 agent-run parrot --session c1 -m 'first question' -m 'second'
	run -0 --separate-stderr agent-snap show c1
	assert_output '{"content":[{"text":"first question"}],"role":"user"}
{"content":[{"text":"first question"}],"role":"model"}
{"content":[{"text":"second"}],"role":"user"}
{"content":[{"text":"second"}],"role":"model"}'
	run -0 --separate-stderr agent-snap show -f text c1
	assert_output 'user: first question

model: first question

user: second

model: second'
	# a snapshot ID works too: the conversation as of that row
	first=$(agent-snap log c1 | head -1 | jq -r .snapshotId)
	run -0 --separate-stderr agent-snap show "$first"
	assert_equal "${#lines[@]}" 2
	run -4 --separate-stderr agent-snap show nosuch
	assert_equal "$stderr" "agent-snap: no session or snapshot 'nosuch'"
	run -100 --separate-stderr agent-snap show
	assert_equal "$(head -1 <<<"$stderr")" 'agent-snap: show takes one SID'
}

@test "show lists tool calls and results one line each" {
	mkdir -p tools
	cat >tools/note.json <<'J'
{"name":"note","description":"keep a note","inputSchema":{"type":"object"}}
J
	printf '#!/bin/sh\ncat >/dev/null\necho %s\n' "'{\"output\":\"noted\"}'" >tools/note
	chmod +x tools/note
	cat >script.ndjson <<'J'
{"content":[{"toolRequest":{"name":"note","ref":"r1","input":{"text":"milk"}}}]}
{"content":[{"text":"Saved."}]}
J
	run -0 agent-run --model script/script.ndjson --tool tools/note.json --session n1 -m 'remember milk'
	run -0 --separate-stderr agent-snap show --format text n1
	assert_output 'user: remember milk

model:
  -> note {"text":"milk"}

tool:
  <- note "noted"

model: Saved.'
}

@test "agent-run --continue resumes the agent's newest session" {
	run -0 agent-run parrot --session a1 -m one
	run -0 agent-run parrot --session a2 -m two
	run -0 agent-run --model echo --session other -m three
	run -0 --separate-stderr agent-run parrot --continue -m more
	assert_equal "$(jq -r .output.sessionId <<<"${lines[-1]}")" a2
	run -0 --separate-stderr agent-snap show a2
	assert_equal "${#lines[@]}" 4
	run -0 --separate-stderr agent-run --model echo -c -m again
	assert_equal "$(jq -r .output.sessionId <<<"${lines[-1]}")" other
}

@test "agent-run --continue: nothing to continue, and conflicting flags" {
	run -4 --separate-stderr agent-run parrot --continue -m x
	assert_output '{"error":{"status":"NOT_FOUND","message":"no session of agent '"'parrot'"' to continue (start one without --continue)"}}'
	assert_equal "$stderr" "agent-run: no session of agent 'parrot' to continue (start one without --continue)"
	run -100 --separate-stderr agent-run parrot --continue --session s -m x
	assert_equal "$(head -1 <<<"$stderr")" "agent-run: --continue picks the session: drop --session, --snapshot, --state, --init and --no-store"
	run -100 --separate-stderr agent-run parrot --continue --no-store -m x
}

@test "a detached run's row records the agent and the usage of all its turns" {
	run -0 --separate-stderr agent-run parrot --session d1 --detach -m one -m two
	snap=$(jq -r .output.snapshotId <<<"$output")
	run -0 --separate-stderr agent-wait --timeout 30s "$snap"
	run -0 --separate-stderr agent-snap export d1
	run -0 jq -c '.agentkit | [.agent, .title, .usage.outputMessages]' <<<"$output"
	assert_output '["parrot","one",2]'
}

# texts SID: the session's conversation as "role:text" words.
texts() {
	agent-snap show "$1" --format ndjson | jq -r '.role + ":" + .content[0].text' | tr '\n' ' '
}

@test "a long session's echo turns leave its history unread and whole: appends, forks, re-attempts" {
	run -0 --separate-stderr agent-run --model echo --session L -m one -m two -m three
	first=$(agent-snap log L | head -n 1 | jq -r .snapshotId)
	# a new process: the history stays in the store, the turn appends to it
	run -0 --separate-stderr agent-run --model echo --session L -m four
	assert_equal "$(jq -r .output.message.content[0].text <<<"$(last)")" four
	assert_equal "$(texts L)" "user:one model:one user:two model:two user:three model:three user:four model:four "
	# the title is the session's first text, not the latest turn's
	assert_equal "$(agent-snap sessions | jq -r 'select(.sessionId == "L") | .title')" one
	# a re-attempt has no message: the history is read, and echo answers its last user text
	run -0 --separate-stderr agent-run --model echo --session L --input-format ndjson <<<'{}'
	assert_equal "$(jq -r .output.message.content[0].text <<<"$(last)")" four
	# a model that reads the history then sees all of it
	script '{"fallback":true,"text":"ok"}'
	run -0 --separate-stderr agent-run --model script/model.ndjson --session L -m five
	assert_equal "$(agent-snap show L --format ndjson | jq -s length)" 11
	# a detach in the middle: the worker's row holds the whole history
	run -0 --separate-stderr agent-run --model echo --session L --input-format ndjson \
		< <(printf '%s\n' '{"message":{"role":"user","content":[{"text":"six"}]}}' '{"detach":true}' \
			'{"message":{"role":"user","content":[{"text":"seven"}]}}')
	id=$(jq -r .output.snapshotId <<<"$(last)")
	run -0 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -r '[.state.messages[] | .content[0].text] | join(" ")' <<<"$output")" \
		"one one two two three three four four four five ok six six seven seven"
	# a branch from the first row keeps that row's history
	run -0 --separate-stderr agent-run --model echo --snapshot "$first" -m branch
	assert_equal "$(texts "$(jq -r .output.snapshotId <<<"$(last)")")" "user:one model:one user:branch model:branch "
}

@test "show of an interrupted and an expired session says so and names the next step; --format json is one object" {
	T="$FIXTURES/tools"
	run -6 --separate-stderr agent-run --model "script/$FIXTURES/scripts/ask.ndjson" --tool "$T/ask.json" \
		--tool "$T/greet.json" --session i1 -m paint
	run -0 --separate-stderr agent-snap sessions -f text
	assert_line --index 1 --regexp '^i1 +[0-9-]{10} [0-9:]{8}  interrupted     1 +-  inline +paint$'
	run -0 --separate-stderr agent-snap show -f text i1
	assert_equal "$(tail -n 3 <<<"$output")" '
-- completed, finish reason interrupted
-- waits for a resume: agent-run --session i1 with a {"resume": ...} input'
	# A worker that died: its row reads expired, and its log is named.
	echo '{"snapshotId":"e1-row","sessionId":"e1","status":"pending","createdAt":"2020-01-01T00:00:00Z","heartbeatAt":"2020-01-01T00:00:00Z"}' |
		agent-snap import >/dev/null
	run -0 --separate-stderr agent-snap show -f text e1
	assert_output '-- expired
-- its worker stopped beating; what it did: agent-snap worker-log e1-row'
	run -0 --separate-stderr agent-snap show e1
	assert_output '{"snapshotId":"e1-row","status":"expired"}'
	# A session that ended well: the messages alone, or one object.
	run -0 agent-run parrot --session c1 -m 'hi'
	run -0 --separate-stderr agent-snap show -f json c1
	assert_equal "$(jq -c 'del(.snapshotId)' <<<"$output")" '{"status":"completed","finishReason":"stop","sessionId":"c1","messages":[{"content":[{"text":"hi"}],"role":"user"},{"content":[{"text":"hi"}],"role":"model"}]}'
	run -0 --separate-stderr agent-snap sessions -f json
	assert_equal "$(jq -c 'map(.sessionId)' <<<"$output")" '["c1","i1","e1"]'
	run -100 --separate-stderr agent-snap show -f yaml c1
	assert_equal "${stderr%%$'\n'*}" "agent-snap: --format must be text, ndjson or json, not 'yaml'"
}
