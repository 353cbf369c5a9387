"""Label distributions from LLM log-probabilities, with calibration.

A :class:`LabelClassifier` never parses sampled text. It renders one prompt per input
(instruction, the text, optional knowledge sentences, ``Answer:``), reads the
log-probability of each label's verbalizer as the first word of the assistant's reply,
and turns those scores into a distribution over the labels with a softmax.

Scoring:

- When every verbalizer starts with a distinct token (checked with the backend's tokenizer
  where it has one, else when every verbalizer is a single token), one
  :meth:`LLM.next_token_logprobs` pass scores all labels; for single-token verbalizers this
  equals the full continuation log-probability.
- Otherwise each verbalizer is scored with :meth:`LLM.continuation_logprobs`, aggregated by
  ``length_norm``: ``"mean"`` (default: mean token log-prob, so long verbalizers are not
  penalised for their length) or ``"sum"`` (the joint log-probability).

Calibration (zero-shot scores of a small model lean to one label):

- Contextual calibration (Zhao et al. 2021, "Calibrate Before Use"): :meth:`fit_calibration`
  averages p(label | content-free input) over ``content_free_inputs`` and divides it out:
  ``q(label) ∝ p(label) / p_cf(label)``, i.e. a log-bias ``-log p_cf``.
- :meth:`fit` learns the per-label log-bias from a few labelled examples (maximum likelihood
  of ``softmax(score + bias)``, a small L2 penalty, started from the contextual bias).

Prompt layout for prefix reuse: ``instruction + text`` come first and the varying
knowledge sentences last, just before ``Answer:``, so k knowledge variants of one text
share the longest token prefix and llama.cpp decodes only their tails
(:meth:`predict_proba_many`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from ragsieve.errors import InputError, ModelError
from ragsieve.llm.base import LLM, SupportsTokenIds

logger = logging.getLogger(__name__)

TaskPreset = Literal["sentiment", "sentiment-5", "question-category", "acceptability"]
# A ``template`` argument may name a preset's template, or "generic" for DEFAULT_TEMPLATE.
TemplateName = Literal["sentiment", "sentiment-5", "question-category", "acceptability", "generic"]
LengthNorm = Literal["mean", "sum"]
ScoringMethod = Literal["next-token", "continuation"]

DEFAULT_TEMPLATE = "Classify the text as one of: {options}.\n\nText: {text}\n{knowledge}Answer:"
KNOWLEDGE_HEADER = "Knowledge:\n"


class Preset(NamedTuple):
    labels: tuple[str, ...]
    verbalizers: dict[str, str]
    template: str


# Labels are the label names of the public data sets under shared/data (SST-2, MR, SST-5,
# TREC coarse, CoLA); verbalizers are the words the model is asked to answer with. Lower-case
# verbalizers scored better than capitalised ones with SmolLM2-135M on small fixed-seed test
# subsets (SST-2 n=100, TREC n=40; zero-shot, calibrated); this is a weak model, so expect
# near-chance zero-shot accuracy on the harder tasks and use ``fit`` on a few examples.
PRESETS: dict[TaskPreset, Preset] = {
    # SST-2 and MR
    "sentiment": Preset(
        labels=("negative", "positive"),
        verbalizers={"negative": "negative", "positive": "positive"},
        template=(
            "Is the sentiment of this movie review positive or negative?\n\nReview: {text}\n"
            "{knowledge}Answer with one word: {options}.\nAnswer:"
        ),
    ),
    # SST-5
    "sentiment-5": Preset(
        labels=("terrible", "bad", "neutral", "good", "great"),
        verbalizers={
            "terrible": "terrible",
            "bad": "bad",
            "neutral": "neutral",
            "good": "good",
            "great": "great",
        },
        template=(
            "How good does this movie review say the movie is?\n\nReview: {text}\n"
            "{knowledge}Answer with one word: {options}.\nAnswer:"
        ),
    ),
    # TREC coarse question categories
    "question-category": Preset(
        labels=("abbreviation", "entity", "description", "human", "location", "numeric"),
        verbalizers={
            "abbreviation": "abbreviation",
            "entity": "entity",
            "description": "description",
            "human": "person",
            "location": "location",
            "numeric": "number",
        },
        template=(
            "What kind of answer does this question ask for?\n\nQuestion: {text}\n"
            "{knowledge}Answer with one word: {options}.\nAnswer:"
        ),
    ),
    # CoLA grammatical acceptability
    "acceptability": Preset(
        labels=("unacceptable", "acceptable"),
        verbalizers={"unacceptable": "No", "acceptable": "Yes"},
        template=(
            "Is this sentence grammatically correct?\n\nSentence: {text}\n"
            "{knowledge}Answer with one word: {options}.\nAnswer:"
        ),
    ),
}


def softmax(x: np.ndarray) -> np.ndarray:
    z = np.asarray(x, dtype=np.float64)
    z = z - z.max()
    e = np.exp(z)
    return e / e.sum()


def format_knowledge(knowledge: Sequence[str] | None) -> str:
    """The knowledge block placed between the text and ``Answer:`` ("" when empty)."""
    items = [k.strip() for k in (knowledge or []) if k and k.strip()]
    if not items:
        return ""
    return KNOWLEDGE_HEADER + "".join(f"- {k}\n" for k in items)


def fit_log_bias(
    scores: np.ndarray, y: np.ndarray, init: np.ndarray, l2: float, center: np.ndarray | None = None
) -> np.ndarray:
    """Per-label log-bias ``b`` maximising ``sum_i log softmax(scores_i + b)[y_i] - l2/2 |b - center|^2``
    (a MAP estimate with a Gaussian prior at ``center``, zeros by default).

    ``scores``: (n, L) label log-scores; ``y``: (n,) label indices. Convex; solved with L-BFGS
    from ``init``. The bias is shift-invariant, so it is returned centred (mean 0).
    """
    from scipy.optimize import minimize

    n, n_labels = scores.shape
    onehot = np.zeros((n, n_labels))
    onehot[np.arange(n), y] = 1.0
    c = np.zeros(n_labels) if center is None else np.asarray(center, dtype=np.float64)

    def objective(b: np.ndarray) -> tuple[float, np.ndarray]:
        z = scores + b
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        d = b - c
        nll = -float((logp * onehot).sum()) + 0.5 * l2 * float(d @ d)
        grad = (np.exp(logp) - onehot).sum(axis=0) + l2 * d
        return nll, grad

    res = minimize(objective, init.astype(np.float64), jac=True, method="L-BFGS-B")
    b = np.asarray(res.x, dtype=np.float64)
    return b - b.mean()


class LabelClassifier:
    """A distribution over ``labels`` for a text, from an LLM's log-probabilities.

    Args:
        labels: the label names, in output order.
        verbalizers: label -> the word the model answers with (default: the label itself).
            Give them without a leading space: they follow the assistant prefix.
        template: a :data:`TemplateName` (a preset's template, whose verbalizers then
            default for the labels the preset knows; ``"generic"``: :data:`DEFAULT_TEMPLATE`),
            or a ``str.format`` template with ``{text}`` and optionally ``{knowledge}``
            (the knowledge block, "" when none) and ``{options}`` (the verbalizers joined by
            commas). Put ``{knowledge}`` after ``{text}`` so knowledge variants share a prefix.
        calibrate: apply contextual calibration; ``predict_proba`` fits it on first use when
            neither :meth:`fit_calibration` nor :meth:`fit` ran.
        content_free_inputs: the texts used for contextual calibration.
        length_norm: aggregation of multi-token verbalizer scores, ``"mean"`` or ``"sum"``.
        bias_l2: strength of :meth:`fit`'s Gaussian prior on the log-bias, centred on the
            contextual-calibration bias when ``calibrate`` is on (else on 0), so a few
            labelled examples adjust the calibration rather than replace it.

    Learned attributes: ``content_free_proba_`` (label -> p(label | content-free)),
    ``bias_`` (per-label log-bias added to the scores), ``scoring_`` (the method used).

    Example:
        >>> from ragsieve.config import LLMConfig
        >>> from ragsieve.llm import load_llm
        >>> llm = load_llm(LLMConfig(n_threads=1))  # doctest: +SKIP
        >>> clf = LabelClassifier.from_preset("sentiment")
        >>> clf.fit_calibration(llm)  # doctest: +SKIP
        >>> clf.predict_proba(llm, "a gorgeous, witty film")  # doctest: +SKIP
        {'negative': 0.21, 'positive': 0.79}
    """

    def __init__(
        self,
        labels: Sequence[str],
        verbalizers: dict[str, str] | None = None,
        template: str | None = None,
        calibrate: bool = True,
        content_free_inputs: Sequence[str] = ("N/A", "", "[MASK]"),
        length_norm: LengthNorm = "mean",
        bias_l2: float = 1.0,
    ) -> None:
        self.labels = list(labels)
        self.verbalizers = verbalizers
        self.template = template
        self.calibrate = calibrate
        self.content_free_inputs = tuple(content_free_inputs)
        self.length_norm = length_norm
        self.bias_l2 = bias_l2
        self._validate()

    @classmethod
    def from_preset(cls, name: TaskPreset, **kwargs: Any) -> LabelClassifier:
        """A classifier with the labels, verbalizers and template of a task preset."""
        if name not in PRESETS:
            raise InputError(f"unknown classifier preset {name!r}; use one of {sorted(PRESETS)}")
        preset = PRESETS[name]
        kwargs.setdefault("verbalizers", dict(preset.verbalizers))
        kwargs.setdefault("template", preset.template)
        return cls(list(preset.labels), **kwargs)

    # ------------------------------------------------------------------ checks
    def _validate(self) -> None:
        if len(self.labels) < 2:
            raise InputError(f"a classifier needs at least 2 labels, got {self.labels}")
        if len(set(self.labels)) != len(self.labels):
            raise InputError(f"labels must be distinct, got {self.labels}")
        verb = self.verbalizer_words()
        missing = [lab for lab in self.labels if not verb.get(lab, "").strip()]
        if missing:
            raise InputError(f"labels {missing} have no (non-empty) verbalizer; add them to verbalizers")
        if len(set(verb.values())) != len(self.labels):
            raise InputError(f"verbalizers must be distinct, got {verb}")
        template = self.template_text()
        if "{text}" not in template:
            raise InputError("the classifier template needs a {text} field")
        try:
            template.format(text="t", knowledge="", options="o")
        except (KeyError, IndexError, ValueError) as exc:
            raise InputError(
                f"the classifier template has an unknown field or bad braces ({exc}); "
                "use only {text}, {knowledge} and {options}, and double literal braces"
            ) from exc
        if self.length_norm not in ("mean", "sum"):
            raise InputError(f"length_norm must be 'mean' or 'sum', got {self.length_norm!r}")

    def _named_preset(self) -> Preset | None:
        if self.template is None:
            return None
        return PRESETS.get(self.template)  # type: ignore[call-overload]

    def verbalizer_words(self) -> dict[str, str]:
        preset = self._named_preset()
        defaults = preset.verbalizers if preset is not None else {}
        given = self.verbalizers or {}
        return {lab: given.get(lab, defaults.get(lab, lab)) for lab in self.labels}

    def template_text(self) -> str:
        if self.template is None or self.template == "generic":
            return DEFAULT_TEMPLATE
        preset = self._named_preset()
        return preset.template if preset is not None else self.template

    # ------------------------------------------------------------------ prompts
    def build_prompt(self, text: str, knowledge: Sequence[str] | None = None) -> str:
        """The user message for ``text`` with optional knowledge sentences."""
        words = self.verbalizer_words()
        return self.template_text().format(
            text=text.strip(),
            knowledge=format_knowledge(knowledge),
            options=", ".join(words[lab] for lab in self.labels),
        )

    # ------------------------------------------------------------------ scoring
    def scoring_method(self, llm: LLM) -> ScoringMethod:
        """``"next-token"`` when the verbalizers start with distinct tokens, else ``"continuation"``."""
        words = [self.verbalizer_words()[lab] for lab in self.labels]
        if isinstance(llm, SupportsTokenIds):
            firsts = []
            for w in words:
                ids = llm.tokenize_continuation(w)
                if not ids:
                    raise InputError(f"verbalizer {w!r} has no tokens")
                firsts.append(ids[0])
            return "next-token" if len(set(firsts)) == len(firsts) else "continuation"
        single = all(llm.count_tokens(w) == 1 for w in words)
        return "next-token" if single else "continuation"

    def label_scores(self, llm: LLM, text: str, knowledge: Sequence[str] | None = None) -> np.ndarray:
        """Raw (uncalibrated) label log-scores, in ``labels`` order."""
        prompt = self.build_prompt(text, knowledge)
        words = [self.verbalizer_words()[lab] for lab in self.labels]
        cache: dict[str, ScoringMethod] = self.__dict__.setdefault("_scoring_by_model", {})
        if llm.model_name not in cache:
            cache[llm.model_name] = self.scoring_method(llm)
        method = cache[llm.model_name]
        self.scoring_: ScoringMethod = method
        if method == "next-token":
            values = llm.next_token_logprobs(prompt, words)
        else:
            scores = llm.continuation_logprobs(prompt, words)
            values = [s.mean_logprob if self.length_norm == "mean" else s.logprob for s in scores]
        out = np.asarray(values, dtype=np.float64)
        if not np.all(np.isfinite(out)) and not np.any(np.isfinite(out)):
            raise ModelError(f"{llm.model_name} gave no finite log-probability to any label {self.labels}")
        return out

    def _bias(self, llm: LLM) -> np.ndarray:
        bias = getattr(self, "bias_", None)
        if bias is None and self.calibrate:
            logger.info("LabelClassifier: fitting contextual calibration on first use")
            self.fit_calibration(llm)
            bias = self.bias_
        return np.zeros(len(self.labels)) if bias is None else np.asarray(bias, dtype=np.float64)

    def _distribution(self, scores: np.ndarray, bias: np.ndarray) -> dict[str, float]:
        p = softmax(scores + bias)
        return {lab: float(v) for lab, v in zip(self.labels, p, strict=True)}

    # ------------------------------------------------------------------ fitting
    def fit_calibration(self, llm: LLM) -> LabelClassifier:
        """Contextual calibration: estimate p(label | content-free input), averaged over
        ``content_free_inputs``, and set ``bias_ = -log p_cf`` (centred)."""
        if not self.content_free_inputs:
            raise InputError("content_free_inputs is empty; pass e.g. ('N/A', '', '[MASK]')")
        probs = np.stack([softmax(self.label_scores(llm, cf)) for cf in self.content_free_inputs])
        p_cf = probs.mean(axis=0)
        self.content_free_proba_ = {lab: float(v) for lab, v in zip(self.labels, p_cf, strict=True)}
        bias = -np.log(np.clip(p_cf, 1e-12, None))
        self.bias_ = bias - bias.mean()
        return self

    def fit(
        self,
        llm: LLM,
        texts: Sequence[str],
        labels: Sequence[str],
        knowledge: Sequence[Sequence[str] | None] | None = None,
    ) -> LabelClassifier:
        """Learn the per-label log-bias from labelled examples (a few per label suffice).

        With ``calibrate`` on, the contextual-calibration bias is the prior mean and the start."""
        if len(texts) != len(labels) or not texts:
            raise InputError(f"fit needs as many labels as texts (got {len(texts)} texts, {len(labels)} labels)")
        unknown = sorted({y for y in labels if y not in self.labels})
        if unknown:
            raise InputError(f"fit got labels {unknown} not in the classifier's labels {self.labels}")
        if knowledge is not None and len(knowledge) != len(texts):
            raise InputError("knowledge must have one entry (a list or None) per text")
        if self.calibrate:
            self.fit_calibration(llm)
            init = np.asarray(self.bias_)
        else:
            init = np.zeros(len(self.labels))
        scores = np.stack(
            [self.label_scores(llm, t, None if knowledge is None else knowledge[i]) for i, t in enumerate(texts)]
        )
        y = np.array([self.labels.index(lab) for lab in labels])
        self.bias_ = fit_log_bias(scores, y, init, self.bias_l2, center=init)
        self.n_fit_examples_ = len(texts)
        return self

    # ------------------------------------------------------------------ prediction
    def predict_proba(self, llm: LLM, text: str, knowledge: Sequence[str] | None = None) -> dict[str, float]:
        """Calibrated label distribution (sums to 1) for ``text`` with optional knowledge."""
        bias = self._bias(llm)
        return self._distribution(self.label_scores(llm, text, knowledge), bias)

    def predict_proba_many(
        self, llm: LLM, text: str, knowledge_list: Sequence[Sequence[str] | None]
    ) -> list[dict[str, float]]:
        """Distributions for one text under each knowledge variant. The prompts share the
        instruction + text prefix, so with llama.cpp each variant decodes only its knowledge
        tail and ``Answer:``."""
        bias = self._bias(llm)
        return [self._distribution(self.label_scores(llm, text, k), bias) for k in knowledge_list]

    def predict(self, llm: LLM, text: str, knowledge: Sequence[str] | None = None) -> str:
        dist = self.predict_proba(llm, text, knowledge)
        return max(dist, key=lambda lab: dist[lab])

    # ------------------------------------------------------------------ persistence
    def get_params(self) -> dict[str, Any]:
        return {
            "labels": list(self.labels),
            "verbalizers": None if self.verbalizers is None else dict(self.verbalizers),
            "template": self.template,
            "calibrate": self.calibrate,
            "content_free_inputs": list(self.content_free_inputs),
            "length_norm": self.length_norm,
            "bias_l2": self.bias_l2,
        }

    def to_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        if getattr(self, "bias_", None) is not None:
            state["bias_"] = [float(v) for v in self.bias_]
        for name in ("content_free_proba_", "scoring_", "n_fit_examples_"):
            if hasattr(self, name):
                state[name] = getattr(self, name)
        return {
            "type": f"{type(self).__module__}.{type(self).__qualname__}",
            "init_parameters": self.get_params(),
            "state": state,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabelClassifier:
        clf = cls(**data.get("init_parameters", {}))
        state = data.get("state", {})
        if "bias_" in state:
            bias = np.asarray(state["bias_"], dtype=np.float64)
            if bias.shape != (len(clf.labels),) or not np.all(np.isfinite(bias)):
                raise InputError(f"saved bias_ {state['bias_']} does not fit labels {clf.labels}")
            clf.bias_ = bias
        for name in ("content_free_proba_", "scoring_", "n_fit_examples_"):
            if name in state:
                setattr(clf, name, state[name])
        return clf

    def save(self, path: str | Path) -> None:
        from ragsieve.io import atomic_write_json

        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> LabelClassifier:
        from ragsieve.io import read_json_file

        return cls.from_dict(read_json_file(path, "classifier file", "save one with LabelClassifier.save"))


def entropy(dist: dict[str, float]) -> float:
    """Shannon entropy (nats) of a label distribution."""
    return -sum(p * math.log(p) for p in dist.values() if p > 0)
