"""`tachyon route` over replicas on two "hosts": network namespaces joined to the root namespace
by veth pairs on private 10.201.X.0/24 subnets. The router runs in the root namespace, each
replica (`tachyon serve`, stories260K) inside its namespace on its own address.

- two hosts serve chat, completions and streams through the router, text as each replica's own;
- a partition (iptables DROP in the replica's namespace: packets vanish, nothing is refused —
  the slow failure) in the middle of a run: the router's timeouts take the replica out, its
  streams are migrated, no request is lost and every greedy text equals the fault-free one;
  once the partition heals the replica serves again;
- a slow link (tc: netem delay where the kernel has it, else a tbf rate limit) still serves
  the same text;
- prefill/decode disaggregation across a veth pair (decode replica in a namespace, prefill
  replica in the root one): a slow link (netem delay 50 ms, rate 20 Mbit/s) transfers every
  block (tbf's rate limit where the kernel lacks netem); a link that goes silent mid-transfer
  (iptables DROP of the KV port) ends in the decode replica recomputing what did not arrive,
  with the same text and no block left in use.

Needs root and the `ip`, `iptables` and `tc` commands (iproute2, iptables); skips, saying why,
without them or when namespaces cannot be created. Namespaces, links and processes are removed
when the module ends, also after a failure.
"""

import http.client
import json
import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import API_KEY, MODEL_NAME, Server
from test_router import REPLICA_HEADER, Router, read_stream, stream_text

NS_PREFIX = "tachyon-test-"
# Tokens of a stream still running when the partition starts (the replicas' context allows it).
LONG = 1600


def sh(*args, check=True):
    """Runs a command; returns its CompletedProcess (stdout + stderr as text)."""
    out = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {out.stderr.strip() or out.stdout.strip()}")
    return out


def remove_stale_namespaces():
    """Namespaces of earlier runs whose process is gone (a run killed before its cleanup)."""
    for line in sh("ip", "netns", "list", check=False).stdout.splitlines():
        m = re.match(rf"{NS_PREFIX}(\d+)-\d+", line)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            sh("ip", "netns", "del", m.group(0), check=False)


def free_subnets(n):
    """`n` third octets X whose 10.201.X.0/24 no interface uses."""
    used = set(re.findall(r"inet 10\.201\.(\d+)\.", sh("ip", "-o", "addr").stdout))
    start = 10 + (os.getpid() % 100) * 2
    free = [x for x in list(range(start, 250)) + list(range(10, start)) if str(x) not in used]
    if len(free) < n:
        pytest.skip("no free 10.201.X.0/24 subnet for the test namespaces")
    return free[:n]


class Host:
    """A network namespace joined to the root namespace by a veth pair: 10.201.X.1 on the root
    side, 10.201.X.2 (`addr`) inside."""

    def __init__(self, index, subnet):
        self.ns = f"{NS_PREFIX}{os.getpid()}-{index}"
        tag = f"{os.getpid() % 100000}{index}"
        self.root_if, self.ns_if = f"tr{tag}", f"tn{tag}"  # at most 15 characters
        self.addr = f"10.201.{subnet}.2"
        self.partitioned = False
        sh("ip", "netns", "add", self.ns)
        try:
            sh("ip", "link", "add", self.root_if, "type", "veth", "peer", "name", self.ns_if)
            sh("ip", "link", "set", self.ns_if, "netns", self.ns)
            sh("ip", "addr", "add", f"10.201.{subnet}.1/24", "dev", self.root_if)
            sh("ip", "link", "set", self.root_if, "up")
            self.run("ip", "addr", "add", f"{self.addr}/24", "dev", self.ns_if)
            self.run("ip", "link", "set", self.ns_if, "up")
            self.run("ip", "link", "set", "lo", "up")
        except Exception:
            self.remove()
            raise

    def run(self, *args, check=True):
        return sh("ip", "netns", "exec", self.ns, *args, check=check)

    def partition(self):
        """Drops every packet to and from the root namespace (no RST, no ICMP: they vanish);
        what leaves the namespace first, so that its streams stop at once."""
        self.run("iptables", "-I", "OUTPUT", "-o", self.ns_if, "-j", "DROP")
        self.run("iptables", "-I", "INPUT", "-i", self.ns_if, "-j", "DROP")
        self.partitioned = True

    def heal(self):
        self.run("iptables", "-D", "OUTPUT", "-o", self.ns_if, "-j", "DROP", check=False)
        self.run("iptables", "-D", "INPUT", "-i", self.ns_if, "-j", "DROP", check=False)
        self.partitioned = False

    def slow_link(self):
        """Slows what leaves the namespace (the replica's answers): a 40 ms delay where the
        kernel has netem, else a 1 Mbit/s rate limit (tbf). Returns the qdisc's kind."""
        if self.run("tc", "qdisc", "add", "dev", self.ns_if, "root", "netem", "delay", "40ms",
                    check=False).returncode == 0:
            return "netem"
        self.run("tc", "qdisc", "add", "dev", self.ns_if, "root", "tbf", "rate", "1mbit",
                 "burst", "2kb", "latency", "5s")
        return "tbf"

    def overlimits(self):
        """Packets the rate limit held back (tbf's overlimits counter)."""
        text = self.run("tc", "-s", "qdisc", "show", "dev", self.ns_if).stdout
        m = re.search(r"overlimits (\d+)", text)
        return int(m.group(1)) if m else 0

    def fast_link(self):
        self.run("tc", "qdisc", "del", "dev", self.ns_if, "root", check=False)

    def remove(self):
        sh("ip", "netns", "del", self.ns, check=False)  # takes its veth end, and so the pair
        sh("ip", "link", "del", self.root_if, check=False)


def require_netns():
    if os.geteuid() != 0:
        pytest.skip("network namespace tests need root (ip netns, iptables, tc)")
    missing = [c for c in ("ip", "iptables", "tc") if shutil.which(c) is None]
    if missing:
        pytest.skip(f"network namespace tests need {', '.join(missing)} "
                    "(apt packages iproute2, iptables; scripts/setup.sh installs them)")
    probe = f"{NS_PREFIX}{os.getpid()}-probe"
    out = sh("ip", "netns", "add", probe, check=False)
    if out.returncode != 0:
        pytest.skip(f"cannot create a network namespace here: {out.stderr.strip()}")
    try:
        rules = sh("ip", "netns", "exec", probe, "iptables", "-L", "-n", check=False)
        if rules.returncode != 0:
            pytest.skip(f"iptables does not work in a network namespace: {rules.stderr.strip()}")
    finally:
        sh("ip", "netns", "del", probe, check=False)


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    """Two hosts, one replica on each, and a round-robin router in the root namespace whose
    timeouts find a silent replica within seconds (a stream silent for 3 s, a connection not
    made in 1 s, a probe not answered in 2 s)."""
    require_netns()
    remove_stale_namespaces()
    hosts, servers, router = [], [], None
    try:
        for i, subnet in enumerate(free_subnets(2)):
            hosts.append(Host(i, subnet))
        for h in hosts:
            servers.append(Server(tmp_path_factory.mktemp(h.ns),
                                  ["--shutdown-timeout", "2", "--max-model-len", "2048"],
                                  host=h.addr, launcher=("ip", "netns", "exec", h.ns)))
        router = Router(tmp_path_factory.mktemp("netns-router"), [s.base for s in servers],
                        ["--policy", "round_robin", "--probe-timeout", "2", "--connect-timeout",
                         "1", "--read-timeout", "10", "--stream-idle-timeout", "3",
                         "--max-retries", "4"])
        router.wait_ready(2)
        yield hosts, servers, router
        assert router.stop() == 0, router.log_text()
        router = None
        for s in servers:
            assert s.stop() == 0, s.log_text()
        servers = []
    finally:
        if router:
            router.stop()
        for s in servers:
            s.stop()
        for h in hosts:
            h.remove()


def generation(i, stream, chat=False, max_tokens=24):
    """(path, body) of request i: greedy, exactly `max_tokens` tokens."""
    body = {"model": MODEL_NAME, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    if chat:
        body["messages"] = [{"role": "user", "content": f"Tell story {i} about Lily."}]
    else:
        body["prompt"] = f"Story {i}: Once upon a time"
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    return ("/v1/chat/completions" if chat else "/v1/completions"), body


def answer(target, path, body):
    """(replica that served it, text, completion tokens) of one request to `target` (a Router
    or a Server)."""
    chat = path == "/v1/chat/completions"
    if body.get("stream"):
        replica, events, done = read_stream(target.base, path, body)
        assert done and not any("error" in e for e in events), events
        usage = [e["usage"] for e in events if e.get("usage")][-1]
        return replica, stream_text(events, chat), usage["completion_tokens"]
    status, headers, a = target.request("POST", path, body)
    assert status == 200, a
    c = a["choices"][0]
    return (headers.get(REPLICA_HEADER), c["message"]["content"] if chat else c["text"],
            a["usage"]["completion_tokens"])


def up_of(router, server):
    return router.metrics().get(f'tachyon_router_replica_up{{replica="{server.base}"}}')


def test_two_hosts_serve_chat_completions_and_streams(net):
    hosts, servers, router = net
    assert {s.base.split("//")[1].rsplit(":", 1)[0] for s in servers} == {h.addr for h in hosts}
    served = set()
    for i, (chat, stream) in enumerate([(c, s) for c in (False, True) for s in (False, True)] * 2):
        path, body = generation(i, stream, chat)
        replica, text, tokens = answer(router, path, body)
        served.add(replica)
        origin = next(s for s in servers if s.base == replica)
        assert tokens == 24
        assert text == answer(origin, path, body)[1], (i, chat, stream)
    assert served == {s.base for s in servers}  # round robin: both hosts


def open_stream(base, path, body):
    """POSTs a streamed request and returns (connection, response) once the head arrived: through
    the router, that is when the replica's first event reached the client."""
    host, port = base.split("//", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json",
                                                  "Authorization": f"Bearer {API_KEY}"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    return conn, resp


def finish_stream(conn, resp, chat):
    """(replica, text, completion tokens) of a stream opened with open_stream."""
    events, done = [], False
    for raw in resp.read().decode().split("\n\n"):
        if raw == "data: [DONE]":
            done = True
        elif raw.startswith("data: "):
            events.append(json.loads(raw[len("data: "):]))
    conn.close()
    assert done and not any("error" in e for e in events), events
    usage = [e["usage"] for e in events if e.get("usage")][-1]
    return resp.getheader(REPLICA_HEADER), stream_text(events, chat), usage["completion_tokens"]


def test_partition_mid_run_loses_nothing_and_heals(net):
    hosts, servers, router = net
    victim_host, victim, healthy = hosts[0], servers[0], servers[1]
    router.wait_ready(2)
    # Running when the partition starts: 2 long streams (chat, completions), 2 short streams and
    # 2 short plain requests; then streams opened one by one until one is served by the victim,
    # which is partitioned as soon as that stream's first event reached the client (LONG tokens:
    # most of it is still to come, on any machine). Arriving during the partition: 4 short
    # requests.
    before_jobs = [generation(i, stream=i < 4, chat=i % 2 == 1, max_tokens=LONG if i < 2 else 24)
                   for i in range(6)]
    watch_jobs = [generation(100 + k, stream=True, max_tokens=LONG) for k in range(4)]
    during_jobs = [generation(200 + i, stream=i % 2 == 0, chat=i >= 2) for i in range(4)]
    jobs = before_jobs + watch_jobs + during_jobs
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        before = router.metrics()
        futures = {k: pool.submit(answer, router, *job) for k, job in enumerate(before_jobs)}
        try:
            for k, (path, body) in enumerate(watch_jobs):
                conn, resp = open_stream(router.base, path, body)
                futures[len(before_jobs) + k] = pool.submit(finish_stream, conn, resp, False)
                if resp.getheader(REPLICA_HEADER) == victim.base:
                    victim_host.partition()
                    break
            assert victim_host.partitioned, "no stream was served by the replica to partition"
            futures.update({len(before_jobs) + len(watch_jobs) + k: pool.submit(answer, router, *j)
                            for k, j in enumerate(during_jobs)})
            results = {k: f.result() for k, f in futures.items()}
            assert up_of(router, victim) == 0
        finally:
            victim_host.heal()
        # Fault-free references, straight from the other replica.
        want = dict(zip(results, pool.map(lambda k: answer(healthy, *jobs[k])[1], results)))
    for k, (_, text, tokens) in results.items():
        assert tokens == jobs[k][1]["max_tokens"], k
        assert text == want[k], k
    m = router.metrics()
    delta = {k: v - before.get(k, 0) for k, v in m.items()}
    # The silent replica's attempts ended by a timeout (nothing refused it), its streams in
    # flight were migrated, nothing was rejected or cut.
    assert delta.get(f'tachyon_router_requests_total{{replica="{victim.base}",'
                     f'outcome="timeout"}}', 0) >= 1, delta
    assert delta["tachyon_router_migrations_total"] >= 1, delta
    assert delta["tachyon_router_broken_streams_total"] == 0, delta
    assert sum(v for k, v in delta.items() if k.startswith("tachyon_router_rejected_total")) == 0
    # Healed: the probes bring it back and it serves again, with the same text.
    router.wait_metrics(lambda m: up_of(router, victim) == 1, "the healed replica back up")
    served = set()
    for i in range(4):
        path, body = generation(300 + i, stream=i % 2 == 0)
        replica, text, _ = answer(router, path, body)
        served.add(replica)
        assert text == answer(healthy, path, body)[1]
    assert victim.base in served


def test_slow_link_still_serves(net):
    hosts, servers, router = net
    slow_host, slow = hosts[1], servers[1]
    router.wait_ready(2)
    kind = slow_host.slow_link()
    try:
        jobs = [generation(i, stream, chat, max_tokens=64)
                for i, (chat, stream) in enumerate([(False, True), (True, True), (False, False),
                                                    (True, False)] * 2)]
        before = router.metrics()
        lock = threading.Lock()
        got = []
        with ThreadPoolExecutor(max_workers=8) as pool:
            def one(job):
                r = answer(router, *job)
                with lock:
                    got.append(r[0])
                return r
            results = list(pool.map(one, jobs))
        assert slow.base in got
        for job, (replica, text, tokens) in zip(jobs, results):
            assert tokens == 64
            origin = next(s for s in servers if s.base == replica)
            assert text == answer(origin, *job)[1], job
        m = router.metrics()
        failed = sum(v - before.get(k, 0) for k, v in m.items()
                     if k.startswith("tachyon_router_requests_total") and slow.base in k
                     and 'outcome="ok"' not in k)
        assert failed == 0  # slow, not failed: no attempt on it timed out or broke
        if kind == "tbf":
            assert slow_host.overlimits() > 0  # the link did hold packets back
    finally:
        slow_host.fast_link()


# Prefill/decode disaggregation across the veth pair (docs/pd.md): the decode replica in a
# namespace of its own (its KV listener on the namespace's address), the prefill replica in the
# root namespace, so the KV transfer leaves through the root side of the pair, where tc shapes it.
PD_BLOCK = 16
PD_STORY = ("Once upon a time there was a little girl named Lily. She liked to play in the park "
            "with her dog and her red ball. ")


def pd_counter(server, name):
    return sum(v for k, v in server.metrics().items() if k.startswith(name))


def pd_complete(server, prompt, max_tokens=24, **extra):
    """(text, prompt tokens, cached tokens) of a greedy completion."""
    status, _, out = server.request("POST", "/v1/completions",
                                    {"model": MODEL_NAME, "prompt": prompt, "temperature": 0,
                                     "max_tokens": max_tokens, **extra}, timeout=120)
    assert status == 200, out
    u = out["usage"]
    return (out["choices"][0]["text"], u["prompt_tokens"],
            (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0))


def pd_idle(server):
    """No request running and no KV block in use on `server` (cached blocks are free)."""
    for _ in range(600):
        _, _, info = server.request("GET", "/v1/replica_info")
        load = info["load"]
        if load["running"] == 0 and load["waiting"] == 0 and load["kv_usage"] == 0:
            return
        time.sleep(0.05)
    raise AssertionError(info)


@pytest.fixture(scope="module")
def pd_net(tmp_path_factory):
    require_netns()
    remove_stale_namespaces()
    host, servers = None, []
    try:
        host = Host(9, free_subnets(1)[0])
        common = ["--shutdown-timeout", "2", "--max-model-len", "2048"]
        servers.append(Server(tmp_path_factory.mktemp("pd-decode"),
                              [*common, "--role", "decode", "--kv-port", "0",
                               "--kv-transfer-timeout", "2"],
                              host=host.addr, launcher=("ip", "netns", "exec", host.ns)))
        servers.append(Server(tmp_path_factory.mktemp("pd-prefill"),
                              [*common, "--role", "prefill", "--max-num-batched-tokens", "64"]))
        yield host, servers[0], servers[1]
        for s in servers:
            assert s.stop() == 0, s.log_text()
        servers = []
    finally:
        for s in servers:
            s.stop()
        if host:
            host.remove()


def pd_shape(host, delay, rate, queue="1s"):
    """Shapes what the root namespace sends into `host` (the KV transfer's direction): netem
    with `delay` and `rate` where the kernel has it, else a tbf `rate` limit (no delay) queueing
    at most `queue` of it. Returns the qdisc's kind."""
    if sh("tc", "qdisc", "replace", "dev", host.root_if, "root", "netem", *delay, "rate", rate,
          check=False).returncode == 0:
        return "netem"
    sh("tc", "qdisc", "replace", "dev", host.root_if, "root", "tbf", "rate", rate, "burst",
       "32kb", "latency", queue)
    return "tbf"


def pd_kv_silence(host, port, on):
    """Drops (on) or lets through (off) the packets of the decode replica's KV listener only,
    inside its namespace: its HTTP port still answers."""
    op = "-I" if on else "-D"
    host.run("iptables", op, "INPUT", "-i", host.ns_if, "-p", "tcp", "--dport", str(port), "-j",
             "DROP", check=on)
    host.run("iptables", op, "OUTPUT", "-o", host.ns_if, "-p", "tcp", "--sport", str(port), "-j",
             "DROP", check=on)


def pd_unshape(host):
    sh("tc", "qdisc", "del", "dev", host.root_if, "root", check=False)


def pd_prefill(prefill, decode, prompt, salt):
    _, _, info = decode.request("GET", "/v1/replica_info")
    status, _, out = prefill.request(
        "POST", "/v1/completions",
        {"model": MODEL_NAME, "prompt": prompt, "temperature": 0, "max_tokens": 1,
         "cache_salt": salt,
         "kv_transfer_params": {"address": info["kv_address"], "transfer_id": salt}},
        timeout=120)
    assert status == 200, out


def test_pd_slow_link_transfers_every_block(pd_net):
    """netem delay 50 ms, rate 20 Mbit/s (without netem: a tbf 20 Mbit/s limit): slow, not
    stalled; every block arrives, none is recomputed, the text is the colocated one."""
    host, decode, prefill = pd_net
    prompt = "Slow. " + PD_STORY * 12
    ref, n, _ = pd_complete(decode, prompt, cache_salt="ref-" + uuid.uuid4().hex)
    assert n >= 10 * PD_BLOCK, n
    ok0 = pd_counter(prefill, 'tachyon_kv_transfers_total{direction="sent",outcome="ok"}')
    failed0 = pd_counter(prefill, 'tachyon_kv_transfers_total{direction="sent",outcome="failed"}')
    salt = uuid.uuid4().hex
    pd_shape(host, ("delay", "50ms"), "20mbit")
    try:
        pd_prefill(prefill, decode, prompt, salt)
        text, n, cached = pd_complete(decode, prompt, cache_salt=salt)
    finally:
        pd_unshape(host)
    assert text == ref
    full = n // PD_BLOCK if n % PD_BLOCK else n // PD_BLOCK - 1  # the last token is computed
    assert cached == full * PD_BLOCK, (cached, n)
    assert pd_counter(prefill,
                      'tachyon_kv_transfers_total{direction="sent",outcome="ok"}') == ok0 + 1
    assert pd_counter(prefill,
                      'tachyon_kv_transfers_total{direction="sent",outcome="failed"}') == failed0
    pd_idle(decode)
    pd_idle(prefill)


def test_pd_link_dead_mid_transfer_recomputes(pd_net):
    """A 2 Mbit/s link (a 1,000-token prompt's KV takes seconds) that goes silent once the first
    blocks arrived (iptables DROP of the KV port in the decode replica's namespace: nothing is
    refused, packets vanish): both sides end the transfer within their stall bounds, the prefill
    replica answers, the decode replica computes what did not arrive, with the colocated text,
    and neither side keeps a block in use."""
    host, decode, prefill = pd_net
    prompt = "Dead. " + PD_STORY * 30
    ref, n, _ = pd_complete(decode, prompt, cache_salt="ref-" + uuid.uuid4().hex)
    _, _, info = decode.request("GET", "/v1/replica_info")
    kv_port = int(info["kv_address"].rsplit(":", 1)[1])
    sent_failed = 'tachyon_kv_transfers_total{direction="sent",outcome="failed"}'
    received_failed = 'tachyon_kv_transfers_total{direction="received",outcome="failed"}'
    failed0, received_failed0 = pd_counter(prefill, sent_failed), pd_counter(decode, received_failed)
    kept0 = pd_counter(decode, "tachyon_kv_transfer_blocks_total")
    inbox0 = pd_counter(decode, "tachyon_kv_inbox_blocks")
    salt = uuid.uuid4().hex
    pd_shape(host, (), "2mbit", queue="50ms")  # a short queue: the HTTP port stays responsive
    try:
        done = threading.Event()
        t = threading.Thread(target=lambda: (pd_prefill(prefill, decode, prompt, salt),
                                             done.set()), daemon=True)
        t.start()
        for _ in range(1200):  # the first blocks are in the decode replica's inbox
            if pd_counter(decode, "tachyon_kv_inbox_blocks") > inbox0:
                break
            time.sleep(0.02)
        pd_kv_silence(host, kv_port, True)
        for _ in range(1200):  # the decode replica ends its side (its own stall bound)
            if pd_counter(decode, received_failed) > received_failed0:
                break
            time.sleep(0.05)
        t.join(120)
        assert done.is_set(), "the prefill replica did not answer"
    finally:
        pd_kv_silence(host, kv_port, False)
        pd_unshape(host)
    assert pd_counter(prefill, sent_failed) == failed0 + 1
    assert pd_counter(decode, received_failed) == received_failed0 + 1
    text, n, cached = pd_complete(decode, prompt, cache_salt=salt)
    kept = pd_counter(decode, "tachyon_kv_transfer_blocks_total") - kept0
    assert text == ref
    assert 0 < kept < n // PD_BLOCK  # the dead link cost blocks ...
    assert cached == kept * PD_BLOCK  # ... and every block kept was used, none other
    pd_idle(decode)
    pd_idle(prefill)
