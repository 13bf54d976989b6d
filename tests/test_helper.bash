# test_helper.bash - shared setup for agentkit's bats suites.
#
# Puts the binaries under test first on PATH (AGENTKIT_BIN, set by
# scripts/runtests; build/bin by default), gives every test its own store
# and agent directory, loads bats-support/bats-assert, and holds the
# helpers more than one file uses (the end of this file).  A file's own
# helper of the same name as one here differs from it: a comment there
# says how.

bats_require_minimum_version 1.5.0

TOP=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
AGENTKIT_BIN=${AGENTKIT_BIN:-$TOP/build/bin}
PATH="$AGENTKIT_BIN:$PATH"
FIXTURES="$TOP/tests/fixtures"
TESTDATA="$TOP/tests/testdata"
export PATH TOP FIXTURES TESTDATA

load /usr/lib/bats/bats-support/load.bash
load /usr/lib/bats/bats-assert/load.bash

# Every test: a private store, no inherited agent settings.
common_setup() {
	export AGENTKIT_STORE="$BATS_TEST_TMPDIR/store"
	export XDG_STATE_HOME="$BATS_TEST_TMPDIR/state"
	# every save that says which messages it kept from its base is checked
	export AGENTKIT_STORE_VERIFY=1
	unset AGENTKIT_PATH
	# the end of the agent path: empty, so the user's own agents never leak in
	export XDG_CONFIG_HOME="$BATS_TEST_TMPDIR/config"
	# ASan: leaks are errors too, and reports go to stderr.
	. "$TOP/tests/sanitizers.bash"
	cd "$BATS_TEST_TMPDIR" || return 1
	# the pass's backend (tests/backends) makes the test's store:
	# tests/stores/NAME.bash, when there is one, defines NAME_store()
	local b=${AGENTKIT_TEST_BACKEND:-lmdb}
	if ! grep -q "^$b[[:space:]]" "$TOP/tests/backends"; then
		echo "AGENTKIT_TEST_BACKEND=$b is not a row of tests/backends" >&2
		return 1
	fi
	if [ -f "$TOP/tests/stores/$b.bash" ]; then
		. "$TOP/tests/stores/$b.bash" && "${b}_store" || return 1
	fi
}

# is_pg: the test runs on the PostgreSQL backend.
is_pg() { [ "${AGENTKIT_TEST_BACKEND:-lmdb}" = pg ]; }

# pg_sql SQL: one statement on the test's schema; rows on stdout.
pg_sql() { psql "$AGENTKIT_STORE" -qAtX -c "$1"; }

# stored_messages: how many message nodes the test's store holds (the
# LMDB backend's msg records, the PostgreSQL backend's agentkit_nodes).
stored_messages() {
	if is_pg; then
		pg_sql 'SELECT count(*) FROM agentkit_nodes'
	else
		requires mdb_stat
		mdb_stat -s msg "$AGENTKIT_STORE" | sed -n 's/^ *Entries: //p'
	fi
}

# logs_dir: where the test's detached workers keep their logs: beside an
# LMDB store, this host's state directory for a store on a server.
logs_dir() {
	if is_pg; then
		echo "$XDG_STATE_HOME/agentkit/logs"
	else
		echo "$AGENTKIT_STORE/logs"
	fi
}

# requires CMD...: skip the test when a program is missing from PATH (a
# helper function of the same name, script() below, does not count).
requires() {
	for c in "$@"; do
		type -P "$c" >/dev/null 2>&1 || skip "needs $c"
	done
}

# The binaries the suite knows about (those built so far).
agentkit_bins() {
	for b in agent-run agent-snap agent-wait agent-abort agent-serve agent-worker jpatch-diff jpatch-apply; do
		[ -x "$AGENTKIT_BIN/$b" ] && echo "$b"
	done
}

# wait_for SECONDS CMD...: retry CMD every 50ms until it succeeds.
wait_for() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -le "$end" ] || { echo "timed out waiting for: $*" >&2; return 1; }
		sleep 0.05
	done
}

# ---- helpers shared by the suites ----

# last: the last line of $output (a run's final NDJSON record).
last() { printf '%s\n' "$output" | tail -n 1; }

# chunks: every line of $output but the last (the streamed chunks).
chunks() { printf '%s\n' "$output" | sed '$d'; }

# script LINE...: the script model's turns (model.ndjson in the test's
# directory), one NDJSON line each.  It hides util-linux's script(1) from
# the shell: run that one through another program (timeout 20 script ...).
script() { printf '%s\n' "$@" >"$BATS_TEST_TMPDIR/model.ndjson"; }

# msg TEXT: a script-model turn answering TEXT.
msg() { printf '{"message":{"content":[{"text":"%s"}]}}\n' "$1"; }

# id_of LINE: the snapshot ID of an agent-run result line.
id_of() { jq -r .output.snapshotId <<<"$1"; }

# gone PID: the process has exited (absent, or a zombie).
gone() { ! ps -o stat= -p "$1" 2>/dev/null | grep -qv '^Z'; }

# has_line FILE PATTERN: FILE exists and has a line matching PATTERN.
has_line() { grep -q "$2" "$1" 2>/dev/null; }

# finish: wait (at most 20 s) for the background $pid; its status in rc.
finish() {
	rc=0
	timeout 20 tail --pid="$pid" -f /dev/null || true
	wait "$pid" || rc=$?
}

# beating ID: row ID has had a heartbeat since it was created.
beating() {
	[ "$(agent-snap -m "$1" | jq -r .heartbeatAt)" != "$(agent-snap -m "$1" | jq -r .createdAt)" ]
}
