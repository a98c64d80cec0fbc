"""The 95% band of a pooled-hash oracle's value (CMS, HCMS, FLH) holds the pool's collision term:
eq. 2's score band, which leaves it out, is used only for the other oracles."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.estimation.frequency_bands import score_bands
from ldp_telemetry.ldp.estimation.uncertainty import Z95
from ldp_telemetry.ldp.protocols import PROTOCOLS, is_pooled
from ldp_telemetry.output.bands import score_facts, value_bands


def _record(protocol: str) -> dict:
    return {"protocol": protocol, "p_star": 0.6, "q_star": 0.1, "n": 5_000,
            "estimate": [0.5, 0.3, 0.2], "unbiased_estimate": [0.52, 0.27, 0.21],
            "std_error": [0.03, 0.02, 0.02], "band_method": "exact-variance"}


def test_which_protocols_are_pooled():
    assert {name for name in PROTOCOLS if is_pooled(name)} == {"cms", "hcms", "flh"}
    assert not is_pooled("pem") and not is_pooled(None) and not is_pooled("nope")


@pytest.mark.parametrize("protocol", ["cms", "hcms", "flh"])
def test_a_pooled_records_value_band_is_its_standard_errors(protocol):
    record = _record(protocol)
    assert score_facts(record) is None
    lower, upper = value_bands(record)
    centre, error = np.array(record["unbiased_estimate"]), np.array(record["std_error"])
    np.testing.assert_allclose(lower, centre - Z95 * error)
    np.testing.assert_allclose(upper, centre + Z95 * error)


def test_other_oracles_keep_the_score_band():
    record = _record("oue")
    assert score_facts(record) == (0.6, 0.1, 5_000)
    lower, upper = value_bands(record)
    expected = score_bands(np.array(record["unbiased_estimate"]), 0.6, 0.1, 5_000)
    np.testing.assert_allclose(lower, expected[0])
    np.testing.assert_allclose(upper, expected[1])


def test_the_score_band_with_an_extra_variance_solves_its_test():
    """Each end f of the band satisfies (f~ − f)² = z² (A + extra + B f) exactly."""
    p, q, n, extra = 0.6, 0.1, 2_000, 4e-4
    f_tilde = np.array([-0.01, 0.05, 0.4])
    lower, upper = score_bands(f_tilde, p, q, n, extra)
    a = q * (1 - q) / (n * (p - q) ** 2)
    b = (1 - p - q) / (n * (p - q))
    for end in (lower, upper):
        np.testing.assert_allclose((f_tilde - end) ** 2, Z95 ** 2 * (a + extra + b * end),
                                   rtol=1e-9)
    narrower = score_bands(f_tilde, p, q, n)
    assert np.all(lower < narrower[0]) and np.all(upper > narrower[1])
