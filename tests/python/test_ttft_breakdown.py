"""The timings extension's ttft_breakdown: where the engine's part of a request's time to first
token went (issue #23; docs/engine.md, Scheduling)."""

from conftest import MODEL_NAME

PROMPT = ("Once upon a time, there was a little girl named Lily. She loved to play outside in "
          "the sun with her dog. One day she saw a big red ball in the park.")
PARTS = ("inbox_ms", "queued_ms", "prefix_wait_ms", "prefill_ms", "stalled_ms")


def check(body):
    t = body["timings"]
    b = t["ttft_breakdown"]
    assert all(b[k] >= 0 for k in PARTS), b
    # The engine's part lies inside the server's TTFT, and its parts inside it.
    assert b["engine_ttft_ms"] <= t["ttft_ms"], (b, t)
    assert sum(b[k] for k in PARTS) <= b["engine_ttft_ms"] + 0.01, b
    assert 1 <= b["prefill_steps"] <= b["steps"]
    assert b["prefill_step_tokens"] >= b["prefill_tokens"]
    # It computed exactly the uncached part of its prompt before its first token.
    usage = body["usage"]
    assert b["prefill_tokens"] == usage["prompt_tokens"] - usage["prompt_tokens_details"][
        "cached_tokens"], (b, usage)
    return b


def test_ttft_breakdown_in_timings(server):
    status, _, body = server.request("POST", "/v1/completions", {
        "model": MODEL_NAME, "prompt": PROMPT, "max_tokens": 4, "temperature": 0})
    assert status == 200, body
    check(body)
    # Again: the prompt is cached but for its last block, which is all it computes now.
    status, _, again = server.request("POST", "/v1/completions", {
        "model": MODEL_NAME, "prompt": PROMPT, "max_tokens": 4, "temperature": 0})
    assert status == 200, again
    b = check(again)
    assert 0 < b["prefill_tokens"] <= 16
    assert b["prefix_wait_ms"] == 0  # nobody else was computing it
