#!/usr/bin/env bats
# The chat (docs/agent-run.md, "Chat"): stdin and stdout on a terminal and
# no input given, each line typed is a turn of one durable session.  Run
# under script(1)'s pseudo-terminal (not the helpers' script function),
# each line typed once what it answers is on the screen.

load test_helper

setup() {
	common_setup
	requires script jq
	export NO_COLOR=1
}

teardown() {
	[ -z "${TTY_PID-}" ] || { exec 7>&-; kill "$TTY_PID" 2>/dev/null; wait "$TTY_PID" 2>/dev/null; } || true
}

# tty_start CMD...: CMD on a terminal of its own; what it shows goes to
# tty.raw as it comes, what tty_type writes is typed at it.
tty_start() {
	rm -f in.fifo
	mkfifo in.fifo
	# a background job starts with SIGINT ignored: Ctrl-C must reach CMD
	command script -qfec "env --default-signal=INT $(printf '%q ' "$@")" tty.raw \
		<in.fifo >/dev/null 2>&1 &
	TTY_PID=$!
	exec 7>in.fifo
}

# tty_wait TEXT [N]: until the terminal shows TEXT N times (default 1), 10 s at most.
tty_wait() {
	local n=${2:-1}
	for _ in $(seq 1 400); do
		[ "$(grep -oF -- "$1" tty.raw 2>/dev/null | wc -l)" -ge "$n" ] && return 0
		sleep 0.025
	done
	fail "the terminal never showed '$1' ($n times): $(cat tty.raw)"
}

# tty_wait_joined TEXT: tty_wait on the terminal's text with its line ends
# taken out (TEXT may span lines: the typed line, the reply, the prompt).
tty_wait_joined() {
	for _ in $(seq 1 400); do
		tr -d '\r\n' <tty.raw 2>/dev/null | grep -qF -- "$1" && return 0
		sleep 0.025
	done
	fail "the terminal never showed '$1': $(cat -v tty.raw)"
}

tty_type() { printf '%s' "$1" >&7; }

# tty_end: the terminal closes, 20 s at most (a chat still reading fails
# the test, killed); its text, less CRs, in tty.out; the exit status in tty.rc.
tty_end() {
	exec 7>&-
	for _ in $(seq 1 800); do
		kill -0 "$TTY_PID" 2>/dev/null || break
		sleep 0.025
	done
	if kill -0 "$TTY_PID" 2>/dev/null; then
		kill -TERM "$TTY_PID"
		wait "$TTY_PID" || true
		TTY_PID=
		fail "the chat did not end after its terminal's input: $(cat -v tty.raw)"
	fi
	wait "$TTY_PID" || true
	TTY_PID=
	sed 's/\r$//' tty.raw >tty.out
	sed -n 's/.*COMMAND_EXIT_CODE="\([0-9]*\)".*/\1/p' tty.raw >tty.rc
}

@test "chat: each line is a turn of one session, / commands, Ctrl-D ends it; --continue resumes it" {
	tty_start agent-run --model echo --session c1
	tty_wait '/help for commands, Ctrl-D to end'
	tty_type $'hello there\n'
	tty_wait '> ' 2
	tty_type $'/session\n'
	tty_wait 'session c1, snapshot '
	tty_type $'second line\n'
	tty_wait '> ' 4
	tty_type $'/nope\n'
	tty_wait "unknown command '/nope' (/help lists them)"
	tty_type $'/help\n'
	tty_wait '/quit      end the chat'
	tty_type $'\004'
	tty_end
	grep -qxF 'agent-run: chat with inline, session c1; /help for commands, Ctrl-D to end' tty.out
	grep -qxF 'hello there' tty.out || fail "$(cat tty.out)"
	grep -qE '^agent-run: stop, session c1, snapshot [0-9a-f-]{36}, 44 characters in, 22 out$' tty.out || fail "$(cat tty.out)"
	assert_equal "$(cat tty.rc)" 0
	# two turns, two rows of one session
	assert_equal "$(agent-snap show c1 | jq -r '.content[0].text' | tr '\n' '|')" 'hello there|hello there|second line|second line|'
	# a later chat, or any run, goes on with it
	run -0 --separate-stderr agent-run --model echo --continue -m third
	assert_equal "$(agent-snap log c1 | wc -l)" 3
}

@test "chat: Ctrl-C stops the running turn and keeps the chat; at the prompt it drops the line" {
	printf '%s\n' '{"when":{"user":"slow"},"chunks":["tick ","tick ","tick ","tick ","tick "],"delay":"1s"}' \
		'{"fallback":true,"text":"quick"}' >slow.ndjson
	tty_start agent-run --model script/slow.ndjson --session c2
	tty_wait '/help for commands'
	tty_type $'slow\n'
	tty_wait 'tick'
	tty_type $'\003'
	tty_wait 'agent-run: stopped'
	tty_wait '> ' 2
	tty_type $'half'
	tty_wait 'half'
	tty_type $'\003'
	tty_wait '> ' 3          # the line is dropped for a new prompt
	tty_type $'again\n'
	tty_wait 'quick'
	tty_type $'/quit\n'
	tty_end
	assert_equal "$(cat tty.rc)" 0
	grep -qxF 'agent-run: stopped' tty.out || fail "$(cat tty.out)"
	# the stopped turn committed nothing; the line dropped at the prompt was never sent
	assert_equal "$(agent-snap show c2 | jq -r 'select(.role == "user") | .content[0].text')" again
}

@test "chat: a paused tool request is asked, and the chat goes on after it" {
	export DEPLOY_LOG="$BATS_TEST_TMPDIR/deploy.log"
	tty_start agent-run --model "script/$FIXTURES/scripts/deploy.ndjson" \
		--tool "$FIXTURES/tools/deploy.json" --session c3
	tty_wait '/help for commands'
	tty_type $'deploy it\n'
	tty_wait 'approve deploy {"env":"prod"}? [y/N] '
	tty_type $'y\n'
	tty_wait 'Done.'
	tty_wait '> ' 2
	tty_type $'/usage\n'
	tty_wait 'usage: no model has reported any yet'
	tty_type $'/quit\n'
	tty_end
	grep -qF 'tool deploy ok {"deployed":"prod"}' tty.out || fail "$(cat tty.out)"
	assert_equal "$(cat "$DEPLOY_LOG")" '{"env":"prod"}'
	assert_equal "$(cat tty.rc)" 0
}

@test "chat: not without a terminal on both stdin and stdout, nor with -m or --format ndjson" {
	# stdin a pipe: its text is one turn, as ever
	run -0 --separate-stderr agent-run --no-store --model echo --format json <<<'piped'
	assert_equal "$(jq -c .message.content[0].text <<<"$output")" '"piped\n"'
	tty_start sh -c 'agent-run --no-store --model echo --format ndjson </dev/null | cat'
	tty_end
	! grep -qF 'chat with' tty.out || fail "$(cat tty.out)"
	tty_start agent-run --no-store --model echo -m 'just this'
	tty_end
	! grep -qF 'chat with' tty.out || fail "$(cat tty.out)"
	grep -qxF 'just this' tty.out
}

@test "chat: the history file keeps lines across chats (0600, no key-shaped or blank-led line); --no-history" {
	local hist=$XDG_STATE_HOME/agentkit/chat_history
	tty_start agent-run --model echo --session h1
	tty_wait '/help for commands'
	tty_type $'first line\n'
	tty_wait '> ' 2
	tty_type $' not this one\n'
	tty_wait '> ' 3
	tty_type $'use sk-proj-abc123 now\n'
	tty_wait '> ' 4
	tty_type $'\004'
	tty_end
	assert_equal "$(stat -c %a "$hist")" 600
	assert_equal "$(stat -c %a "$XDG_STATE_HOME/agentkit")" 700
	grep -q 'first' "$hist" || fail "$(cat "$hist")"
	! grep -q 'abc123\|this' "$hist" || fail "$(cat "$hist")"
	# the next chat: the up arrow brings the line back
	tty_start agent-run --model echo --session h2
	tty_wait '/help for commands'
	tty_type $'\033[A'
	tty_wait 'first line'
	tty_type $'\n'
	tty_wait_joined 'first linefirst line> '
	tty_type $'\004'
	tty_end
	assert_equal "$(agent-snap show h2 | jq -r 'select(.role == "user") | .content[0].text')" 'first line'
	# --no-history: nothing comes back, nothing is written
	cp "$hist" before
	tty_start agent-run --model echo --session h3 --no-history
	tty_wait '/help for commands'
	# with no history the up arrow rings the bell (and may draw the prompt
	# again): wait for that, then for the echoed reply and the prompt after it
	tty_type $'\033[A'
	tty_wait $'\a'
	tty_type $'fresh\n'
	tty_wait_joined 'freshfresh> '
	tty_type $'\004'
	tty_end
	assert_equal "$(agent-snap show h3 | jq -r 'select(.role == "user") | .content[0].text')" fresh
	cmp before "$hist"
}
