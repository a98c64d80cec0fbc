"""Counting before the shuffle: partial statistics of one source, and their exact sum per slice.

A batch job counts each file's reports of a (metric, slice) where it decodes them
(`PartialCounter`) and sends through the grouping by slice a `PartialCount`: the partial
statistic, the distinct report ids it counted (8 bytes a report) and where its reports came from
(the source and the ordinals of its batches among the batches the source decodes into), instead
of every report's payload. `merge_partials` then gives exactly what `count_slice` gives over
every batch of the slice — the tables, n, the integrity sample, the duplicates and their
example ids:

* partials whose ids collide with no other partial's and that hold no repeated id themselves
  are *clean*: every report of theirs is counted by `count_slice` too (an id that occurs once in
  the slice is counted whatever the order), so their statistics are added as they are;
* the others are *dirty*: their batches are decoded again (`batches_of`) and counted together
  in the order of their content digests (`batch_digest`), which is the order `count_slice`
  counts a slice holding duplicates in. Every batch holding a repeated id lies in a dirty
  partial, so the copies counted, the duplicates and their examples are those of `count_slice`
  (ldp_telemetry.ldp.engine.counting, "Which copy is counted"), also for copies that carry
  different payloads. A dirty partial's own statistic is dropped: a statistic cannot remove a
  report again, its batches can be counted again.

A source decoded again must give the batches it gave the first time: `merge_partials` checks
that the ids of the batches it is given are the partial's ids and raises `SourceChanged`
otherwise (a file rewritten while the job ran).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.config.registry import Registry
from ldp_telemetry.ldp.engine.batches import REPORT_ID, ReportBatch
from ldp_telemetry.ldp.engine.counting import SliceCounter, SupportStatistic, batch_digest

#: Partial statistics a `PartialCounter` keeps open at once (one per (metric, slice) of its
#: source); past it the oldest is sent on, and the source's later batches of that slice make
#: another partial. Each open partial holds a table of the protocol's statistic, the ids and
#: the integrity sample of its reports.
MAX_OPEN_PARTIALS = 256
#: Bytes the open partials of a `PartialCounter` may hold together (`SliceCounter.nbytes`);
#: past it the oldest are sent on, down to the one just added to.
MAX_OPEN_PARTIAL_BYTES = 64 * 2 ** 20

SliceKey = tuple[str, int]  # (metric, slice start ms)


class SourceChanged(InputError):
    """A source decoded again did not give the reports it gave when it was first counted (a
    file rewritten while the job ran): an input error naming the file (field `input`; the
    command line exits with status 2), not a bug."""

    def __init__(self, message: str, field: str | None = "input"):
        # one argument too: a runner re-raises a worker's exception as type(error)(message)
        super().__init__(message, field)


#: A SourceChanged as a worker's traceback names it: what a portable runner (a job service,
#: Flink's job server) reports of it, as the text of a RuntimeError, instead of the exception.
_REPORTED_CHANGE = re.compile(r"\bldp\.engine\.partials\.SourceChanged: ([^\n]+)")


def reported_source_change(error: RuntimeError) -> SourceChanged | None:
    """The SourceChanged a runner reported only as the text of a failed job (`error`), to be
    raised in its place (the command line exits 2 naming the file); None when it holds none."""
    found = _REPORTED_CHANGE.findall(str(error))
    return SourceChanged(found[-1].strip()) if found else None


class PartialCount:
    """The statistic of some of one source's reports of one (metric, slice).

    `statistic`: their SupportStatistic (duplicates within them already not counted); `ids`:
    the distinct report ids counted, sorted (int64); `source`: where they were read; `ordinals`:
    the positions, among the ReportBatch items the source decodes into, of the batches counted
    (int32, increasing).
    """

    __slots__ = ("statistic", "ids", "source", "ordinals")

    def __init__(self, statistic: SupportStatistic, ids: np.ndarray, source: str,
                 ordinals: np.ndarray):
        self.statistic = statistic
        self.ids = ids
        self.source = source
        self.ordinals = ordinals

    @property
    def clean(self) -> bool:
        """No id repeated within these reports."""
        return not self.statistic.duplicates

    def __reduce__(self) -> tuple:
        return PartialCount, (self.statistic, self.ids, self.source, self.ordinals)

    def __repr__(self) -> str:
        return (f"PartialCount({self.source!r}, batches {self.ordinals.tolist()[:5]}, "
                f"{self.statistic!r})")


class PartialCounter:
    """Counts the batches one source decodes into, a `SliceCounter` per (metric, slice).

    Give `add` every ReportBatch the source decodes into, in order (empty ones too: the ordinals
    count them); it returns the partials it closed to stay within `max_open` partials and
    `max_bytes` (the partial just added to is never closed). `finish()` returns the rest, in
    the order their slices were first seen.
    """

    def __init__(self, registry: Registry, source: str, max_open: int = MAX_OPEN_PARTIALS,
                 max_bytes: int = MAX_OPEN_PARTIAL_BYTES):
        if max_open < 1:
            raise ValueError(f"max_open must be at least 1, got {max_open}")
        self._registry = registry
        self._source = source
        self._max_open = max_open
        self._max_bytes = max_bytes
        self._open: dict[SliceKey, tuple[SliceCounter, list[int]]] = {}
        self._sizes: dict[SliceKey, int] = {}
        self._ordinal = 0

    def add(self, batch: ReportBatch) -> list[tuple[SliceKey, PartialCount]]:
        ordinal, self._ordinal = self._ordinal, self._ordinal + 1
        if not batch.n:
            return []
        key = (batch.metric, batch.slice_start_ms)
        closed = []
        entry = self._open.get(key)
        if entry is None:
            if len(self._open) >= self._max_open:
                closed.append(self._close(next(iter(self._open))))
            entry = self._open[key] = (SliceCounter(self._registry), [])
        entry[0].add(batch)
        entry[1].append(ordinal)
        self._sizes[key] = entry[0].nbytes()
        while len(self._open) > 1 and sum(self._sizes.values()) > self._max_bytes:
            closed.append(self._close(next(k for k in self._open if k != key)))
        return closed

    def finish(self) -> list[tuple[SliceKey, PartialCount]]:
        return [self._close(key) for key in list(self._open)]

    def _close(self, key: SliceKey) -> tuple[SliceKey, PartialCount]:
        counter, ordinals = self._open.pop(key)
        self._sizes.pop(key, None)
        return key, PartialCount(counter.result(), counter.ids(), self._source,
                                 np.asarray(ordinals, dtype=np.int32))


def batches_at(items: Iterable, ordinals: Sequence[int]) -> list[ReportBatch]:
    """The ReportBatch items of a source's decoding (other items skipped) at `ordinals`
    (increasing), as `PartialCounter` numbered them."""
    wanted = iter(int(o) for o in ordinals)
    target = next(wanted, None)
    found = []
    ordinal = 0
    for item in items:
        if target is None:
            break
        if not isinstance(item, ReportBatch):
            continue
        if ordinal == target:
            found.append(item)
            target = next(wanted, None)
        ordinal += 1
    return found


def colliding(ids: Sequence[np.ndarray]) -> np.ndarray:
    """Indices (sorted) of the arrays of distinct sorted ids that share an id with another.

    Arrays whose ranges [first, last] overlap no other's are never compared; the others are
    merged and compared once (O(m log m) in their m ids)."""
    spans = sorted((a[0], a[-1], i) for i, a in enumerate(ids) if len(a))
    overlapping: set[int] = set()
    reach, reacher = None, -1  # the largest last id so far, and whose
    for first, last, i in spans:
        if reach is not None and first <= reach:
            overlapping.update((i, reacher))
        if reach is None or last > reach:
            reach, reacher = last, i
    if not overlapping:
        return np.zeros(0, dtype=np.int64)
    members = sorted(overlapping)
    values = np.concatenate([ids[i] for i in members])
    owners = np.repeat(np.asarray(members), [len(ids[i]) for i in members])
    order = np.argsort(values, kind="stable")
    values, owners = values[order], owners[order]
    same = values[1:] == values[:-1]
    return np.union1d(owners[1:][same], owners[:-1][same])


def merge_partials(registry: Registry, partials: Iterable[PartialCount],
                   batches_of: Callable[[PartialCount], list[ReportBatch]]
                   ) -> SupportStatistic:
    """The statistic of every report of one slice, from its partials: exactly `count_slice`
    over every batch of the slice (module docstring). `batches_of(partial)` decodes a dirty
    partial's batches again; SourceChanged when they are not the ones it counted."""
    partials = sorted(partials, key=lambda p: (p.source, p.ordinals.tolist()))
    dirty = set(colliding([p.ids for p in partials]).tolist())
    dirty.update(i for i, p in enumerate(partials) if not p.clean)
    total = SupportStatistic(None)
    for i, partial in enumerate(partials):
        if i not in dirty:
            total.add(partial.statistic)
    if dirty:
        batches = []
        for i in sorted(dirty):
            again = batches_of(partials[i])
            _check_same(partials[i], again)
            batches.extend(again)
        counter = SliceCounter(registry)
        for batch in sorted(batches, key=batch_digest):
            counter.add(batch)
        total.add(counter.result())
    return total


def _check_same(partial: PartialCount, batches: list[ReportBatch]) -> None:
    ids = [b.columns[REPORT_ID] for b in batches if REPORT_ID in b.columns]
    distinct = np.unique(np.concatenate(ids)) if ids else np.zeros(0, dtype=np.int64)
    rows = sum(b.n for b in batches)
    if (len(batches) != len(partial.ordinals) or not np.array_equal(distinct, partial.ids)
            or rows != partial.statistic.n + partial.statistic.duplicates):
        raise SourceChanged(
            f"input file {partial.source!r} changed while the job ran: decoded again it did not "
            f"give the reports it gave when it was counted (batches {len(batches)} of "
            f"{len(partial.ordinals)}, reports {rows} of "
            f"{partial.statistic.n + partial.statistic.duplicates}), so its slice cannot be "
            f"counted exactly; run the job again on files that stay as they are")
