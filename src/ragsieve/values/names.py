"""Proper names: capitalised spans (with connectors such as "of", "van", "de", and initials) read
into folded tokens, and how evidence states a name: as a contiguous token sequence after folding case
and diacritics, where an initial matches a full name ("W. Meissner" ~ "Walther Meissner") and an
evidence initial may sit in between; or in another form: a shorter form that keeps its leading words,
an acronym, another spelling (:data:`NAME_SPELLING_RATIO`), more words between its first and last, its
trailing words (what :func:`ragsieve.values.evidence.find_entity` reads). The name tokeniser is also
the one the evidence's words are read with.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Literal

from ragsieve.values.core import Match, Value, fold

_NAME_CONNECTORS = {"of", "de", "da", "del", "della", "der", "van", "von", "la", "le", "du", "di", "bin", "al", "y"}


# A name: capitalised words (or initials) joined by spaces and connector words.
_CAP_TOKEN = r"(?:[A-Z]\.|[A-Z\u00C0-\u00DE][\w\u00C0-\u024F'’-]*)"


NAME_RE = re.compile(
    rf"{_CAP_TOKEN}(?:\s+(?:(?:{'|'.join(sorted(_NAME_CONNECTORS))})\s+)*{_CAP_TOKEN})*",
)


# One tokeniser for names and evidence: apostrophes split ("O'Hara" -> "o", "hara"; "Rollo's" ->
# "rollo", "s"), so a possessive or an Irish name reads the same on both sides.
_TOKEN_RE = re.compile(r"[^\W_]+\.?")


_SENTENCE_START_RE = re.compile(r"(?:^|[.!?:;]\s+|\n\s*|[\"“(]\s*)$")


def _name_tokens(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for tok in _word_tokens(text):
        if tok in _NAME_CONNECTORS:
            continue  # "University of Oxford" ~ "Oxford University"
        out.append(tok)
    return tuple(out)


def _word_tokens(text: str) -> list[str]:
    """Folded word tokens; an initial (one capital letter, "W" or "W.") becomes ``"w."`` so it
    can match a full name, while a lower-case "a" stays a word. Connector words stay lower-case
    only when written lower-case ("DER" is a name, "der" a connector)."""
    out: list[str] = []
    for raw in _TOKEN_RE.findall(text):
        word = raw.rstrip(".")
        if _is_initial(word):
            out.append(fold(word) + ".")
        elif word.islower() or word.lower() not in _NAME_CONNECTORS:
            out.extend(fold(word).split())  # a modifier letter folds to a space ("ibnʿArabī")
        else:
            out.append(fold(word) + "_")  # a capitalised connector word used as a name ("De")
    return out


def _is_initial(word: str) -> bool:
    """One capital letter, with or without its full stop ("W", "W.")."""
    return bool(re.fullmatch(r"[A-Z]\.?", word))


def _at_sentence_start(text: str, pos: int) -> bool:
    return bool(_SENTENCE_START_RE.search(text[max(0, pos - 4) : pos])) or pos == 0


def _tok_matches(claim_tok: str, ev_tok: str) -> bool:
    c, e = claim_tok.rstrip("._"), ev_tok.rstrip("._")
    if not c or not e:
        return False
    if c == e:
        return True
    if claim_tok.endswith("."):  # an initial matches the full name it abbreviates
        return e.startswith(c)
    if ev_tok.endswith("."):
        return c.startswith(e)
    return False


def _name_match(value: Value, evidence_tokens: Sequence[str], evidence_text: str) -> Match | None:
    toks = value.tokens
    n = len(evidence_tokens)
    for i in range(n):
        j, k = i, 0
        how: Literal["exact", "variant"] = "exact"
        while k < len(toks) and j < n:
            last = k == len(toks) - 1 and len(toks) > 1 or len(toks) == 1
            ev_tok = evidence_tokens[j]
            # an initial stands for a first or middle name, never for the last word of a name
            initial = toks[k].endswith(".") or ev_tok.endswith(".")
            if toks[k] == ev_tok or (not (last and initial) and _tok_matches(toks[k], ev_tok)):
                if toks[k].rstrip(".") != evidence_tokens[j].rstrip("."):
                    how = "variant"
                j, k = j + 1, k + 1
            elif k > 0 and evidence_tokens[j].endswith("."):
                j += 1  # an evidence middle initial ("John F. Kennedy" states "John Kennedy")
                how = "variant"
            elif k > 0 and evidence_tokens[j] in _NAME_CONNECTORS:
                j += 1
            else:
                break
        if k == len(toks):
            surface = " ".join(evidence_tokens[i:j])
            ev = Value("name", surface, surface, (0, 0), tokens=tuple(evidence_tokens[i:j]))
            return Match(value, ev, how)
    return None


# Two spellings of one name ("Tchaikovsky" / "Tschaikowsky") are this similar (difflib's ratio
# of the folded names); a different name sharing a word ("Walther Ochsenfeld" / "Walther
# Meissner") is well below. Set by arithmetic on such pairs, not on a benchmark.
NAME_SPELLING_RATIO = 0.9


def _initials(tokens: Sequence[str]) -> str:
    return "".join(t[0] for t in tokens if t and t not in _NAME_CONNECTORS)


def _name_variant(value: Value, evidence_values: Sequence[Value]) -> Match | None:
    """A name the evidence states in another form: a shorter form that keeps the name's leading
    words ("Sony" for "Sony Corporation"), an acronym of it ("IBM" for "International Business
    Machines", and the reverse), or another spelling (:data:`NAME_SPELLING_RATIO`)."""
    toks = tuple(t.rstrip(".") for t in value.tokens)
    if not toks:
        return None
    joined = " ".join(toks)
    for ev in evidence_values:
        if ev.kind != "name" or not ev.tokens:
            continue
        etoks = tuple(t.rstrip(".") for t in ev.tokens)
        ejoined = " ".join(etoks)
        if len(etoks) < len(toks) and toks[: len(etoks)] == etoks and len(etoks[0]) >= 3:
            return Match(value, ev, "variant", f"a shorter form of {value.text}")
        if len(etoks) == 1 and len(toks) >= 2 and etoks[0] == _initials(toks):
            return Match(value, ev, "variant", f"the initials of {value.text}")
        if len(toks) == 1 and len(etoks) >= 2 and toks[0] == _initials(etoks):
            return Match(value, ev, "variant", f"{value.text} is the initials of {ev.text}")
        if min(len(joined), len(ejoined)) >= 5 and (
            difflib.SequenceMatcher(None, joined, ejoined).ratio() >= NAME_SPELLING_RATIO
        ):
            return Match(value, ev, "variant", "another spelling")
    return None


def _subsequence(short: Sequence[str], long: Sequence[str]) -> bool:
    it = iter(long)
    return all(any(_tok_matches(s, t) for t in it) for s in short)


def _names_another(toks: Sequence[str], part: Sequence[str], ev: Sequence[str]) -> bool:
    """Whether evidence name ``ev`` holds ``part`` (a shorter form of the name ``toks``) beside
    words that are not the name's: it names something else ("Peter Schmeichel" beside "Kasper
    Schmeichel", "Walther Ochsenfeld" beside "Walther Meissner", "Williams Bridge" beside "Street
    Bridge")."""
    k = len(part)
    if len(ev) <= k:
        return False
    for i in range(len(ev) - k + 1):
        if tuple(ev[i : i + k]) == tuple(part):
            rest = [*ev[:i], *ev[i + k :]]
            if not all(any(_tok_matches(t, e) or _tok_matches(e, t) for t in toks) for e in rest):
                return True
    return False


def _named(evidence_values: Sequence[Value]) -> list[tuple[Value, tuple[str, ...]]]:
    return [(ev, tuple(t.rstrip(".") for t in ev.tokens)) for ev in evidence_values if ev.kind == "name" and ev.tokens]


def _entity_form(
    value: Value, evidence_values: Sequence[Value], tail_min: int | None, others: Sequence[tuple[str, ...]]
) -> Match | None:
    toks = tuple(t.rstrip(".") for t in value.tokens)
    if len(toks) < 2:
        return None
    named = _named(evidence_values)
    for ev, etoks in named:
        # the same first and last word with more words between ("Mari Christine Fitzduff")
        if len(etoks) > len(toks) and etoks[0] == toks[0] and etoks[-1] == toks[-1] and _subsequence(toks, etoks):
            return Match(value, ev, "variant", f"{value.text} with more words")
    if tail_min is None:
        return None
    for k in range(len(toks) - 1, 0, -1):
        tail = toks[-k:]
        if max(len(t) for t in tail) < tail_min or any(_names_another(toks, tail, o) for o in others):
            continue
        for ev, etoks in named:
            if etoks == tail:
                return Match(value, ev, "variant", f"the last words of {value.text}")
    return None
