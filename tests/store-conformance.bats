#!/usr/bin/env bats
# The store conformance scenarios of runtime-semantics §6.4 (Genkit's
# localstore/store_test.go: the 17 shared ones, then the file store's
# extras that apply to LMDB), driven through tests/helpers/store-worker,
# which calls the store interface the way the runtime does.  Run on both
# backends: scripts/runtests runs it again with AGENTKIT_TEST_BACKEND=pg.

load test_helper

setup() {
	common_setup
	SW="$AGENTKIT_BIN/../tests/helpers/store-worker"
	[ -x "$SW" ] || skip "store-worker not built"
}

# save ID JSON: SaveSnapshot with an fn that returns JSON.
save() { "$SW" save "$@"; }

# --- session IDs and latest (1-9) ---

@test "1 SessionIDKeptWhenProvided" {
	run -0 --separate-stderr save s1 '{"sessionId":"sess","createdAt":"2026-01-01T00:00:00Z"}'
	assert_output '{"sessionId":"sess","createdAt":"2026-01-01T00:00:00Z","snapshotId":"s1","status":"completed"}'
	run -0 --separate-stderr "$SW" get s1
	assert_output '{"sessionId":"sess","createdAt":"2026-01-01T00:00:00Z","snapshotId":"s1","status":"completed"}'
}

@test "2 SessionIDPreservedOnUpdate" {
	save s1 '{"sessionId":"sess","createdAt":"2026-01-01T00:00:00Z"}' >/dev/null
	run -0 --separate-stderr save s1 '{"sessionId":"","createdAt":"2026-01-01T00:00:00Z"}'
	assert_output --partial '"sessionId":"sess"'
	run -0 --separate-stderr save s1 '{"sessionId":"other","createdAt":"2026-01-01T00:00:00Z"}'
	assert_output --partial '"sessionId":"sess"'
	run -0 --separate-stderr "$SW" get s1
	assert_output --partial '"sessionId":"sess"'
	run -4 --separate-stderr "$SW" latest other
	assert_output null
}

@test "3 RejectsRowWithoutSessionID, even with a parent that has one" {
	save parent '{"sessionId":"sess"}' >/dev/null
	run -101 --separate-stderr save child '{"parentId":"parent","status":"completed"}'
	assert_equal "$stderr" "store-worker: store requires sessionId to be set on the snapshot"
	run -4 --separate-stderr "$SW" get child
	assert_output null
}

@test "4 GetLatestSnapshotPicksMostRecent (IDs sort against time)" {
	save z '{"sessionId":"s","createdAt":"2026-01-01T00:00:01Z","state":{"custom":"z"}}' >/dev/null
	save m '{"sessionId":"s","createdAt":"2026-01-01T00:00:02Z","state":{"custom":"m"}}' >/dev/null
	save a '{"sessionId":"s","createdAt":"2026-01-01T00:00:03Z","state":{"custom":"a"}}' >/dev/null
	run -0 --separate-stderr "$SW" latest s
	assert_output '{"sessionId":"s","createdAt":"2026-01-01T00:00:03Z","state":{"custom":"a"},"snapshotId":"a","status":"completed"}'
}

@test "4b latest: equal createdAt ties by the greater snapshotId" {
	save b '{"sessionId":"s","createdAt":"2026-01-01T00:00:03Z"}' >/dev/null
	save c '{"sessionId":"s","createdAt":"2026-01-01T00:00:03Z"}' >/dev/null
	save a '{"sessionId":"s","createdAt":"2026-01-01T00:00:03Z"}' >/dev/null
	run -0 --separate-stderr "$SW" --metadata-only latest s
	assert_output --partial '"snapshotId":"c"'
	# nanoseconds and offsets order by instant, not by text
	save d '{"sessionId":"t","createdAt":"2026-01-01T01:00:00.5+01:00"}' >/dev/null
	save e '{"sessionId":"t","createdAt":"2026-01-01T00:00:00.25Z"}' >/dev/null
	run -0 --separate-stderr "$SW" --metadata-only latest t
	assert_output --partial '"snapshotId":"d"'
}

@test "4c latest: session IDs that prefix each other do not mix" {
	save x1 '{"sessionId":"ab","createdAt":"2026-01-01T00:00:01Z"}' >/dev/null
	save x2 '{"sessionId":"abc","createdAt":"2026-01-01T00:00:09Z"}' >/dev/null
	save x3 '{"sessionId":"a","createdAt":"2026-01-01T00:00:05Z"}' >/dev/null
	run -0 --separate-stderr "$SW" --metadata-only latest ab
	assert_output --partial '"snapshotId":"x1"'
	run -0 --separate-stderr "$SW" --metadata-only latest a
	assert_output --partial '"snapshotId":"x3"'
}

@test "5 GetLatestSnapshotByCreatedAt: finalizing an older row does not move it ahead" {
	save b1 '{"sessionId":"s","status":"pending","createdAt":"2026-01-01T00:00:01Z","heartbeatAt":"2026-01-01T00:00:01Z"}' >/dev/null
	save b2 '{"sessionId":"s","createdAt":"2026-01-01T00:00:02Z"}' >/dev/null
	run -0 --separate-stderr "$SW" finalize b1 completed stop
	assert_output --partial '"status":"completed"'
	run -0 --separate-stderr "$SW" --metadata-only latest s
	assert_output --partial '"snapshotId":"b2"'
}

@test "6 GetLatestSnapshotReturnsLatestAnyStatus (aborted)" {
	save a1 '{"sessionId":"s","createdAt":"2026-01-01T00:00:01Z"}' >/dev/null
	save a2 '{"sessionId":"s","status":"aborted","finishReason":"aborted","createdAt":"2026-01-01T00:00:02Z"}' >/dev/null
	run -0 --separate-stderr "$SW" latest s
	assert_output '{"sessionId":"s","status":"aborted","finishReason":"aborted","createdAt":"2026-01-01T00:00:02Z","snapshotId":"a2"}'
}

@test "7 GetLatestSnapshotPendingReturned" {
	save a1 '{"sessionId":"s","createdAt":"2026-01-01T00:00:01Z"}' >/dev/null
	save p '{"sessionId":"s","status":"pending","createdAt":"2026-01-01T00:00:02Z"}' >/dev/null
	run -0 --separate-stderr "$SW" latest s
	assert_output '{"sessionId":"s","status":"pending","createdAt":"2026-01-01T00:00:02Z","snapshotId":"p"}'
}

@test "8 GetLatestSnapshotUnknownSession: not found" {
	run -4 --separate-stderr "$SW" latest nobody
	assert_output null
}

@test "9 GetLatestSnapshotEmptySessionID: error" {
	run -101 --separate-stderr "$SW" latest ""
	assert_equal "$stderr" "store-worker: session ID is empty"
}

# --- metadata (10-14) ---

@test "10 GetSnapshotMetadataMatchesFullReadWithoutState" {
	save m1 '{"sessionId":"s","parentId":"p0","status":"failed","finishReason":"failed","createdAt":"2026-01-01T00:00:01Z","updatedAt":"2026-01-01T00:00:02Z","heartbeatAt":"2026-01-01T00:00:01.5Z","error":{"status":"INTERNAL","message":"boom"},"state":{"messages":[{"role":"user","content":[{"text":"x"}]}],"custom":{"k":[1,2.5,1e400]}}}' >/dev/null
	full=$("$SW" get m1)
	run -0 --separate-stderr "$SW" --metadata-only get m1
	assert_equal "$output" "$(jq -c 'del(.state)' <<<"$full")"
	refute_output --partial state
	# exact numbers survive the round trip
	[[ $full == *'"custom":{"k":[1,2.5,1e400]}'* ]]
}

@test "11 GetSnapshotMetadataUnknownIsNil" {
	run -4 --separate-stderr "$SW" --metadata-only get nope
	assert_output null
}

@test "12 GetLatestSnapshotMetadataResolvesTheSameRow" {
	save a '{"sessionId":"s","createdAt":"2026-01-01T00:00:01Z","state":{"custom":1}}' >/dev/null
	save b '{"sessionId":"s","status":"pending","createdAt":"2026-01-01T00:00:02Z","state":{"custom":2}}' >/dev/null
	run -0 --separate-stderr "$SW" --metadata-only latest s
	assert_output '{"sessionId":"s","status":"pending","createdAt":"2026-01-01T00:00:02Z","snapshotId":"b"}'
}

@test "13 GetLatestSnapshotMetadataUnknownSessionIsNil" {
	run -4 --separate-stderr "$SW" --metadata-only latest nobody
	assert_output null
}

@test "14 GetLatestSnapshotMetadataEmptySessionID: error" {
	run -101 --separate-stderr "$SW" --metadata-only latest ""
	assert_equal "$stderr" "store-worker: session ID is empty"
}

# --- heartbeat (15-17) ---

@test "15 heartbeat AdvancesHeartbeatNotUpdatedAt" {
	save p '{"sessionId":"s","status":"pending","createdAt":"2026-01-01T00:00:01Z","updatedAt":"2026-01-01T00:00:01Z","heartbeatAt":"2026-01-01T00:00:01Z","state":{"custom":"kept"}}' >/dev/null
	run -0 --separate-stderr "$SW" beat p
	run -0 --separate-stderr "$SW" get p
	assert_equal "$(jq -r .updatedAt <<<"$output")" "2026-01-01T00:00:01Z"
	assert_equal "$(jq -r .status <<<"$output")" pending
	[ "$(jq -r .heartbeatAt <<<"$output")" != "2026-01-01T00:00:01Z" ]
	# the state was not touched by the metadata-only beat
	assert_equal "$(jq -c .state <<<"$output")" '{"custom":"kept"}'
}

@test "16 heartbeat NoopOnTerminal" {
	save c '{"sessionId":"s","status":"completed","createdAt":"2026-01-01T00:00:01Z","updatedAt":"2026-01-01T00:00:01Z"}' >/dev/null
	run -0 --separate-stderr "$SW" beat c
	assert_output null
	run -0 --separate-stderr "$SW" get c
	assert_output '{"sessionId":"s","status":"completed","createdAt":"2026-01-01T00:00:01Z","updatedAt":"2026-01-01T00:00:01Z","snapshotId":"c"}'
}

@test "17 heartbeat DoesNotChangeRecency" {
	save old '{"sessionId":"s","status":"pending","createdAt":"2026-01-01T00:00:01Z","heartbeatAt":"2026-01-01T00:00:01Z"}' >/dev/null
	save new '{"sessionId":"s","createdAt":"2026-01-01T00:00:02Z"}' >/dev/null
	for i in 1 2 3; do "$SW" beat old >/dev/null; done
	run -0 --separate-stderr "$SW" --metadata-only latest s
	assert_output --partial '"snapshotId":"new"'
}

# --- extras ---

@test "extra: SaveWithEmptyIDGeneratesUUID, DefaultsEmptyStatusToCompleted" {
	run -0 --separate-stderr save "" '{"sessionId":"s","status":""}'
	id=$(jq -r .snapshotId <<<"$output")
	[[ $id =~ ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$ ]]
	assert_equal "$(jq -r .status <<<"$output")" completed
	run -0 --separate-stderr "$SW" get "$id"
	assert_equal "$(jq -r .status <<<"$output")" completed
}

@test "extra: SaveWithFixedID forces the ID and keeps caller timestamps verbatim" {
	run -0 --separate-stderr save fixed '{"snapshotId":"other","sessionId":"s","createdAt":"2026-01-01T00:00:00.123456789+02:00","updatedAt":"0001-01-01T00:00:00Z"}'
	assert_output '{"snapshotId":"fixed","sessionId":"s","createdAt":"2026-01-01T00:00:00.123456789+02:00","updatedAt":"0001-01-01T00:00:00Z","status":"completed"}'
	run -4 "$SW" get other
}

@test "extra: NoopFnSkipsWrite" {
	run -0 --separate-stderr "$SW" noop n1
	assert_output null
	run -4 "$SW" get n1
}

@test "extra: abort flips pending to aborting; the worker finalizes aborted" {
	save p '{"sessionId":"s","status":"pending","createdAt":"2026-01-01T00:00:01Z","updatedAt":"2026-01-01T00:00:01Z","heartbeatAt":"2026-01-01T00:00:01Z"}' >/dev/null
	run -0 --separate-stderr "$SW" abort p
	assert_equal "$(jq -r .status <<<"$output")" aborting
	assert_equal "$(jq -r .heartbeatAt <<<"$output")" "2026-01-01T00:00:01Z"
	[ "$(jq -r .updatedAt <<<"$output")" != "2026-01-01T00:00:01Z" ]
	run -0 --separate-stderr "$SW" finalize p
	assert_equal "$(jq -c '[.status,.finishReason,.createdAt,has("heartbeatAt")]' <<<"$output")" '["aborted","aborted","2026-01-01T00:00:01Z",false]'
}

@test "extra: AbortTerminalIsNoop, AbortMissingReturnsEmpty" {
	save c '{"sessionId":"s","status":"failed"}' >/dev/null
	run -0 --separate-stderr "$SW" abort c
	assert_output null
	run -0 --separate-stderr "$SW" abort missing
	assert_output null
}

@test "extra: status subscription yields the current status and changes; missing is closed" {
	save p '{"sessionId":"s","status":"pending"}' >/dev/null
	"$SW" subscribe p 10s >sub.out &
	pid=$!
	wait_for 10 test -s sub.out
	"$SW" abort p >/dev/null
	wait_for 10 grep -q aborting sub.out
	"$SW" finalize p >/dev/null
	wait "$pid"
	run cat sub.out
	assert_output $'pending\naborting\naborted'
	run -0 --separate-stderr "$SW" subscribe nope 1s
	assert_output closed
}

@test "extra: FinishReasonPersistsAcrossReopen and rows persist across processes" {
	save r '{"sessionId":"s","finishReason":"length","status":"completed"}' >/dev/null
	run -0 --separate-stderr "$SW" get r
	assert_equal "$(jq -r .finishReason <<<"$output")" length
}

@test "extra: MaxPersistedChainLength as prune --keep 2 keeps the newest two" {
	for i in 1 2 3 4; do
		save "s$i" "{\"sessionId\":\"c\",\"createdAt\":\"2026-01-01T00:00:0${i}Z\"}" >/dev/null
	done
	run -0 --separate-stderr agent-snap prune --keep 2
	assert_output '{"deleted":2}'
	run -0 --separate-stderr agent-snap log c
	assert_equal "$(jq -r .snapshotId <<<"$output" | tr '\n' ' ')" "s3 s4 "
}

@test "extra: invalid IDs are rejected before anything is written" {
	run -101 --separate-stderr save $'a\tb' '{"sessionId":"s"}'
	assert_equal "$stderr" "store-worker: invalid snapshot ID: contains a control character"
	run -101 --separate-stderr save ok '{"sessionId":"a\nb"}'
	assert_equal "$stderr" "store-worker: invalid session ID: contains a control character"
	run -4 "$SW" get ok
	long=$(printf 'x%.0s' $(seq 241))
	run -101 --separate-stderr save "$long" '{"sessionId":"s"}'
	assert_output ""
	# path-like IDs are fine here (no files per row)
	run -0 --separate-stderr save ../escape '{"sessionId":"a/b"}'
}

@test "extra: forks share history; a turn stores only its new messages" {
	"$SW" turn s t1 "" one >/dev/null
	"$SW" turn s t2 t1 two >/dev/null
	"$SW" turn s f2 t1 fork >/dev/null
	run -0 --separate-stderr "$SW" get t2
	assert_equal "$(jq -c '[.state.messages[].content[0].text]' <<<"$output")" '["one","one","two","two"]'
	run -0 --separate-stderr "$SW" get f2
	assert_equal "$(jq -c '[.state.messages[].content[0].text]' <<<"$output")" '["one","one","fork","fork"]'
	is_pg || requires mdb_stat
	# 2 + 2 + 2 message nodes, not 2 + 4 + 4
	assert_equal "$(stored_messages)" 6
	# deleting one branch keeps the shared prefix for the other
	agent-snap rm s >/dev/null
	assert_equal "$(stored_messages)" 0
	is_pg || { run -0 mdb_stat -s node "$AGENTKIT_STORE"; assert_output --partial "Entries: 0"; }
}

@test "extra: a row's first messages read back as the text they are stored in" {
	"$SW" turn s t1 "" 'one "quoted" \\ back' >/dev/null
	"$SW" turn s t2 t1 two >/dev/null
	"$SW" turn s f2 t1 fork >/dev/null
	# each the bytes a full read writes for it, oldest first, on a fork too
	run -0 --separate-stderr "$SW" get f2
	local want=$(jq -c '.state.messages[]' <<<"$output")
	assert_equal "$(grep -c . <<<"$want")" 4
	run -0 --separate-stderr "$SW" texts f2 4
	assert_output "$want"
	run -0 --separate-stderr "$SW" texts f2 3
	assert_output "$(head -n 3 <<<"$want")"
	run -0 --separate-stderr "$SW" texts f2 0
	assert_output ''
	run -0 --separate-stderr "$SW" texts t2 4
	assert_equal "$(jq -r '.content[0].text' <<<"$output" | tr '\n' ,)" 'one "quoted" \\ back,one "quoted" \\ back,two,two,'
	# past its messages, a row without state, no row
	run -111 --separate-stderr "$SW" texts f2 5
	assert_equal "$stderr" "store-worker: snapshot 'f2' holds fewer than 5 messages"
	save bare '{"sessionId":"s"}' >/dev/null
	run -0 --separate-stderr "$SW" texts bare 0
	run -111 --separate-stderr "$SW" texts bare 1
	run -4 --separate-stderr "$SW" texts nope 1
}

@test "extra: the state keeps its key order and the messages their place" {
	save k '{"state":{"sessionId":"s","messages":[{"role":"user"}],"custom":{"z":1,"a":2}},"sessionId":"s","createdAt":"2026-01-01T00:00:00Z"}' >/dev/null
	run -0 --separate-stderr "$SW" get k
	assert_output '{"state":{"sessionId":"s","messages":[{"role":"user"}],"custom":{"z":1,"a":2}},"sessionId":"s","createdAt":"2026-01-01T00:00:00Z","snapshotId":"k","status":"completed"}'
	# state that is not an object, or messages that are not an array
	save k2 '{"sessionId":"s","state":{"messages":"odd"}}' >/dev/null
	run -0 --separate-stderr "$SW" get k2
	assert_output --partial '"state":{"messages":"odd"}'
}

# history_check N: the rows h1..hN hold exactly the messages the writer
# printed after saving each (byte for byte: no jq in between).
history_check() {
	local i=1 line got
	while IFS= read -r line; do
		[ "$i" -le "$1" ] || break
		got=$("$SW" get "h$i")
		got=${got#*'"state":{"messages":'}
		assert_equal "h$i ${got%"},\"snapshotId\":\"h$i\"}"}" "h$i $line"
		i=$((i + 1))
	done <"$BATS_TEST_TMPDIR/printed"
	[ "$i" -gt "$1" ]
}

@test "extra: a long-lived writer stores exactly the history it holds, edits in place included" {
	"$SW" history s >"$BATS_TEST_TMPDIR/printed" <<'IN'
{"append":{"role":"user","content":[{"text":"a"}]}}
{"append":{"role":"model","content":[{"text":"b"}]}}
{"save":"h1"}
{"append":{"role":"user","content":[{"text":"c"}]}}
{"save":"h2"}
{"append":{"role":"model","content":[{"text":"d"}]}}
{"save":"h3"}
{"edit":[1,"role","tool"]}
{"save":"h4"}
{"truncate":2}
{"append":{"role":"user","content":[{"text":"e\n\"\u0001é"}]}}
{"save":"h5"}
{"edit":[2,"n",1]}
{"save":"h6"}
{"edit":[2,"n",1.0]}
{"save":"h7"}
{"edit":[0,"content",[{"text":"A"}]]}
{"save":"h8"}
IN
	assert_equal "$(wc -l <"$BATS_TEST_TMPDIR/printed")" 8
	history_check 8
	# one node per distinct prefix: a ab abc abcd | ab' ab'c ab'cd | ab'e |
	# ab'e1 | ab'e1.0 | A Ab' Ab'e1.0
	is_pg || requires mdb_stat
	assert_equal "$(stored_messages)" 13
}

@test "extra: a long-lived writer whose stored history was deleted writes it again" {
	"$SW" history s >"$BATS_TEST_TMPDIR/printed" <<'IN'
{"append":{"role":"user","content":[{"text":"a"}]}}
{"save":"h0"}
{"append":{"role":"model","content":[{"text":"b"}]}}
{"save":"h0"}
{"rm":true}
{"append":{"role":"user","content":[{"text":"c"}]}}
{"save":"h1"}
{"append":{"role":"model","content":[{"text":"d"}]}}
{"save":"h2"}
IN
	sed -i 1,2d "$BATS_TEST_TMPDIR/printed"
	history_check 2
	run -0 agent-snap log s
	assert_equal "$(jq -r .snapshotId <<<"$output" | tr '\n' ' ')" "h1 h2 "
}

@test "extra: a save's base links the kept messages to the stored chain, whatever the base's distance" {
	"$SW" history s >"$BATS_TEST_TMPDIR/printed" <<'IN'
{"append":{"role":"user","content":[{"text":"a"}]}}
{"append":{"role":"model","content":[{"text":"b"}]}}
{"save":"h1"}
{"append":{"role":"user","content":[{"text":"c"}]}}
{"append":{"role":"model","content":[{"text":"d"}]}}
{"save":"h2","kept":2}
{"append":{"role":"user","content":[{"text":"e"}]}}
{"save":"h3","kept":4}
{"truncate":1}
{"append":{"role":"model","content":[{"text":"B"}]}}
{"save":"h4","kept":1}
{"append":{"role":"user","content":[{"text":"x"}]}}
{"save":"h5","kept":2}
{"save":"h6","kept":3,"base":"unknown-to-the-handle"}
IN
	history_check 6
	is_pg || requires mdb_stat
	# a ab abc abcd abcde | aB aBx: nothing stored twice
	assert_equal "$(stored_messages)" 7
}

@test "extra: a wrong base claim fails the save under AGENTKIT_STORE_VERIFY, and is trusted without it" {
	in='{"append":{"role":"user","content":[{"text":"a"}]}}
{"save":"w1"}
{"edit":[0,"role","tool"]}
{"append":{"role":"model","content":[{"text":"b"}]}}
{"save":"w2","kept":1}'
	run -1 --separate-stderr "$SW" history s <<<"$in"
	assert_equal "$stderr" "store-worker: save snapshot: the first 1 messages are not those of the base row 'w1' (the caller's claim is wrong)"
	run -4 --separate-stderr "$SW" get w2
	# without the check the claim is what the store goes by: message 0 is
	# w1's (so it was linked, not compared)
	agent-snap rm s >/dev/null
	AGENTKIT_STORE_VERIFY=0 "$SW" history s <<<"$in" >/dev/null
	run -0 --separate-stderr "$SW" get w2
	assert_equal "$(jq -c '[.state.messages[].role]' <<<"$output")" '["user","model"]'
}

@test "extra: a base whose stored messages were deleted is ignored, and the history written again" {
	"$SW" history s >"$BATS_TEST_TMPDIR/printed" <<'IN'
{"append":{"role":"user","content":[{"text":"a"}]}}
{"save":"h0"}
{"rm":true}
{"append":{"role":"model","content":[{"text":"b"}]}}
{"save":"h1","kept":1,"base":"h0"}
IN
	sed -i 1d "$BATS_TEST_TMPDIR/printed"
	history_check 1
}

# log_text ID: the worker log's lines without their times.
log_text() { agent-snap worker-log "$1" | sed 's/^[^ ]* //'; }

@test "extra: a save that says the row is new (a turn's) still sees the row when it is there" {
	run -0 --separate-stderr "$SW" --new save n1 '{"sessionId":"s","createdAt":"2026-01-01T00:00:00Z"}'
	assert_output '{"sessionId":"s","createdAt":"2026-01-01T00:00:00Z","snapshotId":"n1","status":"completed"}'
	# the row is there: fn runs on it, as without the hint, its session kept
	run -0 --separate-stderr "$SW" --new save n1 '{"sessionId":"","createdAt":"2026-01-01T00:00:01Z"}'
	assert_output '{"sessionId":"s","createdAt":"2026-01-01T00:00:01Z","snapshotId":"n1","status":"completed"}'
	# four writers at once, each sure the row is new: no update lost
	"$SW" save c '{"sessionId":"s","state":{"custom":{"n":0}}}' >/dev/null
	for _ in 1 2 3 4; do "$SW" --new incr c 10 & done
	wait
	run -0 --separate-stderr "$SW" get c
	assert_equal "$(jq -r .state.custom.n <<<"$output")" 40
	run -0 --separate-stderr "$SW" --new incr fresh 1
	run -0 --separate-stderr "$SW" get fresh
	assert_equal "$(jq -r .state.custom.n <<<"$output")" 1
}

@test "extra: worker log lines read back in order, from another process, and go with their row" {
	save r1 '{"sessionId":"s","createdAt":"2026-01-01T00:00:00Z"}' >/dev/null
	save r2 '{"sessionId":"s","createdAt":"2026-01-02T00:00:00Z"}' >/dev/null
	run -0 "$SW" log r1 300 one
	[[ "$output" =~ ^\{\"appended\":300,\"usPerAppend\":[0-9.]+\}$ ]] || fail "$output"
	"$SW" log r2 1 two >/dev/null
	# more lines than one read's batch, in append order, each with its time
	run -0 --separate-stderr agent-snap worker-log r1
	[ "${#lines[@]}" = 300 ]
	assert_equal "$(log_text r1 | sed -n '1p;256p;257p;300p' | tr '\n' ,)" "one 1,one 256,one 257,one 300,"
	run -0 jq -e -n --arg t "${lines[0]%% *}" '$t | test("^2[0-9-]+T[0-9:.]+Z$")'
	assert_equal "$(log_text r2)" two
	# a line for a row that does not exist is not kept
	run -4 --separate-stderr "$SW" log nope 1 lost
	assert_equal "$stderr" ""
	run -4 --separate-stderr agent-snap worker-log nope
	assert_equal "$stderr" "agent-snap: no worker log for snapshot 'nope' (only detached runs have one)"
	# made valid UTF-8, and cut at STORE_LOG_LINE_MAX (16384 bytes)
	"$SW" log r2 1 $'bad \xff byte' >/dev/null
	"$SW" log r2 1 "$(head -c 20000 /dev/zero | tr '\0' x)" >/dev/null
	assert_equal "$(log_text r2 | sed -n 2p)" "bad � byte"
	assert_equal "$(log_text r2 | sed -n 3p | wc -c)" 16385
	# prune takes the pruned row's lines and keeps the latest's
	run -0 agent-snap prune --keep 1 s
	assert_output '{"deleted":1}'
	run -4 agent-snap worker-log r1
	assert_equal "$(log_text r2 | wc -l)" 3
	run -0 agent-snap rm s
	run -4 agent-snap worker-log r2
	# and a later line for the deleted row is dropped
	run -4 "$SW" log r2 1 late
	run -4 agent-snap worker-log r2
}
