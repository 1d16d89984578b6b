"""The replica side of routing: `tachyon serve` publishes its prefix-cache events and load on
GET /v1/kv_events (a snapshot, then numbered stored / removed batches and load heartbeats), its
labels on /v1/replica_info, and ends the stream with a draining marker on SIGTERM."""

import http.client
import json
import re
import signal
import subprocess

import pytest

from conftest import API_KEY, MODEL_NAME, Server, binary_path, model_path

HEX = re.compile(r"^[0-9a-f]{32}$")


class EventStream:
    """An open GET /v1/kv_events; next() returns the next message (parsed JSON), None at the end."""

    def __init__(self, server, api_key=API_KEY):
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.conn.request("GET", "/v1/kv_events", headers=headers)
        self.resp = self.conn.getresponse()

    def next(self):
        data = None
        while True:
            line = self.resp.readline()
            if not line:
                return None
            line = line.decode().rstrip("\n")
            if line.startswith("data: "):
                data = line[len("data: "):]
            elif line == "" and data is not None:
                return json.loads(data)

    def close(self):
        self.conn.close()


@pytest.fixture(scope="module")
def labeled(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("labeled"), ["--label", "version=v2", "--label", "zone=a"])
    yield s
    s.stop()


def test_replica_info_reports_labels_and_load(labeled):
    status, _, info = labeled.request("GET", "/v1/replica_info")
    assert status == 200, info
    assert info["labels"] == {"version": "v2", "zone": "a"}
    assert info["block_size"] == 16 and info["kv_events"] is True
    assert set(info["load"]) >= {"running", "waiting", "kv_usage", "kv_blocks"}


def test_kv_events_snapshot_then_numbered_stored_blocks(labeled):
    stream = EventStream(labeled)
    try:
        assert stream.resp.status == 200
        assert stream.resp.getheader("Content-Type").startswith("text/event-stream")
        snap = stream.next()
        assert snap["type"] == "snapshot" and snap["complete"] is True, snap
        assert snap["block_size"] == 16 and snap["labels"] == {"version": "v2", "zone": "a"}
        assert all(HEX.match(h) for h in snap["blocks"])
        seq, cached = snap["seq"], set(snap["blocks"])
        prompt = "Events: " + "Lily saw a big red ball in the park and ran to get it. " * 4
        status, _, body = labeled.request("POST", "/v1/completions", {
            "model": MODEL_NAME, "prompt": prompt, "max_tokens": 2, "temperature": 0})
        assert status == 200, body
        prompt_blocks = body["usage"]["prompt_tokens"] // 16
        assert prompt_blocks >= 3
        stored, loads = [], 0
        while len(stored) < prompt_blocks:
            msg = stream.next()
            assert msg is not None
            if msg["type"] == "load":
                loads += 1
                assert set(msg) >= {"running", "waiting", "kv_usage", "kv_blocks", "time"}
                continue
            assert msg["type"] == "events", msg
            assert msg["seq"] == seq + 1, (msg["seq"], seq)  # no gap, no repeat
            for kind, h in msg["events"]:
                assert kind in ("stored", "removed") and HEX.match(h)
                if kind == "stored":
                    assert h not in cached
                    cached.add(h)
                    stored.append(h)
                else:
                    cached.discard(h)
            seq += len(msg["events"])
        assert len(set(stored)) == len(stored)
        # The same prompt again is computed from those blocks: no new block for the prompt.
        status, _, body = labeled.request("POST", "/v1/completions", {
            "model": MODEL_NAME, "prompt": prompt, "max_tokens": 2, "temperature": 0})
        assert body["usage"]["prompt_tokens_details"]["cached_tokens"] >= 16 * (prompt_blocks - 1)
    finally:
        stream.close()
    # A new subscriber's snapshot holds what the events said.
    again = EventStream(labeled)
    try:
        snap = again.next()
        assert set(stored) <= set(snap["blocks"]) and snap["seq"] >= seq
    finally:
        again.close()


def test_kv_events_need_the_api_key(labeled):
    stream = EventStream(labeled, api_key=None)
    try:
        assert stream.resp.status == 401
    finally:
        stream.close()


def test_sigterm_ends_the_stream_with_a_draining_marker(tmp_path):
    s = Server(tmp_path)
    stream = EventStream(s)
    try:
        assert stream.next()["type"] == "snapshot"
        s.proc.send_signal(signal.SIGTERM)
        while True:
            msg = stream.next()
            assert msg is not None, "the stream ended without a draining marker"
            if msg["type"] == "draining":
                break
        assert stream.next() is None  # then the end of the stream
    finally:
        stream.close()
    assert s.stop() == 0


def test_bad_label_flag():
    out = subprocess.run([str(binary_path()), "serve", "-m", str(model_path()), "--label", "x"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "--label" in out.stderr and "KEY=VALUE" in out.stderr, out.stderr


def test_canary_weight_sends_its_share_to_the_labelled_replica(tmp_path, labeled):
    from test_router import REPLICA_HEADER, Router, url_of
    plain = Server(tmp_path)
    canary = url_of(labeled)
    synced = 'tachyon_router_kv_index_mode{mode="events"}'
    try:
        for percent, n in [("25", 24), ("0", 8), ("100", 8)]:
            r = Router(tmp_path, [url_of(plain), canary],
                       ["--policy", "round_robin", "--seed", "3", "--weight",
                        f"version=v2:{percent}"])
            try:
                r.wait_ready(2)
                m = r.wait_metrics(lambda m: m.get(synced) == 2, "labels from both replicas")
                assert m[f'tachyon_router_replica_labels{{replica="{canary}",version="v2",'
                         f'zone="a"}}'] == 1
                on_canary = 0
                for i in range(n):
                    # Distinct prompts: a prompt's share is fixed by its key (its tokens).
                    body = {"model": MODEL_NAME, "prompt": f"Once upon a time {i}",
                            "max_tokens": 1, "temperature": 0}
                    status, headers, _ = r.request("POST", "/v1/completions", body)
                    assert status == 200
                    on_canary += headers[REPLICA_HEADER] == canary
                m = r.metrics()
                assert m.get('tachyon_router_weighted_requests_total{group="version=v2"}', 0) == \
                    on_canary
                assert m.get('tachyon_router_weighted_requests_total{group="other"}', 0) == \
                    n - on_canary
                if percent == "0":
                    assert on_canary == 0
                elif percent == "100":
                    assert on_canary == n
                else:  # 6 expected of 24; each prompt's share is fixed by its tokens and the seed
                    assert 1 <= on_canary <= 14, on_canary
            finally:
                assert r.stop() == 0
    finally:
        plain.stop()


def test_gemma3_layer_groups_publish_the_chain_the_router_predicts(tmp_path):
    """Gemma 3 (sliding-window and full-attention layers: its KV cache keeps one copy of each
    block per layer group) behind a kv router: the replica publishes one hash a block (the
    chain the router computes, not every group's copy), and for repeated prompts and shared
    prefixes, shorter and longer than the 512-token window, the cached tokens the router
    predicts are those the replica reports."""
    from test_gemma3 import require_gemma
    from test_router import Router, url_of
    gemma = require_gemma()
    replica = Server(tmp_path, ["--max-model-len", "2048"], model=gemma, chat_template=None)
    router = None
    try:
        router = Router(tmp_path, [url_of(replica)], tokenizer=gemma, chat_template=None)
        router.wait_ready(1)
        router.wait_metrics(lambda m: m.get('tachyon_router_kv_index_mode{mode="events"}') == 1,
                            "the replica's events")
        url = url_of(replica)

        def counters():
            m = router.metrics()
            return (m.get(f'tachyon_router_predicted_cached_tokens_total{{replica="{url}"}}', 0),
                    m.get(f'tachyon_router_reported_cached_tokens_total{{replica="{url}"}}', 0),
                    m.get("tachyon_router_prefix_index_blocks", 0))

        short = "The quick brown fox jumps over the lazy dog near the river bank. " * 10
        long = " ".join(f"Line {i}: the bird sang a song about the sea and the sky." for i in
                        range(60))
        total_tokens = 0
        # (prompt, cached tokens the replica must report: a repeat or a shared prefix hits)
        for prompt, hits in [(short, False), (short, True), (short + " And then?", True),
                             (long, False), (long, True), (long + " The end.", True)]:
            before = counters()
            status, _, answer = router.request("POST", "/v1/completions", {
                "model": MODEL_NAME, "prompt": prompt, "max_tokens": 2, "temperature": 0})
            assert status == 200, answer
            usage = answer["usage"]
            total_tokens += usage["prompt_tokens"] + 2
            cached = usage["prompt_tokens_details"]["cached_tokens"]
            after = counters()
            assert after[1] - before[1] == cached
            assert after[0] - before[0] == cached, (prompt[:40], after, before, usage)
            assert (cached > 0) == hits, (prompt[:40], usage)
            load = f'tachyon_router_replica_reported_load{{replica="{url}"}}'
            router.wait_metrics(lambda m: m.get(load, 1) == 0, "the replica idle again")
        assert usage["prompt_tokens"] > 600  # past the sliding window
        # One hash a block: at most the blocks of the prompts and outputs (6x that if every
        # layer group's copy were published).
        indexed = counters()[2]
        assert 0 < indexed <= total_tokens // 16, (indexed, total_tokens)
    finally:
        if router:
            router.stop()
        replica.stop()
