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
# 2. Chunk throughput: a 20000-delta stream, chunks per second through
#    model-call versus curl.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
helper="$top/$build/tests/helpers/model-call"
[ -x "$helper" ] || { echo "providers.sh: build first ($helper missing)" >&2; exit 111; }
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy
exec python3 - "$top" "$helper" <<'PY'
import json, os, statistics, subprocess, sys, tempfile, time
top, helper = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="bench-providers.")
RUNS = 30
N = 20000

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
    while not os.path.exists(pf):
        time.sleep(0.01)
    return p, int(open(pf).read())

req = {"model": "openai/gpt-bench", "messages": [{"role": "user", "content": [{"text": "hi"}]}]}
wire = json.dumps({"model": "gpt-bench", "messages": [{"role": "user", "content": "hi"}],
                   "stream": True, "stream_options": {"include_usage": True}})

def first_text(cmd, stdin, marker):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    p.stdin.write(stdin.encode()); p.stdin.close()
    t = None
    for line in p.stdout:
        if t is None and marker in line:
            t = time.perf_counter() - t0
    p.wait()
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
    c.append(first_text(curl_cmd(port), wire, b"Hello")[0])
    m.append(first_text([helper], json.dumps(req), b"Hello")[0])
mock.terminate(); mock.wait()
cm, mm = statistics.median(c) * 1000, statistics.median(m) * 1000
print("first chunk: curl %.2f ms, model-call %.2f ms, added %.2f ms (median of %d; target <= 2 ms)"
      % (cm, mm, mm - cm, RUNS))

# Throughput.
mock, port = start_mock([{"chunks": ["tok%d " % i for i in range(N)], "repeat": 6}])
env.update(OPENAI_BASE_URL="http://127.0.0.1:%d/v1" % port)
ct, mt = [], []
for _ in range(3):
    ct.append(first_text(curl_cmd(port), wire, b"\x00")[1])
    mt.append(first_text([helper], json.dumps(req), b"\x00")[1])
mock.terminate(); mock.wait()
print("throughput (%d deltas): curl %.0f chunks/s, model-call %.0f chunks/s (best of 3)"
      % (N, N / min(ct), N / min(mt)))
PY
