"""Speculative method draft_model on real models: stories260K drafting for itself on a server
(greedy, stop-string, logprobs and streamed completions as without speculation, greedy drafts
accepted, seeded sampling reproducible); SmolLM2-135M-Instruct drafting for itself with
`tachyon run` (greedy text identical, acceptance near 1); a draft model with another tokenizer
refused with a clear error.
"""

import json
import os
import re
import subprocess

import pytest

from conftest import MODEL_NAME, Server, binary_path, model_path, require_serve, require_smollm2


def spec_args(model, k=4):
    return ["--speculative-config",
            json.dumps({"method": "draft_model", "model": str(model), "num_speculative_tokens": k,
                        "min_acceptance_rate": 0})]


@pytest.fixture(scope="module")
def draft_server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("draft"), spec_args(model_path()))
    yield s
    assert s.stop() == 0


PROMPTS = ["Once upon a time", "Lily and Ben went to the park. Lily and Ben"]


def completion(client, prompt, **kw):
    r = client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=kw.pop("n_tok", 60),
                                  **kw)
    return [(c.text, c.finish_reason,
             c.logprobs.token_logprobs if c.logprobs else None) for c in r.choices]


def test_greedy_completions_are_unchanged(client, draft_server):
    spec = draft_server.client()
    for prompt in PROMPTS:
        for kw in ({"temperature": 0}, {"temperature": 0, "stop": [" the "]},
                   {"temperature": 0, "logprobs": 2, "n_tok": 20}):
            assert completion(spec, prompt, **dict(kw)) == completion(client, prompt, **dict(kw)), \
                (prompt, kw)
    m = draft_server.metrics()
    # The draft is the target itself and stories260K's logits do not depend on the step's
    # row count: greedy drafts are right, except those after a stop inside a draft.
    drafted = m["tachyon_spec_decode_num_draft_tokens_total"]
    assert drafted > 0
    assert 0.9 * drafted <= m["tachyon_spec_decode_num_accepted_tokens_total"] <= drafted

    def stream(c):
        return "".join(ch.choices[0].text for ch in c.completions.create(
            model=MODEL_NAME, prompt=PROMPTS[1], max_tokens=80, temperature=0, stream=True))
    assert stream(spec) == stream(client)


def test_seeded_sampling_is_reproducible(draft_server):
    spec = draft_server.client()
    kw = {"temperature": 0.9, "top_p": 0.95, "seed": 7, "n": 2, "n_tok": 40}
    first = completion(spec, PROMPTS[0], **dict(kw))
    assert len(first) == 2 and all(text for text, _, _ in first)
    assert completion(spec, PROMPTS[0], **dict(kw)) == first


def run(args, env=None):
    return subprocess.run([str(binary_path()), "run", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_smollm2_drafting_for_itself():
    # At the AVX2 level, where SmolLM2 Q4_1's logits for these verify batches match single-row
    # steps (docs/speculative.md, known limits).
    path = require_smollm2()
    require_serve()
    prompt = ("<|im_start|>user\nRename the variable result to size in this code and give the "
              "whole code:\ndef area(w, h):\n    result = w * h\n    print(result)\n"
              "    return result\n<|im_end|>\n<|im_start|>assistant\n")
    env = dict(os.environ, TACHYON_CPU="avx2")
    outs = []
    for extra in ([], spec_args(path)):
        r = run(["-m", str(path), "-t", "1", "--temp", "0", "-n", "64", "-p", prompt, *extra],
                env)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
        if extra:
            m = re.search(r"speculative: \d+ drafts, (\d+) of (\d+)", r.stderr)
            assert m and int(m.group(2)) > 0, r.stderr
            assert int(m.group(1)) >= 0.9 * int(m.group(2)), r.stderr
            # Where a round's time goes: the verify steps' times by rows, the draft's forward.
            assert re.search(r"speculative step ms by rows:( \d+:[\d.]+)+; "
                             r"draft model one-row forward [\d.]+ ms", r.stderr), r.stderr
    assert outs[0] == outs[1]


def test_draft_with_another_tokenizer_is_refused():
    path = require_smollm2()
    require_serve()
    r = run(["-m", str(model_path()), "-p", "hi", "-n", "4", *spec_args(path)])
    assert r.returncode != 0
    assert "does not share the target's tokenizer" in r.stderr, r.stderr
    assert "vocabulary has 49152 tokens, the target's 512" in r.stderr, r.stderr
