"""Counting before the shuffle (ldp.engine.partials), without a pipeline: partial statistics of
sources, added by merge_partials, give exactly count_slice over every batch of the slice — the
tables, n, the integrity sample, the duplicates and their examples — with report ids repeated
within a source, across sources, with different payloads, and a source read twice."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.batches import REPORT_ID, DeadLetter, ReportBatch
from ldp_telemetry.ldp.engine.counting import SupportStatistic, count_slice
from ldp_telemetry.ldp.engine.partials import (PartialCount, PartialCounter, SourceChanged,
                                               batches_at, colliding, merge_partials)

PROTOCOLS = [("grr", 1.0, 10), ("oue", 1.0, 13), ("olh", 1.5, 10)]
REGISTRY = parse_registry({"metrics": [
    {"name": name, "protocol": name, "epsilon": epsilon, "domain": {"size": d}}
    for name, epsilon, d in PROTOCOLS]})
SLICE = (0, 1000)  # two slices of each metric


def source_batches(metric, seed, batches=6, size=50, id_range=10_000):
    """One source's batches of `metric` over two slices; ids drawn from `id_range` (small:
    repeats within and across sources), payloads fresh (the same id, different payloads)."""
    protocol = REGISTRY[metric].protocol
    rng = np.random.default_rng(seed)
    out = []
    for i in range(batches):
        columns = protocol.perturb(rng.integers(0, protocol.d, size), rng)
        columns[REPORT_ID] = rng.integers(0, id_range, size).astype(np.int64)
        out.append(ReportBatch(metric, SLICE[i % 2], columns))
    return out


def partials_of(sources: dict[str, list[ReportBatch]], max_open=2):
    """Every source's partials, keyed by slice, as a reader counting before the shuffle makes
    them (the decoding's dead letters interleaved: ordinals count batches only)."""
    by_key: dict = {}
    for name, batches in sources.items():
        counter = PartialCounter(REGISTRY, name, max_open=max_open)
        for batch in batches:
            for key, partial in counter.add(batch):
                by_key.setdefault(key, []).append(pickle.loads(pickle.dumps(partial)))
        for key, partial in counter.finish():
            by_key.setdefault(key, []).append(pickle.loads(pickle.dumps(partial)))
    return by_key


def decoding(batches):
    """A source's decoding: its batches with dead letters between them."""
    for batch in batches:
        yield DeadLetter("x", "undecodable", "between batches")
        yield batch


def redecoder(sources, calls=None):
    def batches_of(partial):
        if calls is not None:
            calls.append(partial.source)
        return batches_at(decoding(sources[partial.source]), partial.ordinals)
    return batches_of


def assert_same_statistic(got: SupportStatistic, want: SupportStatistic):
    assert got.metric == want.metric and got.n == want.n
    assert got.duplicates == want.duplicates and got.duplicate_ids == want.duplicate_ids
    assert sorted(got.parts) == sorted(want.parts)
    for version, part in want.parts.items():
        mine = got.parts[version]
        assert mine.n == part.n
        assert type(mine.table) is type(part.table)
        np.testing.assert_array_equal(np.asarray(mine.table), np.asarray(part.table))
        if part.sample is None:
            assert mine.sample is None
        else:
            (p1, c1), (p2, c2) = mine.sample.rows(), part.sample.rows()
            np.testing.assert_array_equal(p1, p2)
            assert sorted(c1) == sorted(c2)
            for name in c2:
                np.testing.assert_array_equal(c1[name], c2[name])


def reference(sources, key):
    """count_slice over every batch of the slice, in the order sources and batches come."""
    return count_slice(REGISTRY, [b for batches in sources.values() for b in batches
                                  if (b.metric, b.slice_start_ms) == key])


@pytest.mark.parametrize("metric", [name for name, _, _ in PROTOCOLS])
@pytest.mark.parametrize("id_range", [150, 10_000, 10 ** 12])
def test_merged_partials_are_count_slice_of_every_batch(metric, id_range):
    """id_range 150: most ids repeat, within and across sources, with different payloads;
    10,000: a few repeats; 10¹²: none (clean partials only, nothing decoded again)."""
    sources = {f"file-{k}": source_batches(metric, seed=k, id_range=id_range) for k in range(4)}
    sources["file-0-again"] = sources["file-0"]  # one file read twice: all of it repeats
    calls = []
    for key, partials in partials_of(sources).items():
        got = merge_partials(REGISTRY, reversed(partials), redecoder(sources, calls))
        assert_same_statistic(got, reference(sources, key))
    if id_range == 10 ** 12:  # only the file read twice is decoded again
        assert set(calls) == {"file-0", "file-0-again"}


def test_clean_partials_are_added_without_decoding_again():
    sources = {f"f{k}": [ReportBatch("oue", 0, {**REGISTRY["oue"].protocol.perturb(
        np.zeros(5, int), np.random.default_rng(k)), REPORT_ID: np.arange(5) + 10 * k})]
        for k in range(3)}

    def never(partial):
        raise AssertionError(f"{partial.source} decoded again")
    for key, partials in partials_of(sources).items():
        assert_same_statistic(merge_partials(REGISTRY, partials, never), reference(sources, key))


def test_only_the_sources_holding_colliding_ids_are_decoded_again():
    protocol = REGISTRY["grr"].protocol
    rng = np.random.default_rng(5)

    def batch(ids):
        return ReportBatch("grr", 0, {**protocol.perturb(rng.integers(0, 10, len(ids)), rng),
                                      REPORT_ID: np.asarray(ids, dtype=np.int64)})
    sources = {"a": [batch([1, 2, 3])], "b": [batch([3, 4])], "c": [batch([0, 5, 9])],
               "d": [batch([6, 7, 7])]}  # c spans a and b's ids without sharing one; d repeats
    calls = []
    [(key, partials)] = partials_of(sources).items()
    got = merge_partials(REGISTRY, partials, redecoder(sources, calls))
    assert sorted(calls) == ["a", "b", "d"]
    assert_same_statistic(got, reference(sources, key))
    assert got.n == 9 and got.duplicates == 2


def test_a_source_changed_since_it_was_counted_is_refused():
    sources = {k: source_batches("oue", seed=s, id_range=300) for k, s in (("a", 1), ("b", 2))}
    changed = {**sources, "a": source_batches("oue", seed=3, id_range=300)}
    key, partials = next(iter(partials_of(sources).items()))
    with pytest.raises(SourceChanged, match="'a' changed while the job ran"):
        merge_partials(REGISTRY, partials, redecoder(changed))


def test_partial_counter_closes_the_oldest_slice_past_its_limit():
    batches = source_batches("grr", seed=1, batches=5)  # slices 0, 1000, 0, 1000, 0
    counter = PartialCounter(REGISTRY, "s", max_open=1)
    closed = [c for b in batches for c in counter.add(b)] + counter.finish()
    assert [(key[1], p.ordinals.tolist()) for key, p in closed] == [
        (0, [0]), (1000, [1]), (0, [2]), (1000, [3]), (0, [4])]
    counter = PartialCounter(REGISTRY, "s", max_open=2)
    closed = [c for b in batches for c in counter.add(b)] + counter.finish()
    assert [(key[1], p.ordinals.tolist()) for key, p in closed] == [
        (0, [0, 2, 4]), (1000, [1, 3])]
    assert sum(p.statistic.n + p.statistic.duplicates for _, p in closed) == 250
    counter = PartialCounter(REGISTRY, "s", max_bytes=1)  # one open partial: the latest
    closed = [c for b in batches for c in counter.add(b)] + counter.finish()
    assert [(key[1], p.ordinals.tolist()) for key, p in closed] == [
        (0, [0]), (1000, [1]), (0, [2]), (1000, [3]), (0, [4])]
    counter = PartialCounter(REGISTRY, "s", max_bytes=10 ** 9)
    for batch in batches:
        counter.add(batch)
    counters = [c for c, _ in counter._open.values()]
    assert sum(c.nbytes() for c in counters) == (  # no integrity sample for GRR
        2 * REGISTRY["grr"].statistic_nbytes + 8 * sum(len(c.ids()) for c in counters))
    with pytest.raises(ValueError, match="max_open"):
        PartialCounter(REGISTRY, "s", max_open=0)


def test_empty_batches_are_numbered_and_never_counted():
    protocol = REGISTRY["grr"].protocol
    empty = ReportBatch("grr", 0, {"value": np.zeros(0, np.int32),
                                   REPORT_ID: np.zeros(0, np.int64)})
    full = ReportBatch("grr", 0, {**protocol.perturb(np.arange(3), np.random.default_rng(1)),
                                  REPORT_ID: np.arange(3, dtype=np.int64)})
    counter = PartialCounter(REGISTRY, "s")
    assert counter.add(empty) == [] and counter.add(full) == []
    [(_, partial)] = counter.finish()
    assert partial.ordinals.tolist() == [1] and partial.statistic.n == 3
    assert batches_at(decoding([empty, full]), partial.ordinals) == [full]


def test_colliding_finds_exactly_the_arrays_sharing_an_id():
    rng = np.random.default_rng(11)
    for _ in range(300):
        arrays = []
        for _ in range(rng.integers(1, 7)):
            low = int(rng.integers(0, 60))
            arrays.append(np.unique(rng.integers(low, low + rng.integers(1, 40),
                                                 rng.integers(0, 8))).astype(np.int64))
        want = [i for i, a in enumerate(arrays)
                if any(np.intersect1d(a, b).size for j, b in enumerate(arrays) if j != i)]
        assert colliding(arrays).tolist() == want


def test_partial_count_pickles():
    counter = PartialCounter(REGISTRY, "s")
    counter.add(source_batches("olh", 1)[0])
    [(_, partial)] = counter.finish()
    again = pickle.loads(pickle.dumps(partial))
    assert isinstance(again, PartialCount) and again.source == "s"
    np.testing.assert_array_equal(again.ids, partial.ids)
    np.testing.assert_array_equal(again.ordinals, partial.ordinals)
    assert_same_statistic(again.statistic, partial.statistic)
