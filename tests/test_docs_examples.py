"""Every code block in README.md and docs/ that claims to run does run, and the README's demo
transcript is today's output.

A fenced ``python`` or ``bash`` block is run unless the line before its fence says why not::

    <!-- docs-test: skip: needs a Milvus server -->

(``text``, ``toml`` and other blocks are output or configuration, never run). Each page's blocks
run in order in one fresh folder holding ``docs/`` (a small corpus that is not the demo's, so an
example that only works on the demo corpus fails) and ``demo-index/`` (the demo corpus, indexed),
in a fresh interpreter whose LLM is a fixed, deterministic stand-in (``scripts/demo_transcript.py``'s
``FixedLLM``) and whose OpenAI-compatible server (``http://127.0.0.1:8000/v1`` in the docs) is the
tests' fake chat server. In a ``bash`` block every ``ragsieve`` command runs; lines that install
software or talk to other tools (``pip``, ``bash scripts/install.sh``, ``python -m pytest``,
``export``, ``curl``, ``mkdocs``) are not commands of this project and are left out.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from tests.chat_server import serve_chat
from tests.helpers import CORPUS

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "results" not in p.parts)]
SKIP = re.compile(r"<!--\s*docs-test:\s*skip:\s*(?P<why>.+?)\s*-->")
RUNNABLE = ("python", "bash")
# Lines of a bash block that are not ragsieve commands: installing, testing, other tools.
NOT_OURS = re.compile(r"^(?:pip |bash scripts/install\.sh|python -m pytest|export |curl |mkdocs |cd )")
DOCS_LLM_URL = "http://127.0.0.1:8000/v1"


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    skip: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page`` with their language and skip reason."""
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        start, lang = i, fence.group(1)
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = SKIP.search(before)
        out.append(Block(page, start + 1, lang, "\n".join(body) + "\n", marker.group("why") if marker else None))
        i += 1
    return out


ALL = [b for page in PAGES for b in blocks(page)]


def test_every_runnable_block_is_run_or_says_why_not() -> None:
    runnable = [b for b in ALL if b.lang in RUNNABLE]
    assert len(runnable) > 10, "the docs hold fewer code blocks than expected: is the parser broken?"
    for b in runnable:
        assert b.skip is None or len(b.skip) > 10, f"{b.name}: say why the block is not run"
    unlabelled = [b.name for b in ALL if not b.lang]
    assert not unlabelled, f"give these blocks a language (text for output): {unlabelled}"


def test_skip_markers_sit_only_on_runnable_blocks() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert len(SKIP.findall(text)) == sum(1 for b in blocks(page) if b.skip), page


def bash_commands(code: str) -> list[list[str]]:
    """The ragsieve commands of a bash block, as argument lists (continuations joined, comments cut)."""
    joined = re.sub(r"\\\n\s*", " ", code)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or NOT_OURS.match(line):
            continue
        words = shlex.split(line, comments=True)
        assert words and words[0] == "ragsieve", f"a bash line the test does not know how to run: {line!r}"
        out.append(words[1:])
    return out


# ---------------------------------------------------------------------- running them
def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_transcript", ROOT / "scripts" / "demo_transcript.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["demo_transcript"] = module
    spec.loader.exec_module(module)
    return module


SITECUSTOMIZE = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("demo_transcript", {script!r})
module = importlib.util.module_from_spec(spec)
sys.modules["demo_transcript"] = module
spec.loader.exec_module(module)
import ragsieve.llm as _llm
for _name in list(_llm._BACKENDS):
    if _name != "openai":
        _llm._BACKENDS[_name] = lambda config: module.FixedLLM()
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    site = tmp_path_factory.mktemp("site")
    (site / "sitecustomize.py").write_text(
        SITECUSTOMIZE.format(script=str(ROOT / "scripts" / "demo_transcript.py")), encoding="utf-8"
    )
    cache = tmp_path_factory.mktemp("cache")
    with serve_chat() as chat:
        yield {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(site), str(ROOT / "src"), str(ROOT)]),
            "XDG_CACHE_HOME": str(cache), "RAGSIEVE_INDEX": "", "COLUMNS": "80", "NO_COLOR": "1",
            "DOCS_CHAT_URL": chat.url,
        }


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragsieve.demo import demo_corpus_dir
    from ragsieve.index import Index

    folder = tmp_path_factory.mktemp("demo") / "demo-index"
    Index.build(demo_corpus_dir(), folder)
    return folder


def _workspace(root: Path, demo_index: Path) -> Path:
    shutil.copytree(CORPUS, root / "docs")
    shutil.copytree(demo_index, root / "demo-index", symlinks=True)
    return root


def _run(args: list[str], cwd: Path, env: dict[str, str], name: str) -> None:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{name} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"


RUN_PAGES = sorted({b.page for b in ALL if b.lang in RUNNABLE and b.skip is None})


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN_PAGES, ids=[str(p.relative_to(ROOT)) for p in RUN_PAGES])
def test_page_examples_run(page: Path, env: dict[str, str], demo_index: Path, tmp_path: Path) -> None:
    ws = _workspace(tmp_path, demo_index)
    for b in blocks(page):
        if b.lang not in RUNNABLE or b.skip is not None:
            continue
        if b.lang == "python":
            _run([sys.executable, "-c", b.code], ws, env, b.name)
            continue
        for args in bash_commands(b.code):
            args = [env["DOCS_CHAT_URL"] if a == DOCS_LLM_URL else a for a in args]
            _run([sys.executable, "-m", "ragsieve.cli", *args], ws, env, f"{b.name}: ragsieve {' '.join(args)}")


# ---------------------------------------------------------------------- the README transcript
_HEADER = re.compile(r"^demo index: (\d+) chunks in (\d+) domains at .+ \(\d+ embedded, [\d.]+s\); (pipeline: \S+)$")
_TIMING = re.compile(r"^\d+ ms, (\d+ LLM calls?):")


def masked(transcript: str) -> str:
    """The transcript with what changes from run to run masked: the index's path, how many chunks
    this run embedded and how long it took (the header, joined where it wraps), and the timing
    line, of which only the number of LLM calls stays (stages under a millisecond are left out of
    it, so even its stage list varies)."""
    head, _, rest = transcript.partition("\n\n")
    header = _HEADER.sub(r"demo index: \1 chunks in \2 domains at INDEX; \3", " ".join(head.split()))
    lines: list[str] = []
    in_timing = False
    for line in rest.splitlines():
        if in_timing and line.startswith("  ") and line.strip():
            continue  # the timing line's continuation
        timing = _TIMING.match(line)
        in_timing = timing is not None
        lines.append(f"T ms, {timing.group(1)}" if timing else line)
    return header + "\n\n" + "\n".join(lines)


@pytest.mark.slow
def test_readme_transcript_is_todays_output(demo_index: Path, tmp_path: Path) -> None:
    script = _load_script()
    shutil.copytree(demo_index, tmp_path / "demo-index", symlinks=True)
    fresh = script.transcript(tmp_path / "demo-index")
    shown = script.readme_transcript((ROOT / "README.md").read_text(encoding="utf-8"))
    assert masked(shown) == masked(fresh), "regenerate it: python scripts/demo_transcript.py --write"
    assert all(len(line) <= 80 for line in fresh.splitlines())
