#!/usr/bin/env python3
"""KV offload tiers (docs/kv_tiers.md) on a multi-turn replay and across a restart.

Replays the first --requests requests of the Mooncake synthetic trace
(../shared/testdata/traces/mooncake_synthetic_first2000.jsonl, scaled as bench/router_trace_bench.py
scales it: one 512-token trace block -> --block-tokens tokens) one after another against one
`tachyon serve` whose KV cache (--kv-cache-memory) is too small for the trace's reuse, in three
phases: tiers off; tiers on (--kv-offload-memory, --kv-offload-dir in a fresh directory); tiers on
again after a restart with the same directory. Reports per phase: the prompt tokens served from
cache (hit rate), TTFT p50/p90/p99, wall time, and the tier counters from /metrics.
Then, with no reuse at all, tiers off against on (no_reuse_ab: two servers side by side, warmed,
then --ab-rounds interleaved rounds of --unique-requests distinct prompts): the tiers' cost in wall
time (medians, and the median of the per-round ratios) and in CPU seconds (the tiers' own threads,
by name, from /proc; the engine thread's copies into the host tier, from /metrics), which resolves a
cost of well under 1% even when wall times are noisy. --no-reuse-only runs just this, --no-trace
skips the trace phases. Then the restart case alone: one --long-tokens prompt computed cold
(TTFT), the server restarted with the same --kv-offload-dir, the same prompt again (TTFT from the
disk tier).
Writes results.json to --out.

  python3 bench/kv_tier_bench.py --requests 120 --out /tmp/kv_tier_bench
  python3 bench/kv_tier_bench.py --no-reuse-only --ab-rounds 10 --out /tmp/kv_tier_cost
  python3 bench/kv_tier_bench.py --no-trace --out /tmp/kv_tier_cost  # no reuse + restart probe
"""

import argparse
import json
import os
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

TIER_THREADS = ("kv-disk-write", "kv-load")  # the tiers' own threads (pthread names)


def thread_cpu(pid):
    """{tid: (name, CPU seconds)} of a process's threads (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                st = f.read()
        except OSError:
            continue  # the thread ended
        fields = st[st.rindex(")") + 2:].split()
        name = st[st.index("(") + 1:st.rindex(")")]
        out[tid] = (name, (int(fields[11]) + int(fields[12])) / tick)
    return out


def cpu_split(before, after):
    """CPU seconds between two thread_cpu() samples: (tier threads, all other threads)."""
    tier = other = 0.0
    for tid, (name, sec) in after.items():
        d = sec - before.get(tid, (name, 0.0))[1]
        if name in TIER_THREADS:
            tier += d
        else:
            other += d
    return tier, other


def system_busy():
    """Busy CPU seconds of the whole machine so far (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def no_reuse_ab(a, out, work, res):
    """No reuse: distinct prompts, tiers off vs on (their cost when nothing comes back).

    Two servers side by side, one without and one with the tiers, first warmed with
    --warm-requests prompts each (the pool, the host tier and the disk tier's write queue fill, so
    the timed rounds run in the steady state: every new block evicts one to the host tier, which
    spills one to the disk tier, which writes it in the CPU time the engine leaves or declines it).
    Then --ab-rounds rounds of --unique-requests new prompts each, the same prompts for both, the
    order alternating (ABBA), so the machine's load hits both alike. Per round: wall time and the
    CPU seconds of each server's threads, the tiers' own threads (kv-disk-write, kv-load) apart,
    and the engine thread's CPU time copying evicted blocks into the host tier (from /metrics).
    The disk writer's backlog after the last round is waited for and counted. The tiers' CPU
    share is an upper bound of their cost: the disk writer runs at idle priority, on CPU time the
    engine leaves."""
    prompt_id = iter(range(10**6, 10**7))

    def prompts(n):
        return [{"t": 0, "prompt": block_tokens(next(prompt_id), a.unique_tokens), "max_tokens": 8}
                for _ in range(n)]

    servers = {"no_reuse_off": serve(a, out / "no_reuse_off.log"),
               "no_reuse_on": serve(a, out / "no_reuse_on.log", work / "unique")}
    try:
        warm = prompts(a.warm_requests)
        for s in servers.values():
            replay(s, warm)
        rounds = {k: [] for k in servers}
        for i in range(a.ab_rounds):
            batch = prompts(a.unique_requests)
            order = list(servers) if i % 2 == 0 else list(servers)[::-1]
            for phase in order:
                s = servers[phase]
                m0 = metrics(s.port)
                c0, b0 = thread_cpu(s.proc.pid), system_busy()
                r = replay(s, batch)
                c1, b1 = thread_cpu(s.proc.pid), system_busy()
                tier, other = cpu_split(c0, c1)
                def delta(name):
                    return r["tiers"].get(name, 0) - m0.get(name, 0)
                rounds[phase].append({
                    "wall": r["wall_seconds"], "tier_threads_cpu": tier,
                    "other_threads_cpu": other,
                    "offer_seconds": delta("tachyon_kv_offload_offer_seconds_total"),
                    "offered_blocks": delta("tachyon_kv_offload_offered_blocks_total"),
                    "disk_stores": delta('tachyon_kv_tier_stores_total{tier="disk"}'),
                    "machine_busy_cpu": b1 - b0})
                res.setdefault(phase, r)  # the first round's summary
        # The disk writer's backlog: its CPU until it goes idle counts too.
        s = servers["no_reuse_on"]
        c0 = last = thread_cpu(s.proc.pid)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = thread_cpu(s.proc.pid)
            if cpu_split(last, now)[0] == 0:
                break
            last = now
        backlog = cpu_split(c0, now)[0]
        res["no_reuse_final"] = metrics(s.port)
    finally:
        for s in servers.values():
            s.stop()
    off, on = rounds["no_reuse_off"], rounds["no_reuse_on"]
    walls = {k: [r["wall"] for r in v] for k, v in rounds.items()}
    res["no_reuse_rounds"] = rounds
    res["no_reuse_walls"] = walls
    res["no_reuse_cost"] = (statistics.median(walls["no_reuse_on"]) /
                            statistics.median(walls["no_reuse_off"]) - 1)
    res["no_reuse_cost_paired"] = statistics.median(
        n["wall"] / f["wall"] for f, n in zip(off, on)) - 1
    on_cpu = sum(r["tier_threads_cpu"] + r["other_threads_cpu"] for r in on) + backlog
    tier_cpu = sum(r["tier_threads_cpu"] for r in on) + backlog
    offer = sum(r["offer_seconds"] for r in on)
    res["no_reuse_tier_cpu"] = {"tier_threads": tier_cpu, "writer_backlog": backlog,
                                "engine_offer": offer, "server_total": on_cpu,
                                "share": (tier_cpu + offer) / on_cpu,
                                "offered_blocks": sum(r["offered_blocks"] for r in on),
                                "disk_stores": sum(r["disk_stores"] for r in on)}


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
    p.add_argument("--unique-requests", type=int, default=4)
    p.add_argument("--unique-tokens", type=int, default=1024)
    p.add_argument("--ab-rounds", type=int, default=10)
    p.add_argument("--warm-requests", type=int, default=24)
    p.add_argument("--no-reuse-only", action="store_true")
    p.add_argument("--no-trace", action="store_true", help="skip the trace replay phases")
    p.add_argument("--out", default="/tmp/kv_tier_bench")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    replay_trace = not (a.no_reuse_only or a.no_trace)
    reqs = [r for r in load_trace(a.trace, a.requests, a.block_tokens, a.max_output)
            if len(r["prompt"]) + r["max_tokens"] < a.max_model_len] if replay_trace else []
    work = Path(tempfile.mkdtemp(prefix="kv-tier-bench-"))
    res = {"config": vars(a), "requests": len(reqs)}
    try:
        if replay_trace:
            for phase, tiers in (("off", None), ("on", work / "kv"), ("after_restart", work / "kv")):
                s = serve(a, out / f"{phase}.log", tiers)
                try:
                    res[phase] = replay(s, reqs)
                finally:
                    s.stop()
        no_reuse_ab(a, out, work, res)
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
    if "no_reuse_rounds" in res:
        rounds = res["no_reuse_rounds"]
        for k, rs in rounds.items():
            print(f"{k:>14} per round: wall " + " ".join(f"{r['wall']:.2f}" for r in rs) +
                  " s; server CPU " + " ".join(
                      f"{r['tier_threads_cpu'] + r['other_threads_cpu']:.2f}" for r in rs) + " s")
        print(f"no-reuse cost of the tiers: {100 * res['no_reuse_cost']:+.1f}% wall time "
              f"(medians of {len(rounds['no_reuse_off'])} interleaved rounds), paired per round "
              f"{100 * res['no_reuse_cost_paired']:+.1f}%")
        c = res["no_reuse_tier_cpu"]
        print(f"tiers' CPU with the tiers on: their threads {c['tier_threads']:.3f} s "
              f"(backlog after the rounds {c['writer_backlog']:.3f} s), the engine's copies into "
              f"the host tier {c['engine_offer']:.3f} s, of {c['server_total']:.2f} s of server "
              f"CPU: {100 * c['share']:.2f}%")
        if c["offered_blocks"] and c["disk_stores"]:
            copy_us = 1e6 * c["engine_offer"] / c["offered_blocks"]
            write_us = 1e6 * c["tier_threads"] / c["disk_stores"]
            print(f"per block: the engine's copy {copy_us:.0f} us ({c['offered_blocks']:.0f} "
                  f"blocks offered in the rounds), the tiers' threads {write_us:.0f} us a block "
                  f"written to disk ({c['disk_stores']:.0f} written in the rounds)")
        fin = res.get("no_reuse_final", {})
        disk = {k: int(fin.get(f'tachyon_kv_tier_{k}_total{{tier="disk"}}', 0))
                for k in ("stores", "declined", "evictions")}
        print(f"disk tier over the whole run (warm-up included): {disk['stores']} blocks written, "
              f"{disk['declined']} declined, {disk['evictions']} evicted")
        off_cpu = statistics.median(r["tier_threads_cpu"] + r["other_threads_cpu"]
                                    for r in rounds["no_reuse_off"])
        on_cpu = statistics.median(r["tier_threads_cpu"] + r["other_threads_cpu"]
                                   for r in rounds["no_reuse_on"])
        print(f"server CPU per round, medians: off {off_cpu:.2f} s, on {on_cpu:.2f} s "
              f"({100 * (on_cpu / off_cpu - 1):+.1f}%)")
    for k in ("long_cold", "long_from_disk"):
        if k not in res:
            continue
        r = res[k]
        print(f"{k:>14}: TTFT {r['ttft']:.3f}s, {r['cached']} of {r['prompt_tokens']} cached")


if __name__ == "__main__":
    main()
