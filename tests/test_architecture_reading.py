"""One reading layer: the sentence splitter and the stop list live in ``ragsieve.text`` (with the
ground lexicon, ``ragsieve/lexicon.py``), and no other module defines its own.

Read from the source with :mod:`ast` (nothing is imported): a module outside the text layer that
imports a sentence segmenter (pysbd, nltk's ``sent_tokenize``), compiles a sentence-boundary
regular expression (a character class of ``.``, ``!`` and ``?`` followed by white space), or
writes a set of 20 or more common English function words fails, naming the file and line and the
fix.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ragsieve"
# the reading layer, and the ground lexicon under it (imports nothing from ragsieve)
HOMES = ("text/", "lexicon.py")
# Splitters elsewhere that the lead has accepted, each with why. filtering/injection.py: the
# injection classifier's training script and stage must cut alike with spans into the passage as
# given (its own splitter); to be moved onto ragsieve.text.sentences when the classifier is retrained.
ACCEPTED_SPLITTERS = {"filtering/injection.py"}
# Stop lists elsewhere, each with why. tasks/evaluator.py: the shipped relevance evaluator's
# keyword-overlap feature was trained with it (retrain on STOP_WORDS to retire it). coe/features.py:
# ScopeCoE's rule keywords keep "year", "name" and the like, which STOP_WORDS drops; the pinned demo
# traces' keywords change on STOP_WORDS, so it waits for a measurement.
ACCEPTED_STOP_LISTS = {"tasks/evaluator.py", "coe/features.py"}

# Common English function words (written here, not imported: the test must not trust the module
# it checks). A set holding 20 or more of them is a stop list.
FUNCTION_WORDS = frozenset(
    (  # noqa: SIM905
        "a an the of in on at to for from by with and or but as is are was were be been being it its this that "
        "these those there their they them he she his her him we our you your i me my us do does did has have "
        "had not no so if then than which what who whom whose when where why how into onto over under about "
        "after before between during also only very can could will would shall should may might must such "
        "other both each all any some more most much many same own just up out off again once here"
    ).split()
)
STOP_LIST_MIN = 20
_CLASS_RE = re.compile(r"\[([^\]]*)\]([^?*]|$)")


def _modules() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        out.append((rel, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))))
    return out


def _in_home(rel: str) -> bool:
    return any(rel == h or rel.startswith(h) for h in HOMES)


def is_sentence_boundary(pattern: str) -> bool:
    """A regular expression that cuts at sentence ends: a required character class holding ``.``,
    ``!`` and ``?`` (and neither ``:`` nor ``;``, which mark clauses) with white space after it.

    >>> is_sentence_boundary(r"(?<=[.!?])\\s+(?=[A-Z])"), is_sentence_boundary(r"\\s*[.!?]?\\s*$")
    (True, False)
    """
    for m in _CLASS_RE.finditer(pattern):
        chars = m.group(1)
        if {".", "!", "?"} <= set(chars) and not {":", ";"} & set(chars) and "\\s" in pattern[m.end(1) :]:
            return True
    return False


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def splitter_sites() -> list[str]:
    found = []
    for rel, tree in _modules():
        if _in_home(rel) or rel in ACCEPTED_SPLITTERS:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                if any(n and (n.split(".")[0] == "pysbd" or n == "sent_tokenize") for n in names):
                    found.append(f"{rel}:{node.lineno} imports a sentence segmenter")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                owner = node.func.value
                if isinstance(owner, ast.Name) and owner.id in ("re", "regex") and node.func.attr in (
                    "compile", "split", "finditer", "sub", "search", "findall",
                ):  # fmt: skip
                    pattern = node.args[0]
                    literal = isinstance(pattern, ast.Constant) and isinstance(pattern.value, str)
                    if literal and is_sentence_boundary(pattern.value):  # type: ignore[attr-defined]
                        found.append(f"{rel}:{node.lineno} compiles a sentence-boundary regex")
    return found


def _word_collection(node: ast.AST) -> set[str]:
    """The words of a set of words: a set literal, ``frozenset(...)``/``set(...)`` (or any
    ``...set`` maker) of words, ``"a b c".split()``, or a union of those; prose (templates,
    messages) is not one."""
    if isinstance(node, ast.Set):
        return {w.lower() for s in _strings(node) for w in s.split()}
    if isinstance(node, ast.BinOp):
        return _word_collection(node.left) | _word_collection(node.right)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name == "split" or name.lower().endswith("set"):
            return {w.lower() for s in _strings(node) for w in s.split()}
    return set()


def stop_list_sites() -> list[str]:
    found = []
    for rel, tree in _modules():
        if _in_home(rel) or rel in ACCEPTED_STOP_LISTS:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
                continue
            held = _word_collection(node.value) & FUNCTION_WORDS
            if len(held) >= STOP_LIST_MIN:
                found.append(f"{rel}:{node.lineno} defines a stop list ({len(held)} function words)")
    return found


def test_no_module_outside_the_text_layer_splits_sentences_its_own_way():
    sites = splitter_sites()
    assert not sites, (
        "sentence splitters outside ragsieve.text: " + "; ".join(sites)
        + ". Use ragsieve.text.sentences.split_sentences (rewrite_lists=False keeps the words as written)"
    )


def test_no_module_outside_the_text_layer_defines_a_stop_list():
    sites = stop_list_sites()
    assert not sites, (
        "stop lists outside ragsieve.text: " + "; ".join(sites)
        + ". Use ragsieve.lexicon.STOP_WORDS (re-exported by ragsieve.text.terms); compose "
        "`STOP_WORDS | {...}` locally, with a comment saying why, for a module's own extra words"
    )


def test_the_checks_would_catch_a_splitter_and_a_stop_list():
    tree = ast.parse(
        'import re\nSTOP = frozenset("a an the of in on at to for from by with and or is are was were be been '
        'it its this that".split())\nEND = re.compile(r"(?<=[.!?])\\s+")\n'
    )
    assert is_sentence_boundary(r"([.!?]+[\"')\]]*)(\s+)(?=[A-Z0-9])")
    assert not is_sentence_boundary(r"(?:^|[.!?:;]\s+|\n\s*)$")  # a sentence start test, clause marks too
    assert any(len(_word_collection(n.value) & FUNCTION_WORDS) >= STOP_LIST_MIN
               for n in ast.walk(tree) if isinstance(n, ast.Assign))  # fmt: skip
    prose = ast.parse('MESSAGES = ("it is what it was and will be for the one of them that has been here now with '
                      'us all as if they had not",)')
    assert not _word_collection(prose.body[0].value)  # type: ignore[attr-defined]
    end = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "compile")
    assert is_sentence_boundary(end.args[0].value)  # type: ignore[attr-defined]
