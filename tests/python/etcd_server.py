"""A private etcd (Debian's etcd-server) for tests: its own data directory and free loopback
ports; stop() and start() again on the same data directory model an etcd restart. Tests that
need it skip with a message when the etcd binary is absent (scripts/setup.sh installs it)."""

import base64
import json
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_etcd():
    path = shutil.which("etcd")
    if path is None:
        pytest.skip("etcd not installed (Debian's etcd-server; scripts/setup.sh installs it)")
    return path


class Etcd:
    def __init__(self, tmp_dir):
        self.binary = require_etcd()
        self.dir = Path(tmp_dir)
        self.data_dir = self.dir / "etcd-data"
        self.client_port = free_port()
        self.peer_port = free_port()
        self.url = f"http://127.0.0.1:{self.client_port}"
        self.proc = None
        self.log = None
        self.start()

    def start(self, timeout=30):
        peer = f"http://127.0.0.1:{self.peer_port}"
        args = [self.binary, "--name", "test", "--data-dir", str(self.data_dir),
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"test={peer}", "--logger", "zap"]
        self.log = open(self.dir / f"etcd-{time.monotonic_ns()}.log", "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited with {self.proc.returncode}")
            try:
                req = urllib.request.Request(self.url + "/v3/kv/range", data=b'{"key":"AA=="}',
                                             method="POST")
                with urllib.request.urlopen(req, timeout=1) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError("etcd did not answer in time")

    def keys(self, prefix):
        """The keys under `prefix` (etcd's v3 JSON API: base64 keys)."""
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        body = json.dumps({"key": base64.b64encode(prefix.encode()).decode(),
                           "range_end": base64.b64encode(end.encode()).decode(),
                           "keys_only": True}).encode()
        req = urllib.request.Request(self.url + "/v3/kv/range", data=body, method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            answer = json.loads(r.read())
        return [base64.b64decode(kv["key"]).decode() for kv in answer.get("kvs", [])]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log:
            self.log.close()
            self.log = None
