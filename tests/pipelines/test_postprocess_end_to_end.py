"""A registry that gives every post-processing method (with parameters) to its own metric runs
through the real job, and every estimate record names its method and parameters."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.estimation.postprocess import METHODS, PostprocessSpec
from ldp_telemetry.ldp.estimation.queries import WindowEstimate
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.reader import read_estimates
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.csv_input import TrueValues
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.pipelines.simulate import simulate_reports

DAY_MS = 86_400_000
START_MS = 1_600_000_000_000 - 1_600_000_000_000 % DAY_MS

#: registry "postprocess" value -> the method and parameters every record must carry
POSTPROCESS = [
    ("base", "base", {}),
    ("none", "base", {}),
    ("post-pos", "post-pos", {}),
    ("base-pos", "base-pos", {}),
    ({"method": "base-cut", "alpha": 1}, "base-cut", {"alpha": 1.0}),
    ("norm", "norm", {}),
    ("norm-mul", "norm-mul", {}),
    ("norm-sub", "norm-sub", {}),
    ("norm-cut", "norm-cut", {}),
    ({"method": "norm-hyb", "alpha": 3.5}, "norm-hyb", {"alpha": 3.5}),
    ("norm-hyb", "norm-hyb", {"alpha": 2.0}),
    ("mle-apx", "mle-apx", {}),
    ("ibu", "ibu", {}),
    ({"method": "power", "exponent": 1.5}, "power", {"exponent": 1.5}),
    ({"method": "power-ns"}, "power-ns", {"exponent": None}),
    ("auto", "auto", {"replicates": 10.0, "seed": 0.0}),
    ({"method": "auto-top", "k": 3}, "auto-top", {"replicates": 10.0, "seed": 0.0, "k": 3.0}),
    ("auto-sets", "auto-sets", {"replicates": 10.0, "seed": 0.0, "fraction": 0.1,
                                "sets": 20.0}),
]
PROTOCOLS = ["grr", "oue", "olh"]


@pytest.fixture(scope="module")
def job_output(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    metrics = []
    for i, (postprocess, _, _) in enumerate(POSTPROCESS):
        metrics.append({"name": f"m{i:02d}", "protocol": PROTOCOLS[i % 3], "epsilon": 2.0,
                        "domain": {"size": 12}, "postprocess": postprocess})
    registry = parse_registry({"metrics": metrics})
    rng = np.random.default_rng(11)
    f = np.arange(12, 0, -1) ** 2.0
    for config in registry.metrics:
        n = 600
        values = rng.choice(12, size=n, p=f / f.sum())
        times = START_MS + rng.integers(0, 2 * DAY_MS, size=n)  # two daily windows
        simulate_reports(config, TrueValues(values, times), str(root / "reports"),
                         seed=int(rng.integers(1 << 30)), progress=None)
    job = EstimateJob(registry, tuple(sorted(str(p) for p in (root / "reports").glob("*.avro"))),
                      str(root / "out"), WindowSpec.from_seconds(86_400))
    run_job(job, [], out=io.StringIO())
    return registry, str(root / "out")


def test_every_method_is_named_with_its_parameters(job_output):
    registry, out = job_output
    records = read_estimates(out)
    assert len(records) == 2 * len(POSTPROCESS)
    assert {method for _, method, _ in POSTPROCESS} == set(METHODS)
    for i, (_, method, params) in enumerate(POSTPROCESS):
        mine = [r for r in records if r.metric == f"m{i:02d}"]
        assert len(mine) == 2
        for record in mine:
            post = record.postprocess
            assert {"method": post["method"], "params": post["params"]} == {
                "method": method, "params": params}
            assert ("chosen" in post) == method.startswith("auto")  # the replay's choice
            window = WindowEstimate.from_record(record)
            spec = PostprocessSpec.parse({"method": method, **params})
            assert window.spec == spec == registry[record.metric].postprocess
            assert np.allclose(record.estimate,
                               spec.apply(np.asarray(record.unbiased_estimate), window.noise))


def test_records_survive_a_json_round_trip_into_queries(job_output):
    _, out = job_output
    for record in read_estimates(out):
        again = EstimateRecord.from_json(json.loads(record.to_json()))
        answer = WindowEstimate.from_record(again).set_sum([0, 1, 2])
        assert np.isfinite(answer.value) and answer.std_error > 0
