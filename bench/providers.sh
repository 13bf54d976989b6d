#!/usr/bin/env bash
# providers.sh - the HTTP model client against curl on the same mock stream.
#
#   bench/providers.sh [BUILD]        (default build)
#
# 1. Added latency to the first streamed chunk: time from process start to
#    the first reply text on stdout, model-call (the provider stack:
#    libcurl + SSE parser + chunk mapping) minus curl -N reading the same
#    OpenAI-dialect stream from scripts/mock-model.  Median of 30 runs each.
#    Target: <= 2 ms.
#    The whole turn, process start to exit, against curl's: target <= 1.05x.
# 2. Chunk throughput: a 20000-delta stream, chunks per second through
#    model-call versus curl, the median of 5 runs each, in turn.
# 3. agent-run's own turn (--no-store, the same mock) against curl -N
#    posting the body agent-run sends: the median of 10*N pairs in turn
#    (bench/abtime), and with valgrind the instructions of each (callgrind),
#    which a busy machine does not move.  Target: <= 1.05x.
# 4. A turn resuming a 10,000-message session (15 MB) against curl -N
#    posting the same body: CPU, medians of N pairs.  Target: <= 1.5x.
#
#   N=10 bench/providers.sh          fewer runs (default 30)
#
# Every run's exit status is checked, and that it printed the reply.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
bench_init providers
build=${1:-build}
helper="$top/$build/tests/helpers/model-call"
[ -x "$helper" ] || bench_fail "build first ($helper missing)"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy
figures=$(mktemp "${TMPDIR:-/tmp}/agentkit-bench-providers.XXXXXX")
trap 'rm -f "$figures"' EXIT
RUNS=${N:-30} python3 - "$top" "$helper" "$figures" <<'PY' || bench_fail "a run failed"
import atexit, json, os, statistics, subprocess, sys, tempfile, time
top, helper, figures = sys.argv[1], sys.argv[2], sys.argv[3]
tmp = tempfile.mkdtemp(prefix="bench-providers.")
RUNS = int(os.environ["RUNS"])
N = 20000

mocks = []
atexit.register(lambda: [m.terminate() for m in mocks])

def start_mock(turns):
    script = os.path.join(tmp, "script.json")
    with open(script, "w") as f:
        json.dump(turns, f)
    pf = os.path.join(tmp, "port")
    if os.path.exists(pf):
        os.unlink(pf)
    p = subprocess.Popen([os.path.join(top, "scripts/mock-model"), "--dialect", "openai",
                          "--script", script, "--log", os.path.join(tmp, "log"),
                          "--port-file", pf], stdout=subprocess.DEVNULL)
    mocks.append(p)
    for _ in range(1000):
        if os.path.exists(pf):
            break
        time.sleep(0.01)
    else:
        sys.exit("providers.sh: the mock model did not start in 10 s")
    return p, int(open(pf).read())

req = {"model": "openai/gpt-bench", "messages": [{"role": "user", "content": [{"text": "hi"}]}]}
wire = json.dumps({"model": "gpt-bench", "messages": [{"role": "user", "content": "hi"}],
                   "stream": True, "stream_options": {"include_usage": True}})

def first_text(cmd, stdin, marker):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    p.stdin.write(stdin.encode()); p.stdin.close()
    t, last = None, b""
    for line in p.stdout:
        if t is None and marker in line:
            t = time.perf_counter() - t0
        last = line if line.strip() else last
    rc = p.wait()
    if rc or t is None:
        sys.exit("providers.sh: %s: %s (last line %r)"
                 % (cmd[0], "exit status %d" % rc if rc else "no %r" % marker, last[:200]))
    return t, time.perf_counter() - t0

def curl_cmd(port):
    return ["curl", "-sN", "--no-buffer", "-H", "Authorization: Bearer k", "-H", "Content-Type: application/json",
            "--data-binary", "@-", "http://127.0.0.1:%d/v1/chat/completions" % port]

env = dict(os.environ)
# Latency: each run is one turn; the first delta follows the role chunk.
mock, port = start_mock([{"text": "Hello there world", "repeat": 2 * RUNS + 4}])
env.update(OPENAI_BASE_URL="http://127.0.0.1:%d/v1" % port, OPENAI_API_KEY="k")
for _ in range(2):  # warm-up
    first_text(curl_cmd(port), wire, b"Hello")
    first_text([helper], json.dumps(req), b"Hello")
c, m = [], []
for _ in range(RUNS):
    c.append(first_text(curl_cmd(port), wire, b"Hello"))
    m.append(first_text([helper], json.dumps(req), b"Hello"))
mock.terminate(); mock.wait()
cm, mm = statistics.median(x[0] for x in c) * 1000, statistics.median(x[0] for x in m) * 1000
print("first chunk: curl %.2f ms, model-call %.2f ms, added %.2f ms (median of %d; target <= 2 ms)"
      % (cm, mm, mm - cm, RUNS))
ct, mt = statistics.median(x[1] for x in c) * 1000, statistics.median(x[1] for x in m) * 1000
turn_ratio = statistics.median(b[1] / a[1] for a, b in zip(c, m))
print("whole turn: curl %.2f ms, model-call %.2f ms, %.3fx (median of pairs; target <= 1.05x)"
      % (ct, mt, turn_ratio))
out = open(figures, "w")
out.write("first_added %.3f\nfirst_curl %.3f\nfirst_ours %.3f\n" % (mm - cm, cm, mm))
out.write("turn_curl %.3f\nturn_ours %.3f\nturn_ratio %.4f\n" % (ct, mt, turn_ratio))

# Throughput.
mock, port = start_mock([{"chunks": ["tok%d " % i for i in range(N)], "repeat": 10}])
env.update(OPENAI_BASE_URL="http://127.0.0.1:%d/v1" % port)
ct, mt = [], []
for _ in range(5):
    ct.append(first_text(curl_cmd(port), wire, b"tok%d " % (N - 1))[1])
    mt.append(first_text([helper], json.dumps(req), b"tok%d " % (N - 1))[1])
mock.terminate(); mock.wait()
print("throughput (%d deltas): curl %.0f chunks/s, model-call %.0f chunks/s (median of 5 in turn)"
      % (N, N / statistics.median(ct), N / statistics.median(mt)))
out.write("tput_curl %.0f\ntput_ours %.0f\ntput_ratio %.4f\n" % (N / statistics.median(ct),
          N / statistics.median(mt), statistics.median(a / b for a, b in zip(ct, mt))))
out.close()
PY
curl_v=$(curl --version | head -n 1 | cut -d ' ' -f 1-2)
f() { bench_pick "$figures" "$1"; }
bench_row "provider turn, first chunk: added over curl -N" "$(f first_added)" - ms '<=2' "$curl_v"
bench_row "provider turn (whole process) vs curl -N" "$(f turn_ours)" "$(f turn_curl)" ms '<=1.05' \
	"$curl_v" "$(f turn_ratio)"
bench_row "20,000-delta stream, chunks/s vs curl -N" "$(f tput_ours)" "$(f tput_curl)" 1/s - \
	"$curl_v" "$(f tput_ratio)"

# 3. agent-run itself: one --no-store turn of an OpenAI-dialect model
#    against curl -N posting the same request body, whole processes in
#    turn (bench/abtime), and their instructions (callgrind), which a busy
#    machine does not move.
work=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-bench-providers.XXXXXX")
mock=
trap 'rm -f "$figures"; [ -z "$mock" ] || kill "$mock" 2>/dev/null; rm -rf "$work"' EXIT
echo '{"text": "hello", "repeat": 1000000}' >"$work/turns.ndjson"
"$top/scripts/mock-model" --dialect openai --script "$work/turns.ndjson" --log /dev/null \
	--port-file "$work/port" >/dev/null 2>&1 &
mock=$!
for _ in $(seq 1 200); do [ -s "$work/port" ] && break; sleep 0.025; done
port=$(cat "$work/port") || bench_fail "the mock model did not start"
printf 'Authorization: Bearer sk-bench\nContent-Type: application/json\n' >"$work/headers"
# the body agent-run sends for this turn, byte for byte
printf '%s' '{"model":"gpt-4o","messages":[{"role":"system","content":"hi"},{"role":"user","content":"hello"}],"stream":true,"stream_options":{"include_usage":true}}' >"$work/body.json"
export OPENAI_BASE_URL="http://127.0.0.1:$port/v1" OPENAI_API_KEY=sk-bench
ar="$top/$build/bin/agent-run --no-store --model openai/gpt-4o --system hi -m hello"
cu="curl -sN -H @$work/headers --data-binary @$work/body.json http://127.0.0.1:$port/v1/chat/completions"
bench_expect '"finishReason":"stop"' $ar
bench_expect '"finish_reason":"stop"' $cu
bench_pairs "${N:-30}0" "$ar" "$cu"
echo "agent_run_turn ${bench_t[0]} us"
echo "curl_turn ${bench_t[1]} us"
bench_row "agent-run provider turn (whole process) vs curl -N" "${bench_t[0]}" "${bench_t[1]}" us \
	'<=1.05' "$curl_v" "${bench_r[1]}"
if command -v valgrind >/dev/null; then
	refs() {
		valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>"$work/vg.txt" >/dev/null ||
			bench_fail "$* under valgrind: exit status $?"
		awk '/refs:/ { gsub(",", "", $NF); print $NF }' "$work/vg.txt"
	}
	i_ar=$(refs $ar) i_cu=$(refs $cu)
	echo "agent_run_instructions $i_ar instructions"
	echo "curl_instructions $i_cu instructions"
	bench_row "agent-run provider turn, instructions vs curl -N" "$i_ar" "$i_cu" instr '<=1.05' "$curl_v"
fi

# 4. A turn of a long session: 10,000 stored messages of ~1.5 KB (15 MB)
#    resumed by agent-run, whose history goes into the request from the
#    store's text, against curl -N posting the same body: the CPU each
#    process spends (the mock's parse of 15 MB takes most of the wall
#    time of both), medians of interleaved pairs, and the instructions.
store="$work/store"
word=$(head -c 1100 /dev/urandom | base64 -w 0 | head -c 1450)
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
jq -cn --arg now "$now" --arg w "$word" '{snapshotId: "long0", sessionId: "long",
	status: "completed", createdAt: $now, updatedAt: $now, finishReason: "stop",
	state: {sessionId: "long", messages: [range(5000) |
		({content: [{text: "question \(.) \($w)"}], role: "user"},
		 {content: [{text: "answer \(.) \($w)"}], role: "model"})]}}' |
	AGENTKIT_STORE=$store "$top/$build/bin/agent-snap" import >/dev/null || bench_fail "import failed"
# the body agent-run sends, byte for byte (checked against the mock's log)
jq -cn --arg w "$word" '{model: "gpt-4o", messages: ([range(5000) |
		{role: "user", content: "question \(.) \($w)"}, {role: "assistant", content: "answer \(.) \($w)"}]
		+ [{role: "user", content: "hello"}]), stream: true, stream_options: {include_usage: true}}' |
	tr -d '\n' >"$work/long.json"
"$top/scripts/mock-model" --dialect openai --script "$work/turns.ndjson" --log "$work/long.log" \
	--port-file "$work/port2" >/dev/null 2>&1 &
check=$!
for _ in $(seq 1 200); do [ -s "$work/port2" ] && break; sleep 0.025; done
ar_long="$top/$build/bin/agent-run --model openai/gpt-4o --snapshot long0 -m hello"
OPENAI_BASE_URL="http://127.0.0.1:$(cat "$work/port2")/v1" AGENTKIT_STORE=$store $ar_long >/dev/null ||
	bench_fail "the long session's turn failed"
kill "$check"
wait "$check" 2>/dev/null || true
[ "$(jq -r .bodySha256 "$work/long.log")" = "$(sha256sum <"$work/long.json" | cut -d ' ' -f 1)" ] ||
	bench_fail "agent-run sent another body than curl's for the long session"
cu_long="curl -sN -H @$work/headers --data-binary @$work/long.json http://127.0.0.1:$port/v1/chat/completions"
bench_pairs --cpu "${N:-30}" "AGENTKIT_STORE=$store $ar_long" "$cu_long"
echo "long_turn_cpu ${bench_t[0]} us; curl_long_cpu ${bench_t[1]} us (15 MB)"
bench_row "provider turn of a 10,000-message session (15 MB), CPU vs curl -N posting its body" \
	"${bench_t[0]}" "${bench_t[1]}" us '<=1.5' "$curl_v" "${bench_r[1]}"
if command -v valgrind >/dev/null; then
	i_ar=$(AGENTKIT_STORE=$store AGENTKIT_STORE_MAPSIZE=1073741824 refs $ar_long) i_cu=$(refs $cu_long)
	echo "long_turn_instructions $i_ar instructions; curl_long_instructions $i_cu"
	bench_row "provider turn of a 10,000-message session, instructions vs curl -N" "$i_ar" \
		"$i_cu" instr - "$curl_v"
fi
bench_done
