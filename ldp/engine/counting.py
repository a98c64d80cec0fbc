"""The Beam-free counting engine: report batches of one (metric, slice) into its statistic.

The statistic is the protocol's sufficient statistic: counting dispatches to the metric's
protocol object through `new_statistic()`, `accumulate(statistic, columns)` and the statistic's
addition (`+=`), and knows nothing else about any protocol. Reports of different configuration
versions of a metric are never added together: each version has its own table.

Duplicates. A slice's counter (`SliceCounter`) keeps the report ids it has counted (`IdSet`,
8 bytes per distinct report), so a report id seen again in the same slice is not counted: it is
reported as `duplicates` on the slice's statistic and becomes a `duplicate` dead letter. The
ids are dropped with the counter: deduplication holds within a slice (for fixed windows, the
window), not across slices or forever. Two partial statistics that hold the same id cannot be
added exactly (a statistic cannot remove a report again), so one counter sees every batch of a
slice, or at least every batch holding a repeated id (`ldp_telemetry.ldp.engine.partials`).

Which copy is counted. When a slice holds duplicates, `count_slice` counts its batches in the
order of their content digests (`batch_digest`), not in the order they arrived, and each
batch's rows in order: copies that carry the same report (a retried file) give the same
statistic whichever is counted, and copies of an id that carry *different* reports give one
answer on every runner and every run (the copy in the batch of the smallest digest). A followed
directory's follower counts the first copy it reads instead (`pipelines.slice_ids`).

A batch job counts each file's reports before the grouping by slice and adds those partial
statistics exactly afterwards (`ldp_telemetry.ldp.engine.partials`), with the same copies counted.

The Beam steps around it are in `ldp_telemetry.transforms.count`;
`ldp_telemetry.ldp.engine.window` counts and finalizes one window in process, for evaluations
and tests.
"""
from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable

import numpy as np

from ldp_telemetry.ldp.base.times import iso_from_ms
from ldp_telemetry.ldp.config.registry import Registry
from ldp_telemetry.ldp.engine.batches import REPORT_ID, DeadLetter, ReportBatch
from ldp_telemetry.ldp.engine.reasons import Reason
from ldp_telemetry.ldp.integrity import accumulate as integrity
from ldp_telemetry.ldp.integrity.sample import ReportSample

#: The name of the stream of `duplicate` dead letters (a tagged output of the Beam steps).
DUPLICATES = "duplicates"
#: How many repeated report ids a statistic keeps as examples for its dead letter.
DUPLICATE_EXAMPLES = 5


class VersionStatistic:
    """The report count n and the protocol's statistic (`table`) of one configuration version,
    and its integrity accumulator (`sample`: a ldp.integrity ReportSample, or None)."""

    __slots__ = ("n", "table", "sample")

    def __init__(self, n: int, table: np.ndarray, sample: ReportSample | None = None) -> None:
        self.n = n
        self.table = table
        self.sample = sample

    def __reduce__(self) -> tuple[type[VersionStatistic], tuple]:
        return VersionStatistic, (self.n, self.table, self.sample)


class SupportStatistic:
    """One metric's statistics, per configuration version (`parts`: version -> VersionStatistic).

    Reports made under different configurations of a metric are never added together: each
    version has its own table. `metric` None (and no parts) is the empty statistic that has seen
    no input yet. Adding is addition of the tables of each version, so the size never depends on
    the number of reports. `duplicates` counts reports not added because their id was already
    counted in the slice; `duplicate_ids` holds a few of their ids.
    """

    __slots__ = ("metric", "parts", "duplicates", "duplicate_ids")

    def __init__(self, metric: str | None, parts: dict[int, VersionStatistic] | None = None,
                 duplicates: int = 0, duplicate_ids: tuple[int, ...] = ()):
        self.metric = metric
        self.parts = {} if parts is None else parts
        self.duplicates = duplicates
        self.duplicate_ids = duplicate_ids

    @property
    def n(self) -> int:
        """Reports counted, over every version."""
        return sum(part.n for part in self.parts.values())

    def add(self, other: SupportStatistic) -> SupportStatistic:
        """Add `other` into this statistic (in place) and return it."""
        if other.metric is None:
            return self
        if self.metric is None:
            self.metric = other.metric
        elif other.metric != self.metric:
            raise ValueError(f"cannot add a statistic of metric {other.metric!r} to one of "
                             f"{self.metric!r}")
        for version, part in other.parts.items():
            mine = self.parts.get(version)
            if mine is None:  # never add into an input: start from a copy
                self.parts[version] = VersionStatistic(part.n, copy.deepcopy(part.table),
                                                       copy.deepcopy(part.sample))
            else:
                mine.table += part.table
                mine.n += part.n
                if mine.sample is not None and part.sample is not None:
                    mine.sample.add(part.sample)
        self.duplicates += other.duplicates
        self.duplicate_ids = (self.duplicate_ids + other.duplicate_ids)[:DUPLICATE_EXAMPLES]
        return self

    def __reduce__(self) -> tuple[type[SupportStatistic], tuple]:
        return SupportStatistic, (self.metric, self.parts, self.duplicates, self.duplicate_ids)

    def __repr__(self) -> str:
        return (f"SupportStatistic(metric={self.metric!r}, n={self.n}, "
                f"versions={sorted(self.parts)}, duplicates={self.duplicates})")


class IdSet:
    """Distinct 64-bit report ids, as a few sorted disjoint numpy arrays (levels).

    A new batch becomes a level; the last two levels are merged while the older is at most
    twice the newer, so there are O(log n) levels and each id is re-sorted O(log n) times.
    Memory: 8 bytes per distinct id (16 for a moment while two levels merge).
    """

    __slots__ = ("levels",)

    def __init__(self, levels: list[np.ndarray] | None = None):
        self.levels = levels or []

    def __len__(self) -> int:
        return sum(len(level) for level in self.levels)

    def __contains__(self, report_id: int) -> bool:
        return bool(self._seen(np.array([report_id], dtype=np.int64))[0])

    def _seen(self, ids: np.ndarray) -> np.ndarray:
        seen = np.zeros(len(ids), dtype=bool)
        for level in self.levels:
            at = np.searchsorted(level, ids)
            seen |= level[np.minimum(at, len(level) - 1)] == ids
        return seen

    def array(self) -> np.ndarray:
        """Every id held, sorted (int64)."""
        if not self.levels:
            return np.zeros(0, dtype=np.int64)
        if len(self.levels) == 1:
            return self.levels[0]
        return np.sort(np.concatenate(self.levels))

    def add_new(self, ids: np.ndarray) -> np.ndarray:
        """Add `ids`; return the mask of rows to count: the first row of each id not seen before."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) and (not self.levels or ids[0] > max(level[-1] for level in self.levels)) \
                and (len(ids) == 1 or bool((ids[1:] > ids[:-1]).all())):
            # Increasing ids above every id seen (a single report, batches in id order): all
            # new. A copy: the batch's column may be a view of a larger buffer (coders.py).
            self._add_level(ids.copy())
            return np.ones(len(ids), dtype=bool)
        distinct, first = np.unique(ids, return_index=True)
        new = ~self._seen(distinct)
        keep = np.zeros(len(ids), dtype=bool)
        keep[first[new]] = True
        if new.any():
            self._add_level(distinct[new])
        return keep

    def _add_level(self, level: np.ndarray) -> None:
        """Append a sorted level of new ids; merge the last two levels while the older is at
        most twice the newer (a concatenation when the newer lies above the older)."""
        self.levels.append(level)
        while len(self.levels) > 1 and len(self.levels[-2]) <= 2 * len(self.levels[-1]):
            newer, older = self.levels.pop(), self.levels.pop()
            merged = np.concatenate([older, newer])
            if older[-1] > newer[0]:
                merged.sort(kind="stable")
            self.levels.append(merged)


class SliceCounter:
    """Counts the report batches of ONE (metric, slice) into its SupportStatistic, each batch
    into the table of its configuration version.

    `add(batch)` for each batch of the slice, in any order, then `result()`. A report whose id
    the counter has already counted (under any version) is not counted again (see the module
    docstring): the first report of each id is the one counted, and the others are
    `duplicates` of the result.
    """

    __slots__ = ("_registry", "_statistic", "_ids")

    def __init__(self, registry: Registry):
        self._registry = registry
        self._statistic = SupportStatistic(None)
        self._ids = IdSet()

    def add(self, batch: ReportBatch) -> None:
        if not batch.n:
            return
        statistic = self._statistic
        config = self._registry.version(batch.metric, batch.version)
        if statistic.metric is None:
            statistic.metric = batch.metric
        columns = batch.columns
        ids = columns.get(REPORT_ID)
        if ids is not None:
            keep = self._ids.add_new(ids)
            columns = {k: v for k, v in columns.items() if k != REPORT_ID}
            if not keep.all():
                repeated = batch.columns[REPORT_ID][~keep]
                statistic.duplicates += len(repeated)
                statistic.duplicate_ids = (statistic.duplicate_ids + tuple(
                    repeated[:DUPLICATE_EXAMPLES].tolist()))[:DUPLICATE_EXAMPLES]
                columns = {k: v[keep] for k, v in columns.items()}
                ids = ids[keep]
        kept = len(next(iter(columns.values())))
        if kept:  # a version has a table once a report of it is counted, never with n = 0
            part = statistic.parts.get(config.version)
            if part is None:
                part = statistic.parts[config.version] = VersionStatistic(
                    0, config.protocol.new_statistic(), integrity.new_sample(config))
            config.protocol.accumulate(part.table, columns)
            part.n += kept
            integrity.observe(part.sample, config, columns, ids)

    def result(self) -> SupportStatistic:
        """The slice's statistic so far (metric None when no report was counted)."""
        return self._statistic

    def ids(self) -> np.ndarray:
        """The distinct report ids counted so far, sorted (int64)."""
        return self._ids.array()

    def nbytes(self) -> int:
        """Bytes held: the tables (`statistic_nbytes` of their versions), the integrity
        samples and the ids counted (8 bytes each)."""
        metric = self._statistic.metric
        if metric is None:  # nothing counted yet
            return 8 * len(self._ids)
        return sum(self._registry.version(metric, version).statistic_nbytes
                   + (part.sample.nbytes() if part.sample is not None else 0)
                   for version, part in self._statistic.parts.items()) + 8 * len(self._ids)


def count_slice(registry: Registry, batches: Iterable[ReportBatch]) -> SupportStatistic:
    """The statistic of every batch of one slice: counted in the order given, and again in
    the order of the batches' digests (`batch_digest`) when the slice holds duplicates, so
    that which copy counts never depends on the runner (module docstring)."""
    if iter(batches) is batches:  # a one-shot iterator: it may be read twice below
        batches = list(batches)
    counter = SliceCounter(registry)
    for batch in batches:
        counter.add(batch)
    if counter.result().duplicates:
        counter = SliceCounter(registry)
        for batch in sorted(batches, key=batch_digest):
            counter.add(batch)
    return counter.result()


def batch_digest(batch: ReportBatch) -> bytes:
    """A digest of the batch's content (version, column names, types, shapes and values): the
    order a slice's batches are counted in once it holds duplicates (module docstring)."""
    digest = hashlib.blake2b(f"{batch.version}".encode(), digest_size=16)
    for name in sorted(batch.columns):
        column = np.ascontiguousarray(batch.columns[name])
        digest.update(f"|{name}|{column.dtype.str}|{column.shape}|".encode())
        digest.update(repr(column.tolist()).encode() if column.dtype.hasobject
                      else column.tobytes())
    return digest.digest()


def duplicate_letter(statistic: SupportStatistic, start_ms: int, slice_ms: int) -> DeadLetter:
    """The `duplicate` dead letter of a slice statistic's repeated report ids."""
    where = (f"metric {statistic.metric!r}, slice [{iso_from_ms(start_ms)}, "
             f"{iso_from_ms(start_ms + slice_ms)})")
    examples = ", ".join(str(i) for i in statistic.duplicate_ids)
    return DeadLetter(where, Reason.DUPLICATE,
                      f"{statistic.duplicates} report(s) repeat a report id already counted in "
                      f"this slice (ids such as {examples}); each id is counted once",
                      records=statistic.duplicates)
