"""Batch invariance through the CLI at every SIMD level (TACHYON_CPU=scalar|avx2|avx512; a level
the CPU lacks falls back to the best it has): `tachyon logits --chunk N` gives the same bytes for
every N, i.e. a prompt position's logits do not depend on how many positions share its forward
step. On the real SmolLM2-135M-Instruct Q4_1 (GGUF-layout Q4_1 matrices, packed Q8_0 output,
3 query heads per KV head) when present, and on a synthetic llama with packed Q4_0 / Q6_K
weights. The kernel-level and model-level tests are kernels/ and model/batch_invariance_test.cc.
"""

import os
import subprocess

import pytest

from conftest import binary_path, smollm2_path

LEVELS = ["scalar", "avx2", "avx512"]
# 1 row (decode kernels), 3 (a lone attention slot, before), 8 (the GEMM kernels).
CHUNKS = [1, 3, 8]


def logits_bytes(model, ids, chunk, level, out):
    env = dict(os.environ, TACHYON_CPU=level)
    r = subprocess.run([str(binary_path()), "logits", "-m", str(model), "--ids",
                        ",".join(map(str, ids)), "-o", str(out), "--chunk", str(chunk), "-t", "2"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return out.read_bytes()


def check_chunks(model, ids, level, tmp_path):
    want = logits_bytes(model, ids, len(ids), level, tmp_path / "one.f32")
    for chunk in CHUNKS:
        got = logits_bytes(model, ids, chunk, level, tmp_path / f"c{chunk}.f32")
        assert len(got) == len(want)
        if got != want:
            first = next(i for i in range(len(got)) if got[i] != want[i])
            row_bytes = len(want) // len(ids)
            pytest.fail(f"{level}: --chunk {chunk} differs from one pass at position "
                        f"{first // row_bytes}")


@pytest.mark.parametrize("level", LEVELS)
def test_smollm2_logits_do_not_depend_on_the_chunk(level, tmp_path):
    path = smollm2_path()
    if not path.is_file():
        pytest.skip(f"SmolLM2-135M-Instruct missing at {path} (run scripts/fetch_model.sh)")
    # A ChatML prompt's ids (any in-vocabulary ids would do).
    ids = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 30, 2, 198, 1, 4093, 198, 1780]
    check_chunks(path, ids, level, tmp_path)


@pytest.mark.parametrize("level", LEVELS)
def test_synthetic_llama_logits_do_not_depend_on_the_chunk(level, tmp_path):
    model = tmp_path / "llama-tiny-q4_0.gguf"
    r = subprocess.run([str(binary_path()), "synth", "--arch", "llama", "--shape", "tiny",
                        "--type", "Q4_0", "-o", str(model)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    ids = [(i * 53 + 7) % 512 for i in range(20)]
    check_chunks(model, ids, level, tmp_path)
