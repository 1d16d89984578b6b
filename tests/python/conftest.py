"""Fixtures that start a real `tachyon serve` on 127.0.0.1 and talk to it.

Binary: $TACHYON_BINARY (default <repo>/build/tachyon). Model: stories260K.gguf from
$TACHYON_TESTDATA or <repo>/../shared/testdata. Tests skip, saying why, when either is missing or
the binary has no `serve` command.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
API_KEY = "test-key-123"
MODEL_NAME = "stories"
CONTEXT = 512  # --max-model-len (stories260K's GGUF says 128; llama2.c trained it with 512)
# A minimal chat template for stories260K (which has none): one "role: content" line per message.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def binary_path():
    return Path(os.environ.get("TACHYON_BINARY", REPO / "build" / "tachyon"))


def testdata_dir():
    env = os.environ.get("TACHYON_TESTDATA")
    return Path(env) if env else REPO.parent / "shared" / "testdata"


def model_path():
    return testdata_dir() / "stories260K" / "stories260K.gguf"


def has_command(name):
    binary = binary_path()
    if not binary.exists():
        return False
    out = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=30)
    return any(line.split()[:1] == [name] for line in (out.stdout + out.stderr).splitlines())


def require_serve():
    binary = binary_path()
    if not binary.exists():
        pytest.skip(f"tachyon binary not found at {binary} (set TACHYON_BINARY)")
    if not has_command("serve"):
        pytest.skip(f"{binary} has no 'serve' command (engine not built in?)")
    if not model_path().exists():
        pytest.skip(f"test model missing: {model_path()} (set TACHYON_TESTDATA)")


class Server:
    """One `tachyon serve` process on a free port."""

    def __init__(self, tmp_dir, extra_args=(), api_key=API_KEY):
        require_serve()
        template = Path(tmp_dir) / "chat_template.jinja"
        template.write_text(CHAT_TEMPLATE)
        args = [str(binary_path()), "serve", "-m", str(model_path()), "--host", "127.0.0.1",
                "--port", "0", "--served-model-name", MODEL_NAME, "--chat-template",
                str(template), "--threads", "1", "--max-body-bytes", "1000000",
                "--max-model-len", str(CONTEXT),
                *extra_args]
        if api_key:
            args += ["--api-key", api_key]
        self.api_key = api_key
        self.log_path = Path(tmp_dir) / "server.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.port = None
        deadline = time.time() + 120
        ready_line = []

        def read_ready():
            line = self.proc.stdout.readline()
            ready_line.append(line)

        t = threading.Thread(target=read_ready, daemon=True)
        t.start()
        t.join(max(1, deadline - time.time()))
        line = ready_line[0] if ready_line else ""
        if "ready at http://" not in line:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"tachyon serve did not start: {line!r}\n{self.log_text()}")
        self.port = int(line.split("ready at http://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        self.base = f"http://127.0.0.1:{self.port}"

    def log_text(self):
        self.log.flush()
        return self.log_path.read_text()

    def client(self, **kw):
        import openai
        return openai.OpenAI(base_url=self.base + "/v1", api_key=self.api_key or "none",
                             max_retries=0, timeout=120, **kw)

    def request(self, method, path, body=None, headers=None, raw=None, timeout=60):
        """Returns (status, headers, parsed JSON or text)."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        h.update(headers or {})
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, hdrs, payload = r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            status, hdrs, payload = e.code, dict(e.headers), e.read()
        text = payload.decode("utf-8")
        try:
            return status, hdrs, json.loads(text)
        except ValueError:
            return status, hdrs, text

    def metrics(self):
        status, _, text = self.request("GET", "/metrics")
        assert status == 200
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("serve"))
    yield s
    rc = s.stop()
    if rc != 0:
        sys.stderr.write(s.log_text())
    assert rc == 0, "tachyon serve did not exit cleanly on SIGTERM"


@pytest.fixture(scope="session")
def client(server):
    return server.client()


@pytest.fixture(scope="session")
def reference_generations():
    path = testdata_dir() / "stories260K" / "reference" / "generations.json"
    if not path.exists():
        pytest.skip(f"reference generations missing: {path}")
    return json.loads(path.read_text())["cases"]
