"""95% quantile bands of a Square Wave report histogram by inverting the profile
likelihood-ratio test through the exact channel.

The report histogram c (d̃ output buckets, n reports) is Multinomial(n, M x), x the input
distribution over d buckets (uniform within a bucket) and M the channel of [Li20] eq. 3 counted
in buckets ([Li20] §5.4–5.5, `SquareWaveChannel`). The log-likelihood ℓ(x) = Σ_j c_j ln (M x)_j
is concave. For the CDF at the bucket edge e_k, F_k(x) = Σ_{i<k} x_i, and a level p,

    Λ_k = 2 [ max_{x ∈ simplex} ℓ(x) − max_{x ∈ simplex, F_k(x) = p} ℓ(x) ]

is the likelihood-ratio statistic of H0 "F(e_k) = p"; by Wilks' theorem [Wilks38] it is
asymptotically χ²₁ under H0 where no positivity constraint is active (where some are — buckets
of probability 0, common in a deconvolution's maximum — its law is a mixture of χ² laws of fewer
degrees of freedom [Self87], and the test is conservative). A bucket [e_k, e_{k+1}] may hold
the p-quantile iff some x of the 95% likelihood region {ℓ ≥ max ℓ − χ²₁,₀.₉₅ / 2} has
F_k(x) ≤ p ≤ F_{k+1}(x); the region is convex, so (along the segment to the maximum) that
holds for a bucket right of the estimate iff the test at its left edge accepts, and for one to
the left iff the test at its right edge accepts. The band of the p-quantile is therefore

    [the first edge left of the estimate whose test rejects, the first edge right of it that does]

(the domain's end where none does): the union of the buckets the data cannot exclude, at least
one (where the likelihood is sharper than a bucket it over-covers). Λ_k is monotone on each side
of the estimate, so the edges are found by galloping and bisection (`MAX_EDGE_TESTS` tests per
side at most). Inside a bucket the channel sees the shape only through the plateau's edges; a t
inside is tested in the model with that bucket split at t into two parts with the channel's
columns for each (`split_test`), and `refine` bisection steps of it move each end into its
bucket.

Measured on held-out real windows (benchmarks/quantile_lr.py, docs/error-bars.md "Quantile
bands by profile likelihood"): conservative for most levels (median coverage 0.99), not valid
for the 0.95–0.99 quantiles at ε ≥ 2 with few reports in a long tail (down to 0.53), where Λ is
far from χ²₁; the window-estimate records do not use these bands.

Each maximum is found by Newton's method on the simplex (blocks {i < k} and {i ≥ k} of fixed
masses p and 1 − p for a constrained one): the quadratic model of ℓ at x, written as the
non-negative least-squares problem min Σ_j c_j ((M z)_j / (M x)_j − 2)² with the block masses as
heavily weighted rows, gives the step to z, taken with a backtracking line search. Its
precision is certified: ℓ is concave and Σ_i x_i g_i = n for g = ∇ℓ = Mᵀ(c / M x), so

    max ℓ − ℓ(x) ≤ Σ_blocks mass · max_{i ∈ block} g_i − n        (the Frank–Wolfe gap)

and each maximum stops once its gap is below `GAP_TOLERANCE` log-likelihood units (total, not
per report), or after `MAX_NEWTON_STEPS` steps (the band then says so).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldp_telemetry.ldp.estimation.uncertainty import Band

#: χ²₁ 0.95 quantile (scipy.stats.chi2.ppf(0.95, 1)): the test's critical value.
CHI2_1_95 = 3.841458820694124
#: A maximum's certified shortfall (Frank–Wolfe gap) at which Newton stops, in log-likelihood
#: units (natural log, the whole histogram): Λ is then exact to 4 · 10⁻³ against 3.84.
GAP_TOLERANCE = 1e-3
#: Most Newton steps one maximisation takes (each: one NNLS over d variables, O(d² d̃)).
MAX_NEWTON_STEPS = 200
#: Most halvings of one Newton step's line search.
MAX_HALVINGS = 40
#: Most likelihood-ratio tests per side of one quantile's band (galloping then bisection over
#: at most d − 1 edges needs 2 log₂ d + 1: 15 at d = 128, 25 at d = 4096).
MAX_EDGE_TESTS = 40
#: Most bisection steps of `split_test` moving one band end inside its bucket (the end is then
#: within 2⁻ᵏ of a bucket of the boundary the split model's test finds).
MAX_REFINE_STEPS = 20
#: Weight of the block-mass rows in Newton's least-squares model, per √n: large enough that
#: the model's step keeps the masses (at 10³ the steps drifted and Newton crawled at n = 10⁶,
#: ε = 4; 10⁵–10⁷ all converge in about five steps), small enough for the NNLS's QR.
_MASS_WEIGHT = 1e6


@dataclass(frozen=True)
class Maximum:
    """A (constrained) maximum of ℓ: the distribution, ℓ there, its certified gap, the steps."""

    x: np.ndarray
    log_likelihood: float
    gap: float
    steps: int


def _log_likelihood(counts: np.ndarray, predicted: np.ndarray) -> float:
    return float(counts @ np.log(predicted))


def _blocks(d: int, split: int | None, level: float) -> list[tuple[slice, float]]:
    if split is None:
        return [(slice(0, d), 1.0)]
    return [(slice(0, split), level), (slice(split, d), 1.0 - level)]


def _gap(gradient: np.ndarray, blocks: list[tuple[slice, float]], n: float) -> float:
    return max(sum(mass * float(gradient[block].max()) for block, mass in blocks) - n, 0.0)


def _feasible(x: np.ndarray, blocks: list[tuple[slice, float]]) -> np.ndarray:
    """x with each block rescaled to its mass (uniform inside a block that holds none)."""
    out = np.clip(np.asarray(x, dtype=np.float64), 0.0, None).copy()
    for block, mass in blocks:
        total = out[block].sum()
        if total > 0:
            out[block] *= mass / total
        else:
            out[block] = mass / len(out[block])
    return out


def maximise(matrix: np.ndarray, counts: np.ndarray, start: np.ndarray, *,
             split: int | None = None, level: float = 0.0,
             tolerance: float = GAP_TOLERANCE, max_steps: int = MAX_NEWTON_STEPS,
             settled: tuple[float, float] = (-math.inf, math.inf)) -> Maximum:
    """max ℓ(x) = Σ_j c_j ln (M x)_j over the simplex, or over {F_split(x) = level} when
    `split` is given (1 ≤ split < d: masses `level` on buckets < split, 1 − level on the rest).

    `matrix`: the dense d̃ × d channel (column-stochastic, every entry positive); `start` any
    non-negative x (rescaled onto the constraint). Newton steps with an NNLS model and a
    backtracking line search until the Frank–Wolfe gap is at most `tolerance` (see the
    module docstring), or until the maximum is known to lie below settled[0] (ℓ + gap <
    settled[0]) or above settled[1] (ℓ ≥ settled[1]), or after `max_steps`."""
    from scipy.optimize import nnls  # scipy only where bands are made
    keep = counts > 0  # empty report buckets add nothing to ℓ
    m, c = matrix[keep], np.asarray(counts, dtype=np.float64)[keep]
    n = float(c.sum())
    d = matrix.shape[1]
    blocks = _blocks(d, split, level)
    x = _feasible(start, blocks)
    root = np.sqrt(c)
    weight = _MASS_WEIGHT * math.sqrt(n)
    mass_rows = np.zeros((len(blocks), d))
    mass_targets = np.zeros(len(blocks))
    for row, (block, mass) in enumerate(blocks):
        mass_rows[row, block] = weight
        mass_targets[row] = weight * mass
    target = np.concatenate([2.0 * root, mass_targets])
    y = m @ x
    value = _log_likelihood(c, y)
    gradient = m.T @ (c / y)
    gap = _gap(gradient, blocks, n)
    steps = 0
    low, high = settled
    while gap > tolerance and steps < max_steps and value + gap >= low and value < high:
        steps += 1
        model = np.vstack([(root / y)[:, None] * m, mass_rows])
        z, _ = nnls(model, target, maxiter=50 * d)
        direction = _feasible(z, blocks) - x
        slope = float(gradient @ direction)
        if not slope > 0.0:  # the model's step is no ascent: the Frank–Wolfe vertex is
            vertex = np.zeros(d)
            for block, mass in blocks:
                vertex[block.start + int(np.argmax(gradient[block]))] = mass
            direction, slope = vertex - x, gap
        step = 1.0
        for _ in range(MAX_HALVINGS):
            trial = x + step * direction
            trial_y = m @ trial
            trial_value = _log_likelihood(c, trial_y)
            if trial_value >= value + 0.25 * step * slope:
                break
            step *= 0.5
        else:
            break  # no ascent left at float precision
        x, y, value = np.clip(trial, 0.0, None), trial_y, trial_value
        gradient = m.T @ (c / y)
        gap = _gap(gradient, blocks, n)
    return Maximum(x, value, gap, steps)


@dataclass(frozen=True)
class QuantileBand:
    """The 95% band [lower, upper] of one quantile level (metric units), the likelihood-ratio
    tests it took, and whether every test's decision is certified (each maximum within
    `GAP_TOLERANCE` of its certified bound, or the bound settling the decision)."""

    lower: float
    upper: float
    tests: int
    certified: bool
    #: Λ of every edge tested (edge index -> Λ; a settled decision's Λ may be inexact)
    statistics: dict[int, float]


@dataclass(frozen=True)
class Test:
    """One likelihood-ratio test: Λ (from the maxima found), whether it rejects, whether the
    decision is certified by the maxima's gaps."""

    statistic: float
    rejects: bool
    certified: bool


class ProfileLikelihood:
    """The likelihood-ratio tests of one report histogram through one channel: the
    unconstrained maximum once, then the test at any (edge k, level p), each constrained
    maximum warm-started from the nearest edge already tested at that level and stopped as
    soon as its certified bounds settle the decision."""

    def __init__(self, matrix: np.ndarray, counts: np.ndarray, start: np.ndarray, *,
                 column: Callable[[float, float], np.ndarray] | None = None,
                 critical: float = CHI2_1_95, tolerance: float = GAP_TOLERANCE,
                 max_steps: int = MAX_NEWTON_STEPS):
        self.matrix = np.asarray(matrix, dtype=np.float64)
        self.column = column
        self.counts = np.asarray(counts, dtype=np.float64)
        self.critical, self.tolerance, self.max_steps = critical, tolerance, max_steps
        self.best = maximise(self.matrix, self.counts, start, tolerance=tolerance,
                             max_steps=max_steps)
        self.cdf = np.concatenate([[0.0], np.cumsum(self.best.x)])
        self._solved: dict[tuple[float, int], Maximum] = {}

    def test(self, edge: int, level: float, exact: bool = False) -> Test:
        """The test of H0 "F(e_edge) = level" (1 ≤ edge < d) at the critical value (`exact`:
        Λ to the tolerance even where the decision is settled earlier).

        With ℓ̂ the unconstrained maximum found (true maximum in [ℓ̂, ℓ̂ + gap]) and ℓ₀ the
        constrained one (true in [ℓ₀, ℓ₀ + gap₀]), it rejects for certain when
        ℓ₀ + gap₀ < ℓ̂ − χ/2 and accepts for certain when ℓ₀ ≥ ℓ̂ + gap − χ/2; otherwise
        both gaps are at most the tolerance, or the decision is not certified."""
        near = [k for (p, k) in self._solved if p == level]
        start = (self._solved[(level, min(near, key=lambda k: abs(k - edge)))].x if near
                 else self.best.x)
        low = self.best.log_likelihood - 0.5 * self.critical
        high = low + self.best.gap
        found = maximise(self.matrix, self.counts, start, split=edge, level=level,
                         tolerance=self.tolerance, max_steps=self.max_steps,
                         settled=(-math.inf, math.inf) if exact else (low, high))
        self._solved[(level, edge)] = found
        statistic = 2.0 * (self.best.log_likelihood - found.log_likelihood)
        certified = (found.log_likelihood + found.gap < low or found.log_likelihood >= high
                     or max(found.gap, self.best.gap) <= self.tolerance)
        return Test(statistic, statistic > self.critical, certified)

    def split_test(self, bucket: int, fraction: float, level: float, exact: bool = False
                   ) -> Test:
        """The test of H0 "F(t) = level" at t a `fraction` (0 < fraction < 1) into `bucket`,
        in the model with that bucket split at t into two sub-buckets whose columns are the
        channel's for a value uniform on each part (`column`, e.g.
        SquareWaveChannel.interval_column): Λ compares the maxima of that model with and
        without the constraint (its own unconstrained maximum, not the d-bucket one: the split
        model has one parameter more). The model leaves the shape inside the bucket free up to
        that split. `exact` as for `test`."""
        assert self.column is not None, "a split test needs the channel's interval columns"
        d = self.matrix.shape[1]
        low, high = bucket / d, (bucket + 1) / d
        at = low + fraction * (high - low)
        matrix = np.column_stack([self.matrix[:, :bucket], self.column(low, at),
                                  self.column(at, high), self.matrix[:, bucket + 1:]])

        def split(x: np.ndarray) -> np.ndarray:
            return np.concatenate([x[:bucket], [fraction * x[bucket],
                                                (1 - fraction) * x[bucket]], x[bucket + 1:]])
        free = maximise(matrix, self.counts, split(self.best.x), tolerance=self.tolerance,
                        max_steps=self.max_steps)
        near = [k for (p, k) in self._solved if p == level]
        x = (self._solved[(level, min(near, key=lambda k: abs(k - bucket)))].x if near
             else self.best.x)
        low_value = free.log_likelihood - 0.5 * self.critical
        high_value = low_value + free.gap
        found = maximise(matrix, self.counts, split(x), split=bucket + 1, level=level,
                         tolerance=self.tolerance, max_steps=self.max_steps,
                         settled=(-math.inf, math.inf) if exact else (low_value, high_value))
        statistic = 2.0 * (free.log_likelihood - found.log_likelihood)
        certified = (found.log_likelihood + found.gap < low_value
                     or found.log_likelihood >= high_value
                     or max(found.gap, free.gap) <= self.tolerance)
        return Test(statistic, statistic > self.critical, certified)

    def band(self, level: float, edges: np.ndarray, refine: int = 0) -> QuantileBand:
        """The band of the `level`-quantile (module docstring), in the units of `edges`.

        `refine` > 0 (at most MAX_REFINE_STEPS; needs `column`): each end is then moved into
        its bucket by `refine` bisection steps of `split_test` between the last point that
        accepts (the inner edge, or the point estimate) and the rejecting edge; the end is the
        innermost point found to reject (at most 2^−refine of a bucket beyond the boundary)."""
        d = self.matrix.shape[1]
        # the estimate's bucket: cdf[k] ≤ level < cdf[k + 1] (edges ≤ k on the left side)
        k_hat = int(np.clip(np.searchsorted(self.cdf, level, side="right") - 1, 0, d - 1))
        tests: list[Test] = []
        tested: dict[int, Test] = {}

        def rejects(edge: int) -> bool:
            tests.append(self.test(edge, level))
            tested[edge] = tests[-1]
            return tests[-1].rejects

        # right side: edges k_hat + 1 … d − 1, rejected from some edge on (monotone)
        upper = _first_rejected(rejects, k_hat + 1, d - 1, +1)
        # left side: edges k_hat … 1, rejected from some edge on, going down
        lower = _first_rejected(rejects, k_hat, 1, -1)
        lower_end = float(edges[0 if lower is None else lower])
        upper_end = float(edges[d if upper is None else upper])
        if refine > 0:
            if refine > MAX_REFINE_STEPS:
                raise ValueError(f"refine is at most {MAX_REFINE_STEPS}, got {refine}")
            # the point estimate's place inside its bucket, as a fraction
            mass = self.best.x[k_hat]
            inside = 0.0 if mass <= 0 else float(np.clip((level - self.cdf[k_hat]) / mass, 0, 1))
            if upper is not None:
                bucket = upper - 1
                start = inside if bucket == k_hat else 0.0
                upper_end = self._refined(bucket, start, 1.0, level, refine, edges, tests)
            if lower is not None:
                bucket = lower
                start = inside if bucket == k_hat else 1.0
                lower_end = self._refined(bucket, start, 0.0, level, refine, edges, tests)
        return QuantileBand(lower_end, upper_end, len(tests),
                            self.best.gap <= self.tolerance
                            and all(test.certified for test in tests),
                            {edge: test.statistic for edge, test in tested.items()})


    def _refined(self, bucket: int, accepted: float, rejected: float, level: float,
                 steps: int, edges: np.ndarray, tests: list[Test]) -> float:
        """Bisection of `split_test` in `bucket` between the fractions `accepted` and
        `rejected` (an edge known to reject); the innermost rejecting point, in edge units."""
        for _ in range(steps):
            middle = 0.5 * (accepted + rejected)
            if not 0.0 < middle < 1.0:
                break
            tests.append(self.split_test(bucket, middle, level))
            if tests[-1].rejects:
                rejected = middle
            else:
                accepted = middle
        return float(edges[bucket] + rejected * (edges[bucket + 1] - edges[bucket]))


def _first_rejected(rejects: Callable[[int], bool], first: int, last: int, direction: int
                    ) -> int | None:
    """The first edge from `first` towards `last` (inclusive) whose test rejects, rejection
    being monotone in that direction; None when none does. Galloping, then bisection: at most
    2 log₂(|last − first| + 1) + 1 tests, and never more than MAX_EDGE_TESTS (the band then
    ends at an edge known to reject, or at the domain's end: wider, never narrower)."""
    if (last - first) * direction < 0:
        return None
    accepted, offset, budget = first - direction, 1, MAX_EDGE_TESTS
    while True:
        edge = first + direction * (offset - 1)
        if (last - edge) * direction < 0:
            edge = last
        budget -= 1
        if rejects(edge):
            rejected = edge
            break
        accepted = edge
        if edge == last or budget <= 0:
            return None
        offset *= 2
    while abs(rejected - accepted) > 1 and budget > 0:
        middle = (rejected + accepted) // 2
        budget -= 1
        if rejects(middle):
            rejected = middle
        else:
            accepted = middle
    return rejected


#: Bisection steps of the split tests that move a record's band ends into their buckets (the
#: ends then lie within 1/64 of a bucket beyond the boundary the split test finds).
REFINE_STEPS = 6
#: Why a quantile has no profile-likelihood band: a test's decision the optimiser could not
#: certify within its step limit.
UNCERTIFIED_REASON = ("no band: a likelihood-ratio test behind it was not decided within "
                      f"{MAX_NEWTON_STEPS} Newton steps per maximum")


def profile_likelihood_bands(channel: Any, counts: np.ndarray, edges: np.ndarray,
                             start: np.ndarray, levels: tuple[str, ...],
                             refine: int = REFINE_STEPS, max_steps: int = MAX_NEWTON_STEPS
                             ) -> dict[str, Band]:
    """The 95% band of each quantile level (keys as `levels`, e.g. QUANTILE_LEVELS) of the
    report histogram `counts` through `channel` (a SquareWaveChannel: its dense M and its
    `interval_column` for the split tests), in the units of `edges`, by inverting the
    likelihood-ratio test (module docstring), the ends moved into their buckets by `refine`
    split-test steps. `start`: any distribution to start Newton from (EM's fit). A band
    behind which a test was not certified within `max_steps` Newton steps per maximum is
    none, with UNCERTIFIED_REASON. Cost: one
    unconstrained maximum, then per level at most 2 MAX_EDGE_TESTS edge tests and 2 `refine`
    split tests (two maxima each), every maximum at most MAX_NEWTON_STEPS NNLS steps over
    d (+ 1) variables."""
    profile = ProfileLikelihood(channel.dense(), counts, start, column=channel.interval_column,
                                max_steps=max_steps)
    bands = {}
    for key in levels:
        found = profile.band(float(key), edges, refine=refine)
        bands[key] = (Band(found.lower, found.upper) if found.certified
                      else Band(None, None, UNCERTIFIED_REASON))
    return bands
