#!/usr/bin/env python3
"""Replays the Mooncake synthetic trace (../shared/testdata/traces/mooncake_synthetic_first2000.jsonl)
against N `tachyon serve` replicas through `tachyon route`, once per policy (kv, round_robin,
random), and reports per policy: TTFT and TPOT percentiles, the prefix-cache hit rate the replicas
reported (against the hit rate one unbounded cache would have: the trace's own prefix sharing),
the requests shed (429 / 503 / errors), and each policy's mean and p99 TTFT as a ratio to
round_robin's. Writes results.json, a chart (router_trace.svg, TTFT bars per policy) and per
policy POLICY-requests.jsonl (each request's TTFT, replica, cached tokens and the replica's
TTFT breakdown, summed up as what the mean TTFT is made of) to --out. A policy may be a variant
with more `tachyon route` flags: kv@--balance-slack=1.

Scaling (the trace is for large models; see the trace README): a trace block of 512 tokens becomes
--block-tokens tokens (default 16, one KV block), so a request's prompt is its hash_ids blocks,
each a fixed pseudo-random run of token ids derived from the block's id (requests sharing the
first k hash ids share the first k blocks), cut to input_length scaled the same way. Outputs are
capped at --max-output tokens (ignore_eos). Arrival times are the trace's timestamps times
--time-scale; with `auto` (the default) the bench first measures the replicas' capacity (the
first --calibrate-requests requests closed-loop through round_robin) and scales time so that the
offered load is --target-load (0.7) of it: below saturation, where shedding nothing is the
target. The replicas restart before each policy (and after the calibration), so every policy
starts from cold caches. After each policy it reads the router's /metrics: for kv, the cached
prompt tokens the index predicted on the replicas it chose against those the replicas reported
(issue 19's target: within 5%), and the mean routing decision time.

The quiet configuration (docs/router.md, "Benchmarks", says why this scale): the whole trace
(its reuse is 17% of prompt tokens over the first 1,000 requests, 32% over all 2,000), 3 tokens a
trace block (~73-token prompts), 2 output tokens (so TPOT is defined), 512 MB of KV a replica and
an offered load of 0.9 of the capacity without hits; ~12 minutes for the three policies on a
quiet 2-core machine (the bench prints its projection after calibrating):

  python3 bench/router_trace_bench.py --requests 2000 --block-tokens 3 --max-output 2 \
      --target-load 0.9 --kv-cache-memory 512M --out /tmp/router_trace
"""

import argparse
import http.client
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRACE = REPO.parent / "shared" / "testdata" / "traces" / "mooncake_synthetic_first2000.jsonl"
TRACE_BLOCK = 512
KV_BLOCK = 16  # tokens of a replica's KV block (the engine's default)


def default_model():
    env = os.environ.get("TACHYON_SMOLLM2")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "tachyon" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def block_tokens(hash_id, n, vocab_lo=1000, vocab_span=40000):
    """The token ids of trace block `hash_id`: a fixed pseudo-random run of ordinary tokens."""
    x = (hash_id * 2654435761 + 12345) & 0xFFFFFFFF
    out = []
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(vocab_lo + x % vocab_span)
    return out


def load_trace(path, n, bt, max_output):
    reqs = []
    with open(path) as f:
        for line in f:
            if len(reqs) >= n:
                break
            r = json.loads(line)
            length = max(1, math.ceil(r["input_length"] * bt / TRACE_BLOCK))
            ids = []
            for h in r["hash_ids"]:
                ids += block_tokens(h, bt)
            reqs.append({"t": r["timestamp"] / 1000.0, "prompt": ids[:length],
                         "max_tokens": max(1, min(max_output, r["output_length"])),
                         "hash_ids": r["hash_ids"]})
    return reqs


def ideal_hit_rate(reqs, bt, kv_block=KV_BLOCK):
    """The prompt-token hit rate of one unbounded prefix cache seeing the requests in order: a
    full `kv_block`-token block of a prompt counts as cached when an earlier prompt held the same
    block at the same place, i.e. the same trace hash ids up to the trace block (of `bt` tokens)
    that the block ends in. The bound a policy's hit rate is judged against (the trace's own
    prefix sharing)."""
    seen, hit, total = set(), 0, 0
    for r in reqs:
        total += len(r["prompt"])
        for j in range(len(r["prompt"]) // kv_block):
            key = (j, tuple(r["hash_ids"][:(kv_block * (j + 1) - 1) // bt + 1]))
            hit += kv_block if key in seen else 0
            seen.add(key)
    return hit / total if total else 0.0


class Proc:
    def __init__(self, args, log_path, ready_word):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        if "ready at http://" not in line:
            self.proc.kill()
            raise RuntimeError(f"{ready_word} did not start: {line!r} (log: {log_path})")
        self.port = int(line.split("ready at http://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def wait_router(port, n, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
            conn.close()
            up = sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
                     if l.startswith("tachyon_router_replica_up{"))
            if up >= n:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the router did not see its replicas up")


def one_request(port, model, req, t0):
    """Streams one completion; returns a result dict."""
    delay = t0 + req["t"] - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    start = time.monotonic()
    res = {"ok": False, "status": 0, "ttft": None, "tpot": None, "tokens": 0,
           "prompt_tokens": len(req["prompt"]), "cached": 0, "lateness": max(0.0, -delay),
           "replica": None, "engine": None}
    body = {"model": model, "prompt": req["prompt"], "max_tokens": req["max_tokens"],
            "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        conn.request("POST", "/v1/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        res["status"] = resp.status
        res["replica"] = resp.getheader("X-Tachyon-Replica")
        if resp.status != 200:
            resp.read()
            return res
        first = last = None
        tokens = 0
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.decode().strip()
            if not line.startswith("data: "):
                continue
            payload = line[len("data: "):]
            if payload == "[DONE]":
                res["ok"] = True
                break
            ev = json.loads(payload)
            if "error" in ev:
                break
            for c in ev.get("choices", []):
                if c.get("text"):
                    now = time.monotonic()
                    first = first or now
                    last = now
            u = ev.get("usage")
            if u:
                tokens = u.get("completion_tokens", 0)
                res["prompt_tokens"] = u.get("prompt_tokens", res["prompt_tokens"])
                res["cached"] = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                res["engine"] = (ev.get("timings") or {}).get("ttft_breakdown")
        conn.close()
        res["tokens"] = tokens
        if first is not None:
            res["ttft"] = first - start
            if tokens > 1:
                res["tpot"] = (last - first) / (tokens - 1)
    except (OSError, http.client.HTTPException, ValueError) as e:
        res["error"] = str(e)
    return res


def pct(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]


def ratio(a, b):
    return a / b if b and not math.isnan(a) and not math.isnan(b) else float("nan")


def summarize(results):
    ok = [r for r in results if r["ok"]]
    ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
    tpot = [r["tpot"] for r in ok if r["tpot"] is not None]
    prompt = sum(r["prompt_tokens"] for r in ok)
    return {
        "requests": len(results), "ok": len(ok), "shed": len(results) - len(ok),
        "ttft_mean": statistics.mean(ttft) if ttft else float("nan"),
        "ttft_p50": pct(ttft, 0.5), "ttft_p90": pct(ttft, 0.9), "ttft_p99": pct(ttft, 0.99),
        "tpot_p50": pct(tpot, 0.5), "tpot_p99": pct(tpot, 0.99),
        "hit_rate": sum(r["cached"] for r in ok) / prompt if prompt else 0.0,
        "max_lateness": max((r["lateness"] for r in results), default=0.0),
        **ttft_parts(ok),
    }


def ttft_parts(ok):
    """Where the mean TTFT went, from the replicas' `timings.ttft_breakdown` of each stream's
    usage event: `wait_step` waiting for the replica's step in progress to end (inbox),
    `queued` not admitted to a step, `prefill` the steps that computed the prompt (its own
    uncached tokens and those of every request admitted with it), `other` the rest of the
    engine's part (prefix waits, stalls), `outside` the client's TTFT less the engine's (HTTP,
    the router, the client); `own_tokens` / `step_tokens` the mean uncached tokens of a request
    and of its prefill steps."""
    rows = [r for r in ok if r["ttft"] is not None and r.get("engine")]
    if not rows:
        return {}
    def mean(f):
        return statistics.mean(f(r) for r in rows)
    e = lambda r, k: r["engine"].get(k, 0) / 1e3
    engine = mean(lambda r: e(r, "engine_ttft_ms"))
    parts = {"wait_step": mean(lambda r: e(r, "inbox_ms")), "queued": mean(lambda r: e(r, "queued_ms")),
             "prefill": mean(lambda r: e(r, "prefill_ms"))}
    parts["other"] = engine - sum(parts.values())
    parts["outside"] = mean(lambda r: r["ttft"]) - engine
    parts["own_tokens"] = mean(lambda r: r["engine"].get("prefill_tokens", 0))
    parts["step_tokens"] = mean(lambda r: r["engine"].get("prefill_step_tokens", 0))
    return {"ttft_parts": parts}


class Cluster:
    """`a.replicas` fresh `tachyon serve` replicas (cold caches) behind one `tachyon route`."""

    def __init__(self, a, spec, out, tag):
        # spec: a policy, or POLICY@FLAG=VALUE@... with more `tachyon route` flags (a variant)
        policy, *flags = spec.split("@")
        self.replicas, self.router = [], None
        try:
            for i in range(a.replicas):
                self.replicas.append(Proc(
                    [a.binary, "serve", "-m", str(a.model), "--host", "127.0.0.1", "--port", "0",
                     "--threads", str(a.threads), "--served-model-name", "m", "--max-model-len",
                     str(a.max_model_len), "--kv-cache-memory", a.kv_cache_memory],
                    out / f"{tag}-replica{i}.log", "tachyon serve"))
            args = [a.binary, "route", "--host", "127.0.0.1", "--port", "0", "--policy", policy,
                    "--seed", str(a.seed), "--max-in-flight", str(a.max_in_flight),
                    "--probe-interval", "0.2"]
            if policy == "kv":
                args += ["--tokenizer", str(a.model)]
            args += flags
            for r in self.replicas:
                args += ["--replica", r.url]
            self.router = Proc(args, out / f"{tag}-router.log", "tachyon route")
            wait_router(self.router.port, a.replicas)
            if policy == "kv":
                time.sleep(1)  # the replicas' KV event snapshots
        except BaseException:
            self.stop()
            raise

    def metrics(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.router.port, timeout=10)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        return text

    def stop(self):
        if self.router:
            self.router.stop()
        for r in self.replicas:
            r.stop()


def metric_sum(text, name):
    """The sum of every sample of metric `name` (all label sets) in Prometheus text."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def router_figures(text):
    """From the router's /metrics after a run: the cached prompt tokens its index predicted on
    the replicas it chose vs those the replicas reported, and the mean routing decision time."""
    predicted = metric_sum(text, "tachyon_router_predicted_cached_tokens_total")
    reported = metric_sum(text, "tachyon_router_reported_cached_tokens_total")
    decisions = metric_sum(text, "tachyon_router_decision_seconds_count")
    return {"predicted_cached": predicted, "reported_cached": reported,
            "prompt_tokens_routed": metric_sum(text, "tachyon_router_prompt_tokens_total"),
            # every request ended: the score's pending prefill must be back to 0
            "pending_prefill_left": metric_sum(text, "tachyon_router_replica_pending_prefill_tokens"),
            "predicted_vs_reported": ratio(predicted - reported, reported),
            "decision_mean_us": 1e6 * metric_sum(text, "tachyon_router_decision_seconds_sum")
                                / decisions if decisions else float("nan")}


def run_policy(a, policy, reqs, out):
    """Replays `reqs` through a fresh cluster; returns (results, the router's final metrics)."""
    cluster = Cluster(a, policy, out, policy.replace("@", "_"))
    try:
        t0 = time.monotonic() + 0.5
        with ThreadPoolExecutor(max_workers=a.max_clients) as pool:
            results = list(pool.map(lambda q: one_request(cluster.router.port, "m", q, t0), reqs))
        text = cluster.metrics()
        (out / f"{policy.replace('@', '_')}-router-metrics.txt").write_text(text)
        return results, text
    finally:
        cluster.stop()


def capacity(a, reqs, out):
    """Requests per second the replicas sustain on this trace's requests: --calibrate-requests
    of them, taken evenly over the whole replay (so their prompt lengths are the replay's, not
    those of its first minutes), sent closed-loop (as fast as answered, 2 per replica at a time)
    through a round_robin router over fresh replicas. They share almost no prefix, so this is
    the capacity without cache hits: the replay's offered load is below it whatever a policy
    reuses. Returns (req/s, requests, seconds)."""
    step = max(1, len(reqs) // max(1, a.calibrate_requests))
    sample = [dict(r, t=0.0) for r in reqs[::step][:a.calibrate_requests]]
    cluster = Cluster(a, "round_robin", out, "calibrate")
    try:
        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=a.calibrate_concurrency * a.replicas) as pool:
            done = list(pool.map(lambda q: one_request(cluster.router.port, "m", q, 0.0), sample))
        seconds = time.monotonic() - start
    finally:
        cluster.stop()
    ok = sum(1 for r in done if r["ok"])
    if ok == 0:
        sys.exit("router_trace_bench: no calibration request succeeded (see calibrate-*.log)")
    return ok / seconds, ok, seconds


def svg_chart(summary, path):
    """Grouped bars: TTFT mean / p50 / p99 per policy (seconds), labelled with the policy's hit
    rate, shed count and mean TTFT ratio to round_robin."""
    policies = list(summary)
    metrics = [("ttft_mean", "#4c72b0"), ("ttft_p50", "#55a868"), ("ttft_p99", "#c44e52")]
    top = max([summary[p][m] for p in policies for m, _ in metrics
               if not math.isnan(summary[p][m])] + [1e-3])
    w, h, left, bottom = 640, 380, 60, 300
    bar, gap = 28, 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             f'font-family="sans-serif" font-size="12">',
             f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">'
             f'TTFT through tachyon route (Mooncake trace, scaled)</text>',
             f'<line x1="{left}" y1="{bottom}" x2="{w - 20}" y2="{bottom}" stroke="black"/>']
    for k in range(5):
        v = top * k / 4
        y = bottom - 250 * k / 4
        parts.append(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">{v:.2f}s</text>')
        parts.append(f'<line x1="{left}" y1="{y}" x2="{w - 20}" y2="{y}" stroke="#ddd"/>')
    x = left + gap
    for p in policies:
        for m, color in metrics:
            v = summary[p][m]
            hgt = 0 if math.isnan(v) else 250 * v / top
            parts.append(f'<rect x="{x}" y="{bottom - hgt}" width="{bar}" height="{hgt}" '
                         f'fill="{color}"/>')
            x += bar
        parts.append(f'<text x="{x - 1.5 * bar}" y="{bottom + 16}" text-anchor="middle">{p}</text>')
        parts.append(f'<text x="{x - 1.5 * bar}" y="{bottom + 32}" text-anchor="middle">'
                     f'hit {100 * summary[p]["hit_rate"]:.0f}%, shed {summary[p]["shed"]}</text>')
        if "ttft_mean_vs_rr" in summary[p]:
            parts.append(f'<text x="{x - 1.5 * bar}" y="{bottom + 48}" text-anchor="middle">'
                         f'{summary[p]["ttft_mean_vs_rr"]:.2f}x rr mean</text>')
        x += gap
    for i, (m, color) in enumerate(metrics):
        parts.append(f'<rect x="{w - 150}" y="{40 + 18 * i}" width="12" height="12" '
                     f'fill="{color}"/><text x="{w - 132}" y="{50 + 18 * i}">{m}</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(REPO / "build" / "tachyon"))
    ap.add_argument("--model", type=Path, default=default_model())
    ap.add_argument("--trace", type=Path, default=TRACE)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--block-tokens", type=int, default=16)
    ap.add_argument("--max-output", type=int, default=16)
    ap.add_argument("--time-scale", default="auto",
                    help="arrival times x this; auto: so that the offered load is --target-load "
                         "of the capacity measured first")
    ap.add_argument("--target-load", type=float, default=0.7)
    ap.add_argument("--calibrate-requests", type=int, default=30)
    ap.add_argument("--calibrate-concurrency", type=int, default=2,
                    help="calibration requests in flight per replica")
    ap.add_argument("--policies", default="kv,round_robin,random")
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-model-len", type=int, default=4608)
    ap.add_argument("--kv-cache-memory", default="512M")
    ap.add_argument("--max-in-flight", type=int, default=64)
    ap.add_argument("--max-clients", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("router_trace_out"))
    a = ap.parse_args()
    # SIGTERM (a `timeout` around the bench) unwinds like an error: the running cluster's
    # replicas and router are stopped, and results.json keeps the policies done.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for what, p in [("model", a.model), ("trace", a.trace), ("binary", Path(a.binary))]:
        if not p.exists():
            sys.exit(f"router_trace_bench: {what} not found: {p}")
    a.out.mkdir(parents=True, exist_ok=True)
    reqs = load_trace(a.trace, a.requests, a.block_tokens, a.max_output)
    span = max(reqs[-1]["t"] - reqs[0]["t"], 1e-3)
    cap = None
    if a.time_scale == "auto":
        cap = capacity(a, reqs, a.out)
        scale = len(reqs) / (span * a.target_load * cap[0])
        print(f"capacity {cap[0]:.2f} req/s ({cap[1]} requests closed-loop in {cap[2]:.1f} s); "
              f"time scale {scale:.3f} offers {len(reqs) / (span * scale):.2f} req/s "
              f"({100 * a.target_load:.0f}% of it): ~{span * scale:.0f} s a policy, "
              f"~{len(a.policies.split(',')) * (span * scale + 10) / 60:.0f} min for "
              f"{a.policies}", flush=True)
    else:
        scale = float(a.time_scale)
    for r in reqs:
        r["t"] *= scale
    ideal = ideal_hit_rate(reqs, a.block_tokens)
    print(f"{len(reqs)} requests over {reqs[-1]['t']:.1f} s; prompts {a.block_tokens} tokens a "
          f"trace block (mean {statistics.mean(len(r['prompt']) for r in reqs):.0f} tokens), "
          f"outputs <= {a.max_output}; {a.replicas} replicas x {a.threads} thread(s); hit rate "
          f"of one unbounded cache {100 * ideal:.1f}%", flush=True)
    summary, raw = {}, {}

    def write_results():
        (a.out / "results.json").write_text(json.dumps(
            {"args": {k: str(v) for k, v in vars(a).items()}, "ideal_hit_rate": ideal,
             "time_scale": scale, "offered_rps": len(reqs) / (span * scale),
             "capacity_rps": cap[0] if cap else None, "summary": summary}, indent=1))

    for policy in a.policies.split(","):
        t = time.monotonic()
        raw[policy], text = run_policy(a, policy, reqs, a.out)
        with open(a.out / f"{policy.replace('@', '_')}-requests.jsonl", "w") as f:
            for q, r in zip(reqs, raw[policy]):
                f.write(json.dumps(dict(r, t=q["t"])) + "\n")
        summary[policy] = summarize(raw[policy])
        summary[policy].update(router_figures(text))
        s = summary[policy]
        print(f"  {policy}: done in {time.monotonic() - t:.0f} s: TTFT mean {s['ttft_mean']:.3f} s, "
              f"p99 {s['ttft_p99']:.3f} s, hit rate {100 * s['hit_rate']:.1f}%, shed {s['shed']}",
              flush=True)
        write_results()  # what is done so far, should a later policy not finish
    print(f"\n{'policy':<12} {'ok':>5} {'shed':>5} {'TTFT mean':>10} {'p50':>7} {'p90':>7} "
          f"{'p99':>7} {'TPOT p50':>9} {'p99':>7} {'hit rate':>9} {'ideal':>6}")
    for p, s in summary.items():
        print(f"{p:<12} {s['ok']:>5} {s['shed']:>5} {s['ttft_mean']:>9.3f}s {s['ttft_p50']:>6.3f}s "
              f"{s['ttft_p90']:>6.3f}s {s['ttft_p99']:>6.3f}s {1e3 * s['tpot_p50']:>7.1f}ms "
              f"{1e3 * s['tpot_p99']:>5.1f}ms {100 * s['hit_rate']:>8.1f}% {100 * ideal:>5.1f}%")
    print("\nmean TTFT made of (the replicas' timings): waiting for the step in progress, not "
          "admitted, the prefill step(s), other engine time, outside the engine; uncached tokens "
          "of the request / of its prefill steps")
    for p, s in summary.items():
        t = s.get("ttft_parts")
        if t:
            print(f"{p:<12} {1e3 * t['wait_step']:6.1f} + {1e3 * t['queued']:5.1f} + "
                  f"{1e3 * t['prefill']:6.1f} + {1e3 * t['other']:5.1f} + {1e3 * t['outside']:5.1f} ms"
                  f"; {t['own_tokens']:5.1f} / {t['step_tokens']:5.1f} tokens")
    if "kv" in summary:
        s = summary["kv"]
        print(f"\nkv: the index predicted {s['predicted_cached']:.0f} cached prompt tokens on the "
              f"replicas it chose, the replicas reported {s['reported_cached']:.0f} "
              f"({100 * s['predicted_vs_reported']:+.1f}%; target within 5%), of "
              f"{s['prompt_tokens_routed']:.0f} prompt tokens routed; mean routing decision "
              f"{s['decision_mean_us']:.1f} us")
    if "round_robin" in summary:
        rr = summary["round_robin"]
        print()
        for p, s in summary.items():
            s["ttft_mean_vs_rr"] = ratio(s["ttft_mean"], rr["ttft_mean"])
            s["ttft_p99_vs_rr"] = ratio(s["ttft_p99"], rr["ttft_p99"])
            if p != "round_robin":
                print(f"{p} / round_robin: mean TTFT {s['ttft_mean_vs_rr']:.2f}x, p99 TTFT "
                      f"{s['ttft_p99_vs_rr']:.2f}x, hit rate {100 * s['hit_rate']:.1f}% vs "
                      f"{100 * rr['hit_rate']:.1f}%, shed {s['shed']} vs {rr['shed']}")
    if "kv" in summary and "round_robin" in summary:
        s = summary["kv"]
        checks = [("mean TTFT >= 3x lower than round_robin", 1 / s["ttft_mean_vs_rr"], 3),
                  ("p99 TTFT >= 2x lower than round_robin", 1 / s["ttft_p99_vs_rr"], 2)]
        print(f"\ntargets (issue 19), kv at {len(reqs) / (span * scale):.2f} req/s offered:")
        for what, got, want in checks:
            print(f"  {what}: {got:.2f}x, {'met' if got >= want else 'NOT met'}")
        print(f"  0 requests shed: {s['shed']}, {'met' if s['shed'] == 0 else 'NOT met'}")
        err = abs(s["predicted_vs_reported"])
        print(f"  predicted cached tokens within 5% of reported: {100 * err:.1f}%, "
              f"{'met' if err <= 0.05 else 'NOT met'}")
    late = max(s["max_lateness"] for s in summary.values())
    if late > 1:
        print(f"note: a request started up to {late:.1f} s after its arrival time (client "
              f"threads: raise --max-clients)")
    write_results()
    svg_chart(summary, a.out / "router_trace.svg")
    print(f"chart: {a.out / 'router_trace.svg'}")


if __name__ == "__main__":
    main()
