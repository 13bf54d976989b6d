#!/usr/bin/env bats
# The PostgreSQL backend's own behaviour: locations, the schema, failures
# and their messages, rows byte-identical to the LMDB backend's, export
# and import between the backends, and several hosts sharing one server.
# scripts/runtests runs this file in its PostgreSQL pass only (each test
# on a fresh schema, see pg_store in test_helper.bash); the suites both
# backends share are store-conformance, agent-snap, agent-wait and
# agent-abort.

load test_helper

setup() {
	[ -n "${AGENTKIT_TEST_PG_URL:-}" ] ||
		skip "needs a PostgreSQL server (scripts/runtests starts one: AGENTKIT_TEST_PG_URL)"
	AGENTKIT_TEST_BACKEND=pg common_setup
	SW="$AGENTKIT_BIN/../tests/helpers/store-worker"
}

# host NAME CMD...: CMD as if on another machine: its own HOME and state,
# only the database shared.
host() {
	local h="$BATS_TEST_TMPDIR/host-$1"
	shift
	mkdir -p "$h"
	HOME="$h" XDG_STATE_HOME="$h/state" XDG_CONFIG_HOME="$h/config" "$@"
}

# on NAME CMD... &: host for a background process whose $! is CMD itself
# (env execs it), so that it can be waited for and killed.  Only with &:
# in the foreground it would replace the test's shell.
on() {
	local h="$BATS_TEST_TMPDIR/host-$1"
	shift
	mkdir -p "$h"
	exec env HOME="$h" XDG_STATE_HOME="$h/state" XDG_CONFIG_HOME="$h/config" "$@"
}

@test "the schema is created once, at version 2, on the first write" {
	run -4 --separate-stderr agent-snap sessions
	assert_equal "$stderr" "agent-snap: no store at ${AGENTKIT_STORE%%\?*}?host=***&user=***&options=*** (set --store or AGENTKIT_STORE)"
	# a reader created nothing
	assert_equal "$(pg_sql "SELECT count(*) FROM pg_tables WHERE schemaname = '$PG_SCHEMA'")" 0
	for i in 1 2 3 4; do
		"$SW" save "r$i" '{"sessionId":"s"}' >/dev/null &
	done
	wait
	assert_equal "$(pg_sql 'SELECT version FROM agentkit_schema_version ORDER BY version')" "1
2"
	assert_equal "$(pg_sql 'SELECT count(*) FROM agentkit_snapshots')" 4
}

@test "a store whose schema is newer than this agentkit is refused" {
	"$SW" save row1 '{"sessionId":"s"}' >/dev/null
	pg_sql 'INSERT INTO agentkit_schema_version (version) VALUES (3)'
	run -5 --separate-stderr agent-snap row1
	assert_equal "$stderr" "agent-snap: the store at '${AGENTKIT_STORE%%\?*}?host=***&user=***&options=***' has schema version 3, newer than this agentkit's 2: upgrade agentkit"
}

@test "a version 1 store is upgraded in place: its foreign keys go, its rows stay" {
	"$SW" save row1 '{"sessionId":"s","state":{"messages":[{"role":"user"},{"role":"model"}]}}' >/dev/null
	# back to version 1: step 1's foreign keys, step 2 not applied
	pg_sql "DELETE FROM agentkit_schema_version WHERE version = 2;
		ALTER TABLE agentkit_nodes ADD CONSTRAINT agentkit_nodes_prev_fkey
		 FOREIGN KEY (prev) REFERENCES agentkit_nodes (hash);
		ALTER TABLE agentkit_states ADD CONSTRAINT agentkit_states_tail_fkey
		 FOREIGN KEY (tail) REFERENCES agentkit_nodes (hash);
		ALTER TABLE agentkit_states ADD CONSTRAINT agentkit_states_snapshot_id_fkey
		 FOREIGN KEY (snapshot_id) REFERENCES agentkit_snapshots (snapshot_id) ON DELETE CASCADE"
	assert_equal "$(pg_sql "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND connamespace = '$PG_SCHEMA'::regnamespace")" 3
	run -0 --separate-stderr agent-snap row1
	assert_output '{"sessionId":"s","state":{"messages":[{"role":"user"},{"role":"model"}]},"snapshotId":"row1","status":"completed"}'
	assert_equal "$(pg_sql 'SELECT version FROM agentkit_schema_version ORDER BY version')" "1
2"
	assert_equal "$(pg_sql "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND connamespace = '$PG_SCHEMA'::regnamespace")" 0
	# deleting still collects the state and the messages the cascade used to
	run -0 agent-snap rm s
	assert_equal "$(pg_sql 'SELECT (SELECT count(*) FROM agentkit_states) + (SELECT count(*) FROM agentkit_nodes)')" 0
}

@test "pg: takes libpq's own PG* variables; postgres:// is the same backend" {
	"$SW" save row1 '{"sessionId":"s","state":{"messages":[{"role":"user"}]}}' >/dev/null
	host=$(sed -n 's/.*[?&]host=\([^&]*\).*/\1/p' <<<"$AGENTKIT_TEST_PG_URL")
	user=$(sed -n 's/.*[?&]user=\([^&]*\).*/\1/p' <<<"$AGENTKIT_TEST_PG_URL")
	run -0 --separate-stderr env PGHOST="$host" PGUSER="$user" PGDATABASE=agentkit \
		PGOPTIONS="-csearch_path=$PG_SCHEMA" agent-snap --store pg: -m row1
	assert_output '{"sessionId":"s","snapshotId":"row1","status":"completed"}'
	run -0 --separate-stderr agent-snap --store "postgres${AGENTKIT_STORE#postgresql}" -m row1
	assert_output '{"sessionId":"s","snapshotId":"row1","status":"completed"}'
}

@test "an unreachable server: exit 111 at once, the password never shown" {
	run -111 --separate-stderr agent-snap --store 'postgresql://me:sekrit@/agentkit?host=/nonexistent' sessions
	assert_equal "$stderr" "agent-snap: cannot connect to the store at 'postgresql://***@/agentkit?host=***': connection to server on socket \"/nonexistent/.s.PGSQL.5432\" failed: No such file or directory"
	run -111 --separate-stderr agent-wait --store 'postgresql://me:sekrit@127.0.0.1:1/agentkit' x
	[[ $stderr == "agent-wait: cannot connect to the store at 'postgresql://***@127.0.0.1:1/agentkit': connection to server at \"127.0.0.1\", port 1 failed: Connection refused" ]]
	# libpq's own complaints about the URL are scrubbed too
	run -111 --separate-stderr agent-snap --store 'postgresql://me:sekrit@/agentkit?sslmode=sekrit' sessions
	assert_equal "$stderr" "agent-snap: cannot connect to the store at 'postgresql://***@/agentkit?sslmode=***': invalid sslmode value: \"***\""
	run -100 --separate-stderr agent-snap --store 'postgresql://me:sekrit@/agentkit?bogus=sekrit' sessions
	assert_equal "$stderr" "agent-snap: invalid store URL 'postgresql://***@/agentkit?bogus=***': invalid URI query parameter: \"bogus\""$'\n'"try 'agent-snap --help'"
}

@test "a server that accepts but never answers: 111 within the connect timeout, not a hang" {
	requires python3
	python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)
' >port &
	pid=$!
	wait_for 10 test -s port
	start=$SECONDS
	run -111 --separate-stderr agent-snap --store "postgresql://me:sekrit@127.0.0.1:$(cat port)/agentkit?connect_timeout=2&sslmode=disable" sessions
	kill "$pid"
	[ $((SECONDS - start)) -le 6 ]
	[[ $stderr == "agent-snap: cannot connect to the store at 'postgresql://***@127.0.0.1:"*"': "*"timeout expired"* ]]
}

@test "rows read back byte for byte as the LMDB backend gives them" {
	agent-snap import <"$FIXTURES/store/rows.ndjson" >/dev/null
	agent-snap --store lmdb import <"$FIXTURES/store/rows.ndjson" >/dev/null
	for cmd in "export" "sessions" "log s-a" "done-1 empty-status failed-1" "-m done-1" \
		"--session s-b" "stale-pending"; do
		# shellcheck disable=SC2086
		assert_equal "$(agent-snap $cmd)" "$(agent-snap --store lmdb $cmd)"
	done
	"$SW" save k '{"state":{"sessionId":"s","messages":[{"role":"user","n":1.0,"big":1e400}],"custom":{"z":1,"a":2}},"sessionId":"s"}' >/dev/null
	"$SW" --store lmdb save k '{"state":{"sessionId":"s","messages":[{"role":"user","n":1.0,"big":1e400}],"custom":{"z":1,"a":2}},"sessionId":"s"}' >/dev/null
	assert_equal "$("$SW" get k)" "$("$SW" --store lmdb get k)"
	assert_equal "$("$SW" get k)" '{"state":{"sessionId":"s","messages":[{"role":"user","n":1.0,"big":1e400}],"custom":{"z":1,"a":2}},"sessionId":"s","snapshotId":"k","status":"completed"}'
}

@test "export | import round-trips between the backends byte for byte, lineage and forks included" {
	lm="$BATS_TEST_TMPDIR/lmdb"
	"$SW" --store "$lm" turn s t1 "" one >/dev/null
	"$SW" --store "$lm" turn s t2 t1 two >/dev/null
	"$SW" --store "$lm" turn s f2 t1 fork >/dev/null
	"$SW" --store "$lm" turn s t3 t2 three >/dev/null
	agent-snap --store "$lm" import <"$FIXTURES/store/rows.ndjson" >/dev/null
	agent-snap --store "$lm" export >lmdb.ndjson
	agent-snap --store "$lm" export | agent-snap import >/dev/null
	agent-snap export >pg.ndjson
	cmp lmdb.ndjson pg.ndjson
	# the messages are stored once per distinct history, as in LMDB:
	# one two three | fork, two messages each, plus the fixtures' two
	assert_equal "$(stored_messages)" 10
	agent-snap log s >pg.log
	agent-snap --store "$lm" log s >lmdb.log
	cmp lmdb.log pg.log
	# and back, into a fresh LMDB store
	agent-snap export | agent-snap --store back import >/dev/null
	agent-snap --store back export >back.ndjson
	cmp lmdb.ndjson back.ndjson
}

@test "two hosts: a worker on one, agent-wait and agent-abort on the other" {
	now=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
	echo "{\"snapshotId\":\"w\",\"sessionId\":\"s\",\"status\":\"pending\",\"createdAt\":\"$now\",\"updatedAt\":\"$now\",\"heartbeatAt\":\"$now\"}" |
		host a agent-snap import >/dev/null
	# host A: the worker, heartbeating every 200ms until it sees the abort
	on a "$SW" run w 200ms 1000 >worker.out &
	worker=$!
	# host B: two waiters, then the abort
	on b agent-wait --timeout 30s w >wait1.out &
	w1=$!
	on c agent-wait --timeout 30s -m w >wait2.out &
	w2=$!
	sleep 0.5
	run -0 --separate-stderr host b agent-abort w
	assert_output '{"snapshotId":"w","previousStatus":"pending","status":"aborting"}'
	wait "$worker"
	rc1=0 rc2=0
	wait "$w1" || rc1=$?
	wait "$w2" || rc2=$?
	assert_equal "$rc1 $rc2" "2 2"
	assert_equal "$(jq -r '.status + " " + .finishReason' worker.out)" "aborted aborted"
	assert_equal "$(jq -r .status wait1.out) $(jq -r .status wait2.out)" "aborted aborted"
	# a worker that dies leaves a row every host reads as expired
	echo "{\"snapshotId\":\"d\",\"sessionId\":\"s\",\"status\":\"pending\",\"createdAt\":\"$now\",\"updatedAt\":\"$now\",\"heartbeatAt\":\"$now\"}" |
		host a agent-snap import >/dev/null
	on a "$SW" run d 100ms 1000 >/dev/null &
	worker=$!
	sleep 0.3
	kill -9 "$worker"
	AGENTKIT_HEARTBEAT_TIMEOUT=500ms run -3 --separate-stderr host b agent-wait --timeout 20s d
	assert_equal "$(jq -r .status <<<"$output")" expired
}

@test "agent-run --detach on one host, agent-wait on another; the worker's log stays on its host" {
	run -0 --separate-stderr host a agent-run --model echo --detach -m hello
	id=$(jq -r .output.snapshotId <<<"$output")
	[ "$(jq -r .output.finishReason <<<"$output")" = detached ]
	run -0 --separate-stderr host b agent-wait --timeout 30s "$id"
	assert_equal "$(jq -r '.status + " " + .finishReason' <<<"$output")" "completed stop"
	assert_equal "$(jq -r '.state.messages[-1].content[0].text' <<<"$output")" hello
	# the log is under host a's state directory, never at the URL
	log="$BATS_TEST_TMPDIR/host-a/state/agentkit/logs/$id.log"
	[ -f "$log" ] || fail "no worker log at $log"
	run -0 --separate-stderr host a agent-snap worker-log "$id"
	[[ "$output" == *"finalized completed"* ]] || fail "log: $output"
	run -4 --separate-stderr host b agent-snap worker-log "$id"
	assert_equal "$stderr" "agent-snap: no worker log for snapshot '$id' (only detached runs have one; a worker's log stays on the host that ran it, in ~/.local/state/agentkit/logs)"
}

@test "16 writers on two hosts: no lost update" {
	"$SW" save c '{"sessionId":"s","state":{"custom":{"n":0}}}' >/dev/null
	for i in $(seq 16); do
		on "$((i % 2))" "$SW" incr c 20 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	run -0 --separate-stderr "$SW" get c
	assert_equal "$(jq -r .state.custom.n <<<"$output")" 320
}

# agentkit_connected: some agentkit process is connected.
agentkit_connected() {
	[ "$(pg_sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'agentkit'")" -ge 1 ]
}

@test "a wait survives the server dropping its connection" {
	now=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
	echo "{\"snapshotId\":\"w\",\"sessionId\":\"s\",\"status\":\"pending\",\"createdAt\":\"$now\",\"updatedAt\":\"$now\",\"heartbeatAt\":\"$now\"}" |
		agent-snap import >/dev/null
	agent-wait --timeout 30s w >wait.out &
	waiter=$!
	wait_for 10 agentkit_connected
	# the server ends the waiter's session (the only agentkit one now)
	assert_equal "$(pg_sql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'agentkit'")" 1
	"$SW" finalize w completed stop >/dev/null
	wait "$waiter"
	assert_equal "$(jq -r .status wait.out)" completed
}

# advisory_held: some session holds an advisory lock.
advisory_held() {
	[ "$(pg_sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")" -ge 1 ]
}

@test "a writer waits for a row's lock only as long as AGENTKIT_STORE_LOCK_TIMEOUT" {
	"$SW" save p '{"sessionId":"s","status":"pending"}' >/dev/null
	# another session holds the row's ID lock, as a writer inside its save
	psql "$AGENTKIT_STORE" -qAtX -c "BEGIN" \
		-c "SELECT pg_advisory_xact_lock(hashtextextended('p', 0))" \
		-c "SELECT pg_sleep(5)" -c "COMMIT" >/dev/null &
	holder=$!
	wait_for 10 advisory_held
	AGENTKIT_STORE_LOCK_TIMEOUT=300ms run -111 --separate-stderr agent-abort p
	assert_equal "$stderr" "agent-abort: save snapshot: timed out waiting for the row's lock after 300ms"
	# readers are not blocked
	run -0 --separate-stderr agent-snap -m p
	assert_output --partial '"status":"pending"'
	wait "$holder"
	run -0 --separate-stderr agent-abort p
	assert_output --partial '"status":"aborting"'
}

@test "the server stopped: readers and writers exit 111 at once" {
	dir="$BATS_TEST_TMPDIR/server"
	url=$("$TOP/scripts/pg-test-server" start "$dir")
	"$SW" --store "$url" save row1 '{"sessionId":"s"}' >/dev/null
	"$TOP/scripts/pg-test-server" stop "$dir"
	start=$SECONDS
	run -111 --separate-stderr agent-snap --store "$url" row1
	[[ $stderr == "agent-snap: cannot connect to the store at 'postgresql:///agentkit?host=***&user=***': connection to server on socket "*"failed: No such file or directory" ]]
	run -111 --separate-stderr "$SW" --store "$url" save row2 '{"sessionId":"s"}'
	[ $((SECONDS - start)) -le 3 ]
}

@test "writers on two hosts extend shared histories while another deletes them: every row intact" {
	# the hammers write the same messages turn after turn, so their
	# sessions share nodes, which the deletes collect under their feet
	pids=()
	for i in 1 2 3 4; do
		on "$((i % 2))" "$SW" hammer "h$i" 2>>hammer.err &
		pids+=($!)
	done
	end=$((SECONDS + 3))
	while [ "$SECONDS" -lt "$end" ]; do
		host 1 agent-snap rm h1 >/dev/null 2>>rm.err || true
		host 0 agent-snap rm h2 >/dev/null 2>>rm.err || true
	done
	kill -9 "${pids[@]}"
	for p in "${pids[@]}"; do wait "$p" || true; done
	# nothing but the kills stopped a writer, and no delete failed other
	# than on an empty session (or before the first write made the store)
	run cat hammer.err
	assert_output ""
	run grep -v -e "no snapshot found for session" -e "agent-snap: no store at" rm.err
	assert_output ""
	# every row reads back whole: its messages are its turns, two apiece
	run -0 --separate-stderr agent-snap export
	[ "${#lines[@]}" -gt 4 ]
	run -0 jq -s '[.[] | select((.state.messages | length) % 2 != 0 or (.state.messages | length) == 0)] | length' <<<"$output"
	assert_output 0
}
