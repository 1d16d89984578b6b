"""A float64 numpy BERT (post-norm encoder, erf GELU) over HF safetensors weights: the
independent reference the embedding tests compare tachyon with, and a writer of small
random-weight BERT folders (cross-encoders) for them."""

import json
import math
import struct

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def load_st(path):
    """{name: float64 array} of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=DTYPES[t["dtype"]]).reshape(t["shape"]).astype(
            np.float64)
    return out


def layer_norm(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


erf = np.vectorize(math.erf)


def bert(W, cfg, ids, types=None):
    """Final hidden states [n, d] of a BERT encoder (weights with or without a "bert." prefix)."""
    p = "" if "embeddings.word_embeddings.weight" in W else "bert."
    n = len(ids)
    types = types or [0] * n
    eps = cfg["layer_norm_eps"]
    x = (W[p + "embeddings.word_embeddings.weight"][ids] +
         W[p + "embeddings.position_embeddings.weight"][:n] +
         W[p + "embeddings.token_type_embeddings.weight"][types])
    x = layer_norm(x, W[p + "embeddings.LayerNorm.weight"], W[p + "embeddings.LayerNorm.bias"], eps)
    H = cfg["num_attention_heads"]
    d = x.shape[1]
    hd = d // H
    for layer in range(cfg["num_hidden_layers"]):
        q = p + f"encoder.layer.{layer}."

        def lin(t, name):
            return t @ W[q + name + ".weight"].T + W[q + name + ".bias"]

        def heads(t):
            return t.reshape(n, H, hd).transpose(1, 0, 2)

        Q, K, V = (heads(lin(x, "attention.self." + k)) for k in ("query", "key", "value"))
        s = Q @ K.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ V).transpose(1, 0, 2).reshape(n, d)
        x = layer_norm(x + lin(a, "attention.output.dense"),
                       W[q + "attention.output.LayerNorm.weight"],
                       W[q + "attention.output.LayerNorm.bias"], eps)
        h = lin(x, "intermediate.dense")
        h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
        x = layer_norm(x + lin(h, "output.dense"), W[q + "output.LayerNorm.weight"],
                       W[q + "output.LayerNorm.bias"], eps)
    return x


def mean_embedding(W, cfg, ids):
    """Mean pooling over every token, L2-normalised (all-MiniLM-L6-v2's sentence embedding)."""
    e = bert(W, cfg, ids).mean(0)
    return e / np.linalg.norm(e)


def classify(W, cfg, ids, types):
    """BertForSequenceClassification logits: pooler dense + tanh on [CLS], then classifier."""
    x = bert(W, cfg, ids, types)[0]
    h = np.tanh(x @ W["bert.pooler.dense.weight"].T + W["bert.pooler.dense.bias"])
    return h @ W["classifier.weight"].T + W["classifier.bias"]


def save_st(path, tensors):
    """Writes float32 tensors {name: array} as a safetensors file."""
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def random_cross_encoder(vocab, d=32, layers=2, heads=4, ff=64, positions=64, seed=0):
    """(config, weights) of a random BertForSequenceClassification with one label."""
    rng = np.random.default_rng(seed)
    r = lambda *shape: rng.normal(0, 0.2, shape)
    cfg = {"architectures": ["BertForSequenceClassification"], "model_type": "bert",
           "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": heads,
           "intermediate_size": ff, "max_position_embeddings": positions, "type_vocab_size": 2,
           "vocab_size": vocab, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
           "position_embedding_type": "absolute", "num_labels": 1}
    W = {"bert.embeddings.word_embeddings.weight": r(vocab, d),
         "bert.embeddings.position_embeddings.weight": r(positions, d),
         "bert.embeddings.token_type_embeddings.weight": r(2, d),
         "bert.embeddings.LayerNorm.weight": 1 + r(d), "bert.embeddings.LayerNorm.bias": r(d),
         "bert.pooler.dense.weight": r(d, d), "bert.pooler.dense.bias": r(d),
         "classifier.weight": r(1, d), "classifier.bias": r(1)}
    for l in range(layers):
        p = f"bert.encoder.layer.{l}."
        for n in ("attention.self.query", "attention.self.key", "attention.self.value",
                  "attention.output.dense"):
            W[p + n + ".weight"], W[p + n + ".bias"] = r(d, d), r(d)
        W[p + "intermediate.dense.weight"], W[p + "intermediate.dense.bias"] = r(ff, d), r(ff)
        W[p + "output.dense.weight"], W[p + "output.dense.bias"] = r(d, ff), r(d)
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            W[p + n + ".weight"], W[p + n + ".bias"] = 1 + r(d), r(d)
    return cfg, W
