"""Which check fired on which question, and how often it was right to: the per-check table of
``ragsieve eval``.

A check *fires* on a question when it stopped the run (an ``abstain`` record names it) or asked
to withdraw the draft without a veto (the verify stage's ``withdraw`` records, weighed by the
decide stage). Per check the table gives how often it fired on answerable and on unanswerable
questions, and its **precision as a veto**: among the questions it fired on, the share where
withdrawing was right, i.e. the question is unanswerable or its draft does not contain a gold
answer. A check that fired before any draft existed (the judge, the poisoning check) on an
answerable question counts as a wrong withdrawal: nothing shows the answer would have been
wrong. A check may keep its veto by default only where this precision, measured on data it
was not tuned on, is at least 0.9.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ragsieve.answers import contains_answer
from ragsieve.eval.data import QAItem
from ragsieve.options import is_veto
from ragsieve.types import Trace


def fired_checks(trace: Trace) -> tuple[list[str], str | None]:
    """The checks that fired in ``trace`` (in order, once each) and the draft they fired on
    (the decide stage's ``draft``; ``None`` when no draft was written or recorded)."""
    fired: list[str] = []
    for event in trace.events:
        name: str | None = None
        if event.get("stage") == "abstain":
            name = str(event.get("check") or "")
            reason = str(event.get("reason") or "")
            if name in ("verify", "decide") and ":" in reason:
                # the verify stage's reasons name the sub-check: "responsive: ...", "verify: ..."
                name = reason.split(":", 1)[0] if name == "verify" else "decide"
                if name == "responsive":
                    # and the responsiveness check's way of not answering: "responsive: wrong_kind"
                    name += "." + reason.split(":", 1)[1].split()[0]
        elif event.get("stage") == "verify" and event.get("withdraw"):
            name = f"verify.{event['withdraw']}"
        if name and name not in fired:
            fired.append(name)
    decided = trace.stage("decide")
    draft = str(decided[-1]["draft"]) if decided and decided[-1].get("draft") is not None else None
    return fired, draft


def vetoed(fired: Sequence[str], vetoes: Collection[str]) -> bool:
    """Whether a check in ``fired`` (:func:`fired_checks`'s names) is one of ``vetoes`` (the
    ``decide.vetoes`` names): ``verify.responsive.wrong_kind`` is vetoed by ``responsive`` and by
    ``responsive.wrong_kind``, ``verify.value_tie`` by ``value_tie``. Lets a report replay a
    run made with ``decide.mode = "observe"`` under a configuration's vetoes."""
    for check in fired:
        kind, _, reason = check.removeprefix("verify.").partition(".")
        if is_veto(kind, reason or None, vetoes):
            return True
    return False


def check_table(items: Sequence[QAItem], records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per check that fired in ``records`` (one eval record per item, in order):
    fired on answerable / unanswerable (counts and shares), vetoes right, precision."""
    n_ans = sum(1 for i in items if i.answerable)
    n_un = len(items) - n_ans
    rows: dict[str, dict[str, Any]] = {}
    for item, rec in zip(items, records, strict=True):
        draft = rec.get("draft")
        for check in rec.get("fired") or []:
            row = rows.setdefault(check, {"check": check, "answerable": 0, "unanswerable": 0, "right": 0})
            if item.answerable:
                row["answerable"] += 1
                wrong_draft = draft is not None and not contains_answer(str(draft), item.answers)
                row["right"] += int(wrong_draft)
            else:
                row["unanswerable"] += 1
                row["right"] += 1
    out = []
    for row in rows.values():
        fired = row["answerable"] + row["unanswerable"]
        out.append({
            **row,
            "fired": fired,
            "answerable_share": row["answerable"] / n_ans if n_ans else None,
            "unanswerable_share": row["unanswerable"] / n_un if n_un else None,
            "precision": row["right"] / fired if fired else None,
        })  # fmt: skip
    return sorted(out, key=lambda r: (-r["fired"], r["check"]))


def check_table_lines(table: Sequence[Mapping[str, Any]]) -> list[str]:
    """The table as fixed-width lines for the terminal."""
    if not table:
        return ["no check fired on these questions"]

    def pct(x: float | None) -> str:
        return "   -" if x is None else f"{100 * x:3.0f}%"

    lines = [f"{'check':24s} {'answerable':>14s} {'unanswerable':>14s} {'veto precision':>16s}"]
    for r in table:
        lines.append(
            f"{r['check']:24s} {r['answerable']:>7d} {pct(r['answerable_share']):>6s} "
            f"{r['unanswerable']:>7d} {pct(r['unanswerable_share']):>6s} "
            f"{r['right']:>5d}/{r['fired']:<4d} {pct(r['precision']):>5s}"
        )
    return lines


__all__ = ["check_table", "check_table_lines", "fired_checks"]
