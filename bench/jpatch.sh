#!/usr/bin/env bash
# bench/jpatch.sh BUILD_DIR - jpatch-apply and jpatch-diff against their peers.
#
#   bench/jpatch.sh [BUILD]        BENCH_RUNS rounds (default 9)
#
# Whole-process wall time: the median of BENCH_RUNS rounds in which agentkit
# and its peers take turns (bench/abtime), and the ratio the median of the
# rounds' ratios; on deterministic inputs generated into bench/out/jpatch/:
#   apply   a ~1,200-operation patch to a ~10 MB document
#   diff    two ~10 MB documents (~1,200 scattered changes)
#   stream  2,000 agent-run customPatch chunks, the live document after each
#   start   start-up: a one-operation patch on a tiny document
# Peers: fast-json-patch under Node (bench/jpatch/fjp.js; installed into
# bench/out/node, which git ignores, when node and npm exist) and jq
# (start-up, and the floor of any jq solution on 10 MB: parse and print).
# Then peak memory (max RSS) of apply and diff against the larger document.
# Goals agentkit keeps: apply <= 0.35x fast-json-patch, diff <= 0.25x,
# stream <= 0.05x, peak memory <= 6x the larger document.  Every tool's
# output is checked before its time counts.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init jpatch
build=$(cd "${1:-build}" 2>/dev/null && pwd) || bench_fail "no build directory ${1:-build}"
here=$top/bench/jpatch
out=$top/bench/out/jpatch
bin=$build/bin
runs=${BENCH_RUNS:-9}

if [ ! -s "$out/stream.ndjson" ] || [ "$here/gen.py" -nt "$out/stream.ndjson" ]; then
	echo "generating inputs in $out ..." >&2
	python3 "$here/gen.py" "$out" || bench_fail "cannot generate the inputs"
fi
node_ok=
if command -v node >/dev/null 2>&1; then
	if [ ! -d "$top/bench/out/node/node_modules/fast-json-patch" ] && command -v npm >/dev/null 2>&1; then
		npm install --silent --prefix "$top/bench/out/node" fast-json-patch >/dev/null 2>&1 || true
	fi
	[ -d "$top/bench/out/node/node_modules/fast-json-patch" ] && node_ok=1
fi
[ -n "$node_ok" ] || echo "jpatch.sh: no node or fast-json-patch: the Node peer is skipped" >&2
jq_ok=
command -v jq >/dev/null 2>&1 && jq_ok=1
fjp="node $here/fjp.js"
fjp_v=-
[ -z "$node_ok" ] || fjp_v="fast-json-patch $(node -p "require('$top/bench/out/node/node_modules/fast-json-patch/package.json').version") (node $(node --version))"
jq_v=-
[ -z "$jq_ok" ] || jq_v=$(jq --version)
same_json() { # A B: the two files hold equal JSON documents (one per line)
	python3 -c '
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
b = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
sys.exit(0 if a == b else "%s and %s differ" % tuple(sys.argv[1:3]))' "$1" "$2" || bench_fail "outputs differ"
}

# Correctness first: every tool must agree before its time counts.
"$bin/jpatch-apply" "$out/big.json" "$out/patch.json" >"$out/apply.ours" || bench_fail "jpatch-apply failed"
rc=0
"$bin/jpatch-diff" "$out/big.json" "$out/big2.json" >"$out/diff.ours" || rc=$?
[ "$rc" = 0 ] || bench_fail "jpatch-diff failed ($rc)"
"$bin/jpatch-apply" "$out/big.json" "$out/diff.ours" >"$out/diff.applied" || bench_fail "applying our diff failed"
same_json "$out/diff.applied" "$out/big2.json"
"$bin/jpatch-diff" --minimal "$out/big.json" "$out/big2.json" >"$out/diffm.ours" || bench_fail "jpatch-diff --minimal failed"
"$bin/jpatch-apply" "$out/big.json" "$out/diffm.ours" >"$out/diff.applied" || bench_fail "applying our minimal diff failed"
same_json "$out/diff.applied" "$out/big2.json"
"$bin/jpatch-apply" --stream "$out/init.json" <"$out/stream.ndjson" >"$out/stream.ours" ||
	bench_fail "jpatch-apply --stream failed"
[ "$(wc -l <"$out/stream.ours")" -ge 2000 ] || bench_fail "jpatch-apply --stream printed too few documents"
bench_expect '"a":2' "$bin/jpatch-apply" "$out/tiny.json" "$out/tinypatch.json"
if [ -n "$node_ok" ]; then
	$fjp apply "$out/big.json" "$out/patch.json" >"$out/apply.node" || bench_fail "fast-json-patch apply failed"
	same_json "$out/apply.ours" "$out/apply.node"
	$fjp stream "$out/init.json" <"$out/stream.ndjson" >"$out/stream.node" || bench_fail "the Node stream failed"
	same_json "$out/stream.ours" "$out/stream.node"
	$fjp diff "$out/big.json" "$out/big2.json" >"$out/diff.node" || bench_fail "fast-json-patch compare failed"
	"$bin/jpatch-apply" "$out/big.json" "$out/diff.node" >"$out/diff.applied" || bench_fail "applying Node's diff failed"
	same_json "$out/diff.applied" "$out/big2.json"
fi

ms() { awk -v u="$1" 'BEGIN { printf "%.2f", u / 1000 }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
# pair NAME GOAL OURS_CMD: OURS_CMD against the Node peer's NODE_CMD (or
# alone without node); sets ours_kb to agentkit's median peak RSS
pair() {
	local name=$1 goal=$2 ours=$3 node=$4
	if [ -n "$node_ok" ]; then
		bench_pairs "$runs" "$ours" "$node"
		bench_row "$name" "$(ms "${bench_t[0]}")" "$(ms "${bench_t[1]}")" ms "$goal" "$fjp_v" "${bench_r[1]}"
	else
		bench_pairs "$runs" "$ours"
		bench_row "$name" "$(ms "${bench_t[0]}")" - ms - -
	fi
	ours_kb=${bench_m[0]}
}
big=$out/big.json big2=$out/big2.json
pair "apply 1,200 ops to 10 MB" '<=0.35' "$bin/jpatch-apply $big $out/patch.json" \
	"$fjp apply $big $out/patch.json"
apply_kb=$ours_kb
pair "diff two 10 MB documents" '<=0.25' "$bin/jpatch-diff $big $big2" "$fjp diff $big $big2"
diff_kb=$ours_kb
pair "diff --minimal two 10 MB documents" - "$bin/jpatch-diff --minimal $big $big2" "$fjp diff $big $big2"
pair "stream 2,000 patches (live doc)" '<=0.05' "$bin/jpatch-apply --stream $out/init.json <$out/stream.ndjson" \
	"$fjp stream $out/init.json <$out/stream.ndjson"
pair "start-up (tiny apply)" - "$bin/jpatch-apply $out/tiny.json $out/tinypatch.json" \
	"$fjp apply $out/tiny.json $out/tinypatch.json"
if [ -n "$jq_ok" ]; then
	bench_pairs "$runs" "$bin/jpatch-apply $out/tiny.json $out/tinypatch.json" "jq -c '.a = 2' $out/tiny.json"
	bench_row "start-up (tiny apply) vs jq" "$(ms "${bench_t[0]}")" "$(ms "${bench_t[1]}")" ms - "$jq_v" "${bench_r[1]}"
	bench_pairs "$runs" "$bin/jpatch-apply $big $out/patch.json" "jq -c . $big"
	bench_row "apply 10 MB vs jq's parse-and-print" "$(ms "${bench_t[0]}")" "$(ms "${bench_t[1]}")" ms - "$jq_v" "${bench_r[1]}"
fi

# Peak memory against the larger document (the input's size, in MiB).
size() { wc -c <"$1" | tr -d ' '; }
larger=$(size "$big")
[ "$(size "$big2")" -le "$larger" ] || larger=$(size "$big2")
doc_mib=$(awk -v b="$larger" 'BEGIN { printf "%.1f", b / 1048576 }')
bench_row "apply peak RSS / the document" "$(mib "$apply_kb")" "$doc_mib" MiB '<=6' -
bench_row "diff peak RSS / the larger document" "$(mib "$diff_kb")" "$doc_mib" MiB '<=6' -
bench_done
