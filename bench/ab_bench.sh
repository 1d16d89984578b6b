#!/usr/bin/env bash
# A/B of two tachyon binaries on one model, runs alternating (A B A B ...) so that the VM's
# speed drifts hit both alike; prints each run and the median of each figure per binary.
#
#   bench/ab_bench.sh BASE_BINARY NEW_BINARY MODEL.gguf [PAIRS]     (default 3 pairs)
#
# Figures: `bench -t 2 -p 512 -n 128 --reps 3 --json` (pp512 / tg128 tok/s) and
# `bench -t 2 --concurrency 16 -p 128 -n 64 --json` (aggregate decode tok/s at 16 sequences).
# Run it on a quiet machine; it needs python3 for the JSON.
set -euo pipefail
base=$1 new=$2 model=$3 pairs=${4:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for i in $(seq "$pairs"); do
  for side in base new; do
    bin=$base; [ "$side" = new ] && bin=$new
    "$bin" bench -m "$model" -t 2 -p 512 -n 128 --reps 3 --json > "$out/$side.single.$i.json"
    "$bin" bench -m "$model" -t 2 --concurrency 16 -p 128 -n 64 --json > "$out/$side.conc.$i.json"
  done
done
python3 - "$out" "$pairs" <<'PY'
import json, statistics, sys, pathlib
out, pairs = pathlib.Path(sys.argv[1]), int(sys.argv[2])
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
        r["pp512"].append(find(s, ["pp_tok_s", "prompt_tok_s", "pp_tokens_per_s"]))
        r["tg128"].append(find(s, ["tg_tok_s", "decode_tok_s", "tg_tokens_per_s"]))
        r["decode@16"].append(find(c, ["decode_tok_s", "aggregate_decode_tok_s"]))
for fig in ("pp512", "tg128", "decode@16"):
    b = [x for x in rows["base"][fig] if x is not None]
    n = [x for x in rows["new"][fig] if x is not None]
    if not b or not n:
        print(f"{fig}: not found in the JSON"); continue
    mb, mn = statistics.median(b), statistics.median(n)
    print(f"{fig:10s} base {b} median {mb:.1f} | new {n} median {mn:.1f} | new/base {mn / mb:.3f}")
PY
