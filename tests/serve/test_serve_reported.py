"""Defects a new user met with the service: the port range, the /health probe path, and the
page's conflict box when there is no conflict."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.serve.fakes import fake_engine, write_index_dir

from ragsieve.cli import main
from ragsieve.serve.app import ServeSettings, create_app

PAGE_JS = Path(__file__).resolve().parents[2] / "src" / "ragsieve" / "serve" / "static" / "page.js"


@pytest.mark.parametrize("port", ["99999", "0", "-1", "65536"])
def test_a_port_outside_1_to_65535_is_refused_before_anything_starts(
    port: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--index", str(tmp_path / "nothing"), "--port", port])
    shown = " ".join(capsys.readouterr().err.split())
    assert exc.value.code == 2
    assert "--port" in shown and f"{port} is not a TCP port" in shown and "from 1 to 65535" in shown
    assert "no index" not in shown


def test_health_answers_on_both_paths_without_the_key(tmp_path: Path) -> None:
    app = create_app(fake_engine(write_index_dir(tmp_path / "idx")), ServeSettings(api_key="secret"))
    with TestClient(app) as client:
        # the index opens in the background at start-up: compare the two paths once it is open
        deadline = time.monotonic() + 30
        while client.get("/v1/health").json().get("index_generation") is None and time.monotonic() < deadline:
            time.sleep(0.05)
        versioned, alias = client.get("/v1/health"), client.get("/health")
    assert versioned.status_code == alias.status_code == 200
    assert alias.json().keys() == versioned.json().keys()
    assert alias.json()["index_generation"] == versioned.json()["index_generation"]


def _conflict_record(conflict: bool | None, decision: str, message: str, groups: int) -> dict:
    record = {"stage": "conflict", "decision": decision, "message": message,
              "groups": [{"answer": f"{1931 + i}", "independent_sources": 1} for i in range(groups)]}
    return record if conflict is None else {**record, "conflict": conflict}


def _shown(view: dict, data: dict) -> list[dict]:
    """The page's own choice of conflicts to show, run by node on page.js."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = (
        "const fs = require('fs'); const vm = require('vm');"
        "const ctx = {window: {}, document: {addEventListener() {}}, console};"
        f"vm.runInNewContext(fs.readFileSync({json.dumps(str(PAGE_JS))}, 'utf8'), ctx);"
        "const [v, d] = JSON.parse(fs.readFileSync(0, 'utf8'));"
        "process.stdout.write(JSON.stringify(ctx.window.ragsieveShownConflicts(v, d)));"
    )
    out = subprocess.run([node, "-e", script], input=json.dumps([view, data]), capture_output=True, text=True,
                         timeout=60, check=True)
    return json.loads(out.stdout)


def test_the_page_shows_the_conflict_box_only_for_a_conflict() -> None:
    agree = _conflict_record(False, "consistent", "The sources agree: 1931 (2 sources).", 1)
    none = _conflict_record(False, "no-answer", "No passage states an answer on its own.", 0)
    clash = _conflict_record(True, "both", "The sources disagree: 1931 (1) against 1932 (1).", 2)
    old = _conflict_record(None, "abstain", "The sources disagree.", 2)  # a trace without the verdict
    for records, shown in (([agree], []), ([none], []), ([clash], [clash]), ([none, clash], [clash]),
                           ([old], [old])):
        view = {"conflicts": [{k: r[k] for k in ("message", "decision", "groups")} for r in records]}
        got = _shown(view, {"trace": {"events": [{"stage": "retrieve"}, *records]}})
        assert [g["message"] for g in got] == [r["message"] for r in shown]


def test_a_page_without_a_conflict_has_no_conflict_section(tmp_path: Path) -> None:
    """The same in a browser, on the page `ragsieve trace view` writes."""
    playwright = pytest.importorskip("playwright.sync_api")
    executable = next((p for p in ("/usr/bin/chromium", "/usr/lib/chromium/chromium") if Path(p).exists()), None)
    if executable is None:
        pytest.skip("Debian's chromium is not installed")
    answer = {"question": "When did the bridge open?", "answer": "1931 [1].", "evidence": [], "cited_ids": [],
              "trace": {"query": "When did the bridge open?", "events": [
                  _conflict_record(False, "consistent", "The sources agree: 1931 (2 sources).", 1)]}}
    trace, out = tmp_path / "answer.json", tmp_path / "page.html"
    trace.write_text(json.dumps(answer), encoding="utf-8")
    main(["trace", "view", str(trace), "-o", str(out)])
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(out.resolve().as_uri())
            page.wait_for_selector("body[data-rendered=true]", timeout=20_000)
            assert page.locator("#conflicts").count() == 0
            assert page.locator(".conflict-message").count() == 0
        finally:
            browser.close()


def test_the_view_lists_only_checks_that_found_a_conflict() -> None:
    """The terminal, the service's JSON and the page read one view: agreeing sources and "no passage
    states an answer" are not conflicts there either."""
    from ragsieve.present import present_answer

    agree = _conflict_record(False, "consistent", "The sources agree: 1931 (2 sources).", 1)
    clash = _conflict_record(True, "both", "The sources disagree: 1931 (1) against 1932 (1).", 2)
    old = _conflict_record(None, "abstain", "The sources disagree.", 2)
    for events, shown in (([agree], []), ([agree, clash], [clash]), ([old], [old])):
        answer = {"question": "When did the bridge open?", "answer": "1931 [1].", "evidence": [], "cited_ids": [],
                  "trace": {"query": "When did the bridge open?", "events": events}}
        view = present_answer(answer)
        assert [c["message"] for c in view.conflicts] == [r["message"] for r in shown]
