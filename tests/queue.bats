#!/usr/bin/env bats
# The work queue (docs/queue.md): agent-run --queue writes a run that
# carries its inputs, agent-worker claims and runs it, a run whose worker
# died is taken again from its parent, runs past their attempts fail, a
# key runs once, an agent's concurrency holds across workers, SIGTERM
# drains, --not-before delays, agent-abort settles queued runs.  Runs on
# both backends (tests/backends).

load test_helper

setup() {
	common_setup
	# a lease that a loaded machine (ASan, a busy CI host) keeps; the
	# tests of a lost worker shorten it (short_lease)
	export AGENTKIT_HEARTBEAT_INTERVAL=100ms AGENTKIT_HEARTBEAT_TIMEOUT=10s
	# slow: four chunks a second apart; anything else answers at once
	cat >slow.ndjson <<-'EOF'
	{"when": {"user": "slow"}, "chunks": ["a ", "b ", "c ", "d"], "delay": "1s"}
	{"when": {"match": "^tick"}, "chunks": ["t"], "delay": "300ms"}
	{"fallback": true, "text": "done"}
	EOF
	AR=(agent-run --model script/slow.ndjson)
	W=()
}

teardown() {
	local p
	# this test's workers and their children only: other runs of the
	# suite, and a user's own workers, may share the machine
	for p in "${W[@]}"; do
		pkill -9 -P "$p" 2>/dev/null || true
		kill -9 "$p" 2>/dev/null || true
	done
	[ -n "${BATS_TEST_COMPLETED:-}" ] || sed 's/^/# worker.log: /' worker.log >&3 2>/dev/null || true
	# the workers' and their children's reports (build-san) are in its log
	if grep "Sanitizer\|runtime error:" worker.log 2>/dev/null; then
		cat worker.log >&2
		return 1
	fi
}

# short_lease: leases of 2 s, for the tests that wait for one to run out.
short_lease() { export AGENTKIT_HEARTBEAT_TIMEOUT=2s; }

# worker ARGS...: an agent-worker in the background, its stderr in
# worker.log, its pid in $wpid (and killed by teardown).
worker() {
	agent-worker "$@" 2>>worker.log &
	wpid=$!
	W+=("$wpid")
}

# child_of PID: the agent-run a worker started, once it runs.
child_of() { pgrep -P "$1" -f 'agent-run --claimed' | head -1; }

run_status() { agent-snap runs | jq -r --arg id "$1" 'select(.snapshotId == $id) | .status'; }

# run_is ID STATUS: agent-snap runs shows ID in STATUS (for wait_for).
run_is() { [ "$(run_status "$1")" = "$2" ]; }

# has_child PID: the worker PID runs an agent-run (for wait_for).
has_child() { [ -n "$(child_of "$1")" ]; }

@test "--queue prints the detached line at once; a worker runs the inputs in order and settles the row" {
	short_lease
	run -0 --separate-stderr "${AR[@]}" --queue default -m one -m two
	assert_equal "$stderr" ""
	assert_equal "$(jq -r .output.finishReason <<<"$output")" detached
	id=$(id_of "$output")
	sid=$(jq -r .output.sessionId <<<"$output")
	# queued: nobody holds it, it never expires while it waits
	run -0 agent-snap runs
	assert_equal "$(jq -c '[.snapshotId == "'"$id"'", .queue, .agent, .status, .attempt, .maxAttempts, .worker]' <<<"$output")" \
		'[true,"default","inline","queued",0,null,null]'
	sleep 2.5
	assert_equal "$(agent-snap "$id" | jq -r .status)" pending
	run -0 --separate-stderr timeout 20 agent-worker --once
	assert_equal "$output" ""
	[[ "$stderr" == *"$id: claimed (queue default, agent inline, attempt 1)"* ]]
	[[ "$stderr" == *"$id: agent-run exited with status 0 after "* ]]
	run -0 agent-wait --timeout 10s "$id"
	assert_equal "$(jq -c '[.status, .finishReason, .sessionId == "'"$sid"'", has("heartbeatAt")]' <<<"$output")" \
		'["completed","stop",true,false]'
	assert_equal "$(jq -c '[.state.messages[] | .role + ":" + .content[0].text]' <<<"$output")" \
		'["user:one","model:done","user:two","model:done"]'
	# one row, the queued one; the queue is empty
	assert_equal "$(agent-snap log "$sid" | wc -l)" 1
	assert_equal "$(agent-snap runs | wc -l)" 0
	# the worker's log is in the store, and names the claimed child
	run -0 agent-snap worker-log "$id"
	assert_line --partial "worker started: agent inline, session $sid, snapshot $id, parent (none), 2 inputs"
	assert_line --partial "finalized completed, finish reason stop"
}

@test "runs: by queue, then the time each is due, then ID; --limit N prints the first N" {
	# queue b: due in 2h, then in 1h; queue a: both due now (ties: by ID)
	run -0 --separate-stderr "${AR[@]}" --queue b --not-before 2h -m one
	b_late=$(id_of "$output")
	run -0 --separate-stderr "${AR[@]}" --queue b --not-before 1h -m one
	b_soon=$(id_of "$output")
	for _ in 1 2; do
		run -0 --separate-stderr "${AR[@]}" --queue a -m one
		id_of "$output"
	done | sort >a_ids
	want="$(cat a_ids)
$b_soon
$b_late"
	run -0 --separate-stderr agent-snap runs
	assert_equal "$(jq -r .snapshotId <<<"$output")" "$want"
	assert_equal "$(jq -r .queue <<<"$output" | tr '\n' ' ')" "a a b b "
	run -0 --separate-stderr agent-snap runs --limit 3
	assert_equal "$(jq -r .snapshotId <<<"$output")" "$(head -3 <<<"$want")"
	run -0 --separate-stderr agent-snap runs --queue b --limit 1
	assert_equal "$(jq -r .snapshotId <<<"$output")" "$b_soon"
	run -0 --separate-stderr agent-snap runs --limit 1 --format text
	assert_equal "${#lines[@]}" 2
	assert_line --index 1 --regexp "^$(head -1 a_ids) +a +inline +queued +0/- +- +[0-9]+s$"
}

@test "a queued run continues its session from the parent it was queued on" {
	run -0 "${AR[@]}" -s s1 -m first
	parent=$(id_of "$(last)")
	run -0 "${AR[@]}" -s s1 --queue default -m second
	id=$(id_of "$output")
	assert_equal "$(agent-snap -m "$id" | jq -r .parentId)" "$parent"
	run -0 timeout 20 agent-worker --once
	run -0 agent-wait "$id"
	assert_equal "$(jq -c '[.state.messages[] | .content[0].text]' <<<"$output")" \
		'["first","done","second","done"]'
	assert_equal "$(agent-snap --session s1 -m | jq -r .snapshotId)" "$id"
}

@test "the same --key from many launches at once gives one run, whose IDs every launch prints" {
	for i in $(seq 10); do
		"${AR[@]}" --queue default --key "nightly-2026-12-01" -m "task" >"launch.$i" &
	done
	wait
	assert_equal "$(cat launch.* | jq -r .output.snapshotId | sort -u | wc -l)" 1
	assert_equal "$(cat launch.* | jq -r .output.sessionId | sort -u | wc -l)" 1
	assert_equal "$(agent-snap runs | wc -l)" 1
	run -0 --separate-stderr "${AR[@]}" --queue default --key "nightly-2026-12-01" -m "task" --format text
	id=$(jq -r .output.snapshotId launch.1)
	assert_equal "$stderr" "agent-run: already queued under this key, session $(jq -r .output.sessionId launch.1), snapshot $id (agent-wait $id)"
	# ten tasks, each launched from three places at once: ten runs
	for host in a b c; do
		for t in $(seq 10); do
			"${AR[@]}" --queue default --key "task-$t" -m "task $t" >/dev/null &
		done
	done
	wait
	assert_equal "$(agent-snap runs | wc -l)" 11
	run -0 timeout 30 agent-worker --once --concurrency 4
	assert_equal "$(agent-snap sessions | jq -r .status | sort | uniq -c | tr -s ' ')" " 11 completed"
	# the key holds while its run's row exists: after, it runs again
	run -0 "${AR[@]}" --queue default --key "task-1" -m "task 1"
	assert_equal "$(agent-snap runs | wc -l)" 0
	agent-snap rm "$(jq -r .output.sessionId <<<"$output")" >/dev/null
	run -0 "${AR[@]}" --queue default --key "task-1" -m "task 1"
	assert_equal "$(agent-snap runs | jq -r .status)" queued
}

@test "kill -9 of the worker mid-run: another worker takes the run again from its parent, each turn once" {
	short_lease
	run -0 "${AR[@]}" -s s1 -m first
	run -0 "${AR[@]}" -s s1 --queue default -m slow
	id=$(id_of "$output")
	worker --queue default
	wait_for 10 has_child "$wpid"
	child=$(child_of "$wpid")
	wait_for 10 run_is "$id" running
	kill -9 "$child" "$wpid"
	# the lease runs out: expired to readers, and claimable again
	wait_for 10 run_is "$id" expired
	assert_equal "$(agent-snap "$id" | jq -r .status)" expired
	worker --queue default
	run -0 timeout 20 agent-wait "$id"
	assert_equal "$(jq -c '[.status, (.state.messages | map(.content | map(.text) | join("")))]' <<<"$output")" \
		'["completed",["first","done","slow","a b c d"]]'
	# the second claim is attempt 2, by the second worker's child
	grep -q "$id: claimed (queue default, agent inline, attempt 2)" worker.log
	assert_equal "$(agent-snap log s1 | wc -l)" 2
}

@test "--max-attempts 2 and a worker lost twice: the next claim settles the run failed, saying so" {
	short_lease
	run -0 "${AR[@]}" --queue default --max-attempts 2 -m slow
	id=$(id_of "$output")
	for n in 1 2; do
		worker --queue default
		wait_for 10 has_child "$wpid"
		wait_for 10 run_is "$id" running
		kill -9 "$(child_of "$wpid")" "$wpid"
		wait_for 10 run_is "$id" expired
	done
	worker --queue default
	run -1 timeout 20 agent-wait "$id"
	assert_equal "$(jq -r '.status + " " + .error.status' <<<"$output")" "failed UNAVAILABLE"
	[[ "$(jq -r .error.message <<<"$output")" == "gave up after 2 attempts: worker lost (the last: host $(hostname), pid "* ]]
	assert_equal "$(agent-snap runs | wc -l)" 0
}

@test "agent-worker --max-attempts: the limit of the runs that set none" {
	short_lease
	run -0 "${AR[@]}" --queue default -m slow
	id=$(id_of "$output")
	worker --queue default --max-attempts 1
	wait_for 10 has_child "$wpid"
	wait_for 10 run_is "$id" running
	kill -9 "$(child_of "$wpid")" "$wpid"
	wait_for 10 run_is "$id" expired
	worker --queue default --max-attempts 1
	run -1 timeout 20 agent-wait "$id"
	[[ "$(jq -r .error.message <<<"$output")" == "gave up after 1 attempt: worker lost"* ]]
}

@test "an agent's concurrency of 2 holds across 4 workers on 20 runs" {
	# the limit from the front matter, for the agent by name
	mkdir -p agents
	printf -- '---\nmodel: script/../slow.ndjson\nconcurrency: 2\nmaxAttempts: 5\n---\n{{history}}\n' >agents/ticker.prompt
	for i in $(seq 20); do
		agent-run ticker --queue default -m "tick $i" >/dev/null
	done
	assert_equal "$(agent-snap runs | jq -r '.agent + " " + (.maxAttempts | tostring)' | sort -u)" "ticker 5"
	for i in 1 2 3 4; do
		worker --queue default --concurrency 3 --idle-exit 2s
	done
	for p in "${W[@]}"; do
		wait "$p"
	done
	assert_equal "$(agent-snap sessions | jq -r .status | sort | uniq -c | tr -s ' ')" " 20 completed"
	# the most runs at once, from each run's start and end in its log
	for id in $(agent-snap sessions | jq -r .snapshotId); do
		agent-snap worker-log "$id" | sed -n 's/^\([^ ]*\) .*worker started.*/\1 1/p; s/^\([^ ]*\) .*finalized.*/\1 -1/p'
	done | sort | awk '{ n += $2; if (n > max) max = n } END { print max }' >most
	assert_equal "$(cat most)" 2
}

@test "SIGTERM drains: no new claim, the run in flight finishes; past --drain-timeout it is handed back" {
	run -0 "${AR[@]}" --queue default -m slow
	id=$(id_of "$output")
	worker --queue default --drain-timeout 30s
	wait_for 10 run_is "$id" running
	run -0 "${AR[@]}" --queue default -m other
	other=$(id_of "$output")
	kill -TERM "$wpid"
	wait "$wpid"
	assert_equal "$(agent-snap "$id" | jq -r .status)" completed
	assert_equal "$(run_status "$other")" queued
	grep -q "draining: 1 run in flight" worker.log
	# a short drain: the run goes back to its queue, its attempt not counted
	run -0 "${AR[@]}" --queue default -m slow
	id=$(id_of "$output")
	agent-abort "$other" >/dev/null
	worker --queue default --drain-timeout 200ms
	wait_for 10 run_is "$id" running
	kill -TERM "$wpid"
	wait "$wpid"
	grep -q "$id: handed back to its queue$" worker.log
	assert_equal "$(agent-snap runs | jq -c '[.status, .attempt]')" '["queued",0]'
	run -0 timeout 20 agent-worker --once
	assert_equal "$(agent-snap "$id" | jq -r .status)" completed
}

@test "--not-before: no worker takes the run before its time" {
	run -0 "${AR[@]}" --queue default --not-before 2s -m later
	id=$(id_of "$output")
	run -0 timeout 10 agent-worker --once
	assert_equal "$(run_status "$id")" queued
	[ "$(agent-snap runs | jq -r .notBefore)" != null ]
	worker --queue default --idle-exit 5s
	run -0 timeout 20 agent-wait "$id"
	assert_equal "$(jq -r .status <<<"$output")" completed
	# an RFC 3339 time, already past: at once
	run -0 "${AR[@]}" --queue default --not-before 2020-01-01T00:00:00Z -m now
	run -0 timeout 20 agent-wait "$(id_of "$output")"
	run -100 --separate-stderr "${AR[@]}" --queue default --not-before soon -m x
	assert_equal "$stderr" "agent-run: --not-before: 'soon' is neither an RFC 3339 time nor a duration
try 'agent-run --help'"
}

@test "agent-abort: a queued run nobody claimed settles aborted at once; a claimed one stops" {
	run -0 "${AR[@]}" --queue default -m slow
	id=$(id_of "$output")
	run -0 agent-abort "$id"
	assert_equal "$output" '{"snapshotId":"'"$id"'","previousStatus":"pending","status":"aborted"}'
	run -2 agent-wait "$id"
	assert_equal "$(jq -r '.status + " " + .finishReason' <<<"$output")" "aborted aborted"
	assert_equal "$(agent-snap runs | wc -l)" 0
	run -0 "${AR[@]}" --queue default -m slow
	id=$(id_of "$output")
	worker --queue default
	wait_for 10 run_is "$id" running
	run -0 agent-abort --wait --timeout 10s "$id"
	assert_equal "$(jq -r .status <<<"$output")" aborted
	# deleting a queued run's session takes it out of the queue
	run -0 "${AR[@]}" --queue default -m gone
	agent-snap rm "$(jq -r .output.sessionId <<<"$output")" >/dev/null
	assert_equal "$(agent-snap runs | wc -l)" 0
}

@test "a run whose agent does not load on the worker settles failed, once" {
	mkdir -p agents
	printf -- '---\nmodel: echo\n---\nhi\n' >agents/helper.prompt
	run -0 agent-run helper --queue default -m x
	id=$(id_of "$output")
	rm agents/helper.prompt
	run -0 timeout 20 agent-worker --once
	run -1 agent-wait "$id"
	assert_equal "$(jq -r .error.status <<<"$output")" NOT_FOUND
	[[ "$(jq -r .error.message <<<"$output")" == "the run could not start on this worker: agent 'helper' not found"* ]]
}

@test "the queue's options: usage errors, and agent-worker's own" {
	run -100 --separate-stderr agent-run --model echo --key k -m x
	assert_equal "$stderr" "agent-run: --key, --not-before, --max-attempts and --concurrency go with --queue
try 'agent-run --help'"
	run -100 --separate-stderr agent-run --model echo --queue q --no-store -m x
	assert_equal "${stderr%%$'\n'*}" "agent-run: --queue needs the store: drop --no-store, --state and --url"
	run -100 --separate-stderr agent-run --model echo --queue q --max-attempts 0 -m x
	assert_equal "${stderr%%$'\n'*}" "agent-run: --max-attempts must be a number from 1 to 1000, got '0'"
	run -100 --separate-stderr agent-worker --concurrency none
	assert_equal "${stderr%%$'\n'*}" "agent-worker: --concurrency must be a number from 1 to 1024, got 'none'"
	run -100 --separate-stderr agent-worker extra
	assert_equal "${stderr%%$'\n'*}" "agent-worker: unexpected argument 'extra'"
	run -111 --separate-stderr agent-worker --agent-run /nonexistent/agent-run --once
	assert_equal "$stderr" "agent-worker: cannot find agent-run ('/nonexistent/agent-run'): give --agent-run PATH"
	run -100 --separate-stderr agent-snap runs --status lost
	assert_equal "${stderr%%$'\n'*}" "agent-snap: --status must be queued, running, aborting or expired, not 'lost'"
}
