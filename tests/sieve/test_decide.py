"""The decide stage and its model: signals in, one confidence out; answer, caveat or abstain;
the draft is kept or withdrawn, never replaced; the threshold ``ragsieve calibrate`` writes is
the one it uses; the model is stored as arrays."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tests.sieve.test_trust_acceptance import FakeLLM, KeywordJudge, build_index

from ragsieve.config import validate_config
from ragsieve.decision import SIGNALS, DecisionModel, withdrawn_right_threshold
from ragsieve.errors import InputError, ModelError
from ragsieve.index import Index
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.verify import LexicalEmbeddingJudge

MOON = "Apollo 11 landed on the Moon on 20 July 1969, with Neil Armstrong and Buzz Aldrin aboard."
MOON_Q = "When did Apollo 11 land on the Moon?"


def support_model(threshold: float = 0.5) -> DecisionModel:
    """Right when the answer's sentences are supported, on one signal."""
    rows = [{"verify.support_mean": v} for v in (0.95, 0.9, 0.85, 0.8, 0.2, 0.15, 0.1, 0.05)]
    return DecisionModel(signals=("verify.support_mean",), c=100.0, threshold=threshold).fit(
        rows, [True, True, True, True, False, False, False, False]
    )


@pytest.fixture(scope="module")
def moon_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    return build_index(tmp_path_factory.mktemp("decide"), {"moon.md": MOON, "other.md": "Bread rises with yeast."})


def pipe(index: Index, reply: str, model: DecisionModel | None = None, **config: object) -> Pipeline:
    cfg = validate_config({"sieve": {"need": "always", "route": "all", "select": "top-k"}, **config})
    return Pipeline(cfg, index=index, llm=FakeLLM(lambda q, passages: reply), judge=KeywordJudge(relevant=("apollo",)),
                    claim_judge=LexicalEmbeddingJudge(embedding_weight=0.0), decision_model=model)  # fmt: skip


def test_the_model_is_an_estimator_stored_as_arrays(tmp_path: Path) -> None:
    model = support_model()
    assert model.fit([{"verify.support_mean": 1.0}, {"verify.support_mean": 0.0}], [True, False]) is model
    assert {"fill_", "coef_", "intercept_", "n_train_"} <= set(vars(model))
    path = model.save(tmp_path / "m.npz", data="synthetic")
    header = json.loads((tmp_path / "m.npz.json").read_text())
    assert header["format"] == "ragsieve-decision-model/1" and header["about"] == {"data": "synthetic"}
    with np.load(path, allow_pickle=False) as arrays:  # nothing to unpickle
        assert set(arrays.files) == {"fill", "coef", "intercept"}
    loaded = DecisionModel.load(path)
    rows = [{"verify.support_mean": 0.3}, {}, {"verify.support_mean": 0.9}]
    assert np.allclose(loaded.predict_proba(rows), model.predict_proba(rows))
    assert model.confidence({"verify.support_mean": 0.9}) > 0.5 > model.confidence({"verify.support_mean": 0.1})
    assert list(model.contributions({"verify.support_mean": 0.9})) == ["verify.support_mean"]
    # without a threshold it learns one by the stated rule; four right drafts are too few to bound
    # the share of right drafts withdrawn, so it withdraws none on its confidence, and says so
    rows = [{"verify.support_mean": v} for v in (0.95, 0.9, 0.85, 0.8, 0.2, 0.15, 0.1, 0.05)]
    labels = [True, True, True, True, False, False, False, False]
    learned = DecisionModel(signals=("verify.support_mean",), c=100.0).fit(rows, labels)
    assert learned.threshold_ == 0.0 and learned.threshold_rule_["rule"] == "none"
    assert learned.threshold_rule_["right_drafts"] == 4
    assert support_model().threshold_rule_ == {"rule": "given"}


def _noisy_rows(n: int, seed: int) -> tuple[list[dict[str, float]], list[bool]]:
    """Drafts whose one informative signal is noisy, and six signals of pure noise to overfit."""
    rng = np.random.default_rng(seed)
    right = rng.random(n) < 0.5
    rows = [
        {"verify.support_mean": float(np.clip(0.5 + (0.15 if ok else -0.15) + rng.normal(0, 0.2), 0, 1)),
         **{f"noise.{j}": float(rng.random()) for j in range(6)}}
        for ok in right
    ]  # fmt: skip
    return rows, [bool(x) for x in right]


def test_the_learned_threshold_follows_the_rule_on_out_of_fold_confidences(tmp_path: Path) -> None:
    signals = ("verify.support_mean", *(f"noise.{j}" for j in range(6)))
    rows, labels = _noisy_rows(400, 0)
    model = DecisionModel(signals=signals).fit(rows, labels)
    how = model.threshold_rule_
    n_right = sum(labels)
    assert how["rule"] == "upper bound" and how["right_drafts"] == n_right
    assert how["confidences"] == "out-of-fold (5 folds)" and how["bound"] <= 0.05
    # the threshold is one of the right drafts' out-of-fold confidences, with the recorded number below it
    conf, folds = model._out_of_fold(rows, np.asarray(labels))
    right_conf = conf[np.asarray(labels)]
    assert folds == 5 and model.threshold_ == pytest.approx(
        float(np.sort(right_conf)[how["withdrawn_right"]]), abs=1e-6
    )
    assert int((right_conf < model.threshold_).sum()) <= how["withdrawn_right"]
    # on new drafts from the same distribution, at most 5% of the right ones are withdrawn
    fresh, fresh_labels = _noisy_rows(4000, 1)
    fresh_right = [r for r, ok in zip(fresh, fresh_labels, strict=True) if ok]
    withdrawn = float(np.mean(model.predict_proba(fresh_right)[:, 1] < model.threshold_))
    assert 0.0 < withdrawn <= 0.05
    # the rule travels in the header
    loaded = DecisionModel.load(model.save(tmp_path / "m.npz"))
    assert loaded.threshold_ == model.threshold_ and loaded.threshold_rule_ == how
    assert (loaded.delta, loaded.folds) == (0.05, 5)


def test_the_threshold_rule_bounds_the_share_of_right_drafts_withdrawn() -> None:
    from scipy import stats

    # the bound rule: the largest k whose upper bound on k/n is at most 5%
    for n in (59, 100, 300):
        t, how = withdrawn_right_threshold(np.linspace(0.01, 0.99, n))
        k = how["withdrawn_right"]
        assert how["rule"] == "upper bound" and how["bound"] <= 0.05
        assert stats.beta.ppf(0.95, k + 2, n - k - 1) > 0.05  # one more withdrawn breaks the bound
        assert t == pytest.approx(np.linspace(0.01, 0.99, n)[k], abs=1e-6)
    # too few right drafts for a bound: the expected share; fewer still: no threshold
    assert withdrawn_right_threshold(np.linspace(0.01, 0.99, 58))[1]["rule"] == "expected"
    t, how = withdrawn_right_threshold([0.3, 0.2, 0.9, *[0.5] * 16])  # 19 right drafts, unsorted
    assert (t, how["rule"], how["withdrawn_right"], how["bound"]) == (0.2, "expected", 0, 0.05)
    assert withdrawn_right_threshold([0.5] * 18) == (
        0.0,
        {"right_drafts": 18, "max_withdrawn_right": 0.05, "delta": 0.05, "rule": "none", "withdrawn_right": 0},
    )
    # the guarantee, simulated: right drafts' confidences uniform on [0, 1], so the share of new
    # right drafts withdrawn is the threshold itself
    rng = np.random.default_rng(0)
    shares = np.array([withdrawn_right_threshold(rng.random(200))[0] for _ in range(2000)])
    assert np.mean(shares > 0.05) <= 0.05 + 0.01  # at most delta, up to simulation noise
    shares = np.array([withdrawn_right_threshold(rng.random(30))[0] for _ in range(4000)])
    assert abs(np.mean(shares) - 1 / 31) < 0.003  # the expected share, (k + 1) / (n + 1)


def test_bad_training_data_and_damaged_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="both kinds"):
        DecisionModel().fit([{"judge.best": 0.5}, {"judge.best": 0.6}], [True, True])
    with pytest.raises(InputError, match="one label per row"):
        DecisionModel().fit([{"judge.best": 0.5}], [True, False])
    with pytest.raises(ModelError, match="not fitted"):
        DecisionModel().confidence({})
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    (tmp_path / "bad.npz.json").write_text("{}")
    with pytest.raises(ModelError, match="retrain it"):
        DecisionModel.load(tmp_path / "bad.npz")


def test_the_bundled_model_names_its_training_split() -> None:
    model = DecisionModel.default()
    # signals it was trained without (declared after it, or left out of its features then) are
    # missing from its header; it does not weigh them, and says which
    assert set(model.signals) <= set(SIGNALS) and model.n_train_ > 0
    assert set(model.unweighed()) == set(SIGNALS) - set(model.signals)
    assert {"poison.all_dropped", "verify.contradiction", "reader.answer_score"} <= set(model.unweighed())
    assert "squad2" in model.about_["data"].lower() or "SQuAD" in model.about_["data"]
    assert model.about_["split"].startswith("calibration part of ragsieve.eval.fair.split_indices")
    # its default threshold was chosen by the stated rule on the training drafts, and says how
    assert model.threshold_rule_["rule"] in {"upper bound", "expected", "none"}
    assert model.threshold_rule_["right_drafts"] == model.about_["right"]
    assert model.threshold_rule_["confidences"].startswith("out-of-fold")


def test_a_supported_draft_is_answered_as_written(moon_index: Index) -> None:
    reply = "Apollo 11 landed on the Moon on 20 July 1969 [1]."
    ans = pipe(moon_index, reply, support_model()).ask(MOON_Q)
    assert not ans.abstained and ans.text == reply
    decided = ans.trace.stage("decide")[-1]
    assert decided["decision"] == "answer" and decided["draft"] == reply and ans.confidence == decided["confidence"]
    # every check's signals are in the record, plain RAG's own among them
    assert {"retrieval.top_score", "answer.token_prob", "judge.best", "verify.support_mean"} <= set(decided["signals"])
    assert all(0.0 <= v <= 1.0 for v in decided["signals"].values())


def test_an_unsupported_draft_is_withdrawn_by_the_decision_not_by_a_veto(moon_index: Index) -> None:
    reply = "Apollo 11 landed on the Moon in 1975 [1]."  # the evidence says 1969
    # without the default contradiction veto, which would withdraw this draft itself
    ans = pipe(moon_index, reply, support_model(), decide={"vetoes": []}).ask(MOON_Q)
    assert ans.abstained and ans.abstain_reason.startswith("decide: confidence")
    assert "says 20 July 1969, not 1975" in ans.abstain_reason  # the contradiction is the withdrawal's reason
    assert [e["check"] for e in ans.trace.stage("abstain")] == ["decide"]
    assert any(e.get("withdraw") for e in ans.trace.stage("verify"))  # verify asked, the decision decided
    # as a veto (decide.vetoes) the verify stage stops the run itself
    vetoed = pipe(moon_index, reply, support_model(), decide={"vetoes": ["unsupported", "responsive"]}).ask(MOON_Q)
    assert vetoed.abstained and vetoed.trace.stage("abstain")[0]["check"] == "verify"
    assert not vetoed.trace.stage("decide")


def test_a_veto_may_name_one_way_of_not_answering(moon_index: Index) -> None:
    reply = "The passages state it [1]."  # the question asks for a date; the reply gives none
    ans = pipe(moon_index, reply, support_model(), decide={"threshold": 0.0}).ask(MOON_Q)
    decided = ans.trace.stage("decide")[-1]
    # the way it fails is a signal of its own, the others read 0
    assert decided["signals"]["verify.wrong_kind"] == 1.0 and decided["signals"]["verify.restated_question"] == 0.0
    assert any(e.get("withdraw") == "responsive.wrong_kind" for e in ans.trace.stage("verify"))
    vetoed = pipe(moon_index, reply, support_model(), decide={"vetoes": ["responsive.wrong_kind"]}).ask(MOON_Q)
    assert vetoed.abstained and vetoed.trace.stage("abstain")[0]["check"] == "verify"
    other = pipe(moon_index, reply, support_model(), decide={"vetoes": ["responsive.restated_question"],
                                                             "threshold": 0.0}).ask(MOON_Q)  # fmt: skip
    assert not other.abstained and other.trace.stage("decide")


def test_a_withdrawal_the_confidence_overrules_is_answered_with_a_caveat(moon_index: Index) -> None:
    reply = "Apollo 11 landed on the Moon in 1975 [1]."
    ans = pipe(moon_index, reply, support_model(threshold=0.0), decide={"threshold": 0.0, "vetoes": []}).ask(MOON_Q)
    assert not ans.abstained and ans.text == reply  # kept as written, never replaced
    decided = ans.trace.stage("decide")[-1]
    assert decided["decision"] == "caveat" and decided["caveat"].startswith("not fully confirmed")


def test_the_calibrated_threshold_is_the_decisions_threshold(moon_index: Index) -> None:
    reply = "Apollo 11 landed on the Moon on 20 July 1969 [1]."
    c = pipe(moon_index, reply, support_model()).ask(MOON_Q).confidence
    assert c is not None
    above = pipe(moon_index, reply, support_model(), calibration={"abstain_below": min(1.0, c + 0.01)}).ask(MOON_Q)
    assert above.abstained and above.trace.stage("decide")[-1]["threshold"] == pytest.approx(min(1.0, c + 0.01))
    at = pipe(moon_index, reply, support_model(), calibration={"abstain_below": c}).ask(MOON_Q)
    assert not at.abstained


def test_observe_mode_records_and_never_withdraws(moon_index: Index) -> None:
    reply = "Apollo 11 landed on the Moon in 1975 [1]."
    ans = pipe(moon_index, reply, support_model(), decide={"mode": "observe"}).ask(MOON_Q)
    assert not ans.abstained and ans.text == reply
    decided = ans.trace.stage("decide")[-1]
    assert decided["mode"] == "observe" and decided["withdrawal"].startswith("verify:")
