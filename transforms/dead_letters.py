"""Dead letters beyond a cap: the first few of each (file, reason) verbatim, the rest counted.

A hostile file can hold millions of records that each become a dead letter (a 6 MB file of
reports of an unknown metric holds 200,000). `DeadLetterCap` keeps the first
`MAX_VERBATIM_DEAD_LETTERS` dead letters of each reason of a file as they are, and folds the
others into one dead letter per (file, reason, store key), whose `records` is the sum of the
records they stand for. The store key is the one the estimate store counts rejects under
(`ldp_telemetry.store.records.reject_slice`: metric, reason and job slice, from the report), and
an aggregate carries the report of the first dead letter it stands for, so the store's counts,
the job's counters and the summary stay exact: read = accepted + dead-lettered everywhere.

Memory: at most `MAX_AGGREGATES` aggregates wait at once (the table is written out when full,
and at the end of each file), whatever the number of dead letters. Beam-free, so that any reader
can use it: call `admit(letter)` for each dead letter of a file and write what it yields, then
`finish_file()` at the end of the file and write what it yields.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from ldp_telemetry.ldp.engine.batches import MAX_DETAIL_CHARS, DeadLetter, clip
from ldp_telemetry.store.records import reject_slice

#: Dead letters of one reason in one file written as they are; the following ones are
#: aggregated per (reason, store key).
MAX_VERBATIM_DEAD_LETTERS = 1_000
#: Most aggregates held at once; a full table is written out (then starts again empty).
MAX_AGGREGATES = 4_096


class DeadLetterCap:
    """The dead letters of one file after another, capped (module docstring).

    `slice_ms` and `slice_offset_ms` are the job's slice (the store counts rejects per slice);
    `verbatim` is how many dead letters of each reason of a file are kept as they are (0: all
    aggregated), `max_aggregates` how many aggregates wait at most.
    """

    def __init__(self, slice_ms: int, slice_offset_ms: int = 0,
                 verbatim: int = MAX_VERBATIM_DEAD_LETTERS, max_aggregates: int = MAX_AGGREGATES):
        if verbatim < 0 or max_aggregates < 1:
            raise ValueError(f"verbatim must be >= 0 and max_aggregates >= 1, got {verbatim} "
                             f"and {max_aggregates}")
        self._slice_ms, self._offset_ms = slice_ms, slice_offset_ms
        self.verbatim, self.max_aggregates = verbatim, max_aggregates
        self._seen: dict[str, int] = {}  # reason -> dead letters of the file so far
        self._aggregates: dict[tuple, list] = {}  # store key -> [first letter, letters, records]

    def admit(self, letter: DeadLetter) -> Iterator[DeadLetter]:
        """`letter` itself while its reason has had fewer than `verbatim` in this file, else
        nothing (it is counted in its aggregate), or the aggregates when the table is full."""
        seen = self._seen.get(letter.reason, 0)
        self._seen[letter.reason] = seen + 1
        if seen < self.verbatim:
            yield letter
            return
        key = reject_slice(letter.as_dict(), self._slice_ms, self._offset_ms)
        aggregate = self._aggregates.get(key)
        if aggregate is None:
            if len(self._aggregates) >= self.max_aggregates:
                yield from self._flush()
            self._aggregates[key] = [letter, 1, letter.records]
        else:
            aggregate[1] += 1
            aggregate[2] += letter.records

    def finish_file(self) -> Iterator[DeadLetter]:
        """The file's aggregates; the next dead letter admitted starts a new file."""
        yield from self._flush()
        self._seen.clear()

    def _flush(self) -> Iterator[DeadLetter]:
        aggregates, self._aggregates = self._aggregates, {}
        for first, letters, records in aggregates.values():
            yield first if letters == 1 else aggregate_letter(first, letters, records,
                                                              self.verbatim)


def aggregate_letter(first: DeadLetter, letters: int, records: int, verbatim: int
                     ) -> DeadLetter:
    """The dead letter standing for `letters` dead letters (`records` records) of `first`'s
    source, reason and store key: `first`'s report and size, a detail saying so."""
    detail = (f"{letters} dead letters ({records} records) of this file and reason, beyond the "
              f"first {verbatim} written one by one, of the metric and time slice of this "
              f"report (the first of them): {first.detail}")
    return replace(first, detail=clip(detail, MAX_DETAIL_CHARS), records=records)
