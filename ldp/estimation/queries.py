"""Queries on one window's estimates: point, set, range and top-k, each with a standard error.

A query answers from the window's post-processed distribution f' ([Wang20] journal §3):

    point  f'_v                                  (one value, by label or index)
    set    sum_{v in S} f'_v                     (S a set of distinct values)
    range  sum_{lo <= v <= hi} f'_v              (the domain's own order: the registry's label
                                                  order, or 0..d-1 for a sized domain)
    top-k  the k largest f'_v, with their labels (each reported as a point answer)

Post-Pos is the one method applied to answers rather than to the distribution: its answer is
max(Base answer, 0) ([Wang20] journal §3.1).

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
    norm-mul, norm-sub, norm-hyb, mle-apx, ibu,   Norm's (they too sum to 1: the      norm-reference
      power-ns                                      full-domain answer has error 0)
    base-pos (sets), base-cut, norm-cut, power    Base's                             base-reference

With an estimator (the record's `estimator`, e.g. a Wiener filter of
ldp_telemetry.ldp.estimation.wiener), queries start from the estimator's output f^ = A f~ instead
of f~ (re-run from f~: it is a deterministic function of it; `--method` post-processes f^ again). A
linear answer sum_v w_v f^_v = sum_v (A w)_v f~_v (A symmetric), so the variances below hold with
weights A w: kind "fixed-gain" replaces "exact" (and "upper-bound"), the exact error of the filter
at its final gains, which leaves out its bias and the randomness of its gains (docs/wiener.md
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

with Var[Y | x] the variance of one report's Y given its true value x. This is [Wang20] journal eq.
2 for w = e_v. It is *not* the sum of eq. 2 over S whenever the support indicators of one report are
correlated. Each protocol class gives Var[Y | x] in closed form, with its derivation, as
`report_variance(w)` (ldp_telemetry.ldp.protocols): GRR supports exactly one value (multinomial
covariances); unary encoding and local hashing have independent support indicators, so a set's
variance is exactly the sum of eq. 2 over its values; fixed-size subsets (SS, RWS) draw the
other supported values without replacement; HR's follows from Parseval's identity. For every
protocol Var[Y | x] depends on x only through w_x, and it is 0 for the whole domain when every
report supports the same number of values (GRR, SS, RWS, HR with d = K).

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
from typing import Any, Protocol

import numpy as np

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.base.validation import is_int, is_positive_int
from ldp_telemetry.ldp.estimation.estimators import EstimatorSpec
from ldp_telemetry.ldp.estimation.frequency_bands import (exact_bands, few_supports_reason,
                                                          pool_corrected_bands,
                                                          pool_corrected_sum, pool_debiased,
                                                          pool_sum_reason, pooled_value_band,
                                                          rank_conditional_applies,
                                                          ratio_free_channel,
                                                          score_bands, top_k_bands,
                                                          top_k_conservative_reason,
                                                          top_k_declared, top_k_filtered_bands,
                                                          top_k_oracle,
                                                          top_k_rank_conditional_bands,
                                                          top_k_source, TOP_K_RANK_REASON,
                                                          TOP_K_RANKS,
                                                          WIENER_TOP_K_REASONS,
                                                          wiener_top_k_declared)
from ldp_telemetry.ldp.estimation.postprocess import (METHODS, PostprocessSpec, error_plug_in,
                                                      post_pos)
from ldp_telemetry.ldp.estimation.replay import (AUTO_METHODS, CANDIDATES,
                                                 postprocess_with_choice)
from ldp_telemetry.ldp.estimation.uncertainty import (BAND_BIAS_CORRECTED, BAND_EXACT,
                                                      BAND_NONE, BAND_POOL_CORRECTED,
                                                      BAND_RANK_CONDITIONAL, WIENER_NO_BAND)
from ldp_telemetry.ldp.protocols import FrequencyOracle, is_pooled, make_protocol
from ldp_telemetry.ldp.protocols.hash_pool import HashPool, sketch_arguments
from ldp_telemetry.ldp.protocols.memoized import G_RULES, LOCAL_HASHING, make_memoized_protocol
from ldp_telemetry.ldp.protocols.noise import SupportNoise

STD_ERROR_KINDS = {
    "exact": "the exact standard error of the unbiased answer its band is centred on (Norm's "
             "own answer for norm, the unbiased estimate's answer for every other method)",
    "fixed-gain": "the exact standard error of the estimator's linear answer at its final "
                  "gains (without the filter's bias or the randomness of its gains)",
}


# ---------------------------------------------------------------------------------------------
# Variance of a linear function of the unbiased estimate


def report_variance(protocol: FrequencyOracle, weights: np.ndarray) -> np.ndarray:
    """Var[Y | x] for every true value x, Y = sum_v w_v [report supports v] (module docstring).

    The protocol's own closed form (FrequencyOracle.report_variance); ValueError for an object
    that is not a frequency oracle.
    """
    if not isinstance(protocol, FrequencyOracle):
        raise ValueError(f"no support-correlation model for protocol "
                         f"{getattr(protocol, 'name', protocol)!r}: not a FrequencyOracle")
    return protocol.report_variance(weights)


def linear_variance(protocol: FrequencyOracle, n: int, weights: np.ndarray,
                    frequencies: np.ndarray) -> float:
    """Var[sum_v w_v f~_v] for n reports from users with true distribution `frequencies`.

    sum_x f_x Var[Y | x] / (n (p* - q*)^2) (module docstring); inf when n = 0.
    """
    return protocol.linear_variance(n, weights, frequencies)


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
    #: the answer's 95% band and how it was made (exact-variance, pool-corrected or none,
    #: `band_reason` then says why); ldp_telemetry.ldp.estimation.frequency_bands
    band_method: str = BAND_NONE
    lower95: float | None = None
    upper95: float | None = None
    band_reason: str | None = None
    #: a band that holds the truth in at least 95% of windows and was measured above that, not
    #: a 95% band, given beside an answer that has none (a top-k answer: band_method none,
    #: `band_reason` naming its measured coverage) and how it was made
    #: (rank-conditional-union or bias-corrected-bootstrap); None for every other answer
    conservative_lower: float | None = None
    conservative_upper: float | None = None
    conservative_method: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"query": self.query, "indices": list(self.indices), "labels": list(self.labels),
                "value": self.value, "std_error": self.std_error,
                "std_error_kind": self.std_error_kind, "unbiased_value": self.unbiased_value,
                "method": self.method, "params": dict(self.params),
                "band_method": self.band_method, "lower95": self.lower95,
                "upper95": self.upper95, "band_reason": self.band_reason,
                "conservative_lower": self.conservative_lower,
                "conservative_upper": self.conservative_upper,
                "conservative_method": self.conservative_method}


class FrequencyRecord(Protocol):
    """What a query reads of a frequency oracle's window-estimate record: the attributes of
    ldp_telemetry.output.estimate.EstimateRecord (which `ldp` cannot import: it is a layer
    above)."""

    metric: str
    window_start: str
    window_end: str
    n: int
    protocol: str
    epsilon: float
    labels: Sequence[str]
    postprocess: Mapping[str, Any] | None
    estimator: Mapping[str, Any] | None
    unbiased_estimate: np.ndarray | None
    estimate: np.ndarray


def record_protocol(record: FrequencyRecord, d: int) -> FrequencyOracle:
    """The oracle a frequency record over d values was made with: its `protocol` at its ε, with
    a pooled-hash oracle's k and m (`parameters`; the defaults for a record written before
    the field) and a memoized record's two stages (`privacy.lifetime_epsilon`). A two-stage
    record names its one-stage protocol, whose p*, q* may differ from the composed ones it
    states (memoized RUE, LOLOHA's g); the stages are the ones whose p*, q* are the record's
    (for local hashing, the g rule that gives them). ConfigError when none does."""
    sketch = getattr(record, "parameters", None) or {}
    privacy = getattr(record, "privacy", None) or {}
    epsilon = float(record.epsilon)
    if not privacy.get("memoized") or privacy.get("lifetime_epsilon") is None:
        return make_protocol(record.protocol, epsilon, d, **sketch_arguments(sketch))
    lifetime = float(privacy["lifetime_epsilon"])
    rules = (None, *G_RULES) if record.protocol in LOCAL_HASHING else (None,)
    candidates = [make_memoized_protocol(record.protocol, epsilon, d, lifetime, rule)
                  for rule in rules]
    p_star, q_star = getattr(record, "p_star", None), getattr(record, "q_star", None)
    if p_star is None or q_star is None:  # written before p* and q* were recorded: default g
        return candidates[0]
    for protocol in candidates:
        if (math.isclose(protocol.p_star, p_star, rel_tol=1e-9)
                and math.isclose(protocol.q_star, q_star, rel_tol=1e-9)):
            return protocol
    raise ConfigError(f"the record of metric {record.metric!r} states p* = {p_star:g}, "
                      f"q* = {q_star:g}, which no two-stage {record.protocol!r} at ε1 = "
                      f"{epsilon:g}, ε∞ = {lifetime:g} has", "p_star")


@dataclass(frozen=True)
class WindowEstimate:
    """One window's arrays and noise model, post-processed with `spec`; `chosen`: the method a
    replay-chosen `spec` ("auto", ...) ran, as the record states it (None: replay the window
    again to find it)."""

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
    chosen: str | None = None
    #: why the window's answers have no band whatever the query (a pooled-hash oracle's Wiener
    #: record written before records kept `unbiased_std_error`: WIENER_NO_BAND), or None
    band_reason: str | None = None

    @classmethod
    def from_record(cls, record: FrequencyRecord) -> WindowEstimate:
        """From a frequency oracle's window-estimate record (the attributes of
        ldp_telemetry.output.estimate.EstimateRecord, `FrequencyRecord`)."""
        labels = tuple(record.labels)
        protocol = record_protocol(record, len(labels))
        post = record.postprocess
        if post is None:  # every writer writes one; TypeError, as subscripting None raised
            raise TypeError(f"the record of metric {record.metric!r} has no postprocess section")
        spec = PostprocessSpec(post["method"], tuple((post.get("params") or {}).items()))
        named = record.estimator or {"method": "unbiased"}
        estimator = EstimatorSpec(named["method"], tuple((named.get("params") or {}).items()))
        # the method the record's replay chose made its estimate: a replay run by another
        # release may choose another (the pooled-hash oracles' gained their collision error)
        chosen = post.get("chosen") if spec.method in AUTO_METHODS else None
        # a pooled-hash Wiener record read as it says: one written before it kept f~'s
        # standard error has no bands (the readers of output.bands show none either)
        old_pooled_filter = (is_pooled(protocol.name) and estimator.method != "unbiased"
                             and getattr(record, "unbiased_std_error", None) is None)
        return cls(record.metric, record.window_start, record.window_end, protocol,
                   int(record.n), labels,
                   np.asarray(record.unbiased_estimate, dtype=np.float64),
                   np.asarray(record.estimate, dtype=np.float64), spec, estimator,
                   chosen if chosen in CANDIDATES else None,
                   WIENER_NO_BAND if old_pooled_filter else None)

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
                   spec.apply(unbiased, protocol.noise(n).for_window(unbiased)),
                   spec)

    def with_method(self, method: str | Mapping | PostprocessSpec, **params: Any
                    ) -> WindowEstimate:
        """The same window post-processed again from its estimator's output (the unbiased
        estimate unless the record names another estimator, which is re-run: it is a
        deterministic function of the unbiased estimate)."""
        spec = (PostprocessSpec(method, tuple(params.items())) if isinstance(method, str)
                else PostprocessSpec.parse(method))
        return replace(self, spec=spec, estimate=spec.apply(self.filtered, self.noise),
                       chosen=None)

    def __post_init__(self) -> None:
        if not (len(self.labels) == self.unbiased.size == self.estimate.size == self.protocol.d):
            raise ValueError("labels, unbiased_estimate and estimate must all have length d")
        if self.n <= 0:
            raise ConfigError(f"window of {self.metric!r} holds no reports: nothing to query",
                              "window")

    @property
    def noise(self) -> SupportNoise:
        """The window's noise model (a pool's collision term included, `for_window`)."""
        return self.protocol.noise(self.n).for_window(self.unbiased)

    @property
    def d(self) -> int:
        return self.protocol.d

    @cached_property
    def _fit(self) -> Any:  # a wiener.Fit, or None (wiener is imported on first use)
        """The Wiener-family fit of the window's estimator, or None for the unbiased estimate."""
        if self.estimator.method == "unbiased":
            return None
        from ldp_telemetry.ldp.estimation import wiener
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
                raise ConfigError(f"{value!r} is not a label of metric {self.metric!r} "
                                  f"(labels: {_preview(self.labels)})", "values") from None
        if not is_int(value):
            raise ConfigError(f"a value is a label or an index, got {value!r}", "values")
        if not 0 <= value < self.d:
            raise ConfigError(f"index {value} is outside the domain [0, {self.d})", "values")
        return int(value)

    # -- answers ------------------------------------------------------------------------------
    def _answer(self, query: str, indices: Sequence[int]) -> Answer:
        method, params = self.spec.method, dict(self.spec.params)
        chosen = list(indices)
        indicator = set_indicator(self.d, chosen)
        unbiased_value = float(self.unbiased[chosen].sum())
        value = float(self.estimate[chosen].sum())
        if method == "post-pos":
            value = post_pos(float(self.filtered[chosen].sum()))
        # a sum's band: around Norm's own (unbiased, linear) answer, else the unbiased answer
        weights = indicator - len(chosen) / self.d if method == "norm" else indicator
        centre = value if method == "norm" else unbiased_value
        se = math.sqrt(linear_variance(self.protocol, self.n, self._weights(weights),
                                       self.plug_in))
        answer = Answer(query, tuple(int(i) for i in chosen),
                        tuple(self.labels[i] for i in chosen), value, se, "exact",
                        unbiased_value, method, params)
        if self._fit is not None:
            # a Wiener filter's answer: its error is the filter's fixed-gain one; its band is
            # the unbiased answer's, as the record's value bands (a pooled-hash oracle's:
            # f~ ± z · f~'s standard error with the collision term, below)
            answer = replace(answer, std_error_kind="fixed-gain")
            centre = unbiased_value
            se = math.sqrt(linear_variance(self.protocol, self.n, indicator, self.plug_in))
        if self.band_reason is not None:  # still the filter's fixed-gain error, without a band
            return replace(answer, band_method=BAND_NONE, band_reason=self.band_reason)
        few = few_supports_reason(self.noise)
        if few is not None and len(chosen) == 1:  # as the record's value bands
            return replace(answer, band_method=BAND_NONE, band_reason=few)
        if len(chosen) == 1 and self._pool_band[0] == BAND_POOL_CORRECTED:
            # a CMS or HCMS window past the pool-bias share: its record's band of the value
            # (output.bands.value_bands), around f~ with the pool's bias removed
            lower, upper = self._corrected_bands
            return replace(answer, band_method=BAND_POOL_CORRECTED,
                           lower95=float(lower[chosen[0]]), upper95=float(upper[chosen[0]]))
        if len(chosen) == 1 and not is_pooled(self.protocol.name):
            # a value: its record's band (the score band of f~_v); a pooled-hash oracle's
            # record band is centre ± z · its standard error, which holds the collision term
            lower, upper = score_bands(np.array([unbiased_value]), self.protocol.p_star,
                                       self.protocol.q_star, self.n)
        elif len(chosen) == 1:  # the record's: f~_v ± z · f~_v's standard error, whatever method
            value_se = math.sqrt(float(self.noise.variance(self.plug_in)[chosen[0]]))
            lower, upper = exact_bands(np.array([unbiased_value]), np.array([value_se]))
        else:
            lower, upper = exact_bands(np.array([centre]), np.array([se]))
        return replace(answer, band_method=BAND_EXACT, lower95=float(lower[0]),
                       upper95=float(upper[0]))

    @cached_property
    def _pool_band(self) -> tuple[str, str | None]:
        """(band method, reason) of the window's values by the pool-bias rule
        (frequency_bands.pooled_value_band; exact-variance for every other oracle), as the
        record's value bands (output.bands.value_band_method)."""
        if not is_pooled(self.protocol.name):
            return BAND_EXACT, None
        return pooled_value_band(self.protocol, self.noise, self.unbiased)

    @cached_property
    def _corrected_centre(self) -> np.ndarray:
        """g = (I + B)⁻¹ f~ (frequency_bands.pool_debiased)."""
        assert isinstance(self.protocol, HashPool), "a pool-corrected window's protocol"
        return pool_debiased(self.protocol, self.unbiased)

    @cached_property
    def _corrected_bands(self) -> tuple[np.ndarray, np.ndarray]:
        """Every value's pool-corrected band (frequency_bands.pool_corrected_bands)."""
        assert isinstance(self.protocol, HashPool), "a pool-corrected window's protocol"
        return pool_corrected_bands(self.protocol, self.unbiased, self.n)

    def _pool_declared(self, answer: Answer) -> Answer:
        """`answer` without its band where the record's value bands have none for a
        pooled-hash oracle's fixed pool (`_pool_band`): a set or range sums the same fixed
        collision errors its values carry. A CMS or HCMS window past the share keeps its
        point answers' pool-corrected bands, and its sets and ranges get Σ_S g ± z · its
        standard error given the pool (frequency_bands.pool_corrected_sum, `pool-corrected`;
        none, POOL_SUM_REASON, where that solve does not converge). A top-k answer's band is
        declared apart (`top_k_declared`)."""
        method, reason = self._pool_band
        if answer.band_method == BAND_NONE or method == BAND_EXACT:
            return answer
        if method == BAND_POOL_CORRECTED:
            if len(answer.indices) == 1:  # a point, or a set or range of one value
                return answer
            assert isinstance(self.protocol, HashPool), "a pool-corrected window's protocol"
            try:
                centre, error = pool_corrected_sum(
                    self.protocol, self.unbiased, self.n, set_indicator(self.d, answer.indices),
                    self._corrected_centre)
            except ArithmeticError:
                reason = pool_sum_reason(self.noise)
            else:
                lower, upper = exact_bands(np.array([centre]), np.array([error]))
                return replace(answer, band_method=BAND_POOL_CORRECTED,
                               lower95=float(lower[0]), upper95=float(upper[0]))
        return replace(answer, band_method=BAND_NONE, lower95=None, upper95=None,
                       band_reason=reason)

    def point(self, value: int | str) -> Answer:
        """f'_v for one value (label or index); no band where `_pool_declared` says so."""
        return self._pool_declared(self._answer("point", [self.index_of(value)]))

    def set_sum(self, values: Iterable[int | str]) -> Answer:
        """sum_{v in S} f'_v for a set of distinct values (labels or indices)."""
        indices = [self.index_of(v) for v in values]
        if not indices:
            raise ConfigError("a set query needs at least one value", "values")
        if len(set(indices)) != len(indices):
            repeated = next(self.labels[i] for i in indices if indices.count(i) > 1)
            raise ConfigError(f"value {repeated!r} appears more than once in the set", "values")
        return self._pool_declared(self._answer("set", indices))

    def range_sum(self, lo: int | str, hi: int | str) -> Answer:
        """sum of f'_v over lo..hi inclusive, in the domain's order (labels or indices)."""
        first, last = self.index_of(lo), self.index_of(hi)
        if first > last:
            raise ConfigError(f"empty range: {lo!r} (index {first}) comes after {hi!r} "
                              f"(index {last})", "range")
        return self._pool_declared(self._answer("range", list(range(first, last + 1))))

    def top_k(self, k: int) -> list[Answer]:
        """The k largest post-processed values (ties in domain order), as point answers.

        None has a 95% band: no band measured for them is calibrated (each holds the truth in
        at least 95% of windows, most far more). An answer of the ranks measured (TOP_K_RANKS)
        of a window whose top-k band is not declared gives that band beside, as
        `conservative_lower`, `conservative_upper` (`conservative_method`
        rank-conditional-union or bias-corrected-bootstrap; frequency_bands), `band_reason`
        naming its family's measured coverage (`top_k_conservative_reason`); a declared one
        (`top_k_declared`, `wiener_top_k_declared`, too few supports, a rank not measured)
        gives neither, `band_reason` saying why."""
        if not is_positive_int(k):
            raise ConfigError(f"k must be a positive integer, got {k!r}", "k")
        order = np.argsort(-self.estimate, kind="stable")[: int(k)]
        answers = [replace(self._answer("point", [int(i)]), query="top-k") for i in order]
        if answers[0].band_method == BAND_NONE:
            return answers
        if self._fit is not None:  # ranked by the filtered estimate
            # by the method as configured: a replay-chosen one ("auto", ...) was not measured
            # after a filter, whichever method its replay chose
            params = dict(self.estimator.params)
            reason = wiener_top_k_declared(
                self.estimator.method, bool(params.get("keep_extremes")),
                self.spec.method, self.protocol, self.protocol.epsilon, self.n, params)
        else:
            reason = top_k_declared(self._chosen_method, self.protocol.epsilon, self.n,
                                    top_k_oracle(self.protocol),
                                    getattr(self.protocol, "lifetime_epsilon", None),
                                    ratio_free_channel(self.protocol))
        if reason is not None:
            return [replace(a, band_method=BAND_NONE, lower95=None, upper95=None,
                            band_reason=reason) for a in answers]
        # the ranks measured (at k = 10) get the band, no lower one
        measured = min(len(order), TOP_K_RANKS)
        if self._fit is not None:
            method, family = BAND_RANK_CONDITIONAL, "wiener"
            lower, upper = top_k_filtered_bands(self.unbiased, self.noise, self.protocol,
                                                self._filter_fit, self._postprocessor, measured)
            rank_reason = WIENER_TOP_K_REASONS["rank"].format(rank="{rank}",
                                                              filter=self.estimator.method)
        else:
            if rank_conditional_applies(self.protocol):
                method, family = BAND_RANK_CONDITIONAL, "pure"
                lower, upper = top_k_rank_conditional_bands(self.unbiased, self.noise,
                                                            self.protocol, self._postprocessor,
                                                            measured)
            else:  # a pooled-hash or memoized oracle: the union of the bootstrap and score bands
                method, family = BAND_BIAS_CORRECTED, "union"
                lower, upper = top_k_bands(self.unbiased, self.noise, self._postprocessor,
                                           measured)
            rank_reason = TOP_K_RANK_REASON.format(
                rank="{rank}", source=top_k_source(top_k_oracle(self.protocol)))
        unmeasured = [replace(a, band_method=BAND_NONE, lower95=None, upper95=None,
                              band_reason=rank_reason.format(rank=rank))
                      for rank, a in enumerate(answers[measured:], start=measured + 1)]
        conservative = top_k_conservative_reason(family)
        return [replace(a, band_method=BAND_NONE, lower95=None, upper95=None,
                        band_reason=conservative, conservative_lower=float(low),
                        conservative_upper=float(high), conservative_method=method)
                for a, low, high in zip(answers[:measured], lower, upper, strict=True)
                ] + unmeasured

    def _filter_fit(self, unbiased: np.ndarray) -> tuple[np.ndarray, Any]:
        """The window's Wiener filter run on an unbiased estimate: (its estimate, its filter
        at the gains that estimate gave), for the top-k band's replay and rank event."""
        from ldp_telemetry.ldp.estimation import wiener
        result = wiener.fit(self.estimator.method, unbiased, self.noise, self.protocol,
                            **dict(self.estimator.params))
        return result.estimate, result.filter

    def _postprocessor(self, unbiased: np.ndarray) -> np.ndarray:
        """The window's post-processing of an unbiased estimate (for "auto" and the other
        replay-chosen methods, the method the window's replay chose, held fixed)."""
        return METHODS[self._chosen_method].run(unbiased, self.noise, **self._chosen_params)

    @cached_property
    def _chosen_method(self) -> str:
        if self.spec.method not in AUTO_METHODS:
            return self.spec.method
        if self.chosen is not None:  # the record's own choice, which made its estimate
            return self.chosen
        _, choice = postprocess_with_choice(self.spec, self.filtered, self.noise)
        return "base" if choice is None else choice.method

    @property
    def _chosen_params(self) -> dict:
        return {} if self.spec.method in AUTO_METHODS else dict(self.spec.params)


def _preview(labels: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(labels[:limit])
    return shown + (f", ... ({len(labels) - limit} more)" if len(labels) > limit else "")
