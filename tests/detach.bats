#!/usr/bin/env bats
# Detached runs end to end (runtime-semantics §2, §4.2; docs/detach.md):
# agent-run --detach and {"detach":true}, the background worker, its
# heartbeat, agent-abort, agent-wait, expiry after kill -9.

load test_helper

setup() {
	common_setup
	D="$FIXTURES/detach"
	export HANG_PIDFILE="$BATS_TEST_TMPDIR/hang.pids"
	export AGENTKIT_HEARTBEAT_INTERVAL=100ms AGENTKIT_HEARTBEAT_TIMEOUT=5s
	LOGS=$(logs_dir)
	AR=(agent-run --model "script/$D/convo.ndjson" --tool "$D/greet.json" --tool "$D/ask.json"
		--tool "$D/hang.json" --tool "$D/stubborn.json")
}

# Workers log to files, so a sanitizer report (tests on build-san) would go
# unseen: once the workers have exited, their logs must have none.
teardown() {
	local log pid
	for log in "$LOGS"/*.log; do
		[ -f "$log" ] || continue
		pid=$(sed -n '1s/.*agent-run\[\([0-9]*\)\].*/\1/p' "$log")
		[ -z "$pid" ] || wait_for 20 gone "$pid"
	done
	if grep -l "Sanitizer\|runtime error:" "$LOGS"/*.log 2>/dev/null; then
		cat "$LOGS"/*.log >&2
		return 1
	fi
}

status_is() { [ "$(agent-snap -m "$1" | jq -r .status)" = "$2" ]; }
worker_pid() { sed -n '1s/.*agent-run\[\([0-9]*\)\].*/\1/p' "$LOGS/$1.log"; }

@test "--detach on the first input: the detached output at once, exit 0, the worker completes the row" {
	run -0 --separate-stderr "${AR[@]}" --detach -m one -m two
	[ "${#lines[@]}" = 1 ]
	assert_equal "$(jq -c '.output | keys' <<<"$output")" '["finishReason","sessionId","snapshotId"]'
	assert_equal "$(jq -r .output.finishReason <<<"$output")" detached
	assert_equal "$stderr" ""
	id=$(id_of "$output")
	sid=$(jq -r .output.sessionId <<<"$output")
	run -0 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, .finishReason, .sessionId == "'"$sid"'", has("parentId"), has("heartbeatAt"), has("error")]' <<<"$output")" \
		'["completed","stop",true,false,false,false]'
	assert_equal "$(jq -c '[.state.messages[] | .role + ":" + .content[0].text]' <<<"$output")" \
		'["user:one","model:ok 0","user:two","model:ok 1"]'
	# One row: the pending row, finalized (no turn-end rows in the background).
	assert_equal "$(agent-snap log "$sid" | wc -l)" 1
	# The log beside the store, private.
	log="$LOGS/$id.log"
	assert_equal "$(stat -c %a "$LOGS") $(stat -c %a "$log")" "700 600"
	grep -q "worker started: agent inline, session $sid, snapshot $id, parent (none), 2 inputs" "$log"
	grep -q "finalized completed, finish reason stop" "$log"
	# agent-snap prints it; a snapshot without a worker has none.
	run -0 --separate-stderr agent-snap worker-log "$id"
	assert_equal "$output" "$(cat "$log")"
	run -4 --separate-stderr agent-snap worker-log no-such-snapshot
	assert_equal "$stderr" "agent-snap: no worker log for snapshot 'no-such-snapshot' (only detached runs have one)"
}

# after_row LINE...: once turn one's row is written, print the lines in
# one write (a detach that arrives after the turn it follows has ended,
# with the lines behind it already there when it is read).
after_row() {
	wait_for 20 eval '[ -n "$(agent-snap sessions 2>/dev/null)" ]'
	printf '%s\n' "$@" >"$BATS_TEST_TMPDIR/after-row"
	cat "$BATS_TEST_TMPDIR/after-row"       # one write: bash writes line by line
}

@test "a detach line mid-conversation: earlier turns stream and commit, the rest runs in the background" {
	run -0 --separate-stderr "${AR[@]}" < <(exec 3>&-; msg one; after_row '{"detach":true,"message":{"content":[{"text":"two"}]}}' "$(msg three)")
	assert_equal "${#lines[@]}" 3
	assert_equal "$(jq -c .modelChunk <<<"${lines[0]}")" '{"content":[{"text":"ok 0"}],"index":0,"role":"model"}'
	first=$(jq -r .turnEnd.snapshotId <<<"${lines[1]}")
	id=$(id_of "${lines[2]}")
	[ "$first" != "$id" ]
	run -0 timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, .parentId]' <<<"$output")" '["completed","'"$first"'"]'
	assert_equal "$(jq -c '[.state.messages[].content[0].text]' <<<"$output")" \
		'["one","ok 0","two","ok 1","three","ok 2"]'
	# Resuming the session continues from the finalized row.
	run -0 "${AR[@]}" --session "$(jq -r .sessionId <<<"$output")" -m four
	assert_equal "$(last | jq -c '[.output.message.content[0].text]')" '["ok 3"]'
}

@test "a bare {\"detach\":true} runs no extra turn; the row keeps the state so far" {
	run -0 --separate-stderr "${AR[@]}" < <(exec 3>&-; msg one; after_row '{"detach":true}')
	first=$(jq -r .turnEnd.snapshotId <<<"${lines[1]}")
	id=$(id_of "${lines[2]}")
	run -0 timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, .parentId, [.state.messages[].content[0].text]]' <<<"$output")" \
		'["completed","'"$first"'",["one","ok 0"]]'
}

@test "detach needs a store: a failed output, FAILED_PRECONDITION, exit 5" {
	run -5 --separate-stderr "${AR[@]}" --no-store --detach -m one
	assert_equal "$(last | jq -c '.output | [.finishReason, .error]')" \
		'["failed",{"status":"FAILED_PRECONDITION","message":"agent \"inline\": detach requires a session store"}]'
	assert_equal "$stderr" 'agent-run: agent "inline": detach requires a session store'
}

@test "--detach reads all of stdin first: a malformed line fails before anything is written" {
	run -101 --separate-stderr "${AR[@]}" --detach < <(msg one; echo '{"message":')
	assert_equal "$(last | jq -r .output.finishReason)" failed
	run -0 agent-snap sessions
	assert_output ""
}

@test "background outcomes: agent-wait's exit code agrees with agent-run's" {
	for case in "fail 1 failed failed" "long 7 completed length" "ask 6 completed interrupted" "one 0 completed stop"; do
		set -- $case
		run -"$2" "${AR[@]}" -m "$1"
		run -0 "${AR[@]}" --detach -m "$1"
		id=$(id_of "$output")
		run -"$2" --separate-stderr timeout 20 agent-wait "$id"
		assert_equal "$(jq -r '.status + " " + .finishReason' <<<"$output")" "$3 $4"
	done
	run -0 "${AR[@]}" --detach -m fail
	run -1 timeout 20 agent-wait "$(id_of "$output")"
	assert_equal "$(jq -c .error <<<"$output")" '{"status":"UNAVAILABLE","message":"generate: model melted"}'
	# max turns: aborted (2) both ways.
	run -2 "${AR[@]}" --max-turns 1 -m loop
	run -0 "${AR[@]}" --max-turns 1 --detach -m loop
	run -2 timeout 20 agent-wait "$(id_of "$output")"
	assert_equal "$(jq -c '[.status, .finishReason, .error.message]' <<<"$output")" \
		'["aborted","aborted","generate: exceeded maximum tool call iterations (1)"]'
}

@test "abort while a slow model streams: aborted with the state through the last finished turn" {
	run -0 "${AR[@]}" -m one
	parent=$(last | jq -r .output.snapshotId)
	run -0 "${AR[@]}" --snapshot "$parent" --detach -m slow
	id=$(id_of "$output")
	wait_for 10 beating "$id"
	run -0 agent-abort "$id"
	assert_output '{"snapshotId":"'"$id"'","previousStatus":"pending","status":"aborting"}'
	run -2 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, .finishReason, .parentId, has("heartbeatAt"), [.state.messages[].content[0].text]]' <<<"$output")" \
		'["aborted","aborted","'"$parent"'",false,["one","ok 0"]]'
	grep -q "the abort flip was seen" "$LOGS/$id.log"
	# An aborted row with state resumes.
	run -0 "${AR[@]}" --snapshot "$id" -m two
	assert_equal "$(last | jq -r .output.message.content[0].text)" "ok 1"
}

@test "abort while a tool runs: its process group is terminated, the row aborted" {
	run -0 "${AR[@]}" --detach -m hang
	id=$(id_of "$output")
	wait_for 10 test -s "$HANG_PIDFILE"
	wait_for 10 eval '[ "$(wc -l <"$HANG_PIDFILE")" = 2 ]'
	run -0 agent-abort "$id"
	run -2 timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, .finishReason]' <<<"$output")" '["aborted","aborted"]'
	for pid in $(cat "$HANG_PIDFILE"); do
		wait_for 10 eval "! kill -0 $pid 2>/dev/null"
	done
}

@test "abort of a tool that ignores SIGTERM: SIGKILL after the grace" {
	run -0 "${AR[@]}" --detach -m stuck
	id=$(id_of "$output")
	wait_for 10 test -s "$HANG_PIDFILE"
	pid=$(cat "$HANG_PIDFILE")
	run -0 agent-abort "$id"
	run -2 timeout 20 agent-wait "$id"
	wait_for 10 eval "! kill -0 $pid 2>/dev/null"
}

@test "abort of settled and missing rows; wait on a missing row" {
	run -0 "${AR[@]}" --detach -m one
	id=$(id_of "$output")
	run -0 timeout 20 agent-wait "$id"
	run -0 agent-abort "$id"
	assert_output '{"snapshotId":"'"$id"'","previousStatus":"completed","status":"completed"}'
	run -4 --separate-stderr agent-abort nope
	assert_equal "$stderr" "agent-abort: snapshot 'nope' not found"
	run -4 --separate-stderr agent-wait nope
}

@test "agent-abort --wait returns the row the worker finalized" {
	run -0 "${AR[@]}" --detach -m slow
	id=$(id_of "$output")
	wait_for 10 beating "$id"
	run -0 --separate-stderr timeout 20 agent-abort --wait --timeout 15s "$id"
	assert_output '{"snapshotId":"'"$id"'","previousStatus":"pending","status":"aborted"}'
}

@test "wait across processes: several waiters see the same finalized row" {
	run -0 "${AR[@]}" --detach -m slow
	id=$(id_of "$output")
	pids=()
	for i in 1 2 3; do
		timeout 30 agent-wait "$id" >"w$i.out" 2>&1 3>&- &
		pids+=($!)
	done
	wait_for 10 beating "$id"
	run -0 agent-abort "$id"
	for pid in "${pids[@]}"; do
		rc=0
		wait "$pid" || rc=$?
		assert_equal "$rc" 2
	done
	assert_equal "$(sort -u w*.out | wc -l)" 1
	assert_equal "$(jq -r .status w1.out)" aborted
}

@test "the worker heartbeats its row while it runs; a resume of the live row is refused" {
	run -0 "${AR[@]}" --detach -m slow
	id=$(id_of "$output")
	b1=$(agent-snap -m "$id" | jq -r .heartbeatAt)
	wait_for 10 eval '[ "$(agent-snap -m "$id" | jq -r .heartbeatAt)" != "$b1" ]'
	run -5 --separate-stderr "${AR[@]}" --snapshot "$id" -m more
	assert_equal "$stderr" "agent-run: snapshot \"$id\" is still pending: its detached invocation is still running; wait for it to finalize or abort it before resuming"
	run -0 agent-abort "$id"
	run -2 timeout 20 agent-wait "$id"
}

@test "readers take the worker's own heartbeat timeout when it is longer than theirs" {
	run -0 "${AR[@]}" --detach -m slow
	id=$(id_of "$output")
	wait_for 10 beating "$id"
	# the pending row says how long its worker may go without a beat (5s here)
	run -0 agent-snap export
	assert_equal "$(jq -s -c --arg id "$id" '[.[] | select(.snapshotId == $id) | .agentkit.heartbeatTimeout]' <<<"$output")" "[5000]"
	kill -9 "$(worker_pid "$id")"
	sleep 1
	# a reader with a shorter timeout does not declare it dead before that
	run -0 agent-snap -m --heartbeat-timeout 300ms "$id"
	assert_equal "$(jq -r .status <<<"$output")" pending
	run -3 timeout 20 agent-wait --heartbeat-timeout 300ms "$id"
	assert_equal "$(jq -r .status <<<"$output")" expired
}

# row_of ID: the raw row (export), agentkit's own members included.
row_of() { agent-snap export | jq -c --arg id "$1" 'select(.snapshotId == $id)'; }

@test "the row names the worker that ran it: agent-snap log shows its host and pid" {
	run -0 "${AR[@]}" --detach -m slow
	id=$(id_of "$output")
	sid=$(jq -r .output.sessionId <<<"$output")
	# the worker's first beat names it, at once
	wait_for 10 eval '[ "$(row_of "$id" | jq .agentkit.worker.pid)" = "$(worker_pid "$id")" ]'
	assert_equal "$(row_of "$id" | jq -c '.agentkit | [.epoch, .worker.host]')" "[1,\"$(hostname)\"]"
	timeout 20 agent-wait "$id" >/dev/null
	run -0 --separate-stderr agent-snap log "$sid"
	assert_equal "$(jq -c '.worker | [.host, .pid]' <<<"$output")" "[\"$(hostname)\",$(worker_pid "$id")]"
	# Genkit's own shape is untouched
	run -0 agent-snap -m "$id"
	assert_equal "$(jq 'has("worker") or has("agentkit")' <<<"$output")" false
}

@test "the fence: a worker whose lease another epoch holds stops at its next beat and commits nothing" {
	run -0 "${AR[@]}" --detach -m slow
	id=$(id_of "$output")
	wait_for 10 eval '[ "$(row_of "$id" | jq .agentkit.worker.pid)" = "$(worker_pid "$id")" ]'
	pid=$(worker_pid "$id")
	# another worker claims the row (what a re-claim does: the next epoch)
	now=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
	row_of "$id" | jq -c --arg now "$now" '.agentkit.epoch = 2 | .heartbeatAt = $now
		| .agentkit.worker = {"host": "other", "pid": 1}' >"$BATS_TEST_TMPDIR/claimed"
	run -0 agent-snap import "$BATS_TEST_TMPDIR/claimed"
	wait_for 20 gone "$pid"
	run -0 --separate-stderr agent-snap worker-log "$id"
	assert_line --partial "lease lost: the store refused a heartbeat (the lease is held by epoch 2 (host other, pid 1)); the turn was stopped and nothing is committed"
	refute_line --partial "finalized"
	# the row is as the new holder left it
	assert_equal "$(row_of "$id")" "$(cat "$BATS_TEST_TMPDIR/claimed")"
}

@test "SIGTERM to the worker finalizes the row aborted" {
	run -0 "${AR[@]}" --detach -m slow
	id=$(id_of "$output")
	wait_for 10 beating "$id"
	kill -TERM "$(worker_pid "$id")"
	run -2 timeout 20 agent-wait "$id"
	grep -q "stopped by signal 15" "$LOGS/$id.log"
}

@test "kill -9 of the worker at random moments: a consistent store, expired, resumable from the parent" {
	run -0 "${AR[@]}" -m one
	parent=$(last | jq -r .output.snapshotId)
	for i in $(seq 20); do
		# its worker's own heartbeat timeout, which readers take when it
		# is longer than theirs: 1s, so the row soon reads expired
		AGENTKIT_HEARTBEAT_TIMEOUT=1s run -0 "${AR[@]}" --snapshot "$parent" --detach -m slow
		id=$(id_of "$output")
		pid=$(worker_pid "$id")
		sleep "0.$((RANDOM % 4))$((RANDOM % 10))"
		kill -9 "$pid"
		# Dead: the row reads expired once its last beat is stale.
		run -3 timeout 20 agent-wait --heartbeat-timeout 300ms "$id"
		assert_equal "$(jq -r .status <<<"$output")" expired
		AGENTKIT_HEARTBEAT_TIMEOUT=300ms run -5 --separate-stderr "${AR[@]}" --snapshot "$id" -m again
		assert_equal "$stderr" "agent-run: snapshot \"$id\" is still pending but its worker stopped heartbeating and is presumed dead; abort it, then resume from its parent snapshot \"$parent\""
		run -0 agent-snap export
		run -0 "${AR[@]}" --snapshot "$parent" -m again
	done
	# Aborted while dead: aborting, then expired, with the aborting message.
	run -0 agent-abort "$id"
	AGENTKIT_HEARTBEAT_TIMEOUT=300ms run -5 --separate-stderr "${AR[@]}" --snapshot "$id" -m again
	assert_equal "$stderr" "agent-run: snapshot \"$id\" is still aborting but its worker stopped heartbeating and is presumed dead; resume from its parent snapshot \"$parent\""
	run -3 agent-wait --heartbeat-timeout 300ms "$id"
}

@test "a detached run from a shell with no terminal and stdin closed returns at once" {
	requires setsid timeout
	run -0 --separate-stderr timeout 10 setsid "${AR[@]}" --detach -m slow </dev/null
	id=$(id_of "$output")
	# The worker holds none of the caller's pipes: $(...) returns at once.
	out=$(timeout 10 setsid "${AR[@]}" --detach -m one </dev/null 2>&1)
	run -0 timeout 20 agent-wait "$(id_of "$out")"
	run -0 agent-abort "$id"
	run -2 timeout 20 agent-wait "$id"
}

@test "--format text: a one-line summary on stderr with the log's path" {
	run -0 --separate-stderr "${AR[@]}" --format text --detach -m one
	assert_output ""
	[[ "$stderr" =~ ^agent-run:\ detached,\ session\ [0-9a-f-]+,\ snapshot\ ([0-9a-f-]+)\ \(log:\ (.*)\)$ ]]
	assert_equal "${BASH_REMATCH[2]}" "$LOGS/${BASH_REMATCH[1]}.log"
	run -0 timeout 20 agent-wait "${BASH_REMATCH[1]}"
}

@test "heartbeat flags and variables are checked" {
	run -100 --separate-stderr "${AR[@]}" --heartbeat-interval 0 -m x
	run -100 --separate-stderr "${AR[@]}" --heartbeat-timeout soon -m x
	AGENTKIT_HEARTBEAT_INTERVAL=-1s run -100 --separate-stderr "${AR[@]}" -m x
	run -0 "${AR[@]}" --heartbeat-interval 50ms --heartbeat-timeout 1s --detach -m one
	run -0 timeout 20 agent-wait "$(id_of "$output")"
}

# worker_log_has ID LINE: the worker's log in the store has LINE
# (after the time and "agent-run[PID]: "), within 20 s.
log_text() { agent-snap worker-log "$1" 2>/dev/null | sed 's/^[^ ]* agent-run\[[0-9]*\]: //'; }
has_line() { log_text "$1" | grep -qxF -- "$2"; }
worker_log_has() { wait_for 20 has_line "$1" "$2"; }

@test "a worker without a log file still runs: stderr on /dev/null, its log in the store" {
	agent-snap import </dev/null >/dev/null     # a store, empty
	mkdir -p "$(dirname "$LOGS")"
	touch "$LOGS"
	run -0 --separate-stderr "${AR[@]}" --format text --detach -m one
	[[ "$stderr" =~ snapshot\ ([0-9a-f-]+)\ \(log:\ agent-snap\ worker-log\ ([0-9a-f-]+)\)$ ]] ||
		fail "stderr: $stderr"
	id=${BASH_REMATCH[1]}
	run -0 timeout 20 agent-wait "$id"
	worker_log_has "$id" "stderr goes to /dev/null: cannot keep worker logs in '$LOGS': Not a directory"
	worker_log_has "$id" "finalized completed, finish reason stop"
	[ -f "$LOGS" ] && [ ! -s "$LOGS" ]
	# the worker's stderr was /dev/null, left as it was
	assert_equal "$(stat -c %a /dev/null)" 666
	rm "$LOGS"
}

@test "a worker log directory others can write to is refused, as a store directory is" {
	agent-snap import </dev/null >/dev/null     # a store, empty
	mkdir -p "$LOGS"
	chmod 777 "$LOGS"
	run -0 --separate-stderr "${AR[@]}" --detach -m one
	id=$(id_of "$output")
	run -0 timeout 20 agent-wait "$id"
	worker_log_has "$id" "stderr goes to /dev/null: refusing worker log directory '$LOGS': it is writable by group and others (mode 0777); fix it with: chmod 700 '$LOGS'"
	[ -z "$(ls -A "$LOGS")" ]
	[ "$(stat -c %a "$LOGS")" = 777 ]
	chmod 770 "$LOGS"
	run -0 --separate-stderr "${AR[@]}" --detach -m one
	id=$(id_of "$output")
	worker_log_has "$id" "stderr goes to /dev/null: refusing worker log directory '$LOGS': it is writable by its group (mode 0770); fix it with: chmod 700 '$LOGS'"
	if is_pg; then
		# this host's state directory: a link there is refused too (beside
		# an LMDB store, the store's own check refuses it)
		mkdir -m 700 elsewhere
		rmdir "$LOGS"
		ln -s "$BATS_TEST_TMPDIR/elsewhere" "$LOGS"
		run -0 --separate-stderr "${AR[@]}" --detach -m one
		id=$(id_of "$output")
		worker_log_has "$id" "stderr goes to /dev/null: refusing worker log directory '$LOGS': it is a symlink (make it a directory of its own: agentkit never follows a link there)"
		[ -z "$(ls -A elsewhere)" ]
		rm "$LOGS"
		mkdir "$LOGS"
	fi
	[ -z "$(ls -A "$LOGS")" ]
	chmod 700 "$LOGS"
	run -0 --separate-stderr "${AR[@]}" --detach -m one
	id=$(id_of "$output")
	run -0 timeout 20 agent-wait "$id"
	wait_for 20 eval 'grep -q "finalized completed" "$LOGS/$id.log"'
}

@test "rm and prune remove the worker logs of the rows they delete, and no others" {
	run -0 --separate-stderr "${AR[@]}" --detach -m one
	a=$(id_of "$output")
	sid=$(jq -r .output.sessionId <<<"$output")
	timeout 20 agent-wait "$a" >/dev/null
	run -0 --separate-stderr "${AR[@]}" --detach --session "$sid" -m two
	b=$(id_of "$output")
	run -0 --separate-stderr "${AR[@]}" --detach -m three
	c=$(id_of "$output")
	timeout 20 agent-wait "$b" "$c" >/dev/null
	pids="$(worker_pid "$a") $(worker_pid "$b")"
	for pid in $pids; do wait_for 20 gone "$pid"; done
	logs=$LOGS
	for x in "$a" "$b" "$c"; do worker_log_has "$x" "finalized completed, finish reason stop"; done
	run -0 agent-snap prune --keep 1 "$sid"
	assert_output '{"deleted":1}'
	assert_equal "$([ -e "$logs/$a.log" ] || echo gone) $([ -e "$logs/$b.log" ] && echo kept)" "gone kept"
	run -4 --separate-stderr agent-snap worker-log "$a"
	assert_equal "$stderr" "agent-snap: no worker log for snapshot '$a' (only detached runs have one)"
	run -0 agent-snap worker-log "$b"
	run -0 agent-snap rm "$sid"
	assert_output "{\"sessionId\":\"$sid\",\"deleted\":1}"
	assert_equal "$([ -e "$logs/$b.log" ] || echo gone) $([ -e "$logs/$c.log" ] && echo kept)" "gone kept"
	run -4 agent-snap worker-log "$b"
	run -0 agent-snap worker-log "$c"
	# an ID with a slash never names a file outside the logs
	echo secret >"$LOGS/../x.log"
	run -4 --separate-stderr agent-snap worker-log ../x
	assert_equal "$stderr" "agent-snap: no worker log for snapshot '../x' (only detached runs have one)"
}

@test "agent-snap show of a failed and an aborted run: the input that did not commit, the error, the finish reason; exit 0" {
	run -0 "${AR[@]}" --session sf --detach -m fail
	id=$(id_of "$output")
	run -1 timeout 20 agent-wait "$id"
	run -0 --separate-stderr agent-snap show -f text sf
	assert_output "user (not kept: the turn did not commit): fail

-- failed, finish reason failed: generate: model melted (UNAVAILABLE)"
	assert_equal "$stderr" ""
	run -0 --separate-stderr agent-snap show sf
	assert_output "{\"snapshotId\":\"$id\",\"status\":\"failed\",\"finishReason\":\"failed\",\"error\":{\"status\":\"UNAVAILABLE\",\"message\":\"generate: model melted\"},\"input\":\"fail\"}"
	run -0 --separate-stderr agent-snap show --format json sf
	assert_output "{\"snapshotId\":\"$id\",\"status\":\"failed\",\"finishReason\":\"failed\",\"error\":{\"status\":\"UNAVAILABLE\",\"message\":\"generate: model melted\"},\"input\":\"fail\",\"sessionId\":\"sf\",\"messages\":[]}"
	# After a turn that committed: its messages, then the turn that did not.
	run -0 "${AR[@]}" --session sa -m one
	run -0 "${AR[@]}" --session sa --detach -m slow
	id=$(id_of "$output")
	wait_for 10 beating "$id"
	run -0 agent-abort --wait "$id"
	run -0 --separate-stderr agent-snap show -f text sa
	assert_output "user: one

model: ok 0

user (not kept: the turn did not commit): slow

-- aborted, finish reason aborted"
	run -0 --separate-stderr agent-snap show sa
	assert_equal "${lines[2]}" "{\"snapshotId\":\"$id\",\"status\":\"aborted\",\"finishReason\":\"aborted\",\"input\":\"slow\"}"
}
