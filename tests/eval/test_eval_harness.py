"""``ragsieve eval`` on a fake pipeline: every metric of a hand-made case computed by hand."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragsieve.config import PipelineConfig
from ragsieve.errors import InputError
from ragsieve.eval.data import QAItem, load_qa
from ragsieve.eval.harness import EvalCache, EvalSpec, default_specs, run_eval
from ragsieve.eval.scoring import score_all
from ragsieve.types import Answer, Chunk, SearchHit, Trace

ITEMS = [
    QAItem("q1", "Capital of France?", ["Paris"], gold_ids=["doc-paris"], references=["Paris"]),
    QAItem("q2", "When was superconductivity found?", ["1911"], references=["1911"]),
    QAItem("q3", "What is graphene made of?", ["carbon"], gold_ids=["doc-graphene"], references=["carbon"]),
    QAItem("q4", "Who detected gravitational waves?", ["LIGO"], gold_ids=["doc-ligo", "doc-virgo"],
           references=["LIGO"]),
    QAItem("q5", "What is the population of Mars?", [], answerable=False),
]


def hit(cid: str, text: str, doc: str, rank: int = 1) -> SearchHit:
    return SearchHit(Chunk(id=cid, text=text, doc_id=doc, source=doc), 1.0 / rank, rank, {})


E_PARIS = hit("c-paris", "Paris is the capital of France.", "doc-paris")
E_ONNES = hit("c-onnes", "Onnes found it in 1911 in Leiden.", "doc-onnes")
E_SI = hit("c-si", "Graphene is carbon.", "doc-silicon")
E_OTHER = hit("c-other", "Waves ripple.", "doc-other")
E_LIGO = hit("c-ligo", "LIGO detected them in 2015.", "doc-ligo", 2)

# question -> (text, evidence, cited ids, abstained, confidence)
SIEVE: dict[str, tuple[str, list[SearchHit], list[str], bool, float | None]] = {
    "Capital of France?": ("Paris [1].", [E_PARIS], ["c-paris"], False, 0.9),
    "When was superconductivity found?": ("The evidence does not say.", [], [], True, 0.2),
    "What is graphene made of?": ("It is silicon [1].", [E_SI], ["c-si"], False, 0.6),
    "Who detected gravitational waves?": (
        "LIGO detected them [2]. It was in 2015.", [E_OTHER, E_LIGO], ["c-ligo"], False, 0.8
    ),
    "What is the population of Mars?": ("No evidence about Mars.", [], [], True, 0.1),
}
PLAIN: dict[str, tuple[str, list[SearchHit], list[str], bool, float | None]] = {
    "Capital of France?": ("Paris.", [E_PARIS], ["c-paris"], False, None),
    "When was superconductivity found?": ("In 1911.", [E_ONNES], ["c-onnes"], False, None),
    "What is graphene made of?": ("silicon", [E_SI], [], False, None),
    "Who detected gravitational waves?": ("Virgo", [E_OTHER], [], False, None),
    "What is the population of Mars?": ("The answer is 42.", [E_OTHER], [], False, None),
}


class FakePipeline:
    """Answers from a fixed table and counts how often it was asked."""

    def __init__(self, table: dict[str, tuple[str, list[SearchHit], list[str], bool, float | None]]) -> None:
        self.table = table
        self.calls: list[tuple[str, bool]] = []

    def ask(self, question: str, no_retrieval: bool = False) -> Answer:
        self.calls.append((question, no_retrieval))
        text, evidence, cited, abstained, confidence = self.table[question]
        trace = Trace(query=question)
        trace.count_llm(100, 10)
        trace.count_llm(20, 0)
        trace.timings_ms["warm_up"] = 0.0
        return Answer(question, text, evidence, cited, trace, abstained=abstained, confidence=confidence)


class WordJudge:
    """Supports a claim when every word of it occurs in the evidence."""

    name = "word-judge"

    def __init__(self) -> None:
        self.calls = 0

    def warm_up(self) -> None:
        pass

    def support(self, claim: str, evidence: Sequence[str]) -> float:
        self.calls += 1
        words = set(re.findall(r"\w+", " ".join(evidence).lower()))
        return float(all(w in words for w in re.findall(r"\w+", claim.lower())))


def specs() -> list[EvalSpec]:
    return [EvalSpec("sieve", PipelineConfig(pipeline="sieve")), EvalSpec("plain", PipelineConfig(pipeline="plain"))]


def make_factory(built: dict[str, FakePipeline]):  # noqa: ANN201
    def build(spec: EvalSpec) -> FakePipeline:
        built[spec.name] = FakePipeline(SIEVE if spec.name == "sieve" else PLAIN)
        return built[spec.name]

    return build


def run(tmp_path: Path, judge: WordJudge | None = None) -> tuple[dict[str, Any], dict[str, FakePipeline]]:
    built: dict[str, FakePipeline] = {}
    cache = EvalCache(tmp_path / "cache.jsonl").load()
    records = run_eval(ITEMS, specs(), cache, judge or WordJudge(), build=make_factory(built))
    return score_all(ITEMS, records, baseline="plain", n_boot=200), built


def test_every_metric_matches_the_hand_computation(tmp_path: Path) -> None:
    scores, _ = run(tmp_path)
    s, p = scores["sieve"], scores["plain"]
    # Sieve: q1 right, q2 abstained (answerable), q3 wrong, q4 right, q5 abstained (unanswerable).
    assert s["n"] == 5 and s["n_answerable"] == 4
    assert s["accuracy"] == 0.5
    assert s["coverage"] == 0.6
    assert s["answered_accuracy"] == pytest.approx(0.6667, abs=1e-4)
    assert s["abstain_unanswerable"] == 1.0 and s["abstain_answerable"] == 0.25
    assert s["exact_match"] == 0.25  # "Paris [1]." is "Paris" once markers are stripped
    assert s["token_f1"] == pytest.approx((1 + 0 + 0 + 0.25) / 4, abs=1e-4)
    # Ranked q1 (T, .9), q4 (T, .8), q3 (F, .6), then the abstentions q2 (F) and q5 (T) tied:
    # risks 0, 0, 1/3, 1 - 2.5/4, 1 - 3/5.
    assert s["aurc"] == pytest.approx((0 + 0 + 1 / 3 + 0.375 + 0.4) / 5, abs=1e-4)
    # q1: 1 of 1 sentence supported; q3: 0 of 1; q4: "LIGO detected them" yes, "It was in 2015" no.
    assert s["faithfulness"] == pytest.approx((1 + 0 + 0.5) / 3, abs=1e-4)
    assert s["citation_precision"] == pytest.approx((1 + 0 + 1) / 3, abs=1e-4)
    assert s["citation_recall"] == pytest.approx((1 + 0 + 0.5) / 3, abs=1e-4)
    assert s["llm_calls_per_question"] == 2.0 and s["tokens_per_question"] == 130.0
    assert s["seconds_per_question"] >= 0.0
    # Plain RAG answers everything with no confidence: q1, q2 right; every tie -> risk 3/5 throughout.
    assert p["accuracy"] == 0.5 and p["coverage"] == 1.0 and p["abstain_unanswerable"] == 0.0
    assert p["aurc"] == pytest.approx(0.6, abs=1e-4)
    assert p["faithfulness"] == pytest.approx(2 / 5, abs=1e-4)
    assert p["faithfulness_grounded"] == p["faithfulness"]  # every plain answer used evidence
    assert "vs_baseline" not in p
    # Matched coverage 0.6 (3 items): sieve 2/3 right, plain 3 x 2/5 expected right of 3 -> 0.4.
    matched = s["vs_baseline"]["selective_accuracy_matched"]
    assert matched["coverage"] == 0.6
    assert matched["value"] == pytest.approx(0.6667, abs=1e-4)
    assert matched["baseline"] == pytest.approx(0.4, abs=1e-4)
    assert matched["difference"] == pytest.approx(0.2667, abs=1e-4)
    lo, hi = matched["interval"]
    assert lo <= matched["difference"] <= hi
    assert s["vs_baseline"]["faithfulness"]["difference"] == pytest.approx(0.5 - 0.4, abs=1e-4)
    assert s["vs_baseline"]["aurc"]["difference"] == pytest.approx(0.2217 - 0.6, abs=1e-3)
    for name in ("accuracy", "coverage", "aurc", "faithfulness"):
        lo, hi = s["intervals"][name]
        assert lo <= s[name] <= hi
    assert s["risk_coverage"]["coverage"] == [0.2, 0.4, 0.6, 0.8, 1.0]


def test_uncited_sentences_are_unsupported_without_calling_the_judge(tmp_path: Path) -> None:
    judge = WordJudge()
    run(tmp_path, judge)
    # Sieve: q1 1, q3 1, q4 2 sentences; plain: q1, q2 cite evidence; q3, q4, q5 cite nothing.
    assert judge.calls == 4 + 2


def test_resume_from_cache_asks_nothing_again(tmp_path: Path) -> None:
    first, built = run(tmp_path)
    assert len(built["sieve"].calls) == 5
    again, rebuilt = run(tmp_path)
    assert rebuilt == {}  # nothing left to answer, so no pipeline is even built
    assert again["sieve"]["aurc"] == first["sieve"]["aurc"]


def test_an_interrupted_write_is_recomputed(tmp_path: Path) -> None:
    run(tmp_path)
    path = tmp_path / "cache.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    torn = lines[-1][: len(lines[-1]) // 2]
    path.write_text("".join(lines[:-1]) + torn, encoding="utf-8")
    scores, built = run(tmp_path)
    last = json.loads(lines[-1])
    assert sum(len(p.calls) for p in built.values()) == 1
    assert built[last["config"]].calls[0][0] == last["question"]
    assert scores["sieve"]["accuracy"] == 0.5
    # The recomputed record starts on its own line after the torn one.
    assert EvalCache(path).load().get(last["key"]) is not None


def test_no_retrieval_spec_asks_without_retrieval(tmp_path: Path) -> None:
    built: dict[str, FakePipeline] = {}
    spec = EvalSpec("no-retrieval", PipelineConfig(pipeline="plain"), no_retrieval=True)

    closed_book = {q: (text, [], [], abst, conf) for q, (text, _, _, abst, conf) in PLAIN.items()}

    def build(s: EvalSpec) -> FakePipeline:
        built[s.name] = FakePipeline(closed_book)
        return built[s.name]

    records = run_eval(ITEMS, [spec], EvalCache(tmp_path / "c.jsonl"), WordJudge(), build=build)
    assert all(flag for _, flag in built["no-retrieval"].calls)
    scores = score_all(ITEMS, records, baseline=None, n_boot=50)["no-retrieval"]
    # Answers without evidence cite nothing: faithfulness 0, and no grounded answer to score.
    assert scores["faithfulness"] == 0.0 and scores["faithfulness_grounded"] is None


def test_default_specs_and_ablations() -> None:
    specs = default_specs(PipelineConfig(index_dir="idx"), [["verify"], ["judge", "filter"]])
    assert [s.name for s in specs] == ["sieve", "plain", "no-retrieval", "sieve -verify", "sieve -judge-filter"]
    assert specs[3].config.ablate == ["verify"] and specs[3].config.pipeline == "sieve"
    assert len({s.config_hash() for s in specs}) == len(specs)
    with pytest.raises(InputError, match="twice"):
        default_specs(PipelineConfig(), [["verify"], ["verify"]])


def test_load_qa_reads_every_answer_format(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    rows = [
        {"id": "a", "question": "Q1?", "golden_answers": ["x", "y"], "supporting_ids": ["d1"]},
        {"id": "b", "question": "Q2?", "answer": "A long reference.", "answer_aliases": ["ref"]},
        {"id": "c", "question": "Q3?", "answerable": False},
        {"question_text": "Q4?", "answers": "z"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    items = load_qa(path)
    assert items[0].answers == ["x", "y"] and items[0].gold_ids == ["d1"]
    assert items[1].answers == ["ref"] and items[1].references == ["ref", "A long reference."]
    assert not items[2].answerable and items[2].answers == []
    assert items[3].id == "4" and items[3].answers == ["z"]
    assert len(load_qa(path, limit=2)) == 2


def test_load_qa_names_the_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text('{"question": "Q?"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"qa.jsonl:1 has no gold answer.*answerable"):
        load_qa(path)
    with pytest.raises(InputError, match="does not exist"):
        load_qa(tmp_path / "missing.jsonl")


def test_demo_questions_load_as_is() -> None:
    from ragsieve.demo import demo_data_path

    items = load_qa(demo_data_path("questions.jsonl"))
    assert len(items) >= 40
    assert all(i.answers for i in items if i.answerable)


def test_rejudge_rescores_the_same_sentences_against_the_same_evidence():
    from ragsieve.eval.harness import rejudge_faithfulness

    rec = {"config": "sieve", "faithfulness": [
        {"sentence": "Paris is in France", "cited": ["c1"], "score": 0.1, "supported": False},
        {"sentence": "It is old", "cited": [], "score": 0.9, "supported": True},
    ], "judge": "first"}
    texts = {"c1": "Paris is a city in France."}
    records = {"sieve": [rec, {"config": "sieve", "faithfulness": None}]}
    out = rejudge_faithfulness(records, WordJudge(), texts.__getitem__)
    rows = out["sieve"][0]["faithfulness"]
    assert [r["supported"] for r in rows] == [True, False] and rows[1]["score"] == 0.0
    assert out["sieve"][0]["judge"] == "word-judge" and out["sieve"][1]["faithfulness"] is None
    assert rec["faithfulness"][0]["score"] == 0.1  # the cached record is not modified
