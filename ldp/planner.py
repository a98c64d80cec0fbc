"""Which frequency oracle to use for a metric: every protocol's exact cost and accuracy.

For a privacy level ε and domain size d, every protocol of ldp_telemetry.ldp.protocols is instantiated with
the parameters it really uses (OLH's, RLH's and BLH's g, SS's and RWS's k, HR's K) and
reported with p*, q*, the analytical n·MSE of [Fang25] eq. 4, the largest
Avro-encoded payload, and the aggregation cost.

Everything the plan shows comes from the protocol classes themselves (n_mse, parameter,
payload_bytes, server_cost, aggregation_rank), so a newly registered protocol is planned
without any change here.

Recommendation (`recommend`): the protocol with the lowest n·MSE; protocols whose n·MSE is
within a relative 1e-9 of it tie, and ties go to the fewest bytes per report, then to the
cheaper aggregation (the smaller `aggregation_rank`), then to registry order. Eq. 4 with the rounded parameters is the
quantity the [Fang25] §4.4 guideline approximates, so this rule reproduces the guideline and
settles its open choices exactly:

- d < sqrt(2 e^{2ε} + 1/4) + 3/2, where the optimal k is 1: GRR, SS and RWS have the same
  n·MSE (SS and RWS with k = 1 are GRR) and GRR has the smallest report -> GRR;
- larger d: SS and RWS share the lowest n·MSE; SS wins while its k items encode smaller than
  RWS's seed and y, RWS once the O(d) subset is the larger report ("RWS is all you need");
- `max_bytes` excludes protocols with larger reports (e.g. the O(d) ones), after which the
  same rule picks among the rest (for a large d, RLH or HR/BLH at a small ε).

The guideline's own text (`guideline`) is reported beside the choice.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ldp_telemetry.ldp.errors import ConfigError
from ldp_telemetry.ldp.protocols import PROTOCOLS, make_protocol

_TIE = 1e-9


@dataclass(frozen=True)
class ProtocolPlan:
    """One protocol's row of the plan."""

    protocol: str
    parameter: str
    p_star: float
    q_star: float
    n_mse: float
    mse: float | None
    bytes_per_report: int
    server_cost: str
    recommended: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


def plan(epsilon: float, d: int, n: int | None = None, max_bytes: int | None = None
         ) -> list[ProtocolPlan]:
    """Every protocol's plan row, in registry order, the recommended one flagged."""
    if n is not None and n <= 0:
        raise ConfigError(f"n must be a positive number of reports, got {n}", field="n")
    rows = []
    for name in PROTOCOLS:
        protocol = make_protocol(name, epsilon, d)
        n_mse = protocol.n_mse()
        rows.append(ProtocolPlan(name, protocol.parameter, protocol.p_star,
                                 protocol.q_star, n_mse, None if n is None else n_mse / n,
                                 protocol.payload_bytes(), protocol.server_cost))
    choice, _ = _choose(rows, max_bytes)
    return [ProtocolPlan(**{**row.as_dict(), "recommended": row.protocol == choice})
            for row in rows]


def recommend(epsilon: float, d: int, max_bytes: int | None = None) -> tuple[str, str]:
    """(protocol name, reason) by the rule of the module docstring."""
    return _choose(plan(epsilon, d), max_bytes)


def _choose(rows: list[ProtocolPlan], max_bytes: int | None) -> tuple[str, str]:
    allowed = [r for r in rows if max_bytes is None or r.bytes_per_report <= max_bytes]
    if not allowed:
        smallest = min(r.bytes_per_report for r in rows)
        raise ConfigError(f"no protocol fits in {max_bytes} bytes per report "
                          f"(the smallest needs {smallest})", field="max_bytes")
    best = min(r.n_mse for r in allowed)
    tied = [r for r in allowed if r.n_mse <= best * (1 + _TIE)]
    chosen = min(tied, key=lambda r: (r.bytes_per_report, PROTOCOLS[r.protocol].aggregation_rank))
    others = [r.protocol for r in tied if r is not chosen]
    reason = f"lowest analytical n·MSE {chosen.n_mse:.4g}"
    if others:
        reason += f" (tied with {', '.join(others)}; fewest bytes per report: " \
                  f"{chosen.bytes_per_report})"
    if max_bytes is not None:
        reason += f" among protocols with at most {max_bytes} bytes per report"
    return chosen.protocol, reason


def guideline(epsilon: float, d: int) -> str:
    """The protocol-choice guideline at the end of [Fang25] §4.4."""
    threshold = math.sqrt(2 * math.exp(2 * epsilon) + 0.25) + 1.5
    if d < threshold:
        return f"d < {threshold:.4g} (optimal k = 1): GRR, SS and RWS have the optimal MSE"
    return (f"d > {threshold:.4g}: SS or RWS if O(d) communication is acceptable, otherwise "
            f"RLH or RWS; RWS if one protocol must serve every domain size")
