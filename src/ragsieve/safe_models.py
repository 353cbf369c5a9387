"""Trained scikit-learn models saved in a format that cannot run code when loaded.

Linear text models (the task router, the logreg / multinomial-NB / embedding domain routers)
are stored as plain arrays instead (:mod:`ragsieve.array_models`), which load with numpy alone;
this module is for the models arrays do not cover, and for files written by earlier versions.
Importing ``skops`` costs seconds (its trusted-type list walks every scikit-learn estimator), so
it is imported only inside these functions.

Pickle and joblib files execute whatever their ``__reduce__`` says, and a trained model may sit
in an index folder a user downloaded. Models are therefore written with ``skops.io`` (a zip of
JSON + ``.npy`` arrays) and loaded only when every type the file names is either one skops
trusts by default (scikit-learn estimators, numpy, scipy) or in the caller's explicit
allow-list. Anything else, and every pickle or joblib file, is refused without being opened
by an unpickler.

Example:
    >>> from sklearn.linear_model import LogisticRegression
    >>> model = LogisticRegression().fit([[0.0], [1.0]], [0, 1])
    >>> path = save_estimator(model, tmp / "model.skops")  # doctest: +SKIP
    >>> load_estimator(path, trusted=(), retrain="retrain it").predict([[1.0]])  # doctest: +SKIP
    array([1])
"""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragsieve.errors import ModelError
from ragsieve.io import atomic_path

logger = logging.getLogger(__name__)

SUFFIX = ".skops"

# extra types beyond skops' defaults that ragsieve's own models contain
CALIBRATED = ("sklearn.calibration._CalibratedClassifier", "sklearn.calibration._SigmoidCalibration")

# first bytes of the formats that are refused: pickle protocol 2+ opcode, zlib (joblib's
# default compression), gzip, bz2, xz, lzma
_PICKLE_LIKE = (b"\x80", b"\x78", b"\x1f\x8b", b"BZh", b"\xfd7zXZ", b"\x5d\x00\x00")


def save_estimator(estimator: Any, path: str | Path) -> Path:
    """Write ``estimator`` to ``path`` with ``skops.io``, atomically (temp file, then rename)."""
    import skops.io as sio

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        sio.dump(estimator, tmp)
    return path


def refuse_legacy(path: Path, retrain: str) -> ModelError:
    """The error for a pickle/joblib model from an older ragsieve (returned, for ``raise``)."""
    return ModelError(
        f"{path} is a pickle/joblib model from an older ragsieve; loading it could run arbitrary code, "
        f"so ragsieve no longer opens such files. Retrain it: {retrain}"
    )


def _looks_pickled(head: bytes) -> bool:
    return any(head.startswith(magic) for magic in _PICKLE_LIKE)


def load_estimator(path: str | Path, *, trusted: Sequence[str], retrain: str) -> Any:
    """Load a model written by :func:`save_estimator`, refusing anything that could run code.

    ``trusted`` lists the exact extra type names (``module.Qualname``) this model is allowed to
    contain; ``retrain`` is the command that rebuilds the file, quoted in every error.
    """
    import skops.io as sio

    path = Path(path)
    if not path.is_file():
        raise ModelError(f"model file {path} does not exist; {retrain}")
    with open(path, "rb") as fh:
        head = fh.read(8)
    if not zipfile.is_zipfile(path):
        if _looks_pickled(head):
            raise refuse_legacy(path, retrain)
        raise ModelError(f"model file {path} is not a skops model (corrupt or another format); {retrain}")
    try:
        untrusted = sio.get_untrusted_types(file=path)
    except Exception as exc:  # skops raises several types on a damaged archive
        raise ModelError(f"model file {path} cannot be read ({type(exc).__name__}: {exc}); {retrain}") from exc
    unexpected = sorted(set(untrusted) - set(trusted))
    if unexpected:
        raise ModelError(
            f"model file {path} contains types ragsieve does not trust ({', '.join(unexpected)}); "
            f"it was not written by this ragsieve or was tampered with. {retrain}"
        )
    try:
        return sio.load(path, trusted=[t for t in trusted if t in untrusted])
    except Exception as exc:  # a damaged member of the archive, or a version mismatch
        raise ModelError(f"model file {path} cannot be loaded ({type(exc).__name__}: {exc}); {retrain}") from exc


__all__ = ["CALIBRATED", "SUFFIX", "load_estimator", "refuse_legacy", "save_estimator"]
