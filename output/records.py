"""The window-estimate record (`output.estimate.EstimateRecord`) built from a window's result,
Beam-free.

Every record names the configuration its reports were made under: `config_version` and
`fingerprint` (ldp_telemetry.ldp.config.fingerprint). A window holding reports of several versions
of a metric has one record per version and, where they share values, a combined record
(`combined_estimate_record`, `combined_versions` set; ldp_telemetry.ldp.estimation.combine).

Fields as in `schemas/window_estimate.avsc`. Every record carries the facts of its metric's
protocol that a reader needs and must not recompute: `p_star` and `q_star` (the support
probabilities of a frequency oracle) and `smallest_resolvable` (the smallest frequency the window
resolves, `ldp_telemetry.ldp.protocols.noise.smallest_resolvable`); they are null for a numeric
metric and absent from records written before they existed. `privacy` is what the configuration
promises one device per report, per day and over a lifetime (`ldp_telemetry.ldp.config.budget`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ldp_telemetry.ldp.config.budget import privacy_budget
from ldp_telemetry.ldp.config.registry import MetricConfig
from ldp_telemetry.ldp.engine.finalize import (NumericWindowResult, StringWindowResult,
                                               WindowResult)
from ldp_telemetry.ldp.estimation.combine import INVERSE_VARIANCE, CombinedResult
from ldp_telemetry.ldp.estimation.frequency_bands import few_supports_reason, pooled_value_band
from ldp_telemetry.ldp.estimation.heavy_hitters import HEAVY_HITTER_BAND_REASON
from ldp_telemetry.ldp.estimation.uncertainty import BAND_EXACT, BAND_NONE, NO_REPORTS_REASON
from ldp_telemetry.ldp.protocols.base import FREQUENCY, FrequencyOracle
from ldp_telemetry.ldp.protocols.noise import SupportNoise, smallest_resolvable
from ldp_telemetry.output.compact import IndexLabels
from ldp_telemetry.output.estimate import (COMBINED_FIELDS, FREQUENCY_FIELDS, NUMERIC_FIELDS,
                                           STRING_FIELDS, EstimateRecord, Pane)
from ldp_telemetry.output.layout import COMBINED

#: The pane of every window of a batch run (one pane, when the input is complete).
BATCH_PANE = Pane()


def window_estimate_record(config: MetricConfig, result: WindowResult | NumericWindowResult,
                           start_ms: int, end_ms: int, pane: Pane = BATCH_PANE,
                           integrity: dict | None = None) -> EstimateRecord:
    """The record of one window [start_ms, end_ms) of the metric `config` (a registry
    MetricConfig) from its `result` (`ldp.engine.finalize`).

    `integrity`: the window's integrity section (ldp_telemetry.ldp.integrity.statistics), kept
    as `integrity` (null when none: integrity off, numeric metrics, combined records; absent
    from records written before the field).

    The arrays stay float64 numpy arrays and a sized domain's labels are `IndexLabels` (24
    instead of about 160 bytes per value; see `ldp_telemetry.output.compact`) until written.
    """
    if isinstance(result, NumericWindowResult):
        return numeric_estimate_record(config, result, start_ms, end_ms, pane)
    if isinstance(result, StringWindowResult):
        return string_estimate_record(config, result, start_ms, end_ms, pane)
    spec = config.postprocess
    band_method, reason = frequency_band(config, result)  # how the values' bands are made
    no_band = reason is not None
    # a pooled-hash oracle's k and m, so that no reader assumes the defaults (absent otherwise)
    sketch = getattr(config.protocol, "sketch_parameters", lambda: None)()
    return EstimateRecord(
        **_common_fields(config, result, start_ms, end_ms, pane),
        postprocess={"method": spec.method,
                     "params": {k: None if v is None else float(v)
                                for k, v in spec.as_dict().items() if k != "method"},
                     **chosen_postprocess(getattr(result, "postprocess_choice", None))},
        labels=_labels(config),
        estimate=np.asarray(result.estimate, dtype=np.float64),
        unbiased_estimate=np.asarray(result.unbiased, dtype=np.float64),
        std_error=np.asarray(result.std_error, dtype=np.float64),
        integrity=integrity,
        band_method=band_method,
        band_reasons={"estimate": reason} if reason is not None else None,
        parameters=sketch,
        unbiased_std_error=result.unbiased_std_error,
        fields=(FREQUENCY_FIELDS | ({"band_reasons"} if no_band else set())
                | ({"parameters"} if sketch else set())
                | ({"unbiased_std_error"} if result.unbiased_std_error is not None else set())))


def numeric_estimate_record(config: MetricConfig, result: NumericWindowResult, start_ms: int,
                            end_ms: int, pane: Pane = BATCH_PANE) -> EstimateRecord:
    """The record of a numeric metric: the common fields, then the distribution over its buckets.

    `estimate`: B probabilities of the buckets [bucket_edges[i], bucket_edges[i+1]);
    `std_error`: their bootstrap standard errors; `mean`, `variance` (the centres of their
    bands), `quantiles` in metric units with `mean_std_error` and `variance_std_error` (the
    mean's and the variance's exact standard errors) and `quantile_std_errors` (the
    bootstrap's); `unbiased_estimate` is the unbiased bin
    estimate of a CFO-binning or hierarchical-histogram record (with, for the hierarchy,
    `level_reports`: the reports of every depth), from which `ldp query` makes exact range
    bands (ldp_telemetry.ldp.estimation.bin_answers), and null for other protocols.
    `band_method` names how the 95% `bands` (statistic -> {lower, upper}, or null) were made,
    `band_methods` the statistics whose band is made otherwise (a Square Wave record's
    exact-variance mean and variance; absent where there are none), `band_reasons` says why a
    statistic has none, what its band holds, or that it is extrapolated
    (ldp_telemetry.ldp.estimation.uncertainty, ldp_telemetry.ldp.estimation.moments);
    `conservative_bands` (a CFO-binning or hierarchical-histogram record: its quantiles, and its
    mean or variance in a setting where that band over-covered, cfo_moments.bin_moment_bands; a
    Square Wave record
    with a quantile whose band over-covered in its setting or a mean or variance whose band
    the bucketing bound widened past its share; absent from others) the band of each such
    statistic that holds it in at least 95% of windows, not a 95% band: the statistic's own
    is null (ldp_telemetry.ldp.estimation.bin_quantiles.conservative_quantile_bands,
    ldp_telemetry.ldp.estimation.uncertainty.conservative_statistics,
    ldp_telemetry.ldp.estimation.moments.statistic_bands).
    """
    errors = result.errors
    methods = result.band_methods
    conservative = (None if result.conservative_bands is None else
                    {key: band.as_dict() for key, band in result.conservative_bands.items()})
    return EstimateRecord(
        **_common_fields(config, result, start_ms, end_ms, pane),
        postprocess={"method": "none", "params": {}},
        labels=config.value_labels if len(result.estimate) == config.d else [],
        estimate=np.asarray(result.estimate, dtype=np.float64),
        unbiased_estimate=(None if result.unbiased is None
                           else np.asarray(result.unbiased, dtype=np.float64)),
        std_error=np.asarray(errors.buckets, dtype=np.float64),
        bucket_edges=np.asarray(result.bucket_edges, dtype=np.float64),
        mean=result.mean,
        variance=result.variance,
        quantiles=dict(result.quantiles),
        mean_std_error=errors.mean_std_error,
        variance_std_error=result.variance_std_error,
        quantile_std_errors=dict(errors.quantiles),
        bootstrap_replicates=errors.replicates,
        band_method=result.band_method,
        bands={key: band.as_dict() for key, band in (result.bands or {}).items()},
        band_reasons={key: band.reason for key, band in (result.bands or {}).items()
                      if band.reason is not None},
        band_methods=methods or None,
        level_reports=result.level_reports,
        conservative_bands=conservative,
        fields=(NUMERIC_FIELDS | ({"band_methods"} if methods else set())
                | ({"conservative_bands"} if conservative is not None else set())
                | ({"level_reports"} if result.level_reports is not None else set())
                | ({"variance_std_error"} if result.variance_std_error is not None else set())))


def string_estimate_record(config: MetricConfig, result: StringWindowResult, start_ms: int,
                           end_ms: int, pane: Pane = BATCH_PANE) -> EstimateRecord:
    """The record of a string metric: the common fields, then the window's heavy hitters, best
    first, as `labels` (the strings), `estimate` (= `unbiased_estimate`: their frequencies) and
    `std_error`; `heavy_hitters` says how they were found (top, threshold, width, reports per
    level, the dictionary's size and, with one, `found_by` per heavy hitter: "search",
    "dictionary" or "both") and why the list is empty when it is (`reason`). Its values have no
    95% band (`band_method` none, `band_reasons` {"estimate": HEAVY_HITTER_BAND_REASON}): the
    search chose them for their high estimates (output.bands.value_band_method)."""
    found = result.heavy_hitters
    params = dict(config.estimator.params)
    estimate = np.asarray(found.estimate, dtype=np.float64)
    return EstimateRecord(
        **_common_fields(config, result, start_ms, end_ms, pane),
        postprocess={"method": "none", "params": {}},
        labels=list(found.labels),
        estimate=estimate,
        unbiased_estimate=estimate.copy(),
        std_error=np.asarray(found.std_error, dtype=np.float64),
        band_method=BAND_NONE,
        band_reasons={"estimate": HEAVY_HITTER_BAND_REASON},
        fields=STRING_FIELDS | {"band_reasons"},
        heavy_hitters={"top": int(params["top"]), "threshold": float(params["threshold"]),
                       "width": int(params["width"] or 2 * params["top"]),
                       "level_reports": [int(v) for v in found.level_reports],
                       "reason": found.reason, "dictionary": len(config.dictionary),
                       "found_by": list(found.found_by)})


def combined_estimate_record(configs: Sequence[MetricConfig], combined: CombinedResult,
                             start_ms: int, end_ms: int, pane: Pane = BATCH_PANE) -> EstimateRecord:
    """The record of a window's combined estimate over the versions `configs` (MetricConfigs,
    oldest first) of one metric: `estimate` and `unbiased_estimate` are the combined unbiased
    estimate of the shared `labels`, `std_error` its exact standard error; `protocol` is
    COMBINED, `epsilon` the largest ε of the versions, `p_star` and `q_star` null."""
    used = [config for config in configs if config.version in combined.versions]
    estimate = np.asarray(combined.estimate, dtype=np.float64)
    return EstimateRecord(
        metric=used[-1].name,
        start_ms=int(start_ms),
        end_ms=int(end_ms),
        n=combined.n,
        protocol=COMBINED,
        epsilon=max(config.epsilon for config in used),
        config_version=None,
        fingerprint=None,
        combined_versions=tuple(combined.versions),
        p_star=None,
        q_star=None,
        smallest_resolvable=combined.smallest_resolvable,
        estimator={"method": INVERSE_VARIANCE,
                   "params": {f"weight.v{version}": share
                              for version, share in combined.weights.items()},
                   "iterations": None, "last_change": None},
        pane=pane,
        postprocess={"method": "none", "params": {}},
        labels=combined.labels,
        estimate=estimate,
        unbiased_estimate=estimate.copy(),
        std_error=np.asarray(combined.std_error, dtype=np.float64),
        privacy=privacy_budget(used[-1]).as_record(),
        # no band where a version expects too few supports per value (CombinedResult)
        band_method=BAND_EXACT if combined.band_reason is None else BAND_NONE,
        band_reasons=None if combined.band_reason is None else {"estimate": combined.band_reason},
        fields=None if combined.band_reason is None else COMBINED_FIELDS | {"band_reasons"})


def chosen_postprocess(choice: Any) -> dict:  # a replay.Choice, or None
    """The record's report of a replay's choice (ldp_telemetry.ldp.estimation.replay.Choice):
    `chosen` (the method run) and `expected_mse` (each candidate's replayed mean squared error
    for the query); nothing for a fixed method."""
    if choice is None:
        return {}
    return {"chosen": choice.method, "expected_mse": dict(choice.expected_mse)}


def frequency_band(config: MetricConfig, result: WindowResult) -> tuple[str, str | None]:
    """(band_method, reason) of a frequency record's values: none with the reason for no
    reports (NO_REPORTS_REASON), too few expected supports per value for a normal band
    (frequency_bands.few_supports_reason), or a pooled-hash oracle's fixed pool biasing values
    beyond their band where no corrected band holds; `pool-corrected` for a CMS or HCMS window
    past that share (frequency_bands.pooled_value_band); else exact-variance (a Wiener
    filter's values: the band of their unbiased estimate, as every post-processing; a
    pooled-hash oracle's from the `unbiased_std_error` its record keeps)."""
    if result.noise.n == 0:
        return BAND_NONE, NO_REPORTS_REASON
    few = few_supports_reason(result.noise)
    if few is not None:
        return BAND_NONE, few
    assert isinstance(config.protocol, FrequencyOracle), "a frequency metric's protocol"
    return pooled_value_band(config.protocol, result.noise, result.unbiased)


def support_facts(config: MetricConfig, n: int, noise: SupportNoise | None = None) -> dict:
    """`p_star`, `q_star` and `smallest_resolvable` of a window of n reports of the metric
    `config`: the protocol's own for a frequency oracle, None for a numeric metric.
    `noise`: the window's noise model, whose level includes a pooled-hash oracle's collision
    term at the window's plug-in (`SupportNoise.given`)."""
    if config.kind != FREQUENCY:
        return {"p_star": None, "q_star": None, "smallest_resolvable": None}
    protocol = config.protocol
    assert isinstance(protocol, FrequencyOracle), "a frequency metric's protocol is an oracle"
    p_star, q_star = float(protocol.p_star), float(protocol.q_star)
    resolvable = (noise.smallest_resolvable if noise is not None
                  else smallest_resolvable(p_star, q_star, int(n)))
    return {"p_star": p_star, "q_star": q_star, "smallest_resolvable": resolvable}


def _labels(config: MetricConfig) -> Sequence[str]:
    """The metric's labels without a string per value of a sized domain (`IndexLabels`)."""
    if config.labels is None and config.kind == FREQUENCY:
        return IndexLabels(config.d)
    return config.value_labels


def _common_fields(config: MetricConfig,
                   result: WindowResult | NumericWindowResult | StringWindowResult,
                   start_ms: int, end_ms: int, pane: Pane) -> dict:
    """The fields every window-estimate record has, whatever the metric's kind."""
    return {
        "metric": config.name,
        "start_ms": int(start_ms),
        "end_ms": int(end_ms),
        "n": result.n,
        "protocol": config.protocol_name,
        "epsilon": config.epsilon,
        "config_version": config.version,
        "fingerprint": config.fingerprint.hex(),
        "combined_versions": None,
        **support_facts(config, result.n, getattr(result, "noise", None)),
        "estimator": config.estimator.record(result.estimator),
        "pane": pane,
        "privacy": privacy_budget(config).as_record(),
    }
