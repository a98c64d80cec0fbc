"""`postprocess: "auto"`: the post-processing chosen per window by replay
(ldp/estimation/replay.py), reported in the record, reproducible, and as good as the best
fixed method on a skewed population."""
from __future__ import annotations

import io

import fastavro
import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation import postprocess as pp
from ldp_telemetry.ldp.estimation.queries import WindowEstimate
from ldp_telemetry.ldp.estimation.replay import CANDIDATES, choose
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.noise import SupportNoise, unbiased_estimate
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.records import BATCH_PANE, window_estimate_record
from ldp_telemetry.schemas import load_schema

#: 2024-03-01T00:00:00Z, the window the records are made for.
HOUR_START_MS = 1_709_251_200_000


def zipf(d: int, s: float = 1.3) -> np.ndarray:
    p = 1.0 / np.arange(1, d + 1) ** s
    return p / p.sum()


def config(postprocess, d: int = 256, epsilon: float = 1.0):
    return parse_registry({"metrics": [{"name": "m", "protocol": "oue", "epsilon": epsilon,
                                        "domain": {"size": d},
                                        "postprocess": postprocess}]})["m"]


def record_of(postprocess, n: int = 20_000, seed: int = 3) -> dict:
    cfg = config(postprocess)
    rng = np.random.default_rng(seed)
    statistic = cfg.protocol.new_statistic()
    cfg.protocol.accumulate(statistic, cfg.protocol.perturb(rng.choice(256, n, p=zipf(256)),
                                                            rng))
    return window_estimate_record(cfg, finalize_window(cfg, statistic, n), HOUR_START_MS,
                                  HOUR_START_MS + 3_600_000, BATCH_PANE).json_value()


@pytest.mark.parametrize("method", ["auto", "auto-top", "auto-sets"])
def test_the_record_names_the_choice_and_round_trips_through_avro(method):
    record = record_of(method)
    post = record["postprocess"]
    assert post["method"] == method and post["chosen"] in CANDIDATES
    assert set(post["expected_mse"]) == set(CANDIDATES)
    assert post["expected_mse"][post["chosen"]] == min(post["expected_mse"].values())
    unbiased = np.asarray(record["unbiased_estimate"])
    noise = make_protocol("oue", 1.0, 256).noise(record["n"])
    np.testing.assert_allclose(record["estimate"], pp.apply(post["chosen"], unbiased, noise))
    schema = fastavro.parse_schema(load_schema("window_estimate"))
    buffer = io.BytesIO()
    fastavro.writer(buffer, schema, [record])
    buffer.seek(0)
    (read,) = list(fastavro.reader(buffer))
    assert read["postprocess"]["chosen"] == post["chosen"]
    # ldp query re-runs the record's method on the same window: the same choice, the same values
    again = WindowEstimate.from_record(EstimateRecord.from_avro(read))
    np.testing.assert_allclose(again.with_method(again.spec).estimate, record["estimate"])


def test_a_fixed_method_reports_no_choice_and_old_records_read():
    record = record_of("norm-sub")
    assert "chosen" not in record["postprocess"]
    full = load_schema("window_estimate")
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(full), [record])
    buffer.seek(0)
    (read,) = list(fastavro.reader(buffer))
    assert read["postprocess"]["chosen"] is None and read["postprocess"]["expected_mse"] is None


def test_parameters_are_checked_and_an_empty_window_keeps_base():
    for bad, name in [({"method": "auto-top", "k": 0}, "k"),
                      ({"method": "auto", "replicates": 0}, "replicates"),
                      ({"method": "auto-sets", "fraction": 1.5}, "fraction")]:
        with pytest.raises(RegistryError, match=f"field 'postprocess'.*{name}"):
            config(bad)
    noise = make_protocol("oue", 1.0, 8).noise(0)
    assert choose(np.full(8, np.nan), noise).method == "base"


def test_auto_is_near_the_best_fixed_method_and_better_than_base_on_zipf():
    """OUE, ε = 1, d = 256, n = 20,000, a Zipf(1.3) population; 12 seeded windows, each
    post-processed by every candidate and by the replay's choice. The issue's goal per query
    type: the mean squared error within 10% of the best fixed method's, never worse than
    Base's. Deterministic (fixed seeds): a failure means the choice got worse, not chance. At
    these seeds auto is the best method on the full distribution (0.18 of Base's MSE) and
    5.8% above the best on the top 10, 0.05% above Base's top-10 MSE (Base, Base-Pos and Norm
    differ by less than their noise on the top values; the 1% allowed over Base is that)."""
    d, n = 256, 20_000
    protocol = make_protocol("oue", 1.0, d)
    noise = protocol.noise(n)
    rng = np.random.default_rng(12)
    counts = rng.multinomial(n, zipf(d))
    truth = counts / n
    top = np.argsort(-truth)[:10]
    errors = {query: dict.fromkeys([*CANDIDATES, "auto"], 0.0) for query in ("full", "top")}
    for _ in range(12):
        support = rng.binomial(counts, protocol.p_star) + rng.binomial(n - counts,
                                                                       protocol.q_star)
        unbiased = unbiased_estimate(support, noise)
        outputs = {m: pp.apply(m, unbiased, noise) for m in CANDIDATES}
        outputs_auto = {"full": pp.apply(choose(unbiased, noise, "full").method, unbiased,
                                         noise),
                        "top": pp.apply(choose(unbiased, noise, "top").method, unbiased, noise)}
        for query, pick in (("full", slice(None)), ("top", top)):
            for method, output in [*outputs.items(), ("auto", outputs_auto[query])]:
                errors[query][method] += np.mean((output[pick] - truth[pick]) ** 2)
    for query, found in errors.items():
        best = min(found[m] for m in CANDIDATES)
        assert found["auto"] <= 1.10 * best, (query, found)
        assert found["auto"] <= 1.01 * found["base"], (query, found)


@pytest.mark.parametrize("name", ["cms", "flh"])
def test_a_pooled_oracles_replay_carries_the_collision_error(name):
    """A pooled-hash oracle's estimate carries the pool's collision error beside eq. 2, and
    the replay must too, or `auto` would choose among methods for a noise far below the
    window's. Here (k = 64 hashes into m = 16 buckets, n = 10⁶, ε = 4) the collision term is
    most of the variance, so Base's replayed error must be the mean of the full variance,
    (1/d) Σ_v noise.variance(f) — not eq. 2 alone. Base's mean squared error over R = 100
    replays of d = 64 values has a relative standard error of about sqrt(2 / (R d)) = 1.8%
    for normal errors (more for the skewed squares of the few large values); 15% is more than
    six of them (false failures well below 10⁻⁶), while eq. 2 alone is below half of it."""
    d, n = 64, 1_000_000
    protocol = make_protocol(name, 4.0, d, hashes=64, buckets=16)
    f = zipf(d)
    noise = protocol.noise(n).given(f)
    full = float(np.mean(noise.variance(f)))
    eq2 = float(np.mean(SupportNoise.variance(noise, f)))
    assert eq2 < 0.5 * full
    choice = choose(f, noise, "full", replicates=100, seed=5)
    assert choice.expected_mse["base"] == pytest.approx(full, rel=0.15)
