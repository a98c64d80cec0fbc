"""Estimate records of simulated frequency windows, for tests that read records back."""
from __future__ import annotations

import numpy as np


def frequency_record(protocol_name: str, n: int, rng: np.random.Generator,
                     postprocess: str | None = None):
    """The estimate record of one window of n reports of values drawn uniformly from the first
    10 of 64 (metric "m", ε = 2), perturbed by `protocol_name`'s client."""
    from ldp_telemetry.ldp.config.registry import parse_registry
    from ldp_telemetry.ldp.engine.finalize import finalize_window
    from ldp_telemetry.output.records import window_estimate_record
    metric = {"name": "m", "protocol": protocol_name, "epsilon": 2.0, "domain": {"size": 64}}
    if postprocess is not None:
        metric["postprocess"] = postprocess
    config = parse_registry({"metrics": [metric]})["m"]
    protocol = config.protocol
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, protocol.perturb(rng.integers(0, 10, n), rng))
    return window_estimate_record(config, finalize_window(config, statistic, n), 0, 1)


def simulated_job_output(registry, root, n: int, start_ms: int, span_ms: int,
                         rng: np.random.Generator) -> str:
    """The output folder of a small real job (simulated reports, FnApiRunner, daily windows)
    over `registry`: per metric, n devices whose values have frequencies falling linearly with
    their index, at times uniform in [start_ms, start_ms + span_ms); written under `root`."""
    import io

    from ldp_telemetry.ldp.config.windows import WindowSpec
    from ldp_telemetry.pipelines.batch import run_job
    from ldp_telemetry.pipelines.csv_input import TrueValues
    from ldp_telemetry.pipelines.job import EstimateJob
    from ldp_telemetry.pipelines.simulate import simulate_reports
    for config in registry.metrics:
        f = np.arange(config.d, 0, -1, dtype=float)
        values = rng.choice(config.d, size=n, p=f / f.sum())
        times = start_ms + rng.integers(0, span_ms, size=n)
        simulate_reports(config, TrueValues(values, times), str(root / "reports"), seed=1,
                         progress=None)
    job = EstimateJob(registry, tuple(sorted(str(p) for p in (root / "reports").glob("*.avro"))),
                      str(root / "out"), WindowSpec.from_seconds(86_400))
    run_job(job, [], out=io.StringIO())
    return str(root / "out")
