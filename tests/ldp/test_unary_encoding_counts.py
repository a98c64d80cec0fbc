"""Unary-encoding support counts: `accumulate` is exactly the per-bit sum of the reports."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols import unary_encoding


def bit_sums(bits: np.ndarray, d: int) -> np.ndarray:
    """The reference: bit v of every report (bit v % 8 of byte v // 8), summed over reports."""
    bit = np.arange(d)
    return ((bits[:, bit // 8] >> (bit % 8).astype(np.uint8)) & 1).sum(axis=0)


@pytest.mark.parametrize("name", ["oue", "sue", "rue"])
@pytest.mark.parametrize("d, n", [(2, 300), (7, 1000), (8, 256), (65, 40_000), (1023, 511),
                                  (1024, 1300), (3000, 90)])
def test_accumulate_is_the_sum_of_the_bits(name, d, n):
    # d on and off byte and word boundaries; n across several blocks and 255-report slabs.
    protocol = make_protocol(name, 1.0, d)
    rng = np.random.default_rng(d * 13 + n)
    bits = protocol.perturb(rng.integers(0, d, size=n), rng)["bits"]
    statistic = protocol.new_statistic()
    statistic += 5  # accumulate adds onto existing counts
    protocol.accumulate(statistic, {"bits": bits})
    np.testing.assert_array_equal(statistic, 5 + bit_sums(bits, d))


def test_accumulate_counts_every_bit_set_past_a_byte():
    # 1000 reports with every bit set: each 255-report byte slab sums to 255 and none wraps.
    protocol = make_protocol("oue", 1.0, 21)
    bits = np.full((1000, 3), 0xFF, dtype=np.uint8)
    bits[:, -1] = 0x1F  # padding bits clear
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, {"bits": bits})
    assert statistic.tolist() == [1000] * 21


def test_accumulate_reads_a_read_only_column_and_no_reports():
    protocol = make_protocol("oue", 1.0, 10)
    bits = np.array([[0b1000_0001, 0b10], [0, 0b01]], dtype=np.uint8)
    bits.flags.writeable = False
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, {"bits": bits})
    protocol.accumulate(statistic, {"bits": bits[:0]})
    assert statistic.tolist() == [1, 0, 0, 0, 0, 0, 0, 1, 1, 1]


def test_accumulate_holds_one_bounded_block_of_unpacked_bits(monkeypatch):
    # The unpacked block is at most _BLOCK_BYTES whatever the number of reports.
    sizes = []
    unpack = np.unpackbits

    def recording(block, **kwargs):
        out = unpack(block, **kwargs)
        sizes.append(out.nbytes)
        return out
    monkeypatch.setattr(unary_encoding.np, "unpackbits", recording)
    protocol = make_protocol("oue", 1.0, 1024)
    bits = np.zeros((5000, 128), dtype=np.uint8)
    protocol.accumulate(protocol.new_statistic(), {"bits": bits})
    assert len(sizes) > 1 and max(sizes) <= unary_encoding._BLOCK_BYTES
