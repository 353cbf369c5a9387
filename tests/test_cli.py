from __future__ import annotations

import contextlib
import json

import pytest
from tests.helpers import copy_corpus

from ragsieve.cli import main


def run(capsys, *args):
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def cli_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    corpus = copy_corpus(root)
    (corpus / "biology" / "bad.txt").write_bytes(b"\xff\xfe\x00 not text")
    with contextlib.suppress(SystemExit):
        main(["ingest", str(corpus), "--index", str(root / "idx"), "--json"])
    return root / "idx"


def test_ingest_reports_and_search_json(cli_index, capsys):
    code, out, _ = run(capsys, "search", "Apollo moon landing", "--index", str(cli_index), "-k", "2", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["hits"][0]["id"] == "astronomy/moon.txt:0"
    assert {"dense", "sparse", "fused"} <= set(data["hits"][0]["scores"])
    code, out, _ = run(capsys, "search", "energy", "--index", str(cli_index), "--where", "domain=biology", "--json")
    assert code == 0 and {h["domain"] for h in json.loads(out)["hits"]} == {"biology"}


def test_info_lists_domains(cli_index, capsys):
    code, out, _ = run(capsys, "info", "--index", str(cli_index), "--json")
    assert code == 0 and set(json.loads(out)["domains"]) == {"astronomy", "biology"}


def test_info_prints_human_lines_by_default(cli_index, capsys):
    code, out, _ = run(capsys, "info", "--index", str(cli_index))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"index {cli_index}"
    assert any(line.strip().startswith("domains: ") and "astronomy" in line for line in lines)
    assert not out.lstrip().startswith("{")
    assert all(len(line) <= 80 for line in lines)


@pytest.mark.parametrize(
    "args, message",
    [
        (["search", "  ", "--index", "{idx}"], "query is empty"),
        (["search", "x", "--index", "{missing}"], "no index at"),
        (["search", "x", "--index", "{idx}", "--where", "domain"], "not of the form key=value"),
        (["search", "x", "--index", "{idx}", "--route", "geology"], "unknown domain 'geology'"),
        (["search", "x", "--index", "{idx}", "--mode", "fuzzy"], "mode"),
        (["ask", "what?"], "no index given"),
        (["ingest", "{missing}", "--index", "{missing}"], "does not exist"),
        (["classify", "good film", "--labels", "positive"], "at least two distinct"),
        (["ask", "x", "--config", "{missing}.toml"], "does not exist"),
    ],
)
def test_bad_input_gives_one_clear_error(cli_index, tmp_path, capsys, monkeypatch, args, message):
    # No configured or demo index, so that a missing --index is an error here whatever this machine holds.
    monkeypatch.delenv("RAGSIEVE_INDEX", raising=False)
    monkeypatch.setattr("ragsieve.console.default_demo_index", lambda: tmp_path / "no-demo")
    args = [a.format(idx=cli_index, missing=tmp_path / "missing") for a in args]
    code, _, err = run(capsys, *args)
    assert code == 2
    assert message in " ".join(err.split())
    assert "Traceback" not in err


def test_ingest_counts_skipped_files(tmp_path, capsys):
    corpus = copy_corpus(tmp_path)
    (corpus / "biology" / "bad.txt").write_bytes(b"\xff\xfe not utf8")
    code, out, _ = run(capsys, "ingest", str(corpus), "--index", str(tmp_path / "idx"), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["skipped"] == [{"path": "biology/bad.txt", "reason": report["skipped"][0]["reason"]}]
    assert "UTF-8" in report["skipped"][0]["reason"]


@pytest.mark.slow
def test_ask_json_has_the_full_trace(cli_index, capsys):
    code, out, _ = run(
        capsys, "ask", "What do ribosomes build?", "--index", str(cli_index), "--json", "--threads", "1",
        "--pipeline", "plain",
    )
    assert code == 0
    data = json.loads(out)
    assert data["answer"]
    stages = {e["stage"] for e in data["trace"]["events"]}
    assert {"route", "retrieve", "select", "generate"} <= stages
    assert data["trace"]["llm_calls"] == 1 and data["trace"]["prompt_tokens"] > 0


def test_unloadable_gguf_and_unreachable_server_are_clear_errors(tmp_path, capsys):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF not really a model")
    code, _, err = run(capsys, "ask", "hello?", "--no-retrieval", "--model", str(bad))
    assert code == 2 and str(bad) in "".join(err.split())  # rich may wrap the path across lines
    assert "Traceback" not in err
    code, _, err = run(capsys, "ask", "hello?", "--no-retrieval", "--llm-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert code == 2 and "could not reach" in " ".join(err.split())


@pytest.mark.slow
def test_classify_prints_a_distribution(capsys):
    code, out, _ = run(
        capsys, "classify", "a gripping, beautiful film", "--labels", "positive,negative", "--template", "sentiment",
        "--json", "--threads", "1",
    )
    assert code == 0
    data = json.loads(out)
    assert set(data["labels"]) == {"positive", "negative"}
    assert abs(sum(data["labels"].values()) - 1.0) < 1e-6
