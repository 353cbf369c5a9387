"""The public search boundary: every input gives hits or one InputError, in the API and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers import HashEmbedder
from tests.reliability.support import FAST, run_cli, write_corpus

from ragsieve.errors import InputError
from ragsieve.index import Index
from ragsieve.types import SearchHit

META = FAST.model_copy(update={"ingest": FAST.ingest.model_copy(update={"metadata_fields": ["kind"]})})


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("inputs")
    built = Index.build(write_corpus(root / "corpus"), root / "idx", config=META, embedder=HashEmbedder())
    built.warm_up()
    return built


@pytest.mark.parametrize("k", [0, -1, 2.5, True, "3", None, float("nan")])
def test_k_must_be_a_whole_number_of_at_least_one(index, k):
    with pytest.raises(InputError, match="k must be"):
        index.search("planet", k=k)


def test_numpy_integers_are_fine_for_k(index):
    assert len(index.search("planet", k=np.int64(2))) == 2


def test_an_unknown_filter_field_lists_the_fields_that_exist(index):
    with pytest.raises(InputError, match=r"no chunk .* field 'knd'.*fields are: .*kind"):
        index.search("planet", where={"knd": "plant"})
    hits = index.search("light", where={"kind": "plant"})
    assert hits and {h.chunk.metadata["kind"] for h in hits} == {"plant"}
    assert index.search("light", where={"metadata.kind": ["plant", "microbe"]})
    with pytest.raises(InputError, match="needs a text or number value"):
        index.search("light", where={"kind": {"$ne": "plant"}})


queries = st.one_of(
    st.text(st.characters(exclude_categories=[]), max_size=200),
    st.sampled_from(["", " ", "\n\t", "\x00", "red planet", "🚀 Mars?", "\ud800 lone surrogate"]),
    st.integers(1000, 5000).map(lambda n: "mars " * n),
    st.none(),
    st.integers(),
)
ks = st.one_of(st.integers(-3, 30), st.floats(allow_nan=True), st.booleans(), st.none(), st.text(max_size=3))
scalars = st.one_of(st.text(max_size=10), st.integers(), st.floats(allow_nan=False), st.booleans())
where_keys = st.one_of(
    st.sampled_from(["domain", "source", "kind", "metadata.kind", "id", "title"]), st.text(max_size=8)
)
wheres = st.one_of(
    st.none(),
    st.dictionaries(where_keys, st.one_of(scalars, st.lists(scalars, max_size=3), st.none(), st.dictionaries(
        st.text(max_size=3), scalars, max_size=2)), max_size=3),
    st.lists(st.text(max_size=3), max_size=2),
    st.text(max_size=5),
)
domains = st.one_of(
    st.none(), st.lists(st.sampled_from(["astronomy", "biology", "geology", ""]), max_size=3), st.text(max_size=5)
)
modes = st.sampled_from(["dense", "sparse", "hybrid", "fuzzy", ""])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=queries, k=ks, where=wheres, domains=domains, mode=modes)
def test_any_search_input_gives_hits_or_an_input_error(index, query, k, where, domains, mode):
    try:
        hits = index.search(query, k=k, mode=mode, where=where, domains=domains)
    except InputError:
        return
    assert isinstance(hits, list) and len(hits) <= k
    assert all(isinstance(h, SearchHit) and np.isfinite(h.score) for h in hits)
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    if domains:
        assert {h.chunk.domain for h in hits} <= set(domains)


@pytest.fixture()
def cli_index(tmp_path: Path, fake_embedder, capsys) -> Path:
    code, _, err = run_cli(capsys, "ingest", write_corpus(tmp_path / "corpus"), "--index", tmp_path / "idx")
    assert code == 0, err
    return tmp_path / "idx"


@pytest.mark.parametrize(
    "args, message",
    [
        (["-k", "0"], "k must be at least 1"),
        (["-k", "-1"], "k must be at least 1"),
        (["--where", "knd=plant"], "no chunk in this index has a field 'knd'"),
    ],
)
def test_cli_search_rejects_what_the_api_rejects(cli_index, capsys, args, message):
    code, out, err = run_cli(capsys, "search", "planet", "--index", cli_index, *args)
    assert code == 2 and message in err and not out and "Traceback" not in err


def test_cli_info_reports_the_generation_and_verifies(cli_index, capsys):
    code, out, _ = run_cli(capsys, "info", "--index", cli_index, "--verify", "--json")
    data = json.loads(out)
    assert code == 0 and data["verified"] and data["generation"] and data["format_version"] == 2
    gen = cli_index / "generations" / data["generation"] / "chunks.jsonl"
    raw = bytearray(gen.read_bytes())
    raw[5] ^= 0x01
    gen.write_bytes(bytes(raw))
    code, _, err = run_cli(capsys, "info", "--index", cli_index, "--verify")
    assert code == 2 and "chunks.jsonl) at" in err and "does not match the checksum" in err and "re-ingest" in err
