"""Strings of an open domain as padded byte rows, and the 64-bit keys of their prefixes.

A string metric's value is a UTF-8 string of at most `max_bytes` bytes, without NUL. It travels
through the protocol as its bytes padded with NUL (0x00) to `max_bytes`: the padding marks the
end, so the prefix of ℓ bytes of a string shorter than ℓ is the string followed by NULs, and a
prefix ending in NUL is a complete string.

Every prefix has a fixed 64-bit key, computed by clients and the server alike from the
SplitMix64 function of ldp_telemetry.ldp.protocols.hashing, one step per byte:

    key(empty) = PREFIX_KEY_ROOT
    key(p + b) = splitmix64(key(p), b)          (b the byte, 0..255)

so the keys of all prefixes of a batch of strings are `max_bytes` vectorised steps, and the keys
of all 256 one-byte extensions of a candidate prefix are one step. Two distinct prefixes share a
key with probability about 2^-64.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ldp_telemetry.ldp.protocols.hashing import splitmix64

#: The key of the empty prefix (the first 64 bits of the SHA-256 of "ldp-telemetry prefix").
PREFIX_KEY_ROOT = np.uint64(0x3C6EF372FE94F82B)
#: The byte that pads a string to `max_bytes` (and so may not occur in one).
PAD = 0


def string_problem(value: bytes, max_bytes: int) -> str | None:
    """Why the UTF-8 bytes `value` cannot be reported by a metric of `max_bytes` (a phrase)."""
    if len(value) > max_bytes:
        return f"is {len(value)} bytes long in UTF-8, more than max_bytes ({max_bytes})"
    if bytes([PAD]) in value:
        return "contains a NUL character (U+0000), which marks the end of a string"
    return None


def as_utf8(value: object) -> bytes:
    """A string value as its UTF-8 bytes (bytes are taken as they are, and must be UTF-8)."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        data.decode("utf-8")  # UnicodeDecodeError (a ValueError) when not UTF-8
        return data
    raise TypeError(f"a string value must be str or UTF-8 bytes, got {type(value).__name__}")


def padded_rows(values: Iterable[bytes], max_bytes: int) -> np.ndarray:
    """(n, max_bytes) uint8 rows: each value's bytes padded with NUL. The values must pass
    `string_problem` (checked by the callers, who name the offending value)."""
    values = list(values)
    joined = b"".join(v.ljust(max_bytes, b"\0") for v in values)
    return np.frombuffer(joined, dtype=np.uint8).reshape(len(values), max_bytes).copy()


def row_strings(rows: np.ndarray) -> list[bytes]:
    """The inverse of `padded_rows`: each row's bytes up to its first NUL."""
    return [bytes(row).split(b"\0", 1)[0] for row in np.asarray(rows, dtype=np.uint8)]


def extend_keys(keys: np.ndarray, byte: np.ndarray | int) -> np.ndarray:
    """key(p + byte) from key(p) (broadcasting; uint64)."""
    return splitmix64(keys, np.asarray(byte).astype(np.uint64))


def prefix_keys(rows: np.ndarray) -> np.ndarray:
    """(n, max_bytes) uint64: column ℓ − 1 holds the key of each row's prefix of ℓ bytes."""
    rows = np.asarray(rows, dtype=np.uint8)
    keys = np.empty(rows.shape, dtype=np.uint64)
    key = np.full(rows.shape[0], PREFIX_KEY_ROOT, dtype=np.uint64)
    for column in range(rows.shape[1]):
        key = extend_keys(key, rows[:, column])
        keys[:, column] = key
    return keys
