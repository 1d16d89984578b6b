"""POST /v1/messages and /v1/messages/count_tokens through the official anthropic client, on
SmolLM2-135M-Instruct (plain, streamed, count_tokens, errors, x-api-key) and on stories260K with
the hermes tool-call format (tool_use / tool_result, forced by tool_choice: the reply follows the
tool-call grammar).

The current anthropic client has no temperature / top_p / top_k arguments (older ones had); the
server still takes them, so greedy requests pass `temperature` through extra_body."""

import json

import pytest

from conftest import API_KEY, MODEL_NAME

anthropic = pytest.importorskip("anthropic", reason="anthropic missing (scripts/setup.sh installs it)")

QUESTION = "What is the capital of France? Answer in one sentence."
TOOLS = [{"name": "get_time", "description": "Current time",
          "input_schema": {"type": "object", "properties": {}}}]
# The documented event sequence of a streamed text reply, ping aside (the SDK skips pings).
TEXT_EVENTS = ["message_start", "content_block_start", "content_block_delta",
               "content_block_stop", "message_delta", "message_stop"]


def client_for(server, key=None):
    return anthropic.Anthropic(base_url=server.base, api_key=key or server.api_key or "none",
                               max_retries=0, timeout=120)


def prompt_tokens(message):
    return message.usage.input_tokens + message.usage.cache_read_input_tokens


def collapse(types):
    return [t for i, t in enumerate(types) if i == 0 or t != types[i - 1] or t != "content_block_delta"]


def ask(client, **kw):
    args = dict(model="smollm2", max_tokens=32, extra_body={"temperature": 0},
                messages=[{"role": "user", "content": QUESTION}])
    args.update(kw)
    return client.messages.create(**args)


def test_create_answers_like_the_chat_completion(smollm2_server, smollm2_client):
    m = ask(client_for(smollm2_server))
    assert m.type == "message" and m.role == "assistant" and m.model == "smollm2"
    (block,) = m.content
    assert block.type == "text" and "Paris" in block.text, block
    assert m.stop_reason == "end_turn"
    chat = smollm2_client.chat.completions.create(
        model="smollm2", max_tokens=32, temperature=0,
        messages=[{"role": "user", "content": QUESTION}])
    assert block.text == chat.choices[0].message.content
    assert m.usage.output_tokens == chat.usage.completion_tokens
    assert prompt_tokens(m) == chat.usage.prompt_tokens


def test_stream_helper_and_raw_event_sequence(smollm2_server):
    client = client_for(smollm2_server)
    whole = ask(client)
    with client.messages.stream(model="smollm2", max_tokens=32, extra_body={"temperature": 0},
                                messages=[{"role": "user", "content": QUESTION}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == whole.content[0].text == final.content[0].text
    assert final.stop_reason == "end_turn" and final.usage.output_tokens == whole.usage.output_tokens
    events = list(ask(client, stream=True))
    assert collapse([e.type for e in events]) == TEXT_EVENTS
    assert events[0].message.usage.input_tokens > 5
    assert events[-2].delta.stop_reason == "end_turn"
    assert events[-2].usage.output_tokens == whole.usage.output_tokens


def test_system_blocks_stop_sequences_and_max_tokens(smollm2_server, smollm2_client):
    client = client_for(smollm2_server)
    with_system = ask(client, system=[{"type": "text", "text": "Answer in French."}])
    chat = smollm2_client.chat.completions.create(
        model="smollm2", max_tokens=32, temperature=0,
        messages=[{"role": "system", "content": "Answer in French."},
                  {"role": "user", "content": QUESTION}])
    assert with_system.content[0].text == chat.choices[0].message.content
    stopped = ask(client, stop_sequences=["Paris"])
    assert "Paris" not in stopped.content[0].text
    short = ask(client, max_tokens=2)
    assert short.stop_reason == "max_tokens" and short.usage.output_tokens == 2


def test_count_tokens_is_the_prompt_length(smollm2_server):
    client = client_for(smollm2_server)
    messages = [{"role": "user", "content": QUESTION}]
    counted = client.messages.count_tokens(model="smollm2", messages=messages)
    status, _, tok = smollm2_server.request("POST", "/tokenize", {"messages": messages})
    assert status == 200 and counted.input_tokens == tok["count"], (counted, tok)


def test_errors_have_anthropics_shape(smollm2_server):
    client = client_for(smollm2_server)
    with pytest.raises(anthropic.NotFoundError) as e:
        ask(client, model="claude-nonexistent")
    assert e.value.body["type"] == "error"
    assert e.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.BadRequestError) as e:
        ask(client, extra_body={"temperature": 1.5})
    assert e.value.body["error"]["type"] == "invalid_request_error"
    assert "temperature" in e.value.body["error"]["message"]
    with pytest.raises(anthropic.AuthenticationError) as e:
        ask(client_for(smollm2_server, key="wrong"))
    assert e.value.body["error"]["type"] == "authentication_error"
    status, _, body = smollm2_server.request(
        "POST", "/v1/messages", {"messages": [{"role": "user", "content": "hi"}]})
    assert status == 400 and body["type"] == "error", body
    assert "max_tokens" in body["error"]["message"]
    status, _, body = smollm2_server.request("POST", "/v1/messages", raw=b"{not json")
    assert status == 400 and body["error"]["type"] == "invalid_request_error", body


def test_x_api_key_works_like_the_bearer_key(smollm2_server):
    body = {"model": "smollm2", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
    for path in ("/v1/messages", "/v1/chat/completions"):
        status, _, reply = smollm2_server.request(
            "POST", path, body, headers={"Authorization": "", "x-api-key": API_KEY})
        assert status == 200, reply


def forced_tool(client, **kw):
    return client.messages.create(
        model=MODEL_NAME, max_tokens=64, tools=TOOLS,
        tool_choice={"type": "tool", "name": "get_time"},
        messages=[{"role": "user", "content": "What time is it?"}],
        extra_body={"temperature": 0}, **kw)


def test_tool_use_and_tool_result(hermes_server):
    client = client_for(hermes_server)
    m = forced_tool(client)
    assert m.stop_reason == "tool_use"
    (use,) = m.content
    assert use.type == "tool_use" and use.name == "get_time" and use.input == {}
    follow = client.messages.create(
        model=MODEL_NAME, max_tokens=2, tools=TOOLS, extra_body={"temperature": 0},
        messages=[{"role": "user", "content": "What time is it?"},
                  {"role": "assistant", "content": [
                      {"type": "tool_use", "id": use.id, "name": "get_time", "input": {}}]},
                  {"role": "user", "content": [
                      {"type": "tool_result", "tool_use_id": use.id, "content": "12:00"}]}])
    # The prompt grows by the call and its result (prefix-cache hits count apart).
    assert prompt_tokens(follow) > prompt_tokens(m)


def test_streamed_tool_use(hermes_server):
    client = client_for(hermes_server)
    with client.messages.stream(
            model=MODEL_NAME, max_tokens=64, tools=TOOLS,
            tool_choice={"type": "tool", "name": "get_time"},
            messages=[{"role": "user", "content": "What time is it?"}],
            extra_body={"temperature": 0}) as stream:
        final = stream.get_final_message()
    (use,) = final.content
    assert use.type == "tool_use" and use.name == "get_time" and use.input == {}
    assert final.stop_reason == "tool_use"
    events = list(forced_tool(client, stream=True))
    assert [e.type for e in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop"]
    assert events[1].content_block.type == "tool_use"
    assert events[2].delta.type == "input_json_delta"
    assert json.loads(events[2].delta.partial_json) == {}
