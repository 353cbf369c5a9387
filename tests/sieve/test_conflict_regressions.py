"""A disagreement is stated only when two independent sources answer the question with
different values, through ``Pipeline`` (hash embedder, keyword judge, a fake extractive LLM),
with the passages read by the rules and by the extractive reader (``[reading] reader``).

The demo-corpus cases read the bundled demo files themselves: each once gave a false "The
sources disagree" line (a description question read as names, a prize of another year, a list
of laureates, a neighbouring threshold, the inventor of another microscope)."""

from __future__ import annotations

import re

import pytest
from tests.sieve.test_trust_acceptance import FakeLLM, KeywordJudge, build_index, first_passage_sentence, sieve

from ragsieve.demo import demo_corpus_dir

MICROSCOPE_Q = "Who invented the scanning tunnelling microscope, and where?"
# how the checks read passages: the rules, and the shipped extractive reader (a real model: slow)
READERS = ["rules", pytest.param("minilm", marks=pytest.mark.slow)]
# question -> (demo files whose passages are all kept, words the keyword judge finds relevant)
DEMO_CASES = {
    "What is graphene made of?": (
        [
            "chemistry/035-graphene-chemistry.md",
            "nanoscience/010-buckyballs-in-nanoscience.md",
            "nanoscience/006-carbon-nanotubes.md",
            "nanoscience/008-graphene.md",
        ],
        ("graphene", "carbon"),
    ),
    "Who shared the 2019 Nobel Prize in Chemistry for lithium-ion batteries?": (
        [
            "chemistry/054-click-chemistry.md",
            "chemistry/015-haber-bosch-process.md",
            "chemistry/019-lithium-ion-batteries.md",
        ],
        ("nobel",),
    ),
    "Who received the 2023 Nobel Prize in Chemistry for quantum dots?": (
        [
            "nanoscience/005-discovery-of-quantum-dots.md",
            "chemistry/037-nmr-spectroscopy.md",
            "nanoscience/055-super-resolution-microscopy.md",
            "chemistry/041-x-ray-crystallography.md",
            "chemistry/039-mass-spectrometry.md",
        ],
        ("nobel",),
    ),
    "Above what water contact angle is a surface called superhydrophobic?": (
        ["nanoscience/044-lotus-effect.txt", "nanoscience/063-glossary.jsonl"],
        ("hydrophobic", "contact angle"),
    ),
    MICROSCOPE_Q: (
        [
            "physics/015-quantum-tunnelling.md",
            "nanoscience/011-scanning-tunnelling-microscope.md",
            "nanoscience/012-atomic-force-microscope.md",
        ],
        ("tunnelling", "microscope"),
    ),
    "How does quantum tunnelling let a scanning tunnelling microscope image atoms?": (
        ["physics/015-quantum-tunnelling.md", "nanoscience/011-scanning-tunnelling-microscope.md"],
        ("tunnelling", "microscope"),
    ),
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("question", list(DEMO_CASES))
def test_no_false_conflict_on_the_demo_corpus(tmp_path, question, reader):
    files, relevant = DEMO_CASES[question]
    root = demo_corpus_dir()
    index = build_index(tmp_path, {f: (root / f).read_text(encoding="utf-8") for f in files})
    ans = sieve(index, FakeLLM(first_passage_sentence), KeywordJudge(relevant=relevant), reader).ask(question)
    assert "disagree" not in ans.text
    record = ans.trace.stage("conflict")[0]
    # the rules compare no answer here; the reader may read one answer (the quantum-dot passage's
    # "Bawendi"), which is one group, not a disagreement
    assert record["conflict"] is False and len(record["groups"]) <= (1 if reader == "minilm" else 0)
    # what each passage was read to answer is still in the trace
    assert len(record["passages"]) == len(record["compared"]) >= len(files)



class StreamingFakeLLM(FakeLLM):
    """The extractive fake, streaming its reply word by word (as ``Pipeline.stream`` asks)."""

    def generate_stream(self, prompt, *, max_tokens=256, temperature=0.0, stop=None, seed=None):
        generation = self.generate(prompt)
        words = generation.text.split(" ")
        for n, word in enumerate(words):
            yield word if n == len(words) - 1 else word + " "
        return generation


@pytest.mark.parametrize("question", ["What is graphene made of?", MICROSCOPE_Q])
def test_streaming_keeps_the_streamed_answer_where_no_sources_disagree(tmp_path, question):
    # a false conflict once retracted the streamed answer and put "The sources disagree" in its place
    from ragsieve.sieve.events import Final, Retracted, Token

    files, relevant = DEMO_CASES[question]
    root = demo_corpus_dir()
    index = build_index(tmp_path, {f: (root / f).read_text(encoding="utf-8") for f in files})
    pipe = sieve(index, StreamingFakeLLM(first_passage_sentence), KeywordJudge(relevant=relevant))
    events = list(pipe.stream(question))
    final = events[-1]
    assert isinstance(final, Final) and "disagree" not in final.answer.text
    assert not [e for e in events if isinstance(e, Retracted)]
    streamed = "".join(e.text for e in events if isinstance(e, Token))
    assert streamed and "disagree" not in streamed and final.streamed_is_final

# Two sites give the viaduct's length differently; the other passages are on other subjects, or
# about the viaduct but not its length, and state numbers and dates of their own.
VIADUCT_DOCS = {
    "site-a.example/tarn-viaduct.txt": (
        "The Tarn Viaduct carries the railway across the Tarn gorge. The Tarn Viaduct is 312 metres long "
        "and stands on nine stone piers. It opened in 1884."
    ),
    "site-b.example/tarn-viaduct.txt": (
        "Built by the Southern Railway, the Tarn Viaduct is 290 metres long. Its tallest pier rises "
        "61 metres above the river, and 1,200 workers built it in four years."
    ),
    "site-c.example/harbour.txt": (
        "The harbour at Port Ennis has a breakwater 750 metres long, finished in 1901 after 12 years of work."
    ),
    "site-d.example/tarn-history.txt": (
        "The Tarn valley had 14,000 inhabitants in 1880; 300 of them worked on the viaduct."
    ),
    "site-e.example/bread.txt": "Sourdough bread rises because wild yeast ferments the dough for 12 hours.",
}
VIADUCT_Q = "How long is the Tarn Viaduct?"


@pytest.mark.parametrize("reader", READERS)
def test_two_sites_that_disagree_among_unrelated_passages_are_named_and_nothing_else(tmp_path, reader):
    index = build_index(tmp_path, VIADUCT_DOCS)
    judge = KeywordJudge(relevant=("tarn", "harbour", "bread"))
    ans = sieve(index, FakeLLM(first_passage_sentence), judge, reader).ask(VIADUCT_Q, k=5)
    record = ans.trace.stage("conflict")[0]
    assert record["conflict"] is True and record["decision"] == "both"
    assert sorted(g["answer"] for g in record["groups"]) == ["290 metres", "312 metres"]
    # the statement names the two values with their sites, nothing else (the extractive fake
    # model answers with the opening year, so the sieve abstains and names both sides)
    start = ans.text.index("The sources disagree: ")
    statement = ans.text[start : ans.text.index(").", start) + 2]
    assert re.fullmatch(
        r"The sources disagree: 312 metres \(site-a\.example/tarn-viaduct\.txt(?: \[\d\])?\) vs "
        r"290 metres \(site-b\.example/tarn-viaduct\.txt(?: \[\d\])?\)\.",
        statement,
    ), statement


# News-like passages: two sites name different venues for one final; the others report other
# matches, a transfer and the weather, with venues, dates and numbers of their own.
VENUE_DOCS = {
    "daily-courier.example/final.txt": (
        "Fans are already queueing for tickets. The 2027 Harrow Cup final will be played at Marlow Park on "
        "14 May, the league announced on Tuesday."
    ),
    "northern-post.example/final.txt": (
        "The league confirmed on Tuesday that the 2027 Harrow Cup final will be played at Castle Meadow, "
        "which holds 40,000 spectators."
    ),
    "city-times.example/semifinal.txt": (
        "Last year's semi-final drew 30,000 people to Riverside Arena, where the home side won 2-1 on 3 April."
    ),
    "weekly-review.example/transfers.txt": (
        "Striker Tomas Ferrell signed for Linton Rovers on Monday for a fee of 4 million pounds."
    ),
    "local-news.example/weather.txt": "Heavy rain is expected across the county on Saturday, with 30 mm forecast.",
}
VENUE_Q = "Where will the 2027 Harrow Cup final be played?"


@pytest.mark.parametrize("reader", READERS)
def test_two_sites_with_different_venues_among_news_passages_are_named_and_nothing_else(tmp_path, reader):
    index = build_index(tmp_path, VENUE_DOCS)
    judge = KeywordJudge(relevant=("harrow", "final", "striker", "rain"))
    ans = sieve(index, FakeLLM(first_passage_sentence), judge, reader).ask(VENUE_Q, k=5)
    record = ans.trace.stage("conflict")[0]
    assert record["conflict"] is True and record["decision"] == "both"
    assert sorted(g["answer"] for g in record["groups"]) == ["Castle Meadow", "Marlow Park"]
    start = ans.text.index("The sources disagree: ")
    statement = ans.text[start : ans.text.index(").", start) + 2]
    assert "Riverside" not in statement and "Linton" not in statement and "2027" not in statement
    assert statement.count(" vs ") == 1, statement
    # the reader (when on) read every compared passage; a passage about other matches answers nothing
    by = {p["by"] for p in record["passages"]}
    assert by == ({"reader"} if reader == "minilm" else {"extract"})


# One site names the engineer in full, the other by his surname alone; a third passage names
# another Varnum, so its "Varnum" may be either man.
VARNUM_DOCS = {
    "site-a.example/varnum.txt": (
        "Henrik Aldous Varnum was a Danish engineer. Henrik Aldous Varnum was born in 1871 in Aarhus."
    ),
    "site-b.example/ober-canal.txt": "The Ober canal was his work. Varnum was born in 1874, the son of a miller.",
}
VARNUM_Q = "When was Henrik Aldous Varnum born?"


@pytest.mark.parametrize(
    ("second", "groups"),
    [
        (VARNUM_DOCS["site-b.example/ober-canal.txt"], ["1871", "1874"]),
        # the second site answers nothing: one answer, no conflict
        ("Peter Varnum ran the mill. Varnum was born in 1874, the son of a miller.", ["1871"]),
    ],
    ids=["surname-alone-is-compared", "surname-shared-with-another-person-is-not"],
)
@pytest.mark.parametrize("reader", READERS)
def test_a_site_naming_the_entity_by_its_surname(tmp_path, second, groups, reader):
    index = build_index(tmp_path, VARNUM_DOCS | {"site-b.example/ober-canal.txt": second})
    ans = sieve(index, FakeLLM(first_passage_sentence), KeywordJudge(relevant=("varnum",)), reader).ask(VARNUM_Q)
    record = ans.trace.stage("conflict")[0]
    assert record["conflict"] is (len(groups) == 2)
    assert sorted(g["answer"] for g in record["groups"]) == groups
