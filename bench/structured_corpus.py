#!/usr/bin/env python3
"""The JSON Schema corpus end to end against any OpenAI-compatible server (tachyon or another).

Each schema of testdata/structured/schemas.jsonl is asked for once on /v1/chat/completions with
response_format json_schema, greedy (temperature 0), the same short prompt naming the schema,
and the answer is sorted:
  valid      finish_reason "stop" and the content validates under the schema (python
             `jsonschema`, its format checker on)
  invalid    finished, but not JSON or not valid under the schema
  refused    an HTTP 4xx/5xx answer (tachyon: 400 naming the schema keyword)
  truncated  finish_reason "length" (cut by max_tokens); `truncated_bad_prefix` counts those
             whose text is not a prefix of any JSON text (must be 0)
  error      the request failed otherwise (no answer)

  bench/structured_corpus.py --url http://127.0.0.1:8080 --concurrency 8 [--every 10] [--json F]
                             [--jsonl F] [--timeout S] [--max-tokens N] [--truncated-in F]
                             [--complete-within-max-tokens]

The summary also sorts the truncated answers by what the model was doing when cut
(truncation_cause): repeating inside a string, repeating items, repeating digits, whitespace,
or none of these (a long document).

--jsonl F appends each answer's line as it arrives (a run stopped early keeps what it has);
--truncated-in F asks again only the schemas truncated in an earlier --jsonl file F;
--timeout S: a request still unanswered after S seconds counts as an error ("timeout");
--complete-within-max-tokens asks tachyon to end every document by max_tokens
(response_format.complete_within_max_tokens): then every answer is valid or refused (a schema
whose shortest document may need more than max_tokens tokens is refused with a 400 naming
max_tokens; the summary counts those apart).

tests/python/test_structured_output_corpus.py drives tachyon through the same functions.
"""

import argparse
import concurrent.futures
import json
import re
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

DEFAULT_SCHEMAS = (Path(__file__).resolve().parents[1].parent / "shared" / "testdata" /
                   "structured" / "schemas.jsonl")
KINDS = ("valid", "invalid", "refused", "truncated", "error")


def load_cases(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def request_body(case, model, max_tokens, within=False):
    body = {"model": model, "temperature": 0, "max_tokens": max_tokens,
            "messages": [{"role": "user",
                          "content": "Give an example JSON document for " + case["id"] + "."}],
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "doc", "schema": case["schema"],
                                                "strict": True}}}
    if within:  # tachyon: end the document by max_tokens (docs/grammar.md)
        body["response_format"]["complete_within_max_tokens"] = True
    return body


def post(url, body, api_key, timeout):
    req = urllib.request.Request(url.rstrip("/") + "/v1/chat/completions",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer " + api_key})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, {"error": {"message": raw.decode(errors="replace")}}


_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_NUMBER_PREFIX = re.compile(r"-?(0|[1-9][0-9]*)?(\.[0-9]*)?([eE][+-]?[0-9]*)?")


def is_json_prefix(text):
    """True when `text` can be continued into a complete JSON text (syntax only)."""
    stack = []  # '{' / '['
    expect = "value"  # value | key | colon | comma | done (and *_or_end after an opening)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\n\r":
            i += 1
            continue
        if expect == "done":
            return False
        if expect in ("value", "value_or_end", "key", "key_or_end"):
            if expect.endswith("_or_end") and c == ("}" if stack[-1] == "{" else "]"):
                stack.pop()
                expect = "comma" if stack else "done"
                i += 1
                continue
            is_key = expect.startswith("key")
            if c == '"':
                i += 1
                while i < n and text[i] != '"':
                    if text[i] == "\\":
                        if i + 1 >= n:
                            return True
                        e = text[i + 1]
                        if e == "u":
                            hexd = text[i + 2:i + 6]
                            if not re.fullmatch(r"[0-9a-fA-F]*", hexd):
                                return False
                            i += 6
                            continue
                        if e not in '"\\/bfnrt':
                            return False
                        i += 2
                        continue
                    if ord(text[i]) < 0x20:
                        return False
                    i += 1
                if i >= n:
                    return True
                i += 1
                expect = "colon" if is_key else ("comma" if stack else "done")
                continue
            if is_key:
                return False
            if c in "{[":
                stack.append(c)
                expect = "key_or_end" if c == "{" else "value_or_end"
                i += 1
                continue
            for lit in ("true", "false", "null"):
                if text.startswith(lit, i):
                    i += len(lit)
                    break
                if lit.startswith(text[i:]):
                    return True
            else:
                p = _NUMBER_PREFIX.match(text, i)
                if p.end() == n and p.end() > i:  # a number running to the end
                    rest = text[i:]
                    return bool(_NUMBER.fullmatch(rest) or _NUMBER.fullmatch(rest + "0"))
                m = _NUMBER.match(text, i)
                if not m:
                    return False
                i = m.end()
            expect = "comma" if stack else "done"
            continue
        if expect == "colon":
            if c != ":":
                return False
            expect = "value"
            i += 1
            continue
        # expect == "comma"
        if c == ",":
            expect = "key" if stack[-1] == "{" else "value"
        elif c == ("}" if stack[-1] == "{" else "]"):
            stack.pop()
            expect = "comma" if stack else "done"
        else:
            return False
        i += 1
    return True


def _open_string_start(text):
    """Index of the opening quote of the string `text` ends inside, or -1."""
    start, i, n = -1, 0, len(text)
    while i < n:
        c = text[i]
        if start < 0:
            if c == '"':
                start = i
        elif c == "\\":
            i += 1
        elif c == '"':
            start = -1
        i += 1
    return start


def _periodic_tail(text, max_period=160, min_len=48):
    """(period, start) of the tail of `text` that repeats a unit of at most max_period
    characters at least 3 times and is at least min_len long (the shortest such period), or
    None."""
    n = len(text)
    for p in range(1, max_period + 1):
        k = n - 1 - p
        while k >= 0 and text[k] == text[k + p]:
            k -= 1
        length = n - 1 - k
        if length >= max(min_len, 3 * p):
            return p, n - length
    return None


TRUNCATION_CAUSES = ("string loop", "item loop", "number loop", "whitespace", "long document")


def truncation_cause(text):
    """Why an answer cut by max_tokens was still going. The model repeats: a unit of text inside
    one string ("string loop"), array items or object members ("item loop"), digits ("number
    loop"), whitespace; counting up counts as repeating (the tail is compared with each run of
    digits read as one digit: "2021-2022-2023-", items with "quantity": 3, 4, 5). Otherwise,
    "long document": the text does not end in a repetition."""
    tail = _periodic_tail(text)
    if tail is not None:
        period, start = tail
    else:
        # Each run of digits as one "0", and where each character came from.
        norm, origin = [], []
        for m in re.finditer(r"[0-9]+|[^0-9]", text):
            norm.append("0" if m.group()[0].isdigit() else m.group())
            origin.append(m.start())
        tail = _periodic_tail("".join(norm), min_len=24)
        if tail is None:
            return "long document"
        period, nstart = tail
        start = origin[nstart]
        # Digits counting up (a long number: "1234567890123...") are a number loop below.
        period = len(text) - start if period == 1 else period
    unit = text[start:start + period]
    if unit.strip() == "":
        return "whitespace"
    if re.fullmatch(r"[0-9.eE+-]+", unit) and _open_string_start(text) < 0:
        return "number loop"
    s = _open_string_start(text)
    if 0 <= s < start:
        return "string loop"
    return "item loop"


def validator_for(schema):
    import jsonschema
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def classify(case, status, body):
    """(kind, detail) of one answer."""
    if status is None:
        return "error", str(body)
    if status >= 400:
        err = body.get("error") if isinstance(body, dict) else None
        msg = err.get("message") if isinstance(err, dict) else str(body)
        return "refused", f"HTTP {status}: {msg}"
    try:
        choice = body["choices"][0]
        text = choice["message"]["content"] or ""
        finish = choice["finish_reason"]
    except (KeyError, IndexError, TypeError):
        return "error", f"unexpected body: {body!r}"[:300]
    if finish == "length":
        return "truncated", text
    try:
        doc = json.loads(text)
    except ValueError as e:
        return "invalid", f"not JSON ({e}): {text!r}"
    try:
        errors = sorted(validator_for(case["schema"]).iter_errors(doc), key=str)
    except Exception as e:  # the reference validator cannot handle this schema
        return "invalid", f"validator failed ({type(e).__name__}: {e}) on {text!r}"
    if errors:
        return "invalid", f"{errors[0].message}: {text!r}"
    return "valid", text


def run_case(url, case, model, max_tokens, api_key, timeout, within=False):
    try:
        status, body = post(url, request_body(case, model, max_tokens, within), api_key, timeout)
    except Exception as e:  # connection trouble, timeouts
        return "error", f"{type(e).__name__}: {e}"
    return classify(case, status, body)


def run_corpus(url, cases, model, max_tokens=160, concurrency=8, api_key="none", timeout=600,
               on_result=None, within=False):
    """[(kind, detail)] per case, in order; on_result(case, kind, detail) as each arrives.
    within: ask for complete_within_max_tokens (tachyon's length-aware masks)."""
    def one(case):
        kind, detail = run_case(url, case, model, max_tokens, api_key, timeout, within)
        if on_result is not None:
            on_result(case, kind, detail)
        return kind, detail

    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(one, cases))


def summarize(results):
    counts = {k: 0 for k in KINDS}
    counts["truncated_bad_prefix"] = 0
    for kind, detail in results:
        counts[kind] += 1
        if kind == "truncated" and not is_json_prefix(detail):
            counts["truncated_bad_prefix"] += 1
    return counts


def truncation_causes(results):
    """{cause: count} over the truncated answers (truncation_cause)."""
    causes = {c: 0 for c in TRUNCATION_CAUSES}
    for kind, detail in results:
        if kind == "truncated":
            causes[truncation_cause(detail)] += 1
    return causes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--api-key", default="none")
    ap.add_argument("--model", default="", help="the request's model field (default: the "
                    "server's first /v1/models entry)")
    ap.add_argument("--schemas", default=str(DEFAULT_SCHEMAS))
    ap.add_argument("--every", type=int, default=1, help="take schemas 0, k, 2k, ...")
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per request")
    ap.add_argument("--json", help="write each schema's kind and detail here")
    ap.add_argument("--jsonl", help="append each schema's kind and detail here as it arrives")
    ap.add_argument("--complete-within-max-tokens", action="store_true",
                    help="add response_format.complete_within_max_tokens: true (tachyon)")
    ap.add_argument("--truncated-in", help="only the schemas whose answer was truncated in this "
                    "earlier --jsonl file (e.g. again with a larger --max-tokens)")
    args = ap.parse_args()
    model = args.model
    if not model:
        req = urllib.request.Request(args.url.rstrip("/") + "/v1/models",
                                     headers={"Authorization": "Bearer " + args.api_key})
        with urllib.request.urlopen(req, timeout=30) as r:
            model = json.loads(r.read())["data"][0]["id"]
    cases = load_cases(args.schemas)[::args.every]
    if args.truncated_in:
        earlier = [json.loads(line) for line in Path(args.truncated_in).read_text().splitlines()
                   if line.strip()]
        cut = {r["id"] for r in earlier if r["kind"] == "truncated"}
        cases = [c for c in cases if c["id"] in cut]
    lock = threading.Lock()

    def on_result(case, kind, detail):
        if args.jsonl:
            with lock, open(args.jsonl, "a") as f:
                f.write(json.dumps({"id": case["id"], "kind": kind, "detail": detail}) + "\n")

    results = run_corpus(args.url, cases, model, args.max_tokens, args.concurrency, args.api_key,
                         args.timeout, on_result, args.complete_within_max_tokens)
    counts = summarize(results)
    print(f"{len(cases)} schemas, model {model}, max_tokens {args.max_tokens}: " +
          ", ".join(f"{k} {v}" for k, v in counts.items()))
    short = sum(1 for kind, detail in results
                if kind == "refused" and "too small for complete_within_max_tokens" in detail)
    print(f"  refused for max_tokens: {short}, for the schema: {counts['refused'] - short}")
    print("  truncated by cause: " +
          ", ".join(f"{k} {v}" for k, v in truncation_causes(results).items()))
    for (kind, detail), case in zip(results, cases):
        if kind in ("invalid", "error") or (kind == "truncated" and not is_json_prefix(detail)):
            print(f"  {kind}: {case['id']}: {detail[:200]}")
    if args.json:
        Path(args.json).write_text(json.dumps(
            [{"id": c["id"], "kind": k, "detail": d} for c, (k, d) in zip(cases, results)],
            indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
