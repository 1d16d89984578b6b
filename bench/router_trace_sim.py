#!/usr/bin/env python3
"""A model of router_trace_bench.py's replay, to compare routing rules in seconds without
replicas: the same scaled trace (router_trace_bench.load_trace) over N replicas, each an LRU
prefix cache of --cache-blocks 16-token blocks and an engine whose step computes every waiting
prompt (its uncached tokens) and one token of every decoding request, taking step_ms(tokens); a
router that sees what `tachyon route` sees (its requests in flight and pending prefill per
replica, and an index of each replica's blocks: its placements, less what the replica evicts).
Prints per offered load and policy the mean and p99 TTFT, the hit rate and the ratios to
round_robin. A model, not a measurement: its step times are a fit to one quiet run's replica
timings (SmolLM2, 3 replicas of 1 thread on 2 cores), so it ranks rules; router_trace_bench.py
measures them.

  python3 bench/router_trace_sim.py --loads 20,25,30 \\
      --policies round_robin,kv,kv@prompt_cost=own,kv@balance_slack=1
"""

import argparse
import collections
import heapq
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from router_trace_bench import KV_BLOCK, TRACE, ideal_hit_rate, load_trace  # noqa: E402


def step_ms(tokens):
    """A replica's step time for `tokens` computed tokens: a fit to the replicas' timings
    (prefill_ms against prefill_step_tokens) of the quiet run of 2026-12-06 12:08 UTC."""
    return 10 + 0.4 * tokens if tokens < 32 else 30 + 1.1 * tokens


class Replica:
    def __init__(self):
        self.cache = collections.OrderedDict()  # block -> None, least recently used first
        self.index = set()                      # what the router believes it holds
        self.waiting, self.decoding, self.busy = [], [], False
        self.in_flight = self.pending_tokens = self.pending_requests = 0

    def leading(self, blocks, held):
        """Leading blocks of a prompt held, at most all but the one its last token is in (a
        replica computes the last token even when it is cached)."""
        n = 0
        while n < len(blocks) - 1 and blocks[n] in held:
            n += 1
        return n


def kv_score(r, blocks, prompt, o):
    uncached = prompt - KV_BLOCK * r.leading(blocks, r.index)
    waiting = r.pending_requests if o["prompt_cost"] == "shared" else 0
    return uncached * (1 + waiting) + r.pending_tokens + o["load_weight"] * r.in_flight


def simulate(reqs, blocks, n_replicas, cache_blocks, spec, seed):
    """Replays `reqs` (arrival times in seconds); returns (TTFTs, cached tokens)."""
    policy, *flags = spec.split("@")
    o = {"load_weight": 32, "balance_ratio": 1.5, "balance_slack": 3, "prompt_cost": "shared"}
    for f in flags:
        k, v = f.split("=")
        o[k] = v if k == "prompt_cost" else float(v)
    reps = [Replica() for _ in range(n_replicas)]
    rng = random.Random(seed)
    events = [(q["t"], 0, i) for i, q in enumerate(reqs)]
    heapq.heapify(events)
    ttft, cached, uncached_of = [None] * len(reqs), [0] * len(reqs), {}
    turn = 0

    def start_step(ri, now):
        r = reps[ri]
        if r.busy or not (r.waiting or r.decoding):
            return
        tokens = len(r.decoding)
        for i in r.waiting:
            hit = r.leading(blocks[i], r.cache)
            for b in blocks[i][:hit]:
                r.cache.move_to_end(b)
            cached[i] = KV_BLOCK * hit
            tokens += len(reqs[i]["prompt"]) - cached[i]
        r.busy = True
        heapq.heappush(events, (now + step_ms(tokens) / 1000, 1, (ri, r.waiting, r.decoding)))
        r.waiting, r.decoding = [], []

    while events:
        now, kind, data = heapq.heappop(events)
        if kind == 0:  # an arrival: the router places it
            i, prompt = data, len(reqs[data]["prompt"])
            if policy == "round_robin":
                ri, turn = turn % n_replicas, turn + 1
            elif policy == "random":
                ri = rng.randrange(n_replicas)
            else:
                least = min(r.in_flight for r in reps)
                guard = max(o["balance_ratio"] * (least + 1), least + o["balance_slack"])
                ri = min((kv_score(r, blocks[i], prompt, o), rng.random(), k)
                         for k, r in enumerate(reps) if r.in_flight + 1 <= guard)[2]
            r = reps[ri]
            uncached_of[i] = prompt - KV_BLOCK * r.leading(blocks[i], r.index)
            r.index.update(blocks[i])
            r.in_flight += 1
            r.pending_tokens += uncached_of[i]
            r.pending_requests += 1
            r.waiting.append(i)
        else:  # a step ended: its prompts have their first token, its decodes are done
            ri, prefilled, decoded = data
            r = reps[ri]
            r.busy = False
            for i in prefilled:
                ttft[i] = now - reqs[i]["t"]
                r.pending_tokens -= uncached_of[i]
                r.pending_requests -= 1
                for b in blocks[i]:
                    r.cache[b] = None
                    r.cache.move_to_end(b)
                while len(r.cache) > cache_blocks:
                    r.index.discard(r.cache.popitem(last=False)[0])
                if reqs[i]["max_tokens"] > 1:
                    r.decoding.append(i)
                else:
                    r.in_flight -= 1
            r.in_flight -= len(decoded)
        start_step(ri, now)
    return ttft, cached


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=TRACE)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--block-tokens", type=int, default=3)
    ap.add_argument("--max-output", type=int, default=2)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--cache-blocks", type=int, default=1456,
                    help="a replica's KV blocks (1,456: 512 MB of SmolLM2 KV)")
    ap.add_argument("--loads", default="20,25,30", help="offered loads in req/s")
    ap.add_argument("--policies", default="round_robin,kv,kv@prompt_cost=own")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    base = load_trace(a.trace, a.requests, a.block_tokens, a.max_output)
    # A block is named by the prompt's tokens up to its end (the chain hash's content).
    # Its full blocks and, last, the one its last token is in (never a hit). A block is named by
    # the prompt's tokens up to its end (the chain hash's content).
    blocks = [[tuple(q["prompt"][:KV_BLOCK * (j + 1)])
               for j in range((len(q["prompt"]) - 1) // KV_BLOCK + 1)] for q in base]
    span = max(base[-1]["t"] - base[0]["t"], 1e-3)
    total = sum(len(q["prompt"]) for q in base)
    print(f"{len(base)} requests, hit rate of one unbounded cache "
          f"{100 * ideal_hit_rate(base, a.block_tokens):.1f}%")
    for load in [float(x) for x in a.loads.split(",")]:
        scale = len(base) / (span * load)
        reqs = [dict(q, t=q["t"] * scale) for q in base]
        rr = None
        print(f"offered {load:.1f} req/s")
        for spec in a.policies.split(","):
            ttft, cached = simulate(reqs, blocks, a.replicas, a.cache_blocks, spec, a.seed)
            mean, p99 = statistics.mean(ttft), sorted(ttft)[int(0.99 * (len(ttft) - 1))]
            if spec == "round_robin":
                rr = (mean, p99)
            vs = f"  round_robin / it: mean {rr[0] / mean:.2f}x, p99 {rr[1] / p99:.2f}x" if rr else ""
            print(f"  {spec:<32} TTFT mean {mean:.3f} s, p99 {p99:.3f} s, hit rate "
                  f"{100 * sum(cached) / total:.1f}%{vs}")


if __name__ == "__main__":
    main()
