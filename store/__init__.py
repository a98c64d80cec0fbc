"""The estimate store dashboards query: window estimates and per-window accounting in SQL.

Beam-free: `open_store(url).write_panes(records)` is all a sink needs (docs/store.md). A store
that cannot be opened raises `ldp_telemetry.ldp.base.errors.StoreError`.
"""
from ldp_telemetry.store.sql import EstimateStore, open_store

__all__ = ["EstimateStore", "open_store"]
