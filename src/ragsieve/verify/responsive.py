"""Does an answer answer the question? Kind of answer asked for, restated questions, pasted passages.

Support checks ask whether an answer's sentences agree with the evidence they cite; they pass
a reply that restates the question, one that pastes a cited passage, or one that gives a name
where a year was asked. :class:`ResponsivenessChecker` asks the other question:

1. the **kind** of answer the question asks for (:func:`expected_kind`, the text layer's learned
   classifier, :mod:`ragsieve.text.kind`): ``date``, ``number``, ``quantity``, ``name``,
   ``yes/no`` or ``description``;
2. a **pasted passage**: the answer opens with a marker or an ``Evidence:`` label and copies
   the evidence, or one contiguous run copied from an evidence text covers most of a long answer;
3. a **restated question**: the answer adds no content word to the question's;
4. the **kind**: the answer holds a value of the kind asked for that the question does not
   already name (``wrong_kind`` otherwise), and at least one such value is found in the
   evidence the answer cites, after normalisation (``ungrounded`` otherwise).

Values come from :func:`extract_values` (:mod:`ragsieve.values`, the one value extractor: dates,
numbers with number words and units, names), behind one function so a richer one can replace it
(``ResponsivenessChecker(extract=...)``).

The policy for a generation stage is :func:`answer_responsively`: generate, clean
(:func:`ragsieve.generate.cleanup.clean_answer`), check; regenerate once with an instruction
that names what was wrong (:func:`retry_instruction`); when the last reply still pastes a
passage, answer with the evidence sentence that states the value asked for
(:func:`extract_from_paste`: a date, number or name), cited, if it passes the check; else
abstain with :func:`abstention_message`, which says what the evidence covers without quoting it.

Example:
    >>> from ragsieve.verify.responsive import ResponsivenessChecker
    >>> checker = ResponsivenessChecker()
    >>> ev = ["Heike Kamerlingh Onnes discovered superconductivity in Leiden in 1911."]
    >>> checker.check("When was superconductivity discovered?", "It was discovered in 1911 [1].", ev).ok
    True
    >>> checker.check("When was superconductivity discovered?", "Heike Kamerlingh Onnes [1].", ev).reason
    'wrong_kind'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any, NamedTuple

from ragsieve.generate.cleanup import LABEL_OPEN_RE
from ragsieve.generate.polar import starts_with_polarity
from ragsieve.lexicon import CITATION_MARKER_RE
from ragsieve.text.kind import ANSWER_KINDS, AnswerKind, expected_kind
from ragsieve.text.readings import Readings
from ragsieve.text.terms import STOP_WORDS, stem
from ragsieve.text.terms import words as folded_words
from ragsieve.types import SearchHit
from ragsieve.values import fold

__all__ = [
    "EXTRACTABLE_KINDS",
    "KINDS",
    "AnswerKind",
    "PasteExtraction",
    "ResponsiveOutcome",
    "Responsiveness",
    "ResponsivenessChecker",
    "abstention_message",
    "add_instruction",
    "answer_responsively",
    "check_responsive",
    "checked_extraction",
    "copied_share",
    "expected_kind",
    "extract_from_paste",
    "extract_values",
    "longest_copied_run",
    "retry_instruction",
    "typed_values",
]

KINDS: tuple[str, ...] = ANSWER_KINDS
# What a kind looks like in plain words (abstention messages, retry instructions).
KIND_WORDS = {"date": "a date or year", "number": "a number", "quantity": "a number or amount",
              "name": "a name", "yes/no": "a yes or no", "description": "an answer"}

_INTERROGATIVES = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how"})
# the shared stop words, and the words of answer boilerplate ("the evidence says ...")
_STOPWORDS = STOP_WORDS | {"answer", "question", "evidence"}
_MARKER_RE = CITATION_MARKER_RE
_LABEL_OPEN_RE = LABEL_OPEN_RE
_TOKEN_RE = re.compile(r"[^\W_]+(?:[.,'’][^\W_]+)*", re.UNICODE)
_LOCATIVE_RE = re.compile(r"\b(?:in|at|on|near|inside|within|beside|across|throughout)\s+(?:the\s+|a\s+|an\s+)?"
                          r"[^\W\d_]{3,}", re.IGNORECASE)
_ABSTAIN_RE = re.compile(
    r"\b(?:(?:i|we)\s+(?:do\s+not|don't|cannot|can't|can\s*not)\s+(?:know|tell|say|answer|find|determine)|"
    r"(?:does|do)\s+not\s+(?:contain|mention|say|state|provide|include)|doesn't\s+(?:contain|mention|say|state|"
    r"provide|include)|no\s+(?:information|mention|answer)|not\s+(?:enough|sufficient)\s+information|"
    r"(?:is|are)\s+not\s+(?:mentioned|stated|given|provided)|unable\s+to\s+(?:answer|determine|find)|"
    r"(?:i'm|i\s+am)\s+sorry)\b",
    re.IGNORECASE)


# ---------------------------------------------------------------- typed values
def _names(text: str) -> list[str]:
    """The proper names :mod:`ragsieve.values` reads in ``text``."""
    from ragsieve.values import extract_values as read_values

    return [v.text for v in read_values(text, ("name",))]


# ---------------------------------------------------------------- grounding
def _tokens(text: str) -> list[str]:
    return [fold(t) for t in _TOKEN_RE.findall(_MARKER_RE.sub(" ", text))]


def _content(tokens: Sequence[str]) -> list[str]:
    return [t for t in tokens if t not in _STOPWORDS and len(t) > 1]


_stem = stem


def typed_values(text: str) -> dict[str, list[str]]:
    """:func:`extract_values`'s shape read by :mod:`ragsieve.values` (number words, units,
    date formats, identifiers): quantities count as numbers, identifiers as names.

    >>> typed_values("Walther Meissner found it in 1933 at 4.2 kelvin [1].")
    {'date': ['1933'], 'number': ['4.2 kelvin'], 'name': ['Walther Meissner']}
    """
    from ragsieve.values import extract_values as read_values

    out: dict[str, list[str]] = {"date": [], "number": [], "name": []}
    for v in read_values(_MARKER_RE.sub(" ", text)):
        out[{"date": "date", "number": "number", "quantity": "number"}.get(v.kind, "name")].append(v.text)
    return out


def _typed_in(value: str, text: str) -> bool | None:
    """Whether every typed value :mod:`ragsieve.values` reads in ``value`` is stated by ``text``
    (numbers compared as numbers, not as digits found anywhere); ``None`` when it reads none."""
    from ragsieve.values import extract_values as read_values
    from ragsieve.values import find_in

    read = read_values(value)
    if not read:
        return None
    return all(find_in(v, text) is not None for v in read)


# The one value extractor's reading, in the ``{"date", "number", "name"}`` shape the checker reads.
extract_values = typed_values


def _grounded(kind: str, value: str, evidence: str) -> bool:
    typed = _typed_in(value, evidence)
    if typed is not None:
        return typed
    tokens = set(_tokens(evidence))
    parts = [p for p in _tokens(value) if len(p) > 1 and p not in _STOPWORDS]
    return bool(parts) and all(p in tokens for p in parts)


def longest_copied_run(answer_tokens: Sequence[str], source_tokens: Sequence[str]) -> int:
    """Length of the longest contiguous token run of ``answer_tokens`` found in ``source_tokens``."""
    if not answer_tokens or not source_tokens:
        return 0
    best = 0
    prev = [0] * (len(source_tokens) + 1)
    for a in answer_tokens:
        cur = [0] * (len(source_tokens) + 1)
        for j, b in enumerate(source_tokens, 1):
            if a == b:
                cur[j] = prev[j - 1] + 1
                if cur[j] > best:
                    best = cur[j]
        prev = cur
    return best


def copied_share(answer_tokens: Sequence[str], sources: Sequence[Sequence[str]], min_run: int = 8) -> float:
    """Share of ``answer_tokens`` inside runs of at least ``min_run`` tokens copied from one of
    ``sources`` (several passages pasted one after another are covered together)."""
    from difflib import SequenceMatcher

    if not answer_tokens:
        return 0.0
    covered = [False] * len(answer_tokens)
    for source in sources:
        matcher = SequenceMatcher(None, list(answer_tokens), list(source), autojunk=False)
        for block in matcher.get_matching_blocks():
            if block.size >= min_run:
                for i in range(block.a, block.a + block.size):
                    covered[i] = True
    return sum(covered) / len(answer_tokens)


# ---------------------------------------------------------------- verdict
@dataclass
class Responsiveness:
    """Whether an answer answers its question.

    ``reason``: ``ok``, ``empty``, ``abstention`` (the answer says it cannot answer),
    ``pasted_passage``, ``restated_question``, ``wrong_kind`` (no value of the kind asked for),
    ``ungrounded`` (values of that kind, none in the cited evidence). ``found`` lists the values
    of the expected kind the answer holds, ``grounded`` those the evidence contains, ``copied``
    the longest run of answer tokens copied from one evidence text.
    """

    ok: bool
    reason: str
    expected: str
    found: list[str] = field(default_factory=list)
    grounded: list[str] = field(default_factory=list)
    copied: int = 0
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _alternatives(question: str) -> list[str]:
    """The two alternatives of a choice question ("..., A or B?"): the text after " or ", and
    before it the part after the last comma, else its trailing run of capitalised words."""
    body = re.sub(r"[?\s]+$", "", question)
    if " or " not in body:
        return []
    left, right = body.rsplit(" or ", 1)
    if "," in left:
        left = left.rsplit(",", 1)[1]
    else:
        words = left.split()
        run: list[str] = []
        for w in reversed(words):
            if w[:1].isupper() or (run and w.lower() in ("de", "van", "von", "da", "y", "ul", "al", "bin", "of")):
                run.insert(0, w)
            else:
                break
        left = " ".join(run)
    return [a for a in (left.strip(" ,\"'"), right.strip(" ,\"'")) if a]


def _named_alternatives(question: str, answer_content: set[str]) -> int:
    """How many alternatives of a choice question the answer names."""
    return len([alt for alt in _alternatives(question)
                if (words := {_stem(t) for t in _content(_tokens(alt))}) and words <= answer_content])


def _chosen_alternative(question: str, answer_content: set[str]) -> bool:
    """True when the answer names exactly one alternative of a choice question."""
    return _named_alternatives(question, answer_content) == 1


def _evidence_texts(evidence: Sequence[SearchHit] | Sequence[str]) -> list[str]:
    return [e.chunk.text if isinstance(e, SearchHit) else str(e) for e in evidence]


def _cited_texts(answer: str, texts: Sequence[str]) -> list[str]:
    cited = [texts[n - 1] for n in dict.fromkeys(int(m) for m in _MARKER_RE.findall(answer))
             if 1 <= n <= len(texts)]
    return cited or list(texts)


Extractor = Callable[[str], dict[str, list[str]]]


class ResponsivenessChecker:
    """Judges whether an answer answers its question (see the module docstring).

    ``paste_min_tokens`` and ``paste_share``: an answer with a run of at least that many tokens
    copied from one evidence text, covering that share of its tokens, is a pasted passage when
    it holds more than one sentence or the run is twice that long (one copied sentence of
    ordinary length is an extractive answer); an answer that opens with a marker or an
    ``Evidence:`` label needs only ``label_paste_tokens`` copied tokens and half its tokens
    copied (runs of ``label_paste_tokens`` or more count towards the covered share).
    ``restate_share`` and ``restate_cover``: an answer restates the question when at least
    ``restate_share`` of its content words are question words, together they cover at least
    ``restate_cover`` of the question's content words, and it holds no value of the kind asked
    for (or no content word of its own at all).
    ``extract`` replaces :func:`extract_values` (same return shape).

    Example:
        >>> c = ResponsivenessChecker()
        >>> c.check("Who discovered superconductivity?", "Who discovered superconductivity? It was discovered.",
        ...         ["Onnes discovered superconductivity in 1911."]).reason
        'restated_question'
    """

    def __init__(self, paste_min_tokens: int = 20, paste_share: float = 0.8, label_paste_tokens: int = 8,
                 restate_share: float = 0.8, restate_cover: float = 0.5,
                 extract: Extractor | None = None) -> None:
        self.paste_min_tokens = paste_min_tokens
        self.paste_share = paste_share
        self.label_paste_tokens = label_paste_tokens
        self.restate_share = restate_share
        self.restate_cover = restate_cover
        self.extract = extract

    def warm_up(self) -> None:
        """Nothing to load (rules only); here for the component protocol."""

    def to_dict(self) -> dict[str, Any]:
        return {"type": "responsiveness", "paste_min_tokens": self.paste_min_tokens,
                "paste_share": self.paste_share, "label_paste_tokens": self.label_paste_tokens,
                "restate_share": self.restate_share, "restate_cover": self.restate_cover}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResponsivenessChecker:
        return cls(**{k: v for k, v in data.items() if k != "type"})

    def _values(self, text: str) -> dict[str, list[str]]:
        return (self.extract or extract_values)(text)

    def _kind_values(self, kind: str, answer: str, question: str) -> list[tuple[str, str]]:
        """``(value kind, value)`` pairs of the kind asked for that the question does not name
        (a choice question, "A or B?", may be answered with a name it offers)."""
        vals = self._values(answer)
        if kind in ("date", "number", "quantity"):
            # the numeric kinds as one: a year is a number, and the learned kind may confuse
            # them ("at what temperature" read as a date); a name for a number is what this catches
            pairs = [("date", v) for v in vals.get("date", [])] + [("number", v) for v in vals.get("number", [])]
        elif kind == "name":
            pairs = [("name", v) for v in vals.get("name", [])]
        else:
            return []
        if " or " in f" {question.lower()} ":
            return pairs
        q_tokens = {_stem(t) for t in _tokens(question)}
        # a value the question states ("one" electronvolt) is not an answer to it ("1.")
        return [(k, v) for k, v in pairs
                if not all(_stem(t) in q_tokens for t in _tokens(v)) and not _typed_in(v, question)]

    def _pasted(self, answer: str, a_tokens: Sequence[str], copied: int, covered: float,
                labelled: bool) -> bool:
        """A passage pasted as the answer: opened with a marker or an evidence label and copied,
        or one copied run that covers most of the answer and either spans several sentences or
        is longer than any one answer sentence should be. A single copied sentence of ordinary
        length is an extractive answer, not a paste."""
        from ragsieve.text.sentences import split_sentences

        if labelled and copied >= self.label_paste_tokens and covered >= 0.5:
            return True
        if copied < self.paste_min_tokens or covered < self.paste_share:
            return False
        return copied >= 2 * self.paste_min_tokens or len(split_sentences(_MARKER_RE.sub(" ", answer))) > 1

    def check(self, question: str, answer: str, evidence: Sequence[SearchHit] | Sequence[str],
              opened_with_label: bool | None = None, readings: Readings | None = None) -> Responsiveness:
        """The verdict for ``answer`` to ``question`` given the numbered ``evidence`` (hits or
        strings, numbered from 1 as in the answer prompt). ``opened_with_label``: whether the
        model's reply opened with a marker or an ``Evidence:`` label before cleanup removed it
        (default: read from ``answer``). ``readings``: the request's readings
        (:class:`ragsieve.text.readings.Readings`), whose reading of the question gives the kind
        asked for; without them the question is read here."""
        kind = readings.question(question).kind if readings is not None else expected_kind(question)
        texts = _evidence_texts(evidence)
        a_tokens = _tokens(answer)
        if not a_tokens:
            return Responsiveness(False, "empty", kind, detail="the answer has no words")
        if _ABSTAIN_RE.search(answer):
            return Responsiveness(False, "abstention", kind, detail="the answer says it cannot answer")
        ev_tokens = [_tokens(t) for t in texts]
        copied = max((longest_copied_run(a_tokens, t) for t in ev_tokens), default=0)
        covered = copied_share(a_tokens, ev_tokens, self.label_paste_tokens)
        labelled = bool(_LABEL_OPEN_RE.match(answer)) if opened_with_label is None else opened_with_label
        if self._pasted(answer, a_tokens, copied, covered, labelled):
            return Responsiveness(False, "pasted_passage", kind, copied=copied,
                                  detail=f"{copied} of {len(a_tokens)} answer words are one run copied from the "
                                         "evidence")
        q_content = {_stem(t) for t in _content(_tokens(question))}
        a_content = [_stem(t) for t in _content(a_tokens)]
        new = [t for t in a_content if t not in q_content]
        polar_ok = kind == "yes/no" and starts_with_polarity(answer)
        values = self._kind_values(kind, answer, question)
        from_question = len(a_content) - len(new)
        # a restatement repeats much of the question; a short answer that reuses a question word
        # or two ("Kansas Song" for "... the fight song of the university in Kansas") does not
        repeats = bool(q_content) and len(set(a_content) & q_content) / len(q_content) >= self.restate_cover
        restates = bool(a_content) and from_question / len(a_content) >= self.restate_share and repeats
        if _chosen_alternative(question, set(a_content)) or (
                " or " in f" {question.lower()} " and a_content and not new and not repeats):
            # "A or B?" answered by naming one of the alternatives
            return Responsiveness(True, "ok", kind, copied=copied, detail="names an alternative the question offers")
        if _named_alternatives(question, set(a_content)) > 1:
            return Responsiveness(False, "restated_question", kind, copied=copied,
                                  detail="names every alternative the question offers without choosing one")
        if starts_with_polarity(answer) and not any(w in _INTERROGATIVES for w in folded_words(question)):
            # a yes/no question the polar test does not recognise ("Both A and B are ...?")
            return Responsiveness(True, "ok", kind, copied=copied, detail="a yes or no to a question without a "
                                                                           "question word")
        # any number, date or name the question does not hold is new content, whatever the kind
        any_value = bool(values) or any(
            not all(_stem(t) in q_content for t in _tokens(v)) for vs in self._values(answer).values() for v in vs
        )
        if not polar_ok and not any_value and ((not new and (repeats or not a_content)) or restates):
            return Responsiveness(False, "restated_question", kind, copied=copied,
                                  detail="the answer adds nothing to the question's own words")
        if kind == "yes/no":
            ok = polar_ok or bool(new)
            return Responsiveness(ok, "ok" if ok else "wrong_kind", kind, copied=copied)
        if kind == "description":
            return Responsiveness(True, "ok", kind, copied=copied)
        if not values and kind == "name" and _LOCATIVE_RE.search(_MARKER_RE.sub(" ", answer)):
            # "Where is graphene used?" - "in electronics": a place need not be a proper name
            return Responsiveness(True, "ok", kind, copied=copied, detail="a locative phrase, not a name")
        if not values:
            return Responsiveness(False, "wrong_kind", kind, copied=copied,
                                  detail=f"the question asks for {KIND_WORDS[kind]}; the answer gives none")
        cited = _cited_texts(answer, texts)
        found = [v for _, v in values]
        grounded = [v for k, v in values if any(_grounded(k, v, t) for t in cited)]
        if not cited:
            return Responsiveness(False, "ungrounded", kind, found, [], copied, "there is no evidence")
        if not grounded:
            return Responsiveness(False, "ungrounded", kind, found, [], copied,
                                  f"none of {', '.join(found)} is in the cited evidence")
        return Responsiveness(True, "ok", kind, found, grounded, copied)


def check_responsive(question: str, answer: str, evidence: Sequence[SearchHit] | Sequence[str]) -> Responsiveness:
    """:meth:`ResponsivenessChecker.check` with the default thresholds."""
    return ResponsivenessChecker().check(question, answer, evidence)


# ---------------------------------------------------------------- extraction from a pasted passage
# The kinds of :func:`ragsieve.text.kind.expected_kind` an answer can be extracted for: one value
# a passage sentence states (date, number, name), or for an open ("what is") question the
# sentence that answers it on the question's own terms. A yes/no question needs a stance, which
# a copied sentence does not give.
EXTRACTABLE_KINDS: tuple[str, ...] = ("date", "number", "quantity", "name", "description")


class PasteExtraction(NamedTuple):
    """The answer :func:`extract_from_paste` found: the evidence ``sentence`` that states it
    (whitespace-normalised), the passage's 1-based ``position`` in the evidence (its citation
    number) and the evidence item itself (``hit``: a :class:`SearchHit`, or the string)."""

    sentence: str
    position: int
    hit: SearchHit | str


def extract_from_paste(question: str, evidence: Sequence[SearchHit] | Sequence[str],
                       reply: str, readings: Readings | None = None) -> PasteExtraction | None:
    """The sentence of the evidence that answers ``question``, for a ``reply`` that pasted a
    passage instead of answering (the model chose the passage but did not extract from it).

    Passages are tried in order: the one ``reply`` copied the longest run from, then the others
    in evidence order. Each is read by :func:`ragsieve.text.passage.passage_answer` (the value of the
    kind asked for, in the sentence that best covers the question's terms; a passage that does
    not name the question's entities answers nothing), and the first that states a value gives
    its sentence; an open question (no value kind asked for) takes the first passage's
    :func:`ragsieve.text.passage.answering_sentence` instead. ``None`` for a yes/no question (not in
    :data:`EXTRACTABLE_KINDS`) or when no passage states an answer. ``readings``: the request's
    readings (:class:`ragsieve.text.readings.Readings`; a fresh set when none is given).

    Example:
        >>> ev = ["Superconductivity is the loss of resistance. Heike Kamerlingh Onnes discovered "
        ...       "superconductivity in 1911 in Leiden."]
        >>> found = extract_from_paste("When was superconductivity discovered?", ev, ev[0])
        >>> found.sentence, found.position
        ('Heike Kamerlingh Onnes discovered superconductivity in 1911 in Leiden.', 1)
        >>> extract_from_paste("Is superconductivity a loss of resistance?", ev, ev[0]) is None
        True
        >>> extract_from_paste("What is superconductivity?", ev, ev[0]).sentence
        'Superconductivity is the loss of resistance.'
    """
    readings = readings if readings is not None else Readings()
    kind = readings.question(question).kind
    if kind not in EXTRACTABLE_KINDS:
        return None
    texts = _evidence_texts(evidence)
    if not texts:
        return None
    reply_tokens = _tokens(reply)
    runs = [longest_copied_run(reply_tokens, _tokens(t)) for t in texts]
    # the most-copied passage first (the earliest on a tie), then the rest in evidence order
    first = max(range(len(texts)), key=lambda i: (runs[i], -i))
    for i in [first, *(j for j in range(len(texts)) if j != first)]:
        hit = evidence[i]
        reading = readings.passage(question, hit if isinstance(hit, SearchHit) else texts[i])
        if kind == "description":
            sentence = " ".join((reading.open_sentence or "").split())
            if sentence:
                return PasteExtraction(sentence, i + 1, hit)
            continue
        found = reading.answer
        sentence = " ".join(found.sentence.split())
        if found.value is not None and sentence:
            return PasteExtraction(sentence, i + 1, hit)
    return None


def checked_extraction(question: str, evidence: Sequence[SearchHit] | Sequence[str], reply: str,
                       checker: ResponsivenessChecker,
                       readings: Readings | None = None) -> tuple[PasteExtraction, str, Responsiveness] | None:
    """:func:`extract_from_paste` for ``reply``, its sentence cited ``[n]`` as a generated answer
    cites (:func:`ragsieve.generate.answer.cite_sentence`), and ``checker``'s verdict on that text
    (which opens with no evidence label, whatever the pasted reply did); ``None`` when nothing
    was extracted."""
    from ragsieve.generate.answer import cite_sentence

    found = extract_from_paste(question, evidence, reply, readings)
    if found is None:
        return None
    text = cite_sentence(found.sentence, found.position)
    return found, text, checker.check(question, text, evidence, opened_with_label=False, readings=readings)


# ---------------------------------------------------------------- policy
def retry_instruction(verdict: Responsiveness) -> str:
    """An instruction to add to the answer prompt for the one regeneration, naming what was
    wrong with the first reply."""
    want = KIND_WORDS.get(verdict.expected, "an answer")
    base = (f"Answer the question directly with {want} taken from the evidence, in one sentence, "
            "and cite the evidence number like [1].")
    extra = {
        "pasted_passage": " Do not copy the evidence; state only the answer.",
        "restated_question": " Do not repeat the question; state the answer.",
        "wrong_kind": f" The question asks for {want}.",
        "ungrounded": " Use only values that appear in the evidence.",
    }.get(verdict.reason, "")
    return base + extra


def add_instruction(messages: Sequence[Any], instruction: str) -> list[Any]:
    """Chat ``messages`` with ``instruction`` appended to the last user message (the retry
    prompt: the same evidence and question, plus what the first reply got wrong).

    >>> add_instruction([{"role": "user", "content": "Question: When?"}], "Answer with a year.")
    [{'role': 'user', 'content': 'Question: When?\\nAnswer with a year.'}]
    """
    out = [dict(m) for m in messages]
    if not instruction:
        return out
    for m in reversed(out):
        if m.get("role") == "user":
            m["content"] = f"{m['content']}\n{instruction}"
            return out
    out.append({"role": "user", "content": instruction})
    return out


def _topic(hit: SearchHit | str) -> str:
    if isinstance(hit, SearchHit):
        chunk = hit.chunk
        title = " ".join(str(chunk.title or "").split())
        if title:
            return title
        if chunk.source:
            stem = re.sub(r"^\d+[-_ ]+", "", PurePosixPath(chunk.source.rstrip("/")).stem)
            name = " ".join(re.split(r"[-_ ]+", stem)).strip()
            if name:
                return name[:1].upper() + name[1:]
        text = chunk.text
    else:
        text = str(hit)
    names = [n for n in _names(text) if len(n) > 2][:2]
    return ", ".join(names)


def abstention_message(question: str, evidence_hits: Sequence[SearchHit] | Sequence[str], max_topics: int = 5) -> str:
    """A plain abstention: what was asked for is not stated, and what the evidence covers
    (titles, else source names, else the names it mentions), without quoting a passage.

    >>> abstention_message("When did the Tay Bridge open?", ["The Forth Bridge is in Scotland."])
    'The evidence found does not state a date or year that answers the question; it covers Forth Bridge, Scotland.'
    """
    want = KIND_WORDS.get(expected_kind(question), "an answer")
    topics: list[str] = []
    for hit in evidence_hits:
        topic = _topic(hit)
        if topic and topic.lower() not in (t.lower() for t in topics):
            topics.append(topic)
        if len(topics) >= max_topics:
            break
    if not topics:
        return "No evidence on the question's topic was found, so there is no answer to give."
    listed = "; ".join(topics) if any("," in t for t in topics) else ", ".join(topics)
    if want == "an answer":
        return f"The evidence found does not answer the question; it covers {listed}."
    return f"The evidence found does not state {want} that answers the question; it covers {listed}."


@dataclass
class ResponsiveOutcome:
    """What :func:`answer_responsively` decided: the answer ``text`` (or the abstention
    message), whether it ``abstained``, and each attempt's raw reply, cleaned text and verdict."""

    text: str
    abstained: bool
    attempts: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def answer_responsively(
    question: str,
    evidence: Sequence[SearchHit] | Sequence[str],
    generate: Callable[[str], str],
    checker: ResponsivenessChecker | None = None,
    retries: int = 1,
    extract_on_paste: bool = True,
) -> ResponsiveOutcome:
    """Generate, clean and check an answer; regenerate up to ``retries`` times with
    :func:`retry_instruction`; abstain with :func:`abstention_message` if no reply answers.

    ``generate(instruction)`` returns the model's raw reply; ``instruction`` is ``""`` on the
    first call and an extra instruction for the answer prompt on a retry. A reply that says it
    cannot answer is not retried. ``extract_on_paste``: when the last reply pasted a passage,
    answer with the evidence sentence that states the value asked for
    (:func:`extract_from_paste`), cited ``[n]``, if it passes the check (the attempt's
    ``extracted`` entry says from which passage), before abstaining; the sieve's verify stage
    does the same (``stages.verify.extract_on_paste``).
    """
    from ragsieve.generate.cleanup import clean_answer

    checker = checker or ResponsivenessChecker()
    attempts: list[dict[str, Any]] = []
    instruction = ""
    verdict: Responsiveness | None = None
    for _ in range(retries + 1):
        raw = generate(instruction)
        cleaned = clean_answer(raw, question)
        # a reply that opened with an evidence label pasted what followed it, whatever cleanup kept
        verdict = checker.check(question, cleaned.text, evidence,
                                opened_with_label=bool(_LABEL_OPEN_RE.match(raw.strip())) or None)
        attempts.append({"raw": raw, "text": cleaned.text, "cleanup": cleaned.changes,
                         "instruction": instruction, "verdict": verdict.to_dict()})
        if verdict.ok:
            return ResponsiveOutcome(cleaned.text, False, attempts)
        if verdict.reason == "abstention":
            break
        instruction = retry_instruction(verdict)
    if extract_on_paste and verdict is not None and verdict.reason == "pasted_passage":
        checked = checked_extraction(question, evidence, attempts[-1]["text"], checker)
        if checked is not None:
            found, text, extracted = checked
            attempts.append({"raw": None, "text": text, "cleanup": [], "instruction": "",
                             "verdict": extracted.to_dict(),
                             "extracted": {"position": found.position, "sentence": found.sentence}})
            if extracted.ok:
                return ResponsiveOutcome(text, False, attempts)
    return ResponsiveOutcome(abstention_message(question, evidence), True, attempts)
