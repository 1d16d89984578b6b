"""Fixtures that start a real `tachyon serve` on 127.0.0.1 and talk to it.

Binary: $TACHYON_BINARY (default <repo>/build/tachyon). Model: stories260K.gguf from
$TACHYON_TESTDATA or <repo>/../shared/testdata. Tests skip, saying why, when either is missing or
the binary has no `serve` command.

A real chat model for tests that need one: SmolLM2-135M-Instruct (Q4_1, ChatML template), fetched
by scripts/setup.sh (scripts/fetch_model.sh) into ${XDG_CACHE_HOME:-~/.cache}/tachyon/models;
$TACHYON_SMOLLM2 names another copy. `smollm2_server` (a session fixture) or
`SmolLM2Server(tmp_dir, ...)` serves it with its own template; both skip when it is absent.
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


SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_NAME = "smollm2"


def smollm2_path():
    """Where SmolLM2-135M-Instruct is expected: $TACHYON_SMOLLM2, else the cache folder that
    scripts/fetch_model.sh fills."""
    env = os.environ.get("TACHYON_SMOLLM2")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "tachyon" / "models" / SMOLLM2_FILE


def require_smollm2():
    """Skips the calling test, saying how to get it, when SmolLM2 is absent; returns its path."""
    path = smollm2_path()
    if not path.is_file():
        pytest.skip(f"SmolLM2-135M-Instruct missing at {path} (run scripts/fetch_model.sh, "
                    "or set TACHYON_SMOLLM2)")
    return path


class Server:
    """One `tachyon serve` process on a free port."""

    def __init__(self, tmp_dir, extra_args=(), api_key=API_KEY, model=None,
                 chat_template=CHAT_TEMPLATE, served_name=MODEL_NAME, host="127.0.0.1",
                 launcher=()):
        """`model`: a GGUF path or HF folder (default stories260K); `chat_template`: the text
        passed with --chat-template, or None for the model's own template; `served_name`: None
        for the server's default name; `host`: the address it listens on; `launcher`: a command
        prefix that runs it (e.g. `ip netns exec NS`; it must exec the server, so that signals
        reach it)."""
        require_serve()
        args = [*launcher, str(binary_path()), "serve", "-m", str(model or model_path()),
                "--host", host, "--port", "0", "--threads", "1", "--max-body-bytes", "1000000",
                "--max-model-len", str(CONTEXT), *extra_args]
        if served_name:
            args += ["--served-model-name", served_name]
        if chat_template is not None:
            template = Path(tmp_dir) / "chat_template.jinja"
            template.write_text(chat_template)
            args += ["--chat-template", str(template)]
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
        self.base = f"http://{host}:{self.port}"

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


def serve_for_session(s, what):
    """Yields a started server to a session fixture, then stops it: it must exit cleanly on
    SIGTERM (its log is printed when not)."""
    yield s
    rc = s.stop()
    if rc != 0:
        sys.stderr.write(s.log_text())
    assert rc == 0, f"{what} did not exit cleanly on SIGTERM"


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    yield from serve_for_session(Server(tmp_path_factory.mktemp("serve")), "tachyon serve")


def SmolLM2Server(tmp_dir, extra_args=(), api_key=API_KEY, served_name=SMOLLM2_NAME):
    """A `Server` on SmolLM2-135M-Instruct with the model's own ChatML template (from its GGUF);
    skips when the model is absent. Served as `smollm2` unless `served_name` says otherwise."""
    path = require_smollm2()
    return Server(tmp_dir, extra_args, api_key=api_key, model=path, chat_template=None,
                  served_name=served_name)


@pytest.fixture(scope="session")
def smollm2_server(tmp_path_factory):
    """One SmolLM2 server for the session (API key `API_KEY`, model name `smollm2`)."""
    require_serve()
    yield from serve_for_session(SmolLM2Server(tmp_path_factory.mktemp("smollm2")),
                                 "tachyon serve (SmolLM2)")


@pytest.fixture(scope="session")
def smollm2_client(smollm2_server):
    return smollm2_server.client()


@pytest.fixture(scope="session")
def client(server):
    return server.client()


@pytest.fixture(scope="session")
def templated_server(tmp_path_factory):
    """stories260K rewritten with the Qwen3 chat template in its GGUF (tokenizer.chat_template),
    served without --chat-template (so the tool-call parser is auto-detected: hermes)."""
    template = testdata_dir() / "chat-templates" / "templates" / "Qwen-Qwen3-0.6B.jinja"
    require_serve()
    if not template.exists():
        pytest.skip(f"chat template missing: {template}")
    d = tmp_path_factory.mktemp("templated")
    gguf = d / "stories-chat.gguf"
    write_gguf_with_string(model_path(), gguf, "tokenizer.chat_template", template.read_text())
    # The Qwen3 template with tools renders ~650 stories260K tokens: a longer context.
    s = Server(d, ["--max-model-len", "2048"], model=gguf, chat_template=None, api_key=None)
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="session")
def hermes_server(tmp_path_factory):
    """stories260K with the plain test template (no reasoning section) and the hermes tool-call
    format: tool_choice "required" / a named function make its reply a call."""
    require_serve()
    s = Server(tmp_path_factory.mktemp("hermes"), ["--tool-call-parser", "hermes"], api_key=None)
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="session")
def reference_generations():
    path = testdata_dir() / "stories260K" / "reference" / "generations.json"
    if not path.exists():
        pytest.skip(f"reference generations missing: {path}")
    return json.loads(path.read_text())["cases"]


# --- GGUF: a copy of a model with one more string key (e.g. tokenizer.chat_template) -----------

_GGUF_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def _skip_gguf_value(buf, pos, vtype):
    import struct
    if vtype in _GGUF_SCALAR:
        return pos + _GGUF_SCALAR[vtype]
    if vtype == 8:
        (n,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + n
    if vtype == 9:
        etype, count = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        if etype in _GGUF_SCALAR:
            return pos + count * _GGUF_SCALAR[etype]
        for _ in range(count):
            pos = _skip_gguf_value(buf, pos, etype)
        return pos
    raise ValueError(f"unknown GGUF value type {vtype}")


def write_gguf_with_string(src, dst, key, value):
    """Copies GGUF `src` to `dst` with the string metadata `key` = `value` added (or replaced)."""
    import struct
    buf = Path(src).read_bytes()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    assert magic == b"GGUF" and version >= 2, "not a GGUF v2+ file"
    pos = 24
    kvs, alignment = [], 32
    for _ in range(n_kv):
        start = pos
        (klen,) = struct.unpack_from("<Q", buf, pos)
        name = buf[pos + 8:pos + 8 + klen].decode()
        pos += 8 + klen
        (vtype,) = struct.unpack_from("<I", buf, pos)
        if name == "general.alignment":
            (alignment,) = struct.unpack_from("<I", buf, pos + 4)
        pos = _skip_gguf_value(buf, pos + 4, vtype)
        if name != key:
            kvs.append(buf[start:pos])
    infos_start = pos
    for _ in range(n_tensors):
        (nlen,) = struct.unpack_from("<Q", buf, pos)
        pos += 8 + nlen
        (ndims,) = struct.unpack_from("<I", buf, pos)
        pos += 4 + 8 * ndims + 4 + 8
    infos = buf[infos_start:pos]
    data_start = (pos + alignment - 1) // alignment * alignment
    k, v = key.encode(), value.encode()
    kvs.append(struct.pack("<Q", len(k)) + k + struct.pack("<IQ", 8, len(v)) + v)
    head = struct.pack("<4sIQQ", b"GGUF", version, n_tensors, len(kvs)) + b"".join(kvs) + infos
    head += b"\0" * ((-len(head)) % alignment)
    Path(dst).write_bytes(head + buf[data_start:])
