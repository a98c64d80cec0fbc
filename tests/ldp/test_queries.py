"""Queries on window estimates (ldp/estimation/queries.py): semantics, errors and exact set-sum
variances.

The variance checks perturb a fixed population with the real protocols (perturb, accumulate,
support_counts, unbiased_estimate), R times with a fixed seed, and compare the sample variance
s^2 of a linear answer with the formula at the true distribution. For a near-normal answer
(R - 1) s^2 / sigma^2 is chi-square with R - 1 degrees of freedom, so s^2 / sigma^2 has standard
deviation sqrt(2 / (R - 1)); a check fails beyond 4.5 of those, a false-failure rate below 1e-5
per check (chi-square with R = 3000: 1.4e-6 below, 7e-6 above; about 4e-4 over this file's 48
such checks). The closed forms are also checked exactly, to 1e-12, against an enumeration of
every output of each protocol's mechanism on a small domain.
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
from scipy import stats

from ldp_telemetry.ldp.estimation import queries
from ldp_telemetry.ldp.estimation.frequency_bands import top_k_declared, top_k_oracle
from ldp_telemetry.ldp.estimation.postprocess import METHODS, PostprocessSpec, project_to_simplex
from ldp_telemetry.ldp.estimation.queries import WindowEstimate, linear_variance, report_variance
from ldp_telemetry.ldp.protocols import PROTOCOLS, hashing, make_protocol
from ldp_telemetry.ldp.protocols.hr import hadamard_parity
from ldp_telemetry.ldp.protocols.noise import standard_error, unbiased_estimate

D = 20
POPULATION = np.array([110, 75, 55, 40, 30, 22, 17, 12, 9, 7,
                       6, 5, 4, 3, 2, 1, 1, 1, 0, 0])  # n = 400
REPEATS = 3000
Z = 4.5
#: The privacy level each protocol is simulated at (d = 20: HR has K = 32, SS k = 5, RWS k = 2).
EPSILONS = {"grr": 1.0, "oue": 1.0, "sue": 1.0, "rue": 2.0, "olh": 2.0, "blh": 1.0, "rlh": 2.0,
            "hr": 1.0, "ss": 1.0, "rws": 2.0, "cms": 2.0, "hcms": 1.0, "flh": 2.0}
#: Weights whose answer has variance 0: every report supports the same number of values.
FIXED_SUPPORT_SIZE = {"grr", "ss", "rws"}


def simulate_unbiased(protocol, values: np.ndarray, repeats: int, seed: int) -> np.ndarray:
    """(repeats, d) unbiased estimates, each from a fresh perturbation of the same users."""
    rng = np.random.default_rng(seed)
    n = values.size
    noise = protocol.noise(n)
    out = np.empty((repeats, protocol.d))
    if hasattr(protocol, "with_pool"):
        # A pool of public hashes: unbiasedness and variance hold over its draw
        # (ldp.protocols.hash_pool), so every repeat draws a fresh pool.
        for r in range(repeats):
            pooled = protocol.with_pool(int(rng.integers(0, 2**63)))
            statistic = pooled.new_statistic()
            pooled.accumulate(statistic, pooled.perturb(values, rng))
            out[r] = unbiased_estimate(pooled.support_counts(statistic), noise)
        return out
    columns = protocol.perturb(np.tile(values, repeats), rng)
    for r in range(repeats):
        statistic = protocol.new_statistic()
        protocol.accumulate(statistic, {k: v[r * n:(r + 1) * n] for k, v in columns.items()})
        out[r] = unbiased_estimate(protocol.support_counts(statistic), noise)
    return out


@functools.cache
def simulated(name: str):
    """(protocol, R unbiased estimates) of POPULATION under protocol `name`, seeded."""
    protocol = make_protocol(name, EPSILONS[name], D)
    values = np.repeat(np.arange(D), POPULATION)
    seed = sorted(EPSILONS).index(name)
    return protocol, simulate_unbiased(protocol, values, REPEATS, seed)


def weight_cases():
    whole = np.ones(D)
    contiguous = queries.set_indicator(D, range(4, 12))
    scattered = queries.set_indicator(D, np.random.default_rng(7).choice(D, 6, replace=False))
    return {"range 4..11": contiguous, "random 6": scattered,
            "top 3": queries.set_indicator(D, [0, 1, 2]),
            "norm on range": contiguous - contiguous.sum() / D, "whole domain": whole}


def test_every_protocol_is_simulated():
    assert set(EPSILONS) == set(PROTOCOLS)


@pytest.mark.parametrize("protocol_name", sorted(EPSILONS))
def test_linear_variance_matches_simulation(protocol_name):
    protocol, estimates = simulated(protocol_name)
    f = POPULATION / POPULATION.sum()
    tolerance = Z * math.sqrt(2.0 / (REPEATS - 1))
    n = int(POPULATION.sum())
    for case, weights in weight_cases().items():
        answers = estimates @ weights
        expected = linear_variance(protocol, n, weights, f)
        observed = answers.var(ddof=1)
        if protocol_name in FIXED_SUPPORT_SIZE and case == "whole domain":
            assert expected == pytest.approx(0.0, abs=1e-15)
            assert observed == pytest.approx(0.0, abs=1e-20)
            continue
        assert abs(observed / expected - 1) < tolerance, (case, observed, expected)


def test_naive_sum_of_eq2_holds_for_independent_supports_only():
    """GRR's support indicators are negatively correlated (a report names one value), so a range
    sum varies less than the naive sum of eq. 2. Unary encoding and local hashing support
    distinct values independently (local hashing: through the keyed hash), so there the naive
    sum is exact; OLH's simulation confirms it for the real hash."""
    f = POPULATION / POPULATION.sum()
    n = int(POPULATION.sum())
    contiguous = queries.set_indicator(D, range(4, 12))
    protocol, estimates = simulated("grr")
    naive = float(protocol.noise(n).variance(f) @ contiguous)
    observed = (estimates @ contiguous).var(ddof=1)
    assert observed / naive - 1 < -0.15, (observed, naive)
    protocol, estimates = simulated("olh")
    naive = float(protocol.noise(n).variance(f) @ contiguous)
    observed = (estimates @ contiguous).var(ddof=1)
    # A sample variance of R runs has relative standard error sqrt(2/(R-1)); 4.5 of them
    # (false-failure rate below 1e-5).
    assert abs(observed / naive - 1) < Z * np.sqrt(2 / (REPEATS - 1)), (observed, naive)
    for name in ("oue", "sue", "rue", "olh", "blh", "rlh"):  # independent support indicators
        protocol = make_protocol(name, EPSILONS[name], D)
        naive = float(protocol.noise(n).variance(f) @ contiguous)
        assert linear_variance(protocol, n, contiguous, f) == pytest.approx(naive, rel=1e-12)


def test_grr_set_variance_closed_form():
    protocol = make_protocol("grr", 1.5, 10)
    p, q, n = protocol.p_star, protocol.q_star, 1000
    f = np.linspace(1, 2, 10)
    f /= f.sum()
    indices = [1, 4, 5, 8]
    k, f_s = len(indices), f[indices].sum()
    p_in = p + (k - 1) * q
    closed = (f_s * p_in * (1 - p_in) + (1 - f_s) * k * q * (1 - k * q)) / (n * (p - q) ** 2)
    assert linear_variance(protocol, n, queries.set_indicator(10, indices), f) == \
        pytest.approx(closed, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# Exact checks of the closed forms


def support_distribution(protocol, x: int) -> list[tuple[float, np.ndarray]]:
    """Every (probability, support indicator over [0, d)) of one report of true value x,
    enumerated from the mechanism's definition (local hashing: over all functions [0, d) ->
    [0, g), a fully random hash; RWS: over all k-subsets as the wheel subset)."""
    d, p = protocol.d, protocol.p_star
    out = []

    def indicator(members):
        return queries.set_indicator(d, list(members))

    if protocol.name == "grr":
        out = [(p if y == x else protocol.q_star, indicator([y])) for y in range(d)]
    elif protocol.name in ("oue", "sue", "rue"):
        for bits in itertools.product((0, 1), repeat=d):
            bits = np.array(bits, dtype=float)
            rates = np.full(d, protocol.q_star)
            rates[x] = p
            out.append((float(np.prod(np.where(bits == 1, rates, 1 - rates))), bits))
    elif protocol.name in ("olh", "blh", "rlh"):
        g = protocol.g
        for h in itertools.product(range(g), repeat=d):
            h = np.array(h)
            for y in range(g):
                chance = p if y == h[x] else (1 - p) / (g - 1)
                out.append((chance / g ** d, (h == y).astype(float)))
    elif protocol.name == "flh":  # a fresh hash, as local hashing's
        g = protocol.m
        for h in itertools.product(range(g), repeat=d):
            h = np.array(h)
            for y in range(g):
                chance = p if y == h[x] else (1 - p) / (g - 1)
                out.append((chance / g ** d, (h == y).astype(float)))
    elif protocol.name == "cms":
        m = protocol.m
        for h in itertools.product(range(m), repeat=d):
            h = np.array(h)
            for bits in itertools.product((0, 1), repeat=m):
                bits = np.array(bits)
                rates = np.full(m, 1 - p)
                rates[h[x]] = p
                chance = float(np.prod(np.where(bits == 1, rates, 1 - rates)))
                out.append((chance / m ** d, bits[h].astype(float)))
    elif protocol.name == "hcms":
        m = protocol.m
        for h in itertools.product(range(m), repeat=d):
            h = np.array(h)
            for row in range(m):
                for bit in (0, 1):
                    chance = p if bit == hadamard_parity(row, h[x]) else 1 - p
                    members = hadamard_parity(row, h) == bit
                    out.append((chance / (m * m ** d), members.astype(float)))
    elif protocol.name == "hr":
        K = protocol.K
        for row in range(1, K):
            for bit in (0, 1):
                chance = p if bit == hadamard_parity(row, x) else 1 - p
                members = hadamard_parity(row, np.arange(d)) == bit
                out.append((chance / (K - 1), members.astype(float)))
    elif protocol.name == "ss":
        k = protocol.k
        for subset in itertools.combinations(range(d), k):
            chance = (p / math.comb(d - 1, k - 1) if x in subset
                      else (1 - p) / math.comb(d - 1, k))
            out.append((chance, indicator(subset)))
    elif protocol.name == "rws":
        k = protocol.k
        for wheel in itertools.combinations(range(d), k):
            for u in range(d):
                chance = p / k if u in wheel else (1 - p) / (d - k)
                out.append((chance / math.comb(d, k), indicator((s - u + x) % d for s in wheel)))
    return out


#: (epsilon, d) of each exact enumeration: small enough to list every output.
EXACT_CASES = {"grr": (1.0, 6), "oue": (1.0, 6), "sue": (0.5, 6), "rue": (2.0, 6),
               "olh": (1.0, 6), "blh": (1.0, 6), "rlh": (2.0, 5), "hr": (1.0, 6),
               "ss": (0.5, 7), "rws": (1.0, 7), "cms": (1.0, 5), "hcms": (1.0, 5),
               "flh": (1.0, 5)}
#: Pooled-hash oracles with m = 4 buckets, so that every hash [0, d) -> [0, m) can be listed.
EXACT_BUCKETS = {"cms": 4, "hcms": 4}


@pytest.mark.parametrize("protocol_name", sorted(EXACT_CASES))
def test_report_variance_is_exact_on_the_enumerated_mechanism(protocol_name):
    protocol = make_protocol(protocol_name, *EXACT_CASES[protocol_name])
    if protocol_name in EXACT_BUCKETS:
        protocol = PROTOCOLS[protocol_name](*EXACT_CASES[protocol_name],
                                            buckets=EXACT_BUCKETS[protocol_name])
    d = protocol.d
    rng = np.random.default_rng(11)
    weight_sets = [rng.normal(size=d), queries.set_indicator(d, [1, 2, 4]),
                   queries.set_indicator(d, [0, 3]) - 2 / d, np.ones(d)]
    for x in range(d):
        outcomes = support_distribution(protocol, x)
        chances = np.array([c for c, _ in outcomes])
        supports = np.array([s for _, s in outcomes])
        assert chances.sum() == pytest.approx(1.0, abs=1e-12)
        support_rates = chances @ supports  # the mechanism has the protocol's p*, q*
        assert support_rates[x] == pytest.approx(protocol.p_star, abs=1e-12)
        assert np.delete(support_rates, x) == pytest.approx(protocol.q_star, abs=1e-12)
        for w in weight_sets:
            y = supports @ w
            mean = chances @ y
            exact = chances @ (y - mean) ** 2
            assert report_variance(protocol, w)[x] == pytest.approx(exact, abs=1e-12), (x, w)


@pytest.mark.parametrize("protocol_name", sorted(PROTOCOLS))
def test_a_single_value_reproduces_eq2(protocol_name):
    n = 1234
    for d in (5, 16, 20):
        protocol = make_protocol(protocol_name, 1.3, d)
        f = np.random.default_rng(d).dirichlet(np.ones(d))
        eq2 = protocol.noise(n).variance(f)
        for v in range(d):
            assert linear_variance(protocol, n, queries.set_indicator(d, [v]), f) == \
                pytest.approx(eq2[v], rel=1e-12)


def test_whole_domain_variance_is_zero_when_the_support_size_is_fixed():
    """GRR supports 1 value, SS and RWS k, HR with d = K exactly K/2: the whole-domain sum is a
    constant. HR with d < K supports a varying number of the d values."""
    f = np.random.default_rng(2).dirichlet(np.ones(16))
    for name in ("grr", "ss", "rws", "hr"):
        for epsilon in (0.5, 1.0, 3.0):
            protocol = make_protocol(name, epsilon, 16)
            assert np.abs(report_variance(protocol, np.ones(16))).max() < 1e-12
            assert linear_variance(protocol, 100, np.ones(16), f) < 1e-12
    hr = make_protocol("hr", 1.0, 12)
    assert report_variance(hr, np.ones(12)).min() > 0.1


def test_subset_selection_with_one_item_is_grr():
    ss, grr = make_protocol("ss", 3.0, 10), make_protocol("grr", 3.0, 10)
    assert ss.k == 1 and ss.p_star == pytest.approx(grr.p_star, rel=1e-12)
    w = np.random.default_rng(4).normal(size=10)
    assert report_variance(ss, w) == pytest.approx(report_variance(grr, w), rel=1e-10)


def test_shifted_wheel_subset_is_uniform():
    """RWS supports (S - u + v) mod d. For a uniform k-subset S and u uniform in S, S - u is
    uniform over the k-subsets that contain 0; for u uniform outside S, over those without 0.
    Exact enumeration: every target subset arises from the same number of (S, u) pairs."""
    for d, k in ((7, 3), (8, 2), (9, 4)):
        inside, outside = {}, {}
        for wheel in itertools.combinations(range(d), k):
            for u in range(d):
                shifted = frozenset((s - u) % d for s in wheel)
                tally = inside if u in wheel else outside
                tally[shifted] = tally.get(shifted, 0) + 1
        assert len(inside) == math.comb(d - 1, k - 1) and set(inside.values()) == {d}
        assert all(0 in subset for subset in inside)
        assert len(outside) == math.comb(d - 1, k) and set(outside.values()) == {d}
        assert not any(0 in subset for subset in outside)


def test_real_rws_and_ss_supports_are_uniform_given_membership():
    """The real clients' support sets (RWS: seeded wheel plus y) for one true value: every
    k-subset holding it has chance p*/C(d-1, k-1), every other (1 - p*)/C(d-1, k). Pearson's
    chi-square test, failing below p-value 1e-6."""
    n, x = 40_000, 2
    for name, epsilon in (("rws", 0.5), ("ss", 0.5)):
        protocol = make_protocol(name, epsilon, 7)
        d, k, p = protocol.d, protocol.k, protocol.p_star
        columns = protocol.perturb(np.full(n, x), np.random.default_rng(5))
        if name == "rws":
            wheels = hashing.seeded_subsets(columns["seed"].view(np.uint64), d, k)
            supports = (wheels + columns["y"][:, None]) % d
        else:
            supports = columns["items"]
        codes = (np.left_shift(1, supports)).sum(axis=1)  # distinct members: a bit mask
        subsets = list(itertools.combinations(range(d), k))
        observed = np.array([np.count_nonzero(codes == sum(1 << v for v in s)) for s in subsets])
        assert observed.sum() == n
        expected = np.array([n * (p / math.comb(d - 1, k - 1) if x in s
                                  else (1 - p) / math.comb(d - 1, k)) for s in subsets])
        assert stats.chisquare(observed, expected).pvalue > 1e-6


# ---------------------------------------------------------------------------------------------
# Query semantics


def window(method="base", protocol_name="oue", n=5000, seed=3, **params) -> WindowEstimate:
    protocol = make_protocol(protocol_name, 1.0, 8)
    f = np.array([0.4, 0.2, 0.15, 0.1, 0.08, 0.04, 0.02, 0.01])
    rng = np.random.default_rng(seed)
    unbiased = f + rng.normal(0, np.sqrt(protocol.noise(n).variance(f)))
    spec = PostprocessSpec(method, tuple(params.items()))
    return WindowEstimate.from_unbiased(protocol, n, unbiased, spec,
                                        labels=list("abcdefgh"), metric="m")


def test_point_query_standard_error_is_the_records():
    w = window()
    record_se = standard_error(project_to_simplex(w.unbiased), w.noise)  # as finalize does
    for i, label in enumerate(w.labels):
        answer = w.point(label)
        assert answer.value == pytest.approx(w.unbiased[i])
        assert answer.std_error == pytest.approx(record_se[i], rel=1e-12)
        assert answer.std_error_kind == "exact" and answer.indices == (i,)
        assert w.point(i) == answer


def test_set_range_and_top_k():
    w = window("norm-sub")
    s = w.set_sum(["b", "d", 6])
    assert s.indices == (1, 3, 6) and s.labels == ("b", "d", "g")
    assert s.value == pytest.approx(w.estimate[[1, 3, 6]].sum())
    assert s.unbiased_value == pytest.approx(w.unbiased[[1, 3, 6]].sum())
    r = w.range_sum("c", 5)
    assert r.indices == (2, 3, 4, 5) and r.value == pytest.approx(w.estimate[2:6].sum())
    assert w.range_sum("c", "c").value == pytest.approx(w.estimate[2])
    top = w.top_k(3)
    assert [a.labels[0] for a in top] == [w.labels[i] for i in np.argsort(-w.estimate)[:3]]
    assert all(a.query == "top-k" for a in top)
    assert [a.value for a in top] == sorted((a.value for a in top), reverse=True)
    assert len(w.top_k(100)) == 8


def test_norm_answers_and_exact_standard_error():
    w = window("norm")
    whole = w.set_sum(range(8))
    assert whole.value == pytest.approx(1.0) and whole.std_error == pytest.approx(0.0, abs=1e-12)
    s = w.set_sum([0, 2])
    delta = (1 - w.unbiased.sum()) / 8
    assert s.value == pytest.approx(w.unbiased[[0, 2]].sum() + 2 * delta)
    weights = queries.set_indicator(8, [0, 2]) - 2 / 8
    f_hat = project_to_simplex(w.unbiased + delta)
    assert s.std_error == pytest.approx(math.sqrt(linear_variance(w.protocol, w.n, weights, f_hat)))
    assert s.std_error_kind == "exact"
    # complement symmetry of a sum-to-one answer
    assert w.set_sum(range(2, 8)).std_error == pytest.approx(w.set_sum([0, 1]).std_error)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_names_its_band(method):
    """Every answer carries the exact band of an unbiased answer to the same query: Norm's own
    answer for norm, the unbiased estimate's for every other method (whose printed answer may
    lie outside it); top-k answers no 95% band, and beside it the conservative band: the
    bootstrap band joined with the rank-conditional one (a pooled-hash oracle: the bootstrap
    band; ldp.estimation.frequency_bands)."""
    w = window(method)
    point, pair = w.point("h"), w.set_sum(["g", "h"])
    base = window("base")
    assert pair.std_error_kind == point.std_error_kind == "exact"
    assert pair.band_method == point.band_method == "exact-variance"
    centre = pair.value if method == "norm" else pair.unbiased_value
    assert (pair.lower95 + pair.upper95) / 2 == pytest.approx(centre)
    assert (pair.upper95 - pair.lower95) / 2 == pytest.approx(1.959963984540054 * pair.std_error)
    if method != "norm":
        assert pair.std_error == pytest.approx(base.set_sum(["g", "h"]).std_error)
        assert (pair.lower95, pair.upper95) == pytest.approx(
            (base.set_sum(["g", "h"]).lower95, base.set_sum(["g", "h"]).upper95))
    assert pair.method == method and dict(pair.params) == dict(w.spec.params)
    assert all(np.isfinite([point.value, point.std_error, pair.value, pair.std_error]))
    top = w.top_k(3)
    reason = top_k_declared(w._chosen_method, w.protocol.epsilon, w.n, top_k_oracle(w.protocol))
    if reason is None:
        assert [(a.band_method, a.lower95, a.upper95) for a in top] == [("none", None, None)] * 3
        assert [a.conservative_method for a in top] == ["rank-conditional-union"] * 3
        assert all(0.0 <= a.conservative_lower <= a.conservative_upper <= 1.0 for a in top)
        # a pooled-hash oracle keeps the union of the bootstrap and the score band
        pooled = window(method, "cms").top_k(3)
        assert [a.conservative_method for a in pooled] == ["bias-corrected-bootstrap"] * 3
        assert [a.band_method for a in pooled] == ["none"] * 3
    else:  # declared without a band (power's, not measured; cells measured below 0.90)
        assert [(a.band_method, a.lower95, a.band_reason) for a in top] == [
            ("none", None, reason)] * 3


def test_post_pos_clips_the_answer():
    w = window("post-pos")
    unbiased = np.where(np.arange(8) == 7, -0.01, w.unbiased)
    w = WindowEstimate.from_unbiased(w.protocol, w.n, unbiased, "post-pos", labels=w.labels)
    assert w.point(7).value == 0.0 and w.point(7).unbiased_value == pytest.approx(-0.01)
    assert w.set_sum([0, 7]).value == pytest.approx(w.unbiased[0] - 0.01)


def test_with_method_reprocesses_from_the_unbiased_estimate():
    w = window("base")
    hyb = w.with_method("norm-hyb", alpha=1.0)
    assert hyb.spec == PostprocessSpec("norm-hyb", (("alpha", 1.0),))
    assert np.allclose(hyb.estimate, hyb.spec.apply(w.unbiased, w.noise))
    assert w.with_method({"method": "norm-sub"}).estimate.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown post-processing method"):
        w.with_method("norm-foo")


def test_from_record_round_trip():
    from ldp_telemetry.ldp.config.registry import parse_registry
    from ldp_telemetry.ldp.engine.finalize import finalize_window
    from ldp_telemetry.output.records import window_estimate_record
    registry = parse_registry({"metrics": [{"name": "m", "protocol": "olh", "epsilon": 1.0,
                                            "domain": {"labels": list("abcd")},
                                            "postprocess": {"method": "base-cut", "alpha": 1}}]})
    config = registry["m"]
    result = finalize_window(config, np.array([300, 250, 240, 210]), 1000)
    record = window_estimate_record(config, result, 1_577_836_800_000, 1_577_923_200_000)
    w = WindowEstimate.from_record(record)
    assert w.spec == config.postprocess and w.protocol == config.protocol
    assert np.allclose(w.estimate, result.estimate)
    assert w.point("b").std_error == pytest.approx(result.std_error[1])


def test_query_errors():
    w = window()
    with pytest.raises(ValueError, match="not a label"):
        w.point("zz")
    with pytest.raises(ValueError, match="outside the domain"):
        w.point(8)
    with pytest.raises(ValueError, match="more than once"):
        w.set_sum(["a", 0])
    with pytest.raises(ValueError, match="at least one value"):
        w.set_sum([])
    with pytest.raises(ValueError, match="empty range"):
        w.range_sum("d", "b")
    with pytest.raises(ValueError, match="positive integer"):
        w.top_k(0)
    with pytest.raises(ValueError, match="no reports"):
        WindowEstimate.from_unbiased(w.protocol, 0, np.full(8, np.nan), "base")
    with pytest.raises(ValueError, match="no support-correlation model"):
        queries.report_variance(type("P", (), {"name": "xyz", "d": 2, "p_star": .6,
                                                "q_star": .4})(), np.ones(2))


@pytest.mark.parametrize("protocol_name, memoize", [
    ("rue", {"lifetime_epsilon": 4.0}),
    ("olh", {"lifetime_epsilon": 4.0, "g": "loloha"}),
    ("rlh", {"lifetime_epsilon": 4.0, "g": "loloha"}),
])
def test_a_memoized_record_is_queried_with_its_own_channel(protocol_name, memoize):
    """A two-stage record names its one-stage protocol; its p* and q* are the composed ones
    (memoized RUE, LOLOHA's g), which the query rebuilds: point answers keep the record's
    standard error and band (output.bands.value_bands), not the one-stage protocol's (before
    the fix: 0.2% and 1% off, and the band with them)."""
    from ldp_telemetry.ldp.config.registry import parse_registry
    from ldp_telemetry.ldp.engine.finalize import finalize_window
    from ldp_telemetry.output.bands import value_bands
    from ldp_telemetry.output.records import window_estimate_record
    registry = parse_registry({"metrics": [{"name": "m", "protocol": protocol_name,
                                            "epsilon": 1.0, "memoize": memoize,
                                            "domain": {"size": 64}}]})
    config = registry["m"]
    n, p, q = 20_000, config.protocol.p_star, config.protocol.q_star
    f = np.random.default_rng(5).dirichlet(np.ones(64))
    counts = np.round(n * (f * p + (1 - f) * q)).astype(np.int64)  # expected support counts
    result = finalize_window(config, counts, n)
    record = window_estimate_record(config, result, 1_577_836_800_000, 1_577_923_200_000)
    assert (record.p_star, record.q_star) == (config.protocol.p_star, config.protocol.q_star)
    w = WindowEstimate.from_record(record)
    assert (w.protocol.p_star, w.protocol.q_star) == (record.p_star, record.q_star)
    lower, upper = value_bands(record)
    for v in (0, 17, 63):
        answer = w.point(v)
        assert answer.std_error == pytest.approx(record.std_error[v], rel=1e-12)
        assert (answer.lower95, answer.upper95) == pytest.approx((lower[v], upper[v]), rel=1e-12)


def test_a_memoized_record_whose_channel_is_unknown_is_refused():
    """p*, q* that no two-stage form of the record's protocol has: an error naming the field,
    not answers with another channel's bands."""
    from types import SimpleNamespace
    record = SimpleNamespace(metric="m", protocol="olh", epsilon=1.0, p_star=0.9, q_star=0.1,
                             privacy={"memoized": True, "lifetime_epsilon": 4.0})
    with pytest.raises(queries.ConfigError, match="states p"):
        queries.record_protocol(record, 64)


@pytest.mark.parametrize("protocol_name", ["cms", "hcms", "flh", "oue"])
@pytest.mark.parametrize("method", ["norm", "norm-sub", "base"])
def test_a_point_answer_has_its_records_value_band(protocol_name, method):
    """A point answer's band is the record's band of the value (output.bands.value_bands) for
    every method; under `norm` a pooled-hash oracle's point was banded around Norm's answer with
    Norm's standard error instead (cms, ε = 2: [0.0889, 0.1183] against the record's
    [0.0897, 0.1196])."""
    from ldp_telemetry.output.bands import value_bands
    from tests.window_records import frequency_record
    # 2,000 reports: at 20,000 the pooled-hash oracles' collision term exceeds
    # frequency_bands.POOL_BIAS_SHARE of the privacy noise and both sides declare no band
    record = frequency_record(protocol_name, 2_000, np.random.default_rng(1), method)
    w = WindowEstimate.from_record(record)
    lower, upper = value_bands(record)
    assert lower[3] is not None
    for v in (3, 40):
        answer = w.point(v)
        assert (answer.lower95, answer.upper95) == pytest.approx((lower[v], upper[v]), rel=1e-9)


@pytest.mark.parametrize("protocol_name", ["cms", "hcms", "flh"])
def test_a_pooled_hash_window_past_the_pool_bias_share_answers_every_sum_without_a_band(
        protocol_name):
    """Where the fixed pool's collision term passes frequency_bands.POOL_BIAS_SHARE of the
    privacy noise (20,000 reports over 64 values, ε = 2), FLH's point, set and range answers
    have no band, with the pool's reason, while CMS's and HCMS's carry the pool-corrected band
    (a value's: the record's; a sum's: Σ_S g with its error given the pool). At 2,000 reports
    all keep theirs. A set of one value was banded where the point of the same value was
    not."""
    from tests.window_records import frequency_record
    corrected = protocol_name != "flh"
    rng = np.random.default_rng(1)
    for n, past in ((2_000, False), (20_000, True)):
        w = WindowEstimate.from_record(frequency_record(protocol_name, n, rng))
        for answer in (w.point(3), w.set_sum([3]), w.set_sum([1, 3, 5]), w.range_sum(2, 9)):
            declared = past and not corrected
            assert (answer.band_method == "none") is declared, (n, answer.query)
            assert (answer.lower95 is None) is declared
            if declared:
                assert "fixed hash pool" in answer.band_reason or (
                    "fixed collision errors" in answer.band_reason)
            elif past:
                assert answer.band_method == "pool-corrected"


def test_top_k_replays_the_method_the_record_says_its_replay_chose():
    """An `auto` record states the method its replay chose (`postprocess.chosen`), which made
    its `estimate`. A record written by an earlier release may name another method than
    today's replay picks on the same window (the pooled-hash oracles' replay gained the
    collision error: over 40 CMS, HCMS and FLH windows 16 choices changed), and the top-k
    bootstrap must replay the method that ranked the record's values, not re-choose: here the
    record names Base, which today's replay does not pick, and its top-k answers must be those
    of a Base window."""
    from dataclasses import replace

    from ldp_telemetry.ldp.config.registry import parse_registry
    from ldp_telemetry.ldp.engine.finalize import finalize_window
    from ldp_telemetry.output.records import window_estimate_record
    config = parse_registry({"metrics": [{
        "name": "m", "protocol": "cms", "epsilon": 2.0, "domain": {"size": 64},
        "sketch": {"k": 16, "m": 64}, "postprocess": "auto"}]})["m"]
    rng = np.random.default_rng(3)
    shape = 1.0 / np.arange(1, 65) ** 1.1
    values = rng.choice(64, size=5000, p=shape / shape.sum())
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, config.protocol.perturb(values, rng))
    result = finalize_window(config, statistic, 5000)
    assert result.postprocess_choice.method != "base"
    record = window_estimate_record(config, result, 1_577_836_800_000, 1_577_923_200_000)
    older = replace(record, estimate=result.unbiased.copy(),
                    postprocess={**record.postprocess, "chosen": "base"})
    expected = WindowEstimate.from_unbiased(config.protocol, 5000, result.unbiased,
                                            "base").top_k(5)
    assert top_k_declared("base", 2.0, 5000) is None
    found = WindowEstimate.from_record(older).top_k(5)
    assert [a.indices for a in found] == [a.indices for a in expected]
    assert [(a.conservative_lower, a.conservative_upper) for a in found] == [
        (a.conservative_lower, a.conservative_upper) for a in expected]
    assert all(a.conservative_lower is not None for a in found)
    # --method post-processes again: the record's choice no longer applies
    assert WindowEstimate.from_record(older).with_method("norm-sub").top_k(5) == \
        WindowEstimate.from_unbiased(config.protocol, 5000, result.unbiased,
                                     "norm-sub").top_k(5)


def test_the_rank_conditional_part_applies_to_pure_one_stage_oracles_only():
    """Top-k answers join the rank-conditional band for every pure one-stage oracle; pooled-hash
    and memoized (two-stage) oracles keep the union (`band_method` bias-corrected-bootstrap)."""
    from ldp_telemetry.ldp.estimation.frequency_bands import rank_conditional_applies
    from ldp_telemetry.ldp.protocols import is_pooled
    from ldp_telemetry.ldp.protocols.memoized import make_memoized_protocol
    for name in PROTOCOLS:
        protocol = make_protocol(name, 1.0, 8)
        assert rank_conditional_applies(protocol) is not is_pooled(name), name
    memoized = make_memoized_protocol("oue", 1.0, 8, 4.0)
    assert not rank_conditional_applies(memoized)
    n = 5_000
    f = np.array([0.4, 0.2, 0.15, 0.1, 0.08, 0.04, 0.02, 0.01])
    unbiased = f + np.random.default_rng(3).normal(0, np.sqrt(memoized.noise(n).variance(f)))
    top = WindowEstimate.from_unbiased(memoized, n, unbiased, "norm-sub").top_k(3)
    assert [a.conservative_method for a in top] == ["bias-corrected-bootstrap"] * 3


def test_top_k_of_an_oracle_declared_at_a_cell_has_no_band_and_says_why():
    """`ldp query --top` on a CMS window at ε = 4 with 10⁶ reports and on an L-GRR (memoized
    GRR) window at ε = 0.5 with 10³ (TOP_K_UNCALIBRATED: a rank fell more than two standard
    errors below 0.95 there, benchmarks/pooled_top_k.py) gives every answer band none with the
    reason; CMS in another cell keeps the union, and GRR and SUE in those cells the
    rank-conditional band (SUE's declaration at ε = 4, n = 10⁶ did not hold on another seed's
    windows: it was removed)."""
    from ldp_telemetry.ldp.protocols.memoized import make_memoized_protocol
    f = np.array([0.4, 0.2, 0.15, 0.1, 0.08, 0.04, 0.02, 0.01])

    def top(protocol, n: int) -> list:
        variance = np.maximum(protocol.noise(n).variance(f), 1e-12)
        unbiased = f + np.random.default_rng(5).normal(0, np.sqrt(variance))
        w = WindowEstimate.from_unbiased(protocol, n, unbiased, PostprocessSpec("norm-sub", ()),
                                         labels=list("abcdefgh"), metric="m")
        return w.top_k(3)
    for protocol, n, named in ((make_protocol("cms", 4.0, f.size), 1_000_000,
                                "cms at ε = 4, n = 1,000,000"),
                               (make_memoized_protocol("grr", 0.5, f.size, 1.0), 1_000,
                                "memoized-grr at ε = 0.5, n = 1,000")):
        declared = top(protocol, n)
        assert [(a.band_method, a.lower95, a.upper95, a.conservative_lower,
                 a.conservative_upper, a.conservative_method) for a in declared] == [
            ("none", None, None, None, None, None)] * 3
        assert all(named in a.band_reason and "benchmarks/pooled_top_k.py" in a.band_reason
                   for a in declared)
    assert [a.conservative_method for a in top(make_protocol("cms", 4.0, f.size), 1_000)] == [
        "bias-corrected-bootstrap"] * 3
    for protocol_name, epsilon, n in (("grr", 0.5, 1_000), ("sue", 4.0, 1_000_000),
                                      ("oue", 4.0, 1_000_000)):
        assert [a.conservative_method
                for a in top(make_protocol(protocol_name, epsilon, f.size), n)
                ] == ["rank-conditional-union"] * 3


@pytest.mark.parametrize(("protocol_name", "source"), [
    ("oue", "benchmarks/selective_top_k.py --unfiltered"), ("cms", "benchmarks/pooled_top_k.py")])
def test_top_k_answers_beyond_the_measured_ranks_and_grid_have_no_band(protocol_name, source):
    """Every top-k band was measured for ranks 1–TOP_K_RANKS, ε 0.5–4 and windows of 10³–10⁶
    reports (within √10): an answer ranked 11th or lower, and every answer of a window at ε = 8
    (10⁵ reports) or of 200 or 5·10⁶ reports, has no band, the reason naming the benchmark;
    ranks 1–10 of a window in the grid keep the band they had at k = 10."""
    from ldp_telemetry.ldp.estimation.frequency_bands import TOP_K_RANKS
    f = np.linspace(1.0, 0.1, 24)
    f /= f.sum()

    def top(epsilon: float, n: int, k: int) -> list:
        protocol = make_protocol(protocol_name, epsilon, f.size)
        unbiased = f + np.random.default_rng(9).normal(
            0, np.sqrt(np.maximum(protocol.noise(n).variance(f), 1e-12)))
        return WindowEstimate.from_unbiased(protocol, n, unbiased,
                                            PostprocessSpec("norm-sub", ()),
                                            metric="m").top_k(k)
    answers = top(1.0, 10_000, 14)
    assert all(a.conservative_method is not None for a in answers[:TOP_K_RANKS])
    assert [(a.conservative_lower, a.conservative_upper) for a in answers[:TOP_K_RANKS]] == [
        (a.conservative_lower, a.conservative_upper) for a in top(1.0, 10_000, TOP_K_RANKS)]
    for rank, answer in enumerate(answers[TOP_K_RANKS:], start=TOP_K_RANKS + 1):
        assert (answer.band_method, answer.lower95, answer.upper95, answer.conservative_lower,
                answer.conservative_method) == ("none", None, None, None, None)
        assert answer.band_reason.startswith(f"no band for the value ranked {rank}:")
        assert source in answer.band_reason
    for epsilon, n in ((8.0, 100_000), (1.0, 200), (1.0, 5_000_000)):
        outside = top(epsilon, n, 3)
        assert all(a.band_method == "none" and "measured for ε 0.5–4" in a.band_reason
                   and source in a.band_reason for a in outside), outside
