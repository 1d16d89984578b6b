"""/v1/completions through the official openai client against a real tachyon serve."""

import pytest

from conftest import CONTEXT, MODEL_NAME

PROMPT = "Once upon a time"


def complete(client, **kw):
    kw.setdefault("model", MODEL_NAME)
    kw.setdefault("prompt", PROMPT)
    return client.completions.create(**kw)


def stream_text(client, **kw):
    """Concatenated streamed text per choice index, finish reasons, and the usage chunk."""
    texts, finish, usage = {}, {}, None
    for chunk in complete(client, stream=True, **kw):
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
            if c.finish_reason is not None:
                finish[c.index] = c.finish_reason
    return texts, finish, usage


def test_models_lists_the_served_name(client):
    ids = [m.id for m in client.models.list().data]
    assert ids == [MODEL_NAME]


def test_basic_greedy_completion(client):
    r = complete(client, max_tokens=16, temperature=0)
    assert r.object == "text_completion"
    assert r.model == MODEL_NAME
    assert r.id.startswith("cmpl-")
    c = r.choices[0]
    assert c.text.strip()
    assert c.finish_reason in ("length", "stop")
    assert r.usage.completion_tokens <= 16
    assert r.usage.prompt_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.usage.prompt_tokens_details.cached_tokens >= 0


def test_greedy_is_deterministic_and_stream_equals_nonstream(client):
    a = complete(client, max_tokens=40, temperature=0, extra_body={"ignore_eos": True})
    b = complete(client, max_tokens=40, temperature=0, extra_body={"ignore_eos": True})
    assert a.choices[0].text == b.choices[0].text
    texts, finish, usage = stream_text(client, max_tokens=40, temperature=0,
                                       extra_body={"ignore_eos": True},
                                       stream_options={"include_usage": True})
    assert texts[0] == a.choices[0].text
    assert finish[0] == "length"
    assert usage.completion_tokens == 40
    assert a.usage.completion_tokens == 40


def test_greedy_matches_llama2c_reference(server, client, reference_generations):
    """Token-id prompts, greedy: the text is what llama2.c's generated ids add to the decoded
    prompt (a continuation keeps its leading space)."""
    checked = 0
    for case in reference_generations:
        if case["stop_reason"] != "steps" or not case["prompt"]:
            continue
        n = min(48, len(case["generated_ids"]))
        r = complete(client, prompt=case["prompt_ids"], max_tokens=n, temperature=0,
                     extra_body={"ignore_eos": True})
        status, _, whole = server.request(
            "POST", "/detokenize", {"tokens": case["prompt_ids"] + case["generated_ids"][:n]})
        assert status == 200
        status, _, prompt_text = server.request("POST", "/detokenize",
                                                {"tokens": case["prompt_ids"]})
        assert status == 200
        assert whole["prompt"].startswith(prompt_text["prompt"])
        expected = whole["prompt"][len(prompt_text["prompt"]):]
        assert r.choices[0].text == expected, case["id"]
        checked += 1
    assert checked >= 3


def test_prompt_forms(server, client):
    ids = server.request("POST", "/tokenize", {"prompt": PROMPT})[2]["tokens"]
    by_text = complete(client, max_tokens=8, temperature=0)
    by_ids = complete(client, prompt=ids, max_tokens=8, temperature=0)
    assert by_ids.choices[0].text == by_text.choices[0].text
    batch = complete(client, prompt=[PROMPT, "The cat"], max_tokens=4, temperature=0)
    assert [c.index for c in batch.choices] == [0, 1]
    assert batch.choices[0].text == complete(client, max_tokens=4, temperature=0).choices[0].text
    id_batch = complete(client, prompt=[ids, ids[:3]], max_tokens=4, temperature=0)
    assert len(id_batch.choices) == 2
    assert id_batch.choices[0].text == batch.choices[0].text


def test_seed_makes_sampling_reproducible(client):
    kw = dict(max_tokens=24, temperature=1.0, seed=1234, extra_body={"ignore_eos": True})
    a = complete(client, **kw).choices[0].text
    b = complete(client, **kw).choices[0].text
    assert a == b
    others = {complete(client, **{**kw, "seed": s}).choices[0].text for s in range(5)}
    assert len(others) > 1


def test_stop_strings(client):
    full = complete(client, max_tokens=40, temperature=0, extra_body={"ignore_eos": True})
    text = full.choices[0].text
    stop = text[10:14]
    cut = complete(client, max_tokens=40, temperature=0, stop=[stop, "zzzz"])
    assert cut.choices[0].text == text[:text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"
    texts, finish, _ = stream_text(client, max_tokens=40, temperature=0, stop=stop)
    assert texts[0] == cut.choices[0].text
    assert finish[0] == "stop"


def test_n_choices(client):
    r = complete(client, max_tokens=8, temperature=1.0, n=3, seed=7)
    assert sorted(c.index for c in r.choices) == [0, 1, 2]
    texts, finish, _ = stream_text(client, max_tokens=8, temperature=1.0, n=3, seed=7)
    assert sorted(texts) == [0, 1, 2]
    assert [texts[i] for i in range(3)] == [c.text for c in r.choices]


def test_echo_and_logprobs(client):
    r = complete(client, max_tokens=5, temperature=0, echo=True, logprobs=3)
    c = r.choices[0]
    assert c.text.startswith(PROMPT)
    lp = c.logprobs
    assert len(lp.tokens) == 5 == len(lp.token_logprobs) == len(lp.top_logprobs)
    assert all(v <= 0 for v in lp.token_logprobs)
    assert all(1 <= len(t) <= 3 for t in lp.top_logprobs)
    # Greedy: the chosen token is the most likely one.
    for tok, top, chosen in zip(lp.tokens, lp.top_logprobs, lp.token_logprobs):
        assert abs(max(top.values()) - chosen) < 1e-4
    assert lp.text_offset[0] == len(PROMPT)


def test_logit_bias_and_ignore_eos(client):
    plain = complete(client, max_tokens=6, temperature=0, logprobs=0)
    # Token 300 pushed to the top: every generated token becomes it.
    forced = complete(client, max_tokens=6, temperature=0, logit_bias={"300": 100}, logprobs=0)
    assert len(set(forced.choices[0].logprobs.tokens)) == 1
    assert forced.choices[0].text != plain.choices[0].text
    r = complete(client, max_tokens=200, temperature=0, extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 200
    assert r.choices[0].finish_reason == "length"


def test_sampling_knobs_are_accepted(client):
    greedy = complete(client, max_tokens=12, temperature=0).choices[0].text
    top1 = complete(client, max_tokens=12, temperature=1.0, seed=3,
                    extra_body={"top_k": 1}).choices[0].text
    assert top1 == greedy
    r = complete(client, max_tokens=12, temperature=0.8, top_p=0.9, presence_penalty=0.5,
                 frequency_penalty=0.5, user="tester", seed=1,
                 extra_body={"min_p": 0.05, "repetition_penalty": 1.3, "some_unknown": 1})
    assert r.choices[0].text
    penalized = complete(client, max_tokens=60, temperature=0, frequency_penalty=2.0,
                         extra_body={"ignore_eos": True}).choices[0].text
    base = complete(client, max_tokens=60, temperature=0,
                    extra_body={"ignore_eos": True}).choices[0].text
    assert penalized != base


def test_byte_fallback_never_breaks_a_stream(client):
    """Tokens 3..258 are raw bytes: forcing 0xE2 gives invalid UTF-8, which must become U+FFFD
    identically in streamed and non-streamed text."""
    kw = dict(max_tokens=6, temperature=0, logit_bias={str(3 + 0xE2): 100})
    plain = complete(client, **kw).choices[0].text
    assert "\ufffd" in plain
    texts, finish, _ = stream_text(client, **kw)
    assert texts[0] == plain
    assert finish[0] == "length"
    # A complete 3-byte sequence: E2 82 AC ("€") via a token-id prompt and echo.
    ids = [1, 3 + 0xE2, 3 + 0x82, 3 + 0xAC]
    r = complete(client, prompt=ids, max_tokens=1, echo=True)
    assert r.choices[0].text.startswith("€")


def test_max_tokens_defaults_to_the_rest_of_the_context(client):
    r = complete(client, max_tokens=None, temperature=0, extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.total_tokens == CONTEXT


def test_greedy_equals_tachyon_run(client):
    import subprocess
    from conftest import binary_path, has_command, model_path
    if not has_command("run"):
        pytest.skip("the binary has no 'run' command")
    for prompt in ["Once upon a time", "The cat"]:
        out = subprocess.run([str(binary_path()), "run", "-m", str(model_path()), "-p", prompt,
                              "-n", "40", "--temp", "0", "-t", "1"],
                             capture_output=True, timeout=120)
        assert out.returncode == 0, out.stderr
        expected = out.stdout.decode("utf-8")
        assert expected.endswith("\n")
        r = complete(client, prompt=prompt, max_tokens=40, temperature=0)
        assert r.choices[0].text == expected[:-1], prompt
