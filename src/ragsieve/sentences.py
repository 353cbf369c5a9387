"""The sentence splitter's old address, kept for the benchmark scripts that still import it.

The splitter lives in :mod:`ragsieve.text.sentences` (the one sentence splitter); import it from
there. This module defines nothing of its own.
"""

from __future__ import annotations

from ragsieve.text.sentences import (
    ListItems,
    find_list,
    first_sentence_end,
    normalize_lists,
    render_list,
    split_clauses,
    split_sentences,
)

__all__ = [
    "ListItems", "find_list", "first_sentence_end", "normalize_lists", "render_list", "split_clauses",
    "split_sentences",
]
