"""Every graded signal a stage may leave in the request's state, declared once.

A stage records a signal with ``state.signal(name, value)``
(:meth:`ragsieve.sieve.state.PipelineState.signal`); the value is clipped to [0, 1]. The
decision model (:class:`ragsieve.decision.DecisionModel`) reads them as features:
:data:`ragsieve.decision.SIGNALS`, a decision model's features, is this set, in this order (a
model trained before a signal was declared names the ones it does not weigh). Each
:class:`Signal` names the stage that emits it, its kind and what it means. A stage lists the
names it emits in its ``emits`` attribute; building a stage list checks them against this set
(:func:`ragsieve.sieve.state.check_wiring`), ``state.signal`` refuses an undeclared name, and
the runner refuses a signal its stage does not list.

A new signal is one line here and its name in the emitting stage's ``emits``; the decision
model weighs it once it is retrained with it (``benchmarks/train_decision.py``).

Kinds (every value is on [0, 1]):

* ``flag``: 0 or 1.
* ``share``: a fraction of a count (candidates, sentences, passages).
* ``score``: a model's or a measure's score.
* ``count``: a small count scaled to [0, 1] (the meaning says how).

Example:
    >>> DECLARED["judge.best"].stage, DECLARED["judge.best"].kind
    ('judge', 'score')
    >>> "judge.best" in emitted_by("judge")
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, get_args

from ragsieve.options import UnresponsiveReason

SignalKind = Literal["flag", "share", "score", "count"]


@dataclass(frozen=True)
class Signal:
    """One declared signal: its ``name`` (``<check>.<what>``), the ``stage`` that emits it (its
    name in ``SIEVE_STAGES``), its ``kind`` and a one-line ``meaning``."""

    name: str
    stage: str
    kind: SignalKind
    meaning: str


# which way a reply fails to answer (ragsieve.options.UnresponsiveReason), one flag each
_UNRESPONSIVE_MEANING: dict[str, str] = {
    "empty": "the reply says nothing",
    "pasted_passage": "the reply pastes an evidence passage instead of answering",
    "restated_question": "the reply restates the question",
    "wrong_kind": "the reply states no value of the kind the question asks for (a date for a when, a name for a who)",
    "ungrounded": "the reply states values of the asked kind, none of them in the evidence it cites",
}

SIGNAL_SET: tuple[Signal, ...] = (
    # retrieve (plain RAG's own)
    Signal("retrieval.top_score", "retrieve", "score", "the top candidate's retrieval score, mapped onto [0, 1]"),
    # need
    Signal("need.closed_book_task", "need", "flag", "the task router would answer this question without retrieval"),
    Signal("need.best_relevance", "need", "score", "the judge's best score among the need stage's probe"),
    # judge
    Signal("judge.best", "judge", "score", "the judge's best relevance score among the candidates"),
    Signal("judge.kept_share", "judge", "share", "share of the candidates the judge kept"),
    Signal("judge.relevant_share", "judge", "share", "share of the candidates the judge labelled relevant"),
    Signal("judge.all_irrelevant", "judge", "flag", "the judge kept no candidate"),
    # poison
    Signal("poison.dropped_share", "poison", "share", "share of the candidates the poison check dropped"),
    Signal("poison.duplicate_share", "poison", "share", "share of the candidates in a near-duplicate cluster"),
    Signal("poison.all_dropped", "poison", "flag", "the poison check dropped every candidate"),
    Signal("poison.coordination", "poison", "score",
           "the strongest coordination signal among the kept candidates (stages.poison.coordination)"),
    Signal("poison.coordinated_share", "poison", "share",
           "share of the kept candidates in a coordinated voice (stages.poison.coordination)"),
    # injection
    Signal("injection.max_score", "injection", "score",
           "the injection classifier's highest sentence score among the candidates"),
    Signal("injection.flagged_share", "injection", "share",
           "share of the candidates with a sentence that instructs the reader (stages.injection)"),
    # filter
    Signal("filter.dropped_share", "filter", "share", "share of the candidates the knowledge filter dropped"),
    # verify: responsiveness
    Signal("verify.responsive", "verify", "flag", "the reply answers the question"),
    *(
        Signal(f"verify.{reason}", "verify", "flag", _UNRESPONSIVE_MEANING[reason])
        for reason in get_args(UnresponsiveReason)
    ),
    Signal("verify.responsive_retries", "verify", "count",
           "regenerations for responsiveness so far, over stages.verify.responsive_retries"),
    Signal("verify.extracted", "verify", "flag", "a pasted passage was replaced by the sentence that answers"),
    Signal("verify.declined", "verify", "flag", "the reply says the evidence does not answer the question"),
    # verify: support and value grounding
    Signal("verify.support_mean", "verify", "score", "the claim judge's mean support over the answer's sentences"),
    Signal("verify.support_min", "verify", "score", "the claim judge's lowest support among the answer's sentences"),
    Signal("verify.supported_share", "verify", "share", "share of the answer's sentences that are supported"),
    Signal("verify.values_grounded", "verify", "share",
           "share of the sentences stating values whose every value the evidence states"),
    Signal("verify.value_failure", "verify", "flag", "some sentence states a value its evidence does not"),
    Signal("verify.value_other_fact", "verify", "share",
           "share of the sentences with a value the evidence states only about another fact (the value tie)"),
    Signal("verify.contradiction", "verify", "flag", "the answer contradicts the evidence it cites"),
    Signal("verify.regenerated", "verify", "flag", "the answer was regenerated from its supported evidence"),
    Signal("verify.withdraw", "verify", "flag", "a check asked to withdraw the draft"),
    # verify: the extractive reader's reading of the evidence ([reading] reader = "minilm"; absent
    # under "rules"), beside the rules the checks decide on (ragsieve.text.readings.reader_signals)
    Signal("reader.answer_score", "verify", "score",
           "the extractive reader's highest answer probability among the evidence passages"),
    Signal("reader.no_answer_top", "verify", "score",
           "the extractive reader's no-answer probability for the best-ranked evidence passage"),
    Signal("reader.draft_matches_reader", "verify", "flag",
           "the draft states the reader's answer from the cited passage the reader is most sure of"),
    # decide: the signals no earlier stage leaves (computed from the draft and the earlier records)
    Signal("answer.token_prob", "decide", "score", "the answer's mean token probability under the evidence"),
    Signal("conflict.found", "decide", "flag", "the conflict stage found passages that disagree on the asked value"),
    Signal("conflict.groups", "decide", "count", "answer groups beyond the first, capped at 3, over 3"),
    Signal("poison.answer_coordinated_share", "decide", "share",
           "share of the answer's supporting passages that are members of a coordinated voice"),
    Signal("poison.answer_cluster_only", "decide", "flag",
           "every passage supporting the answer is a member of a coordinated voice"),
)

DECLARED: Mapping[str, Signal] = MappingProxyType({s.name: s for s in SIGNAL_SET})


def emitted_by(stage: str) -> tuple[str, ...]:
    """The declared signals ``stage`` emits, in declaration order."""
    return tuple(s.name for s in SIGNAL_SET if s.stage == stage)


def undeclared(names: Iterable[str]) -> list[str]:
    """The names among ``names`` that are not declared, sorted."""
    return sorted(set(names) - DECLARED.keys())


def how_to_declare(names: Iterable[str]) -> str:
    """The fix an error about undeclared signals names."""
    return (
        f"declare {', '.join(names)} in ragsieve.signals.SIGNAL_SET (name, stage, kind, meaning) "
        "and list it in the emitting stage's `emits`"
    )


__all__ = ["DECLARED", "SIGNAL_SET", "Signal", "SignalKind", "emitted_by", "how_to_declare", "undeclared"]
