"""What a device is promised: ε per report, per day at the configured rate, and over a lifetime.

`privacy_budget(config)` is the one place every surface (`ldp show`, the estimate records, the
store, the dashboard) takes the promise from. With r = `reports_per_day` and ε1 the per-report ε:

- one-stage metric: each report is a fresh ε1-LDP draw and reports compose by basic sequential
  composition (ε adds up), so a day costs r·ε1 and the lifetime cost grows without bound (r·ε1
  more each day): `lifetime` is None;
- memoized metric (ldp_telemetry.ldp.protocols.memoized): every report of one value is a
  randomisation of the same ε∞-LDP permanent response, so any number of them reveal at most ε∞
  about that value (post-processing), and at most r·ε1 by sequential composition: a day costs
  min(r·ε1, ε∞) while the value holds, min(r·ε1, k·ε∞) if it takes k distinct values that day.
  Over a lifetime a device holds at most L = min(max_values, the protocol's distinct permanent
  responses: d, or g for local hashing) of them, and the lifetime cost is L·ε∞ (sequential
  composition over distinct permanent responses).

Everything is per metric *configuration*: a new version has a new fingerprint, so its permanent
responses are fresh and its lifetime budget starts again; a device reporting several metrics
adds their budgets (docs/privacy-over-time.md).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ldp_telemetry.ldp.base.times import DAY_MS, reports_per_window
from ldp_telemetry.ldp.config.memoize import REPEAT

#: How the per-day and lifetime figures are composed.
SEQUENTIAL = "basic sequential composition: the ε of separate reports add up"
MEMOIZED_RULE = ("basic sequential composition over reports, capped per distinct value by the "
                 "ε∞ of its memoized permanent response (post-processing)")
#: What `on_limit` "stop" adds outside the bound: whether a report is sent depends on the value.
STOP_CAVEAT = ("on_limit 'stop' is outside this bound: a withheld report reveals that the "
               "device's new value is none of its memoized ones")


@dataclass(frozen=True)
class PrivacyBudget:
    """A metric configuration's promise to one device (see the module docstring).

    `per_day` is None when no reporting rate is configured; `lifetime` is None when it grows
    without bound (a one-stage metric); `distinct_values` is L, the most distinct permanent
    responses a device holds (None for a one-stage metric).
    """

    per_report: float
    memoized: bool
    reports_per_day: float | None
    per_day: float | None
    lifetime: float | None
    lifetime_epsilon: float | None
    distinct_values: int | None
    rule: str

    def as_record(self) -> dict:
        """The budget as plain JSON values (the estimate records' `privacy` field)."""
        return asdict(self)

    def text(self) -> str:
        """One line a user can read."""
        if self.reports_per_day is None:
            day = (f"per day: reports/day x {self.per_report:g} (no reporting rate configured)"
                   if not self.memoized else
                   f"per day: at most ε∞={self.lifetime_epsilon:g} while the value holds (no "
                   "reporting rate configured)")
        else:
            day = f"ε={self.per_day:.3g} per day at {self.reports_per_day:g} reports/day"
            if self.memoized:
                day += " while the value holds"
        if not self.memoized:
            growth = "" if self.per_day is None else f" (grows by {self.per_day:.3g} every day)"
            return (f"ε={self.per_report:g} per report; {day}; no lifetime bound{growth}: "
                    "reports are not memoized")
        return (f"ε={self.per_report:g} per report; {day}; ε∞={self.lifetime_epsilon:g} per "
                f"distinct value; lifetime ε={self.lifetime:.4g} (at most {self.distinct_values} "
                "distinct values)")


def privacy_budget(config: Any) -> PrivacyBudget:
    """The promise of a registry `MetricConfig` (module docstring)."""
    epsilon, rate = float(config.epsilon), config.reports_per_day
    memo = getattr(config, "memoize", None)
    if memo is None:
        per_day = None if rate is None else rate * epsilon
        return PrivacyBudget(epsilon, False, rate, per_day, None, None, None, SEQUENTIAL)
    items = config.protocol.prr_items
    distinct = items if memo.max_values is None else min(memo.max_values, items)
    lifetime = memo.lifetime_epsilon
    per_day = None if rate is None else min(rate * epsilon, lifetime)
    rule = MEMOIZED_RULE if memo.on_limit == REPEAT else f"{MEMOIZED_RULE}; {STOP_CAVEAT}"
    return PrivacyBudget(epsilon, True, rate, per_day, distinct * lifetime, lifetime, distinct,
                         rule)


def window_cost(privacy: dict, window_ms: int) -> str:
    """What one device's reports in a window of `window_ms` cost, as text: at the configured rate
    it sends at most ceil(rate x window) of them, costing that many times ε1, capped at ε∞ for a
    memoized metric whose value holds through the window; without a rate, the count is unknown."""
    rate, per_report = privacy.get("reports_per_day"), float(privacy["per_report"])
    lifetime = privacy.get("lifetime_epsilon") if privacy.get("memoized") else None
    if rate is None:
        return (f"reports per window x {per_report:g} (no reporting rate configured)"
                if lifetime is None else
                f"at most ε∞ = {float(lifetime):g} while the value holds (no reporting rate "
                "configured)")
    reports = max(1, math.ceil(rate * window_ms / DAY_MS - 1e-9))
    cost = reports * per_report if lifetime is None else min(reports * per_report,
                                                               float(lifetime))
    return f"ε = {cost:.4g} ({reports} report{'s' if reports > 1 else ''} at most)"


def budget_text(privacy: dict | None) -> str | None:
    """The `text` of a budget read back from a record's `privacy` field (None when absent)."""
    if not privacy:
        return None
    fields: dict[str, Any] = {name: privacy.get(name)
                              for name in PrivacyBudget.__dataclass_fields__}
    return PrivacyBudget(**fields).text()


def repeated_reports_warning(config: Any, window_ms: int) -> str | None:
    """A warning when a memoized metric's devices send more than one report per window at the
    configured rate (their reports share a PRR, so the one-report-per-device error bars are too
    narrow: docs/privacy-over-time.md); None otherwise, or when no rate is configured."""
    note = repeated_reports_note(privacy_budget(config).as_record(), window_ms)
    return None if note is None else f"metric {config.name!r}: {note}"


def repeated_reports_note(privacy: dict | None, window_ms: int) -> str | None:
    """`repeated_reports_warning` from a record's `privacy` field (without the metric's name)."""
    if not privacy or not privacy.get("memoized") or privacy.get("reports_per_day") is None:
        return None
    rate = float(privacy["reports_per_day"])
    per_window = rate * window_ms / DAY_MS
    if per_window <= 1:
        return None
    return (f"at {rate:g} reports/day a device sends about {per_window:.3g} reports per window, "
            "which share its permanent response: the error bars assume one report per device "
            f"per window and are too narrow; windows of at most {DAY_MS / rate / 1000:g} s keep "
            "to one")


__all__ = ["DAY_MS", "PrivacyBudget", "budget_text", "privacy_budget",
           "repeated_reports_note", "repeated_reports_warning", "reports_per_window",
           "window_cost"]
