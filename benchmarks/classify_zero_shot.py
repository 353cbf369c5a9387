"""Accuracy of the LabelClassifier presets with the bundled model: uncalibrated, contextual
calibration, and a log-bias fitted on a few labelled training examples.

Writes the section "LabelClassifier presets: zero-shot accuracy" of docs/results/knowledge-filtering.md.
Data: fixed-seed samples of the public test splits under shared/data (SST-2, MR, SST-5,
TREC, CoLA) and of their train splits for the fitted bias. No knowledge is given.

Run: python benchmarks/classify_zero_shot.py [--n 100] [--n-fit 16] [--tasks sst-2 mr ...]
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter

import numpy as np

from _data import read_jsonl
from _report import SHARED_DATA, markdown_table, write_section
from ragsieve.generate.classify import LabelClassifier, TaskPreset
from ragsieve.llm.llama_cpp import LlamaCppLLM

TASKS: dict[str, TaskPreset] = {
    "sst-2": "sentiment",
    "mr": "sentiment",
    "sst-5": "sentiment-5",
    "trec": "question-category",
    "cola": "acceptability",
}


def sample(task: str, split: str, n: int, seed: int) -> list[dict[str, str]]:
    rows = list(read_jsonl(SHARED_DATA / task / f"{split}.jsonl"))
    random.Random(seed).shuffle(rows)
    return rows[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100, help="test examples per task")
    parser.add_argument("--n-fit", type=int, default=16, help="labelled train examples for the fitted bias")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    args = parser.parse_args()

    llm = LlamaCppLLM(n_threads=1)
    llm.warm_up()
    rows = []
    for task in args.tasks:
        t0 = time.perf_counter()
        test = sample(task, "test", args.n, seed=0)
        train = sample(task, "train", args.n_fit, seed=1)
        clf = LabelClassifier.from_preset(TASKS[task])
        scores = np.stack([clf.label_scores(llm, r["text"]) for r in test])
        y = np.array([clf.labels.index(r["label"]) for r in test])
        clf.fit_calibration(llm)
        contextual = np.asarray(clf.bias_).copy()
        clf.fit(llm, [r["text"] for r in train], [r["label"] for r in train])
        fitted = np.asarray(clf.bias_)
        majority = Counter(y.tolist()).most_common(1)[0][1] / len(y)
        acc = [float(((scores + b).argmax(1) == y).mean()) for b in (0.0, contextual, fitted)]
        rows.append(
            [
                task,
                TASKS[task],
                len(test),
                round(majority, 3),
                *[round(a, 3) for a in acc],
                round(time.perf_counter() - t0),
            ]
        )
        print(rows[-1], flush=True)
    body = (
        "Model: bundled SmolLM2-135M-Instruct Q4_1 via llama.cpp (`n_threads=1`). Each task: a fixed-seed "
        f"sample (seed 0) of {args.n} examples of the public test split (CoLA: the GLUE dev set, as LM-BFF), "
        "no knowledge, the `LabelClassifier` preset named in the table, next-token label scoring. "
        "`uncalibrated`: argmax of the label log-probabilities; `contextual`: contextual calibration "
        "(Zhao et al. 2021) on the content-free inputs 'N/A', '', '[MASK]'; `fitted bias`: a per-label "
        f"log-bias fitted on {args.n_fit} train examples (fixed-seed sample, seed 1). `majority`: the share "
        "of the most frequent label in the sample. With n=100 the 95% interval is about +-0.1.\n\n"
        + markdown_table(
            ["task", "preset", "n", "majority", "uncalibrated", "contextual", "fitted bias", "seconds"], rows
        )
    )
    write_section(
        "results/knowledge-filtering.md", "classify-zero-shot", "LabelClassifier presets: zero-shot accuracy", body
    )
    print(body)


if __name__ == "__main__":
    main()
