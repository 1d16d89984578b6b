#!/usr/bin/env bash
# Embedding load benchmark: starts `tachyon serve` on an embedding model and measures
# /v1/embeddings requests/s and latency (p50 / p99) at 1 and 16 concurrent clients, for short
# (16-token) and long (256-token) inputs given as token ids (so the figures do not depend on
# the text), plus a text run of each length that includes tokenisation. "outside model" is the
# mean time per request not spent in the model's forward passes (HTTP, JSON, tokenisation,
# queueing): the requests' wall time minus the engine's forward time (from /metrics) at
# concurrency 1. The long input is 256 tokens, or the model's limit (max_model_len) when that is
# smaller (all-MiniLM-L6-v2: 128). `--peer URL` runs the same requests against another
# OpenAI-compatible embeddings server in the same run (e.g. llama.cpp's `llama-server --embedding`
# on the same model written as GGUF by `tachyon quantize MODEL OUT.gguf --type F16`, started with
# enough slots for 16 clients, `-np 16`) and prints its figures beside tachyon's with the ratio.
# Run it on a quiet machine; `--smoke` runs a few requests only.
#
#   bench/embed_bench.sh [MODEL] [--requests N] [--peer URL] [--smoke]   (default model:
#                            all-MiniLM-L6-v2 from scripts/fetch_model.sh --minilm)
#   env: TACHYON_BINARY (default build/tachyon)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=$("$root/scripts/fetch_model.sh" --minilm --print-path)
requests=200
peer=""
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) requests=$2; shift 2 ;;
    --smoke) requests=8; shift ;;
    --peer) peer=$2; shift 2 ;;
    -*) echo "usage: $0 [MODEL] [--requests N] [--peer URL] [--smoke]" >&2; exit 2 ;;
    *) model=$1; shift ;;
  esac
done
binary=${TACHYON_BINARY:-$root/build/tachyon}
[ -x "$binary" ] || { echo "embed_bench: no tachyon binary at $binary" >&2; exit 1; }
[ -e "$model" ] || { echo "embed_bench: model missing: $model (scripts/fetch_model.sh --minilm)" >&2; exit 1; }
log=$(mktemp)
"$binary" serve -m "$model" --port 0 >"$log.out" 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -f "$log" "$log.out"' EXIT
for _ in $(seq 600); do
  grep -q "ready at http://" "$log.out" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
base=$(sed -n 's|.*ready at \(http://[^/]*\)/v1.*|\1|p' "$log.out")
python3 - "$base" "$requests" "$peer" <<'PY'
import json, sys, threading, time, urllib.request
base, total, peer = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def post(url, body):
    req = urllib.request.Request(url + "/v1/embeddings", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        out = json.load(r)
    assert len(out["data"]) == 1 and out["data"][0]["embedding"], out
    return out

def forward_seconds():
    with urllib.request.urlopen(base + "/metrics") as r:
        for line in r.read().decode().splitlines():
            if line.startswith("tachyon_engine_forward_seconds_total "):
                return float(line.rsplit(" ", 1)[1])
    return None

with urllib.request.urlopen(base + "/v1/models") as r:
    limit = json.load(r)["data"][0].get("max_model_len") or 256
long_n = min(256, limit)
word = "serving "  # one WordPiece token per word in MiniLM's vocabulary
inputs = {"ids16": {"input": [101] + [2000 + i for i in range(14)] + [102]},
          f"ids{long_n}": {"input": [101] + [2000 + i % 1000 for i in range(long_n - 2)] + [102]},
          "text16": {"input": (word * 14).strip()},
          f"text{long_n}": {"input": (word * (long_n - 2)).strip()}}

def measure(url, body, clients, tachyon):
    lat, lock = [], threading.Lock()
    per = max(1, total // clients)
    def run():
        for _ in range(per):
            t = time.perf_counter()
            post(url, body)
            with lock:
                lat.append(time.perf_counter() - t)
    f0 = forward_seconds() if tachyon else None
    t0 = time.perf_counter()
    ts = [threading.Thread(target=run) for _ in range(clients)]
    for t in ts: t.start()
    for t in ts: t.join()
    wall = time.perf_counter() - t0
    f1 = forward_seconds() if tachyon else None
    lat.sort()
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e3
    outside = None
    if clients == 1 and f0 is not None and f1 is not None:
        outside = (sum(lat) - (f1 - f0)) / len(lat) * 1e3
    return len(lat) / wall, p(0.5), p(0.99), outside

for url in [base] + ([peer] if peer else []):
    post(url, inputs["ids16"])  # warm up
cols = f"{'input':8} {'clients':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'outside model ms':>17}"
if peer:
    cols += f" | {'peer req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'req/s ratio':>11}"
print(cols)
for name, body in inputs.items():
    for clients in (1, 16):
        rps, p50, p99, outside = measure(base, body, clients, True)
        line = f"{name:8} {clients:7d} {rps:8.1f} {p50:8.2f} {p99:8.2f} "
        line += f"{outside:17.2f}" if outside is not None else f"{'':17}"
        if peer:
            prps, pp50, pp99, _ = measure(peer, body, clients, False)
            line += f" | {prps:10.1f} {pp50:8.2f} {pp99:8.2f} {rps / prps:10.2f}x"
        print(line, flush=True)
PY
