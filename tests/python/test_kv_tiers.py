"""KV offload tiers on a real model (SmolLM2-135M-Instruct; skipped when absent).

A 2k-token prompt's KV persists in the disk tier (--kv-offload-dir) when the server stops, and
after a restart with the same directory the same prompt is served from it: cached tokens
reported (usage.prompt_tokens_details.cached_tokens), greedy output identical. The same files
under another model's identity (a copy of the GGUF with different metadata) are never used. A
quantized KV cache (--kv-cache-dtype q4_0) goes to disk in its own form (a quarter of f16's bytes
and a little more) and comes back from it, and a server with another KV dtype never uses it.
"""

import re
import shutil

import pytest

import conftest
from conftest import SmolLM2Server, require_smollm2, write_gguf_with_string

BLOCK = 16  # the engine's KV block size (tokens)
SENTENCES = [f"Note {i}: the {w} river runs past hill number {i * 7 % 31}, and the fishers "
             f"there count {i * 13 % 97} boats at dawn." for i, w in
             zip(range(75), ["green", "cold", "quiet", "wide", "old", "bright"] * 13)]
PROMPT = " ".join(SENTENCES)  # about 2.15k tokens
SHORT = " ".join(SENTENCES[:24])  # the same leading blocks, a third as long


def serve(tmp, kv_dir, model=None, kv_dtype=None):
    tmp.mkdir(parents=True, exist_ok=True)
    args = ["--max-model-len", "4096", "--threads", "2", "--kv-offload-memory", "64M",
            "--kv-offload-dir", str(kv_dir)]
    if kv_dtype is not None:
        args += ["--kv-cache-dtype", kv_dtype]
    if model is None:
        return SmolLM2Server(tmp, args)
    return conftest.Server(tmp, args, model=model, chat_template=None, served_name="smollm2")


def complete(s, prompt):
    r = s.client().completions.create(model="smollm2", prompt=prompt, max_tokens=12,
                                      temperature=0)
    return r.usage.prompt_tokens, r.usage.prompt_tokens_details.cached_tokens, r.choices[0].text


def stop(s):
    assert s.stop() == 0, s.log_text()


def test_disk_tier_serves_a_prefix_after_a_restart(tmp_path):
    require_smollm2()
    kv_dir = tmp_path / "kv"
    s = serve(tmp_path / "a", kv_dir)
    try:
        n, cached, first = complete(s, PROMPT)
        assert n >= 2000 and cached == 0
    finally:
        stop(s)  # the engine offers its cached blocks to the tiers, the disk tier writes them
    segments = list(kv_dir.glob("*.kvs"))
    assert segments

    s = serve(tmp_path / "b", kv_dir)
    try:
        scanned = re.search(r"disk KV tier .*: (\d+) blocks of this model", s.log_text())
        assert scanned and int(scanned.group(1)) >= (n - 1) // BLOCK
        n2, cached, again = complete(s, PROMPT)
        assert n2 == n
        assert cached == (n - 1) // BLOCK * BLOCK  # every full block but the last token's
        assert again == first
        m = s.metrics()
        assert m['tachyon_kv_tier_hits_total{tier="disk"}'] >= (n - 1) // BLOCK
        assert m["tachyon_kv_offload_loaded_blocks_total"] >= (n - 1) // BLOCK
        assert m['tachyon_kv_tier_capacity_bytes{tier="host"}'] == 64 << 20
    finally:
        stop(s)


def test_another_models_kv_is_never_used(tmp_path):
    path = require_smollm2()
    kv_dir = tmp_path / "kv"
    s = serve(tmp_path / "a", kv_dir)
    try:
        n, cached, first = complete(s, SHORT)
        assert cached == 0
    finally:
        stop(s)
    assert list(kv_dir.glob("*.kvs"))
    # Same tokenizer (so the same block hashes), other bytes: another model's identity.
    other = tmp_path / "other.gguf"
    write_gguf_with_string(path, other, "general.name", "SmolLM2 copy for the KV tier test")
    other_dir = tmp_path / "kv-other"
    shutil.copytree(kv_dir, other_dir)
    s = serve(tmp_path / "b", other_dir, model=other)
    try:
        assert ": 0 blocks of this model" in s.log_text()
        n2, cached, again = complete(s, SHORT)
        assert n2 == n and cached == 0  # recomputed
        assert again == first
        assert s.metrics()['tachyon_kv_tier_hits_total{tier="disk"}'] == 0
    finally:
        stop(s)


def segment_bytes(kv_dir):
    return sum(f.stat().st_size for f in kv_dir.glob("*.kvs"))


def test_quantized_kv_is_stored_in_its_own_form_and_never_used_by_another_dtype(tmp_path):
    require_smollm2()
    stored = {}
    for dtype in ("f16", "q4_0"):
        s = serve(tmp_path / ("a-" + dtype), tmp_path / ("kv-" + dtype), kv_dtype=dtype)
        try:
            n, cached, text = complete(s, SHORT)
            assert cached == 0
            stored[dtype] = text
        finally:
            stop(s)
    f16_bytes = segment_bytes(tmp_path / "kv-f16")
    q4_bytes = segment_bytes(tmp_path / "kv-q4_0")
    assert f16_bytes > 0 and q4_bytes > 0
    # q4_0: 18 bytes per 32 elements against f16's 64, plus the same record headers.
    assert q4_bytes < 0.32 * f16_bytes, (q4_bytes, f16_bytes)

    s = serve(tmp_path / "b", tmp_path / "kv-q4_0", kv_dtype="q4_0")
    try:
        n2, cached, again = complete(s, SHORT)
        assert n2 == n
        assert cached == (n - 1) // BLOCK * BLOCK
        assert again == stored["q4_0"]
        assert s.metrics()['tachyon_kv_tier_hits_total{tier="disk"}'] >= (n - 1) // BLOCK
    finally:
        stop(s)

    s = serve(tmp_path / "c", tmp_path / "kv-q4_0", kv_dtype="f16")
    try:
        assert ": 0 blocks of this model" in s.log_text()
        n3, cached, text = complete(s, SHORT)
        assert n3 == n and cached == 0  # recomputed in f16
        assert text == stored["f16"]
        assert s.metrics()['tachyon_kv_tier_hits_total{tier="disk"}'] == 0
    finally:
        stop(s)
