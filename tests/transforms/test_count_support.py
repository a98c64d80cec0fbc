"""CountSupportFn without a pipeline: sequential, merged and merged + compacted give one answer."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from ldp_telemetry.ldp import hashing
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.schemas.batches import ReportBatch
from ldp_telemetry.transforms.count import CountSupportFn, MergeSupportFn, SupportStatistic

PROTOCOLS = [("grr", 1.0, 10), ("oue", 1.0, 13), ("olh", 1.5, 10)]  # OUE d=13: padding bits


def empty_columns(protocol):
    """Payload columns with zero rows and the right dtypes and widths."""
    return {name: column[:0] for name, column in protocol.perturb(np.zeros(1, int),
                                                                  np.random.default_rng(0)).items()}


def make_batches(protocol, sizes, seed):
    rng = np.random.default_rng(seed)
    batches = []
    for i, size in enumerate(sizes):
        columns = (protocol.perturb(rng.integers(0, protocol.d, size), rng) if size
                   else empty_columns(protocol))
        batches.append(ReportBatch("m", 1000 * i, columns))
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
    assert a.n == b.n
    np.testing.assert_array_equal(a.table, b.table)


@pytest.mark.parametrize("name, epsilon, d", PROTOCOLS)
def test_three_ways_agree_and_match_brute_force(name, epsilon, d):
    protocol = make_protocol(name, epsilon, d)
    fn = CountSupportFn(protocol)
    batches = make_batches(protocol, [50, 0, 1, 333, 0, 1000, 7, 0], seed=len(name))
    assert batches[1].n == 0 and batches[1].columns  # a batch with columns of zero rows
    a = sequential(fn, batches)
    b = merged(fn, batches, parts=3)
    c = fn.extract_output(fn.compact(merged(fn, batches, parts=4)))
    for other in (b, c):
        assert_same(a, other)
    assert a.n == sum(batch.n for batch in batches) == 1391
    np.testing.assert_array_equal(protocol.support_counts(a.table),
                                  brute_force_support(protocol, batches))


@pytest.mark.parametrize("name, epsilon, d", PROTOCOLS)
def test_empty_inputs(name, epsilon, d):
    protocol = make_protocol(name, epsilon, d)
    fn = CountSupportFn(protocol)
    empty = fn.create_accumulator()
    only_empty_batches = sequential(fn, make_batches(protocol, [0, 0], seed=1))
    assert only_empty_batches.n == 0 and not only_empty_batches.table.any()
    assert_same(fn.merge_accumulators([fn.create_accumulator(), empty]), empty)
    assert_same(fn.extract_output(fn.compact(empty)), empty)
    assert not protocol.support_counts(empty.table).any()


@pytest.mark.parametrize("name, epsilon, d", PROTOCOLS)
def test_merge_mutates_only_the_first_accumulator(name, epsilon, d):
    protocol = make_protocol(name, epsilon, d)
    fn = CountSupportFn(protocol)
    batches = make_batches(protocol, [20, 30, 40], seed=9)
    accumulators = [sequential(fn, [batch]) for batch in batches]
    before = copy.deepcopy(accumulators)
    result = fn.merge_accumulators(accumulators)
    assert result is accumulators[0]
    assert result.n == 90
    for kept, original in zip(accumulators[1:], before[1:]):
        assert_same(kept, original)
    assert not np.shares_memory(result.table, accumulators[1].table)


@pytest.mark.parametrize("name, epsilon, d", PROTOCOLS)
def test_accumulator_and_fn_survive_pickling(name, epsilon, d):
    protocol = make_protocol(name, epsilon, d)
    fn = CountSupportFn(protocol)
    batches = make_batches(protocol, [100, 200], seed=4)
    acc = sequential(fn, batches[:1])
    restored = pickle.loads(pickle.dumps(acc))
    assert isinstance(restored, SupportStatistic)
    assert_same(restored, acc)
    # The restored accumulator keeps working, also in a restored CombineFn.
    fn2 = pickle.loads(pickle.dumps(fn))
    assert_same(fn2.add_input(restored, batches[1]), sequential(fn, batches))


@pytest.mark.parametrize("name, epsilon, d", PROTOCOLS)
def test_statistic_size_does_not_depend_on_n(name, epsilon, d):
    protocol = make_protocol(name, epsilon, d)
    fn = CountSupportFn(protocol)
    small = sequential(fn, make_batches(protocol, [10], seed=2))
    large = sequential(fn, make_batches(protocol, [20_000] * 3, seed=3))
    assert large.n == 60_000
    assert small.table.shape == large.table.shape and small.table.nbytes == large.table.nbytes
    # Pickled size differs only by the encoding of the integer n (a few bytes).
    assert abs(len(pickle.dumps(large)) - len(pickle.dumps(small))) <= 16


def test_merge_support_fn_adds_statistics():
    protocol = make_protocol("grr", 1.0, 10)
    fn = CountSupportFn(protocol)
    batches = make_batches(protocol, [10, 20, 30], seed=5)
    per_slice = [sequential(fn, [batch]) for batch in batches]
    merger = MergeSupportFn(protocol)
    acc = merger.create_accumulator()
    for statistic in per_slice:
        acc = merger.add_input(acc, statistic)
    assert_same(acc, sequential(fn, batches))
