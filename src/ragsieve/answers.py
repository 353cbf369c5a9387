"""Answer normalisation and answer-quality metrics every layer may use.

SQuAD-style normalisation (lower case, strip punctuation and the articles a/an/the,
collapse whitespace), exact match, normalised answer containment (the metric the
Chain-of-Evidence paper uses: a prediction is correct when it contains a gold answer)
and token-level F1.

Example:
    >>> from ragsieve.answers import contains_answer, token_f1
    >>> contains_answer("It was The Beatles.", ["the beatles"])
    True
    >>> round(token_f1("Paris France", ["Paris"]), 3)
    0.667
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

__all__ = ["contains_answer", "exact_match", "normalize_answer", "token_f1"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, drop punctuation and articles, collapse spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(golds: str | Sequence[str]) -> list[str]:
    return [golds] if isinstance(golds, str) else list(golds)


def exact_match(prediction: str, golds: str | Sequence[str]) -> bool:
    """True when the normalised prediction equals a normalised gold answer."""
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(g) for g in _golds(golds))


def contains_answer(prediction: str, golds: str | Sequence[str]) -> bool:
    """True when a normalised gold answer occurs in the normalised prediction as whole tokens.

    An empty gold (after normalisation) never counts as contained.
    """
    pred = f" {normalize_answer(prediction)} "
    for gold in _golds(golds):
        g = normalize_answer(gold)
        if g and f" {g} " in pred:
            return True
    return False


def token_f1(prediction: str, golds: str | Sequence[str]) -> float:
    """Best token-level F1 between the prediction and any gold answer (SQuAD definition)."""
    pred_toks = normalize_answer(prediction).split()
    best = 0.0
    for gold in _golds(golds):
        gold_toks = normalize_answer(gold).split()
        if not pred_toks or not gold_toks:
            best = max(best, float(pred_toks == gold_toks))
            continue
        common = Counter(pred_toks) & Counter(gold_toks)
        same = sum(common.values())
        if same == 0:
            continue
        precision = same / len(pred_toks)
        recall = same / len(gold_toks)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best
