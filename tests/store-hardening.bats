#!/usr/bin/env bats
# The store against a hostile minute: kill storms among concurrent
# writers, a stuck writer, a store directory others could tamper with, a
# read-only store.

load test_helper

setup() {
	common_setup
	SW="$AGENTKIT_BIN/../tests/helpers/store-worker"
	MNT="" RODIR=""
}

teardown() {
	if [ -n "$MNT" ]; then
		umount "$MNT" 2>/dev/null || true
	fi
	chmod -R u+w "$BATS_TEST_TMPDIR" 2>/dev/null || true
	if [ -n "$RODIR" ]; then
		rm -rf "$RODIR"
	fi
}

# settle BOUND PID...: wait for every PID to exit, at most BOUND seconds in
# all; a PID still running then is reported on stderr, killed, and the
# call fails.
settle() {
	local end=$((SECONDS + $1)) p hung=0
	shift
	for p in "$@"; do
		while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do
			sleep 0.05
		done
		if kill -0 "$p" 2>/dev/null; then
			echo "pid $p still running after the bound (wchan $(cat "/proc/$p/wchan" 2>/dev/null))" >&2
			kill -9 "$p" 2>/dev/null
			hung=$((hung + 1))
		fi
	done
	[ "$hung" -eq 0 ]
}

# victims N [OF]: N distinct indexes out of 0..OF-1 (default 8).
victims() {
	seq 0 $((${2:-8} - 1)) | shuf -n "$1"
}

# chains: one line per session of the store, "SID ROWS OK", where OK is
# true when its rows form one unbroken chain of turns: a root row with 2
# messages, every other row's parent in the session with 2 messages fewer,
# no parent with two children.
chains() {
	agent-snap export | jq -rs '
		def whole: (map({key: .snapshotId, value: .}) | from_entries) as $by
			| all(.[]; (.state.messages | length) as $n
				| if .parentId then $by[.parentId] != null and
					($by[.parentId].state.messages | length) + 2 == $n
				  else $n == 2 end)
			and ([.[].parentId] | length == (unique | length));
		group_by(.sessionId)[] | "\(.[0].sessionId) \(length) \(whole)"'
}

@test "kill storm: 8 concurrent agent-run, 1-4 SIGKILLed, every survivor finishes" {
	# eight turns each, so that kills at 2-150 ms land inside the runs
	requires shuf jq
	local rounds=10 kills=0 r k v rc pids killers
	for r in $(seq "$rounds"); do
		export AGENTKIT_STORE="$BATS_TEST_TMPDIR/storm$r"
		pids=() killers=()
		for k in $(seq 8); do
			agent-run --model echo --session "k$k" -m 1 -m 2 -m 3 -m 4 -m 5 -m 6 -m 7 -m 8 \
				>"out$r-$k" 2>&1 </dev/null 3>&- &
			pids+=($!)
		done
		for v in $(victims $((RANDOM % 4 + 1))); do
			(sleep "0.$(printf '%03d' $((RANDOM % 149 + 2)))"; kill -9 "${pids[$v]}") 2>/dev/null 3>&- &
			killers+=($!)
		done
		wait "${killers[@]}" || true
		settle 60 "${pids[@]}"
		chains >chains
		for k in $(seq 8); do
			rc=0
			wait "${pids[$((k - 1))]}" || rc=$?
			if [ "$rc" = 137 ]; then
				# a killed run keeps what it committed, whole
				kills=$((kills + 1))
				! grep -q "^k$k .* false$" chains
			else
				[ "$rc" = 0 ] || { cat "out$r-$k" >&2; false; }
				grep -qx "k$k 8 true" chains
			fi
		done
	done
	echo "# $rounds rounds, $kills processes killed, no survivor hung" >&3
}

@test "kill storm: 12 writers, 2-6 killed together while others wait for the lock" {
	# The hang this guards against: LMDB's robust writer mutex loses its
	# wake-up when its holder and waiters die at once, and the survivors
	# sleep in mdb_txn_begin forever.  Tight read-modify-write loops keep
	# the lock contended, and the kills land together.  (On LMDB's mutex
	# alone, about one round in five left survivors hanging.)
	requires shuf jq
	run -0 --separate-stderr "$TOP/tests/helpers/kill-storm.sh" "$SW" "$BATS_TEST_TMPDIR" 8 12
	echo "# $output" >&3
}

@test "26 processes on one store: every turn committed, every chain intact" {
	requires xargs jq
	seq 26 | xargs -P 26 -I{} agent-run --model echo --session "c{}" -m one -m two -m three >/dev/null
	run -0 --separate-stderr chains
	assert_equal "$(sort <<<"$output")" "$(seq 26 | sed 's/.*/c& 3 true/' | sort)"
}

# hold_lock: an outside process holds the store's write lock; HOLDER is
# its pid.
hold_lock() {
	python3 -c '
import fcntl, sys, time
f = open(sys.argv[1], "r+")
fcntl.lockf(f, fcntl.LOCK_EX, 1, 0)
print("locked", flush=True)
time.sleep(120)' "$AGENTKIT_STORE/write.lock" >locked 3>&- &
	HOLDER=$!
	wait_for 60 grep -q locked locked
}

@test "a writer waits for a stuck one only as long as AGENTKIT_STORE_LOCK_TIMEOUT" {
	requires python3
	agent-snap import <"$FIXTURES/store/rows.ndjson" >/dev/null
	hold_lock
	export AGENTKIT_STORE_LOCK_TIMEOUT=300ms
	run -111 --separate-stderr agent-snap import <<<'{"snapshotId":"n1","sessionId":"s"}'
	assert_equal "$stderr" "agent-snap: import snapshots: timed out waiting for the store's write lock after 300ms (held by pid $HOLDER)"
	AGENTKIT_STORE_LOCK_TIMEOUT=1s run -111 --separate-stderr agent-snap rm s-a
	assert_equal "$stderr" "agent-snap: delete session: timed out waiting for the store's write lock after 1s (held by pid $HOLDER)"
	# readers never wait for the write lock
	run -0 --separate-stderr agent-snap -m done-1
	run -0 --separate-stderr agent-wait done-1
	kill "$HOLDER"
	wait "$HOLDER" 2>/dev/null || true
	run -0 --separate-stderr agent-snap import <<<'{"snapshotId":"n1","sessionId":"s"}'
	run -0 --separate-stderr agent-snap -m n1
	AGENTKIT_STORE_LOCK_TIMEOUT=soon run -100 --separate-stderr agent-snap -m n1
	assert_equal "${stderr%%$'\n'*}" "agent-snap: AGENTKIT_STORE_LOCK_TIMEOUT: invalid duration 'soon' (use e.g. 250ms, 30s, 5m, 1h)"
}

@test "a store directory others can write to is refused, and left as it is" {
	mkdir -m 777 shared
	run -111 --separate-stderr agent-snap --store shared import <<<'{"snapshotId":"x","sessionId":"s"}'
	assert_equal "$stderr" "agent-snap: refusing store directory 'shared': it is writable by group and others (mode 0777); fix it with: chmod 700 'shared'"
	[ -z "$(ls -A shared)" ]
	[ "$(stat -c %a shared)" = 777 ]
	chmod 770 shared
	run -111 --separate-stderr agent-run --store shared --model echo -m hi
	assert_equal "$(tail -1 <<<"$stderr")" "agent-run: refusing store directory 'shared': it is writable by its group (mode 0770); fix it with: chmod 700 'shared'"
	chmod 702 shared
	run -111 --separate-stderr agent-snap --store shared import </dev/null
	assert_equal "$stderr" "agent-snap: refusing store directory 'shared': it is writable by others (mode 0702); fix it with: chmod 700 'shared'"
	[ -z "$(ls -A shared)" ]
	chmod 700 shared
	run -0 --separate-stderr agent-snap --store shared import <<<'{"snapshotId":"x","sessionId":"s"}'
}

@test "planted symlinks in a store are refused, their targets untouched" {
	for f in data.mdb lock.mdb wake write.lock; do
		mkdir -m 700 "st-$f"
		echo precious >"target-$f"
		ln -s "../target-$f" "st-$f/$f"
		run -111 --separate-stderr agent-snap --store "st-$f" import <<<'{"snapshotId":"x","sessionId":"s"}'
		assert_equal "$stderr" "agent-snap: refusing store 'st-$f': $f is a symlink (remove it: the store never follows links)"
		assert_equal "$(cat "target-$f")" precious
	done
	mkdir -m 700 st-fifo
	mkfifo st-fifo/lock.mdb
	run -111 --separate-stderr agent-snap --store st-fifo import </dev/null
	assert_equal "$stderr" "agent-snap: refusing store 'st-fifo': lock.mdb is not a regular file"
	mkdir -m 700 st-logs
	ln -s /tmp st-logs/logs
	run -111 --separate-stderr agent-snap --store st-logs import </dev/null
	assert_equal "$stderr" "agent-snap: refusing store 'st-logs': logs is a symlink (remove it: the store never follows links)"
}

@test "a store directory that belongs to another user is refused" {
	[ "$(id -u)" = 0 ] || skip "needs root to give a directory away"
	mkdir -m 700 theirs
	chown 65534 theirs
	run -111 --separate-stderr agent-snap --store theirs import </dev/null
	assert_equal "$stderr" "agent-snap: refusing store directory 'theirs': it belongs to uid 65534, not to you (uid 0); use a directory of your own"
	[ -z "$(ls -A theirs)" ]
	chown 0 theirs
	agent-snap --store theirs import </dev/null >/dev/null
	chown 65534 theirs/data.mdb
	run -111 --separate-stderr agent-snap --store theirs sessions
	assert_equal "$stderr" "agent-snap: refusing store 'theirs': data.mdb belongs to uid 65534, not to you (uid 0)"
}

# mount_tmpfs SIZE [WHY]: a store on a tmpfs of its own (MNT, unmounted by
# teardown), or skip the test where that cannot be (not root: WHY).
mount_tmpfs() {
	[ "$(id -u)" = 0 ] || skip "needs root to mount a tmpfs ${2:-}"
	MNT="$BATS_TEST_TMPDIR/mnt"
	mkdir "$MNT"
	mount -t tmpfs -o "size=$1,mode=0700" tmpfs "$MNT" 2>/dev/null ||
		{ MNT=""; skip "cannot mount a tmpfs here"; }
	export AGENTKIT_STORE="$MNT/store"
}

# The checks a read-only store must pass: every read works, every write
# fails with 111 and changes nothing; the import's message is $1.
check_readonly() {
	run -0 --separate-stderr agent-snap done-1
	assert_output "$(head -1 "$FIXTURES/store/rows.ndjson")"
	run -0 --separate-stderr agent-snap --session s-a -m
	assert_equal "$(jq -r .snapshotId <<<"$output")" empty-status
	run -0 --separate-stderr agent-snap sessions
	run -0 --separate-stderr agent-snap log s-a
	run -0 --separate-stderr agent-snap export
	assert_equal "$(wc -l <<<"$output")" "$(wc -l <"$FIXTURES/store/rows.ndjson")"
	run -0 --separate-stderr agent-wait done-1
	run -1 --separate-stderr agent-wait failed-1
	run -4 --separate-stderr agent-snap nope
	run -111 --separate-stderr agent-snap rm s-a
	run -111 --separate-stderr agent-abort stale-pending
	run -111 --separate-stderr agent-snap import <<<'{"snapshotId":"x","sessionId":"s"}'
	assert_equal "$stderr" "$1"
	run -0 --separate-stderr agent-snap export
	assert_equal "$(wc -l <<<"$output")" "$(wc -l <"$FIXTURES/store/rows.ndjson")"
}

@test "a store on a read-only filesystem can be read" {
	mount_tmpfs 8m "(the chmod test covers users)"
	agent-snap import <"$FIXTURES/store/rows.ndjson" >/dev/null
	mount -o remount,ro "$MNT" || skip "cannot remount the tmpfs read-only"
	check_readonly "agent-snap: cannot open store '$AGENTKIT_STORE': Read-only file system"
}

@test "a store whose files are not writable can be read" {
	if [ "$(id -u)" = 0 ]; then
		# chmod does not stop root: read as another user a store root
		# owns, in a directory that user can reach
		requires setpriv
		RODIR=$(mktemp -d /tmp/agentkit-ro.XXXXXX)
		chmod 755 "$RODIR"
		export AGENTKIT_STORE="$RODIR/store"
		agent-snap import <"$FIXTURES/store/rows.ndjson" >/dev/null
		chmod 755 "$AGENTKIT_STORE"
		chmod 644 "$AGENTKIT_STORE"/*
		setpriv --reuid=65534 --regid=65534 --clear-groups test -r "$AGENTKIT_STORE/data.mdb" ||
			skip "user 65534 cannot read the store"
		as() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
		run -0 --separate-stderr as agent-snap done-1
		assert_output "$(head -1 "$FIXTURES/store/rows.ndjson")"
		run -0 --separate-stderr as agent-snap export
		assert_equal "$(wc -l <<<"$output")" "$(wc -l <"$FIXTURES/store/rows.ndjson")"
		run -0 --separate-stderr as agent-wait done-1
		run -111 --separate-stderr as agent-snap rm s-a
		run -0 --separate-stderr agent-snap log s-a
		return
	fi
	agent-snap import <"$FIXTURES/store/rows.ndjson" >/dev/null
	chmod a-w "$AGENTKIT_STORE" "$AGENTKIT_STORE"/*
	check_readonly "agent-snap: cannot open store '$AGENTKIT_STORE': Permission denied"
}

@test "a write that fills the disk names the full disk, not an I/O error" {
	mount_tmpfs 1m
	local i
	for i in $(seq 30); do
		# 20 KB turns that share nothing: the disk fills after about 20
		agent-run --model echo --session "f$i" -m "$(head -c 15000 /dev/urandom | base64 -w0)" \
			>/dev/null 2>>err </dev/null || true
	done
	run -1 grep -c "Input/output error" err
	run -0 grep -c "save snapshot: the store is full (No space left on device)" err
}

@test "import holds one row at a time, not its whole input" {
	requires python3 /usr/bin/time
	if ldd "$(command -v agent-snap)" 2>/dev/null | grep -q libasan; then
		skip "AddressSanitizer's memory is not the program's"
	fi
	# 40 MB of 30-turn sessions, each row carrying its whole history
	python3 -c '
import json
for s in range(160):
    msgs = []
    for t in range(30):
        msgs += [{"role": r, "content": [{"text": ("%s %d %d " % (r, s, t)) * 20}]} for r in ("user", "model")]
        print(json.dumps({"snapshotId": "h%d-%d" % (s, t), "sessionId": "hs%d" % s,
                          "state": {"messages": msgs}}, separators=(",", ":")))' >hist.ndjson
	local size rss
	size=$(stat -c %s hist.ndjson)
	[ "$size" -gt 35000000 ]
	# from a pipe, the longer way: spooled to a file, then streamed
	cat hist.ndjson | /usr/bin/time -f %M -o rss agent-snap import >out
	assert_equal "$(cat out)" '{"imported":4800}'
	rss=$(($(cat rss) * 1024))
	echo "# import of $size bytes: peak RSS $rss bytes" >&3
	[ "$rss" -lt $((size / 2)) ]
	run -0 --separate-stderr agent-snap h159-29
	assert_equal "$(jq -c '.state.messages | length' <<<"$output")" 60
}

@test "no binary links libpq: a PostgreSQL store loads it on open, and says so when it cannot" {
	for b in agent-run agent-snap agent-wait agent-abort jpatch-diff jpatch-apply; do
		run -0 ldd "$AGENTKIT_BIN/$b"
		[[ "$output" != *libpq* ]] || fail "$b links libpq: $output"
	done
	fake="$BATS_TEST_TMPDIR/lib"
	mkdir -p "$fake"
	: >"$fake/libpq.so.5"
	run -111 --separate-stderr env LD_LIBRARY_PATH="$fake" \
		agent-snap --store 'postgresql://u:hunter2@localhost/x' sessions
	assert_equal "$stderr" "agent-snap: cannot open the store at 'postgresql://***@localhost/x': cannot load libpq.so.5 (PostgreSQL's client library, Debian's libpq5): $fake/libpq.so.5: file too short"
	# the embedded store never needs it
	run -0 --separate-stderr env LD_LIBRARY_PATH="$fake" agent-run -m hi --model echo
	[ "$(printf '%s\n' "$output" | tail -1 | jq -r .output.message.content[0].text)" = hi ]
}
