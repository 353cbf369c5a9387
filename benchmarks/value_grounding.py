"""Does verification catch a wrong value in an otherwise copied sentence?

Supported sentences come from text nobody here wrote: for each answerable SQuAD 2.0 question
(../shared/data/trust/squad2) the sentence of its gold paragraph that contains the gold answer,
and for each HotpotQA question (../shared/data/hotpotqa/hotpotqa_dev_distractor_500.jsonl) the
sentence of a supporting paragraph that contains the gold answer; the evidence is that whole
paragraph. A perturbed copy swaps one value of the sentence (a number, date, quantity or proper
name, picked at random among those ragsieve.values finds) for a value of the same kind drawn at
random from another paragraph of the same data set, whose surface text does not occur in the
sentence's own paragraph (a value copied from the same paragraph is a different test, and
choosing replacements with the checker itself would be circular).

Reported for the claim judge alone (the sieve's default LexicalEmbeddingJudge with the bundled
embedder, or without embeddings with --no-embedding), the judge combined with value grounding
(verify_answer's default), and value grounding alone: the share of perturbed sentences judged
unsupported ("caught") and the share of unperturbed sentences judged unsupported ("false
flags"), with 95% Wilson intervals. The support threshold is sieve.support_threshold (0.5, set
before this data was used); nothing is tuned here.

python benchmarks/value_grounding.py            # about 2 minutes on 2 cores
python benchmarks/value_grounding.py --no-embedding --limit 200
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import read_jsonl  # noqa: E402
from benchmarks._report import SHARED_DATA, markdown_table, publish_section  # noqa: E402
from benchmarks._stats import rate_with_interval as pct  # noqa: E402

SWAP_KINDS = ("number", "date", "quantity", "name")


@dataclass
class Item:
    source: str  # "squad2" | "hotpotqa"
    group: str  # paragraph id: replacements come from other groups
    sentence: str
    passage: str


def load_items(limit: int | None) -> list[Item]:
    from ragsieve.ingest import split_sentences

    items: list[Item] = []
    seen: set[str] = set()

    def add(source: str, group: str, passage: str, answers: list[str]) -> None:
        for sentence in split_sentences(passage):
            if any(a and a in sentence for a in answers) and sentence not in seen:
                seen.add(sentence)
                items.append(Item(source, group, sentence, passage))
                return

    squad = SHARED_DATA / "trust" / "squad2"
    paragraphs = {row["id"]: row["text"] for row in read_jsonl(squad / "corpus.jsonl")}
    for q in read_jsonl(squad / "questions.jsonl"):
        if q.get("answerable") and q.get("gold_passage_id") in paragraphs:
            add("squad2", q["gold_passage_id"], paragraphs[q["gold_passage_id"]], q["answers"])
    hotpot = SHARED_DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"
    for q in read_jsonl(hotpot):
        answers = [a for a in q["answers"] if a.lower() not in ("yes", "no")]
        for ctx in q["contexts"]:
            if ctx["is_supporting"]:
                add("hotpotqa", "hp:" + ctx["title"], ctx["paragraph_text"], answers)
    if limit is not None:
        random.Random(1).shuffle(items)
        items = items[:limit]
    return items


def perturb(items: list[Item], seed: int) -> list[tuple[Item, str, str, str, str]]:
    """(item, perturbed sentence, kind, original value, replacement) for items with a value."""
    from ragsieve.values import extract_values, fold

    rng = random.Random(seed)
    pools: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)  # (source, kind) -> (group, text)
    values_of: list[list] = []
    for item in items:
        vals = [v for v in extract_values(item.sentence) if v.kind in SWAP_KINDS]
        values_of.append(vals)
        for v in vals:
            pools[(item.source, v.kind)].append((item.group, v.text))
    out = []
    for item, vals in zip(items, values_of, strict=True):
        if not vals:
            continue
        target = rng.choice(vals)
        passage = fold(item.passage)
        candidates = [
            text
            for group, text in pools[(item.source, target.kind)]
            if group != item.group and fold(text) != fold(target.text) and fold(text) not in passage
        ]
        if not candidates:
            continue
        replacement = rng.choice(candidates)
        # the sentence as extract_values saw it (NFKC, dashes) so spans line up
        from ragsieve.values import prepare_text

        prepared = prepare_text(item.sentence)
        s, e = target.span
        out.append((item, prepared[:s] + replacement + prepared[e:], target.kind, target.text, replacement))
    return out


_MONTH_NAMES = [
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November",
    "December",
]  # fmt: skip
_SMALL = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
# unit -> (the other unit as written, converter); the converted value is written with 2 decimals
_CONVERSIONS = {
    "kilometer": ("miles", lambda x: x / 1.609344),
    "mile": ("km", lambda x: x * 1.609344),
    "meter": ("feet", lambda x: x / 0.3048),
    "foot": ("metres", lambda x: x * 0.3048),
    "kilogram": ("pounds", lambda x: x / 0.45359237),
    "pound": ("kg", lambda x: x * 0.45359237),
    "degree_Celsius": ("kelvin", lambda x: x + 273.15),
    "kelvin": ("°C", lambda x: x - 273.15),
}


def reformat(value: Any) -> str | None:
    """The same value written another way (what a paraphrasing answer may do), or None."""
    if value.kind == "date" and len(value.dates) == 1:
        y, m, d = value.dates[0]
        if m and d:
            alt = f"{d} {_MONTH_NAMES[m - 1]} {y}"
            return alt if alt != value.text else f"{_MONTH_NAMES[m - 1]} {d}, {y}"
        if m:
            return None
        return None
    if value.kind == "number" and value.number is not None and value.number == int(value.number):
        n = int(value.number)
        if 0 <= n <= 12 and value.text.isdigit():
            return _SMALL[n]
        if n >= 1000 and "," in value.text:
            return str(n)
        if n >= 10000 and value.text.isdigit():
            return f"{n:,}"
        return None
    if value.kind == "quantity" and value.unit in _CONVERSIONS and value.number is not None:
        unit, convert = _CONVERSIONS[value.unit]
        return f"{convert(value.number):.2f} {unit}"
    if value.kind == "name" and len(value.text.split()) >= 2:
        first, rest = value.text.split(" ", 1)
        if first[:1].isupper() and first.isalpha() and len(first) > 2:
            return f"{first[0]}. {rest}"
    return None


def reformatted(items: list[Item]) -> list[tuple[Item, str, str, str, str]]:
    """(item, sentence with one value rewritten, kind, old, new) for items with a rewritable value."""
    from ragsieve.values import extract_values, prepare_text

    out = []
    for item in items:
        for v in extract_values(item.sentence):
            alt = reformat(v)
            if alt:
                prepared = prepare_text(item.sentence)
                out.append((item, prepared[: v.span[0]] + alt + prepared[v.span[1] :], v.kind, v.text, alt))
                break
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=None, help="at most this many supported sentences")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-embedding", action="store_true", help="lexical recall only (no embedder)")
    parser.add_argument("--examples", type=Path, default=None, help="write every judged pair here (jsonl)")
    parser.add_argument("--no-write", action="store_true", help="print, do not write docs/results.md")
    args = parser.parse_args()

    from ragsieve.config import PipelineConfig
    from ragsieve.verify import LexicalEmbeddingJudge, verify_answer
    from ragsieve.verify.grounding import ground_values

    threshold = PipelineConfig().sieve.support_threshold
    items = load_items(args.limit)
    perturbed = perturb(items, args.seed)
    if args.no_embedding:
        judge = LexicalEmbeddingJudge(embedding_weight=0.0)
    else:
        from ragsieve.embed import load_embedder

        judge = LexicalEmbeddingJudge(embedder=load_embedder())
    judge.warm_up()

    def flagged(sentence: str, passage: str, grounding: bool) -> tuple[bool, list]:
        verdicts = verify_answer(sentence + " [1]", [passage], judge, threshold, value_grounding=grounding)
        return (not all(v.supported for v in verdicts)), [f for v in verdicts for f in v.value_failures]

    t0 = time.perf_counter()
    rows_out = []
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # key -> [flagged, n]
    for item, changed, kind, old, new in perturbed:
        for label, sentence in (("clean", item.sentence), ("perturbed", changed)):
            judge_flag, _ = flagged(sentence, item.passage, False)
            both_flag, failures = flagged(sentence, item.passage, True)
            ground_flag = not ground_values(sentence, item.passage).grounded
            for method, flag in (("judge", judge_flag), ("judge+grounding", both_flag), ("grounding", ground_flag)):
                for key in (f"{method}|{label}|all", f"{method}|{label}|{item.source}", f"{method}|{label}|{kind}"):
                    counts[key][0] += int(flag)
                    counts[key][1] += 1
            rows_out.append(
                {
                    "source": item.source,
                    "label": label,
                    "kind": kind,
                    "swapped": [old, new],
                    "sentence": sentence,
                    "judge_flag": judge_flag,
                    "combined_flag": both_flag,
                    "failures": failures,
                }
            )
    rewritten = reformatted(items)
    for item, changed, kind, old, new in rewritten:
        judge_flag, _ = flagged(changed, item.passage, False)
        both_flag, failures = flagged(changed, item.passage, True)
        for method, flag in (("judge", judge_flag), ("judge+grounding", both_flag)):
            for key in (f"{method}|rewritten|all", f"{method}|rewritten|{kind}"):
                counts[key][0] += int(flag)
                counts[key][1] += 1
        rows_out.append(
            {
                "source": item.source,
                "label": "rewritten",
                "kind": kind,
                "swapped": [old, new],
                "sentence": changed,
                "judge_flag": judge_flag,
                "combined_flag": both_flag,
                "failures": failures,
            }
        )
    elapsed = time.perf_counter() - t0
    if args.examples:
        args.examples.parent.mkdir(parents=True, exist_ok=True)
        with args.examples.open("w", encoding="utf-8") as f:
            for r in rows_out:
                f.write(json.dumps(r) + "\n")

    def cell(method: str, label: str, scope: str) -> str:
        k, n = counts[f"{method}|{label}|{scope}"]
        return pct(k, n)

    judge_desc = "lexical recall only" if args.no_embedding else "lexical recall + bundled MiniLM embedding, w=0.5"
    table = markdown_table(
        ["check", "perturbed caught", "unperturbed falsely flagged"],
        [
            [f"claim judge alone ({judge_desc})", cell("judge", "perturbed", "all"), cell("judge", "clean", "all")],
            [
                "claim judge + value grounding (verify_answer default)",
                cell("judge+grounding", "perturbed", "all"),
                cell("judge+grounding", "clean", "all"),
            ],
            ["value grounding alone", cell("grounding", "perturbed", "all"), cell("grounding", "clean", "all")],
        ],
    )
    scopes = ["squad2", "hotpotqa", *SWAP_KINDS]
    by_scope = markdown_table(
        ["subset", "perturbed caught (judge + grounding)", "unperturbed falsely flagged (judge + grounding)"],
        [[s, cell("judge+grounding", "perturbed", s), cell("judge+grounding", "clean", s)] for s in scopes],
    )
    rewrite_table = markdown_table(
        [
            "value rewritten (same value, other form)",
            "falsely flagged: judge alone",
            "falsely flagged: judge + grounding",
        ],
        [
            [scope, cell("judge", "rewritten", scope), cell("judge+grounding", "rewritten", scope)]
            for scope in ("all", *SWAP_KINDS)
        ],
    )
    judge_note = (
        " The claim judge here is lexical recall alone (`--no-embedding`): the sieve's default judge also mixes in "
        "the bundled MiniLM similarity (w=0.5), which was not installed where this ran; rerun without "
        "`--no-embedding` for that row. Value grounding does not depend on the judge."
        if args.no_embedding
        else ""
    )
    n_sq = sum(1 for p in perturbed if p[0].source == "squad2")
    body = (
        f"{len(perturbed)} supported sentences with a swappable value ({n_sq} SQuAD 2.0 answerable, "
        f"{len(perturbed) - n_sq} HotpotQA supporting paragraphs), each judged unperturbed and with one value "
        f"swapped; support threshold {threshold} (`sieve.support_threshold`, not tuned on this data); "
        f"seed {args.seed}; {elapsed:.0f} s for all judgements. Percentages with 95% Wilson intervals.{judge_note}\n\n"
        f"{table}\n\nBy data set and by the kind of value swapped:\n\n{by_scope}\n\n"
        "A harder false-flag test: the same supported sentences with one value written another way (a full date "
        'as "12 March 1933" vs "March 12, 1933", 1,230 vs 1230, small numbers as words, km/miles, m/feet, '
        "kg/pounds and °C/kelvin converted to 2 decimals, a first name cut to its initial), which a correct "
        "checker must still accept:\n\n"
        f"{rewrite_table}\n\n"
        "Goal: at least 95% caught with at most 5% false flags. A false flag on an unperturbed sentence means "
        "the extractor read a value the paragraph states in a form `ragsieve.values` does not match; "
        "`--examples FILE` writes every judged pair with its failed values for reading them.\n\n"
        "Read with care: the unperturbed sentences are verbatim copies of their paragraph, so the false-flag "
        "share measures whether the extractor and the matcher agree with themselves, not how often a paraphrased "
        "model answer is wrongly refused (a sentence opening with a capitalised word the evidence never uses, "
        'e.g. "Scientists ...", is refused). Disclosure: a first run on this data gave 93.0% caught and 5.3% '
        "falsely flagged; reading those cases found matcher bugs (possessives and apostrophes tokenised "
        'differently on the two sides, a lower-case "a" taken for an initial, sentence-opening names not read), '
        "which were fixed in `ragsieve.values` as general rules; a later look at the rewritten set found one-letter "
        'units read after years and ordinals ("the 2013 A. Sugar Bowl" as 2013 amperes), also fixed as a general '
        "rule. Nothing else was changed, and no threshold is involved."
    )
    title = "Verification: value grounding on swapped values"
    publish_section("results/verification.md", "value-grounding", title, body, write=not args.no_write)


if __name__ == "__main__":
    main()
