"""The query-to-domain router: one scikit-learn estimator, five classifiers.

The classical classifiers of Ganesh et al. (Table 1) on TF-IDF features, plus one
embedding-feature variant in place of their fine-tuned DistilBERT:

==================== ========================================================================
``classifier``        features and model
==================== ========================================================================
``logreg``            word 1-2-gram TF-IDF -> LogisticRegression (multinomial)
``multinomial-nb``    word 1-2-gram TF-IDF -> MultinomialNB
``gaussian-nb``       TF-IDF reduced to ``svd_components`` dense dims by TruncatedSVD (LSA)
                      -> GaussianNB. A dense 50k-column TF-IDF matrix does not fit a Gaussian
                      model (and memory); the SVD keeps it small and the features continuous.
``linear-svc``        word 1-2-gram TF-IDF -> LinearSVC, calibrated with Platt scaling
                      (CalibratedClassifierCV, sigmoid, up to 3 folds) for probabilities
``embedding-logreg``  the bundled MiniLM sentence embedding -> LogisticRegression
==================== ========================================================================

Example:
    >>> router = DomainRouter(classifier="logreg").fit(
    ...     ["how do I sort a list in python", "is coffee bad for the heart",
    ...      "reverse a string python", "vitamin d and bone health"],
    ...     ["code", "health", "code", "health"])
    >>> router.predict(["python dictionary keys"])[0]
    'code'
"""

from __future__ import annotations

import json
import logging
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.errors import DamagedFileError, IndexStoreError, InputError, ModelError
from ragsieve.io import atomic_write_json, file_checksum_problem, sha256_file
from ragsieve.options import RouterClassifierName

logger = logging.getLogger(__name__)

# the estimators a router may use, declared once with the other option sets
ClassifierName = RouterClassifierName
CLASSIFIERS: tuple[ClassifierName, ...] = (
    "logreg",
    "multinomial-nb",
    "gaussian-nb",
    "linear-svc",
    "embedding-logreg",
)
MODEL_FILE = "router.skops"
# logreg, multinomial-nb and embedding-logreg are saved as arrays (no scikit-learn at load time)
ARRAY_FILE = "router.npz"
ARRAY_FORMAT = "ragsieve-domain-router/1"
LEGACY_MODEL_FILE = "router.joblib"
META_FILE = "router.json"
FORMAT_VERSION = 3
# the fix quoted in every load error
RETRAIN = "run `ragsieve router train INDEX_DIR` (or search with --route all)"
# router.json's own checksum, over its other fields (canonical JSON), and the model file's size and
# sha256: recorded at save, checked at load (once per process), so a same-size change to either
# file is refused. A router saved before they were recorded loads without the check.
META_CHECKSUM = "meta_sha256"
FILES_KEY = "files"
_ROLES = {ARRAY_FILE: "router model file (router.npz)", MODEL_FILE: "router model file (router.skops)",
          META_FILE: "router metadata file (router.json)"}


def _meta_digest(meta: dict[str, Any]) -> str:
    import hashlib

    body = {k: v for k, v in meta.items() if k != META_CHECKSUM}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def _router_damaged(folder: Path, name: str, what: str) -> DamagedFileError:
    role = _ROLES.get(name, f"router file ({name})")
    return DamagedFileError(
        f"the {role} at {folder / name} {what} (changed or corrupted on disk); {RETRAIN}", role=role, repair=RETRAIN
    )


def check_router_files(folder: Path, meta: dict[str, Any]) -> None:
    """Refuse a router whose files changed since it was saved (see :data:`META_CHECKSUM`)."""
    recorded = meta.get(META_CHECKSUM)
    if recorded is None:
        logger.info("the router in %s records no checksums (saved by an earlier ragsieve): loaded unchecked", folder)
        return
    if recorded != _meta_digest(meta):
        raise _router_damaged(folder, META_FILE, "does not match its recorded checksum")
    files = meta.get(FILES_KEY)
    if not isinstance(files, dict):
        raise _router_damaged(folder, META_FILE, "lists no model file checksum")
    for name, info in files.items():
        if name not in _ROLES or not isinstance(info, dict):
            raise _router_damaged(folder, META_FILE, f"lists an unknown router file {name!r}")
        try:
            problem = file_checksum_problem(folder / name, int(info["size"]), str(info["sha256"]))
        except (KeyError, TypeError, ValueError):
            raise _router_damaged(folder, META_FILE, f"has a corrupt checksum entry for {name}") from None
        if problem == "missing":
            raise _router_damaged(folder, name, "is missing")
        if problem is not None:
            raise _router_damaged(folder, name, f"does not match the {problem} recorded when the router was saved")


def _tfidf(max_features: int, ngram_max: int) -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(
        lowercase=True,
        ngram_range=(1, ngram_max),
        max_features=max_features,
        sublinear_tf=True,
        min_df=1,
        stop_words="english",
        dtype=np.float32,
    )


def _logreg(c: float, seed: int) -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, max_iter=2000, class_weight="balanced", random_state=seed)


def _linear_svc(c: float, seed: int, n_folds: int) -> Any:
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.svm import LinearSVC

    return CalibratedClassifierCV(
        LinearSVC(C=c, class_weight="balanced", random_state=seed), method="sigmoid", cv=n_folds
    )


def _build_model(name: ClassifierName, params: dict[str, Any], n_folds: int, n_features_max: int) -> Any:
    """The scikit-learn pipeline behind one classifier name (the typed mapping)."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.naive_bayes import GaussianNB, MultinomialNB
    from sklearn.pipeline import Pipeline

    tfidf = _tfidf(params["max_features"], params["ngram_max"])
    seed = params["random_state"]
    if name == "logreg":
        return Pipeline([("tfidf", tfidf), ("clf", _logreg(params["C"], seed))])
    if name == "multinomial-nb":
        return Pipeline([("tfidf", tfidf), ("clf", MultinomialNB(alpha=params["alpha"]))])
    if name == "gaussian-nb":
        n_comp = max(1, min(params["svd_components"], n_features_max - 1))
        return Pipeline(
            [
                ("tfidf", tfidf),
                ("svd", TruncatedSVD(n_components=n_comp, random_state=seed)),
                ("clf", GaussianNB()),
            ]
        )
    if name == "linear-svc":
        return Pipeline([("tfidf", tfidf), ("clf", _linear_svc(params["C"], seed, n_folds))])
    if name == "embedding-logreg":
        return _logreg(params["C"], seed)
    raise InputError(f"unknown router classifier {name!r}; choose one of {', '.join(CLASSIFIERS)}")


class DomainRouter:
    """Predicts the domain (index partition) of a query; a scikit-learn classifier.

    Hyperparameters are set in ``__init__`` and never changed there; ``fit`` learns
    ``model_`` and ``classes_`` (the domains, sorted). The ``embedding-logreg`` variant
    needs an embedder: pass one with :meth:`set_embedder` (never saved), or leave it unset
    and the bundled MiniLM is loaded on first use with ``embedder_config``.
    """

    def __init__(
        self,
        classifier: ClassifierName = "logreg",
        C: float = 4.0,  # noqa: N803 - scikit-learn's name
        alpha: float = 0.05,
        max_features: int = 50_000,
        ngram_max: int = 2,
        svd_components: int = 128,
        random_state: int = 0,
        embedder_config: dict[str, Any] | None = None,
    ) -> None:
        self.classifier = classifier
        self.C = C
        self.alpha = alpha
        self.max_features = max_features
        self.ngram_max = ngram_max
        self.svd_components = svd_components
        self.random_state = random_state
        self.embedder_config = embedder_config
        self._embedder: Any = None

    # -- scikit-learn protocol -------------------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {
            "classifier": self.classifier,
            "C": self.C,
            "alpha": self.alpha,
            "max_features": self.max_features,
            "ngram_max": self.ngram_max,
            "svd_components": self.svd_components,
            "random_state": self.random_state,
            "embedder_config": self.embedder_config,
        }

    def set_params(self, **params: Any) -> DomainRouter:
        for key, value in params.items():
            if key not in self.get_params():
                raise InputError(
                    f"DomainRouter has no parameter {key!r}; valid: {', '.join(self.get_params())}"
                )
            setattr(self, key, value)
        return self

    def to_dict(self) -> dict[str, Any]:
        return {"type": "DomainRouter", "params": self.get_params()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DomainRouter:
        return cls(**data.get("params", {}))

    def set_embedder(self, embedder: Any) -> DomainRouter:
        """Use an already warmed-up :class:`ragsieve.embed.Embedder` for the embedding variant."""
        self._embedder = embedder
        return self

    @property
    def uses_embeddings(self) -> bool:
        return self.classifier == "embedding-logreg"

    def _get_embedder(self) -> Any:
        if self._embedder is None:
            from ragsieve.config import EmbedderConfig
            from ragsieve.embed import load_embedder

            self._embedder = load_embedder(EmbedderConfig(**(self.embedder_config or {})))
            self._embedder.warm_up()
        return self._embedder

    def _features(self, texts: Sequence[str]) -> Any:
        if self.uses_embeddings:
            return self._get_embedder().embed(list(texts))
        return list(texts)

    def fit(self, texts: Sequence[str], domains: Sequence[str]) -> DomainRouter:
        """Learn the domains from example texts (questions, or chunk texts) and their labels."""
        if self.classifier not in CLASSIFIERS:
            raise InputError(
                f"unknown router classifier {self.classifier!r}; choose one of {', '.join(CLASSIFIERS)}"
            )
        texts, domains = list(texts), [str(d) for d in domains]
        if len(texts) != len(domains):
            raise InputError(f"got {len(texts)} texts but {len(domains)} domain labels; they must pair up")
        keep = [
            i for i, (t, d) in enumerate(zip(texts, domains, strict=True)) if t and t.strip() and d.strip()
        ]
        if len(keep) < len(texts):
            logger.warning(
                "router training: dropped %d examples with empty text or domain", len(texts) - len(keep)
            )
        texts = [texts[i] for i in keep]
        domains = [domains[i] for i in keep]
        classes, counts = np.unique(np.asarray(domains, dtype=object), return_counts=True)
        if len(classes) < 2:
            raise InputError(
                f"a router needs examples of at least two domains, got {len(classes)} "
                f"({', '.join(map(str, classes)) or 'none'}); ingest more than one domain or pass --route all"
            )
        n_folds = int(min(3, counts.min()))
        if self.classifier == "linear-svc" and n_folds < 2:
            small = [str(c) for c, n in zip(classes, counts, strict=True) if n < 2]
            raise InputError(
                f"the calibrated linear-svc router needs at least 2 examples per domain; too few for {small}"
            )
        model = _build_model(self.classifier, self.get_params(), n_folds, self.max_features)
        features = self._features(texts)
        if self.classifier == "gaussian-nb":
            # TruncatedSVD needs n_components < n_features; fit the vocabulary first to bound it.
            vocab = _tfidf(self.max_features, self.ngram_max).fit(texts).vocabulary_
            model.set_params(
                svd__n_components=max(1, min(self.svd_components, len(vocab) - 1, len(texts) - 1))
            )
        try:
            model.fit(features, domains)
        except ValueError as exc:
            if "empty vocabulary" in str(exc):
                raise InputError(
                    "router training texts contain no usable words (all stop words or empty); "
                    "give it real questions or chunks"
                ) from exc
            raise
        self.model_ = model
        try:
            self.arrays_ = _to_arrays(self.classifier, model)
        except ModelError as exc:  # a setting arrays do not cover: the skops file keeps it
            logger.info("router kept as a scikit-learn model (%s)", exc)
            self.arrays_ = None
        self.classes_ = np.asarray([str(c) for c in model.classes_], dtype=object)
        self.n_train_ = len(texts)
        return self

    arrays_: tuple[Any, Any] | None = None  # (TfidfArrays | None, LinearHead) when stored as arrays

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_") and self.arrays_ is None:
            raise InputError("this router is not trained yet; call fit() or run `ragsieve router train`")

    def known_terms(self, texts: Sequence[str]) -> np.ndarray:
        """How many vocabulary terms each text contains (0: the router cannot featurise it).

        The embedding variant featurises any non-empty text, so it counts words instead.
        """
        self._check_fitted()
        if self.uses_embeddings:
            return np.asarray([len(t.split()) for t in texts], dtype=np.int64)
        if self.arrays_ is not None:
            tfidf_arrays = self.arrays_[0]
            if tfidf_arrays is not None:
                return np.asarray([len(tfidf_arrays.transform_one(t)[0]) for t in texts], dtype=np.int64)
        tfidf = self.model_.named_steps["tfidf"]
        return np.asarray(tfidf.transform(list(texts)).getnnz(axis=1), dtype=np.int64)

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Rows of probabilities over ``classes_`` (columns in that order)."""
        self._check_fitted()
        if len(texts) == 0:
            return np.zeros((0, len(self.classes_)), dtype=np.float64)
        if self.arrays_ is not None:
            tfidf_arrays, head = self.arrays_
            if tfidf_arrays is None:  # embedding-logreg: dense features only
                emb = np.asarray(self._features(texts), dtype=np.float64)
                rows = [(np.zeros(0, dtype=np.int64), np.zeros(0)) for _ in texts]
                return head.predict_proba(rows, emb)
            return head.predict_proba(tfidf_arrays.transform(list(texts)))
        return np.asarray(self.model_.predict_proba(self._features(texts)), dtype=np.float64)

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        proba = self.predict_proba(texts)
        return self.classes_[proba.argmax(axis=1)] if len(proba) else np.zeros(0, dtype=object)

    def score(self, texts: Sequence[str], domains: Sequence[str]) -> float:
        return float(np.mean(self.predict(texts) == np.asarray(domains, dtype=object)))

    # -- persistence -----------------------------------------------------------------------
    def save(self, folder: str | Path, extra: dict[str, Any] | None = None) -> Path:
        """Write the fitted model and ``router.json`` (parameters, classes), each atomically.

        logreg, multinomial-nb and embedding-logreg are written as ``router.npz`` (arrays, read
        with numpy alone); gaussian-nb and linear-svc, which arrays do not cover, as
        ``router.skops``. The embedder is never saved; it is reattached on load."""

        self._check_fitted()
        folder = Path(folder)
        meta: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "router": self.to_dict(),
            "classes": [str(c) for c in self.classes_],
            "n_train": int(self.n_train_),
            **(extra or {}),
        }
        if self.arrays_ is not None:
            tfidf_arrays, head = self.arrays_
            header: dict[str, Any] = {"format": ARRAY_FORMAT, "head": head.header()}
            arrays = dict(head.arrays("head_"))
            if tfidf_arrays is not None:
                header["tfidf"] = tfidf_arrays.header()
                arrays.update(tfidf_arrays.arrays("tfidf_"))
            meta["arrays"] = header
            folder.mkdir(parents=True, exist_ok=True)
            _save_npz(folder / ARRAY_FILE, arrays)
            stale = MODEL_FILE
        else:
            from ragsieve.safe_models import save_estimator

            save_estimator(self.model_, folder / MODEL_FILE)
            stale = ARRAY_FILE
        written = ARRAY_FILE if stale == MODEL_FILE else MODEL_FILE
        meta.pop(META_CHECKSUM, None)  # an earlier save's, carried in by ``extra``
        model_path = folder / written
        meta[FILES_KEY] = {written: {"size": model_path.stat().st_size, "sha256": sha256_file(model_path)}}
        meta[META_CHECKSUM] = _meta_digest(meta)
        # The model file first, then router.json (which says which file to read), and only then
        # the other format's file: a process killed at any point, or a reader in between, finds
        # router.json naming a file that exists.
        atomic_write_json(folder / META_FILE, meta)
        (folder / stale).unlink(missing_ok=True)
        (folder / LEGACY_MODEL_FILE).unlink(missing_ok=True)
        return folder

    @classmethod
    def load(cls, folder: str | Path, embedder: Any = None) -> DomainRouter:
        """The router saved in ``folder``; nothing in it is unpickled. A ``router.npz`` loads with
        numpy alone; a ``router.skops`` (gaussian-nb, linear-svc, or any router saved by an
        earlier ragsieve) with skops (see :mod:`ragsieve.safe_models`)."""
        folder = Path(folder)
        try:
            meta_path = folder / META_FILE
            meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else None
        except (OSError, ValueError) as exc:
            raise IndexStoreError(f"router metadata {folder / META_FILE} is malformed ({exc}); {RETRAIN}") from exc
        if isinstance(meta, dict):
            check_router_files(folder, meta)
        if meta is not None and (folder / ARRAY_FILE).is_file() and "arrays" in meta:
            return cls._load_arrays(folder, meta, embedder)
        return cls._load_skops(folder, meta, embedder)

    @classmethod
    def _router_from_meta(cls, folder: Path, meta: Any) -> tuple[DomainRouter, list[str], int]:
        try:
            router = cls.from_dict(meta["router"])
            classes = [str(c) for c in meta["classes"]]
            n_train = int(meta["n_train"])
        except (ValueError, KeyError, TypeError) as exc:
            raise IndexStoreError(
                f"router metadata {folder / META_FILE} is missing or malformed ({exc}); {RETRAIN}"
            ) from exc
        return router, classes, n_train

    @classmethod
    def _load_arrays(cls, folder: Path, meta: dict[str, Any], embedder: Any) -> DomainRouter:
        from ragsieve.array_models import LinearHead, TfidfArrays

        router, classes, n_train = cls._router_from_meta(folder, meta)
        header = meta["arrays"]
        try:
            with np.load(folder / ARRAY_FILE, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
            if header.get("format") != ARRAY_FORMAT:
                raise ModelError(f"unknown router array format {header.get('format')!r}")
            head = LinearHead.from_parts(header["head"], arrays, "head_")
            tfidf_arrays = TfidfArrays.from_parts(header["tfidf"], arrays, "tfidf_") if "tfidf" in header else None
        except (OSError, ValueError, KeyError, TypeError, ModelError, zipfile.BadZipFile, EOFError) as exc:
            raise IndexStoreError(f"router arrays {folder / ARRAY_FILE} cannot be read ({exc}); {RETRAIN}") from exc
        if list(head.classes) != classes:
            raise IndexStoreError(f"{folder / ARRAY_FILE} and {folder / META_FILE} disagree on the domains; {RETRAIN}")
        router.arrays_ = (tfidf_arrays, head)
        router.classes_ = np.asarray(classes, dtype=object)
        router.n_train_ = n_train
        if embedder is not None:
            router.set_embedder(embedder)
        return router

    @classmethod
    def _load_skops(cls, folder: Path, meta: Any, embedder: Any) -> DomainRouter:
        from ragsieve.safe_models import CALIBRATED, load_estimator, refuse_legacy

        path = folder / MODEL_FILE
        if not path.is_file():
            if (folder / LEGACY_MODEL_FILE).is_file():
                raise IndexStoreError(str(refuse_legacy(folder / LEGACY_MODEL_FILE, RETRAIN)))
            raise IndexStoreError(f"no trained router in {folder}; {RETRAIN}")
        try:
            model = load_estimator(path, trusted=CALIBRATED, retrain=RETRAIN)
        except ModelError as exc:
            raise IndexStoreError(str(exc)) from exc
        if meta is None:
            raise IndexStoreError(f"router metadata {folder / META_FILE} is missing; {RETRAIN}")
        router, classes, n_train = cls._router_from_meta(folder, meta)
        if [str(c) for c in getattr(model, "classes_", [])] != classes:
            raise IndexStoreError(f"{path} and {folder / META_FILE} disagree on the domains; {RETRAIN}")
        router.model_ = model
        router.classes_ = np.asarray(classes, dtype=object)
        router.n_train_ = n_train
        if embedder is not None:
            router.set_embedder(embedder)
        return router

    def convert_to_arrays(self, folder: str | Path) -> bool:
        """Rewrite a router loaded from ``router.skops`` as ``router.npz`` when its classifier
        allows (so later loads skip skops and scikit-learn); returns whether it did."""
        if self.arrays_ is not None or not hasattr(self, "model_"):
            return False
        try:
            self.arrays_ = _to_arrays(self.classifier, self.model_)
        except ModelError:
            return False
        if self.arrays_ is None:
            return False
        folder = Path(folder)
        extra = {k: v for k, v in self.read_meta(folder).items() if k not in ("format_version", "router", "classes",
                                                                            "n_train", "arrays", FILES_KEY,
                                                                            META_CHECKSUM)}
        self.save(folder, extra=extra)
        return True

    @staticmethod
    def read_meta(folder: str | Path) -> dict[str, Any]:
        path = Path(folder) / META_FILE
        if not path.is_file():
            return {}
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data


def _to_arrays(classifier: str, model: Any) -> tuple[Any, Any] | None:
    """(TfidfArrays | None, LinearHead) for the classifiers arrays cover; None for the others."""
    from ragsieve.array_models import LinearHead, TfidfArrays

    if classifier == "embedding-logreg":
        return None, LinearHead.from_sklearn(model)
    if classifier in ("logreg", "multinomial-nb"):
        return TfidfArrays.from_sklearn(model.named_steps["tfidf"]), LinearHead.from_sklearn(model.named_steps["clf"])
    return None


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    from ragsieve.io import atomic_path

    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)  # type: ignore[arg-type]  # numpy stubs type allow_pickle


__all__ = ["ARRAY_FILE", "CLASSIFIERS", "ClassifierName", "DomainRouter"]
