"""The Dask client behind every ``--workers N`` / ``--cluster ADDRESS`` option (ingest, eval, importance fit).

Example:
    >>> from ragsieve.cluster import dask_client                   # doctest: +SKIP
    >>> with dask_client(workers=2, purpose="evaluating") as client:  # doctest: +SKIP
    ...     client.submit(sum, [1, 2]).result()
    3
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ragsieve.errors import InputError, RagsieveError

# Seconds to wait for a scheduler at --cluster ADDRESS to answer (Dask's own default is 30 s): a
# scheduler that is up answers in well under a second, even across a network.
CONNECT_TIMEOUT_S = 10.0
# Dask's loggers; "distributed" covers the scheduler, nanny and worker messages.
DASK_LOGGERS = ("distributed", "dask")


class ClusterUnreachableError(RagsieveError):
    """No Dask scheduler answered at the address given with ``--cluster``."""


def quiet_dask(level: int | None = None) -> None:
    """Dask logs at ``level`` (default: the root logger's, which the command line sets to
    WARNING, or INFO with ``--verbose``), in this process and in the worker processes a local
    cluster starts (they read ``DASK_LOGGING__DISTRIBUTED`` when they import Dask)."""
    level = logging.getLogger().getEffectiveLevel() if level is None else level
    os.environ["DASK_LOGGING__DISTRIBUTED"] = logging.getLevelName(level).lower()
    for name in DASK_LOGGERS:
        logging.getLogger(name).setLevel(level)
        for child in list(logging.root.manager.loggerDict):
            if child.startswith(name + "."):
                logging.getLogger(child).setLevel(level)


def cluster_client(workers: int | None = None, address: str | None = None, purpose: str = "running on Dask") -> Any:
    """A Dask client: on the scheduler at ``address``, or on a new ``LocalCluster`` of ``workers`` processes.

    Dask logs at the command's level (:func:`quiet_dask`); a scheduler that does not answer at
    ``address`` within :data:`CONNECT_TIMEOUT_S` is a :class:`ClusterUnreachableError` naming it."""
    from ragsieve.extras import require

    level = logging.getLogger().getEffectiveLevel()
    quiet_dask(level)
    distributed = require("dask.distributed", "distributed", f"{purpose} with --workers or --cluster")
    quiet_dask(level)  # importing distributed configured its loggers at its own levels
    if address:
        url = address.replace("dask://", "tcp://", 1)
        try:
            return distributed.Client(url, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ClusterUnreachableError(
                f"no Dask scheduler answered at {address} within {CONNECT_TIMEOUT_S:g} s ({exc}); check the "
                "address and port (a scheduler listens on 8786 by default), that `dask scheduler` is running "
                "there and reachable from this machine, or drop --cluster and use --workers N for a local cluster"
            ) from None
    cluster = distributed.LocalCluster(
        n_workers=max(1, int(workers or 1)), threads_per_worker=1, processes=True, dashboard_address=":0",
        silence_logs=level,
    )
    return distributed.Client(cluster)


@contextmanager
def dask_client(
    workers: int | None = None, address: str | None = None, purpose: str = "running on Dask"
) -> Iterator[Any]:
    """``cluster_client`` for one command: ``None`` when neither is given; closes what it started."""
    if workers and address:
        raise InputError("pass either --workers (a local cluster) or --cluster (a scheduler address), not both")
    if not workers and not address:
        yield None
        return
    client = cluster_client(workers, address, purpose)
    try:
        yield client
    finally:
        client.close()
        if not address:
            client.cluster.close()


def threads_per_worker(workers: int | None) -> int | None:
    """Each of ``workers`` local processes gets its share of the cores, not all of them; ``None``: no local cluster."""
    return max(1, (os.cpu_count() or 1) // workers) if workers else None
