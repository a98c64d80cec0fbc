"""Memoized reporting: the registry's `memoize` and `reports_per_day` fields, and the keyed
permanent-response stream a device derives from its secret.

Registry (one metric):

    "epsilon": 1.0,                      # ε1: what one report reveals
    "memoize": {"lifetime_epsilon": 4.0, # ε∞: what any number of reports of one value reveal
                "max_values": 8,         # optional: most distinct permanent responses per device
                "on_limit": "repeat"},   # after them: "repeat" the last one, or "stop" reporting
    "reports_per_day": 24                # optional: the configured reporting rate, for the budget

`lifetime_epsilon` is part of the configuration fingerprint
(ldp_telemetry.ldp.config.fingerprint); `max_values`, `on_limit` and `reports_per_day` are not: they
bound what a device may send over time, not what one report means, and changing them must not
re-key the permanent responses (fresh ones would undo the memoization).

The permanent response (PRR) of a device is a pure function of its secret, the metric name, the
configuration fingerprint, and an item (a value, a hash bucket, or the device's hash seed):

    key   = HMAC-SHA-256(secret, "ldp-telemetry/prr/v1" 0x00 || u32 len(metric) || metric (UTF-8)
                                 || fingerprint (16 bytes) || kind (ASCII) 0x00 || u64 item)
    words = SHAKE-256(key) read as big-endian unsigned 64-bit integers

(integers big-endian). The protocol maps the words to its PRR with portable integer rules
(ldp_telemetry.ldp.protocols.memoized: `coin`, `below`). The secret never leaves the device.

The device's memo state (ldp_telemetry.client.device) is authenticated under a second key from the
same secret, separated from the PRR keys by its label:

    state key = HKDF-SHA-256(IKM = secret, salt = empty, info = "ldp-telemetry/memo-state/v1",
                             L = 32)
    state MAC = HMAC-SHA-256(state key, the state's canonical JSON without its "mac" field)

(HKDF: RFC 5869.) The PRR keys are HMAC-SHA-256 under the secret itself, so changing how the state
is keyed never changes a permanent response.
"""
from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldp_telemetry.ldp.base.validation import is_int, is_positive_number
from ldp_telemetry.ldp.protocols.memoized import G_RULES

#: Domain-separation prefix of the PRR key derivation (changes if the derivation ever does).
PRR_CONTEXT = b"ldp-telemetry/prr/v1"
#: HKDF `info` label of the memo state's MAC key (domain separation from the PRR keys).
STATE_CONTEXT = b"ldp-telemetry/memo-state/v1"
#: Shortest and longest device secret, in bytes.
MIN_SECRET_BYTES = 16
MAX_SECRET_BYTES = 1024
#: Highest `max_values` a registry may configure.
MAX_MEMO_VALUES = 1 << 24
#: Highest configured reporting rate (reports per device per day: one a second).
MAX_REPORTS_PER_DAY = 86_400
#: What a device does once it holds `max_values` permanent responses and meets a new item.
STOP, REPEAT = "stop", "repeat"
ON_LIMIT = (STOP, REPEAT)
_FIELDS = {"lifetime_epsilon", "max_values", "on_limit", "g"}


@dataclass(frozen=True)
class Memoization:
    """A metric's memoization: ε∞, the most distinct PRRs per device (None: no limit but the
    protocol's own, d or g) and what happens after them."""

    lifetime_epsilon: float
    max_values: int | None = None
    on_limit: str = REPEAT
    #: local hashing's g rule (ldp_telemetry.ldp.protocols.memoized.G_RULES); None: the default
    g_rule: str | None = None

    def as_dict(self) -> dict:
        out: dict[str, Any] = {"lifetime_epsilon": self.lifetime_epsilon}
        if self.max_values is not None:
            out["max_values"] = self.max_values
        out["on_limit"] = self.on_limit
        if self.g_rule is not None:
            out["g"] = self.g_rule
        return out


def parse_memoization(value: Any, fail: Callable[[str, str], Exception]) -> Memoization:
    """The registry's `memoize` object; `fail(field, message)` builds the RegistryError (its
    field a path under ``memoize``). ε∞ itself is checked by the protocol (ε1 < ε∞)."""
    expected = ('{"lifetime_epsilon": E[, "max_values": M, "on_limit": "stop" | "repeat", '
                '"g": "report" | "loloha"]}')
    if not isinstance(value, Mapping) or "lifetime_epsilon" not in value:
        raise fail("memoize", f"must be {expected}")
    unknown = sorted(set(value) - _FIELDS)
    if unknown:
        raise fail(f"memoize.{unknown[0]}", f"is not a memoize field ({expected})")
    lifetime = value["lifetime_epsilon"]
    if not is_positive_number(lifetime) or isinstance(lifetime, bool):
        raise fail("memoize.lifetime_epsilon", f"must be a number, got {lifetime!r}")
    max_values = value.get("max_values")
    if max_values is not None and (not is_int(max_values)
                                   or not 1 <= max_values <= MAX_MEMO_VALUES):
        raise fail("memoize.max_values", f"must be an integer in [1, {MAX_MEMO_VALUES}] "
                                         f"(MAX_MEMO_VALUES), got {max_values!r}")
    on_limit = value.get("on_limit", REPEAT)
    if on_limit not in ON_LIMIT:
        raise fail("memoize.on_limit", f"must be one of {list(ON_LIMIT)}, got {on_limit!r}")
    g_rule = value.get("g")
    if g_rule is not None and g_rule not in G_RULES:
        raise fail("memoize.g", f"must be one of {list(G_RULES)}, got {g_rule!r}")
    return Memoization(float(lifetime), max_values, on_limit, g_rule)


def parse_reports_per_day(value: Any, fail: Callable[[str, str], Exception]) -> float | None:
    """The registry's `reports_per_day` (None when absent): a number in (0, 86400]."""
    if value is None:
        return None
    if isinstance(value, bool) or not is_positive_number(value) or value > MAX_REPORTS_PER_DAY:
        raise fail("reports_per_day", f"must be a number in (0, {MAX_REPORTS_PER_DAY}] "
                                      f"(MAX_REPORTS_PER_DAY), got {value!r}")
    return float(value)


def secret_problem(secret: Any) -> str | None:
    """Why `secret` is not a usable device secret (a phrase), or None."""
    if not isinstance(secret, (bytes, bytearray)):
        return f"must be bytes, got {type(secret).__name__}"
    if not MIN_SECRET_BYTES <= len(secret) <= MAX_SECRET_BYTES:
        return (f"must hold {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes (e.g. "
                f"secrets.token_bytes(32)), got {len(secret)}")
    return None


def hkdf_sha256(secret: bytes, info: bytes, length: int = 32, salt: bytes = b"") -> bytes:
    """HKDF-SHA-256 (RFC 5869): extract with `salt` (empty: 32 zero bytes), expand with `info`."""
    if not 0 < length <= 255 * 32:
        raise ValueError(f"HKDF-SHA-256 yields 1 to {255 * 32} bytes, asked for {length}")
    prk = hmac.new(salt or bytes(32), bytes(secret), hashlib.sha256).digest()
    out, block = b"", b""
    for counter in range(1, -(-length // 32) + 1):
        block = hmac.new(prk, block + bytes(info) + bytes([counter]), hashlib.sha256).digest()
        out += block
    return out[:length]


def state_mac(secret: bytes, body: bytes) -> bytes:
    """The MAC of a memo state's canonical body under the secret's state key (module docstring)."""
    return hmac.new(hkdf_sha256(secret, STATE_CONTEXT), bytes(body), hashlib.sha256).digest()


def prr_key(secret: bytes, metric: str, fingerprint: bytes, kind: str, item: int) -> bytes:
    """The HMAC-SHA-256 key of one PRR stream (module docstring)."""
    name = metric.encode("utf-8")
    message = b"".join((PRR_CONTEXT, b"\x00", len(name).to_bytes(4, "big"), name,
                        bytes(fingerprint), kind.encode("ascii"), b"\x00",
                        int(item).to_bytes(8, "big")))
    return hmac.new(bytes(secret), message, hashlib.sha256).digest()


def prr_words(secret: bytes, metric: str, fingerprint: bytes, kind: str, item: int,
              count: int) -> np.ndarray:
    """`count` uniform uint64 words of the PRR stream of (kind, item): SHAKE-256 of its key."""
    stream = hashlib.shake_256(prr_key(secret, metric, fingerprint, kind, item)).digest(8 * count)
    return np.frombuffer(stream, dtype=">u8").astype(np.uint64)


def words_for(secret: bytes, config: Any) -> Callable[[str, int, int], np.ndarray]:
    """The `Words` function of ldp_telemetry.ldp.protocols.memoized for one device and one
    registry configuration."""
    def words(kind: str, item: int, count: int) -> np.ndarray:
        return prr_words(secret, config.name, config.fingerprint, kind, item, count)
    return words
