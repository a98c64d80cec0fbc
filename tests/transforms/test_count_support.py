"""SliceCounter without a pipeline: one counter for every metric, dispatching to each metric's
protocol; the order of a slice's batches does not change its statistic; repeated report ids of
a slice are counted once. MergeSupportFn, a CombineFn, adds slice statistics into windows."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.batches import REPORT_ID, ReportBatch
from ldp_telemetry.ldp.engine.counting import IdSet, SliceCounter, SupportStatistic
from ldp_telemetry.ldp.integrity.accumulate import sample_nbytes
from ldp_telemetry.ldp.protocols import hashing
from ldp_telemetry.transforms.count import MergeSupportFn
from ldp_telemetry.transforms.estimate_windows import FinalizeEstimatesFn

PROTOCOLS = [("grr", 1.0, 10), ("oue", 1.0, 13), ("olh", 1.5, 10)]  # OUE d=13: padding bits
REGISTRY = parse_registry({"metrics": [
    {"name": name, "protocol": name, "epsilon": epsilon, "domain": {"size": d}}
    for name, epsilon, d in PROTOCOLS]})


def empty_columns(protocol):
    """Payload columns with zero rows and the right dtypes and widths."""
    return {name: column[:0] for name, column in protocol.perturb(np.zeros(1, int),
                                                                  np.random.default_rng(0)).items()}


def make_batches(metric, sizes, seed, ids=True):
    protocol = REGISTRY[metric].protocol
    rng = np.random.default_rng(seed)
    batches, next_id = [], 0
    for i, size in enumerate(sizes):
        columns = (protocol.perturb(rng.integers(0, protocol.d, size), rng) if size
                   else empty_columns(protocol))
        if ids:
            columns[REPORT_ID] = np.arange(next_id, next_id + size, dtype=np.int64)
            next_id += size
        batches.append(ReportBatch(metric, 1000 * i, columns))
    return batches


def brute_force_support(protocol, batches):
    """Support count of every value, straight from the definition of each payload."""
    counts = np.zeros(protocol.d, dtype=np.int64)
    for batch in batches:
        c = batch.columns
        if protocol.name == "grr":
            counts += (c["value"][:, None] == np.arange(protocol.d)).sum(axis=0)
        elif protocol.name == "oue":
            bits = np.unpackbits(c["bits"], axis=1, bitorder="little")[:, :protocol.d]
            counts += bits.sum(axis=0, dtype=np.int64)
        else:
            h = hashing.local_hash(c["seed"].view(np.uint64)[:, None],
                                   np.arange(protocol.d)[None, :], protocol.g)
            counts += (h == c["y"][:, None]).sum(axis=0)
    return counts


def counted(batches, counter=None) -> SliceCounter:
    """A counter (`counter`, or a new one) after adding `batches` in turn."""
    counter = counter or SliceCounter(REGISTRY)
    for batch in batches:
        counter.add(batch)
    return counter


def count(batches) -> SupportStatistic:
    return counted(batches).result()


def assert_same(a: SupportStatistic, b: SupportStatistic):
    assert a.metric == b.metric and a.n == b.n and a.duplicates == b.duplicates
    np.testing.assert_array_equal(a.parts[1].table, b.parts[1].table)


@pytest.mark.parametrize("metric", REGISTRY.by_name)
def test_any_order_gives_one_answer_that_matches_brute_force(metric):
    protocol = REGISTRY[metric].protocol
    batches = make_batches(metric, [50, 0, 1, 333, 0, 1000, 7, 0], seed=len(metric))
    assert batches[1].n == 0 and batches[1].columns  # a batch with columns of zero rows
    a = count(batches)
    b = count(batches[::-1])
    c = count(batches[1::2] + batches[::2])
    for other in (b, c):
        assert_same(a, other)
    assert a.n == sum(batch.n for batch in batches) == 1391
    np.testing.assert_array_equal(protocol.support_counts(a.parts[1].table),
                                  brute_force_support(protocol, batches))


def test_one_counter_serves_every_metric_through_its_protocol():
    for metric in REGISTRY.by_name:
        statistic = count(make_batches(metric, [40, 60], seed=1))
        assert statistic.metric == metric and statistic.n == 100
        assert statistic.parts[1].table.shape == REGISTRY[metric].protocol.new_statistic().shape


@pytest.mark.parametrize("metric", REGISTRY.by_name)
def test_empty_inputs(metric):
    empty = SliceCounter(REGISTRY).result()
    assert empty.metric is None and empty.n == 0
    only_empty_batches = count(make_batches(metric, [0, 0], seed=1))
    assert only_empty_batches.n == 0


@pytest.mark.parametrize("metric", REGISTRY.by_name)
def test_a_counter_never_writes_into_its_batches(metric):
    batches = make_batches(metric, [20, 30, 40], seed=9)
    before = copy.deepcopy(batches)
    count(batches)
    for batch, original in zip(batches, before, strict=True):
        for name, column in batch.columns.items():
            np.testing.assert_array_equal(column, original.columns[name])


@pytest.mark.parametrize("metric", REGISTRY.by_name)
def test_counter_survives_pickling_with_its_ids(metric):
    batches = make_batches(metric, [100, 200], seed=4)
    counter = counted(batches[:1])
    restored = pickle.loads(pickle.dumps(counter))
    assert_same(restored.result(), counter.result())
    # The restored counter keeps working, and still knows the ids it has counted.
    assert_same(counted(batches[1:], restored).result(), count(batches))
    counted(batches[:1], restored)
    assert restored.result().duplicates == 100


@pytest.mark.parametrize("metric", REGISTRY.by_name)
def test_statistic_size_does_not_depend_on_n(metric):
    small = count(make_batches(metric, [10], seed=2))
    large = count(make_batches(metric, [20_000] * 3, seed=3))
    assert large.n == 60_000
    small_table, large_table = small.parts[1].table, large.parts[1].table
    assert small_table.shape == large_table.shape and small_table.nbytes == large_table.nbytes
    # The extracted statistic holds no ids: beside the integrity sample (bounded by its
    # capacity, not by n), pickled sizes differ by the encoding of n only.
    sample_bytes = sample_nbytes(REGISTRY[metric])
    large_sample = large.parts[1].sample
    assert large_sample is None or large_sample.nbytes() <= sample_bytes
    for statistic in (small, large):
        statistic.parts[1].sample = None
    assert abs(len(pickle.dumps(large)) - len(pickle.dumps(small))) <= 16
    assert REGISTRY[metric].statistic_nbytes == large.parts[1].table.nbytes


def test_merge_support_fn_adds_statistics_of_slices():
    batches = make_batches("grr", [10, 20, 30], seed=5)
    per_slice = [count([batch]) for batch in batches]
    tables = [s.parts[1].table.copy() for s in per_slice]
    merger = MergeSupportFn()
    window = merger.apply(per_slice)
    assert_same(window, count(batches))
    for statistic, table in zip(per_slice, tables, strict=True):  # inputs are never added into
        np.testing.assert_array_equal(statistic.parts[1].table, table)


def test_merge_support_fn_merges_partial_sums_into_the_first_only():
    batches = make_batches("oue", [10, 20, 30, 40], seed=6)
    merger = MergeSupportFn()
    partials = [merger.create_accumulator(), merger.create_accumulator()]
    for i, batch in enumerate(batches):
        merger.add_input(partials[i % 2], count([batch]))
    second = copy.deepcopy(partials[1])
    merged = merger.merge_accumulators([*partials, merger.create_accumulator()])
    assert merged is partials[0]
    assert_same(merger.extract_output(merged), count(batches))
    assert_same(partials[1], second)  # the other partial sums are left as they were


@pytest.mark.parametrize("metric", REGISTRY.by_name)
def test_merge_support_fn_shares_no_table_with_its_inputs_whatever_comes_first(metric):
    """The merged table is the first accumulator's own, even when that one was empty: adding
    into it never writes into an input, and the inputs never alias the result."""
    batches = make_batches(metric, [20, 30, 40], seed=9)
    merger = MergeSupportFn()
    partials = [merger.add_input(merger.create_accumulator(), count([batch]))
                for batch in batches]
    before = copy.deepcopy(partials)
    for first in (merger.create_accumulator(), merger.create_accumulator()):
        accumulators = [first, *partials]
        merged = merger.merge_accumulators(accumulators)
        assert merged is first and merged.n == 90
        assert_same(merger.extract_output(merged), count(batches))
        for kept, original in zip(partials, before, strict=True):
            assert_same(kept, original)
            assert not np.shares_memory(merged.parts[1].table, kept.parts[1].table)
    empty = merger.merge_accumulators([merger.create_accumulator(),
                                       merger.create_accumulator()])
    assert empty.metric is None and empty.n == 0


def test_statistics_of_two_metrics_do_not_add():
    a, b = count(make_batches("grr", [5], 1)), count(make_batches("olh", [5], 1))
    with pytest.raises(ValueError, match="metric 'olh'"):
        MergeSupportFn().apply([a, b])


# -- failure 11: a report id repeated within a slice is counted once ------------------------

def test_repeated_ids_within_a_batch_and_across_batches_count_once():
    protocol = REGISTRY["grr"].protocol
    first = ReportBatch("grr", 0, {"value": np.array([1, 2, 3, 4]),
                                   REPORT_ID: np.array([7, 8, 7, 9])})      # 7 twice in a file
    second = ReportBatch("grr", 0, {"value": np.array([5, 6, 0]),
                                    REPORT_ID: np.array([9, 10, 8])})      # 9 and 8 again
    statistic = count([first, second])
    assert statistic.n == 4 and statistic.duplicates == 3
    assert sorted(statistic.duplicate_ids) == [7, 8, 9]
    # The first report of each id is the one counted: values 1, 2, 4 and 6.
    expected = protocol.new_statistic()
    protocol.accumulate(expected, {"value": np.array([1, 2, 4, 6])})
    np.testing.assert_array_equal(statistic.parts[1].table, expected)


def test_a_batch_sent_twice_counts_once_whatever_else_came_between():
    """One counter sees every batch of a slice, so a repeat is found wherever it arrives (two
    partial counts of the slice could not be added exactly: a statistic cannot remove a
    report again)."""
    batch, other = make_batches("grr", [5, 7], 1)
    statistic = count([batch, other, batch])
    assert statistic.n == 12 and statistic.duplicates == 5
    assert_same(SupportStatistic(statistic.metric, statistic.parts),
                count([other, batch]))


def test_id_set_is_exact_over_many_batches():
    rng = np.random.default_rng(3)
    ids, seen = IdSet(), set()
    for _ in range(200):
        batch = rng.integers(0, 5_000, rng.integers(1, 100))
        keep = ids.add_new(batch)
        expected = np.zeros(len(batch), dtype=bool)
        for i, value in enumerate(batch.tolist()):
            if value not in seen:
                seen.add(value)
                expected[i] = True
        np.testing.assert_array_equal(keep, expected)
    assert len(ids) == len(seen) and len(ids.levels) <= 2 * np.log2(len(seen)) + 2
    assert all((np.diff(level) > 0).all() for level in ids.levels)


@pytest.mark.parametrize("first", [[7], [1, 5, 9, 12], [3, 3], [9, 4], []])
def test_id_set_first_batch_shortcut_is_exact(first):
    """A slice's first batch with increasing ids is kept whole without sorting; later batches,
    and first batches that are not increasing, still count each id once."""
    ids, seen = IdSet(), set()
    for batch in (first, [5, 7, 100], [12, 12, 1], [101]):
        batch = np.array(batch, dtype=np.int64)
        expected = np.zeros(len(batch), dtype=bool)
        for i, value in enumerate(batch.tolist()):
            if value not in seen:
                seen.add(value)
                expected[i] = True
        np.testing.assert_array_equal(ids.add_new(batch), expected)
    assert len(ids) == len(seen)
    assert all((np.diff(level) > 0).all() for level in ids.levels)


def test_a_version_whose_every_report_repeated_another_versions_id_gets_no_estimate():
    """Ids are unique across versions within a slice: a v1 batch repeating v2's ids counts
    nothing, and the window's records are v2's alone (no record of 0 reports, no combination)."""
    registry = parse_registry({"metrics": [{
        "name": "m", "version": 2, "protocol": "grr", "epsilon": 1.0, "domain": {"size": 4},
        "history": [{"version": 1, "protocol": "grr", "epsilon": 2.0, "domain": {"size": 4}}]}]})
    ids = np.arange(5, dtype=np.int64)
    newer = ReportBatch("m", 0, {"value": np.zeros(5, dtype=np.int64), REPORT_ID: ids}, 2)
    older = ReportBatch("m", 0, {"value": np.ones(5, dtype=np.int64), REPORT_ID: ids}, 1)
    counter = SliceCounter(registry)
    counter.add(newer)
    counter.add(older)
    statistic = counter.result()
    assert statistic.n == 5 and statistic.duplicates == 5
    finalize = FinalizeEstimatesFn(registry)
    finalize.setup()
    records = list(finalize.process((("m", 0, 3_600_000), statistic)))
    assert [(r.config_version, r.n) for r in records] == [(2, 5)]


def test_id_set_shortcut_for_batches_in_id_order_is_exact():
    """Increasing batches above every id seen are kept whole; an id equal to the largest seen,
    or below it, still goes through the full check; levels stay sorted and disjoint."""
    rng = np.random.default_rng(8)
    ids, seen, top = IdSet(), set(), 0
    for step in range(300):
        if step % 7 == 3:  # a batch that repeats old ids, the largest seen among them
            batch = np.concatenate([rng.choice(sorted(seen), 5), [max(seen)], [top + 1]])
        elif step % 7 == 5:  # increasing, but starting at the largest id seen
            batch = np.array([top, top + 1, top + 2])
        else:  # increasing ids above everything seen
            batch = top + 1 + np.cumsum(rng.integers(1, 4, rng.integers(1, 60)))
        batch = batch.astype(np.int64)
        expected = np.zeros(len(batch), dtype=bool)
        for i, value in enumerate(batch.tolist()):
            if value not in seen:
                seen.add(value)
                expected[i] = True
        np.testing.assert_array_equal(ids.add_new(batch), expected)
        top = max(seen)
    assert len(ids) == len(seen) and len(ids.levels) <= 2 * np.log2(len(seen)) + 2
    merged = np.concatenate(ids.levels)
    assert all((np.diff(level) > 0).all() for level in ids.levels)
    assert len(np.unique(merged)) == len(merged) == len(seen)


def test_copies_of_an_id_with_different_reports_count_one_way_whatever_the_grouping_order():
    """A slice's batches come from a GroupByKey in an order the runner chooses. When copies of
    one id carry different reports, the copy counted follows the batches' content digests, so
    every order gives one statistic (each order alone would count its own first copy)."""
    from ldp_telemetry.ldp.engine.counting import batch_digest
    from ldp_telemetry.transforms.count import CountSliceFn

    ids = np.arange(40, dtype=np.int64)
    first, second = (ReportBatch("grr", 0, {"value": np.full(40, v), REPORT_ID: ids})
                     for v in (1, 5))
    assert_same_tables = np.testing.assert_array_equal
    assert not np.array_equal(count([first, second]).parts[1].table,
                              count([second, first]).parts[1].table)  # order matters to a counter
    results = [next(CountSliceFn(REGISTRY).process(("k", iter(order))))[1]
               for order in ([first, second], [second, first])]
    for result in results:
        assert result.n == 40 and result.duplicates == 40
    assert_same_tables(results[0].parts[1].table, results[1].parts[1].table)
    kept = min((first, second), key=batch_digest)
    assert_same_tables(results[0].parts[1].table, count([kept]).parts[1].table)
    # A slice without duplicates is counted once, in the order given (its answer is the same).
    other = ReportBatch("grr", 0, {"value": np.full(3, 2), REPORT_ID: np.arange(40, 43)})
    assert next(CountSliceFn(REGISTRY).process(("k", [first, other])))[1].n == 43
