"""Mean, variance and quantiles of a bucketed distribution (uniform within each bucket)."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.estimation.histograms import (QUANTILE_LEVELS, bucket_edges, histogram_mean,
                                                     histogram_quantiles, histogram_variance,
                                                     summary)


def test_uniform_distribution_has_the_continuous_uniform_moments():
    edges = bucket_edges(0, 10, 4)
    x = np.full(4, 0.25)
    assert histogram_mean(x, edges) == pytest.approx(5.0)
    assert histogram_variance(x, edges) == pytest.approx(100 / 12)
    np.testing.assert_allclose(histogram_quantiles(x, edges, [0.25, 0.5, 0.99]), [2.5, 5, 9.9])


def test_hand_computed_case():
    edges = np.array([0.0, 1.0, 3.0])  # unequal buckets
    x = np.array([0.5, 0.5])
    # mean = .5·.5 + .5·2 = 1.25; E[v²] = .5(1/3) + .5(4 + 4/12) = 2.333…; var = 2.333 − 1.5625
    assert histogram_mean(x, edges) == pytest.approx(1.25)
    assert histogram_variance(x, edges) == pytest.approx(7 / 3 - 1.5625)
    # CDF reaches 0.75 halfway through the second bucket
    assert histogram_quantiles(x, edges, [0.75])[0] == pytest.approx(2.0)


def test_empty_buckets_and_batches():
    edges = bucket_edges(0, 4, 4)
    x = np.array([0.5, 0.0, 0.0, 0.5])
    # the CDF is flat at 0.5 over [1, 3]: the 0.5-quantile is the stretch's left end
    assert histogram_quantiles(x, edges, [0.5])[0] == pytest.approx(1.0)
    batch = np.stack([x, np.full(4, 0.25)])
    assert histogram_quantiles(batch, edges, [0.5]).shape == (2, 1)
    np.testing.assert_allclose(histogram_mean(batch, edges), [2.0, 2.0])


def test_summary_has_every_record_quantile():
    result = summary(np.full(8, 1 / 8), bucket_edges(100, 900, 8))
    assert list(result["quantiles"]) == list(QUANTILE_LEVELS)
    assert result["quantiles"]["0.5"] == pytest.approx(500)
    assert result["quantiles"]["0.01"] == pytest.approx(108)
