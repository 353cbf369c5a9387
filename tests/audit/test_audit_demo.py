"""The demo corpus is clean: the audit finds nothing in it. The fast test audits a sample (the
documents that share names, Nobel years and numbers across articles, where a loose reading would
see conflicts, and the first files of each domain); the slow one the whole demo corpus."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ragsieve.audit import audit_index
from ragsieve.demo import DEMO_DOMAINS, demo_corpus_dir
from ragsieve.index import Index

TRICKY = (
    "chemistry/007-electronegativity.md", "chemistry/023-orbital-hybridization.md",
    "chemistry/027-organic-chemistry.md", "chemistry/060-isotopes-and-radiocarbon-dating.md",
    "chemistry/035-graphene-chemistry.md", "nanoscience/008-graphene.md",
    "physics/010-photoelectric-effect.md", "physics/063-bohr-model.md", "physics/031-bcs-theory.md",
    "physics/018-special-relativity.md", "physics/020-general-relativity.md",
    "chemistry/041-x-ray-crystallography.md", "chemistry/054-click-chemistry.md",
)


def _sample(target: Path) -> Path:
    source = demo_corpus_dir()
    chosen = set(TRICKY)
    for domain in DEMO_DOMAINS:
        chosen |= {p.relative_to(source).as_posix() for p in sorted((source / domain).glob("*.md"))[:4]}
    for rel in sorted(chosen):
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, target / rel)
    return target


def test_a_sample_of_the_demo_corpus_gives_no_finding(tmp_path, embedder):
    corpus = _sample(tmp_path / "corpus")
    with Index.build(corpus, tmp_path / "idx", embedder=embedder) as index:
        report = audit_index(index)
    assert report.candidates["conflict"] > 0  # pairs were read, none was a conflict
    assert report.findings == (), [f.evidence for f in report.findings]


@pytest.mark.slow
def test_the_demo_corpus_gives_no_finding(tmp_path, embedder):
    with Index.build(demo_corpus_dir(), tmp_path / "idx", embedder=embedder) as index:
        report = audit_index(index)
    assert report.passages > 150
    assert report.findings == (), [f.evidence for f in report.findings]
