# bench/lib.sh - what every bench/*.sh shares: runs that fail loudly, medians
# of interleaved runs, and one results table.  Source it (bash):
#
#   . "$(dirname "$0")/lib.sh"
#   bench_init NAME                 first: NAME is the script's, for the table
#   bench_expect WANT CMD...        run CMD once: fail the script unless it
#                                   exits 0 and its stdout holds WANT (a fixed
#                                   string; '' for any output); the output
#                                   goes to $bench_out
#   bench_pairs RUNS CMD...         bench/abtime --ratio: the commands' median
#                                   times in microseconds in bench_t[0], [1],
#                                   ..., and in bench_r[k] the median of the
#                                   ratios of the first command's runs to
#                                   command k's (ours first: OURS/PEER)
#                                   (interleaved, round by round), in
#                                   bench_m[k] its median peak RSS in KiB
#                                   (abtime's own ~14 MiB is its floor); a failed
#                                   run fails the script (bench_pairs --cpu
#                                   RUNS CMD...: CPU times, not wall times).
#                                   Call it as it is, not in $(...), so that
#                                   it sets them
#   bench_row MEASURE OURS PEER UNIT GOAL PEER_VERSION [RATIO]
#                                   one row of the table (see below)
#   bench_pick FILE NAME [FIELD]    from a program's "name value unit"
#                                   lines in FILE, line NAME's FIELD (default
#                                   2); fails the script when it is missing
#   bench_done                      last: prints the table when the script
#                                   runs alone (bench/run prints one for all)
#   bench_fail MESSAGE              say what failed and exit 1
#   bench_version CMD...            CMD's first line of output, or '-'
#
# A row: MEASURE names it; OURS is agentkit's median, PEER the peer's or the
# limit's median ('-' when there is none), in UNIT; RATIO is OURS/PEER unless
# given (give the median of pair ratios from bench_pairs).  GOAL is '-' or
# '<=N' / '>=N', judged on the ratio when there is a peer, else on OURS.
# PEER_VERSION names the peer and its version ('-' for none).  The load is
# /proc/loadavg's one-minute figure when the row is written.
#
# Rows go to $BENCH_RESULTS, tab-separated: script, measure, ours, peer,
# unit, ratio, goal, verdict (met, MISSED or -), peer version, load.
# bench/run sets BENCH_RESULTS for all scripts; a script run alone writes
# bench/out/NAME.tsv.  bench_table FILE prints such a file.

bench_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

bench_init() {
	BENCH_NAME=$1
	bench_alone=
	if [ -z "${BENCH_RESULTS:-}" ]; then
		mkdir -p "$bench_top/bench/out"
		BENCH_RESULTS=$bench_top/bench/out/$1.tsv
		: >"$BENCH_RESULTS"
		bench_alone=1
	fi
	export BENCH_RESULTS
	bench_out=$(mktemp "${TMPDIR:-/tmp}/agentkit-bench-out.XXXXXX")
}

bench_fail() {
	echo "bench/$BENCH_NAME: $*" >&2
	exit 1
}

bench_expect() {
	local want=$1 rc=0
	shift
	"$@" >"$bench_out" 2>"$bench_out.err" || rc=$?
	if [ "$rc" != 0 ]; then
		sed 's/^/  /' "$bench_out.err" | tail -n 5 >&2
		bench_fail "$*: exit status $rc"
	fi
	[ -z "$want" ] || grep -qF -- "$want" "$bench_out" ||
		bench_fail "$*: its output has no '$want': $(head -c 300 "$bench_out")"
}

bench_pairs() {
	local out t r m
	out=$("$bench_top/bench/abtime" --ratio --rss "$@") || bench_fail "timing failed"
	bench_t=() bench_r=() bench_m=()
	while read -r t r m; do
		bench_t+=("$t")
		bench_r+=("$r")
		bench_m+=("$m")
	done <<<"$out"
}

bench_pick() {
	local v
	v=$(awk -v n="$2" -v f="${3:-2}" '$1 == n { v = $f } END { print v }' "$1")
	[ -n "$v" ] || bench_fail "no $2 in what the benchmark printed"
	echo "$v"
}

bench_version() {
	local v
	v=$("$@" 2>&1 | head -n 1) && [ -n "$v" ] && echo "$v" || echo -
}

bench_load() {
	cut -d ' ' -f 1 /proc/loadavg 2>/dev/null || echo -
}

# bench_verdict GOAL VALUE: met, MISSED or -
bench_verdict() {
	case $1 in
	'<='*) awk -v g="${1#<=}" -v v="$2" 'BEGIN { print (v + 0 <= g + 0 ? "met" : "MISSED") }' ;;
	'>='*) awk -v g="${1#>=}" -v v="$2" 'BEGIN { print (v + 0 >= g + 0 ? "met" : "MISSED") }' ;;
	*) echo - ;;
	esac
}

bench_row() {
	local measure=$1 ours=$2 peer=$3 unit=$4 goal=$5 version=$6 ratio=${7:-} judged
	case $ours in '' | *[!0-9.e+-]*) bench_fail "$measure: '$ours' is not a figure" ;; esac
	if [ -z "$ratio" ]; then
		ratio=-
		[ "$peer" = - ] || ratio=$(awk -v a="$ours" -v b="$peer" 'BEGIN { if (b + 0) printf "%.3f", a / b; else print "-" }')
	fi
	judged=$ratio
	[ "$peer" != - ] || judged=$ours
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$BENCH_NAME" "$measure" "$ours" "$peer" \
		"$unit" "$ratio" "$goal" "$(bench_verdict "$goal" "$judged")" "$version" "$(bench_load)" \
		>>"$BENCH_RESULTS"
}

bench_table() {
	[ -s "$1" ] || { echo "(no rows)"; return; }
	awk -F '\t' '
	{ for (i = 1; i <= NF; i++) { c[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } }
	END {
		split("script measure agentkit peer/limit unit ratio goal verdict peer-version load", h, " ")
		for (i = 1; i <= 10; i++) if (length(h[i]) > w[i]) w[i] = length(h[i])
		for (i = 1; i <= 10; i++) printf "%-*s%s", w[i], h[i], i < 10 ? "  " : "\n"
		for (r = 1; r <= NR; r++)
			for (i = 1; i <= 10; i++) printf "%-*s%s", w[i], c[r, i], i < 10 ? "  " : "\n"
	}' "$1"
}

bench_done() {
	rm -f "$bench_out" "$bench_out.err"
	if [ -n "$bench_alone" ]; then
		echo
		bench_table "$BENCH_RESULTS"
	fi
}

# bench_session_rows K: K sessions' rows as NDJSON, one each (agent,
# model, title, usage and a two-message state); session i was updated at
# a time that a multiplicative step scatters over K seconds of 2026, in
# no relation to the session IDs
bench_session_rows() {
	awk -v k="$1" 'BEGIN {
		for (i = 0; i < k; i++) {
			t = (i * 7919) % k
			s = sprintf("2026-01-%02dT%02d:%02d:%02d.%06dZ", 1 + int(t / 86400) % 28,
			            int(t / 3600) % 24, int(t / 60) % 60, t % 60, i % 1000000)
			printf "{\"snapshotId\":\"r-%07d\",\"sessionId\":\"s-%07d\",\"createdAt\":\"%s\",", i, i, s
			printf "\"updatedAt\":\"%s\",\"status\":\"completed\",\"finishReason\":\"stop\",", s
			printf "\"agentkit\":{\"agent\":\"tasks\",\"model\":\"echo\",\"title\":\"plan the week %d\",", i
			printf "\"usage\":{\"inputTokens\":12,\"outputTokens\":30,\"totalTokens\":42},"
			printf "\"sessionUsage\":{\"inputTokens\":12,\"outputTokens\":30,\"totalTokens\":42}},"
			printf "\"state\":{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"plan the week\"}]},"
			printf "{\"role\":\"model\",\"content\":[{\"text\":\"Monday: ...\"}]}]}}\n"
		}
	}'
}
