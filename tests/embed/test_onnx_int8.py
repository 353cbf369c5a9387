"""The int8 ONNX embedder: its vectors against the fp32 graph's, retrieval, its cache and its name."""

from __future__ import annotations

import numpy as np
import pytest
from tests.helpers import CORPUS

from ragsieve.config import EmbedderConfig
from ragsieve.embed import OnnxEmbedder, bundled_model_dir, load_embedder
from ragsieve.errors import ConfigError, IndexStoreError, ModelError
from ragsieve.index.store import Index

TEXTS = [
    "Graphene is a single layer of carbon atoms arranged in a hexagonal lattice.",
    "Apollo 11 landed on the Moon in July 1969.",
    "What is the capital of France?",
    "Mitochondria produce ATP through oxidative phosphorylation.",
    "The stock market fell sharply on Tuesday after the rate decision.",
    "def add(x, y): return x + y",
    "Photosynthesis converts light energy into chemical energy in plants.",
    "Vitamin D deficiency and bone health in older adults",
    "a",
    "The quick brown fox jumps over the lazy dog. " * 20,
]
QUERIES = [
    "How do plants turn sunlight into chemical energy?",
    "What is the Sun made of?",
    "Which planet is the largest?",
    "What are the phases of the Moon?",
    "What does a cell membrane do?",
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx-int8")


@pytest.fixture(scope="module")
def fp32(onnx_dir):
    emb = OnnxEmbedder(onnx_dir=str(onnx_dir), precision="fp32")
    emb.warm_up()
    return emb


@pytest.fixture(scope="module")
def int8(onnx_dir, fp32):
    emb = OnnxEmbedder(onnx_dir=str(onnx_dir), precision="int8")
    emb.warm_up()
    return emb


def test_int8_vectors_close_to_fp32(fp32, int8):
    a, b = fp32.embed(TEXTS), int8.embed(TEXTS)
    assert a.shape == b.shape == (len(TEXTS), 384)
    cosines = (a * b).sum(axis=1)
    assert cosines.min() >= 0.98, cosines
    assert not np.allclose(a, b)  # it is another graph


def test_int8_graph_cached_beside_fp32_under_its_precision(onnx_dir, fp32, int8):
    model_dir = bundled_model_dir()
    path = int8.onnx_path(model_dir)
    assert path.is_file() and path.parent == fp32.onnx_path(model_dir).parent
    assert "int8" in path.name and "int8" not in fp32.onnx_path(model_dir).name
    assert path.stat().st_size < fp32.onnx_path(model_dir).stat().st_size / 2
    assert not list(onnx_dir.glob(".*.tmp"))  # nothing left half-written
    again = OnnxEmbedder(onnx_dir=str(onnx_dir), precision="int8")
    np.testing.assert_allclose(again.embed(TEXTS[:3]), int8.embed(TEXTS[:3]), atol=1e-5)


def test_precision_names_the_embedder(fp32, int8):
    assert fp32.model_name == "sentence-transformers/all-MiniLM-L6-v2"
    assert int8.model_name != fp32.model_name and "int8" in int8.model_name
    assert int8.to_dict()["precision"] == "int8"
    assert load_embedder(EmbedderConfig(precision="int8")).model_name == int8.model_name
    # int8 is the default; the fp32 graph is one setting away
    assert load_embedder(EmbedderConfig()).model_name == int8.model_name
    assert load_embedder(EmbedderConfig(precision="fp32")).model_name == fp32.model_name


def test_precision_choices_are_checked():
    with pytest.raises(ModelError, match="precision"):
        OnnxEmbedder(precision="int4")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="onnx"):
        load_embedder(EmbedderConfig(backend="sentence-transformers", precision="int8"))


def test_retrieval_top1_unchanged(tmp_path, fp32, int8):
    tops = []
    indexes = []
    for name, emb in (("fp32", fp32), ("int8", int8)):
        index = Index.build(CORPUS, tmp_path / name, embedder=emb)
        indexes.append(index)
        tops.append([index.search(q, k=1, mode="dense")[0].chunk.id for q in QUERIES])
    assert tops[0] == tops[1]
    # An index built with one precision refuses the other, when the user asked for it.
    with pytest.raises(IndexStoreError, match="int8"):
        Index.open(tmp_path / "fp32", embedder=int8)
    with pytest.raises(IndexStoreError, match="int8"):
        Index.open(tmp_path / "fp32", embedder=load_embedder(EmbedderConfig(precision="int8", onnx_dir=int8.onnx_dir)))


def test_an_fp32_index_keeps_working_when_the_precision_is_left_at_the_int8_default(tmp_path, onnx_dir, fp32):
    built = Index.build(CORPUS, tmp_path / "old", embedder=fp32)
    expected = [[h.chunk.id for h in built.search(q, k=3, mode="dense")] for q in QUERIES]
    built.close()
    default = load_embedder(EmbedderConfig(onnx_dir=str(onnx_dir)))
    assert default.model_name.endswith("@int8")
    with Index.open(tmp_path / "old", embedder=default) as index:
        assert index.embedder.model_name == fp32.model_name  # searched with the precision it was built with
        assert index.embedder.to_dict()["precision"] == "fp32"
        assert [[h.chunk.id for h in index.search(q, k=3, mode="dense")] for q in QUERIES] == expected
    assert default.model_name.endswith("@int8")  # the caller's embedder is left as it was
    with Index.open(tmp_path / "old", embedder_config=EmbedderConfig(onnx_dir=str(onnx_dir))) as index:
        assert index.embedder.model_name == fp32.model_name
    # a re-ingest adds to it with fp32 too: never two precisions in one index
    with Index.build(CORPUS, tmp_path / "old", embedder=default) as again:
        assert again.manifest["embedder"]["model_name"] == fp32.model_name
        assert again.embedder.model_name == fp32.model_name


def test_the_relevance_judge_keeps_its_verdicts_with_int8(fp32, int8):
    """The trust check that reads sentence vectors (the bundled retrieval evaluator: best-sentence
    cosine among its features) scores the demo questions' candidates alike with either precision
    (measured: 256 of 260 verdicts the same over 52 questions' top 5, largest score change 0.042)."""
    from ragsieve.config import ChunkingConfig
    from ragsieve.demo import demo_corpus_dir, demo_questions
    from ragsieve.ingest import chunk_text, load_folder
    from ragsieve.sieve.judge import EvaluatorJudge

    cfg = ChunkingConfig()
    texts = [
        piece.text
        for doc in load_folder(demo_corpus_dir())
        for part in doc.parts()
        for piece in chunk_text(part.text, cfg.max_tokens, cfg.overlap_tokens, cfg.unit)
    ]
    vectors = fp32.embed(texts)
    questions = [q["question"] for q in demo_questions(include_unanswerable=True)][::2]
    judges = EvaluatorJudge(embedder=fp32), EvaluatorJudge(embedder=int8)

    def verdict(score: float, judge: EvaluatorJudge) -> str:
        return "keep" if score >= judge.upper else "drop" if score < judge.lower else "ambiguous"

    same, changes = 0, []
    for question, qv in zip(questions, fp32.embed(questions), strict=True):
        top = [texts[i] for i in np.argsort(-(vectors @ qv))[:3]]
        a, b = (judge.score(question, top) for judge in judges)
        for x, y in zip(a, b, strict=True):
            same += int(verdict(x, judges[0]) == verdict(y, judges[1]))
            changes.append(abs(x - y))
    assert same >= 0.9 * len(changes), (same, len(changes))
    assert max(changes) < 0.1 and float(np.mean(changes)) < 0.02, changes
