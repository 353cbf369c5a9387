"""Proxy filter: a calibrated classifier over embedding features, trained on D_kf in seconds.

The paper fine-tunes Llama-3-1B as the proxy; here a scikit-learn estimator learns
P(harmless | q, k) from features of the query and knowledge embeddings (bundled MiniLM):
the elementwise product q⊙k, the absolute difference |q−k|, their cosine similarity and
the retrieval rank. A standardised logistic regression is wrapped in
``CalibratedClassifierCV`` (sigmoid) so the probabilities are calibrated. It costs no LLM
call at inference.

Calibrated probabilities carry D_kf's class balance: when only 7-20% of the training
pairs are Harmful, hardly any test pair reaches P(harmful) > 0.5 and the filter keeps
everything. ``prior="uniform"`` shifts the outputs to equal Harmful/Harmless priors
(Bayes' rule with the training rate ``harmless_rate_``), so that the 0.5 threshold means
"more likely harmful than an average training pair" and fusion weights use that scale.

Example:
    >>> from ragsieve.filtering.proxy import ProxyFilter
    >>> proxy = ProxyFilter(C=0.5).warm_up(embedder)  # doctest: +SKIP
    >>> proxy.fit(dkf)  # doctest: +SKIP
    >>> proxy.score_many("a dull film .", [Candidate("Films are long.")])  # doctest: +SKIP
    array([0.42])
    >>> proxy.save("runs/proxy-sst2")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

from ragsieve.errors import ConfigError, InputError
from ragsieve.io import atomic_directory

from .annotate import KfDataset, KfPair
from .filters import Candidate, _Base

logger = logging.getLogger(__name__)

# "train": probabilities under D_kf's class balance; "uniform": shifted to equal priors
Prior = Literal["train", "uniform"]
PRIORS: tuple[str, ...] = get_args(Prior)

_MODEL_FILE = "proxy.skops"
_LEGACY_MODEL_FILE = "proxy.joblib"
_CONFIG_FILE = "proxy.json"
_RETRAIN = "run `ragsieve filters train --dkf DKF.jsonl --out FOLDER`"


def pair_features(q_emb: np.ndarray, k_emb: np.ndarray, ranks: Sequence[int], max_rank: int = 30) -> np.ndarray:
    """Feature rows for (query, knowledge) pairs; ``q_emb`` is (d,) or (n, d), ``k_emb`` (n, d)."""
    k = np.atleast_2d(np.asarray(k_emb, dtype=np.float32))
    q = np.asarray(q_emb, dtype=np.float32)
    q = np.broadcast_to(q, k.shape) if q.ndim == 1 else q
    if q.shape != k.shape:
        raise InputError(f"query embeddings {q.shape} and knowledge embeddings {k.shape} do not match")
    cos = (q * k).sum(axis=1, keepdims=True)
    r = np.asarray(ranks, dtype=np.float32).reshape(-1, 1)
    return np.hstack([q * k, np.abs(q - k), cos, 1.0 / np.maximum(r, 1.0), r / float(max_rank)])


def to_uniform_prior(proba: np.ndarray, harmless_rate: float) -> np.ndarray:
    """Re-weight [P(harmful), P(harmless)] rows learned under a Harmless rate ``harmless_rate``
    to what they would be under equal priors (Bayes' rule, then renormalise)."""
    rate = min(max(harmless_rate, 1e-6), 1 - 1e-6)
    w = np.asarray(proba, dtype=float) / np.array([1.0 - rate, rate])
    return w / w.sum(axis=1, keepdims=True)


class ProxyFilter(_Base):
    """Calibrated logistic regression on embedding features (scikit-learn estimator).

    Hyperparameters: ``C`` (inverse L2 strength), ``cv`` folds for the sigmoid calibration,
    ``class_weight``, ``prior`` ("train": probabilities under D_kf's class balance;
    "uniform": shifted to equal priors). Learned: ``estimator_``, ``n_features_in_`` and
    ``harmless_rate_`` (share of Harmless pairs in the training data).
    """

    name = "proxy"

    def __init__(
        self,
        C: float = 0.5,  # noqa: N803 - scikit-learn's name
        cv: int = 3,
        class_weight: str | None = "balanced",
        threshold: float = 0.5,
        max_rank: int = 30,
        random_state: int = 0,
        prior: Prior = "train",
    ) -> None:
        self.C = C
        self.cv = cv
        self.class_weight = class_weight
        self.threshold = threshold
        self.max_rank = max_rank
        self.random_state = random_state
        self.prior = prior
        self._embedder: Any = None

    # -------------------------------------------------------------- sklearn API
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {
            "C": self.C,
            "cv": self.cv,
            "class_weight": self.class_weight,
            "threshold": self.threshold,
            "max_rank": self.max_rank,
            "random_state": self.random_state,
            "prior": self.prior,
        }

    def set_params(self, **params: Any) -> ProxyFilter:
        for k, v in params.items():
            setattr(self, k, v)
        return self

    def warm_up(self, embedder: Any) -> ProxyFilter:
        """Attach the embedder (an object with ``embed(texts) -> (n, d)`` L2-normalised)."""
        if hasattr(embedder, "warm_up"):
            embedder.warm_up()
        self._embedder = embedder
        return self

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._embedder is None:
            raise ConfigError("ProxyFilter has no embedder; call warm_up(embedder) first")
        return np.asarray(self._embedder.embed(list(texts)), dtype=np.float32)

    def features_for_pairs(self, pairs: Sequence[KfPair]) -> np.ndarray:
        queries = sorted({p.query for p in pairs})
        knowledge = sorted({p.knowledge for p in pairs})
        qe = dict(zip(queries, self._embed(queries), strict=True))
        ke = dict(zip(knowledge, self._embed(knowledge), strict=True))
        q = np.stack([qe[p.query] for p in pairs])
        k = np.stack([ke[p.knowledge] for p in pairs])
        return pair_features(q, k, [p.rank for p in pairs], self.max_rank)

    def fit(self, X: np.ndarray | KfDataset | Sequence[KfPair], y: np.ndarray | None = None) -> ProxyFilter:  # noqa: N803
        """Fit on a feature matrix with ``y`` = 1 for Harmless, or on D_kf pairs directly."""
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        if not isinstance(X, np.ndarray):
            pairs = list(X)
            if not pairs:
                raise InputError("D_kf is empty; annotate some queries before training the proxy")
            y = np.array([not p.harmful for p in pairs], dtype=int)
            X = self.features_for_pairs(pairs)  # noqa: N806
        if y is None:
            raise InputError("fit(X, y) needs y (1 = Harmless) when X is a feature matrix")
        y = np.asarray(y, dtype=int)
        if self.prior not in PRIORS:
            raise ConfigError(f"ProxyFilter prior must be one of {list(PRIORS)}, not {self.prior!r}")
        if len(np.unique(y)) < 2:
            raise InputError("D_kf has only one class; the proxy needs both Harmful and Harmless pairs")
        base = make_pipeline(
            StandardScaler(),
            LogisticRegression(C=self.C, class_weight=self.class_weight, max_iter=2000),
        )
        n_min = int(np.bincount(y).min())
        cv = min(self.cv, n_min)
        if cv < 2:
            logger.warning("only %d pair(s) in the smaller class: the proxy is fitted without calibration", n_min)
            self.estimator_ = base.fit(X, y)
        else:
            self.estimator_ = CalibratedClassifierCV(base, method="sigmoid", cv=cv).fit(X, y)
        self.n_features_in_ = X.shape[1]
        self.harmless_rate_ = float(np.mean(y))
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:  # noqa: N803
        """Columns: [P(harmful), P(harmless)]."""
        if not hasattr(self, "estimator_"):
            raise ConfigError("ProxyFilter is not fitted; call fit(D_kf) or ProxyFilter.load(path)")
        X = np.asarray(X, dtype=np.float32)  # noqa: N806
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise InputError(f"expected {self.n_features_in_} features per row, got shape {X.shape}")
        proba = np.asarray(self.estimator_.predict_proba(X), dtype=float)
        if self.prior == "uniform":
            proba = to_uniform_prior(proba, self.harmless_rate_)
        return proba

    def predict(self, X: np.ndarray) -> np.ndarray:  # noqa: N803
        return (self.predict_proba(X)[:, 1] >= self.threshold).astype(int)

    # -------------------------------------------------------------- filter API
    def score_many(
        self, query: str, candidates: Sequence[Candidate], *, query_embedding: np.ndarray | None = None
    ) -> np.ndarray:
        if not candidates:
            return np.zeros(0)
        q = self._embed([query])[0] if query_embedding is None else np.asarray(query_embedding, dtype=np.float32)
        missing = [i for i, c in enumerate(candidates) if c.embedding is None]
        k = np.zeros((len(candidates), q.shape[0]), dtype=np.float32)
        for i, c in enumerate(candidates):
            if c.embedding is not None:
                k[i] = c.embedding
        if missing:
            k[missing] = self._embed([candidates[i].text for i in missing])
        feats = pair_features(q, k, [c.rank for c in candidates], self.max_rank)
        return self.predict_proba(feats)[:, 1]

    # -------------------------------------------------------------- persistence
    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.get_params()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProxyFilter:
        return cls(**{k: v for k, v in data.items() if k != "name"})

    def save(self, path: str | Path) -> Path:
        """Write ``proxy.skops`` (loads without unpickling) + ``proxy.json`` into the folder ``path``
        (atomically)."""
        from ragsieve.safe_models import save_estimator

        if not hasattr(self, "estimator_"):
            raise ConfigError("cannot save an unfitted ProxyFilter; call fit first")
        with atomic_directory(path) as tmp:
            save_estimator(self.estimator_, tmp / _MODEL_FILE)
            (tmp / _CONFIG_FILE).write_text(
                json.dumps(
                    {**self.to_dict(), "n_features_in": self.n_features_in_, "harmless_rate": self.harmless_rate_},
                    indent=2,
                ),
                encoding="utf-8",
            )
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> ProxyFilter:
        from ragsieve.safe_models import CALIBRATED, load_estimator, refuse_legacy

        p = Path(path)
        if not (p / _MODEL_FILE).is_file() and (p / _LEGACY_MODEL_FILE).is_file():
            raise refuse_legacy(p / _LEGACY_MODEL_FILE, _RETRAIN)
        if not (p / _MODEL_FILE).is_file() or not (p / _CONFIG_FILE).is_file():
            raise InputError(f"{p} is not a saved proxy filter; train one with `ragsieve filters train`")
        cfg = json.loads((p / _CONFIG_FILE).read_text(encoding="utf-8"))
        n = cfg.pop("n_features_in")
        # proxies saved before the prior option have no rate; their outputs are unchanged
        rate = cfg.pop("harmless_rate", 0.5)
        obj = cls.from_dict(cfg)
        obj.estimator_ = load_estimator(p / _MODEL_FILE, trusted=CALIBRATED, retrain=_RETRAIN)
        obj.n_features_in_ = int(n)
        obj.harmless_rate_ = float(rate)
        return obj
