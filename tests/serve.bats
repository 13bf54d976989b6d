#!/usr/bin/env bats
# agent-serve (docs/serve.md): the agent path over HTTP with Genkit's wire,
# driven by Genkit JS 1.42's own remoteAgent client (genkit/beta/client,
# tests/fixtures/serve/client.cjs; the pinned package of
# scripts/genkit-client) and by curl for the HTTP edges: auth, limits,
# disconnects, the drain.

load test_helper

MODS="$TOP/bench/out/genkit/node_modules"
AGENTS="$FIXTURES/serve/agents"
SPID=
FPID=

setup() {
	common_setup
}

teardown() {
	[ -z "$FPID" ] || kill "$FPID" 2>/dev/null || true
	[ -z "$SPID" ] || kill "$SPID" 2>/dev/null || true
	[ -z "$SPID" ] || wait "$SPID" 2>/dev/null || true
}

need_client() {
	command -v node >/dev/null || skip "node is not installed"
	[ -f "$MODS/genkit/package.json" ] ||
		skip "genkit@1.42.0 is not installed (run scripts/genkit-client)"
}

need_curl() {
	command -v curl >/dev/null || skip "curl is not installed"
}

# serve [OPTION]...: start agent-serve on a free loopback port; $URL, $SPID.
serve() {
	agent-serve --listen 127.0.0.1:0 --agents "$AGENTS" "$@" 2>serve.log &
	SPID=$!
	for _ in $(seq 100); do grep -q 'listening on' serve.log && break; sleep 0.05; done
	URL=$(sed -n 's/^agent-serve: listening on //p' serve.log)
	[ -n "$URL" ]
}

# turn_children: agent-serve's children but the agent-run it keeps
# started ahead of the next turn (agent-run --serve-child), one a line.
turn_children() {
	ps -o args= --ppid "$SPID" | grep -v -- ' --serve-child$' || true
}

client() {
	run node "$FIXTURES/serve/client.cjs" "$MODS" "$@"
}

say_body='{"data":{"message":{"role":"user","content":[{"text":"hi"}]}}}'

@test "serve: a multi-turn server-managed chat through Genkit's remoteAgent" {
	need_client
	serve
	client chat "$URL/chat"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = '{"text":"you said: hello","finishReason":"stop","hasSnapshot":true}' ]
	[ "${lines[1]}" = '{"chunks":["you said: ","again"],"text":"you said: again","messages":4,"sameSession":true,"newSnapshot":true}' ]
	[ "${lines[2]}" = '{"status":"completed","messages":4,"parent":true}' ]
	[ "${#lines[@]}" -eq 3 ]
	# one access-log line per request, with the IDs
	[ "$(grep -c '^agent-serve: POST /chat 200 [0-9]*ms session=[0-9a-f-]* snapshot=[0-9a-f-]*$' serve.log)" -eq 2 ]
	grep -q '^agent-serve: POST /chat/getSnapshot 200 [0-9]*ms session=' serve.log
}

@test "serve: client-managed state travels in init and output.state (--no-store)" {
	need_client
	serve --no-store
	client client "$URL/chat"
	[ "$status" -eq 0 ]
	[ "$output" = '{"text":"you said: two","snapshotId":null,"messages":4,"stateMessages":4}' ]
	[ ! -e "$AGENTKIT_STORE" ]
	need_curl
	run curl -s -w ' %{http_code}' "$URL/chat/getSnapshot" -d '{"data":{"snapshotId":"x"}}'
	[ "$output" = '{"status":"NOT_FOUND","message":"agent '\''chat'\'' has no getSnapshot route: it is client-managed (agent-serve --no-store)"} 404' ]
}

@test "serve: detach, then getSnapshot, then abort: the worker finalizes aborted" {
	need_client
	serve
	client detach "$URL/chat"
	[ "$status" -eq 0 ]
	[ "$output" = '{"status":"pending"}
{"abort":"aborting"}
{"final":"aborted"}' ]
}

@test "serve: custom state streams as customPatch and comes back in output.state" {
	need_client
	ln -s "$FIXTURES/tools" tools
	serve
	client custom "$URL/keeper"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = '{"text":"Added milk.","live":[{"tasks":[{"id":1,"title":"milk","done":false}],"nextId":2}],"state":{"tasks":[{"id":1,"title":"milk","done":false}],"nextId":2}}' ]
	[ "${lines[1]}" = '{"text":"Added eggs.","titles":["milk","eggs"],"chatState":3}' ]
}

@test "serve: a tool interrupts, the client answers it and the turn goes on" {
	need_client
	ln -s "$FIXTURES/tools" tools
	serve
	client interrupt "$URL/keeper"
	[ "$status" -eq 0 ]
	[ "$output" = '{"finishReason":"interrupted","interrupts":[["ask",{"q":"which one?"}]]}
{"finishReason":"stop","text":"Thanks, noted.","messages":3}' ]
}

@test "serve: an unknown agent, a bad AgentInput and an unknown snapshot, as the client sees them" {
	need_client
	serve
	client fail "$URL/nope"
	[ "$output" = '{"error":"AgentError","status":"UNKNOWN","message":"Server returned: 404: {\"status\":\"NOT_FOUND\",\"message\":\"agent '\''nope'\'' not found\"}"}' ]
	client badinput "$URL/chat"
	[ "$output" = '{"error":"AgentError","status":"INVALID_ARGUMENT","message":"invalid AgentInput: '\''message'\'' must be a message object (at <stdin>:1)"}' ]
	client missing "$URL/chat"
	[ "$output" = '{"error":"Server returned: 404: {\"status\":\"NOT_FOUND\",\"message\":\"getSnapshot: snapshot \\\"no-such-snapshot\\\" not found\"}"}' ]
}

@test "serve: bearer tokens: 401 without one or with a wrong one, the turn with the right one" {
	need_curl
	printf '# the team\nsecret-one\n\n  secret-two  \n' >tokens
	serve --auth-token-file tokens
	run curl -s -D headers -w ' %{http_code}' "$URL/chat" -d "$say_body"
	[ "$output" = '{"status":"UNAUTHENTICATED","message":"a bearer token is required (Authorization: Bearer TOKEN)"} 401' ]
	grep -qi '^WWW-Authenticate: Bearer' headers
	run curl -s -w ' %{http_code}' -H 'Authorization: Bearer secret-on' "$URL/chat" -d "$say_body"
	[ "${output##* }" = 401 ]
	run curl -s -H 'Authorization: Bearer secret-two' "$URL/chat" -d "$say_body"
	[ "$(jq -r .result.message.content[0].text <<<"$output")" = "you said: hi" ]
	! grep -q secret serve.log
	if command -v node >/dev/null && [ -f "$MODS/genkit/package.json" ]; then
		client fail "$URL/chat" wrong
		[ "$output" = '{"error":"AgentError","status":"UNKNOWN","message":"Server returned: 401: {\"status\":\"UNAUTHENTICATED\",\"message\":\"a bearer token is required (Authorization: Bearer TOKEN)\"}"}' ]
		client fail "$URL/chat" secret-one
		[ "$output" = '{"ok":true}' ]
	fi
}

@test "serve: a non-loopback address needs auth or --insecure-no-auth" {
	run agent-serve --listen 0.0.0.0:0
	[ "$status" -eq 100 ]
	[ "${lines[0]}" = "agent-serve: --listen 0.0.0.0:0 is not a loopback address: give --auth-token-file, or --insecure-no-auth to serve anyone who reaches it" ]
	run agent-serve --listen 127.0.0.1
	[ "$status" -eq 100 ]
	[ "${lines[0]}" = "agent-serve: --listen: '127.0.0.1' is not ADDR:PORT" ]
	run agent-serve --listen 127.0.0.1:0 --auth-token-file nothere
	[ "$status" -eq 4 ]
}

@test "serve: a body over --max-body is 413" {
	need_curl
	serve --max-body 1K
	head -c 2000 /dev/zero | tr '\0' 'x' >big
	run curl -s -w ' %{http_code}' "$URL/chat" --data-binary @big
	[ "$output" = '{"status":"RESOURCE_EXHAUSTED","message":"the body has 2000 bytes, more than the limit of 1024 (agent-serve --max-body)"} 413' ]
}

@test "serve: past --max-concurrent a turn is 503 with Retry-After" {
	need_curl
	serve --max-concurrent 1
	curl -sN -H 'Accept: text/event-stream' "$URL/chat" \
		-d '{"data":{"message":{"role":"user","content":[{"text":"slow one"}]}}}' >slow.out &
	local cpid=$!
	wait_for 5 grep -q modelChunk slow.out
	run curl -s -D headers -w ' %{http_code}' "$URL/chat" -d "$say_body"
	[ "$output" = '{"status":"UNAVAILABLE","message":"1 turns are running, the limit (agent-serve --max-concurrent); retry later"} 503' ]
	grep -qi '^Retry-After: 1' headers
	wait "$cpid"
	tail -n 2 slow.out | head -n 1 | grep -q '^data: {"result":{"finishReason":"stop"'
	# the slot is free again
	run curl -s -w ' %{http_code}' "$URL/chat" -d "$say_body"
	[ "${output##* }" = 200 ]
}

@test "serve: plain JSON turns, waitForSnapshot at its cap, the listing" {
	need_curl
	serve --max-snapshot-wait 300ms
	run curl -s "$URL/chat" -d '{"data":{"message":{"role":"user","content":[{"text":"plain"}]}},"init":{"sessionId":"s1"}}'
	[ "$(jq -c '[.result.message.content[0].text, .result.sessionId]' <<<"$output")" = '["you said: plain","s1"]' ]
	id=$(jq -r .result.snapshotId <<<"$output")
	run curl -s "$URL/chat/waitForSnapshot" -d "{\"data\":{\"snapshotId\":\"$id\",\"metadataOnly\":true}}"
	[ "$(jq -c '[.result.status, .result.snapshotId == "'"$id"'", has("state")]' <<<"$output")" = '["completed",true,false]' ]
	# a pending row: answered at the cap with the row as it stands
	run curl -s "$URL/chat" -d '{"data":{"detach":true,"message":{"role":"user","content":[{"text":"slow"}]}}}'
	pid_row=$(jq -r .result.snapshotId <<<"$output")
	[ "$(jq -r .result.finishReason <<<"$output")" = detached ]
	run curl -s "$URL/chat/waitForSnapshot" -d "{\"data\":{\"snapshotId\":\"$pid_row\"}}"
	[ "$(jq -r .result.status <<<"$output")" = pending ]
	run curl -s "$URL/chat/abort" -d "{\"data\":{\"snapshotId\":\"$pid_row\"}}"
	[ "$output" = "{\"result\":{\"snapshotId\":\"$pid_row\",\"status\":\"aborting\"}}" ]
	run curl -s -w ' %{http_code}' "$URL/chat/abort" -d '{"data":{"snapshotId":"nope"}}'
	[ "$output" = '{"status":"NOT_FOUND","message":"abort: snapshot \"nope\" not found"} 404' ]
	run curl -s -w ' %{http_code}' "$URL/chat/waitForSnapshot" -d '{"data":{}}'
	[ "$output" = '{"status":"INVALID_ARGUMENT","message":"waitForSnapshot: snapshotId is required"} 400' ]
	run curl -s -w ' %{http_code}' "$URL/chat" -d '{"data":'
	[ "${output##* }" = 400 ]
	[ "$(jq -r .status <<<"${output% *}")" = INVALID_ARGUMENT ]
	run curl -s "$URL/"
	# keeper's tools are not on this agent path: its entry says why
	[ "$(jq -c '[.agents[] | [.name, .metadata.agent.stateManagement // (.error | startswith("tool '\''addTask'\'' not found (searched: "))]]' <<<"$output")" = '[["chat","server"],["guard","server"],["keeper",true]]' ]
	ln -s "$FIXTURES/tools" tools
	run curl -s "$URL/"
	[ "$(jq -c '[.agents[] | [.name, .metadata.agent.stateManagement, (.tools | length)]]' <<<"$output")" = '[["chat","server",0],["guard","server",1],["keeper","server",2]]' ]
	agent-wait --timeout 10s "$pid_row" >/dev/null || [ $? -eq 2 ]
}

@test "serve: a client that disconnects mid-turn cancels it; SIGTERM drains" {
	need_curl
	serve
	run curl -sN --max-time 1.2 -H 'Accept: text/event-stream' "$URL/chat" \
		-d '{"data":{"message":{"role":"user","content":[{"text":"slow"}]}}}'
	[ "$status" -eq 28 ]
	wait_for 5 grep -q '^agent-serve: POST /chat 200 [0-9]*ms.* cancelled$' serve.log
	[ -z "$(turn_children)" ]
	# a turn in flight when SIGTERM comes is let finish
	curl -sN -H 'Accept: text/event-stream' "$URL/chat" \
		-d '{"data":{"message":{"role":"user","content":[{"text":"slow two"}]}}}' >slow.out &
	local cpid=$!
	wait_for 5 grep -q modelChunk slow.out
	# the next turn's agent-run, started ahead, ends with the server
	wait_for 5 pgrep -P "$SPID" -f -- ' --serve-child$'
	local ahead
	ahead=$(pgrep -P "$SPID" -f -- ' --serve-child$')
	kill -TERM "$SPID"
	local st=0
	wait "$SPID" || st=$?
	SPID=
	[ "$st" -eq 0 ]
	! kill -0 "$ahead" 2>/dev/null
	wait "$cpid"
	grep -q '^data: {"result":{"finishReason":"stop"' slow.out
	grep -q '^agent-serve: Terminated: draining$' serve.log
}

@test "serve: 200 slow clients against --max-concurrent 8: 8 turns with right rows, 192 times 503, bounded memory" {
	need_curl
	serve --max-concurrent 8
	local port=${URL##*:} ids
	# all connected first, each sending its request and reading the answer
	# a few bytes at a time; a 503 waits for the body it refuses, so that
	# a slow sender still reads it (not a reset)
	python3 "$FIXTURES/serve/slow-clients.py" 200 127.0.0.1 "$port" /chat 'hold on' >clients
	[ "$(wc -l <clients)" -eq 200 ]
	[ "$(awk '{ print $1 ":" $2 }' clients | sort | uniq -c | awk '{ print $2 "=" $1 }' | paste -sd ' ')" = "200:-=8 503:1=192" ]
	[ "$(grep -c '^agent-serve: POST /chat 503 ' serve.log)" -eq 192 ]
	# every admitted turn's row is its own, completed
	ids=$(awk '$1 == 200 { print $3 }' clients)
	[ "$(sort -u <<<"$ids" | grep -c .)" -eq 8 ]
	run agent-snap --agents "$AGENTS" --agent chat $ids
	[ "$status" -eq 0 ]
	[ "$(jq -c '[.status, [.state.messages[].content[0].text]]' <<<"$output" | sort | uniq -c | sed 's/^ *//')" = '8 ["completed",["hold on","x y "]]' ]
	# bounded: a thread per connection, each with its 64 KiB of buffers
	[ "$(awk '/^VmHWM:/ { print $2 }' "/proc/$SPID/status")" -lt 65536 ]
	run curl -s -w ' %{http_code}' "$URL/chat" -d "$say_body"
	[ "${output##* }" = 200 ]
}

@test "serve: garbage on the socket is answered or dropped, and the server goes on" {
	need_curl
	serve
	local port=${URL##*:}
	python3 - "$port" <<-'EOF'
	import socket, sys
	port = int(sys.argv[1])
	def send(data, read=True):
	    s = socket.create_connection(("127.0.0.1", port), timeout=5)
	    try:
	        s.sendall(data)
	        if read:
	            s.shutdown(socket.SHUT_WR)
	            s.recv(65536)
	    except OSError:
	        pass
	    s.close()
	send(b"GARBAGE\r\n\r\n")
	send(bytes(range(256)) * 64)
	send(b"POST /chat HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n")
	send(b"POST /chat HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"data\":", read=False)
	send(b"POST /chat HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
	send(b"POST /%00%ff/../x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	EOF
	run curl -s -w ' %{http_code}' -X PUT "$URL/chat"
	[ "$output" = '{"status":"NOT_FOUND","message":"PUT /chat: agents are served by POST"} 404' ]
	run curl -s "$URL/chat" -d "$say_body"
	[ "$(jq -r .result.message.content[0].text <<<"$output")" = "you said: hi" ]
	kill -0 "$SPID"
}

@test "serve: --turn-timeout and the end of the drain stop a turn: the client gets it aborted" {
	need_curl
	serve --turn-timeout 700ms
	run curl -s "$URL/chat" -d '{"data":{"message":{"role":"user","content":[{"text":"slow"}]}},"init":{"sessionId":"t1"}}'
	[ "$(jq -c '[.result.finishReason, .result.sessionId]' <<<"$output")" = '["aborted","t1"]' ]
	wait_for 5 grep -q '^agent-serve: POST /chat 200 [0-9]*ms session=t1 cancelled$' serve.log
	kill "$SPID"
	wait "$SPID" || true
	serve --drain-timeout 300ms
	curl -sN -H 'Accept: text/event-stream' "$URL/chat" \
		-d '{"data":{"message":{"role":"user","content":[{"text":"slow"}]}}}' >slow.out &
	local cpid=$! st=0
	wait_for 5 grep -q modelChunk slow.out
	kill -TERM "$SPID"
	wait "$SPID" || st=$?
	SPID=
	[ "$st" -eq 2 ]
	wait "$cpid"
	[ "$(tail -n 2 slow.out | head -n 1 | sed 's/^data: //' | jq -c '[.result.finishReason, .result.error.status]')" = '["aborted","CANCELLED"]' ]
	grep -q '^agent-serve: cancelled 1 request still running after the drain$' serve.log
}

@test "serve: agent-run --url runs turns on agent-serve with local agent-run's output and exits" {
	need_curl
	ln -s "$FIXTURES/tools" tools
	printf 'tok\n' >tokens
	serve --auth-token-file tokens
	local H='Authorization: Bearer tok'
	run agent-run --url "$URL/chat" --header "$H" -m hello -m again
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 7 ]
	[ "${lines[0]}" = '{"modelChunk":{"content":[{"text":"you said: "}],"index":0,"role":"model"}}' ]
	[ "$(jq -c '[.output.message.content[0].text, .output.finishReason]' <<<"${lines[6]}")" = '["you said: again","stop"]' ]
	# the second turn went on from the first's snapshot: one session of 4 messages
	id=$(jq -r .output.snapshotId <<<"${lines[6]}")
	[ "$(agent-snap get "$id" | jq -c '[(.state.messages | length), (.parentId | length > 0)]')" = '[4,true]' ]
	# NDJSON inputs and --session; --format json
	run agent-run --url "$URL/chat" --header "$H" --session s9 --format json \
		<<<'{"message":{"role":"user","content":[{"text":"yo"}]}}'
	[ "$status" -eq 0 ]
	[ "$(jq -c '[.message.content[0].text, .sessionId]' <<<"$output")" = '["you said: yo","s9"]' ]
	# an interrupt exits 6, a detach 0 with the pending row
	run agent-run --url "$URL/keeper" --header "$H" -m 'ask me' --format json
	[ "$status" -eq 6 ]
	[ "$(jq -r .finishReason <<<"$output")" = interrupted ]
	run agent-run --url "$URL/chat" --header "$H" --detach -m slow
	[ "$status" -eq 0 ]
	row=$(jq -r .output.snapshotId <<<"$output")
	[ "$(jq -r .output.finishReason <<<"$output")" = detached ]
	[ "$(agent-snap get "$row" | jq -r .status)" = pending ]
	agent-abort "$row" >/dev/null
	# errors: the server's, as the final {"error"} line and its exit code
	run --separate-stderr agent-run --url "$URL/nope" --header "$H" -m hi
	[ "$status" -eq 4 ]
	[ "$output" = '{"error":{"status":"NOT_FOUND","message":"agent '\''nope'\'' not found"}}' ]
	[ "$stderr" = "agent-run: agent 'nope' not found" ]
	run --separate-stderr agent-run --url "$URL/chat" -m hi
	[ "$status" -eq 1 ]
	[ "$output" = '{"error":{"status":"UNAUTHENTICATED","message":"a bearer token is required (Authorization: Bearer TOKEN)"}}' ]
	! grep -q tok <<<"$stderr"
	run agent-run --url "$URL/chat" --header 'no colon' -m hi
	[ "$status" -eq 100 ]
	run agent-run chat --url "$URL/chat" -m hi
	[ "$status" -eq 100 ]
	[ "${lines[0]}" = "agent-run: --url names the agent: drop the operand 'chat'" ]
}

@test "serve: SIGTERM on agent-run --url closes the connection: the server cancels the turn" {
	need_curl
	serve
	agent-run --url "$URL/chat" -m slow >out.ndjson 2>err &
	local apid=$! st=0
	wait_for 5 grep -q modelChunk out.ndjson
	kill -TERM "$apid"
	wait "$apid" || st=$?
	[ "$st" -eq 2 ]
	[ "$(tail -n 1 out.ndjson)" = '{"output":{"finishReason":"aborted","error":{"status":"CANCELLED","message":"context canceled"}}}' ]
	wait_for 5 grep -q '^agent-serve: POST /chat 200 [0-9]*ms cancelled$' serve.log
	wait_for 5 sh -c '[ -z "$(ps -o args= --ppid '"$SPID"' | grep -v -- " --serve-child$")" ]'
}

# spans: every span the OTLP receiver logged, one compact object a line
spans() {
	jq -c '(.body // .) | .resourceSpans[] | (.resource.attributes[] | select(.key == "service.name") | .value.stringValue) as $svc | .scopeSpans[].spans[] | {svc: $svc, traceId, spanId, parentSpanId, name, kind, code: ([.attributes[]? | select(.key == "http.response.status_code") | .value.intValue][0])}' "$LOG"
}

# logged SVC N [NAME]: at least N spans of service SVC (named NAME) logged
logged() {
	[ "$(spans 2>/dev/null | jq -c --arg s "$1" --arg n "${3:-}" \
		'select(.svc == $s and ($n == "" or .name == $n))' | wc -l)" -ge "$2" ]
}

@test "serve: a SERVER span per request, a child of its traceparent; the turn's spans under it" {
	need_curl
	LOG="$BATS_TEST_TMPDIR/otlp.ndjson"
	: >"$LOG"
	"$TOP/scripts/otlp-receiver" --port-file "$BATS_TEST_TMPDIR/port" --log "$LOG" --idle 30 3>&- &
	local rpid=$!
	wait_for 5 test -s "$BATS_TEST_TMPDIR/port"
	AGENTKIT_TRACE=1 OTEL_EXPORTER_OTLP_PROTOCOL=http/json \
		OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$(cat "$BATS_TEST_TMPDIR/port")" serve
	run curl -s -H 'traceparent: 00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01' \
		"$URL/chat" -d "$say_body"
	[ "$(jq -r .result.finishReason <<<"$output")" = stop ]
	run curl -s "$URL/chat" -d "$say_body"
	[ "$(jq -r .result.finishReason <<<"$output")" = stop ]
	run curl -s -o /dev/null -w '%{http_code}' -H 'traceparent: 00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01' \
		"$URL/nosuch" -d "$say_body"
	[ "$output" = 404 ]
	# three SERVER spans (agent-serve's) and two turns' roots (agent-run's)
	wait_for 10 logged agent-serve 3
	wait_for 10 logged agent-run 2 chat
	kill "$rpid"
	run spans
	server=$(jq -c 'select(.svc == "agent-serve")' <<<"$output")
	# the first: under the caller's span, in its trace, named by its route
	first=$(jq -c 'select(.code == "200" and .parentSpanId == "00f067aa0ba902b7")' <<<"$server")
	assert_equal "$(jq -c '[.traceId, .name, .kind]' <<<"$first")" '["0af7651916cd43dd8448eb211c80319c","POST /chat",2]'
	# its turn's root span is its child, in the same trace
	assert_equal "$(jq -c --arg p "$(jq -r .spanId <<<"$first")" 'select(.svc == "agent-run" and .parentSpanId == $p) | .traceId' <<<"$output")" '"0af7651916cd43dd8448eb211c80319c"'
	# the second, with no traceparent: the root of a trace of its own,
	# its turn under it
	second=$(jq -c 'select(.code == "200" and .parentSpanId == null)' <<<"$server")
	assert_equal "$(jq -r .name <<<"$second")" "POST /chat"
	[ "$(jq -r .traceId <<<"$second")" != 0af7651916cd43dd8448eb211c80319c ]
	assert_equal "$(jq -c --arg p "$(jq -r .spanId <<<"$second")" 'select(.svc == "agent-run" and .parentSpanId == $p) | .traceId' <<<"$output")" "$(jq -c .traceId <<<"$second")"
	# the unknown route: its status, and only its method as its name
	assert_equal "$(jq -c 'select(.code == "404") | [.name, .parentSpanId, .traceId]' <<<"$server")" '["POST","00f067aa0ba902b7","0af7651916cd43dd8448eb211c80319c"]'
}

@test "serve: agent-wait --url and agent-abort --url go through the companion routes" {
	need_curl
	serve --max-snapshot-wait 300ms
	row=$(agent-run --url "$URL/chat" --detach -m slow | jq -r .output.snapshotId)
	run --separate-stderr agent-wait --url "$URL/chat" --metadata-only --timeout 1s "$row"
	[ "$status" -eq 124 ]
	[ "$stderr" = "agent-wait: snapshot '$row' is still pending" ]
	run agent-abort --url "$URL/chat" --wait "$row"
	[ "$status" -eq 0 ]
	[ "$output" = "{\"snapshotId\":\"$row\",\"status\":\"aborted\"}" ]
	run agent-wait --url "$URL/chat" --metadata-only "$row"
	[ "$status" -eq 2 ]
	[ "$(jq -c '[.snapshotId == "'"$row"'", .status, has("state")]' <<<"$output")" = '[true,"aborted",false]' ]
	run --separate-stderr agent-abort --url "$URL/chat" nope
	[ "$status" -eq 4 ]
	[ "$stderr" = "agent-abort: snapshot 'nope' not found" ]
	run --separate-stderr agent-wait --url "$URL/chat" nope
	[ "$status" -eq 4 ]
	[ "$stderr" = 'agent-wait: waitForSnapshot: snapshot "nope" not found' ]
	sid=$(agent-run --url "$URL/chat" -m hi --format json | jq -r .sessionId)
	run agent-wait --url "$URL/chat" --session "$sid" -m
	[ "$status" -eq 0 ]
	[ "$(jq -r .sessionId <<<"$output")" = "$sid" ]
}

@test "serve: agent-wait --url polls getSnapshot where a server has no waitForSnapshot" {
	python3 "$FIXTURES/serve/no-wait-server.py" port &
	local ppid=$!
	wait_for 5 test -s port
	run --separate-stderr agent-wait --verbose --url "http://127.0.0.1:$(cat port)/agent" slow-row
	kill "$ppid"
	[ "$status" -eq 0 ]
	[ "$output" = '{"snapshotId":"slow-row","status":"completed"}' ]
	[ "$stderr" = "agent-wait: http://127.0.0.1:$(cat port)/agent has no waitForSnapshot route: polling getSnapshot (every 0.5s to 5s)" ]
}

@test "serve: agent-run, agent-wait and agent-abort --url against Genkit JS 1.42's express server" {
	need_client
	[ -f "$MODS/@genkit-ai/express/package.json" ] ||
		skip "@genkit-ai/express is not installed (run scripts/genkit-client)"
	node "$FIXTURES/serve/genkit-server.cjs" "$MODS" port 2>genkit.log &
	local gpid=$!
	wait_for 20 test -s port
	local U="http://127.0.0.1:$(cat port)/echo"
	run agent-run --url "$U" -m hello -m again
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = '{"modelChunk":{"role":"model","index":0,"content":[{"text":"echo: "}]}}' ]
	[ "$(jq -c '[.output.message.content[0].text, .output.finishReason]' <<<"${lines[6]}")" = '["echo: again","stop"]' ]
	id=$(jq -r .output.snapshotId <<<"${lines[6]}")
	# no waitForSnapshot in Genkit JS: getSnapshot is polled
	run --separate-stderr agent-wait --verbose --url "$U" "$id"
	[ "$status" -eq 0 ]
	[ "$(jq -c '[.status, (.state.messages | length)]' <<<"$output")" = '["completed",4]' ]
	[ "$stderr" = "agent-wait: $U has no waitForSnapshot route: polling getSnapshot (every 0.5s to 5s)" ]
	run agent-abort --url "$U" "$id"
	[ "$output" = "{\"snapshotId\":\"$id\",\"status\":\"completed\"}" ]
	# its errors: a schema failure in the stream (express's "error:" frame), a 404 page
	run --separate-stderr agent-run --url "$U" <<<'{"message":"bad"}'
	[ "$status" -eq 101 ]
	[ "$(jq -r .error.status <<<"$output")" = INVALID_ARGUMENT ]
	[[ $stderr == "agent-run: Schema validation failed. Parse Errors:"* ]]
	run --separate-stderr agent-run --url "${U%/echo}/nope" -m hi
	[ "$status" -eq 4 ]
	[ "$output" = "{\"error\":{\"status\":\"NOT_FOUND\",\"message\":\"${U%/echo}/nope: HTTP 404: <!DOCTYPE html>\"}}" ]
	kill "$gpid"
}

@test "serve: a prompt file with url: is a remote agent, run by name" {
	need_curl
	serve
	mkdir -p mine
	printf -- '---\ndescription: the chat agent, on its server\nurl: %s/chat\n---\n' "$URL" >mine/far.prompt
	run --separate-stderr agent-run far --agents mine -m 'from afar' --format json
	[ "$status" -eq 0 ]
	[ "$(jq -r .message.content[0].text <<<"$output")" = "you said: from afar" ]
	grep -q '^agent-serve: POST /chat 200 ' serve.log
	printf -- '---\nurl: ftp://x\n---\n' >mine/bad.prompt
	run --separate-stderr agent-run bad --agents mine -m hi
	[ "$status" -eq 101 ]
	[ "$stderr" = "agent-run: mine/bad.prompt: url must be an http:// or https:// URL, or NAME/AGENT of a genkit endpoint of the models file" ]
	printf -- '---\nurl: http://x\nmodel: echo\n---\n' >mine/both.prompt
	run --separate-stderr agent-run both --agents mine -m hi
	[ "$status" -eq 101 ]
	[[ $stderr == *"both.prompt: url and model exclude each other: a remote agent's model is its server's" ]]
}

@test "serve: a url: agent's companion routes go to its server (agent-serve before agent-serve)" {
	need_curl
	serve
	local FURL
	mkdir -p mine
	printf -- '---\nurl: %s/chat\n---\n' "$URL" >mine/far.prompt
	agent-serve --listen 127.0.0.1:0 --agents mine --store "$PWD/front-store" 2>front.log &
	FPID=$!
	for _ in $(seq 100); do grep -q 'listening on' front.log && break; sleep 0.05; done
	FURL=$(sed -n 's/^agent-serve: listening on //p' front.log)/far
	# a turn through the front: the row is the back's
	id=$(curl -s "$FURL" -d "$say_body" | jq -r .result.snapshotId)
	[ -n "$id" ] && [ "$id" != null ]
	run curl -s -w ' %{http_code}' "$FURL/getSnapshot" -d '{"data":{"snapshotId":"'"$id"'","metadataOnly":true}}'
	[ "$(jq -c '[.result.snapshotId == "'"$id"'", .result.status, (.result | has("state"))]' <<<"${output% *}")" = '[true,"completed",false]' ]
	[ "${output##* }" = 200 ]
	run curl -s "$FURL/waitForSnapshot" -d '{"data":{"snapshotId":"'"$id"'"}}'
	[ "$(jq -c '[.result.status, (.result.state.messages | length)]' <<<"$output")" = '["completed",2]' ]
	# a detached turn aborted through the front, then waited on there
	slow=$(curl -s "$FURL" -d '{"data":{"message":{"role":"user","content":[{"text":"slow"}]},"detach":true}}' | jq -r .result.snapshotId)
	run curl -s "$FURL/abort" -d '{"data":{"snapshotId":"'"$slow"'"}}'
	[[ $output == "{\"result\":{\"snapshotId\":\"$slow\",\"status\":\"abort"* ]]
	run curl -s "$FURL/waitForSnapshot" -d '{"data":{"snapshotId":"'"$slow"'","metadataOnly":true}}'
	[ "$(jq -r .result.status <<<"$output")" = aborted ]
	run curl -s -w ' %{http_code}' "$FURL/getSnapshot" -d '{"data":{"snapshotId":"nope"}}'
	[ "$output" = '{"status":"NOT_FOUND","message":"getSnapshot: snapshot \"nope\" not found"} 404' ]
	kill "$FPID"
	wait "$FPID" || true
	FPID=
	# every companion reached the back; the front keeps no rows of its own
	[ "$(grep -o '^agent-serve: POST /chat/[a-zA-Z]* [0-9]*' serve.log | sort | uniq -c | awk '{ print $1, $4, $5 }' | paste -sd ' ')" = "1 /chat/abort 200 1 /chat/getSnapshot 200 1 /chat/getSnapshot 404 2 /chat/waitForSnapshot 200" ]
	[ ! -e front-store ]
}

@test "serve: --auth-command admits, refuses (401) or forbids (403); its context reaches the tools" {
	need_curl
	serve --auth-command "$FIXTURES/serve/auth-command"
	run curl -s -w ' %{http_code}' "$URL/chat" -d "$say_body"
	[ "$output" = '{"status":"UNAUTHENTICATED","message":"the auth command refused the request"} 401' ]
	run curl -s -w ' %{http_code}' -H 'Authorization: Bearer banned' "$URL/chat" -d "$say_body"
	[ "$output" = '{"status":"PERMISSION_DENIED","message":"ann'\''s sister may not"} 403' ]
	run curl -s -H 'Authorization: Bearer good' "$URL/guard" -d "$say_body"
	[ "$(jq -r .result.message.content[0].text <<<"$output")" = "I know who you are." ]
	id=$(jq -r .result.snapshotId <<<"$output")
	run curl -s -H 'Authorization: Bearer good' "$URL/guard/getSnapshot" -d "{\"data\":{\"snapshotId\":\"$id\"}}"
	[ "$(jq -c '[.result.state.messages[] | .content[] | .toolResponse.output // empty]' <<<"$output")" = '[{"user":"ann","path":"/guard"}]' ]
	! grep -q 'Bearer' serve.log
}

@test "serve: agent-run --url gives up on a silent server (AGENTKIT_HTTP_IDLE_TIMEOUT), which cancels" {
	need_curl
	serve
	run --separate-stderr env AGENTKIT_HTTP_IDLE_TIMEOUT=300ms agent-run --url "$URL/chat" -m 'hold on'
	[ "$status" -eq 1 ]
	[ "$output" = "{\"error\":{\"status\":\"UNAVAILABLE\",\"message\":\"the agent server: no data from $URL/chat for 300 ms (inactivity timeout)\"}}" ]
	wait_for 5 grep -q '^agent-serve: POST /chat 200 [0-9]*ms cancelled$' serve.log
}

@test "serve: agent-snap --url reads rows through getSnapshot, with agent-snap's exits" {
	serve --auth-token-file <(echo sesame)
	local H='Authorization: Bearer sesame'
	out=$(agent-run --url "$URL/chat" --header "$H" -m hello --format json)
	id=$(jq -r .snapshotId <<<"$out")
	sid=$(jq -r .sessionId <<<"$out")
	run agent-snap --url "$URL/chat" --header "$H" "$id"
	[ "$status" -eq 0 ]
	[ "$(jq -c '[.snapshotId == "'"$id"'", .status, (.state.messages | length)]' <<<"$output")" = '[true,"completed",2]' ]
	# the row is the one the store holds, shaped as agent-snap reads it
	[ "$output" = "$(agent-snap "$id")" ]
	run agent-snap --url "$URL/chat" --header "$H" --session "$sid" --metadata-only
	[ "$status" -eq 0 ]
	[ "$output" = "$(agent-snap --session "$sid" --metadata-only)" ]
	# unknown IDs are reported and the others still printed: exit 4
	run --separate-stderr agent-snap --url "$URL/chat" --header "$H" -m nope "$id"
	[ "$status" -eq 4 ]
	[ "$stderr" = 'agent-snap: getSnapshot: snapshot "nope" not found' ]
	[ "$(jq -r .snapshotId <<<"$output")" = "$id" ]
	run --separate-stderr agent-snap --url "$URL/chat" --header "$H" get --session other "$id"
	[ "$status" -eq 101 ]
	[ "$output" = '' ]
	[ "$stderr" = "agent-snap: snapshot '$id' does not belong to session 'other' (snapshot's session: '$sid')" ]
	run --separate-stderr agent-snap --url "$URL/chat" "$id"
	[ "$status" -eq 1 ]
	[ "$stderr" = 'agent-snap: a bearer token is required (Authorization: Bearer TOKEN)' ]
	run --separate-stderr agent-snap --url "$URL/chat" log "$sid"
	[ "$status" -eq 100 ]
	[ "${stderr%%$'\n'*}" = "agent-snap: log reads the store: with --url only rows by ID or --session are read, through the server's getSnapshot" ]
	run --separate-stderr agent-snap --url "$URL/chat" --store elsewhere "$id"
	[ "$status" -eq 100 ]
	[ "${stderr%%$'\n'*}" = "agent-snap: --url reads the server's rows, shaped by the server: not with --store" ]
	kill "$SPID"
	wait "$SPID" || true
	run --separate-stderr agent-snap --url "$URL/chat" "$id"
	[ "$status" -eq 1 ]
	[[ $stderr == "agent-snap: the agent server: $URL/chat/getSnapshot: "*"onnect"* ]]
}

@test "serve: agent-snap --url against Genkit JS 1.42's express server" {
	need_client
	[ -f "$MODS/@genkit-ai/express/package.json" ] ||
		skip "@genkit-ai/express is not installed (run scripts/genkit-client)"
	node "$FIXTURES/serve/genkit-server.cjs" "$MODS" port 2>genkit.log &
	local gpid=$!
	wait_for 20 test -s port
	local U="http://127.0.0.1:$(cat port)/echo"
	out=$(agent-run --url "$U" -m hello -m again --format json)
	id=$(jq -r .snapshotId <<<"$out")
	sid=$(jq -r .sessionId <<<"$out")
	run agent-snap --url "$U" "$id"
	[ "$status" -eq 0 ]
	[ "$(jq -c '[.snapshotId == "'"$id"'", .sessionId == "'"$sid"'", .status, .finishReason, [.state.messages[].content[0].text]]' <<<"$output")" = '[true,true,"completed","stop",["hello","echo: hello","again","echo: again"]]' ]
	# Genkit JS has no metadataOnly: the state is left out here
	run agent-snap --url "$U" --session "$sid" --metadata-only
	[ "$status" -eq 0 ]
	[ "$(jq -c '[.snapshotId == "'"$id"'", .status, has("state")]' <<<"$output")" = '[true,"completed",false]' ]
	run --separate-stderr agent-snap --url "$U" nope
	[ "$status" -eq 4 ]
	[ "$stderr" = "agent-snap: Snapshot 'nope' not found for agent 'echo'." ]
	kill "$gpid"
}

@test "serve: resume.metadata goes through the wire to the restarted tool and the tool message" {
	ln -s "$FIXTURES/tools" tools
	serve
	run agent-run --url "$URL/keeper" -m 'ask me'
	[ "$status" -eq 6 ]
	snap=$(tail -n 1 <<<"$output" | jq -r .output.snapshotId)
	# the interrupted request as it stands (its ref is the server's)
	local req
	req='{"toolRequest":'$(tail -n 1 <<<"$output" | jq -c .output.message.content[0].toolRequest)
	run agent-run --url "$URL/keeper" --snapshot "$snap" \
		<<<'{"resume":{"restart":['"$req"'}],"metadata":{"by":"ann"}}}'
	[ "$status" -eq 0 ]
	[ "$(head -n 1 <<<"$output" | jq -c .modelChunk.content[0].toolResponse.output)" = '{"answer":{"by":"ann"}}' ]
	after=$(tail -n 1 <<<"$output" | jq -r .output.snapshotId)
	[ "$(agent-snap "$after" | jq -c '.state.messages[2] | [.role, .metadata]')" = '["tool",{"resumed":{"by":"ann"}}]' ]
	# an entry's own resumed metadata wins for its tool
	run agent-run --url "$URL/keeper" --snapshot "$snap" \
		<<<'{"resume":{"restart":['"$req"',"metadata":{"resumed":"mine"}}],"metadata":{"by":"ann"}}}'
	[ "$status" -eq 0 ]
	[ "$(head -n 1 <<<"$output" | jq -c .modelChunk.content[0].toolResponse.output)" = '{"answer":"mine"}' ]
	run --separate-stderr agent-run --url "$URL/keeper" --snapshot "$snap" <<<'{"resume":{"restart":['"$req"'}],"metadata":5}}'
	[ "$status" -eq 101 ]
	[ "$(jq -c .output.error <<<"$output")" = '{"status":"INVALID_ARGUMENT","message":"invalid AgentInput: '\''resume.metadata'\'' must be an object (at <stdin>:1)"}' ]
}

@test "serve: --listen unix:PATH serves a Unix socket only its owner may use, and removes it" {
	need_curl
	agent-serve --listen "unix:$PWD/a.sock" --agents "$AGENTS" 2>serve.log &
	SPID=$!
	wait_for 5 grep -q 'listening on' serve.log
	[ "$(cat serve.log)" = "agent-serve: listening on unix:$PWD/a.sock" ]
	[ "$(stat -c %A a.sock)" = srw------- ]
	run curl -s --unix-socket a.sock http://agents/chat -d "$say_body"
	[ "$(jq -r .result.message.content[0].text <<<"$output")" = "you said: hi" ]
	# a client gone mid-stream cancels the turn here too
	run curl -sN --max-time 1.2 -H 'Accept: text/event-stream' --unix-socket a.sock http://agents/chat \
		-d '{"data":{"message":{"role":"user","content":[{"text":"slow"}]}}}'
	[ "$status" -eq 28 ]
	wait_for 5 grep -q '^agent-serve: POST /chat 200 [0-9]*ms.* cancelled$' serve.log
	[ -z "$(turn_children)" ]
	# a second server is refused while this one listens
	run --separate-stderr agent-serve --listen "unix:$PWD/a.sock"
	[ "$status" -eq 111 ]
	[ "$stderr" = "agent-serve: cannot listen on unix:$PWD/a.sock: another server listens there" ]
	kill -TERM "$SPID"
	wait "$SPID"
	SPID=
	[ ! -e a.sock ]
	# a socket file left behind by a server gone is taken over; another file is not
	python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$PWD/stale.sock"
	serve_at() {
		agent-serve --listen "unix:$PWD/$1" --agents "$AGENTS" 2>serve.log &
		SPID=$!
		wait_for 5 grep -q 'listening on' serve.log
	}
	serve_at stale.sock
	run curl -s --unix-socket stale.sock http://agents/
	[ "$(jq -r '.agents | length > 0' <<<"$output")" = true ]
	kill -TERM "$SPID"
	wait "$SPID"
	SPID=
	echo keep >plain
	run --separate-stderr agent-serve --listen "unix:$PWD/plain"
	[ "$status" -eq 100 ]
	[ "${stderr%%$'\n'*}" = "agent-serve: --listen: cannot listen on unix:$PWD/plain: it exists and is not a socket" ]
	[ "$(cat plain)" = keep ]
	run --separate-stderr agent-serve --listen unix:
	[ "$status" -eq 100 ]
	[ "${stderr%%$'\n'*}" = "agent-serve: --listen: 'unix:' names no socket path" ]
}

@test "serve: systemd socket activation: the socket passed (TCP or Unix) is served, under the auth rule" {
	need_curl
	command -v systemd-socket-activate >/dev/null || skip "systemd-socket-activate is not installed"
	# the variables are the server's alone: the auth command (a child) shows what children see
	systemd-socket-activate -l "$PWD/act.sock" agent-serve --agents "$AGENTS" \
		--auth-command 'env >"$PWD/child.env"; echo "{}"' 2>serve.log &
	SPID=$!
	wait_for 5 test -S act.sock
	# systemd-socket-activate starts the server at the first connection
	run curl -s --unix-socket act.sock http://agents/chat -d "$say_body"
	[ "$(jq -r .result.message.content[0].text <<<"$output")" = "you said: hi" ]
	grep -q "^agent-serve: listening on unix:$PWD/act.sock$" serve.log
	! grep -q '^LISTEN_' child.env
	kill -TERM "$SPID"
	wait "$SPID"
	SPID=
	# TCP: a loopback socket goes without auth, another needs it
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	systemd-socket-activate -l "127.0.0.1:$port" agent-serve --agents "$AGENTS" 2>serve.log &
	SPID=$!
	wait_for 5 grep -q 'Listening on' serve.log
	run curl -s "http://127.0.0.1:$port/chat" -d "$say_body"
	[ "$(jq -r .result.message.content[0].text <<<"$output")" = "you said: hi" ]
	grep -q "^agent-serve: listening on http://127.0.0.1:$port$" serve.log
	kill -TERM "$SPID"
	wait "$SPID"
	SPID=
	run python3 - "$port" "$AGENTKIT_BIN/agent-serve" <<'PY'
import os, socket, sys
port, prog = int(sys.argv[1]), sys.argv[2]
def activate(*socks, args=()):
    pid = os.fork()
    if pid == 0:
        for i, s in enumerate(socks):
            os.dup2(s.fileno(), 3 + i)
        os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS=str(len(socks)))
        os.execv(prog, [prog, *args])
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
s = socket.socket(); s.bind(("0.0.0.0", port)); s.listen()
print(activate(s))
t = socket.socket(); t.bind(("127.0.0.1", 0)); t.listen()
print(activate(s, t))
print(activate(t, args=("--listen", "127.0.0.1:0")))
u = socket.socket(type=socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
print(activate(u))
PY
	[ "$output" = "agent-serve: the socket systemd passed (http://0.0.0.0:$port) is not a loopback address: give --auth-token-file, or --insecure-no-auth to serve anyone who reaches it
try 'agent-serve --help'
100
agent-serve: systemd passed 2 sockets (LISTEN_FDS): agent-serve listens on one
try 'agent-serve --help'
100
agent-serve: --listen and a socket passed by systemd (LISTEN_FDS) exclude each other
try 'agent-serve --help'
100
agent-serve: the descriptor systemd passed (fd 3) is not a listening stream socket (Accept=no, ListenStream=)
try 'agent-serve --help'
100" ]
}

@test "serve: a genkit endpoint of the models file: --url NAME/AGENT and url: send its key and headers" {
	need_curl
	echo sesame >tokens
	serve --auth-token-file tokens --auth-command 'cat >>"$PWD/requests"; echo >>"$PWD/requests"; echo "{}"'
	printf '{"endpoints": {"team": {"dialect": "genkit", "baseUrl": "%s/", "keyVariable": "TEAM_TOKEN", "headers": {"X-Team": "$TEAM_NAME"}}}}\n' "$URL" >models.json
	export AGENTKIT_MODELS_FILE=$PWD/models.json TEAM_NAME=ops
	TEAM_TOKEN=sesame run --separate-stderr agent-run --url team/chat -m hi --format json
	[ "$status" -eq 0 ]
	[ "$(jq -r .message.content[0].text <<<"$output")" = "you said: hi" ]
	id=$(jq -r .snapshotId <<<"$output")
	[ "$(jq -c '[.path, .headers.authorization, .headers["x-team"]]' requests)" = '["/chat","Bearer sesame","ops"]' ]
	# the companions resolve the same name
	TEAM_TOKEN=sesame run agent-snap --url team/chat --metadata-only "$id"
	[ "$status" -eq 0 ]
	[ "$(jq -r .status <<<"$output")" = completed ]
	TEAM_TOKEN=sesame run agent-wait --url team/chat --metadata-only "$id"
	[ "$status" -eq 0 ]
	TEAM_TOKEN=sesame run agent-abort --url team/chat "$id"
	[ "$output" = "{\"snapshotId\":\"$id\",\"status\":\"completed\"}" ]
	[ "$(jq -r .path requests | sort | uniq -c | awk '{ print $1, $2 }' | paste -sd ' ')" = "1 /chat 1 /chat/abort 1 /chat/getSnapshot 1 /chat/waitForSnapshot" ]
	# url: NAME/AGENT in a prompt file
	mkdir -p mine
	printf -- '---\nurl: team/chat\n---\n' >mine/far.prompt
	TEAM_TOKEN=sesame run --separate-stderr agent-run far --agents mine -m 'from afar' --format json
	[ "$status" -eq 0 ]
	[ "$(jq -r .message.content[0].text <<<"$output")" = "you said: from afar" ]
	# the key is the endpoint's: unset, nothing is sent (exit 5, as a model's)
	run --separate-stderr agent-run --url team/chat -m hi
	[ "$status" -eq 5 ]
	[ "$stderr" = "agent-run: team: no API key: set TEAM_TOKEN (models file $PWD/models.json)" ]
	run --separate-stderr agent-run --url other/chat -m hi
	[ "$status" -eq 100 ]
	[ "$stderr" = "agent-run: 'other/chat' is neither an http:// or https:// URL nor NAME/AGENT of a genkit endpoint of the models file ($PWD/models.json)" ]
	TEAM_TOKEN=sesame run --separate-stderr agent-run --model team/x -m hi
	[ "$status" -eq 100 ]
	[ "$stderr" = "agent-run: team: a genkit endpoint serves agents, not models: run them with --url team/AGENT or url: team/AGENT (models file $PWD/models.json)" ]
	# --list-models lists it as any named endpoint, asking nothing of it
	TEAM_TOKEN=sesame run --separate-stderr agent-run --list-models
	[ "$status" -eq 0 ]
	[ "$(jq -c 'select(.dialect)' <<<"$output")" = "{\"provider\":\"team\",\"dialect\":\"genkit\",\"keyVariables\":[\"TEAM_TOKEN\"],\"keyFrom\":\"TEAM_TOKEN\",\"baseUrl\":\"$URL/\",\"headers\":[\"X-Team\"],\"query\":[],\"modelsFile\":\"$PWD/models.json\",\"agents\":\"team/AGENT\"}" ]
	run --separate-stderr agent-run --list-models --format text
	[ "$status" -eq 0 ]
	[ "$(grep -A1 '^team' <<<"$output")" = "team             TEAM_TOKEN: not set, $URL/
  agents: --url team/AGENT, url: team/AGENT" ]
	# the token never reaches a message or the log
	! grep -q sesame serve.log
	[ "$(jq -s length requests)" -eq 5 ]
}

@test "serve: a turn's process is reaped after its answer: no zombie is left" {
	need_curl
	# The answer goes out once agent-run's final line is read; its process
	# is reaped after that, off the answer's path (docs/serve.md, "Each
	# turn in its own process").  A custom agent whose handler takes its
	# time to end makes each process live on a second after its answer.
	mkdir agents
	cat >linger.sh <<-'SH'
	#!/bin/sh
	while IFS= read -r line; do
		case $line in '{"turn"'*)
			printf '%s\n' '{"message":{"role":"model","content":[{"text":"ok"}]}}' \
				'{"done":{"finishReason":"stop"}}' ;;
		esac
	done
	sleep 1
	SH
	chmod +x linger.sh
	printf -- '---\nexec: %s/linger.sh\n---\n' "$PWD" >agents/linger.prompt
	agent-serve --listen 127.0.0.1:0 --agents agents --max-concurrent 2 2>serve.log &
	SPID=$!
	for _ in $(seq 100); do grep -q 'listening on' serve.log && break; sleep 0.05; done
	URL=$(sed -n 's/^agent-serve: listening on //p' serve.log)
	for accept in application/json text/event-stream; do
		run curl -sf -H "Accept: $accept" "$URL/linger" -d "$say_body"
		[ "$status" -eq 0 ]
		[[ "$output" == *'"finishReason":"stop"'* ]]
	done
	# three at once, past --max-concurrent 2: one is 503, two answer
	pids=
	for i in 1 2 3; do
		curl -s -o /dev/null -w '%{http_code}\n' "$URL/linger" -d "$say_body" >"code.$i" &
		pids="$pids $!"
	done
	wait $pids
	[ "$(cat code.* | sort | tr '\n' ' ')" = "200 200 503 " ]
	# every turn's process reaped: none left, not even a zombie
	for _ in $(seq 100); do [ -z "$(turn_children)" ] && break; sleep 0.05; done
	[ -z "$(turn_children)" ]
	grep -c ' 200 ' serve.log | grep -qx 4
}
