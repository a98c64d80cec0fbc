"""Byte-slab column counts: exact against count_nonzero, across and off the 255-row slabs."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.protocols.bytesums import ROWS_PER_BYTE_SUM, add_column_counts, slab_rows


@pytest.mark.parametrize("rows, cols", [(0, 4), (1, 9), (254, 3), (255, 64), (256, 1),
                                        (1021, 13), (2 * 255, 2)])
@pytest.mark.parametrize("dtype", [bool, np.uint8])
def test_add_column_counts_is_count_nonzero(rows, cols, dtype):
    rng = np.random.default_rng(rows * 100 + cols)
    ones = (rng.random((rows, cols)) < 0.9).astype(dtype)
    ones[:, 0] = 1  # a column of all ones fills every byte slab to its limit
    counts = np.full(cols, 7, dtype=np.int64)
    add_column_counts(counts, ones)
    np.testing.assert_array_equal(counts, 7 + np.count_nonzero(ones, axis=0))


def test_add_column_counts_reads_a_read_only_block():
    ones = np.ones((600, 3), dtype=bool)
    ones.flags.writeable = False
    counts = np.zeros(3, dtype=np.int64)
    add_column_counts(counts, ones)
    assert counts.tolist() == [600, 600, 600]


@pytest.mark.parametrize("cells, columns, rows", [(1 << 18, 1024, 255), (1 << 18, 16, 16_320),
                                                  (1 << 18, 5000, 52), (10, 0, 10),
                                                  (3, 1024, 1), (255 * 7, 1, 255 * 7)])
def test_slab_rows_are_whole_slabs_when_above_one(cells, columns, rows):
    assert slab_rows(cells, columns) == rows
    assert rows <= ROWS_PER_BYTE_SUM or rows % ROWS_PER_BYTE_SUM == 0
