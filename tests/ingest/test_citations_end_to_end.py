"""Citations end to end: a folder of a multi-page PDF (built here), HTML and Markdown goes through
``ragsieve ingest`` into the index layout ingest writes, and ``search`` names file and page (PDF)
or file and heading (HTML, Markdown), with a link that opens the file."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
from tests.helpers import HashEmbedder
from tests.ingest.test_extraction import FIXTURES, write_guide

from ragsieve.citations import Citation, citation_uri
from ragsieve.cli import main
from ragsieve.config import PipelineConfig
from ragsieve.index import Index
from ragsieve.store.milvus import _chunk, _row
from ragsieve.types import Chunk


def _corpus(root: Path) -> Path:
    corpus = root / "corpus"
    shutil.copytree(FIXTURES / "botany", corpus / "botany")
    write_guide(corpus / "manuals" / "guide.pdf")
    return corpus


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def cli_index(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("citations")
    with contextlib.suppress(SystemExit):
        main(["ingest", str(_corpus(root)), "--index", str(root / "idx"), "--json"])
    return root / "idx"


def _top(capsys, index: Path, query: str, domain: str) -> dict:
    code, out, err = run(
        capsys, "search", query, "--index", str(index), "--mode", "sparse", "--where", f"domain={domain}", "-k", "1",
        "--json",
    )
    assert code == 0, err
    return json.loads(out)["hits"][0]


def test_search_cites_the_pdf_page_and_its_label(cli_index, capsys):
    hit = _top(capsys, cli_index, "bracken hillsides", "manuals")
    assert (hit["path"], hit["page"], hit["page_label"]) == ("manuals/guide.pdf", 4, "3")
    assert hit["citation"] == "manuals/guide.pdf#page=4 (page 3)"
    hit = _top(capsys, cli_index, "vascular plants reproduce", "manuals")
    assert hit["page"] == 2 and "reproduce by spores" in hit["text"]


def test_search_cites_the_heading_of_html_and_markdown(cli_index, capsys):
    hit = _top(capsys, cli_index, "heart-shaped prothallus", "botany")
    assert hit["path"] == "botany/ferns.html" and hit["heading"] == ["Ferns", "Life cycle"]
    assert hit["citation"] == "botany/ferns.html#Ferns > Life cycle"
    hit = _top(capsys, cli_index, "rhizoids anchor", "botany")
    assert hit["citation"] == "botany/mosses.md#Mosses > Structure" and hit["page"] is None


def test_the_index_layout_stores_the_locations(cli_index):
    from ragsieve.index import storage

    generation, _ = storage.read_current(cli_index)
    rows = [json.loads(line) for line in (cli_index / "generations" / generation / "chunks.jsonl").open()]
    pdf = [r for r in rows if r["doc_id"] == "manuals/guide.pdf"]
    assert [r["page"] for r in pdf] == [1, 2, 3, 4] and all("char_start" in r for r in pdf)


def test_text_search_prints_the_citation_whole(cli_index, capsys):
    code, out, _ = run(capsys, "search", "bracken hillsides", "--index", str(cli_index), "--mode", "sparse",
                       "--where", "domain=manuals", "-k", "1")
    assert code == 0 and "manuals/guide.pdf#page=4 (page 3)" in out


def test_locations_survive_a_rebuild_and_link_the_file(tmp_path):
    corpus = _corpus(tmp_path)
    with Index.build(corpus, tmp_path / "idx", PipelineConfig(), embedder=HashEmbedder()) as index:
        chunk = next(c for c in index.chunks if c.page == 3)
        assert index.corpus_root == corpus.resolve()
        uri = citation_uri(Citation.from_chunk(chunk), index.corpus_root)
        assert uri == (corpus.resolve() / "manuals" / "guide.pdf").as_uri() + "#page=3"
    # A re-ingest of unchanged files reuses the stored chunks, locations included.
    with Index.build(corpus, tmp_path / "idx", PipelineConfig(), embedder=HashEmbedder()) as again:
        assert [c.to_dict() for c in again.chunks] == [c.to_dict() for c in index.chunks]


def test_an_index_built_before_locations_is_rechunked(tmp_path, monkeypatch):
    from ragsieve.index import BuildReport
    from ragsieve.index import store as index_store

    corpus = _corpus(tmp_path)
    monkeypatch.setattr(index_store, "CHUNK_FORMAT", 1)  # as an index from before locations
    Index.build(corpus, tmp_path / "idx", PipelineConfig(), embedder=HashEmbedder()).close()
    monkeypatch.undo()
    reports = []
    for _ in range(2):
        reports.append(BuildReport())
        Index.build(corpus, tmp_path / "idx", PipelineConfig(), embedder=HashEmbedder(), report=reports[-1]).close()
    assert reports[0].files_unchanged == 0 and reports[0].files_added == 3  # re-chunked once
    assert reports[1].files_unchanged == 3  # then reused


def test_milvus_rows_keep_the_location():
    import numpy as np

    chunk = Chunk(id="g.pdf:1", text="t", doc_id="g.pdf", source="g.pdf", metadata={"lang": "en"}, path="g.pdf",
                  page=2, page_label="ii", heading=["A"], char_start=0, char_end=1, url="https://example.org/g")
    row = _row(chunk, np.zeros(4, dtype=np.float32))
    assert _chunk(json.loads(json.dumps(row))) == chunk
    plain = Chunk(id="a", text="t", doc_id="a", source="a", metadata={"lang": "en"})
    assert _row(plain, np.zeros(4, dtype=np.float32))["metadata"] == {"lang": "en"}
    assert _chunk(_row(plain, np.zeros(4, dtype=np.float32))) == plain
