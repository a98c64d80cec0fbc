"""Compact estimate records: d values without d Python objects until they are written.

A window-estimate record of a domain of d values holds d labels and three arrays of d numbers.
As Python lists they cost about 160 bytes per value (a float object and a pointer per number,
a string per label); kept as float64 numpy arrays and, for a sized domain, `IndexLabels`, they
cost 24 bytes per value. An `output.estimate.EstimateRecord` keeps them so; the writers take
its fields as they are (`avro_values` for fastavro, `transforms.write.json_line_pieces` for
JSON), and `plain_record` gives them as plain values (`EstimateRecord.json_value`).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

#: Numbers turned into Python floats at a time while a compact array is iterated.
CHUNK_ITEMS = 16_384


class IndexLabels(Sequence):
    """The labels "0", "1", ..., str(d - 1) of a sized domain, made when read."""

    def __init__(self, d: int):
        self._d = int(d)

    def __len__(self) -> int:
        return self._d

    def __getitem__(self, index: int | slice) -> Any:  # a label, or a list of them
        if isinstance(index, slice):
            return [str(v) for v in range(*index.indices(self._d))]
        if not -self._d <= index < self._d:
            raise IndexError(index)
        return str(index % self._d)

    def __iter__(self) -> Iterator[str]:
        return map(str, range(self._d))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IndexLabels) and other._d == self._d

    def __hash__(self) -> int:
        return hash((IndexLabels, self._d))

    def __repr__(self) -> str:
        return f"IndexLabels({self._d})"


class FloatChunks(Sequence):
    """A 1-D numpy array seen as a sequence of Python floats, converted `CHUNK_ITEMS` at a time
    while iterated (fastavro writes any Sequence as an Avro array)."""

    def __init__(self, array: np.ndarray):
        self._array = array

    def __len__(self) -> int:
        return len(self._array)

    def __getitem__(self, index: int | slice) -> Any:  # a number, or a list of them
        part = self._array[index]
        return part.tolist()

    def __iter__(self) -> Iterator[float]:
        for start in range(0, len(self._array), CHUNK_ITEMS):
            yield from self._array[start:start + CHUNK_ITEMS].tolist()


def avro_values(record: dict) -> dict:
    """The record with its top-level numpy arrays as lists of floats, or as `FloatChunks` when
    longer than CHUNK_ITEMS (for fastavro)."""
    return {key: _avro_array(value) if isinstance(value, np.ndarray) else value
            for key, value in record.items()}


def _avro_array(array: np.ndarray) -> list | FloatChunks:
    return array.tolist() if len(array) <= CHUNK_ITEMS else FloatChunks(array)


def plain_record(record: dict) -> dict:
    """The record with plain Python values only: numpy arrays and `IndexLabels` as lists."""
    return {key: value.tolist() if isinstance(value, np.ndarray)
            else list(value) if type(value) is IndexLabels else value
            for key, value in record.items()}
