#!/usr/bin/env python3
"""Single-stream decode speed of OpenAI-compatible servers on the speculative-decoding prompts
(bench/spec_prompts/: code-edit, summarise, chat), so tachyon and a peer (llama.cpp's
llama-server with or without its --spec-type options) are measured on the same prompts and
the same client.

  bench/spec_url_bench.py --server off=http://127.0.0.1:8080 --server ngram=http://127.0.0.1:8081 \\
      [--reps 3] [-n 200] [--template chatml|raw] [--workloads code-edit,summarise,chat]

Each request is a greedy /v1/completions stream of -n tokens; servers alternate request by
request (off, ngram, off, ngram, ...) so load drift hits all alike. Per server and workload the
medians of: decode tok/s (tokens after the first / time after the first token), total tok/s
(tokens / whole request time, prompt included), and the ratio of each to the first server's.
A llama-server's own timings (predicted tok/s, drafted / accepted) are printed when it sends
them. Texts are compared with the first server's: a difference is reported (greedy output
should not depend on speculation).
"""

import argparse
import json
import pathlib
import statistics
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent


def wrap(text, template):
    if template == "chatml":
        return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
    return text


def model_of(url):
    req = urllib.request.Request(url.rstrip("/") + "/v1/models",
                                 headers={"Authorization": "Bearer none"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())["data"][0]["id"]


def one(url, prompt, n):
    body = {"model": model_of(url), "prompt": prompt, "max_tokens": n, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    req = urllib.request.Request(url.rstrip("/") + "/v1/completions",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer none"})
    t0 = time.perf_counter()
    first = last = None
    text, chunks, tokens, timings = "", 0, None, None
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            ev = json.loads(line[5:])
            if ev.get("usage"):
                tokens = ev["usage"].get("completion_tokens", tokens)
            if ev.get("timings"):
                timings = ev["timings"]
            for c in ev.get("choices") or []:
                if c.get("text"):
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    text += c["text"]
                    chunks += 1
    t1 = time.perf_counter()
    tokens = tokens or chunks
    decode = (tokens - 1) / (last - first) if first and last > first and tokens > 1 else 0.0
    return {"text": text, "tokens": tokens, "decode": decode, "total": tokens / (t1 - t0),
            "timings": timings}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", action="append", required=True, help="NAME=URL (repeatable)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--template", default="chatml", choices=["chatml", "raw"])
    ap.add_argument("--workloads", default="code-edit,summarise,chat")
    a = ap.parse_args()
    servers = [s.split("=", 1) for s in a.server]
    results = {}
    for w in a.workloads.split(","):
        prompt = wrap((ROOT / "spec_prompts" / f"{w}.txt").read_text().rstrip("\n"), a.template)
        for _ in range(a.reps):
            for name, url in servers:
                results.setdefault((w, name), []).append(one(url, prompt, a.n))
    base = servers[0][0]
    print(f"{'workload':<10} {'server':<12} {'decode tok/s':>12} {'ratio':>6} {'total tok/s':>11}"
          f" {'ratio':>6} {'tokens':>6}  peer timings / text")
    for w in a.workloads.split(","):
        b = results[(w, base)]
        bd = statistics.median(r["decode"] for r in b)
        bt = statistics.median(r["total"] for r in b)
        for name, _ in servers:
            rs = results[(w, name)]
            d = statistics.median(r["decode"] for r in rs)
            t = statistics.median(r["total"] for r in rs)
            note = ""
            tm = rs[-1]["timings"]
            if tm:
                note = f"predicted {tm.get('predicted_per_second', 0):.1f} tok/s"
                if tm.get("draft_n"):
                    note += f", accepted {tm.get('draft_n_accepted')}/{tm.get('draft_n')}"
            if rs[0]["text"] != b[0]["text"]:
                note += " [text differs from " + base + "]"
            print(f"{w:<10} {name:<12} {d:>12.2f} {d / bd:>6.2f} {t:>11.2f} {t / bt:>6.2f}"
                  f" {rs[0]['tokens']:>6}  {note}")


if __name__ == "__main__":
    main()
