"""An optional, clearly labelled recovered estimate of the values the co-support test implicates:
their estimate with the estimated fake support removed. Reported beside the plain estimate in
the integrity section, never in its place.

Model (the maximal-gain attack of [Cao21]): a fraction β of the window's reports are fakes that
support every implicated value (the set T, t = |T| >= 2) and otherwise look like honest
reports. The poisoned unbiased estimate of v in T is then (1 - β) f_v + β (1 - q*)/(p* - q*).
Among the sampled reports, the share a that support all of T is β + (1 - β) h, where an honest
report supports all of T with h = F P_in + (1 - F) P_out (F = Σ_{v in T} f_v; P_in, P_out from
support.SupportModel.set_probabilities(t)). Alternating β = (a - h)/(1 - h) and
f_v = (f~_v - β (1 - q*)/(p* - q*))/(1 - β) (clipped to [0, 1]) from f = f~ converges in a few
steps. Under other attacks, or when T holds values no fake supports, the model is wrong and so
is the recovery: it is a reading aid, labelled by its `method`.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ldp_telemetry.ldp.integrity.support import SupportModel
from ldp_telemetry.ldp.protocols.base import FrequencyOracle

#: The recovery's name in the record.
METHOD = "remove-fake-support"
#: Alternations of β and f.
ITERATIONS = 20
#: Largest fake fraction the recovery reports (above it the window is mostly fakes).
MAX_FAKE_FRACTION = 0.5


def recovered_estimate(protocol: FrequencyOracle, model: SupportModel, columns: dict,
                       unbiased: np.ndarray, labels: Sequence[str],
                       implicated: list[int]) -> dict | None:
    """{"method", "fake_fraction", "labels", "estimate"} for the implicated values (indices),
    or None when there are fewer than two or the protocol has no set probabilities."""
    t = len(implicated)
    probabilities = model.set_probabilities(t) if t >= 2 else None
    if probabilities is None or not columns:
        return None
    p_in, p_out = probabilities
    supported = model.supports(columns, np.asarray(implicated))
    assert supported is not None, "a model with set probabilities has supports"
    together = supported.all(axis=1)
    share = float(together.mean())
    poisoned = np.nan_to_num(np.asarray(unbiased, dtype=np.float64)[implicated])
    gain = (1 - protocol.q_star) / (protocol.p_star - protocol.q_star)
    f = np.clip(poisoned, 0.0, 1.0)
    beta = 0.0
    for _ in range(ITERATIONS):
        honest_share = min(1.0, float(f.sum()))
        h = honest_share * p_in + (1 - honest_share) * p_out
        beta = float(np.clip((share - h) / (1 - h), 0.0, MAX_FAKE_FRACTION))
        f = np.clip((poisoned - beta * gain) / (1 - beta), 0.0, 1.0)
    return {"method": METHOD, "fake_fraction": beta,
            "labels": [str(labels[v]) for v in implicated], "estimate": f.tolist()}
