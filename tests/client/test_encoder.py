"""The client's encoder: values checked and mapped, the protocol's own draws, fingerprints bound.

ε-LDP itself is proven per protocol by exact enumeration (tests/ldp/test_protocols_privacy.py);
here `encode` is shown to be exactly the protocol's `perturb` (the same draws from the same
generator), and, through the whole wire path (records -> Avro file -> the job's decoder -> the
protocol's counting), each report to support its true value with probability p* and any other
value with probability q*.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from ldp_telemetry.client import ReportFile, domain_points, encode, encode_many
from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.protocols import PROTOCOLS
from ldp_telemetry.schemas import payload_branch
from ldp_telemetry.schemas.codec import ReportDecoder

T0 = 1_717_200_000_000
HOUR = 3_600_000
LABELS = ["a", "b", "c", "d", "e", "f"]
REGISTRY = parse_registry({"metrics": [
    *({"name": f"m.{name}", "protocol": name, "epsilon": 1.5, "domain": {"labels": LABELS}}
      for name in PROTOCOLS),
    {"name": "sized", "protocol": "oue", "epsilon": 1.0, "domain": {"size": 7}},
    {"name": "rtt", "protocol": "sw", "epsilon": 1.0,
     "domain": {"low": 100, "high": 300, "buckets": 8}},
]})


def test_importing_the_client_loads_neither_scipy_nor_beam(tmp_path):
    script = ("import json, sys, ldp_telemetry.client; print(json.dumps(sorted({m.split('.')[0] "
              "for m in sys.modules} & {'scipy', 'apache_beam'})))")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, check=True)
    assert json.loads(done.stdout) == []


def test_a_record_names_its_metric_branch_and_configuration():
    config = REGISTRY["m.olh"]
    record = encode(config, "c", np.random.default_rng(1), event_time_ms=T0, report_id=42)
    assert record["metric"] == "m.olh" and record["report_id"] == 42
    assert record["event_time"] == T0
    assert record["fingerprint"] == config.fingerprint and len(record["fingerprint"]) == 16
    branch, payload = record["payload"]
    assert branch == payload_branch(config.protocol) and set(payload) == {"seed", "y"}


@pytest.mark.parametrize("name", [*PROTOCOLS])
def test_encode_draws_exactly_what_the_protocol_perturbs(name):
    config = REGISTRY[f"m.{name}"]
    values = np.random.default_rng(3).integers(0, len(LABELS), 50)
    labels = [LABELS[v] for v in values.tolist()]
    encoded = encode_many(config, labels, np.random.default_rng(9), event_times_ms=[T0] * 50)
    rng = np.random.default_rng(9)
    expected = config.protocol.perturb(values, rng)
    for column, array in expected.items():
        np.testing.assert_array_equal(encoded.columns[column], array)
    np.testing.assert_array_equal(encoded.report_ids, rng.integers(0, 2**63 - 1, size=50))
    one = encode(config, labels[0], np.random.default_rng(9), event_time_ms=T0)
    first = next(encode_many(config, labels[:1], np.random.default_rng(9),
                             event_times_ms=[T0]).records())
    assert one == first


@pytest.mark.parametrize("name", [*PROTOCOLS])
def test_encoded_reports_support_their_value_with_p_star_through_the_wire(tmp_path, name):
    # n reports of the true value "c" (index 2), written, decoded and counted by the job's own
    # code: the support count of "c" is Binomial(n, p*), of every other value Binomial(n, q*).
    # Each of the 6 counts is within 4.5 standard deviations (two-sided false-failure rate
    # 6.8e-6 per count, 4e-4 over the 60 counts of the 10 protocols; the seed is fixed).
    config, n = REGISTRY[f"m.{name}"], 20_000
    reports = encode_many(config, ["c"] * n, np.random.default_rng(11),
                          event_times_ms=np.full(n, T0))
    path = tmp_path / "r.avro"
    with ReportFile(path) as out:
        out.write(reports)
    decoder = ReportDecoder(REGISTRY, HOUR)
    statistic = config.protocol.new_statistic()
    for batch in decoder.decode_file(str(path)):
        config.protocol.accumulate(statistic, batch.columns)
    counts = config.protocol.support_counts(statistic)
    p = np.full(len(LABELS), config.protocol.q_star)
    p[2] = config.protocol.p_star
    z = (counts - n * p) / np.sqrt(n * p * (1 - p))
    assert np.all(np.abs(z) < 4.5), z


def test_values_are_labels_or_indices_and_numbers_map_onto_the_unit_interval():
    config = REGISTRY["m.grr"]
    np.testing.assert_array_equal(domain_points(config, ["f", 0, np.int32(3), "a"]), [5, 0, 3, 0])
    np.testing.assert_array_equal(domain_points(config, np.array(["b", "e"])), [1, 4])
    np.testing.assert_array_equal(domain_points(REGISTRY["sized"], np.arange(7)), np.arange(7))
    np.testing.assert_allclose(domain_points(REGISTRY["rtt"], [100, 150.0, 300]), [0, 0.25, 1])


@pytest.mark.parametrize(("metric", "values", "message"), [
    ("m.grr", ["a", "B"], "value 'B' of metric 'm.grr': expected one of its 6 labels ('a', "
                          "'b', 'c', 'd', 'e', ...) or an integer index in [0, 6) (did you "
                          "mean 'b'?)"),
    ("m.grr", [6], "value 6 of metric 'm.grr'"),
    ("m.grr", [True], "value True of metric 'm.grr'"),
    ("m.grr", [2.0], "value 2.0 of metric 'm.grr'"),
    ("m.grr", np.array(["x", "a", "y"]), "2 values (for example 'x') of metric 'm.grr'"),
    ("sized", ["3"], "value '3' of metric 'sized': the domain is sized: expected an integer "
                     "index in [0, 7)"),
    ("sized", np.array([0, -1, 7]), "2 values (for example -1) of metric 'sized'"),
    ("rtt", [99.5], "value 99.5 of metric 'rtt': expected a number in [100, 300]"),
    ("rtt", [float("nan")], "value nan of metric 'rtt'"),
    ("rtt", ["120"], "value '120' of metric 'rtt'"),
    ("rtt", [False], "value False of metric 'rtt'"),
])
def test_a_value_outside_the_domain_is_an_error_naming_it(metric, values, message):
    with pytest.raises(InputError, match="^" + re.escape(message)) as error:
        encode_many(REGISTRY[metric], values, np.random.default_rng(0), event_times_ms=[T0] *
                    len(values))
    assert error.value.field == "value"


@pytest.mark.parametrize(("keyword", "value", "field"), [
    ("event_time_ms", -1, "event_time_ms"), ("event_time_ms", 1.7e12, "event_time_ms"),
    ("event_time_ms", True, "event_time_ms"), ("report_id", 2**63, "report_id"),
    ("report_id", "7", "report_id"),
])
def test_event_times_and_report_ids_are_checked(keyword, value, field):
    with pytest.raises(InputError) as error:
        encode(REGISTRY["m.grr"], "a", np.random.default_rng(0), **{keyword: value})
    assert error.value.field == field and repr(value) in str(error.value)


def test_the_event_time_defaults_to_now():
    before = time.time_ns() // 1_000_000
    record = encode(REGISTRY["rtt"], 200, np.random.default_rng(0))
    assert before <= record["event_time"] <= time.time_ns() // 1_000_000
