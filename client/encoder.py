"""Encoding on a device: true values -> ε-LDP report records bound to their configuration.

`encode` makes one report, `encode_many` a batch (vectorised: one call of the protocol's
`perturb` for all values). The randomness is the caller's `numpy.random.Generator`, drawn in
this order: the protocol's perturbation of every value, then the report ids not given (uniform
in [0, 2^63 - 1)). A memoized metric (registry field `memoize`) needs the device's
`DeviceMemo` (ldp_telemetry.client.device): the permanent responses come from its secret, the
generator draws only the instantaneous responses, then the report ids. Each record carries the
metric configuration's fingerprint (ldp_telemetry.ldp.config.fingerprint), so the server counts it
under the configuration it was made with, whatever the registry says by then.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldp_telemetry.client.device import DeviceMemo, memoized_columns
from ldp_telemetry.client.values import domain_points
from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.base.validation import (EVENT_TIME_END_MS, EVENT_TIME_MIN_MS,
                                               EVENT_TIME_SPAN_TEXT, is_int, is_valid_event_time)
from ldp_telemetry.ldp.protocols.base import Columns
from ldp_telemetry.schemas.writer import report_records

#: Report ids are drawn uniformly from [0, ID_END).
ID_END = np.iinfo(np.int64).max


@dataclass(frozen=True)
class EncodedReports:
    """Reports of one metric configuration as columns: ids, event times (epoch ms) and the
    protocol's payload columns, one row per report."""

    config: Any  # ldp_telemetry.ldp.config.registry.MetricConfig
    report_ids: np.ndarray
    event_times_ms: np.ndarray
    columns: Columns
    #: values given but not reported: a memoized metric's `max_values` reached, `on_limit` "stop"
    withheld: int = 0

    def __len__(self) -> int:
        return len(self.report_ids)

    def rows(self, selection: slice | np.ndarray) -> EncodedReports:
        """The reports at `selection` (a slice, indices or a mask)."""
        return EncodedReports(self.config, self.report_ids[selection],
                              self.event_times_ms[selection],
                              {name: column[selection] for name, column in self.columns.items()})

    def records(self) -> Iterator[dict]:
        """The Avro report records (schemas/report.avsc), fingerprint included."""
        config = self.config
        return report_records(config.name, config.protocol, self.report_ids, self.event_times_ms,
                              self.columns, config.fingerprint)


def encode(config: Any, value: Any, rng: np.random.Generator, *,
           event_time_ms: int | None = None, report_id: int | None = None,
           device: DeviceMemo | None = None) -> dict | None:
    """One report record of `value` (a label, an index, or a number of a numeric metric) under
    `config` (a registry MetricConfig); `event_time_ms` defaults to now, `report_id` to a draw
    from `rng` after the perturbation; `device` the DeviceMemo of a memoized metric. None when
    the device withholds the report (memoized `max_values` reached, `on_limit` "stop")."""
    times = None if event_time_ms is None else [event_time_ms]
    ids = None if report_id is None else [report_id]
    reports = encode_many(config, [value], rng, event_times_ms=times, report_ids=ids,
                          device=device)
    return next(reports.records(), None)


def encode_many(config: Any, values: Any, rng: np.random.Generator, *,
                event_times_ms: Any = None, report_ids: Any = None,
                device: DeviceMemo | Iterable[DeviceMemo] | None = None) -> EncodedReports:
    """Reports of many values (see `encode`; `values` as ldp_telemetry.client.values takes them,
    `event_times_ms` one per value or None for now, `report_ids` one per value or None)."""
    return encode_points(config, domain_points(config, values), rng,
                         event_times_ms=event_times_ms, report_ids=report_ids, device=device)


def encode_points(config: Any, points: np.ndarray, rng: np.random.Generator, *,
                  event_times_ms: Any = None, report_ids: Any = None,
                  device: DeviceMemo | Iterable[DeviceMemo] | None = None) -> EncodedReports:
    """Reports of values already mapped into the domain (`domain_points`: indices in [0, d), or
    points of [0, 1] for a numeric metric). `device`: a memoized metric's DeviceMemo, or one per
    point (a simulated fleet); ignored for other metrics."""
    n = len(points)
    times = _event_times(event_times_ms, n)
    if getattr(config, "memoize", None) is None:
        columns = config.protocol.perturb(points, rng)
        ids = rng.integers(0, ID_END, size=n) if report_ids is None else _report_ids(report_ids,
                                                                                     n)
        return EncodedReports(config, ids, times, columns)
    if device is None:
        raise InputError(f"metric {config.name!r} memoizes its reports: give the device's "
                         "DeviceMemo (ldp_telemetry.client.device), whose secret derives the "
                         "permanent responses", "device")
    devices = [device] * n if isinstance(device, DeviceMemo) else list(device)
    if len(devices) != n:
        raise InputError(f"device must be one DeviceMemo or one per value ({n}), got "
                         f"{len(devices)}", "device")
    given_ids = None if report_ids is None else _report_ids(report_ids, n)
    columns, kept = memoized_columns(config, points, devices, rng)
    count = int(kept.sum())
    ids = rng.integers(0, ID_END, size=count) if given_ids is None else given_ids[kept]
    return EncodedReports(config, ids, times[kept], columns, withheld=n - count)


def _event_times(event_times_ms: Any, n: int) -> np.ndarray:
    if event_times_ms is None:
        return np.full(n, time.time_ns() // 1_000_000, dtype=np.int64)
    times = np.asarray(event_times_ms)
    _check_length("event_times_ms", times, n)
    if times.dtype.kind in "iu":
        valid = (times >= EVENT_TIME_MIN_MS) & (times < EVENT_TIME_END_MS)
    else:  # one by one: never a bool or a float
        valid = np.array([is_valid_event_time(t) for t in times.tolist()], dtype=bool)
    if not valid.all():
        bad = times.tolist()[int(np.flatnonzero(~valid)[0])]
        raise InputError(f"event time {bad!r} is not an integer number of epoch milliseconds in "
                         f"{EVENT_TIME_SPAN_TEXT}", "event_time_ms")
    return times.astype(np.int64)


def _report_ids(report_ids: Any, n: int) -> np.ndarray:
    ids = np.asarray(report_ids)
    _check_length("report_ids", ids, n)
    if ids.dtype.kind != "i":  # unsigned, bool, float, object: one by one
        for rid in ids.tolist():
            if not is_int(rid) or not -(1 << 63) <= rid < 1 << 63:
                raise InputError(f"report id {rid!r} is not an integer in [-2^63, 2^63) (an "
                                 "Avro long)", "report_id")
    return ids.astype(np.int64)


def _check_length(name: str, array: np.ndarray, n: int) -> None:
    if array.shape != (n,):
        raise InputError(f"{name} must hold one entry per value ({n}), got shape {array.shape}",
                         name)
