"""The configuration fingerprint: what a report was perturbed under, in 16 bytes.

A report means something only under the configuration it was made with: its metric, protocol
and the protocol's derived parameters, ε, and the domain (labels in order, size, or the numeric
range and buckets). The fingerprint is the first `FINGERPRINT_BYTES` bytes of the SHA-256 of the
configuration's *canonical text*, a JSON object of exactly these keys (the format is in
docs/fleet-contract.md; test vectors in `ldp_telemetry/client/test_vectors.json`):

    {"domain":{...},"epsilon":"<hex>","format":1,"metric":"<name>","parameters":{...},
     "protocol":"<name>"}

- keys sorted, no whitespace; strings escaped as JSON with every non-ASCII character as
  ``\\uXXXX`` (lower-case hex, UTF-16 code units), so the text is ASCII;
- integers as JSON integers; every real number (ε, a numeric domain's ``low``/``high``, Square
  Wave's ``b``) as the 16 lower-case hex digits of its IEEE 754 binary64 bits, big-endian, in a
  string (``2.0`` -> ``"4000000000000000"``): exact, and the same in every language;
- ``domain``: ``{"labels":[...]}``, ``{"size":d}``, or ``{"buckets":B,"high":H,"low":L}``
  (``{"high":H,"low":L}`` for a mean-only protocol), or for a string metric
  ``{"strings":{"max_bytes":m,"pool":K}}``, plus ``"final_share":<real>`` when it is not 0 (so
  every uniform-level text is unchanged);
- ``parameters``: the parameters the protocol derives from ε and d (g, k, K, b, h, d̃), so that
  a change in how they are derived changes the fingerprint too;
- ``format``: `WIRE_FORMAT`, the version of the report's wire format.

A memoized (two-stage) configuration adds one key, and only it does (every other configuration's
text is unchanged):

- ``memoize``: ``{"lifetime_epsilon":E}``, ε∞ as a real as above; ``epsilon`` is then the
  per-report ε1. A local-hashing metric whose registry chose ``memoize.g: "loloha"`` adds
  ``"g":"loloha"`` inside it (and its ``parameters`` carry the g that rule gives). The two
  stages' probabilities follow from the protocol, ε1, ε∞, the g rule and the domain
  (ldp_telemetry.ldp.protocols.memoized), all in the text, and are left out: they pass through
  exp and a square root, whose last bit another language's library need not reproduce.

The estimator and post-processing are not in it: they are the server's choice and do not change
what a report means; nor are a memoized metric's ``max_values``, ``on_limit`` or the
``reports_per_day`` rate (ldp_telemetry.ldp.config.memoize).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
from typing import Any

from ldp_telemetry.ldp.protocols.base import NUMERIC, STRINGS
from ldp_telemetry.ldp.protocols.memoized import REPORT_G

#: Version of the report wire format (schemas/report.avsc and the payload encodings).
WIRE_FORMAT = 1
#: Length of a fingerprint in bytes (128 bits of SHA-256).
FINGERPRINT_BYTES = 16


def real_text(value: float) -> str:
    """A real number as the hex of its IEEE 754 binary64 bits, big-endian."""
    return struct.pack(">d", float(value)).hex()


def derived_parameters(protocol: Any) -> dict:
    """The parameters a protocol object derives from ε and its domain (fields not given to its
    constructor: g, k, K, h), plus a numeric protocol's report histogram size d̃ and Square
    Wave's b."""
    parameters = {field.name: getattr(protocol, field.name)
                  for field in dataclasses.fields(protocol) if not field.init}
    if protocol.kind == NUMERIC and not getattr(protocol, "mean_only", False):
        parameters["output_buckets"] = protocol.output_buckets
    if isinstance(getattr(type(protocol), "b", None), property):
        parameters["b"] = protocol.b
    return {key: real_text(value) if isinstance(value, float) else int(value)
            for key, value in parameters.items()}


def canonical_document(config: Any) -> dict:
    """The fingerprinted facts of a registry `MetricConfig`, as the canonical JSON object."""
    protocol = config.protocol
    if config.kind == NUMERIC:
        domain: dict[str, Any] = {"low": real_text(config.low), "high": real_text(config.high)}
        if not getattr(protocol, "mean_only", False):
            domain["buckets"] = config.d
    elif config.kind == STRINGS:
        domain = {"strings": {"max_bytes": config.d, "pool": protocol.pool}}
        if protocol.final_share:
            domain["strings"]["final_share"] = real_text(protocol.final_share)
    elif config.labels is not None:
        domain = {"labels": list(config.labels)}
    else:
        domain = {"size": config.d}
    document = {"format": WIRE_FORMAT, "metric": config.name, "protocol": config.protocol_name,
                "epsilon": real_text(config.epsilon), "domain": domain,
                "parameters": derived_parameters(protocol)}
    if getattr(config, "memoize", None) is not None:
        document["memoize"] = memoize_document(protocol)
    return document


def memoize_document(protocol: Any) -> dict:
    """The ``memoize`` key of a two-stage protocol's canonical text: its inputs only; ``g``
    (local hashing's g rule) only when a registry chose one, so that every other text is
    unchanged."""
    document = {"lifetime_epsilon": real_text(protocol.lifetime_epsilon)}
    if getattr(protocol, "g_rule", None) not in (None, REPORT_G):
        document["g"] = protocol.g_rule
    return document


def canonical_text(config: Any) -> str:
    """The canonical text of `config` (see the module docstring)."""
    return json.dumps(canonical_document(config), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True)


def fingerprint(config: Any) -> bytes:
    """The configuration fingerprint of a registry `MetricConfig`: SHA-256 of its canonical
    text, cut to FINGERPRINT_BYTES."""
    return hashlib.sha256(canonical_text(config).encode("ascii")).digest()[:FINGERPRINT_BYTES]
