"""Checks on the bundled demo data: counts, formats, titles, and that every question is
answerable from the documents it cites."""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from ragsieve.demo import DEMO_DOMAINS, demo_corpus_dir, demo_questions, demo_writing_requests

CORPUS = demo_corpus_dir()
FILES = sorted(p for p in CORPUS.rglob("*") if p.is_file())
NAME_RE = re.compile(r"^\d{3}-[a-z0-9]+(?:-[a-z0-9]+)*\.(md|txt|html|jsonl)$")
GLOSSARY_KEYS = {"id", "title", "text", "source"}


def _words(text: str) -> int:
    return len(text.split())


def _html_body(raw: str) -> str:
    body = re.sub(r"<head>.*?</head>", " ", raw, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def _glossary(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _searchable_text(path: Path) -> str:
    raw = path.read_text(encoding="utf-8")
    return html.unescape(raw) if path.suffix == ".html" else raw


def test_domains_are_the_top_level_folders() -> None:
    assert sorted(p.name for p in CORPUS.iterdir() if p.is_dir()) == sorted(DEMO_DOMAINS)
    assert all(p.parent.parent == CORPUS for p in FILES), "no nested folders or stray files"


@pytest.mark.parametrize("domain", DEMO_DOMAINS)
def test_counts_per_domain(domain: str) -> None:
    files = [p for p in FILES if p.parent.name == domain]
    by_ext = Counter(p.suffix for p in files)
    assert 60 <= len(files) <= 80
    assert by_ext[".jsonl"] == 1
    assert by_ext[".html"] >= 1
    assert by_ext[".txt"] >= 1
    assert by_ext[".md"] >= 50
    assert len(_glossary(next(p for p in files if p.suffix == ".jsonl"))) == 5


def test_total_counts_and_formats() -> None:
    assert 180 <= len(FILES) <= 240
    by_ext = Counter(p.suffix for p in FILES)
    assert 8 <= by_ext[".txt"] <= 12
    assert by_ext[".html"] >= 3


def test_file_names() -> None:
    bad = [p.name for p in FILES if not NAME_RE.match(p.name)]
    assert not bad
    for domain in DEMO_DOMAINS:
        numbers = sorted(int(p.name[:3]) for p in FILES if p.parent.name == domain)
        assert numbers == list(range(1, len(numbers) + 1)), f"{domain}: numbering has gaps or duplicates"


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_document_is_utf8_with_title_and_body(path: Path) -> None:
    raw = path.read_bytes()
    assert raw.strip(), "empty file"
    text = raw.decode("utf-8")  # raises on non-UTF-8
    if path.suffix == ".md":
        first, _, body = text.partition("\n")
        assert re.match(r"^# \S", first), "first line must be '# Title'"
        assert 60 <= _words(body) <= 160
    elif path.suffix == ".txt":
        first, _, body = text.partition("\n")
        assert first.strip() and not first.startswith("#")
        assert 60 <= _words(body) <= 160
    elif path.suffix == ".html":
        match = re.search(r"<title>([^<]+)</title>", text)
        assert match and match.group(1).strip()
        assert 60 <= _words(_html_body(text)) - _words(match.group(1)) <= 160
    else:
        records = _glossary(path)
        for rec in records:
            assert set(rec) == GLOSSARY_KEYS
            assert all(isinstance(v, str) and v.strip() for v in rec.values())
            assert rec["id"].startswith(f"{path.parent.name}-glossary-")


def test_titles_unique_within_domain() -> None:
    for domain in DEMO_DOMAINS:
        titles = []
        for p in FILES:
            if p.parent.name != domain:
                continue
            text = p.read_text(encoding="utf-8")
            if p.suffix == ".jsonl":
                titles += [r["title"] for r in _glossary(p)]
            elif p.suffix == ".html":
                titles.append(re.search(r"<title>([^<]+)</title>", text).group(1))  # type: ignore[union-attr]
            else:
                titles.append(text.partition("\n")[0].lstrip("# ").strip())
        dupes = [t for t, n in Counter(titles).items() if n > 1]
        assert not dupes, f"{domain}: duplicate titles {dupes}"


def test_glossary_ids_unique() -> None:
    ids = [r["id"] for p in FILES if p.suffix == ".jsonl" for r in _glossary(p)]
    assert len(ids) == len(set(ids)) == 15


QUESTIONS = demo_questions()


def test_question_set_shape() -> None:
    assert len(QUESTIONS) == 40
    ids = [q["id"] for q in QUESTIONS]
    assert len(set(ids)) == len(ids)
    keys = {"id", "question", "domain", "answer", "answer_aliases", "doc_ids"}
    for q in QUESTIONS:
        assert set(q) == keys
        assert q["question"].strip().endswith("?")
        assert q["answer"].strip() and q["answer_aliases"] and q["doc_ids"]
    cross = [q for q in QUESTIONS if "+" in q["domain"]]
    assert len(cross) == 6
    single = Counter(q["domain"] for q in QUESTIONS if "+" not in q["domain"])
    assert set(single) == set(DEMO_DOMAINS)
    assert min(single.values()) >= 10


@pytest.mark.parametrize("q", QUESTIONS, ids=lambda q: q["id"])
def test_question_is_supported_by_its_documents(q: dict) -> None:
    domains = q["domain"].split("+")
    assert all(d in DEMO_DOMAINS for d in domains)
    assert len(domains) == len(set(domains))
    paths = [CORPUS / d for d in q["doc_ids"]]
    missing = [d for d in q["doc_ids"] if not (CORPUS / d).is_file()]
    assert not missing, f"doc_ids do not exist: {missing}"
    assert {p.parent.name for p in paths} == set(domains), "supporting docs must cover exactly its domains"
    texts = [_searchable_text(p).lower() for p in paths]
    for alias in q["answer_aliases"]:
        assert any(alias.lower() in t for t in texts), f"alias {alias!r} not in any supporting document"
        assert alias.lower() in q["answer"].lower(), f"alias {alias!r} not in the reference answer"


UNANSWERABLE = [q for q in demo_questions(include_unanswerable=True) if q.get("answerable") is False]
# The term each unanswerable question hinges on: no corpus file may mention it.
HINGES = {
    "u01": "cyclotron", "u02": "technetium", "u03": "chandrasekhar", "u04": "nikola", "u05": "saturn",
    "u06": "aspirin", "u07": "caffeine", "u08": "bismuth", "u09": "insulin", "u10": "spider",
    "u11": "grey goo", "u12": "tardigrade",
}


def test_unanswerable_rows_are_marked_and_separate() -> None:
    assert len(UNANSWERABLE) >= 10
    assert len(demo_questions(include_unanswerable=True)) == len(QUESTIONS) + len(UNANSWERABLE)
    assert all(q.get("answerable", True) for q in QUESTIONS)
    ids = [q["id"] for q in demo_questions(include_unanswerable=True)]
    assert len(set(ids)) == len(ids)
    for q in UNANSWERABLE:
        assert q["answer"] == "" and q["answer_aliases"] == [] and q["doc_ids"] == []
        assert q["question"].strip().endswith("?") and q["domain"] in DEMO_DOMAINS


def test_unanswerable_questions_are_not_covered_by_the_corpus() -> None:
    corpus = " ".join(p.read_text(encoding="utf-8").lower() for p in FILES)
    assert {q["id"] for q in UNANSWERABLE} == set(HINGES)
    for q in UNANSWERABLE:
        assert HINGES[q["id"]] in q["question"].lower()
        assert HINGES[q["id"]] not in corpus, f"{q['id']}: the corpus mentions {HINGES[q['id']]!r}"


def test_writing_requests() -> None:
    reqs = demo_writing_requests()
    assert len(reqs) == 20
    assert len({r["id"] for r in reqs}) == 20
    for r in reqs:
        assert set(r) == {"id", "request", "domain"}
        assert r["request"].strip()
        assert all(d in DEMO_DOMAINS for d in r["domain"].split("+"))
    assert {r["domain"] for r in reqs} >= set(DEMO_DOMAINS)
