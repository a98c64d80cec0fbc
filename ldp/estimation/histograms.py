"""Summaries of a bucketed distribution over [low, high]: mean, variance, quantiles.

The mass of each bucket is taken as spread uniformly over it (the same assumption as the
transition model of [Li20] §5.5), so the statistics are those of a piecewise-constant density:

    mean      Σ_i x_i m_i                       (m_i the bucket's midpoint)
    variance  Σ_i x_i (m_i² + w_i²/12) − mean²   (w_i its width)
    quantile  the point where the piecewise-linear CDF reaches β
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

#: The quantile levels of every numeric estimate record, as their record keys.
QUANTILE_LEVELS: tuple[str, ...] = ("0.01", "0.05", "0.1", "0.25", "0.5", "0.75", "0.9", "0.95",
                                    "0.99")


def bucket_edges(low: float, high: float, buckets: int) -> np.ndarray:
    """The B + 1 edges of B equal buckets of [low, high]."""
    return np.linspace(float(low), float(high), int(buckets) + 1)


def histogram_mean(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Mean of each distribution in x (last axis: buckets)."""
    mid = 0.5 * (edges[:-1] + edges[1:])
    return np.asarray(x) @ mid


def histogram_variance(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Variance of each distribution in x, uniform within each bucket."""
    mid = 0.5 * (edges[:-1] + edges[1:])
    width = np.diff(edges)
    second = np.asarray(x) @ (mid * mid + width * width / 12.0)
    return np.maximum(second - histogram_mean(x, edges) ** 2, 0.0)


def histogram_quantiles(x: np.ndarray, edges: np.ndarray, levels: ArrayLike) -> np.ndarray:
    """Quantiles at `levels` of each distribution in x (shape x.shape[:-1] + (len(levels),)).

    The CDF is linear inside each bucket; a level falling on a flat stretch (empty buckets)
    gets the stretch's left end.
    """
    x = np.asarray(x, dtype=np.float64)
    levels = np.asarray(levels, dtype=np.float64)
    flat = x.reshape(-1, x.shape[-1])
    out = np.empty((flat.shape[0], levels.size))
    for row, probabilities in enumerate(flat):
        cdf = np.concatenate(([0.0], np.cumsum(probabilities)))
        cdf /= cdf[-1]
        k = np.clip(np.searchsorted(cdf, levels, side="left") - 1, 0, len(probabilities) - 1)
        fraction = np.divide(levels - cdf[k], np.diff(cdf)[k], out=np.zeros_like(levels),
                             where=np.diff(cdf)[k] > 0)
        out[row] = edges[k] + np.clip(fraction, 0.0, 1.0) * (edges[k + 1] - edges[k])
    return out.reshape(x.shape[:-1] + (levels.size,))


def summary(x: np.ndarray, edges: np.ndarray) -> dict:
    """mean, variance and the record's quantiles (keyed by QUANTILE_LEVELS) of one distribution."""
    levels = [float(level) for level in QUANTILE_LEVELS]
    quantiles = histogram_quantiles(x, edges, levels)
    return {"mean": float(histogram_mean(x, edges)),
            "variance": float(histogram_variance(x, edges)),
            "quantiles": dict(zip(QUANTILE_LEVELS, map(float, quantiles), strict=True))}
