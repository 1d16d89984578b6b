"""Speculative decoding (--speculative-config, n-gram and suffix drafts) on a real server: the
same completions as a server without it (greedy, seeded sampling, n > 1, stop strings,
streaming, logprobs), and the spec counters in /metrics. stories260K always; SmolLM2-135M-Instruct
when present (greedy `tachyon run` on a ChatML code-edit prompt, the workload drafts are for).
"""

import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import (MODEL_NAME, REPO, SMOLLM2_NAME, Server, SmolLM2Server, binary_path,
                      require_smollm2)

SPEC = ["--speculative-config",
        json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1,
                    "prompt_lookup_max": 3, "min_acceptance_rate": 0})]


SUFFIX = ["--speculative-config",
          json.dumps({"method": "suffix", "num_speculative_tokens": 6, "min_acceptance_rate": 0,
                      "suffix_decoding_min_token_prob": 0})]


@pytest.fixture(scope="module")
def spec_server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("spec"), SPEC)
    yield s
    assert s.stop() == 0


PROMPTS = ["Once upon a time", "Lily and Ben went to the park. Lily and Ben", "The cat sat"]


def completion(client, prompt, **kw):
    r = client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=kw.pop("n_tok", 60),
                                  **kw)
    return [(c.text, c.finish_reason) for c in r.choices], r.usage.completion_tokens


def test_greedy_and_seeded_completions_are_unchanged(client, spec_server):
    spec = spec_server.client()
    for prompt in PROMPTS:
        for kw in ({"temperature": 0}, {"temperature": 0.8, "seed": 11},
                   {"temperature": 1.0, "top_p": 0.9, "seed": 5, "n": 2},
                   {"temperature": 0, "stop": [" the "]},
                   {"temperature": 0, "logprobs": 2, "n_tok": 20}):
            assert completion(spec, prompt, **dict(kw)) == completion(client, prompt, **dict(kw)), \
                (prompt, kw)
    m = spec_server.metrics()
    assert m["tachyon_spec_decode_num_drafts_total"] > 0
    assert 0 < m["tachyon_spec_decode_num_accepted_tokens_total"] <= \
        m["tachyon_spec_decode_num_draft_tokens_total"]
    assert m['tachyon_spec_decode_num_accepted_tokens_per_pos_total{position="0"}'] > 0


def test_suffix_drafts_change_nothing_and_learn_across_requests(client, tmp_path):
    s = Server(tmp_path, SUFFIX)
    try:
        spec = s.client()
        for prompt in PROMPTS:
            for kw in ({"temperature": 0}, {"temperature": 0.9, "seed": 3, "n": 2}):
                assert completion(spec, prompt, **dict(kw)) == completion(client, prompt, **dict(kw))
        m = s.metrics()
        drafted = m["tachyon_spec_decode_num_draft_tokens_total"]
        accepted = m["tachyon_spec_decode_num_accepted_tokens_total"]
        assert drafted > 0 and 0 < accepted <= drafted
        # Asked again, the greedy story is in the global tree of finished outputs: from its
        # first tokens on, drafts come from it and are accepted.
        completion(spec, PROMPTS[0], temperature=0)
        m2 = s.metrics()
        again = m2["tachyon_spec_decode_num_accepted_tokens_total"] - accepted
        again_drafted = m2["tachyon_spec_decode_num_draft_tokens_total"] - drafted
        assert again_drafted > 0 and again >= 0.9 * again_drafted, (again, again_drafted)
    finally:
        assert s.stop() == 0


def test_streamed_text_is_unchanged(client, spec_server):
    def stream(c):
        return "".join(ch.choices[0].text for ch in c.completions.create(
            model=MODEL_NAME, prompt=PROMPTS[1], max_tokens=80, temperature=0, stream=True))
    assert stream(spec_server.client()) == stream(client)


def chatml(text):
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def run_greedy(path, prompt, n, extra):
    r = subprocess.run([str(binary_path()), "run", "-m", str(path), "-t", "2", "--temp", "0",
                        "-n", str(n), "-p", prompt, *extra], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr


@pytest.mark.parametrize("workload", ["chat", "summarise"])
def test_smollm2_greedy_chat_is_unchanged_at_the_default_level(workload):
    # bench/spec_bench.sh's chat workloads, whose texts differed with drafts at the AMX level
    # while verify rows took the AMX attention kernel: a decode or verify row now takes the
    # batch-invariant kernels at every level (model/batch.h, decode_start).
    path = require_smollm2()
    prompt = chatml((REPO / "bench" / "spec_prompts" / f"{workload}.txt").read_text())
    want, _ = run_greedy(path, prompt, 200, [])
    for spec in ('{"method": "ngram", "num_speculative_tokens": 8}',
                 '{"method": "suffix", "num_speculative_tokens": 8}'):
        got, err = run_greedy(path, prompt, 200, ["--speculative-config", spec])
        assert re.search(r"speculative: \d+ drafts, \d+ of [1-9]", err), err
        assert got == want, spec


def test_smollm2_greedy_chat_beside_other_prompts_is_unchanged(tmp_path):
    # A greedy chat decodes (with ngram drafts) while three more requests arrive: its decode and
    # verify steps then carry their prompt chunks (more rows than the AMX thresholds), and its
    # text must still be its text alone without drafts. (The newcomers' own texts are not
    # compared: at the AMX level a prompt row's logits still depend on its chunk, docs/kernels.md.)
    require_smollm2()
    first = "What are three good habits for staying healthy? Explain each briefly."
    others = ["Explain what a hash table is to a new programmer, with an example in Python.",
              "Write a short poem about the sea and the wind, then explain its images.",
              "Describe how bread is made, step by step, for a child who likes to cook."]

    def messages(q):
        return [{"role": "user", "content": q}]

    (tmp_path / "plain").mkdir()
    (tmp_path / "spec").mkdir()
    plain = SmolLM2Server(tmp_path / "plain")
    try:
        r = plain.client().chat.completions.create(model=SMOLLM2_NAME, max_tokens=160,
                                                   temperature=0, messages=messages(first))
        alone = r.choices[0].message.content
    finally:
        assert plain.stop() == 0
    spec = SmolLM2Server(tmp_path / "spec", SPEC)
    try:
        client = spec.client()
        stream = client.chat.completions.create(model=SMOLLM2_NAME, max_tokens=160, temperature=0,
                                                messages=messages(first), stream=True)
        parts = []
        with ThreadPoolExecutor(len(others)) as ex:
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    parts.append(chunk.choices[0].delta.content)
                    if len(parts) == 1:  # decoding: the others join its steps
                        for q in others:
                            ex.submit(client.chat.completions.create, model=SMOLLM2_NAME,
                                      max_tokens=32, temperature=0, messages=messages(q))
        assert spec.metrics()["tachyon_spec_decode_num_drafts_total"] > 0
    finally:
        assert spec.stop() == 0
    assert "".join(parts) == alone


def test_smollm2_greedy_code_edit_is_unchanged():
    # At the machine's own kernel level: a row's logits do not depend on the step's row count
    # (docs/kernels.md, batch invariance), so verify batches cannot flip SmolLM2's near-ties.
    path = require_smollm2()
    prompt = ("<|im_start|>user\nRename the variable result to size in this code and give the "
              "whole code:\ndef area(w, h):\n    result = w * h\n    print(result)\n"
              "    return result\n<|im_end|>\n<|im_start|>assistant\n")
    outs = []
    for extra in ([], SPEC):
        r = subprocess.run([str(binary_path()), "run", "-m", str(path), "-t", "1", "--temp", "0",
                            "-n", "96", "-p", prompt, *extra], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
        if extra:
            accepted = re.search(r"speculative: \d+ drafts, (\d+) of (\d+)", r.stderr)
            assert accepted and int(accepted.group(2)) > 0, r.stderr
    assert outs[0] == outs[1]
