"""Task router on phrasings held out from training: does "Who is X?" about an obscure person reach retrieval?

Trains the TF-IDF task router on the bundled training split twice, without and with the
``entity-template`` rows (who-is / bio / occupation phrasings about invented people), and scores
both on (a) the bundled test split and (b) ``tasks/data/task_requests_heldout_phrasings.jsonl``:
phrasings and names that occur in no training row.

    python benchmarks/tasks_router_phrasings.py
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

from _data import read_jsonl  # noqa: E402
from _report import markdown_table, publish_section  # noqa: E402


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    from ragsieve.eval.selective import wilson_interval
    from ragsieve.tasks.classifier import TfidfTaskClassifier
    from ragsieve.tasks.labels import bundled_requests_path, load_task_requests

    data = bundled_requests_path()
    heldout_path = data.with_name("task_requests_heldout_phrasings.jsonl")
    origin = {}
    for row in read_jsonl(data):
        origin[row["id"]] = row.get("origin", "")
    train, test = load_task_requests("train"), load_task_requests("test")
    heldout = load_task_requests(path=heldout_path)
    seen = {r.text.lower() for r in train + test}
    if any(r.text.lower() in seen for r in heldout):
        raise SystemExit("a held-out phrasing occurs in the training data; the held-out file must be disjoint")

    def fmt(k: int, n: int) -> str:
        lo, hi = wilson_interval(k, n)
        return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]"

    rows = []
    before = [r for r in train if origin[r.id] != "entity-template"]
    for name, rows_train in (
        ("before: training split without the entity-template rows", before),
        ("after: full training split", train),
    ):
        clf = TfidfTaskClassifier().fit([r.text for r in rows_train], [r.label for r in rows_train])
        cells: list[object] = [name, len(rows_train)]
        for split in (test, heldout):
            pred = clf.predict([r.text for r in split])
            k = sum(p == r.label for p, r in zip(pred, split, strict=True))
            cells.append(fmt(k, len(split)))
        pred = clf.predict([r.text for r in heldout])
        needs = [(p, r) for p, r in zip(pred, heldout, strict=True) if r.label != "general_qa"]
        reach = sum(p != "general_qa" for p, _ in needs)
        cells.append(fmt(reach, len(needs)))
        rows.append(cells)
    labels = ("information_retrieval", "text_generation", "general_qa")
    counts = {lab: sum(r.label == lab for r in heldout) for lab in labels}
    body = (
        "TF-IDF task router (`ragsieve.tasks.classifier.TfidfTaskClassifier`, default hyperparameters). "
        f"Held-out phrasings: `src/ragsieve/tasks/data/task_requests_heldout_phrasings.jsonl`, n={len(heldout)} "
        f"({counts['information_retrieval']} information_retrieval, {counts['text_generation']} text_generation, "
        f"{counts['general_qa']} general_qa); every phrasing and every person or work name in it is absent from "
        "the training rows. *Reaches retrieval*: share of the held-out requests that need retrieval "
        "(information_retrieval or text_generation) that the router does not send to closed-book general_qa. "
        "Accuracy with 95% Wilson intervals.\n\n"
        + markdown_table(
            ["router trained on", "train rows", f"test split accuracy (n={len(test)})",
             f"held-out phrasings accuracy (n={len(heldout)})", "held-out: reaches retrieval"],
            rows,
        )
    )
    publish_section("results/task-adaptive.md", "tasks-router-phrasings", "Task router on held-out phrasings", body)


if __name__ == "__main__":
    main()
