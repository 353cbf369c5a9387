"""Answer generation routed vs global on the bundled demo corpus: time and CSGA.

CSGA (Ganesh et al.): cosine similarity between the generated answer and the reference
answer, both embedded with the bundled all-MiniLM-L6-v2. The demo index (physics,
chemistry, nanoscience partitions) is built with the real embedder; the router is trained
from the index's chunks (the out-of-the-box path, default classifier). Each question is
answered twice by the bundled SmolLM2-135M-Instruct (llama.cpp, 1 thread, greedy): once
searching the global index, once with ``--route auto``.

Writes the ``route-demo-csga`` section of docs/results/retrieval-and-routing.md.

    python benchmarks/route_demo_csga.py [--max-tokens 96]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import ROOT, markdown_table, write_section  # noqa: E402

logger = logging.getLogger("route_demo_csga")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--stride", type=int, default=1, help="every N-th question only (1: all)")
    ap.add_argument("--index-dir", default=str(ROOT / "runs" / "indexes" / "route-demo"))
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    import torch

    torch.set_num_threads(1)
    from ragsieve.config import GenerationConfig, LLMConfig, PipelineConfig, RetrievalConfig
    from ragsieve.demo import demo_corpus_dir, demo_questions
    from ragsieve.embed import load_embedder
    from ragsieve.index import Index
    from ragsieve.route import QueryRouter
    from ragsieve.sieve.pipeline import Pipeline

    cfg = PipelineConfig(
        index_dir=args.index_dir,
        pipeline="plain",
        llm=LLMConfig(n_threads=1),
        retrieval=RetrievalConfig(k=args.k),
        generation=GenerationConfig(max_tokens=args.max_tokens, temperature=0.0),
    )
    embedder = load_embedder(cfg.embedder)
    embedder.warm_up()
    index = Index.build(demo_corpus_dir(), args.index_dir, config=cfg, embedder=embedder)
    pipe = Pipeline(cfg, index=index)
    pipe.warm_up()
    questions = demo_questions()
    questions = questions[:: args.stride]

    results: dict[str, dict[str, list[float]]] = {"all": {}, "auto": {}}
    decisions = []
    router = QueryRouter(index)  # same config the pipeline uses (stages.route = defaults)
    for q in questions:
        decision = router.route(q["question"])
        decisions.append((q["domain"], decision))
        order = ("all", "auto") if len(decisions) % 2 else ("auto", "all")
        for route in order:
            t0 = time.perf_counter()
            answer = pipe.ask(q["question"], route=route)
            total = (time.perf_counter() - t0) * 1000
            vecs = embedder.embed([answer.text or " ", q["answer"]])
            rec = results[route]
            rec.setdefault("csga", []).append(float(vecs[0] @ vecs[1]))
            rec.setdefault("retrieve_ms", []).append(answer.trace.timings_ms.get("retrieve", 0.0))
            rec.setdefault("generate_ms", []).append(answer.trace.timings_ms.get("generate", 0.0))
            rec.setdefault("total_ms", []).append(total)
            gold = set(q["doc_ids"])
            rec.setdefault("gold_hit", []).append(
                float(any(h.chunk.doc_id in gold or h.chunk.source in gold for h in answer.evidence))
            )
        logger.info("%s %s -> %s", q["id"], q["domain"], decision.domains)

    def row(name: str, rec: dict[str, list[float]]) -> list[object]:
        return [
            name,
            float(np.mean(rec["csga"])),
            float(np.median(rec["retrieve_ms"])),
            float(np.median(rec["generate_ms"])),
            float(np.median(rec["total_ms"])),
            float(np.mean(rec["gold_hit"])),
        ]

    correct = sum(d.domains is None or set(dom.split("+")) <= set(d.domains) for dom, d in decisions)
    body = (
        f"Bundled demo corpus ({len(index.chunks)} chunks in {', '.join(index.domains)}; real MiniLM "
        f"embeddings, hybrid retrieval, k={args.k}); {len(questions)} of its {len(demo_questions())} questions "
        f"with reference answers (`src/ragsieve/demo/questions.jsonl`, every {args.stride}. question; "
        f"{sum('+' in q['domain'] for q in questions)} of them span two domains). Generator: bundled "
        f"SmolLM2-135M-Instruct (llama.cpp, 1 thread, greedy, max {args.max_tokens} tokens). Router: trained "
        "from the index's chunks (default multinomial-nb, top domains holding 0.9 of the probability, global "
        "below p=0.5). CSGA = mean cosine similarity of generated vs reference answer (MiniLM). Times are "
        f"medians over questions (2 cores, 1-min load average {os.getloadavg()[0]:.1f} at the end); arms "
        "interleaved. Gold evidence = "
        "share of questions with a chunk of a reference document among the evidence.\n\n"
        + markdown_table(
            ["search", "CSGA", "retrieve ms p50", "generate ms p50", "ask total ms p50", "gold evidence"],
            [
                row("global index (--route all)", results["all"]),
                row("routed (--route auto)", results["auto"]),
            ],
        )
        + f"\n\nRouting: {router.stats.to_dict()} (single/multi/fallback counts); the questions' domain(s) "
        f"were all searched for {correct}/{len(questions)} questions (fallback counts as searched)."
    )
    write_section(
        "results/retrieval-and-routing.md",
        "route-demo-csga",
        "Routed vs global answers on the demo corpus (CSGA)",
        body,
    )


if __name__ == "__main__":
    main()
