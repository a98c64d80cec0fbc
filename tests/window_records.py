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
