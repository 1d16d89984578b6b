"""Replica discovery for `tachyon route`: replicas (stories260K) that register themselves in a
private etcd (`tachyon serve --register-etcd`), join and leave the router's set (SIGTERM:
deregistered before the replica exits; kill -9: gone when its lease expires) with no failed
request, an etcd outage during which the router keeps its last-known set, and `--dns` over a
name the machine resolves offline (localhost)."""

import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import MODEL_NAME, Server, binary_path
from etcd_server import Etcd, free_port
from test_router import Router

TTL = "2"  # --etcd-ttl: etcd's minimum lease


@pytest.fixture(scope="module")
def etcd(tmp_path_factory):
    e = Etcd(tmp_path_factory.mktemp("etcd"))
    yield e
    e.stop()


def replica(tmp_path, etcd, name, prefix, labels=(), extra=()):
    port = free_port()
    d = tmp_path / name
    d.mkdir()
    args = ["--port", str(port), "--register-etcd", etcd.url,
            "--advertise-url", f"http://127.0.0.1:{port}", "--etcd-prefix", prefix,
            "--etcd-ttl", TTL, *extra]
    for label in labels:
        args += ["--label", label]
    return Server(d, args)


def url_of(server):
    return f"http://127.0.0.1:{server.port}"


def members(router):
    """The replica URLs in the router's set (each has a replica_up gauge)."""
    out = []
    for key in router.metrics():
        m = re.fullmatch(r'tachyon_router_replica_up\{replica="([^"]+)"\}', key)
        if m:
            out.append(m.group(1))
    return sorted(out)


def wait_members(router, want, what, timeout=30):
    want = sorted(want)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if members(router) == want:
            return
        time.sleep(0.02)
    raise AssertionError(f"router set {members(router)} != {want} ({what})\n{router.log_text()}")


class Load:
    """Short completions through the router from 3 threads until stop(); counts answers by
    status and which replica served them."""

    def __init__(self, router):
        self.router = router
        self.statuses = {}
        self.served = {}
        self.errors = []
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(3)]
        for t in self.threads:
            t.start()

    def run(self, i):
        n = 0
        while not self.done.is_set():
            body = {"model": MODEL_NAME, "prompt": f"Load {i} {n}: Once upon a time",
                    "max_tokens": 8, "temperature": 0}
            status, headers, answer = self.router.request("POST", "/v1/completions", body)
            with self.lock:
                self.statuses[status] = self.statuses.get(status, 0) + 1
                if status == 200:
                    replica = headers.get("X-Tachyon-Replica")
                    self.served[replica] = self.served.get(replica, 0) + 1
                else:
                    self.errors.append(answer)
            n += 1

    def count(self, url):
        with self.lock:
            return self.served.get(url, 0)

    def wait_served(self, url, n=3, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline and self.count(url) < n:
            time.sleep(0.02)
        assert self.count(url) >= n, (url, self.served)

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join()
        assert self.statuses and set(self.statuses) == {200}, (self.statuses, self.errors[:3])


def etcd_router(tmp_path, etcd, prefix, extra=()):
    return Router(tmp_path, [], ["--etcd", etcd.url, "--etcd-prefix", prefix, "--etcd-interval",
                                 "0.5", "--policy", "round_robin", *extra])


def test_replicas_join_and_leave_through_etcd(tmp_path, etcd):
    prefix = "/join-leave/"
    a = replica(tmp_path, etcd, "a", prefix, extra=["--max-num-seqs", "1"])
    b = replica(tmp_path, etcd, "b", prefix, ["version=v2"])
    router = etcd_router(tmp_path, etcd, prefix)
    servers = [a, b]
    load = None
    try:
        # (a) two replicas join through etcd, the router serves through both.
        wait_members(router, [url_of(a), url_of(b)], "two registered replicas")
        router.wait_ready(2)
        m = router.metrics()
        assert m['tachyon_router_discovery_up{source="etcd"}'] == 1
        assert m['tachyon_router_discovery_replicas{source="etcd"}'] == 2
        # The registration's labels reach the router (canary weights work on them).
        assert m[f'tachyon_router_replica_labels{{replica="{url_of(b)}",version="v2"}}'] == 1
        load = Load(router)
        load.wait_served(url_of(a))
        load.wait_served(url_of(b))
        # (b) a third replica joining later gets traffic.
        c = replica(tmp_path, etcd, "c", prefix)
        servers.append(c)
        wait_members(router, [url_of(s) for s in servers], "the third replica")
        load.wait_served(url_of(c))
        # (c) SIGTERM: deregistered (out of the router's set) before it exits; nothing fails.
        # Long requests queued on it (--max-num-seqs 1) keep it draining meanwhile.
        slow = {"model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 400,
                "temperature": 0, "ignore_eos": True}
        pending = [threading.Thread(target=lambda: a.request("POST", "/v1/completions", slow))
                   for _ in range(4)]
        for t in pending:
            t.start()
        deadline = time.time() + 30
        while a.metrics().get("tachyon_num_requests_waiting", 0) < 2 and time.time() < deadline:
            time.sleep(0.01)
        a.proc.send_signal(signal.SIGTERM)
        wait_members(router, [url_of(b), url_of(c)], "the SIGTERMed replica deregistered")
        assert a.proc.poll() is None, "the replica exited before the router dropped it"
        for t in pending:
            t.join()
        assert a.proc.wait(timeout=30) == 0
        servers.remove(a)
        # (d) kill -9: no deregistration; the router drops it when its lease expires, and
        # requests keep succeeding meanwhile (retried on the other replica).
        served_b = load.count(url_of(b))
        c.proc.kill()
        c.proc.wait()
        servers.remove(c)
        wait_members(router, [url_of(b)], "the killed replica's lease expired")
        load.wait_served(url_of(b), served_b + 3)
        load.stop()
        load = None
        assert "deregistered from etcd" in a.log_text()
        log = router.log_text()
        assert f"replica {url_of(c)} left" in log and f"replica {url_of(a)} left" in log
    finally:
        if load:
            load.done.set()
        router.stop()
        for s in servers:
            s.stop()


def test_etcd_outage_keeps_the_last_set_and_registrations_return(tmp_path, etcd):
    prefix = "/outage/"
    a = replica(tmp_path, etcd, "a", prefix)
    b = replica(tmp_path, etcd, "b", prefix)
    router = etcd_router(tmp_path, etcd, prefix)
    load = None
    try:
        want = [url_of(a), url_of(b)]
        wait_members(router, want, "two registered replicas")
        router.wait_ready(2)
        load = Load(router)
        etcd.stop()
        router.wait_metrics(lambda m: m['tachyon_router_discovery_up{source="etcd"}'] == 0,
                            "discovery down while etcd is stopped")
        # Outlive the leases' TTL: the router still serves through both replicas.
        time.sleep(float(TTL) + 0.5)
        served = {u: load.count(u) for u in want}
        for u in want:
            load.wait_served(u, served[u] + 3)
        assert members(router) == sorted(want)
        etcd.start()
        m = router.wait_metrics(lambda m: m['tachyon_router_discovery_up{source="etcd"}'] == 1,
                                "discovery back with etcd")
        assert m['tachyon_router_discovery_failures_total{source="etcd"}'] >= 1
        # Both replicas registered again (one key each: no duplicate) and still served.
        deadline = time.time() + 30
        while time.time() < deadline and not all(
                s.log_text().count("registered in etcd at") >= 2 for s in (a, b)):
            time.sleep(0.05)
        for s in (a, b):
            assert s.log_text().count("registered in etcd at") >= 2, s.log_text()
        assert sorted(etcd.keys(prefix)) == sorted(f"{prefix}127.0.0.1:{s.port}" for s in (a, b))
        wait_members(router, want, "the same two replicas after the outage")
        m = router.metrics()
        assert m['tachyon_router_discovery_replicas{source="etcd"}'] == 2
        served = {u: load.count(u) for u in want}
        for u in want:
            load.wait_served(u, served[u] + 3)
        load.stop()
        load = None
    finally:
        if load:
            load.done.set()
        router.stop()
        a.stop()
        b.stop()


def settled(routers, urls, timeout=20):
    """Waits until nothing runs on any replica by every router's account (its own in-flight
    and the replicas' reported load) and both routers applied the same KV events, unchanged
    over two polls: the state every router scores is then the same."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        ms = [r.metrics() for r in routers]
        idle = all(m.get(f'tachyon_router_{name}{{replica="{u}"}}', 0) == 0
                   for m in ms for u in urls
                   for name in ("replica_in_flight", "replica_reported_load"))
        applied = [tuple(m.get(f'tachyon_router_kv_events_applied_total{{replica="{u}"}}', 0)
                         for u in urls) for m in ms]
        same = all(a == applied[0] for a in applied)
        if idle and same and applied[0] == last:
            return
        last = applied[0] if same else None
        time.sleep(0.05)
    raise AssertionError(f"routers did not settle: {applied}")


def test_two_routers_over_the_same_replicas_choose_alike(tmp_path, etcd):
    """Two kv routers discover the same three replicas through etcd; one has routed requests
    the other never saw. Then both get the same sequence of requests (each request to one, then
    the other, in turns, once the replicas are idle and both routers applied the same events):
    prompt families sharing a multi-block prefix, distinct long prompts and prompts shorter
    than one block. Each request is served by the same replica through either router."""
    prefix = "/two-routers/"
    servers = [replica(tmp_path, etcd, name, prefix) for name in "abc"]
    urls = [url_of(s) for s in servers]
    routers = []
    try:
        for _ in range(2):
            routers.append(Router(tmp_path, [], ["--etcd", etcd.url, "--etcd-prefix", prefix,
                                                 "--etcd-interval", "0.5", "--seed", "7"]))
        for r in routers:
            wait_members(r, urls, "three registered replicas")
            r.wait_ready(3)
            r.wait_metrics(lambda m: m.get('tachyon_router_kv_index_mode{mode="events"}') == 3,
                           "events from the three replicas")

        def ask(router, prompt):
            body = {"model": MODEL_NAME, "prompt": prompt, "max_tokens": 4, "temperature": 0}
            status, headers, answer = router.request("POST", "/v1/completions", body)
            assert status == 200, answer
            return headers["X-Tachyon-Replica"]

        # Router A's own history: short prompts router B never sees.
        for i in range(5):
            ask(routers[0], f"Warm {i}")
        families = ["Once upon a time there was a little girl named Lily who loved to play "
                    "in the park with her big red ball every single day",
                    "One day a small brown dog found a shiny stone by the river and carried "
                    "it home to show his friend the old cat",
                    "Tom and his mom went to the store to buy apples bananas and a big cake "
                    "for the birthday party of his sister"]
        sequence = []
        for k in range(4):
            for f, family in enumerate(families):
                sequence.append(f"{family}. Then {k}")
            sequence.append(f"Hi {k}")  # shorter than one block
            sequence.append(f"Story {k}: a bird, a tree and a boat sailed far away across the "
                            f"wide blue sea to find the land of sweet honey and warm sun {k}")
        chosen = []
        for i, prompt in enumerate(sequence):
            order = routers if i % 2 == 0 else routers[::-1]
            settled(routers, urls)
            first = ask(order[0], prompt)
            settled(routers, urls)
            second = ask(order[1], prompt)
            assert first == second, (i, prompt, first, second)
            chosen.append(first)
        # Each family stays where its first request went (the prefix is cached there), and the
        # prompts do not all go to one replica. (Not necessarily to all three: in one
        # fresh-clone CI run on the loaded 2-core machine the 20 requests went to two of them,
        # both routers agreeing on each; what kept the third out was not recorded.)
        per_round = len(families) + 2
        for f in range(len(families)):
            assert len({chosen[k * per_round + f] for k in range(4)}) == 1, \
                list(zip(sequence, chosen))
        assert len(set(chosen)) >= 2, chosen
    finally:
        for r in routers:
            r.stop()
        for s in servers:
            s.stop()


def test_dns_discovery_over_localhost(tmp_path):
    port = free_port()
    (tmp_path / "r").mkdir()
    r = Server(tmp_path / "r", ["--port", str(port)])
    router = Router(tmp_path, [], ["--dns", f"localhost:{port}", "--dns-interval", "0.2",
                                   "--policy", "round_robin"])
    try:
        # localhost is 127.0.0.1 and maybe ::1; the replica listens on 127.0.0.1 only.
        router.wait_metrics(lambda m: m.get(f'tachyon_router_replica_up{{replica="http://'
                                            f'127.0.0.1:{port}"}}') == 1, "the replica up")
        status, headers, _ = router.request(
            "POST", "/v1/completions",
            {"model": MODEL_NAME, "prompt": "Once", "max_tokens": 2, "temperature": 0})
        assert status == 200
        assert headers["X-Tachyon-Replica"] == f"http://127.0.0.1:{port}"
        assert set(members(router)) <= {f"http://127.0.0.1:{port}", f"http://[::1]:{port}"}
        assert router.metrics()['tachyon_router_discovery_up{source="dns"}'] == 1
    finally:
        router.stop()
        r.stop()


def run_cli(*args):
    return subprocess.run([str(binary_path()), *args], capture_output=True, text=True,
                          timeout=60)


def test_bad_discovery_flags(tmp_path):
    for args, message in [
        (["route", "--policy", "round_robin"], "name the replicas"),
        (["route", "--policy", "round_robin", "--etcd", "http://127.0.0.1:2379", "--replica",
          "http://127.0.0.1:1"], "exclude each other"),
        (["route", "--policy", "round_robin", "--dns", "localhost:1", "--etcd",
          "http://127.0.0.1:2379"], "exclude each other"),
        (["route", "--policy", "round_robin", "--etcd", "127.0.0.1:2379"],
         "is not etcd's client URL"),
        (["route", "--policy", "round_robin", "--dns", "localhost"], "is not NAME:PORT"),
        (["route", "--policy", "round_robin", "--dns", "localhost:99999"], "not in [1, 65535]"),
        (["serve", "-m", "x.gguf", "--register-etcd", "http://127.0.0.1:2379"],
         "--register-etcd needs --advertise-url"),
        (["serve", "-m", "x.gguf", "--advertise-url", "http://127.0.0.1:8080"],
         "--advertise-url needs --register-etcd"),
        (["serve", "-m", "x.gguf", "--register-etcd", "etcd", "--advertise-url",
          "http://127.0.0.1:8080"], "is not etcd's client URL"),
    ]:
        out = run_cli(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert message in out.stderr, (args, out.stderr)
