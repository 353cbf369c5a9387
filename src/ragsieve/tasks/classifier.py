"""Task classifiers: route a request to information retrieval, text generation or general QA.

Two families:

* :class:`LLMTaskClassifier` – the paper's three-layer few-shot prompt (system instruction,
  examples per category, JSON output format). ``mode="json"`` asks for schema-constrained JSON
  (``LLM.generate_json``), retries once with the schema restated, then falls back to a logged
  default label. ``mode="logprob"`` never samples: it scores each label's JSON continuation by
  log-probability and applies contextual calibration.
* :class:`TfidfTaskClassifier` – a scikit-learn estimator (word + character TF-IDF, logistic
  regression) for fast, cheap routing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import threading
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np

from ragsieve.errors import InputError, LLMOutputError, ModelError
from ragsieve.llm.base import LLM, ChatMessage
from ragsieve.tasks.labels import TASK_LABELS, TaskLabel

logger = logging.getLogger(__name__)


class TaskPrediction(NamedTuple):
    label: TaskLabel
    proba: dict[str, float]
    method: str  # "llm-json" | "llm-logprob" | "tfidf"
    fallback: bool  # True when the default label was used because the model's output was unusable
    note: str  # what happened (retries, malformed output), empty when nothing unusual
    latency_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "proba": {k: round(v, 4) for k, v in self.proba.items()},
            "method": self.method,
            "fallback": self.fallback,
            "note": self.note,
            "latency_ms": round(self.latency_ms, 2),
        }


class TaskClassifier(Protocol):
    def classify(self, text: str) -> TaskPrediction: ...


# --------------------------------------------------------------------------- prompt
SYSTEM_INSTRUCTION = (
    "You classify a user's request into exactly one task type.\n"
    "- information_retrieval: the user wants specific facts, records or sources looked up in documents "
    "(reports, files, archives, statistics, details about a specific person, place or event).\n"
    "- text_generation: the user wants a new piece of writing produced (essay, email, story, poem, "
    "report, script, post).\n"
    "- general_qa: a common-knowledge question that can be answered directly without looking anything up.\n"
    "Answer with JSON only."
)

FEW_SHOT: dict[str, list[str]] = {
    "information_retrieval": [
        "What does the 2021 maintenance report say about the pump failures?",
        "Find the papers that measured soil carbon in Kenyan farms.",
    ],
    "text_generation": [
        "Write a short welcome email for new members of the chess club.",
        "Draft a two-paragraph blog post about recycling for teenagers.",
    ],
    "general_qa": [
        "How many legs does a spider have?",
        "What is the difference between a lake and a sea?",
    ],
}

TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "enum": list(TASK_LABELS)}},
    "required": ["task"],
}

CONTENT_FREE = "N/A"


def build_task_prompt(text: str, examples: dict[str, list[str]] | None = None) -> list[ChatMessage]:
    """The three-layer prompt: system instruction, examples per category, JSON output format."""
    ex = FEW_SHOT if examples is None else examples
    lines = ["Examples:"]
    for label, reqs in ex.items():
        for r in reqs:
            lines.append(f'Request: {r}\nOutput: {{"task": "{label}"}}')
    fmt = 'Output format: {"task": "<information_retrieval|text_generation|general_qa>"}'
    user = "\n".join(lines) + f"\n\n{fmt}\n\nRequest: {text}\nOutput:"
    return [ChatMessage(role="system", content=SYSTEM_INSTRUCTION), ChatMessage(role="user", content=user)]


def label_continuation(label: str) -> str:
    return f'{{"task": "{label}"}}'


def _as_label(value: object) -> TaskLabel:
    for lb in TASK_LABELS:
        if value == lb:
            return lb
    raise LLMOutputError(f"{value!r} is not a task label; expected one of {', '.join(TASK_LABELS)}")


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max()
    e = np.exp(z)
    return np.asarray(e / e.sum())


class LLMTaskClassifier:
    """Few-shot LLM task classifier.

    Example::

        from ragsieve.config import LLMConfig
        from ragsieve.llm import load_llm
        clf = LLMTaskClassifier(mode="logprob")
        clf.warm_up(load_llm(LLMConfig()))
        clf.classify("Write a poem about rain").label
    """

    def __init__(
        self,
        mode: Literal["json", "logprob"] = "logprob",
        default_label: TaskLabel = "information_retrieval",
        calibrate: bool = True,
        max_retries: int = 1,
        max_tokens: int = 24,
    ) -> None:
        self.mode = mode
        self.default_label = default_label
        self.calibrate = calibrate
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.llm: LLM | None = None
        self.calibration_: np.ndarray | None = None

    def warm_up(self, llm: LLM) -> None:
        self.llm = llm
        llm.warm_up()
        if self.mode == "logprob" and self.calibrate and self.calibration_ is None:
            self.calibration_ = self._label_logprobs(CONTENT_FREE)

    def _require_llm(self) -> LLM:
        if self.llm is None:
            raise ModelError("LLMTaskClassifier has no model; call warm_up(llm) before classify()")
        return self.llm

    def _label_logprobs(self, text: str) -> np.ndarray:
        llm = self._require_llm()
        scores = llm.continuation_logprobs(build_task_prompt(text), [label_continuation(lb) for lb in TASK_LABELS])
        return np.array([s.logprob for s in scores], dtype=np.float64)

    def predict_proba_text(self, text: str) -> dict[str, float]:
        """Label distribution from log-probabilities, contextually calibrated when enabled."""
        lp = self._label_logprobs(text)
        if self.calibration_ is not None:
            lp = lp - self.calibration_  # divide by p(label | content-free) in log space
        return dict(zip(TASK_LABELS, _softmax(lp).tolist(), strict=True))

    def classify(self, text: str) -> TaskPrediction:
        if not text.strip():
            raise InputError("cannot classify an empty request; pass the user's question or instruction")
        start = time.perf_counter()
        if self.mode == "logprob":
            proba = self.predict_proba_text(text)
            label = _as_label(max(proba, key=lambda k: proba[k]))
            return TaskPrediction(
                label,
                proba,
                "llm-logprob",
                False,
                "",
                (time.perf_counter() - start) * 1000.0,
            )
        return self._classify_json(text, start)

    def _classify_json(self, text: str, start: float) -> TaskPrediction:
        llm = self._require_llm()
        prompt: list[ChatMessage] = build_task_prompt(text)
        notes: list[str] = []
        for attempt in range(self.max_retries + 1):
            try:
                obj = llm.generate_json(prompt, TASK_SCHEMA, max_tokens=self.max_tokens)
            except LLMOutputError as exc:
                notes.append(f"attempt {attempt + 1}: malformed JSON ({exc})")
            else:
                label = obj.get("task") if isinstance(obj, dict) else None
                if label in TASK_LABELS:
                    proba: dict[str, float] = {lb: float(lb == label) for lb in TASK_LABELS}
                    return TaskPrediction(
                        _as_label(label),
                        proba,
                        "llm-json",
                        False,
                        "; ".join(notes),
                        (time.perf_counter() - start) * 1000.0,
                    )
                notes.append(f"attempt {attempt + 1}: unknown label {label!r}")
            # Retry with the schema restated explicitly.
            prompt = [
                *build_task_prompt(text)[:-1],
                ChatMessage(
                    role="user",
                    content=build_task_prompt(text)[-1]["content"]
                    + f"\nReply with exactly one JSON object whose 'task' is one of {list(TASK_LABELS)}.",
                ),
            ]
        logger.warning("task classifier fell back to %r for %r: %s", self.default_label, text[:80], "; ".join(notes))
        proba = {str(lb): float(lb == self.default_label) for lb in TASK_LABELS}
        return TaskPrediction(
            self.default_label,
            proba,
            "llm-json",
            True,
            "; ".join(notes) + f"; used default label {self.default_label}",
            (time.perf_counter() - start) * 1000.0,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "LLMTaskClassifier",
            "mode": self.mode,
            "default_label": self.default_label,
            "calibrate": self.calibrate,
            "max_retries": self.max_retries,
            "max_tokens": self.max_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMTaskClassifier:
        d = {k: v for k, v in data.items() if k != "type"}
        return cls(**d)


_NAME_TOKEN = re.compile(r"\b[A-Z][\w'’.-]*")


def name_shape_features(texts: Sequence[str]) -> np.ndarray:
    """Per text: how many capitalised words follow the first word (saturating at 3) and whether two
    capitalised words stand together. Named entities mark look-up requests about specific people,
    works and places, which word n-grams cannot see when the name itself was never in training."""
    out = np.zeros((len(texts), 2), dtype=np.float64)
    for i, text in enumerate(texts):
        words = text.split()[1:]
        caps = [bool(_NAME_TOKEN.match(w)) and w != "I" for w in words]
        out[i, 0] = min(sum(caps), 3) / 3.0
        out[i, 1] = float(any(a and b for a, b in zip(caps, caps[1:], strict=False)))
    return out


# the one function a saved TfidfTaskClassifier may reference (its FunctionTransformer)
_NAME_FEATURES = "ragsieve.tasks.classifier.name_shape_features"

# The bundled task router: fitted once on the bundled training split with the default
# hyperparameters and shipped as arrays, so no process trains it before its first question.
BUNDLED_RESOURCE = "task_router.npz"
WRITE_BUNDLED = "python -m ragsieve.tasks.classifier --write-bundled"
ARRAY_FORMAT = "ragsieve-task-router/1"


def _params_path(model_path: Path) -> Path:
    return model_path.with_name(model_path.name + ".json")


def bundled_resource_path() -> Path:
    """Where the bundled task router's arrays live (``ragsieve/resources/task_router.npz`` + ``.json``)."""
    from importlib import resources

    return Path(str(resources.files("ragsieve").joinpath("resources", BUNDLED_RESOURCE)))


def training_fingerprint(params: dict[str, Any], texts: Sequence[str], labels: Sequence[str]) -> str:
    """A hash of the hyperparameters and the exact training examples: equal fingerprints, equal fits."""
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode())
    for text, label in zip(texts, labels, strict=True):
        digest.update(b"\0" + text.encode() + b"\1" + label.encode())
    return digest.hexdigest()


class TfidfTaskClassifier:
    """Word + character TF-IDF features with a logistic-regression head (scikit-learn style).

    ``fit`` trains with scikit-learn and keeps the fitted model as arrays (vocabularies, idf,
    coefficients); prediction is pure numpy (:mod:`ragsieve.array_models`), the same
    probabilities to 1e-6. Fitting on the bundled training split with the default
    hyperparameters reuses the stored fit shipped with ragsieve (identical by construction: the
    fingerprint of parameters and examples must match), so a query process never trains.

    Example::

        clf = TfidfTaskClassifier.load_bundled()   # no scikit-learn import, no training
        clf.predict(["Write a haiku about tea"])

        from ragsieve.tasks.labels import load_task_requests
        train = load_task_requests("train")
        clf = TfidfTaskClassifier(C=2.0).fit([r.text for r in train], [r.label for r in train])
    """

    def __init__(
        self,
        C: float = 4.0,  # noqa: N803
        word_ngrams: tuple[int, int] = (1, 2),
        char_ngrams: tuple[int, int] = (2, 4),
        max_features: int = 50000,
        name_features: bool = True,
    ) -> None:
        self.C = C
        self.word_ngrams = word_ngrams
        self.char_ngrams = char_ngrams
        self.max_features = max_features
        self.name_features = name_features

    def _build(self) -> Any:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import FeatureUnion, make_pipeline
        from sklearn.preprocessing import FunctionTransformer

        extra = [("names", FunctionTransformer(name_shape_features))] if self.name_features else []
        feats = FeatureUnion(
            [
                *extra,
                (
                    "word",
                    TfidfVectorizer(
                        ngram_range=tuple(self.word_ngrams),
                        sublinear_tf=True,
                        lowercase=True,
                        max_features=self.max_features,
                    ),
                ),
                (
                    "char",
                    TfidfVectorizer(
                        analyzer="char_wb",
                        ngram_range=tuple(self.char_ngrams),
                        sublinear_tf=True,
                        max_features=self.max_features,
                    ),
                ),
            ]
        )
        return make_pipeline(feats, LogisticRegression(C=self.C, max_iter=2000))

    def _hyperparameters(self) -> dict[str, Any]:
        return {k: v for k, v in self.to_dict().items() if k != "type"}

    def fit(self, texts: Sequence[str], labels: Sequence[str]) -> TfidfTaskClassifier:
        bad = sorted({lb for lb in labels if lb not in TASK_LABELS})
        if bad:
            raise InputError(f"unknown task labels {bad}; use {', '.join(TASK_LABELS)}")
        if len(texts) != len(labels) or not texts:
            raise InputError("fit needs the same non-zero number of texts and labels")
        fingerprint = training_fingerprint(self._hyperparameters(), texts, labels)
        stored = _read_bundled_header()
        if stored is not None and stored.get("fingerprint") == fingerprint:
            # The stored fit was made from exactly these examples and hyperparameters.
            return self._set_from_arrays(*_load_bundled_arrays())
        return self.fit_sklearn(texts, labels)

    def fit_sklearn(self, texts: Sequence[str], labels: Sequence[str]) -> TfidfTaskClassifier:
        """Train with scikit-learn (never the stored fit) and keep the result as arrays."""
        from threadpoolctl import threadpool_limits

        # BLAS threads oversubscribe small fits badly (15 s instead of 0.2 s on a busy 2-core machine).
        with threadpool_limits(1):
            model = self._build().fit(list(texts), list(labels))
        self._set_from_sklearn(model)
        self.fingerprint_ = training_fingerprint(self._hyperparameters(), texts, labels)
        return self

    def _set_from_sklearn(self, model: Any) -> TfidfTaskClassifier:
        """Keep a fitted scikit-learn pipeline (FeatureUnion -> LogisticRegression) as arrays."""
        from ragsieve.array_models import LinearHead, TfidfArrays

        union, head = model.steps[0][1], model.steps[-1][1]
        named = dict(union.transformer_list)
        self.name_features = "names" in named
        self.vectorizers_ = [TfidfArrays.from_sklearn(named["word"]), TfidfArrays.from_sklearn(named["char"])]
        self.head_ = LinearHead.from_sklearn(head)
        self.classes_ = list(self.head_.classes)
        return self

    def _set_from_arrays(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> TfidfTaskClassifier:
        from ragsieve.array_models import LinearHead, TfidfArrays

        if header.get("format") != ARRAY_FORMAT:
            raise ModelError(f"task router arrays have format {header.get('format')!r}, not {ARRAY_FORMAT}; "
                             f"rewrite them with {WRITE_BUNDLED} or `ragsieve tasks train`")
        params = header.get("params", {})
        self.C = params.get("C", self.C)
        self.word_ngrams = tuple(params.get("word_ngrams", self.word_ngrams))
        self.char_ngrams = tuple(params.get("char_ngrams", self.char_ngrams))
        self.max_features = params.get("max_features", self.max_features)
        self.name_features = bool(params.get("name_features", self.name_features))
        self.vectorizers_ = [
            TfidfArrays.from_parts(header["word"], arrays, "word_"),
            TfidfArrays.from_parts(header["char"], arrays, "char_"),
        ]
        self.head_ = LinearHead.from_parts(header["head"], arrays, "head_")
        self.classes_ = list(self.head_.classes)
        self.fingerprint_ = str(header.get("fingerprint", ""))
        n = (2 if self.name_features else 0) + sum(v.n_features for v in self.vectorizers_)
        if self.head_.coef.shape[1] != n:
            raise ModelError(f"task router arrays disagree on the number of features ({self.head_.coef.shape[1]} "
                             f"coefficients, {n} features); rewrite them with `ragsieve tasks train`")
        return self

    def _arrays(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        self._check()
        word, char = self.vectorizers_
        header = {
            "format": ARRAY_FORMAT,
            "params": self._hyperparameters(),
            "fingerprint": getattr(self, "fingerprint_", ""),
            "word": word.header(),
            "char": char.header(),
            "head": self.head_.header(),
        }
        return header, {**word.arrays("word_"), **char.arrays("char_"), **self.head_.arrays("head_")}

    def _check(self) -> None:
        if not hasattr(self, "head_"):
            raise ModelError("TfidfTaskClassifier is not fitted; call fit(), load() or load_bundled() first")

    def _rows(self, texts: Sequence[str]) -> tuple[list[Any], np.ndarray | None]:
        """Sparse rows of the word and char blocks side by side, plus the dense name features."""
        word, char = self.vectorizers_
        off = word.n_features
        rows = []
        for text in texts:
            wc, wv = word.transform_one(text)
            cc, cv = char.transform_one(text)
            rows.append((np.concatenate([wc, cc + off]), np.concatenate([wv, cv])))
        dense = name_shape_features(texts) if self.name_features else None
        return rows, dense

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        self._check()
        rows, dense = self._rows(list(texts))
        return self.head_.predict_proba(rows, dense)

    def predict(self, texts: Sequence[str]) -> list[str]:
        proba = self.predict_proba(texts)
        return [self.classes_[int(i)] for i in proba.argmax(axis=1)]

    def classify(self, text: str) -> TaskPrediction:
        if not text.strip():
            raise InputError("cannot classify an empty request; pass the user's question or instruction")
        start = time.perf_counter()
        p = self.predict_proba([text])[0]
        proba = {c: float(v) for c, v in zip(self.classes_, p, strict=True)}
        label = _as_label(max(proba, key=lambda k: proba[k]))
        return TaskPrediction(
            label,
            proba,
            "tfidf",
            False,
            "",
            (time.perf_counter() - start) * 1000.0,
        )

    def save(self, path: str | Path) -> Path:
        """Write the fitted model to ``path`` (an ``.npz`` archive of arrays, conventionally
        ``task_router.npz``) and its header to ``path`` + ``.json``; loading never unpickles."""
        from ragsieve.array_models import save_arrays

        header, arrays = self._arrays()
        return save_arrays(Path(path), header, arrays)

    @classmethod
    def load(cls, path: str | Path) -> TfidfTaskClassifier:
        """A model written by :meth:`save`, or a skops file written by an earlier ragsieve (read
        with skops, once, and then kept as arrays)."""
        from ragsieve.array_models import load_arrays

        p = Path(path)
        retrain = f"run `ragsieve tasks train --out {p}`"
        if not p.is_file():
            raise InputError(f"task classifier file {p} does not exist; train one with `ragsieve tasks train`")
        if not _is_npz(p):
            return cls._load_skops(p, retrain)
        header, arrays = load_arrays(p, retrain)
        return cls()._set_from_arrays(header, arrays)

    @classmethod
    def _load_skops(cls, p: Path, retrain: str) -> TfidfTaskClassifier:
        from ragsieve.safe_models import load_estimator

        model = load_estimator(p, trusted=(_NAME_FEATURES,), retrain=retrain)
        try:
            params = json.loads(_params_path(p).read_text(encoding="utf-8"))
            obj = cls.from_dict(params)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelError(
                f"task classifier parameters {_params_path(p)} are missing or malformed; {retrain}"
            ) from exc
        return obj._set_from_sklearn(model)

    @classmethod
    def load_bundled(cls) -> TfidfTaskClassifier:
        """The task router shipped with ragsieve (fitted on the bundled training split)."""
        return cls()._set_from_arrays(*_load_bundled_arrays())

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "TfidfTaskClassifier",
            "C": self.C,
            "word_ngrams": list(self.word_ngrams),
            "char_ngrams": list(self.char_ngrams),
            "max_features": self.max_features,
            "name_features": self.name_features,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TfidfTaskClassifier:
        return cls(
            C=data["C"],
            word_ngrams=tuple(data["word_ngrams"]),
            char_ngrams=tuple(data["char_ngrams"]),
            max_features=data["max_features"],
            name_features=data.get("name_features", False),
        )


def _is_npz(path: Path) -> bool:
    """An arrays archive (every member a ``.npy``), as opposed to a skops zip or anything else."""
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    return bool(names) and all(n.endswith(".npy") for n in names)


_BUNDLED: tuple[dict[str, Any], dict[str, np.ndarray]] | None = None
_BUNDLED_LOCK = threading.Lock()


def _read_bundled_header() -> dict[str, Any] | None:
    from ragsieve.array_models import header_path

    path = header_path(bundled_resource_path())
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def _load_bundled_arrays() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The bundled arrays, read once per process (they are never modified)."""
    global _BUNDLED
    from ragsieve.array_models import load_arrays

    with _BUNDLED_LOCK:
        if _BUNDLED is None:
            path = bundled_resource_path()
            if not path.is_file():
                raise ModelError(f"the bundled task router {path} is missing; rebuild it with {WRITE_BUNDLED}")
            _BUNDLED = load_arrays(path, f"rebuild it with {WRITE_BUNDLED}")
        return _BUNDLED


def write_bundled(path: str | Path | None = None) -> Path:
    """Fit the default task router on the bundled training split with scikit-learn and write
    its arrays (the package resource by default). Run after changing the training data."""
    from ragsieve.tasks.labels import load_task_requests

    train = load_task_requests("train")
    clf = TfidfTaskClassifier().fit_sklearn([r.text for r in train], [r.label for r in train])
    return clf.save(path or bundled_resource_path())


def accuracy(pred: Sequence[str], gold: Sequence[str]) -> float:
    if not gold:
        return math.nan
    return sum(p == g for p, g in zip(pred, gold, strict=True)) / len(gold)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--write-bundled"]:
        sys.exit(f"usage: {WRITE_BUNDLED}")
    sys.stdout.write(f"{write_bundled()}\n")
