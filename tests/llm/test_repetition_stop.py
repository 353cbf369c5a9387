from __future__ import annotations

from ragsieve.llm.llama_cpp import _repetition_stop


def _detok(vocab: list[str]):
    return lambda ids: " ".join(vocab[i] for i in ids).encode()


def test_stops_once_a_word_ngram_repeats_and_not_before():
    vocab = ["<p>", "graphene", "is", "a", "single", "layer", "of", "carbon", ",", "which"]
    stop = _repetition_stop(_detok(vocab), n_prompt=1, ngram=3)
    reply = [1, 2, 3, 4, 5, 6, 7]  # graphene is a single layer of carbon
    assert not stop([0, *reply], None)
    looping = [*reply, 9, 2, 3, 4]  # ... which is a single: "is a single" again
    assert not stop([0, *looping[:-1]], None)  # the last word may be unfinished: not yet
    assert stop([0, *looping, 5], None)
    assert not _repetition_stop(_detok(vocab), n_prompt=1, ngram=3)([0, 1, 2], None)
