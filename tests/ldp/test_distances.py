"""The utility metrics of [Li20] §3 on hand-computed cases (the paper's own §3.1 example)."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.estimation.distances import (kolmogorov_smirnov, mean_error, quantile_error,
                                                    quantile_index, range_query_error,
                                                    variance_error, wasserstein)

# [Li20] §3.1: x̂1 and x̂2 have the same L1, L2 and KL distance from x, but x̂1 is closer in
# the numeric sense.
X = [0.7, 0.1, 0.1, 0.1]
NEAR = [0.1, 0.7, 0.1, 0.1]
FAR = [0.1, 0.1, 0.1, 0.7]


def test_wasserstein_tells_near_from_far():
    # P(x) = .7 .8 .9 1; P(near) = .1 .8 .9 1; P(far) = .1 .2 .3 1
    assert wasserstein(X, NEAR) == pytest.approx(0.6)
    assert wasserstein(X, FAR) == pytest.approx(1.8)
    assert wasserstein(X, FAR, width=0.25) == pytest.approx(0.45)
    assert wasserstein(X, X) == 0


def test_kolmogorov_smirnov():
    assert kolmogorov_smirnov(X, NEAR) == pytest.approx(0.6)
    assert kolmogorov_smirnov(X, FAR) == pytest.approx(0.6)
    assert kolmogorov_smirnov([0.5, 0.5], [0.25, 0.75]) == pytest.approx(0.25)


def test_range_query_error():
    # α = 2: R(x) = .8 .2 .2, R(near) = .8 .8 .2 -> errors 0 .6 0
    assert range_query_error(X, NEAR, 2) == pytest.approx(0.2)
    assert range_query_error(X, NEAR, 2, starts=[1]) == pytest.approx(0.6)
    assert range_query_error(X, FAR, 4) == pytest.approx(0.0)  # the whole domain
    with pytest.raises(ValueError):
        range_query_error(X, NEAR, 5)


def test_mean_and_variance_errors():
    points = [1, 2, 3, 4]
    # μ(x) = 1.6, μ(near) = 2.2; E[v²]: 3.6 and 5.4 -> σ² = 1.04 and 0.56
    assert mean_error(X, NEAR, points) == pytest.approx(0.6)
    assert variance_error(X, NEAR, points) == pytest.approx(0.48)
    assert mean_error(X, NEAR) == pytest.approx(0.6)  # indices 0..3: the same shift


def test_quantiles():
    assert quantile_index(X, 0.5) == 0  # P(x, 1) = 0.7 > 0.5
    assert quantile_index(NEAR, 0.5) == 1  # P = 0.1 ≤ 0.5 < 0.8
    assert quantile_index([0.25] * 4, 0.5) == 2  # exactly on a prefix counts
    # B = 0.1 … 0.9 with P(x) = .7 .8 .9 1 and P(near) = .1 .8 .9 1
    qx = [quantile_index(X, b) for b in np.arange(1, 10) / 10]
    qn = [quantile_index(NEAR, b) for b in np.arange(1, 10) / 10]
    assert qx == [0, 0, 0, 0, 0, 0, 1, 2, 3]
    assert qn == [1, 1, 1, 1, 1, 1, 1, 2, 3]
    assert quantile_error(X, NEAR) == pytest.approx(6 / 9)


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError):
        wasserstein([0.5, 0.5], [1.0])
