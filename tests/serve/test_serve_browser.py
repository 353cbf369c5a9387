"""The page in a real headless browser (Debian's chromium driven by Playwright): ask, wait for
the answer, see kept and dropped evidence; the screenshot is the one docs/ embeds."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from tests.serve.fakes import ServerThread, fake_engine, write_index_dir

from ragsieve.serve.app import ServeSettings, create_app

ROOT = Path(__file__).resolve().parents[2]
DOCS_SCREENSHOT = ROOT / "docs" / "img" / "trace-page.png"
DOCS_SIEVE_SCREENSHOT = ROOT / "docs" / "img" / "trace-page-sieve.png"
# A real answer of the sieve pipeline on the demo index (`ragsieve ask --json`, bundled models).
SIEVE_ANSWER = ROOT / "tests" / "fixtures" / "serve" / "sieve-answer.json"
# Screenshots the tests take, kept for a person to look at (a test artefact, outside the repository).
ARTEFACTS = Path(os.environ.get("RAGSIEVE_TEST_ARTEFACTS", "/tmp/ragsieve-test-artefacts"))
ARTEFACTS.mkdir(parents=True, exist_ok=True)


def _watch(page: object) -> list[str]:
    """Uncaught errors and console errors (a Content-Security-Policy violation is one) of ``page``."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))  # type: ignore[attr-defined]
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)  # type: ignore[attr-defined]
    return errors


def _bar_widths(page: object) -> list[float]:
    bars = page.locator("#timings .bar")  # type: ignore[attr-defined]
    return [bars.nth(i).bounding_box()["width"] for i in range(bars.count())]


def _chromium() -> str:
    for candidate in ("/usr/bin/chromium", "/usr/lib/chromium/chromium", shutil.which("chromium") or ""):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.skip("Debian's chromium is not installed: `bash scripts/install-browser.sh` installs it (as root)")


@pytest.mark.slow
def test_page_shows_answer_with_kept_and_dropped_evidence(tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    executable = _chromium()
    app = create_app(fake_engine(write_index_dir(tmp_path / "idx")), ServeSettings())
    with ServerThread(app) as server, playwright.sync_playwright() as p:
        # --no-sandbox: CI containers run as root, where chromium's sandbox refuses to start.
        browser = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            errors = _watch(page)
            page.goto(server.url + "/")
            page.fill("#question", "How do quantum dots emit light of a colour?")
            page.click("#ask-button")
            page.wait_for_selector("body[data-rendered=true]", timeout=20_000)
            answer = page.inner_text("#answer")
            assert "Quantum dots are semiconductor nanocrystals" in answer
            assert page.locator(".claim.supported").count() == 1 and page.locator(".claim.unsupported").count() == 1
            assert page.locator("tr[data-status=selected]").count() >= 1
            dropped = page.locator("tr[data-status=dropped]")
            assert dropped.count() >= 1
            table = page.inner_text("#candidates")
            assert "judge: no word in common with the question" in table
            # Evidence the selection did not need is "not needed", not a red "dropped".
            assert page.locator("tr[data-status=not-needed]").count() >= 1
            assert "not needed to cover the question" in table and "by select" not in table
            assert page.locator("#candidates .badge.not-needed").count() >= 1
            assert page.locator("#candidates .badge.kept-verdict").count() >= 1
            widths = _bar_widths(page)
            # Each bar as long as its stage took: the page's CSP refuses inline style attributes,
            # so the widths are set through the CSSOM; a refused style would leave every bar full.
            assert len(widths) >= 2 and len({round(w) for w in widths}) >= 2 and min(widths) < max(widths) / 2, widths
            assert page.locator("details.event[data-stage=novel-stage]").count() == 1  # unknown stage shown
            # The route in words, the statuses' legend in the presenter's order.
            assert "{" not in page.inner_text("#route") and "[" not in page.inner_text("#route")
            legend = [page.locator("#candidates dl.legend dt").nth(i).inner_text()
                      for i in range(page.locator("#candidates dl.legend dt").count())]
            from ragsieve.present import STATUSES

            assert legend == list(STATUSES)
            # The evidence holding "</script><script>window.pwned=1..." was shown as text, not run.
            assert page.evaluate("typeof window.pwned") == "undefined"
            page.click("#ask-button")  # a second question re-renders in place
            page.wait_for_selector("body[data-rendered=true]", timeout=20_000)
            assert errors == []
            shot = ARTEFACTS / "trace-page.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
            if os.environ.get("RAGSIEVE_UPDATE_SCREENSHOT"):
                shutil.copyfile(shot, DOCS_SCREENSHOT)
        finally:
            browser.close()


@pytest.mark.slow
def test_trace_view_page_renders_a_real_sieve_trace(tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    executable = _chromium()
    from ragsieve.cli import main

    out = tmp_path / "trace.html"
    main(["trace", "view", str(SIEVE_ANSWER), "-o", str(out)])
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1300})
            errors = _watch(page)
            page.goto(out.resolve().as_uri())
            page.wait_for_selector("body[data-rendered=true]", timeout=20_000)
            assert page.locator("#ask-form").is_hidden()  # a static view: no question box
            assert page.locator("tr[data-status=selected]").count() == 1
            # All nine left out by the selection, none removed by a check: "not needed" (or flagged
            # by the judge), never a red "dropped".
            assert page.locator("tr[data-status=dropped]").count() == 0
            not_needed = page.locator("tr[data-status=not-needed]").count()
            assert not_needed >= 1 and not_needed + page.locator("tr[data-status=flagged]").count() == 9
            assert page.locator("#candidates .badge.flagged").count() >= 1
            assert page.locator(".claim.supported").count() == 1
            assert "together the top 2 hold" in page.inner_text("#route")
            widths = _bar_widths(page)
            assert len(widths) == 10 and len({round(w) for w in widths}) >= 3 and errors == []
            shot = ARTEFACTS / "trace-page-sieve.png"
            page.screenshot(path=str(shot))
            if os.environ.get("RAGSIEVE_UPDATE_SCREENSHOT"):
                shutil.copyfile(shot, DOCS_SIEVE_SCREENSHOT)
        finally:
            browser.close()


def _mixed_corpus(root: Path) -> Path:
    """A folder of a real multi-page PDF, an HTML page and a Markdown file."""
    from tests.ingest.pdf_builder import multipage_pdf

    corpus = root / "corpus"
    (corpus / "manuals").mkdir(parents=True)
    (corpus / "web").mkdir()
    (corpus / "notes").mkdir()
    pages = [
        ["Pump manual", "Contents and safety notes for the water pump."],
        ["Installation", "Bolt the pump to a level concrete base before connecting the pipes."],
        ["Maintenance", "Replace the impeller seal of the pump every 2000 operating hours."],
    ]
    (corpus / "manuals" / "pump.pdf").write_bytes(multipage_pdf(pages))
    (corpus / "web" / "valves.html").write_text(
        "<html><head><title>Valves</title></head><body><nav>Home | About</nav><main>"
        "<h1>Valves</h1><h2>Ball valves</h2><p>A ball valve shuts water off with a quarter turn.</p>"
        "</main></body></html>",
        encoding="utf-8",
    )
    (corpus / "notes" / "seals.md").write_text(
        "# Seals\n\n## Impeller seal\n\nA worn impeller seal of a pump leaks water at the shaft.\n", encoding="utf-8"
    )
    return corpus


@pytest.mark.slow
def test_citations_link_to_the_cited_passage_with_file_and_page(tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    executable = _chromium()
    from tests.chat_server import serve_chat

    from ragsieve.config import PipelineConfig
    from ragsieve.index import Index
    from ragsieve.serve.engine import Engine

    corpus = _mixed_corpus(tmp_path)
    index_dir = tmp_path / "idx"
    Index.build(corpus, index_dir, config=PipelineConfig(index_dir=str(index_dir)))
    with serve_chat() as chat:
        cfg = PipelineConfig.model_validate({
            "index_dir": str(index_dir), "pipeline": "plain",
            "llm": {"backend": "openai", "base_url": chat.url, "model": "fake"},
            "retrieval": {"k": 3},
        })
        app = create_app(Engine(cfg), ServeSettings())
        with ServerThread(app) as server, playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                errors = _watch(page)
                page.goto(server.url + "/")
                page.fill("#question", "How often is the impeller seal of the pump replaced?")
                page.click("#ask-button")
                page.wait_for_selector("body[data-rendered=true]", timeout=60_000)
                links = page.locator("#answer .sources a.source-link")
                texts = [links.nth(i).inner_text() for i in range(links.count())]
                assert texts, page.inner_text("#answer")
                # Every cited source names its file and page (PDF) or heading (HTML, Markdown).
                for text in texts:
                    cited_as = r"manuals/pump\.pdf#page=\d+|web/valves\.html#.+|notes/seals\.md#.+"
                    assert re.fullmatch(cited_as, text), text
                pdf_link = page.locator("#answer .sources a.source-link", has_text="manuals/pump.pdf#page=")
                assert pdf_link.count() >= 1, texts
                cited_page = int(pdf_link.first.inner_text().rsplit("=", 1)[1])
                pdf_link.first.click()
                page.wait_for_selector("#passage[data-loaded=true]", timeout=20_000)
                panel = page.inner_text("#passage")
                assert "manuals/pump.pdf" in page.inner_text("#passage .loc-file")
                assert page.inner_text("#passage .loc-page") == f"page {cited_page}"
                expected = "impeller seal" if cited_page == 3 else ("concrete base" if cited_page == 2 else "safety")
                assert expected in page.inner_text("#passage div.passage-text"), panel
                assert "{" not in panel  # a document, not JSON
                # The file link opens the indexed file itself at that page.
                href = page.get_attribute("#passage a.open-source", "href") or ""
                assert href == (corpus / "manuals" / "pump.pdf").resolve().as_uri() + f"#page={cited_page}"
                # A Markdown or HTML source opens at its section.
                section = page.locator("#candidates a.source-link", has_text=".md#")
                if section.count() == 0:
                    section = page.locator("#candidates a.source-link", has_text=".html#")
                assert section.count() >= 1
                section.first.click()
                page.wait_for_selector("#passage[data-loaded=true]", timeout=20_000)
                assert page.locator("#passage .loc-heading").count() == 1
                assert page.inner_text("#passage .loc-file").endswith((".md", ".html"))
                # A citation opened in its own tab reads as a document too: title, citation, page,
                # the text with the cited sentence marked; never the raw JSON of /v1/passages.
                href = pdf_link.first.get_attribute("href") or ""
                assert href.startswith("?passage=") and "/v1/passages" not in href
                doc = browser.new_page(viewport={"width": 1000, "height": 700})
                doc_errors = _watch(doc)
                doc.goto(server.url + "/" + href)
                doc.wait_for_selector("#passage[data-loaded=true]", timeout=20_000)
                assert doc.inner_text("#passage h2.passage-title")
                assert doc.inner_text("#passage .loc-citation") == f"cited as manuals/pump.pdf#page={cited_page}"
                assert doc.inner_text("#passage .loc-page") == f"page {cited_page}"
                marked = doc.locator("#passage mark.cited-span")
                assert marked.count() == 1 and expected in marked.inner_text()
                doc.screenshot(path=str(ARTEFACTS / "passage.png"))
                assert errors == [] and doc_errors == []
            finally:
                browser.close()


def _answer_with_value_failures_and_a_conflict() -> dict:
    hit = {"id": "manual.pdf:3", "rank": 1, "score": 0.033, "scores": {"fused": 0.033, "dense": 0.71},
           "text": "Replace the impeller seal every 2000 operating hours.", "source": "manual.pdf",
           "path": "manual.pdf", "page": 6, "citation": "manual.pdf:6", "title": ""}
    other = {**hit, "id": "notes.md:0", "rank": 2, "score": 0.0165, "scores": {"fused": 0.0165, "dense": 0.52},
             "text": "Seals are replaced every 3000 hours.", "source": "notes.md", "path": "notes.md",
             "page": None, "heading": "Seals", "citation": "notes.md#Seals"}
    return {
        "question": "How often is the seal replaced?", "answer": "Every 5000 hours [1].", "abstained": False,
        "cited_ids": ["manual.pdf:3"], "evidence": [hit],
        "claims": [{"sentence": "Every 5000 hours [1].", "supported": False, "score": 0.2,
                    "cited_ids": ["manual.pdf:3"], "values_checked": 1,
                    "value_failures": [{"kind": "number", "text": "5000 hours", "norm": "5000 h", "span": [6, 16],
                                        "found": False, "evidence_says": {"kind": "number", "text": "2000 hours",
                                                                          "norm": "2000 h", "span": [32, 42]}}]}],
        "trace": {
            "query": "How often is the seal replaced?",
            "events": [
                {"stage": "retrieve", "candidates": [hit, other]},
                {"stage": "conflict", "decision": "abstain", "message": "The sources disagree: 2000 hours (1) "
                 "against 3000 hours (1).", "groups": [
                     {"answer": "2000 hours", "independent_sources": 1, "weight": 0.8,
                      "sources": [{"source": "manual.pdf", "chunk_ids": ["manual.pdf:3"], "positions": [1]}]},
                     {"answer": "3000 hours", "count": 1, "weight": 0.6, "sources": ["notes.md"]}]},
            ],
            "decisions": [{"check": "select", "id": "notes.md:0", "verdict": "dropped",
                           "reason": "not needed for the minimal cover"},
                          {"check": "select", "id": "manual.pdf:3", "verdict": "kept", "reason": "selected"}],
            "timings_ms": {"retrieve": 3.0},
        },
    }


@pytest.mark.slow
def test_page_shows_value_failures_conflicts_and_scaled_scores(tmp_path: Path) -> None:
    import json

    playwright = pytest.importorskip("playwright.sync_api")
    executable = _chromium()
    from ragsieve.cli import main

    trace = tmp_path / "answer.json"
    trace.write_text(json.dumps(_answer_with_value_failures_and_a_conflict()), encoding="utf-8")
    out = tmp_path / "page.html"
    main(["trace", "view", str(trace), "-o", str(out)])
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            errors = _watch(page)
            page.goto(out.resolve().as_uri())
            page.wait_for_selector("body[data-rendered=true]", timeout=20_000)
            values = page.inner_text("#values")
            assert "1 value" in values and "1 not stated by the evidence" in values
            assert "5000 hours" in values and "2000 hours" in values
            conflicts = page.inner_text("#conflicts")
            assert "The sources disagree" in conflicts and "decision: abstain" in conflicts
            assert page.locator("#conflicts tr.conflict-group").count() == 2 and "notes.md" in conflicts
            # The selection's leftover is "not needed" (neutral), scores say their scale.
            assert page.locator("tr[data-status=not-needed]").count() == 1
            assert page.locator("tr[data-status=dropped]").count() == 0
            table = page.inner_text("#candidates")
            assert "fused (0-1)" in table and "1.00" in table and "0.50" in table
            # A saved page has no service: the source links go to the evidence row.
            assert page.get_attribute("#answer .sources a.source-link", "href") == "#cand-manual.pdf:3"
            assert page.inner_text("#answer .sources a.source-link") == "manual.pdf#page=6"
            assert errors == []
        finally:
            browser.close()
