"""Prefill/decode disaggregation on SmolLM2 (docs/pd.md): a prefill replica (--role prefill)
sends a prompt's KV blocks to a decode replica (--role decode) over the KV transfer wire format;
the decode request then computes only the tail, with greedy output identical to a run that
recomputes the whole prompt. Fault injection through a test-only TCP relay between the two:
connections cut at byte offsets (random, seeded), a corrupted byte, a stalled link, and kill -9
of the prefill replica mid-transfer. Every case must end without a hang, with identical output,
and with no KV blocks left in use on either side."""

import random
import signal
import socket
import threading
import time
import uuid

import pytest

from conftest import SmolLM2Server, require_smollm2

BLOCK = 16
# About 300 tokens of ChatML prompt (the paragraph twice): 18+ full blocks.
PARAGRAPH = (
    "The lighthouse keeper wrote in his log every evening. He noted the wind, the color of the "
    "sea, the ships that passed and the birds that rested on the rail. Over forty years the log "
    "grew into a shelf of books, and the books into a history of the coast that nobody else had "
    "kept. When the lamp was automated he carried the books down the hill to the town library, "
    "where a young archivist read them one winter and found, between the weather and the ships, "
    "a quiet record of every storm, every wreck, every rescue and every name of the men who "
    "rowed out into the dark to bring the sailors home. ")
TEXT = PARAGRAPH * 2


def chat_body(prompt, **extra):
    body = {"model": "smollm2", "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 24, "temperature": 0}
    body.update(extra)
    return body


class Relay:
    """A TCP relay: accepts on 127.0.0.1, forwards to `upstream` both ways. `cut_after`: after
    that many bytes towards upstream, resets both sides; `flip_at`: xors that byte; `stall_after`:
    stops forwarding (keeps both sockets open) after that many bytes."""

    def __init__(self, upstream, cut_after=None, flip_at=None, stall_after=None):
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.cut_after, self.flip_at, self.stall_after = cut_after, flip_at, stall_after
        self.forwarded = 0
        self.stalled = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.address = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        try:
            client, _ = self.sock.accept()
        except OSError:
            return
        up = socket.create_connection(self.upstream)
        self.conns += [client, up]
        threading.Thread(target=self._back, args=(up, client), daemon=True).start()
        self._forward(client, up)

    def _reset(self, *socks):
        for s in socks:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                s.shutdown(socket.SHUT_RDWR)  # wakes the thread reading it; close alone waits
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    def _forward(self, src, dst):
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                self._reset(src, dst)
                return
            start = self.forwarded
            if self.flip_at is not None and start <= self.flip_at < start + len(data):
                data = bytearray(data)
                data[self.flip_at - start] ^= 0x20
                data = bytes(data)
            limit = self.cut_after if self.cut_after is not None else self.stall_after
            if limit is not None and start + len(data) >= limit:
                try:
                    dst.sendall(data[:limit - start])
                except OSError:
                    pass
                self.forwarded = limit
                if self.cut_after is not None:
                    self._reset(src, dst)
                    return
                self.stalled.set()
                while src.recv(65536):  # hold the link until the sender goes away
                    pass
                self._reset(src, dst)
                return
            try:
                dst.sendall(data)
            except OSError:
                self._reset(src, dst)
                return
            self.forwarded += len(data)

    def _back(self, src, dst):
        while True:
            try:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
            except OSError:
                break

    def close(self):
        self._reset(self.sock, *self.conns)


@pytest.fixture(scope="module")
def decode(tmp_path_factory):
    require_smollm2()
    s = SmolLM2Server(tmp_path_factory.mktemp("decode"),
                      ["--role", "decode", "--kv-port", "0", "--kv-transfer-timeout", "2"])
    yield s
    assert s.stop() == 0, s.log_text()


@pytest.fixture(scope="module")
def prefill(tmp_path_factory):
    require_smollm2()
    s = SmolLM2Server(tmp_path_factory.mktemp("prefill"),
                      ["--role", "prefill", "--max-num-batched-tokens", "64"])
    yield s
    assert s.stop() == 0, s.log_text()


def kv_address(server):
    status, _, info = server.request("GET", "/v1/replica_info")
    assert status == 200
    return info


def assert_idle(server):
    """No request running and no KV block in use (cached blocks are free)."""
    deadline = time.time() + 30
    while True:
        _, _, info = server.request("GET", "/v1/replica_info")
        load = info["load"]
        if load["running"] == 0 and load["waiting"] == 0 and load["kv_usage"] == 0:
            return
        assert time.time() < deadline, info
        time.sleep(0.05)


def counter(server, name):
    return sum(v for k, v in server.metrics().items() if k.startswith(name))


def reference(decode, prompt):
    """The colocated answer: the decode replica computes the whole prompt (its own cache salt
    keeps it from the transferred blocks)."""
    status, _, out = decode.request("POST", "/v1/chat/completions",
                                    chat_body(prompt, cache_salt="ref-" + uuid.uuid4().hex))
    assert status == 200, out
    return out["choices"][0]["message"]["content"]


def run_prefill(prefill, address, prompt, **extra):
    status, _, out = prefill.request(
        "POST", "/v1/chat/completions",
        chat_body(prompt, max_tokens=1, **extra,
                  kv_transfer_params={"address": address, "transfer_id": uuid.uuid4().hex}))
    assert status == 200, out


def run_decode(decode, prompt, **extra):
    status, _, out = decode.request("POST", "/v1/chat/completions", chat_body(prompt, **extra))
    assert status == 200, out
    return (out["choices"][0]["message"]["content"],
            out["usage"]["prompt_tokens"],
            (out["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0))


def test_replica_info_reports_role_and_kv_address(decode, prefill):
    d, p = kv_address(decode), kv_address(prefill)
    assert d["role"] == "decode" and d["kv_address"].startswith("127.0.0.1:")
    assert p["role"] == "prefill" and p["kv_address"] is None


def test_transferred_prompt_is_not_recomputed_and_output_is_identical(decode, prefill):
    prompt = "A. " + TEXT
    ref = reference(decode, prompt)
    kept0 = counter(decode, 'tachyon_kv_transfer_blocks_total')
    run_prefill(prefill, kv_address(decode)["kv_address"], prompt)
    kept = counter(decode, 'tachyon_kv_transfer_blocks_total') - kept0
    text, prompt_tokens, cached = run_decode(decode, prompt)
    assert text == ref
    full = prompt_tokens // BLOCK if prompt_tokens % BLOCK else prompt_tokens // BLOCK - 1
    assert kept == prompt_tokens // BLOCK
    assert cached == full * BLOCK, (cached, prompt_tokens)
    # Every received block was loaded (a prompt of whole blocks computes its last token itself,
    # so its last block may stay behind until it expires).
    assert counter(decode, "tachyon_kv_inbox_blocks") <= (prompt_tokens % BLOCK == 0)
    assert_idle(decode)
    assert_idle(prefill)


@pytest.mark.parametrize("case", ["cut", "cut", "cut", "flip"])
def test_faults_end_in_recompute_with_identical_output(decode, prefill, case, request):
    rng = random.Random(request.node.name)
    prompt = "%s. %s" % (uuid.uuid4().hex[:8], TEXT)
    ref = reference(decode, prompt)
    # One transfer is ~7 MB (19 blocks of 368,640 bytes): cut or flip anywhere in the first 4 MB.
    offset = rng.randrange(0, 4 << 20)
    relay = Relay(kv_address(decode)["kv_address"],
                  cut_after=offset if case == "cut" else None,
                  flip_at=offset if case == "flip" else None)
    failed0 = counter(decode, 'tachyon_kv_transfers_total{direction="received",outcome="failed"}')
    kept0 = counter(decode, 'tachyon_kv_transfer_blocks_total')
    # A salt of its own: no block of the decode replica's cache (the chat template's system
    # prompt) is shared with earlier requests, so every cached token came by the transfer.
    salt = uuid.uuid4().hex
    run_prefill(prefill, relay.address, prompt, cache_salt=salt)
    relay.close()
    failed = 'tachyon_kv_transfers_total{direction="received",outcome="failed"}'
    deadline = time.time() + 60
    while counter(decode, failed) == failed0:  # the decode replica saw the fault
        assert time.time() < deadline
        time.sleep(0.05)
    text, prompt_tokens, cached = run_decode(decode, prompt, cache_salt=salt)
    kept = counter(decode, 'tachyon_kv_transfer_blocks_total') - kept0
    assert text == ref
    assert kept < prompt_tokens // BLOCK  # the fault cost blocks ...
    assert cached == kept * BLOCK  # ... and every block kept was used, none other
    assert counter(
        decode, 'tachyon_kv_transfers_total{direction="received",outcome="failed"}') > failed0
    assert_idle(decode)
    assert_idle(prefill)


def test_stalled_link_is_bounded(decode, prefill):
    prompt = "S. " + TEXT
    ref = reference(decode, prompt)
    relay = Relay(kv_address(decode)["kv_address"], stall_after=1 << 20)
    run_prefill(prefill, relay.address, prompt)  # answers (within the request's timeout)
    relay.close()
    text, _, _ = run_decode(decode, prompt)
    assert text == ref
    assert_idle(decode)
    assert_idle(prefill)


def test_prefill_replica_killed_mid_transfer(decode, tmp_path):
    prompt = "K. " + TEXT
    ref = reference(decode, prompt)
    victim = SmolLM2Server(tmp_path, ["--role", "prefill"])
    relay = Relay(kv_address(decode)["kv_address"], stall_after=1 << 20)
    def doomed_prefill():
        try:
            victim.request("POST", "/v1/chat/completions",
                           chat_body(prompt, max_tokens=1,
                                     kv_transfer_params={"address": relay.address}))
        except OSError:  # killed before it answered, as intended
            pass

    t = threading.Thread(target=doomed_prefill, daemon=True)
    t.start()
    assert relay.stalled.wait(60), "the transfer never reached the relay"
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(30)
    victim.log.close()
    relay.close()
    text, _, _ = run_decode(decode, prompt)
    assert text == ref
    assert_idle(decode)

