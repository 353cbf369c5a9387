"""MemoEmbedder: each text embedded once, stored vectors taken as given, bounded memory."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tests.helpers import HashEmbedder

from ragsieve.embed import MemoEmbedder


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return super().embed(texts)


def test_a_text_is_embedded_once_and_gets_the_same_vector():
    inner = CountingEmbedder()
    memo = MemoEmbedder(inner)
    first = memo.embed(["graphene is carbon", "silicon is a semiconductor"])
    again = memo.embed(["silicon is a semiconductor", "a new text", "graphene is carbon", "a new text"])
    assert inner.calls == [["graphene is carbon", "silicon is a semiconductor"], ["a new text"]]
    np.testing.assert_array_equal(again[0], first[1])
    np.testing.assert_array_equal(again[2], first[0])
    np.testing.assert_array_equal(again[1], again[3])
    np.testing.assert_array_equal(again, HashEmbedder().embed(
        ["silicon is a semiconductor", "a new text", "graphene is carbon", "a new text"]))
    assert memo.embed([]).shape == (0, inner.dim)


def test_remembered_vectors_are_returned_without_embedding_and_replace_computed_ones():
    inner = CountingEmbedder()
    memo = MemoEmbedder(inner)
    memo.embed(["stored text"])
    stored = np.full((1, inner.dim), 0.125, dtype=np.float32)
    memo.remember(["stored text"], stored)
    memo.remember(["only stored"], stored * 2)
    out = memo.embed(["stored text", "only stored"])
    assert inner.calls == [["stored text"]]
    np.testing.assert_array_equal(out, np.vstack([stored, stored * 2]))


def test_the_memo_forgets_the_least_recently_used_text_beyond_its_bound():
    inner = CountingEmbedder()
    memo = MemoEmbedder(inner, max_items=2)
    memo.embed(["a", "b"])
    memo.embed(["a"])  # "a" is now the most recent
    memo.embed(["c"])  # forgets "b"
    assert len(memo) == 2
    memo.embed(["a", "b"])
    assert inner.calls[-1] == ["b"]


def test_the_memo_describes_itself_as_its_embedder():
    inner = HashEmbedder(name="test/other", dim=16)
    memo = MemoEmbedder(inner)
    assert (memo.model_name, memo.dim, memo.to_dict()) == ("test/other", 16, inner.to_dict())


def test_an_empty_memo_is_still_an_embedder() -> None:
    memo = MemoEmbedder(HashEmbedder())
    assert len(memo) == 0 and bool(memo)


class BackgroundLoadingEmbedder(HashEmbedder):
    """Records whether its load was started on a worker thread or waited for."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []

    def start_warm_up(self) -> None:
        self.events.append("started")

    def warm_up(self) -> None:
        self.events.append("waited")


def test_a_memo_over_an_embedder_its_owner_loads_does_not_wait_in_warm_up():
    inner = BackgroundLoadingEmbedder()
    MemoEmbedder(inner, wait_in_warm_up=False).warm_up()
    assert inner.events == ["started"]
    MemoEmbedder(inner).warm_up()  # the default still waits
    assert inner.events == ["started", "waited"]
    plain = CountingEmbedder()  # no background load to start: warm_up loads it as before
    MemoEmbedder(plain, wait_in_warm_up=False).warm_up()
