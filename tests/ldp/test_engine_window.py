"""One window counted in process (ldp.engine.window) is the pipeline's counting: the support
counts of every report, the integrity sample of the same reports, and each report id once.

Exact comparisons, no tolerance: counting is integer addition and the sample a deterministic
function of the ids and the registry's key.
"""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.engine.window import BATCH_ROWS, count_window, window_with_integrity
from ldp_telemetry.ldp.integrity.accumulate import new_sample, observe
from ldp_telemetry.ldp.integrity.statistics import window_integrity

PROTOCOLS = [("grr", 1.0, 10), ("oue", 1.0, 13), ("olh", 1.5, 40), ("hr", 2.0, 16)]
N = 2 * BATCH_ROWS + 123  # three batches, the last one short


def config_of(protocol, epsilon, d):
    return parse_registry({"metrics": [{"name": "m", "protocol": protocol, "epsilon": epsilon,
                                        "domain": {"size": d}}]})["m"]


def reports(config, n, seed):
    rng = np.random.default_rng(seed)
    return config.protocol.perturb(rng.integers(0, config.protocol.d, n), rng)


def assert_same_sample(one, other):
    """The same reports, in the same priority order (or no sample for either: the protocol's
    integrity tests need none)."""
    if other is None:
        assert one is None
        return
    (priority, columns), (expected_priority, expected_columns) = one.rows(), other.rows()
    assert len(priority) > 0
    np.testing.assert_array_equal(priority, expected_priority)
    assert columns.keys() == expected_columns.keys()
    for name in columns:
        np.testing.assert_array_equal(columns[name], expected_columns[name])


def plain_count(config, columns, ids):
    """Every report accumulated into one table and one sample, with no deduplication: the
    counting before the engine (no id repeats, so it must agree)."""
    table, sample = config.protocol.new_statistic(), new_sample(config)
    config.protocol.accumulate(table, columns)
    observe(sample, config, columns, ids)
    return table, sample


@pytest.mark.parametrize(("protocol", "epsilon", "d"), PROTOCOLS)
def test_distinct_ids_count_every_report_as_one_table_does(protocol, epsilon, d):
    config = config_of(protocol, epsilon, d)
    columns = reports(config, N, seed=3)
    ids = np.random.default_rng(4).permutation(10 * N)[:N].astype(np.int64)
    table, sample = plain_count(config, columns, ids)
    statistic = count_window(config, columns, ids)
    assert statistic.n == N and statistic.duplicates == 0
    part = statistic.parts[config.version]
    np.testing.assert_array_equal(part.table, table)
    assert_same_sample(part.sample, sample)
    result, section = window_with_integrity(config, columns, ids, window_ms=86_400_000)
    expected = finalize_window(config, table, N)
    np.testing.assert_array_equal(result.unbiased, expected.unbiased)
    np.testing.assert_array_equal(result.std_error, expected.std_error)
    assert section == window_integrity(config, expected, table, sample, 86_400_000)


@pytest.mark.parametrize(("protocol", "epsilon", "d"), PROTOCOLS[:2])
def test_a_repeated_id_is_counted_once_as_a_job_counts_it(protocol, epsilon, d):
    config = config_of(protocol, epsilon, d)
    columns = reports(config, N, seed=5)
    ids = np.arange(N, dtype=np.int64)
    ids[-100:] = ids[:100]  # 100 reports of the last (short) batch repeat ids of the first
    statistic = count_window(config, columns, ids)
    assert (statistic.n, statistic.duplicates) == (N - 100, 100)
    assert len(statistic.duplicate_ids) == 5 and set(statistic.duplicate_ids) <= set(range(100))
    # exactly one copy of each id is counted: the first batch's or the last batch's, whichever
    # batch comes first in digest order (ldp.engine.counting.count_slice)
    keep_first = np.arange(N) < N - 100
    keep_last = np.arange(N) >= 100
    tables = [plain_count(config, {k: v[keep] for k, v in columns.items()}, ids[keep])[0]
              for keep in (keep_first, keep_last)]
    assert not np.array_equal(*tables)  # the copies carry different reports
    table = statistic.parts[config.version].table
    assert sum(np.array_equal(table, candidate) for candidate in tables) == 1
    result, _ = window_with_integrity(config, columns, ids)
    assert result.n == N - 100


def test_the_report_ids_must_match_the_reports():
    config = config_of("grr", 1.0, 10)
    with pytest.raises(ValueError, match="9 report ids for 10 reports"):
        count_window(config, reports(config, 10, seed=1), np.arange(9))
