#!/usr/bin/env bash
# A/B of two tachyon binaries on one model, runs alternating (A B A B ...) so that the VM's
# speed drifts hit both alike; prints each run and the median of each figure per binary.
#
#   bench/ab_bench.sh BASE_BINARY NEW_BINARY MODEL.gguf [PAIRS]     (default 3 pairs)
#
# Figures: `bench -t T -p 512 -n 128 --reps 3 --json` (pp512 / tg128 tok/s) and
# `bench -t T --concurrency 16 -p 128 -n 64 --json` (aggregate decode tok/s at 16 sequences).
# Environment:
#   THREADS=N        threads of every run (default 2)
#   MODE=decode      decode only: `bench -t T -p 0 -n 128 --reps 3` (tg128; no pp512, no
#                    concurrency run), the llama-bench `-p 0 -n 128` comparison
#   PEER_BENCH=PATH  llama.cpp's llama-bench, run in every round after the two binaries with
#                    the same model and threads (`-p 512 -n 128`, MODE=decode: `-p 0 -n 128`;
#                    `-r 3 -o json`); prints its medians and new / peer
# Run it on a quiet machine; it needs python3 for the JSON.
set -euo pipefail
base=$1 new=$2 model=$3 pairs=${4:-3}
threads=${THREADS:-2} mode=${MODE:-full} peer=${PEER_BENCH:-}
case "$mode" in full | decode) ;; *) echo "MODE must be full or decode" >&2; exit 2 ;; esac
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for i in $(seq "$pairs"); do
  for side in base new; do
    bin=$base; [ "$side" = new ] && bin=$new
    if [ "$mode" = decode ]; then
      "$bin" bench -m "$model" -t "$threads" -p 0 -n 128 --reps 3 --json > "$out/$side.single.$i.json"
      echo '{}' > "$out/$side.conc.$i.json"
    else
      "$bin" bench -m "$model" -t "$threads" -p 512 -n 128 --reps 3 --json > "$out/$side.single.$i.json"
      "$bin" bench -m "$model" -t "$threads" --concurrency 16 -p 128 -n 64 --json > "$out/$side.conc.$i.json"
    fi
  done
  if [ -n "$peer" ]; then
    p=512; [ "$mode" = decode ] && p=0
    "$peer" -m "$model" -t "$threads" -p "$p" -n 128 -r 3 -o json > "$out/peer.$i.json" 2>/dev/null
  fi
done
python3 - "$out" "$pairs" "$mode" "$peer" <<'PY'
import json, statistics, sys, pathlib
out, pairs, mode, peer = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
def find(obj, keys):
    # The first number under any of `keys`, searched depth-first.
    if isinstance(obj, dict):
        for k in keys:
            if isinstance(obj.get(k), (int, float)):
                return obj[k]
        for v in obj.values():
            r = find(v, keys)
            if r is not None:
                return r
    if isinstance(obj, list):
        for v in obj:
            r = find(v, keys)
            if r is not None:
                return r
    return None
rows = {}
for side in ("base", "new"):
    for i in range(1, pairs + 1):
        s = json.loads((out / f"{side}.single.{i}.json").read_text())
        c = json.loads((out / f"{side}.conc.{i}.json").read_text())
        r = rows.setdefault(side, {"pp512": [], "tg128": [], "decode@16": []})
        r["pp512"].append(find(s, ["pp_tok_s", "prompt_tok_s", "pp_tokens_per_s"]) or None)
        r["tg128"].append(find(s, ["tg_tok_s", "decode_tok_s", "tg_tokens_per_s"]))
        r["decode@16"].append(find(c, ["decode_tok_s", "aggregate_decode_tok_s"]))
figs = ("tg128",) if mode == "decode" else ("pp512", "tg128", "decode@16")
for fig in figs:
    b = [x for x in rows["base"][fig] if x is not None]
    n = [x for x in rows["new"][fig] if x is not None]
    if not b or not n:
        print(f"{fig}: not found in the JSON"); continue
    mb, mn = statistics.median(b), statistics.median(n)
    print(f"{fig:10s} base {b} median {mb:.1f} | new {n} median {mn:.1f} | new/base {mn / mb:.3f}")
if peer:
    # llama-bench's JSON: one entry per test, n_prompt / n_gen and avg_ts (tokens per second).
    got = {"pp512": [], "tg128": []}
    for i in range(1, pairs + 1):
        for e in json.loads((out / f"peer.{i}.json").read_text()):
            key = "tg128" if e.get("n_gen", 0) > 0 else "pp512"
            got[key].append(e["avg_ts"])
    for fig in figs:
        if fig not in got or not got[fig]:
            continue
        mp = statistics.median(got[fig])
        mn = statistics.median([x for x in rows["new"][fig] if x is not None])
        print(f"{fig:10s} peer {[round(x, 1) for x in got[fig]]} median {mp:.1f} | new/peer {mn / mp:.3f}")
PY
