"""Frequency oracles by registry name.

Each protocol is one module of this package holding one FrequencyOracle subclass; REGISTERED
names it as "module.Class", one line per protocol, in the order `ldp plan` lists them.
"""
from __future__ import annotations

import importlib

from ldp_telemetry.ldp.protocols.base import FrequencyOracle
from ldp_telemetry.ldp.protocols.cfo_binning import CfoGrr, CfoOlh
from ldp_telemetry.ldp.protocols.hh import HierarchicalHistogram
from ldp_telemetry.ldp.protocols.mean_mechanisms import PiecewiseMechanism, StochasticRounding
from ldp_telemetry.ldp.protocols.numeric import NumericProtocol
from ldp_telemetry.ldp.protocols.sw import DiscreteSquareWave, SquareWave

REGISTERED = (
    "grr.GRR",
    "oue.OUE",
    "sue.SUE",
    "rue.RUE",
    "olh.OLH",
    "blh.BLH",
    "rlh.RLH",
    "hr.HR",
    "ss.SS",
    "rws.RWS",
)


def _load(entry: str) -> type[FrequencyOracle]:
    module, _, class_name = entry.rpartition(".")
    cls = getattr(importlib.import_module(f"{__name__}.{module}"), class_name)
    if not (isinstance(cls, type) and issubclass(cls, FrequencyOracle)):
        raise TypeError(f"protocol registry entry {entry!r} is not a FrequencyOracle subclass")
    return cls


PROTOCOLS: dict[str, type[FrequencyOracle]] = {cls.name: cls for cls in map(_load, REGISTERED)}
if len(PROTOCOLS) != len(REGISTERED):
    raise TypeError("two registered protocols share a registry name")


#: Numeric protocols by registry name: values in [low, high], estimated as a histogram (or,
#: for sr and pm, as a mean).
NUMERIC_PROTOCOLS: dict[str, type[NumericProtocol]] = {cls.name: cls for cls in (
    SquareWave,
    DiscreteSquareWave,
    CfoGrr,
    CfoOlh,
    HierarchicalHistogram,
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
