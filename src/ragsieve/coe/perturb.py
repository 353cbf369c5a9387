"""Perturbation toolkit for studying which external knowledge an LLM prefers.

* :func:`sentence_perturbation` (SenP): drop keyword-bearing sentences that do not contain
  the answer until the knowledge no longer holds a chain of evidence.
* :func:`word_perturbation` (WordP): replace every mention of a keyword by a more general
  term (from the LLM via :func:`generalize_keyword`, or given); afterwards no mention of
  the keyword remains.
* :func:`inject_irrelevant`: add irrelevant sentences until they make up a given share of
  the characters (0, 0.25, 0.5, 0.75 in the paper).
* :func:`replace_answer` / :func:`same_type_wrong_answer` / :func:`generate_misinformation`:
  misinformation by entity replacement with a same-type wrong answer, or written by the LLM.
* :func:`accuracy` and :func:`following_rate`: the study's metrics.

Example:
    >>> from ragsieve.coe.perturb import replace_mentions, inject_irrelevant
    >>> text = "Scott Derrickson is American. Derrickson directs."
    >>> replace_mentions(text, "Scott Derrickson", "the director")
    'the director is American. the director directs.'
    >>> out = inject_irrelevant(["a" * 30], ["b" * 10] * 10, 0.5, seed=0)
    >>> sum(len(s) for s in out if s.startswith("b")) / sum(len(s) for s in out)
    0.5
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

from ragsieve.answers import contains_answer, normalize_answer
from ragsieve.errors import InputError, LLMOutputError
from ragsieve.llm.base import LLM, ChatMessage
from ragsieve.values import extract_values, phrase_pattern

__all__ = [
    "SenPResult",
    "accuracy",
    "answer_type",
    "following_rate",
    "generalize_keyword",
    "generate_misinformation",
    "inject_irrelevant",
    "irrelevant_fraction",
    "mentions",
    "replace_answer",
    "replace_mentions",
    "same_type_wrong_answer",
    "sentence_perturbation",
    "word_perturbation",
]

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------- SenP
class SenPResult(NamedTuple):
    """Kept sentence indices, removed ones, and whether the chain of evidence was broken."""

    kept: list[int]
    removed: list[int]
    broken: bool


def sentence_perturbation(
    sentences: Sequence[str],
    covered: np.ndarray,
    kinds: Sequence[str],
    answers: Sequence[str],
) -> SenPResult:
    """Remove keyword-bearing sentences without the answer, one at a time (the sentence
    bearing the most keywords first), until the union of the rest misses a feature.

    ``covered`` is the (sentences x features) coverage matrix from a
    :class:`~ragsieve.coe.judges.CoEDiscriminator`. Sentences containing an answer are
    never removed; when the chain cannot be broken that way, ``broken`` is False.
    """
    cov = np.asarray(covered, dtype=bool)
    if cov.shape != (len(sentences), len(kinds)):
        raise InputError(f"coverage matrix shape {cov.shape} does not match {len(sentences)} sentences "
                         f"x {len(kinds)} features")
    kw = np.array([k == "keyword" for k in kinds], dtype=bool)
    kept = list(range(len(sentences)))

    def full(rows: list[int]) -> bool:
        return bool(rows) and bool(cov[rows].any(axis=0).all())

    if not full(kept):
        return SenPResult(kept, [], True)
    removable = [i for i in kept if cov[i, kw].any() and not contains_answer(sentences[i], answers)]
    removable.sort(key=lambda i: (-int(cov[i, kw].sum()), i))
    removed: list[int] = []
    for i in removable:
        kept.remove(i)
        removed.append(i)
        if not full(kept):
            return SenPResult(kept, removed, True)
    return SenPResult(kept, removed, False)


# ---------------------------------------------------------------- WordP
def _mention_pattern(keyword: str, partial: bool) -> re.Pattern[str]:
    words = keyword.split()
    phrases = [keyword]
    if partial and len(words) > 1:
        # single name parts of a multi-word keyword ("Derrickson" for "Scott Derrickson")
        phrases += [w for w in words if len(w) >= 4 and w[0].isupper()]
    return phrase_pattern(*phrases, ignore_case=True, possessive=True)


def mentions(text: str, keyword: str, partial: bool = True) -> int:
    """Number of mentions of ``keyword`` (and, with ``partial``, of its capitalised name parts)."""
    if not keyword.strip():
        return 0
    return len(_mention_pattern(keyword.strip(), partial).findall(text))


def replace_mentions(text: str, keyword: str, replacement: str, partial: bool = True) -> str:
    """Replace every mention of ``keyword`` by ``replacement`` (case-insensitive, whole words)."""
    keyword = keyword.strip()
    if not keyword:
        raise InputError("cannot replace an empty keyword")
    if mentions(replacement, keyword, partial):
        raise InputError(f"replacement {replacement!r} itself mentions {keyword!r}; pick a more general term")
    return _mention_pattern(keyword, partial).sub(replacement, text)


_GENERAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"general_term": {"type": "string"}},
    "required": ["general_term"],
}
_GENERAL_EXAMPLES = [
    ("Albert Einstein", "the physicist"),
    ("Paris", "the city"),
    ("The Beatles", "the band"),
    ("1969", "that year"),
    ("Lake Baikal", "the lake"),
]


def generalize_keyword(keyword: str, llm: LLM, context: str = "", retries: int = 1) -> str:
    """A more general term for ``keyword`` from the LLM (JSON-constrained); the term must not
    mention the keyword. Falls back (logged) to "this entity"."""
    msgs: list[ChatMessage] = [ChatMessage(
        role="system",
        content="Replace a specific name or term by a more general description of what it is, "
        "without repeating the name. Return JSON {\"general_term\": ...}.",
    )]
    for k, g in _GENERAL_EXAMPLES:
        msgs.append(ChatMessage(role="user", content=f"Term: {k}"))
        msgs.append(ChatMessage(role="assistant", content=f'{{"general_term": "{g}"}}'))
    ctx = f"\nContext: {context[:300]}" if context else ""
    msgs.append(ChatMessage(role="user", content=f"Term: {keyword}{ctx}"))
    for _ in range(retries + 1):
        try:
            out = llm.generate_json(msgs, _GENERAL_SCHEMA, max_tokens=24)
        except LLMOutputError as exc:
            logger.info("generalisation of %r failed: %s", keyword, exc)
            continue
        term = " ".join(str(out.get("general_term", "")).split()).strip(" .\"'")
        if term and not mentions(term, keyword) and len(term) <= 60:
            return term
    logger.warning("no usable generalisation for %r; using 'this entity'", keyword)
    return "this entity"


def word_perturbation(
    sentences: Sequence[str],
    keywords: Sequence[str],
    answers: Sequence[str],
    llm: LLM | None = None,
    replacements: dict[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """Replace every mention of each keyword that does not overlap an answer by a general
    term (``replacements`` given, else from ``llm``). Returns the new sentences and the
    replacements used. Keywords overlapping an answer are left alone."""
    replacements = dict(replacements or {})
    out = list(sentences)
    used: dict[str, str] = {}
    gold = [normalize_answer(a) for a in answers]
    for kw in keywords:
        nk = normalize_answer(kw)
        if not nk or any(nk in g or (g and g in nk) for g in gold):
            continue
        if not any(mentions(s, kw) for s in out):
            continue
        term = replacements.get(kw)
        if term is None:
            if llm is None:
                raise InputError(f"no replacement for keyword {kw!r}: pass replacements= or llm=")
            term = generalize_keyword(kw, llm, context=" ".join(out))
        if mentions(term, kw):
            term = "this entity"
        out = [replace_mentions(s, kw, term) for s in out]
        used[kw] = term
    return out, used


# ---------------------------------------------------------------- irrelevant text
def irrelevant_fraction(knowledge: Sequence[str], irrelevant: Sequence[str]) -> float:
    total = sum(len(s) for s in knowledge) + sum(len(s) for s in irrelevant)
    return sum(len(s) for s in irrelevant) / total if total else 0.0


def inject_irrelevant(
    knowledge: Sequence[str],
    pool: Sequence[str],
    proportion: float,
    seed: int = 0,
    position: Literal["random", "end", "start"] = "random",
) -> list[str]:
    """Add sentences from ``pool`` until they make up at least ``proportion`` of all
    characters (the last one is cut at a word boundary so the share is met closely).
    Relevant sentences keep their order."""
    if not 0.0 <= proportion < 1.0:
        raise InputError(f"irrelevant proportion must be in [0, 1), got {proportion}")
    out = [s for s in knowledge]
    if proportion == 0.0:
        return out
    rel = sum(len(s) for s in knowledge)
    need = int(round(proportion * rel / (1.0 - proportion)))
    rng = random.Random(seed)
    cands = [p for p in pool if p.strip()]
    if not cands:
        raise InputError("the irrelevant pool is empty; pass sentences that do not relate to the question")
    rng.shuffle(cands)
    added: list[str] = []
    got = 0
    k = 0
    while got < need:
        s = cands[k % len(cands)]
        k += 1
        if got + len(s) > need:
            s = s[: need - got]
        added.append(s)
        got += len(s)
    for s in added:
        idx = {"end": len(out), "start": 0}.get(position, rng.randint(0, len(out)))
        out.insert(idx, s)
    return out


# ---------------------------------------------------------------- misinformation


def answer_type(answer: str) -> str:
    """Coarse answer type: yesno, year, date, number, entity (capitalised) or other.

    Years, dates and numbers are what :func:`ragsieve.values.extract_values` (the one value
    reader) reads at the answer's start: a year alone is a year, a date with its month and year
    or day a date, a number, quantity or decade ("3,677 seated", "12 km", "1990s") a number."""
    a = answer.strip()
    if a.lower() in {"yes", "no"}:
        return "yesno"
    values = extract_values(a)
    first = values[0] if values and values[0].span[0] == 0 else None
    if first is not None and first.kind == "date" and first.number is not None:
        if any(month for _, month, _ in first.dates):
            return "date"
        return "year" if first.text == a and not first.tolerance else "number"
    if first is not None and first.kind in ("number", "quantity"):
        return "number"
    if a[:1].isupper():
        return "entity"
    return "other"


def same_type_wrong_answer(answer: str, pool: Sequence[str], seed: int = 0) -> str:
    """A wrong answer of the same coarse type drawn from ``pool`` (other questions' answers);
    yes/no flip. Raises when the pool has none of that type."""
    t = answer_type(answer)
    if t == "yesno":
        return "no" if answer.strip().lower() == "yes" else "yes"
    na = normalize_answer(answer)
    cands = sorted({p for p in pool if answer_type(p) == t and normalize_answer(p) != na
                    and na not in normalize_answer(p) and normalize_answer(p) not in na})
    if not cands:
        raise InputError(f"no wrong answer of type {t!r} in the pool for {answer!r}; give a larger pool")
    return random.Random(f"{seed}:{answer}").choice(cands)


def replace_answer(sentences: Sequence[str], answer: str, wrong: str) -> list[str]:
    """Entity replacement: every mention of ``answer`` becomes ``wrong``."""
    pat = phrase_pattern(answer.strip(), ignore_case=True)
    return [pat.sub(wrong, s) for s in sentences]


def generate_misinformation(question: str, wrong: str, llm: LLM, max_tokens: int = 60) -> str:
    """A short passage by the LLM that answers ``question`` with ``wrong``. The wrong answer
    must appear in it; otherwise a one-sentence statement is used (logged)."""
    prompt = (
        "Write one short encyclopedic sentence that answers the question with the given answer.\n"
        f"Question: {question}\nAnswer: {wrong}\nSentence:"
    )
    try:
        text = llm.generate(prompt, max_tokens=max_tokens, temperature=0.0, stop=["\n"]).text.strip()
    except LLMOutputError as exc:
        logger.info("misinformation generation failed: %s", exc)
        text = ""
    if text and contains_answer(text, [wrong]):
        return text
    logger.info("generated passage lacks the wrong answer %r; using a plain statement", wrong)
    return f"{question.rstrip('?')}? The answer is {wrong}."


# ---------------------------------------------------------------- metrics
def accuracy(predictions: Sequence[str], answers: Sequence[Sequence[str]]) -> float:
    """Share of predictions containing a gold answer (normalised containment)."""
    if len(predictions) != len(answers):
        raise InputError(f"{len(predictions)} predictions but {len(answers)} answer lists")
    if not predictions:
        return 0.0
    return sum(contains_answer(p, a) for p, a in zip(predictions, answers, strict=True)) / len(predictions)


def following_rate(
    predictions: Sequence[str], wrong_answers: Sequence[str], answers: Sequence[Sequence[str]]
) -> float:
    """Share of predictions that follow the misinformation: they contain the injected wrong
    answer and no gold answer."""
    if not (len(predictions) == len(wrong_answers) == len(answers)):
        raise InputError("predictions, wrong answers and gold answers must have the same length")
    if not predictions:
        return 0.0
    hits = sum(
        contains_answer(p, [w]) and not contains_answer(p, a)
        for p, w, a in zip(predictions, wrong_answers, answers, strict=True)
    )
    return hits / len(predictions)
