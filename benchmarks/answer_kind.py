"""Train and measure the answer-kind classifier (``ragsieve.text.kind``).

Labels come from gold answers (``ragsieve.text.kind.kind_of_answer``: the kind of the typed value
covering the answer, yes/no, a short capitalised name, else a description), never from the
question's wording. Training data (the documented training split):

* HotpotQA ``hotpotqa_dev_distractor_500``, SQuAD 2.0 answerable (``trust/squad2``) and ConflictQA
  (``trust/conflictqa``): the questions whose id is NOT held out by :func:`held_out` (a fixed hash
  of the id: about 60 % train, 40 % held out). The held-out part is what the conflict benchmarks
  (``benchmarks/conflicts.py``) report on, so the sets reported there are never trained on;
* PopQA (``popqa/popqa.jsonl``; not a reported set here): a seeded sample of 3,000 questions;
* TREC question classification ``train.jsonl`` (Li & Roth): coarse ``human`` and ``location``
  questions as ``name``, ``description`` as ``description``, ``numeric`` as ``numeric`` (they
  train the classifier's first head only: which numeric kind is not in the label); ``entity`` and
  ``abbreviation`` (a thing or an expansion: a name or a description) are left out.
* SQuADShifts ``new_wiki`` (``training/squadshifts/new_wiki.jsonl``, 7,938 questions on new
  Wikipedia articles) and Natural Questions with their gold passage (``training/nq_gold``, 2,905):
  all rows, labelled from their first gold answer like the others. They bring most of the
  questions whose gold answer shows which numeric kind is asked (a date, a count, a quantity).

Held out (reported): the held-out ids of HotpotQA, SQuAD 2.0 and ConflictQA, TREC ``test.jsonl``
(mapped the same way; a ``numeric`` question counts as right when any numeric kind is predicted) and
the bundled demo questions (never trained on, labelled from their
first ``answer_alias``). Under domain shift, never trained on: SQuADShifts ``reddit`` and
``amazon_reviews`` (``training/squadshifts``; evaluation only, all rows). Baseline: the most
frequent training kind of the question's first two words (a lookup table learned on the same
training data); ``--compare`` reports an earlier model's arrays next to the shipped one. The
regularisation ``C`` and the class weights are chosen by 5-fold cross-validation on the training
data alone (the whole two-head classifier, scored by balanced accuracy over the kinds).

python benchmarks/answer_kind.py --train      # fit, write ragsieve/resources/answer_kind.npz, report
python benchmarks/answer_kind.py              # report with the shipped model
python benchmarks/answer_kind.py --compare runs/answer_kind/before.npz   # and an earlier model beside it

``--reader minilm``: the answer kind on the bundled demo questions through the readers instead:
each answerable demo question's gold documents (loaded and chunked as ``ragsieve ingest`` does,
default settings) read by the extractive reader (``ragsieve.text.reader``), and the kind of its
most probable span (``kind_of_answer``; "no answer" when no chunk's answer clears the reader's
threshold), against the gold kind (the first answer alias's, as above), beside the classifier's
kind for the question (what the rules read with) and the kind of the rules' own passage answer
(``ragsieve.text.passage.passage_answer``'s value over the same chunks; "no answer" when none).
Writes its section of docs/results/reader.md.

python benchmarks/answer_kind.py --reader minilm
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import SHARED_DATA, markdown_table, publish_section  # noqa: E402
from ragsieve.io import read_jsonl  # noqa: E402

TREC_KINDS = {"human": "name", "location": "name", "description": "description", "numeric": "numeric"}
POPQA_SAMPLE = 3000
SEED = 13
# training question sets labelled from their gold answers (under shared/data/training)
TRAINING_SETS = {"new_wiki": "squadshifts/new_wiki.jsonl", "nq_gold": "nq_gold/nq_gold.jsonl"}
# evaluation only (domain shift): nothing trained on them ships
SHIFTED_SETS = {"reddit": "squadshifts/reddit.jsonl", "amazon_reviews": "squadshifts/amazon_reviews.jsonl"}
# the regularisation strengths and class weights the cross-validation chooses among
C_GRID = (1.0, 4.0, 16.0, 64.0)
# questions the report shows the reading of (illustrations; nothing is chosen on them)
PROBES = (
    "What is graphene made of?",
    "At what wavelength does chlorophyll absorb light?",
    "At what temperature does lead melt?",
    "At what speed does sound travel in water?",
    "At what age can a person vote in Brazil?",
    "At what depth does the twilight zone of the ocean begin?",
    "At what altitude do airliners cruise?",
    "At what time does the sun rise in London on midsummer's day?",
)


def held_out(qid: str) -> bool:
    """Whether a question id is in the held-out part (about 40 %, a fixed hash of the id)."""
    return int(hashlib.sha1(qid.encode("utf-8")).hexdigest()[:8], 16) % 5 < 2


def _answers(row: dict[str, Any]) -> list[str]:
    a = row.get("answers")
    if isinstance(a, str):
        a = [a]
    return [str(x) for x in a or []]


def labelled(source: str) -> list[tuple[str, str, str]]:
    """(id, question, kind) rows of one source."""
    from ragsieve.text.kind import kind_of_answer

    out: list[tuple[str, str, str]] = []
    trust = SHARED_DATA / "trust"
    if source == "hotpotqa":
        for r in read_jsonl(SHARED_DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"):
            if _answers(r):
                out.append((r["id"], r["question"], kind_of_answer(_answers(r)[0])))
    elif source == "squad2":
        for r in read_jsonl(trust / "squad2" / "questions.jsonl"):
            if r.get("answerable") and _answers(r):
                out.append((r["id"], r["question"], kind_of_answer(_answers(r)[0])))
    elif source == "conflictqa":
        for r in read_jsonl(trust / "conflictqa" / "questions.jsonl"):
            if _answers(r):
                out.append((r["id"], r["question"], kind_of_answer(_answers(r)[0])))
    elif source == "popqa":
        rows = list(read_jsonl(SHARED_DATA / "popqa" / "popqa.jsonl"))
        random.Random(SEED).shuffle(rows)
        for r in rows[:POPQA_SAMPLE]:
            if _answers(r):
                out.append((str(r["id"]), r["question"], kind_of_answer(_answers(r)[0])))
    elif source in ("trec-train", "trec-test"):
        name = "train.jsonl" if source == "trec-train" else "test.jsonl"
        for i, r in enumerate(read_jsonl(SHARED_DATA / "trec" / name)):
            if r["label"] in TREC_KINDS:
                out.append((f"{source}-{i}", r["text"], TREC_KINDS[r["label"]]))
    elif source in TRAINING_SETS or source in SHIFTED_SETS:
        path = {**TRAINING_SETS, **SHIFTED_SETS}[source]
        for r in read_jsonl(SHARED_DATA / "training" / path):
            if _answers(r):
                out.append((str(r["id"]), r["question"], kind_of_answer(_answers(r)[0])))
    elif source == "demo":
        from ragsieve.demo import demo_questions

        for r in demo_questions():
            out.append((r["id"], r["question"], kind_of_answer(r["answer_aliases"][0])))
    else:
        raise ValueError(source)
    return out


SPLIT_SOURCES = ("hotpotqa", "squad2", "conflictqa")


def training_rows() -> list[tuple[str, str, str]]:
    rows = [r for s in SPLIT_SOURCES for r in labelled(s) if not held_out(r[0])]
    return rows + labelled("popqa") + labelled("trec-train") + [r for s in TRAINING_SETS for r in labelled(s)]


def test_sets() -> dict[str, list[tuple[str, str, str]]]:
    """The held-out sets (the first five) and the sets under domain shift (reddit, amazon_reviews)."""
    sets = {s: [r for r in labelled(s) if held_out(r[0])] for s in SPLIT_SOURCES}
    sets["trec-test"] = labelled("trec-test")
    sets["demo"] = labelled("demo")
    for s in SHIFTED_SETS:
        sets[s] = labelled(s)
    return sets


def _opening(question: str) -> str:
    words = question.lower().split()
    return " ".join(words[:2])


def _right(predicted: str, gold: str) -> bool:
    from ragsieve.text.kind import coarse_kind

    return predicted == gold or (gold == "numeric" and coarse_kind(predicted) == "numeric")


def balanced_accuracy(predicted: list[str], gold: list[str]) -> float:
    """The mean over gold kinds of the share read right (a TREC ``numeric`` row: any numeric kind)."""
    per: dict[str, list[bool]] = {}
    for p, k in zip(predicted, gold, strict=True):
        per.setdefault(k, []).append(_right(p, k))
    return sum(sum(v) / len(v) for v in per.values()) / len(per)


def train(rows: list[tuple[str, str, str]]) -> Any:
    from sklearn.model_selection import StratifiedKFold

    from ragsieve.text.kind import AnswerKindClassifier

    questions = [q for _, q, _ in rows]
    kinds = [k for _, _, k in rows]
    folds = list(StratifiedKFold(n_splits=5, shuffle=True, random_state=SEED).split(questions, kinds))
    best_c, best_bal, best = 1.0, False, -1.0
    for c, bal in [(c, bal) for c in C_GRID for bal in (False, True)]:
        # the whole classifier (both heads), scored by balanced accuracy over the kinds: the rare
        # kinds (dates, numbers, quantities) matter as much as the common ones
        scores = []
        for fit_idx, val_idx in folds:
            fitted = AnswerKindClassifier(C=c, balanced=bal)
            fitted.fit([questions[i] for i in fit_idx], [kinds[i] for i in fit_idx])
            predicted = fitted.predict([questions[i] for i in val_idx])
            scores.append(balanced_accuracy(predicted, [kinds[i] for i in val_idx]))
        score = sum(scores) / len(scores)
        print(f"C={c} balanced={bal}: 5-fold balanced accuracy {score:.3f}", file=sys.stderr)
        if score > best:
            best_c, best_bal, best = c, bal, score
    clf = AnswerKindClassifier(C=best_c, balanced=best_bal).fit(questions, kinds)
    return clf, f"{best_c}, class weights {'balanced' if best_bal else 'uniform'}", best


# how models trained before the whole classifier was cross-validated were chosen
CV_FIRST_HEAD = "the first head alone, balanced accuracy over its four labels"
HELD_OUT = ("hotpotqa", "squad2", "conflictqa", "trec-test", "demo")


def _header(path: Path) -> dict[str, Any]:
    from ragsieve.array_models import header_path

    return dict(json.loads(header_path(path).read_text(encoding="utf-8")))


def reader_kinds(args: argparse.Namespace) -> None:
    """The kind of the answer each reader gives on the demo questions' gold documents."""
    import time

    from benchmarks._stats import rate_with_interval as pct
    from ragsieve.config import IngestConfig
    from ragsieve.demo import demo_corpus_dir, demo_questions
    from ragsieve.ingest import chunk_text, load_file
    from ragsieve.text.kind import expected_kind, kind_of_answer
    from ragsieve.text.passage import passage_answer
    from ragsieve.text.readings import shared_reader

    reader = shared_reader()
    reader.warm_up()
    root = demo_corpus_dir()
    config = IngestConfig()
    hits = {"classifier (question)": 0, "rule reader (passage answer)": 0, "extractive reader (span)": 0}
    answered = {"rule reader (passage answer)": 0, "extractive reader (span)": 0}
    n = 0
    t0 = time.perf_counter()
    for r in demo_questions():
        gold = kind_of_answer(r["answer_aliases"][0])
        chunks = [
            c.text
            for doc_id in r["doc_ids"]
            for d in load_file(root / doc_id, root, config)
            for c in chunk_text(d.text, max_tokens=config.chunking.max_tokens)
        ]
        if not chunks:
            continue
        n += 1
        question = r["question"]
        hits["classifier (question)"] += expected_kind(question) == gold
        read = reader.read(question, chunks)
        best = max(read, key=lambda a: a.probability)
        span_kind = kind_of_answer(best.text) if best.answered else "no answer"
        hits["extractive reader (span)"] += span_kind == gold
        answered["extractive reader (span)"] += best.answered
        rules = [passage_answer(question, c) for c in chunks]
        found = next((a for a in rules if a.value is not None), None)
        rule_kind = kind_of_answer(found.value.text) if found is not None and found.value is not None else "no answer"
        hits["rule reader (passage answer)"] += rule_kind == gold
        answered["rule reader (passage answer)"] += found is not None
    rows: list[list[object]] = [
        [name, pct(k, n), pct(answered[name], n) if name in answered else "n/a"] for name, k in hits.items()
    ]
    body = (
        f"The answer kind on the {n} answerable bundled demo questions (gold kind: `kind_of_answer` of the first "
        "answer alias), each question's gold documents loaded and chunked as `ragsieve ingest` does (default "
        f"settings); {time.perf_counter() - t0:.0f} s. The classifier's kind is what the question asks by its "
        "wording (`ragsieve.text.kind.expected_kind`, the rules' guide); the rule reader's is the kind of "
        "`passage_answer`'s value in the first chunk that has one; the extractive reader's is the kind of its most "
        "probable span over the chunks (\"no answer\" when none clears its threshold, which counts as wrong). "
        "95% Wilson intervals.\n\n"
        + markdown_table(["reading", "answer kind right", "gives an answer"], rows)
    )
    title = "Through the checks: answer kind on the demo questions"
    publish_section("results/reader.md", "reader-answer-kind", title, body, write=not args.no_write)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", action="store_true", help="fit and write the model first")
    parser.add_argument("--model", type=Path, default=None, help="the model's arrays (default: the bundled model)")
    parser.add_argument("--compare", type=Path, default=None, help="another model's arrays to report beside it")
    parser.add_argument("--compare-label", default="previous classifier", help="its column's name in the report")
    parser.add_argument("--note", default="", help="a closing paragraph for the report (what was decided)")
    parser.add_argument("--no-write", action="store_true", help="print the report, write no docs")
    parser.add_argument("--reader", choices=("rules", "minilm"), default="rules",
                        help="minilm: the kind of each reader's answer on the demo questions' gold documents")
    args = parser.parse_args()
    if args.reader == "minilm":
        reader_kinds(args)
        return

    import numpy as np

    from ragsieve.eval.selective import bootstrap_interval, wilson_interval
    from ragsieve.text.kind import NUMERIC_KINDS, AnswerKindClassifier, bundled_classifier, bundled_path

    model_path: Path = args.model or bundled_path()
    rows = training_rows()
    if args.train:
        clf, c, cv = train(rows)
        counts = Counter(k for _, _, k in rows)
        info = {
            "trained_on": "HotpotQA dev-distractor-500, SQuAD 2.0 answerable, ConflictQA (ids not held out by "
            "benchmarks/answer_kind.py held_out), PopQA sample 3000 (seed 13), TREC train (human, location, "
            "description, numeric), SQuADShifts new_wiki (all), Natural Questions with gold passages (nq_gold, all)",
            "n": len(rows),
            "label_counts": dict(sorted(counts.items())),
            "C": c,
            "cv_accuracy": round(cv, 4),
            "cv": "the whole classifier, balanced accuracy over the kinds",
        }
        clf.save(model_path, info)
        bundled_classifier.cache_clear()
    models = {"classifier": AnswerKindClassifier.load(model_path)}
    if args.compare:
        models["previous"] = AnswerKindClassifier.load(args.compare)
    lookup: dict[str, Counter[str]] = {}
    for _, q, k in rows:
        if k == "numeric":
            continue  # the baseline predicts kinds, and "numeric" is not one
        lookup.setdefault(_opening(q), Counter())[k] += 1
    overall = Counter(k for _, _, k in rows if k != "numeric").most_common(1)[0][0]

    def baseline(q: str) -> str:
        return lookup[_opening(q)].most_common(1)[0][0] if _opening(q) in lookup else overall

    def pct(k: int, n: int) -> str:
        if not n:
            return "n/a"
        lo, hi = wilson_interval(k, n)
        return f"{100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] ({k}/{n})"

    readers = [*models, "baseline"]
    # right[reader][set] = one bool per question; numeric[set] = whether its gold kind is date/number/quantity
    right: dict[str, dict[str, list[bool]]] = {r: {} for r in readers}
    numeric: dict[str, list[bool]] = {}
    for name, test in test_sets().items():
        questions = [q for _, q, _ in test]
        preds = {m: clf.predict(questions) for m, clf in models.items()}
        preds["baseline"] = [baseline(q) for q in questions]
        for r in readers:
            right[r][name] = [_right(p, k) for p, (_, _, k) in zip(preds[r], test, strict=True)]
        numeric[name] = [k in NUMERIC_KINDS for _, _, k in test]

    def row(label: str, sets: tuple[str, ...], only_numeric: bool) -> list[object]:
        cells: list[object] = [label]
        for r in readers:
            hits = [h for s in sets for h, n in zip(right[r][s], numeric[s], strict=True) if n or not only_numeric]
            cells.append(pct(sum(hits), len(hits)))
        return cells

    shifted = tuple(SHIFTED_SETS)
    shipped = "shipped classifier" if model_path == bundled_path() else f"classifier at {model_path}"
    columns = ["set", *[{"classifier": shipped, "previous": args.compare_label}[m] for m in models],
               "first-two-words baseline"]
    table = [row(s, (s,), False) for s in HELD_OUT] + [row("**held-out sets, pooled**", HELD_OUT, False)]
    table += [row(f"{s} (domain shift)", (s,), False) for s in shifted]
    numeric_table = [row(s, (s,), True) for s in HELD_OUT if any(numeric[s])]
    numeric_table += [row("**held-out sets, pooled**", HELD_OUT, True)]
    numeric_table += [row(f"{s} (domain shift)", (s,), True) for s in shifted]

    difference = ""
    if "previous" in models:
        new = np.array([h for s in HELD_OUT for h in right["classifier"][s]], dtype=float)
        old = np.array([h for s in HELD_OUT for h in right["previous"][s]], dtype=float)
        lo, hi = bootstrap_interval(len(new), lambda idx: float(new[idx].mean() - old[idx].mean()), seed=SEED)
        gained, lost = int(((new == 1) & (old == 0)).sum()), int(((new == 0) & (old == 1)).sum())
        difference = (
            f"Pooled over the held-out sets, the {shipped} minus the {args.compare_label}: "
            f"{100 * (new.mean() - old.mean()):+.1f} points (95% paired bootstrap interval [{100 * lo:+.1f}, "
            f"{100 * hi:+.1f}]; {gained} questions only the {shipped} reads right, {lost} only the "
            f"{args.compare_label}). "
        )
    probe_rows: list[list[object]] = [
        [f'"{q}"', *[f"`{clf.predict([q])[0]}`" for clf in models.values()]] for q in PROBES
    ]
    info = _header(model_path).get("info", {})
    previous = ""
    if args.compare:
        other = _header(args.compare).get("info", {})
        previous = (
            f" The {args.compare_label} was trained on {other.get('n', '?')} questions: {other.get('trained_on')} "
            f"(labels {other.get('label_counts')}); C = {other.get('C')} chosen by 5-fold cross-validation on its "
            f"training data ({other.get('cv', CV_FIRST_HEAD)} {other.get('cv_accuracy')})."
        )
    body = (
        "The answer-kind classifier (`ragsieve.text.kind`, TF-IDF + two logistic regressions: name / description / "
        "yes-no / numeric, then date / number / quantity for a numeric question; shipped as arrays in "
        f"`ragsieve/resources/answer_kind.npz`), trained on {info.get('n', '?')} questions: {info.get('trained_on')}; "
        f"labels from the gold answers ({info.get('label_counts')}); C = {info.get('C')} chosen by 5-fold "
        f"cross-validation on the training data ({info.get('cv', CV_FIRST_HEAD)} "
        f"{info.get('cv_accuracy')}).{previous} Held-out accuracy (95% Wilson intervals; labels from gold answers, "
        "so a label is sometimes arguable: SQuAD spans such as \"the 10th century\" are dates, a one-word common "
        "noun is a description, and a SQuADShifts answer is often a phrase where the question asks for a kind) "
        "against the best simple baseline, the most frequent training kind of the question's first two words. "
        "reddit and amazon_reviews (SQuADShifts) are never trained on: questions about other kinds of text.\n\n"
        + markdown_table(columns, table)
        + "\n\nOn the questions whose gold answer is a date, a number or a quantity (the kind read exactly):\n\n"
        + markdown_table(columns, numeric_table)
        + f"\n\n{difference}How some questions read (illustrations, not chosen on):\n\n"
        + markdown_table(["question", *columns[1:-1]], probe_rows)
        + (f"\n\n{args.note}" if args.note else "")
    )
    publish_section(
        "results/conflicts.md", "answer-kind", "Answer kind: learned from gold answers", body, write=not args.no_write
    )


if __name__ == "__main__":
    main()
