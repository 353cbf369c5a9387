"""Linear text models stored as plain arrays + JSON and run with numpy alone.

The query path must not import scikit-learn (its import, and skops' trusted-type walk over
every estimator, cost seconds to tens of seconds on a busy machine) nor train anything. Models
are therefore fitted with scikit-learn once (at build, ingest or training time) and exported
here as numpy arrays (``.npz``, read with ``allow_pickle=False``) and a JSON header; inference
re-implements exactly the pieces ragsieve uses:

* :class:`TfidfArrays` – ``TfidfVectorizer`` (``word`` and ``char_wb`` analyzers, n-gram ranges,
  lowercase, stop words, sublinear tf, l2 norm) over a fixed vocabulary and idf;
* :class:`LinearHead` – ``LogisticRegression`` (binary and multinomial) and ``MultinomialNB``
  probabilities from their coefficients.

Parity with the scikit-learn estimators (same predictions, probabilities within 1e-6) is
checked in ``tests/test_array_models.py``.

Example:
    >>> feats = TfidfArrays.from_sklearn(vectorizer)                    # doctest: +SKIP
    >>> rows = feats.transform(["what is graphene"])                    # doctest: +SKIP
    >>> head = LinearHead.from_sklearn(logreg)                          # doctest: +SKIP
    >>> head.predict_proba(rows, feats.n_features)                      # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragsieve.errors import ModelError

# One row of features: sorted column indices and their values (a sparse row without scipy).
SparseRow = tuple[np.ndarray, np.ndarray]

_WHITE_SPACES = re.compile(r"\s\s+")
DEFAULT_TOKEN_PATTERN = r"(?u)\b\w\w+\b"


@dataclass
class TfidfArrays:
    """A fitted ``TfidfVectorizer`` as arrays: vocabulary (terms by column), idf and its settings."""

    terms: list[str]
    idf: np.ndarray
    analyzer: Literal["word", "char_wb"] = "word"
    ngram_range: tuple[int, int] = (1, 1)
    lowercase: bool = True
    sublinear_tf: bool = False
    stop_words: frozenset[str] = frozenset()
    token_pattern: str = DEFAULT_TOKEN_PATTERN
    dtype: str = "float64"
    _index: dict[str, int] = field(default_factory=dict, repr=False)
    _token_re: re.Pattern[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if len(self.terms) != len(self.idf):
            raise ModelError(f"TF-IDF model has {len(self.terms)} terms but {len(self.idf)} idf values; re-export it")
        self._index = {t: i for i, t in enumerate(self.terms)}
        self._token_re = re.compile(self.token_pattern)

    @property
    def n_features(self) -> int:
        return len(self.terms)

    # -- analyzers (scikit-learn's CountVectorizer, same order of operations) -----------------
    def _preprocess(self, text: str) -> str:
        return text.lower() if self.lowercase else text

    def _word_ngrams(self, text: str) -> list[str]:
        pattern = self._token_re or re.compile(self.token_pattern)
        tokens = pattern.findall(self._preprocess(text))
        if self.stop_words:
            tokens = [w for w in tokens if w not in self.stop_words]
        lo, hi = self.ngram_range
        if hi == 1:
            return tokens
        original = tokens
        out = list(original) if lo == 1 else []
        lo = max(lo, 2)
        for n in range(lo, min(hi + 1, len(original) + 1)):
            for i in range(len(original) - n + 1):
                out.append(" ".join(original[i : i + n]))
        return out

    def _char_wb_ngrams(self, text: str) -> list[str]:
        text = _WHITE_SPACES.sub(" ", self._preprocess(text))
        lo, hi = self.ngram_range
        out: list[str] = []
        for w in text.split():
            w = " " + w + " "
            w_len = len(w)
            for n in range(lo, hi + 1):
                offset = 0
                out.append(w[offset : offset + n])
                while offset + n < w_len:
                    offset += 1
                    out.append(w[offset : offset + n])
                if offset == 0:  # a word shorter than n is counted once
                    break
        return out

    def analyze(self, text: str) -> list[str]:
        return self._char_wb_ngrams(text) if self.analyzer == "char_wb" else self._word_ngrams(text)

    def transform_one(self, text: str) -> SparseRow:
        """The TF-IDF row of ``text``: column indices (ascending) and l2-normalised values."""
        counts = Counter(i for i in map(self._index.get, self.analyze(text)) if i is not None)
        dtype = np.dtype(self.dtype)
        if not counts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=dtype)
        cols = np.fromiter(sorted(counts), dtype=np.int64, count=len(counts))
        tf = np.asarray([counts[int(c)] for c in cols], dtype=dtype)
        if self.sublinear_tf:
            tf = (np.log(tf) + 1).astype(dtype)
        vals = (tf * self.idf[cols].astype(dtype)).astype(dtype)
        norm = np.sqrt(np.einsum("i,i->", vals, vals))
        if norm > 0:
            vals = (vals / norm).astype(dtype)
        return cols, vals

    def transform(self, texts: Sequence[str]) -> list[SparseRow]:
        return [self.transform_one(t) for t in texts]

    # -- persistence ------------------------------------------------------------------------
    def header(self) -> dict[str, Any]:
        return {
            "analyzer": self.analyzer,
            "ngram_range": list(self.ngram_range),
            "lowercase": self.lowercase,
            "sublinear_tf": self.sublinear_tf,
            "stop_words": sorted(self.stop_words),
            "token_pattern": self.token_pattern,
            "dtype": self.dtype,
        }

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}terms": np.asarray(self.terms, dtype=np.str_), f"{prefix}idf": np.asarray(self.idf)}

    @classmethod
    def from_parts(cls, header: dict[str, Any], arrays: Any, prefix: str) -> TfidfArrays:
        try:
            return cls(
                terms=[str(t) for t in arrays[f"{prefix}terms"].tolist()],
                idf=np.asarray(arrays[f"{prefix}idf"]),
                analyzer=header["analyzer"],
                ngram_range=(int(header["ngram_range"][0]), int(header["ngram_range"][1])),
                lowercase=bool(header["lowercase"]),
                sublinear_tf=bool(header["sublinear_tf"]),
                stop_words=frozenset(header.get("stop_words") or ()),
                token_pattern=str(header.get("token_pattern", DEFAULT_TOKEN_PATTERN)),
                dtype=str(header.get("dtype", "float64")),
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ModelError(f"TF-IDF arrays {prefix!r} are incomplete ({exc}); re-export the model") from exc

    @classmethod
    def from_sklearn(cls, vectorizer: Any) -> TfidfArrays:
        """Export a fitted ``sklearn.feature_extraction.text.TfidfVectorizer``."""
        supported = (
            vectorizer.analyzer in ("word", "char_wb")
            and vectorizer.norm == "l2"
            and vectorizer.use_idf
            and vectorizer.strip_accents is None
            and vectorizer.preprocessor is None
            and vectorizer.tokenizer is None
            and not vectorizer.binary
        )
        if not supported:
            raise ModelError(
                "only word/char_wb TF-IDF with l2 norm, idf, no accent stripping and the default "
                "tokenizer can be stored as arrays; keep this model in its skops file"
            )
        vocab = vectorizer.vocabulary_
        terms = [""] * len(vocab)
        for term, col in vocab.items():
            terms[col] = term
        stop = vectorizer.get_stop_words() if vectorizer.analyzer == "word" else None
        return cls(
            terms=terms,
            idf=np.asarray(vectorizer.idf_),
            analyzer=vectorizer.analyzer,
            ngram_range=tuple(vectorizer.ngram_range),
            lowercase=bool(vectorizer.lowercase),
            sublinear_tf=bool(vectorizer.sublinear_tf),
            stop_words=frozenset(stop or ()),
            token_pattern=vectorizer.token_pattern or DEFAULT_TOKEN_PATTERN,
            dtype=np.dtype(vectorizer.dtype).name,
        )


HeadKind = Literal["logistic", "multinomial-nb"]


@dataclass
class LinearHead:
    """A linear classifier over feature rows: ``LogisticRegression`` or ``MultinomialNB``.

    ``coef`` is (n_classes or 1, n_features): logistic coefficients, or NB's ``feature_log_prob_``;
    ``intercept`` is the logistic intercept or NB's ``class_log_prior_``.
    """

    kind: HeadKind
    classes: list[str]
    coef: np.ndarray
    intercept: np.ndarray

    def decision(self, rows: Sequence[SparseRow], dense: np.ndarray | None = None) -> np.ndarray:
        """Scores per row (n_rows, coef rows); ``dense`` adds leading dense columns (n_rows, d)."""
        d = 0 if dense is None else dense.shape[1]
        out = np.empty((len(rows), self.coef.shape[0]), dtype=np.float64)
        for r, (cols, vals) in enumerate(rows):
            score = self.coef[:, d + cols] @ vals.astype(np.float64) if len(cols) else np.zeros(self.coef.shape[0])
            if dense is not None:
                score = score + self.coef[:, :d] @ dense[r]
            out[r] = score + self.intercept
        return out

    def predict_proba(self, rows: Sequence[SparseRow], dense: np.ndarray | None = None) -> np.ndarray:
        scores = self.decision(rows, dense)
        if self.kind == "logistic" and scores.shape[1] == 1:
            p = 1.0 / (1.0 + np.exp(-scores[:, 0]))
            return np.stack([1.0 - p, p], axis=1)
        return softmax_rows(scores)

    def header(self) -> dict[str, Any]:
        return {"kind": self.kind, "classes": list(self.classes)}

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}coef": np.asarray(self.coef), f"{prefix}intercept": np.asarray(self.intercept)}

    @classmethod
    def from_parts(cls, header: dict[str, Any], arrays: Any, prefix: str) -> LinearHead:
        try:
            head = cls(
                kind=header["kind"],
                classes=[str(c) for c in header["classes"]],
                coef=np.asarray(arrays[f"{prefix}coef"], dtype=np.float64),
                intercept=np.asarray(arrays[f"{prefix}intercept"], dtype=np.float64),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"linear head {prefix!r} is incomplete ({exc}); re-export the model") from exc
        if head.coef.ndim != 2 or head.intercept.shape != (head.coef.shape[0],):
            raise ModelError(f"linear head {prefix!r} has inconsistent shapes; re-export the model")
        return head

    @classmethod
    def from_sklearn(cls, estimator: Any) -> LinearHead:
        """Export a fitted ``LogisticRegression`` (lbfgs: multinomial for 3+ classes) or ``MultinomialNB``."""
        name = type(estimator).__name__
        classes = [str(c) for c in estimator.classes_]
        if name == "LogisticRegression":
            multi = getattr(estimator, "multi_class", "auto")
            if len(classes) > 2 and multi not in ("auto", "multinomial", "deprecated"):
                raise ModelError("one-vs-rest logistic regression cannot be stored as arrays; keep its skops file")
            return cls("logistic", classes, np.asarray(estimator.coef_, dtype=np.float64),
                       np.asarray(estimator.intercept_, dtype=np.float64))
        if name == "MultinomialNB":
            return cls("multinomial-nb", classes, np.asarray(estimator.feature_log_prob_, dtype=np.float64),
                       np.asarray(estimator.class_log_prior_, dtype=np.float64))
        raise ModelError(f"{name} cannot be stored as arrays; keep its skops file")


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    z = scores - scores.max(axis=1, keepdims=True)
    e = np.exp(z)
    return np.asarray(e / e.sum(axis=1, keepdims=True))


# -------------------------------------------------------------------------------- files
def save_arrays(path: str | Path, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> Path:
    """Write ``path`` (an ``.npz`` archive, compressed) and ``path`` + ``.json`` (the header), atomically."""
    from ragsieve.io import atomic_path, atomic_write_json

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)  # type: ignore[arg-type]  # numpy stubs type allow_pickle
    atomic_write_json(header_path(path), header)
    return path


def header_path(path: Path) -> Path:
    """The JSON header beside an arrays file: ``model.npz`` -> ``model.npz.json``."""
    return path.with_name(path.name + ".json")


def load_arrays(path: str | Path, retrain: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read a model written by :func:`save_arrays`; nothing is unpickled (``allow_pickle=False``)."""
    path = Path(path)
    try:
        header = json.loads(header_path(path).read_text(encoding="utf-8"))
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        raise ModelError(f"model arrays {path} are missing or damaged ({exc}); {retrain}") from exc
    if not isinstance(header, dict):
        raise ModelError(f"model header {header_path(path)} is not a JSON object; {retrain}")
    return header, arrays


__all__ = [
    "LinearHead",
    "SparseRow",
    "TfidfArrays",
    "load_arrays",
    "save_arrays",
    "softmax_rows",
]
