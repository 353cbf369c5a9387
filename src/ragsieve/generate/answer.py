"""Answer prompts with numbered evidence, and citation extraction."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragsieve.llm.base import ChatMessage
from ragsieve.types import SearchHit

SYSTEM_PROMPT = (
    "You answer questions using the numbered evidence. Answer in one or two sentences. "
    "After each claim cite the evidence number in square brackets, like [1]. "
    "If the evidence does not contain the answer, say you don't know."
)
CLOSED_BOOK_PROMPT = "Answer the question in one or two sentences."

_CITATION_RE = re.compile(r"\[(\d{1,3})\]")


def _clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 1].rsplit(" ", 1)[0] + "…"


def build_answer_messages(question: str, evidence: Sequence[SearchHit], max_chars: int = 600) -> list[ChatMessage]:
    """Chat messages for direct RAG; evidence is numbered from 1 in rank order."""
    if not evidence:
        return [
            ChatMessage(role="system", content=CLOSED_BOOK_PROMPT),
            ChatMessage(role="user", content=question),
        ]
    lines = [f"[{i}] {_clip(h.chunk.text, max_chars)}" for i, h in enumerate(evidence, 1)]
    user = "Evidence:\n" + "\n".join(lines) + f"\n\nQuestion: {question}"
    return [ChatMessage(role="system", content=SYSTEM_PROMPT), ChatMessage(role="user", content=user)]


def cite_sentence(sentence: str, position: int) -> str:
    """``sentence`` citing evidence ``position`` (1-based) the way the answer prompt asks the
    model to (``[n]`` after the claim, before its closing full stop), so :func:`parse_citations`
    and the verifier read it as they read a generated answer.

    >>> cite_sentence("Apollo 11 landed in July 1969.", 2)
    'Apollo 11 landed in July 1969 [2].'
    >>> cite_sentence("  Onnes, in Leiden ", 1)
    'Onnes, in Leiden [1]'
    """
    text = " ".join(sentence.split())
    marker = f"[{position}]"
    if text[-1:] in (".", "!", "?"):
        return f"{text[:-1].rstrip()} {marker}{text[-1]}"
    return f"{text} {marker}"


def parse_citations(answer: str, evidence: Sequence[SearchHit]) -> list[str]:
    """Chunk ids of the ``[n]`` markers in ``answer`` that name existing evidence."""
    ids: list[str] = []
    for match in _CITATION_RE.finditer(answer):
        n = int(match.group(1))
        if 1 <= n <= len(evidence):
            cid = evidence[n - 1].chunk.id
            if cid not in ids:
                ids.append(cid)
    return ids


def attribute_by_similarity(
    sentence_vecs: np.ndarray, evidence_vecs: np.ndarray, evidence: Sequence[SearchHit], threshold: float = 0.45
) -> list[tuple[str, float]]:
    """For each answer sentence, the evidence closest to it if the cosine reaches ``threshold``.

    Small models often omit ``[n]`` markers; this names the evidence each sentence of the
    answer draws on (post-hoc attribution) instead of assuming every shown snippet was used.
    Returns ``(chunk id, similarity)`` pairs, best first, each id once.
    """
    if len(evidence) == 0 or len(sentence_vecs) == 0:
        return []
    sims = np.atleast_2d(sentence_vecs) @ evidence_vecs.T  # (sentences, evidence)
    best: dict[str, float] = {}
    for row in sims:
        j = int(np.argmax(row))
        if row[j] >= threshold:
            cid = evidence[j].chunk.id
            best[cid] = max(best.get(cid, -1.0), float(row[j]))
    return sorted(best.items(), key=lambda kv: -kv[1])


def cite_evidence(
    text: str, evidence: Sequence[SearchHit], embedder: Any | None, threshold: float = 0.45
) -> tuple[list[str], str, list[tuple[str, float]]]:
    """Cited chunk ids of an answer: its ``[n]`` markers, else per-sentence similarity attribution.

    Returns ``(ids, method, similarities)`` with method ``"markers"``, ``"similarity"`` or
    ``"none"`` (no evidence, or no embedder to attribute with).
    """
    cited = parse_citations(text, evidence)
    if cited or not evidence:
        return cited, "markers" if cited else "none", []
    if embedder is None:
        return [], "none", []
    from ragsieve.ingest import split_sentences

    sentences = split_sentences(text) or [text or " "]
    vecs = embedder.embed(sentences + [h.chunk.text for h in evidence])
    similarities = attribute_by_similarity(vecs[: len(sentences)], vecs[len(sentences) :], evidence, threshold)
    return [cid for cid, _ in similarities], "similarity", similarities
