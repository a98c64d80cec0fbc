"""ε-LDP of the two-stage (memoized) protocols, by exact enumeration on small domains.

For every memoized protocol the exact channel of each stage is built from its own parameters
(`prr`, `irr`, g and the keyed hash for local hashing, conditioned on the seed, which does not
depend on the input):

- the permanent response alone is ε∞-LDP, tightly;
- one report (PRR then IRR) is ε1-LDP, tightly;
- any number R of reports of one value are at most ε∞-LDP (R = 1..4 enumerated as sequences, and
  for GRR up to R = 60 through the multinomial counts, which carry the whole likelihood), and
  approach ε∞ as R grows;
- the composed report's support marginals are p* for the true value and q* for every other, and
  for the unary encodings the support bits are independent (the joint equals the product of the
  marginals), which `report_variance` relies on; `report_variance` and
  `repeated_report_variance` equal the exact variances computed from the enumerated joints.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ldp_telemetry.ldp.protocols import hashing
from ldp_telemetry.ldp.protocols.memoized import MEMOIZED, make_memoized_protocol

UNARY = ("oue", "sue", "rue")
LOCAL_HASHING = ("olh", "blh", "rlh")
#: (ε1, ε∞) pairs: RAPPOR's defaults, a tight and a wide one.
LEVELS = [(1.07, 4.39), (0.5, 0.8), (0.3, 3.0), (2.0, 2.5)]
SEEDS = np.random.default_rng(19).integers(0, 2**64 - 1, size=16, dtype=np.uint64,
                                            endpoint=True)
TOLERANCE = 1e-9


def grr_matrix(p: float, k: int) -> np.ndarray:
    """The k x k channel keeping the input with p, each other symbol with (1 - p)/(k - 1)."""
    matrix = np.full((k, k), (1 - p) / (k - 1))
    np.fill_diagonal(matrix, p)
    return matrix


def bit_vectors(d: int) -> np.ndarray:
    return np.array(list(itertools.product((0, 1), repeat=d)), dtype=bool)


def unary_matrix(p: float, q: float, d: int) -> np.ndarray:
    """Pr[bit vector | one-hot input x] for every x (rows) and every vector (columns)."""
    bits = bit_vectors(d)
    rows = []
    for x in range(d):
        one = np.where(np.arange(d) == x, p, q)
        rows.append(np.prod(np.where(bits, one, 1 - one), axis=1))
    return np.array(rows)


def unary_transition(p: float, q: float, d: int) -> np.ndarray:
    """Pr[output vector | input vector] of a bitwise stage (1 -> 1 with p, 0 -> 1 with q)."""
    bits = bit_vectors(d)
    probability = np.where(bits, p, q)  # per input vector, per bit: Pr[output bit = 1]
    return np.array([np.prod(np.where(bits, row, 1 - row), axis=1) for row in probability])


def stage_matrices(protocol, seed=None):
    """(PRR, IRR) channel matrices: input x -> PRR, PRR -> report, for one hash seed."""
    d, prr, irr = protocol.d, protocol.prr, protocol.irr
    if protocol.name == "grr":
        return grr_matrix(prr.p, d), grr_matrix(irr.p, d)
    if protocol.name in UNARY:
        return unary_matrix(prr.p, prr.q, d), unary_transition(irr.p, irr.q, d)
    g = protocol.g
    buckets = hashing.local_hash(np.full(d, seed, dtype=np.uint64), np.arange(d), g)
    return grr_matrix(prr.p, g)[buckets], grr_matrix(irr.p, g)


def max_log_ratio(matrix: np.ndarray) -> float:
    """max over outputs and input pairs of ln Pr[o | x] / Pr[o | x'] (rows are inputs)."""
    logs = np.log(matrix)
    return float((logs.max(axis=0) - logs.min(axis=0)).max())


#: LOLOHA's g (`memoize.g: "loloha"`) on local hashing, at the levels above and at the one where
#: it differs from the one-report g most visibly (ε1 = 1, ε∞ = 4: g = 3, not 4).
LOLOHA_LEVELS = [*LEVELS, (1.0, 4.0)]


def build(name: str, report: float, d: int, lifetime: float):
    """make_memoized_protocol, with "olh:loloha" naming local hashing under LOLOHA's g."""
    name, _, g_rule = name.partition(":")
    return make_memoized_protocol(name, report, d, lifetime, g_rule or None)


def protocols(d: int):
    for name in sorted(MEMOIZED):
        for report, lifetime in LEVELS:
            yield pytest.param(name, d, report, lifetime, id=f"{name}-d{d}-{report}-{lifetime}")
    for name in ("olh", "rlh"):
        for report, lifetime in LOLOHA_LEVELS:
            yield pytest.param(f"{name}:loloha", d, report, lifetime,
                               id=f"{name}-loloha-d{d}-{report}-{lifetime}")


def seeds_of(protocol):
    return SEEDS if protocol.name in LOCAL_HASHING else [None]


@pytest.mark.parametrize(("name", "d", "report", "lifetime"), [*protocols(3), *protocols(4)])
def test_each_stage_is_exactly_as_private_as_configured(name, d, report, lifetime):
    protocol = build(name, report, d, lifetime)
    for seed in seeds_of(protocol):
        prr, irr = stage_matrices(protocol, seed)
        assert np.allclose(prr.sum(axis=1), 1) and np.allclose(irr.sum(axis=1), 1)
        composed = prr @ irr
        if protocol.name in LOCAL_HASHING and len(set(np.argmax(prr, axis=1))) == 1:
            continue  # every value in one bucket: the seed hides everything, ε = 0 here
        assert max_log_ratio(prr) == pytest.approx(lifetime, abs=TOLERANCE)
        assert max_log_ratio(composed) == pytest.approx(report, abs=TOLERANCE)


@pytest.mark.parametrize(("name", "d", "report", "lifetime"), protocols(3))
def test_any_number_of_reports_of_one_value_stays_within_the_lifetime_epsilon(name, d, report,
                                                                             lifetime):
    protocol = build(name, report, d, lifetime)
    for seed in seeds_of(protocol)[:4]:
        prr, irr = stage_matrices(protocol, seed)
        epsilons = []
        per_report = irr  # Pr[r_1..r_R | PRR z], one column per sequence, for R = 1, 2, ...
        for _ in range(3 if protocol.name in UNARY else 4):
            reports = np.einsum("xz,zo->xo", prr, per_report)
            epsilons.append(max_log_ratio(reports))
            per_report = np.einsum("zo,zp->zop", per_report, irr).reshape(len(irr), -1)
        if protocol.name in LOCAL_HASHING and len(set(np.argmax(prr, axis=1))) == 1:
            continue
        assert epsilons[0] == pytest.approx(report, abs=TOLERANCE)
        assert max(epsilons) <= lifetime + TOLERANCE
        assert all(b >= a - TOLERANCE for a, b in zip(epsilons[:-1], epsilons[1:], strict=True))


@pytest.mark.parametrize(("report", "lifetime"), LEVELS)
def test_many_grr_reports_approach_but_never_exceed_the_lifetime_epsilon(report, lifetime):
    """R reports of GRR over 3 values: the likelihood depends on the sequence only through its
    counts (c_0, c_1, c_2), so every count vector is an output class (up to R = 60)."""
    d = 3
    protocol = make_memoized_protocol("grr", report, d, lifetime)
    prr, irr = grr_matrix(protocol.prr.p, d), grr_matrix(protocol.irr.p, d)
    log_irr = np.log(irr)
    last = 0.0
    for reports in (1, 5, 20, 60):
        counts = np.array([(a, b, reports - a - b) for a in range(reports + 1)
                           for b in range(reports + 1 - a)])
        log_given_z = counts @ log_irr.T  # (classes, z): ln Pr[sequence | z]
        top = log_given_z.max(axis=1, keepdims=True)
        likelihood = np.exp(log_given_z - top) @ prr.T  # (classes, x), up to a class factor
        ratio = float((np.log(likelihood).max(axis=1) - np.log(likelihood).min(axis=1)).max())
        assert ratio <= lifetime + TOLERANCE
        assert ratio >= last - TOLERANCE
        last = ratio
    assert last > lifetime - 0.05 * lifetime  # 60 reports reveal nearly all the PRR shows


@pytest.mark.parametrize(("name", "d", "report", "lifetime"), [*protocols(3), *protocols(4)])
def test_composed_support_marginals_are_p_star_and_q_star(name, d, report, lifetime):
    protocol = build(name, report, d, lifetime)
    if protocol.name in LOCAL_HASHING:
        for seed in SEEDS:
            prr, irr = stage_matrices(protocol, seed)
            composed = prr @ irr  # Pr[y | x] over the hash range
            buckets = np.argmax(prr, axis=1)
            for x in range(d):
                assert composed[x, buckets[x]] == pytest.approx(protocol.p_star, abs=1e-12)
                assert np.allclose(np.delete(composed[x], buckets[x]),
                                   (1 - protocol.p_star) / (protocol.g - 1), atol=1e-12)
        return
    prr, irr = stage_matrices(protocol)
    composed = prr @ irr
    if protocol.name == "grr":
        expected = np.where(np.eye(d, dtype=bool), protocol.p_star, protocol.q_star)
        assert np.allclose(composed, expected, atol=1e-12)
        return
    bits = bit_vectors(d)
    for x in range(d):
        marginals = composed[x] @ bits
        expected = np.where(np.arange(d) == x, protocol.p_star, protocol.q_star)
        assert np.allclose(marginals, expected, atol=1e-12)
        product = np.prod(np.where(bits, marginals, 1 - marginals), axis=1)
        assert np.allclose(composed[x], product, atol=1e-12), "support bits are not independent"


@pytest.mark.parametrize(("name", "d", "report", "lifetime"),
                         [p for p in protocols(3) if p.values[0] in ("grr", *UNARY)])
def test_report_variances_equal_the_enumerated_ones(name, d, report, lifetime):
    protocol = build(name, report, d, lifetime)
    prr, irr = stage_matrices(protocol)
    supports = (np.eye(d, dtype=bool) if protocol.name == "grr" else bit_vectors(d)).astype(float)
    weights = np.random.default_rng(7).normal(size=d)
    y = supports @ weights  # Y of every output
    composed = prr @ irr
    mean = composed @ y
    exact = composed @ y ** 2 - mean ** 2
    assert np.allclose(protocol.report_variance(weights), exact, atol=1e-12)
    # two reports sharing one PRR: Var[Y1 + Y2] / 2 per report
    pair = np.einsum("xz,zo,zp->xop", prr, irr, irr).reshape(d, -1)
    total = (y[:, None] + y[None, :]).ravel()
    pair_variance = pair @ total ** 2 - (pair @ total) ** 2
    assert np.allclose(protocol.repeated_report_variance(weights, 2), pair_variance / 2,
                       atol=1e-12)


def test_one_stage_and_two_stage_grr_and_sue_share_their_report_channel():
    """L-GRR and L-SUE compose exactly to GRR and SUE at ε1 ([Arcolezi22]: L-GRR, L-SUE)."""
    from ldp_telemetry.ldp.protocols import make_protocol
    for name in ("grr", "sue"):
        two, one = make_memoized_protocol(name, 1.2, 7, 3.0), make_protocol(name, 1.2, 7)
        assert two.p_star == pytest.approx(one.p_star, rel=1e-12)
        assert two.q_star == pytest.approx(one.q_star, rel=1e-12)
    oue = make_memoized_protocol("oue", 1.2, 7, 3.0)
    assert math.log(oue.p_star * (1 - oue.q_star) / ((1 - oue.p_star) * oue.q_star)) == \
        pytest.approx(1.2, abs=TOLERANCE)


@pytest.mark.parametrize("name", sorted(MEMOIZED))
def test_perturb_samples_the_composed_support_probabilities(name):
    """40,000 reports of value 1 over d = 5 by `perturb` (a fresh PRR per row, then the IRR):
    the share supporting 1 is p*, supporting each other value q*. z-tests at |z| < 4.5 (false
    failure ~ 7e-6 per value, 5 values x 7 protocols)."""
    d, n = 5, 40_000
    protocol = make_memoized_protocol(name, 0.9, d, 2.2)
    rng = np.random.default_rng(1_900 + len(name))
    columns = protocol.perturb(np.full(n, 1), rng)
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, columns)
    shares = protocol.support_counts(statistic) / n
    for v, share in enumerate(shares):
        p = protocol.p_star if v == 1 else protocol.q_star
        assert abs(share - p) / math.sqrt(p * (1 - p) / n) < 4.5, (v, share, p)


@pytest.mark.parametrize("name", sorted(MEMOIZED))
def test_the_composed_channel_is_epsilon1_across_the_whole_range(name):
    """From ε = 1e-5 to 20 and d = 2 to 5,000: the composed p*, q* are valid and their ε (the
    unary bits' ln(p*(1 - q*)/((1 - p*) q*)), or ln(p*/q_other) of a GRR-type channel) is ε1 to
    a relative 1e-8."""
    for report, lifetime, d in itertools.product(
            [1e-5, 0.01, 0.3, 1.0, 2.5, 5.0, 10.0, 15.0, 19.5],
            [1e-4, 0.02, 0.5, 1.5, 3.0, 6.0, 12.0, 19.9, 20.0], [2, 3, 10, 105, 5_000]):
        if not report < lifetime:
            continue
        protocol = build(name, report, d, lifetime)
        p, q = protocol.p_star, protocol.q_star
        assert 0 <= q < p <= 1
        if name in UNARY:
            epsilon = math.log(p * (1 - q) / ((1 - p) * q))
        else:
            k = d if name == "grr" else protocol.g
            epsilon = math.log(p * (k - 1) / (1 - p))
        assert epsilon == pytest.approx(report, rel=1e-8), (report, lifetime, d)
