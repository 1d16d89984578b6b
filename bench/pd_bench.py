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
with both clusters up and idle, one long prompt's TTFT alone on each in alternation
(disaggregated, colocated, colocated, disaggregated, ...: the VM's drift between minutes hits
both alike, and neither side always runs first),
after one pair that warms them, up to --alone-reps pairs within --alone-budget seconds, each a
fresh prompt, with the replicas' own counters read around each request: the prefill's compute
(engine forward time), the transfer's tail after it, the decode replica's time to its first
token, the rest (router and HTTP). Printed: each part's median (min-max), and the issue's target
(disaggregated <= (colocated + the transfer of one layer) x 1.1; one layer = the cached
transfer's time / the model's layers) on the medians, on the per-pair ratios, and with the same
prefill on both sides (the median compute of every prefill plus each side's median overhead, so
the prefill's own noise cancels). --alone-only: only the transfer probe and the pairs.
Writes results.json to --out.

  python3 bench/pd_bench.py --duration 60 --out /tmp/pd_bench
"""

import argparse
import http.client
import json
import os
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


def stream(port, prompt, max_tokens, extra=None, finish_is_token=False):
    """Streams one completion; returns (ok, ttft, [token arrival times]). finish_is_token: an
    event with a finish_reason but no text counts as a token's (its text held back)."""
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
                if any(c.get("text") or (finish_is_token and c.get("finish_reason"))
                       for c in ev.get("choices", [])):
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


# Server-side counters read around each request of the alone phase (one request at a time, so
# their deltas are that request's): engine forward time, the replicas' own TTFT (arrival to
# first token; a prefill replica's includes the wait for its transfer's Ack), the prefill
# replica's transfer tail (its answer's wait for the Ack after its last forward pass).
FWD = "tachyon_engine_forward_seconds_total"
TTFT_SUM = "tachyon_time_to_first_token_seconds_sum"
TAIL = "tachyon_kv_transfer_tail_seconds_total"
TTFT_COUNT = "tachyon_time_to_first_token_seconds_count"
RUNNING = "tachyon_num_requests_running"


def scrape(ports):
    """{name: value summed over `ports`} for FWD, TTFT_SUM, TAIL, TTFT_COUNT and RUNNING."""
    out = dict.fromkeys((FWD, TTFT_SUM, TAIL, TTFT_COUNT, RUNNING), 0.0)
    for port in ports:
        for line in get(port, "/metrics").splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in out:
                out[name] += float(line.rsplit(" ", 1)[1])
    return out


CLK_TCK = os.sysconf("SC_CLK_TCK")


def first_token(port, prompt):
    """Streams `prompt` with max_tokens 1 (so the replicas' counters hold no decode step): the
    seconds until the event carrying its token (its text, or its finish_reason when the text is
    held back), or None on failure."""
    ok, ttft, _ = stream(port, prompt, 1, finish_is_token=True)
    return ttft if ok else None


def cpu_seconds(pid):
    """User + system CPU seconds of process `pid` so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def timed_request(port, prompt, sides, pids):
    """One long prompt through the router at `port`: (client TTFT or None, {side: {counter:
    delta}}, {name: CPU seconds}) with `sides` {side: [replica ports]} and `pids` {name: pid}
    (every process of both clusters and this one: who else ran while it computed)."""
    before = {k: scrape(v) for k, v in sides.items()}
    cpu0 = {k: cpu_seconds(v) for k, v in pids.items()}
    ttft = first_token(port, prompt)
    cpu = {k: cpu_seconds(v) - cpu0[k] for k, v in pids.items()}
    # The client can have its token before the engine publishes the counters of the step that
    # made it: wait until every side counted the request and runs nothing.
    deadline = time.monotonic() + 10
    while True:
        after = {k: scrape(v) for k, v in sides.items()}
        if time.monotonic() > deadline or all(
                after[k][TTFT_COUNT] > before[k][TTFT_COUNT] and after[k][RUNNING] == 0
                for k in sides):
            break
        time.sleep(0.005)
    deltas = {k: {n: after[k][n] - before[k][n] for n in after[k]} for k in sides}
    return ttft, deltas, cpu


def split_disaggregated(ttft, d):
    """Where a disaggregated TTFT went, from the counters' deltas (seconds)."""
    p, dec = d["prefill"], d["decode"]
    return {"ttft": ttft, "prefill_compute": p[FWD], "transfer_tail": p[TAIL],
            "prefill_replica_other": p[TTFT_SUM] - p[FWD] - p[TAIL],
            "decode_first_token": dec[TTFT_SUM], "decode_compute": dec[FWD],
            "router_http": ttft - p[TTFT_SUM] - dec[TTFT_SUM],
            "overhead": ttft - p[FWD]}


def split_colocated(ttft, d):
    r = d["replicas"]
    return {"ttft": ttft, "prefill_compute": r[FWD], "replica_other": r[TTFT_SUM] - r[FWD],
            "router_http": ttft - r[TTFT_SUM], "overhead": ttft - r[FWD]}


def ttft_alone_pairs(a, disagg, coloc, seed0):
    """One fresh long prompt alone on each cluster in turn, up to --alone-reps pairs (at least
    one) within --alone-budget seconds, the odd pairs in the other order: per pair each side's
    TTFT and its server-side split. A
    first pair, not counted, warms both (a fresh cluster's first long prompt faults its pages
    in)."""
    d_sides = {"prefill": [disagg.prefill.port], "decode": [disagg.decode.port]}
    c_sides = {"replicas": [p.port for p in coloc.procs if p is not coloc.router]}
    pids = {"d_prefill": disagg.prefill.proc.pid, "d_decode": disagg.decode.proc.pid,
            "d_router": disagg.router.proc.pid, "c_router": coloc.router.proc.pid,
            "bench": os.getpid()}
    for i, r in enumerate(p for p in coloc.procs if p is not coloc.router):
        pids[f"c_replica{i}"] = r.proc.pid
    pairs = []
    stop_at = None
    for i in range(-1, a.alone_reps):
        if i == 0:
            stop_at = time.monotonic() + a.alone_budget  # from the end of the warm-up pair
        elif i > 0 and time.monotonic() >= stop_at:
            break
        # Odd pairs run the colocated request first: neither side always follows the other.
        sides = [("d", disagg.router.port, seed0 + 2 * i, d_sides),
                 ("c", coloc.router.port, seed0 + 2 * i + 1, c_sides)]
        got = {k: timed_request(port, block_tokens(seed, a.long_tokens), sd, pids)
               for k, port, seed, sd in (sides[::-1] if i % 2 else sides)}
        (t_d, dd, cpu_d), (t_c, dc, cpu_c) = got["d"], got["c"]
        if t_d is not None and t_c is not None and i >= 0:
            pairs.append({"disaggregated": dict(split_disaggregated(t_d, dd), cpu=cpu_d),
                          "colocated": dict(split_colocated(t_c, dc), cpu=cpu_c),
                          "colocated_first": bool(i % 2)})
    return pairs


def spread(values):
    """'median (min-max)' of seconds or ratios."""
    if not values:
        return "n/a"
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def cpu_line(rows):
    return ", ".join(f"{k} {statistics.median(r['cpu'][k] for r in rows):.2f}"
                     for k in rows[0]["cpu"])


def busiest(cpu):
    """CPU seconds of the colocated replica that computed (the router picks one)."""
    return max(v for k, v in cpu.items() if k.startswith("c_replica"))


def alone_verdict(pairs, layer_s):
    """The target (disaggregated TTFT <= (colocated TTFT + one layer's transfer) x 1.1) on the
    pairs, three ways, and the figures behind it: a dict of numbers and printable lines."""
    d = [p["disaggregated"] for p in pairs]
    c = [p["colocated"] for p in pairs]
    med = lambda rows, k: statistics.median(r[k] for r in rows)  # noqa: E731
    v = {"pairs": len(pairs), "layer_s": layer_s,
         "ttft_d": med(d, "ttft"), "ttft_c": med(c, "ttft"),
         "pair_ratio": statistics.median(x["ttft"] / (y["ttft"] + layer_s) for x, y in zip(d, c)),
         "overhead_d": med(d, "overhead"), "overhead_c": med(c, "overhead"),
         "prefill_compute": statistics.median([r["prefill_compute"] for r in d + c])}
    v["bound"] = (v["ttft_c"] + layer_s) * 1.1
    v["met_medians"] = v["ttft_d"] <= v["bound"]
    v["met_pairs"] = v["pair_ratio"] <= 1.1
    # The same prefill on both sides: the median compute of all 2N prefills plus each side's
    # median overhead (TTFT less its own prefill's compute), so the prefill's noise cancels.
    v["same_prefill_d"] = v["prefill_compute"] + v["overhead_d"]
    v["same_prefill_c"] = v["prefill_compute"] + v["overhead_c"]
    v["met_same_prefill"] = v["same_prefill_d"] <= (v["same_prefill_c"] + layer_s) * 1.1
    ok = lambda b: "met" if b else "NOT met"  # noqa: E731
    cpu_share_d = [r["cpu"]["d_prefill"] / r["prefill_compute"] for r in d
                   if r["prefill_compute"] > 0]
    cpu_share_c = [busiest(r["cpu"]) / r["prefill_compute"] for r in c if r["prefill_compute"] > 0]
    col = lambda rows, k: spread([r[k] for r in rows])  # noqa: E731
    lines = [
        f"TTFT of one long prompt alone, {len(pairs)} alternating pairs (median (min-max), s):",
        f"  disaggregated {col(d, 'ttft')} = prefill compute {col(d, 'prefill_compute')}"
        f" + prefill replica other {col(d, 'prefill_replica_other')} + transfer tail"
        f" {col(d, 'transfer_tail')} + decode replica to first token"
        f" {col(d, 'decode_first_token')} (its compute {col(d, 'decode_compute')}) + router and"
        f" HTTP {col(d, 'router_http')}",
        f"  colocated     {col(c, 'ttft')} = prefill compute {col(c, 'prefill_compute')}"
        f" + replica other {col(c, 'replica_other')} + router and HTTP {col(c, 'router_http')}",
        f"  overhead (TTFT - its own prefill compute): disaggregated {col(d, 'overhead')},"
        f" colocated {col(c, 'overhead')}; prefill compute disaggregated / colocated per pair "
        + spread([x["prefill_compute"] / y["prefill_compute"] for x, y in zip(d, c)
                  if y["prefill_compute"] > 0]),
        "  CPU seconds of each process during a disaggregated / colocated request (median):"
        f" {cpu_line(d)} / {cpu_line(c)}; the computing replica's CPU / its prefill compute:"
        f" disaggregated {spread(cpu_share_d)}, colocated {spread(cpu_share_c)}",
        f"target: disaggregated <= (colocated + one layer's transfer {1e3 * layer_s:.1f} ms)"
        f" x 1.1",
        f"  medians: {v['ttft_d']:.2f} s <= {v['bound']:.2f} s: {ok(v['met_medians'])}",
        f"  per pair: disaggregated / (colocated + one layer) "
        + spread([x["ttft"] / (y["ttft"] + layer_s) for x, y in zip(d, c)])
        + f", median <= 1.1: {ok(v['met_pairs'])}",
        f"  same prefill (median compute {v['prefill_compute']:.2f} s + each side's median"
        f" overhead): {v['same_prefill_d']:.3f} s <= {(v['same_prefill_c'] + layer_s) * 1.1:.3f}"
        f" s: {ok(v['met_same_prefill'])}; disaggregation adds"
        f" {1e3 * (v['overhead_d'] - v['overhead_c']):.0f} ms"
        f" ({100 * (v['overhead_d'] - v['overhead_c']) / v['ttft_c']:.1f}% of the colocated"
        f" TTFT)"]
    return v, lines


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
    p.add_argument("--alone-reps", type=int, default=40, help="at most this many pairs")
    p.add_argument("--alone-budget", type=float, default=150,
                   help="seconds after the warm-up pair: no later pair starts after them")
    p.add_argument("--alone-only", action="store_true",
                   help="only the transfer probe and the TTFT pairs (no TPOT phases, no blast)")
    p.add_argument("--blast-mib", type=int, default=2048)
    p.add_argument("--out", default="/tmp/pd_bench")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    res = {"config": vars(a)}
    if not a.alone_only:
        res["loopback_mib_s"] = loopback_blast(a.blast_mib)
    inspect = subprocess.run([a.binary, "inspect", "--json", str(a.model)], capture_output=True,
                             text=True, check=True)
    res["n_layers"] = json.loads(inspect.stdout)["hyperparameters"]["block_count"]
    if not a.alone_only:
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
        if not a.alone_only:
            res["colocated"] = run_phase(a, c.router.port, True, 2_000_000)
        (out / "alone").mkdir(exist_ok=True)
        d = Cluster(a, "disaggregated", out / "alone")
        try:
            if a.alone_only:
                res["transfer"] = transfer_probe(a, d)
            res["alone"] = ttft_alone_pairs(a, d, c, 3_000_000)
        finally:
            d.stop()
    finally:
        c.stop()
    layer_s = res["transfer"]["cached"]["seconds"] / (res.get("n_layers") or 1)
    verdict_lines = []
    if res["alone"]:
        res["alone_verdict"], verdict_lines = alone_verdict(res["alone"], layer_s)
    if not a.alone_only:
        res["loopback_mib_s_after"] = loopback_blast(a.blast_mib)
    (out / "results.json").write_text(json.dumps(res, indent=2))
    for k in ("decode_only", "colocated", "disaggregated"):
        if k not in res:
            continue
        r = res[k]
        line = (f"{k:>13}: TPOT p50 {1e3 * r['tpot_p50']:.1f} ms p99 {1e3 * r['tpot_p99']:.1f} ms"
                f"  gap p50 {1e3 * r['gap_p50']:.1f} p99 {1e3 * r['gap_p99']:.1f} ms"
                f"  {r['decode_tok_s']:.1f} decode tok/s ({r['decode_requests']} requests)")
        if r["long_requests"]:
            line += (f"  long TTFT p50 {r['long_ttft_p50']:.2f} s p99 {r['long_ttft_p99']:.2f} s"
                     f" ({r['long_requests']})")
        print(line)
    t = res["transfer"]["cached"]
    line = (f"transfer of a cached {a.long_tokens}-token prompt: {t['bytes'] / 2**20:.1f} MiB in "
            f"{t['seconds']:.3f} s = {t['mib_s']:.0f} MiB/s")
    if not a.alone_only:
        line += (f"; loopback TCP blast {res['loopback_mib_s']:.0f} / "
                 f"{res['loopback_mib_s_after']:.0f} MiB/s (before / after): "
                 f"{100 * t['mib_s'] / max(res['loopback_mib_s'], 1e-9):.0f}% of the first")
    print(line)
    if not a.alone_only:
        print(f"disaggregated TPOT p99 / decode-only TPOT p99: "
              f"{res['disaggregated']['tpot_p99'] / res['decode_only']['tpot_p99']:.2f}; "
              f"colocated: {res['colocated']['tpot_p99'] / res['decode_only']['tpot_p99']:.2f}")
    print("\n".join(verdict_lines) if verdict_lines else "TTFT alone: no pair completed")


if __name__ == "__main__":
    main()
