"""The `norm-sub` NUMERIC estimator of CFO-binning ([Li20] §4.1).

The unbiased support-set estimate of the bucket frequencies, f~ = (c/n − q*)/(p* − q*)
([Wang20] journal eq. 2), projected onto the probability simplex by Norm-Sub ([Wang20] §3:
subtract one constant from every value and clip at 0 so the rest sums to 1).
"""
from __future__ import annotations

import numpy as np

from ldp_telemetry.ldp.estimation import unbiased_estimate
from ldp_telemetry.ldp.estimators import NUMERIC, EstimatorMethod, EstimatorOutput, register
from ldp_telemetry.ldp.postprocess import project_to_simplex
from ldp_telemetry.ldp.uncertainty import BOOTSTRAP_PARAMETERS


def _norm_sub(statistic: np.ndarray, n: int, protocol, **_bootstrap) -> EstimatorOutput:
    unbiased = unbiased_estimate(protocol.support_counts(statistic), protocol.noise(n))
    return EstimatorOutput(project_to_simplex(unbiased))


NORM_SUB = register(EstimatorMethod(
    "norm-sub", NUMERIC, _norm_sub, dict(BOOTSTRAP_PARAMETERS),
    summary="the unbiased bucket estimate projected onto the simplex (CFO-binning, [Li20] §4.1)"))
