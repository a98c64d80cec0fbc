"""The estimate store dashboards query: window estimates and per-window accounting in SQL.

Beam-free: `open_store(url).write_panes(records)` is all a sink needs (docs/store.md).
"""
from ldp_telemetry.store.sql import EstimateStore, StoreError, open_store

__all__ = ["EstimateStore", "StoreError", "open_store"]
