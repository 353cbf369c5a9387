"""Fair confidence baselines for plain RAG and no retrieval: what any RAG user can compute without the sieve.

Plain RAG's ``Answer.confidence`` is ``None``, so ranked by it its selective accuracy at every
coverage is its overall accuracy; comparing the sieve with that pits a ranked system against an
unranked one. These baselines give plain RAG (and no retrieval) a confidence from:

- ``retrieval``: the top hit's retrieval score, normalised to [0, 1]
  (:func:`normalised_top_score`). Reciprocal rank fusion scores ``sum_i 1/(k + rank_i)`` are
  divided by their maximum ``n_retrievers/(k + 1)`` (every retriever ranks the hit first), so 1
  means "first everywhere" and the value is comparable across questions. A dense hit's cosine
  similarity (unit-normalised embeddings) is clipped to [0, 1] (negative cosines mean unrelated
  for sentence embeddings, and rank below every related hit anyway). A BM25 score is unbounded
  and query-length dependent; it is squashed as ``s / (1 + s)`` (monotone: ranking unchanged).
  Weighted fusion sums min-max normalised scores times weights that sum to 1, so it is in
  [0, 1] already.
- ``logprob``: the answer's mean token log-probability under the model given the prompt it was
  generated from (:func:`answer_logprob`, one scoring pass through ``LLM.continuation_logprobs``);
  as a confidence, ``exp(mean log-prob)`` (the geometric-mean token probability, in (0, 1]).
- ``combined``: both, through a :class:`ragsieve.eval.confidence.ConfidenceCombiner` (logistic
  regression) fitted on the calibration split only.

:class:`BaselineScorer` recomputes both signals for cached ``eval`` records (re-retrieving the
question, which costs no LLM call, and scoring the recorded answer text); :func:`baseline_rows`
turns them into record lists whose ``confidence`` is each baseline, ready for
:func:`ragsieve.eval.scoring.score_records`, and :func:`best_baseline` picks the best by AURC on
the calibration split (never on the held-out questions the comparison is reported on).

Example:
    >>> from ragsieve.eval.baselines import normalised_top_score
    >>> from ragsieve.types import Chunk, SearchHit
    >>> hit = SearchHit(Chunk("c", "t", "d", "s"), 2 / 61, 1, {"dense": 0.7, "sparse": 3.0, "fused": 2 / 61})
    >>> normalised_top_score([hit], mode="hybrid", fusion="rrf", rrf_k=60)
    1.0
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragsieve.errors import InputError, RagsieveError
from ragsieve.sieve.retrieve import normalised_top_score
from ragsieve.types import SearchHit

logger = logging.getLogger(__name__)

__all__ = [
    "BASELINES",
    "BaselineScorer",
    "answer_logprob",
    "baseline_rows",
    "best_baseline",
    "normalised_top_score",
]

BASELINES: tuple[str, ...] = ("retrieval", "logprob", "combined")


def answer_logprob(
    llm: Any, question: str, answer: str, evidence: Sequence[SearchHit], max_chars: int = 600
) -> float | None:
    """Mean token log-probability of ``answer`` given the answer prompt built from ``evidence``
    (the prompt plain RAG generated it from; no evidence: the closed-book prompt). ``None`` for an
    empty answer or a backend that cannot score prompts."""
    from ragsieve.generate.answer import build_answer_messages

    if not answer.strip():
        return None
    try:
        score = llm.continuation_logprobs(build_answer_messages(question, list(evidence), max_chars), [answer])[0]
    except RagsieveError as exc:
        logger.info("no answer log-probability: %s", exc)
        return None
    return float(score.mean_logprob)


class BaselineScorer:
    """Retrieval and log-probability signals for recorded plain-RAG / no-retrieval answers.

    ``config``: the :class:`ragsieve.config.PipelineConfig` the answers were produced with (its
    index, retrieval settings and model). ``index`` / ``llm`` may be passed in (tests, reuse).

    Example:
        >>> scorer = BaselineScorer(config)  # doctest: +SKIP
        >>> scorer.warm_up()  # doctest: +SKIP
        >>> scorer.signals(record)  # doctest: +SKIP
        {'retrieval': 0.98, 'logprob': -0.41}
    """

    def __init__(self, config: Any, index: Any = None, llm: Any = None) -> None:
        self.config = config
        self.index = index
        self.llm = llm

    def warm_up(self) -> None:
        if self.index is None:
            from ragsieve.embed import load_embedder
            from ragsieve.store.open import open_index

            self.index = open_index(self.config, load_embedder(self.config.embedder))
        if self.llm is None:
            from ragsieve.llm import load_llm

            self.llm = load_llm(self.config.llm)
        warm = getattr(self.llm, "warm_up", None)
        if callable(warm):
            warm()

    def retrieve(self, question: str) -> list[SearchHit]:
        rc = self.config.retrieval
        return list(self.index.search(question, k=rc.k, mode=rc.mode, retrieval=rc))

    def signals(self, record: Mapping[str, Any]) -> dict[str, float | None]:
        """``retrieval`` (normalised top score) and ``logprob`` (mean token log-prob) of one record.

        The answer is scored under the prompt it was generated from: the evidence ids the record
        lists, in order, among the re-retrieved hits (no evidence: the closed-book prompt).
        """
        if self.index is None or self.llm is None:
            self.warm_up()
        rc = self.config.retrieval
        question = str(record["question"])
        hits = self.retrieve(question)
        by_id = {h.chunk.id: h for h in hits}
        evidence_ids = list(record.get("evidence_ids") or [])
        missing = [e for e in evidence_ids if e not in by_id]
        if missing:
            logger.info("evidence %s was not re-retrieved; scoring the answer with the hits found", missing[:3])
        evidence = [by_id[e] for e in evidence_ids if e in by_id]
        text = str(record.get("answer") or "")
        abstained = bool(record.get("abstained")) or bool(record.get("error"))
        return {
            "retrieval": normalised_top_score(hits, rc.mode, rc.fusion, rc.rrf_k),
            "logprob": None
            if abstained
            else answer_logprob(self.llm, question, text, evidence, self.config.generation.max_evidence_chars),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BaselineScorer:
        from ragsieve.config import validate_config

        return cls(validate_config(data["config"]))


def _confidence(name: str, row: Mapping[str, float | None]) -> float | None:
    value = row.get(name)
    if value is None or math.isnan(value):
        return None
    return math.exp(value) if name == "logprob" else float(value)


def baseline_rows(
    records: Sequence[dict[str, Any]],
    signals: Sequence[Mapping[str, float | None]],
    correct: Sequence[bool] | np.ndarray,
    calibration: Sequence[int] | np.ndarray,
    prefix: str = "plain",
) -> tuple[dict[str, list[dict[str, Any]]], Any]:
    """Copies of ``records`` with ``confidence`` set to each baseline: ``{prefix}+retrieval``,
    ``{prefix}+logprob`` and ``{prefix}+combined`` (the combiner fitted on the ``calibration``
    indices only, with ``correct`` as labels; returned too). Records the pipeline abstained on
    keep their abstention."""
    from ragsieve.eval.confidence import ConfidenceCombiner

    if not len(records) == len(signals) == len(correct):
        raise InputError("baseline_rows needs one record, one signal row and one label per question")
    out: dict[str, list[dict[str, Any]]] = {}
    for name in ("retrieval", "logprob"):
        out[f"{prefix}+{name}"] = [
            {**rec, "confidence": _confidence(name, row)} for rec, row in zip(records, signals, strict=True)
        ]
    cal = np.asarray(calibration, dtype=int)
    y = np.asarray(correct, dtype=bool)
    combiner = None
    try:
        combiner = ConfidenceCombiner(features=["retrieval", "logprob"]).fit([signals[i] for i in cal], y[cal])
    except InputError as exc:
        logger.info("no combined baseline: %s", exc)
    if combiner is not None:
        probs = combiner.predict_proba(list(signals))
        out[f"{prefix}+combined"] = [
            {**rec, "confidence": round(float(p), 6)} for rec, p in zip(records, probs, strict=True)
        ]
    return out, combiner


def best_baseline(
    outcomes: Sequence[bool] | np.ndarray | Mapping[str, Sequence[bool] | np.ndarray],
    rows: Mapping[str, Sequence[dict[str, Any]]],
    calibration: Sequence[int] | np.ndarray,
) -> str:
    """Name of the baseline row with the lowest AURC on the ``calibration`` questions (chosen
    there, so the held-out comparison is not against whichever baseline does worst on the test
    questions). ``outcomes``: one vector for all rows (rows of one system), or one per row name
    (plain RAG and no retrieval rows together)."""
    from ragsieve.eval.selective import aurc, rank_scores

    if not rows:
        raise InputError("no baseline rows to choose from; compute them with baseline_rows first")
    cal = np.asarray(calibration, dtype=int)

    def score(name: str) -> float:
        recs = rows[name]
        o = np.asarray(outcomes[name] if isinstance(outcomes, Mapping) else outcomes, dtype=bool)
        scores = rank_scores([recs[i]["confidence"] for i in cal], [bool(recs[i]["abstained"]) for i in cal])
        return aurc(list(o[cal]), scores)

    return min(rows, key=score)
