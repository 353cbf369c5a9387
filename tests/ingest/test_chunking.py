from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ragsieve.ingest import chunk_text, count_tokens, split_sentences


def test_split_sentences_handles_abbreviations_initials_and_numbers():
    text = "Dr. Smith met J. R. Tolkien in the U.S. in 1950. It rained 3.5 cm! Was it cold? Yes."
    assert split_sentences(text) == [
        "Dr. Smith met J. R. Tolkien in the U.S. in 1950.",
        "It rained 3.5 cm!",
        "Was it cold?",
        "Yes.",
    ]


def test_paragraph_break_ends_a_sentence_without_punctuation():
    assert split_sentences("A heading\n\nBody text here.") == ["A heading", "Body text here."]


def test_sentence_unit_gives_one_chunk_per_sentence():
    chunks = chunk_text("One is here. Two is there. Three is everywhere.", unit="sentence")
    assert [c.text for c in chunks] == ["One is here.", "Two is there.", "Three is everywhere."]
    assert [c.position for c in chunks] == [0, 1, 2]


def test_window_packs_whole_sentences_and_overlaps():
    text = "Alpha beta gamma. Delta epsilon zeta. Eta theta iota. Kappa lambda mu."
    chunks = chunk_text(text, max_tokens=8, overlap_tokens=4)
    assert [c.text for c in chunks] == [
        "Alpha beta gamma. Delta epsilon zeta.",
        "Delta epsilon zeta. Eta theta iota.",
        "Eta theta iota. Kappa lambda mu.",
    ]
    assert all(c.n_tokens <= 8 for c in chunks)


def test_overlong_sentence_is_cut_at_word_boundaries():
    text = " ".join(f"w{i}" for i in range(25)) + "."
    chunks = chunk_text(text, max_tokens=10)
    assert all(c.n_tokens <= 10 for c in chunks)
    assert " ".join(c.text for c in chunks).replace(" .", ".") == text


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(alphabet="abcdefghij ", min_size=1, max_size=40), min_size=1, max_size=12),
    st.integers(min_value=3, max_value=40),
    st.integers(min_value=0, max_value=10),
)
def test_window_chunks_respect_the_budget_and_keep_every_word(sentences, max_tokens, overlap):
    text = ". ".join(s.strip() or "x" for s in sentences) + "."
    chunks = chunk_text(text, max_tokens=max_tokens, overlap_tokens=overlap)
    assert all(c.n_tokens <= max_tokens for c in chunks)
    words_in = [w.strip(".") for w in text.split() if w.strip(".")]
    covered = {w.strip(".") for c in chunks for w in c.text.split()}
    assert set(words_in) <= covered
    assert count_tokens(text) <= sum(c.n_tokens for c in chunks)
