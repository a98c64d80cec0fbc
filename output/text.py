"""Window-estimate records as text: what `ldp show` prints, and a live run's line per pane.

Every ± is the half width of the 95% band (`ldp_telemetry.output.bands`), as in `ldp query`
and the dashboard: `BAND_NOTE` says so once per output that prints one (`band_note`).
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ldp_telemetry.ldp.base.validation import is_number
from ldp_telemetry.ldp.estimation.estimators import METHODS as ESTIMATORS
from ldp_telemetry.ldp.estimation.uncertainty import (BAND_EXACT, BAND_POOL_CORRECTED,
                                                      CONSERVATIVE)
from ldp_telemetry.ldp.protocols.base import FREQUENCY
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.bands import (Z95, conservative_band, half_width95, statistic_band,
                                        statistic_band_method, value_band_method,
                                        value_band_reason, value_bands)
from ldp_telemetry.output.integrity import flag_text
from ldp_telemetry.output.layout import COMBINED
from ldp_telemetry.output.names import printable
from ldp_telemetry.output.resolution import resolution, warning_text


def metric_title(record: EstimateRecord) -> str:
    """The metric and the configuration version its estimate is from: ``flight.dest v2``,
    ``flight.dest combined v1+v2`` (just the metric for a record without versions)."""
    version = record.version
    metric = printable(record.metric)
    if record.combined_versions is not None:  # its version is COMBINED
        return f"{metric} {COMBINED} " + "+".join(f"v{v}" for v in record.combined_versions)
    return f"{metric} {version}" if version else metric


#: What every ± printed by `show`, `query` and a live run's pane lines means.
BAND_NOTE = f"± is the half width of the 95% band: {Z95:.2f} standard errors"
#: How a value printed ± the half width of its band is written (`format_pane` drops the spaces).
PLUS_MINUS = " ± "
#: After a numeric statistic whose printed value lies outside its band: a record written before
#: the printed mean and variance were their bands' centres printed its histogram's, which a
#: band of the unbiased moment estimate need not hold (its band_reasons say so).
OUTSIDE_NOTE = "  (the printed value lies outside its band: see band_reasons)"
#: What `ldp show`'s bands of a frequency window's largest values hold: each value's own, not
#: adjusted for its having been picked as one of the largest by the same noise.
SELECTED_NOTE = ("each value's band is its own, not adjusted for the value being among the "
                 "largest: `ldp query --top K` gives each a conservative band (not a 95% "
                 "band), or says why it has none")
#: What a conservative band is (a top-k answer's, printed `conservative_text`; a numeric
#: statistic's, `output.bands.conservative_band`), said once after the lines that print one.
CONSERVATIVE_NOTE = (f"{CONSERVATIVE}: a band made to hold the truth in at least 95% of "
                     "windows, measured mostly above that (often far above); not a 95% band")


def band_note(shown: Iterable[str]) -> list[str]:
    """[BAND_NOTE] where one of the lines `shown` (values as printed, not their bands' reasons)
    prints a value ± the half width of its band, else []: a band printed [lower, upper], or
    none, needs no note."""
    return [BAND_NOTE] if any(PLUS_MINUS in line for line in shown) else []


def conservative_text(lower: float, upper: float, spec: str = ".5f") -> str:
    """" [lower, upper] conservative": a conservative band as printed beside a value, never as
    its 95% band (CONSERVATIVE_NOTE)."""
    return f" [{lower:{spec}}, {upper:{spec}}] {CONSERVATIVE}"


def _plus_minus(value: float, lower: float | None, upper: float | None, error: float | None,
                spec: str) -> str:
    """" ± half width" of a value's 95% band when it is centred on the value, " [lower,
    upper]" when it is not (the band of the unbiased estimate around a post-processed value,
    `output.bands.band_centre`), or the bare standard error where the record declares no band
    (`output.bands.declares_no_value_band`)."""
    if lower is None or upper is None:
        return "" if error is None else f" (s.e. {error:{spec}}, no band)"
    if abs((lower + upper) / 2 - value) <= 1e-12 * max(1.0, abs(value)):
        return f"{PLUS_MINUS}{(upper - lower) / 2:{spec}}"
    return f" [{lower:{spec}}, {upper:{spec}}]"


def found_by(record: EstimateRecord) -> list[str] | None:
    """How each heavy hitter of a string metric's record was found (`heavy_hitters.found_by`:
    "search", "dictionary" or "both"), in `labels` order; None for a record without it (no
    candidate dictionary, not a string metric, or written before the field)."""
    found = [str(by) for by in (record.heavy_hitters or {}).get("found_by") or ()]
    return found if found and len(found) == len(record.labels) else None


def filtered(record: EstimateRecord) -> bool:
    """Whether a frequency record's values come from a frequency estimator other than the
    unbiased estimate (a Wiener filter): they are then not the centre of their bands."""
    name = (record.estimator or {}).get("method", "unbiased")
    return (name != "unbiased" and name in ESTIMATORS
            and ESTIMATORS.lookup(name).kind == FREQUENCY)


def band_text(record: EstimateRecord) -> str:
    """What a frequency record's value bands are, as `ldp show` names them: its `band_method`
    (exact-variance for records written before the field), "of the unbiased estimate" when
    the values are post-processed or filtered (`output.bands.band_centre`); a pooled-hash
    record's as its readers make them (`output.bands.value_band_method`: `none` for an FLH
    window past the pool-bias share written before it was declared), `pool-corrected` with
    what it is centred on; a string metric's `none`, whatever an older record states."""
    # read by today's rule, also when written before it: a CMS or HCMS window past the
    # pool-bias share is pool-corrected, an FLH one and a string metric's have none (their
    # values print no band)
    method = value_band_method(record)
    if method == BAND_POOL_CORRECTED:
        return f"{BAND_POOL_CORRECTED}: the unbiased estimate with its hash pool's bias removed"
    post = (record.postprocess or {}).get("method", "base")
    if (method == BAND_EXACT and record.unbiased_estimate is not None
            and (post not in ("base", "none", "post-pos") or filtered(record))):
        return f"{method} of the unbiased estimate"
    return printable(str(method))  # a record read from a file may name anything


def no_band_notes(records: Iterable[EstimateRecord]) -> list[str]:
    """"no band: <reason>" once per reason a string metric's record among `records` gives its
    values no band (`output.bands.value_band_reason`), in the order first met; [] where none
    is shown."""
    reasons = (value_band_reason(record) for record in records
               if record.heavy_hitters is not None)
    return [f"no band: {reason}" for reason in dict.fromkeys(reasons) if reason is not None]


def format_top(record: EstimateRecord, k: int = 5) -> str:
    """One window as text: its header, then the k largest estimates with 95% error bars
    (for a numeric metric: its mean and quantiles with 95% error bars), and a warning line when
    the window is under-resolved (`output.resolution`)."""
    if record.numeric:
        return format_numeric(record)
    estimate, error, post = record.estimate, record.std_error, record.postprocess
    # a frequency oracle's record has both (record_problem requires them of one read back)
    assert error is not None and post is not None, "a frequency record without its errors"
    top = np.argsort(-estimate, kind="stable")[:k]
    method = printable(str(post.get("method")))
    estimator = (record.estimator or {}).get("method", "unbiased")
    if estimator != "unbiased":
        method = f"{printable(str(estimator))} + {method}"
    sketch = record.parameters  # a pooled-hash oracle's k and m
    shown = printable(", ".join(f"{key}={value}"
                                for key, value in sorted((sketch or {}).items())))
    protocol = printable(record.protocol) + (f" ({shown})" if shown else "")
    lines = [f"{metric_title(record)}  [{record.window_start} .. {record.window_end})  "
             f"n={record.n:,}  {protocol} ε={record.epsilon:g}  {method}"
             f"  95% band: {band_text(record)}"
             + dictionary_text(record)]
    lower, upper = value_bands(record)
    by = found_by(record)
    for i in top.tolist():
        lines.append(f"    {printable(str(record.labels[i])):>12}  {estimate[i]:7.4f}"
                     + _plus_minus(float(estimate[i]), lower[i], upper[i], float(error[i]),
                                   ".4f")
                     + ("" if by is None else f"  found by {by[i]}"))
    found = resolution(record)
    if found is not None and found.under_resolved:
        lines.append(f"    warning: {warning_text(record, found)}")
    flags = flag_text(record)
    if flags is not None:
        lines.append(f"    {flags}")
    return "\n".join(lines)


def dictionary_text(record: EstimateRecord) -> str:
    """"  dictionary: N strings" for a string metric's record decoded against a candidate
    dictionary of N strings, else nothing."""
    size = (record.heavy_hitters or {}).get("dictionary") or 0
    return f"  dictionary: {size:,} strings" if size else ""


def format_numeric(record: EstimateRecord) -> str:
    """A numeric metric's window: mean and quantiles, each with its 95% band.

    A record that names its `band_method` shows its own `bands` as [lower, upper] (a
    bias-corrected band need not be centred on the estimate) and "no band" where it has none,
    naming after it the method of a band made otherwise than the window line says
    (`band_methods`: a Square Wave record's exact-variance mean and variance), and the variance
    where its band is made so or, in a histogram record whose bands are all exact-variance
    (CFO-binning, hierarchical histograms: or whose quantiles have conservative bands), where the
    record has an entry for it; a record
    written before the field shows estimate ± z · bootstrap standard error. A quantile with no
    95% band but a conservative one (a CFO-binning or hierarchical-histogram record, a Square
    Wave quantile whose band over-covered in its setting, a Square Wave mean or variance whose
    band the bucketing bound widened past its share, a CFO-binning or hierarchical-histogram
    mean or variance in a setting where its band over-covered:
    `output.bands.conservative_band`) shows it as "[lower, upper] conservative"
    (`conservative_text`), and the text ends with what such a band is (CONSERVATIVE_NOTE)."""
    estimator = record.estimator or {}  # every writer's names it; a file may not
    method = record.band_method
    iterations = estimator.get("iterations")
    lines = [f"{metric_title(record)}  [{record.window_start} .. {record.window_end})  "
             f"n={record.n:,}  {printable(record.protocol)} ε={record.epsilon:g}  "
             f"{printable(str(estimator.get('method', 'unknown estimator')))}"
             + (f" ({printable(str(iterations))} iterations)" if iterations else "")
             + f"  95% band: {printable(str(method or 'bootstrap'))}"]
    conservative: list[str] = []  # the statistics shown with a conservative band

    def bar(key: str, error: float | None, value: object = None) -> str:
        if method is not None:  # the record's own band (output/bands.py)
            lower, upper = statistic_band(record, key)
            own = statistic_band_method(record, key)
            named = "" if own == method else f"  ({printable(str(own))})"
            if lower is None:
                kept = conservative_band(record, key)
                if kept[0] is None or kept[1] is None:
                    return "  (no band)"
                conservative.append(key)
                return conservative_text(kept[0], kept[1], ".4g")
            outside = (OUTSIDE_NOTE if is_number(value) and upper is not None
                       and not lower <= value <= upper
                       else "")
            return f"  [{lower:.4g}, {upper:.4g}]{named}{outside}"
        return ("" if error is None or error != error
                else f"{PLUS_MINUS}{half_width95(error):.4g}")
    lines.append(f"    {'mean':>12}  {_shown_number(record.mean)}"
                 f"{bar('mean', record.mean_std_error, record.mean)}")
    if record.variance is not None and ((record.band_methods or {}).get("variance") or (
            (method == BAND_EXACT or record.conservative_bands is not None)
            and record.quantiles and "variance" in (record.bands or {}))):
        lines.append(f"    {'variance':>12}  {_shown_number(record.variance)}"
                     f"{bar('variance', None, record.variance)}")
    errors, quantiles = record.quantile_std_errors or {}, record.quantiles or {}
    for level in ("0.1", "0.25", "0.5", "0.75", "0.9") if quantiles else ():
        error = errors.get(level)
        lines.append(f"    {'q' + level:>12}  {_shown_number(quantiles.get(level))}"
                     f"{bar(level, error if is_number(error) else None)}")
    if conservative:
        lines.append(f"    ({CONSERVATIVE_NOTE})")
    return "\n".join(lines)


def _shown_number(value: object) -> str:
    """A statistic as the text shows it: "–" where a record read from a file has none."""
    return f"{value:.4g}" if is_number(value) else "–"


def format_pane(record: EstimateRecord, k: int = 3) -> str:
    """One line per pane: window, pane, n and the k largest estimates with 95% error bars, and
    the values implicated when the pane's integrity section is flagged (without the jump test,
    which needs the earlier windows: `ldp show` has it)."""
    estimate, labels = record.estimate.tolist(), record.value_labels
    error = record.std_error.tolist() if record.std_error is not None else [None] * len(estimate)
    lower, upper = value_bands(record)
    top = sorted(range(len(estimate)), key=lambda i: -estimate[i])[:k]
    values = ", ".join(f"{printable(str(labels[i]))} {estimate[i]:.3f}"
                       + _plus_minus(estimate[i], lower[i], upper[i], error[i],
                                     ".3f").replace(PLUS_MINUS, "±")
                       for i in top)
    pane = record.pane
    section = record.integrity or {}
    implicated = ", ".join(printable(str(value)) for value in section.get("implicated", [])[:5])
    flagged = (f"  integrity flagged: {implicated or 'no values'}"
               if section.get("flagged") else "")
    return (f"{metric_title(record):<18} [{record.window_start} .. {record.window_end})  "
            f"{pane.timing:<7} #{pane.index:<3} n={record.n:<7,} {values}{flagged}")
