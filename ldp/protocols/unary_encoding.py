"""Unary encoding, the family of OUE, SUE and RUE ([Wang20] journal §2.3).

The one-hot vector of v is perturbed bit by bit: the 1 bit is *drawn* as 1 with probability p,
each 0 bit becomes 1 with probability q (members choose p and q). A report supports the values
whose bits are set: p* = p, q* = q.

Wire format: the d bits packed little-endian into ceil(d/8) bytes (bit v is bit v % 8 of byte
v // 8); padding bits above d must be 0.

Statistic: the support counts themselves. A block of reports is unpacked by numpy
(`np.unpackbits`, one 0/1 byte per bit) and its columns are summed as bytes, 255 reports at a
time (ldp.protocols.bytesums: a byte cannot overflow), then added into the int64 counts. The block
holds about _BLOCK_BYTES unpacked bytes whatever n is.
"""
from __future__ import annotations

from collections.abc import Iterator
from operator import itemgetter
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.protocols.base import (BRANCH_BYTES, Columns, FrequencyOracle,
                                              independent_support_variance, varint_bytes)
from ldp_telemetry.ldp.protocols.bytesums import add_column_counts, slab_rows

#: Unpacked bytes (reports x d) per block of `accumulate`: 256 KiB, inside the L2 cache.
_BLOCK_BYTES = 1 << 18
_PERTURB_ROWS = 4096


def bits_payload_schema(record: str) -> dict:
    """The Avro record of a unary-encoding payload: the packed bit vector."""
    return {"type": "record", "name": record, "fields": [
        {"name": "bits", "type": "bytes",
         "doc": "d bits packed little-endian in ceil(d/8) bytes."}]}



def bit_rows(payloads: list[dict], n_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """The payloads' packed `bits` as an (n, n_bytes) uint8 array, and the mask of payloads
    whose bits are not n_bytes long (their row is zeros: the caller marks them invalid)."""
    blobs = list(map(itemgetter("bits"), payloads))
    lengths = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs))
    wrong_length = lengths != n_bytes
    if wrong_length.any():
        empty = bytes(n_bytes)
        blobs = [empty if bad else blob
                 for blob, bad in zip(blobs, wrong_length.tolist(), strict=True)]
    bits = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), n_bytes)
    return bits, wrong_length

class UnaryEncoding(FrequencyOracle):
    """Shared machinery of the unary-encoding protocols; subclasses choose p and q."""

    payload_rule: ClassVar[str] = "bit vector must have ceil(d/8) bytes with padding bits clear"
    server_cost: ClassVar[str] = "O(n·d): one unpacked byte summed per report bit"

    @property
    def n_bytes(self) -> int:
        return (self.d + 7) // 8

    def _report_variance(self, w: np.ndarray) -> np.ndarray:
        """Every bit is perturbed independently: base.independent_support_variance."""
        return independent_support_variance(self.p_star, self.q_star, w)

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        values = np.asarray(values, dtype=np.int64)
        packed = np.empty((len(values), self.n_bytes), dtype=np.uint8)
        for start in range(0, len(values), _PERTURB_ROWS):
            rows = values[start:start + _PERTURB_ROWS]
            bits = rng.random((len(rows), self.d), dtype=np.float32) < self.q_star
            bits[np.arange(len(rows)), rows] = rng.random(len(rows)) < self.p_star
            packed[start:start + len(rows)] = np.packbits(bits, axis=1, bitorder="little")
        return {"bits": packed}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + varint_bytes(self.n_bytes) + self.n_bytes

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return ({"bits": row.tobytes()} for row in columns["bits"])

    def payloads_from_avro(self, payloads: list[dict]
                               ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        bits, wrong_length = bit_rows(payloads, self.n_bytes)
        columns, invalid = self.check_payloads({"bits": bits})
        return columns, invalid | wrong_length

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """`bits`: (n, ceil(d/8)) uint8; invalid when a padding bit is set."""
        bits = np.asarray(columns["bits"], dtype=np.uint8)
        invalid = np.zeros(len(bits), dtype=bool)
        padding = self.n_bytes * 8 - self.d
        if padding and len(bits):
            invalid |= (bits[:, -1] >> np.uint8(8 - padding)) != 0
        return {"bits": bits}, invalid

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        bits = columns["bits"]
        rows = slab_rows(_BLOCK_BYTES, self.d)
        for start in range(0, len(bits), rows):
            add_column_counts(statistic, np.unpackbits(
                bits[start:start + rows], axis=1, count=self.d, bitorder="little"))
