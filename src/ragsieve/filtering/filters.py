"""Knowledge filters: one interface, four strategies (direct, in-context, proxy, ensemble).

Every filter scores P(harmless | q, k) for a query and its candidate knowledge pieces
(:meth:`KnowledgeFilter.score_many`; :meth:`score` for one piece) and decides keep/drop
(:meth:`decide`: keep when P(harmless) >= ``threshold``).

The LLM-based filters ask a multiple-choice question ("(A) Harmful (B) Harmless") and read
the next-token log-probabilities of "A" and "B". The small model leans to one letter, so
scores are calibrated with a content-free input (contextual calibration: the same prompt
with the knowledge "N/A"; divide by its probabilities and renormalise).

Example:
    >>> from ragsieve.filtering.filters import DirectFilter, Candidate
    >>> f = DirectFilter(task="sst-2")
    >>> f.warm_up(llm)  # doctest: +SKIP
    >>> f.score_many("a gripping film .", [Candidate("Cinema is an art form.")])  # doctest: +SKIP
    array([0.61])
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

import numpy as np

from ragsieve.config import FilterName as FilterName  # declared with the other option sets
from ragsieve.errors import ConfigError, InputError
from ragsieve.llm.base import LLM, ChatMessage

from .annotate import KfDataset, KfPair
from .tasks import TaskSpec, TaskTemplate, resolve_task, task_spec

logger = logging.getLogger(__name__)

Calibration = Literal["none", "content-free"]
CONTENT_FREE = "N/A"
OPTION_TOKENS = ("A", "B")  # A = Harmful, B = Harmless


class Candidate(NamedTuple):
    """A retrieved knowledge piece as the filters see it."""

    text: str
    rank: int = 1
    similarity: float = 0.0  # cosine similarity of query and knowledge embeddings
    score: float = 0.0  # the retriever's raw score (dense cosine or BM25)
    embedding: np.ndarray | None = None  # knowledge embedding, when the caller has it
    id: str = ""


class FilterDecision(NamedTuple):
    candidate: Candidate
    p_harmless: float
    keep: bool
    source: str  # which filter decided (the ensemble records "proxy" or "icl")


@runtime_checkable
class KnowledgeFilter(Protocol):
    name: str
    threshold: float

    def score_many(
        self, query: str, candidates: Sequence[Candidate], *, query_embedding: np.ndarray | None = None
    ) -> np.ndarray: ...

    def to_dict(self) -> dict[str, Any]: ...


def score_one(f: KnowledgeFilter, query: str, knowledge: str | Candidate) -> float:
    cand = knowledge if isinstance(knowledge, Candidate) else Candidate(knowledge)
    return float(f.score_many(query, [cand])[0])


def decide(
    f: KnowledgeFilter,
    query: str,
    candidates: Sequence[Candidate],
    *,
    query_embedding: np.ndarray | None = None,
    max_keep: int | None = None,
) -> list[FilterDecision]:
    """Score every candidate, keep those with P(harmless) >= threshold, at most ``max_keep``
    of them in candidate order."""
    p = f.score_many(query, candidates, query_embedding=query_embedding)
    sources = getattr(f, "last_sources_", None) or [f.name] * len(candidates)
    out = []
    kept = 0
    for c, ph, src in zip(candidates, p, sources, strict=True):
        keep = bool(ph >= f.threshold) and (max_keep is None or kept < max_keep)
        kept += keep
        out.append(FilterDecision(c, float(ph), keep, src))
    return out


class _Base:
    name: str = "base"
    threshold: float = 0.5

    def score(self, query: str, knowledge: str | Candidate) -> float:
        return score_one(self, query, knowledge)  # type: ignore[arg-type]

    def decide(
        self,
        query: str,
        candidates: Sequence[Candidate],
        *,
        query_embedding: np.ndarray | None = None,
        max_keep: int | None = None,
    ) -> list[FilterDecision]:
        return decide(self, query, candidates, query_embedding=query_embedding, max_keep=max_keep)  # type: ignore[arg-type]


class NoFilter(_Base):
    """Keeps every candidate (P(harmless) = 1)."""

    name = "none"

    def __init__(self, threshold: float = 0.5) -> None:
        self.threshold = threshold

    def score_many(
        self, query: str, candidates: Sequence[Candidate], *, query_embedding: np.ndarray | None = None
    ) -> np.ndarray:
        return np.ones(len(candidates))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "threshold": self.threshold}


def _ab_to_harmless(lp_a: float, lp_b: float) -> float:
    m = max(lp_a, lp_b)
    ea, eb = np.exp(lp_a - m), np.exp(lp_b - m)
    return float(eb / (ea + eb))


def contextual_calibration(p_harmless: float, p_cf: float) -> float:
    """Contextual calibration of a two-way distribution against the content-free one."""
    ph = p_harmless / max(p_cf, 1e-9)
    pa = (1.0 - p_harmless) / max(1.0 - p_cf, 1e-9)
    return float(ph / (ph + pa))


class DirectFilter(_Base):
    """Zero-shot multiple-choice filter: "(A) Harmful (B) Harmless", scored by next-token log-probs.

    Example:
        >>> f = DirectFilter(task="trec", calibration="content-free")
        >>> f.to_dict()["name"]
        'direct'
    """

    name = "direct"

    def __init__(
        self, task: TaskSpec = "sst-2", threshold: float = 0.5, calibration: Calibration = "content-free"
    ) -> None:
        # A built-in task name, a TaskTemplate, or a custom task's fields (labels, instruction, template).
        self.task = task
        self.threshold = threshold
        self.calibration = calibration
        self._llm: LLM | None = None

    def warm_up(self, llm: LLM) -> None:
        self._llm = llm

    @property
    def template(self) -> TaskTemplate:
        return resolve_task(self.task)

    def _messages(self, query: str, knowledge: str) -> list[ChatMessage]:
        return [ChatMessage(role="user", content=self.template.filter_prompt(query, knowledge))]

    def _raw(self, query: str, knowledge: str) -> float:
        if self._llm is None:
            raise ConfigError(f"{type(self).__name__} has no LLM; call warm_up(llm) first")
        lp = self._llm.next_token_logprobs(self._messages(query, knowledge), list(OPTION_TOKENS))
        return _ab_to_harmless(lp[0], lp[1])

    def score_many(
        self, query: str, candidates: Sequence[Candidate], *, query_embedding: np.ndarray | None = None
    ) -> np.ndarray:
        raw = np.array([self._raw(query, c.text) for c in candidates], dtype=float)
        if self.calibration == "content-free" and len(candidates):
            p_cf = self._raw(query, CONTENT_FREE)
            raw = np.array([contextual_calibration(p, p_cf) for p in raw])
        return raw

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "task": task_spec(self.task),
            "threshold": self.threshold,
            "calibration": self.calibration,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DirectFilter:
        data = {k: v for k, v in data.items() if k != "name"}
        return cls(**data)


class ICLFilter(DirectFilter):
    """The direct filter with demonstrations sampled from D_kf (balanced Harmful/Harmless).

    Demonstrations come first, as earlier chat turns, so their model state is shared by
    every call.

    Example:
        >>> from ragsieve.filtering.annotate import KfDataset, KfPair
        >>> pairs = [KfPair("sst-2", "q", f"k{i}", i % 2 == 0, 1.0, "predicted") for i in range(6)]
        >>> f = ICLFilter(task="sst-2", n_demos=4, seed=0).fit(KfDataset(pairs))
        >>> len(f.demos_)
        4
    """

    name = "icl"

    def __init__(
        self,
        task: TaskSpec = "sst-2",
        threshold: float = 0.5,
        calibration: Calibration = "content-free",
        n_demos: int = 4,
        seed: int = 0,
        demos: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(task=task, threshold=threshold, calibration=calibration)
        self.n_demos = n_demos
        self.seed = seed
        self.demos = demos
        if demos is not None:
            self.demos_ = [dict(d) for d in demos]

    def fit(self, dataset: KfDataset | Sequence[KfPair]) -> ICLFilter:
        pairs = list(dataset)
        harmful = [p for p in pairs if p.harmful]
        harmless = [p for p in pairs if not p.harmful]
        if not harmful or not harmless:
            raise InputError("ICL demonstrations need both Harmful and Harmless pairs in D_kf; annotate more queries")
        rng = random.Random(self.seed)
        n_h = self.n_demos // 2
        chosen = rng.sample(harmful, min(n_h, len(harmful))) + rng.sample(
            harmless, min(self.n_demos - n_h, len(harmless))
        )
        rng.shuffle(chosen)
        self.demos_ = [{"query": p.query, "knowledge": p.knowledge, "harmful": p.harmful} for p in chosen]
        return self

    def _messages(self, query: str, knowledge: str) -> list[ChatMessage]:
        demos = getattr(self, "demos_", None)
        if demos is None:
            raise ConfigError("ICLFilter has no demonstrations; call fit(D_kf) or pass demos=[...]")
        msgs: list[ChatMessage] = []
        for d in demos:
            msgs.append(ChatMessage(role="user", content=self.template.filter_prompt(d["query"], d["knowledge"])))
            msgs.append(ChatMessage(role="assistant", content=OPTION_TOKENS[0] if d["harmful"] else OPTION_TOKENS[1]))
        msgs.append(ChatMessage(role="user", content=self.template.filter_prompt(query, knowledge)))
        return msgs

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "n_demos": self.n_demos,
            "seed": self.seed,
            "demos": getattr(self, "demos_", None),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ICLFilter:
        data = {k: v for k, v in data.items() if k != "name"}
        return cls(**data)


class EnsembleFilter(_Base):
    """Proxy when it is confident (max_a P(a|q,k) >= ``theta``), else the in-context filter.

    The in-context filter is only asked about the pieces the proxy is unsure of.
    ``last_sources_`` records which filter decided each piece of the last call.

    Example:
        >>> import numpy as np
        >>> class Fixed:
        ...     name, threshold = "fixed", 0.5
        ...     def __init__(self, p): self.p = np.array(p)
        ...     def score_many(self, q, cs, *, query_embedding=None): return self.p[: len(cs)]
        ...     def to_dict(self): return {}
        >>> e = EnsembleFilter(Fixed([0.95, 0.6]), Fixed([0.1, 0.2]), theta=0.8)
        >>> e.score_many("q", [Candidate("a"), Candidate("b")]).tolist()
        [0.95, 0.2]
    """

    name = "ensemble"

    def __init__(
        self, proxy: KnowledgeFilter, icl: KnowledgeFilter, theta: float = 0.8, threshold: float = 0.5
    ) -> None:
        self.proxy = proxy
        self.icl = icl
        self.theta = theta
        self.threshold = threshold
        self.last_sources_: list[str] = []

    def score_many(
        self, query: str, candidates: Sequence[Candidate], *, query_embedding: np.ndarray | None = None
    ) -> np.ndarray:
        p = np.asarray(self.proxy.score_many(query, candidates, query_embedding=query_embedding), dtype=float)
        unsure = [int(i) for i in np.flatnonzero(np.maximum(p, 1.0 - p) < self.theta)]
        out = p.copy()
        sources = ["proxy"] * len(candidates)
        if unsure:
            q = self.icl.score_many(query, [candidates[i] for i in unsure], query_embedding=query_embedding)
            out[unsure] = q
            for i in unsure:
                sources[i] = "icl"
        self.last_sources_ = sources
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "theta": self.theta,
            "threshold": self.threshold,
            "proxy": self.proxy.to_dict(),
            "icl": self.icl.to_dict(),
        }


def ensemble_combine(p_proxy: np.ndarray, p_icl: np.ndarray, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """The ensemble rule on precomputed scores: (P_harmless, used_proxy mask)."""
    p_proxy = np.asarray(p_proxy, dtype=float)
    use_proxy = np.maximum(p_proxy, 1.0 - p_proxy) >= theta
    return np.where(use_proxy, p_proxy, np.asarray(p_icl, dtype=float)), use_proxy
