"""Check each sentence of an answer against the evidence it cites."""

from __future__ import annotations

from collections.abc import Sequence

from ragsieve.types import ClaimVerdict, SearchHit
from ragsieve.verify.claims import cited_indices, split_claim_markers, strip_markers
from ragsieve.verify.judges import ClaimJudge


def _ids_and_texts(evidence: Sequence[SearchHit] | Sequence[str]) -> tuple[list[str], list[str]]:
    ids: list[str] = []
    texts: list[str] = []
    for i, e in enumerate(evidence, 1):
        if isinstance(e, SearchHit):
            ids.append(e.chunk.id)
            texts.append(e.chunk.text)
        else:
            ids.append(str(i))
            texts.append(str(e))
    return ids, texts


def verify_answer(
    text: str,
    evidence: Sequence[SearchHit] | Sequence[str],
    judge: ClaimJudge,
    threshold: float = 0.5,
    *,
    value_grounding: bool = True,
    question: str | None = None,
    tie_values: bool = False,
) -> list[ClaimVerdict]:
    """One verdict per answer sentence.

    A sentence with ``[n]`` markers is judged against the evidence those markers name
    (``against="cited"``); a sentence that cites nothing against all of the evidence
    (``against="all"``, ``cited_ids`` empty); with no evidence at all nothing can support it
    (``against="none"``, score 0). ``evidence`` is numbered from 1 as in the answer prompt and
    may be :class:`SearchHit` objects or plain strings (ids are then ``"1"``, ``"2"``, ...).

    With ``value_grounding`` (default) every number, date, quantity, name and identifier the
    sentence states must also be stated by the evidence it is judged against
    (:mod:`ragsieve.verify.grounding`); a sentence with a missing value is unsupported whatever
    the judge's score, and its verdict lists the failed values and the evidence's values.
    ``question``: its values count as given (an answer may name what it was asked about).
    ``tie_values``: a date, number, quantity or name the evidence states only about another fact than
    the question asks fails too (:func:`ragsieve.verify.grounding.ground_values`'s
    ``tie_to_question``); without it such a value is listed in the verdict's ``other_facts``.
    ``value_grounding=False`` is the judge alone.

    Example:
        >>> from ragsieve.verify import LexicalEmbeddingJudge, verify_answer
        >>> judge = LexicalEmbeddingJudge(embedding_weight=0.0)
        >>> [v.supported for v in verify_answer("Dune is by Frank Herbert [1].", ["Frank Herbert wrote Dune."], judge)]
        [True]
    """
    ids, texts = _ids_and_texts(evidence)
    verdicts: list[ClaimVerdict] = []
    for claim in split_claim_markers(text):
        bare = strip_markers(claim.text)
        positions = cited_indices(claim.markers, len(texts))
        if not texts:
            verdicts.append(ClaimVerdict(claim.text, [], False, 0.0, judge.name, "none"))
            continue
        if positions:
            score = judge.support(bare, [texts[p] for p in positions])
            cited, against = [ids[p] for p in positions], "cited"
        else:
            score = judge.support(bare, texts)
            cited, against = [], "all"
        score = float(min(max(score, 0.0), 1.0))
        verdict = ClaimVerdict(claim.text, cited, score >= threshold, round(score, 6), judge.name, against)
        # ---- value grounding: combined with the judge, never instead of it
        if value_grounding:
            from ragsieve.verify.grounding import apply_grounding, ground_values

            judged = [texts[p] for p in positions] if positions else texts
            grounded = ground_values(bare, judged, given=question, tie_to_question=tie_values)
            verdict = apply_grounding(verdict, grounded, threshold)
        verdicts.append(verdict)
    return verdicts
