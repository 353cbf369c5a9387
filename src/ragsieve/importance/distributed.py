"""Partition the gradient epoch across a Dask cluster.

An epoch is a sum over validation tuples, so the tuples are split into contiguous partitions
that live on the workers (scattered once); each epoch sends only the current weights and
adds up the partial sums. Sums of float64 partials differ from the single-process sum only by
rounding (about 1e-15 relative).

Example::

    >>> from dask.distributed import Client, LocalCluster            # doctest: +SKIP
    >>> with LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster) as client:
    ...     est = DataImportance().fit(data, client=client)           # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ragsieve.importance.data import ValidationData
from ragsieve.importance.multilinear import unchecked_gradient_sums


def _partition_sums(
    part: ValidationData, weights: np.ndarray, tuple_offset: int, kwargs: dict[str, Any]
) -> tuple[np.ndarray, float]:
    # the partitions are slices of data validated once by the caller
    return unchecked_gradient_sums(part, weights, tuple_offset=tuple_offset, n_jobs=1, **kwargs)


class DistributedGradients:
    """Gradient sums over tuples partitioned across the workers of a ``dask.distributed.Client``."""

    def __init__(self, client: Any, data: ValidationData, n_partitions: int | None = None) -> None:
        self.client = client
        n_workers = max(1, len(client.scheduler_info().get("workers", {})))
        n_parts = max(1, min(data.n_tuples, n_partitions or n_workers))
        bounds = np.linspace(0, data.n_tuples, n_parts + 1).astype(np.int64)
        self.n_tuples = data.n_tuples
        self.offsets = bounds[:-1].tolist()
        parts = [data.subset(np.arange(a, b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        # pin one partition per worker, round-robin, so each epoch moves only the weights
        workers = list(client.scheduler_info().get("workers", {}))
        # hash=False: every scatter gets its own key, so releasing one never drops another's data
        self.parts = [
            client.scatter(p, workers=[workers[i % len(workers)]] if workers else None, hash=False)
            for i, p in enumerate(parts)
        ]

    def gradient_sums(self, weights: np.ndarray, **kwargs: Any) -> tuple[np.ndarray, float]:
        kwargs.setdefault("n_tuples_total", self.n_tuples)
        w = self.client.scatter(np.asarray(weights, dtype=np.float64), broadcast=True, hash=False)
        futures = [
            self.client.submit(_partition_sums, part, w, off, kwargs, pure=False)
            for part, off in zip(self.parts, self.offsets, strict=True)
        ]
        results = self.client.gather(futures)
        sums = np.sum([r[0] for r in results], axis=0)
        return sums, float(sum(r[1] for r in results))
