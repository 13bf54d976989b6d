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
# rounds) and their ratio.
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
bench_done
