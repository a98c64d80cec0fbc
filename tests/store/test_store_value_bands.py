"""A store whose value rows were banded by an earlier rule (estimate ± z · std_error; or the
unbiased estimate's band with none for a pooled-hash window past the pool-bias share) gets the
bands its writer saves now (`store.records.value_rows`) from each window's stored record when a
writer opens it, once: SQLite and PostgreSQL."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ldp_telemetry.ldp.estimation.frequency_bands import score_bands
from ldp_telemetry.store import open_store
from ldp_telemetry.output.bands import value_bands
from ldp_telemetry.store.sql import VALUE_BAND_RULE
from tests.store.test_sql_store import (P_STAR, Q_STAR, postgres_url,  # noqa: F401
                                        record, store_url)


def _saved(store) -> list[float]:
    """Every value row's lower95 and upper95, in window and value order."""
    rows = store._query("SELECT lower95, upper95 FROM ldp_window_values "
                        "ORDER BY window_start_ms, value_index")
    return [float(bound) for row in rows for bound in row]


def test_a_store_made_before_the_rule_is_rebanded_from_its_records(store_url):  # noqa: F811
    written = [record(), record(start="2024-03-01T01:00:00Z")]
    with open_store(store_url) as store:
        store.write_panes(written)
        now = _saved(store)
        with store._transaction() as cursor:  # the layout and rows of the earlier rule
            cursor.execute("DROP TABLE ldp_value_bands")
            cursor.execute("UPDATE ldp_window_values SET lower95 = estimate - 1.96 * std_error, "
                           "upper95 = estimate + 1.96 * std_error")
        assert _saved(store) != now
    with open_store(store_url) as store:  # a writer opens it
        assert _saved(store) == pytest.approx(now)
        assert store._query("SELECT rule FROM ldp_value_bands") == [(VALUE_BAND_RULE,)]
    lower, upper = score_bands(np.array(written[0]["unbiased_estimate"]), P_STAR, Q_STAR, 100)
    assert now[:6] == pytest.approx([bound for pair in zip(lower, upper, strict=True)
                                     for bound in pair])


def test_a_new_store_records_the_rule_once(store_url):  # noqa: F811
    for _ in range(2):
        with open_store(store_url) as store:
            assert store._query("SELECT rule FROM ldp_value_bands") == [(VALUE_BAND_RULE,)]


def test_a_store_of_the_rule_before_pool_corrected_bands_gets_them_on_open(store_url):  # noqa: F811
    """A CMS window past the pool-bias share was stored with null bands before its values had
    pool-corrected ones (rule "unbiased-estimate-band"): a writer opening the store gives its
    rows the record's pool-corrected bands, and leaves the other protocols' rows as they are
    (that rule banded them as today's)."""
    from tests.window_records import frequency_record
    pooled = frequency_record("cms", 20_000, np.random.default_rng(1))
    assert pooled.band_method == "pool-corrected"
    pooled = pooled.to_json()
    plain = record(start="2024-03-01T00:00:00Z")
    with open_store(store_url) as store:
        store.write_panes([pooled, plain])
        now = store._query("SELECT lower95, upper95 FROM ldp_window_values WHERE "
                           "metric = 'm' ORDER BY value_index")
        with store._transaction() as cursor:  # as the rule before wrote and recorded them
            cursor.execute("UPDATE ldp_value_bands SET rule = 'unbiased-estimate-band'")
            cursor.execute("UPDATE ldp_window_values SET lower95 = NULL, upper95 = NULL "
                           "WHERE metric = 'm'")
            cursor.execute("UPDATE ldp_window_values SET lower95 = -1 WHERE metric = 'm.grr'")
    with open_store(store_url, create=False) as store:  # a reader reads what is stored
        assert {row[0] for row in store._query(
            "SELECT lower95 FROM ldp_window_values WHERE metric = 'm'")} == {None}
    with open_store(store_url) as store:  # a writer opens it
        after = store._query("SELECT lower95, upper95 FROM ldp_window_values WHERE "
                             "metric = 'm' ORDER BY value_index")
        flat = [float(bound) for row in after for bound in row]
        assert flat == pytest.approx([float(bound) for row in now for bound in row])
        lower, upper = value_bands(json.loads(pooled))
        assert flat == pytest.approx([bound for pair in zip(lower, upper, strict=True)
                                      for bound in pair])
        assert {row[0] for row in store._query(  # not re-banded: the old rule's were today's
            "SELECT lower95 FROM ldp_window_values WHERE metric = 'm.grr'")} == {-1}
        assert store._query("SELECT rule FROM ldp_value_bands") == [(VALUE_BAND_RULE,)]
