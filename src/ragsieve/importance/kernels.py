"""Kernels for the multilinear-extension gradients: compiled by numba (parallel over tuples)
when the ``fast-kernels`` extra is installed, otherwise run as the same code by the interpreter.

Both paths give the same numbers (the tests run whichever is installed); the compiled one is
orders of magnitude faster on large validation sets, which is why ``ragsieve importance fit``
logs a hint when it runs without it. numba is not in the core: with llvmlite it is ~200 MB.

Notation. A validation tuple is a ranked list of positions ``0..L-1``; position ``i`` has a
utility ``u_i`` and a presence probability ``p_i`` (the weight of its item or source). For the
additive top-K utility ``U(S) = 1/K * sum of the utilities of the K best-ranked present items``,
adding item ``i`` to a subset ``S`` with ``j`` present items ranked before it changes ``U`` by

* 0 when ``j >= K`` (``i`` does not enter the top-K);
* ``(u_i - u_e) / K`` when ``j < K`` and the ``(K-j)``-th present item after ``i`` (``e``, the item
  expelled from the top-K) exists, and ``u_i / K`` when it does not.

Hence ``G_i = 1/K * sum_{j<K} P_j(i) * (u_i - W_{K-j}(i+1))`` with ``P_j(i)`` the probability that
exactly ``j`` positions before ``i`` are present (Poisson-binomial DP, the paper's ``P_j(1, i-1)``)
and ``W_k(i) = E[u of the k-th present position in i..L-1; it exists]``, which obeys
``W_k(i) = (1-p_i) W_k(i+1) + p_i * (u_i if k == 1 else W_{k-1}(i+1))``. This is the paper's
``G1 + G2`` (Algorithm 1): ``G1`` is the ``u_i * P(fewer than K-j present after i)`` part and
``G2`` the sum over boundary values ``B_{K-j}(i+1, e)``; summing ``G2`` over the value set ``V``
collapses the boundary-value probabilities into the expectation ``W``, so the cost per position
is ``O(K)`` instead of ``O(K * |V|)`` and any real-valued utility works (no discretisation).

All kernels return *sums over tuples* (not divided by N) so partial results from several
processes or machines add up exactly.

Speed. The exact kernels are compiled once per ``K`` (:func:`_specialised`; numba keeps each
on disk), so the ``O(K)`` loops per position have constant bounds that LLVM unrolls and keeps in
vector registers; with ``W`` stored in reverse the forward pass reads one row in order. Per
position the two passes then cost about 30 cycles, and the epoch at 5M positions runs in a
tenth of the authors' Rust (docs/benchmarks.md, "importance-vs-rust"). Lanes of tuples in SIMD
registers were tried and are slower: numba cannot tell LLVM that the scratch arrays do not
overlap, so the lane loops stay scalar.

Threads: numba's default OpenMP layer spin-waits between parallel regions, which costs
hundreds of milliseconds per call on an oversubscribed machine. Importing this module sets
``OMP_WAIT_POLICY=PASSIVE`` unless the variable is already set (it only takes effect if
OpenMP has not started yet); :func:`ragsieve.importance.multilinear.gradient_sums` also runs
small inputs on one thread. Each gradient kernel is one parallel region (numba would make every
``np.zeros`` or ``a += b`` in a parallel function a region of its own, and each is a join that
waits for the slowest thread), and its threads take chunks of tuples from a shared atomic
counter instead of a fixed share each, so a thread the machine deschedules does not hold up
the epoch. Every chunk sums into its own row and the rows are added in chunk order: the
result does not depend on the thread count or on which thread ran which chunk.
"""

from __future__ import annotations

import functools
import logging
import math
import os
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np


def _interpreted_njit(*args: Any, **options: Any) -> Any:
    """numba's ``njit`` stand-in: the function itself; entry points (``parallel=True``) run with
    integer wrap-around warnings off, as the compiled ``uint64`` hash arithmetic wraps silently."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        if not options.get("parallel"):
            return func

        @functools.wraps(func)
        def entry(*a: Any, **kw: Any) -> Any:
            if not _HINTED:
                _HINTED.append(True)
                logging.getLogger(__name__).info(
                    "data-importance kernels run interpreted (numba is not installed); for large "
                    "validation sets install the compiled ones: pip install 'ragsieve[fast-kernels]'"
                )
            with np.errstate(over="ignore"):
                return func(*a, **kw)

        return entry

    if len(args) == 1 and callable(args[0]) and not options:
        return args[0]
    return decorate


_HINTED: list[bool] = []
njit: Any
prange: Any
try:
    import numba

    njit = numba.njit
    prange = numba.prange
    COMPILED = True
except ImportError:  # the fast-kernels extra is not installed: run the kernels interpreted
    njit = _interpreted_njit
    prange = range
    COMPILED = False

_CACHE = True
# the chunks' accumulator rows are added up in parallel slices from this many groups on
_PARALLEL_REDUCTION = 1 << 16
_REDUCTION_SLICE = 1 << 14


def _take_next_interpreted(counter: np.ndarray) -> int:
    """``counter[0]``, then increments it (one thread: nothing to make atomic)."""
    got = int(counter[0])
    counter[0] = got + 1
    return got


def _one_thread() -> int:
    return 1


_take_next: Any = _take_next_interpreted
_threads_now: Any = _one_thread
if COMPILED:
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def _take_next(typingctx: Any, counter: Any) -> Any:
        """Atomic fetch-and-add of 1 on ``counter[0]`` (an int64 array): the threads of a
        parallel loop take chunks of work from one shared counter, each chunk exactly once."""
        sig = types.int64(counter)

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            array_type = signature.args[0]
            array = context.make_array(array_type)(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, array_type, array, [context.get_constant(types.intp, 0)])
            return builder.atomic_rmw("add", ptr, context.get_constant(types.int64, 1), "seq_cst")

        return sig, codegen

    _threads_now = numba.get_num_threads


@njit(cache=_CACHE, nogil=True, inline="always")
def _truncation_point(p: np.ndarray, a: int, b: int, k: int, epsilon: float) -> int:
    """End (exclusive) of the prefix after which items have gradient below ``epsilon``.

    The first prefix ``[a, e)`` whose expected size ``mu`` satisfies ``mu > K-1`` and the
    Chernoff bound ``exp(-(mu-K+1)^2 / (2 mu)) < epsilon`` (the paper's Appendix B). ``mu`` grows
    with ``e`` and the bound falls with ``mu``, so the scan stops at the same point a binary search
    over prefix sums would find; the prefix sums it would need cost the same ``O(e - a)``.
    ``epsilon <= 0`` means no truncation.
    """
    if epsilon <= 0.0:
        return b
    mu = 0.0
    for e in range(a, b):
        mu += p[e]
        if mu > k - 1:
            d = mu - k + 1
            if math.exp(-(d * d) / (2.0 * mu)) < epsilon:
                return e + 1
    return b


@njit(cache=_CACHE, nogil=True)
def _tuple_presence(
    offsets: np.ndarray, gather: np.ndarray, weights: np.ndarray, t: int, p: np.ndarray, k: int, epsilon: float
) -> int:
    """Presence probabilities of tuple ``t``'s positions into ``p[0:n]`` (``weights`` read
    through ``gather``); returns the truncation point ``e`` (:func:`_truncation_point`).

    Compiled on its own, not inlined into the parallel kernels' IR (numba's parfor pass rejects
    that inlining there); LLVM inlines the call.
    """
    a = offsets[t]
    n = offsets[t + 1] - a
    for i in range(n):
        p[i] = weights[gather[a + i]]
    return _truncation_point(p, 0, n, k, epsilon)


@njit(cache=_CACHE, nogil=True, fastmath=True, error_model="numpy", inline="always")
def _tuple_gradient(
    util: np.ndarray,
    p: np.ndarray,
    a: int,
    e: int,
    k: int,
    w_buf: np.ndarray,
    ip: np.ndarray,
    out_g: np.ndarray,
) -> float:
    """Exact gradients of positions ``0..e-1`` of the tuple starting at ``util[a]`` into
    ``out_g[0:e]`` (``p[0:e]`` their presence probabilities); returns E[U].

    ``w_buf`` is scratch of shape ``(>= e+1, k)``, ``ip`` scratch of length ``>= k``. Column
    ``c`` of ``w_buf`` holds ``W_{k-c}``, reversed so that the forward pass reads a row in
    order. Inlined into kernels that fix ``k`` at compile time, every loop over ``k`` has a
    constant trip count that LLVM unrolls and vectorises: that halves the time per position.
    """
    # backward pass: W_kk(i) for kk = 1..k, W(e) = 0
    for c in range(k):
        w_buf[e, c] = 0.0
    for i in range(e - 1, -1, -1):
        pi = p[i]
        qi = 1.0 - pi
        for c in range(k - 1):
            w_buf[i, c] = qi * w_buf[i + 1, c] + pi * w_buf[i + 1, c + 1]
        w_buf[i, k - 1] = qi * w_buf[i + 1, k - 1] + pi * util[a + i]
    # forward pass: ip[j] = P(exactly j present before i), j < k
    ip[0] = 1.0
    for j in range(1, k):
        ip[j] = 0.0
    value = 0.0
    inv_k = 1.0 / k
    for i in range(e):
        ui = util[a + i]
        acc = 0.0
        below = 0.0
        for j in range(k):
            acc += ip[j] * w_buf[i + 1, j]
            below += ip[j]
        out_g[i] = (ui * below - acc) * inv_k
        pi = p[i]
        value += pi * ui * below * inv_k
        qi = 1.0 - pi
        for j in range(k - 1, 0, -1):
            ip[j] = ip[j] * qi + ip[j - 1] * pi
        ip[0] = ip[0] * qi
    return value


@functools.cache
def _specialised(k: int) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The two exact-gradient kernels compiled for this ``k`` (a compile-time constant in them).

    numba caches each ``k``'s machine code on disk (the cache key includes the closure's ``k``),
    so a new process loads it instead of compiling again.
    """
    kk = int(k)

    @njit(cache=_CACHE, nogil=True, parallel=True)
    def grouped(
        offsets: np.ndarray, gather: np.ndarray, group: np.ndarray, util: np.ndarray, weights: np.ndarray,
        n_groups: int, epsilon: float, n_chunks: int, max_len: int, n_workers: int,
    ) -> tuple[np.ndarray, float]:
        # One parallel region per call (a second adds up rows of many groups): every array
        # operation below is an explicit loop, as numba turns ``np.zeros`` and ``a += b`` into
        # parallel loops of their own, each a fork and join of the threads (a wait for a
        # descheduled thread on a busy machine).
        n_tuples = offsets.shape[0] - 1
        acc = np.empty((n_chunks, n_groups), dtype=np.float64)
        values = np.empty(n_chunks, dtype=np.float64)
        # each thread takes the next chunk when done with one (not a fixed share: a thread
        # that the machine deschedules leaves its chunks to the others); the sums depend on
        # the chunks alone, never on which thread ran them
        next_chunk = np.empty(1, dtype=np.int64)
        next_chunk[0] = 0
        for _ in prange(max(1, min(n_workers, n_chunks))):
            w_buf = np.empty((max_len + 1, kk), dtype=np.float64)
            ip = np.empty(kk, dtype=np.float64)
            g = np.empty(max_len, dtype=np.float64)
            p = np.empty(max_len, dtype=np.float64)
            c = _take_next(next_chunk)
            while c < n_chunks:
                t0 = (n_tuples * c) // n_chunks
                t1 = (n_tuples * (c + 1)) // n_chunks
                row = acc[c]
                for j in range(n_groups):  # zeroed by the thread that fills it
                    row[j] = 0.0
                val = 0.0
                for t in range(t0, t1):
                    a = offsets[t]
                    e = _tuple_presence(offsets, gather, weights, t, p, kk, epsilon)
                    val += _tuple_gradient(util, p, a, e, kk, w_buf, ip, g)
                    for i in range(e):
                        row[group[a + i]] += g[i]
                values[c] = val
                c = _take_next(next_chunk)
        # add the chunks' rows into the first one, chunk by chunk in order (the same sums
        # whatever the threads): no second array of n_groups floats
        total = acc[0]
        if n_chunks > 1 and n_groups >= _PARALLEL_REDUCTION:
            n_slices = (n_groups + _REDUCTION_SLICE - 1) // _REDUCTION_SLICE
            for s in prange(n_slices):
                for c in range(1, n_chunks):
                    row = acc[c]
                    for j in range(s * _REDUCTION_SLICE, min(n_groups, (s + 1) * _REDUCTION_SLICE)):
                        total[j] += row[j]
        else:
            for c in range(1, n_chunks):
                row = acc[c]
                for j in range(n_groups):
                    total[j] += row[j]
        value = 0.0
        for c in range(n_chunks):
            value += values[c]
        return total, value

    @njit(cache=_CACHE, nogil=True, parallel=True)
    def positions(
        offsets: np.ndarray, gather: np.ndarray, util: np.ndarray, weights: np.ndarray,
        epsilon: float, out: np.ndarray, max_len: int, n_workers: int,
    ) -> float:
        n_tuples = offsets.shape[0] - 1
        n_chunks = max(1, min(n_tuples, 64))
        values = np.empty(n_chunks, dtype=np.float64)  # not np.zeros: that is a parallel loop of its own
        next_chunk = np.empty(1, dtype=np.int64)  # chunks taken as in ``grouped``
        next_chunk[0] = 0
        for _ in prange(max(1, min(n_workers, n_chunks))):
            w_buf = np.empty((max_len + 1, kk), dtype=np.float64)
            ip = np.empty(kk, dtype=np.float64)
            p = np.empty(max_len, dtype=np.float64)
            c = _take_next(next_chunk)
            while c < n_chunks:
                t0 = (n_tuples * c) // n_chunks
                t1 = (n_tuples * (c + 1)) // n_chunks
                val = 0.0
                for t in range(t0, t1):
                    a = offsets[t]
                    e = _tuple_presence(offsets, gather, weights, t, p, kk, epsilon)
                    val += _tuple_gradient(util, p, a, e, kk, w_buf, ip, out[a:])
                    for i in range(a + e, offsets[t + 1]):
                        out[i] = 0.0
                values[c] = val
                c = _take_next(next_chunk)
        value = 0.0
        for c in range(n_chunks):
            value += values[c]
        return value

    return grouped, positions


def grouped_gradient_sums(
    offsets: np.ndarray,
    group: np.ndarray,
    util: np.ndarray,
    weights: np.ndarray,
    k: int,
    epsilon: float,
    n_chunks: int,
    max_len: int,
    presence: np.ndarray | None = None,
    n_groups: int | None = None,
) -> tuple[np.ndarray, float]:
    """Sum of the per-position gradients by group id (source or item); also sum of E[U_x].

    ``group[pos]`` indexes ``weights`` (the presence probability of that position) unless
    ``presence[pos]`` is given to do that (e.g. the source of each position, for item gradients
    at weights shared by a source's items); the sums then have ``n_groups`` entries. Each chunk
    of tuples accumulates into its own row, so threads never write the same memory; the rows
    are added at the end. Memory: ``n_chunks * n_groups`` floats plus per-chunk scratch.
    """
    grouped, _ = _specialised(int(k))
    gather = group if presence is None else presence
    n_out = weights.shape[0] if n_groups is None else int(n_groups)
    sums, value = grouped(
        offsets, gather, group, util, weights, n_out, float(epsilon), max(int(n_chunks), 1), max(int(max_len), 1),
        _threads_now(),
    )
    return sums, float(value)


def position_gradients(
    offsets: np.ndarray,
    group: np.ndarray,
    util: np.ndarray,
    weights: np.ndarray,
    k: int,
    epsilon: float,
    out: np.ndarray,
    max_len: int,
) -> float:
    """Per-position gradients G(x, i) written into ``out`` (one float64 per position).

    For item-level weights over a large corpus, where per-thread group accumulators would be
    too large; reduce ``out`` by item with ``np.bincount``. Truncated positions get 0.
    """
    _, positions = _specialised(int(k))
    return float(positions(offsets, group, util, weights, float(epsilon), out, max(int(max_len), 1), _threads_now()))


@njit(cache=_CACHE, nogil=True)
def reference_step(
    item_sums: np.ndarray,
    weights: np.ndarray,
    item_source: np.ndarray,
    learning_rate: float,
    n_tuples: int,
    all_items: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """One step of the authors' group rule, in one pass over the items.

    Every item moves from its source's weight by ``learning_rate`` times its mean gradient and is
    clipped to [0, 1]; a source's new weight is the mean of its items' (``all_items`` counts every
    item id of the source; a source without items keeps its weight). Also returns the mean item
    gradient per source. The same arithmetic, in the same order, as clipping an item array and
    reducing it with ``np.bincount``, without the four item-length temporaries that takes.
    """
    n = weights.shape[0]
    total = np.zeros(n, dtype=np.float64)
    grad_total = np.zeros(n, dtype=np.float64)
    for i in range(item_source.shape[0]):
        s = item_source[i]
        g = item_sums[i] / n_tuples
        x = weights[s] + learning_rate * g
        total[s] += min(max(x, 0.0), 1.0)
        grad_total[s] += g
    new = weights.copy()
    grad = np.zeros(n, dtype=np.float64)
    for s in range(n):
        if all_items[s] > 0:
            new[s] = total[s] / all_items[s]
            grad[s] = grad_total[s] / all_items[s]
    return new, grad


# --------------------------------------------------------------------------- Monte Carlo


@njit(cache=_CACHE, nogil=True, inline="always")
def _splitmix(x: np.uint64) -> np.uint64:
    x = x + np.uint64(0x9E3779B97F4A7C15)
    z = x
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=_CACHE, nogil=True, inline="always")
def _uniform(seed: np.uint64, t: int, s: int, i: int) -> float:
    """Counter-based uniform in [0, 1): the same draw whatever the thread layout."""
    h = _splitmix(seed ^ _splitmix(np.uint64(t) * np.uint64(0x100000001B3) + np.uint64(s)))
    h = _splitmix(h + np.uint64(i))
    return float(h >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=_CACHE, nogil=True, inline="always")
def _majority_value(
    labels: np.ndarray, util: np.ndarray, pos: np.ndarray, n_pos: int, counts: np.ndarray
) -> float:
    """Utility of the majority label among ``pos[:n_pos]`` (ties: the label seen first)."""
    if n_pos == 0:
        return 0.0
    best = -1
    best_count = 0
    for r in range(n_pos):
        counts[labels[pos[r]]] += 1
    for r in range(n_pos):
        lab = labels[pos[r]]
        if counts[lab] > best_count:
            best_count = counts[lab]
            best = pos[r]
    for r in range(n_pos):
        counts[labels[pos[r]]] = 0
    return util[best]


@njit(cache=_CACHE, nogil=True, inline="always")
def _additive_value(util: np.ndarray, pos: np.ndarray, n_pos: int, k: int) -> float:
    s = 0.0
    for r in range(n_pos):
        s += util[pos[r]]
    return s / k


@njit(cache=_CACHE, nogil=True, inline="always")
def _topk_value(
    labels: np.ndarray, util: np.ndarray, pos: np.ndarray, n_pos: int, counts: np.ndarray, k: int, majority: bool
) -> float:
    if majority:
        return _majority_value(labels, util, pos, n_pos, counts)
    return _additive_value(util, pos, n_pos, k)


@njit(cache=_CACHE, nogil=True, parallel=True)
def montecarlo_gradient_sums(
    offsets: np.ndarray,
    group: np.ndarray,
    util: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    k: int,
    epsilon: float,
    n_samples: int,
    seed: np.uint64,
    majority: bool,
    out: np.ndarray,
    max_len: int,
    max_label: int,
    tuple_offset: int,
) -> None:
    """Monte Carlo estimate of G(x, i) per position into ``out`` (Appendix D).

    For each tuple, ``n_samples`` subsets S are drawn from the product distribution over the
    truncated list; position ``i`` gets the mean of ``U(S + i) - U(S - i)``. Only positions with
    fewer than K present positions before them can change a top-K utility; the rest add 0.
    ``majority``: U = utility of the majority label among the top-K present positions (the
    paper's QA setting: ``labels`` are answer ids, ``util`` their correctness); otherwise the
    additive top-K utility (used to check the estimator against the exact gradients).
    """
    n_tuples = offsets.shape[0] - 1
    n_chunks = max(1, min(n_tuples, 64))
    for c in prange(n_chunks):
        t0 = (n_tuples * c) // n_chunks
        t1 = (n_tuples * (c + 1)) // n_chunks
        p = np.empty(max_len, dtype=np.float64)
        present = np.empty(max_len, dtype=np.bool_)
        pos = np.empty(k + 1, dtype=np.int64)
        counts = np.zeros(max_label + 1, dtype=np.int64)
        acc = np.empty(max_len, dtype=np.float64)
        for t in range(t0, t1):
            a = offsets[t]
            b = offsets[t + 1]
            n = b - a
            if n == 0:
                continue
            for i in range(n):
                p[i] = weights[group[a + i]]
                acc[i] = 0.0
            e = _truncation_point(p, 0, n, k, epsilon)
            for s in range(n_samples):
                for i in range(e):
                    present[i] = _uniform(seed, t + tuple_offset, s, i) < p[i]
                before = 0  # present positions before i
                for i in range(e):
                    if before >= k:
                        break
                    # U(S + i): the first k present positions counting i as present
                    m = 0
                    for r in range(e):
                        if m >= k:
                            break
                        if present[r] or r == i:
                            pos[m] = a + r
                            m += 1
                    with_i = _topk_value(labels, util, pos, m, counts, k, majority)
                    m = 0
                    for r in range(e):
                        if m >= k:
                            break
                        if present[r] and r != i:
                            pos[m] = a + r
                            m += 1
                    without_i = _topk_value(labels, util, pos, m, counts, k, majority)
                    acc[i] += with_i - without_i
                    if present[i]:
                        before += 1
            for i in range(n):
                out[a + i] = acc[i] / n_samples if i < e else 0.0


# --------------------------------------------------------------------------- leave-one-out


@njit(cache=_CACHE, nogil=True, parallel=True)
def leave_one_out_sums(
    offsets: np.ndarray,
    group: np.ndarray,
    util: np.ndarray,
    labels: np.ndarray,
    n_groups: int,
    k: int,
    majority: bool,
    max_len: int,
    max_label: int,
) -> np.ndarray:
    """Per group: sum over tuples of ``U(all) - U(all without that group)`` (full corpus)."""
    n_tuples = offsets.shape[0] - 1
    n_chunks = max(1, min(n_tuples, 64))
    acc = np.empty((n_chunks, n_groups), dtype=np.float64)  # explicit loops: one parallel region
    for c in prange(n_chunks):
        t0 = (n_tuples * c) // n_chunks
        t1 = (n_tuples * (c + 1)) // n_chunks
        pos = np.empty(k + 1, dtype=np.int64)
        counts = np.zeros(max_label + 1, dtype=np.int64)
        seen = np.empty(max_len, dtype=np.int64)
        row = acc[c]
        for j in range(n_groups):
            row[j] = 0.0
        for t in range(t0, t1):
            a = offsets[t]
            b = offsets[t + 1]
            n = b - a
            if n == 0:
                continue
            m = 0
            for r in range(n):
                if m >= k:
                    break
                pos[m] = a + r
                m += 1
            full = _topk_value(labels, util, pos, m, counts, k, majority)
            n_seen = 0
            for i in range(n):
                gi = group[a + i]
                dup = False
                for s in range(n_seen):
                    if seen[s] == gi:
                        dup = True
                        break
                if dup:
                    continue
                seen[n_seen] = gi
                n_seen += 1
                m = 0
                for r in range(n):
                    if m >= k:
                        break
                    if group[a + r] != gi:
                        pos[m] = a + r
                        m += 1
                without = _topk_value(labels, util, pos, m, counts, k, majority)
                row[gi] += full - without
    total = np.empty(n_groups, dtype=np.float64)
    for j in range(n_groups):
        total[j] = 0.0
    for c in range(n_chunks):
        row = acc[c]
        for j in range(n_groups):
            total[j] += row[j]
    return total


# --------------------------------------------------------------------------- evaluation


@njit(cache=_CACHE, nogil=True, parallel=True)
def masked_topk_utilities(
    offsets: np.ndarray,
    source: np.ndarray,
    util: np.ndarray,
    labels: np.ndarray,
    keep: np.ndarray,
    k: int,
    majority: bool,
    max_label: int,
) -> np.ndarray:
    """Per tuple: the utility of its top-K positions whose source has ``keep[source]`` set.

    ``keep`` has shape ``(n_samples, n_sources)``; the result ``(n_samples, n_tuples)``. An
    empty top-K has utility 0 (no prediction).
    """
    n_tuples = offsets.shape[0] - 1
    n_samples = keep.shape[0]
    out = np.zeros((n_samples, n_tuples), dtype=np.float64)
    for t in prange(n_tuples):
        pos = np.empty(k + 1, dtype=np.int64)
        counts = np.zeros(max_label + 1, dtype=np.int64)
        a = offsets[t]
        b = offsets[t + 1]
        for s in range(n_samples):
            m = 0
            for r in range(a, b):
                if m >= k:
                    break
                if keep[s, source[r]]:
                    pos[m] = r
                    m += 1
            out[s, t] = _topk_value(labels, util, pos, m, counts, k, majority)
    return out
