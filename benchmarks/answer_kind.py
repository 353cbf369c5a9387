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

Held out (reported): the held-out ids of HotpotQA, SQuAD 2.0 and ConflictQA, TREC ``test.jsonl``
(mapped the same way; a ``numeric`` question counts as right when any numeric kind is predicted) and
the 52 bundled demo questions (never trained on, labelled from their
first ``answer_alias``). Baseline: the most frequent training kind of the question's first two
words (a lookup table learned on the same training data). The regularisation ``C`` is chosen by
5-fold cross-validation on the training data alone.

python benchmarks/answer_kind.py --train      # fit, write ragsieve/resources/answer_kind.npz, report
python benchmarks/answer_kind.py              # report with the shipped model
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

from benchmarks._report import SHARED_DATA, markdown_table, write_section  # noqa: E402
from ragsieve.io import read_jsonl  # noqa: E402

TREC_KINDS = {"human": "name", "location": "name", "description": "description", "numeric": "numeric"}
POPQA_SAMPLE = 3000
SEED = 13


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
    return rows + labelled("popqa") + labelled("trec-train")


def test_sets() -> dict[str, list[tuple[str, str, str]]]:
    sets = {s: [r for r in labelled(s) if held_out(r[0])] for s in SPLIT_SOURCES}
    sets["trec-test"] = labelled("trec-test")
    sets["demo"] = labelled("demo")
    return sets


def _opening(question: str) -> str:
    words = question.lower().split()
    return " ".join(words[:2])


def _right(predicted: str, gold: str) -> bool:
    from ragsieve.text.kind import coarse_kind

    return predicted == gold or (gold == "numeric" and coarse_kind(predicted) == "numeric")


def train(rows: list[tuple[str, str, str]]) -> Any:
    from sklearn.model_selection import cross_val_score

    from ragsieve.text.kind import AnswerKindClassifier, coarse_kind, question_features

    questions = [q for _, q, _ in rows]
    kinds = [k for _, _, k in rows]
    best_c, best_bal, best = 1.0, False, -1.0
    for c, bal in [(c, bal) for c in (1.0, 4.0, 16.0) for bal in (False, True)]:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline

        # the first head's choice (numeric kinds as one)
        pipe = make_pipeline(
            TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True),
            LogisticRegression(C=c, max_iter=2000, class_weight="balanced" if bal else None),
        )
        # balanced accuracy: the rare kinds (dates, numbers) matter as much as the common ones
        score = float(
            cross_val_score(
                pipe, [question_features(q) for q in questions], [coarse_kind(k) for k in kinds], cv=5,
                scoring="balanced_accuracy",
            ).mean()
        )
        print(f"C={c} balanced={bal}: 5-fold balanced accuracy {score:.3f}", file=sys.stderr)
        if score > best:
            best_c, best_bal, best = c, bal, score
    clf = AnswerKindClassifier(C=best_c, balanced=best_bal).fit(questions, kinds)
    return clf, f"{best_c}, class weights {'balanced' if best_bal else 'uniform'}", best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", action="store_true", help="fit and write the bundled model first")
    parser.add_argument("--no-write", action="store_true", help="print the report, write no docs")
    args = parser.parse_args()

    from ragsieve.eval.selective import wilson_interval
    from ragsieve.text.kind import AnswerKindClassifier, bundled_classifier, bundled_path

    rows = training_rows()
    if args.train:
        clf, c, cv = train(rows)
        counts = Counter(k for _, _, k in rows)
        info = {
            "trained_on": "HotpotQA dev-distractor-500, SQuAD 2.0 answerable, ConflictQA (ids not held out by "
            "benchmarks/answer_kind.py held_out), PopQA sample 3000 (seed 13), TREC train (human, location, "
            "description, numeric)",
            "n": len(rows),
            "label_counts": dict(counts),
            "C": c,
            "cv_accuracy": round(cv, 4),
        }
        clf.save(bundled_path(), info)
        bundled_classifier.cache_clear()
    clf = AnswerKindClassifier.load(bundled_path())
    lookup: dict[str, Counter[str]] = {}
    for _, q, k in rows:
        if k == "numeric":
            continue  # the baseline predicts kinds, and "numeric" is not one
        lookup.setdefault(_opening(q), Counter())[k] += 1
    overall = Counter(k for _, _, k in rows if k != "numeric").most_common(1)[0][0]

    def pct(k: int, n: int) -> str:
        lo, hi = wilson_interval(k, n)
        return f"{100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] ({k}/{n})"

    table: list[list[object]] = []
    for name, test in test_sets().items():
        pred = clf.predict([q for _, q, _ in test])
        right = sum(_right(p, k) for p, (_, _, k) in zip(pred, test, strict=True))
        base = sum(
            _right(lookup[_opening(q)].most_common(1)[0][0] if _opening(q) in lookup else overall, k)
            for _, q, k in test
        )
        table.append([name, pct(right, len(test)), pct(base, len(test))])
    made_of = clf.predict(["What is graphene made of?"])[0]
    header = json.loads(bundled_path().with_name(bundled_path().name + ".json").read_text(encoding="utf-8"))
    info = header.get("info", {})
    body = (
        "The answer-kind classifier (`ragsieve.text.kind`, TF-IDF + two logistic regressions: name / description / "
        "yes-no / numeric, then date / number / quantity for a numeric question; shipped as arrays in "
        f"`ragsieve/resources/answer_kind.npz`), trained on {info.get('n', '?')} questions: {info.get('trained_on')}; "
        f"labels from the gold answers ({info.get('label_counts')}); C = {info.get('C')} chosen by 5-fold "
        f"cross-validation on the training data (balanced accuracy {info.get('cv_accuracy')}). Held-out accuracy "
        "(95% Wilson intervals; labels from gold answers, so a label is sometimes arguable: SQuAD spans such as "
        "\"the 10th century\" are dates, a one-word common noun is a description) against the best simple "
        "baseline, the most frequent training kind of the question's first two words:\n\n"
        + markdown_table(["held-out set", "classifier", "first-two-words baseline"], table)
        + f"\n\n\"What is graphene made of?\" is classified as `{made_of}`."
    )
    print(body)
    if not args.no_write:
        write_section("results/conflicts.md", "answer-kind", "Answer kind: learned from gold answers", body)


if __name__ == "__main__":
    main()
