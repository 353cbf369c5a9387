"""Typed value extraction and matching after normalisation."""

from __future__ import annotations

import pytest

from ragsieve.values import Value, extract_values, find_entity, find_in, fold, nearest


def kinds(text: str) -> list[tuple[str, str]]:
    return [(v.kind, v.norm) for v in extract_values(text)]


def one(text: str) -> Value:
    [v] = extract_values(text)
    return v


def test_numbers_in_digits_words_and_ordinals() -> None:
    assert kinds("It has 1,200 rooms and 3.5 floors.") == [("number", "1200"), ("number", "3.5")]
    assert kinds("twenty-five people, two hundred and fifty seats") == [("number", "25"), ("number", "250")]
    assert kinds("the 3rd and the third") == [("number", "3"), ("number", "3")]
    assert kinds("1.5 million") == [("number", "1500000")]
    assert kinds("one of them came first") == []  # pronoun and "earliest" are not counts
    assert kinds("a temperature of −40") == [("number", "-40")]


def test_number_matching_uses_stated_precision() -> None:
    assert find_in(one("twelve"), "There were 12 of them.") is not None
    assert find_in(one("1.5 million"), "a population of 1,534,000") is not None
    assert find_in(one("1.5 million"), "a population of 1,634,000") is None
    assert find_in(one("301"), "There were 300 of them.") is None


def test_dates_in_many_formats() -> None:
    same = ["12 March 1933", "March 12, 1933", "1933-03-12", "12th of March 1933"]
    assert {one(t).norm for t in same} == {"1933-03-12"}
    assert find_in(one("1933"), "on 12 March 1933") is not None  # a year stated by a full date
    assert find_in(one("12 March 1933"), "in 1933") is None  # the day is not stated
    assert find_in(one("March 1933"), "on 1933-03-12") is not None
    assert find_in(one("April 1933"), "on 1933-03-12") is None
    assert one("03/12/1933").norm == "1933-12-03|1933-03-12"  # both readings kept
    assert find_in(one("1930s"), "It opened in 1937.") is not None
    assert one("300 BC").norm == "-300"
    assert find_in(one("in 1912"), "it was 1933") is None


def test_quantities_convert_between_units() -> None:
    k = one("4.2 kelvin")
    assert k.kind == "quantity" and k.unit == "kelvin"
    assert find_in(k, "at −268.95 °C") is not None
    assert find_in(one("1.875 Kelvin"), "at about 4.2 kelvin") is None
    assert find_in(one("5 miles"), "a distance of 8.05 km") is not None
    assert find_in(one("5 miles"), "a distance of 9 km") is None
    assert find_in(one("3 kg"), "3 metres") is None  # different dimensions never match
    assert find_in(one("$5 million"), "it cost 5 million dollars") is not None
    assert find_in(one("45%"), "45 percent of voters") is not None
    assert one("1912 metres").kind == "quantity"  # a unit after a four-digit number: not a year


def test_names_with_initials_case_and_diacritics() -> None:
    assert kinds("He met Walther Meissner in Berlin.") == [("name", "walther meissner"), ("name", "berlin")]
    ev = "Walther Meissner and Robert Ochsenfeld discovered it."
    assert find_in(one("by W. Meissner"), ev) is not None
    assert find_in(one("by MEISSNER"), ev) is not None
    assert find_in(one("by Walther Ochsenfeld"), ev) is None
    assert find_in(one("by José Martí"), "Jose Marti wrote it.") is not None
    assert find_in(one("by John Kennedy"), "John F. Kennedy said so.") is not None
    assert kinds("The Normans came.") == [("name", "normans")]  # leading "The" dropped
    assert kinds("Currently it runs.") == []  # a sentence-opening adverb is not a name
    # a capitalised opener is read (answers open with their subject) and matches in any case
    assert find_in(one("Scientists came."), "Many scientists came.") is not None
    assert find_in(one("American drivers won."), "A driver won.") is None  # "A" is not an initial
    assert fold("Meißner Ångström") == "meissner angstrom"


def test_identifiers_are_exact_tokens() -> None:
    assert kinds("so call os.path.join() or ASN1_item_d2i, parseHTML, HttpClient, SHA256.") == [
        ("identifier", "os.path.join()"),
        ("identifier", "ASN1_item_d2i"),
        ("identifier", "parseHTML"),
        ("identifier", "HttpClient"),
        ("identifier", "SHA256"),
    ]
    assert find_in(one("use ASN1_DEN"), "see ASN1_DEN_x and ASN1_item") is None
    assert find_in(one("use os.path.join()"), "call os.path.join(a, b)") is not None
    assert kinds("Use ASN1_DEN[1].") == [("identifier", "ASN1_DEN")]  # the citation marker is not a value
    assert all(k != "identifier" for k, _ in kinds("e.g. the U.S. team"))
    # a surname with an inner capital after a given name inside a sentence is a name; alone, or
    # after a sentence's first word, it stays a code name
    assert kinds("claimed by William McLellan in 1960") == [("name", "william mclellan"), ("date", "1960")]
    assert kinds("Call HttpClient now.") == [("identifier", "HttpClient")]  # a verb opens the sentence
    assert kinds("the class HttpClient opens it") == [("identifier", "HttpClient")]


@pytest.mark.parametrize(
    ("claim", "evidence", "expected"),
    [
        ("in 1912", "in 1933 and 1850", "1933"),
        ("7 km", "12 km or 3 miles", "3 miles"),
        ("Oxfrod", "between Oxford and Rome", "Oxford"),
    ],
)
def test_nearest_value_of_the_same_kind(claim: str, evidence: str, expected: str) -> None:
    value = extract_values("It was " + claim)[-1]
    found = nearest(value, evidence)
    assert found is not None and found.text == expected


def test_one_letter_units_need_a_plain_digit_number() -> None:
    assert kinds("at 4.2 K.") == [("quantity", "4.2 kelvin")]
    assert kinds("the 2013 A. Sugar Bowl") == [("date", "2013"), ("name", "sugar bowl")]
    assert [k for k, _ in kinds("the Second B. of Guam")] == ["number", "name"]


@pytest.mark.parametrize(
    ("phrase", "unit"),
    [
        ("km", "kilometer"),
        ("kilometres", "kilometer"),
        ("ms", "millisecond"),
        ("miles per hour", "mile/hour"),
        ("km/h", "kilometer/hour"),
        ("square kilometres", "kilometer**2"),
        ("km2", "kilometer**2"),
        ("degrees Celsius", "degree_Celsius"),
        ("°C", "degree_Celsius"),
        ("light years", "light_year"),
        ("years", "year"),
        ("%", "percent"),
        ("per cent", "percent"),
        # English words pint's free-text parser takes for units are words here
        ("in", None),
        ("are", None),
        ("a", None),
        ("units", None),
        ("people", None),
        ("mg kg", None),
    ],
)
def test_units_are_pints_read_strictly(phrase: str, unit: str | None) -> None:
    from ragsieve.values import parse_unit

    assert parse_unit(phrase) == unit


def test_values_of_one_measure_are_told_from_values_of_another() -> None:
    from ragsieve.values import same_measure

    length, mass, other_length = (one(t) for t in ("312 metres", "nine stone", "2 km"))
    assert [v.kind for v in (length, mass, other_length)] == ["quantity"] * 3
    assert same_measure(length, other_length) and not same_measure(length, mass)
    assert same_measure(one("in 1884"), one("in 1901"))
    assert not same_measure(length, one("in 1884"))


def test_threads_racing_for_the_first_quantity_load_the_unit_registry_once() -> None:
    import threading

    from ragsieve.values import quantities as values

    values._load_registry.cache_clear()
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(values._registry())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert values.parse_unit("km") == "kilometer"
    assert len({id(r) for r in got}) == 1 and values._load_registry.cache_info().misses == 1


def _unit_readings(words: list[str], monkeypatch) -> list[str | None]:
    """How ``parse_unit`` reads each of ``words``, with no reading stored by an earlier call."""
    from ragsieve.values import quantities as values

    monkeypatch.setattr(values, "_UNIT_READINGS", values._StoredReadings())
    monkeypatch.setattr(values._UNIT_READINGS, "_stored", {})
    values.parse_unit.cache_clear()
    return [values.parse_unit(w) for w in words]


def test_the_stored_unit_words_reject_only_what_pint_cannot_read(monkeypatch) -> None:
    """Parity: every phrase reads the same with the stored unit words deciding which words need
    pint's registry as with the registry asked about every word (pint's own reading is the
    reference): units, prefixed and plural units, their case variants, stop words, ordinary words."""
    from ragsieve.lexicon import STOP_WORDS
    from ragsieve.values import quantities as values

    reg = values._registry()
    stored = values._unit_words_from(values._unit_words_data(reg))
    assert stored is not None
    names = sorted({d.name for d in reg._units.values()})
    words = list(names) + [d.symbol for d in reg._units.values() if d.symbol]
    words += [f"{p}{n}s" for p in ("kilo", "milli", "k", "M", "") for n in names[::7]]
    words += [w.capitalize() for w in names[::5]] + [w.upper() for w in names[::11]]
    words += sorted(STOP_WORDS) + [w.capitalize() for w in sorted(STOP_WORDS)]
    words += [
        "landed", "people", "Moon", "Apollo", "walked", "river", "metres",
        "feet", "miles", "per", "hour", "km/h", "m/s²", "km²", "°C",
    ]
    words += ["square metres", "cubic feet", "miles per hour", "light years", "degrees Celsius", "nautical miles"]
    monkeypatch.setattr(values, "_stored_unit_words", lambda: None)
    reference = _unit_readings(words, monkeypatch)
    monkeypatch.setattr(values, "_stored_unit_words", lambda: stored)
    assert _unit_readings(words, monkeypatch) == reference
    assert sum(r is not None for r in reference) > len(names) // 2  # the list holds units, not only words
    assert not values._may_name_a_unit("landed") and values._may_name_a_unit("kilometres")


def test_a_later_process_reads_stored_units_without_importing_pint(tmp_path) -> None:
    """The first process reads the units with pint and stores its readings; the next one, given
    the same words, answers the same without pint; a word it has not seen loads pint again."""
    import json
    import os
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from ragsieve.values import parse_unit\n"
        "got = [parse_unit(w) for w in sys.argv[1:]]\n"
        "print(json.dumps([got, 'pint' in sys.modules]))\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}

    def run(*words: str) -> tuple[list[str | None], bool]:
        done = subprocess.run(
            [sys.executable, "-c", code, *words], capture_output=True, text=True, timeout=120, env=env, check=True
        )
        got, imported = json.loads(done.stdout.strip().splitlines()[-1])
        return got, imported

    words = ("km", "m/s²", "in", "landed", "kg²", "miles per hour")
    first, imported = run(*words)
    assert imported and first[0] == "kilometer" and first[3] is None
    assert run(*words) == (first, False)
    assert run("furlongs")[1] is True


def test_unit_words_are_stored_once_read_back_and_a_damaged_file_ignored(tmp_path, monkeypatch) -> None:
    from ragsieve.values import quantities as values

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(values, "_UNIT_WORDS_WRITTEN", [])
    values._stored_unit_words.cache_clear()
    try:
        values._registry()
        path = values._unit_words_path()
        assert path is not None and path.is_file()
        values._stored_unit_words.cache_clear()
        stored = values._stored_unit_words()
        assert stored is not None and "meter" in stored.names
        path.write_text('{"prefixes": [1]}', encoding="utf-8")  # damaged: not used, nothing rejected
        values._stored_unit_words.cache_clear()
        assert values._stored_unit_words() is None and values._may_name_a_unit("landed")
    finally:
        values._stored_unit_words.cache_clear()


def test_a_damaged_unit_definition_cache_is_parsed_again(tmp_path, monkeypatch) -> None:
    import os
    import time

    from ragsieve.values import quantities as values

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    values._load_registry.cache_clear()
    try:
        assert str(values._registry().parse_units("km")) == "kilometer"
        pickles = list(tmp_path.glob("ragsieve/pint-*/*.pickle"))
        assert pickles, "pint's parsed definitions were not cached"
        assert (pickles[0].parent.stat().st_mode & 0o077) == 0, "the cache folder is readable by others"
        for path in pickles:
            path.write_bytes(b"half-written")
            os.utime(path, (time.time() + 60, time.time() + 60))  # newer than the definitions: pint trusts it
        values._load_registry.cache_clear()
        registry = values._registry()
        assert str(registry.parse_units("km")) == "kilometer" and str(registry.parse_units("mg")) == "milligram"
    finally:
        values._load_registry.cache_clear()


def _name(text: str) -> Value:
    return extract_values(text, ("name",))[0]


@pytest.mark.parametrize(
    ("name", "evidence", "form"),
    [
        # the surname alone
        ("John Henry Seadlund", "Seadlund was executed in 1938.", "Seadlund"),
        # more words between the first and the last
        ("Mari Fitzduff", "Mari Christine Fitzduff (born 1947) is an Irish writer.", "Mari Christine Fitzduff"),
        # the trailing words of a title
        ("Sir Charles Doyly", "Charles Doyly sketched incessantly.", "Charles Doyly"),
        # what find_in already reads: a leading form, an acronym
        ("Sony Corporation", "Sony released it in 1979.", "Sony"),
        ("International Business Machines", "IBM built it.", "IBM"),
        # the name as written
        ("Walther Meissner", "Walther Meissner found it.", "walther meissner"),
        # a three-letter surname is long enough (NAME_TAIL_MIN_CHARS)
        ("Ang Lee", "Lee directed the film in 2000.", "Lee"),
    ],
)
def test_find_entity_reads_a_name_in_its_other_forms(name: str, evidence: str, form: str) -> None:
    match = find_entity(_name(name), evidence)
    assert match is not None and match.evidence.text == form


@pytest.mark.parametrize(
    ("name", "evidence"),
    [
        # a different person sharing the given name
        ("Walther Meissner", "Walther Ochsenfeld found it."),
        # the given name alone, beside a different person with that given name
        ("Walther Meissner", "Walther Ochsenfeld found it; Walther wrote it up."),
        # the surname alone, beside a different person with that surname (in the same text, or
        # elsewhere in the passage the sentence belongs to)
        ("Kasper Schmeichel", "Peter Bolesław Schmeichel MBE is a former goalkeeper. Schmeichel won in 1992."),
        ("John Henry Seadlund", "Paul Seadlund was his brother. Seadlund was executed."),
        # a different bridge sharing the generic last word
        ("Street Bridge", "The Williams Bridge was damaged in 1982."),
        # a trailing form shorter than three letters
        ("Minh Ho", "Ho arrived in 1950."),
        # a different surname
        ("Mari Fitzduff", "Mari Christine Baker is an Irish writer."),
    ],
)
def test_find_entity_does_not_read_another_entity(name: str, evidence: str) -> None:
    assert find_entity(_name(name), evidence) is None


def test_find_entity_reads_a_sentence_against_its_passage() -> None:
    passage = "Peter Schmeichel was a goalkeeper. Schmeichel won in 1992."
    kasper = _name("Kasper Schmeichel")
    assert find_entity(kasper, "Schmeichel won in 1992.") is not None
    assert find_entity(kasper, "Schmeichel won in 1992.", within=passage) is None


def test_find_entity_trailing_forms_can_be_turned_off() -> None:
    v = _name("John Henry Seadlund")
    assert find_entity(v, "Seadlund was executed.", tail_min=None) is None
    assert find_entity(v, "Seadlund was executed.", tail_min=9) is None  # "seadlund" has 8 letters
    assert find_entity(v, "Seadlund was executed.", tail_min=8) is not None


def test_the_trailing_form_setting_is_read_where_it_is_defined(monkeypatch) -> None:
    from ragsieve.values import evidence

    v = _name("John Henry Seadlund")
    monkeypatch.setattr(evidence, "NAME_TAIL_MIN_CHARS", 9)
    assert find_entity(v, "Seadlund was executed.") is None
    monkeypatch.setattr(evidence, "NAME_TAIL_MIN_CHARS", 8)
    assert find_entity(v, "Seadlund was executed.") is not None


def test_the_value_readers_import_nothing_above_the_lexicon() -> None:
    """The value readers sit beneath the reading layer (``ragsieve.text`` reads values with them):
    each module of ``ragsieve.values`` imports, of ragsieve, only the lexicon, the file helpers and
    its own package, wherever in the file the import is."""
    import ast
    from pathlib import Path

    import ragsieve.values

    allowed = ("ragsieve.lexicon", "ragsieve.io", "ragsieve.values")
    found: list[str] = []
    for path in sorted(Path(ragsieve.values.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):  # a relative import: its own package, or above it
                names = ["ragsieve.values" if node.level == 1 else "." * node.level + (node.module or "")]
            for name in names:
                if name.startswith(("ragsieve", ".")) and not name.startswith(allowed):
                    found.append(f"{path.name} imports {name}")
    assert len(list(Path(ragsieve.values.__file__).parent.glob("*.py"))) >= 8
    assert not found, found
