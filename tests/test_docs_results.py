"""The results docs: a one-screen summary whose figures link to the sections that produced them.

``docs/results.md`` is written by hand; the generated sections live on one page per sieve stage
under ``docs/results/``, each written by its benchmark script through ``benchmarks/_report.py``.
These tests keep the summary short, its links and anchors alive, its intervals copied verbatim
from the linked sections, every page in the mkdocs nav, and ``write_section`` on known pages.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from pathlib import Path

import pytest
import yaml
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SUMMARY = DOCS / "results.md"
TABLE_MARK = "<!-- headline-table"
# the trust checks on data the project did not write, one row per measure
TRUST_TABLE_MARK = "<!-- trust-table"
REQUIRED_MEASURES = (
    "accuracy",
    "coverage",
    "abstention",
    "faithfulness under an independent judge",
    "poisoning attack success",
    "conflict handling",
    "seconds per question",
)
NOT_MEASURED = "not measured yet"
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
INTERVAL = re.compile(r"\[[-+]?\d+(?:\.\d+)?, [-+]?\d+(?:\.\d+)?\]")


report = load_script(ROOT / "benchmarks" / "_report.py", "_report_under_test")


# -- markdown helpers -------------------------------------------------------------------------


def _slugify(text: str) -> str:
    """The heading id python-markdown's toc extension (and so mkdocs) gives a heading."""
    text = LINK.sub(r"\1", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _headings(markdown: str) -> list[tuple[int, str, int]]:
    """(level, id, line number) of every heading outside code fences, with toc's de-duplication."""
    out: list[tuple[int, str, int]] = []
    seen: set[str] = set()
    in_fence = False
    for number, line in enumerate(markdown.splitlines()):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        match = re.match(r"(#{1,6})\s+(.+?)\s*#*\s*$", line)
        if in_fence or not match:
            continue
        slug = _slugify(match.group(2))
        unique, n = slug, 0
        while unique in seen:
            n += 1
            unique = f"{slug}_{n}"
        seen.add(unique)
        out.append((len(match.group(1)), unique, number))
    return out


def _section_text(page: Path, anchor: str) -> str:
    """The text under the heading ``anchor`` up to the next heading of the same or a higher level."""
    lines = page.read_text(encoding="utf-8").splitlines()
    heads = _headings("\n".join(lines))
    for i, (level, slug, number) in enumerate(heads):
        if slug == anchor:
            end = next((n for lv, _s, n in heads[i + 1 :] if lv <= level), len(lines))
            return "\n".join(lines[number:end])
    raise AssertionError(f"{page.relative_to(ROOT)} has no heading with the anchor #{anchor}")


def _table_after(markdown: str, mark: str) -> tuple[list[str], list[list[str]], list[str]]:
    """Header cells, body rows (cells) and raw body lines of the table right after ``mark``."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(mark))
    raw = []
    for line in lines[start + 1 :]:
        if not line.startswith("|"):
            break
        raw.append(line)
    assert len(raw) >= 3, f"no table after {mark!r}"

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split(" | ")]

    return cells(raw[0]), [cells(r) for r in raw[2:]], raw[2:]


def _resolve(link: str, source: Path) -> tuple[Path, str]:
    target, _, anchor = link.partition("#")
    return (source.parent / target).resolve() if target else source, anchor


def _check_link(link: str, source: Path) -> None:
    path, anchor = _resolve(link, source)
    assert path.is_file(), f"{source.relative_to(ROOT)} links to {link}: no such file"
    if anchor:
        ids = {slug for _lv, slug, _n in _headings(path.read_text(encoding="utf-8"))}
        assert anchor in ids, f"{source.relative_to(ROOT)} links to {link}: no heading with that anchor"


# -- the summary ------------------------------------------------------------------------------


def test_summary_fits_one_screen() -> None:
    lines = SUMMARY.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 120, f"docs/results.md has {len(lines)} lines; the summary must stay at most 120"


def test_summary_is_not_written_by_scripts() -> None:
    assert "<!-- BEGIN " not in SUMMARY.read_text(encoding="utf-8")


def test_headline_table_has_every_required_measure() -> None:
    _header, rows, _raw = _table_after(SUMMARY.read_text(encoding="utf-8"), TABLE_MARK)
    measures = [row[0].lower() for row in rows]
    for required in REQUIRED_MEASURES:
        assert any(m.startswith(required) for m in measures), f"the headline table has no {required!r} row"


@pytest.mark.parametrize("mark", [TABLE_MARK, TRUST_TABLE_MARK])
def test_every_summary_figure_links_to_the_section_that_produced_it(mark: str) -> None:
    header, rows, _raw = _table_after(SUMMARY.read_text(encoding="utf-8"), mark)
    assert header[0] == "measure" and header[-1] == "section" and "baseline" in header
    # the trust table's baseline and goal columns carry figures too
    set_columns = slice(1, header.index("baseline")) if mark == TABLE_MARK else slice(1, -1)
    checked_intervals = 0
    for row in rows:
        assert len(row) == len(header), f"row {row[0]!r} has {len(row)} cells, the header {len(header)}"
        figures = [c for c in row[set_columns] if c not in ("–", "-", "") and NOT_MEASURED not in c]
        links = [target for _text, target in LINK.findall(row[-1])]
        if not figures:
            assert all(NOT_MEASURED in c or c in ("–", "-") for c in row[set_columns])
            continue
        assert links, f"headline row {row[0]!r} has figures but no link to the section that produced them"
        assert row[header.index("baseline")] not in ("", "–", "-"), f"row {row[0]!r} names no baseline"
        sources = []
        for link in links:
            _check_link(link, SUMMARY)
            path, anchor = _resolve(link, SUMMARY)
            assert anchor, f"row {row[0]!r} links to a page ({link}), not to a section of it"
            sources.append(_section_text(path, anchor))
        # Every interval in the row is copied verbatim from one of the sections it links to.
        for cell in figures:
            for interval in INTERVAL.findall(cell):
                assert any(interval in text for text in sources), (
                    f"headline row {row[0]!r}: {interval} is in none of its linked sections {links}"
                )
                checked_intervals += 1
    assert checked_intervals >= (20 if mark == TABLE_MARK else 10)


def test_unmeasured_rows_say_so() -> None:
    _header, rows, _raw = _table_after(SUMMARY.read_text(encoding="utf-8"), TABLE_MARK)
    by_measure = {row[0].lower(): row for row in rows}
    # the independent judge has not run on PopQA: its cell must say so rather than stay empty
    row = next(r for m, r in by_measure.items() if m.startswith("faithfulness under an independent judge"))
    assert NOT_MEASURED in " ".join(row), "faithfulness under an independent judge is not measured on every set"
    self_judged = [r for m, r in by_measure.items() if m.startswith("faithfulness") and "self-judged" in m]
    assert self_judged, "faithfulness graded by the sieve's own verifier must be labelled self-judged"
    selective = next(r for m, r in by_measure.items() if m.startswith("selective accuracy"))
    assert "without a confidence" in " ".join(selective)


@pytest.mark.parametrize("page", ["results.md", *report.RESULT_PAGES])
def test_every_relative_link_of_the_results_pages_resolves(page: str) -> None:
    source = DOCS / page
    text = source.read_text(encoding="utf-8")
    for link in (t for _x, t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)):
        _check_link(link, source)


def test_summary_links_every_results_page() -> None:
    text = SUMMARY.read_text(encoding="utf-8")
    linked = {_resolve(t, SUMMARY)[0] for _x, t in LINK.findall(text)}
    for page in sorted((DOCS / "results").glob("*.md")):
        assert page.resolve() in linked, f"docs/results.md does not link {page.relative_to(ROOT)}"


def test_readme_headline_rows_are_rows_of_the_summary() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    header, _rows, raw = _table_after(readme, TABLE_MARK)
    summary_header, _s, summary_raw = _table_after(SUMMARY.read_text(encoding="utf-8"), TABLE_MARK)
    assert header == summary_header
    for line in raw:
        as_in_summary = line.replace("](docs/", "](")
        assert as_in_summary in summary_raw, f"README row differs from docs/results.md: {line[:80]}"
        for _text, link in LINK.findall(line):
            _check_link(link, ROOT / "README.md")
    assert "](docs/results.md)" in readme


# -- the pages and the nav ---------------------------------------------------------------------


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [p for item in node for p in _nav_pages(item)]
    if isinstance(node, dict):
        return [p for value in node.values() for p in _nav_pages(value)]
    return []


def test_every_results_page_is_registered_and_in_the_nav() -> None:
    nav = set(_nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]))
    on_disk = {f"results/{p.name}" for p in (DOCS / "results").glob("*.md")}
    assert on_disk, "no page under docs/results/"
    assert on_disk == set(report.RESULT_PAGES), "docs/results/ and _report.RESULT_PAGES list different pages"
    missing = sorted(p for p in (*on_disk, "results.md", "benchmarks.md") if p not in nav)
    assert not missing, f"pages missing from the mkdocs nav: {missing}"


def test_each_generated_section_is_kept_once() -> None:
    seen: dict[str, str] = {}
    for page in report.PAGES:
        text = (DOCS / page).read_text(encoding="utf-8")
        begins = re.findall(r"<!-- BEGIN (\S+) -->", text)
        ends = re.findall(r"<!-- END (\S+) -->", text)
        assert begins == ends, f"docs/{page}: BEGIN and END markers do not pair up"
        for name in begins:
            assert name not in seen, f"section {name} is on docs/{seen[name]} and docs/{page}"
            seen[name] = page
    assert len(seen) >= 30


def _write_section_targets() -> list[tuple[str, int, object]]:
    found: list[tuple[str, int, object]] = []
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        if script.name == "_report.py":
            continue
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            first = node.args[0]
            if name in ("write_section", "_write_section") and isinstance(first, ast.Constant):
                found.append((script.name, node.lineno, first.value))
    return found


def test_benchmark_scripts_write_only_registered_pages() -> None:
    targets = _write_section_targets()
    assert len(targets) >= 30
    wrong = [f"{script}:{line} -> {doc!r}" for script, line, doc in targets if doc not in report.PAGES]
    assert not wrong, f"scripts write to pages _report does not know: {wrong}"


# -- write_section -----------------------------------------------------------------------------


def test_write_section_writes_its_own_section_of_a_results_page(tmp_path: Path) -> None:
    page = "results/decoding.md"
    report.write_section(page, "alpha", "Alpha", "first body ![plot](img/a.png)", docs_dir=tmp_path)
    report.write_section(page, "beta", "Beta", "beta body [site](https://example.org/x)", docs_dir=tmp_path)
    path = report.write_section(page, "alpha", "Alpha again", "second body", docs_dir=tmp_path)
    assert path == tmp_path / page
    text = path.read_text(encoding="utf-8")
    assert text.startswith(f"# {report.RESULT_PAGES[page].title}\n")
    assert text.count("<!-- BEGIN alpha -->") == 1 and "first body" not in text and "second body" in text
    assert "## Alpha again\n\nCommand: `" in text
    assert "beta body [site](https://example.org/x)" in text
    assert text.index("<!-- BEGIN alpha -->") < text.index("<!-- BEGIN beta -->"), "a rewrite keeps its place"
    report.write_section(page, "gamma", "Gamma", "![plot](img/a.png) [up](../results.md)", docs_dir=tmp_path)
    text = path.read_text(encoding="utf-8")
    assert "![plot](../img/a.png)" in text and "[up](../results.md)" in text
    report.write_section("benchmarks.md", "delta", "Delta", "![plot](img/a.png)", docs_dir=tmp_path)
    assert "![plot](img/a.png)" in (tmp_path / "benchmarks.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(("doc", "says"), [("results.md", "hand-written"), ("results/nope.md", "not a report page")])
def test_write_section_refuses_unknown_pages(tmp_path: Path, doc: str, says: str) -> None:
    with pytest.raises(report.ReportPageError, match=says) as info:
        report.write_section(doc, "alpha", "Alpha", "body", docs_dir=tmp_path)
    assert "results/sieve-vs-plain-rag.md" in str(info.value), "the error lists the pages to use instead"
    assert not list(tmp_path.rglob("*.md")), "nothing is written to an unknown page"


def test_write_section_refuses_a_section_kept_on_another_page(tmp_path: Path) -> None:
    report.write_section("results/verification.md", "alpha", "Alpha", "body", docs_dir=tmp_path)
    with pytest.raises(report.ReportPageError, match=r"kept on docs/results/verification\.md"):
        report.write_section("results/decoding.md", "alpha", "Alpha", "body", docs_dir=tmp_path)
    assert not (tmp_path / "results" / "decoding.md").exists()


def test_slugs_match_python_markdown() -> None:
    markdown = pytest.importorskip("markdown")
    for page in ("results.md", *report.RESULT_PAGES):
        text = (DOCS / page).read_text(encoding="utf-8")
        md = markdown.Markdown(extensions=["toc", "tables"])
        md.convert(text)

        def ids(tokens: list[dict[str, object]]) -> list[str]:
            out: list[str] = []
            for token in tokens:
                out.append(str(token["id"]))
                out.extend(ids(token["children"]))  # type: ignore[arg-type]
            return out

        assert ids(md.toc_tokens) == [slug for _lv, slug, _n in _headings(text)], page
