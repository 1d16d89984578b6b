#!/usr/bin/env python3
"""KV offload tiers (docs/kv_tiers.md) on a multi-turn replay and across a restart.

Replays the first --requests requests of the Mooncake synthetic trace
(../shared/testdata/traces/mooncake_synthetic_first2000.jsonl, scaled as bench/router_trace_bench.py
scales it: one 512-token trace block -> --block-tokens tokens) one after another against one
`tachyon serve` whose KV cache (--kv-cache-memory) is too small for the trace's reuse, in three
phases: tiers off; tiers on (--kv-offload-memory, --kv-offload-dir in a fresh directory); tiers on
again after a restart with the same directory. Reports per phase: the prompt tokens served from
cache (hit rate), TTFT p50/p90/p99, wall time, and the tier counters from /metrics.
Then, with no reuse at all (--unique-requests distinct prompts), tiers off against on: the tiers'
cost in wall time, A/B interleaved over --ab-rounds rounds (a fresh server each, the order
alternating, new prompts each round), compared by the medians (--no-reuse-only runs just this). Then the restart case alone: one --long-tokens prompt computed cold (TTFT), the server restarted
with the same --kv-offload-dir, the same prompt again (TTFT from the disk tier).
Writes results.json to --out.

  python3 bench/kv_tier_bench.py --requests 120 --out /tmp/kv_tier_bench
  python3 bench/kv_tier_bench.py --no-reuse-only --ab-rounds 5 --out /tmp/kv_tier_cost
"""

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from router_trace_bench import (TRACE, Proc, block_tokens, default_model, load_trace,  # noqa: E402
                                one_request, summarize)

REPO = Path(__file__).resolve().parent.parent


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("tachyon_kv_tier_") or line.startswith("tachyon_kv_offload_"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def serve(a, log, tiers_dir=None):
    args = [a.binary, "serve", "-m", str(a.model), "--host", "127.0.0.1", "--port", "0",
            "--threads", str(a.threads), "--served-model-name", "m", "--max-model-len",
            str(a.max_model_len), "--kv-cache-memory", a.kv_cache_memory]
    if tiers_dir is not None:
        args += ["--kv-offload-memory", a.offload_memory, "--kv-offload-dir", str(tiers_dir),
                 "--kv-offload-disk", a.offload_disk]
    return Proc(args, log, "tachyon serve")


def replay(s, reqs):
    t0 = time.monotonic()
    results = []
    for r in reqs:
        results.append(one_request(s.port, "m", dict(r, t=0), time.monotonic()))
    out = summarize(results)
    out["wall_seconds"] = time.monotonic() - t0
    out["tiers"] = metrics(s.port)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--binary", default=str(REPO / "build" / "tachyon"))
    p.add_argument("--model", default=str(default_model()))
    p.add_argument("--trace", default=str(TRACE))
    p.add_argument("--requests", type=int, default=120)
    p.add_argument("--block-tokens", type=int, default=16)
    p.add_argument("--max-output", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-model-len", type=int, default=2560)
    p.add_argument("--kv-cache-memory", default="64M")  # ~180 SmolLM2 blocks
    p.add_argument("--offload-memory", default="256M")
    p.add_argument("--offload-disk", default="1G")
    p.add_argument("--long-tokens", type=int, default=2048)
    p.add_argument("--unique-requests", type=int, default=24)
    p.add_argument("--unique-tokens", type=int, default=1024)
    p.add_argument("--ab-rounds", type=int, default=3)
    p.add_argument("--no-reuse-only", action="store_true")
    p.add_argument("--out", default="/tmp/kv_tier_bench")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    reqs = [r for r in load_trace(a.trace, a.requests, a.block_tokens, a.max_output)
            if len(r["prompt"]) + r["max_tokens"] < a.max_model_len]
    work = Path(tempfile.mkdtemp(prefix="kv-tier-bench-"))
    res = {"config": vars(a), "requests": len(reqs)}
    try:
        if not a.no_reuse_only:
            for phase, tiers in (("off", None), ("on", work / "kv"), ("after_restart", work / "kv")):
                s = serve(a, out / f"{phase}.log", tiers)
                try:
                    res[phase] = replay(s, reqs)
                finally:
                    s.stop()
        # No reuse: unique prompts, tiers off vs on (the tiers' cost when nothing comes back),
        # interleaved rounds with the order alternating, so the machine's load hits both alike.
        walls = {"no_reuse_off": [], "no_reuse_on": []}
        for i in range(a.ab_rounds):
            unique = [{"t": 0, "prompt": block_tokens(10**6 + 10**4 * i + j, a.unique_tokens),
                       "max_tokens": 8} for j in range(a.unique_requests)]
            order = [("no_reuse_off", None), ("no_reuse_on", work / f"unique{i}")]
            for phase, tiers in order if i % 2 == 0 else order[::-1]:
                s = serve(a, out / f"{phase}-{i}.log", tiers)
                try:
                    r = replay(s, unique)
                finally:
                    s.stop()
                walls[phase].append(r["wall_seconds"])
                res.setdefault(phase, r)  # the first round's summary
        res["no_reuse_walls"] = walls
        res["no_reuse_cost"] = (statistics.median(walls["no_reuse_on"]) /
                                statistics.median(walls["no_reuse_off"]) - 1)
        if a.no_reuse_only:
            return finish(res, out)
        long = {"t": 0, "prompt": block_tokens(987654321, a.long_tokens), "max_tokens": 4}
        for phase in ("cold", "from_disk"):
            s = serve(a, out / f"long-{phase}.log", work / "long")
            try:
                r = one_request(s.port, "m", long, time.monotonic())
                res[f"long_{phase}"] = {"ttft": r["ttft"], "cached": r["cached"],
                                        "prompt_tokens": r["prompt_tokens"]}
            finally:
                s.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    finish(res, out)


def finish(res, out):
    (out / "results.json").write_text(json.dumps(res, indent=2))
    for k in ("off", "on", "after_restart", "no_reuse_off", "no_reuse_on"):
        if k not in res:
            continue
        r = res[k]
        print(f"{k:>14}: hit rate {r['hit_rate']:.3f}  TTFT p50 {r['ttft_p50']:.3f}s "
              f"p90 {r['ttft_p90']:.3f}s p99 {r['ttft_p99']:.3f}s  wall {r['wall_seconds']:.1f}s")
    w = res["no_reuse_walls"]
    print(f"no-reuse wall per round, off: {', '.join(f'{x:.1f}' for x in w['no_reuse_off'])} s;"
          f" on: {', '.join(f'{x:.1f}' for x in w['no_reuse_on'])} s")
    print(f"no-reuse cost of the tiers: {100 * res['no_reuse_cost']:+.1f}% wall time "
          f"(medians of {len(w['no_reuse_off'])} interleaved rounds)")
    for k in ("long_cold", "long_from_disk"):
        if k not in res:
            continue
        r = res[k]
        print(f"{k:>14}: TTFT {r['ttft']:.3f}s, {r['cached']} of {r['prompt_tokens']} cached")


if __name__ == "__main__":
    main()
