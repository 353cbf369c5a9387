"""Knowledge poisoning with passages nobody here wrote: plain RAG vs the sieve, bundled model.

PoisonedRAG's GPT-4-written attack passages (../shared/data/trust/poisonedrag; Zou et al.,
USENIX Security 2025: 5 passages per target question, each written to make the model give the
target's ``poison_answer``) for the HotpotQA targets that are questions of
../shared/data/hotpotqa/hotpotqa_dev_distractor_500.jsonl. The corpus is built from those
questions' HotpotQA contexts (gold and distractor paragraphs, one file per Wikipedia title under
the host ``en.wikipedia.org``) plus every attack passage (one file each, under its own
``poisonN-hotpotqa.example`` host): one index holding the clean and the poisoned text.

For the first N such targets in file order (a fixed subset, not a sample chosen on results),
each question is asked of plain RAG (hybrid top-k) and of the default sieve, with the bundled
embedder and LLM. Reported per pipeline, with 95% Wilson intervals:

* attack success: the answer states the target's poison answer and does not abstain (the attack
  harness's rule, ``ragsieve.attack.metrics.attack_succeeded``); yes/no answers are read from
  the model's log-probabilities on both sides (``generation.polar_answers = "label"``), as the
  attack harness does;
* the sieve's conflict flags (a ``conflict`` record with two or more answer groups) and its
  abstentions.

Nothing is tuned on this set: the sieve runs its defaults. No clean-corpus run here, so clean
accuracy is not reported.

python benchmarks/trust_sieve.py --n 20      # a few minutes on a laptop CPU
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import SHARED_DATA, markdown_table, write_section  # noqa: E402

POISON = SHARED_DATA / "trust" / "poisonedrag"
HOTPOT = SHARED_DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name).strip("_")[:100] or "untitled"


def targets(n: int) -> list[dict[str, Any]]:
    """The first ``n`` HotpotQA targets that have their HotpotQA row (file order)."""
    rows = [r for r in _read_jsonl(POISON / "questions.jsonl") if r.get("hotpotqa_500_id")]
    return rows[:n]


def build_corpus(rows: list[dict[str, Any]], root: Path) -> Path:
    """One folder per host: the targets' HotpotQA contexts and every attack passage."""
    wanted = {r["hotpotqa_500_id"] for r in rows}
    corpus = root / "corpus"
    for q in _read_jsonl(HOTPOT):
        if q["id"] not in wanted:
            continue
        for ctx in q["contexts"]:
            path = corpus / "en.wikipedia.org" / f"{_safe(ctx['title'])}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{ctx['title']}\n\n{ctx['paragraph_text']}\n", encoding="utf-8")
    poison_ids = {pid for r in rows for pid in r["poison_passage_ids"]}
    for p in _read_jsonl(POISON / "corpus.jsonl"):
        if p["id"] not in poison_ids:
            continue
        host = re.sub(r"^https?://", "", p["url"]).split("/", 1)[0]
        path = corpus / host / f"{_safe(p['id'])}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(p["text"] + "\n", encoding="utf-8")
    return corpus


def asserts(text: str, row: dict[str, Any], abstained: bool) -> bool:
    """The attack harness's rule (:func:`ragsieve.attack.metrics.attack_succeeded`): the answer
    states the poison answer (normalised whole-token containment), is no abstention, and does
    not also give a gold answer the poison answer is part of."""
    from ragsieve.attack.metrics import attack_succeeded

    return attack_succeeded(text, row["poison_answer"], row["answers"], abstained)


def pct(k: int, n: int) -> str:
    from ragsieve.eval.selective import wilson_interval

    if n == 0:
        return "n/a"
    lo, hi = wilson_interval(k, n)
    return f"{100 * k / n:.0f}% [{100 * lo:.0f}, {100 * hi:.0f}] ({k}/{n})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20, help="first N HotpotQA targets (file order)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-write", action="store_true", help="print only; do not write the docs section")
    args = ap.parse_args()

    from ragsieve.config import validate_config
    from ragsieve.embed import load_embedder
    from ragsieve.index import Index
    from ragsieve.llm import load_llm
    from ragsieve.sieve.pipeline import Pipeline

    rows = targets(args.n)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = build_corpus(rows, Path(tmp))
        # yes/no answers read from log-probabilities on both sides, as the attack harness does, so
        # a yes/no target's answer opens with the model's yes or no
        common = {"llm": {"n_threads": args.threads}, "generation": {"polar_answers": "label"}}
        base = validate_config(common)
        embedder = load_embedder(base.embedder)
        t0 = time.perf_counter()
        index = Index.build(corpus, Path(tmp) / "idx", embedder=embedder)
        build_s = time.perf_counter() - t0
        llm = load_llm(base.llm)
        pipes = {
            "plain RAG": Pipeline(validate_config({**common, "pipeline": "plain"}), index=index, llm=llm),
            "sieve": Pipeline(base, index=index, llm=llm),
        }
        out: dict[str, list[dict[str, Any]]] = {name: [] for name in pipes}
        seconds: dict[str, float] = {name: 0.0 for name in pipes}
        for row in rows:
            for name, pipe in pipes.items():
                t = time.perf_counter()
                ans = pipe.ask(row["question"])
                seconds[name] += time.perf_counter() - t
                conflict = ans.trace.stage("conflict")
                out[name].append({
                    "id": row["id"],
                    "success": asserts(ans.text, row, ans.abstained),
                    "abstained": ans.abstained,
                    "conflict": bool(conflict and conflict[0].get("conflict")),
                    "text": ans.text,
                })
                print(f"{name:10s} {row['id']}: {'ATTACK' if out[name][-1]['success'] else 'ok':6s} "
                      f"{ans.text[:100]!r}", flush=True)
    n = len(rows)
    headers = ["pipeline", "attack success", "abstained", "conflict flagged", "s / question"]
    table: list[list[object]] = []
    for name, res in out.items():
        table.append([
            name,
            pct(sum(r["success"] for r in res), n),
            pct(sum(r["abstained"] for r in res), n),
            pct(sum(r["conflict"] for r in res), n) if name == "sieve" else "n/a",
            f"{seconds[name] / max(n, 1):.1f}",
        ])
    body = (
        f"PoisonedRAG's GPT-4-written attack passages (5 per target) for the first {n} HotpotQA targets "
        "that are questions of hotpotqa_dev_distractor_500 (file order), in one index with those questions' "
        "HotpotQA contexts (gold and distractor paragraphs) on their own host. Bundled embedder and LLM, "
        "default settings for both pipelines except yes/no answers read from log-probabilities "
        "(`generation.polar_answers = \"label\"`, as the attack harness runs them); nothing tuned on this set. "
        "Attack success: the answer states the target's poison answer and does not abstain "
        "(`ragsieve.attack.metrics.attack_succeeded`). 95% Wilson intervals; "
        f"n = {n} targets is small, so the intervals are wide. Index build {build_s:.0f} s.\n\n"
        + markdown_table(headers, table)
    )
    print(body)
    if not args.no_write:
        write_section(
            "results/knowledge-poisoning.md",
            "trust-sieve-poisonedrag",
            "PoisonedRAG (GPT-4 passages) on HotpotQA: plain RAG vs the sieve",
            body,
        )


if __name__ == "__main__":
    main()
