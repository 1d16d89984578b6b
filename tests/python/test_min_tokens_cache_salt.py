"""min_tokens and cache_salt (vLLM's names) on a real server: SmolLM2-135M-Instruct with its own
chat template when present, else stories260K with the conftest's template.

- min_tokens: no end-of-generation before that many completion tokens.
- cache_salt: a per-request prefix-cache namespace: only requests with the same salt share
  cached prompt blocks (usage.prompt_tokens_details.cached_tokens).
"""

import uuid

import openai
import pytest

from conftest import smollm2_path


@pytest.fixture(scope="module")
def chat(request):
    """(client, model name) on SmolLM2 if present, else stories260K."""
    if smollm2_path().is_file():
        return request.getfixturevalue("smollm2_client"), "smollm2"
    return request.getfixturevalue("client"), "stories"


QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]


def test_min_tokens_holds_back_the_end_of_generation(chat):
    client, model = chat
    natural = client.chat.completions.create(model=model, messages=QUESTION, temperature=0,
                                             max_tokens=128)
    if natural.choices[0].finish_reason != "stop":
        pytest.skip("the model does not end its reply within 128 tokens")
    n = natural.usage.completion_tokens
    want = n + 8
    longer = client.chat.completions.create(model=model, messages=QUESTION, temperature=0,
                                            max_tokens=want + 32,
                                            extra_body={"min_tokens": want})
    assert longer.usage.completion_tokens >= want, (n, longer.usage.completion_tokens)
    # Greedy: the reply starts as the natural one did (min_tokens only bans the end).
    text = natural.choices[0].message.content
    assert longer.choices[0].message.content.startswith(text[: max(1, len(text) // 2)])
    # Streaming counts the same.
    stream = client.chat.completions.create(model=model, messages=QUESTION, temperature=0,
                                            max_tokens=want + 32, stream=True,
                                            stream_options={"include_usage": True},
                                            extra_body={"min_tokens": want})
    usage = [c.usage for c in stream if c.usage is not None]
    assert usage and usage[-1].completion_tokens >= want


def test_min_tokens_on_completions(chat):
    client, model = chat
    r = client.completions.create(model=model, prompt="Once upon a time", temperature=0,
                                  max_tokens=40, extra_body={"min_tokens": 40})
    assert r.usage.completion_tokens == 40
    assert r.choices[0].finish_reason == "length"


def cached_tokens(client, model, prompt, salt):
    extra = {} if salt is None else {"cache_salt": salt}
    r = client.completions.create(model=model, prompt=prompt, max_tokens=1, temperature=0,
                                  extra_body=extra)
    assert r.usage.prompt_tokens > 48
    return r.usage.prompt_tokens_details.cached_tokens


def test_cache_salt_isolates_the_prefix_cache(chat):
    client, model = chat
    # A prompt no other test sends (several KV blocks long).
    prompt = f"Story {uuid.uuid4().hex}: " + "the little dog ran to the park and played. " * 8
    assert cached_tokens(client, model, prompt, "tenant-a") == 0
    assert cached_tokens(client, model, prompt, "tenant-a") > 0
    assert cached_tokens(client, model, prompt, "tenant-b") == 0
    assert cached_tokens(client, model, prompt, None) == 0
    assert cached_tokens(client, model, prompt, None) > 0
    assert cached_tokens(client, model, prompt, "tenant-b") > 0


@pytest.mark.parametrize("fields, param", [
    ({"min_tokens": 9, "max_tokens": 4}, "min_tokens"),
    ({"min_tokens": -1}, "min_tokens"),
    ({"min_tokens": "3"}, "min_tokens"),
    ({"cache_salt": 5}, "cache_salt"),
    ({"cache_salt": ""}, "cache_salt"),
])
def test_bad_values_are_400s_naming_the_field(chat, fields, param):
    client, model = chat
    extra = dict(fields)
    max_tokens = extra.pop("max_tokens", 8)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model, messages=QUESTION, max_tokens=max_tokens,
                                       extra_body=extra)
    assert e.value.body["param"] == param
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model, prompt="x", max_tokens=max_tokens,
                                  extra_body=extra)
    assert e.value.body["param"] == param
