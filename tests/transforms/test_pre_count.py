"""Counting before the shuffle in a Beam job: the reader's partial statistics, grouped by slice
and added by CountKeyedWindows, give exactly the statistics of counting every batch of each
slice in one place (count_slice), as the path that moves every batch through the grouping does:
report ids repeated within a file, across files and layouts, with different payloads, and a file
listed twice."""
from __future__ import annotations

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that, equal_to

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.engine.batches import ReportBatch
from ldp_telemetry.ldp.engine.counting import DUPLICATES, count_slice
from ldp_telemetry.ldp.engine.partials import PartialCounter
from ldp_telemetry.schemas.codec import ReportDecoder
from ldp_telemetry.schemas.envelopes import write_envelopes
from ldp_telemetry.schemas.writer import write_reports
from ldp_telemetry.transforms.count import CountKeyedWindows
from ldp_telemetry.transforms.read import BATCHES, FileBatches, ReadReportBatches

HOUR = 3_600_000
T0 = 1_700_000_000_000 - 1_700_000_000_000 % HOUR
REGISTRY = parse_registry({"metrics": [
    {"name": "m.oue", "protocol": "oue", "epsilon": 1.0, "domain": {"size": 20}},
    {"name": "m.grr", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 6}}]})


def write_files(folder, ids_range):
    """Per metric, three files (two of envelopes, one per-report) over three hours; ids drawn
    from `ids_range` (repeats within and across files, each copy its own payload)."""
    rng = np.random.default_rng(7)
    paths = []
    for config in REGISTRY.metrics:
        for k in range(3):
            n = 700
            ids = rng.integers(0, ids_range, n).astype(np.int64)
            times = T0 + rng.integers(0, 3 * HOUR, n)
            columns = config.protocol.perturb(rng.integers(0, config.d, n), rng)
            path = str(folder / f"{config.name}-{k}.avro")
            if k == 2:
                write_reports(path, config.name, config.protocol, ids, times, columns)
            else:
                write_envelopes(path, config.name, config.protocol, ids, times, columns,
                                envelope_reports=90)
            paths.append(path)
    return paths


def plain(key, statistic):
    """A statistic as plain values beam's equal_to can compare."""
    parts = []
    for version, part in sorted(statistic.parts.items()):
        priority, columns = part.sample.rows() if part.sample is not None else ([], {})
        parts.append((version, part.n, np.asarray(part.table).tolist(), list(map(int, priority)),
                      {name: np.asarray(c).tolist() for name, c in sorted(columns.items())}))
    return key, statistic.metric, statistic.n, parts


def expected(files, spec):
    """count_slice over every batch of each slice, outside Beam, in the order of the files."""
    decoder = ReportDecoder(REGISTRY, spec.slice_ms)
    slices: dict = {}
    for path in files:
        for item in decoder.decode_file(path):
            if isinstance(item, ReportBatch):
                slices.setdefault((item.metric, item.slice_start_ms), []).append(item)
    windows, duplicates = [], 0
    for (metric, start), batches in slices.items():
        statistic = count_slice(REGISTRY, batches)
        duplicates += statistic.duplicates
        statistic.duplicates, statistic.duplicate_ids = 0, ()
        windows.append(plain((metric, start, start + spec.slice_ms), statistic))
    return windows, duplicates


@pytest.mark.parametrize("ids_range", [1500, 10 ** 15])
@pytest.mark.parametrize("pre_count", [True, False])
def test_counting_before_the_shuffle_gives_count_slice_of_every_batch(
        tmp_path, beam_runner, pre_count, ids_range):
    files = write_files(tmp_path, ids_range)
    files.append(files[0])  # one file listed twice: every report of it repeats
    spec = WindowSpec(HOUR, HOUR)
    windows, duplicates = expected(files, spec)
    assert duplicates >= 700 and len(windows) == 6
    with beam.Pipeline(runner=beam_runner) as pipeline:
        reader = ReadReportBatches(REGISTRY, spec.slice_ms, pre_count=pre_count)
        read = pipeline | beam.Create(files) | reader
        counted = read[BATCHES] | CountKeyedWindows(
            REGISTRY, spec, reader.recount() if pre_count else None)
        assert_that(counted["windows"] | beam.MapTuple(plain), equal_to(windows),
                    label="Windows")
        assert_that(counted[DUPLICATES] | beam.Map(lambda letter: letter.records)
                    | beam.CombineGlobally(sum), equal_to([duplicates]), label="Duplicates")


@pytest.mark.parametrize("max_bytes", [0, 2 ** 30])
def test_file_batches_decodes_a_partials_batches_again(tmp_path, max_bytes):
    """The batches a partial counted, decoded again; a file kept (within max_bytes) is not
    decoded again for its partials of other slices."""
    files = write_files(tmp_path, 10 ** 15)
    spec = WindowSpec(HOUR, HOUR)
    decoder = ReportDecoder(REGISTRY, spec.slice_ms)
    batches_of = FileBatches(REGISTRY, spec.slice_ms, max_bytes=max_bytes)
    for path in files[:2]:
        counter = PartialCounter(REGISTRY, path)
        first = [item for item in decoder.decode_file(path) if isinstance(item, ReportBatch)]
        partials = [p for batch in first for p in counter.add(batch)] + counter.finish()
        assert len(partials) == 3  # one per hour
        for _, partial in partials:
            again = batches_of(partial)
            want = [first[i] for i in partial.ordinals.tolist()]
            assert [b.slice_start_ms for b in again] == [b.slice_start_ms for b in want]
            for got, expected_batch in zip(again, want, strict=True):
                assert sorted(got.columns) == sorted(expected_batch.columns)
                for name, column in expected_batch.columns.items():
                    np.testing.assert_array_equal(got.columns[name], column)
    assert batches_of.decoded == (6 if max_bytes == 0 else 2)
