"""Concurrency, disconnects, overload and graceful shutdown of a real tachyon serve."""

import http.client
import json
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from conftest import MODEL_NAME, Server


def stream_request_bytes(server, body):
    payload = json.dumps(body).encode()
    return (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {server.api_key}\r\nContent-Length: {len(payload)}\r\n\r\n"
            ).encode() + payload


def wait_for(pred, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def test_64_concurrent_streams(server, client):
    def one(i):
        text, finish = "", None
        for chunk in client.completions.create(model=MODEL_NAME, prompt="Once upon a time",
                                               max_tokens=32, temperature=0.8, seed=i,
                                               stream=True):
            for c in chunk.choices:
                text += c.text
                finish = c.finish_reason or finish
        return text, finish

    with ThreadPoolExecutor(64) as pool:
        results = list(pool.map(one, range(64)))
    assert all(finish in ("length", "stop") for _, finish in results)
    assert all(text for text, _ in results)
    # Same seed, same text, whatever else ran beside it.
    alone = one(5)
    assert alone == results[5]
    assert wait_for(lambda: server.metrics()["tachyon_num_requests_running"] == 0)


def test_disconnect_mid_stream_frees_kv_blocks(server):
    before = server.metrics().get(
        'tachyon_http_requests_total{endpoint="/v1/completions",status="499"}', 0)
    for _ in range(4):
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(stream_request_bytes(server, {
            "model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 480,
            "ignore_eos": True, "stream": True}))
        got = b""
        while b'"text"' not in got:
            got += s.recv(4096)
        s.close()
    assert wait_for(lambda: server.metrics()["tachyon_kv_cache_blocks_used"] == 0)
    m = server.metrics()
    assert m["tachyon_num_requests_running"] == 0
    aborted = m.get('tachyon_http_requests_total{endpoint="/v1/completions",status="499"}', 0)
    assert aborted > before  # at least one was still generating when its client left


def test_queue_full_is_429_with_retry_after(tmp_path):
    s = Server(tmp_path, ["--max-num-seqs", "1", "--max-queue", "1"], api_key=None)
    try:
        # Admission counts sequences: one long request holds one, so n = 2 does not fit
        # (n = 16 can never fit: 400, not a 429 that no retry could cure).
        conn = socket.create_connection(("127.0.0.1", s.port))
        conn.sendall(stream_request_bytes(s, {"prompt": "Once", "max_tokens": 480,
                                              "ignore_eos": True, "stream": True}).replace(
            b"Authorization: Bearer None\r\n", b""))
        got = b""
        while b'"text"' not in got:
            got += conn.recv(4096)
        status, headers, body = s.request("POST", "/v1/completions",
                                          {"prompt": "x", "max_tokens": 4, "n": 2})
        assert status == 429, body
        assert int(headers["Retry-After"]) >= 1
        assert body["error"]["message"]
        status, _, body = s.request("POST", "/v1/completions",
                                    {"prompt": "x", "max_tokens": 4, "n": 16})
        assert status == 400 and body["error"]["param"] == "n", body
        conn.close()
        assert wait_for(lambda: s.metrics()["tachyon_kv_cache_blocks_used"] == 0)
        ok = s.client().completions.create(model=MODEL_NAME, prompt="x", max_tokens=4, n=2)
        assert len(ok.choices) == 2
    finally:
        assert s.stop() == 0


def test_sigterm_lets_in_flight_requests_finish(tmp_path):
    s = Server(tmp_path, ["--shutdown-timeout", "30"], api_key=None)
    results = {}
    streaming = threading.Event()

    def run():
        text, finish = "", None
        for chunk in s.client().completions.create(model=MODEL_NAME, prompt="Once",
                                                   max_tokens=400, stream=True,
                                                   extra_body={"ignore_eos": True}):
            streaming.set()
            for c in chunk.choices:
                text += c.text
                finish = c.finish_reason or finish
        results["finish"] = finish

    t = threading.Thread(target=run)
    t.start()
    # SIGTERM as soon as the first chunk arrives, while the other ~400 tokens are still to come
    # (stories260K decodes thousands of tokens per second: polling /metrics for a running
    # request could miss it).
    assert streaming.wait(20)
    s.proc.send_signal(signal.SIGTERM)
    t.join(60)
    assert results.get("finish") == "length"
    assert s.proc.wait(30) == 0
    log = s.log_text()
    assert "SIGTERM" in log and "stopped" in log
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=2)
    s.stop()


def test_sigterm_aborts_what_outlives_the_timeout(tmp_path):
    s = Server(tmp_path, ["--shutdown-timeout", "0", "--max-num-seqs", "1"], api_key=None)
    conn = socket.create_connection(("127.0.0.1", s.port))
    conn.sendall(stream_request_bytes(s, {"prompt": "Once", "max_tokens": 480, "n": 2,
                                          "ignore_eos": True, "stream": True}).replace(
        b"Authorization: Bearer None\r\n", b""))
    got = b""
    while b'"text"' not in got:
        got += conn.recv(4096)
    s.proc.send_signal(signal.SIGINT)
    conn.settimeout(20)
    while True:
        data = conn.recv(65536)
        if not data:
            break
        got += data
    assert b'"finish_reason":"abort"' in got
    assert b"data: [DONE]" in got
    assert s.proc.wait(30) == 0
    s.stop()


def test_500_concurrent_streams_on_a_few_threads(server):
    """500 streaming connections open at once; the server's thread count stays small."""
    import asyncio

    n_conns = 500

    def thread_count():
        with open(f"/proc/{server.proc.pid}/status") as f:
            return int(next(line for line in f if line.startswith("Threads:")).split()[1])

    async def one(i, opened, release):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        opened.append(1)
        await release.wait()
        writer.write(stream_request_bytes(server, {
            "model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 16,
            "temperature": 0.7, "seed": i, "stream": True}))
        await writer.drain()
        data = b""
        while b"data: [DONE]" not in data:
            chunk = await reader.read(65536)
            if not chunk:
                break
            data += chunk
        writer.close()
        return data

    async def main():
        opened, release = [], asyncio.Event()
        tasks = [asyncio.create_task(one(i, opened, release)) for i in range(n_conns)]
        while len(opened) < n_conns:
            await asyncio.sleep(0.01)
        threads_with_all_open = thread_count()
        release.set()
        results = await asyncio.wait_for(asyncio.gather(*tasks), 120)
        return threads_with_all_open, results

    threads, results = asyncio.run(main())
    assert sum(b"data: [DONE]" in r and b'"finish_reason":"length"' in r for r in results) == n_conns
    assert threads < 16, f"{threads} threads for {n_conns} connections"
    assert wait_for(lambda: server.metrics()["tachyon_kv_cache_blocks_used"] == 0)
