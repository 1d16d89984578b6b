"""Hostile JSON against a real `tachyon serve` on SmolLM2-135M-Instruct: bodies nested beyond the
depth limit are refused with a 400 naming the limit (they used to overflow an io thread's stack
and kill the server), and the server goes on answering."""

import pytest

DEPTH = 100_000
DEPTH_LIMIT = 64  # server/json_limits.h kMaxJsonDepth


def deep_object(n=DEPTH):
    return ('{"a":' * n + "1" + "}" * n).encode()


def deep_array_in_messages(n=DEPTH):
    return ('{"messages":' + "[" * n + "]" * n + "}").encode()


def assert_alive(server):
    status, _, body = server.request("POST", "/v1/chat/completions", {
        "model": "smollm2", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
        "temperature": 0})
    assert status == 200, body
    assert body["choices"][0]["message"]["role"] == "assistant"


def assert_depth_error(status, body):
    assert status == 400, body
    err = body["error"]
    assert err["type"] == "invalid_request_error"
    assert err["code"] == "json_too_deep"
    assert str(DEPTH_LIMIT) in err["message"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/tokenize"])
@pytest.mark.parametrize("make_body", [deep_object, deep_array_in_messages],
                         ids=["object", "array"])
def test_deep_json_is_refused_and_server_survives(smollm2_server, path, make_body):
    status, _, body = smollm2_server.request("POST", path, raw=make_body())
    assert_depth_error(status, body)
    assert smollm2_server.proc.poll() is None, "the server died"
    assert_alive(smollm2_server)


def test_depth_limit_is_exact(smollm2_server):
    """A body 64 levels deep is served; one level more is refused."""
    inner = '{"a":' * (DEPTH_LIMIT - 1) + "1" + "}" * (DEPTH_LIMIT - 1)
    ok_body = ('{"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":' + inner
               + ',"max_tokens":2}').encode()
    status, _, body = smollm2_server.request("POST", "/v1/chat/completions", raw=ok_body)
    assert status == 200, body
    too_deep = ok_body.replace(b'"chat_template_kwargs":', b'"chat_template_kwargs":[', 1)
    too_deep = too_deep.replace(b',"max_tokens"', b'],"max_tokens"', 1)
    status, _, body = smollm2_server.request("POST", "/v1/chat/completions", raw=too_deep)
    assert_depth_error(status, body)
    assert_alive(smollm2_server)


@pytest.mark.parametrize("response_format", [
    {"type": "json_object"},
    {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}}},
], ids=["json_object", "json_schema"])
def test_response_format_json_is_honoured_not_ignored(smollm2_server, response_format):
    """It used to be accepted and ignored: a client asking for JSON got prose with a 200. Now
    the answer is constrained: a complete answer parses as a JSON object."""
    import json
    r = smollm2_server.client().chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "Reply in JSON."}],
        max_tokens=200, temperature=0, response_format=response_format)
    choice = r.choices[0]
    if choice.finish_reason == "stop":
        assert isinstance(json.loads(choice.message.content), dict), choice.message.content
    else:
        assert choice.message.content.lstrip().startswith("{"), choice.message.content


def test_response_format_text_is_served(smollm2_server):
    r = smollm2_server.client().chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "Hi"}], max_tokens=2,
        response_format={"type": "text"})
    assert r.choices[0].message.role == "assistant"


@pytest.mark.parametrize("field,value", [
    ("audio", {"voice": "alloy", "format": "wav"}),
    ("modalities", ["text", "audio"]),
    ("prediction", {"type": "content", "content": "x"}),
    ("web_search_options", {}),
    ("tools", [{"type": "custom", "custom": {"name": "c"}}]),
])
def test_unimplemented_chat_fields_are_refused(smollm2_server, field, value):
    status, _, body = smollm2_server.request("POST", "/v1/chat/completions", {
        "model": "smollm2", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
        field: value})
    assert status == 400, body
    assert body["error"]["param"].startswith(field), body
