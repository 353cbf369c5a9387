"""Ingest's sentence vectors from the chunks' own forward pass (``ingest.sentence_vectors =
"one-pass"``): no second pass, the method recorded in the manifest, never mixed with separately
embedded ones, and the separate pass for embedders that cannot pool (or when asked for)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from tests.helpers import HashEmbedder, copy_corpus

from ragsieve.config import PipelineConfig
from ragsieve.embed.ahead import EmbedAhead
from ragsieve.index import Index
from ragsieve.index.sentences import (
    compute_sentence_vectors,
    embed_chunks_with_sentences,
    own_sentences,
    passage_sentences,
    sentence_spans,
)


class PoolingEmbedder(HashEmbedder):
    """A hash embedder that also "pools" sentences from a text's pass: a sentence's vector is its
    own hash vector plus half its text's, so it differs from the sentence embedded alone; a span
    ending past ``cut`` characters is cut off (NaN), like a text longer than a model's maximum."""

    pools_sentences = True

    def __init__(self, cut: int = 10_000) -> None:
        super().__init__()
        self.cut = cut
        self.embedded: list[str] = []
        self.passes: list[str] = []
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            self.embedded.extend(texts)
        return super().embed(texts)

    def pooled(self, text: str, span: tuple[int, int]) -> np.ndarray:
        raw = HashEmbedder.embed(self, [text[span[0] : span[1]]])[0] + 0.5 * HashEmbedder.embed(self, [text])[0]
        return raw / np.linalg.norm(raw)

    def embed_with_sentences(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        with self._lock:
            self.passes.extend(texts)
        rows = []
        for text, text_spans in zip(texts, spans, strict=True):
            out = np.full((len(text_spans), self.dim), np.nan, dtype=np.float32)
            for j, span in enumerate(text_spans):
                if span[1] <= self.cut:
                    out[j] = self.pooled(text, span)
            rows.append(out)
        return HashEmbedder.embed(self, texts), rows


def expected_one_pass(embedder: PoolingEmbedder, text: str) -> np.ndarray:
    spans = sentence_spans(text, own_sentences(text))
    return np.stack([embedder.pooled(text, span) for span in spans if span is not None])


def stored_by_chunk(index: Index) -> list[np.ndarray]:
    out = []
    for row in range(len(index)):
        _, vectors = index.sentence_vectors([row])
        out.append(vectors)
    return out


def test_sentence_spans_find_each_sentence_in_order():
    text = "Graphene is thin. It conducts heat.  Graphene is thin."
    assert sentence_spans(text, ["Graphene is thin.", "It conducts heat.", "Graphene is thin."]) == [
        (0, 17), (18, 35), (37, 54),
    ]  # fmt: skip
    # a sentence the splitter rewrote is not a piece of the text: no span
    assert sentence_spans("1. First item", ["First item, rewritten"]) == [None]
    # one whose whitespace it collapsed is found with the text's own whitespace
    text = "Graphene is\nthin and  strong. It conducts heat."
    assert own_sentences(text) == ["Graphene is thin and strong.", "It conducts heat."]
    assert sentence_spans(text, own_sentences(text)) == [(0, 29), (30, 47)]


def test_ingest_pools_sentences_in_the_chunks_pass_and_embeds_none_on_its_own(tmp_path):
    embedder = PoolingEmbedder()
    with Index.build(copy_corpus(tmp_path), tmp_path / "idx", embedder=embedder) as index:
        info = index.manifest["sentence_vectors"]
        assert info["method"] == "one-pass" and info["separate_rows"] == 0
        assert index.sentence_method == "one-pass"
        sentences = {s for c in index.chunks for s in own_sentences(c.text)}
        assert sentences and not set(embedder.embedded) & sentences, "a sentence was embedded in a second pass"
        for chunk, vectors in zip(index.chunks, stored_by_chunk(index), strict=True):
            if own_sentences(chunk.text):
                np.testing.assert_allclose(vectors, expected_one_pass(embedder, chunk.text), atol=1e-6)
        # the chunks' own vectors are what a plain embed gives, in order
        np.testing.assert_allclose(index.embeddings, HashEmbedder().embed([c.text for c in index.chunks]), atol=1e-6)


def test_the_separate_pass_when_asked_for_or_when_the_embedder_cannot_pool(tmp_path):
    config = PipelineConfig()
    config.ingest.sentence_vectors = "separate"
    corpus = copy_corpus(tmp_path)
    for name, embedder, cfg in (("asked", PoolingEmbedder(), config), ("cannot", HashEmbedder(), PipelineConfig())):
        with Index.build(corpus, tmp_path / name, config=cfg, embedder=embedder) as index:
            assert index.manifest["sentence_vectors"]["method"] == "separate"
            sentences, vectors = index.sentence_vectors(range(len(index)))
            np.testing.assert_allclose(vectors, HashEmbedder().embed(sentences), atol=1e-6)


def test_a_reingest_never_mixes_the_two_kinds(tmp_path):
    corpus = copy_corpus(tmp_path)
    separate = PipelineConfig()
    separate.ingest.sentence_vectors = "separate"
    with Index.build(corpus, tmp_path / "idx", config=separate, embedder=PoolingEmbedder()):
        pass
    # unchanged files: chunk vectors reused, but the separate sentence vectors are not taken as one-pass ones
    again = PoolingEmbedder()
    with Index.build(corpus, tmp_path / "idx", embedder=again) as index:
        assert index.manifest["sentence_vectors"]["method"] == "one-pass"
        assert not again.embedded, "the unchanged chunks were embedded again"
        for chunk, vectors in zip(index.chunks, stored_by_chunk(index), strict=True):
            if own_sentences(chunk.text):
                np.testing.assert_allclose(vectors, expected_one_pass(again, chunk.text), atol=1e-6)
    # and back: one-pass vectors are not reused as separate ones
    with Index.build(corpus, tmp_path / "idx", config=separate, embedder=PoolingEmbedder()) as index:
        sentences, vectors = index.sentence_vectors(range(len(index)))
        np.testing.assert_allclose(vectors, HashEmbedder().embed(sentences), atol=1e-6)
    # a one-pass re-ingest reuses the one-pass vectors stored: no pass at all
    with Index.build(corpus, tmp_path / "idx2", embedder=PoolingEmbedder()):
        pass
    third = PoolingEmbedder()
    with Index.build(corpus, tmp_path / "idx2", embedder=third) as index:
        assert third.passes == [] and third.embedded == []
        assert index.manifest["sentence_vectors"]["method"] == "one-pass"


def test_a_sentence_the_pass_cut_off_is_embedded_on_its_own_and_counted(tmp_path):
    embedder = PoolingEmbedder(cut=60)
    with Index.build(copy_corpus(tmp_path), tmp_path / "idx", embedder=embedder) as index:
        info = index.manifest["sentence_vectors"]
        assert info["method"] == "one-pass" and info["separate_rows"] > 0
        seen_cut = 0
        for chunk, vectors in zip(index.chunks, stored_by_chunk(index), strict=True):
            own = own_sentences(chunk.text)
            for sentence, span, vector in zip(own, sentence_spans(chunk.text, own), vectors, strict=True):
                if span is not None and span[1] <= 60:
                    np.testing.assert_allclose(vector, embedder.pooled(chunk.text, span), atol=1e-6)
                else:
                    seen_cut += 1
                    np.testing.assert_allclose(vector, HashEmbedder().embed([sentence])[0], atol=1e-6)
        assert seen_cut == info["separate_rows"]


def test_from_chunks_pools_in_the_same_pass_and_gives_what_the_folder_build_gives(tmp_path):
    embedder = PoolingEmbedder()
    with Index.build(copy_corpus(tmp_path), tmp_path / "built", embedder=embedder) as built:
        chunks = list(built.chunks)
        from_folder = stored_by_chunk(built)
    fresh = PoolingEmbedder()
    with Index.from_chunks(chunks, tmp_path / "chunks", embedder=fresh) as index:
        assert index.manifest["sentence_vectors"]["method"] == "one-pass"
        assert not set(fresh.embedded) & {s for c in chunks for s in own_sentences(c.text)}
        for a, b in zip(from_folder, stored_by_chunk(index), strict=True):
            np.testing.assert_allclose(a, b, atol=1e-6)
    # with the chunk vectors given, the sentences still come from a pass over their chunks
    given = PoolingEmbedder()
    vectors = HashEmbedder().embed([c.text for c in chunks])
    with Index.from_chunks(chunks, tmp_path / "given", embedder=given, embeddings=vectors) as index:
        for a, b in zip(from_folder, stored_by_chunk(index), strict=True):
            np.testing.assert_allclose(a, b, atol=1e-6)


def test_compute_sentence_vectors_takes_pooled_rows_and_embeds_the_rest():
    embedder = PoolingEmbedder(cut=40)
    texts = [
        "Short one. Another short one here.",
        "Only one sentence.",
        "First part. Then a long tail that runs past the cut.",
    ]
    vectors, pooled = embed_chunks_with_sentences(texts, embedder)
    np.testing.assert_allclose(vectors, HashEmbedder().embed(texts), atol=1e-6)
    counts: dict[str, int] = {}
    offsets, rows = compute_sentence_vectors(texts, embedder, pooled=pooled, counts=counts)
    assert offsets.tolist() == [0, 2, 2, 4]
    assert counts == {"pooled": 3, "known": 0, "separate": 1}
    assert np.isfinite(rows).all()
    np.testing.assert_allclose(rows[3], HashEmbedder().embed([passage_sentences(texts[2])[1]])[0], atol=1e-6)


class SlowEmbedder(HashEmbedder):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        time.sleep(0.01)
        return super().embed(texts)


def test_embed_ahead_keeps_at_most_max_pending_batches_waiting_and_reports_progress():
    emb = SlowEmbedder()
    texts = [f"chunk {i} of a long corpus about topic {i % 11}" for i in range(400)]
    seen: list[tuple[str, int, int]] = []
    ahead = EmbedAhead(emb, batch=16, max_pending=2, progress=lambda *a: seen.append(a))
    for start in range(0, len(texts), 40):
        ahead.submit(texts[start : start + 40])
    got = ahead.finish(texts)
    np.testing.assert_allclose(got, HashEmbedder().embed(texts), atol=1e-6)  # order and values as sequential
    assert 1 <= ahead.peak_pending <= 2
    ahead_reports = [(done, total) for stage, done, total in seen if stage == "embed"]
    assert ahead_reports and all(done <= total for done, total in ahead_reports)
    assert [d for d, _ in ahead_reports] == sorted(d for d, _ in ahead_reports)


@pytest.mark.parametrize("one_pass", [True, False])
def test_embed_ahead_with_sentences_gives_each_texts_rows(one_pass):
    emb = PoolingEmbedder()
    texts = [f"Chunk {i} starts here. It has a second sentence about {i % 5}." for i in range(100)]
    ahead = EmbedAhead(
        emb, batch=16, with_sentences=(lambda t: embed_chunks_with_sentences(t, emb)) if one_pass else None
    )
    ahead.submit(texts[:70])  # the last 30 are embedded by finish()
    got = ahead.finish(texts)
    np.testing.assert_allclose(got, HashEmbedder().embed(texts), atol=1e-6)
    for text in texts[:64]:  # four full batches went ahead
        rows = ahead.sentences_of(text)
        if one_pass:
            assert rows is not None
            np.testing.assert_allclose(rows, expected_one_pass(emb, text), atol=1e-6)
        else:
            assert rows is None


def test_the_manifest_of_an_index_that_does_not_say_means_separate(tmp_path: Path):
    with Index.build(copy_corpus(tmp_path), tmp_path / "idx", embedder=HashEmbedder()) as index:
        index.manifest["sentence_vectors"].pop("method")
        assert index.sentence_method == "separate"
