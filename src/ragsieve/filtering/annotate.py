"""Perplexity labels for knowledge pieces and the D_kf dataset.

For a query q and a retrieved knowledge piece k, ŷ(q) is the model's label without
knowledge and ŷ(q, k) its label with k. The pair is *Harmful* when

    PPL(ŷ(q, k) | q, k) / PPL(ŷ(q) | q) > θ

and *Harmless* otherwise (variant ``"predicted"``, as in Qiang et al.). Variant ``"gold"``
scores the gold label instead: PPL(y* | q, k) / PPL(y* | q) > θ, i.e. the knowledge makes
the correct answer less likely.

Two perplexity sources:

- ``"label-dist"`` (default, free once label distributions are cached): a label is one
  answer symbol and PPL(y | prompt) = 1 / p(y | prompt), with p the model's label
  distribution (softmax of the label log-probabilities over the label set).
- ``"llm"``: PPL of the verbalizer's tokens over the full vocabulary,
  ``LLM.perplexity(prompt, verbalizer)``, with the scorer's own prompt
  (``LabelClassifier.build_prompt``) when it has one.

Example:
    >>> perplexity_ratio(p_with=[0.2, 0.8], p_without=[0.4, 0.6], y_with=1, y_without=1)
    0.75
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from ragsieve.errors import InputError
from ragsieve.io import atomic_write_jsonl, read_jsonl
from ragsieve.llm.base import LLM

from .tasks import TaskTemplate

logger = logging.getLogger(__name__)

LabelVariant = Literal["predicted", "gold"]
PPLSource = Literal["label-dist", "llm"]

_EPS = 1e-12


class LabelScorer(Protocol):
    """What the filtering stage needs from label scoring (``ragsieve.generate.LabelClassifier``)."""

    def predict_proba(self, llm: LLM, text: str, knowledge: list[str] | None = None) -> dict[str, float]: ...


def label_distributions(
    scorer: LabelScorer, llm: LLM, text: str, knowledge_each: Sequence[str], labels: Sequence[str]
) -> np.ndarray:
    """p(y | text, k_i) for each knowledge piece, shape (n, n_labels), rows in ``labels`` order.

    Uses the scorer's ``predict_proba_many`` (one shared prefix, reused model state) when it
    has one, else one ``predict_proba`` call per piece.
    """
    if not knowledge_each:
        return np.zeros((0, len(labels)))
    many = getattr(scorer, "predict_proba_many", None)
    if many is not None:
        dists = many(llm, text, [[k] for k in knowledge_each])
    else:
        dists = [scorer.predict_proba(llm, text, [k]) for k in knowledge_each]
    return np.array([[d[label] for label in labels] for d in dists], dtype=float)


def perplexity_ratio(p_with: Sequence[float], p_without: Sequence[float], y_with: int, y_without: int) -> float:
    """PPL(y_with | q, k) / PPL(y_without | q) with PPL = 1/p (label-dist source)."""
    return float(max(p_without[y_without], _EPS) / max(p_with[y_with], _EPS))


def is_harmful(ratio: float, theta: float = 1.0) -> bool:
    return ratio > theta


@dataclass
class KfPair:
    """One (query, knowledge) pair of D_kf with everything needed to relabel it."""

    task: str
    query: str
    knowledge: str
    harmful: bool
    ratio: float
    variant: str
    gold: str | None = None
    rank: int = 0
    similarity: float = 0.0
    score: float = 0.0
    retriever: str = "dense"
    p_without: list[float] = field(default_factory=list)
    p_with: list[float] = field(default_factory=list)
    ppl_without: float = float("nan")
    ppl_with: float = float("nan")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KfPair:
        return cls(**data)


class PerplexityAnnotator:
    """Label (query, knowledge) pairs Harmful/Harmless by the perplexity ratio.

    Example:
        >>> from ragsieve.filtering.tasks import get_task
        >>> ann = PerplexityAnnotator("sst-2", theta=1.0, variant="predicted")
        >>> pair = ann.label_from_distributions(
        ...     get_task("sst-2"), "a dull film .", "Cats purr.", [0.7, 0.3], [0.5, 0.5])
        >>> pair.harmful
        True
    """

    def __init__(
        self,
        task: str = "sst-2",
        theta: float = 1.0,
        variant: LabelVariant = "predicted",
        ppl_source: PPLSource = "label-dist",
    ) -> None:
        self.task = task
        self.theta = theta
        self.variant = variant
        self.ppl_source = ppl_source

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "theta": self.theta,
            "variant": self.variant,
            "ppl_source": self.ppl_source,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PerplexityAnnotator:
        return cls(**data)

    def _targets(
        self, task: TaskTemplate, p_without: Sequence[float], p_with: Sequence[float], gold: str | None
    ) -> tuple[int, int]:
        if self.variant == "gold":
            if gold is None:
                raise InputError("variant='gold' needs the gold label of every query; use variant='predicted'")
            if gold not in task.labels:
                raise InputError(f"gold label {gold!r} is not one of the task labels {task.labels}")
            g = task.labels.index(gold)
            return g, g
        return int(np.argmax(p_with)), int(np.argmax(p_without))

    def label_from_distributions(
        self,
        task: TaskTemplate,
        query: str,
        knowledge: str,
        p_without: Sequence[float],
        p_with: Sequence[float],
        gold: str | None = None,
        *,
        rank: int = 0,
        similarity: float = 0.0,
        score: float = 0.0,
        retriever: str = "dense",
        llm: LLM | None = None,
        scorer: LabelScorer | None = None,
    ) -> KfPair:
        """Build one D_kf pair from the label distributions without and with ``knowledge``."""
        if len(p_without) != len(task.labels) or len(p_with) != len(task.labels):
            raise InputError(f"label distributions must have {len(task.labels)} entries (one per label)")
        y_with, y_without = self._targets(task, p_without, p_with, gold)
        if self.ppl_source == "llm":
            if llm is None:
                raise InputError("ppl_source='llm' needs an LLM; pass llm=... or use ppl_source='label-dist'")
            build = getattr(scorer, "build_prompt", None)
            words_fn = getattr(scorer, "verbalizer_words", None)
            words = words_fn() if words_fn is not None else task.verbalizers
            with_prompt = build(query, [knowledge]) if build else task.classify_prompt(query, [knowledge])
            without_prompt = build(query, None) if build else task.classify_prompt(query)
            ppl_with = llm.perplexity(with_prompt, words[task.labels[y_with]])
            ppl_without = llm.perplexity(without_prompt, words[task.labels[y_without]])
        else:
            ppl_with = 1.0 / max(float(p_with[y_with]), _EPS)
            ppl_without = 1.0 / max(float(p_without[y_without]), _EPS)
        ratio = ppl_with / max(ppl_without, _EPS)
        return KfPair(
            task=task.name,
            query=query,
            knowledge=knowledge,
            harmful=is_harmful(ratio, self.theta),
            ratio=float(ratio),
            variant=self.variant,
            gold=gold,
            rank=rank,
            similarity=float(similarity),
            score=float(score),
            retriever=retriever,
            p_without=[float(x) for x in p_without],
            p_with=[float(x) for x in p_with],
            ppl_without=float(ppl_without),
            ppl_with=float(ppl_with),
        )

    def annotate(
        self,
        llm: LLM,
        scorer: LabelScorer,
        task: TaskTemplate,
        query: str,
        knowledge: Sequence[str],
        gold: str | None = None,
        *,
        similarities: Sequence[float] | None = None,
        scores: Sequence[float] | None = None,
        retriever: str = "dense",
    ) -> list[KfPair]:
        """Score ``query`` without and with each knowledge piece and label every pair."""
        p0 = scorer.predict_proba(llm, query, None)
        p_without = [p0[label] for label in task.labels]
        dists = label_distributions(scorer, llm, query, list(knowledge), task.labels)
        return [
            self.label_from_distributions(
                task,
                query,
                k,
                p_without,
                dists[i],
                gold,
                rank=i + 1,
                similarity=similarities[i] if similarities is not None else 0.0,
                score=scores[i] if scores is not None else 0.0,
                retriever=retriever,
                llm=llm,
                scorer=scorer,
            )
            for i, k in enumerate(knowledge)
        ]


def relabel(
    pairs: Iterable[KfPair], variant: LabelVariant, theta: float = 1.0, labels: Sequence[str] = ()
) -> list[KfPair]:
    """Recompute the Harmful labels of label-dist pairs for another variant or threshold."""
    out = []
    for p in pairs:
        if variant == "gold":
            if p.gold is None or not labels:
                raise InputError("relabelling to 'gold' needs gold labels on the pairs and the task's label list")
            yw = yo = list(labels).index(p.gold)
        else:
            yw, yo = int(np.argmax(p.p_with)), int(np.argmax(p.p_without))
        ratio = perplexity_ratio(p.p_with, p.p_without, yw, yo)
        q = KfPair(**{**p.to_dict(), "ratio": ratio, "harmful": is_harmful(ratio, theta), "variant": variant})
        q.ppl_with = 1.0 / max(p.p_with[yw], _EPS)
        q.ppl_without = 1.0 / max(p.p_without[yo], _EPS)
        out.append(q)
    return out


class KfDataset:
    """D_kf: a list of :class:`KfPair` with metadata, saved as JSONL (atomic write).

    The first line holds ``{"_meta": {...}}`` (annotator settings, model, seed); every other
    line is one pair.

    Example:
        >>> ds = KfDataset([], meta={"theta": 1.0})
        >>> len(ds)
        0
    """

    def __init__(self, pairs: list[KfPair], meta: dict[str, Any] | None = None) -> None:
        self.pairs = pairs
        self.meta = dict(meta or {})

    def __len__(self) -> int:
        return len(self.pairs)

    def __iter__(self) -> Iterator[KfPair]:
        return iter(self.pairs)

    @property
    def harmful(self) -> np.ndarray:
        return np.array([p.harmful for p in self.pairs], dtype=bool)

    def save(self, path: str | Path) -> Path:
        rows: list[dict[str, Any]] = [{"_meta": self.meta}] + [p.to_dict() for p in self.pairs]
        atomic_write_jsonl(path, rows)
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> KfDataset:
        p = Path(path)
        if not p.is_file():
            raise InputError(f"D_kf file {p} does not exist; build it with `ragsieve filters annotate`")
        meta: dict[str, Any] = {}
        pairs: list[KfPair] = []
        for row in read_jsonl(p):
            if "_meta" in row:
                meta = row["_meta"]
                continue
            try:
                pairs.append(KfPair.from_dict(row))
            except TypeError as exc:
                raise InputError(f"{p} has a row that is not a D_kf pair ({exc}); rebuild the file") from exc
        return cls(pairs, meta)
