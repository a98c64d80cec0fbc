"""Wiener-filter estimation for every pure frequency oracle ([Fang23] §III–IV, Appendix C).

Model ([Fang23] Theorem 1, eq. 7). With g_v = c_v / n the support fractions, a pure protocol is
a circular convolution plus noise, g = f ⊛ h + n with h = [p*, q*, ..., q*]. Its DFT
(numpy's unnormalised FFT) is G = H F + N with H_0 = p* + (d-1) q* and H_k = p* - q* for k != 0.
Because g = q* + (p* - q*) f~ with f~ the unbiased estimate, every bin k != 0 of the model reads

    F~_k = F_k + N_k / (p* - q*),        E|N_k|^2 = P_n        (Theorem 3, eq. 19-20)

so the Wiener filter W = H* / (|H|^2 + P_n / P_f) (eq. 16) applied to G (eq. 17) is the gain

    Gamma_k = P_f,k / (P_f,k + S),        S = P_n / (p* - q*)^2,

applied to F~_k: this module filters f~ in the frequency domain with real gains, which is
exactly eq. 16-18 on every bin k != 0.

The DC bin (k = 0) is left unfiltered: Gamma_0 = 1, so every filter keeps sum_v f~_v. For GRR
this is eq. 16 itself (P_0 = 0, H_0 = 1, G_0 = 1 = F~_0). For the other protocols eq. 16 would
return G_0 / H_0, a different estimate of sum f (= 1); that is a normalisation choice, which
the metric's post-processing makes afterwards. Two consequences the tests check: with noise
power 0 every filter returns f~ itself, and constants pass through unchanged.

Noise power. Theorem 3 assumes independent n_v. The exact expectation of |N_k|^2 adds the
covariance of one report's support indicators of two distinct values; by the symmetry of pure
protocols it takes two values, c1 (the user holds one of the two) and c0 (the user holds
neither), read from each protocol's closed form of Var[Y | x] (report_variance). Summing the
covariances against the DFT kernel (with sum f = 1) gives, with beta = c0 / n and
gamma = (c1 - c0) / n,

    E|N_k|^2 = eq. 20 - d beta - 2 gamma                        (k != 0: still white)
    E|N_0|^2 = eq. 20 + d (d-1) beta + 2 (d-1) gamma.

For unary encoding and local hashing c0 = c1 = 0 and this is eq. 20. For GRR (c0 = 0,
c1 = -p* q*) it gives P_0 = 0 (the paper's exception) and raises P_k by q*(2 - d q*)/n; for
fixed-size subsets (SS, RWS) P_0 = 0 as well. The filters use this exact white level; a
pooled-hash oracle's adds its collision term (`estimate_noise_level`).

Standard errors. Once its gains are fixed a filter is linear, f^ = A f~ (A circulant, A 1 = 1).
The covariance of f~ is, off the diagonal, Cov(f~_u, f~_v) = beta' + gamma' (f_u + f_v) (beta'
and gamma' as above divided by (p* - q*)^2), and eq. 2 on it. Writing it as
diag(delta) + beta' 1 1^T + gamma' (f 1^T + 1 f^T),

    Var[f^_u] = sum_v A_uv^2 delta_v + beta' + 2 gamma' (A f)_u,

one circular convolution of the squared kernel with delta: O(d log d). f is the Norm-Sub
projection of f~ (as for the unbiased estimate's standard error). This is the error of the
filter *at its final gains*: it ignores that the gains were estimated from the same data and it
ignores the filter's bias; docs/wiener.md measures how it compares with the actual error.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

import numpy as np

from ldp_telemetry.ldp.base.registration import Parameter
from ldp_telemetry.ldp.base.validation import is_finite_number, is_int
from ldp_telemetry.ldp.estimation.estimators import METHODS, EstimatorMethod, EstimatorOutput
from ldp_telemetry.ldp.estimation.postprocess import error_plug_in, project_to_simplex
from ldp_telemetry.ldp.protocols import hashing
from ldp_telemetry.ldp.protocols.base import FREQUENCY, FrequencyOracle
from ldp_telemetry.ldp.protocols.noise import SupportNoise, standard_error


def _fft() -> ModuleType:
    """scipy.fft, imported on first use: the Beam-free client library loads no scipy."""
    from scipy import fft

    return fft


#: Largest number of IIW iterations a registry may ask for.
MAX_ITERATIONS = 10_000
#: Largest number of AMRP permutations a registry may ask for.
MAX_PERMUTATIONS = 10_000
#: Largest Gaussian width (in values) of GF-DW.
MAX_SIGMA = 1_000.0
#: (permutations x d) entries AMRP holds at once (~32 MiB of float64 with the transforms).
_AMRP_CELLS = 1 << 20
#: Largest permutations x d that AMRP keeps between its passes (~24 MiB); larger ones are
#: regenerated from the seed for each pass.
_AMRP_KEPT_CELLS = 1 << 21


# ---------------------------------------------------------------------------------------------
# Noise model


@functools.lru_cache(maxsize=256)
def support_covariances(protocol: FrequencyOracle) -> tuple[float, float]:
    """(c1, c0): covariance of one report's support indicators of two distinct values u != v
    when the user holds u (c1) and when the user holds neither (c0).

    Read from the protocol's closed form of Var[Y | x] (FrequencyOracle.report_variance) with
    Y the indicator sum of values 0 and 1: Var = Var[S_0] + Var[S_1] + 2 Cov. c0 needs d >= 3
    (0 otherwise: no value is then held by neither).
    """
    p, q, d = protocol.p_star, protocol.q_star, protocol.d
    weights = np.zeros(d)
    weights[:2] = 1.0
    variance = protocol.report_variance(weights)
    c1 = (variance[0] - p * (1 - p) - q * (1 - q)) / 2
    c0 = (variance[2] - 2 * q * (1 - q)) / 2 if d >= 3 else 0.0
    return float(c1), float(c0)


def theorem3_noise_power(noise: SupportNoise, d: int) -> np.ndarray:
    """E|N_k|^2, k = 0..d-1, of the noise of g = c/n under independent n_v ([Fang23] eq. 19-20):
    (d q*(1-q*) + (p*-q*)(1-p*-q*)) / n in every bin, with P_0 = 0 when every report supports
    exactly one value (p* + (d-1) q* = 1: GRR), as the paper notes after Theorem 3.
    """
    p, q, n = noise.p_star, noise.q_star, noise.n
    power = np.full(d, (d * q * (1 - q) + (p - q) * (1 - p - q)) / n)
    if math.isclose(p + (d - 1) * q, 1.0, rel_tol=1e-12):
        power[0] = 0.0
    return power


def noise_power_spectrum(protocol: FrequencyOracle, n: int) -> np.ndarray:
    """Exact E|N_k|^2, k = 0..d-1, for n reports of `protocol`: eq. 20 plus the support
    covariances of one report (module docstring; equal to eq. 20 for unary encoding and local
    hashing, P_0 = 0 for GRR and fixed-size subsets)."""
    d = protocol.d
    noise = protocol.noise(n)
    c1, c0 = support_covariances(protocol)
    beta, gamma = c0 / n, (c1 - c0) / n
    power = theorem3_noise_power(noise, d)
    base = power[1] if d > 1 else power[0]
    power[:] = base - d * beta - 2 * gamma
    power[0] = max(base + d * (d - 1) * beta + 2 * (d - 1) * gamma, 0.0)
    return power


def estimate_noise_level(protocol: FrequencyOracle, noise: SupportNoise) -> float:
    """S = P_n / (p* - q*)^2: the white noise power of F~_k for k != 0 (frequency units), plus
    d times the per-value variance eq. 2 leaves out (`noise.extra_variance`: a pooled-hash
    oracle's collision term at the window's estimate of Σ f², `PoolNoise.for_window`, taken as
    white over the domain)."""
    return float(noise_power_spectrum(protocol, noise.n)[1 % protocol.d]
                 / (noise.p_star - noise.q_star) ** 2 + protocol.d * noise.extra_variance)


# ---------------------------------------------------------------------------------------------
# Gains


def wiener_gain(signal_power: np.ndarray, noise_level: float) -> np.ndarray:
    """Gamma = P_f / (P_f + S) per rfft bin ([Fang23] eq. 16 times H), 1 where S = 0, and 1 at
    the DC bin (module docstring)."""
    signal_power = np.asarray(signal_power, dtype=np.float64)
    if noise_level <= 0.0:
        gain = np.ones_like(signal_power)
    else:  # P_f >= 0 and S > 0: the denominator is positive
        gain = signal_power / (signal_power + noise_level)
    gain[..., 0] = 1.0
    return gain


def iiw_update(signal_power: np.ndarray, observed_power: np.ndarray,
               noise_level: float) -> np.ndarray:
    """One spectrum update of Algorithm 1 as corrected (errata): P_f(i) = |F^(i-1)|^2 +
    P_n / (|H|^2 + P_n / P_f(i-1)), in f~ units: Gamma^2 |F~|^2 + S Gamma, Gamma = P/(P + S).

    Its fixed points are P = |F~|^2 - S and P = 0 (eq. 22-23). The DC bin is not updated
    meaningfully (its gain is fixed at 1).
    """
    gain = wiener_gain(signal_power, noise_level)
    return gain ** 2 * observed_power + noise_level * gain


def _rms_change(gain_change: np.ndarray, spectrum: np.ndarray, d: int) -> float:
    """RMS over values of the change of an estimate whose rfft changed by gain_change * X
    (Parseval: rfft bins other than 0 and d/2 stand for two DFT bins)."""
    weights = np.full(spectrum.shape[-1], 2.0)
    weights[0] = 1.0
    if d % 2 == 0:
        weights[-1] = 1.0
    return float(np.sqrt(np.sum(weights * np.abs(gain_change * spectrum) ** 2)) / d)


# ---------------------------------------------------------------------------------------------
# Estimators (functions of f~ and the noise level S)


def direct_wiener(unbiased: np.ndarray, noise_level: float,
                  signal_power: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Direct Wiener (DW, [Fang23] §IV-C, eq. 16-18, 21): the gain from P_f = |F~|^2 (or the
    given rfft-bin `signal_power`). Returns (estimate, gain per rfft bin)."""
    unbiased = np.asarray(unbiased, dtype=np.float64)
    spectrum = _fft().rfft(unbiased)
    power = np.abs(spectrum) ** 2 if signal_power is None else signal_power
    gain = wiener_gain(power, noise_level)
    return _fft().irfft(gain * spectrum, n=unbiased.size), gain


def iterative_wiener(unbiased: np.ndarray, noise_level: float, iterations: int,
                     initial_power: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray, float]:
    """Improved Iterative Wiener (IIW, [Fang23] Algorithm 1 with the errata's spectrum update).

    P_f(0) = |G/H|^2 = |F~|^2 (or `initial_power`, e.g. IIW-G's |G|^2), the DW filter, then
    `iterations` updates P_f(i) = |F^(i-1)|^2 + P_n / (|H|^2 + P_n / P_f(i-1)) each followed by
    the filter W(i). iterations = 0 is DW. Returns (estimate, final gain, RMS change of the
    estimate in the last iteration; 0 when iterations = 0).
    """
    unbiased = np.asarray(unbiased, dtype=np.float64)
    d = unbiased.size
    spectrum = _fft().rfft(unbiased)
    observed = np.abs(spectrum) ** 2
    power = observed.copy() if initial_power is None else np.array(initial_power, dtype=float)
    gain = previous = wiener_gain(power, noise_level)
    for _ in range(iterations):
        power = iiw_update(power, observed, noise_level)
        previous, gain = gain, wiener_gain(power, noise_level)
    change = _rms_change(gain - previous, spectrum, d)
    return _fft().irfft(gain * spectrum, n=d), gain, change


def smoothing_gain(d: int) -> np.ndarray:
    """The rfft gains of eq. 25, f^_v = f~_v / 2 + (f~_{v-1} + f~_{v+1}) / 4 (circular)."""
    return 0.5 + 0.5 * np.cos(2 * np.pi * np.arange(d // 2 + 1) / d)


def smooth(unbiased: np.ndarray) -> np.ndarray:
    """The smoothing baseline of [Fang23] eq. 25 (neighbours wrap around the domain)."""
    unbiased = np.asarray(unbiased, dtype=np.float64)
    return 0.5 * unbiased + 0.25 * (np.roll(unbiased, 1) + np.roll(unbiased, -1))


def gaussian_wiener(unbiased: np.ndarray, noise_level: float, sigma: float
                    ) -> tuple[np.ndarray, np.ndarray]:
    """GF-DW ([Fang23] Appendix C): P_f from the Gaussian-filtered f~ (width sigma values,
    circular, truncated at 4 sigma), then DW on f~ with that spectrum."""
    unbiased = np.asarray(unbiased, dtype=np.float64)
    from scipy.ndimage import gaussian_filter1d

    smoothed = gaussian_filter1d(unbiased, sigma, mode="wrap")
    return direct_wiener(unbiased, noise_level, np.abs(_fft().rfft(smoothed)) ** 2)


def amrp_permutations(seed: int, count: int, d: int, first: int = 0) -> np.ndarray:
    """Permutations first .. first+count-1 of [0, d) that AMRP uses: the r-th orders the values
    by the keys splitmix64(splitmix64(seed, r), v) (ldp_telemetry.ldp.protocols.hashing; portable
    across runners and library versions; ties, of probability ~d^2/2^65, broken by value)."""
    rows = hashing.splitmix64(np.uint64(seed), np.arange(first, first + count, dtype=np.uint64))
    keys = hashing.splitmix64(rows[:, None], np.arange(d, dtype=np.uint64)[None, :])
    return np.argsort(keys, axis=1, kind="stable")


@dataclass(frozen=True)
class SeededPermutations:
    """AMRP's `count` seeded permutations of [0, d), generated in blocks of at most
    _AMRP_CELLS entries: memory never holds all count x d of them."""

    seed: int
    count: int
    d: int

    def blocks(self) -> Iterator[np.ndarray]:
        step = max(1, _AMRP_CELLS // self.d)
        for first in range(0, self.count, step):
            yield amrp_permutations(self.seed, min(step, self.count - first), self.d, first)


def _permutation_blocks(permutations: SeededPermutations | np.ndarray
                        ) -> Iterator[np.ndarray]:
    if isinstance(permutations, SeededPermutations):
        yield from permutations.blocks()
        return
    permutations = np.asarray(permutations)
    step = max(1, _AMRP_CELLS // permutations.shape[1])
    for first in range(0, permutations.shape[0], step):
        yield permutations[first:first + step]


@dataclass(frozen=True)
class AmrpFilter:
    """AMRP's filter at fixed gains ([Fang23] §IV-C, DW-AMRP): x -> mean_r P_r^T A_r P_r x,
    where A_r is the DW filter of f~ reordered by permutation r. Gains are recomputed block by
    block from `unbiased` whenever the filter is applied (memory O(block), not O(R d)).

    `permutations`: SeededPermutations, or an explicit (R, d) array of permutation rows.
    """

    unbiased: np.ndarray
    noise_level: float
    permutations: SeededPermutations | np.ndarray

    @property
    def count(self) -> int:
        p = self.permutations
        return p.count if isinstance(p, SeededPermutations) else np.shape(p)[0]

    def _computed_blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for block in _permutation_blocks(self.permutations):
            spectra = _fft().rfft(self.unbiased[block], axis=1)
            yield block, wiener_gain(np.abs(spectra) ** 2, self.noise_level)

    @functools.cached_property
    def _kept_blocks(self) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """All (permutations, gains) blocks when they fit in _AMRP_KEPT_CELLS, else None."""
        if self.count * self.unbiased.size > _AMRP_KEPT_CELLS:
            return None
        return list(self._computed_blocks())

    def _blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        kept = self._kept_blocks
        return iter(kept) if kept is not None else self._computed_blocks()

    def __call__(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        d = values.size
        total = np.zeros(d)
        for block, gain in self._blocks():
            filtered = _fft().irfft(gain * _fft().rfft(values[block], axis=1), n=d, axis=1)
            restored = np.empty_like(filtered)
            np.put_along_axis(restored, block, filtered, axis=1)
            total += restored.sum(axis=0)
        return total / self.count

    def standard_error(self, unbiased: np.ndarray, noise: SupportNoise,
                       protocol: FrequencyOracle) -> np.ndarray:
        """Approximate standard error at these gains (amrp_standard_error)."""
        d = self.unbiased.size
        plug_in = project_to_simplex(unbiased)
        diagonal = off_sum = off_squares = 0.0
        image = np.zeros(d)
        for block, gain in self._blocks():
            kernels = _fft().irfft(gain, n=d, axis=1)
            diagonal += kernels[:, 0].sum()
            off_sum += kernels[:, 1:].sum()
            off_squares += (kernels[:, 1:] ** 2).sum()
            filtered = _fft().irfft(gain * _fft().rfft(plug_in[block], axis=1), n=d, axis=1)
            restored = np.empty_like(filtered)
            np.put_along_axis(restored, block, filtered, axis=1)
            image += restored.sum(axis=0)
        count = self.count
        lags = count * max(d - 1, 1)
        return amrp_standard_error(unbiased, noise, protocol, image / count, diagonal / count,
                                   off_sum / lags, off_squares / lags, count)


def amrp(unbiased: np.ndarray, noise_level: float,
         permutations: SeededPermutations | np.ndarray) -> np.ndarray:
    """Average of Multiple Random Permutations ([Fang23] §IV-C, DW-AMRP): DW on f~ reordered by
    each permutation, each result put back in the original order, averaged. Vectorised over
    the permutations of a block and their values."""
    unbiased = np.asarray(unbiased, dtype=np.float64)
    return AmrpFilter(unbiased, noise_level, permutations)(unbiased)


# ---------------------------------------------------------------------------------------------
# Standard errors


def covariance_terms(protocol: FrequencyOracle, noise: SupportNoise) -> tuple[float, float]:
    """(beta', gamma'): Cov(f~_u, f~_v) = beta' + gamma' (f_u + f_v) for u != v."""
    c1, c0 = support_covariances(protocol)
    scale = noise.n * (noise.p_star - noise.q_star) ** 2
    return c0 / scale, (c1 - c0) / scale


def filtered_standard_error(unbiased: np.ndarray, noise: SupportNoise, protocol: FrequencyOracle,
                            gain: np.ndarray) -> np.ndarray:
    """Standard error of A f~ for the circulant filter of rfft `gain` (gain[0] = 1), at its
    fixed gains (module docstring), f plugged in as the Norm-Sub projection of f~."""
    unbiased = np.asarray(unbiased, dtype=np.float64)
    d = unbiased.size
    plug_in = project_to_simplex(unbiased)
    beta, gamma = covariance_terms(protocol, noise)
    delta = noise.variance(plug_in) - beta - 2 * gamma * plug_in
    kernel = _fft().irfft(gain, n=d)
    spread = _fft().irfft(_fft().rfft(kernel ** 2) * _fft().rfft(delta), n=d)
    filtered_f = _fft().irfft(gain * _fft().rfft(plug_in), n=d)
    return np.sqrt(np.maximum(spread + beta + 2 * gamma * filtered_f, 0.0))


def amrp_standard_error(unbiased: np.ndarray, noise: SupportNoise, protocol: FrequencyOracle,
                        image_of_plug_in: np.ndarray, diagonal: float, m1: float, m2: float,
                        count: int) -> np.ndarray:
    """Approximate standard error of AMRP at its fixed gains.

    f^ = B f~ with B = mean_r P_r^T A_r P_r, B 1 = 1. B_uu = mean_r w_r(0) = `diagonal` exactly
    (w_r the kernel of permutation r); for u != v, B_uv averages w_r at the lag the r-th
    permutation puts between u and v, treated here as `count` independent uniform draws among
    the lags != 0: E[B_uv^2] ~ m1^2 + (m2 - m1^2) / count with m1, m2 the mean and mean square
    of the kernels off lag 0. `image_of_plug_in`: B applied to the plug-in f (the gamma' term).
    """
    plug_in = project_to_simplex(np.asarray(unbiased, dtype=np.float64))
    beta, gamma = covariance_terms(protocol, noise)
    delta = noise.variance(plug_in) - beta - 2 * gamma * plug_in
    off_square = m1 ** 2 + max(m2 - m1 ** 2, 0.0) / count
    spread = diagonal ** 2 * delta + off_square * (delta.sum() - delta)
    return np.sqrt(np.maximum(spread + beta + 2 * gamma * image_of_plug_in, 0.0))


# ---------------------------------------------------------------------------------------------
# Fixed-gain filters and the registered methods


@dataclass(frozen=True)
class FixedGainFilter:
    """A circulant filter with its gains frozen: x -> A x with A 1 = 1, A = A^T (rfft gains)."""

    gains: np.ndarray

    def __call__(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        return _fft().irfft(self.gains * _fft().rfft(values), n=values.size)

    def standard_error(self, unbiased: np.ndarray, noise: SupportNoise,
                       protocol: FrequencyOracle) -> np.ndarray:
        """Exact standard error of A f~ at these gains (filtered_standard_error)."""
        return filtered_standard_error(unbiased, noise, protocol, self.gains)


@dataclass(frozen=True)
class Fit:
    """One method's result on one window: estimate, frozen filter, iterations, last change."""

    estimate: np.ndarray
    filter: FixedGainFilter | AmrpFilter
    iterations: int | None = None
    last_change: float | None = None
    #: with keep_extremes, the values kept at their unbiased estimate (`extreme_values`)
    kept: np.ndarray | None = None


def _fit_dw(unbiased: np.ndarray, level: float, noise: SupportNoise) -> Fit:
    estimate, gain = direct_wiener(unbiased, level)
    return Fit(estimate, FixedGainFilter(gain))


def _fit_iiw(unbiased: np.ndarray, level: float, noise: SupportNoise, iterations: int) -> Fit:
    estimate, gain, change = iterative_wiener(unbiased, level, iterations)
    return Fit(estimate, FixedGainFilter(gain), iterations, change)


def iiw_g_initial_power(unbiased: np.ndarray, noise: SupportNoise) -> np.ndarray:
    """IIW-G's starting spectrum |G|^2 ([Fang23] §IV-C): G_k = (p* - q*) F~_k for k != 0."""
    return (noise.p_star - noise.q_star) ** 2 * np.abs(_fft().rfft(unbiased)) ** 2


def _fit_iiw_g(unbiased: np.ndarray, level: float, noise: SupportNoise,
               iterations: int) -> Fit:
    estimate, gain, change = iterative_wiener(unbiased, level, iterations,
                                              iiw_g_initial_power(unbiased, noise))
    return Fit(estimate, FixedGainFilter(gain), iterations, change)


def _fit_amrp(unbiased: np.ndarray, level: float, noise: SupportNoise, permutations: int,
              seed: int) -> Fit:
    frozen = AmrpFilter(unbiased, level, SeededPermutations(seed, permutations, unbiased.size))
    return Fit(frozen(unbiased), frozen)


def _fit_smooth(unbiased: np.ndarray, level: float, noise: SupportNoise) -> Fit:
    return Fit(smooth(unbiased), FixedGainFilter(smoothing_gain(np.size(unbiased))))


def _fit_gf_dw(unbiased: np.ndarray, level: float, noise: SupportNoise, sigma: float) -> Fit:
    estimate, gain = gaussian_wiener(unbiased, level, sigma)
    return Fit(estimate, FixedGainFilter(gain))


#: method -> its fit (unbiased, noise level, noise, then the method's own parameters)
_FITS: dict[str, Callable[..., Fit]] = {
    "dw": _fit_dw, "iiw": _fit_iiw, "iiw-g": _fit_iiw_g, "amrp": _fit_amrp,
    "smooth": _fit_smooth, "gf-dw": _fit_gf_dw}


def fit(method: str, unbiased: np.ndarray, noise: SupportNoise, protocol: FrequencyOracle,
        keep_extremes: bool = False, **params: Any) -> Fit:
    """Run Wiener-family `method` with `params` on one window's unbiased estimate; with
    `keep_extremes`, the values it over-suppressed keep the unbiased estimate
    (`extreme_values`, named in `Fit.kept`)."""
    unbiased = np.asarray(unbiased, dtype=np.float64)
    result = _FITS[method](unbiased, estimate_noise_level(protocol, noise), noise, **params)
    if keep_extremes:
        kept = extreme_values(unbiased, result.estimate)
        if kept.any():
            result = replace(result, estimate=np.where(kept, unbiased, result.estimate),
                             kept=kept)
    return result


#: Family-wise rate at which `keep_extremes` keeps a value that is no extreme: a value is kept
#: unfiltered when the filter lowered it by more than the Φ⁻¹(1 − rate/d) quantile of its
#: residual's noise.
EXTREME_RATE = 0.05


def extreme_values(unbiased: np.ndarray, estimate: np.ndarray,
                   rate: float = EXTREME_RATE) -> np.ndarray:
    """Mask of the values a filter over-suppressed: with r = f~ − f^ the amount the filter took
    from each value and σ_r = 1.4826 · MAD(r) its robust noise scale (peaks are outliers of r,
    not part of its spread), the values with r_v − median(r) > Φ⁻¹(1 − rate/d) · σ_r. [Fang23]
    §V-D: large frequencies are over-suppressed when the noise spectrum fluctuates from its
    estimate, "these extreme values are easy to identify and we can just leave [them] unchanged
    after filtering". Under Gaussian residual noise about `rate` windows in 1 keep a value that
    is no extreme. None when σ_r is 0."""
    from scipy.stats import norm  # scipy only where the option is used

    residual = np.asarray(unbiased, dtype=np.float64) - np.asarray(estimate, dtype=np.float64)
    centre = np.median(residual)
    scale = 1.482602218505602 * np.median(np.abs(residual - centre))
    if not scale > 0:
        return np.zeros(residual.size, dtype=bool)
    return residual - centre > norm.ppf(1.0 - rate / residual.size) * scale


def _runner(method: str) -> Callable[..., EstimatorOutput]:
    def run(unbiased: np.ndarray, noise: SupportNoise, protocol: FrequencyOracle,
            **params: Any) -> EstimatorOutput:
        result = fit(method, unbiased, noise, protocol, **params)
        std_error = result.filter.standard_error(unbiased, noise, protocol)
        if result.kept is not None:  # the extremes keep f~ and the exact error of f~ (eq. 2)
            exact = standard_error(error_plug_in(np.asarray(unbiased, dtype=np.float64)), noise)
            std_error = np.where(result.kept, exact, std_error)
        return EstimatorOutput(result.estimate, std_error, result.iterations,
                               result.last_change)
    run.__name__ = f"run_{method.replace('-', '_')}"
    return run


#: Every Wiener method's `keep_extremes` option (`extreme_values`; off by default).
KEEP_EXTREMES = {"keep_extremes": Parameter(
    False, lambda v: isinstance(v, bool) or (is_int(v) and v in (0, 1))
    or (isinstance(v, float) and v in (0.0, 1.0)),  # a record's params give back 0.0 / 1.0
    "true or false", bool)}


def _iterations(default: int) -> Parameter:
    return Parameter(default, lambda v: is_int(v) and 0 <= v <= MAX_ITERATIONS,
                     f"an integer in [0, {MAX_ITERATIONS}]")


METHODS.register(EstimatorMethod(
    "dw", FREQUENCY, _runner("dw"), dict(KEEP_EXTREMES), ordinal=True,
    summary="Direct Wiener deconvolution [Fang23] §IV-C"))
METHODS.register(EstimatorMethod(
    "iiw", FREQUENCY, _runner("iiw"), {"iterations": _iterations(30), **KEEP_EXTREMES},
    ordinal=True,
    summary="Improved Iterative Wiener [Fang23] Algorithm 1 (30 iterations)"))
METHODS.register(EstimatorMethod(
    "iiw-g", FREQUENCY, _runner("iiw-g"), {"iterations": _iterations(10), **KEEP_EXTREMES},
    ordinal=True,
    summary="IIW started from |G|^2 [Fang23] §IV-C (10 iterations, §V-B)"))
METHODS.register(EstimatorMethod(
    "amrp", FREQUENCY, _runner("amrp"),
    {"permutations": Parameter(100, lambda v: is_int(v) and 1 <= v <= MAX_PERMUTATIONS,
                               f"an integer in [1, {MAX_PERMUTATIONS}]"),
     "seed": Parameter(0, lambda v: is_int(v) and 0 <= v < 2 ** 63, "an integer in [0, 2^63)"),
     **KEEP_EXTREMES},
    ordinal=True, summary="DW averaged over seeded random permutations [Fang23] §IV-C"))
METHODS.register(EstimatorMethod(
    "smooth", FREQUENCY, _runner("smooth"), dict(KEEP_EXTREMES), ordinal=True,
    summary="the (1/4, 1/2, 1/4) smoothing baseline [Fang23] eq. 25"))
METHODS.register(EstimatorMethod(
    "gf-dw", FREQUENCY, _runner("gf-dw"),
    {"sigma": Parameter(3.0, lambda v: is_finite_number(v) and 0 < v <= MAX_SIGMA,
                        f"a number in (0, {MAX_SIGMA:g}]"), **KEEP_EXTREMES},
    ordinal=True, summary="Gaussian filter then DW [Fang23] Appendix C (sigma 3: GF3-DW)"))
