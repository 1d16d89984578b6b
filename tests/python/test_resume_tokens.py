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
    path = "/v1/chat/completions" if chat else "/v1/completions"
    body = {"model": MODEL_NAME, "max_tokens": 40, "stream": True, "temperature": 1.0,
            "seed": 11, "return_token_ids": True, "stream_options": {"include_usage": True},
            "response_format": PERSON_FORMAT}
    if chat:
        body["messages"] = [{"role": "user", "content": "A person as JSON"}]
    else:
        body["prompt"] = "Lily wrote down her friend:"
    full, usage = pieces(stream(server, path, body), chat)
    ids = [t for p, _ in full for t in p]
    text = "".join(t for _, t in full)
    doc = json.loads(text)  # complete within max_tokens
    assert set(doc) >= {"name", "age", "pets"}, text
    for cut in range(1, len(full)):
        k = sum(len(p) for p, _ in full[:cut])
        rest, rest_usage = pieces(stream(server, path, {**body, "resume_token_ids": ids[:k]}),
                                  chat)
        assert [t for p, _ in rest for t in p] == ids[k:], cut
        assert "".join(t for _, t in full[:cut]) + "".join(t for _, t in rest) == text, cut
        assert rest_usage["completion_tokens"] == usage["completion_tokens"] - k


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
    path = "/v1/chat/completions" if chat else "/v1/completions"
    body = {"model": MODEL_NAME, "max_tokens": 48, "stream": True, "temperature": 1.0,
            "seed": 21, "presence_penalty": 0.8, "frequency_penalty": 0.6,
            "return_token_ids": True, "stream_options": {"include_usage": True}}
    if chat:
        body["messages"] = [{"role": "user", "content": "A story about a dog"}]
    else:
        body["prompt"] = "Once upon a time there was a dog named Max."
    free, _ = pieces(stream(server, path, body), chat)
    free_text = "".join(t for _, t in free)
    # A stop string that completes two thirds in, and one that never completes but whose
    # start (a space) is held back again and again.
    at = free_text.index(" ", 2 * len(free_text) // 3)
    body["stop"] = [free_text[at:at + 4], " qqqq"]
    full, usage = pieces(stream(server, path, body), chat)
    ids = [t for p, _ in full for t in p]
    text = "".join(t for _, t in full)
    assert text == free_text[:at], (text, free_text)
    assert sum(1 for p, t in full if p and not t) >= 1  # some deltas held their text back
    for cut in range(1, len(full)):
        k = sum(len(p) for p, _ in full[:cut])
        rest, rest_usage = pieces(stream(server, path, {**body, "resume_token_ids": ids[:k]}),
                                  chat)
        assert [t for p, _ in rest for t in p] == ids[k:], cut
        assert "".join(t for _, t in full[:cut]) + "".join(t for _, t in rest) == text, cut
        assert rest_usage["completion_tokens"] == usage["completion_tokens"] - k
