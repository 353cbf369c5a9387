"""The page in a real headless browser (Debian's chromium driven by Playwright): ask, wait for
the answer, see kept and dropped evidence; the screenshot is the one docs/ embeds."""

from __future__ import annotations

import os
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


def _chromium() -> str:
    for candidate in ("/usr/bin/chromium", "/usr/lib/chromium/chromium", shutil.which("chromium") or ""):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.skip("Debian's chromium is not installed (scripts/install.sh installs it when run as root)")


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
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
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
            assert "by judge: no word in common with the question" in table
            assert "by select: not needed to cover the question" in table
            assert page.locator("#candidates .badge.kept-verdict").count() >= 1
            assert page.locator("#timings .bar").count() >= 2
            assert page.locator("details.event[data-stage=novel-stage]").count() == 1  # unknown stage shown
            # The evidence holding "</script><script>window.pwned=1..." was shown as text, not run.
            assert page.evaluate("typeof window.pwned") == "undefined"
            page.click("#ask-button")  # a second question re-renders in place
            page.wait_for_selector("body[data-rendered=true]", timeout=20_000)
            assert errors == []
            shot = tmp_path / "trace-page.png"
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
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(out.resolve().as_uri())
            page.wait_for_selector("body[data-rendered=true]", timeout=20_000)
            assert page.locator("#ask-form").is_hidden()  # a static view: no question box
            assert page.locator("tr[data-status=selected]").count() == 1
            assert page.locator("tr[data-status=dropped]").count() == 9
            assert page.locator("#candidates .badge.flagged").count() >= 1
            assert page.locator(".claim.supported").count() == 1
            assert "top 2 domains" in page.inner_text("#route")
            stages = page.locator("#timings .bar").count()
            assert stages == 10 and errors == []
            shot = tmp_path / "sieve.png"
            page.screenshot(path=str(shot))
            if os.environ.get("RAGSIEVE_UPDATE_SCREENSHOT"):
                shutil.copyfile(shot, DOCS_SIEVE_SCREENSHOT)
        finally:
            browser.close()
