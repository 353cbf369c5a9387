"""The per-check table of ``ragsieve eval``: which check fired, how often, and how often
withdrawing was right (the gold answer shows the draft wrong, or the question is unanswerable)."""

from __future__ import annotations

from ragsieve.eval.checks import check_table, check_table_lines, fired_checks, vetoed
from ragsieve.eval.data import QAItem
from ragsieve.types import Trace


def trace_with(*events: dict[str, object], draft: str | None = None) -> Trace:
    trace = Trace("q")
    for e in events:
        trace.record(str(e["stage"]), **{k: v for k, v in e.items() if k != "stage"})
    if draft is not None:
        trace.record("decide", draft=draft, decision="answer")
    return trace


def test_fired_checks_reads_stops_and_withdrawals() -> None:
    stopped = trace_with({"stage": "abstain", "check": "judge", "reason": "judge: all 3 candidates irrelevant"})
    assert fired_checks(stopped) == (["judge"], None)
    weighed = trace_with({"stage": "verify", "withdraw": "unsupported", "reason": "verify: none"}, draft="Tom Newman.")
    assert fired_checks(weighed) == (["verify.unsupported"], "Tom Newman.")
    vetoed = trace_with({"stage": "abstain", "check": "verify", "reason": "responsive: wrong_kind"})
    assert fired_checks(vetoed)[0] == ["responsive.wrong_kind"]
    one_way = trace_with({"stage": "verify", "withdraw": "responsive.restated_question", "reason": "responsive: x"})
    assert fired_checks(one_way)[0] == ["verify.responsive.restated_question"]
    assert fired_checks(trace_with(draft="Paris."))[0] == []


def test_precision_counts_a_withdrawal_right_only_when_the_gold_shows_the_draft_wrong() -> None:
    items = [
        QAItem("a", "q", ["McLellan"]),  # wrong draft withdrawn: right to
        QAItem("b", "q", ["Sony"]),  # right draft withdrawn: wrong to
        QAItem("c", "q", ["1911"]),  # stopped before any draft: wrong to (nothing shows it wrong)
        QAItem("d", "q", [], answerable=False),  # unanswerable: right to
        QAItem("e", "q", ["Paris"]),  # nothing fired
    ]
    records = [
        {"fired": ["verify.unsupported"], "draft": "Tom Newman."},
        {"fired": ["verify.unsupported"], "draft": "Sony Corporation."},
        {"fired": ["judge"], "draft": None},
        {"fired": ["judge", "verify.unsupported"], "draft": "Somebody."},
        {"fired": [], "draft": "Paris."},
    ]
    table = {r["check"]: r for r in check_table(items, records)}
    verify = table["verify.unsupported"]
    assert (verify["answerable"], verify["unanswerable"], verify["right"], verify["fired"]) == (2, 1, 2, 3)
    assert verify["precision"] == 2 / 3 and verify["answerable_share"] == 2 / 4 and verify["unanswerable_share"] == 1.0
    judge = table["judge"]
    assert (judge["right"], judge["fired"], judge["precision"]) == (1, 2, 0.5)
    lines = check_table_lines(list(table.values()))
    assert lines[0].startswith("check") and any(line.startswith("verify.unsupported") for line in lines)
    assert check_table_lines([]) == ["no check fired on these questions"]


def test_a_report_replays_a_configuration_s_vetoes() -> None:
    fired = ["verify.unsupported", "verify.responsive.wrong_kind"]
    assert vetoed(fired, ["responsive"]) and vetoed(fired, ["responsive.wrong_kind"]) and vetoed(fired, ["unsupported"])
    assert not vetoed(fired, ["responsive.restated_question"]) and not vetoed(fired, ["value_tie"])
    assert not vetoed([], ["responsive"]) and not vetoed(fired, [])
