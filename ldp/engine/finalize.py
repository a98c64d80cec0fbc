"""Finalize one window: support counts -> unbiased estimate, standard error, post-processing;
for a numeric metric, report histogram -> estimated distribution and its summaries.

Cost depends on the domain size only, never on the number of reports.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ldp_telemetry.ldp.config.registry import MetricConfig
from ldp_telemetry.ldp.estimation.bin_answers import hh_combination
from ldp_telemetry.ldp.estimation.bin_quantiles import (bin_quantile_statistic_bands,
                                                        conservative_quantile_bands)
from ldp_telemetry.ldp.estimation.cfo_moments import bin_moment_bands
from ldp_telemetry.ldp.estimation.em import (DEFAULT_MAX_ITERATIONS, expectation_maximisation,
                                              paper_tolerance)
from ldp_telemetry.ldp.estimation.estimators import EstimatorOutput
from ldp_telemetry.ldp.estimation.heavy_hitters import HeavyHitters
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS, summary
from ldp_telemetry.ldp.estimation.moments import (MOMENT_STATISTICS, printed_moments,
                                                  protocol_model, statistic_bands)
from ldp_telemetry.ldp.estimation.postprocess import error_plug_in
from ldp_telemetry.ldp.estimation.replay import Choice, postprocess_with_choice
from ldp_telemetry.ldp.estimation.uncertainty import (BAND_BIAS_CORRECTED, BAND_EXACT, BAND_NONE,
                                                      NO_REPORTS_REASON, Band, BootstrapErrors,
                                                      band_scales, bias_corrected_bands,
                                                      conservative_split,
                                                      conservative_statistics, no_bands, Z95,
                                                      parametric_bootstrap)
from ldp_telemetry.ldp.protocols import is_pooled
from ldp_telemetry.ldp.protocols.base import NUMERIC, STRINGS, FrequencyOracle
from ldp_telemetry.ldp.protocols.cfo_binning import CfoBinning
from ldp_telemetry.ldp.protocols.hh import HierarchicalHistogram
from ldp_telemetry.ldp.protocols.mean_mechanisms import MeanMechanism
from ldp_telemetry.ldp.protocols.noise import SupportNoise, standard_error, unbiased_estimate
from ldp_telemetry.ldp.protocols.numeric import NumericProtocol
from ldp_telemetry.ldp.protocols.sw import DiscreteSquareWave, SquareWave


@dataclass(frozen=True)
class WindowResult:
    """The estimates of one metric in one window (all arrays of length d)."""

    n: int
    unbiased: np.ndarray
    std_error: np.ndarray
    estimate: np.ndarray
    noise: SupportNoise
    estimator: EstimatorOutput | None = None
    #: the post-processing a replay chose (ldp_telemetry.ldp.estimation.replay), for "auto"
    postprocess_choice: Choice | None = None
    #: a pooled-hash oracle's estimator with its own std_error (a Wiener filter): f~'s standard
    #: error with the collision term, which the values' bands are made from; None otherwise
    unbiased_std_error: np.ndarray | None = None


def finalize_window(config: MetricConfig, statistic: np.ndarray, n: int
                    ) -> WindowResult | NumericWindowResult | StringWindowResult:
    """Estimate the window's distribution from the protocol's sufficient statistic.

    unbiased: f~ = (c/n - q*)/(p* - q*) ([Wang20] journal §2); estimate: the metric's estimator
    applied to f~ (the unbiased estimate itself by default), then its post-processing (for
    "auto", "auto-top" and "auto-sets" the method a replay of the window chooses,
    `postprocess_choice`);
    std_error: the estimator's standard error where it reports one (a pooled-hash oracle's
    result then keeps f~'s as well, `unbiased_std_error`), else the standard error of f~, the
    square root of eq. 2 evaluated at the Norm-Sub projection of f~ (the constrained
    least-squares estimate of f).

    Eq. 2 must be evaluated at an estimate of f. At f~ clipped to [0, 1] it overstates the error
    of the many values near 0 (E[max(f~, 0)] > 0 there); at f~ itself it is unbiased but noisy and
    correlated with the error, so it understates the error of under-estimated values. The
    projection is neither: on real flight data (GRR, 229 airports, n = 5,000, ε = 2) the
    standardised errors have mean square 0.95 with it, against 0.88 and 1.09 for the other two.

    A numeric metric (config.kind == "numeric") goes to `finalize_numeric_window` instead, a
    string metric to `finalize_string_window`.
    """
    if config.kind == NUMERIC:
        return finalize_numeric_window(config, statistic, n)
    if config.kind == STRINGS:
        return finalize_string_window(config, statistic, n)
    protocol = config.protocol
    assert isinstance(protocol, FrequencyOracle), "a metric that is not numeric has an oracle"
    noise = protocol.noise(n)
    counts = np.asarray(protocol.support_counts(statistic), dtype=np.int64)
    unbiased = unbiased_estimate(counts, noise)
    plug_in = error_plug_in(unbiased)
    noise = noise.for_window(unbiased)  # a pool's collision term needs the window's Σ f²
    if noise.n == 0:  # nothing to estimate from: every estimator would return NaN
        output = EstimatorOutput(unbiased)
    else:
        output = config.estimator.run(unbiased, noise, protocol)
    unbiased_error = standard_error(plug_in, noise)
    std_error = output.std_error if output.std_error is not None else unbiased_error
    # a pooled-hash oracle's value band is f~ ± z · f~'s standard error (the collision term
    # included): a filter's record keeps it beside the filter's own error
    kept = unbiased_error if output.std_error is not None and is_pooled(protocol.name) else None
    estimate, choice = postprocess_with_choice(config.postprocess, output.estimate, noise)
    return WindowResult(n=int(n), unbiased=unbiased, std_error=std_error, estimate=estimate,
                        noise=noise, estimator=output, postprocess_choice=choice,
                        unbiased_std_error=kept)


@dataclass(frozen=True)
class StringWindowResult:
    """The heavy hitters of a string metric in one window (ldp.estimation.heavy_hitters)."""

    n: int
    heavy_hitters: HeavyHitters
    estimator: None = None


def finalize_string_window(config: MetricConfig, statistic: np.ndarray, n: int
                           ) -> StringWindowResult:
    """The window's heavy hitters by the metric's estimator ("heavy-hitters": prefix extension
    over the PEM statistic). Cost: levels × candidates × pool, never the number of reports."""
    found = config.estimator.run(statistic, int(n), config.protocol,
                                 dictionary=config.dictionary)
    assert isinstance(found, HeavyHitters), "the string kind's estimator finds heavy hitters"
    return StringWindowResult(int(n), found)


@dataclass(frozen=True)
class NumericWindowResult:
    """The estimate of a numeric metric in one window.

    `estimate`: B bucket probabilities (summing to 1; NaN without reports) over
    `bucket_edges` (B + 1, metric units); `mean`, `variance` (the centres of their bands:
    `finalize_numeric_window`), `quantiles` (keyed by
    ldp_telemetry.ldp.estimation.histograms.QUANTILE_LEVELS, the histogram's) in metric units;
    `errors` their standard errors (the buckets' and quantiles' by the bootstrap, the mean's
    exact where its band gives one).
    """

    n: int
    estimate: np.ndarray
    bucket_edges: np.ndarray
    mean: float
    variance: float | None  # None: a mean-only protocol whose reports carry none (SR)
    quantiles: dict
    errors: BootstrapErrors
    estimator: EstimatorOutput
    band_method: str = BAND_NONE
    #: statistic (ldp_telemetry.ldp.estimation.uncertainty.BAND_STATISTICS) -> Band
    bands: dict | None = None
    #: CFO-binning and hierarchical histograms: the unbiased bin estimate every linear answer
    #: (a range, the moments) is made from, `linear_bins`; None for other protocols
    unbiased: np.ndarray | None = None
    #: hierarchical histograms: the reports of every depth 1..h; None for other protocols
    level_reports: tuple[int, ...] | None = None
    #: the exact standard error of `variance`, the centre of its band (`printed_moments`), kept
    #: where the variance is declared without a band; None where the variance has none (no
    #: moment estimate, a mean-only protocol)
    variance_std_error: float | None = None
    #: quantile level -> its conservative band, not a 95% band (the quantile's 95% band is
    #: none): every quantile of CFO-binning and hierarchical histograms (the whole-bins band,
    #: ldp_telemetry.ldp.estimation.bin_quantiles.conservative_quantile_bands), a Square Wave
    #: quantile in a cell where its band over-covered on held-out windows (its bias-corrected
    #: band, uncertainty.conservative_statistics); and "mean" or "variance" -> a Square Wave
    #: mean's or variance's exact-variance band widened past its share by the bucketing bound
    #: (moments.statistic_bands), or a CFO-binning or hierarchical-histogram mean's or
    #: variance's exact-variance band in a setting where it over-covered
    #: (cfo_moments.bin_moment_bands); None where no statistic has one
    conservative_bands: dict | None = None

    @property
    def band_methods(self) -> dict[str, str]:
        """statistic -> how its band was made, for the statistics whose band method differs
        from `band_method` (the exact-variance mean and variance of a Square Wave record, and of a
        CFO-binning or hierarchical-histogram record, whose quantiles have none)."""
        return {key: band.method for key, band in (self.bands or {}).items()
                if band.method is not None and band.method != self.band_method}


#: Estimators whose numeric bands are calibrated (bias-corrected bootstrap through EM).
CALIBRATED_BAND_ESTIMATORS = ("ems", "em")


def interval_fit(config: MetricConfig) -> Callable[[np.ndarray], np.ndarray] | None:
    """The interval estimator of a Square Wave metric estimated by EMS or EM: report counts ->
    EM's distribution over the buckets ([Li20] Algorithm 1 without smoothing, τ of §6.1 or the
    configured one for "em"); None for other estimators (they have no calibrated band)."""
    spec, protocol = config.estimator, config.protocol
    if spec.method not in CALIBRATED_BAND_ESTIMATORS:
        return None
    params = dict(spec.params)
    tolerance = params.get("tolerance") if spec.method == "em" else None
    tolerance = paper_tolerance(protocol.epsilon, False) if tolerance is None else tolerance
    # EMS and EM are the Square Wave protocols' estimators (their `estimators`)
    assert isinstance(protocol, (SquareWave, DiscreteSquareWave)), "a calibrated band's protocol"
    channel = protocol.channel()

    def fit(counts: np.ndarray) -> np.ndarray:
        return expectation_maximisation(channel, counts, smoothing=False,
                                        tolerance=float(tolerance),
                                        max_iterations=params["max_iterations"]).estimate
    return fit


def default_interval_fit(config: MetricConfig) -> bool:
    """Whether `interval_fit` runs EM as the margins were calibrated: the paper's tolerance
    and the default iteration cap (an "em" estimator may set either)."""
    params = dict(config.estimator.params)
    tolerance = params.get("tolerance") if config.estimator.method == "em" else None
    return bool((tolerance is None
                 or tolerance == paper_tolerance(config.protocol.epsilon, False))
                and params.get("max_iterations", DEFAULT_MAX_ITERATIONS)
                == DEFAULT_MAX_ITERATIONS)


def numeric_bands(config: MetricConfig, counts: np.ndarray, n: int
                  ) -> tuple[str, dict, dict | None]:
    """(band method, bands, conservative bands) of a Square Wave metric estimated by EMS or
    EM: the bias-corrected parametric bootstrap of
    ldp_telemetry.ldp.estimation.uncertainty.bias_corrected_bands with
    `interval_fit` as the interval estimator and the margins calibrated for the metric's ε,
    n, buckets and replicates (`band_scales`: null bands where declared, the reason where
    extrapolated) for the quantiles, which the band method names; the mean and the variance
    get the exact-variance bands of ldp_telemetry.ldp.estimation.moments (their
    `Band.method`), whatever the bootstrap; a CFO-binning metric's mean and variance get the
    exact-variance bands of ldp_telemetry.ldp.estimation.cfo_moments, and so do a hierarchical
    histogram's (as conservative bands in the settings where they over-covered:
    `bin_moment_bands`), while their quantiles have no 95% band (band method "none") but the
    conservative whole-bins band of ldp_telemetry.ldp.estimation.bin_quantiles beside it
    (`conservative_quantile_bands`); a Square Wave quantile whose band over-covered in the
    window's cell on held-out windows (`conservative_statistics`) has none either, its
    bias-corrected band given as its conservative band, and so is a Square Wave mean's or
    variance's band that the bucketing bound widens past its share (`statistic_bands`; the
    conservative bands: None where no statistic has one); other estimators have no calibrated
    band (band method "none")."""
    spec, protocol = config.estimator, config.protocol
    params = dict(spec.params)
    fit = interval_fit(config)
    if fit is None:
        bands = no_bands(f"no calibrated band for estimator {spec.method!r}: its "
                         "bootstrap measures the spread, not the bias")
        if isinstance(protocol, (CfoBinning, HierarchicalHistogram)):
            assert config.low is not None and config.high is not None, "a numeric range"
            moments, conservative_moments = bin_moment_bands(protocol, counts, n, config.low,
                                                             config.high)
            bands.update(moments)
            bands.update(bin_quantile_statistic_bands(protocol, counts, n, config.low,
                                                      config.high, spec.method))
            bands, conservative = conservative_quantile_bands(bands)
            conservative.update({key: band for key, band in conservative_moments.items()
                                 if band.lower is not None})
            return BAND_NONE, bands, conservative
        return BAND_NONE, bands, None
    # `interval_fit` gives a fit only for the Square Wave protocols' EMS and EM
    assert isinstance(protocol, (SquareWave, DiscreteSquareWave)), "a calibrated band's protocol"
    replicates = params.get("bootstrap", 0)
    scales, reasons = band_scales(protocol.epsilon, int(n), config.d, replicates, protocol.name,
                                  protocol.output_buckets, default_interval_fit(config))
    bands = bias_corrected_bands(protocol.channel().forward, fit, counts, n, config.bucket_edges,
                                 replicates, params.get("seed", 0), scales, reasons)
    bands, conservative = conservative_split(bands, conservative_statistics(protocol.epsilon,
                                                                            int(n)),
                                             BAND_BIAS_CORRECTED)
    method = (BAND_BIAS_CORRECTED if any(band.lower is not None for key, band in bands.items()
                                         if key not in MOMENT_STATISTICS) else BAND_NONE)
    model = protocol_model(protocol)
    assert model is not None, "a Square Wave protocol has a moment model"
    assert config.low is not None and config.high is not None, "a numeric metric has its range"
    moments, widened = statistic_bands(model, counts, config.low, config.high)
    bands.update(moments)
    conservative.update({key: band for key, band in widened.items() if band.lower is not None})
    return method, bands, (conservative if any(band.lower is not None
                                               for band in conservative.values()) else None)


def finalize_numeric_window(config: MetricConfig, statistic: np.ndarray, n: int
                            ) -> NumericWindowResult:
    """Estimate a numeric metric's distribution from its report histogram.

    The metric's NUMERIC estimator (EMS by default for Square Wave, [Li20] §5.5) reconstructs
    the bucket probabilities on [0, 1]; they are reported on the metric's own buckets of
    [low, high], with their quantiles (ldp_telemetry.ldp.estimation.histograms) and the
    standard errors of a seeded parametric bootstrap through the same estimator
    (ldp_telemetry.ldp.estimation.uncertainty). The mean and the variance are the centres of
    their bands, not the histogram's (`printed_moments` of ldp_telemetry.ldp.estimation.moments:
    the unbiased moment estimates, clipped), and `errors.mean_std_error` the mean's exact
    standard error (measured: benchmarks/printed_moments.py).
    """
    protocol, spec = config.protocol, config.estimator
    assert isinstance(protocol, NumericProtocol), "a numeric metric's protocol"
    edges = config.bucket_edges
    counts = np.asarray(statistic)
    params = dict(spec.params)
    if getattr(protocol, "mean_only", False):
        return _finalize_mean_only(config, statistic, int(n))
    if n == 0:
        nan = float("nan")
        estimate = np.full(config.d, nan)
        output = EstimatorOutput(estimate)
        # n = 0: parametric_bootstrap returns NaN errors before it would resample or estimate
        errors = parametric_bootstrap(None, 0, None, edges,  # type: ignore[arg-type]
                                      params.get("bootstrap", 0), 0)
        return NumericWindowResult(0, estimate, edges, nan, nan,
                                   {key: nan for key in QUANTILE_LEVELS}, errors, output,
                                   BAND_NONE, no_bands(NO_REPORTS_REASON))
    output = spec.run(counts, int(n), protocol)
    estimate = np.asarray(output.estimate, dtype=np.float64)
    stats = summary(estimate, edges)
    errors = histogram_bootstrap(config, estimate, int(n))
    band_method, bands, conservative = numeric_bands(config, counts, int(n))
    printed = printed_moments(bands, stats)
    mean_error = printed["mean"][1]
    if mean_error is not None:  # the printed mean's own standard error, not the bootstrap's
        errors = replace(errors, mean_std_error=float(mean_error))
    variance_error = printed["variance"][1]
    unbiased, level_reports = linear_bins(protocol, counts, int(n))
    return NumericWindowResult(int(n), estimate, edges, printed["mean"][0],
                               printed["variance"][0], stats["quantiles"], errors, output,
                               band_method, bands, unbiased, level_reports,
                               None if variance_error is None else float(variance_error),
                               conservative)


def histogram_bootstrap(config: MetricConfig, estimate: np.ndarray, n: int) -> BootstrapErrors:
    """The seeded parametric bootstrap of a numeric window's estimated histogram `estimate`
    (n reports): R = the estimator's `bootstrap` report histograms drawn from the protocol's
    model at `estimate`, each reconstructed by the same estimator; `mean_std_error` is the
    spread of the histogram's mean, not the standard error a record prints beside its mean (the
    band centre's: `finalize_numeric_window`)."""
    protocol, spec = config.protocol, config.estimator
    assert isinstance(protocol, NumericProtocol), "a numeric metric's protocol"
    params = dict(spec.params)
    return parametric_bootstrap(
        lambda rng, size: protocol.resample(estimate, int(n), rng, size), int(n),
        lambda replicate: spec.run(replicate, int(n), protocol).estimate, config.bucket_edges,
        params.get("bootstrap", 0), params.get("seed", 0))


def linear_bins(protocol: NumericProtocol, counts: np.ndarray, n: int
                ) -> tuple[np.ndarray | None, tuple[int, ...] | None]:
    """(unbiased bin estimate, reports per depth) that a record keeps for the exact bands of
    linear answers (ldp_telemetry.ldp.estimation.bin_answers): CFO-binning's f~ (no depths), a
    hierarchical histogram's least-squares leaf estimate and its n_ℓ; (None, None) for other
    protocols."""
    if isinstance(protocol, CfoBinning):
        return (unbiased_estimate(protocol.support_counts(counts), protocol.noise(n)), None)
    if isinstance(protocol, HierarchicalHistogram):
        reports, levels = protocol.level_estimates(counts)
        if reports[-1] <= 0:  # no leaf estimate: nothing to answer from
            return None, tuple(int(r) for r in reports)
        return (hh_combination(protocol, levels, reports), tuple(int(r) for r in reports))
    return None, None



def _finalize_mean_only(config: MetricConfig, statistic: np.ndarray, n: int
                        ) -> NumericWindowResult:
    """SR / PM: the mean in metric units and its closed-form standard error; no histogram
    (`estimate` and `quantiles` are empty). `variance`: PM's estimate of the values' variance
    from the reports' second moment; None for SR, whose reports (±1/(p − q)) carry none."""
    protocol, low, high = config.protocol, config.low, config.high
    assert isinstance(protocol, MeanMechanism), "a mean-only protocol (its `mean_only`)"
    assert low is not None and high is not None, "a numeric metric has its range"
    scale = 0.5 * (high - low)  # t = 2v − 1 in [−1, 1] -> [low, high]
    variance = None
    if n == 0:
        output = EstimatorOutput(np.array([np.nan]), std_error=np.array([np.nan]))
    else:
        output = config.estimator.run(statistic, n, config.protocol)
        variance_of_t = protocol.variance_of_t(statistic, n)
        variance = None if variance_of_t is None else scale ** 2 * variance_of_t
    mean = low + scale * (float(output.estimate[0]) + 1.0)
    assert output.std_error is not None, "the mean estimator gives its standard error"
    errors = BootstrapErrors(0, np.zeros(0), scale * float(output.std_error[0]), {})
    bands = no_bands(f"no band: protocol {config.protocol.name!r} estimates the mean only")
    mean_band = Band(None, None, NO_REPORTS_REASON)
    if n > 0 and np.isfinite(errors.mean_std_error):
        mean_band = Band(mean - Z95 * errors.mean_std_error, mean + Z95 * errors.mean_std_error)
    bands["mean"] = mean_band
    return NumericWindowResult(n, np.zeros(0), np.array([config.low, config.high]), mean,
                               variance, {}, errors, output,
                               BAND_EXACT if mean_band.lower is not None else BAND_NONE, bands)
