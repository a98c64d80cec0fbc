"""A Square Wave mean or variance whose exact-variance band the report histogram's bucketing
bound widens by more than CONSERVATIVE_SHARE of Z95 · standard error has no 95% band: the band
is conservative (it holds a centred normal error with probability above 0.969) and is given
unchanged as `conservative_bands[stat]`, read so by every reader; the printed value and its
standard error are unchanged; a record written before is read as it was written."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation.moments import (moment_bands, protocol_model,
                                                  statistic_bands)
from ldp_telemetry.ldp.estimation.uncertainty import BAND_EXACT, BAND_NONE
from ldp_telemetry.output.bands import (conservative_band, conservative_method, statistic_band,
                                        statistic_band_method)
from ldp_telemetry.output.estimate import EstimateRecord, record_problem
from ldp_telemetry.output.records import numeric_estimate_record
from ldp_telemetry.output.text import CONSERVATIVE_NOTE, format_numeric
from tests.record_avro import through_avro

HOUR = 3_600_000
#: The start of the reason of a band widened past CONSERVATIVE_SHARE (moments.CONSERVATIVE_REASON).
WIDENED = "no 95% band: the band is widened by "


def _window(output_buckets: int, n: int = 1_000_000, seed: int = 12):
    """(config, report histogram, n) of a lognormal (1.0, 0.6) metric on [0, 32] at ε = 4 over
    128 buckets: n reports drawn from the channel at once (a multinomial of the reports'
    average bucket probabilities over 5,000 values, [Li20] eq. 3), not perturbed one by one.
    At 128 output buckets and 10⁶ reports allowing for the bucketing bound widens the
    variance's half-width by 0.38 of Z95 · s.e. (27% of the half-width) and the mean's by 0.08,
    against the line CONSERVATIVE_SHARE = 0.1; at 1,024 by less than 10⁻³ for both. The draw
    moves these only through the standard errors (relative spread about 10⁻³ at 10⁶ reports),
    so a seed that crossed the line is beyond any chance (false-failure rate < 10⁻⁶): the
    fixed seed 12 is no tuning."""
    config = parse_registry({"metrics": [{
        "name": "latency", "protocol": "sw", "epsilon": 4.0,
        "domain": {"low": 0, "high": 32, "buckets": 128, "output_buckets": output_buckets}}]}
    )["latency"]
    protocol = config.protocol
    rng = np.random.default_rng(seed)
    values = np.clip(rng.lognormal(1.0, 0.6, 5_000), 0, 32) / 32
    edges = np.linspace(-protocol.b, 1.0 + protocol.b, output_buckets + 1)
    overlap = np.clip(np.minimum(edges[1:], values[:, None] + protocol.b)
                      - np.maximum(edges[:-1], values[:, None] - protocol.b), 0, None)
    probabilities = (protocol.q * np.diff(edges) + (protocol.p - protocol.q) * overlap).mean(0)
    counts = rng.multinomial(n, probabilities / probabilities.sum())
    return config, counts, n


def _record(output_buckets: int) -> EstimateRecord:
    config, counts, n = _window(output_buckets)
    result = finalize_window(config, counts, n)
    return EstimateRecord.from_json(numeric_estimate_record(config, result, 0, HOUR).to_json())


@pytest.fixture(scope="module")
def widened() -> EstimateRecord:
    return _record(128)


def test_a_widened_variance_has_no_95_band_and_gives_it_as_conservative(widened):
    """128 output buckets, 10⁶ reports: the variance's `bands` entry is null, band method
    none, its reason the widening then that it is conservative; `conservative_bands`
    holds statistic_bands' band bit for bit; the printed variance and its standard error are
    the unbiased estimate's (moment_bands), as before; the mean keeps its 95% band."""
    config, counts, n = _window(128)
    model = protocol_model(config.protocol)
    made, conservative = statistic_bands(model, counts, 0.0, 32.0)
    found = moment_bands(model, counts)
    value = widened.json_value()
    assert value["bands"]["variance"] is None
    assert value["band_reasons"]["variance"].startswith(WIDENED)
    assert "probability above 0.969: it is conservative" in value["band_reasons"]["variance"]
    assert value["conservative_bands"]["variance"] == {"lower": conservative["variance"].lower,
                                                       "upper": conservative["variance"].upper}
    assert conservative["variance"].lower == 32.0 ** 2 * found.variance_band[0]
    assert conservative["variance"].upper == 32.0 ** 2 * found.variance_band[1]
    assert "mean" not in value["conservative_bands"]
    assert value["variance"] == 32.0 ** 2 * found.variance
    assert value["variance_std_error"] == 32.0 ** 2 * found.variance_std_error
    assert value["mean"] == 32.0 * found.mean
    assert value["mean_std_error"] == 32.0 * found.mean_std_error
    assert value["bands"]["mean"] == {"lower": made["mean"].lower, "upper": made["mean"].upper}
    assert statistic_band(widened, "variance") == (None, None)
    assert statistic_band_method(widened, "variance") == BAND_NONE
    assert conservative_band(widened, "variance") == (conservative["variance"].lower,
                                                      conservative["variance"].upper)
    assert conservative_method(widened, "variance") == BAND_EXACT
    assert conservative_method(widened, "mean") is None
    assert statistic_band_method(widened, "mean") == BAND_EXACT
    assert record_problem(value) is None


def test_a_band_not_widened_past_its_share_keeps_its_95_band():
    """1,024 output buckets, the same window: both 95% bands stay, no `conservative_bands`."""
    record = _record(1024)
    value = record.json_value()
    assert value["bands"]["variance"] is not None and value["bands"]["mean"] is not None
    assert "conservative_bands" not in value
    assert not any(reason.startswith(WIDENED) for reason in value["band_reasons"].values())
    assert conservative_band(record, "variance") == (None, None)


def test_ldp_show_names_the_variance_band_conservative(widened):
    shown = format_numeric(widened)
    lower, upper = conservative_band(widened, "variance")
    line = next(line for line in shown.splitlines() if line.strip().startswith("variance"))
    assert line.endswith(f" [{lower:.4g}, {upper:.4g}] conservative")
    assert CONSERVATIVE_NOTE in shown
    mean = next(line for line in shown.splitlines() if line.strip().startswith("mean"))
    assert "conservative" not in mean


def test_the_record_round_trips_through_avro_with_both_libraries(widened):
    """fastavro writes and reads it back unchanged; Apache's `avro` reads the conservative
    variance band as written."""
    again, decoded = through_avro(widened)
    assert again.to_json() == widened.to_json()
    assert decoded["conservative_bands"]["variance"] == widened.conservative_bands["variance"]
    assert decoded["bands"]["variance"] is None


def test_a_record_written_before_is_read_as_written(widened):
    """A record written before gave the widened band as the variance's 95% band, its reason
    saying it over-covers: every reader reads that band as it was written."""
    old_reason = ("band widened by 0.166 (27% of its half-width) to hold the variance whatever "
                  "the bias of the report histogram's 128 output buckets, at most 0.238 (values "
                  "at their worst positions): it over-covers where the values are spread; more "
                  "output buckets (domain.output_buckets) make it smaller")
    old = dataclasses.replace(
        widened, conservative_bands=None,
        bands={**widened.bands, "variance": widened.conservative_bands["variance"]},
        band_reasons={**widened.band_reasons, "variance": old_reason},
        band_methods={key: method for key, method in (widened.band_methods or {}).items()
                      if key != "variance"} or None,
        fields=widened.fields - {"conservative_bands"}
        - ({"band_methods"} if not [k for k in widened.band_methods or {}
                                    if k != "variance"] else set()))
    assert statistic_band(old, "variance") == conservative_band(widened, "variance")
    assert conservative_band(old, "variance") == (None, None)
    assert "conservative" not in format_numeric(old).split("variance", 1)[1].splitlines()[0]


def test_the_store_and_the_dashboard_give_no_95_band_and_the_conservative_band(widened,
                                                                             tmp_path):
    """Through the store the variance's summary row has no 95% band, the mean's keeps its
    own; the dashboard's window gives a conservative mean band (`conservative_mean_band`)
    only where the record has one."""
    from ldp_telemetry.dashboard.source import StoreSource
    from ldp_telemetry.output.layout import version_label
    from ldp_telemetry.store import open_store
    mean_too = dataclasses.replace(
        widened, metric="latency.mean",
        bands={**widened.bands, "mean": None},
        conservative_bands={**widened.conservative_bands, "mean": widened.bands["mean"]})
    url = f"sqlite:///{tmp_path}/bands.db"
    with open_store(url) as store:
        store.write_panes([widened, mean_too])
    with open_store(url, create=False) as store:
        saved = {(metric, statistic): (low, high) for metric, statistic, low, high
                 in store._query("SELECT metric, statistic, lower95, upper95 "
                                 "FROM ldp_window_summaries")}
    assert saved[("latency", "variance")] == (None, None)
    assert saved[("latency", "mean")] == statistic_band(widened, "mean")
    assert saved[("latency.mean", "mean")] == (None, None)
    source = StoreSource(url)
    try:
        label = version_label(widened.json_value())
        plain = source.window("latency", widened.start_ms, widened.end_ms, label)
        both = source.window("latency.mean", widened.start_ms, widened.end_ms,
                             version_label(mean_too.json_value()))
    finally:
        source.close()
    assert plain["conservative_mean_band"] is None
    assert plain["mean_band"] == pytest.approx(list(statistic_band(widened, "mean")))
    assert both["mean_band"] is None
    assert both["conservative_mean_band"] == pytest.approx(
        [widened.bands["mean"]["lower"], widened.bands["mean"]["upper"]])


def test_the_coverage_summary_counts_the_widened_windows_in_their_own_row():
    """benchmarks/coverage_summary.py: a cell's windows whose band is widened past
    CONSERVATIVE_SHARE are a pair of the conservative row (CONSERVATIVE_LABEL, their coverage
    apart), its other windows a pair of the 95% row, which declares the conservative pairs; a
    cell measured before the count was kept is a 95% pair; sw-discrete's bucketed coverage."""
    from ldp_telemetry.ldp.estimation.uncertainty import CONSERVATIVE_LABEL
    from tests.benchmark_scripts import loaded_scripts

    def cell(protocol: str, widened: dict | None, coverage: dict, **split) -> dict:
        found = {"protocol": protocol, "windows": 500, "coverage": coverage}
        if widened is not None:
            found |= {"conservative_windows": widened, **split}
        return found
    cells = [cell("sw", {"mean": 0, "variance": 500}, {"mean": 0.95, "variance": 0.994},
                  coverage_95={"mean": 0.95, "variance": None},
                  coverage_conservative={"mean": None, "variance": 0.994}),
             cell("sw", {"mean": 100, "variance": 0}, {"mean": 0.96, "variance": 0.94},
                  coverage_95={"mean": 0.955, "variance": 0.94},
                  coverage_conservative={"mean": 0.98, "variance": None}),
             cell("sw", None, {"mean": 0.93, "variance": 0.99}),
             {**cell("sw-discrete", None, {"mean": 0.5, "variance": 0.5}),
              "bucketed": cell("sw-discrete", {"mean": 0, "variance": 0},
                               {"mean": 0.95, "variance": 0.95},
                               coverage_95={"mean": 0.95, "variance": 0.95},
                               coverage_conservative={"mean": None, "variance": None})}]
    with loaded_scripts("coverage_summary") as scripts:
        summary = scripts["coverage_summary"]
        pairs, conservative = summary.moment_pairs(cells)
        rows = summary.numeric_rows({"cells": cells}, None, None)
        table = summary.markdown(rows)
    assert sorted(pairs) == [(0.93, 500), (0.94, 500), (0.95, 500), (0.95, 500), (0.95, 500),
                             (0.955, 400), (0.99, 500)]
    assert sorted(conservative) == [(0.98, 100), (0.994, 500)]
    ninety_five, kept = rows
    assert (ninety_five["band"], ninety_five["pairs"], ninety_five["declared"]) == (
        "exact-variance", 7, 2)
    assert (kept["band"], kept["pairs"], kept["above"]) == (CONSERVATIVE_LABEL, 2, 2)
    assert f"| {CONSERVATIVE_LABEL} | 2 |" in table
