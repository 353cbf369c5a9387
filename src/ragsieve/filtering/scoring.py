"""Label distributions for a :class:`~ragsieve.filtering.tasks.TaskTemplate`.

:class:`TemplateLabelScorer` renders the task's classification prompt (instruction and
text first, knowledge last, so the backend's KV prefix reuse applies across knowledge
pieces), reads the next-token log-probabilities of the verbalizers' first tokens
(``LLM.next_token_logprobs``: one forward pass per prompt) and applies contextual
calibration: divide by p(label | content-free text "N/A") and renormalise.

It implements the :class:`~ragsieve.filtering.annotate.LabelScorer` protocol, as does
``ragsieve.generate.LabelClassifier``; the filtering stage accepts either.

Example:
    >>> from ragsieve.filtering.tasks import get_task
    >>> scorer = TemplateLabelScorer("sst-2")
    >>> scorer.fit_calibration(llm)  # doctest: +SKIP
    >>> scorer.predict_proba(llm, "a gripping film .", ["Cinema is an art form."])  # doctest: +SKIP
    {'negative': 0.31, 'positive': 0.69}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ragsieve.errors import InputError
from ragsieve.llm.base import LLM

from .tasks import TaskTemplate, get_task

CONTENT_FREE_TEXT = "N/A"


def softmax(logprobs: Sequence[float]) -> np.ndarray:
    x = np.asarray(logprobs, dtype=float)
    e = np.exp(x - x.max())
    return e / e.sum()


class TemplateLabelScorer:
    """Calibrated label distribution from next-token log-probabilities of the verbalizers."""

    def __init__(self, task: str | TaskTemplate = "sst-2", calibrate: bool = True) -> None:
        self.task = task if isinstance(task, str) else task.name
        self._template = task if isinstance(task, TaskTemplate) else None
        self.calibrate = calibrate

    @property
    def template(self) -> TaskTemplate:
        return self._template or get_task(self.task)

    @property
    def labels(self) -> list[str]:
        return self.template.labels

    def _check_verbalizers(self, llm: LLM) -> None:
        tokenize = getattr(llm, "tokenize_continuation", None)
        if tokenize is None:
            return
        firsts = [tokenize(self.template.verbalizers[label])[0] for label in self.labels]
        if len(set(firsts)) != len(firsts):
            raise InputError(
                f"verbalizers {self.template.verbalizers} share a first token; "
                "choose words that start differently"
            )

    def raw_proba(self, llm: LLM, text: str, knowledge: list[str] | None = None) -> np.ndarray:
        """Uncalibrated label distribution (softmax over the verbalizers' first tokens)."""
        t = self.template
        lp = llm.next_token_logprobs(
            t.classify_prompt(text, knowledge), [t.verbalizers[lab] for lab in t.labels]
        )
        return softmax(lp)

    def fit_calibration(self, llm: LLM) -> TemplateLabelScorer:
        """Measure p(label | content-free text) (contextual calibration)."""
        self._check_verbalizers(llm)
        self.cf_ = self.raw_proba(llm, CONTENT_FREE_TEXT)
        return self

    def calibrated(self, raw: np.ndarray) -> np.ndarray:
        if not self.calibrate:
            return raw
        cf = getattr(self, "cf_", None)
        if cf is None:
            raise InputError("call fit_calibration(llm) before predicting, or pass calibrate=False")
        q = raw / np.maximum(cf, 1e-9)
        return q / q.sum()

    def predict_proba(self, llm: LLM, text: str, knowledge: list[str] | None = None) -> dict[str, float]:
        p = self.calibrated(self.raw_proba(llm, text, knowledge))
        return {label: float(x) for label, x in zip(self.labels, p, strict=True)}

    def predict_proba_many(
        self, llm: LLM, text: str, knowledge_each: Sequence[list[str] | None]
    ) -> list[dict[str, float]]:
        """One distribution per knowledge list; consecutive calls share the instruction+text prefix."""
        return [self.predict_proba(llm, text, k) for k in knowledge_each]

    def to_dict(self) -> dict[str, Any]:
        cf = getattr(self, "cf_", None)
        return {"task": self.task, "calibrate": self.calibrate, "cf": None if cf is None else cf.tolist()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TemplateLabelScorer:
        obj = cls(task=data["task"], calibrate=data.get("calibrate", True))
        if data.get("cf") is not None:
            obj.cf_ = np.asarray(data["cf"], dtype=float)
        return obj
