"""Integrity statistics: their nulls under honest reports (false-alarm rates by simulation),
detection of simulated maximal-gain attacks, the mergeable sample, the registry field, the
record section, the jump test over a sequence of records, and the flag in `ldp show`.

Nominal levels: each statistic is flagged at level = alpha / 4; the window at most alpha.
Every rate check states the chance that it fails although the test is calibrated.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import pickle

import fastavro
import numpy as np
import pytest
from scipy import stats

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.window import window_with_integrity
from ldp_telemetry.ldp.integrity.accumulate import new_sample, observe, sample_nbytes
from ldp_telemetry.ldp.integrity.attacks import fake_reports
from ldp_telemetry.ldp.integrity.spec import DEFAULT, IntegritySpec
from ldp_telemetry.ldp.integrity.statistics import shared_reports, sum_statistic
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.integrity import flag_text, with_jump_tests
from ldp_telemetry.output.records import BATCH_PANE, window_estimate_record
from ldp_telemetry.output.text import format_pane, format_top
from ldp_telemetry.schemas import SCHEMA_DIR

SAMPLED = ("oue", "olh", "ss", "rws")


#: The report sample's secret priority key in these tests. A registry draws it at random
#: (ldp.integrity.spec), which made the sampled windows, and so the seeded tests' counts,
#: differ from run to run.
SAMPLE_KEY = 0x5EED_1DB0_C0FFEE


def config_of(protocol: str, d: int, epsilon: float = 1.0, key: int | None = SAMPLE_KEY,
              **integrity):
    """The metric's configuration, its sample keyed by `key` (None: the registry's own)."""
    entry = {"name": "m", "protocol": protocol, "epsilon": epsilon, "domain": {"size": d}}
    if integrity:
        entry["integrity"] = integrity
    config = parse_registry({"metrics": [entry]})["m"]
    if config.integrity is None or key is None:
        return config
    return dataclasses.replace(config, integrity=dataclasses.replace(config.integrity,
                                                                     key=SAMPLE_KEY))


def zipf(d: int) -> np.ndarray:
    f = 1.0 / np.arange(1, d + 1) ** 1.1
    return f / f.sum()


def window(config, f, n, rng, attack=None, fraction=0.0, targets=()):
    """One window of n reports, a `fraction` of them fake reports of `attack`."""
    m = int(round(fraction * n)) if attack else 0
    columns = config.protocol.perturb(rng.choice(len(f), size=n - m, p=f), rng)
    if m:
        fake = fake_reports(config.protocol, attack, targets, m, rng)
        order = rng.permutation(n)
        columns = {k: np.concatenate([columns[k], fake[k]])[order] for k in columns}
    ids = rng.integers(0, 2 ** 62, size=n)
    return window_with_integrity(config, columns, ids)


def p_values(section) -> dict:
    return {s["name"]: s["p_value"] for s in section["statistics"]}


# -- nulls -------------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", SAMPLED)
def test_honest_windows_raise_false_alarms_at_most_at_the_nominal_level(protocol):
    """120 honest windows (n = 20,000, d = 64, Zipf; half sampled whole, half with a sample of
    4,096 reports): for each statistic the
    count of p <= 0.1 stays within what a calibrated (or conservative) test gives: at most 22
    of 120 (P[Binomial(120, 0.1) >= 23] = 0.0015), and no window is flagged at alpha = 0.01
    beyond 4 (P[Binomial(120, 0.01) >= 5] = 0.0067)."""
    rng = np.random.default_rng(2100 + SAMPLED.index(protocol))
    configs = (config_of(protocol, 64), config_of(protocol, 64, sample=4096))
    f = zipf(64)
    small, flagged = {}, 0
    for i in range(120):
        _, section = window(configs[i % 2], f, 20_000, rng)
        flagged += section["flagged"]
        for name, p in p_values(section).items():
            if p is not None:
                small[name] = small.get(name, 0) + (p <= 0.1)
    assert "co_support" in small
    assert all(count <= 22 for count in small.values()), small
    assert flagged <= 4


@pytest.mark.parametrize("protocol", ("oue", "olh"))
def test_the_sum_and_support_size_nulls_are_calibrated_not_just_conservative(protocol):
    """The sum's z and the size test's p-values follow their nulls: over 120 honest windows the
    z-scores have mean 0 and variance 1 within 4 standard errors (false failure < 1e-4 each),
    and the p-values of the size test are uniform by Kolmogorov-Smirnov at 0.001."""
    rng = np.random.default_rng(2200 + len(protocol))
    config = config_of(protocol, 64, sample=4096)
    f = zipf(64)
    zs, sizes = [], []
    for _ in range(120):
        _, section = window(config, f, 20_000, rng)
        entries = {s["name"]: s for s in section["statistics"]}
        zs.append(entries["sum"]["score"])
        sizes.append(entries["support_size"]["p_value"])
    zs = np.array(zs)
    assert abs(zs.mean()) < 4 / np.sqrt(120)
    assert abs(zs.var() - 1) < 4 * np.sqrt(2 / 120)
    assert stats.kstest(sizes, "uniform").pvalue > 0.001


# -- detection ---------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ("oue", "olh"))
def test_maximal_gain_attacks_are_flagged_and_their_targets_named(protocol):
    """The issue's goal case at a modest size: 2% fake devices promoting 3 targets of a
    d = 200 Zipf domain, n = 100,000, ε = 1: every one of 10 windows flagged, the targets named.
    (The co-support z is about 5-6 against a threshold of 3.3; a miss has probability < 1e-3
    per window.)"""
    rng = np.random.default_rng(2300 + len(protocol))
    config = config_of(protocol, 200)
    targets = [150, 170, 190]
    for _ in range(10):
        _, section = window(config, zipf(200), 100_000, rng, "mga", 0.02, targets)
        assert section["flagged"]
        assert {"150", "170", "190"} <= set(section["implicated"])


@pytest.mark.parametrize("protocol", ("ss", "rws"))
def test_subset_protocols_flag_maximal_gain_by_co_support(protocol):
    rng = np.random.default_rng(2400 + len(protocol))
    config = config_of(protocol, 200)
    # the sample's secret key is drawn at random per loaded registry: fixed here, so that the
    # sampled reports and the result are the same every run (flagged under each of 30 keys
    # tried; a random key failed once in a full CI run)
    config = dataclasses.replace(config, integrity=dataclasses.replace(config.integrity, key=2400))
    _, section = window(config, zipf(200), 100_000, rng, "mga", 0.02, [150, 170, 190])
    assert {s["name"]: s["flagged"] for s in section["statistics"]}["co_support"]


def test_grr_reports_cannot_show_poisoning_to_the_window_tests():
    """A GRR report names one value: sum, size and pairs are not defined, and said so."""
    rng = np.random.default_rng(25)
    _, section = window(config_of("grr", 50), zipf(50), 20_000, rng, "mga", 0.05, [40])
    assert not section["flagged"]
    assert all(s["p_value"] is None and s["note"] for s in section["statistics"])


def test_random_output_attacks_on_unary_encoding_shift_the_sum_and_support_sizes():
    rng = np.random.default_rng(26)
    _, section = window(config_of("oue", 100), zipf(100), 50_000, rng, "roa", 0.01)
    flagged = {s["name"] for s in section["statistics"] if s["flagged"]}
    assert {"sum", "support_size"} <= flagged


# -- the sample --------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", SAMPLED)
def test_the_sample_merges_exactly_and_stays_bounded(protocol):
    """Slices sampled apart and merged in any order hold the same reports as one sample of
    them all: the `capacity` smallest priorities."""
    rng = np.random.default_rng(27)
    config = config_of(protocol, 40, sample=300)
    columns = config.protocol.perturb(rng.integers(0, 40, size=3000), rng)
    ids = rng.permutation(10 ** 6)[:3000].astype(np.int64)
    whole = new_sample(config)
    observe(whole, config, columns, ids)
    parts = []
    for cut in np.array_split(np.arange(3000), 7):
        part = new_sample(config)
        for rows in np.array_split(cut, 3):
            observe(part, config, {k: v[rows] for k, v in columns.items()}, ids[rows])
        parts.append(part)
    merged = new_sample(config)
    for part in reversed(parts):
        merged.add(part)
    (p1, c1), (p2, c2) = whole.rows(), merged.rows()
    assert len(p1) == 300 and np.array_equal(p1, p2)
    assert all(np.array_equal(c1[k], c2[k]) for k in c1)
    assert whole.nbytes() <= sample_nbytes(config)


def test_a_pickled_sample_goes_on_as_the_original():
    """Beam moves samples between steps as pickles: one restored half-way keeps the same rows."""
    rng = np.random.default_rng(31)
    config = config_of("olh", 40, sample=200)
    columns = config.protocol.perturb(rng.integers(0, 40, size=2000), rng)
    ids = np.arange(2000, dtype=np.int64)
    first, second = slice(0, 1000), slice(1000, 2000)
    straight, restored = new_sample(config), new_sample(config)
    for part in (first, second):
        observe(straight, config, {k: v[part] for k, v in columns.items()}, ids[part])
    observe(restored, config, {k: v[first] for k, v in columns.items()}, ids[first])
    restored = pickle.loads(pickle.dumps(restored))
    observe(restored, config, {k: v[second] for k, v in columns.items()}, ids[second])
    assert np.array_equal(straight.rows()[0], restored.rows()[0])


def test_the_sample_priorities_are_keyed_by_a_secret_that_travels_with_the_registry():
    """Report ids come from the fleet: under a public priority, fake devices could choose ids
    that never enter the sample. Priorities are keyed by a random per-spec secret, so the same
    ids rank differently under two specs, while a pickled registry (as Beam ships it to its
    workers) keeps its key."""
    rng = np.random.default_rng(37)
    first, second = (config_of("oue", 40, key=None, sample=100),
                     config_of("oue", 40, key=None, sample=100))
    assert first.integrity == second.integrity and first.integrity.key != second.integrity.key
    columns = first.protocol.perturb(rng.integers(0, 40, size=2000), rng)
    ids = np.arange(2000, dtype=np.int64)
    kept = []
    for config in (first, second):
        sample = new_sample(config)
        observe(sample, config, columns, ids)
        kept.append(set(sample.rows()[0].tolist()))
    # two independent 100-of-2000 samples share about 5 priorities by chance; equal sets would
    # mean the key is not used (both are the same 64-bit values only if the rows coincide)
    assert kept[0] != kept[1]
    shipped = pickle.loads(pickle.dumps(first))
    assert shipped.integrity.key == first.integrity.key
    assert "key" not in first.integrity.as_dict()


def test_the_sample_is_cut_to_its_byte_budget():
    config = config_of("oue", 8000, sample=100_000, sample_bytes=1 << 20)
    assert new_sample(config).capacity == (1 << 20) // (8 + 1000)
    assert new_sample(config_of("grr", 10)) is None
    # a unary encoding whose rows are too large for 50 of them in sample_bytes keeps none,
    # and its record says why its sampled tests did not run
    huge = config_of("oue", 200_000, sample_bytes=1 << 20)
    assert new_sample(huge) is None and sample_nbytes(huge) == 0


# -- registry ----------------------------------------------------------------------------------
def test_the_registry_field_defaults_turns_off_and_names_bad_settings():
    assert config_of("oue", 10).integrity == DEFAULT
    assert config_of("oue", 10, top_k=5).integrity == IntegritySpec(top_k=5)
    off = parse_registry({"metrics": [{"name": "m", "protocol": "oue", "epsilon": 1,
                                       "domain": {"size": 10}, "integrity": False}]})["m"]
    assert off.integrity is None and new_sample(off) is None
    for bad, field in (({"top_k": 1}, "top_k"), ({"alpha": 1.5}, "alpha"),
                       ({"sample": 2.5}, "sample"), ({"extra": 1}, "extra")):
        with pytest.raises(RegistryError) as error:
            config_of("oue", 10, **bad)
        assert error.value.field == f"metrics[0].integrity.{field}"
    same = config_of("oue", 10, top_k=5)
    assert same.fingerprint == config_of("oue", 10).fingerprint  # reports do not change


# -- records, the jump test and show -------------------------------------------------------------
def record_of(config, result, section, day: int) -> EstimateRecord:
    return window_estimate_record(config, result, ms_from_iso(f"2024-01-{day:02d}T00:00:00Z"),
                                  ms_from_iso(f"2024-01-{day + 1:02d}T00:00:00Z"), BATCH_PANE,
                                  integrity=section)


def test_the_section_is_valid_avro_and_old_records_still_read():
    rng = np.random.default_rng(28)
    config = config_of("oue", 30)
    result, section = window(config, zipf(30), 5000, rng)
    schema = fastavro.parse_schema(json.loads((SCHEMA_DIR / "window_estimate.avsc").read_text()))
    record = record_of(config, result, section, 1)
    assert fastavro.validate(record.to_avro(), schema)
    old = dataclasses.replace(record, integrity=None, fields=record.fields - {"integrity"})
    assert "integrity" not in json.loads(old.to_json())
    assert fastavro.validate(old.to_avro(), schema)
    assert with_jump_tests([old]) == [old] and flag_text(old) is None


def test_the_jump_test_flags_a_promoted_value_against_earlier_windows():
    """Six honest windows, then one whose value 25 gains 10% (about 10 standard errors): the
    honest windows are not
    flagged by the jump test (each at level 0.0025; P[any of 6] < 0.015), the last one is,
    naming value 25; `ldp show`'s text carries the flag."""
    rng = np.random.default_rng(29)
    config = config_of("oue", 30)
    f = zipf(30)
    records = []
    for day in range(1, 7):
        result, section = window(config, f, 20_000, rng)
        records.append(record_of(config, result, section, day))
    bumped = 0.9 * f
    bumped[25] += 0.1
    result, section = window(config, bumped, 20_000, rng)
    records.append(record_of(config, result, section, 7))
    tested = with_jump_tests(list(reversed(records)))[::-1]
    jumps = [{s["name"]: s for s in r.integrity["statistics"]}["jump"] for r in tested]
    assert jumps[0]["note"] == "no earlier window"
    assert not any(j["flagged"] for j in jumps[:-1])
    assert jumps[-1]["flagged"] and "25" in jumps[-1]["values"]
    assert tested[-1].integrity["flagged"] and "25" in tested[-1].integrity["implicated"]
    assert "integrity: FLAGGED" in format_top(tested[-1]) and "25" in format_top(tested[-1])
    assert "integrity" not in format_top(tested[1])


# -- real data (slow) ---------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("protocol", ("oue", "olh"))
def test_goal_case_on_real_emoji_data(protocol, dataset):
    """The issue's goal on real data: emoji frequencies (d = 969), 100,000 reports, ε = 1,
    2% MGA fakes promoting 3 rare emoji: 20 of 20 attacked windows flagged, at most 1 of 20
    honest windows (P[Binomial(20, 0.01) >= 2] = 0.017 at the nominal level; the tests are
    conservative)."""
    with open(dataset("emoji_sentiment_occurrences.csv"), encoding="utf-8") as handle:
        counts = np.array([int(row["Occurrences"]) for row in csv.DictReader(handle)])
    f = counts / counts.sum()
    rng = np.random.default_rng(2500 + len(protocol))
    config = config_of(protocol, len(f))
    targets = [900, 930, 960]
    attacked = sum(window(config, f, 100_000, rng, "mga", 0.02, targets)[1]["flagged"]
                   for _ in range(20))
    honest = sum(window(config, f, 100_000, rng)[1]["flagged"] for _ in range(20))
    assert attacked == 20 and honest <= 1


def test_the_recovered_estimate_removes_most_of_the_fake_support_and_is_only_reported():
    """OUE, n = 100,000, 2% MGA fakes on 3 targets of true frequency about 0.0012 each: the
    plain estimates gain about 0.06; the labelled recovery brings them within 0.02 of the truth
    (its error is about the estimate's standard error, 0.006, plus the model's) and estimates
    the fake fraction within 0.01; the plain estimate is unchanged."""
    rng = np.random.default_rng(30)
    config = config_of("oue", 200)
    f = zipf(200)
    targets = [150, 170, 190]
    result, section = window(config, f, 100_000, rng, "mga", 0.02, targets)
    recovered = section["recovered"]
    assert recovered["method"] == "remove-fake-support"
    assert abs(recovered["fake_fraction"] - 0.02) < 0.01
    by_label = dict(zip(recovered["labels"], recovered["estimate"], strict=True))
    for target in targets:
        assert result.unbiased[target] - f[target] > 0.04
        assert abs(by_label[str(target)] - f[target]) < 0.02
    record = record_of(config, result, section, 1)
    assert "recovered (remove-fake-support, not applied" in flag_text(record)
    assert "integrity flagged: " in format_pane(record) and "150" in format_pane(record)
    _, honest = window(config, f, 20_000, rng)
    assert honest["recovered"] is None


# -- memoized reports: several reports of one device share a permanent response ------------------
def memoized_config(reports_per_day: float):
    entry = {"name": "m", "protocol": "sue", "epsilon": 1.0, "domain": {"size": 20},
             "memoize": {"lifetime_epsilon": 3.0}, "reports_per_day": reports_per_day}
    return parse_registry({"metrics": [entry]})["m"]


def test_repeated_memoized_reports_keep_the_sum_test_at_its_level_and_skip_the_sampled_tests():
    """500 devices each send R = 24 reports of one value to a daily window, every report a fresh
    IRR of the device's one PRR (L-SUE). Their support sizes are correlated (the variance of the
    sum is about 2.1 times the independent one here), so the plain test would flag about 18% of
    honest windows at level 0.05; with the variance bound R sigma^2 / n it flags at most 5%.
    Over 200 windows at most 20 flags: a calibrated test fails this with probability about
    0.001 (binomial(200, 0.05)); the plain test would give about 36."""
    day = 86_400_000
    config = memoized_config(24)
    protocol, devices, d, rng = config.protocol, 500, 20, np.random.default_rng(41)
    prr, irr = protocol.prr, protocol.irr
    flags = 0
    for _ in range(200):
        values = rng.integers(0, d, size=devices)
        own = np.arange(d) == values[:, None]
        bits = rng.random((devices, d)) < np.where(own, prr.p, prr.q)
        reports = rng.random((24, devices, d)) < np.where(bits, irr.p, irr.q)
        counts = reports.sum(axis=(0, 1))
        entry = sum_statistic(protocol, counts, 24 * devices, 0.05, shared_reports(config, day))
        flags += entry["flagged"]
    assert flags <= 20

    # the sampled tests assume independent reports: not run, and the record says why
    columns = protocol.perturb(rng.integers(0, d, size=2000), rng)
    _, section = window_with_integrity(config, columns, window_ms=day)
    notes = {s["name"]: s["note"] for s in section["statistics"]}
    assert "share its permanent response" in notes["support_size"]
    assert "share its permanent response" in notes["co_support"]
    # at most one report per device per window: every test runs
    _, section = window_with_integrity(memoized_config(0.5), columns, window_ms=day)
    assert all(s["note"] is None for s in section["statistics"] if s["name"] != "jump")
