"""The ONNX Runtime embedder: parity with the sentence-transformers backend, export caching, errors."""

from __future__ import annotations

import json
import shutil
import time

import numpy as np
import pytest

from ragsieve.config import EmbedderConfig
from ragsieve.embed import OnnxEmbedder, SentenceTransformerEmbedder, bundled_model_dir, load_embedder
from ragsieve.embed.onnx import (
    OPTIMIZED_CHECK,
    OPTIMIZED_GRAPH,
    OPTIMIZED_WEIGHTS,
    read_sentence_transformers_settings,
)
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
    emb = OnnxEmbedder(precision="fp32", onnx_dir=str(onnx_dir), batch_size=2)
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
    files = [p for p in onnx_dir.glob("*.onnx") if ".optimized" not in p.name]
    assert len(files) == 1
    import ragsieve.embed.onnx as onnx_module

    monkeypatch.setattr(onnx_module, "export_to_onnx", lambda *a: pytest.fail("exported again"))
    again = OnnxEmbedder(precision="fp32", onnx_dir=str(onnx_dir))
    assert again.embed(["alpha"]).shape == (1, 384)


def cached_optimised(onnx_dir):
    import onnxruntime as ort

    source = next(p for p in onnx_dir.glob("*.onnx") if ".optimized" not in p.name)
    return source, OnnxEmbedder.optimized_dir(source, ort.__version__)


def test_optimised_graph_is_cached_and_gives_the_same_vectors(onnx_dir, onnx_embedder):
    source, cached = cached_optimised(onnx_dir)
    assert {p.name for p in cached.iterdir()} == {OPTIMIZED_GRAPH, OPTIMIZED_WEIGHTS, OPTIMIZED_CHECK}
    # the weights live beside the graph, not inside it (what makes the cached graph quick to load)
    assert (cached / OPTIMIZED_GRAPH).stat().st_size < 1_000_000 < (cached / OPTIMIZED_WEIGHTS).stat().st_size
    again = OnnxEmbedder(precision="fp32", onnx_dir=str(onnx_dir))
    # the same graph on the same runtime: the same bits as the session that wrote it
    np.testing.assert_array_equal(again.embed(TEXTS), onnx_embedder.embed(TEXTS))


def rebuilt_times(monkeypatch) -> list[int]:
    import ragsieve.embed.onnx as onnx_module

    writes: list[int] = []
    write = onnx_module.OnnxEmbedder._write_cache

    def counting(self, *args):
        writes.append(1)
        return write(self, *args)

    monkeypatch.setattr(onnx_module.OnnxEmbedder, "_write_cache", counting)
    return writes


def replace_file(path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    tmp.replace(path)


@pytest.mark.parametrize("damage", ["weights-changed", "weights-truncated", "graph-garbage", "check-of-another-probe"])
def test_a_damaged_or_stale_cached_graph_is_rebuilt_not_trusted(onnx_dir, onnx_embedder, monkeypatch, damage):
    _, cached = cached_optimised(onnx_dir)
    weights, graph, check = cached / OPTIMIZED_WEIGHTS, cached / OPTIMIZED_GRAPH, cached / OPTIMIZED_CHECK
    # Written as new files: the sessions open on the cache map its weights, as a running process would.
    if damage == "weights-changed":  # same size, other bytes: only the check vector tells
        data = weights.read_bytes()
        replace_file(weights, data[len(data) // 2 :] + data[: len(data) // 2])
    elif damage == "weights-truncated":
        replace_file(weights, weights.read_bytes()[:1000])
    elif damage == "graph-garbage":
        replace_file(graph, b"damaged")
    else:
        record = json.loads(check.read_text())
        record["probe"] = [x + 0.01 for x in record["probe"]]
        replace_file(check, json.dumps(record).encode())
    writes = rebuilt_times(monkeypatch)
    again = OnnxEmbedder(precision="fp32", onnx_dir=str(onnx_dir))
    np.testing.assert_array_equal(again.embed(TEXTS), onnx_embedder.embed(TEXTS))
    assert writes == [1], "the damaged cache was trusted"
    # and the rebuilt cache is used as it is by the next process
    again = OnnxEmbedder(precision="fp32", onnx_dir=str(onnx_dir))
    np.testing.assert_array_equal(again.embed(TEXTS), onnx_embedder.embed(TEXTS))
    assert writes == [1]


def test_the_one_file_cache_of_earlier_versions_is_replaced(tmp_path, onnx_dir, onnx_embedder):
    import onnxruntime as ort

    source, _ = cached_optimised(onnx_dir)
    shutil.copy(source, tmp_path / source.name)
    legacy = OnnxEmbedder.legacy_optimized_path(tmp_path / source.name, ort.__version__)
    legacy.write_bytes(b"an optimised graph an earlier version cached")
    emb = OnnxEmbedder(precision="fp32", onnx_dir=str(tmp_path))
    np.testing.assert_array_equal(emb.embed(TEXTS), onnx_embedder.embed(TEXTS))
    assert not legacy.exists() and OnnxEmbedder.optimized_dir(tmp_path / source.name, ort.__version__).is_dir()


def test_a_read_only_cache_runs_the_source_graph(tmp_path, onnx_dir, onnx_embedder, monkeypatch):
    import ragsieve.embed.onnx as onnx_module

    source, _ = cached_optimised(onnx_dir)
    shutil.copy(source, tmp_path / source.name)

    def unwritable(*args, **kwargs):
        raise PermissionError("read-only file system")

    monkeypatch.setattr(onnx_module.tempfile, "mkdtemp", unwritable)
    emb = OnnxEmbedder(precision="fp32", onnx_dir=str(tmp_path))
    np.testing.assert_allclose(emb.embed(TEXTS), onnx_embedder.embed(TEXTS), atol=1e-6)
    assert not [p for p in tmp_path.iterdir() if ".optimized" in p.name]


def test_threads_warming_up_together_share_one_load(onnx_dir, onnx_embedder, monkeypatch):
    import threading

    import ragsieve.embed.onnx as onnx_module

    loads: list[str] = []
    load = onnx_module.OnnxEmbedder._load

    def slow_counting_load(self):
        loads.append(threading.current_thread().name)
        time.sleep(0.2)  # long enough for every thread to arrive while it runs
        load(self)

    monkeypatch.setattr(onnx_module.OnnxEmbedder, "_load", slow_counting_load)
    emb = OnnxEmbedder(precision="fp32", onnx_dir=str(onnx_dir))
    barrier = threading.Barrier(6)
    results: list[np.ndarray] = []

    def ask(start_first: bool) -> None:
        barrier.wait()
        if start_first:
            emb.start_warm_up()
        results.append(emb.embed(TEXTS[:2]))

    threads = [threading.Thread(target=ask, args=(i % 2 == 0,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(loads) == 1, f"{len(loads)} loads for one embedder"
    assert len(results) == 6
    for got in results:
        np.testing.assert_array_equal(got, onnx_embedder.embed(TEXTS[:2]))


def test_damaged_onnx_file_is_a_clear_error(tmp_path, onnx_dir, onnx_embedder):
    damaged = OnnxEmbedder(precision="fp32", onnx_dir=str(tmp_path))
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
    early = OnnxEmbedder(precision="fp32", onnx_dir=str(onnx_dir), batch_size=2)
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


def test_a_process_exiting_while_the_model_loads_exits_cleanly(onnx_dir, onnx_embedder):
    """A command that fails (or finishes) while the embedder still loads on its worker thread
    exits with its own status, not with an abort from inside ONNX Runtime."""
    import subprocess
    import sys

    code = (
        "import threading\n"
        "import onnxruntime\n"
        "building = threading.Event()\n"
        "Session = onnxruntime.InferenceSession\n"
        "class Signalling(Session):\n"
        "    def __init__(self, *a, **k):\n"
        "        building.set()\n"
        "        super().__init__(*a, **k)\n"
        "onnxruntime.InferenceSession = Signalling\n"
        "from ragsieve.embed import OnnxEmbedder\n"
        f"OnnxEmbedder(precision='fp32', onnx_dir={str(onnx_dir)!r}).start_warm_up()\n"
        "building.wait(60)\n"
        "raise SystemExit(3)  # while the worker thread builds the session\n"
    )
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert done.returncode == 3, done.stderr[-2000:]
        assert "terminate called" not in done.stderr
