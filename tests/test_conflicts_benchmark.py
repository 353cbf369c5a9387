"""The scoring of ``benchmarks/conflicts.py --through-sieve``: which answers name both claims,
which cache lines count, and what counts as a false conflict in the calibration caches."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "conflicts.py", "_conflicts_under_test")


def test_a_claim_is_named_by_its_own_value_after_normalisation(bench: ModuleType) -> None:
    answer = "The sources disagree: 1972 (a.example [1]) vs 15 January 1971 (b.example [2])."
    assert bench.claim_named("Liu Zhi died in 1972.", "Liu Zhi died on the 15 January 1971.", answer)
    assert bench.claim_named("Liu Zhi died on the 15 January 1971.", "Liu Zhi died in 1972.", answer)
    # the shared name does not name the other claim
    assert not bench.claim_named("Liu Zhi died in 1972.", "Liu Zhi died in 1971.", "Liu Zhi died in 1971.")
    # number words and digits are one value
    assert bench.claim_named("Three survived.", "Four survived.", "Only 3 people survived.")
    assert not bench.claim_named("Four survived.", "Three survived.", "Only 3 people survived.")


def test_a_claim_without_a_value_is_named_by_its_own_words(bench: ModuleType) -> None:
    pegs = "It is held together by wooden pegs, with no glue."
    glue = "It is held together by overlapping segments joined by wood glue."
    assert bench.claim_named(pegs, glue, "The hull used wooden pegs.")
    assert not bench.claim_named(glue, pegs, "The hull used wooden pegs.")


def test_yes_no_claims_cannot_be_named(bench: ModuleType) -> None:
    assert bench.claim_named("No.", "Yes.", "No, it did not.") is None
    assert bench.claim_named("yes", "no", "Yes and no.") is None


def test_flag_groups_are_matched_to_the_claims(bench: ModuleType) -> None:
    assert bench.group_names("No.", "Yes.", ["no", "yes"])
    assert not bench.group_names("No.", "Yes.", ["1931", "1947"])
    assert bench.group_names("1934", "1933", ["1933", "1934"])
    assert not bench.group_names("1934", "1933", ["5", "2 meters"])


def test_a_torn_last_line_is_not_read(bench: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "cache.jsonl"
    path.write_text('{"a": 1}\nnot json\n{"a": 2}\n{"a": 3', encoding="utf-8")
    assert bench.read_complete_lines(path) == [{"a": 1}, {"a": 2}]
    assert bench.read_complete_lines(tmp_path / "missing.jsonl") == []


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_false_conflicts_count_flagged_sieve_records_on_answerable_questions(bench: ModuleType, tmp_path: Path) -> None:
    _write(
        tmp_path / "squad2" / "questions.jsonl",
        [{"id": "a1", "answerable": True}, {"id": "a2", "answerable": True}, {"id": "u1", "answerable": False}],
    )
    _write(
        tmp_path / "squad2" / "smollm2.jsonl",
        [
            {"config": "sieve", "item_id": "a1", "decisions": {"conflict:flagged": 2}, "error": None},
            {"config": "sieve", "item_id": "a2", "decisions": {"judge:kept": 3}, "error": None},
            # unanswerable, another configuration, an error: not counted
            {"config": "sieve", "item_id": "u1", "decisions": {"conflict:flagged": 2}, "error": None},
            {"config": "plain", "item_id": "a2", "decisions": {"conflict:flagged": 1}, "error": None},
            {"config": "sieve", "item_id": "a3", "error": "LLMError: boom"},
        ],
    )
    rows, rates = bench.false_conflicts(tmp_path)
    assert rows[0][1] == "2" and rates[0] == 0.5
    # no HotpotQA cache yet: nothing measured
    assert rows[1][1] == "0" and rates[1] is None


def test_gemma_answers_and_section_are_its_own_and_smollm2_keeps_its_paths(bench: ModuleType) -> None:
    smollm2 = bench.answers_path(40, 0, "conflictqa")
    assert smollm2 == bench.run_dir(40, 0, "conflictqa") / "answers.jsonl"
    assert bench.answers_path(40, 0, "conflictqa", "smollm2") == smollm2
    gemma = bench.answers_path(40, 0, "conflictqa", "gemma")
    assert gemma.parent == smollm2.parent and gemma.name == "answers-gemma.jsonl"
    assert bench.through_sieve_section("smollm2") == (
        "conflicts-through-sieve",
        "Conflicting sources through the sieve, with the bundled model",
    )
    section, title = bench.through_sieve_section("gemma")
    assert section == "conflicts-through-sieve-gemma" and "Gemma-3-270M" in title


def test_false_conflicts_of_a_model_without_calibration_cache_are_not_measured(
    bench: ModuleType, tmp_path: Path
) -> None:
    _write(tmp_path / "squad2" / "questions.jsonl", [{"id": "a1", "answerable": True}])
    _write(
        tmp_path / "squad2" / "smollm2.jsonl",
        [{"config": "sieve", "item_id": "a1", "decisions": {"conflict:flagged": 2}, "error": None}],
    )
    rows, rates = bench.false_conflicts(tmp_path, "gemma")
    assert rates == [None, None]
    assert [r[2] for r in rows] == ["not measured", "not measured"]
    assert "squad2/gemma.jsonl" in str(rows[0][3])
    _write(
        tmp_path / "squad2" / "gemma.jsonl",
        [{"config": "sieve", "item_id": "a1", "decisions": {"judge:kept": 1}, "error": None}],
    )
    rows, rates = bench.false_conflicts(tmp_path, "gemma")
    assert rows[0][1] == "1" and rates[0] == 0.0


def test_false_conflicts_now_replay_the_conflict_stage_on_the_calibration_index(
    bench: ModuleType, tmp_path: Path
) -> None:
    from ragsieve.config import PipelineConfig
    from ragsieve.index import Index
    from ragsieve.types import Chunk

    folder = tmp_path / "squad2"
    page = "https://wiki.example/Kessel_Bridge"
    chunks = [
        # one article, two paragraphs with two years: not a conflict (one document)
        Chunk(id="k1", text="The Kessel Bridge opened in 1931 after four years of work.", doc_id="k1",
              source=page + "#p1"),
        Chunk(id="k2", text="The Kessel Bridge opened its second deck in 1947.", doc_id="k2", source=page + "#p2"),
        # two sites give two years for the Marren Bridge: a conflict
        Chunk(id="m1", text="The Marren Bridge opened in 1962 and carries the railway.", doc_id="m1",
              source="https://a.example/marren"),
        Chunk(id="m2", text="The Marren Bridge opened in 1965 and carries the railway.", doc_id="m2",
              source="https://b.example/marren"),
    ]  # fmt: skip
    Index.from_chunks(chunks, folder / "index", config=PipelineConfig())
    _write(
        folder / "questions.jsonl",
        [
            {"id": "a1", "question": "When did the Kessel Bridge open?", "answerable": True},
            {"id": "a2", "question": "When did the Marren Bridge open?", "answerable": True},
            {"id": "u1", "question": "When did the Ober Bridge open?", "answerable": False},
        ],
    )
    rows, rates = bench.false_conflicts_now(tmp_path)
    assert rows[0][:3] == ["SQuAD 2.0 answerable", "2", bench.pct(1, 2)] and rates[0] == 0.5
    assert rows[0][3] == "1 one-document"
    # no HotpotQA folder: not measured
    assert rates[1] is None and rows[1][2] == "not measured"
