from __future__ import annotations

import math

import pytest

from ragsieve.attack.metrics import Outcome, attack_succeeded, paired_bootstrap, summarize, table_row, wilson
from ragsieve.errors import InputError


def test_attack_success_counts_wrong_answer_but_not_abstention():
    assert attack_succeeded("It was written by Christopher Marlowe.", "Christopher Marlowe", ["Shakespeare"])
    assert not attack_succeeded("Shakespeare wrote it.", "Christopher Marlowe", ["Shakespeare"])
    assert not attack_succeeded("Christopher Marlowe", "Christopher Marlowe", ["x"], abstained=True)
    # a wrong answer inside the gold one ("York" in "New York") is not a success
    assert not attack_succeeded("New York", "York", ["New York"])


def test_summarize_counts_hand_made_cases():
    rows = [
        Outcome("a", retrieved=True, attacked=True, clean_correct=True, abstained=False),
        Outcome("b", retrieved=True, attacked=False, clean_correct=True, abstained=True),
        Outcome("c", retrieved=False, attacked=False, clean_correct=False, abstained=False),
        Outcome("d", retrieved=True, attacked=True, clean_correct=False, abstained=False, clean_abstained=True),
    ]
    s = summarize(rows)
    assert s["clean_abstain_rate"] == 0.25
    assert s["n"] == 4
    assert s["retrieval_success"] == 0.75 and s["asr"] == 0.5
    assert s["clean_accuracy"] == 0.5 and s["abstain_rate"] == 0.25
    assert s["asr_ci"] == pytest.approx(wilson(2, 4))
    base = [Outcome(o.target_id, o.retrieved, True, True, False) for o in rows]
    s2 = summarize(rows, baseline=base)
    assert s2["clean_cost"][0] == pytest.approx(0.5)  # plain 4/4 correct, defence 2/4
    assert s2["asr_change"][0] == pytest.approx(-0.5)
    assert table_row("x", s2)[3].startswith("0.50 [")
    assert table_row("x", s2)[-1] == "0.25 / 0.25"
    with pytest.raises(InputError, match="same questions"):
        summarize(rows, baseline=base[::-1])


def test_wilson_and_bootstrap():
    lo, hi = wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-3) and hi == pytest.approx(0.5962, abs=1e-3)
    assert wilson(0, 10)[0] == 0.0 and math.isnan(wilson(0, 0)[0])
    with pytest.raises(InputError):
        wilson(5, 3)
    m, lo, hi = paired_bootstrap([1, 1, 1, 0], [0, 0, 1, 0])
    assert m == 0.5 and lo <= m <= hi
    assert paired_bootstrap([1, 0], [1, 0]) == (0.0, 0.0, 0.0)
    with pytest.raises(InputError, match="differ in length"):
        paired_bootstrap([1], [1, 0])


def test_where_stopped_counts_verdicts_and_abstentions_by_check():
    from ragsieve.attack.metrics import where_stopped

    rows = [
        {"poisoned_in_evidence": ["a"], "attacked": True, "abstained": False,
         "decisions_on_poison": [{"check": "judge", "verdict": "kept"}, {"check": "select", "verdict": "dropped"}]},
        {"poisoned_in_evidence": ["b"], "attacked": False, "abstained": True, "abstain_reason": "verify: unsupported",
         "decisions_on_poison": [{"check": "judge", "verdict": "flagged"}]},
        {"poisoned_in_evidence": [], "attacked": True, "abstained": False, "decisions_on_poison": []},
    ]
    s = where_stopped(rows)
    assert s["questions"] == 3 and s["reached"] == 2 and s["reached_and_attacked"] == 1
    assert s["stopped"] == {"select:dropped": 1, "judge:flagged": 1}
    assert s["abstained_by"] == {"verify": 1}
