"""Tool calling through the official openai client, on stories260K carrying the Qwen3 chat
template (so the server picks the hermes <tool_call> format from the template).

stories260K never writes a tool call by itself, so the calls here come from tool_choice naming a
function (the server opens the call in the prompt) plus logit_bias forcing the byte '}' (id
3 + 0x7D): the model closes the arguments object and the call, `{}` + `}`.
"""

import json

import openai
import pytest

from conftest import MODEL_NAME

CLOSE_BRACE = str(3 + 0x7D)
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Current time",
        "parameters": {"type": "object", "properties": {}}}},
]
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


def forced_call(client, **kw):
    return client.chat.completions.create(
        model=MODEL_NAME, messages=MESSAGES, tools=TOOLS, max_tokens=2, temperature=0,
        logit_bias={CLOSE_BRACE: 100}, **kw)


def test_named_tool_choice_returns_a_tool_call(templated_server):
    client = templated_server.client()
    r = forced_call(client, tool_choice={"type": "function", "function": {"name": "get_time"}})
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_time"
    assert json.loads(call.function.arguments) == {}
    assert r.usage.completion_tokens == 2


def test_required_with_one_tool_calls_it(templated_server):
    client = templated_server.client()
    r = client.chat.completions.create(
        model=MODEL_NAME, messages=MESSAGES, tools=TOOLS[:1], tool_choice="required",
        max_tokens=2, temperature=0, logit_bias={CLOSE_BRACE: 100}, parallel_tool_calls=False)
    (call,) = r.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    assert r.choices[0].finish_reason == "tool_calls"


def test_streamed_tool_call_deltas(templated_server):
    client = templated_server.client()
    stream = forced_call(client, stream=True,
                         tool_choice={"type": "function", "function": {"name": "get_weather"}})
    calls, content, finish = {}, "", None
    for chunk in stream:
        for c in chunk.choices:
            content += c.delta.content or ""
            for d in c.delta.tool_calls or []:
                entry = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                if d.id:
                    assert entry["id"] is None  # the id comes once, with the name
                    entry["id"] = d.id
                if d.function and d.function.name:
                    entry["name"] += d.function.name
                if d.function and d.function.arguments:
                    entry["arguments"] += d.function.arguments
            finish = c.finish_reason or finish
    assert content == ""
    assert list(calls) == [0]
    assert calls[0]["name"] == "get_weather" and calls[0]["id"].startswith("call_")
    assert json.loads(calls[0]["arguments"]) == {}
    assert finish == "tool_calls"


def test_sdk_stream_helper_accumulates_the_call(templated_server):
    """The openai SDK's own stream accumulator understands our deltas."""
    client = templated_server.client()
    with client.beta.chat.completions.stream(
            model=MODEL_NAME, messages=MESSAGES, tools=TOOLS, max_tokens=2, temperature=0,
            logit_bias={CLOSE_BRACE: 100},
            tool_choice={"type": "function", "function": {"name": "get_time"}}) as stream:
        final = stream.get_final_completion()
    (call,) = final.choices[0].message.tool_calls
    assert call.function.name == "get_time" and json.loads(call.function.arguments) == {}


def test_auto_leaves_ordinary_text_as_content(templated_server):
    client = templated_server.client()
    r = client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, tools=TOOLS,
                                       tool_choice="auto", max_tokens=12, temperature=0)
    m = r.choices[0].message
    assert not m.tool_calls
    assert m.content
    assert r.choices[0].finish_reason in ("stop", "length")
    # Streamed == non-streamed when nothing is a call.
    text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model=MODEL_NAME, messages=MESSAGES, tools=TOOLS, max_tokens=12, temperature=0,
        stream=True) if c.choices)
    assert text == m.content


def test_tool_choice_errors(templated_server, server):
    client = templated_server.client()
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=MODEL_NAME, messages=MESSAGES, tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "launch_rocket"}})
    assert e.value.body["param"] == "tool_choice"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, tool_choice="required")
    assert e.value.body["param"] == "tool_choice"
    # The plain test server's template shows no tool-call syntax: "required" cannot be honoured.
    with pytest.raises(openai.BadRequestError) as e:
        server.client().chat.completions.create(model=MODEL_NAME, messages=MESSAGES, tools=TOOLS,
                                                tool_choice="required")
    assert e.value.body["param"] == "tool_choice"
