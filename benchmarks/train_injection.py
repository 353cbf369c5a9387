"""Train the indirect-prompt-injection sentence classifier and measure it on held-out data.

    python benchmarks/train_injection.py            # writes src/ragsieve/resources/injection.npz(.json)
    python benchmarks/train_injection.py --no-save  # figures only

Model: logistic regression (scikit-learn, seeded, balanced classes) over the bundled MiniLM
embedding of each sentence, the structure features of :mod:`ragsieve.filtering.injection` and
TF-IDF word 1-2-grams (fitted on the training units), shipped as arrays. Units are the ones
the stage scores (:func:`split_units`, :func:`scoreable`), each scored by its best piece
(:func:`score_units`).

Split (whole sources and families held out, the threshold chosen on the validation part only):

* train: BIPIA train attacks (80 % by id), the garak probe families ``LatentInjectionReportFull``,
  ``LatentInjectionResumeFull``, ``LatentInjectionFactSnippetLegalFull``, ``LatentWhois`` (at most
  60 rows each: near-duplicate fills), ``MarkdownImageExfil``, ``ColabAIDataLeakage`` and
  ``PlaygroundMarkdownExfil``; negatives:
  SQuADShifts new_wiki and NQ gold passages (disjoint samples), NotInject queries, BIPIA benign
  emails and Stack Overflow answers of BIPIA's *train* split (80 % each);
* validation (threshold): the other 20 % of those attack rows and benign rows, and other new_wiki/NQ
  passages; the threshold is the lowest one that flags at most ``--val-passage-fp`` of the
  validation ordinary passages;
* test: BIPIA *test* attacks, the held-out garak families (FactSnippet Eiffel, WhoisSnippet,
  TranslationEnFr, StringAssemblyDataExfil, MarkdownURINonImageExfilExtended; garak's families
  share instruction templates, so BIPIA test is the stricter measure), contexts.jsonl
  (documents with an embedded injection, whole), and ordinary corpora never
  trained on: the demo corpus, SQuAD 2.0 passages, HotpotQA paragraphs, BEIR NFCorpus abstracts,
  BIPIA's *test* Stack Overflow answers and emails, the garak FactSnippet paragraphs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import prose_corpora, read_jsonl  # noqa: E402
from _report import ROOT, SHARED_DATA, markdown_table, write_section  # noqa: E402
from _stats import wilson_interval  # noqa: E402
from ragsieve.array_models import TfidfArrays  # noqa: E402
from ragsieve.filtering.injection import (  # noqa: E402
    FEATURE_NAMES,
    InjectionModel,
    default_model_path,
    score_units,
    scoreable,
    split_units,
)

INJECTION = SHARED_DATA / "trust" / "injection"
TRAIN_GARAK = ("LatentInjectionReportFull", "LatentInjectionResumeFull", "LatentInjectionFactSnippetLegalFull",
               "LatentWhois", "MarkdownImageExfil", "ColabAIDataLeakage", "PlaygroundMarkdownExfil")
CAP_PER_FAMILY = 60
SEED = 13


def bucket(key: str) -> float:
    """A stable [0, 1) draw per id (the split does not depend on row order)."""
    return int(hashlib.sha256(f"{SEED}:{key}".encode()).hexdigest()[:8], 16) / 2**32


def units_of(text: str) -> list[str]:
    return [u.text for u in split_units(text) if scoreable(u.text)]


# ------------------------------------------------------------------------------ data
def ordinary_passages() -> dict[str, list[str]]:
    """Training-side ordinary passages (new_wiki, NQ gold), deduplicated, by source."""
    out: dict[str, list[str]] = {}
    for name, path in (("new_wiki", SHARED_DATA / "training/squadshifts/new_wiki.jsonl"),
                       ("nq_gold", SHARED_DATA / "training/nq_gold/nq_gold.jsonl")):
        seen: dict[str, None] = {}
        for row in read_jsonl(path):
            for c in row.get("contexts", []):
                seen.setdefault(c["text"], None)
        out[name] = list(seen)
    return out


def held_out_ordinary(n_per_corpus: int, rng: random.Random) -> dict[str, list[str]]:
    """Ordinary corpora the classifier never sees in training (a seeded sample of each)."""
    demo: list[str] = []
    for path in sorted((ROOT / "src/ragsieve/demo/corpus").rglob("*")):
        if path.suffix in (".md", ".txt"):
            demo.extend(p.strip() for p in path.read_text(encoding="utf-8").split("\n\n") if len(p.split()) >= 8)
    out = {"demo corpus": demo, **prose_corpora(SHARED_DATA)}
    return {k: (rng.sample(v, n_per_corpus) if len(v) > n_per_corpus else v) for k, v in out.items()}


def split_rows(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(SEED)
    attacks = read_jsonl(INJECTION / "attacks.jsonl")
    benign = read_jsonl(INJECTION / "benign.jsonl")
    pos_train: list[str] = []
    pos_val: list[str] = []
    pos_test: dict[str, list[str]] = defaultdict(list)
    per_family: Counter[str] = Counter()
    for row in sorted(attacks, key=lambda r: bucket(r["id"])):
        garak = row["source"].startswith("NVIDIA")
        family = row["subcategory"] if garak else f"BIPIA {row['category']}"
        if (garak and row["subcategory"] in TRAIN_GARAK) or (not garak and row["split"] == "train"):
            if garak and per_family[family] >= CAP_PER_FAMILY:
                continue
            per_family[family] += 1
            (pos_val if bucket("val:" + row["id"]) < 0.2 else pos_train).append(row["text"])
        else:
            pos_test[family].append(row["text"])
    neg_train: list[str] = []
    neg_val: list[str] = []
    benign_test: dict[str, list[str]] = defaultdict(list)
    for row in benign:
        kind = row["kind"]
        if kind == "document:fact_snippet":
            benign_test["garak FactSnippet paragraphs"].append(row["text"])
        elif kind.startswith("document:") and row.get("split") == "test":
            name = "Stack Overflow answers (BIPIA test)" if kind == "document:code" else "emails (BIPIA test)"
            benign_test[name].append(row["text"])
        elif kind.startswith("query:") and bucket("notinject:" + row["id"]) >= 0.5:
            benign_test["NotInject queries (held-out half)"].append(row["text"])
        elif bucket("val:" + row["id"]) < 0.2:
            neg_val.append(row["text"])
        else:
            neg_train.append(row["text"])
    ordinary = ordinary_passages()
    ord_train: list[str] = []
    ord_val: list[str] = []
    for passages in ordinary.values():
        picked = rng.sample(passages, min(len(passages), args.train_passages + args.val_passages))
        ord_train.extend(picked[: args.train_passages])
        ord_val.extend(picked[args.train_passages:])
    return {
        "pos_train": pos_train, "pos_val": pos_val, "pos_test": dict(pos_test),
        "neg_train": neg_train, "neg_val": neg_val, "benign_test": dict(benign_test),
        "ord_train": ord_train, "ord_val": ord_val,
        "ord_test": held_out_ordinary(args.test_passages, rng),
        "contexts": sorted(read_jsonl(INJECTION / "contexts.jsonl"), key=lambda r: bucket("ctx:" + r["id"])),
        "families": dict(per_family),
    }


# ---------------------------------------------------------------------- embedding, scoring
class Encoder:
    """The bundled MiniLM with a content-hash cache on disk (``runs/injection/vectors``), so a
    rerun embeds only new units."""

    def __init__(self, cache_dir: Path) -> None:
        from ragsieve.config import EmbedderConfig
        from ragsieve.embed import load_embedder

        self.embedder = load_embedder(EmbedderConfig(cache_dir=str(cache_dir)))
        self.embedder.warm_up()
        self.cache: dict[str, np.ndarray] = {}

    @property
    def name(self) -> str:
        return str(self.embedder.model_name)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if todo:
            for t, v in zip(todo, self.embedder.embed(todo), strict=True):
                self.cache[t] = np.asarray(v, dtype=np.float32)
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, self.embedder.dim))


def unit_rows(texts: Iterable[str]) -> list[str]:
    return [u for t in texts for u in units_of(t)]


def attack_units(text: str) -> list[str]:
    """The units of an attack text that carry its instruction: the lines of a code block it asks
    to insert (``import requests``) are ordinary code, and labelled as attacks they taught the
    model to flag every code line of a how-to answer."""
    out: list[str] = []
    fenced = False
    for unit in split_units(text):
        if unit.text.startswith("```"):
            fenced = not fenced
            continue
        if not fenced and scoreable(unit.text):
            out.append(unit.text)
    return out


def passage_max(model: InjectionModel, encode: Encoder, passages: Sequence[str]) -> np.ndarray:
    """Each passage's highest unit score (0 for a passage with no scoreable unit)."""
    units = [units_of(p) for p in passages]
    flat = [u for us in units for u in us]
    scores = score_units(model, encode, flat)
    out, at = [], 0
    for us in units:
        out.append(float(scores[at: at + len(us)].max()) if us else 0.0)
        at += len(us)
    return np.asarray(out)


def rate(k: int, n: int) -> dict[str, Any]:
    lo, hi = wilson_interval(k, n)
    return {"k": k, "n": n, "rate": round(k / n, 4) if n else None, "ci95": [round(lo, 4), round(hi, 4)]}


def pct(r: dict[str, Any]) -> str:
    lo, hi = r["ci95"]
    return f"{100 * r['rate']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] ({r['k']}/{r['n']})" if r["n"] else "n/a"


def render(model: InjectionModel, info: dict[str, Any]) -> str:
    attacks = info["test_attacks"]
    rows = [[family, pct(r)] for family, r in attacks["by_family"].items()]
    rows.append(["**all held-out attack texts**", pct(attacks["all"])])
    ctx = info["test_contexts"]
    ctx_rows = [[k + (" (family trained on: not held out)" if k.split()[-1] in TRAIN_GARAK else ""),
                 pct(v["caught"]), pct(v["clean_sentence_flagged"])] for k, v in ctx["by_source"].items()]
    ordinary = info["test_ordinary"]
    ord_rows = [[k, pct(v)] for k, v in ordinary["by_corpus"].items()]
    ord_rows.append(["**the four ordinary corpora together**", pct(ordinary["all_four_corpora"])])
    val = info["validation_figures"]
    return (
        "Command: `python benchmarks/train_injection.py` (seeded; writes `src/ragsieve/resources/injection.npz` and "
        "its header). Model: logistic regression (C = "
        f"{info['params']['C']}, balanced classes) over the bundled MiniLM embedding of each sentence or line plus "
        f"six structure features and TF-IDF word 1-2-grams; {info['counts']['train_units_attack']} attack and "
        f"{info['counts']['train_units_ordinary']} ordinary training units. Trained on: {info['trained_on']}. "
        f"Validation: {info['validation']}; threshold **{model.threshold:.3f}** (validation: attack texts caught "
        f"{pct(val['attack_recall'])}, validation passages flagged {pct(val['ordinary_flagged'])}). Everything "
        "below is held out: whole sources and families the model never saw, rates with 95 % Wilson intervals.\n\n"
        "Held-out attack texts (caught: any of its sentences at or above the threshold):\n\n"
        + markdown_table(["family (held out)", "caught"], rows)
        + "\n\nDocuments with an embedded injection (`contexts.jsonl`, whole documents: emails, tables, code, "
        "whois records, resumes, reports): caught = a flagged sentence inside the injected text; "
        "clean sentence flagged = a sentence outside it flagged as well (what removal would take wrongly; whois "
        "records are lines of registrar fields and addresses, and a sentence that joins the injected text to "
        "the record's own line counts as outside it):\n\n"
        + markdown_table(["source", "caught", "clean sentence flagged"], ctx_rows)
        + "\n\nOrdinary passages flagged (any sentence at or above the threshold; the goal is at most 1 %):\n\n"
        + markdown_table(["corpus (never trained on)", "passages flagged"], ord_rows)
        + "\n"
    )


# ------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(default_model_path()))
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--train-passages", type=int, default=1500, help="ordinary passages per training source")
    ap.add_argument("--val-passages", type=int, default=500, help="ordinary validation passages per source")
    ap.add_argument("--test-passages", type=int, default=1000, help="passages per held-out ordinary corpus")
    ap.add_argument("--contexts", type=int, default=400,
                    help="documents with an embedded injection to score (a seeded sample of contexts.jsonl)")
    ap.add_argument("--val-passage-fp", type=float, default=0.005,
                    help="the share of validation ordinary passages the threshold may flag")
    ap.add_argument("--C", type=float, nargs="+", default=[0.3, 1.0, 3.0, 10.0],
                    help="inverse regularisation strengths tried; the one chosen on the validation part is kept")
    ap.add_argument("--report", default=str(ROOT / "runs/injection/train_report.json"),
                    help="where the figures go as JSON (the embedding cache goes beside it)")
    ap.add_argument("--docs-only", action="store_true",
                    help="write the docs section from the shipped model's header (no training)")
    args = ap.parse_args(argv)
    if args.docs_only:
        shipped = InjectionModel.load(args.out)
        write_section("results/injection.md", "injection-classifier",
                      "The sentence classifier: held-out attacks and ordinary corpora", render(shipped, shipped.info))
        return shipped.info
    t0 = time.time()
    data = split_rows(args)
    encode = Encoder(Path(args.report).parent / "vectors")
    from sklearn.linear_model import LogisticRegression

    pos = [u for t in data["pos_train"] for u in attack_units(t)]
    neg = unit_rows(data["neg_train"]) + unit_rows(data["ord_train"])
    texts = pos + neg
    y = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    dim = encode.embedder.dim
    probe = InjectionModel(encode.name, dim, np.zeros(dim + len(FEATURE_NAMES)), 0.0, 0.5)
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=3, sublinear_tf=True).fit(texts)
    words = TfidfArrays.from_sklearn(vectorizer)
    dense = sparse.csr_matrix(probe.features(encode(texts), texts))
    x = sparse.hstack([dense, vectorizer.transform(texts)]).tocsr()
    # C and the threshold: on the validation part only (the C whose threshold at the allowed share
    # of validation passages flagged catches the most validation attacks; ties to the smaller C)
    best: tuple[float, float, InjectionModel, np.ndarray, np.ndarray] | None = None
    sweep = {}
    for c in args.C:
        clf = LogisticRegression(C=c, class_weight="balanced", max_iter=4000, random_state=SEED).fit(x, y)
        candidate = InjectionModel(encode.name, dim, clf.coef_[0].astype(np.float64), float(clf.intercept_[0]), 0.5,
                                   words=words)
        v_ord = passage_max(candidate, encode, data["ord_val"] + data["neg_val"])
        v_att = passage_max(candidate, encode, data["pos_val"])
        q = np.quantile(v_ord, 1.0 - args.val_passage_fp, method="higher")
        candidate.threshold = round(float(min(max(q + 1e-6, 0.5), 0.999)), 6)
        recall = float((v_att >= candidate.threshold).mean())
        sweep[str(c)] = {"threshold": candidate.threshold, "validation_attack_recall": round(recall, 4)}
        if best is None or recall > best[0]:
            best = (recall, c, candidate, v_ord, v_att)
    assert best is not None
    _, chosen_c, model, val_ordinary, val_attacks = best
    val = {"attack_recall": rate(int((val_attacks >= model.threshold).sum()), len(val_attacks)),
           "ordinary_flagged": rate(int((val_ordinary >= model.threshold).sum()), len(val_ordinary))}
    print(json.dumps({"threshold": model.threshold, "validation": val}), flush=True)
    if not args.no_save:  # saved now (the figures follow, and are saved with it at the end)
        model.info = {"validation_figures": val, "note": "held-out figures still being computed"}
        model.save(args.out)

    # held-out attacks, by family (an attack text is caught when any of its units is flagged)
    test_families = {}
    caught_all = n_all = 0
    for family, rows in sorted(data["pos_test"].items()):
        s = passage_max(model, encode, rows)
        k = int((s >= model.threshold).sum())
        test_families[family] = rate(k, len(rows))
        caught_all += k
        n_all += len(rows)
    # documents with an embedded injection: caught when a flagged unit lies inside the injected text
    ctx_by: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for row in data["contexts"][: args.contexts]:
        units = [u for u in split_units(row["context"]) if scoreable(u.text)]
        if not units:
            continue
        scores = score_units(model, encode, [u.text for u in units])
        at = row["context"].find(row["injected_text"])
        span = (at, at + len(row["injected_text"])) if at >= 0 else (-1, -1)
        inside = [span[0] <= u.start and u.end <= span[1] + 1 for u in units]
        hit = any(s >= model.threshold and i for s, i in zip(scores, inside, strict=True))
        stray = any(s >= model.threshold and not i for s, i in zip(scores, inside, strict=True))
        key = row["id"].split("-")[0] + " " + (row["id"].split("-")[1] if row["id"].startswith("bipia") else
                                               row["attack_subcategory"])
        ctx_by[key][0] += hit
        ctx_by[key][1] += stray
        ctx_by[key][2] += 1
    contexts = {k: {"caught": rate(v[0], v[2]), "clean_sentence_flagged": rate(v[1], v[2])}
                for k, v in sorted(ctx_by.items())}
    ctx_caught = sum(v[0] for v in ctx_by.values())
    ctx_n = sum(v[2] for v in ctx_by.values())
    # ordinary corpora never trained on: share of passages with any unit flagged
    ordinary = {}
    for name, passages in {**data["ord_test"], **data["benign_test"]}.items():
        s = passage_max(model, encode, passages)
        ordinary[name] = rate(int((s >= model.threshold).sum()), len(passages))
    ord_corpora = [v for k, v in ordinary.items() if k in data["ord_test"]]
    ord_k, ord_n = sum(v["k"] for v in ord_corpora), sum(v["n"] for v in ord_corpora)

    info = {
        "trained_on": (
            "BIPIA train attacks (80 % by id), garak " + ", ".join(TRAIN_GARAK) + f" (at most {CAP_PER_FAMILY} "
            "rows each, 80 %); negatives: NotInject queries, BIPIA train emails and Stack Overflow answers "
            f"(80 %), {args.train_passages} SQuADShifts new_wiki and {args.train_passages} NQ gold passages"
        ),
        "validation": "the other 20 % of those rows and "
                      f"{args.val_passages} other passages of each ordinary source; threshold: the lowest that "
                      f"flags at most {args.val_passage_fp:.1%} of the validation ordinary and benign passages",
        "counts": {"train_units_attack": len(pos), "train_units_ordinary": len(neg),
                   "train_attack_rows": len(data["pos_train"]), "families": data["families"]},
        "params": {"C": chosen_c, "words": "TF-IDF word 1-2-grams, min_df 3, sublinear tf",
                   "C_sweep_on_validation": sweep, "class_weight": "balanced", "seed": SEED},
        "validation_figures": val,
        "test_attacks": {"all": rate(caught_all, n_all), "by_family": test_families},
        "test_contexts": {"all": rate(ctx_caught, ctx_n), "by_source": contexts},
        "test_ordinary": {"all_four_corpora": rate(ord_k, ord_n), "by_corpus": ordinary},
        "seconds": round(time.time() - t0, 1),
    }
    model.info = info
    if not args.no_save:
        model.save(args.out)
    if not args.no_save:
        write_section("results/injection.md", "injection-classifier",
                      "The sentence classifier: held-out attacks and ordinary corpora", render(model, info))
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(json.dumps({"threshold": model.threshold, **info}, indent=2))
    print(json.dumps({"threshold": model.threshold, **info}, indent=2))
    return info


if __name__ == "__main__":
    main()
