"""``eval``'s fair comparison: baseline confidences from real retrieval scores and known log-probs
(fake LLM), the best baseline chosen on the calibration part, the sieve against it, independent
faithfulness, the sieve's signals and the held-out calibration report; then ``ragsieve eval`` itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.helpers import HashEmbedder, copy_corpus

from ragsieve.config import PipelineConfig
from ragsieve.eval.baselines import BaselineScorer
from ragsieve.eval.data import QAItem
from ragsieve.eval.fair import OLD_BASELINE_LABEL, fair_report, split_indices
from ragsieve.eval.selective import aurc
from ragsieve.index import Index
from ragsieve.llm.base import ContinuationScore, Generation

MOON = "astronomy/moon.txt:0"
RIGHT = "The Moon orbits Earth once every 27.3 days, they say"  # 10 words: mean log-prob -0.35
WRONG = "Mars"  # 1 word: mean log-prob -1.25


class LogprobLLM:
    """Mean token log-probability -0.25 - 1/words: long answers score higher; records nothing else."""

    model_name = "fake-logprob"

    def __init__(self, reply: str = RIGHT) -> None:
        self.reply = reply
        self.scored = 0

    def warm_up(self) -> None:
        pass

    def generate(self, prompt: Any, **_: Any) -> Generation:
        return Generation(self.reply, 50, 10, "stop")

    def continuation_logprobs(self, prompt: Any, continuations: list[str]) -> list[ContinuationScore]:
        self.scored += len(continuations)
        return [ContinuationScore(-0.25 * len(c.split()) - 1.0, len(c.split())) for c in continuations]

    def next_token_logprobs(self, prompt: Any, candidates: list[str]) -> list[float]:
        return [-0.1 if c == "Yes" else -2.4 for c in candidates]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("fair")
    return Index.build(copy_corpus(root), root / "idx", embedder=HashEmbedder())


def synthetic(n: int = 80, seed: int = 0) -> tuple[list[QAItem], dict[str, list[dict[str, Any]]]]:
    """Answerable Moon questions; plain RAG is right on a random 60% (right answers are long, so the
    log-probability baseline ranks them first); the sieve's confidence is noisy."""
    rng = np.random.default_rng(seed)
    items = [QAItem(str(i), f"How often does the Moon orbit, question {i}?", ["27.3 days"]) for i in range(n)]
    base = {"cited_ids": [MOON], "evidence_ids": [MOON], "llm_calls": 1, "prompt_tokens": 1,
            "completion_tokens": 1, "seconds": 0.1}  # fmt: skip
    records: dict[str, list[dict[str, Any]]] = {"sieve": [], "plain": [], "no-retrieval": []}
    for item in items:
        right = bool(rng.uniform() < 0.6)
        text = RIGHT if right else WRONG
        records["plain"].append({**base, "question": item.question, "answer": text, "abstained": False,
                                 "confidence": None})  # fmt: skip
        records["no-retrieval"].append({**base, "question": item.question, "answer": WRONG, "abstained": False,
                                        "confidence": None, "cited_ids": [], "evidence_ids": []})  # fmt: skip
        conf = float(np.clip((0.7 if right else 0.4) + rng.normal(0, 0.2), 0, 1))
        records["sieve"].append({**base, "question": item.question, "answer": text, "abstained": False,
                                 "confidence": conf, "signals": {"support": conf, "judge": 0.5}})  # fmt: skip
    return items, records


def test_fair_report_on_known_log_probabilities(index: Index) -> None:
    items, records = synthetic()
    llm = LogprobLLM()
    scorer = BaselineScorer(PipelineConfig(pipeline="plain", index_dir="unused"), index=index, llm=llm)
    report = fair_report(items, records, scorer=scorer, n_splits=40, n_boot=100)
    cal, test = split_indices(len(items))
    assert report["split"]["calibration"] == len(cal) and report["split"]["test"] == len(test)
    assert set(report["baselines"]) == {f"{s}+{b}" for s in ("plain", "no-retrieval")
                                        for b in ("retrieval", "logprob")} | {"plain+combined"}  # fmt: skip
    # the log-probabilities come from the LLM: plain's separate right from wrong perfectly
    o = np.array([records["plain"][i]["answer"] == RIGHT for i in test])
    perfect = aurc(list(o), list(np.where(o, 1.0, 0.0)))
    assert report["baselines"]["plain+logprob"]["aurc"] == pytest.approx(perfect, abs=1e-4)
    assert report["best_baseline"] in {"plain+logprob", "plain+combined"}
    assert llm.scored >= 3 * len(items) - len(items)  # plain, no retrieval and the sieve were scored
    # the sieve (same answers, a noisy confidence) cannot beat a perfect ranking at its coverage
    vs = report["vs_best_baseline"]["sieve"]
    assert vs["baseline"] == report["best_baseline"] and vs["coverage"] == 1.0
    assert vs["difference"] == pytest.approx(0.0, abs=1e-9)  # everything answered: equal accuracy
    assert vs["aurc"] >= report["baselines"][report["best_baseline"]]["aurc"]
    # independent faithfulness: every value of the right answer is in the cited Moon passage, "Mars" is not
    faith = report["faithfulness"]["independent"]["plain"]
    share_right = float(np.mean([r["answer"] == RIGHT for r in records["plain"]]))
    assert faith["faithful"]["n"] == len(items) and faith["faithful"]["share"] == pytest.approx(share_right, abs=1e-4)
    assert faith["cited_has_gold"]["share"] == 1.0  # the passage holds "27.3 days" whatever was answered
    assert report["faithfulness"]["independent"]["no-retrieval"]["faithful"]["share"] == 0.0  # cites nothing
    assert report["faithfulness"]["llm_judge"] is None
    # signals of the sieve: its own support signal and the log-probability one
    assert {"confidence", "support", "logprob", "retrieval"} <= set(report["signals"])
    assert report["signals"]["logprob"]["aurc"] == pytest.approx(perfect, abs=1e-4)
    assert report["combiner"]["feature_names"]
    cal_report = report["calibration"]
    assert cal_report["n_calibration"] == len(cal) and cal_report["simulation"]["n_splits"] == 40


def test_where_abstentions_fall_at_the_sieves_coverage(index: Index) -> None:
    items, records = synthetic(40)
    # every other question becomes unanswerable: the sieve abstains on exactly those, plain answers all
    for i in range(0, len(items), 2):
        items[i] = QAItem(items[i].id, items[i].question, [], answerable=False)
        records["sieve"][i] = {**records["sieve"][i], "answer": "I can't answer.", "abstained": True,
                               "confidence": 0.0, "signals": {}}  # fmt: skip
    scorer = BaselineScorer(PipelineConfig(pipeline="plain", index_dir="unused"), index=index, llm=LogprobLLM())
    report = fair_report(items, records, scorer=scorer, n_splits=0, n_boot=50)
    _, test = split_indices(len(items))
    where = report["vs_best_baseline"]["sieve"]["abstention_at_coverage"]
    assert where["sieve"] == {"unanswerable": 1.0, "answerable": 0.0}
    assert where["unanswerable_n"] + where["answerable_n"] == len(test)
    baseline = where[report["best_baseline"]]
    # the baseline abstains on as many questions as the sieve, split between the two kinds
    n_un, n_ans = where["unanswerable_n"], where["answerable_n"]
    assert baseline["unanswerable"] * n_un + baseline["answerable"] * n_ans == pytest.approx(n_un)


def test_the_llm_judge_is_used_when_given(index: Index) -> None:
    from ragsieve.eval.faithfulness import LLMAnswerJudge

    items, records = synthetic(20)
    scorer = BaselineScorer(PipelineConfig(pipeline="plain", index_dir="unused"), index=index, llm=LogprobLLM())
    report = fair_report(items, records, scorer=scorer, llm_judge=LLMAnswerJudge(LogprobLLM()), n_splits=0,
                         n_boot=50)  # fmt: skip
    judged = report["faithfulness"]["llm_judge"]["sieve"]
    assert judged["judge"] == LLMAnswerJudge.name and judged["faithful"]["share"] == 1.0


# ---------------------------------------------------------------------------- ragsieve eval --json


def test_eval_json_and_terminal_output_have_the_fair_comparison(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], embedder: Any
) -> None:
    import ragsieve.llm
    from ragsieve.cli import main

    root = tmp_path / "corpus"
    Index.build(copy_corpus(root), tmp_path / "idx", embedder=embedder)
    monkeypatch.setattr(ragsieve.llm, "load_llm", lambda config=None: LogprobLLM())
    data = tmp_path / "q.jsonl"
    rows = [{"id": str(i), "question": f"How often does the Moon orbit the Earth ({i})?", "answer": "27.3 days"}
            for i in range(6)]  # fmt: skip
    rows.append({"id": "u", "question": "Who painted the Moon red?", "answerable": False})
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["eval", "--data", str(data), "--index", str(tmp_path / "idx"), "--cache", str(tmp_path / "c.jsonl"),
            "--bootstrap", "50", "--splits", "20"]  # fmt: skip
    try:
        main([*args, "--json"])
    except SystemExit as exc:
        assert not exc.code
    payload = json.loads(capsys.readouterr().out)
    assert payload["vs_baseline_label"] == OLD_BASELINE_LABEL
    assert payload["faithfulness_judge_role"] == "self-judged"
    fair = payload["fair"]
    assert "plain+logprob" in fair["baselines"] and fair["best_baseline"] in fair["baselines"]
    assert "sieve" in fair["vs_best_baseline"] and "interval" in fair["vs_best_baseline"]["sieve"]
    assert set(fair["faithfulness"]["independent"]) == {"sieve", "plain", "no-retrieval"}
    assert "calibration" in fair
    # the sieve's records carry the signals its confidence was built from
    cached = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert any(r["signals"] for r in cached if r["config"] == "sieve" and not r["abstained"])
    try:
        main(args)
    except SystemExit as exc:
        assert not exc.code
    out = capsys.readouterr().out
    assert "Fair baselines" in out and "Faithfulness, independent judge" in out
    assert max(len(line) for line in out.splitlines()) <= 80


class RefusingScorer:
    """A scorer for records that already carry their signals: calling it is a test failure."""

    def __init__(self, index: Index) -> None:
        self.index = index

    def signals(self, record: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError(f"record {record.get('item_id')} was scored again")


def test_signals_recorded_at_answer_time_equal_a_later_scoring_pass(index: Index, tmp_path: Path) -> None:
    from ragsieve.eval.harness import EvalCache, EvalSpec, run_eval
    from ragsieve.sieve.pipeline import Pipeline

    cfg = PipelineConfig(pipeline="plain", index_dir="unused")
    items = [QAItem(str(i), q, ["27.3 days"]) for i, q in
             enumerate(["How often does the Moon orbit Earth?", "What does the Moon orbit?",
                        "How long is a lunar orbit?", "What orbits Earth every 27.3 days?"])]  # fmt: skip
    llm = LogprobLLM()
    specs = [EvalSpec("plain", cfg), EvalSpec("no-retrieval", cfg, no_retrieval=True)]
    cache = EvalCache(tmp_path / "c.jsonl")
    records = run_eval(items, specs, cache, None, build=lambda s: Pipeline(s.config, index=index, llm=llm),
                       baseline_signals=True)  # fmt: skip
    later = BaselineScorer(cfg, index=index, llm=LogprobLLM())
    for name in ("plain", "no-retrieval"):
        for rec in records[name]:
            assert rec["baseline_signals"] == later.signals(rec)
            assert rec["baseline_signals"]["logprob"] == pytest.approx((-0.25 * 10 - 1.0) / 10)
    # the closed-book answer was scored under the closed-book prompt: no evidence, same answer text
    assert all(r["evidence_ids"] == [] for r in records["no-retrieval"])
    # kept in the cache file, so a report read back later needs no model
    reread = EvalCache(tmp_path / "c.jsonl").load()
    assert all(reread.get(r["key"])["baseline_signals"] == r["baseline_signals"] for r in records["plain"])
    # without the switch nothing is scored at answer time
    plain_only = run_eval(items, specs[:1], EvalCache(tmp_path / "d.jsonl"), None,
                          build=lambda s: Pipeline(s.config, index=index, llm=llm))  # fmt: skip
    assert all("baseline_signals" not in r for r in plain_only["plain"])
    # the fair report reads recorded signals and does not score those records again
    report = fair_report(items, records, scorer=RefusingScorer(index), n_splits=5, n_boot=20)
    assert "plain+logprob" in report["baselines"]
