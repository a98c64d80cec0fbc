"""Which frequency oracle to use for a metric: every protocol's exact cost and accuracy.

For a privacy level ε and domain size d, every protocol of ldp_telemetry.ldp.protocols is
instantiated with the parameters it really uses (OLH's, RLH's and BLH's g, SS's and RWS's k, HR's K)
and reported with p*, q*, the analytical n·MSE of [Fang25] eq. 4, the largest Avro-encoded payload,
and the aggregation cost.

Everything the plan shows comes from the protocol classes themselves (n_mse, parameter,
payload_bytes, server_cost, aggregation_rank), so a newly registered protocol is planned
without any change here.

Recommendation (`recommend`): the protocol with the lowest n·MSE; protocols whose n·MSE is within a
relative 1e-9 of it tie, and ties go to the protocol without a hash-collision floor (the pooled-hash
oracles CMS, HCMS and FLH add up to `collision` = 1/(k (m - 1)) to the MSE whatever n,
ldp_telemetry.ldp.protocols.hash_pool: FLH ties OLH on n·MSE but is the less accurate), then to the
fewest bytes per report, then to the cheaper aggregation (the smaller `aggregation_rank`), then to
registry order. Eq. 4 with the rounded parameters is the
quantity the [Fang25] §4.4 guideline approximates, so this rule reproduces the guideline and settles
its open choices exactly:

- d < sqrt(2 e^{2ε} + 1/4) + 3/2, where the optimal k is 1: GRR, SS and RWS have the same
  n·MSE (SS and RWS with k = 1 are GRR) and GRR has the smallest report -> GRR;
- larger d: SS and RWS share the lowest n·MSE; SS wins while its k items encode smaller than
  RWS's seed and y, RWS once the O(d) subset is the larger report ("RWS is all you need");
- `max_bytes` excludes protocols with larger reports (e.g. the O(d) ones), after which the
  same rule picks among the rest (for a large d, RLH or HR/BLH at a small ε).

The guideline's own text (`guideline`) is reported beside the choice.

Server cost (`rate`): each row carries the measured cost model of ldp_telemetry.ldp.config.cost —
the reports one core counts per second at d (`reports_per_second`) and the seconds one window's
support counts take (`finalize_seconds`); None for a protocol the model does not measure. Given
a required rate (reports per second per core: a metric's `aggregation_rate`, `ldp plan
--aggregation-rate`), the recommendation is made by the same rule among the protocols whose
modelled rate reaches it; the rule then trades a little accuracy for a protocol that keeps up
(at d = 65,536 RWS counts a few thousand reports per second per core, FLH and HCMS hundreds of
millions).

`two_stage_plan` compares the memoized (two-stage) form of every protocol that has one at a
per-report ε1 and a lifetime ε∞ (ldp_telemetry.ldp.protocols.memoized) with its one-stage form at
ε1: the accuracy each report buys, and the lifetime ε each gives a device.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from ldp_telemetry.ldp.base.errors import ConfigError, RegistryError
from ldp_telemetry.ldp.base.validation import MAX_DOMAIN_SIZE, is_int
from ldp_telemetry.ldp.config.cost import aggregation_rate_problem, cost_model, sketch_costs
from ldp_telemetry.ldp.config.memoize import MAX_MEMO_VALUES
from ldp_telemetry.ldp.protocols import PROTOCOLS, FrequencyOracle, is_pooled, make_protocol
from ldp_telemetry.ldp.protocols.hash_pool import HashPool, sketch_arguments

if TYPE_CHECKING:  # imported where it is used (`_two_stage`): a name for the checker only
    from ldp_telemetry.ldp.protocols.memoized import TwoStage

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
    #: the largest MSE the pool's hash collisions add whatever n (0 without a pool)
    collision_mse: float = 0.0
    #: the cost model's reports counted per second per core at d (None: not measured)
    reports_per_second: float | None = None
    #: the cost model's seconds of one window's support counts at d (None: not measured)
    finalize_seconds: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def plan(epsilon: float, d: int, n: int | None = None, max_bytes: int | None = None,
         rate: float | None = None, sketch: Mapping[str, int] | None = None
         ) -> list[ProtocolPlan]:
    """Every protocol's plan row, in registry order, the recommended one flagged.

    `sketch` ({"k": K, "m": M}, either optional; a registry's `sketch`) sets the pool of the
    pooled-hash oracles: their rows show that k and m, the collision term and the costs at
    them (`cost.sketch_costs`); ConfigError naming ``sketch_k`` / ``sketch_m`` when one of
    them cannot take it."""
    _check_sizes(d, n)
    model = cost_model()
    rows = []
    for name in PROTOCOLS:
        protocol = _planned(name, epsilon, d, sketch)
        n_mse = protocol.n_mse()
        floor = float(getattr(protocol, "collision", 0.0))
        if isinstance(protocol, HashPool):
            per_second, finalize = sketch_costs(model, protocol)
        else:
            per_second = model.reports_per_second(name, d)
            finalize = model.finalize_seconds(name, d)
        rows.append(ProtocolPlan(name, protocol.parameter, protocol.p_star,
                                 protocol.q_star, n_mse, None if n is None else n_mse / n + floor,
                                 protocol.payload_bytes(), protocol.server_cost,
                                 collision_mse=floor, reports_per_second=per_second,
                                 finalize_seconds=finalize))
    choice, _ = _choose(rows, max_bytes, rate)
    return [ProtocolPlan(**{**row.as_dict(), "recommended": row.protocol == choice})
            for row in rows]


def _planned(name: str, epsilon: float, d: int, sketch: Mapping[str, int] | None
             ) -> FrequencyOracle:
    """The protocol `name` as planned: a pooled-hash oracle with the `sketch` given."""
    if not sketch or not is_pooled(name):
        return make_protocol(name, epsilon, d)
    try:
        return make_protocol(name, epsilon, d, **sketch_arguments(sketch))
    except RegistryError as error:  # sketch.k -> the setting sketch_k (`ldp plan --sketch-k`)
        setting = (error.field or "sketch").replace(".", "_")
        raise ConfigError(f"{setting} for {name}: {error.message}", setting) from None


def _check_sizes(d: int, n: int | None) -> None:
    """ConfigError for a domain beyond the registry's MAX_DOMAIN_SIZE or a report count below 1
    (d below 2 is the protocols' own check)."""
    if is_int(d) and d > MAX_DOMAIN_SIZE:
        raise ConfigError(f"domain must be at most {MAX_DOMAIN_SIZE:,} (MAX_DOMAIN_SIZE, the "
                          f"largest a registry accepts), got {d:,}", "domain")
    if n is not None and n <= 0:
        raise ConfigError(f"n must be a positive number of reports, got {n}", "n")


def recommend(epsilon: float, d: int, max_bytes: int | None = None,
              rate: float | None = None, sketch: Mapping[str, int] | None = None
              ) -> tuple[str, str]:
    """(protocol name, reason) by the rule of the module docstring (`sketch` as `plan`'s)."""
    return _choose(plan(epsilon, d, sketch=sketch), max_bytes, rate)


def _choose(rows: list[ProtocolPlan], max_bytes: int | None,
            rate: float | None = None) -> tuple[str, str]:
    allowed = [r for r in rows if max_bytes is None or r.bytes_per_report <= max_bytes]
    if not allowed:
        smallest = min(r.bytes_per_report for r in rows)
        raise ConfigError(f"no protocol fits in {max_bytes} bytes per report "
                          f"(the smallest needs {smallest})", "max_bytes")
    if rate is not None:
        problem = aggregation_rate_problem(rate)
        if problem:
            raise ConfigError(f"aggregation_rate {problem}", "aggregation_rate")
        fast = [r for r in allowed if r.reports_per_second is not None
                and r.reports_per_second >= rate]
        if not fast:
            measured = [r for r in allowed if r.reports_per_second is not None]
            top = max(measured, key=lambda r: r.reports_per_second or 0.0,  # each is measured
                      default=None)
            fastest = ("no protocol is measured" if top is None else
                       f"the fastest, {top.protocol}, counts {top.reports_per_second:,.0f}")
            raise ConfigError(f"aggregation_rate: no protocol counts {rate:,.0f} reports per "
                              f"second per core ({fastest})", "aggregation_rate")
        allowed = fast
    best = min(r.n_mse for r in allowed)
    tied = [r for r in allowed if r.n_mse <= best * (1 + _TIE)]
    chosen = min(tied, key=lambda r: (r.collision_mse, r.bytes_per_report,
                                      PROTOCOLS[r.protocol].aggregation_rank))
    others = [r.protocol for r in tied if r is not chosen]
    reason = f"lowest analytical n·MSE {chosen.n_mse:.4g}"
    if others:
        reason += f" (tied with {', '.join(others)}; fewest bytes per report: " \
                  f"{chosen.bytes_per_report})"
    if max_bytes is not None:
        reason += f" among protocols with at most {max_bytes} bytes per report"
    if rate is not None:
        reason += (f" among protocols counting at least {rate:,.0f} reports/s per core "
                   f"({chosen.protocol}: {chosen.reports_per_second:,.0f} by the cost model)")
    return chosen.protocol, reason


def guideline(epsilon: float, d: int) -> str:
    """The protocol-choice guideline at the end of [Fang25] §4.4."""
    threshold = math.sqrt(2 * math.exp(2 * epsilon) + 0.25) + 1.5
    if d < threshold:
        return f"d < {threshold:.4g} (optimal k = 1): GRR, SS and RWS have the optimal MSE"
    return (f"d > {threshold:.4g}: SS or RWS if O(d) communication is acceptable, otherwise "
            f"RLH or RWS; RWS if one protocol must serve every domain size")


@dataclass(frozen=True)
class TwoStagePlan:
    """One protocol's row of the two-stage comparison (`two_stage_plan`)."""

    protocol: str
    construction: str
    parameter: str
    p_star: float
    q_star: float
    n_mse: float
    one_stage_n_mse: float
    floor_n_mse: float
    mse: float | None
    distinct_values: int
    lifetime_epsilon: float
    recommended: bool = False
    #: local hashing's g rule (`memoize.g`): "report" (the one-report g) or "loloha"
    g_rule: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


#: The literature's name of each two-stage construction (ldp_telemetry.ldp.protocols.memoized).
CONSTRUCTIONS = {"grr": "L-GRR [Arcolezi22]", "oue": "L-OSUE [Arcolezi22]",
                 "sue": "L-SUE = RAPPOR [Erlingsson14]", "rue": "RUE then SUE",
                 "olh": "LOLOHA [Arcolezi23]", "blh": "LOLOHA, g=2 [Arcolezi23]",
                 "rlh": "LOLOHA, RLH's g [Arcolezi23]"}


def two_stage_plan(report_epsilon: float, lifetime_epsilon: float, d: int, n: int | None = None,
                   max_values: int | None = None) -> list[TwoStagePlan]:
    """Every memoizable protocol at per-report ε1 and lifetime ε∞ over d values: the composed
    p*, q* and n·MSE ([Fang25] eq. 4 with them), the one-stage n·MSE at ε1 (same per-report
    privacy, no lifetime bound), the floor n·MSE an average over many windows of the same devices
    keeps (the PRR's; 0 for one-stage reports), and the lifetime ε = L·ε∞ with
    L = min(max_values, d or g). Local hashing appears twice where LOLOHA's g differs from the
    one-report g (`g_rule` "report" and "loloha"; ldp_telemetry.ldp.protocols.memoized.loloha_g),
    so that its n·MSE and lifetime ε can be weighed side by side. The lowest two-stage n·MSE
    among the default-g rows is flagged (ties: the smaller lifetime ε, then registry order):
    what `"protocol": "auto"` resolves to, which names a protocol, not a g rule."""
    from ldp_telemetry.ldp.protocols.memoized import (LOCAL_HASHING, LOLOHA_G, MEMOIZED,
                                                      REPORT_G)
    _check_sizes(d, n)
    if max_values is not None and not (is_int(max_values) and 1 <= max_values <= MAX_MEMO_VALUES):
        raise ConfigError(f"max_values must be an integer in [1, {MAX_MEMO_VALUES:,}] "
                          f"(MAX_MEMO_VALUES, as in a registry), got {max_values!r}", "max_values")
    rows = []
    for name in (p for p in PROTOCOLS if p in MEMOIZED):
        one = make_protocol(name, report_epsilon, d)
        rules = [REPORT_G, LOLOHA_G] if name in LOCAL_HASHING else [None]
        seen_g = set()
        for rule in rules:
            two = _two_stage(name, report_epsilon, d, lifetime_epsilon, rule)
            g = getattr(two, "g", None)  # a local-hashing oracle's (the others have no g)
            if rule is not None and g in seen_g:
                continue  # LOLOHA's g is the one-report g here: one row says it
            seen_g.add(g)
            distinct = two.prr_items if max_values is None else min(max_values, two.prr_items)
            n_mse = two.n_mse()
            construction = ("LOLOHA's own g (g: loloha)" if rule == LOLOHA_G
                            else CONSTRUCTIONS[name])
            rows.append(TwoStagePlan(name, construction, two.parameter, two.p_star,
                                     two.q_star, n_mse, one.n_mse(), two.floor_n_mse(),
                                     None if n is None else n_mse / n, distinct,
                                     distinct * lifetime_epsilon, g_rule=rule))
    default = [row for row in rows if row.g_rule in (None, REPORT_G)]
    best = min(row.n_mse for row in default)
    tied = [row for row in default if row.n_mse <= best * (1 + _TIE)]
    choice = min(tied, key=lambda row: row.lifetime_epsilon)
    return [TwoStagePlan(**{**row.as_dict(), "recommended": row is choice}) for row in rows]


def _two_stage(name: str, report_epsilon: float, d: int, lifetime_epsilon: float,
               g_rule: str | None) -> TwoStage:
    """The two-stage protocol, a bad ε∞ a ConfigError on the plan's setting."""
    from ldp_telemetry.ldp.protocols.memoized import make_memoized_protocol
    try:
        return make_memoized_protocol(name, report_epsilon, d, lifetime_epsilon, g_rule)
    except RegistryError as error:  # the registry's field, written as the plan's setting
        if error.field != "memoize.lifetime_epsilon":
            raise
        raise ConfigError(f"lifetime_epsilon {error.message}", "lifetime_epsilon") from None


def recommend_two_stage(report_epsilon: float, lifetime_epsilon: float, d: int,
                        max_values: int | None = None) -> tuple[str, str]:
    """(protocol name, reason): the flagged row of `two_stage_plan`, what `"protocol": "auto"`
    resolves to for a memoized metric."""
    row = next(r for r in two_stage_plan(report_epsilon, lifetime_epsilon, d, None, max_values)
               if r.recommended)
    return row.protocol, (f"lowest two-stage n·MSE {row.n_mse:.4g} ({row.construction}), "
                          f"lifetime ε {row.lifetime_epsilon:.4g}")
