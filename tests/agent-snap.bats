#!/usr/bin/env bats
# agent-snap: shaped reads, sessions, log, rm, prune, export/import, bad input.

load test_helper

setup() {
	common_setup
	SW="$AGENTKIT_BIN/../tests/helpers/store-worker"
	agent-snap import <"$FIXTURES/store/rows.ndjson" >/dev/null
}

@test "prints a row by ID, and several in argument order" {
	run -0 --separate-stderr agent-snap done-1
	assert_output "$(head -1 "$FIXTURES/store/rows.ndjson")"
	run -0 --separate-stderr agent-snap --metadata-only failed-1 done-1
	assert_equal "$(jq -r .snapshotId <<<"$output" | tr '\n' ' ')" "failed-1 done-1 "
	refute_output --partial '"state"'
}

@test "read shaping: empty status, zero updatedAt, expiry of stale pending and aborting rows" {
	run -0 --separate-stderr agent-snap -m empty-status
	assert_output '{"snapshotId":"empty-status","sessionId":"s-a","createdAt":"2026-01-01T00:01:00Z","updatedAt":"2026-01-01T00:01:00Z","parentId":"done-1","status":"completed"}'
	run -0 --separate-stderr agent-snap -m stale-pending stale-aborting no-beat aborted-1
	assert_equal "$(jq -r .status <<<"$output" | tr '\n' ' ')" "expired expired pending aborted "
	# stored rows are never rewritten by a read
	run -0 --separate-stderr agent-snap export s-d
	assert_equal "$(jq -r .status <<<"$output" | tr '\n' ' ')" "pending aborting pending "
}

@test "expiry uses AGENTKIT_HEARTBEAT_TIMEOUT (strictly older)" {
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	echo "{\"snapshotId\":\"live\",\"sessionId\":\"x\",\"status\":\"pending\",\"createdAt\":\"$now\",\"heartbeatAt\":\"$now\"}" | agent-snap import >/dev/null
	run -0 --separate-stderr agent-snap -m live
	assert_equal "$(jq -r .status <<<"$output")" pending
	sleep 1.2
	AGENTKIT_HEARTBEAT_TIMEOUT=200ms run -0 --separate-stderr agent-snap -m live
	assert_equal "$(jq -r .status <<<"$output")" expired
	run -0 --separate-stderr agent-snap -m --heartbeat-timeout 1h live
	assert_equal "$(jq -r .status <<<"$output")" pending
	AGENTKIT_HEARTBEAT_TIMEOUT=soon run -100 --separate-stderr agent-snap live
	assert_output ""
}

@test "unknown IDs: exit 4 with a message, the others still printed" {
	run -4 --separate-stderr agent-snap -m nope done-1 gone
	assert_equal "$(jq -r .snapshotId <<<"$output")" done-1
	assert_equal "$stderr" $'agent-snap: snapshot \'nope\' not found\nagent-snap: snapshot \'gone\' not found'
}

@test "--session prints the latest row; unknown session is 4; IDs are checked against it" {
	run -0 --separate-stderr agent-snap --session s-b -m
	assert_equal "$(jq -r .snapshotId <<<"$output")" aborted-1
	run -4 --separate-stderr agent-snap --session nobody
	assert_equal "$stderr" "agent-snap: no snapshot found for session 'nobody'"
	run -101 --separate-stderr agent-snap --session s-b -m failed-1 done-1
	assert_equal "$(jq -r .snapshotId <<<"$output")" failed-1
	assert_equal "$stderr" "agent-snap: snapshot 'done-1' does not belong to session 's-b' (snapshot's session: 's-a')"
}

@test "get prints rows whose IDs are subcommand words" {
	echo '{"snapshotId":"log","sessionId":"w"}' | agent-snap import >/dev/null
	run -0 --separate-stderr agent-snap get log
	assert_output '{"snapshotId":"log","sessionId":"w","status":"completed"}'
}

@test "sessions lists every session, newest first, with its latest row and row count" {
	run -0 --separate-stderr agent-snap sessions
	assert_line --index 0 '{"sessionId":"s-c","snapshotId":"interrupted-1","status":"completed","updatedAt":"2026-01-03T00:01:00Z","snapshots":2,"finishReason":"interrupted"}'
	assert_line --index 2 '{"sessionId":"s-a","snapshotId":"empty-status","status":"completed","updatedAt":"2026-01-01T00:01:00Z","snapshots":2}'
	assert_line --index 3 '{"sessionId":"s-d","snapshotId":"no-beat","status":"pending","updatedAt":"2020-01-01T00:00:02Z","snapshots":3}'
	assert_equal "${#lines[@]}" 4
	# The table names a paused session's status so a person sees what to answer.
	run -0 --separate-stderr agent-snap sessions --format text
	assert_line --index 1 --regexp '^s-c +2026-01-03 00:01:00  interrupted     2 +-  - +$'
	assert_line --index 3 --regexp '^s-a +2026-01-01 00:01:00  completed       2 +-  - +$'
}

# listing_rows: sessions whose latest rows tie, fall back to createdAt
# (zero updatedAt) or have no time at all, for the listing's order.
listing_rows() {
	cat <<-'EOF'
	{"snapshotId":"t-a1","sessionId":"t-a","createdAt":"2026-06-01T00:00:01Z","updatedAt":"2026-06-01T00:00:09Z"}
	{"snapshotId":"t-a2","sessionId":"t-a","createdAt":"2026-06-01T00:00:02Z","updatedAt":"2026-06-01T00:00:03Z"}
	{"snapshotId":"t-b1","sessionId":"t-b","createdAt":"2026-06-01T00:00:01Z","updatedAt":"2026-06-01T00:00:04.5Z"}
	{"snapshotId":"t-c1","sessionId":"t-c","createdAt":"2026-06-01T00:00:01Z","updatedAt":"2026-06-01T02:00:03+02:00"}
	{"snapshotId":"t-d1","sessionId":"t-d","createdAt":"2026-06-01T00:00:07Z","updatedAt":"0001-01-01T00:00:00Z"}
	{"snapshotId":"t-e1","sessionId":"t-e","createdAt":"2026-06-01T00:00:01Z","updatedAt":"not a time"}
	{"snapshotId":"t-e2","sessionId":"t-e","createdAt":"2026-06-01T00:00:01Z","updatedAt":"2026-06-01T00:00:04.500000001Z"}
	EOF
}

@test "sessions: newest first by the latest row's updatedAt, ties by session ID; --limit N prints the first N" {
	listing_rows | agent-snap import >/dev/null
	run -0 --separate-stderr agent-snap sessions --format ndjson
	assert_equal "$stderr" ""
	# t-e's latest row is t-e2 (the greater ID of two created together);
	# t-a's is t-a2, whose time is its session's; t-c ties t-a at 00:00:03Z
	# and comes after it; t-d's zero time reads as its createdAt
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .updatedAt, .snapshots]' <<<"$output")" '["t-d","t-d1","2026-06-01T00:00:07Z",1]
["t-e","t-e2","2026-06-01T00:00:04.500000001Z",2]
["t-b","t-b1","2026-06-01T00:00:04.5Z",1]
["t-a","t-a2","2026-06-01T00:00:03Z",2]
["t-c","t-c1","2026-06-01T02:00:03+02:00",1]
["s-c","interrupted-1","2026-01-03T00:01:00Z",2]
["s-b","aborted-1","2026-01-02T00:01:00Z",2]
["s-a","empty-status","2026-01-01T00:01:00Z",2]
["s-d","no-beat","2020-01-01T00:00:02Z",3]'
	run -0 --separate-stderr agent-snap sessions --limit 3
	assert_output '{"sessionId":"t-d","snapshotId":"t-d1","status":"completed","updatedAt":"2026-06-01T00:00:07Z","snapshots":1}
{"sessionId":"t-e","snapshotId":"t-e2","status":"completed","updatedAt":"2026-06-01T00:00:04.500000001Z","snapshots":2}
{"sessionId":"t-b","snapshotId":"t-b1","status":"completed","updatedAt":"2026-06-01T00:00:04.5Z","snapshots":1}'
	run -0 --separate-stderr agent-snap sessions --limit 1 --format json
	assert_output '[{"sessionId":"t-d","snapshotId":"t-d1","status":"completed","updatedAt":"2026-06-01T00:00:07Z","snapshots":1}]'
	run -0 --separate-stderr agent-snap sessions --limit 2 --since 2026-03-01T00:00:00Z --format text
	assert_output 'SESSION                               UPDATED (UTC)        STATUS       ROWS   TOKENS  AGENT         TITLE
t-d                                   2026-06-01 00:00:07  completed       1        -  -             
t-e                                   2026-06-01 00:00:04  completed       2        -  -             '
	# --since ends the walk at the first older session
	run -0 --separate-stderr agent-snap sessions --since 2026-06-01T00:00:04.5Z
	assert_equal "$(jq -r .sessionId <<<"$output" | tr '\n' ' ')" "t-d t-e t-b "
	run -0 --separate-stderr agent-snap sessions --limit 100
	assert_equal "${#lines[@]}" 9
	for bad in 0 -1 x ''; do
		run -100 --separate-stderr agent-snap sessions --limit "$bad"
		assert_equal "$(head -1 <<<"$stderr")" "agent-snap: --limit must be a number from 1 to 9223372036854775807, got '$bad'"
	done
	run -100 --separate-stderr agent-snap log s-a --limit 1
	assert_equal "$(head -1 <<<"$stderr")" 'agent-snap: --limit applies to sessions and runs'
}

@test "sessions: every write and deletion keeps the order" {
	listing_rows | agent-snap import >/dev/null
	# a new turn moves its session first (the store's clock is now)
	"$SW" turn s-d n1 no-beat hello >/dev/null
	run -0 --separate-stderr agent-snap sessions --limit 2
	assert_equal "$(jq -c '[.sessionId, .snapshotId, .snapshots]' <<<"$output" | tr '\n' ' ')" '["s-d","n1",4] ["t-d","t-d1",1] '
	# a new session too
	"$SW" turn s-new n2 "" hi >/dev/null
	assert_equal "$(agent-snap sessions --limit 3 | jq -r .sessionId | tr '\n' ' ')" "s-new s-d t-d "
	# deleting a session's latest row gives it its previous one's time
	run -0 --separate-stderr agent-snap rm t-e
	printf '%s\n' '{"snapshotId":"t-e1","sessionId":"t-e","createdAt":"2026-06-01T00:00:01Z","updatedAt":"2026-06-01T00:00:04Z"}' | agent-snap import >/dev/null
	assert_equal "$(agent-snap sessions | jq -r .sessionId | tr '\n' ' ')" "s-new s-d t-d t-b t-e t-a t-c s-c s-b s-a "
	# a row that moves to another session moves both entries
	printf '%s\n' '{"snapshotId":"t-d1","sessionId":"t-b","createdAt":"2026-06-01T00:00:07Z","updatedAt":"2026-06-01T00:00:07Z"}' | agent-snap import >/dev/null
	assert_equal "$(agent-snap sessions | jq -c '[.sessionId, .snapshotId, .snapshots]' | head -4 | tr '\n' ' ')" '["s-new","n2",1] ["s-d","n1",4] ["t-b","t-d1",2] ["t-e","t-e1",1] '
	# rm and prune: gone sessions leave, kept ones stay where they were
	run -0 --separate-stderr agent-snap rm s-new t-b
	run -0 --separate-stderr agent-snap prune --keep 1
	assert_equal "$(agent-snap sessions | jq -c '[.sessionId, .snapshots]' | tr '\n' ' ')" '["s-d",4] ["t-e",1] ["t-a",1] ["t-c",1] ["s-c",1] ["s-b",1] ["s-a",1] '
}

@test "sessions: rows written while a listing runs leave it whole, in order, each session once" {
	# past one batch of reads (256 sessions), none of them touched below
	for i in $(seq -w 1 600); do
		printf '{"snapshotId":"q-%s","sessionId":"q-%s","createdAt":"2025-01-01T00:00:00Z","updatedAt":"2025-01-01T00:%02d:%02dZ"}\n' "$i" "$i" $((10#$i / 60)) $((10#$i % 60))
	done | agent-snap import >/dev/null
	expected=$(agent-snap sessions | jq -r 'select(.sessionId | startswith("q-")) | .sessionId')
	assert_equal "$(wc -l <<<"$expected")" 600
	# writers: new sessions, and turns that move existing sessions first
	( i=0; while :; do "$SW" turn w-$i w-$i "" x >/dev/null || exit 1; i=$((i + 1)); done ) &
	w1=$!
	( "$SW" hammer hot ) &
	w2=$!
	for _ in 1 2 3 4 5 6; do
		agent-snap sessions >listing.ndjson
		# whole lines, each session once, times never increasing
		run -0 jq -se 'map(.sessionId) | length == (unique | length)' listing.ndjson
		run -0 jq -se 'map(.updatedAt | sub("Z$"; "") | split(".") | .[0] + "." + ((.[1] // "") + "000000000")[0:9]) | . == (sort | reverse)' listing.ndjson
		assert_equal "$(jq -r 'select(.sessionId | startswith("q-")) | .sessionId' listing.ndjson)" "$expected"
	done
	kill "$w1" "$w2"
	wait "$w1" "$w2" || true
	run -0 --separate-stderr agent-snap sessions --limit 1
	[[ "$(jq -r .sessionId <<<"$output")" == hot || "$(jq -r .sessionId <<<"$output")" == w-* ]]
}

@test "log lists a session's rows oldest first: createdAt, then snapshot ID" {
	printf '%s\n' '{"snapshotId":"l-2","sessionId":"l","createdAt":"2026-01-01T00:00:01Z"}' \
		'{"snapshotId":"l-1","sessionId":"l","createdAt":"2026-01-01T00:00:01Z"}' \
		'{"snapshotId":"l-0","sessionId":"l","createdAt":"2026-01-01T00:00:02Z"}' \
		'{"snapshotId":"l-3","sessionId":"l","createdAt":"2025-12-31T23:59:59Z"}' | agent-snap import >/dev/null
	run -0 --separate-stderr agent-snap log l
	assert_output '{"snapshotId":"l-3","sessionId":"l","createdAt":"2025-12-31T23:59:59Z","status":"completed","updatedAt":"2025-12-31T23:59:59Z"}
{"snapshotId":"l-1","sessionId":"l","createdAt":"2026-01-01T00:00:01Z","status":"completed","updatedAt":"2026-01-01T00:00:01Z"}
{"snapshotId":"l-2","sessionId":"l","createdAt":"2026-01-01T00:00:01Z","status":"completed","updatedAt":"2026-01-01T00:00:01Z"}
{"snapshotId":"l-0","sessionId":"l","createdAt":"2026-01-01T00:00:02Z","status":"completed","updatedAt":"2026-01-01T00:00:02Z"}'
}

@test "log lists a session oldest first with parents and marks forks" {
	"$SW" turn f r1 "" a >/dev/null
	"$SW" turn f r2 r1 b >/dev/null
	"$SW" turn f r3 r1 c >/dev/null
	"$SW" turn f r4 r3 d >/dev/null
	run -0 --separate-stderr agent-snap log f
	assert_equal "$(jq -c '[.snapshotId, .parentId, .fork]' <<<"$output" | tr '\n' ' ')" '["r1","",null] ["r2","r1",null] ["r3","r1",true] ["r4","r3",null] '
	refute_output --partial '"state"'
	run -4 --separate-stderr agent-snap log nobody
	assert_equal "$stderr" "agent-snap: no snapshot found for session 'nobody'"
}

@test "rm deletes a session; unknown sessions are 4" {
	run -4 --separate-stderr agent-snap rm s-a nobody
	assert_output '{"sessionId":"s-a","deleted":2}'
	assert_equal "$stderr" "agent-snap: no snapshot found for session 'nobody'"
	run -4 agent-snap -m done-1
	run -0 --separate-stderr agent-snap --session s-b -m
}

@test "prune keeps the latest row and unsettled rows; --before and --keep combine" {
	for i in 1 2 3 4 5; do
		echo "{\"snapshotId\":\"p$i\",\"sessionId\":\"pr\",\"createdAt\":\"2026-01-0${i}T00:00:00Z\",\"status\":\"completed\"}"
	done | agent-snap import >/dev/null
	echo '{"snapshotId":"p0","sessionId":"pr","createdAt":"2025-01-01T00:00:00Z","status":"pending"}' | agent-snap import >/dev/null
	run -0 --separate-stderr agent-snap prune --keep 2 --before 2026-01-03T00:00:00Z pr
	assert_output '{"deleted":2}'
	run -0 --separate-stderr agent-snap log pr
	assert_equal "$(jq -r .snapshotId <<<"$output" | tr '\n' ' ')" "p0 p3 p4 p5 "
	run -0 --separate-stderr agent-snap prune --before 1h pr
	assert_output '{"deleted":2}'
	run -0 --separate-stderr agent-snap log pr
	assert_equal "$(jq -r .snapshotId <<<"$output" | tr '\n' ' ')" "p0 p5 "
	run -100 --separate-stderr agent-snap prune
	run -100 --separate-stderr agent-snap prune --keep 0
	run -100 --separate-stderr agent-snap --keep 2 done-1
}

@test "export then import into another store reproduces every row" {
	agent-snap export >all.ndjson
	assert_equal "$(wc -l <all.ndjson)" 9
	run -0 --separate-stderr agent-snap --store other import <all.ndjson
	assert_output '{"imported":9}'
	run -0 --separate-stderr agent-snap --store other export
	assert_equal "$output" "$(cat all.ndjson)"
	run -0 --separate-stderr agent-snap export s-c s-b
	assert_equal "$(jq -r .snapshotId <<<"$output" | tr '\n' ' ')" "length-1 interrupted-1 failed-1 aborted-1 "
}

@test "import replaces rows with the same ID" {
	echo '{"snapshotId":"done-1","sessionId":"s-z","status":"failed","createdAt":"2026-06-01T00:00:00Z"}' | agent-snap import >/dev/null
	run -0 --separate-stderr agent-snap done-1
	assert_output '{"snapshotId":"done-1","sessionId":"s-z","status":"failed","createdAt":"2026-06-01T00:00:00Z","updatedAt":"2026-06-01T00:00:00Z"}'
	run -0 --separate-stderr agent-snap -m --session s-a
	assert_equal "$(jq -r .snapshotId <<<"$output")" empty-status
	run -0 --separate-stderr agent-snap log s-z
	assert_equal "${#lines[@]}" 1
}

@test "import: a malformed line names its line and nothing is written" {
	run -101 --separate-stderr agent-snap import <"$FIXTURES/store/bad.ndjson"
	assert_equal "$stderr" "agent-snap: store requires sessionId to be set on the snapshot (at <stdin>:3)"
	run -4 agent-snap ok-1
	run -101 --separate-stderr agent-snap import <<<$'{"snapshotId":"a","sessionId":"s"}\n[1,2]'
	assert_equal "$stderr" "agent-snap: a snapshot must be a JSON object, not array (at <stdin>:2)"
	run -101 --separate-stderr agent-snap import <<<'{"snapshotId":"a","sessionId":"s"'
	assert_output ""
	run -101 --separate-stderr agent-snap import <<<'{"snapshotId":"a\u0001","sessionId":"s"}'
	assert_equal "$stderr" "agent-snap: invalid snapshot ID: contains a control character (at <stdin>:1)"
	run -4 agent-snap a
}

@test "invalid IDs on the command line are usage errors" {
	run -100 --separate-stderr agent-snap ""
	assert_equal "${lines[0]:-}" ""
	assert_equal "$(head -1 <<<"$stderr")" "agent-snap: invalid snapshot ID '': must not be empty"
	run -100 --separate-stderr agent-snap $'a\x01'
	run -100 --separate-stderr agent-snap --session "" 
	run -100 --separate-stderr agent-snap
	run -100 --separate-stderr agent-snap sessions extra
}

@test "a store path that is a file is a system error" {
	touch afile
	run -111 --separate-stderr agent-snap --store afile x
	assert_equal "$stderr" "agent-snap: cannot open store 'afile': not a directory"
	run -111 --separate-stderr agent-snap --store afile/sub import </dev/null
	assert_equal "$stderr" "agent-snap: cannot create store directory 'afile/sub': Not a directory"
	run -4 --separate-stderr agent-snap --store afile/sub x
	assert_equal "$stderr" "agent-snap: no store at afile/sub (set --store or AGENTKIT_STORE)"
}

@test "reading never creates a store: no store at PATH is not found (4)" {
	for args in "x" "--session s" "get x" "sessions" "log s" "export" "rm s" "prune --keep 1"; do
		# shellcheck disable=SC2086
		run -4 --separate-stderr agent-snap --store typo $args
		assert_output ""
		assert_equal "$stderr" "agent-snap: no store at typo (set --store or AGENTKIT_STORE)"
	done
	[ ! -e typo ]
	AGENTKIT_STORE=$PWD/typo run -4 --separate-stderr agent-snap sessions
	assert_equal "$stderr" "agent-snap: no store at $PWD/typo (set --store or AGENTKIT_STORE)"
	[ ! -e typo ]
	# a directory without a store is no store either, and stays empty
	mkdir -m 700 empty
	run -4 --separate-stderr agent-snap --store empty sessions
	assert_equal "$stderr" "agent-snap: no store at empty (set --store or AGENTKIT_STORE)"
	[ -z "$(ls -A empty)" ]
	# the default location too (a fresh $HOME)
	unset AGENTKIT_STORE XDG_STATE_HOME
	HOME=$PWD/home run -4 --separate-stderr agent-snap sessions
	assert_equal "$stderr" "agent-snap: no store at $PWD/home/.local/state/agentkit/store (set --store or AGENTKIT_STORE)"
	[ ! -e home ]
	# import creates one
	run -0 --separate-stderr agent-snap --store empty import </dev/null
	assert_output '{"imported":0}'
	run -0 --separate-stderr agent-snap --store empty sessions
	assert_output ""
}

@test "import FILE: rows from a file; a missing FILE is not found and creates nothing" {
	run -4 --separate-stderr agent-snap --store fresh import missing.ndjson
	assert_equal "$stderr" "agent-snap: import: cannot open 'missing.ndjson': No such file or directory"
	[ ! -e fresh ]
	run -0 --separate-stderr agent-snap --store fresh import "$FIXTURES/store/rows.ndjson"
	assert_output "{\"imported\":$(wc -l <"$FIXTURES/store/rows.ndjson")}"
	run -0 --separate-stderr agent-snap --store fresh -m done-1
	run -0 --separate-stderr agent-snap --store fresh import - <<<'{"snapshotId":"d","sessionId":"s"}'
	assert_output '{"imported":1}'
	run -100 --separate-stderr agent-snap --store fresh import a b
	assert_equal "${stderr%%$'\n'*}" "agent-snap: import takes at most one FILE"
}

@test "store location: --store, then AGENTKIT_STORE, then XDG_STATE_HOME, then HOME" {
	unset AGENTKIT_STORE
	echo '{"snapshotId":"x","sessionId":"s"}' | agent-snap import >/dev/null
	[ -f "$XDG_STATE_HOME/agentkit/store/data.mdb" ]
	unset XDG_STATE_HOME
	HOME=$PWD/home agent-snap import <<<'{"snapshotId":"y","sessionId":"s"}' >/dev/null
	[ -f home/.local/state/agentkit/store/data.mdb ]
	AGENTKIT_STORE=$PWD/envstore agent-snap import <<<'{"snapshotId":"z","sessionId":"s"}' >/dev/null
	AGENTKIT_STORE=$PWD/envstore run -0 agent-snap --store flag import </dev/null
	[ -f envstore/data.mdb ] && [ -f flag/data.mdb ]
}

@test "the store is private: directory 0700, files 0600, whatever the umask" {
	umask 000
	agent-snap --store priv/deeper/store import <<<'{"snapshotId":"x","sessionId":"s"}' >/dev/null
	run stat -c '%a %n' priv priv/deeper priv/deeper/store priv/deeper/store/data.mdb priv/deeper/store/lock.mdb priv/deeper/store/wake priv/deeper/store/write.lock
	assert_output $'700 priv\n700 priv/deeper\n700 priv/deeper/store\n600 priv/deeper/store/data.mdb\n600 priv/deeper/store/lock.mdb\n600 priv/deeper/store/wake\n600 priv/deeper/store/write.lock'
}

@test "output errors: /dev/full fails, a closed pipe is quiet" {
	run -111 --separate-stderr bash -c 'agent-snap done-1 >/dev/full'
	assert_output ""
	run -0 bash -c 'agent-snap export | head -c 1 >/dev/null'
}

@test "each subcommand's operands and options are checked before the store is opened" {
	check() {
		local want=$1
		shift
		run -100 --separate-stderr agent-snap --store nowhere "$@"
		assert_equal "$stderr" "agent-snap: $want
try 'agent-snap --help'"
	}
	check "get needs snapshot IDs" get
	check "log takes one SID" log a b
	check "show takes one SID" show
	check "worker-log takes one snapshot ID" worker-log
	check "rm needs session IDs" rm
	check "sessions takes no operands" sessions x
	check "import takes at most one FILE" import a b
	check "prune takes at most one SID" prune --keep 1 a b
	check "--keep applies to prune" --keep 2 done-1
	check "--before applies to prune" export --before 1h
	check "--since applies to sessions" get a --since 1h
	check "--session applies to get" --session s log x
	check "unknown subcommand 'exprot' (did you mean 'export'?); to read a snapshot of that ID use 'agent-snap get exprot'" exprot
	[ ! -e nowhere ]
}

@test "every subcommand the completions offer has a synopsis line and a Subcommands entry" {
	words=$(agent-snap --completion zsh | sed -n "s/^  '1:command:(\(.*\))' \\\\$/\1/p")
	assert_equal "$words" "get sessions show log rm prune export import runs worker-log migrate"
	help=$(agent-snap --help)
	subs=$(sed -n '/^Subcommands:$/,/^Options:$/p' <<<"$help")
	man=$(agent-snap --man | sed -n '/^\.SH SUBCOMMANDS$/,/^\.SH OPTIONS$/p')
	for w in $words; do
		grep -q "^       agent-snap \[OPTION\]\.\.\. $w\( \|$\)" <<<"$help" || fail "no synopsis for $w"
		grep -q "^  $w\( \|$\)" <<<"$subs" || fail "no Subcommands entry for $w"
		grep -qF "\\fB${w//-/\\-}\\fR" <<<"$man" || fail "no SUBCOMMANDS entry for $w in the man page"
	done
}

@test "a URL no backend takes is a usage error, its password redacted" {
	run -100 --separate-stderr agent-snap --store 'redis://me:sekrit@cache.example/0' sessions
	assert_equal "$stderr" "agent-snap: 'redis://***@cache.example/0' is not a store directory: this agentkit has the LMDB and PostgreSQL backends"$'\n'"try 'agent-snap --help'"
}

@test "migrate on an LMDB store: nothing to do, its records carry their version; no store is 4" {
	lm="$BATS_TEST_TMPDIR/lm"
	run -4 --separate-stderr agent-snap --store "$lm" migrate
	assert_equal "$stderr" "agent-snap: no store at $lm (set --store or AGENTKIT_STORE)"
	[ ! -e "$lm" ]
	agent-snap --store "$lm" import <"$FIXTURES/store/rows.ndjson" >/dev/null
	run -0 --separate-stderr agent-snap --store "$lm" migrate
	assert_output '{"backend":"LMDB","version":1,"latest":1,"applied":[]}'
	run -0 --separate-stderr agent-snap --store "$lm" migrate --dry-run
	assert_output '{"backend":"LMDB","version":1,"latest":1,"pending":[]}'
	run -0 --separate-stderr agent-snap --store "$lm" migrate -n --format text
	assert_output "LMDB store at version 1, this agentkit's: nothing to migrate"
	run -100 --separate-stderr agent-snap --store "$lm" migrate extra
	run -100 --separate-stderr agent-snap --store "$lm" --dry-run sessions
	assert_equal "$stderr" "agent-snap: --dry-run applies to migrate"$'\n'"try 'agent-snap --help'"
}
