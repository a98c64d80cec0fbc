"""Range and quantile queries on a numeric metric's window-estimate record.

The record holds B bucket probabilities over `bucket_edges` (metric units). Mass is uniform
within a bucket (as in ldp_telemetry.ldp.estimation.histograms), so

    range    Pr[lo ≤ X ≤ hi] = Σ_i x_i |[lo, hi] ∩ bucket_i| / width_i
    quantile the point where the piecewise-linear CDF reaches the level

A quantile at one of the record's levels comes with its bootstrap standard error
(`quantile_std_errors`) and the record's 95% band (`bands`, named by `band_method`; null where
the record has no calibrated band); other answers have neither (the record keeps per-bucket
errors only, not their correlations), and say so.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS, histogram_quantiles


@dataclass(frozen=True)
class NumericAnswer:
    query: str  # "range" or "quantile"
    argument: tuple[float, ...]
    value: float
    std_error: float | None
    band_method: str | None = None  # the record's; None for records written before it
    band: tuple[float, float] | None = None  # the record's 95% band, where it has one

    def as_dict(self) -> dict:
        return {"query": self.query, "argument": list(self.argument), "value": self.value,
                "std_error": self.std_error, "band_method": self.band_method,
                "band95": None if self.band is None else list(self.band)}


class NumericRecord(Protocol):
    """What a query reads of a numeric metric's window-estimate record: the attributes of
    ldp_telemetry.output.estimate.EstimateRecord (which `ldp` cannot import)."""

    metric: str
    window_start: str
    window_end: str
    n: int
    bucket_edges: np.ndarray | None
    estimate: np.ndarray
    quantile_std_errors: Mapping[str, float] | None
    band_method: str | None
    bands: Mapping[str, Any] | None


@dataclass(frozen=True)
class NumericWindow:
    """One numeric window: its distribution over buckets and the record's standard errors."""

    metric: str
    window_start: str
    window_end: str
    n: int
    edges: np.ndarray
    estimate: np.ndarray
    quantile_errors: dict
    band_method: str | None = None
    bands: dict | None = None  # statistic -> {"lower", "upper"} or None

    @classmethod
    def from_record(cls, record: NumericRecord) -> NumericWindow:
        """From a numeric metric's window-estimate record (the attributes of
        ldp_telemetry.output.estimate.EstimateRecord, `NumericRecord`)."""
        if record.bucket_edges is None:
            raise ConfigError(f"metric {record.metric!r} is not numeric (its records have no "
                              "bucket_edges)", "metric")
        return cls(record.metric, record.window_start, record.window_end,
                   int(record.n), np.asarray(record.bucket_edges, dtype=np.float64),
                   np.asarray(record.estimate, dtype=np.float64),
                   dict(record.quantile_std_errors or {}), record.band_method,
                   dict(record.bands or {}))

    def range_probability(self, lo: float, hi: float) -> NumericAnswer:
        """Pr[lo ≤ X ≤ hi], in metric units; ConfigError when lo > hi."""
        if not lo <= hi:
            raise ConfigError(f"range needs LO <= HI, got {lo:g} > {hi:g}", "range")
        left, right = self.edges[:-1], self.edges[1:]
        overlap = np.clip(np.minimum(right, hi) - np.maximum(left, lo), 0.0, None)
        value = float(self.estimate @ (overlap / (right - left)))
        return NumericAnswer("range", (float(lo), float(hi)), value, None, self.band_method)

    def quantile(self, level: float) -> NumericAnswer:
        """The level-quantile in metric units; level in [0, 1]."""
        if not 0.0 <= level <= 1.0:
            raise ConfigError(f"a quantile level lies in [0, 1], got {level:g}", "quantile")
        value = float(histogram_quantiles(self.estimate, self.edges, [level])[0])
        key = next((k for k in QUANTILE_LEVELS if float(k) == level), None)
        error = self.quantile_errors.get(key) if key is not None else None
        band = (self.bands or {}).get(key) if key is not None else None
        return NumericAnswer("quantile", (float(level),), value, error, self.band_method,
                             None if band is None else (band["lower"], band["upper"]))
