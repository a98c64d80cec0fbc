"""Utility metrics of an estimated numeric distribution against the truth ([Li20] §3).

Distributions are bucket probabilities x over an ordered domain of d buckets. With the
cumulative function P(x, v) = Σ_{t ≤ v} x_t ([Li20] §3.1):

    Wasserstein   W1 = Σ_v |P(x, v) − P(x̂, v)| · width   (width 1: the paper's discrete form)
    KS            max_v |P(x, v) − P(x̂, v)|
    range query   |R(x, i, α) − R(x̂, i, α)|, R(x, i, α) = P(x, i + α) − P(x, i), averaged over i
    mean          |μ − μ̂|, variance |σ² − σ̂²| (values at the given points, bucket midpoints)
    quantiles     (1/|B|) Σ_β |Q(x, β) − Q(x̂, β)|, Q(x, β) = max{v : P(x, v) ≤ β}, B = {0.1, …, 0.9}

Indices v are 0 … d: P(x, 0) = 0 is the empty prefix, so Q counts the whole buckets below β.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numpy.typing import ArrayLike

PAPER_QUANTILES = tuple(round(0.1 * k, 1) for k in range(1, 10))


def _prefix(x: ArrayLike) -> np.ndarray:
    """P(x, v) for v = 0 … d."""
    x = np.asarray(x, dtype=np.float64)
    return np.concatenate(([0.0], np.cumsum(x)))


def _pair(x: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"need two distributions of the same length, got {x.shape}, {y.shape}")
    return x, y


def wasserstein(x: ArrayLike, y: ArrayLike, width: float = 1.0) -> float:
    """W1 between two bucket distributions, buckets `width` apart ([Li20] §3.1)."""
    x, y = _pair(x, y)
    return float(np.abs(np.cumsum(x) - np.cumsum(y)).sum() * width)


def kolmogorov_smirnov(x: ArrayLike, y: ArrayLike) -> float:
    """The largest difference of the two cumulative functions ([Li20] §3.1)."""
    x, y = _pair(x, y)
    return float(np.abs(np.cumsum(x) - np.cumsum(y)).max())


def range_query_error(x: ArrayLike, y: ArrayLike, alpha: int,
                      starts: ArrayLike | None = None) -> float:
    """Mean |R(x, i, α) − R(y, i, α)| over `starts` (default: every i in 0 … d − α)."""
    x, y = _pair(x, y)
    if not 1 <= alpha <= len(x):
        raise ValueError(f"range size must lie in [1, {len(x)}], got {alpha}")
    px, py = _prefix(x), _prefix(y)
    i = np.arange(len(x) - alpha + 1) if starts is None else np.asarray(starts, dtype=np.int64)
    return float(np.abs((px[i + alpha] - px[i]) - (py[i + alpha] - py[i])).mean())


def mean_error(x: ArrayLike, y: ArrayLike, points: ArrayLike | None = None) -> float:
    """|μ(x) − μ(y)| with bucket v at `points[v]` (default: its index)."""
    x, y = _pair(x, y)
    points = np.arange(len(x), dtype=np.float64) if points is None else np.asarray(points, float)
    return float(abs(x @ points - y @ points))


def variance_error(x: ArrayLike, y: ArrayLike, points: ArrayLike | None = None) -> float:
    """|σ²(x) − σ²(y)| with bucket v at `points[v]` (default: its index)."""
    x, y = _pair(x, y)
    points = np.arange(len(x), dtype=np.float64) if points is None else np.asarray(points, float)

    def variance(z: np.ndarray) -> float:
        return z @ points ** 2 - (z @ points) ** 2
    return float(abs(variance(x) - variance(y)))


def quantile_index(x: ArrayLike, beta: float) -> int:
    """Q(x, β) = max{v in 0 … d : P(x, v) ≤ β} ([Li20] §3.2)."""
    prefix = _prefix(x)
    return int(np.searchsorted(prefix, beta + 1e-12 * max(1.0, abs(beta)), side="right") - 1)


def quantile_error(x: ArrayLike, y: ArrayLike, levels: Iterable[float] = PAPER_QUANTILES
                   ) -> float:
    """Mean |Q(x, β) − Q(y, β)| over `levels`, in buckets ([Li20] §3.2)."""
    x, y = _pair(x, y)
    return float(np.mean([abs(quantile_index(x, b) - quantile_index(y, b)) for b in levels]))
