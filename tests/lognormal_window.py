"""A test window of a numeric metric: n values of the lognormal latency (1.0, 0.6) clipped to
[0, 32], perturbed by the metric's own client and counted into its statistic — the window the
band tests of CFO-binning, hierarchical histograms and Square Wave share."""
from __future__ import annotations

import numpy as np


def lognormal_window(config, n: int, seed: int = 3) -> np.ndarray:
    """The statistic of n lognormal values reported under `config` (a MetricConfig over
    [0, 32]), drawn and perturbed with numpy's generator seeded `seed`."""
    rng = np.random.default_rng(seed)
    values = np.clip(rng.lognormal(1.0, 0.6, n), 0, 32)
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, config.protocol.perturb(config.to_unit(values), rng))
    return statistic
