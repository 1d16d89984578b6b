"""Tool calling through the official openai client, on stories260K carrying the Qwen3 chat
template (so the server picks the hermes <tool_call> format from the template, and "</think>" as
the end of a reasoning section).

stories260K never writes a tool call by itself: the calls here come from tool_choice "required"
or a named function, which make the reply follow the tool-call grammar (the name one of the
functions, the arguments valid under its parameters). `enable_thinking: false` closes the
template's reasoning section in the prompt, so the grammar applies from the first token.
"""

import json

import openai
import pytest

from conftest import MODEL_NAME

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string",
                                                                  "maxLength": 8}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Current time",
        "parameters": {"type": "object", "properties": {}}}},
]
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}


def forced_call(client, tools=TOOLS, **kw):
    return client.chat.completions.create(
        model=MODEL_NAME, messages=MESSAGES, tools=tools, max_tokens=64, temperature=0,
        extra_body=NO_THINKING, **kw)


def test_named_tool_choice_returns_a_tool_call(templated_server):
    client = templated_server.client()
    r = forced_call(client, tool_choice={"type": "function", "function": {"name": "get_time"}})
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_time"
    assert json.loads(call.function.arguments) == {}  # the only object its schema allows


def test_required_with_one_call_follows_the_schema(templated_server):
    client = templated_server.client()
    r = client.chat.completions.create(
        model=MODEL_NAME, messages=MESSAGES, tools=TOOLS[:1], tool_choice="required",
        max_tokens=64, temperature=0, parallel_tool_calls=False, extra_body=NO_THINKING)
    (call,) = r.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    assert r.choices[0].finish_reason == "tool_calls"
    args = json.loads(call.function.arguments)
    assert list(args) == ["city"] and isinstance(args["city"], str) and len(args["city"]) <= 8


def test_streamed_tool_call_deltas_concatenate_to_the_arguments(templated_server):
    client = templated_server.client()
    kw = dict(tools=TOOLS[:1], tool_choice="required", parallel_tool_calls=False)
    whole = forced_call(client, **kw).choices[0].message.tool_calls[0]
    calls, content, finish, pieces = {}, "", None, 0
    for chunk in forced_call(client, stream=True, **kw):
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
                    pieces += 1
            finish = c.finish_reason or finish
    assert content == ""
    assert list(calls) == [0]
    assert calls[0]["name"] == "get_weather" and calls[0]["id"].startswith("call_")
    assert calls[0]["arguments"] == whole.function.arguments
    assert pieces > 1  # incremental, as generated
    assert finish == "tool_calls"


def test_sdk_stream_helper_accumulates_the_call(templated_server):
    """The openai SDK's own stream accumulator understands our deltas."""
    client = templated_server.client()
    with client.beta.chat.completions.stream(
            model=MODEL_NAME, messages=MESSAGES, tools=TOOLS, max_tokens=64, temperature=0,
            extra_body=NO_THINKING,
            tool_choice={"type": "function", "function": {"name": "get_time"}}) as stream:
        final = stream.get_final_completion()
    (call,) = final.choices[0].message.tool_calls
    assert call.function.name == "get_time" and json.loads(call.function.arguments) == {}


def test_reasoning_section_comes_before_the_forced_call(templated_server):
    """Thinking on (the template's default): the grammar waits for "</think>", which
    stories260K never writes, so the whole reply is reasoning and no call is made."""
    status, _, body = templated_server.request("POST", "/v1/chat/completions", {
        "model": MODEL_NAME, "messages": MESSAGES, "tools": TOOLS, "tool_choice": "required",
        "max_tokens": 16, "temperature": 0})
    assert status == 200, body
    m = body["choices"][0]["message"]
    assert m["reasoning_content"], body
    assert m["content"] == "" and "tool_calls" not in m, body
    assert body["choices"][0]["finish_reason"] == "length"


def test_tool_call_through_responses_and_messages(hermes_server):
    status, _, body = hermes_server.request("POST", "/v1/responses", {
        "model": MODEL_NAME, "input": "What time is it?", "max_output_tokens": 64,
        "temperature": 0, "tool_choice": "required",
        "tools": [{"type": "function", "name": "get_time",
                   "parameters": {"type": "object", "properties": {}}}]})
    assert status == 200, body
    (item,) = [o for o in body["output"] if o["type"] == "function_call"]
    assert item["name"] == "get_time" and json.loads(item["arguments"]) == {}
    status, _, body = hermes_server.request("POST", "/v1/messages", {
        "model": MODEL_NAME, "max_tokens": 64, "temperature": 0,
        "messages": [{"role": "user", "content": "What time is it?"}],
        "tool_choice": {"type": "tool", "name": "get_time"},
        "tools": [{"name": "get_time", "input_schema": {"type": "object", "properties": {}}}]})
    assert status == 200, body
    (block,) = [b for b in body["content"] if b["type"] == "tool_use"]
    assert block["name"] == "get_time" and block["input"] == {}
    assert body["stop_reason"] == "tool_use"


def test_auto_leaves_ordinary_text_as_content(templated_server):
    client = templated_server.client()
    r = client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, tools=TOOLS,
                                       tool_choice="auto", max_tokens=12, temperature=0,
                                       extra_body=NO_THINKING)
    m = r.choices[0].message
    assert not m.tool_calls
    assert m.content
    assert r.choices[0].finish_reason in ("stop", "length")
    # Streamed == non-streamed when nothing is a call.
    text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model=MODEL_NAME, messages=MESSAGES, tools=TOOLS, max_tokens=12, temperature=0,
        stream=True, extra_body=NO_THINKING) if c.choices)
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
    # A parameters schema the grammar cannot follow exactly: 400 naming the keyword.
    bad = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}}}}]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, tools=bad,
                                       tool_choice="required", extra_body=NO_THINKING)
    assert e.value.body["param"] == "tools"
    assert "'multipleOf'" in e.value.body["message"] and "'f'" in e.value.body["message"]
