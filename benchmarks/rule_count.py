"""Count the hand-written rules of the trust layer: regular expressions and word lists.

Reads the Python source (``ast``, nothing imported) of the modules that read text to judge it:
value extraction, answer kinds, the conflict reader, verification (claims, grounding,
responsiveness), entity extraction, answer cleanup and the yes/no reading, the faithfulness
metric and the perturbation toolkit. Counted:

* a **regular expression**: a call of ``re.compile``/``search``/``match``/``fullmatch``/
  ``findall``/``finditer``/``sub``/``subn``/``split`` whose pattern is written in the code;
* a **word list**: a literal set, list, tuple or dict (keys) of at least three strings (not a
  module's ``__all__``), or a string literal split into at least three words
  (``"a an the".split()``); its **entries** are its strings.

python benchmarks/rule_count.py                    # this checkout
python benchmarks/rule_count.py --src ../main/src  # another checkout, to compare
python benchmarks/rule_count.py --before ../main/src --write   # both, into docs/results/conflicts.md
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, markdown_table, write_section  # noqa: E402

# What the text layer adopted and deleted (the closing note of the consolidation).
LIBRARIES = (
    "Adopted: PyStemmer (Snowball English, already the sparse index's stemmer) as the one stemmer "
    "(`ragsieve.text.terms`), replacing three hand-written suffix strippers; scikit-learn (fit) and "
    "`ragsieve.array_models` (numpy inference) for the answer-kind classifier (`ragsieve.text.kind`), "
    "replacing two listed `expected_kind` rule sets with different labels; pint stays the unit converter "
    "of `ragsieve.values`, the one value extractor; difflib (standard library) for name spellings. "
    "Considered and not adopted: rapidfuzz (a new compiled dependency for what difflib's ratio does on "
    "names of a few words), dateparser and quantulum3 (parse whole strings or quantities with their own "
    "unit tables; `ragsieve.values` already reads dates and quantities with spans and pint units, and "
    "swapping it was out of this change's time), spaCy English pipelines (the only PyPI packages that "
    "ship one, `en-core-web-sm-*` mirrors, are re-uploads by third parties without the model's "
    "provenance, so none was installed)."
)
DELETED = (
    "Deleted: the rule-based `expected_kind` of `ragsieve.verify.responsive` (question-word and noun lists: "
    "date, quantity, place and person nouns) and of `ragsieve.conflict` (its question-word regexes); the "
    "responsiveness checker's own value extractor (year, century, month-date, ISO-date, number and name "
    "regexes, its month table and number-word table; it reads `ragsieve.values` now); the conflict "
    "reader's and the responsiveness checker's stop-word lists and suffix strippers (one list in "
    "`ragsieve.text.terms`); the entity extractor's date regexes and month table (dates from "
    "`ragsieve.values`, whose month table `MONTH_NUMBERS` it now shares); the "
    "conflict reader's reading of any negation word in a sentence as \"no\" (now only in the clause "
    "that holds the question's terms). Not yet deleted: the entity extractor's given-name and place "
    "gazetteers, the faithfulness metric's and the perturbation toolkit's own value readers and month "
    "tables (other packages), and the rules of answer cleanup."
)

TRUST_LAYER = (
    "ragsieve/lexicon.py",
    "ragsieve/values.py",
    "ragsieve/text",
    "ragsieve/text.py",
    "ragsieve/sentences.py",
    "ragsieve/answers.py",
    "ragsieve/conflict.py",
    "ragsieve/sieve/conflict.py",
    "ragsieve/verify",
    "ragsieve/ingest/entities.py",
    "ragsieve/generate/polar.py",
    "ragsieve/generate/cleanup.py",
    "ragsieve/eval/faithfulness.py",
    "ragsieve/coe/perturb.py",
)
_RE_FUNCS = {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}


def _is_pattern(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant | ast.JoinedStr | ast.BinOp) and not (
        isinstance(node, ast.Constant) and not isinstance(node.value, str)
    )


def _strings(elts: list[ast.expr | None]) -> int | None:
    if len(elts) >= 3 and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elts):
        return len(elts)
    return None


def count_file(path: Path) -> tuple[int, int, int]:
    """(regular expressions, word lists, word-list entries) in one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    # a module's ``__all__`` lists names of its own code, not words
    exports = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    }
    regexes = lists = entries = 0
    for node in ast.walk(tree):
        if id(node) in exports:
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "re" and node.func.attr in _RE_FUNCS and node.args:
                regexes += int(_is_pattern(node.args[0]))
            elif node.func.attr == "split" and not node.args and isinstance(owner, ast.Constant):
                n = len(str(owner.value).split())
                if n >= 3:
                    lists, entries = lists + 1, entries + n
        elif isinstance(node, ast.Set | ast.List | ast.Tuple):
            n = _strings(list(node.elts)) or 0
            if n:
                lists, entries = lists + 1, entries + n
        elif isinstance(node, ast.Dict):
            n = _strings(list(node.keys)) or 0
            if n:
                lists, entries = lists + 1, entries + n
    return regexes, lists, entries


def count(src: Path) -> dict[str, tuple[int, int, int]]:
    out: dict[str, tuple[int, int, int]] = {}
    for rel in TRUST_LAYER:
        path = src / rel
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else []
        for f in files:
            out[str(f.relative_to(src))] = count_file(f)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the src folder of a checkout")
    parser.add_argument("--before", type=Path, default=None, help="the src folder of the checkout to compare")
    parser.add_argument("--write", action="store_true", help="write the section (needs --before)")
    args = parser.parse_args()
    counts = count(args.src)
    for name, (r, lists, e) in counts.items():
        print(f"{name:40s} {r:4d} regexes {lists:4d} word lists {e:5d} entries")
    total = [sum(c[i] for c in counts.values()) for i in range(3)]
    print(f"{'total':40s} {total[0]:4d} regexes {total[1]:4d} word lists {total[2]:5d} entries")
    if args.before is None:
        return
    before = count(args.before)
    old = [sum(c[i] for c in before.values()) for i in range(3)]
    rows: list[list[object]] = [
        ["regular expressions", old[0], total[0]],
        ["word lists", old[1], total[1]],
        ["word-list entries", old[2], total[2]],
    ]
    body = (
        "Hand-written rules of the trust layer (value extraction, answer kinds, the conflict reader, "
        "verification, entity extraction, answer cleanup and yes/no reading, the faithfulness metric, the "
        "perturbation toolkit; the module list is `benchmarks/rule_count.py`'s `TRUST_LAYER`), counted from "
        "the source: before = the checkout given as `--before`, after = this one. Goal: fewer than half of "
        "before; not met.\n\n"
        + markdown_table(["", "before", "after"], rows)
        + "\n\n" + LIBRARIES + "\n\n" + DELETED
    )
    print(body)
    if args.write:
        write_section("results/conflicts.md", "rule-count", "The text layer: rules counted, libraries adopted", body)


if __name__ == "__main__":
    main()
