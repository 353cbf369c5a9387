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

import json
import logging
import math
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np

from ragsieve.errors import InputError, LLMOutputError, ModelError
from ragsieve.io import atomic_write_json
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


def _params_path(model_path: Path) -> Path:
    return model_path.with_name(model_path.name + ".json")


class TfidfTaskClassifier:
    """Word + character TF-IDF features with a logistic-regression head (scikit-learn style).

    Example::

        from ragsieve.tasks.labels import load_task_requests
        train = load_task_requests("train")
        clf = TfidfTaskClassifier().fit([r.text for r in train], [r.label for r in train])
        clf.predict(["Write a haiku about tea"])
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

    def fit(self, texts: Sequence[str], labels: Sequence[str]) -> TfidfTaskClassifier:
        bad = sorted({lb for lb in labels if lb not in TASK_LABELS})
        if bad:
            raise InputError(f"unknown task labels {bad}; use {', '.join(TASK_LABELS)}")
        if len(texts) != len(labels) or not texts:
            raise InputError("fit needs the same non-zero number of texts and labels")
        from threadpoolctl import threadpool_limits

        # BLAS threads oversubscribe small fits badly (15 s instead of 0.2 s on a busy 2-core machine).
        with threadpool_limits(1):
            self.model_ = self._build().fit(list(texts), list(labels))
        self.classes_ = list(self.model_.classes_)
        return self

    def _check(self) -> None:
        if not hasattr(self, "model_"):
            raise ModelError("TfidfTaskClassifier is not fitted; call fit() or load() first")

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        self._check()
        return np.asarray(self.model_.predict_proba(list(texts)))

    def predict(self, texts: Sequence[str]) -> list[str]:
        self._check()
        return [str(x) for x in self.model_.predict(list(texts))]

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
        """Write the fitted model to ``path`` (a skops file, conventionally ``.skops``) and its
        parameters to ``path`` + ``.json``; neither needs unpickling to load."""
        from ragsieve.safe_models import save_estimator

        self._check()
        path = Path(path)
        save_estimator(self.model_, path)
        atomic_write_json(_params_path(path), self.to_dict())
        return path

    @classmethod
    def load(cls, path: str | Path) -> TfidfTaskClassifier:
        from ragsieve.safe_models import load_estimator

        p = Path(path)
        retrain = f"run `ragsieve tasks train --out {p}`"
        if not p.is_file():
            raise InputError(f"task classifier file {p} does not exist; train one with `ragsieve tasks train`")
        model = load_estimator(p, trusted=(_NAME_FEATURES,), retrain=retrain)
        try:
            params = json.loads(_params_path(p).read_text(encoding="utf-8"))
            obj = cls.from_dict(params)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelError(
                f"task classifier parameters {_params_path(p)} are missing or malformed; {retrain}"
            ) from exc
        obj.model_ = model
        obj.classes_ = [str(c) for c in model.classes_]
        return obj

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


def accuracy(pred: Sequence[str], gold: Sequence[str]) -> float:
    if not gold:
        return math.nan
    return sum(p == g for p, g in zip(pred, gold, strict=True)) / len(gold)
