"""The post-processing chosen per window by replay: `postprocess: "auto"`, "auto-top", "auto-sets".

No post-processing method is best everywhere ([Wang20] journal §4-5: the best one depends on
the distribution, n, ε and the query). The window itself says which setting it is in:

1. fit a synthetic distribution to the window's estimate: π̂ = Norm-Sub(f~), the constrained
   least-squares distribution ([Wang20] journal §3.5);
2. replay the channel R times: a synthetic window of the same n reports has true counts
   (n_v) ~ Multinomial(n, π̂) and support counts c_v ~ Bin(n_v, p*) + Bin(n − n_v, q*) — the
   exact per-value distribution of a pure protocol's support count (every report supports
   its own value with probability p*, any other with q*); the counts of different values are
   drawn independently, exact for unary encodings (OUE, SUE), whose bits are, and leaving out
   the weak dependence of the others;
3. run every candidate on each replayed unbiased estimate and keep the one with the lowest
   mean squared error against the replayed truth n_v / n for the query type:

       "auto"       the full distribution: (1/d) Σ_v (f'_v − t_v)²
       "auto-top"   top-k: (1/k) Σ over the k values of highest t of (f'_v − t_v)²
       "auto-sets"  set sums: mean over `sets` random sets of ⌈fraction · d⌉ values of
                    (Σ_S f' − Σ_S t)², fresh sets per replicate

Base is a candidate and comes first, so a tie keeps it. The draws are seeded with
(seed, n, d), so a window's choice is reproducible (`ldp query` takes the record's own
`chosen`, which an earlier release's replay may have chosen differently). Cost per window:
R · |CANDIDATES| runs of O(d log d) methods (IBU: a root search of O(d) steps); Power is left
out (O(d · min(σn, 2¹⁶)) per run).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldp_telemetry.ldp.base.registration import Parameter
from ldp_telemetry.ldp.base.validation import is_finite_number, is_number
from ldp_telemetry.ldp.estimation.postprocess import (METHODS, PostprocessMethod,
                                                      PostprocessSpec, project_to_simplex)
from ldp_telemetry.ldp.protocols.noise import SupportNoise, unbiased_estimate

#: The methods a replay compares, Base first (a tie keeps Base).
CANDIDATES: tuple[str, ...] = ("base", "base-pos", "base-cut", "norm", "norm-mul", "norm-sub",
                               "norm-cut", "norm-hyb", "mle-apx", "ibu")
#: The query type of each auto method.
AUTO_METHODS = {"auto": "full", "auto-top": "top", "auto-sets": "sets"}
MAX_REPLICATES = 100
MAX_SETS = 1000


@dataclass(frozen=True)
class Choice:
    """The method a replay chose and the mean squared error each candidate had in it."""

    method: str
    query: str
    expected_mse: dict[str, float] = field(default_factory=dict)


def _collision_error(truth: np.ndarray, noise: SupportNoise, rng: np.random.Generator
                     ) -> np.ndarray | float:
    """A draw of the estimate's error beyond eq. 2 at the true frequencies `truth`: normal, of
    the variance `noise` adds to eq. 2 (a pool's collision term); 0, drawing nothing, for a
    pure protocol, so its replays are those of a noise without the term."""
    extra = noise.variance(truth) - SupportNoise.variance(noise, truth)
    if not np.any(extra > 0.0):
        return 0.0
    return np.sqrt(np.clip(extra, 0.0, None)) * rng.standard_normal(truth.size)


def _replay_errors(estimate: np.ndarray, noise: SupportNoise, query: str, replicates: int,
                   seed: int, k: int, fraction: float, sets: int) -> dict[str, float]:
    """Mean squared error of every candidate over `replicates` replayed windows."""
    d, n = estimate.size, int(noise.n)
    fitted = project_to_simplex(estimate, 1.0)
    rng = np.random.default_rng([int(seed), n, d, 31])
    size = max(1, math.ceil(fraction * d))
    totals = dict.fromkeys(CANDIDATES, 0.0)
    for _ in range(int(replicates)):
        true_counts = rng.multinomial(n, fitted)
        support = (rng.binomial(true_counts, noise.p_star)
                   + rng.binomial(n - true_counts, noise.q_star))
        truth = true_counts / n
        replayed = unbiased_estimate(support, noise) + _collision_error(truth, noise, rng)
        if query == "top":
            chosen = np.argsort(-truth, kind="stable")[:k]
        elif query == "sets":
            keys = rng.random((sets, d))
            members = np.argpartition(keys, size - 1, axis=1)[:, :size]
            matrix = np.zeros((sets, d))
            np.put_along_axis(matrix, members, 1.0, axis=1)
        for method in CANDIDATES:
            output = METHODS[method].run(replayed, noise)
            if query == "full":
                error = float(np.mean((output - truth) ** 2))
            elif query == "top":
                error = float(np.mean((output[chosen] - truth[chosen]) ** 2))
            else:
                error = float(np.mean((matrix @ (output - truth)) ** 2))
            totals[method] += error / replicates
    return totals


def choose(estimate: np.ndarray, noise: SupportNoise, query: str = "full", *,
           replicates: int = 10, seed: int = 0, k: int = 10, fraction: float = 0.1,
           sets: int = 20) -> Choice:
    """The candidate with the lowest replayed error for `query` ("full", "top", "sets") on
    the window whose unbiased estimate is `estimate` (module docstring). A window without
    reports (n = 0) or a domain of one value keeps Base."""
    estimate = np.asarray(estimate, dtype=np.float64)
    if noise.n == 0 or estimate.size < 2 or not np.isfinite(estimate).all():
        return Choice("base", query)
    errors = _replay_errors(estimate, noise, query, replicates, seed, min(k, estimate.size),
                            fraction, sets)
    best = min(CANDIDATES, key=lambda m: (errors[m], CANDIDATES.index(m)))
    return Choice(best, query, errors)


def _parameters(spec: PostprocessSpec) -> dict:
    params = dict(spec.params)
    return {"replicates": int(params["replicates"]), "seed": int(params["seed"]),
            "k": int(params.get("k", 10)), "fraction": float(params.get("fraction", 0.1)),
            "sets": int(params.get("sets", 20))}


def postprocess_with_choice(spec: PostprocessSpec, estimate: np.ndarray, noise: SupportNoise
                            ) -> tuple[np.ndarray, Choice | None]:
    """(post-processed estimate, the replay's Choice or None): `spec` applied, an auto method
    by choosing first and running the chosen candidate."""
    if spec.method not in AUTO_METHODS:
        return spec.apply(estimate, noise), None
    choice = choose(estimate, noise, AUTO_METHODS[spec.method], **_parameters(spec))
    return METHODS[choice.method].run(np.asarray(estimate, dtype=np.float64), noise), choice


def _apply_choice(estimate: np.ndarray, noise: SupportNoise, query: str, **params: Any
                  ) -> np.ndarray:
    estimate = np.asarray(estimate, dtype=np.float64)
    return METHODS[choose(estimate, noise, query, **params).method].run(estimate, noise)


def auto(estimate: np.ndarray, noise: SupportNoise, *, replicates: int = 10, seed: int = 0
         ) -> np.ndarray:
    """The method a replay finds best for the full distribution, applied (`choose`)."""
    return _apply_choice(estimate, noise, "full", replicates=replicates, seed=seed)


def auto_top(estimate: np.ndarray, noise: SupportNoise, *, replicates: int = 10,
             seed: int = 0, k: int = 10) -> np.ndarray:
    """The method a replay finds best for the top-k values, applied (`choose`)."""
    return _apply_choice(estimate, noise, "top", replicates=replicates, seed=seed, k=k)


def auto_sets(estimate: np.ndarray, noise: SupportNoise, *, replicates: int = 10,
              seed: int = 0, fraction: float = 0.1, sets: int = 20) -> np.ndarray:
    """The method a replay finds best for set sums, applied (`choose`)."""
    return _apply_choice(estimate, noise, "sets", replicates=replicates, seed=seed,
                         fraction=fraction, sets=sets)


def _whole(low: int, high: int) -> Callable[[object], bool]:
    """The check of an integer parameter in [low, high]; a whole float (as a record's params
    map of doubles gives it back) passes too."""
    def valid(value: object) -> bool:
        return (is_number(value) and not isinstance(value, bool) and float(value).is_integer()
                and low <= value <= high)
    return valid


_REPLAY = {"replicates": Parameter(10, _whole(1, MAX_REPLICATES),
                                   f"an integer in [1, {MAX_REPLICATES}]", int),
           "seed": Parameter(0, _whole(0, 2 ** 53), "an integer in [0, 2^53]", int)}
METHODS.register(PostprocessMethod("auto", auto, dict(_REPLAY)))
METHODS.register(PostprocessMethod("auto-top", auto_top, {
    **_REPLAY, "k": Parameter(10, _whole(1, 2 ** 31), "an integer >= 1", int)}))
METHODS.register(PostprocessMethod("auto-sets", auto_sets, {
    **_REPLAY,
    "fraction": Parameter(0.1, lambda v: is_finite_number(v) and 0 < v <= 1,
                          "a number in (0, 1]", float),
    "sets": Parameter(20, _whole(1, MAX_SETS), f"an integer in [1, {MAX_SETS}]", int)}))
