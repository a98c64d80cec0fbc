"""Frequency oracles and numeric protocols by registry name.

Each protocol is one module of this package holding one protocol class; REGISTERED names the
frequency oracles and NUMERIC_REGISTERED the numeric protocols as "module.Class", one line per
protocol, in the order `ldp plan` and the registry's messages list them. Adding a protocol is
its module and that one line.
"""
from __future__ import annotations

import importlib

from ldp_telemetry.ldp.base.registration import Catalog
from ldp_telemetry.ldp.protocols.base import FrequencyOracle
from ldp_telemetry.ldp.protocols.hash_pool import HashPool
from ldp_telemetry.ldp.protocols.numeric import NumericProtocol
from ldp_telemetry.ldp.protocols.pem import PrefixExtension

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
    "cms.CMS",
    "hcms.HCMS",
    "flh.FLH",
)

#: Numeric protocols: values in [low, high], estimated as a histogram (or, for sr and pm, as a
#: mean).
NUMERIC_REGISTERED = (
    "sw.SquareWave",
    "sw.DiscreteSquareWave",
    "cfo_binning.CfoGrr",
    "cfo_binning.CfoOlh",
    "hh.HierarchicalHistogram",
    "mean_mechanisms.StochasticRounding",
    "mean_mechanisms.PiecewiseMechanism",
)

#: String protocols: UTF-8 strings of an open domain, estimated as heavy hitters.
STRING_REGISTERED = (
    "pem.PrefixExtension",
)


def _catalog(noun: str, entries: tuple[str, ...], base: type) -> Catalog:
    """The classes `entries` name, each checked to be a `base` subclass, by registry name."""
    catalog: Catalog = Catalog(noun, "protocol")
    for entry in entries:
        module, _, class_name = entry.rpartition(".")
        cls = getattr(importlib.import_module(f"{__name__}.{module}"), class_name)
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise TypeError(f"{noun} registry entry {entry!r} is not a {base.__name__} subclass")
        catalog.register(cls)
    return catalog


PROTOCOLS: Catalog[type[FrequencyOracle]] = _catalog("protocol", REGISTERED, FrequencyOracle)
NUMERIC_PROTOCOLS: Catalog[type[NumericProtocol]] = _catalog(
    "numeric protocol", NUMERIC_REGISTERED, NumericProtocol)
STRING_PROTOCOLS: Catalog = _catalog("string protocol", STRING_REGISTERED, PrefixExtension)


def make_protocol(name: str, epsilon: float, d: int, **parameters: object) -> FrequencyOracle:
    """The oracle `name` at privacy level epsilon over [0, d); RegistryError when unknown.
    `parameters`: constructor keywords a protocol takes beyond ε and d (the pooled-hash
    oracles' `hashes` and `buckets`; TypeError for a protocol that takes none)."""
    return PROTOCOLS.lookup(name)(epsilon=epsilon, d=d, **parameters)


def is_pooled(name: object) -> bool:
    """Whether `name` is a pooled-hash oracle (CMS, HCMS, FLH): its support counts share the
    pool's hash collisions, so a value's variance is not eq. 2 alone."""
    return isinstance(name, str) and name in PROTOCOLS and issubclass(PROTOCOLS[name], HashPool)


def make_numeric_protocol(name: str, epsilon: float, buckets: int,
                          output_buckets: int | None = None) -> NumericProtocol:
    """The numeric protocol `name` over `buckets` input buckets; RegistryError when unknown."""
    return NUMERIC_PROTOCOLS.lookup(name)(epsilon=epsilon, d=buckets, output_buckets=output_buckets)


def make_string_protocol(name: str, epsilon: float, max_bytes: int, pool: int,
                         final_share: float = 0.0) -> PrefixExtension:
    """The string protocol `name` over strings of at most `max_bytes`; RegistryError when
    unknown."""
    return STRING_PROTOCOLS.lookup(name)(epsilon=epsilon, d=max_bytes, pool=pool,
                                         final_share=final_share)


__all__ = ["FrequencyOracle", "NUMERIC_PROTOCOLS", "NumericProtocol", "PROTOCOLS",
           "STRING_PROTOCOLS", "is_pooled", "make_numeric_protocol", "make_protocol",
           "make_string_protocol"]
