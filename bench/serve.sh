#!/usr/bin/env bash
# serve.sh - agents over HTTP (issue 28, docs/serve.md): agent-serve
# against a local turn, and against Genkit JS 1.42's express handler
# serving the same echo agent, through the same client.
#
#   bench/serve.sh [BUILD]          (default build; about a minute)
#   N=30 ROUNDS=5 bench/serve.sh    turns per round, rounds (defaults)
#   WARM=100 bench/serve.sh         untimed turns a node client runs first
#
# Prints "name value unit" lines, and rows of the results table
# (bench/lib.sh):
#   http_turn, local_turn, http_extra
#                  one echo turn through agent-serve over loopback as a
#                  running client sees it (curl's time_total; the server's
#                  agent-run child included), one as a local agent-run
#                  process (bench/abtime), ROUNDS rounds of N in turn, the
#                  medians and their difference (goal <= 1 ms)
#   client_process, curl_process
#                  agent-run --url as a whole process against curl's, one
#                  turn on agent-serve: both load libcurl, whose loading
#                  is most of either
#   curl_serve_p50, curl_genkit_p50
#                  one streamed turn (Genkit's Accept header, a fresh
#                  session) through curl, agent-serve vs Genkit's
#                  expressHandler, ROUNDS rounds of N interleaved, the
#                  medians (goal <= 0.2): the client's cost is small and
#                  the same for both, so the ratio is the servers'
#   serve_p50, genkit_p50, express_ratio
#                  one streamed turn through Genkit JS's remoteAgent
#                  client (bench/serve-client.cjs, one node process that
#                  times its own turns after WARM untimed ones, so that
#                  its JIT is warm, as a long-running client's is; cold,
#                  node's own warm-up is most of a turn): agent-serve vs
#                  Genkit's expressHandler on the same echo agent
#                  (tests/fixtures/serve/genkit-server.cjs), ROUNDS rounds
#                  in turn, the median of the rounds' p50s and of their
#                  ratios (goal <= 0.2); needs node and
#                  scripts/genkit-client, else these rows are skipped
#   floor_p50, floor_ratio
#                  the same client, in the same rounds, against a node
#                  server that does no work (bench/serve-floor.cjs: one
#                  fixed answer): the client's own cost, the least any
#                  server's figure can be, and its ratio to Genkit's
#   c100_turns_per_s, c100_peak_rss
#                  200 streamed turns, 100 at a time, against agent-serve
#                  --max-concurrent 100: turns per second, and agent-serve's
#                  own peak RSS (VmHWM; its agent-run children not
#                  counted); Genkit's express server's turns/s beside it
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init serve
build=${1:-build}
n=${N:-30}
rounds=${ROUNDS:-5}
warm=${WARM:-100}
case $build in /*) bin="$build/bin" ;; *) bin="$top/$build/bin" ;; esac
mods=$top/bench/out/genkit/node_modules
base=/dev/shm
[ -d "$base" ] && [ -w "$base" ] || base=${TMPDIR:-/tmp}
work=$(mktemp -d "$base/agentkit-bench.XXXXXX")
server= genkit= floor=
trap '[ -z "$server" ] || kill "$server" 2>/dev/null; [ -z "$genkit" ] || kill "$genkit" 2>/dev/null; [ -z "$floor" ] || kill "$floor" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
export AGENTKIT_STORE=$work/store
mkdir agents
printf -- '---\ndescription: answers what it is told (the echo model)\nmodel: echo\n---\n{{history}}\n' >agents/echo.prompt

# start_serve [OPTION]...: agent-serve on a free loopback port; $url, $server
start_serve() {
	"$bin/agent-serve" --listen 127.0.0.1:0 --agents agents "$@" 2>serve.log &
	server=$!
	for _ in $(seq 100); do grep -q 'listening on' serve.log && break; sleep 0.05; done
	url=$(sed -n 's/^agent-serve: listening on //p' serve.log)/echo
	[ "$url" != /echo ] || bench_fail "agent-serve did not start: $(head -c 300 serve.log)"
}

stop_serve() {
	kill "$server"
	wait "$server" || true
	server=
}

# ---- loopback HTTP vs local ----
start_serve
echo '{"data":{"message":{"role":"user","content":[{"text":"hi"}]}}}' >body.json
body=@body.json
bench_expect '"finishReason":"stop"' "$bin/agent-run" --url "$url" -m hi
bench_expect '"finishReason":"stop"' "$bin/agent-run" echo --agents agents -m hi
bench_expect '"finishReason":"stop"' curl -sf "$url" -d "$body"
# The turn as a running client sees it (curl's time_total: request sent
# to answer read, the server's agent-run child included) against the same
# turn as a local agent-run process, in turn, round by round.
: >http.times
: >local.times
for _ in $(seq "$rounds"); do
	for _ in $(seq "$n"); do
		curl -sf -o /dev/null -w '%{time_total}\n' "$url" -d "$body" >>http.times ||
			bench_fail "a turn through agent-serve failed"
	done
	bench_pairs "$n" "$bin/agent-run echo --agents agents -m hi"
	echo "${bench_t[0]}" >>local.times
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
t_http=$(median $(awk '{ printf "%d\n", $1 * 1e6 }' http.times))
t_local=$(median $(cat local.times))
extra=$(awk -v a="$t_http" -v b="$t_local" 'BEGIN { printf "%.2f", (a - b) / 1000 }')
bench_row "one echo turn through agent-serve (loopback, a running client) vs a local agent-run" \
	"$t_http" "$t_local" us - "agent-run, local"
bench_row "one echo turn over loopback HTTP: extra over local" "$extra" - ms '<=1' -
# The client as a process: agent-run --url against curl, both loading libcurl.
bench_pairs "$((n * rounds / 2))" "$bin/agent-run --url $url -m hi" "curl -sf $url -d $body"
curl_v=$(curl --version | head -n 1 | cut -d ' ' -f 1-2)
bench_row "agent-run --url as a whole process vs curl, one turn on agent-serve" \
	"${bench_t[0]}" "${bench_t[1]}" us - "$curl_v" "${bench_r[1]}"
echo "http_turn $t_http us"
echo "local_turn $t_local us"
echo "http_extra $extra ms"
echo "client_process ${bench_t[0]} us"
echo "curl_process ${bench_t[1]} us"

if ! command -v node >/dev/null; then
	echo "serve.sh: no node; the Genkit rows are skipped" >&2
	stop_serve
	bench_done
	exit 0
fi
if [ ! -f "$mods/@genkit-ai/express/package.json" ]; then
	echo "serve.sh: genkit is not installed (scripts/genkit-client); the Genkit rows are skipped" >&2
	stop_serve
	bench_done
	exit 0
fi
genkit_v="genkit $(node -p "require('$mods/genkit/package.json').version") express handler (node $(node --version))"
node "$top/tests/fixtures/serve/genkit-server.cjs" "$mods" port 2>genkit.log &
genkit=$!
for _ in $(seq 200); do [ -s port ] && break; sleep 0.1; done
[ -s port ] || bench_fail "the Genkit server did not start: $(head -c 300 genkit.log)"
gurl="http://127.0.0.1:$(cat port)/echo"
node "$top/bench/serve-floor.cjs" floor.port 2>floor.log &
floor=$!
for _ in $(seq 100); do [ -s floor.port ] && break; sleep 0.1; done
[ -s floor.port ] || bench_fail "the floor server did not start: $(head -c 300 floor.log)"
furl="http://127.0.0.1:$(cat floor.port)/echo"
client() {
	node "$top/bench/serve-client.cjs" "$mods" "$@"
}
bench_expect p50 client "$url" 2 1
bench_expect p50 client "$gurl" 2 1
bench_expect p50 client "$furl" 2 1

# ---- curl as the one client: agent-serve vs Genkit's express handler ----
# The same streamed request (Genkit's client's Accept header, a fresh
# session each time) through curl, N turns on each server in turn, ROUNDS
# rounds: the client costs both the same and little, so the ratio is the
# servers'.
sse='Accept: text/event-stream' json='Content-Type: application/json'
init='{"data":{"message":{"role":"user","content":[{"text":"hi"}]}},"init":{}}'
bench_expect '"finishReason":"stop"' curl -sfN -H "$sse" -H "$json" "$url" -d "$init"
bench_expect '"finishReason":"stop"' curl -sfN -H "$sse" -H "$json" "$gurl" -d "$init"
: >cs.times
: >cg.times
for _ in $(seq "$rounds"); do
	for _ in $(seq "$n"); do
		curl -sfN -H "$sse" -H "$json" -o /dev/null -w '%{time_total}\n' "$url" -d "$init" >>cs.times ||
			bench_fail "a streamed turn through agent-serve failed"
		curl -sfN -H "$sse" -H "$json" -o /dev/null -w '%{time_total}\n' "$gurl" -d "$init" >>cg.times ||
			bench_fail "a streamed turn through Genkit's server failed"
	done
done
cs=$(median $(awk '{ printf "%d\n", $1 * 1e6 }' cs.times))
cg=$(median $(awk '{ printf "%d\n", $1 * 1e6 }' cg.times))
bench_row "one streamed turn through curl: agent-serve vs Genkit's express handler" \
	"$cs" "$cg" us '<=0.2' "$genkit_v"
echo "curl_serve_p50 $cs us"
echo "curl_genkit_p50 $cg us"

# ---- the same client, agent-serve vs Genkit's express handler ----
s_p50=() g_p50=() f_p50=() ratios=() fratios=()
for _ in $(seq "$rounds"); do
	client "$url" "$n" 1 "$warm" >a.out || bench_fail "the client failed on agent-serve"
	client "$gurl" "$n" 1 "$warm" >g.out || bench_fail "the client failed on Genkit's server"
	client "$furl" "$n" 1 "$warm" >f.out || bench_fail "the client failed on the floor server"
	a=$(bench_pick a.out p50) g=$(bench_pick g.out p50) f=$(bench_pick f.out p50)
	s_p50+=("$a") g_p50+=("$g") f_p50+=("$f")
	ratios+=("$(awk -v a="$a" -v g="$g" 'BEGIN { printf "%.3f", a / g }')")
	fratios+=("$(awk -v a="$f" -v g="$g" 'BEGIN { printf "%.3f", a / g }')")
done
sp=$(median "${s_p50[@]}") gp=$(median "${g_p50[@]}") r=$(median "${ratios[@]}")
fp=$(median "${f_p50[@]}") fr=$(median "${fratios[@]}")
bench_row "one streamed turn through Genkit's remoteAgent: agent-serve vs Genkit's express handler" \
	"$sp" "$gp" us '<=0.2' "$genkit_v" "$r"
bench_row "the same client's floor: a node server that does no work vs Genkit's express handler" \
	"$fp" "$gp" us - "$genkit_v" "$fr"
echo "serve_p50 $sp us"
echo "genkit_p50 $gp us"
echo "express_ratio $r"
echo "floor_p50 $fp us"
echo "floor_ratio $fr"

# ---- 100 concurrent streaming clients ----
stop_serve
start_serve --max-concurrent 100 --max-connections 256
client "$url" 200 100 >c.out || bench_fail "the client failed with 100 at once on agent-serve"
client "$gurl" 200 100 >cg.out || bench_fail "the client failed with 100 at once on Genkit's server"
tps=$(bench_pick c.out turns_per_s) gtps=$(bench_pick cg.out turns_per_s)
rss=$(awk '/^VmHWM:/ { print $2 }' "/proc/$server/status")
[ -n "$rss" ] || bench_fail "no peak RSS for agent-serve"
bench_row "100 concurrent streamed turns (200 in all): turns/s, agent-serve vs Genkit's express" \
	"$tps" "$gtps" turns/s - "$genkit_v"
bench_row "100 concurrent streamed turns: agent-serve's peak RSS (children not counted)" \
	"$rss" - KiB - -
echo "c100_turns_per_s $tps turns/s"
echo "c100_genkit_turns_per_s $gtps turns/s"
echo "c100_peak_rss $rss KiB"
stop_serve
bench_done
