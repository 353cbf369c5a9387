"""Coordinated passages as one voice: the similarity behind the cluster rule, its threshold
chosen on a training split, and what it costs on clean corpora (no LLM).

Data (``../shared/data``, see each PROVENANCE.md); the split is fixed before looking at results:

* **training**: attack = PoisonedRAG's MS MARCO targets (100 targets, 5 GPT-4 passages each);
  clean = SQuAD 2.0 article "Normans" (its answerable questions, top 10 retrieved from an index of
  all SQuAD 2.0 paragraphs) and HotpotQA contexts (the 10 paragraphs, gold and distractors) of the
  non-target questions at even positions of ``hotpotqa_dev_distractor_500.jsonl``;
* **held out**: attack = PoisonedRAG's HotpotQA targets (the 99 with a HotpotQA row: 5 GPT-4
  passages beside the question's 10 HotpotQA contexts); clean = SQuAD 2.0 articles
  "Computational complexity theory" and "Rhine" (answerable questions), HotpotQA non-target
  questions at odd positions (top 10 retrieved from an index of their contexts) and the bundled
  demo questions (top 10 from the demo index).

Each SQuAD/HotpotQA paragraph is indexed as its own document (as if every paragraph were on a site
of its own), so only meaning can group them: the strictest setting for the clean cost. The rule
(:class:`ragsieve.voices.VoiceGrouper`): complete-linkage clusters of the retrieved passages whose
pairwise cosine (bundled MiniLM) is at or above ``t``, spanning at least ``m`` documents, are
coordinated. ``(linkage, t, m)`` is chosen on training only: among the settings with coordinated clusters in
at most 1 % of the training clean sets (half the 2 % goal), the one that catches the most training
attacks, ties to the higher ``t``. Then, with it fixed, the lower bar for passages that read one
answer to the question (``ragsieve.voices.claim_clusters``) is chosen the same way. Attack writers
without an LLM (templates, the assertion
templates, the spread-out writer) are compared by how tight their passages for one target are.

    python benchmarks/voices.py                 # about 10-20 minutes on a busy 2-core machine
    python benchmarks/voices.py --no-write      # print only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from benchmarks._data import read_jsonl  # noqa: E402
from benchmarks._report import DOCS, ROOT, SHARED_DATA, markdown_table, write_section  # noqa: E402
from benchmarks._stats import count_with_interval as wilson_text  # noqa: E402

POISON = SHARED_DATA / "trust" / "poisonedrag"
SQUAD = SHARED_DATA / "trust" / "squad2"
WIKICONTRADICT = SHARED_DATA / "trust" / "wikicontradict"
CONFLICTQA = SHARED_DATA / "trust" / "conflictqa"
HOTPOT = SHARED_DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"
RUNS = ROOT / "runs" / "voices"
PAGE = "results/knowledge-poisoning.md"
PLOT = "img/voices_similarity.png"
TRAIN_ARTICLES = ("Normans",)
K = 10  # retrieved candidates the poison stage sees (sieve.candidates)
CLEAN_BUDGET = 0.01  # training clean sets with a coordinated cluster, at most
GRID_T = [round(x, 2) for x in np.arange(0.50, 0.96, 0.01)]
GRID_M = (2, 3)
GRID_LINKAGE = ("complete", "average")


class Rule(NamedTuple):
    """One setting of the cluster rule: tightness, documents a cluster spans, linkage, whether
    passages that read different answers are kept apart (``read``), and the lower bar for passages
    that read one answer (``claim``; ``None``: no clusters by claim)."""

    t: float
    m: int
    linkage: str = "complete"
    claim: float | None = None
    read: bool = False
N_PASSAGES = 5


class Embeddings:
    """The bundled embedder with a content-hash cache under runs/voices (reruns embed nothing)."""

    def __init__(self) -> None:
        from ragsieve.config import EmbedderConfig
        from ragsieve.embed import load_embedder

        self.embedder = load_embedder(EmbedderConfig(cache_dir=str(RUNS / "embed-cache")))
        self.embedder.warm_up()

    def cosines(self, texts: Sequence[str]) -> np.ndarray:
        from ragsieve.voices import pairwise_cosine

        return pairwise_cosine(self.embedder.embed(list(texts)))


def upper(cos: np.ndarray) -> list[float]:
    return [float(x) for x in cos[np.triu_indices(cos.shape[0], k=1)]]


# ---------------------------------------------------------------- sets
def poisonedrag() -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, dict[str, Any]]]:
    """Attack passages per target: MS MARCO (training), HotpotQA with a HotpotQA row (held out),
    and every target's row (its question)."""
    texts = {r["id"]: r["text"] for r in read_jsonl(POISON / "corpus.jsonl")}
    train: dict[str, list[str]] = {}
    test: dict[str, list[str]] = {}
    rows: dict[str, dict[str, Any]] = {}
    for r in read_jsonl(POISON / "questions.jsonl"):
        passages = [texts[p] for p in r["poison_passage_ids"][:N_PASSAGES]]
        rows[r["id"]] = r
        if r["dataset"] == "msmarco":
            train[r["id"]] = passages
        elif r.get("hotpotqa_500_id"):
            test[r["id"]] = passages
    return train, test, rows


def hotpot_rows() -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """HotpotQA rows by id, and the non-target rows split by position: even (training), odd (held out)."""
    targets = {r.get("hotpotqa_500_id") for r in read_jsonl(POISON / "questions.jsonl")}
    rows = list(read_jsonl(HOTPOT))
    clean = [(i, r) for i, r in enumerate(rows) if r["id"] not in targets]
    return {r["id"]: r for r in rows}, [r for i, r in clean if i % 2 == 0], [r for i, r in clean if i % 2 == 1]


def paragraph_chunks(paragraphs: Sequence[tuple[str, str, str]]) -> list[Any]:
    """(id, title, text) paragraphs as chunks, each its own document."""
    from ragsieve.types import Chunk

    return [Chunk(id=pid, text=f"{title}: {text}" if title else text, doc_id=pid,
                  source=f"en.wikipedia.org/{pid}", title=title) for pid, title, text in paragraphs]


def build_index(name: str, chunks: list[Any], emb: Embeddings) -> Any:
    from ragsieve.index import Index

    folder = Path(tempfile.mkdtemp(prefix=f"voices-{name}-", dir=RUNS))
    index = Index.from_chunks(chunks, folder / "index", embedder=emb.embedder)
    index.warm_up()
    return index


def retrieved_sets(index: Any, questions: Sequence[str]) -> list[list[Any]]:
    return [index.search(q, k=K) for q in questions]


# ---------------------------------------------------------------- rule
class Prepared(NamedTuple):
    """One retrieved set as the rule sees it: pairwise cosines, each passage's document (its
    series, :func:`ragsieve.voices.series_of`: yearly pages of one series count once), and the
    answer each passage reads to the question (:func:`ragsieve.voices.read_claims`)."""

    cos: np.ndarray
    docs: list[str]
    claims: list[Any]


def coordinated(s: Prepared, rule: Rule) -> list[list[int]]:
    """The clusters the rule calls coordinated (``linkage`` at ``t``, and by claim at ``claim``;
    >= ``m`` documents), as :class:`ragsieve.voices.VoiceGrouper` finds them (before joining
    clusters that share a member)."""
    from ragsieve.voices import claim_clusters, disagreeing, tight_clusters

    found = tight_clusters(disagreeing(s.cos, s.claims) if rule.read else s.cos, rule.t, rule.linkage)
    if rule.claim is not None:
        found += claim_clusters(s.cos, s.claims, rule.claim, rule.linkage)
    return [c for c in found if len({s.docs[i] for i in c}) >= rule.m]


def attack_caught(s: Prepared, attack: set[int], rule: Rule) -> bool:
    """A coordinated cluster holds at least ``m`` attack passages."""
    return any(len(attack & set(c)) >= rule.m for c in coordinated(s, rule))


# ---------------------------------------------------------------- writers without an LLM
def writer_tightness(rows: dict[str, dict[str, Any]], emb: Embeddings, rule: Rule) -> list[list[object]]:
    """Mean and minimum pairwise cosine of one target's passages, per writer (held-out targets)."""
    from ragsieve.attack.poison import AssertionWriter, SpreadWriter, Target, TemplateWriter

    writers: dict[str, Any] = {
        "template (question + assertion)": TemplateWriter(seed=0),
        "assert-template": AssertionWriter(seed=0, templates_only=True),
        "spread (registers chosen apart with the embedder, as `attack poison --writer spread`)":
            SpreadWriter(emb.embedder, seed=0),
    }
    out: list[list[object]] = []
    _, gpt4, _ = poisonedrag()
    groups: dict[str, list[list[str]]] = {"GPT-4 (PoisonedRAG)": list(gpt4.values())}
    questions = {"GPT-4 (PoisonedRAG)": [rows[tid]["question"] for tid in gpt4]}
    for name, writer in writers.items():
        written = [[p.text for p in writer.write(Target(r["id"], r["question"], list(r["answers"]),
                                                        r["poison_answer"]), N_PASSAGES)] for r in rows.values()]
        kept = [(r["question"], texts) for r, texts in zip(rows.values(), written, strict=True) if len(texts) >= 2]
        groups[name] = [texts for _, texts in kept]  # a skipped target wrote none
        questions[name] = [q for q, _ in kept]
    from ragsieve.voices import read_claims

    for name, sets in groups.items():
        means, mins, caught = [], [], 0
        for q, texts in zip(questions[name], sets, strict=True):
            cos = emb.cosines(texts)
            pairs = upper(cos)
            means.append(float(np.mean(pairs)))
            mins.append(float(np.min(pairs)))
            alone = Prepared(cos, [str(i) for i in range(len(texts))], read_claims(q, texts))
            caught += attack_caught(alone, set(range(len(texts))), rule)
        out.append([name, len(sets), f"{np.median(means):.2f}", f"{np.percentile(means, 10):.2f}",
                    f"{np.median(mins):.2f}", wilson_text(caught, len(sets))])
    return out


# ---------------------------------------------------------------- the graded signal
def coordination_signal(rule: Rule, emb: Embeddings, attack: dict[str, list[str]], rows: dict[str, dict[str, Any]],
                        hotpot_by_id: dict[str, dict[str, Any]], clean_sets: dict[str, list[list[Any]]],
                        asked: dict[str, list[str]]) -> list[list[object]]:
    """How the poison judge grades the coordinated voices it finds on the held-out sets."""
    from ragsieve.sieve.poison import PoisonJudge
    from ragsieve.types import Chunk, SearchHit

    # the duplicate options this was measured with (stages.attack's; the judge's own are stages.poison's)
    judge = PoisonJudge(coordination=True, embedder=emb.embedder, voice_tightness=rule.t, voice_members=rule.m,
                        voice_claim_tightness=rule.claim, duplicate_jaccard=0.5, duplicates="drop")

    def grades(scores: list[float]) -> list[object]:
        return [len(scores), *(sum(abs(x - g) < 1e-9 for x in scores) for g in (1.0, 0.75, 0.5, 0.0))]

    attacked: list[float] = []
    for tid, texts in attack.items():
        contexts = hotpot_by_id[rows[tid]["hotpotqa_500_id"]]["contexts"]
        hits = [SearchHit(Chunk(f"a{i}", t, f"a{i}", f"poison{i}.example/{tid}"), 1.0, i, {})
                for i, t in enumerate(texts)]
        hits += [SearchHit(Chunk(f"c{i}", c["paragraph_text"], f"c{i}", f"en.wikipedia.org/{c['title']}",
                                 title=c["title"]), 0.5,
                           len(texts) + i, {}) for i, c in enumerate(contexts)]
        verdicts = judge.judge(rows[tid]["question"], hits)
        attacked.append(max(v.coordination for v in verdicts[: len(texts)]))
    out: list[list[object]] = [["HotpotQA attacked (held out)", *grades(attacked)]]
    for name, sets in clean_sets.items():
        if "held out" in name:
            scores = [max((v.coordination for v in judge.judge(q, hits)), default=0.0)
                      for q, hits in zip(asked[name], sets, strict=True) if hits]
            out.append([name, *grades(scores)])
    return out


# ---------------------------------------------------------------- run
def run(args: argparse.Namespace) -> None:
    from ragsieve.demo import demo_corpus_dir, demo_data_path
    from ragsieve.index import Index

    RUNS.mkdir(parents=True, exist_ok=True)
    start = time.time()
    emb = Embeddings()
    train_attack, test_attack, target_rows = poisonedrag()
    test_rows = {tid: target_rows[tid] for tid in test_attack}
    hotpot_by_id, hotpot_train, hotpot_test = hotpot_rows()
    hotpot_train, hotpot_test = hotpot_train[: args.hotpot], hotpot_test[: args.hotpot]

    # similarity distributions (pairs)
    pairs: dict[str, list[float]] = {}
    for name, attack in (("MS MARCO (training)", train_attack), ("HotpotQA (held out)", test_attack)):
        pairs[f"attack-attack, {name}"] = [c for texts in attack.values() for c in upper(emb.cosines(texts))]
    attack_gold: list[float] = []
    for tid, texts in test_attack.items():
        gold = [c["paragraph_text"] for c in hotpot_by_id[test_rows[tid]["hotpotqa_500_id"]]["contexts"]
                if c["is_supporting"]]
        cos = emb.cosines(texts + gold)
        attack_gold += [float(x) for x in cos[: len(texts), len(texts):].ravel()]
    pairs["attack-gold, HotpotQA"] = attack_gold
    squad = list(read_jsonl(SQUAD / "corpus.jsonl"))
    for part, keep in (("training", True), ("held out", False)):
        same: list[float] = []
        for title in sorted({p["title"] for p in squad}):
            if (title in TRAIN_ARTICLES) == keep:
                same += upper(emb.cosines([p["text"] for p in squad if p["title"] == title]))
        pairs[f"same article, SQuAD 2.0 ({part})"] = same
    for part, rows in (("training", hotpot_train), ("held out", hotpot_test)):
        pairs[f"same topic, different articles: HotpotQA contexts ({part})"] = [
            c for r in rows for c in upper(emb.cosines([c["paragraph_text"] for c in r["contexts"]]))]
    wc: dict[str, list[str]] = {}
    for p in read_jsonl(WIKICONTRADICT / "corpus.jsonl"):
        wc.setdefault(p["id"].rsplit("_", 1)[0], []).append(p["text"])
    pairs["same article, two sites that contradict: WikiContradict"] = [
        c for texts in wc.values() if len(texts) == 2 for c in upper(emb.cosines(texts))]
    cqa: dict[str, list[str]] = {}
    for p in read_jsonl(CONFLICTQA / "corpus.jsonl"):
        cqa.setdefault(p["id"].rsplit("_", 1)[0], []).append(p["text"])
    texts_cqa = [texts for texts in cqa.values() if len(texts) == 2]
    cos_cqa = emb.cosines([t for texts in texts_cqa for t in texts])
    pairs["same topic, two sites arguing opposite answers: ConflictQA (GPT-4)"] = [
        float(cos_cqa[2 * i, 2 * i + 1]) for i in range(len(texts_cqa))]
    print(f"pairs done in {time.time() - start:.0f}s", flush=True)

    # retrieved sets: SQuAD (one index over every paragraph), HotpotQA (an index per part), demo
    squad_index = build_index("squad", paragraph_chunks([(p["id"], p["title"], p["text"]) for p in squad]), emb)
    article_of = {p["id"]: p["title"] for p in squad}
    squad_q = [q for q in read_jsonl(SQUAD / "questions.jsonl") if q.get("answerable")]
    clean_sets: dict[str, list[list[Any]]] = {}
    asked: dict[str, list[str]] = {}  # the questions of each clean set, in order
    for part, keep in (("training", True), ("held out", False)):
        qs = [q["question"] for q in squad_q if (article_of[q["gold_passage_id"]] in TRAIN_ARTICLES) == keep]
        clean_sets[f"SQuAD 2.0 answerable ({part})"] = retrieved_sets(squad_index, qs)
        asked[f"SQuAD 2.0 answerable ({part})"] = qs
    for part, rows in (("training", hotpot_train), ("held out", hotpot_test)):
        paragraphs: dict[str, tuple[str, str, str]] = {}
        for r in rows:
            for c in r["contexts"]:
                paragraphs.setdefault(c["title"], (f"hotpot:{len(paragraphs)}", c["title"], c["paragraph_text"]))
        index = build_index(f"hotpot-{part.replace(' ', '-')}", paragraph_chunks(list(paragraphs.values())), emb)
        clean_sets[f"HotpotQA clean ({part})"] = retrieved_sets(index, [r["question"] for r in rows])
        asked[f"HotpotQA clean ({part})"] = [r["question"] for r in rows]
    demo_dir = RUNS / "demo-index"
    try:
        demo_index = Index.open(demo_dir, embedder=emb.embedder)
    except Exception:  # noqa: BLE001 - any unreadable or missing index is rebuilt
        demo_index = Index.build(demo_corpus_dir(), demo_dir, embedder=emb.embedder)
    demo_index.warm_up()
    demo_q = [r["question"] for r in read_jsonl(Path(str(demo_data_path("questions.jsonl"))))]
    clean_sets["demo questions (held out)"] = retrieved_sets(demo_index, demo_q)
    asked["demo questions (held out)"] = demo_q
    print(f"retrieval done in {time.time() - start:.0f}s", flush=True)

    from ragsieve.types import Chunk, SearchHit
    from ragsieve.voices import read_claims, series_of

    def prepared(questions: list[str], sets: list[list[Any]]) -> list[Prepared]:
        return [Prepared(emb.cosines([h.chunk.text for h in hits]), [series_of(h) for h in hits],
                         read_claims(q, [h.chunk.text for h in hits]))
                for q, hits in zip(questions, sets, strict=True) if hits]

    clean = {name: prepared(asked[name], sets) for name, sets in clean_sets.items()}
    # what each clean set holds, to read the clusters the rule finds (runs/voices/clean-sets.json)
    (RUNS / "clean-sets.json").write_text(json.dumps({
        name: [[{"id": h.chunk.id, "text": h.chunk.text[:160]} for h in hits] for hits in sets if hits]
        for name, sets in clean_sets.items()}), encoding="utf-8")
    (RUNS / "clean-cosines.json").write_text(json.dumps({
        name: [[s.cos.round(4).tolist(), s.docs] for s in sets] for name, sets in clean.items()}), encoding="utf-8")
    # attack sets: training = the MS MARCO passages alone (no clean passages in the release);
    # held out = the 5 passages beside the question's 10 HotpotQA contexts
    train_sets = [(Prepared(emb.cosines(texts), [f"a{i}" for i in range(len(texts))],
                            read_claims(target_rows[tid]["question"], texts)), set(range(len(texts))))
                  for tid, texts in train_attack.items()]
    test_sets = []
    gold_of: list[set[int]] = []  # positions of the gold (supporting) paragraphs in each held-out set
    for tid, texts in test_attack.items():
        contexts = hotpot_by_id[test_rows[tid]["hotpotqa_500_id"]]["contexts"]
        ctx = [c["paragraph_text"] for c in contexts]
        docs = [f"a{i}" for i in range(len(texts))] + [
            series_of(SearchHit(Chunk(f"c{i}", t, f"c{i}", f"en.wikipedia.org/c{i}", title=c["title"]), 0.5, i, {}))
            for i, (t, c) in enumerate(zip(ctx, contexts, strict=True))]
        claims = read_claims(test_rows[tid]["question"], texts + ctx)
        test_sets.append((Prepared(emb.cosines(texts + ctx), docs, claims), set(range(len(texts)))))
        gold_of.append({len(texts) + i for i, c in enumerate(contexts) if c["is_supporting"]})

    def clean_rate(sets: list[Prepared], rule: Rule) -> tuple[int, int]:
        return sum(bool(coordinated(s, rule)) for s in sets), len(sets)

    train_clean = [s for name, sets in clean.items() if "training" in name for s in sets]
    grid: list[tuple[Rule, float, float]] = []
    for linkage in GRID_LINKAGE:
        for m in GRID_M:
            for t in GRID_T:
                rule = Rule(t, m, linkage, read=True)
                k_clean, n_clean = clean_rate(train_clean, rule)
                caught = sum(attack_caught(p, a, rule) for p, a in train_sets)
                grid.append((rule, k_clean / n_clean, caught / len(train_sets)))
    allowed = [g for g in grid if g[1] <= CLEAN_BUDGET]
    tight, clean_best, recall_best = max(allowed, key=lambda g: (g[2], g[0].t))
    print(f"chosen {tight}: training clean {clean_best:.3f}, training recall {recall_best:.3f}", flush=True)
    # then, with that rule fixed, the bar for passages that read one answer: the same budget,
    # the most training attacks caught, ties to the higher bar
    claim_grid: list[tuple[Rule, float, float]] = []
    for c in [x for x in GRID_T if x <= tight.t]:
        rule = tight._replace(claim=c)
        k_clean, n_clean = clean_rate(train_clean, rule)
        caught = sum(attack_caught(p, a, rule) for p, a in train_sets)
        claim_grid.append((rule, k_clean / n_clean, caught / len(train_sets)))
    best = max([g for g in claim_grid if g[1] <= CLEAN_BUDGET], key=lambda g: (g[2], g[0].claim or 0.0))[0]
    print(f"chosen claim bar {best.claim}", flush=True)

    # the signal's precision on held-out sets: coordinated clusters that are attack passages
    attack_clusters = sum(bool(coordinated(p, best)) for p, _ in test_sets)
    clean_clusters = sum(k for name, sets in clean.items() if "held out" in name for k in [clean_rate(sets, best)[0]])

    # a gold paragraph inside the attack's cluster would be counted as part of the attacker's voice
    swallowed = {rule: sum(any(gold & set(c) for c in coordinated(p, rule))
                           for (p, _), gold in zip(test_sets, gold_of, strict=True))
                 for rule in (best._replace(claim=None, read=False), best)}

    signal_rows = coordination_signal(best, emb, test_attack, test_rows, hotpot_by_id, clean_sets, asked)

    if not args.no_write:
        plot(pairs, best.t)
    report(args, pairs, clean, train_sets, test_sets, grid, claim_grid, best, attack_clusters, clean_clusters,
           swallowed, writer_tightness(test_rows, emb, best), signal_rows, time.time() - start)


def plot(pairs: dict[str, list[float]], threshold: float) -> None:
    from ragsieve.extras import require

    require("matplotlib", "plots", "the similarity plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    bins = [float(x) for x in np.linspace(-0.1, 1.0, 56)]
    for name, values in pairs.items():
        ax.hist(values, bins=bins, density=True, histtype="step", linewidth=1.6, label=f"{name} (n={len(values)})")
    ax.axvline(threshold, color="black", linestyle="--", label=f"chosen tightness {threshold:.2f}")
    ax.set_xlabel("pairwise cosine similarity (bundled MiniLM)")
    ax.set_ylabel("density")
    ax.set_title("Attack passages agree with each other far more than real sources do")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(DOCS / PLOT, dpi=110)
    plt.close(fig)


def report(args: argparse.Namespace, pairs: dict[str, list[float]], clean: dict[str, Any], train_sets: list[Any],
           test_sets: list[Any], grid: list[tuple[Rule, float, float]], claim_grid: list[tuple[Rule, float, float]],
           chosen: Rule, attack_clusters: int, clean_clusters: int, swallowed: dict[Rule, int],
           writers: list[list[object]], signal_rows: list[list[object]], seconds: float) -> None:
    t, m, linkage, claim, _ = chosen
    tight = chosen._replace(claim=None, read=False)
    cqa_pairs = next(v for name, v in pairs.items() if "ConflictQA" in name)
    dist_rows = [[name, len(v), f"{np.percentile(v, 10):.2f}", f"{np.median(v):.2f}", f"{np.percentile(v, 90):.2f}",
                  f"{np.percentile(v, 99):.2f}", f"{np.mean(np.asarray(v) >= t):.1%}"] for name, v in pairs.items()]
    clean_rows: list[list[object]] = []
    for name, sets in clean.items():
        clean_rows.append([name, *(wilson_text(sum(bool(coordinated(s, r)) for s in sets), len(sets))
                                   for r in (tight, chosen))])

    def caught(sets: list[Any], rule: Rule) -> str:
        return wilson_text(sum(attack_caught(p, a, rule) for p, a in sets), len(sets))

    claim_rows: list[list[object]] = [[f"{g[0].claim:.2f}", f"{g[1]:.1%}", f"{g[2]:.1%}"] for g in claim_grid
                                      if g[0].claim is not None and abs(g[0].claim - (claim or 0.0)) <= 0.08 + 1e-9]
    # per linkage and member count: the best setting within the clean budget, and the grid near the choice
    best_of: list[list[object]] = []
    for lk in GRID_LINKAGE:
        for mm in GRID_M:
            ok = [g for g in grid if g[0].linkage == lk and g[0].m == mm and g[1] <= CLEAN_BUDGET]
            if ok:
                g = max(ok, key=lambda g: (g[2], g[0].t))
                best_of.append([lk, mm, f"{g[0].t:.2f}", f"{g[1]:.1%}", f"{g[2]:.1%}"])
    near = [g for g in grid if g[0].m == m and g[0].linkage == linkage and abs(g[0].t - t) <= 0.05 + 1e-9]
    grid_rows: list[list[object]] = [[f"{g[0].t:.2f}", f"{g[1]:.1%}", f"{g[2]:.1%}"] for g in near]
    flagged = attack_clusters + clean_clusters
    body = f"""
Are the passages written for one target tighter than real sources? The rule of
`ragsieve.voices.VoiceGrouper`: clusters of the top {K} retrieved passages by the cosine of their
embeddings (bundled MiniLM), complete linkage (every pair reaches `t`) or average linkage (groups
join when their mean pairwise cosine reaches `t`), spanning at least `m` documents, are one
coordinated voice. No LLM is involved anywhere in this section.

**Split** (fixed before any number was read): *training* = PoisonedRAG's 100 MS MARCO targets (5
GPT-4 passages each) as attacks; SQuAD 2.0 article "Normans" (its answerable questions, top {K}
from an index of all SQuAD 2.0 paragraphs) and HotpotQA contexts of the non-target questions at
even positions (top {K} from an index of their paragraphs) as clean sets. *Held out* = the 99
PoisonedRAG HotpotQA targets (5 passages beside the question's 10 HotpotQA contexts); SQuAD 2.0
articles "Computational complexity theory" and "Rhine"; HotpotQA non-target questions at odd
positions; the bundled demo questions. Each SQuAD/HotpotQA paragraph is its own document (as if
every paragraph sat on a site of its own), so only meaning can group them. HotpotQA questions per
part: {args.hotpot} at most.

**Threshold** (passages that read different answers to the question, `ragsieve.voices.read_claims`,
kept apart; the pages of one series on one site counting as one document, `ragsieve.voices.series_of`):
among the (t, m) with a coordinated cluster in at most {CLEAN_BUDGET:.0%} of the training
clean sets (half the 2 % goal), the one that catches the most training attacks (ties to the higher t):
**{linkage} linkage, t = {t:.2f}, m = {m}** (`ragsieve.voices.LINKAGE`, `TIGHTNESS`, `MIN_MEMBERS`).

**Clusters by claim**: embeddings are mostly topic, so an honest page about the event an attack
retells sits as close to the attacker's paraphrases as they sit to each other. What sets them
apart is what they answer. `ragsieve.voices.claim_clusters` reads each passage's answer to the
question without a model (`ragsieve.voices.read_claims`: the conflict stage's rule reader, however
firm; a yes/no stance is no claim), sets apart two passages that read different answers, and
clusters the passages that read one answer at a lower bar (a passage that reads none joins a voice
only by the meaning bar); such a cluster spanning `m` documents is coordinated too. Its bar, with
the rule above fixed: among the bars with the training clean sets within the same {CLEAN_BUDGET:.0%}, the one
that catches the most training attacks (ties to the higher bar): **claim bar {claim:.2f}**
(`ragsieve.voices.CLAIM_TIGHTNESS`).
Training grid near it:

{markdown_table(["claim bar", "training clean sets flagged", "training attacks caught"], claim_rows)}

The best setting of each linkage and member count within the budget (training):

{markdown_table(["linkage", "m", "t", "training clean sets flagged", "training attacks caught"], best_of)}

![pairwise cosine similarity by kind of pair]({PLOT})

Pairwise cosine by kind of pair (share at or above t = {t:.2f} in the last column):

{markdown_table(["pairs", "n", "p10", "median", "p90", "p99", f">= {t:.2f}"], dist_rows)}

Tightness is not agreement: passages an LLM writes about one question are tight whatever they claim
(ConflictQA's two GPT-4 passages arguing opposite answers: median {np.median(cqa_pairs):.2f},
{np.mean(np.asarray(cqa_pairs) >= t):.1%} at or above t), so a tight cluster says "written alike,
probably by one hand", not "states one answer"; the coordination signal below reads what the members state.

Attacks caught (a coordinated cluster holds at least {m} of the target's 5 passages), 95 % Wilson
intervals, by meaning alone (t = {t:.2f}, answers not read) and as `VoiceGrouper` groups them given the
question (passages reading different answers kept apart, and the clusters by claim at {claim:.2f}):

{markdown_table(["attack set", "by meaning alone", "reading the answers"], [
    ["MS MARCO, GPT-4 passages alone (training)", caught(train_sets, tight), caught(train_sets, chosen)],
    ["HotpotQA, GPT-4 passages beside the 10 contexts (held out)", caught(test_sets, tight),
     caught(test_sets, chosen)],
])}

A gold paragraph inside a coordinated cluster (it would count as part of the attacker's voice) in
{wilson_text(swallowed[tight], len(test_sets))} of the held-out attacked sets by meaning alone,
{wilson_text(swallowed[chosen], len(test_sets))} reading the answers.

Clean cost: questions without an attack whose top {K} hold a coordinated cluster (goal: at most 2 %):

{markdown_table(["clean questions", "by meaning alone", "reading the answers"], clean_rows)}

Precision of the signal (with the clusters by claim) on the held-out sets as assembled here
({len(test_sets)} attacked sets, {sum(
    len(s) for n, s in clean.items() if "held out" in n)} clean ones): {wilson_text(attack_clusters, flagged)} of
the sets with a coordinated cluster are attacked sets. That depends on how common attacks are, so
the check stays a graded signal (`PoisonVerdict.coordination`), not a veto.

The graded coordination signal (`PoisonJudge(coordination=True)`, `ragsieve.voices.coordination`) on
the held-out sets: 1.0 when the cluster states a value no passage outside it states, 0.75 when
passages outside name a rival value of that kind (or nothing is outside, or the members share no
value), 0.5 when what it states is stated outside too, 0 outside a coordinated voice. Attacked sets:
the highest score among the attack passages; clean sets: the highest score of any passage.

{markdown_table(["sets", "n", "1.0", "0.75", "0.5", "0 (no coordinated voice)"], signal_rows)}

The training grid near the choice ({linkage} linkage, m = {m}):

{markdown_table(["t", "training clean sets flagged", "training attacks caught"], grid_rows)}

Writers without an LLM, on the held-out HotpotQA targets (5 passages per target): how tight one
target's passages are, and how many the rule catches (passages alone, t = {t:.2f}, m = {m}, claim bar {claim:.2f}):

{markdown_table(["writer", "targets", "mean cosine, median", "mean cosine, p10", "min cosine, median",
                 "caught"], writers)}

Ran in {seconds / 60:.1f} minutes.
"""
    print(body)
    if not args.no_write:
        write_section(PAGE, "voices", "Coordinated passages as one voice: the cluster rule and its clean cost", body)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hotpot", type=int, default=1000, help="HotpotQA clean questions per part, at most")
    ap.add_argument("--no-write", action="store_true", help="print only; write neither the section nor the plot")
    args = ap.parse_args()
    run(args)


if __name__ == "__main__":
    main()
