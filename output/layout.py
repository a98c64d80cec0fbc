"""Where a job's output lives: the files of a batch run and of a live run, and the keys of windows.

A batch run (``ldp run --input …``) writes, under its output folder OUT::

    OUT/estimates-SSSSS-of-NNNNN.jsonl    window-estimate records, one JSON object per line
    OUT/estimates-SSSSS-of-NNNNN.avro     the same records (schemas/window_estimate.avsc)
    OUT/dead_letters-SSSSS-of-NNNNN.jsonl dead-letter records (schemas/dead_letter.avsc)
    OUT/dead_letters-SSSSS-of-NNNNN.avro

A live run (``ldp run --follow …``) writes each pane as it fires::

    OUT/panes/metric=<segment>/version=<v1, v2, ... or combined>/
        date=<YYYY-MM-DD of the window start>/<start>--<end>/
        pane-<index:05d>-<TIMING>.json    one window-estimate record
        latest.json                       a copy of the window's pane with the highest index
    OUT/panes.log                         append-only index, one JSON line per pane written
    OUT/dead_letters/<file>.jsonl         dead letters of each report file read
    OUT/too_late.jsonl                    per window, the reports found later than allowed
    OUT/status.json                       counters, watermark, too-late counts (rewritten)
    OUT/live-checkpoint.json              what a restart resumes from

Every file is written whole or not at all (`ldp_telemetry.output.atomic`). `metric_segment`
turns a metric name into one path segment injectively, so two metrics never share a file;
report files of the simulator and the dashboard's pages use the same encoding. The records are
built by `ldp_telemetry.output.records` and read back by `ldp_telemetry.output.reader`.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from ldp_telemetry.ldp.base.times import ms_from_iso

ESTIMATES = "estimates"
DEAD_LETTERS = "dead_letters"
PANES_DIR = "panes"
PANE_LOG = "panes.log"
LATEST = "latest.json"
DEAD_LETTER_DIR = "dead_letters"
TOO_LATE_LOG = "too_late.jsonl"
STATUS = "status.json"
CHECKPOINT = "live-checkpoint.json"

#: Longest encoded segment kept whole; a longer one keeps its first bytes and a digest of the
#: whole name (file systems allow 255 bytes per name, and a segment gets a prefix and suffix).
MAX_SEGMENT_BYTES = 160
_DIGEST_CHARS = 32  # 128 bits of SHA-256: a collision between two long names is not a concern


def metric_segment(metric: str) -> str:
    """The metric's name as one path segment, injectively.

    Every byte of the name's UTF-8 text other than an ASCII letter, digit, ``_`` or a ``.``
    that is not the first character is percent-encoded (``/`` -> ``%2F``, ``-`` -> ``%2D``,
    ``%`` -> ``%25``, ``é`` -> ``%C3%A9``). So ``a/b``, ``a_b`` and ``a%2Fb`` stay distinct; the
    segment never holds ``-`` (``<segment>-00001.avro`` names one metric only), never starts
    with ``.`` (no hidden file, no ``..``) and never holds a path separator. An encoding longer
    than MAX_SEGMENT_BYTES is cut and ends with ``~`` and a SHA-256 digest of the name (``~``
    never appears otherwise).
    """
    out = []
    for position, char in enumerate(metric):
        if char.isascii() and (char.isalnum() or char == "_" or (char == "." and position)):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
    segment = "".join(out)
    if len(segment) <= MAX_SEGMENT_BYTES:
        return segment
    digest = hashlib.sha256(metric.encode("utf-8")).hexdigest()[:_DIGEST_CHARS]
    head = segment[:MAX_SEGMENT_BYTES - _DIGEST_CHARS - 1]
    head = head[:head.rfind("%")] if "%" in head[-2:] else head  # never cut an escape in two
    return f"{head}~{digest}"


class WindowKey(NamedTuple):
    """The identity of a window's estimate: its metric, its bounds in epoch milliseconds and
    the configuration version its reports were made under (`version_label`)."""

    metric: str
    start_ms: int
    end_ms: int
    version: str = ""

    @property
    def window(self) -> WindowKey:
        """The key of the window itself, whatever the version (version "")."""
        return self._replace(version="")


#: The version label of a combined estimate (see ldp_telemetry.ldp.estimation.combine).
COMBINED = "combined"


def version_label(record: Mapping) -> str:
    """Which configuration versions a record's estimate is from: ``v<N>`` for version N,
    COMBINED for a combined estimate, "" for a record written before records named versions."""
    if record.get("combined_versions") is not None:
        return COMBINED
    version = record.get("config_version")
    return "" if version is None else f"v{version}"


def window_key(record: Mapping) -> WindowKey:
    """The key of a window-estimate record, a pane-log entry or any dict with ``metric``,
    ``window_start`` and ``window_end`` (ISO-8601 text) and, for a versioned estimate,
    ``config_version`` or ``combined_versions``."""
    return WindowKey(record["metric"], ms_from_iso(record["window_start"]),
                     ms_from_iso(record["window_end"]), version_label(record))


def pane_path(record: Any) -> str:  # an EstimateRecord (output.estimate imports this module)
    """The pane file of a window-estimate record (`output.estimate.EstimateRecord`), relative to
    the output folder ('/'-joined)."""
    start, end = (text.replace("-", "").replace(":", "")
                  for text in (record.window_start, record.window_end))
    version = record.version
    return "/".join((PANES_DIR, f"metric={metric_segment(record.metric)}",
                     *((f"version={version}",) if version else ()),
                     f"date={record.window_start[:10]}", f"{start}--{end}",
                     f"pane-{record.pane.index:05d}-{record.pane.timing}.json"))


def shard_pattern(name: str, suffix: str = ".jsonl") -> str:
    """The glob of a batch run's shards of `name` (ESTIMATES or DEAD_LETTERS)."""
    return f"{name}-*{suffix}"


def shard_name(name: str, index: int, count: int, suffix: str) -> str:
    """`<name>-SSSSS-of-NNNNN<suffix>`: shard `index` of `count` (more digits past 99,999)."""
    return f"{name}-{index:05d}-of-{count:05d}{suffix}"


def shard_count(filename: str, name: str, suffix: str) -> int | None:
    """N of a file named `<name>-SSSSS-of-NNNNN<suffix>` (`shard_name`), else None."""
    found = re.fullmatch(re.escape(name) + r"-\d{5,}-of-(\d{5,})" + re.escape(suffix), filename)
    return None if found is None else int(found[1])
