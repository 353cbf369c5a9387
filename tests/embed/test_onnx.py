"""The ONNX Runtime embedder: parity with the sentence-transformers backend, export caching, errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from ragsieve.config import EmbedderConfig
from ragsieve.embed import OnnxEmbedder, SentenceTransformerEmbedder, bundled_model_dir, load_embedder
from ragsieve.embed.onnx import read_sentence_transformers_settings
from ragsieve.errors import ConfigError, ModelError

TEXTS = [
    "Graphene is a single layer of carbon atoms arranged in a hexagonal lattice.",
    "A cat sat on the mat.",
    "",
    "Quantum dots are semiconductor nanocrystals whose colour depends on their size " * 12,
]


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx")


@pytest.fixture(scope="module")
def onnx_embedder(onnx_dir):
    emb = OnnxEmbedder(onnx_dir=str(onnx_dir), batch_size=2)
    emb.warm_up()
    return emb


def test_onnx_vectors_match_sentence_transformers(onnx_embedder):
    reference = SentenceTransformerEmbedder()
    expected = reference.embed(TEXTS)
    got = onnx_embedder.embed(TEXTS)
    assert got.shape == expected.shape == (4, 384) and got.dtype == np.float32
    # The long text is truncated at the model's 256 tokens by both backends.
    assert np.abs(got - expected).max() < 1e-4
    assert onnx_embedder.model_name == reference.model_name


def test_batching_and_length_sorting_keep_row_order(onnx_embedder):
    one_by_one = np.vstack([onnx_embedder.embed([t]) for t in TEXTS])
    assert np.allclose(onnx_embedder.embed(TEXTS), one_by_one, atol=1e-5)


def test_export_is_cached_and_reused(onnx_dir, onnx_embedder, monkeypatch):
    files = [p for p in onnx_dir.glob("*.onnx") if ".optimized." not in p.name]
    assert len(files) == 1
    import ragsieve.embed.onnx as onnx_module

    monkeypatch.setattr(onnx_module, "export_to_onnx", lambda *a: pytest.fail("exported again"))
    again = OnnxEmbedder(onnx_dir=str(onnx_dir))
    assert again.embed(["alpha"]).shape == (1, 384)


def test_optimised_graph_is_cached_and_gives_the_same_vectors(onnx_dir, onnx_embedder):
    import onnxruntime as ort

    source = next(p for p in onnx_dir.glob("*.onnx") if ".optimized." not in p.name)
    optimized = OnnxEmbedder.optimized_path(source, ort.__version__)
    assert optimized.is_file()
    again = OnnxEmbedder(onnx_dir=str(onnx_dir))
    np.testing.assert_allclose(again.embed(TEXTS), onnx_embedder.embed(TEXTS), atol=1e-5)
    # a damaged cached file is rebuilt, not an error
    optimized.write_bytes(b"damaged")
    third = OnnxEmbedder(onnx_dir=str(onnx_dir))
    np.testing.assert_allclose(third.embed(TEXTS), onnx_embedder.embed(TEXTS), atol=1e-5)
    assert optimized.stat().st_size > 1000


def test_damaged_onnx_file_is_a_clear_error(tmp_path, onnx_dir, onnx_embedder):
    damaged = OnnxEmbedder(onnx_dir=str(tmp_path))
    damaged.onnx_path(bundled_model_dir()).write_bytes(b"not an onnx graph")
    with pytest.raises(ModelError, match="delete it to re-export"):
        damaged.warm_up()


def test_missing_folder_and_unsupported_pooling(tmp_path):
    with pytest.raises(ModelError, match="does not exist; ragsieve never downloads"):
        OnnxEmbedder(model=str(tmp_path / "nothing")).warm_up()
    model = tmp_path / "cls-model"
    shutil.copytree(bundled_model_dir(), model, ignore=shutil.ignore_patterns("*.safetensors"))
    pooling = model / "1_Pooling" / "config.json"
    cfg = json.loads(pooling.read_text())
    cfg.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(cfg))
    assert read_sentence_transformers_settings(model) == (256, "cls")
    with pytest.raises(ModelError, match="mean pooling only"):
        OnnxEmbedder(model=str(model)).warm_up()


def test_config_selects_onnx_by_default_and_round_trips():
    emb = load_embedder(EmbedderConfig(threads=1))
    assert isinstance(emb, OnnxEmbedder)
    assert EmbedderConfig.model_validate(emb.to_dict()).backend == "onnx"
    with pytest.raises(ConfigError, match="CPU only"):
        load_embedder(EmbedderConfig(device="cuda"))


def test_a_model_loading_on_a_worker_thread_gives_the_same_vectors(onnx_embedder, onnx_dir):
    early = OnnxEmbedder(onnx_dir=str(onnx_dir), batch_size=2)
    early.start_warm_up()
    early.start_warm_up()  # once
    np.testing.assert_allclose(early.embed(TEXTS), onnx_embedder.embed(TEXTS), atol=1e-6)
    assert early.dim == 384


def test_a_failed_background_load_is_raised_by_warm_up_and_tried_again(tmp_path):
    emb = OnnxEmbedder(model=str(tmp_path / "no-such-model"), onnx_dir=str(tmp_path))
    emb.start_warm_up()
    for _ in range(2):
        with pytest.raises(ModelError, match="no-such-model does not exist"):
            emb.embed(["a text"])
