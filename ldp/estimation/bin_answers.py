"""Linear answers over the B bins of a CFO-binning or hierarchical-histogram window, with their
exact variance.

Both protocols give an unbiased estimate x~ of the bin frequencies whose every linear answer
Σ_i w_i x~_i has an exact variance (ldp_telemetry.ldp.estimation.queries, "The exact variance of
a linear answer"); a range's probability under the records' convention (mass uniform within a
bin), the bin-centre mean and the second moment are such answers. `LinearBins` gives them:

* CFO-binning ([Li20] §4.1): x~ = (c/n − q*)/(p* − q*), the oracle's own unbiased estimate;
  Var = the oracle's `linear_variance(n, w, ·)`.
* Hierarchical histograms ([Li20] §4.2): depth ℓ = 1..h holds its own n_ℓ users and oracle, so
  the depths' unbiased node estimates y_ℓ are independent. x~ is their weighted least-squares
  combination under the tree's consistency and the known root (1): the constrained inference of
  [Hay10] with depth ℓ weighted by the precision of one of its d_ℓ node estimates,
  n_ℓ d_ℓ / MSE_ℓ (MSE_ℓ its oracle's analytical full-domain n·MSE, [Fang25] eq. 4, which
  leaves out the f-dependent terms of [Wang20] journal eq. 2), computed in O(nodes) by
  ldp_telemetry.ldp.estimation.admm.tree_projection. It is linear in the y_ℓ with weights that
  depend on the n_ℓ only, so it is unbiased given them, and a leaf answer w·x~ equals
  Σ_ℓ a_ℓ(w)·y_ℓ + c(w) with a_ℓ, c the projection's adjoint (`tree_adjoint`):
  Var = Σ_ℓ Var_ℓ(a_ℓ), each depth's oracle's `linear_variance(n_ℓ, a_ℓ, ·)`, plus what the
  split of the window's users across depths adds: given the n_ℓ, depth ℓ holds a random n_ℓ
  of the n users (disjoint samples without replacement), whose buckets' mean of g_ℓ = the
  leaf weights of a_ℓ varies by σ²(g_ℓ)(n − n_ℓ)/(n_ℓ(n − 1)), with covariance
  −σ(g_ℓ, g_k)/(n − 1) between depths; as Σ_ℓ g_ℓ = w − c(w), the sum is
  Σ_ℓ σ²(g_ℓ) n/(n_ℓ(n − 1)) − σ²(w)/(n − 1) (σ over the users' buckets; 0 for one depth).
  At ε = 4 over 64 buckets it was a sixth to a fifth of a range's variance (the lognormal
  latency). The weights are the optimal ones only up to the variance's f-dependent terms; the
  variance is exact whatever they are.

Each variance is evaluated at a plug-in of f, as the records' errors are: the Norm-Sub
projection of x~ (for the hierarchy, its node sums at every depth).

Range bands (`LinearBins.score_band`) are the score form of that variance, as
frequency_bands.score_bands is for one value: every ν with (w·x~ − ν)² ≤ z² V(ν), V(ν) the
exact variance at the plug-in moved to range value ν along the mix of its conditional bin
distributions in and out of the range. The plug-in's Wald band w·x~ ± z · √V(f̂) was too
narrow where the error and √V(f̂) move together (a range's GRR variance is linear in its
probability): 0.929–0.956, mean 0.942, on 3,000 windows a cell at n = 10³, ε = 2 (cfo-grr;
the score form 0.942–0.956, mean 0.950: benchmarks/coverage_bins.py, coverage_bins_confirm),
where the variance at the true f held 0.946–0.955 (docs/error-bars.md, "Range answers and
hierarchical histograms").
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.estimation.admm import child_sums, tree_projection
from ldp_telemetry.ldp.estimation.postprocess import error_plug_in
from ldp_telemetry.ldp.estimation.uncertainty import Z95
from ldp_telemetry.ldp.protocols import NUMERIC_PROTOCOLS
from ldp_telemetry.ldp.protocols.base import FrequencyOracle
from ldp_telemetry.ldp.protocols.cfo_binning import CfoBinning
from ldp_telemetry.ldp.protocols.hh import BRANCHING, HierarchicalHistogram, node_counts
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

#: A plug-in mass (in or out of a range) below this counts as none (`LinearBins.score_band`).
MASS_FLOOR = 1e-12
#: Below this spread of w·f over the range's in and out distributions the variance is taken
#: as constant in the range's value (`LinearBins.score_band`).
SPAN_FLOOR = 1e-9

#: The protocols whose windows are linear in a bin estimate (LinearBins), by registry name:
#: CFO-binning and hierarchical histograms (their range answers get exact bands, their
#: quantiles the band of whole bins, ldp_telemetry.ldp.estimation.bin_quantiles).
BIN_PROTOCOLS = tuple(sorted(name for name, kind in NUMERIC_PROTOCOLS.items()
                             if issubclass(kind, (CfoBinning, HierarchicalHistogram))))


def names_bin_protocol(name: object) -> bool:
    """Whether `name` names one of BIN_PROTOCOLS in this version's registry (an alias too)."""
    if not isinstance(name, str):
        return False
    try:
        kind = NUMERIC_PROTOCOLS.lookup(name)
    except RegistryError:
        return False
    return issubclass(kind, (CfoBinning, HierarchicalHistogram))


#: Why a window has no linear answer with an exact variance, by cause.
NO_LEAF_REPORTS_REASON = "no band: no reports at the hierarchy's bucket depth"


def range_weights(edges: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The share of every bin [edges[i], edges[i+1]) that [lo, hi] covers (0..1)."""
    edges = np.asarray(edges, dtype=np.float64)
    left, right = edges[:-1], edges[1:]
    overlap = np.clip(np.minimum(right, hi) - np.maximum(left, lo), 0.0, None)
    return overlap / (right - left)


@dataclass(frozen=True)
class LinearBins:
    """One window's unbiased bin estimate and the exact variance of its linear answers.

    `unbiased`: x~ over the B bins (unit scale); `variance(w)`: Var[w·x~]; `plug_in`: the
    estimate of f the variance is evaluated at (non-negative, summing to 1)."""

    unbiased: np.ndarray
    plug_in: np.ndarray
    oracles: tuple[FrequencyOracle, ...]
    reports: tuple[int, ...]
    #: hierarchy only: the depths' weights of the least-squares combination (index 0: the root)
    depth_weights: np.ndarray | None = None

    def value(self, weights: np.ndarray) -> float:
        """w·x~, unbiased for w·f."""
        return float(np.asarray(weights, dtype=np.float64) @ self.unbiased)

    def variance(self, weights: np.ndarray) -> float:
        """Var[w·x~] for the window's reports, at `plug_in` (module docstring)."""
        w = np.asarray(weights, dtype=np.float64)
        if self.depth_weights is None:
            return self.oracles[0].linear_variance(self.reports[0], w, self.plug_in)
        adjoint, _ = tree_adjoint(w, self.depth_weights)
        h = len(self.oracles)
        noise = sum(oracle.linear_variance(n, adjoint[depth], node_counts(self.plug_in, depth, h))
                    for depth, (oracle, n) in enumerate(zip(self.oracles, self.reports,
                                                            strict=True), start=1) if n > 0)
        return float(noise) + self._split_variance(w, adjoint)

    def score_band(self, weights: np.ndarray, z: float = Z95) -> tuple[float, float]:
        """The band of w·f, clipped to the values it can take, [min w, max w] (a range's
        [0, 1], or [0, s] for a range inside one bin covering a share s of it; a single point
        where w is constant, such as the whole domain's [1, 1]): every ν with
        (w·x~ − ν)² ≤ z² V(ν), V(ν) the exact variance at the plug-in moved to range value ν
        (the score, or Wilson, form of frequency_bands.score_bands, for a range; module
        docstring, "Range bands").

        The plug-in f̂ splits into its conditional bin distributions in and out of the range,
        g_in ∝ w ⊙ f̂ and g_out ∝ (1 − w) ⊙ f̂ (the range's bins, or the others, spread by w
        where f̂ has no mass there); f(ν) mixes them so that w·f(ν) = ν, and V(ν), linear in
        f for an oracle and quadratic with a hierarchy's split term, is the quadratic through
        V at ν = w·g_out, the middle and w·g_in (valid distributions, so exact). The
        inequality is then a quadratic in ν, solved exactly. Where it has no real solution
        (V extrapolated below 0) the band is the plug-in's Wald band."""
        w = np.asarray(weights, dtype=np.float64)
        floor, ceiling = float(w.min()), float(w.max())
        if floor == ceiling:  # w·f is w's one value for every distribution f
            return floor, ceiling
        value = self.value(w)
        inside, outside = w @ self.plug_in, (1.0 - w) @ self.plug_in
        g_in = (w * self.plug_in / inside if inside > MASS_FLOOR else w / w.sum())
        g_out = ((1.0 - w) * self.plug_in / outside if outside > MASS_FLOOR
                 else (1.0 - w) / max(float((1.0 - w).sum()), MASS_FLOOR))
        high, low = float(w @ g_in), float(w @ g_out)
        span = high - low
        if span <= SPAN_FLOOR:  # w constant where f̂ has mass: V does not move with ν
            coefficients = (self.variance(w), 0.0, 0.0)
        else:
            at = [self._variance_at(w, (s * g_in + (1.0 - s) * g_out))
                  for s in (0.0, 0.5, 1.0)]
            k1 = (-3.0 * at[0] + 4.0 * at[1] - at[2]) / span  # V = at0 + k1 t + k2 t²,
            k2 = (2.0 * at[0] - 4.0 * at[1] + 2.0 * at[2]) / (span * span)  # t = ν − low
            coefficients = (at[0] - k1 * low + k2 * low * low, k1 - 2.0 * k2 * low, k2)
        c0, c1, c2 = coefficients
        z2 = z * z
        a, b, c = 1.0 - z2 * c2, -(2.0 * value + z2 * c1), value * value - z2 * c0
        disc = b * b - 4.0 * a * c
        if a <= 0.0 or disc < 0.0:
            half = z * math.sqrt(max(self.variance(w), 0.0))
            lower, upper = value - half, value + half
        else:
            root = math.sqrt(disc)
            lower, upper = (-b - root) / (2.0 * a), (-b + root) / (2.0 * a)
        return min(max(lower, floor), ceiling), min(max(upper, floor), ceiling)

    def _variance_at(self, weights: np.ndarray, plug_in: np.ndarray) -> float:
        """`variance` of `weights` at another plug-in."""
        return replace(self, plug_in=plug_in).variance(weights)

    def variances(self, rows: np.ndarray) -> np.ndarray:
        """`variance` of every row of `rows` (K × B) at once, in O(K · nodes) numpy work
        (K × B rows at a time, `ROW_CHUNK`), through each oracle's `symmetric_form`; one
        `variance` a row where an oracle has none."""
        rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
        forms = [symmetric_form(oracle) for oracle in self.oracles]
        if any(form is None for form in forms):
            return np.array([self.variance(row) for row in rows])
        return np.concatenate([self._chunk_variances(rows[start: start + ROW_CHUNK], forms)
                               for start in range(0, len(rows), ROW_CHUNK)] or [np.zeros(0)])

    def _chunk_variances(self, rows: np.ndarray, forms: list) -> np.ndarray:
        f = self.plug_in
        if self.depth_weights is None:
            return form_variance(self.oracles[0], self.reports[0], forms[0], rows @ f,
                                 (rows * rows) @ f, rows.sum(axis=1), (rows * rows).sum(axis=1),
                                 float(f.sum()))
        adjoint, _ = tree_adjoints(rows, self.depth_weights)
        h = len(self.oracles)
        total = sum(self.reports)
        noise = np.zeros(len(rows))
        within = np.zeros(len(rows))
        for depth, (oracle, form, n) in enumerate(zip(self.oracles, forms, self.reports,
                                                      strict=True), start=1):
            if n <= 0:
                continue
            node = node_counts(f, depth, h)
            a = adjoint[depth]
            mean, square = a @ node, (a * a) @ node
            noise += form_variance(oracle, n, form, mean, square, a.sum(axis=1),
                                   (a * a).sum(axis=1), float(node.sum()))
            within += (square - mean * mean) * total / n
        if total <= 1:
            return noise
        mean = rows @ f
        spread = (rows * rows) @ f - mean * mean
        return noise + np.maximum((within - spread) / (total - 1), 0.0)

    def prefix_variances(self) -> np.ndarray | None:
        """`variance` of the B + 1 prefixes Σ_{i<k} x~_i (k = 0..B), the CDF at the bin
        edges, in O(B · h³) for a hierarchy (`_tree_prefix_functionals`: O(B · ℓ) segments at
        depth ℓ, each valued over its ℓ ancestors' terms) and O(B) for CFO-binning; None
        where an oracle has no `symmetric_form`."""
        found = [symmetric_form(oracle) for oracle in self.oracles]
        forms = [form for form in found if form is not None]
        if len(forms) < len(found):
            return None
        f = self.plug_in
        cdf = np.concatenate(([0.0], np.cumsum(f)))
        k = np.arange(self.bins + 1, dtype=np.float64)
        if self.depth_weights is None:  # a prefix of k bins: f·w = f·w² = F_k, Σ w = Σ w² = k
            return form_variance(self.oracles[0], self.reports[0], forms[0], cdf, cdf, k, k,
                                 float(f.sum()))
        h = len(self.oracles)
        total = sum(self.reports)
        noise = np.zeros(self.bins + 1)
        within = np.zeros(self.bins + 1)
        for depth, (oracle, form, n) in enumerate(zip(self.oracles, forms, self.reports,
                                                      strict=True), start=1):
            if n <= 0:
                continue
            node = node_counts(f, depth, h)
            ones, squares, mean, square = _tree_prefix_functionals(self.depth_weights, depth,
                                                                   node)
            noise += form_variance(oracle, n, form, mean, square, ones, squares,
                                   float(node.sum()))
            within += (square - mean * mean) * total / n
        if total <= 1:
            return noise
        return noise + np.maximum((within - (cdf - cdf * cdf)) / (total - 1), 0.0)

    def _split_variance(self, weights: np.ndarray, adjoint: list[np.ndarray]) -> float:
        """The variance the random split of the users across depths adds (module docstring):
        Σ_ℓ σ²(g_ℓ) n / (n_ℓ (n − 1)) − σ²(w) / (n − 1), g_ℓ the leaf weights of depth ℓ's
        coefficients and σ² the variance over the users' buckets (at `plug_in`)."""
        f = self.plug_in
        total = sum(self.reports)
        if total <= 1:
            return 0.0

        def spread(g: np.ndarray) -> float:
            mean = float(f @ g)
            return float(f @ (g * g)) - mean * mean
        h = len(self.oracles)
        within = sum(spread(np.repeat(adjoint[depth], BRANCHING ** (h - depth))) * total / n
                     for depth, n in enumerate(self.reports, start=1) if n > 0)
        return max((within - spread(weights)) / (total - 1), 0.0)

    @property
    def bins(self) -> int:
        return len(self.unbiased)


#: Rows of linear answers whose variances `LinearBins.variances` evaluates at once (bounds its
#: memory: ROW_CHUNK × the tree's nodes floats per pass).
ROW_CHUNK = 256


def symmetric_form(oracle: FrequencyOracle) -> tuple[float, float, float, float] | None:
    """(α, β, γ, δ) with, for weights w (W = Σ w, Q = Σ w²) and true value x,

        Var[Y | x] = α w_x² + β (Q − w_x²) + 2γ w_x (W − w_x) + δ ((W − w_x)² − (Q − w_x²)):

    the covariance of a report's support indicators of an oracle that treats all values alike
    (GRR: α = p*(1 − p*), β = q*(1 − q*), γ = −p*q*, δ = −q*²; OLH's independent indicators:
    γ = δ = 0), read off its `report_variance` and checked on a probe vector; None where the
    oracle's report variance is not of that form or d < 3."""
    d = oracle.d
    if d < 3:
        return None
    basis = np.zeros(d)
    basis[0] = 1.0
    first = oracle.report_variance(basis)
    basis[:3] = 0.0, 1.0, 1.0
    pair = oracle.report_variance(basis)
    alpha, beta = float(first[0]), float(first[1])
    delta = (float(pair[0]) - 2.0 * beta) / 2.0
    gamma = (float(pair[1]) - alpha - beta) / 2.0
    probe = np.cos(np.arange(d) * 1.7) + 0.3
    total, square = float(probe.sum()), float(probe @ probe)
    expected = (alpha * probe ** 2 + beta * (square - probe ** 2)
                + 2.0 * gamma * probe * (total - probe)
                + delta * ((total - probe) ** 2 - (square - probe ** 2)))
    if not np.allclose(oracle.report_variance(probe), expected, rtol=1e-9, atol=1e-12):
        return None
    return alpha, beta, gamma, delta


def form_variance(oracle: FrequencyOracle, n: int, form: tuple[float, float, float, float],
                  mean: np.ndarray, square: np.ndarray, total: np.ndarray, squares: np.ndarray,
                  mass: float) -> np.ndarray:
    """Var[w·f~] (the oracle's `linear_variance`) of answers given by f·w (`mean`), f·w²
    (`square`), Σ w (`total`) and Σ w² (`squares`), f the plug-in of total `mass`, from the
    oracle's `symmetric_form`: Σ_x f_x Var[Y | x] = (α − β − 2γ + 2δ) f·w² + 2(γ − δ) W f·w
    + ((β − δ) Q + δ W²) Σ f, over n (p* − q*)²."""
    alpha, beta, gamma, delta = form
    per_report = ((alpha - beta - 2.0 * gamma + 2.0 * delta) * square
                  + 2.0 * (gamma - delta) * total * mean
                  + ((beta - delta) * squares + delta * total * total) * mass)
    return np.maximum(per_report, 0.0) / (n * (oracle.p_star - oracle.q_star) ** 2)


def cfo_linear(protocol: CfoBinning, unbiased: np.ndarray, n: int) -> LinearBins | None:
    """The LinearBins of a CFO-binning window from its unbiased estimate; None without
    reports."""
    unbiased = np.asarray(unbiased, dtype=np.float64)
    if n <= 0 or not np.isfinite(unbiased).all():
        return None
    return LinearBins(unbiased, error_plug_in(unbiased), (protocol.inner,), (int(n),))


def cfo_statistic_linear(protocol: CfoBinning, statistic: np.ndarray, n: int
                         ) -> LinearBins | None:
    """`cfo_linear` from the oracle's statistic of n reports."""
    if n <= 0:
        return None
    return cfo_linear(protocol, unbiased_estimate(protocol.support_counts(statistic),
                                                  protocol.noise(int(n))), n)


def depth_weights(protocol: HierarchicalHistogram, reports: np.ndarray) -> np.ndarray:
    """The least-squares weight of every depth 0..h (module docstring): n_ℓ over the f-free
    n·variance of one node's estimate, 0 at the root and at a depth without reports."""
    weights = [0.0]
    for oracle, n in zip(protocol.oracles, reports, strict=True):
        weights.append(float(n) * oracle.d / oracle.n_mse() if n > 0 else 0.0)
    return np.asarray(weights)


def hh_combination(protocol: HierarchicalHistogram, levels: list[np.ndarray],
                   reports: np.ndarray) -> np.ndarray:
    """x~: the weighted least-squares leaf frequencies of the depths' unbiased node estimates
    `levels` (depth 1..h; NaN at a depth without reports) under consistency and root 1."""
    weights = depth_weights(protocol, reports)
    filled = [np.nan_to_num(level, nan=0.0) for level in levels]
    return tree_projection([np.ones(1), *filled], weights)[-1]


def hh_linear(protocol: HierarchicalHistogram, unbiased: np.ndarray, reports: np.ndarray
              ) -> LinearBins | None:
    """The LinearBins of a hierarchical-histogram window from its least-squares leaf estimate
    (`hh_combination`) and reports per depth; None without reports at the bucket depth."""
    unbiased = np.asarray(unbiased, dtype=np.float64)
    reports = np.asarray(reports, dtype=np.int64)
    if len(reports) != protocol.h or reports[-1] <= 0 or not np.isfinite(unbiased).all():
        return None
    return LinearBins(unbiased, error_plug_in(unbiased), protocol.oracles,
                      tuple(int(n) for n in reports), depth_weights(protocol, reports))


def hh_statistic_linear(protocol: HierarchicalHistogram, statistic: np.ndarray
                        ) -> LinearBins | None:
    """`hh_linear` from the protocol's statistic."""
    reports, levels = protocol.level_estimates(statistic)
    if reports[-1] <= 0:
        return None
    return hh_linear(protocol, hh_combination(protocol, levels, reports), reports)


def tree_adjoint(leaf_weights: np.ndarray, weights: np.ndarray
                 ) -> tuple[list[np.ndarray], float]:
    """(a, c) with w·tree_projection(y, weights)[h] = Σ_ℓ a[ℓ]·y_ℓ + c for every y: the
    adjoint of the projection's two passes (a[0] is empty: the root is fixed at 1)."""
    adjoint, constant = tree_adjoints(np.asarray(leaf_weights, dtype=np.float64)[None, :],
                                      weights)
    return [level[0] for level in adjoint], float(constant[0])


def subtree_fractions(weights: np.ndarray) -> list[float]:
    """The own share of a node's subtree estimate at each depth 1..h − 1 of the projection's
    bottom-up pass (`admm.tree_projection`: subtree = f · own target + (1 − f) · children's
    sum, f = w_ℓ / (w_ℓ + precision below / 4)); 0 at the root and the leaves' entries."""
    h = len(weights) - 1
    fraction = [0.0] * (h + 1)
    precision = float(weights[h])
    for depth in range(h - 1, 0, -1):
        below = precision / BRANCHING
        own = float(weights[depth])
        fraction[depth] = own / (own + below)
        precision = own + below
    return fraction


def tree_adjoints(leaf_weights: np.ndarray, weights: np.ndarray
                  ) -> tuple[list[np.ndarray], np.ndarray]:
    """`tree_adjoint` of every row of `leaf_weights` (K × 4^h) at once: a[ℓ] is K × 4^ℓ
    (a[0] is K × 0), c has length K."""
    grad = np.asarray(leaf_weights, dtype=np.float64)
    rows = grad.shape[0]
    h = len(weights) - 1
    fraction = subtree_fractions(weights)
    subtree = [np.zeros((rows, BRANCHING ** depth)) for depth in range(h + 1)]
    for depth in range(h, 0, -1):  # levels[d] = subtree[d] + repeat(gap / 4), gap = up − Σ
        subtree[depth] += grad
        gap = child_sums(grad) / BRANCHING
        subtree[depth] -= np.repeat(gap, BRANCHING, axis=-1)
        grad = gap
    constant = grad.sum(axis=-1)
    adjoint = [np.zeros((rows, 0))] * (h + 1)
    for depth in range(1, h):  # subtree[d] = f y_d + (1 − f) Σ children
        adjoint[depth] = fraction[depth] * subtree[depth]
        subtree[depth + 1] += np.repeat((1.0 - fraction[depth]) * subtree[depth], BRANCHING,
                                        axis=-1)
    adjoint[h] = subtree[h]
    return adjoint, constant


def _tree_prefix_functionals(weights: np.ndarray, depth: int, node: np.ndarray
                             ) -> tuple[np.ndarray, ...]:
    """(Σ a, Σ a², node·a, node·a²) of a = depth `depth`'s coefficients (`tree_adjoint`) of
    every prefix of k = 0..B leaves, without forming a.

    For a prefix, the first pass's gradient at depth j is the fractional prefix
    clip(k / 4^{h−j} − i, 0, 1), whose sibling-centred part s_j is non-zero only on the 4
    siblings around the boundary; the second pass gives a = g Σ_{j≤depth} c_j R(s_j), R
    repeating s_j over its descendants at `depth`, c_j = Π_{m=j}^{depth−1} (1 − fraction_m),
    g = fraction_depth (1 at the leaves). So a is constant between at most 5·depth
    breakpoints, and each functional is a sum over those segments (with the prefix sums of
    `node` for the weighted ones)."""
    h = len(weights) - 1
    fraction = subtree_fractions(weights)
    leaves = BRANCHING ** h
    size = BRANCHING ** depth
    k = np.arange(leaves + 1, dtype=np.float64)[:, None]
    starts, values = [], []
    for j in range(1, depth + 1):
        position = k / BRANCHING ** (h - j)  # the boundary, in nodes of depth j
        group = np.minimum(np.floor(position / BRANCHING) * BRANCHING,
                           BRANCHING ** j - BRANCHING)
        grad = np.clip(position - (group + np.arange(BRANCHING)), 0.0, 1.0)  # K × 4
        centred = grad - grad.mean(axis=1, keepdims=True)
        carry = float(np.prod([1.0 - fraction[m] for m in range(j, depth)]))
        starts.append(group * BRANCHING ** (depth - j))  # K × 1, in nodes of `depth`
        values.append(carry * centred)
    gain = fraction[depth] if depth < h else 1.0
    block = [BRANCHING ** (depth - j) for j in range(1, depth + 1)]
    edges = np.concatenate([start + np.arange(BRANCHING + 1) * width
                            for start, width in zip(starts, block, strict=True)]
                           + [np.zeros_like(k), np.full_like(k, size)], axis=1)
    edges = np.sort(edges, axis=1)
    left, right = edges[:, :-1], edges[:, 1:]
    value = np.zeros(left.shape)
    for start, width, centred in zip(starts, block, values, strict=True):
        offset = left - start
        inside = (offset >= 0) & (offset < BRANCHING * width)
        slot = np.clip(offset // width, 0, BRANCHING - 1).astype(np.int64)
        value += np.where(inside, np.take_along_axis(centred, slot, axis=1), 0.0)
    value *= gain
    length = right - left
    cumulative = np.concatenate(([0.0], np.cumsum(node)))
    mass = cumulative[right.astype(np.int64)] - cumulative[left.astype(np.int64)]
    return ((value * length).sum(axis=1), (value * value * length).sum(axis=1),
            (value * mass).sum(axis=1), (value * value * mass).sum(axis=1))
