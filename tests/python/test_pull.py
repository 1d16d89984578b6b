"""`tachyon pull` and `-m ORG/NAME` against a mock Hub (tests/python/mock_hub.py): downloads into
an HF-layout cache, no-op second pull, resume after a dropped connection, sha256 mismatch, gated
repos, offline use, and logits through the Hub equal to the GGUF path of the same weights.

The HF model is written here from ../shared/testdata/models/models/tiny-qwen2-F32.gguf (NEOX
RoPE, so its Q/K rows need no permutation) with a small GGUF reader and numpy, plus a byte-level
BPE tokenizer.json of 512 tokens written from scratch.
"""

import hashlib
import json
import os
import socket
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import binary_path
from conftest import testdata_dir as _testdata_dir
from mock_hub import MockHub

TINY = "tiny-qwen2-F32.gguf"
IDS = "1,403,407,261,378,432,383"


def models_dir():
    return _testdata_dir() / "models" / "models"


@pytest.fixture(autouse=True)
def _require():
    if not binary_path().exists():
        pytest.skip(f"tachyon binary not found at {binary_path()} (set TACHYON_BINARY)")
    if not (models_dir() / TINY).exists():
        pytest.skip(f"test model missing: {models_dir() / TINY} (set TACHYON_TESTDATA)")


# ---- a minimal GGUF reader (metadata + F32 tensors) ----

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
            11: "<q", 12: "<d"}


def read_gguf(path):
    buf = Path(path).read_bytes()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, buf, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("<Q")
        s = buf[pos:pos + n].decode()
        pos += n
        return s

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("<I"), take("<Q")
            return [value(et) for _ in range(n)]
        return take(_SCALARS[t])

    assert buf[:4] == b"GGUF"
    pos = 4
    take("<I")
    n_tensors, n_kv = take("<Q"), take("<Q")
    meta = {}
    for _ in range(n_kv):
        k = string()
        meta[k] = value(take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("<Q") for _ in range(take("<I"))]
        infos.append((name, dims, take("<I"), take("<Q")))
    align = meta.get("general.alignment", 32)
    base = (pos + align - 1) // align * align
    tensors = {}
    for name, dims, t, off in infos:
        assert t == 0, f"{name}: only F32 is read here"
        n = int(np.prod(dims))
        arr = np.frombuffer(buf, dtype="<f4", count=n, offset=base + off)
        tensors[name] = arr.reshape(list(reversed(dims)))  # GGUF dims are innermost first
    return meta, tensors


def hf_name(gguf_name):
    layer = {"attn_norm.weight": "input_layernorm.weight",
             "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
             "attn_v.weight": "self_attn.v_proj.weight",
             "attn_output.weight": "self_attn.o_proj.weight",
             "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
             "attn_v.bias": "self_attn.v_proj.bias",
             "ffn_norm.weight": "post_attention_layernorm.weight",
             "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
             "ffn_down.weight": "mlp.down_proj.weight"}
    top = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
           "output.weight": "lm_head.weight"}
    if gguf_name in top:
        return top[gguf_name]
    _, il, rest = gguf_name.split(".", 2)
    return f"model.layers.{il}.{layer[rest]}"


def safetensors_bytes(tensors):
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, arr in tensors.items():
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tokenizer_files(n_vocab):
    vocab = {ch: i for i, ch in enumerate(bytes_to_unicode()[b] for b in range(256))}
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    specials += [f"<|extra_{i}|>" for i in range(n_vocab - 256 - len(specials))]
    added = [{"id": 256 + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(specials)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": None, "pre_tokenizer": byte_level, "post_processor": None,
           "decoder": byte_level,
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                     "byte_fallback": False, "ignore_merges": False, "vocab": vocab, "merges": []}}
    cfg = {"chat_template": "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                            "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>"
                            "assistant\n{% endif %}",
           "eos_token": "<|im_end|>", "bos_token": None, "pad_token": "<|endoftext|>"}
    gen = {"eos_token_id": [258, 256], "temperature": 0.7, "top_p": 0.8}
    return {"tokenizer.json": json.dumps(tok).encode(),
            "tokenizer_config.json": json.dumps(cfg).encode(),
            "generation_config.json": json.dumps(gen).encode()}


def hf_qwen2_files():
    """The files of a Hugging Face Qwen2 repo holding tiny-qwen2's weights, in two shards."""
    meta, tensors = read_gguf(models_dir() / TINY)
    a = "qwen2"
    n_vocab = tensors["token_embd.weight"].shape[0]
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
              "hidden_size": meta[f"{a}.embedding_length"],
              "num_hidden_layers": meta[f"{a}.block_count"],
              "num_attention_heads": meta[f"{a}.attention.head_count"],
              "num_key_value_heads": meta[f"{a}.attention.head_count_kv"],
              "intermediate_size": meta[f"{a}.feed_forward_length"],
              "rope_theta": meta[f"{a}.rope.freq_base"],
              "rms_norm_eps": meta[f"{a}.attention.layer_norm_rms_epsilon"],
              "max_position_embeddings": meta[f"{a}.context_length"],
              "tie_word_embeddings": "output.weight" not in tensors,
              "vocab_size": n_vocab, "torch_dtype": "float32"}
    hf = {hf_name(k): v for k, v in tensors.items()}
    names = sorted(hf)
    shards = [names[: len(names) // 2], names[len(names) // 2:]]
    files = {"config.json": json.dumps(config).encode(), "README.md": b"# tiny\n"}
    weight_map = {}
    for i, part in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        files[fname] = safetensors_bytes({n: hf[n] for n in part})
        weight_map.update({n: fname for n in part})
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": 0}, "weight_map": weight_map}).encode()
    files.update(tokenizer_files(n_vocab))
    return files


@pytest.fixture(scope="module")
def qwen2_files():
    return hf_qwen2_files()


@pytest.fixture
def hub():
    h = MockHub()
    yield h
    h.close()


@pytest.fixture
def env(hub, tmp_path):
    e = dict(os.environ)
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HOME"):
        e.pop(k, None)
    e["HF_ENDPOINT"] = hub.url
    e["HF_HUB_CACHE"] = str(tmp_path / "cache")
    return e


def tachyon(env, *args, check=True):
    p = subprocess.run([str(binary_path()), *map(str, args)], env=env, capture_output=True,
                       text=True, timeout=120)
    if check:
        assert p.returncode == 0, f"tachyon {' '.join(map(str, args))} failed:\n{p.stderr}"
    return p


def logits(env, model, tmp_path, name):
    out = tmp_path / f"{name}.f32"
    tachyon(env, "logits", "-m", model, "--ids", IDS, "--out", out)
    return np.fromfile(out, dtype="<f4")


def repo_dir(env, repo):
    return Path(env["HF_HUB_CACHE"]) / ("models--" + repo.replace("/", "--"))


def content_downloads(hub):
    return [r for r in hub.served("GET") if r[1].startswith("/cdn/") or "/resolve/" in r[1]]


def test_pull_fills_the_cache_and_a_second_pull_is_a_noop(hub, env, qwen2_files):
    commit = hub.add_repo("org/tiny-qwen2", qwen2_files)
    p = tachyon(env, "pull", "org/tiny-qwen2")
    rd = repo_dir(env, "org/tiny-qwen2")
    snapshot = rd / "snapshots" / commit
    assert p.stdout.strip() == str(snapshot)
    assert (rd / "refs" / "main").read_text() == commit
    for name, data in qwen2_files.items():
        if name == "README.md":
            assert not (snapshot / name).exists()  # not part of the model
            continue
        f = snapshot / name
        assert f.is_symlink(), name
        assert f.read_bytes() == data, name
        if name.endswith(".safetensors"):  # LFS files: blobs named by their sha256
            assert os.readlink(f) == "../../blobs/" + hashlib.sha256(data).hexdigest()
    assert not list((rd / "blobs").glob("*.incomplete"))
    n = len(content_downloads(hub))
    p = tachyon(env, "pull", "org/tiny-qwen2")
    assert "up to date" in p.stderr
    assert len(content_downloads(hub)) == n  # nothing fetched again


def test_logits_through_the_hub_equal_the_gguf_path(hub, env, qwen2_files, tmp_path):
    hub.add_repo("org/tiny-qwen2", qwen2_files)
    via_hub = logits(env, "hf://org/tiny-qwen2", tmp_path, "hub")
    via_gguf = logits(env, models_dir() / TINY, tmp_path, "gguf")
    assert via_hub.shape == via_gguf.shape == (7 * 512,)
    np.testing.assert_allclose(via_hub, via_gguf, atol=1e-4, rtol=0)
    # The same repo by its plain name resolves from the cache.
    via_name = logits(env, "org/tiny-qwen2", tmp_path, "name")
    np.testing.assert_array_equal(via_name, via_hub)


def test_resume_after_a_dropped_connection(hub, env, qwen2_files):
    hub.add_repo("org/tiny-qwen2", qwen2_files)
    hub.drop_after = 100000
    hub.drop_times = 100  # more than the client's retries: the first pull gives up
    p = tachyon(env, "pull", "org/tiny-qwen2", "--parallel", "1", check=False)
    assert p.returncode != 0
    assert "run the command again to resume" in p.stderr
    partial = list((repo_dir(env, "org/tiny-qwen2") / "blobs").glob("*.incomplete"))
    sizes = [f.stat().st_size for f in partial]
    # Each attempt resumed where the last one broke off: whole multiples of the drop size.
    assert partial and all(n > 0 and n % 100000 == 0 for n in sizes), sizes
    hub.drop_times = 0
    tachyon(env, "pull", "org/tiny-qwen2")
    ranges = [r[2] for r in hub.served("GET", "/cdn/")]
    for n in sizes:
        assert f"bytes={n}-" in ranges, (n, ranges)
    rd = repo_dir(env, "org/tiny-qwen2")
    commit = (rd / "refs" / "main").read_text()
    for name, data in qwen2_files.items():
        if name.endswith(".safetensors"):
            assert (rd / "snapshots" / commit / name).read_bytes() == data


def test_a_single_drop_is_retried_within_one_pull(hub, env, qwen2_files):
    hub.add_repo("org/tiny-qwen2", qwen2_files)
    hub.drop_after = 50000
    hub.drop_times = 1
    tachyon(env, "pull", "org/tiny-qwen2", "--parallel", "1")
    assert [r for r in hub.served("GET", "/cdn/") if r[2] == "bytes=50000-"]


@pytest.mark.parametrize("blobs_info", [True, False])
def test_checksum_mismatch_is_an_error_and_keeps_nothing(hub, env, qwen2_files, blobs_info):
    hub.add_repo("org/tiny-qwen2", qwen2_files)
    hub.corrupt = True
    hub.blobs_info = blobs_info  # False: the sha256 comes from the X-Linked-Etag header
    p = tachyon(env, "pull", "org/tiny-qwen2", check=False)
    assert p.returncode != 0
    assert "checksum mismatch" in p.stderr and "not kept" in p.stderr, p.stderr
    rd = repo_dir(env, "org/tiny-qwen2")
    for name, data in qwen2_files.items():
        if name.endswith(".safetensors"):
            sha = hashlib.sha256(data).hexdigest()
            assert not (rd / "blobs" / sha).exists()
            assert not (rd / "blobs" / (sha + ".incomplete")).exists()
    assert not list(rd.glob("snapshots/*/*.safetensors"))


def test_offline_uses_the_cache(hub, env, qwen2_files, tmp_path):
    hub.add_repo("org/tiny-qwen2", qwen2_files)
    tachyon(env, "pull", "org/tiny-qwen2")
    online = logits(env, "org/tiny-qwen2", tmp_path, "online")
    hub.offline = True
    n = len(hub.requests)
    off = dict(env, HF_HUB_OFFLINE="1")
    p = tachyon(off, "pull", "org/tiny-qwen2")
    assert "offline" in p.stderr
    np.testing.assert_array_equal(logits(off, "org/tiny-qwen2", tmp_path, "offline"), online)
    assert len(hub.requests) == n  # HF_HUB_OFFLINE: not even an API call
    # Hub down without HF_HUB_OFFLINE: the cache still serves.
    np.testing.assert_array_equal(logits(env, "org/tiny-qwen2", tmp_path, "down"), online)
    p = tachyon(off, "pull", "org/other", check=False)
    assert p.returncode != 0 and "local path" in p.stderr, p.stderr


def test_no_network_says_how_to_pass_a_local_path(env):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    e = dict(env, HF_ENDPOINT=f"http://127.0.0.1:{port}")
    p = tachyon(e, "pull", "org/tiny-qwen2", check=False)
    assert p.returncode != 0
    assert "cannot be reached" in p.stderr and "-m /path/to/model.gguf" in p.stderr, p.stderr
    p = tachyon(e, "logits", "-m", "org/tiny-qwen2", "--ids", "1", "--out", "/dev/null",
                check=False)
    assert p.returncode != 0 and "local path" in p.stderr


def test_gguf_repo_default_choice_and_named_file(hub, env, tmp_path):
    files = {f"tiny.{t}.gguf": (models_dir() / f"tiny-llama-{t}.gguf").read_bytes()
             for t in ("Q8_0", "Q4_0", "Q4_K_M")}
    files["README.md"] = b"# GGUF\n"
    hub.add_repo("org/tiny-GGUF", files)
    p = tachyon(env, "pull", "org/tiny-GGUF")
    assert p.stdout.strip().endswith("/tiny.Q4_K_M.gguf")
    assert "tiny.Q8_0.gguf" in p.stderr  # the choices are listed
    got = logits(env, "org/tiny-GGUF:tiny.Q8_0.gguf", tmp_path, "q8")
    want = logits(env, models_dir() / "tiny-llama-Q8_0.gguf", tmp_path, "q8local")
    np.testing.assert_array_equal(got, want)
    p = tachyon(env, "pull", "org/tiny-GGUF:missing.gguf", check=False)
    assert p.returncode != 0 and "no file 'missing.gguf'" in p.stderr and "tiny.Q4_0.gguf" in p.stderr


def test_gated_repo_needs_hf_token(hub, env):
    hub.add_repo("org/tiny-GGUF", {"m.Q4_0.gguf": (models_dir() / "tiny-llama-Q4_0.gguf").read_bytes()})
    hub.token = "secret-token"
    p = tachyon(env, "pull", "org/tiny-GGUF", check=False)
    assert p.returncode != 0 and "HF_TOKEN" in p.stderr, p.stderr
    tachyon(dict(env, HF_TOKEN="secret-token"), "pull", "org/tiny-GGUF")


def test_unknown_repo_is_a_clear_error(hub, env):
    p = tachyon(env, "pull", "org/nothing", check=False)
    assert p.returncode != 0 and "404" in p.stderr, p.stderr


def test_only_the_shards_the_index_names_are_fetched(hub, env, qwen2_files, tmp_path):
    files = dict(qwen2_files)
    extra = b"\0" * 4096  # e.g. Mistral's consolidated.safetensors beside the HF shards
    files["consolidated.safetensors"] = extra
    commit = hub.add_repo("org/tiny-qwen2", files)
    tachyon(env, "pull", "org/tiny-qwen2")
    snapshot = repo_dir(env, "org/tiny-qwen2") / "snapshots" / commit
    assert not (snapshot / "consolidated.safetensors").exists()
    assert not hub.served("GET", "/cdn/" + hashlib.sha256(extra).hexdigest())
    assert (snapshot / "model-00002-of-00002.safetensors").exists()
    # Offline, the same set resolves from the cache.
    hub.offline = True
    off = dict(env, HF_HUB_OFFLINE="1")
    assert tachyon(off, "pull", "org/tiny-qwen2").stdout.strip() == str(snapshot)


def test_two_pulls_at_once_share_the_cache(hub, env, qwen2_files):
    commit = hub.add_repo("org/tiny-qwen2", qwen2_files)
    cmd = [str(binary_path()), "pull", "org/tiny-qwen2", "--quiet"]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    snapshot = repo_dir(env, "org/tiny-qwen2") / "snapshots" / commit
    for name, data in qwen2_files.items():
        if name != "README.md":
            assert (snapshot / name).read_bytes() == data, name
    assert not list((repo_dir(env, "org/tiny-qwen2") / "blobs").glob("*.incomplete"))
