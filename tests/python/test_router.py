"""`tachyon route` in front of real `tachyon serve` replicas (stories260K) on 127.0.0.1:
proxying (plain and streamed), prefix affinity vs round-robin, a replica killed mid-run, a
replica that never answers, the bounded queue (429) and no replica (503)."""

import http.client
import http.server
import json
import re
import signal
import socket
import socketserver
import subprocess
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import API_KEY, CHAT_TEMPLATE, MODEL_NAME, Server, binary_path, has_command, model_path

REPLICA_HEADER = "X-Tachyon-Replica"


class Router:
    """One `tachyon route` process on a free port over `replicas` (base URLs)."""

    def __init__(self, tmp_dir, replicas, extra_args=(), tokenizer=None,
                 chat_template=CHAT_TEMPLATE):
        """`tokenizer`: the model file the router tokenizes with (default stories260K);
        `chat_template`: its chat template's text, or None for the tokenizer's own."""
        if not has_command("route"):
            pytest.skip(f"{binary_path()} has no 'route' command")
        args = [str(binary_path()), "route", "--host", "127.0.0.1", "--port", "0",
                "--tokenizer", str(tokenizer or model_path()),
                "--probe-interval", "0.2", "--replica-api-key", API_KEY, *extra_args]
        if chat_template is not None:
            template = Path(tmp_dir) / "router_template.jinja"
            template.write_text(chat_template)
            args += ["--chat-template", str(template)]
        for url in replicas:
            args += ["--replica", url]
        self.log_path = Path(tmp_dir) / f"router-{time.monotonic_ns()}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        if "ready at http://" not in line:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"tachyon route did not start: {line!r}\n{self.log_text()}")
        port = int(line.split("ready at http://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        self.base = f"http://127.0.0.1:{port}"

    def log_text(self):
        self.log.flush()
        return self.log_path.read_text()

    def request(self, method, path, body=None, timeout=60):
        """Returns (status, headers, parsed JSON or text)."""
        data = json.dumps(body).encode() if body is not None else None
        h = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, hdrs, payload = r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            status, hdrs, payload = e.code, e.headers, e.read()
        text = payload.decode("utf-8")
        try:
            return status, hdrs, json.loads(text)
        except ValueError:
            return status, hdrs, text

    def metrics(self):
        _, _, text = self.request("GET", "/metrics")
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values

    def wait_metrics(self, pred, what, timeout=30):
        """Polls /metrics until pred(metrics) holds; returns those metrics."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = self.metrics()
            if pred(m):
                return m
            time.sleep(0.05)
        raise AssertionError(f"router: {what}\n{self.log_text()}")

    def wait_ready(self, n_up, timeout=30):
        """Waits until `n_up` replicas are up (by the router's probes)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            up = sum(v for k, v in self.metrics().items()
                     if k.startswith("tachyon_router_replica_up"))
            if up == n_up:
                return
            time.sleep(0.05)
        raise AssertionError(f"router did not see {n_up} replicas up\n{self.log_text()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def url_of(server):
    return f"http://127.0.0.1:{server.port}"


def completion(prefix_id, suffix, max_tokens=4):
    """A 70-odd-token prompt whose first blocks depend only on `prefix_id`."""
    words = ["Once upon a time", "In a small town", "One sunny morning"][prefix_id]
    prompt = (words + " there was a little girl named Lily who loved to play in the park "
              "with her friends and her dog. ") * 3 + suffix
    return {"model": MODEL_NAME, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    servers = [Server(tmp_path_factory.mktemp(f"replica{i}")) for i in range(3)]
    yield servers
    for s in servers:
        assert s.stop() == 0


@pytest.fixture(scope="module")
def kv_router(tmp_path_factory, replicas):
    r = Router(tmp_path_factory.mktemp("router"), [url_of(s) for s in replicas],
               ["--policy", "kv", "--seed", "1"])
    r.wait_ready(3)
    yield r
    assert r.stop() == 0, r.log_text()


def test_health_models_and_errors(kv_router):
    assert kv_router.request("GET", "/health")[0] == 200
    status, _, body = kv_router.request("GET", "/ready")
    assert (status, body["status"]) == (200, "ready")
    status, headers, body = kv_router.request("GET", "/v1/models")
    assert status == 200 and [m["id"] for m in body["data"]] == [MODEL_NAME]
    assert headers[REPLICA_HEADER].startswith("http://127.0.0.1:")
    status, _, body = kv_router.request("GET", "/v1/nothing")
    assert status == 404 and "Unknown path" in body["error"]["message"]
    status, headers, _ = kv_router.request("GET", "/v1/completions")
    assert status == 405 and headers["Allow"] == "POST"
    # The replica's own 400 comes through unchanged.
    status, _, body = kv_router.request("POST", "/v1/completions",
                                        {"prompt": "x", "max_tokens": -1})
    assert status == 400 and body["error"]["param"] == "max_tokens"


def test_proxies_plain_and_streamed_identically(kv_router, replicas):
    direct = replicas[0].client()
    routed = direct.with_options(base_url=kv_router.base + "/v1")
    args = dict(model=MODEL_NAME, prompt="Once upon a time", max_tokens=24, temperature=0)
    want = direct.completions.create(**args).choices[0].text
    assert routed.completions.create(**args).choices[0].text == want
    chunks = list(routed.completions.create(**args, stream=True))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == want
    chat = dict(model=MODEL_NAME, messages=[{"role": "user", "content": "Tell me a story"}],
                max_tokens=16, temperature=0)
    want_chat = direct.chat.completions.create(**chat).choices[0].message.content
    assert routed.chat.completions.create(**chat).choices[0].message.content == want_chat
    streamed = routed.chat.completions.create(**chat, stream=True,
                                              stream_options={"include_usage": True})
    text, usage = "", None
    for c in streamed:
        if c.choices and c.choices[0].delta.content:
            text += c.choices[0].delta.content
        if c.usage:
            usage = c.usage
    assert text == want_chat and usage.completion_tokens == 16
    # Every request has ended: no prompt work is left pending in the router's score.
    pending = {k: v for k, v in kv_router.metrics().items()
               if k.startswith("tachyon_router_replica_pending_prefill_tokens{")}
    assert len(pending) == 3 and not any(pending.values()), pending


def test_prefix_affinity_vs_round_robin(tmp_path, kv_router, replicas):
    # kv: the requests of each prefix, sent one after another, land on one replica, which
    # then reports the prefix as cached.
    def reported():
        return sum(v for k, v in kv_router.metrics().items()
                   if k.startswith("tachyon_router_reported_cached_tokens_total"))

    where, cached, before = {}, 0, reported()
    for round_ in range(3):
        for p in range(3):
            status, headers, body = kv_router.request("POST", "/v1/completions",
                                                      completion(p, f"Round {round_}."))
            assert status == 200, body
            where.setdefault(p, set()).add(headers[REPLICA_HEADER])
            cached += body["usage"]["prompt_tokens_details"]["cached_tokens"]
            if round_ > 0:
                assert body["usage"]["prompt_tokens_details"]["cached_tokens"] >= 48
    assert all(len(v) == 1 for v in where.values()), where
    assert reported() - before == cached  # what the replicas reported, counted per replica
    m = kv_router.metrics()
    assert sum(v for k, v in m.items()
               if k.startswith("tachyon_router_predicted_cached_tokens_total")) >= 6 * 48
    assert m["tachyon_router_prefix_index_blocks"] >= 3 * 4

    # round_robin: the same sequence cycles over the replicas whatever the prefix.
    rr = Router(tmp_path, [url_of(s) for s in replicas], ["--policy", "round_robin"])
    try:
        rr.wait_ready(3)
        seen = []
        for i in range(6):
            status, headers, _ = rr.request("POST", "/v1/completions", completion(0, f"RR {i}."))
            assert status == 200
            seen.append(headers[REPLICA_HEADER])
        assert len(set(seen[:3])) == 3 and seen[3:] == seen[:3]
    finally:
        assert rr.stop() == 0


EVENTS_MODE = 'tachyon_router_kv_index_mode{mode="events"}'
APPROX_MODE = 'tachyon_router_kv_index_mode{mode="approximate"}'


def test_kv_events_tell_the_router_what_replicas_cached(kv_router, replicas):
    """A prompt sent straight to one replica, not through the router, reaches the router's index
    through that replica's KV events: the router then sends the same prefix there, and predicts
    exactly the cached tokens the replica reports."""
    kv_router.wait_metrics(lambda m: m.get(EVENTS_MODE) == 3, "3 replicas' KV events in sync")
    urls = [url_of(s) for s in replicas]

    def total(m, name, url):
        return m.get(f'{name}{{replica="{url}"}}', 0)

    predicted = reported = 0
    for i in range(6):
        j = (2 * i + 1) % 3
        prompt = f"Event {i}: " + "Tom and his cat went up the big green hill to see the sun. " * 3
        applied = total(kv_router.metrics(), "tachyon_router_kv_events_applied_total", urls[j])
        status, _, body = replicas[j].request("POST", "/v1/completions", {
            "model": MODEL_NAME, "prompt": prompt, "max_tokens": 1, "temperature": 0})
        assert status == 200, body
        blocks = body["usage"]["prompt_tokens"] // 16
        assert blocks >= 3
        kv_router.wait_metrics(
            lambda m: total(m, "tachyon_router_kv_events_applied_total", urls[j]) >=
            applied + blocks, f"the events of {urls[j]}")
        before = kv_router.metrics()
        status, headers, body = kv_router.request("POST", "/v1/completions", {
            "model": MODEL_NAME, "prompt": prompt + " The end.", "max_tokens": 1,
            "temperature": 0})
        assert status == 200, body
        assert headers[REPLICA_HEADER] == urls[j], (i, headers[REPLICA_HEADER])
        cached = body["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert cached >= 16 * (blocks - 1)
        after = kv_router.metrics()
        predicted += (total(after, "tachyon_router_predicted_cached_tokens_total", urls[j]) -
                      total(before, "tachyon_router_predicted_cached_tokens_total", urls[j]))
        reported += cached
    # Never more than the replicas hold; at most one block per request less: the stored event
    # of a prompt's last full block can still be in flight when the routed request is placed
    # (the wait above counts every applied event, removals included). A router without the
    # replicas' events would predict none of these prefixes.
    assert reported - 16 * 6 <= predicted <= reported, (predicted, reported)


def test_kill_replica_mid_run_loses_no_request(tmp_path):
    servers = []
    for i in range(2):
        (tmp_path / f"r{i}").mkdir()
        servers.append(Server(tmp_path / f"r{i}"))
    # Round-robin and a slow probe: requests keep going to the killed replica until passive
    # detection takes it out, so some attempts must fail and be retried (or, for a stream that
    # had sent output, migrated).
    router = Router(tmp_path, [url_of(s) for s in servers],
                    ["--policy", "round_robin", "--probe-interval", "60"])
    victim = servers[1]
    try:
        router.wait_ready(2)
        done = []
        lock = threading.Lock()
        killed = threading.Event()

        def body_of(i):
            body = completion(i % 3, f"Request {i}.", max_tokens=32)
            body["ignore_eos"] = True
            if i % 2:  # half of them streamed: retried before output, migrated after
                body.update(stream=True, stream_options={"include_usage": True})
            return body

        def run(base, i):
            """(text, completion tokens) of request i sent to `base`."""
            body = body_of(i)
            if body.get("stream"):
                _, events, finished = read_stream(base, "/v1/completions", body)
                assert finished and not any("error" in e for e in events), events
                usage = [e["usage"] for e in events if e.get("usage")][-1]
                return stream_text(events, chat=False), usage["completion_tokens"]
            status, _, answer = (router if base == router.base else servers[0]).request(
                "POST", "/v1/completions", body)
            assert status == 200, answer
            return answer["choices"][0]["text"], answer["usage"]["completion_tokens"]

        def one(i):
            result = run(router.base, i)
            with lock:
                done.append(result)
                if len(done) == 10 and not killed.is_set():
                    victim.proc.kill()  # SIGKILL while the others are in flight
                    killed.set()
            return result

        with ThreadPoolExecutor(max_workers=24) as pool:
            results = list(pool.map(one, range(48)))
        assert killed.is_set()
        # Every request answered in full, with the text of a fault-free run (greedy).
        for i, (text, tokens) in enumerate(results):
            assert tokens == 32
            assert text == run(servers[0].base, i)[0], i
        m = router.metrics()
        victim_url = url_of(victim)
        failed = sum(v for k, v in m.items() if k.startswith("tachyon_router_requests_total")
                     and victim_url in k and "outcome=\"ok\"" not in k)
        # A failed attempt is retried (no output sent yet) or migrated (a stream that had output).
        assert failed >= 1
        assert m["tachyon_router_retries_total"] + m["tachyon_router_migrations_total"] >= 1
        assert m[f'tachyon_router_replica_up{{replica="{victim_url}"}}'] == 0
    finally:
        router.stop()
        for s in servers:
            s.stop()


def test_sigterm_drain_under_load_loses_no_request(tmp_path):
    """SIGTERM on a replica with streams in flight and no grace period: the router stops
    sending it requests (its events stream ends with the draining marker), and the streams it
    still ran end with the drain marker and are resumed on the other replica: every request
    answered in full with the text of a fault-free run, 0 errors."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    victim = Server(tmp_path / "a", ["--shutdown-timeout", "0"])
    healthy = Server(tmp_path / "b")
    router = Router(tmp_path, [url_of(victim), url_of(healthy)], ["--policy", "round_robin"])
    try:
        router.wait_ready(2)
        router.wait_metrics(lambda m: m.get(EVENTS_MODE) == 2, "both replicas' events")
        victim_url = url_of(victim)

        def body_of(i, stream):
            body = {"model": MODEL_NAME, "prompt": f"Story {i}: Once upon a time",
                    "max_tokens": 400, "temperature": 0, "ignore_eos": True}
            if stream:
                body.update(stream=True, stream_options={"include_usage": True})
            return body

        def run(base, i, stream):
            if stream:
                _, events, finished = read_stream(base, "/v1/completions", body_of(i, True))
                assert finished and not any("error" in e for e in events), events
                usage = [e["usage"] for e in events if e.get("usage")][-1]
                return stream_text(events, chat=False), usage["completion_tokens"]
            target = router if base == router.base else healthy
            status, _, answer = target.request("POST", "/v1/completions", body_of(i, False))
            assert status == 200, answer
            return answer["choices"][0]["text"], answer["usage"]["completion_tokens"]

        jobs = [(i, i % 4 != 3) for i in range(16)]  # 12 streamed, 4 not
        with ThreadPoolExecutor(max_workers=16) as pool:
            futures = [pool.submit(run, router.base, i, stream) for i, stream in jobs[:8]]
            router.wait_metrics(
                lambda m: m[f'tachyon_router_replica_in_flight{{replica="{victim_url}"}}'] >= 2,
                "requests in flight on the victim")
            victim.proc.send_signal(signal.SIGTERM)
            futures += [pool.submit(run, router.base, i, stream) for i, stream in jobs[8:]]
            results = [f.result() for f in futures]
            # Fault-free references, on the healthy replica directly.
            want = list(pool.map(lambda job: run(healthy.base, *job)[0], jobs))
        assert victim.proc.wait(timeout=30) == 0
        for (i, _), (text, tokens), ref in zip(jobs, results, want):
            assert tokens == 400, i
            assert text == ref, i
        m = router.metrics()
        # What the victim still ran was resumed (a stream with output: migrated) or retried.
        assert m["tachyon_router_migrations_total"] + m["tachyon_router_retries_total"] >= 1
        assert m["tachyon_router_broken_streams_total"] == 0
        assert sum(v for k, v in m.items() if k.startswith("tachyon_router_rejected_total")) == 0
        stopped = sum(m.get(f'tachyon_router_requests_total{{replica="{victim_url}",'
                            f'outcome="{o}"}}', 0) for o in ("drained", "refused"))
        assert stopped >= 1
    finally:
        router.stop()
        victim.stop()
        healthy.stop()


class HangingReplica:
    """Answers GET /ready with 200 and never answers anything else: a replica that is up but
    stuck. With `refusal` (status, JSON body) it answers every POST with it at once instead."""

    def __init__(self, refusal=None):
        release = self.release = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/ready":
                    body = b'{"status":"ready"}'
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                else:
                    release.wait(60)

            def do_POST(self):
                if refusal is None:
                    release.wait(60)
                    return
                self.rfile.read(int(self.headers["Content-Length"]))
                body = json.dumps(refusal[1]).encode()
                self.send_response(refusal[0])
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        class Threaded(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.httpd = Threaded(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def test_replica_that_never_answers_times_out_and_is_retried(tmp_path):
    real = Server(tmp_path)
    stuck = HangingReplica()
    router = Router(tmp_path, [stuck.url, url_of(real)],
                    ["--policy", "round_robin", "--read-timeout", "0.5"])
    try:
        router.wait_ready(2)
        for i in range(4):
            status, headers, body = router.request("POST", "/v1/completions",
                                                   completion(0, f"T{i}."))
            assert status == 200, body
            assert headers[REPLICA_HEADER] == url_of(real)
        m = router.metrics()
        assert m[f'tachyon_router_requests_total{{replica="{stuck.url}",outcome="timeout"}}'] >= 1
    finally:
        router.stop()
        stuck.close()
        real.stop()


def test_queue_bound_429_and_queue_timeout_503(tmp_path):
    stuck = HangingReplica()
    router = Router(tmp_path, [stuck.url],
                    ["--policy", "round_robin", "--max-in-flight", "1", "--max-queue", "1",
                     "--queue-timeout", "1", "--read-timeout", "30"])

    def wait_metric(name, value):
        deadline = time.time() + 30
        while router.metrics().get(name) != value:
            assert time.time() < deadline, f"{name} never reached {value}"
            time.sleep(0.02)

    try:
        router.wait_ready(1)
        with ThreadPoolExecutor(max_workers=2) as pool:
            first = pool.submit(router.request, "POST", "/v1/completions", completion(0, "A"))
            wait_metric(f'tachyon_router_replica_in_flight{{replica="{stuck.url}"}}', 1)
            queued = pool.submit(router.request, "POST", "/v1/completions", completion(0, "B"))
            wait_metric("tachyon_router_queue_length", 1)
            status, headers, body = router.request("POST", "/v1/completions", completion(0, "C"))
            assert status == 429 and headers["Retry-After"] == "1", body
            assert body["error"]["code"] == "router_queue_full"
            status, headers, body = queued.result(timeout=30)
            assert status == 503 and headers["Retry-After"] == "1", body
            stuck.release.set()  # the stuck replica now closes the first request's connection
            first.result(timeout=60)
        m = router.metrics()
        assert m['tachyon_router_rejected_total{reason="queue_full"}'] == 1
        assert m['tachyon_router_rejected_total{reason="queue_timeout"}'] == 1
    finally:
        router.stop()
        stuck.close()


def test_no_replica_is_503_at_once(tmp_path):
    stuck = HangingReplica()
    url = stuck.url
    stuck.close()  # nothing listens there any more
    router = Router(tmp_path, [url], ["--policy", "round_robin"])
    try:
        status, _, body = router.request("GET", "/ready")
        assert status == 503
        status, headers, body = router.request("POST", "/v1/completions", completion(0, "x"))
        assert status == 503 and headers["Retry-After"] == "1", body
        assert router.metrics()['tachyon_router_rejected_total{reason="no_replica"}'] == 1
    finally:
        assert router.stop() == 0


def test_bad_flags(tmp_path):
    if not has_command("route"):
        pytest.skip("no route command")
    for args, needle in [([], "--replica"),
                         (["--replica", "ftp://x:1"], "http://HOST:PORT"),
                         (["--replica", "http://127.0.0.1:1"], "--tokenizer"),
                         (["--replica", "http://127.0.0.1:1", "--policy", "fast"], "--policy")]:
        out = subprocess.run([str(binary_path()), "route", *args], capture_output=True,
                             text=True, timeout=30)
        assert out.returncode == 2 and needle in out.stderr, (args, out.stderr)


class FlakyReplica:
    """Relays requests to a real replica but cuts a stream after `cut_after` events, then plays
    dead (/ready 503, connections closed unanswered) until revived: a replica that dies in the
    middle of a stream, at a known point. `cut_after` None: never cut; a stream's end (the last
    chunk, after its events) is then held back `linger` seconds. `rewrite`: applied to each
    event (bytes) before it is relayed."""

    def __init__(self, target, cut_after, linger=0.0, rewrite=None):
        outer = self
        self.dead = threading.Event()
        self.cut_after = cut_after

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                body = b'{"status":"ready"}'
                self.send_response(503 if outer.dead.is_set() else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if outer.dead.is_set():
                    self.close_connection = True
                    return
                upstream = http.client.HTTPConnection("127.0.0.1", target.port, timeout=60)
                upstream.request("POST", self.path, body, {
                    "Content-Type": "application/json",
                    "Authorization": self.headers.get("Authorization", "")})
                resp = upstream.getresponse()
                self.send_response(resp.status)
                self.send_header("Content-Type", resp.getheader("Content-Type"))
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                event, events = b"", 0
                while True:
                    line = resp.readline()
                    if not line:
                        break
                    event += line
                    if line == b"\n":
                        if rewrite:
                            event = rewrite(event)
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                        self.wfile.flush()
                        event, events = b"", events + 1
                        if events == outer.cut_after:
                            outer.dead.set()
                            self.connection.shutdown(socket.SHUT_RDWR)
                            self.close_connection = True
                            upstream.close()
                            return
                time.sleep(linger)
                self.wfile.write(b"0\r\n\r\n")
                upstream.close()

            def log_message(self, *args):
                pass

        class Threaded(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.httpd = Threaded(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_client_leaving_on_done_had_an_ok_answer(tmp_path, replicas):
    """A client that closes its connection on the stream's [DONE], before the replica's answer
    has ended (a relay holds its last chunk back), had the whole answer: the attempt counts ok,
    not client_gone."""
    relay = FlakyReplica(replicas[0], cut_after=None, linger=1.0)
    router = Router(tmp_path, [relay.url], ["--policy", "round_robin"])
    try:
        router.wait_ready(1)
        host, port = router.base.split("//", 1)[1].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        conn.request("POST", "/v1/completions", json.dumps(
            {"model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 4, "stream": True}),
            {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
        resp = conn.getresponse()
        assert resp.status == 200
        while (line := resp.readline()) and line.strip() != b"data: [DONE]":
            pass
        assert line.strip() == b"data: [DONE]"
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        ok = f'tachyon_router_requests_total{{replica="{relay.url}",outcome="ok"}}'
        gone = f'tachyon_router_requests_total{{replica="{relay.url}",outcome="client_gone"}}'
        m = router.wait_metrics(lambda m: m.get(ok, 0) + m.get(gone, 0) >= 1, "the attempt ended")
        assert (m.get(ok, 0), m.get(gone, 0)) == (1, 0)
    finally:
        router.stop()
        relay.close()


def read_stream(base, path, body):
    """POSTs a streamed request; returns (replica header, [parsed events], saw [DONE])."""
    host, port = base.split("//", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json",
                                                  "Authorization": f"Bearer {API_KEY}"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    events, done = [], False
    for raw in resp.read().decode().split("\n\n"):
        if not raw.startswith("data: "):
            continue
        if raw == "data: [DONE]":
            done = True
        else:
            events.append(json.loads(raw[len("data: "):]))
    conn.close()
    return resp.getheader(REPLICA_HEADER), events, done


def stream_text(events, chat):
    out = ""
    for e in events:
        assert "error" not in e, e
        for c in e.get("choices", []):
            out += (c.get("delta", {}).get("content") or "") if chat else c.get("text", "")
    return out


@pytest.fixture(scope="module")
def migration_setup(tmp_path_factory, replicas):
    flaky = FlakyReplica(replicas[0], cut_after=6)
    router = Router(tmp_path_factory.mktemp("migrating"), [flaky.url, url_of(replicas[1])],
                    ["--policy", "round_robin"])
    router.wait_ready(2)
    yield router, flaky, replicas[1]
    router.stop()
    flaky.close()


def test_a_replica_without_events_is_approximate(migration_setup):
    router, _, _ = migration_setup
    # The relay publishes no KV events: its replica is approximate, the other one in sync.
    m = router.wait_metrics(lambda m: m.get(EVENTS_MODE) == 1, "one replica in sync")
    assert m[APPROX_MODE] == 1


@pytest.mark.parametrize("chat", [False, True])
@pytest.mark.parametrize("sampling", [{"temperature": 0}, {"temperature": 1.0, "seed": 1234}])
def test_stream_migrates_with_identical_text(migration_setup, chat, sampling):
    router, flaky, healthy = migration_setup
    flaky.dead.clear()
    router.wait_ready(2)
    path = "/v1/chat/completions" if chat else "/v1/completions"
    body = {"model": MODEL_NAME, "max_tokens": 48, "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True}, **sampling}
    if chat:
        body["messages"] = [{"role": "user", "content": "Tell me about Lily and her dog."}]
    else:
        body["prompt"] = "Once upon a time, Lily and her dog"
    _, want_events, _ = read_stream(healthy.base, path, body)  # fault-free, on one replica
    before = router.metrics()["tachyon_router_migrations_total"]
    replica, events, done = read_stream(router.base, path, body)
    assert replica == flaky.url and flaky.dead.is_set()
    assert done
    assert stream_text(events, chat) == stream_text(want_events, chat)
    assert router.metrics()["tachyon_router_migrations_total"] == before + 1
    # One stream as the client sees it: one id, one role opening (chat), usage of the whole.
    assert len({e["id"] for e in events}) == 1
    if chat:
        assert sum(1 for e in events for c in e["choices"] if "role" in c["delta"]) == 1
    assert all("token_ids" not in c for e in events for c in e["choices"])
    usage = [e["usage"] for e in events if e.get("usage")]
    want_usage = [e["usage"] for e in want_events if e.get("usage")]
    assert usage[-1]["completion_tokens"] == 48
    assert usage[-1]["prompt_tokens"] == want_usage[-1]["prompt_tokens"]


PERSON_FORMAT = {"type": "json_schema", "complete_within_max_tokens": True, "json_schema": {
    "name": "person", "schema": {
        "type": "object", "required": ["name", "age", "pets"],
        "properties": {"name": {"type": "string", "maxLength": 16}, "age": {"type": "integer"},
                       "pets": {"type": "array", "items": {"type": "string", "maxLength": 8}}}}}}


def choice_texts(events, chat):
    """{index: (text, finish_reason)} of a stream's choices; the opening deltas per choice."""
    texts, finish, openings = {}, {}, {}
    for e in events:
        assert "error" not in e, e
        for c in e.get("choices", []):
            i = c["index"]
            texts[i] = texts.get(i, "") + ((c["delta"].get("content") or "") if chat
                                           else c["text"])
            if c.get("finish_reason"):
                finish[i] = c["finish_reason"]
            if chat and "role" in c["delta"]:
                openings[i] = openings.get(i, 0) + 1
    return {i: (texts[i], finish.get(i)) for i in texts}, openings


@pytest.mark.parametrize("chat", [False, True])
@pytest.mark.parametrize("extra", [
    {"n": 3, "temperature": 1.0, "seed": 99, "ignore_eos": True},
    {"n": 2, "temperature": 0, "ignore_eos": True},
    {"response_format": PERSON_FORMAT, "temperature": 1.0, "seed": 5},
    {"n": 2, "response_format": PERSON_FORMAT, "temperature": 1.0, "seed": 8},
], ids=["n3-seeded", "n2-greedy", "json-schema", "n2-json-schema"])
def test_stream_migrates_per_choice_and_structured(migration_setup, chat, extra):
    """A stream with n > 1 choices and/or an output constraint, cut mid-stream, goes on
    unbroken: each unfinished choice resumes on the healthy replica (its own seed, its
    constraint replayed over the tokens sent), with every choice's text, finish reason and the
    usage those of a fault-free run."""
    router, flaky, healthy = migration_setup
    flaky.dead.clear()
    router.wait_ready(2)
    path = "/v1/chat/completions" if chat else "/v1/completions"
    body = {"model": MODEL_NAME, "max_tokens": 40, "stream": True,
            "stream_options": {"include_usage": True}, **extra}
    if chat:
        body["messages"] = [{"role": "user", "content": "Tell me about Lily and her dog."}]
    else:
        body["prompt"] = "Once upon a time, Lily and her dog"
    if "seed" not in body:
        body["seed"] = 3
    _, want_events, _ = read_stream(healthy.base, path, body)  # fault-free, on one replica
    want, _ = choice_texts(want_events, chat)
    before = router.metrics()["tachyon_router_migrations_total"]
    replica, events, done = read_stream(router.base, path, body)
    assert replica == flaky.url and flaky.dead.is_set()
    assert done
    got, openings = choice_texts(events, chat)
    assert got == want
    assert len(got) == body.get("n", 1)
    if "response_format" in body:
        for text, _ in got.values():
            assert {"name", "age", "pets"} <= set(json.loads(text)), text
    assert router.metrics()["tachyon_router_migrations_total"] == before + 1
    assert len({e["id"] for e in events}) == 1
    if chat:
        assert openings == {i: 1 for i in range(body.get("n", 1))}
    assert all("token_ids" not in c for e in events for c in e["choices"])
    usage = [e["usage"] for e in events if e.get("usage")]
    want_usage = [e["usage"] for e in want_events if e.get("usage")]
    assert len(usage) == 1
    assert usage[0]["completion_tokens"] == want_usage[-1]["completion_tokens"]
    assert usage[0]["prompt_tokens"] == want_usage[-1]["prompt_tokens"]
    assert usage[0]["total_tokens"] == want_usage[-1]["total_tokens"]


def choice_logprobs(events, chat):
    """{index: [(token, logprob, text_offset or None)]} of a stream's choices."""
    out = {}
    for e in events:
        for c in e.get("choices", []):
            lp = c.get("logprobs")
            if not lp:
                continue
            if chat:
                out.setdefault(c["index"], []).extend(
                    (t["token"], t["logprob"], None) for t in lp["content"])
            else:
                out.setdefault(c["index"], []).extend(
                    zip(lp["tokens"], lp["token_logprobs"], lp["text_offset"]))
    return out


@pytest.mark.parametrize("chat", [False, True])
def test_stream_migrates_with_stop_strings_penalties_and_logprobs(migration_setup, chat):
    """Stop strings (a space, the start of one, is held back again and again), presence /
    frequency penalties and logprobs migrate too: each choice's text, its logprobs (a
    completion's text offsets counted from the start of the choice) and the usage are those of
    a fault-free run."""
    router, flaky, healthy = migration_setup
    flaky.dead.clear()
    router.wait_ready(2)
    path = "/v1/chat/completions" if chat else "/v1/completions"
    body = {"model": MODEL_NAME, "max_tokens": 40, "stream": True, "n": 2, "seed": 17,
            "temperature": 1.0, "presence_penalty": 0.8, "frequency_penalty": 0.6,
            "stop": [" qqqq"], "stream_options": {"include_usage": True}}
    if chat:
        body.update(messages=[{"role": "user", "content": "Tell me about Lily and her dog."}],
                    logprobs=True, top_logprobs=2)
    else:
        body.update(prompt="Once upon a time, Lily and her dog", logprobs=2)
    _, want_events, _ = read_stream(healthy.base, path, body)
    before = router.metrics()["tachyon_router_migrations_total"]
    replica, events, done = read_stream(router.base, path, body)
    assert replica == flaky.url and flaky.dead.is_set() and done
    assert router.metrics()["tachyon_router_migrations_total"] == before + 1
    assert choice_texts(events, chat)[0] == choice_texts(want_events, chat)[0]
    got, want = choice_logprobs(events, chat), choice_logprobs(want_events, chat)
    assert sorted(got) == sorted(want) == [0, 1]
    for i in want:
        assert [(t, o) for t, _, o in got[i]] == [(t, o) for t, _, o in want[i]], i
        assert [lp for _, lp, _ in got[i]] == pytest.approx([lp for _, lp, _ in want[i]],
                                                            abs=1e-3), i
    usage = [e["usage"] for e in events if e.get("usage")]
    want_usage = [e["usage"] for e in want_events if e.get("usage")][-1]
    assert len(usage) == 1
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        assert usage[0][key] == want_usage[key], key


def test_tool_call_stream_migrates(tmp_path, templated_server):
    """A stream writing a tool call (the Qwen3 template's hermes format), cut mid-call, goes on
    on the other replica: the call's name, one id and its arguments are those of a fault-free
    run (the replica replays the sent tokens' text through its call parser)."""
    from test_resume_tokens import chat_summary

    flaky = FlakyReplica(templated_server, cut_after=5)
    router = Router(tmp_path, [flaky.url, url_of(templated_server)], ["--policy", "round_robin"])
    try:
        router.wait_ready(2)
        body = {"model": MODEL_NAME, "max_tokens": 96, "stream": True, "temperature": 1.0,
                "seed": 5, "tool_choice": "required", "parallel_tool_calls": False,
                "chat_template_kwargs": {"enable_thinking": False},
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
                "tools": [{"type": "function", "function": {
                    "name": "get_weather",
                    "parameters": {"type": "object", "required": ["city"], "properties": {
                        "city": {"type": "string", "maxLength": 12}}}}}]}
        _, want_events, _ = read_stream(url_of(templated_server), "/v1/chat/completions", body)
        replica, events, done = read_stream(router.base, "/v1/chat/completions", body)
        assert replica == flaky.url and flaky.dead.is_set() and done
        assert router.metrics()["tachyon_router_migrations_total"] == 1
        want, got = chat_summary(want_events), chat_summary(events)
        assert want[2][0][1] == "get_weather" and want[3] == "tool_calls", want
        assert got[:2] == want[:2] and got[3] == want[3]
        assert {i: (len(c[0]), c[1], c[2]) for i, c in got[2].items()} == \
            {i: (1, c[1], c[2]) for i, c in want[2].items()}
        usage = [e["usage"] for e in events if e.get("usage")]
        want_usage = [e["usage"] for e in want_events if e.get("usage")][-1]
        assert usage[-1]["completion_tokens"] == want_usage["completion_tokens"]
    finally:
        router.stop()
        flaky.close()


def test_a_malformed_usage_in_a_continuation_is_not_fatal(tmp_path, replicas):
    """The replica a cut stream migrates to reports its usage with a prompt_tokens that is not
    a count: the router (which rewrites a continuation's usage) finishes the stream with the
    right text, a usage whose prompt_tokens is a count, and goes on serving."""
    flaky = FlakyReplica(replicas[0], cut_after=6)
    mangling = FlakyReplica(replicas[1], cut_after=None, rewrite=lambda e: re.sub(
        rb'"prompt_tokens":\s*\d+', b'"prompt_tokens":"many"', e))
    router = Router(tmp_path, [flaky.url, mangling.url], ["--policy", "round_robin"])
    try:
        router.wait_ready(2)
        body = {"model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 24,
                "stream": True, "ignore_eos": True, "temperature": 0,
                "stream_options": {"include_usage": True}}
        _, want, _ = read_stream(replicas[1].base, "/v1/completions", body)
        replica, events, done = read_stream(router.base, "/v1/completions", body)
        assert replica == flaky.url and flaky.dead.is_set() and done
        assert stream_text(events, chat=False) == stream_text(want, chat=False)
        usage = [e["usage"] for e in events if e.get("usage")][-1]
        assert usage["completion_tokens"] == 24 and usage["prompt_tokens"] >= 0, usage
        assert router.metrics()["tachyon_router_migrations_total"] == 1
    finally:
        router.stop()
        flaky.close()
        mangling.close()


def test_a_refused_continuation_ends_the_stream_and_blames_no_replica(tmp_path, replicas):
    """The replica a cut stream's continuation goes to answers it with a 400 (it cannot resume
    it): the client's stream ends with a replica_failed event that says why, and that replica
    stays up (the continuation was refused, the replica did not fail)."""
    flaky = FlakyReplica(replicas[0], cut_after=6)
    refusing = HangingReplica(refusal=(400, {"error": {
        "message": "resumed output token 7 is not allowed", "type": "invalid_request_error",
        "param": "resume_token_ids", "code": None}}))
    router = Router(tmp_path, [flaky.url, refusing.url], ["--policy", "round_robin"])
    try:
        router.wait_ready(2)
        body = {"model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 40,
                "stream": True, "ignore_eos": True, "temperature": 0}
        replica, events, done = read_stream(router.base, "/v1/completions", body)
        assert replica == flaky.url and flaky.dead.is_set()
        errors = [e["error"] for e in events if "error" in e]
        assert len(errors) == 1 and errors[0]["code"] == "replica_failed", events
        assert "resumed output token 7 is not allowed" in errors[0]["message"], errors
        m = router.metrics()
        assert m[f'tachyon_router_replica_up{{replica="{refusing.url}"}}'] == 1
        assert m[f'tachyon_router_requests_total{{replica="{refusing.url}",outcome="refused"}}'] == 1
    finally:
        router.stop()
        flaky.close()
        refusing.close()
