"""Protocol details of issue #7 not covered elsewhere: prefix-cache usage, max_completion_tokens,
streamed chat logprobs, keep-alive, CORS, 503 + Retry-After while draining, a model whose own
GGUF carries a chat template."""

import http.client
import json
import signal
import threading
import time

import pytest

from conftest import MODEL_NAME, Server

LONG_PROMPT = ("Once upon a time, there was a little girl named Lily. She loved to play outside "
               "in the sun with her dog. One day, she saw a big red ball in the park and ran to "
               "get it. Her mom said to be careful.")


def test_cached_prompt_tokens_in_usage(client):
    first = client.completions.create(model=MODEL_NAME, prompt=LONG_PROMPT + " A",
                                      max_tokens=2, temperature=0)
    again = client.completions.create(model=MODEL_NAME, prompt=LONG_PROMPT + " B",
                                      max_tokens=2, temperature=0)
    n = first.usage.prompt_tokens
    assert n >= 40
    # Every full 16-token block of the shared prefix comes from the prefix cache.
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert cached >= (n - 3) // 16 * 16 - 16 and cached > 0, (n, cached)
    assert cached < again.usage.prompt_tokens
    # The same through a stream with include_usage, and for chat.
    chunks = list(client.completions.create(model=MODEL_NAME, prompt=LONG_PROMPT + " C",
                                            max_tokens=2, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == cached
    messages = [{"role": "user", "content": LONG_PROMPT}]
    client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=1)
    chat = client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=1)
    assert chat.usage.prompt_tokens_details.cached_tokens >= 32


def test_max_completion_tokens_wins_over_max_tokens(client):
    messages = [{"role": "user", "content": "Tell me a story."}]
    r = client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=20,
                                       max_completion_tokens=3, extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 3
    assert r.choices[0].finish_reason == "length"
    r = client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=5,
                                       extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 5


def test_chat_streamed_logprobs_equal_non_streamed(client):
    kw = dict(model=MODEL_NAME, messages=[{"role": "user", "content": "Hi"}], max_tokens=8,
              temperature=0, logprobs=True, top_logprobs=3, extra_body={"ignore_eos": True})
    plain = client.chat.completions.create(**kw).choices[0].logprobs.content
    streamed = []
    for chunk in client.chat.completions.create(stream=True, **kw):
        for c in chunk.choices:
            if c.logprobs and c.logprobs.content:
                streamed += c.logprobs.content
    assert [t.token for t in streamed] == [t.token for t in plain]
    assert [t.logprob for t in streamed] == pytest.approx([t.logprob for t in plain], abs=1e-5)
    assert all(len(t.top_logprobs) == 3 for t in streamed)
    # The chosen greedy token is the best of its top list.
    for t in plain:
        assert t.logprob == pytest.approx(max(x.logprob for x in t.top_logprobs), abs=1e-5)


def test_keep_alive_reuses_the_connection(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {server.api_key}"}
    sockets = []
    for i in range(3):
        body = json.dumps({"model": MODEL_NAME, "prompt": "Once", "max_tokens": 2,
                           "stream": i == 1})
        conn.request("POST", "/v1/completions", body=body, headers=headers)
        r = conn.getresponse()
        payload = r.read()
        assert r.status == 200, payload
        assert (r.getheader("Connection") or "").lower() != "close"
        if i == 1:
            assert r.getheader("Transfer-Encoding") == "chunked"
            assert payload.rstrip().endswith(b"data: [DONE]")
        sockets.append(conn.sock)
    assert sockets[0] is not None and all(s is sockets[0] for s in sockets)
    conn.close()


def test_cors_option(tmp_path):
    s = Server(tmp_path, ["--cors"], api_key="k")
    try:
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        conn.request("OPTIONS", "/v1/chat/completions",
                     headers={"Origin": "http://example.com",
                              "Access-Control-Request-Method": "POST",
                              "Access-Control-Request-Headers": "authorization, content-type"})
        r = conn.getresponse()
        r.read()
        assert r.status in (200, 204)
        assert r.getheader("Access-Control-Allow-Origin") == "*"
        assert "POST" in r.getheader("Access-Control-Allow-Methods")
        assert "authorization" in r.getheader("Access-Control-Allow-Headers").lower()
        status, headers, _ = s.request("GET", "/v1/models", headers={"Origin": "http://x"})
        assert status == 200 and headers.get("Access-Control-Allow-Origin") == "*"
        # Errors carry it too, so a browser can read them.
        status, headers, _ = s.request("GET", "/v1/models", headers={"Authorization": "Bearer no"})
        assert status == 401 and headers.get("Access-Control-Allow-Origin") == "*"
    finally:
        assert s.stop() == 0


def test_no_cors_headers_by_default(server):
    status, headers, _ = server.request("GET", "/v1/models", headers={"Origin": "http://x"})
    assert status == 200 and "Access-Control-Allow-Origin" not in headers


def test_draining_answers_503_with_retry_after(tmp_path):
    s = Server(tmp_path, ["--shutdown-timeout", "30"], api_key=None)
    idle = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    idle.request("GET", "/health")
    idle.getresponse().read()  # an open keep-alive connection, idle during the SIGTERM
    done = {}
    streaming = threading.Event()

    def long_stream():
        text, tokens = "", 0
        for chunk in s.client().completions.create(model=MODEL_NAME, prompt="Once",
                                                   max_tokens=300, stream=True,
                                                   stream_options={"include_usage": True},
                                                   extra_body={"ignore_eos": True}):
            text += "".join(c.text for c in chunk.choices)
            streaming.set()
            if chunk.usage:
                tokens = chunk.usage.completion_tokens
        done["text"], done["tokens"] = text, tokens

    t = threading.Thread(target=long_stream)
    t.start()
    # SIGTERM as soon as the stream has sent output, the rest of its 300 tokens still to come.
    assert streaming.wait(20)
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    idle.request("POST", "/v1/completions", body=json.dumps({"prompt": "x", "max_tokens": 1}),
                 headers={"Content-Type": "application/json"})
    r = idle.getresponse()
    body = json.loads(r.read())
    assert r.status == 503, body
    assert int(r.getheader("Retry-After")) >= 1
    assert body["error"]["message"] and "type" in body["error"]
    t.join(60)
    assert done.get("text") and done["tokens"] == 300  # the stream in flight finished in full
    assert s.proc.wait(30) == 0
    s.stop()


def test_model_with_its_own_chat_template(templated_server):
    s = templated_server
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    status, _, tok = s.request("POST", "/tokenize", {"messages": messages})
    assert status == 200
    status, _, text = s.request("POST", "/detokenize", {"tokens": tok["tokens"]})
    assert text["prompt"] == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi"
                              "<|im_end|>\n<|im_start|>assistant\n")
    client = s.client()
    r = client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=4,
                                       temperature=0)
    assert r.usage.prompt_tokens == tok["count"]
    assert r.choices[0].message.role == "assistant"
    # chat_template_kwargs reach the template (Qwen3's enable_thinking=false adds an empty
    # think block), and tools are rendered into the prompt.
    status, _, no_think = s.request("POST", "/tokenize", {
        "messages": messages, "chat_template_kwargs": {"enable_thinking": False}})
    status, _, text = s.request("POST", "/detokenize", {"tokens": no_think["tokens"]})
    assert text["prompt"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    with_tools = client.chat.completions.create(model=MODEL_NAME, messages=messages, tools=tools,
                                                max_tokens=1)
    assert with_tools.usage.prompt_tokens > r.usage.prompt_tokens + 30
    status, _, tok = s.request("POST", "/tokenize", {"messages": messages, "tools": tools})
    status, _, text = s.request("POST", "/detokenize", {"tokens": tok["tokens"]})
    assert '"name": "get_weather"' in text["prompt"] and "<tool_call>" in text["prompt"]



def test_timings_extension(server, client):
    status, _, body = server.request("POST", "/v1/completions", {
        "model": MODEL_NAME, "prompt": "Once", "max_tokens": 6, "ignore_eos": True})
    assert status == 200
    t = body["timings"]
    assert t["queue_ms"] >= 0 and 0 <= t["ttft_ms"] <= t["e2e_ms"]
    assert t["generation_ms"] >= 0 and t["output_tokens_per_second"] > 0
    # The openai client keeps unknown fields; the usage chunk of a stream carries them too.
    r = client.completions.create(model=MODEL_NAME, prompt="Once", max_tokens=3)
    assert r.model_extra["timings"]["e2e_ms"] > 0
    last = list(client.completions.create(model=MODEL_NAME, prompt="Once", max_tokens=3,
                                          stream=True, stream_options={"include_usage": True}))[-1]
    assert last.model_extra["timings"]["ttft_ms"] >= 0


def test_kv_cache_dtype_option(tmp_path):
    import subprocess
    from conftest import binary_path, model_path
    s = Server(tmp_path, ["--kv-cache-dtype", "f32"], api_key=None)
    try:
        r = s.client().completions.create(model=MODEL_NAME, prompt="Once", max_tokens=4)
        assert r.usage.completion_tokens >= 1
        assert "f32)" in s.log_text()
    finally:
        assert s.stop() == 0
    # stories260K's head_dim is 8: q8_0 rows need a multiple of 32, a clear startup error.
    p = subprocess.run([str(binary_path()), "serve", "-m", str(model_path()), "--port", "0",
                        "--kv-cache-dtype", "q8_0"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "kv-cache-dtype" in p.stderr and "q8_0" in p.stderr, p.stderr
    p = subprocess.run([str(binary_path()), "serve", "-m", str(model_path()),
                        "--kv-cache-dtype", "f8"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "f16, bf16, q8_0, q4_0, q4_1 or f32" in p.stderr
