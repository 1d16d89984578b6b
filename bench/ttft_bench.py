#!/usr/bin/env python3
"""Time to first token under closed-loop chat bursts, and where it goes.

C clients in a closed loop, each sending R streaming chat requests back to back (max_tokens new
tokens at --temperature). Workloads:
  shared:   one ~400-word system document + a distinct short question per request
  distinct: a distinct ~100-word user message per request
The reference, with the server idle: the TTFT of one full uncached prompt of the workload's
shape alone (a document / message no other request uses), --ref-reps times before the load
and as many after it; the ratios use the median of both (the machine's speed drifts).
Prints TTFT p50 / p99 (all requests, and "warm": each client's requests after its first) and
their ratio to the reference, and the first burst's token floor (the prompt tokens the burst
computes, less cached ones, over the lone prompt's: the least its slowest TTFT can be over the
reference at a constant prefill rate) and the p99 over the reference times that floor;
--cold-bursts N then runs N more cold bursts (fresh instances: a new document), each between
two lone prompts, and prints each burst's slowest TTFT over theirs (and over its floor) and
the median; with tachyon, the engine's breakdown of the TTFT (the `timings`
extension's ttft_breakdown: inbox, queued, prefix wait, own prefill steps, stalled behind
others' steps) as means over the requests and for the slowest ones. --peer-url runs the same
distinct load (same prompts) against another OpenAI-compatible server (llama.cpp's
llama-server) and prints the p99 ratio.

  bench/ttft_bench.py --url http://127.0.0.1:8080 --workload shared,distinct --clients 8
"""

import argparse
import http.client
import json
import random
import statistics
import threading
import time
import urllib.parse
import urllib.request

WORDS = """the of and to in is that it was for on are as with his they at be this from have
or by one had not but what all were when we there can an your which their said if do will
each about how up out them then she many some so these would other into has more her two like
him see time could no make than first been its who now people my made over did down only way
find use may water long little very after words called just where most know get through back
much before go good new write our used me man too any day same right look think also around
another came come work three word must because does part even place well such here take why
things help put years different away again off went old number great tell men say small every
found still between name should home big give air line set own under read last never us left
end along while might next sound below saw something thought both few those always looked show
large often together asked house world going want school important until form food keep
children feet land side without boy once animals life enough took sometimes four head above
kind began almost live page got earth need far hand high year mother light parts country
father let night following picture being study second eyes soon times story boys since white
days ever paper hard near sentence better best across during today others however sure means
knew try told young miles sun ways thing whole hear example heard several change answer room
sea against top turned learn point city play toward five using himself usually""".split()


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def make_requests(workload, n, rng, args):
    """n message lists of the workload (plus, first, 2 x --ref-reps lone references)."""
    if workload == "shared":
        doc = words(rng, args.doc_words)
        def one(document):
            return [{"role": "system", "content": "Answer from this document.\n" + document},
                    {"role": "user", "content": words(rng, args.question_words) + "?"}]
        refs = [one(words(rng, args.doc_words)) for _ in range(2 * args.ref_reps)]
        return refs, [one(doc) for _ in range(n)]
    def one():
        return [{"role": "user", "content": words(rng, args.prompt_words)}]
    return [one() for _ in range(2 * args.ref_reps)], [one() for _ in range(n)]


def stream_chat(url, api_key, model, messages, args, max_tokens=None):
    """One streaming chat request (max_tokens: args.max_tokens unless given):
    {ttft, tokens, breakdown (or None)}."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=900)
    body = {"model": model, "messages": messages, "max_tokens": max_tokens or args.max_tokens,
            "temperature": args.temperature, "stream": True,
            "stream_options": {"include_usage": True}}
    if args.ignore_eos:
        body["ignore_eos"] = True
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json",
                          "Authorization": f"Bearer {api_key}"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
    first, tokens, breakdown, cached, prompt = None, 0, None, None, None
    buf = b""
    while True:
        data = resp.read1(65536)
        if not data:
            break
        buf += data
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            event = event.strip()
            if not event.startswith(b"data: ") or event == b"data: [DONE]":
                continue
            j = json.loads(event[6:])
            if first is None and any(c.get("delta", {}).get("content")
                                     for c in j.get("choices") or []):
                first = time.perf_counter()
            if j.get("usage"):
                tokens = j["usage"].get("completion_tokens", 0)
                prompt = j["usage"].get("prompt_tokens")
                cached = (j["usage"].get("prompt_tokens_details") or {}).get("cached_tokens")
            if j.get("timings"):
                breakdown = j["timings"].get("ttft_breakdown")
    conn.close()
    if first is None:
        raise RuntimeError("no content streamed")
    return {"ttft": first - t0, "tokens": tokens, "breakdown": breakdown, "cached": cached,
            "prompt": prompt}


def pct(values, p):
    """Nearest-rank percentile (NaN when empty)."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))]


def closed_loop(url, model, requests, args):
    """args.clients clients, each sending its share of `requests` in turn."""
    results = [None] * len(requests)
    errors = []

    def client(c):
        for k, i in enumerate(range(c, len(requests), args.clients)):
            try:
                r = stream_chat(url, args.api_key, model, requests[i], args)
                r["round"] = k
                results[i] = r
            except Exception as e:  # noqa: BLE001 - reported
                errors.append(str(e))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r], errors, time.perf_counter() - t0


PARTS = ("inbox_ms", "queued_ms", "prefix_wait_ms", "prefill_ms", "stalled_ms")


def computed_tokens(r):
    """The prompt tokens a request's prefill computed (its prompt less the cached ones)."""
    return r["prompt"] - (r["cached"] or 0)


def token_floor(burst, lone_prompt_tokens):
    """The prompt tokens a burst computes (its prompts less their cached tokens) over one lone
    prompt's: the slowest request of the burst waits for all of them, so at a constant prefill
    rate this is the least its TTFT can be over the lone prompt's. None when the server does not
    report them."""
    if not burst or not lone_prompt_tokens or any(
            r["prompt"] is None or r["cached"] is None for r in burst):
        return None
    computed = sum(computed_tokens(r) for r in burst)
    return computed, computed / lone_prompt_tokens


def summarize(name, refs, results, errors, wall, lone_prompt_tokens=None):
    """refs: the reference TTFTs before and after the load (two lists)."""
    ref = statistics.median(refs[0] + refs[1])
    ttft = [r["ttft"] for r in results]
    warm = [r["ttft"] for r in results if r["round"] > 0]
    gen = sum(r["tokens"] for r in results)
    p = {"name": name, "ok": len(results), "failed": len(errors), "wall_s": wall,
         "tok_s": gen / wall if wall else 0, "ref_ttft_s": ref,
         "ttft_p50_s": pct(ttft, 50), "ttft_p99_s": pct(ttft, 99),
         "warm_ttft_p50_s": pct(warm, 50), "warm_ttft_p99_s": pct(warm, 99)}
    print(f"{name}: {len(results)} ok, {len(errors)} failed, {wall:.1f} s, "
          f"{p['tok_s']:.1f} generated tok/s", flush=True)
    p["ref_before_s"], p["ref_after_s"] = refs
    print(f"  reference (one uncached prompt alone): TTFT {ref:.3f} s (median of "
          f"{len(refs[0])} before the load, {statistics.median(refs[0]):.3f} s, and "
          f"{len(refs[1])} after, {statistics.median(refs[1]):.3f} s)")
    print(f"  TTFT p50 / p99: {p['ttft_p50_s']:.3f} / {p['ttft_p99_s']:.3f} s  "
          f"(p99 / reference {p['ttft_p99_s'] / ref:.2f}x)")
    print(f"  warm (after each client's first): p50 / p99 {p['warm_ttft_p50_s']:.3f} / "
          f"{p['warm_ttft_p99_s']:.3f} s  (p99 / reference {p['warm_ttft_p99_s'] / ref:.2f}x)")
    cached = [r["cached"] for r in results if r["cached"] is not None]
    if cached:
        print(f"  cached prompt tokens per request: median {statistics.median(cached):.0f}")
    floor = token_floor([r for r in results if r["round"] == 0], lone_prompt_tokens)
    if floor:
        p["cold_burst_computed_tokens"], p["token_floor"] = floor
        p["ttft_p99_over_floor"] = p["ttft_p99_s"] / (ref * floor[1])
        print(f"  the first burst computed {floor[0]} prompt tokens, the lone prompt "
              f"{lone_prompt_tokens}: its slowest TTFT is at least {floor[1]:.2f}x the "
              f"reference at a constant prefill rate; p99 / (reference x that floor) "
              f"{p['ttft_p99_over_floor']:.2f}")
    withb = [r for r in results if r["breakdown"]]
    if withb:
        def line(label, rs):
            parts = "  ".join(f"{k[:-3]} {statistics.mean(r['breakdown'][k] for r in rs):.0f}"
                              for k in PARTS)
            eng = statistics.mean(r["breakdown"]["engine_ttft_ms"] for r in rs)
            client = statistics.mean(r["ttft"] * 1e3 for r in rs)
            steps = statistics.mean(r["breakdown"]["steps"] for r in rs)
            own = statistics.mean(r["breakdown"]["prefill_tokens"] for r in rs)
            step_tok = statistics.mean(r["breakdown"]["prefill_step_tokens"] for r in rs)
            print(f"  {label}: client TTFT {client:.0f} ms = engine {eng:.0f} ms "
                  f"[{parts}] + server/HTTP {client - eng:.0f} ms; {steps:.1f} steps, own "
                  f"prefill {own:.0f} tokens in steps of {step_tok:.0f} tokens")
        line("mean breakdown (ms)", withb)
        slow = sorted(withb, key=lambda r: r["ttft"])[-max(1, len(withb) // 10):]
        line(f"slowest {len(slow)}", slow)
        p["breakdown_mean_ms"] = {k: statistics.mean(r["breakdown"][k] for r in withb)
                                  for k in PARTS + ("engine_ttft_ms",)}
        p["breakdown_slowest_ms"] = {k: statistics.mean(r["breakdown"][k] for r in slow)
                                     for k in PARTS + ("engine_ttft_ms",)}
    if errors:
        print("  first error:", errors[0])
        p["first_error"] = errors[0]
    return p


def model_name(url, api_key):
    req = urllib.request.Request(url + "/v1/models", headers={"Authorization": f"Bearer {api_key}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())["data"][0]["id"]


def run_workload(url, workload, refs, requests, args, label):
    model = model_name(url, args.api_key)
    half = len(refs) // 2
    def lone(ms):
        # Its TTFT does not depend on the tokens after the first: a few keep it short.
        return [stream_chat(url, args.api_key, model, m, args, min(args.max_tokens, 8))
                for m in ms]
    before = lone(refs[:half])
    results, errors, wall = closed_loop(url, model, requests, args)
    after = lone(refs[half:])
    # The lone prompts' own length (each computed whole: nothing of it was cached).
    lone_tokens = [computed_tokens(r) for r in before + after if r["prompt"] is not None]
    return summarize(f"{label} {workload}",
                     ([r["ttft"] for r in before], [r["ttft"] for r in after]), results, errors,
                     wall, statistics.median(lone_tokens) if lone_tokens else None)


def cold_bursts(url, workload, rng, args):
    """--cold-bursts: N times, a lone uncached prompt, then one cold burst (every client sends
    one request of a fresh workload instance at once: a new document for `shared`), then another
    lone prompt; each burst's slowest TTFT over the mean of the two lone ones around it, so the
    ratio compares times a few seconds apart (the machine's speed drifts over a run)."""
    model = model_name(url, args.api_key)
    lone_tokens = min(args.max_tokens, 8)
    ratios = []
    for _ in range(args.cold_bursts):
        refs, burst = make_requests(workload, args.clients, rng, args)
        lone_before = stream_chat(url, args.api_key, model, refs[0], args, lone_tokens)
        results, errors, _ = closed_loop(url, model, burst, args)
        lone_after = stream_chat(url, args.api_key, model, refs[1], args, lone_tokens)
        before, after = lone_before["ttft"], lone_after["ttft"]
        if errors:
            print("  cold burst error:", errors[0])
            continue
        slowest = max(r["ttft"] for r in results)
        ratios.append(slowest / ((before + after) / 2))
        floor = token_floor(results, computed_tokens(lone_before)
                            if lone_before["prompt"] is not None else None)
        print(f"  cold burst: slowest TTFT {slowest:.3f} s, lone {before:.3f} / {after:.3f} s: "
              f"{ratios[-1]:.2f}x" + (f" (token floor {floor[1]:.2f}x: "
                                      f"{ratios[-1] / floor[1]:.2f}x the floor)" if floor else ""),
              flush=True)
    if ratios:
        print(f"{workload} cold bursts: slowest TTFT / lone prompt, median "
              f"{statistics.median(ratios):.2f}x (min {min(ratios):.2f}, max {max(ratios):.2f}, "
              f"{len(ratios)} bursts)", flush=True)
    return {"name": f"server {workload} cold bursts", "ratios": ratios,
            "failed": args.cold_bursts - len(ratios)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--peer-url", help="another server for the distinct load (ratio of p99)")
    ap.add_argument("--api-key", default="none")
    ap.add_argument("--workload", default="shared,distinct")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3, help="requests per client")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--ignore-eos", action="store_true", help="exactly max_tokens each")
    ap.add_argument("--doc-words", type=int, default=400)
    ap.add_argument("--question-words", type=int, default=12)
    ap.add_argument("--prompt-words", type=int, default=100)
    ap.add_argument("--ref-reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cold-bursts", type=int, default=0,
                    help="after each workload's load: N cold bursts, each between two lone prompts")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    workloads = [w.strip() for w in args.workload.split(",") if w.strip()]
    if not workloads or any(w not in ("shared", "distinct") for w in workloads):
        ap.error("--workload: shared and/or distinct, separated by commas")
    if args.clients < 1 or args.rounds < 1 or args.ref_reps < 1 or args.cold_bursts < 0:
        ap.error("--clients, --rounds and --ref-reps must be positive, --cold-bursts not negative")
    rng = random.Random(args.seed)
    points = []
    for w in workloads:
        refs, requests = make_requests(w, args.clients * args.rounds, rng, args)
        server = run_workload(args.url, w, refs, requests, args, "server")
        points.append(server)
        if args.cold_bursts > 0:
            points.append(cold_bursts(args.url, w, rng, args))
        if args.peer_url and w == "distinct":
            # Fresh references (nothing cached on either side); the same load.
            peer_refs, _ = make_requests(w, 0, rng, args)
            peer = run_workload(args.peer_url, w, peer_refs, requests, args, "peer")
            points.append(peer)
            ratio = server["ttft_p99_s"] / peer["ttft_p99_s"]
            print(f"distinct TTFT p99, server / peer: {ratio:.2f}", flush=True)
            peer["server_over_peer_p99"] = ratio
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "points": points}, f, indent=2)
    return 1 if any(p["failed"] for p in points) else 0


if __name__ == "__main__":
    raise SystemExit(main())
