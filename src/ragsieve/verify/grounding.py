"""Value grounding: every value an answer sentence states must be stated by the evidence it cites.

A support judge scores how much a sentence *looks like* its evidence, so a copied sentence with a
wrong year scores high. :func:`ground_values` reads the values instead (numbers, dates,
quantities with units, proper names, code identifiers; see :mod:`ragsieve.values`) and, for
each, whether the evidence states it after normalisation and, when it does not, the nearest
value of the same kind the evidence does state. :func:`apply_grounding` combines the result
with a judge's verdict: a sentence with a value the evidence lacks is unsupported whatever its
score (the check adds to the judge, it never replaces it).

With the question (``given``), a value of the kind the question asks for
(:func:`ragsieve.text.kind.expected_kind`; a date, number, quantity or name, :data:`TIED_KINDS`)
is also checked *against the fact the question asks about*: it is marked as stated about another
fact (``ValueCheck.other_fact``, the clause that states it) when another evidence sentence
stating a rival value (one of that kind the question does not state; a quantity of the same
dimension) holds more of the question's predicate terms than every sentence stating the value,
and at least :data:`MIN_FACT_COVER` of them; a name is also judged clause by clause in a sentence
that states it beside a rival (:data:`CLAUSE_KINDS`: "one prize for the motor, claimed by
McLellan, and one for the text, claimed by Newman"). A charge time answered with the time to 80 %
(stated in the evidence, in the sentence about fast charging, while another sentence states the
charge time) is marked, and so is a prize claimed for a person the evidence names for other work.
When no sentence is about what the question asks, or the best ones tie, nothing is marked: the
evidence then does not say the value belongs to another fact. The mark is a signal;
``tie_to_question`` makes it a failure.
A name is tied only when it is the one name of the answer sentence that the question does not
state (the answer): beside others ("designed by Eiffel's firm in Paris") no question term tells
the answer from the names that come with it, so none is tied.
Names match in their variants (:func:`ragsieve.values.find_in`: a shorter form, initials).

:func:`find_contradiction` asks the converse: does the evidence answer the asked fact with
*another* value than the answer states? Each cited passage is read by the conflict stage's reader
(:func:`ragsieve.text.passage.passage_answer`); where it reads nothing, a draft value the evidence
does not state at all is held against the tie's reading of the sentence about the asked fact
(:func:`_rival_answer`). Its precision as a veto is measured on outside sets
(benchmarks/grounding_contradiction.py).

Example:
    >>> from ragsieve.verify.grounding import ground_values
    >>> r = ground_values("Meissner discovered it in 1912.", ["Walther Meissner discovered it in 1933."])
    >>> r.grounded, [(c.value.text, c.nearest.text if c.nearest else None) for c in r.failed]
    (False, [('1912', '1933')])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ragsieve.text.kind import VALUE_KINDS_FOR, expected_kind
from ragsieve.text.passage import ReaderBar
from ragsieve.text.terms import key_terms, stem, stems, words
from ragsieve.types import ClaimVerdict
from ragsieve.values import (
    VALUE_KINDS,
    EvidenceValues,
    Match,
    Value,
    extract_values,
    find_in,
    nearest,
    read_evidence,
    same_measure,
)

if TYPE_CHECKING:
    from ragsieve.text.reader import ExtractiveReader
    from ragsieve.text.readings import Readings

# Share of the question's predicate terms the evidence sentence that states a rival value (another
# value of the asked kind) must hold for the answer's value to count as stated about another fact.
# Chosen on the training split of benchmarks/grounding_fact.py (``--split train``: every value
# from 0.05 to 0.34 gave 11 catches and 1 false flag there, 0.5 one catch fewer); reported on its
# held-out questions.
MIN_FACT_COVER = 0.25
# A name's rival sentence must hold at least this share of the predicate terms, and at least
# :data:`NAME_COVER_RATIO` times the share of every sentence stating the name ("at least twice as
# many"). Stricter than for dates and numbers: a name is what many sentences of a passage are
# about, so the sentence that states the asked fact often says "he" or "it" instead of the name
# (with the numbers' rule, 32 of 285 right names were marked on the training split). Chosen on
# that split by a rule fixed before the held-out run: the most wrong-fact names caught with at
# most 2.5 % of right names and name variants flagged (0.75 and 1/2: 56 of 242 caught, 14 of 617
# flagged, 6 of them not found at all; 0.7 to 0.75 gave the same).
MIN_NAME_FACT_COVER = 0.75
NAME_COVER_RATIO = 0.5
_NUMERIC = ("date", "number", "quantity")
# The kinds judged clause by clause in a sentence that states both the value and a rival
# (:func:`_fact_units`). Chosen on the training split of benchmarks/grounding_fact.py by a rule
# fixed before the held-out run (a kind is added when it catches more wrong-fact values there
# with no more right answers flagged): names caught 8 more (74 of 330 wrong-fact names, 66
# before) with none more flagged; dates, numbers and quantities 2 more caught and 1 more right
# answer flagged (3 more when the answer is the whole evidence sentence).
CLAUSE_KINDS: tuple[str, ...] = ("name",)
# The kinds tied to the question by default (``ground_values``'s ``tie_kinds``).
TIED_KINDS: tuple[str, ...] = ("date", "number", "quantity", "name")
# A time in history is often read as a quantity of time ("the 10th century", "3000 yr BP",
# "11,700 years ago"): a date question ties those too.
_ONE_YEAR = Value("quantity", "1 year", "1 year", (0, 0), number=1.0, unit="year")


@dataclass
class ValueCheck:
    """One value of the sentence: found in the evidence (``match``) or not (``nearest``)."""

    value: Value
    match: Match | None = None
    nearest: Value | None = None
    given: bool = False  # stated by the question, so the evidence need not repeat it
    # the evidence states the value only in a sentence about something else than the question
    # asks ("" when it is about the question, or not checked)
    other_fact: str = ""
    # with ``other_fact``: what the evidence states for the asked fact instead (the rival values of
    # the sentence about it, "1999"), and which evidence text states it (0-based, in the order the
    # texts were given)
    rival: str = ""
    rival_in: int | None = None

    tied: bool = False  # whether a value stated about another fact fails (``tie_to_question``)

    @property
    def found(self) -> bool:
        return (self.match is not None and not (self.tied and self.other_fact)) or self.given

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {**self.value.to_dict(), "found": self.found}
        if self.match is not None and self.other_fact:
            out["evidence"] = self.match.evidence.text
            out["other_fact"] = self.other_fact  # a signal; a failure only when ``tied``
            if self.rival:
                out["evidence_answer"] = self.rival
                out["evidence_index"] = self.rival_in
        elif self.match is not None:
            out["evidence"] = self.match.evidence.text
            out["how"] = self.match.how
            if self.match.detail:
                out["detail"] = self.match.detail
        elif self.given:
            out["how"] = "given by the question"
        else:
            out["evidence_says"] = self.nearest.to_dict() if self.nearest is not None else None
        return out


@dataclass
class GroundingResult:
    """The values of one sentence checked against its evidence."""

    sentence: str
    checks: list[ValueCheck] = field(default_factory=list)
    evidence_values: list[Value] = field(default_factory=list)

    @property
    def failed(self) -> list[ValueCheck]:
        return [c for c in self.checks if not c.found]

    @property
    def grounded(self) -> bool:
        """True when every value is stated by the evidence (also when the sentence has none)."""
        return not self.failed

    @property
    def share_found(self) -> float:
        return 1.0 if not self.checks else sum(c.found for c in self.checks) / len(self.checks)

    def explain(self) -> str:
        """One line for people: which values failed and what the evidence says instead."""
        parts = []
        for c in self.failed:
            if c.other_fact:
                parts.append(
                    f'{c.value.kind} "{c.value.text}" is stated about something else: "{c.other_fact}"'
                )
                continue
            instead = f'; the evidence says "{c.nearest.text}"' if c.nearest is not None else ""
            parts.append(f'{c.value.kind} "{c.value.text}" is not in the evidence{instead}')
        return "; ".join(parts) if parts else "every value is stated by the evidence"

    def to_dict(self) -> dict[str, Any]:
        return {
            "sentence": self.sentence,
            "grounded": self.grounded,
            "values": [c.to_dict() for c in self.checks],
            "evidence_values": [v.to_dict() for v in self.evidence_values],
        }


def ground_values(
    sentence: str,
    evidence: Sequence[str] | str,
    given: str | None = None,
    kinds: Iterable[str] = VALUE_KINDS,
    tie_to_question: bool = False,
    tie_kinds: Iterable[str] = TIED_KINDS,
) -> GroundingResult:
    """Check each value ``sentence`` states against ``evidence`` (one text or several).

    ``given`` is text whose values need no evidence (the question: an answer may repeat the
    entity it was asked about even where a passage says "it"). ``kinds`` limits which kinds of
    value are checked. With ``given``, a value of the asked kind (one of ``tie_kinds``) that the
    evidence states only about another fact is marked (``ValueCheck.other_fact``, a signal, with
    ``rival``: what the evidence states for the asked fact instead, and ``rival_in``: which of the
    texts states it); ``tie_to_question`` makes such a value fail. Off here: the sieve's verify
    stage turns the mark into a caveat naming both values (``stages.verify.tie_values``), not a
    failure, as its measured precision as a veto on outside sets is below 0.9
    (docs/results/verification.md, benchmarks/grounding_contradiction.py).
    """
    wanted = tuple(kinds)
    tie_kinds = tuple(tie_kinds)
    texts = [evidence] if isinstance(evidence, str) else list(evidence)
    read = read_evidence("\n\n".join(texts))
    given_read = read_evidence(given) if given else None
    asked = _asked_kinds(given) if given else ()
    values = extract_values(sentence, wanted)
    # the names the sentence states that the question does not: a name is tied only when it is
    # the one such name (the answer); beside others ("designed by Eiffel's firm in Paris") no
    # question term tells the answer from the rest
    new_names = [v for v in values if v.kind == "name" and (given_read is None or find_in(v, given_read) is None)]
    checks: list[ValueCheck] = []
    for value in values:
        match = find_in(value, read)
        if match is not None and given_read is not None and find_in(value, given_read) is not None:
            checks.append(ValueCheck(value, match, given=True))
        elif match is not None:
            tie = (
                given
                and (value.kind in asked or ("date" in asked and same_measure(value, _ONE_YEAR)))
                and value.kind in tie_kinds
                and (value.kind in _NUMERIC or len(new_names) == 1)
            )
            other, rival, rival_in = _other_fact(value, texts, given) if tie and given else ("", "", None)
            checks.append(
                ValueCheck(value, match, other_fact=other, rival=rival, rival_in=rival_in, tied=tie_to_question)
            )
        elif given_read is not None and find_in(value, given_read) is not None:
            checks.append(ValueCheck(value, given=True))
        else:
            checks.append(ValueCheck(value, nearest=nearest(value, read)))
    return GroundingResult(sentence, checks, [v for v in read.values if v.kind in wanted])


def apply_grounding(verdict: ClaimVerdict, result: GroundingResult, threshold: float) -> ClaimVerdict:
    """``verdict`` with the grounding result folded in.

    The judge's score stands when every value is found (a value stated only about another fact,
    not failing, is listed in ``other_facts``). Otherwise the sentence is unsupported and
    its score is capped at ``threshold`` times the share of values found (below the threshold,
    and lower the more values are missing), so an answer's confidence falls with it.
    """
    evidence_values = [{"kind": v.kind, "text": v.text, "norm": v.norm} for v in result.evidence_values]
    other_facts = [c.to_dict() for c in result.checks if c.found and c.other_fact]
    if result.grounded:
        return replace(
            verdict, values_checked=len(result.checks), evidence_values=evidence_values, other_facts=other_facts
        )
    capped = min(verdict.score, round(threshold * result.share_found * 0.999, 6))
    return replace(
        verdict,
        supported=False,
        score=capped,
        values_checked=len(result.checks),
        value_failures=[c.to_dict() for c in result.failed],
        evidence_values=evidence_values,
        other_facts=other_facts,
    )


# ----------------------------------------------------------------------------- contradiction
# Which answer the reader (:func:`ragsieve.text.passage.passage_answer`) must give for a passage to
# contradict a draft: "read" takes a clear answer (one value of the asked kind in the clause that
# answers) from a sentence holding a predicate term and half of the question's key terms, the bar
# an answer extracted from a pasted passage meets; "firm" also needs every key term (the conflict
# stage's bar, :attr:`ragsieve.text.passage.PassageAnswer.states_answer`). Chosen on the training split of
# benchmarks/grounding_contradiction.py (``--split train``, 347 SQuAD 2.0 and HotpotQA rows) by a
# rule fixed before it ran: the bar with the most wrong drafts caught among those whose precision
# there is at least 0.9, the firmer on a tie. "read": 48 caught, precision 48/65 (numeric 18/19,
# names 30/46); "firm": 27 caught, precision 27/30 (numeric 14/14, names 13/16). Reported on
# outside sets it was not chosen on.
CONTRADICTION_BAR = "firm"
# With the extractive reader on (``[reading] reader = "minilm"``): the bar a cited passage's reader
# answer must meet to contradict a draft (its answer probability and its sentence's key-term
# cover). Chosen on the training split of benchmarks/grounding_fact.py (``--split train --reader
# minilm --choose-reader-bar``, 358 wrong-fact values, 679 right answers and variants) by a rule
# fixed before it ran (in that script's docstring): no bar kept "tie or reader contradiction" at 3%
# of right answers flagged (the tie alone flags 2.2% there), so the one with the fewest false
# flags: 92/358 caught (the tie alone 87/358), 23/679 right flagged (the tie alone 15/679).
CONTRADICTION_READER_BAR = ReaderBar(probability=0.98, cover=0.75)
# With the reader on, a passage the reader does not answer with confidence is read by the rules
# (``True``) or contradicts nothing (``False``). Chosen with the bar, on the same split.
CONTRADICTION_READER_FALLBACK = False
# The families a contradiction is read for: "numeric" (dates, numbers, quantities) and "name".
CONTRADICTION_FAMILIES: tuple[str, ...] = ("numeric", "name")


@dataclass(frozen=True)
class Contradiction:
    """A draft whose value of the asked kind is not the one its cited evidence answers with:
    ``evidence`` (the reader's answer, stated in ``sentence`` of the passage numbered
    ``position``) against ``draft`` (the draft's value or values of that kind)."""

    kind: str  # the value kind ("date", "number", "quantity", "name")
    draft: str
    evidence: str
    position: int
    sentence: str
    evidence_value: Value

    @property
    def family(self) -> str:
        """``"name"`` or ``"numeric"`` (a date, number or quantity)."""
        return "name" if self.kind == "name" else "numeric"

    def explain(self) -> str:
        """What the evidence says, in one clause: "the cited passage [1] says 1999, not 2014"."""
        return f"the cited passage [{self.position}] says {self.evidence}, not {self.draft}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "family": self.family,
            "draft": self.draft,
            "evidence": self.evidence,
            "position": self.position,
            "sentence": self.sentence,
        }


def find_contradiction(
    question: str,
    answer: str,
    evidence: Sequence[str],
    positions: Sequence[int] | None = None,
    bar: str = CONTRADICTION_BAR,
    readings: Readings | None = None,
    reader: ExtractiveReader | None = None,
    reader_bar: ReaderBar = CONTRADICTION_READER_BAR,
    rules_fallback: bool = CONTRADICTION_READER_FALLBACK,
) -> Contradiction | None:
    """Where the evidence answers ``question`` with another value than ``answer`` states.

    The asked kind (:func:`ragsieve.text.kind.expected_kind`: a date, number, quantity or name)
    is read from ``question``; each passage's own answer by
    :func:`ragsieve.text.passage.passage_answer` (a clear answer at ``bar``, :data:`CONTRADICTION_BAR`).
    The answer contradicts its evidence when it states a value of that kind the question does not
    state, of the same measure as a passage's answer, and states none of the passages' answers
    (:func:`ragsieve.text.passage.same_answer`: "Bartlett" is "Neil Bartlett", "June 1999" is 1999).
    An answer with no value of the kind, or evidence that answers nothing, contradicts nothing.
    ``positions`` are the passages' citation numbers (1, 2, ... by default); ``readings`` the
    request's readings (:class:`ragsieve.text.readings.Readings`; a fresh set when none is given).
    With the extractive ``reader`` a passage's answer is the reader's
    (:meth:`ragsieve.text.readings.PassageReading.reader_answer`) when it meets ``reader_bar``
    (:data:`CONTRADICTION_READER_BAR`): the draft is contradicted when a cited passage's confident
    reader answer is another value of the asked kind and no passage's is the draft's; a passage the
    reader is not sure of is read by the rules when ``rules_fallback``, else answers nothing.

    Example:
        >>> c = find_contradiction("When was the Kessel Bridge opened?", "It opened in 1947 [1].",
        ...                        ["The Kessel Bridge opened in 1931 after four years of work."])
        >>> c.explain()
        'the cited passage [1] says 1931, not 1947'
        >>> find_contradiction("When was the Kessel Bridge opened?", "In 1931 [1].",
        ...                    ["The Kessel Bridge opened in 1931 after four years of work."]) is None
        True
    """
    from ragsieve.lexicon import CITATION_MARKER_RE
    from ragsieve.text.passage import same_answer
    from ragsieve.text.readings import Readings

    readings = readings if readings is not None else Readings()
    kinds = tuple(k for k in _asked_kinds(question) if k in TIED_KINDS)
    if not kinds:
        return None
    stated = read_evidence(question)
    drafted = [
        v for v in extract_values(CITATION_MARKER_RE.sub(" ", answer), kinds) if find_in(v, stated) is None
    ]
    if not drafted:
        return None
    numbers = list(positions) if positions is not None else list(range(1, len(evidence) + 1))
    read: list[tuple[Value, int, str]] = []
    by_reader = readings.passages(question, evidence, reader) if reader is not None else None
    asked = readings.question(question)
    for index, (text, position) in enumerate(zip(evidence, numbers, strict=True)):
        found = readings.passage(question, text).answer
        if by_reader is not None:
            spanned = by_reader[index].reader_answer(asked, reader_bar, position)
            if spanned is not None and spanned.states_answer:
                found = spanned
            elif not rules_fallback:
                continue
        if found.value is None or not found.clear or (bar == "firm" and not found.states_answer):
            continue
        if any(same_answer(found.value, v) for v in drafted):
            return None  # the answer states what a passage answers
        read.append((found.value, position, found.sentence))
    if not read and reader is None:
        # the reader answered nothing (a question naming no entity needs every key term in the
        # passage): the tie's reading of what the evidence states about the asked fact, for a
        # draft value the evidence does not state at all
        absent = [v for v in drafted if find_in(v, read_evidence("\n\n".join(evidence))) is None]
        for text, position in zip(evidence, numbers, strict=True):
            for v in absent:
                rival = _rival_answer(v, text, question)
                if rival is not None:
                    read.append((rival[0], position, rival[1]))
                    break
        if any(same_answer(value, v) for value, _, _ in read for v in drafted):
            return None
    for value, position, sentence in read:
        rivals = list(dict.fromkeys(v.text for v in drafted if same_measure(value, v)))
        if rivals:
            return Contradiction(value.kind, and_list(rivals), value.text, position, " ".join(sentence.split()), value)
    return None


def predicate_terms(question: str, value: Value | None = None) -> set[str]:
    """The question's predicate: its key terms (stemmed) less the words of the values it states
    (the names it asks about, which an evidence sentence may leave to a pronoun: "It was
    discovered in 1933"; its own dates and numbers), less ``value``'s words and less the word
    after "how" ("how long", "how many": it says which kind of answer is asked, which the
    sentence stating it need not repeat)."""
    said = {t for v in extract_values(question) for t in stems(v.text)}
    if value is not None:
        said |= set(stems(value.text))
    folded = words(question)
    cue = {stem(after) for word, after in zip(folded, folded[1:], strict=False) if word == "how"}
    return key_terms(question) - said - cue


def _asked_kinds(question: str) -> tuple[str, ...]:
    """The kinds of value that answer ``question`` (:data:`ragsieve.text.kind.VALUE_KINDS_FOR`)."""
    return VALUE_KINDS_FOR.get(expected_kind(question), ())


def _other_fact(value: Value, texts: Sequence[str], question: str) -> tuple[str, str, int | None]:
    """The clause stating ``value`` when the evidence states it only about another fact than
    ``question`` asks, else "": another sentence (or, in a sentence stating both, another clause:
    :func:`_fact_units`) stating a rival value (:func:`_rival`) holds at
    least :data:`MIN_FACT_COVER` of the question's predicate terms (:func:`predicate_terms`) and
    more of them than every sentence stating ``value``; for a name at least
    :data:`MIN_NAME_FACT_COVER` of them and at least 1 / :data:`NAME_COVER_RATIO` times as many.
    With the clause: the rival values of the sentences (or clauses) that hold the most of those
    terms ("1999"; several joined with "and"), what the evidence states for the asked fact instead,
    and the index in ``texts`` of the first that states them ("" and ``None`` with no clause)."""
    from ragsieve.text.sentences import split_clauses, split_sentences

    terms = predicate_terms(question, value)
    if not terms:
        return "", "", None  # nothing to tell one fact from another
    asked = read_evidence(question)
    stating: list[tuple[float, str]] = []
    best_other = 0.0
    best_rivals: list[tuple[Value, int]] = []
    for index, text in enumerate(texts):
        for sent in split_sentences(text):
            for unit in _fact_units(value, sent, asked):
                cover = len(terms & set(stems(unit))) / len(terms)
                if find_in(value, unit) is not None:
                    stating.append((cover, unit))
                    continue
                rivals = [v for v in extract_values(unit, (value.kind,)) if _rival(value, v, asked)]
                if not rivals:
                    continue
                if cover > best_other or not best_rivals:
                    best_other, best_rivals = max(best_other, cover), []
                if cover >= best_other:
                    best_rivals += [(v, index) for v in rivals]
    if not stating:
        return "", "", None  # stated across sentences (a name split by a line break): not judged here
    cover, sent = max(stating)
    if value.kind == "name":
        if best_other < MIN_NAME_FACT_COVER or cover > NAME_COVER_RATIO * best_other:
            return "", "", None
    elif best_other < MIN_FACT_COVER or cover >= best_other:
        return "", "", None
    clause = next((c.strip() for c in split_clauses(sent) if find_in(value, c) is not None), sent)
    return clause, and_list(v.text for v, _ in best_rivals), best_rivals[0][1]


def and_list(items: Iterable[str]) -> str:
    """Distinct ``items`` in order, as prose: "1999", "1999 and 2006", "A, B and C"."""
    unique = list(dict.fromkeys(items))
    return unique[0] if len(unique) == 1 else ", ".join(unique[:-1]) + " and " + unique[-1]


def _rival_answer(value: Value, text: str, question: str) -> tuple[Value, str] | None:
    """What ``text`` states about the fact ``question`` asks, for a ``value`` it does not state:
    the one rival value (:func:`_rival`) of the sentence that holds the most of the question's
    predicate terms (:func:`predicate_terms`) among those stating a rival, with the sentence, when
    it holds at least :data:`MIN_FACT_COVER` of them (a name: :data:`MIN_NAME_FACT_COVER`), the
    tie's bars for a sentence about the asked fact. ``None`` when no sentence reaches the bar, or
    the best ones state different rivals (a list of years, or two sentences as good)."""
    from ragsieve.text.passage import same_answer
    from ragsieve.text.sentences import split_sentences

    terms = predicate_terms(question, value)
    if not terms:
        return None
    asked = read_evidence(question)
    best: list[tuple[Value, str]] = []
    best_cover = 0.0
    for sent in split_sentences(text):
        rivals = [v for v in extract_values(sent, (value.kind,)) if _rival(value, v, asked)]
        if not rivals:
            continue
        cover = len(terms & set(stems(sent))) / len(terms)
        if cover > best_cover:
            best, best_cover = [(v, sent) for v in rivals], cover
        elif cover == best_cover:
            best += [(v, sent) for v in rivals]
    bar = MIN_NAME_FACT_COVER if value.kind == "name" else MIN_FACT_COVER
    if not best or best_cover < bar:
        return None
    first = best[0][0]
    if any(not same_answer(first, v) for v, _ in best[1:]):
        return None  # several values where the asked fact is stated: no one answer
    return best[0]


def _fact_units(value: Value, sentence: str, question: EvidenceValues) -> list[str]:
    """The parts of ``sentence`` that state one fact each: for a value of :data:`CLAUSE_KINDS`,
    its clauses when it states both ``value`` and a rival (:func:`_rival`) in different clauses
    ("one prize for the motor, claimed by McLellan, and one for the text, claimed by Newman"),
    else the sentence whole."""
    from ragsieve.text.sentences import split_clauses

    if value.kind not in CLAUSE_KINDS or find_in(value, sentence) is None:
        return [sentence]
    clauses = split_clauses(sentence)
    if len(clauses) < 2:
        return [sentence]
    holds_value = [find_in(value, c) is not None for c in clauses]
    holds_rival = [
        not has_value and any(_rival(value, v, question) for v in extract_values(c, (value.kind,)))
        for c, has_value in zip(clauses, holds_value, strict=True)
    ]
    return clauses if any(holds_value) and any(holds_rival) else [sentence]


def _rival(value: Value, other: Value, question: EvidenceValues) -> bool:
    """Whether ``other`` (stated in another sentence) could answer what ``value`` answers: a value
    of its kind that the question does not state (a sentence naming only what the question asks
    about states no rival answer), and for a quantity one of the same dimension (a length is no
    rival to a duration)."""
    return find_in(other, question) is None and same_measure(value, other)
