"""An eleventh protocol needs only its own class and a registry entry.

`URR` below (randomised response with a uniform fallback) is a complete, correct pure protocol
written only in this file: it keeps v with probability λ = (e^ε - 1)/(e^ε + d - 1), otherwise it
reports a value drawn uniformly from all of [0, d) (v included). Then a report supports v with
p* = λ + (1 - λ)/d = e^ε/(e^ε + d - 1) and any other value with q* = (1 - λ)/d = 1/(e^ε + d - 1):
ε-LDP with the output distribution of GRR, reached by a different mechanism.

Registered in PROTOCOLS with monkeypatch (the one line its module would add to
ldp_telemetry.ldp.protocols.REGISTERED), it is planned, queried and finalized by the unchanged
planner, queries, registry and finalize modules.
"""
from __future__ import annotations

import io
import math
from collections.abc import Iterator
from typing import ClassVar

import fastavro
import numpy as np
import pytest

from ldp_telemetry.ldp.config import planner
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation import queries
from ldp_telemetry.ldp.estimation.postprocess import error_plug_in
from ldp_telemetry.ldp.protocols import PROTOCOLS, make_protocol
from ldp_telemetry.ldp.protocols.base import (BRANCH_BYTES, FREQUENCY, Columns, FrequencyOracle,
                                              int_column, varint_bytes)
from ldp_telemetry.ldp.protocols.noise import standard_error, unbiased_estimate


class URR(FrequencyOracle):
    """Randomised response with a uniform fallback (module docstring)."""

    name: ClassVar[str] = "urr"
    payload_schema: ClassVar[dict] = {"type": "record", "name": "UrrPayload", "fields": [
        {"name": "value", "type": "int", "doc": "Reported value in [0, d)."}]}
    payload_rule: ClassVar[str] = "URR value must lie in [0, d)"
    server_cost: ClassVar[str] = "O(n + d): histogram of the reported values"
    aggregation_rank: ClassVar[float] = 15

    @property
    def keep(self) -> float:
        e = math.exp(self.epsilon)
        return (e - 1) / (e + self.d - 1)

    @property
    def p_star(self) -> float:
        return self.keep + (1 - self.keep) / self.d

    @property
    def q_star(self) -> float:
        return (1 - self.keep) / self.d

    def _report_variance(self, w):
        # One supported value per report: Y = w_y, Var = E[w_y^2] - E[w_y]^2.
        p, q = self.p_star, self.q_star
        mean = p * w + q * (w.sum() - w)
        return p * w ** 2 + q * (np.dot(w, w) - w ** 2) - mean ** 2

    def perturb(self, values, rng):
        values = np.asarray(values, dtype=np.int64)
        uniform = rng.integers(0, self.d, size=values.shape)
        return {"value": np.where(rng.random(values.shape) < self.keep, values, uniform)}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + varint_bytes(self.d - 1)

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return ({"value": v} for v in columns["value"].tolist())

    def payloads_from_avro(self, payloads):
        value = int_column(payloads, "value")
        invalid = (value < 0) | (value >= self.d)
        return {"value": np.where(invalid, 0, value)}, invalid

    def accumulate(self, statistic, columns) -> None:
        statistic += np.bincount(columns["value"], minlength=self.d)


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(PROTOCOLS, URR.name, URR)
    return URR


def exact_output_distribution(protocol: URR, v: int) -> np.ndarray:
    """Pr[y | v] from the mechanism's definition (keep, else uniform over all d values)."""
    out = np.full(protocol.d, (1 - protocol.keep) / protocol.d)
    out[v] += protocol.keep
    return out


@pytest.mark.parametrize("epsilon,d", [(0.5, 2), (1.0, 5), (4.0, 7)])
def test_the_toy_protocol_is_pure_and_epsilon_ldp(epsilon, d):
    protocol = URR(epsilon=epsilon, d=d)
    table = np.array([exact_output_distribution(protocol, v) for v in range(d)])
    assert table.sum(axis=1) == pytest.approx(1.0, abs=1e-12)
    assert np.diag(table) == pytest.approx(protocol.p_star, abs=1e-12)
    assert table[~np.eye(d, dtype=bool)] == pytest.approx(protocol.q_star, abs=1e-12)
    worst = max((table[u] / table[v]).max() for u in range(d) for v in range(d))
    assert worst == pytest.approx(math.exp(epsilon), rel=1e-9)


def test_the_toy_report_variance_matches_the_enumerated_mechanism(registered):
    protocol = make_protocol("urr", 1.0, 6)
    rng = np.random.default_rng(5)
    for w in (rng.normal(size=6), queries.set_indicator(6, [1, 2, 4]), np.ones(6)):
        for x in range(6):
            chances = exact_output_distribution(protocol, x)
            exact = chances @ w ** 2 - (chances @ w) ** 2
            assert queries.report_variance(protocol, w)[x] == pytest.approx(exact, abs=1e-12)


def test_the_planner_plans_and_ranks_the_new_protocol(registered):
    rows = {row.protocol: row for row in planner.plan(2.0, 16, n=1000)}
    assert list(rows) == list(PROTOCOLS) and "urr" in rows
    toy, grr = rows["urr"], rows["grr"]
    # Same output distribution as GRR: same eq. 4, same report size; GRR's aggregation_rank
    # (10) is below URR's (15), so the tie goes to GRR and names URR.
    assert toy.n_mse == pytest.approx(grr.n_mse, rel=1e-12)
    assert toy.bytes_per_report == grr.bytes_per_report == 2
    assert toy.parameter == "" and toy.server_cost == URR.server_cost
    choice, reason = planner.recommend(2.0, 4)
    assert choice == "grr" and "urr" in reason
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(URR, "aggregation_rank", 5)
        assert planner.recommend(2.0, 4)[0] == "urr"


def test_queries_use_the_new_protocols_variance(registered):
    d, n = 8, 5000
    toy, grr = make_protocol("urr", 1.5, d), make_protocol("grr", 1.5, d)
    unbiased = np.random.default_rng(3).dirichlet(np.ones(d))
    window = queries.WindowEstimate.from_unbiased(toy, n, unbiased, "base")
    answer = window.set_sum([0, 3, 5])
    expected = math.sqrt(grr.linear_variance(n, queries.set_indicator(d, [0, 3, 5]),
                                             error_plug_in(unbiased)))
    assert answer.std_error == pytest.approx(expected, rel=1e-10)
    assert window.point(2).std_error == pytest.approx(
        standard_error(error_plug_in(unbiased), toy.noise(n))[2], rel=1e-10)


def test_the_registry_and_finalize_accept_the_new_protocol(registered):
    """Finalize gives the unbiased estimate: each value within 4.5 of its eq. 2 standard
    errors of the truth (false failure about 7e-6 per value, 6e-5 for the 8 values)."""
    registry = parse_registry({"metrics": [{"name": "toy.metric", "protocol": "urr",
                                            "epsilon": 1.0, "domain": {"size": 8}}]})
    config = registry["toy.metric"]
    protocol = config.protocol
    assert isinstance(protocol, URR)
    assert URR.kind == FREQUENCY  # the default "unbiased" fits it
    truth = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])
    n = 40_000
    values = np.repeat(np.arange(8), np.round(truth * n).astype(int))
    columns = protocol.perturb(values, np.random.default_rng(17))
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, columns)
    result = finalize_window(config, statistic, values.size)
    assert result.n == values.size
    assert result.unbiased == pytest.approx(
        unbiased_estimate(statistic, protocol.noise(values.size)), rel=1e-12)
    sigma = np.sqrt(protocol.noise(values.size).variance(truth))
    assert np.all(np.abs(result.unbiased - truth) < 4.5 * sigma)
    assert result.estimate.sum() == pytest.approx(1.0, abs=1e-9)


def test_the_payload_schema_round_trips(registered):
    protocol = make_protocol("urr", 2.0, 300)
    schema = fastavro.parse_schema(URR.payload_schema)
    assert URR.payload_record == "UrrPayload"
    columns = protocol.perturb(np.arange(300), np.random.default_rng(1))
    decoded = []
    for payload in protocol.payloads_to_avro(columns):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, payload)
        assert len(out.getvalue()) + BRANCH_BYTES <= protocol.payload_bytes()
        decoded.append(fastavro.schemaless_reader(io.BytesIO(out.getvalue()), schema))
    back, invalid = protocol.payloads_from_avro(decoded)
    assert not invalid.any() and np.array_equal(back["value"], columns["value"])
