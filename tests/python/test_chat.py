"""/v1/chat/completions with a chat template given by --chat-template."""

from conftest import MODEL_NAME

MESSAGES = [{"role": "system", "content": "You tell stories."},
            {"role": "user", "content": "Tell me about a cat."}]


def chat(client, **kw):
    kw.setdefault("model", MODEL_NAME)
    kw.setdefault("messages", MESSAGES)
    return client.chat.completions.create(**kw)


def test_chat_non_streaming(client):
    r = chat(client, max_tokens=16, temperature=0)
    assert r.object == "chat.completion"
    assert r.id.startswith("chatcmpl-")
    m = r.choices[0].message
    assert m.role == "assistant"
    assert isinstance(m.content, str) and m.content
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 10


def test_chat_prompt_is_the_rendered_template(server, client):
    status, _, tok = server.request("POST", "/tokenize", {"messages": MESSAGES})
    assert status == 200
    expected = ("<s>system: You tell stories.\nuser: Tell me about a cat.\nassistant:")
    status, _, text = server.request("POST", "/tokenize",
                                     {"prompt": expected, "add_special_tokens": False})
    assert tok["tokens"] == text["tokens"]
    r = chat(client, max_tokens=4, temperature=0)
    assert r.usage.prompt_tokens == tok["count"]


def test_chat_stream_equals_non_stream(client):
    plain = chat(client, max_tokens=30, temperature=0, extra_body={"ignore_eos": True})
    chunks = list(chat(client, max_tokens=30, temperature=0, stream=True,
                       stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
    assert chunks[0].object == "chat.completion.chunk"
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 30


def test_all_roles_parts_and_tools(client):
    messages = [
        {"role": "developer", "content": "Be kind."},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "42", "tool_call_id": "c1"},
        {"role": "user", "content": "Go on."},
    ]
    tools = [{"type": "function", "function": {"name": "f", "description": "d",
                                               "parameters": {"type": "object", "properties": {}}}}]
    r = chat(client, messages=messages, tools=tools, tool_choice="auto", max_tokens=5)
    assert r.choices[0].message.content is not None
    r = chat(client, messages=messages, tools=tools, tool_choice="none", max_completion_tokens=3)
    assert r.usage.completion_tokens <= 3


def test_chat_logprobs_n_seed_stop(client):
    r = chat(client, max_tokens=6, temperature=0, logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 2
        assert bytes(t.bytes).decode("utf-8", "replace") == t.token or t.token
    many = chat(client, max_tokens=6, n=2, seed=11, temperature=1.0)
    assert [c.index for c in many.choices] == [0, 1]
    again = chat(client, max_tokens=6, n=2, seed=11, temperature=1.0)
    assert [c.message.content for c in many.choices] == [c.message.content for c in again.choices]
    full = chat(client, max_tokens=30, temperature=0, extra_body={"ignore_eos": True})
    text = full.choices[0].message.content
    stop = text[8:12]
    cut = chat(client, max_tokens=30, temperature=0, stop=stop)
    assert cut.choices[0].message.content == text[:text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"
