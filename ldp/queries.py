"""Queries on one window's estimates: point, set, range and top-k, each with a standard error.

A query answers from the window's post-processed distribution f' (consistency-norm-hyb.txt §3):

    point  f'_v                                  (one value, by label or index)
    set    sum_{v in S} f'_v                     (S a set of distinct values)
    range  sum_{lo <= v <= hi} f'_v              (the domain's own order: the registry's label
                                                  order, or 0..d-1 for a sized domain)
    top-k  the k largest f'_v, with their labels (each reported as a point answer)

Post-Pos is the one method applied to answers rather than to the distribution: its answer is
max(Base answer, 0) (§3.1).

Standard errors
---------------
Only Base and Norm give unbiased answers that are linear in the unbiased estimate f~, so only
they have an exact standard error; for every other method the answer is a non-linear,
biased function of f~ with no closed-form error, and the reported number is the exact standard
error of an unbiased answer to the same query, named by `std_error_kind`:

    method                                        std_error                          kind
    base                                          exact, of sum_S f~                 exact
    norm                                          exact, of sum_S (f~ + delta)       exact
    post-pos; base-pos (point queries only)       Base's; bounds the RMS error       upper-bound
    norm-mul, norm-sub, norm-hyb, mle-apx,        Norm's (they too sum to 1: the      norm-reference
      power-ns                                      full-domain answer has error 0)
    base-pos (sets), base-cut, norm-cut, power    Base's                             base-reference

With an estimator (the record's `estimator`, e.g. a Wiener filter of ldp_telemetry.ldp.wiener),
queries start from the estimator's output f^ = A f~ instead of f~ (re-run from f~: it is a
deterministic function of it; `--method` post-processes f^ again). A linear answer
sum_v w_v f^_v = sum_v (A w)_v f~_v (A symmetric), so the variances below hold with weights
A w: kind "fixed-gain" replaces "exact" (and "upper-bound"), the exact error of the filter at
its final gains, which leaves out its bias and the randomness of its gains (docs/wiener.md
measures both). For AMRP this is exact at fixed gains, while the record's per-value
`std_error` uses an O(d) approximation of the same quantity (within about 1%).

"upper-bound": the truth is >= 0, so |max(x, 0) - f| <= |x - f| and the RMS error of the
clipped answer is at most the standard error of the unbiased one. A top-k answer reports every
selected value with its point standard error; it does not account for the selection itself
(the largest estimates are more likely to be over-estimates).

The exact variance of a linear answer
-------------------------------------
Let the window hold n reports from users whose true values have distribution f, let report i
support the set S_i and let Y_i = sum_v w_v [v in S_i]. Reports are independent, so for any
weights w (a set: w = 1_S; Norm's set answer: w = 1_S - |S|/d, plus a constant)

    Var[sum_v w_v f~_v] = sum_x f_x Var[Y | x] / (n (p* - q*)^2),

with Var[Y | x] the variance of one report's Y given its true value x. This is eq. 2 for
w = e_v. It is *not* the sum of eq. 2 over S whenever the support indicators of one report are
correlated. Per protocol family, with W = sum w, Q = sum w^2 and m_x = p* w_x + q* (W - w_x) the
mean of Y given x:

* GRR: a report supports exactly one value, so Y = w_y and (the multinomial covariances
  Cov(c_u, c_v) = -n_x P[y=u|x] P[y=v|x] summed over users)
      Var[Y | x] = p* w_x^2 + q* (Q - w_x^2) - m_x^2.
  For a set of k values: Var = (f_S P_in (1 - P_in) + (1 - f_S) k q* (1 - k q*)) / (n (p*-q*)^2),
  P_in = p* + (k - 1) q*; the whole domain has variance 0 (the estimates sum to 1).
* Unary encoding (OUE, SUE, RUE) and local hashing (OLH, BLH, RLH): the support indicators of
  distinct values are independent, so
      Var[Y | x] = p*(1 - p*) w_x^2 + q*(1 - q*) (Q - w_x^2),
  and a set's variance is exactly the sum of eq. 2 over its values. For unary encoding every
  bit is perturbed independently. For local hashing (q* = 1/g) x is supported when the GRR_g
  coin keeps H(x), and v != x when H(v) = y; the indicators of two values u, v != x are
  uncorrelated when the buckets of u, v and x are independent (3-wise independence). The
  keyed hash of ldp_telemetry.ldp.hashing gives that in practice: it hashes a pseudo-random 64-bit key per
  value, so the buckets of a few values, consecutive ones included, behave as independent.
* Fixed-size subsets (SS, RWS): the support is x plus k - 1 values drawn uniformly without
  replacement from the N = d - 1 others with probability p*, else k such values. For RWS the
  support (S - u + x) mod d, u uniform in the wheel S or uniform outside it, is such a subset
  because the seeded wheel is a uniform k-subset: S - u is then uniform over the k-subsets
  that contain 0, or over those that do not. With mu = (W - w_x)/N and
  s^2 = (Q - w_x^2)/N - mu^2 the mean and population variance of the others' weights, a sum
  of m of them has variance
  V_m = m (N - m) / (N - 1) s^2 (0 when N = 1), and by the law of total variance
      Var[Y | x] = p* V_{k-1} + (1 - p*) V_k + p*(1 - p*) (w_x - mu)^2.
  A report supports exactly k values, so the whole domain has variance 0.
* HR (K = smallest power of two >= d, w padded with zeros to length K): with
  s_r(v) = (-1)^popcount(r & v), the report <r, b> supports v with indicator
  (1 + (-1)^b s_r(v)) / 2, and (-1)^b = sigma s_r(x), sigma = +1 with probability
  p* = e^eps/(e^eps + 1), else -1. So Y = (W + sigma s_r(x) h_r) / 2 with h_r = sum_v s_r(v) w_v
  the Walsh-Hadamard transform of w and r uniform on [1, K). Parseval (sum_r h_r^2 = K Q) and
  the inverse transform (sum_r s_r(x) h_r = K w_x), both over r in [0, K) with h_0 = W, give
      Var[Y | x] = [ (K Q - W^2)/(K - 1) - (2p* - 1)^2 ((K w_x - W)/(K - 1))^2 ] / 4.
  When d = K a report supports exactly K/2 values and the whole domain has variance 0.

For every protocol Var[Y | x] depends on x only through w_x.

These variances assume the true frequencies f; the reported standard errors plug in the
Norm-Sub projection of f~ (non-negative, summing to 1: the constrained least-squares estimate of
f), as the window records do, so a point query's standard error is the record's `std_error`.
The projection does not move when a constant is added to f~, so Norm's answers use the same
plug-in, and a set and its complement get the same error under a sum-to-one method. The
variance describes the perturbation of a fixed population of n users; if the users are instead
thought of as sampled from a larger population, add f_S (1 - f_S) / n.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from ldp_telemetry.ldp.estimation import SupportNoise
from ldp_telemetry.ldp.estimators import EstimatorSpec
from ldp_telemetry.ldp.finalize import error_plug_in
from ldp_telemetry.ldp.postprocess import PostprocessSpec, post_pos
from ldp_telemetry.ldp.protocols import FrequencyOracle, make_protocol
from ldp_telemetry.ldp.protocols.grr import GRR
from ldp_telemetry.ldp.protocols.hr import HR
from ldp_telemetry.ldp.protocols.olh import LocalHashing
from ldp_telemetry.ldp.protocols.oue import UnaryEncoding
from ldp_telemetry.ldp.protocols.ss import FixedSizeSubset

#: Methods whose output sums to 1, for which Norm's standard error is the reference.
_SUM_TO_ONE = frozenset({"norm-mul", "norm-sub", "norm-hyb", "mle-apx", "power-ns"})

STD_ERROR_KINDS = {
    "exact": "the exact standard error of the (unbiased) answer",
    "fixed-gain": "the exact standard error of the estimator's linear answer at its final "
                  "gains (without the filter's bias or the randomness of its gains)",
    "upper-bound": "the answer clips an unbiased answer at 0: its RMS error is at most this",
    "norm-reference": "no closed form: the exact standard error of Norm's answer to the query",
    "base-reference": "no closed form: the exact standard error of Base's answer to the query",
}


# ---------------------------------------------------------------------------------------------
# Variance of a linear function of the unbiased estimate


def report_variance(protocol: FrequencyOracle, weights: np.ndarray) -> np.ndarray:
    """Var[Y | x] for every true value x, Y = sum_v w_v [report supports v] (module docstring).

    Closed form per protocol family: GRR, unary encoding, local hashing, Hadamard response and
    fixed-size subsets; ValueError for any other protocol.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (protocol.d,):
        raise ValueError(f"weights must have length d = {protocol.d}, got shape {w.shape}")
    p, q = protocol.p_star, protocol.q_star
    if isinstance(protocol, GRR):
        w = w - w.mean()  # one value supported per report: Y shifts by the constant
        mean = p * w + q * (w.sum() - w)
        return p * w ** 2 + q * (np.dot(w, w) - w ** 2) - mean ** 2
    if isinstance(protocol, (UnaryEncoding, LocalHashing)):
        return p * (1 - p) * w ** 2 + q * (1 - q) * (np.dot(w, w) - w ** 2)
    if isinstance(protocol, HR):
        K, total, squares = protocol.K, w.sum(), np.dot(w, w)
        bias = (2 * p - 1) * (K * w - total) / (K - 1)
        return ((K * squares - total ** 2) / (K - 1) - bias ** 2) / 4
    if isinstance(protocol, FixedSizeSubset):
        return _subset_report_variance(protocol.k, p, w - w.mean())
    raise ValueError(f"no support-correlation model for protocol {protocol.name!r}; known "
                     "families: GRR, unary encoding, local hashing, HR, fixed-size subsets")


def _subset_report_variance(k: int, p: float, w: np.ndarray) -> np.ndarray:
    """Var[Y | x] when the support is x plus k - 1 uniform others (probability p), else k
    uniform others."""
    others = w.size - 1
    mean = (w.sum() - w) / others  # of the others' weights
    spread = np.maximum((np.dot(w, w) - w ** 2) / others - mean ** 2, 0.0)

    def draw_variance(m: int) -> np.ndarray:  # sum of m of the others, without replacement
        return m * (others - m) / (others - 1) * spread if others > 1 else np.zeros_like(w)

    return (p * draw_variance(k - 1) + (1 - p) * draw_variance(k)
            + p * (1 - p) * (w - mean) ** 2)


def linear_variance(protocol: FrequencyOracle, n: int, weights: np.ndarray,
                    frequencies: np.ndarray) -> float:
    """Var[sum_v w_v f~_v] for n reports from users with true distribution `frequencies`.

    sum_x f_x Var[Y | x] / (n (p* - q*)^2) (module docstring); inf when n = 0.
    """
    f = np.asarray(frequencies, dtype=np.float64)
    if n == 0:
        return math.inf
    per_report = float(np.dot(f, report_variance(protocol, weights)))
    return max(per_report, 0.0) / (n * (protocol.p_star - protocol.q_star) ** 2)


def set_indicator(d: int, indices: Iterable[int]) -> np.ndarray:
    indicator = np.zeros(d)
    indicator[list(indices)] = 1.0
    return indicator


# ---------------------------------------------------------------------------------------------
# One window and its answers


@dataclass(frozen=True)
class Answer:
    """The answer to one query on one window."""

    query: str  # "point", "set", "range" or "top-k"
    indices: tuple[int, ...]
    labels: tuple[str, ...]
    value: float
    std_error: float
    std_error_kind: str
    unbiased_value: float  # Base's answer to the same query
    method: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"query": self.query, "indices": list(self.indices), "labels": list(self.labels),
                "value": self.value, "std_error": self.std_error,
                "std_error_kind": self.std_error_kind, "unbiased_value": self.unbiased_value,
                "method": self.method, "params": dict(self.params)}


@dataclass(frozen=True)
class WindowEstimate:
    """One window's arrays and noise model, post-processed with `spec`."""

    metric: str
    window_start: str
    window_end: str
    protocol: FrequencyOracle
    n: int
    labels: tuple[str, ...]
    unbiased: np.ndarray
    estimate: np.ndarray
    spec: PostprocessSpec
    estimator: EstimatorSpec = EstimatorSpec("unbiased")

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> WindowEstimate:
        """From a window-estimate record (ldp_telemetry.transforms.finalize.window_estimate_record)."""
        labels = tuple(record["labels"])
        protocol = make_protocol(record["protocol"], float(record["epsilon"]), len(labels))
        post = record["postprocess"]
        spec = PostprocessSpec(post["method"], tuple((post.get("params") or {}).items()))
        chosen = record.get("estimator") or {"method": "unbiased"}
        estimator = EstimatorSpec(chosen["method"], tuple((chosen.get("params") or {}).items()))
        return cls(record["metric"], record["window_start"], record["window_end"], protocol,
                   int(record["n"]), labels,
                   np.asarray(record["unbiased_estimate"], dtype=np.float64),
                   np.asarray(record["estimate"], dtype=np.float64), spec, estimator)

    @classmethod
    def from_unbiased(cls, protocol: FrequencyOracle, n: int, unbiased: np.ndarray,
                      spec: PostprocessSpec | str | Mapping | None = None,
                      labels: Sequence[str] | None = None, metric: str = "",
                      window_start: str = "", window_end: str = "") -> WindowEstimate:
        """From an unbiased estimate; the post-processed one is computed with `spec`."""
        unbiased = np.asarray(unbiased, dtype=np.float64)
        spec = PostprocessSpec.parse(spec)
        labels = tuple(labels) if labels is not None else tuple(map(str, range(protocol.d)))
        return cls(metric, window_start, window_end, protocol, int(n), labels, unbiased,
                   spec.apply(unbiased, protocol.noise(n)), spec)

    def with_method(self, method: str | Mapping | PostprocessSpec, **params: Any
                    ) -> WindowEstimate:
        """The same window post-processed again from its estimator's output (the unbiased
        estimate unless the record names another estimator, which is re-run: it is a
        deterministic function of the unbiased estimate)."""
        spec = (PostprocessSpec(method, tuple(params.items())) if isinstance(method, str)
                else PostprocessSpec.parse(method))
        return replace(self, spec=spec, estimate=spec.apply(self.filtered, self.noise))

    def __post_init__(self) -> None:
        if not (len(self.labels) == self.unbiased.size == self.estimate.size == self.protocol.d):
            raise ValueError("labels, unbiased_estimate and estimate must all have length d")
        if self.n <= 0:
            raise ValueError(f"window of {self.metric!r} holds no reports: nothing to query")

    @property
    def noise(self) -> SupportNoise:
        return self.protocol.noise(self.n)

    @property
    def d(self) -> int:
        return self.protocol.d

    @cached_property
    def _fit(self):
        """The Wiener-family fit of the window's estimator, or None for the unbiased estimate."""
        if self.estimator.method == "unbiased":
            return None
        from ldp_telemetry.ldp import wiener
        return wiener.fit(self.estimator.method, self.unbiased, self.noise, self.protocol,
                          **dict(self.estimator.params))

    @property
    def filtered(self) -> np.ndarray:
        """The estimator's output before post-processing (f~ itself for "unbiased")."""
        return self.unbiased if self._fit is None else self._fit.estimate

    def _weights(self, weights: np.ndarray) -> np.ndarray:
        """Weights on f~ of the linear answer sum_v weights_v (A f~)_v: A^T w = A w (A is
        symmetric), or w itself without an estimator."""
        return weights if self._fit is None else self._fit.filter(weights)

    @cached_property
    def plug_in(self) -> np.ndarray:
        """The distribution standard errors are evaluated at: Norm-Sub's projection of f~."""
        return error_plug_in(self.unbiased)

    @cached_property
    def _label_index(self) -> dict[str, int]:
        return {label: i for i, label in enumerate(self.labels)}

    def index_of(self, value: int | str) -> int:
        """A value given by label (str) or index (int); a str that is no label but an integer
        in [0, d) is taken as an index."""
        if isinstance(value, str):
            if value in self._label_index:
                return self._label_index[value]
            try:
                value = int(value)
            except ValueError:
                raise ValueError(f"{value!r} is not a label of metric {self.metric!r} "
                                 f"(labels: {_preview(self.labels)})") from None
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"a value is a label or an index, got {value!r}")
        if not 0 <= value < self.d:
            raise ValueError(f"index {value} is outside the domain [0, {self.d})")
        return int(value)

    # -- answers ------------------------------------------------------------------------------
    def _answer(self, query: str, indices: Sequence[int]) -> Answer:
        method, params = self.spec.method, dict(self.spec.params)
        d = self.d
        indicator = set_indicator(d, indices)
        unbiased_value = float(self.unbiased[list(indices)].sum())
        value = float(self.estimate[list(indices)].sum())
        exact = "exact" if self._fit is None else "fixed-gain"
        base_se = math.sqrt(linear_variance(self.protocol, self.n, self._weights(indicator),
                                            self.plug_in))
        if method == "post-pos":
            linear_value = float(self.filtered[list(indices)].sum())
            kind = "upper-bound" if self._fit is None else exact
            value, se = post_pos(linear_value), base_se
        elif method == "base":
            kind, se = exact, base_se
        elif method == "base-pos" and len(indices) == 1:
            kind, se = "upper-bound" if self._fit is None else exact, base_se
        elif method == "norm" or method in _SUM_TO_ONE:
            weights = self._weights(indicator - len(indices) / d)
            se = math.sqrt(linear_variance(self.protocol, self.n, weights, self.plug_in))
            kind = exact if method == "norm" else "norm-reference"
        else:
            kind, se = "base-reference", base_se
        return Answer(query, tuple(int(i) for i in indices),
                      tuple(self.labels[i] for i in indices), value, se, kind, unbiased_value,
                      method, params)

    def point(self, value: int | str) -> Answer:
        """f'_v for one value (label or index)."""
        return self._answer("point", [self.index_of(value)])

    def set_sum(self, values: Iterable[int | str]) -> Answer:
        """sum_{v in S} f'_v for a set of distinct values (labels or indices)."""
        indices = [self.index_of(v) for v in values]
        if not indices:
            raise ValueError("a set query needs at least one value")
        if len(set(indices)) != len(indices):
            repeated = next(self.labels[i] for i in indices if indices.count(i) > 1)
            raise ValueError(f"value {repeated!r} appears more than once in the set")
        return self._answer("set", indices)

    def range_sum(self, lo: int | str, hi: int | str) -> Answer:
        """sum of f'_v over lo..hi inclusive, in the domain's order (labels or indices)."""
        first, last = self.index_of(lo), self.index_of(hi)
        if first > last:
            raise ValueError(f"empty range: {lo!r} (index {first}) comes after {hi!r} "
                             f"(index {last})")
        return self._answer("range", list(range(first, last + 1)))

    def top_k(self, k: int) -> list[Answer]:
        """The k largest post-processed values (ties in domain order), as point answers."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        order = np.argsort(-self.estimate, kind="stable")[: int(k)]
        return [replace(self._answer("point", [int(i)]), query="top-k") for i in order]


def _preview(labels: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(labels[:limit])
    return shown + (f", ... ({len(labels) - limit} more)" if len(labels) > limit else "")
