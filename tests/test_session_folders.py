"""The test session runs in cache, config and home folders of its own, never the user's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import SESSION_FOLDERS, USER_FOLDERS


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def test_session_folders_are_not_the_users() -> None:
    for name, folder in SESSION_FOLDERS.items():
        user = USER_FOLDERS[name]
        assert folder.resolve() != user.resolve(), name
        assert not _inside(folder, user), f"the session's {name} folder lies inside the user's"
    assert Path.home().resolve() == SESSION_FOLDERS["home"].resolve()
    assert "RAGSIEVE_INDEX" not in os.environ


def test_ragsieve_writes_its_cache_and_demo_index_in_the_session_folders() -> None:
    from ragsieve.console import default_demo_index
    from ragsieve.embed.onnx import default_onnx_dir
    from ragsieve.io import user_cache_dir

    for path in (user_cache_dir(), default_demo_index(), default_onnx_dir()):
        assert _inside(path, SESSION_FOLDERS["cache"]), path
        assert not _inside(path, USER_FOLDERS["cache"]), path


def test_subprocesses_inherit_the_session_folders() -> None:
    code = (
        "import json, os; from pathlib import Path; from ragsieve.io import user_cache_dir; "
        "print(json.dumps({'home': str(Path.home()), 'cache': str(user_cache_dir()), "
        "'config': os.environ.get('XDG_CONFIG_HOME'), 'index': os.environ.get('RAGSIEVE_INDEX')}))"
    )
    seen = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                      check=True, timeout=120).stdout)
    assert Path(seen["home"]).resolve() == SESSION_FOLDERS["home"].resolve()
    assert _inside(Path(seen["cache"]), SESSION_FOLDERS["cache"])
    assert Path(seen["config"]).resolve() == SESSION_FOLDERS["config"].resolve()
    assert seen["index"] is None
