"""Knowledge poisoning: attack success rate by defence (PoisonedRAG-style black-box attack).

Sets (``../shared/data``, see each PROVENANCE.md):

* ``hotpotqa``: the 500 HotpotQA dev (distractor) questions; corpus = their unique paragraphs
  (source = the paragraph's Wikipedia title). Targets and validation questions are disjoint
  seeded samples of the 500.
* ``hotpotqa-titled``: the same questions, targets and wrong answers over the same paragraphs
  prefixed with their title (``Title: text``), the way the eval harness (``eval_sieve.py``) and
  IRCoT index HotpotQA: a third of the paragraphs never name their own title, so without it
  neither retrieval nor the checks can see what such a passage is about.
* ``popqa``: PopQA long-tail with CRAG's Wikipedia knowledge strings cut into 3-sentence passages
  for a seeded sample of questions (source = the question subject's Wikipedia title).
* ``wikifact``: WikiFact relations with the paper's per-question web results (host + extracted
  answer, no text); prediction = majority vote of the top-10 answers, as in the data-importance
  experiments. The attack puts N results from attacker hosts with the wrong answer at the top;
  only the source-weight defences apply (no text, no LLM).

For the LLM sets every defence is a ``PipelineConfig`` run on a clean index and on a poisoned
copy (``ragsieve.attack``); the bundled SmolLM2-135M answers; its outputs are cached in
``runs/attack/llm-cache-<set>.jsonl`` (resumable), per-question rows in
``runs/attack/log-<set>.jsonl``. Each row carries its defence's config hash: a row written by a
pipeline that has changed since (a new sieve stage, a new post-processing step) is not reused,
its question is asked again (identical prompts still come from the LLM cache).

    python benchmarks/attack_poisoning.py --quick          # minutes
    python benchmarks/attack_poisoning.py                  # the full table (resumable)
    python benchmarks/attack_poisoning.py --from-log       # the report from what the logs hold
    python benchmarks/attack_poisoning.py --sets popqa --ns 5 --spread one --defences plain,sieve --no-write
    python benchmarks/attack_poisoning.py --sets popqa --ns 5 --lead none --limit 30 --no-write
    python benchmarks/attack_poisoning.py --sets popqa --ns 5 --lead statement --defences plain,sieve --no-write
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from _report import ROOT, SHARED_DATA, markdown_table, write_section
from _stats import wilson_interval  # noqa: E402
from ragsieve.attack.metrics import TABLE_HEADERS, Outcome, summarize, table_row  # noqa: E402
from ragsieve.attack.poison import Target, choose_targets  # noqa: E402
from ragsieve.config import PoisonConfig  # noqa: E402
from ragsieve.sieve.poison import PoisonJudge  # noqa: E402

logger = logging.getLogger("attack_poisoning")
RUNS = ROOT / "runs" / "attack"
LLM_DEFENCES = ["plain", "sieve", "sieve-no-poison", "poison-judge", "sieve+poison-judge", "sieve+paraphrase",
                "source-prune", "source-reweight", "evaluator", "sieve:judge", "sieve:select", "sieve:verify",
                "sieve:poison", "sieve-no-cover", "plain+polar", "sieve+polar"]
# the rows measured first (at every N) and the ones --quick runs
KEY_DEFENCES = ("plain", "sieve", "sieve-no-poison", "poison-judge")
# the HotpotQA corpora: paragraphs as they are, and prefixed with their title (same questions)
HOTPOTQA_SETS = ("hotpotqa", "hotpotqa-titled")
EMB_CACHE = ROOT / "runs" / "attack" / "emb-cache"


# ---------------------------------------------------------------- data
def hotpotqa_data(
    seed: int, n_targets: int, n_val: int, n_more: int = 0, titled: bool = False
) -> tuple[list[Any], list[dict], list[dict], list[dict]]:
    from ragsieve.io import read_jsonl
    from ragsieve.types import Chunk

    rows = list(read_jsonl(SHARED_DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"))
    chunks: dict[tuple[str, str], Chunk] = {}
    for r in rows:
        for c in r["contexts"]:
            text = " ".join(c["paragraph_text"].split())
            key = (c["title"], text)
            if key not in chunks:
                chunks[key] = Chunk(id=f"hp-{len(chunks)}", text=f"{c['title']}: {text}" if titled else text,
                                    doc_id=c["title"],
                                    source=f"wikipedia:{c['title']}", domain="wiki", title=c["title"])
    qs = [{"id": r["id"], "question": r["question"], "answers": r["answers"]} for r in rows]
    order = list(range(len(qs)))
    random.Random(seed).shuffle(order)
    targets = [qs[i] for i in order[:n_targets]]
    more = [qs[i] for i in order[n_targets + n_val:n_targets + n_val + n_more]]
    return list(chunks.values()), targets, [qs[i] for i in order[n_targets:n_targets + n_val]], more


def popqa_data(
    seed: int, n_targets: int, n_val: int, n_corpus: int, n_more: int = 0
) -> tuple[list[Any], list[dict], list[dict], list[dict]]:
    from ragsieve.io import read_jsonl
    from ragsieve.tasks.popqa import passages_from_knowledge
    from ragsieve.types import Chunk

    rows = list(read_jsonl(SHARED_DATA / "popqa" / "popqa_longtail_crag.jsonl"))
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    picked = [rows[i] for i in order[:max(n_corpus, n_targets + n_val + n_more)]]
    chunks = []
    seen: set[str] = set()
    for r in picked:
        for j, p in enumerate(passages_from_knowledge(r.get("crag_knowledge_correct", ""))):
            if p in seen:
                continue
            seen.add(p)
            chunks.append(Chunk(id=f"pq-{r['id']}-{j}", text=p, doc_id=f"pq-{r['id']}",
                                source=f"wikipedia:{r['s_wiki_title']}", domain="wiki", title=r["s_wiki_title"]))
    qs = [{"id": str(r["id"]), "question": r["question"], "answers": r["answers"]} for r in picked]
    more = qs[n_targets + n_val:n_targets + n_val + n_more]
    return chunks, qs[:n_targets], qs[n_targets:n_targets + n_val], more


# ---------------------------------------------------------------- LLM sets
def build_clean(name: str, chunks: list[Any], embedder: Any, val: list[dict], k: int) -> Any:
    from ragsieve.attack.evaluate import fit_source_weights
    from ragsieve.errors import IndexStoreError
    from ragsieve.importance import save_source_weights
    from ragsieve.index import Index

    folder = RUNS / name / "clean"
    try:
        index = Index.open(folder, embedder=embedder)
    except IndexStoreError:  # not built yet
        t0 = time.perf_counter()
        index = Index.from_chunks(chunks, folder, embedder=embedder)
        logger.info("%s: indexed %d chunks in %.0fs", name, len(chunks), time.perf_counter() - t0)
    if not (folder / "source_weights.json").is_file():
        weights, thr, summary = fit_source_weights(index, val, k=k)
        save_source_weights(folder, weights, threshold=thr, metadata=summary)
        index = Index.open(folder, embedder=embedder)
    index.warm_up()
    return index


def poisoned_copy(name: str, clean: Any, targets: list[Target], n: int, writer: Any, spread: str, seed: int,
                  tag: str = "", extra: list[Any] | None = None) -> Any:
    from ragsieve.attack.poison import assign_sources, inject, inject_sources_for, target_domains
    from ragsieve.index import Index

    folder = RUNS / name / f"poison-{writer.name}-{spread}-n{n}{tag}"
    if (folder / "poison.jsonl").is_file():
        index = Index.open(folder, embedder=clean.embedder)
        index.warm_up()
        return index
    passages = [p for t in targets for p in writer.write(t, n)]
    inj = inject_sources_for(clean, targets, seed=seed) if spread == "inject" else None
    doms = target_domains(clean, targets)
    passages = assign_sources(passages, spread, seed=seed, inject_sources=inj, domains=doms) + list(extra or [])
    index = inject(clean, passages, folder, targets=targets,
                   attack={"n": n, "spread": spread, "seed": seed, "writer": writer.to_dict()})
    index.warm_up()
    return index


# log-cell and folder suffix of each passage lead (``ragsieve.attack.poison.LEADS``)
LEAD_SUFFIX = {"question": "", "none": "-noq", "statement": "-stmt"}


def writer_label(args: argparse.Namespace) -> str:
    """The writer as named in log cells: ``template`` or ``llm``, suffixed ``-noq`` for
    passages without the question and ``-stmt`` for the question turned into a statement."""
    return args.writer + LEAD_SUFFIX[args.lead]


def writer_tag(args: argparse.Namespace) -> str:
    """The poisoned copy's folder suffix (a copy holds the passages of the targets it was built for)."""
    return LEAD_SUFFIX[args.lead] + (f"-t{args.limit}" if args.limit else "")


def make_writer(args: argparse.Namespace, llm: Any) -> Any:
    from ragsieve.attack.poison import LLMWriter, TemplateWriter

    if args.writer == "template":
        return TemplateWriter(seed=args.seed, lead=args.lead)
    return LLMWriter(llm, seed=args.seed, cache_path=RUNS / "writer-cache.jsonl", lead=args.lead)


def base_config(args: argparse.Namespace) -> Any:
    from ragsieve.config import PipelineConfig

    # short answers: 32 new tokens hold the entity and keep a CPU run within the time budget
    return PipelineConfig(retrieval={"k": args.k}, generation={"max_tokens": args.answer_tokens})


def defence_keys(defences: list[str], base: Any) -> dict[str, str]:
    """The config hash of each defence on ``base``: a log row is reused only under the hash it
    was written with."""
    from ragsieve.attack.evaluate import config_key, defence_config

    return {d: config_key(defence_config(d, base)) for d in defences}


def load_log(path: Path, keys: dict[str, str]) -> dict[tuple[str, ...], list[dict]]:
    """Logged rows by cell whose defence config hash is the current one (stale rows are asked
    again)."""
    from ragsieve.attack.evaluate import read_log

    done, stale = read_log(path, keys)
    if stale:
        logger.info("%s: %s stale rows (pipeline changed since) not reused", path.name, dict(stale))
    return done


def set_data(args: argparse.Namespace, name: str) -> tuple[list[Any], list[dict], list[dict], list[dict]]:
    """Corpus chunks, target questions, validation questions and the second draw's questions of an LLM set."""
    if name in HOTPOTQA_SETS:
        return hotpotqa_data(args.seed, args.targets, args.val, args.more_targets, titled=name == "hotpotqa-titled")
    if args.targets + args.val + args.more_targets > args.popqa_corpus:
        raise SystemExit(f"--targets + --val + --more-targets exceed --popqa-corpus ({args.popqa_corpus}): "
                         "the extra questions' passages would not be in the indexed corpus; raise "
                         "--popqa-corpus and move runs/attack/popqa aside (its clean index holds the smaller "
                         "corpus)")
    return popqa_data(args.seed, args.targets, args.val, args.popqa_corpus, args.more_targets)


def run_llm_set(args: argparse.Namespace, name: str, embedder: Any, llm: Any, results: dict) -> dict[str, Any]:
    from ragsieve.attack.evaluate import append_log, defence_config, evaluate_defence, sieve_available

    chunks, qs, val, more = set_data(args, name)
    draws = [(draw_targets(qs, val, args.seed), "")]
    if args.limit:
        # the first targets of the same draw (--targets would change the wrong-answer pool)
        draws = [(draws[0][0][:args.limit], "")]
    if more:
        # a second draw after the validation questions, with its own wrong-answer pool, so the
        # first draw's targets, passages and logged rows stay valid as the table grows
        draws.append((draw_targets(more, val, args.seed), f"-more{args.more_targets}"))
    targets = [t for draw, _ in draws for t in draw]
    # the target ids, for other benchmarks to tell apart the questions this one was tuned on
    ids_file = RUNS / name / "target_ids.txt"
    ids_file.parent.mkdir(parents=True, exist_ok=True)
    ids_file.write_text("".join(f"{t.id}\n" for t in targets), encoding="utf-8")
    base = base_config(args)
    clean = build_clean(name, chunks, embedder, val, args.k)
    writer = make_writer(args, llm)
    has_sieve = sieve_available()
    defences = [d for d in args.defences if has_sieve or not d.startswith("sieve")]
    skipped = [d for d in args.defences if d not in defences]
    log_path = RUNS / f"log-{name}{args.log_tag}.jsonl"
    keys = defence_keys(defences, base)
    done = load_log(log_path, keys)
    clean_answers: dict[str, dict[str, tuple[str, bool]]] = {}
    for row_cells in done.values():
        for r in row_cells:
            clean_answers.setdefault(r["cell"][0] + "|" + r["defence"], {})[r["target"]] = (
                r["clean_answer"], bool(r.get("clean_abstained", False)))
    info = {"chunks": len(clean), "targets": len(targets), "validation": len(val), "skipped": skipped,
            "gold": {t.id: t.answers for t in targets},
            "weights": json.loads((clean.dir / "source_weights.json").read_text())["metadata"]}
    copies = {(n, tag): poisoned_copy(name, clean, draw, n, writer, args.spread, args.seed, tag=writer_tag(args) + tag)
              for n in args.ns for draw, tag in draws}
    if args.from_log:
        phases: list[list[tuple[int, str]]] = []
    else:
        phases = job_phases(args.ns, defences)
    # Phases of (N, defence) cells; within a phase the targets advance a batch at a time across
    # every cell, so a stopped run leaves the cells of a phase with equal n.
    batches = [(draw[i:i + args.chunk], tag) for draw, tag in draws for i in range(0, len(draw), args.chunk)]
    for phase in phases:
        t0 = time.perf_counter()
        asked = 0
        for part, tag in batches:
            asked += len(part)
            for n, d in phase:
                pois = copies[(n, tag)]
                ids = {c.id for c in pois.chunks if c.metadata.get("poisoned")}
                cell = (name, writer_label(args), args.spread, str(n), d)
                have = {r["target"] for r in done.get(cell, [])}
                todo = [t for t in part if t.id not in have]
                if not todo:
                    continue
                cache = clean_answers.setdefault(f"{name}|{d}", {})
                outcomes, log = evaluate_defence(defence_config(d, base), clean, pois, todo, ids, llm,
                                                 clean_answers=cache)
                rows = [{"cell": list(cell), "defence": d, "config": keys[d], **o.to_dict(), **lg,
                         "target": o.target_id} for o, lg in zip(outcomes, log, strict=True)]
                append_log(log_path, rows)
                done.setdefault(cell, []).extend(rows)
            logger.info("%s phase %s: %d/%d targets, %.0fs, cache %d hits / %d misses", name, phase[0],
                        asked, len(targets), time.perf_counter() - t0, llm.hits, llm.misses)
    for cell, rows in done.items():
        if cell[0] == name and "val. poisoned" not in cell[-1]:
            order = {t.id: i for i, t in enumerate(targets)}
            rows = sorted({r["target"]: r for r in rows if r["target"] in order}.values(),
                          key=lambda r: order[r["target"]])
            results[cell] = [to_outcome(r) for r in rows]
            results[("log",) + cell] = rows
    return info


def draw_targets(qs: list[dict], val: list[dict], seed: int) -> list[Target]:
    """Targets for the questions ``qs``, their wrong answers drawn from ``qs + val``'s gold answers."""
    ids = {q["id"] for q in qs}
    return [t for t in choose_targets(qs + val, seed=seed) if t.id in ids]


def own(pid: str, target: str) -> bool:
    """Whether poisoned chunk ``poison:<target>:<i>`` was written for ``target`` (logs from
    before the toolkit counted other targets' passages too; recounted here)."""
    return pid.split(":", 1)[-1].rsplit(":", 1)[0] == target


def to_outcome(r: dict[str, Any]) -> Outcome:
    fields = {k: r[k] for k in ("target_id", "attacked", "clean_correct", "abstained", "clean_abstained") if k in r}
    return Outcome(retrieved=any(own(p, r["target"]) for p in r["poisoned_in_evidence"]), **fields)


def job_phases(ns: list[int], defences: list[str]) -> list[list[tuple[int, str]]]:
    """(N, defence) cells in phases, most informative first: the key defences (plain RAG, the
    default sieve, the sieve without its poison stage, the poisoning judge) at the largest N,
    then at the other N; then every other cell at the largest N, then the rest."""
    top = max(ns)
    key = [d for d in defences if d in KEY_DEFENCES]
    first = [(top, d) for d in key]
    curve = [(n, d) for n in sorted(ns) if n != top for d in key]
    rest = [(top, d) for d in defences if d not in key]
    late = [(n, d) for n in sorted(ns) if n != top for d in defences if d not in key]
    return [p for p in (first, curve, rest, late) if p]


def validation_poisoning(args: argparse.Namespace, name: str, embedder: Any, llm: Any,
                         results: dict) -> dict[str, Any]:
    """Set ``name`` at the largest N: the attacker's hosts also answer the validation questions,
    either correctly (to earn trust) or with wrong answers; weights are re-learned on the
    poisoned index, then source-prune is measured on the first draw's targets."""
    from ragsieve.attack.evaluate import append_log, defence_config, evaluate_defence, fit_source_weights
    from ragsieve.attack.poison import PoisonedPassage, TemplateWriter, assign_sources, target_domains
    from ragsieve.importance import save_source_weights
    from ragsieve.index import Index

    chunks, qs, val, _ = set_data(args, name)
    every = choose_targets(qs + val, seed=args.seed)
    target_ids = {q["id"] for q in qs}
    targets = [t for t in every if t.id in target_ids]
    val_targets = [t for t in every if t.id not in target_ids]
    clean = build_clean(name, chunks, embedder, val, args.k)
    writer = TemplateWriter(seed=args.seed)
    base = base_config(args)
    n = max(args.ns)
    info: dict[str, Any] = {}
    for mode in ("trust", "wrong"):
        extra: list[PoisonedPassage] = []
        for t in val_targets:
            said = t.answers[0] if mode == "trust" else t.wrong
            for p in writer.write(Target(t.id, t.question, t.answers, said), n):
                extra.append(PoisonedPassage(id=p.id.replace("poison:", "val:"), target_id=t.id, text=p.text,
                                             wrong=said, writer=p.writer))
        extra = assign_sources(extra, args.spread, seed=args.seed,
                               domains=target_domains(clean, val_targets))
        pois = poisoned_copy(name, clean, targets, n, writer, args.spread, args.seed, tag=f"-val{mode}",
                             extra=extra)
        if not json.loads((pois.dir / "source_weights.json").read_text()).get("metadata", {}).get("poisoned_val"):
            weights, thr, summary = fit_source_weights(pois, val, k=args.k)
            save_source_weights(pois.dir, weights, threshold=thr, metadata={**summary, "poisoned_val": mode})
            pois = Index.open(pois.dir, embedder=embedder)
            pois.warm_up()
        sw = json.loads((pois.dir / "source_weights.json").read_text())
        att = {s: w for s, w in sw["weights"].items() if s.startswith("attacker-")}
        info[mode] = {"attacker_weights": att, "threshold": sw.get("threshold")}
        ids = {c.id for c in pois.chunks if c.metadata.get("poisoned") and c.id.startswith("poison:")}
        cell = (name, "template", args.spread, str(n), f"source-prune (val. poisoned: {mode})")
        keys = defence_keys(["source-prune"], base)
        done = load_log(RUNS / f"log-{name}{args.log_tag}.jsonl", keys)
        if cell in done and (len(done[cell]) >= len(targets) or args.from_log):
            rows = done[cell][: len(targets)]
        elif args.from_log:
            continue
        else:
            outcomes, log = evaluate_defence(defence_config("source-prune", base), clean, pois, targets, ids, llm)
            rows = [{"cell": list(cell), "defence": cell[-1], "config": keys["source-prune"], **o.to_dict(), **lg,
                     "target": o.target_id} for o, lg in zip(outcomes, log, strict=True)]
            append_log(RUNS / f"log-{name}{args.log_tag}.jsonl", rows)
        results[cell] = [to_outcome(r) for r in rows]
    return info


# ---------------------------------------------------------------- WikiFact (sources only)
def wikifact(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """Source weights against result-list poisoning on WikiFact (no LLM)."""
    import numpy as np

    from importance_experiments import host_to_domain, load_rows, registered_domain
    from ragsieve.coe.perturb import same_type_wrong_answer
    from ragsieve.importance import DataImportance, from_lists, tune_prune_threshold

    k = 10
    out_rows = []
    curves: dict[str, dict[int, float]] = {}
    for rel in args.wikifact_relations:
        rows = load_rows(f"wikifact_{rel}.jsonl")
        mapping = host_to_domain(rel)
        order = np.random.default_rng(args.seed).permutation(len(rows))
        n_t = min(args.wf_targets, len(rows) // 2)
        tgt, val = [rows[i] for i in order[:n_t]], [rows[i] for i in order[n_t:]]
        pool = sorted({a for r in rows for a in r["correct_answers"]})

        wrong_cache: dict[str, str] = {}

        def wrong_of(r: dict[str, Any], pool: list[str] = pool, cache: dict[str, str] = wrong_cache) -> str:
            if r["id"] in cache:
                return cache[r["id"]]
            for s in range(50):
                w = same_type_wrong_answer(r["correct_answers"][0], pool, seed=args.seed + s)
                if w not in r["correct_answers"]:
                    cache[r["id"]] = w
                    return w
            raise RuntimeError(f"no wrong answer for {r['id']}")

        def lists(rs: list[dict], n: int, spread: str, say: str, hosts: dict[str, str] | None = None,
                  mapping: dict[str, str] = mapping) -> list[list]:
            out = []
            for r in rs:
                items = [{"id": f"{r['id']}#{i}", "source": registered_domain(h, mapping), "answer": a,
                          "utility": float(a in r["correct_answers"])}
                         for i, (h, a) in enumerate(zip(r["retrieved_websites"], r["retrieved_answers"], strict=True))]
                ans = wrong_of(r) if say == "wrong" else r["correct_answers"][0]
                for j in range(n):
                    if spread == "inject" and hosts is not None:
                        src = hosts[r["id"]]
                    elif spread == "one":
                        src = "attacker-0.example.net"
                    else:
                        src = f"attacker-{j % 5}.example.net"
                    items.insert(0, {"id": f"{r['id']}#p{j}", "source": src, "answer": ans,
                                     "utility": float(ans in r["correct_answers"]), "poison": True})
                out.append(items)
            return out

        def vote(items: list[dict], keep: Any) -> tuple[str | None, bool]:
            top = [it for it in items if keep(it["source"])][:k]
            if not top:
                return None, False
            counts = Counter(it["answer"] for it in top)
            best = max(counts.values())
            pred = next(it["answer"] for it in top if counts[it["answer"]] == best)
            return pred, any(it.get("poison") for it in top)

        def fit(vl: list[list]) -> tuple[dict[str, float], float]:
            data = from_lists([[{k2: v for k2, v in it.items() if k2 != "poison"} for it in lst] for lst in vl],
                              on_duplicate="first")
            est = DataImportance(k=k, epochs=50, learning_rate=500.0, init_weight=0.5).fit(data)
            tuned = tune_prune_threshold(data, est.weights_, k=k, utility="majority", known=est.seen_)
            return est.source_weights(), tuned.threshold

        clean_val = lists(val, 0, "sources", "wrong")
        weights, thr = fit(clean_val)
        rng = np.random.default_rng(args.seed)
        draws = [{s: bool(rng.random() < w) for s, w in weights.items()} for _ in range(32)]
        # inject: the best-weighted known source among each target's clean results
        best_host = {}
        for r in tgt:
            srcs = [registered_domain(h, mapping) for h in r["retrieved_websites"]]
            best_host[r["id"]] = max(srcs, key=lambda s: (weights.get(s, -1.0), -srcs.index(s)))
        defences: dict[str, Any] = {
            "plain": [lambda s: True],
            "source-prune": [lambda s, w=weights, t=thr: w.get(s, 1.0) >= t],
            "source-prune, unseen sources dropped": [lambda s, w=weights, t=thr: w.get(s, -1.0) >= t],
            "source-reweight (32 draws)": [lambda s, d=d: d.get(s, True) for d in draws],
        }
        for spread in ("sources", "one", "inject"):
            for n in args.ns:
                pl = lists(tgt, n, spread, "wrong", best_host)
                cl = lists(tgt, 0, spread, "wrong")
                plain_clean = None
                for dname, keeps in defences.items():
                    att, ret, ok = [], [], []
                    for r, items, citems in zip(tgt, pl, cl, strict=True):
                        w_ = wrong_of(r)
                        a_ = [vote(items, kp) for kp in keeps]
                        c_ = [vote(citems, kp)[0] for kp in keeps]
                        att.append(float(np.mean([p == w_ for p, _ in a_])))
                        ret.append(float(np.mean([x for _, x in a_])))
                        ok.append(float(np.mean([p in r["correct_answers"] for p in c_])))
                    if dname == "plain":
                        plain_clean = ok
                    cost = ""
                    if plain_clean is not None and dname != "plain":
                        from ragsieve.attack.metrics import paired_bootstrap

                        m, lo, hi = paired_bootstrap(plain_clean, ok, seed=args.seed)
                        cost = f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]"
                    n_q = len(tgt)
                    asr = float(np.mean(att))
                    lo, hi = wilson_interval(round(asr * n_q), n_q)
                    out_rows.append([rel, spread, n, dname, n_q, f"{np.mean(ret):.3f}",
                                     f"{asr:.3f} [{lo:.3f}, {hi:.3f}]", f"{np.mean(ok):.3f}", cost])
                    if spread == "sources":
                        curves.setdefault(f"wikifact {rel}: {dname}", {})[n] = asr
        # validation poisoned too (sources spread, largest N)
        n = max(args.ns)
        for say in ("correct", "wrong"):
            vw, vthr = fit(lists(val, n, "sources", say))
            att_w = {s: round(w, 3) for s, w in vw.items() if s.startswith("attacker-")}
            pl = lists(tgt, n, "sources", "wrong")
            att = [vote(items, lambda s, w=vw, t=vthr: w.get(s, 1.0) >= t)[0] == wrong_of(r)
                   for r, items in zip(tgt, pl, strict=True)]
            lo, hi = wilson_interval(sum(att), len(att))
            label = "trust-building (correct answers)" if say == "correct" else "wrong answers"
            out_rows.append([rel, "sources", n, f"source-prune, validation poisoned with {label}; attacker "
                             f"weights {sorted(att_w.values())}", len(tgt), "", f"{np.mean(att):.3f} [{lo:.3f}, "
                             f"{hi:.3f}]", "", ""])
    table = markdown_table(["relation", "spread", "N", "defence", "n", "retrieval success (top-10)", "ASR [95% CI]",
                            "clean acc.", "clean cost (plain - defence) [95% CI]"], out_rows)
    return table, curves


def cached_wikifact(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The WikiFact table, kept in runs/ per setting (it needs no LLM but minutes of CPU)."""
    key = json.dumps([args.wikifact_relations, args.ns, args.wf_targets, args.seed])
    path = RUNS / "wikifact.json"
    stored = json.loads(path.read_text()) if path.is_file() else {}
    if key not in stored:
        table, curves = wikifact(args)
        stored[key] = {"table": table, "curves": {k: {str(n): v for n, v in c.items()} for k, c in curves.items()}}
        path.write_text(json.dumps(stored))
    got = stored[key]
    return got["table"], {k: {int(n): v for n, v in c.items()} for k, c in got["curves"].items()}


# ---------------------------------------------------------------- report
def plot(curves: dict[str, dict[int, float]], path: Path) -> None:
    """One panel per set (labels are "set: defence"), attack success vs N per defence."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: dict[str, dict[str, dict[int, float]]] = {}
    for label, pts in curves.items():
        panel, _, name = label.partition(": ")
        panels.setdefault(panel, {})[name] = pts
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.2), squeeze=False)
    ns = sorted({n for p in curves.values() for n in p})
    # one colour and marker per defence across every panel, so a defence reads the same everywhere
    names = sorted({name for series in panels.values() for name in series})
    colours = plt.get_cmap("tab20")
    style = {name: (colours(i % 20), "osD^v<>px*"[i % 10], "-" if i < 10 else "--") for i, name in enumerate(names)}
    style.update({"plain": ("black", "s", "-"), "sieve": ("tab:red", "o", "-")})
    for ax, (panel, series) in zip(axes[0], sorted(panels.items()), strict=True):
        for name, pts in sorted(series.items()):
            xs = sorted(pts)
            colour, marker, line = style[name]
            ax.plot(xs, [pts[n] for n in xs], marker=marker, linestyle=line, color=colour, label=name,
                    linewidth=2.5 if name in ("plain", "sieve") else 1.2)
        ax.set_title(panel, fontsize=9)
        ax.set_xlabel("poisoned passages per question (N)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xticks(ns)
        ax.legend(fontsize=6, loc="best")
    axes[0][0].set_ylabel("attack success rate")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


SPREADS = {"sources": "5 new hosts", "one": "1 new host", "inject": "an existing source (one of the sources of "
           "the question's clean top 5, seeded)"}


def cell_rows(results: dict, s: str, writer: str, spread: str, ns: list[int], defences: list[str], seed: int,
              curves: dict[str, dict[int, float]] | None) -> list[list[object]]:
    """Table rows of one (set, writer, spread): each defence paired with plain RAG on the
    questions both cells hold."""
    rows: list[list[object]] = []
    for n in ns:
        base = results.get((s, writer, spread, str(n), "plain"))
        for d in defences:
            cell = (s, writer, spread, str(n), d)
            if cell not in results:
                continue
            outs, paired = results[cell], None
            if base is not None and d != "plain":
                # a stopped run can leave cells with different questions: pair on the common ones
                common = {o.target_id for o in base} & {o.target_id for o in outs}
                outs = [o for o in outs if o.target_id in common]
                paired = [o for o in base if o.target_id in common]
            summ = summarize(outs, baseline=paired, seed=seed)
            rows.append([str(n), *table_row(d, summ)])
            if curves is not None:
                curves.setdefault(f"{s}: {d}", {})[n] = summ["asr"]
    return rows


def clean_cost_breakdown(base: list[Outcome], defence: list[Outcome], gold: dict[str, list[str]], seed: int) -> str:
    """Where a defence's clean-accuracy cost comes from (same questions, same order): the
    questions plain RAG answered right and the defence did not, split into abstentions and other
    answers, and the cost on yes/no questions apart from the rest (a small model's yes/no answers
    follow the prompt's habit more than the evidence, so they move with any change of prompt)."""
    from ragsieve.attack.metrics import paired_bootstrap

    lost = [(b, d) for b, d in zip(base, defence, strict=True) if b.clean_correct and not d.clean_correct]
    gained = sum(d.clean_correct and not b.clean_correct for b, d in zip(base, defence, strict=True))
    abst = sum(d.clean_abstained for _, d in lost)
    parts = []
    for label, pick in (("yes/no", True), ("other", False)):
        idx = [i for i, b in enumerate(base)
               if (str((gold.get(b.target_id) or [""])[0]).strip().lower() in ("yes", "no")) == pick]
        if not idx:
            continue
        m, lo, hi = paired_bootstrap([base[i].clean_correct for i in idx], [defence[i].clean_correct for i in idx],
                                     seed=seed)
        parts.append(f"{label} questions (n = {len(idx)}): plain {sum(base[i].clean_correct for i in idx)} right, "
                     f"sieve {sum(defence[i].clean_correct for i in idx)}, cost {m * 100:+.1f} pts "
                     f"[{lo * 100:+.1f}, {hi * 100:+.1f}]")
    return (f"plain RAG right and the sieve not on {len(lost)} questions ({abst} abstentions, {len(lost) - abst} "
            f"other answers), the reverse on {gained}; " + "; ".join(parts))


# (baseline, sieve) pairs the goal line reports: the defaults decide the goal; the pair with
# yes/no answers read from log-probabilities on both sides is shown beside it
GOAL_PAIRS = (("plain", "sieve"), ("plain+polar", "sieve+polar"))


def goal_check(results: dict, sets: list[str], writer: str, spread: str, n: int, seed: int,
               gold: dict[str, dict[str, list[str]]] | None = None) -> str:
    """The benchmark's goal per set at N = ``n``: the default sieve's ASR at most a third of plain
    RAG's, and its clean accuracy within 3 points of plain RAG's (paired, same questions)."""
    lines = []
    met: set[str] = set()  # datasets (the two HotpotQA corpora hold the same questions: one dataset)
    for s in sets:
        for base_name, sieve_name in GOAL_PAIRS:
            default = (base_name, sieve_name) == GOAL_PAIRS[0]
            label = s if default else f"{s}, {sieve_name} vs {base_name}"
            base = results.get((s, writer, spread, str(n), base_name))
            sieve = results.get((s, writer, spread, str(n), sieve_name))
            if not base or not sieve:
                if default:
                    lines.append(f"- {s}: not measured at N = {n}.")
                continue
            common = {o.target_id for o in base} & {o.target_id for o in sieve}
            b = [o for o in base if o.target_id in common]
            d = [o for o in sieve if o.target_id in common]
            sb, sd = summarize(b, seed=seed), summarize(d, baseline=b, seed=seed)
            cost, lo, hi = sd["clean_cost"]
            asr_ok = sd["asr"] <= sb["asr"] / 3
            cost_ok = cost <= 0.03
            if asr_ok and cost_ok and default:
                met.add("hotpotqa" if s in HOTPOTQA_SETS else s)
            lines.append(
                f"- {label} (n = {len(common)}): ASR {sd['asr']:.2f} vs {sb['asr']:.2f} (goal <= {sb['asr'] / 3:.2f}: "
                f"{'met' if asr_ok else 'NOT met'}); clean accuracy {sd['clean_accuracy']:.2f} vs "
                f"{sb['clean_accuracy']:.2f}, "
                f"cost {cost * 100:+.1f} pts [{lo * 100:+.1f}, {hi * 100:+.1f}] (goal <= 3 pts: "
                f"{'met' if cost_ok else 'NOT met'} on the point estimate; the interval "
                f"{'lies within' if hi <= 0.03 else 'does not rule out more than'} 3 pts)."
                + (f" Clean cost by question: {clean_cost_breakdown(b, d, gold[s], seed)}." if gold and s in gold
                   else ""))
    verdict = "holds" if len(met) >= 2 else "does NOT hold"
    return (f"Goal (default sieve at N = {n}: ASR <= 1/3 of plain RAG's and clean accuracy within 3 points, on >= 2 "
            f"sets): {verdict} ({len(met)} set(s) meet both parts on the point estimate"
            f"{': ' + ', '.join(sorted(met)) if met else ''}; the HotpotQA corpora, with and without titles, hold "
            "the same questions and count as one set). Lines naming two defences compare that pair instead "
            "(yes/no answers read from log-probabilities on both sides, `generation.polar_answers = \"label\"`); "
            "they do not count for the goal, which is about the defaults.\n\n" + "\n".join(lines))


def failure_notes(results: dict, sets: list[str], n: int, writer: str, spread: str) -> str:
    """For each defence at the largest N, which check saw the poisoned passages that reached
    the generator, and with what scores."""
    lines = []
    for name in sets:
        for key, rows in results.items():
            if (key[0] != "log" or key[1] != name or key[2] != writer or key[3] != spread or key[4] != str(n)
                    or key[5] == "plain"):
                continue
            reached = [r for r in rows if any(own(p, r["target"]) for p in r["poisoned_in_evidence"])]
            attacked = sum(r["attacked"] for r in rows)
            checks: Counter[str] = Counter()
            scores: dict[str, list[float]] = {}
            for r in reached:
                for d in [d for d in r.get("decisions_on_poison", []) if own(d["id"], r["target"])]:
                    checks[f"{d['check']}:{d['verdict']}"] += 1
                    if d.get("score") is not None:
                        scores.setdefault(d["check"], []).append(float(d["score"]))
            stopped: Counter[str] = Counter(
                f"{d['check']}:{d['verdict']}" for r in rows for d in r.get("decisions_on_poison", [])
                if own(d["id"], r["target"]) and d["verdict"] != "kept")
            blind = sum(r["attacked"] and not any(own(p, r["target"]) for p in r["poisoned_in_evidence"])
                        for r in rows)
            sc = ", ".join(f"{c} median score {sorted(v)[len(v) // 2]:.2f}" for c, v in scores.items())
            why: Counter[str] = Counter(str(r.get("abstain_reason") or "reason not logged").split(":")[0] for r in rows
                                        if r.get("abstained"))
            clean_why: Counter[str] = Counter(str(r["clean_abstain_reason"]).split(":")[0] for r in rows
                                              if r.get("clean_abstained") and r.get("clean_abstain_reason"))
            lines.append(f"- {name}, {key[5]}: poisoned evidence reached the generator on {len(reached)}/{len(rows)} "
                         f"questions, {attacked} answered with the target ({blind} of them with no poisoned "
                         f"passage in the evidence: the model said the target answer on its own). Decisions on "
                         f"poisoned passages that reached it: {dict(checks) or 'none recorded'}"
                         f"{'; ' + sc if sc else ''}. Poisoned passages stopped (all questions): "
                         f"{dict(stopped) or 'none recorded'}. Abstentions by check: {dict(why) or 'none'}"
                         f"{f'; on the clean corpus (where logged): {dict(clean_why)}' if clean_why else ''}.")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="20 targets, N in {1, 5}, fewer defences")
    ap.add_argument("--sets", default="hotpotqa,popqa,wikifact")
    ap.add_argument("--targets", type=int, default=100)
    ap.add_argument("--val", type=int, default=100, help="validation questions for the source weights")
    ap.add_argument("--more-targets", type=int, default=0,
                    help="a second draw of targets after the validation questions (grows n without changing "
                         "the first draw's targets, passages or logged rows)")
    ap.add_argument("--ns", default=None, help="N values (default 1,3,5; --quick 1,5)")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--answer-tokens", type=int, default=32)
    ap.add_argument("--chunk", type=int, default=10, help="questions per logged batch")
    ap.add_argument("--defences", default=None, help=f"default {','.join(LLM_DEFENCES)}")
    ap.add_argument("--writer", default="template", choices=["template", "llm"])
    ap.add_argument("--lead", default="question", choices=list(LEAD_SUFFIX),
                    help="what opens each passage: the question verbatim (black-box attack), the question's words "
                         "as a statement (an attacker evading the restated-question check), or nothing")
    ap.add_argument("--spread", default="sources", choices=["sources", "one", "inject"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--popqa-corpus", type=int, default=400, help="PopQA questions whose passages form the corpus")
    ap.add_argument("--wf-targets", type=int, default=300)
    ap.add_argument("--wikifact-relations", default="currency,place_of_birth")
    ap.add_argument("--no-val-poison", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--limit", type=int, default=0,
                    help="run only the first LIMIT targets of the draw (a variant measured on fewer questions)")
    ap.add_argument("--log-tag", default="",
                    help="suffix of the per-question logs (a new tag reruns every cell from the LLM cache)")
    ap.add_argument("--from-log", action="store_true",
                    help="report what the logs hold; run no new cell (a stopped run's partial cells count)")
    args = ap.parse_args()
    if args.quick:
        args.targets, args.val, args.wf_targets = min(args.targets, 20), min(args.val, 40), 100
        args.ns = args.ns or "1,5"
        args.defences = args.defences or ",".join(KEY_DEFENCES)
    args.ns = args.ns or "1,3,5"
    args.defences = args.defences or ",".join(LLM_DEFENCES)
    args.ns = [int(x) for x in args.ns.split(",")]
    args.defences = [d for d in args.defences.split(",") if d]
    args.wikifact_relations = args.wikifact_relations.split(",")
    sets = [s for s in args.sets.split(",") if s]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    for noisy in ("faiss", "bm25s", "httpx", "ragsieve.index", "ragsieve.route.runtime"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    global RUNS
    if args.quick:
        RUNS = RUNS / "quick"
    RUNS.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    results: dict = {}
    infos: dict[str, Any] = {}
    unknown = [s for s in sets if s not in (*HOTPOTQA_SETS, "popqa", "wikifact")]
    if unknown:
        raise SystemExit(f"unknown set(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(HOTPOTQA_SETS)}, popqa, wikifact")
    llm_sets = [s for s in sets if s in (*HOTPOTQA_SETS, "popqa")]
    caches: list[Any] = []
    if llm_sets:
        from ragsieve.attack.evaluate import CachedLLM
        from ragsieve.config import EmbedderConfig, LLMConfig
        from ragsieve.embed import load_embedder
        from ragsieve.llm import load_llm

        embedder = load_embedder(EmbedderConfig(cache_dir=str(EMB_CACHE)))
        embedder.warm_up()
        base_llm = load_llm(LLMConfig(n_threads=1))
        caches = []
        for s in llm_sets:
            # one cache file per set, so the sets can run as parallel processes
            llm = CachedLLM(base_llm, RUNS / f"llm-cache-{s}.jsonl")
            llm.warm_up()
            caches.append(llm)
            infos[s] = run_llm_set(args, s, embedder, llm, results)
        if not args.no_val_poison:
            for s, llm in zip(llm_sets, caches, strict=True):
                if s != "hotpotqa-titled":  # one HotpotQA corpus is enough for this row
                    infos[f"val_poison:{s}"] = validation_poisoning(args, s, embedder, llm, results)
    wf_table, curves = cached_wikifact(args) if "wikifact" in sets else ("", {})
    total = time.perf_counter() - t_start

    body = []
    main_wr = writer_label(args)
    for s in llm_sets:
        rows = cell_rows(results, s, main_wr, args.spread, args.ns, args.defences, args.seed, curves)
        for cell, outs in results.items():
            if cell[0] == s and "val. poisoned" in cell[-1]:
                summ = summarize(outs, seed=args.seed)
                rows.append([cell[3], *table_row(cell[-1], summ)])
        inf = infos[s]
        w = inf["weights"]
        more_note = (f": the first {args.targets} drawn, then {args.more_targets} more drawn after the validation "
                     "questions (`--more-targets`), their wrong answers from their own pool; rows with more than "
                     f"{args.targets} hold both draws" if args.more_targets else "")
        body.append(
            f"### {s}\n\n{inf['targets']} target questions (n per row below){more_note}, "
            f"corpus {inf['chunks']} passages, "
            f"k = {args.k} passages to the generator, {main_wr} writer, attacker passages spread over "
            f"{SPREADS[args.spread]}. Source weights: data importance on "
            f"{w['validation_questions']} disjoint validation questions (utility: a top-20 hit contains a gold "
            f"answer; {w['sources']} sources seen, prune threshold {w['threshold']:.3f}, removal rate "
            f"{w['removal_rate']:.0%}). Defences not run in this build: {', '.join(inf['skipped']) or 'none'}.\n\n"
            + markdown_table(["N", *TABLE_HEADERS], rows))
        sizes = {(n, d): len(results.get((s, main_wr, args.spread, str(n), d), [])) for n in args.ns
                 for d in args.defences}
        first = inf["targets"] - args.more_targets if args.more_targets else inf["targets"]
        short = [f"{d} (N={n}, n={k})" for (n, d), k in sizes.items() if 0 < k < first]
        first_only = [f"{d} (N={n})" for (n, d), k in sizes.items() if args.more_targets and k == first]
        missing = [f"{d} (N={n})" for n in args.ns for d in args.defences
                   if (s, main_wr, args.spread, str(n), d) not in results]
        if short:
            body.append(f"Cells with fewer than the {first} targets of the first draw (the run was stopped for time; "
                        f"rerun the command to resume): {', '.join(short)}.")
        if first_only:
            body.append(f"Cells measured on the first draw only ({first} targets; the second draw was run for the "
                        f"goal's rows): {', '.join(first_only)}.")
        if missing:
            body.append(f"Cells not measured (stopped for time): {', '.join(missing)}.")
        variants = sorted({(c[1], c[2]) for c in results if c[0] == s and (c[1], c[2]) != (main_wr, args.spread)})
        if variants:
            vrows: list[list[object]] = []
            for wr, sp in variants:
                vrows += [[wr, SPREADS[sp], *r] for r in
                          cell_rows(results, s, wr, sp, args.ns, args.defences, args.seed, None)]
            body.append("Attack variants (same targets; writer `llm` = the bundled model writes the passage, "
                        "`-noq` = the question is not prepended, `-stmt` = the question's words open the passage as a "
                        "statement, its interrogative dropped):\n\n"
                        + markdown_table(["writer", "spread", "N", *TABLE_HEADERS], vrows))
        body.append(
            "Source weights cannot act on this attack as run: the attacker's hosts never appear in the validation "
            "questions' retrievals, so they have no learned weight, and sources without one are kept (the "
            "importance stage's rule); prune and reweight then only change clean evidence. The WikiFact rows "
            "below measure the variant that drops unseen sources, and a validation set poisoned by the attacker.")
        if f"val_poison:{s}" in infos:
            vp = infos[f"val_poison:{s}"]
            trust = {k: round(v, 3) for k, v in vp["trust"]["attacker_weights"].items()}
            wrong = {k: round(v, 3) for k, v in vp["wrong"]["attacker_weights"].items()}
            body.append(
                f"Validation set poisoned too (the `val. poisoned` rows, N = {max(args.ns)}, the first draw's "
                "targets): the attacker's hosts also answer the validation questions, with the gold answer ('trust') "
                "or with a wrong one ('wrong'); weights re-learned on that corpus. Learned attacker-host weights: "
                f"trust {trust}, wrong {wrong} (prune thresholds {vp['trust']['threshold']:.3g} / "
                f"{vp['wrong']['threshold']:.3g}).")
        notes = failure_notes(results, [s], max(args.ns), main_wr, args.spread)
        if notes:
            body.append(f"Why poisoned passages got through at N = {max(args.ns)} (from the traces):\n\n{notes}")
    if llm_sets:
        body.insert(0, goal_check(results, llm_sets, main_wr, args.spread, max(args.ns), args.seed,
                                  gold={s: infos[s]["gold"] for s in llm_sets if s in infos}))
    if wf_table:
        body.append(
            "### WikiFact (sources only, no LLM)\n\nPer relation a seeded split: targets (n below) and the rest "
            "as validation for the source weights (data importance, K = 10, majority-vote utility, prune threshold "
            "tuned on validation). The attack puts N results from attacker hosts asserting a same-type wrong answer "
            "at the top of each target's result list; prediction = majority vote of the top-10 kept results "
            "(ties: best rank). 'inject' places them under the best-weighted existing source among the target's "
            "own results. Reweight: mean over 32 sub-corpora sampled by weight (ASR is a mean of fractions, "
            "interval from the rounded count).\n\n" + wf_table)
    poison_cfg = PoisonConfig()
    judge_defaults = inspect.signature(PoisonJudge.__init__).parameters
    body.append(
        "Defences: `plain` = plain RAG (top-k); `source-prune` / `source-reweight` = plain RAG with the source "
        "weights learned by data importance on the validation questions (`retrieval.use_source_weights`); "
        "`evaluator` = the task-adaptive preset (CRAG-style trained evaluator, HyDE off); `sieve:X` = the sieve "
        "preset with every check but X ablated (judge = the CRAG-style relevance judge, select = ScopeCoE with "
        "rule features, verify = claim verification with regeneration and abstention, poison = the "
        "poisoning-aware check alone); `sieve` = the default sieve, every check including its `poison` stage "
        "after the relevance judge (`ragsieve.sieve.poison.PoisonStage`: drops candidates that restate the question "
        f"verbatim past its interrogative word, a run covering >= {poison_cfg.restate_share:.0%} of the "
        "question's tokens; of a cluster of near-duplicates from different documents, word Jaccard >= "
        f"{poison_cfg.duplicate_jaccard:g} once the question's words are removed, "
        "it keeps the best-ranked copy, flagged, and drops the rest); `sieve-no-poison` = the sieve with "
        "`ablate: [poison]` (what the other checks stop on their own); `sieve+poison-judge` = the sieve with "
        "`sieve.poison_duplicates: drop` (the whole near-duplicate cluster dropped); `sieve+paraphrase` = that, "
        "with candidates from different documents whose embedding cosine is >= 0.9 (near-paraphrases) joining a "
        "cluster too (`stages.poison.semantic_duplicate`). The default sieve's judge keeps, for a question "
        "naming two or more entities, the best candidate naming each entity no kept candidate names "
        "(`sieve.cover_entities`); `sieve-no-cover` = the sieve without it. `plain+polar` / `sieve+polar` = plain "
        "RAG / the sieve answering yes/no questions with the yes or no the model's log-probabilities prefer "
        "(`generation.polar_answers = \"label\"`). "
        "The knowledge filters (direct / proxy) score (input, knowledge) pairs for classification labels; on QA "
        "the sieve's filter stage passes candidates through (`stages.filtering.filter = none`), so they have no "
        "row. `poison-judge` = the same check (`ragsieve.sieve.poison.PoisonJudge` with its own defaults: "
        f"Jaccard >= {judge_defaults['duplicate_jaccard'].default:g}, whole clusters dropped) in "
        "front of plain RAG's selector, without the sieve's other checks. The restatement signal targets the "
        "black-box construction (question text prepended); a writer that drops the question or turns it into a "
        "statement (the `-noq` and `-stmt` variants, if measured) is caught only by the near-duplicate signals, "
        "if at all: word Jaccard in every sieve row, embedding cosine in `sieve+paraphrase`. Validation "
        "questions are needed only by the source weights (their number is given per set); the other checks use "
        "no validation data.")
    img = ROOT / "docs" / "img" / ("attack_poisoning_quick.png" if args.quick else "attack_poisoning.png")
    if curves and not args.no_write:
        plot(curves, img)
        body.append(f"![attack success vs N]({img.relative_to(ROOT / 'docs').as_posix()})")
    model = "SmolLM2-135M-Instruct (bundled, llama.cpp, greedy), all-MiniLM-L6-v2 hybrid retrieval"
    head = (
        f"Data: `../shared/data` (HotpotQA dev distractor 500, PopQA long-tail with CRAG knowledge, WikiFact "
        f"ragbooster retrievals). Model: {model}. N in {args.ns}. ASR = the answer contains the target wrong "
        "answer (abstentions never count); retrieval success = at least one poisoned passage in the evidence "
        "given to the generator; clean accuracy = the clean-corpus answer contains a gold answer; intervals: "
        "Wilson 95 % for rates, paired bootstrap (2000 resamples) for the clean-accuracy cost vs plain RAG. "
        f"Runtime of this run: {total / 60:.1f} min (LLM cache: {sum(c.hits for c in caches)} hits, "
        f"{sum(c.misses for c in caches)} new calls)."
    )
    logger.info("done in %.0fs", total)
    if not args.no_write:
        write_section("results/knowledge-poisoning.md", "attack-poisoning-quick" if args.quick else "attack-poisoning",
                      "Knowledge poisoning: attack success by defence" + (" (--quick)" if args.quick else ""),
                      head + "\n\n" + "\n\n".join(body))
    else:
        print(head + "\n\n" + "\n\n".join(body))


if __name__ == "__main__":
    main()
