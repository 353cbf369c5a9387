"""The extractive reader alone against the generators, on the same passages.

For a seeded sample (seed 0) of ``--n`` questions per set, each question with its own passage:

* SQuADShifts ``reddit`` and ``amazon_reviews`` (``../shared/data/training/squadshifts``, evaluation
  only), the gold passage;
* SQuAD 2.0 answerable questions and near misses (unanswerable questions of the same articles;
  ``../shared/data/trust/squad2``), each against its own paragraph, as ``train_reader.py --report``;
* HotpotQA dev distractor 500 (``../shared/data/hotpotqa``), each question against its two
  supporting paragraphs joined (title, then text), gold answer;

the readers compared are the shipped extractive reader (``ragsieve.text.reader.ExtractiveReader``,
int8 ONNX: thresholded as shipped, and its best span always), the rule reader
(``ragsieve.text.passage.passage_answer``), and the bundled SmolLM2-135M-Instruct and Gemma-3-270M
with one fixed prompt (:data:`PROMPT`, greedy, at most :data:`MAX_NEW_TOKENS` new tokens). A
generator's reply counts as "no answer" by the fixed rule :func:`says_no_answer`, written with the
prompt and before any output was seen. Nothing here is tuned on these sets.

Every answer is cached (``runs/reader_vs_generator/answers.jsonl``), so a rerun resumes; the sets are
walked round-robin, question by question, and ``--stop-at`` (UTC ``HH:MM``) ends the answering and
publishes what finished, each set with its true n (questions answered by every reader).

    nice -n 10 python benchmarks/reader_vs_generator.py --n 40 --stop-at 18:12
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import AnswerCache, read_jsonl  # noqa: E402
from _models import model_label, model_settings  # noqa: E402
from _report import ROOT, SHARED_DATA, markdown_table, publish_section  # noqa: E402
from ragsieve.answers import exact_match, normalize_answer, token_f1  # noqa: E402
from train_reader import bootstrap, fmt  # noqa: E402

SEED = 0
RUN_DIR = ROOT / "runs" / "reader_vs_generator"
MAX_NEW_TOKENS = 24
SETS = ["reddit", "amazon_reviews", "squad2_answerable", "squad2_near_miss", "hotpotqa"]
SET_LABELS = {
    "reddit": "SQuADShifts reddit",
    "amazon_reviews": "SQuADShifts amazon_reviews",
    "squad2_answerable": "SQuAD 2.0 answerable",
    "squad2_near_miss": "SQuAD 2.0 near misses (unanswerable)",
    "hotpotqa": "HotpotQA, supporting paragraphs",
}
READERS = ["reader", "reader_forced", "rule", "smollm2", "gemma"]

PROMPT = (
    "Answer the question using only the passage below. Reply with the answer alone, in a few words, "
    "taken from the passage. If the passage does not contain the answer, reply exactly: unanswerable\n\n"
    "Passage:\n{passage}\n\nQuestion: {question}"
)

# Fixed with the prompt, before any reply was seen: the reply holds the word the prompt asks for, or
# one of the usual ways of saying the passage does not give the answer.
NO_ANSWER = re.compile(
    r"\bunanswerable\b|\bnot answerable\b|\bcannot be answered\b|\bcan't be answered\b|\bcannot answer\b"
    r"|\bcan't answer\b|\bno answer\b|\bnot (?:mentioned|stated|given|provided|specified)\b"
    r"|\bdoes not (?:say|mention|contain|state)\b|\bdoesn't (?:say|mention|contain|state)\b",
    re.IGNORECASE,
)


def says_no_answer(reply: str) -> bool:
    """Whether a generator's reply says the passage does not answer the question."""
    return bool(NO_ANSWER.search(reply)) or not reply.strip()


def echoes_prompt(reply: str) -> bool:
    """Whether a reply starts by repeating the prompt's instruction (counted, not rescored)."""
    return normalize_answer(reply).startswith(normalize_answer(PROMPT.split(".")[0]))


def clean_reply(text: str) -> str:
    """The first non-empty line of a reply, without a leading ``Answer:``."""
    for line in text.strip().splitlines():
        line = re.sub(r"^\s*answer\s*:\s*", "", line.strip(), flags=re.IGNORECASE).strip()
        if line:
            return line
    return ""


def load_sets(n: int) -> dict[str, list[dict[str, Any]]]:
    """``n`` seeded questions of each set, each with its passage and gold answers."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name in ("reddit", "amazon_reviews"):
        rows = list(read_jsonl(SHARED_DATA / "training" / "squadshifts" / f"{name}.jsonl"))
        picked = random.Random(SEED).sample(rows, min(n, len(rows)))
        out[name] = [
            {"id": r["id"], "question": r["question"], "answers": r["answers"], "passage": r["contexts"][0]["text"]}
            for r in picked
        ]
    squad = SHARED_DATA / "trust" / "squad2"
    corpus = {r["id"]: r["text"] for r in read_jsonl(squad / "corpus.jsonl")}
    qs = [q for q in read_jsonl(squad / "questions.jsonl") if q.get("gold_passage_id") in corpus]
    for name, answerable in (("squad2_answerable", True), ("squad2_near_miss", False)):
        part = [q for q in qs if bool(q["answerable"]) == answerable]
        picked = random.Random(SEED).sample(part, min(n, len(part)))
        out[name] = [
            {
                "id": q["id"],
                "question": q["question"],
                "answers": q.get("answers") or [],
                "passage": corpus[q["gold_passage_id"]],
            }
            for q in picked
        ]
    hotpot = list(read_jsonl(SHARED_DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"))
    picked = random.Random(SEED).sample(hotpot, min(n, len(hotpot)))
    out["hotpotqa"] = []
    for r in picked:
        support = [c for c in r["contexts"] if c.get("is_supporting")]
        passage = "\n\n".join(f"{c['title']}: {c['paragraph_text']}" for c in support)
        out["hotpotqa"].append({"id": r["id"], "question": r["question"], "answers": r["answers"], "passage": passage})
    return out


def make_generator(model: str, threads: int) -> Callable[[str, str], str]:
    from ragsieve.config import PipelineConfig
    from ragsieve.llm import load_llm

    cfg = PipelineConfig.model_validate({"llm": {"n_threads": threads, **model_settings(model)}})
    llm = load_llm(cfg.llm)
    llm.warm_up()

    def answer(question: str, passage: str) -> str:
        prompt = PROMPT.format(passage=passage, question=question)
        out = llm.generate([{"role": "user", "content": prompt}], max_tokens=MAX_NEW_TOKENS, temperature=0.0)
        return out.text

    return answer


def run(args: argparse.Namespace, sets: dict[str, list[dict[str, Any]]], cache: AnswerCache) -> None:
    from ragsieve.text.passage import passage_answer
    from ragsieve.text.reader import ExtractiveReader

    deadline = None
    if args.stop_at:
        hh, mm = (int(x) for x in args.stop_at.split(":"))
        now = dt.datetime.now(dt.timezone.utc)
        deadline = now.replace(hour=hh, minute=mm, second=0, microsecond=0).timestamp()
    reader = ExtractiveReader(threads=args.threads)
    reader.warm_up()
    generators: dict[str, Callable[[str, str], str]] = {}
    for m in args.models.split(","):
        t0 = time.perf_counter()
        generators[m] = make_generator(m, args.threads)
        print(f"loaded {m} in {time.perf_counter() - t0:.1f}s", flush=True)
    order = [(name, i) for i in range(args.n) for name in SETS if i < len(sets[name])]
    for done, (name, i) in enumerate(order, start=1):
        if deadline is not None and time.time() > deadline:
            print("stop time reached", flush=True)
            break
        item = sets[name][i]
        base = f"{name}|{item['id']}"
        if f"{base}|reader" not in cache.records:
            ans = reader.read(item["question"], [item["passage"]])[0]
            cache.put({"key": f"{base}|reader", "text": ans.text, "span": ans.span, "answered": bool(ans.answered)})
        if f"{base}|rule" not in cache.records:
            value = passage_answer(item["question"], item["passage"]).value
            cache.put({"key": f"{base}|rule", "text": value.text if value is not None else ""})
        for m, gen in generators.items():
            if f"{base}|{m}" not in cache.records:
                t0 = time.perf_counter()
                raw = gen(item["question"], item["passage"])
                cache.put({"key": f"{base}|{m}", "raw": raw, "seconds": time.perf_counter() - t0})
        replies = {m: str(cache.records.get(f"{base}|{m}", {}).get("raw", ""))[:60] for m in generators}
        print(f"{done}/{len(order)} {name} #{i} {replies}", flush=True)


def prediction(cache: AnswerCache, base: str, who: str) -> str:
    """The reader ``who``'s answer to one question, "" for no answer."""
    if who == "reader":
        return str(cache.records[f"{base}|reader"]["text"])
    if who == "reader_forced":
        return str(cache.records[f"{base}|reader"]["span"])
    if who == "rule":
        return str(cache.records[f"{base}|rule"]["text"])
    raw = str(cache.records[f"{base}|{who}"]["raw"])
    return "" if says_no_answer(raw) else clean_reply(raw)


def report(args: argparse.Namespace, sets: dict[str, list[dict[str, Any]]], cache: AnswerCache) -> None:
    rng = np.random.default_rng(SEED)
    labels = {
        "reader": "extractive reader (int8, threshold as shipped)",
        "reader_forced": "extractive reader, best span always",
        "rule": "rule reader (`passage_answer`)",
        "smollm2": model_label("smollm2"),
        "gemma": model_label("gemma"),
    }
    rows: list[list[object]] = []
    seconds: dict[str, list[float]] = {"smollm2": [], "gemma": []}
    echoes: dict[str, int] = {"smollm2": 0, "gemma": 0}
    for name in SETS:
        items = [
            it
            for it in sets[name][: args.n]
            if all(f"{name}|{it['id']}|{k}" in cache.records for k in ("reader", "rule", "smollm2", "gemma"))
        ]
        if not items:
            rows.append([SET_LABELS[name], "(none finished)", 0, "", "", ""])
            continue
        for who in READERS:
            preds = [prediction(cache, f"{name}|{it['id']}", who) for it in items]
            no_ans = [float(not p) for p in preds]
            if name == "squad2_near_miss":
                em_cell = f1_cell = "n/a (no gold answer)"
            else:
                em = [float(exact_match(p, it["answers"])) if p else 0.0 for p, it in zip(preds, items, strict=True)]
                f1 = [token_f1(p, it["answers"]) if p else 0.0 for p, it in zip(preds, items, strict=True)]
                em_cell, f1_cell = fmt(bootstrap(em, rng)), fmt(bootstrap(f1, rng))
            rows.append([SET_LABELS[name], labels[who], len(items), em_cell, f1_cell, fmt(bootstrap(no_ans, rng))])
        for m in seconds:
            seconds[m] += [float(cache.records[f"{name}|{it['id']}|{m}"]["seconds"]) for it in items]
            echoes[m] += sum(echoes_prompt(str(cache.records[f"{name}|{it['id']}|{m}"]["raw"])) for it in items)
    table = markdown_table(
        ["set", "reader", "n", "exact match % [95% CI]", "F1 % [95% CI]", 'says "no answer" % [95% CI]'], rows
    )
    cost = ", ".join(f"{m} median {float(np.median(s)):.1f} s per answer" for m, s in seconds.items() if s)
    echo = "; ".join(f"{m}: {k} of {len(seconds[m])}" for m, k in echoes.items())
    echo_note = "".join(
        f" **{model_label(m)} repeated the prompt's instruction instead of answering in {k} of {len(seconds[m])}"
        " replies, so its rows measure that failure, not reading; the prompt was not changed to fix it (that"
        " would be tuning on these sets).**"
        for m, k in echoes.items()
        if seconds[m] and k >= len(seconds[m]) / 2
    )
    prompt_block = "\n".join("    " + line for line in PROMPT.splitlines())
    body = f"""
Answers made by `python benchmarks/reader_vs_generator.py --n {args.n}` (niced, 1 thread) and cached in
`runs/reader_vs_generator/answers.jsonl`; `--report-only` rewrites this section from that cache.
Each question with its own passage, every reader on the same passage. Data, a seeded sample (seed
{SEED}, at most {args.n} per set; n below is what finished, the questions answered by every reader):
SQuADShifts reddit and amazon_reviews (evaluation only, gold passage;
`../shared/data/training/squadshifts`); SQuAD 2.0 answerable questions and near misses (the
unanswerable questions of the same dev articles, each against its own paragraph;
`../shared/data/trust/squad2`); HotpotQA dev distractor 500 (each question against its two supporting
paragraphs joined, "title: text", gold answer; `../shared/data/hotpotqa`).

Readers: the shipped extractive reader (`ragsieve.text.reader.ExtractiveReader`, int8 ONNX), with its
shipped no-answer threshold and with its best span always; the rule reader
(`ragsieve.text.passage.passage_answer`); {model_label("smollm2")} and {model_label("gemma")}, one
user message, greedy, at most {MAX_NEW_TOKENS} new tokens:

{prompt_block}

A generator's reply counts as "no answer" when it is empty or matches a fixed pattern written with the
prompt before any reply was seen (`unanswerable`, `cannot be answered`, `no answer`, `not mentioned`,
`does not say` and the like; `says_no_answer` in the script); otherwise its first line is the
answer. "No answer" scores 0 on answerable sets; on the near misses only the share that says "no
answer" is meaningful (higher is better there, lower elsewhere). Nothing (prompt, pattern,
threshold) was tuned on these sets. Exact match and F1 are SQuAD-normalised, against any gold
answer; 95% bootstrap intervals (2000 resamples). Generation time ({args.threads} thread(s), a
2-core machine shared with other jobs): {cost}. Replies that begin by repeating the prompt's first
sentence (scored as they are, as an answer): {echo}.{echo_note}

{table}
"""
    publish_section(
        "results/reader.md",
        "reader-vs-generator",
        "The reader alone against the generators, on the same passages",
        body,
        write=not args.no_write,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=60, help="questions per set (at most)")
    parser.add_argument("--models", default="smollm2,gemma")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--stop-at", default="", help="UTC HH:MM after which no new question is started")
    parser.add_argument("--report-only", action="store_true", help="publish from the cache, answer nothing")
    parser.add_argument("--no-write", action="store_true", help="print the section, write no page")
    args = parser.parse_args()
    sets = load_sets(args.n)
    cache = AnswerCache(RUN_DIR / "answers.jsonl")
    if not args.report_only:
        run(args, sets, cache)
    report(args, sets, cache)


if __name__ == "__main__":
    main()
