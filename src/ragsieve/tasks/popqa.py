"""PopQA long-tail with CRAG's knowledge: retrieval pools and automatically labelled evaluator data.

Each row of ``popqa_longtail_crag.jsonl`` carries CRAG's Wikipedia knowledge
(``crag_knowledge_correct``) and web-search knowledge (``crag_knowledge_incorrect``). They are cut
into passages of a few sentences and kept as two partitions, ``wiki`` and ``web``; a passage is
labelled relevant when one of the gold answer strings occurs in it (case-insensitive), which is how
PopQA accuracy is scored too.
"""

from __future__ import annotations

import html
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ragsieve.io import read_jsonl
from ragsieve.types import Chunk

_WS = re.compile(r"\s+")


class PopQAItem(NamedTuple):
    id: str
    question: str
    answers: list[str]
    chunks: list[Chunk]  # the question's own retrieval pool, domains "wiki" and "web"


def clean_knowledge(text: str) -> str:
    text = html.unescape(text or "").replace("\r", " ").replace("[sep]", " ")
    text = re.sub(r"Knowledge\d:\s*", " ", text)
    text = text.replace("#", " ").replace(" ; ", " ")
    return _WS.sub(" ", text).strip()


def passages_from_knowledge(text: str, sentences_per_passage: int = 3, max_passages: int = 8) -> list[str]:
    from ragsieve.ingest import split_sentences

    sents = [s.strip() for s in split_sentences(clean_knowledge(text)) if len(s.strip()) > 2]
    out = [" ".join(sents[i : i + sentences_per_passage]) for i in range(0, len(sents), sentences_per_passage)]
    return out[:max_passages]


def answer_in(text: str, answers: Sequence[str]) -> bool:
    low = text.lower()
    return any(a and a.lower() in low for a in answers)


def load_popqa_items(path: str | Path, sentences_per_passage: int = 3, max_passages: int = 8) -> list[PopQAItem]:
    items: list[PopQAItem] = []
    for row in read_jsonl(path):
        qid = str(row["id"])
        chunks: list[Chunk] = []
        for domain, field in (("wiki", "crag_knowledge_correct"), ("web", "crag_knowledge_incorrect")):
            for j, p in enumerate(passages_from_knowledge(row.get(field, ""), sentences_per_passage, max_passages)):
                chunks.append(
                    Chunk(
                        id=f"{qid}-{domain}-{j}",
                        text=p,
                        doc_id=f"{qid}-{domain}",
                        source=domain,
                        domain=domain,
                        position=j,
                    )
                )
        items.append(PopQAItem(qid, row["question"], list(row["answers"]), chunks))
    return items


def split_items(items: Sequence[PopQAItem], n_eval: int, seed: int = 0) -> tuple[list[PopQAItem], list[PopQAItem]]:
    """Fixed-seed split into (evaluation sample of ``n_eval``, the rest for training)."""
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    ev = set(order[:n_eval])
    return [items[i] for i in sorted(ev)], [items[i] for i in range(len(items)) if i not in ev]


def evaluator_training_data(items: Sequence[PopQAItem], embedder: Any) -> tuple[Any, list[int]]:
    """Feature matrix and 0/1 labels (gold answer in passage) over every (question, passage) pair."""
    import numpy as np

    from ragsieve.tasks.evaluator import passage_features

    feats: list[Any] = []
    labels: list[int] = []
    for it in items:
        if not it.chunks:
            continue
        texts = [c.text for c in it.chunks]
        feats.append(passage_features(it.question, texts, embedder))
        labels.extend(int(answer_in(t, it.answers)) for t in texts)
    return np.concatenate(feats, axis=0), labels
