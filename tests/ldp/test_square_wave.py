"""Square Wave ([Li20] §5.2–5.4): b, p, q; ε-LDP on the output density; the sampler draws that
density (tails in proportion to their lengths); the transition model is column-stochastic and
matches an independent quadrature; payload validity and the report histogram."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ldp_telemetry.ldp.protocols import make_numeric_protocol
from ldp_telemetry.ldp.protocols.channels import SquareWaveChannel, sw_b, sw_pq
from ldp_telemetry.ldp.protocols.sw import DiscreteSquareWave, SquareWave

EPSILONS = [1e-3, 0.5, 1.0, 2.0, 4.0, 10.0]


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_b_maximises_the_mutual_information_bound(epsilon):
    """b of §5.3 is the stationary point of log((2b+1)/(2be^ε+1)) + 2bεe^ε/(2be^ε+1)."""
    e = math.exp(epsilon)

    def bound(b):
        return math.log((2 * b + 1) / (2 * b * e + 1)) + 2 * b * epsilon * e / (2 * b * e + 1)

    b = sw_b(epsilon)
    assert 0 < b <= 0.5
    for other in (b * 0.97, b * 1.03):
        assert bound(other) <= bound(b) + 1e-15
    p, q = sw_pq(epsilon, b)
    assert p / q == pytest.approx(e, rel=1e-12)
    assert 2 * b * p + q == pytest.approx(1.0, rel=1e-12)  # the density integrates to 1


def test_b_limits():
    assert sw_b(1e-6) == pytest.approx(0.5, abs=1e-3)
    assert sw_b(20.0) < 1e-7


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_continuous_density_ratio_is_exactly_e_to_the_epsilon(epsilon):
    """For every output y, max_v density(v, y) / min_v density(v, y) = e^ε over inputs v."""
    sw = SquareWave(epsilon, 16)
    b = sw.b
    v = np.linspace(0.0, 1.0, 401)[:, None]
    y = np.linspace(-b, 1 + b, 997)[None, :]
    density = sw.density(v, y)
    assert density.min() > 0
    ratio = density.max(axis=0) / density.min(axis=0)
    assert ratio.max() == pytest.approx(math.exp(epsilon), rel=1e-12)
    assert (ratio <= math.exp(epsilon) * (1 + 1e-12)).all()
    # each input's density integrates to 1 over [−b, 1 + b] (trapezoid on a grid fine enough
    # for the plateau: its two jumps cost at most p · step)
    fine = np.linspace(-b, 1 + b, 400_001)
    for value in (0.0, 0.3, 1.0):
        integral = np.trapezoid(sw.density(value, fine), fine)
        assert integral == pytest.approx(1.0, abs=2 * sw.p * (fine[1] - fine[0]))


@pytest.mark.parametrize("value", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_sampler_draws_the_density(value):
    """Chi-square of 200,000 seeded reports in 60 bins against the density's bin masses.

    Per value the false-failure rate is 1e-4 (the chi-square p-value threshold).
    """
    sw = SquareWave(1.0, 16)
    b = sw.b
    y = sw.perturb(np.full(200_000, value), np.random.default_rng(7))["y"]
    assert y.min() >= -b and y.max() <= 1 + b
    edges = np.linspace(-b, 1 + b, 61)
    observed = np.histogram(y, edges)[0]
    # exact bin masses: q · width + (p − q) · overlap with the plateau
    overlap = np.clip(np.minimum(edges[1:], value + b) - np.maximum(edges[:-1], value - b), 0, None)
    expected = len(y) * (sw.q * np.diff(edges) + (sw.p - sw.q) * overlap)
    assert expected.sum() == pytest.approx(len(y))
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_tails_are_chosen_in_proportion_to_their_lengths():
    """Pr[y < v − b] = q·v (not (1 − 2bp)/2): a 50/50 tail choice would fail this by ~40 sd."""
    sw = SquareWave(1.0, 16)
    v, n = 0.9, 400_000
    y = sw.perturb(np.full(n, v), np.random.default_rng(3))["y"]
    left = np.count_nonzero(y < v - sw.b)
    p = sw.q * v
    sd = math.sqrt(n * p * (1 - p))
    assert abs(left - n * p) < 4.5 * sd  # false-failure rate ~7e-6


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("d", [5, 12])
def test_discrete_square_wave_is_tight_epsilon_ldp(epsilon, d):
    """Exact report probabilities: columns sum to 1, every row's max/min ratio is e^ε."""
    sw = DiscreteSquareWave(epsilon, d)
    matrix = sw.probabilities()
    assert matrix.shape == (d + 2 * sw.b, d)
    np.testing.assert_allclose(matrix.sum(axis=0), 1.0, rtol=1e-12)
    ratio = matrix.max(axis=1) / matrix.min(axis=1)
    assert ratio.max() == pytest.approx(math.exp(epsilon), rel=1e-12)


def test_discrete_sampler_draws_its_matrix():
    """Chi-square per input bucket (false-failure rate 1e-4 each)."""
    sw = DiscreteSquareWave(1.0, 10)
    matrix = sw.probabilities()
    rng = np.random.default_rng(11)
    for i in range(10):
        values = np.full(100_000, (i + 0.5) / 10)
        y = sw.perturb(values, rng)["y"]
        observed = np.bincount(y, minlength=sw.output_buckets)
        assert stats.chisquare(observed, matrix[:, i] * len(y)).pvalue > 1e-4


@pytest.mark.parametrize("epsilon,d,d_out", [(0.5, 64, 64), (1.0, 64, 50), (2.0, 30, 97),
                                             (4.0, 128, 128), (1e-3, 16, 16)])
def test_transition_matrix_is_column_stochastic_and_matches_quadrature(epsilon, d, d_out):
    channel = SquareWave(epsilon, d, d_out).channel()
    matrix = channel.dense()
    assert matrix.shape == (d_out, d)
    np.testing.assert_allclose(matrix.sum(axis=0), 1.0, atol=1e-12)
    assert matrix.min() > 0
    # independent build: the plateau overlap averaged over 4,000 points of each input bucket
    b, p, q, a = channel.b, channel.p, channel.q, channel.out_edges
    t = (np.arange(d)[:, None] + (np.arange(4000) + 0.5)[None, :] / 4000) / d
    lo = np.maximum(a[:-1, None, None], t[None] - b)
    hi = np.minimum(a[1:, None, None], t[None] + b)
    overlap = np.clip(hi - lo, 0, None).mean(axis=-1)
    expected = q * np.diff(a)[:, None] + (p - q) * overlap
    np.testing.assert_allclose(matrix, expected, atol=1e-9)  # midpoint rule error ~1/4000²


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_fast_products_equal_dense_products(epsilon):
    channel = SquareWave(epsilon, 1024).channel()
    matrix = channel.dense()
    rng = np.random.default_rng(5)
    x = rng.dirichlet(np.ones(1024))
    r = rng.random(1024) * 1e4
    np.testing.assert_allclose(channel.forward(x), matrix @ x, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(channel.backward(r), matrix.T @ r, rtol=1e-9)


def test_channel_is_built_once_per_configuration():
    assert SquareWave(1.0, 64).channel() is SquareWave(1.0, 64).channel()
    assert isinstance(SquareWave(1.0, 64).channel(), SquareWaveChannel)


def test_payload_validity_rule():
    sw = SquareWave(1.0, 16)
    b = sw.b
    values = [0.5, -b, 1 + b, -b - 1e-9, 1 + b + 1e-9, float("nan"), float("inf"), -float("inf")]
    columns, invalid = sw.payloads_from_avro([{"y": v} for v in values])
    assert invalid.tolist() == [False, False, False, True, True, True, True, True]
    assert np.isfinite(columns["y"]).all()
    dsw = DiscreteSquareWave(1.0, 16)
    _, invalid = dsw.payloads_from_avro([{"y": v} for v in (0, dsw.output_buckets - 1,
                                                           dsw.output_buckets, -1)])
    assert invalid.tolist() == [False, False, True, True]


def test_report_histogram_covers_both_ends_and_merges_by_addition():
    sw = make_numeric_protocol("sw", 1.0, 8, 10)
    b = sw.b
    first, second = sw.new_statistic(), sw.new_statistic()
    assert first.dtype == np.int64 and first.shape == (10,)
    sw.accumulate(first, {"y": np.array([-b, 1 + b, 0.5])})
    sw.accumulate(second, {"y": np.array([0.5 - 1e-12])})
    assert first[0] == 1 and first[-1] == 1 and first.sum() == 3
    whole = sw.new_statistic()
    sw.accumulate(whole, {"y": np.array([-b, 1 + b, 0.5, 0.5 - 1e-12])})
    np.testing.assert_array_equal(first + second, whole)


def test_output_buckets_default_and_limits():
    assert SquareWave(1.0, 256).output_buckets == 256
    with pytest.raises(ValueError, match="output_buckets"):
        SquareWave(1.0, 256, 1)
    with pytest.raises(ValueError, match="buckets"):
        SquareWave(1.0, 10**6)
    with pytest.raises(ValueError, match="B \\+ 2b"):
        DiscreteSquareWave(1.0, 16, 16)


@pytest.mark.parametrize("compiled", [True, False])
def test_em_work_products_equal_the_plain_products(compiled, monkeypatch):
    """`products()` (the in-place buffers EM uses) against forward/backward, through scipy's
    compiled CSR kernel and through `@` (the path of a scipy without it)."""
    from ldp_telemetry.ldp.protocols import channels
    if not compiled:
        monkeypatch.setattr(channels, "_csr_matvec", lambda: False)
    channel = SquareWave(1.0, 256, 200).channel()
    forward, backward = channel.products()
    rng = np.random.default_rng(8)
    for _ in range(3):  # the buffers are reused call after call
        x, r = rng.dirichlet(np.ones(256)), rng.random(200)
        forward.input[:], backward.input[:] = x, r
        np.testing.assert_allclose(forward(), channel.forward(x), rtol=1e-13, atol=1e-17)
        np.testing.assert_allclose(backward(), channel.backward(r), rtol=1e-13)
    discrete = DiscreteSquareWave(2.0, 16).channel()
    forward, backward = discrete.products()
    forward.input[:] = x[:16]
    np.testing.assert_allclose(forward(), discrete.forward(x[:16]))
