#!/usr/bin/env bash
# bench/jpatch.sh BUILD_DIR - jpatch-apply and jpatch-diff against their peers.
#
# Whole-process wall time, median of BENCH_RUNS (default 7) runs after a
# warm-up, on deterministic inputs generated into bench/out/jpatch/:
#   apply   a ~1,200-operation patch to a ~10 MB document
#   diff    two ~10 MB documents (~1,200 scattered changes)
#   stream  2,000 agent-run customPatch chunks, the live document after each
#   start   start-up: a one-operation patch on a tiny document
# Peers: fast-json-patch under Node (bench/jpatch/fjp.js; installed into
# bench/out/node, which git ignores, when node and npm exist) and jq
# (start-up, and the floor of any jq solution on 10 MB: parse and print).
# Ratio = best peer / ours.  Then peak memory (max RSS of the process) of
# apply and diff against their input, and the time of each as a fraction
# of the fast-json-patch Node CLI's, with the targets agentkit keeps:
# apply <= 0.35x, diff <= 0.25x, memory <= 6x the input.
set -u
build=$(cd "${1:-build}" && pwd) || exit 111
top=$(cd "$(dirname "$0")/.." && pwd)
here=$top/bench/jpatch
out=$top/bench/out/jpatch
bin=$build/bin
runs=${BENCH_RUNS:-7}
t() { python3 "$here/timeit.py" --runs "$runs" "$@"; }

if [ ! -s "$out/stream.ndjson" ] || [ "$here/gen.py" -nt "$out/stream.ndjson" ]; then
	echo "generating inputs in $out ..." >&2
	python3 "$here/gen.py" "$out" || exit 111
fi
node_ok=
if command -v node >/dev/null 2>&1; then
	if [ ! -d "$top/bench/out/node/node_modules/fast-json-patch" ] && command -v npm >/dev/null 2>&1; then
		npm install --silent --prefix "$top/bench/out/node" fast-json-patch >/dev/null 2>&1
	fi
	[ -d "$top/bench/out/node/node_modules/fast-json-patch" ] && node_ok=1
fi
jq_ok=
command -v jq >/dev/null 2>&1 && jq_ok=1
fjp="$here/fjp.js"

# Correctness first: every tool must agree before its time counts.
"$bin/jpatch-apply" "$out/big.json" "$out/patch.json" >"$out/apply.ours" || exit 1
"$bin/jpatch-diff" "$out/big.json" "$out/big2.json" >"$out/diff.ours" || exit 1
"$bin/jpatch-apply" "$out/big.json" "$out/diff.ours" | python3 -c '
import json, sys
a = json.load(sys.stdin); b = json.load(open(sys.argv[1]))
sys.exit(0 if a == b else "bench: our diff does not reproduce big2.json")' "$out/big2.json" || exit 1
if [ -n "$node_ok" ]; then
	node "$fjp" apply "$out/big.json" "$out/patch.json" >"$out/apply.node" || exit 1
	python3 -c '
import json, sys
sys.exit(0 if json.load(open(sys.argv[1])) == json.load(open(sys.argv[2])) else "bench: apply results differ")' \
		"$out/apply.ours" "$out/apply.node" || exit 1
fi

row() { # name ours peer...
	local name=$1 ours=$2 best= p
	shift 2
	for p in "$@"; do
		[ "$p" = "-" ] && continue
		if [ -z "$best" ] || awk "BEGIN{exit !($p < $best)}"; then best=$p; fi
	done
	local ratio=-
	[ -n "$best" ] && ratio=$(awk "BEGIN{printf \"%.2fx\", $best / $ours}")
	printf '%-34s %10s' "$name" "$(awk "BEGIN{printf \"%.1f\", $ours * 1000}")"
	for p in "$@"; do
		if [ "$p" = "-" ]; then printf ' %14s' "-"; else printf ' %14s' "$(awk "BEGIN{printf \"%.1f\", $p * 1000}")"; fi
	done
	printf ' %8s\n' "$ratio"
}

echo "jpatch: median of $runs runs, milliseconds (ratio = fastest peer / agentkit)"
printf '%-34s %10s %14s %14s %8s\n' workload agentkit fast-json-patch jq ratio
set -- $(t --rss -- "$bin/jpatch-apply" "$out/big.json" "$out/patch.json")
apply_t=$1 apply_rss=$2
node=- jq=- apply_node=- apply_node_rss=-
if [ -n "$node_ok" ]; then
	set -- $(t --rss -- node "$fjp" apply "$out/big.json" "$out/patch.json")
	node=$1 apply_node=$1 apply_node_rss=$2
fi
[ -n "$jq_ok" ] && jq=$(t -- jq -c . "$out/big.json")
row "apply 1,200 ops to 10 MB" "$apply_t" "$node" "$jq"
set -- $(t --rss -- "$bin/jpatch-diff" "$out/big.json" "$out/big2.json")
diff_t=$1 diff_rss=$2
node=- diff_node=- diff_node_rss=-
if [ -n "$node_ok" ]; then
	set -- $(t --rss -- node "$fjp" diff "$out/big.json" "$out/big2.json")
	node=$1 diff_node=$1 diff_node_rss=$2
fi
row "diff two 10 MB documents" "$diff_t" "$node" -
ours=$(t -- "$bin/jpatch-diff" --minimal "$out/big.json" "$out/big2.json")
row "diff --minimal two 10 MB documents" "$ours" "$node" -
ours=$(t --stdin "$out/stream.ndjson" -- "$bin/jpatch-apply" --stream "$out/init.json")
node=-
[ -n "$node_ok" ] && node=$(t --stdin "$out/stream.ndjson" -- node "$fjp" stream "$out/init.json")
row "stream 2,000 patches (live doc)" "$ours" "$node" -
ours=$(t --repeat 20 -- "$bin/jpatch-apply" "$out/tiny.json" "$out/tinypatch.json")
node=- jq=-
[ -n "$node_ok" ] && node=$(t --repeat 5 -- node "$fjp" apply "$out/tiny.json" "$out/tinypatch.json")
[ -n "$jq_ok" ] && jq=$(t --repeat 20 -- jq -c '.a = 2' "$out/tiny.json")
row "start-up (tiny apply)" "$ours" "$node" "$jq"
ours=$(t --repeat 20 -- "$bin/jpatch-diff" "$out/tiny.json" "$out/tiny2.json")
node=-
[ -n "$node_ok" ] && node=$(t --repeat 5 -- node "$fjp" diff "$out/tiny.json" "$out/tiny2.json")
row "start-up (tiny diff)" "$ours" "$node" -

size() { wc -c <"$1" | tr -d ' '; }
apply_in=$(( $(size "$out/big.json") + $(size "$out/patch.json") ))
diff_in=$(( $(size "$out/big.json") + $(size "$out/big2.json") ))
mem() { # name input-bytes rss-kb peer-rss-kb
	local peer=-
	[ "$4" != "-" ] && peer=$(awk "BEGIN{printf \"%.1f\", $4 / 1024}")
	printf '%-34s %10s %10s %8s %14s\n' "$1" "$(awk "BEGIN{printf \"%.1f\", $2 / 1048576}")" \
		"$(awk "BEGIN{printf \"%.1f\", $3 / 1024}")" \
		"$(awk "BEGIN{printf \"%.1fx\", $3 * 1024 / $2}")" "$peer"
}
echo
echo "peak memory: max RSS in MB (x input = agentkit's RSS / input size; target <= 6x)"
printf '%-34s %10s %10s %8s %14s\n' workload input agentkit "x input" fast-json-patch
mem "apply 1,200 ops to 10 MB" "$apply_in" "$apply_rss" "$apply_node_rss"
mem "diff two 10 MB documents" "$diff_in" "$diff_rss" "$diff_node_rss"
if [ -n "$node_ok" ]; then
	echo
	echo "whole-process time as a fraction of the fast-json-patch Node CLI's"
	printf '%-34s %10s %8s\n' workload "agentkit/fjp" target
	printf '%-34s %10s %8s\n' "apply 1,200 ops to 10 MB" \
		"$(awk "BEGIN{printf \"%.2fx\", $apply_t / $apply_node}")" "0.35x"
	printf '%-34s %10s %8s\n' "diff two 10 MB documents" \
		"$(awk "BEGIN{printf \"%.2fx\", $diff_t / $diff_node}")" "0.25x"
fi
