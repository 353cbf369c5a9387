"""Generation-stage reflection: knowledge coverage and distinct-2, with bounded regeneration.

Coverage: the retrieved documents are split into knowledge points K_D and the answer into
points F_A (sentences); both are embedded; match(k_i) = 1 if some f_j has cosine >= theta;
coverage = mean match. Diversity: distinct-2 = unique bigrams / total bigrams. When either is
below its threshold the answer is regenerated with the uncovered points named in the prompt,
for at most ``max_rounds`` extra rounds; every round is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ragsieve.errors import InputError
from ragsieve.types import Trace

_TOKEN = re.compile(r"\w+|[^\w\s]")


def distinct_n(text: str, n: int = 2) -> float:
    """Unique n-grams / total n-grams over lower-cased word tokens (0.0 when there are none)."""
    if n < 1:
        raise InputError(f"distinct_n needs n >= 1, got {n}")
    toks = [t.lower() for t in re.findall(r"\w+", text)]
    grams = [tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)]
    if not grams:
        return 0.0
    return len(set(grams)) / len(grams)


class CoverageResult(NamedTuple):
    coverage: float
    matched: list[bool]  # one per knowledge point
    best_sim: list[float]


def coverage_from_embeddings(knowledge: np.ndarray, answer: np.ndarray, theta: float) -> CoverageResult:
    """match(k_i) = 1 if max_j cos(k_i, f_j) >= theta (rows L2-normalised); coverage = mean match."""
    if knowledge.shape[0] == 0:
        return CoverageResult(1.0, [], [])
    if answer.shape[0] == 0:
        return CoverageResult(0.0, [False] * knowledge.shape[0], [0.0] * knowledge.shape[0])
    best = (knowledge @ answer.T).max(axis=1)
    matched = [bool(b >= theta) for b in best]
    return CoverageResult(float(np.mean(matched)), matched, [float(b) for b in best])


def split_points(text: str) -> list[str]:
    from ragsieve.ingest import split_sentences

    return [s.strip() for s in split_sentences(text) if len(s.strip()) > 3]


def knowledge_coverage(knowledge_points: Sequence[str], answer: str, embedder: Any, theta: float) -> CoverageResult:
    points = split_points(answer)
    if not knowledge_points:
        return CoverageResult(1.0, [], [])
    if not points:
        return coverage_from_embeddings(np.zeros((len(knowledge_points), 1)), np.zeros((0, 1)), theta)
    vecs = np.asarray(embedder.embed([*knowledge_points, *points]), dtype=np.float32)
    return coverage_from_embeddings(vecs[: len(knowledge_points)], vecs[len(knowledge_points) :], theta)


class ReflectionRound(NamedTuple):
    round: int
    text: str
    coverage: float
    distinct2: float
    uncovered: list[str]
    accepted: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "coverage": round(self.coverage, 4),
            "distinct2": round(self.distinct2, 4),
            "uncovered": self.uncovered,
            "accepted": self.accepted,
            "chars": len(self.text),
        }


class ReflectionResult(NamedTuple):
    text: str
    rounds: list[ReflectionRound]


# generate(uncovered_points) -> answer text; uncovered_points is empty on the first round.
GenerateFn = Callable[[list[str]], str]


class GenerationReflector:
    """Coverage + distinct-2 reflection loop around a generation function.

    Example::

        refl = GenerationReflector(theta_sim=0.6, min_coverage=0.5, min_distinct2=0.6, max_rounds=2)
        res = refl.run(["Bees pollinate crops.", "Honey is stored in combs."],
                       lambda missing: my_generate(missing), embedder)
        res.text, [r.coverage for r in res.rounds]
    """

    def __init__(
        self,
        theta_sim: float = 0.6,
        min_coverage: float = 0.5,
        min_distinct2: float = 0.6,
        max_rounds: int = 2,
        max_points: int = 12,
        max_named: int = 4,
    ) -> None:
        self.theta_sim = theta_sim
        self.min_coverage = min_coverage
        self.min_distinct2 = min_distinct2
        self.max_rounds = max_rounds
        self.max_points = max_points
        self.max_named = max_named

    def knowledge_points(self, documents: Sequence[str]) -> list[str]:
        pts: list[str] = []
        for d in documents:
            pts.extend(split_points(d))
        return pts[: self.max_points]

    def run(
        self, documents: Sequence[str], generate: GenerateFn, embedder: Any, trace: Trace | None = None
    ) -> ReflectionResult:
        points = self.knowledge_points(documents)
        rounds: list[ReflectionRound] = []
        missing: list[str] = []
        best: ReflectionRound | None = None
        for r in range(self.max_rounds + 1):
            text = generate(missing)
            cov = knowledge_coverage(points, text, embedder, self.theta_sim)
            d2 = distinct_n(text, 2)
            uncovered = [p for p, m in zip(points, cov.matched, strict=True) if not m]
            ok = cov.coverage >= self.min_coverage and d2 >= self.min_distinct2
            rnd = ReflectionRound(r, text, cov.coverage, d2, uncovered[: self.max_named], ok)
            rounds.append(rnd)
            if trace is not None:
                trace.record("generation_reflection", **rnd.to_dict())
            if best is None or (rnd.coverage, rnd.distinct2) > (best.coverage, best.distinct2):
                best = rnd
            if ok:
                best = rnd
                break
            missing = uncovered[: self.max_named]
        if best is None:  # pragma: no cover - max_rounds >= 0 means at least one round
            raise InputError("reflection ran no rounds")
        return ReflectionResult(best.text, rounds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "theta_sim": self.theta_sim,
            "min_coverage": self.min_coverage,
            "min_distinct2": self.min_distinct2,
            "max_rounds": self.max_rounds,
            "max_points": self.max_points,
            "max_named": self.max_named,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerationReflector:
        return cls(**data)
