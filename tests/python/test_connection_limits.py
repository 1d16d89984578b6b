"""Connection limits of `tachyon serve` (docs/server.md, "Connection limits"): connections that
never finish a request header are closed after --header-timeout, new connections beyond
--max-connections are refused with a 503 while open ones go on, oversized headers get 431, and
every rejection is counted in /metrics (tachyon_http_rejections_total{reason=...})."""

import json
import resource
import selectors
import socket
import time

import pytest

from conftest import API_KEY, MODEL_NAME, Server

HALF_HEADER = b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: applic"


def rejections(server, reason):
    return server.metrics()[f'tachyon_http_rejections_total{{reason="{reason}"}}']


def connection_budget(wanted):
    """Raises the soft fd limit towards the hard one (the server started afterwards inherits it)
    and returns how many sockets this process and the server can each afford, at most `wanted`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted + 256 if hard == resource.RLIM_INFINITY else min(hard, wanted + 256)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return min(wanted, soft - 256)


def open_half_headers(port, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(HALF_HEADER)
        socks.append(s)
    return socks


def read_all_until_closed(socks, timeout):
    """Reads every socket until the server closes it or `timeout` s pass; returns the bytes each
    received, and None for those still open at the end."""
    sel = selectors.DefaultSelector()
    got = {}
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        got[s] = b""
    open_ = set(socks)
    deadline = time.time() + timeout
    while open_ and time.time() < deadline:
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            try:
                data = s.recv(65536)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                data = b""
            if data:
                got[s] += data
            else:
                sel.unregister(s)
                open_.discard(s)
    sel.close()
    return [None if s in open_ else got[s] for s in socks]


def open_connections(port):
    """The tachyon_http_connections_open gauge, read on a connection of its own that is closed as
    soon as the answer is in (urllib may hold its socket open for a while, and the server keeps a
    finished connection until the client closes it or 2 s pass)."""
    text = raw_request(port, path=b"/metrics").decode()
    for line in text.splitlines():
        if line.startswith("tachyon_http_connections_open "):
            return int(float(line.split()[1]))
    raise AssertionError(text)


def completion(server):
    return server.request("POST", "/v1/completions",
                          {"model": MODEL_NAME, "prompt": "Once", "max_tokens": 4})


def raw_request(port, extra_headers=b"", path=b"/health"):
    """Sends one GET with `extra_headers` on a fresh connection; returns everything the server
    sent until it closed the connection (or 10 s passed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + extra_headers +
                  b"Connection: close\r\n\r\n")
        out = b""
        while True:
            try:
                data = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not data:
                break
            out += data
        return out


def test_half_header_flood_is_closed_after_the_header_timeout(tmp_path):
    n = connection_budget(3000)
    if n < 200:
        pytest.skip(f"the fd limit allows only {n} test connections")
    server = Server(tmp_path, ["--header-timeout", "3", "--max-connections", str(n + 100)])
    try:
        socks = open_half_headers(server.port, n)
        opened = time.time()
        m = server.metrics()
        # All of them are open at once (plus the /metrics connection), none refused.
        assert m["tachyon_http_connections_open"] >= n + 1 - m[
            'tachyon_http_rejections_total{reason="header_timeout"}']
        assert m['tachyon_http_rejections_total{reason="max_connections"}'] == 0
        # A normal request is served meanwhile.
        status, _, body = completion(server)
        assert status == 200, body
        assert body["usage"]["completion_tokens"] == 4

        answers = read_all_until_closed(socks, timeout=30)
        closed_after = time.time() - opened
        still_open = sum(a is None for a in answers)
        got_408 = sum(a is not None and a.startswith(b"HTTP/1.1 408") for a in answers)
        print(f"{n} half-header connections: {n - still_open} closed by the server, {got_408} "
              f"with a 408, all within {closed_after:.1f} s of opening (--header-timeout 3)")
        assert still_open == 0
        assert got_408 == n
        assert rejections(server, "header_timeout") == n
        # Each closed for good: only the connection asking remains.
        # (A poll may still see the previous poll's connection: the close reaches the server
        # asynchronously.)
        deadline = time.time() + 30
        while (still := open_connections(server.port)) != 1 and time.time() < deadline:
            time.sleep(0.2)
        assert still == 1
        for s in socks:
            s.close()
    finally:
        assert server.stop() == 0


def test_connections_beyond_the_limit_are_refused_and_open_ones_go_on(tmp_path):
    limit = 64
    server = Server(tmp_path, ["--max-connections", str(limit)])
    try:
        # One kept-alive connection that has been served, then limit - 1 half headers: the
        # server accepts in order, so every connection after these is over the limit.
        keep = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        keep.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert keep.recv(65536).startswith(b"HTTP/1.1 200")
        half = open_half_headers(server.port, limit - 1)
        extra = [socket.create_connection(("127.0.0.1", server.port), timeout=30)
                 for _ in range(10)]
        answers = read_all_until_closed(extra, timeout=30)
        refused = sum(a is not None and a.startswith(b"HTTP/1.1 503") for a in answers)
        print(f"limit {limit}: {limit} open, {len(extra)} more tried, {refused} refused (503)")
        assert refused == len(extra), answers

        # The open connection is still served, streaming included.
        body = json.dumps({"model": MODEL_NAME, "prompt": "Once", "max_tokens": 8,
                           "stream": True}).encode()
        keep.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nAuthorization: Bearer " + API_KEY.encode() +
                     b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        stream = b""
        keep.settimeout(30)
        while b"0\r\n\r\n" not in stream:
            data = keep.recv(65536)
            assert data, stream
            stream += data
        assert stream.startswith(b"HTTP/1.1 200"), stream
        assert b"data: [DONE]" in stream, stream

        # Freed slots are given to new clients.
        for s in half:
            s.close()
        deadline = time.time() + 30
        status = None
        while time.time() < deadline:
            try:
                status = completion(server)[0]
            except OSError:  # refused while the server has not seen the closes yet
                status = None
            if status == 200:
                break
            time.sleep(0.2)
        assert status == 200
        assert rejections(server, "max_connections") >= len(extra)
        keep.close()
    finally:
        assert server.stop() == 0


def test_header_limits_and_keep_alive_and_body_timeouts(tmp_path):
    server = Server(tmp_path, ["--max-header-bytes", "4096", "--max-headers", "20",
                               "--keep-alive-timeout", "1", "--body-timeout", "1"])
    try:
        port = server.port
        assert raw_request(port, b"X-Pad: " + b"a" * 2000 + b"\r\n").startswith(b"HTTP/1.1 200")
        big = raw_request(port, b"X-Pad: " + b"a" * 6000 + b"\r\n")
        assert big.startswith(b"HTTP/1.1 431"), big
        assert b"4096 bytes" in big
        fields = lambda n: b"".join(b"X-F%d: v\r\n" % i for i in range(n))  # noqa: E731
        assert raw_request(port, fields(10)).startswith(b"HTTP/1.1 200")
        many = raw_request(port, fields(30))  # + Host and Connection
        assert many.startswith(b"HTTP/1.1 431"), many
        assert b"32 header fields" in many

        # Kept alive after an answer, then idle: closed without a response.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            (answer,) = read_all_until_closed([s], timeout=20)
        assert answer is not None, "the idle keep-alive connection was not closed"
        assert answer.startswith(b"HTTP/1.1 200") and answer.count(b"HTTP/1.1") == 1, answer

        # A body that stops half-way: 408 after --body-timeout.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                      b"application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\": ")
            (answer,) = read_all_until_closed([s], timeout=20)
        assert answer is not None and answer.startswith(b"HTTP/1.1 408"), answer

        assert rejections(server, "header_too_large") == 1
        assert rejections(server, "too_many_headers") == 1
        assert rejections(server, "idle_timeout") == 1
        assert rejections(server, "body_timeout") == 1
        assert rejections(server, "header_timeout") == 0
    finally:
        assert server.stop() == 0
