"""The 95% error bands every reader shows, in one place.

A frequency value's band is the exact 95% band of its unbiased estimate (`value_bands`,
`value_band`: the score band at the record's p*, q* and n; unbiased_estimate ± Z95 · standard
error for a record without them; ldp_telemetry.ldp.estimation.frequency_bands says why,
whatever the post-processing or Wiener filter: the printed estimate may lie outside it), none
where the record declares none (too few supports, no reports, a pooled-hash oracle's Wiener
record written before it kept f~'s standard error beside the filter's: `band_errors`), and
none for a string metric's heavy hitters, whatever an older record states (`value_band_method`:
HEAVY_HITTER_BAND_REASON, [Wang20] eq. 2's band holds for a string fixed in advance, not for
strings the search chose for their high estimates). A
numeric record's statistics (mean, variance, quantiles) carry their own bands (`bands`, named
by `band_method`, or per statistic by `band_methods` where it differs:
`statistic_band_method`; a band need not be centred on the estimate, and a statistic may have
none):
`statistic_band` and `summary_bands` read them, falling back to estimate ± Z95 · bootstrap
standard error only for records written before `band_method` existed. A CFO-binning or
hierarchical-histogram record's quantiles have no 95% band but a conservative one beside it
(`conservative_band`: it holds the quantile in at least 95% of windows by construction, and is
never shown as a 95% band), and so has a Square Wave quantile in a setting where its band
over-covered on held-out windows, a Square Wave mean or variance whose band the bucketing
bound widened past its share, and a CFO-binning or hierarchical-histogram mean or variance in a
setting where its band over-covered (ldp_telemetry.ldp.estimation.cfo_moments
.bin_moment_bands). The store, the
dashboard, `ldp show` and `ldp query` all take their bands from here. A record is an
`output.estimate.EstimateRecord` or its decoded JSON (a stored record read back).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ldp_telemetry.ldp.estimation.frequency_bands import (few_supports_reason,
                                                          pool_corrected_bands,
                                                          pooled_value_band, score_bands)
from ldp_telemetry.ldp.estimation.bin_answers import names_bin_protocol
from ldp_telemetry.ldp.estimation.bin_quantiles import WHOLE_BINS
from ldp_telemetry.ldp.estimation.moments import MOMENT_STATISTICS
from ldp_telemetry.ldp.estimation.heavy_hitters import HEAVY_HITTER_BAND_REASON
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS
from ldp_telemetry.ldp.estimation.uncertainty import (BAND_BIAS_CORRECTED, BAND_EXACT,
                                                      BAND_FIXED_GAIN, BAND_NONE,
                                                      BAND_POOL_CORRECTED, Z95)
from ldp_telemetry.ldp.protocols import is_pooled, make_protocol
from ldp_telemetry.ldp.protocols.hash_pool import HashPool, sketch_arguments
from ldp_telemetry.output.estimate import EstimateRecord

#: A window-estimate record, typed or as decoded JSON.
Record = EstimateRecord | Mapping[str, Any]

__all__ = ["Z95", "band95", "band_centre",
           "band_errors", "conservative_band", "conservative_method", "declares_no_value_band",
           "half_width95", "pool_band_method", "score_facts", "statistic_band",
           "statistic_band_method", "summary_bands", "summary_statistics", "value_band",
           "value_band_method", "value_band_reason", "value_bands"]


def band95(value: float, std_error: float | None) -> tuple[float | None, float | None]:
    """(lower, upper) of the 95% band; (None, None) when there is no standard error."""
    if std_error is None:
        return None, None
    return value - Z95 * std_error, value + Z95 * std_error


def half_width95(std_error: float | None) -> float | None:
    """Z95 · std_error: the ± of a 95% band (None when there is no standard error)."""
    return None if std_error is None else Z95 * std_error


def _field(record: Record, name: str) -> Any:
    """A field of a typed or a decoded record (None where it has none)."""
    return (getattr(record, name) if isinstance(record, EstimateRecord)
            else record.get(name))


def declares_no_value_band(record: Record) -> bool:
    """Whether a frequency record's values have no band: it declares none (`band_method`
    "none": too few supports, no reports, a pooled-hash oracle's Wiener filter in a record
    written before `unbiased_std_error`; `band_reasons` says why), or it is a pooled-hash
    oracle's Wiener record without `unbiased_std_error` (`fixed-gain`, written before that was
    declared: its std_error is the filter's, not f~'s with the collision term), or a
    pooled-hash record whose window the pool-bias rule declares (`pool_band_method`: a record
    written before that rule states `exact-variance` where today's states none, and is read
    as today's) — except a CMS or HCMS window that rule gives `pool-corrected` bands, whatever
    an older record states — or a string metric's record (its heavy hitters, whatever it
    states: `value_band_method`)."""
    return value_band_method(record) == BAND_NONE


def value_band_method(record: Record) -> str:
    """How a frequency record's value bands are made, as its readers make them: `none` where
    `declares_no_value_band`, `pool-corrected` for a pooled-hash window `pool_band_method`
    gives it, else the record's `band_method` (`exact-variance` for a record written before
    the field).

    A string metric's record (one with `heavy_hitters`) has none, whatever it states (one
    written before this rule states `exact-variance` and is read as today's): its values are
    the strings the search chose for their high estimates, and the band of [Wang20] eq. 2
    (estimate ± Z95 · std_error) is the band of a string fixed in advance, never measured for
    the strings found (`value_band_reason`)."""
    if _field(record, "heavy_hitters") is not None:
        return BAND_NONE
    method = _field(record, "band_method")
    if not is_pooled(_field(record, "protocol")):
        return BAND_EXACT if method is None else str(method)
    estimator = (_field(record, "estimator") or {}).get("method", "unbiased")
    if method == BAND_FIXED_GAIN or (estimator != "unbiased"
                                     and _field(record, "unbiased_std_error") is None):
        return BAND_NONE
    return pool_band_method(record)


def value_band_reason(record: Record) -> str | None:
    """Why a frequency record's values have no band, as its readers say it: a string metric's
    record's HEAVY_HITTER_BAND_REASON (whatever it states, as `value_band_method` reads it), else
    the reason its `band_reasons` state for `estimate` where `value_band_method` is `none`;
    None where its values have bands or no reason is stated."""
    if _field(record, "heavy_hitters") is not None:
        return HEAVY_HITTER_BAND_REASON
    if value_band_method(record) != BAND_NONE:
        return None
    reason = (_field(record, "band_reasons") or {}).get("estimate")
    return None if reason is None else str(reason)


def pool_band_method(record: Record) -> str:
    """How a pooled-hash record's value bands are made, by today's rule
    (frequency_bands.pooled_value_band at its n, ε, k, m and unbiased estimate): `none`,
    `exact-variance` or `pool-corrected`. A record written before the rule (`exact-variance`
    past the pool-bias share, or `none` for that share alone) is read as today's, and as
    `ldp query` answers it from the same fields; a record naming another method, or without
    the fields to tell, is read as written."""
    method = _field(record, "band_method")
    n, unbiased = _field(record, "n"), _field(record, "unbiased_estimate")
    epsilon = _field(record, "epsilon")
    if (method not in (None, BAND_EXACT, BAND_NONE, BAND_POOL_CORRECTED) or not n
            or unbiased is None or epsilon is None):  # not enough to tell: read as written
        return BAND_EXACT if method is None else str(method)
    protocol = _record_pool(record, np.asarray(unbiased, dtype=np.float64).size)
    noise = protocol.noise(int(n)).for_window(np.asarray(unbiased, dtype=np.float64))
    if few_supports_reason(noise) is not None:
        return BAND_NONE
    return pooled_value_band(protocol, noise, np.asarray(unbiased, dtype=np.float64))[0]


def _record_pool(record: Record, d: int) -> HashPool:
    """The pooled-hash oracle a record was made with: its protocol at its ε over d values, with
    its `parameters`' k and m (the defaults for a record written before the field) and the
    public pool root every configuration uses (hash_pool.POOL_ROOT)."""
    protocol = make_protocol(_field(record, "protocol"), float(_field(record, "epsilon")), d,
                             **sketch_arguments(_field(record, "parameters") or {}))
    assert isinstance(protocol, HashPool), "a pooled-hash record's protocol"
    return protocol


def _pool_corrected_bands(record: Record) -> tuple[list, list]:
    """(lower, upper) of a `pool-corrected` record's values: frequency_bands.
    pool_corrected_bands of its unbiased estimate under the pool its fields rebuild (None for
    every value where the solve does not converge, as its writer would have declared)."""
    unbiased = np.asarray(_field(record, "unbiased_estimate"), dtype=np.float64)
    try:
        lower, upper = pool_corrected_bands(_record_pool(record, unbiased.size), unbiased,
                                            int(_field(record, "n")))
    except ArithmeticError:
        return [None] * unbiased.size, [None] * unbiased.size
    return lower.tolist(), upper.tolist()


def band_errors(record: Record) -> Any:
    """The standard errors a frequency record's centre ± Z95 · s.e. bands are made from: its
    `unbiased_std_error` (a pooled-hash oracle's Wiener record: f~'s, the collision term
    included, where `std_error` is the filter's), else its `std_error`."""
    kept = _field(record, "unbiased_std_error")
    return _field(record, "std_error") if kept is None else kept


def band_centre(record: Record) -> Any:
    """The values a frequency record's bands are centred on: its `unbiased_estimate` (the
    exact band of the unbiased estimate, whatever the post-processing), `estimate` where the
    record has none."""
    unbiased = _field(record, "unbiased_estimate")
    return _field(record, "estimate") if unbiased is None else unbiased


def score_facts(record: Record) -> tuple[float, float, int] | None:
    """(p*, q*, n) of a frequency record whose bands are `score_bands` of its unbiased
    estimate (ldp_telemetry.ldp.estimation.frequency_bands); None for a record without them (a
    combined or string record, a pooled-hash oracle's (its eq. 2 leaves out the collision term
    its std_error holds), one written before p* and q* were recorded, an empty window),
    whose bands are centre ± Z95 · std_error."""
    p_star, q_star, n = (_field(record, name) for name in ("p_star", "q_star", "n"))
    if is_pooled(_field(record, "protocol")):  # its std_error holds the collision term
        return None
    if (p_star is None or q_star is None or not n or _field(record, "unbiased_estimate") is None
            or _field(record, "combined_versions") is not None):
        return None
    return float(p_star), float(q_star), int(n)


def value_band(facts: tuple[float, float, int] | None, centre: float | None,
               std_error: float | None) -> tuple[float | None, float | None]:
    """One value's band: its score band at `facts` (`score_facts`), else centre ± Z95 ·
    std_error; (None, None) without a standard error."""
    if centre is None or std_error is None:
        return None, None
    if facts is None:
        return band95(centre, std_error)
    lower, upper = score_bands(np.array([centre]), *facts)
    return float(lower[0]), float(upper[0])


def value_bands(record: Record) -> tuple[list, list]:
    """(lower bounds, upper bounds) of the 95% band of each value of a frequency record: the
    exact band of its unbiased estimate (`score_bands` at the record's p*, q* and n; centre
    ± Z95 · `band_errors` for a record without them, `band_centre`; a CMS or HCMS window past
    the pool-bias share: the score band around it with the pool's bias removed,
    `pool_band_method`), or None for every value when
    the record declares no band (`band_method` "none", `declares_no_value_band`;
    `band_reasons` says why)."""
    estimate, errors = _field(record, "estimate"), band_errors(record)
    method = value_band_method(record)
    if method == BAND_NONE or errors is None:
        return [None] * len(estimate), [None] * len(estimate)
    if method == BAND_POOL_CORRECTED:
        return _pool_corrected_bands(record)
    facts = score_facts(record)
    if facts is not None:
        lower, upper = score_bands(np.asarray(band_centre(record), dtype=np.float64), *facts)
        return lower.tolist(), upper.tolist()
    bands = [band95(float(value), float(error))
             for value, error in zip(band_centre(record), errors, strict=False)]
    return [low for low, _ in bands], [high for _, high in bands]


def _finite(value: Any) -> float | None:
    """value as a float, None for None and NaN."""
    return None if value is None or value != value else float(value)


def summary_statistics(record: Record) -> list[tuple[str, str, float | None, float | None]]:
    """(statistic, band key, value, standard error) of a numeric record's summaries: `mean`
    (its `mean_std_error`: the exact one of its band's centre, the bootstrap's in records
    written before), `variance` (its `variance_std_error`, the exact one of its band's centre;
    none in records written before) and `q<level>` per quantile (its bootstrap standard
    error) (band key: the record's `bands` key, the bare level for a quantile); empty for a
    frequency record."""
    if _field(record, "mean") is None and not _field(record, "quantiles"):
        return []
    errors = _field(record, "quantile_std_errors") or {}
    rows = [("mean", "mean", _finite(_field(record, "mean")),
             _finite(_field(record, "mean_std_error"))),
            ("variance", "variance", _finite(_field(record, "variance")),
             _finite(_field(record, "variance_std_error")))]
    rows += [(f"q{level}", level, _finite(value), _finite(errors.get(level)))
             for level, value in (_field(record, "quantiles") or {}).items()]
    return rows


def statistic_band(record: Record, key: str, value: float | None = None,
                   std_error: float | None = None) -> tuple[float | None, float | None]:
    """(lower, upper) of the 95% band of statistic `key` ("mean", "variance" or a quantile
    level such as "0.5") of a numeric record; (None, None) where the record has none.

    A record naming its `band_method` is read as it is: its `bands[key]`, null being no band
    (the record's `band_reasons` say why). A record written before the field gets
    value ± Z95 · std_error (`band95`), as readers showed it then. A CFO-binning or
    hierarchical-histogram record's quantile has none (`conservative_band` gives the band it
    has), whatever a record written before `conservative_bands` states."""
    if _field(record, "band_method") is not None:
        if _whole_bins_quantile(record, key):
            return None, None
        band = (_field(record, "bands") or {}).get(key)
        if band is None:
            return None, None
        return _finite(band.get("lower")), _finite(band.get("upper"))
    if value is None or std_error is None:
        return None, None
    return band95(value, std_error)


def statistic_band_method(record: Record, key: str) -> str | None:
    """How the band of statistic `key` of a numeric record was made: its entry in the record's
    `band_methods` (the statistics made otherwise than the rest: a Square Wave record's
    exact-variance mean and variance), else the record's `band_method` (None for a record
    written before it)."""
    method = (_field(record, "band_methods") or {}).get(key)
    if method is None and _whole_bins_quantile(record, key):
        return BAND_NONE
    return _field(record, "band_method") if method is None else str(method)


def _whole_bins_quantile(record: Record, key: str) -> bool:
    """Whether statistic `key` is a quantile of a CFO-binning or hierarchical-histogram record
    (bin_answers.names_bin_protocol), whose band is of whole bins."""
    return key in QUANTILE_LEVELS and names_bin_protocol(_field(record, "protocol"))


def conservative_band(record: Record, key: str) -> tuple[float | None, float | None]:
    """(lower, upper) of the conservative band of statistic `key` ("mean", "variance" or a
    quantile level such as "0.5") of a numeric record: a band that holds the truth in at least
    95% of windows and is not a 95% band (the statistic has none: `statistic_band`) — a
    CFO-binning or hierarchical-histogram quantile's band of whole bins, a Square Wave
    quantile's bias-corrected band where it over-covered (uncertainty.conservative_statistics),
    or a Square Wave mean's or variance's exact-variance band widened past its share by the
    bucketing bound (moments.statistic_bands; a record written before gave that band as the
    95% band, its reason saying it over-covers, and is read as written), or a CFO-binning or
    hierarchical-histogram mean's or variance's exact-variance band in a setting where it
    over-covered (cfo_moments.bin_moment_bands; likewise). Its
    `conservative_bands` entry, or for a CFO-binning or hierarchical-histogram record written
    before that field the quantile's entry in `bands` (the same band, then printed as a 95%
    band); (None, None) for other statistics and records and where it has none."""
    kept = _field(record, "conservative_bands")
    if kept is None:
        if not _whole_bins_quantile(record, key) or _field(record, "band_method") is None:
            return None, None  # none kept; or written before its bands: a bootstrap band
        kept = _field(record, "bands") or {}
    band = kept.get(key)
    if band is None:
        return None, None
    return _finite(band.get("lower")), _finite(band.get("upper"))


def conservative_method(record: Record, key: str) -> str | None:
    """How the `conservative_band` of statistic `key` was made: a CFO-binning or
    hierarchical-histogram quantile's of whole bins (bin_quantiles.WHOLE_BINS), a Square Wave
    quantile's by the bias-corrected bootstrap (BAND_BIAS_CORRECTED), a mean's or variance's
    by the exact variance (BAND_EXACT: Square Wave's with an allowance for the bucketing bias,
    moments.statistic_bands; CFO-binning's and HH's, cfo_moments.bin_moment_bands); None where
    the record has none."""
    if conservative_band(record, key)[0] is None:
        return None
    if key in MOMENT_STATISTICS:
        return BAND_EXACT
    return WHOLE_BINS if names_bin_protocol(_field(record, "protocol")) else BAND_BIAS_CORRECTED


def summary_bands(record: Record) -> dict[str, tuple[float | None, float | None]]:
    """statistic (as `summary_statistics` names it) -> (lower, upper) of its 95% band."""
    return {name: statistic_band(record, key, value, error)
            for name, key, value, error in summary_statistics(record)}
