#!/usr/bin/env bash
# delegate.sh - what a delegation costs over a tool call of the same work
# (numbers for issue 30): one durable turn of a lead agent whose scripted
# model asks once for "echo this" and then answers, the work done by an
# executable tool that prints its input, or by an echo sub-agent
# (docs/agents.md): a second agent-run process, its store opened, its own
# session written and linked.
#
#   bench/delegate.sh [BUILD]      (default build; about a minute)
#   N=50 bench/delegate.sh         fewer rounds (default 200)
#
# Prints "name value unit" lines and rows of the results table
# (bench/lib.sh): tool_turn, delegate_turn (us, medians of interleaved
# rounds) and their ratio; then background_10: the wall time from the
# start of a turn that launches 10 background sub-agents (async, one model
# message, each ~1 s of scripted streaming) until agent-wait has seen all
# 10 settle, against one such sub-agent run alone (median of ROUNDS,
# default 5).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init delegate
build=${1:-build}
n=${N:-200}
case $build in /*) bin="$build/bin" ;; *) bin="$top/$build/bin" ;; esac
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
# the store on tmpfs when there is one, as bench/agent-run.sh does
shm=$work
[ -d /dev/shm ] && [ -w /dev/shm ] && shm=$(mktemp -d /dev/shm/agentkit-bench.XXXXXX) &&
	trap 'rm -rf "$work" "$shm"' EXIT
cd "$work"
mkdir -p agents/tools
cat >agents/tool.prompt <<'P'
---
model: script/tool.ndjson
tools: [echoTask]
---
{{history}}
P
cat >agents/lead.prompt <<'P'
---
model: script/lead.ndjson
agents: [helper]
---
{{history}}
P
printf -- '---\nmodel: echo\n---\n{{history}}\n' >agents/helper.prompt
printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "echoTask", "input": {"task": "echo this"}}]}' \
	'{"when": {"round": 1}, "text": "done"}' >agents/tool.ndjson
printf '%s\n' '{"when": {"round": 0}, "toolRequests": [{"name": "delegate_to_helper", "input": {"task": "echo this"}}]}' \
	'{"when": {"round": 1}, "text": "done"}' >agents/lead.ndjson
printf '#!/bin/sh\nread -r line\nprintf %s "{\\"output\\": \\"echo this\\"}"\necho\n' >agents/tools/echoTask
chmod +x agents/tools/echoTask
echo '{"description": "Echo the task."}' >agents/tools/echoTask.json
export AGENTKIT_STORE="$shm/store"
bench_expect '"echo this"' "$bin/agent-run" tool -m go
bench_expect '"response":"echo this"' "$bin/agent-run" lead -m go
bench_pairs "$n" "$bin/agent-run tool -m go" "$bin/agent-run lead -m go"
t_tool=${bench_t[0]} t_del=${bench_t[1]}
r=$(awk -v r="${bench_r[1]}" 'BEGIN { printf "%.3f", 1 / r }')
echo "tool_turn $t_tool us"
echo "delegate_turn $t_del us (${r}x the tool turn)"
bench_row "turn with a delegation to an echo sub-agent vs one tool call" "$t_del" "$t_tool" us - \
	"executable tool" "$r"

# 10 background sub-agents at once, against the slowest alone
cat >agents/fan.prompt <<'P'
---
model: script/fan.ndjson
agents: {agents: [slow], async: true}
---
{{history}}
P
printf -- '---\nmodel: script/slow.ndjson\n---\n{{history}}\n' >agents/slow.prompt
echo '{"chunks": ["a", "b", "c", "d"], "delay": "250ms"}' >agents/slow.ndjson
reqs=$(for i in $(seq 10); do printf '{"name": "delegate_to_slow", "input": {"task": "t%d", "background": true}}' "$i"; [ "$i" = 10 ] || printf ,; done)
printf '%s\n' "{\"when\": {\"round\": 0}, \"toolRequests\": [$reqs]}" '{"when": {"round": 1}, "text": "launched"}' >agents/fan.ndjson
now_ms() { local t=$EPOCHREALTIME; echo $(( ${t/./} / 1000 )); }
rounds=${ROUNDS:-5}
fan=() one=()
for _ in $(seq "$rounds"); do
	t0=$(now_ms)
	"$bin/agent-run" slow -m t >"$work/one.out" || bench_fail "the sub-agent alone failed"
	one+=($(( $(now_ms) - t0 )))
	t0=$(now_ms)
	"$bin/agent-run" fan -m go >"$work/fan.out" || bench_fail "the fan-out turn failed"
	ids=$(jq -r 'select(.modelChunk.role == "tool") | .modelChunk.content[].toolResponse.output.snapshotId' "$work/fan.out")
	[ "$(wc -w <<<"$ids")" = 10 ] || bench_fail "the fan-out did not launch 10 tasks"
	# shellcheck disable=SC2086
	"$bin/agent-wait" --timeout 60s $ids >/dev/null || bench_fail "a background task did not complete"
	fan+=($(( $(now_ms) - t0 )))
done
med() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
t_fan=$(med "${fan[@]}") t_one=$(med "${one[@]}")
echo "background_10 $t_fan ms (one alone: $t_one ms)"
bench_row "10 background sub-agents launched and waited for vs one alone" "$t_fan" "$t_one" ms - \
	"one sub-agent"
bench_done
