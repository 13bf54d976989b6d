#!/usr/bin/env bats
# agent-run with the store: one snapshot per committed turn, resume by
# snapshot or session, failed turns committed or rolled back, the resume
# rules of runtime-semantics §4.2, and prompt-file agents.

load test_helper

setup() {
	common_setup
	TOOLS="$FIXTURES/tools"
}

M="script/model.ndjson"

@test "one turn writes exactly one row: reserved ID in turnEnd and output, no parent (SingleTurnSnapshot)" {
	run -0 --separate-stderr agent-run --model echo -m hi
	id=$(chunks | jq -r 'select(.turnEnd) | .turnEnd.snapshotId')
	[ "$(last | jq -r .output.snapshotId)" = "$id" ]
	sid=$(last | jq -r .output.sessionId)
	[ "$(agent-snap log "$sid" | wc -l)" = 1 ]
	row=$(agent-snap "$id")
	[ "$(jq -c '[.snapshotId == "'"$id"'", .sessionId == "'"$sid"'", has("parentId"), .status, .finishReason, .state.sessionId == "'"$sid"'", (.state.messages | length), .createdAt == .updatedAt, has("heartbeatAt")]' <<<"$row")" = '[true,true,false,"completed","stop",true,2,true,false]' ]
	[[ "$(jq -r .createdAt <<<"$row")" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$ ]]
}

@test "three turns: three rows chained by parentId, output names the last (MultiTurnSnapshot)" {
	run -0 --separate-stderr agent-run --model echo -m a -m b -m c
	ids=($(chunks | jq -r 'select(.turnEnd) | .turnEnd.snapshotId'))
	[ "${#ids[@]}" = 3 ]
	[ "$(last | jq -r .output.snapshotId)" = "${ids[2]}" ]
	[ "$(agent-snap "${ids[1]}" | jq -r .parentId)" = "${ids[0]}" ]
	[ "$(agent-snap "${ids[2]}" | jq -r .parentId)" = "${ids[1]}" ]
}

@test "resume by --snapshot: new row with the history, parent is the resumed row, same session (ResumeFromSnapshot)" {
	run -0 --separate-stderr agent-run --model echo -m one
	snap=$(last | jq -r .output.snapshotId)
	sid=$(last | jq -r .output.sessionId)
	run -0 --separate-stderr agent-run --model echo --snapshot "$snap" -m two
	[ "$(last | jq -r .output.sessionId)" = "$sid" ]
	row=$(agent-snap "$(last | jq -r .output.snapshotId)")
	[ "$(jq -c '[.parentId == "'"$snap"'", [.state.messages[].content[0].text]]' <<<"$row")" = '[true,["one","one","two","two"]]' ]
}

@test "resume by --session: the latest row; an unknown session ID starts fresh under it (ResumeFromSessionID_NewConversation)" {
	run -0 --separate-stderr agent-run --model echo --session my-chat -m one
	[ "$(last | jq -r .output.sessionId)" = my-chat ]
	first=$(last | jq -r .output.snapshotId)
	[ "$(agent-snap "$first" | jq -c 'has("parentId")')" = false ]
	run -0 --separate-stderr agent-run --model echo --session my-chat -m two
	[ "$(agent-snap "$(last | jq -r .output.snapshotId)" | jq -c '[.parentId == "'"$first"'", (.state.messages | length)]')" = '[true,4]' ]
}

@test "--session with --snapshot asserts ownership; an unknown snapshot is NOT_FOUND (ResumeFromSnapshotID_WithSessionID)" {
	run -0 --separate-stderr agent-run --model echo --session s1 -m one
	snap=$(last | jq -r .output.snapshotId)
	run -0 --separate-stderr agent-run --model echo --session s1 --snapshot "$snap" -m two
	run -101 --separate-stderr agent-run --model echo --session other --snapshot "$snap" -m two
	[ "$output" = "{\"error\":{\"status\":\"INVALID_ARGUMENT\",\"message\":\"snapshot \\\"$snap\\\" does not belong to session \\\"other\\\" (snapshot's session: \\\"s1\\\")\"}}" ]
	run -4 --separate-stderr agent-run --model echo --snapshot nope -m two
	[ "$output" = '{"error":{"status":"NOT_FOUND","message":"snapshot \"nope\" not found"}}' ]
	[ "$stderr" = 'agent-run: snapshot "nope" not found' ]
}

@test "uncommitted failure: no row, the output names the previous row (FailedTurn_ServerManagedReturnsLastTurnSnapshot)" {
	script '{"when":{"user":"one"},"text":"1"}' '{"when":{"user":"boom"},"error":{"status":"UNAVAILABLE","message":"model timeout"}}'
	run -1 --separate-stderr agent-run --model $M -m one -m boom
	first=$(chunks | jq -r 'select(.turnEnd.snapshotId) | .turnEnd.snapshotId')
	[ "$(chunks | tail -n 1)" = '{"turnEnd":{"finishReason":"failed"}}' ]
	[ "$(last | jq -c '.output | [.snapshotId == "'"$first"'", .finishReason, .error.status, has("state")]')" = '[true,"failed","UNAVAILABLE",false]' ]
	[ "$(agent-snap log "$(last | jq -r .output.sessionId)" | wc -l)" = 1 ]
	# After a resume, a first-turn failure points at the resumed row (FailedFirstTurn_AfterResume).
	run -1 --separate-stderr agent-run --model $M --snapshot "$first" -m boom
	[ "$(last | jq -r .output.snapshotId)" = "$first" ]
}

@test "committed failure: the failed row is a resume point, and --session resumes its tip (ResumeFromErrorSnapshot_Allowed)" {
	script '{"when":{"user":"go"},"toolRequests":[{"name":"fail","ref":"1","input":{}}]}' '{"when":{"user":"again"},"text":"fine"}'
	run -1 --separate-stderr agent-run --model $M --tool "$TOOLS/fail.json" --session s -m go
	failed=$(last | jq -r .output.snapshotId)
	[ "$(agent-snap "$failed" | jq -r .status)" = failed ]
	run -0 --separate-stderr agent-run --model $M --tool "$TOOLS/fail.json" --session s -m again
	[ "$(agent-snap "$(last | jq -r .output.snapshotId)" | jq -c '[.parentId == "'"$failed"'", [.state.messages[].role]]')" = '[true,["user","user","model"]]' ]
}

@test "resume rules: pending, aborting and stateless aborted rows are refused with Genkit's messages (§4.2)" {
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	{
		echo "{\"snapshotId\":\"p1\",\"sessionId\":\"s\",\"parentId\":\"root\",\"status\":\"pending\",\"createdAt\":\"$now\",\"updatedAt\":\"$now\",\"heartbeatAt\":\"$now\"}"
		echo "{\"snapshotId\":\"p2\",\"sessionId\":\"s2\",\"parentId\":\"root\",\"status\":\"pending\",\"createdAt\":\"$now\",\"updatedAt\":\"$now\",\"heartbeatAt\":\"2000-01-01T00:00:00Z\"}"
		echo "{\"snapshotId\":\"p3\",\"sessionId\":\"s3\",\"status\":\"aborting\",\"createdAt\":\"$now\",\"updatedAt\":\"$now\",\"heartbeatAt\":\"$now\"}"
		echo "{\"snapshotId\":\"p4\",\"sessionId\":\"s4\",\"status\":\"aborting\",\"createdAt\":\"$now\",\"updatedAt\":\"$now\",\"heartbeatAt\":\"2000-01-01T00:00:00Z\"}"
		echo "{\"snapshotId\":\"p5\",\"sessionId\":\"s5\",\"parentId\":\"parent-1\",\"status\":\"aborted\",\"createdAt\":\"$now\",\"updatedAt\":\"$now\"}"
	} | agent-snap import >/dev/null
	expect() {
		run -5 --separate-stderr agent-run --model echo "${@:1:$#-1}" -m hi
		[ "$output" = "{\"error\":{\"status\":\"FAILED_PRECONDITION\",\"message\":${!#}}}" ] || { echo "got $output"; return 1; }
	}
	expect --snapshot p1 '"snapshot \"p1\" is still pending: its detached invocation is still running; wait for it to finalize or abort it before resuming"'
	# a session's writers that do not wait for its detached run get Genkit's refusal
	expect --on-busy fail --session s '"snapshot \"p1\" is still pending: its detached invocation is still running; wait for it to finalize or abort it before resuming"'
	expect --on-busy fork --session s '"snapshot \"p1\" is still pending: its detached invocation is still running; wait for it to finalize or abort it before resuming"'
	expect --snapshot p2 '"snapshot \"p2\" is still pending but its worker stopped heartbeating and is presumed dead; abort it, then resume from its parent snapshot \"root\""'
	expect --snapshot p3 '"snapshot \"p3\" is still being finalized: its invocation was aborted and has not recorded the state yet; retry this same snapshot ID"'
	expect --snapshot p4 '"snapshot \"p4\" is still aborting but its worker stopped heartbeating and is presumed dead. It recorded no progress, so there is nothing to resume"'
	expect --snapshot p5 '"snapshot \"p5\" was aborted before its invocation recorded any state; resume from its parent snapshot \"parent-1\""'
}

@test "session ID: stable across resumes, on every row and state (SessionID_AssignedAndStable)" {
	run -0 --separate-stderr agent-run --model echo -m a -m b
	sid=$(last | jq -r .output.sessionId)
	run -0 --separate-stderr agent-run --model echo --snapshot "$(last | jq -r .output.snapshotId)" -m c
	[ "$(last | jq -r .output.sessionId)" = "$sid" ]
	[ "$(agent-snap log "$sid" | jq -r .sessionId | sort -u)" = "$sid" ]
	[ "$(agent-snap --session "$sid" | jq -r .state.sessionId)" = "$sid" ]
}

@test "prompt agent: found by name in --agents, AGENTKIT_PATH and ./agents; history and {{@state}} rendered" {
	mkdir -p agents/tools lib
	cp "$TOOLS/addTask" "$TOOLS/addTask.json" agents/tools/
	cat >agents/helper.prompt <<-'EOF'
	---
	model: echo
	tools: [addTask]
	description: A helper.
	---
	{{role "system"}}Tasks: {{json @state.tasks}}
	{{history}}
	EOF
	run -0 --separate-stderr agent-run helper --describe
	[ "$(printf '%s\n' "$output" | jq -c '[.name, .description, .model, [.tools[].name], .maxTurns, .metadata.agent]')" = '["helper","A helper.","echo",["addTask"],5,{"stateManagement":"server","abortable":true}]' ]
	run -0 --separate-stderr agent-run helper -m hi
	sid=$(last | jq -r .output.sessionId)
	[ "$(agent-snap --session "$sid" | jq -c '[.state.messages[] | [.role, .content[0].text]]')" = '[["user","hi"],["model","hi"]]' ]
	mv agents/helper.prompt lib/
	run -4 --separate-stderr agent-run helper -m hi
	AGENTKIT_PATH="$BATS_TEST_TMPDIR/lib" run -0 --separate-stderr agent-run helper -m hi
	run -0 --separate-stderr agent-run --agents lib helper -m hi
	run -0 --separate-stderr agent-run lib/helper.prompt -m hi
}

@test "prompt agent: an invalid front matter names the file and line" {
	mkdir agents
	printf -- '---\nmodel: [echo\n---\nhi\n' >agents/bad.prompt
	run -101 --separate-stderr agent-run bad -m hi
	[ "$(jq -r .error.status <<<"$output")" = INVALID_ARGUMENT ]
	[[ "$(jq -r .error.message <<<"$output")" == agents/bad.prompt:* ]]
}

@test "--prompt NAME --input JSON: a shared prompt rendered with the agent's own input (WithNamedPrompt)" {
	mkdir -p agents
	printf -- '---\nmodel: echo\ninput:\n  default: {who: nobody}\n---\nSay hi to {{who}}.\n' >agents/greeter.prompt
	# The template's user message comes last (history goes before it), and
	# the echo model answers with the last user text: the rendered prompt.
	run -0 --separate-stderr agent-run support --prompt greeter --input '{"who":"ann"}' --no-store -m hi
	[ "$(last | jq -r .output.message.content[0].text)" = "Say hi to ann." ]
	run -0 --separate-stderr agent-run support --prompt greeter --no-store -m hi
	[ "$(last | jq -r .output.message.content[0].text)" = "Say hi to nobody." ]
	# The scaffolding is not stored: the session keeps the user's turn.
	[ "$(last | jq -c '[.output.state.messages[] | .content[0].text]')" = '["hi","Say hi to nobody."]' ]
	run -0 --separate-stderr agent-run support --prompt greeter --describe
	[ "$(jq -r .name <<<"$output")" = support ]
	run -100 --separate-stderr agent-run support --prompt greeter --input '[1' --no-store -m hi
	[[ "$stderr" == *"--input"* ]] || fail "$stderr"
	run -4 --separate-stderr agent-run support --prompt nosuch --no-store -m hi
	[[ "$stderr" == *"nosuch"*"not found"* ]] || fail "$stderr"
}

@test "one writer per session: ten writers of one session at once lose no turn (--on-busy wait)" {
	run -0 --separate-stderr agent-run --model echo --session S -m start
	pids=()
	for i in $(seq 10); do
		agent-run --model echo --session S -m "t$i" >/dev/null 2>>err &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	run cat err
	assert_output ""
	# the latest conversation holds every turn, once
	run -0 --separate-stderr agent-snap show S --format ndjson
	assert_equal "$(jq -r 'select(.role == "user") | .content[0].text' <<<"$output" | sort -V | tr '\n' ' ')" \
		"start t1 t2 t3 t4 t5 t6 t7 t8 t9 t10 "
	# eleven rows, one chain: each row the parent of one other
	run -0 --separate-stderr agent-snap export
	assert_equal "$(jq -s -c '[length, ([.[] | .parentId // ""] | unique | length)]' <<<"$output")" "[11,11]"
}

@test "a session's detached run is a writer too: --session waits for it to settle, then goes on from its row" {
	script '{"when":{"user":"bg"},"chunks":["bg ","done"],"delay":"2s"}' '{"fallback":true,"text":"ok"}'
	run -0 --separate-stderr agent-run --model $M --session S -m first
	run -0 --separate-stderr agent-run --model $M --session S --detach -m bg
	bg=$(id_of "$output")
	# a bound shorter than the run: 124, saying what it waited for
	run -124 --separate-stderr agent-run --busy-timeout 300ms --model $M --session S -m early
	assert_equal "$stderr" "agent-run: session \"S\" stayed busy for 300ms: the detached run of snapshot \"$bg\" is still running on it"
	# the default waits, and the turn follows the detached one
	run -0 --separate-stderr agent-run --model $M --session S -m after
	assert_equal "$(last | jq -r .output.finishReason)" stop
	assert_equal "$(agent-snap -m "$bg" | jq -r .status)" completed
	assert_equal "$(agent-snap show S --format ndjson | jq -r 'select(.role == "user") | .content[0].text' | tr '\n' ' ')" "first bg after "
}

@test "--on-busy fail refuses a busy session (exit 5), --busy-timeout bounds the wait (124), fork branches" {
	script '{"when":{"user":"slow"},"chunks":["slow ","done"],"delay":"3s"}' '{"fallback":true,"text":"ok"}'
	run -0 --separate-stderr agent-run --model $M --session S -m first
	agent-run --model $M --session S -m slow >slow.out 2>slow.err &
	pid=$!
	# the slow turn holds the session from before its model call: its
	# first chunk says it is under way, 3 s before its last
	for _ in $(seq 200); do [ -s slow.out ] && break; sleep 0.05; done
	rc=0
	agent-run --on-busy fail --model $M --session S -m no >out 2>err || rc=$?
	assert_equal "$rc" 5
	assert_equal "$(cat err)" "agent-run: session \"S\" is busy: another writer's turn is running on it"
	assert_equal "$(tail -n 1 out | jq -c .error)" '{"status":"FAILED_PRECONDITION","message":"session \"S\" is busy: another writer'"'"'s turn is running on it"}'
	run -124 --separate-stderr agent-run --busy-timeout 300ms --model $M --session S -m late
	assert_equal "$stderr" "agent-run: session \"S\" stayed busy for 300ms: another writer's turn is still running on it"
	# fork does not wait: it branches from the latest it reads
	run -0 --separate-stderr agent-run --on-busy fork --model $M --session S -m branch
	assert_equal "$(agent-snap show --format ndjson "$(last | jq -r .output.snapshotId)" | jq -r 'select(.role == "user") | .content[0].text' | tr '\n' ' ')" "first branch "
	wait "$pid"
	# a waiting writer goes on from the slow turn's row, the latest
	run -0 --separate-stderr agent-run --model $M --session S -m after
	assert_equal "$(agent-snap show S --format ndjson | jq -r 'select(.role == "user") | .content[0].text' | tr '\n' ' ')" "first slow after "
	run -100 --separate-stderr agent-run --on-busy never --model $M --session S -m x
	assert_equal "$stderr" "agent-run: --on-busy must be wait, fail or fork, got 'never'
try 'agent-run --help'"
}

@test "hosts whose clocks disagree lose no turn: a row never sorts before the row it continues" {
	requires faketime
	# libfaketime is preloaded; under ASan that needs ASan told it may
	# come second
	export ASAN_OPTIONS="$ASAN_OPTIONS:verify_asan_link_order=0"
	run -0 --separate-stderr agent-run --model echo --session S -m one
	# a host a minute ahead, then one on time, then one a minute behind
	run -0 --separate-stderr faketime -f "+60s" agent-run --model echo --session S -m ahead
	run -0 --separate-stderr agent-run --model echo --session S -m on-time
	run -0 --separate-stderr faketime -f "-60s" agent-run --model echo --session S -m behind
	run -0 --separate-stderr agent-snap show S --format ndjson
	assert_equal "$(jq -r 'select(.role == "user") | .content[0].text' <<<"$output" | tr '\n' ' ')" \
		"one ahead on-time behind "
	# each row's createdAt after its parent's, by at least a microsecond
	run -0 --separate-stderr agent-snap export
	assert_equal "$(jq -s '[sort_by(.createdAt) | .[].state.messages | length]' -c <<<"$output")" "[2,4,6,8]"
}

@test "on a server store, rows' times are the store's clock: a skewed host's worker is not taken for dead" {
	is_pg || skip "an embedded store's clock is its one host's"
	requires faketime
	export ASAN_OPTIONS="$ASAN_OPTIONS:verify_asan_link_order=0"
	script '{"chunks":["a ","b ","c"],"delay":"1s"}'
	# a host whose clock is 2 minutes behind: its rows would read a
	# heartbeat 2 minutes old, expired at once to every other host
	run -0 --separate-stderr faketime -f "-120s" agent-run --model script/model.ndjson \
		--detach --heartbeat-interval 500ms --heartbeat-timeout 10s -m go
	id=$(jq -r .output.snapshotId <<<"$output")
	run -0 --separate-stderr agent-snap -m "$id"
	assert_equal "$(jq -r .status <<<"$output")" pending
	# within a few seconds of this host's clock, not 2 minutes off
	now=$(date +%s)
	created=$(jq -r '.createdAt | sub("\\.[0-9]+"; "") | fromdate' <<<"$output")
	[ $((now - created)) -lt 10 ] && [ $((created - now)) -lt 10 ]
	run -0 --separate-stderr timeout 30 agent-wait "$id"
	assert_equal "$(jq -r '[.status, .finishReason] | join(" ")' <<<"$output")" "completed stop"
}
