"""Responses of a live server validate against the schemas in docs/openapi.yaml, streamed ones
event by event (schemathesis checks a stream's events only as strings: an OpenAPI 3.0 schema cannot
say that an event's data is JSON)."""

import json
import urllib.request

import pytest

from conftest import REPO

yaml = pytest.importorskip("yaml", reason="PyYAML missing (scripts/setup.sh installs it)")
jsonschema_rs = pytest.importorskip("jsonschema_rs", reason="jsonschema_rs missing (setup.sh)")

SPEC = yaml.safe_load((REPO / "docs" / "openapi.yaml").read_text())


def to_json_schema(node, in_properties=False):
    """OpenAPI 3.0 schema -> JSON Schema draft 7: nullable, boolean exclusiveMinimum, $ref."""
    if isinstance(node, list):
        return [to_json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    if in_properties:  # keys are property names, not keywords
        return {k: to_json_schema(v) for k, v in node.items()}
    out = {k: to_json_schema(v, k == "properties") for k, v in node.items()
           if k not in ("nullable", "description")}
    if "$ref" in out:
        out["$ref"] = out["$ref"].replace("#/components/schemas/", "#/definitions/")
    if out.get("exclusiveMinimum") is True:
        out["exclusiveMinimum"] = out.pop("minimum")
    if node.get("nullable"):
        out = {"anyOf": [out, {"type": "null"}]}
    return out


DEFINITIONS = to_json_schema(SPEC["components"]["schemas"], in_properties=True)


def validate(name, instance):
    schema = {"$ref": f"#/definitions/{name}", "definitions": DEFINITIONS}
    errors = [str(e) for e in jsonschema_rs.Draft7Validator(schema).iter_errors(instance)]
    assert not errors, f"{name}: {errors[:3]}\n{json.dumps(instance)[:2000]}"


def stream_events(server, path, body):
    req = urllib.request.Request(
        server.base + path, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {server.api_key}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        text = r.read().decode()
    events = [e for e in text.split("\n\n") if e.strip()]
    assert all(e.startswith("data: ") for e in events), events[:3]
    return [e[len("data: "):] for e in events]


def test_the_validator_rejects_what_the_spec_forbids():
    with pytest.raises(AssertionError):
        validate("CompletionResponse", {"id": 1, "object": "text_completion"})
    with pytest.raises(AssertionError):
        validate("StreamChunk", {"id": "x", "object": "chat.completion.chunk", "created": 1,
                                 "model": "m", "choices": [{"index": 0, "finish_reason": "done"}]})


@pytest.mark.parametrize("body", [
    {"prompt": "Once upon a time", "max_tokens": 8},
    {"prompt": ["Once", [1, 400, 401]], "max_tokens": 4, "n": 2, "logprobs": 2, "echo": True,
     "stop": ["."], "seed": 3},
])
def test_completion_bodies(server, body):
    status, _, reply = server.request("POST", "/v1/completions", body)
    assert status == 200, reply
    validate("CompletionResponse", reply)


@pytest.mark.parametrize("body", [
    {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8},
    {"messages": [{"role": "system", "content": "Tell"},
                  {"role": "user", "content": [{"type": "text", "text": "a story"}]}],
     "max_completion_tokens": 6, "n": 2, "logprobs": True, "top_logprobs": 3},
])
def test_chat_bodies(server, body):
    status, _, reply = server.request("POST", "/v1/chat/completions", body)
    assert status == 200, reply
    validate("ChatCompletionResponse", reply)


@pytest.mark.parametrize("path,body", [
    ("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 8, "n": 2, "logprobs": 1,
                         "stream": True, "stream_options": {"include_usage": True}}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8,
                              "logprobs": True, "top_logprobs": 2, "stream": True,
                              "stream_options": {"include_usage": True}}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
                              "n": 3, "stream": True}),
])
def test_streamed_events(server, path, body):
    events = stream_events(server, path, body)
    assert events[-1] == "[DONE]", events[-3:]
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks, events
    for chunk in chunks:
        validate("StreamChunk", chunk)
    if body.get("stream_options", {}).get("include_usage"):
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


def test_error_bodies(server):
    for path, body in [("/v1/completions", {"prompt": "x", "temperature": 9}),
                       ("/v1/chat/completions", {"messages": []}),
                       ("/tokenize", {"prompt": 5}),
                       ("/detokenize", {"tokens": [-1]})]:
        status, _, reply = server.request("POST", path, body)
        assert status == 400, (path, reply)
        validate("Error", reply)
    status, _, reply = server.request("GET", "/v1/models/nope")
    assert status == 404
    validate("Error", reply)
