#!/usr/bin/env python3
"""Load generator for `tachyon serve` (or any OpenAI-compatible server).

Closed loop: C concurrent clients, each sending requests back to back until R requests are done
in total; every request streams (/v1/completions, token-id prompts of exact length, ignore_eos so
each produces exactly the requested tokens). Reports generated tokens/s, TTFT and TPOT
percentiles measured at the client (TTFT includes queueing).

Workloads (see BENCHMARKS.md):
  A: distinct 128-token prompts, 64 new tokens
  B: one shared 512-token prefix + distinct 32-token suffix, 32 new tokens

One point:
  bench/serve_load.py --url http://127.0.0.1:8080 --workload A --concurrency 8 --requests 32
A sweep (every workload x concurrency; requests per point = --rounds x concurrency, at least
--min-requests, unless --requests is given), written as JSON and drawn against concurrency with gnuplot:
  bench/serve_load.py --workload A,B --concurrency 1,8,32 --json out.json --png out.png

Sizes can be shrunk for smoke tests (--prompt-tokens, --prefix-tokens, --max-tokens).

Structured output: --constraint none,json_schema runs every point unconstrained and with that
output constraint in the same run (interleaved per point) and prints the constrained /
unconstrained generated-tokens/s ratio; constraints: none, json_object, json_schema (an array
of at least 1000 records, never complete before max_tokens), regex, choice.
  bench/serve_load.py --workload A --concurrency 16 --constraint none,json_schema
--constraint-rounds N runs them N times per point, in reverse order every other round (A B,
B A, ...), and prints the median ratio.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
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


# At least 1000 records: the array cannot close before max_tokens, so constrained requests
# generate as many tokens as unconstrained ones (an instruct model would answer "[]" at once).
RECORDS_SCHEMA = {
    "type": "array",
    "minItems": 1000,
    "items": {"type": "object",
              "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                             "tags": {"type": "array", "items": {"type": "string"}},
                             "score": {"type": "number"}, "active": {"type": "boolean"}},
              "required": ["id", "name", "tags", "score", "active"]}}

# The request fields of each --constraint.
CONSTRAINTS = {
    "none": {},
    "json_object": {"response_format": {"type": "json_object"}},
    "json_schema": {"response_format": {"type": "json_schema",
                                        "json_schema": {"name": "records",
                                                        "schema": RECORDS_SCHEMA}}},
    "regex": {"structured_outputs": {"regex": "([a-z]+ ){1,200}[a-z]+\\."}},
    "choice": {"structured_outputs": {"choice": ["once upon a time there was a little girl",
                                                 "one day a big dog came to the park"]}},
}


def stream_one(url, api_key, model, prompt, max_tokens, constraint="none"):
    """Returns (ttft_s, tpot_s or None, completion_tokens, e2e_s)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    req = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
           "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    req.update(CONSTRAINTS[constraint])
    body = json.dumps(req)
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
    """Nearest-rank percentile (NaN when empty)."""
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


WORDS = ("once upon a time there was little girl named lily she loved to play with her ball "
         "in the park one day big dog came and they were happy friends sun tree bird").split()


def make_prompts(args, workload, total, rng):
    """(prompts, max_tokens) for `total` requests of a workload."""
    if workload == "A":
        n = args.prompt_tokens or 128
        prompts = [token_prompt(args.url, args.api_key, n, rng, WORDS) for _ in range(total)]
        return prompts, args.max_tokens or 64
    prefix = token_prompt(args.url, args.api_key, args.prefix_tokens or 512, rng, WORDS)
    suffix = args.suffix_tokens or 32
    prompts = [prefix + token_prompt(args.url, args.api_key, suffix + 1, rng, WORDS)[1:]
               for _ in range(total)]
    return prompts, args.max_tokens or 32


def run_point(args, model, workload, concurrency, total, rng, constraint="none", prompts=None):
    """Runs `total` requests with `concurrency` closed-loop clients; returns the summary dict.
    `prompts`: (prompts, max_tokens) to reuse (else made here)."""
    prompts, max_tokens = prompts or make_prompts(args, workload, total, rng)
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
                r = stream_one(args.url, args.api_key, model, prompts[i], max_tokens, constraint)
                with lock:
                    results.append(r)
            except Exception as e:  # noqa: BLE001 - reported in the summary
                with lock:
                    errors.append(str(e))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttft = [r[0] for r in results]
    tpot = [r[1] for r in results if r[1] is not None]
    e2e = [r[3] for r in results]
    gen = sum(r[2] for r in results)
    point = {"workload": workload, "concurrency": concurrency, "constraint": constraint,
             "requests": total,
             "ok": len(results), "failed": len(errors), "max_tokens": max_tokens,
             "prompt_tokens": len(prompts[0]) if prompts else 0, "wall_s": wall,
             "request_throughput": len(results) / wall, "output_tokens_per_s": gen / wall}
    for name, values, scale in (("ttft", ttft, 1.0), ("tpot", tpot, 1000.0), ("e2e", e2e, 1.0)):
        unit = "ms" if scale == 1000.0 else "s"
        for p in (50, 90, 99):
            point[f"{name}_p{p}_{unit}"] = pct(values, p) * scale
    if errors:
        point["first_error"] = errors[0]
    return point


def print_point(p):
    label = "" if p["constraint"] == "none" else f" [{p['constraint']}]"
    print(f"workload {p['workload']}{label}: {p['ok']} requests ok, {p['failed']} failed, "
          f"concurrency {p['concurrency']}, {p['wall_s']:.2f} s", flush=True)
    print(f"  requests/s: {p['request_throughput']:.3f}   generated tokens/s (total): "
          f"{p['output_tokens_per_s']:.1f}")
    print("  TTFT p50 / p90 / p99: {:.3f} / {:.3f} / {:.3f} s".format(
        p["ttft_p50_s"], p["ttft_p90_s"], p["ttft_p99_s"]))
    print("  TPOT p50 / p90 / p99: {:.1f} / {:.1f} / {:.1f} ms".format(
        p["tpot_p50_ms"], p["tpot_p90_ms"], p["tpot_p99_ms"]), flush=True)
    if p.get("first_error"):
        print("  first error:", p["first_error"])


def markdown_table(points):
    lines = ["| workload | concurrency | requests | req/s | output tok/s | TTFT p50 / p90 / p99 (s) "
             "| TPOT p50 / p90 / p99 (ms) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for p in points:
        p = dict(p, workload=p["workload"] + ("" if p["constraint"] == "none"
                                              else f" [{p['constraint']}]"))
        lines.append("| {workload} | {concurrency} | {ok} | {request_throughput:.2f} | "
                     "{output_tokens_per_s:.1f} | {ttft_p50_s:.2f} / {ttft_p90_s:.2f} / "
                     "{ttft_p99_s:.2f} | {tpot_p50_ms:.0f} / {tpot_p90_ms:.0f} / "
                     "{tpot_p99_ms:.0f} |".format(**p))
    return "\n".join(lines)


def plot(points, png, title):
    """Four panels against concurrency (one line per workload, p50/p90/p99 for latencies)."""
    gnuplot = shutil.which("gnuplot")
    if gnuplot is None:
        raise RuntimeError("gnuplot not found (scripts/setup.sh installs gnuplot-nox)")
    workloads = sorted({p["workload"] for p in points})
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for w in workloads:
            path = os.path.join(tmp, f"{w}.dat")
            with open(path, "w") as f:
                f.write("# conc req_s tok_s ttft50 ttft90 ttft99 tpot50 tpot90 tpot99\n")
                for p in sorted((p for p in points if p["workload"] == w),
                                key=lambda p: p["concurrency"]):
                    f.write("{concurrency} {request_throughput} {output_tokens_per_s} "
                            "{ttft_p50_s} {ttft_p90_s} {ttft_p99_s} {tpot_p50_ms} {tpot_p90_ms} "
                            "{tpot_p99_ms}\n".format(**p))
            files[w] = path

        def plots(columns):
            out = []
            for w in workloads:
                for col, label, dash in columns:
                    out.append(f"'{files[w]}' using 1:{col} with linespoints dt {dash} "
                               f"title '{w} {label}'")
            return ", ".join(out)

        concs = sorted({p["concurrency"] for p in points})
        xtics = ", ".join(f"'{c}' {c}" for c in concs)
        script = f"""
set terminal pngcairo size 1200,900 noenhanced font ',10'
set output '{png}'
set multiplot layout 2,2 title '{title}'
set grid
set key top left
set xlabel 'concurrent clients'
set logscale x 2
set xtics ({xtics})
set xrange [{concs[0] / 1.5}:{concs[-1] * 1.5}]
set yrange [0:*]
set title 'request throughput'
set ylabel 'requests / s'
plot {plots([(2, "", 1)])}
set title 'generated tokens / s (total)'
set ylabel 'tokens / s'
plot {plots([(3, "", 1)])}
set title 'time to first token'
set ylabel 's'
plot {plots([(4, "p50", 1), (5, "p90", 2), (6, "p99", 3)])}
set title 'time per output token'
set ylabel 'ms'
plot {plots([(7, "p50", 1), (8, "p90", 2), (9, "p99", 3)])}
unset multiplot
"""
        r = subprocess.run([gnuplot], input=script, text=True, capture_output=True)
        if r.returncode != 0 or not os.path.exists(png):
            # pngcairo may be missing from a minimal gnuplot: fall back to the plain png terminal.
            script = script.replace("pngcairo size 1200,900 noenhanced font ',10'",
                                    "png size 1200,900 noenhanced")
            r = subprocess.run([gnuplot], input=script, text=True, capture_output=True)
        if r.returncode != 0:
            raise RuntimeError("gnuplot failed: " + r.stderr.strip())


def constraint_list(text):
    names = text.split(",")
    if not names or any(n not in CONSTRAINTS for n in names):
        raise argparse.ArgumentTypeError("constraints are " + ", ".join(CONSTRAINTS) +
                                         ", separated by commas")
    return names


def int_list(text):
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("expected positive integers separated by commas")
    return values


def workload_list(text):
    values = [v.strip().upper() for v in text.split(",") if v.strip()]
    if not values or any(v not in ("A", "B") for v in values):
        raise argparse.ArgumentTypeError("workloads are A and/or B, separated by commas")
    return values


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--api-key", default="none")
    ap.add_argument("--workload", type=workload_list, default=["A"], help="A, B or A,B")
    ap.add_argument("--concurrency", type=int_list, default=[8], help="e.g. 8 or 1,8,32")
    ap.add_argument("--requests", type=int, default=0,
                    help="requests per point (default: --rounds x concurrency)")
    ap.add_argument("--rounds", type=int, default=4, help="requests per client per point")
    ap.add_argument("--min-requests", type=int, default=0,
                    help="at least this many requests per point (low concurrency)")
    ap.add_argument("--prompt-tokens", type=int, default=0, help="workload A prompt (128)")
    ap.add_argument("--prefix-tokens", type=int, default=0, help="workload B prefix (512)")
    ap.add_argument("--suffix-tokens", type=int, default=0, help="workload B suffix (32)")
    ap.add_argument("--max-tokens", type=int, default=0, help="new tokens (A: 64, B: 32)")
    ap.add_argument("--json", help="write every point's figures here")
    ap.add_argument("--png", help="draw the sweep here (gnuplot)")
    ap.add_argument("--title", default="", help="chart title")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--constraint", type=constraint_list, default=["none"],
                    help="output constraints per point, e.g. none,json_schema")
    ap.add_argument("--constraint-rounds", type=int, default=1,
                    help="run the constraints of a point this many times, alternating, and "
                         "print the median ratio (load then hits both alike)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    model = model_name(args.url, args.api_key)
    points = []
    for workload in args.workload:
        for c in args.concurrency:
            total = args.requests or max(args.rounds * c, args.min_requests)
            prompts = make_prompts(args, workload, total, rng)
            ratios = {}
            for r in range(args.constraint_rounds):
                # Odd rounds run the constraints in reverse order (A B, B A, ...), so a drift of
                # the machine's speed, or the server warming up, weighs on both sides alike.
                order = args.constraint if r % 2 == 0 else args.constraint[::-1]
                run = {}
                for constraint in order:
                    point = run_point(args, model, workload, c, total, rng, constraint, prompts)
                    print_point(point)
                    points.append(point)
                    run[constraint] = point
                base = run.get("none")
                for constraint in args.constraint:
                    point = run[constraint]
                    if constraint != "none" and base and base["output_tokens_per_s"] > 0:
                        point["ratio_to_unconstrained"] = (point["output_tokens_per_s"] /
                                                           base["output_tokens_per_s"])
                        ratios.setdefault(constraint, []).append(point["ratio_to_unconstrained"])
                        print(f"  {constraint} / unconstrained generated tokens/s: "
                              f"{point['ratio_to_unconstrained']:.3f}", flush=True)
            for constraint, rs in ratios.items():
                if len(rs) > 1:
                    print(f"  {constraint} / unconstrained, median of {len(rs)} alternating "
                          f"rounds: {statistics.median(rs):.3f} (each: "
                          f"{', '.join(f'{r:.3f}' for r in rs)})", flush=True)
    if len(points) > 1:
        print(markdown_table(points))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": model, "url": args.url, "points": points}, f, indent=2)
    if args.png:
        # The chart draws the unconstrained points (constrained ones are in the table / JSON).
        plot([p for p in points if p["constraint"] == "none"] or points,
             os.path.abspath(args.png), args.title or f"tachyon serve: {model}")
    return 1 if any(p["failed"] for p in points) else 0


if __name__ == "__main__":
    raise SystemExit(main())
