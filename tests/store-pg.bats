#!/usr/bin/env bats
# The PostgreSQL backend's own behaviour: locations, the schema and
# agent-snap migrate, failures and their messages, server restarts, TLS,
# rows byte-identical to the LMDB backend's, export and import between
# the backends, and several hosts sharing one server.
# scripts/runtests runs this file in its PostgreSQL pass only (each test
# on a fresh schema, see pg_store in tests/stores/pg.bash); the suites
# both backends share are store-conformance, agent-snap, agent-wait and
# agent-abort.

load test_helper

setup() {
	[ -n "${AGENTKIT_TEST_PG_URL:-}" ] ||
		skip "needs a PostgreSQL server (scripts/runtests starts one: AGENTKIT_TEST_PG_URL)"
	AGENTKIT_TEST_BACKEND=pg common_setup
	SW="$AGENTKIT_BIN/../tests/helpers/store-worker"
}

# A test that restarts or reconfigures a server starts its own
# (own_server); it is stopped and removed after the test.
teardown() {
	[ ! -d "$BATS_TEST_TMPDIR/server" ] || "$TOP/scripts/pg-test-server" stop "$BATS_TEST_TMPDIR/server"
}

# own_server [ARGS...]: a server of the test's own at $SERVER (ARGS as
# pg-test-server start takes them), its URL in $AGENTKIT_STORE.
own_server() {
	SERVER="$BATS_TEST_TMPDIR/server"
	AGENTKIT_STORE=$("$TOP/scripts/pg-test-server" start "$SERVER" "$@") || return 1
	export AGENTKIT_STORE
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

@test "the schema is created once, at its latest version, on the first write" {
	run -4 --separate-stderr agent-snap sessions
	assert_equal "$stderr" "agent-snap: no store at ${AGENTKIT_STORE%%\?*}?host=***&user=***&options=*** (set --store or AGENTKIT_STORE)"
	# a reader created nothing
	assert_equal "$(pg_sql "SELECT count(*) FROM pg_tables WHERE schemaname = '$PG_SCHEMA'")" 0
	for i in 1 2 3 4; do
		"$SW" save "r$i" '{"sessionId":"s"}' >/dev/null &
	done
	wait
	assert_equal "$(pg_sql 'SELECT version FROM agentkit_schema_version ORDER BY version')" "$(seq 1 "$(latest_step)")"
	assert_equal "$(pg_sql 'SELECT count(*) FROM agentkit_snapshots')" 4
}

@test "a store whose schema is newer than this agentkit is refused" {
	"$SW" save row1 '{"sessionId":"s"}' >/dev/null
	latest=$(latest_step)
	pg_sql "INSERT INTO agentkit_schema_version (version) VALUES ($((latest + 1)))"
	run -5 --separate-stderr agent-snap row1
	assert_equal "$stderr" "agent-snap: the store at '${AGENTKIT_STORE%%\?*}?host=***&user=***&options=***' has schema version $((latest + 1)), newer than this agentkit's $latest: upgrade agentkit"
}

@test "a version 1 store is upgraded in place: its foreign keys go, its rows stay" {
	# a store made by an agentkit that knew step 1 alone, foreign keys and all
	AGENTKIT_TEST_PG_SCHEMA_STEPS=1 "$SW" save row1 '{"sessionId":"s","state":{"messages":[{"role":"user"},{"role":"model"}]}}' >/dev/null
	assert_equal "$(pg_sql 'SELECT max(version) FROM agentkit_schema_version')" 1
	assert_equal "$(pg_sql "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND connamespace = '$PG_SCHEMA'::regnamespace")" 3
	run -0 --separate-stderr agent-snap row1
	assert_output '{"sessionId":"s","state":{"messages":[{"role":"user"},{"role":"model"}]},"snapshotId":"row1","status":"completed"}'
	assert_equal "$(pg_sql 'SELECT version FROM agentkit_schema_version ORDER BY version')" "$(seq 1 "$(latest_step)")"
	assert_equal "$(pg_sql 'SELECT count(*) FROM agentkit_worker_log')" 0
	assert_equal "$(pg_sql "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND connamespace = '$PG_SCHEMA'::regnamespace")" 0
	# deleting still collects the state and the messages the cascade used to
	run -0 agent-snap rm s
	assert_equal "$(pg_sql 'SELECT (SELECT count(*) FROM agentkit_snapshots) + (SELECT count(*) FROM agentkit_nodes)')" 0
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

@test "agent-run --detach on one host, agent-wait on another; the worker's log is in the store" {
	run -0 --separate-stderr host a agent-run --model echo --detach -m hello
	id=$(jq -r .output.snapshotId <<<"$output")
	[ "$(jq -r .output.finishReason <<<"$output")" = detached ]
	run -0 --separate-stderr host b agent-wait --timeout 30s "$id"
	assert_equal "$(jq -r '.status + " " + .finishReason' <<<"$output")" "completed stop"
	assert_equal "$(jq -r '.state.messages[-1].content[0].text' <<<"$output")" hello
	# the worker's stderr file is under host a's state directory, never
	# at the URL; its lines are in the store, for every host
	log="$BATS_TEST_TMPDIR/host-a/state/agentkit/logs/$id.log"
	[ -f "$log" ] || fail "no worker log at $log"
	wait_for 10 eval 'grep -q "finalized completed" "$log"'
	run -0 --separate-stderr host b agent-snap worker-log "$id"
	assert_equal "$output" "$(cat "$log")"
	assert_equal "$(pg_sql "SELECT count(*) FROM agentkit_worker_log WHERE snapshot_id = '$id'")" \
		"${#lines[@]}"
	# rm on host b takes the lines with the row
	run -0 host b agent-snap rm "$(host b agent-snap "$id" | jq -r .sessionId)"
	run -4 --separate-stderr host b agent-snap worker-log "$id"
	assert_equal "$stderr" "agent-snap: no worker log for snapshot '$id' (only detached runs have one)"
	assert_equal "$(pg_sql "SELECT count(*) FROM agentkit_worker_log")" 0
}

@test "a host with only the store URL and no writable HOME detaches; its log is in the store" {
	# /proc/...: a HOME nobody can create, root included
	run -0 --separate-stderr env -u XDG_STATE_HOME HOME=/proc/agentkit-no-home \
		agent-run --model echo --format text --detach -m hello
	[[ "$stderr" =~ snapshot\ ([0-9a-f-]+)\ \(log:\ agent-snap\ worker-log\ ([0-9a-f-]+)\)$ ]] ||
		fail "stderr: $stderr"
	id=${BASH_REMATCH[1]}
	assert_equal "${BASH_REMATCH[2]}" "$id"
	run -0 timeout 30 env -u XDG_STATE_HOME HOME=/proc/agentkit-no-home agent-wait "$id"
	wait_for 10 eval 'agent-snap worker-log "$id" | grep -q "finalized completed"'
	run -0 --separate-stderr host b agent-snap worker-log "$id"
	assert_line --index 0 --regexp "^[0-9T:.Z-]+ agent-run\[[0-9]+\]: worker started: agent inline, .*, snapshot $id, parent \(none\), 1 input, "
	assert_line --index 1 --regexp "^[0-9T:.Z-]+ agent-run\[[0-9]+\]: stderr goes to /dev/null: cannot create '/proc/agentkit-no-home/.local/state/agentkit/logs': No such file or directory$"
	assert_line --index -1 --regexp "^[0-9T:.Z-]+ agent-run\[[0-9]+\]: finalized completed, finish reason stop$"
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

@test "a store that cannot be written is found before a turn runs; readers still read it" {
	"$SW" save r1 '{"sessionId":"s","status":"completed"}' >/dev/null
	ro="$AGENTKIT_STORE%20-cdefault_transaction_read_only%3Don"
	run -111 --separate-stderr agent-run --store "$ro" --model echo -m hi
	assert_equal "$stderr" "agent-run: the store at '${AGENTKIT_STORE%%\?*}?host=***&user=***&options=***' cannot be written: its transactions are read-only (default_transaction_read_only)"
	# no turn ran: the output is the error alone
	assert_equal "$(jq -c '[.error.status]' <<<"$output")" '["INTERNAL"]'
	run -0 --separate-stderr agent-snap --store "$ro" show r1 --format ndjson
	# a role that may only read the tables: the same, naming the grant
	role="reader_$$_$RANDOM"
	pg_sql "CREATE ROLE $role LOGIN; GRANT USAGE ON SCHEMA $PG_SCHEMA TO $role;
		GRANT SELECT ON ALL TABLES IN SCHEMA $PG_SCHEMA TO $role"
	reader=${AGENTKIT_STORE/user=agentkit/user=$role}
	run -111 --separate-stderr agent-snap --store "$reader" rm s
	assert_equal "$stderr" "agent-snap: the store at '${AGENTKIT_STORE%%\?*}?host=***&user=***&options=***' cannot be written: the role may not write agentkit_snapshots (grant it INSERT, UPDATE and DELETE on agentkit's tables)"
	run -0 --separate-stderr agent-wait --store "$reader" r1
	pg_sql "DROP OWNED BY $role; DROP ROLE $role"
}

# conns: the connections of this test's agentkit processes (their
# application_name, given in the store URL) to the server now.
conns() {
	pg_sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'w$$'
		AND pid <> pg_backend_pid()"
}

@test "a detached worker holds one connection while its turns run, and none once it has finalized" {
	export AGENTKIT_STORE="$AGENTKIT_STORE&application_name=w$$"
	script '{"chunks":["a ","b ","c"],"delay":"1s"}'
	run -0 --separate-stderr agent-run --model script/model.ndjson --detach -m go
	id=$(id_of "$output")
	sleep 1
	assert_equal "$(conns)" 1
	run -0 --separate-stderr timeout 20 agent-wait "$id"
	assert_equal "$(jq -r .status <<<"$output")" completed
	wait_for 10 eval '[ "$(conns)" = 0 ]'
}

@test "the server's connection limit reached: exit 111, saying so" {
	role="lim_$$_$RANDOM"
	pg_sql "CREATE ROLE $role LOGIN CONNECTION LIMIT 1; GRANT USAGE ON SCHEMA $PG_SCHEMA TO $role;
		GRANT ALL ON ALL TABLES IN SCHEMA $PG_SCHEMA TO $role"
	lim=${AGENTKIT_STORE/user=agentkit/user=$role}
	psql "$lim" -qAtX -c "SELECT pg_sleep(30)" >/dev/null 2>&1 &
	holder=$!
	wait_for 10 eval '[ "$(pg_sql "SELECT count(*) FROM pg_stat_activity WHERE usename = '"'$role'"'")" = 1 ]'
	run -111 --separate-stderr agent-run --store "$lim" --model echo -m hi
	assert_equal "$(jq -r .error.status <<<"$output")" INTERNAL
	[[ "$stderr" == "agent-run: cannot connect to the store at '${AGENTKIT_STORE%%\?*}?host=***&user=***&options=***': "*"too many connections for role \"$role\""* ]]
	kill "$holder"
	wait "$holder" || true
	pg_sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '$role'" >/dev/null
	pg_sql "DROP OWNED BY $role; DROP ROLE $role"
}

@test "a race the server reports on every try fails with its message, after the last try" {
	"$SW" save r1 '{"sessionId":"s"}' >/dev/null
	# every write of a snapshot loses a race: a serialization failure
	pg_sql "CREATE FUNCTION $PG_SCHEMA.lose() RETURNS trigger LANGUAGE plpgsql AS
		\$\$BEGIN RAISE EXCEPTION 'the race is lost' USING ERRCODE = '40001'; END\$\$;
		CREATE TRIGGER lose BEFORE INSERT OR UPDATE ON $PG_SCHEMA.agentkit_snapshots
		FOR EACH ROW EXECUTE FUNCTION $PG_SCHEMA.lose()"
	run -111 --separate-stderr "$SW" save r2 '{"sessionId":"s"}'
	assert_equal "$stderr" "store-worker: write snapshot: the race is lost"
	# an import's transaction says the same
	run -111 --separate-stderr agent-snap import <<<'{"snapshotId":"r3","sessionId":"s","createdAt":"2026-01-01T00:00:00Z","status":"completed"}'
	assert_equal "$stderr" "agent-snap: write snapshot: the race is lost"
	# and nothing of either was written
	pg_sql "DROP TRIGGER lose ON $PG_SCHEMA.agentkit_snapshots"
	run -0 --separate-stderr agent-snap export
	assert_equal "$(jq -r .snapshotId <<<"$output")" r1
}

# latest_step: the schema version this agentkit knows (an empty
# database's migrate --dry-run lists every step as pending).
latest_step() {
	agent-snap migrate --dry-run | jq -r .latest
}

@test "migrate --dry-run shows every step of an empty database and creates nothing" {
	run -0 --separate-stderr agent-snap migrate --dry-run
	latest=$(jq -r .latest <<<"$output")
	[ "$latest" -ge 1 ]
	assert_equal "$(jq -c '[.backend, .version, ([.pending[].version] == [range(1; .latest + 1)])]' <<<"$output")" "[\"PostgreSQL\",0,true]"
	# step 1 lists its statements, read from its SQL
	assert_equal "$(jq -c '.pending[0].statements[0:3]' <<<"$output")" '["CREATE TABLE agentkit_nodes","CREATE INDEX agentkit_nodes_prev","CREATE TABLE agentkit_snapshots"]'
	run -0 jq -e '[.pending[].statements[]] | all(test("^[A-Z][A-Z ]* [a-z_]+$"))' <<<"$output"
	assert_equal "$(pg_sql "SELECT count(*) FROM pg_tables WHERE schemaname = '$PG_SCHEMA'")" 0
	run -0 --separate-stderr agent-snap migrate --dry-run --format text
	assert_line --index 0 "step 1 (pending):"
	assert_line --index 1 "  CREATE TABLE agentkit_nodes"
	assert_line --index -1 "PostgreSQL store at version 0, this agentkit's is $latest: $latest step$([ "$latest" = 1 ] || echo s) pending (run 'agent-snap migrate')"
	# the readers still find no store there
	run -4 --separate-stderr agent-snap sessions
}

@test "migrate brings a store of an older version up to date, once" {
	latest=$(latest_step)
	old=$((latest - 1))
	# a store made by an agentkit that knew one step less
	run -0 --separate-stderr env AGENTKIT_TEST_PG_SCHEMA_STEPS=$old agent-snap migrate
	assert_equal "$(jq -c '[.backend, .version, .latest, [.applied[].version]]' <<<"$output")" "[\"PostgreSQL\",$old,$old,[$(seq -s, 1 "$old")]]"
	if [ "$old" -ge 1 ]; then
		AGENTKIT_TEST_PG_SCHEMA_STEPS=$old "$SW" save old1 '{"sessionId":"s","state":{"messages":[{"role":"user"}]}}' >/dev/null
		assert_equal "$(pg_sql 'SELECT max(version) FROM agentkit_schema_version')" "$old"
	fi
	run -0 --separate-stderr agent-snap migrate --dry-run
	assert_equal "$(jq -c '[.version, .latest, [.pending[].version]]' <<<"$output")" "[$old,$latest,[$latest]]"
	run -0 --separate-stderr agent-snap migrate
	assert_equal "$(jq -c '[.version, .latest, [.applied[].version]]' <<<"$output")" "[$latest,$latest,[$latest]]"
	assert_equal "$stderr" ""
	assert_equal "$(pg_sql 'SELECT string_agg(version::text, $$,$$ ORDER BY version) FROM agentkit_schema_version')" "$(seq -s, 1 "$latest")"
	# once: nothing left to do
	run -0 --separate-stderr agent-snap migrate
	assert_output "{\"backend\":\"PostgreSQL\",\"version\":$latest,\"latest\":$latest,\"applied\":[]}"
	run -0 --separate-stderr agent-snap migrate --format text
	assert_output "PostgreSQL store at version $latest, this agentkit's: nothing to migrate"
	# rows written before the migration read back, and writes go on
	if [ "$old" -ge 1 ]; then
		run -0 --separate-stderr agent-snap old1
		assert_output '{"sessionId":"s","state":{"messages":[{"role":"user"}]},"snapshotId":"old1","status":"completed"}'
	fi
	"$SW" save row2 '{"sessionId":"s"}' >/dev/null
	run -0 --separate-stderr agent-snap -m row2
	assert_output '{"sessionId":"s","snapshotId":"row2","status":"completed"}'
}

@test "a version 4 store gains the sessions' index at its first open: built from its rows, then kept" {
	# a store made by an agentkit that knew steps 1 to 4
	for r in a1:a:01:05 a2:a:02:03 b1:b:01:04 c1:c:01:03; do
		IFS=: read -r id sid c u <<<"$r"
		printf '{"snapshotId":"%s","sessionId":"%s","createdAt":"2026-01-01T00:00:%sZ","updatedAt":"2026-01-01T00:00:%sZ"}\n' "$id" "$sid" "$c" "$u"
	done >rows.ndjson
	run -0 --separate-stderr env AGENTKIT_TEST_PG_SCHEMA_STEPS=4 agent-snap import rows.ndjson
	assert_equal "$(pg_sql "SELECT count(*) FROM pg_tables WHERE schemaname = '$PG_SCHEMA' AND tablename = 'agentkit_recent'")" 0
	# this agentkit's first open applies step 5 and builds the index
	run -0 --separate-stderr agent-snap sessions --format ndjson
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .snapshots]' <<<"$output" | tr '\n' ' ')" '["b","b1",1] ["a","a2",2] ["c","c1",1] '
	assert_equal "$(pg_sql 'SELECT max(version) FROM agentkit_schema_version')" "$(latest_step)"
	assert_equal "$(pg_sql 'SELECT session_id || $$ $$ || latest_id || $$ $$ || row_count FROM agentkit_recent ORDER BY updated_ns DESC, session_id')" "b b1 1
a a2 2
c c1 1"
	# and the trigger keeps it: a new latest row moves its session first
	printf '{"snapshotId":"c2","sessionId":"c","createdAt":"2026-01-01T00:00:09Z","updatedAt":"2026-01-01T00:00:09Z"}\n' >more.ndjson
	run -0 --separate-stderr agent-snap import more.ndjson
	run -0 --separate-stderr agent-snap sessions --limit 2 --format ndjson
	assert_equal "$(jq -c '[.sessionId, .snapshots]' <<<"$output" | tr '\n' ' ')" '["c",2] ["b",1] '
}

# entries: each session's entry as "SID LATEST yes|no" (no: none stored)
entries() {
	pg_sql 'SELECT session_id || $$ $$ || latest_id || $$ $$ || CASE WHEN entry IS NULL THEN $$no$$ ELSE $$yes$$ END FROM agentkit_recent ORDER BY session_id' | tr '\n' ' '
}

@test "a version 5 store gains listing entries: made from its rows, kept from each write, and a session without one is listed from its row" {
	# a store made by an agentkit that knew steps 1 to 5
	for r in a1:a:01:05:one a2:a:02:06:two b1:b:01:04:three; do
		IFS=: read -r id sid c u title <<<"$r"
		printf '{"snapshotId":"%s","sessionId":"%s","createdAt":"2026-01-01T00:00:%sZ","updatedAt":"2026-01-01T00:00:%sZ","agentkit":{"agent":"chat","title":"%s"}}\n' "$id" "$sid" "$c" "$u" "$title"
	done >rows.ndjson
	run -0 --separate-stderr env AGENTKIT_TEST_PG_SCHEMA_STEPS=5 agent-snap import rows.ndjson
	run -0 --separate-stderr env AGENTKIT_TEST_PG_SCHEMA_STEPS=5 agent-snap sessions --format ndjson
	before=$output
	# this agentkit's first open applies step 6, which makes the entries
	# of the sessions there from their latest rows: the same lines
	run -0 --separate-stderr agent-snap sessions --format ndjson
	assert_equal "$output" "$before"
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .title, .snapshots]' <<<"$output" | tr '\n' ' ')" '["a","a2","two",2] ["b","b1","three",1] '
	assert_equal "$(pg_sql 'SELECT max(version) FROM agentkit_schema_version')" "$(latest_step)"
	assert_equal "$(entries)" "a a2 yes b b1 yes "
	# a write stores its session's entry; the listing prints it
	printf '{"snapshotId":"b2","sessionId":"b","createdAt":"2026-01-01T00:00:09Z","updatedAt":"2026-01-01T00:00:09Z","agentkit":{"agent":"chat","title":"four"}}\n' >more.ndjson
	run -0 --separate-stderr agent-snap import more.ndjson
	assert_equal "$(entries)" "a a2 yes b b2 yes "
	run -0 --separate-stderr agent-snap sessions --format ndjson
	assert_line --index 0 '{"sessionId":"b","snapshotId":"b2","status":"completed","updatedAt":"2026-01-01T00:00:09Z","snapshots":2,"agent":"chat","title":"four"}'
	run -0 --separate-stderr agent-snap sessions --agent chat --limit 1 --format ndjson
	assert_output '{"sessionId":"b","snapshotId":"b2","status":"completed","updatedAt":"2026-01-01T00:00:09Z","snapshots":2,"agent":"chat","title":"four"}'
	# a write that hands no entry over (an older agentkit's) leaves none,
	# and the listing reads the row as it is now
	pg_sql "UPDATE agentkit_snapshots SET meta = replace(meta, '\"four\"', '\"five\"') WHERE snapshot_id = 'b2'"
	assert_equal "$(entries)" "a a2 yes b b2 no "
	run -0 --separate-stderr agent-snap sessions --limit 1 --format ndjson
	assert_equal "$(jq -r .title <<<"$output")" five
	# a deletion that makes an older row the latest: listed from that row
	import_b3='{"snapshotId":"b3","sessionId":"b","createdAt":"2026-01-01T00:00:10Z","updatedAt":"2026-01-01T00:00:10Z","agentkit":{"agent":"chat","title":"six"}}'
	run -0 --separate-stderr agent-snap import <<<"$import_b3"
	assert_equal "$(entries)" "a a2 yes b b3 yes "
	pg_sql "SELECT agentkit_drop(ARRAY['b3'])" >/dev/null
	assert_equal "$(entries)" "a a2 yes b b2 no "
	run -0 --separate-stderr agent-snap sessions --format ndjson
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .title, .snapshots]' <<<"$output" | tr '\n' ' ')" '["b","b2","five",2] ["a","a2","two",2] '
	# a heartbeat-like rewrite of the latest row through agent-snap's
	# own write path stores the entry again
	run -0 --separate-stderr agent-snap import <<<"$import_b3"
	assert_equal "$(entries)" "a a2 yes b b3 yes "
}

# recent_exact: the sessions whose agentkit_recent row is not what the
# rows say (latest by createdAt then ID, its createdAt, the row count), as
# "session:what" words; empty when every entry is exact.
recent_exact() {
	pg_sql 'WITH l AS (SELECT DISTINCT ON (session_id) session_id, snapshot_id, created_ns,
		 count(*) OVER (PARTITION BY session_id) AS n FROM agentkit_snapshots
		 ORDER BY session_id, created_ns DESC, snapshot_id DESC)
		SELECT coalesce(l.session_id, r.session_id) || $$:$$ ||
		 CASE WHEN r.session_id IS NULL THEN $$missing$$ WHEN l.session_id IS NULL THEN $$extra$$
		 WHEN r.latest_id <> l.snapshot_id THEN $$latest$$ WHEN r.latest_ns <> l.created_ns
		 THEN $$latest_ns$$ ELSE $$count$$ END
		FROM l FULL JOIN agentkit_recent r USING (session_id)
		WHERE r.session_id IS NULL OR l.session_id IS NULL OR r.latest_id <> l.snapshot_id
		 OR r.latest_ns <> l.created_ns OR r.row_count <> l.n ORDER BY 1' | tr '\n' ' '
}

@test "a version 7 store gains its entries' latest times; new rows go in by plain SQL and keep the index exact" {
	for r in a1:a:01 a2:a:02 b1:b:01; do
		IFS=: read -r id sid c <<<"$r"
		printf '{"snapshotId":"%s","sessionId":"%s","createdAt":"2026-01-01T00:00:%sZ"}\n' "$id" "$sid" "$c"
	done >rows.ndjson
	run -0 --separate-stderr env AGENTKIT_TEST_PG_SCHEMA_STEPS=7 agent-snap import rows.ndjson
	# the first open of this agentkit applies step 8, which fills latest_ns
	run -0 --separate-stderr agent-snap sessions --format ndjson
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .snapshots]' <<<"$output" | tr '\n' ' ')" '["a","a2",2] ["b","b1",1] '
	assert_equal "$(pg_sql 'SELECT max(version) FROM agentkit_schema_version')" "$(latest_step)"
	assert_equal "$(recent_exact)" ""
	assert_equal "$(pg_sql "SELECT latest_ns FROM agentkit_recent WHERE session_id = 'a'")" 1767225602000000000
	# new rows: one newer than its session's latest, one older, a new
	# session with a history of awkward bytes; no PL/pgSQL function runs
	tracked="$AGENTKIT_STORE%20-ctrack_functions%3Dall"
	cat >more.ndjson <<-'EOF'
	{"snapshotId":"b2","sessionId":"b","createdAt":"2026-01-01T00:00:09Z"}
	{"snapshotId":"a0","sessionId":"a","createdAt":"2026-01-01T00:00:00Z"}
	{"snapshotId":"c1","sessionId":"c","createdAt":"2026-01-01T00:00:05Z","state":{"messages":[{"role":"user","content":[{"text":"é \"ü\" \\ \u0001 😀"}]},{"role":"model","content":[{"text":"ok"}]}]}}
	EOF
	run -0 --separate-stderr agent-snap --store "$tracked" import more.ndjson
	assert_output '{"imported":3}'
	# a marker process that calls one function: once its call is counted,
	# the import's server process (gone before it) has reported too
	psql "$tracked" -qAtX -c "SELECT agentkit_time_ns('2026-01-01T00:00:00Z')" >/dev/null
	for _ in $(seq 100); do
		[ "$(pg_sql "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE schemaname = '$PG_SCHEMA'")" = 0 ] || break
		sleep 0.05
	done
	assert_equal "$(pg_sql "SELECT string_agg(funcname || '=' || calls, ' ') FROM pg_stat_user_functions WHERE schemaname = '$PG_SCHEMA'")" "agentkit_time_ns=1"
	assert_equal "$(recent_exact)" ""
	assert_equal "$(entries)" "a a2 yes b b2 yes c c1 yes "
	run -0 --separate-stderr agent-snap sessions --format ndjson
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .snapshots]' <<<"$output" | tr '\n' ' ')" '["b","b2",2] ["c","c1",1] ["a","a2",3] '
	# the nodes are the ones the server's own chain makes: each hash is
	# SHA-256 of its prev (or 32 zero bytes) and its body
	assert_equal "$(pg_sql "SELECT count(*) || '/' || count(*) FILTER (WHERE hash = sha256(coalesce(prev, decode(repeat('00', 32), 'hex')) || convert_to(body, 'UTF8'))) FROM agentkit_nodes")" 2/2
	run -0 --separate-stderr agent-snap c1
	assert_output '{"snapshotId":"c1","sessionId":"c","createdAt":"2026-01-01T00:00:05Z","state":{"messages":[{"role":"user","content":[{"text":"é \"ü\" \\ \u0001 😀"}]},{"role":"model","content":[{"text":"ok"}]}]},"status":"completed","updatedAt":"2026-01-01T00:00:05Z"}'
	# eight writers add rows to one session at once, in no order of time
	for i in 1 2 3 4 5 6 7 8; do
		printf '{"snapshotId":"d%s","sessionId":"d","createdAt":"2026-01-01T00:00:0%sZ"}\n' "$i" "$(((i * 5) % 8 + 1))" |
			agent-snap import >/dev/null &
	done
	wait
	assert_equal "$(recent_exact)" ""
	assert_equal "$(pg_sql "SELECT latest_id || ' ' || row_count FROM agentkit_recent WHERE session_id = 'd'")" "d3 8"
}

# v8 CMD...: CMD as an agentkit that knew schema steps 1 to 8 would run it.
v8() { AGENTKIT_TEST_PG_SCHEMA_STEPS=8 "$@"; }

# rows_of SID...: each session's export, then its listing line.
rows_of() {
	local sid
	for sid in "$@"; do
		agent-snap export "$sid" || return 1
		agent-snap sessions --format ndjson | grep "^{\"sessionId\":\"$sid\"" || return 1
	done
}

@test "a version 8 store's states move into their rows: every row reads back byte for byte, and writers lose nothing" {
	# a store made by an agentkit that knew steps 1 to 8: a session's turns
	# and a fork of its first, a row without a state, one with a state but
	# no messages, a worker's log lines, a queued run
	v8 agent-run --model echo --session a -m one >/dev/null
	first=$(v8 agent-snap log a | jq -r .snapshotId)
	v8 agent-run --model echo --session a -m two >/dev/null
	v8 agent-run --model echo --snapshot "$first" -m fork >/dev/null
	v8 "$SW" save bare '{"sessionId":"b","status":"completed"}' >/dev/null
	v8 "$SW" save nomsg '{"sessionId":"b","state":{"custom":{"n":0}}}' >/dev/null
	v8 "$SW" log bare 2 line >/dev/null
	v8 "$SW" save counter '{"sessionId":"c","state":{"custom":{"n":0}}}' >/dev/null
	queued=$(v8 agent-run --model echo --queue q -m later | jq -r .output.snapshotId)
	# a long-lived writer of that agentkit, open across the upgrade
	mkfifo cmds
	v8 "$SW" history h <cmds >hist.out 2>hist.err &
	old=$!
	exec 5>cmds
	echo '{"append":{"role":"user","content":[{"text":"h1"}]}}' >&5
	echo '{"save":"h1"}' >&5
	wait_for 10 test -s hist.out
	v8 rows_of a b >before
	v8 agent-snap worker-log bare >>before
	queue=$(pg_sql 'SELECT snapshot_id, queue, agent, ready_ns, lease_ns FROM agentkit_queue')
	listed=$(entries)
	assert_equal "$(pg_sql 'SELECT count(*) FROM agentkit_recent WHERE entry IS NULL')" 0
	assert_equal "$(pg_sql 'SELECT max(version) FROM agentkit_schema_version')" 8
	assert_equal "$(pg_sql "SELECT count(*) FROM agentkit_states WHERE body LIKE '%custom%'")" 2
	# this agentkit's first opens, eight at once: read-modify-writes of
	# one row and turns of one session, racing the step
	for i in 1 2 3 4; do
		"$SW" incr counter 25 >/dev/null &
		agent-run --model echo --session d -m "d$i" >/dev/null &
	done
	wait %2 %3 %4 %5 %6 %7 %8 %9
	assert_equal "$(pg_sql 'SELECT string_agg(version::text, $$,$$ ORDER BY version) FROM agentkit_schema_version')" "$(seq -s, 1 "$(latest_step)")"
	assert_equal "$(pg_sql "SELECT to_regclass('agentkit_states') IS NULL")" t
	# every row from before reads back byte for byte, listed as before
	rows_of a b >after
	agent-snap worker-log bare >>after
	assert_equal "$(cat after)" "$(cat before)"
	assert_equal "$(pg_sql 'SELECT snapshot_id, queue, agent, ready_ns, lease_ns FROM agentkit_queue')" "$queue"
	assert_equal "$(entries | sed 's/\(^\| \)d [^ ]* yes / /; s/^ //')" "$listed"
	assert_equal "$(jq -r .status <<<"$(agent-snap -m "$queued")")" pending
	# no write was lost
	assert_equal "$(agent-snap counter | jq .state.custom.n)" 100
	run -0 --separate-stderr agent-snap export d
	assert_equal "${#lines[@]}" 4
	assert_equal "$(jq -c '[.state.messages[].content[0].text] | length' <<<"$(last)")" 8
	assert_equal "$(recent_exact)" ""
	# the older writer's next save fails on the table that went, and
	# writes nothing
	echo '{"append":{"role":"model","content":[{"text":"h2"}]}}' >&5
	echo '{"save":"h2"}' >&5
	exec 5>&-
	rc=0
	wait "$old" || rc=$?
	assert_equal "$rc" 111
	grep -q 'relation "agentkit_states" does not exist' hist.err
	assert_equal "$(agent-snap log h | jq -r .snapshotId)" h1
	# a turn goes on from a history stored before the step (the fork, the latest)
	run -0 --separate-stderr agent-run --model echo --session a -m three
	run -0 --separate-stderr agent-snap export a
	assert_equal "$(jq -c '[.state.messages[].content[0].text]' <<<"$(last)")" '["one","one","fork","fork","three","three"]'
	assert_equal "$(jq -c 'select(.snapshotId == "'"$first"'") | .state.messages' <<<"$output")" '[{"content":[{"text":"one"}],"role":"user"},{"content":[{"text":"one"}],"role":"model"}]'
	# deleting every session collects every row and message
	for sid in a b c d h "$(agent-snap -m "$queued" | jq -r .sessionId)"; do
		agent-snap rm "$sid" >/dev/null
	done
	assert_equal "$(pg_sql 'SELECT (SELECT count(*) FROM agentkit_snapshots) + (SELECT count(*) FROM agentkit_nodes) + (SELECT count(*) FROM agentkit_recent) + (SELECT count(*) FROM agentkit_queue)')" 0
}

@test "a row's first messages read back as their stored text before step 9 and after it" {
	v8 "$SW" turn s t1 "" 'one "quoted"' >/dev/null
	v8 "$SW" turn s t2 t1 two >/dev/null
	want=$(v8 "$SW" get t2 | jq -c '.state.messages[]')
	run -0 --separate-stderr v8 "$SW" texts t2 4
	assert_output "$want"
	assert_equal "$(pg_sql "SELECT to_regclass('agentkit_states') IS NULL")" f
	# this agentkit's first open moves the states into the rows
	run -0 --separate-stderr "$SW" texts t2 3
	assert_output "$(head -n 3 <<<"$want")"
	assert_equal "$(pg_sql "SELECT to_regclass('agentkit_states') IS NULL")" t
}

@test "a new row whose history rewrites its base's last message goes in by agentkit_put, its session's entry kept" {
	"$SW" history h >out <<-'EOF'
	{"append":{"role":"user","content":[{"text":"q"}]}}
	{"append":{"role":"model","content":[{"text":"a1"}]}}
	{"save":"h1"}
	{"truncate":1}
	{"append":{"role":"model","content":[{"text":"a2"}]}}
	{"save":"h2","kept":1}
	EOF
	assert_equal "$(recent_exact)" ""
	assert_equal "$(entries)" "h h2 yes "
	run -0 --separate-stderr agent-snap export h
	assert_equal "$(jq -c '[.snapshotId, [.state.messages[].content[0].text]]' <<<"$output" | tr '\n' ' ')" \
		'["h1",["q","a1"]] ["h2",["q","a2"]] '
	assert_equal "$(pg_sql 'SELECT count(*) FROM agentkit_nodes')" 3
}

@test "no trigger runs on a new row: its insert, by either statement, indexes a queued run itself" {
	q='"agentkit":{"queue":{"name":"q","agent":"a","concurrency":2,"ready":5,"lease":0}}'
	m() { printf '{"role":"user","content":[{"text":"%s"}]}' "$1"; }
	tracked="$AGENTKIT_STORE%20-ctrack_functions%3Dall"
	# r3 differs from the history written before it (r2's) in its last
	# message, so agentkit_put() writes it; the others go in by plain SQL
	cat >rows.ndjson <<-EOF
	{"snapshotId":"r1","sessionId":"s1","state":{"messages":[$(m x)]}}
	{"snapshotId":"r2","sessionId":"s2","state":{"messages":[$(m a),$(m b)]}}
	{"snapshotId":"r3","sessionId":"s3","status":"pending",$q,"state":{"messages":[$(m a),$(m c)]}}
	{"snapshotId":"r4","sessionId":"s4","status":"pending",$q}
	{"snapshotId":"r5","sessionId":"s5","status":"completed",$q}
	EOF
	run -0 --separate-stderr agent-snap --store "$tracked" import rows.ndjson
	assert_output '{"imported":5}'
	assert_equal "$(pg_sql "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'agentkit_snapshots'::regclass AND NOT tgisinternal AND tgtype & 4 <> 0")" 0
	assert_equal "$(pg_sql 'SELECT snapshot_id, queue, agent, concurrency, ready_ns, lease_ns FROM agentkit_queue ORDER BY 1')" "r3|q|a|2|5|0
r4|q|a|2|5|0"
	assert_equal "$(recent_exact)" ""
	wait_for 10 test "$(pg_sql "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE schemaname = '$PG_SCHEMA' AND funcname = 'agentkit_queue_put'")" = 2
	assert_equal "$(pg_sql "SELECT calls FROM pg_stat_user_functions WHERE schemaname = '$PG_SCHEMA' AND funcname = 'agentkit_put' ORDER BY calls")" "1
1"
}

@test "a turn's commit that fails fails the turn: nothing stored, the server's reason said" {
	run -0 --separate-stderr agent-run --model echo --session s -m one
	# a check the server makes only at commit refuses the next row
	pg_sql "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN
		 RAISE EXCEPTION 'refused at commit'; END \$\$;
		CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON agentkit_snapshots
		 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse()"
	run -111 --separate-stderr agent-run --model echo --session s -m two
	[[ $stderr == *"refused at commit"* ]] || fail "$stderr"
	run -0 --separate-stderr agent-snap log s
	assert_equal "${#lines[@]}" 1
	assert_equal "$(recent_exact)" ""
}

@test "writers racing to create one row, a turn's saves among them: no update lost" {
	# half say the row is new (a turn's save takes no lock: its insert
	# claims the ID), half read it first; none finds it at its start
	for _ in 1 2 3 4; do
		"$SW" --new incr fresh 25 >/dev/null &
		"$SW" incr fresh 25 >/dev/null &
	done
	wait
	assert_equal "$(agent-snap fresh | jq .state.custom.n)" 200
	assert_equal "$(recent_exact)" ""
}

@test "eight writers store the same history at once: one copy of each message, every row whole" {
	msgs='[{"role":"user","content":[{"text":"same"}]},{"role":"model","content":[{"text":"answer"}]}]'
	# four as imports, four as a turn's save (a new ID: STORE_NEW)
	for i in 1 2 3 4; do
		printf '{"snapshotId":"r%s","sessionId":"s%s","state":{"messages":%s}}\n' "$i" "$i" "$msgs" |
			agent-snap import >/dev/null &
		"$SW" --new save "r$((i + 4))" "{\"sessionId\":\"s$((i + 4))\",\"state\":{\"messages\":$msgs}}" >/dev/null &
	done
	wait
	assert_equal "$(pg_sql 'SELECT count(*) FROM agentkit_nodes')" 2
	for i in 1 2 3 4 5 6 7 8; do
		run -0 --separate-stderr agent-snap get "r$i"
		assert_equal "$(jq -c .state.messages <<<"$output")" "$msgs"
	done
	assert_equal "$(recent_exact)" ""
}

# table_stat TABLE COLUMN: a counter of pg_stat_user_tables for one of
# the store's tables (as the server processes that ended have reported it).
table_stat() {
	pg_sql "SELECT $2 FROM pg_stat_user_tables WHERE schemaname = '$PG_SCHEMA' AND relname = '$1'"
}

@test "a turn finds its messages' stored nodes by their key: it never scans agentkit_nodes" {
	run -0 --separate-stderr agent-run --model echo --session s -m one
	wait_for 10 test "$(table_stat agentkit_snapshots n_tup_ins)" = 1
	before=$(table_stat agentkit_nodes seq_scan)
	for i in 2 3 4 5; do
		run -0 --separate-stderr agent-run --model echo --session s -m "turn $i"
	done
	# each turn's server process has reported once its row is counted
	wait_for 10 test "$(table_stat agentkit_snapshots n_tup_ins)" = 5
	assert_equal "$(table_stat agentkit_nodes seq_scan)" "$before"
	assert_equal "$(table_stat agentkit_nodes n_tup_ins)" 10
	run -0 --separate-stderr agent-snap export s
	assert_equal "$(jq -c '[.state.messages[].content[0].text]' <<<"$(last)")" \
		'["one","one","turn 2","turn 2","turn 3","turn 3","turn 4","turn 4","turn 5","turn 5"]'
}

@test "migrate refuses a store newer than this agentkit: exit 5, nothing changed" {
	"$SW" save old1 '{"sessionId":"s"}' >/dev/null
	latest=$(latest_step)
	for flag in "" --dry-run; do
		# shellcheck disable=SC2086
		run -5 --separate-stderr env AGENTKIT_TEST_PG_SCHEMA_STEPS=$((latest - 1)) agent-snap migrate $flag
		assert_output ""
		assert_equal "$stderr" "agent-snap: the store at '${AGENTKIT_STORE%%\?*}?host=***&user=***&options=***' has schema version $latest, newer than this agentkit's $((latest - 1)): upgrade agentkit"
	done
	assert_equal "$(pg_sql 'SELECT max(version) FROM agentkit_schema_version')" "$latest"
	# an unreachable server is 111, its password never shown
	run -111 --separate-stderr agent-snap --store 'postgresql://me:sekrit@/agentkit?host=/nonexistent' migrate
	[[ $stderr != *sekrit* ]]
}

# beating ID: the row's worker has heartbeaten at least once.

@test "the server restarts in the middle of a detached run: the run finishes, a waiter on another host gets its row" {
	own_server
	export AGENTKIT_HEARTBEAT_INTERVAL=100ms AGENTKIT_HEARTBEAT_TIMEOUT=30s
	run -0 --separate-stderr host a agent-run --model "script/$FIXTURES/detach/convo.ndjson" \
		--detach -m one -m slow
	id=$(jq -r .output.snapshotId <<<"$output")
	on b agent-wait --timeout 60s "$id" >wait.out 2>wait.err &
	waiter=$!
	wait_for 10 beating "$id"
	# down for 3s from early in the slow turn (2s of chunks): the worker
	# streams on, then finalizes while the server is away
	"$TOP/scripts/pg-test-server" restart "$SERVER" 3
	rc=0
	wait "$waiter" || rc=$?
	assert_equal "$rc $(cat wait.err)" "0 "
	assert_equal "$(jq -c '[.status, .finishReason, [.state.messages[].content[0].text]]' wait.out)" \
		'["completed","stop",["one","ok 0","slow","a b c d e f g h i j "]]'
	log="$BATS_TEST_TMPDIR/host-a/state/agentkit/logs/$id.log"
	wait_for 10 grep -q "heartbeats failed" "$log"
	grep -q "finalized completed, finish reason stop" "$log"
	# every host reads the one finalized row
	run -0 --separate-stderr host c agent-snap log "$(jq -r .sessionId wait.out)"
	assert_equal "$(jq -r .status <<<"$output")" completed
}

@test "a server away longer than AGENTKIT_STORE_LOCK_TIMEOUT: the waiter exits 111, the worker leaves its row to expire" {
	own_server
	now=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
	echo "{\"snapshotId\":\"w\",\"sessionId\":\"s\",\"status\":\"pending\",\"createdAt\":\"$now\",\"updatedAt\":\"$now\",\"heartbeatAt\":\"$now\"}" |
		agent-snap import >/dev/null
	export AGENTKIT_STORE_LOCK_TIMEOUT=1s AGENTKIT_HEARTBEAT_INTERVAL=100ms
	# the worker's heartbeat timeout, which readers take when it is
	# longer than theirs: the row reads expired soon after the server is back
	AGENTKIT_HEARTBEAT_TIMEOUT=5s on a agent-run --model "script/$FIXTURES/detach/convo.ndjson" --detach -m slow >run.out &
	runner=$!
	on b agent-wait --timeout 60s w >wait.out 2>wait.err &
	waiter=$!
	wait "$runner"
	id=$(jq -r .output.snapshotId run.out)
	wait_for 10 beating "$id"
	wait_for 10 agentkit_connected
	start=$SECONDS
	"$TOP/scripts/pg-test-server" restart "$SERVER" 5 &
	restart=$!
	rc=0
	wait "$waiter" || rc=$?
	# the waiter gave up about 1s after the server went, not when it came back
	[ $((SECONDS - start)) -lt 5 ] || fail "the waiter took $((SECONDS - start))s"
	assert_equal "$rc" 111
	assert_equal "$(cat wait.out)" ""
	[[ $(cat wait.err) == "agent-wait: lost the connection to the store at 'postgresql:///agentkit?host=***&user=***' and could not reconnect within 1s: connection to server on socket "*" failed: "* ]] || fail "$(cat wait.err)"
	wait "$restart"
	# the worker could not finalize while the server was away: its row
	# stays pending, with no heartbeat since, and reads expired
	log="$BATS_TEST_TMPDIR/host-a/state/agentkit/logs/$id.log"
	wait_for 20 grep -q "cannot finalize the row" "$log"
	grep -q "could not reconnect within 1s" "$log"
	run -3 --separate-stderr agent-wait --heartbeat-timeout 500ms --timeout 10s "$id"
	assert_equal "$(jq -r .status <<<"$output")" expired
	run -0 --separate-stderr agent-snap --heartbeat-timeout 1h -m "$id"
	assert_equal "$(jq -r .status <<<"$output")" pending
}

@test "TLS settings pass through libpq: sslmode=require connects, verify-full with a wrong root certificate fails (111)" {
	command -v openssl >/dev/null 2>&1 ||
		skip "needs the openssl command to make a certificate (scripts/setup installs it)"
	tls="$BATS_TEST_TMPDIR/tls"
	mkdir -p "$tls"
	for name in server other; do
		openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=127.0.0.1" \
			-addext subjectAltName=IP:127.0.0.1 -keyout "$tls/$name.key" \
			-out "$tls/$name.crt" 2>/dev/null
	done
	own_server --ssl "$tls/server.crt" "$tls/server.key"
	[[ $AGENTKIT_STORE == postgresql://agentkit@127.0.0.1:*/agentkit ]]
	port=${AGENTKIT_STORE##*:}
	port=${port%%/*}
	# a password in the URL (the server trusts local connections and never
	# asks for it) must never show
	url="postgresql://agentkit:sekrit@127.0.0.1:$port/agentkit"
	run -0 --separate-stderr "$SW" --store "$url?sslmode=require" save row1 '{"sessionId":"s"}'
	# the waiter's session is encrypted
	agent-wait --store "$url?sslmode=require" --timeout 30s row1 >/dev/null
	"$SW" --store "$url?sslmode=require" save p '{"sessionId":"s","status":"pending"}' >/dev/null
	agent-wait --store "$url?sslmode=require" --timeout 30s p >wait.out &
	waiter=$!
	wait_for 10 agentkit_connected
	assert_equal "$(pg_sql "SELECT bool_and(l.ssl) FROM pg_stat_ssl l JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'agentkit'")" t
	"$SW" --store "$url?sslmode=require" finalize p completed stop >/dev/null
	wait "$waiter"
	assert_equal "$(jq -r .status wait.out)" completed
	# the right root certificate verifies the server's name
	run -0 --separate-stderr agent-snap --store "$url?sslmode=verify-full&sslrootcert=$tls/server.crt" -m row1
	assert_output '{"sessionId":"s","snapshotId":"row1","status":"completed"}'
	# a wrong one: a clear message, exit 111, no password
	for cmd in "agent-snap -m row1" "agent-wait row1" "agent-abort row1"; do
		# shellcheck disable=SC2086
		run -111 --separate-stderr $cmd --store "$url?sslmode=verify-full&sslrootcert=$tls/other.crt"
		assert_equal "$stderr" "${cmd%% *}: cannot connect to the store at 'postgresql://***@127.0.0.1:$port/agentkit?sslmode=***&sslrootcert=***': connection to server at \"127.0.0.1\", port $port failed: SSL error: certificate verify failed"
	done
	# a name the certificate does not carry
	run -111 --separate-stderr agent-snap --store "postgresql://agentkit:sekrit@localhost:$port/agentkit?sslmode=verify-full&sslrootcert=$tls/server.crt" -m row1
	assert_equal "$stderr" "agent-snap: cannot connect to the store at 'postgresql://***@localhost:$port/agentkit?sslmode=***&sslrootcert=***': connection to server at \"localhost\" (127.0.0.1), port $port failed: server certificate for \"127.0.0.1\" (and 1 other name) does not match host name \"localhost\""
	[[ $stderr != *sekrit* ]]
}

@test "after a server restart a detached worker's abort watch still sees an abort from another host" {
	own_server
	export AGENTKIT_HEARTBEAT_INTERVAL=100ms AGENTKIT_HEARTBEAT_TIMEOUT=30s
	export HANG_PIDFILE="$BATS_TEST_TMPDIR/hang.pids"
	run -0 --separate-stderr host a agent-run --model "script/$FIXTURES/detach/convo.ndjson" \
		--tool "$FIXTURES/detach/hang.json" --detach -m hang
	id=$(jq -r .output.snapshotId <<<"$output")
	wait_for 10 eval '[ "$(wc -l <"$HANG_PIDFILE" 2>/dev/null)" = 2 ]'
	wait_for 10 beating "$id"
	"$TOP/scripts/pg-test-server" restart "$SERVER" 1
	# the worker heartbeats again once the server is back
	hb=$(agent-snap -m "$id" | jq -r .heartbeatAt)
	wait_for 10 eval '[ "$(agent-snap -m "$id" | jq -r .heartbeatAt)" != "$hb" ]'
	run -0 --separate-stderr host b agent-abort "$id"
	assert_output "{\"snapshotId\":\"$id\",\"previousStatus\":\"pending\",\"status\":\"aborting\"}"
	run -2 --separate-stderr host c agent-wait --timeout 30s "$id"
	assert_equal "$(jq -c '[.status, .finishReason]' <<<"$output")" '["aborted","aborted"]'
	for pid in $(cat "$HANG_PIDFILE"); do
		wait_for 10 eval "! kill -0 $pid 2>/dev/null"
	done
	grep -q "the abort flip was seen" "$BATS_TEST_TMPDIR/host-a/state/agentkit/logs/$id.log"
}

@test "a store password is in no process's command line or environment block: a detached worker, agent-wait" {
	# The test server trusts its socket: libpq connects with the URL's
	# password unused.
	local pw="postgresql://agentkit:url-secret@${AGENTKIT_STORE#postgresql://}&password=kw-secret"
	local secrets='url-secret|kw-secret|env-secret' wpid pid args environ
	export AGENTKIT_STORE="$pw" PGPASSWORD=env-secret
	run -0 --separate-stderr agent-run --store "$pw" --model "script/$FIXTURES/detach/convo.ndjson" \
		--detach -m slow
	id=$(jq -r .output.snapshotId <<<"$output")
	log="$XDG_STATE_HOME/agentkit/logs/$id.log"
	wait_for 10 test -s "$log"
	wpid=$(sed -n '1s/.*agent-run\[\([0-9]*\)\]: worker started.*/\1/p' "$log")
	[ -n "$wpid" ] || fail "no worker in: $(cat "$log")"
	for pid in "$wpid" waiter; do
		if [ "$pid" = waiter ]; then
			agent-wait --store "$pw" "$id" >wait.out &
			pid=$!
			wait_for 10 eval '[[ $(ps -o args= -p $pid) == *"***"* ]]'
		fi
		args=$(ps -o args= -p "$pid")
		[[ $args == *"--store postgresql://agentkit:***@/agentkit?"*"&password=***"* ]] ||
			fail "pid $pid: $args"
		! grep -E "$secrets" <<<"$args" || fail "pid $pid shows the password: $args"
		# Root reads the block of a process that is not dumpable.
		if environ=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null); then
			grep -qx PGPASSWORD= <<<"$environ" || fail "pid $pid environ: $environ"
			grep -qx AGENTKIT_STORE= <<<"$environ" || fail "pid $pid environ: $environ"
			! grep -E "$secrets" <<<"$environ" || fail "pid $pid's environment holds the password"
		fi
	done
	wait "$pid"
	assert_equal "$(jq -r .status wait.out)" completed
}
