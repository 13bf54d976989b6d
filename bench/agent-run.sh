#!/usr/bin/env bash
# agent-run.sh - whole-process costs of agent-run with the echo model and
# the store (numbers for issue 4).
#
#   bench/agent-run.sh [BUILD]      (default build; well under a minute)
#
# Prints "name value unit" lines:
#   turn_1            one turn of a fresh session (mean of 50 processes)
#   turn_100          one turn of a growing session, 100 turns as 100 processes
#   rss_10k           peak RSS of one turn on a 10,000-message session
#   store_growth_*    bytes the store file grows per turn, early in a
#                     session and on the 10,000-message session
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
bin="$top/$build/bin"
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export AGENTKIT_STORE="$work/store"
cd "$work"

now_ns() { date +%s%N; }
size() { stat -c %s "$AGENTKIT_STORE/data.mdb"; }

t0=$(now_ns)
for i in $(seq 50); do "$bin/agent-run" --model echo -m "hello $i" >/dev/null; done
t1=$(now_ns)
echo "turn_1 $(( (t1 - t0) / 50 / 1000 )) us/turn"

t0=$(now_ns)
"$bin/agent-run" --model echo --session grow -m "turn 0" >/dev/null
for i in $(seq 99); do "$bin/agent-run" --model echo --session grow -m "turn $i" >/dev/null; done
t1=$(now_ns)
echo "turn_100 $(( (t1 - t0) / 100 / 1000 )) us/turn"

# Store growth per turn early in a session (turns 101-150 of "grow").
s0=$(size)
for i in $(seq 50); do "$bin/agent-run" --model echo --session grow -m "more $i" >/dev/null; done
s1=$(size)
echo "store_growth_small $(( (s1 - s0) / 50 )) bytes/turn (session of ~200-300 messages)"

# A 10,000-message session, imported as one completed row.
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
jq -cn --arg now "$now" '{snapshotId: "big0", sessionId: "big", status: "completed",
	createdAt: $now, updatedAt: $now, finishReason: "stop",
	state: {sessionId: "big", messages: [range(5000) | ({role: "user", content: [{text: "question number \(.) about something"}]}, {role: "model", content: [{text: "answer number \(.) with a few more words in it"}]})]}}' \
	| "$bin/agent-snap" import >/dev/null
rss=$( { /usr/bin/time -f '%M' "$bin/agent-run" --model echo --session big -m "one more" >/dev/null; } 2>&1 | tail -n 1)
echo "rss_10k $rss KiB"
rss_small=$( { /usr/bin/time -f '%M' "$bin/agent-run" --model echo --no-store -m "tiny" >/dev/null; } 2>&1 | tail -n 1)
echo "rss_small $rss_small KiB (one turn, no history, no store)"

s0=$(size)
t0=$(now_ns)
for i in $(seq 20); do "$bin/agent-run" --model echo --session big -m "big $i" >/dev/null; done
t1=$(now_ns)
s1=$(size)
echo "turn_10k $(( (t1 - t0) / 20 / 1000 )) us/turn (session of 10,000+ messages)"
echo "store_growth_10k $(( (s1 - s0) / 20 )) bytes/turn (session of 10,000+ messages)"
