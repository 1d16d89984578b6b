"""Prefill/decode disaggregation on SmolLM2 (docs/pd.md): a prefill replica (--role prefill)
sends a prompt's KV blocks to a decode replica (--role decode) over the KV transfer wire format;
the decode request then computes only the tail, with greedy output identical to a run that
recomputes the whole prompt. Fault injection through a test-only TCP relay between the two:
connections cut at byte offsets (random, seeded), a corrupted byte, a stalled link, and kill -9
of the prefill replica mid-transfer. Through the router (tachyon route --prefill --decode): long
prompts prefilled on the prefill replica, short ones not, and kill -9 of either side mid-transfer.
Every case must end without a hang, with identical output, and with no KV blocks left in use on
either side.

Every server of this module runs at the AVX-512 level (TACHYON_CPU=avx512), where a token's logits
do not depend on how many tokens its step computes; at the AMX level they do (docs/kernels.md,
"Numerics"), so a decode replica that computes only the tail can differ slightly from one pass
over the whole prompt (docs/pd.md, known limits)."""

import os
import random
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest

from conftest import SmolLM2Server, binary_path, has_command, require_smollm2, smollm2_path
from etcd_server import Etcd, free_port
from test_router import REPLICA_HEADER, Router, read_stream, stream_text

BLOCK = 16


@pytest.fixture(scope="module", autouse=True)
def batch_invariant_kernels():
    """Servers started in this module inherit TACHYON_CPU=avx512 (see the module docstring)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TACHYON_CPU", "avx512")
        yield

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
        """Every connection gets the same faults, counted from its own first byte."""
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(self.upstream)
            except OSError:
                self._reset(client)
                continue
            self.forwarded = 0
            self.conns += [client, up]
            threading.Thread(target=self._back, args=(up, client), daemon=True).start()
            threading.Thread(target=self._forward, args=(client, up), daemon=True).start()

    def drop(self):
        """Resets the connections relayed now; later ones are accepted as before."""
        self._reset(*self.conns)
        self.conns = []
        self.stalled.clear()

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
                try:
                    while src.recv(65536):  # hold the link until the sender goes away
                        pass
                except OSError:  # dropped
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
    tail0 = counter(prefill, "tachyon_kv_transfer_tail_seconds_total")
    run_prefill(prefill, relay.address, prompt)  # answers (within the request's timeout)
    relay.close()
    # The answer waited for the stalled transfer's end after the prefill's last forward pass.
    assert counter(prefill, "tachyon_kv_transfer_tail_seconds_total") > tail0
    text, _, _ = run_decode(decode, prompt)
    assert text == ref
    assert_idle(decode)
    assert_idle(prefill)


def test_prefill_replica_killed_mid_transfer(decode, tmp_path):
    prompt = "K. " + TEXT
    ref = reference(decode, prompt)
    # Small chunks: blocks leave while the prompt computes, well within the decode replica's
    # 2 s wait for the next bytes even on a loaded machine.
    victim = SmolLM2Server(tmp_path, ["--role", "prefill", "--max-num-batched-tokens", "16"])
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



F16_BLOCK_BYTES = 30 * 2 * BLOCK * 3 * 64 * 2  # SmolLM2: layers x (K, V) x tokens x kv heads x dim


def test_quantized_kv_is_transferred_in_its_own_form(decode, tmp_path):
    """A q4_0 KV cache travels as q4_0 (18 bytes per 32 elements, not f16's 64) and the decode
    replica uses it; a replica with another KV dtype refuses it and computes the prompt itself."""
    servers = []
    try:
        for name, args in (("decode", ["--role", "decode", "--kv-port", "0"]),
                           ("prefill", ["--role", "prefill"])):
            (tmp_path / name).mkdir()
            servers.append(SmolLM2Server(tmp_path / name, args + ["--kv-cache-dtype", "q4_0"]))
        q4_decode, q4_prefill = servers
        prompt = "Q. " + TEXT
        ref = reference(q4_decode, prompt)
        bytes0 = counter(q4_decode, 'tachyon_kv_transfer_bytes_total{direction="received"}')
        kept0 = counter(q4_decode, "tachyon_kv_transfer_blocks_total")
        run_prefill(q4_prefill, kv_address(q4_decode)["kv_address"], prompt)
        kept = counter(q4_decode, "tachyon_kv_transfer_blocks_total") - kept0
        received = counter(q4_decode,
                           'tachyon_kv_transfer_bytes_total{direction="received"}') - bytes0
        text, prompt_tokens, cached = run_decode(q4_decode, prompt)
        assert text == ref
        assert kept == prompt_tokens // BLOCK
        full = prompt_tokens // BLOCK if prompt_tokens % BLOCK else prompt_tokens // BLOCK - 1
        assert cached == full * BLOCK
        assert received < 0.32 * F16_BLOCK_BYTES * kept, (received, kept)

        # q4_0 blocks offered to the f16 decode replica: refused (another KV format), recomputed.
        prompt = "R. " + TEXT
        ref = reference(decode, prompt)
        failed = 'tachyon_kv_transfers_total{direction="received",outcome="failed"}'
        failed0 = counter(decode, failed)
        salt = uuid.uuid4().hex
        run_prefill(q4_prefill, kv_address(decode)["kv_address"], prompt, cache_salt=salt)
        assert counter(decode, failed) > failed0
        text, _, cached = run_decode(decode, prompt, cache_salt=salt)
        assert text == ref and cached == 0
        assert_idle(decode)
        assert_idle(q4_decode)
        assert_idle(q4_prefill)
    finally:
        for s in servers:
            assert s.stop() == 0, s.log_text()


# --- Through the router: tachyon route --prefill URL --decode URL (router/pd_route.h) --------

def pd_router(tmp_path, prefill_url, decode_url, *extra):
    """A router over one prefill and one decode replica; returns it once both are up and the
    decode replica's KV listener is known."""
    router = Router(tmp_path, [], ["--prefill", prefill_url, "--decode", decode_url,
                                   "--pd-min-prompt-tokens", "64", *extra],
                    tokenizer=smollm2_path(), chat_template=None)
    router.wait_ready(2)
    router.wait_metrics(lambda m: m.get("tachyon_router_pd_kv_listeners") == 1,
                        "the decode replica's KV listener is not known")
    return router


def pd_outcome(router, outcome):
    return router.metrics().get('tachyon_router_pd_prefills_total{outcome="%s"}' % outcome, 0)


def test_router_prefills_long_prompts_on_the_prefill_replica(decode, prefill, tmp_path):
    router = pd_router(tmp_path, prefill.base, decode.base)
    try:
        prompt = "R. " + TEXT
        ref = reference(decode, prompt)
        kept0 = counter(decode, "tachyon_kv_transfer_blocks_total")
        status, headers, out = router.request("POST", "/v1/chat/completions", chat_body(prompt))
        assert status == 200, out
        assert headers[REPLICA_HEADER] == decode.base  # the decode replica answered ...
        assert out["choices"][0]["message"]["content"] == ref  # ... what a colocated one does
        prompt_tokens = out["usage"]["prompt_tokens"]
        full = prompt_tokens // BLOCK if prompt_tokens % BLOCK else prompt_tokens // BLOCK - 1
        assert out["usage"]["prompt_tokens_details"]["cached_tokens"] == full * BLOCK
        assert counter(decode, "tachyon_kv_transfer_blocks_total") - kept0 == prompt_tokens // BLOCK
        assert pd_outcome(router, "ok") == 1

        # A stream goes the same way and reads the same.
        prompt = "T. " + TEXT
        ref = reference(decode, prompt)
        replica, events, done = read_stream(router.base, "/v1/chat/completions",
                                            chat_body(prompt, stream=True))
        assert done and replica == decode.base
        assert stream_text(events, chat=True) == ref
        assert pd_outcome(router, "ok") == 2

        # A short prompt skips the prefill tier; so does one the decode replica holds already.
        for p in ["Hi.", prompt]:
            sent0 = counter(prefill, 'tachyon_kv_transfers_total{direction="sent"')
            status, headers, out = router.request("POST", "/v1/chat/completions", chat_body(p))
            assert status == 200 and headers[REPLICA_HEADER] == decode.base, out
            assert counter(prefill, 'tachyon_kv_transfers_total{direction="sent"') == sent0
        assert pd_outcome(router, "short") == 2
        assert pd_outcome(router, "ok") == 2
        assert_idle(decode)
        assert_idle(prefill)
    finally:
        assert router.stop() == 0, router.log_text()


def test_router_survives_kill_9_of_either_side_mid_transfer(decode, prefill, tmp_path):
    """The decode replica's KV listener is reached through a relay that holds the transfer
    after 1 MB, so each kill lands mid-transfer."""
    for d in ("d", "p"):
        (tmp_path / d).mkdir()
    kv_port = free_port()
    relay = Relay("127.0.0.1:%d" % kv_port, stall_after=1 << 20)
    victim_decode = SmolLM2Server(
        tmp_path / "d", ["--role", "decode", "--kv-port", str(kv_port),
                         "--kv-advertise", relay.address, "--kv-transfer-timeout", "2"])
    victim_prefill = SmolLM2Server(tmp_path / "p",
                                   ["--role", "prefill", "--max-num-batched-tokens", "16"])
    routers = []
    try:
        assert kv_address(victim_decode)["kv_address"] == relay.address

        def ask(router, prompt, out):
            out.append(router.request("POST", "/v1/chat/completions", chat_body(prompt),
                                      timeout=120))

        # 1. kill -9 of the prefill replica: the decode replica computes what did not arrive.
        routers.append(pd_router(tmp_path, victim_prefill.base, victim_decode.base))
        prompt = "P. " + TEXT
        ref = reference(decode, prompt)
        out = []
        t = threading.Thread(target=ask, args=(routers[0], prompt, out), daemon=True)
        t.start()
        assert relay.stalled.wait(60), "the transfer never reached the relay"
        victim_prefill.proc.send_signal(signal.SIGKILL)
        victim_prefill.proc.wait(30)
        victim_prefill.log.close()
        relay.drop()
        t.join(120)
        assert not t.is_alive(), "the request hung"
        status, headers, body = out[0]
        assert status == 200, body
        assert headers[REPLICA_HEADER] == victim_decode.base
        assert body["choices"][0]["message"]["content"] == ref
        assert pd_outcome(routers[0], "failed") == 1
        assert_idle(victim_decode)

        # 2. kill -9 of the decode replica: the prefill replica's transfer fails, and the router
        # retries the request on the only replica left, the prefill replica itself.
        routers.append(pd_router(tmp_path, prefill.base, victim_decode.base))
        prompt = "D. " + TEXT
        ref = reference(decode, prompt)
        failed = 'tachyon_kv_transfers_total{direction="sent",outcome="failed"}'
        failed0 = counter(prefill, failed)
        out = []
        t = threading.Thread(target=ask, args=(routers[1], prompt, out), daemon=True)
        t.start()
        assert relay.stalled.wait(60), "the transfer never reached the relay"
        victim_decode.proc.send_signal(signal.SIGKILL)
        victim_decode.proc.wait(30)
        victim_decode.log.close()
        relay.close()
        t.join(120)
        assert not t.is_alive(), "the request hung"
        status, headers, body = out[0]
        assert status == 200, body
        assert headers[REPLICA_HEADER] == prefill.base
        assert body["choices"][0]["message"]["content"] == ref
        assert counter(prefill, failed) == failed0 + 1
        assert_idle(prefill)  # no block left behind by the failed transfer
    finally:
        for r in routers:
            r.stop()
        relay.close()
        for s in (victim_prefill, victim_decode):
            if s.proc.poll() is None:
                s.stop()


def test_router_finds_roles_in_etcd_registrations(decode, tmp_path):
    """Replicas registered in etcd carry their role as a label: the router disaggregates."""
    etcd = Etcd(tmp_path)
    servers, router = [], None
    try:
        for role in ("prefill", "decode"):
            port = free_port()
            (tmp_path / role).mkdir()
            servers.append(SmolLM2Server(tmp_path / role, [
                "--role", role, "--port", str(port), "--register-etcd", etcd.url,
                "--advertise-url", "http://127.0.0.1:%d" % port, "--etcd-prefix", "/pd/"]))
        router = Router(tmp_path, [], ["--etcd", etcd.url, "--etcd-prefix", "/pd/",
                                       "--etcd-interval", "0.5", "--pd-min-prompt-tokens", "64"],
                        tokenizer=smollm2_path(), chat_template=None)
        router.wait_ready(2)
        router.wait_metrics(lambda m: m.get("tachyon_router_pd_kv_listeners") == 1,
                            "the decode replica's KV listener is not known")
        prompt = "E. " + TEXT
        ref = reference(decode, prompt)
        status, headers, out = router.request("POST", "/v1/chat/completions", chat_body(prompt))
        assert status == 200, out
        assert headers[REPLICA_HEADER] == "http://127.0.0.1:%d" % servers[1].port
        assert out["choices"][0]["message"]["content"] == ref
        assert pd_outcome(router, "ok") == 1
    finally:
        if router:
            router.stop()
        for s in servers:
            s.stop()
        etcd.stop()


def test_pd_flag_errors():
    if not has_command("route"):
        pytest.skip("no route command")
    cases = [
        (["route", "--prefill", "http://127.0.0.1:1", "--tokenizer", "x"],
         "--prefill needs --decode"),
        (["route", "--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2",
          "--policy", "round_robin"], "--prefill needs --tokenizer"),
        (["route", "--decode", "ftp://x"], "http://HOST:PORT"),
        (["serve", "-m", "x", "--kv-advertise", "h:1"], "--kv-advertise needs --role decode"),
        (["serve", "-m", "x", "--role", "decode", "--kv-advertise", "h:port"], "HOST:PORT"),
        (["serve", "-m", "x", "--role", "decode", "--label", "role=prefill"], "contradicts"),
    ]
    for args, needle in cases:
        out = subprocess.run([str(binary_path()), *args], capture_output=True, text=True,
                             timeout=30)
        assert out.returncode == 2 and needle in out.stderr, (args, out.stderr)
