#!/usr/bin/env bats
# agent-run --trace: OpenTelemetry export (OTLP/HTTP JSON and console),
# Genkit's agent spans (runtime-semantics §9.1 items 4, 27, 28), TRACEPARENT
# in and out, and an export that never changes stdout or the exit status
# (docs/tracing.md).  The collector is scripts/otlp-receiver on loopback.

load test_helper

setup() {
	common_setup
	unset OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT OTEL_SDK_DISABLED
	unset OTEL_EXPORTER_OTLP_HEADERS OTEL_EXPORTER_OTLP_TRACES_HEADERS OTEL_TRACES_EXPORTER
	unset OTEL_SERVICE_NAME OTEL_RESOURCE_ATTRIBUTES OTEL_EXPORTER_OTLP_PROTOCOL
	unset TRACEPARENT TRACESTATE AGENTKIT_TRACE http_proxy HTTP_PROXY ALL_PROXY all_proxy
	unset OTEL_EXPORTER_OTLP_TRACES_PROTOCOL OTEL_EXPORTER_OTLP_COMPRESSION
	unset OTEL_EXPORTER_OTLP_TRACES_COMPRESSION OTEL_TRACES_SAMPLER OTEL_TRACES_SAMPLER_ARG
	unset OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
	# The receiver's log holds JSON bodies as jq reads them; the protobuf
	# tests below ask for http/protobuf (the default) themselves.
	export OTEL_EXPORTER_OTLP_PROTOCOL=http/json
	TOOLS="$FIXTURES/tools"
	RECV_PID=
}

teardown() {
	[ -z "$RECV_PID" ] || kill "$RECV_PID" 2>/dev/null || true
}

# recv_start [ANSWERS [DELAY]]: the receiver on a free port ($PORT), its log
# in $LOG; with DELAY, every answer comes that many seconds late.
recv_start() {
	LOG="$BATS_TEST_TMPDIR/otlp.ndjson"
	: >"$LOG"
	"$TOP/scripts/otlp-receiver" --port-file "$BATS_TEST_TMPDIR/port" --log "$LOG" \
		--answers "${1:-200}" --delay "${2:-0}" --idle 20 3>&- &
	RECV_PID=$!
	for _ in $(seq 1 200); do
		[ -s "$BATS_TEST_TMPDIR/port" ] && break
		sleep 0.025
	done
	PORT=$(cat "$BATS_TEST_TMPDIR/port")
}

# Every span the log's requests (or a console file) carry, one per line.
spans() { jq -c '(.body // .) | .resourceSpans[].scopeSpans[].spans[]' "$1"; }
# The attribute KEY of span NAME's value, as its JSON (or null).
attr() {
	spans "$1" | jq -c --arg n "$2" --arg k "$3" \
		'select(.name == $n) | [.attributes[] | select(.key == $k) | .value][0]'
}

# A detached run of agent "inline" traced to t.ndjson: wait for both its
# invocation spans (the worker writes its last line before it finalizes
# the row), write every span to ./all, check they are one trace and the
# worker's span a child of the launcher's, and set $launcher and $worker.
launcher_and_worker() {
	for _ in $(seq 1 100); do
		[ "$(spans t.ndjson | jq -r 'select(.name == "inline") | .name' | wc -l)" -eq 2 ] && break
		sleep 0.05
	done
	spans t.ndjson >all
	[ "$(jq -r .traceId all | sort -u | wc -l)" -eq 1 ]
	launcher=$(jq -c 'select(.name == "inline" and (has("parentSpanId") | not))' all)
	worker=$(jq -c 'select(.name == "inline" and has("parentSpanId"))' all)
	[ "$(jq -r .parentSpanId <<<"$worker")" = "$(jq -r .spanId <<<"$launcher")" ]
}

@test "--trace-file: one OTLP request per line, Genkit's spans, stdout as without tracing" {
	run -0 --separate-stderr agent-run --model echo --system hi -m one -m two
	plain=$(printf '%s\n' "$output" | jq -c 'del(.. | .snapshotId?, .sessionId?)')
	run -0 --separate-stderr agent-run --model echo --system hi --trace-file t.ndjson -m one -m two
	[ "$stderr" = "" ]
	[ "$(printf '%s\n' "$output" | jq -c 'del(.. | .snapshotId?, .sessionId?)')" = "$plain" ]
	# Turn 1's spans go out as turn 2 begins; turn 2's with the root's at exit.
	[ "$(wc -l <t.ndjson)" -eq 2 ]
	[ "$(head -n 1 t.ndjson | spans /dev/stdin | jq -r .name | tr '\n' ' ')" = "runTurn-1 generate echo " ]
	[ "$(spans t.ndjson | jq -r .name | tr '\n' ' ')" = "runTurn-1 generate echo inline runTurn-2 generate echo " ]
	[ "$(attr t.ndjson inline genkit:path)" = '{"stringValue":"/{inline,t:action,s:agent}"}' ]
	[ "$(attr t.ndjson inline genkit:type)" = '{"stringValue":"action"}' ]
	[ "$(attr t.ndjson inline genkit:metadata:subtype)" = '{"stringValue":"agent"}' ]
	[ "$(attr t.ndjson inline genkit:isRoot)" = '{"boolValue":true}' ]
	sid=$(printf '%s\n' "$output" | tail -n 1 | jq -r .output.sessionId)
	[ "$(attr t.ndjson inline genkit:metadata:agent:sessionId)" = "{\"stringValue\":\"$sid\"}" ]
	# Turn spans: flowStep, no subtype, no session (§9.1 item 4), the row's ID (item 28).
	[ "$(attr t.ndjson runTurn-1 genkit:type)" = '{"stringValue":"flowStep"}' ]
	[ "$(attr t.ndjson runTurn-1 genkit:metadata:subtype)" = null ]
	[ "$(attr t.ndjson runTurn-1 genkit:metadata:agent:sessionId)" = null ]
	[ "$(attr t.ndjson runTurn-2 genkit:path)" = '{"stringValue":"/{inline,t:action,s:agent}/{runTurn-2,t:flowStep}"}' ]
	ids=$(printf '%s\n' "$output" | jq -r 'select(.turnEnd) | .turnEnd.snapshotId' | tr '\n' ' ')
	[ "$(attr t.ndjson runTurn-1 genkit:metadata:agent:snapshotId | jq -r .stringValue) $(attr t.ndjson runTurn-2 genkit:metadata:agent:snapshotId | jq -r .stringValue) " = "$ids" ]
	[ "$(attr t.ndjson echo genkit:path | tail -n 1)" = '{"stringValue":"/{inline,t:action,s:agent}/{runTurn-2,t:flowStep}/{generate,t:util}/{echo,t:action,s:model}"}' ]
	[ "$(attr t.ndjson echo gen_ai.response.finish_reasons | tail -n 1)" = '{"arrayValue":{"values":[{"stringValue":"stop"}]}}' ]
}

@test "a turn's spans are exported while the run waits for the next input" {
	mkfifo in
	agent-run --model echo --system hi --trace-file t.ndjson <in >out 2>err 3>&- &
	pid=$!
	exec 4>in
	printf '%s\n' '{"message":{"role":"user","content":[{"text":"one"}]}}' >&4
	for _ in $(seq 1 200); do
		[ -s t.ndjson ] && break
		sleep 0.05
	done
	# Turn 1 is out, the root span (still open) is not.
	[ "$(spans t.ndjson | jq -r .name | tr '\n' ' ')" = "runTurn-1 generate echo " ]
	printf '%s\n' '{"message":{"role":"user","content":[{"text":"two"}]}}' >&4
	exec 4>&-
	wait "$pid"
	[ "$(wc -l <t.ndjson)" -eq 2 ]
	[ "$(spans t.ndjson | jq -r .name | tr '\n' ' ')" = "runTurn-1 generate echo inline runTurn-2 generate echo " ]
	[ "$(jq -r 'select(.turnEnd) | .turnEnd.snapshotId' out | wc -l)" -eq 2 ]
	[ ! -s err ]
}

@test "hex IDs, nanosecond strings, integer enums, one trace and its parent links" {
	run -0 --separate-stderr agent-run --model echo --system hi --trace-file t.ndjson -m one
	spans t.ndjson >all
	[ "$(jq -r .traceId all | sort -u | wc -l)" -eq 1 ]
	jq -e -s 'all(.[]; (.traceId | test("^[0-9a-f]{32}$")) and (.spanId | test("^[0-9a-f]{16}$"))
		and (.startTimeUnixNano | test("^[0-9]{19}$")) and (.endTimeUnixNano | test("^[0-9]{19}$"))
		and (.kind | type == "number") and (.status.code | type == "number")
		and (.endTimeUnixNano | tonumber) >= (.startTimeUnixNano | tonumber))' all
	id() { jq -r --arg n "$1" 'select(.name == $n) | .spanId' all; }
	par() { jq -r --arg n "$1" 'select(.name == $n) | .parentSpanId // "none"' all; }
	[ "$(par inline)" = none ]
	[ "$(par runTurn-1)" = "$(id inline)" ]
	[ "$(par generate)" = "$(id runTurn-1)" ]
	[ "$(par echo)" = "$(id generate)" ]
	# The model call is a CLIENT span (3); the rest INTERNAL (1); all unset (0).
	[ "$(jq -c '[.name, .kind, .status.code, .flags]' all | tr -d '\n')" = '["inline",1,0,257]["runTurn-1",1,0,257]["generate",1,0,257]["echo",3,0,257]' ]
	r=$(jq -c '.resourceSpans[0].resource.attributes | from_entries' t.ndjson 2>/dev/null || true)
	[ "$(head -n 1 t.ndjson | jq -c '[.resourceSpans[0].resource.attributes[] | {(.key): .value.stringValue}] | add | {"service.name", "service.version"}')" = '{"service.name":"agent-run","service.version":"0.1.0"}' ]
	[ "$(head -n 1 t.ndjson | jq -c '.resourceSpans[0].scopeSpans[0].scope')" = '{"name":"agentkit","version":"0.1.0"}' ]
}

@test "TRACEPARENT makes the run a child of the caller's span; a tool sees its own span's" {
	export TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01
	mkdir -p tools
	cat >tools/tp <<-'EOF'
	#!/bin/sh
	cat >/dev/null
	printf '{"output":"%s"}\n' "$TRACEPARENT"
	EOF
	chmod +x tools/tp
	echo '{"description": "Reports its TRACEPARENT."}' >tools/tp.json
	printf '%s\n' '{"toolRequests":[{"name":"tp","ref":"1","input":{}}]}' '{"text":"done"}' >model.ndjson
	run -0 --separate-stderr agent-run --no-store --model script/model.ndjson --tool tp --trace-file t.ndjson -m hi
	spans t.ndjson >all
	[ "$(jq -r .traceId all | sort -u)" = 0af7651916cd43dd8448eb211c80319c ]
	root=$(jq -c 'select(.name == "inline")' all)
	[ "$(jq -r .parentSpanId <<<"$root")" = 00f067aa0ba902b7 ]
	[ "$(jq -r .flags <<<"$root")" = 769 ]
	tool=$(jq -c 'select(.name == "tp")' all)
	seen=$(printf '%s\n' "$output" | tail -n 1 | jq -r '.output.state.messages[2].content[0].toolResponse.output')
	[ "$seen" = "00-0af7651916cd43dd8448eb211c80319c-$(jq -r .spanId <<<"$tool")-01" ]
	[ "$(jq -r .parentSpanId <<<"$tool")" = "$(jq -r 'select(.name == "generate") | .spanId' all | head -n 1)" ]
	[ "$(attr t.ndjson tp genkit:path)" = '{"stringValue":"/{inline,t:action,s:agent}/{runTurn-1,t:flowStep}/{generate,t:util}/{tp,t:action,s:tool}"}' ]
	[ "$(attr t.ndjson tp agentkit.tool.outcome)" = '{"stringValue":"ok"}' ]
	# Client-managed: no row, no snapshot attribute (§9.1 item 27).
	[ "$(attr t.ndjson runTurn-1 genkit:metadata:agent:snapshotId)" = null ]
	# An invalid TRACEPARENT starts a new trace, with one note.
	TRACEPARENT=bogus run -0 --separate-stderr agent-run --no-store --model echo --system hi --trace-file u.ndjson -m hi
	[ "$stderr" = "agent-run: TRACEPARENT 'bogus' is not a W3C traceparent: a new trace is started" ]
	[ "$(spans u.ndjson | jq -r 'select(.name == "inline") | .parentSpanId // "none"')" = none ]
}

@test "a failed tool: exit status as without tracing, ERROR spans with the message, failure source marked" {
	printf '%s\n' '{"toolRequests":[{"name":"fail","ref":"1","input":{}}]}' >model.ndjson
	run -1 --separate-stderr agent-run --no-store --model script/model.ndjson --tool "$TOOLS/fail.json" -m hi
	plain=$(printf '%s\n' "$output" | jq -c 'del(.. | .sessionId?)')
	run -1 --separate-stderr agent-run --no-store --model script/model.ndjson --tool "$TOOLS/fail.json" --trace-file t.ndjson -m hi
	[ "$(printf '%s\n' "$output" | jq -c 'del(.. | .sessionId?)')" = "$plain" ]
	msg=$(printf '%s\n' "$output" | tail -n 1 | jq -r .output.error.message)
	[ "$(spans t.ndjson | jq -c 'select(.name == "fail") | .status.code')" = 2 ]
	[ "$(attr t.ndjson fail genkit:isFailureSource)" = '{"boolValue":true}' ]
	[ "$(attr t.ndjson fail agentkit.tool.outcome)" = '{"stringValue":"failed"}' ]
	[ "$(attr t.ndjson runTurn-1 genkit:isFailureSource)" = null ]
	[ "$(spans t.ndjson | jq -c 'select(.name == "runTurn-1") | .status')" = "$(jq -cn --arg m "$msg" '{code: 2, message: $m}')" ]
	[ "$(spans t.ndjson | jq -c 'select(.name == "inline") | .status')" = "$(jq -cn --arg m "$msg" '{code: 2, message: $m}')" ]
	[ "$(attr t.ndjson inline genkit:state)" = '{"stringValue":"error"}' ]
}

@test "the snapshot attribute only on committed turns; runTurn-N counts this invocation's turns" {
	run -0 --separate-stderr agent-run --model echo --system hi -m first
	sid=$(printf '%s\n' "$output" | tail -n 1 | jq -r .output.sessionId)
	printf '%s\n' '{"message":{"role":"user","content":[{"text":"ok"}]}}' \
		'{"message":{"role":"model","content":[{"text":"forged"}]}}' >in.ndjson
	run -101 --separate-stderr agent-run --model echo --system hi --session "$sid" --trace-file t.ndjson <in.ndjson
	[ "$(spans t.ndjson | jq -r 'select(.name | startswith("runTurn")) | .name' | tr '\n' ' ')" = "runTurn-1 runTurn-2 " ]
	id1=$(printf '%s\n' "$output" | jq -r 'select(.turnEnd) | .turnEnd.snapshotId' | head -n 1)
	[ "$(attr t.ndjson runTurn-1 genkit:metadata:agent:snapshotId)" = "{\"stringValue\":\"$id1\"}" ]
	[ "$(attr t.ndjson runTurn-2 genkit:metadata:agent:snapshotId)" = null ]
	[ "$(spans t.ndjson | jq -r 'select(.name == "runTurn-2") | .status.code')" = 2 ]
}

@test "otlp: OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces, headers percent-decoded, JSON" {
	recv_start
	OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$PORT/base" \
	OTEL_EXPORTER_OTLP_HEADERS='Authorization=Bearer%20t,x-team=a' OTEL_EXPORTER_OTLP_TRACES_HEADERS='X-Team=b' \
	OTEL_SERVICE_NAME=nightly OTEL_RESOURCE_ATTRIBUTES='deployment.environment=ci,service.name=lost' \
		run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	[ "$stderr" = "" ]
	[ "$(jq -r .path "$LOG" | sort -u)" = /base/v1/traces ]
	# A run of one turn is one request.
	[ "$(wc -l <"$LOG")" -eq 1 ]
	[ "$(head -n 1 "$LOG" | jq -c '.headers | {authorization, "x-team", "content-type"}')" = '{"authorization":"Bearer t","x-team":"b","content-type":"application/json"}' ]
	[ "$(head -n 1 "$LOG" | jq -c '[.body.resourceSpans[0].resource.attributes[] | {(.key): .value.stringValue}] | add | {"service.name", "deployment.environment"}')" = '{"service.name":"nightly","deployment.environment":"ci"}' ]
	[ "$(spans "$LOG" | jq -r .name | tr '\n' ' ')" = "inline runTurn-1 generate echo " ]
}

@test "otlp: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given; AGENTKIT_TRACE=1; OTEL_SDK_DISABLED=true wins" {
	recv_start
	AGENTKIT_TRACE=1 OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:$PORT/custom/path" \
	OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:1" \
		run -0 --separate-stderr agent-run --model echo --system hi -m one
	[ "$stderr" = "" ]
	[ "$(jq -r .path "$LOG" | sort -u)" = /custom/path ]
	: >"$LOG"
	OTEL_SDK_DISABLED=true OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:$PORT/x" \
		run -0 --separate-stderr agent-run --trace --trace-file f.ndjson --model echo --system hi -m one
	[ "$stderr" = "" ]
	[ ! -e f.ndjson ]
	OTEL_TRACES_EXPORTER=none OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:$PORT/x" \
		run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	# Without --trace or AGENTKIT_TRACE, the OTEL variables alone export nothing.
	OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:$PORT/x" \
		run -0 --separate-stderr agent-run --model echo --system hi -m one
	[ ! -s "$LOG" ]
}

@test "otlp: a 503 with Retry-After is retried after the wait; a 400 is not, and export stops" {
	recv_start "503:1,200"
	# The retry comes after the exit's 1s wait: a longer wait lets it in.
	AGENTKIT_TRACE_EXIT_TIMEOUT=10s OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$PORT" \
		run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	[ "$stderr" = "" ]
	[ "$(wc -l <"$LOG")" -eq 2 ]
	[ "$(sed -n 1p "$LOG" | jq -c .body)" = "$(sed -n 2p "$LOG" | jq -c .body)" ]
	kill "$RECV_PID"
	rm -f "$BATS_TEST_TMPDIR/port"
	recv_start 400
	run -0 --separate-stderr agent-run --model echo --system hi -m one -m two
	plain=$(printf '%s\n' "$output" | wc -l)
	OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$PORT" run -0 --separate-stderr agent-run --trace --model echo --system hi -m one -m two
	[ "$(printf '%s\n' "$output" | wc -l)" -eq "$plain" ]
	[ "$(wc -l <"$LOG")" -eq 1 ]
	[ "$stderr" = "agent-run: trace export failed: http://127.0.0.1:$PORT/v1/traces: HTTP 400: {\"code\": 400, \"message\": \"receiver says 400\"}" ]
}

# ms: milliseconds on the clock, for bounds far from what they bound.
ms() { echo $(($(date +%s%N) / 1000000)); }

# worker_logged ID TEXT: the detached run ID has ended, and its worker's
# log has TEXT (the worker writes its last lines just after the row).
worker_logged() {
	run -0 timeout 20 agent-wait "$1"
	for _ in $(seq 1 100); do
		[[ $(agent-snap worker-log "$1") == *"$2"* ]] && break
		sleep 0.05
	done
}

@test "otlp: turns never wait for the collector; a slow one costs the run the exit bound once" {
	# A collector that answers at once gets every span of every turn,
	# one request per turn.
	recv_start
	export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$PORT"
	run -0 --separate-stderr agent-run --trace --model echo --system hi -m one -m two -m three
	[ "$stderr" = "" ]
	plain=$(printf '%s\n' "$output" | jq -c 'del(.. | .snapshotId?, .sessionId?)')
	[ "$(wc -l <"$LOG")" -eq 3 ]
	[ "$(spans "$LOG" | jq -r .name | tr '\n' ' ')" = "runTurn-1 generate echo runTurn-2 generate echo inline runTurn-3 generate echo " ]
	kill "$RECV_PID"
	rm -f "$BATS_TEST_TMPDIR/port"
	# One that takes 8 s to answer: three turns and the exit's 1s wait,
	# not 8 s a turn; the spans it never answered for are counted.
	recv_start 200 8
	export OTEL_EXPORTER_OTLP_ENDPOINT="http://u:secret@127.0.0.1:$PORT"
	t0=$(ms)
	run -0 --separate-stderr agent-run --trace --model echo --system hi -m one -m two -m three
	took=$(($(ms) - t0))
	[ "$took" -lt 4000 ]
	[ "$(printf '%s\n' "$output" | jq -c 'del(.. | .snapshotId?, .sessionId?)')" = "$plain" ]
	[ "$stderr" = "agent-run: trace: 10 spans dropped: the collector at http://***@127.0.0.1:$PORT/v1/traces did not answer within 1s" ]
	# AGENTKIT_TRACE_EXIT_TIMEOUT sets the wait; 0 waits for nothing.
	t0=$(ms)
	AGENTKIT_TRACE_EXIT_TIMEOUT=0 run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	[ "$(($(ms) - t0))" -lt 3000 ]
	[ "$stderr" = "agent-run: trace: 4 spans dropped: the collector at http://***@127.0.0.1:$PORT/v1/traces did not answer within 0s" ]
	AGENTKIT_TRACE_EXIT_TIMEOUT=soon run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	[ "${stderr%%$'\n'*}" = "agent-run: AGENTKIT_TRACE_EXIT_TIMEOUT: invalid duration 'soon': 1s used" ]
}

@test "otlp: a slow collector delays neither a detached run's launcher nor its worker past the bound" {
	recv_start 200 8
	export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$PORT"
	t0=$(ms)
	run -0 --separate-stderr agent-run --trace --model echo --system hi --detach -m one -m two
	[ "$(($(ms) - t0))" -lt 4000 ]
	[ "$stderr" = "agent-run: trace: 1 span dropped: the collector at http://127.0.0.1:$PORT/v1/traces did not answer within 1s" ]
	id=$(printf '%s\n' "$output" | jq -r .output.snapshotId)
	worker_logged "$id" "spans dropped"
	# The worker: its invocation span and two turns of three spans.
	[ "$(agent-snap worker-log "$id" | grep -c "^[^ ]* agent-run\[[0-9]*\]: trace: 7 spans dropped: the collector at http://127.0.0.1:$PORT/v1/traces did not answer within 1s\$")" -eq 1 ]
	[ "$(($(ms) - t0))" -lt 8000 ]
}

@test "otlp: with the receiver down the run is unchanged but for one line on stderr" {
	printf '%s\n' '{"toolRequests":[{"name":"fail","ref":"1","input":{}}]}' >model.ndjson
	run -1 --separate-stderr agent-run --no-store --model script/model.ndjson --tool "$TOOLS/fail.json" -m hi
	plain=$(printf '%s\n' "$output" | jq -c 'del(.. | .sessionId?)')
	plain_err=$stderr
	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1 \
		run -1 --separate-stderr agent-run --trace --no-store --model script/model.ndjson --tool "$TOOLS/fail.json" -m hi
	[ "$(printf '%s\n' "$output" | jq -c 'del(.. | .sessionId?)')" = "$plain" ]
	[ "$(printf '%s\n' "$stderr" | sed '$d')" = "$plain_err" ]
	[[ $(printf '%s\n' "$stderr" | tail -n 1) == "agent-run: trace export failed: http://127.0.0.1:1/v1/traces: Failed to connect to 127.0.0.1 port 1 "* ]]
	run -0 --separate-stderr env OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1 agent-run --trace --model echo --system hi -m one -m two
	[ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
	# A detached worker says it in its log.
	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1 run -0 --separate-stderr agent-run --trace --model echo --system hi --detach -m one
	[[ $stderr == "agent-run: trace export failed: http://127.0.0.1:1/v1/traces: "* ]]
	id=$(printf '%s\n' "$output" | jq -r .output.snapshotId)
	worker_logged "$id" "trace export failed"
	[ "$(agent-snap worker-log "$id" | grep -c '^[^ ]* agent-run\[[0-9]*\]: trace export failed: http://127.0.0.1:1/v1/traces: ')" -eq 1 ]
}

@test "console to stderr; grpc and unknown exporters turn tracing off with one note" {
	OTEL_TRACES_EXPORTER=console run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	[ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
	[ "$(printf '%s\n' "$stderr" | jq -r '.resourceSpans[].scopeSpans[].spans[].name' | tr '\n' ' ')" = "inline runTurn-1 generate echo " ]
	[[ $output != *resourceSpans* ]]
	OTEL_EXPORTER_OTLP_PROTOCOL=grpc run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	[ "$stderr" = "agent-run: tracing off: OTLP protocol 'grpc' is not supported: set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf or http/json (a collector's port 4318)" ]
	OTEL_TRACES_EXPORTER=zipkin run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	[ "$stderr" = "agent-run: tracing off: OTEL_TRACES_EXPORTER 'zipkin' is not one of otlp, console, none" ]
	OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/xml run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	[ "$stderr" = "agent-run: tracing off: OTLP protocol 'http/xml' is not one of http/protobuf, http/json" ]
}

@test "custom agent handlers and transforms get the invocation span's TRACEPARENT" {
	cat >handler <<-'EOF'
	#!/bin/sh
	while read -r line; do
		printf '{"message":{"role":"model","content":[{"text":"%s"}]}}\n{"done":{}}\n' "$TRACEPARENT"
	done
	EOF
	chmod +x handler
	run -0 --separate-stderr agent-run --no-store --exec ./handler --trace-file t.ndjson -m hi
	root=$(spans t.ndjson | jq -c 'select(has("parentSpanId") | not)')
	seen=$(printf '%s\n' "$output" | tail -n 1 | jq -r '.output.state.messages[-1].content[0].text')
	[ "$seen" = "00-$(jq -r .traceId <<<"$root")-$(jq -r .spanId <<<"$root")-01" ]
}

@test "a detached run is one trace: the worker's spans continue the launcher's" {
	run -0 --separate-stderr agent-run --model echo --system hi --trace-file t.ndjson --detach -m one -m two
	[ "$stderr" = "" ]
	id=$(printf '%s\n' "$output" | jq -r .output.snapshotId)
	run -0 --separate-stderr timeout 20 agent-wait "$id"
	launcher_and_worker
	[ "$(jq -r .flags <<<"$worker")" = 769 ]
	[ "$(jq -c '[.attributes[] | select(.key == "genkit:metadata:agent:detached") | .value]' <<<"$worker")" = '[{"boolValue":true}]' ]
	[ "$(jq -r 'select(.name | startswith("runTurn")) | .parentSpanId' all | sort -u)" = "$(jq -r .spanId <<<"$worker")" ]
	[ "$(jq -r 'select(.name | startswith("runTurn")) | .name' all | tr '\n' ' ')" = "runTurn-1 runTurn-2 " ]
	# No span is exported twice.
	[ "$(jq -r .spanId all | sort | uniq -d)" = "" ]
	# The worker's log names the trace.
	run -0 --separate-stderr agent-snap worker-log "$id"
	[[ $output == *" trace $(jq -r .traceId <<<"$worker")"* ]]
}

@test "text mode's summary names the trace" {
	run -0 --separate-stderr agent-run --format text --model echo --system hi --trace-file t.ndjson -m one
	tid=$(spans t.ndjson | jq -r .traceId | sort -u)
	[[ $stderr == *", trace $tid" ]]
	run -0 --separate-stderr agent-run --format text --model echo --system hi -m one
	[[ $stderr != *trace* ]]
}

@test "--trace-content records inputs, outputs and the turn's state, cut at the limit; off by default" {
	printf '%s\n' '{"toolRequests":[{"name":"greet","ref":"1","input":{"name":"ann"}}]}' \
		'{"text":"done","usage":{"inputTokens":7,"outputTokens":3}}' >model.ndjson
	run -0 --separate-stderr agent-run --no-store --model script/model.ndjson --tool "$TOOLS/greet.json" --trace-file off.ndjson -m hi
	[ "$(spans off.ndjson | jq -c '.attributes[] | select(.key | test("^genkit:(input|output)$"))')" = "" ]
	run -0 --separate-stderr agent-run --no-store --model script/model.ndjson --tool "$TOOLS/greet.json" --trace-file t.ndjson --trace-content -m hi
	[ "$(attr t.ndjson greet genkit:input)" = '{"stringValue":"{\"name\":\"ann\"}"}' ]
	[ "$(attr t.ndjson greet genkit:output)" = '{"stringValue":"\"hello ann\""}' ]
	state=$(printf "%s\n" "$output" | tail -n 1 | jq -cS .output.state)
	[ "$(attr t.ndjson runTurn-1 genkit:output | jq -r .stringValue | jq -cS .state)" = "$state" ]
	[ "$(attr t.ndjson script/model.ndjson gen_ai.usage.input_tokens | tail -n 1)" = '{"intValue":"7"}' ]
	[ "$(attr t.ndjson script/model.ndjson genkit:input | head -n 1 | jq -r .stringValue)" = '{"messages":[{"content":[{"text":"hi"}],"role":"user"}]}' ]
	OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT=12 OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true \
		run -0 --separate-stderr agent-run --no-store --model script/model.ndjson --tool "$TOOLS/greet.json" --trace-file cut.ndjson -m hi
	[ "$(attr cut.ndjson greet genkit:input)" = '{"stringValue":"{\"name\":\"ann"}' ]
}

@test "--trace-names semconv: invoke_agent, chat and execute_tool names; Genkit's names stay in attributes" {
	printf '%s\n' '{"toolRequests":[{"name":"greet","ref":"1","input":{"name":"ann"}}]}' '{"text":"done"}' >model.ndjson
	run -0 --separate-stderr agent-run --no-store --model script/model.ndjson --tool "$TOOLS/greet.json" --trace-file t.ndjson --trace-names semconv -m hi
	[ "$(spans t.ndjson | jq -r .name | tr '\n' '|')" = "invoke_agent inline|runTurn-1|generate|chat script/model.ndjson|execute_tool greet|generate|chat script/model.ndjson|" ]
	[ "$(attr t.ndjson 'invoke_agent inline' genkit:name)" = '{"stringValue":"inline"}' ]
	[ "$(attr t.ndjson 'execute_tool greet' gen_ai.operation.name)" = '{"stringValue":"execute_tool"}' ]
	run -100 --separate-stderr agent-run --model echo --trace-names otel -m hi
	[ "${stderr%%$'\n'*}" = "agent-run: --trace-names must be genkit or semconv, not 'otel'" ]
}

@test "GENKIT_TELEMETRY_SERVER: each flush also posted to URL/api/traces in Genkit's trace format" {
	recv_start
	GENKIT_TELEMETRY_SERVER="http://127.0.0.1:$PORT/" OTEL_TRACES_EXPORTER=none \
		run -0 --separate-stderr agent-run --trace --model echo --system hi -m one -m two
	[ "$stderr" = "" ]
	[ "$(jq -r .path "$LOG" | sort -u)" = /api/traces ]
	[ "$(wc -l <"$LOG")" -eq 2 ]
	# The last post has the root span: the trace is named after it.
	last=$(tail -n 1 "$LOG" | jq -c .body)
	root=$(jq -r '.spans[] | select(.displayName == "inline") | .spanId' <<<"$last")
	[ "$(jq -c '[.displayName, (.traceId | test("^[0-9a-f]{32}$")), (.startTime | type), ([.spans[] | .displayName] | sort)]' <<<"$last")" = '["inline",true,"number",["echo","generate","inline","runTurn-2"]]' ]
	[ "$(jq -c --arg r "$root" '.spans[$r] | [.spanKind, .attributes["genkit:type"], .attributes["genkit:isRoot"], .status, .sameProcessAsParentSpan, .instrumentationLibrary.name]' <<<"$last")" = '["INTERNAL","action",true,{"code":0},{"value":true},"agentkit"]' ]
	# The first, turn 1's, has no root span and so no trace name.
	first=$(head -n 1 "$LOG" | jq -c .body)
	[ "$(jq -c '[has("displayName"), ([.spans[] | .displayName] | sort)]' <<<"$first")" = '[false,["echo","generate","runTurn-1"]]' ]
	[ "$(jq -r '.spans[] | select(.displayName == "echo") | .spanKind' <<<"$first")" = CLIENT ]
	[ "$(jq -r '.spans[] | select(.displayName == "runTurn-1") | .parentSpanId' <<<"$first")" = "$root" ]
	# Both destinations at once; the OTLP headers are not sent to Genkit's server.
	: >"$LOG"
	GENKIT_TELEMETRY_SERVER="http://127.0.0.1:$PORT" OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$PORT" \
	OTEL_EXPORTER_OTLP_HEADERS='authorization=secret' run -0 --separate-stderr agent-run --trace --model echo --system hi -m one -m two
	[ "$(jq -r .path "$LOG" | sort | uniq -c | awk '{print $1, $2}' | tr '\n' ' ')" = "2 /api/traces 2 /v1/traces " ]
	[ "$(jq -r 'select(.path == "/api/traces") | .headers.authorization // "none"' "$LOG" | sort -u)" = none ]
}

@test "a detach line mid-conversation: the launcher's span ends at the detach, the worker's continues in the same process" {
	printf '%s\n' '{"text":"ok 0"}' '{"text":"ok 1"}' >model.ndjson
	run -0 --separate-stderr agent-run --model script/model.ndjson --trace-file t.ndjson < <(exec 3>&-
		printf '%s\n' '{"message":{"content":[{"text":"one"}]}}'
		sleep 1
		printf '%s\n' '{"detach":true,"message":{"content":[{"text":"two"}]}}')
	id=$(printf '%s\n' "$output" | tail -n 1 | jq -r .output.snapshotId)
	run -0 timeout 20 agent-wait "$id"
	launcher_and_worker
	[ "$(jq -r .flags <<<"$worker")" = 257 ]
	[ "$(jq -c '[.attributes[] | select(.key == "agentkit.finish_reason") | .value.stringValue]' <<<"$launcher")" = '["detached"]' ]
	[ "$(jq -r 'select(.name == "runTurn-1") | .parentSpanId' all)" = "$(jq -r .spanId <<<"$launcher")" ]
	[ "$(jq -r .spanId all | sort | uniq -d)" = "" ]
}

# need_decoder: skip unless node and the pinned protobufjs (scripts/otlp-decoder) are there.
need_decoder() {
	command -v node >/dev/null 2>&1 || skip "node is not installed: protobuf bodies cannot be decoded"
	[ -f "$TOP/bench/out/otlp/node_modules/protobufjs/package.json" ] ||
		skip "protobufjs is not installed (scripts/otlp-decoder)"
}

@test "otlp: http/protobuf by default, decoded with the official opentelemetry-proto files" {
	need_decoder
	recv_start
	unset OTEL_EXPORTER_OTLP_PROTOCOL
	export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$PORT"
	run -0 --separate-stderr agent-run --trace --model echo --system hi -m one -m two
	[ "$stderr" = "" ]
	[ "$(jq -r '.headers["content-type"]' "$LOG" | sort -u)" = application/x-protobuf ]
	[ "$(jq -r '.headers["content-encoding"] // "identity"' "$LOG" | sort -u)" = identity ]
	[ "$(jq -r .body "$LOG" | sort -u)" = null ]
	"$TOP/scripts/otlp-decode" "$LOG" >decoded
	[ "$(wc -l <decoded)" -eq 2 ]
	[ "$(spans decoded | jq -r .name | tr '\n' ' ')" = "runTurn-1 generate echo inline runTurn-2 generate echo " ]
	spans decoded >all
	[ "$(jq -r .traceId all | sort -u | wc -l)" -eq 1 ]
	jq -e -s 'all(.[]; (.traceId | test("^[0-9a-f]{32}$")) and (.spanId | test("^[0-9a-f]{16}$"))
		and (.startTimeUnixNano | test("^[0-9]{19}$")) and .flags == 257)' all
	[ "$(jq -r 'select(.name == "runTurn-1") | .parentSpanId' all)" = "$(jq -r 'select(.name == "inline") | .spanId' all)" ]
	[ "$(attr decoded inline genkit:isRoot)" = '{"boolValue":true}' ]
	[ "$(attr decoded inline gen_ai.provider.name)" = '{"stringValue":"echo"}' ]
	[ "$(attr decoded echo gen_ai.response.finish_reasons | tail -n 1)" = '{"arrayValue":{"values":[{"stringValue":"stop"}]}}' ]
	[ "$(jq -c '.body.resourceSpans[0].scopeSpans[0].scope' decoded | sort -u)" = '{"name":"agentkit","version":"0.1.0"}' ]
	[ "$(jq -c '[.body.resourceSpans[0].resource.attributes[] | select(.key == "service.name")][0].value' decoded | sort -u)" = '{"stringValue":"agent-run"}' ]
	# The same spans as http/json sends, but for IDs and times.
	: >"$LOG"
	OTEL_EXPORTER_OTLP_PROTOCOL=http/json run -0 --separate-stderr agent-run --trace --model echo --system hi -m one -m two
	norm() { spans "$1" | jq -cS 'del(.traceId, .spanId, .parentSpanId, .startTimeUnixNano, .endTimeUnixNano,
		.events, .links, .droppedAttributesCount, .droppedEventsCount, .droppedLinksCount)
		| .attributes |= map(select(.key | test("sessionId|conversation|snapshotId") | not))
		| .status |= with_entries(select(.value != 0))'; }
	[ "$(jq -r '.headers["content-type"]' "$LOG" | sort -u)" = application/json ]
	[ "$(norm "$LOG")" = "$(norm decoded)" ]
	# The traces variable wins over the general one.
	: >"$LOG"
	OTEL_EXPORTER_OTLP_PROTOCOL=http/json OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf \
		run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	[ "$(jq -r '.headers["content-type"]' "$LOG")" = application/x-protobuf ]
	"$TOP/scripts/otlp-decode" "$LOG" | spans /dev/stdin | jq -r .name | tr '\n' ' ' >names
	[ "$(cat names)" = "inline runTurn-1 generate echo " ]
}

@test "otlp: OTEL_EXPORTER_OTLP_COMPRESSION=gzip compresses either encoding; none does not" {
	recv_start
	export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$PORT"
	OTEL_EXPORTER_OTLP_COMPRESSION=gzip run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	[ "$stderr" = "" ]
	[ "$(jq -r '.headers["content-encoding"]' "$LOG")" = gzip ]
	# The gzip magic, and a body that gunzips (python3's gzip) to the request.
	[ "$(jq -r .raw "$LOG" | base64 -d | head -c 2 | od -An -tx1 | tr -d ' ')" = 1f8b ]
	[ "$(jq -r .gzip "$LOG")" = true ]
	[ "$(spans "$LOG" | jq -r .name | tr '\n' ' ')" = "inline runTurn-1 generate echo " ]
	[ "$(jq -r .raw "$LOG" | base64 -d | wc -c)" -lt "$(jq -r .data "$LOG" | base64 -d | wc -c)" ]
	: >"$LOG"
	OTEL_EXPORTER_OTLP_COMPRESSION=none run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	[ "$(jq -r '.headers["content-encoding"] // "identity"' "$LOG")" = identity ]
	[ "$(jq -r .gzip "$LOG")" = false ]
	: >"$LOG"
	OTEL_EXPORTER_OTLP_COMPRESSION=zstd run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	[ "$stderr" = "agent-run: trace export: compression 'zstd' is not one of gzip, none: none used" ]
	[ "$(jq -r .gzip "$LOG")" = false ]
	need_decoder
	: >"$LOG"
	OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=gzip \
		run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	[ "$(jq -r '.headers["content-encoding"] + " " + .headers["content-type"]' "$LOG")" = "gzip application/x-protobuf" ]
	"$TOP/scripts/otlp-decode" "$LOG" >decoded
	[ "$(spans decoded | jq -r .name | tr '\n' ' ')" = "inline runTurn-1 generate echo " ]
}

# tp_tool: a tool "tp" that answers its TRACEPARENT, and a model that calls it once.
tp_tool() {
	mkdir -p tools
	cat >tools/tp <<-'EOF2'
	#!/bin/sh
	cat >/dev/null
	printf '{"output":"%s"}\n' "$TRACEPARENT"
	EOF2
	chmod +x tools/tp
	echo '{"description": "Reports its TRACEPARENT."}' >tools/tp.json
	printf '%s\n' '{"toolRequests":[{"name":"tp","ref":"1","input":{}}]}' '{"text":"done"}' >model.ndjson
}
seen_tp() { printf '%s\n' "$output" | tail -n 1 | jq -r '.output.state.messages[2].content[0].toolResponse.output'; }

@test "OTEL_TRACES_SAMPLER: unsampled traces export nothing and children see flags 00" {
	tp_tool
	run1() { rm -f t.ndjson; run -0 --separate-stderr agent-run --no-store --model script/model.ndjson --tool tp --trace-file t.ndjson -m hi; }
	# always_off: nothing written, the tool still gets a traceparent, unsampled.
	OTEL_TRACES_SAMPLER=always_off run1
	[ "$stderr" = "" ]
	[ ! -s t.ndjson ]
	[[ $(seen_tp) =~ ^00-[0-9a-f]{32}-[0-9a-f]{16}-00$ ]]
	# The default (parentbased_always_on) follows an unsampled parent: the
	# trace ID carries on, the span is the tool's own, the flag stays 00.
	TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00 run1
	[ ! -s t.ndjson ]
	[[ $(seen_tp) =~ ^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-00$ ]]
	[ "$(seen_tp)" != 00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00 ]
	# always_on overrides the parent's decision; the children see 01.
	OTEL_TRACES_SAMPLER=always_on TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00 run1
	[ "$(spans t.ndjson | jq -r .name | tr '\n' ' ')" = "inline runTurn-1 generate script/model.ndjson tp generate script/model.ndjson " ]
	[ "$(spans t.ndjson | jq -r .flags | sort -u | tr '\n' ' ')" = "257 769 " ]
	[ "$(seen_tp)" = "00-0af7651916cd43dd8448eb211c80319c-$(spans t.ndjson | jq -r 'select(.name == "tp") | .spanId')-01" ]
	# parentbased_always_off: a sampled parent is followed, no parent is off.
	OTEL_TRACES_SAMPLER=parentbased_always_off TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01 run1
	[ "$(spans t.ndjson | wc -l)" -eq 7 ]
	OTEL_TRACES_SAMPLER=parentbased_always_off run1
	[ ! -s t.ndjson ]
	[[ $(seen_tp) == *-00 ]]
	# traceidratio decides on the trace ID's last 8 bytes (alike in every
	# process of the trace): low ones are kept at 0.5, high ones are not.
	OTEL_TRACES_SAMPLER=traceidratio OTEL_TRACES_SAMPLER_ARG=0.5 TRACEPARENT=00-0af7651916cd43dd0000000000000001-00f067aa0ba902b7-00 run1
	[ "$(spans t.ndjson | wc -l)" -eq 7 ]
	OTEL_TRACES_SAMPLER=traceidratio OTEL_TRACES_SAMPLER_ARG=0.5 TRACEPARENT=00-0af7651916cd43ddfffffffffffffff0-00f067aa0ba902b7-01 run1
	[ ! -s t.ndjson ]
	[[ $(seen_tp) == 00-0af7651916cd43ddfffffffffffffff0-*-00 ]]
	OTEL_TRACES_SAMPLER=traceidratio OTEL_TRACES_SAMPLER_ARG=0 run1
	[ ! -s t.ndjson ]
	OTEL_TRACES_SAMPLER=traceidratio OTEL_TRACES_SAMPLER_ARG=1 run1
	[ "$(spans t.ndjson | wc -l)" -eq 7 ]
	# parentbased_traceidratio follows a parent whatever its ID, uses the ratio without one.
	OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0 TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01 run1
	[ "$(spans t.ndjson | wc -l)" -eq 7 ]
	OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0 run1
	[ ! -s t.ndjson ]
	# Unknown samplers and bad ratios: one note, the SDKs' fallbacks.
	OTEL_TRACES_SAMPLER=sometimes TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00 run1
	[ "$stderr" = "agent-run: OTEL_TRACES_SAMPLER 'sometimes' is not a known sampler: parentbased_always_on used" ]
	[ ! -s t.ndjson ]
	OTEL_TRACES_SAMPLER=traceidratio OTEL_TRACES_SAMPLER_ARG=half run1
	[ "$stderr" = "agent-run: OTEL_TRACES_SAMPLER_ARG 'half' is not a ratio from 0 to 1: 1.0 used" ]
	[ "$(spans t.ndjson | wc -l)" -eq 7 ]
	# An unsampled run names no trace in its summary, and posts nothing.
	recv_start
	OTEL_TRACES_SAMPLER=always_off OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$PORT" \
		run -0 --separate-stderr agent-run --trace --model echo --system hi -m one
	[ "$stderr" = "" ]
	[ ! -s "$LOG" ]
}

@test "failed spans carry an exception event; a tool's error result is a tool_error" {
	printf '%s\n' '{"toolRequests":[{"name":"fail","ref":"1","input":{}}]}' >model.ndjson
	run -1 --separate-stderr agent-run --no-store --model script/model.ndjson --tool "$TOOLS/fail.json" --trace-file t.ndjson -m hi
	msg=$(printf '%s\n' "$output" | tail -n 1 | jq -r .output.error.message)
	ev() { spans t.ndjson | jq -c --arg n "$1" 'select(.name == $n) | [.events[] | {name, attributes}]'; }
	want() { jq -cn --arg m "$1" '[{name: "exception", attributes: [{key: "exception.type", value: {stringValue: "INTERNAL"}}, {key: "exception.message", value: {stringValue: $m}}]}]'; }
	[ "$(ev fail)" = "$(want "exited with status 3: boom: the disk is on fire")" ]
	[ "$(ev runTurn-1)" = "$(want "$msg")" ]
	[ "$(ev inline)" = "$(want "$msg")" ]
	[ "$(spans t.ndjson | jq -r 'select(.name == "fail") | .events[0].timeUnixNano' | grep -cE '^[0-9]{19}$')" -eq 1 ]
	# A successful run has none.
	run -0 --separate-stderr agent-run --no-store --model echo --system hi --trace-file ok.ndjson -m hi
	[ "$(spans ok.ndjson | jq -c '.events' | sort -u)" = '[]' ]
	# A tool whose result is {"error": ...} (as an MCP isError comes back):
	# the turn goes on, the span says tool_error; the text only with content.
	mkdir -p tools
	printf '#!/bin/sh\ncat >/dev/null\necho %s\n' "'{\"output\":{\"error\":\"no such file: /x\"}}'" >tools/miss
	chmod +x tools/miss
	echo '{"description": "Fails softly."}' >tools/miss.json
	printf '%s\n' '{"toolRequests":[{"name":"miss","ref":"1","input":{}}]}' '{"text":"done"}' >model.ndjson
	run -0 --separate-stderr agent-run --no-store --model script/model.ndjson --tool miss --trace-file e.ndjson -m hi
	[ "$(spans e.ndjson | jq -c 'select(.name == "miss") | .status')" = '{"code":2,"message":"the tool returned an error"}' ]
	[ "$(attr e.ndjson miss error.type)" = '{"stringValue":"tool_error"}' ]
	[ "$(attr e.ndjson miss agentkit.tool.outcome)" = '{"stringValue":"error"}' ]
	[ "$(spans e.ndjson | jq -c 'select(.name == "miss") | .events[0].attributes[0].value')" = '{"stringValue":"tool_error"}' ]
	[ "$(spans e.ndjson | jq -r 'select(.name == "runTurn-1") | .status.code')" = 0 ]
	! grep -q 'no such file' e.ndjson
	OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true run -0 --separate-stderr agent-run --no-store --model script/model.ndjson --tool miss --trace-file c.ndjson -m hi
	[ "$(spans c.ndjson | jq -c 'select(.name == "miss") | .status')" = '{"code":2,"message":"no such file: /x"}' ]
}

@test "gen_ai.provider.name on the invocation and model spans; semconv messages only with content capture" {
	printf '%s\n' '{"toolRequests":[{"name":"greet","ref":"1","input":{"name":"ann"}}]}' \
		'{"text":"done"}' >model.ndjson
	run -0 --separate-stderr agent-run --no-store --model script/model.ndjson --system "be brief" --tool "$TOOLS/greet.json" --trace-file off.ndjson -m hi
	[ "$(attr off.ndjson inline gen_ai.provider.name)" = '{"stringValue":"script"}' ]
	[ "$(attr off.ndjson script/model.ndjson gen_ai.provider.name | sort -u)" = '{"stringValue":"script"}' ]
	# Off by default: no message, no instruction, no tool text anywhere.
	[ "$(spans off.ndjson | jq -c '.attributes[] | select(.key | startswith("gen_ai.input") or startswith("gen_ai.output") or startswith("gen_ai.system"))')" = "" ]
	! grep -qE 'be brief|ann' off.ndjson
	OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=false run -0 --separate-stderr agent-run --no-store --model script/model.ndjson --system "be brief" --tool "$TOOLS/greet.json" --trace-file f.ndjson -m hi
	! grep -qE 'be brief|ann' f.ndjson
	OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true run -0 --separate-stderr agent-run --no-store --model script/model.ndjson --system "be brief" --tool "$TOOLS/greet.json" --trace-file t.ndjson -m hi
	v() { attr t.ndjson script/model.ndjson "$1" | sed -n "${2}p" | jq -c '.stringValue | fromjson'; }
	[ "$(v gen_ai.system_instructions 1)" = '[{"type":"text","content":"be brief"}]' ]
	[ "$(v gen_ai.input.messages 1)" = '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]' ]
	[ "$(v gen_ai.output.messages 1)" = '[{"role":"assistant","parts":[{"type":"tool_call","name":"greet","arguments":{"name":"ann"},"id":"1"}],"finish_reason":"stop"}]' ]
	[ "$(v gen_ai.input.messages 2 | jq -c '.[2]')" = '{"role":"tool","parts":[{"type":"tool_call_response","response":"hello ann","id":"1"}]}' ]
	[ "$(v gen_ai.output.messages 2)" = '[{"role":"assistant","parts":[{"type":"text","content":"done"}],"finish_reason":"stop"}]' ]
}

@test "the tool loop's second model call is under a generate of its own, inside the first's" {
	printf '%s\n' '{"toolRequests":[{"name":"greet","ref":"1","input":{"name":"ann"}}]}' \
		'{"toolRequests":[{"name":"greet","ref":"2","input":{"name":"bob"}}]}' '{"text":"done"}' >model.ndjson
	run -0 --separate-stderr agent-run --no-store --model script/model.ndjson --tool "$TOOLS/greet.json" --trace-file t.ndjson -m hi
	# Genkit's generate recurses: model, tools, then generate again (JS 1.42, Go).
	spans t.ndjson | jq -r '[.name, (.attributes[] | select(.key == "genkit:path") | .value.stringValue)] | join(" ")' >paths
	g='/{inline,t:action,s:agent}/{runTurn-1,t:flowStep}/{generate,t:util}'
	m='{script/model.ndjson,t:action,s:model}'
	cat >want <<-EOF
	inline /{inline,t:action,s:agent}
	runTurn-1 /{inline,t:action,s:agent}/{runTurn-1,t:flowStep}
	generate $g
	script/model.ndjson $g/$m
	greet $g/{greet,t:action,s:tool}
	generate $g/{generate,t:util}
	script/model.ndjson $g/{generate,t:util}/$m
	greet $g/{generate,t:util}/{greet,t:action,s:tool}
	generate $g/{generate,t:util}/{generate,t:util}
	script/model.ndjson $g/{generate,t:util}/{generate,t:util}/$m
	EOF
	diff want paths
	spans t.ndjson >all
	gen() { jq -r 'select(.name == "generate") | .spanId' all | sed -n "${1}p"; }
	[ "$(jq -r 'select(.name == "generate") | .parentSpanId' all | sed -n 2p)" = "$(gen 1)" ]
	[ "$(jq -r 'select(.name == "generate") | .parentSpanId' all | sed -n 3p)" = "$(gen 2)" ]
	[ "$(jq -r 'select(.name == "greet") | .parentSpanId' all | tr '\n' ' ')" = "$(gen 1) $(gen 2) " ]
	[ "$(jq -r 'select(.name == "generate") | .status.code' all | sort -u)" = 0 ]
}

@test "content capture on: the provider's key and the collector's headers never reach a span" {
	recv_start
	echo '{"text": "hello"}' >turns.ndjson
	"$TOP/scripts/mock-model" --dialect openai --script turns.ndjson --log mock.log \
		--key sk-never-in-a-span --port-file mport 3>&- >/dev/null 2>&1 &
	mock=$!
	for _ in $(seq 1 200); do [ -s mport ] && break; sleep 0.025; done
	OPENAI_BASE_URL="http://127.0.0.1:$(cat mport)/v1" OPENAI_API_KEY=sk-never-in-a-span \
	OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$PORT" OTEL_EXPORTER_OTLP_HEADERS='Authorization=Bearer%20tok-never' \
	OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true \
		run -0 --separate-stderr agent-run --trace --no-store --model openai/gpt-4o --system hi -m hello
	kill "$mock" 2>/dev/null || true
	# The key went to the model (the mock takes no other), and the token
	# to the collector as a header...
	[ "$(jq -r '.headers.authorization' "$LOG")" = "Bearer tok-never" ]
	# ...but no span has either, while the messages are there.
	[ "$(attr "$LOG" openai/gpt-4o gen_ai.output.messages | jq -r .stringValue | jq -c '.[0].parts')" = '[{"type":"text","content":"hello"}]' ]
	[ "$(attr "$LOG" openai/gpt-4o gen_ai.provider.name)" = '{"stringValue":"openai"}' ]
	! jq -c .body "$LOG" | grep -qE 'sk-never|tok-never'
}

@test "an MCP isError result: the tool span is a tool_error, the turn goes on" {
	command -v python3 >/dev/null || skip "python3 is not installed"
	printf '{"mcpServers": {"fake": {"command": "%s", "args": ["normal"]}}}\n' "$FIXTURES/mcp/fake-server" >mcp.json
	printf '%s\n' '{"toolRequests":[{"name":"fake_oops","ref":"1","input":{}}]}' '{"text":"done"}' >model.ndjson
	run -0 --separate-stderr agent-run --no-store --model script/model.ndjson --mcp-config mcp.json --trace-file t.ndjson -m go
	[ "$(printf '%s\n' "$output" | tail -n 1 | jq -r .output.message.content[0].text)" = done ]
	[ "$(spans t.ndjson | jq -c 'select(.name == "fake_oops") | [.status, (.events | map(.name))]')" = '[{"code":2,"message":"the tool returned an error"},["exception"]]' ]
	[ "$(attr t.ndjson fake_oops error.type)" = '{"stringValue":"tool_error"}' ]
	# OpenTelemetry's MCP conventions on the same span (none made twice).
	[ "$(attr t.ndjson fake_oops mcp.method.name)" = '{"stringValue":"tools/call"}' ]
	[ "$(attr t.ndjson fake_oops gen_ai.tool.name)" = '{"stringValue":"oops"}' ]
	[ "$(spans t.ndjson | jq -r 'select(.name | startswith("fake_oops")) | .name')" = fake_oops ]
	[ "$(spans t.ndjson | jq -r 'select(.name == "inline") | .status.code')" = 0 ]
	! grep -q 'no such row' t.ndjson
}
