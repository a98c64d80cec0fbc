"""Frequency oracles by registry name."""
from __future__ import annotations

from ldp_telemetry.ldp.protocols.base import FrequencyOracle
from ldp_telemetry.ldp.protocols.blh import BLH
from ldp_telemetry.ldp.protocols.grr import GRR
from ldp_telemetry.ldp.protocols.hr import HR
from ldp_telemetry.ldp.protocols.olh import OLH
from ldp_telemetry.ldp.protocols.oue import OUE
from ldp_telemetry.ldp.protocols.rlh import RLH
from ldp_telemetry.ldp.protocols.rue import RUE
from ldp_telemetry.ldp.protocols.rws import RWS
from ldp_telemetry.ldp.protocols.ss import SS
from ldp_telemetry.ldp.protocols.sue import SUE
from ldp_telemetry.ldp.protocols.numeric import NumericProtocol
from ldp_telemetry.ldp.protocols.sw import DiscreteSquareWave, SquareWave
from ldp_telemetry.ldp.protocols.cfo_binning import CfoGrr, CfoOlh
from ldp_telemetry.ldp.protocols.mean_mechanisms import PiecewiseMechanism, StochasticRounding

PROTOCOLS: dict[str, type[FrequencyOracle]] = {cls.name: cls for cls in (
    GRR,
    OUE,
    SUE,
    RUE,
    OLH,
    BLH,
    RLH,
    HR,
    SS,
    RWS,
)}


#: Numeric protocols by registry name: values in [low, high], estimated as a histogram.
NUMERIC_PROTOCOLS: dict[str, type[NumericProtocol]] = {cls.name: cls for cls in (
    SquareWave,
    DiscreteSquareWave,
    CfoGrr,
    CfoOlh,
    StochasticRounding,
    PiecewiseMechanism,
)}


def make_numeric_protocol(name: str, epsilon: float, buckets: int,
                          output_buckets: int | None = None) -> NumericProtocol:
    """The numeric protocol `name` over `buckets` input buckets; ValueError when unknown."""
    try:
        cls = NUMERIC_PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown numeric protocol {name!r}; expected one of "
                         f"{sorted(NUMERIC_PROTOCOLS)}") from None
    return cls(epsilon=epsilon, d=buckets, output_buckets=output_buckets)


def make_protocol(name: str, epsilon: float, d: int) -> FrequencyOracle:
    """The oracle `name` at privacy level epsilon over [0, d); ValueError when unknown."""
    try:
        cls = PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; expected one of {sorted(PROTOCOLS)}") from None
    return cls(epsilon=epsilon, d=d)


__all__ = ["FrequencyOracle", "NUMERIC_PROTOCOLS", "NumericProtocol", "PROTOCOLS",
           "make_numeric_protocol", "make_protocol"]
