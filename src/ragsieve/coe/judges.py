"""Feature judges: does a knowledge snippet convey the intent, mention a keyword, or give
evidence for a relation?

Each judge maps a :class:`JudgeInput` (snippets x hypotheses, plus a cosine-similarity
matrix when an embedder is used) to scores and a boolean coverage matrix.

* :class:`LLMYesNoJudge` asks the LLM a yes/no question per pair and scores it by the
  log-probabilities of "yes" and "no" (never by sampled text), with contextual
  calibration against a content-free snippet.
* :class:`LexicalKeywordJudge` matches keyword tokens in the snippet (whole phrase,
  partial: share of keyword tokens present, prefix-stemmed).
* :class:`EmbeddingJudge` thresholds cosine similarity; the threshold is a
  hyperparameter or learned by :meth:`EmbeddingJudge.fit` on labelled pairs.
* :class:`LexicalEmbeddingJudge` covers a keyword when either signal passes.

:class:`CoEDiscriminator` runs the configured judge per feature type and returns
:class:`Judgements`; a knowledge set contains a chain of evidence when the union of its
snippets covers the intent, every keyword and every relation.

Example:
    >>> from ragsieve.coe.judges import JudgeInput, LexicalKeywordJudge
    >>> j = LexicalKeywordJudge(threshold=0.5)
    >>> j.judge(JudgeInput(["Scott Derrickson is an American director."], ["Derrickson", "Ed Wood"])).covered
    array([[ True, False]])
"""

from __future__ import annotations

import logging
import math
import re
import unicodedata
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np

from ragsieve.coe.config import CoEConfig, load_coe_config
from ragsieve.coe.cover import FeatureKind
from ragsieve.coe.features import EvidenceFeatures
from ragsieve.errors import ConfigError, InputError
from ragsieve.lexicon import STOP_WORDS
from ragsieve.llm.base import LLM

__all__ = [
    "CoEDiscriminator",
    "EmbeddingJudge",
    "FeatureJudge",
    "JudgeInput",
    "JudgeOutput",
    "Judgements",
    "LLMYesNoJudge",
    "LexicalEmbeddingJudge",
    "LexicalKeywordJudge",
    "best_threshold",
    "lexical_match_score",
]

logger = logging.getLogger(__name__)


class TextEmbedder(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class JudgeInput(NamedTuple):
    snippets: list[str]
    hypotheses: list[str]
    similarity: np.ndarray | None = None  # cosine, (n_snippets, n_hypotheses)


class JudgeOutput(NamedTuple):
    scores: np.ndarray  # float (n_snippets, n_hypotheses)
    covered: np.ndarray  # bool, same shape


class FeatureJudge(Protocol):
    needs_embeddings: bool

    def judge(self, inp: JudgeInput) -> JudgeOutput: ...


# ---------------------------------------------------------------- lexical


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _same_stem(a: str, b: str, prefix: int) -> bool:
    if a == b:
        return True
    return len(a) >= prefix and len(b) >= prefix and a[:prefix] == b[:prefix]


def lexical_match_score(snippet: str, keyword: str, stem_prefix: int = 5) -> float:
    """1.0 when the normalised keyword phrase occurs in the snippet, else the share of the
    keyword's content tokens found in the snippet (tokens sharing a ``stem_prefix``-char
    prefix count as a match, so "nationality" matches "national")."""
    s, k = _norm(snippet), _norm(keyword)
    if not k:
        return 0.0
    if f" {k} " in f" {s} ":
        return 1.0
    k_toks = [t for t in k.split() if t not in STOP_WORDS] or k.split()
    s_toks = set(s.split())
    hit = sum(1 for t in k_toks if any(_same_stem(t, u, stem_prefix) for u in s_toks))
    return hit / len(k_toks)


class LexicalKeywordJudge:
    """Keyword mentioned (exactly or partially) in the snippet."""

    needs_embeddings = False

    def __init__(self, threshold: float = 0.5, stem_prefix: int = 5) -> None:
        self.threshold = threshold
        self.stem_prefix = stem_prefix

    def judge(self, inp: JudgeInput) -> JudgeOutput:
        scores = np.array(
            [[lexical_match_score(s, h, self.stem_prefix) for h in inp.hypotheses] for s in inp.snippets],
            dtype=float,
        ).reshape(len(inp.snippets), len(inp.hypotheses))
        return JudgeOutput(scores, scores >= self.threshold)

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "stem_prefix": self.stem_prefix}


# ---------------------------------------------------------------- embedding
def best_threshold(scores: np.ndarray, labels: np.ndarray, metric: Literal["f1", "accuracy"] = "f1") -> float:
    """Threshold on ``scores`` (predict positive when score >= t) maximising F1 or accuracy
    on the labelled pairs; candidates are midpoints between sorted distinct scores."""
    s = np.asarray(scores, dtype=float).ravel()
    y = np.asarray(labels, dtype=bool).ravel()
    if s.size == 0 or s.size != y.size:
        raise InputError(f"need equally many scores and labels (got {s.size} and {y.size}), at least one")
    if y.all() or not y.any():
        raise InputError("threshold calibration needs both positive and negative labelled pairs")
    u = np.unique(s)
    cands = np.concatenate([[u[0] - 1e-6], (u[:-1] + u[1:]) / 2, [u[-1] + 1e-6]])
    best_t, best_v = float(cands[0]), -1.0
    for t in cands:
        pred = s >= t
        if metric == "accuracy":
            v = float((pred == y).mean())
        else:
            tp = float((pred & y).sum())
            v = 2 * tp / (pred.sum() + y.sum()) if (pred.sum() + y.sum()) else 0.0
        if v > best_v:
            best_t, best_v = float(t), v
    return best_t


class EmbeddingJudge:
    """Cosine similarity between snippet and hypothesis embeddings against a threshold.

    ``threshold=None`` requires :meth:`fit`; the learned threshold is ``threshold_``.
    """

    needs_embeddings = True

    def __init__(self, threshold: float | None = None, metric: Literal["f1", "accuracy"] = "f1") -> None:
        self.threshold = threshold
        self.metric = metric

    def fit(self, similarities: np.ndarray, labels: np.ndarray) -> EmbeddingJudge:
        self.threshold_ = best_threshold(similarities, labels, self.metric)
        return self

    @property
    def effective_threshold(self) -> float:
        t = getattr(self, "threshold_", self.threshold)
        if t is None:
            raise ConfigError("EmbeddingJudge has no threshold: pass threshold= or fit() on labelled pairs")
        return float(t)

    def judge(self, inp: JudgeInput) -> JudgeOutput:
        if inp.similarity is None:
            raise InputError("EmbeddingJudge needs the similarity matrix; run it through CoEDiscriminator")
        sim = np.asarray(inp.similarity, dtype=float)
        return JudgeOutput(sim, sim >= self.effective_threshold)

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": getattr(self, "threshold_", self.threshold), "metric": self.metric}


class LexicalEmbeddingJudge:
    """Keyword covered when the lexical score or the embedding similarity passes its threshold."""

    needs_embeddings = True

    def __init__(self, lexical_threshold: float = 0.5, embedding_threshold: float = 0.6) -> None:
        self.lexical_threshold = lexical_threshold
        self.embedding_threshold = embedding_threshold

    def judge(self, inp: JudgeInput) -> JudgeOutput:
        lex = LexicalKeywordJudge(self.lexical_threshold).judge(inp)
        emb = EmbeddingJudge(self.embedding_threshold).judge(inp)
        return JudgeOutput(np.maximum(lex.scores, emb.scores), lex.covered | emb.covered)


# ---------------------------------------------------------------- LLM yes/no
_QUESTIONS: dict[str, str] = {
    "intent": "Does the knowledge provide {h}?",
    "keyword": 'Does the knowledge mention "{h}" (exactly, partly or with a synonym)?',
    "relation": "Does the knowledge give definite evidence that {h}?",
}
_YES = ("yes", "Yes", " yes", " Yes")
_NO = ("no", "No", " no", " No")
CONTENT_FREE = "N/A"


def _logsumexp(xs: Sequence[float]) -> float:
    finite = [x for x in xs if math.isfinite(x)]
    if not finite:
        return -math.inf
    m = max(finite)
    return m + math.log(sum(math.exp(x - m) for x in finite))


class LLMYesNoJudge:
    """Ask the LLM "yes or no" per (snippet, hypothesis); score p(yes) from next-token
    log-probabilities, optionally divided by p(yes | content-free snippet) and renormalised."""

    needs_embeddings = False

    def __init__(
        self,
        llm: LLM,
        kind: FeatureKind,
        threshold: float = 0.5,
        calibrate: bool = True,
        max_snippet_chars: int = 600,
    ) -> None:
        if kind not in _QUESTIONS:
            raise ConfigError(f"LLMYesNoJudge kind must be one of {sorted(_QUESTIONS)}, got {kind!r}")
        self.llm = llm
        self.kind = kind
        self.threshold = threshold
        self.calibrate = calibrate
        self.max_snippet_chars = max_snippet_chars

    def prompt(self, snippet: str, hypothesis: str) -> str:
        return (
            f"Knowledge: {snippet[: self.max_snippet_chars]}\n\n"
            f"{_QUESTIONS[self.kind].format(h=hypothesis)} Answer yes or no."
        )

    def p_yes(self, snippet: str, hypothesis: str) -> float:
        lps = self.llm.next_token_logprobs(self.prompt(snippet, hypothesis), [*_YES, *_NO])
        ly, ln = _logsumexp(lps[: len(_YES)]), _logsumexp(lps[len(_YES):])
        if not math.isfinite(ly) and not math.isfinite(ln):
            return 0.5
        m = max(ly, ln)
        ey, en = math.exp(ly - m), math.exp(ln - m)
        return ey / (ey + en)

    def judge(self, inp: JudgeInput) -> JudgeOutput:
        n, f = len(inp.snippets), len(inp.hypotheses)
        scores = np.zeros((n, f))
        for j, h in enumerate(inp.hypotheses):
            cf = self.p_yes(CONTENT_FREE, h) if self.calibrate else 0.5
            cf = min(max(cf, 1e-6), 1 - 1e-6)
            for i, s in enumerate(inp.snippets):
                p = self.p_yes(s, h)
                if self.calibrate:
                    qy, qn = p / cf, (1 - p) / (1 - cf)
                    p = qy / (qy + qn)
                scores[i, j] = p
        return JudgeOutput(scores, scores >= self.threshold)


# ---------------------------------------------------------------- discriminator
class Judgements(NamedTuple):
    """Per-snippet, per-feature scores and coverage for one question."""

    features: EvidenceFeatures
    snippets: list[str]
    scores: np.ndarray
    covered: np.ndarray

    @property
    def kinds(self) -> list[FeatureKind]:
        return list(self.features.feature_kinds())

    def has_coe(self, rows: Sequence[int] | None = None) -> bool:
        """Whether the snippets ``rows`` (default: all) together cover every feature."""
        cov = self.covered if rows is None else self.covered[list(rows)]
        if cov.shape[1] == 0:
            return True
        return bool(cov.shape[0] and cov.any(axis=0).all())

    def to_records(self, ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        names = self.features.feature_names()
        ids = list(ids) if ids is not None else [str(i) for i in range(len(self.snippets))]
        return [
            {
                "id": ids[i],
                "covers": [names[j] for j in np.flatnonzero(self.covered[i])],
                "scores": {names[j]: round(float(self.scores[i, j]), 4) for j in range(len(names))},
            }
            for i in range(len(self.snippets))
        ]


class CoEDiscriminator:
    """Judge which evidence features each snippet covers, with the judge chosen per feature.

    Example:
        >>> from ragsieve.coe.judges import CoEDiscriminator
        >>> from ragsieve.coe.features import fallback_features
        >>> d = CoEDiscriminator({"intent_judge": "embedding", "keyword_judge": "lexical"}, embedder=None)
        >>> # d.judge(fallback_features("Who founded Queen?"), ["Queen was founded by ..."])
    """

    def __init__(
        self,
        config: CoEConfig | dict[str, Any] | None = None,
        llm: LLM | None = None,
        embedder: TextEmbedder | None = None,
    ) -> None:
        self.config = load_coe_config(config)
        self.llm = llm
        self.embedder = embedder

    def _judge_for(self, kind: FeatureKind) -> FeatureJudge:
        c = self.config
        choice = {"intent": c.intent_judge, "keyword": c.keyword_judge, "relation": c.relation_judge}[kind]
        if choice == "llm":
            if self.llm is None:
                raise ConfigError(f"the {kind} judge is 'llm' but no LLM was given; pass llm= or change it")
            return LLMYesNoJudge(self.llm, kind, c.llm_threshold, c.llm_calibrate, c.max_snippet_chars)
        embedding_threshold = {
            "intent": c.intent_threshold,
            "keyword": c.keyword_embedding_threshold,
            "relation": c.relation_threshold,
        }[kind]
        factories: dict[str, FeatureJudge] = {
            "embedding": EmbeddingJudge(embedding_threshold),
            "lexical": LexicalKeywordJudge(c.keyword_lexical_threshold),
            "lexical+embedding": LexicalEmbeddingJudge(c.keyword_lexical_threshold, embedding_threshold),
        }
        return factories[choice]

    def similarity(self, snippets: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        """Cosine similarity from one batched embedding call."""
        if self.embedder is None:
            raise ConfigError("an embedding judge is configured but no embedder was given; pass embedder=")
        emb = np.asarray(self.embedder.embed([*snippets, *hypotheses]), dtype=np.float32)
        emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
        s, h = emb[: len(snippets)], emb[len(snippets):]
        return np.asarray(s @ h.T, dtype=float)

    def judge(self, features: EvidenceFeatures, snippets: Sequence[str]) -> Judgements:
        snippets = list(snippets)
        texts = features.feature_texts()
        kinds = features.feature_kinds()
        n, f = len(snippets), len(texts)
        scores = np.zeros((n, f))
        covered = np.zeros((n, f), dtype=bool)
        judges = {k: self._judge_for(k) for k in set(kinds)}
        sim: np.ndarray | None = None
        if n and any(j.needs_embeddings for j in judges.values()):
            sim = self.similarity(snippets, texts)
        for kind, judge in judges.items():
            cols = [j for j, k in enumerate(kinds) if k == kind]
            if not n or not cols:
                continue
            inp = JudgeInput(snippets, [texts[j] for j in cols], None if sim is None else sim[:, cols])
            out = judge.judge(inp)
            scores[:, cols] = out.scores
            covered[:, cols] = out.covered
        return Judgements(features, snippets, scores, covered)
