"""Reader grants inside the index: what a :class:`ScopedIndex` searches, finds and lists."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.helpers import HashEmbedder

from ragsieve.errors import ConfigError, InputError
from ragsieve.index import Index
from ragsieve.index.access import Access, ScopedIndex, scoped
from ragsieve.types import Chunk


def _chunk(n: int, domain: str, path: str | None, tags: list[str] | None, field: str | None = None) -> Chunk:
    metadata: dict[str, object] = {"tags": tags} if tags is not None else {}
    if field:
        metadata[field] = "x"
    return Chunk(id=f"c{n}", text=f"carbon lattice note number {n}", doc_id=f"d{n}", source=path or f"s{n}",
                 domain=domain, metadata=metadata, path=path)


CHUNKS = [
    _chunk(0, "hr", "hr/a.md", None),  # an untagged document, as in an index from before tags
    _chunk(1, "hr", "hr/policies/b.md", ["hr"]),
    _chunk(2, "sales", "hrx/c.md", ["sales"], field="secret_field"),
    _chunk(3, "sales", "sales/d.md", ["public", "sales"]),
    _chunk(4, "sales", None, None),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    return Index.from_chunks(list(CHUNKS), tmp_path_factory.mktemp("access") / "index", embedder=HashEmbedder())


@pytest.mark.parametrize(
    ("access", "readable"),
    [
        (Access.all(), {"c0", "c1", "c2", "c3", "c4"}),
        (Access(), set()),
        (Access(domains=frozenset({"hr"})), {"c0", "c1"}),
        (Access(tags=frozenset({"hr"})), {"c1"}),  # the untagged hr document is not reached by tag
        (Access(tags=frozenset({"public"})), {"c3"}),
        (Access(paths=("hr",)), {"c0", "c1"}),  # folder boundary: not hrx/
        (Access(paths=("hr/policies/b.md",)), {"c1"}),
        (Access(tags=frozenset({"sales"}), paths=("hr/policies",)), {"c1", "c2", "c3"}),
    ],
)
def test_a_reader_reads_exactly_what_its_grants_cover(index: Index, access: Access, readable: set[str]) -> None:
    view = scoped(index, access)
    assert {c.id for c in view.chunks} == readable
    hits = view.search("carbon lattice note", k=5)
    assert {h.chunk.id for h in hits} == readable  # k=5 asks for all: the allowed ones, all of them
    for chunk in CHUNKS:
        if chunk.id in readable:
            assert view.get(chunk.id) == chunk
        else:
            with pytest.raises(InputError) as forbidden:
                view.get(chunk.id)
            with pytest.raises(InputError) as unknown:
                view.get("no-such-id")
            assert str(forbidden.value).replace(chunk.id, "X") == str(unknown.value).replace("no-such-id", "X")


def test_k_hits_are_k_allowed_ones_in_every_mode(index: Index) -> None:
    view = ScopedIndex(index, Access(domains=frozenset({"sales"})))
    for mode in ("dense", "sparse", "hybrid"):
        hits = view.search("carbon lattice note number", k=2, mode=mode)
        assert len(hits) == 2 and all(h.chunk.domain == "sales" for h in hits)


def test_rows_vectors_and_fields_cover_the_allowed_chunks_only(index: Index) -> None:
    view = ScopedIndex(index, Access(tags=frozenset({"hr", "public"})))
    assert [c.id for c in view.chunks] == ["c1", "c3"]
    assert view.row("c3") == 1
    with pytest.raises(KeyError):
        view.row("c2")
    assert view.embeddings.shape == (2, index.embeddings.shape[1])
    np.testing.assert_array_equal(view.embeddings[[1]], index.embeddings[[3]])
    assert "secret_field" not in view.fields()  # a field only a forbidden chunk has is not named
    with pytest.raises(InputError, match="no chunk in this index has a field 'secret_field'"):
        view.search("carbon", k=2, where={"secret_field": "x"})
    assert view.search("carbon", k=5, where={"tags": "public"})[0].chunk.id == "c3"
    assert view.domains == index.domains  # partition names are the index's own


def test_only_the_folder_index_takes_a_scoped_reader() -> None:
    class OtherStore:
        chunks: list[Chunk] = []

    assert scoped(OtherStore(), Access.all()).__class__ is OtherStore
    with pytest.raises(ConfigError, match="need the folder index"):
        scoped(OtherStore(), Access(tags=frozenset({"x"})))


def test_the_mask_must_cover_the_index(index: Index, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="allowed mask"):
        index.search("carbon", k=2, allowed=np.ones(2, dtype=bool))
