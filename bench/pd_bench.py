#!/usr/bin/env python3
"""Prefill/decode disaggregation (docs/pd.md): decode time per output token while long prompts
keep arriving, colocated against disaggregated, on one machine under the same load.

Clusters (every replica `tachyon serve --threads --threads`, behind `tachyon route`):
  colocated      two replicas (--role both), route --replica A --replica B
  disaggregated  one --role prefill and one --role decode replica, route --prefill P --decode D
Phases, each --duration seconds, the same clients:
  decode_only    (disaggregated cluster) --decoders streams in closed loops: a --decode-prompt
                 token prompt, --decode-tokens tokens out (ignore_eos); nothing else
  colocated      the same decoders, and --long-streams closed loops of --long-tokens prompts
                 (2 tokens out), every prompt unique (no cache reuse)
  disaggregated  the same on the disaggregated cluster
Reported per phase: time per output token (TPOT) of the decoders, per request (p50 / p99) and
per token gap (p50 / p99), decode tokens/s, and the long prompts' TTFT (p50 / p99). Then the
transfer: a --long-tokens prompt prefilled for the decode replica twice
(+ 1 token; the second time the prefill replica's cache holds its blocks, so they go out at once,
and the token computed is in a partial block that is not sent), its bytes
over its transfer time from the prefill replica's /metrics, against the loopback TCP bandwidth
of a plain blast (--blast-mib through one 127.0.0.1 connection) measured in the same run. Then,
with both clusters up and idle, one long prompt's TTFT alone, --alone-reps times on each
(after one pair that warms them),
alternating (disaggregated, colocated, disaggregated, ...: the VM's drift between minutes hits
both alike), each a fresh prompt: the medians, the median of the pairs' ratios, and the issue's
target (disaggregated <= colocated + the transfer of one layer + 10%; one layer = the cached
transfer's time / the model's layers). Writes results.json to --out.

  python3 bench/pd_bench.py --duration 60 --out /tmp/pd_bench
"""

import argparse
import http.client
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from router_trace_bench import Proc, block_tokens, default_model, pct, wait_router  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path)
    body = conn.getresponse().read().decode()
    conn.close()
    return body


def metric(port, name):
    total = 0.0
    for line in get(port, "/metrics").splitlines():
        if line.startswith(name):
            total += float(line.rsplit(" ", 1)[1])
    return total


def stream(port, prompt, max_tokens, extra=None):
    """Streams one completion; returns (ok, ttft, [token arrival times])."""
    body = {"model": "m", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "stream": True}
    body.update(extra or {})
    start = time.monotonic()
    times = []
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        conn.request("POST", "/v1/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            resp.read()
            return False, None, []
        ok = False
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.decode().strip()
            if line == "data: [DONE]":
                ok = True
                break
            if line.startswith("data: "):
                ev = json.loads(line[6:])
                if "error" in ev:
                    break
                if any(c.get("text") for c in ev.get("choices", [])):
                    times.append(time.monotonic())
        conn.close()
    except (OSError, http.client.HTTPException, ValueError):
        return False, None, times
    return ok, (times[0] - start) if times else None, times


class Cluster:
    def __init__(self, a, kind, out):
        self.procs = []
        common = [a.binary, "serve", "-m", str(a.model), "--host", "127.0.0.1", "--port", "0",
                  "--threads", str(a.threads), "--served-model-name", "m", "--max-model-len",
                  str(a.max_model_len)]
        route = [a.binary, "route", "--host", "127.0.0.1", "--port", "0", "--tokenizer",
                 str(a.model), "--probe-interval", "0.2"]
        if kind == "colocated":
            for i in range(2):
                r = self.start(common, out / f"{kind}-{i}.log")
                route += ["--replica", r.url]
        else:
            self.prefill = self.start(common + ["--role", "prefill"], out / f"{kind}-prefill.log")
            self.decode = self.start(common + ["--role", "decode", "--kv-port", "0"],
                                     out / f"{kind}-decode.log")
            route += ["--prefill", self.prefill.url, "--decode", self.decode.url,
                      "--pd-min-prompt-tokens", str(a.pd_min_prompt_tokens)]
        self.router = Proc(route, out / f"{kind}-router.log", "tachyon route")
        self.procs.append(self.router)
        wait_router(self.router.port, 2)
        if kind != "colocated":
            deadline = time.time() + 60
            while metric(self.router.port, "tachyon_router_pd_kv_listeners") < 1:
                if time.time() > deadline:
                    raise RuntimeError("the router never learned the decode KV listener")
                time.sleep(0.1)

    def start(self, args, log):
        p = Proc(args, log, "tachyon serve")
        self.procs.append(p)
        return p

    def stop(self):
        for p in reversed(self.procs):
            p.stop()


def run_phase(a, port, with_long, seed0):
    stop_at = time.monotonic() + a.duration
    decode_results, long_results = [], []
    counter = iter(range(seed0, seed0 + 10**6))
    lock = threading.Lock()

    def next_seed():
        with lock:
            return next(counter)

    def decoder():
        while time.monotonic() < stop_at:
            ok, ttft, times = stream(port, block_tokens(next_seed(), a.decode_prompt),
                                     a.decode_tokens)
            if ok:
                decode_results.append(times)

    def long_loop():
        while time.monotonic() < stop_at:
            ok, ttft, _ = stream(port, block_tokens(next_seed(), a.long_tokens), 2)
            if ok:
                long_results.append(ttft)

    threads = [threading.Thread(target=decoder) for _ in range(a.decoders)]
    if with_long:
        threads += [threading.Thread(target=long_loop) for _ in range(a.long_streams)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    per_request = [(t[-1] - t[0]) / (len(t) - 1) for t in decode_results if len(t) > 1]
    gaps = [t[i + 1] - t[i] for t in decode_results for i in range(len(t) - 1)]
    return {
        "decode_requests": len(decode_results),
        "decode_tok_s": sum(len(t) for t in decode_results) / wall,
        "tpot_p50": pct(per_request, 0.5), "tpot_p99": pct(per_request, 0.99),
        "gap_p50": pct(gaps, 0.5), "gap_p99": pct(gaps, 0.99),
        "long_requests": len(long_results),
        "long_ttft_p50": pct(long_results, 0.5), "long_ttft_p99": pct(long_results, 0.99),
    }


def ttft_alone_pairs(a, disagg_port, coloc_port, seed0):
    """One fresh long prompt alone on each cluster in turn, --alone-reps pairs: per cluster the
    TTFTs, and each pair's ratio disaggregated / colocated. A first pair, not counted, warms
    both (a fresh cluster's first long prompt faults its pages in)."""
    d, c = [], []
    for i in range(-1, a.alone_reps):
        ok_d, t_d, _ = stream(disagg_port, block_tokens(seed0 + 2 * i, a.long_tokens), 2)
        ok_c, t_c, _ = stream(coloc_port, block_tokens(seed0 + 2 * i + 1, a.long_tokens), 2)
        if ok_d and ok_c and i >= 0:
            d.append(t_d)
            c.append(t_c)
    return {"disaggregated": d, "colocated": c, "ratios": [x / y for x, y in zip(d, c)]}


def transfer_probe(a, cluster):
    """Bytes / seconds of the second transfer of one prompt (its blocks all cached on the
    prefill replica, so they go out at once). The prompt is --long-tokens + 1 tokens: every
    full block of it is a prefix-cache hit the second time and only the last token is computed,
    in a block that is not sent, so the transfer's time is the wire's, not a forward pass's."""
    info = json.loads(get(cluster.decode.port, "/v1/replica_info"))
    prompt = block_tokens(777777, a.long_tokens + 1)
    sent = 'tachyon_kv_transfer_bytes_total{direction="sent"}'
    secs = 'tachyon_kv_transfer_seconds_total{direction="sent"}'
    out = {}
    for attempt in ("computed", "cached"):
        b0, s0 = metric(cluster.prefill.port, sent), metric(cluster.prefill.port, secs)
        stream(cluster.prefill.port, prompt, 1,
               {"kv_transfer_params": {"address": info["kv_address"],
                                       "transfer_id": f"probe-{attempt}"}})
        b, s = metric(cluster.prefill.port, sent) - b0, metric(cluster.prefill.port, secs) - s0
        out[attempt] = {"bytes": b, "seconds": s, "mib_s": b / s / 2**20 if s > 0 else 0.0}
    return out


def loopback_blast(mib):
    """A plain TCP blast over 127.0.0.1: MiB/s of `mib` MiB through one connection."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    total = mib << 20
    got = [0]

    def sink():
        c, _ = srv.accept()
        buf = bytearray(4 << 20)
        view = memoryview(buf)
        while got[0] < total:
            n = c.recv_into(view)
            if not n:
                break
            got[0] += n
        c.close()

    t = threading.Thread(target=sink)
    t.start()
    s = socket.create_connection(srv.getsockname())
    chunk = b"\0" * (4 << 20)
    t0 = time.monotonic()
    sent = 0
    while sent < total:
        s.sendall(chunk)
        sent += len(chunk)
    t.join()
    dt = time.monotonic() - t0
    s.close()
    srv.close()
    return got[0] / dt / 2**20


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--binary", default=str(REPO / "build" / "tachyon"))
    p.add_argument("--model", default=str(default_model()))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-model-len", type=int, default=4608)
    p.add_argument("--duration", type=float, default=60)
    p.add_argument("--decoders", type=int, default=4)
    p.add_argument("--decode-prompt", type=int, default=64)
    p.add_argument("--decode-tokens", type=int, default=64)
    p.add_argument("--long-tokens", type=int, default=2048)
    p.add_argument("--long-streams", type=int, default=1)
    p.add_argument("--pd-min-prompt-tokens", type=int, default=256)
    p.add_argument("--alone-reps", type=int, default=5)
    p.add_argument("--blast-mib", type=int, default=2048)
    p.add_argument("--out", default="/tmp/pd_bench")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    res = {"config": vars(a)}
    res["loopback_mib_s"] = loopback_blast(a.blast_mib)
    inspect = subprocess.run([a.binary, "inspect", "--json", str(a.model)], capture_output=True,
                             text=True, check=True)
    res["n_layers"] = json.loads(inspect.stdout)["hyperparameters"]["block_count"]
    c = Cluster(a, "disaggregated", out)
    try:
        res["decode_only"] = run_phase(a, c.router.port, False, 1_000_000)
        res["disaggregated"] = run_phase(a, c.router.port, True, 2_000_000)
        res["transfer"] = transfer_probe(a, c)
        res["disaggregated"]["kv_sent_bytes"] = metric(
            c.prefill.port, 'tachyon_kv_transfer_bytes_total{direction="sent"}')
        res["disaggregated"]["kv_transfers_failed"] = metric(
            c.prefill.port, 'tachyon_kv_transfers_total{direction="sent",outcome="failed"}')
    finally:
        c.stop()
    c = Cluster(a, "colocated", out)
    try:
        res["colocated"] = run_phase(a, c.router.port, True, 2_000_000)
        (out / "alone").mkdir(exist_ok=True)
        d = Cluster(a, "disaggregated", out / "alone")
        try:
            res["alone"] = ttft_alone_pairs(a, d.router.port, c.router.port, 3_000_000)
        finally:
            d.stop()
    finally:
        c.stop()
    for k in ("disaggregated", "colocated"):
        v = res["alone"][k]
        res[k]["ttft_alone"] = statistics.median(v) if v else float("nan")
    res["loopback_mib_s_after"] = loopback_blast(a.blast_mib)
    (out / "results.json").write_text(json.dumps(res, indent=2))
    for k in ("decode_only", "colocated", "disaggregated"):
        r = res[k]
        line = (f"{k:>13}: TPOT p50 {1e3 * r['tpot_p50']:.1f} ms p99 {1e3 * r['tpot_p99']:.1f} ms"
                f"  gap p50 {1e3 * r['gap_p50']:.1f} p99 {1e3 * r['gap_p99']:.1f} ms"
                f"  {r['decode_tok_s']:.1f} decode tok/s ({r['decode_requests']} requests)")
        if r["long_requests"]:
            line += (f"  long TTFT p50 {r['long_ttft_p50']:.2f} s p99 {r['long_ttft_p99']:.2f} s"
                     f" ({r['long_requests']}), alone {r['ttft_alone']:.2f} s (median)")
        print(line)
    al = res["alone"]
    if al["ratios"]:
        layer_s = res["transfer"]["cached"]["seconds"] / (res.get("n_layers") or 1)
        bound = (res["colocated"]["ttft_alone"] + layer_s) * 1.1
        print(f"TTFT alone, {len(al['ratios'])} alternating pairs: disaggregated "
              + " / ".join(f"{x:.2f}" for x in al["disaggregated"]) + " s, colocated "
              + " / ".join(f"{x:.2f}" for x in al["colocated"]) + " s; pair ratios median "
              f"{statistics.median(al['ratios']):.3f}; target: median disaggregated "
              f"{res['disaggregated']['ttft_alone']:.2f} s <= (colocated "
              f"{res['colocated']['ttft_alone']:.2f} s + one layer's transfer "
              f"{1e3 * layer_s:.1f} ms) x 1.1 = {bound:.2f} s: "
              f"{'met' if res['disaggregated']['ttft_alone'] <= bound else 'NOT met'}")
    t = res["transfer"]["cached"]
    print(f"transfer of a cached {a.long_tokens}-token prompt: {t['bytes'] / 2**20:.1f} MiB in "
          f"{t['seconds']:.3f} s = {t['mib_s']:.0f} MiB/s; loopback TCP blast "
          f"{res['loopback_mib_s']:.0f} / {res['loopback_mib_s_after']:.0f} MiB/s (before / "
          f"after): {100 * t['mib_s'] / max(res['loopback_mib_s'], 1e-9):.0f}% of the first")
    print(f"disaggregated TPOT p99 / decode-only TPOT p99: "
          f"{res['disaggregated']['tpot_p99'] / res['decode_only']['tpot_p99']:.2f}; colocated: "
          f"{res['colocated']['tpot_p99'] / res['decode_only']['tpot_p99']:.2f}")


if __name__ == "__main__":
    main()
