"""LabelClassifier: prompts, scoring choice, calibration, bias fitting, persistence."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ragsieve.errors import InputError
from ragsieve.generate.classify import (
    PRESETS,
    LabelClassifier,
    entropy,
    fit_log_bias,
    format_knowledge,
    softmax,
)
from ragsieve.llm.base import LLM, ContinuationScore, Generation, Prompt


class FakeLLM:
    """Word-level fake: each word is a token. The log-score of a candidate word is
    ``skew[word] + 2 * (#cue words for it in the prompt)``, log-normalised over a fixed
    vocabulary, so zero-shot scores lean to the skewed word (as small models do)."""

    def __init__(self, skew: dict[str, float], cues: dict[str, Sequence[str]], vocab_extra: int = 5) -> None:
        self.skew = skew
        self.cues = cues
        self.vocab_extra = vocab_extra
        self.prompts: list[str] = []
        self.calls = {"next": 0, "cont": 0}

    @property
    def model_name(self) -> str:
        return "fake"

    def warm_up(self) -> None:
        pass

    def tokenize_continuation(self, text: str) -> list[int]:
        return [hash(w) % 10_000 for w in text.split()]

    def _word_logits(self, prompt: str) -> dict[str, float]:
        logits = dict(self.skew)
        for word, cue_words in self.cues.items():
            logits[word] = logits.get(word, 0.0) + 2.0 * sum(prompt.count(c) for c in cue_words)
        return logits

    def _logprob(self, prompt: str, word: str) -> float:
        logits = self._word_logits(prompt)
        z = np.array(list(logits.values()) + [0.0] * self.vocab_extra)
        lse = float(np.log(np.exp(z - z.max()).sum()) + z.max())
        return logits.get(word, 0.0) - lse

    def next_token_logprobs(self, prompt: Prompt, candidates: Sequence[str]) -> list[float]:
        assert isinstance(prompt, str)
        self.prompts.append(prompt)
        self.calls["next"] += 1
        return [self._logprob(prompt, c.split()[0]) for c in candidates]

    def continuation_logprobs(self, prompt: Prompt, continuations: Sequence[str]) -> list[ContinuationScore]:
        assert isinstance(prompt, str)
        self.prompts.append(prompt)
        self.calls["cont"] += 1
        out = []
        for c in continuations:
            words = c.split()
            out.append(ContinuationScore(sum(self._logprob(prompt, w) for w in words), len(words)))
        return out

    def generate(self, prompt: Prompt, **kw: Any) -> Generation:
        raise AssertionError("label scoring must not sample text")

    def generate_json(self, prompt: Prompt, schema: dict[str, Any], **kw: Any) -> dict[str, Any]:
        raise AssertionError("label scoring must not sample text")

    def perplexity(self, prompt: Prompt, answer: str) -> float:
        return 1.0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def to_dict(self) -> dict[str, Any]:
        return {}


def sentiment_fake() -> FakeLLM:
    # leans to "positive" by 3 nats; "great"/"awful" are cues
    return FakeLLM(
        skew={"positive": 3.0, "negative": 0.0}, cues={"positive": ["great"], "negative": ["awful"]}
    )


def clf_sentiment(**kw: Any) -> LabelClassifier:
    return LabelClassifier(["negative", "positive"], **kw)


def test_fake_is_an_llm():
    assert isinstance(sentiment_fake(), LLM)


def test_distribution_sums_to_one_and_uses_next_token():
    llm = sentiment_fake()
    dist = clf_sentiment(calibrate=False).predict_proba(llm, "an awful film")
    assert list(dist) == ["negative", "positive"]
    assert math.isclose(sum(dist.values()), 1.0, rel_tol=1e-12)
    assert llm.calls == {"next": 1, "cont": 0}


def test_calibration_moves_skewed_distribution_the_right_way():
    llm = sentiment_fake()
    raw = clf_sentiment(calibrate=False)
    cal = clf_sentiment().fit_calibration(llm)
    assert cal.content_free_proba_["positive"] > 0.9  # the skew, measured on content-free inputs
    for text in ["an awful film", "a film", "a great film"]:
        p_raw = raw.predict_proba(llm, text)["positive"]
        p_cal = cal.predict_proba(llm, text)["positive"]
        assert p_cal < p_raw  # the favoured label loses mass, always
    # uncalibrated, the awful film is called positive; calibrated, negative
    assert raw.predict(llm, "an awful film") == "positive"
    assert cal.predict(llm, "an awful film") == "negative"
    assert cal.predict(llm, "a great film") == "positive"
    # the content-free input itself becomes uniform under its own calibration
    single = clf_sentiment(content_free_inputs=("N/A",)).fit_calibration(llm)
    np.testing.assert_allclose(list(single.predict_proba(llm, "N/A").values()), [0.5, 0.5], atol=1e-12)


def test_calibrate_true_fits_lazily_on_first_use():
    llm = sentiment_fake()
    clf = clf_sentiment()
    assert not hasattr(clf, "bias_")
    clf.predict_proba(llm, "a film")
    assert hasattr(clf, "bias_") and clf.bias_[1] < clf.bias_[0]


def test_fit_learns_bias_from_labelled_examples():
    llm = FakeLLM(
        skew={"positive": 3.0, "negative": 0.0}, cues={"positive": ["great"], "negative": ["awful"]}
    )
    texts = ["awful"] * 6 + ["great"] * 6 + ["awful awful great"] * 2
    labels = ["negative"] * 6 + ["positive"] * 6 + ["negative"] * 2
    clf = clf_sentiment(calibrate=False).fit(llm, texts, labels)
    assert clf.n_fit_examples_ == len(texts)
    acc = np.mean([clf.predict(llm, t) == y for t, y in zip(texts, labels, strict=True)])
    raw_acc = np.mean(
        [clf_sentiment(calibrate=False).predict(llm, t) == y for t, y in zip(texts, labels, strict=True)]
    )
    assert acc == 1.0 and raw_acc < 0.6
    assert clf.bias_[1] < clf.bias_[0]
    with pytest.raises(InputError, match="not in the classifier's labels"):
        clf.fit(llm, ["x"], ["neutral"])
    with pytest.raises(InputError, match="as many labels"):
        clf.fit(llm, ["x", "y"], ["negative"])


def test_fit_log_bias_matches_brute_force_grid():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(40, 2)) + np.array([0.0, 1.5])
    y = (rng.random(40) < 0.5).astype(int)
    b = fit_log_bias(scores, y, np.zeros(2), l2=0.0)

    grid = np.linspace(-6, 6, 24001)
    z = scores[None, :, :] + np.stack([-grid / 2, grid / 2], axis=1)[:, None, :]  # (grid, n, 2)
    logp = z - np.log(np.exp(z).sum(axis=2, keepdims=True))
    nll = -logp[:, np.arange(len(y)), y].sum(axis=1)
    best = grid[np.argmin(nll)]
    assert math.isclose(b[1] - b[0], best, abs_tol=1e-3)
    assert math.isclose(b.sum(), 0.0, abs_tol=1e-12)
    # a strong prior keeps the bias at its centre; a weak one leaves the data's optimum
    center = np.array([1.0, -1.0])
    strong = fit_log_bias(scores, y, center, l2=1e6, center=center)
    np.testing.assert_allclose(strong, center, atol=1e-3)
    weak = fit_log_bias(scores, y, center, l2=1e-9, center=center)
    assert math.isclose(weak[1] - weak[0], best, abs_tol=1e-3)


def test_shared_first_token_uses_continuation_with_mean_or_sum():
    llm = FakeLLM(skew={"very": 1.0, "good": 0.5, "bad": 0.0}, cues={})
    labels = ["vgood", "vbad", "good"]
    verb = {"vgood": "very good", "vbad": "very bad", "good": "good"}
    mean = LabelClassifier(labels, verb, calibrate=False)
    summ = LabelClassifier(labels, verb, calibrate=False, length_norm="sum")
    assert mean.scoring_method(llm) == "continuation"
    s_mean = mean.label_scores(llm, "x")
    s_sum = summ.label_scores(llm, "x")
    assert llm.calls["next"] == 0 and llm.calls["cont"] == 2
    np.testing.assert_allclose(s_sum, s_mean * np.array([2, 2, 1]))
    assert s_mean[0] > s_mean[1]  # "very good" beats "very bad" on the second token


def test_prompt_layout_shares_prefix_across_knowledge_variants():
    clf = LabelClassifier.from_preset("sentiment", calibrate=False)
    a = clf.build_prompt("a film", ["fact one."])
    b = clf.build_prompt("a film", ["fact two.", "fact three."])
    c = clf.build_prompt("a film")
    assert "Knowledge:" not in c and a.endswith("Answer:") and c.endswith("Answer:")
    assert a.index("a film") < a.index("fact one.") < a.index("Answer:")
    common = len(_common_prefix(a, b))
    assert common >= a.index("Knowledge:")  # instruction + text shared
    llm = sentiment_fake()
    many = clf.predict_proba_many(llm, "a film", [["fact one."], None, ["great fact"]])
    assert many[1] == clf.predict_proba(llm, "a film")
    assert many[2]["positive"] > many[0]["positive"]
    assert format_knowledge(["  ", ""]) == ""


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"labels": ["only"]}, "at least 2"),
        ({"labels": ["a", "a"]}, "distinct"),
        ({"labels": ["a", "b"], "verbalizers": {"a": "x", "b": "x"}}, "verbalizers must be distinct"),
        ({"labels": ["a", "b"], "verbalizers": {"a": ""}}, "no \\(non-empty\\) verbalizer"),
        ({"labels": ["a", "b"], "template": "no text field"}, "\\{text\\}"),
        ({"labels": ["a", "b"], "template": "{text} {bogus}"}, "unknown field"),
    ],
)
def test_bad_configuration_is_input_error(kwargs, match):
    with pytest.raises(InputError, match=match):
        LabelClassifier(**kwargs)


def test_presets_cover_the_dataset_label_names():
    expected = {
        "sentiment": {"negative", "positive"},
        "sentiment-5": {"terrible", "bad", "neutral", "good", "great"},
        "question-category": {"abbreviation", "entity", "description", "human", "location", "numeric"},
        "acceptability": {"acceptable", "unacceptable"},
    }
    for name, labels in expected.items():
        clf = LabelClassifier.from_preset(name)  # type: ignore[arg-type]
        assert set(clf.labels) == labels
        prompt = clf.build_prompt("Some text.", ["k"])
        assert "Some text." in prompt and prompt.endswith("Answer:")
    assert set(PRESETS) == set(expected)
    by_name = LabelClassifier(["negative", "positive"], template="sentiment")
    assert by_name.template_text() == PRESETS["sentiment"].template
    assert by_name.build_prompt("x") == LabelClassifier.from_preset("sentiment").build_prompt("x")
    named = LabelClassifier(["human", "other"], template="question-category")
    assert named.verbalizer_words() == {"human": "person", "other": "other"}
    generic = LabelClassifier(["a", "b"], template="generic")
    assert generic.build_prompt("x") == LabelClassifier(["a", "b"]).build_prompt("x")
    with pytest.raises(InputError, match="unknown classifier preset"):
        LabelClassifier.from_preset("nope")  # type: ignore[arg-type]


def test_persistence_round_trip(tmp_path):
    llm = sentiment_fake()
    clf = LabelClassifier.from_preset("sentiment").fit_calibration(llm)
    path = tmp_path / "clf.json"
    clf.save(path)
    again = LabelClassifier.load(path)
    assert again.to_dict() == clf.to_dict()
    assert again.predict_proba(llm, "a film") == clf.predict_proba(llm, "a film")
    with pytest.raises(InputError, match="does not exist"):
        LabelClassifier.load(tmp_path / "missing.json")


def test_math_helpers():
    np.testing.assert_allclose(softmax(np.array([0.0, math.log(3.0)])), [0.25, 0.75])
    assert math.isclose(entropy({"a": 0.5, "b": 0.5}), math.log(2))


# --------------------------------------------------------------------------- real model
@pytest.mark.slow
def test_real_model_distributions_and_calibration(llm):
    clf = LabelClassifier.from_preset("sentiment")
    raw = LabelClassifier.from_preset("sentiment", calibrate=False)
    assert clf.scoring_method(llm) == "next-token"
    clf.fit_calibration(llm)
    favoured = max(clf.content_free_proba_, key=lambda k: clf.content_free_proba_[k])
    text = "a gorgeous, witty, seductive movie."
    knowledge_list = [None, ["The film won several awards."], ["Critics called the film dull."]]
    many = clf.predict_proba_many(llm, text, knowledge_list)
    for dist, k in zip(many, knowledge_list, strict=True):
        assert math.isclose(sum(dist.values()), 1.0, rel_tol=1e-9)
        single = clf.predict_proba(llm, text, k)
        for lab in dist:
            assert math.isclose(dist[lab], single[lab], abs_tol=1e-6)
        assert dist[favoured] <= raw.predict_proba(llm, text, k)[favoured] + 1e-12


@pytest.mark.slow
def test_real_model_multi_token_verbalizers(llm):
    clf = LabelClassifier(
        ["vpos", "vneg"], {"vpos": "very positive", "vneg": "very negative"}, calibrate=False
    )
    assert clf.scoring_method(llm) == "continuation"
    dist = clf.predict_proba(llm, "a wonderful film")
    assert math.isclose(sum(dist.values()), 1.0, rel_tol=1e-9)
