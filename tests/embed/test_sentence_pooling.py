"""Sentence vectors pooled from a passage's own forward pass (``OnnxEmbedder.embed_with_sentences``)
against the same sentences embedded on their own: the ranking they give a question's sentences
and passages, and the pooling itself."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from ragsieve.embed.onnx import pool_token_spans
from ragsieve.index.sentences import embed_chunks_with_sentences, own_sentences

# Passages of several sentences on one subject each; every question asks what one sentence says.
PASSAGES = [
    "Graphene is a single layer of carbon atoms arranged in a hexagonal lattice. It was first isolated in 2004 "
    "by Andre Geim and Konstantin Novoselov at the University of Manchester. Graphene conducts heat and "
    "electricity better than copper. Its tensile strength is about 130 gigapascals.",
    "Apollo 11 was the first crewed mission to land on the Moon. The lunar module Eagle touched down on "
    "20 July 1969 in the Sea of Tranquility. Neil Armstrong and Buzz Aldrin spent about two and a quarter hours "
    "outside the module. Michael Collins stayed in lunar orbit aboard Columbia.",
    "Mitochondria are organelles found in most eukaryotic cells. They produce ATP through oxidative "
    "phosphorylation. Mitochondria have their own circular DNA, inherited from the mother. Their number per "
    "cell ranges from one to several thousand.",
    "Vitamin D is made in the skin when it is exposed to ultraviolet B light. A deficiency in adults can "
    "cause osteomalacia, a softening of the bones. Fatty fish such as salmon are among the few foods rich in it. "
    "Many countries fortify milk with vitamin D.",
]
# (question, passage, index of the sentence that answers it)
QUESTIONS = [
    ("Who first isolated graphene?", 0, 1),
    ("How strong is graphene under tension?", 0, 3),
    ("Does graphene conduct electricity well?", 0, 2),
    ("When did the lunar module land?", 1, 1),
    ("Who stayed in orbit during the Moon landing?", 1, 3),
    ("How long did the astronauts walk on the Moon?", 1, 2),
    ("How do mitochondria make ATP?", 2, 1),
    ("Do mitochondria have their own DNA?", 2, 2),
    ("How many mitochondria does a cell have?", 2, 3),
    ("What disease does a lack of vitamin D cause in adults?", 3, 1),
    ("Which foods contain vitamin D?", 3, 2),
    ("How does the body make vitamin D?", 3, 0),
]


def test_pool_token_spans_means_each_spans_tokens_and_marks_cut_off_spans():
    tokens = np.arange(12, dtype=np.float32).reshape(6, 2)  # CLS, 4 text tokens, SEP
    offsets = [(0, 0), (0, 3), (4, 7), (7, 8), (9, 12), (0, 0)]
    real = np.array([False, True, True, True, True, False])
    out = pool_token_spans(tokens, offsets, real, [(0, 8), (9, 12), (9, 20), (13, 13)])
    np.testing.assert_allclose(out[0], tokens[1:4].mean(axis=0))
    np.testing.assert_allclose(out[1], tokens[4])
    assert np.isnan(out[2]).all()  # ends past the last token: the text was cut before it
    assert np.isnan(out[3]).all()  # holds no token
    assert np.isnan(pool_token_spans(tokens, offsets, np.zeros(6, dtype=bool), [(0, 3)])).all()


@pytest.mark.slow
def test_the_passage_vectors_are_the_ones_embed_gives(embedder):
    vectors, pooled = embed_chunks_with_sentences(PASSAGES, embedder)
    np.testing.assert_allclose(vectors, embedder.embed(PASSAGES), atol=1e-5)
    for text, rows in zip(PASSAGES, pooled, strict=True):
        assert rows.shape == (len(own_sentences(text)), embedder.dim)
        np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_a_sentence_past_the_models_length_is_left_to_embed_on_its_own(embedder):
    long_text = "Filler words about nothing in particular go here. " * 60 + "The last sentence names Apollo 11."
    _, pooled = embed_chunks_with_sentences([long_text], embedder)
    rows = pooled[0]
    assert np.isfinite(rows[0]).all() and np.isnan(rows[-1]).all()


@pytest.mark.slow
def test_one_pass_sentence_vectors_rank_a_questions_sentences_as_separate_ones_do(embedder):
    _, pooled = embed_chunks_with_sentences(PASSAGES, embedder)
    separate = [embedder.embed(own_sentences(p)) for p in PASSAGES]
    q_vecs = embedder.embed([q for q, _, _ in QUESTIONS])
    right = {"one-pass": 0, "separate": 0}
    same_best = 0
    rhos = []
    for (_, passage, target), qv in zip(QUESTIONS, q_vecs, strict=True):
        s_one, s_sep = pooled[passage] @ qv, separate[passage] @ qv
        right["one-pass"] += int(np.argmax(s_one) == target)
        right["separate"] += int(np.argmax(s_sep) == target)
        same_best += int(np.argmax(s_one) == np.argmax(s_sep))
        rhos.append(spearmanr(s_one, s_sep).statistic)
        # the passage a question is about ranks first by its best sentence, either way
        best_one = [float((rows @ qv).max()) for rows in pooled]
        best_sep = [float((rows @ qv).max()) for rows in separate]
        assert int(np.argmax(best_one)) == int(np.argmax(best_sep)) == passage
    # the answering sentence is found at least about as often as with separately embedded
    # sentences (measured with the bundled MiniLM, fp32 and int8: one pass 10/12, separate 7/12,
    # the same best sentence 9/12, mean Spearman 0.77-0.80)
    assert right["one-pass"] >= right["separate"] - 1, right
    assert right["one-pass"] >= len(QUESTIONS) - 3, right
    assert same_best >= len(QUESTIONS) - 4
    assert float(np.mean(rhos)) >= 0.6, rhos


@pytest.mark.slow
def test_an_ingest_with_the_bundled_embedder_stores_one_pass_sentence_vectors(embedder, tmp_path):
    from tests.helpers import CORPUS

    from ragsieve.index import Index

    with Index.build(CORPUS, tmp_path / "idx", embedder=embedder) as index:
        info = index.manifest["sentence_vectors"]
        assert info["method"] == "one-pass" and info["separate_rows"] == 0
        sentences, vectors = index.sentence_vectors(range(len(index)))
        assert sentences and np.isfinite(vectors).all()
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        texts = [c.text for c in index.chunks]
        _, pooled = embed_chunks_with_sentences(texts, embedder)
        np.testing.assert_allclose(vectors, np.vstack([p for p in pooled if len(p)]), atol=1e-5)
