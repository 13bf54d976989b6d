#!/usr/bin/env bash
# listing.sh - agent-snap's listings at scale (issue 31): sessions newest
# first over a store of N sessions (default 100000), per session and at
# its peak memory, and --limit 10 at N sessions against the same at N/100
# (the index: near-constant in the store's size).
#
#   bench/listing.sh [BUILD]      (default build; ~1 minute)
#   N=20000 BENCH_RUNS=3 bench/listing.sh
#
# Each store holds one turn per session (a row with agent, model, title,
# usage and a two-message state), updated at times in no relation to the
# session IDs, so an ID-ordered walk would have to sort.  Every timed run
# is checked first: the full listing prints N lines, newest first; --limit
# 10 prints the 10 newest.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init listing
build=${1:-build}
n=${N:-100000}
runs=${BENCH_RUNS:-7}
small=$((n / 100))
bin=$top/$build/bin
[ -x "$bin/agent-snap" ] || bench_fail "no $bin/agent-snap (make first)"
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench-listing.XXXXXX")
trap 'rm -rf "$work"' EXIT

for k in "$n" "$small"; do
	bench_session_rows "$k" >"$work/rows"
	bench_expect "{\"imported\":$k}" env AGENTKIT_STORE="$work/s$k" "$bin/agent-snap" import "$work/rows"
done
rm -f "$work/rows"

# check K ARGS...: the listing's lines of store sK are right: COUNT lines,
# updatedAt never increasing
check() {
	local k=$1 count=$2
	shift 2
	bench_expect '"sessionId":"s-' env AGENTKIT_STORE="$work/s$k" "$bin/agent-snap" sessions "$@"
	[ "$(wc -l <"$bench_out")" = "$count" ] ||
		bench_fail "sessions $* over $k sessions printed $(wc -l <"$bench_out") lines, not $count"
	awk -F '"updatedAt":"' '{ split($2, a, "\""); if (NR > 1 && a[1] > last) bad = 1; last = a[1] }
		END { exit bad }' "$bench_out" || bench_fail "sessions $* over $k sessions: not newest first"
}
check "$n" "$n" --format ndjson
check "$n" 10 --format ndjson --limit 10
check "$small" 10 --format ndjson --limit 10

full="AGENTKIT_STORE=$work/s$n $bin/agent-snap sessions --format ndjson"
bench_pairs "$runs" "$full" "AGENTKIT_STORE=$work/s$n $bin/agent-snap sessions --format ndjson --limit 10" \
	"AGENTKIT_STORE=$work/s$small $bin/agent-snap sessions --format ndjson --limit 10"
per=$(awk -v t="${bench_t[0]}" -v n="$n" 'BEGIN { printf "%.3f", t / n }')
bench_row "sessions, per session ($n sessions)" "$per" - us '<=5' -
bench_row "sessions, peak RSS ($n sessions)" "$(awk -v m="${bench_m[0]}" 'BEGIN { printf "%.1f", m / 1024 }')" - MiB '<=20' -
bench_row "sessions --limit 10: $n sessions vs $small" "${bench_t[1]}" "${bench_t[2]}" us '<=1.5' \
	"the same at $small sessions"
bench_done
