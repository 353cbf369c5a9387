"""The ``ragsieve`` command as a user meets it: usage, help, errors, defaults and output width.

The subprocess tests enumerate the commands from the click command tree, so a command added
later is covered without editing this file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import typing
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ragsieve import cli, config
from ragsieve.cli import cli_command, hit_block, main, resolve_index_dir
from ragsieve.errors import InputError
from ragsieve.filtering.factory import FilteringConfig
from ragsieve.types import Chunk, SearchHit


def _command_paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _command_paths(sub, (*path, name))
    return found


COMMANDS = _command_paths(cli_command())


def _needs_input(command: Any) -> bool:
    """Groups, and commands with a required parameter: run bare, they must print usage."""
    return bool(getattr(command, "commands", None)) or any(p.required for p in command.params)


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "RAGSIEVE_INDEX": "", "NO_COLOR": "1"}
    env.pop("RAGSIEVE_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "ragsieve.cli", *args],
        capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL,
    )


def _run_all(argvs: list[list[str]]) -> list[subprocess.CompletedProcess[str]]:
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(_run, argvs))


def test_the_tree_has_every_stage_group():
    names = {path[0] for path, _ in COMMANDS if path}
    assert {"ingest", "search", "ask", "info", "demo", "router", "filters", "tasks", "coe", "importance"} <= names


def test_every_command_without_arguments_shows_usage_not_a_traceback():
    bare = [list(path) for path, command in COMMANDS if _needs_input(command)]
    assert len(bare) >= 10
    for argv, result in zip(bare, _run_all(bare), strict=True):
        shown = result.stdout + result.stderr
        assert result.returncode == 2, (argv, result.returncode, shown)
        assert "Usage:" in shown, (argv, shown)
        assert "Traceback" not in shown, (argv, shown)


def test_every_command_help_exits_0_with_readable_metavars():
    argvs = [[*path, "--help"] for path, _ in COMMANDS]
    for argv, result in zip(argvs, _run_all(argvs), strict=True):
        shown = result.stdout + result.stderr
        assert result.returncode == 0, (argv, shown)
        assert "Usage:" in shown and "Traceback" not in shown, (argv, shown)
        for typename in ("<str>", "<bool>", "<int>", "<float>", "<Path>"):
            assert typename not in shown, (argv, typename, shown)


def test_usage_errors_exit_2_with_the_reason():
    result = _run(["search", "x", "--mode", "fuzzy"])
    shown = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2 and "Traceback" not in shown
    assert "fuzzy" in shown and "hybrid" in shown


def test_options_with_fixed_values_list_them():
    result = _run(["ask", "--help"])
    text = result.stdout
    for choice in ("dense|sparse|hybrid", "top-k|scope-coe"):
        assert choice in text
    assert "[plain|direct|task-adapt" in text  # the column may wrap the rest


@pytest.mark.parametrize(
    "enum, literal, field",
    [
        (cli.RetrievalMode, config.RetrievalModeName, config.RetrievalConfig.model_fields["mode"]),
        (cli.Fusion, config.FusionName, config.RetrievalConfig.model_fields["fusion"]),
        (cli.PipelineChoice, config.PipelineName, config.PipelineConfig.model_fields["pipeline"]),
        (cli.SelectChoice, config.SelectName, config.SelectConfig.model_fields["method"]),
        (cli.ChunkChoice, config.ChunkUnit, config.ChunkingConfig.model_fields["unit"]),
        (cli.DenseChoice, config.DenseKind, config.DenseIndexConfig.model_fields["kind"]),
        (cli.StoreChoice, config.StoreBackendName, config.StoreConfig.model_fields["backend"]),
        (cli.FilterChoice, config.FilterName, FilteringConfig.model_fields["filter"]),
    ],
)
def test_each_option_set_is_declared_once_in_the_config(enum, literal, field):
    # the config field is typed by the one declaration (or by it or None: unset, the preset's own),
    # and the command line's choices are built from it
    assert field.annotation is literal or field.annotation == literal | None
    assert [m.value for m in enum] == list(typing.get_args(literal))


def test_shell_completion_completes_commands_and_choices():
    env = {**os.environ, "_RAGSIEVE_COMPLETE": "complete_bash", "COMP_WORDS": "ragsieve search x --mode ",
           "COMP_CWORD": "4"}
    script = "from ragsieve.cli import main; main()"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert result.stdout.split() == ["dense", "sparse", "hybrid"]


def test_unexpected_errors_are_one_line(monkeypatch, capsys):
    def broken(index: Path, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("ragsieve.index.Index.open", broken)
    monkeypatch.delenv("RAGSIEVE_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exc:
        main(["info", "--index", "somewhere"])
    err = capsys.readouterr().err
    assert exc.value.code == 1
    assert "RuntimeError: disk on fire" in err and "RAGSIEVE_DEBUG=1" in err
    assert "Traceback" not in err


# ---------------------------------------------------------------- default index
@pytest.fixture
def no_demo(monkeypatch, tmp_path):
    monkeypatch.delenv("RAGSIEVE_INDEX", raising=False)
    monkeypatch.setattr("ragsieve.console.default_demo_index", lambda: tmp_path / "no-demo-here")
    return tmp_path


def test_explicit_index_wins(no_demo, monkeypatch, capsys):
    monkeypatch.setenv("RAGSIEVE_INDEX", str(no_demo / "env"))
    assert resolve_index_dir(no_demo / "given", "cfg") == no_demo / "given"
    assert capsys.readouterr().err == ""


def test_environment_then_config_then_demo(no_demo, monkeypatch, capsys):
    monkeypatch.setenv("RAGSIEVE_INDEX", str(no_demo / "env"))
    assert resolve_index_dir(None, "cfg-index") == no_demo / "env"
    assert "RAGSIEVE_INDEX" in capsys.readouterr().err
    monkeypatch.delenv("RAGSIEVE_INDEX")
    assert resolve_index_dir(None, "cfg-index") == Path("cfg-index")
    assert "config" in capsys.readouterr().err
    demo = no_demo / "demo"
    demo.mkdir()
    monkeypatch.setattr("ragsieve.console.default_demo_index", lambda: demo)
    assert resolve_index_dir(None) == demo
    err = " ".join(capsys.readouterr().err.split())
    assert f"using index {demo}" in err and "demo index" in err


def test_no_index_anywhere_names_every_fix(no_demo):
    with pytest.raises(InputError) as exc:
        resolve_index_dir(None)
    message = str(exc.value)
    assert "no index given" in message and "--index" in message
    assert "RAGSIEVE_INDEX" in message and "ragsieve demo" in message


# ---------------------------------------------------------------- search output
def _hit(text: str, chunk_id: str = "astronomy/moon.txt:0") -> SearchHit:
    chunk = Chunk(id=chunk_id, text=text, doc_id="astronomy/moon.txt", source="astronomy/moon.txt", domain="astronomy")
    return SearchHit(chunk=chunk, score=0.0328, rank=1, scores={"fused": 0.0328, "dense": 0.61234, "sparse": 4.2})


def test_hit_block_fits_80_columns_and_shows_the_first_line():
    text = "The Apollo 11 mission landed on the Moon. " * 10 + "\nsecond line never shown"
    lines = hit_block(_hit(text, chunk_id="x" * 200))
    assert all(len(line) <= 80 for line in lines)
    body = "\n".join(lines)
    assert "fused 0.0328" in body and "dense 0.612" in body and "sparse 4.200" in body
    assert "astronomy · astronomy/moon.txt" in body
    assert "The Apollo 11 mission" in body and "second line" not in body
    assert lines[-1].endswith("…")


def test_hit_block_of_a_short_hit_is_not_cut():
    lines = hit_block(_hit("Short text."), width=60)
    assert lines[-1].strip() == "Short text." and lines[1].startswith("  1. astronomy/moon.txt:0")


# ---------------------------------------------------------------- ingest progress
def test_ingest_progress_moves_per_batch_and_times_the_embedder(tmp_path):
    from tests.helpers import HashEmbedder

    from ragsieve.index import BuildReport, Index

    corpus = tmp_path / "corpus" / "notes"
    corpus.mkdir(parents=True)
    for i in range(300):
        (corpus / f"{i:03d}.txt").write_text(f"Note {i} is about topic {i % 7} and nothing else.")
    updates: list[tuple[str, int, int]] = []
    report = BuildReport()
    Index.build(tmp_path / "corpus", tmp_path / "idx", embedder=HashEmbedder(),
                progress=lambda stage, done, total: updates.append((stage, done, total)), report=report)
    embed_done = [done for stage, done, _ in updates if stage == "embed"]
    assert len(embed_done) >= 3 and embed_done == sorted(embed_done) and embed_done[-1] == 300
    assert 0 < report.embed_seconds <= report.seconds


def test_ingest_threads_sets_the_embedder_threads(tmp_path, monkeypatch, capsys):
    from ragsieve.index import Index

    seen = {}

    def fake_build(path, index, config, progress, report):
        seen["threads"] = config.embedder.threads
        raise InputError("stop here")

    monkeypatch.setattr(Index, "build", fake_build)
    with pytest.raises(SystemExit):
        main(["ingest", str(tmp_path), "--index", str(tmp_path / "idx"), "--threads", "3"])
    assert seen == {"threads": 3}
    with pytest.raises(SystemExit) as exc:
        main(["ingest", str(tmp_path), "--index", str(tmp_path / "idx"), "--threads", "0"])
    assert exc.value.code == 2


# ---------------------------------------------------------------- ask output
def _traced_answer() -> Any:
    from ragsieve.types import Answer, Trace

    long_id = "biology/a-rather-long-folder-name/with-a-long-file-name-about-photosynthesis.md:12"
    cited = Chunk(id="manual.pdf:3", text="Replace the seal every 2000 hours.", doc_id="manual.pdf",
                  source="manual.pdf", path="manual.pdf", page=6)
    trace = Trace(query="How often is the seal replaced?")
    candidates = [
        {"id": "manual.pdf:3", "source": "manual.pdf", "score": 0.0328, "text": "Replace the seal every 2000 hours."},
        {"id": long_id, "source": long_id.rsplit(":", 1)[0], "score": 0.0164, "text": "Leaves are green."},
        {"id": "notes.md:0", "source": "notes.md", "score": 0.0161, "text": "Seals wear out."},
    ]
    trace.record("retrieve", candidates=candidates)
    trace.record("judge", judge="evaluator", upper=0.4142, lower=0.4137)
    trace.decide("judge", long_id, "dropped", "irrelevant 0.10")
    trace.decide("select", "notes.md:0", "dropped", "not needed for the minimal cover")
    trace.decide("select", "manual.pdf:3", "kept", "in the scope-coe selection")
    trace.timings_ms.update({"retrieve": 12.0, "judge": 40.0, "generate": 900.0, "verify": 55.0})
    hit = SearchHit(chunk=cited, score=0.0328, rank=1, scores={"fused": 0.0328})
    return Answer(question="How often is the seal replaced?", text="Every 2000 hours [1].", evidence=[hit],
                  cited_ids=["manual.pdf:3"], trace=trace), long_id


def test_answer_lines_read_right_for_a_newcomer():
    answer, long_id = _traced_answer()
    lines = cli.render_answer(answer, 80)
    text = "\n".join(lines)
    assert all(len(line) <= 80 for line in lines)
    assert "   [1] manual.pdf#page=6" in lines  # the page, not the chunk ordinal
    # left out by the minimal cover: "not needed", never "dropped"; a check's removal stays "dropped"
    assert any(line.startswith(" not needed") and "notes.md:0" in line for line in lines)
    assert any(line.startswith(" dropped") and "irrelevant" not in line for line in lines)
    assert "0-1 scale" in " ".join(text.split()) and " 1.00 manual.pdf:3" in text and " 0.50 " in text
    assert "0.414 " in text or "0.4142" in text  # the two thresholds differ on the page
    assert "relevant at or above 0.41, irrelevant below 0.41" not in text and ">=" not in text
    assert long_id in text.replace("\n" + " " * 17, "")  # the id whole (wrapped, never cut with "…")
    assert "verify 55" in text  # the timing line is not cut before the verify time


def test_distinct_digits_tells_close_thresholds_apart():
    assert cli.distinct_digits(0.4142, 0.4127) == 3
    assert cli.distinct_digits(0.4142, 0.4137) == 4
    assert cli.distinct_digits(0.9, 0.1) == 2
    from ragsieve.present import relative_scores

    assert relative_scores([{"score": 0.0328}, {"score": 0.0164}]) == [1.0, 0.5]


def test_version_prints_the_package_version():
    from ragsieve import __version__

    result = _run(["--version"])
    assert result.returncode == 0 and result.stdout.strip() == f"ragsieve {__version__}"


def test_index_help_names_the_same_fallback_everywhere():
    # Every --index that reads an index says how it falls back (one helper resolves them all).
    for args in (["ask"], ["search"], ["info"], ["eval"], ["serve"], ["calibrate"], ["router", "route"]):
        command = cli_command()
        for name in args:
            command = command.commands[name]
        index = next(p for p in command.params if p.name == "index")
        assert not index.required and "RAGSIEVE_INDEX" in (index.help or ""), args


@pytest.mark.parametrize("name", sorted(cli.LAZY_COMMANDS))
def test_each_lazy_command_lists_its_own_help_and_loads_the_real_command(name):
    real = cli_command().commands[name]
    assert cli.LAZY_COMMANDS[name][2] == real.get_short_help_str(limit=200)
    loaded = cli.load_subcommand(name)
    assert type(loaded) is type(real) and set(getattr(loaded, "commands", {})) == set(getattr(real, "commands", {}))
    assert [p.name for p in loaded.params] == [p.name for p in real.params]


def test_help_does_not_import_the_stages():
    code = (
        "import sys; from ragsieve.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ('numpy', 'fastapi', 'httpx', 'ragsieve.coe', 'ragsieve.filtering')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "COLUMNS": "80"})
    assert result.stdout.strip().splitlines()[-1] == "[]"
