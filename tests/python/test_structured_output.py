"""Structured output end to end on SmolLM2-135M-Instruct: GBNF (vLLM's structured_outputs.grammar
and llama.cpp's grammar field), regex and choice constraints on /v1/chat/completions and
/v1/completions, and the 400s of bad or conflicting constraints."""

import re

import pytest

MODEL = "smollm2"


def chat_body(messages, **extra):
    body = {"model": MODEL, "messages": messages, "temperature": 0, "max_tokens": 64}
    body.update(extra)
    return body


def ask(server, content, **extra):
    status, _, body = server.request("POST", "/v1/chat/completions",
                                     chat_body([{"role": "user", "content": content}], **extra))
    return status, body


def answer(body):
    return body["choices"][0]["message"]["content"], body["choices"][0]["finish_reason"]


def test_regex(smollm2_server):
    status, body = ask(smollm2_server, "What year was it?",
                       structured_outputs={"regex": "(19|20)[0-9]{2}"})
    assert status == 200, body
    text, finish = answer(body)
    assert re.fullmatch(r"(19|20)[0-9]{2}", text), text
    assert finish == "stop"


def test_choice_and_grammar(smollm2_server):
    status, body = ask(smollm2_server, "Is the sky blue?",
                       structured_outputs={"choice": ["yes", "no", "maybe"]})
    assert status == 200, body
    assert answer(body) in [("yes", "stop"), ("no", "stop"), ("maybe", "stop")], body

    gbnf = 'root ::= "The answer is " digit+ "."\ndigit ::= [0-9]'
    for field in ({"grammar": gbnf}, {"structured_outputs": {"grammar": gbnf}}):
        status, body = ask(smollm2_server, "How many legs has a spider?", **field)
        assert status == 200, body
        text, finish = answer(body)
        assert re.fullmatch(r"The answer is [0-9]+\.", text), text
        assert finish == "stop"


def test_completions_endpoint(smollm2_server):
    status, _, body = smollm2_server.request("POST", "/v1/completions", {
        "model": MODEL, "prompt": "The weather today is", "temperature": 0, "max_tokens": 16,
        "n": 2, "structured_outputs": {"choice": ["sunny", "rainy"]}})
    assert status == 200, body
    for c in body["choices"]:
        assert c["text"] in ("sunny", "rainy") and c["finish_reason"] == "stop", body
    status, _, body = smollm2_server.request("POST", "/v1/completions", {
        "model": MODEL, "prompt": "2 + 2 =", "temperature": 0, "max_tokens": 16,
        "grammar": 'root ::= " " [0-9]+'})
    assert status == 200, body
    assert re.fullmatch(r" [0-9]+", body["choices"][0]["text"]), body


@pytest.mark.parametrize("extra,param", [
    ({"grammar": "root ::= ("}, "grammar"),
    ({"structured_outputs": {"regex": "a(b"}}, "structured_outputs.regex"),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "not": {"required": ["a"]}}}}},
     "response_format.json_schema.schema"),
    ({"response_format": {"type": "json_object"}, "grammar": 'root ::= "a"'}, "grammar"),
    ({"structured_outputs": {"choice": []}}, "structured_outputs.choice"),
    ({"guided_json": {"type": "object"}}, "guided_json"),
])
def test_bad_constraints_are_400s(smollm2_server, extra, param):
    status, body = ask(smollm2_server, "hi", **extra)
    assert status == 400, body
    assert body["error"]["type"] == "invalid_request_error", body
    assert body["error"]["param"] == param, body
    assert body["error"]["message"], body
    # The server is still fine.
    status, body = ask(smollm2_server, "hi", max_tokens=4)
    assert status == 200, body
