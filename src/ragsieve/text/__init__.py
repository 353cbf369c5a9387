"""The reading layer: how every check reads text.

* :mod:`ragsieve.text.sentences` – the one sentence splitter;
* :mod:`ragsieve.text.terms` – the one stop list (:data:`ragsieve.lexicon.STOP_WORDS`), stems and key terms;
* :mod:`ragsieve.text.kind` – the kind of answer a question asks for;
* :mod:`ragsieve.text.question` – a question read once (:class:`~ragsieve.text.question.QuestionReading`);
* :mod:`ragsieve.text.passage` – what one passage answers on its own, by rules;
* :mod:`ragsieve.text.reader` – the extractive reader (a small ONNX model);
* :mod:`ragsieve.text.readings` – a request's readings, each passage read at most once.

This package itself holds small text helpers (no model, no I/O).
"""

from __future__ import annotations

from ragsieve.lexicon import CITATION_MARKER_RE, NON_SPACE_RE, WORD_RE

__all__ = ["trim_repetition"]

_SENTENCE_END = ".!?"
_CLAUSE_END = ",;"


def trim_repetition(text: str, ngram: int = 5) -> str:
    """Cut a generated answer where it starts repeating itself.

    Small models decoding greedily fall into loops ("..., which is a single layer of carbon
    atoms bonded in a hexagonal lattice, which is a single layer ..."). The text is cut before
    the first word ``ngram``-gram (case, punctuation and ``[n]`` markers ignored) that already
    occurred, then back to the last sentence or clause end before the cut, so the answer ends
    on a complete statement. Text without a repeated n-gram is returned unchanged.

    >>> trim_repetition("Graphene is carbon in a flat hexagonal lattice, which is carbon in a flat hexagonal lattice.")
    'Graphene is carbon in a flat hexagonal lattice.'
    >>> trim_repetition("Paris is the capital of France [1].")
    'Paris is the capital of France [1].'
    """
    if ngram < 2:
        raise ValueError(f"trim_repetition needs ngram >= 2, got {ngram}")
    words: list[tuple[str, int]] = []
    for m in NON_SPACE_RE.finditer(text):
        norm = "".join(WORD_RE.findall(CITATION_MARKER_RE.sub("", m.group()).lower()))
        if norm:
            words.append((norm, m.start()))
    seen: set[tuple[str, ...]] = set()
    cut: int | None = None
    for j in range(len(words) - ngram + 1):
        gram = tuple(w for w, _ in words[j : j + ngram])
        if gram in seen:
            cut = words[j][1]
            break
        seen.add(gram)
    if cut is None:
        return text
    head = text[:cut].rstrip()
    end = max(head.rfind(ch) for ch in _SENTENCE_END + _CLAUSE_END)
    if end < 0:
        return head
    return head[:end].rstrip() + "." if head[end] in _CLAUSE_END else head[: end + 1]
