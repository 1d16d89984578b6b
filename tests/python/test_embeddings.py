"""Pooling models over HTTP: /v1/embeddings (OpenAI's shape, also through the openai client),
/v1/rerank and /v1/score, on all-MiniLM-L6-v2 (scripts/fetch_model.sh --minilm; skipped when
absent) against ../shared/testdata/embeddings and a float64 numpy BERT (bert_reference.py), on a
random-weight cross-encoder written here, and on stories260K served with --pooling last; and
the 400s of endpoints a model cannot serve."""

import os

# The float64 reference is small matrix work: many BLAS threads on a busy machine only slow it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import base64  # noqa: E402
import json  # noqa: E402
import shutil
import threading
from pathlib import Path

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import bert_reference as br  # noqa: E402
import conftest  # noqa: E402
from conftest import Server  # noqa: E402

MINILM = Path(os.environ.get("TACHYON_MINILM") or Path(
    os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tachyon/models/all-MiniLM-L6-v2")


def require_minilm():
    if not (MINILM / "model.safetensors").is_file():
        pytest.skip(f"all-MiniLM-L6-v2 missing at {MINILM} (scripts/fetch_model.sh --minilm)")
    return MINILM


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("minilm"), model=require_minilm(), chat_template=None,
               served_name="minilm", extra_args=["--threads", "2"])
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def minilm_weights():
    """(weights, config) of the numpy reference."""
    return (br.load_st(require_minilm() / "model.safetensors"),
            json.loads((MINILM / "config.json").read_text()))


@pytest.fixture(scope="module")
def reference():
    return json.loads((conftest.testdata_dir() / "embeddings" / "all-MiniLM-L6-v2.json").read_text())


def post(server, path, body):
    status, _, payload = server.request("POST", path, body)
    return status, payload


def embed(server, inputs, **kw):
    status, body = post(server, "/v1/embeddings", {"input": inputs, **kw})
    assert status == 200, body
    return [np.array(d["embedding"]) for d in body["data"]], body


def cos(a, b):
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_reference_embeddings_from_token_ids(minilm, reference):
    cases = reference["cases"]
    got, body = embed(minilm, [c["ids"] for c in cases])  # all 14 in one request
    assert [d["index"] for d in body["data"]] == list(range(14))
    assert body["usage"]["prompt_tokens"] == sum(len(c["ids"]) for c in cases)
    assert body["model"] == "minilm"
    for c, e in zip(cases, got):
        assert cos(e, np.array(c["embedding"])) >= 0.999, c["text"]
        assert abs(np.linalg.norm(e) - 1) < 1e-5


def test_reference_embeddings_from_text(minilm, reference, minilm_weights):
    cases = reference["cases"]
    got, body = embed(minilm, [c["text"] for c in cases])
    for c, e in zip(cases, got):
        assert cos(e, np.array(c["embedding"])) >= 0.999, c["text"]
    # Documented by sentence-transformers for this model.
    assert abs(cos(got[0], got[1]) - 0.6660) < 5e-4
    assert abs(cos(got[0], got[2]) - 0.1046) < 5e-4
    assert abs(cos(got[1], got[2]) - 0.1411) < 5e-4
    # The long text is cut at 128 tokens, [SEP] kept: tokenizer.json's own truncation, which is
    # below sentence-transformers' max_seq_length (256) and is what the reference ids show.
    status, _, tok = minilm.request("POST", "/tokenize", {"prompt": cases[13]["text"]})
    assert status == 200 and tok["count"] > 256
    ids = tok["tokens"][:127] + [102]
    assert ids == cases[13]["ids"]
    single, b1 = embed(minilm, cases[13]["text"])
    assert b1["usage"]["prompt_tokens"] == 128
    assert cos(single[0], br.mean_embedding(*minilm_weights, ids)) >= 0.999
    assert cos(single[0], got[13]) > 0.99999  # alone or batched with 13 others


def test_texts_of_our_own_against_numpy(minilm, minilm_weights):
    texts = ["Paged attention stores keys in fixed-size blocks.",
             "Ünïcödé, emoji 🚀 and CJK 中文 survive the normalizer.",
             "a"]
    got, _ = embed(minilm, texts)
    for t, e in zip(texts, got):
        _, _, tok = minilm.request("POST", "/tokenize", {"prompt": t})
        assert cos(e, br.mean_embedding(*minilm_weights, tok["tokens"])) >= 0.999, t


def test_openai_client(minilm, reference):
    client = minilm.client()
    cases = reference["cases"][:3]
    r = client.embeddings.create(model="minilm", input=[c["text"] for c in cases],
                                 encoding_format="float")
    assert len(r.data) == 3 and r.usage.prompt_tokens == 25
    for c, d in zip(cases, r.data):
        assert cos(np.array(d.embedding), np.array(c["embedding"])) >= 0.999
    # The client's default asks for base64 and decodes it.
    r = client.embeddings.create(model="minilm", input=cases[0]["text"])
    assert len(r.data[0].embedding) == 384
    assert cos(np.array(r.data[0].embedding), np.array(cases[0]["embedding"])) >= 0.999


def test_base64_and_dimensions(minilm):
    (full,), _ = embed(minilm, "hello world")
    _, body = post(minilm, "/v1/embeddings", {"input": "hello world", "encoding_format": "base64"})
    raw = np.frombuffer(base64.b64decode(body["data"][0]["embedding"]), dtype="<f4")
    assert np.allclose(raw, full, atol=1e-7)
    (short,), _ = embed(minilm, "hello world", dimensions=64)
    assert len(short) == 64 and abs(np.linalg.norm(short) - 1) < 1e-5
    assert np.allclose(short, full[:64] / np.linalg.norm(full[:64]), atol=1e-6)
    for bad in (0, 385, "8", 1.5):
        status, body = post(minilm, "/v1/embeddings", {"input": "x", "dimensions": bad})
        assert status == 400 and body["error"]["param"] == "dimensions", bad


@pytest.mark.parametrize("body,param", [
    ({}, "input"),
    ({"input": ""}, "input"),
    ({"input": []}, "input"),
    ({"input": [[]]}, "input"),
    ({"input": [1, "a"]}, "input"),
    ({"input": [30522]}, "input"),
    ({"input": [-1]}, "input"),
    ({"input": [[101] * 257]}, "input"),
    ({"input": ["a"] * 2049}, "input"),
    ({"input": "a", "encoding_format": "int8"}, "encoding_format"),
    ({"input": "a", "temperature": 1}, "temperature"),
])
def test_bad_embedding_requests(minilm, body, param):
    status, payload = post(minilm, "/v1/embeddings", body)
    assert status == 400, payload
    assert payload["error"]["param"] == param


def test_embedding_model_refuses_generation_and_unknown_model(minilm):
    for path, body in (("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
                       ("/v1/completions", {"prompt": "hi"}),
                       ("/v1/responses", {"input": "hi"})):
        status, payload = post(minilm, path, body)
        assert status == 400 and payload["error"]["code"] == "model_does_not_support_endpoint"
    status, payload = post(minilm, "/v1/messages", {
        "model": "minilm", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
    assert status == 400, payload
    status, payload = post(minilm, "/v1/embeddings", {"input": "a", "model": "other"})
    assert status == 404


def test_generation_model_refuses_pooling_endpoints(server):
    for path, body in (("/v1/embeddings", {"input": "a"}),
                       ("/v1/rerank", {"query": "a", "documents": ["b"]}),
                       ("/v1/score", {"text_1": "a", "text_2": "b"})):
        status, _, payload = server.request("POST", path, body)
        assert status == 400 and payload["error"]["code"] == "model_does_not_support_endpoint"


QUERY = "How do I bake bread at home?"
DOCS = ["The stock market fell sharply on Tuesday.",
        "Mix flour, water, yeast and salt, let the dough rise, then bake it in a hot oven.",
        "Penguins live in the southern hemisphere.",
        "A simple homemade loaf needs only an oven and a few hours of proofing."]


def test_rerank_and_score_with_embedding_model(minilm):
    status, body = post(minilm, "/v1/rerank", {"query": QUERY, "documents": DOCS, "top_n": 3})
    assert status == 200, body
    assert [r["index"] for r in body["results"]][:2] in ([1, 3], [3, 1])
    assert len(body["results"]) == 3 and body["results"][0]["document"]["text"] == DOCS[
        body["results"][0]["index"]]
    status, body = post(minilm, "/v1/rerank", {"query": QUERY, "return_documents": False,
                                               "documents": [{"text": d} for d in DOCS]})
    assert status == 200 and "document" not in body["results"][0]
    status, score = post(minilm, "/v1/score", {"text_1": QUERY, "text_2": DOCS})
    assert status == 200, score
    s = [d["score"] for d in score["data"]]
    assert min(s[1], s[3]) > max(s[0], s[2])
    emb, _ = embed(minilm, [QUERY] + DOCS)
    assert np.allclose(s, [cos(emb[0], e) for e in emb[1:]], atol=1e-5)
    status, pair = post(minilm, "/v1/score", {"text_1": [QUERY, DOCS[0]], "text_2": DOCS[:2]})
    assert status == 200 and len(pair["data"]) == 2
    for body, param in (({"text_1": ["a", "b"], "text_2": ["c", "d", "e"]}, "text_2"),
                        ({"text_1": [], "text_2": "a"}, "text_1"),
                        ({"text_1": "a"}, "text_2")):
        status, payload = post(minilm, "/v1/score", body)
        assert status == 400 and payload["error"]["param"] == param
    for body, param in (({"query": "", "documents": ["a"]}, "query"),
                        ({"query": "a", "documents": []}, "documents"),
                        ({"query": "a", "documents": [3]}, "documents"),
                        ({"query": "a", "documents": ["b"], "top_n": 0}, "top_n")):
        status, payload = post(minilm, "/v1/rerank", body)
        assert status == 400 and payload["error"]["param"] == param


def test_concurrent_clients_share_the_engine(minilm, reference):
    cases = reference["cases"]
    errors = []

    def client(i):
        c = cases[i % len(cases)]
        got, _ = embed(minilm, c["ids"])
        if cos(got[0], np.array(c["embedding"])) < 0.999:
            errors.append(c["text"])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory):
    """A random-weight BertForSequenceClassification folder with MiniLM's tokenizer."""
    src = require_minilm()
    d = tmp_path_factory.mktemp("xenc")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(src / f, d / f)
    cfg, W = br.random_cross_encoder(vocab=30522)
    (d / "config.json").write_text(json.dumps(cfg))
    br.save_st(d / "model.safetensors", W)
    s = Server(d, model=d, chat_template=None, served_name="xenc")
    # Weights as the server reads them (float32).
    yield s, cfg, {k: np.float32(v).astype(np.float64) for k, v in W.items()}
    assert s.stop() == 0


def pair_ids(server, a, b):
    _, _, ta = server.request("POST", "/tokenize", {"prompt": a})
    _, _, tb = server.request("POST", "/tokenize", {"prompt": b, "add_special_tokens": False})
    ids = ta["tokens"] + tb["tokens"] + [102]
    return ids, [0] * len(ta["tokens"]) + [1] * (len(tb["tokens"]) + 1)


def test_cross_encoder_matches_numpy(cross_encoder):
    s, cfg, W = cross_encoder
    status, body = post(s, "/v1/score", {"text_1": QUERY, "text_2": DOCS})
    assert status == 200, body
    want = []
    for doc in DOCS:
        ids, types = pair_ids(s, QUERY, doc)
        want.append(1 / (1 + np.exp(-br.classify(W, cfg, ids, types)[0])))
    got = [d["score"] for d in body["data"]]
    assert np.allclose(got, want, atol=1e-4), (got, want)
    status, body = post(s, "/v1/rerank", {"query": QUERY, "documents": DOCS})
    assert status == 200
    assert [r["index"] for r in body["results"]] == list(np.argsort(-np.array(want), kind="stable"))
    assert np.allclose([r["relevance_score"] for r in body["results"]], sorted(want, reverse=True),
                       atol=1e-4)
    # A reranker has no embeddings and does not generate.
    status, payload = post(s, "/v1/embeddings", {"input": "a"})
    assert status == 400 and "rerank" in payload["error"]["message"]
    status, payload = post(s, "/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}]})
    assert status == 400


def test_decoder_with_last_token_pooling(tmp_path):
    s = Server(tmp_path, extra_args=["--pooling", "last"])
    try:
        texts = ["Once upon a time", "there was a little girl", "Once upon a time"]
        got, body = embed(s, texts)
        assert len(got[0]) == 64  # stories260K's n_embd
        assert all(abs(np.linalg.norm(e) - 1) < 1e-5 for e in got)
        assert np.allclose(got[0], got[2], atol=1e-6) and cos(got[0], got[1]) < 0.9999
        alone, _ = embed(s, texts[1])
        assert np.allclose(alone[0], got[1], atol=1e-5)  # batching does not change a result
        # Causal: the last token of a prefix sees only the prefix.
        _, _, tok = s.request("POST", "/tokenize", {"prompt": texts[0]})
        prefix, _ = embed(s, [tok["tokens"], tok["tokens"][:-1]])
        assert cos(prefix[0], got[0]) > 0.99999 and cos(prefix[1], got[0]) < 0.9999
        status, payload = post(s, "/v1/chat/completions",
                               {"messages": [{"role": "user", "content": "a"}]})
        assert status == 400
    finally:
        assert s.stop() == 0


def test_decoder_embeddings_match_llama_cpp(tmp_path):
    """A real decoder served as an embedding model (--pooling last: the final-norm hidden state
    of the last token, normalised) against embeddings llama.cpp's llama-server computed on the
    same SmolLM2 file with --embedding --pooling last (data/smollm2_last_pooling.llama_cpp.json,
    which says how it was made)."""
    ref = json.loads((Path(__file__).parent / "data" /
                      "smollm2_last_pooling.llama_cpp.json").read_text())
    s = conftest.SmolLM2Server(tmp_path, extra_args=["--pooling", "last", "--threads", "2"])
    try:
        cases = ref["cases"]
        from_ids, _ = embed(s, [c["ids"] for c in cases])
        from_text, body = embed(s, [c["text"] for c in cases])
        assert body["usage"]["prompt_tokens"] == sum(len(c["ids"]) for c in cases)
        for c, a, b in zip(cases, from_ids, from_text):
            want = np.array(c["embedding"])
            assert len(a) == len(want) == 576
            assert cos(a, want) >= 0.999, c["text"]
            assert cos(b, want) >= 0.999, c["text"]
        # Distinct texts stay distinct, as in the reference.
        for i in range(len(cases)):
            for j in range(i + 1, len(cases)):
                want = cos(np.array(cases[i]["embedding"]), np.array(cases[j]["embedding"]))
                assert abs(cos(from_ids[i], from_ids[j]) - want) < 0.02
    finally:
        assert s.stop() == 0
