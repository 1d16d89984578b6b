#!/usr/bin/env python3
"""Load generator for `tachyon serve` (or any OpenAI-compatible server).

Closed loop: C concurrent clients, each sending requests back to back until R requests are done
in total; every request streams (/v1/completions, token-id prompts of exact length, ignore_eos so
each produces exactly the requested tokens). Reports generated tokens/s, TTFT and TPOT
percentiles measured at the client (TTFT includes queueing).

Workloads (see BENCHMARKS.md):
  A: distinct 128-token prompts, 64 new tokens
  B: one shared 512-token prefix + distinct 32-token suffix, 32 new tokens

  bench/serve_load.py --url http://127.0.0.1:8080 --workload A --concurrency 8 --requests 32
"""

import argparse
import http.client
import json
import random
import threading
import time
import urllib.parse
import urllib.request


def post_json(base, path, body, api_key):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {api_key}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def token_prompt(base, api_key, n_tokens, rng, words):
    """Exactly n_tokens ids: BOS (if the tokenizer adds one) + ids of random words."""
    text = " ".join(rng.choice(words) for _ in range(n_tokens * 2))
    ids = post_json(base, "/tokenize", {"prompt": text}, api_key)["tokens"]
    return ids[:n_tokens]


def model_name(base, api_key):
    req = urllib.request.Request(base + "/v1/models",
                                 headers={"Authorization": f"Bearer {api_key}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())["data"][0]["id"]


def stream_one(url, api_key, model, prompt, max_tokens):
    """Returns (ttft_s, tpot_s or None, completion_tokens, e2e_s)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body=body,
                 headers={"Content-Type": "application/json",
                          "Authorization": f"Bearer {api_key}"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    first = last = None
    tokens = 0
    buf = b""
    while True:
        data = resp.read1(65536)
        if not data:
            break
        buf += data
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if not event.startswith(b"data: ") or event == b"data: [DONE]":
                continue
            j = json.loads(event[6:])
            now = time.perf_counter()
            if j.get("usage"):
                tokens = j["usage"]["completion_tokens"]
            if j.get("choices") and j["choices"][0].get("text"):
                first = first or now
                last = now
    conn.close()
    end = time.perf_counter()
    if first is None:
        raise RuntimeError("no tokens streamed")
    tpot = (last - first) / (tokens - 1) if tokens > 1 else None
    return first - t0, tpot, tokens, end - t0


def pct(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--api-key", default="none")
    ap.add_argument("--workload", choices=["A", "B"], default="A")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--requests", type=int, default=0, help="total requests (default 4 x C)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    total = args.requests or 4 * args.concurrency
    rng = random.Random(args.seed)
    words = ("once upon a time there was little girl named lily she loved to play with her ball "
             "in the park one day big dog came and they were happy friends sun tree bird").split()
    model = model_name(args.url, args.api_key)
    if args.workload == "A":
        prompts = [token_prompt(args.url, args.api_key, 128, rng, words) for _ in range(total)]
        max_tokens = 64
    else:
        prefix = token_prompt(args.url, args.api_key, 512, rng, words)
        prompts = [prefix + token_prompt(args.url, args.api_key, 33, rng, words)[1:]
                   for _ in range(total)]
        max_tokens = 32

    results, errors = [], []
    lock = threading.Lock()
    next_index = [0]

    def worker():
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= total:
                return
            try:
                r = stream_one(args.url, args.api_key, model, prompts[i], max_tokens)
                with lock:
                    results.append(r)
            except Exception as e:  # noqa: BLE001 - reported below
                with lock:
                    errors.append(str(e))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0

    ttft = [r[0] for r in results]
    tpot = [r[1] for r in results if r[1] is not None]
    gen = sum(r[2] for r in results)
    print(f"workload {args.workload}: {len(results)} requests ok, {len(errors)} failed, "
          f"concurrency {args.concurrency}, {wall:.2f} s")
    print(f"  generated tokens/s (total): {gen / wall:.1f}")
    print(f"  TTFT p50 / p99: {pct(ttft, 50):.3f} s / {pct(ttft, 99):.3f} s")
    print(f"  TPOT p50 / p99: {pct(tpot, 50) * 1000:.1f} ms / {pct(tpot, 99) * 1000:.1f} ms")
    if errors:
        print("  first error:", errors[0])
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
