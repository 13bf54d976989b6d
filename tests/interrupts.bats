#!/usr/bin/env bats
# Interrupts a person can answer (docs/agent-run.md, "Answering an
# interrupt"): --approve, --deny [--reason], --respond REF=JSON, and the
# approval prompt on the terminal.

load test_helper

setup() {
	common_setup
	requires jq
	T="$FIXTURES/tools"
	export DEPLOY_LOG="$BATS_TEST_TMPDIR/deploy.log"
	D=(--model "script/$FIXTURES/scripts/deploy.ndjson" --tool "$T/deploy.json")
	ASK=(--model "script/$FIXTURES/scripts/ask.ndjson" --tool "$T/ask.json" --tool "$T/greet.json")
}

# tool_output SID NAME: the output the session's history holds for tool NAME.
tool_output() {
	agent-snap show "$1" | jq -c --arg n "$2" 'select(.role == "tool") | .content[].toolResponse | select(.name == $n) | .output'
}

@test "--approve REF runs the interrupted request again, approved, and the turn goes on" {
	run -6 --separate-stderr agent-run "${D[@]}" --session s1 -m 'deploy it'
	[ ! -e "$DEPLOY_LOG" ]
	run -0 --separate-stderr agent-run "${D[@]}" --session s1 --approve d1
	assert_equal "$(jq -c 'select(.modelChunk.role == "tool") | .modelChunk.content' <<<"$output")" '[{"toolResponse":{"name":"deploy","ref":"d1","output":{"deployed":"prod"}}}]'
	# the request was resumed with "resumed": {"approved": true} (deploy.log shows the run)
	assert_equal "$(agent-snap show s1 | jq -c 'select(.role == "model") | .content[] | select(.toolRequest) | .metadata.resolvedInterrupt')" '{"approve":"deploy"}'
	assert_equal "$(jq -r .output.message.content[0].text <<<"${lines[-1]}")" 'Done.'
	assert_equal "$(cat "$DEPLOY_LOG")" '{"env":"prod"}'
	# the tool name works as well as the ref, when one request has it
	run -6 --separate-stderr agent-run "${D[@]}" --session s2 -m 'deploy it'
	run -0 --separate-stderr agent-run "${D[@]}" --session s2 --approve deploy --format json
	assert_equal "$(tool_output s2 deploy)" '{"deployed":"prod"}'
}

@test "--deny REF --reason TEXT answers for the tool, which does not run; the model reads why" {
	run -6 --separate-stderr agent-run "${D[@]}" --session s1 -m 'deploy it'
	run -0 --separate-stderr agent-run "${D[@]}" --session s1 --deny d1 --reason 'not on a Friday'
	assert_equal "$(tool_output s1 deploy)" '{"error":"denied by the user: not on a Friday"}'
	[ ! -e "$DEPLOY_LOG" ]
	run -6 --separate-stderr agent-run "${D[@]}" --session s2 -m 'deploy it'
	run -0 --separate-stderr agent-run "${D[@]}" --session s2 --deny d1
	assert_equal "$(tool_output s2 deploy)" '{"error":"denied by the user"}'
}

@test "--respond REF=JSON is the tool's output; answers go together in one resume" {
	run -6 --separate-stderr agent-run "${ASK[@]}" --session s1 -m paint
	run -0 --separate-stderr agent-run "${ASK[@]}" --session s1 --respond 'q1={"color":"blue"}'
	assert_equal "$(tool_output s1 ask)" '{"color":"blue"}'
	# the pending output of the request that completed is replayed
	assert_equal "$(tool_output s1 greet)" '"hello ann"'
	assert_equal "$(jq -r .output.finishReason <<<"${lines[-1]}")" stop
	# a detached resume: the answer rides in the queued input
	run -6 --separate-stderr agent-run "${ASK[@]}" --session s2 -m paint
	run -0 --separate-stderr agent-run "${ASK[@]}" --session s2 --respond q1='"red"' --detach
	run -0 --separate-stderr agent-wait --timeout 30s "$(jq -r .output.snapshotId <<<"$output")"
	assert_equal "$(tool_output s2 ask)" '"red"'
}

@test "answers that name no interrupted request, twice, or a session with none: clear errors" {
	run -6 --separate-stderr agent-run "${D[@]}" --session s1 -m 'deploy it'
	run -101 --separate-stderr agent-run "${D[@]}" --session s1 --approve x9
	assert_equal "$stderr" "agent-run: --approve 'x9': no interrupted tool request has ref or name 'x9' (interrupted: deploy (ref d1))"
	assert_equal "$output" '{"error":{"status":"INVALID_ARGUMENT","message":"--approve '"'"'x9'"'"': no interrupted tool request has ref or name '"'"'x9'"'"' (interrupted: deploy (ref d1))"}}'
	run -101 --separate-stderr agent-run "${D[@]}" --session s1 --approve d1 --deny deploy
	assert_equal "$stderr" "agent-run: --deny 'deploy': deploy (ref d1) is answered twice"
	# nothing ran: the session still waits
	[ ! -e "$DEPLOY_LOG" ]
	assert_equal "$(agent-snap --session s1 | jq -r .finishReason)" interrupted
	run -5 --separate-stderr agent-run "${D[@]}" --session new --approve d1
	assert_equal "$stderr" "agent-run: session 'new' has no interrupted tool request to answer (it has no turn)"
	run -0 --separate-stderr agent-run "${D[@]}" --session s1 --approve d1
	run -5 --separate-stderr agent-run "${D[@]}" --session s1 --approve d1
	assert_equal "$stderr" "agent-run: session 's1' has no interrupted tool request to answer (its latest turn did not end interrupted)"
}

@test "--approve, --deny, --respond, --reason: usage errors" {
	run -100 --separate-stderr agent-run "${D[@]}" --session s1 --approve d1 -m hi
	assert_equal "${stderr%%$'\n'*}" "agent-run: -m and --approve, --deny or --respond both give the turn's input: use one"
	run -100 --separate-stderr agent-run "${D[@]}" --approve d1
	assert_equal "${stderr%%$'\n'*}" "agent-run: --approve, --deny and --respond answer a paused session: name it with --session ID (or --snapshot ID, --continue, --state FILE)"
	run -100 --separate-stderr agent-run "${D[@]}" --session s1 --respond d1
	assert_equal "${stderr%%$'\n'*}" "agent-run: --respond takes REF=JSON (the request's ref, '=', the tool's output as JSON), not 'd1'"
	run -100 --separate-stderr agent-run "${D[@]}" --session s1 --respond 'd1={'
	assert_equal "${stderr%%$'\n'*}" "agent-run: --respond 'd1={': invalid JSON: string or '}' expected near end of file (at --respond:1:1)"
	run -100 --separate-stderr agent-run "${D[@]}" --session s1 --reason why
	assert_equal "${stderr%%$'\n'*}" "agent-run: --reason goes after the --deny REF it explains"
	run -100 --separate-stderr agent-run "${D[@]}" --session s1 --deny d1 --reason a --reason b
	assert_equal "${stderr%%$'\n'*}" "agent-run: --deny 'd1' has two reasons: give --reason once"
}

@test "client-managed: --state FILE's paused turn is answered the same way" {
	run -6 --separate-stderr agent-run --no-store "${D[@]}" -m 'deploy it'
	jq -c .output.state <<<"${lines[-1]}" >state.json
	run -0 --separate-stderr agent-run --no-store "${D[@]}" --state state.json --approve d1
	assert_equal "$(jq -c '[.output.message.content[0].text, (.output.state.messages | length)]' <<<"${lines[-1]}")" '["Done.",4]'
}

# at_tty INPUT CMD...: CMD on a terminal of its own (script(1)'s, not the
# helpers' script), INPUT typed at it; the terminal's text, less its CRs,
# in tty.out, and CMD's exit status in tty.rc.
at_tty() {
	local input=$1
	shift
	printf "%s" "$input" | command script -qec "$(printf "%q " "$@")" tty.raw >/dev/null 2>&1 || true
	sed 's/\r$//' tty.raw >tty.out
	sed -n 's/.*COMMAND_EXIT_CODE="\([0-9]*\)".*/\1/p' tty.raw >tty.rc
}

@test "on a terminal a paused tool request is asked: y approves and the turn goes on in this process" {
	requires script
	at_tty $'y\n' env NO_COLOR=1 agent-run "${D[@]}" --session p1 -m 'deploy it'
	grep -qxF 'tool deploy interrupted {"approve":"deploy"}' tty.out || fail "$(cat tty.out)"
	grep -qF 'approve deploy {"env":"prod"}? [y/N] tool deploy ok {"deployed":"prod"}' tty.out || fail "$(cat tty.out)"
	grep -qxF 'Done.' tty.out
	assert_equal "$(cat tty.rc)" 0
	assert_equal "$(cat "$DEPLOY_LOG")" '{"env":"prod"}'
	# two rows: the paused turn and its resume
	assert_equal "$(agent-snap log p1 | jq -r .finishReason | tr '\n' ' ')" 'interrupted stop '
}

@test "on a terminal: n or an empty answer denies; no answer leaves the turn interrupted with its resume command" {
	requires script
	at_tty $'\n' env NO_COLOR=1 agent-run "${D[@]}" --session p1 -m 'deploy it'
	grep -qF 'approve deploy {"env":"prod"}? [y/N] tool deploy error denied by the user' tty.out || fail "$(cat tty.out)"
	assert_equal "$(cat tty.rc)" 0
	[ ! -e "$DEPLOY_LOG" ]
	# an answer that is neither is asked again
	at_tty $'maybe\nn\n' env NO_COLOR=1 agent-run "${D[@]}" --session p2 -m 'deploy it'
	grep -qF '? [y/N]   y or n: tool deploy error denied by the user' tty.out || fail "$(cat tty.out)"
	# the terminal ends before an answer: the turn stays interrupted
	at_tty '' env NO_COLOR=1 agent-run "${D[@]}" --session p3 -m 'deploy it'
	assert_equal "$(cat tty.rc)" 6
	grep -qF 'agent-run: interrupted: deploy (ref d1) waits for an answer' tty.out || fail "$(cat tty.out)"
	[ ! -e "$DEPLOY_LOG" ]
}

@test "no prompt with --no-prompt, with stdout not a terminal, or with --detach" {
	requires script
	at_tty $'y\n' env NO_COLOR=1 agent-run "${D[@]}" --session p1 --no-prompt -m 'deploy it'
	assert_equal "$(cat tty.rc)" 6
	! grep -qF 'approve deploy' tty.out || fail "$(cat tty.out)"
	at_tty $'y\n' sh -c 'agent-run "$@" | cat' sh "${D[@]}" --session p2 -m 'deploy it'
	assert_equal "$(cat tty.rc)" 0   # cat's; the run's output says interrupted
	grep -qF '"finishReason":"interrupted"' tty.out || fail "$(cat tty.out)"
	! grep -qF 'approve deploy' tty.out
	# a detached worker has no terminal: its turn ends interrupted
	at_tty $'y\n' env NO_COLOR=1 agent-run "${D[@]}" --session p3 --detach -m 'deploy it'
	assert_equal "$(cat tty.rc)" 0
	run -6 --separate-stderr agent-wait --timeout 30s --session p3
	assert_equal "$(jq -r .finishReason <<<"$output")" interrupted
	[ ! -e "$DEPLOY_LOG" ]
}
