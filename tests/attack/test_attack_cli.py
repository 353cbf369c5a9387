from __future__ import annotations

import hashlib
import json

import pytest
from tests.attack.fakes import QUESTIONS, EchoLLM, build_index
from tests.helpers import HashEmbedder

import ragsieve.attack.cli as attack_cli
from ragsieve.cli import main


def run(capsys, *args):
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture()
def setup(tmp_path, monkeypatch):
    from ragsieve.index import Index

    build_index(tmp_path / "idx")
    q = tmp_path / "q.jsonl"
    q.write_text("\n".join(json.dumps(r) for r in QUESTIONS) + "\n")
    monkeypatch.setattr(attack_cli, "_open_index", lambda path, cfg: Index.open(path, embedder=HashEmbedder()))
    monkeypatch.setattr(attack_cli, "_load_llm", lambda cfg: EchoLLM())
    return tmp_path, q


def digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_poison_then_eval_json(setup, capsys):
    root, q = setup
    before = digest(root / "idx")
    code, out, err = run(capsys, "attack", "poison", "--index", str(root / "idx"), "--questions", str(q), "--n", "3",
                         "--out", str(root / "p"), "--spread", "one", "--seed", "1")
    assert code == 0, err
    assert "unchanged" in out and digest(root / "idx") == before
    code, out, err = run(capsys, "attack", "eval", "--index", str(root / "idx"), "--poisoned", str(root / "p"),
                         "--defence", "plain", "--defence", "poison-judge", "--json",
                         "--log", str(root / "log.jsonl"))
    assert code == 0, err
    data = json.loads(out)
    assert data["targets"] == len(QUESTIONS)
    assert data["defences"]["plain"]["retrieval_success"] == 1.0
    assert data["defences"]["poison-judge"]["asr"] == 0.0
    # where the passages went: they reach plain RAG's generator on every question; the
    # poisoning check drops every one of them (3 per question) before the generator
    assert data["checks"]["plain"]["reached"] == len(QUESTIONS)
    assert data["checks"]["poison-judge"]["reached"] == 0
    assert sum(v for k, v in data["checks"]["poison-judge"]["stopped"].items() if k.startswith("poison:")) \
        == 3 * len(QUESTIONS)
    assert len((root / "log.jsonl").read_text().splitlines()) == 2 * len(QUESTIONS)
    code, out, _ = run(capsys, "attack", "eval", "--index", str(root / "idx"), "--poisoned", str(root / "p"),
                       "--defence", "plain")
    assert code == 0 and "ASR" in out
    assert f"reached the generator on {len(QUESTIONS)}/{len(QUESTIONS)} questions" in " ".join(out.split())


def test_llm_writer_and_errors(setup, capsys):
    root, q = setup
    code, _, err = run(capsys, "attack", "poison", "--index", str(root / "idx"), "--questions", str(q),
                       "--out", str(root / "p"), "--writer", "llm", "--n", "1",
                       "--llm-cache", str(root / "w.jsonl"))
    assert code == 0, err
    assert (root / "w.jsonl").is_file()
    code, _, err = run(capsys, "attack", "poison", "--index", str(root / "idx"), "--questions", str(q),
                       "--out", str(root / "p2"), "--spread", "nowhere")
    assert code == 2 and "--spread" in err
    code, _, err = run(capsys, "attack", "poison", "--index", str(root / "idx"), "--questions", str(q),
                       "--out", str(root / "p3"), "--lead", "shout")
    assert code == 2 and "--lead" in err and not (root / "p3").exists()
    code, _, err = run(capsys, "attack", "poison", "--index", str(root / "idx"), "--questions", str(q),
                       "--out", str(root / "p4"), "--lead", "statement", "--n", "1")
    assert code == 0, err
    from ragsieve.attack.poison import load_attack

    meta, targets, passages = load_attack(root / "p4")
    assert meta["writer"]["lead"] == "statement"
    asked = {t.id: t.question for t in targets}
    assert passages and all(not p.text.startswith(asked[p.target_id]) for p in passages)
    code, _, err = run(capsys, "attack", "eval", "--index", str(root / "idx"), "--poisoned", str(root / "idx"))
    assert code == 2 and "not" in err and "attack poison" in " ".join(err.split())
    code, _, err = run(capsys, "attack", "eval", "--index", str(root / "idx"), "--poisoned", str(root / "p"),
                       "--defence", "moat")
    assert code == 2 and "unknown defence" in err


@pytest.mark.parametrize("writer", ["assert", "assert-template", "mirror"])
def test_cli_new_writers(setup, capsys, writer):
    root, q = setup
    code, out, err = run(capsys, "attack", "poison", "--index", str(root / "idx"), "--questions", str(q),
                         "--out", str(root / "p"), "--writer", writer, "--n", "2", "--spread", "sources")
    assert code == 0, err
    rows = [json.loads(line) for line in (root / "p" / "poison.jsonl").read_text().splitlines()]
    assert rows[0]["writer"]["type"] == ("mirror" if writer == "mirror" else "assert")
    texts = [r["text"] for r in rows if r["kind"] == "passage"]
    questions = {r["id"]: r["question"] for r in rows if r["kind"] == "target"}
    assert texts and all(not t.startswith(tuple(questions.values())) for t in texts)


def test_cli_rejects_unknown_writer(setup, capsys):
    root, q = setup
    code, _, err = run(capsys, "attack", "poison", "--index", str(root / "idx"), "--questions", str(q),
                       "--out", str(root / "p"), "--writer", "gpt")
    assert code != 0 and "mirror" in err
