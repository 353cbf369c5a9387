from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest

from ragsieve.embed.bert_onnx import build_bert_graph, export_bert_to_onnx, is_supported, read_safetensors
from ragsieve.errors import ModelError

CONFIG = {
    "model_type": "bert", "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 2,
    "intermediate_size": 16, "vocab_size": 20, "max_position_embeddings": 16, "type_vocab_size": 2,
    "layer_norm_eps": 1e-12, "hidden_act": "gelu",
}


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))


def tiny_bert(folder: Path, prefix: str = "") -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    h, inner = CONFIG["hidden_size"], CONFIG["intermediate_size"]
    w = {
        "embeddings.word_embeddings.weight": rng.normal(size=(20, h)),
        "embeddings.position_embeddings.weight": rng.normal(size=(16, h)),
        "embeddings.token_type_embeddings.weight": rng.normal(size=(2, h)),
        "embeddings.LayerNorm.weight": 1 + 0.1 * rng.normal(size=h),
        "embeddings.LayerNorm.bias": 0.1 * rng.normal(size=h),
    }
    for i in range(CONFIG["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        for name, shape in [
            ("attention.self.query", (h, h)), ("attention.self.key", (h, h)), ("attention.self.value", (h, h)),
            ("attention.output.dense", (h, h)), ("intermediate.dense", (inner, h)), ("output.dense", (h, inner)),
        ]:
            w[f"{p}.{name}.weight"] = rng.normal(size=shape) / math.sqrt(shape[1])
            w[f"{p}.{name}.bias"] = 0.1 * rng.normal(size=shape[0])
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[f"{p}.{name}.weight"] = 1 + 0.1 * rng.normal(size=h)
            w[f"{p}.{name}.bias"] = 0.1 * rng.normal(size=h)
    w = {k: v.astype(np.float32) for k, v in w.items()}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    write_safetensors(folder / "model.safetensors", {prefix + k: v for k, v in w.items()})
    return w


def reference(w: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
    """BERT + masked mean pooling written directly in numpy (float64), independent of the graph."""
    from scipy.special import erf

    def ln(x, p):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * w[p + ".weight"] + w[p + ".bias"]

    def lin(x, p):
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    b, s = ids.shape
    heads, d = CONFIG["num_attention_heads"], CONFIG["hidden_size"] // CONFIG["num_attention_heads"]
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][np.arange(s)][None]
    x = ln(x + w["embeddings.token_type_embeddings.weight"][types], "embeddings.LayerNorm")
    for i in range(CONFIG["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q, k, v = (lin(x, f"{p}.attention.self.{n}").reshape(b, s, heads, d).transpose(0, 2, 1, 3)
                   for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + np.where(mask[:, None, None, :] > 0, 0.0, -1e30)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, -1)
        x = ln(lin(ctx, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        inner = lin(x, f"{p}.intermediate.dense")
        x = ln(lin(inner * 0.5 * (1 + erf(inner / math.sqrt(2))), f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    m = mask[..., None].astype(np.float64)
    return (x * m).sum(1) / m.sum(1)


@pytest.mark.parametrize("prefix", ["", "bert."])
def test_graph_matches_a_numpy_bert(tmp_path, prefix):
    import onnxruntime as ort

    w = tiny_bert(tmp_path / "model", prefix)
    assert is_supported(tmp_path / "model")
    export_bert_to_onnx(tmp_path / "model", tmp_path / "out" / "g.onnx")
    session = ort.InferenceSession(str(tmp_path / "out" / "g.onnx"), providers=["CPUExecutionProvider"])
    ids = np.array([[1, 5, 7, 2, 0, 0], [1, 9, 3, 4, 8, 2]], dtype=np.int64)
    mask = (ids > 0).astype(np.int64)
    types = np.array([[0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1]], dtype=np.int64)
    got = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
    np.testing.assert_allclose(got, reference(w, ids, mask, types), atol=1e-4)
    # Padding does not change a sentence's vector.
    alone = session.run(None, {"input_ids": ids[:1, :4], "attention_mask": mask[:1, :4],
                               "token_type_ids": types[:1, :4]})[0]
    np.testing.assert_allclose(alone, got[:1], atol=1e-5)


def test_safetensors_reader_round_trips(tmp_path):
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(4, dtype=np.float32)}
    write_safetensors(tmp_path / "m.safetensors", arrays)
    back = read_safetensors(tmp_path / "m.safetensors")
    assert set(back) == {"a", "b"} and np.array_equal(back["a"], arrays["a"])


def test_other_architectures_are_not_claimed(tmp_path):
    tiny_bert(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**CONFIG, "model_type": "roberta"}))
    assert not is_supported(tmp_path)
    assert not is_supported(tmp_path / "missing")


def test_a_missing_weight_is_named(tmp_path):
    tiny_bert(tmp_path)
    write_safetensors(tmp_path / "model.safetensors", {"embeddings.LayerNorm.weight": np.ones(8, np.float32)})
    with pytest.raises(ModelError, match="word_embeddings"):
        build_bert_graph(tmp_path)


@pytest.mark.slow
def test_bundled_minilm_matches_sentence_transformers(tmp_path):
    """The graph written without torch gives the torch model's vectors for the bundled MiniLM."""
    from ragsieve.embed.local import SentenceTransformerEmbedder, bundled_model_dir
    from ragsieve.embed.onnx import OnnxEmbedder

    texts = ["graphene is a single layer of carbon atoms", "The Moon orbits Earth.", "a"]
    onnx_embedder = OnnxEmbedder(precision="fp32", onnx_dir=str(tmp_path))
    export_bert_to_onnx(bundled_model_dir(), onnx_embedder.onnx_path(bundled_model_dir()))
    torch_vectors = SentenceTransformerEmbedder().embed(texts)
    np.testing.assert_allclose(onnx_embedder.embed(texts), torch_vectors, atol=1e-5)
