"""Claim judges: how strongly a piece of evidence supports one answer sentence.

A judge implements :class:`ClaimJudge` (``name``, ``warm_up()``, ``support(claim, evidence)``
returning a number in [0, 1]). Two come with ragsieve:

* :class:`LLMLogprobJudge` asks any :class:`ragsieve.llm.base.LLM` "is the claim supported by
  the evidence? yes or no" and reads the next-token log-probabilities of yes/no (never sampled
  text), calibrated against a content-free claim on the same evidence;
* :class:`LexicalEmbeddingJudge` needs no LLM: embedding similarity of the claim to its best
  evidence sentence, mixed with the share of the claim's content words (names, numbers) that
  occur in the evidence.

Bring your own (an NLI model, a larger LLM behind an API) by writing a class with the same
three members, e.g. for a Hugging Face NLI cross-encoder::

    class NLIJudge:
        name = "nli-deberta"
        def warm_up(self) -> None:
            from transformers import pipeline
            self.nli = pipeline("text-classification", model="cross-encoder/nli-deberta-v3-small", top_k=None)
        def support(self, claim: str, evidence: Sequence[str]) -> float:
            scores = self.nli({"text": " ".join(evidence), "text_pair": claim})
            return next(s["score"] for s in scores if s["label"].lower() == "entailment")

and pass it as ``Pipeline(config, claim_judge=NLIJudge())``.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ragsieve.errors import ConfigError, ModelError
from ragsieve.lexicon import STOP_WORDS, WORD_RE
from ragsieve.llm.base import LLM, ChatMessage

logger = logging.getLogger(__name__)


@runtime_checkable
class ClaimJudge(Protocol):
    """Scores how well ``evidence`` supports ``claim``: 0 (not at all) to 1 (fully)."""

    name: str

    def warm_up(self) -> None: ...

    def support(self, claim: str, evidence: Sequence[str]) -> float: ...


class _Memo:
    """Results of recent (claim, evidence) pairs, so a regenerated answer's unchanged
    sentences are not judged twice."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._data: OrderedDict[tuple[str, tuple[str, ...]], float] = OrderedDict()

    def get(self, key: tuple[str, tuple[str, ...]]) -> float | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: tuple[str, tuple[str, ...]], value: float) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.size:
            self._data.popitem(last=False)


VERIFY_SYSTEM = (
    "You check facts. Read the evidence, then say whether the evidence supports the claim. "
    "Answer with one word: yes or no."
)
# Content-free claim for contextual calibration: what the model says with no claim at all.
CONTENT_FREE_CLAIM = "N/A"


def _logsumexp(values: Sequence[float]) -> float:
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


class LLMLogprobJudge:
    """Yes/no support from next-token log-probabilities of an LLM.

    The evidence comes first in the prompt and the claim last, so every sentence of one answer
    shares the evidence prefix and llama.cpp decodes only the claim (its prefix states).
    With ``calibrate`` the yes-probability is divided by the one the model gives a content-free
    claim on the same evidence (contextual calibration), which removes a small model's lean
    towards "yes".

    Example:
        >>> judge = LLMLogprobJudge(llm=my_llm)  # doctest: +SKIP
        >>> judge.support("Graphene is carbon.", ["Graphene is a single layer of carbon atoms."])  # doctest: +SKIP
        0.83
    """

    name = "llm-logprob"

    def __init__(self, llm: LLM | None = None, calibrate: bool = True, max_evidence_chars: int = 1500) -> None:
        self.llm = llm
        self.calibrate = calibrate
        self.max_evidence_chars = max_evidence_chars
        self._memo = _Memo()

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.name, "calibrate": self.calibrate, "max_evidence_chars": self.max_evidence_chars}

    @classmethod
    def from_dict(cls, data: dict[str, Any], llm: LLM | None = None) -> LLMLogprobJudge:
        return cls(llm=llm, **{k: v for k, v in data.items() if k != "type"})

    def warm_up(self) -> None:
        if self.llm is None:
            from ragsieve.config import LLMConfig
            from ragsieve.llm import load_llm

            self.llm = load_llm(LLMConfig())
        self.llm.warm_up()

    def messages(self, claim: str, evidence: Sequence[str]) -> list[ChatMessage]:
        lines = "\n".join(f"- {e}" for e in evidence)[: self.max_evidence_chars]
        user = f"Evidence:\n{lines}\n\nClaim: {claim}\nDoes the evidence support the claim? Answer yes or no."
        return [ChatMessage(role="system", content=VERIFY_SYSTEM), ChatMessage(role="user", content=user)]

    def _p_yes(self, claim: str, evidence: Sequence[str]) -> float:
        if self.llm is None:
            raise ModelError("LLMLogprobJudge has no LLM; pass llm= or call warm_up() first")
        lp = self.llm.next_token_logprobs(self.messages(claim, evidence), ["yes", "Yes", "no", "No"])
        yes, no = _logsumexp(lp[:2]), _logsumexp(lp[2:])
        return 1.0 / (1.0 + math.exp(no - yes))

    def support(self, claim: str, evidence: Sequence[str]) -> float:
        if not evidence:
            return 0.0
        key = (claim, tuple(evidence))
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        p = self._p_yes(claim, evidence)
        if self.calibrate:
            from ragsieve.filtering.filters import contextual_calibration

            cf_key = (CONTENT_FREE_CLAIM, tuple(evidence))
            p_cf = self._memo.get(cf_key)
            if p_cf is None:
                p_cf = self._p_yes(CONTENT_FREE_CLAIM, evidence)
                self._memo.put(cf_key, p_cf)
            p = contextual_calibration(p, p_cf)
        self._memo.put(key, p)
        return p




def _norm(word: str) -> str:
    w = word.lower()
    # Light suffix folding so "produces" matches "produce" without a stemmer dependency.
    for suffix in ("ies", "es", "s"):
        if len(w) > 4 and w.endswith(suffix):
            return w[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return w


def content_terms(text: str) -> set[str]:
    return {_norm(w) for w in WORD_RE.findall(text) if w.lower() not in STOP_WORDS}


class LexicalEmbeddingJudge:
    """Support without an LLM: ``w * cosine + (1 - w) * content-word recall``.

    ``cosine`` is the claim's best similarity to one evidence sentence (clipped to [0, 1]);
    recall is the share of the claim's content words (lower-cased, stop words removed, plural
    folded) found anywhere in the evidence, which catches invented names and numbers that an
    embedding would forgive.

    Example:
        >>> judge = LexicalEmbeddingJudge(embedder=my_embedder)  # doctest: +SKIP
        >>> judge.support("Graphene is made of carbon.", ["Graphene is a layer of carbon atoms."])  # doctest: +SKIP
        0.78
    """

    name = "lexical-embedding"

    def __init__(self, embedder: Any = None, embedding_weight: float = 0.5) -> None:
        if not 0.0 <= embedding_weight <= 1.0:
            raise ConfigError(f"embedding_weight must be in [0, 1], got {embedding_weight}")
        self.embedder = embedder
        self.embedding_weight = embedding_weight
        self._memo = _Memo()

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.name, "embedding_weight": self.embedding_weight}

    @classmethod
    def from_dict(cls, data: dict[str, Any], embedder: Any = None) -> LexicalEmbeddingJudge:
        return cls(embedder=embedder, **{k: v for k, v in data.items() if k != "type"})

    def warm_up(self) -> None:
        if self.embedder is None and self.embedding_weight > 0:
            from ragsieve.config import EmbedderConfig
            from ragsieve.embed import load_embedder

            self.embedder = load_embedder(EmbedderConfig())
        warm = getattr(self.embedder, "warm_up", None)
        if callable(warm):
            warm()

    @staticmethod
    def recall(claim: str, evidence: Sequence[str]) -> float:
        terms = content_terms(claim)
        if not terms:
            return 0.0
        return len(terms & content_terms(" ".join(evidence))) / len(terms)

    def similarity(self, claim: str, evidence: Sequence[str]) -> float:
        if self.embedder is None:
            raise ModelError("LexicalEmbeddingJudge has no embedder; pass embedder= or call warm_up() first")
        from ragsieve.ingest import split_sentences

        sentences = [s for e in evidence for s in (split_sentences(e) or [e])]
        vecs = np.asarray(self.embedder.embed([claim, *sentences]), dtype=np.float32)
        norms = np.linalg.norm(vecs, axis=1)
        norms[norms == 0] = 1.0
        vecs = vecs / norms[:, None]
        return float(np.clip(np.max(vecs[1:] @ vecs[0]), 0.0, 1.0))

    def support(self, claim: str, evidence: Sequence[str]) -> float:
        if not evidence:
            return 0.0
        key = (claim, tuple(evidence))
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        w = self.embedding_weight
        score = (1.0 - w) * self.recall(claim, evidence)
        if w > 0:
            score += w * self.similarity(claim, evidence)
        self._memo.put(key, score)
        return score


JUDGES = ("llm-logprob", "lexical-embedding")


def build_claim_judge(name: str, llm: LLM | None = None, embedder: Any = None, **params: Any) -> ClaimJudge:
    """The built-in judge called ``name`` (see :data:`JUDGES`)."""
    if name == "llm-logprob":
        return LLMLogprobJudge(llm=llm, **params)
    if name == "lexical-embedding":
        return LexicalEmbeddingJudge(embedder=embedder, **params)
    raise ConfigError(f"unknown claim judge {name!r}; use one of {', '.join(JUDGES)} or pass a ClaimJudge object")
