"""`--workers` and `--cluster`: Dask logs at the command's level, and a scheduler that does not
answer is the user's problem, named with the address and the fix."""

from __future__ import annotations

import logging
import socket

import pytest

from ragsieve import cluster
from ragsieve.errors import RagsieveError

pytest.importorskip("dask.distributed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_scheduler_is_named_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT_S", 1.0)
    address = f"tcp://127.0.0.1:{_free_port()}"
    with pytest.raises(RagsieveError) as exc, cluster.dask_client(address=address, purpose="ingesting"):
        pass
    message = str(exc.value)
    assert isinstance(exc.value, cluster.ClusterUnreachableError)
    assert address in message and "no Dask scheduler answered" in message and "--workers" in message
    assert "bug" not in message


def test_dask_logs_at_the_commands_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DASK_LOGGING__DISTRIBUTED", raising=False)
    import distributed  # noqa: F401  (its import sets its loggers to INFO)

    cluster.quiet_dask(logging.WARNING)
    assert logging.getLogger("distributed").getEffectiveLevel() == logging.WARNING
    assert logging.getLogger("distributed.scheduler").getEffectiveLevel() == logging.WARNING
    import os

    assert os.environ["DASK_LOGGING__DISTRIBUTED"] == "warning"  # what worker processes read
    cluster.quiet_dask(logging.INFO)
    assert logging.getLogger("distributed.scheduler").getEffectiveLevel() == logging.INFO
