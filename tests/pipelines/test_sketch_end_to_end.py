"""A CMS metric whose registry chose its sketch (k = 8, m = 32), end to end: the job counts its
reports under that pool, its records and the store's carry k and m, and `ldp query` answers with
the standard error of that protocol, not of the defaults (k = 128, m = 64 at d = 40)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.estimation.postprocess import error_plug_in
from ldp_telemetry.ldp.estimation.queries import set_indicator
from ldp_telemetry.ldp.protocols import PROTOCOLS
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.pipelines.cli import main
from ldp_telemetry.schemas.codec import write_reports

T0_MS = 1_709_251_200_000  # 2024-03-01T00:00:00Z
D = 40
METRIC = {"name": "crash", "protocol": "cms", "epsilon": 2.0, "domain": {"size": D},
          "sketch": {"k": 8, "m": 32}, "postprocess": "none"}


@pytest.mark.slow  # a Beam job
def test_the_job_the_store_and_ldp_query_use_the_registrys_sketch(tmp_path, capsys):
    (tmp_path / "registry.json").write_text(json.dumps({"metrics": [METRIC]}))
    config = parse_registry({"metrics": [METRIC]})["crash"]
    rng = np.random.default_rng(8)
    n = 3000
    values = np.minimum(rng.zipf(1.6, n) - 1, D - 1)
    write_reports(str(tmp_path / "r.avro"), "crash", config.protocol, np.arange(n),
                  T0_MS + rng.integers(0, 3_600_000, n), config.protocol.perturb(values, rng),
                  fingerprint=config.fingerprint)
    store = f"sqlite:///{tmp_path / 'store.db'}"
    out = tmp_path / "out"
    assert main(["run", "--registry", str(tmp_path / "registry.json"), "--input",
                 str(tmp_path / "r.avro"), "--output", str(out), "--window", "3600",
                 "--store", store, "--create-store"]) == 0
    assert f"records read: {n}, accepted: {n}" in capsys.readouterr().out
    lines = [json.loads(line) for path in sorted(out.glob("estimates-*.jsonl"))
             for line in path.read_text().splitlines()]
    assert [line["parameters"] for line in lines] == [{"k": 8, "m": 32}]
    record = EstimateRecord.from_json(lines[0])

    from ldp_telemetry.store import open_store
    from ldp_telemetry.store.reads import window_record
    with open_store(store) as opened:
        stored = window_record(opened, "crash", "v1", record.start_ms, record.end_ms)
    assert stored["parameters"] == {"k": 8, "m": 32}

    assert main(["query", "--output", str(out), "--metric", "crash", "--window", "0",
                 "--labels", "0,1,2,3", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)["answers"][0]
    weights = set_indicator(D, range(4))
    plug_in = error_plug_in(np.asarray(record.unbiased_estimate))
    chosen = config.protocol.linear_variance(n, weights, plug_in)
    default = PROTOCOLS["cms"](epsilon=2.0, d=D).linear_variance(n, weights, plug_in)
    assert answer["std_error_kind"] == "exact"
    assert answer["std_error"] == pytest.approx(chosen ** 0.5, rel=1e-9)
    assert abs(chosen - default) > 0.1 * chosen
