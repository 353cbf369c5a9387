"""Trained models load without unpickling: crafted pickles run nothing, real models round-trip."""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from ragsieve.errors import IndexStoreError, ModelError, RagsieveError
from ragsieve.safe_models import CALIBRATED, load_estimator, save_estimator


class _Payload:
    """Unpickling this creates ``marker``: the proof that a loader ran code from a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.makedirs, (str(self.marker),))


def _write_pickle(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(_Payload(marker)))


def _write_joblib(path: Path, marker: Path) -> None:
    import joblib

    path.parent.mkdir(parents=True, exist_ok=True)
    joblib.dump(_Payload(marker), path, compress=3)


def _write_skops_naming_os_system(path: Path) -> None:
    """A skops-shaped archive whose schema asks for a function skops does not trust."""
    import json

    schema = {
        "__class__": "system",
        "__module__": "os",
        "__loader__": "FunctionNode",
        "content": {"module_path": "os", "function": "system"},
        "_skops_version": "0.16.0",
        "protocol": 2,
    }
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("schema.json", json.dumps(schema))


def _small_texts() -> tuple[list[str], list[str]]:
    texts = [
        "how do I sort a list in python",
        "is coffee bad for the heart",
        "reverse a string python",
        "vitamin d and bone health",
        "python class inheritance",
        "sleep and heart rate",
    ] * 2
    return texts, ["code", "health"] * 6


@pytest.mark.parametrize("writer", [_write_pickle, _write_joblib])
def test_crafted_router_pickle_runs_nothing(tmp_path: Path, writer) -> None:
    from ragsieve.route.router import DomainRouter

    marker = tmp_path / "pwned"
    folder = tmp_path / "index" / "router"
    writer(folder / "router.joblib", marker)
    with pytest.raises(IndexStoreError, match=r"ragsieve router train"):
        DomainRouter.load(folder)
    # the same payload under the new name is refused as well
    writer(folder / "router.skops", marker)
    with pytest.raises(IndexStoreError, match=r"pickle/joblib.*ragsieve router train"):
        DomainRouter.load(folder)
    assert not marker.exists()


def test_route_auto_refuses_an_old_router_instead_of_running_it(tmp_path: Path) -> None:
    from ragsieve.route.runtime import QueryRouter

    class _Index:
        dir = tmp_path
        domains = ["code", "health"]

    marker = tmp_path / "pwned"
    _write_pickle(tmp_path / "router" / "router.joblib", marker)
    with pytest.raises(RagsieveError, match="older ragsieve"):
        QueryRouter(_Index()).warm_up()
    assert not marker.exists()


@pytest.mark.parametrize("writer", [_write_pickle, _write_joblib])
def test_crafted_proxy_pickle_runs_nothing(tmp_path: Path, writer) -> None:
    from ragsieve.filtering.proxy import ProxyFilter

    marker = tmp_path / "pwned"
    X = np.random.default_rng(0).normal(size=(24, 4)).astype(np.float32)  # noqa: N806
    ProxyFilter().fit(X, np.array([0, 1] * 12)).save(tmp_path / "proxy")
    writer(tmp_path / "proxy" / "proxy.skops", marker)
    with pytest.raises(ModelError, match="ragsieve filters train"):
        ProxyFilter.load(tmp_path / "proxy")
    (tmp_path / "proxy" / "proxy.skops").unlink()
    writer(tmp_path / "proxy" / "proxy.joblib", marker)
    with pytest.raises(ModelError, match="older ragsieve.*ragsieve filters train"):
        ProxyFilter.load(tmp_path / "proxy")
    assert not marker.exists()


@pytest.mark.parametrize("writer", [_write_pickle, _write_joblib])
def test_crafted_task_classifier_pickle_runs_nothing(tmp_path: Path, writer) -> None:
    from ragsieve.tasks.classifier import TfidfTaskClassifier

    marker = tmp_path / "pwned"
    writer(tmp_path / "clf.pkl", marker)
    with pytest.raises(ModelError, match=r"ragsieve tasks train --out .*clf.pkl"):
        TfidfTaskClassifier.load(tmp_path / "clf.pkl")
    assert not marker.exists()


def test_skops_file_naming_an_untrusted_function_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.skops"
    _write_skops_naming_os_system(path)
    with pytest.raises(ModelError, match=r"does not trust \(os.system\)"):
        load_estimator(path, trusted=CALIBRATED, retrain="retrain it")


def test_garbage_and_missing_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist; retrain it"):
        load_estimator(tmp_path / "none.skops", trusted=(), retrain="retrain it")
    (tmp_path / "g.skops").write_bytes(b"hello")
    with pytest.raises(ModelError, match="not a skops model"):
        load_estimator(tmp_path / "g.skops", trusted=(), retrain="retrain it")
    (tmp_path / "z.skops").write_bytes(b"PK\x03\x04" + b"\x00" * 40)
    with pytest.raises(ModelError, match="retrain it"):
        load_estimator(tmp_path / "z.skops", trusted=(), retrain="retrain it")


@pytest.mark.parametrize("classifier", ["logreg", "multinomial-nb", "gaussian-nb", "linear-svc"])
def test_router_roundtrip_predicts_identically(tmp_path: Path, classifier: str) -> None:
    from ragsieve.route.router import DomainRouter

    texts, labels = _small_texts()
    router = DomainRouter(classifier=classifier).fit(texts, labels)  # type: ignore[arg-type]
    router.save(tmp_path)
    loaded = DomainRouter.load(tmp_path)
    queries = ["python list", "heart rate and coffee", "unknown words here"]
    np.testing.assert_array_equal(loaded.predict_proba(queries), router.predict_proba(queries))
    assert list(loaded.classes_) == list(router.classes_) and loaded.get_params() == router.get_params()


@pytest.mark.parametrize("cv", [1, 3])
def test_proxy_roundtrip_predicts_identically(tmp_path: Path, cv: int) -> None:
    from ragsieve.filtering.proxy import ProxyFilter

    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 6)).astype(np.float32)  # noqa: N806
    y = (X[:, 0] + 0.3 * rng.normal(size=40) > 0).astype(int)
    proxy = ProxyFilter(cv=cv, prior="uniform").fit(X, y)
    loaded = ProxyFilter.load(proxy.save(tmp_path / "p"))
    np.testing.assert_array_equal(loaded.predict_proba(X), proxy.predict_proba(X))


def test_task_classifier_roundtrip_predicts_identically(tmp_path: Path) -> None:
    from ragsieve.tasks.classifier import TfidfTaskClassifier

    texts = ["Write a poem about rain", "What does the 2020 report say", "How many legs has a spider"] * 3
    labels = ["text_generation", "information_retrieval", "general_qa"] * 3
    clf = TfidfTaskClassifier(max_features=500).fit(texts, labels)
    loaded = TfidfTaskClassifier.load(clf.save(tmp_path / "clf.skops"))
    probe = ["Write an email to Anna Smith", "Find the pump report", "Is a whale a fish"]
    np.testing.assert_array_equal(loaded.predict_proba(probe), clf.predict_proba(probe))
    assert loaded.to_dict() == clf.to_dict()


def test_save_estimator_is_atomic_and_loads(tmp_path: Path) -> None:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression().fit([[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1])
    path = save_estimator(model, tmp_path / "sub" / "m.skops")
    assert sorted(p.name for p in path.parent.iterdir()) == ["m.skops"]
    np.testing.assert_array_equal(load_estimator(path, trusted=(), retrain="x").predict([[0.5], [2.5]]), [0, 1])
