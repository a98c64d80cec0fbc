"""Turn each window's SupportStatistic into a window-estimate record."""
from __future__ import annotations

import datetime as dt

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.utils.windowed_value import PaneInfoTiming

from ldp_telemetry.ldp.finalize import NumericWindowResult, finalize_window
from ldp_telemetry.ldp.protocols.base import FREQUENCY
from ldp_telemetry.ldp.registry import Registry
from ldp_telemetry.transforms.compact import IndexLabels, plain_record
from ldp_telemetry.transforms.count import SupportStatistic


_EPOCH = dt.datetime(1970, 1, 1)


def iso_utc(moment) -> str:
    """A Beam Timestamp as ISO-8601 UTC: seconds, and milliseconds only when there are some."""
    return iso_ms(moment.micros // 1000)


def iso_ms(epoch_ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC: seconds, and milliseconds only when there are some
    (e.g. 2024-03-01T00:00:00Z, 2024-03-01T00:00:00.250Z)."""
    seconds, ms = divmod(epoch_ms, 1000)
    text = (_EPOCH + dt.timedelta(seconds=seconds)).isoformat()
    return f"{text}.{ms:03d}Z" if ms else f"{text}Z"


#: The pane of every window of a batch run (one pane, when the input is complete).
BATCH_PANE = {"timing": "ON_TIME", "index": 0, "is_last": False}


def window_estimate_record(config, result, window_start: str, window_end: str, pane,
                           compact: bool = False) -> dict:
    """The JSON/Avro record of one window (fields as in schemas/window_estimate.avsc).

    Plain Python values; with `compact`, the arrays stay float64 numpy arrays and a sized
    domain's labels are `IndexLabels` (24 instead of about 160 bytes per value; see
    `ldp_telemetry.transforms.compact`, whose `plain_record` makes the plain record).
    """
    if isinstance(result, NumericWindowResult):
        record = numeric_estimate_record(config, result, window_start, window_end, pane,
                                         compact=True)
    else:
        spec = config.postprocess
        record = {
            **_common_fields(config, result, window_start, window_end, pane),
            "postprocess": {"method": spec.method,
                            "params": {k: None if v is None else float(v)
                                       for k, v in spec.as_dict().items() if k != "method"}},
            "labels": _labels(config),
            "estimate": np.asarray(result.estimate, dtype=np.float64),
            "unbiased_estimate": np.asarray(result.unbiased, dtype=np.float64),
            "std_error": np.asarray(result.std_error, dtype=np.float64),
        }
    return record if compact else plain_record(record)


def _labels(config):
    """The metric's labels without a string per value of a sized domain (`IndexLabels`)."""
    if config.labels is None and config.kind == FREQUENCY:
        return IndexLabels(config.d)
    return config.value_labels


def _common_fields(config, result, window_start: str, window_end: str, pane) -> dict:
    """The fields every window-estimate record has, whatever the metric's kind."""
    return {
        "metric": config.name,
        "window_start": window_start,
        "window_end": window_end,
        "n": result.n,
        "protocol": config.protocol_name,
        "epsilon": config.epsilon,
        "estimator": config.estimator.record(result.estimator),
        "pane": pane,
    }


def numeric_estimate_record(config, result: NumericWindowResult, window_start: str,
                            window_end: str, pane, compact: bool = False) -> dict:
    """The record of a numeric metric: the common fields, then the distribution over its buckets.

    `estimate`: B probabilities of the buckets [bucket_edges[i], bucket_edges[i+1]);
    `std_error`: their bootstrap standard errors; `mean`, `variance`, `quantiles` in metric
    units with `mean_std_error`, `quantile_std_errors`; `unbiased_estimate` is null.
    """
    errors = result.errors
    record = {
        **_common_fields(config, result, window_start, window_end, pane),
        "postprocess": {"method": "none", "params": {}},
        "labels": config.value_labels if len(result.estimate) == config.d else [],
        "estimate": np.asarray(result.estimate, dtype=np.float64),
        "unbiased_estimate": None,
        "std_error": np.asarray(errors.buckets, dtype=np.float64),
        "bucket_edges": np.asarray(result.bucket_edges, dtype=np.float64),
        "mean": result.mean,
        "variance": result.variance,
        "quantiles": dict(result.quantiles),
        "mean_std_error": errors.mean,
        "quantile_std_errors": dict(errors.quantiles),
        "bootstrap_replicates": errors.replicates,
    }
    return record if compact else plain_record(record)


class FinalizeEstimatesFn(beam.DoFn):
    """((metric, window start ms, window end ms), SupportStatistic) -> window-estimate record
    on the batch path: each window has one ON_TIME pane (`BATCH_PANE`). Plain Python values, or
    compact ones with `compact` (see `window_estimate_record`).

    Counter `windows_finalized`. For windows and panes given by the runner see
    `FinalizePanesFn`.
    """

    def __init__(self, registry: Registry, compact: bool = False):
        self._registry = registry
        self._compact = compact

    def setup(self):
        self._windows = Metrics.counter("ldp", "windows_finalized")

    def process(self, element: tuple[tuple[str, int, int], SupportStatistic]):
        (metric, start_ms, end_ms), statistic = element
        yield self._record(metric, statistic, iso_ms(start_ms), iso_ms(end_ms), dict(BATCH_PANE))

    def _record(self, metric: str, statistic: SupportStatistic, start: str, end: str,
                pane: dict) -> dict:
        config = self._registry[metric]
        result = finalize_window(config, statistic.table, statistic.n)
        self._windows.inc()
        return window_estimate_record(config, result, start, end, pane, self._compact)


class FinalizePanesFn(FinalizeEstimatesFn):
    """(metric, SupportStatistic) inside a Beam window -> window-estimate record, with the
    window's bounds and the pane the runner gives (streaming runs, runs with pane options)."""

    def process(self, element: tuple[str, SupportStatistic], window=beam.DoFn.WindowParam,
                pane_info=beam.DoFn.PaneInfoParam):
        metric, statistic = element
        pane = {"timing": PaneInfoTiming.to_string(pane_info.timing),
                "index": int(pane_info.index), "is_last": bool(pane_info.is_last)}
        yield self._record(metric, statistic, iso_utc(window.start), iso_utc(window.end), pane)
