"""The Dask client behind every ``--workers N`` / ``--cluster ADDRESS`` option (ingest, eval, importance fit).

Example:
    >>> from ragsieve.cluster import dask_client                   # doctest: +SKIP
    >>> with dask_client(workers=2, purpose="evaluating") as client:  # doctest: +SKIP
    ...     client.submit(sum, [1, 2]).result()
    3
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ragsieve.errors import InputError


def cluster_client(workers: int | None = None, address: str | None = None, purpose: str = "running on Dask") -> Any:
    """A Dask client: on the scheduler at ``address``, or on a new ``LocalCluster`` of ``workers`` processes."""
    from ragsieve.extras import require

    distributed = require("dask.distributed", "distributed", f"{purpose} with --workers or --cluster")
    if address:
        return distributed.Client(address.replace("dask://", "tcp://", 1))
    cluster = distributed.LocalCluster(
        n_workers=max(1, int(workers or 1)), threads_per_worker=1, processes=True, dashboard_address=":0"
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
