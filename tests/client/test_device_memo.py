"""Memoized reports on a device: the permanent response is keyed by the device secret, survives a
restart, differs between devices, follows the PRR channel across devices, and bounds the number of
distinct values; an adversary averaging 1,000 reports of one value learns no more than the PRR.
"""
from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from ldp_telemetry.client import encode_many, encode_points
from ldp_telemetry.client.device import DeviceMemo
from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.config.memoize import words_for
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.protocols import hashing, make_protocol

SECRET = bytes(range(32))
T0 = 1_717_200_000_000


def config(protocol="grr", d=6, report=1.0, lifetime=3.0, **memo):
    entry = {"name": f"m.{protocol}", "protocol": protocol, "epsilon": report,
             "domain": {"size": d}, "memoize": {"lifetime_epsilon": lifetime, **memo},
             "reports_per_day": 24}
    return parse_registry({"metrics": [entry]})[entry["name"]]


def columns_json(columns) -> dict:
    return {name: np.asarray(column).tolist() for name, column in columns.items()}


@pytest.mark.parametrize("protocol", ["grr", "oue", "sue", "olh", "blh", "rlh"])
def test_the_permanent_response_survives_a_process_restart(protocol):
    metric = config(protocol)
    here = {v: columns_json(DeviceMemo(SECRET).permanent_response(metric, v)) for v in range(6)}
    script = f"""
import json
from ldp_telemetry.client.device import DeviceMemo
from ldp_telemetry.ldp.config.registry import parse_registry
metric = parse_registry({{"metrics": [{json.dumps({
        "name": metric.name, "protocol": protocol, "epsilon": 1.0, "domain": {"size": 6},
        "memoize": {"lifetime_epsilon": 3.0}, "reports_per_day": 24})}]}})[{metric.name!r}]
device = DeviceMemo(bytes(range(32)))
print(json.dumps({{v: {{k: c.tolist() for k, c in device.permanent_response(metric, v).items()}}
                  for v in range(6)}}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    there = {int(k): v for k, v in json.loads(out).items()}
    assert there == here


def test_permanent_responses_differ_across_secrets_and_follow_the_prr_channel():
    """GRR over 6 values at ε∞ = 3: across 6,000 device secrets, the PRR of value 2 is 2 with
    probability p1 and each other value with q1. z-tests at |z| < 4.5 (false failure ~ 1e-5 per
    value, 6 values)."""
    metric = config("grr")
    prr = metric.protocol.prr
    rng = np.random.default_rng(1919)
    devices = 6_000
    outputs = np.array([DeviceMemo(rng.bytes(32)).permanent_response(metric, 2)["value"][0]
                        for _ in range(devices)])
    counts = np.bincount(outputs, minlength=6)
    for value, count in enumerate(counts):
        p = prr.p if value == 2 else prr.q
        z = (count - devices * p) / math.sqrt(devices * p * (1 - p))
        assert abs(z) < 4.5, (value, count, devices * p)
    one, other = DeviceMemo(SECRET), DeviceMemo(bytes(32) + b"x" * 8)
    oue = config("oue", d=40)
    assert not np.array_equal(one.permanent_response(oue, 3)["bits"],
                              other.permanent_response(oue, 3)["bits"])


def test_the_words_depend_on_secret_metric_fingerprint_and_item():
    metric, changed = config("grr"), config("grr", lifetime=3.5)
    base = words_for(SECRET, metric)("value", 1, 4)
    assert not np.array_equal(base, words_for(SECRET[::-1], metric)("value", 1, 4))
    assert not np.array_equal(base, words_for(SECRET, changed)("value", 1, 4))
    assert not np.array_equal(base, words_for(SECRET, metric)("value", 2, 4))
    assert not np.array_equal(base, words_for(SECRET, metric)("seed", 1, 4))
    assert np.array_equal(base, words_for(SECRET, metric)("value", 1, 4))


def test_max_values_stops_or_repeats_and_the_state_survives_a_restart(tmp_path):
    state = tmp_path / "memo.json"
    stop = config("grr", max_values=2, on_limit="stop")
    device = DeviceMemo(SECRET, state_path=state, new_identity=True)
    reports = encode_many(stop, [0, 0, 1, 2, 3, 1], np.random.default_rng(1), device=device,
                          event_times_ms=[T0 + i for i in range(6)])
    assert len(reports) == 4 and reports.withheld == 2
    assert reports.event_times_ms.tolist() == [T0, T0 + 1, T0 + 2, T0 + 5]
    assert DeviceMemo(SECRET, state_path=state).items(stop) == [0, 1]
    again = encode_many(stop, [4], np.random.default_rng(2), device=DeviceMemo(SECRET, state))
    assert len(again) == 0 and again.withheld == 1
    repeat = config("grr", max_values=1, on_limit="repeat")
    device = DeviceMemo(SECRET)
    first = device.permanent_response(repeat, 5)
    assert device.permanent_response(repeat, 0) is first and device.items(repeat) == [5]
    state.write_text("not json", encoding="utf-8")
    with pytest.raises(InputError, match="not reset silently"):  # a MemoStateError
        DeviceMemo(SECRET, state_path=state)


def test_a_memoized_metric_needs_a_device_with_a_real_secret():
    metric = config("oue")
    with pytest.raises(InputError, match="DeviceMemo"):
        encode_many(metric, [1], np.random.default_rng(0))
    with pytest.raises(InputError, match="16 to 1024 bytes"):
        DeviceMemo(b"short")
    assert "secret" not in repr(DeviceMemo(SECRET)).replace("DeviceMemo", "")


@pytest.mark.parametrize("protocol", ["grr", "olh", "oue"])
def test_an_adversary_averaging_a_thousand_reports_learns_no_more_than_the_prr(protocol):
    """2,000 devices, each with a uniform value over d = 5, report it 1,000 times (ε∞ = 1.5,
    ε1 = 0.5). The adversary averages each device's reports to recover its PRR (the most frequent
    report; for local hashing the most frequent bucket; for OUE each bit's majority), then makes
    the best guess the PRR allows (local hashing: uniformly among the values in the bucket; OUE:
    uniformly among the set bits, among all values when none is set) -- the best anyone can do
    once the PRR is known exactly, which 1,000 reports reveal. Its success rate must not exceed the
    PRR's: Σ over PRR outcomes z of max_x Pr[z | x] / d, computed exactly (p1 for GRR; per device
    seed for local hashing; over the 2^d bit vectors for OUE). Tolerance: 4.5 binomial standard
    deviations (false failure ~ 3e-6). For GRR, the same adversary against 1,000 fresh one-stage
    ε1 reports is checked to succeed almost always."""
    d, devices, reports = 5, 2_000, 1_000
    metric = config(protocol, d=d, report=0.5, lifetime=1.5)
    protocol_ = metric.protocol
    rng = np.random.default_rng(20260)
    values = rng.integers(0, d, size=devices)
    successes, bound = 0, 0.0
    if protocol == "oue":  # Σ_z max_x Pr[z | x] / d over every PRR bit vector z
        p1, q1 = protocol_.prr.p, protocol_.prr.q
        vectors = np.array(list(itertools.product((0, 1), repeat=d)), dtype=bool)
        likelihood = np.array([np.prod(np.where(vectors, np.where(np.arange(d) == x, p1, q1),
                                                1 - np.where(np.arange(d) == x, p1, q1)),
                                       axis=1) for x in range(d)])
        oue_bound = float(likelihood.max(axis=0).sum()) / d
    for value in values.tolist():
        device = DeviceMemo(rng.bytes(32))
        prr = device.permanent_response(metric, value)
        repeated = {name: np.repeat(column, reports, axis=0) for name, column in prr.items()}
        observed = protocol_.instantaneous_response(repeated, rng)
        if protocol == "oue":
            bits = np.unpackbits(observed["bits"], axis=1, count=d, bitorder="little")
            recovered = np.flatnonzero(bits.mean(axis=0) > 0.5)
            candidates = recovered if len(recovered) else np.arange(d)
            successes += int(value in candidates) / len(candidates)
            bound += oue_bound
            continue
        key = "value" if protocol == "grr" else "y"
        guess_bucket = int(np.bincount(observed[key], minlength=d).argmax())
        if protocol == "grr":
            successes += guess_bucket == value
            bound += protocol_.prr.p
            continue
        seed = prr["seed"].view(np.uint64)
        buckets = hashing.local_hash(np.repeat(seed, d), np.arange(d), protocol_.g)
        candidates = np.flatnonzero(buckets == guess_bucket)
        if len(candidates):
            successes += int(value in candidates) / len(candidates)
        # the exact best success given this seed: Σ_y max_x Pr[PRR = y | x] / d
        p1, q1 = protocol_.prr.p, protocol_.prr.q
        bound += sum(max(p1 if buckets[x] == y else q1 for x in range(d))
                     for y in range(protocol_.g)) / d
    rate, allowed = successes / devices, bound / devices
    sd = math.sqrt(allowed * (1 - allowed) / devices)
    assert rate <= allowed + 4.5 * sd, (rate, allowed)
    assert rate >= allowed - 4.5 * sd  # 1,000 reports do reveal the PRR: the bound is reached
    if protocol == "grr":
        one_stage = make_protocol("grr", 0.5, d)
        draws = one_stage.perturb(np.repeat(values[:200], reports), rng)["value"]
        guesses = np.array([np.bincount(row, minlength=d).argmax()
                            for row in draws.reshape(200, reports)])
        assert (guesses == values[:200]).mean() > 0.99


@pytest.mark.parametrize("protocol", ["oue", "olh"])
def test_reports_across_devices_follow_the_composed_channel(protocol):
    """6,000 devices report value 2 once through the client (keyed PRR, then IRR): the share of
    reports supporting 2 is p*, each other value q* (z-tests at |z| < 4.5, false failure ~ 7e-6
    per value)."""
    metric = config(protocol)
    rng = np.random.default_rng(77)
    n = 6_000
    devices = [DeviceMemo(rng.bytes(32)) for _ in range(n)]
    reports = encode_points(metric, np.full(n, 2), rng, device=devices,
                            event_times_ms=np.full(n, T0))
    statistic = metric.protocol.new_statistic()
    metric.protocol.accumulate(statistic, reports.columns)
    shares = metric.protocol.support_counts(statistic) / n
    for v, share in enumerate(shares):
        p = metric.protocol.p_star if v == 2 else metric.protocol.q_star
        assert abs(share - p) / math.sqrt(p * (1 - p) / n) < 4.5, (v, share, p)
