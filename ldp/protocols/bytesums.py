"""Exact per-column counts of 0/1 bytes, summed as bytes.

The server's counting kernels (the local-hash support test, the unary-encoding bit sums) end in
the same reduction: for a (rows x columns) block of 0/1 bytes, add the number of ones of each
column to an int64 count vector. numpy's `count_nonzero(..., axis=0)` or a sum into int64 casts
every byte to 8 bytes on the way; summing at most 255 rows at a time in uint8 cannot overflow
(each sum is at most 255), is exact, and runs at memory speed. The slab sums are then added in
int64, one value per (slab, column).
"""
from __future__ import annotations

import numpy as np

#: The most rows of 0/1 bytes whose sum fits in a byte.
ROWS_PER_BYTE_SUM = 255


def slab_rows(cells: int, columns: int) -> int:
    """Rows of a block of about `cells` bytes of `columns` columns: at least one, and when above
    ROWS_PER_BYTE_SUM, a whole number of 255-row slabs."""
    rows = max(1, cells // max(columns, 1))
    return rows - rows % ROWS_PER_BYTE_SUM if rows > ROWS_PER_BYTE_SUM else rows


def add_column_counts(counts: np.ndarray, ones: np.ndarray) -> None:
    """counts[j] += the number of ones in column j of `ones`, a 2-D array of 0/1 bytes (bool or
    uint8 holding only 0 and 1; other byte values would be summed modulo 256)."""
    ones = ones.view(np.uint8)
    rows = ROWS_PER_BYTE_SUM
    slabs = len(ones) // rows
    if slabs:
        whole = ones[: slabs * rows].reshape(slabs, rows, ones.shape[1])
        counts += np.add.reduce(whole, axis=1, dtype=np.uint8).sum(axis=0, dtype=np.int64)
    if len(ones) > slabs * rows:
        counts += np.add.reduce(ones[slabs * rows:], axis=0, dtype=np.uint8)
