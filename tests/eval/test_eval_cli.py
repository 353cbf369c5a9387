"""``ragsieve eval`` from the command line: argument errors (fast) and 3 demo questions end to end (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsieve.cli import main

REQUIRED = ("accuracy", "coverage", "answered_accuracy", "faithfulness", "aurc", "llm_calls_per_question",
            "tokens_per_question", "seconds_per_question", "intervals")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def _qa(tmp_path: Path) -> Path:
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps({"question": "What is graphene?", "answer": "carbon"}) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ablate", "nonsense"], "names no known stage"),
        (["--only", "sieve,bogus"], "unknown configuration 'bogus'"),
        (["--judge", "oracle"], "unknown faithfulness judge"),
        ([], "no index given"),
        (["--only", "no-retrieval", "--judge", "none", "--workers", "2", "--cluster", "tcp://x:1"], "not both"),
    ],
)
def test_bad_arguments_give_one_clear_error(tmp_path, capsys, args, message) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run(capsys, "eval", "--data", str(_qa(tmp_path)), *args)
    assert code == 2 and message in err


@pytest.mark.slow
def test_eval_on_three_demo_questions_end_to_end(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from ragsieve.demo import demo_corpus_dir, demo_data_path
    from ragsieve.index import Index

    index = tmp_path / "demo-index"
    Index.build(demo_corpus_dir(), index)
    data = str(demo_data_path("questions.jsonl"))
    cache, plot = tmp_path / "cache.jsonl", tmp_path / "rc.png"
    args = ["eval", "--data", data, "--index", str(index), "--limit", "3", "--threads", "1", "--cache", str(cache),
            "--judge", "lexical-embedding", "--ablate", "verify", "--bootstrap", "200"]
    code, out, _ = run(capsys, *args, "--json", "--plot", str(plot))
    assert code == 0
    result = json.loads(out)
    assert result["n"] == 3 and result["faithfulness_judge"] == "lexical-embedding"
    configs = result["configurations"]
    assert list(configs) == ["sieve", "plain", "no-retrieval", "sieve -verify"]
    for name, scores in configs.items():
        assert all(key in scores for key in REQUIRED), name
        assert scores["n"] == 3 and 0.0 <= scores["coverage"] <= 1.0
        assert scores["llm_calls_per_question"] >= 1 and scores["seconds_per_question"] > 0
    assert configs["no-retrieval"]["faithfulness"] == 0.0  # nothing cited without evidence
    assert configs["no-retrieval"]["faithfulness_grounded"] is None
    assert configs["sieve"]["vs_baseline"]["selective_accuracy_matched"]["coverage"] > 0
    assert plot.stat().st_size > 1000 and plot.read_bytes()[:4] == b"\x89PNG"
    assert len(cache.read_text(encoding="utf-8").splitlines()) == 12
    assert result["questions_answered"] == 3 and result["questions_per_minute"] > 0 and result["shared_work"]
    # Resumed from the cache: same numbers, and the readable table names every configuration.
    code, out, _ = run(capsys, *args)
    assert code == 0 and "sieve -verify" in out and "lexical-embedding" in out
    assert "every output came from the cache" in out
    assert len(cache.read_text(encoding="utf-8").splitlines()) == 12


@pytest.mark.slow
def test_eval_on_a_dask_scheduler_scores_what_one_process_scores(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    distributed = pytest.importorskip("dask.distributed")
    from ragsieve.demo import demo_data_path

    data = str(demo_data_path("questions.jsonl"))
    args = ["eval", "--data", data, "--only", "no-retrieval", "--judge", "none", "--limit", "3", "--threads", "1",
            "--bootstrap", "50", "--json"]
    code, _, err = run(capsys, *args, "--cache", str(tmp_path / "one.jsonl"))
    assert code == 0, err
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
    ) as cluster:
        code, _, err = run(capsys, *args, "--cache", str(tmp_path / "dask.jsonl"), "--cluster",
                        cluster.scheduler_address, "--partition-questions", "1")
        assert code == 0, err
        assert all(w.state.executed_count > 0 for w in cluster.workers.values()), "both workers answered"

    def answers(path: Path) -> list[tuple[str, str]]:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        return sorted((r["item_id"], r["answer"]) for r in rows)

    assert len(answers(tmp_path / "one.jsonl")) == 3
    assert answers(tmp_path / "dask.jsonl") == answers(tmp_path / "one.jsonl")
