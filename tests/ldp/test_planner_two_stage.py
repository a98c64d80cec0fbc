"""`ldp plan --lifetime-epsilon`: the two-stage comparison's figures are the protocols' own."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ldp_telemetry.ldp.config.planner import two_stage_plan
from ldp_telemetry.ldp.protocols import PROTOCOLS, make_protocol
from ldp_telemetry.ldp.protocols.memoized import MEMOIZED, make_memoized_protocol
from ldp_telemetry.pipelines.cli import main


def test_every_memoizable_protocol_is_compared_with_its_one_stage_form():
    rows = {row.protocol: row for row in two_stage_plan(1.07, 4.39, 105, n=10_000,
                                                        max_values=8)}
    assert set(rows) == set(MEMOIZED)
    assert sum(row.recommended for row in rows.values()) == 1
    for name in ("grr", "oue", "sue"):  # L-GRR, L-OSUE, L-SUE compose to the protocol at ε1
        assert rows[name].n_mse == pytest.approx(rows[name].one_stage_n_mse, rel=1e-9)
        assert rows[name].floor_n_mse == pytest.approx(make_protocol(name, 4.39, 105).n_mse(),
                                                       rel=1e-9)
    assert rows["rue"].n_mse > rows["rue"].one_stage_n_mse
    assert rows["oue"].lifetime_epsilon == pytest.approx(8 * 4.39)
    assert rows["blh"].distinct_values == 2 and rows["blh"].lifetime_epsilon == 2 * 4.39
    assert rows["oue"].mse == pytest.approx(rows["oue"].n_mse / 10_000)


@pytest.mark.parametrize("name", sorted(MEMOIZED))
def test_the_floor_is_the_part_of_the_variance_that_repeated_reports_never_average_away(name):
    """n·MSE of the average of R windows is Σ_v Σ_x f_x Var_R[Y_v | x] / (R d (p* - q*)^2) with
    Var_R the repeated-report variance: its limit as R grows is `floor_n_mse`."""
    protocol = make_memoized_protocol(name, 0.8, 6, 2.5)
    f = np.random.default_rng(3).dirichlet(np.ones(6))
    reports = 10 ** 9
    total = 0.0
    for v in range(6):
        w = np.zeros(6)
        w[v] = 1.0
        total += f @ protocol.repeated_report_variance(w, reports) / reports
    limit = total / (6 * (protocol.p_star - protocol.q_star) ** 2)
    assert limit == pytest.approx(protocol.floor_n_mse(), rel=1e-6)


def test_the_plan_command_prints_the_two_stage_comparison(capsys):
    assert main(["plan", "--report-epsilon", "1.07", "--lifetime-epsilon", "4.39",
                 "--domain", "105", "--max-values", "4"]) == 0
    out = capsys.readouterr().out
    assert "two-stage (memoized): ε1 = 1.07 per report, ε∞ = 4.39" in out
    assert "L-OSUE [Arcolezi22]" in out and "LOLOHA [Arcolezi23]" in out
    assert "17.56" in out  # 4 distinct values x 4.39
    assert main(["plan", "--epsilon", "1", "--lifetime-epsilon", "3", "--domain", "8",
                 "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert {row["protocol"] for row in document["two_stage"]} == set(MEMOIZED)
    assert len(document["one_stage"]) == len(PROTOCOLS)
