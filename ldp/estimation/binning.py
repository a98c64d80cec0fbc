"""The `norm-sub` NUMERIC estimator of CFO-binning ([Li20] §4.1), and `mean` of SR and PM.

The unbiased support-set estimate of the bucket frequencies, f~ = (c/n − q*)/(p* − q*)
([Wang20] journal eq. 2), projected onto the probability simplex by Norm-Sub ([Wang20] journal §3:
subtract one constant from every value and clip at 0 so the rest sums to 1).
"""
from __future__ import annotations

import numpy as np

from ldp_telemetry.ldp.estimation.estimators import METHODS, EstimatorMethod, EstimatorOutput
from ldp_telemetry.ldp.estimation.postprocess import project_to_simplex
from ldp_telemetry.ldp.estimation.uncertainty import BOOTSTRAP_PARAMETERS
from ldp_telemetry.ldp.protocols.base import NUMERIC
from ldp_telemetry.ldp.protocols.cfo_binning import CfoBinning
from ldp_telemetry.ldp.protocols.mean_mechanisms import MeanMechanism
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate


def _norm_sub(statistic: np.ndarray, n: int, protocol: CfoBinning, **_bootstrap: object
              ) -> EstimatorOutput:
    unbiased = unbiased_estimate(protocol.support_counts(statistic), protocol.noise(n))
    return EstimatorOutput(project_to_simplex(unbiased))


def _mean(statistic: np.ndarray, n: int, protocol: MeanMechanism) -> EstimatorOutput:
    """The mean-only estimate of SR / PM ([Li20] §2.2): (mean of t, its standard error)."""
    mean, error = protocol.mean_and_error(statistic, n)
    return EstimatorOutput(np.array([mean]), std_error=np.array([error]))


MEAN = METHODS.register(EstimatorMethod(
    "mean", NUMERIC, _mean,
    summary="the unbiased mean of a mean-only protocol (sr, pm) and its standard error"))

NORM_SUB = METHODS.register(EstimatorMethod(
    "norm-sub", NUMERIC, _norm_sub, dict(BOOTSTRAP_PARAMETERS),
    summary="the unbiased bucket estimate projected onto the simplex (CFO-binning, [Li20] §4.1)"))
