"""Document tags at ingest: front matter, folders, the tags file, and their refresh on re-ingest."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import HashEmbedder

from ragsieve.config import IngestConfig, PipelineConfig
from ragsieve.errors import ConfigError
from ragsieve.index import Index
from ragsieve.ingest.loaders import document_tags, front_matter_tags
from ragsieve.ingest.tags import read_tags_file


@pytest.mark.parametrize(
    ("text", "tags"),
    [
        ("---\ntags: [hr, confidential]\ntitle: Leave\n---\n# Leave\nText.", ["hr", "confidential"]),
        ("---\ntags: hr, public\n---\nText.", ["hr", "public"]),
        ("---\ntags:\n  - finance\n...\nText.", ["finance"]),
        ("# No front matter\ntags: [hr]\n", []),
        ("---\ntags: [unclosed\n---\nText.", []),  # not YAML: no tags rather than a failed ingest
        ("---\n- a list\n---\nText.", []),
        ("Text first\n---\ntags: [hr]\n---\n", []),  # front matter only at the very start
    ],
)
def test_front_matter_tags(text: str, tags: list[str]) -> None:
    assert front_matter_tags(text) == tags


def test_folder_and_rule_tags() -> None:
    config = IngestConfig(tag_rules={"*/contracts/*": ["legal"], "hr/*": ["people", "hr"]})
    assert document_tags("hr/policies/leave.md", config, ["confidential"]) == [
        "confidential", "hr", "hr/policies", "people"
    ]
    assert document_tags("sales/contracts/acme.pdf", config) == ["sales", "sales/contracts", "legal"]
    assert document_tags("readme.md", config) == []
    assert document_tags("hr/a.md", IngestConfig(folder_tags=False)) == []


def test_the_tags_file_in_toml_and_yaml(tmp_path: Path) -> None:
    toml = tmp_path / "tags.toml"
    toml.write_text('"hr/*" = ["hr"]\n"handbook.md" = "public"\n', encoding="utf-8")
    assert read_tags_file(toml) == {"hr/*": ["hr"], "handbook.md": ["public"]}
    yaml = tmp_path / "tags.yaml"
    yaml.write_text("'hr/*': [hr, people]\n", encoding="utf-8")
    assert read_tags_file(yaml) == {"hr/*": ["hr", "people"]}


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("t.toml", '"hr/*" = [\n', "is not valid TOML"),
        ("t.yaml", "hr: [unclosed\n", "is not valid YAML"),
        ("t.toml", "", "must map globs to tags"),
        ("t.toml", '"hr/*" = []\n', "must be a text or a non-empty list of texts"),
        ("t.toml", '"hr/*" = [1]\n', "must be a text or a non-empty list of texts"),
    ],
)
def test_a_bad_tags_file_names_the_problem(tmp_path: Path, name: str, text: str, said: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="tags file") as caught:
        read_tags_file(path)
    assert said in str(caught.value)


def _corpus(root: Path) -> Path:
    (root / "hr" / "policies").mkdir(parents=True)
    (root / "hr" / "policies" / "leave.md").write_text(
        "---\ntags: [confidential]\n---\n# Leave\n\nStaff take thirty days of leave a year.\n", encoding="utf-8"
    )
    (root / "public").mkdir()
    (root / "public" / "faq.txt").write_text("The office opens at nine in the morning.\n", encoding="utf-8")
    (root / "notes.md").write_text("# Notes\n\nThe canteen serves soup on Fridays.\n", encoding="utf-8")
    return root


def _tags(index: Index) -> dict[str, list[str]]:
    return {str(c.path): list(c.metadata.get("tags", [])) for c in index.chunks}


def test_ingest_stores_each_documents_tags_and_a_re_ingest_refreshes_them(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    emb = HashEmbedder()
    rules = {"ingest": {"tag_rules": {"public/*": ["everyone"]}}}
    with Index.build(corpus, tmp_path / "index", config=PipelineConfig.model_validate(rules), embedder=emb) as built:
        assert _tags(built) == {
            "hr/policies/leave.md": ["confidential", "hr", "hr/policies"],
            "public/faq.txt": ["public", "everyone"],
            "notes.md": [],  # no folder, no front matter, no rule: untagged (metadata without "tags")
        }
        assert "tags" not in next(c for c in built.chunks if c.path == "notes.md").metadata
    # the rules change, no file does: the tags follow the rules, not the last build
    changed = {"ingest": {"tag_rules": {"notes.md": ["everyone"]}}}
    with Index.build(corpus, tmp_path / "index", config=PipelineConfig.model_validate(changed), embedder=emb) as again:
        assert _tags(again)["public/faq.txt"] == ["public"]
        assert _tags(again)["notes.md"] == ["everyone"]
