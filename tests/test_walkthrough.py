"""docs/walkthrough.md is what scripts/walkthrough.py records: the same commands in the same
order, each output with its step's shape; and re-running the cheap steps (ingest, ask against
the PDF index, the service's health, API and page) gives those shapes again."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parents[1]
walkthrough = load_script(ROOT / "scripts" / "walkthrough.py", "walkthrough_script")
PAGE = ROOT / "docs" / "walkthrough.md"


def test_the_page_lists_exactly_the_scripts_commands_in_order() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert walkthrough.page_commands(page) == [s.command for s in walkthrough.STEPS]
    for line in ("- date: ", "- machine: ", "- commit: "):
        assert re.search("^" + re.escape(line) + r"\S", page, re.MULTILINE), line


def test_each_recorded_output_has_its_steps_shape() -> None:
    outputs = walkthrough.page_outputs(PAGE.read_text(encoding="utf-8"))
    assert list(outputs) == [s.id for s in walkthrough.STEPS]
    problems = [p for step, out in outputs.items() for p in walkthrough.shape_problems(step, out)]
    assert problems == []


def test_the_page_is_in_the_docs_nav() -> None:
    assert "walkthrough.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_the_shapes_tell_a_refusal_from_an_answer() -> None:
    refusal = "Q: x\nA (abstained): I can't answer this from the indexed documents."
    assert walkthrough.shape_problems("ask-unanswerable", refusal) == []
    assert walkthrough.shape_problems("ask-unanswerable", "Q: x\nA: 1938 [1].") != []
    assert walkthrough.shape_problems("health", "{}\nHTTP 503") != []
    assert walkthrough.shape_problems("ask-answerable", "A: x\n   caveat: confidence 0.15 >= 0.08") != []


def test_the_folder_holds_a_pdf_pypdf_reads_page_by_page(tmp_path: Path) -> None:
    from pypdf import PdfReader

    walkthrough.make_folder(tmp_path)
    pages = PdfReader(str(tmp_path / "my-docs" / "teflon.pdf")).pages
    assert len(pages) == 2 and "327 degrees Celsius" in pages[1].extract_text()


@pytest.mark.slow
def test_rerunning_the_cheap_steps_gives_the_recorded_shapes(tmp_path: Path) -> None:
    if shutil.which("ragsieve") is None:
        pytest.skip("the ragsieve command is not installed")
    cheap = [s.id for s in walkthrough.STEPS if s.cheap]
    records = list(walkthrough.run_steps(tmp_path / "work", Path(os.environ["HOME"]), cheap, keep_xdg=True))
    assert [r.step.id for r in records] == [i for i in cheap if i != "serve"][:-1] + ["serve", "stop"]
    # Ctrl-C ends the service: 0, or the shell's 130 for a process ended by SIGINT
    failed = {r.step.id: (r.rc, r.output[-300:]) for r in records if r.rc not in ((0, 130) if r.step.background
                                                                                  or r.step.id == "stop" else (0,))}
    assert failed == {}
    problems = [p for r in records for p in walkthrough.shape_problems(r.step.id, r.output)]
    assert problems == [], problems


def test_the_readmes_excerpt_is_the_recorded_run() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = readme.index(walkthrough.README_START), readme.index(walkthrough.README_END)
    recorded = walkthrough.readme_block(walkthrough.page_outputs(PAGE.read_text(encoding="utf-8")))
    assert readme[start : end + len(walkthrough.README_END)] == recorded
