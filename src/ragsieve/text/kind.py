"""The kind of answer a question asks for, learned from questions whose gold answers show it.

One set of labels for every check (:data:`ANSWER_KINDS`):

* ``date`` – a year, a date, a decade or century;
* ``number`` – a bare number or count;
* ``quantity`` – a number with a unit (a length, a temperature, a share in percent);
* ``name`` – a proper name: a person, place, organisation or work (the gold answers the
  classifier is trained on do not tell these apart, so neither does the label);
* ``yes/no`` – a polar question;
* ``description`` – anything else: a phrase, a reason, a process, a common noun ("What is
  graphene made of?" asks for a description, not a name).

:class:`AnswerKindClassifier` is a scikit-learn style estimator (TF-IDF of the question's word
uni- and bigrams, with its first words marked, and two multinomial logistic regressions), fitted
with scikit-learn by ``benchmarks/answer_kind.py`` and stored as arrays
(:mod:`ragsieve.array_models`; ``ragsieve/resources/answer_kind.npz``), so predicting needs
numpy alone. :func:`kind_of_answer` is how a gold answer becomes a training label (its typed
value, read by :mod:`ragsieve.values`). The training data, split and held-out accuracy are in
``docs/results/answer-kind.md``.

Example:
    >>> expected_kind("In what year did the Kessel Bridge open?")
    'date'
    >>> expected_kind("What is graphene made of?")
    'description'
    >>> kind_of_answer("14 September 2015"), kind_of_answer("Walther Meissner"), kind_of_answer("yes")
    ('date', 'name', 'yes/no')
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

from ragsieve.array_models import LinearHead, TfidfArrays, load_arrays, save_arrays
from ragsieve.errors import ModelError
from ragsieve.values import extract_values, fold

__all__ = [
    "ANSWER_KINDS",
    "NUMERIC_KINDS",
    "VALUE_KINDS_FOR",
    "AnswerKind",
    "AnswerKindClassifier",
    "bundled_classifier",
    "expected_kind",
    "kind_of_answer",
    "question_features",
]

AnswerKind = Literal["date", "number", "quantity", "name", "yes/no", "description"]
ANSWER_KINDS: tuple[str, ...] = get_args(AnswerKind)

# The typed values (:mod:`ragsieve.values`) that answer each kind: a count may come with a unit
# ("3 moons"), a quantity without one ("how long": 1,230). Yes/no and description questions are
# not answered by one typed value.
VALUE_KINDS_FOR: dict[str, tuple[str, ...]] = {
    "date": ("date",),
    "number": ("number", "quantity"),
    "quantity": ("quantity", "number"),
    "name": ("name",),
    "yes/no": (),
    "description": (),
}

BUNDLED_RESOURCE = "answer_kind.npz"
RETRAIN = "retrain it with `python benchmarks/answer_kind.py --train`"

# A typed value is the answer when it covers most of the answer's characters ("in 1931" is a
# date, "the bridge opened in 1931 after a long delay" is a description).
_COVER = 0.6
# ordinal centuries and millennia read as quantities by the value extractor
_CALENDAR_UNITS = frozenset({"century", "millennium"})


def kind_of_answer(answer: str) -> AnswerKind:
    """The kind of a gold answer: ``yes/no``, the kind of a typed value covering most of it
    (:mod:`ragsieve.values`), a short run of capitalised words (a ``name``), else ``description``."""
    text = answer.strip().strip(".").strip()
    if fold(text) in ("yes", "no"):
        return "yes/no"
    if not text:
        return "description"
    covering = [v for v in extract_values(text) if v.span[1] - v.span[0] >= _COVER * len(text)]
    if covering:
        value = max(covering, key=lambda v: v.span[1] - v.span[0])
        if value.kind == "quantity" and value.unit in _CALENDAR_UNITS and fold(text)[:1].isdigit():
            return "date"  # "the 9th century", "11th centuries": a time in history, not a duration
        return "name" if value.kind == "identifier" else value.kind
    tokens = text.split()
    capitalised = [t for t in tokens if t[:1].isupper() or t[:1].isdigit()]
    if len(tokens) <= 6 and len(capitalised) * 2 > len(tokens):
        return "name"
    return "description"


def question_features(question: str) -> str:
    """The text the classifier reads: the question, lower-cased, with its first two words marked
    (``qa_what``, ``qb_year``): the question word and the word after it carry most of the kind,
    wherever else the same words occur."""
    toks = [t for t in "".join(c if c.isalnum() else " " for c in fold(question)).split()]
    marks = [f"qa_{toks[0]}" if toks else "qa_none"]
    if len(toks) > 1:
        marks.append(f"qb_{toks[0]}_{toks[1]}")
    return " ".join([*toks, *marks])


NUMERIC_KINDS: tuple[str, ...] = ("date", "number", "quantity")
# the first head's label for the three numeric kinds, which the second head tells apart
NUMERIC = "numeric"


def coarse_kind(kind: str) -> str:
    """The first head's label of a kind: the numeric kinds are one (``numeric``)."""
    return NUMERIC if kind in NUMERIC_KINDS else kind


class AnswerKindClassifier:
    """Question -> answer kind (:data:`ANSWER_KINDS`): TF-IDF + two logistic regressions.

    The first head tells ``name``, ``description``, ``yes/no`` and ``numeric`` apart; the second,
    for a numeric question, ``date``, ``number`` and ``quantity``. Two heads because the training
    questions that show a numeric answer without saying which kind (TREC's coarse ``numeric``
    class) outnumber by far those whose gold answer shows the kind. ``fit`` takes the kind of
    each question, where ``numeric`` is allowed (such rows train the first head only).

    ``C``: inverse regularisation strength; ``min_df``: a term must occur in this many training
    questions; ``balanced``: weigh classes inversely to their frequency. Fitted with
    scikit-learn, predicted with numpy over the exported arrays (``features_``, ``head_``,
    ``numeric_head_``).

    Example:
        >>> clf = AnswerKindClassifier().fit(questions, kinds)  # doctest: +SKIP
        >>> clf.predict(["How many moons has Mars?"])  # doctest: +SKIP
        ['number']
    """

    def __init__(self, C: float = 4.0, min_df: int = 2, balanced: bool = False) -> None:  # noqa: N803
        self.C = C
        self.min_df = min_df
        self.balanced = balanced

    def fit(self, questions: Sequence[str], kinds: Sequence[str]) -> AnswerKindClassifier:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        unknown = sorted(set(kinds) - set(ANSWER_KINDS) - {NUMERIC})
        if unknown:
            raise ValueError(f"unknown answer kinds {unknown}; use {', '.join(ANSWER_KINDS)} or {NUMERIC}")
        vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=self.min_df, sublinear_tf=True)
        x = vectorizer.fit_transform([question_features(q) for q in questions])
        weights = "balanced" if self.balanced else None
        coarse = LogisticRegression(C=self.C, max_iter=2000, class_weight=weights)
        coarse.fit(x, [coarse_kind(k) for k in kinds])
        rows = [i for i, k in enumerate(kinds) if k in NUMERIC_KINDS]
        if len({kinds[i] for i in rows}) < 2:
            raise ValueError("the training questions need gold answers of at least two numeric kinds")
        fine = LogisticRegression(C=self.C, max_iter=2000, class_weight=weights)
        fine.fit(x[rows], [kinds[i] for i in rows])
        self.features_ = TfidfArrays.from_sklearn(vectorizer)
        self.head_ = LinearHead.from_sklearn(coarse)
        self.numeric_head_ = LinearHead.from_sklearn(fine)
        return self

    @property
    def classes_(self) -> list[str]:
        return [c for c in self.head_.classes if c != NUMERIC] + list(self.numeric_head_.classes)

    def predict(self, questions: Sequence[str]) -> list[str]:
        rows = self.features_.transform([question_features(q) for q in questions])
        coarse = self.head_.predict_proba(rows).argmax(axis=1)
        fine = self.numeric_head_.predict_proba(rows).argmax(axis=1)
        out = []
        for c, f in zip(coarse, fine, strict=True):
            label = self.head_.classes[int(c)]
            out.append(self.numeric_head_.classes[int(f)] if label == NUMERIC else label)
        return out

    def save(self, path: str | Path, info: dict[str, Any] | None = None) -> Path:
        """Write the arrays (``path``) and the JSON header (``path`` + ``.json``); ``info`` (the
        training data and split) goes into the header."""
        header = {
            "model": "answer-kind",
            "params": {"C": self.C, "min_df": self.min_df, "balanced": self.balanced},
            "features": self.features_.header(),
            "head": self.head_.header(),
            "numeric_head": self.numeric_head_.header(),
            "info": info or {},
        }
        arrays = {**self.features_.arrays("f_"), **self.head_.arrays("h_"), **self.numeric_head_.arrays("n_")}
        return save_arrays(path, header, arrays)

    @classmethod
    def load(cls, path: str | Path) -> AnswerKindClassifier:
        header, arrays = load_arrays(path, RETRAIN)
        if header.get("model") != "answer-kind":
            raise ModelError(f"{path} is not an answer-kind model; {RETRAIN}")
        params = header.get("params", {})
        clf = cls(
            C=float(params.get("C", 4.0)), min_df=int(params.get("min_df", 2)), balanced=bool(params.get("balanced"))
        )
        try:
            clf.features_ = TfidfArrays.from_parts(header["features"], arrays, "f_")
            clf.head_ = LinearHead.from_parts(header["head"], arrays, "h_")
            clf.numeric_head_ = LinearHead.from_parts(header["numeric_head"], arrays, "n_")
        except KeyError as exc:
            raise ModelError(f"{path} lacks {exc}; {RETRAIN}") from exc
        if set(clf.classes_) - set(ANSWER_KINDS):
            raise ModelError(f"{path} predicts labels outside {ANSWER_KINDS}; {RETRAIN}")
        return clf


def bundled_path() -> Path:
    """Where the bundled classifier's arrays live (``ragsieve/resources/answer_kind.npz``)."""
    return Path(str(resources.files("ragsieve") / "resources" / BUNDLED_RESOURCE))


@functools.lru_cache(maxsize=1)
def bundled_classifier() -> AnswerKindClassifier:
    """The classifier shipped with ragsieve (loaded once per process)."""
    return AnswerKindClassifier.load(bundled_path())


@functools.lru_cache(maxsize=4096)
def expected_kind(question: str) -> AnswerKind:
    """The kind of answer ``question`` asks for, by the bundled classifier."""
    return bundled_classifier().predict([question])[0]  # type: ignore[return-value]
