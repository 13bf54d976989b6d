#!/usr/bin/env bats
# What a hostile or careless command can do to agent-run: tools, custom-agent
# handlers and transforms that print without end are failed at their output
# limits with agent-run's memory bounded; one whose background child holds
# the pipes ends when it has exited and printed its answer, not at the
# timeout (docs/agent-run.md "Tools", docs/custom-agents.md,
# docs/transforms.md).

load test_helper

setup() {
	common_setup
	requires jq python3
	printf '%s\n' '{"toolRequests":[{"name":"t","ref":"1","input":{}}]}' '{"text":"done"}' >model.ndjson
}

# tool MANIFEST-JSON BODY: ./t.json and the executable ./t running BODY
# after reading its input.
tool() {
	printf '%s\n' "$1" >t.json
	printf '#!/bin/sh\ncat >/dev/null\n%s\n' "$2" >t
	chmod +x t
}

# measured CMD...: run CMD; its largest descendant's peak RSS (KiB) goes to
# ./maxrss.  Every command here runs under `timeout`, a bound on the test
# and not an assertion on its speed.  Under AddressSanitizer freed memory
# sits in a quarantine of 256 MiB by default, which would count as agent-run's
# own; a 16 MiB one keeps the bound about agent-run.
measured() {
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16" python3 -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[2:])
open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(r.returncode)' maxrss "$@"
}

run_tool() { timeout 60 agent-run --no-store --model script/model.ndjson --tool ./t.json -m hi; }

# ---- output limits: tools ----

@test "a tool printing parts without end fails at 100000 lines, the default; its group is killed" {
	tool '{"timeout": "30s"}' 'echo $$ >tool.pid; exec yes '"'"'{"part":{"text":"x"}}'"'"
	run -1 --separate-stderr run_tool
	[ "$stderr" = 'agent-run: generate: tool "t" failed: wrote more than 100000 lines on stdout (the limit; set "maxOutputLines" in ./t.json to raise it)' ]
	[ "$(last | jq -c '[.output.finishReason, .output.error.status]')" = '["failed","INTERNAL"]' ]
	gone "$(cat tool.pid)"
}

@test "a tool printing big parts without end fails at 64 MiB, the default, and agent-run's memory stays bounded" {
	tool '{"timeout": "30s"}' 'exec yes "{\"part\":{\"text\":\"$(head -c 65000 /dev/zero | tr "\0" a)\"}}"'
	run -1 --separate-stderr measured timeout 60 agent-run --no-store --model script/model.ndjson --tool ./t.json -m hi
	[ "$stderr" = 'agent-run: generate: tool "t" failed: wrote more than 67108864 bytes on stdout (the limit; set "maxOutputBytes" in ./t.json to raise it)' ]
	# 64 MiB of parts are held; without the limit it grows until the timeout.
	[ "$(cat maxrss)" -lt $((512 * 1024)) ]
}

@test "the manifest lowers the limits: maxOutputLines, maxOutputBytes (a size or a number)" {
	tool '{"maxOutputLines": 3}' 'for i in 1 2 3 4; do echo "{\"part\":{\"text\":\"$i\"}}"; done; echo "{\"output\":1}"'
	run -1 --separate-stderr run_tool
	[ "$stderr" = 'agent-run: generate: tool "t" failed: wrote more than 3 lines on stdout (the limit; set "maxOutputLines" in ./t.json to raise it)' ]
	tool '{"maxOutputBytes": "1K"}' 'head -c 2000 /dev/zero | tr "\0" a'
	run -1 --separate-stderr run_tool
	[ "$stderr" = 'agent-run: generate: tool "t" failed: wrote more than 1024 bytes on stdout (the limit; set "maxOutputBytes" in ./t.json to raise it)' ]
	# At the limit is fine.
	tool '{"maxOutputLines": 3, "maxOutputBytes": 36}' 'echo "{\"part\":{\"text\":\"a\"}}"; echo; echo "{\"output\":1}"'
	run -0 --separate-stderr run_tool
	[ "$(last | jq -c '.output.state.messages[2].content[0].toolResponse | [.output, .content]')" = '[1,[{"text":"a"}]]' ]
}

@test "JSON values are charged too: one per 64 bytes of maxOutputBytes, counted before parsing" {
	# 1103 values (the object, the part, the array and 1100 numbers)
	# against 65536 / 64 = 1024: a flood of tiny values costs agent-run
	# far more memory than its bytes.
	tool '{"maxOutputBytes": "64K"}' 'printf "{\"part\":{\"n\":[0%s]}}\n" "$(yes ,0 | head -n 1099 | tr -d "\n")"; echo "{\"output\":1}"'
	run -1 --separate-stderr run_tool
	[ "$stderr" = 'agent-run: generate: tool "t" failed: wrote more than 1024 JSON values on stdout (the limit, one per 64 bytes of "maxOutputBytes"; set it in ./t.json to raise it)' ]
	# 503 + 2 fit; commas and brackets inside strings are text.
	tool '{"maxOutputBytes": "64K"}' 'printf "{\"part\":{\"n\":[0%s],\"s\":\"%s\"}}\n" "$(yes ,0 | head -n 499 | tr -d "\n")" "$(yes "{[,\\\"" | head -n 2000 | tr -d "\n")"; echo "{\"output\":1}"'
	run -0 --separate-stderr run_tool
	[ "$(last | jq -c '.output.state.messages[2].content[0].toolResponse.content[0] | [(.n | length), (.s | length)]')" = '[500,8000]' ]
}

@test "the manifest raises maxOutputLines past the default; blank lines count" {
	tool '{"timeout": "30s"}' 'yes "" | head -n 100000; echo "{\"output\":1}"'
	run -1 --separate-stderr run_tool
	[ "$stderr" = 'agent-run: generate: tool "t" failed: wrote more than 100000 lines on stdout (the limit; set "maxOutputLines" in ./t.json to raise it)' ]
	tool '{"timeout": "30s", "maxOutputLines": 100001}' 'yes "" | head -n 100000; echo "{\"output\":1}"'
	run -0 --separate-stderr run_tool
	[ "$(last | jq -c '.output.state.messages[2].content[0].toolResponse.output')" = 1 ]
}

@test "bad output limits in a manifest are refused when it is read" {
	tool '{"maxOutputLines": 0}' 'echo "{\"output\":1}"'
	run -101 --separate-stderr run_tool
	[ "$stderr" = "agent-run: tool manifest ./t.json: 'maxOutputLines' must be a positive integer" ]
	tool '{"maxOutputLines": "10"}' 'echo "{\"output\":1}"'
	run -101 --separate-stderr run_tool
	[ "$stderr" = "agent-run: tool manifest ./t.json: 'maxOutputLines' must be a positive integer" ]
	tool '{"maxOutputBytes": "lots"}' 'echo "{\"output\":1}"'
	run -101 --separate-stderr run_tool
	[ "$stderr" = "agent-run: tool manifest ./t.json: 'maxOutputBytes' must be a positive size (a number of bytes, or \"16M\")" ]
	tool '{"maxOutputBytes": -5}' 'echo "{\"output\":1}"'
	run -101 --separate-stderr run_tool
	[ "$stderr" = "agent-run: tool manifest ./t.json: 'maxOutputBytes' must be a positive size (a number of bytes, or \"16M\")" ]
}

# ---- output limits: custom-agent handlers ----

@test "a handler adding messages without end fails the turn at 100000 lines, the default; memory stays bounded" {
	printf '#!/bin/sh\necho $$ >handler.pid\nread -r turn\nexec yes %s\n' \
		"'{\"message\":{\"role\":\"model\",\"content\":[{\"text\":\"x\"}]}}'" >h.sh
	chmod +x h.sh
	AGENTKIT_EXEC_TIMEOUT=30s run -1 --separate-stderr measured timeout 60 agent-run --no-store --exec ./h.sh -m hi
	msg="custom agent './h.sh' wrote more than 100000 lines on stdout in one turn (the limit; set AGENTKIT_EXEC_MAX_LINES to raise it)"
	[ "$stderr" = "agent-run: $msg" ]
	[ "$(last | jq -c '[.output.error.status, .output.error.message == $m, [.output.state.messages[].role]]' --arg m "$msg")" = '["INTERNAL",true,[]]' ]
	[ "$(cat maxrss)" -lt $((512 * 1024)) ]
	gone "$(cat handler.pid)"
}

@test "AGENTKIT_EXEC_MAX_LINES and AGENTKIT_EXEC_MAX_BYTES set a handler's limits per turn" {
	cat >h.sh <<-'EOF'
	#!/bin/sh
	while read -r turn; do
		echo '{"modelChunk":{"content":[{"text":"a"}]}}'
		echo '{"modelChunk":{"content":[{"text":"b"}]}}'
		echo '{"done":{"finishReason":"stop"}}'
	done
	EOF
	chmod +x h.sh
	# Three lines a turn fit a limit of three, every turn.
	AGENTKIT_EXEC_MAX_LINES=3 run -0 --separate-stderr agent-run --no-store --exec ./h.sh -m one -m two
	[ "$(last | jq -r .output.finishReason)" = stop ]
	AGENTKIT_EXEC_MAX_LINES=2 run -1 --separate-stderr agent-run --no-store --exec ./h.sh -m one
	[ "$stderr" = "agent-run: custom agent './h.sh' wrote more than 2 lines on stdout in one turn (the limit; set AGENTKIT_EXEC_MAX_LINES to raise it)" ]
	AGENTKIT_EXEC_MAX_BYTES=50 run -1 --separate-stderr agent-run --no-store --exec ./h.sh -m one
	[ "$stderr" = "agent-run: custom agent './h.sh' wrote more than 50 bytes on stdout in one turn (the limit; set AGENTKIT_EXEC_MAX_BYTES to raise it)" ]
	AGENTKIT_EXEC_MAX_LINES=none run -100 --separate-stderr agent-run --no-store --exec ./h.sh -m one
	[[ "$stderr" == "agent-run: AGENTKIT_EXEC_MAX_LINES: invalid number 'none'"* ]]
}

@test "a handler's JSON values are charged against AGENTKIT_EXEC_MAX_BYTES" {
	printf '#!/bin/sh\nread -r turn\necho "{\\"message\\":{\\"content\\":[{}%s]}}"\necho "{\\"done\\":{}}"\n' \
		"$(yes ,{} | head -n 1100 | tr -d '\n')" >h.sh
	chmod +x h.sh
	AGENTKIT_EXEC_MAX_BYTES=64K run -1 --separate-stderr agent-run --no-store --exec ./h.sh -m one
	[ "$stderr" = "agent-run: custom agent './h.sh' wrote more than 1024 JSON values on stdout in one turn (the limit; set AGENTKIT_EXEC_MAX_BYTES to raise it)" ]
}

@test "a handler printing without end after its last turn is stopped at the limit" {
	cat >h.sh <<-'EOF'
	#!/bin/sh
	read -r turn
	echo '{"done":{}}'
	read -r eof
	exec yes '{"custom":{}}'
	EOF
	chmod +x h.sh
	AGENTKIT_EXEC_MAX_LINES=1000 run -1 --separate-stderr timeout 60 agent-run --no-store --exec ./h.sh -m one
	[ "$stderr" = "agent-run: custom agent './h.sh' wrote more than 1000 lines on stdout after the last turn (the limit; set AGENTKIT_EXEC_MAX_LINES to raise it)" ]
}

# ---- output limits: transforms and docs ----

@test "a stream transform answering with an endless line fails closed at 64 MiB, the default; memory stays bounded" {
	run -1 --separate-stderr measured timeout 60 agent-run --no-store --model echo --stream-transform "read -r l; yes | tr -d '\n'" -m hi
	[ "$stderr" = "agent-run: stream transform 'read -r l; yes | tr -d '\n'' wrote a line longer than 67108864 bytes (the limit; set AGENTKIT_TRANSFORM_MAX_LINE to raise it)" ]
	[ "$(last | jq -c '[.output.finishReason, .output.error.status]')" = '["failed","INTERNAL"]' ]
	[ "$(cat maxrss)" -lt $((512 * 1024)) ]
}

@test "AGENTKIT_TRANSFORM_MAX_LINE caps one answer, blank lines before it included" {
	REDACT="jq --unbuffered -c 'del(.custom.secret)'"
	AGENTKIT_TRANSFORM_MAX_LINE=100 run -1 --separate-stderr agent-run --no-store --model echo --state-transform "$REDACT" -m hello
	[ "$(last | jq -c .output.error)" = "{\"status\":\"INTERNAL\",\"message\":\"state transform '$REDACT' wrote a line longer than 100 bytes (the limit; set AGENTKIT_TRANSFORM_MAX_LINE to raise it)\"}" ]
	AGENTKIT_TRANSFORM_MAX_LINE=1K run -0 --separate-stderr agent-run --no-store --model echo --state-transform "$REDACT" -m hello
	[ "$(last | jq -c .output.state.messages[1])" = '{"content":[{"text":"hello"}],"role":"model"}' ]
	AGENTKIT_TRANSFORM_MAX_LINE=1K run -1 --separate-stderr timeout 60 agent-run --no-store --model echo --stream-transform 'exec yes ""' -m hi
	[ "$stderr" = "agent-run: stream transform 'exec yes \"\"' wrote more than 1025 bytes on stdout for one answer (the limit; set AGENTKIT_TRANSFORM_MAX_LINE to raise it)" ]
}

@test "a docs command printing without end fails the turn at its limit (64 MiB, 1048576 JSON values)" {
	run -1 --separate-stderr timeout 60 agent-run --no-store --model echo --docs 'exec yes "\"doc\","' -m hi
	[ "$(last | jq -c .output.error)" = "{\"status\":\"INTERNAL\",\"message\":\"docs: docs command 'exec yes \\\"\\\\\\\"doc\\\\\\\",\\\"' wrote more than 1048576 JSON values on stdout (the limit)\"}" ]
}

# ---- a background child holding the pipes ----

@test "a tool whose background child holds stdout ends when it has exited with its output; the child is killed" {
	tool '{"timeout": "30s"}' 'sleep 100 &
echo $! >child.pid
echo "{\"output\":\"fast\"}"'
	run -0 --separate-stderr run_tool
	[ "$(last | jq -c '[.output.finishReason, .output.state.messages[2].content[0].toolResponse.output]')" = '["stop","fast"]' ]
	[ "$stderr" = "" ]
	wait_for 10 gone "$(cat child.pid)"
	# Also when stdout is elsewhere and only stderr is held.
	tool '{"timeout": "30s"}' 'sleep 100 >/dev/null &
echo $! >child.pid
echo "{\"output\":\"fast\"}"'
	run -0 --separate-stderr run_tool
	wait_for 10 gone "$(cat child.pid)"
}

@test "a failing tool whose background child holds stdout fails with its exit status, not the timeout" {
	tool '{"timeout": "30s"}' 'sleep 100 &
echo $! >child.pid
echo nope >&2
exit 3'
	run -1 --separate-stderr run_tool
	[ "$stderr" = 'agent-run: generate: tool "t" failed: exited with status 3: nope' ]
	wait_for 10 gone "$(cat child.pid)"
}

@test "a tool that exited 0 without its final line is waited for: its child may still print it" {
	tool '{"timeout": "30s"}' '(sleep 0.5; echo "{\"output\":\"late\"}") &'
	run -0 --separate-stderr run_tool
	[ "$(last | jq -c .output.state.messages[2].content[0].toolResponse.output)" = '"late"' ]
	# ... until the timeout, which then says what happened.
	tool '{"timeout": "1s"}' 'sleep 100 &
echo $! >child.pid'
	run -1 --separate-stderr run_tool
	[ "$stderr" = 'agent-run: generate: tool "t" failed: timed out after 1000ms (it had exited without a final line; a process it started kept its output open)' ]
	wait_for 10 gone "$(cat child.pid)"
}

@test "a handler whose background child holds stdout ends with the invocation, not at the timeout" {
	cat >h.sh <<-'EOF'
	#!/bin/sh
	sleep 100 &
	echo $! >child.pid
	while read -r turn; do echo '{"done":{"finishReason":"stop"}}'; done
	EOF
	chmod +x h.sh
	AGENTKIT_EXEC_TIMEOUT=30s run -0 --separate-stderr timeout 20 agent-run --no-store --exec ./h.sh -m one -m two
	[ "$(last | jq -r .output.finishReason)" = stop ]
	[ "$stderr" = "" ]
	wait_for 10 gone "$(cat child.pid)"
}

@test "a handler that exits mid-turn while its child holds stdout fails with its exit status" {
	cat >h.sh <<-'EOF'
	#!/bin/sh
	sleep 100 &
	echo $! >child.pid
	read -r turn
	exit 5
	EOF
	chmod +x h.sh
	AGENTKIT_EXEC_TIMEOUT=30s run -1 --separate-stderr timeout 20 agent-run --no-store --exec ./h.sh -m one
	[ "$stderr" = "agent-run: custom agent './h.sh' exited with status 5" ]
	wait_for 10 gone "$(cat child.pid)"
}

@test "a docs command whose background child holds stdout answers at once" {
	AGENTKIT_TRANSFORM_TIMEOUT=30s run -0 --separate-stderr timeout 20 agent-run --no-store --model echo --docs 'sleep 100 & echo $! >child.pid; echo "[\"d1\"]"' -m hi
	[ "$(last | jq -r .output.finishReason)" = stop ]
	wait_for 10 gone "$(cat child.pid)"
}
