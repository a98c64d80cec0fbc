"""The planner's cost of a chosen sketch (ldp_telemetry.ldp.config.cost.sketch_costs) against
the committed measurements of benchmarks/sketch_cost.py. No test times anything: the
measurements are benchmarks/results/sketch_cost.json, made by that script.

The scaled model is within a factor of 2 of every measured row for FLH and for every sketch whose
statistic (k·m cells) is no larger than the default's; a larger CMS or HCMS statistic costs up to
about 5.5 times what the scaling says (docs/large-domains.md), which the last test bounds so that
a worse model, or a worse measurement, shows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ldp_telemetry.ldp.config.cost import cost_model, sketch_costs
from ldp_telemetry.ldp.protocols import make_protocol

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "sketch_cost.json"
ROWS = json.loads(RESULTS.read_text(encoding="utf-8"))["results"]["rows"]
EPSILON = json.loads(RESULTS.read_text(encoding="utf-8"))["results"]["epsilon"]


def within_default(row) -> bool:
    default = make_protocol(row["protocol"], EPSILON, row["d"])
    return row["protocol"] == "flh" or row["k"] * row["m"] <= default.k * default.m


def test_the_committed_rows_hold_the_current_scaled_model():
    model = cost_model()
    for row in ROWS:
        protocol = make_protocol(row["protocol"], EPSILON, row["d"], hashes=row["k"],
                                 buckets=row["m"])
        per_second, finalize = sketch_costs(model, protocol)
        assert row["model_count_seconds_per_report"] == pytest.approx(1 / per_second, rel=1e-9)
        assert row["model_finalize_seconds"] == pytest.approx(finalize, rel=1e-9)


@pytest.mark.parametrize("row", [row for row in ROWS if within_default(row)],
                         ids=lambda row: f"{row['protocol']}-d{row['d']}-k{row['k']}-m{row['m']}")
def test_the_scaled_model_is_within_a_factor_of_2_of_the_measurement(row):
    assert 0.5 <= row["count_ratio"] <= 2.0
    assert 0.5 <= row["finalize_ratio"] <= 2.0


def test_larger_statistics_cost_more_than_the_scaling_within_a_stated_bound():
    larger = [row for row in ROWS if not within_default(row)]
    assert {row["protocol"] for row in larger} == {"cms", "hcms"}
    for row in larger:
        assert 0.5 <= row["count_ratio"] <= 6.0 and 0.5 <= row["finalize_ratio"] <= 6.0, row
