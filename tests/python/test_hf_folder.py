"""`tachyon serve -m FOLDER` on a Hugging Face folder (tiny-qwen2's weights as safetensors, a
byte-level tokenizer.json, a chat template in tokenizer_config.json and a generation_config.json):
the folder's name, chat template and sampling defaults are used."""

import pytest

from conftest import Server


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    test_pull = pytest.importorskip("test_pull")
    try:
        files = test_pull.hf_qwen2_files()
    except (FileNotFoundError, OSError) as e:
        pytest.skip(f"tiny-qwen2 test model missing: {e}")
    d = tmp_path_factory.mktemp("hf") / "tiny-qwen2-chat"
    d.mkdir()
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d


def sampled_ids(client, **kw):
    r = client.completions.create(model="tiny-qwen2-chat", prompt="hello", max_tokens=12,
                                  seed=5, logprobs=0, extra_body={"ignore_eos": True}, **kw)
    return r.choices[0].logprobs.tokens


def test_serves_a_folder_with_its_template_and_generation_config(hf_folder, tmp_path):
    s = Server(tmp_path, model=hf_folder, chat_template=None, api_key=None,
               served_name=None)
    try:
        client = s.client()
        assert [m.id for m in client.models.list().data] == ["tiny-qwen2-chat"]
        status, _, tok = s.request("POST", "/tokenize",
                                   {"messages": [{"role": "user", "content": "hi"}]})
        status, _, text = s.request("POST", "/detokenize", {"tokens": tok["tokens"]})
        # Special tokens are skipped when decoding; the rendered roles and newlines remain.
        assert "user\nhi" in text["prompt"] and "assistant\n" in text["prompt"]
        r = client.chat.completions.create(model="tiny-qwen2-chat", max_tokens=3,
                                           messages=[{"role": "user", "content": "hi"}])
        assert r.usage.prompt_tokens == tok["count"]
        # generation_config.json says temperature 0.7, top_p 0.8: a request that leaves them
        # unset samples exactly like one that passes them.
        assert sampled_ids(client) == sampled_ids(client, temperature=0.7, top_p=0.8)
        assert "generation_config.json defaults: temperature=0.7" in s.log_text()
    finally:
        assert s.stop() == 0


def test_no_generation_config_keeps_openai_defaults(hf_folder, tmp_path):
    s = Server(tmp_path, ["--no-generation-config"], model=hf_folder, chat_template=None,
               api_key=None, served_name=None)
    try:
        client = s.client()
        assert sampled_ids(client) == sampled_ids(client, temperature=1.0, top_p=1.0)
        assert "generation_config.json defaults" not in s.log_text()
    finally:
        assert s.stop() == 0
