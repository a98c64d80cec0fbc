"""A store whose value rows were banded by an earlier rule (estimate ± z · std_error) gets the
bands its writer saves now (the band of the unbiased estimate, `store.records.value_rows`) from
each window's stored record when it is opened, once: SQLite and PostgreSQL."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.estimation.frequency_bands import score_bands
from ldp_telemetry.store import open_store
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
