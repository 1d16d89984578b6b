"""The continuation extensions of `tachyon serve` (what `tachyon route` migrates streams with):
`return_token_ids` puts each stream delta's new token ids in its choice, and
`resume_token_ids` continues a choice after tokens already delivered, drawing from the same
output positions, so the continuation's text is what the original stream would have gone on
with (greedy and seeded)."""

import json

import pytest

from conftest import MODEL_NAME


def stream(server, path, body):
    status, _, text = server.request("POST", path, body)
    assert status == 200, text
    events = [json.loads(line[len("data: "):]) for line in text.split("\n\n")
              if line.startswith("data: ") and line != "data: [DONE]"]
    return events


def pieces(events, chat):
    """[(token_ids, text)] of the deltas that carry tokens, and the usage."""
    out, usage = [], None
    for e in events:
        if e.get("usage"):
            usage = e["usage"]
        for c in e["choices"]:
            text = (c["delta"].get("content") or "") if chat else c["text"]
            if "token_ids" in c:
                out.append((c["token_ids"], text))
            else:
                assert text == "", e  # every delta with text carries its ids
    return out, usage


@pytest.mark.parametrize("chat", [False, True])
@pytest.mark.parametrize("sampling", [{"temperature": 0}, {"temperature": 1.0, "seed": 77}])
def test_resume_reproduces_the_rest_of_the_stream(server, chat, sampling):
    path = "/v1/chat/completions" if chat else "/v1/completions"
    body = {"model": MODEL_NAME, "max_tokens": 40, "stream": True, "ignore_eos": True,
            "return_token_ids": True, "stream_options": {"include_usage": True}, **sampling}
    if chat:
        body["messages"] = [{"role": "user", "content": "A story about a cat"}]
    else:
        body["prompt"] = "In a small town there was a little girl named Lily. Request 1."
    full, usage = pieces(stream(server, path, body), chat)
    ids = [t for p, _ in full for t in p]
    assert len(ids) == 40 and usage["completion_tokens"] == 40
    # Cut after every delta (also after one whose text the detokenizer still held back, such
    # as a newline that comes out with the next token): the rest continues the text exactly.
    for cut in range(1, len(full)):
        k = sum(len(p) for p, _ in full[:cut])
        sent_text = "".join(t for _, t in full[:cut])
        rest, rest_usage = pieces(stream(server, path, {**body, "resume_token_ids": ids[:k]}),
                                  chat)
        assert [t for p, _ in rest for t in p] == ids[k:], cut
        assert sent_text + "".join(t for _, t in rest) == "".join(t for _, t in full), cut
        # The continuation's usage: its prompt holds the resumed tokens; it made the rest.
        assert rest_usage["prompt_tokens"] == usage["prompt_tokens"] + k
        assert rest_usage["completion_tokens"] == 40 - k


def test_return_token_ids_is_off_by_default(server):
    events = stream(server, "/v1/completions",
                    {"model": MODEL_NAME, "prompt": "The cat", "max_tokens": 4, "stream": True})
    assert all("token_ids" not in c for e in events for c in e["choices"])


@pytest.mark.parametrize("extra, needle", [
    ({"resume_token_ids": [1, 2], "n": 2}, "n = 1"),
    ({"resume_token_ids": [1, 2, 3, 4], "max_tokens": 4}, "max_tokens"),
    ({"resume_token_ids": []}, "non-empty"),
    ({"resume_token_ids": [-1]}, "token ids"),
    ({"resume_token_ids": "12"}, "array"),
    ({"resume_token_ids": [1], "echo": True}, "echo"),
    ({"resume_token_ids": [1], "prompt": ["a", "b"]}, "one prompt"),
])
def test_resume_token_ids_errors(server, extra, needle):
    body = {"model": MODEL_NAME, "prompt": "The cat", "max_tokens": 8, **extra}
    status, _, err = server.request("POST", "/v1/completions", body)
    assert status == 400, err
    assert err["error"]["param"] == "resume_token_ids" and needle in err["error"]["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_resumed_tokens_that_complete_a_stop_string_are_a_400(server, stream):
    """Checked before a stream's head goes out: a 400, not a 200 with an error event."""
    status, _, tok = server.request("POST", "/tokenize",
                                    {"prompt": " the end", "add_special_tokens": False})
    assert status == 200, tok
    body = {"model": MODEL_NAME, "prompt": "The cat", "max_tokens": 8, "stream": stream,
            "stop": ["end"], "resume_token_ids": tok["tokens"]}
    status, _, err = server.request("POST", "/v1/completions", body)
    assert status == 400, err
    assert "stop string" in err["error"]["message"]


def with_input(chat, message, prompt, **fields):
    """(path, body) of a chat request with one user `message` or a completion of `prompt`."""
    body = {"model": MODEL_NAME, **fields}
    if chat:
        return "/v1/chat/completions", {**body, "messages": [{"role": "user",
                                                             "content": message}]}
    return "/v1/completions", {**body, "prompt": prompt}


def resume_after_every_delta(server, path, body, chat, full, usage):
    """Resumes the stream of `body` (its deltas `full` and usage, from pieces()) after each of
    its deltas: the continuation brings exactly the remaining token ids, the text sent before
    the cut plus the continuation's is the whole text, and its usage counts the rest."""
    ids = [t for p, _ in full for t in p]
    text = "".join(t for _, t in full)
    for cut in range(1, len(full)):
        k = sum(len(p) for p, _ in full[:cut])
        rest, rest_usage = pieces(stream(server, path, {**body, "resume_token_ids": ids[:k]}),
                                  chat)
        assert [t for p, _ in rest for t in p] == ids[k:], cut
        assert "".join(t for _, t in full[:cut]) + "".join(t for _, t in rest) == text, cut
        assert rest_usage["completion_tokens"] == usage["completion_tokens"] - k


PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 16},
                         "age": {"type": "integer"},
                         "pets": {"type": "array", "items": {"type": "string", "maxLength": 8}}},
          "required": ["name", "age", "pets"]}
PERSON_FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON},
                 "complete_within_max_tokens": True}


@pytest.mark.parametrize("chat", [False, True])
def test_resume_replays_the_output_constraint(server, chat):
    """A structured-output stream resumed after any delta goes on exactly: the replica replays
    the resumed tokens through the constraint, and the length-aware limit (max_tokens tight
    enough to steer the end) counts from the original start, not from the cut."""
    path, body = with_input(chat, "A person as JSON", "Lily wrote down her friend:",
                            max_tokens=40, stream=True, temperature=1.0, seed=11,
                            return_token_ids=True, stream_options={"include_usage": True},
                            response_format=PERSON_FORMAT)
    full, usage = pieces(stream(server, path, body), chat)
    text = "".join(t for _, t in full)
    doc = json.loads(text)  # complete within max_tokens
    assert set(doc) >= {"name", "age", "pets"}, text
    resume_after_every_delta(server, path, body, chat, full, usage)


def test_resume_outside_the_constraint_is_a_400(server):
    status, _, tok = server.request("POST", "/tokenize", {"model": MODEL_NAME, "prompt": "Lily",
                                                      "add_special_tokens": False})
    assert status == 200, tok
    body = {"model": MODEL_NAME, "prompt": "A person:", "max_tokens": 40,
            "response_format": PERSON_FORMAT, "resume_token_ids": tok["tokens"]}
    status, _, err = server.request("POST", "/v1/completions", body)
    assert status == 400, err
    assert "output constraint" in err["error"]["message"], err


@pytest.mark.parametrize("chat", [False, True])
def test_resume_keeps_stop_strings_and_penalties(server, chat):
    """Stop strings and presence / frequency penalties survive a resume after any delta: the
    replica replays the resumed tokens' text through the stop strings (text the original still
    held back, a possible start of a stop string, comes out or is dropped as it would have
    been) and counts them as output for the penalties."""
    path, body = with_input(chat, "A story about a dog",
                            "Once upon a time there was a dog named Max.", max_tokens=48,
                            stream=True, temperature=1.0, seed=21, presence_penalty=0.8,
                            frequency_penalty=0.6, return_token_ids=True,
                            stream_options={"include_usage": True})
    free, _ = pieces(stream(server, path, body), chat)
    free_text = "".join(t for _, t in free)
    # A stop string that completes two thirds in, and one that never completes but whose
    # start (a space) is held back again and again.
    at = free_text.index(" ", 2 * len(free_text) // 3)
    body["stop"] = [free_text[at:at + 4], " qqqq"]
    full, usage = pieces(stream(server, path, body), chat)
    text = "".join(t for _, t in full)
    assert text == free_text[:at], (text, free_text)
    assert sum(1 for p, t in full if p and not t) >= 1  # some deltas held their text back
    resume_after_every_delta(server, path, body, chat, full, usage)


def chat_summary(events):
    """(content, reasoning, {call index: [ids, name, arguments]}, finish_reason) of a chat
    stream's events."""
    content, reasoning, calls, finish = "", "", {}, None
    for e in events:
        for c in e["choices"]:
            d = c["delta"]
            content += d.get("content") or ""
            reasoning += d.get("reasoning_content") or ""
            for t in d.get("tool_calls") or []:
                entry = calls.setdefault(t["index"], [[], "", ""])
                if t.get("id"):
                    entry[0].append(t["id"])
                entry[1] += t.get("function", {}).get("name") or ""
                entry[2] += t.get("function", {}).get("arguments") or ""
            finish = c.get("finish_reason") or finish
    return content, reasoning, calls, finish


def test_resume_goes_on_with_a_tool_call(templated_server):
    """On the Qwen3 template (hermes tool calls): a stream resumed after any delta continues the
    tool call the original was writing (the replica runs the resumed tokens' text through its
    call parser without sending it), so the cut stream and the continuation together say what
    the original said, the call with one id."""
    body = {"model": MODEL_NAME, "max_tokens": 96, "stream": True, "temperature": 1.0,
            "seed": 5, "return_token_ids": True, "tool_choice": "required",
            "parallel_tool_calls": False, "chat_template_kwargs": {"enable_thinking": False},
            "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
            "tools": [{"type": "function", "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "required": ["city"],
                               "properties": {"city": {"type": "string", "maxLength": 12}}}}}]}
    events = stream(templated_server, "/v1/chat/completions", body)
    want = chat_summary(events)
    assert want[2][0][1] == "get_weather" and want[3] == "tool_calls", want
    ids = []
    cuts = []
    for i, e in enumerate(events):
        for c in e["choices"]:
            if c.get("token_ids"):
                ids += c["token_ids"]
                cuts.append((i + 1, len(ids)))
    assert len(cuts) > 4
    for upto, k in cuts[:-1]:
        rest = stream(templated_server, "/v1/chat/completions",
                      {**body, "resume_token_ids": ids[:k]})
        got = chat_summary(events[:upto] + [e for e in rest if "role" not in
                                            (e["choices"][0]["delta"] if e["choices"] else {})])
        assert got[:2] == want[:2], k
        assert {i: (len(c[0]), c[1], c[2]) for i, c in got[2].items()} == \
            {i: (1, c[1], c[2]) for i, c in want[2].items()}, k
        assert got[3] == want[3], k
