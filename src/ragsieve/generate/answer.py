"""Answer prompts with numbered evidence, and citation extraction."""

from __future__ import annotations

import re
from collections.abc import Sequence

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
    answer_vec: np.ndarray, evidence_vecs: np.ndarray, evidence: Sequence[SearchHit], threshold: float = 0.35
) -> list[tuple[str, float]]:
    """Evidence whose embedding is close to the answer's (post-hoc attribution), best first.

    Small models often omit ``[n]`` markers; this names the evidence the answer actually
    draws on rather than assuming it used everything it was shown.
    """
    if len(evidence) == 0:
        return []
    sims = evidence_vecs @ answer_vec
    order = np.argsort(-sims)
    return [(evidence[i].chunk.id, float(sims[i])) for i in order if sims[i] >= threshold]
