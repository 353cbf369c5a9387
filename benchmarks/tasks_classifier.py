"""Task classifier accuracy and latency on the held-out split of the bundled request set.

python benchmarks/tasks_classifier.py            # TF-IDF + both LLM modes on the whole test split
python benchmarks/tasks_classifier.py --limit 60 # fewer LLM calls
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from _report import markdown_table, write_section  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--limit", type=int, default=0, help="evaluate the LLM modes on the first N test rows only"
    )
    args = ap.parse_args()

    from ragsieve.config import LLMConfig
    from ragsieve.llm import load_llm
    from ragsieve.tasks.classifier import LLMTaskClassifier, TaskClassifier, TfidfTaskClassifier
    from ragsieve.tasks.labels import TASK_LABELS, load_task_requests

    train, test = load_task_requests("train"), load_task_requests("test")
    t0 = time.perf_counter()
    tfidf = TfidfTaskClassifier().fit([r.text for r in train], [r.label for r in train])
    fit_s = time.perf_counter() - t0
    llm = load_llm(LLMConfig(n_threads=1))
    llm.warm_up()
    json_clf = LLMTaskClassifier(mode="json")
    json_clf.warm_up(llm)
    lp_raw = LLMTaskClassifier(mode="logprob", calibrate=False)
    lp_raw.warm_up(llm)
    lp_cal = LLMTaskClassifier(mode="logprob", calibrate=True)
    lp_cal.warm_up(llm)

    llm_rows = test[: args.limit] if args.limit else test
    variants: list[tuple[str, TaskClassifier, list]] = [
        ("TF-IDF (word 1-2 + char 2-4) + name-shape features + logistic regression", tfidf, test),
        ("LLM few-shot, schema-constrained JSON (generate_json)", json_clf, llm_rows),
        ("LLM few-shot, label log-probs, uncalibrated", lp_raw, llm_rows),
        ("LLM few-shot, label log-probs, contextual calibration", lp_cal, llm_rows),
    ]
    table = []
    for name, clf, rows in variants:
        preds, lat, fallbacks = [], [], 0
        for r in rows:
            p = clf.classify(r.text)
            preds.append(p.label)
            lat.append(p.latency_ms)
            fallbacks += p.fallback
        n = len(rows)
        acc = sum(p == r.label for p, r in zip(preds, rows, strict=True)) / n
        amb = [(p, r) for p, r in zip(preds, rows, strict=True) if r.ambiguous]
        amb_acc = sum(p == r.label for p, r in amb) / len(amb) if amb else float("nan")
        per = {lb: sum(p == lb for p in preds) for lb in TASK_LABELS}
        se = (acc * (1 - acc) / n) ** 0.5
        lat_sorted = sorted(lat)
        table.append(
            [
                name,
                n,
                f"{acc:.3f} ± {1.96 * se:.3f}",
                f"{amb_acc:.3f} ({len(amb)})",
                f"{statistics.median(lat):.2f}",
                f"{lat_sorted[int(0.95 * (n - 1))]:.2f}",
                fallbacks,
                " / ".join(str(per[lb]) for lb in TASK_LABELS),
            ]
        )
        print(table[-1], flush=True)
    gold = {lb: sum(r.label == lb for r in test) for lb in TASK_LABELS}
    body = (
        "Data: `src/ragsieve/tasks/data/task_requests.jsonl`, held-out `test` split (phrasing groups "
        f"unseen in training): {len(test)} requests (gold IR / TG / QA = {gold['information_retrieval']} / "
        f"{gold['text_generation']} / {gold['general_qa']}); TF-IDF trained on the {len(train)} "
        f"`train` rows in {fit_s:.2f} s. LLM: bundled SmolLM2-135M-Instruct (llama.cpp, 1 thread), the "
        "three-layer few-shot prompt of `ragsieve.tasks.classifier`. Accuracy ± 95% normal-approximation "
        "interval; latency per request in ms (single request, no batching).\n\n"
        + markdown_table(
            [
                "classifier",
                "n",
                "accuracy",
                "acc. on ambiguous (n)",
                "median ms",
                "p95 ms",
                "fallbacks",
                "predicted IR / TG / QA",
            ],
            table,
        )
        + "\n\nThe paper reports 92.3% with a large LLM; the 135M model mostly answers one label, which the "
        "contextual calibration only partly corrects. The trained TF-IDF router is the default "
        '(`stages.tasks.classifier = "tfidf"`).'
    )
    write_section(
        "results/task-adaptive.md", "tasks-classifier", "Task-adaptive RAG: task classifier accuracy and latency", body
    )


if __name__ == "__main__":
    main()
