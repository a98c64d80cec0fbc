"""The window-estimate record (built without Beam) carries its protocol's p*, q* and smallest
resolvable frequency; text output uses the one z of a 95% band; times round-trip."""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from ldp_telemetry.ldp.base.times import iso_from_ms, ms_from_iso
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.output.bands import Z95, band95, half_width95
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.reader import pane_of
from ldp_telemetry.output.records import BATCH_PANE, window_estimate_record
from ldp_telemetry.output.text import format_numeric, format_pane, format_top

REGISTRY = parse_registry({"metrics": [
    {"name": "g", "protocol": "grr", "epsilon": 2.0, "domain": {"labels": ["a", "b", "c"]}},
    {"name": "s", "protocol": "sw", "epsilon": 1.0,
     "domain": {"low": 0, "high": 10, "buckets": 8}}]})


def record_of(name: str, n: int) -> EstimateRecord:
    config = REGISTRY[name]
    protocol = config.protocol
    rng = np.random.default_rng(3)
    statistic = protocol.new_statistic()
    values = rng.integers(0, 3, n) if name == "g" else rng.uniform(0, 1, n)
    protocol.accumulate(statistic, protocol.perturb(values, rng))
    result = finalize_window(config, statistic, n)
    return window_estimate_record(config, result, ms_from_iso("2024-03-01T00:00:00Z"),
                                  ms_from_iso("2024-03-01T01:00:00Z"), BATCH_PANE)


def test_a_frequency_record_carries_p_star_q_star_and_the_smallest_resolvable_frequency():
    record = record_of("g", 400)
    e = math.exp(2.0)
    p, q = record.p_star, record.q_star
    assert p == pytest.approx(e / (e + 2)) and q == pytest.approx(1 / (e + 2))
    assert record.smallest_resolvable == pytest.approx(
        2 * math.sqrt(q * (1 - q) / 400) / (p - q))


def test_a_numeric_record_has_null_support_facts_and_an_empty_window_no_resolvable_frequency():
    numeric = record_of("s", 300)
    assert (numeric.p_star, numeric.q_star, numeric.smallest_resolvable) == \
        (None, None, None)
    empty = record_of("g", 0)
    assert empty.p_star is not None and empty.smallest_resolvable is None


def test_a_record_without_a_pane_is_one_on_time_pane():
    assert pane_of({}) == BATCH_PANE.to_json()
    assert pane_of({"pane": {"timing": "LATE", "index": 3, "is_last": True}}) == \
        {"timing": "LATE", "index": 3, "is_last": True}


def test_text_shows_the_half_width_of_the_95_percent_band():
    record = {"metric": "g", "window_start": "2024-03-01T00:00:00Z",
              "window_end": "2024-03-01T01:00:00Z", "n": 1000, "protocol": "grr",
              "epsilon": 2.0, "labels": ["a", "b"], "estimate": [0.7, 0.3],
              "std_error": [0.0123, 0.02], "postprocess": {"method": "norm", "params": {}},
              "estimator": {"method": "unbiased", "params": {}},
              "pane": {"timing": "ON_TIME", "index": 0, "is_last": False}}
    top = format_top(EstimateRecord.from_json(record), k=1).splitlines()
    assert top[1].split() == ["a", "0.7000", "±", f"{Z95 * 0.0123:.4f}"]
    assert f"a 0.700±{Z95 * 0.0123:.3f}" in format_pane(EstimateRecord.from_json(record))
    numeric = {**record, "bucket_edges": [0.0, 1.0, 2.0], "mean": 1.25, "mean_std_error": 0.5,
               "quantiles": {level: 1.0 for level in ("0.1", "0.25", "0.5", "0.75", "0.9")},
               "quantile_std_errors": {"0.5": 0.25}}
    lines = format_numeric(EstimateRecord.from_json(numeric)).splitlines()
    assert lines[1].split() == ["mean", "1.25", "±", f"{Z95 * 0.5:.4g}"]
    assert lines[4].split() == ["q0.5", "1", "±", f"{Z95 * 0.25:.4g}"]
    assert lines[3].split() == ["q0.25", "1"]  # no standard error: no band


def test_one_z_for_every_band():
    assert NormalDist().inv_cdf(0.975) == pytest.approx(Z95, rel=1e-15)
    assert band95(0.5, 0.1) == (0.5 - Z95 * 0.1, 0.5 + Z95 * 0.1)
    assert band95(0.5, None) == (None, None) and half_width95(None) is None


@pytest.mark.parametrize("ms, text", [
    (1_709_251_200_000, "2024-03-01T00:00:00Z"),
    (1_709_251_200_250, "2024-03-01T00:00:00.250Z"),
    (0, "1970-01-01T00:00:00Z"),
    (-1, "1969-12-31T23:59:59.999Z"),
])
def test_times_round_trip(ms, text):
    assert iso_from_ms(ms) == text and ms_from_iso(text) == ms
    fixed_width = text if "." in text else text[:-1] + ".000Z"
    assert iso_from_ms(ms, milliseconds=True) == fixed_width
    assert ms_from_iso(text.replace("Z", "")) == ms  # naive: UTC


def test_what_a_record_read_from_a_file_names_is_shown_escaped_and_a_missing_estimator_is_named():
    """Every field a record read from a file names and the text prints — its protocol, its
    post-processing and estimator, its band method, the integrity section's implicated and
    recovered values — goes through `printable`: the file may hold any string. A numeric record
    without an `estimator` (record_problem allows null) is shown, not a traceback."""
    bad = "x\x1b[2J\u202e"
    record = {"metric": "g", "window_start": "2024-03-01T00:00:00Z",
              "window_end": "2024-03-01T01:00:00Z", "n": 1000, "protocol": f"grr{bad}",
              "epsilon": 2.0, "labels": ["a", "b"], "estimate": [0.7, 0.3],
              "std_error": [0.0123, 0.02], "postprocess": {"method": f"norm{bad}", "params": {}},
              "estimator": {"method": f"iiw{bad}", "params": {}}, "band_method": f"b{bad}",
              "integrity": {"flagged": True, "alpha": 0.01, "implicated": [f"a{bad}"],
                            "statistics": [{"name": "mean_shift", "flagged": True,
                                            "score": 5.0, "p_value": 1e-6}],
                            "recovered": {"method": f"m{bad}", "fake_fraction": 0.1,
                                          "labels": [f"a{bad}"], "estimate": [0.5]}},
              "pane": {"timing": "ON_TIME", "index": 0, "is_last": False}}
    numeric = {**record, "labels": [], "bucket_edges": [0.0, 1.0, 2.0], "estimator": None,
               "std_error": None, "band_method": None, "integrity": None}
    texts = [format_top(EstimateRecord.from_json(record)),
             format_pane(EstimateRecord.from_json(record)),
             format_numeric(EstimateRecord.from_json(numeric))]
    for text in texts:
        assert "\x1b" not in text and "\u202e" not in text, text
        assert "x\\x1b[2J\\u202e" in text
    assert "unknown estimator" in texts[2]
