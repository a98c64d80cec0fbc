"""CountSupportFn without a pipeline: one CombineFn for every metric, dispatching to each
metric's protocol; sequential, merged and merged + compacted give one answer; repeated report
ids of a slice are counted once."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from ldp_telemetry.ldp import hashing
from ldp_telemetry.ldp.registry import parse_registry
from ldp_telemetry.schemas.batches import REPORT_ID, ReportBatch
from ldp_telemetry.transforms.count import CountSupportFn, IdSet, MergeSupportFn, SupportStatistic

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


def sequential(fn, batches):
    acc = fn.create_accumulator()
    for batch in batches:
        acc = fn.add_input(acc, batch)
    return acc


def merged(fn, batches, parts):
    accumulators = [sequential(fn, batches[i::parts]) for i in range(parts)]
    accumulators.insert(1, fn.create_accumulator())  # an accumulator that never saw input
    return fn.merge_accumulators(accumulators)


def assert_same(a: SupportStatistic, b: SupportStatistic):
    assert a.metric == b.metric and a.n == b.n and a.duplicates == b.duplicates
    np.testing.assert_array_equal(a.table, b.table)


@pytest.mark.parametrize("metric", REGISTRY.by_name)
def test_three_ways_agree_and_match_brute_force(metric):
    protocol = REGISTRY[metric].protocol
    fn = CountSupportFn(REGISTRY)
    batches = make_batches(metric, [50, 0, 1, 333, 0, 1000, 7, 0], seed=len(metric))
    assert batches[1].n == 0 and batches[1].columns  # a batch with columns of zero rows
    a = fn.extract_output(sequential(fn, batches))
    b = fn.extract_output(merged(fn, batches, parts=3))
    c = fn.extract_output(fn.compact(merged(fn, batches, parts=4)))
    for other in (b, c):
        assert_same(a, other)
    assert a.n == sum(batch.n for batch in batches) == 1391
    np.testing.assert_array_equal(protocol.support_counts(a.table),
                                  brute_force_support(protocol, batches))


def test_one_combine_serves_every_metric_through_its_protocol():
    fn = CountSupportFn(REGISTRY)
    for metric in REGISTRY.by_name:
        statistic = fn.apply(make_batches(metric, [40, 60], seed=1))
        assert statistic.metric == metric and statistic.n == 100
        assert statistic.table.shape == REGISTRY[metric].protocol.new_statistic().shape


@pytest.mark.parametrize("metric", REGISTRY.by_name)
def test_empty_inputs(metric):
    fn = CountSupportFn(REGISTRY)
    empty = fn.extract_output(fn.create_accumulator())
    assert empty.metric is None and empty.n == 0
    only_empty_batches = fn.extract_output(sequential(fn, make_batches(metric, [0, 0], seed=1)))
    assert only_empty_batches.n == 0
    merged_empty = fn.extract_output(fn.merge_accumulators([fn.create_accumulator(),
                                                            fn.create_accumulator()]))
    assert merged_empty.metric is None and merged_empty.n == 0


@pytest.mark.parametrize("metric", REGISTRY.by_name)
def test_merge_mutates_only_the_first_accumulator(metric):
    fn = CountSupportFn(REGISTRY)
    batches = make_batches(metric, [20, 30, 40], seed=9)
    accumulators = [sequential(fn, [batch]) for batch in batches]
    before = copy.deepcopy(accumulators)
    result = fn.merge_accumulators(accumulators)
    assert result is accumulators[0]
    assert result.statistic.n == 90
    for kept, original in zip(accumulators[1:], before[1:]):
        assert_same(kept.statistic, original.statistic)
    assert not np.shares_memory(result.statistic.table, accumulators[1].statistic.table)


@pytest.mark.parametrize("metric", REGISTRY.by_name)
def test_accumulator_and_fn_survive_pickling(metric):
    fn = CountSupportFn(REGISTRY)
    batches = make_batches(metric, [100, 200], seed=4)
    acc = sequential(fn, batches[:1])
    restored = pickle.loads(pickle.dumps(acc))
    assert_same(restored.statistic, acc.statistic)
    assert len(restored.ids) == 100
    # The restored accumulator keeps working, also in a restored CombineFn.
    fn2 = pickle.loads(pickle.dumps(fn))
    assert_same(fn2.extract_output(fn2.add_input(restored, batches[1])),
                fn.extract_output(sequential(fn, batches)))


@pytest.mark.parametrize("metric", REGISTRY.by_name)
def test_statistic_size_does_not_depend_on_n(metric):
    fn = CountSupportFn(REGISTRY)
    small = fn.extract_output(sequential(fn, make_batches(metric, [10], seed=2)))
    large = fn.extract_output(sequential(fn, make_batches(metric, [20_000] * 3, seed=3)))
    assert large.n == 60_000
    assert small.table.shape == large.table.shape and small.table.nbytes == large.table.nbytes
    # The extracted statistic holds no ids: pickled sizes differ by the encoding of n only.
    assert abs(len(pickle.dumps(large)) - len(pickle.dumps(small))) <= 16
    assert REGISTRY[metric].statistic_nbytes == large.table.nbytes


def test_merge_support_fn_adds_statistics_of_slices():
    fn = CountSupportFn(REGISTRY)
    batches = make_batches("grr", [10, 20, 30], seed=5)
    per_slice = [fn.apply([batch]) for batch in batches]
    tables = [s.table.copy() for s in per_slice]
    merger = MergeSupportFn()
    window = merger.apply(per_slice)
    assert_same(window, fn.apply(batches))
    for statistic, table in zip(per_slice, tables):  # inputs are never added into
        np.testing.assert_array_equal(statistic.table, table)


def test_statistics_of_two_metrics_do_not_add():
    fn = CountSupportFn(REGISTRY)
    a, b = fn.apply(make_batches("grr", [5], 1)), fn.apply(make_batches("olh", [5], 1))
    with pytest.raises(ValueError, match="metric 'olh'"):
        MergeSupportFn().apply([a, b])


# -- failure 11: a report id repeated within a slice is counted once ------------------------

def test_repeated_ids_within_a_batch_and_across_batches_count_once():
    fn = CountSupportFn(REGISTRY)
    protocol = REGISTRY["grr"].protocol
    first = ReportBatch("grr", 0, {"value": np.array([1, 2, 3, 4]),
                                   REPORT_ID: np.array([7, 8, 7, 9])})      # 7 twice in a file
    second = ReportBatch("grr", 0, {"value": np.array([5, 6, 0]),
                                    REPORT_ID: np.array([9, 10, 8])})      # 9 and 8 again
    statistic = fn.apply([first, second])
    assert statistic.n == 4 and statistic.duplicates == 3
    assert sorted(statistic.duplicate_ids) == [7, 8, 9]
    # The first report of each id is the one counted: values 1, 2, 4 and 6.
    expected = protocol.new_statistic()
    protocol.accumulate(expected, {"value": np.array([1, 2, 4, 6])})
    np.testing.assert_array_equal(statistic.table, expected)


def test_partial_accumulators_sharing_an_id_refuse_to_merge():
    fn = CountSupportFn(REGISTRY)
    batch = make_batches("grr", [5], 1)[0]
    with pytest.raises(ValueError, match="same report id"):
        fn.merge_accumulators([sequential(fn, [batch]), sequential(fn, [batch])])


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
