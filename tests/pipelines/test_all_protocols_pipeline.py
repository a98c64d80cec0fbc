"""Every protocol end to end: `ldp simulate` + `ldp run` with one metric per protocol in one
input set, and invalid payloads of every protocol written with fastavro becoming dead letters."""
from __future__ import annotations

import json
import os

import fastavro
import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import load_registry
from ldp_telemetry.ldp.protocols import PROTOCOLS
from ldp_telemetry.pipelines import cli
from ldp_telemetry.schemas import NAMESPACE, load_schema
from tests.json_lines import json_lines

USERS = 3000
START = 1_699_999_200          # a multiple of the 3600 s window: one window per metric
SPECS = {name: (2.0, 6) for name in PROTOCOLS}
SPECS["ss"] = (1.0, 12)       # k = 3, so a subset can repeat a value
SPECS["rws"] = (1.0, 12)


def truth_for(d: int) -> np.ndarray:
    weights = np.arange(d, 0, -1, dtype=float)
    return weights / weights.sum()


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("all_protocols")
    registry = {"metrics": [{"name": f"m.{name}", "protocol": name, "epsilon": eps,
                             "domain": {"size": d}, "postprocess": "norm-sub"}
                            for name, (eps, d) in SPECS.items()]}
    registry_path = root / "registry.json"
    registry_path.write_text(json.dumps(registry))
    reports = root / "reports"
    rng = np.random.default_rng(8)
    for name, (_, d) in SPECS.items():
        values = rng.choice(d, size=USERS, p=truth_for(d))
        csv_path = root / f"{name}.csv"
        csv_path.write_text("value,time\n" + "".join(
            f"{v},{START + i % 3000}\n" for i, v in enumerate(values.tolist())))
        assert cli.main(["simulate", "--registry", str(registry_path), "--metric", f"m.{name}",
                         "--input", str(csv_path), "--value-column", "value",
                         "--time-column", "time", "--out", str(reports),
                         "--seed", "5"]) == 0
    invalid = write_invalid_reports(reports / "invalid.avro", load_registry(registry_path))
    out = root / "out"
    assert cli.main(["run", "--registry", str(registry_path), "--input",
                     str(reports / "*.avro"), "--output", str(out), "--window", "3600"]) == 0
    return load_registry(registry_path), out, invalid


def invalid_payloads(protocol) -> list[dict]:
    """Payloads outside each protocol's output space."""
    d = protocol.d
    name = protocol.name
    if name == "grr":
        return [{"value": d}, {"value": -1}]
    if name in ("oue", "sue", "rue"):
        return [{"bits": bytes(2)}, {"bits": bytes([0b0100_0000])}, {"bits": b""}]
    if name in ("olh", "blh", "rlh"):
        return [{"seed": 1, "y": protocol.g}, {"seed": -5, "y": -1}]
    if name == "hr":
        return [{"row": 0, "bit": True}, {"row": protocol.K, "bit": False}]
    if name == "ss":
        return [{"items": [0, 1]}, {"items": [0, 1, 2, 3]}, {"items": [4, 4, 5]},
                {"items": [0, 1, d]}, {"items": [-1, 1, 2]}]
    if name == "rws":
        return [{"seed": 3, "y": d}, {"seed": 3, "y": -1}]
    if name == "cms":
        width = (protocol.m + 7) // 8
        return [{"hash": protocol.k, "bits": bytes(width)}, {"hash": -1, "bits": bytes(width)},
                {"hash": 0, "bits": bytes(width + 1)}]
    if name == "hcms":
        return [{"hash": protocol.k, "row": 0, "bit": True},
                {"hash": 0, "row": protocol.m, "bit": False}]
    if name == "flh":
        return [{"hash": protocol.k, "y": 0}, {"hash": 0, "y": protocol.m}, {"hash": 1, "y": -1}]
    raise AssertionError(name)


def write_invalid_reports(path, registry) -> dict[str, int]:
    records, counts = [], {}
    for config in registry.metrics:
        protocol = config.protocol
        payloads = invalid_payloads(protocol)
        counts[config.name] = len(payloads)
        records += [{"report_id": i, "metric": config.name, "event_time": START * 1000,
                     "payload": (f"{NAMESPACE}.{protocol.payload_record}", payload)}
                    for i, payload in enumerate(payloads)]
    with open(path, "wb") as handle:
        fastavro.writer(handle, load_schema("report"), records)
    return counts


def test_every_protocol_estimates_its_metric(job):
    registry, out, _ = job
    estimates = {row["metric"]: row for row in json_lines(os.path.join(out, "estimates-*.jsonl"))}
    assert set(estimates) == {m.name for m in registry.metrics}
    for config in registry.metrics:
        row = estimates[config.name]
        assert row["protocol"] == config.protocol_name
        assert row["n"] == USERS
        unbiased, error = np.array(row["unbiased_estimate"]), np.array(row["std_error"])
        # |z| < 4.5 per value: false-failure rate < 1e-4 over the 72 values of this test
        z = (unbiased - truth_for(config.d)) / error
        assert np.abs(z).max() < 4.5, (config.name, z)
        assert np.array(row["estimate"]).sum() == pytest.approx(1.0)


def test_invalid_payloads_of_every_protocol_are_dead_letters_with_the_rule(job):
    registry, out, invalid = job
    letters = json_lines(os.path.join(out, "dead_letters-*.jsonl"))
    assert all(letter["reason"] == "invalid_payload" for letter in letters)
    for config in registry.metrics:
        mine = [x for x in letters if f"metric {config.name!r}" in x["detail"]]
        assert len(mine) == invalid[config.name], config.name
        assert all(config.protocol.payload_rule in x["detail"] for x in mine)
