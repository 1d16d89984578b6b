"""POST /v1/responses through the official openai client (client.responses), on SmolLM2-135M-
Instruct (plain, streamed, previous_response_id, errors) and on stories260K with the hermes
tool-call format (function calls, forced by tool_choice: the reply follows the tool-call
grammar)."""

import json

import openai
import pytest

from conftest import MODEL_NAME

QUESTION = "What is the capital of France? Answer in one sentence."
TOOLS = [{"type": "function", "name": "get_time", "description": "Current time",
          "parameters": {"type": "object", "properties": {}}}]
# The documented event sequence of a streamed text reply (deltas collapsed).
TEXT_EVENTS = ["response.created", "response.in_progress", "response.output_item.added",
               "response.content_part.added", "response.output_text.delta",
               "response.output_text.done", "response.content_part.done",
               "response.output_item.done", "response.completed"]


def collapse(types):
    out = []
    for t in types:
        if not out or out[-1] != t or not t.endswith(".delta"):
            out.append(t)
    return out


def test_plain_response_equals_the_chat_completion(smollm2_client):
    r = smollm2_client.responses.create(model="smollm2", input=QUESTION, max_output_tokens=32,
                                        temperature=0)
    assert r.object == "response" and r.status == "completed", r
    assert "Paris" in r.output_text, r.output_text
    (item,) = r.output
    assert item.type == "message" and item.role == "assistant" and item.status == "completed"
    chat = smollm2_client.chat.completions.create(
        model="smollm2", max_tokens=32, temperature=0,
        messages=[{"role": "user", "content": QUESTION}])
    assert r.output_text == chat.choices[0].message.content
    assert r.usage.input_tokens == chat.usage.prompt_tokens
    assert r.usage.output_tokens == chat.usage.completion_tokens
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens


def test_stream_follows_the_documented_event_sequence(smollm2_client):
    whole = smollm2_client.responses.create(model="smollm2", input=QUESTION,
                                            max_output_tokens=32, temperature=0)
    events = list(smollm2_client.responses.create(model="smollm2", input=QUESTION,
                                                  max_output_tokens=32, temperature=0,
                                                  stream=True))
    assert collapse([e.type for e in events]) == TEXT_EVENTS
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text
    done = [e for e in events if e.type == "response.output_text.done"][0]
    assert done.text == text
    final = events[-1].response
    assert final.status == "completed" and final.output_text == text
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert events[0].response.status == "in_progress" and events[0].response.output == []


def test_max_output_tokens_makes_an_incomplete_response(smollm2_client):
    r = smollm2_client.responses.create(model="smollm2", input=QUESTION, max_output_tokens=2)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 2
    events = list(smollm2_client.responses.create(model="smollm2", input=QUESTION,
                                                  max_output_tokens=2, stream=True))
    assert events[-1].type == "response.incomplete"


def test_previous_response_id_continues_the_conversation(smollm2_server, smollm2_client):
    first = smollm2_client.responses.create(model="smollm2", input="My name is Ada.",
                                            instructions="Be brief.", max_output_tokens=8,
                                            temperature=0)
    second = smollm2_client.responses.create(model="smollm2", input="What is my name?",
                                             previous_response_id=first.id, max_output_tokens=4,
                                             temperature=0)
    assert second.previous_response_id == first.id
    # The prompt is the stored turn (instructions not carried over) plus the new input.
    messages = [{"role": "user", "content": "My name is Ada."},
                {"role": "assistant", "content": first.output_text},
                {"role": "user", "content": "What is my name?"}]
    status, _, tok = smollm2_server.request("POST", "/tokenize", {"messages": messages})
    assert status == 200, tok
    assert second.usage.input_tokens == tok["count"]
    # store: false keeps nothing.
    unstored = smollm2_client.responses.create(model="smollm2", input="Hi", store=False,
                                               max_output_tokens=2)
    assert unstored.store is False
    with pytest.raises(openai.BadRequestError) as e:
        smollm2_client.responses.create(model="smollm2", input="Again",
                                        previous_response_id=unstored.id, max_output_tokens=2)
    assert e.value.body["param"] == "previous_response_id"


def test_errors(smollm2_server, smollm2_client):
    with pytest.raises(openai.BadRequestError) as e:
        smollm2_client.responses.create(
            model="smollm2", input="Hi", max_output_tokens=4,
            text={"format": {"type": "json_schema", "name": "x",
                             "schema": {"type": "array", "uniqueItems": True}}})
    assert e.value.body["param"].startswith("text.format")
    assert "uniqueItems" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        smollm2_client.responses.create(model="smollm2", input=[{"role": "user", "content": [
            {"type": "input_image", "image_url": "data:,"}]}])
    assert e.value.body["param"] == "input[0].content[0]"
    with pytest.raises(openai.BadRequestError) as e:
        smollm2_client.responses.create(model="smollm2", input="Hi", max_output_tokens=0)
    assert e.value.body["param"] == "max_output_tokens"
    with pytest.raises(openai.NotFoundError):
        smollm2_client.responses.create(model="gpt-9", input="Hi")
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=smollm2_server.base + "/v1", api_key="wrong",
                      max_retries=0).responses.create(model="smollm2", input="Hi")
    status, _, body = smollm2_server.request("POST", "/v1/responses", {"model": "smollm2"})
    assert status == 400 and body["error"]["param"] == "input", body


def forced_call(client, **kw):
    return client.responses.create(
        model=MODEL_NAME, input="What time is it?", tools=TOOLS,
        tool_choice={"type": "function", "name": "get_time"}, max_output_tokens=64,
        temperature=0, **kw)


def test_function_call_and_its_output(hermes_server):
    client = hermes_server.client()
    r = forced_call(client)
    (call,) = r.output
    assert call.type == "function_call" and call.name == "get_time"
    assert call.call_id.startswith("call_") and json.loads(call.arguments) == {}
    # The call and its output go back as input items; the prompt grows by both.
    follow = client.responses.create(
        model=MODEL_NAME, tools=TOOLS, max_output_tokens=2, temperature=0,
        input=[{"role": "user", "content": "What time is it?"},
               {"type": "function_call", "call_id": call.call_id, "name": "get_time",
                "arguments": call.arguments},
               {"type": "function_call_output", "call_id": call.call_id, "output": "12:00"}])
    assert follow.status in ("completed", "incomplete")
    assert follow.usage.input_tokens > r.usage.input_tokens
    # The same turn via previous_response_id gives the same prompt.
    chained = client.responses.create(
        model=MODEL_NAME, tools=TOOLS, max_output_tokens=2, temperature=0,
        previous_response_id=r.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "12:00"}])
    assert chained.usage.input_tokens == follow.usage.input_tokens


def test_streamed_function_call_events(hermes_server):
    events = list(forced_call(hermes_server.client(), stream=True))
    assert [e.type for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done", "response.completed"]
    added, done = events[2].item, events[5].item
    assert added.type == "function_call" and added.name == "get_time" and added.arguments == ""
    assert json.loads(done.arguments) == {} and done.call_id == added.call_id
    assert events[-1].response.output[0].call_id == added.call_id


def test_text_format_json_schema_constrains_the_answer(smollm2_server, smollm2_client):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                               "population": {"type": "integer"}},
              "required": ["city", "population"], "additionalProperties": False}
    r = smollm2_client.responses.create(
        model="smollm2", input="Name a large city and its population, as JSON.",
        max_output_tokens=60, temperature=0,
        text={"format": {"type": "json_schema", "name": "city", "schema": schema, "strict": True}})
    assert r.status == "completed", r
    doc = json.loads(r.output_text)
    assert set(doc) == {"city", "population"}
    assert isinstance(doc["city"], str) and isinstance(doc["population"], int)
    assert r.text.format.type == "json_schema"
