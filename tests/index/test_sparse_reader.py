"""The BM25 index bm25s saved, searched with numpy alone, gives bm25s's own results: the same
tokens for a query, the same ids in the same order, the same scores (masks and ties included)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from tests.helpers import CORPUS

from ragsieve.index.backends import BM25Scores, SparseBackend, bm25_tokenize, english_stemmer, import_bm25s

QUERIES = [
    "red planet storms",
    "What is the energy of the cell?",
    "light sugar photosynthesis",
    "the and of",  # only stop words
    "Jupiter's Great Red Spot, a storm larger than Earth",
    "mitochondria ATP ATP ATP",  # repeated terms count each time
    "ünïcödé naïve café résumé",
    "x y z 42 1969",
    "",
]


def corpus_texts() -> list[str]:
    texts = [p.read_text(encoding="utf-8") for p in sorted(CORPUS.rglob("*")) if p.is_file()]
    # paragraphs as documents, duplicates included (equal scores: ties must break as bm25s breaks them)
    return [para for t in texts for para in t.split("\n\n") if para.strip()] * 2


def test_query_tokens_are_bm25s_tokens():
    bm25s = import_bm25s()
    texts = [*QUERIES, *corpus_texts()[:40]]
    expected = bm25s.tokenize(texts, stopwords="en", stemmer=english_stemmer(), return_ids=False, show_progress=False)
    assert bm25_tokenize(texts) == [list(t) for t in expected]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bm25")
    texts = corpus_texts()
    SparseBackend.build(texts).save(folder)
    return folder, len(texts)


def test_search_matches_bm25s(saved):
    folder, size = saved
    ours = SparseBackend.load(folder, size)
    assert isinstance(ours.retriever, BM25Scores)
    theirs = SparseBackend(import_bm25s().BM25.load(str(folder / SparseBackend.FOLDER), mmap=True), size)
    rng = np.random.default_rng(0)
    masks = [None, rng.random(size) < 0.5, np.zeros(size, dtype=bool)]
    compared = 0
    for query in QUERIES:
        tokens = bm25_tokenize([query])[0]
        for k in (1, 3, 10, size):
            for mask in masks:
                got, want = ours.search(tokens, k, mask), theirs.search(tokens, k, mask)
                np.testing.assert_array_equal(got[0], want[0])
                np.testing.assert_array_equal(got[1], want[1])
                compared += len(want[0])
    assert compared > 100


def test_an_index_with_another_method_is_read_by_bm25s(tmp_path):
    bm25s = import_bm25s()
    texts = corpus_texts()[:20]
    retriever = bm25s.BM25(method="bm25+")
    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=english_stemmer(), show_progress=False)
    retriever.index(tokens, show_progress=False)
    retriever.save(str(tmp_path / SparseBackend.FOLDER))
    loaded = SparseBackend.load(tmp_path, len(texts))
    assert not isinstance(loaded.retriever, BM25Scores)
    assert loaded.search(bm25_tokenize(["planet"])[0], 3)[0].size


def test_searching_a_saved_index_imports_no_bm25s(saved):
    folder, size = saved
    code = (
        "import sys\nfrom pathlib import Path\n"
        "from ragsieve.index.backends import SparseBackend, bm25_tokenize\n"
        f"b = SparseBackend.load(Path({str(folder)!r}), {size})\n"
        "b.search(bm25_tokenize(['red planet storms'])[0], 5)\n"
        "print(sorted(m for m in ('bm25s', 'numba', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
