"""Range and quantile queries on a numeric metric's window-estimate record.

The record holds B bucket probabilities over `bucket_edges` (metric units). Mass is uniform
within a bucket (as in ldp_telemetry.ldp.estimation.histograms), so

    range    Pr[lo ≤ X ≤ hi] = Σ_i x_i |[lo, hi] ∩ bucket_i| / width_i
    quantile the point where the piecewise-linear CDF reaches the level

A quantile at one of the record's levels comes with its bootstrap standard error
(`quantile_std_errors`) and the record's 95% band (`bands`, named by `band_method`; null where
the record has no calibrated band). A range of a CFO-binning or hierarchical-histogram record
that keeps its unbiased bin estimate x~ (`unbiased_estimate`, and a hierarchy's
`level_reports`) comes with the exact standard error of Σ_i w_i x~_i, w_i the covered share of
bin i, and the `exact-variance` band: every ν the range's probability can take ([0, 1], or
less for a range inside one bin) with |Σ_i w_i x~_i − ν| ≤ Z95 · the exact standard error at
range value ν, the score form (ldp_telemetry.ldp.estimation.bin_answers
.LinearBins.score_band; the plug-in's ± Z95 · s.e. was too narrow where the error and the
plug-in's s.e. move together): it holds the probability with the mass spread
uniformly within each bin, and where the range cuts a bin the values' own probability can
differ by up to the mass of the cut bins (`RANGE_CUT_REASON`, against the band's own
half-width). Other ranges have no standard
error nor band, and say why (`band_reason`).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ldp_telemetry.ldp.base.errors import ConfigError, RegistryError
from ldp_telemetry.ldp.estimation.bin_answers import (NO_LEAF_REPORTS_REASON, LinearBins,
                                                      cfo_linear, hh_linear, names_bin_protocol,
                                                      range_weights)
from ldp_telemetry.ldp.estimation.bin_quantiles import conservative_quantile_reason
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS, histogram_quantiles
from ldp_telemetry.ldp.estimation.moments import (CONSERVATIVE_SHARE, MEASURED_REPORTS,
                                                  SMALL_WINDOW_REASON)
from ldp_telemetry.ldp.estimation.uncertainty import BAND_EXACT, BAND_NONE, NO_REPORTS_REASON
from ldp_telemetry.ldp.protocols import make_numeric_protocol
from ldp_telemetry.ldp.protocols.cfo_binning import CfoBinning
from ldp_telemetry.ldp.protocols.hh import HierarchicalHistogram

#: Why a range answer has no band, by the record it reads.
RANGE_NOT_LINEAR_REASON = ("no band: protocol {protocol!r}'s bucket estimate is not linear in "
                           "an unbiased estimate, and the record keeps no covariance of its "
                           "buckets")
RANGE_NOT_FINITE_REASON = ("no band: the record's unbiased bin estimate holds a value that is not "
                           "a finite number")
RANGE_PROTOCOL_REASON = ("no band: the record's ε = {epsilon:g} over {buckets} buckets makes no "
                         "{protocol!r} protocol ({problem})")
RANGE_DEPTHS_REASON = ("no band: the record's level_reports count {given} depth(s), and a "
                       "hierarchy over {buckets} buckets has {depths}")
RANGE_OLD_RECORD_REASON = ("no band: the record keeps no unbiased bin estimate (written before "
                           "records kept one for range bands)")
#: What a range band holds where the range cuts a bin (as ldp_telemetry.ldp.estimation
#: .cfo_moments names its bucketing gap).
RANGE_CUT_REASON = ("band of the probability with the mass spread uniformly within each bin: "
                    "the range cuts {cut} bin(s), so the values' own probability can differ by "
                    "up to about {gap:.3g} (each cut bin's estimated mass times the larger of "
                    "its shares in and out of the range), {share:.0%} of the band's "
                    "half-width")

#: Why a quantile has no band although the record gives one (a record read from a file).
QUANTILE_BAND_NOT_FINITE_REASON = ("no band: the record's band of this quantile holds a bound "
                                   "that is not a finite number")
QUANTILE_LEVEL_REASON = ("no band: the record keeps bands at the levels {levels} only")

#: What the answer of a range of zero width means (its probability is 0 by the convention).
RANGE_POINT_REASON = ("a range of zero width has probability 0 with the mass spread uniformly "
                      "within each bin, whatever share of the values equals {point:g}: ask a "
                      "range of positive width (a bin's, for values heaped at one point)")


@dataclass(frozen=True)
class NumericAnswer:
    query: str  # "range" or "quantile"
    argument: tuple[float, ...]
    value: float
    std_error: float | None
    band_method: str | None = None  # the record's; None for records written before it
    band: tuple[float, float] | None = None  # the record's 95% band, where it has one
    #: what the band holds, or why there is none (None: nothing to say)
    band_reason: str | None = None
    #: "bootstrap" (a quantile's, from the record) or "exact" (a range's, bin_answers)
    std_error_kind: str | None = None
    #: the unbiased answer an exact band is made around (its score form; None without one)
    unbiased_value: float | None = None

    def as_dict(self) -> dict:
        return {"query": self.query, "argument": list(self.argument), "value": self.value,
                "std_error": self.std_error, "std_error_kind": self.std_error_kind,
                "unbiased_value": self.unbiased_value, "band_method": self.band_method,
                "band95": None if self.band is None else list(self.band),
                "band_reason": self.band_reason}


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
    band_reasons: Mapping[str, str] | None
    protocol: str
    epsilon: float
    unbiased_estimate: np.ndarray | None
    level_reports: tuple[int, ...] | None


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
    #: the unbiased bin estimate and its exact variances (None: `no_linear_reason` says why)
    linear: LinearBins | None = None
    no_linear_reason: str | None = None
    #: statistic -> what its band holds or why it has none (the record's `band_reasons`)
    band_reasons: dict | None = None

    @classmethod
    def from_record(cls, record: NumericRecord) -> NumericWindow:
        """From a numeric metric's window-estimate record (the attributes of
        ldp_telemetry.output.estimate.EstimateRecord, `NumericRecord`)."""
        if record.bucket_edges is None:
            raise ConfigError(f"metric {record.metric!r} is not numeric (its records have no "
                              "bucket_edges)", "metric")
        linear, reason = record_linear_bins(record)
        method, bands = record.band_method, dict(record.bands or {})
        reasons = dict(getattr(record, "band_reasons", None) or {})
        if (method is not None and getattr(record, "conservative_bands", None) is None
                and names_bin_protocol(record.protocol)):
            # a CFO-binning or HH record written before `conservative_bands` gave its quantiles'
            # band of whole bins as their 95% band: read as today's (no 95% band; the band is
            # conservative, bin_quantiles.conservative_quantile_bands)
            for key in QUANTILE_LEVELS:
                if bands.get(key) is not None:
                    method, bands[key] = BAND_NONE, None
                    reasons[key] = conservative_quantile_reason(reasons.get(key))
        return cls(record.metric, record.window_start, record.window_end,
                   int(record.n), np.asarray(record.bucket_edges, dtype=np.float64),
                   np.asarray(record.estimate, dtype=np.float64),
                   dict(record.quantile_std_errors or {}), method, bands, linear, reason,
                   reasons)

    def _require_distribution(self, query: str) -> None:
        """ConfigError naming `query` when the record keeps no distribution (a protocol that
        estimates the mean only, such as `sr` and `pm`, writes an empty estimate)."""
        if self.estimate.size == 0 or self.estimate.size != len(self.edges) - 1:
            raise ConfigError(f"metric {self.metric!r} keeps no distribution over buckets "
                              f"({self.estimate.size} bucket probabilities for "
                              f"{len(self.edges)} bucket edges; a protocol that estimates "
                              f"the mean only writes none): it has no {query} to answer; "
                              "`ldp show` prints its mean", query)

    def range_probability(self, lo: float, hi: float) -> NumericAnswer:
        """Pr[lo ≤ X ≤ hi], in metric units, with its exact band where the record allows
        (module docstring); ConfigError when lo > hi."""
        self._require_distribution("range")
        if not lo <= hi:
            raise ConfigError(f"range needs LO <= HI, got {lo:g} > {hi:g}", "range")
        weights = range_weights(self.edges, lo, hi)
        value = float(self.estimate @ weights)
        argument = (float(lo), float(hi))
        point = RANGE_POINT_REASON.format(point=lo) if lo == hi else None
        if self.linear is None:  # `none`, or None for a record written before band_method
            method = None if self.band_method is None else BAND_NONE
            return NumericAnswer("range", argument, value, None, method,
                                 band_reason="; ".join(filter(None, (
                                     point, self.no_linear_reason))) or None)
        unbiased = self.linear.value(weights)
        error = math.sqrt(max(self.linear.variance(weights), 0.0))
        band = self.linear.score_band(weights)
        half = (band[1] - band[0]) / 2  # the band's own (`half95`), not Z95 · error: not
        # centred on `unbiased`, it can be half as wide or twice as wide as that
        cut = (weights > 0.0) & (weights < 1.0)
        gap = float(np.maximum(weights, 1.0 - weights)[cut] @ self.linear.plug_in[cut])
        reasons = [] if point is None else [point]
        if cut.any() and gap > CONSERVATIVE_SHARE * half:
            reasons.append(RANGE_CUT_REASON.format(cut=int(cut.sum()), gap=gap,
                                                   share=gap / half if half > 0 else math.inf))
        if self.n < MEASURED_REPORTS:
            reasons.append(SMALL_WINDOW_REASON.format(n=f"{self.n:,}"))
        return NumericAnswer("range", argument, value, error, BAND_EXACT, band,
                             "; ".join(reasons) or None, "exact", unbiased)

    def quantile(self, level: float) -> NumericAnswer:
        """The level-quantile in metric units; level in [0, 1]."""
        self._require_distribution("quantile")
        if not 0.0 <= level <= 1.0:
            raise ConfigError(f"a quantile level lies in [0, 1], got {level:g}", "quantile")
        value = float(histogram_quantiles(self.estimate, self.edges, [level])[0])
        key = next((k for k in QUANTILE_LEVELS if float(k) == level), None)
        error = self.quantile_errors.get(key) if key is not None else None
        if not (isinstance(error, (int, float)) and math.isfinite(error)):
            error = None  # NaN: the record's bootstrap had fewer than 2 replicates
        band = (self.bands or {}).get(key) if key is not None else None
        reason = ((self.band_reasons or {}).get(key) if key is not None
                  else QUANTILE_LEVEL_REASON.format(levels=", ".join(QUANTILE_LEVELS))
                  if self.band_method is not None else None)
        bounds = None if band is None else (band["lower"], band["upper"])
        if bounds is not None and not all(isinstance(bound, (int, float))
                                          and math.isfinite(bound) for bound in bounds):
            bounds, reason = None, QUANTILE_BAND_NOT_FINITE_REASON
        # an answer without a band names none, whatever made the record's other bands
        method = (self.band_method if bounds is not None or self.band_method is None
                  else BAND_NONE)
        return NumericAnswer("quantile", (float(level),), value, error, method,
                             bounds, None if reason is None else str(reason),
                             std_error_kind=None if error is None else "bootstrap")


def record_linear_bins(record: NumericRecord) -> tuple[LinearBins | None, str | None]:
    """(the record's unbiased bin estimate with its exact variances, None) for a CFO-binning or
    hierarchical-histogram record that keeps one; else (None, why its ranges have no band)."""
    unbiased = getattr(record, "unbiased_estimate", None)
    buckets = len(record.estimate)
    try:
        protocol = make_numeric_protocol(record.protocol, float(record.epsilon), buckets)
    except RegistryError as error:  # not a protocol of this version, or not at these settings
        if names_bin_protocol(record.protocol):
            return None, RANGE_PROTOCOL_REASON.format(epsilon=float(record.epsilon),
                                                      buckets=buckets,
                                                      protocol=record.protocol, problem=error)
        protocol = None
    if not isinstance(protocol, (CfoBinning, HierarchicalHistogram)):
        return None, RANGE_NOT_LINEAR_REASON.format(protocol=record.protocol)
    if int(record.n) <= 0:
        return None, NO_REPORTS_REASON
    reports = getattr(record, "level_reports", None)
    if isinstance(protocol, HierarchicalHistogram):
        if reports is None:
            return None, RANGE_OLD_RECORD_REASON
        if len(reports) != protocol.h:  # read from a file
            return None, RANGE_DEPTHS_REASON.format(given=len(reports), buckets=buckets,
                                                    depths=protocol.h)
        if reports[-1] == 0:
            return None, NO_LEAF_REPORTS_REASON
    if unbiased is None or len(unbiased) != buckets:
        return None, RANGE_OLD_RECORD_REASON
    if not np.isfinite(np.asarray(unbiased, dtype=np.float64)).all():  # read from a file
        return None, RANGE_NOT_FINITE_REASON
    if isinstance(protocol, CfoBinning):
        return cfo_linear(protocol, unbiased, int(record.n)), None
    found = hh_linear(protocol, unbiased, np.asarray(reports, dtype=np.int64))
    return found, None if found is not None else NO_LEAF_REPORTS_REASON
