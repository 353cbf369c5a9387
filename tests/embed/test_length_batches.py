"""Batches of similar length: every row once, shortest first, bounded size and spread."""

from __future__ import annotations

import numpy as np

from ragsieve.embed.onnx import MIN_BATCH_CHARS, length_batches


def test_rows_are_batched_once_by_length_within_size_and_spread():
    rng = np.random.default_rng(0)
    lengths = [int(x) for x in rng.integers(1, 2000, size=300)]
    batches = length_batches(lengths, batch_size=16, spread=1.5)
    rows = np.concatenate(batches)
    assert sorted(rows.tolist()) == list(range(300))
    assert [lengths[i] for i in rows] == sorted(lengths)
    for batch in batches:
        assert 1 <= len(batch) <= 16
        longest, shortest = (max(lengths[i], MIN_BATCH_CHARS) for i in (batch[-1], batch[0]))
        assert longest <= 1.5 * shortest


def test_short_sentences_and_long_passages_never_share_a_batch():
    lengths = [60, 1200, 80, 1100, 95, 1300]
    batches = [set(b.tolist()) for b in length_batches(lengths, batch_size=64)]
    assert all(not ({0, 2, 4} & b and {1, 3, 5} & b) for b in batches)
    assert set().union(*batches) == set(range(6))


def test_equal_lengths_fill_batches_up_to_the_size():
    assert [len(b) for b in length_batches([100] * 10, batch_size=4)] == [4, 4, 2]
