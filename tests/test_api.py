"""``ragsieve.Index``: the index the package hands out, with the corpus audit as a method,
without the index package importing the audit (tests/test_layers.py keeps that true)."""

from __future__ import annotations

import ragsieve
from ragsieve.audit import audit_index
from ragsieve.index import Index as BaseIndex
from ragsieve.types import Chunk

TEXT = ("The Harwick lighthouse stands on a granite ledge at the mouth of the Tamsin estuary; its lamp was "
        "first lit in 1822 and its keepers logged every passing ship in a leather ledger for a century.")


def test_the_public_index_audits_itself(tmp_path, embedder):
    chunks = [Chunk("a", TEXT, "a", "one.example"), Chunk("b", TEXT.replace("ledger", "logbook"), "b", "two.example"),
              Chunk("c", "Graphene is a single layer of carbon atoms in a hexagonal lattice.", "c", "three.example")]
    index = ragsieve.Index.from_chunks(chunks, tmp_path / "idx", embedder=embedder)
    try:
        assert isinstance(index, ragsieve.Index) and isinstance(index, BaseIndex)
        report = index.audit(checks=["mirror"], use_reader=False)
        assert [set(f.documents) for f in report.findings] == [{"a", "b"}]
        assert report.findings == audit_index(index, checks=["mirror"], use_reader=False).findings
    finally:
        index.close()
    with ragsieve.Index.open(tmp_path / "idx", embedder=embedder) as opened:
        assert type(opened) is ragsieve.Index and opened.audit(checks=["mirror"]).counts()["mirror"] == 1
    assert not hasattr(BaseIndex, "audit")  # the component itself knows nothing of the audit
