"""Every filter, and fusion, on a user's own task (labels + instruction + template), not only the presets."""

from __future__ import annotations

import numpy as np
import pytest
from filtering_fakes import FakeEmbedder, FakeLLM, FakeRetriever

from ragsieve.errors import InputError
from ragsieve.filtering import (
    Candidate,
    DirectFilter,
    EnsembleFilter,
    FilteredClassifier,
    ICLFilter,
    KfDataset,
    KfPair,
    custom_task,
    resolve_task,
)
from ragsieve.filtering.factory import FilteringConfig, make_filter
from ragsieve.filtering.scoring import scorer_for_task
from ragsieve.types import Trace

SPAM = {
    "name": "spam",
    "labels": ["spam", "ham"],
    "instruction": "Is this e-mail spam or ham?",
    "template": "E-mail: {text}\n{knowledge}Is it {options}?",
    "text_name": "E-mail",
    "goal": "deciding whether the e-mail is spam",
}


class SpamScorer:
    """p(spam) = 0.5 without knowledge; "good" knowledge raises it, "bad" lowers it."""

    labels = ["spam", "ham"]

    def predict_proba(self, llm: object, text: str, knowledge: list[str] | None = None) -> dict[str, float]:
        p = 0.5 + sum(0.3 if "good" in k else -0.3 if "bad" in k else 0.0 for k in knowledge or [])
        p = min(max(p, 0.05), 0.95)
        return {"spam": p, "ham": 1 - p}


def test_direct_filter_asks_about_the_custom_task_and_round_trips() -> None:
    llm = FakeLLM()
    f = DirectFilter(SPAM)
    f.warm_up(llm)
    p = f.score_many("Win a prize!", [Candidate("good facts"), Candidate("bad facts")])
    assert p[0] == pytest.approx(0.5) and p[1] < 0.5
    assert "harmless for deciding whether the e-mail is spam?" in llm.calls[0]
    assert "E-mail: Win a prize!" in llm.calls[0]
    saved = f.to_dict()
    assert saved["task"]["labels"] == ["spam", "ham"]
    again = DirectFilter.from_dict(saved)
    assert again.template == f.template and again.to_dict() == saved
    # A built-in task still saves as its name.
    assert DirectFilter("trec").to_dict()["task"] == "trec"


def test_icl_and_ensemble_filters_take_a_custom_template() -> None:
    task = custom_task(["urgent", "routine", "spam"], instruction="How urgent is this ticket?", text_name="Ticket")
    pairs = [KfPair("custom", f"q{i}", f"k{i}", i % 2 == 0, 1.0, "predicted") for i in range(6)]
    icl = ICLFilter(task, n_demos=2, seed=0).fit(KfDataset(pairs))
    llm = FakeLLM()
    icl.warm_up(llm)
    scores = icl.score_many("Server down", [Candidate("bad news")])
    assert scores.shape == (1,) and "Ticket: Server down" in llm.calls[-1]
    assert ICLFilter.from_dict(icl.to_dict()).template.labels == ["urgent", "routine", "spam"]

    class Unsure:
        name, threshold = "unsure", 0.5

        def score_many(self, q, cs, *, query_embedding=None):  # type: ignore[no-untyped-def]
            return np.full(len(cs), 0.5)

        def to_dict(self) -> dict:
            return {}

    ensemble = EnsembleFilter(Unsure(), icl, theta=0.8)
    assert ensemble.score_many("Server down", [Candidate("good")]).shape == (1,)
    assert ensemble.to_dict()["icl"]["task"]["instruction"] == "How urgent is this ticket?"


def test_factory_builds_a_filter_for_a_custom_task() -> None:
    f = make_filter(FilteringConfig(filter="direct", task=SPAM), FakeLLM())
    assert isinstance(f, DirectFilter) and f.template.labels == ["spam", "ham"]


def test_filtering_and_fusion_classify_with_custom_labels() -> None:
    llm = FakeLLM()
    flt = DirectFilter(SPAM)
    flt.warm_up(llm)
    clf = FilteredClassifier(
        llm,
        SpamScorer(),
        ["spam", "ham"],
        retriever=FakeRetriever(["a good fact", "a bad fact", "another good point", "bad news"]),
        embedder=FakeEmbedder(),
        knowledge_filter=flt,
        fusion=True,
        top_k=4,
    )
    trace = Trace("Win a prize!")
    pred = clf.predict("Win a prize!", trace=trace)
    assert set(pred.proba) == {"spam", "ham"} and pred.label == "spam"
    assert sum(pred.weights) == pytest.approx(1.0)
    assert [d.candidate.text for d in pred.decisions if d.keep] == ["a good fact", "another good point"]


def test_scorer_for_a_custom_task_uses_its_template_or_instruction() -> None:
    clf = scorer_for_task(SPAM)
    assert clf.labels == ["spam", "ham"]
    assert clf.build_prompt("Win a prize!").startswith("E-mail: Win a prize!")
    plain = scorer_for_task({"labels": ["yes", "no"], "instruction": "Is the claim {true}?"})
    prompt = plain.build_prompt("Water is wet.", ["Water is a liquid."])
    assert prompt.startswith("Is the claim {true}? Answer with one word (yes, no).")
    assert "Water is a liquid." in prompt
    assert scorer_for_task("sst-2").labels == ["negative", "positive"]


def test_bad_custom_tasks_say_what_to_fix() -> None:
    with pytest.raises(InputError, match="needs 'labels'"):
        resolve_task({"instruction": "Classify."})
    with pytest.raises(InputError, match="at least two distinct labels"):
        resolve_task({"labels": ["only"]})
    with pytest.raises(InputError, match=r"\{text\} field"):
        resolve_task({"labels": ["a", "b"], "template": "no text here"})
    with pytest.raises(InputError, match="unknown field"):
        resolve_task({"labels": ["a", "b"], "template": "{text} {oops}"})
    with pytest.raises(InputError, match="unknown field"):
        resolve_task({"labels": ["a", "b"], "colour": "red"})
    with pytest.raises(InputError, match="unknown task"):
        DirectFilter("not-a-task").template  # noqa: B018
