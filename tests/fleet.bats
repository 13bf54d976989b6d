#!/usr/bin/env bats
# A fleet's faults on the PostgreSQL store: hosts are network namespaces,
# each joined to the server's by a veth pair on a private /30, reaching a
# server of the test's own over TCP with scram-sha-256, and a host's
# network is cut by taking its link down: its packets vanish, with no
# reset and no error, as on a real partition.  Needs root with iproute2
# (otherwise every test skips, saying so).  scripts/runtests runs this
# file in its PostgreSQL pass only.

load test_helper

setup() {
	[ "$(id -u)" -eq 0 ] || skip "needs root to make network namespaces"
	command -v ip >/dev/null || skip "needs iproute2 (ip) to make network namespaces"
	"$TOP/scripts/pg-test-server" have || skip "needs the PostgreSQL server binaries"
	# the store is the own server below, not the pass's
	AGENTKIT_TEST_BACKEND=lmdb common_setup
	SW="$AGENTKIT_BIN/../tests/helpers/store-worker"
	NS="ak$$t$BATS_TEST_NUMBER"
	# a /30 of 10.0.0.0/8 of this test's own: two runs at once differ
	local a=$(((($$ / 64) % 200) + 20)) b=$(((($$ % 64) * 4)))
	NET="10.$a.$b"
	ip netns add "$NS" || skip "cannot make a network namespace here"
	ip link add "${NS}r" type veth peer name "${NS}n"
	ip link set "${NS}n" netns "$NS"
	ip addr add "$NET.1/30" dev "${NS}r"
	ip link set "${NS}r" up
	ip netns exec "$NS" ip addr add "$NET.2/30" dev "${NS}n"
	ip netns exec "$NS" ip link set "${NS}n" up
	ip netns exec "$NS" ip link set lo up
	SERVER="$BATS_TEST_TMPDIR/server"
	AGENTKIT_STORE=$("$TOP/scripts/pg-test-server" start "$SERVER" --tcp "$NET.1")
	export AGENTKIT_STORE
	# what a message shows of the URL: who logs in hidden
	local port=${AGENTKIT_STORE##*:}
	SHOWN="postgresql://***@$NET.1:${port%%/*}/agentkit"
}

teardown() {
	ip netns del "$NS" 2>/dev/null || true
	ip link del "${NS}r" 2>/dev/null || true
	for h in 2 3; do
		ip netns del "$NS-$h" 2>/dev/null || true
	done
	[ ! -d "${SERVER:-/nonexistent}" ] || "$TOP/scripts/pg-test-server" stop "$SERVER"
}

# away CMD...: CMD on the other host (the namespace), its HOME its own.
away() {
	mkdir -p "$BATS_TEST_TMPDIR/away"
	ip netns exec "$NS" env HOME="$BATS_TEST_TMPDIR/away" XDG_STATE_HOME="$BATS_TEST_TMPDIR/away/state" "$@"
}

# host N: one more host, namespace $NS-N on the N-th /30 of $NET.0/24
# (the first host's is the first), which reaches the server's address
# through its veth pair: the server takes it as a directly connected
# subnet.
host() {
	local n=$1 ns="$NS-$1" base=$((4 * ($1 - 1)))
	ip netns add "$ns"
	ip link add "${NS}r$n" type veth peer name "${NS}n$n"
	ip link set "${NS}n$n" netns "$ns"
	ip addr add "$NET.$((base + 1))/30" dev "${NS}r$n"
	ip link set "${NS}r$n" up
	ip netns exec "$ns" ip addr add "$NET.$((base + 2))/30" dev "${NS}n$n"
	ip netns exec "$ns" ip link set "${NS}n$n" up
	ip netns exec "$ns" ip link set lo up
	ip netns exec "$ns" ip route add default via "$NET.$((base + 1))"
}

# on_host N CMD...: CMD on host N (1: the first, $NS), its HOME its own.
on_host() {
	local ns=$NS h="$BATS_TEST_TMPDIR/host-$1"
	[ "$1" = 1 ] || ns="$NS-$1"
	shift
	mkdir -p "$h"
	ip netns exec "$ns" env HOME="$h" XDG_STATE_HOME="$h/state" "$@"
}

# cut: the other host's network goes silent.
cut() { ip netns exec "$NS" ip link set "${NS}n" down; }

@test "the other host reaches the store over TCP with scram-sha-256" {
	run -0 --separate-stderr away "$SW" save r1 '{"sessionId":"s","status":"completed"}'
	run -0 --separate-stderr agent-snap sessions --format ndjson
	assert_equal "$(jq -r .sessionId <<<"$output")" s
}

@test "agent-wait --timeout ends on time when the network goes silent mid-wait" {
	"$SW" save r1 '{"sessionId":"s","status":"pending"}' >/dev/null
	away agent-wait --timeout 3s --poll 200ms r1 >out 2>err &
	pid=$!
	sleep 1
	cut
	start=$SECONDS
	rc=0
	wait "$pid" || rc=$?
	assert_equal "$rc" 124
	run cat err
	assert_output "agent-wait: timed out after 3000ms with 1 of 1 rows unsettled"
	# within the timeout and a second, not TCP's own quarter of an hour
	[ $((SECONDS - start)) -le 3 ]
}

@test "a write on a silent network fails within the lock and connect timeouts, saying so" {
	# one long-lived writer: a save, then the network goes, then a save
	mkfifo cmds
	AGENTKIT_STORE_LOCK_TIMEOUT=2s away "$SW" --store "$AGENTKIT_STORE?connect_timeout=2" history s <cmds >out 2>err &
	pid=$!
	exec 5>cmds
	echo '{"append":{"role":"user","content":[{"text":"one"}]}}' >&5
	echo '{"save":"r1"}' >&5
	for _ in $(seq 50); do [ -s out ] && break; sleep 0.1; done
	run -0 --separate-stderr agent-snap export
	assert_equal "$(jq -r .snapshotId <<<"$output")" r1
	cut
	start=$SECONDS
	echo '{"append":{"role":"model","content":[{"text":"two"}]}}' >&5
	echo '{"save":"r2"}' >&5
	exec 5>&-
	rc=0
	wait "$pid" || rc=$?
	assert_equal "$rc" 111
	run cat err
	assert_output "store-worker: save snapshot: the store at '${SHOWN}?connect_timeout=***' did not answer within 4s (the network may be cut); the connection is given up"
	[ $((SECONDS - start)) -le 6 ]
	# and nothing of the second save is in the store
	run -0 --separate-stderr agent-snap export
	assert_equal "$(jq -r .snapshotId <<<"$output")" r1
}

@test "a worker cut off from the store loses its lease: it stops its turn and commits nothing" {
	script '{"chunks":["one ","two ","three"],"delay":"2s"}'
	run -0 --separate-stderr away agent-run --model script/model.ndjson --detach \
		--heartbeat-interval 500ms --heartbeat-timeout 3s -m go
	id=$(jq -r .output.snapshotId <<<"$output")
	sleep 1
	cut
	# the others read it expired once its last beat is 3 s old
	run -3 --separate-stderr agent-wait --heartbeat-timeout 3s --timeout 10s "$id"
	assert_equal "$(jq -r .status <<<"$output")" expired
	# the network comes back, later than the turn would have ended: the
	# worker stopped at its lease's end and never finalizes the row
	ip netns exec "$NS" ip link set "${NS}n" up
	for _ in $(seq 100); do
		away agent-snap worker-log "$id" 2>/dev/null | grep -q "lease lost" && break
		sleep 0.1
	done
	run -0 --separate-stderr away agent-snap worker-log "$id"
	assert_line --partial "lease lost: no heartbeat committed for 3000ms ("
	assert_line --partial "so the row reads expired to others; the turn was stopped and nothing is committed"
	sleep 5
	run -3 --separate-stderr agent-wait --heartbeat-timeout 3s "$id"
	assert_equal "$(jq -r '[.status, .finishReason // "none"] | join(" ")' <<<"$output")" "expired none"
}

@test "three hosts, four writers each, on one session: every turn that exited 0 is in the conversation" {
	host 2
	host 3
	run -0 --separate-stderr on_host 1 agent-run --model echo --session S -m start
	pids=()
	for h in 1 2 3; do
		for w in 1 2 3 4; do
			on_host "$h" agent-run --model echo --session S -m "h$h-w$w" >/dev/null 2>>err &
			pids+=($!)
		done
	done
	for p in "${pids[@]}"; do wait "$p"; done
	run cat err
	assert_output ""
	run -0 --separate-stderr agent-snap show S --format ndjson
	assert_equal "$(jq -r 'select(.role == "user") | .content[0].text' <<<"$output" | sort -V | tr '\n' ' ')" \
		"h1-w1 h1-w2 h1-w3 h1-w4 h2-w1 h2-w2 h2-w3 h2-w4 h3-w1 h3-w2 h3-w3 h3-w4 start "
}

@test "a fleet's queue: three hosts launch ten keyed tasks at once, workers on two hosts run each once" {
	host 2
	host 3
	for h in 1 2 3; do
		for t in $(seq 10); do
			on_host "$h" agent-run --model echo --queue q --key "task-$t" -m "task $t" >>"launch.$h.$t" 2>>err &
		done
	done
	wait
	run cat err
	assert_output ""
	assert_equal "$(cat launch.* | jq -r .output.snapshotId | sort -u | wc -l)" 10
	assert_equal "$(agent-snap runs | wc -l)" 10
	# the store's password reaches each worker's children on their stdin
	on_host 2 agent-worker --queue q --once --concurrency 3 2>w2 &
	on_host 3 agent-worker --queue q --once --concurrency 3 2>w3 &
	wait
	assert_equal "$(agent-snap sessions | jq -r .status | sort | uniq -c | tr -s ' ')" " 10 completed"
	assert_equal "$(cat w2 w3 | grep -c ': claimed (queue q, agent inline, attempt 1)')" 10
	assert_equal "$(cat w2 w3 | sed -n 's/^agent-worker: \([^:]*\): claimed.*/\1/p' | sort -u | wc -l)" 10
	assert_equal "$(agent-snap runs | wc -l)" 0
}

@test "a worker whose host is cut off loses its run; a worker on another host takes it and finishes it" {
	host 2
	host 3
	printf '%s\n' '{"fallback": true, "chunks": ["a ", "b ", "c"], "delay": "1s"}' >slow.ndjson
	export AGENTKIT_HEARTBEAT_INTERVAL=300ms AGENTKIT_HEARTBEAT_TIMEOUT=3s
	run -0 agent-run --model script/slow.ndjson --queue q -m work
	id=$(id_of "$output")
	on_host 2 agent-worker --queue q 2>w2 &
	w2=$!
	for _ in $(seq 100); do
		[ "$(agent-snap runs | jq -r .status)" = running ] && break
		sleep 0.1
	done
	assert_equal "$(agent-snap runs | jq -r .worker.host)" "$(hostname)"
	# host 2 goes silent: its lease runs out, host 3's worker claims the run
	ip netns exec "$NS-2" ip link set "${NS}n2" down
	on_host 3 agent-worker --queue q --idle-exit 15s 2>w3 &
	w3=$!
	run -0 --separate-stderr timeout 60 agent-wait "$id"
	assert_equal "$(jq -c '[.status, (.state.messages | map(.content | map(.text) | join("")))]' <<<"$output")" \
		'["completed",["work","a b c"]]'
	grep -q "$id: claimed (queue q, agent inline, attempt 2)" w3
	# the workers: children of the subshells on_host ran in (the cut-off
	# host's own child has lost its lease and stops by itself)
	pkill -9 -P "$w2" || true
	pkill -9 -P "$w3" || true
}
