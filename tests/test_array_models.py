"""Models stored as arrays give scikit-learn's predictions and probabilities (within 1e-6)
with numpy alone: the bundled task router, the domain routers, the TF-IDF analyzers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from tests.route.conftest import DOMAINS, QUESTIONS, HashEmbedder

from ragsieve.array_models import LinearHead, TfidfArrays
from ragsieve.route import DomainRouter
from ragsieve.route.router import ARRAY_FILE, MODEL_FILE
from ragsieve.tasks.classifier import TfidfTaskClassifier, bundled_resource_path, training_fingerprint
from ragsieve.tasks.labels import load_task_requests

HELD_OUT = Path(__file__).resolve().parents[1] / "src/ragsieve/tasks/data/task_requests_heldout_phrasings.jsonl"

ODD_TEXTS = [
    "",
    "a",
    "   Spaces\t\tand\nnewlines  everywhere ",
    "Ünïcode naïve café — résumé?",
    "x y z",
    "What's the half-life of C-14 (carbon 14)?",
    "the the the the of of",
]


def held_out_texts() -> list[str]:
    rows = [json.loads(line)["text"] for line in HELD_OUT.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r.text for r in load_task_requests("test")] + rows


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ngram_range": (1, 2), "sublinear_tf": True},
        {"ngram_range": (1, 2), "stop_words": "english", "dtype": np.float32, "sublinear_tf": True},
        {"analyzer": "char_wb", "ngram_range": (2, 4), "sublinear_tf": True},
        {"analyzer": "char_wb", "ngram_range": (3, 5), "lowercase": False},
        {"ngram_range": (2, 3)},
    ],
)
def test_tfidf_arrays_match_sklearn(kwargs: dict) -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer

    train = [r.text for r in load_task_requests("train")][:300]
    vec = TfidfVectorizer(**kwargs).fit(train)
    arrays = TfidfArrays.from_sklearn(vec)
    texts = held_out_texts() + ODD_TEXTS
    expected = vec.transform(texts).toarray()
    got = np.zeros_like(expected)
    for i, (cols, vals) in enumerate(arrays.transform(texts)):
        got[i, cols] = vals
    np.testing.assert_allclose(got, expected, atol=1e-6)


def test_task_router_arrays_reproduce_sklearn_on_held_out_texts() -> None:
    train = load_task_requests("train")
    clf = TfidfTaskClassifier().fit_sklearn([r.text for r in train[:400]], [r.label for r in train[:400]])
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        sk = TfidfTaskClassifier()._build().fit([r.text for r in train[:400]], [r.label for r in train[:400]])
    texts = held_out_texts() + [t for t in ODD_TEXTS if t.strip()]
    np.testing.assert_allclose(clf.predict_proba(texts), sk.predict_proba(texts), atol=1e-6)
    assert clf.predict(texts) == [str(x) for x in sk.predict(texts)]


def test_bundled_task_router_is_the_fit_of_the_bundled_data() -> None:
    """Fails when the training data or defaults change without re-running the writer
    (``python -m ragsieve.tasks.classifier --write-bundled``)."""
    train = load_task_requests("train")
    texts, labels = [r.text for r in train], [r.label for r in train]
    bundled = TfidfTaskClassifier.load_bundled()
    assert bundled.fingerprint_ == training_fingerprint(TfidfTaskClassifier()._hyperparameters(), texts, labels)
    fresh = TfidfTaskClassifier().fit_sklearn(texts, labels)
    held = held_out_texts()
    assert bundled.predict(held) == fresh.predict(held)
    # the same scikit-learn version reproduces the fit exactly; another may differ in the last digits
    np.testing.assert_allclose(bundled.predict_proba(held), fresh.predict_proba(held), atol=1e-4)


def test_fit_on_the_bundled_split_loads_instead_of_training(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("fit trained although the stored fit matches")

    monkeypatch.setattr(TfidfTaskClassifier, "fit_sklearn", no_training)
    train = load_task_requests("train")
    clf = TfidfTaskClassifier().fit([r.text for r in train], [r.label for r in train])
    assert clf.classify("Write a short poem about the sea").label == "text_generation"
    # other data or hyperparameters train for real
    with pytest.raises(AssertionError, match="trained"):
        TfidfTaskClassifier(C=1.0).fit([r.text for r in train], [r.label for r in train])
    with pytest.raises(AssertionError, match="trained"):
        TfidfTaskClassifier().fit([r.text for r in train[:-1]], [r.label for r in train[:-1]])


def test_task_router_save_load_roundtrip_and_old_skops_files(tmp_path: Path) -> None:
    from ragsieve.safe_models import save_estimator

    train = load_task_requests("train")[:200]
    texts, labels = [r.text for r in train], [r.label for r in train]
    clf = TfidfTaskClassifier(C=2.0).fit_sklearn(texts, labels)
    path = clf.save(tmp_path / "router.npz")
    loaded = TfidfTaskClassifier.load(path)
    held = held_out_texts()
    np.testing.assert_allclose(loaded.predict_proba(held), clf.predict_proba(held), atol=1e-12)
    assert loaded.C == 2.0
    # a .skops file written by an earlier ragsieve still loads (through skops, once)
    old = tmp_path / "old.skops"
    sk = TfidfTaskClassifier(C=2.0)._build().fit(texts, labels)
    save_estimator(sk, old)
    (tmp_path / "old.skops.json").write_text(json.dumps(TfidfTaskClassifier(C=2.0).to_dict()), encoding="utf-8")
    np.testing.assert_allclose(TfidfTaskClassifier.load(old).predict_proba(held), sk.predict_proba(held), atol=1e-6)


def test_bundled_resource_is_plain_arrays() -> None:
    path = bundled_resource_path()
    with np.load(path, allow_pickle=False) as data:  # would raise on object arrays
        assert {"word_terms", "char_terms", "head_coef"} <= set(data.files)


def _domain_texts() -> tuple[list[str], list[str]]:
    texts = [t for docs in DOMAINS.values() for t in docs]
    return texts, [d for d, docs in DOMAINS.items() for _ in docs]


@pytest.mark.parametrize("classifier", ["logreg", "multinomial-nb", "embedding-logreg"])
def test_domain_router_arrays_match_sklearn_and_load_without_skops(classifier: str, tmp_path: Path) -> None:
    texts, labels = _domain_texts()
    router = DomainRouter(classifier=classifier)  # type: ignore[arg-type]
    emb = HashEmbedder(256)
    if classifier == "embedding-logreg":
        router.set_embedder(emb)
    router.fit(texts, labels)
    queries = [q for q, _ in QUESTIONS] + [t for t in ODD_TEXTS if t.strip()]
    expected = router.model_.predict_proba(router._features(queries))
    np.testing.assert_allclose(router.predict_proba(queries), expected, atol=1e-6)
    router.save(tmp_path)
    assert (tmp_path / ARRAY_FILE).is_file() and not (tmp_path / MODEL_FILE).exists()
    loaded = DomainRouter.load(tmp_path, embedder=emb)
    assert not hasattr(loaded, "model_")
    np.testing.assert_allclose(loaded.predict_proba(queries), expected, atol=1e-6)
    assert list(loaded.predict(queries)) == list(router.model_.predict(router._features(queries)))
    if classifier != "embedding-logreg":
        tfidf = router.model_.named_steps["tfidf"]
        np.testing.assert_array_equal(loaded.known_terms(queries), tfidf.transform(queries).getnnz(axis=1))


@pytest.mark.parametrize("classifier", ["gaussian-nb", "linear-svc"])
def test_other_domain_routers_keep_skops(classifier: str, tmp_path: Path) -> None:
    texts, labels = _domain_texts()
    router = DomainRouter(classifier=classifier).fit(texts, labels)  # type: ignore[arg-type]
    router.save(tmp_path)
    assert (tmp_path / MODEL_FILE).is_file() and not (tmp_path / ARRAY_FILE).exists()
    loaded = DomainRouter.load(tmp_path)
    np.testing.assert_allclose(loaded.predict_proba(texts), router.predict_proba(texts), atol=1e-9)


def test_router_saved_by_an_earlier_version_loads_and_converts(tmp_path: Path) -> None:
    """An index written before arrays existed has router.skops + router.json (format 2)."""
    from ragsieve.safe_models import save_estimator

    texts, labels = _domain_texts()
    router = DomainRouter(classifier="multinomial-nb").fit(texts, labels)
    save_estimator(router.model_, tmp_path / MODEL_FILE)
    meta = {"format_version": 2, "router": router.to_dict(), "classes": sorted(set(labels)), "n_train": len(texts),
            "trained_on": "chunks"}
    (tmp_path / "router.json").write_text(json.dumps(meta), encoding="utf-8")
    old = DomainRouter.load(tmp_path)
    expected = old.predict_proba(texts)
    assert old.convert_to_arrays(tmp_path)
    assert (tmp_path / ARRAY_FILE).is_file() and not (tmp_path / MODEL_FILE).exists()
    new = DomainRouter.load(tmp_path)
    assert DomainRouter.read_meta(tmp_path)["trained_on"] == "chunks"
    np.testing.assert_allclose(new.predict_proba(texts), expected, atol=1e-6)
    shutil.rmtree(tmp_path)


def test_conversion_killed_before_router_json_leaves_a_loadable_router(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conversion that dies after writing router.npz but before router.json keeps the skops
    file router.json still names, so the index loads as before (nothing the user stored is lost)."""
    from ragsieve.route import router as router_module
    from ragsieve.safe_models import save_estimator

    texts, labels = _domain_texts()
    router = DomainRouter(classifier="multinomial-nb").fit(texts, labels)
    save_estimator(router.model_, tmp_path / MODEL_FILE)
    meta = {"format_version": 2, "router": router.to_dict(), "classes": sorted(set(labels)), "n_train": len(texts)}
    (tmp_path / "router.json").write_text(json.dumps(meta), encoding="utf-8")
    old = DomainRouter.load(tmp_path)
    expected = old.predict_proba(texts)

    def killed(*args: object, **kwargs: object) -> None:
        raise OSError("killed")

    monkeypatch.setattr(router_module, "atomic_write_json", killed)
    with pytest.raises(OSError):
        old.convert_to_arrays(tmp_path)
    monkeypatch.undo()
    assert (tmp_path / MODEL_FILE).is_file()
    np.testing.assert_allclose(DomainRouter.load(tmp_path).predict_proba(texts), expected, atol=1e-9)


def test_linear_head_binary_logistic_matches_sklearn() -> None:
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 5))
    y = (x[:, 0] + x[:, 1] > 0).astype(int)
    lr = LogisticRegression().fit(x, y)
    head = LinearHead.from_sklearn(lr)
    rows = [(np.zeros(0, dtype=np.int64), np.zeros(0)) for _ in range(len(x))]
    np.testing.assert_allclose(head.predict_proba(rows, x), lr.predict_proba(x), atol=1e-9)
