"""The 95% bands of post-processed frequency values and of query answers
(ldp/estimation/frequency_bands.py, output/bands.py): calibrated whatever the post-processing.

Calibration checks draw W windows of one fixed population (n users, a skewed distribution with
values of frequency 0), perturb them with the protocol's own client code, finalize them as the
pipeline does (`finalize_window`, `window_estimate_record`) and count how often the record's
band holds the true frequency. With m independent checks of a band of coverage 0.95 the count
is Binomial(m, 0.95); a check fails beyond 4.5 standard deviations, a false-failure rate below
1e-5 per check (about 1e-4 over this file). The values of one OUE window are independent given
the population (its bits are), so the checks of one window count separately.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation.frequency_bands import (bootstrap_bands,
                                                          channel_support_counts,
                                                          replayed_windows, score_bands,
                                                          top_k_bands)
from ldp_telemetry.ldp.estimation.postprocess import METHODS, error_plug_in, project_to_simplex
from ldp_telemetry.ldp.estimation.queries import WindowEstimate
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.output.bands import value_bands
from ldp_telemetry.output.records import window_estimate_record
from ldp_telemetry.output.text import format_top

D = 40
#: 2,000 users: a Zipf-like head, a tail of small values and 8 values nobody holds.
_WEIGHTS = np.concatenate([1.0 / np.arange(1, D - 7) ** 1.1, np.zeros(8)])
POPULATION = np.floor(2_000 * _WEIGHTS / _WEIGHTS.sum()).astype(int)
POPULATION[0] += 2_000 - POPULATION.sum()
N = int(POPULATION.sum())
TRUTH = POPULATION / N
TOP = np.argsort(-TRUTH, kind="stable")[:5]
WINDOWS = 400
Z_CHECK = 4.5


def registry(method: str, protocol: str = "oue", epsilon: float = 1.0):
    return parse_registry({"metrics": [{
        "name": "m", "protocol": protocol, "epsilon": epsilon, "domain": {"size": D},
        "postprocess": method}]})["m"]


def records(method: str, windows: int = WINDOWS, seed: int = 7, protocol: str = "oue"):
    """`windows` records of the population, each perturbed by the protocol's client code."""
    config = registry(method, protocol)
    protocol = config.protocol
    rng = np.random.default_rng(seed)
    users = np.repeat(np.arange(D), POPULATION)
    for _ in range(windows):
        statistic = protocol.new_statistic()
        protocol.accumulate(statistic, protocol.perturb(users, rng))
        result = finalize_window(config, statistic, N)
        yield config, result, window_estimate_record(config, result, 0, 3_600_000)


def assert_calibrated(hits: int, checks: int) -> None:
    """hits / checks within Z_CHECK binomial standard deviations of 0.95 (module docstring)."""
    spread = math.sqrt(0.95 * 0.05 / checks)
    assert abs(hits / checks - 0.95) <= Z_CHECK * spread, (hits / checks, checks)


@pytest.mark.parametrize("method", ["norm-sub", "norm-hyb", "base-cut"])
def test_the_records_value_bands_hold_95_percent_of_every_group(method):
    """Every value, the 5 largest and those of frequency 0: the band of the unbiased estimate
    covers each group in 95% of windows, although the printed estimate is post-processed (the
    earlier band, eq. 2's error around the post-processed value, covered the zeros in nearly
    every window and the top values in fewer)."""
    groups = {"all": np.ones(D, bool), "top": np.isin(np.arange(D), TOP), "zeros": TRUTH == 0}
    hits = dict.fromkeys(groups, 0)
    moved = old_zeros = 0
    for _, result, record in records(method):
        lower, upper = (np.array(bound, dtype=float) for bound in value_bands(record))
        inside = (lower <= TRUTH) & (upper >= TRUTH)
        for name, mask in groups.items():
            hits[name] += int(inside[mask].sum())
        moved += int(np.any(np.abs(result.estimate - result.unbiased) > 1e-9))
        old = np.abs(result.estimate - TRUTH) <= 1.959963984540054 * result.std_error
        old_zeros += int(old[groups["zeros"]].sum())
    assert moved == WINDOWS  # the estimates printed are post-processed ones
    for name, mask in groups.items():
        assert_calibrated(hits[name], WINDOWS * int(mask.sum()))
    # the band before, around the post-processed value, over-covers the zeros (so this test
    # tells the two apart)
    checks = WINDOWS * int(groups["zeros"].sum())
    assert old_zeros / checks > 0.95 + Z_CHECK * math.sqrt(0.95 * 0.05 / checks)


def test_sue_records_value_bands_hold_95_percent_of_every_group():
    """SUE, measured in benchmarks/coverage_frequency.py (499 of 500 (cell, group) pairs in
    [0.93, 0.97]): its record's bands, from the client's own reports, cover every value, the
    top ones and the zeros in 95% of windows (its bits are independent given the population,
    so each value of a window is a check of its own)."""
    groups = {"all": np.ones(D, bool), "top": np.isin(np.arange(D), TOP), "zeros": TRUTH == 0}
    hits = dict.fromkeys(groups, 0)
    for _, _, record in records("norm-sub", windows=200, seed=12, protocol="sue"):
        lower, upper = (np.array(bound, dtype=float) for bound in value_bands(record))
        inside = (lower <= TRUTH) & (upper >= TRUTH)
        for name, mask in groups.items():
            hits[name] += int(inside[mask].sum())
    for name, mask in groups.items():
        assert_calibrated(hits[name], 200 * int(mask.sum()))


def test_set_and_range_answers_hold_95_percent():
    """A set of 8 values and a range of 10, asked of norm-sub records: the exact band of the
    unbiased answer covers the true sum in 95% of windows."""
    chosen, first, last = [0, 3, 5, 9, 14, 20, 33, 36], 2, 11
    hits = [0, 0]
    for _, _, record in records("norm-sub", seed=8):
        window = WindowEstimate.from_record(record)
        for slot, answer, truth in ((0, window.set_sum(chosen), TRUTH[chosen].sum()),
                                    (1, window.range_sum(first, last),
                                     TRUTH[first:last + 1].sum())):
            assert answer.band_method == "exact-variance"
            hits[slot] += int(answer.lower95 <= truth <= answer.upper95)
    for count in hits:
        assert_calibrated(count, WINDOWS)


def test_the_band_is_the_unbiased_estimates_score_band():
    """value_bands is the score band of the unbiased estimate: exactly the frequencies f in
    [0, 1] that |f~ − f| ≤ Z95 · sqrt(eq. 2 at f) accepts (checked on a grid of f); a Wiener
    filter's record has the same band of its unbiased estimate (its std_error is the
    filter's), and a pooled-hash oracle's Wiener record the band of its unbiased estimate with
    the collision term (f~ ± z · its `unbiased_std_error`, not the filter's error)."""
    config, result, record = next(records("norm-sub", windows=1))
    lower, upper = (np.array(bound) for bound in value_bands(record))
    noise = result.noise
    grid = np.linspace(0.0, 1.0, 20_001)
    for v in range(D):
        accepted = grid[np.abs(result.unbiased[v] - grid)
                        <= 1.959963984540054 * np.sqrt(noise.variance(grid))]
        assert accepted.min() >= lower[v] - 1e-12 and accepted.max() <= upper[v] + 1e-12
        assert max(lower[v], 0.0) >= accepted.min() - 5e-5  # the grid's step
        assert upper[v] <= accepted.max() + 5e-5
    for name in ("oue", "flh"):
        config = parse_registry({"metrics": [{
            "name": "w", "protocol": name, "epsilon": 1.0, "domain": {"size": D},
            "estimator": "dw"}]})["w"]
        protocol = config.protocol
        statistic = protocol.new_statistic()
        rng = np.random.default_rng(1)
        protocol.accumulate(statistic, protocol.perturb(np.repeat(np.arange(D), POPULATION),
                                                        rng))
        result = finalize_window(config, statistic, N)
        wiener = window_estimate_record(config, result, 0, 1)
        if name == "flh":
            error = np.sqrt(result.noise.variance(error_plug_in(result.unbiased)))
            assert result.noise.extra_variance > 0  # the collision term is in it
            np.testing.assert_allclose(wiener.unbiased_std_error, error, rtol=1e-12)
            np.testing.assert_allclose(value_bands(wiener), (result.unbiased - 1.959963984540054
                                                             * error, result.unbiased
                                                             + 1.959963984540054 * error),
                                       rtol=1e-12)
            assert format_top(wiener).splitlines()[0].endswith(
                "95% band: exact-variance of the unbiased estimate")
            continue
        assert not np.allclose(wiener.std_error, np.sqrt(result.noise.variance(
            error_plug_in(result.unbiased))))  # the filter's error, not f~'s
        expected = score_bands(result.unbiased, protocol.p_star, protocol.q_star, N)
        np.testing.assert_allclose(value_bands(wiener), expected, rtol=1e-12)
        assert format_top(wiener).splitlines()[0].endswith(
            "95% band: exact-variance of the unbiased estimate")


@pytest.mark.parametrize("method", sorted(METHODS))
def test_show_names_the_band_it_prints_for_every_method(method):
    """`ldp show`'s window line names the band (exact-variance, "of the unbiased estimate" when
    the values are post-processed)."""
    spec = {"method": method, "replicates": 2} if method.startswith("auto") else method
    _, _, record = next(records(spec, windows=1))
    header = format_top(record).splitlines()[0]
    if method in ("base", "post-pos"):
        assert header.endswith("95% band: exact-variance")
    else:
        assert header.endswith("95% band: exact-variance of the unbiased estimate")


@pytest.mark.parametrize("postprocess", ["base", "post-pos", "norm-sub"])
def test_show_names_a_wiener_records_band_of_the_unbiased_estimate(postprocess):
    """A Wiener filter's values are not the centre of their band (the score band of the
    unbiased estimate): whatever the post-processing after it, even Base's, `ldp show`'s window
    line says the band is of the unbiased estimate, not plain exact-variance."""
    config = parse_registry({"metrics": [{
        "name": "w", "protocol": "oue", "epsilon": 1.0, "domain": {"size": D},
        "estimator": "iiw", "postprocess": postprocess}]})["w"]
    protocol = config.protocol
    statistic = protocol.new_statistic()
    rng = np.random.default_rng(1)
    protocol.accumulate(statistic, protocol.perturb(np.repeat(np.arange(D), POPULATION), rng))
    record = window_estimate_record(config, finalize_window(config, statistic, N), 0, 1)
    assert not np.allclose(record.estimate, record.unbiased_estimate)
    assert format_top(record).splitlines()[0].endswith(
        "95% band: exact-variance of the unbiased estimate")


def test_the_replayed_channel_is_the_protocols():
    """GRR's replayed support counts are drawn exactly (kept reports plus a uniform spread of
    the rest: they sum to n); OUE's bits are independent binomials. Mean and variance of the
    replayed unbiased estimate match eq. 2 at the replayed truth within 4.5 standard errors
    over 4,000 draws (false failure below 1e-5 per check)."""
    for name in ("grr", "oue"):
        protocol = make_protocol(name, 1.0, D)
        noise = protocol.noise(N)
        rng = np.random.default_rng(11)
        counts = np.array([channel_support_counts(POPULATION, noise, rng)
                           for _ in range(4_000)])
        if name == "grr":
            assert (counts.sum(axis=1) == N).all()
        estimates = (counts / N - noise.q_star) / (noise.p_star - noise.q_star)
        variance = noise.variance(TRUTH)
        error = np.sqrt(variance / 4_000)
        assert np.all(np.abs(estimates.mean(axis=0) - TRUTH) <= Z_CHECK * error)
        assert np.all(np.abs(estimates.var(axis=0, ddof=1) / variance - 1)
                      <= Z_CHECK * math.sqrt(2 / 3_999))
    truth, replayed = next(replayed_windows(project_to_simplex(TRUTH), noise, 1,
                                            np.random.default_rng(0)))
    assert truth.sum() == pytest.approx(1.0) and replayed.shape == (D,)


def test_top_k_bands_are_seeded_clipped_and_checked():
    protocol = make_protocol("oue", 1.0, D)
    noise = protocol.noise(N)
    rng = np.random.default_rng(5)
    unbiased = (channel_support_counts(POPULATION, noise, rng) / N - noise.q_star) / (
        noise.p_star - noise.q_star)
    run = lambda u: METHODS["norm-sub"].run(u, noise)  # noqa: E731
    first = top_k_bands(unbiased, noise, run, 5, seed=3)
    again = top_k_bands(unbiased, noise, run, 5, seed=3)
    assert np.array_equal(first[0], again[0]) and np.array_equal(first[1], again[1])
    assert np.all((first[0] >= 0) & (first[0] <= first[1]) & (first[1] <= 1))
    with pytest.raises(ValueError, match="replicates must lie in"):
        bootstrap_bands(unbiased, noise, run, lambda f, t: (f, t), replicates=1)


def test_too_few_expected_supports_declare_the_values_without_a_band():
    """GRR over 1,000 values with 500 reports expects n·q* < 4 supports of a value nobody holds:
    the record says `none` with the reason, the store/show/dashboard draw no band, a point query
    answers without one; with 20,000 reports the band is back."""
    labels = [f"v{i}" for i in range(1_000)]
    config = parse_registry({"metrics": [{
        "name": "g", "protocol": "grr", "epsilon": 1.0, "domain": {"labels": labels},
        "postprocess": "norm-sub"}]})["g"]
    protocol = config.protocol
    rng = np.random.default_rng(2)
    for n, declared in ((500, True), (20_000, False)):
        statistic = protocol.new_statistic()
        protocol.accumulate(statistic, protocol.perturb(rng.integers(0, 50, n), rng))
        record = window_estimate_record(config, finalize_window(config, statistic, n), 0, 1)
        assert (n * protocol.q_star < 4) == declared
        point = WindowEstimate.from_record(record).point("v3")
        if declared:
            assert record.band_method == "none"
            assert "too few for a normal band" in record.band_reasons["estimate"]
            assert value_bands(record) == ([None] * 1_000, [None] * 1_000)
            assert (point.band_method, point.lower95) == ("none", None)
            assert point.band_reason == record.band_reasons["estimate"]
        else:
            assert record.band_method == "exact-variance" and record.band_reasons is None
            assert point.band_method == "exact-variance" and point.lower95 is not None


def test_an_empty_window_declares_its_values_without_a_band():
    """A frequency window without reports has no band, and says so as a numeric one does
    (`none`, "no band: no reports"): it named exact-variance and gave NaN bounds."""
    config = parse_registry({"metrics": [{"name": "e", "protocol": "grr", "epsilon": 1.0,
                                          "domain": {"size": 4}}]})["e"]
    record = window_estimate_record(config, finalize_window(config, np.zeros(4, np.int64), 0),
                                    0, 1)
    assert record.band_method == "none"
    assert record.band_reasons == {"estimate": "no band: no reports"}
    assert value_bands(record) == ([None] * 4, [None] * 4)
    decoded = json.loads(record.to_json())
    assert decoded["band_method"] == "none" and decoded["band_reasons"] is not None


@pytest.mark.parametrize("method", ["norm-sub", "base-cut"])
def test_top_k_bands_are_not_too_narrow(method):
    """The top-3 answers of 150 windows: their bands hold the truth of the value selected in at
    least 0.95 − 4.5 standard errors of the windows (one-sided: the band is conservative,
    measured 0.945–1.00 in benchmarks/coverage_frequency.py; false failure below 1e-5). The
    bootstrap alone, without the selected value's score band, is what fell to 0.38."""
    hits = checks = 0
    for _, _, record in records(method, windows=150, seed=9):
        for answer in WindowEstimate.from_record(record).top_k(3):
            assert answer.conservative_method == "rank-conditional-union"
            truth = TRUTH[answer.indices[0]]
            hits += int(answer.conservative_lower <= truth <= answer.conservative_upper)
            checks += 1
    assert hits / checks >= 0.95 - Z_CHECK * math.sqrt(0.95 * 0.05 / checks)


def test_a_combined_record_declares_no_band_when_a_version_expects_too_few_supports():
    """Two versions over 1,000 labels (OUE, and GRR with 300 reports: n·q* < 4): the combined
    record names the version and the reason, and readers draw no band; with 20,000 GRR
    reports it keeps its exact band."""
    from ldp_telemetry.ldp.estimation.combine import combine_versions
    from ldp_telemetry.output.records import combined_estimate_record
    labels = [f"v{i}" for i in range(1_000)]
    document = {"metrics": [{"name": "m", "protocol": "grr", "epsilon": 1.0,
                             "domain": {"labels": labels}, "version": 2,
                             "history": [{"protocol": "oue", "epsilon": 1.0,
                                          "domain": {"labels": labels}, "version": 1}]}]}
    configs = parse_registry(document).versions("m")
    rng = np.random.default_rng(4)
    for grr_n, declared in ((300, True), (20_000, False)):
        parts = []
        for config, n in zip(configs, (2_000, grr_n), strict=True):
            statistic = config.protocol.new_statistic()
            config.protocol.accumulate(statistic,
                                       config.protocol.perturb(rng.integers(0, 30, n), rng))
            parts.append((config, finalize_window(config, statistic, n)))
        combined = combine_versions(parts)
        record = combined_estimate_record(configs, combined, 0, 1)
        if declared:
            assert record.band_method == "none"
            assert record.band_reasons["estimate"].startswith("version 2: no band")
            assert value_bands(record) == ([None] * 1_000, [None] * 1_000)
            assert "band_reasons" in record.json_value()
        else:
            assert record.band_method == "exact-variance" and record.band_reasons is None
            assert value_bands(record)[0][0] is not None


@pytest.mark.parametrize("protocol_name", ["hr", "blh", "grr", "oue"])
def test_the_score_band_inverts_the_test_whatever_the_sign_of_b(protocol_name):
    """score_bands is exactly the set of f in [0, 1] that |f~ − f| ≤ z · sqrt(A + B f) accepts,
    for B = (1 − p* − q*)/(n (p* − q*)) negative (HR, BLH: the variance falls with f) as well as
    positive or zero (GRR, OUE: 1 − p* − q* ≥ 0 for every ε and d), and for f~ outside [0, 1]."""
    protocol = make_protocol(protocol_name, 2.0, 16)
    n = 2_000
    noise = protocol.noise(n)
    f_tilde = np.array([-0.08, 0.0, 0.03, 0.5, 0.97, 1.0, 1.04])
    lower, upper = score_bands(f_tilde, protocol.p_star, protocol.q_star, n)
    grid = np.linspace(0.0, 1.0, 200_001)
    for v, value in enumerate(f_tilde):
        accepted = np.abs(value - grid) <= 1.959963984540054 * np.sqrt(noise.variance(grid))
        inside = (grid >= lower[v]) & (grid <= upper[v])
        # equal but for the grid points within rounding of a root
        assert np.sum(accepted != inside) <= 2


def test_a_wiener_top_k_band_is_declared_where_it_was_not_measured_or_missed(monkeypatch):
    """wiener_top_k_declared: a band (None) for a filter, method and cell measured after that
    pure one-stage oracle; the reason otherwise — a pooled-hash oracle, keep_extremes, a filter,
    a filter after that oracle or a post-processing after them not measured, a cell where a
    rank fell more than two standard errors below 0.95 (WIENER_TOP_K_UNCALIBRATED). The cell
    once declared in-sample (OUE's rank 1 at ε = 2, n = 10⁶ after DW, IIW, IIW-G and AMRP) held
    on two other seeds: it has a band."""
    from ldp_telemetry.ldp.estimation.frequency_bands import (WIENER_TOP_K_MEASURED,
                                                              WIENER_TOP_K_UNCALIBRATED,
                                                              wiener_top_k_declared)
    from ldp_telemetry.ldp.protocols import make_protocol
    oue = make_protocol("oue", 1.0, 64)
    assert wiener_top_k_declared("dw", False, "norm-hyb", oue, 1.0, 10_000) is None
    assert wiener_top_k_declared("gf-dw", False, "base", oue, 2.0, 1_000_000) is None
    assert "pooled-hash" in wiener_top_k_declared("dw", False, "base",
                                                  make_protocol("cms", 1.0, 64), 1.0, 10_000)
    assert "keep_extremes" in wiener_top_k_declared("dw", True, "base", oue, 1.0, 10_000)
    assert "smooth: its top-k band was not measured" in wiener_top_k_declared(
        "smooth", False, "base", oue, 1.0, 10_000)
    assert "iiw post-processed by ibu: not measured after oue" in wiener_top_k_declared(
        "iiw", False, "ibu", oue, 1.0, 10_000)
    for name in ("dw", "iiw", "iiw-g", "amrp"):
        for method in sorted(WIENER_TOP_K_MEASURED[name]["oue"]):
            assert wiener_top_k_declared(name, False, method, oue, 2.0, 1_000_000) is None
    # measured after each oracle apart: a filter not measured after an oracle, or a method not
    # measured after that filter and oracle, has no band there though it has one after OUE
    # (over the 229 airports, a domain every measured (filter, oracle, method) was run over)
    for name, oracles in WIENER_TOP_K_MEASURED.items():
        for oracle in ("grr", "oue", "sue", "rue", "olh", "blh", "rlh", "hr", "ss", "rws"):
            protocol = make_protocol(oracle, 1.0, 229)
            for method in ("base", "norm-sub", "norm-hyb"):
                reason = wiener_top_k_declared(name, False, method, protocol, 1.0, 10_000)
                if oracle not in oracles:
                    assert f"{name} on {oracle}: its top-k band was not measured" in reason
                elif method not in oracles[oracle]:
                    assert f"{name} post-processed by {method}: not measured after " \
                           f"{oracle}" in reason
                else:
                    assert reason is None
    assert "amrp on ss: its top-k band was not measured after that oracle" in \
        wiener_top_k_declared("amrp", False, "base", make_protocol("ss", 1.0, 64), 1.0, 10_000)
    assert "amrp post-processed by norm-sub: not measured after hr (measured: base)" in \
        wiener_top_k_declared("amrp", False, "norm-sub", make_protocol("hr", 1.0, 64), 1.0,
                              10_000)

    def check_declared() -> None:
        for (name, oracle), cells in WIENER_TOP_K_UNCALIBRATED.items():
            protocol = make_protocol(oracle, 1.0, 64)
            method = min(WIENER_TOP_K_MEASURED[name][oracle])
            for epsilon, n in cells:  # the cell and a window inside it, not the next cell
                for size in (n, int(n * 1.2)):
                    reason = wiener_top_k_declared(name, False, method, protocol, epsilon, size)
                    assert f"{name} after {oracle} at ε = {epsilon:g}" in reason
                    assert "selective_top_k.py --wiener" in reason
                assert wiener_top_k_declared(name, False, method, protocol, epsilon,
                                             n // 10) is None
    check_declared()
    # AMRP's rank 4 after OLH at ε = 2, n = 10⁶ (0.88 of 50 windows, 0.93 of 100 on another
    # seed: 0.913 of 150, more than two standard errors below 0.95) is declared, for OLH alone
    olh = make_protocol("olh", 2.0, 64)
    assert "amrp after olh at ε = 2, n = 1,000,000" in wiener_top_k_declared(
        "amrp", False, "base", olh, 2.0, 1_000_000)
    assert wiener_top_k_declared("amrp", False, "base", oue, 2.0, 1_000_000) is None
    assert wiener_top_k_declared("dw", False, "base", olh, 2.0, 1_000_000) is None
    # a declared cell declares that filter's windows after that oracle in it, and no other
    # filter's or oracle's
    monkeypatch.setitem(WIENER_TOP_K_UNCALIBRATED, ("dw", "oue"), frozenset({(2.0, 1_000_000)}))
    check_declared()
    assert wiener_top_k_declared("iiw", False, "base", oue, 2.0, 1_000_000) is None
    assert wiener_top_k_declared("dw", False, "base", make_protocol("grr", 2.0, 64), 2.0,
                                 1_000_000) is None


def test_a_wiener_top_k_band_is_declared_beyond_the_measured_domain_reports_and_parameters():
    """wiener_top_k_declared: a filter, oracle and method measured together still have no band
    over more or fewer values than that filter was measured over after that oracle with that
    method (WIENER_TOP_K_DOMAINS: after GRR and OUE `base` from 32 departure-time buckets to
    4,096 words, AMRP's to 969 emoji, `norm-sub` and `norm-hyb` to 969 or 229; after SUE, RUE,
    OLH, BLH, RLH and HR `base` and `norm-sub` and `norm-hyb` over 48–969 values, DW's and
    GF-DW's `base` after SUE, OLH and HR to 4,096, AMRP's and the others over 48–229), at ε
    outside 0.5–4 (TOP_K_EPSILON_RANGE), for windows outside 10³–10⁶ reports by more than √10
    (TOP_K_REPORTS), or with estimator parameters other than the registry defaults they
    were measured at (WIENER_TOP_K_PARAMS: a record's 30.0 is 30;
    AMRP's seed and keep_extremes aside). Every span is banded at its corners — its smallest
    and largest d, the first and last window of its cells (within √10); the window
    reasons are tested apart."""
    from ldp_telemetry.ldp.estimation.frequency_bands import (WIENER_TOP_K_DOMAINS,
                                                              WIENER_TOP_K_MEASURED,
                                                              wiener_top_k_declared)
    assert {(name, oracle, method) for name, oracles in WIENER_TOP_K_MEASURED.items()
            for oracle, methods in oracles.items() for method in methods
            } == set(WIENER_TOP_K_DOMAINS)
    for (name, oracle, method), spans in WIENER_TOP_K_DOMAINS.items():
        for low, high, fewest, most in spans:
            for d in (low, high):
                for n in (math.ceil(fewest / math.sqrt(10)), math.floor(most * math.sqrt(10))):
                    assert wiener_top_k_declared(name, False, method,
                                                 make_protocol(oracle, 1.0, d), 1.0, n) is None
        smallest, largest = min(span[0] for span in spans), max(span[1] for span in spans)
        measured = f"{smallest:,}" if smallest == largest else f"{smallest:,}–{largest:,}"
        for d in (smallest - 1, largest + 1):
            assert wiener_top_k_declared(name, False, method, make_protocol(oracle, 1.0, d),
                                         1.0, 10_000) == (
                f"no band for the top values of {name} over d = {d:,} values: its top-k band "
                f"after {oracle}, post-processed by {method}, was measured over {measured} "
                "values (benchmarks/selective_top_k.py --wiener)")
    assert "amrp over d = 4,096" in wiener_top_k_declared("amrp", False, "base",
                                                          make_protocol("grr", 1.0, 4096), 1.0,
                                                          100_000)
    assert "dw over d = 24 values" in wiener_top_k_declared("dw", False, "base",
                                                           make_protocol("oue", 1.0, 24), 1.0,
                                                           100_000)
    # measured over 48 taxi slots, 229 airports and 969 emoji after SUE: banded over 48
    # values, not over 4,096 (or 32, below), though DW after OUE was measured over both; IIW
    # post-processed by norm-sub up to 229 values after OUE, not over 4,096
    sue = make_protocol("sue", 1.0, 48)
    for method in ("base", "norm-sub", "norm-hyb"):
        assert wiener_top_k_declared("dw", False, method, sue, 1.0, 10_000) is None
    assert "after oue, post-processed by norm-sub, was measured over 32–229 values" in \
        wiener_top_k_declared("iiw", False, "norm-sub", make_protocol("oue", 1.0, 4096), 1.0,
                              10_000)
    assert "measured over 48–969 values" in wiener_top_k_declared(
        "dw", False, "base", make_protocol("rue", 1.0, 4096), 1.0, 10_000)
    assert wiener_top_k_declared("dw", False, "base", make_protocol("sue", 1.0, 4096), 1.0,
                                 10_000) is None
    assert "measured over 48–969 values" in wiener_top_k_declared(
        "iiw", False, "base", make_protocol("hr", 1.0, 32), 1.0, 10_000)
    assert "measured over 48–229 values" in wiener_top_k_declared(
        "amrp", False, "base", make_protocol("rue", 1.0, 969), 1.0, 10_000)
    oue = make_protocol("oue", 1.0, 64)
    for n in (317, 3_162_277):
        assert wiener_top_k_declared("dw", False, "base", oue, 1.0, n) is None
    for n in (316, 100, 3_162_278, 10_000_000):
        assert f"dw at n = {n:,} reports" in wiener_top_k_declared("dw", False, "base", oue,
                                                                   1.0, n)
    for epsilon in (0.5, 4.0):
        assert wiener_top_k_declared("dw", False, "base", make_protocol("oue", epsilon, 64),
                                     epsilon, 10_000) is None
    for epsilon in (0.25, 0.49, 4.01, 8.0):
        assert f"dw at ε = {epsilon:g}: its top-k band was measured for ε 0.5–4" in \
            wiener_top_k_declared("dw", False, "base", make_protocol("oue", epsilon, 64),
                                  epsilon, 10_000)
    for name, params in (("iiw", {"iterations": 30, "keep_extremes": False}),
                         ("iiw", {"iterations": 30.0, "keep_extremes": 0.0}),
                         ("iiw-g", {"iterations": 10}), ("gf-dw", {"sigma": 3}),
                         ("amrp", {"permutations": 100, "seed": 12345}), ("dw", {}),
                         ("dw", None)):
        assert wiener_top_k_declared(name, False, "base", oue, 1.0, 10_000, params) is None
    for name, params, said in (("iiw", {"iterations": 5}, "iiw with iterations = 5"),
                               ("iiw-g", {"iterations": 30}, "iiw-g with iterations = 30"),
                               ("gf-dw", {"sigma": 2}, "gf-dw with sigma = 2"),
                               ("gf-dw", {"sigma": "3"}, "gf-dw with sigma = 3"),
                               ("amrp", {"permutations": 20, "seed": 5},
                                "amrp with permutations = 20"),
                               ("iiw", {"iterations": True}, "iiw with iterations = True"),
                               ("dw", {"window": 3}, "dw with window = 3")):
        reason = wiener_top_k_declared(name, False, "base", oue, 1.0, 10_000, params)
        assert said in reason and "registry defaults" in reason, reason


def test_a_wiener_top_k_band_is_declared_for_a_window_size_not_measured_over_its_domain():
    """wiener_top_k_declared: a window over a domain size some span measured (so not the
    "domain" reason) still has no band when no span holding its d holds its cell too
    (WIENER_TOP_K_DOMAINS). DW after RUE, then `base`, was measured over 48–969 values in the
    cells up to 10⁵ and over 48–229 in the 10⁶ cell (RUE's client at n = 10⁶ over 969 values
    was not run): 969 values at n = 10⁶ have no band, at 316,227 reports (the 10⁵ cell,
    within √10) they have one, and 229 values at 10⁶ have one, 230 none. AMRP after GRR was
    measured over 969 values for windows of 10⁴–10⁶ reports, its 10³ windows up to 229 (its
    10³ windows over 256 words expected too few supports to be banded, so they measured no
    band): 230 values at 3,162 reports (the 10³ cell) have no band, at 3,163 (the 10⁴ cell)
    one. DW after GRR likewise, and over 4,096 words only from the 10⁵ cell (its 10⁴ windows
    there had too few supports). The reason names the filter, d, n, oracle, method and every
    span."""
    from ldp_telemetry.ldp.estimation.frequency_bands import wiener_top_k_declared
    rue = (" after rue, post-processed by base, its top-k band was measured over 48–969 values "
           "for windows of 10³–10⁵ reports and over 48–229 for 10⁶ (a window within √10 of "
           "those sizes; benchmarks/selective_top_k.py --wiener)")
    for name in ("dw", "gf-dw", "iiw", "iiw-g"):
        for d, n in ((969, 1_000_000), (969, 316_228), (230, 1_000_000), (230, 3_162_277)):
            assert wiener_top_k_declared(name, False, "base", make_protocol("rue", 1.0, d), 1.0,
                                         n) == (f"no band for the top values of {name} over "
                                                f"d = {d:,} values at n = {n:,} reports:" + rue)
        for d, n in ((969, 316_227), (229, 1_000_000), (229, 3_162_277), (48, 1_000_000)):
            assert wiener_top_k_declared(name, False, "base", make_protocol("rue", 1.0, d), 1.0,
                                         n) is None
    # DW and GF-DW after SUE then `base`: over 4,096 words up to 10⁵, over 969 in the 10⁶ cell
    sue = make_protocol("sue", 1.0, 4_096)
    assert "measured over 48–4,096 values for windows of 10³–10⁵ reports and over 48–969 " \
        "for 10⁶" in wiener_top_k_declared("dw", False, "base", sue, 1.0, 1_000_000)
    assert wiener_top_k_declared("dw", False, "base", sue, 1.0, 100_000) is None
    assert wiener_top_k_declared("dw", False, "base", make_protocol("sue", 1.0, 969), 1.0,
                                 1_000_000) is None
    # DW after OUE was measured over 4,096 words in every cell: banded at 10⁶
    assert wiener_top_k_declared("dw", False, "base", make_protocol("oue", 1.0, 4_096), 1.0,
                                 1_000_000) is None
    grr = make_protocol("grr", 1.0, 230)
    assert wiener_top_k_declared("amrp", False, "base", grr, 1.0, 3_162) == (
        "no band for the top values of amrp over d = 230 values at n = 3,162 reports: after "
        "grr, post-processed by base, its top-k band was measured over 32–229 values for "
        "windows of 10³ reports and over 32–969 for 10⁴–10⁶ (a window within √10 of those "
        "sizes; benchmarks/selective_top_k.py --wiener)")
    assert wiener_top_k_declared("amrp", False, "base", grr, 1.0, 3_163) is None
    assert wiener_top_k_declared("amrp", False, "base", make_protocol("grr", 1.0, 229), 1.0,
                                 3_162) is None
    words = make_protocol("grr", 1.0, 4_096)
    assert "over 32–229 values for windows of 10³ reports, over 32–969 for 10⁴ and over " \
        "32–4,096 for 10⁵–10⁶" in wiener_top_k_declared("dw", False, "base", words, 1.0, 30_000)
    assert wiener_top_k_declared("dw", False, "base", words, 1.0, 31_623) is None
    assert wiener_top_k_declared("amrp", False, "base", make_protocol("oue", 1.0, 969), 1.0,
                                 1_000) is None  # after OUE every cell up to 969


def test_the_wiener_top_k_parameters_are_the_registry_defaults_the_benchmark_ran():
    """WIENER_TOP_K_PARAMS states what benchmarks/selective_top_k.py --wiener measured: every
    filter at its registry defaults (`wiener_fit`). A default changed without measuring again
    fails here."""
    from ldp_telemetry.ldp.estimation.estimators import METHODS as ESTIMATORS
    from ldp_telemetry.ldp.estimation.frequency_bands import (WIENER_TOP_K_FREE_PARAMS,
                                                              WIENER_TOP_K_MEASURED,
                                                              WIENER_TOP_K_PARAMS)
    assert set(WIENER_TOP_K_PARAMS) == set(WIENER_TOP_K_MEASURED)
    for name, measured in WIENER_TOP_K_PARAMS.items():
        defaults = {key: parameter.default
                    for key, parameter in ESTIMATORS.lookup(name).parameters.items()
                    if key not in WIENER_TOP_K_FREE_PARAMS}
        assert defaults == measured, name


def test_the_wiener_top_k_tables_are_what_the_committed_results_measured():
    """Every (filter, oracle, method) WIENER_TOP_K_MEASURED bands was measured at every (ε, n)
    cell of the top-k grid in the committed results coverage_summary counts (WIENER_TOP_K),
    over exactly the spans WIENER_TOP_K_DOMAINS says for it: for each grid n, the runs of
    consecutive measured domain sizes measured at n at every ε of the grid, each run's (smallest,
    largest d) with the consecutive grid n it was the run of. Equal, not contained: a span
    narrower than measured would withhold a measured band without saying why, and a results
    file added without the table (or the table edited alone) fails here either way. Every
    (d, n) measured was measured at every ε of the grid (so a span holds ε 0.5–4); and
    WIENER_TOP_K_UNCALIBRATED holds exactly the cells where a shipped (filter, oracle, data
    set, method, rank) triple, pooled over every window measured for it, lies more than two
    standard errors below 0.95 (the rule the memoized cells follow; in-sample). A results file
    added or a table edited without the other fails here."""
    from collections import defaultdict

    from tests.benchmark_scripts import BENCHMARKS, loaded_scripts

    from ldp_telemetry.ldp.estimation.frequency_bands import (TOP_K_EPSILONS, TOP_K_SIZES,
                                                              WIENER_TOP_K_DOMAINS,
                                                              WIENER_TOP_K_MEASURED,
                                                              WIENER_TOP_K_UNCALIBRATED,
                                                              top_k_cell)
    with loaded_scripts("coverage_summary") as scripts:
        summary = scripts["coverage_summary"]
        rows = [row for name in summary.WIENER_TOP_K
                for row in json.loads((BENCHMARKS / "results" / f"{name}.json").read_text())[
                    "results"]["rows"]]
        summary_declared = {id(row): summary.declared_values(row) for row in rows}
        shipped = [row for row in rows if not summary_declared[id(row)]]
        sizes = summary.FREQUENCY_DATASET_SIZES
    cells = defaultdict(set)
    measured: dict = defaultdict(lambda: defaultdict(set))  # key -> d -> {(ε, n)}
    banded: dict = defaultdict(lambda: defaultdict(set))  # key -> d -> {n with value bands}
    for row in rows:
        key, d = (row["filter"], row["protocol"], row["method"]), row.get(
            "d", sizes[row["dataset"]])
        cells[key].add((row["epsilon"], row["n"]))
        measured[key][d].add((row["epsilon"], row["n"]))
        if not summary_declared[id(row)]:
            banded[key][d].add(row["n"])

    def spans(by_d: dict, with_bands: dict) -> tuple:
        runs: dict = defaultdict(list)  # (smallest d, largest d) -> the grid n of that run
        domains = sorted(by_d)
        for n in TOP_K_SIZES:
            run: list = []
            for d in [*domains, None]:
                if d is not None and all((e, n) in by_d[d] for e in TOP_K_EPSILONS) and (
                        n in with_bands[d]):
                    run.append(d)
                elif run:
                    runs[run[0], run[-1]].append(n)
                    run = []
        found = []
        for (low, high), sizes_n in runs.items():
            start = 0
            for i in range(1, len(sizes_n) + 1):
                if i == len(sizes_n) or (TOP_K_SIZES.index(sizes_n[i])
                                         != TOP_K_SIZES.index(sizes_n[i - 1]) + 1):
                    found.append((low, high, sizes_n[start], sizes_n[i - 1]))
                    start = i
        return tuple(sorted(found, key=lambda span: (span[2], span[0])))
    grid = {(epsilon, n) for epsilon in TOP_K_EPSILONS for n in TOP_K_SIZES}
    for key, by_d in measured.items():
        for d, at in by_d.items():
            assert {n for _, n in at} <= set(TOP_K_SIZES), (key, d)
            assert at == {(e, n) for e in TOP_K_EPSILONS for _, n in at}, (key, d)
    for name, oracles in WIENER_TOP_K_MEASURED.items():
        for oracle, methods in oracles.items():
            for method in methods:
                key = (name, oracle, method)
                assert cells[key] >= grid, key
                assert WIENER_TOP_K_DOMAINS[key] == spans(measured[key], banded[key]), (
                    key, spans(measured[key], banded[key]))
    held: dict = defaultdict(lambda: [0.0, 0])
    for row in shipped:
        for rank, coverage in enumerate(row["by_rank"].split()):
            key = (row["filter"], row["protocol"], row["dataset"], row["method"],
                   top_k_cell(row["epsilon"], row["n"]), rank)
            held[key][0] += float(coverage) * row["windows"]
            held[key][1] += row["windows"]
    failing = defaultdict(set)
    for (name, oracle, _, method, cell, _), (inside, windows) in held.items():
        if (method in WIENER_TOP_K_MEASURED.get(name, {}).get(oracle, ())
                and inside / windows < 0.95 - 2 * math.sqrt(0.95 * 0.05 / windows)):
            failing[name, oracle].add(cell)
    assert dict(failing) == {key: set(value) for key, value in WIENER_TOP_K_UNCALIBRATED.items()}


def test_a_top_k_band_is_declared_for_an_oracle_at_a_cell_where_a_rank_missed():
    """top_k_declared with the protocol: TOP_K_UNCALIBRATED's oracle keys declare their cells
    for that oracle after any post-processing method (CMS's rank 7 of the common words at
    ε = 4, n = 10⁶ held its truth in 0.18 of 100 windows), a window inside the cell too, and
    not for another oracle or another cell; the reason names the oracle, the cell and the
    benchmark. SUE's former declaration (ε = 4, n = 10⁶) is gone: it held on another seed.
    `ldp query` passes the record's oracle key (queries.top_k, frequency_bands.top_k_oracle)."""
    from ldp_telemetry.ldp.estimation.frequency_bands import (TOP_K_UNCALIBRATED,
                                                              top_k_declared)
    from ldp_telemetry.ldp.protocols import PROTOCOLS
    assert (4.0, 1_000_000) in TOP_K_UNCALIBRATED["cms"] and "sue" not in TOP_K_UNCALIBRATED
    for key, cells in TOP_K_UNCALIBRATED.items():
        if key not in PROTOCOLS:
            continue
        other = "oue" if key != "oue" else "grr"
        for epsilon, n in cells:
            for size in (n, int(n * 1.2)):
                for method in ("base", "norm-sub", "norm-hyb"):
                    reason = top_k_declared(method, epsilon, size, key)
                    assert f"{key} at ε = {epsilon:g}" in reason
                    assert "benchmarks/pooled_top_k.py" in reason
                    assert top_k_declared(method, epsilon, size, other) is None
                    assert top_k_declared(method, epsilon, size) is None  # no oracle named
    assert top_k_declared("base", 4.0, 1_000_000, "sue") is None
    assert top_k_declared("base", 1.0, 10_000, "cms") is None
    assert top_k_declared("base", 4.0, 100_000, "sue") is None
