"""The store's per-metric privacy table: what each configuration promises a device, from the
records' `privacy` field (ldp_telemetry.ldp.config.budget), in SQLite and PostgreSQL."""
from __future__ import annotations


from ldp_telemetry.ldp.config.budget import privacy_budget
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.store import open_store
from tests.store.test_sql_store import postgres_url, record, store_url  # noqa: F401 (fixtures)



def budgets():
    registry = parse_registry({"metrics": [
        {"name": "m.grr", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 3},
         "memoize": {"lifetime_epsilon": 3.0, "max_values": 2}, "reports_per_day": 24},
        {"name": "m.plain", "protocol": "grr", "epsilon": 2.0, "domain": {"size": 3}}]})
    return (privacy_budget(registry["m.grr"]).as_record(),
            privacy_budget(registry["m.plain"]).as_record())


def test_each_version_s_promise_is_stored_and_read_back(store_url):  # noqa: F811
    memoized, plain = budgets()
    with open_store(store_url) as store:
        store.write_panes([record(privacy=memoized),
                           record(metric="m.plain", privacy=plain),
                           record(metric="m.old")])  # a record from before the field
        [row] = store.privacy("m.grr").values()
        assert row["memoized"] and row["per_report"] == 1.0 and row["per_day"] == 3.0
        assert (row["lifetime"], row["lifetime_epsilon"], row["distinct_values"]) == \
            (6.0, 3.0, 2)
        assert "lifetime ε=6" in row["promise"] and "ε∞" in row["rule"]
        [row] = store.privacy("m.plain").values()
        assert not row["memoized"] and row["lifetime"] is None and row["per_day"] is None
        assert "no lifetime bound" in row["promise"]
        assert store.privacy("m.old") == {}
        [window] = store.windows("m.grr")
        assert window["privacy"] == memoized  # the dashboard reads it with the window
