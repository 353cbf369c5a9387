"""The trace page and ``ragsieve trace view``: embedding is safe whatever the evidence says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ragsieve.cli import main
from ragsieve.errors import InputError
from ragsieve.serve.page import load_trace, render_page, script_safe_json

EVIL = "</script><script>alert(1)</script><!-- <b>bold</b> & \u2028 </SCRIPT >"


def _answer() -> dict:
    return {
        "question": "What is <graphene>?",
        "answer": "Carbon [1].",
        "abstained": False,
        "evidence": [{"id": "c1", "rank": 1, "score": 1.0, "scores": {"dense": 0.9}, "text": EVIL, "title": "T"}],
        "cited_ids": ["c1"],
        "claims": [],
        "trace": {"query": "What is <graphene>?", "events": [{"stage": "novel", "note": EVIL}], "decisions": [],
                  "timings_ms": {"retrieve": 1.5}},
    }


def _embedded(html: str) -> str:
    match = re.search(r'<script type="application/json" id="ragsieve-data">(.*?)</script>', html, re.S)
    assert match is not None
    return match.group(1)


def test_script_safe_json_round_trips_without_closing_tags() -> None:
    text = script_safe_json({"t": EVIL})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"t": EVIL}


def test_embedded_trace_cannot_close_the_script_element() -> None:
    html = render_page(_answer())
    # Exactly the page's own two <script> elements, whatever the evidence holds.
    assert len(re.findall(r"</script", html, re.I)) == 2
    embedded = json.loads(_embedded(html))
    assert {k: v for k, v in embedded.items() if k != "presentation"} == _answer()
    assert embedded["presentation"]["question"] == _answer()["question"]  # the view the page lays out
    assert "<b>bold</b>" not in html


def test_empty_page_has_the_question_box_and_no_data() -> None:
    html = render_page(None)
    assert _embedded(html) == "null" and 'id="ask-form"' in html


def test_trace_view_writes_a_static_page(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(_answer()), encoding="utf-8")
    out = tmp_path / "page.html"
    main(["trace", "view", str(trace), "-o", str(out)])
    html = out.read_text(encoding="utf-8")
    assert json.loads(_embedded(html))["evidence"][0]["text"] == EVIL
    assert "https://" not in html and "http://" not in html


@pytest.mark.parametrize(
    ("content", "problem"),
    [(None, "does not exist"), ("{oops", "not a JSON file"), ("[1, 2]", "holds no ragsieve trace")],
)
def test_load_trace_names_the_problem(tmp_path: Path, content: str | None, problem: str) -> None:
    path = tmp_path / "t.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=problem):
        load_trace(path)


def test_trace_view_cli_reports_a_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["trace", "view", str(tmp_path / "missing.json"), "-o", str(tmp_path / "p.html")])
    assert exc.value.code == 2
    assert "does not exist" in " ".join(capsys.readouterr().err.split())
