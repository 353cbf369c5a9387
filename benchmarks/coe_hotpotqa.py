"""Chain-of-Evidence experiments on HotpotQA dev (distractor), first-100 file with
sentence-level supporting facts.

Stages (each writes its own section of docs/results/chain-of-evidence.md):
  rag        naive RAG top-5 vs RAG + ScopeCoE (greedy / exact) (paper Table 5)
  effect     accuracy with CoE / SenP / WordP knowledge x irrelevant proportion (Table 2)
  robust     accuracy and following rate with misinformation (Table 4)
  agreement  CoE discrimination vs supporting-fact annotations

The knowledge pool of a question is its own 10 paragraphs split into sentences, each
prefixed with its paragraph title. LLM calls (feature extraction, answers) are cached
under --cache so stages can be re-run and resumed.

    python benchmarks/coe_hotpotqa.py --stage all --n 30 --calib 15
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import random
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import read_jsonl  # noqa: E402
from _report import SHARED_DATA, markdown_table, write_section  # noqa: E402
from ragsieve.answers import contains_answer, token_f1  # noqa: E402
from ragsieve.coe.config import CoEConfig  # noqa: E402
from ragsieve.coe.cover import cover  # noqa: E402
from ragsieve.coe.features import EvidenceFeatures, FeatureExtractor  # noqa: E402
from ragsieve.coe.judges import CoEDiscriminator, JudgeInput, LexicalKeywordJudge, best_threshold  # noqa: E402
from ragsieve.coe.perturb import (  # noqa: E402
    accuracy,
    following_rate,
    generate_misinformation,
    inject_irrelevant,
    replace_answer,
    same_type_wrong_answer,
    sentence_perturbation,
    word_perturbation,
)
from ragsieve.io import atomic_write_json  # noqa: E402

log = logging.getLogger("coe_hotpotqa")
DATA = SHARED_DATA / "hotpotqa" / "hotpotqa_dev_distractor_first100.jsonl"
PROPORTIONS = (0.0, 0.25, 0.5, 0.75)


# ---------------------------------------------------------------- data
def load_questions(seed: int, n_calib: int, n_eval: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows = list(read_jsonl(DATA))
    for r in rows:
        pool, sup = [], []
        facts = {(t, i) for t, i in r["supporting_facts"]}
        for title, sents in r["context"]:
            for i, s in enumerate(sents):
                text = f"{title}: {s.strip()}"
                if s.strip():
                    pool.append(text)
                    sup.append((title, i) in facts)
        r["pool"], r["is_sup"] = pool, sup
        r["gold"] = [p for p, y in zip(pool, sup, strict=True) if y]
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    return [rows[i] for i in order[:n_calib]], [rows[i] for i in order[n_calib : n_calib + n_eval]]


# ---------------------------------------------------------------- models + caches
class Bench:
    def __init__(self, cache: Path, name: str = "all") -> None:
        from ragsieve.config import EmbedderConfig, LLMConfig
        from ragsieve.embed import load_embedder
        from ragsieve.llm import load_llm

        self.cache = cache
        cache.mkdir(parents=True, exist_ok=True)
        self.llm = load_llm(LLMConfig.model_validate({"n_threads": 1}))
        self.llm.warm_up()
        self.embedder = load_embedder(EmbedderConfig.model_validate({}))
        self.embedder.warm_up()
        self.extractor = FeatureExtractor(cache_dir=str(cache / "features"), retries=0)
        self.gen_path = cache / f"generations-{name}.json"
        self.gens: dict[str, str] = json.loads(self.gen_path.read_text()) if self.gen_path.exists() else {}
        self.n_new = 0
        self.gen_seconds = 0.0

    def features(self, q: str) -> EvidenceFeatures:
        return self.extractor.extract(q, self.llm)

    def answer(self, question: str, knowledge: list[str]) -> str:
        body = "\n".join(f"- {k[:400]}" for k in knowledge) or "- (none)"
        prompt = (
            "Answer the question using the knowledge. Reply with a short answer only (a few words).\n"
            f"Knowledge:\n{body}\n\nQuestion: {question}"
        )
        key = hashlib.sha256(prompt.encode()).hexdigest()
        if key not in self.gens:
            t = time.perf_counter()
            self.gens[key] = self.llm.generate(
                prompt, max_tokens=24, temperature=0.0, stop=["\n"]
            ).text.strip()
            self.gen_seconds += time.perf_counter() - t
            self.n_new += 1
            if self.n_new % 5 == 0:
                log.info("%d new generations (%.0fs)", self.n_new, self.gen_seconds)
                self.save()
        return self.gens[key]

    def save(self) -> None:
        atomic_write_json(self.gen_path, self.gens)

    def misinfo(self, question: str, wrong: str) -> str:
        key = "misinfo:" + hashlib.sha256(f"{question}\0{wrong}".encode()).hexdigest()
        if key not in self.gens:
            self.gens[key] = generate_misinformation(question, wrong, self.llm)
        return self.gens[key]

    def wordp(self, r: dict[str, Any], feats: EvidenceFeatures) -> tuple[list[str], dict[str, str]]:
        key = "wordp:" + r["id"]
        if key not in self.gens:
            out, used = word_perturbation(r["gold"], feats.keywords, r["answers"], llm=self.llm)
            self.gens[key] = json.dumps([out, used])
        out, used = json.loads(self.gens[key])
        return out, used


def disc(bench: Bench, config: CoEConfig) -> CoEDiscriminator:
    return CoEDiscriminator(config, bench.llm, bench.embedder)


def calibrate(bench: Bench, calib: list[dict[str, Any]]) -> tuple[CoEConfig, str]:
    """Fit intent and relation thresholds: supporting-fact sentences are positives, the other
    sentences of the question's pool negatives (F1-optimal cosine threshold)."""
    sims: dict[str, list[float]] = {"intent": [], "relation": []}
    labels: dict[str, list[bool]] = {"intent": [], "relation": []}
    d = disc(bench, CoEConfig())
    for r in calib:
        f = bench.features(r["question"])
        sim = d.similarity(r["pool"], f.feature_texts())
        for j, kind in enumerate(f.feature_kinds()):
            if kind in sims:
                sims[kind] += sim[:, j].tolist()
                labels[kind] += list(r["is_sup"])
    cfg = CoEConfig()
    lines = []
    for kind in ("intent", "relation"):
        if labels[kind] and any(labels[kind]) and not all(labels[kind]):
            t = best_threshold(np.array(sims[kind]), np.array(labels[kind]))
            setattr(cfg, f"{kind}_threshold", round(t, 4))
            lines.append(f"{kind}: {round(t, 4)} from {len(labels[kind])} sentence pairs")
        else:
            lines.append(f"{kind}: default {getattr(cfg, f'{kind}_threshold')} (no labelled pairs)")
    return cfg, "; ".join(lines)


def dense_top(bench: Bench, question: str, pool: list[str], k: int) -> list[int]:
    emb = bench.embedder.embed([question, *pool])
    scores = emb[1:] @ emb[0]
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


# ---------------------------------------------------------------- stages
def stage_rag(bench: Bench, cfgs: dict[str, CoEConfig], qs: list[dict[str, Any]], n_cand: int) -> str:
    systems = ["naive top-5", "ScopeCoE greedy", "ScopeCoE exact", "gold supporting facts"]
    res: dict[str, dict[str, list[float]]] = {s: {"acc": [], "f1": [], "n": [], "full": []} for s in systems}
    for r in qs:
        top = dense_top(bench, r["question"], r["pool"], n_cand)
        cands = [r["pool"][i] for i in top]
        f = bench.features(r["question"])
        j = disc(bench, cfgs[r["id"]]).judge(f, cands)
        sets = {
            "naive top-5": cands[:5],
            "ScopeCoE greedy": [cands[i] for i in cover(j.covered, j.kinds, "greedy").selected] or cands[:1],
            "ScopeCoE exact": [cands[i] for i in cover(j.covered, j.kinds, "exact").selected] or cands[:1],
            "gold supporting facts": r["gold"],
        }
        for s, know in sets.items():
            pred = bench.answer(r["question"], know)
            res[s]["acc"].append(float(contains_answer(pred, r["answers"])))
            res[s]["f1"].append(token_f1(pred, r["answers"]))
            res[s]["n"].append(len(know))
            res[s]["full"].append(
                float(j.has_coe([cands.index(k) for k in know if k in cands]))
                if s != "gold supporting facts"
                else float("nan")
            )
    bench.save()
    rows = [
        [
            s,
            f"{np.mean(v['acc']):.3f}",
            f"{np.mean(v['f1']):.3f}",
            f"{np.mean(v['n']):.2f}",
            "-" if s == "gold supporting facts" else f"{np.nanmean(v['full']):.2f}",
        ]
        for s, v in res.items()
    ]
    return markdown_table(
        ["knowledge", "accuracy (containment)", "token F1", "avg snippets", "share with full CoE"], rows
    )


def senp_lexical(r: dict[str, Any], f: EvidenceFeatures) -> tuple[list[str], bool]:
    """SenP with keyword presence judged lexically (independent of the judges under test)."""
    if not f.keywords:
        return list(r["gold"]), False
    cov = LexicalKeywordJudge(0.5).judge(JudgeInput(r["gold"], f.keywords)).covered
    res = sentence_perturbation(r["gold"], cov, ["keyword"] * len(f.keywords), r["answers"])
    return [r["gold"][i] for i in res.kept], res.broken


def stage_effect(bench: Bench, qs: list[dict[str, Any]], irrelevant_pool: list[tuple[str, str]]) -> str:
    """``irrelevant_pool``: (question id, sentence) pairs; a question never gets its own sentences."""
    kinds = ["CoE", "SenP", "WordP"]
    acc: dict[tuple[str, float], list[float]] = {}
    used = 0
    for r in qs:
        f = bench.features(r["question"])
        senp, broken = senp_lexical(r, f)
        wordp, repl = bench.wordp(r, f)
        if not broken or not repl:
            continue
        used += 1
        know = {"CoE": r["gold"], "SenP": senp, "WordP": wordp}
        for kname in kinds:
            for p in PROPORTIONS:
                k = inject_irrelevant(
                    know[kname],
                    [text for qid, text in irrelevant_pool if qid != r["id"]],
                    p,
                    seed=zlib.crc32(r["id"].encode()) % 1000,
                )
                pred = bench.answer(r["question"], k)
                acc.setdefault((kname, p), []).append(float(contains_answer(pred, r["answers"])))
    bench.save()
    rows = [
        [k, *[f"{np.mean(acc[(k, p)]):.3f}" if acc.get((k, p)) else "-" for p in PROPORTIONS]] for k in kinds
    ]
    table = markdown_table(["knowledge", *[f"irrelevant {p}" for p in PROPORTIONS]], rows)
    return (
        table
        + f"\n\nQuestions used: {used} of {len(qs)} "
        "(those where SenP broke the chain and WordP replaced a keyword)."
    )


def stage_robust(bench: Bench, qs: list[dict[str, Any]], answer_pool: list[str]) -> str:
    out: dict[tuple[str, str], tuple[list[str], list[str], list[list[str]]]] = {}
    n_used = 0
    for r in qs:
        ans = r["answers"][0]
        f = bench.features(r["question"])
        senp, broken = senp_lexical(r, f)
        wordp, _ = bench.wordp(r, f)
        try:
            wrong = same_type_wrong_answer(ans, answer_pool, seed=0)
        except Exception:  # noqa: BLE001 - no same-type distractor in the pool: skip the question
            continue
        n_used += 1
        ent = replace_answer(r["gold"], ans, wrong)
        ent_mis = [s for s, o in zip(ent, r["gold"], strict=True) if s != o] or [
            f"{r['question'].rstrip('?')}? {wrong}."
        ]
        llm_mis = [bench.misinfo(r["question"], wrong)]
        rng = random.Random(r["id"])
        for kname, know in {"CoE": r["gold"], "SenP": senp, "WordP": wordp}.items():
            for mname, mis in {"entity replacement": ent_mis, "LLM-generated": llm_mis}.items():
                k = list(know)
                for m in mis:
                    k.insert(rng.randint(0, len(k)), m)
                pred = bench.answer(r["question"], k)
                slot = out.setdefault((kname, mname), ([], [], []))
                slot[0].append(pred)
                slot[1].append(wrong)
                slot[2].append(r["answers"])
    bench.save()
    rows = [
        [k, m, f"{accuracy(p, a):.3f}", f"{following_rate(p, w, a):.3f}", len(p)]
        for (k, m), (p, w, a) in out.items()
    ]
    return markdown_table(["knowledge", "misinformation", "accuracy", "following rate", "n"], rows) + (
        f"\n\nQuestions used: {n_used} of {len(qs)} (a same-type wrong answer was found in the pool of "
        "other questions' answers; yes/no answers are flipped)."
    )


def stage_agreement(bench: Bench, cfgs: dict[str, CoEConfig], qs: list[dict[str, Any]], with_llm: bool) -> str:
    variants: dict[str, dict[str, str]] = {"embedding intent/relation, lexical+embedding keywords (default)": {}}
    if with_llm:
        variants["LLM yes/no (log-prob, calibrated) for all features"] = {
            "intent_judge": "llm",
            "keyword_judge": "llm",
            "relation_judge": "llm",
        }
        variants["lexical keywords only (intent/relation: embedding)"] = {"keyword_judge": "lexical"}
    rows = []
    for name, update in variants.items():
        gold_hit, senp_hit, dis_hit, n_senp = [], [], [], 0
        for r in qs:
            d = disc(bench, cfgs[r["id"]].model_copy(update=update))
            f = bench.features(r["question"])
            gold_hit.append(d.judge(f, r["gold"]).has_coe())
            senp, broken = senp_lexical(r, f)
            if broken:
                n_senp += 1
                senp_hit.append(d.judge(f, senp).has_coe() if senp else False)
            rng = random.Random(r["id"])
            neg = [p for p, y in zip(r["pool"], r["is_sup"], strict=True) if not y]
            dis = rng.sample(neg, min(len(r["gold"]), len(neg)))
            dis_hit.append(d.judge(f, dis).has_coe())
        rows.append(
            [
                name,
                f"{np.mean(gold_hit):.3f}",
                f"{np.mean(senp_hit) if senp_hit else float('nan'):.3f} (n={n_senp})",
                f"{np.mean(dis_hit):.3f}",
            ]
        )
    return markdown_table(
        [
            "judges",
            "CoE found in gold supporting facts",
            "CoE found after SenP",
            "CoE found in random distractor sentences",
        ],
        rows,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--stage", choices=["features", "rag", "effect", "robust", "agreement", "all"], default="all"
    )
    ap.add_argument("--n", type=int, default=30, help="evaluation questions")
    ap.add_argument("--calib", type=int, default=15, help="calibration questions (disjoint)")
    ap.add_argument(
        "--crossfit",
        type=int,
        default=0,
        help="K > 1: no separate calibration set; split the evaluation questions into K folds and "
        "calibrate each fold's thresholds on the other folds (all 100 questions usable)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--candidates", type=int, default=20)
    ap.add_argument("--agreement-llm", action="store_true", help="also evaluate the LLM yes/no judges")
    ap.add_argument("--cache", default=os.environ.get("RAGSIEVE_COE_CACHE", "/tmp/ragsieve-coe-bench"))
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import torch

    torch.set_num_threads(1)
    if args.crossfit > 1:
        args.calib = 0
    calib, qs = load_questions(args.seed, args.calib, args.n)
    bench = Bench(Path(args.cache), args.stage)
    t0 = time.perf_counter()
    for r in calib + qs:
        bench.features(r["question"])
    log.info("features ready (%.0fs)", time.perf_counter() - t0)
    cfgs: dict[str, CoEConfig] = {}
    if args.crossfit > 1:
        notes = []
        for fold in range(args.crossfit):
            held = qs[fold :: args.crossfit]
            fit_on = [r for i, r in enumerate(qs) if i % args.crossfit != fold]
            cfg, note = calibrate(bench, fit_on)
            cfgs.update({r["id"]: cfg for r in held})
            notes.append(f"fold {fold + 1} ({len(held)} questions) {note}")
        calib_note = (
            f"{args.crossfit}-fold cross-fitting (each fold's thresholds fitted on the other folds' questions): "
            + " | ".join(notes)
        )
        calib_words = f"{args.crossfit}-fold cross-fitted thresholds (no separate calibration set), all"
    else:
        cfg, calib_note = calibrate(bench, calib)
        cfgs = {r["id"]: cfg for r in qs}
        calib_words = f"{args.calib} calibration questions, then"
    src = {
        s: sum(bench.features(r["question"]).source == s for r in qs) for s in ("llm", "partial", "fallback")
    }
    setup = (
        f"Data: HotpotQA dev distractor, `hotpotqa_dev_distractor_first100.jsonl`; seed-{args.seed} shuffle, "
        f"{calib_words} {len(qs)} evaluation questions. Knowledge pool per "
        "question: its 10 paragraphs split into sentences (title-prefixed). Models: SmolLM2-135M-Instruct "
        "Q4_1 (llama.cpp, greedy, "
        "features + answers), all-MiniLM-L6-v2 (dense retrieval over the pool, embedding judges). Feature "
        f"extraction source on the evaluation questions: {src}. Calibrated thresholds: {calib_note}. "
        "Accuracy = normalised answer containment."
    )
    # Irrelevant text comes from the other questions of the file (all 100 are evaluated when cross-fitting).
    others = load_questions(args.seed, 0, 100)[1]
    irrelevant_pool = [(r["id"], p) for r in others for p, y in zip(r["pool"], r["is_sup"], strict=True) if not y]
    answer_pool = [r["answers"][0] for r in load_questions(args.seed, 0, 100)[1]]
    if args.stage in ("rag", "all"):
        body = stage_rag(bench, cfgs, qs, args.candidates)
        write_section(
            "results/chain-of-evidence.md",
            "coe-rag",
            "CoE: naive RAG vs RAG + ScopeCoE (HotpotQA)",
            setup + f" Candidates for ScopeCoE: dense top-{args.candidates}.\n\n" + body,
        )
    if args.stage in ("effect", "all"):
        body = stage_effect(bench, qs, irrelevant_pool)
        write_section(
            "results/chain-of-evidence.md",
            "coe-effect",
            "CoE: effectiveness of CoE / SenP / WordP knowledge vs irrelevant text",
            setup + " Irrelevant text: non-supporting sentences of other questions, share of characters. "
            "SenP removes keyword-bearing, answer-free gold sentences (keywords judged lexically) until a "
            "keyword is lost; WordP replaces each non-answer keyword's mentions by an LLM generalisation.\n\n"
            + body,
        )
    if args.stage in ("robust", "all"):
        body = stage_robust(bench, qs, answer_pool)
        write_section(
            "results/chain-of-evidence.md",
            "coe-robust",
            "CoE: robustness to misinformation",
            setup + " Misinformation is inserted at a random position. Following rate = share of answers "
            "containing the wrong answer and not the gold one.\n\n" + body,
        )
    if args.stage in ("agreement", "all"):
        body = stage_agreement(bench, cfgs, qs, args.agreement_llm)
        write_section(
            "results/chain-of-evidence.md",
            "coe-agreement-llm" if args.agreement_llm else "coe-agreement",
            "CoE: discrimination vs supporting-fact annotations" + (" (with LLM judges)" if args.agreement_llm else ""),
            setup + " SenP here uses lexical keyword matching; distractors: as many random non-supporting "
            "sentences of the same question as it has supporting facts.\n\n" + body,
        )
    bench.save()
    log.info("done: %d new generations in %.0fs", bench.n_new, bench.gen_seconds)


if __name__ == "__main__":
    main()
