"""The too-few-reports advice: once per series from the whole run (`SeriesResolution`), and a
window's own line (`warning_text`), each worded so that its figures cannot disagree."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from ldp_telemetry.ldp.protocols.noise import smallest_resolvable
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.resolution import (CHANCE_ABOVE_FLOOR, NOISE_SHARE, resolution,
                                             series_resolution, warning_text)

HOUR = 3_600_000
P_STAR, Q_STAR = 0.5, 0.1192  # OUE at ε = 2


def zipf(d: int) -> list[float]:
    weights = 1.0 / np.arange(1, d + 1) ** 1.1
    return (weights / weights.sum()).tolist()


def windows(ns: list[int]) -> list[tuple[int, float]]:
    return [(n, smallest_resolvable(P_STAR, Q_STAR, n)) for n in ns]


@pytest.mark.parametrize("ns", [[700] * 50, [700] * 49 + [200], [2_000_000] * 20 + [300] * 3,
                                [2_000_000] * 10])
def test_the_series_advice_follows_from_one_threshold(ns):
    d = 500
    found = series_resolution(zipf(d), windows(ns), 2.0, HOUR)
    needed = math.ceil(CHANCE_ABOVE_FLOOR * d / NOISE_SHARE)
    assert found.needed == needed and found.target == pytest.approx(sorted(zipf(d))[-needed])
    # the windows it counts are exactly those whose floor is above the threshold
    flagged = sum(smallest_resolvable(P_STAR, Q_STAR, n) > found.target for n in ns)
    assert found.under_resolved_windows == flagged
    advice = found.advice()
    if not flagged:
        assert advice is None
        return
    assert ("every window" in advice) == (flagged == len(ns))
    assert flagged == len(ns) or f"{flagged:,} of {len(ns):,} windows" in advice
    assert "of which" not in advice and "by chance alone" not in advice
    # a window of the advised number of reports has its floor exactly at the threshold, and
    # the advised length brings that many reports at the run's rate
    reports = float(re.search(r"about ([\d,]+) reports per window", advice)[1].replace(",", ""))
    assert smallest_resolvable(P_STAR, Q_STAR, reports) == pytest.approx(found.target, rel=1e-3)
    rate = sum(ns) / (len(ns) * HOUR)
    assert found.rate_per_ms == pytest.approx(rate)
    assert f"{rate * HOUR:,.0f} reports per hour" in advice


def test_a_series_whose_values_cannot_be_resolved_says_so_without_a_length():
    mean = [0.0] * 500
    mean[:3] = [0.5, 0.3, 0.2]  # fewer than the 46 values needed have a positive mean
    found = series_resolution(mean, windows([1000] * 10), 2.0, HOUR)
    assert found.all_under_resolved
    advice = found.advice()
    assert "no window length would do" in advice and "reports per hour" not in advice


def test_a_windows_own_line_cannot_contradict_itself():
    rng = np.random.default_rng(5)
    checked = 0
    for n in (300, 700, 2000, 10_000):
        estimate = np.clip(np.asarray(zipf(500)) + rng.normal(0, 0.004, 500), 0, None)
        record = EstimateRecord(metric="m", start_ms=1_709_251_200_000,
                                end_ms=1_709_254_800_000, n=n, protocol="oue", epsilon=2.0,
                                smallest_resolvable=smallest_resolvable(P_STAR, Q_STAR, n),
                                estimate=estimate)
        found = resolution(record)
        if not found.under_resolved:
            continue
        text = warning_text(record, found)
        must, do = map(int, re.search(r"at least (\d+) must stand above it and (\d+) do",
                                      text).groups())
        assert do < must  # under-resolved means fewer stand above the floor than must
        assert "of which" not in text
        checked += 1
    assert checked
