"""Answer verification: split an answer into claims and check each against its evidence.

* :func:`split_claims` – the sentences of an answer;
* :class:`ClaimJudge` – the protocol a support judge implements (``name``, ``warm_up()``,
  ``support(claim, evidence) -> float`` in [0, 1]); :class:`LLMLogprobJudge` (yes/no by
  next-token log-probabilities) and :class:`LexicalEmbeddingJudge` (no LLM) implement it, and
  a user's NLI or larger model plugs in the same way (see ``ragsieve.verify.judges``);
* :func:`ground_values` – each number, date, quantity, name and identifier of a sentence,
  found in its evidence or not (with what the evidence says instead); :func:`verify_answer`
  combines it with the judge by default (``value_grounding=True``);
* :func:`verify_answer` – one :class:`ragsieve.types.ClaimVerdict` per sentence.

Example::

    from ragsieve.verify import LexicalEmbeddingJudge, verify_answer
    judge = LexicalEmbeddingJudge()
    judge.warm_up()
    for v in verify_answer(answer.text, answer.evidence, judge):
        print(v.supported, round(v.score, 2), v.sentence)
"""

from ragsieve.verify.claims import split_claims
from ragsieve.verify.grounding import GroundingResult, ValueCheck, apply_grounding, ground_values
from ragsieve.verify.judges import (
    JUDGES,
    ClaimJudge,
    LexicalEmbeddingJudge,
    LLMLogprobJudge,
    build_claim_judge,
)
from ragsieve.verify.verifier import verify_answer

__all__ = [
    "JUDGES",
    "ClaimJudge",
    "GroundingResult",
    "LLMLogprobJudge",
    "LexicalEmbeddingJudge",
    "ValueCheck",
    "apply_grounding",
    "build_claim_judge",
    "ground_values",
    "split_claims",
    "verify_answer",
]
