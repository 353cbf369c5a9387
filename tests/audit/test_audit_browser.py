"""The audit's HTML report in a real headless browser (Debian's chromium driven by Playwright),
served with the Content-Security-Policy the service gives its pages: it renders with no console
error (a refused inline style is one), its style applies, each member links to its document, and
text from the corpus stays text."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tests.serve.test_serve_browser import _chromium, _watch

from ragsieve.audit import AuditReport, ConflictValues, Finding, Member
from ragsieve.audit.html import render_html
from ragsieve.serve.guard import page_csp


def _report() -> AuditReport:
    def member(doc: str, sentence: str, host: str) -> Member:
        return Member(doc, doc + ":0", f"news/{doc}.md", host, sentence, f"https://{host}/{doc}")

    hostile = 'Opened in 1947 <script>alert("x")</script> <img src=x onerror="alert(1)"> <b style="color:red">b</b>'
    findings = (
        Finding("conflict", 0.91, "high", (member("bridge-a", "The Kessel Bridge opened in 1931.", "rivers.example"),
                                            member("bridge-b", hostile, "bridges.example")),
                "bridge-a says 1931, bridge-b says 1947 (When Kessel Bridge opened?)",
                values=ConflictValues("When Kessel Bridge opened?", "date", "1931", "1947", 0.93, 0.91),
                details={"decision": "conflict"}),
        Finding("mirror", 0.97, "high", (member("lighthouse", "The Harwick lighthouse ...", "coast.example"),
                                          member("lighthouse-copy", "The Harwick lighthouse ...", "free.example")),
                "2 documents share 97% of their word 3-shingles", exclude=("lighthouse-copy",)),
        Finding("coordinated-voice", 0.93, "high",
                tuple(member(f"dam-{i}", "The Morrow dam was finished in 1874.", f"site{i}.example") for i in range(4)),
                "4 passages from 4 documents form one tight cluster", exclude=tuple(f"dam-{i}" for i in range(4))),
        Finding("harmful-source", 1.0, "high", (member("ad", "Buy now.", "ads.example"),),
                "source ads.example has importance weight 0.000", exclude=("ad",)),
    )
    return AuditReport("my-index", "20260101T000000000000-abcdef", 40, 12, findings,
                       ("mirror", "coordinated-voice", "conflict", "harmful-source"), {"mirror": 3}, 1.5,
                       ("a note <with> markup",))


@contextmanager
def _serve(html: str) -> Iterator[str]:
    body = html.encode("utf-8")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server name
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Security-Policy", page_csp(html))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_the_html_report_renders_under_the_service_csp_without_console_errors() -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    executable = _chromium()
    html = render_html(_report())
    with _serve(html) as url, playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            errors = _watch(page)
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(url)
            page.wait_for_load_state("load")
            assert errors == [] and dialogs == []
            assert page.locator(".finding").count() == 4 and page.locator(".finding.high").count() == 4
            assert [page.locator("h2").nth(i).inner_text() for i in range(4)] == [
                "Mirrored documents (1)", "Coordinated voices (1)", "Conflicting documents (1)",
                "Sources that hurt (1)"]
            # the inline style block applied (the CSP allows it by hash): members side by side in a grid
            side = page.locator(".side").first
            assert side.evaluate("e => getComputedStyle(e).display") == "grid"
            boxes = [page.locator(".side").nth(1).locator(".member").nth(i).bounding_box() for i in range(2)]
            assert boxes[0]["y"] == boxes[1]["y"] and boxes[0]["x"] < boxes[1]["x"]
            links = page.locator(".member a")
            assert links.count() == 9 and links.first.get_attribute("href", timeout=1000).startswith("https://")
            # corpus text is text: the script, the image and the style attribute are shown, never run
            text = page.inner_text("body")
            assert '<script>alert("x")</script>' in text and 'style="color:red"' in text
            assert page.locator(".member script, .member img, .member b").count() == 0
            assert "1931 vs 1947" in text and "a note <with> markup" in text
        finally:
            browser.close()
