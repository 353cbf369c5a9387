"""Answer sentences as claims, each with the evidence it cites."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from ragsieve.lexicon import CITATION_MARKER_RE, WORD_RE

_MARKER_RE = CITATION_MARKER_RE
_LEADING_MARKERS_RE = re.compile(r"^((?:\s*\[\d{1,3}\])+)[\s.,;:]*")


class Claim(NamedTuple):
    """One answer sentence; ``markers`` are its ``[n]`` citation numbers (1-based)."""

    text: str
    markers: list[int]


def split_claim_markers(text: str) -> list[Claim]:
    """Answer sentences with their citation markers.

    Small models often put a marker after the full stop (``... ATP. [1] Ribosomes ...``); a
    marker that opens a sentence belongs to the sentence before it. Sentences come from
    :func:`ragsieve.text.sentences.split_sentences`, which keeps abbreviations, decimals and quotes
    inside a sentence and turns a numbered answer (``1. Onnes 2. 1911``) into one sentence
    instead of fragments such as ``2.``.
    """
    from ragsieve.text.sentences import split_sentences

    claims: list[Claim] = []
    for sentence in split_sentences(text):
        lead = _LEADING_MARKERS_RE.match(sentence)
        if lead and claims:
            moved = [int(m) for m in _MARKER_RE.findall(lead.group(1))]
            prev = claims[-1]
            claims[-1] = Claim(prev.text + " " + lead.group(1).strip(), prev.markers + moved)
            sentence = sentence[lead.end() :]
        if not WORD_RE.search(_MARKER_RE.sub("", sentence)):
            if claims and _MARKER_RE.search(sentence):
                prev = claims[-1]
                extra = [int(m) for m in _MARKER_RE.findall(sentence)]
                claims[-1] = Claim(prev.text + " " + sentence.strip(), prev.markers + extra)
            continue
        claims.append(Claim(sentence.strip(), [int(m) for m in _MARKER_RE.findall(sentence)]))
    return claims


def split_claims(text: str) -> list[str]:
    """The sentences of ``text`` that state something (fragments without words are dropped).

    Example:
        >>> split_claims("Mitochondria make ATP [1]. Ribosomes build proteins. [2]")
        ['Mitochondria make ATP [1].', 'Ribosomes build proteins. [2]']
    """
    return [c.text for c in split_claim_markers(text)]


def strip_markers(text: str) -> str:
    """The claim without its ``[n]`` markers (what a judge reads)."""
    return " ".join(_MARKER_RE.sub("", text).split())


def cited_indices(markers: Sequence[int], n_evidence: int) -> list[int]:
    """0-based evidence positions of valid markers, each once, in order."""
    out: list[int] = []
    for m in markers:
        if 1 <= m <= n_evidence and m - 1 not in out:
            out.append(m - 1)
    return out
